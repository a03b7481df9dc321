//! The MachineConfigNode publisher against a backlog (issue 15), with the real
//! `machine-config-server start` binary and the in-test Kubernetes API server: a replica that
//! starts on a cluster where hundreds of Nodes have no MCN writes them at the pace
//! `--mcn-max-writes-per-second` allows, finishes the backlog, and a Node that joins while the
//! backlog drains gets its MCN ahead of the older ones, whether the write budget or the API
//! server's own speed is what limits the pace.
//!
//! What is checked is what the API server saw: the MCN objects it stores, and the times of the
//! write requests as a proxy in front of it logged them on arrival (the same proxy makes every
//! API call slow in the second test). The 5000-Node figures are in benches/README.md
//! (`benches/scale.sh`); this test keeps to a few hundred Nodes and a high rate so that it takes
//! seconds.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use machine_config_server::mcn;
use serde_json::{json, Value};
use support::cluster::{load_realistic_cluster, token_dir, APISERVER_URL};
use support::fake_apiserver::{FakeApiServer, Options};
use support::fault_proxy::{Fault, FaultProxy, Logged};
use support::mcs::{poll, Server};

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

/// A write of an MCN (the object or its status), as the proxy logged it.
fn is_mcn_write(entry: &Logged) -> bool {
    let path = entry.uri.split('?').next().unwrap_or_default();
    path.contains("/machineconfignodes")
        && matches!(entry.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
}

/// A cluster with `BACKLOG` worker Nodes and no MCN, a replica of the server behind a proxy
/// adding `latency` to every API call, and a Node that joins once `joins_after` MCNs exist.
struct Backlog {
    api: FakeApiServer,
    proxy: FaultProxy,
    /// Killed on drop.
    _server: Server,
    _tokens: tempfile::TempDir,
}

impl Backlog {
    fn start(latency: Duration) -> Backlog {
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
        let proxy = FaultProxy::start(api.kubeconfig_file());
        if !latency.is_zero() {
            proxy.set(Fault::Latency(latency));
        }
        let tokens = token_dir();
        let server = Server::start_with_env(
            &[
                "start",
                "--kubeconfig",
                proxy.kubeconfig_file().to_str().unwrap(),
                "--apiserver-url",
                APISERVER_URL,
                "--bootstrap-token-dir",
                tokens.path().to_str().unwrap(),
                "--mcn-max-writes-per-second",
                &RATE.to_string(),
            ],
            &[
                (mcn::ENV_LEASE_DURATION_MS, "3000"),
                (mcn::ENV_RENEW_PERIOD_MS, "1000"),
                (mcn::ENV_RENEW_DEADLINE_MS, "2000"),
                (mcn::ENV_RETRY_PERIOD_MS, "500"),
            ],
        );
        Backlog {
            api,
            proxy,
            _server: server,
            _tokens: tokens,
        }
    }

    fn mcns(&self) -> usize {
        self.api.list(MCN).len()
    }

    /// Waits for `first` MCNs of the backlog, lets a Node join, and returns how many backlog
    /// Nodes were still without an MCN when the joining one got its own.
    fn join_during_backlog(&self, first: usize, wait: Duration) -> usize {
        poll(
            "the first MCNs of the backlog",
            Duration::from_secs(30),
            || (self.mcns() >= first).then_some(()),
        );
        // The joining Node must be younger than the backlog (timestamps have 1 s resolution).
        let newest_backlog = creation(&self.api, &format!("backlog-{:03}", BACKLOG - 1));
        poll("a new second on the clock", Duration::from_secs(5), || {
            (Timestamp::now().as_second() > newest_backlog.as_second()).then_some(())
        });
        self.api
            .apply_object(&worker_node("joined", "10.2.0.1"))
            .unwrap();
        poll("the joining Node's MCN", wait, || {
            self.api
                .get(MCN, None, "joined")
                .map(|_| BACKLOG + 1 - self.mcns())
        })
    }

    /// Arrival times at the API of every MCN write so far.
    fn writes(&self) -> Vec<Instant> {
        self.proxy
            .log()
            .iter()
            .filter(|entry| is_mcn_write(entry))
            .map(|entry| entry.at)
            .collect()
    }
}

/// The most writes within any one second.
fn peak_per_second(writes: &[Instant]) -> usize {
    (0..writes.len())
        .map(|i| {
            writes[i..]
                .iter()
                .take_while(|t| t.duration_since(writes[i]) < Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn a_backlog_is_written_at_the_configured_rate_and_a_joining_node_goes_first() {
    let backlog = Backlog::start(Duration::ZERO);
    let backlog_left = backlog.join_during_backlog(20, Duration::from_secs(30));
    assert!(
        backlog_left >= BACKLOG / 3,
        "the joining Node got its MCN only when {backlog_left} of {BACKLOG} backlog Nodes were left: it did not go first"
    );

    // The least the drain takes is 2 * 301 writes at RATE a second (6 s); the deadline is
    // generous because a loaded CI machine makes each write slower, which is not what this
    // test is about (speed lives in benches/scale.sh).
    let drain = Duration::from_secs(120);
    poll("every Node's MCN with its status", drain, || {
        let mcns = backlog.api.list(MCN);
        let with_status = mcns.iter().filter(|m| !m["status"].is_null()).count();
        (with_status == BACKLOG + 1).then_some(())
    });

    // Each MCN is two writes (the object, then its initial status).
    let writes = backlog.writes();
    assert!(
        writes.len() >= 2 * (BACKLOG + 1),
        "{} MCN writes for {} Nodes",
        writes.len(),
        BACKLOG + 1
    );
    // The bound: n writes at most RATE per second take at least (n - 1) / RATE.
    let span = *writes.last().unwrap() - writes[0];
    let least = Duration::from_secs_f64((writes.len() - 1) as f64 / f64::from(RATE))
        .saturating_sub(Duration::from_millis(20));
    assert!(
        span >= least,
        "{} writes in {span:?}: faster than {RATE} per second",
        writes.len()
    );
    // And no second holds more than RATE (+1 for a closed window).
    let peak = peak_per_second(&writes);
    assert!(peak <= RATE as usize + 1, "{peak} writes within one second");
}

/// Each API call takes 40 ms, so an MCN (at least two calls) takes longer than a token of the
/// budget (10 ms): the budget never makes the publisher wait, and only the length of a pass
/// lets the joining Node be planned before the rest of the backlog.
#[test]
fn a_joining_node_goes_first_when_the_api_is_slower_than_the_write_budget() {
    let backlog = Backlog::start(Duration::from_millis(40));
    let backlog_left = backlog.join_during_backlog(10, Duration::from_secs(20));
    assert!(
        backlog_left >= BACKLOG * 3 / 4,
        "the joining Node got its MCN only when {backlog_left} of {BACKLOG} backlog Nodes were left: it did not go first"
    );
    // The budget never ran out: the API's speed held the pace well below it.
    let peak = peak_per_second(&backlog.writes());
    assert!(
        peak <= RATE as usize / 2,
        "{peak} MCN writes within one second: the write budget, not the API's speed, set the pace"
    );
}
