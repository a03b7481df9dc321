//! The server dropped in where the machine-config-operator runs it: started as the MCO's
//! DaemonSet starts it (`start --apiserver-url=... --payload-version=... --tls-cipher-suites=...
//! --tls-min-version=... --v=2`, no `POD_NAME` or `NODE_NAME`), authenticated as the
//! `machine-config-server` ServiceAccount and bound to exactly the MCO's own ClusterRole
//! (`tests/fixtures/mco/clusterrole.yaml`, the MCO's rules kept as test data): no rights on
//! Nodes, MachineConfigNodes, Leases or Events, `get`/`list` only on Services and Routes.
//!
//! What a user notices:
//! - every pool that is not layered is served, byte for byte as a server with every right
//!   serves it, and never 503 once it has been served once;
//! - a layered pool is decided by the original's gate (the pool's `updatedMachineCount`);
//! - the API server refuses none of its requests (it asks what it may do first), and each
//!   feature beyond the original is off, said in one log line each, on `/status` and in
//!   `mcs_feature_enabled`;
//! - granting the extras (`config/deploy/extras`) while it runs turns the MachineConfigNode
//!   publisher on without a restart, and revoking them turns it off with the same line.
//!
//! A third test holds the API server's authorizer (the in-test one, or kube-apiserver's with
//! `KUBEBUILDER_ASSETS`) to what kube-apiserver decides for these rules: `watch` without the verb,
//! `list` limited by `resourceNames`, SelfSubjectAccessReviews.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use machine_config_server::mcn;
use machine_config_server::source::cluster::rights::ENV_PROBE_INTERVAL_MS;
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options, RequestRecord};
use support::cluster::{load_realistic_cluster, token_dir, worker_node, APISERVER_URL};
use support::mcs::{self, poll, Server};

const DEADLINE: Duration = Duration::from_secs(30);
const NAMESPACE: &str = "openshift-machine-config-operator";
const SERVICE_ACCOUNT: &str = "machine-config-server";
const LAYERED: &str = "layered-worker";
const FEATURES: [&str; 4] = [
    "layered-node-gate",
    "mcn-publisher",
    "shared-records",
    "events",
];
/// The Intermediate profile's TLS 1.2 suites, as the MCO passes them (IANA names).
const CIPHER_SUITES: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256";
/// What Ignition of each generation asks for (none: spec 2.2).
const ACCEPTS: [Option<&str>; 4] = [
    None,
    Some("application/vnd.coreos.ignition+json;version=3.1.0"),
    Some("application/vnd.coreos.ignition+json;version=3.4.0"),
    Some("application/vnd.coreos.ignition+json;version=3.5.0"),
];

fn user() -> String {
    format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}")
}

fn deploy(file: &str) -> std::path::PathBuf {
    mcs::repo().join("config/deploy").join(file)
}

/// The realistic cluster with its layered pool, some worker Nodes, and the ServiceAccount bound
/// to the MCO's ClusterRole. Returns a kubeconfig authenticating as the ServiceAccount.
fn cluster_under_the_mcos_rights(api: &ApiServer) -> tempfile::NamedTempFile {
    load_realistic_cluster(api);
    api.load_yaml_file(support::fixtures::layered_objects())
        .unwrap();
    for i in 0..20 {
        api.apply_object(&worker_node(&format!("worker-{i}"), format!("10.0.3.{i}")))
            .unwrap();
    }
    api.load_yaml_file(deploy("serviceaccount.yaml")).unwrap();
    api.load_yaml_file(mcs::repo().join("tests/fixtures/mco/clusterrole.yaml"))
        .unwrap();
    let token = api.token_for(NAMESPACE, SERVICE_ACCOUNT).unwrap();
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(kubeconfig.path(), api.kubeconfig_with_token(&token)).unwrap();
    kubeconfig
}

/// `machine-config-server` as the MCO's DaemonSet runs it (its flags; no POD_NAME, NODE_NAME),
/// with `kubeconfig` instead of the in-cluster configuration.
fn start_as_the_mco_runs_it(kubeconfig: &Path, tokens: &Path, env: &[(&str, &str)]) -> Server {
    Server::start_with_env(
        &[
            "start",
            &format!("--apiserver-url={APISERVER_URL}"),
            "--payload-version=4.22.0-0.test",
            &format!("--tls-cipher-suites={CIPHER_SUITES}"),
            "--tls-min-version=VersionTLS12",
            "--v=2",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--bootstrap-token-dir",
            tokens.to_str().unwrap(),
        ],
        env,
    )
}

fn get(server: &Server, pool: &str, accept: Option<&str>) -> mcs::Response {
    let headers: Vec<(&str, &str)> = accept.map(|a| ("Accept", a)).into_iter().collect();
    server.http("GET", &format!("/config/{pool}"), &headers)
}

fn status_page(server: &Server) -> Value {
    mcs::request(server.metrics, None, "GET", "/status", &[]).json()
}

fn metric(server: &Server, series: &str) -> Option<f64> {
    let body = mcs::request(server.metrics, None, "GET", "/metrics", &[]).body;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The log lines that say `feature` turned off (`"feature off"`) or on.
fn feature_lines(server: &Server, feature: &str, off: bool) -> usize {
    let phrase = if off { "feature off" } else { "feature on" };
    server
        .output()
        .lines()
        .filter(|l| l.contains(phrase) && l.contains(&format!("feature=\"{feature}\"")))
        .count()
}

/// `spec.osImageURL` of the MachineConfig encapsulated in a served config.
fn encapsulated_image(body: &[u8]) -> String {
    let config: Value = serde_json::from_slice(body).unwrap();
    let file = config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/etc/ignition-machine-config-encapsulated.json")
        .expect("the encapsulated MachineConfig");
    let source = file["contents"]["source"].as_str().unwrap();
    let data = source.strip_prefix("data:,").unwrap();
    let decoded = percent_encoding::percent_decode_str(data)
        .decode_utf8()
        .unwrap();
    let mc: Value = serde_json::from_str(&decoded).unwrap();
    mc["spec"]["osImageURL"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn forbidden(api: &ApiServer) -> Vec<RequestRecord> {
    api.requests_of(&user())
        .into_iter()
        .filter(|r| r.status == 403)
        .collect()
}

#[test]
fn under_the_mcos_own_rights_every_pool_is_served_as_with_full_rights() {
    let api = ApiServer::start(Options::default());
    let kubeconfig = cluster_under_the_mcos_rights(&api);
    let tokens = token_dir();
    // A server with every right, for the expected bytes.
    let full = Server::start_cluster(api.kubeconfig_file(), APISERVER_URL, tokens.path(), &[]);
    let probe = [(ENV_PROBE_INTERVAL_MS, "1000")];
    let mco = start_as_the_mco_runs_it(kubeconfig.path(), tokens.path(), &probe);

    // The first worker config comes once the caches the original reads have synced.
    poll("/config/worker under the MCO's rights", DEADLINE, || {
        (get(&mco, "worker", None).status == 200).then_some(())
    });
    for pool in ["master", "worker"] {
        for accept in ACCEPTS {
            let expected = poll("the full-rights answer", DEADLINE, || {
                let answer = get(&full, pool, accept);
                (answer.status == 200).then_some(answer.body)
            });
            let answer = get(&mco, pool, accept);
            assert_eq!(answer.status, 200, "{pool} {accept:?}: no 503 once served");
            assert!(
                answer.body == expected,
                "{pool} {accept:?}: the answer differs from the full-rights server's"
            );
        }
    }

    // The layered pool: nobody has validated its build. With full rights the Node gate holds
    // it; under the MCO's rights the original's gate holds it (updatedMachineCount is 0).
    let mosc_image = api.get("MachineOSConfig", None, LAYERED).unwrap()["status"]
        ["currentImagePullSpec"]
        .as_str()
        .unwrap()
        .to_string();
    let layered = |server: &Server| {
        poll("the layered pool served", DEADLINE, || {
            let answer = get(server, LAYERED, ACCEPTS[3]);
            (answer.status == 200).then_some(answer.body)
        })
    };
    assert_ne!(encapsulated_image(&layered(&mco)), mosc_image);
    assert_eq!(layered(&mco), layered(&full));
    let reason =
        |server: &Server| status_page(server)["pools"][LAYERED]["layered"]["reason"].clone();
    assert_eq!(reason(&mco), "pool_not_updated");
    assert_eq!(reason(&full), "not_validated");
    // A machine of the pool completed the update: the original serves the MachineOSConfig's
    // image to new nodes, and so does this server under the original's rights.
    api.merge_patch(
        "MachineConfigPool",
        None,
        LAYERED,
        &json!({"status": {"updatedMachineCount": 1, "machineCount": 1}}),
    )
    .unwrap();
    poll("the MachineOSConfig's image served", DEADLINE, || {
        (encapsulated_image(&layered(&mco)) == mosc_image).then_some(())
    });
    assert_eq!(reason(&mco), "pool_updated");
    assert_ne!(
        encapsulated_image(&layered(&full)),
        mosc_image,
        "with Node rights no node validated it"
    );

    // Let several rights probes pass: still nothing forbidden, one line per feature.
    let reviews = || {
        api.requests_of(&user())
            .iter()
            .filter(|r| r.resource == "selfsubjectaccessreviews")
            .count()
    };
    let first_round = poll("a first rights probe", DEADLINE, || {
        Some(reviews()).filter(|n| *n > 0)
    });
    poll("two more rights probes", DEADLINE, || {
        (reviews() >= 3 * first_round).then_some(())
    });
    assert_eq!(forbidden(&api), Vec::<RequestRecord>::new());
    let page = status_page(&mco);
    for feature in FEATURES {
        assert_eq!(
            feature_lines(&mco, feature, true),
            1,
            "one line says {feature} is off:\n{}",
            mco.output()
        );
        assert_eq!(page["features"][feature]["state"], "disabled", "{page:#}");
        assert_eq!(
            metric(
                &mco,
                &format!("mcs_feature_enabled{{feature=\"{feature}\"}}")
            ),
            Some(0.0)
        );
    }
    let missing = page["features"]["mcn-publisher"]["missing"].to_string();
    assert!(missing.contains("list nodes"), "{missing}");
    // Every pool is ready; the ServiceAccount wrote nothing (no MachineConfigNode, Lease,
    // Event or shared record: the full-rights server beside it writes those).
    for (pool, readiness) in page["readiness"].as_object().unwrap() {
        assert_eq!(readiness["ready"], true, "{pool}: {readiness}");
    }
    let writes: Vec<RequestRecord> = api
        .requests_of(&user())
        .into_iter()
        .filter(|r| r.resource != "selfsubjectaccessreviews")
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
        .collect();
    assert_eq!(writes, Vec::<RequestRecord>::new());
    // The full-rights server is on every feature, in the same cluster.
    let page = status_page(&full);
    for feature in FEATURES {
        assert_eq!(page["features"][feature]["state"], "enabled", "{page:#}");
    }
}

#[test]
fn granting_the_extras_turns_the_publisher_on_without_a_restart() {
    let api = ApiServer::start(Options::default());
    let kubeconfig = cluster_under_the_mcos_rights(&api);
    let tokens = token_dir();
    let mco = start_as_the_mco_runs_it(
        kubeconfig.path(),
        tokens.path(),
        &[(ENV_PROBE_INTERVAL_MS, "500")],
    );
    // A machine boots from this server, then joins as a Node at the same address.
    poll("/config/worker", DEADLINE, || {
        (get(&mco, "worker", ACCEPTS[3]).status == 200).then_some(())
    });
    api.apply_object(&worker_node("joined", "127.0.0.1"))
        .unwrap();
    let probes = |api: &ApiServer| {
        api.requests_of(&user())
            .iter()
            .filter(|r| r.resource == "selfsubjectaccessreviews")
            .count()
    };
    let seen = probes(&api);
    poll("two more rights probes", DEADLINE, || {
        (probes(&api) >= seen * 3).then_some(())
    });
    assert!(
        api.get("MachineConfigNode", None, "joined").is_none(),
        "no MachineConfigNode without the rights"
    );

    // The administrator grants the extras beside the MCO's role.
    api.load_yaml_file(deploy("extras/rbac.yaml")).unwrap();
    let mcn = poll("the joined Node's MachineConfigNode", DEADLINE, || {
        api.get("MachineConfigNode", None, "joined")
    });
    assert_eq!(
        mcn["metadata"]["annotations"][mcn::desired::annotations::BOOTSTRAP_ADDRESS],
        "127.0.0.1",
        "{mcn:#}"
    );
    let page = status_page(&mco);
    for feature in FEATURES {
        assert_eq!(page["features"][feature]["state"], "enabled", "{page:#}");
        assert_eq!(feature_lines(&mco, feature, false), 1, "{feature} on");
    }

    // And revokes them: the publisher stops, said once more.
    api.delete("ClusterRoleBinding", None, "machine-config-server-extras")
        .unwrap();
    poll("the publisher off again", DEADLINE, || {
        (status_page(&mco)["features"]["mcn-publisher"]["state"] == "disabled").then_some(())
    });
    assert_eq!(feature_lines(&mco, "mcn-publisher", true), 2);
    assert_eq!(
        metric(&mco, "mcs_feature_enabled{feature=\"mcn-publisher\"}"),
        Some(0.0)
    );
    // Serving never stopped.
    assert_eq!(get(&mco, "worker", ACCEPTS[3]).status, 200);
    // Forbidden requests: a few at most (what was in flight when the grant went).
    let refused = forbidden(&api);
    assert!(refused.len() <= 4, "{refused:#?}");
}

/// What kube-apiserver's RBAC decides for the MCO's rules, and for `resourceNames` on `list`,
/// asked as the ServiceAccount: the in-test server must decide the same (and on a real one,
/// this documents kube-apiserver's behaviour the server relies on).
#[test]
fn the_authorizer_refuses_exactly_what_kube_apiserver_refuses_for_these_rules() {
    let api = ApiServer::start(Options::default());
    let kubeconfig = cluster_under_the_mcos_rights(&api);
    // A second identity whose only right is `list`/`watch` of one ConfigMap by name.
    api.apply_object(&json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "by-name", "namespace": NAMESPACE}
    }))
    .unwrap();
    api.apply_object(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "by-name", "namespace": NAMESPACE},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "resourceNames": ["kubeconfig-data"], "verbs": ["list", "watch"]}]
    }))
    .unwrap();
    api.apply_object(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "by-name", "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "by-name"},
        "subjects": [{"kind": "ServiceAccount", "name": "by-name", "namespace": NAMESPACE}]
    }))
    .unwrap();
    let token = api.token_for(NAMESPACE, "by-name").unwrap();
    let by_name = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(by_name.path(), api.kubeconfig_with_token(&token)).unwrap();

    let mco_cm = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let registry = "/api/v1/namespaces/openshift-image-registry";
    let mcfg = "/apis/machineconfiguration.openshift.io/v1";
    // (path and query, status): GETs, watches ending after a second.
    let mco_cases: Vec<(String, u16)> = vec![
        (format!("{mcfg}/machineconfigpools"), 200),
        (format!("{mcfg}/machineconfigpools?watch=true&timeoutSeconds=1"), 200),
        (format!("{mcfg}/controllerconfigs"), 200),
        (format!("{mcfg}/machineosbuilds?watch=true&timeoutSeconds=1"), 200),
        (format!("{mco_cm}?fieldSelector=metadata.name%3Dkubeconfig-data"), 200),
        (format!("{mco_cm}?watch=true&timeoutSeconds=1"), 200),
        (format!("{registry}/services"), 200),
        // `get` and `list` only: no watch.
        (format!("{registry}/services?watch=true&timeoutSeconds=1"), 403),
        (
            "/apis/route.openshift.io/v1/namespaces/openshift-image-registry/routes?watch=true&timeoutSeconds=1".to_string(),
            // Authorization comes before routing: 403 also where no Route API is served.
            403,
        ),
        ("/api/v1/nodes".to_string(), 403),
        ("/api/v1/nodes?watch=true&timeoutSeconds=1".to_string(), 403),
        (format!("{mcfg}/machineconfignodes"), 403),
        (
            format!("/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/machine-config-server-mcn-publisher"),
            403,
        ),
    ];
    let by_name_cases: Vec<(String, u16)> = vec![
        (mco_cm.clone(), 403),
        (format!("{mco_cm}?fieldSelector=metadata.name%3Dkubeconfig-data"), 200),
        (
            format!("{mco_cm}?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dkubeconfig-data"),
            200,
        ),
        (format!("{mco_cm}?fieldSelector=metadata.name%3Dother"), 403),
        (format!("{mco_cm}/kubeconfig-data"), 403),
    ];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut wrong = Vec::new();
    for (kubeconfig, cases) in [
        (kubeconfig.path(), &mco_cases),
        (by_name.path(), &by_name_cases),
    ] {
        let client = runtime.block_on(client(kubeconfig));
        for (path, expected) in cases {
            let status = runtime.block_on(status_of(&client, "GET", path, None));
            if status != *expected {
                wrong.push(format!(
                    "GET {path}: {status}, kube-apiserver answers {expected}"
                ));
            }
        }
    }
    // SelfSubjectAccessReviews: any identity may ask, and the answer follows the same rules.
    let client = runtime.block_on(client(kubeconfig.path()));
    let mut review = |verb: &str, resource: &str, namespace: &str| -> bool {
        let body = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "group": "", "resource": resource,
                                            "namespace": namespace}}
        });
        let (status, answer) = runtime.block_on(json_of(
            &client,
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            &body,
        ));
        if status != 201 {
            wrong.push(format!(
                "SelfSubjectAccessReview: {status}, kube-apiserver answers 201"
            ));
        }
        answer["status"]["allowed"] == true
    };
    let answers: BTreeMap<&str, bool> = BTreeMap::from([
        ("list configmaps", review("list", "configmaps", NAMESPACE)),
        (
            "watch services",
            review("watch", "services", "openshift-image-registry"),
        ),
        (
            "list services",
            review("list", "services", "openshift-image-registry"),
        ),
        ("list nodes", review("list", "nodes", "")),
    ]);
    assert_eq!(
        answers,
        BTreeMap::from([
            ("list configmaps", true),
            ("watch services", false),
            ("list services", true),
            ("list nodes", false),
        ])
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

async fn status_of(client: &kube::Client, method: &str, path: &str, body: Option<&Value>) -> u16 {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", "application/json")
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .unwrap();
    match client.send(request.map(kube::client::Body::from)).await {
        Ok(response) => response.status().as_u16(),
        Err(kube::Error::Api(status)) => status.code,
        Err(error) => panic!("{method} {path}: {error}"),
    }
}

async fn json_of(client: &kube::Client, path: &str, body: &Value) -> (u16, Value) {
    let request = http::Request::builder()
        .method("POST")
        .uri(path)
        .header("Content-Type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}
