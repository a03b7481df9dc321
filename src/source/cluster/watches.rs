//! One kube-runtime reflector per watched kind, and the bookkeeping around it: which caches
//! have completed their initial list, what to log when a watch fails, and a wake-up for the
//! snapshot builder on every change.
//!
//! Owns the watch tasks and their stores; it never builds snapshots and never serves.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
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
use super::slim_mcn;
use crate::api::imagebuild::{MachineOSBuild, MachineOSConfig, Route};
use crate::api::machineconfignode::MachineConfigNode;
use crate::api::{ControllerConfig, MachineConfig, MachineConfigPool};
use crate::render::layered::REGISTRY_NAMESPACE;

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
    /// Copies the current contents of every cache (cheap: objects are shared `Arc`s).
    pub fn objects(&self) -> ClusterObjects {
        let mut objects = ClusterObjects {
            pools: self.pools.state(),
            machine_configs: self.machine_configs.state(),
            controller_configs: self.controller_configs.state(),
            config_maps: self.config_maps.state(),
            machine_os_configs: self.machine_os_configs.state(),
            machine_os_builds: self.machine_os_builds.state(),
            nodes: self.nodes.state(),
            machine_config_nodes: self.machine_config_nodes.state(),
            services: self.services.state(),
            routes: self.routes.state(),
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

    /// Marks `kind` synced; true the first time.
    fn mark_synced(&self, kind: &'static str) -> bool {
        let mut synced = self.lock();
        let first = !synced.get(kind).copied().unwrap_or(false);
        synced.insert(kind, true);
        first
    }

    /// True once every registered cache has synced.
    pub fn all_synced(&self) -> bool {
        self.lock().values().all(|synced| *synced)
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
}

/// How one kind is watched.
struct Watched {
    /// Kind name (`MachineConfigPool`), used in logs and metric labels.
    kind: &'static str,
    /// Tolerate the API not being served (404 on list): count as synced and empty.
    optional: bool,
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
            .spawn(ctx, &mut tasks),
        machine_config_nodes: Watch::new(Api::all(client.clone()), all(), "MachineConfigNode")
            .optional()
            .trim(slim_mcn::keep_what_is_read)
            .spawn(ctx, &mut tasks),
        services: Watch::new(
            Api::namespaced(client.clone(), REGISTRY_NAMESPACE),
            all(),
            "Service",
        )
        .spawn(ctx, &mut tasks),
        routes: Watch::new(
            Api::namespaced(client.clone(), REGISTRY_NAMESPACE),
            all(),
            "Route",
        )
        .optional()
        .spawn(ctx, &mut tasks),
    };
    (caches, tasks)
}

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

    /// Starts the reflector; its task joins `tasks`.
    fn spawn(self, ctx: &WatchContext, tasks: &mut Vec<JoinHandle<()>>) -> Store<Lenient<K>> {
        let Watch {
            api,
            config,
            watched,
            trim,
            digest,
            share_unchanged,
        } = self;
        ctx.sync.register(watched.kind);
        let (reader, writer) = reflector::store();
        let cached = reader.clone();
        let stream = watcher::watcher(api, config)
            .default_backoff()
            .modify(move |object: &mut Lenient<K>| {
                object.modify_object(trim);
                if let Some(share) = share_unchanged {
                    if let Some(previous) = cached.get(&ObjectRef::from_obj(object)) {
                        share(object, &previous);
                    }
                }
            })
            .reflect(writer);
        tasks.push(tokio::spawn(run_watch(
            stream,
            watched,
            digest,
            ctx.clone(),
        )));
        reader
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

async fn run_watch<K, S>(
    stream: S,
    watched: Watched,
    digest: Option<fn(&K) -> u64>,
    ctx: WatchContext,
) where
    S: futures::Stream<Item = Result<Event<Lenient<K>>, watcher::Error>> + Send,
{
    let mut digests = Digests::default();
    let WatchContext {
        changed,
        sync,
        observer,
        mut shutdown,
    } = ctx;
    let kind = watched.kind;
    let mut stream = std::pin::pin!(stream);
    let mut listed_before = false;
    let mut logged_failure: Option<&'static str> = None;
    loop {
        let item = tokio::select! {
            _ = shutdown.changed() => break,
            item = stream.next() => item,
        };
        let Some(item) = item else { break };
        match item {
            Ok(Event::Init) => {
                digests.0.clear();
                if listed_before {
                    debug!(kind, "watch restarted with a full list");
                    observer.watch_restarted(kind);
                }
            }
            Ok(Event::InitApply(object)) => {
                digests.changed(digest, &object);
            }
            Ok(Event::InitDone) => {
                listed_before = true;
                if sync.mark_synced(kind) {
                    info!(kind, "cache synced");
                }
                recovered(kind, &mut logged_failure);
                observer.cache_synced(kind);
                changed.notify_one();
            }
            Ok(Event::Apply(object)) => {
                recovered(kind, &mut logged_failure);
                observer.cache_updated(kind);
                if digests.changed(digest, &object) {
                    changed.notify_one();
                }
            }
            Ok(Event::Delete(object)) => {
                digests.0.remove(object.name());
                recovered(kind, &mut logged_failure);
                observer.cache_updated(kind);
                changed.notify_one();
            }
            Err(error) => {
                let reason = failure_reason(&error);
                observer.watch_failed(kind, reason);
                if reason == "not_found" && watched.optional && !listed_before {
                    if sync.mark_synced(kind) {
                        info!(kind, "API is not served by this cluster; treating it as empty (retried in the background)");
                        changed.notify_one();
                    }
                    logged_failure = Some(reason);
                    continue;
                }
                // Unreachability is logged once for all kinds by the client's reachability
                // layer; other failures once per kind until the watch works again.
                if reason == "unreachable" || reason == "gone" {
                    debug!(kind, %error, "watch interrupted; retrying with backoff");
                } else if logged_failure != Some(reason) {
                    warn!(kind, reason, %error, "watch failed; retrying with backoff");
                }
                logged_failure = Some(reason);
            }
        }
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
}
