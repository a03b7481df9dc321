//! The scale-up (the default scenario): machines arrive in a burst, a trickle and a second
//! wave while the worker pool rolls out a new rendered config, the layered pool's new image is
//! built and proven, the Lease holder is SIGKILLed and restarted, the API browns out, and the
//! control plane throws its other faults ([`super::faults`]: the API server restarted, a 410
//! relist, the certificate rotated, one replica cut off, one clock ahead).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::engine::{self, Kill, Replica};
use super::FaultKind;
use super::{
    cluster, dashboard, faults, plan, report, verdict, Facts, Knobs, MachineRun, Marks, Outcome,
    REPLICAS,
};
use crate::api_server::{ApiServer, Options};
use crate::mcs::StopFlag;

/// The scale-up, played and judged ([`super::run`]).
pub(super) fn run(knobs: &Knobs) -> Result<Outcome, String> {
    engine::check_tools(knobs)?;
    let plan = plan::machines(knobs);
    let script = plan::script(knobs);

    let api = Arc::new(ApiServer::start(Options {
        history_limit: 100_000,
        ..Options::default()
    }));
    let api_name = if api.is_real() {
        "a real kube-apiserver"
    } else {
        "the in-test API server"
    };
    eprintln!("rehearsal: API server: {api_name}");
    let before = cluster::load(&api)?;
    let foreign_mcns: BTreeMap<String, Value> = engine::mcns_by_name(&api)
        .into_iter()
        .filter(|(name, _)| before.nodes.iter().any(|(node, _)| node == name))
        .collect();
    let tokens = crate::cluster::token_dir();
    let stage = faults::Stage::new(knobs)?;
    let replicas = engine::start_replicas(&api, knobs, tokens.path(), &stage)?;
    let (haproxy, balancer) = engine::start_balancer(&replicas);
    let targets = engine::scrape_targets(
        &replicas
            .iter()
            .enumerate()
            .map(|(index, r)| (super::pod_name(index), r.server.metrics.port()))
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
    if let Some(watch) = &watch {
        watch.settle();
    }
    let t0 = Instant::now();
    let give_up = t0 + knobs.burst + knobs.trickle + knobs.deadline;
    let (monitor, mcn_complete) = engine::watch_mcn_records(api.clone(), stop.clone(), t0);
    let tasks: Vec<_> = plan
        .into_iter()
        .map(|machine| {
            let (api, balancer, before) = (api.clone(), balancer.clone(), before.clone());
            runtime.spawn(engine::live_machine(
                machine, api, balancer, before, t0, give_up,
            ))
        })
        .collect();

    // The cluster's day, on this thread, while the machines live theirs.
    let mut day = Day {
        api: &api,
        before: &before,
        replicas,
        t0,
        marks: Marks::default(),
        kills: vec![Kill::default(); REPLICAS],
        killed: None,
        brownout_began: Duration::ZERO,
        stage: &stage,
        paths: faults::Paths::default(),
        api_stopped: Duration::ZERO,
        cut_began: Duration::ZERO,
        rotation: None,
        break_watches: knobs.break_watches,
    };
    for (at, event) in script.events() {
        if let Some(wait) = (t0 + at).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        day.play(event)?;
    }

    // Every machine done (served, joined, reported), then every MCN settled.
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
    engine::wait_for_mcns(&api, &machines, give_up + Duration::from_secs(1));
    // A moment for what is still on its way (a clearing, a last Event, the records' flush).
    std::thread::sleep(Duration::from_secs(2));
    let settle_wait = settle_started.elapsed();
    stop.set();
    let _ = monitor.join();

    let Day {
        replicas,
        mut marks,
        kills,
        rotation,
        ..
    } = day;
    if stage.clock_ahead().is_some() {
        marks.faults.push(super::FaultMark {
            kind: super::FaultKind::ClockAhead,
            began: Duration::ZERO,
            ended: storm,
            replica: Some(faults::SKEWED_REPLICA),
        });
    }
    let rotation = rotation.map(|seen| seen.lock().unwrap().clone());
    // The rotation's band ends when the last replica presented the new certificate.
    if let Some(last) = rotation
        .as_ref()
        .and_then(|seen| seen.presented.iter().copied().collect::<Option<Vec<_>>>())
        .and_then(|times| times.into_iter().max())
    {
        for fault in &mut marks.faults {
            if fault.kind == super::FaultKind::Rotation {
                fault.ended = last.max(fault.began);
            }
        }
    }
    let replica_runs = engine::replica_runs(&replicas, &kills, t0);
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
    let firstboot_events = api
        .list("events.events.k8s.io")
        .into_iter()
        .filter(|e| {
            e["reportingController"] == machine_config_server::events::REPORTING_CONTROLLER
                && e["reason"] == "FirstbootFailed"
        })
        .collect();
    let records = api.get(
        "ConfigMap",
        Some(crate::cluster::MCO_NAMESPACE),
        machine_config_server::mcn::exchange::DEFAULT_NAME,
    );
    let facts = Facts {
        knobs: knobs.clone(),
        api: api_name,
        before,
        machines,
        marks,
        replicas: replica_runs,
        connections,
        mcns: engine::mcns_by_name(&api),
        foreign_mcns,
        firstboot_events,
        records,
        mcn_complete: mcn_complete.lock().unwrap().clone(),
        storm,
        settle_wait,
        install: None,
        switch: None,
        operator: watch.as_ref().map(|w| w.read(&targets, t0)),
        own_answers: BTreeMap::new(),
        rotation,
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

/// The cluster's side of the day as it is played.
struct Day<'a> {
    api: &'a ApiServer,
    before: &'a cluster::Before,
    replicas: Vec<Replica>,
    t0: Instant,
    marks: Marks,
    kills: Vec<Kill>,
    killed: Option<usize>,
    brownout_began: Duration,
    stage: &'a faults::Stage,
    /// Which fault each replica's API path carries.
    paths: faults::Paths,
    api_stopped: Duration,
    cut_began: Duration,
    rotation: Option<std::sync::Arc<std::sync::Mutex<faults::RotationSeen>>>,
    break_watches: bool,
}

impl Day<'_> {
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    /// Every replica's API path set to what the day's state says it carries now.
    fn apply_paths(&self) {
        for (index, replica) in self.replicas.iter().enumerate() {
            replica.proxy.set(self.paths.fault_of(index));
        }
    }

    fn fault(&mut self, kind: FaultKind, began: Duration, ended: Duration, replica: Option<usize>) {
        self.marks.faults.push(super::FaultMark {
            kind,
            began,
            ended,
            replica,
        });
    }

    /// `f`, and when it began and ended.
    fn timed(
        &self,
        f: impl FnOnce() -> Result<(), String>,
    ) -> Result<Option<(Duration, Duration)>, String> {
        let began = self.now();
        f()?;
        Ok(Some((began, self.now())))
    }

    fn play(&mut self, event: plan::Event) -> Result<(), String> {
        use plan::Event;
        let (api, before) = (self.api, self.before);
        match event {
            Event::BuildStarts => {
                cluster::start_build(api, &before.layered)?;
                self.marks.build_started = Some(self.now());
            }
            Event::Rollout => {
                self.marks.rollout = self.timed(|| cluster::start_worker_rollout(api))?;
            }
            Event::BuildSucceeds => {
                self.marks.build_succeeded = self.timed(|| cluster::build_succeeds(api))?;
            }
            Event::WorkerProof => {
                self.marks.worker_proof =
                    self.timed(|| cluster::prove_worker_rollout(api, "worker-0", &before.worker))?;
            }
            Event::LayeredProof => {
                self.marks.layered_proof = self.timed(|| {
                    cluster::prove_image(api, "layered-0", &before.layered, &before.image)
                })?;
            }
            Event::Kill => {
                // The Lease holder: the replica whose death costs the most.
                let victim = engine::leader(api, &self.replicas).unwrap_or(1);
                let scraped = engine::scrape(&self.replicas[victim].server, self.now());
                self.replicas[victim].server.kill();
                let at = self.now();
                eprintln!(
                    "rehearsal: SIGKILL {} at {:.1} s",
                    self.replicas[victim].name,
                    at.as_secs_f64()
                );
                self.marks.kill = Some(at);
                self.kills[victim].before = scraped;
                self.kills[victim].killed_at = Some(at);
                self.killed = Some(victim);
            }
            Event::Restart => {
                if let Some(victim) = self.killed {
                    let replica = &mut self.replicas[victim];
                    replica
                        .server
                        .restart()
                        .map_err(|e| format!("{} did not restart: {e}", replica.name))?;
                    let at = self.now();
                    self.marks.restarted = Some(at);
                    self.kills[victim].restarted_at = Some(at);
                }
            }
            Event::Brownout(latency) => {
                self.paths.latency = Some(latency);
                self.apply_paths();
                self.brownout_began = self.now();
            }
            Event::BrownoutEnds => {
                self.paths.latency = None;
                self.apply_paths();
                self.marks.brownout = Some((self.brownout_began, self.now()));
            }
            Event::ApiStops => {
                self.api_stopped = self.now();
                eprintln!(
                    "rehearsal: the API server stops at {:.1} s",
                    self.api_stopped.as_secs_f64()
                );
                api.stop();
                // The in-test server's restart keeps its history; a real one's watch cache
                // starts over: a new epoch of resourceVersions, as compaction makes it.
                if !api.is_real() {
                    api.compact();
                }
            }
            Event::ApiStarts => {
                api.restart();
                let ended = self.now();
                eprintln!(
                    "rehearsal: the API server serves again at {:.1} s",
                    ended.as_secs_f64()
                );
                self.fault(FaultKind::ApiRestart, self.api_stopped, ended, None);
                if self.break_watches {
                    // The negative knob: this replica's watches never resume.
                    self.paths.broken = Some(0);
                    self.apply_paths();
                }
            }
            Event::Compaction => {
                let at = self.now();
                api.compact();
                // Every open watch ends with a 410, and every watch from before it gets one
                // (a cut-off or broken path keeps its fault: it relists once it is back).
                for (index, replica) in self.replicas.iter().enumerate() {
                    if self.paths.fault_of(index) == crate::fault_proxy::Fault::None {
                        replica.proxy.set(crate::fault_proxy::Fault::Gone);
                    }
                }
                self.fault(FaultKind::Compaction, at, at + Duration::from_secs(1), None);
            }
            Event::Rotation => {
                let at = self.now();
                let serial = self.stage.rotate()?;
                let secure = self.replicas.iter().map(|r| r.server.secure).collect();
                self.rotation = Some(faults::watch_rotation(secure, serial, self.t0));
                // The band: until the replicas reload (a few seconds; the verdict says when).
                self.fault(FaultKind::Rotation, at, at + Duration::from_secs(3), None);
            }
            Event::CutOff => {
                // A replica that is neither the Lease holder nor the skewed one.
                let leader = engine::leader(api, &self.replicas);
                let victim = [1, 0, 2]
                    .into_iter()
                    .find(|i| Some(*i) != leader && *i != faults::SKEWED_REPLICA)
                    .unwrap_or(1);
                self.cut_began = self.now();
                self.paths.cut = Some(victim);
                self.apply_paths();
                eprintln!(
                    "rehearsal: {} cut off from the API at {:.1} s",
                    self.replicas[victim].name,
                    self.cut_began.as_secs_f64()
                );
            }
            Event::CutOffEnds => {
                let victim = self.paths.cut.take();
                self.apply_paths();
                self.fault(FaultKind::CutOff, self.cut_began, self.now(), victim);
            }
        }
        Ok(())
    }
}
