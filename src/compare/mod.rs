//! `machine-config-server compare`: before switching from the original, prove that no machine
//! will be served anything different. For every pool (or those named) and every spec version a
//! machine may ask for, this server's answer is rendered locally from the same source flags as
//! `explain` (a bootstrap directory read once, or the cluster's watch caches synced and
//! stopped), the running original (`--against`) is asked the same request, and one row says
//! how the two compare: `identical`, `same-json`, `deviation` (a documented one, named),
//! `status` or `different`. The exit status is 0 only when no row is `status` or `different`.
//!
//! Nothing is served (no port is bound but the client side of each request) and nothing is
//! written to the cluster; each request names this tool in its `User-Agent`.
//!
//! Split by concern: `asks` decides what is asked, `local` what this server answers, `fetch`
//! asks the original (all network I/O), `verdict` and `deviations` compare (pure), `report`
//! prints.

mod asks;
mod deviations;
mod fetch;
mod local;
mod report;
mod verdict;

pub use asks::{Ask, ASKS};
pub use deviations::{Deviation, ALL as DEVIATIONS};
pub use fetch::{FetchError, Original, Target, USER_AGENT};
pub use local::{answer, Local, LocalError};
pub use report::{format_text, Report, Row, Side, Summary};
pub use verdict::{classify, Remote, Verdict};

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;

use crate::cli::{CompareFlags, PathProblem, ReportFormat, RunError, UsageError};
use crate::render;
use crate::snapshot::Mode;

/// `machine-config-server compare`: load, ask, compare, print, and exit 1 (with one line on
/// stderr) when a machine would be served something else. `provider` is the TLS crypto of the
/// process (its `--tls-*` flags and FIPS mode).
pub async fn run(flags: &CompareFlags, provider: CryptoProvider) -> Result<(), RunError> {
    let target = Target::parse(&flags.against).map_err(|_| {
        UsageError::value(
            "--against",
            &flags.against,
            "expected https://HOST[:PORT] or http://HOST[:PORT]",
        )
    })?;
    let tls = match (&target.tls, &flags.against_ca) {
        (false, _) => None,
        (true, Some(ca)) => Some(client_config(ca, provider)?),
        (true, None) => {
            return Err(UsageError::Missing {
                flag: "--against-ca",
                why: " for an https original: its serving certificate is verified against it",
            }
            .into())
        }
    };
    for pool in &flags.pool {
        crate::explain::check_pool(pool)?;
    }
    let original = Original::new(
        target,
        tls,
        flags.against_server_name.as_deref(),
        flags.client_address,
        Duration::from_secs(flags.request_timeout_seconds.max(1)),
    )
    .map_err(|e| {
        UsageError::value(
            "--against-server-name",
            flags.against_server_name.as_deref().unwrap_or_default(),
            e.to_string(),
        )
    })?;

    let loaded = crate::explain::load(&flags.source, &flags.pool).await?;
    let snapshot = loaded.snapshot;
    let pools = asks::pools(&snapshot, &flags.pool);
    if pools.is_empty() {
        return Err(RunError::Other(anyhow::anyhow!(
            "{} has no pool to compare; name one with --pool",
            loaded.source
        )));
    }
    let mut rows = Vec::new();
    let mut advertising = Advertising::default();
    for (pool, ask) in asks::matrix(&pools) {
        let ours = local::answer(&snapshot, loaded.ready, &pool, ask);
        let theirs = original.get(&pool, ask).await.map_err(|e| {
            RunError::Other(anyhow::anyhow!(
                "asking the original for pool {pool} at spec {}: {e}",
                ask.label()
            ))
        })?;
        advertising.add(&ours.body, &theirs.body);
        let machine_config = render::rendered_machine_config(&snapshot, &pool);
        let context = deviations::Context::new(ask, machine_config.as_deref());
        let verdict = verdict::classify(&ours, &theirs, &context);
        tracing::debug!(%pool, spec = ask.label(), verdict = verdict.name(), "compared");
        rows.push(Row {
            pool,
            spec: ask.label(),
            verdict,
            ours: Side {
                status: ours.status,
                bytes: ours.body.len(),
                served_spec: ours.served.map(|v| v.as_str()),
                error: ours.error.map(|e| format!("{}: {}", e.kind, e.message)),
            },
            original: Side {
                status: theirs.status,
                bytes: theirs.body.len(),
                served_spec: None,
                error: None,
            },
        });
    }
    let summary = Summary::of(&rows);
    let mut notes = loaded.notes;
    notes.extend(advertising.note(flags.source.served.advertise_failure_reporting));
    let report = Report {
        mode: match snapshot.mode {
            Mode::Bootstrap => "bootstrap",
            Mode::Cluster => "cluster",
        },
        source: loaded.source,
        against: flags.against.clone(),
        client_address: flags.client_address.map(|a| a.to_string()),
        user_agent: USER_AGENT,
        notes,
        rows,
        summary: summary.clone(),
    };
    let text = match flags.output {
        ReportFormat::Text => format_text(&report),
        ReportFormat::Json => {
            let mut json = serde_json::to_string_pretty(&report)
                .map_err(|e| anyhow::anyhow!("cannot serialize the report: {e}"))?;
            json.push('\n');
            json
        }
    };
    print(&text)?;
    if summary.passes() {
        Ok(())
    } else {
        Err(RunError::Other(anyhow::anyhow!(
            "{} of {} answers differ from the original's ({} status, {} different)",
            summary.status + summary.different,
            summary.compared,
            summary.status,
            summary.different
        )))
    }
}

/// Whether answers carry the root CA file of `--advertise-failure-reporting` on one side only:
/// an original with upstream's PR #6124 serves it in every config, 7ff337a4f only where the
/// MachineConfig has it.
#[derive(Debug, Default)]
struct Advertising {
    /// Some answer of ours has it and the original's does not.
    ours_only: bool,
    /// Some answer of the original has it and ours does not.
    theirs_only: bool,
}

impl Advertising {
    fn add(&mut self, ours: &[u8], theirs: &[u8]) {
        let has = |body: &[u8]| {
            let path = render::MCS_CA_BUNDLE_PATH.as_bytes();
            body.windows(path.len()).any(|w| w == path)
        };
        let (ours, theirs) = (has(ours), has(theirs));
        self.ours_only |= ours && !theirs;
        self.theirs_only |= theirs && !ours;
    }

    /// What to say when one side advertises failure reporting and the other does not.
    fn note(&self, flag: bool) -> Option<String> {
        match (self.ours_only, self.theirs_only) {
            (false, true) if !flag => Some(format!(
                "the original serves {} (it tells machines where to report first-boot failures, as upstream's PR #6124 does): compare again with --advertise-failure-reporting",
                render::MCS_CA_BUNDLE_PATH
            )),
            (true, false) if flag => Some(format!(
                "this server serves {} (--advertise-failure-reporting) and the original does not: compare without the flag to check what the original serves",
                render::MCS_CA_BUNDLE_PATH
            )),
            _ => None,
        }
    }
}

/// A TLS client trusting the CA certificates of `ca` (PEM), with the process's crypto.
fn client_config(
    ca: &Path,
    provider: CryptoProvider,
) -> Result<Arc<rustls::ClientConfig>, RunError> {
    const FLAG: &str = "--against-ca";
    let pem = std::fs::read(ca).map_err(|e| UsageError::Path {
        flag: FLAG,
        path: ca.to_path_buf(),
        problem: PathProblem::Io(e),
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let added = cert
            .map_err(|e| e.to_string())
            .and_then(|cert| roots.add(cert).map_err(|e| e.to_string()));
        if let Err(reason) = added {
            return Err(UsageError::value(
                FLAG,
                &ca.display().to_string(),
                format!("expected PEM CA certificates: {reason}"),
            )
            .into());
        }
    }
    if roots.is_empty() {
        return Err(UsageError::value(
            FLAG,
            &ca.display().to_string(),
            "expected PEM CA certificates: the file has none",
        )
        .into());
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS client for the original: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn print(text: &str) -> Result<(), RunError> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| RunError::Other(anyhow::anyhow!("cannot print the report: {e}")))
}

#[cfg(test)]
mod advertising_tests {
    use super::*;

    #[test]
    fn a_note_when_only_one_side_serves_the_failure_report_ca() {
        let with = format!("{{\"path\":\"{}\"}}", render::MCS_CA_BUNDLE_PATH);
        let (with, without) = (with.as_bytes(), &b"{}"[..]);
        let mut advertising = Advertising::default();
        advertising.add(with, with);
        assert_eq!(advertising.note(false), None);
        advertising.add(without, with);
        let note = advertising.note(false).expect("a note");
        assert!(
            note.contains("compare again with --advertise-failure-reporting"),
            "{note}"
        );
        assert_eq!(advertising.note(true), None);
        let mut advertising = Advertising::default();
        advertising.add(with, without);
        let note = advertising.note(true).expect("a note");
        assert!(note.contains("compare without the flag"), "{note}");
    }
}
