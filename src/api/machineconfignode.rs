//! MachineConfigNode (MCN): one per Node, same name, reporting that node's update state.
//!
//! Every JSON name is spelled out (checked against the real CRD by `tests/api_model.rs`).
//! `configImage` exists only in newer API versions of the CRD; it is optional here and must only
//! be written where the CRD declares it. The server writes spec and status fields it owns by
//! server-side apply; what others wrote (`rest`) is read and kept, never written back.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::imagebuild::{Condition, NameRef};
use super::machineconfig::Rest;

/// The condition type the daemon sets `True` when the node failed to apply its config.
pub const CONDITION_NODE_DEGRADED: &str = "NodeDegraded";

/// `MachineConfigNode.spec`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfigNode",
    status = "MachineConfigNodeStatus"
)]
pub struct MachineConfigNodeSpec {
    #[serde(rename = "node", default)]
    pub node: NameRef,
    #[serde(rename = "pool", default)]
    pub pool: NameRef,
    #[serde(rename = "configVersion", default)]
    pub config_version: SpecConfigVersion,
    #[serde(
        rename = "configImage",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub config_image: Option<SpecConfigImage>,
}

/// `spec.configVersion`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpecConfigVersion {
    #[serde(rename = "desired", default)]
    pub desired: String,
}

/// `spec.configImage` (newer CRD versions only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpecConfigImage {
    #[serde(rename = "desiredImage", default)]
    pub desired_image: String,
}

/// `MachineConfigNode.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineConfigNodeStatus {
    #[serde(rename = "conditions", default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(
        rename = "configVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub config_version: Option<StatusConfigVersion>,
    #[serde(
        rename = "configImage",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub config_image: Option<StatusConfigImage>,
    #[serde(
        rename = "observedGeneration",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub observed_generation: Option<i64>,
    /// What other writers (the daemon) report; read only, never written by this server.
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// `status.configVersion`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusConfigVersion {
    /// Empty when unknown; then left out of the written object (the CRD rejects an empty name).
    #[serde(rename = "current", default, skip_serializing_if = "String::is_empty")]
    pub current: String,
    #[serde(rename = "desired", default)]
    pub desired: String,
}

/// `status.configImage` (newer CRD versions only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusConfigImage {
    #[serde(
        rename = "currentImage",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub current_image: Option<String>,
    #[serde(
        rename = "desiredImage",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub desired_image: Option<String>,
}
