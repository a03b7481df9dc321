//! Small accessors of a Kubernetes Node that the MachineConfigNode publisher and the served
//! records read: its name, creation time, `InternalIP` addresses, and whether it is still
//! being provisioned. No I/O.

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
    }
}
