//! The control plane's birth on its MachineConfigNodes (`bootstrap --served-records-kubeconfig`,
//! docs/node-birth.md): the installer's bootstrap server records what it served each master,
//! keeps the records in a file while the bootstrap node's API server is not up (and through a
//! SIGKILL of its static pod) and while the namespace does not exist, writes them under its own
//! key once the API takes them, and never makes an answer wait; the cluster's replicas, started
//! later on the same API, write each master's MCN with its record, marked as the bootstrap
//! server's, and remove the key once every control-plane Node carries its own. Without the flag
//! the answers are byte for byte what they were.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::{Duration, Instant};

use machine_config_server::mcn;
use serde_json::json;
use support::api_server::{ApiServer, Options};
use support::cluster::{
    fixture_dir, load_realistic_cluster, mcn_annotation, node_with_roles, token_dir, APISERVER_URL,
    MCO_NAMESPACE,
};
use support::fault_proxy::{Fault, FaultProxy};
use support::mcs::{self, poll, Server};

const DEADLINE: Duration = Duration::from_secs(30);
const ACCEPT: &str = "application/vnd.coreos.ignition+json;version=3.4.0";
const RECORDS: &str = mcn::exchange::DEFAULT_NAME;
const KEY: &str = mcn::exchange::BOOTSTRAP_SERVER_KEY;

fn master_address(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 31, 0, i + 1))
}

/// The bootstrap server on the full fixture, recording through `kubeconfig` into `records`.
fn bootstrap_server(kubeconfig: &Path, records: &Path) -> Server {
    let (kubeconfig, records) = (
        kubeconfig.display().to_string(),
        records.display().to_string(),
    );
    Server::bootstrap(
        &fixture_dir(),
        &[
            "--served-records-kubeconfig",
            &kubeconfig,
            "--served-records-dir",
            &records,
        ],
    )
}

/// One fetch of `pool` from `from`, as a machine at that address; the answer and how long it
/// took.
fn fetch(server: &Server, from: IpAddr, pool: &str) -> (mcs::Response, Duration) {
    let started = Instant::now();
    let response = mcs::request_from(
        from,
        server.secure,
        Some(mcs::dev_ca_client()),
        "GET",
        &format!("/config/{pool}"),
        &[("Accept", ACCEPT), ("User-Agent", "Ignition/2.20.0")],
    )
    .expect("an answer");
    (response, started.elapsed())
}

/// The bootstrap key's records in the shared ConfigMap, as `(address, pool)`.
fn published(api: &ApiServer) -> Option<Vec<(String, String)>> {
    let object = api.get("ConfigMap", Some(MCO_NAMESPACE), RECORDS)?;
    let text = object["data"][KEY].as_str()?;
    let decoded = mcn::exchange::decode(text).ok()?;
    let mut records: Vec<(String, String)> = decoded
        .into_iter()
        .map(|(address, record)| (address.to_string(), record.pool.clone()))
        .collect();
    records.sort();
    Some(records)
}

#[test]
fn masters_served_before_the_api_was_up_get_their_bootstrap_record_from_the_cluster() {
    let api = ApiServer::start(Options {
        cluster_namespaces: false,
        ..Options::default()
    });
    eprintln!("API server: {}", api.describe());
    // The bootstrap node's API server is not up yet: every connection is reset.
    let proxy = FaultProxy::start(api.kubeconfig_file());
    proxy.set(Fault::Resets);
    let records_dir = tempfile::tempdir().unwrap();
    let mut bootstrap = bootstrap_server(proxy.kubeconfig_file(), records_dir.path());

    // Two masters boot; no answer waits for the API it cannot reach.
    for i in 0..2 {
        let (response, took) = fetch(&bootstrap, master_address(i), "master");
        assert_eq!(response.status, 200, "{}", bootstrap.output());
        assert!(
            took < Duration::from_millis(1500),
            "an answer waited for the API ({took:?})"
        );
    }
    // A worker that reaches the bootstrap server too early gets its 500 and no record.
    let (response, _) = fetch(
        &bootstrap,
        IpAddr::V4(Ipv4Addr::new(127, 31, 1, 1)),
        "worker",
    );
    assert_eq!(response.status, 500);
    let file = records_dir.path().join(mcn::bootstrap_records::FILE_NAME);
    poll("the records file holds both masters", DEADLINE, || {
        let text = std::fs::read_to_string(&file).ok()?;
        (mcn::exchange::decode(&text).ok()?.len() == 2).then_some(())
    });
    // The static pod is killed and restarted before the API is up: the file keeps the records.
    bootstrap
        .restart()
        .expect("the bootstrap server starts again");
    let (response, _) = fetch(&bootstrap, master_address(2), "master");
    assert_eq!(response.status, 200);

    // The API is up, but the namespace is not there yet: the writes wait (404), logged once.
    proxy.set(Fault::None);
    poll(
        "the bootstrap server says its records wait",
        DEADLINE,
        || {
            bootstrap
                .output()
                .contains("the namespace does not exist yet (404)")
                .then_some(())
        },
    );
    assert!(published(&api).is_none());
    api.apply_object(&json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MCO_NAMESPACE}
    }))
    .unwrap();
    let expected: Vec<(String, String)> = (0..3)
        .map(|i| (master_address(i).to_string(), "master".to_string()))
        .collect();
    poll("the three masters' records in the API", DEADLINE, || {
        (published(&api)? == expected).then_some(())
    });
    let object = api.get("ConfigMap", Some(MCO_NAMESPACE), RECORDS).unwrap();
    let managers: Vec<&str> = object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry["manager"].as_str())
        .collect();
    assert!(
        managers.contains(&"mcs-served-bootstrap_server"),
        "{managers:?}"
    );

    // Tens of minutes later in a real install: the cluster's objects, the masters' Nodes,
    // the replicas; the bootstrap server is gone from the balancer by then.
    bootstrap.terminate();
    bootstrap.wait_exit(DEADLINE);
    load_realistic_cluster(&api);
    for i in 0..3u8 {
        api.apply_object(&node_with_roles(
            &format!("master-{i}"),
            master_address(i),
            &["master"],
        ))
        .unwrap();
    }
    api.apply_object(&node_with_roles("worker-early", "127.31.1.1", &["worker"]))
        .unwrap();
    let tokens = token_dir();
    let _replica = Server::start_cluster(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[
            ("POD_NAME", "mcs-pod-0"),
            (mcn::ENV_NODE_NAME, "master-0"),
            (mcn::ENV_LEASE_DURATION_MS, "3000"),
            (mcn::ENV_RENEW_PERIOD_MS, "500"),
            (mcn::ENV_RENEW_DEADLINE_MS, "2000"),
            (mcn::ENV_RETRY_PERIOD_MS, "300"),
            (mcn::ENV_RESYNC_MS, "500"),
        ],
    );
    for i in 0..3u8 {
        let name = format!("master-{i}");
        let mcn = poll(
            &format!("{name}'s MCN with its bootstrap record"),
            DEADLINE,
            || {
                api.get("MachineConfigNode", None, &name)
                    .filter(|mcn| mcn_annotation(mcn, "bootstrap-served-by").is_some())
            },
        );
        assert_eq!(
            mcn_annotation(&mcn, "bootstrap-served-by").as_deref(),
            Some(KEY),
            "{mcn}"
        );
        assert_eq!(
            mcn_annotation(&mcn, "bootstrap-address"),
            Some(master_address(i).to_string())
        );
        assert_eq!(
            mcn_annotation(&mcn, "bootstrap-pool").as_deref(),
            Some("master")
        );
    }
    // Every control-plane Node carries its record: the key has done its job.
    poll("the bootstrap key removed", DEADLINE, || {
        let object = api.get("ConfigMap", Some(MCO_NAMESPACE), RECORDS)?;
        object["data"][KEY].is_null().then_some(())
    });
    let worker = poll("the early worker's MCN", DEADLINE, || {
        api.get("MachineConfigNode", None, "worker-early")
    });
    assert_eq!(
        mcn_annotation(&worker, "bootstrap-served-by"),
        None,
        "{worker}"
    );
}

#[test]
fn without_the_flag_the_answers_and_the_disk_are_as_they_were_and_with_it_the_answers_too() {
    let api = ApiServer::start(Options::default());
    let records_dir = tempfile::tempdir().unwrap();
    let with = bootstrap_server(api.kubeconfig_file(), records_dir.path());
    let without = Server::bootstrap(&fixture_dir(), &[]);
    for accept in [
        None,
        Some("application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1"),
        Some(ACCEPT),
    ] {
        let headers: Vec<(&str, &str)> = accept.map(|a| ("Accept", a)).into_iter().collect();
        let a = with.http("GET", "/config/master", &headers);
        let b = without.http("GET", "/config/master", &headers);
        assert_eq!(a.status, 200);
        assert_eq!(a.body, b.body, "{accept:?}");
        assert_eq!(
            a.headers.get("content-length"),
            b.headers.get("content-length")
        );
    }
    // The flagged server wrote its records; the other has no writer at all.
    poll("the flagged server's records in the API", DEADLINE, || {
        published(&api).filter(|records| !records.is_empty())
    });
    assert!(with.output().contains("--served-records-kubeconfig"));
    assert!(
        !without.output().contains("served records"),
        "{}",
        without.output()
    );
}

/// The rights `config/bootstrap-pod/served-records-rbac.yaml` grants are all the bootstrap
/// server's records need, as the API server's authorizer decides (a real kube-apiserver's RBAC
/// with `KUBEBUILDER_ASSETS`, else the in-test server's model of it): with a token of that
/// ServiceAccount the records reach the API and no request is forbidden.
#[test]
fn the_example_rbac_is_all_the_bootstrap_records_need() {
    let api = ApiServer::start(Options::default());
    let rbac = mcs::repo().join("config/bootstrap-pod/served-records-rbac.yaml");
    api.apply_object(&json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "machine-config-server-bootstrap", "namespace": MCO_NAMESPACE}
    }))
    .unwrap();
    if let Err(e) = api.load_yaml_file(&rbac) {
        panic!("{}: {e}", rbac.display());
    }
    let token = api
        .token_for(MCO_NAMESPACE, "machine-config-server-bootstrap")
        .unwrap();
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(kubeconfig.path(), api.kubeconfig_with_token(&token)).unwrap();
    let records_dir = tempfile::tempdir().unwrap();
    let bootstrap = bootstrap_server(kubeconfig.path(), records_dir.path());
    let (response, _) = fetch(&bootstrap, master_address(9), "master");
    assert_eq!(response.status, 200);
    poll("the record in the API", DEADLINE, || {
        published(&api).filter(|records| !records.is_empty())
    });
    let user = format!("system:serviceaccount:{MCO_NAMESPACE}:machine-config-server-bootstrap");
    let forbidden: Vec<_> = api
        .requests_of(&user)
        .into_iter()
        .filter(|r| r.status == 403)
        .collect();
    assert!(forbidden.is_empty(), "{forbidden:?}");
}
