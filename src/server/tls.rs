//! TLS for the secure port: policy (minimum version and cipher suites from the original's flags or
//! an OpenShift `tlsSecurityProfile`), rustls server configs built from PEM files, and certificate
//! reload.
//!
//! Owns: [`TlsPolicy`] and the cipher-suite name table ([`policy`]), loading a certificate/key pair
//! into an `Arc<rustls::ServerConfig>` ([`load`]), and polling the files to swap in a new config
//! ([`reload`]). Must not touch: sockets, the router, metrics (the reloader reports outcomes through
//! [`ReloadStats`] and an optional observer callback instead), or the process environment.
//!
//! # How the original chooses the TLS settings, and what this module does
//! - **Cluster mode** (`start`): `--tls-min-version` (default `VersionTLS12`) and
//!   `--tls-cipher-suites` (the operator renders both from the cluster's APIServer profile) →
//!   [`TlsPolicy::from_flags`].
//! - **Bootstrap mode** (`bootstrap`): the original *ignores both flags* and takes the settings
//!   from the APIServer manifest `/etc/mcs/bootstrap/api-server/api-server.yaml` (a fixed path that
//!   equals `<basedir>/api-server/api-server.yaml` for the default base directory; we use the
//!   base directory) → [`TlsPolicy::for_bootstrap`]. A missing file, a manifest without
//!   `spec.tlsSecurityProfile`, a profile without `type`, and `type: Custom` without `custom:` all
//!   mean Intermediate, as upstream. Where upstream silently fell back to Intermediate on an
//!   unreadable or unparsable manifest, an unknown profile type, unknown cipher names or an empty
//!   cipher set, we refuse to start with an error naming the file: serving a weaker or different
//!   policy than the one configured must not go unnoticed.
//! - A profile behaves exactly like the equivalent flags (its `minTLSVersion` and `ciphers`).
//!
//! # Differences forced by rustls, each reported as one warning
//! - rustls speaks TLS 1.2 and 1.3 only: a minimum of `VersionTLS10`/`VersionTLS11` means 1.2.
//! - Only ECDHE with AES-GCM or ChaCha20-Poly1305 exists for TLS 1.2; names of other suites that
//!   OpenShift or Go know (CBC, 3DES, RC4, RSA key exchange, DHE) are ignored; an unknown name is an
//!   error, and so is a list left with no usable suite.
//! - TLS 1.3 suites: the ones listed are used; a list naming none keeps all three enabled, as Go
//!   (and the original) does, since Go's TLS 1.3 suites are not configurable and openshift/api
//!   documents them as always enabled.
//! - Key exchange groups are the crypto backend's defaults (`crate::crypto`): AWS-LC's
//!   X25519MLKEM768, X25519, P-256 and P-384; with OpenSSL X25519, P-256 and P-384, plus
//!   X25519MLKEM768 where OpenSSL has ML-KEM (3.5 and later). A Custom profile's (feature-gated) `groups` are not read, as the original does not
//!   read them either.
//! - FIPS mode ([`TlsPolicy::with_crypto`]): unapproved suites are dropped with one warning, key
//!   exchange on P-256, P-384 and P-521 only, approved signature schemes only, and Extended Master
//!   Secret required for TLS 1.2.
//! - Upstream, an empty `--tls-cipher-suites` made Go fall back to Intermediate *including* its
//!   minimum version; here only the suite list falls back and `--tls-min-version` is honoured.
//!
//! HTTP/2 is never offered: ALPN is `http/1.1` only (the original disables h2 for CVE-2016-2183).

pub mod key_kind;
pub mod load;
pub mod policy;
pub mod reload;
pub mod session_cache;

use std::path::PathBuf;

pub use key_kind::KeyKind;
pub use load::{leaf_not_after_unix, load_certificate, load_server_config, LoadedCertificate};
pub use policy::{TlsPolicy, TlsProfile, TlsVersion, APISERVER_MANIFEST};
pub use reload::{
    ReloadObserver, ReloadOutcome, ReloadStats, TlsReloader, DEFAULT_RELOAD_INTERVAL,
};

/// Why a TLS policy or certificate could not be set up. Every variant names the flag or the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A minimum TLS version that is not one of `VersionTLS10`..`VersionTLS13`.
    #[error("{origin}: unknown TLS version {value:?} (expected VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13)")]
    UnknownTlsVersion { origin: String, value: String },
    /// Cipher-suite names that are neither IANA nor OpenSSL names of a known suite (typos).
    #[error("{origin}: unknown cipher suite name(s): {}", names.join(", "))]
    UnknownCipherSuites { origin: String, names: Vec<String> },
    /// Every listed suite is one rustls cannot do.
    #[error("{origin}: none of the cipher suites can be used (rustls supports only ECDHE with AES-GCM or CHACHA20-POLY1305 for TLS 1.2, and the TLS 1.3 suites); unsupported: {}", ignored.join(", "))]
    NoUsableCipherSuites {
        origin: String,
        ignored: Vec<String>,
    },
    /// The crypto in use (FIPS mode, or a library without some suite) leaves a protocol version
    /// the configuration enables without a suite.
    #[error("{origin}: {crypto} allows none of the configured {version} cipher suites: {}", dropped.join(", "))]
    NoCipherSuitesForCrypto {
        origin: String,
        version: &'static str,
        crypto: String,
        dropped: Vec<String>,
    },
    /// The APIServer manifest exists but cannot be read.
    #[error("cannot read APIServer manifest {}: {source}", path.display())]
    ManifestRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The APIServer manifest is not valid YAML of the expected shape.
    #[error("invalid APIServer manifest {}: {source}", path.display())]
    ManifestInvalid {
        path: PathBuf,
        #[source]
        source: policy::ManifestError,
    },
    /// A certificate or key file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A certificate or key file is not valid PEM, or holds no item of the expected kind.
    #[error("{}: {reason}", path.display())]
    Pem { path: PathBuf, reason: String },
    /// A certificate cannot be parsed (or its validity cannot be read).
    #[error("{}: invalid certificate: {reason}", path.display())]
    InvalidCertificate { path: PathBuf, reason: String },
    /// The private key is not one the crypto backend can sign with, or not a valid key at all;
    /// its kind (algorithm and size) is named when the DER says it.
    #[error("{}: {}", path.display(), unusable_key(kind.as_ref(), source))]
    InvalidKey {
        path: PathBuf,
        kind: Option<KeyKind>,
        #[source]
        source: rustls::Error,
    },
    /// The private key does not belong to the certificate.
    #[error("private key {} does not match certificate {}", key.display(), cert.display())]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    /// Any other rustls error while building the config.
    #[error("TLS configuration for {} / {}: {source}", cert.display(), key.display())]
    Rustls {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
}

/// Why a key was refused, naming what it is: a kind no build signs with ("an RSA 1024 key,
/// which ..."), or a kind it does sign with that failed to load (corrupt, or this backend's
/// limits), or a DER whose kind cannot be read.
fn unusable_key(kind: Option<&KeyKind>, source: &rustls::Error) -> String {
    match kind {
        Some(kind) if !kind.is_supported() => format!(
            "an {kind} private key, which the server cannot serve with (it takes {})",
            key_kind::SUPPORTED
        ),
        Some(kind) => format!("{kind} private key refused by the TLS crypto backend: {source}"),
        None => format!("not a private key the server can read: {source}"),
    }
}

impl TlsError {
    /// Short, stable name used as a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnknownTlsVersion { .. } => "unknown_tls_version",
            Self::UnknownCipherSuites { .. } => "unknown_cipher_suite",
            Self::NoUsableCipherSuites { .. } => "no_usable_cipher_suite",
            Self::NoCipherSuitesForCrypto { .. } => "no_cipher_suite_for_crypto",
            Self::ManifestRead { .. } => "manifest_read",
            Self::ManifestInvalid { .. } => "manifest_invalid",
            Self::ReadFile { .. } => "read",
            Self::Pem { .. } => "pem",
            Self::InvalidCertificate { .. } => "invalid_certificate",
            Self::InvalidKey { .. } => "invalid_key",
            Self::KeyMismatch { .. } => "key_mismatch",
            Self::Rustls { .. } => "rustls",
        }
    }
}
