//! The project's own test fixtures (`tests/fixtures/generated/`, written by
//! `python3 tests/fixtures/generate.py`): what the self-contained tier tests against.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use machine_config_server::api::{MachineConfig, MachineConfigPool};
use machine_config_server::snapshot::{Input, Mode, Snapshot};
use machine_config_server::source::bootstrap::{load_once, BootstrapSettings};

/// The master pool's rendered config in [`bootstrap_full`].
pub const MASTER_RENDERED: &str = "rendered-master-b19762bf2111d4787ac714352cb8a882";
/// The worker pool's rendered config in [`bootstrap_full`].
pub const WORKER_RENDERED: &str = "rendered-worker-26269a31b004ecedc571276cfc5636eb";
/// The layered pool's rendered config in [`bootstrap_full`].
pub const LAYERED_RENDERED: &str = "rendered-layered-worker-6a9934e54b0f35e687f7ada2131d8ee8";
/// The image of the layered pool's succeeded build in [`layered_objects`].
pub const LAYERED_IMAGE: &str = "image-registry.example.com/openshift-machine-config-operator/layered-worker@sha256:1111111111111111111111111111111111111111111111111111111111111111";
/// The token of the fixture's kubeconfig.
pub const KUBECONFIG_TOKEN: &str = "fixture-bootstrap-token-0f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// `tests/fixtures/generated/`.
pub fn generated() -> PathBuf {
    crate::mcs::repo().join("tests/fixtures/generated")
}

/// The full-size bootstrap base directory (pools master, worker, layered-worker).
pub fn bootstrap_full() -> PathBuf {
    generated().join("bootstrap-full")
}

/// The bootstrap base directory whose rendered MachineConfigs are Ignition spec 3.6 (pools
/// master, arbiter and worker; see `tests/fixtures/generate.py`).
pub fn bootstrap_3_6() -> PathBuf {
    generated().join("bootstrap-3.6")
}

/// The layered pool's MachineOSConfig and MachineOSBuild (a YAML stream).
pub fn layered_objects() -> PathBuf {
    generated().join("cluster/layered.yaml")
}

/// Broken inputs, one MachineConfig per file.
pub fn broken() -> PathBuf {
    generated().join("broken")
}

/// The snapshot of a bootstrap base directory as the server in `mode` sees it: bootstrap mode
/// reads it as `bootstrap --server-basedir` does (pools master and arbiter); cluster mode adds
/// every pool and rendered MachineConfig of the directory, as if they were the cluster's.
pub fn snapshot_of(base: &Path, mode: Mode) -> Snapshot {
    let settings = BootstrapSettings {
        base_dir: base.to_path_buf(),
        kubeconfig: base.join("kubeconfig"),
        registry_certs: Vec::new(),
        advertise_failure_reporting: false,
    };
    let mut snapshot = load_once(&settings).expect("the fixture loads");
    snapshot.mode = mode;
    if mode == Mode::Cluster {
        // Every cache synced, as the cluster source publishes a snapshot it serves from.
        snapshot.synced = Input::ALL.into_iter().collect();
        for path in yaml_files(&base.join("machine-pools")) {
            let pool: MachineConfigPool = read_yaml(&path);
            let name = pool.metadata.name.clone().expect("a named pool");
            snapshot.pools.insert(name, Ok(Arc::new(pool)));
        }
        for path in yaml_files(&base.join("machine-configs")) {
            let mc: MachineConfig = read_yaml(&path);
            let name = mc.metadata.name.clone().expect("a named MachineConfig");
            snapshot.machine_configs.insert(name, Ok(Arc::new(mc)));
        }
    }
    snapshot
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    paths.sort();
    paths
}

fn read_yaml<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    let text = std::fs::read_to_string(path).expect("readable fixture");
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
