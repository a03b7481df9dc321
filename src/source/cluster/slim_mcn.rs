//! What the MachineConfigNode cache keeps of each object.
//!
//! A cluster has one MachineConfigNode per Node, and the daemon reports about fourteen
//! conditions in each (a reason, a human-readable message and a time apiece), plus other status
//! the server never reads. Kept whole, 5000 of them were most of a 5000-Node cluster's MCN
//! memory. The server reads, of an MCN's status (see
//! [`machine_config_node_render_digest`](crate::render::layered::machine_config_node_render_digest),
//! the layered-image decision and the MachineConfigNode publisher's plan):
//! - `configVersion` and `configImage`, kept as they are;
//! - whether `NodeDegraded` is `True`: that condition is kept, with its type and status only;
//! - whether a status was reported at all (some condition, or a config version): an MCN whose
//!   conditions do not include `NodeDegraded` keeps its first condition, type and status only, so
//!   that it still reads as reported.
//!
//! Everything else under `status` (other conditions, reasons, messages, times, fields our types
//! do not model) is dropped; metadata (minus `managedFields`, see [`super::lenient`]) and spec
//! are kept whole, since the publisher writes them back.
//!
//! Owns that choice only; it is applied by the MCN watch to every object before it is cached.

use crate::api::imagebuild::Condition;
use crate::api::machineconfignode::{MachineConfigNode, CONDITION_NODE_DEGRADED};

/// Drops what the server never reads from `mcn`'s status (module docs).
pub fn keep_what_is_read(mcn: &mut MachineConfigNode) {
    let Some(status) = mcn.status.as_mut() else {
        return;
    };
    status.rest.clear();
    let kept = status
        .conditions
        .iter()
        .position(|c| c.type_ == CONDITION_NODE_DEGRADED)
        .or((!status.conditions.is_empty()).then_some(0));
    let conditions = std::mem::take(&mut status.conditions);
    status.conditions = kept
        .and_then(|index| conditions.into_iter().nth(index))
        .map(|condition| Condition {
            type_: condition.type_,
            status: condition.status,
            ..Condition::default()
        })
        .into_iter()
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::layered::machine_config_node_render_digest;

    fn mcn(status: serde_json::Value) -> MachineConfigNode {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
            "metadata": {"name": "w1", "annotations": {"a": "b"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "w1", "uid": "u"}]},
            "spec": {"node": {"name": "w1"}, "pool": {"name": "worker"},
                     "configVersion": {"desired": "rendered-worker-1"}},
            "status": status
        }))
        .expect("an MCN")
    }

    fn condition(type_: &str, status: &str) -> serde_json::Value {
        serde_json::json!({"type": type_, "status": status, "reason": "R",
                           "message": format!("{type_} is {status}, a long message"),
                           "lastTransitionTime": "2026-11-01T00:00:00Z", "observedGeneration": 2})
    }

    #[test]
    fn only_node_degraded_is_kept_with_type_and_status() {
        let mut degraded = mcn(serde_json::json!({
            "conditions": [condition("Updated", "True"), condition("NodeDegraded", "True"),
                           condition("Drained", "False")],
            "configVersion": {"current": "rendered-worker-0", "desired": "rendered-worker-1"},
            "configImage": {"currentImage": "quay.io/x@sha256:01"},
            "observedGeneration": 3,
            "pinnedImageSets": [{"name": "p", "currentGeneration": 1}]
        }));
        let digest_before = machine_config_node_render_digest(&degraded);
        let spec_before = degraded.spec.clone();
        let metadata_before = degraded.metadata.clone();
        keep_what_is_read(&mut degraded);
        let status = degraded.status.as_ref().expect("status kept");
        assert_eq!(
            serde_json::to_value(&status.conditions).expect("serializes"),
            serde_json::json!([{"type": "NodeDegraded", "status": "True", "reason": "",
                                "message": "", "lastTransitionTime": ""}])
        );
        assert!(status.rest.is_empty(), "pinnedImageSets is not read");
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(
            status.config_version.as_ref().map(|v| v.current.as_str()),
            Some("rendered-worker-0")
        );
        assert_eq!(machine_config_node_render_digest(&degraded), digest_before);
        assert_eq!(degraded.spec, spec_before);
        assert_eq!(degraded.metadata, metadata_before);
    }

    #[test]
    fn a_reported_status_without_node_degraded_still_reads_as_reported() {
        let mut reported = mcn(serde_json::json!({
            "conditions": [condition("Updated", "True"), condition("Drained", "False")]
        }));
        keep_what_is_read(&mut reported);
        let conditions = &reported.status.as_ref().expect("status").conditions;
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            (conditions[0].type_.as_str(), conditions[0].message.as_str()),
            ("Updated", "")
        );
        assert_eq!(machine_config_node_render_digest(&reported), None);

        let mut empty = mcn(serde_json::json!({}));
        keep_what_is_read(&mut empty);
        assert!(empty.status.as_ref().expect("status").conditions.is_empty());
    }
}
