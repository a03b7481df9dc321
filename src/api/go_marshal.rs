//! A MachineConfig as the original marshals it into the files it serves: the MachineConfig
//! content (`json.MarshalIndent(mc, "", "    ")`) and the encapsulated MachineConfig
//! (`json.Marshal(mc)`), both with `github.com/clarketm/json` (`pkg/server/server.go`,
//! `appendInitialMachineConfig` and `appendEncapsulated`, at 7ff337a4f). Byte for byte:
//!
//! - **Go's field order**, not alphabetical: `kind`, `apiVersion` (inline `metav1.TypeMeta`),
//!   `metadata`, `spec`; metadata in `metav1.ObjectMeta`'s order (`name`, `generateName`,
//!   `namespace`, `selfLink`, `uid`, `resourceVersion`, `generation`, `creationTimestamp`,
//!   `deletionTimestamp`, `deletionGracePeriodSeconds`, `labels`, `annotations`,
//!   `ownerReferences`, `finalizers`, `managedFields`; `k8s.io/apimachinery/pkg/apis/meta/v1/
//!   types.go`), owner references and managed-fields entries in their structs' orders, the
//!   spec in `MachineConfigSpec`'s (`github.com/openshift/api/machineconfiguration/v1/types.go`).
//!   Maps (labels, annotations) sorted, as Go writes a map.
//! - **`omitempty` as clarketm reads it**: every metadata field is left out when empty (a
//!   zero number, an empty string, list or map, a nil pointer). `creationTimestamp` is never
//!   written: `metav1.Time` is `struct{ time.Time }`, and clarketm's `isEmptyValue` calls a
//!   struct empty when all its exported fields are empty, skipping unexported ones; `time.Time`
//!   has only unexported fields, so every `Time` is "empty" (`clarketm/json/encode.go`,
//!   `isEmptyValue`; the tag's `omitzero` is unknown to that fork). `deletionTimestamp` and
//!   `managedFields[].time` are pointers, empty only when nil, so they are written (RFC 3339,
//!   UTC, seconds: `metav1.Time.MarshalJSON`).
//! - **TypeMeta as the original's object has it** ([`Origin`]): none for an object from its
//!   informers (client-go's typed decoders clear the group-version-kind of what they decode,
//!   `runtime.WithoutVersionDecoder`, and the informers receive every object decoded one by one
//!   from a streaming watch list, `WatchListClient` on by default since client-go 1.35), the
//!   file's for an object read from a bootstrap YAML file (`ghodss/yaml.Unmarshal`).
//! - **`managedFields` kept**, `fieldsV1` as the API server sent it.
//! - **`spec.config` raw** (`runtime.RawExtension`): the bytes the original received, re-escaped
//!   by clarketm's `compact`; left out when absent or null (`omitempty`, an empty
//!   RawExtension). From the API server its keys come in the order it wrote them (sorted); from
//!   a bootstrap file `ghodss/yaml` converted the YAML through a Go map, so they are sorted.
//!
//! Strings are escaped as [`crate::ignition::gojson`] describes: clarketm's rules for what the
//! original encodes itself, Go 1.22's for the raw JSON it passes through. Pure; no I/O.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ManagedFieldsEntry, ObjectMeta, OwnerReference, Time,
};
use serde_json::Value;

use super::{MachineConfig, MachineConfigSpec, RawConfig};
use crate::ignition::gojson::{self, Escaping, Keys};

/// Where the original's MachineConfig object came from, which decides its TypeMeta and the
/// order of `spec.config`'s keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin<'a> {
    /// Cluster mode: the original's informer cache. No `kind`/`apiVersion`; `spec.config` and
    /// `fieldsV1` in the order the API server wrote them (which a value decoded from its JSON
    /// keeps).
    Informer,
    /// Bootstrap mode: a YAML file, with the `kind` and `apiVersion` it names (each left out
    /// when empty); `spec.config`'s keys sorted.
    File { kind: &'a str, api_version: &'a str },
}

/// `json.Marshal(mc)` as the original's encoder writes it (the encapsulated MachineConfig).
pub fn marshal(mc: &MachineConfig, origin: Origin<'_>) -> Vec<u8> {
    let metadata = object_meta(&mc.metadata);
    // The config is nearly all of it: room for its text from the start, and the spec written
    // in place (grown by doubling, or copied in, megabytes would be held twice).
    let config_len = mc.spec.config.as_ref().map_or(0, RawConfig::len);
    let mut out = Vec::with_capacity(metadata.len() + config_len + config_len / 64 + 512);
    let mut members = Members::open(&mut out);
    if let Origin::File { kind, api_version } = origin {
        members.string_omitempty("kind", kind);
        members.string_omitempty("apiVersion", api_version);
    }
    // `metadata,omitempty`: an ObjectMeta whose every field is empty is left out.
    if metadata != b"{}" {
        members.key("metadata").extend_from_slice(&metadata);
    }
    machine_config_spec(members.key("spec"), &mc.spec, origin);
    members.close();
    out
}

/// The indent of the MachineConfig content, `json.MarshalIndent(mc, "", INDENT)`: Go's
/// `MarshalIndent` is `Marshal` then `Indent`, so the content is [`marshal`]'s bytes through
/// [`gojson::indent`] (or [`gojson::indent_into`], as a render writes it) with this indent.
pub const INDENT: &str = "    ";

/// `MachineConfigSpec` in Go's field order; only `config` is `omitempty`.
fn machine_config_spec(out: &mut Vec<u8>, spec: &MachineConfigSpec, origin: Origin<'_>) {
    let mut members = Members::open(out);
    members.string("osImageURL", &spec.os_image_url);
    members.string(
        "baseOSExtensionsContainerImage",
        &spec.base_os_extensions_container_image,
    );
    if let Some(config) = spec
        .config
        .as_ref()
        .map(RawConfig::value)
        .filter(|c| !c.is_null())
    {
        let keys = match origin {
            Origin::Informer => Keys::AsGiven,
            Origin::File { .. } => Keys::Sorted,
        };
        gojson::write_value(members.key("config"), &config, Escaping::Go122, keys);
    }
    members.nullable_strings("kernelArguments", spec.kernel_arguments.as_deref());
    members.nullable_strings("extensions", spec.extensions.as_deref());
    members.bool("fips", spec.fips);
    members.string("kernelType", &spec.kernel_type);
    members.close();
}

/// `metav1.ObjectMeta` in Go's field order, every field `omitempty` as clarketm reads it.
fn object_meta(meta: &ObjectMeta) -> Vec<u8> {
    let mut out = Vec::new();
    let mut members = Members::open(&mut out);
    members.option_string_omitempty("name", meta.name.as_deref());
    members.option_string_omitempty("generateName", meta.generate_name.as_deref());
    members.option_string_omitempty("namespace", meta.namespace.as_deref());
    members.option_string_omitempty("selfLink", meta.self_link.as_deref());
    members.option_string_omitempty("uid", meta.uid.as_deref());
    members.option_string_omitempty("resourceVersion", meta.resource_version.as_deref());
    if let Some(generation) = meta.generation.filter(|g| *g != 0) {
        members
            .key("generation")
            .extend_from_slice(generation.to_string().as_bytes());
    }
    // `creationTimestamp`: never (see the module doc).
    if let Some(time) = &meta.deletion_timestamp {
        members.time("deletionTimestamp", time);
    }
    if let Some(seconds) = meta.deletion_grace_period_seconds {
        members
            .key("deletionGracePeriodSeconds")
            .extend_from_slice(seconds.to_string().as_bytes());
    }
    members.map_omitempty("labels", meta.labels.as_ref());
    members.map_omitempty("annotations", meta.annotations.as_ref());
    if let Some(owners) = meta.owner_references.as_deref().filter(|o| !o.is_empty()) {
        array(members.key("ownerReferences"), owners, owner_reference);
    }
    if let Some(finalizers) = meta.finalizers.as_deref().filter(|f| !f.is_empty()) {
        strings(members.key("finalizers"), finalizers);
    }
    if let Some(entries) = meta.managed_fields.as_deref().filter(|m| !m.is_empty()) {
        array(members.key("managedFields"), entries, managed_fields_entry);
    }
    members.close();
    out
}

/// `metav1.OwnerReference`: `apiVersion`, `kind`, `name`, `uid` always; the two flags when set.
fn owner_reference(out: &mut Vec<u8>, owner: &OwnerReference) {
    let mut members = Members::open(out);
    members.string("apiVersion", &owner.api_version);
    members.string("kind", &owner.kind);
    members.string("name", &owner.name);
    members.string("uid", &owner.uid);
    members.option_bool("controller", owner.controller);
    members.option_bool("blockOwnerDeletion", owner.block_owner_deletion);
    members.close();
}

/// `metav1.ManagedFieldsEntry`, every field `omitempty`; `fieldsV1` is raw JSON.
fn managed_fields_entry(out: &mut Vec<u8>, entry: &ManagedFieldsEntry) {
    let mut members = Members::open(out);
    members.option_string_omitempty("manager", entry.manager.as_deref());
    members.option_string_omitempty("operation", entry.operation.as_deref());
    members.option_string_omitempty("apiVersion", entry.api_version.as_deref());
    if let Some(time) = &entry.time {
        members.time("time", time);
    }
    members.option_string_omitempty("fieldsType", entry.fields_type.as_deref());
    if let Some(fields) = &entry.fields_v1 {
        gojson::write_value(
            members.key("fieldsV1"),
            &fields.0,
            Escaping::Go122,
            Keys::AsGiven,
        );
    }
    members.option_string_omitempty("subresource", entry.subresource.as_deref());
    members.close();
}

fn strings(out: &mut Vec<u8>, items: &[String]) {
    array(out, items, |out, item| {
        gojson::write_str(out, item, Escaping::Clarketm)
    });
}

/// A JSON array of `items`, each written by `write`.
fn array<T>(out: &mut Vec<u8>, items: &[T], write: impl Fn(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item);
    }
    out.push(b']');
}

/// The members of one JSON object being written, in the order they are added.
struct Members<'o> {
    out: &'o mut Vec<u8>,
    empty: bool,
}

impl<'o> Members<'o> {
    fn open(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Members { out, empty: true }
    }

    /// Writes `"key":` and returns the buffer for the value.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        gojson::write_str(self.out, key, Escaping::Clarketm);
        self.out.push(b':');
        self.out
    }

    fn string(&mut self, key: &str, value: &str) {
        gojson::write_str(self.key(key), value, Escaping::Clarketm);
    }

    fn string_omitempty(&mut self, key: &str, value: &str) {
        if !value.is_empty() {
            self.string(key, value);
        }
    }

    fn option_string_omitempty(&mut self, key: &str, value: Option<&str>) {
        self.string_omitempty(key, value.unwrap_or_default());
    }

    fn bool(&mut self, key: &str, value: bool) {
        self.key(key)
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn option_bool(&mut self, key: &str, value: Option<bool>) {
        if let Some(value) = value {
            self.bool(key, value);
        }
    }

    /// `metav1.Time.MarshalJSON`: RFC 3339 in UTC, whole seconds (the format k8s-openapi
    /// writes too).
    fn time(&mut self, key: &str, time: &Time) {
        match serde_json::to_value(time) {
            Ok(Value::String(text)) => gojson::write_str(self.key(key), &text, Escaping::Clarketm),
            _ => self.key(key).extend_from_slice(b"null"),
        }
    }

    /// A `[]string` without `omitempty`: `null` when nil.
    fn nullable_strings(&mut self, key: &str, items: Option<&[String]>) {
        match items {
            None => self.key(key).extend_from_slice(b"null"),
            Some(items) => strings(self.key(key), items),
        }
    }

    /// A `map[string]string` with `omitempty`: sorted keys, left out when nil or empty.
    fn map_omitempty(&mut self, key: &str, map: Option<&BTreeMap<String, String>>) {
        let Some(map) = map.filter(|m| !m.is_empty()) else {
            return;
        };
        let mut inner = Members::open(self.key(key));
        for (name, value) in map {
            inner.string(name, value);
        }
        inner.close();
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An object as the API server sends it: TypeMeta, `creationTimestamp`, owner reference,
    /// `managedFields`, HTML characters in an annotation and in `spec.config`, `spec.config`'s
    /// keys not sorted (the original keeps the raw bytes' order), `\b` and `\f` as the API
    /// server's Go 1.22+ encoder writes them.
    const FROM_THE_API_SERVER: &str = r#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":"rendered-worker-1","uid":"u-1","resourceVersion":"7","generation":2,"creationTimestamp":"2026-11-27T01:14:58Z","labels":{"b":"2","a":"1"},"annotations":{"x":"<&>"},"ownerReferences":[{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfigPool","name":"worker","uid":"p-1","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"machine-config-controller","operation":"Update","apiVersion":"machineconfiguration.openshift.io/v1","time":"2026-11-27T01:14:58Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:config":{}},"f:metadata":{"f:labels":{}}}}]},"spec":{"osImageURL":"q","config":{"z":1,"ignition":{"version":"3.5.0"},"s":"a\b\f<b>\u2028"},"kernelArguments":null,"fips":false,"kernelType":""}}"#;

    /// What the original's encoder writes for [`FROM_THE_API_SERVER`] as its informer holds it:
    /// the output of a Go program built against the original's vendored packages at 7ff337a4f
    /// (`json.Unmarshal` into `mcfgv1.MachineConfig`, TypeMeta cleared as
    /// `runtime.WithoutVersionDecoder` clears it, then `github.com/clarketm/json.Marshal`).
    const AS_THE_ORIGINAL_WRITES_IT: &str = r#"{"metadata":{"name":"rendered-worker-1","uid":"u-1","resourceVersion":"7","generation":2,"labels":{"a":"1","b":"2"},"annotations":{"x":"\u003c\u0026\u003e"},"ownerReferences":[{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfigPool","name":"worker","uid":"p-1","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"machine-config-controller","operation":"Update","apiVersion":"machineconfiguration.openshift.io/v1","time":"2026-11-27T01:14:58Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:config":{}},"f:metadata":{"f:labels":{}}}}]},"spec":{"osImageURL":"q","baseOSExtensionsContainerImage":"","config":{"z":1,"ignition":{"version":"3.5.0"},"s":"a\b\f\u003cb\u003e\u2028"},"kernelArguments":null,"extensions":null,"fips":false,"kernelType":""}}"#;

    fn from_the_api_server() -> MachineConfig {
        serde_json::from_str(FROM_THE_API_SERVER).expect("a MachineConfig")
    }

    #[test]
    fn an_informer_object_is_written_byte_for_byte_as_the_original_writes_it() {
        let mc = from_the_api_server();
        // The rules, each visible in the expected bytes (sources in the module doc):
        // no `kind`/`apiVersion` (client-go's WithoutVersionDecoder); metadata in ObjectMeta's
        // field order; no `creationTimestamp` although the object has one (clarketm's
        // isEmptyValue calls every metav1.Time empty); `managedFields` kept, `time` written;
        // labels sorted (a Go map); `<`, `&`, `>` and U+2028 escaped (HTML escaping);
        // `spec.config` in its raw order with `\b`/`\f` as the API server wrote them;
        // `baseOSExtensionsContainerImage`, `extensions` written although absent (no
        // `omitempty` in MachineConfigSpec).
        assert!(mc.metadata.creation_timestamp.is_some());
        assert_eq!(
            String::from_utf8(marshal(&mc, Origin::Informer)).unwrap(),
            AS_THE_ORIGINAL_WRITES_IT
        );
    }

    #[test]
    fn the_content_file_is_the_same_bytes_indented_as_go_indents_them() {
        // The original: `json.MarshalIndent(mc, "", "    ")` = Marshal, then Indent (the same
        // Go program's output).
        let expected = "{\n    \"metadata\": {\n        \"name\": \"rendered-worker-1\",\n        \"uid\": \"u-1\",\n        \"resourceVersion\": \"7\",\n        \"generation\": 2,\n        \"labels\": {\n            \"a\": \"1\",\n            \"b\": \"2\"\n        },\n        \"annotations\": {\n            \"x\": \"\\u003c\\u0026\\u003e\"\n        },\n        \"ownerReferences\": [\n            {\n                \"apiVersion\": \"machineconfiguration.openshift.io/v1\",\n                \"kind\": \"MachineConfigPool\",\n                \"name\": \"worker\",\n                \"uid\": \"p-1\",\n                \"controller\": true,\n                \"blockOwnerDeletion\": true\n            }\n        ],\n        \"managedFields\": [\n            {\n                \"manager\": \"machine-config-controller\",\n                \"operation\": \"Update\",\n                \"apiVersion\": \"machineconfiguration.openshift.io/v1\",\n                \"time\": \"2026-11-27T01:14:58Z\",\n                \"fieldsType\": \"FieldsV1\",\n                \"fieldsV1\": {\n                    \"f:spec\": {\n                        \"f:config\": {}\n                    },\n                    \"f:metadata\": {\n                        \"f:labels\": {}\n                    }\n                }\n            }\n        ]\n    },\n    \"spec\": {\n        \"osImageURL\": \"q\",\n        \"baseOSExtensionsContainerImage\": \"\",\n        \"config\": {\n            \"z\": 1,\n            \"ignition\": {\n                \"version\": \"3.5.0\"\n            },\n            \"s\": \"a\\b\\f\\u003cb\\u003e\\u2028\"\n        },\n        \"kernelArguments\": null,\n        \"extensions\": null,\n        \"fips\": false,\n        \"kernelType\": \"\"\n    }\n}";
        assert_eq!(
            String::from_utf8(gojson::indent(
                &marshal(&from_the_api_server(), Origin::Informer),
                INDENT
            ))
            .unwrap(),
            expected
        );
    }

    #[test]
    fn a_file_object_keeps_its_type_meta_in_go_order_and_sorts_its_config() {
        let mc = from_the_api_server();
        let written = String::from_utf8(marshal(
            &mc,
            Origin::File {
                kind: "MachineConfig",
                api_version: "machineconfiguration.openshift.io/v1",
            },
        ))
        .unwrap();
        // `metav1.TypeMeta` declares Kind before APIVersion.
        assert!(
            written.starts_with(
                r#"{"kind":"MachineConfig","apiVersion":"machineconfiguration.openshift.io/v1","metadata":{"name":"rendered-worker-1","#
            ),
            "{written}"
        );
        // ghodss/yaml went through a Go map: sorted keys at every depth.
        assert!(
            written.contains(
                r#""config":{"ignition":{"version":"3.5.0"},"s":"a\b\f\u003cb\u003e\u2028","z":1}"#
            ),
            "{written}"
        );
    }

    #[test]
    fn deletion_fields_and_finalizers_are_written_when_set() {
        let mc: MachineConfig = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m", "generation": 0, "deletionTimestamp": "2026-01-02T02:04:05Z",
                         "deletionGracePeriodSeconds": 0, "finalizers": ["a"], "labels": {},
                         "ownerReferences": [{"apiVersion": "v", "kind": "K", "name": "n", "uid": ""}]},
            "spec": {"config": null, "kernelArguments": [], "extensions": ["usbguard"]}
        }))
        .expect("a MachineConfig");
        // Go (the same program's output): a zero generation and an empty map are left out; a
        // set pointer is written even when it points to zero; `uid` of an owner reference has
        // no omitempty; a null config is an empty RawExtension, left out; an empty non-nil
        // list is `[]`.
        assert_eq!(
            String::from_utf8(marshal(&mc, Origin::Informer)).unwrap(),
            r#"{"metadata":{"name":"m","deletionTimestamp":"2026-01-02T02:04:05Z","deletionGracePeriodSeconds":0,"ownerReferences":[{"apiVersion":"v","kind":"K","name":"n","uid":""}],"finalizers":["a"]},"spec":{"osImageURL":"","baseOSExtensionsContainerImage":"","kernelArguments":[],"extensions":["usbguard"],"fips":false,"kernelType":""}}"#
        );
    }

    #[test]
    fn empty_metadata_is_left_out_and_nil_lists_are_null() {
        let mc = MachineConfig::new("", Default::default());
        assert_eq!(
            String::from_utf8(marshal(&mc, Origin::Informer)).unwrap(),
            r#"{"spec":{"osImageURL":"","baseOSExtensionsContainerImage":"","kernelArguments":null,"extensions":null,"fips":false,"kernelType":""}}"#
        );
        assert_eq!(
            String::from_utf8(marshal(
                &mc,
                Origin::File {
                    kind: "MachineConfig",
                    api_version: ""
                }
            ))
            .unwrap(),
            r#"{"kind":"MachineConfig","spec":{"osImageURL":"","baseOSExtensionsContainerImage":"","kernelArguments":null,"extensions":null,"fips":false,"kernelType":""}}"#
        );
    }
}
