//! HyperShift's payload time (issue 52): from the exec of `machine-config-server bootstrap`
//! with HyperShift's arguments to the first 200 of `http://localhost:22626/config/master` at
//! spec 3.2.0, what `ign_server_payload_generation_seconds` counts for the server's part,
//! ours beside the original (`MCS_BENCH_ORIGINAL`), generations alternated, each in a network
//! namespace of its own (`support::hypershift`; run as root).
//!
//! Two pollers per server: HyperShift's own (the first request at once, then one a second,
//! which is what a NodePool waits for) and a 10 ms one (when the server really answers: where
//! the time goes). Prints the median, minimum and maximum of each over the runs, checks every
//! payload is the same bytes, and exits 1 when ours is not faster than the original under the
//! 10 ms poller or needs more of HyperShift's polls.
//!
//! Knobs: `MCS_BENCH_FIXTURE` (a bootstrap directory with a `kubeconfig`; default the upstream
//! realistic fixture under `MCS_UPSTREAM_ASSETS`, else `config/bootstrap`),
//! `MCS_BENCH_RUNS` (default 7), `MCS_BENCH_ORIGINAL` (the original's binary; without it only
//! ours is measured), `MCS_BENCH_BINARY` (ours; default the one cargo built).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use support::hypershift::{self, PayloadDir, POLL_INTERVAL};

const DEADLINE: Duration = Duration::from_secs(60);
const FINE_POLL: Duration = Duration::from_millis(10);
const PAYLOAD_VERSION: &str = "4.21.0";

struct Sample {
    hypershift: Duration,
    /// HyperShift's polls until the 200 (its time is about one second per refused poll).
    polls: u32,
    fine: Duration,
}

fn median(mut values: Vec<Duration>) -> (Duration, Duration, Duration) {
    values.sort();
    (
        values[values.len() / 2],
        values[0],
        values[values.len() - 1],
    )
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn main() -> ExitCode {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let fixture = var("MCS_BENCH_FIXTURE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            var("MCS_UPSTREAM_ASSETS")
                .map(|dir| PathBuf::from(dir).join("fixtures/bootstrap-realistic"))
                .filter(|dir| dir.is_dir())
                .unwrap_or_else(|| support::mcs::repo().join("config/bootstrap"))
        });
    let runs: usize = var("MCS_BENCH_RUNS")
        .and_then(|v| v.to_str()?.parse().ok())
        .unwrap_or(7)
        .max(1);
    let ours = var("MCS_BENCH_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(support::mcs::bin);
    let mut servers = vec![("ours", ours)];
    match var("MCS_BENCH_ORIGINAL") {
        Some(original) => servers.push(("original", PathBuf::from(original))),
        None => eprintln!("hypershift: MCS_BENCH_ORIGINAL unset: only this server is measured"),
    }
    let dir = PayloadDir::from_bootstrap_dir(&fixture);
    let arguments = dir.arguments(PAYLOAD_VERSION);
    eprintln!(
        "hypershift: {} on {}, {runs} runs per server and poller",
        servers
            .iter()
            .map(|(name, path)| format!("{name} = {}", path.display()))
            .collect::<Vec<_>>()
            .join(", "),
        fixture.display()
    );
    let mut samples: Vec<Vec<Sample>> = servers.iter().map(|_| Vec::new()).collect();
    let mut payloads: Vec<Option<Vec<u8>>> = servers.iter().map(|_| None).collect();
    for run in 0..runs {
        // Alternate who goes first, so drift on the machine falls on both alike.
        let mut order: Vec<usize> = (0..servers.len()).collect();
        if run % 2 == 1 {
            order.reverse();
        }
        for index in order {
            let (name, binary) = servers[index].clone();
            let arguments = arguments.clone();
            let measured = hypershift::in_network_namespace(move || {
                let slow = hypershift::generate(&binary, &arguments, POLL_INTERVAL, DEADLINE)?;
                let fine = hypershift::generate(&binary, &arguments, FINE_POLL, DEADLINE)?;
                Ok::<_, String>((slow, fine))
            });
            let (slow, fine) = match measured {
                Ok(Ok(pair)) => pair,
                Ok(Err(why)) | Err(why) => {
                    eprintln!("hypershift: {name}: {why}");
                    return ExitCode::from(2);
                }
            };
            if slow.payload != fine.payload {
                eprintln!("hypershift: {name} answered two different payloads");
                return ExitCode::FAILURE;
            }
            payloads[index].get_or_insert(slow.payload.clone());
            samples[index].push(Sample {
                hypershift: slow.elapsed,
                polls: slow.attempts,
                fine: fine.elapsed,
            });
        }
    }
    println!(
        "server\tHyperShift's poller (1 s): median ms (min-max)\tits polls (median)\t10 ms poller: median ms (min-max)\tpayload bytes"
    );
    let mut medians = Vec::new();
    for (index, (name, _)) in servers.iter().enumerate() {
        let (h, h_min, h_max) = median(samples[index].iter().map(|s| s.hypershift).collect());
        let (f, f_min, f_max) = median(samples[index].iter().map(|s| s.fine).collect());
        let mut polls: Vec<u32> = samples[index].iter().map(|s| s.polls).collect();
        polls.sort();
        let polls = polls[polls.len() / 2];
        println!(
            "{name}\t{} ({}-{})\t{polls}\t{} ({}-{})\t{}",
            ms(h),
            ms(h_min),
            ms(h_max),
            ms(f),
            ms(f_min),
            ms(f_max),
            payloads[index].as_ref().map_or(0, Vec::len)
        );
        medians.push((h, polls, f));
    }
    if servers.len() < 2 {
        return ExitCode::SUCCESS;
    }
    let same = payloads[0] == payloads[1];
    println!(
        "payloads {}",
        if same {
            "byte-identical"
        } else {
            "DIFFER (see docs/compatibility.md)"
        }
    );
    let ((ours_h, ours_polls, ours_f), (theirs_h, theirs_polls, theirs_f)) =
        (medians[0], medians[1]);
    println!(
        "ratio ours/original: HyperShift's poller {:.2}, 10 ms poller {:.2}",
        ours_h.as_secs_f64() / theirs_h.as_secs_f64(),
        ours_f.as_secs_f64() / theirs_f.as_secs_f64()
    );
    // Under HyperShift's poller both answer at some tick of its one-second clock: ours must not
    // need more ticks; the 10 ms poller tells the real difference.
    if ours_f < theirs_f && ours_polls <= theirs_polls && same {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
