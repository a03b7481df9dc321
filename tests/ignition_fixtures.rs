//! The realistic rendered MachineConfigs of the shared bootstrap fixture: their `spec.config`
//! parses and translates to every served spec.

use std::path::PathBuf;

use machine_config_server::ignition::{parse_config, to_value_as, Config, SpecVersion};

fn fixture_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/fixtures/bootstrap-realistic/machine-configs"
    ))
}

fn realistic_configs() -> Vec<(String, Config)> {
    let dir = fixture_dir();
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
fn realistic_configs_translate_to_every_served_version() {
    for (name, config) in realistic_configs() {
        for version in SpecVersion::ALL {
            let value = to_value_as(&config, version)
                .unwrap_or_else(|e| panic!("{name} as {version}: {e}"));
            assert_eq!(value["ignition"]["version"], version.as_str(), "{name}");
        }
    }
}
