//! A cluster's birth (`MCS_REHEARSAL_SCENARIO=install`), as the installer plays it: the
//! bootstrap server (`bootstrap --served-records-kubeconfig`, the full fixture) behind haproxy
//! with the three replica ports the cluster will use beside it; the bootstrap node's API server
//! not up yet (its path resets every connection); three masters (one Debian's real Ignition)
//! fetch their config from the bootstrap server; it is killed and restarted once; the API comes
//! up, the namespace a moment later; the masters' Nodes register; the cluster's objects appear
//! (pools, rendered MachineConfigs, ControllerConfig); three `start` replicas come up and join
//! the balancer beside the bootstrap server; workers begin to arrive (those that reach the
//! bootstrap server get its 500 and retry as Ignition does); the bootstrap server is drained,
//! leaves the balancer and stops; the rest of the workers arrive. Judged by the install's
//! verdicts ([`super::verdict::judge`]): every master's MCN carries the bootstrap server's
//! record, nothing stranded, both modes serve the same master config, nothing lost across the
//! restart, no worker with a bootstrap-server record.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::engine::{self, Kill, Replica};
use super::machine::Balancer;
use super::plan::{self, Client, Fate, Machine, Pool, RELEASES};
use super::{
    cluster, dashboard, report, verdict, Facts, InstallFacts, Knobs, MachineRun, Marks,
    ModeComparison, Outcome, ReplicaRun, Served, REPLICAS,
};
use crate::api_server::{ApiServer, Options};
use crate::fault_proxy::{Fault, FaultProxy};
use crate::mcs::{Ports, Server, StopFlag};
use machine_config_server::mcn::exchange::{self, BOOTSTRAP_SERVER_KEY};

/// The masters of every install.
pub const MASTERS: usize = 3;

/// The fixture both modes serve: the bootstrap server's base directory, and what the
/// cluster's objects are loaded from.
fn fixture() -> std::path::PathBuf {
    crate::cluster::fixture_dir()
}

/// The masters and workers of an install: `MASTERS` masters right away (the first Debian's
/// Ignition when `real_ignition`), booting long enough that their Nodes register once the API
/// is up; `knobs.machines - MASTERS` workers from `workers_at` on, spread over the arrival
/// window, every tenth over the plain port.
fn machines(knobs: &Knobs, workers_at: Duration, boot_masters: Duration) -> Vec<Machine> {
    let mut rng = plan::Rng::new(knobs.seed);
    let workers = knobs.machines.saturating_sub(MASTERS).max(1);
    let window = knobs.burst + knobs.trickle;
    let mut out = Vec::new();
    for index in 0..MASTERS + workers {
        let master = index < MASTERS;
        let (pool, arrives, boot) = if master {
            (
                Pool::Master,
                Duration::from_millis(300 * index as u64),
                boot_masters,
            )
        } else {
            let k = index - MASTERS;
            let step = window.as_secs_f64() / workers as f64;
            (
                Pool::Worker,
                workers_at + Duration::from_secs_f64(step * k as f64),
                knobs.boot.mul_f64(0.5 + rng.unit()),
            )
        };
        let client = if master && index == 0 && knobs.real_ignition {
            Client::RealIgnition
        } else if !master && rng.below(10) == 0 {
            Client::Plain
        } else {
            Client::Tls
        };
        let name = match (pool, client) {
            (_, Client::RealIgnition) => format!("master-ignition-{index}"),
            (Pool::Master, _) => format!("master-{index}"),
            _ => format!("worker-i{index:04}"),
        };
        out.push(Machine {
            index,
            name,
            pool,
            address: plan::machine_address(index),
            release: RELEASES[rng.below(RELEASES.len())],
            client,
            arrives,
            fate: Fate::Joins,
            boot,
        });
    }
    out
}

/// The bootstrap server's arguments: the installer's, the records flag, and the PROXY header the
/// balancer sends.
fn bootstrap_args(records_kubeconfig: &Path, records_dir: &Path) -> Vec<String> {
    let dir = fixture();
    vec![
        "bootstrap".into(),
        format!("--server-basedir={}", dir.display()),
        format!(
            "--bootstrap-kubeconfig={}",
            dir.join("kubeconfig").display()
        ),
        "--payload-version=4.22.0-0.rehearsal".into(),
        format!(
            "--served-records-kubeconfig={}",
            records_kubeconfig.display()
        ),
        format!("--served-records-dir={}", records_dir.display()),
        "--proxy-protocol-from".into(),
        format!("{}/32", plan::BALANCER_ADDRESS),
    ]
}

/// The rendered config and spec of a fixture pool's config (what a master asks for).
fn fixture_master_spec() -> Result<String, String> {
    let dir = fixture().join("machine-configs");
    for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if !path.display().to_string().contains("rendered-master") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let value: Value = serde_yaml::from_str(&text).map_err(|e| e.to_string())?;
        if let Some(version) = value["spec"]["config"]["ignition"]["version"].as_str() {
            return Ok(version.to_string());
        }
    }
    Err("the fixture has no rendered master config".into())
}

/// One master's life: its fetch from whoever the balancer sends it to, then, once the API is
/// up (the kubelet registers with the bootstrap node's API server), its Node.
async fn live_master(
    plan: Machine,
    api: Arc<ApiServer>,
    balancer: Balancer,
    config_spec: String,
    api_up: tokio::sync::watch::Receiver<bool>,
    t0: Instant,
    give_up: Instant,
) -> MachineRun {
    tokio::time::sleep_until((t0 + plan.arrives).into()).await;
    let mut run = MachineRun::new(plan.clone());
    if plan.client == Client::RealIgnition {
        engine::real_ignition_fetch(&mut run, &balancer, &config_spec, t0, give_up).await;
    } else {
        run.fetch = super::machine::fetch_config(&plan, &balancer, t0, give_up).await;
        run.read_served();
    }
    if run.served.is_none() {
        return run;
    }
    tokio::time::sleep(plan.boot).await;
    let mut api_up = api_up;
    if api_up.wait_for(|up| *up).await.is_err() {
        return run;
    }
    let boot_id = format!("boot-{}-1", plan.name);
    let (name, address, id) = (plan.name.clone(), plan.address, boot_id.clone());
    let registered = tokio::task::spawn_blocking(move || {
        cluster::register(&api, &name, Pool::Master, address, &id)
    })
    .await
    .unwrap_or_else(|e| Err(format!("blocking task: {e}")));
    match registered {
        Ok(()) => run.joined = Some((t0.elapsed(), boot_id)),
        Err(e) => run.trouble = Some(e),
    }
    run
}

/// The bootstrap key's records in the API: `(address, pool, rendered config)`, sorted.
fn key_records(api: &ApiServer) -> Vec<(String, String, String)> {
    let Some(object) = api.get(
        "ConfigMap",
        Some(crate::cluster::MCO_NAMESPACE),
        exchange::DEFAULT_NAME,
    ) else {
        return Vec::new();
    };
    let Some(text) = object["data"][BOOTSTRAP_SERVER_KEY].as_str() else {
        return Vec::new();
    };
    let mut records: Vec<(String, String, String)> = exchange::decode(text)
        .unwrap_or_default()
        .into_iter()
        .map(|(address, record)| {
            (
                address.to_string(),
                record.pool.clone(),
                record.rendered_config.clone(),
            )
        })
        .collect();
    records.sort();
    records
}

/// The master config at the fixture's spec from the bootstrap server and from a replica,
/// compared file by file (their node annotations name the rendered config).
fn compare_modes(bootstrap: &Server, replica: &Server, spec: &str) -> ModeComparison {
    let accept = format!("application/vnd.coreos.ignition+json;version={spec}, */*;q=0.1");
    let fetch = |server: &Server| {
        crate::mcs::try_request(
            server.insecure,
            None,
            "GET",
            "/config/master",
            &[("Accept", accept.as_str())],
        )
        .ok()
        .filter(|r| r.status == 200)
        .and_then(|r| serde_json::from_slice::<Value>(&r.body).ok())
    };
    let (Some(a), Some(b)) = (fetch(bootstrap), fetch(replica)) else {
        return ModeComparison {
            spec: spec.to_string(),
            other_differences: vec!["one of the servers gave no 200".into()],
            ..ModeComparison::default()
        };
    };
    let rendered = |config: &Value| {
        Served::read(config, Duration::ZERO)
            .map(|s| s.rendered_config)
            .unwrap_or_default()
    };
    let files = |config: &Value| -> BTreeMap<String, Vec<u8>> {
        crate::mcs::served_files(config).into_iter().collect()
    };
    let (fa, fb) = (files(&a), files(&b));
    let mut differing_files = Vec::new();
    for path in fa.keys().chain(fb.keys()) {
        if fa.get(path) != fb.get(path) && !differing_files.contains(path) {
            differing_files.push(path.clone());
        }
    }
    // Everything but the files (units, users, kernel arguments, the spec): the same.
    let without_files = |mut config: Value| {
        if let Some(storage) = config.get_mut("storage").and_then(Value::as_object_mut) {
            storage.remove("files");
        }
        config
    };
    let mut other_differences = Vec::new();
    if without_files(a.clone()) != without_files(b.clone()) {
        other_differences.push("units, users, kernel arguments or the spec differ".into());
    }
    ModeComparison {
        spec: spec.to_string(),
        bootstrap_config: rendered(&a),
        cluster_config: rendered(&b),
        differing_files,
        other_differences,
    }
}

/// The `pod` label of the bootstrap server's metrics (the static pod on the bootstrap node).
const BOOTSTRAP_POD: &str = "bootstrap-machine-config-server";

/// The install, played and judged ([`super::run`]).
pub(super) fn run(knobs: &Knobs) -> Result<Outcome, String> {
    engine::check_tools(knobs)?;
    let config_spec = fixture_master_spec()?;
    let api = Arc::new(ApiServer::start(Options {
        history_limit: 100_000,
        cluster_namespaces: false,
        ..Options::default()
    }));
    let api_name = if api.is_real() {
        "a real kube-apiserver"
    } else {
        "the in-test API server"
    };
    eprintln!("rehearsal (install): API server: {api_name}");

    // The stage: the bootstrap server's and the replicas' ports, the balancer in front of all.
    let ports: Vec<Ports> = (0..=REPLICAS).map(|_| Ports::free()).collect();
    let api_path = FaultProxy::start(api.kubeconfig_file());
    api_path.set(Fault::Resets);
    let records_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let args = bootstrap_args(api_path.kubeconfig_file(), records_dir.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = [("RUST_LOG", "info")];
    let bootstrap_server = Server::start_on_binary(knobs.binary.as_deref(), ports[0], &args, &env)
        .map_err(|output| format!("the bootstrap server did not start:\n{output}"))?;
    let backends: Vec<(SocketAddr, SocketAddr)> = ports
        .iter()
        .map(|p| {
            (
                SocketAddr::from(([127, 0, 0, 1], p.secure)),
                SocketAddr::from(([127, 0, 0, 1], p.insecure)),
            )
        })
        .collect();
    let (haproxy, balancer) = engine::balancer_for(&backends);
    let targets = engine::scrape_targets(
        &ports
            .iter()
            .enumerate()
            .map(|(index, p)| {
                let pod = match index {
                    0 => BOOTSTRAP_POD.to_string(),
                    _ => super::pod_name(index - 1),
                };
                (pod, p.metrics)
            })
            .collect::<Vec<_>>(),
    );
    let watch = dashboard::Watch::start(knobs.prometheus, &targets)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let stop = StopFlag::new();
    let _stop_on_exit = stop.set_on_drop();
    // The day's moments, from the start.
    let window = knobs.burst + knobs.trickle;
    let restart_at = Duration::from_millis(2500);
    let api_up_at = Duration::from_millis(4000);
    let namespace_at = Duration::from_millis(5000);
    let objects_at = Duration::from_millis(7000);
    let workers_at = Duration::from_millis(10_000);
    let drain_at = workers_at + window.mul_f64(0.5);
    let plan = machines(knobs, workers_at, Duration::from_millis(3000));
    if let Some(watch) = &watch {
        watch.settle();
    }
    let t0 = Instant::now();
    let give_up = t0 + workers_at + window + knobs.deadline;
    let (monitor, mcn_complete) = engine::watch_mcn_records(api.clone(), stop.clone(), t0);
    let (api_up_tx, api_up) = tokio::sync::watch::channel(false);
    let mut masters = Vec::new();
    let mut workers = Vec::new();
    for machine in plan.iter().filter(|m| m.pool == Pool::Master).cloned() {
        let (api, balancer) = (api.clone(), balancer.clone());
        masters.push(runtime.spawn(live_master(
            machine,
            api,
            balancer,
            config_spec.clone(),
            api_up.clone(),
            t0,
            give_up,
        )));
    }
    let mut marks = Marks::default();
    let mark = |marks: &mut Marks, label: &str| {
        let at = t0.elapsed();
        eprintln!("rehearsal (install): {label} at {:.1} s", at.as_secs_f64());
        marks.phases.push((at, label.to_string()));
    };
    let at = |moment: Duration| {
        if let Some(wait) = (t0 + moment).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    };
    mark(&mut marks, "bootstrap server up, API down");

    // The static pod restarts once before the API is up; the file keeps what it served.
    at(restart_at);
    let mut bootstrap_server = bootstrap_server;
    let served_before_restart: Vec<String> = plan
        .iter()
        .filter(|m| m.pool == Pool::Master && m.arrives < restart_at)
        .map(|m| m.name.clone())
        .collect();
    bootstrap_server.kill();
    let kill = Kill {
        before: None,
        killed_at: Some(t0.elapsed()),
        restarted_at: None,
    };
    bootstrap_server
        .restart()
        .map_err(|e| format!("the bootstrap server did not restart: {e}"))?;
    let kill = Kill {
        restarted_at: Some(t0.elapsed()),
        ..kill
    };
    mark(&mut marks, "bootstrap restarted");

    at(api_up_at);
    api_path.set(Fault::None);
    let _ = api_up_tx.send(true);
    mark(&mut marks, "API up");
    at(namespace_at);
    api.apply_object(&serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": crate::cluster::MCO_NAMESPACE}
    }))
    .map_err(|e| format!("namespace: {e}"))?;
    mark(&mut marks, "namespace");
    // What the bootstrap server wrote, once the API took it (the Lease holder removes the key
    // once every master's MCN carries its record, so it is read before the replicas start).
    let served_masters = plan.iter().filter(|m| m.pool == Pool::Master).count();
    let key_held =
        crate::mcs::poll_every(Duration::from_millis(100), Duration::from_secs(15), || {
            let records = key_records(&api);
            (records.len() >= served_masters).then_some(records)
        })
        .unwrap_or_else(|| key_records(&api));
    mark(&mut marks, "bootstrap records in the API");

    // The cluster's objects, as the bootstrap manifests create them.
    at(objects_at);
    let loaded = cluster::load_objects(&api)?;
    mark(&mut marks, "cluster objects");
    let tokens = crate::cluster::token_dir();
    let mut replicas: Vec<Replica> = Vec::new();
    for index in 0..REPLICAS {
        // The MCO's DaemonSet's flags (no failure reports advertised: the bootstrap server
        // does not advertise them either, and both modes must serve the same config).
        replicas.push(engine::start_replica(
            &api,
            knobs,
            tokens.path(),
            index,
            Some(ports[index + 1]),
            &[],
            &[],
        )?);
    }
    for replica in &replicas {
        replica
            .server
            .wait_every_pool_ready(Duration::from_secs(60));
    }
    mark(&mut marks, "replicas up");
    let comparison = compare_modes(&bootstrap_server, &replicas[0].server, &config_spec);

    // Workers, some of them reaching the bootstrap server first.
    for machine in plan.iter().filter(|m| m.pool != Pool::Master).cloned() {
        let (api, balancer, before) = (api.clone(), balancer.clone(), loaded.clone());
        workers.push(runtime.spawn(engine::live_machine(
            machine, api, balancer, before, t0, give_up,
        )));
    }
    at(drain_at);
    haproxy
        .set_state(0, "maint")
        .map_err(|e| format!("draining the bootstrap server: {e}"))?;
    mark(&mut marks, "bootstrap drained");
    bootstrap_server.terminate();
    bootstrap_server.wait_exit(Duration::from_secs(30));
    mark(&mut marks, "bootstrap gone");

    let machines: Vec<MachineRun> = runtime.block_on(async {
        let mut out = Vec::new();
        for task in masters.into_iter().chain(workers) {
            out.push(
                task.await
                    .map_err(|e| format!("a machine's task failed: {e}"))?,
            );
        }
        Ok::<_, String>(out)
    })?;
    let storm = t0.elapsed();
    // When the masters were served and their Nodes registered, from what they went through.
    let last = |f: &dyn Fn(&MachineRun) -> Option<Duration>| {
        machines
            .iter()
            .filter(|m| m.plan.pool == Pool::Master)
            .filter_map(f)
            .max()
    };
    if let Some(at) = last(&|m| m.served.as_ref().map(|s| s.at)) {
        marks.phases.push((at, "masters served".into()));
    }
    if let Some(at) = last(&|m| m.joined.as_ref().map(|(at, _)| *at)) {
        marks.phases.push((at, "masters' Nodes registered".into()));
    }
    marks.phases.sort_by_key(|(at, _)| *at);
    let settle_started = Instant::now();
    engine::wait_for_mcns(&api, &machines, give_up + Duration::from_secs(1));
    std::thread::sleep(Duration::from_secs(2));
    let settle_wait = settle_started.elapsed();
    stop.set();
    let _ = monitor.join();

    let mut replica_runs = engine::replica_runs(&replicas, &vec![Kill::default(); REPLICAS], t0);
    let bootstrap_run = ReplicaRun::finished(
        BOOTSTRAP_SERVER_KEY,
        &bootstrap_server,
        &api_path,
        &kill,
        t0,
    );
    replica_runs.insert(0, bootstrap_run.clone());
    marks.balancer = haproxy
        .state_changes()
        .into_iter()
        .map(|(at, change)| (at.saturating_duration_since(t0), change))
        .collect();
    let connections = haproxy
        .connections()
        .into_iter()
        .map(|c| (c.seen.saturating_duration_since(t0), c))
        .collect();
    let records = api.get(
        "ConfigMap",
        Some(crate::cluster::MCO_NAMESPACE),
        exchange::DEFAULT_NAME,
    );
    let key_removed = key_records(&api).is_empty();
    let facts = Facts {
        knobs: knobs.clone(),
        api: api_name,
        before: loaded,
        machines,
        marks,
        replicas: replica_runs,
        connections,
        mcns: engine::mcns_by_name(&api),
        foreign_mcns: BTreeMap::new(),
        firstboot_events: Vec::new(),
        records,
        mcn_complete: mcn_complete.lock().unwrap().clone(),
        storm,
        settle_wait,
        install: Some(InstallFacts {
            bootstrap: bootstrap_run,
            key_held,
            served_before_restart,
            comparison,
            key_removed,
            masters_addresses: plan
                .iter()
                .filter(|m| m.pool == Pool::Master)
                .map(|m| IpAddr::V4(m.address))
                .collect(),
        }),
        switch: None,
        operator: watch.as_ref().map(|w| w.read(&targets, t0)),
        // compare_modes asked the bootstrap server and a replica for the master config.
        rotation: None,
        own_answers: [("master".to_string(), 2)].into_iter().collect(),
    };
    let verdicts = verdict::judge(&facts);
    let written = report::write(&facts, &verdicts)?;
    drop(haproxy);
    drop(replicas);
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(Outcome {
        facts,
        verdicts,
        written,
    })
}
