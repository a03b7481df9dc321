//! Leader election on a `coordination.k8s.io/v1` Lease, so that of the replicas that run at once
//! (one per control-plane node) exactly one publishes MachineConfigNodes. kube 5 ships no leader
//! election, so this is a small one in the style of client-go's:
//!
//! - A candidate reads the Lease. It takes it when it does not exist (create; `409` means another
//!   candidate won), when it has no holder, or when the holder's record has not changed for the
//!   lease duration as measured on the candidate's own clock since it first saw that record
//!   (clock skew between nodes does not matter). Takes and renewals are replaces carrying the
//!   `resourceVersion` that was read, so two candidates never both win (`409` for the loser).
//! - The leader renews every `renew_period`. If it has not renewed successfully for
//!   `renew_deadline` (shorter than the lease duration) it stops leading at once, before any
//!   other candidate can consider the lease expired; an API call that hangs is cut off at that
//!   deadline too.
//! - On shutdown the leader releases the lease (empty holder), so another replica takes over
//!   after one retry period instead of a whole lease duration.
//! - A replica that comes back after it was killed (an OOM kill, a crash: no release) finds the
//!   Lease held by its previous process: the same host (pod) name, another process id. When
//!   that process no longer runs on this host, the record is the replica's own and dead, and
//!   it takes the Lease at once instead of waiting for it to expire ([`own_predecessor`]).
//!   In a container the previous process's id is not visible (another PID namespace) or is the
//!   same (then the identity is the same and it simply renews); a live process with that id
//!   (two replicas on one host under one host name, as in tests) is never taken from.
//!
//! Leadership is published on a `watch` channel of `bool`; the publisher writes only while it
//! reads `true`. Owns the Lease object only; must not touch anything else in the cluster.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::Api;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::rights::Feature;
#[cfg(doc)]
use crate::rights::Grants;
use crate::source::cluster::rights::Rights;

/// Namespace of the Lease.
pub const DEFAULT_NAMESPACE: &str = "openshift-machine-config-operator";
/// Name of the Lease.
pub const DEFAULT_NAME: &str = "machine-config-server-mcn-publisher";

/// Timing and identity of one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// Unique per process: host (pod) name and process id.
    pub identity: String,
    /// How long a holder's record stays valid without renewal (written to the Lease, whole
    /// seconds, at least 1).
    pub lease_duration: Duration,
    /// How often the leader renews.
    pub renew_period: Duration,
    /// The leader stops leading when it has not renewed for this long (< `lease_duration`).
    pub renew_deadline: Duration,
    /// How often a follower tries to take the lease.
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// The defaults: 15 s lease, renew every 5 s, step down after 10 s without renewal, followers
    /// retry every 2 s.
    pub fn new(identity: impl Into<String>) -> Self {
        LeaseSettings {
            namespace: DEFAULT_NAMESPACE.to_owned(),
            name: DEFAULT_NAME.to_owned(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_period: Duration::from_secs(5),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// `leaseDurationSeconds`: whole seconds, rounded up, at least 1.
    pub fn lease_duration_seconds(&self) -> i32 {
        let millis = self.lease_duration.as_millis().max(1);
        i32::try_from(millis.div_ceil(1000)).unwrap_or(i32::MAX)
    }
}

/// A failed Lease read or write.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("lease {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("lease {0}: no answer within the renew deadline")]
    Timeout(String),
}

impl LeaseError {
    /// Short, stable name used as a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Api { .. } => "api",
            Self::Timeout(_) => "timeout",
        }
    }

    /// True when the API server refused the request (403).
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::Api { source: kube::Error::Api(status), .. } if status.code == 403)
    }
}

/// The outcome of one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the lease (acquired or renewed).
    Leading,
    /// Someone else holds it (or won the race); their identity when known.
    Following(String),
}

/// What to do with the Lease as read (pure, see [`decide`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// It does not exist: create it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Free or expired: take it over.
    Take,
    /// Held by another candidate whose record is still fresh.
    Wait(String),
}

/// The step for a Lease `spec` (`None`: no Lease) read by `identity`; `expired` says whether the
/// holder's record has gone unchanged for its lease duration on our clock.
pub fn decide(spec: Option<&LeaseSpec>, identity: &str, expired: bool) -> Step {
    let Some(spec) = spec else {
        return Step::Create;
    };
    match spec.holder_identity.as_deref().unwrap_or_default() {
        holder if holder == identity => Step::Renew,
        "" => Step::Take,
        _ if expired => Step::Take,
        holder => Step::Wait(holder.to_owned()),
    }
}

/// The holder record as last seen and when we first saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Observed {
    record: (Option<String>, Option<String>, Option<i32>),
    since: Instant,
}

/// The process id of `holder` when it is another process of the replica named `identity`
/// (identities are `<host>_<pid>`, [`super::identity`]): the same host, another id.
pub fn own_predecessor(holder: &str, identity: &str) -> Option<u32> {
    let (holder_host, holder_pid) = holder.rsplit_once('_')?;
    let (host, pid) = identity.rsplit_once('_')?;
    (holder_host == host && holder_pid != pid)
        .then(|| holder_pid.parse().ok())
        .flatten()
}

/// Whether a process with this id runs on this host (as this process sees it).
fn process_runs(pid: u32) -> bool {
    std::path::Path::new("/proc").join(pid.to_string()).exists()
}

/// One candidate for the lease.
pub struct Elector {
    api: Api<Lease>,
    settings: LeaseSettings,
    observed: Option<Observed>,
}

impl Elector {
    pub fn new(client: kube::Client, settings: LeaseSettings) -> Self {
        Elector {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: None,
        }
    }

    pub fn settings(&self) -> &LeaseSettings {
        &self.settings
    }

    /// Reads the Lease and creates, renews or takes it when the rules allow.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, LeaseError> {
        let current = self
            .api
            .get_opt(&self.settings.name)
            .await
            .map_err(|e| self.api_error(e))?;
        let now = Instant::now();
        let expired = current
            .as_ref()
            .map(|lease| self.observe(lease.spec.as_ref(), now))
            .unwrap_or(true);
        let holder = current
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.as_deref());
        let predecessor_gone = holder
            .and_then(|h| own_predecessor(h, &self.settings.identity))
            .is_some_and(|pid| !process_runs(pid));
        if predecessor_gone && !expired {
            info!(holder = holder.unwrap_or_default(), "the lease is held by this replica's previous process, which no longer runs; taking it over");
        }
        let expired = expired || predecessor_gone;
        let step = decide(
            current.as_ref().and_then(|l| l.spec.as_ref()),
            &self.settings.identity,
            expired,
        );
        let time = MicroTime(Timestamp::now());
        match (step, current) {
            (Step::Wait(holder), _) => Ok(Attempt::Following(holder)),
            (Step::Create, _) | (_, None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.settings.name.clone()),
                        namespace: Some(self.settings.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.settings.identity.clone()),
                        lease_duration_seconds: Some(self.settings.lease_duration_seconds()),
                        acquire_time: Some(time.clone()),
                        renew_time: Some(time),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                self.write(self.api.create(&PostParams::default(), &lease).await)
            }
            (Step::Renew, Some(mut lease)) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.renew_time = Some(time);
                spec.lease_duration_seconds = Some(self.settings.lease_duration_seconds());
                self.write(self.replace(&lease).await)
            }
            (Step::Take, Some(mut lease)) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                let had_holder = spec
                    .holder_identity
                    .as_deref()
                    .is_some_and(|h| !h.is_empty());
                spec.holder_identity = Some(self.settings.identity.clone());
                spec.lease_duration_seconds = Some(self.settings.lease_duration_seconds());
                spec.acquire_time = Some(time.clone());
                spec.renew_time = Some(time);
                if had_holder || spec.lease_transitions.is_some() {
                    spec.lease_transitions =
                        Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
                }
                self.write(self.replace(&lease).await)
            }
        }
    }

    /// Gives the lease up if we hold it: empty holder, so the next candidate takes it at once.
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.settings.name)
            .await
            .map_err(|e| self.api_error(e))?
        else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        spec.lease_duration_seconds = Some(1);
        self.replace(&lease)
            .await
            .map(|_| ())
            .map_err(|e| self.api_error(e))
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api
            .replace(&self.settings.name, &PostParams::default(), lease)
            .await
    }

    /// Conflicts mean another candidate wrote first: we follow.
    fn write(&mut self, result: Result<Lease, kube::Error>) -> Result<Attempt, LeaseError> {
        match result {
            Ok(lease) => {
                self.observe(lease.spec.as_ref(), Instant::now());
                Ok(Attempt::Leading)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                Ok(Attempt::Following(String::new()))
            }
            Err(e) => Err(self.api_error(e)),
        }
    }

    /// Remembers the holder record; true when it has not changed for its lease duration.
    fn observe(&mut self, spec: Option<&LeaseSpec>, now: Instant) -> bool {
        let record = (
            spec.and_then(|s| s.holder_identity.clone()),
            spec.and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0.to_string()),
            spec.and_then(|s| s.lease_duration_seconds),
        );
        let since = match &self.observed {
            Some(observed) if observed.record == record => observed.since,
            _ => now,
        };
        let duration = record
            .2
            .and_then(|secs| u64::try_from(secs).ok())
            .map(Duration::from_secs)
            .unwrap_or(self.settings.lease_duration);
        self.observed = Some(Observed { record, since });
        now.duration_since(since) >= duration
    }

    fn api_error(&self, source: kube::Error) -> LeaseError {
        LeaseError::Api {
            namespace: self.settings.namespace.clone(),
            name: self.settings.name.clone(),
            source,
        }
    }
}

/// The features the Lease holder carries out: a refused Lease request turns them off.
const LEADER_FEATURES: [Feature; 2] = [Feature::McnPublisher, Feature::Events];

/// Campaigns for the lease until `shutdown` turns true, publishing leadership on `leading`,
/// while some feature the holder carries out is on ([`Grants::elect_leader`]); when none is,
/// it stands down (releasing the lease) and waits. A refused request (403) is reported to
/// `rights`, not retried. Releases the lease on the way out when it holds it.
pub async fn run(
    mut elector: Elector,
    leading: watch::Sender<bool>,
    rights: Rights,
    mut shutdown: watch::Receiver<bool>,
) {
    let settings = elector.settings().clone();
    let lease = format!("{}/{}", settings.namespace, settings.name);
    let mut last_renewal: Option<Instant> = None;
    let mut last_holder: Option<String> = None;
    let mut failing = false;
    let mut grants = rights.subscribe();
    loop {
        if *shutdown.borrow() {
            break;
        }
        if !grants.borrow_and_update().elect_leader() {
            if *leading.borrow() {
                leading.send_replace(false);
                release(&mut elector, &lease, settings.renew_period).await;
            }
            last_renewal = None;
            tokio::select! {
                _ = grants.changed() => continue,
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        let is_leading = *leading.borrow();
        // While leading, no attempt may outlive the renew deadline.
        let deadline = last_renewal
            .filter(|_| is_leading)
            .map(|t| t + settings.renew_deadline);
        let budget = match deadline {
            Some(deadline) => deadline.saturating_duration_since(Instant::now()),
            None => settings.renew_deadline,
        };
        let attempt = match tokio::time::timeout(budget, elector.try_acquire_or_renew()).await {
            Ok(result) => result,
            Err(_) => Err(LeaseError::Timeout(lease.clone())),
        };
        match attempt {
            Ok(Attempt::Leading) => {
                last_renewal = Some(Instant::now());
                failing = false;
                if !is_leading {
                    info!(%lease, identity = %settings.identity, "acquired the lease; publishing MachineConfigNodes");
                    leading.send_replace(true);
                }
            }
            Ok(Attempt::Following(holder)) => {
                failing = false;
                if is_leading {
                    warn!(%lease, holder = %holder, "lease taken by another replica; stopped publishing");
                    leading.send_replace(false);
                } else if last_holder.as_deref() != Some(holder.as_str()) && !holder.is_empty() {
                    info!(%lease, holder = %holder, "another replica holds the lease; standing by");
                }
                if !holder.is_empty() {
                    last_holder = Some(holder);
                }
            }
            Err(error) if error.is_forbidden() => {
                if is_leading {
                    leading.send_replace(false);
                }
                for feature in LEADER_FEATURES {
                    rights.refused(feature, &format!("get, create or update lease {lease}"));
                }
                failing = true;
            }
            Err(error) => {
                let past_deadline = deadline.is_some_and(|d| Instant::now() >= d);
                if is_leading && past_deadline {
                    warn!(%lease, error = %crate::telemetry::ErrorChain(&error), "could not renew the lease in time; stopped publishing");
                    leading.send_replace(false);
                } else if !failing {
                    warn!(%lease, error = %crate::telemetry::ErrorChain(&error), "lease request failed; retrying");
                } else {
                    debug!(%lease, error = %crate::telemetry::ErrorChain(&error), "lease request failed again");
                }
                failing = true;
            }
        }
        let is_leading = *leading.borrow();
        let mut wait = if is_leading {
            settings.renew_period
        } else {
            settings.retry_period
        };
        if let Some(deadline) = last_renewal
            .filter(|_| is_leading)
            .map(|t| t + settings.renew_deadline)
        {
            wait = wait.min(deadline.saturating_duration_since(Instant::now()));
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = grants.changed() => {}
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
    }
    if *leading.borrow() {
        leading.send_replace(false);
        release(&mut elector, &lease, settings.renew_period).await;
    }
}

/// Gives the lease up, within `within`; a lease that cannot be released expires on its own.
async fn release(elector: &mut Elector, lease: &str, within: Duration) {
    match tokio::time::timeout(within, elector.release()).await {
        Ok(Ok(())) => info!(%lease, "released the lease"),
        Ok(Err(error)) => {
            warn!(%lease, error = %crate::telemetry::ErrorChain(&error), "could not release the lease; it expires on its own")
        }
        Err(_) => warn!(%lease, "could not release the lease in time; it expires on its own"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decide_covers_every_case() {
        assert_eq!(decide(None, "me", false), Step::Create);
        assert_eq!(decide(Some(&spec(Some("me"))), "me", false), Step::Renew);
        assert_eq!(decide(Some(&spec(Some("me"))), "me", true), Step::Renew);
        assert_eq!(decide(Some(&spec(None)), "me", false), Step::Take);
        assert_eq!(decide(Some(&spec(Some(""))), "me", false), Step::Take);
        assert_eq!(
            decide(Some(&spec(Some("other"))), "me", false),
            Step::Wait("other".into())
        );
        assert_eq!(decide(Some(&spec(Some("other"))), "me", true), Step::Take);
    }

    #[test]
    fn a_previous_process_of_the_same_replica_is_told_apart() {
        assert_eq!(own_predecessor("master-0_41", "master-0_77"), Some(41));
        assert_eq!(own_predecessor("master-0_77", "master-0_77"), None);
        assert_eq!(own_predecessor("master-1_41", "master-0_77"), None);
        assert_eq!(own_predecessor("a_b_41", "a_b_77"), Some(41));
        assert_eq!(own_predecessor("master-0_x", "master-0_77"), None);
        assert_eq!(own_predecessor("master-0", "master-0_77"), None);
        // This process runs; a process id beyond the kernel's limit never does.
        assert!(process_runs(std::process::id()));
        assert!(!process_runs(u32::MAX));
    }

    #[test]
    fn lease_duration_is_whole_seconds_rounded_up() {
        let mut settings = LeaseSettings::new("me");
        assert_eq!(settings.lease_duration_seconds(), 15);
        settings.lease_duration = Duration::from_millis(1500);
        assert_eq!(settings.lease_duration_seconds(), 2);
        settings.lease_duration = Duration::ZERO;
        assert_eq!(settings.lease_duration_seconds(), 1);
    }

    #[test]
    fn defaults_step_down_before_the_lease_expires() {
        let settings = LeaseSettings::new("me");
        assert!(settings.renew_period < settings.renew_deadline);
        assert!(settings.renew_deadline < settings.lease_duration);
    }
}
