//! `POST /v1/node-failure` end to end, with the real binary:
//! - bootstrap mode: upstream's answers on both ports (405, 400 with Go's JSON bodies, 202),
//!   beyond upstream 413 for a large body, 429 past the per-source budget and 403 under the
//!   access policy; an accepted report is logged, counted and listed on `/status`, sanitized;
//! - cluster mode, two replicas against the test's API server (the in-test one, or a real
//!   kube-apiserver with the real CRDs when `KUBEBUILDER_ASSETS` is set): a machine reports to
//!   the replica that does not lead; the report reaches the lease holder through the shared
//!   records, which writes a Warning `FirstbootFailed` Event on the pool with upstream's
//!   message, and, once the machine's Node joins, the failure on its MachineConfigNode only
//!   (another machine's stays without); a later successful boot of that node clears it.

use std::net::IpAddr;
use std::time::Duration;
use support::mcs;

use machine_config_server::events::REPORTING_CONTROLLER;
use machine_config_server::mcn;
use mcs::{poll, Server};
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options};
use support::cluster::{
    lease_holder, load_realistic_cluster, mcn_annotation, token_dir, worker_node, APISERVER_URL,
    MCO_NAMESPACE,
};

const DEADLINE: Duration = Duration::from_secs(30);
const PATH: &str = "/v1/node-failure";
const ACCEPT: (&str, &str) = (
    "Accept",
    "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1",
);
/// Upstream's daemon's report of a pivot that cannot pull (with a secret in its message).
const REPORT: &str = r#"{"pool":"worker","nodeID":"localhost","stage":"firstboot-update","imageURL":"https://puller:hunter2@quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123","errorMessage":"error: Creating importer: pinging container registry quay.io: Get \"https://quay.io/v2/\": bearer abc.def.ghi unauthorized"}"#;
const SANITIZED: &str = "error: Creating importer: pinging container registry quay.io: Get \"https://quay.io/v2/\": bearer [REDACTED] unauthorized";

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn post(
    server: &Server,
    tls: bool,
    source: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> mcs::Response {
    let (address, tls) = if tls {
        (server.secure, Some(mcs::dev_ca_client()))
    } else {
        (server.insecure, None)
    };
    let raw = mcs::exchange_from(
        ip(source),
        address,
        tls,
        &mcs::post_json_bytes(PATH, body, headers),
    )
    .unwrap_or_else(|e| panic!("POST {PATH} from {source}: {e}"));
    mcs::parse_response(&raw, false).unwrap()
}

fn body(response: &mcs::Response) -> &str {
    std::str::from_utf8(&response.body).unwrap()
}

fn metric(server: &Server, series: &str) -> f64 {
    let body = mcs::request(server.metrics, None, "GET", "/metrics", &[]).body;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn bootstrap_mode_answers_as_upstream_logs_counts_and_shows_the_report() {
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "s3cret\n").unwrap();
    let server = Server::bootstrap(
        &mcs::repo().join("config/bootstrap"),
        &["--require-token-file", token.path().to_str().unwrap()],
    );
    let auth = ("Authorization", "Bearer s3cret");
    for tls in [false, true] {
        // Other methods: 405, empty body.
        let tls_client = tls.then(mcs::dev_ca_client);
        let address = if tls { server.secure } else { server.insecure };
        for method in ["GET", "PUT", "HEAD"] {
            let response = mcs::request(address, tls_client.clone(), method, PATH, &[auth]);
            assert_eq!(response.status, 405, "{method}");
            assert_eq!(response.header("content-length"), Some("0"));
            assert!(response.body.is_empty());
        }
        // The access policy of config requests: the token is required.
        assert_eq!(post(&server, tls, "127.0.0.1", REPORT, &[]).status, 403);
        let bad = post(&server, tls, "127.0.0.1", "invalid json", &[auth]);
        assert_eq!(bad.status, 400);
        assert_eq!(bad.header("content-type"), Some("application/json"));
        assert_eq!(body(&bad), "{\"error\":\"Invalid JSON payload\"}\n");
        let missing = post(&server, tls, "127.0.0.1", r#"{"pool":"worker"}"#, &[auth]);
        assert_eq!(missing.status, 400);
        assert_eq!(
            body(&missing),
            "{\"error\":\"Missing required fields: pool, nodeID, and stage are required\"}\n"
        );
    }
    let accepted = post(&server, false, "127.0.0.2", REPORT, &[auth]);
    assert_eq!(accepted.status, 202);
    assert_eq!(accepted.header("content-type"), Some("application/json"));
    assert_eq!(body(&accepted), "{\"status\":\"accepted\"}\n");
    // A body beyond the cap.
    let large = format!(
        r#"{{"pool":"worker","nodeID":"n","stage":"s","errorMessage":"{}"}}"#,
        "x".repeat(9000)
    );
    assert_eq!(
        post(&server, false, "127.0.0.2", &large, &[auth]).status,
        413
    );
    // Five reports at once per source (refusals by the access policy do not count): 127.0.0.1
    // sent four above, its fifth is answered, its sixth refused.
    assert_eq!(post(&server, true, "127.0.0.1", "{}", &[auth]).status, 400);
    assert_eq!(
        post(&server, true, "127.0.0.1", REPORT, &[auth]).status,
        429
    );

    // Logged (sanitized; the line is read from the process's output, so waited for), counted,
    // and on /status.
    let line = poll("the report's log line", DEADLINE, || {
        server
            .output()
            .lines()
            .find(|l| l.contains("machine reported a first-boot failure"))
            .map(str::to_owned)
    });
    let output = server.output();
    assert!(
        line.contains("127.0.0.2") && line.contains("firstboot-update"),
        "{line}"
    );
    assert!(
        !output.contains("hunter2") && !output.contains("abc.def.ghi"),
        "{output}"
    );
    assert_eq!(
        metric(
            &server,
            r#"mcs_firstboot_failures_total{pool="<unknown>",stage="firstboot-update"}"#
        ),
        1.0,
        "bootstrap mode serves master and arbiter only: worker is no pool here"
    );
    for (result, count) in [
        ("accepted", 1.0),
        ("invalid", 5.0),
        ("denied", 2.0),
        ("method_not_allowed", 6.0),
        ("too_large", 1.0),
        ("rate_limited", 1.0),
    ] {
        assert_eq!(
            metric(
                &server,
                &format!(r#"mcs_node_failure_reports_total{{result="{result}"}}"#)
            ),
            count,
            "{result}"
        );
    }
    let status = mcs::request(server.metrics, None, "GET", "/status", &[]).json();
    let failures = status["firstboot_failures"]
        .as_array()
        .expect("the reports");
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0]["address"], "127.0.0.2");
    assert_eq!(failures[0]["stage"], "firstboot-update");
    assert_eq!(failures[0]["image"], "quay.io");
    assert_eq!(failures[0]["message"], SANITIZED);
}

fn start_replica(api: &ApiServer, tokens: &tempfile::TempDir, pod: &str) -> Server {
    Server::start_cluster(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[
            ("POD_NAME", pod),
            ("NODE_NAME", pod),
            (mcn::ENV_LEASE_DURATION_MS, "20000"),
            (mcn::ENV_RENEW_DEADLINE_MS, "15000"),
            (mcn::ENV_RENEW_PERIOD_MS, "500"),
            (mcn::ENV_RETRY_PERIOD_MS, "200"),
            (mcn::ENV_RESYNC_MS, "300"),
        ],
    )
}

/// `events.k8s.io/v1` Events this server wrote with `reason` about `name`.
fn events(api: &ApiServer, name: &str, reason: &str) -> Vec<Value> {
    api.list("events.events.k8s.io")
        .into_iter()
        .filter(|e| {
            e["reportingController"] == REPORTING_CONTROLLER
                && e["regarding"]["name"] == name
                && e["reason"] == reason
        })
        .collect()
}

/// A worker Node at `address` whose kubelet reports `boot_id` and is Ready since `ready_at`.
fn booted_node(name: &str, address: &str, boot_id: &str, ready_at: &str) -> Value {
    let mut node = worker_node(name, address);
    node["status"]["nodeInfo"] = json!({
        "bootID": boot_id, "machineID": "m", "systemUUID": "s", "kernelVersion": "6.12",
        "osImage": "RHCOS", "containerRuntimeVersion": "cri-o://1.33", "kubeletVersion": "v1.33.0",
        "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"
    });
    node["status"]["conditions"] = json!([{
        "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
        "lastHeartbeatTime": ready_at, "lastTransitionTime": ready_at
    }]);
    node
}

#[test]
fn a_report_to_any_replica_becomes_an_event_and_lands_on_the_machines_mcn_only() {
    let api = ApiServer::start(Options::default());
    eprintln!("API server: {}", api.describe());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let a = start_replica(&api, &tokens, "mcs-a");
    let b = start_replica(&api, &tokens, "mcs-b");
    let holder = poll("a lease holder", DEADLINE, || lease_holder(&api));
    let follower = if holder == format!("mcs-a_{}", a.pid()) {
        &b
    } else {
        &a
    };
    // Two machines boot from the replica that does not lead; one of them fails its first boot
    // and tells that replica.
    let boot = |source: &str| {
        poll(&format!("{source} served"), DEADLINE, || {
            let response = mcs::request_from(
                ip(source),
                follower.insecure,
                None,
                "GET",
                "/config/worker",
                &[ACCEPT, ("User-Agent", "Ignition/2.20.0")],
            )
            .ok()?;
            (response.status == 200).then_some(())
        })
    };
    boot("127.0.0.5");
    boot("127.0.0.6");
    let accepted = post(follower, true, "127.0.0.5", REPORT, &[]);
    assert_eq!(accepted.status, 202, "{}", body(&accepted));

    // Durable in the shared records, sanitized.
    let records = poll("the failure in the shared records", DEADLINE, || {
        let object = api.get(
            "ConfigMap",
            Some(MCO_NAMESPACE),
            mcn::exchange::DEFAULT_NAME,
        )?;
        let text = object.to_string();
        text.contains("failures").then_some(text)
    });
    assert!(
        !records.contains("hunter2") && !records.contains("abc.def.ghi"),
        "{records}"
    );

    // The lease holder tells the pool, as upstream words it.
    let event = poll("the FirstbootFailed Event", DEADLINE, || {
        events(&api, "worker", "FirstbootFailed").into_iter().next()
    });
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["regarding"]["kind"], "MachineConfigPool");
    assert_eq!(
        event["note"],
        format!("Node localhost failed during firstboot at stage 'firstboot-update': {SANITIZED} (image: quay.io)")
    );

    // The machines join; the failing one's kubelet reports its boot.
    api.create(&booted_node(
        "worker-failed",
        "127.0.0.5",
        "boot-1",
        "2026-11-25T10:00:00Z",
    ))
    .unwrap();
    api.create(&worker_node("worker-fine", "127.0.0.6"))
        .unwrap();
    // Its Node registered on the boot after the failed one (the kubelet runs only once the
    // first-boot update succeeded): the MCN carries the failure, already past.
    let failed = poll("worker-failed's MCN with the failure", DEADLINE, || {
        let mcn = api.get("MachineConfigNode", None, "worker-failed")?;
        mcn_annotation(&mcn, "firstboot-failure-stage")?;
        Some(mcn)
    });
    for (key, value) in [
        ("firstboot-failure-stage", "firstboot-update"),
        ("firstboot-failure-message", SANITIZED),
        ("firstboot-failure-image", "quay.io"),
        ("firstboot-failure-node-id", "localhost"),
        ("firstboot-failure-address", "127.0.0.5"),
        ("firstboot-failure-boot-id", "boot-1"),
        ("firstboot-failure-cleared-at", "2026-11-25T10:00:00Z"),
        ("bootstrap-address", "127.0.0.5"),
        ("bootstrap-ignition-client", "2.20.0"),
    ] {
        assert_eq!(
            mcn_annotation(&failed, key).as_deref(),
            Some(value),
            "{key}: {failed}"
        );
    }
    assert!(mcn_annotation(&failed, "firstboot-failure-at").is_some());
    let fine = poll("worker-fine's MCN with its record", DEADLINE, || {
        let mcn = api.get("MachineConfigNode", None, "worker-fine")?;
        mcn_annotation(&mcn, "bootstrap-served-at")?;
        Some(mcn)
    });
    let ours = |mcn: &Value| -> Vec<String> {
        mcn["metadata"]["annotations"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.contains("firstboot-failure"))
            .cloned()
            .collect()
    };
    assert!(ours(&fine).is_empty(), "{fine}");
    let cleared = failed;
    // The report stays in the shared records once its MCN carries it (the records' housekeeping
    // runs every second): a leader killed before telling its Event leaves it to the next one.
    std::thread::sleep(Duration::from_secs(3));
    let kept = api
        .get(
            "ConfigMap",
            Some(MCO_NAMESPACE),
            mcn::exchange::DEFAULT_NAME,
        )
        .map(|object| object.to_string())
        .unwrap_or_default();
    assert!(
        kept.contains("failures") && kept.contains("127.0.0.5"),
        "the report left the shared records once on its MCN: {kept}"
    );
    // Still exactly one Event for the one report, whichever replica saw it.
    assert_eq!(events(&api, "worker", "FirstbootFailed").len(), 1);
    // The MCNs pass the CRD the API server validates them against (real ones: the real CRD).
    assert_eq!(
        mcn_annotation(&cleared, "bootstrap-address").as_deref(),
        Some("127.0.0.5")
    );
}
