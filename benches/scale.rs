//! Cluster mode at scale (`benches/scale.sh`, issue 15): fills an API server with a large,
//! realistically sized cluster (5000 Nodes with the MCO annotations, status addresses,
//! conditions, capacity, nodeInfo and ~50 images each; their MachineConfigNodes; 20 pools with 3
//! rendered MachineConfigs of the realistic fixture each; MachineOSConfigs/Builds for 3 layered
//! pools), runs the real `machine-config-server start` against it and measures, in one run:
//!
//! - time to ready after the API lists complete, and the API requests at start-up by verb and
//!   resource (per-object GETs counted separately);
//! - peak (`VmHWM`) and resting (`VmRSS`) memory of the server process;
//! - first-request latency per pool;
//! - the MachineConfigNode publisher's backlog (Nodes without an MCN): write rate in the worst
//!   1-second window, time to drain, and how soon a Node that joins meanwhile gets its MCN;
//! - server CPU while every Node updates its status every `MCS_SCALE_HEARTBEAT_SECONDS`;
//! - time from a pool's `updatedMachineCount` change to the new config being served;
//! - a scale-up storm: `MCS_SCALE_STORM` concurrent fetches on fresh TLS connections.
//!
//! Backend: `tests/support/api_server.rs`: a real kube-apiserver and etcd when
//! `KUBEBUILDER_ASSETS` names them (the envtest convention; the real CRDs come from
//! `MCS_UPSTREAM_ASSETS`), else the tests' fake API server (`tests/support/fake_apiserver`, in
//! this process, real list/watch over HTTP on loopback). [`Backend::from_env`] picks it.
//!
//! Usage: `scale [--quick]`; knobs are environment variables (benches/README.md). It prints
//! the figures table on stdout.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::mcs;
use support::mcs::StopFlag;

use serde_json::{json, Value};
use support::api_server::{ApiServer, Options, RequestRecord, Scope};

const APISERVER_URL: &str = support::cluster::APISERVER_URL;
const ACCEPT: &str = "application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1";
const LAYERED_POOLS: usize = 3;
const RENDERED_PER_POOL: usize = 3;
const IMAGES_PER_NODE: usize = 50;

/// Everything the run can be told (environment variables, see benches/README.md).
struct Knobs {
    nodes: usize,
    pools: usize,
    missing_mcns: usize,
    heartbeat: Duration,
    churn: Duration,
    storm: usize,
    count_changes: usize,
    max_writes_per_second: Option<String>,
    /// Stop after the first-config phase (its table only): memory work without the rest.
    first_config_only: bool,
}

impl Knobs {
    fn from_env(quick: bool) -> Knobs {
        let num = |key: &str, default: usize| {
            std::env::var(key)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        let (nodes, missing, churn, storm) = if quick {
            (300, 60, 10, 50)
        } else {
            (5000, 1000, 40, 500)
        };
        Knobs {
            nodes: num("MCS_SCALE_NODES", nodes),
            pools: num("MCS_SCALE_POOLS", 20).max(LAYERED_POOLS + 2),
            missing_mcns: num("MCS_SCALE_MISSING_MCNS", missing),
            heartbeat: Duration::from_secs(num("MCS_SCALE_HEARTBEAT_SECONDS", 10) as u64),
            churn: Duration::from_secs(num("MCS_SCALE_CHURN_SECONDS", churn) as u64),
            storm: num("MCS_SCALE_STORM", storm),
            count_changes: num("MCS_SCALE_COUNT_CHANGES", 3),
            max_writes_per_second: std::env::var("MCS_SCALE_MCN_WRITES_PER_SECOND").ok(),
            first_config_only: num("MCS_SCALE_FIRST_CONFIG_ONLY", 0) == 1,
        }
    }
}

/// The API server the cluster lives in: `support::api_server::ApiServer`, a real
/// kube-apiserver when `KUBEBUILDER_ASSETS` names one (the real CRDs from
/// `MCS_UPSTREAM_ASSETS`), else the tests' fake API server. This is the one constructor; the
/// rest of the harness goes through these methods.
struct Backend(ApiServer);

impl Backend {
    fn from_env() -> Result<Backend, String> {
        let options = Options {
            // The initial load alone is ~20,000 changes; a watch restarting during the load
            // must not see 410s.
            history_limit: 50_000,
            ..Options::default()
        };
        Ok(Backend(ApiServer::start(options)))
    }

    fn name(&self) -> &'static str {
        if self.0.is_real() {
            "real kube-apiserver (KUBEBUILDER_ASSETS)"
        } else {
            "fake API server (tests/support/fake_apiserver)"
        }
    }

    fn kubeconfig(&self) -> &Path {
        self.0.kubeconfig_file()
    }

    /// Creates or replaces `object` with its status (fixture loading).
    /// Creates or replaces `object`; returns it as stored (uid, resourceVersion).
    fn put(&self, object: &Value) -> Result<Value, String> {
        self.0.apply_object(object).map_err(|e| e.to_string())
    }

    /// A write as `manager` (server-side apply, forced) to the main resource or `/status`.
    fn apply_as(&self, manager: &str, object: &Value, status: bool) -> Result<(), String> {
        let scope = if status { Scope::Status } else { Scope::Main };
        self.0
            .apply_as(manager, object, scope, true)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn merge_patch(&self, kind: &str, name: &str, patch: &Value) -> Result<(), String> {
        self.0
            .merge_patch(kind, None, name, patch)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn get(&self, kind: &str, name: &str) -> Option<Value> {
        self.0.get(kind, None, name)
    }

    fn list(&self, kind: &str) -> Vec<Value> {
        self.0.list(kind)
    }

    fn count(&self, kind: &str) -> usize {
        self.list(kind).len()
    }

    /// The requests the server under test made (fake: its request log; real: the audit log of
    /// the code under test's identity).
    fn requests(&self) -> Vec<RequestRecord> {
        self.0.requests()
    }

    fn clear_requests(&self) {
        self.0.clear_requests()
    }
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    match run(Knobs::from_env(quick)) {
        Ok(Verdict::Met) => ExitCode::SUCCESS,
        Ok(Verdict::Missed(rows)) => {
            eprintln!("scale: missed: {}", rows.join("; "));
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("scale: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether every row met its target (the exit status: 1 when one missed).
enum Verdict {
    Met,
    Missed(Vec<String>),
}

/// One row of the result table.
struct Row {
    figure: String,
    ours: String,
    target: String,
    verdict: &'static str,
    note: String,
}

#[derive(Default)]
struct Table {
    rows: Vec<Row>,
}

impl Table {
    fn add(&mut self, figure: &str, ours: String, target: &str, pass: Option<bool>, note: String) {
        let verdict = match pass {
            Some(true) => "pass",
            Some(false) => "MISS",
            None => "-",
        };
        eprintln!("   {figure}: {ours} ({target}) {verdict} {note}");
        self.rows.push(Row {
            figure: figure.into(),
            ours,
            target: target.into(),
            verdict,
            note,
        });
    }

    fn verdict(&self) -> Verdict {
        let missed: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.verdict == "MISS")
            .map(|r| r.figure.clone())
            .collect();
        if missed.is_empty() {
            Verdict::Met
        } else {
            Verdict::Missed(missed)
        }
    }

    fn markdown(&self) -> String {
        let mut out =
            String::from("| figure | ours | target | pass/miss | note |\n|---|---|---|---|---|\n");
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                r.figure, r.ours, r.target, r.verdict, r.note
            ));
        }
        out
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn run(knobs: Knobs) -> Result<Verdict, String> {
    let load_before = loadavg();
    let started = Instant::now();
    let backend = Backend::from_env()?;
    eprintln!("== loading the cluster into the {}", backend.name());
    let cluster = Cluster::new(&knobs)?;
    let load_started = Instant::now();
    cluster.load(&backend)?;
    let load_time = load_started.elapsed();
    eprintln!(
        "   loaded {} Nodes, {} MachineConfigNodes, {} pools, {} MachineConfigs in {:.1} s",
        backend.count("Node"),
        backend.count("MachineConfigNode"),
        backend.count("MachineConfigPool"),
        backend.count("MachineConfig"),
        load_time.as_secs_f64()
    );

    let mut first_config = Table::default();
    measure_first_config(&backend, &cluster, &mut first_config)?;
    if knobs.first_config_only {
        print_heading(&backend, &cluster, &knobs, &load_before, load_time, started);
        print!("{}", first_config.markdown());
        return Ok(first_config.verdict());
    }

    let run = RunFacts {
        load_before,
        started,
        load_time,
    };
    std::thread::scope(|scope| measure_all(scope, &backend, &cluster, &knobs, &run, first_config))
}

/// What the closing lines say about the run as a whole.
struct RunFacts {
    load_before: String,
    started: Instant,
    load_time: Duration,
}

/// How many times each server starts in the first-config comparison (medians are reported).
const FIRST_CONFIG_ROUNDS: usize = 3;
/// Where the original reads the node-bootstrapper token: a fixed path, no flag.
const GO_TOKEN_DIR: &str = "/etc/mcs/bootstrap-token";

/// One server of the first-config comparison.
struct Starter {
    label: &'static str,
    bin: PathBuf,
    /// Flags after `start` (kubeconfig, token directory).
    args: Vec<String>,
}

/// The first config of a pool after a cold start, side by side in one run: this server as
/// the MCO's DaemonSet runs it, under the MCO's own ClusterRole (`tests/fixtures/mco/`) and
/// with every right, and the original Go server (`MCS_SCALE_GO_SERVER`, a binary built from
/// openshift/machine-config-operator) under the same ServiceAccount. Each starts
/// `FIRST_CONFIG_ROUNDS` times, in turn; the figure is the median time from process start to
/// the first 200 for the worker pool (what the new machines of a scale-up ask for; else the
/// first pool that is not layered), polled every 10 ms over plain HTTP.
fn measure_first_config(
    backend: &Backend,
    cluster: &Cluster,
    table: &mut Table,
) -> Result<(), String> {
    eprintln!(
        "== first config after a cold start (each server {FIRST_CONFIG_ROUNDS} times, in turn)"
    );
    let repo = mcs::repo();
    backend
        .0
        .load_yaml_file(repo.join("config/deploy/serviceaccount.yaml"))?;
    backend
        .0
        .load_yaml_file(repo.join("tests/fixtures/mco/clusterrole.yaml"))?;
    let token = backend
        .0
        .token_for("openshift-machine-config-operator", "machine-config-server")
        .map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mco_kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&mco_kubeconfig, backend.0.kubeconfig_with_token(&token))
        .map_err(|e| e.to_string())?;
    let tokens = support::cluster::token_dir();
    let not_layered = || cluster.pools.iter().filter(|p| !p.layered);
    let pool = not_layered()
        .find(|p| p.name == "worker")
        .or_else(|| not_layered().next())
        .ok_or("no pool that is not layered")?
        .name
        .clone();
    let ours = std::env::var_os("MCS_SCALE_SERVER_BIN").map_or_else(mcs::bin, PathBuf::from);
    let path = |p: &Path| p.display().to_string();
    let our_args = |kubeconfig: &Path| {
        vec![
            "--kubeconfig".to_string(),
            path(kubeconfig),
            "--bootstrap-token-dir".to_string(),
            path(tokens.path()),
            "--bind-address".to_string(),
            "127.0.0.1".to_string(),
            "--metrics-bind-address".to_string(),
            String::new(),
        ]
    };
    let mut starters = vec![
        Starter {
            label: OURS_UNDER_MCO,
            bin: ours.clone(),
            args: our_args(&mco_kubeconfig),
        },
        Starter {
            label: "this server, with every right",
            bin: ours,
            args: our_args(backend.kubeconfig()),
        },
    ];
    match std::env::var_os("MCS_SCALE_GO_SERVER").map(PathBuf::from) {
        Some(go) => {
            go_token_dir(tokens.path())?;
            starters.insert(
                0,
                Starter {
                    label: "the original (Go), under the MCO's ClusterRole",
                    bin: go,
                    args: vec!["--kubeconfig".to_string(), path(&mco_kubeconfig)],
                },
            );
        }
        None => eprintln!(
            "   MCS_SCALE_GO_SERVER unset: the original is not measured (benches/README.md)"
        ),
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); starters.len()];
    let mut memory: Vec<Vec<Memory>> = vec![Vec::new(); starters.len()];
    let every_pool: Vec<String> = cluster.pools.iter().map(|p| p.name.clone()).collect();
    let mut answers: Vec<Answers> = vec![Vec::new(); starters.len()];
    for round in 0..FIRST_CONFIG_ROUNDS {
        for (i, (starter, samples)) in starters.iter().zip(&mut times).enumerate() {
            // Every start serves every pool at both specs (the memory is taken after them);
            // the answers are compared once, after the first cold start.
            let started = first_config(starter, &pool, &every_pool)?;
            samples.push(started.time);
            memory[i].push(started.memory);
            if round == 0 {
                answers[i] = started.answers;
            }
        }
    }
    if starters.len() == 3 {
        // The original and this server, under the same (the MCO's) rights: every pool, both
        // specs, byte for byte.
        let (go, ours) = (&answers[0], &answers[1]);
        // Both sides' bodies for a closer look (benches/README.md).
        if let Ok(dir) = std::env::var("MCS_SCALE_DUMP_DIR") {
            for (a, b) in go.iter().zip(ours) {
                let _ = std::fs::write(format!("{dir}/{}-{}-go", a.0, a.1.len()), &a.3);
                let _ = std::fs::write(format!("{dir}/{}-{}-ours", b.0, b.1.len()), &b.3);
            }
        }
        let differing: Vec<String> = go
            .iter()
            .zip(ours)
            .filter(|(a, b)| a.2 != b.2 || a.3 != b.3)
            .map(|(a, b)| {
                let spec = if a.1.is_empty() { "2.2" } else { "3.4" };
                format!("{} at {spec}: {} vs {}", a.0, a.2, b.2)
            })
            .collect();
        table.add(
            "answers equal to the original's, both under the MCO's ClusterRole",
            format!("{} of {}", go.len() - differing.len(), go.len()),
            "all",
            Some(differing.is_empty() && go.len() == ours.len()),
            if differing.is_empty() {
                format!(
                    "every pool at spec 2.2 and 3.4, status and body, after a cold start ({} pools)",
                    every_pool.len()
                )
            } else {
                format!("differing: {}", differing.join("; "))
            },
        );
    }
    let medians: Vec<Duration> = times
        .iter_mut()
        .map(|samples| median_max(samples).0)
        .collect();
    let go = (starters.len() == 3).then(|| medians[0]);
    for (i, (starter, samples)) in starters.iter().zip(&times).enumerate() {
        let all: Vec<String> = samples.iter().map(|d| ms(*d)).collect();
        let under_mco = starter.label == OURS_UNDER_MCO;
        let (target, pass) = match go {
            Some(go) if under_mco => ("<= the original's", Some(medians[i] <= go)),
            _ => ("info", None),
        };
        table.add(
            &format!("first /config/{pool} after start: {}", starter.label),
            format!("{} ms", ms(medians[i])),
            target,
            pass,
            format!("median of {} starts ({} ms)", samples.len(), all.join(", ")),
        );
    }
    // Memory after serving every pool, beside the original's: the figure an operator sizes
    // the DaemonSet's requests and limits by. The target row is this server under the same
    // rights as the original (the same watches, the same work).
    let memory: Vec<Memory> = memory.iter().map(|m| Memory::median(m)).collect();
    let go_memory = (starters.len() == 3).then(|| memory[0]);
    for (i, starter) in starters.iter().enumerate() {
        let (target, pass) = match go_memory {
            Some(go) if starter.label == OURS_UNDER_MCO => (
                "<= the original's",
                Some(memory[i].resident <= go.resident && memory[i].peak <= go.peak),
            ),
            _ => ("info", None),
        };
        table.add(
            &format!("resident / peak memory after the first configs: {}", starter.label),
            format!(
                "{} / {} MB",
                mb(memory[i].resident),
                mb(memory[i].peak)
            ),
            target,
            pass,
            format!(
                "VmRSS {MEMORY_SETTLE:?} after serving every pool at spec 2.2 and 3.4 / VmHWM since start; median of {} starts",
                FIRST_CONFIG_ROUNDS
            ),
        );
    }
    Ok(())
}

/// The label of the first-config starter whose memory and first config are held against the
/// original's.
const OURS_UNDER_MCO: &str = "this server, under the MCO's ClusterRole";

/// How long a server rests after its first configs before its resident memory is read.
const MEMORY_SETTLE: Duration = Duration::from_secs(2);

/// A process's resident memory at rest and its peak, in KiB.
#[derive(Clone, Copy, Debug, Default)]
struct Memory {
    resident: u64,
    peak: u64,
}

impl Memory {
    /// `VmRSS` and `VmHWM` of process `pid` now.
    fn of(pid: u32) -> Memory {
        Memory {
            resident: proc_status_kb(pid, "VmRSS"),
            peak: proc_status_kb(pid, "VmHWM"),
        }
    }

    /// The median of each figure over `samples`.
    fn median(samples: &[Memory]) -> Memory {
        let median = |mut values: Vec<u64>| {
            values.sort_unstable();
            values
                .get(values.len().saturating_sub(1) / 2)
                .copied()
                .unwrap_or(0)
        };
        Memory {
            resident: median(samples.iter().map(|m| m.resident).collect()),
            peak: median(samples.iter().map(|m| m.peak).collect()),
        }
    }
}

/// KiB as MB with one decimal (the comparison with the original is within a few MB).
fn mb(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// A `kB` field of `/proc/PID/status` (`VmRSS`, `VmHWM`), 0 when unreadable.
fn proc_status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// SIGTERM, then SIGKILL if `child` has not exited within `grace`.
fn stop_gracefully(child: &mut std::process::Child, grace: Duration) {
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let exited = mcs::poll_every(Duration::from_millis(20), grace, || {
        child.try_wait().ok().flatten()
    });
    if exited.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The original reads its token and CA from [`GO_TOKEN_DIR`] only: written there from the
/// test's token directory when missing (the bench runs as root on a development machine).
fn go_token_dir(tokens: &Path) -> Result<(), String> {
    let dir = Path::new(GO_TOKEN_DIR);
    for file in ["token", "ca.crt"] {
        if !dir.join(file).exists() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{GO_TOKEN_DIR}: {e}"))?;
            std::fs::copy(tokens.join(file), dir.join(file))
                .map_err(|e| format!("{GO_TOKEN_DIR}/{file}: {e}"))?;
        }
    }
    Ok(())
}

/// What a server answered: (pool, Accept, status, body) per request.
type Answers = Vec<(String, &'static str, u16, Vec<u8>)>;

/// The Accept headers the answers are compared at: spec 2.2 (none) and what Ignition 2.20 asks.
const COMPARED_ACCEPTS: [&str; 2] = ["", ACCEPT];

/// What one cold start of a server gave.
struct ColdStart {
    /// From process start to the first 200 for the timed pool.
    time: Duration,
    /// Every compared pool's answers.
    answers: Answers,
    /// Its memory after those answers ([`MEMORY_SETTLE`] later).
    memory: Memory,
}

/// Starts `starter` cold and times its first 200 for `/config/<pool>`; then fetches each pool
/// of `compare` at [`COMPARED_ACCEPTS`] and reads its memory (the process is stopped after).
fn first_config(starter: &Starter, pool: &str, compare: &[String]) -> Result<ColdStart, String> {
    let (secure, insecure) = (mcs::free_port(), mcs::free_port());
    let certs = mcs::repo().join("certs");
    let started = Instant::now();
    let mut child = Command::new(&starter.bin)
        .arg("start")
        .args(&starter.args)
        .args(["--apiserver-url", APISERVER_URL])
        .args(["--secure-port", &secure.to_string()])
        .args(["--insecure-port", &insecure.to_string()])
        .arg("--cert")
        .arg(certs.join("tls.crt"))
        .arg("--key")
        .arg(certs.join("tls.key"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", starter.bin.display()))?;
    let address: SocketAddr = ([127, 0, 0, 1], insecure).into();
    let served = mcs::poll_every(Duration::from_millis(10), Duration::from_secs(120), || {
        let answer = mcs::try_request(address, None, "GET", &format!("/config/{pool}"), &[]);
        answer
            .ok()
            .filter(|a| a.status == 200)
            .map(|_| started.elapsed())
    });
    let mut answers = Answers::new();
    if served.is_some() {
        for compared in compare {
            for accept in COMPARED_ACCEPTS {
                let headers: Vec<(&str, &str)> = if accept.is_empty() {
                    Vec::new()
                } else {
                    vec![("Accept", accept)]
                };
                let path = format!("/config/{compared}");
                // As a booting machine retries: a pool may wait a moment longer than the first
                // one (a layered pool until the rights are known and its own caches synced).
                let answer =
                    mcs::poll_every(Duration::from_millis(50), Duration::from_secs(30), || {
                        mcs::try_request(address, None, "GET", &path, &headers)
                            .ok()
                            .filter(|a| a.status != 503)
                    })
                    .ok_or_else(|| format!("{}: {path}: 503 for 30 s", starter.label))?;
                answers.push((compared.clone(), accept, answer.status, answer.body));
            }
        }
    }
    std::thread::sleep(MEMORY_SETTLE);
    let memory = Memory::of(child.id());
    // Stopped as a DaemonSet rollout stops a pod (SIGTERM, then SIGKILL after a grace period),
    // so that the publisher's lease is released and the next server takes it at once.
    stop_gracefully(&mut child, Duration::from_secs(10));
    let time = served
        .ok_or_else(|| format!("{}: no 200 for /config/{pool} within 120 s", starter.label))?;
    Ok(ColdStart {
        time,
        answers,
        memory,
    })
}

fn measure_all<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    backend: &'env Backend,
    cluster: &Cluster,
    knobs: &Knobs,
    run: &RunFacts,
    mut table: Table,
) -> Result<Verdict, String> {
    let RunFacts {
        load_before,
        started,
        load_time,
    } = run;
    let tokens = support::cluster::token_dir();
    backend.clear_requests();
    let log = RequestLog::start(scope, backend);
    let server = ServerProcess::spawn(backend, tokens.path(), knobs)?;
    let spawned = Instant::now();
    eprintln!(
        "== started machine-config-server start (pid {})",
        server.pid()
    );

    let first_pool = cluster.pools[0].name.clone();
    let ready_at = mcs::poll_every(Duration::from_millis(10), Duration::from_secs(300), || {
        server.check_alive().ok()?;
        let r = server.fetch(&format!("/config/{first_pool}")).ok()?;
        (r.status == 200).then(Instant::now)
    })
    .ok_or("the server did not become ready within 300 s")?;
    server.check_alive()?;
    let startup_requests = log.snapshot();
    let lists_done = startup_requests
        .iter()
        .filter(|(_, r)| r.verb == "list")
        .map(|(at, _)| *at)
        .max()
        .ok_or("no list requests recorded")?;
    let after_lists = ready_at.saturating_duration_since(lists_done);
    table.add(
        "time to ready after the API lists complete",
        format!("{:.2} s", after_lists.as_secs_f64()),
        "< 10 s",
        Some(after_lists < Duration::from_secs(10)),
        format!(
            "process start to ready {:.2} s; ready = first 200 from /config",
            ready_at.duration_since(spawned).as_secs_f64()
        ),
    );

    // First request per pool (fresh TLS connection each), right after ready.
    let mut first = Vec::new();
    for pool in &cluster.pools {
        let at = Instant::now();
        let r = server
            .fetch(&format!("/config/{}", pool.name))
            .map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!("/config/{} answered {}", pool.name, r.status));
        }
        first.push(at.elapsed());
    }
    let (median, max) = median_max(&mut first);
    table.add(
        "first-request latency per pool",
        format!("median {} ms, max {} ms", ms(median), ms(max)),
        "info",
        None,
        format!("{} pools, fresh TLS connection each", first.len()),
    );

    // Start-up API requests by verb and resource: everything up to ready plus 2 s (the
    // publisher's lease and first writes come after ready and are reported below).
    std::thread::sleep(Duration::from_secs(2));
    let startup: Vec<RequestRecord> = log
        .snapshot()
        .into_iter()
        .filter(|(at, _)| *at <= ready_at + Duration::from_secs(2))
        .map(|(_, r)| r)
        .collect();
    let per_object_gets = startup
        .iter()
        .filter(|r| r.verb == "get" && !r.resource.is_empty() && r.resource != "leases")
        .count();
    table.add(
        "API requests at start-up",
        verbs_by_resource(&startup),
        "no per-object GETs",
        Some(per_object_gets == 0),
        format!("{per_object_gets} per-object GETs of watched kinds; until ready + 2 s"),
    );

    // MCN publisher: the backlog of Nodes without an MCN, and a Node joining meanwhile.
    let backlog = measure_backlog(backend, cluster, &log, &server, knobs)?;
    backlog.report(&mut table, knobs);

    let rss_rest_before_churn = server.rss_kb("VmRSS");
    // Node status churn: every Node's heartbeat once per heartbeat period, spread evenly.
    let churn = measure_churn(scope, backend, cluster, &server, knobs)?;
    table.add(
        "server CPU during Node status churn",
        format!("{:.1}% of one core", churn.cpu_percent),
        "< 5%",
        Some(churn.cpu_percent < 5.0),
        format!(
            "{} Nodes, status every {} s ({:.0} updates/s achieved), measured over the last {:.0} s",
            cluster.nodes.len(),
            knobs.heartbeat.as_secs(),
            churn.updates_per_second,
            churn.measured.as_secs_f64()
        ),
    );

    // A pool's updatedMachineCount going 0 -> 1: the served config switches from
    // status.configuration to spec.configuration.
    let mut switches = Vec::new();
    for pool in cluster
        .pools
        .iter()
        .filter(|p| !p.layered)
        .take(knobs.count_changes)
    {
        switches.push(measure_count_change(backend, &server, pool)?);
    }
    let (median, max) = median_max(&mut switches);
    table.add(
        "updatedMachineCount change to new config served",
        format!("median {} ms, max {} ms", ms(median), ms(max)),
        "info",
        None,
        format!(
            "{} pools; polled every 10 ms over fresh TLS connections",
            switches.len()
        ),
    );

    std::thread::sleep(Duration::from_secs(3));
    let rss_rest = server.rss_kb("VmRSS");
    let storm = measure_storm(&server, cluster, knobs.storm);
    table.add(
        "scale-up storm",
        format!(
            "{} of {} served, p99 {} ms, max {} ms, {} errors",
            storm.served,
            knobs.storm,
            ms(storm.p99),
            ms(storm.max),
            storm.errors
        ),
        "0 errors, p99 < 2 s",
        Some(storm.errors == 0 && storm.p99 < Duration::from_secs(2)),
        format!(
            "{} concurrent fetches of {} pools' realistic config (~{} KiB) on fresh TLS connections, in {:.2} s",
            knobs.storm,
            cluster.pools.len(),
            storm.body_bytes / 1024,
            storm.elapsed.as_secs_f64()
        ),
    );

    let peak = server.rss_kb("VmHWM");
    let rest = rss_rest_before_churn.max(rss_rest);
    table.add(
        "resting RSS",
        format!("{} MB", rest / 1024),
        "< 150 MB",
        Some(rest < 150 * 1024),
        format!(
            "VmRSS, the larger of: after the MCN backlog ({} MB), before the storm ({} MB)",
            rss_rest_before_churn / 1024,
            rss_rest / 1024
        ),
    );
    table.add(
        "peak RSS",
        format!("{} MB", peak / 1024),
        "< 200 MB",
        Some(peak < 200 * 1024),
        "VmHWM over the whole run, storm included".into(),
    );
    server.check_alive()?;
    drop(server);

    print_heading(backend, cluster, knobs, load_before, *load_time, *started);
    print!("{}", table.markdown());
    Ok(table.verdict())
}

/// The two lines above the table: what ran where, and the machine's load.
fn print_heading(
    backend: &Backend,
    cluster: &Cluster,
    knobs: &Knobs,
    load_before: &str,
    load_time: Duration,
    started: Instant,
) {
    println!(
        "machine-config-server at scale, {}, {} cores, {}; {} Nodes ({} without an MCN at start), {} pools x {} rendered MachineConfigs, {} layered pools",
        utc_now(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        backend.name(),
        cluster.nodes.len(),
        knobs.missing_mcns,
        cluster.pools.len(),
        RENDERED_PER_POOL,
        LAYERED_POOLS,
    );
    println!(
        "load average before: {load_before}, after: {} (other work on the machine skews every number); cluster load {:.1} s, whole run {:.0} s",
        loadavg(),
        load_time.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn median_max(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    match samples {
        [] => (Duration::ZERO, Duration::ZERO),
        _ => (samples[(samples.len() - 1) / 2], samples[samples.len() - 1]),
    }
}

fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// `verb resource: count, ...` in a stable order.
fn verbs_by_resource(requests: &[RequestRecord]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in requests {
        let resource = match (&r.resource[..], &r.subresource) {
            ("", _) => "discovery".to_string(),
            (res, Some(sub)) => format!("{res}/{sub}"),
            (res, None) => res.to_string(),
        };
        *counts.entry(format!("{} {resource}", r.verb)).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The backend's request log with the time each record was first seen (polled every 10 ms by
/// a scoped thread, so that it may borrow the backend).
struct RequestLog {
    seen: Arc<Mutex<Vec<(Instant, RequestRecord)>>>,
    stop: Arc<AtomicBool>,
}

impl RequestLog {
    fn start<'scope, 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        backend: &'env Backend,
    ) -> RequestLog {
        let seen: Arc<Mutex<Vec<(Instant, RequestRecord)>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        scope.spawn(move || {
            let mut known = 0;
            while !stop2.load(Ordering::Relaxed) {
                let all = backend.requests();
                let now = Instant::now();
                if all.len() < known {
                    known = 0;
                    seen2.lock().unwrap().clear();
                }
                seen2
                    .lock()
                    .unwrap()
                    .extend(all[known..].iter().cloned().map(|r| (now, r)));
                known = all.len();
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        RequestLog { seen, stop }
    }

    fn snapshot(&self) -> Vec<(Instant, RequestRecord)> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for RequestLog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One pool of the generated cluster.
struct Pool {
    name: String,
    /// `rendered-<pool>-<n>` for n in 0..RENDERED_PER_POOL.
    rendered: Vec<String>,
    /// Its nodes carry `node-role.kubernetes.io/worker` too (a custom pool).
    custom: bool,
    layered: bool,
}

impl Pool {
    fn role_label(&self) -> String {
        format!("node-role.kubernetes.io/{}", self.name)
    }

    fn image(&self) -> String {
        format!(
            "quay.example.com/layered/{}@sha256:{:064x}",
            self.name, 0xfeed_u64
        )
    }
}

struct NodeSpec {
    name: String,
    pool: usize,
    ip: String,
    has_mcn: bool,
}

/// The generated cluster: what to load and what to measure against.
struct Cluster {
    pools: Vec<Pool>,
    nodes: Vec<NodeSpec>,
    /// The realistic rendered worker config of the project's fixtures, as JSON.
    base_config: Value,
    controller_config: Value,
}

impl Cluster {
    fn new(knobs: &Knobs) -> Result<Cluster, String> {
        let fixtures = support::cluster::fixture_dir();
        let read = |path: PathBuf| -> Result<Value, String> {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
        };
        let worker = std::fs::read_dir(fixtures.join("machine-configs"))
            .map_err(|e| e.to_string())?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rendered-worker-"))
            })
            .ok_or("no rendered-worker fixture")?;
        let base_config = read(worker)?;
        let controller_config =
            read(fixtures.join("controller-config/machine-config-controller.yaml"))?;

        let pools: Vec<Pool> = (0..knobs.pools)
            .map(|i| {
                let name = match i {
                    0 => "master".to_string(),
                    1 => "worker".to_string(),
                    i => format!("infra-{:02}", i - 1),
                };
                Pool {
                    rendered: (0..RENDERED_PER_POOL)
                        .map(|n| {
                            format!(
                                "rendered-{name}-{:032x}",
                                (i * 16 + n) as u128 * 0x9e37_79b9
                            )
                        })
                        .collect(),
                    custom: i >= 2,
                    layered: i >= knobs.pools - LAYERED_POOLS,
                    name,
                }
            })
            .collect();
        // Three masters; the rest spread over the other pools.
        let nodes = (0..knobs.nodes)
            .map(|i| {
                let pool = if i < 3 {
                    0
                } else {
                    1 + (i - 3) % (pools.len() - 1)
                };
                NodeSpec {
                    name: format!("node-{i:05}"),
                    pool,
                    ip: format!("10.{}.{}.{}", 128 + i / 65_536, (i / 256) % 256, i % 256),
                    has_mcn: i < knobs.nodes.saturating_sub(knobs.missing_mcns),
                }
            })
            .collect();
        Ok(Cluster {
            pools,
            nodes,
            base_config,
            controller_config,
        })
    }

    fn load(&self, backend: &Backend) -> Result<(), String> {
        // The installer's bootstrap copy leaves fields the CRD requires null (as
        // support::cluster::load_realistic_cluster fills them).
        let mut cc = self.controller_config.clone();
        for (field, value) in [
            ("additionalTrustBundle", Value::Null),
            ("cloudProviderCAData", Value::Null),
            (
                "dns",
                json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS", "spec": {"baseDomain": "example.com"}}),
            ),
            ("network", json!({"mtuMigration": {}})),
            ("proxy", json!({})),
        ] {
            let slot = cc["spec"]
                .as_object_mut()
                .ok_or("ControllerConfig spec")?
                .entry(field)
                .or_insert(Value::Null);
            if slot.is_null() {
                *slot = value;
            }
        }
        backend.put(&cc)?;
        // The registry's namespace first: the in-test API server, as a real one with its
        // admission plugins, refuses an object in a namespace that does not exist.
        backend.put(&json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-image-registry"}
        }))?;
        backend.put(&json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "image-registry", "namespace": "openshift-image-registry"},
            "spec": {"ports": [{"name": "5000-tcp", "port": 5000, "protocol": "TCP"}]}
        }))?;
        backend.put(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kubeconfig-data", "namespace": support::cluster::MCO_NAMESPACE},
            "data": {"unrelated": "value"}
        }))?;
        for pool in &self.pools {
            for (n, rendered) in pool.rendered.iter().enumerate() {
                backend.put(&self.machine_config(pool, rendered, n))?;
            }
            backend.put(&pool_object(pool))?;
            if pool.layered {
                for object in layered_objects(pool) {
                    backend.put(&object)?;
                }
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let pool = &self.pools[node.pool];
            let stored = backend.put(&node_object(node, pool, i))?;
            if node.has_mcn {
                let uid = stored["metadata"]["uid"].as_str().unwrap_or_default();
                let (spec, status) = daemon_mcn(node, uid, pool);
                backend.apply_as("machine-config-daemon", &spec, false)?;
                backend.apply_as("machine-config-daemon", &status, true)?;
            }
            if i % 1000 == 999 {
                eprintln!("   {} Nodes", i + 1);
            }
        }
        Ok(())
    }

    /// The realistic rendered config renamed for `pool`, with one file that says which pool and
    /// version it is (so every pool and version serves different bytes).
    fn machine_config(&self, pool: &Pool, rendered: &str, version: usize) -> Value {
        let mut mc = self.base_config.clone();
        mc["metadata"] = json!({
            "name": rendered,
            "annotations": mc["metadata"]["annotations"].clone(),
            "labels": {"machineconfiguration.openshift.io/role": pool.name},
        });
        let marker = format!("data:,{}%20v{version}%0A", pool.name);
        if let Some(files) = mc["spec"]["config"]["storage"]["files"].as_array_mut() {
            files.push(json!({"path": "/etc/mcs-scale/pool", "mode": 420, "overwrite": true, "contents": {"source": marker}}));
        } else {
            mc["spec"]["config"]["storage"]["files"] = json!([{"path": "/etc/mcs-scale/pool", "mode": 420, "overwrite": true, "contents": {"source": marker}}]);
        }
        mc
    }
}

/// The marker file's contents in served config bytes: which version a pool serves.
fn served_version(body: &[u8], pool: &str) -> Option<usize> {
    let needle = format!("data:,{pool}%20v");
    let text = std::str::from_utf8(body).ok()?;
    let at = text.find(&needle)? + needle.len();
    text[at..].split('%').next()?.parse().ok()
}

/// Spec points at rendered[1], status at rendered[0] with `updatedMachineCount: 0`, so the
/// server serves rendered[0] until the count turns positive.
fn pool_object(pool: &Pool) -> Value {
    let source = json!([
        {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "name": format!("00-{}", pool.name)},
        {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "name": format!("01-{}-kubelet", pool.name)}
    ]);
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": pool.name, "labels": {format!("pools.operator.machineconfiguration.openshift.io/{}", pool.name): ""}},
        "spec": {
            "configuration": {"name": pool.rendered[1], "source": source},
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": pool.name}},
            "nodeSelector": {"matchLabels": {pool.role_label(): ""}},
            "paused": false
        },
        "status": {
            "configuration": {"name": pool.rendered[0], "source": source},
            "machineCount": 250, "updatedMachineCount": 0, "readyMachineCount": 250,
            "unavailableMachineCount": 0, "degradedMachineCount": 0
        }
    })
}

fn layered_objects(pool: &Pool) -> Vec<Value> {
    let name = &pool.name;
    let mosc = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
        "metadata": {"name": name},
        "spec": {
            "machineConfigPool": {"name": name},
            "imageBuilder": {"imageBuilderType": "Job"},
            "baseImagePullSecret": {"name": "pull-secret"},
            "renderedImagePushSecret": {"name": "push-secret"},
            "renderedImagePushSpec": format!("quay.example.com/layered/{name}:latest"),
            "containerFile": [{"containerfileArch": "NoArch", "content": "FROM configs AS final\nRUN rpm-ostree install httpd && ostree container commit\n"}]
        },
        "status": {
            "observedGeneration": 1,
            "currentImagePullSpec": pool.image(),
            "machineOSBuild": {"group": "machineconfiguration.openshift.io", "resource": "machineosbuilds", "name": format!("{name}-build-1")},
            "conditions": [{"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "", "lastTransitionTime": "2025-05-01T10:00:00Z"}]
        }
    });
    let condition = |t: &str, s: &str| json!({"type": t, "status": s, "reason": t, "message": "", "lastTransitionTime": "2025-05-01T10:20:00Z"});
    let mosb = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
        "metadata": {"name": format!("{name}-build-1")},
        "spec": {
            "machineConfig": {"name": pool.rendered[0]},
            "machineOSConfig": {"name": name},
            "renderedImagePushSpec": format!("quay.example.com/layered/{name}:latest")
        },
        "status": {
            "buildStart": "2025-05-01T10:01:00Z", "buildEnd": "2025-05-01T10:20:00Z",
            "builder": {"imageBuilderType": "Job", "job": {"group": "batch", "resource": "jobs", "namespace": support::cluster::MCO_NAMESPACE, "name": format!("build-{name}-build-1")}},
            "conditions": [condition("Prepared", "False"), condition("Building", "False"), condition("Succeeded", "True"), condition("Failed", "False"), condition("Interrupted", "False")],
            "digestedImagePushSpec": pool.image()
        }
    });
    vec![mosc, mosb]
}

/// A Node as a kubelet and the machine-config daemon leave it, about 15 KB of JSON.
fn node_object(node: &NodeSpec, pool: &Pool, index: usize) -> Value {
    let zone = ["a", "b", "c"][index % 3];
    let mut labels = json!({
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": "m6i.2xlarge",
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": "us-east-1",
        "failure-domain.beta.kubernetes.io/zone": format!("us-east-1{zone}"),
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "m6i.2xlarge",
        "node.openshift.io/os_id": "rhcos",
        "topology.ebs.csi.aws.com/zone": format!("us-east-1{zone}"),
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": format!("us-east-1{zone}"),
    });
    labels[pool.role_label()] = json!("");
    if pool.custom {
        labels["node-role.kubernetes.io/worker"] = json!("");
    }
    let rendered = &pool.rendered[0];
    let mut annotations = json!({
        "machineconfiguration.openshift.io/controlPlaneTopology": "HighlyAvailable",
        "machineconfiguration.openshift.io/currentConfig": rendered,
        "machineconfiguration.openshift.io/desiredConfig": rendered,
        "machineconfiguration.openshift.io/desiredDrain": format!("uncordon-{rendered}"),
        "machineconfiguration.openshift.io/lastAppliedDrain": format!("uncordon-{rendered}"),
        "machineconfiguration.openshift.io/lastObservedServerCAAnnotation": "false",
        "machineconfiguration.openshift.io/lastSyncedControllerConfigResourceVersion": "123456",
        "machineconfiguration.openshift.io/reason": "",
        "machineconfiguration.openshift.io/state": "Done",
        "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-0{index:016x}\"}}"),
        "k8s.ovn.org/host-cidrs": format!("[\"{}/19\"]", node.ip),
        "k8s.ovn.org/l3-gateway-config": format!("{{\"default\":{{\"mode\":\"shared\",\"bridge-id\":\"br-ex\",\"interface-id\":\"br-ex_{}\",\"mac-address\":\"02:4e:aa:bb:cc:dd\",\"ip-addresses\":[\"{}/19\"],\"ip-address\":\"{}/19\",\"next-hops\":[\"10.0.0.1\"],\"next-hop\":\"10.0.0.1\",\"node-port-enable\":\"true\",\"vlan-id\":\"0\"}}}}", node.name, node.ip, node.ip),
        "k8s.ovn.org/node-chassis-id": format!("{:08x}-0000-4000-8000-{:012x}", index, index),
        "k8s.ovn.org/node-primary-ifaddr": format!("{{\"ipv4\":\"{}/19\"}}", node.ip),
        "k8s.ovn.org/node-subnets": format!("{{\"default\":[\"10.{}.{}.0/23\"]}}", 128 + index / 128, (index % 128) * 2),
        "k8s.ovn.org/zone-name": node.name,
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    });
    if pool.layered {
        annotations["machineconfiguration.openshift.io/currentImage"] = json!(pool.image());
        annotations["machineconfiguration.openshift.io/desiredImage"] = json!(pool.image());
    }
    let images: Vec<Value> = (0..IMAGES_PER_NODE)
        .map(|k| {
            let digest = format!("{:064x}", (k as u128 + 1) * 0x1234_5678_9abc_def1);
            json!({
                "names": [
                    format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{digest}"),
                    format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev:4.19.0-component-{k:02}")
                ],
                "sizeBytes": 400_000_000 + k * 9_876_543
            })
        })
        .collect();
    let resources = json!({
        "cpu": "8", "ephemeral-storage": "125293548Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
        "memory": "32386520Ki", "pods": "250"
    });
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node.name, "labels": labels, "annotations": annotations},
        "spec": {"providerID": format!("aws:///us-east-1{zone}/i-0{index:016x}")},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": node.ip},
                {"type": "Hostname", "address": format!("ip-{}.ec2.internal", node.ip.replace('.', "-"))},
                {"type": "InternalDNS", "address": format!("ip-{}.ec2.internal", node.ip.replace('.', "-"))}
            ],
            "allocatable": resources,
            "capacity": resources,
            "conditions": heartbeat_conditions("2026-11-24T10:00:00Z"),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64", "bootID": format!("{:08x}-1111-4222-8333-{:012x}", index, index),
                "containerRuntimeVersion": "cri-o://1.32.3-3.rhaos4.19.git1234567.el9",
                "kernelVersion": "5.14.0-427.50.1.el9_4.x86_64", "kubeProxyVersion": "v1.32.3",
                "kubeletVersion": "v1.32.3", "machineID": format!("ec2{index:029x}"),
                "operatingSystem": "linux",
                "osImage": "Red Hat Enterprise Linux CoreOS 419.94.202505010000-0 (Plow)",
                "systemUUID": format!("ec2{index:05x}-aaaa-bbbb-cccc-dddddddddddd")
            }
        }
    })
}

fn heartbeat_conditions(time: &str) -> Value {
    let c = |t: &str, s: &str, reason: &str, message: &str| json!({"type": t, "status": s, "lastHeartbeatTime": time, "lastTransitionTime": "2026-11-01T00:00:00Z", "reason": reason, "message": message});
    json!([
        c(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        c(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure"
        ),
        c(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        c(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status"
        )
    ])
}

/// The MCN the daemon writes for a node (spec, then status), as another field manager: owned by
/// its Node, with the fourteen conditions the daemon reports after an update (as in the MCN
/// design's example), each with a reason, a message and a transition time.
fn daemon_mcn(node: &NodeSpec, node_uid: &str, pool: &Pool) -> (Value, Value) {
    let rendered = &pool.rendered[0];
    let spec = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "metadata": {
            "name": node.name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node_uid}]
        },
        "spec": {"node": {"name": node.name}, "pool": {"name": pool.name}, "configVersion": {"desired": rendered}}
    });
    let action = |what: &str| format!("Action during update to {rendered}: {what}");
    let not_yet = |phase: &str| {
        (
            phase.to_owned(),
            "False",
            "NotYetOccurred".to_owned(),
            format!("This node has not yet entered the {phase} phase"),
        )
    };
    let conditions = [
        (
            "PinnedImageSetsProgressing".to_owned(),
            "False",
            "AsExpected".to_owned(),
            "All pinned image sets complete".to_owned(),
        ),
        not_yet("UpdatePrepared"),
        not_yet("UpdateExecuted"),
        not_yet("UpdatePostActionComplete"),
        (
            "UpdateComplete".to_owned(),
            "False",
            "Uncordoned".to_owned(),
            action("Uncordoned Node as part of completing upgrade phase"),
        ),
        (
            "Resumed".to_owned(),
            "False",
            "Resumed".to_owned(),
            action("In desired config . Resumed normal operations."),
        ),
        not_yet("Drained"),
        not_yet("AppliedFilesAndOS"),
        not_yet("Cordoned"),
        not_yet("RebootedNode"),
        (
            "Updated".to_owned(),
            "True",
            "Updated".to_owned(),
            format!("Node {} Updated", node.name),
        ),
        (
            "Uncordoned".to_owned(),
            "False",
            "UpdateCompleteUncordoned".to_owned(),
            action("UnCordoned node. The node is reporting Unschedulable = false"),
        ),
        not_yet("NodeDegraded"),
        (
            "PinnedImageSetsDegraded".to_owned(),
            "False",
            "AsExpected".to_owned(),
            "All is good".to_owned(),
        ),
    ];
    let conditions: Vec<Value> = conditions
        .into_iter()
        .map(|(type_, status, reason, message)| {
            json!({"type": type_, "status": status, "reason": reason, "message": message,
                   "lastTransitionTime": "2026-11-01T00:00:00Z"})
        })
        .collect();
    let status = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "metadata": {"name": node.name},
        "status": {
            "conditions": conditions,
            "configVersion": {"desired": rendered, "current": rendered},
            "observedGeneration": 1
        }
    });
    (spec, status)
}

/// The server under test, a child process.
struct ServerProcess {
    child: Child,
    secure: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    log: Arc<Mutex<Vec<String>>>,
}

impl ServerProcess {
    fn spawn(backend: &Backend, token_dir: &Path, knobs: &Knobs) -> Result<ServerProcess, String> {
        let secure = mcs::free_port();
        let certs = mcs::repo().join("certs");
        // MCS_SCALE_SERVER_BIN runs another build (e.g. a "before" binary) under the same harness.
        let bin = std::env::var_os("MCS_SCALE_SERVER_BIN").map_or_else(mcs::bin, PathBuf::from);
        let mut command = Command::new(&bin);
        command
            .args(["start", "--kubeconfig"])
            .arg(backend.kubeconfig())
            .args(["--apiserver-url", APISERVER_URL, "--bootstrap-token-dir"])
            .arg(token_dir)
            .args([
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                &secure.to_string(),
            ])
            .args(["--insecure-port", "0", "--metrics-bind-address", ""])
            .arg("--cert")
            .arg(certs.join("tls.crt"))
            .arg("--key")
            .arg(certs.join("tls.key"));
        if let Some(rate) = &knobs.max_writes_per_second {
            command.args(["--mcn-max-writes-per-second", rate]);
        }
        let mut child = command
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        for stream in [
            Box::new(child.stdout.take().ok_or("stdout")?) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().ok_or("stderr")?) as Box<dyn std::io::Read + Send>,
        ] {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    log.lock().unwrap().push(line);
                }
            });
        }
        Ok(ServerProcess {
            child,
            secure: ([127, 0, 0, 1], secure).into(),
            tls: mcs::dev_ca_client(),
            log,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn check_alive(&self) -> Result<(), String> {
        let status = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .map_err(|e| format!("server process: {e}"))?;
        if status.contains(") Z ") {
            let tail: Vec<String> = self
                .log
                .lock()
                .unwrap()
                .iter()
                .rev()
                .take(20)
                .cloned()
                .collect();
            return Err(format!(
                "the server exited:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
        Ok(())
    }

    fn fetch(&self, path: &str) -> std::io::Result<mcs::Response> {
        mcs::try_request(
            self.secure,
            Some(self.tls.clone()),
            "GET",
            path,
            &[
                ("Accept", ACCEPT),
                ("Accept-Encoding", "identity"),
                ("User-Agent", "Ignition/2.20.0"),
            ],
        )
    }

    /// `VmHWM` or `VmRSS` in KiB.
    fn rss_kb(&self, field: &str) -> u64 {
        proc_status_kb(self.pid(), field)
    }

    /// utime + stime in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .ok()
            .and_then(|s| {
                let after = s.rsplit_once(") ")?.1.to_string();
                let fields: Vec<&str> = after.split_whitespace().collect();
                // Fields 14 and 15 of stat; `after` starts at field 3.
                Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
            })
            .unwrap_or(0)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Clock ticks per second (`getconf CLK_TCK`); 100 on Linux unless told otherwise.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

struct Backlog {
    missing: usize,
    drained: Option<Duration>,
    writes: usize,
    max_per_second: usize,
    joined: Option<Duration>,
    reads: PerObjectReads,
}

/// The server's per-object GETs of nodes and machineconfignodes (issue 34: the publisher plans
/// from its caches and lets the API refuse a stale write with a 409; only the guard before a
/// delete reads an object directly).
#[derive(Debug, Default, PartialEq)]
struct PerObjectReads {
    /// Every such GET.
    gets: usize,
    /// Those of an object whose MachineConfigNode the server then deleted: the delete guard.
    guard: usize,
    /// MachineConfigNode deletes.
    deletes: usize,
    /// MachineConfigNode writes the API refused with 409 (AlreadyExists or Conflict).
    conflicts: usize,
}

impl PerObjectReads {
    /// Counts them in `requests`, in the order they were made.
    fn count(requests: &[RequestRecord]) -> PerObjectReads {
        let mut reads = PerObjectReads::default();
        for (at, r) in requests.iter().enumerate() {
            let object_read = r.verb == "get"
                && r.subresource.is_none()
                && matches!(r.resource.as_str(), "nodes" | "machineconfignodes");
            if object_read {
                reads.gets += 1;
                let deleted_after = requests[at..].iter().any(|later| {
                    later.verb == "delete"
                        && later.resource == "machineconfignodes"
                        && later.name.is_some()
                        && later.name == r.name
                });
                reads.guard += usize::from(deleted_after);
            }
            if r.resource == "machineconfignodes" {
                reads.deletes += usize::from(r.verb == "delete");
                reads.conflicts += usize::from(
                    r.status == 409 && matches!(r.verb.as_str(), "create" | "update" | "patch"),
                );
            }
        }
        reads
    }
}

impl Backlog {
    fn report(&self, table: &mut Table, knobs: &Knobs) {
        let limit: usize = knobs
            .max_writes_per_second
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20);
        table.add(
            "MCN backlog: writes per second (worst 1 s window)",
            format!("{}", self.max_per_second),
            &format!("<= {limit}"),
            Some(self.max_per_second <= limit),
            format!(
                "{} writes for {} Nodes without an MCN",
                self.writes, self.missing
            ),
        );
        table.add(
            "MCN backlog drained",
            self.drained.map_or("not within the bound".into(), |d| {
                format!("{:.1} s", d.as_secs_f64())
            }),
            "finishes",
            Some(self.drained.is_some()),
            "from ready until every Node has an MCN with status".into(),
        );
        table.add(
            "Node joining during the backlog gets its MCN",
            self.joined.map_or("not within the bound".into(), |d| {
                format!("{:.2} s", d.as_secs_f64())
            }),
            "< 5 s",
            Some(self.joined.is_some_and(|d| d < Duration::from_secs(5))),
            "created 5 s into the backlog; time until its MCN exists".into(),
        );
        let reads = &self.reads;
        table.add(
            "MCN backlog: per-object GETs of nodes/machineconfignodes",
            format!("{}", reads.gets - reads.guard),
            "0 outside the delete guard",
            Some(reads.gets == reads.guard),
            format!(
                "from start until the backlog drained: {} GETs in all, {} of them of an object \
                 whose MCN was then deleted (the delete guard; {} MCN deletes); {} MCN writes \
                 answered 409",
                reads.gets, reads.guard, reads.deletes, reads.conflicts
            ),
        );
    }
}

fn measure_backlog(
    backend: &Backend,
    cluster: &Cluster,
    log: &RequestLog,
    server: &ServerProcess,
    knobs: &Knobs,
) -> Result<Backlog, String> {
    eprintln!(
        "== MCN backlog: {} Nodes without an MCN",
        knobs.missing_mcns
    );
    let began = Instant::now();
    let is_write = |r: &RequestRecord| {
        r.resource == "machineconfignodes"
            && matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete")
    };
    std::thread::sleep(Duration::from_secs(5));
    // A machine that joins now: a new Node of the worker pool.
    let index = cluster.nodes.len();
    let joined = NodeSpec {
        name: "node-joined".into(),
        pool: 1,
        ip: "10.250.0.1".into(),
        has_mcn: false,
    };
    backend.put(&node_object(&joined, &cluster.pools[1], index))?;
    let join_at = Instant::now();
    let joined_after = mcs::poll_every(Duration::from_millis(10), Duration::from_secs(60), || {
        backend
            .get("MachineConfigNode", "node-joined")
            .map(|_| join_at.elapsed())
    });
    let expected = cluster.nodes.len() + 1;
    let bound = Duration::from_secs(30 + 3 * knobs.missing_mcns as u64);
    let drained = mcs::poll_every(Duration::from_millis(10), bound, || {
        server.check_alive().ok()?;
        std::thread::sleep(Duration::from_millis(490));
        let with_status = backend
            .list("MachineConfigNode")
            .iter()
            .filter(|m| m.get("status").is_some_and(|s| !s.is_null()))
            .count();
        (with_status >= expected).then(|| began.elapsed())
    });
    let seen = log.snapshot();
    let reads = PerObjectReads::count(&seen.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>());
    let writes: Vec<Instant> = seen
        .into_iter()
        .filter(|(_, r)| is_write(r))
        .map(|(at, _)| at)
        .collect();
    // Worst 1-second window (records are stamped when the 10 ms poller first saw them).
    let mut max_per_second = 0;
    let mut start = 0;
    for end in 0..writes.len() {
        while writes[end].duration_since(writes[start]) >= Duration::from_secs(1) {
            start += 1;
        }
        max_per_second = max_per_second.max(end - start + 1);
    }
    Ok(Backlog {
        missing: knobs.missing_mcns + 1,
        drained,
        writes: writes.len(),
        max_per_second,
        joined: joined_after,
        reads,
    })
}

struct Churn {
    cpu_percent: f64,
    updates_per_second: f64,
    measured: Duration,
}

fn measure_churn<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    backend: &'env Backend,
    cluster: &Cluster,
    server: &ServerProcess,
    knobs: &Knobs,
) -> Result<Churn, String> {
    eprintln!("== Node status churn for {} s", knobs.churn.as_secs());
    let names: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    let stop = StopFlag::new();
    // Set on every way out of this function, a panic included: the scope joins the writer.
    let _stop_writer = stop.set_on_drop();
    let updates = Arc::new(AtomicU64::new(0));
    let heartbeat = knobs.heartbeat;
    let (stop2, updates2) = (stop.clone(), updates.clone());
    let writer = scope.spawn(move || -> Result<(), String> {
        let started = Instant::now();
        let interval = heartbeat.as_secs_f64() / names.len() as f64;
        let mut n: u64 = 0;
        while !stop2.is_set() {
            let name = &names[(n as usize) % names.len()];
            let due = started + Duration::from_secs_f64(n as f64 * interval);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let time = format!("2026-11-24T11:{:02}:{:02}Z", (n / 60) % 60, n % 60);
            backend.merge_patch(
                "Node",
                name,
                &json!({"status": {"conditions": heartbeat_conditions(&time)}}),
            )?;
            updates2.fetch_add(1, Ordering::Relaxed);
            n += 1;
        }
        Ok(())
    });
    // The first heartbeat period warms up; measure over the rest.
    let warmup = heartbeat.min(knobs.churn / 3);
    std::thread::sleep(warmup);
    let (ticks0, updates0, at0) = (
        server.cpu_ticks(),
        updates.load(Ordering::Relaxed),
        Instant::now(),
    );
    std::thread::sleep(knobs.churn.saturating_sub(warmup));
    let (ticks1, updates1, measured) = (
        server.cpu_ticks(),
        updates.load(Ordering::Relaxed),
        at0.elapsed(),
    );
    stop.set();
    writer.join().map_err(|_| "churn writer panicked")??;
    server.check_alive()?;
    let cpu_seconds = (ticks1 - ticks0) as f64 / clock_ticks();
    Ok(Churn {
        cpu_percent: 100.0 * cpu_seconds / measured.as_secs_f64(),
        updates_per_second: (updates1 - updates0) as f64 / measured.as_secs_f64(),
        measured,
    })
}

/// Time from the pool's `updatedMachineCount` turning 1 to the first 200 carrying rendered[1].
fn measure_count_change(
    backend: &Backend,
    server: &ServerProcess,
    pool: &Pool,
) -> Result<Duration, String> {
    let path = format!("/config/{}", pool.name);
    let before = server.fetch(&path).map_err(|e| e.to_string())?;
    if served_version(&before.body, &pool.name) != Some(0) {
        return Err(format!("{path} does not serve version 0 before the change"));
    }
    backend.merge_patch(
        "MachineConfigPool",
        &pool.name,
        &json!({"status": {"updatedMachineCount": 1}}),
    )?;
    let at = Instant::now();
    mcs::poll_every(Duration::from_millis(10), Duration::from_secs(60), || {
        let r = server.fetch(&path).ok()?;
        (r.status == 200 && served_version(&r.body, &pool.name) == Some(1)).then(|| at.elapsed())
    })
    .ok_or_else(|| format!("{path} did not switch to version 1 within 60 s"))
}

/// One storm fetch: its latency and body size, or what went wrong.
type FetchOutcome = Result<(Duration, usize), String>;

struct Storm {
    served: usize,
    errors: usize,
    p99: Duration,
    max: Duration,
    elapsed: Duration,
    body_bytes: usize,
}

fn measure_storm(server: &ServerProcess, cluster: &Cluster, machines: usize) -> Storm {
    eprintln!("== storm: {machines} concurrent fetches");
    let barrier = Arc::new(std::sync::Barrier::new(machines + 1));
    let results: Arc<Mutex<Vec<FetchOutcome>>> = Arc::default();
    let began = std::thread::scope(|scope| {
        for i in 0..machines {
            let (barrier, results) = (barrier.clone(), results.clone());
            let path = format!("/config/{}", cluster.pools[i % cluster.pools.len()].name);
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn_scoped(scope, move || {
                    barrier.wait();
                    let at = Instant::now();
                    let outcome = match server.fetch(&path) {
                        Ok(r) if r.status == 200 => Ok((at.elapsed(), r.body.len())),
                        Ok(r) => Err(format!("status {}", r.status)),
                        Err(e) => Err(e.to_string()),
                    };
                    results.lock().unwrap().push(outcome);
                })
                .expect("spawning a storm thread");
        }
        barrier.wait();
        Instant::now()
    });
    let elapsed = began.elapsed();
    let results = std::mem::take(&mut *results.lock().unwrap());
    let mut latencies: Vec<Duration> = results
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|(d, _)| *d))
        .collect();
    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    if let Some(first) = errors.first() {
        eprintln!("   {} errors, e.g. {first}", errors.len());
    }
    latencies.sort();
    let p99 = latencies
        .get(((latencies.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or_default();
    Storm {
        served: latencies.len(),
        errors: errors.len(),
        p99,
        max: latencies.last().copied().unwrap_or_default(),
        elapsed,
        body_bytes: results
            .iter()
            .find_map(|r| r.as_ref().ok().map(|(_, b)| *b))
            .unwrap_or(0),
    }
}
