//! The MachineConfigNode publisher against a backlog (issue 15), with the real
//! `machine-config-server start` binary and the in-test Kubernetes API server: a replica that
//! starts on a cluster where hundreds of Nodes have no MCN writes them at the pace
//! `--mcn-max-writes-per-second` allows, finishes the backlog, and a Node that joins while the
//! backlog drains gets its MCN ahead of the older ones.
//!
//! What is checked is what the API server saw: the MCN objects it stores and the times of the
//! write requests in its request log (stamped by a 10 ms poller). The 5000-Node figures are in
//! benches/README.md (`benches/scale.sh`); this test keeps to a few hundred Nodes and a high
//! rate so that it takes seconds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::mcs;

use k8s_openapi::jiff::Timestamp;
use machine_config_server::mcn;
use mcs::{poll, Server};
use serde_json::{json, Value};
use support::cluster::{load_realistic_cluster, token_dir, APISERVER_URL};
use support::fake_apiserver::{FakeApiServer, Options};

const BACKLOG: usize = 300;
const RATE: u32 = 100;
const MCN: &str = "MachineConfigNode";

fn worker_node(name: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "node-role.kubernetes.io/worker": ""
        }},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
    })
}

fn creation(api: &FakeApiServer, name: &str) -> Timestamp {
    api.get("Node", None, name)
        .and_then(|n| n["metadata"]["creationTimestamp"].as_str()?.parse().ok())
        .expect("stored Node has a creationTimestamp")
}

#[test]
fn a_backlog_is_written_at_the_configured_rate_and_a_joining_node_goes_first() {
    let api = FakeApiServer::start(Options::default());
    load_realistic_cluster(&api);
    for i in 0..BACKLOG {
        let name = format!("backlog-{i:03}");
        api.apply_object(&worker_node(
            &name,
            &format!("10.1.{}.{}", i / 250, i % 250 + 1),
        ))
        .unwrap();
    }
    let newest_backlog = creation(&api, &format!("backlog-{:03}", BACKLOG - 1));

    // Stamp every MCN write the API server answers.
    let stop = Arc::new(AtomicBool::new(false));
    let writes: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let tokens = token_dir();
    let kubeconfig = api.kubeconfig_file().to_str().unwrap().to_string();
    let token_path = tokens.path().to_str().unwrap().to_string();
    let rate = RATE.to_string();
    std::thread::scope(|scope| {
        let (stop2, writes2, api2) = (stop.clone(), writes.clone(), &api);
        scope.spawn(move || {
            let mut known = 0;
            while !stop2.load(Ordering::Relaxed) {
                let log = api2.requests();
                let now = Instant::now();
                let new = log[known..].iter().filter(|r| {
                    r.resource == "machineconfignodes"
                        && matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete")
                });
                writes2.lock().unwrap().extend(new.map(|_| now));
                known = log.len();
                std::thread::sleep(Duration::from_millis(10));
            }
        });

        let _server = Server::start_with_env(
            &[
                "start",
                "--kubeconfig",
                &kubeconfig,
                "--apiserver-url",
                APISERVER_URL,
                "--bootstrap-token-dir",
                &token_path,
                "--mcn-max-writes-per-second",
                &rate,
            ],
            &[
                (mcn::ENV_LEASE_DURATION_MS, "3000"),
                (mcn::ENV_RENEW_PERIOD_MS, "1000"),
                (mcn::ENV_RENEW_DEADLINE_MS, "2000"),
                (mcn::ENV_RETRY_PERIOD_MS, "500"),
            ],
        );
        let count = || api.list(MCN).len();
        poll(
            "the first MCNs of the backlog",
            Duration::from_secs(30),
            || (count() >= 20).then_some(()),
        );
        // The joining Node must be younger than the backlog (timestamps have 1 s resolution).
        poll("a new second on the clock", Duration::from_secs(5), || {
            (Timestamp::now().as_second() > newest_backlog.as_second()).then_some(())
        });
        api.apply_object(&worker_node("joined", "10.2.0.1"))
            .unwrap();
        let backlog_left = poll("the joining Node's MCN", Duration::from_secs(30), || {
            api.get(MCN, None, "joined").map(|_| BACKLOG + 1 - count())
        });
        assert!(
            backlog_left >= BACKLOG / 3,
            "the joining Node got its MCN only when {backlog_left} of {BACKLOG} backlog Nodes were left: it did not go first"
        );

        let drain = Duration::from_secs(30 + 3 * BACKLOG as u64 * 2 / u64::from(RATE));
        poll("every Node's MCN with its status", drain, || {
            let mcns = api.list(MCN);
            let with_status = mcns.iter().filter(|m| !m["status"].is_null()).count();
            (with_status == BACKLOG + 1).then_some(())
        });
        stop.store(true, Ordering::Relaxed);
    });

    // Each MCN is two writes (the object, then its initial status).
    let writes = writes.lock().unwrap().clone();
    assert!(
        writes.len() >= 2 * (BACKLOG + 1),
        "{} MCN writes for {} Nodes",
        writes.len(),
        BACKLOG + 1
    );
    // The bound: n writes at most RATE per second take at least (n - 1) / RATE (less the
    // poller's 10 ms stamping granularity at each end).
    let span = *writes.last().unwrap() - writes[0];
    let least = Duration::from_secs_f64((writes.len() - 1) as f64 / f64::from(RATE))
        .saturating_sub(Duration::from_millis(20));
    assert!(
        span >= least,
        "{} writes in {span:?}: faster than {RATE} per second",
        writes.len()
    );
    // And no second holds more than RATE (+1 for a closed window, +2 for stamping jitter).
    for (i, start) in writes.iter().enumerate() {
        let in_window = writes[i..]
            .iter()
            .take_while(|t| t.duration_since(*start) < Duration::from_secs(1))
            .count();
        assert!(
            in_window <= RATE as usize + 3,
            "{in_window} writes within one second"
        );
    }
}
