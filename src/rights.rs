//! What each feature beyond the original needs from the API server's authorizer, and which of
//! them are on.
//!
//! The original server runs under the MCO's own ClusterRole (`machine-config-server`: read
//! access to what it serves from, nothing on Nodes, MachineConfigNodes, Leases or Events). Every
//! feature this server adds ([`Feature`]) states the API requests it makes as [`Rule`]s; the
//! cluster source asks the API server whether this identity may make each of them
//! (SelfSubjectAccessReview, `source::cluster::rights`) and every part of the server reads the
//! answers as [`Grants`]: a feature runs only where all of its rules are granted, and a part of
//! the original's job never waits for a feature.
//!
//! A feature that changes what a machine is served ([`Feature::AdvertiseFailureReporting`]) runs
//! only where a flag asks for it as well: without the flag it is not asked about at all
//! ([`FeatureState::NotRequested`]).
//!
//! Owns the features, their rules and the decision from answers to [`FeatureState`]s (pure, no
//! I/O). The rules name objects other modules own (the publisher's Lease, the shared records'
//! ConfigMap): start-up glue builds them from those modules' names ([`Requirements`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// A feature beyond the original, switched on only where its rights are granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Feature {
    /// A layered pool's image is served only once a Node of the pool runs it (else: the
    /// original's gate, the pool's `updatedMachineCount > 0`).
    LayeredNodeGate,
    /// MachineConfigNodes for joining Nodes, with what each was served (and its Lease).
    McnPublisher,
    /// Every replica's served records in one ConfigMap, durable before the answer goes out.
    SharedRecords,
    /// Kubernetes Events about pools and Nodes (written by the Lease holder).
    Events,
    /// `--advertise-failure-reporting`: served configs tell the machine where and how to report a
    /// first-boot failure (the root CA file, and this server's URL read from the cluster's
    /// Infrastructure).
    AdvertiseFailureReporting,
}

impl Feature {
    /// Every feature, in the order they are reported.
    pub const ALL: [Feature; 5] = [
        Feature::LayeredNodeGate,
        Feature::McnPublisher,
        Feature::SharedRecords,
        Feature::Events,
        Feature::AdvertiseFailureReporting,
    ];

    /// The flag that asks for the feature, for one that runs only when asked (`None`: asked for
    /// whenever its rights are granted).
    pub fn flag(self) -> Option<&'static str> {
        match self {
            Feature::AdvertiseFailureReporting => Some("--advertise-failure-reporting"),
            _ => None,
        }
    }

    /// Stable name: the `feature` label of `mcs_feature_enabled`, log field, `/status` key.
    pub fn as_str(self) -> &'static str {
        match self {
            Feature::LayeredNodeGate => "layered-node-gate",
            Feature::McnPublisher => "mcn-publisher",
            Feature::SharedRecords => "shared-records",
            Feature::Events => "events",
            Feature::AdvertiseFailureReporting => "advertise-failure-reporting",
        }
    }

    /// What the feature does, for the one log line that says it is off.
    pub fn describe(self) -> &'static str {
        match self {
            Feature::LayeredNodeGate => "Node-validated layered images",
            Feature::McnPublisher => "MachineConfigNode publishing",
            Feature::SharedRecords => "served records shared between replicas",
            Feature::Events => "Kubernetes Events",
            Feature::AdvertiseFailureReporting => {
                "telling machines where to report first-boot failures"
            }
        }
    }

    /// What runs instead while the feature is off.
    pub fn when_off(self) -> &'static str {
        match self {
            Feature::LayeredNodeGate => {
                "layered pools use the original's gate (the pool's updatedMachineCount > 0)"
            }
            Feature::McnPublisher => "no MachineConfigNode is written",
            Feature::SharedRecords => {
                "answers do not wait for a shared record; only this replica's memory is matched"
            }
            Feature::Events => "no Event is written",
            Feature::AdvertiseFailureReporting => {
                "served configs are the original's: no /etc/machine-config-daemon/mcs-ca-bundle.crt, no machineConfigServerURL annotation"
            }
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One API request a feature makes, as the authorizer sees it (the attributes of a
/// SelfSubjectAccessReview's `resourceAttributes`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Rule {
    pub verb: &'static str,
    /// API group (`""` for core).
    pub group: &'static str,
    /// Plural resource.
    pub resource: &'static str,
    /// `""` for none.
    pub subresource: &'static str,
    /// `""` for cluster-scoped resources (and for "in every namespace").
    pub namespace: String,
    /// `""` for any object (a `create`, a `list` of all).
    pub name: String,
}

impl Rule {
    /// A rule on a cluster-scoped resource (or on a resource in every namespace).
    pub fn cluster(verb: &'static str, group: &'static str, resource: &'static str) -> Rule {
        Rule {
            verb,
            group,
            resource,
            subresource: "",
            namespace: String::new(),
            name: String::new(),
        }
    }

    /// The same rule in one namespace.
    pub fn in_namespace(mut self, namespace: &str) -> Rule {
        self.namespace = namespace.to_owned();
        self
    }

    /// The same rule for one object (what RBAC `resourceNames` are checked against).
    pub fn named(mut self, name: &str) -> Rule {
        self.name = name.to_owned();
        self
    }

    /// The same rule on a subresource.
    pub fn subresource(mut self, subresource: &'static str) -> Rule {
        self.subresource = subresource;
        self
    }
}

impl fmt::Display for Rule {
    /// `list nodes`, `patch machineconfignodes/status (machineconfiguration.openshift.io)`,
    /// `update leases "x" in openshift-machine-config-operator (coordination.k8s.io)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.name.is_empty() {
            write!(f, " {:?}", self.name)?;
        }
        if !self.namespace.is_empty() {
            write!(f, " in {}", self.namespace)?;
        }
        if !self.group.is_empty() {
            write!(f, " ({})", self.group)?;
        }
        Ok(())
    }
}

/// The objects the features' rules name, owned by the modules that use them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    /// Namespace and name of the publisher's Lease (also the Events' leader election).
    pub lease: (String, String),
    /// Namespace and name of the shared served-records ConfigMap.
    pub records: (String, String),
    /// Namespace of the Events about cluster-scoped objects (`default`).
    pub events_namespace: String,
    /// Namespace of the in-cluster image registry's Services and Routes.
    pub registry_namespace: String,
}

impl Names {
    /// The names this server uses in an OpenShift cluster. They are owned by the modules that
    /// use the objects (`mcn::lease`, `mcn::exchange`, `render::layered`); a test holds these
    /// copies equal to them (this layer may not import those).
    pub fn openshift() -> Names {
        Names {
            lease: (
                "openshift-machine-config-operator".into(),
                "machine-config-server-mcn-publisher".into(),
            ),
            records: (
                "openshift-machine-config-operator".into(),
                "machine-config-server-served-records".into(),
            ),
            events_namespace: "default".into(),
            registry_namespace: "openshift-image-registry".into(),
        }
    }
}

const MCO_GROUP: &str = "machineconfiguration.openshift.io";

/// The one rule of [`Feature::AdvertiseFailureReporting`]: reading the Infrastructure `cluster`.
pub fn read_infrastructure() -> Rule {
    use crate::api::infrastructure::{GROUP, NAME};
    Rule::cluster("get", GROUP, "infrastructures").named(NAME)
}

/// Every rule of every feature, and the two reads whose verb decides how the registry's host
/// names are followed (watched when allowed, else listed at an interval).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirements {
    features: BTreeMap<Feature, Vec<Rule>>,
    /// `watch services` in the registry namespace.
    pub watch_services: Rule,
    /// `watch routes` in the registry namespace.
    pub watch_routes: Rule,
}

impl Requirements {
    /// The rules of every feature for objects named by `names`.
    pub fn new(names: &Names) -> Requirements {
        let (lease_ns, lease) = &names.lease;
        let (records_ns, records) = &names.records;
        let read_nodes = [
            Rule::cluster("list", "", "nodes"),
            Rule::cluster("watch", "", "nodes"),
        ];
        let read_mcns = [
            Rule::cluster("list", MCO_GROUP, "machineconfignodes"),
            Rule::cluster("watch", MCO_GROUP, "machineconfignodes"),
        ];
        // Leader election: the publisher and the Events are written by the Lease holder.
        let lease_rules = [
            Rule::cluster("create", "coordination.k8s.io", "leases").in_namespace(lease_ns),
            Rule::cluster("get", "coordination.k8s.io", "leases")
                .in_namespace(lease_ns)
                .named(lease),
            Rule::cluster("update", "coordination.k8s.io", "leases")
                .in_namespace(lease_ns)
                .named(lease),
        ];
        let mut features = BTreeMap::new();
        features.insert(
            Feature::LayeredNodeGate,
            read_nodes.iter().chain(&read_mcns).cloned().collect(),
        );
        let mut publisher: Vec<Rule> = read_nodes.iter().chain(&read_mcns).cloned().collect();
        publisher.extend([
            // A delete is guarded by direct reads of the Node and the MCN.
            Rule::cluster("get", "", "nodes"),
            Rule::cluster("get", MCO_GROUP, "machineconfignodes"),
            // Server-side apply that creates is authorized as patch and as create.
            Rule::cluster("create", MCO_GROUP, "machineconfignodes"),
            Rule::cluster("patch", MCO_GROUP, "machineconfignodes"),
            Rule::cluster("patch", MCO_GROUP, "machineconfignodes").subresource("status"),
            Rule::cluster("delete", MCO_GROUP, "machineconfignodes"),
        ]);
        publisher.extend(lease_rules.iter().cloned());
        features.insert(Feature::McnPublisher, publisher);
        features.insert(
            Feature::SharedRecords,
            vec![
                Rule::cluster("list", "", "configmaps")
                    .in_namespace(records_ns)
                    .named(records),
                Rule::cluster("watch", "", "configmaps")
                    .in_namespace(records_ns)
                    .named(records),
                Rule::cluster("create", "", "configmaps").in_namespace(records_ns),
                Rule::cluster("patch", "", "configmaps")
                    .in_namespace(records_ns)
                    .named(records),
            ],
        );
        let mut events = vec![
            Rule::cluster("create", "events.k8s.io", "events")
                .in_namespace(&names.events_namespace),
            Rule::cluster("patch", "events.k8s.io", "events").in_namespace(&names.events_namespace),
        ];
        events.extend(lease_rules.iter().cloned());
        features.insert(Feature::Events, events);
        Requirements {
            features,
            watch_services: Rule::cluster("watch", "", "services")
                .in_namespace(&names.registry_namespace),
            watch_routes: Rule::cluster("watch", "route.openshift.io", "routes")
                .in_namespace(&names.registry_namespace),
        }
    }

    /// The same requirements, with `--advertise-failure-reporting` asked for.
    pub fn advertising_failure_reporting(mut self) -> Requirements {
        self.features.insert(
            Feature::AdvertiseFailureReporting,
            vec![read_infrastructure()],
        );
        self
    }

    /// Whether `feature` is asked for (a feature with a [`Feature::flag`] only with its flag).
    pub fn requests(&self, feature: Feature) -> bool {
        self.features.contains_key(&feature)
    }

    /// The rules of `feature`.
    pub fn rules(&self, feature: Feature) -> &[Rule] {
        self.features.get(&feature).map_or(&[], Vec::as_slice)
    }

    /// Every distinct rule to ask about, each once.
    pub fn all_rules(&self) -> Vec<Rule> {
        let mut all: Vec<Rule> = self
            .features
            .values()
            .flatten()
            .chain([&self.watch_services, &self.watch_routes])
            .cloned()
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Whether a feature runs, and why not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum FeatureState {
    /// Not asked for: its flag is not given. Off, and not probed.
    NotRequested { flag: &'static str },
    /// Not known yet (no answer from the API server so far): off.
    Unknown,
    /// Every rule granted: on.
    Enabled,
    /// These rules are not granted: off.
    Disabled { missing: Vec<String> },
    /// The authorizer granted every rule, but the API server refused one of the feature's
    /// requests (403): off until the next probe.
    Forbidden { request: String },
}

impl FeatureState {
    pub fn is_enabled(&self) -> bool {
        matches!(self, FeatureState::Enabled)
    }

    /// The reason it is off, in one phrase (`None` when on).
    pub fn why_off(&self) -> Option<String> {
        match self {
            FeatureState::Enabled => None,
            FeatureState::NotRequested { flag } => Some(format!("not asked for ({flag})")),
            FeatureState::Unknown => Some("the API server has not answered yet".to_owned()),
            FeatureState::Disabled { missing } => {
                Some(format!("not granted: {}", missing.join(", ")))
            }
            FeatureState::Forbidden { request } => {
                Some(format!("the API server refused {request} (403)"))
            }
        }
    }
}

/// The authorizer's answers as last probed, and what they switch on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// `None` until the first probe answered.
    answers: Option<BTreeMap<Rule, bool>>,
    /// Features whose requests were refused since the last probe, with the request.
    forbidden: BTreeMap<Feature, String>,
    requirements: Option<Requirements>,
}

impl Grants {
    /// Nothing known yet: every feature off, reads decided as the original's rights allow.
    pub fn unknown(requirements: Requirements) -> Grants {
        Grants {
            answers: None,
            forbidden: BTreeMap::new(),
            requirements: Some(requirements),
        }
    }

    /// Every feature on, without asking (a test driving a component directly, or a caller
    /// that knows its rights).
    pub fn all_granted(requirements: Requirements) -> Grants {
        let answers = requirements
            .all_rules()
            .into_iter()
            .map(|rule| (rule, true))
            .collect();
        Grants {
            answers: Some(answers),
            forbidden: BTreeMap::new(),
            requirements: Some(requirements),
        }
    }

    /// The answers of a probe (a rule missing from `answers` counts as not granted); forgets
    /// earlier refusals.
    pub fn probed(&self, answers: BTreeMap<Rule, bool>) -> Grants {
        Grants {
            answers: Some(answers),
            forbidden: BTreeMap::new(),
            requirements: self.requirements.clone(),
        }
    }

    /// The same grants with `feature` off because the API server refused `request`.
    pub fn refused(&self, feature: Feature, request: impl Into<String>) -> Grants {
        let mut grants = self.clone();
        grants.forbidden.insert(feature, request.into());
        grants
    }

    /// True once a probe has answered.
    pub fn is_known(&self) -> bool {
        self.answers.is_some()
    }

    /// Whether `rule` was granted at the last probe (`false` before the first).
    pub fn allows(&self, rule: &Rule) -> bool {
        self.answers
            .as_ref()
            .and_then(|answers| answers.get(rule))
            .copied()
            .unwrap_or(false)
    }

    /// The state of `feature`.
    pub fn state(&self, feature: Feature) -> FeatureState {
        if let (Some(requirements), Some(flag)) = (&self.requirements, feature.flag()) {
            if !requirements.requests(feature) {
                return FeatureState::NotRequested { flag };
            }
        }
        let (Some(answers), Some(requirements)) = (&self.answers, &self.requirements) else {
            return FeatureState::Unknown;
        };
        let missing: Vec<String> = requirements
            .rules(feature)
            .iter()
            .filter(|rule| !answers.get(*rule).copied().unwrap_or(false))
            .map(Rule::to_string)
            .collect();
        if !missing.is_empty() {
            return FeatureState::Disabled { missing };
        }
        match self.forbidden.get(&feature) {
            Some(request) => FeatureState::Forbidden {
                request: request.clone(),
            },
            None => FeatureState::Enabled,
        }
    }

    pub fn enabled(&self, feature: Feature) -> bool {
        self.state(feature).is_enabled()
    }

    /// Every feature's state, in [`Feature::ALL`] order.
    pub fn states(&self) -> Vec<(Feature, FeatureState)> {
        Feature::ALL.iter().map(|f| (*f, self.state(*f))).collect()
    }

    /// Whether Nodes and MachineConfigNodes are watched: some feature that reads them is on.
    pub fn watch_nodes(&self) -> bool {
        self.enabled(Feature::LayeredNodeGate) || self.enabled(Feature::McnPublisher)
    }

    /// Whether a Lease holder is elected: some feature the holder carries out is on.
    pub fn elect_leader(&self) -> bool {
        self.enabled(Feature::McnPublisher) || self.enabled(Feature::Events)
    }

    /// Whether the registry's Services may be watched (else they are listed at an interval).
    pub fn watch_services(&self) -> bool {
        self.requirements
            .as_ref()
            .is_some_and(|r| self.allows(&r.watch_services))
    }

    /// Whether the registry's Routes may be watched (else they are listed at an interval).
    pub fn watch_routes(&self) -> bool {
        self.requirements
            .as_ref()
            .is_some_and(|r| self.allows(&r.watch_routes))
    }
}

/// What changed between two grants, feature by feature: the lines to log (one per change).
pub fn changes(before: &Grants, after: &Grants) -> Vec<(Feature, FeatureState)> {
    Feature::ALL
        .iter()
        .filter_map(|feature| {
            let (old, new) = (before.state(*feature), after.state(*feature));
            (old != new).then_some((*feature, new))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names {
            lease: ("mco".into(), "the-lease".into()),
            records: ("mco".into(), "the-records".into()),
            events_namespace: "default".into(),
            registry_namespace: "registry".into(),
        }
    }

    /// The MCO's own ClusterRole, as rules this module asks about: reads of configmaps in
    /// every namespace, services and routes get/list only, nothing on nodes, MCNs, leases or
    /// events.
    fn mco_answers(requirements: &Requirements) -> BTreeMap<Rule, bool> {
        requirements
            .all_rules()
            .into_iter()
            .map(|rule| {
                let granted =
                    rule.resource == "configmaps" && matches!(rule.verb, "get" | "list" | "watch");
                (rule, granted)
            })
            .collect()
    }

    #[test]
    fn the_openshift_names_are_those_the_owning_modules_use() {
        let names = Names::openshift();
        assert_eq!(
            names.lease,
            (
                crate::mcn::lease::DEFAULT_NAMESPACE.to_string(),
                crate::mcn::lease::DEFAULT_NAME.to_string()
            )
        );
        assert_eq!(
            names.records,
            (
                crate::mcn::lease::DEFAULT_NAMESPACE.to_string(),
                crate::mcn::exchange::DEFAULT_NAME.to_string()
            )
        );
        assert_eq!(
            names.registry_namespace,
            crate::render::layered::REGISTRY_NAMESPACE
        );
        // kube-runtime's Recorder writes Events about cluster-scoped objects in `default`.
        assert_eq!(names.events_namespace, "default");
    }

    #[test]
    fn nothing_is_on_before_the_first_answer() {
        let requirements = Requirements::new(&names()).advertising_failure_reporting();
        let grants = Grants::unknown(requirements);
        for feature in Feature::ALL {
            assert_eq!(grants.state(feature), FeatureState::Unknown);
        }
        assert!(!grants.watch_nodes() && !grants.elect_leader() && !grants.watch_services());
    }

    #[test]
    fn under_the_mcos_rights_every_extra_is_off_and_names_what_it_misses() {
        let requirements = Requirements::new(&names());
        let grants = Grants::unknown(requirements.clone()).probed(mco_answers(&requirements));
        let FeatureState::Disabled { missing } = grants.state(Feature::LayeredNodeGate) else {
            panic!("node gate on without node rights");
        };
        assert_eq!(
            missing,
            [
                "list nodes",
                "watch nodes",
                "list machineconfignodes (machineconfiguration.openshift.io)",
                "watch machineconfignodes (machineconfiguration.openshift.io)",
            ]
        );
        let FeatureState::Disabled { missing } = grants.state(Feature::SharedRecords) else {
            panic!("shared records on without create");
        };
        assert_eq!(
            missing,
            [
                "create configmaps in mco",
                "patch configmaps \"the-records\" in mco"
            ]
        );
        assert!(!grants.enabled(Feature::McnPublisher) && !grants.enabled(Feature::Events));
        assert!(!grants.watch_nodes() && !grants.elect_leader());
        assert!(!grants.watch_services() && !grants.watch_routes());
    }

    #[test]
    fn a_feature_is_on_exactly_when_all_its_rules_are_granted() {
        let requirements = Requirements::new(&names());
        let mut answers = mco_answers(&requirements);
        for rule in requirements.rules(Feature::Events) {
            answers.insert(rule.clone(), true);
        }
        let grants = Grants::unknown(requirements.clone()).probed(answers.clone());
        assert!(grants.enabled(Feature::Events));
        assert!(grants.elect_leader());
        assert!(!grants.enabled(Feature::McnPublisher));
        // The Lease alone is not the publisher.
        answers.insert(Rule::cluster("list", "", "nodes"), true);
        let grants = grants.probed(answers);
        assert!(!grants.enabled(Feature::LayeredNodeGate));
        assert!(!grants.watch_nodes());
    }

    #[test]
    fn a_refusal_turns_a_feature_off_until_the_next_probe() {
        let requirements = Requirements::new(&names());
        let all = Grants::all_granted(requirements.clone());
        assert!(all.enabled(Feature::McnPublisher));
        let refused = all.refused(Feature::McnPublisher, "create machineconfignodes");
        assert_eq!(
            refused.state(Feature::McnPublisher),
            FeatureState::Forbidden {
                request: "create machineconfignodes".into()
            }
        );
        assert!(refused.enabled(Feature::LayeredNodeGate));
        assert_eq!(
            changes(&all, &refused),
            [(
                Feature::McnPublisher,
                FeatureState::Forbidden {
                    request: "create machineconfignodes".into()
                }
            )]
        );
        let reprobed = refused.probed(
            requirements
                .all_rules()
                .into_iter()
                .map(|r| (r, true))
                .collect(),
        );
        assert!(reprobed.enabled(Feature::McnPublisher));
    }

    #[test]
    fn advertising_failure_reporting_is_off_unless_asked_for_and_then_needs_the_infrastructure() {
        let plain = Requirements::new(&names());
        assert!(!plain.requests(Feature::AdvertiseFailureReporting));
        assert!(!plain.all_rules().contains(&read_infrastructure()));
        for grants in [
            Grants::unknown(plain.clone()),
            Grants::all_granted(plain.clone()),
        ] {
            let state = grants.state(Feature::AdvertiseFailureReporting);
            assert_eq!(
                state,
                FeatureState::NotRequested {
                    flag: "--advertise-failure-reporting"
                }
            );
            assert_eq!(
                state.why_off().as_deref(),
                Some("not asked for (--advertise-failure-reporting)")
            );
        }
        let asked = plain.advertising_failure_reporting();
        assert!(asked.requests(Feature::AdvertiseFailureReporting));
        assert!(asked.all_rules().contains(&read_infrastructure()));
        let grants = Grants::unknown(asked.clone()).probed(mco_answers(&asked));
        assert_eq!(
            grants.state(Feature::AdvertiseFailureReporting),
            FeatureState::Disabled {
                missing: vec!["get infrastructures \"cluster\" (config.openshift.io)".to_string()]
            }
        );
        let mut answers = mco_answers(&asked);
        answers.insert(read_infrastructure(), true);
        let grants = grants.probed(answers);
        assert!(grants.enabled(Feature::AdvertiseFailureReporting));
        // It needs no Lease and watches no Node.
        assert!(!grants.elect_leader() && !grants.watch_nodes());
    }

    #[test]
    fn rules_read_as_the_authorizer_sees_them() {
        let rule = Rule::cluster("update", "coordination.k8s.io", "leases")
            .in_namespace("mco")
            .named("l");
        assert_eq!(
            rule.to_string(),
            "update leases \"l\" in mco (coordination.k8s.io)"
        );
        let status = Rule::cluster("patch", MCO_GROUP, "machineconfignodes").subresource("status");
        assert_eq!(
            status.to_string(),
            "patch machineconfignodes/status (machineconfiguration.openshift.io)"
        );
        // Each rule is asked about once, whatever number of features share it.
        let all = Requirements::new(&names()).all_rules();
        let mut deduped = all.clone();
        deduped.dedup();
        assert_eq!(all, deduped);
    }
}
