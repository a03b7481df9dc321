//! Asking the API server what this identity may do: one SelfSubjectAccessReview per rule of
//! [`Requirements`] (every authenticated identity may create them), at start, every
//! [`RightsSettings::probe_interval`], and soon after a feature's request was refused. The
//! answers are published as [`Grants`] on a `watch` channel that every gated part reads.
//!
//! A request refused with 403 ([`Rights::refused`]) turns its feature off at once and keeps it
//! off until the next regular probe, even when a re-probe finds the rules granted (the
//! authorizer and the request disagree, e.g. a `resourceNames` restriction): so a feature makes
//! at most a few forbidden requests per probe interval, never a retry loop against a 403. Each
//! change of a feature's state is logged once and exported as `mcs_feature_enabled{feature}`.
//!
//! Owns the probe task and the grants channel; the decision from answers to feature states is
//! [`crate::rights`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};

use super::observe::ClusterObserver;
use crate::rights::{changes, Feature, FeatureState, Grants, Requirements, Rule};
use crate::telemetry::ErrorChain;

/// Environment variable (milliseconds) that shortens the probe interval, for tests; start-up
/// glue reads it.
pub const ENV_PROBE_INTERVAL_MS: &str = "MCS_RIGHTS_PROBE_INTERVAL_MS";

/// When the probes run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RightsSettings {
    /// Between two regular probes: rights granted or revoked take effect within this.
    pub probe_interval: Duration,
    /// After a refused request, the re-probe waits at least this long since the last probe.
    pub reprobe_after_refusal: Duration,
    /// After a probe the API server did not answer, the next try.
    pub retry_after_failure: Duration,
}

impl Default for RightsSettings {
    fn default() -> Self {
        RightsSettings {
            probe_interval: Duration::from_secs(300),
            reprobe_after_refusal: Duration::from_secs(30),
            retry_after_failure: Duration::from_secs(10),
        }
    }
}

impl RightsSettings {
    /// The defaults, with the probe interval from [`ENV_PROBE_INTERVAL_MS`] when `lookup` finds
    /// a positive number of milliseconds there (the other intervals shrink with it).
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> RightsSettings {
        let mut settings = RightsSettings::default();
        if let Some(ms) = lookup(ENV_PROBE_INTERVAL_MS)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ms| *ms > 0)
        {
            let interval = Duration::from_millis(ms);
            settings.probe_interval = interval;
            settings.reprobe_after_refusal = settings.reprobe_after_refusal.min(interval);
            settings.retry_after_failure = settings.retry_after_failure.min(interval);
        }
        settings
    }
}

/// The handle every gated part holds: the grants, and where to report a refusal.
#[derive(Clone)]
pub struct Rights {
    grants: watch::Sender<Arc<Grants>>,
    refusal: Arc<Notify>,
    observer: Arc<dyn ClusterObserver>,
}

impl Rights {
    /// Grants that never change: every feature on (`all_granted`) or as given. For callers
    /// without an API server to ask (tests driving a component directly).
    pub fn fixed(grants: Grants, observer: Arc<dyn ClusterObserver>) -> Rights {
        let rights = Rights {
            grants: watch::Sender::new(Arc::new(grants)),
            refusal: Arc::new(Notify::new()),
            observer,
        };
        rights.export(&rights.current());
        rights
    }

    /// The grants as last decided.
    pub fn current(&self) -> Arc<Grants> {
        self.grants.borrow().clone()
    }

    /// Follows the grants.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Grants>> {
        self.grants.subscribe()
    }

    /// The API server answered one of `feature`'s requests (`request`, e.g. `create
    /// machineconfignodes`) with 403: the feature is off until the next regular probe, and a
    /// re-probe is due soon.
    pub fn refused(&self, feature: Feature, request: &str) {
        let before = self.current();
        if !before.enabled(feature) {
            return;
        }
        let after = Arc::new(before.refused(feature, request));
        self.publish(&before, after);
        self.refusal.notify_one();
    }

    fn publish(&self, before: &Grants, after: Arc<Grants>) {
        log_changes(before, &after);
        self.export(&after);
        self.grants.send_replace(after);
    }

    fn export(&self, grants: &Grants) {
        for (feature, state) in grants.states() {
            self.observer
                .feature_enabled(feature.as_str(), state.is_enabled());
        }
    }
}

/// One line per feature whose state changed.
fn log_changes(before: &Grants, after: &Grants) {
    for (feature, state) in changes(before, after) {
        match &state {
            FeatureState::Enabled => {
                info!(
                    feature = feature.as_str(),
                    "feature on: {}",
                    feature.describe()
                )
            }
            FeatureState::Unknown | FeatureState::NotRequested { .. } => {}
            FeatureState::Disabled { missing } => info!(
                feature = feature.as_str(),
                missing = %missing.join(", "),
                "feature off: {} needs rights this identity lacks ({}); {}",
                feature.describe(),
                missing.join(", "),
                feature.when_off()
            ),
            // Said as the feature's line once the rights are asked again: off for want of a
            // rule (the usual end of a revocation), or still granted ([`log_mismatch`]).
            FeatureState::Forbidden { request } => warn!(
                feature = feature.as_str(),
                request = %request,
                "the API server refused {request} (403): {} pauses, and the rights are asked again",
                feature.describe()
            ),
        }
    }
}

/// After a re-probe: a refused feature whose rules the authorizer still grants stays off until
/// the next regular probe (a request and the authorizer disagree, e.g. `resourceNames`).
fn log_mismatch(grants: &Grants, requirements: &Requirements) {
    for feature in Feature::ALL {
        if let FeatureState::Forbidden { request } = grants.state(feature) {
            let granted = requirements
                .rules(feature)
                .iter()
                .all(|rule| grants.allows(rule));
            if granted {
                warn!(
                    feature = feature.as_str(),
                    request = %request,
                    "feature off until the next rights probe: the authorizer grants every rule, but the API server refused {request} (403); {}",
                    feature.when_off()
                );
            }
        }
    }
}

/// Starts the probe task; its first probe runs at once. Every feature is off until it answers.
pub fn start(
    client: Client,
    requirements: Requirements,
    settings: RightsSettings,
    observer: Arc<dyn ClusterObserver>,
    shutdown: watch::Receiver<bool>,
) -> (Rights, JoinHandle<()>) {
    let rights = Rights {
        grants: watch::Sender::new(Arc::new(Grants::unknown(requirements.clone()))),
        refusal: Arc::new(Notify::new()),
        observer,
    };
    rights.export(&rights.current());
    let task = tokio::spawn(run(
        client,
        requirements,
        settings,
        rights.clone(),
        shutdown,
    ));
    (rights, task)
}

/// Why a probe gave no answers.
#[derive(Debug, thiserror::Error)]
#[error("SelfSubjectAccessReview for {rule}: {source}")]
struct ProbeError {
    rule: Rule,
    #[source]
    source: kube::Error,
}

async fn run(
    client: Client,
    requirements: Requirements,
    settings: RightsSettings,
    rights: Rights,
    mut shutdown: watch::Receiver<bool>,
) {
    let api: Api<SelfSubjectAccessReview> = Api::all(client);
    let rules = requirements.all_rules();
    let mut next_regular = Instant::now();
    let mut logged_failure = false;
    loop {
        // A regular probe forgets refusals; one after a refusal keeps them (see module docs).
        let regular = Instant::now() >= next_regular;
        let last_probe = Instant::now();
        match probe(&api, &rules).await {
            Ok(answers) => {
                if logged_failure {
                    info!("rights probe answered again");
                    logged_failure = false;
                }
                let before = rights.current();
                let mut after = before.probed(answers);
                if !regular {
                    for feature in Feature::ALL {
                        if let FeatureState::Forbidden { request } = before.state(feature) {
                            after = after.refused(feature, request);
                        }
                    }
                } else {
                    next_regular = Instant::now() + settings.probe_interval;
                }
                if !regular {
                    log_mismatch(&after, &requirements);
                }
                if *before != after {
                    rights.publish(&before, Arc::new(after));
                }
            }
            Err(error) => {
                if !logged_failure {
                    warn!(error = %ErrorChain(&error), "cannot ask the API server which rights this identity has; features keep their last state and the probe is retried");
                    logged_failure = true;
                }
                next_regular = next_regular.min(Instant::now() + settings.retry_after_failure);
            }
        }
        let refusal = rights.refusal.clone();
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep_until(next_regular) => {}
            _ = refusal.notified() => {
                let earliest = last_probe + settings.reprobe_after_refusal;
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep_until(earliest.min(next_regular)) => {}
                }
            }
        }
        if *shutdown.borrow() {
            return;
        }
    }
}

/// Asks about every rule at once; any transport or API failure fails the whole probe (a
/// partial answer would switch features on and off by chance).
async fn probe(
    api: &Api<SelfSubjectAccessReview>,
    rules: &[Rule],
) -> Result<BTreeMap<Rule, bool>, ProbeError> {
    let asks = rules.iter().map(|rule| async move {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(attributes(rule)),
                non_resource_attributes: None,
            },
            ..SelfSubjectAccessReview::default()
        };
        match api.create(&PostParams::default(), &review).await {
            Ok(answer) => Ok((rule.clone(), answer.status.is_some_and(|s| s.allowed))),
            // An identity that may not even ask (no `system:basic-user`) has none of the rights.
            Err(kube::Error::Api(status)) if status.code == 403 => Ok((rule.clone(), false)),
            Err(source) => Err(ProbeError {
                rule: rule.clone(),
                source,
            }),
        }
    });
    futures::future::join_all(asks).await.into_iter().collect()
}

/// The review's attributes of `rule` (empty strings leave a field out, as kubectl does).
fn attributes(rule: &Rule) -> ResourceAttributes {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    ResourceAttributes {
        verb: Some(rule.verb.to_owned()),
        group: Some(rule.group.to_owned()),
        resource: Some(rule.resource.to_owned()),
        subresource: some(rule.subresource),
        namespace: some(&rule.namespace),
        name: some(&rule.name),
        ..ResourceAttributes::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_interval_follows_the_environment() {
        let settings =
            RightsSettings::from_env(|k| (k == ENV_PROBE_INTERVAL_MS).then(|| "2000".to_string()));
        assert_eq!(settings.probe_interval, Duration::from_secs(2));
        assert_eq!(settings.reprobe_after_refusal, Duration::from_secs(2));
        assert_eq!(settings.retry_after_failure, Duration::from_secs(2));
        let default = RightsSettings::from_env(|_| Some("soon".into()));
        assert_eq!(default, RightsSettings::default());
    }

    #[test]
    fn review_attributes_leave_empty_fields_out() {
        let rule = Rule::cluster(
            "patch",
            "machineconfiguration.openshift.io",
            "machineconfignodes",
        )
        .subresource("status");
        let attributes = attributes(&rule);
        assert_eq!(attributes.verb.as_deref(), Some("patch"));
        assert_eq!(attributes.subresource.as_deref(), Some("status"));
        assert_eq!(attributes.namespace, None);
        assert_eq!(attributes.name, None);
        let core = attributes_of_core();
        assert_eq!(core.group.as_deref(), Some(""));
    }

    fn attributes_of_core() -> ResourceAttributes {
        attributes(&Rule::cluster("list", "", "nodes"))
    }
}
