//! `machine-config-server compare`, run as an operator runs it before switching: the real
//! binary against a running "original" on loopback. Against this server itself every answer is
//! `identical` and it exits 0; against a small server answering the original's recorded
//! answers (tests/fixtures/compare/original-7ff337a4f, recorded once from the original built at
//! 7ff337a4f in bootstrap mode on tests/fixtures/compare/bootstrap) every row is `identical` or
//! a named deviation, and answers altered on the original's side show as `different` (naming
//! the JSON path inside the served MachineConfig), `status` and `same-json`, with exit status 1.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use support::mcs::{self, StopFlag};

/// The compare fixture: a bootstrap directory (master with a file without contents, arbiter
/// with a Tang advertisement).
fn fixture() -> PathBuf {
    mcs::repo().join("tests/fixtures/compare/bootstrap")
}

fn recorded_dir() -> PathBuf {
    mcs::repo().join("tests/fixtures/compare/original-7ff337a4f")
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", self.stdout, self.stderr))
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

/// `compare` on the fixture against `against`, with `extra` flags.
fn compare(against: &str, extra: &[&str]) -> Run {
    compare_on(&fixture(), against, extra)
}

/// `compare` on the bootstrap directory `base` against `against`, with `extra` flags.
fn compare_on(base: &std::path::Path, against: &str, extra: &[&str]) -> Run {
    let output = Command::new(mcs::bin())
        .arg("compare")
        .arg("--server-basedir")
        .arg(base)
        .arg("--bootstrap-kubeconfig")
        .arg(base.join("kubeconfig"))
        .args(["--against", against])
        .args(extra)
        .env("RUST_LOG", "warn")
        .output()
        .expect("compare runs");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `(pool, spec) -> verdict` of a JSON report.
fn verdicts(report: &Value) -> BTreeMap<(String, String), String> {
    report["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            (
                (
                    row["pool"].as_str().unwrap().to_string(),
                    row["spec"].as_str().unwrap().to_string(),
                ),
                row["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn against_this_server_every_answer_is_identical() {
    let server = mcs::Server::bootstrap(&fixture(), &[]);
    let ca = mcs::repo().join("certs/ca.crt");
    let against = format!("https://127.0.0.1:{}", server.secure.port());
    let run = compare(
        &against,
        &[
            "--against-ca",
            ca.to_str().unwrap(),
            "--client-address",
            "127.0.0.1",
            "--output",
            "json",
        ],
    );
    run.assert_code(0);
    let report = run.json();
    let verdicts = verdicts(&report);
    // Both pools at none, 2.2.0 and 3.1.0 to 3.6.0.
    assert_eq!(verdicts.len(), 16, "{verdicts:?}");
    assert!(verdicts.values().all(|v| v == "identical"), "{verdicts:?}");
    assert_eq!(report["summary"]["identical"], 16);
    assert_eq!(report["mode"], "bootstrap");
    // The server's log shows what asked.
    mcs::poll(
        "the server logged compare's requests",
        Duration::from_secs(10),
        || {
            server
                .output()
                .contains("user_agent=\"machine-config-server-compare/")
                .then_some(())
        },
    );

    // The text form: a row per request, the summary last.
    let run = compare(
        &against,
        &["--against-ca", ca.to_str().unwrap(), "--pool", "master"],
    );
    run.assert_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[0].starts_with("comparing bootstrap mode"),
        "{}",
        run.stdout
    );
    assert_eq!(lines.len(), 1 + 1 + 8 + 1, "{}", run.stdout);
    assert!(
        lines[2].starts_with("master  none   identical   200, "),
        "{}",
        run.stdout
    );
    assert_eq!(
        lines[10],
        "summary: 8 answers compared: 8 identical, 0 same-json, 0 deviation, 0 status, 0 different"
    );
}

/// One recorded answer of the original.
#[derive(Clone)]
struct Answer {
    status: u16,
    body: Vec<u8>,
}

/// The recorded answers, keyed `(pool, spec)` (`none` for no Accept header).
fn recorded() -> BTreeMap<(String, String), Answer> {
    recorded_from(&recorded_dir())
}

/// The answers recorded in `dir` (its `answers.tsv`).
fn recorded_from(dir: &std::path::Path) -> BTreeMap<(String, String), Answer> {
    let index = std::fs::read_to_string(dir.join("answers.tsv")).expect("answers.tsv");
    index
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let body = match fields[3] {
                "-" => Vec::new(),
                file => std::fs::read(dir.join(file)).expect("a recorded body"),
            };
            (
                (fields[0].to_string(), fields[1].to_string()),
                Answer {
                    status: fields[2].parse().expect("a status"),
                    body,
                },
            )
        })
        .collect()
}

/// What the recorded original saw of each request: the client's address and User-Agent.
type Seen = Arc<Mutex<Vec<(SocketAddr, String)>>>;

/// A plain-HTTP server on a loopback port answering `GET /config/<pool>` from recorded
/// answers, by the spec of the request's Accept header (as compare writes it). Stopped and
/// joined on drop.
struct RecordedOriginal {
    address: SocketAddr,
    seen: Seen,
    stop: StopFlag,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RecordedOriginal {
    fn start(answers: BTreeMap<(String, String), Answer>) -> RecordedOriginal {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = listener.local_addr().unwrap();
        let stop = StopFlag::new();
        let seen: Seen = Arc::default();
        let (log, stopped) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.is_set() {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let peer = stream.peer_addr().unwrap();
                let (accept, agent, pool) = read_request(&stream);
                log.lock().unwrap().push((peer, agent));
                let spec = accept
                    .split("version=")
                    .nth(1)
                    .and_then(|rest| rest.split(',').next())
                    .unwrap_or("none")
                    .to_string();
                let answer = answers.get(&(pool, spec)).cloned().unwrap_or(Answer {
                    status: 404,
                    body: Vec::new(),
                });
                let mut stream = stream;
                let head = format!(
                    "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    answer.status,
                    answer.body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&answer.body);
            }
        });
        RecordedOriginal {
            address,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for RecordedOriginal {
    fn drop(&mut self) {
        self.stop.set();
        // Wakes the accept loop, which then sees the flag.
        let _ = std::net::TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The Accept header, the User-Agent and the pool of one request.
fn read_request(stream: &std::net::TcpStream) -> (String, String, String) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    let _ = reader.read_line(&mut request_line);
    let (mut accept, mut agent) = (String::new(), String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.trim_end().split_once(':') {
            match name.to_ascii_lowercase().as_str() {
                "accept" => accept = value.trim().to_string(),
                "user-agent" => agent = value.trim().to_string(),
                _ => {}
            }
        }
    }
    let path = request_line.split(' ').nth(1).unwrap_or_default();
    let pool = path.trim_start_matches("/config/").to_string();
    (accept, agent, pool)
}

#[test]
fn against_the_originals_recorded_answers_only_documented_deviations_differ() {
    let original = RecordedOriginal::start(recorded());
    let run = compare(
        &original.url(),
        &["--client-address", "127.0.0.2", "--output", "json"],
    );
    run.assert_code(0);
    let report = run.json();
    let verdicts = verdicts(&report);
    let deviation = |pool: &str, spec: &str| {
        let row = report["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["pool"] == pool && r["spec"] == spec)
            .unwrap();
        assert_eq!(row["verdict"], "deviation", "{pool} {spec}: {row}");
        row["detail"]["deviations"][0].as_str().unwrap().to_string()
    };
    // Master: its file without contents is an empty file in 2.2 (the original drops it).
    assert_eq!(deviation("master", "none"), "sourceless-files-2.2");
    assert_eq!(deviation("master", "2.2.0"), "sourceless-files-2.2");
    // Arbiter: the Tang advertisement is kept in 3.4 and refused below (the original drops it).
    assert_eq!(deviation("arbiter", "3.4.0"), "tang-advertisement");
    assert_eq!(deviation("arbiter", "3.3.0"), "tang-advertisement");
    assert_eq!(deviation("arbiter", "3.2.0"), "tang-advertisement");
    let identical = verdicts.values().filter(|v| *v == "identical").count();
    assert_eq!(identical, 11, "{verdicts:?}");
    // Every request named the tool and came from the address asked for.
    let seen = original.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 16);
    for (peer, agent) in seen {
        assert_eq!(peer.ip().to_string(), "127.0.0.2");
        assert!(
            agent.starts_with("machine-config-server-compare/"),
            "{agent}"
        );
    }
}

/// An original with upstream's PR #6124 (recorded once on `tests/fixtures/failure-reporting`)
/// tells every machine where to report a first-boot failure: compared as it is, every answer
/// differs and the report says which flag makes them the same; with that flag every answer is
/// identical.
#[test]
fn against_pr_6124_the_flag_makes_every_answer_identical() {
    let fixtures = mcs::repo().join("tests/fixtures/failure-reporting");
    let base = fixtures.join("bootstrap");
    let original =
        RecordedOriginal::start(recorded_from(&fixtures.join("pr6124-89aa74a52/bootstrap")));
    let run = compare_on(&base, &original.url(), &["--output", "json"]);
    run.assert_code(1);
    let report = run.json();
    assert!(
        verdicts(&report).values().all(|v| v == "different"),
        "{report:#}"
    );
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("/etc/machine-config-daemon/mcs-ca-bundle.crt")
            && notes.contains("--advertise-failure-reporting"),
        "{notes}"
    );
    let run = compare_on(
        &base,
        &original.url(),
        &["--output", "json", "--advertise-failure-reporting"],
    );
    run.assert_code(0);
    let report = run.json();
    let verdicts = verdicts(&report);
    assert_eq!(verdicts.len(), 16);
    assert!(verdicts.values().all(|v| v == "identical"), "{verdicts:?}");
    assert_eq!(report["notes"], serde_json::json!([]), "{report:#}");
}

/// `body` with the encapsulated MachineConfig's `spec.osImageURL` replaced, as an original
/// serving an altered MachineConfig would send it.
fn with_altered_image(body: &[u8]) -> Vec<u8> {
    use machine_config_server::ignition::dataurl;
    let mut config: Value = serde_json::from_slice(body).unwrap();
    let files = config["storage"]["files"].as_array_mut().unwrap();
    let encapsulated = files
        .iter_mut()
        .find(|f| f["path"] == "/etc/ignition-machine-config-encapsulated.json")
        .expect("the encapsulated MachineConfig");
    let source = encapsulated["contents"]["source"].as_str().unwrap();
    let mut mc: Value = serde_json::from_slice(&dataurl::decode(source).unwrap()).unwrap();
    mc["spec"]["osImageURL"] =
        Value::String("quay.example.com/openshift/rhcos@sha256:altered".into());
    encapsulated["contents"]["source"] =
        Value::String(dataurl::encode(&serde_json::to_vec(&mc).unwrap()));
    serde_json::to_vec(&config).unwrap()
}

#[test]
fn answers_altered_on_the_originals_side_are_different_status_or_same_json() {
    let mut answers = recorded();
    let key = |pool: &str, spec: &str| (pool.to_string(), spec.to_string());
    // An altered MachineConfig served at 3.4.
    let altered = with_altered_image(&answers[&key("master", "3.4.0")].body);
    answers.get_mut(&key("master", "3.4.0")).unwrap().body = altered;
    // A status change: the original fails arbiter at 3.5.
    *answers.get_mut(&key("arbiter", "3.5.0")).unwrap() = Answer {
        status: 500,
        body: Vec::new(),
    };
    // The same JSON in other bytes: `<` written unescaped.
    let master_3_1 = answers.get_mut(&key("master", "3.1.0")).unwrap();
    let unescaped = String::from_utf8(master_3_1.body.clone())
        .unwrap()
        .replacen("\\u003c", "<", 1);
    master_3_1.body = unescaped.into_bytes();

    let original = RecordedOriginal::start(answers);
    let against = original.url();
    let run = compare(&against, &["--output", "json"]);
    run.assert_code(1);
    assert!(
        run.stderr
            .contains("2 of 16 answers differ from the original's (1 status, 1 different)"),
        "{}",
        run.stderr
    );
    let report = run.json();
    let row = |pool: &str, spec: &str| {
        report["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["pool"] == pool && r["spec"] == spec)
            .unwrap()
            .clone()
    };
    let different = row("master", "3.4.0");
    assert_eq!(different["verdict"], "different", "{different}");
    assert_eq!(
        different["detail"]["path"],
        "storage.files[6].contents.source:spec.osImageURL"
    );
    assert!(different["detail"]["theirs"]
        .as_str()
        .unwrap()
        .contains("altered"));
    let status = row("arbiter", "3.5.0");
    assert_eq!(status["verdict"], "status");
    assert_eq!(
        status["detail"],
        serde_json::json!({"ours": 200, "theirs": 500})
    );
    let same = row("master", "3.1.0");
    assert_eq!(same["verdict"], "same-json", "{same}");
    assert!(same["detail"]["ours"].as_str().unwrap().contains("\\u003c"));
    assert_eq!(report["summary"]["different"], 1);
    assert_eq!(report["summary"]["status"], 1);
    assert_eq!(report["summary"]["same_json"], 1);

    // The text report names the pool, the spec and the path.
    let run = compare(&against, &[]);
    run.assert_code(1);
    let line = run
        .stdout
        .lines()
        .find(|l| l.contains(" different "))
        .expect("a different row");
    assert!(
        line.starts_with(
            "master   3.4.0  different   storage.files[6].contents.source:spec.osImageURL: ours "
        ) && line.ends_with(", original \"quay.example.com/openshift/rhcos@sha256:altered\""),
        "{line}"
    );
}

#[test]
fn an_https_original_needs_its_ca() {
    let run = compare("https://127.0.0.1:1", &[]);
    run.assert_code(64);
    assert!(
        run.stderr.contains("--against-ca is required"),
        "{}",
        run.stderr
    );
    let run = compare("ftp://127.0.0.1:1", &[]);
    run.assert_code(64);
    assert!(run.stderr.contains("--against"), "{}", run.stderr);
    let missing = Path::new("/nonexistent/ca.crt");
    let run = compare(
        "https://127.0.0.1:1",
        &["--against-ca", missing.to_str().unwrap()],
    );
    run.assert_code(64);
    assert!(
        run.stderr.contains("--against-ca /nonexistent/ca.crt"),
        "{}",
        run.stderr
    );
}

const APISERVER_URL: &str = "https://api-int.example.com:6443";

/// Cluster mode: this server started against the in-test API server holding the full-size
/// fixture's pools and rendered configs, and compare reading the same cluster (its watch caches
/// synced, then stopped): every pool, every spec, identical.
#[test]
fn in_a_cluster_against_this_server_every_answer_is_identical() {
    let api = support::api_server::ApiServer::start(support::api_server::Options::default());
    let full = support::fixtures::bootstrap_full();
    for dir in ["machine-configs", "machine-pools"] {
        if let Err(e) = api.load_yaml_dir(full.join(dir)) {
            panic!("loading {dir}: {e}");
        }
    }
    if let Err(e) = api.load_yaml_str(support::CONTROLLER_CONFIG) {
        panic!("loading the ControllerConfig: {e}");
    }
    let tokens = tempfile::tempdir().expect("tempdir");
    std::fs::write(tokens.path().join("token"), "compare-test-token-0123456789").unwrap();
    std::fs::write(
        tokens.path().join("ca.crt"),
        "-----BEGIN CERTIFICATE-----\nTEST CA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let server =
        mcs::Server::start_cluster(api.kubeconfig_file(), APISERVER_URL, tokens.path(), &[]);
    server.wait_every_pool_ready(Duration::from_secs(60));

    let ca = mcs::repo().join("certs/ca.crt");
    let output = Command::new(mcs::bin())
        .arg("compare")
        .arg("--kubeconfig")
        .arg(api.kubeconfig_file())
        .args(["--apiserver-url", APISERVER_URL])
        .arg("--bootstrap-token-dir")
        .arg(tokens.path())
        .args(["--timeout-seconds", "30"])
        .args([
            "--against",
            &format!("https://localhost:{}", server.secure.port()),
        ])
        .arg("--against-ca")
        .arg(&ca)
        .args(["--output", "json"])
        .env("RUST_LOG", "warn")
        .output()
        .expect("compare runs");
    let run = Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    run.assert_code(0);
    let report = run.json();
    assert_eq!(report["mode"], "cluster");
    let verdicts = verdicts(&report);
    let pools: std::collections::BTreeSet<&str> =
        verdicts.keys().map(|(pool, _)| pool.as_str()).collect();
    assert_eq!(
        pools.into_iter().collect::<Vec<_>>(),
        ["layered-worker", "master", "worker"]
    );
    assert!(verdicts.values().all(|v| v == "identical"), "{verdicts:?}");
}
