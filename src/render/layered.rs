//! Layered (image-mode) pools: which OS image a booting node gets, and why.
//!
//! Placeholder: the layered-pools work (issue 5) implements the pure decision here.

/// Cluster objects the layered-image decision reads (MachineOSConfigs, MachineOSBuilds, the
/// pool's Nodes and MachineConfigNodes, in-cluster registry hosts).
#[derive(Clone, Debug, Default)]
pub struct LayeredInputs {}
