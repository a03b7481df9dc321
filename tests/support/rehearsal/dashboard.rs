//! The operator's view of the storm: a real Prometheus ([`crate::prometheus`]) scraping the
//! admin listener of every server of ours on the stage (the replicas, the install's bootstrap
//! server), each target labelled with its `pod` as the ServiceMonitor's endpoints label it in a
//! cluster; a killed or stopped server's target goes down and comes back with its process. At
//! the end every query of the console dashboard (`config/deploy/dashboard`) is evaluated
//! through Prometheus's HTTP API over the run, as the console asks it, drawn panel by panel
//! into `dashboard.svg` beside the timeline, and held against what the machines saw: two
//! verdicts, every panel has data, and the panels' counts are the machines' 200s and reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use plotters::prelude::*;

use super::verdict::{replica_of, Verdict};
use super::{Facts, MachineRun, ServerKind};
use crate::dashboard::{self, Query};
use crate::prometheus::{counter_growth, Prometheus, Series, Target, SCRAPE_INTERVAL};

/// Prometheus watching the stage's servers, and when the storm began in its clock.
pub(super) struct Watch {
    prometheus: Prometheus,
}

impl Watch {
    /// Prometheus scraping `targets`, one per balancer backend in its order (the backend index
    /// is how a machine's answer is matched to the `pod` that sent it); `None` when the knob
    /// turns the operator's view off.
    pub(super) fn start(enabled: bool, targets: &[Target]) -> Result<Option<Watch>, String> {
        if !enabled {
            return Ok(None);
        }
        let prometheus = Prometheus::start(targets)?;
        // Every target scraped once (up or down) before the storm: what a server counts before
        // its first scrape would otherwise be lost unseen if it dies early.
        let scraped =
            crate::mcs::poll_every(Duration::from_millis(200), Duration::from_secs(30), || {
                let now = unix_now();
                let up = prometheus
                    .samples("up", now, Duration::from_secs(60))
                    .ok()?;
                (up.len() >= targets.len()).then_some(())
            });
        if scraped.is_none() {
            return Err(format!(
                "Prometheus did not scrape its {} targets within 30 s:\n{}",
                targets.len(),
                prometheus.log_text()
            ));
        }
        eprintln!(
            "rehearsal: Prometheus on {} scraping {} targets every {} s",
            prometheus.address,
            targets.len(),
            SCRAPE_INTERVAL.as_secs()
        );
        Ok(Some(Watch { prometheus }))
    }

    /// Waits until what the servers answered so far (the harness's own requests before the
    /// storm) has been scraped, so that the storm's counts start from it.
    pub(super) fn settle(&self) {
        std::thread::sleep(SCRAPE_INTERVAL * 2);
    }

    /// Everything the operator's view needs from Prometheus, read once the run is over: every
    /// panel query from a little before `t0` to now, and the raw samples the counts come from.
    pub(super) fn read(&self, targets: &[Target], t0: Instant) -> OperatorView {
        // Let the last answers' counters reach a scrape.
        std::thread::sleep(SCRAPE_INTERVAL * 2);
        let now_unix = unix_now();
        let t0_unix = now_unix - t0.elapsed().as_secs_f64();
        let start = t0_unix - LEAD_IN.as_secs_f64();
        let relative = |series: Vec<Series>| -> Vec<Series> {
            series
                .into_iter()
                .map(|s| Series {
                    points: s.points.iter().map(|(at, v)| (at - t0_unix, *v)).collect(),
                    labels: s.labels,
                })
                .collect()
        };
        let mut errors = Vec::new();
        let panels = match dashboard::load() {
            Ok(board) => dashboard::queries(&board)
                .into_iter()
                .map(|query| {
                    let answer =
                        self.prometheus
                            .query_range(&query.expr, start, now_unix, SCRAPE_INTERVAL);
                    match answer {
                        Ok(series) => PanelData {
                            query,
                            series: relative(series),
                            error: None,
                        },
                        Err(e) => PanelData {
                            query,
                            series: Vec::new(),
                            error: Some(e),
                        },
                    }
                })
                .collect(),
            Err(e) => {
                errors.push(e);
                Vec::new()
            }
        };
        let range = Duration::from_secs_f64(now_unix - start) + SCRAPE_INTERVAL;
        let mut samples = |selector: &str| -> Vec<Series> {
            match self.prometheus.samples(selector, now_unix, range) {
                Ok(series) => relative(series),
                Err(e) => {
                    errors.push(e);
                    Vec::new()
                }
            }
        };
        let served = samples(SERVED);
        let reports = samples(REPORTED);
        let up = samples("up");
        OperatorView {
            pods: targets.iter().map(|t| t.pod.clone()).collect(),
            panels,
            served,
            reports,
            up,
            errors,
            log: self.prometheus.log_text(),
        }
    }
}

/// How long before the storm the panels start (the replicas' state before the first machine).
const LEAD_IN: Duration = Duration::from_secs(5);

/// The series behind the served-per-pool panel, and behind the first-boot failure panel.
const SERVED: &str = "mcs_requests_total{code=~\"2..\"}";
const REPORTED: &str = "mcs_firstboot_failures_total";

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// One panel query's answer over the run (points in seconds since the storm began).
#[derive(Clone, Debug)]
pub struct PanelData {
    pub query: Query,
    pub series: Vec<Series>,
    pub error: Option<String>,
}

impl PanelData {
    fn has_data(&self) -> bool {
        self.series
            .iter()
            .any(|s| s.points.iter().any(|(_, v)| v.is_finite()))
    }
}

/// What Prometheus saw of the run.
#[derive(Clone, Debug, Default)]
pub struct OperatorView {
    /// The targets' `pod` labels, by balancer backend.
    pub pods: Vec<String>,
    pub panels: Vec<PanelData>,
    /// Raw samples of the served-per-pool panel's counters and of the failure panel's.
    pub served: Vec<Series>,
    pub reports: Vec<Series>,
    /// `up` of every target, each scrape.
    pub up: Vec<Series>,
    /// Queries Prometheus could not answer.
    pub errors: Vec<String>,
    /// Prometheus's own log (warnings and errors).
    pub log: String,
}

/// When a target's process ended unseen: from its last scrape that answered to the first that
/// did not. What it counted in between is lost with it, in every panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Gap {
    pub pod: String,
    pub last_up: f64,
    pub first_down: f64,
    /// When it answered a scrape again (`None`: never, within the run).
    pub back: Option<f64>,
}

impl OperatorView {
    /// Every moment a target's process ended unseen, in order: its target went from
    /// answering its scrapes to not, or (a process replaced within a scrape) one of its
    /// counters dropped.
    pub fn gaps(&self) -> Vec<Gap> {
        let mut gaps = Vec::new();
        for series in &self.up {
            let pod = series.labels.get("pod").cloned().unwrap_or_default();
            let mut last_up: Option<f64> = None;
            let mut open: Option<Gap> = None;
            for &(at, value) in &series.points {
                match (value >= 1.0, &mut open) {
                    (true, Some(gap)) => {
                        gap.back = Some(at);
                        gaps.push(open.take().unwrap());
                        last_up = Some(at);
                    }
                    (true, None) => last_up = Some(at),
                    (false, None) => {
                        if let Some(last) = last_up {
                            open = Some(Gap {
                                pod: pod.clone(),
                                last_up: last,
                                first_down: at,
                                back: None,
                            });
                        }
                    }
                    (false, Some(_)) => {}
                }
            }
            gaps.extend(open);
        }
        for series in self.served.iter().chain(&self.reports) {
            let pod = series.labels.get("pod").cloned().unwrap_or_default();
            for pair in series.points.windows(2) {
                let ((before, was), (after, is)) = (pair[0], pair[1]);
                let seen = gaps.iter().any(|g: &Gap| {
                    g.pod == pod && g.last_up <= after && g.back.is_none_or(|back| back >= before)
                });
                if is < was && !seen {
                    gaps.push(Gap {
                        pod: pod.clone(),
                        last_up: before,
                        first_down: after,
                        back: Some(after),
                    });
                }
            }
        }
        gaps.sort_by(|a, b| a.first_down.total_cmp(&b.first_down));
        gaps
    }
}

/// A counter family's growth over the run per value of `label`, from raw samples: each series'
/// growth from its last sample before the storm (or from 0 where it began later), up to
/// `until` (seconds since the storm began). A drop is a restart from 0; so is the first sample
/// after one of its pod's process ends (`ends`: pod, seconds), which a drop does not show when
/// the new process counted past the old one before its first scrape.
pub fn growth_by(
    series: &[Series],
    label: &str,
    until: f64,
    ends: &[(String, f64)],
) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for s in series {
        let key = s.labels.get(label).cloned().unwrap_or_default();
        let pod = s.labels.get("pod").map(String::as_str).unwrap_or_default();
        let baseline = s
            .points
            .iter()
            .rev()
            .find(|(at, _)| *at <= 0.0)
            .map_or(0.0, |(_, v)| *v);
        let during: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(at, _)| *at > 0.0 && *at <= until)
            .collect();
        let mut grown = 0.0;
        let mut from = baseline;
        let mut segment_start = 0;
        let mut previous_at = 0.0;
        for (i, &(at, _)) in during.iter().enumerate() {
            let restarted = ends
                .iter()
                .any(|(p, end)| p == pod && *end > previous_at && *end <= at);
            if restarted && i > segment_start {
                grown += counter_growth(&during[segment_start..i], from);
                segment_start = i;
                from = 0.0;
            } else if restarted {
                from = 0.0;
            }
            previous_at = at;
        }
        grown += counter_growth(&during[segment_start..], from);
        *out.entry(key).or_default() += grown;
    }
    out
}

/// When each server of ours on the stage ended a process, by its pod (seconds since the storm
/// began): a SIGKILL (the switch's replaced pods leave their targets down: the original has no
/// admin listener, and the test tier's stand-in for it has ports of its own).
fn process_ends(facts: &Facts, view: &OperatorView) -> Vec<(String, f64)> {
    let mut ends = Vec::new();
    for (index, replica) in facts.replicas.iter().enumerate() {
        let Some(pod) = view.pods.get(index) else {
            continue;
        };
        if let Some(killed) = replica.killed_at {
            ends.push((pod.clone(), killed.as_secs_f64()));
        }
    }
    ends
}

/// When a process of ours left its serving ports (pod, seconds): in the switch, each time the
/// other kind took a replica's ports over.
fn stops(facts: &Facts, view: &OperatorView) -> Vec<(String, f64)> {
    let Some(switch) = &facts.switch else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (index, history) in switch.history.iter().enumerate() {
        for pair in history.windows(2) {
            let (started, _) = pair[0];
            let (replaced, _) = pair[1];
            if let Some(pod) = pod_at(facts, view, index, started) {
                out.push((pod, replaced.as_secs_f64()));
            }
        }
    }
    out
}

/// A 2xx answer (a config, or an accepted report) a machine got, by the backend that sent it
/// (`None`: the balancer's log could not place it) and the pool it was for.
struct Answer {
    /// The scraped target of the process that answered (`None`: not placed).
    pod: Option<String>,
    pool: String,
    at: Duration,
}

/// The target of the process that ran on backend `backend` at `at`: the replica's pod, or in
/// the test tier's switch the stand-in's while the original's kind ran there.
fn pod_at(facts: &Facts, view: &OperatorView, backend: usize, at: Duration) -> Option<String> {
    let pod = view.pods.get(backend)?.clone();
    Some(match &facts.switch {
        Some(s) if s.stand_in && s.kind_at(backend, at) == Some(ServerKind::Original) => {
            format!("{pod}-stand-in")
        }
        _ => pod,
    })
}

/// The machines' answers from servers of ours: `report` picks the first-boot failure reports
/// instead of the configs.
fn answers_from_ours(facts: &Facts, view: &OperatorView, report: bool) -> Vec<Answer> {
    let mut out = Vec::new();
    let ours = |backend: usize, at: Duration| {
        facts
            .switch
            .as_ref()
            // The test tier's stand-in for the original is this server, scraped as ours.
            .is_none_or(|s| s.stand_in || s.kind_at(backend, at) == Some(ServerKind::Ours))
    };
    for run in &facts.machines {
        let exchange = if report {
            match &run.report {
                Some(r) => r,
                None => continue,
            }
        } else {
            &run.fetch
        };
        for attempt in &exchange.attempts {
            let Some(status) = attempt.status() else {
                continue;
            };
            if !(200..300).contains(&status) {
                continue;
            }
            let backend = attempt
                .local
                .and_then(|local| replica_of(facts, local, attempt.started));
            if backend.is_some_and(|b| !ours(b, attempt.started)) {
                continue;
            }
            out.push(Answer {
                pod: backend.and_then(|b| pod_at(facts, view, b, attempt.started)),
                pool: pool_of(run),
                at: attempt.ended,
            });
        }
    }
    out
}

fn pool_of(run: &MachineRun) -> String {
    run.plan.pool.name().to_string()
}

/// Every verdict of the operator's view.
pub(super) fn verdicts(facts: &Facts) -> Vec<Verdict> {
    let Some(view) = &facts.operator else {
        return Vec::new();
    };
    vec![panels_have_data(facts, view), panels_agree(facts, view)]
}

/// Why a panel's being empty is what the run must show (`None`: it must have data). A panel
/// whose series exist only while a condition holds is empty when the run never met it, and
/// the machines say whether it did.
fn empty_is_right(facts: &Facts, query: &Query) -> Option<String> {
    if query.expr.contains("firstboot_failure") || query.expr.contains("node_failure_reports") {
        let reports = facts.machines.iter().filter(|m| m.report.is_some()).count();
        return (reports == 0).then(|| "no machine reported a first-boot failure".to_string());
    }
    if !query.expr.contains("mcs_layered_") {
        return None;
    }
    // Every layered panel reads (0 where nothing waits or is held) once a machine of a layered
    // pool was served.
    let layered_served = facts
        .machines
        .iter()
        .any(|m| m.plan.pool == super::plan::Pool::Layered && m.served.is_some());
    (!layered_served).then(|| "no machine of a layered pool was served".into())
}

fn panels_have_data(facts: &Facts, view: &OperatorView) -> Verdict {
    let mut empty = Vec::new();
    let mut rightly_empty = Vec::new();
    for panel in view.panels.iter().filter(|p| !p.has_data()) {
        let what = format!("{} ({})", panel.query.panel, panel.query.expr);
        match (&panel.error, empty_is_right(facts, &panel.query)) {
            (Some(e), _) => empty.push(format!("{what}: {e}")),
            (None, Some(why)) => rightly_empty.push(format!("{}: {why}", panel.query.panel)),
            (None, None) => empty.push(format!("{what}: no series")),
        }
    }
    let panels: std::collections::BTreeSet<&str> =
        view.panels.iter().map(|p| p.query.panel.as_str()).collect();
    let series: usize = view.panels.iter().map(|p| p.series.len()).sum();
    let with_data = view.panels.iter().filter(|p| p.has_data()).count();
    super::verdict::verdict(
        "every panel of the console dashboard has data in a real Prometheus that scraped the run",
        !view.panels.is_empty() && empty.is_empty() && view.errors.is_empty(),
        format!(
            "{with_data} of {} queries of {} panels returned data ({series} series); empty as the run says they must be: {}; empty: {}{}",
            view.panels.len(),
            panels.len(),
            none_or_list(&rightly_empty),
            none_or_list(&empty),
            if view.errors.is_empty() {
                String::new()
            } else {
                format!("; Prometheus errors: {}", view.errors.join("; "))
            }
        ),
    )
}

fn none_or_list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        super::verdict::list(items)
    }
}

fn panels_agree(facts: &Facts, view: &OperatorView) -> Verdict {
    let mut ends = process_ends(facts, view);
    let mut gaps = view.gaps();
    // A target that went down and came back is a new process (ours never stop answering
    // scrapes while alive): its counters start from 0 there, whatever their first value.
    ends.extend(
        gaps.iter()
            .filter_map(|g| Some((g.pod.clone(), g.back? - 0.001))),
    );
    // A process that ended between two scrapes of its target: what it answered after the
    // last scrape before its end is lost with it.
    for (pod, end) in &ends {
        let last_up = view
            .up
            .iter()
            .filter(|s| s.labels.get("pod") == Some(pod))
            .flat_map(|s| &s.points)
            .filter(|(at, v)| *at <= *end && *v >= 1.0)
            .map(|(at, _)| *at)
            .fold(f64::NEG_INFINITY, f64::max);
        if last_up.is_finite() && !gaps.iter().any(|g| &g.pod == pod && g.last_up == last_up) {
            gaps.push(Gap {
                pod: pod.clone(),
                last_up,
                first_down: *end,
                back: Some(*end),
            });
        }
    }
    // A process stopped with SIGTERM drains: its admin listener is gone at once, its serving
    // ports answer on until the next process takes them, so what it answered until then is
    // never scraped either.
    let stops = stops(facts, view);
    let gap_end = |gap: &Gap| {
        stops
            .iter()
            .filter(|(pod, at)| *pod == gap.pod && *at >= gap.last_up)
            .filter(|(_, at)| gap.back.is_none_or(|back| *at <= back))
            .map(|(_, at)| *at)
            .fold(gap.first_down, f64::max)
    };
    let served = answers_from_ours(facts, view, false);
    let reports = answers_from_ours(facts, view, true);
    // Counted up to a scrape and a half after the storm (every machine done): its last answers
    // are scraped by then, and the harness's own requests after the storm (the switch's
    // answers after switching back) come at least 2 s after it.
    let until = (facts.storm + SCRAPE_INTERVAL.mul_f64(1.5)).as_secs_f64();
    // An answer sent by a process between its last scrape and its end is counted nowhere.
    let in_gap = |answer: &Answer| {
        gaps.iter().any(|gap| {
            let at = answer.at.as_secs_f64();
            answer.pod.as_ref().is_none_or(|pod| *pod == gap.pod)
                && at > gap.last_up - 0.05
                && at <= gap_end(gap)
        })
    };
    let mut rows = Vec::new();
    let mut pass = true;
    let mut check = |what: &str,
                     answers: &[Answer],
                     counted: BTreeMap<String, f64>,
                     own: &BTreeMap<String, usize>| {
        let mut pools: std::collections::BTreeSet<String> =
            answers.iter().map(|a| a.pool.clone()).collect();
        pools.extend(counted.keys().cloned());
        for pool in pools {
            let saw = answers.iter().filter(|a| a.pool == pool).count()
                + own.get(&pool).copied().unwrap_or(0);
            let lost = answers
                .iter()
                .filter(|a| a.pool == pool && in_gap(a))
                .count();
            let count = counted.get(&pool).copied().unwrap_or(0.0).round() as usize;
            let ok = count <= saw && count + lost >= saw;
            pass &= ok;
            rows.push(format!(
                "{what} {pool}: panel {count}, machines {saw}{}{}",
                if lost > 0 {
                    format!(" ({lost} sent in a target's last second before it died)")
                } else {
                    String::new()
                },
                if ok { "" } else { " MISMATCH" }
            ));
        }
    };
    check(
        "configs served",
        &served,
        growth_by(&view.served, "pool", until, &ends),
        &facts.own_answers,
    );
    check(
        "first-boot failures",
        &reports,
        growth_by(&view.reports, "pool", until, &ends),
        &BTreeMap::new(),
    );
    let gaps_text: Vec<String> = gaps
        .iter()
        .map(|g| match g.back {
            Some(back) if back == g.first_down => format!(
                "{} replaced between its scrapes at {:.1} s and {back:.1} s",
                g.pod, g.last_up
            ),
            _ => format!(
                "{} down from {:.1} s (last scrape {:.1} s) to {}",
                g.pod,
                g.first_down,
                g.last_up,
                g.back
                    .map_or("the end".to_string(), |back| format!("{back:.1} s"))
            ),
        })
        .collect();
    super::verdict::verdict(
        "the dashboard's counts are what the machines saw",
        pass && !view.panels.is_empty(),
        format!(
            "{}; targets down: {} (a killed server's counters die with it: its panels drop to the restarted process's count, and what it answered after its last scrape shows nowhere)",
            rows.join("; "),
            if gaps_text.is_empty() {
                "none".to_string()
            } else {
                gaps_text.join("; ")
            }
        ),
    )
}

/// `dashboard.svg`: the console dashboard's panels over the run, four to a row, with the day's
/// events marked in each.
pub fn draw(
    facts: &Facts,
    marks: &[(f64, String)],
    bands: &[Band],
    path: &Path,
) -> Result<(), String> {
    let Some(view) = &facts.operator else {
        return Ok(());
    };
    draw_panels(facts, view, (marks, bands), path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A fault's period as the timeline shades it: (from, to, name, color).
pub type Band = (f64, f64, String, RGBColor);

/// A panel: its title and its queries' answers.
struct Drawn<'a> {
    title: &'a str,
    kind: &'a str,
    queries: Vec<&'a PanelData>,
}

const COLUMNS: usize = 4;
const PANEL_SIZE: (u32, u32) = (460, 300);

fn draw_panels(
    facts: &Facts,
    view: &OperatorView,
    (marks, bands): (&[(f64, String)], &[Band]),
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut drawn: Vec<Drawn> = Vec::new();
    for data in &view.panels {
        match drawn.last_mut() {
            Some(last) if last.title == data.query.panel => last.queries.push(data),
            _ => drawn.push(Drawn {
                title: &data.query.panel,
                kind: &data.query.kind,
                queries: vec![data],
            }),
        }
    }
    let rows = drawn.len().div_ceil(COLUMNS).max(1);
    let size = (
        PANEL_SIZE.0 * COLUMNS as u32,
        PANEL_SIZE.1 * rows as u32 + 90,
    );
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(90);
    head.draw(&Text::new(
        format!(
            "Console dashboard \"Machine Config Server / Scale-up\" as a real Prometheus saw the {} rehearsal: {} machines, {}",
            facts.knobs.scenario.name(),
            facts.machines.len(),
            facts.api
        ),
        (12, 10),
        ("sans-serif", 20).into_font(),
    ))?;
    let mut events = String::from("x: seconds since the first machine; red lines: ");
    for (at, label) in marks.iter().filter(|(_, l)| !l.starts_with("balancer")) {
        let _ = write!(events, "{label} {at:.0} s · ");
    }
    if !bands.is_empty() {
        events.push_str("shaded: ");
        for (from, to, label, _) in bands {
            let _ = write!(events, "{label} {from:.0}-{to:.0} s · ");
        }
    }
    for (line, chunk) in wrap(events.trim_end_matches(" · "), 190).iter().enumerate() {
        head.draw(&Text::new(
            chunk.clone(),
            (12, 40 + 18 * line as i32),
            ("sans-serif", 13).into_font().color(&RGBColor(214, 39, 40)),
        ))?;
    }
    let cells = body.split_evenly((rows, COLUMNS));
    let x_end = view
        .panels
        .iter()
        .flat_map(|p| &p.series)
        .flat_map(|s| s.points.iter().map(|(at, _)| *at))
        .fold(1.0f64, f64::max);
    let x_start = -LEAD_IN.as_secs_f64();
    for (panel, cell) in drawn.iter().zip(cells.iter()) {
        draw_panel(panel, cell, (marks, bands), x_start..x_end)?;
    }
    root.present()?;
    Ok(())
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn draw_panel<DB: DrawingBackend>(
    panel: &Drawn,
    cell: &DrawingArea<DB, plotters::coord::Shift>,
    (marks, bands): (&[(f64, String)], &[Band]),
    x: std::ops::Range<f64>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    // A panel of several queries without legends (the console's tables) names each series by
    // the metric its query reads.
    let several = panel.queries.len() > 1;
    let lines: Vec<(String, Vec<(f64, f64)>)> = panel
        .queries
        .iter()
        .flat_map(|data| {
            let prefix = match (several, &data.query.legend) {
                (true, None) => metric_of(&data.query.expr).map(|m| format!("{m}: ")),
                _ => None,
            };
            data.series.iter().map(move |s| {
                (
                    prefix.clone().unwrap_or_default()
                        + &dashboard::legend(data.query.legend.as_deref(), &s.labels),
                    s.points
                        .iter()
                        .copied()
                        .filter(|(_, v)| v.is_finite())
                        .collect::<Vec<_>>(),
                )
            })
        })
        .collect();
    let values = lines.iter().flat_map(|(_, p)| p.iter().map(|(_, v)| *v));
    let (low, high) = values.fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let high = if high - low < 1e-9 { low + 1.0 } else { high };
    let span = high - low;
    // A one-value panel (the console's singlestat, a table of one row) says its value too.
    let last = |points: &[(f64, f64)]| points.last().map(|(_, v)| *v);
    let caption = match (panel.kind, lines.as_slice()) {
        ("singlestat", [(_, points)]) => match last(points) {
            Some(v) => format!("{} ({})", panel.title, seconds_text(v)),
            None => panel.title.to_string(),
        },
        _ => panel.title.to_string(),
    };
    let caption = if lines.is_empty() {
        format!("{caption} — NO DATA")
    } else {
        caption
    };
    let mut chart = ChartBuilder::on(cell)
        .margin(8)
        .x_label_area_size(22)
        .y_label_area_size(48)
        .caption(shorten(&caption, 62), ("sans-serif", 13))
        .build_cartesian_2d(x.clone(), low..high + span * 0.25)?;
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(5)
        .label_style(("sans-serif", 10))
        .y_label_formatter(&|v| number_text(*v))
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .draw()?;
    for (from, to, _, color) in bands {
        chart.draw_series(std::iter::once(Rectangle::new(
            [(*from, low), (to.max(from + 0.2), high + span * 0.25)],
            color.mix(0.12).filled(),
        )))?;
    }
    for (at, label) in marks {
        let color = if label.starts_with("balancer") {
            RGBColor(160, 160, 160)
        } else {
            RGBColor(214, 39, 40)
        };
        chart.draw_series(LineSeries::new(
            vec![(*at, low), (*at, high + span * 0.25)],
            color.mix(0.35).stroke_width(1),
        ))?;
    }
    const SHOWN: usize = 7;
    for (index, (label, points)) in lines.iter().enumerate() {
        let color = PALETTE[index % PALETTE.len()];
        let drawn = chart.draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))?;
        if index < SHOWN {
            let label = match (panel.kind, last(points)) {
                ("table", Some(v)) => format!("{} = {}", shorten(label, 36), number_text(v)),
                _ => shorten(label, 44),
            };
            drawn.label(label).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
        }
    }
    if !lines.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 10))
            .background_style(WHITE.mix(0.8))
            .border_style(RGBColor(200, 200, 200))
            .draw()?;
    }
    Ok(())
}

/// The first metric an expression reads (`mcs_...`), without its `mcs_` prefix.
fn metric_of(expr: &str) -> Option<String> {
    let start = expr.find("mcs_")?;
    let name: String = expr[start + 4..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    Some(name)
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max - 1).collect();
    format!("{kept}…")
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let line = lines.last_mut().unwrap();
        if !line.is_empty() && line.len() + word.len() + 1 > width {
            lines.push(word.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

/// A value on an axis: short, whatever its size.
fn number_text(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Seconds as the console's singlestat shows a duration.
fn seconds_text(v: f64) -> String {
    if v.abs() >= 86_400.0 {
        format!("{:.1} days", v / 86_400.0)
    } else if v.abs() >= 3600.0 {
        format!("{:.1} hours", v / 3600.0)
    } else {
        format!("{v:.0} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(pod: &str, points: &[(f64, f64)]) -> Series {
        Series {
            labels: [("pod".to_string(), pod.to_string())].into_iter().collect(),
            points: points.to_vec(),
        }
    }

    #[test]
    fn a_killed_target_is_a_gap_from_its_last_scrape() {
        let view = OperatorView {
            up: vec![series(
                "machine-config-server-1",
                &[(1.0, 1.0), (2.0, 1.0), (3.0, 0.0), (4.0, 0.0), (5.0, 1.0)],
            )],
            ..OperatorView::default()
        };
        assert_eq!(
            view.gaps(),
            vec![Gap {
                pod: "machine-config-server-1".into(),
                last_up: 2.0,
                first_down: 3.0,
                back: Some(5.0),
            }]
        );
    }

    #[test]
    fn growth_starts_from_the_last_sample_before_the_storm() {
        let mut s = series(
            "a",
            &[(-2.0, 4.0), (-1.0, 5.0), (1.0, 7.0), (2.0, 2.0), (9.0, 9.0)],
        );
        s.labels.insert("pool".into(), "worker".into());
        let grown = growth_by(&[s.clone()], "pool", 5.0, &[]);
        assert_eq!(grown["worker"], 4.0);
        // A process that ended at 1.5 s: its successor counted 2 from 0.
        let grown = growth_by(&[s], "pool", 5.0, &[("a".to_string(), 1.5)]);
        assert_eq!(grown["worker"], 4.0);
    }
}
