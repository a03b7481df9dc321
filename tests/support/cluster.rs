//! Cluster fixtures shared by the `cluster_*` tests: the full-size cluster of the project's own
//! fixtures (rendered MachineConfigs, pools and ControllerConfig from
//! `tests/fixtures/generated/bootstrap-full`, completed as the operator completes them in a
//! cluster), loaded into the fake API server, and a node-bootstrapper token directory.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::api_server::FixtureApi;

/// `--apiserver-url` of every test.
pub const APISERVER_URL: &str = "https://api-int.example.com:6443";
/// The master pool's rendered config in the fixture.
pub use crate::fixtures::MASTER_RENDERED;
/// The worker pool's rendered config in the fixture.
pub use crate::fixtures::WORKER_RENDERED;
/// `ca.crt` of the token directory.
pub const FILE_CA: &str = "-----BEGIN CERTIFICATE-----\nFILE CA\n-----END CERTIFICATE-----\n";
/// `token` of the token directory at start.
pub const FIRST_TOKEN: &str = "token-1";
pub const MCO_NAMESPACE: &str = "openshift-machine-config-operator";

pub fn fixture_dir() -> PathBuf {
    crate::fixtures::bootstrap_full()
}

/// The realistic MachineConfigs, pools and ControllerConfig, plus the image registry's
/// Namespace and Service and the `kubeconfig-data` ConfigMap without a CA bundle (in their
/// namespaces, created first as on a real API server).
pub fn load_realistic_cluster(api: &impl FixtureApi) {
    load_cluster_from(api, &fixture_dir());
}

/// [`load_realistic_cluster`] from another bootstrap directory of the same layout (e.g.
/// `bootstrap-3.6`).
pub fn load_cluster_from(api: &impl FixtureApi, fixture_dir: &Path) {
    // The installer's bootstrap copy leaves fields the cluster's CRD requires absent or null;
    // the operator fills them in the cluster. The CA fields are nullable `format: byte`: null is
    // valid, "" is not (kube-apiserver answers 422, api-corpus step cc-empty-bytes).
    let path = fixture_dir.join("controller-config/machine-config-controller.yaml");
    let mut controller_config: Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let spec = controller_config["spec"].as_object_mut().unwrap();
    for (field, value) in [
        ("additionalTrustBundle", Value::Null),
        ("cloudProviderCAData", Value::Null),
        (
            "dns",
            json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS",
                   "spec": {"baseDomain": "example.com"}}),
        ),
        ("network", json!({"mtuMigration": {}})),
        ("proxy", json!({})),
    ] {
        let slot = spec.entry(field).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
    api.apply_object(&controller_config).unwrap();
    for dir in ["machine-configs", "machine-pools"] {
        if let Err(e) = api.load_yaml_dir(&fixture_dir.join(dir)) {
            panic!("loading {dir}: {e}");
        }
    }
    for namespace in [MCO_NAMESPACE, "openshift-image-registry"] {
        api.apply_object(&json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
        }))
        .unwrap();
    }
    api.apply_object(&json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "image-registry", "namespace": "openshift-image-registry"},
        "spec": {"ports": [{"name": "5000-tcp", "port": 5000, "protocol": "TCP"}]}
    }))
    .unwrap();
    api.apply_object(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kubeconfig-data", "namespace": MCO_NAMESPACE},
        "data": {"unrelated": "value"}
    }))
    .unwrap();
}

/// A copy of `from` (a rendered config) under the name `name`.
pub fn copy_rendered_config(api: &impl FixtureApi, from: &str, name: &str) {
    let mut mc = api
        .get("MachineConfig", None, from)
        .unwrap_or_else(|| panic!("rendered config {from}"));
    let meta = mc["metadata"].as_object_mut().unwrap();
    meta.retain(|k, _| k == "name" || k == "annotations" || k == "labels");
    meta.insert("name".into(), Value::from(name));
    api.apply_object(&mc).unwrap();
}

/// A token directory with `token` = [`FIRST_TOKEN`] and `ca.crt` = [`FILE_CA`].
pub fn token_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), FIRST_TOKEN).unwrap();
    std::fs::write(dir.path().join("ca.crt"), FILE_CA).unwrap();
    dir
}

/// Replaces a file the way the kubelet updates a secret volume: write aside, then rename.
pub fn replace_file(path: &Path, contents: &[u8]) {
    let aside = path.with_extension("new");
    std::fs::write(&aside, contents).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

/// (server, token, CA bytes) of a served kubeconfig.
pub fn kubeconfig_parts(kubeconfig: &[u8]) -> (String, String, Vec<u8>) {
    use base64::Engine as _;
    let kubeconfig: serde_yaml::Value = serde_yaml::from_slice(kubeconfig).unwrap();
    let field = |v: &serde_yaml::Value| v.as_str().unwrap_or_default().to_string();
    let ca = field(&kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]);
    (
        field(&kubeconfig["clusters"][0]["cluster"]["server"]),
        field(&kubeconfig["users"][0]["user"]["token"]),
        base64::engine::general_purpose::STANDARD
            .decode(ca)
            .unwrap_or_default(),
    )
}

/// A pool `name` like the fixture's worker pool, selecting nodes labelled
/// `node-role.kubernetes.io/<name>`, at rendered config `rendered` (which may not exist: then
/// every config request for it is a 500).
pub fn pool_at(api: &impl FixtureApi, name: &str, rendered: &str) {
    let mut pool = api
        .get("MachineConfigPool", None, "worker")
        .expect("the fixture's worker pool");
    pool["metadata"] = json!({"name": name});
    pool["spec"]["configuration"]["name"] = json!(rendered);
    pool["spec"]["machineConfigSelector"] =
        json!({"matchLabels": {"machineconfiguration.openshift.io/role": name}});
    pool["spec"]["nodeSelector"] =
        json!({"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}});
    pool["status"]["configuration"]["name"] = json!(rendered);
    api.apply_object(&pool).unwrap();
}

/// A worker Node as a kubelet registers it: hostname, OS and worker role labels, `ip` as its
/// `InternalIP`.
pub fn worker_node(name: &str, ip: impl std::fmt::Display) -> Value {
    node_with_roles(name, ip, &["worker"])
}

/// A Node as a kubelet registers it: hostname and OS labels, a `node-role.kubernetes.io/<role>`
/// label per role, `ip` as its `InternalIP` and `name` as its `Hostname` address.
pub fn node_with_roles(name: &str, ip: impl std::fmt::Display, roles: &[&str]) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert("kubernetes.io/hostname".into(), json!(name));
    labels.insert("kubernetes.io/os".into(), json!("linux"));
    for role in roles {
        labels.insert(format!("node-role.kubernetes.io/{role}"), json!(""));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"addresses": [
            {"type": "InternalIP", "address": ip.to_string()},
            {"type": "Hostname", "address": name}
        ]}
    })
}

/// The holder of the MachineConfigNode publisher's Lease (`<pod>_<pid>`), if any.
pub fn lease_holder(api: &impl FixtureApi) -> Option<String> {
    let lease = api.get(
        "Lease",
        Some(machine_config_server::mcn::lease::DEFAULT_NAMESPACE),
        machine_config_server::mcn::lease::DEFAULT_NAME,
    )?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|holder| !holder.is_empty())
        .map(str::to_string)
}

/// Annotation `mcs.machineconfiguration.openshift.io/<key>` of an MCN (the bootstrap record).
pub fn mcn_annotation(mcn: &Value, key: &str) -> Option<String> {
    mcn["metadata"]["annotations"][format!("mcs.machineconfiguration.openshift.io/{key}")]
        .as_str()
        .map(str::to_string)
}
