//! Rendering a decoded MachineConfig or ControllerConfig the way the bootstrap server does
//! (`render::render` on a snapshot holding pool `master`), for every served spec version, and
//! the properties of what is served.
//!
//! Properties of a render: deterministic (checked at the newest spec); a failure is one of the kinds a bad input may cause
//! (`parse`, `kernel_arguments`, `translate`, `invalid_input`), consistent with the Ignition
//! engine (a `parse` failure is one `parse_config` reports, a `kernel_arguments` failure is a
//! spec below 3.3 with `shouldNotExist` set). A served body is JSON in the requested spec that
//! re-parses and validates, and (3.x) translating the re-parsed config gives the same document;
//! it carries each appended node file once, with the right contents: the kubeconfig, the node
//! annotations naming the MachineConfig, the MachineConfig itself (re-decoded to the same value),
//! the encapsulated MachineConfig with an empty config of the spec bootstrap mode encapsulates
//! (`render::encapsulated_version`: 3.5, or 3.6 from a 3.6 config), and the ControllerConfig's
//! CA bundles.

use std::collections::BTreeMap;
use std::sync::Arc;

use machine_config_server::api::{ControllerConfig, MachineConfig, MachineConfigPool};
use machine_config_server::ignition::{self, dataurl, SpecVersion};
use machine_config_server::render::{self, RenderError};
use machine_config_server::snapshot::{Mode, Snapshot};
use serde_json::{json, Value};

use super::cluster_objects::as_value;

/// Key of the MachineConfig in the snapshot, and the pool's `status.configuration.name`.
const RENDERED: &str = "rendered-master-fuzz";
/// The served kubeconfig (bytes a YAML reader would choke on, to see they are passed through).
pub const KUBECONFIG: &[u8] = b"apiVersion: v1\nkind: Config\n# \x00\xff\n";

/// A ControllerConfig with both CA bundles, as the installer writes one.
pub fn controller_config() -> ControllerConfig {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "ControllerConfig",
        "metadata": {"name": "machine-config-controller"},
        "spec": {
            "kubeAPIServerServingCAData": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmt1YmUKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
            "cloudProviderCAData": null,
            "rootCAData": "cm9vdAo="
        }
    }))
    .expect("the built-in ControllerConfig decodes")
}

/// A small valid MachineConfig (one file, one unit, kernel arguments).
pub fn machine_config() -> MachineConfig {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "rendered-master-0"},
        "spec": {
            "osImageURL": "quay.example.com/rhcos@sha256:00",
            "config": {
                "ignition": {"version": "3.2.0"},
                "storage": {"files": [{"path": "/etc/motd", "mode": 420, "contents": {"source": "data:,hello"}}]},
                "systemd": {"units": [{"name": "a.service", "enabled": true, "contents": "[Unit]\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}
            },
            "kernelArguments": ["nosmt"],
            "extensions": null,
            "fips": false,
            "kernelType": ""
        }
    }))
    .expect("the built-in MachineConfig decodes")
}

/// A bootstrap snapshot serving `machine_config` to pool `master`.
pub fn snapshot(machine_config: MachineConfig, controller_config: ControllerConfig) -> Snapshot {
    let pool: MachineConfigPool = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": "master"},
        "spec": {"configuration": {"name": RENDERED}},
        "status": {"configuration": {"name": RENDERED}}
    }))
    .expect("the built-in pool decodes");
    let mut snapshot = Snapshot::empty(Mode::Bootstrap);
    snapshot.generation = 1;
    snapshot.pools = BTreeMap::from([("master".to_string(), Ok(Arc::new(pool)))]);
    snapshot.machine_configs =
        BTreeMap::from([(RENDERED.to_string(), Ok(Arc::new(machine_config)))]);
    snapshot.controller_config = Some(Ok(Arc::new(controller_config)));
    snapshot.kubeconfig = Arc::from(KUBECONFIG);
    snapshot
}

/// Renders pool `master` of `snapshot` at every spec version and checks each answer.
pub fn check_renders(snapshot: &Snapshot) {
    for version in SpecVersion::ALL {
        check_render(snapshot, version);
    }
}

fn check_render(snapshot: &Snapshot, version: SpecVersion) {
    let Some(Ok(machine_config)) = snapshot.machine_configs.get(RENDERED) else {
        panic!("the snapshot has no MachineConfig");
    };
    let requested = version;
    // 3.6 is served only from a rendered config of spec 3.6; from 3.5 or older a request for
    // 3.6 gets 3.5, as the original at 7ff337a4f.
    let rendered_spec = ignition::rendered_spec(machine_config.spec.config_version());
    let version = if requested == SpecVersion::V3_6 && rendered_spec != SpecVersion::V3_6 {
        SpecVersion::V3_5
    } else {
        requested
    };
    let rendered = match render::render(snapshot, "master", requested) {
        Ok(rendered) => rendered,
        Err(error) => {
            check_failure(&error, machine_config, version);
            return;
        }
    };
    if requested == SpecVersion::NEWEST {
        let again = render::render(snapshot, "master", requested).map(|r| r.body);
        assert_eq!(
            again.ok(),
            Some(rendered.body.clone()),
            "rendering is deterministic"
        );
    }
    assert_eq!(
        rendered.version, version,
        "served spec for a {requested} request"
    );
    let body: Value = serde_json::from_slice(&rendered.body).expect("the body is JSON");
    assert_eq!(
        body.pointer("/ignition/version").and_then(Value::as_str),
        Some(version.as_str()),
        "the body says spec {version}"
    );
    match ignition::parse_config_slice(&rendered.body) {
        Ok(reparsed) if version != SpecVersion::V2_2 => {
            let again = ignition::to_value_as(&reparsed, version)
                .unwrap_or_else(|e| panic!("the served {version} config does not translate: {e}"));
            assert_eq!(
                again, body,
                "the served {version} document is not a fixed point"
            );
        }
        Ok(_) => {}
        Err(e) if version == SpecVersion::V2_2 && super::ignition::is_documented_v2_refusal(&e) => {
        }
        Err(e) => panic!("the served {version} config does not re-parse: {e}"),
    }
    check_node_files(snapshot, machine_config, &body, version);
}

fn check_failure(error: &RenderError, machine_config: &MachineConfig, version: SpecVersion) {
    let kind = error.kind();
    assert!(
        ["parse", "kernel_arguments", "translate", "invalid_input"].contains(&kind),
        "a bad input fails as {kind}: {error}"
    );
    let parsed = ignition::parse_config_owned(
        machine_config
            .spec
            .config
            .as_ref()
            .map(machine_config_server::api::RawConfig::value),
    );
    match error {
        RenderError::Parse { source, .. } => {
            assert_eq!(
                parsed.as_ref().err(),
                Some(source),
                "the engine's parse error"
            )
        }
        RenderError::KernelArguments(v) => {
            assert_eq!(*v, version);
            assert!(version < SpecVersion::V3_3);
            let unwanted = parsed
                .ok()
                .and_then(|c| c.kernel_arguments)
                .and_then(|k| k.should_not_exist)
                .is_some_and(|v| !v.is_empty());
            assert!(unwanted, "kernel_arguments without shouldNotExist");
        }
        _ => assert!(parsed.is_ok(), "only a parse error may come from parsing"),
    }
}

fn check_node_files(
    snapshot: &Snapshot,
    machine_config: &MachineConfig,
    body: &Value,
    version: SpecVersion,
) {
    let name = machine_config.metadata.name.clone().unwrap_or_default();
    assert_eq!(
        served_file(body, render::KUBECONFIG_PATH).as_deref(),
        Some(&snapshot.kubeconfig[..]),
        "the kubeconfig is served as is"
    );
    let annotations = served_file(body, render::NODE_ANNOTATIONS_PATH).expect("node annotations");
    let annotations: BTreeMap<String, String> =
        serde_json::from_slice(&annotations).expect("node annotations are a JSON object");
    assert_eq!(
        annotations.get("machineconfiguration.openshift.io/currentConfig"),
        Some(&name)
    );

    let content = served_file(body, render::MACHINE_CONFIG_CONTENT_PATH).expect("MC content");
    let content: MachineConfig =
        serde_json::from_slice(&content).expect("the MachineConfig content decodes");
    let mut expected = machine_config.clone();
    if version < SpecVersion::V3_3 {
        // Kernel arguments moved from the Ignition config into the MachineConfig.
        expected.spec.kernel_arguments = content.spec.kernel_arguments.clone();
    }
    assert_eq!(
        as_value(&content),
        as_value(&expected),
        "the MachineConfig is served as it came"
    );

    let encapsulated = served_file(body, render::ENCAPSULATED_PATH).expect("encapsulated MC");
    let encapsulated: MachineConfig =
        serde_json::from_slice(&encapsulated).expect("the encapsulated MachineConfig decodes");
    assert_eq!(
        encapsulated.spec.config.as_ref().map(|c| c.version()),
        Some(render::encapsulated_version(snapshot.mode, machine_config, version).as_str()),
        "the encapsulated config is an empty config of the spec bootstrap mode encapsulates"
    );
    let mut expected_encapsulated = expected;
    expected_encapsulated.spec.config = encapsulated.spec.config.clone();
    assert_eq!(as_value(&encapsulated), as_value(&expected_encapsulated));

    if let Some(Ok(cc)) = &snapshot.controller_config {
        let cas = [
            (
                render::KUBELET_CA_PATH,
                cc.spec.kube_api_server_serving_ca(),
            ),
            (render::CLOUD_PROVIDER_CA_PATH, cc.spec.cloud_provider_ca()),
        ];
        for (path, ca) in cas {
            if let Ok(Some(ca)) = ca {
                assert_eq!(
                    served_file(body, path).as_deref(),
                    Some(&ca[..]),
                    "{path} holds the ControllerConfig's CA"
                );
            }
        }
    }
}

/// The decoded contents of the one served file at `path` (2.2 or 3.x layout); panics when the
/// path is served more than once with contents.
fn served_file(body: &Value, path: &str) -> Option<Vec<u8>> {
    let files = body.pointer("/storage/files")?.as_array()?;
    let sources: Vec<&str> = files
        .iter()
        .filter(|f| full_path(f).as_deref() == Some(path))
        .filter_map(|f| f.pointer("/contents/source").and_then(Value::as_str))
        .collect();
    assert!(
        sources.len() <= 1,
        "{path} is served {} times",
        sources.len()
    );
    let source = sources.first()?;
    Some(dataurl::decode(source).unwrap_or_else(|e| panic!("{path}: {e}")))
}

/// A served file's path; in 2.2 a file below a filesystem other than `root` names the
/// filesystem's mount path and the rest of the path apart.
fn full_path(file: &Value) -> Option<String> {
    let path = file.get("path")?.as_str()?;
    match file.get("filesystem").and_then(Value::as_str) {
        None | Some("root") => Some(path.to_string()),
        Some(filesystem) => Some(format!(
            "{}/{}",
            filesystem.trim_end_matches('/'),
            path.trim_start_matches('/')
        )),
    }
}
