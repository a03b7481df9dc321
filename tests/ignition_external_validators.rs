//! Translated outputs checked by validators we did not write: Debian's `ignition-validate`
//! (Ignition 2.14: specs 3.0-3.3, and 3.4 as `3.4.0-experimental`) and the upstream JSON
//! schemas of specs 3.0-3.6 (upstream tier, `MCS_UPSTREAM_ASSETS`). The corpus covers every
//! field the translation touches, plus the project's full-size rendered MachineConfigs and,
//! when the upstream assets are there, the upstream-rendered ones.

#[path = "support/fixtures.rs"]
mod fixtures;
mod ignition_common;
#[path = "support/validators.rs"]
mod validators;

use validators::upstream;

use std::path::{Path, PathBuf};

use ignition_common::{corpus, Sample};
use machine_config_server::ignition::{parse_config, to_value_as, SpecVersion};
use serde_json::Value;
use validators::{assert_matches_schema, ignition_validate, run_ignition_validate, schema};

/// The corpus plus the rendered configs of the project's fixture and, when available, of the
/// upstream-rendered fixture.
fn all_samples() -> Vec<Sample> {
    let mut samples = corpus();
    samples.extend(rendered_samples(
        &fixtures::bootstrap_full().join("machine-configs"),
        "full-size fixture",
    ));
    if let Some(upstream) = upstream::realistic_fixture() {
        samples.extend(rendered_samples(
            &upstream.join("machine-configs"),
            "upstream-rendered fixture",
        ));
    }
    samples
}

fn rendered_samples(dir: &Path, name: &'static str) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("fixture directory {} must exist: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let mc: Value = serde_yaml::from_str(&text).expect("YAML MachineConfig");
        let config = parse_config(mc.pointer("/spec/config")).expect("fixture parses");
        samples.push(Sample {
            name,
            config,
            oldest_3x: SpecVersion::V3_0,
            serves_2_2: true,
        });
    }
    samples
}

fn servable(sample: &Sample) -> Vec<SpecVersion> {
    SpecVersion::ALL
        .into_iter()
        .filter(|v| {
            if *v == SpecVersion::V2_2 {
                sample.serves_2_2
            } else {
                *v >= sample.oldest_3x
            }
        })
        .collect()
}

#[test]
fn ignition_validate_accepts_every_3_0_to_3_4_output() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut checked = 0;
    for sample in all_samples() {
        for version in servable(&sample) {
            let value = to_value_as(&sample.config, version)
                .unwrap_or_else(|e| panic!("{} as {version}: {e}", sample.name));
            let label = format!("{} as {version}", sample.name);
            if ignition_validate(dir.path(), &label, &value) {
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} outputs were validated");
}

#[test]
fn ignition_validate_rejects_what_it_should() {
    // The harness itself must be able to fail: a relative path is fatal for the validator.
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = serde_json::json!({"ignition": {"version": "3.3.0"}, "storage": {"files": [{"path": "relative"}]}});
    assert!(!run_ignition_validate(dir.path(), &bad).0);
}

#[test]
fn outputs_match_the_upstream_json_schemas() {
    let schemas: Vec<(SpecVersion, jsonschema::Validator)> = [
        (SpecVersion::V3_0, 0),
        (SpecVersion::V3_1, 1),
        (SpecVersion::V3_2, 2),
        (SpecVersion::V3_3, 3),
        (SpecVersion::V3_4, 4),
        (SpecVersion::V3_5, 5),
    ]
    .into_iter()
    .map(|(v, minor)| Some((v, schema(minor)?)))
    .collect::<Option<_>>()
    .unwrap_or_default();
    let Some(v3_6) = schema(6) else {
        return;
    };
    let mut checked = 0;
    for sample in all_samples() {
        for (version, validator) in &schemas {
            if *version < sample.oldest_3x {
                continue;
            }
            let value = to_value_as(&sample.config, *version)
                .unwrap_or_else(|e| panic!("{} as {version}: {e}", sample.name));
            let label = format!("{} as {version}", sample.name);
            assert_matches_schema(validator, &label, &value);
            checked += 1;
            if *version == SpecVersion::V3_5 {
                // 3.6 only adds to 3.5: our newest output must fit it unchanged.
                assert_matches_schema(&v3_6, &format!("{label} (3.6 schema)"), &value);
            }
        }
    }
    assert!(checked >= 20, "only {checked} outputs were checked");
}

#[test]
fn schema_check_can_fail() {
    let Some(validator) = schema(5) else {
        return;
    };
    let bad = serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [{"mode": "420"}]}});
    assert!(!validator.is_valid(&bad));
}
