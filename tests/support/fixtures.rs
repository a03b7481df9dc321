//! The project's own test fixtures (`tests/fixtures/generated/`, written by
//! `python3 tests/fixtures/generate.py`): what the self-contained tier tests against.

use std::path::PathBuf;

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

/// The layered pool's MachineOSConfig and MachineOSBuild (a YAML stream).
pub fn layered_objects() -> PathBuf {
    generated().join("cluster/layered.yaml")
}

/// Broken inputs, one MachineConfig per file.
pub fn broken() -> PathBuf {
    generated().join("broken")
}
