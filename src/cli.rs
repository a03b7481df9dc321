//! Command line: the original's flags and defaults, plus validation of its values.
//!
//! Flags are validated before any port is bound; every problem is a one-line error naming the
//! flag or file (exit code 64, `EX_USAGE`).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Default TLS port.
pub const SECURE_PORT: u16 = 22623;
/// Default plain-HTTP port.
pub const INSECURE_PORT: u16 = 22624;
/// Default `--tls-min-version`.
pub const DEFAULT_TLS_MIN_VERSION: &str = "VersionTLS12";

/// machine-config-server: serves Ignition configs to booting OpenShift nodes.
#[derive(Debug, Parser)]
#[command(
    name = "machine-config-server",
    version,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(flatten)]
    pub root: RootFlags,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every subcommand (the original's root flags, plus ours).
#[derive(Debug, Args)]
pub struct RootFlags {
    /// TLS port serving Ignition configs; 0 disables it.
    #[arg(long, global = true, default_value_t = SECURE_PORT)]
    pub secure_port: u16,
    /// Plain-HTTP port serving the same routes; 0 disables it.
    #[arg(long, global = true, default_value_t = INSECURE_PORT)]
    pub insecure_port: u16,
    /// Address the serving ports bind to (all interfaces by default, as the original).
    #[arg(long, global = true, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// Certificate chain (PEM) for TLS; reloaded when it changes.
    #[arg(long, global = true, default_value = "/etc/ssl/mcs/tls.crt")]
    pub cert: PathBuf,
    /// Private key (PEM) for TLS; reloaded when it changes.
    #[arg(long, global = true, default_value = "/etc/ssl/mcs/tls.key")]
    pub key: PathBuf,
    /// Minimum TLS version: VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13.
    #[arg(long, global = true, default_value = DEFAULT_TLS_MIN_VERSION)]
    pub tls_min_version: String,
    /// TLS cipher suites, comma-separated (IANA or OpenSSL names); empty means the profile's.
    #[arg(long, global = true, value_delimiter = ',')]
    pub tls_cipher_suites: Vec<String>,
    /// FIPS mode: TLS through OpenSSL's FIPS provider with FIPS-approved algorithms only; the
    /// server refuses to start when it cannot. On without the flag when the kernel runs in FIPS
    /// mode (/proc/sys/crypto/fips_enabled is 1).
    #[arg(long, global = true)]
    pub fips: bool,
    /// Release version of the payload, logged and exported as build info.
    #[arg(long, global = true, default_value = "")]
    pub payload_version: String,
    /// Address of the metrics/readiness listener (plain HTTP); empty disables it. Default
    /// 127.0.0.1:22625, unless a serving port was given that port (HyperShift's ignition server
    /// runs `bootstrap --secure-port=22625`): then the listener stays off, said in one log line.
    #[arg(long, global = true, value_name = "HOST:PORT")]
    pub metrics_bind_address: Option<String>,
    /// Only these client networks may fetch configs (comma-separated CIDRs); empty allows all.
    #[arg(long, global = true, value_delimiter = ',')]
    pub allowed_source_cidrs: Vec<String>,
    /// Require `Authorization: Bearer <token>` on config requests, token read from this file.
    #[arg(long, global = true)]
    pub require_token_file: Option<PathBuf>,
    /// Load balancers in front of the serving ports that send the PROXY protocol (v1 or v2),
    /// comma-separated CIDRs: connections from there must start with a header naming the client,
    /// whose address then stands for it; a header from anywhere else closes the connection.
    /// Empty (the default): off.
    #[arg(long, global = true, value_delimiter = ',', value_name = "CIDRS")]
    pub proxy_protocol_from: Vec<String>,
    /// Refuse config requests (503, which Ignition retries) from Ignition releases older than
    /// this (`User-Agent: Ignition/<version>`): machines whose boot image is too old wait for a
    /// newer one. Off by default.
    #[arg(long, global = true, value_name = "MAJOR.MINOR.PATCH")]
    pub min_ignition_version: Option<String>,
    /// Maximum concurrent connections per serving port.
    #[arg(long, global = true, default_value_t = 4096)]
    pub max_connections: usize,
    /// Seconds a client gets to send a request's headers; also the idle keep-alive timeout.
    #[arg(long, global = true, default_value_t = 10)]
    pub header_read_timeout_seconds: u64,
    /// Seconds in-flight responses get to finish after SIGTERM/SIGINT.
    #[arg(long, global = true, default_value_t = 20)]
    pub shutdown_grace_seconds: u64,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormatArg::Text)]
    pub log_format: LogFormatArg,
    /// Log verbosity, klog style (0-10); RUST_LOG overrides it.
    #[arg(short = 'v', long = "v", global = true, default_value_t = 0)]
    pub verbosity: u8,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormatArg {
    Text,
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the installer's bootstrap directory (bootstrap node).
    Bootstrap(BootstrapFlags),
    /// Serve from the cluster's MachineConfigPools (in-cluster DaemonSet).
    Start(StartFlags),
    /// Print what the server would serve for a pool, and why, without serving anything.
    Explain(ExplainFlags),
    /// Compare what this server would answer with what a running original answers, for every
    /// pool and spec version, without serving anything.
    Compare(CompareFlags),
    /// List what this server wrote to the cluster that the original does not (its shared
    /// records ConfigMap, its Lease, its annotations and status fields on MachineConfigNodes,
    /// its Events), and with --remove remove it: the way back to the original. A dry run by
    /// default. Exit 0: nothing of this server is left; 2: something is (listed, or a removal
    /// failed); 1: the API could not be asked.
    Cleanup(CleanupFlags),
    /// Print the version and exit.
    Version,
}

/// What served configs carry beyond the original's, asked for by flag (`bootstrap`, `start`,
/// and `explain` and `compare` to render as those would).
#[derive(Clone, Copy, Debug, Default, Args)]
pub struct ServedFlags {
    /// Serve every machine /etc/machine-config-daemon/mcs-ca-bundle.crt and, in cluster mode,
    /// the node annotation machineconfiguration.openshift.io/machineConfigServerURL: where and
    /// how its daemon reports a first-boot failure, as upstream's PR #6124 serves them. Off by
    /// default (the original's answers).
    ///
    /// The file holds the ControllerConfig's spec.rootCAData (the CA the daemon trusts when it
    /// reports); the annotation, in /etc/machine-config-daemon/node-annotations.json, is
    /// https://HOST:22623 with HOST from the Infrastructure `cluster`, read once at start.
    /// Cluster mode needs `get` on infrastructures (config.openshift.io); without it every
    /// answer stays the original's and the server says why.
    #[arg(long)]
    pub advertise_failure_reporting: bool,
}

/// `bootstrap` flags.
#[derive(Debug, Args)]
pub struct BootstrapFlags {
    /// Base directory holding machine-pools/, machine-configs/ and controller-config/.
    #[arg(long, default_value = "/etc/mcs/bootstrap")]
    pub server_basedir: PathBuf,
    /// Kubeconfig served to nodes as /etc/kubernetes/kubeconfig (must exist).
    #[arg(long, default_value = "/etc/kubernetes/kubeconfig")]
    pub bootstrap_kubeconfig: PathBuf,
    /// Registry CA certificate served as /etc/docker/certs.d/NAME/ca.crt: NAME=FILE, FILE
    /// relative to the base directory. Repeatable.
    #[arg(long = "bootstrap-certs", value_name = "NAME=FILE")]
    pub bootstrap_certs: Vec<String>,
    /// Record what every control-plane machine was served in the bootstrap node's own API
    /// server, reached with this kubeconfig: the cluster's replicas later write each record
    /// on the machine's MachineConfigNode. Answers never wait for it or fail because of it:
    /// the records are kept in a file under --served-records-dir and written whenever the API
    /// takes them (before it is up, before the namespace exists, through restarts). Off by
    /// default (nothing written anywhere).
    #[arg(long, value_name = "FILE")]
    pub served_records_kubeconfig: Option<PathBuf>,
    /// Where --served-records-kubeconfig keeps the records between restarts of the static
    /// pod (a host directory).
    #[arg(long, value_name = "DIR", default_value = crate::mcn::bootstrap_records::DEFAULT_DIR)]
    pub served_records_dir: PathBuf,
    #[command(flatten)]
    pub served: ServedFlags,
}

/// `start` flags.
#[derive(Debug, Args)]
pub struct StartFlags {
    /// API server URL written into the kubeconfig served to nodes (required).
    #[arg(long, default_value = "")]
    pub apiserver_url: String,
    /// Kubeconfig to reach the cluster (outside a cluster; in-cluster config otherwise).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Directory with the node bootstrap token (`token`) and CA (`ca.crt`).
    #[arg(long, default_value = "/etc/mcs/bootstrap-token")]
    pub bootstrap_token_dir: PathBuf,
    /// Most API writes per second the MachineConfigNode publisher makes (a backlog of Nodes
    /// without an MCN is worked through at this pace, newest Nodes first).
    #[arg(long, default_value_t = crate::mcn::rate::DEFAULT_MAX_WRITES_PER_SECOND)]
    pub mcn_max_writes_per_second: std::num::NonZeroU32,
    #[command(flatten)]
    pub served: ServedFlags,
}

/// Where `explain` and `compare` read the served state from: the source flags of `bootstrap`
/// or `start`, read once (nothing is served).
///
/// Exactly one of `--server-basedir` (bootstrap mode), `--kubeconfig` or `--in-cluster`
/// (cluster mode) chooses the source.
#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("source")
        .required(true)
        .args(["server_basedir", "kubeconfig", "in_cluster"])
))]
pub struct SourceFlags {
    /// Bootstrap mode: the base directory `bootstrap --server-basedir` serves.
    #[arg(long, value_name = "DIR")]
    pub server_basedir: Option<PathBuf>,
    /// Bootstrap mode: the kubeconfig served to nodes (must exist, as for `bootstrap`).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/kubernetes/kubeconfig",
        conflicts_with_all = ["kubeconfig", "in_cluster"]
    )]
    pub bootstrap_kubeconfig: PathBuf,
    /// Bootstrap mode: registry CA certificates, NAME=FILE as for `bootstrap`. Repeatable.
    #[arg(
        long = "bootstrap-certs",
        value_name = "NAME=FILE",
        conflicts_with_all = ["kubeconfig", "in_cluster"]
    )]
    pub bootstrap_certs: Vec<String>,
    /// Cluster mode: kubeconfig to reach the cluster.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Cluster mode with the in-cluster configuration (inside a machine-config-server pod).
    #[arg(long)]
    pub in_cluster: bool,
    /// Cluster mode (required): API server URL written into the served kubeconfig, as `start`.
    #[arg(long, default_value = "", conflicts_with = "server_basedir")]
    pub apiserver_url: String,
    /// Cluster mode: directory with the node bootstrap token (`token`) and CA (`ca.crt`).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/etc/mcs/bootstrap-token",
        conflicts_with = "server_basedir"
    )]
    pub bootstrap_token_dir: PathBuf,
    /// Cluster mode: seconds to wait for every watch cache to sync before answering 503.
    #[arg(long, default_value_t = 30, conflicts_with = "server_basedir")]
    pub timeout_seconds: u64,
    /// What the server would serve beyond the original's, as `bootstrap` and `start` take it.
    #[command(flatten)]
    pub served: ServedFlags,
}

/// `explain` flags: the source flags of `bootstrap` or `start`, plus what to explain.
///
/// The serving flags (ports, TLS, access) are ignored.
#[derive(Debug, Args)]
#[command(
    next_help_heading = "Explain options (of the options above, only --log-format, -v, --fips and the --tls-* options apply; the last two to its Kubernetes client)"
)]
pub struct ExplainFlags {
    /// The pool to explain, as a node asks for it in `/config/POOL`.
    #[arg(long)]
    pub pool: String,
    #[command(flatten)]
    pub source: SourceFlags,
    /// The request's Accept header, negotiated exactly as the server does. Default: the
    /// header of a current Ignition (newest spec).
    #[arg(long, value_name = "HEADER", conflicts_with = "spec")]
    pub accept: Option<String>,
    /// Ask for this Ignition spec version instead of negotiating one (e.g. 3.4.0); 3.6.0 is
    /// served as 3.5.0 when the pool's rendered config is not spec 3.6, as the server does.
    #[arg(long, value_name = "VERSION")]
    pub spec: Option<String>,
    /// Report format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub output: ReportFormat,
    /// Also write the exact bytes that would be served to FILE (only when they would be).
    #[arg(long, value_name = "FILE")]
    pub write_config: Option<PathBuf>,
}

/// `compare` flags: the source flags of `explain`, the original to compare with, and which
/// pools.
///
/// The serving flags (ports, TLS, access) are ignored; nothing is served.
#[derive(Debug, Args)]
#[command(
    next_help_heading = "Compare options (of the options above, only --log-format, -v, --fips and the --tls-* options apply; the last two to its clients)"
)]
pub struct CompareFlags {
    #[command(flatten)]
    pub source: SourceFlags,
    /// The running original to compare with: https://HOST:22623 (or http://HOST:22624).
    #[arg(long, value_name = "URL")]
    pub against: String,
    /// CA certificates (PEM) to verify the original's serving certificate (required for
    /// https).
    #[arg(long, value_name = "FILE")]
    pub against_ca: Option<PathBuf>,
    /// The name to verify the original's certificate for, when it is not the URL's host (a
    /// replica asked by its address, say).
    #[arg(long, value_name = "NAME")]
    pub against_server_name: Option<String>,
    /// The local address to send the requests from (the client address the original sees),
    /// e.g. one that is no node's. Default: the system's choice.
    #[arg(long, value_name = "ADDRESS")]
    pub client_address: Option<IpAddr>,
    /// Compare only this pool (repeatable). Default: every pool the source knows.
    #[arg(long, value_name = "POOL")]
    pub pool: Vec<String>,
    /// Seconds each request to the original may take.
    #[arg(long, default_value_t = 30)]
    pub request_timeout_seconds: u64,
    /// Report format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub output: ReportFormat,
}

/// `cleanup` flags: where the cluster is, whether to remove, and the report's format.
///
/// The serving flags (ports, TLS, access) are ignored; nothing is served.
#[derive(Debug, Args)]
#[command(
    next_help_heading = "Cleanup options (of the options above, only --log-format, -v, --fips and the --tls-* options apply; the last two to its Kubernetes client)"
)]
pub struct CleanupFlags {
    /// Kubeconfig to reach the cluster (outside a cluster; in-cluster config otherwise), as
    /// for `start`.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Remove what is listed (stop every replica of this server first). Without it, nothing is
    /// changed.
    #[arg(long, conflicts_with = "dry_run")]
    pub remove: bool,
    /// List only, change nothing (the default; for scripts that want to say so).
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds each API request may take.
    #[arg(long, default_value_t = 30)]
    pub request_timeout_seconds: u64,
    /// Report format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub output: ReportFormat,
}

/// `--output` of `explain`, `compare` and `cleanup`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
}

/// What keeps the process from starting: a flag, variable or file that is wrong (exit code 64,
/// `EX_USAGE`). One line names the flag or file; the typed cause is kept ([`Error::source`]).
///
/// [`Error::source`]: std::error::Error::source
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// A file or directory named by a flag is missing, unreadable or of the wrong kind.
    #[error("{flag} {}: {problem}", path.display())]
    Path {
        flag: &'static str,
        path: PathBuf,
        #[source]
        problem: PathProblem,
    },
    /// A flag's value is not what the flag takes.
    #[error("{flag} {value:?}: {expected}")]
    Value {
        flag: &'static str,
        value: String,
        expected: String,
    },
    /// A required flag is missing (`why`: what it is needed for).
    #[error("{flag} is required{why}")]
    Missing {
        flag: &'static str,
        why: &'static str,
    },
    /// `--allowed-source-cidrs` or `--require-token-file`.
    #[error("{flag}: {source}")]
    Access {
        flag: &'static str,
        #[source]
        source: crate::server::access::AccessError,
    },
    /// The TLS policy (flags or the installer's APIServer manifest) or the certificate.
    #[error(transparent)]
    Tls(#[from] crate::server::tls::TlsError),
    /// The crypto backend: FIPS mode required but unavailable, or the kernel's flag unreadable.
    #[error(transparent)]
    Crypto(#[from] crate::crypto::CryptoError),
    /// The bootstrap base directory.
    #[error(transparent)]
    Bootstrap(#[from] crate::source::bootstrap::BootstrapError),
    /// `--kubeconfig`, or the in-cluster configuration.
    #[error(transparent)]
    Cluster(#[from] crate::source::cluster::Error),
    /// The `MCS_MCN_*` settings of the MachineConfigNode publisher.
    #[error(transparent)]
    Publisher(#[from] crate::mcn::SettingsError),
    /// A port cannot be bound.
    #[error("{flag}: cannot listen on {address}: {source}")]
    Listen {
        flag: &'static str,
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl UsageError {
    /// A short label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Path { .. } => "path",
            Self::Value { .. } => "value",
            Self::Missing { .. } => "missing",
            Self::Access { .. } => "access",
            Self::Tls(_) => "tls",
            Self::Crypto(_) => "crypto",
            Self::Bootstrap(_) => "bootstrap",
            Self::Cluster(_) => "cluster",
            Self::Publisher(_) => "publisher",
            Self::Listen { .. } => "listen",
        }
    }

    pub fn value(flag: &'static str, value: &str, expected: impl Into<String>) -> Self {
        UsageError::Value {
            flag,
            value: value.to_owned(),
            expected: expected.into(),
        }
    }
}

/// What is wrong with a path a flag names.
#[derive(Debug, thiserror::Error)]
pub enum PathProblem {
    #[error("not a file")]
    NotAFile,
    #[error("not a directory")]
    NotADirectory,
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The node-bootstrapper token directory cannot give a token (`explain` reads it where
    /// the server is not running).
    #[error("{0} (run explain where the server runs, or point it at a copy of the node-bootstrapper token)")]
    Token(#[source] crate::source::cluster::kubeconfig::KubeconfigError),
}

/// Why the process could not run: usage errors exit 64, [`RunError::Left`] 2, everything
/// else 1.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// `cleanup`: something this server wrote is still in the cluster (listed by a dry run, or
    /// a removal failed); the text says what.
    #[error("{0}")]
    Left(String),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl RunError {
    /// The process's exit code: 64 (`EX_USAGE`), 2 or 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Usage(_) => 64,
            RunError::Left(_) => 2,
            RunError::Other(_) => 1,
        }
    }
}

/// `--bootstrap-certs` entries as (registry name, file under the base directory).
pub fn parse_bootstrap_certs(values: &[String]) -> Result<Vec<(String, PathBuf)>, UsageError> {
    const FLAG: &str = "--bootstrap-certs";
    values
        .iter()
        .map(|value| {
            let (name, file) = value
                .split_once('=')
                .filter(|(name, file)| !name.is_empty() && !file.is_empty() && !file.contains('='))
                .ok_or_else(|| UsageError::value(FLAG, value, "expected NAME=FILE"))?;
            if name.contains('/') || name == "." || name == ".." {
                return Err(UsageError::value(
                    FLAG,
                    value,
                    "NAME must be a registry host name",
                ));
            }
            // As the original: FILE is joined to the base directory even when absolute.
            Ok((
                name.to_string(),
                PathBuf::from(file.trim_start_matches('/')),
            ))
        })
        .collect()
}

/// Where the admin (metrics/readiness) listener binds, decided from `--metrics-bind-address`
/// and the serving ports' addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminListener {
    /// Bind here; `explicit` when `--metrics-bind-address` named it.
    At { address: SocketAddr, explicit: bool },
    /// Off: `--metrics-bind-address` was empty.
    Disabled,
    /// Off: the default address is one a serving port was given (`flag`); a caller that chose
    /// that port for serving gets it, and nothing optional takes it first.
    DefaultTaken {
        default: SocketAddr,
        flag: &'static str,
    },
}

impl AdminListener {
    /// The address to bind, if any.
    pub fn address(&self) -> Option<SocketAddr> {
        match self {
            AdminListener::At { address, .. } => Some(*address),
            AdminListener::Disabled | AdminListener::DefaultTaken { .. } => None,
        }
    }
}

/// `--metrics-bind-address` against the serving ports (`(flag, address)` of each enabled
/// one): the default moves out of the way (stays off) when a serving port was given its port;
/// an address given explicitly that a serving port takes is a usage error naming both flags.
pub fn admin_listener(
    value: Option<&str>,
    serving: &[(&'static str, SocketAddr)],
) -> Result<AdminListener, UsageError> {
    const FLAG: &str = "--metrics-bind-address";
    let (text, explicit) = match value {
        Some("") => return Ok(AdminListener::Disabled),
        Some(text) => (text, true),
        None => (crate::server::admin::DEFAULT_BIND_ADDRESS, false),
    };
    let address: SocketAddr = text
        .parse()
        .map_err(|_| UsageError::value(FLAG, text, "expected HOST:PORT"))?;
    let taken_by = serving
        .iter()
        .find(|(_, serving)| addresses_overlap(address, *serving))
        .map(|(flag, _)| *flag);
    match taken_by {
        None => Ok(AdminListener::At { address, explicit }),
        Some(flag) if !explicit => Ok(AdminListener::DefaultTaken {
            default: address,
            flag,
        }),
        Some(flag) => Err(UsageError::value(
            FLAG,
            text,
            format!("an address {flag} does not serve on (that port is {flag}'s)"),
        )),
    }
}

/// Whether two listeners would contend for one socket: the same port, and the same address or
/// either one on every address (0.0.0.0 or ::). Port 0 (any free port) never contends.
fn addresses_overlap(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// `--proxy-protocol-from`: `None` when empty (off).
pub fn proxy_protocol(
    root: &RootFlags,
) -> Result<Option<crate::server::proxy_protocol::ProxyProtocol>, UsageError> {
    use crate::server::access::Cidr;
    use crate::server::proxy_protocol::{ProxyProtocol, DEFAULT_HEADER_TIMEOUT};
    let cidrs = root
        .proxy_protocol_from
        .iter()
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            Cidr::parse(c).map_err(|source| UsageError::Access {
                flag: "--proxy-protocol-from",
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((!cidrs.is_empty()).then(|| ProxyProtocol::new(cidrs, DEFAULT_HEADER_TIMEOUT)))
}

/// `--min-ignition-version`: `None` when not given.
pub fn min_ignition_version(
    root: &RootFlags,
) -> Result<Option<crate::ignition::client::IgnitionRelease>, UsageError> {
    root.min_ignition_version
        .as_deref()
        .map(|text| {
            crate::ignition::client::IgnitionRelease::parse_flag(text).map_err(|_| {
                UsageError::value(
                    "--min-ignition-version",
                    text,
                    "expected an Ignition release MAJOR.MINOR.PATCH, e.g. 2.20.0",
                )
            })
        })
        .transpose()
}

/// `--allowed-source-cidrs` and `--require-token-file` as an access policy.
pub fn access_policy(root: &RootFlags) -> Result<crate::server::access::AccessPolicy, UsageError> {
    use crate::server::access::{AccessError, AccessPolicy, Cidr};
    let cidrs = root
        .allowed_source_cidrs
        .iter()
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            Cidr::parse(c).map_err(|source| UsageError::Access {
                flag: "--allowed-source-cidrs",
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    const TOKEN_FLAG: &str = "--require-token-file";
    let token_error = |error| match error {
        // The file itself: named as every other file a flag names.
        AccessError::ReadToken { path, source } => UsageError::Path {
            flag: TOKEN_FLAG,
            path,
            problem: source.into(),
        },
        source => UsageError::Access {
            flag: TOKEN_FLAG,
            source,
        },
    };
    let token = match &root.require_token_file {
        Some(path) => Some(AccessPolicy::read_token(path).map_err(token_error)?),
        None => None,
    };
    AccessPolicy::new(cidrs, token).map_err(token_error)
}

/// Fails when `path` is not a readable file, naming the flag.
pub fn require_file(flag: &'static str, path: &Path) -> Result<(), UsageError> {
    let problem = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => return Ok(()),
        Ok(_) => PathProblem::NotAFile,
        Err(e) => PathProblem::Io(e),
    };
    Err(UsageError::Path {
        flag,
        path: path.to_owned(),
        problem,
    })
}

/// Fails when `path` is not a directory, naming the flag.
pub fn require_dir(flag: &'static str, path: &Path) -> Result<(), UsageError> {
    let problem = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => PathProblem::NotADirectory,
        Err(e) => PathProblem::Io(e),
    };
    Err(UsageError::Path {
        flag,
        path: path.to_owned(),
        problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_default_stays_off_where_a_serving_port_was_given_its_port() {
        let any = |port| SocketAddr::from(([0, 0, 0, 0], port));
        let loopback = |port| SocketAddr::from(([127, 0, 0, 1], port));
        // The MCO's and the installer's ports: the default binds.
        let serving = [
            ("--secure-port", any(22623)),
            ("--insecure-port", any(22624)),
        ];
        assert_eq!(
            admin_listener(None, &serving).unwrap(),
            AdminListener::At {
                address: loopback(22625),
                explicit: false
            }
        );
        // HyperShift's ignition server: the default would take the secure port.
        let hypershift = [
            ("--secure-port", any(22625)),
            ("--insecure-port", any(22626)),
        ];
        let decided = admin_listener(None, &hypershift).unwrap();
        assert_eq!(
            decided,
            AdminListener::DefaultTaken {
                default: loopback(22625),
                flag: "--secure-port"
            }
        );
        assert_eq!(decided.address(), None);
        // A serving port on another address only: no contention.
        let elsewhere = [("--insecure-port", SocketAddr::from(([10, 0, 0, 1], 22625)))];
        assert_eq!(
            admin_listener(None, &elsewhere).unwrap().address(),
            Some(loopback(22625))
        );
        // Given explicitly and taken by a serving port: a usage error naming both flags.
        let error = admin_listener(Some("0.0.0.0:22626"), &hypershift).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("--metrics-bind-address"), "{text}");
        assert!(text.contains("--insecure-port"), "{text}");
        // Given explicitly elsewhere, empty, malformed, or any free port.
        assert_eq!(
            admin_listener(Some("127.0.0.1:9100"), &hypershift).unwrap(),
            AdminListener::At {
                address: loopback(9100),
                explicit: true
            }
        );
        assert_eq!(
            admin_listener(Some(""), &hypershift).unwrap(),
            AdminListener::Disabled
        );
        assert!(admin_listener(Some("22625"), &serving).is_err());
        assert_eq!(
            admin_listener(Some("127.0.0.1:0"), &serving)
                .unwrap()
                .address(),
            Some(loopback(0))
        );
    }

    #[test]
    fn bootstrap_certs_are_name_equals_file() {
        let parsed = parse_bootstrap_certs(&["registry.example:5000=certs/ca.pem".into()]).unwrap();
        assert_eq!(
            parsed,
            vec![(
                "registry.example:5000".to_string(),
                PathBuf::from("certs/ca.pem")
            )]
        );
        for bad in ["nofile", "=x", "x=", "a=b=c", "../x=y"] {
            assert!(parse_bootstrap_certs(&[bad.to_string()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn original_flag_spellings_parse() {
        let cli = Cli::try_parse_from([
            "machine-config-server",
            "start",
            "--apiserver-url=https://api-int.example:6443",
            "--payload-version=4.20.0",
            "--tls-cipher-suites=",
            "--tls-min-version=VersionTLS12",
            "--v=2",
        ])
        .unwrap();
        assert_eq!(cli.root.verbosity, 2);
        assert!(
            matches!(cli.command, Command::Start(ref s) if s.apiserver_url == "https://api-int.example:6443")
        );
        let cli = Cli::try_parse_from([
            "machine-config-server",
            "--secure-port",
            "0",
            "bootstrap",
            "--bootstrap-certs",
            "a=b",
            "--bootstrap-certs=c=d",
        ])
        .unwrap();
        assert_eq!(cli.root.secure_port, 0);
        assert!(matches!(cli.command, Command::Bootstrap(ref b) if b.bootstrap_certs.len() == 2));
    }

    #[test]
    fn explain_takes_exactly_one_source() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(
                ["machine-config-server", "explain", "--pool", "master"]
                    .iter()
                    .chain(args),
            )
        };
        let cli = parse(&["--server-basedir", "d", "--bootstrap-certs", "a=b"]).unwrap();
        assert!(
            matches!(cli.command, Command::Explain(ref e) if e.source.server_basedir.is_some() && e.source.bootstrap_certs.len() == 1)
        );
        let cli = parse(&["--kubeconfig", "k", "--apiserver-url", "https://a:6443"]).unwrap();
        assert!(
            matches!(cli.command, Command::Explain(ref e) if e.source.kubeconfig.is_some() && e.output == ReportFormat::Text)
        );
        assert!(parse(&["--in-cluster", "--output", "json"]).is_ok());
        for bad in [
            &[][..],
            &["--server-basedir", "d", "--kubeconfig", "k"],
            &["--kubeconfig", "k", "--in-cluster"],
            &["--kubeconfig", "k", "--bootstrap-kubeconfig", "x"],
            &["--in-cluster", "--bootstrap-certs", "a=b"],
            &["--server-basedir", "d", "--apiserver-url", "https://a"],
            &["--server-basedir", "d", "--bootstrap-token-dir", "t"],
            &["--server-basedir", "d", "--accept", "x", "--spec", "3.4.0"],
        ] {
            let error = parse(bad).expect_err(&format!("{bad:?} must be refused"));
            assert!(error.use_stderr(), "{bad:?}: a usage error (exit 64)");
        }
    }

    #[test]
    fn cleanup_is_a_dry_run_unless_told_to_remove() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(["machine-config-server", "cleanup"].iter().chain(args))
        };
        let Command::Cleanup(flags) = parse(&[]).unwrap().command else {
            panic!("cleanup")
        };
        assert!(!flags.remove && flags.kubeconfig.is_none());
        assert_eq!(flags.output, ReportFormat::Text);
        let Command::Cleanup(flags) = parse(&["--kubeconfig", "k", "--remove", "--output", "json"])
            .unwrap()
            .command
        else {
            panic!("cleanup")
        };
        assert!(flags.remove);
        assert_eq!(flags.output, ReportFormat::Json);
        assert!(parse(&["--dry-run"]).is_ok());
        let error = parse(&["--dry-run", "--remove"]).expect_err("both");
        assert!(error.use_stderr(), "a usage error (exit 64)");
    }

    #[test]
    fn compare_takes_a_source_and_the_original() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(["machine-config-server", "compare"].iter().chain(args))
        };
        let cli = parse(&[
            "--server-basedir",
            "d",
            "--against",
            "https://api-int.example:22623",
            "--against-ca",
            "ca.crt",
            "--client-address",
            "10.0.0.9",
            "--pool",
            "master",
            "--pool",
            "arbiter",
            "--output",
            "json",
        ])
        .unwrap();
        let Command::Compare(flags) = cli.command else {
            panic!("compare")
        };
        assert_eq!(flags.pool, ["master", "arbiter"]);
        assert_eq!(flags.output, ReportFormat::Json);
        assert_eq!(flags.client_address, Some([10, 0, 0, 9].into()));
        assert!(parse(&["--in-cluster", "--against", "https://h:22623"]).is_ok());
        for bad in [
            &["--server-basedir", "d"][..],
            &["--against", "https://h:22623"],
            &[
                "--server-basedir",
                "d",
                "--kubeconfig",
                "k",
                "--against",
                "x",
            ],
            &[
                "--server-basedir",
                "d",
                "--against",
                "x",
                "--client-address",
                "h",
            ],
        ] {
            let error = parse(bad).expect_err(&format!("{bad:?} must be refused"));
            assert!(error.use_stderr(), "{bad:?}: a usage error (exit 64)");
        }
    }
}
