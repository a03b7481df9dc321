//! Small accessors of a Kubernetes Node that the MachineConfigNode publisher and the served
//! records read: its name, creation time, `InternalIP` addresses, whether it is still being
//! provisioned, its boot ID and whether it is ready. No I/O.

use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Node;

/// `metadata.name`, empty when absent.
pub fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// `metadata.creationTimestamp` (the API server's clock), when present and after 1970.
pub fn created(node: &Node) -> Option<SystemTime> {
    let created = node.metadata.creation_timestamp.as_ref()?;
    let secs = u64::try_from(created.0.as_second()).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

/// The node's `InternalIP` addresses that parse.
pub fn internal_ips(node: &Node) -> Vec<IpAddr> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| a.address.trim().parse::<IpAddr>().ok())
        .map(|ip| ip.to_canonical())
        .collect()
}

/// True for nodes the original skips: `status.phase` `Pending` or `Provisioning`.
pub fn is_provisioning(node: &Node) -> bool {
    matches!(
        node.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending" | "Provisioning")
    )
}

/// `status.nodeInfo.bootID`: which boot of the machine the kubelet reports (changes with
/// every reboot), when known.
pub fn boot_id(node: &Node) -> Option<&str> {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|info| info.boot_id.as_str())
        .filter(|id| !id.is_empty())
}

/// When the node last became `Ready` (its `Ready` condition's `lastTransitionTime`, RFC 3339),
/// if it is ready now; `Some("")` when ready without a recorded time.
pub fn ready_since(node: &Node) -> Option<String> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())?
        .iter()
        .find(|c| c.type_ == "Ready")
        .filter(|c| c.status == "True")?;
    Some(
        ready
            .last_transition_time
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_phase() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "worker-1"},
            "status": {"addresses": [
                {"type": "Hostname", "address": "worker-1"},
                {"type": "InternalIP", "address": "10.0.0.21"},
                {"type": "InternalIP", "address": "fd00::21"},
                {"type": "InternalIP", "address": "not an address"},
                {"type": "ExternalIP", "address": "203.0.113.9"}
            ]}
        }))
        .unwrap();
        assert_eq!(name(&node), "worker-1");
        assert_eq!(
            internal_ips(&node),
            vec![
                "10.0.0.21".parse::<IpAddr>().unwrap(),
                "fd00::21".parse().unwrap()
            ]
        );
        assert!(!is_provisioning(&node));
        for phase in ["Pending", "Provisioning"] {
            let mut pending = node.clone();
            pending.status.as_mut().unwrap().phase = Some(phase.into());
            assert!(is_provisioning(&pending));
        }
        assert_eq!(created(&node), None);
        assert_eq!(boot_id(&node), None);
        assert_eq!(ready_since(&node), None);
        let booted: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "worker-1"},
            "status": {
                "nodeInfo": {"bootID": "b-1", "machineID": "", "systemUUID": "", "kernelVersion": "",
                             "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                             "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                "conditions": [{"type": "Ready", "status": "True",
                                "lastTransitionTime": "2026-11-01T10:00:00Z"}]
            }
        }))
        .unwrap();
        assert_eq!(boot_id(&booted), Some("b-1"));
        assert_eq!(
            ready_since(&booted).as_deref(),
            Some("2026-11-01T10:00:00Z")
        );
    }
}
