//! The one wiring entry: validated [`Settings`] in, a running [`App`] out. `main` and every
//! test that runs the application in-process start it the same way ([`App::start`]); `main`
//! then waits for the shutdown signal ([`run`]).
//!
//! Order matters: every flag and file is validated ([`Settings::from_cli`]) and every port bound
//! before any background work starts, so a bad invocation fails with one line and no side
//! effects. One shutdown path: the `shutdown` flag stops accepting, drains in-flight responses
//! within the grace period, stops the publisher (releasing its lease), the Event task and the
//! source, in that order.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cache::PayloadCache;
use crate::cli::{self, Cli, Command, RunError, UsageError};
use crate::crypto::{fips, Crypto};
use crate::events::EventInputs;
use crate::ignition::client::IgnitionRelease;
use crate::mcn::bootstrap_records::{self, BootstrapRecordsSettings};
use crate::mcn::{PublisherInputs, PublisherSettings};
use crate::metrics::{Metrics, PoolStatusBoard};
use crate::rights::Grants;
use crate::server::access::AccessPolicy;
use crate::server::admin::{self, AdminState};
use crate::server::layered_decisions::DecisionTracker;
use crate::server::listener::{self, ConnectionLimits};
use crate::server::min_ignition::MinIgnition;
use crate::server::node_failure::FailureIntake;
use crate::server::notices::EventNotices;
use crate::server::proxy_protocol::ProxyProtocol;
use crate::server::served::ServedLog;
use crate::server::tls::{ReloadOutcome, TlsPolicy, TlsReloader, DEFAULT_RELOAD_INTERVAL};
use crate::server::{self, AppState};
use crate::snapshot::Snapshot;
use crate::source::bootstrap::{self, BootstrapSettings};
use crate::source::cluster::rights::RightsSettings;
use crate::source::cluster::{self, ClusterSettings};

/// Memory budget of the payload cache: a few large pools in every spec version.
const CACHE_MAX_BYTES: usize = 128 << 20;

/// Everything the application needs, validated: how it serves, and from which source.
pub struct Settings {
    pub serving: Serving,
    pub mode: Mode,
}

/// How the application serves: its listeners, TLS, limits and access policy.
pub struct Serving {
    /// The TLS (Ignition) listener; `None` disables it (`--secure-port 0`).
    pub secure: Option<SecureListener>,
    /// The plain-HTTP listener with the same routes; `None` disables it.
    pub insecure: Option<SocketAddr>,
    /// The metrics/readiness listener: where it binds, or why it is off.
    pub admin: cli::AdminListener,
    /// The TLS policy of the secure listener, with the process's crypto backend ([`run`] also
    /// makes its client side the Kubernetes client's).
    pub tls: TlsPolicy,
    pub access: AccessPolicy,
    pub limits: ConnectionLimits,
    /// `--proxy-protocol-from`: the balancers that must send a PROXY protocol header on the
    /// serving ports (`None`: off, connections are served as accepted).
    pub proxy_protocol: Option<Arc<ProxyProtocol>>,
    /// `--min-ignition-version`: older Ignition clients are refused (`None`: off).
    pub min_ignition: Option<IgnitionRelease>,
    /// `--payload-version`, exported as build info.
    pub payload_version: String,
}

/// The TLS listener and the certificate it serves (reloaded when the files change).
pub struct SecureListener {
    pub address: SocketAddr,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Where the served state comes from.
// Built once at start-up: the variants' sizes do not matter, boxing would only add noise where
// settings are written.
#[allow(clippy::large_enum_variant)]
pub enum Mode {
    /// `bootstrap`: the installer's base directory, and where its records go (`None`: nowhere,
    /// the original's behaviour).
    Bootstrap {
        source: BootstrapSettings,
        records: Option<BootstrapRecordsSettings>,
    },
    /// `start`: the cluster's watch caches, with the MachineConfigNode publisher and Events.
    Cluster {
        source: ClusterSettings,
        publisher: PublisherSettings,
    },
}

impl Serving {
    /// Plain HTTP on `address` only (no TLS listener, no admin listener, no limits beyond the
    /// defaults): an in-process application behind something that terminates TLS, as the
    /// tests run it.
    pub fn plain_http(address: SocketAddr) -> Self {
        Serving {
            secure: None,
            insecure: Some(address),
            admin: cli::AdminListener::Disabled,
            tls: TlsPolicy::intermediate(),
            access: AccessPolicy::default(),
            limits: ConnectionLimits::default(),
            proxy_protocol: None,
            min_ignition: None,
            payload_version: String::new(),
        }
    }
}

impl Settings {
    /// The settings of `bootstrap` or `start` from the command line, every flag, file and
    /// `MCS_MCN_*` variable checked, TLS served with `crypto` (the process's backend, FIPS mode
    /// decided); no port is bound. `None` for the other subcommands.
    pub fn from_cli(cli: &Cli, crypto: &Crypto) -> Result<Option<Settings>, UsageError> {
        let root = &cli.root;
        let (tls, mode) = match &cli.command {
            Command::Bootstrap(flags) => {
                cli::require_dir("--server-basedir", &flags.server_basedir)?;
                cli::require_file("--bootstrap-kubeconfig", &flags.bootstrap_kubeconfig)?;
                let registry_certs = cli::parse_bootstrap_certs(&flags.bootstrap_certs)?;
                // The original ignores --tls-min-version/--tls-cipher-suites in bootstrap mode
                // and reads the installer's APIServer manifest instead.
                let tls = TlsPolicy::for_bootstrap(&flags.server_basedir)?.with_crypto(crypto)?;
                let records = match &flags.served_records_kubeconfig {
                    Some(kubeconfig) => {
                        cli::require_file("--served-records-kubeconfig", kubeconfig)?;
                        Some(BootstrapRecordsSettings::new(
                            kubeconfig.clone(),
                            flags.served_records_dir.clone(),
                        ))
                    }
                    None => None,
                };
                let mode = Mode::Bootstrap {
                    source: BootstrapSettings {
                        base_dir: flags.server_basedir.clone(),
                        kubeconfig: flags.bootstrap_kubeconfig.clone(),
                        registry_certs,
                        advertise_failure_reporting: flags.served.advertise_failure_reporting,
                    },
                    records,
                };
                (tls, mode)
            }
            Command::Start(flags) => {
                if flags.apiserver_url.is_empty() {
                    return Err(UsageError::Missing {
                        flag: "--apiserver-url",
                        why: "",
                    });
                }
                if let Some(kubeconfig) = &flags.kubeconfig {
                    cli::require_file("--kubeconfig", kubeconfig)?;
                }
                cli::require_dir("--bootstrap-token-dir", &flags.bootstrap_token_dir)?;
                let tls = TlsPolicy::from_flags(&root.tls_min_version, &root.tls_cipher_suites)?
                    .with_crypto(crypto)?;
                // The replica's name for leader election: the pod name when the manifest
                // passes it, else the host name.
                let host = std::env::var("POD_NAME")
                    .or_else(|_| std::env::var("HOSTNAME"))
                    .unwrap_or_default();
                let mut publisher = PublisherSettings::for_replica(
                    &host,
                    flags.mcn_max_writes_per_second,
                    |key| std::env::var(key).ok(),
                )?;
                // Answers drain for the grace period; their records are written as they end.
                publisher.records.drain_bound =
                    std::time::Duration::from_secs(root.shutdown_grace_seconds)
                        + crate::server::commit::DEFAULT_WAIT_BOUND;
                let mut source = ClusterSettings::new(flags.apiserver_url.clone());
                source.kubeconfig = flags.kubeconfig.clone();
                source.bootstrap_token_dir = flags.bootstrap_token_dir.clone();
                source.rights = RightsSettings::from_env(|key| std::env::var(key).ok());
                if flags.served.advertise_failure_reporting {
                    source.advertise_failure_reporting();
                }
                (tls, Mode::Cluster { source, publisher })
            }
            Command::Explain(_) | Command::Compare(_) | Command::Cleanup(_) | Command::Version => {
                return Ok(None)
            }
        };
        Ok(Some(Settings {
            serving: Serving::from_flags(root, tls)?,
            mode,
        }))
    }
}

impl Serving {
    fn from_flags(root: &cli::RootFlags, tls: TlsPolicy) -> Result<Serving, UsageError> {
        if root.max_connections == 0 {
            return Err(UsageError::value(
                "--max-connections",
                "0",
                "must be at least 1",
            ));
        }
        let secure = match root.secure_port {
            0 => None,
            port => {
                cli::require_file("--cert", &root.cert)?;
                cli::require_file("--key", &root.key)?;
                Some(SecureListener {
                    address: SocketAddr::new(root.bind_address, port),
                    cert: root.cert.clone(),
                    key: root.key.clone(),
                })
            }
        };
        let insecure = match root.insecure_port {
            0 => None,
            port => Some(SocketAddr::new(root.bind_address, port)),
        };
        let serving_addresses: Vec<(&'static str, SocketAddr)> = [
            secure.as_ref().map(|s| ("--secure-port", s.address)),
            insecure.map(|address| ("--insecure-port", address)),
        ]
        .into_iter()
        .flatten()
        .collect();
        Ok(Serving {
            secure,
            insecure,
            admin: cli::admin_listener(root.metrics_bind_address.as_deref(), &serving_addresses)?,
            tls,
            access: cli::access_policy(root)?,
            limits: ConnectionLimits {
                max_connections: root.max_connections,
                shutdown_grace: std::time::Duration::from_secs(root.shutdown_grace_seconds),
                header_read_timeout: std::time::Duration::from_secs(
                    root.header_read_timeout_seconds.max(1),
                ),
                ..ConnectionLimits::default()
            },
            proxy_protocol: cli::proxy_protocol(root)?.map(Arc::new),
            min_ignition: cli::min_ignition_version(root)?,
            payload_version: root.payload_version.clone(),
        })
    }
}

/// Run the subcommand until a shutdown signal (SIGTERM/SIGINT).
pub async fn run(cli: Cli) -> Result<(), RunError> {
    if matches!(cli.command, Command::Version) {
        return Ok(());
    }
    // Before anything uses TLS: FIPS mode is decided and its module loaded, or nothing starts.
    let crypto = Crypto::for_process(cli.root.fips, std::path::Path::new(fips::KERNEL_FLAG))
        .map_err(UsageError::from)?;
    if let Some(line) = crypto.fips_summary() {
        tracing::info!(
            provider = crypto.provider_name(),
            library = %crypto.library(),
            "{line}"
        );
    }
    if let Command::Explain(flags) = &cli.command {
        // Its Kubernetes client (cluster mode) follows the TLS flags and FIPS mode too.
        let policy = TlsPolicy::from_flags(&cli.root.tls_min_version, &cli.root.tls_cipher_suites)
            .and_then(|policy| policy.with_crypto(&crypto))
            .map_err(UsageError::from)?;
        install_client_crypto(&policy)?;
        let serving = (cli.root.secure_port != 0).then(|| crate::explain::ServingPair {
            cert: &cli.root.cert,
            key: &cli.root.key,
            policy: &policy,
        });
        return crate::explain::run(flags, serving).await;
    }
    if let Command::Compare(flags) = &cli.command {
        // Its Kubernetes client (cluster mode) and its client to the original follow the TLS
        // flags and FIPS mode too.
        let policy = TlsPolicy::from_flags(&cli.root.tls_min_version, &cli.root.tls_cipher_suites)
            .and_then(|policy| policy.with_crypto(&crypto))
            .map_err(UsageError::from)?;
        install_client_crypto(&policy)?;
        return crate::compare::run(flags, policy.client_provider()).await;
    }
    if let Command::Cleanup(flags) = &cli.command {
        // Its Kubernetes client follows the TLS flags and FIPS mode too.
        let policy = TlsPolicy::from_flags(&cli.root.tls_min_version, &cli.root.tls_cipher_suites)
            .and_then(|policy| policy.with_crypto(&crypto))
            .map_err(UsageError::from)?;
        install_client_crypto(&policy)?;
        return crate::cleanup::run(flags).await;
    }
    let Some(settings) = Settings::from_cli(&cli, &crypto)? else {
        return Ok(());
    };
    if matches!(settings.mode, Mode::Cluster { .. }) {
        install_client_crypto(&settings.serving.tls)?;
    }
    App::start(settings, shutdown_signal()).await?.wait().await
}

/// Makes the policy's client provider the process default, which the Kubernetes client's rustls
/// config is built from (kube-client calls `rustls::ClientConfig::builder()`, which takes the
/// process default; so do the certificate verifiers it builds). Process-wide, so `run` does it
/// once; an application started in-process by a test keeps the test process's default.
fn install_client_crypto(policy: &TlsPolicy) -> Result<(), RunError> {
    policy.client_provider().install_default().map_err(|_| {
        RunError::Other(anyhow::anyhow!(
            "a TLS crypto provider was already installed for the process"
        ))
    })
}

/// What [`App::start`] serves the routes from, besides the snapshots: shared by both routers.
pub struct ServingState {
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub ready: watch::Receiver<bool>,
    pub metrics: Arc<Metrics>,
    pub access: Arc<AccessPolicy>,
    pub served: ServedLog,
    pub events: EventNotices,
    /// `--min-ignition-version` (`None`: off).
    pub min_ignition: Option<IgnitionRelease>,
    /// Cluster mode: the features' rights, shown on `/status`.
    pub features: Option<watch::Receiver<Arc<Grants>>>,
    /// The TLS port's certificate, shown on `/status`.
    pub certificate: Option<crate::server::tls::ReloadStats>,
}

impl ServingState {
    /// Serving `snapshots` (ready when `ready` is true) with a new metrics registry, no access
    /// restriction, an unshared served log and no Event publisher.
    pub fn new(
        snapshots: watch::Receiver<Arc<Snapshot>>,
        ready: watch::Receiver<bool>,
    ) -> ServingState {
        ServingState {
            snapshots,
            ready,
            metrics: Arc::new(Metrics::new()),
            access: Arc::new(AccessPolicy::default()),
            served: ServedLog::default(),
            events: EventNotices::default(),
            min_ignition: None,
            features: None,
            certificate: None,
        }
    }

    /// The public routes (both serving ports) and the admin routes over one application state.
    pub fn routers(self) -> Routers {
        let pools = PoolStatusBoard::new();
        let state = AppState {
            snapshots: self.snapshots,
            ready: self.ready.clone(),
            cache: PayloadCache::new(CACHE_MAX_BYTES),
            metrics: self.metrics.clone(),
            pools: pools.clone(),
            access: self.access,
            layered: Arc::new(DecisionTracker::new()),
            served: self.served,
            events: self.events,
            min_ignition: self.min_ignition.map(|m| Arc::new(MinIgnition::new(m))),
            failure_intake: Arc::new(FailureIntake::default()),
        };
        Routers {
            public: server::router(state.clone()),
            admin: admin::admin_router(AdminState {
                metrics: self.metrics,
                ready: self.ready,
                pools,
                snapshots: Some(state.snapshots.clone())
                    .filter(|snapshots| snapshots.borrow().mode == crate::snapshot::Mode::Cluster),
                features: self.features,
                certificate: self.certificate,
            }),
            state,
        }
    }
}

/// The routers of one application state.
pub struct Routers {
    /// `/config/<pool>` and `/healthz`, as both serving ports answer them.
    pub public: Router,
    /// `/metrics`, `/readyz`, `/healthz`, `/status` of the admin listener.
    pub admin: Router,
    state: AppState,
}

/// A running application.
pub struct App {
    /// Where the TLS listener is bound (with its port when 0 was asked), if enabled.
    pub secure_address: Option<SocketAddr>,
    /// Where the plain-HTTP listener is bound, if enabled.
    pub insecure_address: Option<SocketAddr>,
    /// Where the admin listener is bound, if enabled.
    pub admin_address: Option<SocketAddr>,
    pub metrics: Arc<Metrics>,
    /// The snapshots the application serves from, as its source publishes them.
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    /// True once config requests can be answered (cluster mode: every cache synced).
    pub ready: watch::Receiver<bool>,
    /// Cluster mode: true while this replica holds the MachineConfigNode publisher's lease.
    pub leading: Option<watch::Receiver<bool>>,
    public_router: Router,
    admin_router: Router,
    stopped: JoinHandle<Result<(), RunError>>,
}

impl App {
    /// Binds every enabled listener, starts the source (and, in cluster mode, the
    /// MachineConfigNode publisher and the Event task) and serves until `shutdown` turns true.
    /// Returns once everything runs; a listener that cannot be bound or a source that cannot
    /// start is a usage error naming the flag.
    pub async fn start(
        settings: Settings,
        shutdown: watch::Receiver<bool>,
    ) -> Result<App, RunError> {
        let Settings { serving, mode } = settings;
        let metrics = Arc::new(Metrics::new());
        metrics.build_info(env!("CARGO_PKG_VERSION"), &serving.payload_version);
        let crypto = serving.tls.crypto();
        metrics.tls_crypto(crypto.provider_name(), &crypto.library(), crypto.is_fips());
        let listeners = Listeners::bind(&serving, metrics.clone()).await?;
        if serving.access.is_restricted() {
            tracing::info!(
                "config requests restricted by --allowed-source-cidrs/--require-token-file"
            );
        }
        if serving.proxy_protocol.is_some() {
            tracing::info!(
                "PROXY protocol headers required from --proxy-protocol-from on the serving ports"
            );
        }
        if let Some(minimum) = &serving.min_ignition {
            tracing::info!(%minimum, "config requests from older Ignition releases are refused (--min-ignition-version)");
        }
        let served = ServedLog::default();
        let access = Arc::new(serving.access);
        let certificate = listeners
            .secure
            .as_ref()
            .map(|(_, reloader)| reloader.stats());
        let (routers, background, leading) = match mode {
            Mode::Bootstrap {
                source: settings,
                records,
            } => {
                tracing::info!(
                    version = env!("CARGO_PKG_VERSION"),
                    payload_version = %serving.payload_version,
                    base_dir = %settings.base_dir.display(),
                    "starting machine-config-server in bootstrap mode"
                );
                if settings.advertise_failure_reporting {
                    tracing::info!(
                        "served configs carry the root CA file for first-boot failure reports (--advertise-failure-reporting; no server URL in bootstrap mode, as upstream)"
                    );
                }
                let source =
                    bootstrap::start(settings, shutdown.clone()).map_err(UsageError::from)?;
                // The directory is read before the first request: bootstrap mode is ready.
                let (ready_tx, ready) = watch::channel(true);
                let routers = ServingState {
                    access,
                    served,
                    metrics: metrics.clone(),
                    min_ignition: serving.min_ignition.clone(),
                    certificate,
                    ..ServingState::new(source.snapshots.clone(), ready)
                }
                .routers();
                // The records writer is no commit writer: answers never wait for it.
                let records = match records {
                    Some(records) => {
                        let restored = bootstrap_records::restore(&records, &routers.state.served)
                            .map_err(|e| {
                                UsageError::value(
                                    "--served-records-dir",
                                    &records.dir.display().to_string(),
                                    e.to_string(),
                                )
                            })?;
                        tracing::info!(
                            kubeconfig = %records.kubeconfig.display(),
                            file = %records.file().display(),
                            restored,
                            "served records go to the bootstrap node's API server (--served-records-kubeconfig); answers do not wait for them"
                        );
                        Some(bootstrap_records::start(
                            records,
                            routers.state.served.clone(),
                            metrics.clone(),
                            shutdown.clone(),
                        ))
                    }
                    None => None,
                };
                let background = Background::Bootstrap {
                    source: source.task,
                    records,
                    _ready: ready_tx,
                };
                (routers, background, None)
            }
            Mode::Cluster {
                source: mut source_settings,
                publisher: publisher_settings,
            } => {
                tracing::info!(
                    version = env!("CARGO_PKG_VERSION"),
                    payload_version = %serving.payload_version,
                    apiserver_url = %source_settings.apiserver_url,
                    "starting machine-config-server in cluster mode"
                );
                // Served records are stamped in the API server's time (crate::clock).
                source_settings.clock = served.clock().clone();
                let source =
                    cluster::start(source_settings, metrics.clone(), wait_for(shutdown.clone()))
                        .await
                        .map_err(UsageError::from)?;
                let (events, notices) = EventNotices::channel(metrics.clone());
                let identity = publisher_settings.lease.identity.clone();
                let publisher = crate::mcn::start(
                    source.client.clone(),
                    publisher_settings,
                    PublisherInputs::of(&source, served.clone(), metrics.clone(), events.clone()),
                    shutdown.clone(),
                );
                // Events are published by the same replica as MachineConfigNodes: the lease
                // holder.
                let event_task = crate::events::start(
                    source.client.clone(),
                    &identity,
                    metrics.clone(),
                    EventInputs {
                        snapshots: source.snapshots.clone(),
                        ready: source.ready.clone(),
                        leading: publisher.leading.clone(),
                        notices,
                        rights: source.rights.clone(),
                    },
                    shutdown.clone(),
                );
                // Until every cache has synced, `ready` is false and /config answers 503.
                let routers = ServingState {
                    access,
                    served,
                    metrics: metrics.clone(),
                    events,
                    min_ignition: serving.min_ignition.clone(),
                    features: Some(source.rights.subscribe()),
                    certificate,
                    ..ServingState::new(source.snapshots.clone(), source.ready.clone())
                }
                .routers();
                let leading = publisher.leading.clone();
                let background = Background::Cluster {
                    source: Box::new(source),
                    publisher,
                    events: event_task,
                };
                (routers, background, Some(leading))
            }
        };
        let ready = routers.state.ready.clone();
        let snapshots = routers.state.snapshots.clone();
        let (public_router, admin_router) = (routers.public.clone(), routers.admin.clone());
        let addresses = listeners.addresses();
        let stopped = tokio::spawn(serve_until_shutdown(
            listeners,
            routers,
            (serving.limits, serving.proxy_protocol),
            metrics.clone(),
            background,
            shutdown,
        ));
        Ok(App {
            secure_address: addresses.0,
            insecure_address: addresses.1,
            admin_address: addresses.2,
            metrics,
            snapshots,
            ready,
            leading,
            public_router,
            admin_router,
            stopped,
        })
    }

    /// The public routes, for requests without a socket (both ports answer them).
    pub fn router(&self) -> Router {
        self.public_router.clone()
    }

    /// The admin listener's routes, for requests without a socket.
    pub fn admin_router(&self) -> Router {
        self.admin_router.clone()
    }

    /// Waits until the shutdown flag turned true and everything has stopped: listeners drained,
    /// the publisher's lease released, the Event task and the source ended.
    pub async fn wait(self) -> Result<(), RunError> {
        self.stopped.await.context("the application task failed")?
    }
}

/// The background work of a mode, stopped after the listeners.
enum Background {
    Bootstrap {
        source: JoinHandle<()>,
        /// `--served-records-kubeconfig`'s writer.
        records: Option<JoinHandle<()>>,
        /// Keeps `ready` true (and open) while serving.
        _ready: watch::Sender<bool>,
    },
    Cluster {
        source: Box<cluster::ClusterSource>,
        publisher: crate::mcn::Publisher,
        events: JoinHandle<()>,
    },
}

impl Background {
    async fn join(self) {
        match self {
            Background::Bootstrap {
                source,
                records,
                _ready,
            } => {
                let _ = source.await;
                if let Some(records) = records {
                    if let Err(error) = records.await {
                        tracing::warn!(%error, "bootstrap records task ended abnormally");
                    }
                }
            }
            Background::Cluster {
                source,
                publisher,
                events,
            } => {
                publisher.join().await;
                if let Err(error) = events.await {
                    tracing::warn!(%error, "event task ended abnormally");
                }
                source.join().await;
            }
        }
    }
}

/// The bound listeners and the TLS reloader, before anything is served.
struct Listeners {
    secure: Option<(TcpListener, TlsReloader)>,
    insecure: Option<TcpListener>,
    admin: Option<TcpListener>,
}

impl Listeners {
    /// Load TLS and bind every enabled listener; errors name the flag or file.
    async fn bind(serving: &Serving, metrics: Arc<Metrics>) -> Result<Listeners, UsageError> {
        let secure = match &serving.secure {
            None => {
                tracing::info!("secure port disabled (--secure-port 0)");
                None
            }
            Some(secure) => {
                let policy = serving.tls.clone();
                policy.log_warnings();
                tracing::info!(policy = %policy, "TLS policy");
                let observer_metrics = metrics.clone();
                let reloader = TlsReloader::start_with_observer(
                    &secure.cert,
                    &secure.key,
                    policy,
                    DEFAULT_RELOAD_INTERVAL,
                    Arc::new(move |outcome: &ReloadOutcome| match outcome {
                        ReloadOutcome::Reloaded { not_after_unix, .. } => {
                            observer_metrics.cert_reload(true);
                            observer_metrics.set_cert_expiry(*not_after_unix);
                        }
                        ReloadOutcome::Rejected { .. } => observer_metrics.cert_reload(false),
                    }),
                )?;
                metrics.set_cert_expiry(reloader.stats().not_after_unix());
                Some((bind(secure.address, "--secure-port").await?, reloader))
            }
        };
        let insecure = match serving.insecure {
            None => {
                tracing::info!("insecure port disabled (--insecure-port 0)");
                None
            }
            Some(address) => Some(bind(address, "--insecure-port").await?),
        };
        // Bound after the serving ports. Its default is never a reason not to serve: a caller
        // that gave a serving port the default's port gets it (HyperShift's ignition server runs
        // `--secure-port=22625`), and a default another process holds leaves it off. An address
        // given explicitly is the operator's request: one that cannot be bound is a usage error.
        let admin = match &serving.admin {
            cli::AdminListener::At {
                address,
                explicit: true,
            } => Some(bind(*address, "--metrics-bind-address").await?),
            cli::AdminListener::At {
                address,
                explicit: false,
            } => match bind(*address, "--metrics-bind-address").await {
                Ok(socket) => Some(socket),
                Err(error) => {
                    tracing::warn!(
                        %error,
                        "admin listener off (/metrics, /readyz, /healthz, /status): its default \
                         address cannot be bound; --metrics-bind-address names another"
                    );
                    None
                }
            },
            cli::AdminListener::DefaultTaken { default, flag } => {
                tracing::warn!(
                    %default,
                    serving_flag = flag,
                    "admin listener off (/metrics, /readyz, /healthz, /status): its default \
                     address is {flag}'s port; --metrics-bind-address names another to turn it on"
                );
                None
            }
            cli::AdminListener::Disabled => None,
        };
        Ok(Listeners {
            secure,
            insecure,
            admin,
        })
    }

    /// The bound addresses: secure, insecure, admin.
    fn addresses(&self) -> (Option<SocketAddr>, Option<SocketAddr>, Option<SocketAddr>) {
        let address = |socket: &TcpListener| socket.local_addr().ok();
        (
            self.secure.as_ref().and_then(|(socket, _)| address(socket)),
            self.insecure.as_ref().and_then(address),
            self.admin.as_ref().and_then(address),
        )
    }
}

/// Serve every listener until shutdown, drain, then stop the background work.
async fn serve_until_shutdown(
    listeners: Listeners,
    routers: Routers,
    (limits, proxy_protocol): (ConnectionLimits, Option<Arc<ProxyProtocol>>),
    metrics: Arc<Metrics>,
    background: Background,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RunError> {
    let mut tasks = vec![tokio::spawn(prune_cache_on_new_snapshots(
        routers.state.snapshots.clone(),
        routers.state.cache.clone(),
    ))];
    type TlsConfigs = Option<watch::Receiver<Arc<rustls::ServerConfig>>>;
    // The PROXY protocol applies to the serving ports only, never to the admin listener.
    let mut serve = |socket: TcpListener, name: &str, tls: TlsConfigs, service, proxy| {
        log_listening(&socket, name, tls.is_some());
        tasks.push(tokio::spawn(listener::serve(
            socket,
            tls,
            service,
            limits.clone(),
            proxy,
            metrics.clone(),
            wait_for(shutdown.clone()),
        )));
    };
    // The serving ports' connections count for the group commit's early writes.
    let public = listener::Service {
        router: routers.public.clone(),
        commit: Some(routers.state.served.commit().clone()),
    };
    let mut reloader = None;
    if let Some((socket, tls)) = listeners.secure {
        serve(
            socket,
            "secure",
            Some(tls.subscribe()),
            public.clone(),
            proxy_protocol.clone(),
        );
        reloader = Some(tls);
    }
    if let Some(socket) = listeners.insecure {
        serve(
            socket,
            "insecure",
            None,
            public.clone(),
            proxy_protocol.clone(),
        );
    }
    if let Some(socket) = listeners.admin {
        // The same hardened accept loop as the serving ports (timeouts, connection cap).
        serve(socket, "metrics", None, routers.admin.clone().into(), None);
    }
    // Until shutdown: the listeners return once drained.
    for task in tasks {
        task.await.context("listener task failed")?;
    }
    if let Some(reloader) = reloader {
        reloader.stop().await;
    }
    background.join().await;
    Ok(())
}

async fn bind(address: SocketAddr, flag: &'static str) -> Result<TcpListener, UsageError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| UsageError::Listen {
            flag,
            address,
            source,
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
