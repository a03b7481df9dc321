//! `machine-config-server explain`, run as a person would run it: the real binary on the bundled
//! example (`config/bootstrap`), on the project's full-size bootstrap fixture, and against a cluster (the
//! in-test fake API server). What it reports is checked against what the server really serves:
//! the bytes written by `--write-config` must equal the body a running server sends for the
//! same request, and the reported sizes and file list must match that body.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::mcs;

use serde_json::{json, Value};
use support::api_server::{ApiServer, Options};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/bootstrap");
/// The project's full-size bootstrap fixture (`tests/fixtures/generated/bootstrap-full`).
fn full() -> &'static str {
    static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIR.get_or_init(|| support::fixtures::bootstrap_full().display().to_string())
}
/// What a current Ignition sends.
const ACCEPT: &str = "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1";

const NODE_ANNOTATIONS: &str = "/etc/machine-config-daemon/node-annotations.json";
const KUBECONFIG: &str = "/etc/kubernetes/kubeconfig";
const MC_CONTENT: &str = "/etc/mcs-machine-config-content.json";
const ENCAPSULATED: &str = "/etc/ignition-machine-config-encapsulated.json";
const KUBELET_CA: &str = "/etc/kubernetes/kubelet-ca.crt";
const CLOUD_CA: &str = "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem";

/// One finished `explain` run.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    fn assert_code(&self, code: i32) {
        assert_eq!(
            self.code,
            Some(code),
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
    }
}

fn explain(args: &[&str]) -> Run {
    let output = Command::new(mcs::bin())
        .arg("explain")
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run the binary");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `explain` on a bootstrap base directory with its own `kubeconfig`.
fn explain_bootstrap(base: &str, extra: &[&str]) -> Run {
    let kubeconfig = format!("{base}/kubeconfig");
    let mut args = vec![
        "--server-basedir",
        base,
        "--bootstrap-kubeconfig",
        &kubeconfig,
    ];
    args.extend_from_slice(extra);
    explain(&args)
}

/// The bearer token in a kubeconfig file: the secret that must never be printed.
fn kubeconfig_token(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("kubeconfig");
    let kubeconfig: Value = serde_yaml::from_str(&text).expect("kubeconfig YAML");
    let token = kubeconfig["users"][0]["user"]["token"]
        .as_str()
        .expect("a token in the kubeconfig")
        .to_string();
    assert!(token.len() >= 8, "a token distinctive enough to search for");
    token
}

fn assert_no_secret(run: &Run, secret: &str) {
    assert!(
        !run.stdout.contains(secret) && !run.stderr.contains(secret),
        "the token appears in the output:\n{}\n{}",
        run.stdout,
        run.stderr
    );
}

/// (path, size) of every file in a served config, decoded as a client would.
fn served_sizes(body: &[u8]) -> Vec<(String, u64)> {
    let config: Value = serde_json::from_slice(body).expect("served config is JSON");
    mcs::served_files(&config)
        .into_iter()
        .map(|(path, data)| (path, data.len() as u64))
        .collect()
}

/// (path, size) as `explain --output json` reports them.
fn reported_sizes(report: &Value) -> Vec<(String, u64)> {
    report["served"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().expect("path").to_string(),
                f["size"].as_u64().expect("size"),
            )
        })
        .collect()
}

/// Paths the report marks as added by the server, in order.
fn appended(report: &Value) -> Vec<String> {
    report["served"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter(|f| f["origin"] == "appended")
        .map(|f| f["path"].as_str().expect("path").to_string())
        .collect()
}

#[test]
fn example_master_is_explained_as_text() {
    let run = explain_bootstrap(EXAMPLE, &["--pool", "master"]);
    run.assert_code(0);
    let text = &run.stdout;
    for expected in [
        "What a node asking for /config/master would get:",
        "bootstrap (base directory",
        "rendered-master-example (found)",
        "status.configuration of machine-pools/master.yaml",
        // The default Accept is a current Ignition's (3.6); the example is spec 3.5.
        "3.5.0, negotiated from Accept: application/vnd.coreos.ignition+json;version=3.6.0",
        "version rule:     Accept asks for 3.6.0: spec 3.6.0; the rendered MachineConfig rendered-master-example is spec 3.5.0, not 3.6",
        "not layered (bootstrap mode)",
        "200 OK",
        "/etc/motd",
        "7 (in served order)",
        "systemd.unified_cgroup_hierarchy=1",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let marked: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("[appended by server"))
        .collect();
    let order = [
        KUBELET_CA,
        NODE_ANNOTATIONS,
        KUBECONFIG,
        MC_CONTENT,
        ENCAPSULATED,
    ];
    assert_eq!(marked.len(), order.len(), "{text}");
    for (line, path) in marked.iter().zip(order) {
        assert!(line.contains(path), "{line:?} should be {path}");
    }
    assert_no_secret(
        &run,
        &kubeconfig_token(Path::new(&format!("{EXAMPLE}/kubeconfig"))),
    );
}

/// The acceptance check: on the example and the realistic fixture, `--write-config` writes
/// exactly what the running server sends for the same Accept header, and the JSON report
/// describes those bytes.
#[test]
fn json_report_and_written_config_match_what_the_server_serves() {
    for (base, rendered) in [
        (EXAMPLE, "rendered-master-example"),
        (full(), support::fixtures::MASTER_RENDERED),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let written = dir.path().join("master.ign");
        let run = explain_bootstrap(
            base,
            &[
                "--pool",
                "master",
                "--accept",
                ACCEPT,
                "--output",
                "json",
                "--write-config",
                written.to_str().expect("utf-8"),
            ],
        );
        run.assert_code(0);
        let report = run.json();
        assert_eq!(report["mode"], "bootstrap");
        assert_eq!(report["pool"], "master");
        assert_eq!(report["pool_found"], true);
        assert_eq!(report["selection"]["rendered_config"], rendered);
        assert_eq!(report["selection"]["machine_config"], "found");
        assert_eq!(report["spec_version"], "3.5.0");
        assert_eq!(report["accept"], ACCEPT);
        assert_eq!(report["status"], 200);
        assert!(report["error"].is_null());
        assert!(report["layered"].is_null(), "bootstrap mode is not layered");
        let bytes = std::fs::read(&written).expect("--write-config wrote the config");

        let server = mcs::Server::bootstrap(Path::new(base), &[]);
        let response = server.http("GET", "/config/master", &[("Accept", ACCEPT)]);
        assert_eq!(response.status, 200);
        assert!(
            response.body == bytes,
            "{base}: --write-config differs from the served body ({} vs {} bytes)",
            bytes.len(),
            response.body.len()
        );
        assert_eq!(report["served"]["body_bytes"], response.body.len() as u64);
        assert_eq!(reported_sizes(&report), served_sizes(&response.body));
        let served: Value = serde_json::from_slice(&response.body).expect("json");
        assert_eq!(
            report["served"]["systemd_units"],
            served["systemd"]["units"].as_array().map_or(0, Vec::len) as u64
        );
        // The server's own files come last, in the original's order.
        let appended = appended(&report);
        let tail: Vec<String> = [NODE_ANNOTATIONS, KUBECONFIG, MC_CONTENT, ENCAPSULATED]
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert!(appended.ends_with(&tail), "{base}: {appended:?}");
        let token = kubeconfig_token(&PathBuf::from(format!("{base}/kubeconfig")));
        assert!(
            String::from_utf8_lossy(&bytes).contains(&token),
            "the served kubeconfig carries the token"
        );
        assert_no_secret(&run, &token);
    }
}

#[test]
fn realistic_master_marks_the_files_the_server_adds() {
    let run = explain_bootstrap(full(), &["--pool", "master", "--output", "json"]);
    run.assert_code(0);
    let report = run.json();
    assert_eq!(
        appended(&report),
        vec![
            KUBELET_CA,
            CLOUD_CA,
            NODE_ANNOTATIONS,
            KUBECONFIG,
            MC_CONTENT,
            ENCAPSULATED
        ]
    );
    let files = report["served"]["files"].as_array().expect("files");
    assert!(files.len() > 40, "the fixture's own files are listed too");
    let kubeconfig = files
        .iter()
        .find(|f| f["path"] == KUBECONFIG)
        .expect("kubeconfig");
    assert_eq!(kubeconfig["role"], "kubeconfig");
    assert_eq!(kubeconfig["mode"], 420);
    assert_eq!(
        kubeconfig["size"],
        std::fs::metadata(format!("{}/kubeconfig", full()))
            .expect("kubeconfig")
            .len()
    );
    assert_eq!(
        report["served"]["kernel_arguments"]["machine_config"],
        json!(["systemd.unified_cgroup_hierarchy=1", "cgroup_no_v1=\"all\""])
    );
    assert_no_secret(
        &run,
        &kubeconfig_token(Path::new(&format!("{}/kubeconfig", full()))),
    );
}

#[test]
fn registry_certificates_are_listed_as_appended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().join("bootstrap");
    mcs::copy_dir(Path::new(EXAMPLE), &base);
    let cert = "-----BEGIN CERTIFICATE-----\nREGISTRY CA\n-----END CERTIFICATE-----\n";
    std::fs::create_dir_all(base.join("certs")).expect("mkdir");
    std::fs::write(base.join("certs/registry.pem"), cert).expect("cert");
    let base = base.to_str().expect("utf-8");
    let args = [
        "--pool",
        "master",
        "--bootstrap-certs",
        "registry.example:5000=certs/registry.pem",
    ];
    let run = explain_bootstrap(base, &args);
    run.assert_code(0);
    let path = "/etc/docker/certs.d/registry.example:5000/ca.crt";
    let line = run
        .stdout
        .lines()
        .find(|l| l.contains(path))
        .unwrap_or_else(|| panic!("{path} not listed:\n{}", run.stdout));
    assert!(line.contains("[appended by server: registry CA]"), "{line}");
    assert!(line.contains(&format!(" {}  {path}", cert.len())), "{line}");

    // Before the encapsulated MachineConfig, as the original appends them.
    let json = explain_bootstrap(base, &[&args[..], &["--output", "json"]].concat());
    json.assert_code(0);
    let appended = appended(&json.json());
    assert_eq!(appended[appended.len() - 2], path);
    assert_eq!(appended[appended.len() - 1], ENCAPSULATED);
}

#[test]
fn worker_in_bootstrap_mode_explains_the_500() {
    for base in [EXAMPLE, full()] {
        let dir = tempfile::tempdir().expect("tempdir");
        let written = dir.path().join("worker.ign");
        let run = explain_bootstrap(
            base,
            &[
                "--pool",
                "worker",
                "--write-config",
                written.to_str().expect("utf-8"),
            ],
        );
        run.assert_code(1);
        assert!(
            run.stdout.contains("500 Internal Server Error"),
            "{}",
            run.stdout
        );
        assert!(
            run.stdout
                .contains("pool \"worker\" is not served in bootstrap mode"),
            "{}",
            run.stdout
        );
        assert!(run.stdout.contains("Ignition retries"), "{}", run.stdout);
        assert!(run.stderr.contains("would answer 500"), "{}", run.stderr);
        assert!(
            !written.exists(),
            "nothing is written when nothing is served"
        );

        let report = explain_bootstrap(base, &["--pool", "worker", "--output", "json"]);
        report.assert_code(1);
        let report = report.json();
        assert_eq!(report["status"], 500);
        assert_eq!(report["error"]["kind"], "pool_not_served");
        assert!(report["served"].is_null());
    }
}

#[test]
fn missing_pool_explains_the_404() {
    // Bootstrap mode reads `arbiter` too; neither directory has one.
    let run = explain_bootstrap(full(), &["--pool", "arbiter", "--output", "json"]);
    run.assert_code(1);
    let report = run.json();
    assert_eq!(report["status"], 404);
    assert_eq!(report["pool_found"], false);
    assert_eq!(report["error"]["kind"], "not_found");
    assert!(
        report["error"]["message"]
            .as_str()
            .expect("message")
            .contains("machine-pools/arbiter.yaml"),
        "{report}"
    );
    assert_eq!(report["known_pools"], json!(["master"]));
    let text = explain_bootstrap(EXAMPLE, &["--pool", "arbiter"]);
    text.assert_code(1);
    assert!(text.stdout.contains("404 Not Found"), "{}", text.stdout);
    assert!(text.stdout.contains("gives up"), "{}", text.stdout);
}

#[test]
fn unsupported_accept_explains_the_400() {
    let accept = "application/vnd.coreos.ignition+json;version=4.0.0";
    let run = explain_bootstrap(
        full(),
        &["--pool", "master", "--accept", accept, "--output", "json"],
    );
    run.assert_code(1);
    let report = run.json();
    assert_eq!(report["status"], 400);
    assert_eq!(report["error"]["kind"], "unsupported_version");
    assert!(report["spec_version"].is_null());
    assert_eq!(report["accept"], accept);
    // The same answer as the server's.
    let server = mcs::Server::bootstrap(Path::new(full()), &[]);
    assert_eq!(
        server
            .http("GET", "/config/master", &[("Accept", accept)])
            .status,
        400
    );
}

#[test]
fn spec_flag_and_usage_errors() {
    let run = explain_bootstrap(
        EXAMPLE,
        &["--pool", "master", "--spec", "3.5.0", "--output", "json"],
    );
    run.assert_code(0);
    let report = run.json();
    assert_eq!(report["spec_version"], "3.5.0");
    assert_eq!(report["spec_version_from"], "spec");

    for args in [
        vec!["--pool", "master"],
        vec!["--server-basedir", EXAMPLE],
        vec!["--server-basedir", "/nonexistent/dir", "--pool", "master"],
        vec![
            "--server-basedir",
            EXAMPLE,
            "--pool",
            "master",
            "--spec",
            "9.9.9",
        ],
        vec!["--server-basedir", EXAMPLE, "--pool", "a/master"],
        vec![
            "--server-basedir",
            EXAMPLE,
            "--kubeconfig",
            "k",
            "--pool",
            "master",
        ],
        vec!["--kubeconfig", "k", "--pool", "master"],
    ] {
        let run = explain(&args);
        run.assert_code(64);
        assert!(run.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

// ---------------------------------------------------------------------------------------------
// Cluster mode

const LAYERED_POOL: &str = "layered-worker";
use support::fixtures::{LAYERED_RENDERED, WORKER_RENDERED};
const LAYERED_IMAGE: &str = "quay.io/example/layered-rhcos@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const CLUSTER_TOKEN: &str = "explain-test-bootstrap-token-0123456789";
const APISERVER_URL: &str = "https://api-int.example.com:6443";

use support::CONTROLLER_CONFIG;

/// The realistic fixture as cluster objects, with `worker` mid-rollout (a node already runs
/// the newest render), a pool `infra` whose current render is gone, and `layered-worker` with
/// a succeeded image build that one of its nodes runs.
fn fake_cluster() -> ApiServer {
    let api = ApiServer::start(Options::default());
    for dir in ["machine-configs", "machine-pools"] {
        if let Err(e) = api.load_yaml_dir(format!("{}/{dir}", full())) {
            panic!("loading {dir}: {e}");
        }
    }
    // The bootstrap fixture's ControllerConfig lacks fields the CRD requires in a cluster.
    if let Err(e) = api.load_yaml_str(CONTROLLER_CONFIG) {
        panic!("loading the ControllerConfig: {e}");
    }
    let pool = |name: &str, spec: &str, status: &str, updated: i64| {
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": name},
            "spec": {
                "configuration": {"name": spec},
                "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}
            },
            "status": {
                "configuration": {"name": status},
                "machineCount": 3,
                "updatedMachineCount": updated
            }
        })
    };
    for object in [
        pool("worker", WORKER_RENDERED, "rendered-worker-previous", 1),
        pool("infra", WORKER_RENDERED, "rendered-infra-previous", 0),
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSConfig",
            "metadata": {"name": LAYERED_POOL},
            "spec": {
                "machineConfigPool": {"name": LAYERED_POOL},
                "imageBuilder": {"imageBuilderType": "Job"},
                "renderedImagePushSecret": {"name": "push-secret"},
                "renderedImagePushSpec": "quay.io/example/layered-rhcos:latest"
            },
            "status": {"currentImagePullSpec": LAYERED_IMAGE}
        }),
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineOSBuild",
            "metadata": {"name": "layered-worker-build-1"},
            "spec": {
                "machineConfig": {"name": LAYERED_RENDERED},
                "machineOSConfig": {"name": LAYERED_POOL},
                "renderedImagePushSpec": "quay.io/example/layered-rhcos:latest"
            },
            "status": {
                "conditions": [{
                    "type": "Succeeded", "status": "True", "reason": "Succeeded",
                    "message": "", "lastTransitionTime": "2025-05-01T10:20:00Z"
                }],
                "digestedImagePushSpec": LAYERED_IMAGE
            }
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "layered-a",
                "labels": {
                    "kubernetes.io/os": "linux",
                    "node-role.kubernetes.io/worker": "",
                    "node-role.kubernetes.io/layered-worker": ""
                },
                "annotations": {
                    "machineconfiguration.openshift.io/currentConfig": LAYERED_RENDERED,
                    "machineconfiguration.openshift.io/state": "Done",
                    "machineconfiguration.openshift.io/currentImage": LAYERED_IMAGE
                }
            }
        }),
    ] {
        if let Err(e) = api.apply_object(&object) {
            panic!("applying {}: {e:?}", object["metadata"]["name"]);
        }
    }
    api
}

fn token_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("token"), CLUSTER_TOKEN).expect("token");
    std::fs::write(
        dir.path().join("ca.crt"),
        "-----BEGIN CERTIFICATE-----\nTEST CA\n-----END CERTIFICATE-----\n",
    )
    .expect("ca.crt");
    dir
}

fn explain_cluster(api: &ApiServer, tokens: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "--kubeconfig",
        api.kubeconfig_file().to_str().expect("utf-8"),
        "--apiserver-url",
        APISERVER_URL,
        "--bootstrap-token-dir",
        tokens.to_str().expect("utf-8"),
        "--timeout-seconds",
        "20",
    ];
    args.extend_from_slice(extra);
    explain(&args)
}

#[test]
fn cluster_mode_explains_selection_layered_decision_and_failures() {
    let api = fake_cluster();
    let tokens = token_dir();

    // worker: a node already runs spec.configuration, so that is served.
    let run = explain_cluster(
        &api,
        tokens.path(),
        &["--pool", "worker", "--output", "json"],
    );
    run.assert_code(0);
    let report = run.json();
    assert_eq!(report["mode"], "cluster");
    assert_eq!(report["selection"]["rendered_config"], WORKER_RENDERED);
    assert_eq!(
        report["selection"]["status_configuration"],
        "rendered-worker-previous"
    );
    assert_eq!(report["selection"]["updated_machine_count"], 1);
    assert!(
        report["selection"]["rule"]
            .as_str()
            .expect("rule")
            .starts_with("spec.configuration"),
        "{report}"
    );
    assert_eq!(report["layered"]["reason"], "not_layered");
    assert_eq!(report["status"], 200);
    let known: Vec<&str> = report["known_pools"]
        .as_array()
        .expect("known pools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(known, ["infra", LAYERED_POOL, "master", "worker"]);
    assert_no_secret(&run, CLUSTER_TOKEN);

    // infra: nobody runs the new render yet, and the current one is gone: 500, with why.
    let run = explain_cluster(&api, tokens.path(), &["--pool", "infra"]);
    run.assert_code(1);
    for expected in [
        "rendered-infra-previous (missing)",
        "status.configuration: status.updatedMachineCount is 0",
        "500 Internal Server Error",
        "missing_machine_config",
    ] {
        assert!(
            run.stdout.contains(expected),
            "missing {expected:?}:\n{}",
            run.stdout
        );
    }

    // layered-worker: the validated image is served, and the report says which and why.
    let dir = tempfile::tempdir().expect("tempdir");
    let written = dir.path().join("layered.ign");
    let run = explain_cluster(
        &api,
        tokens.path(),
        &[
            "--pool",
            LAYERED_POOL,
            "--output",
            "json",
            "--write-config",
            written.to_str().expect("utf-8"),
        ],
    );
    run.assert_code(0);
    let report = run.json();
    assert_eq!(report["layered"]["reason"], "validated");
    assert_eq!(report["layered"]["image"], LAYERED_IMAGE);
    assert_eq!(report["layered"]["validated_by"], "layered-a");
    assert_eq!(report["served"]["os_image_url"], LAYERED_IMAGE);
    assert_eq!(report["served"]["node_annotations_image"], LAYERED_IMAGE);
    let bytes = std::fs::read(&written).expect("written");
    assert_eq!(reported_sizes(&report), served_sizes(&bytes));
    assert!(String::from_utf8_lossy(&bytes).contains(CLUSTER_TOKEN));
    assert_no_secret(&run, CLUSTER_TOKEN);
    let text = explain_cluster(&api, tokens.path(), &["--pool", LAYERED_POOL]);
    text.assert_code(0);
    assert!(
        text.stdout
            .contains(&format!("layered image {LAYERED_IMAGE}: validated")),
        "{}",
        text.stdout
    );
    assert_no_secret(&text, CLUSTER_TOKEN);

    // A pool that does not exist: the 500 upstream answers, and the pools that do exist.
    let run = explain_cluster(&api, tokens.path(), &["--pool", "wroker"]);
    run.assert_code(1);
    assert!(
        run.stdout.contains("no MachineConfigPool named \"wroker\""),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("known pools: infra, layered-worker, master, worker"),
        "{}",
        run.stdout
    );
}

#[test]
fn cluster_mode_without_an_api_server_explains_the_503() {
    let api = ApiServer::start(Options::default());
    let kubeconfig = api.kubeconfig_file().to_path_buf();
    let copy = tempfile::tempdir().expect("tempdir");
    let kubeconfig_copy = copy.path().join("kubeconfig");
    std::fs::copy(&kubeconfig, &kubeconfig_copy).expect("copy kubeconfig");
    api.stop();
    let tokens = token_dir();
    let started = std::time::Instant::now();
    let run = explain(&[
        "--kubeconfig",
        kubeconfig_copy.to_str().expect("utf-8"),
        "--apiserver-url",
        APISERVER_URL,
        "--bootstrap-token-dir",
        tokens.path().to_str().expect("utf-8"),
        "--timeout-seconds",
        "2",
        "--pool",
        "worker",
    ]);
    run.assert_code(1);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "gives up after the timeout"
    );
    assert!(
        run.stdout.contains("503 Service Unavailable"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("did not all sync within 2 s"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("MachineConfigPool (unreachable)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("unknown: the watch caches have not synced"),
        "no claim about the pool: {}",
        run.stdout
    );
    drop(api);
}

/// The serving certificate, as `--cert` and `--key` name it where `explain` runs: what the
/// files hold, since when, and whether this build serves with them (a key it refuses is named
/// with its algorithm and size); the pool's answer, and the exit status, stay the pool's.
#[test]
fn the_serving_certificate_is_explained_with_its_key_and_whether_it_serves() {
    let pki = mcs::repo().join("tests/fixtures/pki");
    let base = mcs::repo().join("config/bootstrap");
    let base = base.to_str().unwrap();
    let (cert, key) = (pki.join("p521/tls.crt"), pki.join("p521/tls.key"));
    let run = explain_bootstrap(
        base,
        &[
            "--pool",
            "master",
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
    );
    run.assert_code(0);
    let line = run
        .stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("serving cert:"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        line.contains("ECDSA P-521, valid until 2036-"),
        "{}",
        run.stdout
    );
    assert!(line.contains("files changed 20"), "{}", run.stdout);
    assert!(line.contains("this build serves with it"), "{}", run.stdout);

    let (cert, key) = (pki.join("refused/ed448.crt"), pki.join("refused/ed448.key"));
    let run = explain_bootstrap(
        base,
        &[
            "--pool",
            "master",
            "--output",
            "json",
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
    );
    run.assert_code(0);
    let report = run.json();
    let certificate = &report["serving_certificate"];
    assert_eq!(certificate["key"], "Ed448", "{certificate}");
    assert!(
        certificate["refused"]
            .as_str()
            .is_some_and(|why| why.contains("an Ed448 private key")),
        "{certificate}"
    );
}
