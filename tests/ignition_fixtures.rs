//! Full-size rendered MachineConfigs (the project's fixture and, upstream tier, the fixture the
//! original operator rendered): their `spec.config` parses, translates to every served spec, and
//! the 2.2 output reads back to the same config (files and units in reverse, as the original
//! reads a spec-2 config).

use std::path::PathBuf;
use support::fixtures;
use support::tier;
use support::upstream;

use machine_config_server::ignition::{
    parse_config, parse_config_slice, serialize_as, to_value_as, Config, SpecVersion,
};

/// The rendered configs of a bootstrap base directory.
fn configs_in(base: PathBuf) -> Vec<(String, Config)> {
    let dir = base.join("machine-configs");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixture directory {} must exist: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    entries.sort();
    assert!(
        !entries.is_empty(),
        "no MachineConfig fixtures in {}",
        dir.display()
    );
    entries
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable fixture");
            let mc: serde_json::Value = serde_yaml::from_str(&text).expect("fixture is YAML");
            let config = parse_config(mc.pointer("/spec/config"))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path.display().to_string(), config)
        })
        .collect()
}

#[test]
fn full_size_configs_translate_to_every_served_version() {
    translate_to_every_served_version(configs_in(fixtures::bootstrap_full()));
}

#[tier(upstream)]
#[test]
fn upstream_rendered_configs_translate_to_every_served_version() {
    translate_to_every_served_version(configs_in(upstream::realistic_fixture()));
}

#[test]
fn full_size_configs_round_trip_through_2_2() {
    round_trip_through_2_2(configs_in(fixtures::bootstrap_full()));
}

#[tier(upstream)]
#[test]
fn upstream_rendered_configs_round_trip_through_2_2() {
    round_trip_through_2_2(configs_in(upstream::realistic_fixture()));
}

fn translate_to_every_served_version(configs: Vec<(String, Config)>) {
    for (name, config) in configs {
        for version in SpecVersion::ALL {
            let value = to_value_as(&config, version)
                .unwrap_or_else(|e| panic!("{name} as {version}: {e}"));
            assert_eq!(value["ignition"]["version"], version.as_str(), "{name}");
        }
    }
}

fn round_trip_through_2_2(configs: Vec<(String, Config)>) {
    for (name, config) in configs {
        let bytes = serialize_as(&config, SpecVersion::V2_2).expect("2.2 output");
        let back = parse_config_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Spec 2.2 has no way to tell an empty string from an absent one (the original
        // behaves the same), so compare with empty strings removed.
        let mut original = to_value_as(&config, SpecVersion::V3_5).expect("3.5");
        let mut again = to_value_as(&back, SpecVersion::V3_5).expect("3.5 again");
        // The original reads a spec-2 config back de-duplicated, its files and units in
        // reverse (docs/ignition-translation.md §5.1).
        for list in ["/storage/files", "/systemd/units"] {
            if let Some(items) = again
                .pointer_mut(list)
                .and_then(serde_json::Value::as_array_mut)
            {
                items.reverse();
            }
        }
        drop_empty_strings(&mut original);
        drop_empty_strings(&mut again);
        assert!(
            original == again,
            "{name}: 2.2 round trip changed the config at {}",
            first_difference(&original, &again, "")
        );
    }
}

/// Where two JSON documents first differ (for readable failure messages).
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> String {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) if v == w => {}
                    Some(w) => return first_difference(v, w, &format!("{path}.{k}")),
                    None => return format!("{path}.{k} (missing after)"),
                }
            }
            let extra = y.keys().find(|k| !x.contains_key(*k));
            format!("{path}.{} (added)", extra.map_or("?", |k| k.as_str()))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            let i = x.iter().zip(y).position(|(v, w)| v != w).unwrap_or(0);
            first_difference(&x[i], &y[i], &format!("{path}[{i}]"))
        }
        _ => format!("{path}: {a} vs {b}"),
    }
}

fn drop_empty_strings(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| v.as_str() != Some(""));
            map.values_mut().for_each(drop_empty_strings);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_empty_strings),
        _ => {}
    }
}
