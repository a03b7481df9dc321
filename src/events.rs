//! Kubernetes Events (`events.k8s.io/v1`) for what an operator should see in `oc describe` and
//! `oc get events`, and the `mcs_layered_held_since_timestamp_seconds` gauge.
//!
//! # What is reported (see docs/operations.md, "Events")
//! - On a MachineConfigPool, when its layered image is held back (new nodes boot the base
//!   image), with the decision's reason (`LayeredImage<Reason>`, e.g.
//!   `LayeredImageNotValidated`), and when it is released (`LayeredImageReleased`). These come
//!   from the cluster state: every new snapshot is decided for every pool with the same pure
//!   [`layered::decide`] a render uses, and a pool is reported when its (rendered config,
//!   reason, build) differs from what this replica last reported. Requests play no part.
//! - On a MachineConfigPool, when a config for it cannot be rendered in a requested Ignition
//!   spec (`RenderFailed`, with the error chain). The request path sends a [`Notice`] only when
//!   it rendered (a cache miss: once per input generation, never per request), and one is
//!   reported only when the failure for that (pool, spec) differs from the last one reported,
//!   until a render for it succeeds again. Only the lease holder's own requests count: a
//!   failure met only by another replica gets no Event (the 5xx alert sums every replica).
//! - On a Node, when the MachineConfigNode publisher matched the first config served to its
//!   machine (`FirstConfigServed`: rendered config, image, spec), once per Node uid: the match
//!   its plan writes the bootstrap record from ([`crate::mcn::plan::Plan::matched`]).
//! - On a MachineConfigPool, when a machine reported that its first boot failed
//!   (`FirstbootFailed`, Warning, with upstream's message: node ID, stage, the sanitized
//!   message and the image's registry), once per report: from the records every replica
//!   shares, so a report that reached any replica is told. Each report is an Event of its own,
//!   named after the report ([`firstboot_event_name`]): two machines failing within minutes
//!   are two Events (kube's recorder would merge the second into the first's series, keeping
//!   the first's note), and a new leader finds a report its predecessor told already.
//! - On a MachineConfigPool, when config requests from an Ignition older than
//!   `--min-ignition-version` were refused (`BootImageTooOld`, Warning, naming the versions), at
//!   most once per pool and ten minutes ([`crate::server::min_ignition`]); as for
//!   `RenderFailed`, the lease holder's own requests only (the machine retries, and the load
//!   balancer soon sends a retry there).
//!
//! # Who reports, and how often
//! Only the replica holding the publisher's Lease ([`crate::mcn::lease`]) publishes; the others
//! only keep the gauge. A new leader reports the pools' current layered state once (what it has
//! not reported itself). Publishing goes through kube's [`Recorder`], which aggregates a repeat
//! of the same event (same reason, action and object within minutes) into one Event with a
//! growing `series.count` (but a `FirstbootFailed`, above), and at most one Event is written
//! per [`MIN_INTERVAL`]; notices beyond a bounded queue are dropped and counted
//! (`mcs_events_total{result="dropped"}`). A write the API could not take (no connection, a
//! cut one, 429, 5xx: an API server restarting) is tried again with backoff for up to
//! [`RETRY_FOR`]; a refusal (4xx) is not.
//!
//! Owns: which events exist, their wording, the leader-only publishing task. Must not touch:
//! the request path beyond the non-blocking [`crate::server::notices::EventNotices`] calls.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::ignition::SpecVersion;
use crate::metrics::Metrics;
use crate::render::layered::{self, DecisionReason};
use crate::rights::Feature;
use crate::server::notices::{reference, Notice};
use crate::server::served::FailureRecord;
use crate::snapshot::Snapshot;
use crate::source::cluster::rights::Rights;

/// `reportingController` of every Event.
pub const REPORTING_CONTROLLER: &str = "machineconfiguration.openshift.io/machine-config-server";
/// Shortest time between two Event writes (at most ten a second).
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// An Event write that takes longer is given up.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an Event the API could not take is tried again (an API server's restart, a
/// control-plane node's reboot); the first retry waits [`RETRY_FIRST_DELAY`], each next one
/// twice as long, at most [`RETRY_MAX_DELAY`].
const RETRY_FOR: Duration = Duration::from_secs(60);
const RETRY_FIRST_DELAY: Duration = Duration::from_millis(200);
const RETRY_MAX_DELAY: Duration = Duration::from_secs(5);
/// The API server's limit on `note`.
const NOTE_LIMIT: usize = 1024;
/// One Event to publish.
pub struct PlannedEvent {
    pub regarding: ObjectReference,
    pub event: Event,
    /// An Event that stands for one occurrence of its own is written under this name: never
    /// merged into an earlier Event's series (kube's [`Recorder`] merges every Event of the
    /// same reason, action and object within minutes, whatever its note), and not written
    /// again when an Event of that name exists (another leader told it already).
    pub name: Option<String>,
}

/// The name of the `FirstbootFailed` Event of one report: the pool's name and a hash of what
/// identifies the report in every replica's records (its address, its time to the
/// millisecond, its node ID), so every leader names the same report alike.
pub fn firstboot_event_name(address: std::net::IpAddr, failure: &FailureRecord) -> String {
    let at = failure
        .reported_at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let key = format!("{}|{at}|{}", address.to_canonical(), failure.node_id);
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // An object name is at most 253 characters; a pool's name may be as long.
    let mut pool = failure.pool.as_str();
    while pool.len() > 253 - ".firstboot-".len() - 16 {
        let mut end = pool.len() - 1;
        while !pool.is_char_boundary(end) {
            end -= 1;
        }
        pool = &pool[..end];
    }
    format!("{pool}.firstboot-{hash:016x}")
}

/// A layered pool's state as the events report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayeredState {
    pub rendered_config: String,
    pub reason: DecisionReason,
    pub machine_os_config: Option<String>,
    pub machine_os_build: Option<String>,
    pub image: Option<String>,
    pub build_image: Option<String>,
    /// `not_validated`: since when (Unix seconds), see [`layered::not_validated_since`].
    pub held_since: Option<i64>,
}

impl LayeredState {
    fn same_decision(&self, other: &LayeredState) -> bool {
        (
            &self.rendered_config,
            self.reason,
            &self.machine_os_build,
            &self.image,
        ) == (
            &other.rendered_config,
            other.reason,
            &other.machine_os_build,
            &other.image,
        )
    }
}

/// The layered state of every layered pool of `snapshot` (pools with a MachineOSConfig), by
/// pool name. Pure.
pub fn layered_states(snapshot: &Snapshot) -> BTreeMap<String, LayeredState> {
    snapshot
        .pools
        .iter()
        .filter_map(|(name, pool)| {
            let pool = pool.as_ref().ok()?;
            let rendered_config = pool.served_config_name();
            if rendered_config.is_empty() {
                return None;
            }
            let decision = layered::decide(pool, rendered_config, &snapshot.layered);
            if decision.reason == DecisionReason::NotLayered {
                return None;
            }
            let held_since =
                layered::not_validated_since(&decision, rendered_config, &snapshot.layered);
            Some((
                name.clone(),
                LayeredState {
                    rendered_config: rendered_config.to_owned(),
                    reason: decision.reason,
                    machine_os_config: decision.machine_os_config,
                    machine_os_build: decision.machine_os_build,
                    image: decision.image,
                    build_image: decision.build_image,
                    held_since,
                },
            ))
        })
        .collect()
}

/// The events for the change from `reported` to `current` (pure): a pool whose decision
/// changed to a held one gets its held event; one that changed from held to served gets
/// `LayeredImageReleased`. A pool first seen already served gets nothing.
pub fn layered_events(
    reported: &BTreeMap<String, LayeredState>,
    current: &BTreeMap<String, LayeredState>,
    snapshot: &Snapshot,
) -> Vec<PlannedEvent> {
    let mut events = Vec::new();
    for (pool, state) in current {
        let previous = reported.get(pool);
        if previous.is_some_and(|p| p.same_decision(state)) {
            continue;
        }
        let Some(Ok(mcp)) = snapshot.pools.get(pool) else {
            continue;
        };
        let regarding = reference(mcp.as_ref());
        let related = related_build(state, snapshot);
        let event = if state.reason.is_served() {
            if previous.is_none_or(|p| p.reason.is_served()) {
                continue;
            }
            Event {
                type_: EventType::Normal,
                reason: "LayeredImageReleased".into(),
                note: Some(note(format!(
                    "new nodes of pool {pool} now boot the layered image {} (MachineOSBuild {}, rendered config {}): {}",
                    state.image.as_deref().unwrap_or_default(),
                    state.machine_os_build.as_deref().unwrap_or_default(),
                    state.rendered_config,
                    if state.reason == DecisionReason::PoolUpdated {
                        "a machine of the pool completed the update (the original's gate: this server may not read Nodes)"
                    } else {
                        "a node of the pool validated it"
                    }
                ))),
                action: "ServeLayeredImage".into(),
                secondary: related,
            }
        } else {
            Event {
                type_: held_type(state.reason),
                reason: held_reason(state.reason),
                note: Some(note(format!(
                    "new nodes of pool {pool} boot the base image of {}, not a layered image: {}. Run `machine-config-server explain --pool {pool}` for details",
                    state.rendered_config,
                    held_explanation(state)
                ))),
                action: "ServeBaseImage".into(),
                secondary: related,
            }
        };
        events.push(PlannedEvent {
            regarding,
            event,
            name: None,
        });
    }
    events
}

/// `LayeredImage` + the decision reason in PascalCase, e.g. `LayeredImageNotValidated`.
fn held_reason(reason: DecisionReason) -> String {
    let pascal: String = reason
        .as_str()
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    format!("LayeredImage{pascal}")
}

/// Warning where a person has something to look at; Normal while the build pipeline is simply
/// not done yet.
fn held_type(reason: DecisionReason) -> EventType {
    match reason {
        DecisionReason::BuildFailed
        | DecisionReason::BuildInterrupted
        | DecisionReason::NotValidated
        | DecisionReason::PoolNotUpdated
        | DecisionReason::InClusterRegistry => EventType::Warning,
        _ => EventType::Normal,
    }
}

fn held_explanation(state: &LayeredState) -> String {
    let build = state.machine_os_build.as_deref().unwrap_or_default();
    let image = state.build_image.as_deref().unwrap_or_default();
    match state.reason {
        DecisionReason::NoImageYet => format!(
            "MachineOSConfig {} has produced no image yet",
            state.machine_os_config.as_deref().unwrap_or_default()
        ),
        DecisionReason::NoBuildForConfig => "no MachineOSBuild exists for this rendered config".into(),
        DecisionReason::BuildPending => format!("MachineOSBuild {build} has not started or finished"),
        DecisionReason::BuildBuilding => format!("MachineOSBuild {build} is building"),
        DecisionReason::BuildFailed => format!("MachineOSBuild {build} failed"),
        DecisionReason::BuildInterrupted => format!("MachineOSBuild {build} was interrupted"),
        DecisionReason::NotValidated => format!(
            "MachineOSBuild {build} succeeded (image {image}) but no node of the pool runs it and is done updating (not_validated)"
        ),
        DecisionReason::InClusterRegistry => format!(
            "the validated image {image} is in the in-cluster registry, which a booting node cannot reach"
        ),
        DecisionReason::PoolNotUpdated => format!(
            "MachineOSBuild {build} succeeded (image {image}) but no machine of the pool has completed the update (pool_not_updated: the original's gate, since this server may not read Nodes)"
        ),
        DecisionReason::NotLayered | DecisionReason::Validated | DecisionReason::PoolUpdated => {
            state.reason.as_str().into()
        }
    }
}

/// The MachineOSBuild (else the MachineOSConfig) the state is about, as an object reference.
fn related_build(state: &LayeredState, snapshot: &Snapshot) -> Option<ObjectReference> {
    if let Some(name) = &state.machine_os_build {
        let build = snapshot
            .layered
            .machine_os_builds
            .iter()
            .find(|b| b.metadata.name.as_ref() == Some(name))?;
        return Some(reference(build.as_ref()));
    }
    let name = state.machine_os_config.as_ref()?;
    let config = snapshot
        .layered
        .machine_os_configs
        .iter()
        .find(|c| c.metadata.name.as_ref() == Some(name))?;
    Some(reference(config.as_ref()))
}

/// `text` cut to the API server's limit on a character boundary.
fn note(mut text: String) -> String {
    if text.len() > NOTE_LIMIT {
        let mut end = NOTE_LIMIT - 3;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// An Event as kube's [`Recorder`] writes a new one, under `name`.
fn named_event(
    name: &str,
    planned: &PlannedEvent,
    reporter: &Reporter,
) -> k8s_openapi::api::events::v1::Event {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    let event = &planned.event;
    k8s_openapi::api::events::v1::Event {
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        regarding: Some(planned.regarding.clone()),
        note: event.note.clone(),
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: planned.regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        type_: Some(
            match event.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_owned(),
        ),
        related: event.secondary.clone(),
        ..k8s_openapi::api::events::v1::Event::default()
    }
}

/// Whether a failed Event write may succeed if tried again: the API could not take it (no
/// connection, a cut one, overload, a server error), rather than refusing it (a 4xx: the
/// object, or our rights).
fn retryable(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

fn describe(result: &Result<Result<(), kube::Error>, tokio::time::error::Elapsed>) -> String {
    match result {
        Ok(Ok(())) => "none".into(),
        Ok(Err(error)) => crate::telemetry::ErrorChain(error).to_string(),
        Err(_) => format!("no answer within {}s", PUBLISH_TIMEOUT.as_secs()),
    }
}

/// The leader's publisher state.
struct Emitter {
    recorder: Recorder,
    /// For Events written under a name of their own ([`PlannedEvent::name`]).
    events: kube::Api<k8s_openapi::api::events::v1::Event>,
    reporter: Reporter,
    metrics: Arc<Metrics>,
    /// Whether [`Feature::Events`] is on; a refused write turns it off.
    rights: Rights,
    /// Layered states reported in this leadership term (`None`: nothing reported yet).
    reported: Option<BTreeMap<String, LayeredState>>,
    /// The last render failure reported per (pool, spec): (rendered config, error kind).
    render_failures: HashMap<(String, SpecVersion), (String, &'static str)>,
    last_publish: Option<Instant>,
}

impl Emitter {
    /// Writes `planned`; a write the API could not take (it is restarting, unreachable, or
    /// answers 429 or 5xx) is tried again with backoff until [`RETRY_FOR`] has passed, so an
    /// API server's restart does not swallow the Events of the moment (a machine's first-boot
    /// failure is told once, from the notice: nothing else would tell it again).
    async fn publish(&mut self, planned: PlannedEvent) {
        let object = planned.regarding.name.clone().unwrap_or_default();
        let kind = planned.regarding.kind.clone().unwrap_or_default();
        let first = Instant::now();
        let mut delay = RETRY_FIRST_DELAY;
        let mut attempts = 0_u32;
        loop {
            if let Some(last) = self.last_publish {
                tokio::time::sleep_until(last + MIN_INTERVAL).await;
            }
            self.last_publish = Some(Instant::now());
            attempts += 1;
            let result = self.write(&planned).await;
            let retry = match &result {
                Ok(Ok(())) => false,
                Ok(Err(error)) => retryable(error),
                Err(_) => true,
            };
            if retry && first.elapsed() + delay < RETRY_FOR {
                if attempts == 1 {
                    tracing::info!(%kind, %object, reason = %planned.event.reason, error = %describe(&result), "could not publish event yet; trying again while the API server is back within {}s", RETRY_FOR.as_secs());
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RETRY_MAX_DELAY);
                continue;
            }
            match result {
                Ok(Ok(())) => {
                    self.metrics.kube_event("published");
                    tracing::info!(%kind, %object, reason = %planned.event.reason, note = planned.event.note.as_deref().unwrap_or_default(), attempts, "published event");
                }
                Ok(Err(kube::Error::Api(status)))
                    if status.code == 409 && planned.name.is_some() =>
                {
                    // Told already, by this leader or an earlier one (or by this write's own
                    // earlier attempt, which the API took though its answer was lost).
                    self.metrics.kube_event("already_published");
                    tracing::debug!(%kind, %object, reason = %planned.event.reason, name = planned.name.as_deref().unwrap_or_default(), "event already published");
                }
                Ok(Err(kube::Error::Api(status))) if status.code == 403 => {
                    // Not retried: the feature is off until the rights say otherwise.
                    self.metrics.kube_event("failed");
                    self.rights
                        .refused(Feature::Events, "create or patch events (events.k8s.io)");
                }
                failed => {
                    self.metrics.kube_event("failed");
                    tracing::warn!(%kind, %object, reason = %planned.event.reason, error = %describe(&failed), attempts, "could not publish event");
                }
            }
            return;
        }
    }

    /// One write of `planned`, bounded by [`PUBLISH_TIMEOUT`].
    async fn write(
        &self,
        planned: &PlannedEvent,
    ) -> Result<Result<(), kube::Error>, tokio::time::error::Elapsed> {
        match &planned.name {
            None => {
                tokio::time::timeout(
                    PUBLISH_TIMEOUT,
                    self.recorder.publish(&planned.event, &planned.regarding),
                )
                .await
            }
            Some(name) => {
                let event = named_event(name, planned, &self.reporter);
                tokio::time::timeout(
                    PUBLISH_TIMEOUT,
                    self.events
                        .create(&kube::api::PostParams::default(), &event),
                )
                .await
                .map(|created| created.map(|_| ()))
            }
        }
    }

    fn on_notice(&mut self, notice: Notice, snapshot: &Snapshot) -> Option<PlannedEvent> {
        match notice {
            Notice::Rendered { pool, version } => {
                self.render_failures.remove(&(pool, version));
                None
            }
            Notice::RenderFailed {
                pool,
                version,
                kind,
                status,
                message,
            } => {
                let Some(Ok(mcp)) = snapshot.pools.get(&pool) else {
                    return None;
                };
                let rendered = mcp.served_config_name().to_owned();
                let failure = (rendered.clone(), kind);
                let key = (pool.clone(), version);
                if self.render_failures.get(&key) == Some(&failure) {
                    return None;
                }
                self.render_failures.insert(key, failure);
                Some(PlannedEvent {
                    regarding: reference(mcp.as_ref()),
                    event: Event {
                        type_: EventType::Warning,
                        reason: "RenderFailed".into(),
                        note: Some(note(format!(
                            "cannot serve pool {pool} ({rendered}) as Ignition {version}: nodes asking for it get HTTP {status} ({kind}): {message}. Run `machine-config-server explain --pool {pool} --spec {version}` for details"
                        ))),
                        action: format!("ServeIgnition{version}"),
                        secondary: None,
                    },
                    name: None,
                })
            }
            Notice::FirstbootFailed { address, failure } => {
                let Some(Ok(mcp)) = snapshot.pools.get(&failure.pool) else {
                    tracing::info!(pool = %failure.pool, %address, "a first-boot failure names a pool that does not exist; no Event");
                    return None;
                };
                Some(PlannedEvent {
                    regarding: reference(mcp.as_ref()),
                    event: Event {
                        type_: EventType::Warning,
                        reason: "FirstbootFailed".into(),
                        note: Some(note(crate::server::node_failure::failure_message(&failure))),
                        action: "ReportFirstbootFailure".into(),
                        secondary: None,
                    },
                    // One Event per report: two machines of a pool failing within minutes
                    // are two Events, and a new leader does not tell a report again.
                    name: Some(firstboot_event_name(address, &failure)),
                })
            }
            Notice::IgnitionTooOld {
                pool,
                client,
                minimum,
            } => {
                let Some(Ok(mcp)) = snapshot.pools.get(&pool) else {
                    return None;
                };
                Some(PlannedEvent {
                    regarding: reference(mcp.as_ref()),
                    event: Event {
                        type_: EventType::Warning,
                        reason: "BootImageTooOld".into(),
                        note: Some(note(format!(
                            "refused config requests for pool {pool} from Ignition {client}, older than --min-ignition-version {minimum}: the machine's boot image is too old for this cluster; it retries until it boots from a newer boot image"
                        ))),
                        action: "RefuseConfig".into(),
                        secondary: None,
                    },
                    name: None,
                })
            }
            Notice::FirstConfigServed { node, record } => {
                let name = node.name.clone().unwrap_or_default();
                let image = record
                    .image
                    .as_deref()
                    .map(|image| format!(", image {image}"))
                    .unwrap_or_default();
                Some(PlannedEvent {
                    regarding: node,
                    event: Event {
                        type_: EventType::Normal,
                        reason: "FirstConfigServed".into(),
                        note: Some(note(format!(
                            "machine {name} booted with rendered config {} of pool {} (Ignition {}{image})",
                            record.rendered_config, record.pool, record.spec_version
                        ))),
                        action: "ServeConfig".into(),
                        secondary: None,
                    },
                    name: None,
                })
            }
        }
    }
}

/// Why the event task woke up.
enum Wake {
    Stop,
    Notice(Box<Notice>),
    NoticesClosed,
    StateChanged,
}

/// Everything the event task reads.
pub struct EventInputs {
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub ready: watch::Receiver<bool>,
    /// True while this replica holds the publisher's Lease.
    pub leading: watch::Receiver<bool>,
    pub notices: mpsc::Receiver<Notice>,
    /// Events are written only while [`Feature::Events`] is on.
    pub rights: Rights,
}

/// Starts the event task: keeps `mcs_layered_held_since_timestamp_seconds` on every replica,
/// publishes Events as `instance` (the lease identity) while leading, ends on `shutdown`.
pub fn start(
    client: kube::Client,
    instance: &str,
    metrics: Arc<Metrics>,
    inputs: EventInputs,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let reporter = Reporter {
        controller: REPORTING_CONTROLLER.into(),
        instance: Some(instance.to_owned()),
    };
    let mut grants = inputs.rights.subscribe();
    let mut emitter = Emitter {
        // Every Event of a cluster-scoped object goes to `default`, as kube's recorder does.
        events: kube::Api::namespaced(client.clone(), "default"),
        recorder: Recorder::new(client, reporter.clone()),
        reporter,
        metrics: metrics.clone(),
        rights: inputs.rights.clone(),
        reported: None,
        render_failures: HashMap::new(),
        last_publish: None,
    };
    let EventInputs {
        mut snapshots,
        mut ready,
        mut leading,
        mut notices,
        rights: _,
    } = inputs;
    let run = async move {
        let mut notices_open = true;
        loop {
            // Notices first: what requests reported is published before a later state change.
            let wake = tokio::select! {
                biased;
                notice = notices.recv(), if notices_open => match notice {
                    Some(notice) => Wake::Notice(Box::new(notice)),
                    None => Wake::NoticesClosed,
                },
                changed = snapshots.changed() => match changed {
                    Ok(()) => Wake::StateChanged,
                    Err(_) => Wake::Stop,
                },
                // A closed channel means its source or the election ended: so do we.
                changed = ready.changed() => match changed {
                    Ok(()) => Wake::StateChanged,
                    Err(_) => Wake::Stop,
                },
                changed = leading.changed() => match changed {
                    Ok(()) => Wake::StateChanged,
                    Err(_) => Wake::Stop,
                },
                changed = grants.changed() => match changed {
                    Ok(()) => Wake::StateChanged,
                    Err(_) => Wake::Stop,
                },
            };
            let state_changed = match wake {
                Wake::Stop => return,
                Wake::NoticesClosed => {
                    notices_open = false;
                    false
                }
                Wake::Notice(notice) => {
                    if *leading.borrow() && grants.borrow().enabled(Feature::Events) {
                        let snapshot = snapshots.borrow().clone();
                        if let Some(planned) = emitter.on_notice(*notice, &snapshot) {
                            emitter.publish(planned).await;
                        }
                    }
                    false
                }
                Wake::StateChanged => true,
            };
            if !state_changed {
                continue;
            }
            let snapshot = snapshots.borrow_and_update().clone();
            if !*ready.borrow_and_update() || snapshot.generation == 0 {
                continue;
            }
            let states = layered_states(&snapshot);
            let held: BTreeMap<String, i64> = states
                .iter()
                .filter_map(|(pool, state)| Some((pool.clone(), state.held_since?)))
                .collect();
            metrics.set_layered_held(&held);
            let emitting =
                *leading.borrow_and_update() && grants.borrow_and_update().enabled(Feature::Events);
            if !emitting {
                emitter.reported = None;
                emitter.render_failures.clear();
                continue;
            }
            let reported = emitter.reported.take().unwrap_or_default();
            for planned in layered_events(&reported, &states, &snapshot) {
                emitter.publish(planned).await;
            }
            emitter.reported = Some(states);
        }
    };
    // Shutdown ends the task at once, also while Event writes wait for a slow or unreachable
    // API (each may take up to PUBLISH_TIMEOUT, and a state change can plan one per pool).
    tokio::spawn(async move {
        tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => {}
            () = run => {}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rights::{Grants, Names, Requirements};
    use crate::server::notices::{EventNotices, QUEUE};
    use crate::server::served::{Answer, ServedRecord};
    use crate::snapshot::{Input, Mode};
    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    const IMAGE: &str = "quay.io/example/layered@sha256:1111";

    fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(value).expect("test object deserializes"))
    }

    /// A cluster with pool `layered` (a MachineOSConfig with an image, one succeeded build of
    /// its rendered config) and the given nodes.
    fn snapshot(nodes: Vec<Arc<Node>>) -> Snapshot {
        let mut snapshot = Snapshot::empty(Mode::Cluster);
        snapshot.generation = 1;
        // Every cache synced, as the cluster source publishes it.
        snapshot.synced = Input::ALL.into_iter().collect();
        let pool = json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": "layered", "uid": "pool-uid", "resourceVersion": "7"},
            "spec": {"configuration": {"name": "rendered-layered-1"},
                     "machineConfigSelector": {"matchLabels": {}},
                     "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/layered": ""}}},
            "status": {"configuration": {"name": "rendered-layered-1"}, "machineCount": 0,
                       "updatedMachineCount": 0, "readyMachineCount": 0,
                       "unavailableMachineCount": 0, "degradedMachineCount": 0}
        });
        snapshot.pools.insert("layered".into(), Ok(object(pool)));
        snapshot.layered.machine_os_configs = vec![object(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSConfig",
            "metadata": {"name": "layered"},
            "spec": {"machineConfigPool": {"name": "layered"},
                     "imageBuilder": {"imageBuilderType": "Job"},
                     "renderedImagePushSecret": {"name": "push"},
                     "renderedImagePushSpec": "quay.io/example/layered:latest"},
            "status": {"currentImagePullSpec": IMAGE}
        }))];
        snapshot.layered.machine_os_builds = vec![object(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineOSBuild",
            "metadata": {"name": "layered-build-1", "uid": "build-uid",
                         "creationTimestamp": "2026-11-01T10:00:00Z"},
            "spec": {"machineConfig": {"name": "rendered-layered-1"},
                     "machineOSConfig": {"name": "layered"},
                     "renderedImagePushSpec": "quay.io/example/layered:latest"},
            "status": {"conditions": [{"type": "Succeeded", "status": "True", "reason": "Done",
                                       "message": "", "lastTransitionTime": "2026-11-01T10:12:00Z"}],
                       "digestedImagePushSpec": IMAGE}
        }))];
        snapshot.layered.nodes = nodes;
        snapshot
    }

    fn validating_node() -> Arc<Node> {
        object(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "layered-0", "uid": "node-uid",
                         "labels": {"node-role.kubernetes.io/layered": ""},
                         "annotations": {"machineconfiguration.openshift.io/currentImage": IMAGE,
                                         "machineconfiguration.openshift.io/state": "Done"}}
        }))
    }

    fn worker_record() -> ServedRecord {
        ServedRecord::new(
            Answer::worker("rendered-worker-1"),
            std::time::SystemTime::UNIX_EPOCH,
        )
    }

    fn summary(events: &[PlannedEvent]) -> Vec<(String, String)> {
        events
            .iter()
            .map(|e| {
                (
                    e.regarding.name.clone().unwrap_or_default(),
                    e.event.reason.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn a_held_pool_is_reported_once_then_its_release() {
        let held = snapshot(Vec::new());
        let held_states = layered_states(&held);
        assert_eq!(held_states["layered"].reason, DecisionReason::NotValidated);
        // 2026-11-01T10:12:00Z: the build's Succeeded transition.
        assert_eq!(held_states["layered"].held_since, Some(1_793_527_920));

        let first = layered_events(&BTreeMap::new(), &held_states, &held);
        assert_eq!(
            summary(&first),
            [("layered".into(), "LayeredImageNotValidated".into())]
        );
        let event = &first[0];
        assert_eq!(event.event.type_, EventType::Warning);
        assert_eq!(event.regarding.kind.as_deref(), Some("MachineConfigPool"));
        assert_eq!(event.regarding.uid.as_deref(), Some("pool-uid"));
        assert_eq!(
            event.regarding.resource_version, None,
            "a new resourceVersion must not split the aggregation"
        );
        let related = event.event.secondary.as_ref().expect("the build");
        assert_eq!(
            (related.kind.as_deref(), related.name.as_deref()),
            (Some("MachineOSBuild"), Some("layered-build-1"))
        );
        let note = event.event.note.as_deref().unwrap();
        assert!(
            note.contains("not_validated") && note.contains(IMAGE),
            "{note}"
        );

        // The same state again: nothing.
        assert!(layered_events(&held_states, &layered_states(&held), &held).is_empty());

        // A node validates the image: released, once.
        let served = snapshot(vec![validating_node()]);
        let served_states = layered_states(&served);
        assert_eq!(served_states["layered"].held_since, None);
        let released = layered_events(&held_states, &served_states, &served);
        assert_eq!(
            summary(&released),
            [("layered".into(), "LayeredImageReleased".into())]
        );
        assert_eq!(released[0].event.type_, EventType::Normal);
        // A pool first seen already serving its layered image is not news.
        assert!(layered_events(&BTreeMap::new(), &served_states, &served).is_empty());
    }

    #[test]
    fn held_reasons_are_pascal_case_with_a_prefix() {
        assert_eq!(
            held_reason(DecisionReason::NotValidated),
            "LayeredImageNotValidated"
        );
        assert_eq!(
            held_reason(DecisionReason::InClusterRegistry),
            "LayeredImageInClusterRegistry"
        );
        assert_eq!(
            held_reason(DecisionReason::NoBuildForConfig),
            "LayeredImageNoBuildForConfig"
        );
        assert_eq!(held_type(DecisionReason::BuildBuilding), EventType::Normal);
        assert_eq!(held_type(DecisionReason::BuildFailed), EventType::Warning);
    }

    #[test]
    fn notes_fit_the_api_limit() {
        let long = "é".repeat(2000);
        let cut = note(long);
        assert!(
            cut.len() <= NOTE_LIMIT && cut.ends_with("..."),
            "{}",
            cut.len()
        );
        assert_eq!(note("short".into()), "short");
    }

    #[tokio::test]
    async fn a_node_whose_notice_was_dropped_is_announced_on_a_later_call() {
        let metrics = Arc::new(Metrics::new());
        let (notices, mut receiver) = EventNotices::channel(metrics.clone());
        for _ in 0..QUEUE {
            notices.rendered("worker", SpecVersion::V3_4);
        }
        let record = worker_record();
        let node = validating_node();
        notices.first_config_served(&node, &record);
        let dropped = metrics.encode();
        assert!(
            dropped.contains(r#"mcs_events_total{result="dropped"} 1"#),
            "{dropped}"
        );
        receiver.recv().await.expect("a queued notice");
        notices.first_config_served(&node, &record);
        notices.first_config_served(&node, &record);
        drop(notices);
        let mut announced = 0;
        while let Some(notice) = receiver.recv().await {
            if matches!(notice, Notice::FirstConfigServed { .. }) {
                announced += 1;
            }
        }
        assert_eq!(announced, 1);
    }

    /// An API server that accepts connections and never answers: an Event write hangs until
    /// its timeout. Shutdown must not wait for it.
    #[tokio::test]
    async fn shutdown_ends_the_task_while_an_event_write_hangs() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        let metrics = Arc::new(Metrics::new());
        let (_notices, receiver) = EventNotices::channel(metrics.clone());
        let (snapshot_tx, snapshots) = watch::channel(Arc::new(Snapshot::empty(Mode::Cluster)));
        let (_ready_tx, ready) = watch::channel(true);
        let (_leading_tx, leading) = watch::channel(true);
        let (shutdown_tx, shutdown) = watch::channel(false);
        let task = start(
            client,
            "replica-0",
            metrics,
            EventInputs {
                snapshots,
                ready,
                leading,
                notices: receiver,
                rights: Rights::fixed(
                    Grants::all_granted(Requirements::new(&Names::openshift())),
                    Arc::new(crate::source::cluster::NoopObserver),
                ),
            },
            shutdown,
        );
        // A held layered pool: its Event is written, and the write hangs.
        snapshot_tx.send_replace(Arc::new(snapshot(Vec::new())));
        let (_connection, _) = listener.accept().await.unwrap();
        let asked = Instant::now();
        shutdown_tx.send_replace(true);
        tokio::time::timeout(PUBLISH_TIMEOUT, task)
            .await
            .expect("the task ends on shutdown, not after the write's timeout")
            .unwrap();
        assert!(
            asked.elapsed() < PUBLISH_TIMEOUT / 2,
            "{:?}",
            asked.elapsed()
        );
    }

    #[tokio::test]
    async fn firstboot_failures_and_old_ignition_refusals_become_warnings_on_their_pool() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.into(),
            instance: None,
        };
        let mut emitter = Emitter {
            events: kube::Api::namespaced(client.clone(), "default"),
            recorder: Recorder::new(client, reporter.clone()),
            reporter,
            metrics: Arc::new(Metrics::new()),
            rights: Rights::fixed(
                Grants::all_granted(Requirements::new(&Names::openshift())),
                Arc::new(crate::source::cluster::NoopObserver),
            ),
            reported: None,
            render_failures: HashMap::new(),
            last_publish: None,
        };
        let cluster = snapshot(Vec::new());
        let failure = crate::server::served::FailureRecord {
            pool: "layered".into(),
            node_id: "node-1".into(),
            stage: "pivot".into(),
            message: "Failed to pivot".into(),
            image: "quay.io".into(),
            reported_at: std::time::SystemTime::UNIX_EPOCH,
        };
        let planned = emitter
            .on_notice(
                Notice::FirstbootFailed {
                    address: "10.0.0.7".parse().unwrap(),
                    failure: failure.clone(),
                },
                &cluster,
            )
            .expect("an Event on the pool");
        assert_eq!(planned.event.type_, EventType::Warning);
        assert_eq!(planned.event.reason, "FirstbootFailed");
        assert_eq!(
            planned.event.note.as_deref(),
            Some("Node node-1 failed during firstboot at stage 'pivot': Failed to pivot (image: quay.io)")
        );
        assert_eq!(planned.regarding.kind.as_deref(), Some("MachineConfigPool"));
        assert_eq!(planned.regarding.name.as_deref(), Some("layered"));
        // A pool that does not exist gets no Event.
        let elsewhere = crate::server::served::FailureRecord {
            pool: "made-up".into(),
            ..failure
        };
        assert!(emitter
            .on_notice(
                Notice::FirstbootFailed {
                    address: "10.0.0.7".parse().unwrap(),
                    failure: elsewhere,
                },
                &cluster,
            )
            .is_none());
        let refused = emitter
            .on_notice(
                Notice::IgnitionTooOld {
                    pool: "layered".into(),
                    client: "2.14.0".into(),
                    minimum: "2.20.0".into(),
                },
                &cluster,
            )
            .expect("an Event on the pool");
        assert_eq!(refused.event.type_, EventType::Warning);
        assert_eq!(refused.event.reason, "BootImageTooOld");
        let note = refused.event.note.unwrap();
        assert!(note.contains("2.14.0") && note.contains("2.20.0"), "{note}");
    }

    /// An API server that cuts the first two Event writes (read, then the connection closed
    /// without an answer, as a kube-apiserver stopping does) and takes the third.
    async fn api_that_cuts_the_first_writes(
        listener: tokio::net::TcpListener,
        cut: usize,
    ) -> Vec<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut seen = Vec::new();
        loop {
            let (mut connection, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buffer = [0_u8; 4096];
            // Headers, then the body its Content-Length says.
            let complete = loop {
                let n = connection.read(&mut buffer).await.unwrap_or(0);
                if n == 0 {
                    break false;
                }
                request.extend_from_slice(&buffer[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break true;
                    }
                }
            };
            if !complete {
                continue;
            }
            seen.push(
                String::from_utf8_lossy(&request)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            );
            if seen.len() <= cut {
                drop(connection);
                continue;
            }
            let body = r#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e","namespace":"default"},"eventTime":null}"#;
            let answer = format!(
                "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            connection.write_all(answer.as_bytes()).await.unwrap();
            connection.shutdown().await.ok();
            return seen;
        }
    }

    /// The real kube-apiserver's restart during a rehearsal cut a FirstbootFailed write, and
    /// the report was never told: a write the API could not take is tried again.
    #[tokio::test]
    async fn an_event_write_cut_by_an_api_restart_is_written_when_the_api_is_back() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let api = tokio::spawn(api_that_cuts_the_first_writes(listener, 2));
        let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.into(),
            instance: None,
        };
        let metrics = Arc::new(Metrics::new());
        let mut emitter = Emitter {
            events: kube::Api::namespaced(client.clone(), "default"),
            recorder: Recorder::new(client, reporter.clone()),
            reporter,
            metrics: metrics.clone(),
            rights: Rights::fixed(
                Grants::all_granted(Requirements::new(&Names::openshift())),
                Arc::new(crate::source::cluster::NoopObserver),
            ),
            reported: None,
            render_failures: HashMap::new(),
            last_publish: None,
        };
        let failure = crate::server::served::FailureRecord {
            pool: "layered".into(),
            node_id: "node-1".into(),
            stage: "firstboot-update".into(),
            message: "could not pull".into(),
            image: "quay.io".into(),
            reported_at: std::time::SystemTime::UNIX_EPOCH,
        };
        let planned = emitter
            .on_notice(
                Notice::FirstbootFailed {
                    address: "10.0.0.7".parse().unwrap(),
                    failure,
                },
                &snapshot(Vec::new()),
            )
            .expect("an Event on the pool");
        tokio::time::timeout(RETRY_FOR, emitter.publish(planned))
            .await
            .expect("the write ends within its retry time");
        let seen = tokio::time::timeout(Duration::from_secs(5), api)
            .await
            .expect("the API took a write")
            .unwrap();
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(
            seen.iter()
                .all(|l| l.starts_with("POST /apis/events.k8s.io/v1/namespaces/default/events")),
            "{seen:?}"
        );
        let text = metrics.encode();
        assert!(
            text.contains(r#"mcs_events_total{result="published"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mcs_events_total{result="failed"} 0"#)
                || !text.contains(r#"result="failed"} 1"#),
            "{text}"
        );
    }

    #[tokio::test]
    async fn each_failure_report_is_announced_once() {
        let (notices, mut receiver) = EventNotices::channel(Arc::new(Metrics::new()));
        let failure = |at: u64| crate::server::served::FailureRecord {
            pool: "worker".into(),
            node_id: "node-1".into(),
            stage: "pivot".into(),
            message: "m".into(),
            image: "none".into(),
            reported_at: std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(at),
        };
        let address: std::net::IpAddr = "10.0.0.7".parse().unwrap();
        let (first, second) = (failure(1), failure(2));
        for _ in 0..3 {
            notices.firstboot_failures([(address, &first)]);
        }
        notices.firstboot_failures([(address, &first), (address, &second)]);
        drop(notices);
        let mut times = Vec::new();
        while let Some(notice) = receiver.recv().await {
            if let Notice::FirstbootFailed { failure, .. } = notice {
                times.push(failure.reported_at);
            }
        }
        assert_eq!(times, [first.reported_at, second.reported_at]);
    }

    #[tokio::test]
    async fn a_node_is_announced_once() {
        let (notices, mut receiver) = EventNotices::channel(Arc::new(Metrics::new()));
        let record = worker_record();
        let node = validating_node();
        for _ in 0..100 {
            notices.first_config_served(&node, &record);
        }
        let mut other = (*node).clone();
        other.metadata.uid = Some("another-uid".into());
        notices.first_config_served(&other, &record);
        drop(notices);
        let mut uids = Vec::new();
        while let Some(notice) = receiver.recv().await {
            if let Notice::FirstConfigServed { node, .. } = notice {
                uids.push(node.uid.unwrap_or_default());
            }
        }
        assert_eq!(uids, ["node-uid", "another-uid"]);
    }
}
