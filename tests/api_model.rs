//! The guard for the API model (`src/api`): every JSON name our types write is one the real CRD
//! declares at that place, and real objects pass through our types without losing, renaming or
//! retyping anything the CRD declares.
//!
//! - The walk and the acronym checks against the real CRDs are upstream-tier tests
//!   (`MCS_UPSTREAM_ASSETS`); the same acronym names are also checked in the self-contained tier
//!   on what our types serialize.
//! - The round trip runs on the bundled example, the project's fixtures, a hand-made object with
//!   every declared field set, and (upstream tier) the fixture the original operator rendered.

use std::path::Path;
use support::tier;

use kube::CustomResourceExt;
use machine_config_server::api::imagebuild::{MachineOSBuild, MachineOSConfig, Route};
use machine_config_server::api::infrastructure::Infrastructure;
use machine_config_server::api::machineconfignode::MachineConfigNode;
use machine_config_server::api::{ControllerConfig, MachineConfig, MachineConfigPool};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use support::{fixtures, upstream};

/// Every kind the server reads or writes, with the schema derived from our type.
fn derived_schemas() -> Vec<(&'static str, Value)> {
    let schema = |crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
        let crd = serde_json::to_value(crd).expect("CRD serializes");
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
    };
    vec![
        ("MachineConfig", schema(MachineConfig::crd())),
        ("MachineConfigPool", schema(MachineConfigPool::crd())),
        ("ControllerConfig", schema(ControllerConfig::crd())),
        ("MachineOSConfig", schema(MachineOSConfig::crd())),
        ("MachineOSBuild", schema(MachineOSBuild::crd())),
        ("MachineConfigNode", schema(MachineConfigNode::crd())),
        ("Route", schema(Route::crd())),
        ("Infrastructure", schema(Infrastructure::crd())),
    ]
}

/// [`real_schemas`] of the real CRDs (`crds/`) and the `config.openshift.io` ones
/// (`crds-config/`).
fn every_real_schema() -> std::collections::BTreeMap<String, Value> {
    let mut real = real_schemas(&upstream::crds());
    if let Some(config) = upstream::config_crds_if_present() {
        real.extend(real_schemas(&config));
    }
    real
}

/// The storage version's schema of every real CRD, by kind.
fn real_schemas(dir: &Path) -> std::collections::BTreeMap<String, Value> {
    let mut out = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("CRD directory") {
        let path = entry.expect("entry").path();
        if !matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("CRD file");
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let crd: Value = serde::Deserialize::deserialize(doc).expect("CRD is YAML");
            if crd["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let versions = crd["spec"]["versions"].as_array().expect("versions");
            let version = versions
                .iter()
                .find(|v| v["storage"] == true)
                .expect("a storage version");
            out.insert(
                crd["spec"]["names"]["kind"]
                    .as_str()
                    .expect("kind")
                    .to_string(),
                version["schema"]["openAPIV3Schema"].clone(),
            );
        }
    }
    out
}

/// Every property our schema declares below `ours` that `real` does not declare at the same
/// place, or declares with another type.
fn undeclared(ours: &Value, real: &Value, path: &str, problems: &mut Vec<String>) {
    if let (Some(a), Some(b)) = (ours["type"].as_str(), real["type"].as_str()) {
        if a != b {
            problems.push(format!("{path}: we write {a}, the CRD declares {b}"));
            return;
        }
    }
    if let Some(properties) = ours["properties"].as_object() {
        for (name, schema) in properties {
            let at = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            // The envelope comes from Kubernetes, not from the CRD's schema.
            if path.is_empty() && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match real["properties"].get(name) {
                Some(declared) => undeclared(schema, declared, &at, problems),
                None => problems.push(format!("{at}: not declared by the real CRD")),
            }
        }
    }
    if ours.get("items").is_some() {
        undeclared(
            &ours["items"],
            &real["items"],
            &format!("{path}[]"),
            problems,
        );
    }
}

/// Names our types model that the real CRDs beside us do not declare yet, each with why. The
/// publisher writes them only where the served CRD declares them (it learns that from the
/// API server's strict field validation). Each must stay undeclared here: once the real CRD
/// declares it, the walk checks it like every other name and the entry must go.
const DECLARED_ONLY_BY_NEWER_CRDS: &[(&str, &str, &str)] = &[
    (
        "MachineConfigNode",
        "spec.configImage",
        "declared by the MachineConfigNode CRD of newer API versions (image mode)",
    ),
    (
        "MachineConfigNode",
        "status.configImage",
        "declared by the MachineConfigNode CRD of newer API versions (image mode)",
    ),
];

#[tier(upstream)]
#[test]
fn every_name_our_types_write_is_declared_by_the_real_crd() {
    let real = every_real_schema();
    for (kind, path, why) in DECLARED_ONLY_BY_NEWER_CRDS {
        assert!(
            !at(&real[*kind], path).is_object(),
            "the real {kind} CRD now declares {path} ({why}): remove the exception"
        );
    }
    let mut problems = Vec::new();
    for (kind, ours) in derived_schemas() {
        let declared = real
            .get(kind)
            .unwrap_or_else(|| panic!("no real CRD for {kind}"));
        let mut found = Vec::new();
        undeclared(&ours, declared, "", &mut found);
        found.retain(|p| {
            !DECLARED_ONLY_BY_NEWER_CRDS
                .iter()
                .any(|(k, path, _)| *k == kind && p.starts_with(&format!("{path}:")))
        });
        problems.extend(found.into_iter().map(|p| format!("{kind} {p}")));
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The names a case-conversion rule gets wrong, one by one: (kind, path).
const ACRONYM_FIELDS: &[(&str, &str)] = &[
    ("MachineConfig", "spec.osImageURL"),
    ("MachineConfig", "spec.baseOSExtensionsContainerImage"),
    ("ControllerConfig", "spec.kubeAPIServerServingCAData"),
    ("ControllerConfig", "spec.rootCAData"),
    ("ControllerConfig", "spec.cloudProviderCAData"),
    ("ControllerConfig", "spec.additionalTrustBundle"),
    ("ControllerConfig", "spec.internalRegistryPullSecret"),
    ("ControllerConfig", "spec.imageRegistryBundleData"),
    ("ControllerConfig", "spec.imageRegistryBundleUserData"),
    ("MachineOSBuild", "spec.machineOSConfig"),
    ("MachineOSBuild", "status.digestedImagePushSpec"),
    ("MachineOSConfig", "status.currentImagePullSpec"),
    ("MachineOSConfig", "status.machineOSBuild"),
    ("Infrastructure", "status.apiServerInternalURI"),
    (
        "Infrastructure",
        "status.platformStatus.baremetal.apiServerInternalIPs",
    ),
    (
        "Infrastructure",
        "status.platformStatus.openstack.apiServerInternalIPs",
    ),
    (
        "Infrastructure",
        "status.platformStatus.ovirt.apiServerInternalIPs",
    ),
    (
        "Infrastructure",
        "status.platformStatus.vsphere.apiServerInternalIPs",
    ),
];

fn at<'a>(schema: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .fold(schema, |node, name| &node["properties"][name])
}

#[tier(upstream)]
#[test]
fn acronym_fields_are_declared_by_the_real_crd_under_our_names() {
    let real = every_real_schema();
    let ours: std::collections::BTreeMap<_, _> = derived_schemas().into_iter().collect();
    for (kind, path) in ACRONYM_FIELDS {
        assert!(
            at(&ours[kind], path).is_object(),
            "our {kind} has no {path}"
        );
        assert!(
            at(&real[*kind], path).is_object(),
            "the real {kind} CRD does not declare {path}"
        );
    }
}

fn value_at<'a>(object: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(object, |node, name| &node[name])
}

/// A MachineConfig with every declared spec field set (acronyms included).
fn full_machine_config() -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "rendered-worker-full"},
        "spec": {
            "baseOSExtensionsContainerImage": "quay.example.com/rhcos-extensions@sha256:aaaa",
            "config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [
                {"path": "/etc/x", "contents": {"source": "data:,x"}, "mode": 420}
            ]}},
            "extensions": ["usbguard", "kerberos"],
            "fips": true,
            "kernelArguments": ["nosmt", "mitigations=auto"],
            "kernelType": "realtime",
            "osImageURL": "quay.example.com/rhcos@sha256:bbbb"
        }
    })
}

/// Hand-made objects of the other kinds with every field our types model set.
fn full_objects() -> Vec<Value> {
    let ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";
    vec![
        full_machine_config(),
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "ControllerConfig",
            "metadata": {"name": "machine-config-controller"},
            "spec": {
                "kubeAPIServerServingCAData": ca, "rootCAData": ca, "cloudProviderCAData": ca,
                "additionalTrustBundle": ca, "internalRegistryPullSecret": ca,
                "imageRegistryBundleData": [{"file": "registry..5000", "data": ca}],
                "imageRegistryBundleUserData": [{"file": "user.example.com", "data": ca}],
                "clusterDNSIP": "172.30.0.10", "ipFamilies": "IPv4"
            }
        }),
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSBuild",
            "metadata": {"name": "b"},
            "spec": {"machineConfig": {"name": "rendered-x"}, "machineOSConfig": {"name": "m"},
                     "renderedImagePushSpec": "registry.example.com/x:latest"},
            "status": {"digestedImagePushSpec": "registry.example.com/x@sha256:cccc",
                       "buildStart": "2026-01-01T00:00:00Z", "buildEnd": "2026-01-01T00:10:00Z",
                       "conditions": [{"type": "Succeeded", "status": "True", "reason": "Ready",
                                       "message": "", "lastTransitionTime": "2026-01-01T00:10:00Z"}]}
        }),
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSConfig",
            "metadata": {"name": "m"},
            "spec": {"machineConfigPool": {"name": "layered"},
                     "renderedImagePushSpec": "registry.example.com/x:latest",
                     "imageBuilder": {"imageBuilderType": "Job"}},
            "status": {"currentImagePullSpec": "registry.example.com/x@sha256:cccc",
                       "machineOSBuild": {"group": "machineconfiguration.openshift.io",
                                          "resource": "machineosbuilds", "name": "b"},
                       "observedGeneration": 2}
        }),
    ]
}

#[test]
fn acronym_fields_are_written_under_their_real_names() {
    for object in full_objects() {
        let back = round_trip(&object);
        for (kind, path) in ACRONYM_FIELDS {
            if object["kind"] == *kind {
                assert_eq!(
                    value_at(&back, path),
                    value_at(&object, path),
                    "{kind} {path} after a pass through our types"
                );
                assert!(!value_at(&back, path).is_null(), "{kind} {path} is set");
            }
        }
    }
}

fn through<T: DeserializeOwned + Serialize>(object: &Value) -> Value {
    let typed: T = serde_json::from_value(object.clone())
        .unwrap_or_else(|e| panic!("{} {}: {e}", object["kind"], object["metadata"]["name"]));
    serde_json::to_value(&typed).expect("serializes")
}

/// `object` read into our type of its kind and written back.
fn round_trip(object: &Value) -> Value {
    match object["kind"].as_str() {
        Some("MachineConfig") => through::<MachineConfig>(object),
        Some("MachineConfigPool") => through::<MachineConfigPool>(object),
        Some("ControllerConfig") => through::<ControllerConfig>(object),
        Some("MachineOSConfig") => through::<MachineOSConfig>(object),
        Some("MachineOSBuild") => through::<MachineOSBuild>(object),
        Some("MachineConfigNode") => through::<MachineConfigNode>(object),
        other => panic!("no type for kind {other:?}"),
    }
}

/// Where `back` lost, renamed or retyped something of `original` (a `null` may come back
/// absent: Kubernetes does not tell them apart).
fn losses(original: &Value, back: &Value, path: &str, out: &mut Vec<String>) {
    match (original, back) {
        (Value::Null, Value::Null) => {}
        (Value::Null, _) if path.is_empty() => {}
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let at = format!("{path}.{key}");
                match b.get(key) {
                    Some(again) => losses(value, again, &at, out),
                    None if value.is_null() => {}
                    None => out.push(format!("{at}: lost")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                losses(x, y, &format!("{path}[{i}]"), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path}: {a} came back as {b}")),
    }
}

/// Every object of the YAML files below `dir` (recursively), skipping non-objects.
fn objects_in(dir: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixture directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                // Broken inputs are refused elsewhere; they are no objects to pass through.
                if path.file_name().is_none_or(|n| n != "broken") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("fixture");
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let value = <Value as serde::Deserialize>::deserialize(doc)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                if value["kind"].is_string() {
                    out.push((path.display().to_string(), value));
                }
            }
        }
    }
    out
}

fn assert_lossless(objects: &[(String, Value)]) {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (file, object) in objects {
        if !object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("machineconfiguration.openshift.io/"))
            || object["kind"] == "APIServer"
        {
            continue;
        }
        let back = round_trip(object);
        for part in ["spec", "status"] {
            losses(&object[part], &back[part], part, &mut problems);
        }
        problems.iter_mut().for_each(|p| {
            if !p.starts_with('/') {
                *p = format!("{file}: {p}");
            }
        });
        checked += 1;
    }
    assert!(checked > 0, "no objects checked");
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_example_and_project_fixtures_pass_through_our_types_losslessly() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut objects = objects_in(&repo.join("config/bootstrap"));
    objects.extend(objects_in(&fixtures::generated()));
    assert_lossless(&objects);
}

#[test]
fn hand_made_objects_with_every_field_set_pass_through_losslessly() {
    let objects: Vec<_> = full_objects()
        .into_iter()
        .map(|o| ("hand-made".to_string(), o))
        .collect();
    assert_lossless(&objects);
    // The MachineConfig exactly: every declared spec field, nothing added.
    let mc = full_machine_config();
    assert_eq!(round_trip(&mc)["spec"], mc["spec"]);
}

#[tier(upstream)]
#[test]
fn the_upstream_rendered_fixture_passes_through_our_types_losslessly() {
    assert_lossless(&objects_in(&upstream::realistic_fixture()));
}

#[test]
fn nil_and_empty_lists_stay_apart_and_empty_fields_are_written_as_go_writes_them() {
    let sparse = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "rendered-sparse"},
        "spec": {"config": {"ignition": {"version": "3.4.0"}}, "extensions": []}
    });
    // Go's MachineConfigSpec has no omitempty: every field is written, a nil list as null.
    assert_eq!(
        round_trip(&sparse)["spec"],
        json!({
            "osImageURL": "",
            "baseOSExtensionsContainerImage": "",
            "config": {"ignition": {"version": "3.4.0"}},
            "kernelArguments": null,
            "extensions": [],
            "fips": false,
            "kernelType": ""
        })
    );
}
