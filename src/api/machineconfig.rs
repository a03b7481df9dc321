//! MachineConfig, MachineConfigPool and ControllerConfig: the inputs of every render.
//!
//! Hand-written types with every JSON name spelled out (`rename` on each field, never a
//! case-conversion rule: serde's camel-case renaming turns `baseOSExtensionsContainerImage` into
//! `baseOsExtensionsContainerImage`). The names are checked against the real CRDs by
//! `tests/api_model.rs`, which walks every serialized name of these types through the real
//! schemas. Hand-written rather than generated (kopium): the generated ControllerConfig and
//! MachineConfigPool types run to thousands of lines of fields the server never reads, while
//! what it does read must carry exactly the original's serialization rules, which a generator
//! does not know (see [`MachineConfigSpec`]).
//!
//! What the server serves back to a node (the MachineConfig) is modelled field by field, as the
//! original's typed struct is. What it only reads keeps the rest of the object in a catch-all
//! (`rest`), so that nothing a newer API adds is lost when an object passes through.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::raw_config::RawConfig;

/// The fields of an object that the server does not model, kept as they came.
pub type Rest = BTreeMap<String, serde_json::Value>;

/// `MachineConfig.spec`: every field the CRD declares, under its real name, serialized as the
/// original serializes its typed MachineConfig (no field is omitted when empty: Go's
/// `MachineConfigSpec` has no `omitempty`, and a nil list is `null`). The encapsulated copy a
/// node boots with carries exactly these. Fields the CRD does not declare are dropped, as the
/// original's typed struct drops them (a structural CRD prunes them in a cluster anyway).
/// `config` stays raw JSON (deflated, [`RawConfig`]): it may be any Ignition spec and is parsed
/// by [`crate::ignition`] when a payload is rendered.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfig"
)]
pub struct MachineConfigSpec {
    #[serde(rename = "osImageURL", default)]
    pub os_image_url: String,
    #[serde(rename = "baseOSExtensionsContainerImage", default)]
    pub base_os_extensions_container_image: String,
    #[serde(rename = "config", default)]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub config: Option<RawConfig>,
    /// `None` is a nil list (`null`, or absent), kept apart from `[]` as Go keeps them apart.
    #[serde(rename = "kernelArguments", default)]
    pub kernel_arguments: Option<Vec<String>>,
    #[serde(rename = "extensions", default)]
    pub extensions: Option<Vec<String>>,
    #[serde(rename = "fips", default)]
    pub fips: bool,
    #[serde(rename = "kernelType", default)]
    pub kernel_type: String,
}

impl MachineConfigSpec {
    /// The kernel arguments (none for a nil list).
    pub fn kernel_arguments(&self) -> &[String] {
        self.kernel_arguments.as_deref().unwrap_or_default()
    }

    /// `config`'s `ignition.version`, empty when absent.
    pub fn config_version(&self) -> &str {
        self.config.as_ref().map_or("", RawConfig::version)
    }

    /// The extensions (none for a nil list).
    pub fn extensions(&self) -> &[String] {
        self.extensions.as_deref().unwrap_or_default()
    }
}

/// Reference to the rendered MachineConfig a pool targets (`spec`/`status.configuration`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PoolConfiguration {
    #[serde(rename = "name", default)]
    pub name: String,
    /// The MachineConfigs merged into this render; kept opaque.
    #[serde(rename = "source", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::list_of_opaque_objects")]
    pub source: Option<Vec<serde_json::Value>>,
}

/// `MachineConfigPool.spec`: what the server reads of it, and the rest as it came.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfigPool",
    status = "MachineConfigPoolStatus"
)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineConfigPoolSpec {
    #[serde(rename = "configuration", default)]
    pub configuration: PoolConfiguration,
    /// Label selector of the pool's nodes (`matchLabels`/`matchExpressions`), kept opaque here.
    #[serde(
        rename = "nodeSelector",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub node_selector: Option<serde_json::Value>,
    #[serde(
        rename = "machineConfigSelector",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub machine_config_selector: Option<serde_json::Value>,
    #[serde(rename = "paused", default)]
    pub paused: bool,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// `MachineConfigPool.status`: the counts that drive config selection, and the rest as it came.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineConfigPoolStatus {
    #[serde(rename = "configuration", default)]
    pub configuration: PoolConfiguration,
    #[serde(rename = "machineCount", default)]
    pub machine_count: i64,
    #[serde(rename = "updatedMachineCount", default)]
    pub updated_machine_count: i64,
    #[serde(rename = "readyMachineCount", default)]
    pub ready_machine_count: i64,
    #[serde(rename = "unavailableMachineCount", default)]
    pub unavailable_machine_count: i64,
    #[serde(rename = "degradedMachineCount", default)]
    pub degraded_machine_count: i64,
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

/// One `imageRegistryBundleData`/`imageRegistryBundleUserData` entry: a registry CA file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImageRegistryBundle {
    #[serde(rename = "file", default)]
    pub file: String,
    /// Go `[]byte`: base64.
    #[serde(rename = "data", default)]
    pub data: String,
}

/// `ControllerConfig.spec`: every CA and trust field, under its real name (Go `[]byte` fields
/// arrive base64-encoded; the nullable ones may be `null`); the rest of the (large) spec as it
/// came.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "ControllerConfig",
    status = "ControllerConfigStatus"
)]
// The rest of the spec is kept (`rest`), so the schema says unknown fields are preserved.
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ControllerConfigSpec {
    #[serde(rename = "kubeAPIServerServingCAData", default)]
    pub kube_api_server_serving_ca_data: Option<String>,
    #[serde(
        rename = "rootCAData",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub root_ca_data: Option<String>,
    #[serde(rename = "cloudProviderCAData", default)]
    pub cloud_provider_ca_data: Option<String>,
    #[serde(
        rename = "additionalTrustBundle",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub additional_trust_bundle: Option<String>,
    #[serde(
        rename = "internalRegistryPullSecret",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub internal_registry_pull_secret: Option<String>,
    #[serde(
        rename = "imageRegistryBundleData",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub image_registry_bundle_data: Option<Vec<ImageRegistryBundle>>,
    #[serde(
        rename = "imageRegistryBundleUserData",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub image_registry_bundle_user_data: Option<Vec<ImageRegistryBundle>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// `ControllerConfig.status`: written by the operator, read by no one here; kept as it came.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ControllerConfigStatus {
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

impl ControllerConfigSpec {
    /// Decoded `kubeAPIServerServingCAData`; `None` when absent, null or empty.
    pub fn kube_api_server_serving_ca(&self) -> Result<Option<Vec<u8>>, base64::DecodeError> {
        decode_bytes_field(self.kube_api_server_serving_ca_data.as_deref())
    }

    /// Decoded `rootCAData`; `None` when absent, null or empty.
    pub fn root_ca(&self) -> Result<Option<Vec<u8>>, base64::DecodeError> {
        decode_bytes_field(self.root_ca_data.as_deref())
    }

    /// Decoded `cloudProviderCAData`; `None` when absent, null or empty.
    pub fn cloud_provider_ca(&self) -> Result<Option<Vec<u8>>, base64::DecodeError> {
        decode_bytes_field(self.cloud_provider_ca_data.as_deref())
    }
}

fn decode_bytes_field(field: Option<&str>) -> Result<Option<Vec<u8>>, base64::DecodeError> {
    use base64::Engine as _;
    match field {
        None | Some("") => Ok(None),
        Some(text) => base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map(|bytes| (!bytes.is_empty()).then_some(bytes)),
    }
}

impl MachineConfigPool {
    /// The rendered MachineConfig the original server would hand to a new node of this pool:
    /// the newest render (`spec.configuration`) once a node has proven it
    /// (`status.updatedMachineCount > 0`), otherwise the one the pool is at
    /// (`status.configuration`).
    pub fn served_config_name(&self) -> &str {
        match &self.status {
            Some(status) if status.updated_machine_count > 0 => &self.spec.configuration.name,
            Some(status) => &status.configuration.name,
            None => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_config_with_null_lists_and_unknown_fields_deserializes() {
        let mc: MachineConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "rendered-worker-1", "resourceVersion": "7"},
            "spec": {
                "config": {"ignition": {"version": "3.4.0"}},
                "kernelArguments": null,
                "extensions": null,
                "osImageURL": "quay.io/os@sha256:1",
                "someFutureField": {"x": 1}
            }
        }))
        .expect("a real object with null lists must deserialize");
        assert!(mc.spec.kernel_arguments().is_empty());
        assert!(mc.spec.extensions().is_empty());
        // A nil list stays nil (`null`), as Go writes it back.
        assert_eq!(mc.spec.kernel_arguments, None);
        assert_eq!(mc.spec.os_image_url, "quay.io/os@sha256:1");
    }

    #[test]
    fn served_config_follows_updated_machine_count() {
        let mut pool: MachineConfigPool = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "worker"},
            "spec": {"configuration": {"name": "rendered-worker-new"}},
            "status": {"configuration": {"name": "rendered-worker-old"}, "updatedMachineCount": 0}
        }))
        .expect("pool");
        assert_eq!(pool.served_config_name(), "rendered-worker-old");
        if let Some(status) = pool.status.as_mut() {
            status.updated_machine_count = 1;
        }
        assert_eq!(pool.served_config_name(), "rendered-worker-new");
    }
}
