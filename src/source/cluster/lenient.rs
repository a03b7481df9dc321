//! [`Lenient`]: the object type every watch cache of the cluster source stores.
//!
//! A typed watch decodes a whole list page in one go, so a single object our types cannot read
//! would fail the list, keep the cache from ever syncing and take every pool down with it. A
//! `Lenient<K>` decodes its metadata strictly (the API server guarantees it) and the object
//! itself per object, keeping the error instead of failing: one broken MachineConfig fails only
//! the pools that serve it. Decoding also drops `metadata.managedFields`, which can be most of an
//! object's size, except a MachineConfig's: the original serves those back to the node inside
//! the MachineConfig content and encapsulated files ([`crate::api::go_marshal`]), and they are a
//! few hundred bytes to a few KB beside a rendered config's hundreds of KB. The wrapper's own
//! metadata keeps only name, namespace, uid and resourceVersion when the object decoded (it has
//! the rest).
//!
//! Nodes, thousands of them and rewritten by every kubelet heartbeat, decode straight into the
//! few fields the server reads instead ([`super::slim_node`]).
//!
//! Owns decoding only; what a decode error means for serving is decided when snapshots are built.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};

/// An object of kind `K` as the watch saw it: its metadata, and the typed object or the reason
/// it could not be decoded.
#[derive(Clone, Debug)]
pub struct Lenient<K> {
    metadata: ObjectMeta,
    object: Result<Arc<K>, Undecodable>,
}

/// Why an object could not be decoded into our type (the decoder's words, kept because the
/// decoder's own error is neither `Clone` nor shareable between snapshots).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Undecodable(pub String);

impl<K> Lenient<K> {
    /// Wraps an already typed object (tests and callers that build objects themselves).
    pub fn new(metadata: ObjectMeta, object: Result<Arc<K>, Undecodable>) -> Self {
        Lenient { metadata, object }
    }

    /// `metadata.name`, empty when absent.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// `metadata.namespace`, empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// `metadata.resourceVersion`, empty when absent.
    pub fn resource_version(&self) -> &str {
        self.metadata
            .resource_version
            .as_deref()
            .unwrap_or_default()
    }

    /// Applies `change` to the decoded object (copying it only if it is shared).
    pub fn modify_object(&mut self, change: impl FnOnce(&mut K))
    where
        K: Clone,
    {
        if let Ok(object) = &mut self.object {
            change(Arc::make_mut(object));
        }
    }

    /// Shares `previous`'s decoded object when this one equals it (a Node heartbeat: same
    /// kept fields, new resourceVersion), so that the cache and the snapshots built before hold
    /// one copy instead of two.
    pub fn share_unchanged(&mut self, previous: &Self)
    where
        K: PartialEq,
    {
        if let (Ok(object), Ok(kept)) = (&mut self.object, &previous.object) {
            if !Arc::ptr_eq(object, kept) && object == kept {
                *object = kept.clone();
            }
        }
    }

    /// The decoded object, or why it could not be decoded.
    pub fn object(&self) -> Result<&Arc<K>, &Undecodable> {
        self.object.as_ref()
    }
}

/// How a kind is decoded into a [`Lenient`]: through a `serde_json::Value` by default
/// ([`decode_via_value`]), so that an object our types cannot read fails alone; a kind may
/// decode more cheaply when it cannot fail that way (Nodes, see [`super::slim_node`]).
pub trait Decode: Sized {
    fn decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Lenient<Self>, D::Error>;
}

impl<'de, K: Decode> Deserialize<'de> for Lenient<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::decode(deserializer)
    }
}

/// Whether a decode keeps `metadata.managedFields`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManagedFields {
    Drop,
    Keep,
}

/// The per-object decode: the whole object to a `Value`, its metadata strictly, the typed
/// object keeping the error instead of failing.
pub fn decode_via_value<'de, K: DeserializeOwned, D: Deserializer<'de>>(
    deserializer: D,
    managed_fields: ManagedFields,
) -> Result<Lenient<K>, D::Error> {
    let mut value = serde_json::Value::deserialize(deserializer)?;
    let meta = value.get_mut("metadata").and_then(|m| m.as_object_mut());
    // Out of the metadata the wrapper reads; back in the object's when kept.
    let managed = meta.and_then(|meta| meta.remove("managedFields"));
    let metadata = match value.get("metadata") {
        Some(meta) => ObjectMeta::deserialize(meta).map_err(D::Error::custom)?,
        None => ObjectMeta::default(),
    };
    if let (ManagedFields::Keep, Some(managed)) = (managed_fields, managed) {
        if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.insert("managedFields".to_string(), managed);
        }
    }
    let object = serde_json::from_value::<K>(value)
        .map(Arc::new)
        .map_err(|error| Undecodable(error.to_string()));
    // A decoded object carries its own metadata; the wrapper keeps only what identifies
    // it, instead of a second copy of every label and annotation (thousands of Nodes).
    let metadata = match object {
        Ok(_) => identity(&metadata),
        Err(_) => metadata,
    };
    Ok(Lenient { metadata, object })
}

/// What the wrapper keeps of a decoded object's metadata: name, namespace, uid, resourceVersion.
pub fn identity(metadata: &ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: metadata.name.clone(),
        namespace: metadata.namespace.clone(),
        uid: metadata.uid.clone(),
        resource_version: metadata.resource_version.clone(),
        ..ObjectMeta::default()
    }
}

/// Kinds decoded through a `Value`: custom resources (their schemas may allow what our types
/// do not read) and the small built-in kinds, of which there are a handful.
macro_rules! decode_via_value {
    ($managed_fields:expr => $($kind:ty),* $(,)?) => {$(
        impl Decode for $kind {
            fn decode<'de, D: Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Lenient<Self>, D::Error> {
                decode_via_value(deserializer, $managed_fields)
            }
        }
    )*};
}

// What a node is served of a MachineConfig includes its managedFields (see the module doc).
decode_via_value!(ManagedFields::Keep => crate::api::MachineConfig);

decode_via_value!(
    ManagedFields::Drop =>
    crate::api::MachineConfigPool,
    crate::api::ControllerConfig,
    crate::api::imagebuild::MachineOSConfig,
    crate::api::imagebuild::MachineOSBuild,
    crate::api::imagebuild::Route,
    crate::api::machineconfignode::MachineConfigNode,
    k8s_openapi::api::core::v1::ConfigMap,
    k8s_openapi::api::core::v1::Service,
);

impl<K: Resource> Resource for Lenient<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MachineConfig;

    #[test]
    fn broken_object_keeps_its_metadata_and_the_reason() {
        let parsed: Lenient<MachineConfig> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rendered-worker-1", "resourceVersion": "12"},
            "spec": {"fips": "not a bool"}
        }))
        .expect("metadata is valid, so the wrapper decodes");
        assert_eq!(parsed.name(), "rendered-worker-1");
        assert_eq!(parsed.resource_version(), "12");
        let reason = parsed.object().expect_err("spec.fips is a string");
        assert!(
            reason.0.contains("fips") || reason.0.contains("boolean"),
            "{reason}"
        );
    }

    #[test]
    fn a_list_with_one_broken_object_still_decodes() {
        let items: Vec<Lenient<MachineConfig>> = serde_json::from_value(serde_json::json!([
            {"metadata": {"name": "good"}, "spec": {"fips": true}},
            {"metadata": {"name": "bad"}, "spec": {"kernelArguments": "one string"}}
        ]))
        .expect("list decodes");
        assert!(items[0].object().is_ok_and(|mc| mc.spec.fips));
        assert!(items[1].object().is_err());
    }

    #[test]
    fn labels_are_kept_once() {
        let parsed: Lenient<MachineConfig> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "mc", "namespace": "", "uid": "u", "resourceVersion": "3",
                         "labels": {"a": "b"}, "annotations": {"c": "d"}},
            "spec": {}
        }))
        .expect("decodes");
        assert_eq!(parsed.meta().labels, None);
        assert_eq!(parsed.meta().uid.as_deref(), Some("u"));
        assert_eq!(parsed.resource_version(), "3");
        let object = parsed.object().expect("valid");
        assert_eq!(object.metadata.labels.as_ref().map(|l| l.len()), Some(1));
        // An object that does not decode keeps all its metadata (its only copy).
        let broken: Lenient<MachineConfig> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "mc", "labels": {"a": "b"}},
            "spec": {"fips": "no"}
        }))
        .expect("metadata decodes");
        assert!(broken.meta().labels.is_some());
    }

    #[test]
    fn managed_fields_are_dropped_except_a_machine_configs() {
        let object = serde_json::json!({
            "metadata": {"name": "o", "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {}
        });
        let pool: Lenient<crate::api::MachineConfigPool> =
            serde_json::from_value(object.clone()).expect("decodes");
        assert!(pool.meta().managed_fields.is_none());
        let decoded = pool.object().expect("valid");
        assert!(decoded.metadata.managed_fields.is_none());
        // A MachineConfig keeps them in its object (served back to nodes), not in the wrapper.
        let mc: Lenient<MachineConfig> = serde_json::from_value(object).expect("decodes");
        assert!(mc.meta().managed_fields.is_none());
        let decoded = mc.object().expect("valid");
        let kept = decoded
            .metadata
            .managed_fields
            .as_deref()
            .unwrap_or_default();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].manager.as_deref(), Some("kubectl"));
    }
}
