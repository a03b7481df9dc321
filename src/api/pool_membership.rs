//! Which Nodes belong to a MachineConfigPool: the pool's `spec.nodeSelector` label selector and
//! the MCO's primary-pool rule for nodes that several pools select.
//!
//! Pure functions over labels; no I/O. Semantics follow Kubernetes `metav1.LabelSelector` and
//! the MCO's `GetPoolsForNode`:
//! - `matchLabels` and every `matchExpressions` entry must all hold (`In`, `NotIn`, `Exists`,
//!   `DoesNotExist`).
//! - An absent, null or empty selector selects **no** node (the MCO treats a pool with such a
//!   selector as matching nothing rather than everything).
//! - An invalid selector (unknown operator, `In`/`NotIn` without values, `Exists`/`DoesNotExist`
//!   with values, or JSON that is not a label selector) selects no node: for the layered decision
//!   that means "no node can validate", which errs towards the base image.
//! - Windows nodes (`kubernetes.io/os=windows`) belong to no pool.
//! - Primary pool of a node selected by several pools: exactly one custom pool wins over
//!   `worker`, but `master` wins over a custom pool; with more than one custom pool the node
//!   belongs to none (the MCO refuses such a node).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize as _;

use crate::api::MachineConfigPool;

const MASTER_POOL: &str = "master";
const WORKER_POOL: &str = "worker";
const OS_LABEL: &str = "kubernetes.io/os";

/// A parsed, validated label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(key, value) => labels.get(key) == Some(value),
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
        }
    }
}

impl Selector {
    /// Parses a pool's `spec.nodeSelector`. `None` when it selects nothing: absent, null, empty
    /// or invalid (see the module docs).
    pub fn from_node_selector(value: Option<&serde_json::Value>) -> Option<Selector> {
        let value = value?;
        if value.is_null() {
            return None;
        }
        let selector = LabelSelector::deserialize(value).ok()?;
        Selector::from_label_selector(&selector)
    }

    /// Validates a typed label selector. `None` when it is empty or invalid.
    pub fn from_label_selector(selector: &LabelSelector) -> Option<Selector> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement::Equals(key.clone(), value.clone()));
        }
        for expression in selector.match_expressions.iter().flatten() {
            let key = expression.key.clone();
            let values = expression.values.clone().unwrap_or_default();
            let requirement = match expression.operator.as_str() {
                "In" if !values.is_empty() => Requirement::In(key, values),
                "NotIn" if !values.is_empty() => Requirement::NotIn(key, values),
                "Exists" if values.is_empty() => Requirement::Exists(key),
                "DoesNotExist" if values.is_empty() => Requirement::DoesNotExist(key),
                _ => return None,
            };
            requirements.push(requirement);
        }
        if requirements.is_empty() {
            return None;
        }
        Some(Selector { requirements })
    }

    /// Whether a node with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// A pool's name with its parsed node selector, prepared once per decision.
#[derive(Clone, Debug)]
pub struct PoolSelector {
    pub name: String,
    pub selector: Option<Selector>,
}

impl PoolSelector {
    pub fn of(pool: &MachineConfigPool) -> PoolSelector {
        PoolSelector {
            name: pool.metadata.name.clone().unwrap_or_default(),
            selector: Selector::from_node_selector(pool.spec.node_selector.as_ref()),
        }
    }

    fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// The primary pool of a node with these labels among `pools`, by the MCO's rule (module docs).
pub fn primary_pool<'a>(
    labels: &BTreeMap<String, String>,
    pools: &'a [PoolSelector],
) -> Option<&'a str> {
    if labels.get(OS_LABEL).map(String::as_str) == Some("windows") {
        return None;
    }
    let mut master = None;
    let mut worker = None;
    let mut custom = Vec::new();
    for pool in pools.iter().filter(|p| p.selects(labels)) {
        match pool.name.as_str() {
            MASTER_POOL => master = Some(pool.name.as_str()),
            WORKER_POOL => worker = Some(pool.name.as_str()),
            other => custom.push(other),
        }
    }
    match custom.as_slice() {
        [_, _, ..] => None,
        [only] => Some(master.unwrap_or(only)),
        [] => master.or(worker),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(value: serde_json::Value) -> Option<Selector> {
        Selector::from_node_selector(Some(&value))
    }

    #[test]
    fn absent_null_and_empty_selectors_select_nothing() {
        assert_eq!(Selector::from_node_selector(None), None);
        assert_eq!(sel(json!(null)), None);
        assert_eq!(sel(json!({})), None);
        assert_eq!(
            sel(json!({"matchLabels": {}, "matchExpressions": []})),
            None
        );
    }

    #[test]
    fn match_labels_need_every_pair() {
        let s = sel(json!({"matchLabels": {"a": "1", "b": ""}})).unwrap();
        assert!(s.matches(&labels(&[("a", "1"), ("b", ""), ("c", "x")])));
        assert!(!s.matches(&labels(&[("a", "1")])));
        assert!(!s.matches(&labels(&[("a", "2"), ("b", "")])));
    }

    #[test]
    fn match_expressions_operators() {
        let in_ = sel(
            json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}),
        )
        .unwrap();
        assert!(in_.matches(&labels(&[("zone", "b")])));
        assert!(!in_.matches(&labels(&[("zone", "c")])));
        assert!(!in_.matches(&labels(&[])));

        let not_in = sel(
            json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
        )
        .unwrap();
        assert!(not_in.matches(&labels(&[("zone", "b")])));
        assert!(
            not_in.matches(&labels(&[])),
            "NotIn holds when the label is absent"
        );
        assert!(!not_in.matches(&labels(&[("zone", "a")])));

        let exists =
            sel(json!({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]})).unwrap();
        assert!(exists.matches(&labels(&[("gpu", "")])));
        assert!(!exists.matches(&labels(&[])));

        let absent =
            sel(json!({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]})).unwrap();
        assert!(absent.matches(&labels(&[])));
        assert!(!absent.matches(&labels(&[("gpu", "x")])));
    }

    #[test]
    fn labels_and_expressions_combine_with_and() {
        let s = sel(json!({
            "matchLabels": {"node-role.kubernetes.io/worker": ""},
            "matchExpressions": [{"key": "node-role.kubernetes.io/infra", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert!(s.matches(&labels(&[("node-role.kubernetes.io/worker", "")])));
        assert!(!s.matches(&labels(&[
            ("node-role.kubernetes.io/worker", ""),
            ("node-role.kubernetes.io/infra", "")
        ])));
    }

    #[test]
    fn invalid_selectors_select_nothing() {
        assert_eq!(
            sel(json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})),
            None
        );
        assert_eq!(
            sel(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
            None
        );
        assert_eq!(
            sel(json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})),
            None
        );
        assert_eq!(
            sel(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})),
            None
        );
        assert_eq!(sel(json!({"matchLabels": "not-a-map"})), None);
        assert_eq!(sel(json!("worker")), None);
    }

    fn pool(name: &str, role: &str) -> PoolSelector {
        PoolSelector {
            name: name.to_string(),
            selector: sel(json!({"matchLabels": {format!("node-role.kubernetes.io/{role}"): ""}})),
        }
    }

    #[test]
    fn primary_pool_rule() {
        let pools = vec![
            pool("master", "master"),
            pool("worker", "worker"),
            pool("infra", "infra"),
            pool("gpu", "gpu"),
        ];
        let role = |r: &str| (format!("node-role.kubernetes.io/{r}"), String::new());
        let node = |roles: &[&str]| roles.iter().map(|r| role(r)).collect::<BTreeMap<_, _>>();

        assert_eq!(primary_pool(&node(&["worker"]), &pools), Some("worker"));
        assert_eq!(
            primary_pool(&node(&["worker", "infra"]), &pools),
            Some("infra")
        );
        assert_eq!(
            primary_pool(&node(&["master", "worker"]), &pools),
            Some("master")
        );
        assert_eq!(
            primary_pool(&node(&["master", "infra"]), &pools),
            Some("master")
        );
        assert_eq!(primary_pool(&node(&["infra"]), &pools), Some("infra"));
        assert_eq!(
            primary_pool(&node(&["worker", "infra", "gpu"]), &pools),
            None
        );
        assert_eq!(primary_pool(&node(&["other"]), &pools), None);

        let mut windows = node(&["worker"]);
        windows.insert("kubernetes.io/os".into(), "windows".into());
        assert_eq!(primary_pool(&windows, &pools), None);
    }
}
