//! Soak (`benches/soak.sh`, issue 27): the real `machine-config-server start` against an API
//! server for a long time (default 30 minutes) under steady work, and whether it stays flat:
//!
//! - steady fetches: `MCS_SOAK_CLIENTS` clients fetching `/config/<pool>` at `MCS_SOAK_RATE`
//!   requests a second in all, each on a fresh TLS connection with Ignition's headers, rotating
//!   over the pools and the spec versions 3.5.0, 3.4.0, 3.2.0 and 2.2.0. Every answer must be a
//!   200 carrying a JSON config of the requested spec; anything else is a failed request;
//! - a rendered-config change every `MCS_SOAK_CHANGE_SECONDS`: a new rendered MachineConfig (a
//!   copy of the fixture's with a marker file) for the next pool, the pool's spec and status
//!   moved to it, the rendered config two changes back deleted (so the cluster's size stays
//!   constant); the time until the pool serves the new config is measured;
//! - Node churn: `MCS_SOAK_NODES` worker Nodes, one leaving and one joining every
//!   `MCS_SOAK_CHURN_SECONDS`, and every Node's status heartbeat every
//!   `MCS_SOAK_HEARTBEAT_SECONDS` (the MachineConfigNode publisher creates and removes their MCNs).
//!
//! Every minute it samples the server process: resident memory (`VmRSS`, and `VmHWM`), open file
//! descriptors (`/proc/PID/fd`), threads (`/proc/PID/status`). The server exports no tokio task
//! count, so tasks are not measured; a leaked task that holds a connection or memory shows in
//! the fds or RSS. The start figures are taken after `MCS_SOAK_WARMUP_SECONDS` (one change and
//! one churn round have happened), the end figures at the end, both under the same load.
//!
//! Backend: `tests/support/api_server.rs` (a real kube-apiserver when `KUBEBUILDER_ASSETS`
//! names one, else the tests' in-test API server). Usage: `soak [--quick]` (`--quick`: 3
//! minutes, a change every 30 s). Prints the figures table on stdout; exits 1 when a request
//! failed or a figure is not flat.

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::api_server::{ApiServer, Options, Scope};
use support::cluster as cluster_support;
use support::mcs;
use support::mcs::StopFlag;

const SPECS: [&str; 4] = ["3.5.0", "3.4.0", "3.2.0", "2.2.0"];
/// Pools served: the fixture's two and a custom one.
const POOLS: [&str; 3] = ["master", "worker", "infra"];
/// Where the marker file of each rendered config says which change it is.
const MARKER_PATH: &str = "/etc/mcs-soak/generation";

struct Knobs {
    duration: Duration,
    warmup: Duration,
    clients: usize,
    rate: f64,
    change_every: Duration,
    nodes: usize,
    churn_every: Duration,
    heartbeat_every: Duration,
}

impl Knobs {
    fn from_env(quick: bool) -> Knobs {
        let num = |key: &str, default: f64| {
            std::env::var(key)
                .ok()
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(default)
        };
        let secs = |key: &str, default: f64| Duration::from_secs_f64(num(key, default));
        let (minutes, change, warmup) = if quick {
            (3.0, 30.0, 40.0)
        } else {
            (30.0, 60.0, 70.0)
        };
        Knobs {
            duration: Duration::from_secs_f64(num("MCS_SOAK_MINUTES", minutes) * 60.0),
            warmup: secs("MCS_SOAK_WARMUP_SECONDS", warmup),
            clients: num("MCS_SOAK_CLIENTS", 4.0).max(1.0) as usize,
            rate: num("MCS_SOAK_RATE", 8.0).max(0.1),
            change_every: secs("MCS_SOAK_CHANGE_SECONDS", change),
            nodes: num("MCS_SOAK_NODES", 40.0) as usize,
            churn_every: secs("MCS_SOAK_CHURN_SECONDS", 5.0),
            heartbeat_every: secs("MCS_SOAK_HEARTBEAT_SECONDS", 10.0),
        }
    }
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    match run(&Knobs::from_env(quick)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("soak: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One sample of the server process.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    at: Duration,
    rss_kb: u64,
    hwm_kb: u64,
    fds: usize,
    sockets: usize,
    threads: u64,
    requests: u64,
    failed: u64,
}

/// What the load threads count.
#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    failed: AtomicU64,
    bytes: AtomicU64,
    heartbeats: AtomicU64,
    joins: AtomicU64,
    leaves: AtomicU64,
    api_errors: AtomicU64,
    /// The first failures, for the report.
    failures: Mutex<Vec<String>>,
}

impl Counters {
    fn fail(&self, what: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut failures = self.failures.lock().unwrap();
        if failures.len() < 10 {
            eprintln!("   FAILED: {what}");
            failures.push(what);
        }
    }
}

fn run(knobs: &Knobs) -> Result<bool, String> {
    let started = Instant::now();
    let load_before = loadavg();
    let api = ApiServer::start(Options::default());
    let backend = if api.is_real() {
        "real kube-apiserver (KUBEBUILDER_ASSETS)"
    } else {
        "in-test API server (tests/support/fake_apiserver)"
    };
    eprintln!("== loading the cluster into the {backend}");
    cluster_support::load_realistic_cluster(&api);
    cluster_support::pool_at(&api, "infra", cluster_support::WORKER_RENDERED);
    let mut cluster = Cluster::new(&api);
    for pool in POOLS {
        cluster.change(&api, pool)?;
    }
    for _ in 0..knobs.nodes {
        cluster.join(&api)?;
    }
    let tokens = cluster_support::token_dir();
    let server = ServerProcess::spawn(&api, tokens.path())?;
    eprintln!(
        "== started machine-config-server start (pid {})",
        server.pid()
    );
    mcs::poll_every(Duration::from_millis(20), Duration::from_secs(120), || {
        server.check_alive().ok()?;
        let r = server.fetch("/config/worker", SPECS[0]).ok()?;
        (r.status == 200).then_some(())
    })
    .ok_or("the server did not become ready within 120 s")?;
    eprintln!("   ready after {:.1} s", started.elapsed().as_secs_f64());

    let counters = Counters::default();
    let stop = StopFlag::new();
    let cluster = Mutex::new(cluster);
    let report = std::thread::scope(|scope| {
        // Set on every way out of the scope, a panic included: the scope joins the loops.
        let _stop_loops = stop.set_on_drop();
        for client in 0..knobs.clients {
            let (server, counters, stop) = (&server, &counters, &stop);
            scope.spawn(move || fetch_loop(client, knobs, server, counters, stop));
        }
        {
            let (api, cluster, counters, stop) = (&api, &cluster, &counters, &stop);
            scope.spawn(move || heartbeat_loop(knobs, api, cluster, counters, stop));
        }
        let result = drive(knobs, &api, &cluster, &server, &counters, started);
        stop.set();
        result
    })?;
    server.check_alive()?;
    let metrics = server.metrics_summary();
    let verdict = report.print(knobs, backend, &load_before, &counters, &metrics, &server);
    drop(server);
    Ok(verdict)
}

/// The main loop: config changes, Node churn, samples; returns the samples.
fn drive(
    knobs: &Knobs,
    api: &ApiServer,
    cluster: &Mutex<Cluster>,
    server: &ServerProcess,
    counters: &Counters,
    started: Instant,
) -> Result<Report, String> {
    let begin = Instant::now();
    let mut report = Report::default();
    let mut next_change = begin + knobs.change_every;
    let mut next_churn = begin + knobs.churn_every;
    let mut next_sample = begin;
    let mut pool_index = 0;
    let sample = |at: Duration| Sample {
        requests: counters.requests.load(Ordering::Relaxed),
        failed: counters.failed.load(Ordering::Relaxed),
        ..server.sample(at)
    };
    while begin.elapsed() < knobs.duration {
        server.check_alive()?;
        let now = Instant::now();
        if now >= next_change {
            next_change += knobs.change_every;
            let pool = POOLS[pool_index % POOLS.len()];
            pool_index += 1;
            let generation = cluster.lock().unwrap().change(api, pool)?;
            report.changes += 1;
            let switched = Instant::now();
            let seen = mcs::poll_every(Duration::from_millis(20), Duration::from_secs(30), || {
                let r = server.fetch(&format!("/config/{pool}"), SPECS[0]).ok()?;
                (r.status == 200 && served_generation(&r.body) == Some(generation)).then_some(())
            });
            match seen {
                Some(()) => report.switches.push(switched.elapsed()),
                None => counters.fail(format!(
                    "pool {pool} did not serve change {generation} within 30 s"
                )),
            }
        }
        if now >= next_churn {
            next_churn += knobs.churn_every;
            let mut cluster = cluster.lock().unwrap();
            match cluster.leave(api).and_then(|()| cluster.join(api)) {
                Ok(()) => {
                    counters.leaves.fetch_add(1, Ordering::Relaxed);
                    counters.joins.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    counters.api_errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("   churn: {e}");
                }
            }
        }
        if now >= next_sample {
            next_sample += Duration::from_secs(60);
            let s = sample(begin.elapsed());
            eprintln!(
                "   {:>5.0} s: RSS {} MB (peak {} MB), {} fds ({} sockets), {} threads, {} requests, {} failed; load {}",
                s.at.as_secs_f64(),
                s.rss_kb / 1024,
                s.hwm_kb / 1024,
                s.fds,
                s.sockets,
                s.threads,
                s.requests,
                s.failed,
                loadavg()
            );
            report.samples.push(s);
            if report.start.is_none() && begin.elapsed() >= knobs.warmup {
                report.start = Some(s);
            }
        }
        if report.start.is_none() && begin.elapsed() >= knobs.warmup {
            report.start = Some(sample(begin.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let end = sample(begin.elapsed());
    report.samples.push(end);
    report.end = Some(end);
    report.whole_run = started.elapsed();
    report.mcns = api.list("MachineConfigNode").len();
    report.nodes = api.list("Node").len();
    Ok(report)
}

/// One client: a fetch every `clients / rate` seconds, rotating pools and spec versions.
fn fetch_loop(
    client: usize,
    knobs: &Knobs,
    server: &ServerProcess,
    counters: &Counters,
    stop: &StopFlag,
) {
    let interval = Duration::from_secs_f64(knobs.clients as f64 / knobs.rate);
    let start = Instant::now() + interval.mul_f64(client as f64 / knobs.clients as f64);
    let mut n: u32 = 0;
    while !stop.is_set() {
        let due = start + interval * n;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let k = client + n as usize;
        let pool = POOLS[k % POOLS.len()];
        let spec = SPECS[(k / POOLS.len()) % SPECS.len()];
        n += 1;
        counters.requests.fetch_add(1, Ordering::Relaxed);
        match server.fetch(&format!("/config/{pool}"), spec) {
            Ok(r) if r.status == 200 => {
                let version = serde_json::from_slice::<Value>(&r.body)
                    .ok()
                    .and_then(|v| v.pointer("/ignition/version")?.as_str().map(str::to_string));
                if version.as_deref() == Some(spec) {
                    counters
                        .bytes
                        .fetch_add(r.body.len() as u64, Ordering::Relaxed);
                } else {
                    counters.fail(format!("{pool} at {spec}: body of spec {version:?}"));
                }
            }
            Ok(r) => counters.fail(format!("{pool} at {spec}: status {}", r.status)),
            Err(e) => counters.fail(format!("{pool} at {spec}: {e}")),
        }
    }
}

/// Every Node's status heartbeat once per heartbeat period, spread evenly.
fn heartbeat_loop(
    knobs: &Knobs,
    api: &ApiServer,
    cluster: &Mutex<Cluster>,
    counters: &Counters,
    stop: &StopFlag,
) {
    let mut beat: u64 = 0;
    while !stop.is_set() {
        let names = cluster.lock().unwrap().node_names();
        let pause = knobs.heartbeat_every.div_f64(names.len().max(1) as f64);
        for name in names {
            if stop.is_set() {
                return;
            }
            std::thread::sleep(pause);
            beat += 1;
            let time = format!(
                "2026-11-24T{:02}:{:02}:{:02}Z",
                (beat / 3600) % 24,
                (beat / 60) % 60,
                beat % 60
            );
            let status = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status", "lastHeartbeatTime": time,
                 "lastTransitionTime": "2026-11-01T00:00:00Z"}
            ]}});
            // The kubelet writes its Node's status through `/status`. A Node that left
            // meanwhile fails the write: not an error of the server under test.
            if api
                .apply_as("kubelet", &status, Scope::Status, true)
                .is_ok()
            {
                counters.heartbeats.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The cluster the soak changes: rendered configs per pool and the churned Nodes.
struct Cluster {
    /// The fixture's worker config, the template of every new rendered config.
    template: Value,
    generation: u64,
    /// Rendered configs created per pool, oldest first.
    rendered: Vec<(String, VecDeque<String>)>,
    nodes: VecDeque<String>,
    next_node: u64,
}

impl Cluster {
    fn new(api: &ApiServer) -> Cluster {
        let template = api
            .get("MachineConfig", None, cluster_support::WORKER_RENDERED)
            .expect("the fixture's worker config");
        Cluster {
            template,
            generation: 0,
            rendered: POOLS
                .iter()
                .map(|p| (p.to_string(), VecDeque::new()))
                .collect(),
            nodes: VecDeque::new(),
            next_node: 0,
        }
    }

    /// A new rendered config for `pool`, the pool moved to it, the one two changes back
    /// deleted. Returns the generation written into its marker file.
    fn change(&mut self, api: &ApiServer, pool: &str) -> Result<u64, String> {
        self.generation += 1;
        let generation = self.generation;
        let name = format!("rendered-{pool}-soak-{generation:06}");
        let mut mc = self.template.clone();
        mc["metadata"] = json!({
            "name": name,
            "annotations": mc["metadata"]["annotations"].clone(),
            "labels": {"machineconfiguration.openshift.io/role": pool},
        });
        let marker = json!({"path": MARKER_PATH, "mode": 420, "overwrite": true,
                            "contents": {"source": format!("data:,{generation}")}});
        match mc["spec"]["config"]["storage"]["files"].as_array_mut() {
            Some(files) => files.push(marker),
            None => mc["spec"]["config"]["storage"]["files"] = json!([marker]),
        }
        api.apply_object(&mc)
            .map_err(|e| format!("creating {name}: {e}"))?;
        let patch = json!({"spec": {"configuration": {"name": name}}});
        api.merge_patch("MachineConfigPool", None, pool, &patch)
            .map_err(|e| format!("pool {pool} spec: {e}"))?;
        let mut status = api
            .get("MachineConfigPool", None, pool)
            .ok_or_else(|| format!("pool {pool}"))?;
        status["status"]["configuration"]["name"] = json!(name);
        status["status"]["updatedMachineCount"] = json!(0);
        api.update_status(&status)
            .map_err(|e| format!("pool {pool} status: {e}"))?;
        let history = &mut self
            .rendered
            .iter_mut()
            .find(|(p, _)| p == pool)
            .ok_or_else(|| format!("unknown pool {pool}"))?
            .1;
        history.push_back(name);
        while history.len() > 2 {
            if let Some(old) = history.pop_front() {
                api.delete("MachineConfig", None, &old)
                    .map_err(|e| format!("deleting {old}: {e}"))?;
            }
        }
        Ok(generation)
    }

    fn join(&mut self, api: &ApiServer) -> Result<(), String> {
        let n = self.next_node;
        self.next_node += 1;
        let name = format!("soak-node-{n:06}");
        let ip = format!(
            "10.{}.{}.{}",
            100 + (n / 65_536) % 100,
            (n / 256) % 256,
            n % 256
        );
        api.apply_object(&cluster_support::worker_node(&name, ip))
            .map_err(|e| format!("node {name} joining: {e}"))?;
        self.nodes.push_back(name);
        Ok(())
    }

    fn leave(&mut self, api: &ApiServer) -> Result<(), String> {
        let Some(name) = self.nodes.pop_front() else {
            return Ok(());
        };
        api.delete("Node", None, &name)
            .map(drop)
            .map_err(|e| format!("node {name} leaving: {e}"))
    }

    fn node_names(&self) -> Vec<String> {
        self.nodes.iter().cloned().collect()
    }
}

/// The generation in a served config's marker file.
fn served_generation(body: &[u8]) -> Option<u64> {
    let config: Value = serde_json::from_slice(body).ok()?;
    mcs::served_files(&config)
        .into_iter()
        .find(|(path, _)| path == MARKER_PATH)
        .and_then(|(_, data)| String::from_utf8(data).ok()?.trim().parse().ok())
}

#[derive(Default)]
struct Report {
    samples: Vec<Sample>,
    start: Option<Sample>,
    end: Option<Sample>,
    switches: Vec<Duration>,
    /// Rendered-config changes made during the load.
    changes: usize,
    whole_run: Duration,
    mcns: usize,
    nodes: usize,
}

/// Flat: the end figure at most this much above the start figure.
const RSS_TOLERANCE_KB: u64 = 8 * 1024;
const FD_TOLERANCE: usize = 4;
const THREAD_TOLERANCE: u64 = 2;

impl Report {
    fn print(
        &self,
        knobs: &Knobs,
        backend: &str,
        load_before: &str,
        counters: &Counters,
        metrics: &str,
        server: &ServerProcess,
    ) -> bool {
        let start = self.start.unwrap_or_default();
        let end = self.end.unwrap_or_default();
        let requests = end.requests;
        let failed = counters.failed.load(Ordering::Relaxed);
        let mut switches = self.switches.clone();
        switches.sort();
        let median = switches
            .get(switches.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or_default();
        let max = switches.last().copied().unwrap_or_default();
        let rss_flat = end.rss_kb <= start.rss_kb + RSS_TOLERANCE_KB;
        let fds_flat = end.fds <= start.fds + FD_TOLERANCE;
        let threads_flat = end.threads <= start.threads + THREAD_TOLERANCE;
        let verdict = |ok: bool| if ok { "pass" } else { "MISS" };
        println!(
            "machine-config-server soak, {} cores, {backend}; {:.0} min of {} clients at {} req/s in all (fresh TLS connection each, specs {}), a rendered-config change every {:.0} s, {} Nodes with one leaving and one joining every {:.0} s and a status heartbeat each every {:.0} s",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            knobs.duration.as_secs_f64() / 60.0,
            knobs.clients,
            knobs.rate,
            SPECS.join(", "),
            knobs.change_every.as_secs_f64(),
            knobs.nodes,
            knobs.churn_every.as_secs_f64(),
            knobs.heartbeat_every.as_secs_f64(),
        );
        println!(
            "load average before: {load_before}, after: {}; whole run {:.0} s; start figures at {:.0} s (after warm-up), end figures at {:.0} s",
            loadavg(),
            self.whole_run.as_secs_f64(),
            start.at.as_secs_f64(),
            end.at.as_secs_f64()
        );
        println!("| figure | start | end | target | pass/miss |\n|---|---|---|---|---|");
        println!(
            "| resident memory (VmRSS) | {:.1} MB | {:.1} MB | end <= start + {} MB | {} |",
            start.rss_kb as f64 / 1024.0,
            end.rss_kb as f64 / 1024.0,
            RSS_TOLERANCE_KB / 1024,
            verdict(rss_flat)
        );
        println!(
            "| peak memory (VmHWM) | {:.1} MB | {:.1} MB | info | - |",
            start.hwm_kb as f64 / 1024.0,
            end.hwm_kb as f64 / 1024.0
        );
        println!(
            "| open file descriptors | {} ({} sockets) | {} ({} sockets) | end <= start + {FD_TOLERANCE} | {} |",
            start.fds,
            start.sockets,
            end.fds,
            end.sockets,
            verdict(fds_flat)
        );
        println!(
            "| threads | {} | {} | end <= start + {THREAD_TOLERANCE} | {} |",
            start.threads,
            end.threads,
            verdict(threads_flat)
        );
        println!("| tokio tasks | not exported | not exported | - | - |");
        println!(
            "| requests (failed) | {} ({}) | {} ({}) | 0 failed | {} |",
            start.requests,
            start.failed,
            requests,
            failed,
            verdict(failed == 0)
        );
        println!(
            "| config changes served | - | {} of {}, median {:.0} ms, max {:.0} ms | every change served | {} |",
            switches.len(),
            self.changes,
            median.as_secs_f64() * 1000.0,
            max.as_secs_f64() * 1000.0,
            verdict(switches.len() == self.changes)
        );
        println!(
            "| Node churn | - | {} joined, {} left, {} heartbeats, {} API errors; {} Nodes and {} MachineConfigNodes at the end | info | - |",
            counters.joins.load(Ordering::Relaxed),
            counters.leaves.load(Ordering::Relaxed),
            counters.heartbeats.load(Ordering::Relaxed),
            counters.api_errors.load(Ordering::Relaxed),
            self.nodes,
            self.mcns
        );
        println!(
            "| served bytes | - | {:.0} MiB | info | - |",
            counters.bytes.load(Ordering::Relaxed) as f64 / 1048576.0
        );
        println!(
            "| server log lines at ERROR / WARN | - | {} / {} | info | - |",
            server.count("ERROR"),
            server.count("WARN")
        );
        println!("| server metrics at the end | - | {metrics} | info | - |");
        println!();
        println!("samples (seconds since the load began: RSS MB, fds, threads, requests):");
        for s in &self.samples {
            println!(
                "  {:>5.0}: {:>6.1} MB, {:>3} fds, {:>3} threads, {:>6} requests",
                s.at.as_secs_f64(),
                s.rss_kb as f64 / 1024.0,
                s.fds,
                s.threads,
                s.requests
            );
        }
        for failure in counters.failures.lock().unwrap().iter() {
            println!("failure: {failure}");
        }
        failed == 0 && switches.len() == self.changes && rss_flat && fds_flat && threads_flat
    }
}

/// The server under test, a child process; its log is counted and its tail kept.
struct ServerProcess {
    child: Child,
    secure: SocketAddr,
    metrics: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    log: Arc<Mutex<ServerLog>>,
}

#[derive(Default)]
struct ServerLog {
    tail: VecDeque<String>,
    errors: u64,
    warnings: u64,
}

impl ServerProcess {
    fn spawn(api: &ApiServer, token_dir: &Path) -> Result<ServerProcess, String> {
        let (secure, metrics) = (mcs::free_port(), mcs::free_port());
        let certs = mcs::repo().join("certs");
        let bin = std::env::var_os("MCS_SOAK_SERVER_BIN").map_or_else(mcs::bin, PathBuf::from);
        let mut child = Command::new(&bin)
            .args(["start", "--kubeconfig"])
            .arg(api.kubeconfig_file())
            .args(["--apiserver-url", cluster_support::APISERVER_URL])
            .arg("--bootstrap-token-dir")
            .arg(token_dir)
            .args(["--bind-address", "127.0.0.1"])
            .args(["--secure-port", &secure.to_string(), "--insecure-port", "0"])
            .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}")])
            .arg("--cert")
            .arg(certs.join("tls.crt"))
            .arg("--key")
            .arg(certs.join("tls.key"))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let log: Arc<Mutex<ServerLog>> = Arc::default();
        for stream in [
            Box::new(child.stdout.take().ok_or("stdout")?) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().ok_or("stderr")?) as Box<dyn std::io::Read + Send>,
        ] {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut log = log.lock().unwrap();
                    if line.contains("ERROR") {
                        log.errors += 1;
                    } else if line.contains("WARN") {
                        log.warnings += 1;
                    }
                    log.tail.push_back(line);
                    if log.tail.len() > 50 {
                        log.tail.pop_front();
                    }
                }
            });
        }
        Ok(ServerProcess {
            child,
            secure: ([127, 0, 0, 1], secure).into(),
            metrics: ([127, 0, 0, 1], metrics).into(),
            tls: mcs::dev_ca_client(),
            log,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn count(&self, level: &str) -> u64 {
        let log = self.log.lock().unwrap();
        if level == "ERROR" {
            log.errors
        } else {
            log.warnings
        }
    }

    fn check_alive(&self) -> Result<(), String> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .map_err(|e| format!("server process: {e}"))?;
        if stat.contains(") Z ") {
            let tail: Vec<String> = self.log.lock().unwrap().tail.iter().cloned().collect();
            return Err(format!("the server exited:\n{}", tail.join("\n")));
        }
        Ok(())
    }

    fn fetch(&self, path: &str, spec: &str) -> std::io::Result<mcs::Response> {
        let accept = format!("application/vnd.coreos.ignition+json;version={spec}, */*;q=0.1");
        mcs::try_request(
            self.secure,
            Some(self.tls.clone()),
            "GET",
            path,
            &[
                ("Accept", &accept),
                ("Accept-Encoding", "identity"),
                ("User-Agent", "Ignition/2.20.0"),
            ],
        )
    }

    fn sample(&self, at: Duration) -> Sample {
        let pid = self.pid();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let fds: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        let sockets = fds
            .iter()
            .filter(|fd| {
                std::fs::read_link(fd).is_ok_and(|t| t.to_string_lossy().starts_with("socket:"))
            })
            .count();
        Sample {
            at,
            rss_kb: field("VmRSS:"),
            hwm_kb: field("VmHWM:"),
            fds: fds.len(),
            sockets,
            threads: field("Threads:"),
            ..Sample::default()
        }
    }

    /// `mcs_requests_total` by code and the MCN publisher's results, from `/metrics`.
    fn metrics_summary(&self) -> String {
        let Ok(r) = mcs::try_request(self.metrics, None, "GET", "/metrics", &[]) else {
            return "unavailable".into();
        };
        let text = String::from_utf8_lossy(&r.body);
        let mut by_code: std::collections::BTreeMap<String, f64> = Default::default();
        let mut publish: std::collections::BTreeMap<String, f64> = Default::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let value: f64 = value.parse().unwrap_or(0.0);
            let label = |name: &str| {
                series
                    .split_once(&format!("{name}=\""))
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(v, _)| v.to_string())
            };
            if series.starts_with("mcs_requests_total{") {
                *by_code
                    .entry(label("code").unwrap_or_default())
                    .or_default() += value;
            } else if series.starts_with("mcs_mcn_publish_total{") {
                *publish
                    .entry(label("result").unwrap_or_default())
                    .or_default() += value;
            }
        }
        let join = |m: &std::collections::BTreeMap<String, f64>| {
            m.iter()
                .map(|(k, v)| format!("{k}: {v:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "mcs_requests_total by code {{{}}}; mcs_mcn_publish_total {{{}}}",
            join(&by_code),
            join(&publish)
        )
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
