//! MachineConfigNode publisher, end to end against the in-test Kubernetes API server
//! (`tests/support/fake_apiserver`, server-side apply with managedFields, CRD validation,
//! Leases): the real cluster source (kube-rs reflectors), the real router behind a real TCP
//! listener (so the served-request record sees a real remote address), and the real publisher
//! with its Lease election. Each "replica" is one in-process server as `start` would run it.
//!
//! What a user would notice, checked in the objects the API server stores:
//! - a node joins: its MCN appears with the right spec, owner reference, initial status and
//!   bootstrap record, written by the `machine-config-server-mcn` field manager;
//! - an MCN someone else wrote is not touched at all (object identical, resourceVersion too);
//! - a node is deleted: the MCN this server created for it goes away after a grace period; an
//!   MCN another writer created is never deleted, whether its Node is absent, appears later, or
//!   was deleted (garbage collection's job, not ours);
//! - a node deleted and created again with the same name gets a new MCN owned by its new uid;
//! - two replicas: exactly one holds the Lease and publishes; when it stops, the other takes
//!   over; a replica whose Lease is taken stops publishing within a renew period;
//! - a pre-built image goes to `spec.configImage` only where the CRD declares it;
//! - every MCN written validates against the real CRD (upstream tier, `MCS_UPSTREAM_ASSETS`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::tier;

use machine_config_server::app::{App, Mode, Serving, Settings};
use machine_config_server::mcn;
use machine_config_server::metrics::Metrics;
use machine_config_server::source::cluster::ClusterSettings;
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options, Scope};
use support::fake_apiserver::{derived_crds, real_crds, validate_against};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

const DEADLINE: Duration = Duration::from_secs(20);
const KIND: &str = "MachineConfigNode";
const MANAGER: &str = "machine-config-server-mcn";
const LEASE_NAMESPACE: &str = "openshift-machine-config-operator";
const LEASE_NAME: &str = "machine-config-server-mcn-publisher";
const LEASE_DURATION: Duration = Duration::from_millis(2000);
const RENEW_PERIOD: Duration = Duration::from_millis(300);
const RESYNC: Duration = Duration::from_millis(300);
/// How long an MCN must stay a deletion candidate before the publisher deletes it.
const DELETE_GRACE: Duration = Duration::from_millis(1500);

const WORKER_RENDERED: &str = "rendered-worker-0a1b2c3d4e5f60718293a4b5c6d7e8f9";
const MASTER_RENDERED: &str = "rendered-master-11223344556677889900aabbccddeeff";
const PREBUILT_RENDERED: &str = "rendered-prebuilt-99887766554433221100ffeeddccbbaa";
const PREBUILT_IMAGE: &str = "quay.example.com/ocp/rhcos@sha256:2222222222222222222222222222222222222222222222222222222222222222";
const BASE_IMAGE: &str = "quay.example.com/ocp/rhcos@sha256:0000000000000000000000000000000000000000000000000000000000000000";
const ACCEPT: &str = "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1";

fn cluster_yaml() -> String {
    let mut docs = vec![CONTROLLER_CONFIG.to_string()];
    for (pool, rendered, pre_built) in [
        ("master", MASTER_RENDERED, None),
        ("worker", WORKER_RENDERED, None),
        ("prebuilt", PREBUILT_RENDERED, Some(PREBUILT_IMAGE)),
    ] {
        docs.push(pool_yaml(pool, rendered));
        docs.push(machine_config(rendered, pool, pre_built));
    }
    docs.join("\n---\n")
}

use support::CONTROLLER_CONFIG;

fn pool_yaml(name: &str, rendered: &str) -> String {
    format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: {name}
spec:
  configuration:
    name: {rendered}
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: {name}
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/{name}: ""
  paused: false
status:
  configuration:
    name: {rendered}
  machineCount: 1
  updatedMachineCount: 1
  readyMachineCount: 1
  unavailableMachineCount: 0
  degradedMachineCount: 0
"#
    )
}

fn machine_config(name: &str, pool: &str, pre_built: Option<&str>) -> String {
    let annotation = pre_built
        .map(|image| {
            format!("\n    machineconfiguration.openshift.io/pre-built-image: \"{image}\"")
        })
        .unwrap_or_default();
    format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
  annotations:
    machineconfiguration.openshift.io/generated-by-controller-version: 4.19.0{annotation}
  labels:
    machineconfiguration.openshift.io/role: {pool}
spec:
  osImageURL: {BASE_IMAGE}
  config:
    ignition:
      version: 3.5.0
  kernelArguments: []
  extensions: []
  fips: false
  kernelType: default
"#
    )
}

/// A Node as the kubelet registers it: role labels, an InternalIP, and the daemon's
/// annotations when given.
fn node(name: &str, roles: &[&str], ip: &str, annotations: Value) -> Value {
    let mut labels = json!({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"});
    for role in roles {
        labels[format!("node-role.kubernetes.io/{role}")] = json!("");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "status": {"addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": name}
        ]}
    })
}

fn daemon_annotations(rendered: &str) -> Value {
    json!({
        "machineconfiguration.openshift.io/currentConfig": rendered,
        "machineconfiguration.openshift.io/desiredConfig": rendered,
        "machineconfiguration.openshift.io/state": "Done",
    })
}

/// Short leases and resyncs so that elections and failovers take a second or two.
fn test_timing() -> std::collections::HashMap<&'static str, String> {
    std::collections::HashMap::from([
        (
            mcn::ENV_LEASE_DURATION_MS,
            LEASE_DURATION.as_millis().to_string(),
        ),
        (
            mcn::ENV_RENEW_PERIOD_MS,
            RENEW_PERIOD.as_millis().to_string(),
        ),
        (mcn::ENV_RENEW_DEADLINE_MS, "1200".to_string()),
        (mcn::ENV_RETRY_PERIOD_MS, "200".to_string()),
        (mcn::ENV_RESYNC_MS, RESYNC.as_millis().to_string()),
        (
            mcn::ENV_DELETE_GRACE_MS,
            DELETE_GRACE.as_millis().to_string(),
        ),
    ])
}

/// One server process as `machine-config-server start` runs it, in-process: the application
/// started through its one wiring entry, serving plain HTTP on a loopback port.
struct Replica {
    identity: String,
    http: SocketAddr,
    leading: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    shutdown: watch::Sender<bool>,
    app: Option<App>,
    _token_dir: tempfile::TempDir,
}

impl Replica {
    async fn start(api: &ApiServer, identity: &str) -> Replica {
        // Logs are shown only for a failing test.
        let _ = tracing_subscriber::fmt()
            .with_env_filter("machine_config_server=debug")
            .with_test_writer()
            .try_init();
        let token_dir = tempfile::tempdir().unwrap();
        std::fs::write(token_dir.path().join("token"), "bootstrap-token-for-tests").unwrap();
        std::fs::write(
            token_dir.path().join("ca.crt"),
            "-----BEGIN CERTIFICATE-----\nTEST CA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let mut source = ClusterSettings::new("https://api-int.example.com:6443");
        source.kubeconfig = Some(api.kubeconfig_file().to_path_buf());
        source.bootstrap_token_dir = token_dir.path().to_path_buf();
        // As `start` builds them: identity from the host name, timing from MCS_MCN_*_MS.
        let timing = test_timing();
        let publisher = mcn::PublisherSettings::for_replica(
            identity,
            mcn::rate::DEFAULT_MAX_WRITES_PER_SECOND,
            |key| timing.get(key).cloned(),
        )
        .expect("valid timing overrides");
        let settings = Settings {
            serving: Serving::plain_http("127.0.0.1:0".parse().unwrap()),
            mode: Mode::Cluster { source, publisher },
        };
        let (shutdown, shutdown_rx) = watch::channel(false);
        let app = App::start(settings, shutdown_rx)
            .await
            .unwrap_or_else(|e| panic!("the application: {e}"));
        let mut ready = app.ready.clone();
        tokio::time::timeout(DEADLINE, ready.wait_for(|ready| *ready))
            .await
            .expect("cluster source ready in time")
            .expect("cluster source running");
        Replica {
            identity: mcn::identity(identity),
            http: app.insecure_address.expect("the plain-HTTP listener"),
            leading: app.leading.clone().expect("cluster mode has a publisher"),
            metrics: app.metrics.clone(),
            shutdown,
            app: Some(app),
            _token_dir: token_dir,
        }
    }

    fn leading(&self) -> bool {
        *self.leading.borrow()
    }

    async fn wait_leading(&self, leading: bool, within: Duration) -> Duration {
        let start = Instant::now();
        let mut rx = self.leading.clone();
        tokio::time::timeout(within, rx.wait_for(|l| *l == leading))
            .await
            .unwrap_or_else(|_| panic!("{}: leading={leading} within {within:?}", self.identity))
            .expect("publisher running");
        start.elapsed()
    }

    /// What a booting machine does: `GET /config/<pool>` over TCP from 127.0.0.1.
    async fn boot(&self, pool: &str) -> u16 {
        let mut stream = tokio::net::TcpStream::connect(self.http).await.unwrap();
        let request = format!(
            "GET /config/{pool} HTTP/1.1\r\nHost: api-int.example.com:22623\r\nAccept: {ACCEPT}\r\nUser-Agent: Ignition/2.20.0\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        let text = String::from_utf8_lossy(&response);
        text.split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {text:?}"))
    }

    /// Graceful stop: the publisher releases its Lease, the source and listener end.
    async fn stop(mut self) {
        self.shutdown.send_replace(true);
        if let Some(app) = self.app.take() {
            tokio::time::timeout(DEADLINE, app.wait())
                .await
                .expect("the application stops")
                .expect("the application stops cleanly");
        }
    }
}

fn start_api(options: Options) -> ApiServer {
    let api = ApiServer::start(options);
    if let Err(e) = api.load_yaml_str(&cluster_yaml()) {
        panic!("loading the cluster objects: {e}");
    }
    api
}

fn add_node(api: &ApiServer, node: &Value) -> Value {
    api.apply_object(node)
        .unwrap_or_else(|e| panic!("node {}: {e:?}", node["metadata"]["name"]))
}

/// Polls `check` until it returns `Some` or the deadline passes.
async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn mcn_with_status(api: &ApiServer, name: &str) -> Option<Value> {
    api.get(KIND, None, name).filter(|mcn| {
        mcn["status"]["conditions"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    })
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["annotations"][key].as_str()
}

fn condition<'a>(mcn: &'a Value, type_: &str) -> &'a Value {
    mcn["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no condition {type_} in {mcn}"))
}

fn managers(object: &Value) -> Vec<(String, String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            (
                entry["manager"].as_str().unwrap_or_default().to_string(),
                entry["operation"].as_str().unwrap_or_default().to_string(),
                entry["subresource"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// Every MCN the API server stores passes the CRD schema (required fields, enums, patterns,
/// bounds, and no undeclared field): the real CRD where the upstream assets are, else the one
/// derived from our types (what the in-test server validates against without them).
fn assert_all_mcns_valid(api: &ApiServer) {
    let all = api.list(KIND);
    assert!(!all.is_empty());
    let crds = if support::upstream::present_dir().is_some() {
        real_crds()
    } else {
        derived_crds()
    };
    for mcn in all {
        if let Err(problems) = validate_against(crds, KIND, &mcn) {
            panic!(
                "{} does not validate: {problems:#?}",
                mcn["metadata"]["name"]
            );
        }
    }
}

fn lease_holder(api: &ApiServer) -> Option<String> {
    api.get("Lease", Some(LEASE_NAMESPACE), LEASE_NAME)
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_node_gets_its_mcn_with_spec_owner_status_and_bootstrap_record() {
    let api = start_api(Options::default());
    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;

    // A node that matches no pool: no MCN (applied first, so it is planned with the others).
    add_node(&api, &node("stray-0", &["edge"], "10.0.9.9", json!({})));

    // The machine boots from this replica, then registers as a Node from the same address,
    // before its daemon has written any annotation.
    let before_boot = k8s_now_seconds();
    assert_eq!(replica.boot("worker").await, 200);
    let joined = add_node(&api, &node("worker-0", &["worker"], "127.0.0.1", json!({})));
    // A node that booted elsewhere and whose daemon already reports its config.
    add_node(
        &api,
        &node(
            "worker-1",
            &["worker"],
            "10.0.0.21",
            daemon_annotations(WORKER_RENDERED),
        ),
    );

    let mcn = eventually("worker-0's MCN with status", || {
        mcn_with_status(&api, "worker-0")
    })
    .await;
    assert_eq!(mcn["spec"]["node"]["name"], "worker-0");
    assert_eq!(mcn["spec"]["pool"]["name"], "worker");
    assert_eq!(mcn["spec"]["configVersion"]["desired"], WORKER_RENDERED);
    assert!(mcn["spec"].get("configImage").is_none());
    assert_eq!(
        mcn["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "v1",
            "kind": "Node",
            "name": "worker-0",
            "uid": joined["metadata"]["uid"],
        }])
    );
    // The bootstrap record: what this replica answered 127.0.0.1.
    let key = |k: &str| format!("mcs.machineconfiguration.openshift.io/{k}");
    assert_eq!(
        annotation(&mcn, &key("created-by")),
        Some("machine-config-server")
    );
    assert_eq!(
        annotation(&mcn, &key("bootstrap-address")),
        Some("127.0.0.1")
    );
    assert_eq!(annotation(&mcn, &key("bootstrap-pool")), Some("worker"));
    assert_eq!(
        annotation(&mcn, &key("bootstrap-rendered-config")),
        Some(WORKER_RENDERED)
    );
    assert_eq!(
        annotation(&mcn, &key("bootstrap-ignition-version")),
        Some("3.5.0")
    );
    assert_eq!(annotation(&mcn, &key("bootstrap-image")), None);
    let served_at = annotation(&mcn, &key("bootstrap-served-at")).expect("served-at");
    let served_at: k8s_openapi::jiff::Timestamp = served_at.parse().expect("RFC 3339");
    assert!(served_at.as_second() >= before_boot && served_at.as_second() <= k8s_now_seconds());

    // The initial status of a node that has not started an update.
    let conditions = mcn["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 14);
    let updated = condition(&mcn, "Updated");
    assert_eq!(updated["status"], "False");
    assert_eq!(updated["reason"], "Updated");
    for type_ in [
        "UpdatePrepared",
        "UpdateExecuted",
        "UpdatePostActionComplete",
        "UpdateComplete",
        "Resumed",
        "Drained",
        "AppliedFilesAndOS",
        "Cordoned",
        "RebootedNode",
        "Uncordoned",
        "NodeDegraded",
        "PinnedImageSetsDegraded",
        "PinnedImageSetsProgressing",
    ] {
        let c = condition(&mcn, type_);
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some("NotYetOccurred")),
            "{type_}"
        );
    }
    for c in conditions {
        assert!(c["lastTransitionTime"]
            .as_str()
            .is_some_and(|t| !t.is_empty()));
    }
    assert_eq!(
        mcn["status"]["configVersion"],
        json!({"desired": "not-yet-set"})
    );
    assert_eq!(
        mcn["status"]["observedGeneration"],
        mcn["metadata"]["generation"]
    );

    // Created (a create the API server refuses when the MCN exists) under the dedicated field
    // manager; its status by server-side apply under the same manager.
    let managers = managers(&mcn);
    assert!(
        managers.contains(&(MANAGER.into(), "Update".into(), String::new())),
        "{managers:?}"
    );
    assert!(
        managers.contains(&(MANAGER.into(), "Apply".into(), "status".into())),
        "{managers:?}"
    );

    // The node whose daemon already reports its config: Updated, no bootstrap record.
    let reporting = eventually("worker-1's MCN", || mcn_with_status(&api, "worker-1")).await;
    assert_eq!(
        reporting["spec"]["configVersion"]["desired"],
        WORKER_RENDERED
    );
    assert_eq!(condition(&reporting, "Updated")["status"], "True");
    assert_eq!(
        reporting["status"]["configVersion"],
        json!({"current": WORKER_RENDERED, "desired": WORKER_RENDERED})
    );
    assert_eq!(annotation(&reporting, &key("bootstrap-address")), None);

    assert!(
        api.get(KIND, None, "stray-0").is_none(),
        "a node in no pool gets no MCN"
    );
    // One status write per MCN: the publisher waited for its cache to show its own writes.
    assert!(!replica
        .metrics
        .encode()
        .contains("result=\"status_initialized\""));
    assert_all_mcns_valid(&api);
    eventually("both creations counted", || {
        replica
            .metrics
            .encode()
            .contains("mcs_mcn_publish_total{result=\"created\"} 2")
            .then_some(())
    })
    .await;
    replica.stop().await;
}

fn k8s_now_seconds() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcn_written_by_someone_else_is_left_alone() {
    let api = start_api(Options::default());
    // The MCO wrote this MCN (spec with not-yet-set, and a status) before we started.
    add_node(&api, &node("worker-5", &["worker"], "127.0.0.1", json!({})));
    let theirs = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": KIND,
        "metadata": {"name": "worker-5"},
        "spec": {
            "node": {"name": "worker-5"},
            "pool": {"name": "worker"},
            "configVersion": {"desired": "not-yet-set"}
        }
    });
    api.apply_as("machine-config-operator", &theirs, Scope::Main, true)
        .unwrap();
    let status = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": KIND,
        "metadata": {"name": "worker-5"},
        "status": {
            "conditions": [{
                "type": "Updated", "status": "False", "reason": "Updated",
                "message": "Node worker-5 needs an update",
                "lastTransitionTime": "2025-05-22T12:37:28Z"
            }],
            "configVersion": {"desired": "not-yet-set"},
            "observedGeneration": 1
        }
    });
    api.apply_as("machine-config-operator", &status, Scope::Status, true)
        .unwrap();
    let before = api.get(KIND, None, "worker-5").unwrap();

    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;
    // Tempting: this replica answered the node's address, so a bootstrap record matches.
    assert_eq!(replica.boot("worker").await, 200);
    // Proof the publisher made passes over the cluster since: a new node gets its MCN.
    add_node(&api, &node("worker-6", &["worker"], "10.0.0.26", json!({})));
    eventually("worker-6's MCN", || mcn_with_status(&api, "worker-6")).await;
    // And one resync later (the served record is re-read on every pass).
    tokio::time::sleep(RESYNC * 2).await;

    let after = api.get(KIND, None, "worker-5").unwrap();
    assert_eq!(
        before, after,
        "no field of theirs changed, nothing of ours was added"
    );
    assert!(managers(&after).iter().all(|(m, _, _)| m != MANAGER));
    assert_all_mcns_valid(&api);
    replica.stop().await;
}

/// An MCN as the node's daemon or the operator writes it (another field manager), with spec,
/// owner reference and status; returned as the API server stores it.
fn foreign_mcn(api: &ApiServer, name: &str, owner_uid: &str) -> Value {
    let spec = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": KIND,
        "metadata": {
            "name": name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": owner_uid}]
        },
        "spec": {
            "node": {"name": name},
            "pool": {"name": "worker"},
            "configVersion": {"desired": WORKER_RENDERED}
        }
    });
    api.apply_as("machine-config-daemon", &spec, Scope::Main, true)
        .unwrap();
    let status = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": KIND,
        "metadata": {"name": name},
        "status": daemon_status()
    });
    api.apply_as("machine-config-daemon", &status, Scope::Status, true)
        .unwrap();
    api.get(KIND, None, name).unwrap()
}

/// Proof that the publisher made passes over the cluster for longer than the deletion grace
/// period: a new node gets its MCN, then the grace period passes twice over.
async fn publisher_passes_beyond_the_grace_period(api: &ApiServer, probe: &str, ip: &str) {
    add_node(api, &node(probe, &["worker"], ip, json!({})));
    eventually("the probe node's MCN", || mcn_with_status(api, probe)).await;
    tokio::time::sleep(DELETE_GRACE * 2 + RESYNC).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_mcn_written_before_its_node_appears_is_left_intact() {
    let api = start_api(Options::default());
    // The real sequence: the daemon wrote the MCN; our cache does not show the Node yet.
    let before = foreign_mcn(&api, "worker-early", "uid-of-a-node-not-yet-seen");
    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;
    publisher_passes_beyond_the_grace_period(&api, "worker-probe", "10.0.0.40").await;
    assert_eq!(
        api.get(KIND, None, "worker-early"),
        Some(before.clone()),
        "a foreign MCN whose Node is absent is not deleted"
    );

    // The Node appears: still byte-identical, and none of ours is written over it.
    add_node(
        &api,
        &node("worker-early", &["worker"], "10.0.0.41", json!({})),
    );
    publisher_passes_beyond_the_grace_period(&api, "worker-probe-2", "10.0.0.42").await;
    let after = api.get(KIND, None, "worker-early").unwrap();
    assert_eq!(before, after);
    assert!(managers(&after).iter().all(|(m, _, _)| m != MANAGER));
    replica.stop().await;
}

/// The field managers and operations of an object's managedFields entries that own
/// `metadata.annotations[key]`.
fn owners_of_annotation(object: &Value, key: &str) -> Vec<(String, String)> {
    let field = format!("f:{key}");
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["fieldsV1"]["f:metadata"]["f:annotations"]
                .get(&field)
                .is_some()
        })
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or_default().to_string(),
                e["operation"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_mcn_created_and_status_updated_like_the_daemon_does_stays_byte_identical() {
    let api = start_api(Options::default());
    // As the machine-config-daemon writes it with client-go: a plain Create (no server-side
    // apply), then UpdateStatus; its Node is not in our cache (yet).
    let name = "worker-daemon";
    let created = api
        .create_as(
            "machine-config-daemon",
            &json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": KIND,
                "metadata": {
                    "name": name,
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": "uid-not-seen-yet"}]
                },
                "spec": {
                    "node": {"name": name},
                    "pool": {"name": "worker"},
                    "configVersion": {"desired": WORKER_RENDERED}
                }
            }),
        )
        .unwrap();
    let mut with_status = created.clone();
    with_status["status"] = daemon_status();
    let before = api
        .replace_as("machine-config-daemon", &with_status, Scope::Status)
        .unwrap();
    // What a real API server records for that sequence: two Update entries of the daemon, one
    // per subresource; nothing of ours.
    assert_eq!(
        managers(&before),
        vec![
            (
                "machine-config-daemon".to_string(),
                "Update".to_string(),
                String::new()
            ),
            (
                "machine-config-daemon".to_string(),
                "Update".to_string(),
                "status".to_string()
            ),
        ],
        "{before}"
    );

    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;
    publisher_passes_beyond_the_grace_period(&api, "worker-probe", "10.0.0.40").await;
    assert_eq!(
        api.get(KIND, None, name),
        Some(before.clone()),
        "the daemon's MCN whose Node is not in the cache is neither deleted nor changed"
    );
    add_node(&api, &node(name, &["worker"], "10.0.0.41", json!({})));
    publisher_passes_beyond_the_grace_period(&api, "worker-probe-2", "10.0.0.42").await;
    assert_eq!(api.get(KIND, None, name), Some(before));
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_our_mcn_created_by_another_writer_is_never_deleted() {
    let api = start_api(Options::default());
    let name = "worker-restored";
    let created_by = mcn::desired::annotations::CREATED_BY;
    // An MCN as our publisher writes it (our field manager, server-side apply), for a Node that
    // is gone since.
    let ours = api
        .apply_as(
            MANAGER,
            &json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": KIND,
                "metadata": {
                    "name": name,
                    "annotations": {(created_by): mcn::desired::annotations::CREATED_BY_VALUE},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": "uid-of-a-deleted-node"}]
                },
                "spec": {
                    "node": {"name": name},
                    "pool": {"name": "worker"},
                    "configVersion": {"desired": WORKER_RENDERED}
                }
            }),
            Scope::Main,
            true,
        )
        .unwrap();
    assert_eq!(
        owners_of_annotation(&ours, created_by),
        vec![(MANAGER.to_string(), "Apply".to_string())]
    );
    // Garbage collection removes it; a backup tool restores it: a plain create of the saved
    // object, annotation and managedFields included (`oc get -o yaml | oc create -f -`).
    api.delete(KIND, None, name).unwrap();
    let mut copy = ours.clone();
    for field in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
        copy["metadata"].as_object_mut().unwrap().remove(field);
    }
    let restored = api.create_as("velero", &copy).unwrap();
    // A real API server starts from the managedFields the request carries, then the creator
    // takes every field the create added: the claimed Apply entry of ours keeps nothing.
    assert_eq!(
        owners_of_annotation(&restored, created_by),
        vec![("velero".to_string(), "Update".to_string())],
        "{restored}"
    );
    assert!(managers(&restored).iter().all(|(m, _, _)| m != MANAGER));

    // It carries our annotation and names a gone Node: a deletion candidate by the plan. Only
    // the API server's record of who set the annotation keeps it.
    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;
    publisher_passes_beyond_the_grace_period(&api, "worker-probe", "10.0.0.40").await;
    assert_eq!(
        api.get(KIND, None, name),
        Some(restored),
        "a copy another writer created is not ours, whatever its annotations say"
    );
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_mcn_of_a_deleted_node_goes_after_the_grace_period_and_foreign_ones_stay() {
    let api = start_api(Options::default());
    // Left over from a node removed while no publisher ran, written by someone else.
    let foreign_orphan = foreign_mcn(&api, "worker-old", "uid-of-a-deleted-node");
    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;

    add_node(
        &api,
        &node(
            "worker-7",
            &["worker"],
            "10.0.0.27",
            daemon_annotations(WORKER_RENDERED),
        ),
    );
    eventually("worker-7's MCN", || mcn_with_status(&api, "worker-7")).await;

    api.delete("Node", None, "worker-7").unwrap();
    let deleted_at = Instant::now();
    eventually("worker-7's MCN deleted", || {
        api.get(KIND, None, "worker-7").is_none().then_some(())
    })
    .await;
    let waited = deleted_at.elapsed();
    assert!(
        waited >= DELETE_GRACE,
        "deleted after {waited:?}, before the {DELETE_GRACE:?} grace period"
    );
    publisher_passes_beyond_the_grace_period(&api, "worker-probe", "10.0.0.40").await;
    assert_eq!(
        api.get(KIND, None, "worker-old"),
        Some(foreign_orphan),
        "a foreign MCN of a deleted node is left to garbage collection"
    );

    // The writes and reads the publisher made are exactly those config/deploy/extras grants.
    let mut calls: Vec<(String, String, String)> = api
        .requests()
        .into_iter()
        .filter(|r| !matches!(r.verb.as_str(), "list" | "watch"))
        .filter(|r| {
            matches!(
                r.resource.as_str(),
                "machineconfignodes" | "nodes" | "leases"
            )
        })
        .map(|r| (r.resource, r.subresource.unwrap_or_default(), r.verb))
        .collect();
    calls.sort();
    calls.dedup();
    let granted = |resource: &str, subresource: &str, verb: &str| {
        (
            resource.to_string(),
            subresource.to_string(),
            verb.to_string(),
        )
    };
    let rules = [
        granted("leases", "", "create"),
        granted("leases", "", "get"),
        granted("leases", "", "update"),
        granted("machineconfignodes", "", "create"),
        granted("machineconfignodes", "", "delete"),
        granted("machineconfignodes", "", "get"),
        granted("machineconfignodes", "", "patch"),
        granted("machineconfignodes", "status", "patch"),
        granted("nodes", "", "get"),
    ];
    for call in &calls {
        assert!(
            rules.contains(call),
            "{call:?} is not granted by config/deploy/extras/rbac.yaml"
        );
    }
    for used in [
        granted("machineconfignodes", "", "create"),
        granted("machineconfignodes", "", "delete"),
        granted("machineconfignodes", "", "get"),
        granted("machineconfignodes", "status", "patch"),
        granted("nodes", "", "get"),
    ] {
        assert!(calls.contains(&used), "{used:?} was not used: {calls:?}");
    }
    eventually("one deletion counted", || {
        replica
            .metrics
            .encode()
            .contains("mcs_mcn_publish_total{result=\"deleted\"} 1")
            .then_some(())
    })
    .await;
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_recreated_with_a_new_uid_gets_a_new_mcn_owned_by_it() {
    let api = start_api(Options::default());
    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;
    let first = add_node(&api, &node("worker-8", &["worker"], "10.0.0.28", json!({})));
    let first_mcn = eventually("worker-8's MCN", || mcn_with_status(&api, "worker-8")).await;
    assert_eq!(
        first_mcn["metadata"]["ownerReferences"][0]["uid"],
        first["metadata"]["uid"]
    );

    // Deleted and created again at once (a reinstall): the cache may never see it absent.
    api.delete("Node", None, "worker-8").unwrap();
    let second = add_node(&api, &node("worker-8", &["worker"], "10.0.0.28", json!({})));
    assert_ne!(second["metadata"]["uid"], first["metadata"]["uid"]);
    let second_mcn = eventually("worker-8's new MCN", || {
        mcn_with_status(&api, "worker-8")
            .filter(|m| m["metadata"]["ownerReferences"][0]["uid"] == second["metadata"]["uid"])
    })
    .await;
    assert_ne!(second_mcn["metadata"]["uid"], first_mcn["metadata"]["uid"]);
    // The old object was never filled in for the new node: every patch of worker-8's MCN made
    // before the old one was deleted is one of its own create writes.
    let requests = api.requests();
    let old_deleted = requests
        .iter()
        .position(|r| r.resource == "machineconfignodes" && r.verb == "delete")
        .expect("the old MCN deleted by the publisher");
    let writes_before = requests[..old_deleted]
        .iter()
        .filter(|r| r.resource == "machineconfignodes")
        .filter(|r| matches!(r.verb.as_str(), "create" | "patch") && r.status < 300)
        .filter(|r| r.name.as_deref() == Some("worker-8"))
        .count();
    assert_eq!(
        writes_before, 2,
        "create and initial status only: {requests:#?}"
    );
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_publish_through_one_leader_and_fail_over() {
    let api = start_api(Options::default());
    let a = Replica::start(&api, "master-0").await;
    let b = Replica::start(&api, "master-1").await;

    let leader_identity = eventually("one leader", || match (a.leading(), b.leading()) {
        (true, false) => Some(a.identity.clone()),
        (false, true) => Some(b.identity.clone()),
        _ => None,
    })
    .await;
    assert_eq!(
        lease_holder(&api).as_deref(),
        Some(leader_identity.as_str())
    );
    // Over a whole lease duration, never two leaders.
    let watch_until = Instant::now() + LEASE_DURATION;
    while Instant::now() < watch_until {
        assert!(!(a.leading() && b.leading()), "two leaders at once");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    add_node(&api, &node("worker-8", &["worker"], "10.0.0.28", json!({})));
    eventually("worker-8's MCN", || mcn_with_status(&api, "worker-8")).await;

    let (leader, follower) = if a.leading() { (a, b) } else { (b, a) };
    // The write is counted right after the API answered it.
    eventually("the leader's write counted", || {
        leader
            .metrics
            .encode()
            .contains("mcs_mcn_publish_total{result=\"created\"} 1")
            .then_some(())
    })
    .await;
    assert!(
        !follower.metrics.encode().contains("mcs_mcn_publish_total{"),
        "the follower wrote nothing"
    );

    // The leader stops (it releases the Lease): the follower takes over well within a lease
    // duration, and publishes.
    leader.stop().await;
    let took = follower.wait_leading(true, DEADLINE).await;
    assert!(took < LEASE_DURATION, "takeover took {took:?}");
    assert_eq!(
        lease_holder(&api).as_deref(),
        Some(follower.identity.as_str())
    );
    add_node(&api, &node("worker-9", &["worker"], "10.0.0.29", json!({})));
    eventually("worker-9's MCN", || mcn_with_status(&api, "worker-9")).await;
    assert_all_mcns_valid(&api);
    follower.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_lease_is_taken_only_after_it_expires_and_a_lost_lease_stops_publishing() {
    let api = start_api(Options::default());
    // A replica that died without releasing: its record never changes again.
    let ghost = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE},
        "spec": {
            "holderIdentity": "ghost_1",
            "leaseDurationSeconds": 2,
            "renewTime": "2025-01-01T00:00:00.000000Z",
            "acquireTime": "2025-01-01T00:00:00.000000Z",
            "leaseTransitions": 0
        }
    });
    api.create(&ghost).unwrap();
    let start = Instant::now();
    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;
    // Expiry is judged on our own clock from when we first saw the record, not from the
    // (possibly skewed) renewTime in it.
    assert!(
        start.elapsed() >= LEASE_DURATION - Duration::from_millis(300),
        "took over after {:?}",
        start.elapsed()
    );
    let lease = api.get("Lease", Some(LEASE_NAMESPACE), LEASE_NAME).unwrap();
    assert_eq!(
        lease["spec"]["holderIdentity"].as_str(),
        Some(replica.identity.as_str())
    );
    assert_eq!(lease["spec"]["leaseTransitions"], 1);

    // Someone else takes the Lease over (a partitioned leader's view): this replica must stop
    // publishing at its next renewal.
    let mut taken = lease.clone();
    taken["spec"]["holderIdentity"] = json!("intruder_2");
    // A MicroTime: kube-apiserver parses exactly six fraction digits (more is a 400).
    taken["spec"]["renewTime"] =
        serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        ))
        .unwrap();
    taken["spec"]["leaseDurationSeconds"] = json!(30);
    api.update(&taken).unwrap();
    let stopped_after = replica.wait_leading(false, DEADLINE).await;
    assert!(
        stopped_after <= RENEW_PERIOD * 2,
        "still publishing {stopped_after:?} after losing the lease"
    );

    // While it does not lead, a joining node gets no MCN from it.
    add_node(
        &api,
        &node("worker-10", &["worker"], "10.0.0.30", json!({})),
    );
    tokio::time::sleep(RESYNC * 3).await;
    assert!(api.get(KIND, None, "worker-10").is_none());
    replica.stop().await;
}

#[tier(upstream)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_built_image_goes_to_spec_config_image_only_where_the_crd_declares_it() {
    // The real CRD (default feature set) does not declare spec.configImage (upstream tier).
    let real_crds = support::upstream::crds();
    let api = start_api(Options {
        crd_dir: Some(real_crds.clone()),
        ..Options::default()
    });
    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;
    add_node(
        &api,
        &node("prebuilt-0", &["prebuilt"], "10.0.0.40", json!({})),
    );
    let mcn = eventually("prebuilt-0's MCN", || mcn_with_status(&api, "prebuilt-0")).await;
    assert_eq!(mcn["spec"]["configVersion"]["desired"], PREBUILT_RENDERED);
    assert!(mcn["spec"].get("configImage").is_none(), "{mcn}");
    assert_all_mcns_valid(&api);
    replica.stop().await;

    // A CRD that declares it (as the tech-preview CRDs do): the image is written.
    let crds = tempfile::tempdir().unwrap();
    write_crds_with_config_image(&real_crds, crds.path());
    let api = start_api(Options {
        crd_dir: Some(crds.path().to_path_buf()),
        ..Options::default()
    });
    let replica = Replica::start(&api, "master-0").await;
    replica.wait_leading(true, DEADLINE).await;
    add_node(
        &api,
        &node("prebuilt-1", &["prebuilt"], "10.0.0.41", json!({})),
    );
    let mcn = eventually("prebuilt-1's MCN", || mcn_with_status(&api, "prebuilt-1")).await;
    assert_eq!(
        mcn["spec"]["configImage"],
        json!({"desiredImage": PREBUILT_IMAGE})
    );
    replica.stop().await;
}

/// Copies the real CRDs of `real` into `dir`, with `spec.configImage` added to the MCN schema
/// the way the newer CRDs declare it.
fn write_crds_with_config_image(real: &Path, dir: &Path) {
    for entry in std::fs::read_dir(real).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path.file_name().unwrap().to_owned();
        if file != "machineconfignodes.yaml" {
            std::fs::write(dir.join(file), text).unwrap();
            continue;
        }
        let mut crd: Value = serde_yaml::from_str(&text).unwrap();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["configImage"] = json!({
            "type": "object",
            "required": ["desiredImage"],
            "properties": {"desiredImage": {"type": "string", "minLength": 1, "maxLength": 447}}
        });
        std::fs::write(dir.join("machineconfignodes.json"), crd.to_string()).unwrap();
    }
}

/// The status the machine-config daemon reports for an up-to-date worker.
fn daemon_status() -> Value {
    json!({
        "conditions": [{
            "type": "Updated", "status": "True", "reason": "Updated",
            "message": "Node is up to date",
            "lastTransitionTime": "2025-05-22T12:37:28Z"
        }],
        "configVersion": {"desired": WORKER_RENDERED, "current": WORKER_RENDERED},
        "observedGeneration": 1
    })
}
