//! The upstream tier: evidence that exists only outside this repository (the real OpenShift
//! CRDs, the fixture rendered by the original operator, the upstream Ignition JSON schemas, the
//! recorded answers of a real kube-apiserver).
//!
//! Tests of that tier find the assets through one variable, [`VAR`], and nothing else
//! (`.ci/run` sets it to its default when it is unset). Without them a test of the tier returns
//! early and records its group under `target/tmp/upstream-not-run/`, so that `.ci/run` can end
//! with one line naming each group that did not run. With `CI=true` a missing asset fails the
//! test instead: CI never silently loses the tier.
//!
//! Include it with `#[path = "support/upstream.rs"] mod upstream;` (or `support::upstream`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The variable naming the upstream assets directory (`crds/`, `fixtures/`, `schemas/`).
pub const VAR: &str = "MCS_UPSTREAM_ASSETS";

/// Groups of upstream tests, as the not-run line names them.
pub const REAL_CRDS: &str = "real CRDs (crds/)";
pub const REALISTIC_FIXTURE: &str = "upstream-rendered fixture (fixtures/bootstrap-realistic)";
pub const IGNITION_SCHEMAS: &str = "upstream Ignition JSON schemas (schemas/ignition)";
pub const API_CORPUS: &str = "recorded kube-apiserver answers (api-corpus)";

/// The upstream assets directory: `$MCS_UPSTREAM_ASSETS` when set (it must exist), else `None`.
/// Tests never look for the assets by path: `.ci/run` applies the documented default (`../shared`
/// beside the checkout, when it exists) and exports the variable.
pub fn dir() -> Option<PathBuf> {
    let value = std::env::var_os(VAR).filter(|v| !v.is_empty())?;
    let dir = PathBuf::from(value);
    assert!(dir.is_dir(), "{VAR}={} is not a directory", dir.display());
    Some(dir)
}

/// `sub` (e.g. `crds`) of the upstream assets for a test of `group`, or `None` when the assets
/// are missing: then the group is recorded as not run (or, with `CI=true`, the test fails).
pub fn require(group: &str, sub: &str) -> Option<PathBuf> {
    if let Some(path) = dir().map(|d| d.join(sub)).filter(|p| p.exists()) {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true but the upstream assets for {group} are missing: set {VAR} to a directory \
         holding {sub} (.ci/run sets it to its default)"
    );
    record_not_run(group);
    None
}

/// The real CRD directory, if available.
pub fn crds() -> Option<PathBuf> {
    require(REAL_CRDS, "crds")
}

/// The realistic bootstrap directory rendered by the original operator, if available.
pub fn realistic_fixture() -> Option<PathBuf> {
    require(REALISTIC_FIXTURE, "fixtures/bootstrap-realistic")
}

/// The upstream Ignition JSON schemas directory, if available.
pub fn ignition_schemas() -> Option<PathBuf> {
    require(IGNITION_SCHEMAS, "schemas/ignition")
}

/// The recorded answers of a real kube-apiserver (`api-corpus/`), if available.
pub fn api_corpus() -> Option<PathBuf> {
    require(API_CORPUS, "api-corpus")
}

/// Directory where skipped groups are recorded (one empty file per group).
pub fn not_run_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("upstream-not-run")
}

fn record_not_run(group: &str) {
    let dir = not_run_dir();
    let file: String = group
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join(file), format!("{group}\n"));
    }
}
