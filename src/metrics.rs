//! What the server reports about itself: the Prometheus registry ([`Metrics`]) and the per-pool
//! status board ([`PoolStatusBoard`]), both served only on the admin (metrics) listener.
//!
//! Owns: metric names, types, label sets and their cardinality bounds; the status board's
//! shape. Must not touch: HTTP, the Kubernetes API, the file system. Both types are created once
//! at start-up and shared through `Arc` handles in the application state, never as globals.
//!
//! Label cardinality is bounded by construction:
//! - the `pool` label is a [`PoolLabel`]: the name of a pool that exists, or the fixed value
//!   [`PoolLabel::UNKNOWN`]; and as a second guard, at most [`MAX_POOL_LABELS`] distinct pool
//!   names are ever admitted, later ones are reported as [`PoolLabel::OTHER`];
//! - every other label value is a `&'static str` chosen by the code (error kinds, decisions,
//!   reasons, resource kinds, results), a [`SpecVersion`], or an HTTP status code.
//!
//! `docs/operations.md` lists every metric; keep it in step with [`Metrics::new`].

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use serde::Serialize;

use crate::ignition::SpecVersion;

/// Most distinct pool names a metric or the status board will carry. A cluster has a handful
/// of pools; this only bounds the damage a caller bug or pool churn could do.
pub const MAX_POOL_LABELS: usize = 64;

/// Upper bounds (seconds) of the request latency histogram: 0.1 ms to 10 s. A cached payload is
/// served in well under a millisecond; a first render of a large config takes milliseconds.
pub const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Version label of requests that never got a spec version (bad Accept header, 405, ...).
pub const NO_VERSION: &str = "none";

/// The value of a `pool` label: the name of an existing pool, or a fixed stand-in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PoolLabel(PoolLabelInner);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum PoolLabelInner {
    Known(String),
    Unknown,
}

impl PoolLabel {
    /// Label of every request for a pool that does not exist (any name a client sends).
    pub const UNKNOWN: &'static str = "<unknown>";
    /// Label of existing pools beyond the first [`MAX_POOL_LABELS`] distinct names.
    pub const OTHER: &'static str = "<other>";

    /// `name` when the pool exists (the caller checked the snapshot), else [`Self::UNKNOWN`].
    pub fn new(name: &str, exists: bool) -> Self {
        if exists {
            Self::known(name)
        } else {
            Self::unknown()
        }
    }

    /// A pool the caller knows exists.
    pub fn known(name: &str) -> Self {
        PoolLabel(PoolLabelInner::Known(name.to_owned()))
    }

    /// A pool that does not exist (or a request that named none).
    pub fn unknown() -> Self {
        PoolLabel(PoolLabelInner::Unknown)
    }

    /// The pool name, if it names an existing pool.
    pub fn name(&self) -> Option<&str> {
        match &self.0 {
            PoolLabelInner::Known(name) => Some(name),
            PoolLabelInner::Unknown => None,
        }
    }
}

/// Remembers which pool names have been admitted as label values, up to a cap.
#[derive(Debug)]
struct PoolAdmission {
    cap: usize,
    admitted: Mutex<HashSet<String>>,
}

impl PoolAdmission {
    fn new(cap: usize) -> Self {
        PoolAdmission {
            cap,
            admitted: Mutex::new(HashSet::new()),
        }
    }

    /// The label value to use for `pool`.
    fn label(&self, pool: &PoolLabel) -> String {
        let Some(name) = pool.name() else {
            return PoolLabel::UNKNOWN.to_owned();
        };
        let mut admitted = self.admitted.lock().unwrap_or_else(PoisonError::into_inner);
        if admitted.contains(name) {
            return name.to_owned();
        }
        if admitted.len() < self.cap {
            admitted.insert(name.to_owned());
            return name.to_owned();
        }
        PoolLabel::OTHER.to_owned()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    pool: String,
    version: &'static str,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolOnly {
    pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LayeredLabels {
    pool: String,
    decision: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    payload_version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// Labels of `mcs_firstboot_failures_total`: the stage is one of a fixed set (or `other`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    pool: String,
    stage: &'static str,
}

/// Labels of the Ignition client metrics: `MAJOR.MINOR`, `other` or `unknown` (bounded by
/// [`crate::ignition::client::IgnitionRelease::minor_label`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IgnitionLabel {
    ignition_version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    pool: String,
    ignition_version: String,
}

/// Labels of `mcs_tls_crypto_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CryptoLabels {
    provider: String,
    library: String,
    fips: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The Prometheus registry and typed handles to every metric in it (prefix `mcs_`).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pools: PoolAdmission,
    requests: Family<RequestLabels, Counter>,
    request_duration: HistogramFamily<PoolOnly>,
    response_bytes: Family<PoolOnly, Counter>,
    render_errors: Family<KindLabel, Counter>,
    cache_hits: Counter,
    cache_misses: Counter,
    layered_decisions: Family<LayeredLabels, Counter>,
    tls_handshake_failures: Counter,
    cert_reloads: Family<ResultLabel, Counter>,
    cert_expiry: Gauge<i64>,
    watch_restarts: Family<KindLabel, Counter>,
    last_sync: Family<KindLabel, Gauge<i64>>,
    api_reachable: Gauge<i64>,
    mcn_publish: Family<ResultLabel, Counter>,
    mcn_records: Family<RecordLabels, Counter>,
    mcn_records_merged: Gauge<i64>,
    served_before_durable: Counter,
    build: Family<BuildLabels, Gauge<i64>>,
    crypto: Family<CryptoLabels, Gauge<i64>>,
    ready: Gauge<i64>,
    kube_events: Family<ResultLabel, Counter>,
    layered_held_since: Family<PoolOnly, Gauge<i64>>,
    held_pools: Mutex<BTreeSet<String>>,
    proxy_protocol: Family<OutcomeLabel, Counter>,
    firstboot_failures: Family<FailureLabels, Counter>,
    firstboot_failure_last: Family<FailureLabels, Gauge<i64>>,
    node_failure_reports: Family<ResultLabel, Counter>,
    ignition_clients: Family<IgnitionLabel, Counter>,
    ignition_refusals: Family<RefusalLabels, Counter>,
    features: Family<FeatureLabel, Gauge<i64>>,
}

/// Label of `mcs_feature_enabled`: one of `crate::rights::Feature`'s names.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeatureLabel {
    feature: &'static str,
}

/// Labels of the served-record (bootstrap record) counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecordLabels {
    event: &'static str,
    reason: &'static str,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered, pool labels capped at [`MAX_POOL_LABELS`].
    pub fn new() -> Self {
        Self::with_pool_cap(MAX_POOL_LABELS)
    }

    /// As [`Metrics::new`] with a different cap on distinct pool names (for tests).
    pub fn with_pool_cap(cap: usize) -> Self {
        let mut registry = Registry::with_prefix("mcs");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Config requests by pool, served Ignition spec version and HTTP status code",
            requests.clone(),
        );
        let request_duration: HistogramFamily<PoolOnly> =
            Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "request_duration",
            "Time from request received to the answer ready (a new machine's answer: its served record durable), by pool",
            Unit::Seconds,
            request_duration.clone(),
        );
        let response_bytes = Family::<PoolOnly, Counter>::default();
        registry.register_with_unit(
            "response",
            "Response body bytes served, by pool",
            Unit::Bytes,
            response_bytes.clone(),
        );
        let render_errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "render_errors",
            "Failed renders by error kind",
            render_errors.clone(),
        );
        // Present from the start at 0 (a panel of failures by kind reads 0, not "no data").
        for kind in RENDER_ERROR_KINDS {
            let _ = render_errors.get_or_create(&KindLabel { kind });
        }
        let cache_hits = Counter::default();
        registry.register(
            "cache_hits",
            "Payload cache lookups answered from the cache",
            cache_hits.clone(),
        );
        let cache_misses = Counter::default();
        registry.register(
            "cache_misses",
            "Payload cache lookups that had to render",
            cache_misses.clone(),
        );
        let layered_decisions = Family::<LayeredLabels, Counter>::default();
        registry.register(
            "layered_decisions",
            "Layered-image decisions by pool, decision and reason",
            layered_decisions.clone(),
        );
        let tls_handshake_failures = Counter::default();
        registry.register(
            "tls_handshake_failures",
            "TLS handshakes that failed on the secure port",
            tls_handshake_failures.clone(),
        );
        let cert_reloads = Family::<ResultLabel, Counter>::default();
        registry.register(
            "certificate_reloads",
            "Serving certificate reloads by result (success, failure)",
            cert_reloads.clone(),
        );
        // Present from the start at 0, so that the first failure is an increase alerts see.
        for result in ["success", "failure"] {
            let _ = cert_reloads.get_or_create(&ResultLabel { result });
        }
        let cert_expiry = Gauge::<i64>::default();
        registry.register_with_unit(
            "serving_certificate_expiry_timestamp",
            "Expiry (notAfter) of the serving certificate in use, Unix time",
            Unit::Seconds,
            cert_expiry.clone(),
        );
        let watch_restarts = Family::<KindLabel, Counter>::default();
        registry.register(
            "watch_restarts",
            "Kubernetes watches restarted after an error, by resource kind",
            watch_restarts.clone(),
        );
        let last_sync = Family::<KindLabel, Gauge<i64>>::default();
        registry.register_with_unit(
            "last_sync_timestamp",
            "Last successful list or watch event per resource kind, Unix time",
            Unit::Seconds,
            last_sync.clone(),
        );
        let api_reachable = Gauge::<i64>::default();
        registry.register(
            "api_reachable",
            "1 when the last Kubernetes API call succeeded, else 0",
            api_reachable.clone(),
        );
        let mcn_publish = Family::<ResultLabel, Counter>::default();
        registry.register(
            "mcn_publish",
            "MachineConfigNode writes by result",
            mcn_publish.clone(),
        );
        let mcn_records = Family::<RecordLabels, Counter>::default();
        registry.register(
            "mcn_bootstrap_records",
            "Served records shared between replicas, by event: published (writes of this replica's records), publish_failed, matched and unmatched (by reason) bootstrap records written on MachineConfigNodes, expired and settled records forgotten, stale_replica_removed (a gone replica's expired key removed by the leader)",
            mcn_records.clone(),
        );
        let mcn_records_merged = Gauge::<i64>::default();
        registry.register(
            "mcn_bootstrap_records_merged",
            "Served records of every replica the MachineConfigNode publisher merged in its last pass",
            mcn_records_merged.clone(),
        );
        let served_before_durable = Counter::default();
        registry.register(
            "mcn_records_served_before_durable",
            "Config answers sent before the write carrying their served record succeeded: the API was slow or unreachable for the whole bounded wait (2 s); the record stays pending in memory and is published when the API is back",
            served_before_durable.clone(),
        );
        let build = Family::<BuildLabels, Gauge<i64>>::default();
        registry.register(
            "build_info",
            "Always 1; labels carry the server version and the release payload version",
            build.clone(),
        );
        let crypto = Family::<CryptoLabels, Gauge<i64>>::default();
        registry.register(
            "tls_crypto_info",
            "Always 1; labels carry the TLS crypto provider (ring or openssl), its library and \
             whether FIPS mode is on",
            crypto.clone(),
        );
        let ready = Gauge::<i64>::default();
        registry.register(
            "ready",
            "1 when config requests can be answered (cluster mode: every watch cache synced), else 0",
            ready.clone(),
        );
        let layered_held_since = Family::<PoolOnly, Gauge<i64>>::default();
        registry.register_with_unit(
            "layered_held_since_timestamp",
            "Layered pools serving their base image although a build of their rendered config \
             succeeded, because no node of the pool has validated it: when the first such build \
             succeeded, Unix time",
            Unit::Seconds,
            layered_held_since.clone(),
        );
        let kube_events = Family::<ResultLabel, Counter>::default();
        registry.register(
            "events",
            "Kubernetes Events written by the lease holder, by result (published, failed, dropped)",
            kube_events.clone(),
        );
        let proxy_protocol = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "proxy_protocol_connections",
            "Connections on the serving ports with --proxy-protocol-from, by outcome: proxied (a \
             trusted balancer's header named the client), local (its own connection), or why the \
             connection was closed (untrusted_header, missing_header, malformed_header, \
             header_timeout, incomplete_header)",
            proxy_protocol.clone(),
        );
        let firstboot_failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "firstboot_failures",
            "First-boot failures machines reported (POST /v1/node-failure), by pool and stage \
             (firstboot-update, pivot, kargs, updateLayeredOS, or other)",
            firstboot_failures.clone(),
        );
        let firstboot_failure_last = Family::<FailureLabels, Gauge<i64>>::default();
        registry.register_with_unit(
            "firstboot_failure_last_timestamp",
            "When this replica last received a first-boot failure report, by pool and stage, \
             Unix time (what the alert on recent failures reads: a counter created by its first \
             failure shows no increase)",
            Unit::Seconds,
            firstboot_failure_last.clone(),
        );
        let node_failure_reports = Family::<ResultLabel, Counter>::default();
        registry.register(
            "node_failure_reports",
            "Requests to /v1/node-failure by result: accepted, invalid, too_large, \
             rate_limited, denied, method_not_allowed",
            node_failure_reports.clone(),
        );
        let ignition_clients = Family::<IgnitionLabel, Counter>::default();
        registry.register(
            "config_requests_by_ignition",
            "Config requests by the Ignition release of the client (User-Agent: \
             Ignition/<version>) as MAJOR.MINOR; other beyond 3.63, unknown when the User-Agent \
             names no Ignition release",
            ignition_clients.clone(),
        );
        let ignition_refusals = Family::<RefusalLabels, Counter>::default();
        registry.register(
            "ignition_refusals",
            "Config requests refused (503, retried by Ignition) because the client's Ignition \
             release is older than --min-ignition-version: the machine's boot image is too old",
            ignition_refusals.clone(),
        );
        let features = Family::<FeatureLabel, Gauge<i64>>::default();
        registry.register(
            "feature_enabled",
            "1 while a feature beyond the original server runs (its rights are granted), else 0, \
             by feature: layered-node-gate, mcn-publisher, shared-records, events",
            features.clone(),
        );
        Metrics {
            registry,
            pools: PoolAdmission::new(cap),
            requests,
            request_duration,
            response_bytes,
            render_errors,
            cache_hits,
            cache_misses,
            layered_decisions,
            tls_handshake_failures,
            cert_reloads,
            cert_expiry,
            watch_restarts,
            last_sync,
            api_reachable,
            mcn_publish,
            mcn_records,
            mcn_records_merged,
            served_before_durable,
            build,
            crypto,
            ready,
            kube_events,
            layered_held_since,
            held_pools: Mutex::new(BTreeSet::new()),
            proxy_protocol,
            firstboot_failures,
            firstboot_failure_last,
            node_failure_reports,
            ignition_clients,
            ignition_refusals,
            features,
        }
    }

    /// A serving-port connection under `--proxy-protocol-from` ended its intake with
    /// `outcome` (see `mcs_proxy_protocol_connections_total`).
    pub fn proxy_protocol(&self, outcome: &'static str) {
        self.proxy_protocol
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }

    /// A machine reported a first-boot failure of `pool` at `stage` (a bounded label).
    ///
    /// `reported_at` is the report's time in the cluster's clock ([`crate::clock`]), so a
    /// replica whose own clock is off does not date it minutes into the future or the past
    /// (the dashboard and `MCSFirstbootFailures` compare it with Prometheus's time).
    pub fn firstboot_failure(
        &self,
        pool: &PoolLabel,
        stage: &'static str,
        reported_at: SystemTime,
    ) {
        let labels = FailureLabels {
            pool: self.pools.label(pool),
            stage,
        };
        self.firstboot_failures.get_or_create(&labels).inc();
        let secs = reported_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.firstboot_failure_last.get_or_create(&labels).set(secs);
    }

    /// A request to `/v1/node-failure` ended with `result`.
    pub fn node_failure_report(&self, result: &'static str) {
        self.node_failure_reports
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// A config request from an Ignition client labelled `ignition_version`
    /// ([`crate::ignition::client::IgnitionRelease::label_of`]).
    pub fn ignition_client(&self, ignition_version: String) {
        self.ignition_clients
            .get_or_create(&IgnitionLabel { ignition_version })
            .inc();
    }

    /// A config request for `pool` refused for its client's too old Ignition release.
    pub fn ignition_refusal(&self, pool: &PoolLabel, ignition_version: String) {
        let pool = self.pools.label(pool);
        self.ignition_refusals
            .get_or_create(&RefusalLabels {
                pool,
                ignition_version,
            })
            .inc();
    }

    /// Whether `feature` (a `crate::rights::Feature` name) runs now.
    pub fn set_feature_enabled(&self, feature: &'static str, enabled: bool) {
        self.features
            .get_or_create(&FeatureLabel { feature })
            .set(i64::from(enabled));
    }

    /// One finished request: counts it, observes its latency and adds its body bytes.
    /// `version` is the negotiated spec version, `None` when the request never got one.
    pub fn record_request(
        &self,
        pool: &PoolLabel,
        version: Option<SpecVersion>,
        status: u16,
        elapsed: Duration,
        bytes: u64,
    ) {
        let pool = self.pools.label(pool);
        self.requests
            .get_or_create(&RequestLabels {
                pool: pool.clone(),
                version: version.map_or(NO_VERSION, SpecVersion::as_str),
                code: status,
            })
            .inc();
        let labels = PoolOnly { pool };
        self.request_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        self.response_bytes.get_or_create(&labels).inc_by(bytes);
    }

    /// A render failed; `kind` is the error's `kind()`.
    pub fn render_error(&self, kind: &'static str) {
        self.render_errors.get_or_create(&KindLabel { kind }).inc();
    }

    /// A payload was served from the cache.
    pub fn cache_hit(&self) {
        self.cache_hits.inc();
    }

    /// A payload had to be rendered.
    pub fn cache_miss(&self) {
        self.cache_misses.inc();
    }

    /// The layered-image decision for a request (e.g. decision `base_image`, reason
    /// `build_not_succeeded`).
    pub fn layered_decision(&self, pool: &PoolLabel, decision: &'static str, reason: &'static str) {
        let pool = self.pools.label(pool);
        self.layered_decisions
            .get_or_create(&LayeredLabels {
                pool,
                decision,
                reason,
            })
            .inc();
    }

    /// A TLS handshake on the secure port failed.
    pub fn tls_handshake_failure(&self) {
        self.tls_handshake_failures.inc();
    }

    /// A certificate reload was attempted; `ok` when the new certificate is now in use.
    pub fn cert_reload(&self, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.cert_reloads
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// The notAfter time of the serving certificate now in use.
    pub fn set_cert_expiry(&self, unix_secs: i64) {
        self.cert_expiry.set(unix_secs);
    }

    /// A watch of resource `kind` (e.g. `MachineConfigPool`) restarted after an error.
    pub fn watch_restart(&self, kind: &'static str) {
        self.watch_restarts.get_or_create(&KindLabel { kind }).inc();
    }

    /// Resource `kind` was successfully listed or received a watch event at `unix_secs`.
    pub fn synced(&self, kind: &'static str, unix_secs: i64) {
        self.last_sync
            .get_or_create(&KindLabel { kind })
            .set(unix_secs);
    }

    /// Whether the last call to the Kubernetes API succeeded.
    pub fn set_api_reachable(&self, reachable: bool) {
        self.api_reachable.set(i64::from(reachable));
    }

    /// A MachineConfigNode write finished with `result` (e.g. `created`, `updated`, `conflict`,
    /// `error`).
    pub fn mcn_publish(&self, result: &'static str) {
        self.mcn_publish
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// `count` served-record events (`reason` empty unless `event` is `unmatched`).
    pub fn mcn_records(&self, event: &'static str, reason: &'static str, count: u64) {
        if count > 0 {
            self.mcn_records
                .get_or_create(&RecordLabels { event, reason })
                .inc_by(count);
        }
    }

    /// A config answer went out before its served record was durable.
    pub fn served_before_durable(&self) {
        self.served_before_durable.inc();
    }

    /// How many served records the publisher merged in its last pass.
    pub fn set_mcn_records_merged(&self, count: usize) {
        self.mcn_records_merged
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Whether config requests can be answered now (the readiness flag).
    pub fn set_ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    /// A Kubernetes Event was `published`, `failed` to be written, or `dropped` (queue full).
    pub fn kube_event(&self, result: &'static str) {
        self.kube_events
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// Replaces `mcs_layered_held_since_timestamp_seconds`: one series per held pool (name to
    /// Unix seconds), none for the others. Pools are admitted as labels like every pool label.
    pub fn set_layered_held(&self, held: &BTreeMap<String, i64>) {
        let mut previous = self
            .held_pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut current = BTreeSet::new();
        for (pool, since) in held {
            let pool = self.pools.label(&PoolLabel::known(pool));
            self.layered_held_since
                .get_or_create(&PoolOnly { pool: pool.clone() })
                .set(*since);
            current.insert(pool);
        }
        for gone in previous.difference(&current) {
            self.layered_held_since
                .remove(&PoolOnly { pool: gone.clone() });
        }
        *previous = current;
    }

    /// Sets `mcs_build_info`. Called once at start-up; a second call replaces the first.
    pub fn build_info(&self, version: &str, payload_version: &str) {
        self.build.clear();
        self.build
            .get_or_create(&BuildLabels {
                version: version.to_owned(),
                payload_version: payload_version.to_owned(),
            })
            .set(1);
    }

    /// Sets `mcs_tls_crypto_info`. Called once at start-up; a second call replaces the first.
    pub fn tls_crypto(&self, provider: &str, library: &str, fips: bool) {
        self.crypto.clear();
        self.crypto
            .get_or_create(&CryptoLabels {
                provider: provider.to_owned(),
                library: library.to_owned(),
                fips: fips.to_string(),
            })
            .set(1);
    }

    /// The whole registry in the OpenMetrics text format (served as [`Self::CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an error could only come from a label encoder,
        // and every label here is a plain string or integer.
        if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %err, "encoding metrics failed");
        }
        out
    }

    /// Content type of [`Self::encode`]'s output.
    pub const CONTENT_TYPE: &'static str =
        "application/openmetrics-text; version=1.0.0; charset=utf-8";
}

/// Every `kind` label of `mcs_render_errors_total` (the values of `RenderError::kind` in
/// `render`): each is exported from the start at 0, so that a dashboard of failures by kind
/// reads "0", not "no data".
pub const RENDER_ERROR_KINDS: [&str; 9] = [
    "not_found",
    "pool_not_served",
    "unknown_pool",
    "missing_machine_config",
    "invalid_input",
    "parse",
    "kernel_arguments",
    "translate",
    "not_ready",
];

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The last error recorded for a pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LastError {
    /// The error's `kind()` (the same value as the `kind` label of `mcs_render_errors_total`).
    pub kind: &'static str,
    /// HTTP status the request got.
    pub status: u16,
    /// When it happened, Unix seconds.
    pub at_unix_secs: i64,
}

/// The layered-image decision last made for a pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayeredStatus {
    /// What was served, e.g. `layered_image` or `base_image`.
    pub decision: &'static str,
    /// Why, e.g. `build_not_succeeded` (the same values as the metric's labels).
    pub reason: &'static str,
    /// The image pull spec served, when one was.
    pub image: Option<String>,
    /// When the decision was made, Unix seconds.
    pub at_unix_secs: i64,
}

/// What the status page shows for one pool. Holds names, versions, kinds and times only:
/// never file contents, kubeconfigs, tokens or payload bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolStatus {
    /// Rendered MachineConfig last served for this pool.
    pub rendered_config: Option<String>,
    /// Every spec version served for this pool since start, oldest first.
    #[serde(serialize_with = "serialize_versions")]
    pub spec_versions_served: BTreeSet<SpecVersion>,
    /// Requests answered for this pool since start (any status).
    pub requests: u64,
    /// Status code of the last request for this pool.
    pub last_status: Option<u16>,
    /// When the last request for this pool was answered, Unix seconds.
    pub last_request_unix_secs: Option<i64>,
    /// The last failed request's error.
    pub last_error: Option<LastError>,
    /// The last layered-image decision (cluster mode, layered pools).
    pub layered: Option<LayeredStatus>,
}

fn serialize_versions<S: serde::Serializer>(
    versions: &BTreeSet<SpecVersion>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(versions.iter().map(|v| v.as_str()))
}

/// How many first-boot failure reports `/status` lists (the newest).
pub const RECENT_FAILURES: usize = 20;

/// A first-boot failure a machine reported, as `/status` lists it: the sanitized report
/// (the message cut and its secrets redacted, the image reduced to its registry host).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailureStatus {
    /// The address the report came from (the machine's, behind a PROXY protocol balancer too).
    pub address: String,
    pub pool: String,
    pub node_id: String,
    pub stage: String,
    pub message: String,
    pub image: String,
    /// When it was received, Unix seconds.
    pub at_unix_secs: i64,
}

/// Per-pool status, updated by whoever learns something about a pool (the request handler,
/// the layered decision) and read by the admin `/status` page, with the latest first-boot
/// failure reports. Cheap to clone (`Arc`s). Only existing pools ([`PoolLabel::known`]) get an
/// entry, at most [`MAX_POOL_LABELS`]; at most [`RECENT_FAILURES`] reports are kept.
#[derive(Clone, Debug)]
pub struct PoolStatusBoard {
    cap: usize,
    pools: Arc<RwLock<BTreeMap<String, PoolStatus>>>,
    failures: Arc<Mutex<VecDeque<FailureStatus>>>,
}

impl Default for PoolStatusBoard {
    fn default() -> Self {
        Self::new()
    }
}

impl PoolStatusBoard {
    /// An empty board holding at most [`MAX_POOL_LABELS`] pools.
    pub fn new() -> Self {
        Self::with_cap(MAX_POOL_LABELS)
    }

    /// An empty board holding at most `cap` pools.
    pub fn with_cap(cap: usize) -> Self {
        PoolStatusBoard {
            cap,
            pools: Arc::new(RwLock::new(BTreeMap::new())),
            failures: Arc::new(Mutex::new(VecDeque::new())),
        }
    }

    /// Applies `change` to the pool's entry (created on first use). Does nothing for unknown
    /// pools or when the board is full. The lock is held only while `change` runs: keep it short.
    pub fn update(&self, pool: &PoolLabel, change: impl FnOnce(&mut PoolStatus)) {
        let Some(name) = pool.name() else { return };
        let mut pools = self.pools.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(status) = pools.get_mut(name) {
            change(status);
        } else if pools.len() < self.cap {
            change(pools.entry(name.to_owned()).or_default());
        }
    }

    /// A request for the pool was answered. `rendered_config` is the MC served (on success).
    pub fn record_served(
        &self,
        pool: &PoolLabel,
        version: Option<SpecVersion>,
        status: u16,
        rendered_config: Option<&str>,
    ) {
        let now = unix_now();
        self.update(pool, |entry| {
            entry.requests = entry.requests.saturating_add(1);
            entry.last_status = Some(status);
            entry.last_request_unix_secs = Some(now);
            if (200..300).contains(&status) {
                if let Some(version) = version {
                    entry.spec_versions_served.insert(version);
                }
            }
            if let Some(name) = rendered_config {
                if entry.rendered_config.as_deref() != Some(name) {
                    entry.rendered_config = Some(name.to_owned());
                }
            }
        });
    }

    /// A request for the pool failed with error `kind` and HTTP `status`.
    pub fn record_error(&self, pool: &PoolLabel, kind: &'static str, status: u16) {
        let now = unix_now();
        self.update(pool, |entry| {
            entry.last_error = Some(LastError {
                kind,
                status,
                at_unix_secs: now,
            });
        });
    }

    /// The layered-image decision made for the pool.
    pub fn record_layered(
        &self,
        pool: &PoolLabel,
        decision: &'static str,
        reason: &'static str,
        image: Option<&str>,
    ) {
        let now = unix_now();
        self.update(pool, |entry| {
            entry.layered = Some(LayeredStatus {
                decision,
                reason,
                image: image.map(str::to_owned),
                at_unix_secs: now,
            });
        });
    }

    /// Drops the entries of pools for which `exists` is false (call when pools are deleted).
    pub fn retain(&self, mut exists: impl FnMut(&str) -> bool) {
        let mut pools = self.pools.write().unwrap_or_else(PoisonError::into_inner);
        pools.retain(|name, _| exists(name));
    }

    /// A machine reported a first-boot failure (kept among the newest [`RECENT_FAILURES`]).
    pub fn record_failure(&self, failure: FailureStatus) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures.push_front(failure);
        failures.truncate(RECENT_FAILURES);
    }

    /// The newest first-boot failure reports, newest first.
    pub fn failures(&self) -> Vec<FailureStatus> {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// A copy of every entry, by pool name.
    pub fn snapshot(&self) -> BTreeMap<String, PoolStatus> {
        self.pools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_render_error_kind_reads_zero_before_the_first_failure() {
        let text = Metrics::new().encode();
        for kind in RENDER_ERROR_KINDS {
            let line = format!("mcs_render_errors_total{{kind=\"{kind}\"}} 0");
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
    }

    #[test]
    fn a_failure_report_is_dated_in_the_time_it_is_given() {
        let metrics = Metrics::new();
        // A replica whose clock runs 300 s ahead dates the report in the cluster's time.
        let cluster_time = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        metrics.firstboot_failure(
            &PoolLabel::new("worker", true),
            "firstboot-update",
            cluster_time,
        );
        let text = metrics.encode();
        assert!(
            text.lines().any(
                |l| l.starts_with("mcs_firstboot_failure_last_timestamp_seconds{")
                    && l.ends_with(" 1800000000")
            ),
            "{text}"
        );
    }

    #[test]
    fn unknown_pools_share_one_label() {
        let admission = PoolAdmission::new(2);
        assert_eq!(admission.label(&PoolLabel::new("x", false)), "<unknown>");
        assert_eq!(admission.label(&PoolLabel::new("y", false)), "<unknown>");
    }

    #[test]
    fn known_pools_beyond_the_cap_become_other() {
        let admission = PoolAdmission::new(2);
        assert_eq!(admission.label(&PoolLabel::known("master")), "master");
        assert_eq!(admission.label(&PoolLabel::known("worker")), "worker");
        assert_eq!(admission.label(&PoolLabel::known("infra")), "<other>");
        // Admitted names stay admitted.
        assert_eq!(admission.label(&PoolLabel::known("master")), "master");
    }

    #[test]
    fn board_ignores_unknown_pools_and_respects_its_cap() {
        let board = PoolStatusBoard::with_cap(1);
        board.record_served(&PoolLabel::unknown(), Some(SpecVersion::V3_4), 200, None);
        board.record_served(
            &PoolLabel::known("master"),
            Some(SpecVersion::V3_4),
            200,
            None,
        );
        board.record_served(
            &PoolLabel::known("worker"),
            Some(SpecVersion::V3_4),
            200,
            None,
        );
        let pools = board.snapshot();
        assert_eq!(pools.keys().collect::<Vec<_>>(), ["master"]);
    }

    #[test]
    fn board_records_versions_only_for_successes() {
        let board = PoolStatusBoard::new();
        let master = PoolLabel::known("master");
        board.record_served(
            &master,
            Some(SpecVersion::V3_4),
            200,
            Some("rendered-master-1"),
        );
        board.record_served(&master, Some(SpecVersion::V2_2), 500, None);
        board.record_error(&master, "translate", 500);
        let entry = &board.snapshot()["master"];
        assert_eq!(entry.requests, 2);
        assert_eq!(entry.last_status, Some(500));
        assert_eq!(
            entry.spec_versions_served.iter().collect::<Vec<_>>(),
            [&SpecVersion::V3_4]
        );
        assert_eq!(entry.rendered_config.as_deref(), Some("rendered-master-1"));
        assert_eq!(entry.last_error.as_ref().map(|e| e.kind), Some("translate"));
    }
}
