//! MachineOSBuild (and MachineOSConfig) decoding and the layered-image decision that reads them.
//! The input is one object as a watch event (JSON) or YAML; every decoded object is checked by
//! [`super::cluster_objects`]. A decoded MachineOSBuild joins the builds of a small layered
//! cluster (pool `worker`, its MachineOSConfig, one validated build, a node that runs it); a
//! decoded MachineOSConfig replaces the cluster's. Then `render::layered::decide` runs.
//!
//! Properties: the decision is deterministic and does not depend on the order of the builds
//! (names are unique, as in a cluster); under the Node-validated gate an image is served
//! exactly when the reason is `validated`, and then it is the digested image of a succeeded
//! build of the pool's MachineOSConfig and rendered config, run and done by the node named as
//! validating it; under the original's gate (no Node rights) an image is served exactly when
//! the reason is `pool_updated`, only for a pool with `updatedMachineCount > 0` and a succeeded
//! build of the rendered config, and it is the MachineOSConfig's `currentImagePullSpec`;
//! `not_validated_since` gives a time only for `not_validated` and `pool_not_updated`
//! decisions.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use machine_config_server::api::imagebuild::{MachineOSBuild, MachineOSConfig};
use machine_config_server::api::MachineConfigPool;
use machine_config_server::render::layered::{
    decide, not_validated_since, DecisionReason, LayeredDecision,
};
use machine_config_server::snapshot::{LayeredGate, LayeredInputs};
use serde_json::json;

use super::cluster_objects;

const RENDERED: &str = "rendered-worker-1";
const IMAGE: &str = "quay.example.com/layered/worker@sha256:aaaa";

pub fn check(data: &[u8]) {
    for build in cluster_objects::decode_all::<MachineOSBuild>(data) {
        let mut inputs = inputs();
        inputs.machine_os_builds.push(Arc::new(build));
        check_decision(&inputs);
    }
    for config in cluster_objects::decode_all::<MachineOSConfig>(data) {
        let mut inputs = inputs();
        inputs.machine_os_configs = vec![Arc::new(config)];
        check_decision(&inputs);
    }
}

fn check_decision(inputs: &LayeredInputs) {
    for updated in [0, 1] {
        for gate in [
            LayeredGate::NodeValidated,
            LayeredGate::PoolUpdatedMachineCount,
        ] {
            let inputs = LayeredInputs {
                gate,
                ..inputs.clone()
            };
            check_gated_decision(&pool(updated), &inputs);
        }
    }
}

fn check_gated_decision(pool: &MachineConfigPool, inputs: &LayeredInputs) {
    let decision = decide(pool, RENDERED, inputs);
    assert_eq!(decision, decide(pool, RENDERED, inputs), "deterministic");
    let names: BTreeSet<Option<&str>> = inputs
        .machine_os_builds
        .iter()
        .map(|b| b.metadata.name.as_deref())
        .collect();
    if names.len() == inputs.machine_os_builds.len() {
        let mut reversed = inputs.clone();
        reversed.machine_os_builds.reverse();
        assert_eq!(
            decide(pool, RENDERED, &reversed),
            decision,
            "the order of the builds does not matter"
        );
    }
    let served_reason = match inputs.gate {
        LayeredGate::NodeValidated => DecisionReason::Validated,
        LayeredGate::PoolUpdatedMachineCount => DecisionReason::PoolUpdated,
    };
    assert_eq!(
        decision.image.is_some(),
        decision.reason == served_reason,
        "an image is served exactly when {served_reason}: {decision:?}"
    );
    if let Some(image) = &decision.image {
        match inputs.gate {
            LayeredGate::NodeValidated => check_served_image(&decision, image, inputs),
            LayeredGate::PoolUpdatedMachineCount => {
                check_served_by_pool(pool, &decision, image, inputs)
            }
        }
    }
    let since = not_validated_since(&decision, RENDERED, inputs);
    assert_eq!(since, not_validated_since(&decision, RENDERED, inputs));
    if !decision.reason.is_held_for_validation() {
        assert_eq!(since, None, "a time only for a build held for validation");
    }
}

/// The original's gate: the pool has an updated machine, a build of the rendered config
/// succeeded, and the MachineOSConfig's image is served.
fn check_served_by_pool(
    pool: &MachineConfigPool,
    decision: &LayeredDecision,
    image: &str,
    inputs: &LayeredInputs,
) {
    assert!(pool
        .status
        .as_ref()
        .is_some_and(|s| s.updated_machine_count > 0));
    let mosc = inputs
        .machine_os_configs
        .iter()
        .find(|m| m.metadata.name.as_deref() == decision.machine_os_config.as_deref())
        .expect("the MachineOSConfig exists");
    assert_eq!(
        mosc.status
            .as_ref()
            .and_then(|s| s.current_image_pull_spec.as_deref()),
        Some(image)
    );
    assert!(inputs.machine_os_builds.iter().any(|b| {
        b.spec.machine_config.name == RENDERED
            && b.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Succeeded" && c.status == "True")
            })
    }));
    assert_eq!(decision.validated_by, None, "no node proved it");
}

fn check_served_image(decision: &LayeredDecision, image: &str, inputs: &LayeredInputs) {
    let mosc = decision
        .machine_os_config
        .as_deref()
        .expect("a MachineOSConfig");
    let build_name = decision.machine_os_build.as_deref();
    let build = inputs
        .machine_os_builds
        .iter()
        .find(|b| b.metadata.name.as_deref() == build_name)
        .expect("the served build exists");
    assert_eq!(build.spec.machine_os_config.name, mosc);
    assert_eq!(build.spec.machine_config.name, RENDERED);
    let status = build.status.as_ref().expect("a served build has a status");
    assert_eq!(status.digested_image_push_spec.as_deref(), Some(image));
    assert!(status
        .conditions
        .iter()
        .any(|c| c.type_ == "Succeeded" && c.status == "True"));
    let node = decision.validated_by.as_deref().expect("a validating node");
    let node = inputs
        .nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .expect("the validating node exists");
    let annotation = |key: &str| {
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    };
    assert_eq!(
        annotation("machineconfiguration.openshift.io/currentImage"),
        Some(image)
    );
    assert_eq!(
        annotation("machineconfiguration.openshift.io/state"),
        Some("Done")
    );
}

fn pool(updated_machine_count: i64) -> MachineConfigPool {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {"configuration": {"name": RENDERED},
                 "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}},
        "status": {"configuration": {"name": RENDERED}, "updatedMachineCount": updated_machine_count}
    }))
    .expect("the built-in pool decodes")
}

/// A layered pool whose one build of the rendered config succeeded and was validated by `w1`.
fn inputs() -> LayeredInputs {
    let mosc: MachineOSConfig = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
        "metadata": {"name": "worker"},
        "spec": {"machineConfigPool": {"name": "worker"}, "renderedImagePushSpec": "quay.example.com/layered/worker:latest"},
        "status": {"currentImagePullSpec": IMAGE}
    }))
    .expect("the built-in MachineOSConfig decodes");
    let build: MachineOSBuild = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
        "metadata": {"name": "worker-build-1", "creationTimestamp": "2025-05-01T10:00:00Z"},
        "spec": {"machineConfig": {"name": RENDERED}, "machineOSConfig": {"name": "worker"},
                 "renderedImagePushSpec": "quay.example.com/layered/worker:latest"},
        "status": {"digestedImagePushSpec": IMAGE,
                   "conditions": [{"type": "Succeeded", "status": "True", "reason": "x", "message": "",
                                   "lastTransitionTime": "2025-05-01T10:20:00Z"}]}
    }))
    .expect("the built-in MachineOSBuild decodes");
    let node = |name: &str, state: &str| -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""},
                             "annotations": {"machineconfiguration.openshift.io/currentImage": IMAGE,
                                             "machineconfiguration.openshift.io/state": state}}
            }))
            .expect("the built-in Node decodes"),
        )
    };
    LayeredInputs {
        machine_os_configs: vec![Arc::new(mosc)],
        machine_os_builds: vec![Arc::new(build)],
        nodes: vec![node("w1", "Done"), node("w2", "Working")],
        machine_config_nodes: Vec::new(),
        registry_hosts: vec!["image-registry.openshift-image-registry.svc:5000".to_string()],
        pools: vec![Arc::new(pool(0))],
        gate: LayeredGate::NodeValidated,
    }
}
