//! Kubernetes Events of the real binary, against the in-test API server: two replicas run, and
//! only the lease holder writes Events; storms of requests write each Event once.
//!
//! The cluster: the fixture's pools, the layered pool's MachineOSConfig and succeeded build
//! (no node runs it yet: held on the base image), and a pool whose rendered config is missing.
//! Then, with 100 requests to each replica per storm:
//! - `LayeredImageNotValidated` on the layered pool, once;
//! - `RenderFailed` on the broken pool, once for the storm; after the pool renders and breaks
//!   again, the same Event's series counts 2 (aggregated by kube's recorder, not a new Event);
//! - `FirstConfigServed` on the Node that joins from the address the storm came from, once;
//! - `LayeredImageReleased` on the layered pool once a node of it runs the build's image.

use std::time::Duration;
use support::mcs;

use machine_config_server::events::REPORTING_CONTROLLER;
use mcs::{poll, Server};
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options};
use support::cluster::{
    copy_rendered_config, lease_holder, load_realistic_cluster, pool_at, token_dir, worker_node,
    APISERVER_URL, WORKER_RENDERED,
};
use support::fixtures::LAYERED_IMAGE;

const DEADLINE: Duration = Duration::from_secs(30);
const STORM: usize = 100;
const ACCEPT_34: (&str, &str) = (
    "Accept",
    "application/vnd.coreos.ignition+json;version=3.4.0",
);
const CONTROLLER: &str = "machineconfiguration.openshift.io/machine-config-server";

fn start(api: &ApiServer, tokens: &tempfile::TempDir, pod: &str) -> Server {
    Server::start_cluster(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[
            ("POD_NAME", pod),
            // A lease that survives a busy machine: a change of holder during the test would
            // (rightly) make the new holder report the layered state again.
            ("MCS_MCN_LEASE_DURATION_MS", "20000"),
            ("MCS_MCN_RENEW_DEADLINE_MS", "15000"),
            ("MCS_MCN_RENEW_PERIOD_MS", "500"),
            ("MCS_MCN_RETRY_PERIOD_MS", "200"),
            ("MCS_MCN_RESYNC_MS", "300"),
        ],
    )
}

/// `count` requests for each path, from several threads at once.
fn storm(server: &Server, paths: &[&str], count: usize) {
    std::thread::scope(|scope| {
        for path in paths {
            for _ in 0..4 {
                scope.spawn(move || {
                    for _ in 0..count / 4 {
                        let status = server.http("GET", path, &[ACCEPT_34]).status;
                        assert!(status == 200 || status == 500, "{path}: {status}");
                    }
                });
            }
        }
    });
}

/// Every `events.k8s.io/v1` Event this server reported (named by group: a real API server also
/// serves them as core v1 Events, in another shape; and it reports Events of its own, such as
/// `KubeAPIReadyz`, which are not ours to count).
fn events(api: &ApiServer) -> Vec<Value> {
    api.list("events.events.k8s.io")
        .into_iter()
        .filter(|e| e["reportingController"] == REPORTING_CONTROLLER)
        .collect()
}

fn find<'a>(events: &'a [Value], name: &str, reason: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["regarding"]["name"] == name && e["reason"] == reason)
        .collect()
}

fn series_count(event: &Value) -> u64 {
    event["series"]["count"].as_u64().unwrap_or(1)
}

fn metric(server: &Server, series: &str) -> Option<f64> {
    let body = mcs::request(server.metrics, None, "GET", "/metrics", &[]).body;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn events_come_once_per_state_change_from_the_lease_holder_only() {
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    api.load_yaml_file(support::fixtures::layered_objects())
        .unwrap();
    pool_at(&api, "broken", "rendered-broken-missing");
    let tokens = token_dir();
    let a = start(&api, &tokens, "mcs-a");
    let b = start(&api, &tokens, "mcs-b");
    for server in [&a, &b] {
        server.wait_every_pool_ready(DEADLINE);
    }
    let holder = poll("a lease holder", DEADLINE, || lease_holder(&api));
    let (leader, follower) = if holder == format!("mcs-a_{}", a.pid()) {
        (&a, &b)
    } else {
        assert_eq!(holder, format!("mcs-b_{}", b.pid()));
        (&b, &a)
    };

    // The held layered pool is reported from the cluster state, without any request.
    poll("the held layered pool's event", DEADLINE, || {
        (find(&events(&api), "layered-worker", "LayeredImageNotValidated").len() == 1).then_some(())
    });

    // The storm, on both replicas: a failing pool, a healthy one, the held layered one.
    let paths = ["/config/broken", "/config/worker", "/config/layered-worker"];
    for server in [leader, follower] {
        storm(server, &paths, STORM);
    }
    poll("the broken pool's event", DEADLINE, || {
        (find(&events(&api), "broken", "RenderFailed").len() == 1).then_some(())
    });
    // The machine that asked last from 127.0.0.1 joins as a Node of the worker pool. (Both
    // replicas answered it last with the same config: records of different configs for one
    // address leave its source unknown.)
    for server in [leader, follower] {
        assert_eq!(
            server.http("GET", "/config/worker", &[ACCEPT_34]).status,
            200
        );
    }
    api.apply_object(&worker_node("worker-0", "127.0.0.1"))
        .unwrap();
    poll("the node's first-config event", DEADLINE, || {
        (find(&events(&api), "worker-0", "FirstConfigServed").len() == 1).then_some(())
    });

    // A node of the layered pool runs the build's image and is done: released.
    api.apply_object(&json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "layered-0",
            "labels": {"node-role.kubernetes.io/layered-worker": ""},
            "annotations": {
                "machineconfiguration.openshift.io/currentImage": LAYERED_IMAGE,
                "machineconfiguration.openshift.io/state": "Done"
            }
        },
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.9"}]}
    }))
    .unwrap();
    poll("the release event", DEADLINE, || {
        (find(&events(&api), "layered-worker", "LayeredImageReleased").len() == 1).then_some(())
    });

    // Another storm changes nothing; then the broken pool renders, and breaks again: the same
    // Event counts the second failure. Notices are published in order, so once the count is 2
    // every notice of the storms has been handled.
    for server in [leader, follower] {
        storm(server, &paths, STORM);
    }
    copy_rendered_config(&api, WORKER_RENDERED, "rendered-broken-missing");
    poll("the broken pool rendering", DEADLINE, || {
        (leader.http("GET", "/config/broken", &[ACCEPT_34]).status == 200).then_some(())
    });
    api.delete("MachineConfig", None, "rendered-broken-missing")
        .unwrap();
    poll("the broken pool failing again", DEADLINE, || {
        (leader.http("GET", "/config/broken", &[ACCEPT_34]).status == 500).then_some(())
    });
    // Machines keep retrying: a failure first met by the server's own re-render after the
    // change (not a request) is reported by the next request that renders.
    poll("the repeat counted on the same Event", DEADLINE, || {
        leader.http("GET", "/config/broken", &[ACCEPT_34]);
        let events = events(&api);
        let failed = find(&events, "broken", "RenderFailed");
        (failed.len() == 1 && series_count(failed[0]) == 2).then_some(())
    });

    let all = events(&api);
    let summary: Vec<String> = all
        .iter()
        .map(|e| {
            format!(
                "{} {} x{}",
                e["regarding"]["name"],
                e["reason"],
                series_count(e)
            )
        })
        .collect();
    assert_eq!(all.len(), 4, "one Event per state change: {summary:?}");
    for (name, reason, kind, type_) in [
        (
            "layered-worker",
            "LayeredImageNotValidated",
            "MachineConfigPool",
            "Warning",
        ),
        (
            "layered-worker",
            "LayeredImageReleased",
            "MachineConfigPool",
            "Normal",
        ),
        ("broken", "RenderFailed", "MachineConfigPool", "Warning"),
        ("worker-0", "FirstConfigServed", "Node", "Normal"),
    ] {
        let found = find(&all, name, reason);
        assert_eq!(found.len(), 1, "{name} {reason}: {summary:?}");
        let event = found[0];
        assert_eq!(event["regarding"]["kind"], kind);
        assert!(event["regarding"]["uid"].is_string(), "{event}");
        assert_eq!(event["type"], type_);
        assert_eq!(event["metadata"]["namespace"], "default");
        assert_eq!(event["reportingController"], CONTROLLER);
        assert_eq!(
            event["reportingInstance"], holder,
            "only the lease holder reports: {event}"
        );
        let expected_count = if reason == "RenderFailed" { 2 } else { 1 };
        assert_eq!(series_count(event), expected_count, "{event}");
    }
    let note = |name, reason| {
        find(&all, name, reason)[0]["note"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let held = note("layered-worker", "LayeredImageNotValidated");
    assert!(
        held.contains("not_validated") && held.contains(LAYERED_IMAGE),
        "{held}"
    );
    let failed = note("broken", "RenderFailed");
    assert!(
        failed.contains("rendered-broken-missing")
            && failed.contains("3.4.0")
            && failed.contains("missing_machine_config"),
        "{failed}"
    );
    let served = note("worker-0", "FirstConfigServed");
    assert!(
        served.contains(WORKER_RENDERED) && served.contains("3.4.0"),
        "{served}"
    );
    let released = note("layered-worker", "LayeredImageReleased");
    assert!(released.contains(LAYERED_IMAGE), "{released}");

    // Writes: one create per Event and one patch for the repeat, all by the leader.
    // (Counted once the API server has answered, just after the Event is stored.)
    let published = poll("the leader's writes counted", DEADLINE, || {
        metric(leader, r#"mcs_events_total{result="published"}"#).filter(|n| *n >= 5.0)
    });
    assert_eq!(published, 5.0);
    assert_eq!(
        metric(follower, r#"mcs_events_total{result="published"}"#),
        None
    );
    let writes: Vec<String> = api
        .requests()
        .iter()
        .filter(|r| r.resource == "events")
        .map(|r| r.verb.clone())
        .collect();
    assert_eq!(
        writes.iter().filter(|v| *v == "create").count(),
        4,
        "{writes:?}"
    );
    assert_eq!(
        writes.iter().filter(|v| *v == "patch").count(),
        1,
        "{writes:?}"
    );
}
