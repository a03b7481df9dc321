//! Node decoding: a Node watch event goes straight into the few fields the server reads
//! (`source::cluster::slim_node`, through `Lenient<Node>`). The input is a Node's JSON.
//!
//! Properties: the slim decode never panics; whenever the full k8s-openapi `Node` decodes, the
//! slim decode succeeds too and holds exactly the full object's name, uid, timestamps, labels,
//! the annotations something reads (`slim_node::ANNOTATIONS_READ`), the `InternalIP` addresses,
//! phase, boot ID and first `Ready` condition (type, status, transition time: never a
//! heartbeat) (the wrapper holding its resourceVersion); the slim Node re-serializes and
//! re-decodes to itself.

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use machine_config_server::source::cluster::lenient::Lenient;
use machine_config_server::source::cluster::slim_node::ANNOTATIONS_READ;

pub fn check(data: &[u8]) {
    let slim = serde_json::from_slice::<Lenient<Node>>(data);
    let Ok(full) = serde_json::from_slice::<Node>(data) else {
        return;
    };
    let slim = match slim {
        Ok(slim) => slim,
        // An object with a repeated key: serde's derived decoders (the slim Node's) refuse it,
        // k8s-openapi's hand-written ones keep the last value. The API server never writes one
        // (Go's encoder writes each field once), so there the two may differ. Found by this
        // target (regressions/node/duplicate-resource-version).
        Err(e) if e.to_string().starts_with("duplicate field") => return,
        Err(e) => panic!("the full Node decodes, the slim one not: {e}"),
    };
    let node = slim.object().expect("a slim Node always decodes");
    let expected = Node {
        metadata: ObjectMeta {
            name: full.metadata.name.clone(),
            uid: full.metadata.uid.clone(),
            creation_timestamp: full.metadata.creation_timestamp.clone(),
            deletion_timestamp: full.metadata.deletion_timestamp.clone(),
            labels: full.metadata.labels.clone(),
            annotations: full.metadata.annotations.as_ref().map(|all| {
                all.iter()
                    .filter(|(key, _)| ANNOTATIONS_READ.contains(&key.as_str()))
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect()
            }),
            ..ObjectMeta::default()
        },
        spec: None,
        status: full.status.as_ref().map(|s| NodeStatus {
            addresses: s.addresses.as_ref().map(|all| {
                all.iter()
                    .filter(|address| address.type_ == "InternalIP")
                    .cloned()
                    .collect()
            }),
            phase: s.phase.clone(),
            node_info: s.node_info.as_ref().map(|info| NodeSystemInfo {
                boot_id: info.boot_id.clone(),
                ..NodeSystemInfo::default()
            }),
            conditions: s
                .conditions
                .as_ref()
                .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
                .map(|c| {
                    vec![NodeCondition {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        last_transition_time: c.last_transition_time.clone(),
                        ..NodeCondition::default()
                    }]
                }),
            ..NodeStatus::default()
        }),
    };
    assert_eq!(**node, expected, "the slim Node holds the read fields");
    assert_eq!(
        slim.meta().resource_version,
        full.metadata.resource_version,
        "the wrapper holds the resourceVersion"
    );
    assert_eq!(
        slim.name(),
        full.metadata.name.as_deref().unwrap_or_default()
    );
    let json = serde_json::to_vec(&**node).expect("a Node serializes");
    let again: Lenient<Node> = serde_json::from_slice(&json).expect("a slim Node re-decodes");
    assert_eq!(
        again.object().ok().map(|n| &**n),
        Some(&**node),
        "round trip"
    );
}
