//! MachineConfigNode publisher (cluster mode): when a machine that booted from this server joins
//! as a Node, its MachineConfigNode (MCN) exists within moments, with the bootstrap record of
//! what it was served.
//!
//! # Shape
//! What the `/config` handler records lives beside it, in the server: the served-request log
//! ([`crate::server::served`]) and the group commit it waits on ([`crate::server::commit`]).
//! Here:
//! - [`exchange`]: every replica publishes its records to one shared ConfigMap (batched,
//!   bounded) and reads the others' back, so the leader sees what any replica served.
//! - [`matching`]: which record belongs to which Node (pure; the rules for shared addresses).
//! - [`desired`]: the MCN, initial status and bootstrap annotations for one Node (pure).
//! - [`plan`]: which MCNs to create, fill, initialise or delete (pure).
//! - [`lease`]: Lease leader election; exactly one replica publishes at a time.
//! - [`rate`]: the write budget (`--mcn-max-writes-per-second`).
//! - [`controller`]: the leader's reconcile loop (server-side apply, backoff, metrics).
//! - [`bootstrap_records`]: bootstrap mode's records (`--served-records-kubeconfig`): the
//!   installer's bootstrap server writes what it served the control plane under a key of its
//!   own, which the cluster's Lease holder then writes on the masters' MCNs.
//!
//! # Inputs
//! The publisher reads Nodes, MCNs and MachineConfigPools from the cluster source's published
//! [`Snapshot`]s (the same watch caches the server renders from, no second set of watches), so
//! "the rendered config this server serves for a pool" is exactly what a request would get. It
//! acts only on snapshots published after every cache has synced.
//!
//! # What it writes (field manager [`FIELD_MANAGER`])
//! Only MCNs that are missing, plus `not-yet-set` fields and missing bootstrap records on MCNs
//! it created itself (marked with [`desired::annotations::CREATED_BY`]); MCNs created by anyone
//! else are left exactly as they are. The initial status is written only while an MCN has none.
//! MCNs whose Node is gone are deleted. See [`plan`] and [`controller`] for the rules. Besides,
//! every replica writes its own key of one shared ConfigMap (its served records, under its own
//! field manager; see [`exchange`]).
//!
//! # Several replicas
//! Every replica (leader or not) publishes what it served through [`exchange`]; the leader
//! merges every replica's records with its own memory and matches them to Nodes
//! ([`matching`]). A load balancer that rewrites source addresses defeats the match: such
//! records never name a node (see [`matching`] for when the MCN says "source unknown").
//!
//! Must not touch: the snapshot or its sources. The request path waits on it in one place only:
//! an answer waits, at most [`crate::server::commit::DEFAULT_WAIT_BOUND`], for the batched
//! write ([`exchange`]) that carries its record; it never calls the API itself.

pub mod bootstrap_records;
pub mod controller;
pub mod desired;
pub mod exchange;
pub mod lease;
pub mod matching;
pub mod plan;
pub mod rate;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
#[cfg(doc)]
use crate::rights::Feature;
use crate::server::notices::EventNotices;
use crate::server::served::ServedLog;
use crate::snapshot::Snapshot;
use crate::source::cluster::rights::Rights;

pub use controller::ReconcileSettings;
pub use exchange::ExchangeSettings;
pub use lease::LeaseSettings;

/// The server-side apply field manager of every MCN write.
pub const FIELD_MANAGER: &str = "machine-config-server-mcn";

/// Environment variables that shorten the publisher's timing (for tests; start-up glue reads
/// them, the publisher itself never reads the environment). Values are milliseconds.
pub const ENV_LEASE_DURATION_MS: &str = "MCS_MCN_LEASE_DURATION_MS";
pub const ENV_RENEW_PERIOD_MS: &str = "MCS_MCN_RENEW_PERIOD_MS";
pub const ENV_RENEW_DEADLINE_MS: &str = "MCS_MCN_RENEW_DEADLINE_MS";
pub const ENV_RETRY_PERIOD_MS: &str = "MCS_MCN_RETRY_PERIOD_MS";
pub const ENV_RESYNC_MS: &str = "MCS_MCN_RESYNC_MS";
pub const ENV_DELETE_GRACE_MS: &str = "MCS_MCN_DELETE_GRACE_MS";
/// Shortest time between two writes of this replica's served records (default 200 ms: at most
/// five writes a second).
pub const ENV_RECORDS_FLUSH_MS: &str = "MCS_MCN_RECORDS_FLUSH_MS";
/// How long a served record is kept when its node never joins.
pub const ENV_RECORDS_TTL_MS: &str = "MCS_MCN_RECORDS_TTL_MS";
/// This replica's stable name for its served records (the DaemonSet passes `spec.nodeName`);
/// without it the pod or host name is used.
pub const ENV_NODE_NAME: &str = "NODE_NAME";

/// Why the publisher's settings are unusable (a settings error: the server does not start).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("{variable}={value:?}: expected a positive number of milliseconds")]
    NotMilliseconds {
        variable: &'static str,
        value: String,
    },
    #[error("{ENV_RENEW_DEADLINE_MS} must be shorter than {ENV_LEASE_DURATION_MS}: the leader must stop before its lease can expire")]
    RenewDeadlineNotShorter,
}

impl SettingsError {
    /// A short label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotMilliseconds { .. } => "not_milliseconds",
            Self::RenewDeadlineNotShorter => "renew_deadline_not_shorter",
        }
    }
}

/// Everything the publisher needs to know before it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublisherSettings {
    pub lease: LeaseSettings,
    pub reconcile: ReconcileSettings,
    pub records: ExchangeSettings,
}

impl PublisherSettings {
    /// Defaults for a replica named `identity` (host or pod name plus process id) whose served
    /// records are published under `replica` (its node's name, stable across restarts).
    pub fn new(identity: impl Into<String>, replica: &str) -> Self {
        PublisherSettings {
            lease: LeaseSettings::new(identity),
            reconcile: ReconcileSettings::default(),
            records: ExchangeSettings::new(replica),
        }
    }

    /// The settings of this replica as `machine-config-server start` runs it: its identity
    /// (`host`: the pod or machine name), its records' name ([`ENV_NODE_NAME`] found by `env`,
    /// else `host`), its write budget (`--mcn-max-writes-per-second`) and the `MCS_MCN_*_MS`
    /// timing overrides found by `env` (start-up glue passes `|k| std::env::var(k).ok()`).
    pub fn for_replica(
        host: &str,
        max_writes_per_second: std::num::NonZeroU32,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SettingsError> {
        let node = env(ENV_NODE_NAME).filter(|name| !name.trim().is_empty());
        let replica = node.as_deref().unwrap_or(host);
        let mut settings = PublisherSettings::new(identity(host), replica).with_overrides(env)?;
        settings.reconcile.max_writes_per_second = max_writes_per_second;
        Ok(settings)
    }

    /// Applies the `MCS_MCN_*_MS` overrides found by `lookup` (e.g. `std::env::var`). A value
    /// that is not a positive number of milliseconds is an error naming the variable.
    pub fn with_overrides(
        mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SettingsError> {
        let millis = |variable: &'static str| -> Result<Option<Duration>, SettingsError> {
            match lookup(variable) {
                None => Ok(None),
                Some(value) => match value.trim().parse::<u64>() {
                    Ok(ms) if ms > 0 => Ok(Some(Duration::from_millis(ms))),
                    _ => Err(SettingsError::NotMilliseconds { variable, value }),
                },
            }
        };
        if let Some(d) = millis(ENV_LEASE_DURATION_MS)? {
            self.lease.lease_duration = d;
        }
        if let Some(d) = millis(ENV_RENEW_PERIOD_MS)? {
            self.lease.renew_period = d;
        }
        if let Some(d) = millis(ENV_RENEW_DEADLINE_MS)? {
            self.lease.renew_deadline = d;
        }
        if let Some(d) = millis(ENV_RETRY_PERIOD_MS)? {
            self.lease.retry_period = d;
        }
        if let Some(d) = millis(ENV_RESYNC_MS)? {
            self.reconcile.resync = d;
        }
        if let Some(d) = millis(ENV_DELETE_GRACE_MS)? {
            self.reconcile.delete_grace = d;
        }
        if let Some(d) = millis(ENV_RECORDS_FLUSH_MS)? {
            self.records.flush_interval = d;
        }
        if let Some(d) = millis(ENV_RECORDS_TTL_MS)? {
            self.records.ttl = d;
        }
        if self.lease.renew_deadline >= self.lease.lease_duration {
            return Err(SettingsError::RenewDeadlineNotShorter);
        }
        Ok(self)
    }
}

/// What the publisher reads and reports to: the cluster source's snapshots and readiness, the
/// request path's served records, the metrics registry and the Event notices.
#[derive(Clone)]
pub struct PublisherInputs {
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub ready: watch::Receiver<bool>,
    /// Changes with every successful API answer ([`ApiReachability::successes`]): the served
    /// records are written again as soon as the API works after a failed write.
    ///
    /// [`ApiReachability::successes`]: crate::source::cluster::ApiReachability::successes
    pub api_successes: watch::Receiver<u64>,
    pub served: ServedLog,
    pub metrics: Arc<Metrics>,
    pub events: EventNotices,
    /// Which features run ([`Feature::McnPublisher`], [`Feature::SharedRecords`], and the
    /// leader election they and the Events need).
    pub rights: Rights,
}

impl PublisherInputs {
    /// The inputs of a publisher on `source`'s caches.
    pub fn of(
        source: &crate::source::cluster::ClusterSource,
        served: ServedLog,
        metrics: Arc<Metrics>,
        events: EventNotices,
    ) -> Self {
        PublisherInputs {
            snapshots: source.snapshots.clone(),
            ready: source.ready.clone(),
            api_successes: source.reachability.successes(),
            served,
            metrics,
            events,
            rights: source.rights.clone(),
        }
    }
}

/// A running publisher.
pub struct Publisher {
    /// True while this replica holds the lease and publishes.
    pub leading: watch::Receiver<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Publisher {
    /// Waits for the election and reconcile tasks to end (after `shutdown`; the lease is
    /// released on the way out).
    pub async fn join(self) {
        for task in self.tasks {
            if let Err(error) = task.await {
                tracing::warn!(%error, "MachineConfigNode publisher task ended abnormally");
            }
        }
    }
}

/// Starts the election and the reconcile loop in the background and returns at once.
pub fn start(
    client: kube::Client,
    settings: PublisherSettings,
    inputs: PublisherInputs,
    shutdown: watch::Receiver<bool>,
) -> Publisher {
    let PublisherInputs {
        snapshots,
        ready,
        api_successes,
        served,
        metrics,
        events,
        rights,
    } = inputs;
    let (leading_tx, leading) = watch::channel(false);
    let elector = lease::Elector::new(client.clone(), settings.lease);
    let election = tokio::spawn(lease::run(
        elector,
        leading_tx,
        rights.clone(),
        shutdown.clone(),
    ));
    let (replica, ttl) = (settings.records.replica.clone(), settings.records.ttl);
    let (shared, mut tasks) = exchange::start(
        client.clone(),
        settings.records,
        served.clone(),
        exchange::ExchangeInputs {
            snapshots: snapshots.clone(),
            leading: leading.clone(),
            api_successes,
            rights: rights.clone(),
        },
        metrics.clone(),
        shutdown.clone(),
    );
    let records = controller::Records {
        replica,
        ttl,
        served,
        shared,
    };
    let reconciler =
        controller::Reconciler::new(client, records, metrics, events, rights, settings.reconcile);
    let reconcile = tokio::spawn(controller::run(
        reconciler,
        snapshots,
        ready,
        leading.clone(),
        shutdown,
    ));
    tasks.extend([election, reconcile]);
    Publisher { leading, tasks }
}

/// This replica's lease identity: `<host name>_<process id>`. `host` is the pod's or machine's
/// name (start-up glue reads it); an empty one falls back to `unknown`.
pub fn identity(host: &str) -> String {
    let host = host.trim();
    let host = if host.is_empty() { "unknown" } else { host };
    format!("{host}_{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn overrides_shorten_the_timing() {
        let env: HashMap<&str, &str> = HashMap::from([
            (ENV_LEASE_DURATION_MS, "2000"),
            (ENV_RENEW_PERIOD_MS, "300"),
            (ENV_RENEW_DEADLINE_MS, "1200"),
            (ENV_RETRY_PERIOD_MS, "200"),
            (ENV_RESYNC_MS, "500"),
        ]);
        let settings = PublisherSettings::new("me", "node-0")
            .with_overrides(|k| env.get(k).map(|v| v.to_string()))
            .unwrap();
        assert_eq!(settings.lease.lease_duration, Duration::from_secs(2));
        assert_eq!(settings.lease.renew_period, Duration::from_millis(300));
        assert_eq!(settings.lease.renew_deadline, Duration::from_millis(1200));
        assert_eq!(settings.lease.retry_period, Duration::from_millis(200));
        assert_eq!(settings.reconcile.resync, Duration::from_millis(500));
    }

    #[test]
    fn bad_overrides_name_the_variable() {
        let err = PublisherSettings::new("me", "node-0")
            .with_overrides(|k| (k == ENV_RENEW_PERIOD_MS).then(|| "soon".to_string()))
            .unwrap_err();
        assert_eq!(
            err,
            SettingsError::NotMilliseconds {
                variable: ENV_RENEW_PERIOD_MS,
                value: "soon".into()
            }
        );
        assert!(err.to_string().starts_with(ENV_RENEW_PERIOD_MS), "{err}");
        let err = PublisherSettings::new("me", "node-0")
            .with_overrides(|k| (k == ENV_RENEW_DEADLINE_MS).then(|| "20000".to_string()))
            .unwrap_err();
        assert_eq!(err, SettingsError::RenewDeadlineNotShorter);
        assert!(err.to_string().contains("shorter"), "{err}");
    }

    #[test]
    fn identity_is_host_and_pid() {
        assert_eq!(
            identity("master-0"),
            format!("master-0_{}", std::process::id())
        );
        assert_eq!(identity(" "), format!("unknown_{}", std::process::id()));
    }
}
