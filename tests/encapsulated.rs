//! What a node boots with as its current MachineConfig: the encapsulated MachineConfig
//! (`/etc/ignition-machine-config-encapsulated.json`) and the MachineConfig content
//! (`/etc/mcs-machine-config-content.json`) the server appends. Their `spec` equals the source
//! MachineConfig's `spec` field by field, names and values, except where a documented rule
//! changes it: the encapsulated `spec.config` is an empty config of spec 3.5 in bootstrap mode
//! (the original's bootstrap server encapsulates its newest whatever was asked), and below spec
//! 3.3 Ignition `kernelArguments.shouldExist` moves into `spec.kernelArguments`.
//! (Cluster mode and layered pools: tests/cluster_http.rs and tests/layered_cluster.rs.)

use std::path::Path;
use support::fixtures;
use support::mcs;
use support::tier;
use support::upstream;

use serde_json::{json, Value};

const ENCAPSULATED: &str = "/etc/ignition-machine-config-encapsulated.json";
const MC_CONTENT: &str = "/etc/mcs-machine-config-content.json";

/// The rendered MachineConfig a bootstrap directory serves for `pool`, as JSON.
fn source_machine_config(base: &Path, pool: &str) -> Value {
    let read = |path: &Path| -> Value {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let pool = read(&base.join(format!("machine-pools/{pool}.yaml")));
    let name = pool["status"]["configuration"]["name"]
        .as_str()
        .expect("the pool names its rendered config");
    read(&base.join(format!("machine-configs/{name}.yaml")))
}

/// Every field of `source`'s spec but `config` is in `served`'s spec with the same name and
/// value (a `null` in the source may be written as `null`; an absent field as Go's empty value).
fn assert_same_spec_fields(label: &str, source: &Value, served: &Value) {
    let source = source["spec"].as_object().expect("source spec");
    let served_spec = served["spec"].as_object().expect("served spec");
    for (field, value) in source {
        if field == "config" {
            continue;
        }
        assert_eq!(
            served_spec.get(field),
            Some(value),
            "{label}: spec.{field} (served spec: {served_spec:?})"
        );
    }
}

fn served_file(config: &Value, path: &str) -> Value {
    let (_, bytes) = mcs::served_files(config)
        .into_iter()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| panic!("{path} is served"));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path} is JSON: {e}"))
}

fn check_bootstrap_dir(base: &Path) {
    let source = source_machine_config(base, "master");
    let server = mcs::Server::bootstrap(base, &[]);
    for version in ["3.4.0", "3.2.0"] {
        let accept = format!("application/vnd.coreos.ignition+json;version={version}");
        let response = server.http("GET", "/config/master", &[("Accept", &accept)]);
        assert_eq!(response.status, 200, "{}", server.output());
        let config = response.json();
        let label = format!("{} as {version}", base.display());

        let encapsulated = served_file(&config, ENCAPSULATED);
        assert_eq!(encapsulated["metadata"]["name"], source["metadata"]["name"]);
        assert_eq!(
            encapsulated["spec"]["config"],
            json!({"ignition": {"version": "3.5.0"}}),
            "{label}: the documented rule: an empty config of spec 3.5, whatever was asked"
        );
        let content = served_file(&config, MC_CONTENT);
        let moved = source["spec"]["config"]["kernelArguments"]["shouldExist"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
        if version == "3.2.0" && moved {
            // Documented rule: the daemon applies them from spec.kernelArguments.
            continue;
        }
        assert_same_spec_fields(&format!("{label} encapsulated"), &source, &encapsulated);
        assert_same_spec_fields(&format!("{label} content"), &source, &content);
        assert_eq!(
            content["spec"]["config"], source["spec"]["config"],
            "{label}: the content file carries the config as it is"
        );
    }
}

#[test]
fn the_example_encapsulates_its_machine_config_unchanged() {
    check_bootstrap_dir(&mcs::repo().join("config/bootstrap"));
}

#[test]
fn the_full_size_fixture_encapsulates_its_machine_config_unchanged() {
    let base = fixtures::bootstrap_full();
    // The fixture sets every spec field, acronyms included, so the check cannot pass vacuously.
    let source = source_machine_config(&base, "master");
    for field in [
        "baseOSExtensionsContainerImage",
        "osImageURL",
        "kernelArguments",
    ] {
        assert!(
            source["spec"][field]
                .as_str()
                .map_or(source["spec"][field].is_array(), |s| !s.is_empty()),
            "the fixture sets spec.{field}"
        );
    }
    check_bootstrap_dir(&base);
}

#[tier(upstream)]
#[test]
fn the_upstream_rendered_fixture_encapsulates_its_machine_config_unchanged() {
    check_bootstrap_dir(&upstream::realistic_fixture());
}
