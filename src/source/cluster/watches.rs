//! One kube-runtime watcher per watched kind feeding a reflector store, and the bookkeeping
//! around it: which caches have completed their initial list, what to log when a watch fails,
//! and a wake-up for the snapshot builder on every change.
//!
//! What the original reads is always watched. What only the features beyond it read (Nodes and
//! MachineConfigNodes) is watched only while [`Grants`] allow it: the watch waits for the grant,
//! stops (its cache emptied, no longer synced) when the grant goes, and a 403 is reported to
//! [`Rights`] instead of being retried. The registry's Services and Routes are watched where
//! `watch` is granted, else listed again every [`DEFAULT_LIST_INTERVAL`] (the original's rights
//! are `get` and `list`).
//!
//! Owns the watch tasks and their stores; it never builds snapshots and never serves.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use kube::api::ListParams;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::build::{node_digest, ClusterObjects, CONTROLLER_CONFIG_NAME};
use super::lenient::{Decode, Lenient};
use super::observe::ClusterObserver;
use super::rights::Rights;
use super::slim_mcn;
use crate::api::imagebuild::{MachineOSBuild, MachineOSConfig, Route};
use crate::api::machineconfignode::MachineConfigNode;
use crate::api::{ControllerConfig, MachineConfig, MachineConfigPool};
use crate::render::layered::REGISTRY_NAMESPACE;
use crate::rights::{Feature, Grants};
use crate::snapshot::{Input, LayeredGate};

/// How often a kind that may be listed but not watched is listed again.
pub const DEFAULT_LIST_INTERVAL: Duration = Duration::from_secs(30);

/// Namespace of the machine-config components (the `kubeconfig-data` ConfigMap).
pub const MCO_NAMESPACE: &str = "openshift-machine-config-operator";
/// ConfigMap whose `binaryData["ca-bundle.crt"]` overrides the served kubeconfig's CA.
pub const KUBECONFIG_DATA_CONFIG_MAP: &str = "kubeconfig-data";

/// Read handles on every watch cache.
#[derive(Clone)]
pub struct Caches {
    pools: Store<Lenient<MachineConfigPool>>,
    machine_configs: Store<Lenient<MachineConfig>>,
    controller_configs: Store<Lenient<ControllerConfig>>,
    config_maps: Store<Lenient<ConfigMap>>,
    machine_os_configs: Store<Lenient<MachineOSConfig>>,
    machine_os_builds: Store<Lenient<MachineOSBuild>>,
    nodes: Store<Lenient<Node>>,
    machine_config_nodes: Store<Lenient<MachineConfigNode>>,
    services: Store<Lenient<Service>>,
    routes: Store<Lenient<Route>>,
}

impl Caches {
    /// Copies the current contents of every cache (cheap: objects are shared `Arc`s); a cache
    /// that has not synced counts as empty. `synced` and `gate` are recorded with them.
    pub fn objects(&self, synced: &BTreeSet<Input>, gate: LayeredGate) -> ClusterObjects {
        fn state<K: Resource + Clone>(
            store: &Store<K>,
            input: Input,
            synced: &BTreeSet<Input>,
        ) -> Vec<Arc<K>>
        where
            K::DynamicType: std::hash::Hash + Eq + Clone,
        {
            if synced.contains(&input) {
                store.state()
            } else {
                Vec::new()
            }
        }
        let mut objects = ClusterObjects {
            pools: state(&self.pools, Input::MachineConfigPools, synced),
            machine_configs: state(&self.machine_configs, Input::MachineConfigs, synced),
            controller_configs: state(&self.controller_configs, Input::ControllerConfig, synced),
            config_maps: state(&self.config_maps, Input::KubeconfigData, synced),
            machine_os_configs: state(&self.machine_os_configs, Input::MachineOSConfigs, synced),
            machine_os_builds: state(&self.machine_os_builds, Input::MachineOSBuilds, synced),
            nodes: state(&self.nodes, Input::Nodes, synced),
            machine_config_nodes: state(
                &self.machine_config_nodes,
                Input::MachineConfigNodes,
                synced,
            ),
            services: state(&self.services, Input::RegistryServices, synced),
            routes: state(&self.routes, Input::RegistryRoutes, synced),
            synced: synced.clone(),
            gate,
            // Not a cache: the builder sets it.
            failure_reporting: None,
        };
        objects.sort();
        objects
    }
}

/// Which caches have completed their initial list. A kind whose API the server does not serve
/// (e.g. Routes on plain Kubernetes) counts as synced and empty when it is optional.
#[derive(Debug, Default)]
pub struct SyncTracker {
    synced: Mutex<BTreeMap<&'static str, bool>>,
}

impl SyncTracker {
    fn register(&self, kind: &'static str) {
        self.lock().insert(kind, false);
    }

    /// Marks `kind` synced; true the first time (since it was registered or stopped).
    fn mark_synced(&self, kind: &'static str) -> bool {
        let mut synced = self.lock();
        let first = !synced.get(kind).copied().unwrap_or(false);
        synced.insert(kind, true);
        first
    }

    /// Marks `kind` not synced: its watch stopped (the grant it needs went) or starts over.
    fn mark_unsynced(&self, kind: &'static str) {
        self.lock().insert(kind, false);
    }

    /// True once every registered cache has synced.
    pub fn all_synced(&self) -> bool {
        self.lock().values().all(|synced| *synced)
    }

    /// The inputs whose caches have synced.
    pub fn synced_inputs(&self) -> BTreeSet<Input> {
        self.lock()
            .iter()
            .filter(|(_, synced)| **synced)
            .filter_map(|(kind, _)| Input::of_kind(kind))
            .collect()
    }

    /// Kinds still waiting for their initial list (for the "not ready yet" log line).
    pub fn pending(&self) -> Vec<&'static str> {
        self.lock()
            .iter()
            .filter(|(_, synced)| !**synced)
            .map(|(kind, _)| *kind)
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, bool>> {
        match self.synced.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// What every watch task shares.
#[derive(Clone)]
pub struct WatchContext {
    /// Woken on every cache change (and when a cache syncs).
    pub changed: Arc<Notify>,
    pub sync: Arc<SyncTracker>,
    pub observer: Arc<dyn ClusterObserver>,
    pub shutdown: watch::Receiver<bool>,
    /// What this identity may do; gated kinds follow it.
    pub rights: Rights,
    /// How often a kind that may only be listed is listed again.
    pub list_interval: Duration,
}

/// How one kind is watched.
struct Watched {
    /// Kind name (`MachineConfigPool`), used in logs and metric labels.
    kind: &'static str,
    /// Tolerate the API not being served (404 on list): count as synced and empty.
    optional: bool,
    /// When the kind is followed at all, and how.
    follow: Follow,
}

/// When and how a kind is followed.
#[derive(Clone, Copy)]
enum Follow {
    /// Watched from start to shutdown (what the original reads).
    Always,
    /// Watched while `allowed` holds (a feature that reads it is on); a 403 turns `features`
    /// off instead of being retried.
    WhileGranted {
        allowed: fn(&Grants) -> bool,
        features: &'static [Feature],
    },
    /// Watched while `watch_allowed` holds, else listed every `WatchContext::list_interval`.
    WatchOrList { watch_allowed: fn(&Grants) -> bool },
}

/// Starts a reflector for every kind the cluster source reads; returns the caches and the
/// watch tasks.
pub fn spawn_all(client: &Client, ctx: &WatchContext) -> (Caches, Vec<JoinHandle<()>>) {
    let mut tasks = Vec::new();
    let all = || watcher::Config::default();
    let named = |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));

    let caches = Caches {
        pools: Watch::new(Api::all(client.clone()), all(), "MachineConfigPool")
            .spawn(ctx, &mut tasks),
        machine_configs: Watch::new(Api::all(client.clone()), all(), "MachineConfig")
            .spawn(ctx, &mut tasks),
        controller_configs: Watch::new(
            Api::all(client.clone()),
            named(CONTROLLER_CONFIG_NAME),
            "ControllerConfig",
        )
        .spawn(ctx, &mut tasks),
        config_maps: Watch::new(
            Api::namespaced(client.clone(), MCO_NAMESPACE),
            named(KUBECONFIG_DATA_CONFIG_MAP),
            "ConfigMap",
        )
        .spawn(ctx, &mut tasks),
        machine_os_configs: Watch::new(Api::all(client.clone()), all(), "MachineOSConfig")
            .optional()
            .spawn(ctx, &mut tasks),
        machine_os_builds: Watch::new(Api::all(client.clone()), all(), "MachineOSBuild")
            .optional()
            .spawn(ctx, &mut tasks),
        nodes: Watch::new(Api::all(client.clone()), all(), "Node")
            .digest(node_digest)
            .share_unchanged(Lenient::share_unchanged)
            .follow(NODE_READERS)
            .spawn(ctx, &mut tasks),
        machine_config_nodes: Watch::new(Api::all(client.clone()), all(), "MachineConfigNode")
            .optional()
            .trim(slim_mcn::keep_what_is_read)
            .follow(NODE_READERS)
            .spawn(ctx, &mut tasks),
        services: Watch::new(
            Api::namespaced(client.clone(), REGISTRY_NAMESPACE),
            all(),
            "Service",
        )
        .follow(Follow::WatchOrList {
            watch_allowed: Grants::watch_services,
        })
        .spawn(ctx, &mut tasks),
        routes: Watch::new(
            Api::namespaced(client.clone(), REGISTRY_NAMESPACE),
            all(),
            "Route",
        )
        .optional()
        .follow(Follow::WatchOrList {
            watch_allowed: Grants::watch_routes,
        })
        .spawn(ctx, &mut tasks),
    };
    (caches, tasks)
}

/// Nodes and MachineConfigNodes: read only by the Node-validated layered gate and the
/// MachineConfigNode publisher.
const NODE_READERS: Follow = Follow::WhileGranted {
    allowed: Grants::watch_nodes,
    features: &[Feature::LayeredNodeGate, Feature::McnPublisher],
};

/// Gives an update the cached object's copy when what is kept of it did not change.
type ShareUnchanged<K> = fn(&mut Lenient<K>, &Lenient<K>);

/// One reflector to start: what it watches and how each object is kept.
struct Watch<K: Resource<DynamicType = ()>> {
    api: Api<Lenient<K>>,
    config: watcher::Config,
    watched: Watched,
    /// Drops what the server never reads before the object is cached.
    trim: fn(&mut K),
    /// Summarises what the server reads of an object: an update that leaves it unchanged (a
    /// kubelet's status heartbeat) still refreshes the cache but does not wake the snapshot
    /// builder.
    digest: Option<fn(&K) -> u64>,
    /// Gives an update the cached object's copy when what is kept of it did not change (see
    /// [`Lenient::share_unchanged`]).
    share_unchanged: Option<ShareUnchanged<K>>,
}

impl<K> Watch<K>
where
    K: Resource<DynamicType = ()> + Clone + Decode + Debug + Send + Sync + 'static,
{
    /// A required kind (its list must succeed before the source is ready), kept whole.
    fn new(api: Api<Lenient<K>>, config: watcher::Config, kind: &'static str) -> Self {
        Watch {
            api,
            config,
            watched: Watched {
                kind,
                optional: false,
                follow: Follow::Always,
            },
            trim: |_| {},
            digest: None,
            share_unchanged: None,
        }
    }

    fn optional(mut self) -> Self {
        self.watched.optional = true;
        self
    }

    fn follow(mut self, follow: Follow) -> Self {
        self.watched.follow = follow;
        self
    }

    fn trim(mut self, trim: fn(&mut K)) -> Self {
        self.trim = trim;
        self
    }

    fn digest(mut self, digest: fn(&K) -> u64) -> Self {
        self.digest = Some(digest);
        self
    }

    fn share_unchanged(mut self, share: ShareUnchanged<K>) -> Self {
        self.share_unchanged = Some(share);
        self
    }

    /// Starts following the kind; its task joins `tasks`.
    fn spawn(self, ctx: &WatchContext, tasks: &mut Vec<JoinHandle<()>>) -> Store<Lenient<K>> {
        ctx.sync.register(self.watched.kind);
        let (reader, writer) = reflector::store();
        tasks.push(tokio::spawn(follow(
            self,
            reader.clone(),
            writer,
            ctx.clone(),
        )));
        reader
    }
}

/// Why one run of a watch or list loop ended.
enum Stopped {
    Shutdown,
    /// The grant it needs went, or the way to follow the kind changed: start over.
    Regrant,
    /// The API server refused it (403): reported, then wait for the grant to change.
    Forbidden,
}

/// Follows one kind until shutdown: as its [`Follow`] says, starting over whenever the grants
/// change what it may do.
async fn follow<K>(
    watch: Watch<K>,
    reader: Store<Lenient<K>>,
    mut writer: reflector::store::Writer<Lenient<K>>,
    ctx: WatchContext,
) where
    K: Resource<DynamicType = ()> + Clone + Decode + Debug + Send + Sync + 'static,
{
    let kind = watch.watched.kind;
    let mut grants = ctx.rights.subscribe();
    let mut shutdown = ctx.shutdown.clone();
    loop {
        let current = grants.borrow_and_update().clone();
        let stopped = match watch.watched.follow {
            Follow::Always => run_watch(&watch, &reader, &mut writer, &ctx, None).await,
            Follow::WhileGranted { allowed, features } => {
                if !allowed(&current) {
                    tokio::select! {
                        _ = shutdown.changed() => return,
                        _ = grants.changed() => continue,
                    }
                }
                let until = move |grants: &Grants| !allowed(grants);
                let stopped = run_watch(&watch, &reader, &mut writer, &ctx, Some(&until)).await;
                if let Stopped::Forbidden = stopped {
                    for feature in features {
                        ctx.rights
                            .refused(*feature, &format!("list or watch {}", plural(kind)));
                    }
                }
                stopped
            }
            Follow::WatchOrList { watch_allowed } => {
                if watch_allowed(&current) {
                    let until = move |grants: &Grants| !watch_allowed(grants);
                    run_watch(&watch, &reader, &mut writer, &ctx, Some(&until)).await
                } else {
                    let until = move |grants: &Grants| watch_allowed(grants);
                    run_list(&watch, &mut writer, &ctx, &until).await
                }
            }
        };
        match stopped {
            Stopped::Shutdown => return,
            Stopped::Regrant => {}
            Stopped::Forbidden => {
                // Not retried: the grants decide when it runs again.
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = grants.changed() => {}
                }
            }
        }
        // A kind no feature reads any more is emptied and no longer counts as synced; a kind
        // that changes from listing to watching keeps its cache (the watch replaces it).
        if !matches!(watch.watched.follow, Follow::WatchOrList { .. }) {
            writer.apply_watcher_event(&Event::Init);
            writer.apply_watcher_event(&Event::InitDone);
            ctx.sync.mark_unsynced(kind);
            ctx.changed.notify_one();
        }
    }
}

/// `nodes` for `Node` (log lines and refusals).
fn plural(kind: &str) -> String {
    format!("{}s", kind.to_ascii_lowercase())
}

/// Watches the kind until shutdown, until `until` holds for the grants, or a 403 (when `until`
/// is given: a gated or switchable watch is not retried against a 403).
async fn run_watch<K>(
    watch: &Watch<K>,
    reader: &Store<Lenient<K>>,
    writer: &mut reflector::store::Writer<Lenient<K>>,
    ctx: &WatchContext,
    until: Option<&(dyn Fn(&Grants) -> bool + Sync)>,
) -> Stopped
where
    K: Resource<DynamicType = ()> + Clone + Decode + Debug + Send + Sync + 'static,
{
    let (trim, share_unchanged) = (watch.trim, watch.share_unchanged);
    let cached = reader.clone();
    // No stream backoff: the pause after an error is chosen below, by the error.
    let stream = watcher::watcher(watch.api.clone(), watch.config.clone()).modify(
        move |object: &mut Lenient<K>| {
            object.modify_object(trim);
            if let Some(share) = share_unchanged {
                if let Some(previous) = cached.get(&ObjectRef::from_obj(object)) {
                    share(object, &previous);
                }
            }
        },
    );
    let mut digests = Digests::default();
    let kind = watch.watched.kind;
    let mut stream = std::pin::pin!(stream);
    let mut listed_before = false;
    let mut logged_failure: Option<&'static str> = None;
    let mut shutdown = ctx.shutdown.clone();
    let mut grants = ctx.rights.subscribe();
    let mut backoff = watcher::DefaultBackoff::default();
    let mut expired = ExpiredBackoff::default();
    loop {
        let item = tokio::select! {
            _ = shutdown.changed() => return Stopped::Shutdown,
            _ = grants.changed(), if until.is_some() => {
                if until.is_some_and(|until| until(&grants.borrow_and_update())) {
                    return Stopped::Regrant;
                }
                continue;
            }
            item = stream.next() => item,
        };
        let Some(item) = item else {
            return Stopped::Shutdown;
        };
        if let Ok(event) = &item {
            writer.apply_watcher_event(event);
            kube::runtime::utils::Backoff::reset(&mut backoff);
        }
        match item {
            Ok(Event::Init) => {
                digests.0.clear();
                if listed_before {
                    debug!(kind, "watch restarted with a full list");
                    ctx.observer.watch_restarted(kind);
                }
            }
            Ok(Event::InitApply(object)) => {
                digests.changed(watch.digest, &object);
            }
            Ok(Event::InitDone) => {
                listed_before = true;
                synced(kind, ctx);
                recovered(kind, &mut logged_failure);
            }
            Ok(Event::Apply(object)) => {
                recovered(kind, &mut logged_failure);
                ctx.observer.cache_updated(kind);
                if digests.changed(watch.digest, &object) {
                    ctx.changed.notify_one();
                }
            }
            Ok(Event::Delete(object)) => {
                digests.0.remove(object.name());
                recovered(kind, &mut logged_failure);
                ctx.observer.cache_updated(kind);
                ctx.changed.notify_one();
            }
            Err(error) => {
                let reason = failure_reason(&error);
                ctx.observer.watch_failed(kind, reason);
                if reason == "not_found" && watch.watched.optional && !listed_before {
                    if ctx.sync.mark_synced(kind) {
                        info!(kind, "API is not served by this cluster; treating it as empty (retried in the background)");
                        ctx.changed.notify_one();
                    }
                    logged_failure = Some(reason);
                    if pause(backoff.next(), &mut shutdown).await {
                        return Stopped::Shutdown;
                    }
                    continue;
                }
                if reason == "forbidden" && until.is_some() {
                    debug!(kind, %error, "watch forbidden; not retried until the rights change");
                    return Stopped::Forbidden;
                }
                // Unreachability is logged once for all kinds by the client's reachability
                // layer; other failures once per kind until the watch works again.
                if reason == "unreachable" || reason == "gone" {
                    debug!(kind, %error, "watch interrupted; retrying with backoff");
                } else if logged_failure != Some(reason) {
                    warn!(kind, reason, %error, "watch failed; retrying with backoff");
                }
                logged_failure = Some(reason);
                // A watch that resumed too late (410 Gone) only needs its list again: it
                // relists at once, not after the backoff its outage built up (found by the
                // rehearsal: an API server restart then a 410 kept a replica's pools 5 s
                // stale). Repeated 410s back off on their own.
                let wait = if reason == "gone" {
                    Some(expired.next(std::time::Instant::now()))
                } else {
                    backoff.next()
                };
                if pause(wait, &mut shutdown).await {
                    return Stopped::Shutdown;
                }
            }
        }
    }
}

/// Sleeps `wait` (30 s when the backoff gives none), or until shutdown (then true).
async fn pause(wait: Option<Duration>, shutdown: &mut watch::Receiver<bool>) -> bool {
    let wait = wait.unwrap_or(Duration::from_secs(30));
    tokio::select! {
        _ = shutdown.changed() => true,
        () = tokio::time::sleep(wait) => false,
    }
}

/// The pause before relisting after a 410 Gone: 100 ms the first time, doubling (to 30 s) while
/// they keep coming, from 100 ms again once a minute has passed without one. Pure.
#[derive(Debug, Default)]
struct ExpiredBackoff {
    last: Option<(std::time::Instant, Duration)>,
}

impl ExpiredBackoff {
    const FIRST: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(30);
    const QUIET: Duration = Duration::from_secs(60);

    fn next(&mut self, now: std::time::Instant) -> Duration {
        let wait = match self.last {
            Some((at, wait)) if now.saturating_duration_since(at) < Self::QUIET => {
                (wait * 2).min(Self::MAX)
            }
            _ => Self::FIRST,
        };
        self.last = Some((now, wait));
        wait
    }
}

/// The cache of `kind` holds a complete list.
fn synced(kind: &'static str, ctx: &WatchContext) {
    if ctx.sync.mark_synced(kind) {
        info!(kind, "cache synced");
    }
    ctx.observer.cache_synced(kind);
    ctx.changed.notify_one();
}

/// Lists the kind every `list_interval` (only `list` is granted) until shutdown or until
/// `until` holds for the grants.
async fn run_list<K>(
    watch: &Watch<K>,
    writer: &mut reflector::store::Writer<Lenient<K>>,
    ctx: &WatchContext,
    until: &(dyn Fn(&Grants) -> bool + Sync),
) -> Stopped
where
    K: Resource<DynamicType = ()> + Clone + Decode + Debug + Send + Sync + 'static,
{
    let kind = watch.watched.kind;
    let mut shutdown = ctx.shutdown.clone();
    let mut grants = ctx.rights.subscribe();
    let mut logged_failure: Option<&'static str> = None;
    let mut said_listing = false;
    let mut params = ListParams::default();
    if let Some(fields) = &watch.config.field_selector {
        params = params.fields(fields);
    }
    loop {
        match watch.api.list(&params).await {
            Ok(list) => {
                if !said_listing {
                    info!(
                        kind,
                        interval_s = ctx.list_interval.as_secs(),
                        "listing at an interval: this identity may list but not watch them"
                    );
                    said_listing = true;
                }
                writer.apply_watcher_event(&Event::Init);
                for mut object in list.items {
                    object.modify_object(watch.trim);
                    writer.apply_watcher_event(&Event::InitApply(object));
                }
                writer.apply_watcher_event(&Event::InitDone);
                synced(kind, ctx);
                recovered(kind, &mut logged_failure);
            }
            Err(error) => {
                let reason = client_failure_reason(&error);
                ctx.observer.watch_failed(kind, reason);
                if reason == "not_found" && watch.watched.optional {
                    writer.apply_watcher_event(&Event::Init);
                    writer.apply_watcher_event(&Event::InitDone);
                    if ctx.sync.mark_synced(kind) {
                        info!(kind, "API is not served by this cluster; treating it as empty (listed again at an interval)");
                        ctx.changed.notify_one();
                    }
                } else if reason != "unreachable" && logged_failure != Some(reason) {
                    warn!(kind, reason, %error, "list failed; listed again at an interval");
                }
                logged_failure = Some(reason);
            }
        }
        tokio::select! {
            _ = shutdown.changed() => return Stopped::Shutdown,
            _ = tokio::time::sleep(ctx.list_interval) => {}
            _ = grants.changed() => {
                if until(&grants.borrow_and_update()) {
                    return Stopped::Regrant;
                }
            }
        }
    }
}

/// The last digest seen per object; `None` digests (no digest function, or an object that
/// did not decode) always count as a change.
#[derive(Default)]
struct Digests(std::collections::HashMap<String, u64>);

impl Digests {
    /// Records the object's digest; true when it differs from the last one (or is unknown).
    fn changed<K>(&mut self, digest: Option<fn(&K) -> u64>, object: &Lenient<K>) -> bool {
        let Some(value) = digest.and_then(|d| object.object().ok().map(|o| d(o))) else {
            return true;
        };
        self.0.insert(object.name().to_owned(), value) != Some(value)
    }
}

fn recovered(kind: &'static str, logged_failure: &mut Option<&'static str>) {
    if let Some(reason) = logged_failure.take() {
        if reason != "unreachable" && reason != "gone" && reason != "not_found" {
            info!(kind, "watch works again");
        }
    }
}

/// A short label for a watch failure (metric label and log field).
pub fn failure_reason(error: &watcher::Error) -> &'static str {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => client_failure_reason(e),
        watcher::Error::WatchError(status) => status_reason(status.code),
        watcher::Error::NoResourceVersion => "api_error",
    }
}

fn client_failure_reason(error: &kube::Error) -> &'static str {
    match error {
        kube::Error::Api(status) => status_reason(status.code),
        kube::Error::SerdeError(_) => "decode",
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            "unreachable"
        }
        _ => "api_error",
    }
}

fn status_reason(code: u16) -> &'static str {
    match code {
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        410 => "gone",
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("x", "y").with_code(code).boxed())
    }

    #[test]
    fn failures_are_labelled_by_what_an_operator_must_do() {
        let list = |code| failure_reason(&watcher::Error::InitialListFailed(api_error(code)));
        assert_eq!(list(403), "forbidden");
        assert_eq!(list(404), "not_found");
        assert_eq!(list(500), "api_error");
        let gone = watcher::Error::WatchError(
            Status::failure("too old", "Expired").with_code(410).boxed(),
        );
        assert_eq!(failure_reason(&gone), "gone");
        let refused =
            watcher::Error::WatchStartFailed(kube::Error::Service("connection refused".into()));
        assert_eq!(failure_reason(&refused), "unreachable");
    }

    fn full_node(heartbeat: &str) -> Lenient<Node> {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "w1", "uid": "u1", "resourceVersion": heartbeat,
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"node-role.kubernetes.io/worker": ""},
                "annotations": {"machineconfiguration.openshift.io/state": "Done"},
                "managedFields": [{"manager": "kubelet", "operation": "Update"}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x"}]
            },
            "spec": {"providerID": "aws:///i-1", "podCIDR": "10.128.0.0/24"},
            "status": {
                "phase": "Running",
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": format!("2026-01-01T00:00:{heartbeat}Z")}],
                "capacity": {"cpu": "8"},
                "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "c",
                             "kernelVersion": "k", "kubeProxyVersion": "p", "kubeletVersion": "v",
                             "machineID": "m", "operatingSystem": "linux", "osImage": "o", "systemUUID": "s"},
                "images": [{"names": ["quay.io/x@sha256:00"], "sizeBytes": 1}]
            }
        }))
        .expect("decodes")
    }

    #[test]
    fn heartbeats_do_not_count_as_changes() {
        let digest: Option<fn(&Node) -> u64> = Some(node_digest);
        let mut digests = Digests::default();
        assert!(digests.changed(digest, &full_node("10")));
        assert!(!digests.changed(digest, &full_node("20")));
        let mut relabelled = full_node("30");
        relabelled.modify_object(|n| {
            n.metadata
                .labels
                .get_or_insert_default()
                .insert("node-role.kubernetes.io/infra".into(), String::new());
        });
        assert!(digests.changed(digest, &relabelled));
        // Without a digest function every update is a change.
        assert!(Digests::default().changed(None, &full_node("10")));
    }

    #[test]
    fn optional_kinds_count_as_synced_once() {
        let sync = SyncTracker::default();
        sync.register("Route");
        sync.register("Node");
        assert!(!sync.all_synced());
        assert!(sync.mark_synced("Route"));
        assert!(!sync.mark_synced("Route"));
        assert_eq!(sync.pending(), ["Node"]);
        assert!(sync.mark_synced("Node"));
        assert!(sync.all_synced());
    }

    #[test]
    fn a_410_relists_at_once_and_repeated_ones_back_off() {
        let mut expired = super::ExpiredBackoff::default();
        let t = std::time::Instant::now();
        let ms = std::time::Duration::from_millis;
        assert_eq!(expired.next(t), ms(100));
        assert_eq!(expired.next(t + ms(500)), ms(200));
        assert_eq!(expired.next(t + ms(900)), ms(400));
        // A minute without one: the first pause again.
        assert_eq!(expired.next(t + ms(62_000)), ms(100));
    }
}
