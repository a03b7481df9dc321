//! The cluster source in process against an HTTP Kubernetes API (the in-test fake, with list +
//! resourceVersion, watch streams, bookmarks, 410 Gone, 404 for APIs it does not serve): what
//! it publishes, when it is ready, how fast pool changes arrive, token/CA rotation, API outages
//! and missing APIs. The real objects come from `shared/fixtures/bootstrap-realistic`.
//! (The same behaviour through the binary and HTTP is in `cluster_http.rs`.)

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::tier;

use machine_config_server::snapshot::{Mode, Snapshot};
use machine_config_server::source::cluster::{
    self, ClusterObserver, ClusterSettings, ClusterSource,
};
use serde_json::json;
use support::api_server::{ApiServer, Options};
use support::cluster::{
    copy_rendered_config, load_realistic_cluster, token_dir, APISERVER_URL, FILE_CA,
    WORKER_RENDERED,
};
use tokio::sync::oneshot;

const DEADLINE: Duration = Duration::from_secs(30);
/// The promise for pool changes.
const WITHIN_A_SECOND: Duration = Duration::from_secs(1);

/// Records what the source reports.
#[derive(Default)]
struct Recorder {
    reachability: Mutex<Vec<bool>>,
    restarts: Mutex<Vec<&'static str>>,
    synced: Mutex<BTreeSet<&'static str>>,
}

impl ClusterObserver for Recorder {
    fn watch_restarted(&self, kind: &'static str) {
        self.restarts.lock().unwrap().push(kind);
    }
    fn cache_synced(&self, kind: &'static str) {
        self.synced.lock().unwrap().insert(kind);
    }
    fn api_reachability_changed(&self, reachable: bool) {
        self.reachability.lock().unwrap().push(reachable);
    }
}

impl Recorder {
    fn last_reachability(&self) -> Option<bool> {
        self.reachability.lock().unwrap().last().copied()
    }
}

struct Harness {
    api: ApiServer,
    source: Option<ClusterSource>,
    observer: Arc<Recorder>,
    token_dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
}

impl Harness {
    /// A fake API server holding the realistic cluster, a token directory, and the source
    /// started against them (not yet necessarily synced).
    async fn start(options: Options) -> Harness {
        let mut harness = Harness::new(options);
        harness.start_source().await;
        harness
    }

    /// The API server and the token directory, without the source.
    fn new(options: Options) -> Harness {
        let api = ApiServer::start(options);
        load_realistic_cluster(&api);
        let token_dir = token_dir();
        Harness {
            api,
            source: None,
            observer: Arc::new(Recorder::default()),
            token_dir,
            stop: None,
        }
    }

    async fn start_source(&mut self) {
        let mut settings = ClusterSettings::new(APISERVER_URL);
        settings.kubeconfig = Some(self.api.kubeconfig_file().to_path_buf());
        settings.bootstrap_token_dir = self.token_dir.path().to_path_buf();
        settings.token_poll_interval = Duration::from_millis(200);
        let (stop, stopped) = oneshot::channel::<()>();
        let source = cluster::start(settings, self.observer.clone(), async {
            let _ = stopped.await;
        })
        .await
        .unwrap_or_else(|e| panic!("cluster source: {e}"));
        self.source = Some(source);
        self.stop = Some(stop);
    }

    fn source(&self) -> &ClusterSource {
        self.source.as_ref().expect("started")
    }

    async fn ready(&self) -> Arc<Snapshot> {
        let mut ready = self.source().ready.clone();
        tokio::time::timeout(DEADLINE, ready.wait_for(|r| *r))
            .await
            .expect("source ready in time")
            .expect("source running");
        self.snapshot()
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.source().snapshots.borrow().clone()
    }

    /// Waits until a published snapshot satisfies `check`; returns it and how long it took.
    async fn wait_snapshot(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Snapshot) -> bool,
    ) -> (Arc<Snapshot>, Duration) {
        let started = Instant::now();
        let mut snapshots = self.source().snapshots.clone();
        let found = tokio::time::timeout(timeout, snapshots.wait_for(|s| check(s)))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|snapshot| snapshot.clone());
        match found {
            Some(snapshot) => (snapshot, started.elapsed()),
            None => panic!(
                "no snapshot with {what} within {timeout:?} (generation {})",
                self.snapshot().generation
            ),
        }
    }

    async fn wait_observed(&self, what: &str, check: impl Fn(&Recorder) -> bool) {
        let deadline = Instant::now() + DEADLINE;
        while !check(&self.observer) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(source) = self.source.take() {
            tokio::time::timeout(DEADLINE, source.join())
                .await
                .expect("source tasks end after shutdown");
        }
    }
}

fn served_config(snapshot: &Snapshot, pool: &str) -> String {
    match snapshot.pools.get(pool) {
        Some(Ok(pool)) => pool.served_config_name().to_string(),
        other => panic!("pool {pool}: {other:?}"),
    }
}

/// (token, CA bytes) of the snapshot's kubeconfig.
fn kubeconfig_parts(snapshot: &Snapshot) -> (String, Vec<u8>) {
    let (server, token, ca) = support::cluster::kubeconfig_parts(&snapshot.kubeconfig);
    assert_eq!(server, APISERVER_URL);
    (token, ca)
}

fn new_rendered_config(api: &ApiServer, name: &str) {
    copy_rendered_config(api, WORKER_RENDERED, name);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_the_cluster_once_every_cache_has_synced() {
    let harness = Harness::start(Options::default()).await;
    let snapshot = harness.ready().await;

    assert_eq!(snapshot.mode, Mode::Cluster);
    assert!(snapshot.generation >= 1);
    let pools: Vec<&str> = snapshot.pools.keys().map(String::as_str).collect();
    assert_eq!(pools, ["layered-worker", "master", "worker"]);
    assert_eq!(served_config(&snapshot, "worker"), WORKER_RENDERED);
    let mc = snapshot.machine_configs[WORKER_RENDERED]
        .as_ref()
        .expect("rendered config decodes");
    assert!(mc.spec.config.is_some());
    // A MachineConfig keeps its managedFields: the original serves them to the node inside
    // the MachineConfig files (src/api/go_marshal.rs). Every other cached kind drops them.
    assert!(
        mc.metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| !m.is_empty()),
        "a MachineConfig's managedFields are kept"
    );
    let pool = snapshot.pools["worker"].as_ref().expect("pool decodes");
    assert!(
        pool.metadata.managed_fields.is_none(),
        "managedFields are stripped from other cached objects"
    );
    let cc = snapshot
        .controller_config
        .as_ref()
        .expect("ControllerConfig present")
        .as_ref()
        .expect("decodes");
    assert!(cc.metadata.managed_fields.is_none());
    assert!(cc.spec.kube_api_server_serving_ca().unwrap().is_some());
    assert_eq!(
        snapshot.layered.registry_hosts,
        ["image-registry.openshift-image-registry.svc:5000"]
    );
    assert_eq!(
        kubeconfig_parts(&snapshot),
        ("token-1".to_string(), FILE_CA.as_bytes().to_vec())
    );
    // Only the named ControllerConfig and ConfigMap are watched.
    let requests = harness.api.requests();
    for resource in ["controllerconfigs", "configmaps"] {
        assert!(requests
            .iter()
            .filter(|r| r.resource == resource)
            .all(|r| r.verb == "list" || r.verb == "watch"));
    }
    harness.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_before_the_caches_sync() {
    let mut harness = Harness::new(Options::default());
    harness.api.stop();
    harness.start_source().await;
    harness
        .wait_observed("the unreachable API to be reported", |r| {
            r.last_reachability() == Some(false)
        })
        .await;
    assert!(
        !*harness.source().ready.borrow(),
        "not ready without caches"
    );
    assert_eq!(harness.snapshot().generation, 0, "nothing published");
    assert!(harness.snapshot().pools.is_empty());

    harness.api.restart();
    let snapshot = harness.ready().await;
    assert_eq!(served_config(&snapshot, "worker"), WORKER_RENDERED);
    assert_eq!(harness.observer.last_reachability(), Some(true));
    harness.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_changes_are_published_within_a_second() {
    let harness = Harness::start(Options::default()).await;
    let first = harness.ready().await;
    let next = "rendered-worker-0000000000000000000000000000000a";
    new_rendered_config(&harness.api, next);
    harness
        .wait_snapshot("the new rendered config", DEADLINE, |s| {
            s.machine_configs.contains_key(next)
        })
        .await;

    // The controller targets the new render; no node has it yet: still the old one.
    let generation = harness.snapshot().generation;
    harness
        .api
        .merge_patch(
            "MachineConfigPool",
            None,
            "worker",
            &json!({"spec": {"configuration": {"name": next}},
                    "status": {"updatedMachineCount": 0}}),
        )
        .unwrap();
    let (snapshot, took) = harness
        .wait_snapshot("the pool change", WITHIN_A_SECOND, |s| {
            s.generation > generation
                && matches!(s.pools.get("worker"), Some(Ok(p)) if p.spec.configuration.name == next)
        })
        .await;
    assert_eq!(served_config(&snapshot, "worker"), WORKER_RENDERED);
    eprintln!("pool spec change published after {took:?}");

    // A node has updated: new nodes get the new render.
    harness
        .api
        .merge_patch(
            "MachineConfigPool",
            None,
            "worker",
            &json!({"status": {"updatedMachineCount": 1}}),
        )
        .unwrap();
    let (_, took) = harness
        .wait_snapshot("the new render served", WITHIN_A_SECOND, |s| {
            served_config(s, "worker") == next
        })
        .await;
    eprintln!("updatedMachineCount change published after {took:?}");
    assert!(first.generation < harness.snapshot().generation);
    harness.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_and_ca_rotation_is_picked_up() {
    let harness = Harness::start(Options::default()).await;
    let snapshot = harness.ready().await;
    assert_eq!(kubeconfig_parts(&snapshot).0, "token-1");

    // The secret volume is updated (atomically, like the kubelet's symlink swap).
    let dir = harness.token_dir.path();
    support::cluster::replace_file(&dir.join("token"), b"token-2");
    harness
        .wait_snapshot("the rotated token", DEADLINE, |s| {
            kubeconfig_parts(s).0 == "token-2"
        })
        .await;

    // The operator publishes a CA bundle in kubeconfig-data: it replaces ca.crt.
    let bundle = b"-----BEGIN CERTIFICATE-----\nCONFIGMAP CA\n-----END CERTIFICATE-----\n";
    use base64::Engine as _;
    harness
        .api
        .merge_patch(
            "ConfigMap",
            Some("openshift-machine-config-operator"),
            "kubeconfig-data",
            &json!({"binaryData": {"ca-bundle.crt": base64::engine::general_purpose::STANDARD.encode(bundle)}}),
        )
        .unwrap();
    harness
        .wait_snapshot("the ConfigMap CA", DEADLINE, |s| {
            kubeconfig_parts(s).1 == bundle
        })
        .await;

    // A half-done rotation (token briefly missing) keeps the last good kubeconfig.
    let before = harness.snapshot();
    std::fs::remove_file(dir.join("token")).unwrap();
    std::fs::write(
        dir.join("ca.crt"),
        "-----BEGIN CERTIFICATE-----\nNEW FILE CA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    harness
        .api
        .delete(
            "ConfigMap",
            Some("openshift-machine-config-operator"),
            "kubeconfig-data",
        )
        .unwrap();
    harness
        .wait_snapshot("the ConfigMap deletion", DEADLINE, |s| {
            s.generation > before.generation
        })
        .await;
    assert_eq!(
        kubeconfig_parts(&harness.snapshot()),
        ("token-2".to_string(), bundle.to_vec()),
        "the last good kubeconfig is kept while the token is missing"
    );
    assert!(*harness.source().ready.borrow());

    std::fs::write(dir.join("token"), "token-3").unwrap();
    harness
        .wait_snapshot("the restored token with the file CA", DEADLINE, |s| {
            kubeconfig_parts(s)
                == (
                    "token-3".to_string(),
                    b"-----BEGIN CERTIFICATE-----\nNEW FILE CA\n-----END CERTIFICATE-----\n"
                        .to_vec(),
                )
        })
        .await;
    harness.shutdown().await;
}

#[tier(in_test_apiserver)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_outage_keeps_the_last_state_and_recovers_with_a_relist() {
    let harness = Harness::start(Options::default()).await;
    let before = harness.ready().await;

    harness.api.stop();
    harness
        .wait_observed("the outage to be reported", |r| {
            r.last_reachability() == Some(false)
        })
        .await;
    assert!(
        *harness.source().ready.borrow(),
        "stays ready through an outage"
    );
    assert_eq!(harness.snapshot().generation, before.generation);
    assert_eq!(
        served_config(&harness.snapshot(), "worker"),
        WORKER_RENDERED
    );

    // While the API is down, the pool moves on and the history is compacted, so resumed
    // watches get 410 Gone and must list again.
    let next = "rendered-worker-0000000000000000000000000000000b";
    new_rendered_config(&harness.api, next);
    harness
        .api
        .merge_patch(
            "MachineConfigPool",
            None,
            "worker",
            &json!({"spec": {"configuration": {"name": next}},
                    "status": {"updatedMachineCount": 2}}),
        )
        .unwrap();
    harness.api.compact();
    harness.api.restart();

    harness
        .wait_snapshot("the change made during the outage", DEADLINE, |s| {
            served_config(s, "worker") == next && s.machine_configs.contains_key(next)
        })
        .await;
    harness
        .wait_observed("the recovery to be reported", |r| {
            r.last_reachability() == Some(true)
        })
        .await;
    harness
        .wait_observed("a re-list after 410 Gone", |r| {
            r.restarts.lock().unwrap().contains(&"MachineConfigPool")
        })
        .await;
    assert_eq!(
        *harness.observer.reachability.lock().unwrap(),
        [true, false, true],
        "one report per transition"
    );
    harness.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_routes_api_counts_as_synced_and_empty() {
    let harness = Harness::start(Options {
        routes: false,
        ..Options::default()
    })
    .await;
    let snapshot = harness.ready().await;
    assert!(harness.observer.synced.lock().unwrap().contains("Service"));
    assert!(!harness.observer.synced.lock().unwrap().contains("Route"));
    assert_eq!(
        snapshot.layered.registry_hosts,
        ["image-registry.openshift-image-registry.svc:5000"]
    );
    assert!(harness
        .api
        .requests()
        .iter()
        .any(|r| r.path.ends_with("/routes") && r.status == 404));
    harness.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_are_registry_hosts_when_the_api_exists() {
    let harness = Harness::start(Options::default()).await;
    harness.ready().await;
    harness
        .api
        .apply_object(&json!({
            "apiVersion": "route.openshift.io/v1", "kind": "Route",
            "metadata": {"name": "default-route", "namespace": "openshift-image-registry"},
            "spec": {"host": "default-route-openshift-image-registry.apps.example.com",
                     "to": {"kind": "Service", "name": "image-registry"}}
        }))
        .unwrap();
    harness
        .wait_snapshot("the route host", DEADLINE, |s| {
            s.layered
                .registry_hosts
                .iter()
                .any(|h| h == "default-route-openshift-image-registry.apps.example.com")
        })
        .await;
    harness.shutdown().await;
}
