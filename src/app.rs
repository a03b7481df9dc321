//! Start-up glue: turns the parsed command line into running sources and listeners, and owns the
//! single shutdown path (SIGTERM/SIGINT: stop accepting, drain, exit).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cache::PayloadCache;
use crate::cli::{self, Cli, Command, UsageError};
use crate::server::listener::{self, ConnectionLimits, TlsConfigs};
use crate::server::{self, AppState};
use crate::snapshot::Snapshot;
use crate::source::bootstrap::{self, BootstrapSettings};

/// Why the process could not run: usage errors exit 64, everything else 1.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Usage(#[from] UsageError),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Run the subcommand until a shutdown signal.
pub async fn run(cli: Cli) -> Result<(), RunError> {
    let shutdown = shutdown_signal();
    match cli.command {
        Command::Version => Ok(()),
        Command::Bootstrap(ref flags) => run_bootstrap(&cli.root, flags, shutdown).await,
        Command::Start(_) => Err(RunError::Usage(UsageError(
            "start: cluster mode is not available yet".into(),
        ))),
    }
}

async fn run_bootstrap(
    root: &cli::RootFlags,
    flags: &cli::BootstrapFlags,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RunError> {
    cli::require_dir("--server-basedir", &flags.server_basedir)?;
    cli::require_file("--bootstrap-kubeconfig", &flags.bootstrap_kubeconfig)?;
    let registry_certs = cli::parse_bootstrap_certs(&flags.bootstrap_certs)?;
    let tls = secure_tls(root)?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        payload_version = %root.payload_version,
        base_dir = %flags.server_basedir.display(),
        "starting machine-config-server in bootstrap mode"
    );
    let source = bootstrap::start(
        BootstrapSettings {
            base_dir: flags.server_basedir.clone(),
            kubeconfig: flags.bootstrap_kubeconfig.clone(),
            registry_certs,
        },
        shutdown.clone(),
    )
    .map_err(|e| UsageError(e.to_string()))?;
    let (_ready_tx, ready) = watch::channel(true);
    let state = AppState {
        snapshots: source.snapshots.clone(),
        ready,
        cache: PayloadCache::new(CACHE_MAX_BYTES),
    };
    let pruner = tokio::spawn(prune_cache_on_new_snapshots(
        source.snapshots,
        state.cache.clone(),
    ));
    serve_ports(root, tls, state, shutdown).await?;
    let _ = source.task.await;
    let _ = pruner.await;
    Ok(())
}

/// Memory budget of the payload cache: a few large pools in every spec version.
const CACHE_MAX_BYTES: usize = 128 << 20;

/// Drop payloads of older generations as soon as a new snapshot is published (ends when the
/// source stops).
async fn prune_cache_on_new_snapshots(
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    cache: PayloadCache,
) {
    while snapshots.changed().await.is_ok() {
        let generation = snapshots.borrow_and_update().generation;
        cache.retain_generation(generation);
    }
}

/// The secure listener's TLS, when the secure port is enabled.
fn secure_tls(root: &cli::RootFlags) -> Result<Option<TlsConfigs>, RunError> {
    if root.secure_port == 0 {
        return Ok(None);
    }
    cli::require_file("--cert", &root.cert)?;
    cli::require_file("--key", &root.key)?;
    let config = load_tls(&root.cert, &root.key).map_err(|e| UsageError(format!("{e:#}")))?;
    let (_tx, rx) = watch::channel(config);
    Ok(Some(rx))
}

// TEMPORARY until the TLS module lands: rustls defaults, no profile, no reload.
fn load_tls(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("--cert {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("--cert {}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("--key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Bind the enabled serving ports and serve until shutdown.
async fn serve_ports(
    root: &cli::RootFlags,
    tls: Option<TlsConfigs>,
    state: AppState,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RunError> {
    let router = server::router(state);
    let limits = ConnectionLimits::default();
    let mut tasks = Vec::new();
    for (port, tls, name) in [
        (root.secure_port, tls, "secure"),
        (root.insecure_port, None, "insecure"),
    ] {
        if port == 0 {
            tracing::info!(listener = name, "listener disabled (port 0)");
            continue;
        }
        let address = SocketAddr::new(root.bind_address, port);
        let socket = TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen on {address} ({name} port)"))?;
        tracing::info!(listener = name, address = %socket.local_addr().unwrap_or(address), tls = tls.is_some(), "listening");
        tasks.push(tokio::spawn(listener::serve(
            socket,
            tls,
            router.clone(),
            limits.clone(),
            wait_for(shutdown.clone()),
        )));
    }
    for task in tasks {
        task.await.context("listener task failed")?;
    }
    Ok(())
}

/// Resolves when the shutdown flag turns true (or its sender is gone).
async fn wait_for(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// A flag that turns true on the first SIGTERM or SIGINT.
fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(e) => {
                    tracing::error!(error = %e, "cannot install the SIGTERM handler");
                    return;
                }
            };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received, shutting down"),
        }
        tx.send_replace(true);
        // Keep the sender alive so receivers see `true`, not a closed channel.
        std::future::pending::<()>().await;
    });
    rx
}
