//! The report a person looks at, under the run's `out_dir` (`target/rehearsal/` by default):
//!
//! - `timeline.svg`: machines arrived, served, joined and with a complete MCN over time; 5xx,
//!   connection errors and retries per second; requests per second per replica; the kill, the
//!   restart, the rollout, the build, both proofs and the brownout marked (drawn with
//!   `plotters`' SVG backend);
//! - `timeline.csv`: the same series, one row per second;
//! - `machines.csv`: one row per machine (what it asked, what it got, from which replica, when);
//! - `api-writes.csv` and `api-reads.csv`: every write and every read (lists, watches) of
//!   every replica to the API (its fault proxy's log), and
//!   `<replica>.log`: what each replica printed;
//! - `fetch-times.md`: p50/p99/max fetch time per pool, and the verdicts;
//! - `dashboard.svg`: the console dashboard's panels as a real Prometheus saw the run
//!   ([`super::dashboard`]), and `prometheus.log`: what it logged.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use plotters::prelude::*;

use super::plan::Pool;
use super::verdict::{percentile, replica_of, served_by, Verdict};
use super::{replica_name, Facts};

/// The files written.
#[derive(Clone, Debug)]
pub struct Written {
    pub svg: PathBuf,
    pub csv: PathBuf,
    pub machines_csv: PathBuf,
    pub table: PathBuf,
    /// The console dashboard's panels as Prometheus saw the run (when it watched).
    pub dashboard: Option<PathBuf>,
    /// The fetch-time table, as printed.
    pub fetch_table: String,
}

/// Per-second series of the run.
struct Series {
    seconds: usize,
    arrived: Vec<usize>,
    served: Vec<usize>,
    joined: Vec<usize>,
    mcn_complete: Vec<usize>,
    server_errors: Vec<usize>,
    transport_errors: Vec<usize>,
    retries: Vec<usize>,
    per_replica: Vec<Vec<usize>>,
    /// The switch: requests per second by which server answered (the original, this server).
    per_kind: Vec<(&'static str, Vec<usize>)>,
}

fn bucket(at: Duration) -> usize {
    at.as_secs() as usize
}

fn cumulative(times: impl Iterator<Item = Duration>, seconds: usize) -> Vec<usize> {
    let mut per = vec![0usize; seconds];
    for at in times {
        per[bucket(at).min(seconds - 1)] += 1;
    }
    per.iter()
        .scan(0, |sum, n| {
            *sum += n;
            Some(*sum)
        })
        .collect()
}

fn series(facts: &Facts) -> Series {
    let end = facts.storm + facts.settle_wait;
    let seconds = bucket(end) + 1;
    let per_second = |times: &mut dyn Iterator<Item = Duration>| {
        let mut out = vec![0usize; seconds];
        for at in times {
            out[bucket(at).min(seconds - 1)] += 1;
        }
        out
    };
    let attempts = || facts.machines.iter().flat_map(|m| m.fetch.attempts.iter());
    let mut per_replica = vec![vec![0usize; seconds]; facts.replicas.len()];
    let kinds = [super::ServerKind::Original, super::ServerKind::Ours];
    let mut per_kind: Vec<(&'static str, Vec<usize>)> = match &facts.switch {
        Some(_) => kinds
            .iter()
            .map(|k| (k.label(), vec![0usize; seconds]))
            .collect(),
        None => Vec::new(),
    };
    for attempt in attempts() {
        if let Some(replica) = attempt
            .local
            .and_then(|local| replica_of(facts, local, attempt.started))
        {
            let second = bucket(attempt.ended).min(seconds - 1);
            if let Some(row) = per_replica.get_mut(replica) {
                row[second] += 1;
            }
            let kind = facts
                .switch
                .as_ref()
                .and_then(|switch| switch.kind_at(replica, attempt.started));
            if let Some(kind) = kind {
                let index = kinds.iter().position(|k| *k == kind).unwrap_or(0);
                per_kind[index].1[second] += 1;
            }
        }
    }
    Series {
        seconds,
        arrived: cumulative(facts.machines.iter().map(|m| m.plan.arrives), seconds),
        served: cumulative(
            facts
                .machines
                .iter()
                .filter_map(|m| m.served.as_ref().map(|s| s.at)),
            seconds,
        ),
        joined: cumulative(
            facts
                .machines
                .iter()
                .filter_map(|m| m.joined.as_ref().map(|j| j.0)),
            seconds,
        ),
        mcn_complete: cumulative(facts.mcn_complete.values().copied(), seconds),
        server_errors: per_second(
            &mut attempts()
                .filter(|a| a.status().is_some_and(|s| s >= 500))
                .map(|a| a.ended),
        ),
        transport_errors: per_second(
            &mut attempts().filter(|a| a.status().is_none()).map(|a| a.ended),
        ),
        retries: per_second(
            &mut facts
                .machines
                .iter()
                .flat_map(|m| m.fetch.attempts.iter().skip(1))
                .map(|a| a.started),
        ),
        per_replica,
        per_kind,
    }
}

/// The marked moments: (seconds, label).
fn marks(facts: &Facts) -> Vec<(f64, String)> {
    let m = &facts.marks;
    let mut out = Vec::new();
    let mut push = |at: Option<Duration>, label: &str| {
        if let Some(at) = at {
            out.push((at.as_secs_f64(), label.to_string()));
        }
    };
    push(m.build_started, "build starts");
    push(m.rollout.map(|r| r.0), "worker rollout");
    push(m.build_succeeded.map(|r| r.0), "build succeeded");
    push(m.kill, "SIGKILL");
    push(m.restarted, "restarted");
    push(m.worker_proof.map(|r| r.1), "worker proof");
    push(m.layered_proof.map(|r| r.1), "image proof");
    for (at, label) in &m.phases {
        push(Some(*at), label);
    }
    // The secure frontend's view of each replica (the plain one says the same); haproxy says
    // each change twice (its log and its console).
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    for (at, change) in &m.balancer {
        let Some((server, state)) = change
            .strip_prefix("b0/r")
            .and_then(|rest| rest.split_once(" is "))
        else {
            continue;
        };
        if last
            .insert(server.to_string(), state.to_string())
            .as_deref()
            == Some(state)
        {
            continue;
        }
        if let Ok(index) = server.parse::<usize>() {
            out.push((
                at.as_secs_f64(),
                format!(
                    "balancer: {} {state}",
                    super::verdict::backend_name(facts, index)
                ),
            ));
        }
    }
    out
}

/// The faults' periods, drawn as shaded bands with their names: (from, to, label, color). The
/// skewed clock lasts all day and is named in the title instead.
pub(super) fn bands(facts: &Facts) -> Vec<(f64, f64, String, RGBColor)> {
    use super::FaultKind;
    let mut out: Vec<(f64, f64, String, RGBColor)> = facts
        .marks
        .faults
        .iter()
        .filter(|f| f.kind != FaultKind::ClockAhead)
        .map(|f| {
            let color = match f.kind {
                FaultKind::ApiRestart => RGBColor(214, 39, 40),
                FaultKind::Compaction => RGBColor(148, 103, 189),
                FaultKind::Rotation => RGBColor(44, 160, 44),
                FaultKind::CutOff => RGBColor(255, 127, 14),
                FaultKind::ClockAhead => RGBColor(127, 127, 127),
            };
            let label = match f.replica {
                Some(index) => format!(
                    "{} ({})",
                    f.kind.label(),
                    super::verdict::backend_name(facts, index)
                ),
                None => f.kind.label().to_string(),
            };
            (f.began.as_secs_f64(), f.ended.as_secs_f64(), label, color)
        })
        .collect();
    if let Some((from, to)) = facts.marks.brownout {
        out.push((
            from.as_secs_f64(),
            to.as_secs_f64(),
            "API brownout".into(),
            RGBColor(140, 86, 75),
        ));
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The skewed replica, for the title.
fn clock_note(facts: &Facts) -> String {
    facts
        .marks
        .faults
        .iter()
        .find(|f| f.kind == super::FaultKind::ClockAhead)
        .and_then(|f| f.replica)
        .map(|index| {
            format!(
                "; {}'s clock {} s ahead",
                super::verdict::backend_name(facts, index),
                facts.knobs.clock_ahead.as_secs()
            )
        })
        .unwrap_or_default()
}

/// The bands on a chart of counts: shaded from bottom to `top`, each name near the bottom on
/// the lowest row where it runs into no other (`seconds_per_char`: the chart's scale).
fn draw_bands<DB: DrawingBackend>(
    chart: &mut ChartContext<
        DB,
        Cartesian2d<
            plotters::coord::types::RangedCoordf64,
            plotters::coord::types::RangedCoordusize,
        >,
    >,
    bands: &[(f64, f64, String, RGBColor)],
    top: usize,
    seconds_per_char: f64,
    labelled: bool,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let mut row_ends: Vec<f64> = Vec::new();
    for (from, to, label, color) in bands {
        let to = to.max(from + 0.2);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(*from, 0usize), (to, top)],
            color.mix(0.13).filled(),
        )))?;
        if !labelled {
            continue;
        }
        let start = *from + 0.2;
        let row = row_ends
            .iter()
            .position(|end| *end < start)
            .unwrap_or(row_ends.len());
        let end = start + label.len() as f64 * seconds_per_char;
        match row_ends.get_mut(row) {
            Some(slot) => *slot = end,
            None => row_ends.push(end),
        }
        let y = (top / 40).max(1) + row * (top / 22).max(1);
        chart.draw_series(std::iter::once(Text::new(
            label.clone(),
            (start, y),
            ("sans-serif", 13).into_font().color(color),
        )))?;
    }
    Ok(())
}

/// Writes every file of the report.
pub fn write(facts: &Facts, verdicts: &[Verdict]) -> Result<Written, String> {
    let dir = &facts.knobs.out_dir;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let series = series(facts);
    let written = Written {
        svg: dir.join("timeline.svg"),
        csv: dir.join("timeline.csv"),
        machines_csv: dir.join("machines.csv"),
        table: dir.join("fetch-times.md"),
        dashboard: facts.operator.as_ref().map(|_| dir.join("dashboard.svg")),
        fetch_table: fetch_table(facts),
    };
    let save = |path: &PathBuf, text: String| {
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    save(&written.csv, timeline_csv(facts, &series))?;
    let mut writes = String::from("replica,second,kind,method,status,uri\n");
    for replica in &facts.replicas {
        save(
            &dir.join(format!("{}.log", replica.name)),
            replica.output.clone(),
        )?;
        for write in &replica.writes {
            let _ = writeln!(
                writes,
                "{},{:.3},{:?},{},{},{}",
                replica.name,
                write.at.as_secs_f64(),
                write.kind,
                write.method,
                write.status,
                write.uri
            );
        }
    }
    save(&dir.join("api-writes.csv"), writes)?;
    let mut reads = String::from("replica,second,watch,status,uri\n");
    for replica in &facts.replicas {
        for (at, uri, status, watch) in &replica.reads {
            let _ = writeln!(
                reads,
                "{},{:.3},{watch},{status},{uri}",
                replica.name,
                at.as_secs_f64()
            );
        }
    }
    save(&dir.join("api-reads.csv"), reads)?;
    save(&written.machines_csv, machines_csv(facts))?;
    let mut table = format!(
        "# Rehearsal: {} machines, {} replicas, {}\n\n{}\n## Verdicts\n\n",
        facts.machines.len(),
        facts.replicas.len(),
        facts.api,
        written.fetch_table
    );
    for verdict in verdicts {
        let _ = writeln!(table, "- {verdict}");
    }
    save(&written.table, table)?;
    draw(facts, &series, &written.svg).map_err(|e| format!("timeline.svg: {e}"))?;
    if let Some(path) = &written.dashboard {
        super::dashboard::draw(facts, &marks(facts), &bands(facts), path)?;
        if let Some(view) = &facts.operator {
            save(&dir.join("prometheus.log"), view.log.clone())?;
            // The raw samples behind the counts' verdict, to check it by hand.
            let mut samples = String::from("series,labels,second,value\n");
            for (name, series) in [
                ("served", &view.served),
                ("reports", &view.reports),
                ("up", &view.up),
            ] {
                for s in series.iter() {
                    let labels: Vec<String> = s
                        .labels
                        .iter()
                        .filter(|(k, _)| !matches!(k.as_str(), "__name__" | "job" | "instance"))
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect();
                    for (at, value) in &s.points {
                        let _ = writeln!(samples, "{name},{},{at:.3},{value}", labels.join(" "));
                    }
                }
            }
            save(&dir.join("prometheus-samples.csv"), samples)?;
        }
    }
    Ok(written)
}

fn timeline_csv(facts: &Facts, series: &Series) -> String {
    let mut out = String::from(
        "second,arrived,served,joined,mcn_complete,server_errors,connection_errors,retries",
    );
    for index in 0..series.per_replica.len() {
        let _ = write!(out, ",requests_{}", replica_name(index));
    }
    out.push_str(",marks\n");
    let marks = marks(facts);
    for s in 0..series.seconds {
        let _ = write!(
            out,
            "{s},{},{},{},{},{},{},{}",
            series.arrived[s],
            series.served[s],
            series.joined[s],
            series.mcn_complete[s],
            series.server_errors[s],
            series.transport_errors[s],
            series.retries[s]
        );
        for row in &series.per_replica {
            let _ = write!(out, ",{}", row[s]);
        }
        let here: Vec<&str> = marks
            .iter()
            .filter(|(at, _)| *at as usize == s)
            .map(|(_, label)| label.as_str())
            .collect();
        let _ = writeln!(out, ",{}", here.join(";"));
    }
    out
}

fn machines_csv(facts: &Facts) -> String {
    let mut out = String::from(
        "name,pool,address,client,ignition,asked,fate,arrived_s,attempts,status,served_s,replica,rendered_config,image,spec,joined_s,mcn_complete_s\n",
    );
    let s = |d: Option<Duration>| {
        d.map(|d| format!("{:.3}", d.as_secs_f64()))
            .unwrap_or_default()
    };
    for run in &facts.machines {
        let served = run.served.as_ref();
        let _ = writeln!(
            out,
            "{},{},{},{:?},{},{},{:?},{},{},{},{},{},{},{},{},{},{}",
            run.plan.name,
            run.plan.pool.name(),
            run.plan.address,
            run.plan.client,
            run.plan.release.version,
            run.plan.release.asks,
            run.plan.fate,
            s(Some(run.plan.arrives)),
            run.fetch.attempts.len(),
            run.fetch
                .final_status()
                .map(|c| c.to_string())
                .unwrap_or_default(),
            s(served.map(|x| x.at)),
            served_by(facts, run).map(replica_name).unwrap_or_default(),
            served
                .map(|x| x.rendered_config.as_str())
                .unwrap_or_default(),
            served.and_then(|x| x.image.as_deref()).unwrap_or_default(),
            served.map(|x| x.spec.as_str()).unwrap_or_default(),
            s(run.joined.as_ref().map(|j| j.0)),
            s(facts.mcn_complete.get(&run.plan.name).copied()),
        );
    }
    out
}

/// Per pool: machines, attempts, and the time from a machine's first attempt to its config
/// (p50, p99, max).
pub fn fetch_table(facts: &Facts) -> String {
    let mut rows: BTreeMap<Pool, (usize, usize, Vec<Duration>)> = BTreeMap::new();
    for run in &facts.machines {
        let row = rows.entry(run.plan.pool).or_default();
        row.0 += 1;
        row.1 += run.fetch.attempts.len();
        if let (Some(served), Some(first)) = (&run.served, run.fetch.attempts.first()) {
            row.2.push(served.at.saturating_sub(first.started));
        }
    }
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    let mut out = String::from(
        "| pool | machines | attempts | fetch p50 | fetch p99 | fetch max |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (pool, (machines, attempts, times)) in rows {
        let _ = writeln!(
            out,
            "| {} | {machines} | {attempts} | {} | {} | {} |",
            pool.name(),
            ms(percentile(&times, 50.0)),
            ms(percentile(&times, 99.0)),
            ms(times.iter().max().copied().unwrap_or_default())
        );
    }
    // Each replica's memory: its process at the end, and the one killed, just before.
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    out.push_str("\n| replica | resident at the end | peak | peak before the SIGKILL |\n|---|---:|---:|---:|\n");
    for replica in &facts.replicas {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            replica.name,
            mib(replica.end.resident_kib),
            mib(replica.end.peak_kib),
            replica
                .before_kill
                .as_ref()
                .map_or("-".to_string(), |s| mib(s.peak_kib))
        );
    }
    out
}

fn draw(facts: &Facts, series: &Series, path: &PathBuf) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1400, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = match facts.knobs.scenario {
        super::Scenario::ScaleUp => "Scale-up rehearsal",
        super::Scenario::Install => "Install rehearsal (bootstrap server, then the replicas)",
        super::Scenario::Switch => "Switch rehearsal (the original to this server and back)",
    };
    let root = root.titled(
        &format!(
            "{title}: {} machines, {} servers behind haproxy, {}{}",
            facts.machines.len(),
            facts.replicas.len(),
            facts.api,
            clock_note(facts)
        ),
        ("sans-serif", 22),
    )?;
    let (top, bottom) = root.split_vertically(520);
    let x_end = series.seconds as f64;
    let marks = marks(facts);

    let machines = facts.machines.len().max(1);
    let mut chart = ChartBuilder::on(&top)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .caption("machines over time", ("sans-serif", 18))
        .build_cartesian_2d(0f64..x_end, 0usize..machines + machines / 10 + 1)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first machine")
        .y_desc("machines")
        .draw()?;
    let lines: [(&str, &Vec<usize>, RGBColor); 4] = [
        ("arrived", &series.arrived, RGBColor(120, 120, 120)),
        ("served (200)", &series.served, RGBColor(31, 119, 180)),
        ("joined (Node)", &series.joined, RGBColor(44, 160, 44)),
        (
            "MCN record complete",
            &series.mcn_complete,
            RGBColor(148, 103, 189),
        ),
    ];
    for (label, values, color) in lines {
        chart
            .draw_series(LineSeries::new(
                values.iter().enumerate().map(|(s, v)| (s as f64 + 1.0, *v)),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    let top_y = machines + machines / 10;
    let bands = bands(facts);
    draw_bands(&mut chart, &bands, top_y, x_end / (1300.0 / 8.0), true)?;
    // Each label on the highest level where it does not run into the previous one (the plot
    // is about 1300 px wide; a character of the labels' font about 8 px).
    let seconds_per_char = x_end / (1300.0 / 8.0);
    let mut level_ends: Vec<f64> = Vec::new();
    let mut sorted = marks.clone();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (at, label) in &sorted {
        // The balancer's view in grey, the day's events in red; labels on six levels so that
        // close events stay readable.
        let color = if label.starts_with("balancer") {
            RGBColor(110, 110, 110)
        } else {
            RGBColor(214, 39, 40)
        };
        chart.draw_series(LineSeries::new(
            vec![(*at, 0usize), (*at, top_y)],
            color.mix(0.6).stroke_width(1),
        ))?;
        let start = *at + 0.3;
        let level = level_ends
            .iter()
            .position(|end| *end < start)
            .unwrap_or(level_ends.len());
        let end = start + label.len() as f64 * seconds_per_char;
        match level_ends.get_mut(level) {
            Some(slot) => *slot = end,
            None => level_ends.push(end),
        }
        let y = top_y.saturating_sub(level * (top_y / 18).max(1));
        chart.draw_series(std::iter::once(Text::new(
            label.clone(),
            (start, y),
            ("sans-serif", 13).into_font().color(&color),
        )))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    let peak = series
        .per_replica
        .iter()
        .flatten()
        .chain(series.per_kind.iter().flat_map(|(_, row)| row))
        .chain(&series.server_errors)
        .chain(&series.transport_errors)
        .chain(&series.retries)
        .copied()
        .max()
        .unwrap_or(1)
        .max(1);
    let mut rates = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .caption(
            "per second: requests per replica (as machines saw them), 5xx, connection errors, retries",
            ("sans-serif", 18),
        )
        .build_cartesian_2d(0f64..x_end, 0usize..peak + peak / 10 + 1)?;
    rates
        .configure_mesh()
        .x_desc("seconds since the first machine")
        .y_desc("per second")
        .draw()?;
    let palette = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(140, 86, 75),
        RGBColor(23, 190, 207),
    ];
    for (index, row) in series.per_replica.iter().enumerate() {
        let color = palette[index % palette.len()];
        rates
            .draw_series(LineSeries::new(
                row.iter().enumerate().map(|(s, v)| (s as f64 + 0.5, *v)),
                color.stroke_width(2),
            ))?
            .label(format!(
                "requests, {}",
                super::verdict::backend_name(facts, index)
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    for (index, (label, row)) in series.per_kind.iter().enumerate() {
        let color = [RGBColor(90, 90, 90), RGBColor(227, 119, 194)][index % 2];
        rates
            .draw_series(LineSeries::new(
                row.iter().enumerate().map(|(s, v)| (s as f64 + 0.5, *v)),
                color.stroke_width(4),
            ))?
            .label(format!("answered by {label}"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(4))
            });
    }
    let problems: [(&str, &Vec<usize>, RGBColor); 3] = [
        ("5xx", &series.server_errors, RGBColor(214, 39, 40)),
        (
            "connection errors",
            &series.transport_errors,
            RGBColor(227, 119, 194),
        ),
        ("retries", &series.retries, RGBColor(127, 127, 127)),
    ];
    for (label, values, color) in problems {
        rates
            .draw_series(
                values
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v > 0)
                    .map(|(s, v)| Circle::new((s as f64 + 0.5, *v), 3, color.filled())),
            )?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 9, y), 3, color.filled()));
    }
    draw_bands(
        &mut rates,
        &bands,
        peak + peak / 10,
        x_end / (1300.0 / 8.0),
        false,
    )?;
    for (at, _) in &marks {
        rates.draw_series(LineSeries::new(
            vec![(*at, 0usize), (*at, peak + peak / 10)],
            RGBColor(214, 39, 40).mix(0.6).stroke_width(1),
        ))?;
    }
    rates
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
