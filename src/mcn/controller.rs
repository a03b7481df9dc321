//! The publisher's I/O: while this replica holds the lease, it turns each new snapshot of the
//! cluster (and each change of the served records every replica shares, see [`Records`]) into a
//! [`plan`] and carries it out with server-side apply under the field manager [`FIELD_MANAGER`].
//!
//! - No read before a write: the API server's own atomicity guards each one. A create is a
//!   create (`POST`), which the API server refuses with 409 AlreadyExists when the MCN exists
//!   (the cache may lag, e.g. after its watch was cut): an MCN is never written over as if new.
//!   A fill is a merge patch of only the fields it fills, carrying the `resourceVersion` of the
//!   cached copy it was planned from as a precondition (409 Conflict when the MCN changed
//!   since): it writes over exactly the `not-yet-set` values it saw, never a value the daemon or
//!   the operator wrote meanwhile. A 409 means "plan again from the cache", never a read.
//!   Both write under the field manager [`FIELD_MANAGER`].
//! - The initial status is a separate apply on the `/status` subresource, made only while the
//!   MCN has no status (right after the create, with the generation the create returned).
//! - Writes use `fieldValidation=Strict`, so an undeclared field is an error rather than silently
//!   pruned. A rejection naming `configImage` means the CRD in use does not declare
//!   `spec.configImage`: the publisher stops writing it (the image stays in the bootstrap-record
//!   annotation) and retries at once.
//! - A write refused with 409 by another field manager's ownership (the initial status apply)
//!   is counted, logged and not retried until that MCN changes.
//! - A delete is for our own MCNs only, and only after the plan has named the MCN a deletion
//!   candidate on every pass for [`ReconcileSettings::delete_grace`] (a Node that appears after
//!   its MCN, as in scale-ups and restores, must find it intact). Then a direct read confirms
//!   that the Node with the owner's uid is gone (the cache may lag) and a direct read of the MCN
//!   confirms, from its `managedFields`, that our field manager set the creation annotation;
//!   the delete carries the MCN's uid and resourceVersion as preconditions. These two reads per
//!   deletion are the publisher's only direct reads.
//! - A failed write is logged with its cause chain, counted, and retried with per-object
//!   exponential backoff. A create whose initial status write fails is not repeated: the
//!   status is written once the cache shows the MCN without one. After a successful write the
//!   object is not acted on again until the watch cache shows the change (or a short grace
//!   period passes).
//!
//! Owns MachineConfigNode writes only. It never blocks serving: it runs in its own task, reads
//! snapshots and the shared records through `watch` channels and its own served log through a
//! short, non-async lock. A bootstrap record is known to be on an MCN at one place,
//! `Reconciler::bootstrap_written` (metrics and log; the hook for anything else that must
//! follow a record reaching its node).

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions, ValidationDirective};
use kube::{Api, Client, Resource as _};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::desired::{annotations, InitialStatus};
use super::exchange::SharedView;
use super::matching::{MergedRecords, UnknownReason};
use super::plan::{plan, Action, World};
use super::rate::{self, WriteBudget};
use super::FIELD_MANAGER;
use crate::api::machineconfignode::{MachineConfigNode, MachineConfigNodeStatus};
use crate::metrics::Metrics;
use crate::rights::Feature;
use crate::server::notices::EventNotices;
use crate::server::served::ServedLog;
use crate::snapshot::{Input, Snapshot};
use crate::source::cluster::rights::Rights;
use crate::telemetry::ErrorChain;

/// Retry and resync timing of the reconcile loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconcileSettings {
    /// First retry delay after a failed write; doubles per failure.
    pub retry_initial: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// How often the plan is re-made without a new snapshot (picks up served records for nodes
    /// that are already known).
    pub resync: Duration,
    /// How long a successful write waits for the watch cache to show it before the object may
    /// be acted on again anyway.
    pub cache_grace: Duration,
    /// How long an MCN must stay a deletion candidate (its Node absent from the cache) before it
    /// is deleted: one observation is never enough.
    pub delete_grace: Duration,
    /// At most this many API writes per second (`--mcn-max-writes-per-second`); see [`rate`].
    pub max_writes_per_second: NonZeroU32,
}

impl Default for ReconcileSettings {
    fn default() -> Self {
        ReconcileSettings {
            retry_initial: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            resync: Duration::from_secs(30),
            cache_grace: Duration::from_secs(30),
            delete_grace: Duration::from_secs(30),
            max_writes_per_second: rate::DEFAULT_MAX_WRITES_PER_SECOND,
        }
    }
}

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{action} machineconfignode/{name}: {source}")]
    Api {
        action: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl PublishError {
    /// Short, stable name used as a metric label and log field.
    pub fn kind(&self) -> &'static str {
        let PublishError::Api { source, .. } = self;
        match source {
            kube::Error::Api(status) => match status.code {
                409 => "conflict",
                404 => "not_found",
                403 | 401 => "forbidden",
                400 | 422 => "invalid",
                _ => "api_error",
            },
            kube::Error::HyperError(_) | kube::Error::Service(_) => "unreachable",
            _ => "api_error",
        }
    }

    fn status_code(&self) -> Option<u16> {
        let PublishError::Api { source, .. } = self;
        match source {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        }
    }

    /// The request that failed, as a refusal names it (`create machineconfignode/w-1`).
    fn request(&self) -> String {
        let PublishError::Api { action, name, .. } = self;
        format!("{action} machineconfignode/{name}")
    }
}

/// What a carried-out action did (the metric `result` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Created,
    Filled,
    StatusInitialized,
    Deleted,
    /// Nothing done after all: a delete found the Node still there, a create was refused
    /// because the MCN exists (409 AlreadyExists), a fill because it changed (409 Conflict).
    Skipped,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Filled => "filled",
            Outcome::StatusInitialized => "status_initialized",
            Outcome::Deleted => "deleted",
            Outcome::Skipped => "skipped",
        }
    }
}

/// What the watch cache shows once it has caught up with a write (or with what a 409 told).
#[derive(Debug)]
enum Expect {
    /// The MCN at this resourceVersion (`None`: unknown, wait for the grace period).
    Version(Option<String>),
    /// No MCN.
    Gone,
    /// Some MCN (a create was refused: it exists).
    Present,
    /// Another version than this one (a fill was refused: the MCN changed since).
    Changed(Option<String>),
}

impl Expect {
    fn seen_in(&self, cached: Option<&str>) -> bool {
        match self {
            Expect::Version(Some(version)) => cached == Some(version.as_str()),
            Expect::Version(None) => false,
            Expect::Gone => cached.is_none(),
            Expect::Present => cached.is_some(),
            Expect::Changed(seen) => cached != seen.as_deref(),
        }
    }
}

/// How long one pass may work through its plan before it plans again from the newest snapshot:
/// the most a Node that joins during a backlog waits for its turn. Wall time, whatever takes it:
/// waiting for the write budget, or the API calls themselves when the API server is slower than
/// the budget (a pass that only ended when the budget made it wait would work through a whole
/// backlog from the snapshot it started with).
const PASS_LENGTH: Duration = Duration::from_secs(1);

/// Per-object memory of the reconcile loop.
#[derive(Debug)]
enum Hold {
    /// Retry after `until` (failure number `failures`).
    Backoff { failures: u32, until: Instant },
    /// Written; wait until the cache shows the write (or until `until`).
    Written { expect: Expect, until: Instant },
    /// Conflicted with another manager; wait until the cache no longer shows `seen`.
    Conflict { seen: Option<String> },
}

/// Where the leader finds what every replica served.
pub struct Records {
    /// This replica's name (its records in `shared` are older than `served`).
    pub replica: String,
    /// Records older than this are not merged.
    pub ttl: Duration,
    /// This replica's own records.
    pub served: ServedLog,
    /// Every replica's published records (see [`super::exchange`]).
    pub shared: watch::Receiver<Arc<SharedView>>,
}

impl Records {
    /// Own memory merged with every other replica's published records (and failure
    /// reports), as of `now`.
    pub fn merged(&self, now: SystemTime) -> MergedRecords {
        let shared = self.shared.borrow().clone();
        MergedRecords::merge(
            &self.replica,
            self.served.entries(),
            &shared.records,
            now,
            self.ttl,
        )
        .with_failures(
            &self.replica,
            self.served.failures(),
            &shared.failures,
            now,
            self.ttl,
        )
    }
}

/// The reconcile loop of the leader.
pub struct Reconciler {
    client: Client,
    mcns: Api<MachineConfigNode>,
    nodes: Api<Node>,
    records: Records,
    metrics: Arc<Metrics>,
    events: EventNotices,
    /// Whether [`Feature::McnPublisher`] is on; a refused write turns it off.
    rights: Rights,
    settings: ReconcileSettings,
    config_image_declared: bool,
    holds: HashMap<String, Hold>,
    /// Deletion candidates of the plan: MCN name to (owner Node uid, first named at).
    candidates: HashMap<String, (String, Instant)>,
    warned_unpooled: BTreeSet<String>,
    budget: WriteBudget,
    /// The pass stopped for want of a write token; plan again when one is available.
    throttled_until: Option<Instant>,
}

impl Reconciler {
    pub fn new(
        client: Client,
        records: Records,
        metrics: Arc<Metrics>,
        events: EventNotices,
        rights: Rights,
        settings: ReconcileSettings,
    ) -> Self {
        Reconciler {
            mcns: Api::all(client.clone()),
            nodes: Api::all(client.clone()),
            client,
            records,
            metrics,
            events,
            rights,
            config_image_declared: true,
            holds: HashMap::new(),
            candidates: HashMap::new(),
            warned_unpooled: BTreeSet::new(),
            budget: WriteBudget::new(settings.max_writes_per_second, Instant::now()),
            throttled_until: None,
            settings,
        }
    }

    /// Runs while `leading` is true (returns when it turns false or `shutdown` turns true).
    pub async fn lead(
        &mut self,
        snapshots: &mut watch::Receiver<Arc<Snapshot>>,
        ready: &mut watch::Receiver<bool>,
        leading: &mut watch::Receiver<bool>,
        shutdown: &mut watch::Receiver<bool>,
    ) {
        // A new term: what the previous leader did is in the cache, not in our memory.
        self.holds.clear();
        self.candidates.clear();
        let mut grants = self.rights.subscribe();
        loop {
            if !*leading.borrow_and_update() || *shutdown.borrow() {
                return;
            }
            let snapshot = snapshots.borrow_and_update().clone();
            // Only on a complete view of Nodes and MCNs (the empty snapshot of generation 0,
            // or caches not synced yet, would create or delete on a partial one), and only
            // while the feature is on.
            let enabled = grants.borrow_and_update().enabled(Feature::McnPublisher);
            if enabled && *ready.borrow_and_update() && sees_nodes_and_mcns(&snapshot) {
                self.reconcile(&snapshot, leading).await;
            }
            let wake = self.next_wake();
            tokio::select! {
                _ = snapshots.changed() => {}
                _ = grants.changed() => {}
                // Another replica published records (at most once per its flush interval).
                _ = async {
                    if self.records.shared.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                } => {}
                _ = ready.changed() => {}
                _ = leading.changed() => {}
                _ = shutdown.changed() => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// One pass: plan from `snapshot` and carry out every action that is not held back.
    ///
    /// Writes spend the write budget in plan order (newest Nodes first). A pass lasts at most
    /// `PASS_LENGTH`, whether its time goes to waiting for the budget or to the API calls;
    /// then it ends, and the next one plans again from the newest snapshot (at once, or once a
    /// token is there). Planning over thousands of Nodes for every single write would cost more
    /// than the writes; once a second costs little.
    pub async fn reconcile(&mut self, snapshot: &Snapshot, leading: &watch::Receiver<bool>) {
        self.throttled_until = None;
        let world = World::from_snapshot(snapshot);
        let merged = self.records.merged(self.records.served.clock().now());
        self.metrics.set_mcn_records_merged(merged.len());
        let plan = plan(&world, &merged, self.config_image_declared);
        for (node, record) in &plan.matched {
            self.events.first_config_served(node, record);
        }
        self.events.firstboot_failures(merged.failures());
        self.warn_unpooled(&plan.unpooled);

        let cached_versions: HashMap<&str, Option<&str>> = world
            .machine_config_nodes
            .iter()
            .filter_map(|m| {
                Some((
                    m.metadata.name.as_deref()?,
                    m.metadata.resource_version.as_deref(),
                ))
            })
            .collect();
        let now = Instant::now();
        self.track_candidates(&plan.actions, now);
        // Forget holds whose object changed in the cache, or whose time is up.
        self.holds.retain(|name, hold| {
            let cached = cached_versions.get(name.as_str()).copied().flatten();
            match hold {
                Hold::Backoff { until, .. } => {
                    *until > now || plan.actions.iter().any(|a| a.name() == name)
                }
                Hold::Written { expect, until } => *until > now && !expect.seen_in(cached),
                Hold::Conflict { seen } => seen.as_deref() == cached,
            }
        });

        // The pass's clock starts after planning, and a pass carries out at least one action:
        // a plan that took long to make (a huge cluster on a loaded machine) still moves on.
        let started = Instant::now();
        let mut carried_out = 0usize;
        for action in &plan.actions {
            if !*leading.borrow() {
                return;
            }
            let name = action.name().to_owned();
            match self.holds.get(&name) {
                Some(Hold::Backoff { until, .. }) if *until > Instant::now() => continue,
                Some(Hold::Written { .. } | Hold::Conflict { .. }) => continue,
                _ => {}
            }
            if matches!(action, Action::Delete { .. }) && !self.candidate_due(&name, now) {
                continue;
            }
            // The plan is stale after a pass's length of work: plan again from the newest
            // snapshot (a Node that joined meanwhile goes first).
            if carried_out > 0 && pass_over(started, Instant::now()) {
                self.throttled_until = Some(self.budget.available_at().max(Instant::now()));
                return;
            }
            // Wait for the write budget within the pass while the plan is fresh; past that,
            // plan again once a token is there.
            let token_at = self.budget.available_at();
            if token_at > Instant::now() {
                if pass_over(started, token_at) {
                    self.throttled_until = Some(token_at);
                    return;
                }
                tokio::time::sleep_until(token_at).await;
                if !*leading.borrow() {
                    return;
                }
            }
            let seen = cached_versions
                .get(name.as_str())
                .copied()
                .flatten()
                .map(str::to_owned);
            carried_out += 1;
            match self.execute(action, seen.as_deref()).await {
                Ok((outcome, written)) => {
                    self.metrics.mcn_publish(outcome.as_str());
                    if outcome != Outcome::Skipped {
                        self.bootstrap_written(action);
                    }
                    let expect = match (outcome, action) {
                        (Outcome::Deleted, _) => Expect::Gone,
                        // A create refused (it exists): wait for the cache to show it.
                        (Outcome::Skipped, Action::Create { .. }) => Expect::Present,
                        // A fill refused (it changed): wait for the cache to show the change.
                        (Outcome::Skipped, Action::Fill { .. }) => Expect::Changed(seen),
                        (Outcome::Skipped, _) => Expect::Version(written.or(seen)),
                        _ => Expect::Version(written),
                    };
                    self.holds.insert(
                        name,
                        Hold::Written {
                            expect,
                            until: Instant::now() + self.settings.cache_grace,
                        },
                    );
                }
                Err(error) if error.status_code() == Some(403) => {
                    // Not retried: the feature is off until the rights say otherwise.
                    self.metrics.mcn_publish("error");
                    self.rights.refused(Feature::McnPublisher, &error.request());
                    return;
                }
                Err(error) if error.status_code() == Some(409) => {
                    self.metrics.mcn_publish("conflict");
                    info!(mcn = %name, action = action.kind(), error = %ErrorChain(&error), "another field manager owns these fields; leaving the MachineConfigNode as it is");
                    self.holds.insert(name, Hold::Conflict { seen });
                }
                Err(error) => {
                    self.metrics.mcn_publish("error");
                    let failures = match self.holds.get(&name) {
                        Some(Hold::Backoff { failures, .. }) => failures.saturating_add(1),
                        _ => 1,
                    };
                    let delay = backoff_delay(&self.settings, failures);
                    warn!(mcn = %name, action = action.kind(), kind = error.kind(), retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), error = %ErrorChain(&error), "could not write MachineConfigNode");
                    self.holds.insert(
                        name,
                        Hold::Backoff {
                            failures,
                            until: Instant::now() + delay,
                        },
                    );
                }
            }
        }
    }

    /// The one place a bootstrap record (or "source unknown") is known to be on a Node's MCN:
    /// right after the write that carried it succeeded.
    fn bootstrap_written(&self, action: &Action) {
        let (mcn, new_record) = match action {
            Action::Create { mcn, .. } => (mcn, true),
            Action::Fill { mcn, filled, .. } => (
                mcn,
                filled.iter().any(|f| f.starts_with("bootstrap record")),
            ),
            _ => return,
        };
        let Some(annotations) = mcn.metadata.annotations.as_ref().filter(|_| new_record) else {
            return;
        };
        if let Some(reason) = annotations.get(annotations::BOOTSTRAP_SOURCE_UNKNOWN) {
            // A label value from our own reasons only (the annotation is on the object).
            let reason = UnknownReason::parse(reason).map_or("other", UnknownReason::as_str);
            self.metrics.mcn_records("unmatched", reason, 1);
            info!(mcn = %action.name(), reason, address = annotations.get(annotations::BOOTSTRAP_ADDRESS).map(String::as_str).unwrap_or_default(), "bootstrap record source unknown: records exist for the node's address but cannot be told to be its own");
        } else if annotations.contains_key(annotations::BOOTSTRAP_SERVED_AT) {
            self.metrics.mcn_records("matched", "", 1);
            info!(
                mcn = %action.name(),
                served_by = annotations.get(annotations::BOOTSTRAP_SERVED_BY).map(String::as_str).unwrap_or_default(),
                address = annotations.get(annotations::BOOTSTRAP_ADDRESS).map(String::as_str).unwrap_or_default(),
                "bootstrap record written"
            );
        }
    }

    fn next_wake(&self) -> Instant {
        let resync = Instant::now() + self.settings.resync;
        let candidates_due = self
            .candidates
            .values()
            .map(|(_, since)| *since + self.settings.delete_grace);
        self.holds
            .values()
            .filter_map(|hold| match hold {
                Hold::Backoff { until, .. } | Hold::Written { until, .. } => Some(*until),
                Hold::Conflict { .. } => None,
            })
            .chain(candidates_due)
            .chain(self.throttled_until)
            .fold(resync, Instant::min)
    }

    /// Keeps the deletion candidates of this pass, each with the time it was first named for
    /// the same owner uid; one that drops out (its Node appeared) starts again from zero.
    fn track_candidates(&mut self, actions: &[Action], now: Instant) {
        let current: HashMap<&str, &str> = actions
            .iter()
            .filter_map(|action| match action {
                Action::Delete { name, node_uid, .. } => Some((name.as_str(), node_uid.as_str())),
                _ => None,
            })
            .collect();
        self.candidates
            .retain(|name, (uid, _)| current.get(name.as_str()) == Some(&uid.as_str()));
        for (name, uid) in current {
            self.candidates
                .entry(name.to_owned())
                .or_insert_with(|| (uid.to_owned(), now));
        }
    }

    /// True once `name` has been a deletion candidate for the whole grace period.
    fn candidate_due(&self, name: &str, now: Instant) -> bool {
        self.candidates
            .get(name)
            .is_some_and(|(_, since)| now.duration_since(*since) >= self.settings.delete_grace)
    }

    fn warn_unpooled(&mut self, unpooled: &[String]) {
        let current: BTreeSet<String> = unpooled.iter().cloned().collect();
        for node in current.difference(&self.warned_unpooled) {
            warn!(node = %node, "node belongs to no MachineConfigPool (or to several custom pools); no MachineConfigNode is created for it");
        }
        self.warned_unpooled = current;
    }

    /// Carries out one action; returns what it did and the resourceVersion it left the MCN at.
    /// `cached`: the resourceVersion of the MCN in the cache the action was planned from.
    async fn execute(
        &mut self,
        action: &Action,
        cached: Option<&str>,
    ) -> Result<(Outcome, Option<String>), PublishError> {
        match action {
            Action::Create { mcn, status } => {
                let Some(created) = self.create(mcn).await? else {
                    // It exists (the cache lags): plan again once the cache shows it.
                    debug!(mcn = %action.name(), "MachineConfigNode exists already (409: the cache lags); planning again from the cache");
                    return Ok((Outcome::Skipped, None));
                };
                let generation = created.metadata.generation.unwrap_or(1);
                info!(
                    mcn = %action.name(),
                    pool = %mcn.spec.pool.name,
                    desired = %mcn.spec.config_version.desired,
                    bootstrap_record = super::desired::has_bootstrap_record(mcn),
                    "created MachineConfigNode"
                );
                // A status already there was written by someone else in the meantime.
                let written = if created.status.is_none() {
                    let version = created.metadata.resource_version.as_deref();
                    match self
                        .apply_status(action.name(), status, generation, version)
                        .await
                    {
                        Ok(written) => written,
                        // The MCN exists: it is never created again for this (the cache may
                        // lag). Its initial status is written as soon as the cache shows the
                        // MCN without one (an `InitStatus` of a later pass).
                        Err(error) => {
                            self.metrics.mcn_publish("error");
                            warn!(mcn = %action.name(), kind = error.kind(), error = %ErrorChain(&error), "created MachineConfigNode but could not write its initial status; it is written once the cache shows the MachineConfigNode");
                            created.metadata.resource_version
                        }
                    }
                } else {
                    created.metadata.resource_version
                };
                Ok((Outcome::Created, written))
            }
            Action::Fill { mcn, filled } => {
                // Planned from the cached copy at `cached`: written only over that version.
                let Some(cached) = cached else {
                    return Ok((Outcome::Skipped, None));
                };
                let Some(filled_in) = self.fill(mcn, cached).await? else {
                    debug!(mcn = %action.name(), "MachineConfigNode changed since the cache saw it (409); planning again from the cache");
                    return Ok((Outcome::Skipped, None));
                };
                info!(mcn = %action.name(), filled = %filled.join(", "), "filled in MachineConfigNode");
                Ok((Outcome::Filled, filled_in.metadata.resource_version))
            }
            Action::InitStatus {
                name,
                status,
                generation,
                resource_version,
            } => {
                let written = self
                    .apply_status(name, status, *generation, resource_version.as_deref())
                    .await?;
                info!(mcn = %name, "wrote initial MachineConfigNode status");
                Ok((Outcome::StatusInitialized, written))
            }
            Action::Delete {
                name,
                uid,
                node_uid,
            } => Ok((self.delete(name, uid.as_deref(), node_uid).await?, None)),
        }
    }

    fn params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            field_validation: Some(ValidationDirective::Strict),
            ..PatchParams::default()
        }
    }

    /// Creates `mcn`; `None` when the API server refuses because it exists (409
    /// AlreadyExists).
    async fn create(
        &mut self,
        mcn: &MachineConfigNode,
    ) -> Result<Option<MachineConfigNode>, PublishError> {
        let name = mcn.metadata.name.clone().unwrap_or_default();
        let wrap = |source| PublishError::Api {
            action: "create",
            name: name.clone(),
            source,
        };
        let mut mcn = if self.config_image_declared {
            mcn.clone()
        } else {
            without_config_image(mcn)
        };
        self.spend_write().await;
        let result = match self.post(&mcn).await {
            // A CRD without `spec.configImage`: kube-apiserver answers a strict create naming
            // an undeclared field with 400 or 422 (a server-side apply with a plain 500); the
            // field is then left out for good.
            Err(kube::Error::Api(status))
                if mcn.spec.config_image.is_some()
                    && matches!(status.code, 400 | 422 | 500)
                    && status.message.contains("configImage") =>
            {
                self.config_image_declared = false;
                info!(mcn = %name, "the MachineConfigNode CRD does not declare spec.configImage; the served image is kept in the bootstrap-record annotation only");
                mcn = without_config_image(&mcn);
                self.spend_write().await;
                self.post(&mcn).await
            }
            result => result,
        };
        match result {
            Ok(created) => Ok(Some(created)),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
            Err(source) => Err(wrap(source)),
        }
    }

    /// `POST` of a new MCN under our field manager, with strict field validation (kube's
    /// `PostParams` cannot say it, so the request is built here).
    async fn post(&self, mcn: &MachineConfigNode) -> Result<MachineConfigNode, kube::Error> {
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        let body = serde_json::to_vec(mcn).map_err(kube::Error::SerdeError)?;
        let request = kube::core::Request::new(MachineConfigNode::url_path(&(), None))
            .create(&params, body)
            .map_err(kube::Error::BuildRequest)?;
        let (mut parts, body) = request.into_parts();
        let uri = format!("{}&fieldValidation=Strict", parts.uri);
        parts.uri = uri.parse().map_err(|e: http::uri::InvalidUri| {
            kube::Error::BuildRequest(kube::core::request::Error::Validation(e.to_string()))
        })?;
        self.client
            .request::<MachineConfigNode>(http::Request::from_parts(parts, body))
            .await
    }

    /// Writes the fields a fill fills (spec.configVersion.desired, our annotations) with a
    /// merge patch conditional on `resource_version`; `None` when the MCN changed since (409
    /// Conflict).
    async fn fill(
        &mut self,
        mcn: &MachineConfigNode,
        resource_version: &str,
    ) -> Result<Option<MachineConfigNode>, PublishError> {
        let name = mcn.metadata.name.clone().unwrap_or_default();
        let body = fill_patch_body(mcn, resource_version);
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            field_validation: Some(ValidationDirective::Strict),
            ..PatchParams::default()
        };
        self.spend_write().await;
        match self.mcns.patch(&name, &params, &Patch::Merge(&body)).await {
            Ok(filled) => Ok(Some(filled)),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
            Err(source) => Err(PublishError::Api {
                action: "fill",
                name,
                source,
            }),
        }
    }

    /// Waits for a token of the write budget and takes it (a pass starts an action only when
    /// one is there, so this waits only between the writes of one action).
    async fn spend_write(&mut self) {
        while let Err(wait) = self.budget.try_take(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
    }

    async fn apply_status(
        &mut self,
        name: &str,
        status: &InitialStatus,
        generation: i64,
        resource_version: Option<&str>,
    ) -> Result<Option<String>, PublishError> {
        let status = status.build(generation, Timestamp::now());
        let body = status_apply_body(name, &status, resource_version);
        self.spend_write().await;
        self.mcns
            .patch_status(name, &self.params(), &Patch::Apply(&body))
            .await
            .map(|written| written.metadata.resource_version)
            .map_err(|source| PublishError::Api {
                action: "init_status",
                name: name.to_owned(),
                source,
            })
    }

    async fn delete(
        &mut self,
        name: &str,
        uid: Option<&str>,
        node_uid: &str,
    ) -> Result<Outcome, PublishError> {
        let wrap = |source| PublishError::Api {
            action: "delete",
            name: name.to_owned(),
            source,
        };
        // The cache may lag behind a Node that was just created: ask the API server itself.
        let node = self.nodes.get_opt(name).await.map_err(wrap)?;
        if node.is_some_and(|n| n.metadata.uid.as_deref() == Some(node_uid)) {
            debug!(mcn = %name, "node still exists; not deleting its MachineConfigNode");
            return Ok(Outcome::Skipped);
        }
        // Who wrote it, as the API server records it (the cache strips managedFields).
        let Some(current) = self.mcns.get_opt(name).await.map_err(wrap)? else {
            return Ok(Outcome::Skipped);
        };
        if uid.is_some() && current.metadata.uid.as_deref() != uid {
            debug!(mcn = %name, "MachineConfigNode was replaced; not deleting");
            return Ok(Outcome::Skipped);
        }
        if !created_by_us(&current) {
            info!(mcn = %name, "MachineConfigNode carries our creation annotation but our field manager did not set it; leaving it");
            return Ok(Outcome::Skipped);
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: current.metadata.uid.clone(),
                resource_version: current.metadata.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        self.spend_write().await;
        match self.mcns.delete(name, &params).await {
            Ok(_) => {
                info!(mcn = %name, node_uid = %node_uid, "node is gone; deleted the MachineConfigNode this server created for it");
                Ok(Outcome::Deleted)
            }
            // Gone already, or changed since the read (the next pass decides again).
            Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {
                Ok(Outcome::Skipped)
            }
            Err(e) => Err(wrap(e)),
        }
    }
}

/// True when `managedFields` show that our field manager, on the main resource, owns the
/// creation annotation: the API server's own record of who created the MCN, which a foreign
/// writer's object never has. Our creates (and fills) are `Update` operations; MCNs created by
/// earlier versions of this server were server-side applies.
pub fn created_by_us(mcn: &MachineConfigNode) -> bool {
    let annotation = format!("f:{}", super::desired::annotations::CREATED_BY);
    mcn.metadata.managed_fields.iter().flatten().any(|entry| {
        entry.manager.as_deref() == Some(FIELD_MANAGER)
            && matches!(entry.operation.as_deref(), Some("Apply" | "Update"))
            && entry.subresource.as_deref().unwrap_or_default().is_empty()
            && entry.fields_v1.as_ref().is_some_and(|fields| {
                fields.0["f:metadata"]["f:annotations"]
                    .get(&annotation)
                    .is_some()
            })
    })
}

/// The merge patch of a fill: the `resourceVersion` it was planned from (the API server
/// refuses it with 409 once the MCN changed), `spec.configVersion.desired` and our annotations
/// (the only fields a fill changes; a merge patch leaves every other field as it is).
pub fn fill_patch_body(mcn: &MachineConfigNode, resource_version: &str) -> serde_json::Value {
    let annotations: serde_json::Map<String, serde_json::Value> = mcn
        .metadata
        .annotations
        .iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.clone().into()))
        .collect();
    serde_json::json!({
        "metadata": {
            "resourceVersion": resource_version,
            "annotations": annotations,
        },
        "spec": {"configVersion": {"desired": mcn.spec.config_version.desired}},
    })
}

fn without_config_image(mcn: &MachineConfigNode) -> MachineConfigNode {
    let mut mcn = mcn.clone();
    mcn.spec.config_image = None;
    mcn
}

/// The body of a status apply: identity and `status` only, so that the apply claims no spec or
/// metadata field.
/// The apply body of an initial status. With `resource_version` the API server refuses it
/// (409) when the MCN changed since that version: a status written meanwhile (by a previous
/// leader) is never written over.
pub fn status_apply_body(
    name: &str,
    status: &MachineConfigNodeStatus,
    resource_version: Option<&str>,
) -> serde_json::Value {
    let mut metadata = serde_json::json!({ "name": name });
    if let Some(version) = resource_version {
        metadata["resourceVersion"] = version.into();
    }
    serde_json::json!({
        "apiVersion": MachineConfigNode::api_version(&()),
        "kind": MachineConfigNode::kind(&()),
        "metadata": metadata,
        "status": status,
    })
}

/// True when a pass that started at `started` would have worked longer than `PASS_LENGTH` by
/// `at`.
fn pass_over(started: Instant, at: Instant) -> bool {
    at.saturating_duration_since(started) > PASS_LENGTH
}

/// True when the snapshot holds complete lists of Nodes and MachineConfigNodes.
fn sees_nodes_and_mcns(snapshot: &Snapshot) -> bool {
    snapshot.generation > 0
        && snapshot.synced.contains(&Input::Nodes)
        && snapshot.synced.contains(&Input::MachineConfigNodes)
}

/// `retry_initial * 2^(failures-1)`, at most `retry_max`.
pub fn backoff_delay(settings: &ReconcileSettings, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    settings
        .retry_initial
        .saturating_mul(1u32 << exponent)
        .min(settings.retry_max)
}

/// Runs the reconcile loop whenever `leading` is true, until `shutdown` turns true.
pub async fn run(
    mut reconciler: Reconciler,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    mut ready: watch::Receiver<bool>,
    mut leading: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            result = leading.wait_for(|leading| *leading) => {
                if result.is_err() {
                    return;
                }
            }
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        reconciler
            .lead(&mut snapshots, &mut ready, &mut leading, &mut shutdown)
            .await;
        if *shutdown.borrow() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let settings = ReconcileSettings::default();
        assert_eq!(backoff_delay(&settings, 1), Duration::from_secs(1));
        assert_eq!(backoff_delay(&settings, 2), Duration::from_secs(2));
        assert_eq!(backoff_delay(&settings, 4), Duration::from_secs(8));
        assert_eq!(backoff_delay(&settings, 7), Duration::from_secs(60));
        assert_eq!(backoff_delay(&settings, u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn a_fill_is_conditional_and_writes_only_its_fields() {
        let mut mcn = MachineConfigNode::new(
            "n",
            crate::api::machineconfignode::MachineConfigNodeSpec {
                node: crate::api::imagebuild::NameRef { name: "n".into() },
                pool: crate::api::imagebuild::NameRef {
                    name: "worker".into(),
                },
                config_version: crate::api::machineconfignode::SpecConfigVersion {
                    desired: "rendered-worker-1".into(),
                },
                config_image: None,
            },
        );
        mcn.metadata.annotations = Some(std::collections::BTreeMap::from([
            (
                "mcs.machineconfiguration.openshift.io/firstboot-failure-stage".to_owned(),
                "firstboot-update".to_owned(),
            ),
            (
                "mcs.machineconfiguration.openshift.io/firstboot-failure-cleared-at".to_owned(),
                "2026-11-25T11:00:00Z".to_owned(),
            ),
        ]));
        let body = fill_patch_body(&mcn, "7");
        assert_eq!(
            body,
            serde_json::json!({
                "metadata": {
                    "resourceVersion": "7",
                    "annotations": {
                        "mcs.machineconfiguration.openshift.io/firstboot-failure-cleared-at": "2026-11-25T11:00:00Z",
                        "mcs.machineconfiguration.openshift.io/firstboot-failure-stage": "firstboot-update",
                    },
                },
                "spec": {"configVersion": {"desired": "rendered-worker-1"}},
            })
        );
    }

    #[test]
    fn status_apply_body_claims_only_status() {
        let status = InitialStatus {
            node: "n".into(),
            current: None,
            status_desired: "not-yet-set".into(),
            spec_desired: "not-yet-set".into(),
        }
        .build(1, Timestamp::UNIX_EPOCH);
        let body = status_apply_body("n", &status, None);
        let keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["apiVersion", "kind", "metadata", "status"]);
        assert_eq!(body["apiVersion"], "machineconfiguration.openshift.io/v1");
        assert_eq!(body["kind"], "MachineConfigNode");
        assert_eq!(body["metadata"], serde_json::json!({"name": "n"}));
        // Planned from version 42: the API server refuses it once the MCN moved on.
        let conditional = status_apply_body("n", &status, Some("42"));
        assert_eq!(
            conditional["metadata"],
            serde_json::json!({"name": "n", "resourceVersion": "42"})
        );
        assert_eq!(conditional["status"], body["status"]);
    }
}
