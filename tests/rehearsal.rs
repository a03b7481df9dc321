//! A small scale-up rehearsal on every change (`support::rehearsal`, the program of
//! `benches/rehearsal.rs`): 30 machines (one of them Debian's real Ignition client) through
//! haproxy to three replicas, one worker rollout, one layered image proven, one SIGKILL of
//! the Lease holder and a short API brownout, against the in-test API server or, when
//! `KUBEBUILDER_ASSETS` names one, a real kube-apiserver. Every verdict must pass; a failure
//! names its verdict line.

use std::time::Duration;

use support::rehearsal::{self, Knobs};
use support::tier;

#[tier(haproxy, ignition, promtool)]
#[test]
fn a_small_scale_up_through_a_rollout_a_build_and_a_sigkill_passes_every_verdict() {
    let knobs = Knobs {
        machines: 30,
        burst_percent: 40.0,
        burst: Duration::from_secs(2),
        trickle: Duration::from_secs(16),
        failure_percent: 10.0,
        boot: Duration::from_millis(1200),
        restart_after: Duration::from_millis(1500),
        brownout_latency: Duration::from_millis(300),
        brownout_length: Duration::from_secs(2),
        // Every fault of the bench, shorter: the API server down 2 s at 25%, the 410 relist
        // at 38%, one replica cut off for 5 s at 50%, the certificate rotated at 57%, one
        // clock 5 minutes ahead all day.
        api_down: Duration::from_secs(2),
        cutoff: Duration::from_secs(5),
        // The negative knob, as the bench's: one replica's watches never resume after the
        // restart, and the restart's verdict must say so.
        break_watches: std::env::var("MCS_REHEARSAL_BREAK_WATCHES").is_ok_and(|v| v == "1"),
        // A Lease that expires within the test's time (the server's default is 15 s).
        lease: Some(Duration::from_secs(3)),
        deadline: Duration::from_secs(45),
        out_dir: support::mcs::repo().join("target/rehearsal-test"),
        ..Knobs::default()
    };
    let outcome =
        rehearsal::run(&knobs).unwrap_or_else(|e| panic!("the rehearsal could not run: {e}"));
    for verdict in &outcome.verdicts {
        eprintln!("{verdict}");
    }
    eprintln!("{}", outcome.written.fetch_table);
    let failed: Vec<String> = outcome
        .verdicts
        .iter()
        .filter(|v| !v.pass)
        .map(ToString::to_string)
        .collect();
    if !failed.is_empty() {
        for replica in &outcome.facts.replicas {
            eprintln!(
                "--- {} (last lines) ---\n{}",
                replica.name, replica.output_tail
            );
        }
    }
    assert!(
        failed.is_empty(),
        "verdicts failed (report in {}):\n{}",
        outcome.written.table.display(),
        failed.join("\n")
    );
}

/// A cluster's birth (`MCS_REHEARSAL_SCENARIO=install`, `support::rehearsal`'s install): the
/// bootstrap server with `--served-records-kubeconfig` behind haproxy, three masters (one
/// Debian's Ignition) served before the API is up and through its restart, the cluster's
/// replicas coming up beside it, ten workers (some meeting the bootstrap server's 500), the
/// bootstrap server drained and gone. Every verdict must pass: each master's MCN carries the
/// bootstrap server's record, nothing is stranded or lost, both modes serve the same master
/// config.
#[tier(haproxy, ignition, promtool)]
#[test]
fn an_install_from_the_bootstrap_server_to_the_replicas_passes_every_verdict() {
    let knobs = Knobs {
        scenario: rehearsal::Scenario::Install,
        machines: 13,
        burst: Duration::from_secs(1),
        trickle: Duration::from_secs(6),
        boot: Duration::from_millis(1200),
        lease: Some(Duration::from_secs(3)),
        deadline: Duration::from_secs(40),
        out_dir: support::mcs::repo().join("target/rehearsal-install-test"),
        ..Knobs::default()
    };
    let outcome =
        rehearsal::run(&knobs).unwrap_or_else(|e| panic!("the rehearsal could not run: {e}"));
    for verdict in &outcome.verdicts {
        eprintln!("{verdict}");
    }
    let failed: Vec<String> = outcome
        .verdicts
        .iter()
        .filter(|v| !v.pass)
        .map(ToString::to_string)
        .collect();
    if !failed.is_empty() {
        for replica in &outcome.facts.replicas {
            eprintln!(
                "--- {} (last lines) ---\n{}",
                replica.name, replica.output_tail
            );
        }
    }
    assert!(
        failed.is_empty(),
        "verdicts failed (report in {}):\n{}",
        outcome.written.table.display(),
        failed.join("\n")
    );
}

/// The switch (`MCS_REHEARSAL_SCENARIO=switch`, `support::rehearsal`'s switch) with this server
/// under the MCO's own rights standing in for the original (the bench runs the real one): 30
/// machines through haproxy keeping their addresses, the DaemonSet's rolling update to this
/// server and back while they boot, `compare` before and after, `cleanup` at the end. Every
/// verdict must pass.
#[tier(haproxy, ignition, promtool)]
#[test]
fn a_switch_to_this_server_and_back_during_a_scale_up_passes_every_verdict() {
    let knobs = Knobs {
        scenario: rehearsal::Scenario::Switch,
        stand_in_original: true,
        machines: 30,
        burst_percent: 30.0,
        // A third of them land on the rolling update back, while this server's replicas stop.
        wave_percent: 30.0,
        burst: Duration::from_secs(2),
        trickle: Duration::from_secs(30),
        boot: Duration::from_millis(1200),
        lease: Some(Duration::from_secs(3)),
        deadline: Duration::from_secs(45),
        out_dir: support::mcs::repo().join("target/rehearsal-switch-test"),
        ..Knobs::default()
    };
    let outcome =
        rehearsal::run(&knobs).unwrap_or_else(|e| panic!("the rehearsal could not run: {e}"));
    for verdict in &outcome.verdicts {
        eprintln!("{verdict}");
    }
    let failed: Vec<String> = outcome
        .verdicts
        .iter()
        .filter(|v| !v.pass)
        .map(ToString::to_string)
        .collect();
    if !failed.is_empty() {
        for replica in &outcome.facts.replicas {
            eprintln!(
                "--- {} (last lines) ---\n{}",
                replica.name, replica.output_tail
            );
        }
    }
    assert!(
        failed.is_empty(),
        "verdicts failed (report in {}):\n{}",
        outcome.written.table.display(),
        failed.join("\n")
    );
}
