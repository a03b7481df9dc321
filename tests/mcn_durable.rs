//! A served record is durable before its config is sent: three real `machine-config-server
//! start` replicas behind a round-robin balancer that keeps the client's address
//! (`support::balancer`); a machine fetches `/config/worker` and the replica that
//! answered is SIGKILLed (an OOM kill, a kernel panic, a power loss) at several moments right
//! after the response completed, then comes back as the DaemonSet restarts it. Every machine's
//! Node then joins, and every MachineConfigNode must carry the bootstrap record of the replica
//! that served its machine: nothing a dead replica answered is lost.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::{Duration, Instant};
use support::mcs;

use machine_config_server::mcn;
use mcs::{poll, Server};
use support::api_server::{ApiServer, Options};
use support::balancer::{fetch_config, fetch_like_ignition, served_rendered_config, Balancer};
use support::cluster::{
    load_realistic_cluster, mcn_annotation, token_dir, worker_node, APISERVER_URL,
};
use support::fault_proxy::{FaultProxy, HoldAt, Logged};

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
    start_replica_on(api.kubeconfig_file(), tokens, slot, generation)
}

/// [`start_replica`] with the API server of `kubeconfig` (e.g. a fault proxy's).
fn start_replica_on(
    kubeconfig: &Path,
    tokens: &tempfile::TempDir,
    slot: usize,
    generation: usize,
) -> Server {
    start_replica_with(kubeconfig, tokens, slot, generation, &[])
}

/// [`start_replica_on`] with more environment (`extra` after the common settings).
fn start_replica_with(
    kubeconfig: &Path,
    tokens: &tempfile::TempDir,
    slot: usize,
    generation: usize,
    extra: &[(&str, &str)],
) -> Server {
    let pod = format!("mcs-pod-{slot}-{generation}");
    let node = node_name(slot);
    let mut env = vec![
        ("POD_NAME", pod.as_str()),
        (mcn::ENV_NODE_NAME, node.as_str()),
        (mcn::ENV_LEASE_DURATION_MS, "3000"),
        (mcn::ENV_RENEW_PERIOD_MS, "500"),
        (mcn::ENV_RENEW_DEADLINE_MS, "2000"),
        (mcn::ENV_RETRY_PERIOD_MS, "300"),
        (mcn::ENV_RESYNC_MS, "500"),
    ];
    env.extend_from_slice(extra);
    let server = Server::start_cluster(kubeconfig, APISERVER_URL, tokens.path(), &env);
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

/// A rolling update's SIGTERM while a machine's connection is open and its request not yet
/// answered (the balancer handed it over before its checks saw the replica go): the machine is
/// answered during the drain, and its record still reaches the shared ConfigMap before the
/// replica exits, so its Node's MCN names that replica.
#[test]
fn an_answer_given_while_draining_after_sigterm_keeps_its_record() {
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let mut replica = start_replica(&api, &tokens, 0, 0);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let i = 40;
    let address = replica.insecure;
    let request = mcs::request_bytes(
        "GET",
        "/config/worker",
        &[
            (
                "Accept",
                "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1",
            ),
            ("User-Agent", "Ignition/2.20.0"),
        ],
    );
    let mut stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(std::net::SocketAddr::new(machine(i), 0))
            .unwrap();
        socket.connect(address).await.unwrap()
    });
    std::thread::sleep(Duration::from_millis(200));
    replica.terminate();
    std::thread::sleep(Duration::from_millis(300));
    let raw = runtime.block_on(async {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        stream.write_all(&request).await.unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.unwrap();
        raw
    });
    let response = mcs::parse_response(&raw, false).expect("an answer during the drain");
    assert_eq!(response.status, 200, "{}", replica.output());
    let status = replica.wait_exit(DEADLINE);
    assert_eq!(status.code(), Some(0), "{}", replica.output());
    // The next replica (the Lease holder now) writes the MCN from the shared records.
    let _next = start_replica(&api, &tokens, 1, 0);
    let served = BTreeMap::from([(
        i,
        Served {
            replica: node_name(0),
            rendered_config: served_rendered_config(&response.json()),
            kill: "never: SIGTERM before the request, answered while draining".into(),
        },
    )]);
    every_node_gets_its_record(&api, &served);
}

/// The served-records write that carries `address`'s record (the apply of a replica's key).
fn carries_record_of(address: IpAddr) -> impl Fn(&str, &str, &[u8]) -> bool + Send + 'static {
    let needle = format!("\\\"{address}\\\"");
    move |method, uri, body| {
        method == "PATCH"
            && uri.contains(&format!("/configmaps/{}", mcn::exchange::DEFAULT_NAME))
            && String::from_utf8_lossy(body).contains(&needle)
    }
}

#[test]
fn a_replica_killed_in_the_middle_of_the_write_loses_no_record() {
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    // One proxy per replica between it and the API server, to hold its write.
    let proxies: Vec<FaultProxy> = (0..REPLICAS)
        .map(|_| FaultProxy::start(api.kubeconfig_file()))
        .collect();
    let mut generation = 0;
    let mut replicas: Vec<Server> = (0..REPLICAS)
        .map(|slot| start_replica_on(proxies[slot].kubeconfig_file(), &tokens, slot, generation))
        .collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let balancer = runtime.block_on(Balancer::start(
        replicas.iter().map(|s| s.insecure).collect(),
    ));

    // The replica dies while the write carrying the machine's record is on its way to the API
    // server (it never arrives), or after the API server applied it but before the replica
    // heard back. The machine retries as Ignition does; the next replica answers.
    let moments = [
        HoldAt::BeforeForwarding,
        HoldAt::AfterAnswer,
        HoldAt::BeforeForwarding,
        HoldAt::AfterAnswer,
        HoldAt::BeforeForwarding,
        HoldAt::AfterAnswer,
    ];
    let mut served = BTreeMap::new();
    for (n, at) in moments.into_iter().enumerate() {
        let i = 100 + n;
        let held: Vec<_> = proxies
            .iter()
            .map(|proxy| proxy.hold_next(at, carries_record_of(machine(i))))
            .collect();
        let fetch = runtime.spawn(fetch_like_ignition(balancer.address, machine(i), DEADLINE));
        let slot = poll("the write carrying the record held", DEADLINE, || {
            held.iter().position(|h| h.try_recv().is_ok())
        });
        replicas[slot].kill();
        for proxy in &proxies {
            proxy.clear_hold();
        }
        let (response, failed_attempts) = runtime.block_on(fetch).unwrap();
        let answered_by = balancer.last_choice(machine(i)).unwrap();
        eprintln!(
            "{at:?}: the write of replica {slot} held, replica killed; the machine got its config from replica {answered_by} after {failed_attempts} failed attempts"
        );
        served.insert(
            i,
            Served {
                replica: node_name(answered_by),
                rendered_config: served_rendered_config(&response.json()),
                kill: format!("mid-write ({at:?})"),
            },
        );
        generation += 1;
        replicas[slot] =
            start_replica_on(proxies[slot].kubeconfig_file(), &tokens, slot, generation);
        balancer.set_upstream(slot, replicas[slot].insecure);
    }
    every_node_gets_its_record(&api, &served);
}

/// The 200s `replica` counted for `/config/worker` (`mcs_requests_total`).
fn answered_200(replica: &Server) -> f64 {
    let body = mcs::request(replica.metrics, None, "GET", "/metrics", &[]).body;
    String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| l.starts_with("mcs_requests_total{"))
        .filter(|l| l.contains("pool=\"worker\"") && l.contains("code=\"200\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Reads from `stream` into `raw` until it holds `wanted` bytes (or the peer closes).
async fn read_at_least(stream: &mut tokio::net::TcpStream, raw: &mut Vec<u8>, wanted: usize) {
    use tokio::io::AsyncReadExt as _;
    let mut chunk = vec![0u8; 64 * 1024];
    while raw.len() < wanted {
        let n = stream.read(&mut chunk).await.unwrap();
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn the_last_byte_of_an_answer_waits_for_its_record_while_the_rest_is_sent() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let proxy = FaultProxy::start(api.kubeconfig_file());
    let replica = start_replica_on(proxy.kubeconfig_file(), &tokens, 0, 0);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let from = machine(60);
    let held = proxy.hold_next(HoldAt::BeforeForwarding, carries_record_of(from));

    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(std::net::SocketAddr::new(from, 0)).unwrap();
        let mut stream = socket.connect(replica.insecure).await.unwrap();
        stream
            .write_all(&mcs::request_bytes(
                "GET",
                "/config/worker",
                &[("Accept", support::balancer::IGNITION_3_5)],
            ))
            .await
            .unwrap();
        // The head and every byte of the body but the last arrive while the write carrying
        // the machine's record is on its way (here: held before it reaches the API server).
        let mut raw = Vec::new();
        let header_end = loop {
            let wanted = raw.len() + 1;
            read_at_least(&mut stream, &mut raw, wanted).await;
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
        };
        let head = String::from_utf8_lossy(&raw[..header_end]).to_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .expect("a Content-Length")
            .trim()
            .parse()
            .unwrap();
        tokio::time::timeout(
            DEADLINE,
            read_at_least(&mut stream, &mut raw, header_end + length - 1),
        )
        .await
        .expect("all but the last byte while the record is not durable");
        assert_eq!(raw.len(), header_end + length - 1);
        poll("the write carrying the record held", DEADLINE, || {
            held.try_recv().ok()
        });
        let mut more = [0u8; 16];
        assert!(
            tokio::time::timeout(Duration::from_millis(500), stream.read(&mut more))
                .await
                .is_err(),
            "the last byte waits while the write is held"
        );
        assert_eq!(
            answered_200(&replica),
            0.0,
            "an answer is counted once it is complete, not while its last byte waits"
        );
        proxy.clear_hold();
        proxy.release();
        stream.read_to_end(&mut raw).await.unwrap();
        assert_eq!(
            raw.len(),
            header_end + length,
            "the whole body once durable"
        );
        let config: serde_json::Value = serde_json::from_slice(&raw[header_end..]).unwrap();
        assert!(served_rendered_config(&config).starts_with("rendered-worker-"));
    });
    poll("the complete answer counted", DEADLINE, || {
        (answered_200(&replica) == 1.0).then_some(())
    });
    let metrics = mcs::request(replica.metrics, None, "GET", "/metrics", &[]).body;
    assert!(
        String::from_utf8_lossy(&metrics)
            .lines()
            .any(|l| l == "mcs_mcn_records_served_before_durable_total 0"),
        "the answer completed only once its record was durable"
    );
}

/// Start times of `log`'s served-records writes.
fn record_writes(log: &[Logged]) -> Vec<Instant> {
    log.iter()
        .filter(|entry| {
            entry.method == "PATCH"
                && entry
                    .uri
                    .contains(&format!("/configmaps/{}", mcn::exchange::DEFAULT_NAME))
        })
        .map(|entry| entry.at)
        .collect()
}

/// The most of `times` within any one second.
fn most_in_one_second(times: &[Instant]) -> usize {
    let mut sorted = times.to_vec();
    sorted.sort();
    (0..sorted.len())
        .map(|i| {
            sorted[i..]
                .iter()
                .take_while(|t| t.duration_since(sorted[i]) < Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Every machine of `from` fetches its config through `to` at once, each on its own
/// connection; what each got (the status) and how long it took, in `from`'s order.
fn fetch_all_at_once(
    runtime: &tokio::runtime::Runtime,
    to: std::net::SocketAddr,
    from: impl Iterator<Item = IpAddr>,
) -> Vec<(std::io::Result<u16>, Duration)> {
    runtime.block_on(async {
        let fetches: Vec<_> = from
            .map(|from| {
                tokio::spawn(async move {
                    let asked = Instant::now();
                    let response = fetch_config(to, from).await;
                    (response.map(|r| r.status), asked.elapsed())
                })
            })
            .collect();
        let mut results = Vec::new();
        for fetch in fetches {
            results.push(fetch.await.unwrap());
        }
        results
    })
}

/// `mcs_mcn_records_served_before_durable_total` of `replica`.
fn served_before_durable(replica: &Server) -> f64 {
    let body = mcs::request(replica.metrics, None, "GET", "/metrics", &[]).body;
    String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| l.starts_with("mcs_mcn_records_served_before_durable_total "))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A burst of machines goes out with the write that carries it as soon as every connection
/// waits for it, whatever the records writer did last: here its housekeeping pass (once a
/// second, while nobody asks), which once held the next burst to the flush interval, so that
/// one batch in ten of a storm waited twice as long. The interval is set far beyond the 2 s
/// bound: an answer that waited for it would go out after the bound, counted as sent before
/// its record was durable.
#[test]
fn a_burst_after_the_housekeeping_pass_is_written_as_soon_as_everyone_waits() {
    const MACHINES: usize = 24;
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let replica = start_replica_with(
        api.kubeconfig_file(),
        &tokens,
        0,
        0,
        &[(mcn::ENV_RECORDS_FLUSH_MS, "30000")],
    );
    // The writer wrote once on start; its housekeeping pass comes within a second.
    std::thread::sleep(Duration::from_millis(1500));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let machines =
        (0..MACHINES).map(|i| IpAddr::V4(Ipv4Addr::new(127, 10, 9, u8::try_from(i + 1).unwrap())));
    let results = fetch_all_at_once(&runtime, replica.insecure, machines);
    let slowest = results.iter().map(|(_, took)| *took).max().unwrap();
    let failed: Vec<String> = results
        .iter()
        .filter(|(status, _)| !matches!(status, Ok(200)))
        .map(|(status, _)| format!("{status:?}"))
        .collect();
    let not_durable = served_before_durable(&replica);
    eprintln!(
        "{MACHINES} machines at once, 1.5 s after start: slowest answer {slowest:?}; \
         answers sent before their record was durable: {not_durable}"
    );
    assert!(failed.is_empty(), "failed fetches: {failed:?}");
    assert_eq!(
        not_durable, 0.0,
        "the burst waited out the bound instead of going with its early write"
    );
    assert!(
        slowest < machine_config_server::server::commit::DEFAULT_WAIT_BOUND,
        "slowest answer {slowest:?}"
    );
}

#[test]
fn a_storm_of_500_machines_is_answered_within_2_s_at_p99_with_a_few_batched_writes() {
    const MACHINES: usize = 500;
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    // Proxies without faults: their logs tell each replica's writes apart, with times.
    let proxies: Vec<FaultProxy> = (0..REPLICAS)
        .map(|_| FaultProxy::start(api.kubeconfig_file()))
        .collect();
    let replicas: Vec<Server> = (0..REPLICAS)
        .map(|slot| start_replica_on(proxies[slot].kubeconfig_file(), &tokens, slot, 0))
        .collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let balancer = runtime.block_on(Balancer::start(
        replicas.iter().map(|s| s.insecure).collect(),
    ));
    let storm_machine = |i: usize| {
        IpAddr::V4(Ipv4Addr::new(
            127,
            10,
            5 + (i / 250) as u8,
            (i % 250 + 1) as u8,
        ))
    };

    let started = Instant::now();
    let results = fetch_all_at_once(&runtime, balancer.address, (0..MACHINES).map(storm_machine));
    let storm = started.elapsed();
    let errors: Vec<String> = results
        .iter()
        .filter(|(status, _)| !matches!(status, Ok(200)))
        .map(|(status, _)| format!("{status:?}"))
        .collect();
    let mut latencies: Vec<Duration> = results.iter().map(|(_, took)| *took).collect();
    latencies.sort();
    let p99 = latencies[MACHINES * 99 / 100 - 1];
    let p50 = latencies[MACHINES / 2];

    let writes: Vec<Vec<Instant>> = proxies.iter().map(|p| record_writes(&p.log())).collect();
    let per_second: Vec<usize> = writes.iter().map(|w| most_in_one_second(w)).collect();
    let not_durable: f64 = replicas.iter().map(served_before_durable).sum();
    eprintln!(
        "{MACHINES} machines at once through 3 replicas: {} errors, p50 {p50:?}, p99 {p99:?}, max {:?}, all answered in {storm:?}; \
         served-record writes per replica {:?} (most in one second {per_second:?}); answers sent before their record was durable: {not_durable}",
        errors.len(),
        latencies[MACHINES - 1],
        writes.iter().map(Vec::len).collect::<Vec<_>>(),
    );
    assert!(errors.is_empty(), "failed fetches: {errors:?}");
    assert!(p99 < Duration::from_secs(2), "p99 {p99:?}");
    for (slot, most) in per_second.iter().enumerate() {
        assert!(
            *most <= 5,
            "replica {slot}: {most} record writes in one second"
        );
    }
    assert!(
        writes.iter().map(Vec::len).sum::<usize>() < MACHINES / 5,
        "writes are batched, never one per request"
    );
    assert_eq!(not_durable, 0.0, "every answer waited for its record");
    // Every record reached the shared object.
    poll("every record published", DEADLINE, || {
        let object = api.get(
            "ConfigMap",
            Some(support::cluster::MCO_NAMESPACE),
            mcn::exchange::DEFAULT_NAME,
        )?;
        let published: usize = object["data"]
            .as_object()?
            .values()
            .filter_map(|text| {
                let value: serde_json::Value = serde_json::from_str(text.as_str()?).ok()?;
                Some(value["served"].as_array()?.len())
            })
            .sum();
        (published == MACHINES).then_some(())
    });
}
