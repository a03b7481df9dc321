//! The upstream tier: evidence that exists only outside this repository (the real OpenShift
//! CRDs, the fixture rendered by the original operator, the upstream Ignition JSON schemas, the
//! recorded answers of a real kube-apiserver).
//!
//! Tests of that tier are marked `#[tier(upstream)]` ([`crate::tier`]): where the assets are
//! missing cargo lists them as ignored, with the reason. They find the assets through one
//! variable, [`VAR`], and nothing else (`.ci/run` sets it to its default, `../shared`, when it
//! is unset, and with `CI=true` stops at once when the assets are missing).

use std::path::PathBuf;

/// The variable naming the upstream assets directory (`crds/`, `fixtures/`, `schemas/`).
pub const VAR: &str = "MCS_UPSTREAM_ASSETS";

/// The upstream assets directory, `$MCS_UPSTREAM_ASSETS`, for a test of the tier (marked
/// `#[tier(upstream)]`, so it runs only where the assets are): panics naming the variable when
/// it is missing (a test run with `--include-ignored` where they are not).
pub fn dir() -> PathBuf {
    present_dir().unwrap_or_else(|| {
        panic!("the upstream tier needs {VAR}: a directory with crds/, fixtures/, schemas/ and api-corpus/ (.ci/run uses ../shared)")
    })
}

/// `$MCS_UPSTREAM_ASSETS` when it is set (it must then be a directory), else `None`: for what
/// uses the upstream assets when they are there and the project's own otherwise (the CRDs an
/// API server validates against).
pub fn present_dir() -> Option<PathBuf> {
    let value = std::env::var_os(VAR).filter(|v| !v.is_empty())?;
    let dir = PathBuf::from(value);
    assert!(dir.is_dir(), "{VAR}={} is not a directory", dir.display());
    Some(dir)
}

fn part(sub: &str) -> PathBuf {
    let path = dir().join(sub);
    assert!(path.exists(), "{VAR}={} has no {sub}", dir().display());
    path
}

/// The real OpenShift CRDs (`crds/`).
pub fn crds() -> PathBuf {
    part("crds")
}

/// The real CRDs when the upstream assets are there.
pub fn crds_if_present() -> Option<PathBuf> {
    present_dir().map(|d| d.join("crds")).filter(|p| p.is_dir())
}

/// The real `config.openshift.io` CRDs the server reads (`crds-config/`: the Infrastructure, as
/// the release payload ships it) when the upstream assets have them. Kept apart from `crds/`;
/// every API server of the tests serves them beside whatever CRDs it is given.
pub fn config_crds_if_present() -> Option<PathBuf> {
    present_dir()
        .map(|d| d.join("crds-config"))
        .filter(|p| p.is_dir())
}

/// The bootstrap directory rendered by the original operator.
pub fn realistic_fixture() -> PathBuf {
    part("fixtures/bootstrap-realistic")
}

/// The upstream Ignition JSON schemas.
pub fn ignition_schemas() -> PathBuf {
    part("schemas/ignition")
}

/// The recorded answers of a real kube-apiserver (`api-corpus/`).
pub fn api_corpus() -> PathBuf {
    part("api-corpus")
}
