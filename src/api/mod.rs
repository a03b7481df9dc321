//! Typed `machineconfiguration.openshift.io/v1` resources (and the few other kinds we read).
//!
//! Owns only data shapes and small accessors; no I/O. Every type tolerates unknown fields so
//! that objects from newer clusters still deserialize; types we write (MachineConfigNode) must
//! produce objects the real CRD schema in `shared/crds/` accepts.

pub mod go_marshal;
pub mod imagebuild;
pub mod infrastructure;
pub mod machineconfig;
pub mod machineconfignode;
pub mod node;
pub mod pool_membership;
pub mod raw_config;

pub use machineconfig::{
    ControllerConfig, ControllerConfigSpec, MachineConfig, MachineConfigPool,
    MachineConfigPoolSpec, MachineConfigPoolStatus, MachineConfigSpec, PoolConfiguration,
};
pub use raw_config::RawConfig;

/// Schema of a field kept as opaque JSON: an object whose contents the server does not model,
/// so a structural schema (and an API server pruning by it) must keep them.
pub(crate) fn preserve_unknown_fields(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Schema of a list of opaque objects (see [`preserve_unknown_fields`]).
pub(crate) fn list_of_opaque_objects(
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    let item = preserve_unknown_fields(generator);
    schemars::json_schema!({ "type": "array", "items": item })
}

/// API group of every MCO resource.
pub const GROUP: &str = "machineconfiguration.openshift.io";
/// `apiVersion` of every MCO resource.
pub const API_VERSION: &str = "machineconfiguration.openshift.io/v1";

/// Node annotation keys the MCO daemon and this server agree on.
pub mod annotations {
    pub const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";
    pub const DESIRED_CONFIG: &str = "machineconfiguration.openshift.io/desiredConfig";
    pub const FIRST_PIVOT_CONFIG: &str = "machineconfiguration.openshift.io/firstPivotConfig";
    pub const STATE: &str = "machineconfiguration.openshift.io/state";
    pub const CURRENT_IMAGE: &str = "machineconfiguration.openshift.io/currentImage";
    pub const DESIRED_IMAGE: &str = "machineconfiguration.openshift.io/desiredImage";
    /// This server's URL (`https://<host>:22623`), where the daemon of upstream's PR #6124
    /// reports a first-boot failure (`POST /v1/node-failure`).
    pub const MACHINE_CONFIG_SERVER_URL: &str =
        "machineconfiguration.openshift.io/machineConfigServerURL";
    /// MachineConfig annotation naming an image chosen at install time (install-time image mode).
    pub const PRE_BUILT_IMAGE: &str = "machineconfiguration.openshift.io/pre-built-image";
    /// Value of [`STATE`] once a node has finished updating.
    pub const STATE_DONE: &str = "Done";
}
