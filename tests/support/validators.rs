//! Validators we did not write, for Ignition documents: Debian's `ignition-validate`
//! (Ignition 2.14: specs 3.0-3.3, and 3.4 as `3.4.0-experimental`), part of the self-contained
//! tier, and the upstream JSON schemas of specs 3.0-3.6 (upstream tier, `MCS_UPSTREAM_ASSETS`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::upstream;

pub const IGNITION_VALIDATE: &str = "/usr/bin/ignition-validate";

/// Run `ignition-validate` on `value` if it knows the value's spec; panics with the validator's
/// report when it rejects it. Returns whether it was run (2.2 and 3.5+ are not known to it).
pub fn ignition_validate(dir: &Path, label: &str, value: &Value) -> bool {
    let mut value = value.clone();
    match value["ignition"]["version"].as_str() {
        Some("3.0.0" | "3.1.0" | "3.2.0" | "3.3.0") => {}
        // Ignition 2.14 knows 3.4 only as its experimental predecessor.
        Some("3.4.0") => value["ignition"]["version"] = "3.4.0-experimental".into(),
        _ => return false,
    }
    let status = run_ignition_validate(dir, &value);
    assert!(
        status.0,
        "ignition-validate rejected {label}: {}\n{value}",
        status.1
    );
    true
}

/// Run `ignition-validate` on `value` as is: (accepted, report).
pub fn run_ignition_validate(dir: &Path, value: &Value) -> (bool, String) {
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
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), report)
}

/// `MCS_IGNITION_VALIDATE`: `ignition-validate` of Ignition 2.26 or newer (the
/// `ignition_current` tier), which knows every 3.x spec we serve, 3.6 included.
pub const IGNITION_VALIDATE_CURRENT: &str = "MCS_IGNITION_VALIDATE";

/// Run the current `ignition-validate` on `value` (any 3.x spec); panics with its report when it
/// rejects it. Returns the report (its warnings) of an accepted config.
pub fn ignition_validate_current(dir: &Path, label: &str, value: &Value) -> String {
    let (accepted, report) = run_ignition_validate_current(dir, value);
    assert!(
        accepted,
        "ignition-validate (current) rejected {label}: {report}\n{value}"
    );
    report
}

/// Run the current `ignition-validate` on `value` as is: (accepted, report).
pub fn run_ignition_validate_current(dir: &Path, value: &Value) -> (bool, String) {
    let binary = std::env::var_os(IGNITION_VALIDATE_CURRENT)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!("{IGNITION_VALIDATE_CURRENT} is not set (tier ignition_current)")
        });
    run_validator(Path::new(&binary), dir, value)
}

fn run_validator(binary: &Path, dir: &Path, value: &Value) -> (bool, String) {
    let file = dir.join("config.ign");
    std::fs::write(&file, serde_json::to_vec(value).expect("JSON")).expect("write temp file");
    let output = Command::new(binary)
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", binary.display()));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), report)
}

/// The compiled upstream JSON schema of spec `3.N` (`minor` = N, 0 to 6), for
/// `#[tier(upstream)]` tests.
pub fn schema(minor: u8) -> jsonschema::Validator {
    let path: PathBuf = upstream::ignition_schemas().join(format!("v3_{minor}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("schema {} must exist: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::validator_for(&schema).expect("schema compiles")
}

/// Panics with every violation when `value` does not match `validator`.
pub fn assert_matches_schema(validator: &jsonschema::Validator, label: &str, value: &Value) {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{label} violates its schema: {errors:?}\n{value}"
    );
}
