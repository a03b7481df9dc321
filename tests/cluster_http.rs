//! `machine-config-server start`, the real binary, against an HTTP Kubernetes API (the in-test
//! fake): what a booting node receives over HTTP as the cluster changes.
//! - 503 on `/config` and `/readyz` until every cache has synced (`/healthz` is 200 at once);
//! - the served bytes follow pool changes within a second of the change, and a new rendered
//!   config is served only once `status.updatedMachineCount > 0`;
//! - token and CA rotation reach the served kubeconfig;
//! - an API outage keeps the last state served, and the server catches up after it;
//! - an unknown pool and a pool whose rendered MachineConfig is missing are 500 (Ignition
//!   retries), each logged once, and recover when the object appears.

use std::time::{Duration, Instant};
use support::mcs;
use support::tier;

use mcs::{poll, request, served_files, Response, Server};
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options};
use support::cluster::{
    copy_rendered_config, kubeconfig_parts, load_realistic_cluster, replace_file, token_dir,
    APISERVER_URL, FILE_CA, FIRST_TOKEN, MASTER_RENDERED, MCO_NAMESPACE, WORKER_RENDERED,
};
use support::fault_proxy::{FaultProxy, HoldAt};

const DEADLINE: Duration = Duration::from_secs(30);
const WITHIN_A_SECOND: Duration = Duration::from_secs(1);
const IGNITION_3_5: &str = "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1";
const ANNOTATIONS_FILE: &str = "/etc/machine-config-daemon/node-annotations.json";
const KUBECONFIG_FILE: &str = "/etc/kubernetes/kubeconfig";
const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";

struct Cluster {
    api: ApiServer,
    token_dir: tempfile::TempDir,
    server: Server,
}

impl Cluster {
    /// The realistic cluster in the fake API server and the binary in `start` mode against it.
    /// With `api_up` false the API server is stopped before the binary starts.
    fn start(api_up: bool) -> Cluster {
        let api = ApiServer::start(Options::default());
        load_realistic_cluster(&api);
        if !api_up {
            api.stop();
        }
        let token_dir = token_dir();
        let server =
            Server::start_cluster(api.kubeconfig_file(), APISERVER_URL, token_dir.path(), &[]);
        Cluster {
            api,
            token_dir,
            server,
        }
    }

    fn get(&self, pool: &str) -> Response {
        self.server.http(
            "GET",
            &format!("/config/{pool}"),
            &[("Accept", IGNITION_3_5), ("User-Agent", "Ignition/2.20.0")],
        )
    }

    fn admin(&self, path: &str) -> Response {
        request(self.server.metrics, None, "GET", path, &[])
    }

    fn wait_ready(&self) {
        poll("/readyz 200", DEADLINE, || {
            (self.admin("/readyz").status == 200).then_some(())
        });
    }

    /// The served config of `pool` (which must be 200).
    fn config(&self, pool: &str) -> Value {
        let response = self.get(pool);
        assert_eq!(
            response.status,
            200,
            "/config/{pool}\n{}",
            self.server.output()
        );
        response.json()
    }

    fn metric(&self, name: &str) -> Option<f64> {
        let text = String::from_utf8(self.admin("/metrics").body).unwrap();
        text.lines()
            .find(|line| line.split_whitespace().next() == Some(name))
            .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
    }

    fn log_lines_containing(&self, needle: &str) -> usize {
        self.server
            .output()
            .lines()
            .filter(|line| line.contains(needle))
            .count()
    }
}

fn file(config: &Value, path: &str) -> Vec<u8> {
    served_files(config)
        .into_iter()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| panic!("{path} in the served config"))
        .1
}

/// The rendered config a node would boot (`currentConfig` of the node annotations).
fn booted_config(config: &Value) -> String {
    let annotations: Value = serde_json::from_slice(&file(config, ANNOTATIONS_FILE)).unwrap();
    annotations[CURRENT_CONFIG].as_str().unwrap().to_string()
}

/// Polls `/config/<pool>` until `check` holds on a 200; returns how long it took.
fn wait_served(
    cluster: &Cluster,
    pool: &str,
    within: Duration,
    check: impl Fn(&Value) -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        let response = cluster.get(pool);
        if response.status == 200 && check(&response.json()) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "/config/{pool} did not change as expected within {within:?} (last status {})\n{}",
            response.status,
            cluster.server.output()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn not_ready_until_the_caches_sync() {
    let cluster = Cluster::start(false);
    // The process serves (the load balancer's health check) but has no cluster state.
    assert_eq!(cluster.server.http("GET", "/healthz", &[]).status, 200);
    assert_eq!(cluster.server.https("GET", "/healthz", &[]).status, 200);
    poll("the unreachable API to be reported", DEADLINE, || {
        (cluster.metric("mcs_api_reachable") == Some(0.0)).then_some(())
    });
    assert_eq!(cluster.get("worker").status, 503, "no partial state");
    assert_eq!(cluster.get("no-such-pool").status, 503);
    assert_eq!(cluster.admin("/readyz").status, 503);

    assert_eq!(cluster.server.https("GET", "/healthz", &[]).status, 200);

    cluster.api.restart();
    cluster.wait_ready();
    assert_eq!(cluster.server.https("GET", "/healthz", &[]).status, 200);
    let config = cluster.config("worker");
    assert_eq!(booted_config(&config), WORKER_RENDERED);
    let (server, token, ca) = kubeconfig_parts(&file(&config, KUBECONFIG_FILE));
    assert_eq!(
        (server.as_str(), token.as_str(), ca.as_slice()),
        (APISERVER_URL, FIRST_TOKEN, FILE_CA.as_bytes())
    );
    assert_eq!(cluster.metric("mcs_api_reachable"), Some(1.0));
}

/// A replica whose caches are still syncing when a machine reaches it (a rolling update's new
/// pod, in the balancer before it is ready) answers that machine once they have synced, not
/// with a 503 the machine must retry.
#[test]
fn a_request_during_the_caches_sync_waits_for_them() {
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let proxy = FaultProxy::start(api.kubeconfig_file());
    let held = proxy.hold_next(HoldAt::BeforeForwarding, |method, uri, _| {
        method == "GET" && uri.contains("/machineconfigs") && !uri.contains("watch=")
    });
    let token_dir = token_dir();
    let server = Server::start_cluster(
        proxy.kubeconfig_file(),
        APISERVER_URL,
        token_dir.path(),
        &[],
    );
    held.recv_timeout(DEADLINE)
        .expect("the MachineConfig list to be held");
    let ports = (server.insecure, server.metrics);
    let machine = std::thread::spawn(move || {
        let started = Instant::now();
        let response = request(
            ports.0,
            None,
            "GET",
            "/config/worker",
            &[("Accept", IGNITION_3_5), ("User-Agent", "Ignition/2.20.0")],
        );
        (response, started.elapsed())
    });
    // The machine's request is in before the caches synced.
    poll("the request to arrive", DEADLINE, || {
        (server.output().contains("remote_addr=") || machine.is_finished()).then_some(())
    });
    assert_eq!(request(ports.1, None, "GET", "/readyz", &[]).status, 503);
    std::thread::sleep(Duration::from_millis(300));
    proxy.clear_hold();
    proxy.release();
    let (response, took) = machine.join().unwrap();
    assert_eq!(
        response.status,
        200,
        "answered after the sync, in {took:?}\n{}",
        server.output()
    );
    assert_eq!(booted_config(&response.json()), WORKER_RENDERED);
}

/// A small rendered config (one file), so that timing measures the watch path and not the
/// debug build's rendering of a 400 KB config.
fn small_rendered_config(name: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": {"ignition": {"version": "3.4.0"},
                            "storage": {"files": [{"path": "/etc/rendered-by", "mode": 420,
                                                   "contents": {"source": format!("data:,{name}")}}]}}}
    })
}

fn pool(name: &str, spec: &str, status: &str, updated: i64) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {"configuration": {"name": spec},
                 "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
                 "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}},
        "status": {"configuration": {"name": status}, "machineCount": 1,
                   "updatedMachineCount": updated, "readyMachineCount": updated,
                   "unavailableMachineCount": 0, "degradedMachineCount": 0}
    })
}

/// A rendered MachineConfig in the API with every spec field set, acronyms included: the node
/// gets each of them unchanged in its encapsulated MachineConfig and in the content file.
#[test]
fn every_spec_field_reaches_the_node_unchanged() {
    let cluster = Cluster::start(true);
    cluster.wait_ready();
    let mut mc = small_rendered_config("rendered-full-1");
    mc["spec"]
        .as_object_mut()
        .unwrap()
        .extend(serde_json::Map::from_iter([
            (
                "osImageURL".to_string(),
                json!("quay.example.com/rhcos@sha256:0a0a"),
            ),
            (
                "baseOSExtensionsContainerImage".to_string(),
                json!("quay.example.com/rhcos-extensions@sha256:0b0b"),
            ),
            ("extensions".to_string(), json!(["usbguard", "kerberos"])),
            ("kernelType".to_string(), json!("realtime")),
            ("fips".to_string(), json!(true)),
            (
                "kernelArguments".to_string(),
                json!(["nosmt", "mitigations=auto"]),
            ),
        ]));
    cluster.api.apply_object(&mc).unwrap();
    cluster
        .api
        .apply_object(&pool("full", "rendered-full-1", "rendered-full-1", 0))
        .unwrap();
    wait_served(&cluster, "full", DEADLINE, |c| {
        booted_config(c) == "rendered-full-1"
    });
    let stored = cluster
        .api
        .get("MachineConfig", None, "rendered-full-1")
        .unwrap();
    let config = cluster.config("full");
    let served = |path: &str| -> Value { serde_json::from_slice(&file(&config, path)).unwrap() };
    let encapsulated = served("/etc/ignition-machine-config-encapsulated.json");
    let content = served("/etc/mcs-machine-config-content.json");
    let mut expected = stored["spec"].clone();
    assert_eq!(
        content["spec"], expected,
        "the content file: the spec as stored"
    );
    expected["config"] = json!({"ignition": {"version": "3.5.0"}});
    assert_eq!(
        encapsulated["spec"], expected,
        "encapsulated: the spec as stored, config emptied at the requested version"
    );
    for field in ["baseOSExtensionsContainerImage", "osImageURL", "kernelType"] {
        assert_ne!(encapsulated["spec"][field], json!(""), "{field} is set");
    }
}

/// `metav1.ObjectMeta`'s fields in Go's declaration order (k8s.io/apimachinery
/// `pkg/apis/meta/v1/types.go`), the order the original writes them in.
const GO_OBJECT_META_ORDER: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The MachineConfig a node is served (content file and encapsulated file) is the object the
/// API server returns, written as the original's `clarketm/json` writes its informer's object
/// (src/api/go_marshal.rs has each rule and its source): no `kind`/`apiVersion` (client-go's
/// decoders clear them), metadata in Go's field order, `managedFields` kept, no
/// `creationTimestamp` (clarketm calls every `metav1.Time` empty), HTML characters escaped.
#[test]
fn served_machine_config_is_the_api_object_as_the_original_marshals_it() {
    let cluster = Cluster::start(true);
    cluster.wait_ready();
    let mut mc = small_rendered_config("rendered-go-1");
    mc["metadata"]["labels"] = json!({"machineconfiguration.openshift.io/role": "go", "a": "1"});
    mc["metadata"]["annotations"] = json!({"example.com/note": "a<b & c>d"});
    cluster.api.apply_object(&mc).unwrap();
    cluster
        .api
        .apply_object(&pool("go", "rendered-go-1", "rendered-go-1", 0))
        .unwrap();
    wait_served(&cluster, "go", DEADLINE, |c| {
        booted_config(c) == "rendered-go-1"
    });
    let stored = cluster
        .api
        .get("MachineConfig", None, "rendered-go-1")
        .unwrap();
    let config = cluster.config("go");
    let content_bytes = file(&config, "/etc/mcs-machine-config-content.json");
    let encapsulated_bytes = file(&config, "/etc/ignition-machine-config-encapsulated.json");
    let content: Value = serde_json::from_slice(&content_bytes).unwrap();
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };

    // The API server sends TypeMeta and a creationTimestamp; the original's informer object
    // has no TypeMeta, and its encoder never writes a creationTimestamp.
    assert!(stored["apiVersion"].is_string() && stored["kind"].is_string());
    assert!(stored["metadata"]["creationTimestamp"].is_string());
    assert_eq!(keys(&content), ["metadata", "spec"]);
    let expected: Vec<&str> = GO_OBJECT_META_ORDER
        .into_iter()
        .filter(|key| *key != "creationTimestamp" && stored["metadata"].get(key).is_some())
        .collect();
    assert_eq!(keys(&content["metadata"]), expected, "Go's field order");
    // managedFields kept, as the API server returned them.
    assert!(!stored["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(
        content["metadata"]["managedFields"],
        stored["metadata"]["managedFields"]
    );
    assert_eq!(content["metadata"]["labels"], stored["metadata"]["labels"]);
    assert_eq!(content["spec"]["config"], stored["spec"]["config"]);
    // Go's encoder escapes HTML characters; its MarshalIndent indents with four spaces.
    let content_text = String::from_utf8(content_bytes).unwrap();
    assert!(
        content_text.contains(r#""example.com/note": "a\u003cb \u0026 c\u003ed""#),
        "{content_text}"
    );
    assert!(
        content_text.starts_with(
            "{\n    \"metadata\": {\n        \"name\": \"rendered-go-1\",\n        \"uid\": "
        ),
        "{content_text}"
    );
    // The encapsulated MachineConfig: the same object, compact, config emptied.
    let encapsulated_text = String::from_utf8(encapsulated_bytes).unwrap();
    assert!(
        encapsulated_text.starts_with(r#"{"metadata":{"name":"rendered-go-1","uid":""#),
        "{encapsulated_text}"
    );
    assert!(encapsulated_text.contains(r#""managedFields":[{"manager":"#));
    assert!(!encapsulated_text.contains("creationTimestamp"));
}

#[test]
fn served_config_follows_the_pool_and_waits_for_an_updated_machine() {
    let cluster = Cluster::start(true);
    cluster.wait_ready();
    assert_eq!(booted_config(&cluster.config("worker")), WORKER_RENDERED);
    assert_eq!(booted_config(&cluster.config("master")), MASTER_RENDERED);

    let [first, second, third] = ["rendered-edge-1", "rendered-edge-2", "rendered-edge-3"];
    for name in [first, second, third] {
        cluster
            .api
            .apply_object(&small_rendered_config(name))
            .unwrap();
    }
    cluster
        .api
        .apply_object(&pool("edge", first, first, 1))
        .unwrap();
    wait_served(&cluster, "edge", DEADLINE, |c| booted_config(c) == first);

    // The pool moves to another rendered config: served within a second.
    cluster
        .api
        .merge_patch(
            "MachineConfigPool",
            None,
            "edge",
            &json!({"spec": {"configuration": {"name": second}},
                    "status": {"configuration": {"name": second}}}),
        )
        .unwrap();
    let took = wait_served(&cluster, "edge", WITHIN_A_SECOND, |c| {
        booted_config(c) == second
    });
    eprintln!("pool change served after {took:?}");

    // The controller targets a newer render, but no node has updated to it yet
    // (updatedMachineCount 0): new nodes keep getting the pool's current config.
    cluster
        .api
        .merge_patch(
            "MachineConfigPool",
            None,
            "edge",
            &json!({"spec": {"configuration": {"name": third}},
                    "status": {"updatedMachineCount": 0}}),
        )
        .unwrap();
    // A later change on the same watch stream (another pool): once that is served, the edge
    // pool change has been seen too.
    let next_master = "rendered-master-00000000000000000000000000000001";
    copy_rendered_config(&cluster.api, MASTER_RENDERED, next_master);
    cluster
        .api
        .merge_patch(
            "MachineConfigPool",
            None,
            "master",
            &json!({"status": {"configuration": {"name": next_master}}}),
        )
        .unwrap();
    wait_served(&cluster, "master", DEADLINE, |c| {
        booted_config(c) == next_master
    });
    assert_eq!(
        booted_config(&cluster.config("edge")),
        second,
        "a new render is not served before a node has updated to it"
    );

    // One node finished updating: new nodes get the new render, within a second.
    cluster
        .api
        .merge_patch(
            "MachineConfigPool",
            None,
            "edge",
            &json!({"status": {"updatedMachineCount": 1}}),
        )
        .unwrap();
    let took = wait_served(&cluster, "edge", WITHIN_A_SECOND, |c| {
        booted_config(c) == third
    });
    eprintln!("updatedMachineCount change served after {took:?}");
    let config = cluster.config("edge");
    assert_eq!(file(&config, "/etc/rendered-by"), third.as_bytes());
    let encapsulated: Value = serde_json::from_slice(&file(
        &config,
        "/etc/ignition-machine-config-encapsulated.json",
    ))
    .unwrap();
    assert_eq!(encapsulated["metadata"]["name"], third);
}

#[test]
fn token_and_ca_rotation_reach_the_served_kubeconfig() {
    let cluster = Cluster::start(true);
    cluster.wait_ready();
    let served = |c: &Value| kubeconfig_parts(&file(c, KUBECONFIG_FILE));

    replace_file(&cluster.token_dir.path().join("token"), b"token-2");
    wait_served(&cluster, "worker", DEADLINE, |c| served(c).1 == "token-2");

    let new_file_ca = b"-----BEGIN CERTIFICATE-----\nROTATED FILE CA\n-----END CERTIFICATE-----\n";
    replace_file(&cluster.token_dir.path().join("ca.crt"), new_file_ca);
    wait_served(&cluster, "worker", DEADLINE, |c| served(c).2 == new_file_ca);

    // kubeconfig-data's CA bundle replaces the file's.
    use base64::Engine as _;
    let bundle = b"-----BEGIN CERTIFICATE-----\nKUBECONFIG-DATA CA\n-----END CERTIFICATE-----\n";
    cluster
        .api
        .merge_patch(
            "ConfigMap",
            Some(MCO_NAMESPACE),
            "kubeconfig-data",
            &json!({"binaryData": {"ca-bundle.crt": base64::engine::general_purpose::STANDARD.encode(bundle)}}),
        )
        .unwrap();
    wait_served(&cluster, "worker", DEADLINE, |c| {
        served(c)
            == (
                APISERVER_URL.to_string(),
                "token-2".to_string(),
                bundle.to_vec(),
            )
    });
}

#[tier(in_test_apiserver)]
#[test]
fn an_api_outage_keeps_serving_and_catches_up_after() {
    let cluster = Cluster::start(true);
    cluster.wait_ready();
    let before = cluster.get("worker");
    assert_eq!(before.status, 200);

    cluster.api.stop();
    poll("the outage to be reported", DEADLINE, || {
        (cluster.metric("mcs_api_reachable") == Some(0.0)).then_some(())
    });
    let during = cluster.get("worker");
    assert_eq!(during.status, 200, "the last known state is served");
    assert_eq!(during.body, before.body);
    assert_eq!(cluster.admin("/readyz").status, 200);
    assert_eq!(cluster.server.http("GET", "/healthz", &[]).status, 200);

    // The cluster moves on while the server cannot see it.
    let next = "rendered-worker-00000000000000000000000000000002";
    copy_rendered_config(&cluster.api, WORKER_RENDERED, next);
    cluster
        .api
        .merge_patch(
            "MachineConfigPool",
            None,
            "worker",
            &json!({"spec": {"configuration": {"name": next}},
                    "status": {"updatedMachineCount": 3}}),
        )
        .unwrap();
    cluster.api.compact();
    cluster.api.restart();

    wait_served(&cluster, "worker", DEADLINE, |c| booted_config(c) == next);
    poll("the recovery to be reported", DEADLINE, || {
        (cluster.metric("mcs_api_reachable") == Some(1.0)).then_some(())
    });
    assert_eq!(
        cluster.log_lines_containing("Kubernetes API is unreachable"),
        1
    );
    // The output is read by another thread: the line may trail the metric.
    poll("the recovery to be logged", DEADLINE, || {
        (cluster.log_lines_containing("Kubernetes API is reachable again") > 0).then_some(())
    });
    assert_eq!(
        cluster.log_lines_containing("Kubernetes API is reachable again"),
        1
    );
}

#[test]
fn unknown_pools_and_missing_rendered_configs_are_retried_not_final() {
    let cluster = Cluster::start(true);
    cluster.wait_ready();

    // A pool that does not exist (yet): 500, so Ignition keeps trying.
    for _ in 0..3 {
        assert_eq!(cluster.get("infra").status, 500);
    }
    let unknown_pool_errors = || {
        cluster
            .server
            .output()
            .lines()
            .filter(|l| l.contains("could not serve config") && l.contains("pool=infra"))
            .count()
    };
    // The server's output is read by another thread: wait for the line, then
    // check that the retries added none.
    poll("the unknown pool to be logged", DEADLINE, || {
        (unknown_pool_errors() > 0).then_some(())
    });
    for _ in 0..3 {
        assert_eq!(cluster.get("infra").status, 500);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        unknown_pool_errors(),
        1,
        "one error line, not one per retry"
    );
    // A pool whose rendered config is missing: 500, the reason logged once.
    let missing = "rendered-infra-00000000000000000000000000000404";
    cluster
        .api
        .apply_object(&json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": "infra"},
            "spec": {"configuration": {"name": missing},
                     "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "infra"}},
                     "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": ""}}},
            "status": {"configuration": {"name": missing}, "machineCount": 0,
                       "updatedMachineCount": 0, "readyMachineCount": 0,
                       "unavailableMachineCount": 0, "degradedMachineCount": 0}
        }))
        .unwrap();
    let source_log_lines = || {
        cluster
            .server
            .output()
            .lines()
            .filter(|l| l.contains("machineconfigpool/infra") && l.contains(missing))
            .count()
    };
    poll("the missing rendered config to be logged", DEADLINE, || {
        (source_log_lines() > 0).then_some(())
    });
    for _ in 0..5 {
        assert_eq!(cluster.get("infra").status, 500);
    }
    // Other pools are unaffected.
    assert_eq!(cluster.get("worker").status, 200);

    // The controller renders it: the pool is served.
    copy_rendered_config(&cluster.api, WORKER_RENDERED, missing);
    wait_served(&cluster, "infra", DEADLINE, |c| booted_config(c) == missing);
    assert_eq!(
        source_log_lines(),
        1,
        "logged once per pool and state, not once per retry"
    );
}
