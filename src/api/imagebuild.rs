//! MachineOSConfig and MachineOSBuild: on-cluster image mode (layered pools), and the OpenShift
//! Route kind (read to find the in-cluster image registry's host names).
//!
//! A pool is layered when a MachineOSConfig names it; each build of a rendered config for it is a
//! MachineOSBuild whose `status.digestedImagePushSpec` is the image nodes boot.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A `metav1.Condition` as MCO resources carry it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A reference by name (`{name: ...}`), the shape of most MCO object references.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NameRef {
    #[serde(default)]
    pub name: String,
}

/// `MachineOSConfig.spec`: which pool is layered, and where its images are pushed.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineOSConfig",
    status = "MachineOSConfigStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigSpec {
    #[serde(default)]
    pub machine_config_pool: NameRef,
    #[serde(default)]
    pub rendered_image_push_spec: String,
}

/// `MachineOSConfig.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigStatus {
    #[serde(default)]
    pub current_image_pull_spec: Option<String>,
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(
        default,
        rename = "machineOSBuild",
        skip_serializing_if = "Option::is_none"
    )]
    pub machine_os_build: Option<NameRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `MachineOSBuild.spec`: one build of one rendered config for one MachineOSConfig.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineOSBuild",
    status = "MachineOSBuildStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuildSpec {
    #[serde(default)]
    pub machine_config: NameRef,
    #[serde(default, rename = "machineOSConfig")]
    pub machine_os_config: NameRef,
    #[serde(default)]
    pub rendered_image_push_spec: String,
}

/// `MachineOSBuild.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuildStatus {
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub digested_image_push_spec: Option<String>,
    #[serde(default)]
    pub build_start: Option<String>,
    #[serde(default)]
    pub build_end: Option<String>,
}

/// `route.openshift.io/v1` Route: only `spec.host` is read.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "route.openshift.io",
    version = "v1",
    kind = "Route",
    namespaced
)]
pub struct RouteSpec {
    #[serde(default)]
    pub host: String,
}
