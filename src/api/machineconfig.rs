//! MachineConfig, MachineConfigPool and ControllerConfig: the inputs of every render.
//!
//! Field names and JSON shapes follow `shared/crds/`. Only what the server reads is modelled in
//! detail; `ControllerConfig` keeps the rest of its spec opaque.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `MachineConfig.spec`. Every field the CRD declares is kept so that the encapsulated copy we
/// serve to a node carries the whole object. `config` stays raw JSON: it may be any Ignition spec
/// and is parsed by [`crate::ignition`].
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfig"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigSpec {
    #[serde(rename = "osImageURL", default)]
    pub os_image_url: String,
    #[serde(default)]
    pub base_os_extensions_container_image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub config: Option<serde_json::Value>,
    /// The CRD marks this list nullable, and Go writes a nil slice as `null`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub kernel_arguments: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub extensions: Vec<String>,
    #[serde(default)]
    pub fips: bool,
    #[serde(default)]
    pub kernel_type: String,
}

/// Reference to the rendered MachineConfig a pool targets (`spec`/`status.configuration`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PoolConfiguration {
    #[serde(default)]
    pub name: String,
    /// The MachineConfigs merged into this render; kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::list_of_opaque_objects")]
    pub source: Option<Vec<serde_json::Value>>,
}

/// `MachineConfigPool.spec`: what the server reads of it.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "MachineConfigPool",
    status = "MachineConfigPoolStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolSpec {
    #[serde(default)]
    pub configuration: PoolConfiguration,
    /// Label selector of the pool's nodes (`matchLabels`/`matchExpressions`), kept opaque here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub node_selector: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::preserve_unknown_fields")]
    pub machine_config_selector: Option<serde_json::Value>,
    #[serde(default)]
    pub paused: bool,
}

/// `MachineConfigPool.status`: the counts that drive config selection.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolStatus {
    #[serde(default)]
    pub configuration: PoolConfiguration,
    #[serde(default)]
    pub machine_count: i64,
    #[serde(default)]
    pub updated_machine_count: i64,
    #[serde(default)]
    pub ready_machine_count: i64,
    #[serde(default)]
    pub unavailable_machine_count: i64,
    #[serde(default)]
    pub degraded_machine_count: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `ControllerConfig.spec`: the CA bundles the server writes into every served config. Go
/// `[]byte` fields arrive base64-encoded. The rest of the (large) spec is kept opaque.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "machineconfiguration.openshift.io",
    version = "v1",
    kind = "ControllerConfig"
)]
// The rest of the spec is kept (`other`), so the schema says unknown fields are preserved.
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
#[serde(rename_all = "camelCase")]
pub struct ControllerConfigSpec {
    #[serde(rename = "kubeAPIServerServingCAData", default)]
    pub kube_api_server_serving_ca_data: Option<String>,
    #[serde(rename = "cloudProviderCAData", default)]
    pub cloud_provider_ca_data: Option<String>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl ControllerConfigSpec {
    /// Decoded `kubeAPIServerServingCAData`; `None` when absent, null or empty.
    pub fn kube_api_server_serving_ca(&self) -> Result<Option<Vec<u8>>, base64::DecodeError> {
        decode_bytes_field(self.kube_api_server_serving_ca_data.as_deref())
    }

    /// Decoded `cloudProviderCAData`; `None` when absent, null or empty.
    pub fn cloud_provider_ca(&self) -> Result<Option<Vec<u8>>, base64::DecodeError> {
        decode_bytes_field(self.cloud_provider_ca_data.as_deref())
    }
}

/// Reads a JSON `null` list as empty: Go encodes a nil slice as `null`, and a typed watch must
/// not reject a whole list of objects because one of them carries it.
pub(crate) fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<Vec<T>>::deserialize(deserializer).map(Option::unwrap_or_default)
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
        assert!(mc.spec.kernel_arguments.is_empty());
        assert!(mc.spec.extensions.is_empty());
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
