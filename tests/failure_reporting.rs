//! `--advertise-failure-reporting`: every served config tells the machine where and how to
//! report a first-boot failure exactly as upstream's PR #6124 (head 89aa74a52) serves it, and
//! without the flag every answer stays the original's. What a user notices, with the real
//! binary:
//! - bootstrap mode, on `tests/fixtures/failure-reporting/bootstrap`: with the flag every answer
//!   (both pools, every spec a machine asks for) is byte for byte the PR's server's, recorded
//!   once on that directory; without it, 7ff337a4f's;
//! - cluster mode, on that directory loaded as a cluster beside an Infrastructure (the
//!   in-test API server, or kube-apiserver with `KUBEBUILDER_ASSETS`): with the flag every
//!   answer is the PR's recorded one, the MachineConfig files aside compared as JSON without
//!   what the API server gives each object (uid, resourceVersion, managedFields); on
//!   bare metal the URL is the first internal address, bracketed; without an Infrastructure
//!   the root CA file is served and the URL is not, as upstream;
//! - under the MCO's own ClusterRole (no `get` on infrastructures) the flag changes nothing a
//!   machine gets, and the server says why once (log line, `/status`, `mcs_feature_enabled`);
//!   granting the extras (`config/deploy/extras`) switches it on without a restart;
//! - the real Ignition client (Debian's, fetch and files stages) writes both files where the
//!   machine-config daemon reads them.

use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use machine_config_server::ignition::dataurl;
use machine_config_server::source::cluster::rights::ENV_PROBE_INTERVAL_MS;
use serde_json::Value;
use support::api_server::{ApiServer, Options};
use support::cluster::{load_cluster_from, token_dir, APISERVER_URL};
use support::mcs::{self, poll, Server};
use support::tier;

const DEADLINE: Duration = Duration::from_secs(60);
const FLAG: &str = "--advertise-failure-reporting";
const CA_PATH: &str = "/etc/machine-config-daemon/mcs-ca-bundle.crt";
const ANNOTATIONS_PATH: &str = "/etc/machine-config-daemon/node-annotations.json";
const URL_KEY: &str = "machineconfiguration.openshift.io/machineConfigServerURL";
const ROOT_CA: &str =
    "-----BEGIN CERTIFICATE-----\nroot CA of the machine-config-server\n-----END CERTIFICATE-----\n";
const FEATURE: &str = "advertise-failure-reporting";
const MCO_NAMESPACE: &str = "openshift-machine-config-operator";

fn fixtures() -> PathBuf {
    mcs::repo().join("tests/fixtures/failure-reporting")
}

fn base_dir() -> PathBuf {
    fixtures().join("bootstrap")
}

/// One recorded answer: pool, spec (`none` or a version), status, body.
struct Recorded {
    pool: String,
    spec: String,
    status: u16,
    body: Vec<u8>,
}

fn recorded(dir: &str) -> Vec<Recorded> {
    let dir = fixtures().join(dir);
    let tsv = std::fs::read_to_string(dir.join("answers.tsv")).expect("answers.tsv");
    tsv.lines()
        .map(|line| {
            let cells: Vec<&str> = line.split('\t').collect();
            let [pool, spec, status, file] = cells[..] else {
                panic!("answers.tsv: {line:?}");
            };
            Recorded {
                pool: pool.into(),
                spec: spec.into(),
                status: status.parse().expect("status"),
                body: match file {
                    "-" => Vec::new(),
                    file => std::fs::read(dir.join(file)).expect("recorded body"),
                },
            }
        })
        .collect()
}

/// `GET /config/<pool>` with the Accept header a machine of `spec` sends (`none`: none).
/// Asks `server` what `answer` was asked and checks that status and bytes are the recorded
/// ones (`whose`: the recording's server, for the message).
fn ask_as_recorded(server: &Server, answer: &Recorded, whose: &str) -> mcs::Response {
    let ours = ask(server, &answer.pool, &answer.spec);
    let what = format!("{} {}", answer.pool, answer.spec);
    assert_eq!(ours.status, answer.status, "{what}");
    assert!(ours.body == answer.body, "{what}: not {whose} bytes");
    ours
}

fn ask(server: &Server, pool: &str, spec: &str) -> mcs::Response {
    let accept = format!("application/vnd.coreos.ignition+json;version={spec}, */*;q=0.1");
    let headers: Vec<(&str, &str)> = match spec {
        "none" => Vec::new(),
        _ => vec![("Accept", accept.as_str())],
    };
    server.http("GET", &format!("/config/{pool}"), &headers)
}

fn config(body: &[u8]) -> Value {
    serde_json::from_slice(body).expect("a JSON config")
}

/// The served file at `path`, decoded.
fn file(body: &[u8], path: &str) -> Option<Vec<u8>> {
    mcs::served_files(&config(body))
        .into_iter()
        .find(|(p, _)| p == path)
        .map(|(_, data)| data)
}

fn annotations(body: &[u8]) -> Value {
    serde_json::from_slice(&file(body, ANNOTATIONS_PATH).expect("node annotations"))
        .expect("annotations JSON")
}

/// The two MachineConfig files of a served config (content and encapsulated), as JSON without
/// what the API server gave the object, and the body with their data URLs replaced: what two
/// servers of the same cluster state on two API servers serve alike.
fn without_object_metadata(body: &[u8]) -> (Vec<u8>, Vec<Value>) {
    let mut masked = body.to_vec();
    let mut machine_configs = Vec::new();
    for file in config(body)["storage"]["files"].as_array().expect("files") {
        let path = file["path"].as_str().unwrap_or_default();
        if path != "/etc/mcs-machine-config-content.json"
            && path != "/etc/ignition-machine-config-encapsulated.json"
        {
            continue;
        }
        let source = file["contents"]["source"].as_str().expect("source");
        let raw = serde_json::to_string(source).expect("JSON string");
        let at = masked
            .windows(raw.len())
            .position(|w| w == raw.as_bytes())
            .expect("the data URL as written in the body");
        masked.splice(
            at..at + raw.len(),
            br#""(a MachineConfig)""#.iter().copied(),
        );
        let mut machine_config: Value =
            serde_json::from_slice(&dataurl::decode(source).expect("data URL"))
                .expect("a MachineConfig");
        let metadata = machine_config["metadata"]
            .as_object_mut()
            .expect("metadata");
        for field in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
        ] {
            metadata.remove(field);
        }
        machine_configs.push(machine_config);
    }
    (masked, machine_configs)
}

fn metric(server: &Server, series: &str) -> Option<f64> {
    let body = mcs::request(server.metrics, None, "GET", "/metrics", &[]).body;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn status_page(server: &Server) -> Value {
    mcs::request(server.metrics, None, "GET", "/status", &[]).json()
}

#[test]
fn bootstrap_answers_with_the_flag_are_upstream_pr_6124s() {
    let dir = base_dir();
    let server = Server::bootstrap(&dir, &[FLAG]);
    let answers = recorded("pr6124-89aa74a52/bootstrap");
    assert_eq!(answers.len(), 16);
    for answer in answers {
        let ours = ask_as_recorded(&server, &answer, "the PR's");
        // The root CA, no URL: upstream's bootstrap server has none.
        assert_eq!(
            file(&ours.body, CA_PATH).as_deref(),
            Some(ROOT_CA.as_bytes())
        );
        assert!(annotations(&ours.body).get(URL_KEY).is_none());
    }
    assert!(server.output().contains(FLAG), "{}", server.output());
}

#[test]
fn bootstrap_answers_without_the_flag_are_the_originals() {
    let server = Server::bootstrap(&base_dir(), &[]);
    for answer in recorded("original-7ff337a4f/bootstrap") {
        let ours = ask_as_recorded(&server, &answer, "7ff337a4f's");
        // Arbiter's MachineConfig writes the file itself: kept as it is.
        assert_ne!(
            file(&ours.body, CA_PATH).as_deref(),
            Some(ROOT_CA.as_bytes())
        );
    }
}

/// The fixture directory as a cluster, with the Infrastructure of `infrastructure` (a file of
/// the fixture; `None`: none).
fn cluster(infrastructure: Option<&str>) -> ApiServer {
    let api = ApiServer::start(Options::default());
    load_cluster_from(&api, &base_dir());
    if let Some(name) = infrastructure {
        let text = std::fs::read_to_string(fixtures().join(name)).expect("Infrastructure");
        let object: Value = serde_yaml::from_str(&text).expect("YAML");
        // Created, then its status written through the status subresource, as the installer
        // and the operator write them.
        api.create(&object).expect("create the Infrastructure");
        let mut stored = api
            .get("Infrastructure", None, "cluster")
            .expect("stored Infrastructure");
        stored["status"] = object["status"].clone();
        api.update_status(&stored).expect("its status");
    }
    api
}

/// With the flag and every right, the answers of `recording` (pr6124-89aa74a52/cluster-*).
fn cluster_answers_are_the_prs(infrastructure: Option<&str>, recording: &str, url: Option<&str>) {
    let api = cluster(infrastructure);
    let tokens = token_dir();
    let server = Server::start_cluster_with_flags(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[FLAG],
        &[],
    );
    server.wait_every_pool_ready(DEADLINE);
    let answers = recorded(recording);
    assert!(answers.len() >= 4);
    for answer in answers {
        let ours = ask(&server, &answer.pool, &answer.spec);
        let what = format!("{} {} on {}", answer.pool, answer.spec, api.describe());
        assert_eq!(ours.status, answer.status, "{what}");
        let (ours_masked, ours_configs) = without_object_metadata(&ours.body);
        let (theirs_masked, theirs_configs) = without_object_metadata(&answer.body);
        assert!(
            ours_masked == theirs_masked,
            "{what}: not the PR's bytes:\n{}\n{}",
            String::from_utf8_lossy(&ours_masked),
            String::from_utf8_lossy(&theirs_masked)
        );
        assert_eq!(ours_configs, theirs_configs, "{what}");
        assert_eq!(
            file(&ours.body, CA_PATH).as_deref(),
            Some(ROOT_CA.as_bytes())
        );
        assert_eq!(
            annotations(&ours.body).get(URL_KEY).and_then(Value::as_str),
            url
        );
    }
    let page = status_page(&server);
    assert_eq!(page["features"][FEATURE]["state"], "enabled", "{page:#}");
}

#[test]
fn cluster_answers_with_the_flag_are_upstream_pr_6124s() {
    cluster_answers_are_the_prs(
        Some("infrastructure-uri.yaml"),
        "pr6124-89aa74a52/cluster-uri",
        Some("https://api-int.example.test:22623"),
    );
}

#[test]
fn on_bare_metal_the_url_is_the_first_internal_address_bracketed() {
    cluster_answers_are_the_prs(
        Some("infrastructure-baremetal-ipv6.yaml"),
        "pr6124-89aa74a52/cluster-baremetal-ipv6",
        Some("https://[fd00::5]:22623"),
    );
}

#[test]
fn without_an_infrastructure_the_root_ca_is_served_and_the_url_is_not() {
    cluster_answers_are_the_prs(None, "pr6124-89aa74a52/cluster-missing", None);
}

/// The ServiceAccount `machine-config-server` bound to the MCO's own ClusterRole (no `get`
/// on infrastructures); a kubeconfig authenticating as it.
fn under_the_mcos_rights(api: &ApiServer) -> tempfile::NamedTempFile {
    let deploy = mcs::repo().join("config/deploy");
    api.load_yaml_file(deploy.join("serviceaccount.yaml"))
        .unwrap();
    api.load_yaml_file(mcs::repo().join("tests/fixtures/mco/clusterrole.yaml"))
        .unwrap();
    let token = api
        .token_for(MCO_NAMESPACE, "machine-config-server")
        .unwrap();
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(kubeconfig.path(), api.kubeconfig_with_token(&token)).unwrap();
    kubeconfig
}

#[test]
fn without_the_right_the_answers_are_the_originals_until_it_is_granted() {
    let api = cluster(Some("infrastructure-uri.yaml"));
    let kubeconfig = under_the_mcos_rights(&api);
    let tokens = token_dir();
    let probe = [(ENV_PROBE_INTERVAL_MS, "500")];
    let with_flag = Server::start_cluster_with_flags(
        kubeconfig.path(),
        APISERVER_URL,
        tokens.path(),
        &[FLAG],
        &probe,
    );
    let without = Server::start_cluster(kubeconfig.path(), APISERVER_URL, tokens.path(), &probe);
    with_flag.wait_every_pool_ready(DEADLINE);
    without.wait_every_pool_ready(DEADLINE);
    for pool in ["master", "arbiter"] {
        for spec in ["2.2.0", "3.4.0"] {
            let ours = ask(&with_flag, pool, spec);
            assert_eq!(ours.status, 200, "{pool} {spec}");
            assert!(
                ours.body == ask(&without, pool, spec).body,
                "{pool} {spec}: the flag changed the answer without its right"
            );
            assert_ne!(
                file(&ours.body, CA_PATH).as_deref(),
                Some(ROOT_CA.as_bytes())
            );
        }
    }
    // Said once, naming the right; on /status and in the metric.
    let off_lines = |server: &Server| {
        server
            .output()
            .lines()
            .filter(|l| l.contains("feature off") && l.contains(&format!("feature=\"{FEATURE}\"")))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let lines = off_lines(&with_flag);
    assert_eq!(lines.len(), 1, "{}", with_flag.output());
    assert!(
        lines[0].contains("get infrastructures \\\"cluster\\\" (config.openshift.io)")
            || lines[0].contains("get infrastructures \"cluster\" (config.openshift.io)"),
        "{}",
        lines[0]
    );
    let page = status_page(&with_flag);
    assert_eq!(page["features"][FEATURE]["state"], "disabled", "{page:#}");
    assert_eq!(
        metric(
            &with_flag,
            &format!("mcs_feature_enabled{{feature=\"{FEATURE}\"}}")
        ),
        Some(0.0)
    );
    // Without the flag it is not asked for: no line, not probed.
    assert!(off_lines(&without).is_empty(), "{}", without.output());
    let page = status_page(&without);
    assert_eq!(
        page["features"][FEATURE]["state"], "not-requested",
        "{page:#}"
    );
    assert!(api
        .requests()
        .iter()
        .all(|r| r.resource != "infrastructures" || r.status != 403));

    // The administrator grants the extras: on without a restart, the URL read once.
    api.load_yaml_file(mcs::repo().join("config/deploy/extras/rbac.yaml"))
        .unwrap();
    let body = poll("the additions served", DEADLINE, || {
        let answer = ask(&with_flag, "master", "3.4.0");
        file(&answer.body, CA_PATH).map(|_| answer.body)
    });
    assert_eq!(
        annotations(&body).get(URL_KEY).and_then(Value::as_str),
        Some("https://api-int.example.test:22623")
    );
    assert_eq!(
        status_page(&with_flag)["features"][FEATURE]["state"],
        "enabled"
    );
    assert_eq!(file(&ask(&without, "master", "3.4.0").body, CA_PATH), None);
}

const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";

/// Ignition's `stage` with the config cache and root of `work`. The files stage ends by asking
/// `setfiles` to label what it wrote with the root's SELinux policy: a stand-in in `work/bin`
/// records the paths (`work/relabelled`) where this machine has neither.
fn ignition(work: &Path, stage: &str) -> Result<(), String> {
    let bin = work.join("bin");
    if !bin.exists() {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::create_dir_all(&bin).unwrap();
        let setfiles = bin.join("setfiles");
        let script = format!("#!/bin/sh\ncat > '{}'\n", work.join("relabelled").display());
        std::fs::write(&setfiles, script).unwrap();
        std::fs::set_permissions(&setfiles, std::fs::Permissions::from_mode(0o755)).unwrap();
        let selinux = work.join("root/etc/selinux");
        std::fs::create_dir_all(&selinux).unwrap();
        std::fs::write(
            selinux.join("config"),
            "SELINUX=enforcing\nSELINUXTYPE=targeted\n",
        )
        .unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new(IGNITION)
        .env("PATH", path)
        .args(["-platform", "file", "-stage", stage, "-log-to-stdout"])
        .args(["-fetch-timeout", "30s"])
        .arg("-config-cache")
        .arg(work.join("ignition.json"))
        .arg("-state-file")
        .arg(work.join("state"))
        .arg("-neednet")
        .arg(work.join("neednet"))
        .arg("-root")
        .arg(work.join("root"))
        .env("IGNITION_CONFIG_FILE", work.join("pointer.ign"))
        .output()
        .map_err(|e| format!("run {IGNITION}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[tier(ignition)]
#[test]
fn the_real_ignition_client_writes_both_files_where_the_daemon_reads_them() {
    let api = cluster(Some("infrastructure-uri.yaml"));
    let tokens = token_dir();
    let server = Server::start_cluster_with_flags(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[FLAG],
        &[],
    );
    server.wait_every_pool_ready(DEADLINE);
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("root")).unwrap();
    let ca = std::fs::read(mcs::repo().join("certs/ca.crt")).unwrap();
    let pointer = serde_json::json!({
        "ignition": {
            "version": "3.2.0",
            "config": { "merge": [ { "source":
                format!("https://localhost:{}/config/master", server.secure.port()) } ] },
            "security": { "tls": { "certificateAuthorities": [ { "source": format!(
                "data:text/plain;charset=utf-8;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(&ca)
            ) } ] } }
        }
    });
    std::fs::write(
        work.path().join("pointer.ign"),
        serde_json::to_vec(&pointer).unwrap(),
    )
    .unwrap();
    for stage in ["fetch", "files"] {
        if let Err(log) = ignition(work.path(), stage) {
            panic!(
                "ignition {stage}:\n{log}\n--- server ---\n{}",
                server.output()
            );
        }
    }
    let root = work.path().join("root");
    let written = |path: &str| {
        std::fs::read(root.join(path.trim_start_matches('/')))
            .unwrap_or_else(|e| panic!("{path} not written: {e}"))
    };
    assert_eq!(written(CA_PATH), ROOT_CA.as_bytes());
    let annotations: Value = serde_json::from_slice(&written(ANNOTATIONS_PATH)).unwrap();
    assert_eq!(annotations[URL_KEY], "https://api-int.example.test:22623");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(root.join(CA_PATH.trim_start_matches('/')))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o644);
    // And asked to label both, as on a machine with SELinux.
    let relabelled = std::fs::read(work.path().join("relabelled")).unwrap();
    // (Ignition names the first directory it created for them: labelled with what is in it.)
    for path in [CA_PATH, ANNOTATIONS_PATH] {
        let full = root.join(path.trim_start_matches('/'));
        assert!(
            relabelled
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .any(|p| full.starts_with(Path::new(std::ffi::OsStr::from_bytes(p)))),
            "{path} not relabelled: {}",
            String::from_utf8_lossy(&relabelled)
        );
    }
}

#[test]
fn explain_shows_the_failure_report_ca_and_where_reports_go() {
    let output = Command::new(mcs::bin())
        .args(["explain", "--pool", "master", FLAG, "--server-basedir"])
        .arg(base_dir())
        .arg("--bootstrap-kubeconfig")
        .arg(base_dir().join("kubeconfig"))
        .output()
        .expect("explain");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    let ca_line = text
        .lines()
        .find(|l| l.contains(CA_PATH))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(ca_line.contains("failure-report CA"), "{ca_line}");
    assert!(
        text.contains("failure reports:")
            && text.contains("the failure-report CA is served, no machineConfigServerURL"),
        "{text}"
    );
}
