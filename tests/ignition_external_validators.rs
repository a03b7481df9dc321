//! Translated outputs checked by validators we did not write: Debian's `ignition-validate`
//! (Ignition 2.14: specs 3.0-3.3, and 3.4 as `3.4.0-experimental`), the current one (Ignition
//! 2.26 or newer, every 3.x spec: tier `ignition_current`, `MCS_IGNITION_VALIDATE`) and the
//! upstream JSON schemas of specs 3.0-3.6 (upstream tier, `MCS_UPSTREAM_ASSETS`). The corpus covers every
//! field the translation touches, plus the project's full-size rendered MachineConfigs and
//! (upstream tier) the upstream-rendered ones.

use support::fixtures;
use support::tier;
use support::upstream;
use support::validators;

use std::path::{Path, PathBuf};

use machine_config_server::ignition::{parse_config, to_value_as, SpecVersion};
use serde_json::Value;
use support::ignition_samples::{corpus, Sample};
use validators::{
    assert_matches_schema, ignition_validate, ignition_validate_current, run_ignition_validate,
    schema,
};

/// The corpus plus the rendered configs of the project's fixture.
fn own_samples() -> Vec<Sample> {
    let mut samples = corpus();
    samples.extend(rendered_samples(
        &fixtures::bootstrap_full().join("machine-configs"),
        "full-size fixture",
    ));
    samples
}

/// The rendered configs of the upstream-rendered fixture (upstream tier).
fn upstream_samples() -> Vec<Sample> {
    rendered_samples(
        &upstream::realistic_fixture().join("machine-configs"),
        "upstream-rendered fixture",
    )
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

#[tier(ignition)]
#[test]
fn ignition_validate_accepts_every_3_0_to_3_4_output() {
    assert!(validated_by_ignition_validate(own_samples()) >= 20);
}

#[tier(ignition, upstream)]
#[test]
fn ignition_validate_accepts_the_upstream_rendered_configs_in_every_spec() {
    assert!(validated_by_ignition_validate(upstream_samples()) >= 5);
}

/// How many outputs of `samples` (each in every spec it can be served in) `ignition-validate`
/// checked; panics on one it rejects.
fn validated_by_ignition_validate(samples: Vec<Sample>) -> usize {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut checked = 0;
    for sample in samples {
        for version in servable(&sample) {
            let value = to_value_as(&sample.config, version)
                .unwrap_or_else(|e| panic!("{} as {version}: {e}", sample.name));
            let label = format!("{} as {version}", sample.name);
            if ignition_validate(dir.path(), &label, &value) {
                checked += 1;
            }
        }
    }
    checked
}

/// The corpus and the rendered configs in every 3.x spec they can be served in, and each of
/// them as a spec-3.6 twin in every spec the twin can be served in, through the current
/// `ignition-validate`: how many it checked.
fn validated_by_current_ignition_validate(samples: Vec<Sample>) -> usize {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut checked = 0;
    for sample in samples {
        for version in servable(&sample)
            .into_iter()
            .filter(|v| *v != SpecVersion::V2_2)
        {
            let value = to_value_as(&sample.config, version)
                .unwrap_or_else(|e| panic!("{} as {version}: {e}", sample.name));
            ignition_validate_current(dir.path(), &format!("{} as {version}", sample.name), &value);
            checked += 1;
        }
        let mut twin = to_value_as(&sample.config, SpecVersion::V3_5).expect("serves as 3.5");
        twin["ignition"]["version"] = "3.6.0".into();
        let twin = parse_config(Some(&twin)).expect("the 3.6 twin parses");
        for version in SpecVersion::ALL
            .into_iter()
            .filter(|v| *v >= sample.oldest_3x)
        {
            // A twin with special mode bits serves as 3.6 only (tests/ignition_3_6.rs).
            if let Ok(value) = to_value_as(&twin, version) {
                let label = format!("{} as 3.6, served as {version}", sample.name);
                ignition_validate_current(dir.path(), &label, &value);
                checked += 1;
            }
        }
    }
    checked
}

#[tier(ignition_current)]
#[test]
fn current_ignition_validate_accepts_every_3x_output() {
    assert!(validated_by_current_ignition_validate(own_samples()) >= 60);
}

#[tier(ignition_current, upstream)]
#[test]
fn current_ignition_validate_accepts_the_upstream_rendered_configs_in_every_spec() {
    assert!(validated_by_current_ignition_validate(upstream_samples()) >= 30);
}

#[tier(ignition)]
#[test]
fn ignition_validate_rejects_what_it_should() {
    // The harness itself must be able to fail: a relative path is fatal for the validator.
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = serde_json::json!({"ignition": {"version": "3.3.0"}, "storage": {"files": [{"path": "relative"}]}});
    assert!(!run_ignition_validate(dir.path(), &bad).0);
}

#[tier(upstream)]
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
    .map(|(v, minor)| (v, schema(minor)))
    .collect();
    let v3_6 = schema(6);
    let mut checked = 0;
    for sample in own_samples().into_iter().chain(upstream_samples()) {
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

#[tier(upstream)]
#[test]
fn schema_check_can_fail() {
    let validator = schema(5);
    let bad = serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [{"mode": "420"}]}});
    assert!(!validator.is_valid(&bad));
}
