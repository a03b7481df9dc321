//! The verdicts of a rehearsal: pure functions of what the machines saw, what the API holds at
//! the end and what the replicas counted ([`Facts`]), each one line `PASS`/`FAIL` with its
//! numbers. The rules are the server's promises to an operator, stated from outside:
//!
//! - every machine gets its config (retries allowed, never a final error);
//! - no machine gets a rendered config or an image before a node has proven it, and every
//!   machine that asks after the proof (plus the replicas' watch delay, `settle`) gets the new
//!   one; each machine is answered in the spec it asked for (or the config's own, if older);
//! - every joined Node's MachineConfigNode carries what *that* machine was served: rendered
//!   config, image, spec, the replica that answered (from the balancer's log, not the
//!   server's word), its Ignition release, the address it really used;
//! - every first-boot failure is one Event, and on the MCN of a machine that joined later,
//!   cleared;
//! - nothing served is lost across the SIGKILL, and nothing went out before it was durable;
//! - MCNs the server did not create are not touched;
//! - API writes stay within the publisher's budget;
//! - the replicas' request counters agree with the 200s machines saw.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use super::cluster::{IMAGE_NEXT, WORKER_NEXT};
use super::plan::{Client, Fate, Pool};
use super::{replica_name, Facts, MachineRun};
use crate::cluster::mcn_annotation;

/// One line of the verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub name: &'static str,
    pub pass: bool,
    pub detail: String,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let word = if self.pass { "PASS" } else { "FAIL" };
        write!(f, "{word} {}: {}", self.name, self.detail)
    }
}

pub(super) fn verdict(name: &'static str, pass: bool, detail: String) -> Verdict {
    Verdict { name, pass, detail }
}

/// What a replica wrote to the API, by its fault proxy's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteKind {
    /// Its served records (the shared ConfigMap).
    Records,
    /// MachineConfigNodes (the publisher).
    Mcn,
    Event,
    Lease,
    Other,
}

impl WriteKind {
    /// The kind of a request, `None` for reads, watches and access reviews (a review is a
    /// `POST` that stores nothing).
    pub fn of(method: &str, uri: &str) -> Option<WriteKind> {
        if !matches!(method, "POST" | "PUT" | "PATCH" | "DELETE") || uri.contains("accessreviews") {
            return None;
        }
        let path = uri.split('?').next().unwrap_or(uri);
        Some(if path.contains("/machineconfignodes") {
            WriteKind::Mcn
        } else if path.contains("/configmaps") {
            WriteKind::Records
        } else if path.contains("/events") {
            WriteKind::Event
        } else if path.contains("/leases") {
            WriteKind::Lease
        } else {
            WriteKind::Other
        })
    }
}

/// The replica whose connection from `local` ended after `after`, by the balancer's log.
pub fn replica_of(facts: &Facts, local: SocketAddr, after: Duration) -> Option<usize> {
    facts
        .connections
        .iter()
        .filter(|(seen, c)| c.client == local && *seen + Duration::from_millis(50) >= after)
        .min_by_key(|(seen, _)| *seen)
        .and_then(|(_, c)| c.backend)
}

/// The replica that answered a machine's config, when it got one.
pub fn served_by(facts: &Facts, run: &MachineRun) -> Option<usize> {
    let last = run.fetch.attempts.last()?;
    replica_of(facts, last.local?, last.started)
}

/// The name of the balancer's backend `index` in this run (a replica's `NODE_NAME`, or the
/// bootstrap server's key in the install).
pub fn backend_name(facts: &Facts, index: usize) -> String {
    facts
        .replicas
        .get(index)
        .map(|r| r.name.clone())
        .unwrap_or_else(|| replica_name(index))
}

/// The spec a machine should be answered in: 2.x requests get 2.2; a 3.x request the newer of
/// none beyond the config's own spec.
pub fn expected_spec(asks: &str, config_spec: &str) -> String {
    if asks.starts_with("2.") {
        return "2.2.0".to_string();
    }
    let key = |v: &str| -> Vec<u64> { v.split('.').filter_map(|p| p.parse().ok()).collect() };
    if key(asks) <= key(config_spec) {
        asks.to_string()
    } else {
        config_spec.to_string()
    }
}

/// The most events of `times` (sorted or not) within any half-open window of `window`.
pub fn busiest_window(times: &[Duration], window: Duration) -> usize {
    let mut sorted = times.to_vec();
    sorted.sort();
    let mut best = 0;
    let mut start = 0;
    for end in 0..sorted.len() {
        while sorted[end] >= sorted[start] + window {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best
}

/// Nearest-rank percentile of `samples` (`p` in 0..=100).
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

pub(super) fn list(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut out = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > SHOWN {
        out.push_str(&format!("; and {} more", items.len() - SHOWN));
    }
    out
}

/// Every verdict of the run, in the order of the module docs (the install's own list when
/// the scenario is the install).
pub fn judge(facts: &Facts) -> Vec<Verdict> {
    let mut verdicts = scenario_verdicts(facts);
    verdicts.extend(super::dashboard::verdicts(facts));
    verdicts
}

fn scenario_verdicts(facts: &Facts) -> Vec<Verdict> {
    if let Some(switch) = &facts.switch {
        return vec![
            machines_served(facts),
            switch_bodies_are_the_originals(facts, switch),
            switch_cut_nothing(facts, switch),
            switch_records(facts, switch),
            switch_back_unchanged(switch),
            switch_steps(
                switch,
                "compare",
                "compare --against the original exits 0 before and after",
            ),
            switch_cleanup(switch),
            spec_negotiated(facts),
            real_ignition(facts),
        ];
    }
    if let Some(install) = &facts.install {
        return vec![
            machines_served(facts),
            install_met_the_bootstrap_server(facts),
            masters_carry_the_bootstrap_records(facts, install),
            mcn_records(facts),
            modes_serve_the_same_master_config(install),
            nothing_lost_across_the_bootstrap_restart(install),
            no_worker_has_a_bootstrap_record(facts),
            spec_negotiated(facts),
            real_ignition(facts),
        ];
    }
    let mut verdicts = vec![
        machines_served(facts),
        spec_negotiated(facts),
        rollout_rule(facts),
        image_rule(facts),
        mcn_records(facts),
        firstboot_failures(facts),
        records_durable(facts),
        foreign_mcns(facts),
        write_budget(facts),
        metrics_agree(facts),
        real_ignition(facts),
    ];
    verdicts.extend(super::faults::verdicts(facts));
    verdicts
}

fn machines_served(facts: &Facts) -> Verdict {
    let mut stranded = Vec::new();
    let mut waits = Vec::new();
    let (mut retries, mut retried, mut max_attempts, mut server_errors, mut transport_errors) =
        (0, 0, 0, 0, 0);
    for run in &facts.machines {
        let attempts = &run.fetch.attempts;
        retries += attempts.len().saturating_sub(1);
        retried += usize::from(attempts.len() > 1);
        max_attempts = max_attempts.max(attempts.len());
        server_errors += attempts
            .iter()
            .filter(|a| a.status().is_some_and(|s| s >= 500))
            .count();
        transport_errors += attempts.iter().filter(|a| a.status().is_none()).count();
        match (run.fetch.final_status(), &run.served) {
            (Some(200), Some(served)) => {
                let first = attempts.first().map(|a| a.started).unwrap_or_default();
                waits.push(served.at.saturating_sub(first));
            }
            _ => stranded.push(format!(
                "{} ({:?}, {} attempts, last: {:?}{})",
                run.plan.name,
                run.plan.client,
                attempts.len(),
                attempts.last().map(|a| a.outcome.clone()),
                run.trouble
                    .as_deref()
                    .map(|t| format!(", {}", t.lines().next().unwrap_or_default()))
                    .unwrap_or_default()
            )),
        }
    }
    verdict(
        "every machine got its config",
        stranded.is_empty(),
        format!(
            "{}/{} got a 200, {} stranded{}; {} retries by {} machines (at most {} attempts; {} 5xx, {} connection errors); fetch p50 {} p99 {} max {}",
            facts.machines.len() - stranded.len(),
            facts.machines.len(),
            stranded.len(),
            if stranded.is_empty() { String::new() } else { format!(" [{}]", list(&stranded)) },
            retries,
            retried,
            max_attempts,
            server_errors,
            transport_errors,
            secs(percentile(&waits, 50.0)),
            secs(percentile(&waits, 99.0)),
            secs(waits.iter().max().copied().unwrap_or_default()),
        ),
    )
}

fn spec_negotiated(facts: &Facts) -> Verdict {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for run in &facts.machines {
        let Some(served) = &run.served else { continue };
        if run.plan.client == Client::RealIgnition {
            continue; // Debian's client names its own spec; its MCN is checked below.
        }
        checked += 1;
        let want = expected_spec(run.plan.release.asks, &facts.before.config_spec);
        if served.spec != want {
            wrong.push(format!(
                "{} asked {} got {} (want {want})",
                run.plan.name, run.plan.release.asks, served.spec
            ));
        }
    }
    verdict(
        "every machine answered in its spec",
        wrong.is_empty(),
        format!(
            "{} of {checked} answered in the spec they asked for (configs are {}){}",
            checked - wrong.len(),
            facts.before.config_spec,
            if wrong.is_empty() {
                String::new()
            } else {
                format!(": {}", list(&wrong))
            }
        ),
    )
}

/// For one change proven at `proof` (`(began, done)`): machines answered `new` before the
/// proof began (violations), and machines whose answered request started after the proof
/// was done plus `settle`, with how many of them did not get `new`.
struct ProofCheck {
    early: Vec<String>,
    after: usize,
    stale: Vec<String>,
    unknown: Vec<String>,
    /// Answers after the proof from the replica cut off from the API (its cache could not
    /// know): the previous config, allowed; anything older is `unknown`.
    cut_off_stale: usize,
}

fn proof_check<'a>(
    facts: &'a Facts,
    runs: impl Iterator<Item = &'a MachineRun>,
    proof: Option<(Duration, Duration)>,
    value: impl Fn(&MachineRun) -> Option<String>,
    old: &str,
    new: &str,
) -> ProofCheck {
    let mut check = ProofCheck {
        early: Vec::new(),
        after: 0,
        stale: Vec::new(),
        unknown: Vec::new(),
        cut_off_stale: 0,
    };
    let cut_off = super::faults::cut_off_window(facts);
    for run in runs {
        let Some(served) = &run.served else { continue };
        let got = value(run).unwrap_or_default();
        if got != old && got != new {
            check.unknown.push(format!("{} got {got:?}", run.plan.name));
        }
        let Some((began, done)) = proof else {
            if got == new {
                check
                    .early
                    .push(format!("{} (no proof at all)", run.plan.name));
            }
            continue;
        };
        if got == new && served.at < began {
            check.early.push(format!(
                "{} at {} (proof at {})",
                run.plan.name,
                secs(served.at),
                secs(began)
            ));
        }
        let asked = run
            .fetch
            .attempts
            .last()
            .map(|a| a.started)
            .unwrap_or_default();
        if asked >= done + facts.knobs.settle {
            let from_cut_off = cut_off.is_some_and(|(replica, began, ended)| {
                asked >= began
                    && asked <= ended + facts.knobs.settle
                    && served_by(facts, run) == Some(replica)
            });
            if from_cut_off && got == old {
                check.cut_off_stale += 1;
                continue;
            }
            check.after += 1;
            if got != new {
                check.stale.push(format!(
                    "{} asked at {} got {got}",
                    run.plan.name,
                    secs(asked)
                ));
            }
        }
    }
    check
}

fn proof_verdict(name: &'static str, what: &str, check: ProofCheck) -> Verdict {
    let pass = check.early.is_empty() && check.stale.is_empty() && check.unknown.is_empty();
    let mut detail = format!(
        "{} machines got the new {what} before a node proved it; {} of {} asking after the proof got it",
        check.early.len(),
        check.after - check.stale.len(),
        check.after
    );
    if check.cut_off_stale > 0 {
        detail.push_str(&format!(
            "; {} asking the replica cut off from the API got the previous one (its cache could not know)",
            check.cut_off_stale
        ));
    }
    for (label, items) in [
        ("early", &check.early),
        ("stale", &check.stale),
        ("neither old nor new", &check.unknown),
    ] {
        if !items.is_empty() {
            detail.push_str(&format!(" [{label}: {}]", list(items)));
        }
    }
    verdict(name, pass, detail)
}

fn rollout_rule(facts: &Facts) -> Verdict {
    let check = proof_check(
        facts,
        facts
            .machines
            .iter()
            .filter(|m| m.plan.pool == Pool::Worker),
        facts.marks.worker_proof,
        |run| run.served.as_ref().map(|s| s.rendered_config.clone()),
        &facts.before.worker,
        WORKER_NEXT,
    );
    let mut verdict = proof_verdict("rendered config only once proven", "rendered config", check);
    // The other pools did not move: their machines get their pool's one config.
    let moved: Vec<String> = facts
        .machines
        .iter()
        .filter_map(|run| {
            let served = run.served.as_ref()?;
            let want = match run.plan.pool {
                Pool::Master => &facts.before.master,
                Pool::Layered => &facts.before.layered,
                Pool::Worker => return None,
            };
            (&served.rendered_config != want)
                .then(|| format!("{} got {}", run.plan.name, served.rendered_config))
        })
        .collect();
    if !moved.is_empty() {
        verdict.pass = false;
        verdict
            .detail
            .push_str(&format!(" [other pools: {}]", list(&moved)));
    }
    verdict
}

fn image_rule(facts: &Facts) -> Verdict {
    let check = proof_check(
        facts,
        facts
            .machines
            .iter()
            .filter(|m| m.plan.pool == Pool::Layered),
        facts.marks.layered_proof,
        |run| run.served.as_ref().and_then(|s| s.image.clone()),
        &facts.before.image,
        IMAGE_NEXT,
    );
    let mut verdict = proof_verdict("image only once proven", "image", check);
    let imaged: Vec<String> = facts
        .machines
        .iter()
        .filter(|run| run.plan.pool != Pool::Layered)
        .filter_map(|run| {
            let image = run.served.as_ref()?.image.as_ref()?;
            Some(format!("{} got {image}", run.plan.name))
        })
        .collect();
    if !imaged.is_empty() {
        verdict.pass = false;
        verdict
            .detail
            .push_str(&format!(" [not layered: {}]", list(&imaged)));
    }
    verdict
}

/// The Ignition release a machine's MCN should name.
fn client_label(run: &MachineRun) -> &'static str {
    match run.plan.client {
        // Debian's client sends `Ignition/Debian <package version>`: not a release.
        Client::RealIgnition => "unknown",
        _ => run.plan.release.version,
    }
}

fn mcn_records(facts: &Facts) -> Verdict {
    let mut wrong = Vec::new();
    let mut checked = 0;
    let mut by_replica: BTreeMap<String, usize> = BTreeMap::new();
    for run in &facts.machines {
        if run.served.is_some() && run.joined.is_none() && run.plan.fate != Fate::FailsForGood {
            // Served, meant to join, and its kubelet could not register it: the day lost a
            // Node the verdicts would otherwise not miss.
            checked += 1;
            wrong.push(format!(
                "{}: its Node never registered ({})",
                run.plan.name,
                run.trouble.as_deref().unwrap_or("no reason")
            ));
            continue;
        }
        let (Some(served), Some(_)) = (&run.served, &run.joined) else {
            continue;
        };
        checked += 1;
        let Some(mcn) = facts.mcns.get(&run.plan.name) else {
            wrong.push(format!("{}: no MCN", run.plan.name));
            continue;
        };
        let replica = served_by(facts, run).map(|i| backend_name(facts, i));
        if let Some(replica) = &replica {
            *by_replica.entry(replica.clone()).or_default() += 1;
        }
        let expected: [(&str, Option<String>); 7] = [
            ("bootstrap-address", Some(run.plan.address.to_string())),
            ("bootstrap-pool", Some(run.plan.pool.name().to_string())),
            (
                "bootstrap-rendered-config",
                Some(served.rendered_config.clone()),
            ),
            ("bootstrap-image", served.image.clone()),
            ("bootstrap-ignition-version", Some(served.spec.clone())),
            ("bootstrap-served-by", replica),
            (
                "bootstrap-ignition-client",
                Some(client_label(run).to_string()),
            ),
        ];
        let mut differences = Vec::new();
        for (key, want) in expected {
            let got = mcn_annotation(mcn, key);
            if got != want {
                differences.push(format!("{key} {got:?} (served {want:?})"));
            }
        }
        if let Some(unknown) = mcn_annotation(mcn, "bootstrap-source-unknown") {
            differences.push(format!("bootstrap-source-unknown {unknown:?}"));
        }
        if !differences.is_empty() {
            wrong.push(format!("{}: {}", run.plan.name, differences.join(", ")));
        }
    }
    let complete: Vec<Duration> = facts
        .machines
        .iter()
        .filter_map(|run| {
            let (joined, _) = run.joined.as_ref()?;
            let at = facts.mcn_complete.get(&run.plan.name)?;
            Some(at.saturating_sub(*joined))
        })
        .collect();
    verdict(
        "every joined node's MCN carries what that machine was served",
        wrong.is_empty(),
        format!(
            "{} of {checked} MCNs exact (by replica: {}); Node to MCN record p50 {} p99 {}{}",
            checked - wrong.len(),
            by_replica
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            secs(percentile(&complete, 50.0)),
            secs(percentile(&complete, 99.0)),
            if wrong.is_empty() {
                String::new()
            } else {
                format!(" [{}]", list(&wrong))
            }
        ),
    )
}

fn firstboot_failures(facts: &Facts) -> Verdict {
    let mut wrong = Vec::new();
    let failing: Vec<&MachineRun> = facts
        .machines
        .iter()
        .filter(|m| m.plan.fate != Fate::Joins && m.served.is_some())
        .collect();
    let mut events_per_machine: BTreeMap<String, usize> = BTreeMap::new();
    for event in &facts.firstboot_events {
        let note = event["note"].as_str().unwrap_or_default();
        if let Some(rest) = note.strip_prefix("Node ") {
            let node = rest.split(' ').next().unwrap_or_default();
            *events_per_machine.entry(node.to_string()).or_default() += 1;
        }
    }
    let (mut accepted, mut cleared) = (0, 0);
    for run in &failing {
        let name = &run.plan.name;
        match run.report.as_ref().and_then(|r| r.final_status()) {
            Some(202) => accepted += 1,
            other => wrong.push(format!(
                "{name}: report answered {other:?}{}",
                run.trouble
                    .as_deref()
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default()
            )),
        }
        let events = events_per_machine.get(name).copied().unwrap_or(0);
        if events != 1 {
            wrong.push(format!("{name}: {events} FirstbootFailed Events"));
        }
        match run.plan.fate {
            Fate::FailsThenJoins => {
                let mcn = facts.mcns.get(name);
                let is_cleared = mcn
                    .and_then(|m| mcn_annotation(m, "firstboot-failure-cleared-at"))
                    .is_some();
                let still_failed = mcn
                    .and_then(|m| mcn_annotation(m, "firstboot-failure-stage"))
                    .is_some();
                if is_cleared && still_failed {
                    cleared += 1;
                } else {
                    wrong.push(format!(
                        "{name} joined on its second boot but its MCN says {}",
                        match (still_failed, is_cleared) {
                            (true, false) => "the failure, not cleared",
                            (false, true) => "it was cleared, but not what failed",
                            _ => "nothing of the failure",
                        }
                    ));
                }
            }
            Fate::FailsForGood => {
                if facts.mcns.contains_key(name) {
                    wrong.push(format!("{name} never joined but has an MCN"));
                }
            }
            Fate::Joins => {}
        }
    }
    let extra: Vec<String> = events_per_machine
        .keys()
        .filter(|node| !failing.iter().any(|m| &&m.plan.name == node))
        .cloned()
        .collect();
    if !extra.is_empty() {
        wrong.push(format!(
            "Events for machines that reported nothing: {}",
            list(&extra)
        ));
    }
    let second_boot = failing
        .iter()
        .filter(|m| m.plan.fate == Fate::FailsThenJoins)
        .count();
    verdict(
        "every first-boot failure told once, cleared where it booted again",
        wrong.is_empty(),
        format!(
            "{accepted} of {} reports accepted (sent where their configs said, {}, trusting the CA bundle they carried), {} FirstbootFailed Events, {cleared} of {second_boot} MCNs carry the failure cleared after a second boot{}",
            failing.len(),
            failing
                .iter()
                .find_map(|m| m.served.as_ref()?.report_url.clone())
                .unwrap_or_else(|| "nowhere".into()),
            facts.firstboot_events.len(),
            if wrong.is_empty() { String::new() } else { format!(" [{}]", list(&wrong)) }
        ),
    )
}

/// The addresses in the shared records (served and failures) of every replica.
fn recorded_addresses(records: Option<&Value>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(data) = records.and_then(|r| r["data"].as_object()) else {
        return out;
    };
    for text in data.values() {
        let Some(value) = text
            .as_str()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
        else {
            continue;
        };
        for key in ["served", "failures"] {
            for entry in value[key].as_array().into_iter().flatten() {
                if let Some(address) = entry.get(0).and_then(Value::as_str) {
                    out.insert(address.to_string());
                }
            }
        }
    }
    out
}

fn records_durable(facts: &Facts) -> Verdict {
    let killed = facts.replicas.iter().position(|r| r.killed_at.is_some());
    let kill_at = facts.marks.kill;
    let recorded = recorded_addresses(facts.records.as_ref());
    let mut lost = Vec::new();
    let mut by_killed = 0;
    for run in &facts.machines {
        let Some(served) = &run.served else { continue };
        let replica = served_by(facts, run);
        if replica.is_some() && replica == killed && kill_at.is_some_and(|k| served.at <= k) {
            by_killed += 1;
        }
        let on_mcn = facts
            .mcns
            .get(&run.plan.name)
            .and_then(|m| mcn_annotation(m, "bootstrap-served-at"))
            .is_some();
        if !on_mcn && !recorded.contains(&run.plan.address.to_string()) {
            lost.push(format!(
                "{} (served by {:?} at {})",
                run.plan.name,
                replica.map(replica_name),
                secs(served.at)
            ));
        }
    }
    // While the API cannot take records (the API server's restart, for everyone; the cut-off,
    // for its replica), the bounded wait ends and the answer goes out with its record still
    // pending: allowed for the answers given then (and counted), never beyond.
    let outages: Vec<(Option<usize>, Duration, Duration)> = facts
        .marks
        .faults
        .iter()
        .filter_map(|f| match f.kind {
            super::FaultKind::ApiRestart => Some((None, f.began, f.ended)),
            super::FaultKind::CutOff => Some((Some(f.replica?), f.began, f.ended)),
            _ => None,
        })
        .collect();
    let slack = Duration::from_secs(3);
    let during_outage = |index: usize| -> usize {
        facts
            .machines
            .iter()
            .flat_map(|m| &m.fetch.attempts)
            .filter(|a| a.status() == Some(200))
            .filter(|a| a.local.and_then(|l| replica_of(facts, l, a.started)) == Some(index))
            .filter(|a| {
                outages.iter().any(|(only, began, ended)| {
                    only.is_none_or(|o| o == index)
                        && a.ended >= *began
                        && a.started <= *ended + slack
                })
            })
            .count()
    };
    let mut allowed_text = Vec::new();
    let before_durable: Vec<String> = facts
        .replicas
        .iter()
        .enumerate()
        .filter_map(|(index, r)| {
            let n = r.end.before_durable + r.before_kill.as_ref().map_or(0.0, |s| s.before_durable);
            let allowed = during_outage(index) as f64;
            if n > 0.0 && n <= allowed {
                allowed_text.push(format!(
                    "{} {n} of {allowed} answered while the API could not take records",
                    r.name
                ));
                return None;
            }
            (n > 0.0).then(|| format!("{} {n}", r.name))
        })
        .collect();
    verdict(
        "no served record lost across the SIGKILL",
        lost.is_empty() && before_durable.is_empty(),
        format!(
            "{} records lost ({by_killed} machines served by the killed replica before the kill, each on its MCN or in the shared records); answers before durable: {}{}{}",
            lost.len(),
            if before_durable.is_empty() { "0".to_string() } else { before_durable.join(", ") },
            if allowed_text.is_empty() { String::new() } else { format!(" (allowed: {})", allowed_text.join(", ")) },
            if lost.is_empty() { String::new() } else { format!(" [{}]", list(&lost)) }
        ),
    )
}

fn foreign_mcns(facts: &Facts) -> Verdict {
    let mut touched = Vec::new();
    for (name, before) in &facts.foreign_mcns {
        let Some(after) = facts.mcns.get(name) else {
            touched.push(format!("{name}: gone"));
            continue;
        };
        let managers: Vec<&str> = after["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["manager"].as_str())
            .collect();
        if after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"] {
            touched.push(format!("{name}: changed (managers {managers:?})"));
        } else if managers.contains(&machine_config_server::mcn::FIELD_MANAGER) {
            touched.push(format!("{name}: names our field manager"));
        }
    }
    verdict(
        "no MCN of a Node the server did not create touched",
        touched.is_empty(),
        format!(
            "{} of {} MCNs of the operator's Nodes unchanged{}",
            facts.foreign_mcns.len() - touched.len(),
            facts.foreign_mcns.len(),
            if touched.is_empty() {
                String::new()
            } else {
                format!(" [{}]", list(&touched))
            }
        ),
    )
}

/// The publisher's budget: a replica starts a write of its served records at most once per
/// flush interval (`MCS_MCN_RECORDS_FLUSH_MS`, 200 ms: five a second), and writes
/// MachineConfigNodes at most `--mcn-max-writes-per-second` (20) times a second.
///
/// The writes are judged where they land, at the API server, where they arrive as they
/// started give or take what the way there cost each one: a write that waited for a connection
/// (more so while the API is slow) arrives closer to the next one than they started. So the
/// records' rate is judged over five seconds, at most five a second plus one write of slack,
/// and two record writes closer than [`RECORDS_DOUBLE_WRITE`] are one batch written twice
/// (a create and an apply right after it were seen 6 ms apart), never jitter.
const RECORDS_PER_SECOND: usize = 5;
const RECORDS_WINDOW: Duration = Duration::from_secs(5);
const RECORDS_DOUBLE_WRITE: Duration = Duration::from_millis(50);
const MCN_WRITES_PER_SECOND: usize = 20;

/// The shortest time between two consecutive `times`.
fn closest(times: &[Duration]) -> Option<Duration> {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted.windows(2).map(|w| w[1] - w[0]).min()
}

fn write_budget(facts: &Facts) -> Verdict {
    let mut over = Vec::new();
    let mut rows = Vec::new();
    let mut totals: BTreeMap<WriteKind, usize> = BTreeMap::new();
    let mut failed: BTreeMap<String, usize> = BTreeMap::new();
    for replica in &facts.replicas {
        let times = |kind: WriteKind| -> Vec<Duration> {
            replica
                .writes
                .iter()
                .filter(|w| w.kind == kind)
                .map(|w| w.at)
                .collect()
        };
        for write in &replica.writes {
            *totals.entry(write.kind).or_default() += 1;
            // A 409 is the publisher's guard working (a changed object), not a failure.
            if write.status >= 400 && write.status != 409 || write.status == 0 {
                *failed
                    .entry(format!("{:?} {}", write.kind, write.status))
                    .or_default() += 1;
            }
        }
        let record_times = times(WriteKind::Records);
        let records = busiest_window(&record_times, Duration::from_secs(1));
        let sustained = busiest_window(&record_times, RECORDS_WINDOW);
        let allowed = RECORDS_PER_SECOND * RECORDS_WINDOW.as_secs() as usize + 1;
        let spacing = closest(&record_times);
        let mcns = busiest_window(&times(WriteKind::Mcn), Duration::from_secs(1));
        if sustained > allowed {
            over.push(format!(
                "{}: {sustained} record writes in {} s",
                replica.name,
                RECORDS_WINDOW.as_secs()
            ));
        }
        if spacing.is_some_and(|gap| gap < RECORDS_DOUBLE_WRITE) {
            over.push(format!(
                "{}: two record writes {} ms apart",
                replica.name,
                spacing.unwrap_or_default().as_millis()
            ));
        }
        if mcns > MCN_WRITES_PER_SECOND {
            over.push(format!("{}: {mcns} MCN writes in a second", replica.name));
        }
        rows.push(format!(
            "{} {records}/{mcns} ({sustained} records in the busiest {} s, at least {} ms apart)",
            replica.name,
            RECORDS_WINDOW.as_secs(),
            spacing.map_or(0, |gap| gap.as_millis())
        ));
    }
    let joined = facts
        .machines
        .iter()
        .filter(|m| m.joined.is_some())
        .count()
        .max(1);
    let per_node = |kind| totals.get(&kind).copied().unwrap_or(0) as f64 / joined as f64;
    verdict(
        "API writes within the publisher's budget",
        over.is_empty(),
        format!(
            "busiest second at the API server (records/MCN writes) {} (budget: records {RECORDS_PER_SECOND} a second over {} s plus one, never two within {} ms; MCN writes {MCN_WRITES_PER_SECOND} a second); per joined node {:.2} MCN writes, {:.2} record writes; {} Events, {} Lease writes; writes without success: {}{}",
            rows.join(", "),
            RECORDS_WINDOW.as_secs(),
            RECORDS_DOUBLE_WRITE.as_millis(),
            per_node(WriteKind::Mcn),
            per_node(WriteKind::Records),
            totals.get(&WriteKind::Event).copied().unwrap_or(0),
            totals.get(&WriteKind::Lease).copied().unwrap_or(0),
            if failed.is_empty() {
                "none".to_string()
            } else {
                failed
                    .iter()
                    .map(|(what, n)| {
                        // Each leader's first MCN create names spec.configImage, which the
                        // default CRD does not declare: the 400 tells it to leave it out.
                        let why = if what == "Mcn 400" {
                            " (the spec.configImage probe of each new leader)"
                        } else {
                            ""
                        };
                        format!("{n} {what}{why}")
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            if over.is_empty() { String::new() } else { format!(" [{}]", list(&over)) }
        ),
    )
}

fn metrics_agree(facts: &Facts) -> Verdict {
    // Every 200 a machine saw, by the replica that sent it and when it arrived.
    let mut seen: Vec<Vec<Duration>> = vec![Vec::new(); facts.replicas.len()];
    let mut unattributed = 0;
    for run in &facts.machines {
        for attempt in &run.fetch.attempts {
            if attempt.status() != Some(200) {
                continue;
            }
            match attempt
                .local
                .and_then(|l| replica_of(facts, l, attempt.started))
            {
                Some(r) if r < seen.len() => seen[r].push(attempt.ended),
                _ => unattributed += 1,
            }
        }
    }
    let mut rows = Vec::new();
    let mut pass = unattributed == 0;
    for (index, replica) in facts.replicas.iter().enumerate() {
        let answers = &seen[index];
        match (
            replica.killed_at,
            replica.restarted_at,
            &replica.before_kill,
        ) {
            (Some(killed), restarted, before_kill) => {
                let restarted = restarted.unwrap_or(Duration::MAX);
                let after: usize = answers.iter().filter(|t| **t >= restarted).count();
                let before_scrape = before_kill.as_ref().map_or(Duration::ZERO, |s| s.at);
                let low = answers.iter().filter(|t| **t < before_scrape).count();
                let high = answers.iter().filter(|t| **t < killed).count()
                    // a response counted but cut by the kill never reached its machine
                    + facts
                        .machines
                        .iter()
                        .flat_map(|m| &m.fetch.attempts)
                        .filter(|a| a.status().is_none() && a.started <= killed && a.ended >= killed)
                        .count();
                let counted = before_kill.as_ref().map_or(0.0, |s| s.ok_requests) as usize;
                let ok =
                    (low..=high).contains(&counted) && replica.end.ok_requests as usize == after;
                pass &= ok;
                rows.push(format!(
                    "{}: before the kill counted {counted}, machines saw {low} by its last scrape and {} by the kill (its counters died with it); after the restart counted {} saw {after}{}",
                    replica.name,
                    answers.iter().filter(|t| **t < killed).count(),
                    replica.end.ok_requests,
                    if ok { "" } else { " MISMATCH" }
                ));
            }
            (None, _, _) => {
                let ok = replica.end.ok_requests as usize == answers.len();
                pass &= ok;
                rows.push(format!(
                    "{}: counted {} saw {}{}",
                    replica.name,
                    replica.end.ok_requests,
                    answers.len(),
                    if ok { "" } else { " MISMATCH" }
                ));
            }
        }
    }
    verdict(
        "replicas' mcs_requests_total agrees with the 200s machines saw",
        pass,
        format!(
            "{}; {unattributed} 200s the balancer's log could not place",
            rows.join("; ")
        ),
    )
}

/// The install: the machines that reached the bootstrap server before it left the balancer
/// with a pool it does not serve (its 500), each retried by Ignition's rule.
fn install_met_the_bootstrap_server(facts: &Facts) -> Verdict {
    let mut met = Vec::new();
    let mut stranded = Vec::new();
    for run in &facts.machines {
        let hit = run.fetch.attempts.iter().any(|attempt| {
            attempt.status() == Some(500)
                && attempt
                    .local
                    .and_then(|local| replica_of(facts, local, attempt.started))
                    == Some(0)
        });
        if !hit {
            continue;
        }
        met.push(format!(
            "{} ({} attempts)",
            run.plan.name,
            run.fetch.attempts.len()
        ));
        if run.served.is_none() {
            stranded.push(run.plan.name.clone());
        }
    }
    verdict(
        "machines that met the bootstrap server's 500 retried and got their config",
        stranded.is_empty(),
        format!(
            "{} met it [{}], {} of them stranded",
            met.len(),
            list(&met),
            stranded.len()
        ),
    )
}

/// The install: each master's MCN carries the record the bootstrap server wrote for that
/// machine's address (what its key held in the API), marked as the bootstrap server's.
fn masters_carry_the_bootstrap_records(facts: &Facts, install: &super::InstallFacts) -> Verdict {
    let mut wrong = Vec::new();
    let mut exact = 0;
    for run in facts
        .machines
        .iter()
        .filter(|m| m.plan.pool == super::plan::Pool::Master)
    {
        let address = run.plan.address.to_string();
        let Some((_, _, written)) = install.key_held.iter().find(|(a, _, _)| *a == address) else {
            wrong.push(format!(
                "{}: the bootstrap server wrote no record for {address}",
                run.plan.name
            ));
            continue;
        };
        let Some(mcn) = facts.mcns.get(&run.plan.name) else {
            wrong.push(format!("{}: no MCN", run.plan.name));
            continue;
        };
        let got = |key: &str| mcn_annotation(mcn, key);
        let expected = [
            ("bootstrap-served-by", Some(facts.replicas[0].name.clone())),
            ("bootstrap-address", Some(address.clone())),
            ("bootstrap-rendered-config", Some(written.clone())),
            ("bootstrap-pool", Some("master".to_string())),
        ];
        let differences: Vec<String> = expected
            .iter()
            .filter(|(key, want)| got(key) != *want)
            .map(|(key, want)| format!("{key} {:?} (wrote {want:?})", got(key)))
            .collect();
        if differences.is_empty() {
            exact += 1;
        } else {
            wrong.push(format!("{}: {}", run.plan.name, differences.join(", ")));
        }
    }
    verdict(
        "every master's MCN carries the record the bootstrap server wrote for it",
        wrong.is_empty() && exact > 0,
        format!(
            "{exact} of {} masters; the bootstrap key held {} records once the API took them, {} by the end{}",
            install.masters_addresses.len(),
            install.key_held.len(),
            if install.key_removed {
                "removed by the Lease holder"
            } else {
                "still there"
            },
            if wrong.is_empty() {
                String::new()
            } else {
                format!(" [{}]", list(&wrong))
            }
        ),
    )
}

/// Where the original's two modes differ for the same pool, spec and state
/// (docs/compatibility.md), and why: any other difference fails.
const MODE_DIFFERENCES: [(&str, &str); 3] = [
    (
        "/etc/kubernetes/kubeconfig",
        "bootstrap mode serves its --bootstrap-kubeconfig file; cluster mode builds one from the node-bootstrapper token",
    ),
    (
        "/etc/mcs-machine-config-content.json",
        "the MachineConfig object as each mode holds it: the YAML file's, or the informer's",
    ),
    (
        "/etc/ignition-machine-config-encapsulated.json",
        "bootstrap mode encapsulates an empty config of spec 3.5, cluster mode the served spec's",
    ),
];

/// The install: the master config the bootstrap server served and the one the cluster's
/// replicas serve for the same state are the same rendered config, and the same bytes but for
/// the original's own differences between its modes.
fn modes_serve_the_same_master_config(install: &super::InstallFacts) -> Verdict {
    let c = &install.comparison;
    let mut wrong: Vec<String> = c.other_differences.clone();
    if c.bootstrap_config != c.cluster_config || c.bootstrap_config.is_empty() {
        wrong.push(format!(
            "rendered config {:?} (bootstrap) vs {:?} (cluster)",
            c.bootstrap_config, c.cluster_config
        ));
    }
    let mut named = Vec::new();
    for file in &c.differing_files {
        match MODE_DIFFERENCES.iter().find(|(path, _)| path == file) {
            Some((path, why)) => named.push(format!("{path}: {why}")),
            None => wrong.push(format!("{file} differs")),
        }
    }
    verdict(
        "the bootstrap server and the replicas serve the same master config",
        wrong.is_empty(),
        format!(
            "{} at spec {}; {} file(s) differ as the original's two modes do ({}){}",
            c.bootstrap_config,
            c.spec,
            named.len(),
            named.join("; "),
            if wrong.is_empty() {
                String::new()
            } else {
                format!("; otherwise: {}", list(&wrong))
            }
        ),
    )
}

/// The install: the masters served before the bootstrap server's restart are in its key.
fn nothing_lost_across_the_bootstrap_restart(install: &super::InstallFacts) -> Verdict {
    let written: BTreeSet<&str> = install
        .key_held
        .iter()
        .map(|(a, _, _)| a.as_str())
        .collect();
    let lost: Vec<String> = install
        .masters_addresses
        .iter()
        .map(|a| a.to_string())
        .filter(|a| !written.contains(a.as_str()))
        .collect();
    verdict(
        "no record lost across the bootstrap server's restart",
        lost.is_empty(),
        format!(
            "{} master(s) served before the restart ({}), {} records in the key, {} lost{}",
            install.served_before_restart.len(),
            install.served_before_restart.join(", "),
            install.key_held.len(),
            lost.len(),
            if lost.is_empty() {
                String::new()
            } else {
                format!(" [{}]", lost.join(", "))
            }
        ),
    )
}

/// The install: no worker's MCN names the bootstrap server.
fn no_worker_has_a_bootstrap_record(facts: &Facts) -> Verdict {
    let key = facts.replicas[0].name.as_str();
    let mut workers = 0;
    let wrong: Vec<String> = facts
        .machines
        .iter()
        .filter(|m| m.plan.pool != super::plan::Pool::Master)
        .filter_map(|m| {
            let mcn = facts.mcns.get(&m.plan.name)?;
            workers += 1;
            (mcn_annotation(mcn, "bootstrap-served-by").as_deref() == Some(key))
                .then(|| m.plan.name.clone())
        })
        .collect();
    verdict(
        "no worker MCN carries a bootstrap-server record",
        wrong.is_empty(),
        format!(
            "{} of {workers} worker MCNs name it{}",
            wrong.len(),
            if wrong.is_empty() {
                String::new()
            } else {
                format!(" [{}]", list(&wrong))
            }
        ),
    )
}

/// The switch: which kind of server answered a machine's last attempt.
fn answered_by(
    facts: &Facts,
    switch: &super::SwitchFacts,
    run: &MachineRun,
) -> Option<super::ServerKind> {
    let last = run.fetch.attempts.last()?;
    let backend = served_by(facts, run)?;
    // By when the answer ended: the old pod had exited before its successor began (the
    // history's instants), so an answer that ended after one began is the successor's.
    switch.kind_at(backend, last.ended)
}

/// The switch: every body a machine received is the original's for the same pool and spec
/// (the cluster's state is held still), whoever served it.
fn switch_bodies_are_the_originals(facts: &Facts, switch: &super::SwitchFacts) -> Verdict {
    let mut by_kind: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut unknown = 0;
    for run in &facts.machines {
        let (Some(served), Some(body)) = (&run.served, &run.fetch.body) else {
            continue;
        };
        let kind = answered_by(facts, switch, run);
        let label = kind.map_or("an unknown server", |k| k.label());
        match switch
            .reference
            .get(&(run.plan.pool.name().to_string(), served.spec.clone()))
        {
            Some(reference) if reference == body => *by_kind.entry(label).or_default() += 1,
            Some(_) => wrong.push(format!(
                "{} ({} at {}, from {label})",
                run.plan.name,
                run.plan.pool.name(),
                served.spec
            )),
            None => unknown += 1,
        }
    }
    verdict(
        "every body a machine received is the original's",
        wrong.is_empty() && unknown == 0,
        format!(
            "{} byte-identical ({}); {} differ{}; {unknown} with no reference answer",
            by_kind.values().sum::<usize>(),
            by_kind
                .iter()
                .map(|(k, n)| format!("{n} from {k}"))
                .collect::<Vec<_>>()
                .join(", "),
            wrong.len(),
            if wrong.is_empty() {
                String::new()
            } else {
                format!(" [{}]", list(&wrong))
            }
        ),
    )
}

/// The switch: stopping this server's replicas (SIGTERM, its drain) cut no machine's request;
/// what stopping the original's cut is counted (it is the original's behaviour).
fn switch_cut_nothing(facts: &Facts, switch: &super::SwitchFacts) -> Verdict {
    let mut cut: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for run in &facts.machines {
        for attempt in &run.fetch.attempts {
            if attempt.status().is_some_and(|s| s < 500) {
                continue;
            }
            let Some(backend) = attempt
                .local
                .and_then(|local| replica_of(facts, local, attempt.started))
            else {
                continue;
            };
            // A failure on a replica whose server was replaced within the grace period after it.
            let Some(history) = switch.history.get(backend) else {
                continue;
            };
            for pair in history.windows(2) {
                let (stopped_kind, replaced_at) = (pair[0].1, pair[1].0);
                if attempt.ended <= replaced_at + Duration::from_millis(500)
                    && attempt.ended + Duration::from_secs(12) >= replaced_at
                {
                    cut.entry(stopped_kind.label())
                        .or_default()
                        .push(run.plan.name.clone());
                }
            }
        }
    }
    let ours = cut
        .get(super::ServerKind::Ours.label())
        .cloned()
        .unwrap_or_default();
    let theirs = cut
        .get(super::ServerKind::Original.label())
        .map_or(0, Vec::len);
    verdict(
        "stopping this server's replicas cut no machine's request",
        ours.is_empty(),
        format!(
            "{} attempts failed while one of this server's replicas stopped{}; {theirs} while one of the original's stopped (its own shutdown)",
            ours.len(),
            if ours.is_empty() {
                String::new()
            } else {
                format!(" [{}]", list(&ours))
            }
        ),
    )
}

/// How long after a Node's MCN appears this server's Lease holder may take to write its record:
/// a Lease left by a replica that stopped taken over (twice its duration at most), and the
/// records writer's own few seconds.
fn record_write_slack(facts: &Facts) -> Duration {
    2 * facts.knobs.lease.unwrap_or(Duration::from_secs(15)) + Duration::from_secs(5)
}

/// The switch: with the extras, every machine this server served has its MCN record naming
/// the replica; every machine the original served has none; without the extras none has one.
fn switch_records(facts: &Facts, switch: &super::SwitchFacts) -> Verdict {
    let mut wrong = Vec::new();
    let (mut ours, mut theirs, mut kept) = (0, 0, 0);
    let held = recorded_addresses(facts.records.as_ref());
    let (left, slack) = (switch.ours_left(), record_write_slack(facts));
    for run in &facts.machines {
        let (Some(served), Some((joined, _))) = (&run.served, &run.joined) else {
            continue;
        };
        let mcn = facts.mcns.get(&run.plan.name);
        let record = mcn.and_then(|m| mcn_annotation(m, "bootstrap-rendered-config"));
        match answered_by(facts, switch, run) {
            Some(super::ServerKind::Ours) if switch.extras => {
                ours += 1;
                let replica = served_by(facts, run).map(|i| backend_name(facts, i));
                let by = mcn.and_then(|m| mcn_annotation(m, "bootstrap-served-by"));
                let on_mcn =
                    record.as_deref() == Some(served.rendered_config.as_str()) && by == replica;
                // A Node that joined as the last of this server's replicas left (within the
                // time its Lease holder takes to write a record) finds no writer: its record
                // is kept in the records ConfigMap, which `cleanup` removes, never lost.
                let late = left.is_some_and(|left| *joined + slack > left);
                if !on_mcn
                    && late
                    && record.is_none()
                    && held.contains(&run.plan.address.to_string())
                {
                    kept += 1;
                } else if !on_mcn {
                    wrong.push(format!("{}: record {record:?} by {by:?}", run.plan.name));
                }
            }
            Some(_) | None => {
                theirs += 1;
                if record.is_some() {
                    wrong.push(format!(
                        "{}: a record ({record:?}) it was not served by us",
                        run.plan.name
                    ));
                }
            }
        }
    }
    verdict(
        if switch.extras {
            "every machine this server served has its MCN record, the original's none"
        } else {
            "without the extras no MCN record is written"
        },
        wrong.is_empty(),
        format!(
            "{ours} served by this server ({kept} of them joined as it left: record kept in the records ConfigMap), {theirs} by the original (or without the extras); {} wrong{}",
            wrong.len(),
            if wrong.is_empty() {
                String::new()
            } else {
                format!(" [{}]", list(&wrong))
            }
        ),
    )
}

/// The switch: switched back, the original answers byte for byte as before the switch, with
/// everything this server wrote still in the cluster, and again once `cleanup` removed it.
fn switch_back_unchanged(switch: &super::SwitchFacts) -> Verdict {
    let differ = |other: &BTreeMap<(String, String), Vec<u8>>| -> Vec<String> {
        switch
            .reference
            .iter()
            .filter(|(key, body)| other.get(*key) != Some(*body))
            .map(|((pool, spec), _)| format!("{pool} at {spec}"))
            .collect()
    };
    let (after, cleaned) = (differ(&switch.after), differ(&switch.after_cleanup));
    verdict(
        "switched back, the original answers as before, with and without what this server left",
        after.is_empty() && cleaned.is_empty() && !switch.reference.is_empty(),
        format!(
            "{} answers compared: {} differ with this server's objects present, {} after cleanup{}",
            switch.reference.len(),
            after.len(),
            cleaned.len(),
            if after.is_empty() && cleaned.is_empty() {
                String::new()
            } else {
                format!(" [{}]", list(&[after, cleaned].concat()))
            }
        ),
    )
}

/// The switch: the steps whose label starts with `prefix` all exited 0.
fn switch_steps(switch: &super::SwitchFacts, prefix: &str, name: &'static str) -> Verdict {
    let steps: Vec<&super::Step> = switch
        .steps
        .iter()
        .filter(|s| s.label.starts_with(prefix))
        .collect();
    let failed: Vec<String> = steps
        .iter()
        .filter(|s| s.code != Some(0))
        .map(|s| {
            format!(
                "{}: exit {:?}: {}",
                s.label,
                s.code,
                s.output.lines().last().unwrap_or_default()
            )
        })
        .collect();
    verdict(
        name,
        failed.is_empty() && !steps.is_empty(),
        format!(
            "{} run(s){}",
            steps.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!(" [{}]", failed.join("; "))
            }
        ),
    )
}

/// The switch: `cleanup` lists what this server left (exit 2 when it left something), removes
/// it with `--remove` (exit 0), and then lists nothing (exit 0).
fn switch_cleanup(switch: &super::SwitchFacts) -> Verdict {
    let step = |label: &str| switch.steps.iter().find(|s| s.label == label);
    let (dry, remove, again) = (
        step("cleanup (dry run)"),
        step("cleanup --remove"),
        step("cleanup (dry run, again)"),
    );
    let code = |s: Option<&super::Step>| s.and_then(|s| s.code);
    // The report lists each object two spaces in (its details deeper).
    let listed = dry.map_or(0, |s| {
        s.output
            .lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .count()
    });
    let pass = code(dry).is_some_and(|c| c == 2 || (c == 0 && !switch.extras))
        && code(remove) == Some(0)
        && code(again) == Some(0);
    verdict(
        "cleanup lists what this server left, removes it, and then lists nothing",
        pass,
        format!(
            "dry run exit {:?} ({listed} line(s) listed), --remove exit {:?}, dry run again exit {:?}{}",
            code(dry),
            code(remove),
            code(again),
            if pass {
                String::new()
            } else {
                format!(
                    " [{}]",
                    [dry, remove, again]
                        .iter()
                        .flatten()
                        .map(|s| format!("{}: {}", s.label, s.output.trim()))
                        .collect::<Vec<_>>()
                        .join(" | ")
                )
            }
        ),
    )
}

fn real_ignition(facts: &Facts) -> Verdict {
    let runs: Vec<&MachineRun> = facts
        .machines
        .iter()
        .filter(|m| m.plan.client == Client::RealIgnition)
        .collect();
    if !facts.knobs.real_ignition {
        return verdict(
            "Debian's Ignition client booted through the balancer",
            true,
            "not part of this run (MCS_REHEARSAL_REAL_IGNITION=0)".to_string(),
        );
    }
    let mut wrong = Vec::new();
    let mut rows = Vec::new();
    for run in &runs {
        match &run.served {
            Some(served) => rows.push(format!(
                "{} from {} got {} at spec {} from {} in {} connection(s)",
                run.plan.name,
                run.plan.address,
                served.rendered_config,
                served.spec,
                served_by(facts, run)
                    .map(|i| backend_name(facts, i))
                    .unwrap_or_else(|| "an unknown replica".into()),
                run.relayed.len()
            )),
            None => wrong.push(format!(
                "{}: {}",
                run.plan.name,
                run.trouble.as_deref().unwrap_or("no config")
            )),
        }
    }
    if runs.is_empty() {
        wrong.push("no machine was Debian's client".into());
    }
    verdict(
        "Debian's Ignition client booted through the balancer",
        wrong.is_empty(),
        if wrong.is_empty() {
            rows.join("; ")
        } else {
            list(&wrong)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_follow_the_request_and_the_config() {
        assert_eq!(expected_spec("2.2.0", "3.5.0"), "2.2.0");
        assert_eq!(expected_spec("3.1.0", "3.5.0"), "3.1.0");
        assert_eq!(expected_spec("3.6.0", "3.5.0"), "3.5.0");
        assert_eq!(expected_spec("3.5.0", "3.5.0"), "3.5.0");
    }

    #[test]
    fn the_busiest_window_is_half_open() {
        let at = |ms: &[u64]| {
            ms.iter()
                .map(|m| Duration::from_millis(*m))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            busiest_window(&at(&[0, 200, 400, 600, 800, 1000]), Duration::from_secs(1)),
            5
        );
        assert_eq!(
            busiest_window(&at(&[0, 100, 150, 999]), Duration::from_secs(1)),
            4
        );
        assert_eq!(busiest_window(&[], Duration::from_secs(1)), 0);
    }

    #[test]
    fn writes_are_told_from_reads_and_reviews() {
        assert_eq!(WriteKind::of("GET", "/api/v1/nodes"), None);
        assert_eq!(
            WriteKind::of(
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
            ),
            None
        );
        assert_eq!(
            WriteKind::of(
                "PATCH",
                "/api/v1/namespaces/openshift-machine-config-operator/configmaps/machine-config-server-served-records?fieldManager=x"
            ),
            Some(WriteKind::Records)
        );
        assert_eq!(
            WriteKind::of(
                "POST",
                "/apis/machineconfiguration.openshift.io/v1/machineconfignodes"
            ),
            Some(WriteKind::Mcn)
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&samples, 99.0), Duration::from_millis(99));
    }
}
