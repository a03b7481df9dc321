//! Three real `machine-config-server start` processes behind one address, as the DaemonSet runs
//! them behind `api-int:22623`: every joining node's MachineConfigNode carries the bootstrap
//! record of the replica that actually served it, whichever replica leads, also after the
//! leader is killed (SIGKILL) and after the next leader is stopped (SIGTERM).
//!
//! A round-robin TCP proxy (`support::balancer`) keeps the client's address as a cloud network load
//! balancer does: each machine connects from its own loopback address (127.10.0.x), and the
//! proxy binds its upstream socket to that same address before connecting to the replica it
//! chose, so the replica sees the machine's address. The test knows from the proxy which
//! replica served which machine, and from the served bytes which rendered config it got. One
//! more machine asks twice (the balancer sends the retry to another replica): its MCN has the
//! newest answer and names the replica that answered first. A second test restarts a replica on
//! the same node and cuts the API server off while a machine boots: nothing is lost.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use support::mcs;

use machine_config_server::mcn;
use mcs::{poll, Server};
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options, RequestRecord};
use support::balancer::{served_rendered_config, Balancer};
use support::cluster::{
    lease_holder, load_realistic_cluster, mcn_annotation as annotation, node_with_roles, token_dir,
    worker_node, APISERVER_URL, MCO_NAMESPACE,
};

const DEADLINE: Duration = Duration::from_secs(30);
const MACHINES: usize = 30;
const REPLICAS: usize = 3;
const RECORDS: &str = mcn::exchange::DEFAULT_NAME;

/// Replica `i`: its pod name (lease identity) and node name (its records' name).
fn names(i: usize) -> (String, String) {
    (format!("mcs-pod-{i}"), format!("master-{i}"))
}

fn start_replica(api: &ApiServer, tokens: &tempfile::TempDir, i: usize) -> Server {
    let (pod, node) = names(i);
    start_named(api, tokens, &pod, &node)
}

fn start_named(api: &ApiServer, tokens: &tempfile::TempDir, pod: &str, node: &str) -> Server {
    Server::start_cluster(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[
            ("POD_NAME", pod),
            (mcn::ENV_NODE_NAME, node),
            (mcn::ENV_LEASE_DURATION_MS, "3000"),
            (mcn::ENV_RENEW_PERIOD_MS, "500"),
            (mcn::ENV_RENEW_DEADLINE_MS, "2000"),
            (mcn::ENV_RETRY_PERIOD_MS, "300"),
            (mcn::ENV_RESYNC_MS, "500"),
            (mcn::ENV_RECORDS_FLUSH_MS, "200"),
        ],
    )
}

/// Machine `i`'s own address.
fn machine_address(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 10, 0, u8::try_from(i + 1).unwrap()))
}

fn machine_name(i: usize) -> String {
    format!("worker-ha-{i}")
}

/// `GET /config/worker` on `to` (the balancer or a replica), connecting from `from`.
async fn fetch_config(to: SocketAddr, from: IpAddr) -> mcs::Response {
    support::balancer::fetch_config(to, from).await.unwrap()
}

/// Records in the shared ConfigMap, per replica key.
fn published_records(api: &ApiServer) -> BTreeMap<String, usize> {
    let Some(object) = api.get("ConfigMap", Some(MCO_NAMESPACE), RECORDS) else {
        return BTreeMap::new();
    };
    object["data"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(replica, text)| {
            let value: Value = serde_json::from_str(text.as_str().unwrap()).unwrap();
            (replica.clone(), value["served"].as_array().unwrap().len())
        })
        .collect()
}

/// A metric's value on one replica (0 when absent).
fn metric(server: &Server, line_prefix: &str) -> f64 {
    let body = mcs::request(server.metrics, None, "GET", "/metrics", &[]).body;
    String::from_utf8_lossy(&body)
        .lines()
        .filter(|line| line.starts_with(line_prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn is_write(r: &RequestRecord) -> bool {
    matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete") && r.status < 300
}

/// Creates the Nodes of `machines` at once and waits until each MCN carries a bootstrap record;
/// returns the time from each Node's creation to its MCN showing the record.
fn join_and_wait(api: &ApiServer, machines: impl IntoIterator<Item = usize>) -> Vec<Duration> {
    let mut created: HashMap<String, Instant> = HashMap::new();
    for i in machines {
        let name = machine_name(i);
        api.create(&worker_node(&name, machine_address(i))).unwrap();
        created.insert(name, Instant::now());
    }
    let mut latencies = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while !created.is_empty() {
        created.retain(|name, at| {
            let done = api
                .get("MachineConfigNode", None, name)
                .is_some_and(|mcn| annotation(&mcn, "bootstrap-served-at").is_some());
            if done {
                latencies.push(at.elapsed());
            }
            !done
        });
        assert!(
            Instant::now() < deadline,
            "MCNs without a bootstrap record after {DEADLINE:?}: {:?}; one of them: {:#}",
            created.keys().collect::<Vec<_>>(),
            created
                .keys()
                .next()
                .and_then(|name| api.get("MachineConfigNode", None, name))
                .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    latencies
}

fn summary(latencies: &[Duration]) -> String {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    format!(
        "median {:?}, max {:?}",
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1]
    )
}

#[test]
fn every_joining_node_gets_the_record_of_the_replica_that_served_it() {
    let started = Instant::now();
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let mut replicas: Vec<Option<Server>> = (0..REPLICAS)
        .map(|i| Some(start_replica(&api, &tokens, i)))
        .collect();
    for server in replicas.iter().flatten() {
        poll("replica ready", DEADLINE, || {
            (mcs::request(server.metrics, None, "GET", "/readyz", &[]).status == 200).then_some(())
        });
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstreams = replicas
        .iter()
        .flatten()
        .map(|server| server.insecure)
        .collect();
    let balancer = runtime.block_on(Balancer::start(upstreams));
    let proxy = balancer.address;

    // 30 machines boot through the load balancer.
    let mut served_config: HashMap<usize, String> = HashMap::new();
    for i in 0..MACHINES {
        let response = runtime.block_on(fetch_config(proxy, machine_address(i)));
        assert_eq!(
            response.status,
            200,
            "{}",
            String::from_utf8_lossy(&response.body)
        );
        served_config.insert(i, served_rendered_config(&response.json()));
    }
    // One more machine retries its request, which the load balancer sends to the next replica:
    // its record is the newest answer, and the MCN names the replica that answered earlier.
    let retried = MACHINES;
    for _ in 0..2 {
        let response = runtime.block_on(fetch_config(proxy, machine_address(retried)));
        assert_eq!(response.status, 200);
        served_config.insert(retried, served_rendered_config(&response.json()));
    }
    // The last choice per address: who served each machine last.
    let served_by: HashMap<IpAddr, usize> = balancer.choices().into_iter().collect();
    assert_eq!(served_by.len(), MACHINES + 1);
    let retried_by: Vec<usize> = balancer
        .choices()
        .iter()
        .filter(|(ip, _)| *ip == machine_address(retried))
        .map(|(_, replica)| *replica)
        .collect();
    assert_eq!(retried_by.len(), 2);
    assert_ne!(retried_by[0], retried_by[1]);
    for replica in 0..REPLICAS {
        assert_eq!(
            (0..MACHINES)
                .filter(|i| served_by[&machine_address(*i)] == replica)
                .count(),
            MACHINES / REPLICAS,
            "round robin spreads the machines"
        );
    }

    // Every replica publishes what it served (batched), and the leader merges all of it.
    poll("all records published", DEADLINE, || {
        let published = published_records(&api);
        (published.values().sum::<usize>() == MACHINES + 2 && published.len() == REPLICAS)
            .then_some(())
    });
    poll("the leader merging every record", DEADLINE, || {
        replicas
            .iter()
            .flatten()
            .any(|s| metric(s, "mcs_mcn_bootstrap_records_merged ") == (MACHINES + 2) as f64)
            .then_some(())
    });
    eprintln!(
        "published records per replica: {:?}",
        published_records(&api)
    );
    let writes_before_nodes = api.requests().iter().filter(|r| is_write(r)).count();

    let leader_index = |api: &ApiServer, replicas: &[Option<Server>]| {
        let holder = poll("a lease holder", DEADLINE, || lease_holder(api));
        replicas
            .iter()
            .enumerate()
            .find_map(|(i, s)| {
                let s = s.as_ref()?;
                (holder == format!("{}_{}", names(i).0, s.pid())).then_some(i)
            })
            .unwrap_or_else(|| panic!("lease holder {holder} is no running replica"))
    };

    // Half the nodes join with three replicas running.
    let first_leader = leader_index(&api, &replicas);
    let with_three = join_and_wait(&api, (0..MACHINES / 2).chain([retried]));

    // The leader is killed outright (no final write, no lease release); the next nodes must get
    // their records from the survivors, including those the dead leader served.
    let killed = replicas[first_leader].take().unwrap();
    let status = std::process::Command::new("kill")
        .arg("-KILL")
        .arg(killed.pid().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let after_kill_at = Instant::now();
    let after_kill = join_and_wait(&api, MACHINES / 2..MACHINES * 4 / 5);
    let failover = after_kill_at.elapsed();

    // The next leader is stopped (SIGTERM: final write, lease released); the last replica
    // alone publishes the rest, with the records of two replicas that are gone.
    let second_leader = leader_index(&api, &replicas);
    assert_ne!(second_leader, first_leader);
    let mut stopped = replicas[second_leader].take().unwrap();
    stopped.terminate();
    assert!(
        stopped.wait_exit(DEADLINE).success(),
        "{}",
        stopped.output()
    );
    let after_stop = join_and_wait(&api, MACHINES * 4 / 5..MACHINES);
    let last = replicas.iter().flatten().next().unwrap();

    // Every MCN carries the record of the replica that served its machine, and nothing else.
    let mut correct = 0;
    for i in 0..=MACHINES {
        let name = machine_name(i);
        let mcn = api.get("MachineConfigNode", None, &name).unwrap();
        let expected_replica = names(served_by[&machine_address(i)]).1;
        assert_eq!(
            annotation(&mcn, "bootstrap-served-by").as_deref(),
            Some(expected_replica.as_str()),
            "{name}: {mcn:#}"
        );
        assert_eq!(
            annotation(&mcn, "bootstrap-address"),
            Some(machine_address(i).to_string())
        );
        assert_eq!(
            annotation(&mcn, "bootstrap-rendered-config").as_deref(),
            Some(served_config[&i].as_str())
        );
        assert_eq!(
            annotation(&mcn, "bootstrap-pool").as_deref(),
            Some("worker")
        );
        let also = (i == retried).then(|| names(retried_by[0]).1);
        assert_eq!(annotation(&mcn, "bootstrap-also-served-by"), also, "{name}");
        assert_eq!(annotation(&mcn, "bootstrap-source-unknown"), None);
        correct += 1;
    }

    // Each MCN was written once (its create, record included) plus its initial status: never
    // twice, so never with conflicting data, across both leader changes. The status write
    // follows the create within the publisher's write budget (--mcn-max-writes-per-second).
    // Wait on the request log, not the objects: a request is logged when its response is
    // complete, after the object changed (as the audit log's ResponseComplete stage).
    let deadline = Instant::now() + DEADLINE;
    let requests = loop {
        let requests = api.requests();
        let all_have_status = (0..=MACHINES).all(|i| {
            let name = machine_name(i);
            requests.iter().any(|r| {
                r.resource == "machineconfignodes"
                    && r.subresource.as_deref() == Some("status")
                    && r.name.as_deref() == Some(name.as_str())
                    && is_write(r)
            })
        });
        if all_have_status {
            break requests;
        }
        assert!(
            Instant::now() < deadline,
            "MCNs without a status write after {DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    for i in 0..=MACHINES {
        let name = machine_name(i);
        let writes: Vec<&RequestRecord> = requests
            .iter()
            .filter(|r| {
                r.resource == "machineconfignodes"
                    && r.name.as_deref() == Some(name.as_str())
                    && is_write(r)
            })
            .collect();
        let main = writes.iter().filter(|r| r.subresource.is_none()).count();
        let status = writes
            .iter()
            .filter(|r| r.subresource.as_deref() == Some("status"))
            .count();
        assert_eq!((main, status), (1, 1), "{name}: {writes:#?}");
        let mcn = api.get("MachineConfigNode", None, &name).unwrap();
        let appliers: Vec<&Value> = mcn["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["subresource"].as_str().unwrap_or_default().is_empty())
            .collect();
        assert_eq!(
            appliers.len(),
            1,
            "{name}: one writer of the MCN: {appliers:#?}"
        );
        assert_eq!(appliers[0]["manager"], mcn::FIELD_MANAGER);
    }

    // Bounded writes: per node, its two MCN writes; the replicas' record writes are batched.
    let node_phase: Vec<&RequestRecord> = requests
        .iter()
        .filter(|r| is_write(r))
        .skip(writes_before_nodes)
        .collect();
    let count = |resource: &str| node_phase.iter().filter(|r| r.resource == resource).count();
    let (mcn_writes, record_writes, lease_writes) = (
        count("machineconfignodes"),
        count("configmaps"),
        count("leases"),
    );
    let record_writes_total = requests
        .iter()
        .filter(|r| is_write(r) && r.resource == "configmaps")
        .count();
    assert_eq!(mcn_writes, 2 * (MACHINES + 1));
    assert!(
        record_writes <= MACHINES,
        "{record_writes} record writes for {MACHINES} nodes"
    );
    // The records of joined nodes are settled: the survivor keeps none of its own.
    let (_, last_name) = names(
        replicas
            .iter()
            .position(|s| s.is_some())
            .expect("one replica left"),
    );
    poll("the survivor's settled records gone", DEADLINE, || {
        (published_records(&api).get(&last_name) == Some(&0)).then_some(())
    });
    // A replica that is gone for good (its node replaced) left records that all expired: the
    // lease holder removes its key, so dead replicas cannot fill the object.
    let expired_ms = (std::time::SystemTime::now() - Duration::from_secs(7200))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let stale = json!({"v": 1, "configs": [["worker", "rendered-worker-x", "3.5.0", ""]],
                       "served": [["127.10.9.9", 0, expired_ms]]});
    api.merge_patch(
        "ConfigMap",
        Some(MCO_NAMESPACE),
        RECORDS,
        &json!({"data": {"master-replaced": stale.to_string()}}),
    )
    .unwrap();
    poll("the gone replica's expired key removed", DEADLINE, || {
        (!published_records(&api).contains_key("master-replaced")).then_some(())
    });
    assert!(metric(last, "mcs_mcn_bootstrap_records_total{event=\"matched\"") >= 1.0);
    assert!(metric(last, "mcs_mcn_bootstrap_records_total{event=\"published\"") >= 1.0);

    let mut by_resource: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &node_phase {
        *by_resource.entry(r.resource.as_str()).or_default() += 1;
    }
    eprintln!("API writes while nodes joined, by resource: {by_resource:?}");
    let all: Vec<Duration> = [&with_three[..], &after_kill[..], &after_stop[..]].concat();
    let joined = MACHINES + 1;
    eprintln!(
        "machines joined: {} (one of them asked twice); MCNs with the correct record: {correct}/{}\n\
         API writes while nodes joined: {} ({:.2} per node: MCN {:.2}, served records {:.2}, lease {:.2}); served-record writes over the whole run: {record_writes_total}\n\
         Node -> MCN with record: three replicas {}; after SIGKILL of the leader {} (first after kill {:?} incl. failover {:?}); after SIGTERM of the next {}; all {}\n\
         test took {:?}",
        joined,
        joined,
        node_phase.len(),
        node_phase.len() as f64 / joined as f64,
        mcn_writes as f64 / joined as f64,
        record_writes as f64 / joined as f64,
        lease_writes as f64 / joined as f64,
        summary(&with_three),
        summary(&after_kill),
        after_kill.iter().min().unwrap(),
        failover,
        summary(&after_stop),
        summary(&all),
        started.elapsed()
    );
}

fn wait_ready(server: &Server) {
    poll("replica ready", DEADLINE, || {
        (mcs::request(server.metrics, None, "GET", "/readyz", &[]).status == 200).then_some(())
    });
}

/// Machine `i` of the restart test (its own address range).
fn restart_machine(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 10, 1, u8::try_from(i + 1).unwrap()))
}

#[test]
fn a_restarted_replica_keeps_what_it_published_and_an_api_outage_loses_nothing() {
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let node = "master-0";
    let first = start_named(&api, &tokens, "mcs-first", node);
    wait_ready(&first);
    for i in 0..3 {
        let response = runtime.block_on(fetch_config(first.insecure, restart_machine(i)));
        assert_eq!(response.status, 200);
    }
    poll("three records published", DEADLINE, || {
        (published_records(&api).get(node) == Some(&3)).then_some(())
    });

    // The replica crashes and its pod comes back on the same node: it takes back its records
    // before it writes, so a new answer adds to them instead of replacing them.
    let status = std::process::Command::new("kill")
        .arg("-KILL")
        .arg(first.pid().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    drop(first);
    let second = start_named(&api, &tokens, "mcs-second", node);
    wait_ready(&second);
    poll("the records taken back", DEADLINE, || {
        second
            .output()
            .contains("took back the served records this replica published")
            .then_some(())
    });
    let response = runtime.block_on(fetch_config(second.insecure, restart_machine(3)));
    assert_eq!(response.status, 200);
    poll("four records published", DEADLINE, || {
        (published_records(&api).get(node) == Some(&4)).then_some(())
    });

    // The API server is unreachable while a machine boots: it is served from the caches, the
    // record waits in memory and is published once the API is back.
    api.stop();
    let response = runtime.block_on(fetch_config(second.insecure, restart_machine(4)));
    assert_eq!(response.status, 200);
    api.restart();
    poll(
        "the record made during the outage published",
        DEADLINE,
        || (published_records(&api).get(node) == Some(&5)).then_some(()),
    );

    // Every machine's node gets its record, served by that node's replica name.
    for i in 0..5 {
        api.create(&worker_node(
            &format!("worker-restart-{i}"),
            restart_machine(i),
        ))
        .unwrap();
    }
    for i in 0..5 {
        let name = format!("worker-restart-{i}");
        let mcn = poll("the MCN with its record", DEADLINE, || {
            api.get("MachineConfigNode", None, &name)
                .filter(|mcn| annotation(mcn, "bootstrap-served-at").is_some())
        });
        assert_eq!(
            annotation(&mcn, "bootstrap-served-by").as_deref(),
            Some(node)
        );
        assert_eq!(
            annotation(&mcn, "bootstrap-address"),
            Some(restart_machine(i).to_string())
        );
    }
    // Settled records leave the object.
    poll("settled records removed", DEADLINE, || {
        (published_records(&api).get(node) == Some(&0)).then_some(())
    });
}

fn control_plane_node(name: &str, ip: IpAddr) -> Value {
    node_with_roles(name, ip, &["master", "control-plane"])
}

#[test]
fn a_load_balancer_that_rewrites_addresses_never_names_the_wrong_node() {
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let replica = start_named(&api, &tokens, "mcs-nat", "master-0");
    wait_ready(&replica);
    // The balancer runs on a control-plane node and connects from that node's address, as the
    // on-premises API load balancer does; that node has just joined (within the clock-skew
    // allowance of what is served next).
    let balancer = IpAddr::V4(Ipv4Addr::new(127, 10, 3, 1));
    api.create(&control_plane_node("master-lb", balancer))
        .unwrap();
    poll("the control-plane node's MCN", DEADLINE, || {
        api.get("MachineConfigNode", None, "master-lb")
    });
    let proxy = runtime
        .block_on(Balancer::start_from(vec![replica.insecure], Some(balancer)))
        .address;
    let machines = [
        IpAddr::V4(Ipv4Addr::new(127, 10, 3, 10)),
        IpAddr::V4(Ipv4Addr::new(127, 10, 3, 11)),
    ];
    for machine in machines {
        let response = runtime.block_on(fetch_config(proxy, machine));
        assert_eq!(response.status, 200);
    }
    // The publisher has seen the record (of the balancer's address) in a pass.
    poll("the record merged", DEADLINE, || {
        (metric(&replica, "mcs_mcn_bootstrap_records_merged ") == 1.0).then_some(())
    });
    for (i, machine) in machines.iter().enumerate() {
        api.create(&worker_node(&format!("worker-nat-{i}"), *machine))
            .unwrap();
    }
    for name in ["worker-nat-0", "worker-nat-1"] {
        poll("the worker's MCN with its status", DEADLINE, || {
            api.get("MachineConfigNode", None, name)
                .filter(|mcn| !mcn["status"].is_null())
        });
    }
    // Neither the control-plane node (whose address the record carries) nor the workers
    // (whose addresses were hidden) is named as the machine that was served.
    for name in ["master-lb", "worker-nat-0", "worker-nat-1"] {
        let mcn = api.get("MachineConfigNode", None, name).unwrap();
        assert_eq!(
            annotation(&mcn, "bootstrap-served-at"),
            None,
            "{name} got another machine's record: {mcn:#}"
        );
        assert_eq!(
            annotation(&mcn, "bootstrap-rendered-config"),
            None,
            "{name}"
        );
    }
    assert_eq!(
        metric(&replica, "mcs_mcn_publish_total{result=\"filled\"}"),
        0.0,
        "{}",
        replica.output()
    );
}
