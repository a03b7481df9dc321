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
pub mod dashboard;
mod engine;
pub mod faults;
mod install;
pub mod machine;
pub mod plan;
pub mod report;
mod scale_up;
mod switch;
pub mod verdict;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use machine::Exchange;
use plan::Machine;

/// Which day is rehearsed (`MCS_REHEARSAL_SCENARIO`); every scenario plays on the same stage
/// ([`engine`]: the replicas, the balancer, the machines, the API) and is judged and drawn by the
/// same verdicts and report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// `scale-up` (the default): a MachineSet scaled up while the cluster has a bad day.
    ScaleUp,
    /// `install`: a cluster's birth, from the installer's bootstrap server to the cluster's
    /// replicas ([`install`]).
    Install,
    /// `switch`: the original replaced by this server replica by replica during a scale-up,
    /// and switched back ([`switch`]).
    Switch,
}

impl Scenario {
    pub fn parse(text: &str) -> Option<Scenario> {
        match text.trim() {
            "scale-up" | "scaleup" | "" => Some(Scenario::ScaleUp),
            "install" => Some(Scenario::Install),
            "switch" => Some(Scenario::Switch),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scenario::ScaleUp => "scale-up",
            Scenario::Install => "install",
            Scenario::Switch => "switch",
        }
    }
}

/// How big and how rough the day is. Every field has an environment variable
/// ([`Knobs::from_env`], documented in benches/README.md).
#[derive(Clone, Debug)]
pub struct Knobs {
    /// `MCS_REHEARSAL_SCENARIO`: `scale-up` (default), `install` or `switch`.
    pub scenario: Scenario,
    /// `MCS_REHEARSAL_ORIGINAL`: the original's binary, for the switch (required there in the
    /// bench; the project never builds it).
    pub original: Option<PathBuf>,
    /// Without an original: this server under the MCO's own rights stands in for it (the test
    /// tier; never from the environment).
    pub stand_in_original: bool,
    /// `MCS_REHEARSAL_EXTRAS`: the switch's ServiceAccount also has the extras' rights
    /// (default 1).
    pub extras: bool,
    /// `MCS_REHEARSAL_DRAIN`: the switch's rolling updates stop each old pod with SIGTERM and
    /// its grace period (default 1); 0 SIGKILLs it at once, as a pod force-deleted with no
    /// grace, so that its in-flight answers are cut (what the verdicts must catch).
    pub drain: bool,
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
    /// `MCS_REHEARSAL_API_DOWN_MS`: the kube-apiserver is stopped at 25% of the arrivals and
    /// started again this much later (default 3000; 0: no restart).
    pub api_down: Duration,
    /// `MCS_REHEARSAL_COMPACTION`: at 38%, the API's history compacted and every watch ended,
    /// so that each replica's watch resumes too late (410 Gone) and relists (default 1).
    pub compaction: bool,
    /// `MCS_REHEARSAL_ROTATION`: at 57%, the serving certificate replaced on disk (default 1).
    pub rotation: bool,
    /// `MCS_REHEARSAL_CUTOFF_SECONDS`: at 50%, one replica's path to the API black-holed this
    /// long (default 20; 0: none).
    pub cutoff: Duration,
    /// `MCS_REHEARSAL_CLOCK_AHEAD_SECONDS`: one replica's wall clock runs this far ahead for
    /// the whole day (libfaketime; default 300; 0: none).
    pub clock_ahead: Duration,
    /// `MCS_REHEARSAL_BREAK_WATCHES`: after the API restart one replica's path answers every
    /// watch request 500 until the end (its lists and writes go through), so that its watches
    /// never resume (default 0: what the
    /// verdicts must catch, as `MCS_REHEARSAL_DRAIN=0` is for the switch).
    pub break_watches: bool,
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
    /// `MCS_REHEARSAL_PROMETHEUS`: a real Prometheus (Debian's) scrapes the servers and the
    /// console dashboard's queries are drawn and judged at the end (default 1; the run fails
    /// when Prometheus is missing and this is on).
    pub prometheus: bool,
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
            scenario: Scenario::ScaleUp,
            original: None,
            stand_in_original: false,
            extras: true,
            drain: true,
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
            api_down: Duration::from_millis(3000),
            compaction: true,
            rotation: true,
            cutoff: Duration::from_secs(20),
            clock_ahead: Duration::from_secs(300),
            break_watches: false,
            real_ignition: true,
            lease: None,
            deadline: Duration::from_secs(120),
            prometheus: true,
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
        if let Some(text) = var("MCS_REHEARSAL_SCENARIO") {
            knobs.scenario = Scenario::parse(&text).ok_or(format!(
                "MCS_REHEARSAL_SCENARIO={text:?}: expected scale-up, install or switch"
            ))?;
        }
        if let Some(original) = var("MCS_REHEARSAL_ORIGINAL") {
            knobs.original = Some(PathBuf::from(original));
        }
        if let Some(n) = number("MCS_REHEARSAL_EXTRAS")? {
            knobs.extras = n > 0.0;
        }
        if let Some(n) = number("MCS_REHEARSAL_DRAIN")? {
            knobs.drain = n > 0.0;
        }
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
        if let Some(n) = number("MCS_REHEARSAL_API_DOWN_MS")? {
            knobs.api_down = ms(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_COMPACTION")? {
            knobs.compaction = n > 0.0;
        }
        if let Some(n) = number("MCS_REHEARSAL_ROTATION")? {
            knobs.rotation = n > 0.0;
        }
        if let Some(n) = number("MCS_REHEARSAL_CUTOFF_SECONDS")? {
            knobs.cutoff = secs(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_CLOCK_AHEAD_SECONDS")? {
            knobs.clock_ahead = secs(n);
        }
        if let Some(n) = number("MCS_REHEARSAL_BREAK_WATCHES")? {
            knobs.break_watches = n > 0.0;
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
        if let Some(n) = number("MCS_REHEARSAL_PROMETHEUS")? {
            knobs.prometheus = n > 0.0;
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

/// The replicas' pod names (`POD_NAME`, and the `pod` label their metrics carry).
pub fn pod_name(index: usize) -> String {
    format!("machine-config-server-{index}")
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
    /// A scenario's own moments (the install's phases), in order.
    pub phases: Vec<(Duration, String)>,
    /// The control plane's faults, each from its start to its end (drawn as shaded bands).
    pub faults: Vec<FaultMark>,
}

/// One fault of the day: what, when, and on which replica when it is one replica's.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultMark {
    pub kind: FaultKind,
    pub began: Duration,
    pub ended: Duration,
    /// The replica it struck (the cut-off, the skewed clock), by index.
    pub replica: Option<usize>,
}

/// The faults a control plane throws at the replicas during the scale-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    ApiRestart,
    Compaction,
    Rotation,
    CutOff,
    ClockAhead,
}

impl FaultKind {
    pub fn label(self) -> &'static str {
        match self {
            FaultKind::ApiRestart => "API server restart",
            FaultKind::Compaction => "410 Gone relist",
            FaultKind::Rotation => "certificate rotated",
            FaultKind::CutOff => "replica cut off",
            FaultKind::ClockAhead => "clock ahead",
        }
    }
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

impl MachineRun {
    /// A machine before it powered on.
    pub fn new(plan: Machine) -> MachineRun {
        MachineRun {
            plan,
            fetch: Exchange::default(),
            served: None,
            report: None,
            joined: None,
            daemon_reported: None,
            relayed: Vec::new(),
            trouble: None,
        }
    }

    /// After a fetch that ended in a 200: what its body says it was served (or the trouble).
    pub fn read_served(&mut self) {
        if self.fetch.final_status() != Some(200) {
            return;
        }
        let at = self
            .fetch
            .attempts
            .last()
            .map(|a| a.ended)
            .unwrap_or_default();
        self.served = self
            .fetch
            .body
            .as_deref()
            .and_then(|body| serde_json::from_slice(body).ok())
            .and_then(|config: Value| Served::read(&config, at));
        if self.served.is_none() {
            self.trouble = Some("the 200's body is not a config with node annotations".into());
        }
    }
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
    /// Its process's resident and peak resident memory then (`VmRSS`, `VmHWM`), in KiB.
    pub resident_kib: u64,
    pub peak_kib: u64,
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
    /// When it listed a collection (a reflector's list: `limit=` without `watch`), and
    /// when each of its watches began with the status it got (0: none), by its proxy's log.
    pub lists: Vec<Duration>,
    pub watches: Vec<(Duration, u16)>,
    /// Every read (GET) through its proxy: when, the path and query, the status, a watch.
    pub reads: Vec<(Duration, String, u16, bool)>,
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

/// Which server runs on a replica's ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerKind {
    Original,
    Ours,
}

impl ServerKind {
    pub fn label(self) -> &'static str {
        match self {
            ServerKind::Original => "the original",
            ServerKind::Ours => "this server",
        }
    }
}

/// One command the harness ran against the cluster (`compare`, `cleanup`): its exit code and
/// what it printed.
#[derive(Clone, Debug)]
pub struct Step {
    pub label: String,
    pub code: Option<i32>,
    pub output: String,
}

impl Step {
    pub fn of(label: &str, output: std::io::Result<std::process::Output>) -> Step {
        match output {
            Ok(output) => Step {
                label: label.to_string(),
                code: output.status.code(),
                output: String::from_utf8_lossy(&output.stdout).into_owned()
                    + &String::from_utf8_lossy(&output.stderr),
            },
            Err(e) => Step {
                label: label.to_string(),
                code: None,
                output: e.to_string(),
            },
        }
    }
}

/// What only the switch has ([`switch`]).
#[derive(Clone, Debug)]
pub struct SwitchFacts {
    /// This server under the MCO's rights stood in for the original.
    pub stand_in: bool,
    pub extras: bool,
    /// Per replica: from when each kind of server ran on its ports.
    pub history: Vec<Vec<(Duration, ServerKind)>>,
    /// The original's answers before the switch, after switching back, and after `cleanup`,
    /// by `(pool, spec)`.
    pub reference: BTreeMap<(String, String), Vec<u8>>,
    pub after: BTreeMap<(String, String), Vec<u8>>,
    pub after_cleanup: BTreeMap<(String, String), Vec<u8>>,
    /// `compare` before and after, and `cleanup`'s three runs.
    pub steps: Vec<Step>,
}

impl SwitchFacts {
    /// Which server ran on replica `index`'s ports at `at`.
    pub fn kind_at(&self, index: usize, at: Duration) -> Option<ServerKind> {
        self.history
            .get(index)?
            .iter()
            .rev()
            .find(|(from, _)| *from <= at)
            .map(|(_, kind)| *kind)
    }

    /// When the last of this server's replicas stopped running (`None`: one still runs, or
    /// none ever ran).
    pub fn ours_left(&self) -> Option<Duration> {
        let mut left = None;
        for history in &self.history {
            match history.last() {
                Some((_, ServerKind::Ours)) => return None,
                _ => {
                    let ended = history
                        .windows(2)
                        .filter(|w| w[0].1 == ServerKind::Ours)
                        .map(|w| w[1].0)
                        .max();
                    left = left.max(ended);
                }
            }
        }
        left
    }
}

/// What only the install scenario has ([`install`]).
#[derive(Clone, Debug)]
pub struct InstallFacts {
    /// The bootstrap server's run (also `Facts::replicas[0]`).
    pub bootstrap: ReplicaRun,
    /// The bootstrap key's records as the API held them when the bootstrap server was drained:
    /// `(address, pool, rendered config)`.
    pub key_held: Vec<(String, String, String)>,
    /// The masters served before the bootstrap server's restart.
    pub served_before_restart: Vec<String>,
    /// The master config from both modes, compared.
    pub comparison: ModeComparison,
    /// Whether the Lease holder removed the bootstrap key by the end (every control-plane
    /// Node's MCN carries a record).
    pub key_removed: bool,
    /// The masters' addresses.
    pub masters_addresses: Vec<IpAddr>,
}

/// The same pool, spec and state served by the bootstrap server and by a cluster replica.
#[derive(Clone, Debug, Default)]
pub struct ModeComparison {
    pub spec: String,
    /// The rendered config each names in its node annotations.
    pub bootstrap_config: String,
    pub cluster_config: String,
    /// Files whose contents differ (or that only one serves).
    pub differing_files: Vec<String>,
    /// Anything else that differs.
    pub other_differences: Vec<String>,
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
    /// The install scenario's own facts.
    pub install: Option<InstallFacts>,
    /// The switch's own facts.
    pub switch: Option<SwitchFacts>,
    /// What a real Prometheus scraping the run saw, as the console dashboard shows it
    /// ([`dashboard`]; `None` with `MCS_REHEARSAL_PROMETHEUS=0`).
    pub operator: Option<dashboard::OperatorView>,
    /// Config answers the harness itself asked servers of ours for during the storm, by pool
    /// (the install's comparison of both modes), which their counters hold beside the
    /// machines'.
    pub own_answers: BTreeMap<String, usize>,
    /// When each replica presented the rotated serving certificate (the scale-up's rotation).
    pub rotation: Option<faults::RotationSeen>,
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

/// Runs the day with `knobs` and judges it. `Err` when the harness itself could not run (a
/// missing tool, a replica that never started); a server that misbehaves is a `FAIL` verdict.
pub fn run(knobs: &Knobs) -> Result<Outcome, String> {
    match knobs.scenario {
        Scenario::ScaleUp => scale_up::run(knobs),
        Scenario::Install => install::run(knobs),
        Scenario::Switch => switch::run(knobs),
    }
}
