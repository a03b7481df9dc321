//! Start-up glue: turns the parsed command line into running sources and listeners, and owns the
//! single shutdown path (SIGTERM/SIGINT: stop accepting, drain, exit).
//!
//! Order matters: every flag and file is validated and every port bound before any background
//! work starts, so a bad invocation fails with one line and no side effects.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cache::PayloadCache;
use crate::cli::{self, Cli, Command, RunError, UsageError};
use crate::crypto::{fips, Crypto};
use crate::events::EventInputs;
use crate::mcn::{PublisherInputs, PublisherSettings};
use crate::metrics::{Metrics, PoolStatusBoard};
use crate::server::access::AccessPolicy;
use crate::server::admin::{self, AdminState};
use crate::server::layered_decisions::DecisionTracker;
use crate::server::listener::{self, ConnectionLimits};
use crate::server::notices::EventNotices;
use crate::server::served::ServedLog;
use crate::server::tls::{ReloadOutcome, TlsPolicy, TlsReloader, DEFAULT_RELOAD_INTERVAL};
use crate::server::{self, AppState};
use crate::snapshot::Snapshot;
use crate::source::bootstrap::{self, BootstrapSettings};
use crate::source::cluster;

/// Memory budget of the payload cache: a few large pools in every spec version.
const CACHE_MAX_BYTES: usize = 128 << 20;

/// Run the subcommand until a shutdown signal.
pub async fn run(cli: Cli) -> Result<(), RunError> {
    if matches!(cli.command, Command::Version) {
        return Ok(());
    }
    // Before anything uses TLS: FIPS mode is decided and its module loaded, or nothing starts.
    let crypto = Crypto::for_process(cli.root.fips, std::path::Path::new(fips::KERNEL_FLAG))
        .map_err(|e| UsageError(e.to_string()))?;
    if let Some(line) = crypto.fips_summary() {
        tracing::info!(
            provider = crypto.provider_name(),
            library = %crypto.library(),
            "{line}"
        );
    }
    let shutdown = shutdown_signal();
    match cli.command {
        Command::Version => Ok(()),
        Command::Bootstrap(ref flags) => run_bootstrap(&cli.root, flags, &crypto, shutdown).await,
        Command::Start(ref flags) => run_start(&cli.root, flags, &crypto, shutdown).await,
        Command::Explain(ref flags) => {
            // Its Kubernetes client (cluster mode) follows the TLS flags and FIPS mode too.
            let policy =
                TlsPolicy::from_flags(&cli.root.tls_min_version, &cli.root.tls_cipher_suites)
                    .and_then(|policy| policy.with_crypto(&crypto))
                    .map_err(|e| UsageError(e.to_string()))?;
            install_client_crypto(&policy)?;
            crate::explain::run(flags).await
        }
    }
}

/// Makes the policy's client provider the process default, which the Kubernetes client's rustls
/// config is built from (kube-client calls `rustls::ClientConfig::builder()`, which takes the
/// process default; so do the certificate verifiers it builds).
fn install_client_crypto(policy: &TlsPolicy) -> Result<(), RunError> {
    policy.client_provider().install_default().map_err(|_| {
        RunError::Other(anyhow::anyhow!(
            "a TLS crypto provider was already installed for the process"
        ))
    })
}

async fn run_bootstrap(
    root: &cli::RootFlags,
    flags: &cli::BootstrapFlags,
    crypto: &Crypto,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RunError> {
    cli::require_dir("--server-basedir", &flags.server_basedir)?;
    cli::require_file("--bootstrap-kubeconfig", &flags.bootstrap_kubeconfig)?;
    let registry_certs = cli::parse_bootstrap_certs(&flags.bootstrap_certs)?;
    // The original ignores --tls-min-version/--tls-cipher-suites in bootstrap mode and reads the
    // installer's APIServer manifest instead.
    let policy = TlsPolicy::for_bootstrap(&flags.server_basedir)
        .and_then(|policy| policy.with_crypto(crypto))
        .map_err(|e| UsageError(e.to_string()))?;
    let ports = Ports::bind(root, policy).await?;
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
    // The directory is read before the first request: bootstrap mode is ready at once.
    let (_ready_tx, ready) = watch::channel(true);
    ports
        .serve(source.snapshots, ready, EventNotices::default(), shutdown)
        .await?;
    let _ = source.task.await;
    Ok(())
}

async fn run_start(
    root: &cli::RootFlags,
    flags: &cli::StartFlags,
    crypto: &Crypto,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RunError> {
    if flags.apiserver_url.is_empty() {
        return Err(UsageError("--apiserver-url is required".into()).into());
    }
    if let Some(kubeconfig) = &flags.kubeconfig {
        cli::require_file("--kubeconfig", kubeconfig)?;
    }
    cli::require_dir("--bootstrap-token-dir", &flags.bootstrap_token_dir)?;
    let policy = TlsPolicy::from_flags(&root.tls_min_version, &root.tls_cipher_suites)
        .and_then(|policy| policy.with_crypto(crypto))
        .map_err(|e| UsageError(e.to_string()))?;
    // The replica's name for leader election: the pod name when the manifest passes it,
    // else the host name.
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_default();
    let publisher_settings =
        PublisherSettings::for_replica(&host, flags.mcn_max_writes_per_second, |key| {
            std::env::var(key).ok()
        })
        .map_err(|e| UsageError(e.to_string()))?;
    install_client_crypto(&policy)?;
    let ports = Ports::bind(root, policy).await?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        payload_version = %root.payload_version,
        apiserver_url = %flags.apiserver_url,
        "starting machine-config-server in cluster mode"
    );
    let mut settings = cluster::ClusterSettings::new(flags.apiserver_url.clone());
    settings.kubeconfig = flags.kubeconfig.clone();
    settings.bootstrap_token_dir = flags.bootstrap_token_dir.clone();
    // Served records are stamped in the API server's time (crate::clock).
    settings.clock = ports.served.clock().clone();
    let source = cluster::start(settings, ports.metrics.clone(), wait_for(shutdown.clone()))
        .await
        .map_err(|e| UsageError(e.to_string()))?;
    let (events, notices) = EventNotices::channel(ports.metrics.clone());
    let publisher = crate::mcn::start(
        source.client.clone(),
        publisher_settings,
        PublisherInputs::of(
            &source,
            ports.served.clone(),
            ports.metrics.clone(),
            events.clone(),
        ),
        shutdown.clone(),
    );
    // Events are published by the same replica as MachineConfigNodes: the lease holder.
    let event_task = crate::events::start(
        source.client.clone(),
        &crate::mcn::identity(&host),
        ports.metrics.clone(),
        EventInputs {
            snapshots: source.snapshots.clone(),
            ready: source.ready.clone(),
            leading: publisher.leading.clone(),
            notices,
        },
        shutdown.clone(),
    );
    // Until every cache has synced, `ready` is false and /config answers 503.
    ports
        .serve(
            source.snapshots.clone(),
            source.ready.clone(),
            events,
            shutdown,
        )
        .await?;
    publisher.join().await;
    if let Err(error) = event_task.await {
        tracing::warn!(%error, "event task ended abnormally");
    }
    source.join().await;
    Ok(())
}

/// The bound listeners and TLS, ready to serve once a source exists.
struct Ports {
    secure: Option<(TcpListener, TlsReloader)>,
    insecure: Option<TcpListener>,
    admin: Option<TcpListener>,
    metrics: Arc<Metrics>,
    access: Arc<AccessPolicy>,
    limits: ConnectionLimits,
    /// What each remote address was last answered; the MachineConfigNode publisher (cluster
    /// mode) reads a clone of it.
    served: ServedLog,
}

impl Ports {
    /// Validate TLS and bind every enabled port; errors name the flag or file.
    async fn bind(root: &cli::RootFlags, policy: TlsPolicy) -> Result<Ports, RunError> {
        let metrics = Arc::new(Metrics::new());
        metrics.build_info(env!("CARGO_PKG_VERSION"), &root.payload_version);
        let crypto = policy.crypto();
        metrics.tls_crypto(crypto.provider_name(), &crypto.library(), crypto.is_fips());
        let admin_address = cli::parse_metrics_address(&root.metrics_bind_address)?;
        let access = Arc::new(cli::access_policy(root)?);
        if access.is_restricted() {
            tracing::info!(
                "config requests restricted by --allowed-source-cidrs/--require-token-file"
            );
        }
        if root.max_connections == 0 {
            return Err(UsageError("--max-connections must be at least 1".into()).into());
        }
        let limits = ConnectionLimits {
            max_connections: root.max_connections,
            shutdown_grace: std::time::Duration::from_secs(root.shutdown_grace_seconds),
            header_read_timeout: std::time::Duration::from_secs(
                root.header_read_timeout_seconds.max(1),
            ),
            ..ConnectionLimits::default()
        };

        let secure = if root.secure_port == 0 {
            tracing::info!("secure port disabled (--secure-port 0)");
            None
        } else {
            cli::require_file("--cert", &root.cert)?;
            cli::require_file("--key", &root.key)?;
            policy.log_warnings();
            tracing::info!(policy = %policy, "TLS policy");
            let observer_metrics = metrics.clone();
            let reloader = TlsReloader::start_with_observer(
                &root.cert,
                &root.key,
                policy,
                DEFAULT_RELOAD_INTERVAL,
                Arc::new(move |outcome: &ReloadOutcome| match outcome {
                    ReloadOutcome::Reloaded { not_after_unix } => {
                        observer_metrics.cert_reload(true);
                        observer_metrics.set_cert_expiry(*not_after_unix);
                    }
                    ReloadOutcome::Rejected { .. } => observer_metrics.cert_reload(false),
                }),
            )
            .map_err(|e| UsageError(e.to_string()))?;
            metrics.set_cert_expiry(reloader.stats().not_after_unix());
            let address = SocketAddr::new(root.bind_address, root.secure_port);
            Some((bind(address, "--secure-port").await?, reloader))
        };
        let insecure = match root.insecure_port {
            0 => {
                tracing::info!("insecure port disabled (--insecure-port 0)");
                None
            }
            port => Some(bind(SocketAddr::new(root.bind_address, port), "--insecure-port").await?),
        };
        let admin = match admin_address {
            Some(address) => Some(bind(address, "--metrics-bind-address").await?),
            None => None,
        };
        Ok(Ports {
            secure,
            insecure,
            admin,
            metrics,
            access,
            limits,
            served: ServedLog::default(),
        })
    }

    /// Serve until shutdown, then drain.
    async fn serve(
        self,
        snapshots: watch::Receiver<Arc<Snapshot>>,
        ready: watch::Receiver<bool>,
        events: EventNotices,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(), RunError> {
        let pools = PoolStatusBoard::new();
        let state = AppState {
            snapshots: snapshots.clone(),
            ready: ready.clone(),
            cache: PayloadCache::new(CACHE_MAX_BYTES),
            metrics: self.metrics.clone(),
            pools: pools.clone(),
            access: self.access.clone(),
            layered: Arc::new(DecisionTracker::new()),
            served: self.served.clone(),
            events,
        };
        let router = server::router(state.clone());
        let limits = self.limits.clone();
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(prune_cache_on_new_snapshots(
            snapshots,
            state.cache.clone(),
        )));
        let mut reloader = None;
        if let Some((socket, tls)) = self.secure {
            log_listening(&socket, "secure", true);
            tasks.push(tokio::spawn(listener::serve(
                socket,
                Some(tls.subscribe()),
                router.clone(),
                limits.clone(),
                self.metrics.clone(),
                wait_for(shutdown.clone()),
            )));
            reloader = Some(tls);
        }
        if let Some(socket) = self.insecure {
            log_listening(&socket, "insecure", false);
            tasks.push(tokio::spawn(listener::serve(
                socket,
                None,
                router.clone(),
                limits.clone(),
                self.metrics.clone(),
                wait_for(shutdown.clone()),
            )));
        }
        if let Some(socket) = self.admin {
            log_listening(&socket, "metrics", false);
            let admin_router = admin::admin_router(AdminState {
                metrics: self.metrics.clone(),
                ready,
                pools,
            });
            // The same hardened accept loop as the serving ports (timeouts, connection cap).
            tasks.push(tokio::spawn(listener::serve(
                socket,
                None,
                admin_router,
                limits.clone(),
                self.metrics.clone(),
                wait_for(shutdown.clone()),
            )));
        }
        for task in tasks {
            task.await.context("listener task failed")?;
        }
        if let Some(reloader) = reloader {
            reloader.stop().await;
        }
        Ok(())
    }
}

async fn bind(address: SocketAddr, flag: &str) -> Result<TcpListener, RunError> {
    TcpListener::bind(address).await.map_err(|e| {
        RunError::Usage(UsageError(format!(
            "{flag}: cannot listen on {address}: {e}"
        )))
    })
}

fn log_listening(socket: &TcpListener, name: &str, tls: bool) {
    match socket.local_addr() {
        Ok(address) => tracing::info!(listener = name, %address, tls, "listening"),
        Err(e) => tracing::warn!(listener = name, error = %e, "listening on an unknown address"),
    }
}

/// Drop payloads of older generations as soon as a new snapshot is published, and prewarm the
/// new generation (ends when the source stops).
async fn prune_cache_on_new_snapshots(
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    cache: PayloadCache,
) {
    while snapshots.changed().await.is_ok() {
        let snapshot = snapshots.borrow_and_update().clone();
        // Render again what was being served, with the same pure render a request runs, so the
        // first machine asking after a change does not wait for it.
        let render_for = |key: &crate::cache::CacheKey| {
            let (snapshot, pool, version) = (snapshot.clone(), key.pool.clone(), key.version);
            move || crate::render::render(&snapshot, &pool, version)
        };
        let superseded = || snapshots.has_changed().unwrap_or(true);
        cache
            .advance_and_prewarm(snapshot.generation, render_for, superseded)
            .await;
    }
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
