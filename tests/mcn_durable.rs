//! A served record is durable before its config is sent: three real `machine-config-server
//! start` replicas behind a round-robin balancer that keeps the client's address
//! (`cluster_support/balancer.rs`); a machine fetches `/config/worker` and the replica that
//! answered is SIGKILLed (an OOM kill, a kernel panic, a power loss) at several moments right
//! after the response completed, then comes back as the DaemonSet restarts it. Every machine's
//! Node then joins, and every MachineConfigNode must carry the bootstrap record of the replica
//! that served its machine: nothing a dead replica answered is lost.

#[path = "cluster_support/balancer.rs"]
mod balancer;
#[path = "cluster_support/mod.rs"]
mod cluster_support;
#[path = "support/mcs.rs"]
mod mcs;
mod support;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use balancer::{fetch_like_ignition, served_rendered_config, Balancer};
use cluster_support::{
    load_realistic_cluster, mcn_annotation, token_dir, worker_node, APISERVER_URL,
};
use machine_config_server::mcn;
use mcs::{poll, Server};
use support::api_server::{ApiServer, Options};

const DEADLINE: Duration = Duration::from_secs(30);
const REPLICAS: usize = 3;

/// Replica `slot`'s node name (its records' key; stable across restarts).
fn node_name(slot: usize) -> String {
    format!("master-{slot}")
}

/// Replica `slot`, its `generation`-th pod (a restart is a new pod on the same node).
fn start_replica(
    api: &ApiServer,
    tokens: &tempfile::TempDir,
    slot: usize,
    generation: usize,
) -> Server {
    let pod = format!("mcs-pod-{slot}-{generation}");
    let node = node_name(slot);
    let server = Server::start_cluster(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[
            ("POD_NAME", pod.as_str()),
            (mcn::ENV_NODE_NAME, node.as_str()),
            (mcn::ENV_LEASE_DURATION_MS, "3000"),
            (mcn::ENV_RENEW_PERIOD_MS, "500"),
            (mcn::ENV_RENEW_DEADLINE_MS, "2000"),
            (mcn::ENV_RETRY_PERIOD_MS, "300"),
            (mcn::ENV_RESYNC_MS, "500"),
        ],
    );
    poll("replica ready", DEADLINE, || {
        (mcs::request(server.metrics, None, "GET", "/readyz", &[]).status == 200).then_some(())
    });
    server
}

fn machine(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 10, 4, u8::try_from(i + 1).unwrap()))
}

/// What one machine was served, by whom, and when its replica was killed.
struct Served {
    replica: String,
    rendered_config: String,
    kill: String,
}

/// Creates the Nodes of `served` and waits until every MCN names the replica that served its
/// machine and the config it got; the machines whose record is missing or wrong fail the test.
fn every_node_gets_its_record(api: &ApiServer, served: &BTreeMap<usize, Served>) {
    for i in served.keys() {
        api.create(&worker_node(&format!("worker-durable-{i}"), machine(*i)))
            .unwrap();
    }
    let deadline = Instant::now() + DEADLINE;
    loop {
        let wrong: Vec<String> = served
            .iter()
            .filter_map(|(i, expected)| {
                let name = format!("worker-durable-{i}");
                let mcn = api.get("MachineConfigNode", None, &name);
                let by = mcn
                    .as_ref()
                    .and_then(|m| mcn_annotation(m, "bootstrap-served-by"));
                let config = mcn
                    .as_ref()
                    .and_then(|m| mcn_annotation(m, "bootstrap-rendered-config"));
                (by.as_deref() != Some(expected.replica.as_str())
                    || config.as_deref() != Some(expected.rendered_config.as_str()))
                .then(|| {
                    format!(
                        "{name} (served by {}, killed {}): served-by {by:?}, config {config:?}",
                        expected.replica, expected.kill
                    )
                })
            })
            .collect();
        if wrong.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} machines lost their bootstrap record when their replica was killed:\n{}",
            wrong.len(),
            served.len(),
            wrong.join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_replica_killed_right_after_answering_loses_no_record() {
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let mut generation = 0;
    let mut replicas: Vec<Server> = (0..REPLICAS)
        .map(|slot| start_replica(&api, &tokens, slot, generation))
        .collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let balancer = runtime.block_on(Balancer::start(
        replicas.iter().map(|s| s.insecure).collect(),
    ));

    // The replica that answered dies this long after the machine read the whole response.
    let kill_after_ms = [0u64, 0, 0, 1, 5, 20, 50, 100, 250];
    let mut served = BTreeMap::new();
    for (i, after) in kill_after_ms.into_iter().enumerate() {
        let (response, _) =
            runtime.block_on(fetch_like_ignition(balancer.address, machine(i), DEADLINE));
        let slot = balancer.last_choice(machine(i)).unwrap();
        std::thread::sleep(Duration::from_millis(after));
        replicas[slot].kill();
        served.insert(
            i,
            Served {
                replica: node_name(slot),
                rendered_config: served_rendered_config(&response.json()),
                kill: format!("{after} ms after the response"),
            },
        );
        generation += 1;
        replicas[slot] = start_replica(&api, &tokens, slot, generation);
        balancer.set_upstream(slot, replicas[slot].insecure);
    }
    every_node_gets_its_record(&api, &served);
}
