//! The rehearsal's stage, shared by every scenario ([`super::Scenario`]): the replicas (each
//! with the flags the MCO's DaemonSet passes and its own path to the API through a fault
//! proxy), the balancer in front of them, a machine's whole life (its fetch as Ignition, its
//! first-boot failure report, its Node and its daemon's report), the MachineConfigNode monitor,
//! and what is read back at the end (each replica's figures, writes and output).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::machine::{self, Balancer, Exchange};
use super::plan::{self, Client, Fate, Machine, Pool};
use super::{cluster, verdict, ApiWrite, Knobs, MachineRun, ReplicaRun, Scrape, Served};
use super::{replica_name, APISERVER_URL, CIPHER_SUITES, REPLICAS};
use crate::api_server::ApiServer;
use crate::fault_proxy::FaultProxy;
use crate::haproxy::{Balance, Check, Haproxy, Header, Source};
use crate::mcs::{Ports, Server, StopFlag};

pub(super) struct Replica {
    pub(super) name: String,
    pub(super) server: Server,
    pub(super) proxy: FaultProxy,
}

pub(super) fn replica_args(
    kubeconfig: &std::path::Path,
    tokens: &std::path::Path,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "start".into(),
        format!("--apiserver-url={APISERVER_URL}"),
        "--payload-version=4.22.0-0.rehearsal".into(),
        format!("--tls-cipher-suites={CIPHER_SUITES}"),
        "--tls-min-version=VersionTLS12".into(),
        "--v=2".into(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--bootstrap-token-dir".into(),
        tokens.display().to_string(),
        "--proxy-protocol-from".into(),
        format!("{}/32", plan::BALANCER_ADDRESS),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// Prometheus's targets: each backend's admin listener (`ports` in the balancer's order) with
/// its pod's name.
pub(super) fn scrape_targets(backends: &[(String, u16)]) -> Vec<crate::prometheus::Target> {
    backends
        .iter()
        .map(|(pod, metrics)| crate::prometheus::Target {
            pod: pod.clone(),
            address: SocketAddr::from(([127, 0, 0, 1], *metrics)),
        })
        .collect()
}

/// The scale-up's replicas tell machines where and how to report a first-boot failure
/// (upstream PR #6124).
pub(super) const ADVERTISE_FAILURES: &[&str] = &["--advertise-failure-reporting"];

pub(super) fn replica_env(index: usize, lease: Option<Duration>) -> Vec<(String, String)> {
    use machine_config_server::mcn;
    let mut env = vec![
        ("POD_NAME".to_string(), super::pod_name(index)),
        (mcn::ENV_NODE_NAME.to_string(), replica_name(index)),
        ("RUST_LOG".to_string(), "info".to_string()),
    ];
    if let Some(lease) = lease {
        let ms = |d: Duration| d.as_millis().to_string();
        env.extend([
            (mcn::ENV_LEASE_DURATION_MS.to_string(), ms(lease)),
            (mcn::ENV_RENEW_DEADLINE_MS.to_string(), ms(lease * 2 / 3)),
            (mcn::ENV_RENEW_PERIOD_MS.to_string(), ms(lease / 3)),
            (mcn::ENV_RETRY_PERIOD_MS.to_string(), ms(lease / 6)),
        ]);
    }
    env
}

/// A replica's figures from its admin listener (`None` when it does not answer).
pub(super) fn scrape(server: &Server, at: Duration) -> Option<Scrape> {
    let response = crate::mcs::try_request(server.metrics, None, "GET", "/metrics", &[]).ok()?;
    let text = String::from_utf8_lossy(&response.body);
    let mut out = Scrape {
        at,
        ..Scrape::default()
    };
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if series.starts_with("mcs_requests_total{") && series.contains("code=\"200\"") {
            out.ok_requests += value;
        } else if series == "mcs_mcn_records_served_before_durable_total" {
            out.before_durable += value;
        }
    }
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap_or_default();
    let kib = |field: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    out.resident_kib = kib("VmRSS:");
    out.peak_kib = kib("VmHWM:");
    Some(out)
}

/// The Lease holder among the replicas (by its process id in the holder identity).
pub(super) fn leader(api: &ApiServer, replicas: &[Replica]) -> Option<usize> {
    let holder = crate::cluster::lease_holder(api)?;
    replicas
        .iter()
        .position(|r| holder.ends_with(&format!("_{}", r.server.pid())))
}

/// Every MachineConfigNode by name.
pub(super) fn mcns_by_name(api: &ApiServer) -> BTreeMap<String, Value> {
    api.list("MachineConfigNode")
        .into_iter()
        .map(|m| {
            let name = m["metadata"]["name"].as_str().unwrap_or_default();
            (name.to_string(), m)
        })
        .collect()
}

/// The replicas, each through a fault proxy of its own, on free ports the balancer learns,
/// every pool ready.
pub(super) fn start_replicas(
    api: &ApiServer,
    knobs: &Knobs,
    tokens: &std::path::Path,
    stage: &super::faults::Stage,
) -> Result<Vec<Replica>, String> {
    let replicas = (0..REPLICAS)
        .map(|index| {
            let mut extra: Vec<String> = ADVERTISE_FAILURES.iter().map(|a| a.to_string()).collect();
            extra.extend(stage.serving_args());
            start_replica(
                api,
                knobs,
                tokens,
                index,
                None,
                &extra,
                &stage.env_of(index),
            )
        })
        .collect::<Result<Vec<_>, String>>()?;
    for replica in &replicas {
        replica
            .server
            .wait_every_pool_ready(Duration::from_secs(60));
    }
    Ok(replicas)
}

/// Replica `index` through a fault proxy of its own, on `ports` (a balancer that already knows
/// them) or on free ones; returns once it serves (its pools may still be waiting for caches).
pub(super) fn start_replica(
    api: &ApiServer,
    knobs: &Knobs,
    tokens: &std::path::Path,
    index: usize,
    ports: Option<Ports>,
    extra: &[String],
    extra_env: &[(String, String)],
) -> Result<Replica, String> {
    let proxy = FaultProxy::start(api.kubeconfig_file());
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let args = replica_args(proxy.kubeconfig_file(), tokens, &extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut env = replica_env(index, knobs.lease);
    env.extend(extra_env.iter().cloned());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // Fixed ports can be held a moment by a client's outgoing connection (Prometheus scraping
    // a target that does not run yet): a few seconds of tries.
    let tries = if ports.is_some() { 20 } else { 5 };
    for _ in 0..tries {
        match Server::start_on_binary(
            knobs.binary.as_deref(),
            ports.unwrap_or_else(Ports::free),
            &args,
            &env,
        ) {
            Ok(server) => {
                return Ok(Replica {
                    name: replica_name(index),
                    server,
                    proxy,
                })
            }
            // Another process took a free port first: other ports (fixed ones: again).
            Err(output) if output.contains("cannot listen") => {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            Err(output) => return Err(format!("replica {index} did not start:\n{output}")),
        }
    }
    Err(format!("replica {index} found no free ports"))
}

/// haproxy in front of both serving ports of every replica, answering once every replica is
/// in.
pub(super) fn start_balancer(replicas: &[Replica]) -> (Haproxy, Balancer) {
    let backends: Vec<(SocketAddr, SocketAddr)> = replicas
        .iter()
        .map(|r| (r.server.secure, r.server.insecure))
        .collect();
    balancer_for(&backends)
}

/// haproxy (TCP, PROXY v2 from [`plan::BALANCER_ADDRESS`], health checks) in front of each
/// `(secure, insecure)` pair: backend `i` of both frontends is pair `i`, whether it runs yet or
/// not (its health checks decide). Returns once the balancer answers `/healthz`.
pub(super) fn balancer_for(backends: &[(SocketAddr, SocketAddr)]) -> (Haproxy, Balancer) {
    let haproxy = Haproxy::balance_from(
        &[
            Balance {
                backends: backends.iter().map(|(secure, _)| *secure).collect(),
                check: Check::Https,
            },
            Balance {
                backends: backends.iter().map(|(_, insecure)| *insecure).collect(),
                check: Check::Http,
            },
        ],
        Source::Proxied(IpAddr::V4(plan::BALANCER_ADDRESS), Header::V2),
    );
    let balancer = Balancer {
        tls: haproxy.frontends[0],
        plain: haproxy.frontends[1],
        client_config: crate::mcs::dev_ca_client(),
    };
    crate::mcs::poll(
        "the balancer's first answer",
        Duration::from_secs(30),
        || {
            crate::mcs::try_request(balancer.plain, None, "GET", "/healthz", &[])
                .ok()
                .filter(|r| r.status == 200)
        },
    );
    (haproxy, balancer)
}

/// A thread noting when each MCN first shows a bootstrap record, until `stop`.
pub(super) fn watch_mcn_records(
    api: Arc<ApiServer>,
    stop: StopFlag,
    t0: Instant,
) -> (
    std::thread::JoinHandle<()>,
    Arc<Mutex<BTreeMap<String, Duration>>>,
) {
    let seen: Arc<Mutex<BTreeMap<String, Duration>>> = Arc::default();
    let noted = seen.clone();
    let thread = std::thread::spawn(move || {
        while !stop.is_set() {
            // A real API server that is down (its restart) makes the list fail: try again at
            // the next round rather than lose the monitor for the rest of the day.
            let listed =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| mcns_by_name(&api)));
            for (name, mcn) in listed.unwrap_or_default() {
                if crate::cluster::mcn_annotation(&mcn, "bootstrap-served-at").is_some() {
                    noted
                        .lock()
                        .unwrap()
                        .entry(name)
                        .or_insert_with(|| t0.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    (thread, seen)
}

/// Waits (until `deadline`) for the MCN of every machine that joined to carry its bootstrap
/// record, and of every machine that joined on a second boot its failure.
pub(super) fn wait_for_mcns(api: &ApiServer, machines: &[MachineRun], deadline: Instant) {
    let joined = |fate: Option<Fate>| -> Vec<String> {
        machines
            .iter()
            .filter(|m| m.joined.is_some() && m.served.is_some())
            .filter(|m| fate.is_none_or(|f| m.plan.fate == f))
            .map(|m| m.plan.name.clone())
            .collect()
    };
    let (expected, failed) = (joined(None), joined(Some(Fate::FailsThenJoins)));
    let has = |mcn: &Value, key: &str| crate::cluster::mcn_annotation(mcn, key).is_some();
    crate::mcs::poll_every(
        Duration::from_millis(250),
        deadline.saturating_duration_since(Instant::now()),
        || {
            let mcns = mcns_by_name(api);
            let complete = expected.iter().all(|name| {
                mcns.get(name)
                    .is_some_and(|m| has(m, "bootstrap-served-at"))
            });
            let told = failed.iter().all(|name| {
                mcns.get(name).is_some_and(|m| {
                    has(m, "firstboot-failure-stage") || has(m, "firstboot-failure-cleared-at")
                })
            });
            (complete && told).then_some(())
        },
    );
}

/// What happened to one replica's process: its figures just before a SIGKILL, and when it was
/// killed and started again.
#[derive(Clone, Debug, Default)]
pub(super) struct Kill {
    pub(super) before: Option<Scrape>,
    pub(super) killed_at: Option<Duration>,
    pub(super) restarted_at: Option<Duration>,
}

pub(super) fn replica_runs(replicas: &[Replica], kills: &[Kill], t0: Instant) -> Vec<ReplicaRun> {
    replicas
        .iter()
        .zip(kills)
        .map(|(replica, kill)| {
            ReplicaRun::finished(&replica.name, &replica.server, &replica.proxy, kill, t0)
        })
        .collect()
}

impl ReplicaRun {
    /// A server's figures, API writes (from its fault proxy's log) and output at the end.
    pub(super) fn finished(
        name: &str,
        server: &Server,
        proxy: &FaultProxy,
        kill: &Kill,
        t0: Instant,
    ) -> ReplicaRun {
        let writes = proxy
            .log()
            .into_iter()
            .filter_map(|logged| {
                let kind = verdict::WriteKind::of(&logged.method, &logged.uri)?;
                Some(ApiWrite {
                    at: logged.at.saturating_duration_since(t0),
                    kind,
                    status: logged.status,
                    method: logged.method,
                    uri: logged.uri,
                })
            })
            .collect();
        let log = proxy.log();
        let at = |logged: &crate::fault_proxy::Logged| logged.at.saturating_duration_since(t0);
        let lists = log
            .iter()
            .filter(|l| l.method == "GET" && !l.watch && l.uri.contains("limit="))
            .map(at)
            .collect();
        let watches = log
            .iter()
            .filter(|l| l.watch)
            .map(|l| (at(l), l.status))
            .collect();
        let reads = log
            .iter()
            .filter(|l| l.method == "GET")
            .map(|l| (at(l), l.uri.clone(), l.status, l.watch))
            .collect();
        let output = server.output();
        let tail: Vec<&str> = output.lines().rev().take(40).collect();
        let output_tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
        ReplicaRun {
            name: name.to_string(),
            before_kill: kill.before.clone(),
            end: scrape(server, t0.elapsed()).unwrap_or_default(),
            killed_at: kill.killed_at,
            restarted_at: kill.restarted_at,
            writes,
            lists,
            watches,
            reads,
            output,
            output_tail,
        }
    }
}

impl ReplicaRun {
    /// A server that has no fault proxy of ours (the original): its output, and its figures
    /// where it has an admin listener.
    pub(super) fn named(name: &str, server: &Server) -> ReplicaRun {
        let output = server.output();
        let tail: Vec<&str> = output.lines().rev().take(40).collect();
        let output_tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
        ReplicaRun {
            name: name.to_string(),
            before_kill: None,
            end: scrape(server, Duration::ZERO).unwrap_or_default(),
            killed_at: None,
            restarted_at: None,
            writes: Vec::new(),
            lists: Vec::new(),
            watches: Vec::new(),
            reads: Vec::new(),
            output,
            output_tail,
        }
    }
}

/// Waits (until `deadline`) for every joined machine's MCN to exist (whoever served it: in the
/// switch, machines the original served get an MCN without a record).
pub(super) fn wait_for_switched_mcns(api: &ApiServer, machines: &[MachineRun], deadline: Instant) {
    let joined: Vec<&str> = machines
        .iter()
        .filter(|m| m.joined.is_some())
        .map(|m| m.plan.name.as_str())
        .collect();
    crate::mcs::poll_every(
        Duration::from_millis(250),
        deadline.saturating_duration_since(Instant::now()),
        || {
            let mcns = mcns_by_name(api);
            joined
                .iter()
                .all(|name| mcns.contains_key(*name))
                .then_some(())
        },
    );
}

/// The tools every scenario needs: haproxy, and Debian's Ignition when a machine is it.
pub(super) fn check_tools(knobs: &Knobs) -> Result<(), String> {
    let missing = |tool: &str| !std::path::Path::new(tool).exists();
    if missing(crate::haproxy::HAPROXY) {
        return Err(format!(
            "{} is missing: install Debian's haproxy",
            crate::haproxy::HAPROXY
        ));
    }
    if knobs.prometheus && missing(crate::prometheus::PROMETHEUS) {
        return Err(format!(
            "{} is missing: install Debian's prometheus, or set MCS_REHEARSAL_PROMETHEUS=0",
            crate::prometheus::PROMETHEUS
        ));
    }
    if knobs.real_ignition && missing(machine::IGNITION) {
        return Err(format!(
            "{} is missing: install Debian's ignition, or set MCS_REHEARSAL_REAL_IGNITION=0",
            machine::IGNITION
        ));
    }
    Ok(())
}

/// One machine's life: it powers on, fetches its config (as Ignition, or as Debian's real
/// Ignition through its relay), then joins, or reports a failure and joins on a second boot or
/// never.
pub(super) async fn live_machine(
    plan: Machine,
    api: Arc<ApiServer>,
    balancer: Balancer,
    before: cluster::Before,
    t0: Instant,
    give_up: Instant,
) -> MachineRun {
    tokio::time::sleep_until((t0 + plan.arrives).into()).await;
    let mut run = MachineRun::new(plan.clone());
    if plan.client == Client::RealIgnition {
        real_ignition_fetch(&mut run, &balancer, &before.config_spec, t0, give_up).await;
    } else {
        run.fetch = machine::fetch_config(&plan, &balancer, t0, give_up).await;
        run.read_served();
    }
    let Some(served) = run.served.clone() else {
        return run;
    };
    let boot = |fraction: f64| tokio::time::sleep(plan.boot.mul_f64(fraction));
    let blocking = |f: Box<dyn FnOnce() -> Result<(), String> + Send>| async move {
        tokio::task::spawn_blocking(f)
            .await
            .unwrap_or_else(|e| Err(format!("blocking task: {e}")))
    };
    let mut boot_number = 1;
    if plan.fate != Fate::Joins {
        // The daemon's first boot fails pulling its OS image: it tells the server.
        boot(0.5).await;
        let image = served.image.clone().unwrap_or_else(|| {
            "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:3333333333333333333333333333333333333333333333333333333333333333".into()
        });
        // The daemon reports where its config told it, trusting the CA its config carried;
        // a config that told it nothing leaves the failure untold.
        match machine::report_target(&served, &balancer) {
            Ok(target) => {
                run.report =
                    Some(machine::report_failure(&plan, &target, t0, give_up, &image).await);
            }
            Err(why) => {
                run.trouble = Some(format!("cannot report its failure: {why}"));
                run.report = Some(Exchange::default());
            }
        }
        if plan.fate == Fate::FailsForGood {
            return run;
        }
        boot_number = 2;
    }
    boot(1.0).await;
    let boot_id = format!("boot-{}-{boot_number}", plan.name);
    let (name, pool, address, id) = (plan.name.clone(), plan.pool, plan.address, boot_id.clone());
    let api_register = api.clone();
    match blocking(Box::new(move || {
        cluster::register(&api_register, &name, pool, address, &id)
    }))
    .await
    {
        Ok(()) => run.joined = Some((t0.elapsed(), boot_id)),
        Err(e) => {
            run.trouble = Some(e);
            return run;
        }
    }
    boot(0.5).await;
    let name = plan.name.clone();
    let config = served.rendered_config.clone();
    let image = if plan.pool == Pool::Layered {
        served.image.clone().or(Some(before.image.clone()))
    } else {
        None
    };
    match blocking(Box::new(move || {
        cluster::daemon_reports(&api, &name, &config, image.as_deref())
    }))
    .await
    {
        Ok(()) => run.daemon_reported = Some(t0.elapsed()),
        Err(e) => run.trouble = Some(e),
    }
    run
}

/// Debian's Ignition fetches the machine's config through its relay (the machine's own
/// address); the attempts are the relay's connections.
pub(super) async fn real_ignition_fetch(
    run: &mut MachineRun,
    balancer: &Balancer,
    config_spec: &str,
    t0: Instant,
    give_up: Instant,
) {
    let plan = run.plan.clone();
    let relay = match machine::Relay::start(IpAddr::V4(plan.address), balancer.tls).await {
        Ok(relay) => relay,
        Err(e) => {
            run.trouble = Some(format!("relay: {e}"));
            return;
        }
    };
    let url = format!(
        "https://localhost:{}/config/{}",
        relay.address.port(),
        plan.pool.name()
    );
    let started = t0.elapsed();
    let timeout = give_up.saturating_duration_since(Instant::now());
    let fetched = tokio::task::spawn_blocking(move || {
        let work = tempfile::tempdir().expect("a directory for Ignition");
        let ca = std::fs::read(crate::mcs::repo().join("certs/ca.crt")).unwrap_or_default();
        machine::run_real_ignition(work.path(), &url, &ca, timeout)
    })
    .await;
    let ended = t0.elapsed();
    run.relayed = relay.connections.lock().unwrap().clone();
    let fetched = match fetched {
        Ok(fetched) => fetched,
        Err(e) => {
            run.trouble = Some(format!("ignition task: {e}"));
            return;
        }
    };
    match fetched.config {
        Ok(config) => {
            // Ignition caches the config translated to its own newest spec, so the spec it
            // was served is the one its release asks for (its `Accept`), as the server answers
            // that request.
            let asks = machine::real_ignition_release()
                .as_deref()
                .and_then(plan::newest_stable_spec);
            run.served = Served::read(&config, ended).map(|mut served| {
                served.spec = asks
                    .map(|asks| verdict::expected_spec(asks, config_spec))
                    .unwrap_or_else(|| format!("unknown (cached as {})", served.spec));
                served
            });
            // Its attempts are its relay's connections; the last one got the config.
            let count = run.relayed.len().max(1);
            for (i, local) in run.relayed.clone().into_iter().enumerate() {
                let last = i + 1 == count;
                run.fetch.attempts.push(machine::Attempt {
                    started,
                    ended,
                    local: Some(local),
                    outcome: if last {
                        machine::Outcome::Status(200)
                    } else {
                        machine::Outcome::Failed("retried by Ignition".into())
                    },
                });
            }
            if run.served.is_none() {
                run.trouble = Some("Ignition's config has no node annotations".into());
            }
        }
        Err(e) => {
            run.trouble = Some(format!("{e}\n{}", fetched.log));
        }
    }
}
