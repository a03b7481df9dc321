//! Translated outputs checked by validators we did not write: Debian's `ignition-validate`
//! (Ignition 2.14: specs 3.0-3.3, and 3.4 as `3.4.0-experimental`) and the upstream JSON
//! schemas of specs 3.0-3.6 in `shared/schemas/ignition/`. The corpus covers every field the
//! translation touches, plus the realistic rendered MachineConfigs.

mod ignition_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use ignition_common::{corpus, Sample};
use machine_config_server::ignition::{parse_config, to_value_as, SpecVersion};
use serde_json::Value;

const IGNITION_VALIDATE: &str = "/usr/bin/ignition-validate";

fn schema_path(file: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/schemas/ignition/"
    ))
    .join(file)
}

/// The corpus plus the realistic rendered configs of the bootstrap fixture.
fn all_samples() -> Vec<Sample> {
    let mut samples = corpus();
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/fixtures/bootstrap-realistic/machine-configs"
    ));
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixture directory {} must exist: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let mc: Value = serde_yaml::from_str(&text).expect("YAML MachineConfig");
        let config = parse_config(mc.pointer("/spec/config")).expect("fixture parses");
        samples.push(Sample {
            name: "realistic fixture",
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

fn run_ignition_validate(dir: &Path, name: &str, value: &Value) {
    assert!(
        Path::new(IGNITION_VALIDATE).exists(),
        "{IGNITION_VALIDATE} is missing: install Debian's `ignition` package (apt-get install ignition)"
    );
    let file = dir.join("config.ign");
    std::fs::write(&file, serde_json::to_vec(value).expect("JSON")).expect("write temp file");
    let output = Command::new(IGNITION_VALIDATE)
        .arg(&file)
        .output()
        .expect("run ignition-validate");
    assert!(
        output.status.success(),
        "ignition-validate rejected {name}: {}{}\n{value}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn ignition_validate_accepts_every_3_0_to_3_4_output() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut checked = 0;
    for sample in all_samples() {
        for version in servable(&sample) {
            let mut value = to_value_as(&sample.config, version)
                .unwrap_or_else(|e| panic!("{} as {version}: {e}", sample.name));
            let label = format!("{} as {version}", sample.name);
            match version {
                SpecVersion::V3_0 | SpecVersion::V3_1 | SpecVersion::V3_2 | SpecVersion::V3_3 => {}
                // Ignition 2.14 knows 3.4 only as its experimental predecessor.
                SpecVersion::V3_4 => value["ignition"]["version"] = "3.4.0-experimental".into(),
                SpecVersion::V3_5 | SpecVersion::V2_2 => continue,
            }
            run_ignition_validate(dir.path(), &label, &value);
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} outputs were validated");
}

#[test]
fn ignition_validate_rejects_what_it_should() {
    // The harness itself must be able to fail: a relative path is fatal for the validator.
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("bad.ign");
    std::fs::write(
        &file,
        r#"{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"relative"}]}}"#,
    )
    .expect("write");
    assert!(
        Path::new(IGNITION_VALIDATE).exists(),
        "{IGNITION_VALIDATE} is missing: install Debian's `ignition` package (apt-get install ignition)"
    );
    let status = Command::new(IGNITION_VALIDATE)
        .arg(&file)
        .status()
        .expect("run ignition-validate");
    assert!(!status.success());
}

fn compile_schema(file: &str) -> jsonschema::Validator {
    let path = schema_path(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("schema {} must exist: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::validator_for(&schema).expect("schema compiles")
}

fn assert_matches_schema(validator: &jsonschema::Validator, label: &str, value: &Value) {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{label} violates its schema: {errors:?}\n{value}"
    );
}

#[test]
fn outputs_match_the_upstream_json_schemas() {
    let schemas: Vec<(SpecVersion, jsonschema::Validator)> = [
        (SpecVersion::V3_0, "v3_0.json"),
        (SpecVersion::V3_1, "v3_1.json"),
        (SpecVersion::V3_2, "v3_2.json"),
        (SpecVersion::V3_3, "v3_3.json"),
        (SpecVersion::V3_4, "v3_4.json"),
        (SpecVersion::V3_5, "v3_5.json"),
    ]
    .into_iter()
    .map(|(v, file)| (v, compile_schema(file)))
    .collect();
    let v3_6 = compile_schema("v3_6.json");
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
    let validator = compile_schema("v3_5.json");
    let bad = serde_json::json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [{"mode": "420"}]}});
    assert!(!validator.is_valid(&bad));
}
