//! Decoding a Node watch event straight into what the server reads of it.
//!
//! A Node is about 15 KB (50 container images, conditions, capacity, nodeInfo, managedFields),
//! a large cluster has thousands, and every kubelet rewrites its Node's status every few
//! seconds. Decoding each event into a `serde_json::Value` and then the whole typed `Node` (the
//! default [`decode_via_value`](super::lenient::decode_via_value)) allocated for every field of
//! it, only for all but a tenth to be dropped. Here the JSON goes into a shape with only the
//! fields the server reads (see [`node_digest`](super::build::node_digest): renders read labels
//! and annotations, the MachineConfigNode publisher and events the rest: addresses, phase, the
//! boot ID and the `Ready` condition without its heartbeat); serde skips every
//! other field as it reads (`IgnoredAny`, no allocation). The result is a k8s-openapi `Node`
//! holding those fields, so the rest of the server is unaware of the shape.
//!
//! Of those, a Node keeps only what is read: the annotations in [`ANNOTATIONS_READ`] (other
//! components' annotations, the network plugin's and the storage drivers', are half of a
//! Node's metadata and no decision reads them), the `InternalIP` addresses, and `Ready` alone
//! of the conditions. With 5000 Nodes these are tens of MB of the server's memory at rest.
//!
//! Every field is optional, and those kept have the API's own types: a Node the API server
//! serves has passed its validation of exactly these types, so the decode cannot fail on one
//! (unlike custom resources, whose schemas may allow what our types do not read, and which keep
//! the per-object error path).
//!
//! Owns Node decoding only.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Deserializer};

use super::lenient::{identity, Decode, Lenient};
use crate::api::annotations;

/// The Node annotations something reads (renders, the layered gate, the MachineConfigNode
/// publisher): the machine-config daemon's view of the node. Every other annotation is dropped
/// as it is decoded.
pub const ANNOTATIONS_READ: [&str; 5] = [
    annotations::CURRENT_CONFIG,
    annotations::DESIRED_CONFIG,
    annotations::CURRENT_IMAGE,
    annotations::DESIRED_IMAGE,
    annotations::STATE,
];

/// The address type something reads (the served records match a Node by it).
const INTERNAL_IP: &str = "InternalIP";

/// The fields of a Node the server reads (JSON names from the Node API).
#[derive(Deserialize)]
struct NodeShape {
    metadata: Option<MetadataShape>,
    status: Option<StatusShape>,
}

#[derive(Deserialize)]
struct MetadataShape {
    name: Option<String>,
    uid: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(rename = "creationTimestamp")]
    creation_timestamp: Option<Time>,
    #[serde(rename = "deletionTimestamp")]
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct StatusShape {
    addresses: Option<Vec<NodeAddress>>,
    phase: Option<String>,
    #[serde(rename = "nodeInfo")]
    node_info: Option<NodeInfoShape>,
    conditions: Option<Vec<ConditionShape>>,
}

/// Of `nodeInfo`, only which boot the machine runs (it changes with every reboot).
#[derive(Deserialize)]
struct NodeInfoShape {
    #[serde(rename = "bootID")]
    boot_id: Option<String>,
}

/// Of the conditions, only `Ready`'s status and when it last changed: never the heartbeat
/// times, which kubelets rewrite every few seconds.
#[derive(Deserialize)]
struct ConditionShape {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(rename = "lastTransitionTime")]
    last_transition_time: Option<Time>,
}

impl Decode for Node {
    fn decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Lenient<Self>, D::Error> {
        let mut shape = NodeShape::deserialize(deserializer)?;
        let resource_version = shape
            .metadata
            .as_mut()
            .and_then(|m| m.resource_version.take());
        let metadata = shape
            .metadata
            .map(|m| ObjectMeta {
                name: m.name,
                uid: m.uid,
                // The wrapper keeps it (the snapshot fingerprints read it there); without it
                // here, a heartbeat's Node equals the one cached, which the watch then keeps.
                resource_version: None,
                creation_timestamp: m.creation_timestamp,
                deletion_timestamp: m.deletion_timestamp,
                labels: m.labels,
                annotations: m.annotations.map(|mut all| {
                    all.retain(|key, _| ANNOTATIONS_READ.contains(&key.as_str()));
                    all
                }),
                ..ObjectMeta::default()
            })
            .unwrap_or_default();
        let node = Node {
            metadata,
            spec: None,
            status: shape.status.map(|s| NodeStatus {
                addresses: s.addresses.map(|all| {
                    all.into_iter()
                        .filter(|address| address.type_ == INTERNAL_IP)
                        .collect()
                }),
                phase: s.phase,
                node_info: s.node_info.map(|info| NodeSystemInfo {
                    boot_id: info.boot_id.unwrap_or_default(),
                    ..NodeSystemInfo::default()
                }),
                // One element, allocated for one (a collected filter would keep room for
                // every condition the kubelet reported).
                conditions: s
                    .conditions
                    .and_then(|conditions| conditions.into_iter().find(|c| c.type_ == "Ready"))
                    .map(|c| {
                        vec![NodeCondition {
                            type_: c.type_,
                            status: c.status,
                            last_transition_time: c.last_transition_time,
                            ..NodeCondition::default()
                        }]
                    }),
                ..NodeStatus::default()
            }),
        };
        let wrapper = ObjectMeta {
            resource_version,
            ..identity(&node.metadata)
        };
        Ok(Lenient::new(wrapper, Ok(Arc::new(node))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    /// A Node as a kubelet and the machine-config daemon leave it (abridged).
    fn full_node() -> String {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": "w1", "uid": "u1", "resourceVersion": "10",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"node-role.kubernetes.io/worker": ""},
                "annotations": {"machineconfiguration.openshift.io/state": "Done",
                                "k8s.ovn.org/node-subnets": "{\"default\":[\"10.128.0.0/23\"]}",
                                "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                                   "fieldsV1": {"f:status": {"f:images": {}}}}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x"}]
            },
            "spec": {"providerID": "aws:///i-1", "podCIDR": "10.128.0.0/24"},
            "status": {
                "phase": "Running",
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                              {"type": "Hostname", "address": "w1.example.com"}],
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:10Z",
                                "lastTransitionTime": "2026-01-01T00:00:05Z", "reason": "KubeletReady"},
                               {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2026-01-01T00:00:10Z"}],
                "capacity": {"cpu": "8"},
                "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "c",
                             "kernelVersion": "k", "kubeProxyVersion": "p", "kubeletVersion": "v",
                             "machineID": "m", "operatingSystem": "linux", "osImage": "o", "systemUUID": "s"},
                "images": [{"names": ["quay.io/x@sha256:00"], "sizeBytes": 1}]
            }
        })
        .to_string()
    }

    #[test]
    fn nodes_keep_only_what_the_server_reads() {
        let node: Lenient<Node> = serde_json::from_str(&full_node()).expect("decodes");
        assert_eq!(node.name(), "w1");
        assert_eq!(node.resource_version(), "10");
        assert_eq!(node.meta().uid.as_deref(), Some("u1"));
        assert_eq!(node.meta().labels, None, "the wrapper keeps no second copy");
        let node = node.object().expect("decoded");
        let value = serde_json::to_value(node.as_ref()).expect("serializes");
        assert_eq!(
            value,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "w1", "uid": "u1",
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                    "labels": {"node-role.kubernetes.io/worker": ""},
                    "annotations": {"machineconfiguration.openshift.io/state": "Done"}
                },
                "status": {
                    "phase": "Running",
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                    "conditions": [{"type": "Ready", "status": "True",
                                    "lastTransitionTime": "2026-01-01T00:00:05Z"}],
                    "nodeInfo": {"architecture": "", "bootID": "b", "containerRuntimeVersion": "",
                                 "kernelVersion": "", "kubeProxyVersion": "", "kubeletVersion": "",
                                 "machineID": "", "operatingSystem": "", "osImage": "", "systemUUID": ""}
                }
            })
        );
    }

    #[test]
    fn a_list_page_and_a_bare_node_decode() {
        let page = format!(
            r#"[{}, {{"metadata": {{"name": "new", "deletionTimestamp": "2026-01-02T00:00:00Z"}}}}, {{}}]"#,
            full_node()
        );
        let nodes: Vec<Lenient<Node>> = serde_json::from_str(&page).expect("page decodes");
        assert_eq!(nodes.len(), 3);
        let new = nodes[1].object().expect("decoded");
        assert!(new.metadata.deletion_timestamp.is_some());
        assert!(new.status.is_none());
        assert_eq!(nodes[2].name(), "");
    }

    #[test]
    fn a_heartbeat_shares_the_cached_node() {
        let cached: Lenient<Node> = serde_json::from_str(&full_node()).expect("decodes");
        let heartbeat = full_node()
            .replace(r#""resourceVersion":"10""#, r#""resourceVersion":"11""#)
            .replace("00:00:10Z", "00:00:20Z");
        let mut update: Lenient<Node> = serde_json::from_str(&heartbeat).expect("decodes");
        update.share_unchanged(&cached);
        assert_eq!(update.resource_version(), "11");
        let (kept, new) = (cached.object().expect("ok"), update.object().expect("ok"));
        assert!(Arc::ptr_eq(kept, new), "one copy of an unchanged Node");
        let relabelled = full_node().replace(r#"/state":"Done""#, r#"/state":"Working""#);
        let mut update: Lenient<Node> = serde_json::from_str(&relabelled).expect("decodes");
        update.share_unchanged(&cached);
        let new = update.object().expect("ok");
        assert!(!Arc::ptr_eq(kept, new));
        assert_eq!(
            new.metadata
                .annotations
                .as_ref()
                .map(|a| a["machineconfiguration.openshift.io/state"].as_str()),
            Some("Working")
        );
    }
}
