//! A scale-up rehearsed end to end (issue 39): three replicas of `machine-config-server start`
//! behind one haproxy (TCP, PROXY v2, health checks), machines that speak exactly as Ignition
//! does arriving in a burst and then a trickle (one of them Debian's real Ignition client),
//! the cluster's side played through the API, and during the storm a worker rollout, a layered
//! image build, a SIGKILL of the Lease holder and an API brownout (`support::rehearsal`).
//!
//! `cargo bench --bench rehearsal` prints one `PASS`/`FAIL` line per verdict and the fetch
//! times per pool, writes the timeline (SVG and CSV) under `target/rehearsal/`, and exits 1 when
//! a verdict fails. Against a real kube-apiserver when `KUBEBUILDER_ASSETS` names one (the real
//! CRDs from `MCS_UPSTREAM_ASSETS`), else the in-test API server. Knobs: `MCS_REHEARSAL_*`
//! (benches/README.md).

use std::process::ExitCode;

use support::rehearsal::{self, Knobs};

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; this target has no other arguments.
    let knobs = match Knobs::from_env() {
        Ok(knobs) => knobs,
        Err(e) => {
            eprintln!("rehearsal: {e}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "rehearsal: {} machines over {:.0} s, report in {}",
        knobs.machines,
        (knobs.burst + knobs.trickle).as_secs_f64(),
        knobs.out_dir.display()
    );
    let outcome = match rehearsal::run(&knobs) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("rehearsal could not run: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "rehearsal: {} machines, {} replicas, {}; storm {:.1} s, MCNs settled {:.1} s later",
        outcome.facts.machines.len(),
        outcome.facts.replicas.len(),
        outcome.facts.api,
        outcome.facts.storm.as_secs_f64(),
        outcome.facts.settle_wait.as_secs_f64()
    );
    println!("\n{}", outcome.written.fetch_table);
    for verdict in &outcome.verdicts {
        println!("{verdict}");
    }
    println!(
        "\ntimeline: {} ({}); machines: {}; summary: {}",
        outcome.written.svg.display(),
        outcome.written.csv.display(),
        outcome.written.machines_csv.display(),
        outcome.written.table.display()
    );
    if let Some(dashboard) = &outcome.written.dashboard {
        println!(
            "the console dashboard as Prometheus saw the run: {}",
            dashboard.display()
        );
    }
    if outcome.passed() {
        ExitCode::SUCCESS
    } else {
        for replica in &outcome.facts.replicas {
            eprintln!(
                "--- {} (last lines) ---\n{}",
                replica.name, replica.output_tail
            );
        }
        ExitCode::FAILURE
    }
}
