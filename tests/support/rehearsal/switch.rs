//! The switch (`MCS_REHEARSAL_SCENARIO=switch`): the original replaced by this server replica by
//! replica during a scale-up, and switched back, as an operator who adopts it lives it.
//!
//! Three replicas of the original (`MCS_REHEARSAL_ORIGINAL`; the test tier's stand-in is this
//! server under the MCO's own rights only, which answers as the original) run with the MCO's
//! DaemonSet arguments under its ServiceAccount, behind haproxy keeping the machines' addresses
//! (transparent source: the original speaks no PROXY protocol, and nobody's flags change). The
//! storm of the scale-up starts (the cluster's state held still, so that every answer has one
//! right body); at 20% of the arrival window the DaemonSet's rolling update replaces them one at
//! a time exactly as the kubelet does it (the old pod gets SIGTERM and its grace period, the
//! balancer's health checks take it out, the new pod starts on the same ports with the same
//! arguments and becomes ready, then the next); at 60% the same rolling update back. `compare
//! --against` the original runs before the first switch and after the last one; at the end the
//! `cleanup` subcommand lists, removes, and lists nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::engine;
use super::machine::Balancer;
use super::{
    cluster, plan, report, verdict, Facts, Knobs, MachineRun, Marks, Outcome, ReplicaRun,
    ServerKind, Step, SwitchFacts, APISERVER_URL, CIPHER_SUITES, REPLICAS,
};
use crate::api_server::{ApiServer, Options};
use crate::fault_proxy::FaultProxy;
use crate::haproxy::{Balance, Check, Haproxy, Source};
use crate::mcs::{Ports, Server, StopFlag};

/// The original reads its token from this fixed path (no flag names it).
const ORIGINAL_TOKEN_DIR: &str = "/etc/mcs/bootstrap-token";
/// The ServiceAccount the stand-in original runs as: bound to the MCO's ClusterRole only.
const STAND_IN_ACCOUNT: &str = "machine-config-server-original";
/// The DaemonSet's `terminationGracePeriodSeconds` as this rehearsal plays it (the kubelet
/// SIGKILLs a pod still running after it).
const GRACE: Duration = Duration::from_secs(10);

/// One replica's pod over the day: which server runs on its ports, from when.
struct Slot {
    ports: Ports,
    server: Server,
    kind: ServerKind,
    /// From the start of the storm: when each server began to run there.
    history: Vec<(Duration, ServerKind)>,
    /// Our server's API path (its fault proxy), once it ran.
    proxy: Option<FaultProxy>,
    /// What the pods this slot ran before the current one printed, each under a header.
    earlier_output: String,
}

/// How each kind of server runs: the binary, and its arguments on a slot's ports.
struct Launch {
    original: PathBuf,
    ours: Option<PathBuf>,
    stand_in: bool,
    /// The stand-in's admin listener, per replica: a port of its own, so that Prometheus
    /// tells its processes from ours on the same serving ports.
    stand_in_metrics: Vec<u16>,
    /// The MCO's ServiceAccount's kubeconfig (the original's, and ours).
    kubeconfig: PathBuf,
    /// The stand-in original's (the MCO's ClusterRole only).
    stand_in_kubeconfig: PathBuf,
    tokens: PathBuf,
    api: Arc<ApiServer>,
}

impl Launch {
    /// The MCO's DaemonSet's arguments, on `ports`. This server also gets its token directory
    /// (the original's is a fixed path) and an admin listener of its own (all replicas share
    /// one host here; on a cluster each is on its node's loopback).
    fn args(&self, kind: ServerKind, ports: Ports, kubeconfig: &Path) -> Vec<String> {
        let mut args = vec![
            "start".to_string(),
            format!("--apiserver-url={APISERVER_URL}"),
            "--payload-version=4.22.0-0.rehearsal".into(),
            format!("--tls-cipher-suites={CIPHER_SUITES}"),
            "--tls-min-version=VersionTLS12".into(),
            "--v=2".into(),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--secure-port={}", ports.secure),
            format!("--insecure-port={}", ports.insecure),
        ];
        let certs = crate::mcs::repo().join("certs");
        args.push(format!("--cert={}", certs.join("tls.crt").display()));
        args.push(format!("--key={}", certs.join("tls.key").display()));
        let ours = kind == ServerKind::Ours || self.stand_in;
        if ours {
            args.push(format!("--bootstrap-token-dir={}", self.tokens.display()));
            args.push(format!(
                "--metrics-bind-address=127.0.0.1:{}",
                ports.metrics
            ));
        }
        args
    }

    /// Starts `kind` on `ports` as replica `index` (its node's name in `NODE_NAME`, as our
    /// DaemonSet passes it; the MCO's passes none and the host name stands for it).
    fn start(
        &self,
        kind: ServerKind,
        index: usize,
        ports: Ports,
    ) -> Result<(Server, Option<FaultProxy>), String> {
        let env = engine::replica_env(index, None);
        let (binary, kubeconfig, proxy) = match kind {
            ServerKind::Original if self.stand_in => (
                self.ours.clone().unwrap_or_else(crate::mcs::bin),
                self.stand_in_kubeconfig.clone(),
                None,
            ),
            ServerKind::Original => (self.original.clone(), self.kubeconfig.clone(), None),
            ServerKind::Ours => {
                let proxy = FaultProxy::start(&self.kubeconfig);
                (
                    self.ours.clone().unwrap_or_else(crate::mcs::bin),
                    proxy.kubeconfig_file().to_path_buf(),
                    Some(proxy),
                )
            }
        };
        let ports = match kind {
            ServerKind::Original if self.stand_in => Ports {
                metrics: self.stand_in_metrics[index],
                ..ports
            },
            _ => ports,
        };
        let args = self.args(kind, ports, &kubeconfig);
        let mut last = String::new();
        // The port may still be held a moment by the process that left it.
        for _ in 0..20 {
            match Server::start_exact(&binary, ports, &args, &env) {
                Ok(server) => return Ok((server, proxy)),
                Err(output)
                    if output.contains("address already in use")
                        || output.contains("cannot listen") =>
                {
                    last = output;
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(output) => {
                    return Err(format!("{kind:?} replica {index} did not start:\n{output}"))
                }
            }
        }
        let _ = &self.api;
        Err(format!(
            "{kind:?} replica {index} could not bind its ports:\n{last}"
        ))
    }
}

/// The ServiceAccount's kubeconfig for `account`, bound to the MCO's ClusterRole (and, for the
/// server's own account, the extras when `extras`).
fn account_kubeconfig(
    api: &ApiServer,
    account: &str,
    dir: &Path,
    extras: bool,
) -> Result<PathBuf, String> {
    let namespace = crate::cluster::MCO_NAMESPACE;
    let repo = crate::mcs::repo();
    if account == STAND_IN_ACCOUNT {
        api.apply_object(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace}}))
            .map_err(|e| e.to_string())?;
        api.apply_object(&json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": account},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "machine-config-server"},
            "subjects": [{"kind": "ServiceAccount", "namespace": namespace, "name": account}]
        }))
        .map_err(|e| e.to_string())?;
    } else {
        api.load_yaml_file(repo.join("config/deploy/serviceaccount.yaml"))?;
        api.load_yaml_file(repo.join("tests/fixtures/mco/clusterrole.yaml"))?;
        if extras {
            api.load_yaml_file(repo.join("config/deploy/extras/rbac.yaml"))?;
        }
    }
    let token = api
        .token_for(namespace, account)
        .map_err(|e| e.to_string())?;
    let path = dir.join(format!("{account}.kubeconfig"));
    std::fs::write(&path, api.kubeconfig_with_token(&token)).map_err(|e| e.to_string())?;
    Ok(path)
}

/// The original's token directory: its fixed path, filled from the harness's when missing.
fn original_tokens(tokens: &Path) -> Result<(), String> {
    let dir = Path::new(ORIGINAL_TOKEN_DIR);
    for file in ["token", "ca.crt"] {
        if !dir.join(file).exists() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{ORIGINAL_TOKEN_DIR}: {e}"))?;
            std::fs::copy(tokens.join(file), dir.join(file))
                .map_err(|e| format!("{ORIGINAL_TOKEN_DIR}/{file}: {e}"))?;
        }
    }
    Ok(())
}

/// The specs machines ask for, as `Accept` headers (`None`: no header, spec 2.2).
fn accept_of(spec: &str) -> Option<String> {
    (spec != "2.2.0")
        .then(|| format!("application/vnd.coreos.ignition+json;version={spec}, */*;q=0.1"))
}

/// What a server answers every `(pool, spec)` machines asked: status and body.
fn answers(server: &Server, asked: &[(String, String)]) -> BTreeMap<(String, String), Vec<u8>> {
    asked
        .iter()
        .filter_map(|(pool, spec)| {
            let accept = accept_of(spec);
            let headers: Vec<(&str, &str)> = accept
                .as_deref()
                .map(|a| ("Accept", a))
                .into_iter()
                .collect();
            let response = crate::mcs::try_request(
                server.insecure,
                None,
                "GET",
                &format!("/config/{pool}"),
                &headers,
            )
            .ok()?;
            (response.status == 200).then(|| ((pool.clone(), spec.clone()), response.body))
        })
        .collect()
}

/// `compare --against` the original on `against` from this server's view of the cluster.
fn compare(launch: &Launch, against: SocketAddr, label: &str) -> Step {
    let binary = launch.ours.clone().unwrap_or_else(crate::mcs::bin);
    let output = std::process::Command::new(binary)
        .arg("compare")
        .arg(format!("--against=http://{against}"))
        .arg(format!("--kubeconfig={}", launch.kubeconfig.display()))
        .arg(format!("--apiserver-url={APISERVER_URL}"))
        .arg(format!("--bootstrap-token-dir={}", launch.tokens.display()))
        .output();
    Step::of(label, output)
}

/// `cleanup` (dry run, or `--remove`) with the server's own account's rights plus the cleanup
/// rights (an admin's kubeconfig here).
fn cleanup(api: &ApiServer, label: &str, remove: bool) -> Step {
    let mut command = std::process::Command::new(crate::mcs::bin());
    command
        .arg("cleanup")
        .arg(format!("--kubeconfig={}", api.kubeconfig_file().display()));
    if remove {
        command.arg("--remove");
    }
    Step::of(label, command.output())
}

/// The switch, played and judged ([`super::run`]).
pub(super) fn run(knobs: &Knobs) -> Result<Outcome, String> {
    engine::check_tools(knobs)?;
    let stand_in = knobs.original.is_none();
    if stand_in && !knobs.stand_in_original {
        return Err("the switch needs the original: set MCS_REHEARSAL_ORIGINAL to its binary (built from openshift/machine-config-operator, see benches/README.md)".into());
    }
    let knobs_plan = Knobs {
        failure_percent: 0.0,
        ..knobs.clone()
    };
    let machines_plan = plan::machines(&knobs_plan);
    let api = Arc::new(ApiServer::start(Options {
        history_limit: 100_000,
        ..Options::default()
    }));
    let api_name = if api.is_real() {
        "a real kube-apiserver"
    } else {
        "the in-test API server"
    };
    eprintln!(
        "rehearsal (switch): API server: {api_name}; the original: {}",
        knobs.original.as_ref().map_or(
            "this server under the MCO's rights (stand-in)".to_string(),
            |p| p.display().to_string()
        )
    );
    let before = cluster::load(&api)?;
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let kubeconfig = account_kubeconfig(&api, "machine-config-server", work.path(), knobs.extras)?;
    let stand_in_kubeconfig = if stand_in {
        account_kubeconfig(&api, STAND_IN_ACCOUNT, work.path(), false)?
    } else {
        kubeconfig.clone()
    };
    let tokens = crate::cluster::token_dir();
    if !stand_in {
        original_tokens(tokens.path())?;
    }
    let launch = Launch {
        original: knobs.original.clone().unwrap_or_default(),
        ours: knobs.binary.clone(),
        stand_in,
        stand_in_metrics: (0..REPLICAS).map(|_| crate::mcs::free_port()).collect(),
        kubeconfig,
        stand_in_kubeconfig,
        tokens: tokens.path().to_path_buf(),
        api: api.clone(),
    };
    let ports: Vec<Ports> = (0..REPLICAS).map(|_| Ports::free()).collect();
    let mut slots = Vec::new();
    for (index, ports) in ports.iter().enumerate() {
        let (server, proxy) = launch.start(ServerKind::Original, index, *ports)?;
        slots.push(Slot {
            ports: *ports,
            server,
            kind: ServerKind::Original,
            history: vec![(Duration::ZERO, ServerKind::Original)],
            proxy,
            earlier_output: String::new(),
        });
    }
    for slot in &slots {
        wait_ready(&slot.server)?;
    }
    // This server's pods by balancer backend, then the stand-in's (this server too, on ports
    // of their own: `<pod>-stand-in`).
    let mut backends: Vec<(String, u16)> = ports
        .iter()
        .enumerate()
        .map(|(index, p)| (super::pod_name(index), p.metrics))
        .collect();
    if stand_in {
        backends.extend(
            launch
                .stand_in_metrics
                .iter()
                .enumerate()
                .map(|(index, port)| (format!("{}-stand-in", super::pod_name(index)), *port)),
        );
    }
    let targets = engine::scrape_targets(&backends);
    let watch = super::dashboard::Watch::start(knobs.prometheus, &targets)?;
    let haproxy = Haproxy::balance_from(
        &[
            Balance {
                backends: slots.iter().map(|s| s.server.secure).collect(),
                check: Check::Https,
            },
            Balance {
                backends: slots.iter().map(|s| s.server.insecure).collect(),
                check: Check::Http,
            },
        ],
        Source::ClientAddress,
    );
    let balancer = Balancer {
        tls: haproxy.frontends[0],
        plain: haproxy.frontends[1],
        client_config: crate::mcs::dev_ca_client(),
    };
    // Before anything changes: what the original answers, and compare's verdict.
    let asked: Vec<(String, String)> = {
        let mut asked: Vec<(String, String)> = machines_plan
            .iter()
            .map(|m| {
                (
                    m.pool.name().to_string(),
                    super::verdict::expected_spec(
                        plan::newest_stable_spec(m.release.version).unwrap_or("2.2.0"),
                        &before.config_spec,
                    ),
                )
            })
            .collect();
        asked.sort();
        asked.dedup();
        asked
    };
    let reference = answers(&slots[0].server, &asked);
    let mut steps = vec![compare(
        &launch,
        slots[0].server.insecure,
        "compare before the switch",
    )];

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let stop = StopFlag::new();
    let _stop_on_exit = stop.set_on_drop();
    if let Some(watch) = &watch {
        watch.settle();
    }
    let t0 = Instant::now();
    let window = knobs.burst + knobs.trickle;
    let give_up = t0 + window + knobs.deadline;
    let (monitor, mcn_complete) = engine::watch_mcn_records(api.clone(), stop.clone(), t0);
    let tasks: Vec<_> = machines_plan
        .iter()
        .cloned()
        .map(|machine| {
            let (api, balancer, before) = (api.clone(), balancer.clone(), before.clone());
            runtime.spawn(engine::live_machine(
                machine, api, balancer, before, t0, give_up,
            ))
        })
        .collect();
    let mut marks = Marks::default();
    let at = |fraction: f64| {
        if let Some(wait) = (t0 + window.mul_f64(fraction)).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    };
    at(plan::SWITCH_TO_AT);
    rolling_update(
        &launch,
        &mut slots,
        ServerKind::Ours,
        (t0, knobs.drain),
        &mut marks,
    )?;
    at(plan::SWITCH_BACK_AT);
    rolling_update(
        &launch,
        &mut slots,
        ServerKind::Original,
        (t0, knobs.drain),
        &mut marks,
    )?;

    let machines: Vec<MachineRun> = runtime.block_on(async {
        let mut out = Vec::new();
        for task in tasks {
            out.push(
                task.await
                    .map_err(|e| format!("a machine's task failed: {e}"))?,
            );
        }
        Ok::<_, String>(out)
    })?;
    let storm = t0.elapsed();
    let settle_started = Instant::now();
    if knobs.extras {
        engine::wait_for_switched_mcns(&api, &machines, give_up + Duration::from_secs(1));
    }
    std::thread::sleep(Duration::from_secs(2));
    let settle_wait = settle_started.elapsed();
    stop.set();
    let _ = monitor.join();

    // Switched back, everything this server wrote still there: the original's answers, compare.
    let after = answers(&slots[0].server, &asked);
    steps.push(compare(
        &launch,
        slots[0].server.insecure,
        "compare after switching back",
    ));
    let mcns = engine::mcns_by_name(&api);
    let records = api.get(
        "ConfigMap",
        Some(crate::cluster::MCO_NAMESPACE),
        machine_config_server::mcn::exchange::DEFAULT_NAME,
    );
    // The way back: what is left, removed, and nothing left.
    steps.push(cleanup(&api, "cleanup (dry run)", false));
    steps.push(cleanup(&api, "cleanup --remove", true));
    steps.push(cleanup(&api, "cleanup (dry run, again)", false));
    let after_cleanup = answers(&slots[0].server, &asked);

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
    let replicas: Vec<ReplicaRun> = slots
        .iter()
        .enumerate()
        .map(|(index, slot)| {
            let proxy = slot.proxy.as_ref();
            let mut run = match proxy {
                Some(proxy) => ReplicaRun::finished(
                    &super::replica_name(index),
                    &slot.server,
                    proxy,
                    &engine::Kill::default(),
                    t0,
                ),
                None => ReplicaRun::named(&super::replica_name(index), &slot.server),
            };
            run.name = super::replica_name(index);
            run.output = format!(
                "{}===== {} (the last) =====\n{}",
                slot.earlier_output,
                slot.kind.label(),
                run.output
            );
            run
        })
        .collect();
    let facts = Facts {
        knobs: knobs.clone(),
        api: api_name,
        before,
        machines,
        marks,
        replicas,
        connections,
        mcns,
        foreign_mcns: BTreeMap::new(),
        firstboot_events: Vec::new(),
        records,
        mcn_complete: mcn_complete.lock().unwrap().clone(),
        storm,
        settle_wait,
        install: None,
        operator: watch.as_ref().map(|w| w.read(&targets, t0)),
        rotation: None,
        own_answers: BTreeMap::new(),
        switch: Some(SwitchFacts {
            stand_in,
            extras: knobs.extras,
            history: slots.iter().map(|s| s.history.clone()).collect(),
            reference,
            after,
            after_cleanup,
            steps,
        }),
    };
    let verdicts = verdict::judge(&facts);
    let written = report::write(&facts, &verdicts)?;
    drop(haproxy);
    drop(slots);
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(Outcome {
        facts,
        verdicts,
        written,
    })
}

/// Waits until `server` answers `/healthz` on both ports and, when it is this server, every
/// pool is ready (the original has no readiness page: its `/healthz` is what the balancer and
/// the kubelet see).
fn wait_ready(server: &Server) -> Result<(), String> {
    crate::mcs::poll_every(Duration::from_millis(100), Duration::from_secs(60), || {
        let plain = crate::mcs::try_request(server.insecure, None, "GET", "/healthz", &[]).ok()?;
        let tls = crate::mcs::try_request(
            server.secure,
            Some(crate::mcs::dev_ca_client()),
            "GET",
            "/healthz",
            &[],
        )
        .ok()?;
        (plain.status == 200 && tls.status == 200).then_some(())
    })
    .ok_or_else(|| format!("a replica never became healthy:\n{}", server.output()))?;
    if crate::mcs::try_request(server.metrics, None, "GET", "/readyz", &[]).is_ok() {
        server.wait_every_pool_ready(Duration::from_secs(60));
    }
    Ok(())
}

/// The DaemonSet's rolling update to `to`, one replica at a time: SIGTERM, the grace period
/// (then SIGKILL, as the kubelet), the new pod on the same ports with the same arguments,
/// ready, then the next. Without `drain`, the old pod is SIGKILLed at once (force-deleted).
fn rolling_update(
    launch: &Launch,
    slots: &mut [Slot],
    to: ServerKind,
    (t0, drain): (Instant, bool),
    marks: &mut Marks,
) -> Result<(), String> {
    for (index, slot) in slots.iter_mut().enumerate() {
        if slot.kind == to {
            continue;
        }
        if drain {
            slot.server.terminate();
        } else {
            slot.server.kill();
        }
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline && !slot.server.exited() {
            std::thread::sleep(Duration::from_millis(50));
        }
        if !slot.server.exited() {
            slot.server.kill();
        }
        // From here until the new pod listens nothing answers on these ports, so whatever
        // answers an attempt that ends after this instant is the new pod.
        let at = t0.elapsed();
        let (server, proxy) = launch.start(to, index, slot.ports)?;
        slot.earlier_output.push_str(&format!(
            "===== {} until {:.1} s =====\n{}",
            slot.kind.label(),
            at.as_secs_f64(),
            slot.server.output()
        ));
        slot.server = server;
        if proxy.is_some() {
            slot.proxy = proxy;
        }
        slot.kind = to;
        slot.history.push((at, to));
        wait_ready(&slot.server)?;
        let label = format!("{} -> {}", super::replica_name(index), to.label());
        eprintln!("rehearsal (switch): {label} at {:.1} s", at.as_secs_f64());
        marks.phases.push((at, label));
    }
    Ok(())
}
