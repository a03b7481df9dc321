//! Loading a bootstrap directory once, after the checks `bootstrap` makes before it starts.

use std::path::Path;
use std::sync::Arc;

use crate::cli::{self, RunError, SourceFlags, UsageError};
use crate::server::tls::TlsPolicy;
use crate::source::bootstrap::{self, BootstrapSettings};

use super::Loaded;

/// The bootstrap directory read once, after the checks `bootstrap` makes before it starts.
pub(super) async fn load_bootstrap(
    base_dir: &Path,
    flags: &SourceFlags,
) -> Result<Loaded, RunError> {
    cli::require_dir("--server-basedir", base_dir)?;
    cli::require_file("--bootstrap-kubeconfig", &flags.bootstrap_kubeconfig)?;
    let registry_certs = cli::parse_bootstrap_certs(&flags.bootstrap_certs)?;
    // `bootstrap` refuses to start with a broken APIServer manifest; so does its explanation.
    TlsPolicy::for_bootstrap(base_dir).map_err(UsageError::from)?;
    let settings = BootstrapSettings {
        base_dir: base_dir.to_path_buf(),
        kubeconfig: flags.bootstrap_kubeconfig.clone(),
        registry_certs,
        advertise_failure_reporting: flags.served.advertise_failure_reporting,
    };
    let snapshot = tokio::task::spawn_blocking(move || bootstrap::load_once(&settings))
        .await
        .map_err(|e| anyhow::anyhow!("reading the base directory failed: {e}"))?
        .map_err(UsageError::from)?;
    Ok(Loaded {
        snapshot: Arc::new(snapshot),
        ready: true,
        source: format!("base directory {}", base_dir.display()),
        notes: Vec::new(),
        features: None,
    })
}
