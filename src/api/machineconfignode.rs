//! MachineConfigNode (MCN): one per Node, same name, reporting that node's update state.
//!
//! Shapes follow `shared/crds/machineconfignodes.yaml`. `configImage` exists only in newer API
//! versions of the CRD; it is optional here and must only be written where the CRD declares it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::imagebuild::{Condition, NameRef};

/// `MachineConfigNode.spec`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfigNode",
    status = "MachineConfigNodeStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeSpec {
    #[serde(default)]
    pub node: NameRef,
    #[serde(default)]
    pub pool: NameRef,
    #[serde(default)]
    pub config_version: SpecConfigVersion,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_image: Option<SpecConfigImage>,
}

/// `spec.configVersion`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpecConfigVersion {
    #[serde(default)]
    pub desired: String,
}

/// `spec.configImage` (newer CRD versions only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecConfigImage {
    #[serde(default)]
    pub desired_image: String,
}

/// `MachineConfigNode.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeStatus {
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<StatusConfigVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_image: Option<StatusConfigImage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `status.configVersion`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusConfigVersion {
    /// Empty when unknown; then left out of the written object (the CRD rejects an empty name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current: String,
    #[serde(default)]
    pub desired: String,
}

/// `status.configImage` (newer CRD versions only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusConfigImage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_image: Option<String>,
}
