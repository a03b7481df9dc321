//! Ignition engine benchmark (`cargo bench --bench ignition`): parse + translate + serialize
//! of the full-size rendered master config of the project's fixture, once per served spec version, next to a baseline
//! measured in the same run: a plain `serde_json` parse + serialize of the same document (the
//! least any server must do with it). Results are reported as ratios to that baseline; see
//! benches/README.md. A small std-only harness: median of timed batches, no statistics crate.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use machine_config_server::ignition::{parse_config, serialize_as, SpecVersion};
use serde_json::Value;

const FIXTURE: &str = "tests/fixtures/generated/bootstrap-full/machine-configs/rendered-master-b19762bf2111d4787ac714352cb8a882.yaml";

/// Median time of one call, from `batches` batches each running at least `min_batch`.
fn measure(mut f: impl FnMut(), batches: usize, min_batch: Duration) -> Duration {
    // Warm up and size a batch.
    let mut per_batch = 1u32;
    loop {
        let start = Instant::now();
        for _ in 0..per_batch {
            f();
        }
        if start.elapsed() >= min_batch {
            break;
        }
        per_batch = per_batch.saturating_mul(2);
    }
    let mut samples: Vec<Duration> = (0..batches)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_batch {
                f();
            }
            start.elapsed() / per_batch
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {} must exist: {e}", path.display()));
    let mc: Value = serde_yaml::from_str(&text).expect("fixture is YAML");
    let raw = mc.pointer("/spec/config").cloned().expect("spec.config");
    let raw_bytes = serde_json::to_vec(&raw).expect("JSON");
    let quick = std::env::args().any(|a| a == "--quick");
    let (batches, min_batch) = if quick {
        (5, Duration::from_millis(20))
    } else {
        (15, Duration::from_millis(200))
    };

    let baseline = measure(
        || {
            let v: Value = serde_json::from_slice(black_box(&raw_bytes)).expect("JSON");
            black_box(serde_json::to_vec(&v).expect("JSON"));
        },
        batches,
        min_batch,
    );
    println!(
        "ignition bench: {} ({} bytes of spec.config)",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("fixture"),
        raw_bytes.len()
    );
    println!(
        "{:<34} {:>12} {:>10} {:>12}",
        "case", "median", "ratio", "output"
    );
    println!(
        "{:<34} {:>9.1} µs {:>10} {:>12}",
        "baseline: serde_json parse+write",
        baseline.as_secs_f64() * 1e6,
        "1.0x",
        raw_bytes.len()
    );
    for version in SpecVersion::ALL.into_iter().rev() {
        let mut size = 0;
        let time = measure(
            || {
                let config = parse_config(Some(black_box(&raw))).expect("parses");
                let bytes = serialize_as(&config, version).expect("translates");
                size = bytes.len();
                black_box(bytes);
            },
            batches,
            min_batch,
        );
        println!(
            "{:<34} {:>9.1} µs {:>9.1}x {:>12}",
            format!("parse + translate + write {version}"),
            time.as_secs_f64() * 1e6,
            time.as_secs_f64() / baseline.as_secs_f64(),
            size
        );
    }
}
