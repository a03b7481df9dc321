//! MachineOSConfig and MachineOSBuild: on-cluster image mode (layered pools), and the OpenShift
//! Route kind (read to find the in-cluster image registry's host names).
//!
//! A pool is layered when a MachineOSConfig names it; each build of a rendered config for it is a
//! MachineOSBuild whose `status.digestedImagePushSpec` is the image nodes boot.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machineconfig::Rest;

/// A `metav1.Condition` as MCO resources carry it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(rename = "status")]
    pub status: String,
    #[serde(rename = "reason", default)]
    pub reason: String,
    #[serde(rename = "message", default)]
    pub message: String,
    #[serde(rename = "lastTransitionTime", default)]
    pub last_transition_time: String,
    #[serde(
        rename = "observedGeneration",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub observed_generation: Option<i64>,
}

/// A reference by name (`{name: ...}`), the shape of most MCO object references.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NameRef {
    #[serde(rename = "name", default)]
    pub name: String,
}

/// A reference by group, resource, namespace and name (openshift/api `ObjectReference`, e.g.
/// `MachineOSConfig.status.machineOSBuild`); the CRD requires `group`, `resource` and `name`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectReference {
    #[serde(rename = "group", default)]
    pub group: String,
    #[serde(rename = "resource", default)]
    pub resource: String,
    #[serde(
        rename = "namespace",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub namespace: String,
    #[serde(rename = "name", default)]
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
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineOSConfigSpec {
    #[serde(rename = "machineConfigPool", default)]
    pub machine_config_pool: NameRef,
    #[serde(rename = "renderedImagePushSpec", default)]
    pub rendered_image_push_spec: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// `MachineOSConfig.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineOSConfigStatus {
    #[serde(
        rename = "currentImagePullSpec",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub current_image_pull_spec: Option<String>,
    #[serde(rename = "conditions", default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(
        rename = "machineOSBuild",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub machine_os_build: Option<ObjectReference>,
    #[serde(
        rename = "observedGeneration",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub observed_generation: Option<i64>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// `MachineOSBuild.spec`: one build of one rendered config for one MachineOSConfig.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineOSBuild",
    status = "MachineOSBuildStatus"
)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineOSBuildSpec {
    #[serde(rename = "machineConfig", default)]
    pub machine_config: NameRef,
    #[serde(rename = "machineOSConfig", default)]
    pub machine_os_config: NameRef,
    #[serde(rename = "renderedImagePushSpec", default)]
    pub rendered_image_push_spec: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// `MachineOSBuild.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineOSBuildStatus {
    #[serde(rename = "conditions", default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(
        rename = "digestedImagePushSpec",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub digested_image_push_spec: Option<String>,
    #[serde(
        rename = "buildStart",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub build_start: Option<String>,
    #[serde(rename = "buildEnd", default, skip_serializing_if = "Option::is_none")]
    pub build_end: Option<String>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// `route.openshift.io/v1` Route: only `spec.host` is read.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "route.openshift.io",
    version = "v1",
    kind = "Route",
    namespaced
)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct RouteSpec {
    #[serde(rename = "host", default)]
    pub host: String,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}
