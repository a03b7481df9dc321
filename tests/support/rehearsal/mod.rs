//! A scale-up rehearsed end to end, as a cluster lives it: the day an operator cares about.
//!
//! Three replicas of `machine-config-server start` (the flags the MCO's DaemonSet passes, each
//! its own ports and `NODE_NAME`, each reaching the API through a fault proxy of its own)
//! stand behind one Debian haproxy in TCP mode sending PROXY v2, health-checking each replica
//! on both serving ports; the replicas trust only the balancer's address. Machines arrive on a
//! schedule (a burst, a steady trickle, and a second wave as a replica dies), each from its own
//! loopback address, each
//! speaking exactly as Ignition does ([`machine`]); one of them is Debian's real Ignition
//! client. The cluster side is played through the API ([`cluster`]): after its fetch a
//! machine's kubelet registers its Node and its daemon reports; a share of machines report a
//! first-boot failure instead, and never join or join on a second boot. During the storm the
//! worker pool rolls out a new rendered config, the layered pool's new image build succeeds,
//! the Lease-holding replica is SIGKILLed and restarted, and the API browns out.
//!
//! At the end, [`verdict`] judges what machines, the API and the replicas' metrics say, one
//! `PASS`/`FAIL` line each, and [`report`] writes the timeline (SVG and CSV) and the fetch
//! times. `benches/rehearsal.rs` runs the full day (knobs: [`Knobs::from_env`]);
//! `tests/rehearsal.rs` a small one on every change.

pub mod cluster;
pub mod machine;
pub mod plan;
pub mod report;
pub mod verdict;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::api_server::{ApiServer, Options};
use crate::fault_proxy::{Fault, FaultProxy};
use crate::haproxy::{Balance, Check, Haproxy, Header};
use crate::mcs::{Ports, Server, StopFlag};
use machine::{Balancer, Exchange};
use plan::{Client, Fate, Machine, Pool};

/// How big and how rough the day is. Every field has an environment variable
/// ([`Knobs::from_env`], documented in benches/README.md).
#[derive(Clone, Debug)]
pub struct Knobs {
    /// `MCS_REHEARSAL_MACHINES`: machines that boot (default 300).
    pub machines: usize,
    /// `MCS_REHEARSAL_BURST_PERCENT`: the share arriving in the first burst (default 40).
    pub burst_percent: f64,
    /// `MCS_REHEARSAL_BURST_SECONDS`: how long the burst lasts (default 3).
    pub burst: Duration,
    /// `MCS_REHEARSAL_TRICKLE_SECONDS`: over how long the others arrive (default 60).
    pub trickle: Duration,
    /// `MCS_REHEARSAL_WAVE_PERCENT`: the share arriving in a second wave around the kill
    /// (default 15); `MCS_REHEARSAL_WAVE_SECONDS`: its length (default 1.5).
    pub wave_percent: f64,
    pub wave: Duration,
    /// `MCS_REHEARSAL_FAILURE_PERCENT`: machines failing their first boot (default 5).
    pub failure_percent: f64,
    /// `MCS_REHEARSAL_BOOT_MS`: from config to Node registration, ±50% (default 2000).
    pub boot: Duration,
    /// `MCS_REHEARSAL_KILL`: SIGKILL the Lease holder mid-storm (default 1).
    pub kill: bool,
    /// `MCS_REHEARSAL_RESTART_MS`: when the killed replica comes back (default 3000).
    pub restart_after: Duration,
    /// `MCS_REHEARSAL_BROWNOUT_MS`: latency of every API call during the brownout (default
    /// 400); `MCS_REHEARSAL_BROWNOUT_SECONDS`: its length (default 4; 0 turns it off).
    pub brownout_latency: Duration,
    pub brownout_length: Duration,
    /// `MCS_REHEARSAL_SETTLE_MS`: how long after a proof a replica may still answer what it
    /// answered before (its watch has to deliver the change; default 2000).
    pub settle: Duration,
    /// `MCS_REHEARSAL_REAL_IGNITION`: one machine is Debian's Ignition client (default 1; the
    /// run fails when the client is missing and this is on).
    pub real_ignition: bool,
    /// `MCS_REHEARSAL_LEASE_MS`: the publisher's Lease duration (default: the server's own,
    /// 15 s); renew and retry periods scale with it.
    pub lease: Option<Duration>,
    /// `MCS_REHEARSAL_DEADLINE_SECONDS`: how long after the last arrival the harness waits for
    /// every machine's MCN (default 120).
    pub deadline: Duration,
    /// `MCS_REHEARSAL_SEED` (default 1).
    pub seed: u64,
    /// `MCS_REHEARSAL_OUT`: where the report goes (default `target/rehearsal`).
    pub out_dir: PathBuf,
    /// `MCS_REHEARSAL_BINARY`: the server binary (default: the one cargo built beside the
    /// running test or bench).
    pub binary: Option<PathBuf>,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            machines: 300,
            burst_percent: 40.0,
            burst: Duration::from_secs(3),
            trickle: Duration::from_secs(60),
            wave_percent: 15.0,
            wave: Duration::from_millis(1500),
            failure_percent: 5.0,
            boot: Duration::from_millis(2000),
            kill: true,
            restart_after: Duration::from_millis(3000),
            brownout_latency: Duration::from_millis(400),
            brownout_length: Duration::from_secs(4),
            settle: Duration::from_millis(2000),
            real_ignition: true,
            lease: None,
            deadline: Duration::from_secs(120),
            seed: 1,
            out_dir: crate::mcs::repo().join("target/rehearsal"),
            binary: None,
        }
    }
}

impl Knobs {
    /// The defaults, with every `MCS_REHEARSAL_*` variable that is set.
    pub fn from_env() -> Result<Knobs, String> {
        let mut knobs = Knobs::default();
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let number = |name: &str| -> Result<Option<f64>, String> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|n| n.is_finite() && *n >= 0.0)
                        .ok_or(format!("{name}={v:?}: expected a number >= 0"))
                })
                .transpose()
        };
        let ms = |n: f64| Duration::from_secs_f64(n / 1000.0);
        let secs = Duration::from_secs_f64;
        if let Some(n) = number("MCS_REHEARSAL_MACHINES")? {
            knobs.machines = (n as usize).max(6);
        }
        if let Some(n) = number("MCS_REHEARSAL_BURST_PERCENT")? {
            knobs.burst_percent = n.min(100.0);
        }
        if let Some(n) = number("MCS_REHEARSAL_BURST_SECONDS")? {
            knobs.burst = secs(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_TRICKLE_SECONDS")? {
            knobs.trickle = secs(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_WAVE_PERCENT")? {
            knobs.wave_percent = n.min(100.0);
        }
        if let Some(n) = number("MCS_REHEARSAL_WAVE_SECONDS")? {
            knobs.wave = secs(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_FAILURE_PERCENT")? {
            knobs.failure_percent = n.min(50.0);
        }
        if let Some(n) = number("MCS_REHEARSAL_BOOT_MS")? {
            knobs.boot = ms(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_KILL")? {
            knobs.kill = n > 0.0;
        }
        if let Some(n) = number("MCS_REHEARSAL_RESTART_MS")? {
            knobs.restart_after = ms(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_BROWNOUT_MS")? {
            knobs.brownout_latency = ms(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_BROWNOUT_SECONDS")? {
            knobs.brownout_length = secs(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_SETTLE_MS")? {
            knobs.settle = ms(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_REAL_IGNITION")? {
            knobs.real_ignition = n > 0.0;
        }
        if let Some(n) = number("MCS_REHEARSAL_LEASE_MS")? {
            knobs.lease = Some(ms(n.max(1500.0)));
        }
        if let Some(n) = number("MCS_REHEARSAL_DEADLINE_SECONDS")? {
            knobs.deadline = secs(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_SEED")? {
            knobs.seed = n as u64;
        }
        if let Some(dir) = var("MCS_REHEARSAL_OUT") {
            knobs.out_dir = PathBuf::from(dir);
        }
        if let Some(binary) = var("MCS_REHEARSAL_BINARY") {
            knobs.binary = Some(PathBuf::from(binary));
        }
        Ok(knobs)
    }
}

/// The replicas' stable names (`NODE_NAME`, what `bootstrap-served-by` says): the
/// control-plane Nodes they run on.
pub fn replica_name(index: usize) -> String {
    format!("master-{index}")
}

/// `--apiserver-url` of the replicas (written into the served kubeconfig).
const APISERVER_URL: &str = crate::cluster::APISERVER_URL;
/// The TLS flags the MCO's DaemonSet passes for the Intermediate profile.
const CIPHER_SUITES: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256";
pub const REPLICAS: usize = 3;

/// Now, RFC 3339 in UTC to the second (what a kubelet writes).
pub fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-from-civil, inverted.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// When each of the cluster's events happened, from the start of the storm: `(began, done)`.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    pub build_started: Option<Duration>,
    pub rollout: Option<(Duration, Duration)>,
    pub build_succeeded: Option<(Duration, Duration)>,
    pub kill: Option<Duration>,
    pub restarted: Option<Duration>,
    pub worker_proof: Option<(Duration, Duration)>,
    pub layered_proof: Option<(Duration, Duration)>,
    pub brownout: Option<(Duration, Duration)>,
    /// When the balancer took a replica out or put it back (`b0/r1 is DOWN`).
    pub balancer: Vec<(Duration, String)>,
}

/// What one machine went through.
#[derive(Clone, Debug)]
pub struct MachineRun {
    pub plan: Machine,
    pub fetch: Exchange,
    /// What its config said, when it got one: see [`Served`].
    pub served: Option<Served>,
    /// Its first-boot failure report, when it made one.
    pub report: Option<Exchange>,
    /// When its kubelet registered its Node, and with which boot ID.
    pub joined: Option<(Duration, String)>,
    /// When its daemon reported.
    pub daemon_reported: Option<Duration>,
    /// The local address of every connection of the real Ignition client (its relay's).
    pub relayed: Vec<SocketAddr>,
    /// What went wrong on the harness's side (a Node the API refused, Ignition's log).
    pub trouble: Option<String>,
}

/// What a served config said (node annotations and spec), and when it arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub at: Duration,
    pub rendered_config: String,
    pub image: Option<String>,
    pub spec: String,
    /// Where the machine's daemon reports a first-boot failure
    /// (`machineConfigServerURL`), and the CA it trusts for it
    /// (`/etc/machine-config-daemon/mcs-ca-bundle.crt`), when the config says.
    pub report_url: Option<String>,
    pub report_ca: Option<Vec<u8>>,
}

impl Served {
    /// Reads a served Ignition config (any spec): its `node-annotations.json`.
    pub fn read(config: &Value, at: Duration) -> Option<Served> {
        let spec = config["ignition"]["version"].as_str()?.to_string();
        let files = crate::mcs::served_files(config);
        let file = |path: &str| {
            files
                .iter()
                .find(|(p, _)| p == path)
                .map(|(_, data)| data.clone())
        };
        let annotations = file("/etc/machine-config-daemon/node-annotations.json")?;
        let annotations: Value = serde_json::from_slice(&annotations).ok()?;
        Some(Served {
            at,
            rendered_config: annotations[cluster::CURRENT_CONFIG].as_str()?.to_string(),
            image: annotations[cluster::CURRENT_IMAGE]
                .as_str()
                .map(str::to_string),
            spec,
            report_url: annotations["machineconfiguration.openshift.io/machineConfigServerURL"]
                .as_str()
                .map(str::to_string),
            report_ca: file(machine_config_server::render::MCS_CA_BUNDLE_PATH),
        })
    }
}

/// One replica's figures, read from its admin listener.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scrape {
    /// `mcs_requests_total{code="200"}`, every pool and version.
    pub ok_requests: f64,
    /// `mcs_mcn_records_served_before_durable_total`.
    pub before_durable: f64,
    /// When it was read, from the start of the storm.
    pub at: Duration,
}

/// One replica over the day.
#[derive(Clone, Debug)]
pub struct ReplicaRun {
    pub name: String,
    /// Its last figures before the SIGKILL, when it was the one killed.
    pub before_kill: Option<Scrape>,
    /// Its figures at the end (of its restarted process, when it was killed).
    pub end: Scrape,
    pub killed_at: Option<Duration>,
    pub restarted_at: Option<Duration>,
    /// Its writes to the API, from its fault proxy's log.
    pub writes: Vec<ApiWrite>,
    /// Everything it printed (of both processes, when it was restarted).
    pub output: String,
    pub output_tail: String,
}

/// One write of a replica to the API, as its fault proxy logged it.
#[derive(Clone, Debug)]
pub struct ApiWrite {
    /// When it reached the proxy, from the start of the storm.
    pub at: Duration,
    pub kind: verdict::WriteKind,
    /// The status the replica got (0: none).
    pub status: u16,
    pub method: String,
    pub uri: String,
}

/// Everything the verdicts and the report read.
#[derive(Clone, Debug)]
pub struct Facts {
    pub knobs: Knobs,
    pub api: &'static str,
    pub before: cluster::Before,
    pub machines: Vec<MachineRun>,
    pub marks: Marks,
    pub replicas: Vec<ReplicaRun>,
    /// The balancer's connection log, times from the start of the storm.
    pub connections: Vec<(Duration, crate::haproxy::Connection)>,
    /// Every MachineConfigNode at the end, by name.
    pub mcns: BTreeMap<String, Value>,
    /// The MCNs of the Nodes that were there before (the operator's), at the start.
    pub foreign_mcns: BTreeMap<String, Value>,
    /// `FirstbootFailed` Events this server wrote.
    pub firstboot_events: Vec<Value>,
    /// The shared served records' ConfigMap at the end.
    pub records: Option<Value>,
    /// When each machine's MCN first showed its bootstrap record (the monitor's view).
    pub mcn_complete: BTreeMap<String, Duration>,
    /// The storm's length: from the first arrival to the last machine done.
    pub storm: Duration,
    /// How long the harness waited for the MCNs after the storm.
    pub settle_wait: Duration,
}

/// The outcome of a run.
pub struct Outcome {
    pub facts: Facts,
    pub verdicts: Vec<verdict::Verdict>,
    pub written: report::Written,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.verdicts.iter().all(|v| v.pass)
    }
}

/// One replica: its server process and its own path to the API.
struct Replica {
    name: String,
    server: Server,
    proxy: FaultProxy,
}

fn replica_args(kubeconfig: &std::path::Path, tokens: &std::path::Path) -> Vec<String> {
    vec![
        "start".into(),
        format!("--apiserver-url={APISERVER_URL}"),
        "--payload-version=4.22.0-0.rehearsal".into(),
        format!("--tls-cipher-suites={CIPHER_SUITES}"),
        "--tls-min-version=VersionTLS12".into(),
        "--v=2".into(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--bootstrap-token-dir".into(),
        tokens.display().to_string(),
        "--proxy-protocol-from".into(),
        format!("{}/32", plan::BALANCER_ADDRESS),
        // Tell machines where and how to report a first-boot failure (upstream PR #6124).
        "--advertise-failure-reporting".into(),
    ]
}

fn replica_env(index: usize, lease: Option<Duration>) -> Vec<(String, String)> {
    use machine_config_server::mcn;
    let mut env = vec![
        (
            "POD_NAME".to_string(),
            format!("machine-config-server-{index}"),
        ),
        (mcn::ENV_NODE_NAME.to_string(), replica_name(index)),
        ("RUST_LOG".to_string(), "info".to_string()),
    ];
    if let Some(lease) = lease {
        let ms = |d: Duration| d.as_millis().to_string();
        env.extend([
            (mcn::ENV_LEASE_DURATION_MS.to_string(), ms(lease)),
            (mcn::ENV_RENEW_DEADLINE_MS.to_string(), ms(lease * 2 / 3)),
            (mcn::ENV_RENEW_PERIOD_MS.to_string(), ms(lease / 3)),
            (mcn::ENV_RETRY_PERIOD_MS.to_string(), ms(lease / 6)),
        ]);
    }
    env
}

/// A replica's figures from its admin listener (`None` when it does not answer).
fn scrape(server: &Server, at: Duration) -> Option<Scrape> {
    let response = crate::mcs::try_request(server.metrics, None, "GET", "/metrics", &[]).ok()?;
    let text = String::from_utf8_lossy(&response.body);
    let mut out = Scrape {
        at,
        ..Scrape::default()
    };
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if series.starts_with("mcs_requests_total{") && series.contains("code=\"200\"") {
            out.ok_requests += value;
        } else if series == "mcs_mcn_records_served_before_durable_total" {
            out.before_durable += value;
        }
    }
    Some(out)
}

/// The Lease holder among the replicas (by its process id in the holder identity).
fn leader(api: &ApiServer, replicas: &[Replica]) -> Option<usize> {
    let holder = crate::cluster::lease_holder(api)?;
    replicas
        .iter()
        .position(|r| holder.ends_with(&format!("_{}", r.server.pid())))
}

/// Runs the day with `knobs` and judges it. `Err` when the harness itself could not run (a
/// missing tool, a replica that never started); a server that misbehaves is a `FAIL` verdict.
pub fn run(knobs: &Knobs) -> Result<Outcome, String> {
    let missing = |tool: &str| !std::path::Path::new(tool).exists();
    if missing(crate::haproxy::HAPROXY) {
        return Err(format!(
            "{} is missing: install Debian's haproxy",
            crate::haproxy::HAPROXY
        ));
    }
    if knobs.real_ignition && missing(machine::IGNITION) {
        return Err(format!(
            "{} is missing: install Debian's ignition, or set MCS_REHEARSAL_REAL_IGNITION=0",
            machine::IGNITION
        ));
    }
    let plan = plan::machines(knobs);
    let script = plan::script(knobs);

    let api = Arc::new(ApiServer::start(Options {
        history_limit: 100_000,
        ..Options::default()
    }));
    let api_name = if api.is_real() {
        "a real kube-apiserver"
    } else {
        "the in-test API server"
    };
    eprintln!("rehearsal: API server: {api_name}");
    let before = cluster::load(&api)?;
    let foreign_mcns: BTreeMap<String, Value> = mcns_by_name(&api)
        .into_iter()
        .filter(|(name, _)| before.nodes.iter().any(|(node, _)| node == name))
        .collect();
    let tokens = crate::cluster::token_dir();
    let replicas = start_replicas(&api, knobs, tokens.path())?;
    let (haproxy, balancer) = start_balancer(&replicas);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let stop = StopFlag::new();
    let _stop_on_exit = stop.set_on_drop();
    let t0 = Instant::now();
    let give_up = t0 + knobs.burst + knobs.trickle + knobs.deadline;
    let (monitor, mcn_complete) = watch_mcn_records(api.clone(), stop.clone(), t0);
    let tasks: Vec<_> = plan
        .into_iter()
        .map(|machine| {
            let (api, balancer, before) = (api.clone(), balancer.clone(), before.clone());
            runtime.spawn(live_machine(machine, api, balancer, before, t0, give_up))
        })
        .collect();

    // The cluster's day, on this thread, while the machines live theirs.
    let mut day = Day {
        api: &api,
        before: &before,
        replicas,
        t0,
        marks: Marks::default(),
        kills: vec![Kill::default(); REPLICAS],
        killed: None,
        brownout_began: Duration::ZERO,
    };
    for (at, event) in script.events() {
        if let Some(wait) = (t0 + at).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        day.play(event)?;
    }

    // Every machine done (served, joined, reported), then every MCN settled.
    let machines: Vec<MachineRun> = runtime.block_on(async {
        let mut out = Vec::new();
        for task in tasks {
            out.push(
                task.await
                    .map_err(|e| format!("a machine's task failed: {e}"))?,
            );
        }
        Ok::<_, String>(out)
    })?;
    let storm = t0.elapsed();
    let settle_started = Instant::now();
    wait_for_mcns(&api, &machines, give_up + Duration::from_secs(1));
    // A moment for what is still on its way (a clearing, a last Event, the records' flush).
    std::thread::sleep(Duration::from_secs(2));
    let settle_wait = settle_started.elapsed();
    stop.set();
    let _ = monitor.join();

    let Day {
        replicas,
        mut marks,
        kills,
        ..
    } = day;
    let replica_runs = replica_runs(&replicas, &kills, t0);
    marks.balancer = haproxy
        .state_changes()
        .into_iter()
        .map(|(at, change)| (at.saturating_duration_since(t0), change))
        .collect();
    let connections = haproxy
        .connections()
        .into_iter()
        .map(|c| (c.seen.saturating_duration_since(t0), c))
        .collect();
    let firstboot_events = api
        .list("events.events.k8s.io")
        .into_iter()
        .filter(|e| {
            e["reportingController"] == machine_config_server::events::REPORTING_CONTROLLER
                && e["reason"] == "FirstbootFailed"
        })
        .collect();
    let records = api.get(
        "ConfigMap",
        Some(crate::cluster::MCO_NAMESPACE),
        machine_config_server::mcn::exchange::DEFAULT_NAME,
    );
    let facts = Facts {
        knobs: knobs.clone(),
        api: api_name,
        before,
        machines,
        marks,
        replicas: replica_runs,
        connections,
        mcns: mcns_by_name(&api),
        foreign_mcns,
        firstboot_events,
        records,
        mcn_complete: mcn_complete.lock().unwrap().clone(),
        storm,
        settle_wait,
    };
    let verdicts = verdict::judge(&facts);
    let written = report::write(&facts, &verdicts)?;
    drop(haproxy);
    drop(replicas);
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(Outcome {
        facts,
        verdicts,
        written,
    })
}

/// Every MachineConfigNode by name.
fn mcns_by_name(api: &ApiServer) -> BTreeMap<String, Value> {
    api.list("MachineConfigNode")
        .into_iter()
        .map(|m| {
            let name = m["metadata"]["name"].as_str().unwrap_or_default();
            (name.to_string(), m)
        })
        .collect()
}

/// The replicas, each through a fault proxy of its own, on free ports the balancer learns,
/// every pool ready.
fn start_replicas(
    api: &ApiServer,
    knobs: &Knobs,
    tokens: &std::path::Path,
) -> Result<Vec<Replica>, String> {
    let mut replicas = Vec::new();
    for index in 0..REPLICAS {
        let proxy = FaultProxy::start(api.kubeconfig_file());
        let args = replica_args(proxy.kubeconfig_file(), tokens);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env = replica_env(index, knobs.lease);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut started = None;
        for _ in 0..5 {
            match Server::start_on_binary(knobs.binary.as_deref(), Ports::free(), &args, &env) {
                Ok(server) => {
                    started = Some(server);
                    break;
                }
                // Another process took a free port first: other ports.
                Err(output) if output.contains("cannot listen") => continue,
                Err(output) => return Err(format!("replica {index} did not start:\n{output}")),
            }
        }
        let server = started.ok_or(format!("replica {index} found no free ports"))?;
        replicas.push(Replica {
            name: replica_name(index),
            server,
            proxy,
        });
    }
    for replica in &replicas {
        replica
            .server
            .wait_every_pool_ready(Duration::from_secs(60));
    }
    Ok(replicas)
}

/// haproxy in front of both serving ports of every replica, answering once every replica is
/// in.
fn start_balancer(replicas: &[Replica]) -> (Haproxy, Balancer) {
    let haproxy = Haproxy::balance(
        &[
            Balance {
                backends: replicas.iter().map(|r| r.server.secure).collect(),
                check: Check::Https,
            },
            Balance {
                backends: replicas.iter().map(|r| r.server.insecure).collect(),
                check: Check::Http,
            },
        ],
        Header::V2,
        IpAddr::V4(plan::BALANCER_ADDRESS),
    );
    let balancer = Balancer {
        tls: haproxy.frontends[0],
        plain: haproxy.frontends[1],
        client_config: crate::mcs::dev_ca_client(),
    };
    crate::mcs::poll(
        "the balancer's first answer",
        Duration::from_secs(30),
        || {
            crate::mcs::try_request(balancer.plain, None, "GET", "/healthz", &[])
                .ok()
                .filter(|r| r.status == 200)
        },
    );
    (haproxy, balancer)
}

/// A thread noting when each MCN first shows a bootstrap record, until `stop`.
fn watch_mcn_records(
    api: Arc<ApiServer>,
    stop: StopFlag,
    t0: Instant,
) -> (
    std::thread::JoinHandle<()>,
    Arc<Mutex<BTreeMap<String, Duration>>>,
) {
    let seen: Arc<Mutex<BTreeMap<String, Duration>>> = Arc::default();
    let noted = seen.clone();
    let thread = std::thread::spawn(move || {
        while !stop.is_set() {
            for (name, mcn) in mcns_by_name(&api) {
                if crate::cluster::mcn_annotation(&mcn, "bootstrap-served-at").is_some() {
                    noted
                        .lock()
                        .unwrap()
                        .entry(name)
                        .or_insert_with(|| t0.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    (thread, seen)
}

/// Waits (until `deadline`) for the MCN of every machine that joined to carry its bootstrap
/// record, and of every machine that joined on a second boot its failure.
fn wait_for_mcns(api: &ApiServer, machines: &[MachineRun], deadline: Instant) {
    let joined = |fate: Option<Fate>| -> Vec<String> {
        machines
            .iter()
            .filter(|m| m.joined.is_some() && m.served.is_some())
            .filter(|m| fate.is_none_or(|f| m.plan.fate == f))
            .map(|m| m.plan.name.clone())
            .collect()
    };
    let (expected, failed) = (joined(None), joined(Some(Fate::FailsThenJoins)));
    let has = |mcn: &Value, key: &str| crate::cluster::mcn_annotation(mcn, key).is_some();
    crate::mcs::poll_every(
        Duration::from_millis(250),
        deadline.saturating_duration_since(Instant::now()),
        || {
            let mcns = mcns_by_name(api);
            let complete = expected.iter().all(|name| {
                mcns.get(name)
                    .is_some_and(|m| has(m, "bootstrap-served-at"))
            });
            let told = failed.iter().all(|name| {
                mcns.get(name).is_some_and(|m| {
                    has(m, "firstboot-failure-stage") || has(m, "firstboot-failure-cleared-at")
                })
            });
            (complete && told).then_some(())
        },
    );
}

/// What happened to one replica's process: its figures just before a SIGKILL, and when it was
/// killed and started again.
#[derive(Clone, Debug, Default)]
struct Kill {
    before: Option<Scrape>,
    killed_at: Option<Duration>,
    restarted_at: Option<Duration>,
}

/// The cluster's side of the day as it is played.
struct Day<'a> {
    api: &'a ApiServer,
    before: &'a cluster::Before,
    replicas: Vec<Replica>,
    t0: Instant,
    marks: Marks,
    kills: Vec<Kill>,
    killed: Option<usize>,
    brownout_began: Duration,
}

impl Day<'_> {
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    /// `f`, and when it began and ended.
    fn timed(
        &self,
        f: impl FnOnce() -> Result<(), String>,
    ) -> Result<Option<(Duration, Duration)>, String> {
        let began = self.now();
        f()?;
        Ok(Some((began, self.now())))
    }

    fn play(&mut self, event: plan::Event) -> Result<(), String> {
        use plan::Event;
        let (api, before) = (self.api, self.before);
        match event {
            Event::BuildStarts => {
                cluster::start_build(api, &before.layered)?;
                self.marks.build_started = Some(self.now());
            }
            Event::Rollout => {
                self.marks.rollout = self.timed(|| cluster::start_worker_rollout(api))?;
            }
            Event::BuildSucceeds => {
                self.marks.build_succeeded = self.timed(|| cluster::build_succeeds(api))?;
            }
            Event::WorkerProof => {
                self.marks.worker_proof =
                    self.timed(|| cluster::prove_worker_rollout(api, "worker-0", &before.worker))?;
            }
            Event::LayeredProof => {
                self.marks.layered_proof = self.timed(|| {
                    cluster::prove_image(api, "layered-0", &before.layered, &before.image)
                })?;
            }
            Event::Kill => {
                // The Lease holder: the replica whose death costs the most.
                let victim = leader(api, &self.replicas).unwrap_or(1);
                let scraped = scrape(&self.replicas[victim].server, self.now());
                self.replicas[victim].server.kill();
                let at = self.now();
                eprintln!(
                    "rehearsal: SIGKILL {} at {:.1} s",
                    self.replicas[victim].name,
                    at.as_secs_f64()
                );
                self.marks.kill = Some(at);
                self.kills[victim].before = scraped;
                self.kills[victim].killed_at = Some(at);
                self.killed = Some(victim);
            }
            Event::Restart => {
                if let Some(victim) = self.killed {
                    let replica = &mut self.replicas[victim];
                    replica
                        .server
                        .restart()
                        .map_err(|e| format!("{} did not restart: {e}", replica.name))?;
                    let at = self.now();
                    self.marks.restarted = Some(at);
                    self.kills[victim].restarted_at = Some(at);
                }
            }
            Event::Brownout(latency) => {
                for replica in &self.replicas {
                    replica.proxy.set(Fault::Latency(latency));
                }
                self.brownout_began = self.now();
            }
            Event::BrownoutEnds => {
                for replica in &self.replicas {
                    replica.proxy.set(Fault::None);
                }
                self.marks.brownout = Some((self.brownout_began, self.now()));
            }
        }
        Ok(())
    }
}

/// Each replica's figures, API writes and output at the end.
fn replica_runs(replicas: &[Replica], kills: &[Kill], t0: Instant) -> Vec<ReplicaRun> {
    replicas
        .iter()
        .zip(kills)
        .map(|(replica, kill)| {
            let writes = replica
                .proxy
                .log()
                .into_iter()
                .filter_map(|logged| {
                    let kind = verdict::WriteKind::of(&logged.method, &logged.uri)?;
                    Some(ApiWrite {
                        at: logged.at.saturating_duration_since(t0),
                        kind,
                        status: logged.status,
                        method: logged.method,
                        uri: logged.uri,
                    })
                })
                .collect();
            let output = replica.server.output();
            let tail: Vec<&str> = output.lines().rev().take(40).collect();
            let output_tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
            ReplicaRun {
                name: replica.name.clone(),
                before_kill: kill.before.clone(),
                end: scrape(&replica.server, t0.elapsed()).unwrap_or_default(),
                killed_at: kill.killed_at,
                restarted_at: kill.restarted_at,
                writes,
                output,
                output_tail,
            }
        })
        .collect()
}

/// One machine's life: it powers on, fetches its config (as Ignition, or as Debian's real
/// Ignition through its relay), then joins, or reports a failure and joins on a second boot or
/// never.
async fn live_machine(
    plan: Machine,
    api: Arc<ApiServer>,
    balancer: Balancer,
    before: cluster::Before,
    t0: Instant,
    give_up: Instant,
) -> MachineRun {
    tokio::time::sleep_until((t0 + plan.arrives).into()).await;
    let mut run = MachineRun {
        plan: plan.clone(),
        fetch: Exchange::default(),
        served: None,
        report: None,
        joined: None,
        daemon_reported: None,
        relayed: Vec::new(),
        trouble: None,
    };
    if plan.client == Client::RealIgnition {
        real_ignition_fetch(&mut run, &balancer, &before.config_spec, t0, give_up).await;
    } else {
        run.fetch = machine::fetch_config(&plan, &balancer, t0, give_up).await;
        if run.fetch.final_status() == Some(200) {
            let at = run
                .fetch
                .attempts
                .last()
                .map(|a| a.ended)
                .unwrap_or_default();
            run.served = run
                .fetch
                .body
                .as_deref()
                .and_then(|body| serde_json::from_slice(body).ok())
                .and_then(|config: Value| Served::read(&config, at));
            if run.served.is_none() {
                run.trouble = Some("the 200's body is not a config with node annotations".into());
            }
        }
    }
    let Some(served) = run.served.clone() else {
        return run;
    };
    let boot = |fraction: f64| tokio::time::sleep(plan.boot.mul_f64(fraction));
    let blocking = |f: Box<dyn FnOnce() -> Result<(), String> + Send>| async move {
        tokio::task::spawn_blocking(f)
            .await
            .unwrap_or_else(|e| Err(format!("blocking task: {e}")))
    };
    let mut boot_number = 1;
    if plan.fate != Fate::Joins {
        // The daemon's first boot fails pulling its OS image: it tells the server.
        boot(0.5).await;
        let image = served.image.clone().unwrap_or_else(|| {
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:3333333333333333333333333333333333333333333333333333333333333333".into()
        });
        // The daemon reports where its config told it, trusting the CA its config carried;
        // a config that told it nothing leaves the failure untold.
        match machine::report_target(&served, &balancer) {
            Ok(target) => {
                run.report =
                    Some(machine::report_failure(&plan, &target, t0, give_up, &image).await);
            }
            Err(why) => {
                run.trouble = Some(format!("cannot report its failure: {why}"));
                run.report = Some(Exchange::default());
            }
        }
        if plan.fate == Fate::FailsForGood {
            return run;
        }
        boot_number = 2;
    }
    boot(1.0).await;
    let boot_id = format!("boot-{}-{boot_number}", plan.name);
    let (name, pool, address, id) = (plan.name.clone(), plan.pool, plan.address, boot_id.clone());
    let api_register = api.clone();
    match blocking(Box::new(move || {
        cluster::register(&api_register, &name, pool, address, &id)
    }))
    .await
    {
        Ok(()) => run.joined = Some((t0.elapsed(), boot_id)),
        Err(e) => {
            run.trouble = Some(e);
            return run;
        }
    }
    boot(0.5).await;
    let name = plan.name.clone();
    let config = served.rendered_config.clone();
    let image = if plan.pool == Pool::Layered {
        served.image.clone().or(Some(before.image.clone()))
    } else {
        None
    };
    match blocking(Box::new(move || {
        cluster::daemon_reports(&api, &name, &config, image.as_deref())
    }))
    .await
    {
        Ok(()) => run.daemon_reported = Some(t0.elapsed()),
        Err(e) => run.trouble = Some(e),
    }
    run
}

/// Debian's Ignition fetches the machine's config through its relay (the machine's own
/// address); the attempts are the relay's connections.
async fn real_ignition_fetch(
    run: &mut MachineRun,
    balancer: &Balancer,
    config_spec: &str,
    t0: Instant,
    give_up: Instant,
) {
    let plan = run.plan.clone();
    let relay = match machine::Relay::start(IpAddr::V4(plan.address), balancer.tls).await {
        Ok(relay) => relay,
        Err(e) => {
            run.trouble = Some(format!("relay: {e}"));
            return;
        }
    };
    let url = format!(
        "https://localhost:{}/config/{}",
        relay.address.port(),
        plan.pool.name()
    );
    let started = t0.elapsed();
    let timeout = give_up.saturating_duration_since(Instant::now());
    let fetched = tokio::task::spawn_blocking(move || {
        let work = tempfile::tempdir().expect("a directory for Ignition");
        let ca = std::fs::read(crate::mcs::repo().join("certs/ca.crt")).unwrap_or_default();
        machine::run_real_ignition(work.path(), &url, &ca, timeout)
    })
    .await;
    let ended = t0.elapsed();
    run.relayed = relay.connections.lock().unwrap().clone();
    let fetched = match fetched {
        Ok(fetched) => fetched,
        Err(e) => {
            run.trouble = Some(format!("ignition task: {e}"));
            return;
        }
    };
    match fetched.config {
        Ok(config) => {
            // Ignition caches the config translated to its own newest spec, so the spec it
            // was served is the one its release asks for (its `Accept`), as the server answers
            // that request.
            let asks = machine::real_ignition_release()
                .as_deref()
                .and_then(plan::newest_stable_spec);
            run.served = Served::read(&config, ended).map(|mut served| {
                served.spec = asks
                    .map(|asks| verdict::expected_spec(asks, config_spec))
                    .unwrap_or_else(|| format!("unknown (cached as {})", served.spec));
                served
            });
            // Its attempts are its relay's connections; the last one got the config.
            let count = run.relayed.len().max(1);
            for (i, local) in run.relayed.clone().into_iter().enumerate() {
                let last = i + 1 == count;
                run.fetch.attempts.push(machine::Attempt {
                    started,
                    ended,
                    local: Some(local),
                    outcome: if last {
                        machine::Outcome::Status(200)
                    } else {
                        machine::Outcome::Failed("retried by Ignition".into())
                    },
                });
            }
            if run.served.is_none() {
                run.trouble = Some("Ignition's config has no node annotations".into());
            }
        }
        Err(e) => {
            run.trouble = Some(format!("{e}\n{}", fetched.log));
        }
    }
}
