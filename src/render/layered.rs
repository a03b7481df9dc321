//! Layered (image-mode) pools: which OS image a booting node gets, and why.
//!
//! Placeholder: the layered-pools work (issue 5) implements the pure decision here. The inputs
//! struct below is the contract with the cluster source, which fills it from its watch caches.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::api::imagebuild::{MachineOSBuild, MachineOSConfig};
use crate::api::machineconfignode::MachineConfigNode;

/// Cluster objects the layered-image decision reads. Empty in bootstrap mode.
#[derive(Clone, Debug, Default)]
pub struct LayeredInputs {
    pub machine_os_configs: Vec<Arc<MachineOSConfig>>,
    pub machine_os_builds: Vec<Arc<MachineOSBuild>>,
    /// All Nodes (the decision selects the pool's own).
    pub nodes: Vec<Arc<Node>>,
    pub machine_config_nodes: Vec<Arc<MachineConfigNode>>,
    /// Host prefixes of the in-cluster image registry (`<svc>.<ns>.svc:<port>`, route hosts):
    /// images there are unreachable for a booting node.
    pub registry_hosts: Vec<String>,
}
