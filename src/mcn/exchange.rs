//! The served records every replica shares through the API, so that the lease holder can write
//! the bootstrap record of a node that another replica served.
//!
//! # The object
//! One ConfigMap, [`DEFAULT_NAME`] in the server's namespace, with one data key per replica:
//! the replica's stable name (`NODE_NAME`: the DaemonSet runs one pod per control-plane node, so
//! a restarted pod finds its own key again; else the pod or host name). The value is compact
//! JSON ([`encode`]): a table of the distinct answers (pool, rendered config, spec version,
//! image) and the records `[address, answer index, served at (ms)]`, newest first, at most
//! [`DEFAULT_MAX_ENTRIES`] records and [`DEFAULT_MAX_BYTES`] bytes per replica (about 31 bytes
//! an IPv4 record, as the encoding test measures: 4096 records are ~130 KB; five replicas stay
//! under 800 KiB of the 1 MiB object limit).
//!
//! Two members were added to format 1 without changing its number, so that replicas of both
//! versions read each other during a rollout: `agents`/`agent`, the Ignition release of each
//! record's client (a table and one index per record; absent when no record has one), and
//! `failures`, the first-boot failures machines reported (`[address, pool, node ID, stage,
//! message, image registry, reported at (ms)]`, sanitized, newest first, at most half the
//! bytes). A replica of the earlier version ignores both (its records and matching work as
//! before; while it leads, MCNs get neither the client release nor the failures, which the next
//! new leader writes while the records last); a replica of this version reads the earlier
//! values as records with an unknown client and no failures.
//!
//! One named object rather than one per replica: RBAC can then restrict `patch`, `list` and
//! `watch` to that one name (object names derived from node names are not known in advance,
//! and `patch` on every ConfigMap of the namespace would let the server rewrite the operator's
//! own). Each replica writes only its own key, by server-side apply under its own field manager
//! (`mcs-served-<replica>`), so replicas never conflict and the API server records who owns
//! which key.
//!
//! # Writes (group commit: bounded, batched, durable before the answer)
//! A new record wakes the writer, which writes at once unless its last write started less than
//! a flush interval ago (default 200 ms: at most five writes a second), only when its encoded
//! records changed, never per request: every record kept when a write starts goes in it, and
//! records that arrive while it is in flight go in the next one. It goes before the interval
//! is over only when waiting cannot make the write carry more: every open connection of the
//! serving ports is an answer waiting for it and it carries at least
//! [`EARLY_BATCH`](crate::server::commit::EARLY_BATCH) records (a burst of machines that all
//! asked at once, [`crate::server::commit`]); so a write never carries fewer answers than
//! under the interval alone. Once the API server accepted a
//! write (a 2xx answer: the object is in etcd), every record it carried is durable and the
//! answers waiting for them go out ([`crate::server::commit`]). A write that fails (any error status,
//! 409 and 422 included, or a transport error) or takes longer than [`WRITE_TIMEOUT`] made
//! nothing durable, whatever the API server did with it: it is retried with jittered
//! exponential backoff, an apply of the same key being idempotent; meanwhile the records stay
//! in memory and the answers go out after their bounded wait. A record leaves the replica's
//! key when it expires ([`DEFAULT_TTL`]) or once it is settled ([`settled`]: its Node has an
//! MCN with a bootstrap record, written by whichever replica leads); that housekeeping runs
//! once a second. So the object holds only machines served but not yet joined, whatever the
//! write rate. A first-boot failure report stays until it expires, even once its MCN carries
//! it: it also owes an Event, which only the lease holder knows it told.
//!
//! # Reads
//! Every replica watches the one object (a `metadata.name` field selector, so `resourceNames`
//! applies) and publishes its decoded content on a `watch` channel; the publisher merges it with
//! its own memory ([`super::matching`]). On start a replica takes back its own key
//! ([`ServedLog::restore`]) before its first write, so nothing it wrote is lost by a restart.
//!
//! Owns this ConfigMap only. The request path only touches [`ServedLog`] and waits, bounded,
//! on the group commit; it never calls the API.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::desired::has_bootstrap_record;
use super::matching::served_before;
use crate::api::machineconfignode::MachineConfigNode;
use crate::api::node::{created as node_created, internal_ips, name as node_name};
use crate::ignition::SpecVersion;
use crate::metrics::Metrics;
use crate::rights::Feature;
use crate::server::commit::{CommitWriter, EARLY_BATCH};
use crate::server::served::{Answer, FailureRecord, ServedLog, ServedRecord, WriteSet};
use crate::snapshot::Snapshot;
use crate::source::cluster::rights::Rights;
use crate::telemetry::ErrorChain;

/// Name of the shared ConfigMap.
pub const DEFAULT_NAME: &str = "machine-config-server-served-records";
/// Most records one replica publishes.
pub const DEFAULT_MAX_ENTRIES: usize = 4096;
/// Most bytes of one replica's value.
pub const DEFAULT_MAX_BYTES: usize = 160 * 1024;
/// How long a record is kept (and merged) when its node never joins.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// Shortest time between the starts of two writes of one replica (at most five a second).
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(200);
/// How often settled and expired records are forgotten (and gone replicas' keys removed).
pub const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(1);
/// A write that has not been answered by then failed (the API hangs): retried with backoff.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Field manager prefix of a replica's writes (the replica name follows).
pub const FIELD_MANAGER_PREFIX: &str = "mcs-served-";
// The bootstrap server's key and TTL live in `matching`, which merges by them; they are
// part of the exchange's vocabulary too.
pub use super::matching::{record_ttl, BOOTSTRAP_SERVER_KEY, BOOTSTRAP_TTL};
/// Version of the encoding.
const FORMAT_VERSION: u32 = 1;

/// Identity, bounds and timing of one replica's records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeSettings {
    pub namespace: String,
    pub name: String,
    /// This replica's data key (see [`replica_key`]).
    pub replica: String,
    pub flush_interval: Duration,
    pub ttl: Duration,
    pub max_entries: usize,
    pub max_bytes: usize,
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// At shutdown, how long the writer goes on writing the records of answers still draining
    /// (the listeners' grace period and an answer's wait for its record).
    pub drain_bound: Duration,
}

impl ExchangeSettings {
    pub fn new(replica: &str) -> Self {
        ExchangeSettings {
            namespace: super::lease::DEFAULT_NAMESPACE.to_owned(),
            name: DEFAULT_NAME.to_owned(),
            replica: replica_key(replica),
            flush_interval: DEFAULT_FLUSH_INTERVAL,
            ttl: DEFAULT_TTL,
            max_entries: DEFAULT_MAX_ENTRIES,
            max_bytes: DEFAULT_MAX_BYTES,
            retry_initial: Duration::from_millis(200),
            retry_max: Duration::from_secs(30),
            drain_bound: Duration::from_secs(20) + crate::server::commit::DEFAULT_WAIT_BOUND,
        }
    }

    /// This replica's field manager: [`FIELD_MANAGER_PREFIX`] and its name, at most 128 bytes
    /// (the API server's limit).
    pub fn field_manager(&self) -> String {
        let mut manager = format!("{FIELD_MANAGER_PREFIX}{}", self.replica);
        manager.truncate(128);
        manager
    }
}

/// A valid ConfigMap key (`[-._a-zA-Z0-9]+`, at most 253) for a replica name: other characters
/// become `-`; an empty name is `unknown`.
pub fn replica_key(name: &str) -> String {
    let mut key: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') {
                c
            } else {
                '-'
            }
        })
        .collect();
    key.truncate(253);
    if key.is_empty() || key == "." || key == ".." {
        "unknown".to_owned()
    } else {
        key
    }
}

/// Every replica's published records, by replica name.
pub type PublishedRecords = BTreeMap<String, Vec<(IpAddr, ServedRecord)>>;
/// Every replica's published failure reports, by replica name.
pub type PublishedFailures = BTreeMap<String, Vec<(IpAddr, FailureRecord)>>;

/// What the watch of the shared object shows.
#[derive(Clone, Debug, Default)]
pub struct SharedView {
    /// True once the object was listed (before: nothing is known, nothing is written).
    pub listed: bool,
    /// True when the object exists.
    pub exists: bool,
    pub records: PublishedRecords,
    pub failures: PublishedFailures,
    /// The raw value of each replica's key (to tell whether a write would change anything).
    pub raw: BTreeMap<String, String>,
    /// The object's resourceVersion (a precondition for removing another replica's key).
    pub resource_version: Option<String>,
}

/// `[address, pool, node ID, stage, message, image registry, reported at (ms)]`.
type WireFailure = (String, String, String, String, String, String, u64);

#[derive(Serialize, Deserialize)]
struct Wire {
    v: u32,
    /// `[pool, rendered config, spec version, image ("" for none)]`.
    configs: Vec<(String, String, String, String)>,
    /// `[address, index into configs, served at in Unix milliseconds]`, newest first.
    served: Vec<(String, usize, u64)>,
    /// The distinct Ignition releases of the records' clients (added to format 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    agents: Vec<String>,
    /// Per record of `served`: 0 when its client is unknown, else 1 + an index into `agents`
    /// (added to format 1; absent when every client is unknown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    agent: Vec<usize>,
    /// First-boot failures, newest first (added to format 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    failures: Vec<WireFailure>,
}

/// One replica's value: the newest records that fit in `max_entries` and `max_bytes`. Returns
/// the JSON and how many records it holds.
pub fn encode(
    entries: &[(IpAddr, ServedRecord)],
    max_entries: usize,
    max_bytes: usize,
) -> (String, usize) {
    encode_with_failures(entries, &[], max_entries, max_bytes)
}

/// [`encode`] with the failure reports: the newest that fit in half of `max_bytes` go first,
/// then the newest records in what is left. Returns the JSON and how many records it holds.
pub fn encode_with_failures(
    entries: &[(IpAddr, ServedRecord)],
    failures: &[(IpAddr, FailureRecord)],
    max_entries: usize,
    max_bytes: usize,
) -> (String, usize) {
    let mut sorted: Vec<&(IpAddr, ServedRecord)> = entries.iter().collect();
    sorted.sort_by(|(a_ip, a), (b_ip, b)| b.served_at.cmp(&a.served_at).then(a_ip.cmp(b_ip)));
    let mut wire = Wire {
        v: FORMAT_VERSION,
        configs: Vec::new(),
        served: Vec::new(),
        agents: Vec::new(),
        agent: Vec::new(),
        failures: Vec::new(),
    };
    let mut index: BTreeMap<(String, String, String, String), usize> = BTreeMap::new();
    // `{"v":1,"configs":[],"served":[]}` plus separators, counted as each part is added.
    let mut size = 32;
    let mut newest_failures: Vec<&(IpAddr, FailureRecord)> = failures.iter().collect();
    newest_failures
        .sort_by(|(a_ip, a), (b_ip, b)| b.reported_at.cmp(&a.reported_at).then(a_ip.cmp(b_ip)));
    for (address, failure) in newest_failures {
        let entry = (
            address.to_string(),
            failure.pool.clone(),
            failure.node_id.clone(),
            failure.stage.clone(),
            failure.message.clone(),
            failure.image.clone(),
            millis(failure.reported_at),
        );
        // `,"failures":[]` once, then each entry and its separator.
        let entry_size = json_len(&entry) + 1 + if wire.failures.is_empty() { 14 } else { 0 };
        if size + entry_size > max_bytes / 2 {
            break;
        }
        size += entry_size;
        wire.failures.push(entry);
    }
    let mut agents: BTreeMap<String, usize> = BTreeMap::new();
    let mut any_agent = false;
    for (address, record) in sorted {
        if wire.served.len() >= max_entries {
            break;
        }
        let config = (
            record.pool.clone(),
            record.rendered_config.clone(),
            record.spec_version.as_str().to_owned(),
            record.image.clone().unwrap_or_default(),
        );
        let known = index.get(&config).copied();
        let config_size = match known {
            Some(_) => 0,
            None => json_len(&config) + 1,
        };
        let entry = (
            address.to_string(),
            known.unwrap_or(index.len()),
            millis(record.served_at),
        );
        let entry_size = json_len(&entry) + 1;
        // The clients' releases, once one is known: `,"agents":[],"agent":[]`, the index of
        // every record (at most 5 bytes each; `0,` for those before) and each new release.
        let becomes_known = record.ignition.is_some() && !any_agent;
        let new_release = match &record.ignition {
            Some(release) if !agents.contains_key(release) => json_len(release) + 1,
            _ => 0,
        };
        let agent_size = if any_agent || becomes_known {
            6 + new_release
                + if becomes_known {
                    24 + 2 * wire.served.len()
                } else {
                    0
                }
        } else {
            0
        };
        if size + config_size + entry_size + agent_size > max_bytes {
            break;
        }
        size += config_size + entry_size + agent_size;
        if known.is_none() {
            index.insert(config.clone(), wire.configs.len());
            wire.configs.push(config);
        }
        wire.served.push(entry);
        let agent = match &record.ignition {
            Some(release) => {
                any_agent = true;
                let next = agents.len();
                1 + *agents.entry(release.clone()).or_insert(next)
            }
            None => 0,
        };
        wire.agent.push(agent);
    }
    if any_agent {
        let mut table: Vec<(&String, &usize)> = agents.iter().collect();
        table.sort_by_key(|(_, index)| **index);
        wire.agents = table
            .into_iter()
            .map(|(release, _)| release.clone())
            .collect();
    } else {
        wire.agent.clear();
    }
    let count = wire.served.len();
    (serde_json::to_string(&wire).unwrap_or_default(), count)
}

/// Why a replica's value in the shared ConfigMap cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not the served-records format: {0}")]
    NotRecords(#[from] serde_json::Error),
    #[error("unknown format version {0}")]
    UnknownVersion(u32),
}

/// The records of one replica's value; entries that do not parse are skipped (a newer
/// format's or a hand edit's), a value that does not parse at all is an error.
pub fn decode(text: &str) -> Result<Vec<(IpAddr, ServedRecord)>, DecodeError> {
    decode_all(text).map(|decoded| decoded.served)
}

/// What one replica's value holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    pub served: Vec<(IpAddr, ServedRecord)>,
    pub failures: Vec<(IpAddr, FailureRecord)>,
}

/// The records and failure reports of one replica's value (entries that do not parse are
/// skipped; a client release table that does not fit its records is ignored).
pub fn decode_all(text: &str) -> Result<Decoded, DecodeError> {
    let wire: Wire = serde_json::from_str(text)?;
    if wire.v != FORMAT_VERSION {
        return Err(DecodeError::UnknownVersion(wire.v));
    }
    let agents_fit = wire.agent.len() == wire.served.len();
    let agent_of = |position: usize| -> Option<usize> {
        let index = *wire.agent.get(position).filter(|_| agents_fit)?;
        let index = index.checked_sub(1)?;
        wire.agents.get(index).map(|_| index)
    };
    let failures = wire
        .failures
        .iter()
        .filter_map(|(address, pool, node_id, stage, message, image, at)| {
            let address: IpAddr = address.parse().ok()?;
            Some((
                address.to_canonical(),
                FailureRecord {
                    pool: pool.clone(),
                    node_id: node_id.clone(),
                    stage: stage.clone(),
                    message: message.clone(),
                    image: image.clone(),
                    reported_at: UNIX_EPOCH + Duration::from_millis(*at),
                },
            ))
        })
        .collect();
    // One answer per (config, client release) pair, shared by its records.
    let mut answers: HashMap<(usize, Option<usize>), Arc<Answer>> = HashMap::new();
    let served = wire
        .served
        .iter()
        .enumerate()
        .filter_map(|(position, (address, config, at))| {
            let address: IpAddr = address.parse().ok()?;
            let agent = agent_of(position);
            let answer = match answers.entry((*config, agent)) {
                Entry::Occupied(known) => known.get().clone(),
                Entry::Vacant(slot) => {
                    let (pool, rendered_config, version, image) = wire.configs.get(*config)?;
                    let spec_version = SpecVersion::ALL
                        .into_iter()
                        .find(|v| v.as_str() == version)?;
                    slot.insert(Arc::new(Answer {
                        pool: pool.clone(),
                        rendered_config: rendered_config.clone(),
                        image: (!image.is_empty()).then(|| image.clone()),
                        spec_version,
                        ignition: agent.and_then(|index| wire.agents.get(index).cloned()),
                    }))
                    .clone()
                }
            };
            Some((
                address.to_canonical(),
                ServedRecord {
                    answer,
                    served_at: UNIX_EPOCH + Duration::from_millis(*at),
                },
            ))
        })
        .collect();
    Ok(Decoded { served, failures })
}

fn json_len(value: &impl Serialize) -> usize {
    serde_json::to_string(value).map_or(0, |s| s.len())
}

fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The addresses whose records have done their job, with the newest creation time of a Node
/// there: a Node with that `InternalIP` has an MCN with a bootstrap record (or one that says the
/// source is unknown), whoever wrote it. One pass over Nodes and MCNs, so that checking every
/// record of a flush is a lookup.
pub fn settled_addresses(snapshot: &Snapshot) -> HashMap<IpAddr, Option<SystemTime>> {
    addresses_of_nodes_whose_mcn(snapshot, has_bootstrap_record)
}

/// The `InternalIP`s of the Nodes whose MCN satisfies `carries`, each with the newest creation
/// time of a Node there (`None` when any of them has none).
fn addresses_of_nodes_whose_mcn(
    snapshot: &Snapshot,
    carries: fn(&MachineConfigNode) -> bool,
) -> HashMap<IpAddr, Option<SystemTime>> {
    let recorded: HashSet<&str> = snapshot
        .layered
        .machine_config_nodes
        .iter()
        .filter(|mcn| carries(mcn))
        .filter_map(|mcn| mcn.metadata.name.as_deref())
        .collect();
    let mut out: HashMap<IpAddr, Option<SystemTime>> = HashMap::new();
    for node in snapshot.layered.nodes.iter() {
        if !recorded.contains(node_name(node)) {
            continue;
        }
        let created = node_created(node);
        for address in internal_ips(node) {
            let newest = out.entry(address).or_insert(created);
            *newest = match (*newest, created) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
    }
    out
}

/// True when the record served to `address` is settled ([`settled_addresses`]): a recorded
/// Node there joined after it was served (the matching rule [`served_before`]).
pub fn settled(
    address: IpAddr,
    record: &ServedRecord,
    settled: &HashMap<IpAddr, Option<SystemTime>>,
) -> bool {
    settled
        .get(&address)
        .is_some_and(|created| served_before(record.served_at, *created))
}

/// Keys of other replicas that hold records and none younger than their TTL ([`record_ttl`]):
/// a replica that is gone (its node replaced) and can no longer expire its own. The lease holder
/// removes them so that dead replicas' keys cannot fill the object. The bootstrap server's key
/// goes sooner, once `control_plane_recorded`: every control-plane Node's MCN carries a bootstrap
/// record, so its records have done their job (the bootstrap node is gone by then). Keys that
/// do not decode (a newer format) are left alone. Returns (key, its raw value) for a guarded
/// removal.
pub fn stale_keys(
    view: &SharedView,
    own: &str,
    now: SystemTime,
    ttl: Duration,
    control_plane_recorded: bool,
) -> Vec<(String, String)> {
    let no_failures = Vec::new();
    view.records
        .iter()
        .filter(|(replica, records)| {
            let ttl = record_ttl(replica, ttl);
            let expired = |at: SystemTime| now.duration_since(at).is_ok_and(|age| age > ttl);
            let failures = view.failures.get(*replica).unwrap_or(&no_failures);
            let done = replica.as_str() == BOOTSTRAP_SERVER_KEY && control_plane_recorded;
            replica.as_str() != own
                && !(records.is_empty() && failures.is_empty())
                && (done
                    || (records.iter().all(|(_, record)| expired(record.served_at))
                        && failures
                            .iter()
                            .all(|(_, failure)| expired(failure.reported_at))))
        })
        .filter_map(|(replica, _)| Some((replica.clone(), view.raw.get(replica)?.clone())))
        .collect()
}

/// Whether every control-plane (and arbiter) Node of `snapshot` has an MCN with a bootstrap
/// record, and there is at least one: the bootstrap server's records have all done their job.
pub fn control_plane_recorded(snapshot: &Snapshot) -> bool {
    let recorded: HashSet<&str> = snapshot
        .layered
        .machine_config_nodes
        .iter()
        .filter(|mcn| has_bootstrap_record(mcn))
        .filter_map(|mcn| mcn.metadata.name.as_deref())
        .collect();
    let mut control_plane = snapshot
        .layered
        .nodes
        .iter()
        .filter(|node| super::matching::boots_from_the_bootstrap_server(node))
        .peekable();
    control_plane.peek().is_some() && control_plane.all(|node| recorded.contains(node_name(node)))
}

/// What the records writer watches besides its own records.
pub struct ExchangeInputs {
    /// The cluster source's snapshots (which records are settled).
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    /// True while this replica leads (it then removes gone replicas' keys).
    pub leading: watch::Receiver<bool>,
    /// Changes with every successful API answer (ends a backoff once per failure streak).
    pub api_successes: watch::Receiver<u64>,
    /// Whether this identity may read and write the shared object ([`Feature::SharedRecords`]).
    pub rights: Rights,
}

/// Starts the exchange: while [`Feature::SharedRecords`] is on, it watches the shared object
/// and publishes this replica's records (answers then wait for their record); while it is off,
/// nothing is read or written and answers do not wait. Returns the view of every replica's
/// records and the task (it ends on `shutdown`).
pub fn start(
    client: Client,
    settings: ExchangeSettings,
    served: ServedLog,
    inputs: ExchangeInputs,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
) -> (watch::Receiver<Arc<SharedView>>, Vec<JoinHandle<()>>) {
    let api: Api<ConfigMap> = Api::namespaced(client, &settings.namespace);
    let (view_tx, view) = watch::channel(Arc::new(SharedView::default()));
    let task = tokio::spawn(supervise(
        api, settings, served, inputs, metrics, view_tx, shutdown,
    ));
    (view, vec![task])
}

/// Runs the watch and the writer while the feature is on; stops both when it goes off.
async fn supervise(
    api: Api<ConfigMap>,
    settings: ExchangeSettings,
    served: ServedLog,
    inputs: ExchangeInputs,
    metrics: Arc<Metrics>,
    view: watch::Sender<Arc<SharedView>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let ExchangeInputs {
        snapshots,
        leading,
        api_successes,
        rights,
    } = inputs;
    let mut grants = rights.subscribe();
    loop {
        if !grants.borrow_and_update().enabled(Feature::SharedRecords) {
            tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => return,
                _ = grants.changed() => continue,
            }
        }
        let (stop_tx, stop) = watch::channel(false);
        let watch_task = tokio::spawn(watch_shared(
            api.clone(),
            settings.name.clone(),
            view.clone(),
            rights.clone(),
            stop.clone(),
        ));
        let flusher = Flusher {
            api: api.clone(),
            settings: settings.clone(),
            commit: served.commit().writer(),
            served: served.clone(),
            snapshots: snapshots.clone(),
            leading: leading.clone(),
            api_successes: api_successes.clone(),
            metrics: metrics.clone(),
            view: view.subscribe(),
            rights: rights.clone(),
            last_written: None,
        };
        let flush_task = tokio::spawn(flusher.run(stop));
        let shutting_down = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => true,
            _ = grants.wait_for(|g| !g.enabled(Feature::SharedRecords)) => false,
        };
        stop_tx.send_replace(true);
        for task in [flush_task, watch_task] {
            if let Err(error) = task.await {
                warn!(%error, "served-records task ended abnormally");
            }
        }
        // Nothing shared is known while the feature is off.
        view.send_replace(Arc::new(SharedView::default()));
        if shutting_down {
            return;
        }
    }
}

async fn watch_shared(
    api: Api<ConfigMap>,
    name: String,
    view: watch::Sender<Arc<SharedView>>,
    rights: Rights,
    mut stop: watch::Receiver<bool>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher::watcher(api, config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut listing: Option<ConfigMap> = None;
    let mut listed = false;
    loop {
        let item = tokio::select! {
            _ = stop.wait_for(|stop| *stop) => return,
            item = stream.next() => item,
        };
        let Some(item) = item else { return };
        // A re-list in progress changes nothing until it is done (no wake-up of the publisher).
        let current = match item {
            Ok(Event::Init) => {
                listing = None;
                continue;
            }
            Ok(Event::InitApply(object)) => {
                listing = Some(object);
                continue;
            }
            Ok(Event::InitDone) => {
                listed = true;
                listing.take()
            }
            Ok(Event::Apply(object)) => Some(object),
            Ok(Event::Delete(_)) => None,
            Err(error) => {
                if crate::source::cluster::watches::failure_reason(&error) == "forbidden" {
                    // Not retried: the feature is off until the rights say otherwise.
                    rights.refused(
                        Feature::SharedRecords,
                        &format!("list or watch configmaps {name:?}"),
                    );
                    return;
                }
                debug!(%error, "served-records watch interrupted; retrying with backoff");
                continue;
            }
        };
        if listed {
            view.send_replace(Arc::new(view_of(current.as_ref())));
        }
    }
}

/// The decoded content of the shared object (`None`: it does not exist).
pub fn view_of(object: Option<&ConfigMap>) -> SharedView {
    let raw: BTreeMap<String, String> = object
        .and_then(|o| o.data.clone())
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut records = PublishedRecords::new();
    let mut failures = PublishedFailures::new();
    for (replica, text) in &raw {
        match decode_all(text) {
            Ok(decoded) => {
                records.insert(replica.clone(), decoded.served);
                if !decoded.failures.is_empty() {
                    failures.insert(replica.clone(), decoded.failures);
                }
            }
            Err(error) => {
                debug!(replica = %replica, %error, "skipping served records that do not decode");
            }
        }
    }
    SharedView {
        listed: true,
        exists: object.is_some(),
        records,
        failures,
        raw,
        resource_version: object.and_then(|o| o.metadata.resource_version.clone()),
    }
}

/// Why a write of this replica's records made nothing durable.
#[derive(Debug, thiserror::Error)]
enum FlushError {
    #[error("writing the served-records ConfigMap")]
    Api(#[source] kube::Error),
    #[error("the API server did not answer the served-records write within {0:?}")]
    Timeout(Duration),
}

/// Spreads the retries of replicas that failed at the same moment (the API went away for all
/// of them) so that they do not come back in step: a retry delay becomes a pseudo-random
/// value between half and all of it ([`jittered`]).
struct Jitter(u64);

impl Jitter {
    fn new(replica: &str) -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write(replica.as_bytes());
        hasher.write_u32(std::process::id());
        Jitter(hasher.finish() | 1)
    }

    fn apply(&mut self, delay: Duration) -> Duration {
        // xorshift64: plenty for spreading retries.
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        jittered(delay, self.0)
    }
}

/// `delay` scaled by a factor between 0.5 and 1 taken from `random`.
pub fn jittered(delay: Duration, random: u64) -> Duration {
    let fraction = (random >> 11) as f64 / (1u64 << 53) as f64;
    delay.mul_f64(0.5 + 0.5 * fraction)
}

struct Flusher {
    api: Api<ConfigMap>,
    settings: ExchangeSettings,
    commit: CommitWriter,
    served: ServedLog,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    leading: watch::Receiver<bool>,
    /// Changes with every successful API answer: ends a backoff once per failure streak.
    api_successes: watch::Receiver<u64>,
    metrics: Arc<Metrics>,
    view: watch::Receiver<Arc<SharedView>>,
    /// Where a refused write (403) is reported.
    rights: Rights,
    /// What this replica's key holds, as far as it knows.
    last_written: Option<String>,
}

impl Flusher {
    async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        // Take back what this replica published before a restart, before writing anything.
        tokio::select! {
            result = self.view.wait_for(|view| view.listed) => if result.is_err() { return },
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let view = self.view.borrow().clone();
        if let Some(records) = view.records.get(&self.settings.replica) {
            info!(records = records.len(), replica = %self.settings.replica, "took back the served records this replica published before it restarted");
            self.served.restore(records.clone());
        }
        if let Some(failures) = view.failures.get(&self.settings.replica) {
            info!(failures = failures.len(), replica = %self.settings.replica, "took back the failure reports this replica published before it restarted");
            self.served.restore_failures(failures.clone());
        }
        self.last_written = Some(
            view.raw
                .get(&self.settings.replica)
                .cloned()
                .unwrap_or_else(|| encode(&[], 1, usize::MAX).0),
        );
        let mut failures = 0u32;
        // Once per failure streak, a successful API answer ends the backoff early.
        let mut early_retry = false;
        let mut last_start = Instant::now();
        let mut not_before = Instant::now();
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING_INTERVAL);
        housekeeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut jitter = Jitter::new(&self.settings.replica);
        loop {
            // Work: records not yet durable (a failed write leaves them so), a new record, or
            // the housekeeping tick.
            let mut tidy = false;
            if self.served.recorded() <= self.commit.durable() {
                tokio::select! {
                    _ = self.commit.pending() => {}
                    _ = housekeeping.tick() => tidy = true,
                    _ = shutdown.wait_for(|stop| *stop) => break,
                }
            }
            // At most one write per flush interval; later while backing off, unless the API
            // answers successfully again (once per failure streak: a write that fails for
            // its own reasons, e.g. 422, keeps its backoff). Sooner when waiting cannot make
            // the batch larger: every open connection waits for this write, and it carries at
            // least EARLY_BATCH records (crate::server::commit; never while backing off). A
            // housekeeping pass waits like a write: a burst that arrives meanwhile goes early
            // with it (holding the burst to the interval instead, once a second, made one
            // batch in ten wait twice as long in the cluster rows' new-address load).
            self.api_successes.mark_unchanged();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(not_before) => break,
                    _ = self.commit.everyone_waits(EARLY_BATCH), if failures == 0 => {
                        debug!("every open connection waits for the served records: writing them now");
                        break;
                    }
                    changed = self.api_successes.changed(), if early_retry => {
                        if changed.is_err() {
                            early_retry = false;
                            continue;
                        }
                        early_retry = false;
                        not_before = last_start + self.settings.flush_interval;
                        debug!("the API answers again; writing the pending served records now");
                    }
                    _ = shutdown.wait_for(|stop| *stop) => break,
                }
            }
            if *shutdown.borrow() {
                break;
            }
            // Writes start a flush interval apart. They reach the API server a few
            // milliseconds apart more or less (a slow write then a fast one): spacing them from
            // the end of the previous write instead would add its duration to the wait of every
            // answer in a storm.
            last_start = Instant::now();
            not_before = last_start + self.settings.flush_interval;
            let result = match tokio::time::timeout(WRITE_TIMEOUT, self.flush(tidy)).await {
                Ok(result) => result.map_err(FlushError::Api),
                Err(_) => Err(FlushError::Timeout(WRITE_TIMEOUT)),
            };
            match result {
                Ok(()) => {
                    failures = 0;
                    early_retry = false;
                }
                Err(FlushError::Api(kube::Error::Api(status))) if status.code == 403 => {
                    // Not retried: the feature is off until the rights say otherwise, and the
                    // supervisor stops this writer.
                    self.rights.refused(
                        Feature::SharedRecords,
                        &format!("create or patch configmaps {:?}", self.settings.name),
                    );
                    return;
                }
                Err(error) => {
                    early_retry = failures == 0;
                    failures = failures.saturating_add(1);
                    let delay = jitter.apply(
                        self.settings
                            .retry_initial
                            .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
                            .min(self.settings.retry_max),
                    );
                    not_before = not_before.max(Instant::now() + delay);
                    let pending = self.served.recorded().saturating_sub(self.commit.durable());
                    warn!(error = %ErrorChain(&error), pending, retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), "could not publish this replica's served records; they stay in memory");
                }
            }
        }
        // A last write on the way out, so that a restart finds everything this replica served.
        // The listeners are still draining: answers that finish now are recorded after it, so
        // the writer goes on until the serving ports' last connection has closed (within the
        // drain bound), writing each new record as it comes, then once more.
        let drained = self.commit.connections_closed();
        tokio::pin!(drained);
        let mut closed = false;
        let drain_deadline = Instant::now() + self.settings.drain_bound;
        loop {
            let deadline =
                (Instant::now() + crate::server::commit::DEFAULT_WAIT_BOUND).min(drain_deadline);
            match tokio::time::timeout_at(deadline, self.flush(true)).await {
                Ok(Ok(())) if self.served.recorded() > self.commit.durable() => {
                    tokio::time::sleep(self.settings.flush_interval).await;
                }
                Ok(Ok(())) if !closed => {
                    tokio::select! {
                        () = self.commit.pending() => {}
                        () = &mut drained => closed = true,
                        () = tokio::time::sleep_until(drain_deadline) => break,
                    }
                }
                Ok(Ok(())) | Err(_) => break,
                Ok(Err(error)) => {
                    debug!(error = %ErrorChain(&error), "final write of the served records failed");
                    break;
                }
            }
        }
    }

    /// Writes this replica's key if it changed; then every record numbered so far is durable.
    /// With `tidy`, first forgets settled and expired records and, on the leader, removes
    /// gone replicas' keys.
    async fn flush(&mut self, tidy: bool) -> Result<(), kube::Error> {
        let now = self.served.clock().now();
        if tidy {
            self.forget_done(now);
            if *self.leading.borrow() {
                self.remove_stale_keys(now).await?;
            }
        }
        let WriteSet {
            served: entries,
            failures,
            count,
        } = self.served.write_set();
        let (text, records) = encode_with_failures(
            &entries,
            &failures,
            self.settings.max_entries,
            self.settings.max_bytes,
        );
        if self.last_written.as_deref() == Some(text.as_str()) {
            self.commit.committed(count);
            return Ok(());
        }
        let started = Instant::now();
        let result = self.write(&text).await;
        match &result {
            Ok(()) => {
                debug!(
                    records,
                    bytes = text.len(),
                    took_ms = started.elapsed().as_millis(),
                    "published this replica's served records"
                );
                self.metrics.mcn_records("published", "", 1);
                self.last_written = Some(text);
                self.commit.committed(count);
            }
            Err(_) => self.metrics.mcn_records("publish_failed", "", 1),
        }
        result
    }

    /// Forgets settled and expired records.
    fn forget_done(&self, now: SystemTime) {
        let snapshot = self.snapshots.borrow().clone();
        let ttl = self.settings.ttl;
        // Generation 0 is the empty snapshot before the caches synced: nothing is settled yet.
        let settled_here = if snapshot.generation > 0 {
            settled_addresses(&snapshot)
        } else {
            HashMap::new()
        };
        let mut expired = 0;
        let mut settled_count = 0;
        self.served.retain(|address, record| {
            if now
                .duration_since(record.served_at)
                .is_ok_and(|age| age > ttl)
            {
                expired += 1;
                return false;
            }
            if settled(address, record, &settled_here) {
                settled_count += 1;
                return false;
            }
            true
        });
        // A failure report owes an Event as well as its MCN's annotations, and only the lease
        // holder knows whether it told the Event (a leader SIGKILLed with it queued, or one
        // whose queue was full, never did): so a report stays until its TTL, even once its
        // MCN carries it, for a later leader to tell (a 409 where it was told). Reports are
        // few and bounded to half the value's bytes.
        self.served.retain_failures(|_, failure| {
            let expired_now = now
                .duration_since(failure.reported_at)
                .is_ok_and(|age| age > ttl);
            expired += u64::from(expired_now);
            !expired_now
        });
        self.metrics.mcn_records("expired", "", expired);
        self.metrics.mcn_records("settled", "", settled_count);
    }

    /// Removes the keys of replicas that are gone ([`stale_keys`]) with a merge patch guarded by
    /// the object's resourceVersion as the watch showed it, so a replica that wrote in the
    /// meantime (409) keeps its key; the next pass decides again.
    async fn remove_stale_keys(&self, now: SystemTime) -> Result<(), kube::Error> {
        let view = self.view.borrow().clone();
        let Some(version) = view.resource_version.clone() else {
            return Ok(());
        };
        let snapshot = self.snapshots.borrow().clone();
        let control_plane_recorded = snapshot.generation > 0 && control_plane_recorded(&snapshot);
        for (key, _) in stale_keys(
            &view,
            &self.settings.replica,
            now,
            self.settings.ttl,
            control_plane_recorded,
        ) {
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": version},
                "data": {key.as_str(): null},
            });
            let params = PatchParams {
                field_manager: Some(self.settings.field_manager()),
                ..PatchParams::default()
            };
            match self
                .api
                .patch(&self.settings.name, &params, &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    info!(replica = %key, "removed the served records of a replica that is gone (all expired)");
                    self.metrics.mcn_records("stale_replica_removed", "", 1);
                }
                // Changed since (the replica is back) or removed already: the next pass decides.
                Err(kube::Error::Api(status)) if matches!(status.code, 409 | 404) => return Ok(()),
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Applies this replica's key. An apply that creates the ConfigMap is authorized as a
    /// `create` as well as a `patch` (RBAC can limit `patch` by name, not `create`), so one
    /// request does both: replicas starting together each write once, never a create that
    /// loses the race (409) and an apply right after it.
    async fn write(&self, text: &str) -> Result<(), kube::Error> {
        apply_key(&self.api, &self.settings, text).await
    }
}

/// Applies `text` as `settings.replica`'s key of the shared ConfigMap under that key's own
/// field manager (creating the object when it is missing), so that writers never conflict.
pub async fn apply_key(
    api: &Api<ConfigMap>,
    settings: &ExchangeSettings,
    text: &str,
) -> Result<(), kube::Error> {
    let name = &settings.name;
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": settings.namespace},
        "data": {settings.replica.as_str(): text},
    });
    let params = PatchParams::apply(&settings.field_manager()).force();
    api.patch(name, &params, &Patch::Apply(&body))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests;
