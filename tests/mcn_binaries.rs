//! MachineConfigNode publishing with two real `machine-config-server start` processes (the
//! binary, not in-process replicas) against the in-test Kubernetes API server: exactly one of
//! them holds the publisher Lease and writes MCNs, and when that one is stopped (SIGTERM) the
//! other takes over and publishes the next node's MCN.
//!
//! Who wrote the MCNs is told from each process's own log ("created MachineConfigNode" is
//! logged only by the replica that applied it) together with the Lease holder, whose identity
//! is `<POD_NAME>_<pid>`; both replicas use the same field manager, so managedFields cannot
//! tell them apart.

use std::time::{Duration, Instant};
use support::mcs;

use machine_config_server::mcn;
use mcs::{poll, Server};
use support::api_server::{ApiServer, Options};
use support::cluster::{
    lease_holder, load_realistic_cluster, token_dir, worker_node, APISERVER_URL,
};

const DEADLINE: Duration = Duration::from_secs(15);
const MCN: &str = "MachineConfigNode";
const CREATED: &str = "created MachineConfigNode";
const POD_A: &str = "mcs-replica-a";
const POD_B: &str = "mcs-replica-b";

/// One `start` replica named `pod` with short lease timings.
fn start_replica(api: &ApiServer, tokens: &tempfile::TempDir, pod: &str) -> Server {
    Server::start_cluster(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[
            ("POD_NAME", pod),
            (mcn::ENV_LEASE_DURATION_MS, "3000"),
            (mcn::ENV_RENEW_PERIOD_MS, "1000"),
            (mcn::ENV_RENEW_DEADLINE_MS, "2000"),
            (mcn::ENV_RETRY_PERIOD_MS, "500"),
        ],
    )
}

fn identity(pod: &str, server: &Server) -> String {
    format!("{pod}_{}", server.pid())
}

/// Lines of `server`'s log that report creating the MCN `name`.
fn created_lines(server: &Server, name: &str) -> usize {
    server
        .output()
        .lines()
        .filter(|line| line.contains(CREATED) && line.contains(name))
        .count()
}

fn mcn_pool(api: &ApiServer, name: &str) -> Option<String> {
    let mcn = api.get(MCN, None, name)?;
    Some(mcn["spec"]["pool"]["name"].as_str()?.to_string())
}

#[test]
fn one_binary_publishes_and_the_other_takes_over_when_it_stops() {
    let started = Instant::now();
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let a = start_replica(&api, &tokens, POD_A);
    let b = start_replica(&api, &tokens, POD_B);
    let (id_a, id_b) = (identity(POD_A, &a), identity(POD_B, &b));

    // A node joins: its MCN appears, written by whichever replica holds the Lease.
    api.create(&worker_node("worker-one", "10.0.0.11")).unwrap();
    let pool = poll("the MCN of worker-one", DEADLINE, || {
        mcn_pool(&api, "worker-one")
    });
    assert_eq!(pool, "worker");
    let holder = poll("a lease holder", DEADLINE, || lease_holder(&api));
    assert!(
        holder == id_a || holder == id_b,
        "lease holder {holder:?} is neither {id_a} nor {id_b}"
    );
    let (mut leader, follower, follower_id) = if holder == id_a {
        (a, b, id_b)
    } else {
        (b, a, id_a)
    };
    poll("the leader's log of creating worker-one", DEADLINE, || {
        (created_lines(&leader, "worker-one") == 1).then_some(())
    });
    assert_eq!(
        created_lines(&follower, "worker-one"),
        0,
        "the standby replica wrote an MCN too:\n{}",
        follower.output()
    );
    assert!(
        !follower.output().contains(CREATED),
        "the standby replica wrote MCNs:\n{}",
        follower.output()
    );
    assert!(
        !follower
            .output()
            .contains("acquired the lease; publishing MachineConfigNodes"),
        "the standby replica led at some point:\n{}",
        follower.output()
    );
    // The API server saw exactly one write of that MCN (the leader's create): a second
    // publisher would have applied it too.
    let mcn_creates = |name: &str| {
        api.requests()
            .iter()
            .filter(|r| {
                r.resource == "machineconfignodes"
                    && r.name.as_deref() == Some(name)
                    && matches!(r.verb.as_str(), "create" | "patch" | "update")
                    && r.subresource.is_none()
                    && (200..300).contains(&r.status)
            })
            .count()
    };
    assert_eq!(
        mcn_creates("worker-one"),
        1,
        "MCN writes for worker-one other than the leader's one create: {:?}",
        api.requests()
    );

    // The leader stops: it releases the Lease on shutdown, the other replica takes it and
    // publishes the next node's MCN.
    leader.terminate();
    let status = leader.wait_exit(DEADLINE);
    assert!(status.success(), "leader exited with {status}");
    assert!(
        leader.output().contains("released the lease"),
        "the leader did not release the lease:\n{}",
        leader.output()
    );
    api.create(&worker_node("worker-two", "10.0.0.12")).unwrap();
    let pool = poll("the MCN of worker-two", DEADLINE, || {
        mcn_pool(&api, "worker-two")
    });
    assert_eq!(pool, "worker");
    poll("the other replica holding the lease", DEADLINE, || {
        (lease_holder(&api).as_deref() == Some(follower_id.as_str())).then_some(())
    });
    poll(
        "the new leader's log of creating worker-two",
        DEADLINE,
        || (created_lines(&follower, "worker-two") == 1).then_some(()),
    );
    assert_eq!(mcn_creates("worker-two"), 1, "{:?}", api.requests());
    assert_eq!(
        created_lines(&leader, "worker-two"),
        0,
        "the stopped replica wrote worker-two"
    );
    // The first node's MCN is kept, not rewritten by the new leader.
    assert_eq!(
        created_lines(&follower, "worker-one"),
        0,
        "the new leader recreated worker-one:\n{}",
        follower.output()
    );
    eprintln!("failover test took {:?}", started.elapsed());
}
