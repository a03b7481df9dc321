//! The fuzzing smoke run of the normal suite (stable toolchain, no cargo-fuzz): every input of
//! the fuzz targets' committed seed corpora (`tests/fuzz/seeds/<target>/`), every regression
//! found by fuzzing (`tests/fuzz/regressions/<target>/`) and the inputs derived from the
//! project's fixtures (and, in the upstream tier, from the upstream-rendered fixture) go through
//! the same property checks the fuzz targets run (the crate `tests/fuzz-checks`). The long fuzzing runs
//! are `tests/fuzz/run.sh` (docs/fuzzing.md).
//!
//! With `MCS_FUZZ_CORPUS_OUT=DIR` the fixture-derived inputs are also written to
//! `DIR/<target>/`, which is how `tests/fuzz/run.sh` seeds the fuzzers' working corpora.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::{tier, upstream};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn check_for(target: &str) -> fn(&[u8]) {
    fuzz_checks::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .map(|(_, check)| *check)
        .unwrap_or_else(|| panic!("no fuzz target {target}"))
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(_) => return Vec::new(),
    };
    files.sort();
    files
}

/// Runs `check` on `data`, naming the input when a property fails.
fn replay(target: &str, name: &str, data: &[u8]) {
    let check = check_for(target);
    if let Err(panic) = std::panic::catch_unwind(|| check(data)) {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("fuzz target {target}, input {name}: {message}");
    }
}

#[test]
fn committed_seeds_and_regressions_hold_every_property() {
    let fuzz = repo().join("tests/fuzz");
    for (target, _) in fuzz_checks::TARGETS {
        let seeds = files_in(&fuzz.join("seeds").join(target));
        assert!(!seeds.is_empty(), "target {target} has no committed seeds");
        for file in seeds
            .iter()
            .chain(&files_in(&fuzz.join("regressions").join(target)))
        {
            let data = std::fs::read(file).expect("readable seed");
            replay(target, &file.display().to_string(), &data);
        }
    }
    // Every target has a fuzz_targets/ file and vice versa.
    let mut on_disk: Vec<String> = files_in(&fuzz.join("fuzz_targets"))
        .iter()
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = fuzz_checks::TARGETS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "fuzz_targets/ and fuzz_checks::TARGETS differ"
    );
}

#[test]
fn project_fixtures_hold_every_property() {
    let inputs = fixture_inputs(&repo().join("tests/fixtures/generated"));
    assert!(
        inputs.len() > 10,
        "too few fixture inputs: {}",
        inputs.len()
    );
    replay_and_export(&inputs, "project");
}

#[tier(upstream)]
#[test]
fn upstream_rendered_fixture_holds_every_property() {
    let inputs = fixture_inputs(&upstream::realistic_fixture());
    assert!(
        inputs.len() > 10,
        "too few fixture inputs: {}",
        inputs.len()
    );
    replay_and_export(&inputs, "upstream");
}

fn replay_and_export(inputs: &[(&'static str, String, Vec<u8>)], prefix: &str) {
    let out = std::env::var_os("MCS_FUZZ_CORPUS_OUT").map(PathBuf::from);
    for (target, name, data) in inputs {
        replay(target, name, data);
        if let Some(out) = &out {
            let dir = out.join(target);
            std::fs::create_dir_all(&dir).expect("corpus directory");
            let file: String = format!("{prefix}-{name}")
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            std::fs::write(dir.join(file), data).expect("corpus file");
        }
    }
}

/// Inputs for the fuzz targets from a fixture directory: every YAML document by its kind (as
/// JSON and YAML), each MachineConfig's Ignition config, chunks of large configs (small seeds
/// mutate faster), and kubeconfig files.
fn fixture_inputs(dir: &Path) -> Vec<(&'static str, String, Vec<u8>)> {
    let mut inputs = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(files_in(&path));
            continue;
        }
        let name = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        if path.file_name().is_some_and(|n| n == "kubeconfig") {
            inputs.push(("kubeconfig", name, bytes));
            continue;
        }
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let documents = serde_yaml::Deserializer::from_slice(&bytes);
        for (index, document) in documents.enumerate() {
            // serde_yaml's document iterator repeats a syntax error forever: stop at the first.
            let Ok(value) = <Value as serde::Deserialize>::deserialize(document) else {
                break;
            };
            object_inputs(&value, &format!("{name}-{index}"), &mut inputs);
        }
    }
    inputs
}

fn object_inputs(object: &Value, name: &str, inputs: &mut Vec<(&'static str, String, Vec<u8>)>) {
    let target = match object.get("kind").and_then(Value::as_str) {
        Some("MachineConfig") => "machine_config",
        Some("ControllerConfig") => "controller_config",
        Some("MachineOSBuild" | "MachineOSConfig") => "machine_os_build",
        Some("MachineConfigNode") => "machine_config_node",
        Some("Node") => "node",
        _ => return,
    };
    let json = serde_json::to_vec(object).expect("JSON");
    let yaml = serde_yaml::to_string(object).expect("YAML").into_bytes();
    inputs.push((target, format!("{name}.json"), json));
    inputs.push((target, format!("{name}.yaml"), yaml));
    let Some(config) = object.pointer("/spec/config").filter(|c| !c.is_null()) else {
        return;
    };
    inputs.push((
        "ignition",
        format!("{name}.ign"),
        config.to_string().into_bytes(),
    ));
    for (i, chunk) in config_chunks(config).into_iter().enumerate() {
        inputs.push((
            "ignition",
            format!("{name}.chunk{i}.ign"),
            chunk.to_string().into_bytes(),
        ));
        let mut small = object.clone();
        small["spec"]["config"] = chunk;
        inputs.push((
            "machine_config",
            format!("{name}.chunk{i}.json"),
            serde_json::to_vec(&small).expect("JSON"),
        ));
    }
}

/// A large config cut into small valid ones: the `ignition` section with up to eight files,
/// units, directories or links at a time, and the rest (users, kernel arguments) once.
fn config_chunks(config: &Value) -> Vec<Value> {
    const PER_CHUNK: usize = 8;
    let ignition = config.get("ignition").cloned().unwrap_or(Value::Null);
    let mut chunks = Vec::new();
    for (section, list) in [
        ("storage", "files"),
        ("storage", "directories"),
        ("storage", "links"),
        ("systemd", "units"),
    ] {
        let Some(items) = config
            .pointer(&format!("/{section}/{list}"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        if items.len() <= PER_CHUNK {
            continue;
        }
        for part in items.chunks(PER_CHUNK) {
            chunks.push(json!({"ignition": ignition, section: {list: part}}));
        }
    }
    if !chunks.is_empty() {
        let mut rest = json!({"ignition": ignition});
        for key in ["passwd", "kernelArguments"] {
            if let Some(value) = config.get(key) {
                rest[key] = value.clone();
            }
        }
        chunks.push(rest);
    }
    chunks
}
