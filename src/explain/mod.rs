//! `machine-config-server explain`: what the server would answer a node asking for one pool,
//! and why, without binding a port. The first thing to run when a node will not join.
//!
//! Owns the report ([`Explanation`], its text and JSON forms) and the one-shot loading of a
//! snapshot: the bootstrap directory read once ([`crate::source::bootstrap::load_once`]), or the cluster source
//! started, given until `--timeout-seconds` for its caches to sync, and stopped.
//!
//! Everything reported comes from the serving code paths, in the config handler's order: pool
//! name from the path ([`crate::server::pool_path::parse`]), Accept negotiation
//! ([`crate::ignition::accept::negotiate`]), readiness, [`crate::render::render`] and its status
//! mapping ([`crate::server::status_for`]). What is
//! described of a served config is read back from the served bytes. This module decides
//! nothing the server decides, and never prints file contents or the served kubeconfig: paths,
//! modes and sizes only.
//!
//! Split by concern: `report` decides what is reported (pure, from a snapshot), `text` prints
//! it for people, `bootstrap_mode` and `cluster_mode` load the snapshot of each mode.

mod bootstrap_mode;
mod certificate;
mod cluster_mode;
mod report;
#[cfg(test)]
mod tests;
mod text;

pub use report::*;
pub use text::format_text;

use std::sync::Arc;

use http::StatusCode;

use crate::cli::{ExplainFlags, ReportFormat, RunError, SourceFlags, UsageError};
use crate::ignition::SpecVersion;
use crate::server::pool_path;
use crate::snapshot::Snapshot;

/// `--spec`: one of the servable versions, `3.4.0` or `3.4`.
pub fn parse_spec(value: &str) -> Result<SpecVersion, UsageError> {
    SpecVersion::ALL
        .into_iter()
        .find(|v| v.as_str() == value || v.as_str().strip_suffix(".0") == Some(value))
        .ok_or_else(|| {
            let all: Vec<&str> = SpecVersion::ALL.iter().map(|v| v.as_str()).collect();
            UsageError::value(
                "--spec",
                value,
                format!("expected one of {}", all.join(", ")),
            )
        })
}

/// `--pool` must be what a node's `/config/<pool>` path resolves to, not another path.
pub fn check_pool(pool: &str) -> Result<(), UsageError> {
    match pool_path::parse(&format!("/config/{pool}")) {
        Ok(parsed) if parsed.pool != pool || parsed.traversal => Err(UsageError::value(
            "--pool",
            pool,
            format!(
                "a node asking for /config/{pool} gets pool {:?}; pass the pool name",
                parsed.pool
            ),
        )),
        // A name no pool can have is explained as the 4xx the server answers.
        _ => Ok(()),
    }
}

/// The TLS port's pair as the serving flags name it, and the policy it would be served under;
/// `None` when `--secure-port` is 0.
pub struct ServingPair<'a> {
    pub cert: &'a std::path::Path,
    pub key: &'a std::path::Path,
    pub policy: &'a crate::server::tls::TlsPolicy,
}

/// `machine-config-server explain`: load, explain, print, and exit 1 (with one line on stderr)
/// when the server would not serve a config.
pub async fn run(flags: &ExplainFlags, serving: Option<ServingPair<'_>>) -> Result<(), RunError> {
    check_pool(&flags.pool)?;
    let spec = match (&flags.accept, &flags.spec) {
        (_, Some(spec)) => SpecRequest::Exact(parse_spec(spec)?),
        (Some(accept), None) => SpecRequest::Accept(accept.clone()),
        (None, None) => SpecRequest::default_accept(),
    };
    let loaded = load(&flags.source, std::slice::from_ref(&flags.pool)).await?;
    let Explained {
        mut explanation,
        body,
    } = explain(
        &loaded.snapshot,
        loaded.ready,
        &flags.pool,
        &spec,
        loaded.source,
    );
    explanation.notes.extend(loaded.notes);
    explanation.features = loaded.features;
    explanation.serving_certificate =
        serving.map(|pair| certificate::report(pair.cert, pair.key, pair.policy));
    if let Some(path) = &flags.write_config {
        match &body {
            Some(body) => {
                std::fs::write(path, body).map_err(|e| UsageError::Path {
                    flag: "--write-config",
                    path: path.clone(),
                    problem: e.into(),
                })?;
                explanation.notes.push(format!(
                    "wrote the {} served bytes to {}",
                    body.len(),
                    path.display()
                ));
            }
            None => explanation.notes.push(format!(
                "nothing written to {}: no config would be served",
                path.display()
            )),
        }
    }
    let report = match flags.output {
        ReportFormat::Text => format_text(&explanation),
        ReportFormat::Json => {
            let mut json = serde_json::to_string_pretty(&explanation)
                .map_err(|e| anyhow::anyhow!("cannot serialize the report: {e}"))?;
            json.push('\n');
            json
        }
    };
    print_report(&report)?;
    if explanation.status == StatusCode::OK.as_u16() {
        Ok(())
    } else {
        Err(RunError::Other(anyhow::anyhow!(
            "pool {:?}: the server would answer {} {}",
            flags.pool,
            explanation.status,
            explanation.status_text
        )))
    }
}

fn print_report(report: &str) -> Result<(), RunError> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(report.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| RunError::Other(anyhow::anyhow!("cannot print the report: {e}")))
}

/// The snapshot of the source `flags` name, read once: the bootstrap directory, or the cluster
/// source started until its caches and those of `pools` (every pool when empty) have synced or
/// `--timeout-seconds` passed, then stopped. Nothing is served or written. (`compare` reads its
/// snapshot the same way.)
pub(crate) async fn load(flags: &SourceFlags, pools: &[String]) -> Result<Loaded, RunError> {
    match &flags.server_basedir {
        Some(base_dir) => bootstrap_mode::load_bootstrap(base_dir, flags).await,
        None => cluster_mode::load_cluster(flags, pools).await,
    }
}

/// A snapshot to explain, and what is known about how it was obtained.
pub(crate) struct Loaded {
    pub(crate) snapshot: Arc<Snapshot>,
    /// The source was ready (always in bootstrap mode).
    pub(crate) ready: bool,
    /// Where the snapshot came from, in words.
    pub(crate) source: String,
    pub(crate) notes: Vec<String>,
    /// Cluster mode: each feature beyond the original, on or off and why.
    pub(crate) features: Option<Vec<FeatureReport>>,
}
