//! TLS policy: the minimum protocol version and the cipher suites, from the original's flags or
//! from an OpenShift `tlsSecurityProfile` (Old, Intermediate, Modern, Custom).
//!
//! Pure decisions plus one file read ([`TlsPolicy::from_apiserver_manifest`]); nothing here logs
//! except [`TlsPolicy::log_warnings`], which the start-up code calls once. The profile contents are
//! those of openshift/api `config/v1` `TLSProfiles` (Mozilla guidelines 5.8). Cipher names are
//! matched exactly (case-sensitive), as Go and OpenShift do. Must not touch: certificates, sockets,
//! the process environment.

use std::fmt;
use std::path::{Path, PathBuf};

use rustls::crypto::CryptoProvider;
use rustls::{CipherSuite, SupportedProtocolVersion};
use serde::Deserialize;

use super::TlsError;
use crate::crypto::Crypto;

/// Where bootstrap mode finds the APIServer manifest, relative to the base directory.
pub const APISERVER_MANIFEST: &str = "api-server/api-server.yaml";

const FLAG_MIN_VERSION: &str = "--tls-min-version";
const FLAG_CIPHER_SUITES: &str = "--tls-cipher-suites";

/// openshift/api `TLSProfiles[Old].Ciphers`.
const OLD_CIPHERS: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA384",
    "ECDHE-RSA-AES256-SHA384",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA256",
    "AES256-SHA256",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// openshift/api `TLSProfiles[Intermediate].Ciphers`.
const INTERMEDIATE_CIPHERS: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
];

/// openshift/api `TLSProfiles[Modern].Ciphers`.
const MODERN_CIPHERS: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// Names of real cipher suites that rustls (ring) cannot negotiate: CBC, 3DES, RC4, RSA key
/// exchange, DHE. Every name Go's crypto/tls or OpenShift's profiles (old and current) know is
/// here or in [`supported_suite`], so a list accepted upstream is never an "unknown name" error.
const UNSUPPORTED_NAMES: &[&str] = &[
    // IANA names (Go's crypto/tls constants, plus the DHE and SHA384-CBC suites of older profiles).
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256",
    // OpenSSL names (OpenShift profiles, library-go's OpenSSL-to-IANA table).
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA384",
    "ECDHE-RSA-AES256-SHA384",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "ECDHE-RSA-DES-CBC3-SHA",
    "ECDHE-ECDSA-RC4-SHA",
    "ECDHE-RSA-RC4-SHA",
    "DHE-RSA-AES128-GCM-SHA256",
    "DHE-RSA-AES256-GCM-SHA384",
    "DHE-RSA-CHACHA20-POLY1305",
    "DHE-RSA-AES128-SHA256",
    "DHE-RSA-AES256-SHA256",
    "DHE-RSA-AES128-SHA",
    "DHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA256",
    "AES256-SHA256",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
    "RC4-SHA",
];

/// The suite for an IANA or OpenSSL name, if rustls can negotiate it (with either backend).
fn supported_suite(name: &str) -> Option<CipherSuite> {
    let suite = match name {
        // TLS 1.3: IANA and OpenSSL use the same names.
        "TLS_AES_128_GCM_SHA256" => CipherSuite::TLS13_AES_128_GCM_SHA256,
        "TLS_AES_256_GCM_SHA384" => CipherSuite::TLS13_AES_256_GCM_SHA384,
        "TLS_CHACHA20_POLY1305_SHA256" => CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        // TLS 1.2, IANA names (and Go's legacy CHACHA20 names without the _SHA256 suffix).
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" | "ECDHE-ECDSA-AES128-GCM-SHA256" => {
            CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        }
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" | "ECDHE-ECDSA-AES256-GCM-SHA384" => {
            CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        }
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
        | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"
        | "ECDHE-ECDSA-CHACHA20-POLY1305" => {
            CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" | "ECDHE-RSA-AES128-GCM-SHA256" => {
            CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        }
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" | "ECDHE-RSA-AES256-GCM-SHA384" => {
            CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
        }
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
        | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"
        | "ECDHE-RSA-CHACHA20-POLY1305" => CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        _ => return None,
    };
    Some(suite)
}

/// The TLS 1.3 suites offered when the configuration names none, in preference order.
const ALL_TLS13_SUITES: [CipherSuite; 3] = [
    CipherSuite::TLS13_AES_256_GCM_SHA384,
    CipherSuite::TLS13_AES_128_GCM_SHA256,
    CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
];

/// Whether `suite` is a TLS 1.3 suite (the ones rustls can do all start with `TLS13_`).
fn is_tls13(suite: CipherSuite) -> bool {
    ALL_TLS13_SUITES.contains(&suite)
}

/// A minimum TLS version as the original's flag and the OpenShift API spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls10,
    Tls11,
    Tls12,
    Tls13,
}

impl TlsVersion {
    /// Parses `VersionTLS10`..`VersionTLS13`; an empty value means the default, TLS 1.2 (as Go's
    /// flag helper does).
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "" | "VersionTLS12" => Some(Self::Tls12),
            "VersionTLS10" => Some(Self::Tls10),
            "VersionTLS11" => Some(Self::Tls11),
            "VersionTLS13" => Some(Self::Tls13),
            _ => None,
        }
    }

    /// The API spelling, e.g. `VersionTLS12`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tls10 => "VersionTLS10",
            Self::Tls11 => "VersionTLS11",
            Self::Tls12 => "VersionTLS12",
            Self::Tls13 => "VersionTLS13",
        }
    }
}

impl fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An OpenShift `tlsSecurityProfile`, already resolved to one of the four types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsProfile {
    Old,
    Intermediate,
    Modern,
    /// `custom: {ciphers: [...], minTLSVersion: ...}`.
    Custom {
        ciphers: Vec<String>,
        min_tls_version: String,
    },
}

impl TlsProfile {
    /// The profile type as OpenShift spells it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Old => "Old",
            Self::Intermediate => "Intermediate",
            Self::Modern => "Modern",
            Self::Custom { .. } => "Custom",
        }
    }

    /// The profile's `minTLSVersion`.
    pub fn min_tls_version(&self) -> &str {
        match self {
            Self::Old => "VersionTLS10",
            Self::Intermediate => "VersionTLS12",
            Self::Modern => "VersionTLS13",
            Self::Custom {
                min_tls_version, ..
            } => min_tls_version,
        }
    }

    /// The profile's `ciphers`, as OpenShift lists them (OpenSSL names).
    pub fn ciphers(&self) -> Vec<String> {
        let builtin = match self {
            Self::Old => OLD_CIPHERS,
            Self::Intermediate => INTERMEDIATE_CIPHERS,
            Self::Modern => MODERN_CIPHERS,
            Self::Custom { ciphers, .. } => return ciphers.clone(),
        };
        builtin.iter().map(|name| (*name).to_owned()).collect()
    }

    /// The profile of an APIServer manifest (`config.openshift.io/v1`, kind `APIServer`), with the
    /// original's defaults: no `spec.tlsSecurityProfile`, no `type`, or `type: Custom` without
    /// `custom` all mean Intermediate; `type` wins over whichever sub-object is present. An unknown
    /// `type` (the CRD would reject it) is an error.
    pub fn from_apiserver_yaml(yaml: &str) -> Result<Self, ManifestError> {
        let manifest: ApiServerManifest = serde_yaml::from_str(yaml)?;
        if let Some(kind) = manifest.kind.as_deref() {
            if kind != "APIServer" {
                return Err(ManifestError::Kind(kind.to_owned()));
            }
        }
        let Some(profile) = manifest.spec.and_then(|spec| spec.tls_security_profile) else {
            return Ok(Self::Intermediate);
        };
        match profile.profile_type.as_deref().unwrap_or("") {
            "" | "Intermediate" => Ok(Self::Intermediate),
            "Old" => Ok(Self::Old),
            "Modern" => Ok(Self::Modern),
            "Custom" => Ok(match profile.custom {
                Some(custom) => Self::Custom {
                    ciphers: custom.ciphers.unwrap_or_default(),
                    min_tls_version: custom.min_tls_version.unwrap_or_default(),
                },
                None => Self::Intermediate,
            }),
            other => Err(ManifestError::ProfileType(other.to_owned())),
        }
    }
}

/// Why an APIServer manifest gives no TLS profile.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("kind is {0:?}, expected \"APIServer\"")]
    Kind(String),
    #[error("spec.tlsSecurityProfile.type is {0:?}, expected Old, Intermediate, Modern or Custom")]
    ProfileType(String),
}

#[derive(Deserialize)]
struct ApiServerManifest {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    spec: Option<ApiServerSpec>,
}

#[derive(Deserialize)]
struct ApiServerSpec {
    #[serde(rename = "tlsSecurityProfile", default)]
    tls_security_profile: Option<ProfileYaml>,
}

#[derive(Deserialize)]
struct ProfileYaml {
    #[serde(rename = "type", default)]
    profile_type: Option<String>,
    #[serde(default)]
    custom: Option<CustomProfileYaml>,
}

#[derive(Deserialize)]
struct CustomProfileYaml {
    #[serde(default)]
    ciphers: Option<Vec<String>>,
    #[serde(rename = "minTLSVersion", default)]
    min_tls_version: Option<String>,
}

/// The TLS settings of the process: what rustls will negotiate on the secure port (and offer the
/// Kubernetes API server), with which crypto, and what of the configuration it had to drop.
/// Build it once at start-up; it is immutable and cheap to clone.
#[derive(Clone, Debug)]
pub struct TlsPolicy {
    source: String,
    /// Where the suite names came from (a flag or a manifest field), for errors.
    names_origin: String,
    min_version: TlsVersion,
    cipher_suites: Vec<CipherSuite>,
    ignored_cipher_suites: Vec<String>,
    tls13_suites_implied: bool,
    crypto: Crypto,
    /// Configured suites left out because FIPS mode does not allow them, or the crypto library
    /// lacks them.
    dropped_for_crypto: Vec<CipherSuite>,
}

impl TlsPolicy {
    /// The Intermediate profile: the default of both modes.
    pub fn intermediate() -> Self {
        // The built-in profiles are fixed tables; a test proves they resolve, so this cannot fail.
        Self::from_profile(&TlsProfile::Intermediate, "Intermediate profile (default)")
            .unwrap_or_else(|_| unreachable!("the Intermediate profile resolves"))
    }

    /// Cluster mode: the original's `--tls-min-version` and `--tls-cipher-suites`. Each entry of
    /// `cipher_suites` may itself be a comma-separated list (blank entries are skipped); no names at
    /// all means the Intermediate profile's suites. Errors name the flag.
    pub fn from_flags(min_version: &str, cipher_suites: &[String]) -> Result<Self, TlsError> {
        resolve(
            format!("{FLAG_MIN_VERSION}/{FLAG_CIPHER_SUITES}"),
            (min_version, FLAG_MIN_VERSION),
            (cipher_suites, FLAG_CIPHER_SUITES),
        )
    }

    /// The policy of a `tlsSecurityProfile`, exactly as the equivalent flags. `origin` names where
    /// the profile came from (a file) and prefixes error messages.
    pub fn from_profile(profile: &TlsProfile, origin: &str) -> Result<Self, TlsError> {
        let ciphers = profile.ciphers();
        resolve(
            format!("{origin}: {} profile", profile.type_name()),
            (
                profile.min_tls_version(),
                &format!("{origin}: spec.tlsSecurityProfile.custom.minTLSVersion"),
            ),
            (
                &ciphers,
                &format!("{origin}: spec.tlsSecurityProfile.custom.ciphers"),
            ),
        )
    }

    /// The policy of an APIServer manifest file; a missing file means Intermediate.
    pub fn from_apiserver_manifest(path: &Path) -> Result<Self, TlsError> {
        let yaml = match std::fs::read_to_string(path) {
            Ok(yaml) => yaml,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Self::from_profile(
                    &TlsProfile::Intermediate,
                    &format!("{} absent", path.display()),
                );
            }
            Err(source) => {
                return Err(TlsError::ManifestRead {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        let profile =
            TlsProfile::from_apiserver_yaml(&yaml).map_err(|source| TlsError::ManifestInvalid {
                path: path.to_owned(),
                source,
            })?;
        Self::from_profile(&profile, &path.display().to_string())
    }

    /// Bootstrap mode: `<basedir>/api-server/api-server.yaml` when present, else Intermediate. The
    /// original ignores `--tls-min-version` and `--tls-cipher-suites` in this mode.
    pub fn for_bootstrap(basedir: &Path) -> Result<Self, TlsError> {
        Self::from_apiserver_manifest(&bootstrap_manifest_path(basedir))
    }

    /// Where the configuration came from (flags, a manifest and its profile type, or the default).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The minimum version as configured (may be below what rustls can do; see
    /// [`Self::protocol_versions`]).
    pub fn min_version(&self) -> TlsVersion {
        self.min_version
    }

    /// The protocol versions rustls will negotiate: TLS 1.2 and 1.3, or only 1.3.
    pub fn protocol_versions(&self) -> &'static [&'static SupportedProtocolVersion] {
        static TLS12_AND_13: [&SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        static TLS13_ONLY: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        match self.min_version {
            TlsVersion::Tls13 => &TLS13_ONLY,
            _ => &TLS12_AND_13,
        }
    }

    /// The suites rustls will offer, in configuration order (TLS 1.3 suites appended when the
    /// configuration named none).
    pub fn cipher_suites(&self) -> &[CipherSuite] {
        &self.cipher_suites
    }

    /// The crypto the policy is served with.
    pub fn crypto(&self) -> &Crypto {
        &self.crypto
    }

    /// This policy served with `crypto` (the policies built by the constructors use
    /// [`Crypto::standard`]). Suites `crypto` cannot negotiate are dropped: in FIPS mode the
    /// unapproved ones (ChaCha20-Poly1305), as Go's FIPS mode drops them, because OpenShift's
    /// Intermediate and Old profiles, which the operator passes in every cluster, name them next
    /// to approved ones. Errors name FIPS and the flag or field when that leaves TLS 1.2 (when
    /// enabled) or TLS 1.3 without a suite: a configuration that names only unapproved suites for
    /// a version is refused, never served with something else.
    pub fn with_crypto(mut self, crypto: &Crypto) -> Result<Self, TlsError> {
        let (kept, dropped): (Vec<CipherSuite>, Vec<CipherSuite>) = self
            .cipher_suites
            .iter()
            .partition(|suite| crypto.supports(**suite));
        let tls12_enabled = self.min_version < TlsVersion::Tls13;
        let configured_tls12 = self.cipher_suites.iter().any(|s| !is_tls13(*s));
        let left_without = if !kept.iter().any(|s| is_tls13(*s)) {
            Some("TLS 1.3")
        } else if tls12_enabled && configured_tls12 && !kept.iter().any(|s| !is_tls13(*s)) {
            Some("TLS 1.2")
        } else {
            None
        };
        if let Some(version) = left_without {
            return Err(TlsError::NoCipherSuitesForCrypto {
                origin: self.names_origin.clone(),
                version,
                crypto: crypto_description(crypto),
                dropped: dropped.iter().map(|s| format!("{s:?}")).collect(),
            });
        }
        self.cipher_suites = kept;
        self.dropped_for_crypto = dropped;
        self.crypto = crypto.clone();
        Ok(self)
    }

    /// The provider the secure port serves this policy with.
    pub fn server_provider(&self) -> CryptoProvider {
        self.crypto.provider(&self.cipher_suites)
    }

    /// The provider the process's TLS clients (the Kubernetes client) use: the same suites, and
    /// TLS 1.3 only when the minimum is 1.3 or in FIPS mode (kube builds its rustls client config
    /// itself, so Extended Master Secret, which FIPS requires of TLS 1.2, cannot be required;
    /// every OpenShift API server speaks TLS 1.3). A client config offers a version only when
    /// its provider has a suite for it.
    pub fn client_provider(&self) -> CryptoProvider {
        let tls13_only = self.min_version == TlsVersion::Tls13 || self.crypto.is_fips();
        let suites: Vec<CipherSuite> = self
            .cipher_suites
            .iter()
            .copied()
            .filter(|suite| !tls13_only || is_tls13(*suite))
            .collect();
        self.crypto.provider(&suites)
    }

    /// Configured names rustls cannot negotiate, dropped from the policy.
    pub fn ignored_cipher_suites(&self) -> &[String] {
        &self.ignored_cipher_suites
    }

    /// What the configuration asked for that rustls cannot do, one message per topic: the ignored
    /// suites (one message listing all of them) and a minimum version below TLS 1.2.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if !self.ignored_cipher_suites.is_empty() {
            warnings.push(format!(
                "{}: ignoring cipher suites rustls does not support (only ECDHE with AES-GCM or CHACHA20-POLY1305 for TLS 1.2): {}",
                self.source,
                self.ignored_cipher_suites.join(", ")
            ));
        }
        if !self.dropped_for_crypto.is_empty() {
            let names: Vec<String> = self
                .dropped_for_crypto
                .iter()
                .map(|suite| format!("{suite:?}"))
                .collect();
            warnings.push(format!(
                "{}: ignoring cipher suites {} does not allow: {}",
                self.source,
                crypto_description(&self.crypto),
                names.join(", ")
            ));
        }
        if self.min_version < TlsVersion::Tls12 {
            warnings.push(format!(
                "{}: minimum TLS version {} requested, but rustls supports only TLS 1.2 and 1.3; the minimum is TLS 1.2",
                self.source, self.min_version
            ));
        }
        warnings
    }

    /// Logs [`Self::warnings`] with `tracing::warn!`. Call once at start-up.
    pub fn log_warnings(&self) {
        for warning in self.warnings() {
            tracing::warn!("{warning}");
        }
    }
}

/// How errors and warnings name the crypto: FIPS mode, or the library.
fn crypto_description(crypto: &Crypto) -> String {
    if crypto.is_fips() {
        "FIPS mode (only AES-GCM suites are approved)".to_owned()
    } else {
        crypto.library()
    }
}

impl fmt::Display for TlsPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let versions = match self.min_version {
            TlsVersion::Tls13 => "TLS 1.3",
            _ => "TLS 1.2 and 1.3",
        };
        write!(f, "{versions} from {}; cipher suites: ", self.source)?;
        for (index, suite) in self.cipher_suites.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{suite:?}")?;
        }
        if self.tls13_suites_implied {
            f.write_str(" (TLS 1.3 suites implied: none configured)")?;
        }
        Ok(())
    }
}

/// `<basedir>/api-server/api-server.yaml`.
pub fn bootstrap_manifest_path(basedir: &Path) -> PathBuf {
    basedir.join(APISERVER_MANIFEST)
}

/// Turns a minimum version and a list of names into a policy. `(value, origin)` pairs: the origin
/// names the flag or manifest field in errors.
fn resolve(
    source: String,
    (min_version, min_origin): (&str, &str),
    (names, names_origin): (&[String], &str),
) -> Result<TlsPolicy, TlsError> {
    let min_version =
        TlsVersion::parse(min_version).ok_or_else(|| TlsError::UnknownTlsVersion {
            origin: min_origin.to_owned(),
            value: min_version.to_owned(),
        })?;

    let mut listed: Vec<&str> = names
        .iter()
        .flat_map(|entry| entry.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect();
    if listed.is_empty() {
        listed = INTERMEDIATE_CIPHERS.to_vec();
    }

    let mut cipher_suites: Vec<CipherSuite> = Vec::new();
    let mut ignored: Vec<String> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for name in listed {
        if let Some(suite) = supported_suite(name) {
            if !cipher_suites.contains(&suite) {
                cipher_suites.push(suite);
            }
        } else if UNSUPPORTED_NAMES.contains(&name) {
            if !ignored.iter().any(|n| n == name) {
                ignored.push(name.to_owned());
            }
        } else if !unknown.iter().any(|n| n == name) {
            unknown.push(name.to_owned());
        }
    }
    if !unknown.is_empty() {
        return Err(TlsError::UnknownCipherSuites {
            origin: names_origin.to_owned(),
            names: unknown,
        });
    }
    if cipher_suites.is_empty() {
        return Err(TlsError::NoUsableCipherSuites {
            origin: names_origin.to_owned(),
            ignored,
        });
    }

    let names_tls13 = cipher_suites.iter().any(|suite| is_tls13(*suite));
    if !names_tls13 {
        cipher_suites.extend(ALL_TLS13_SUITES);
    }

    Ok(TlsPolicy {
        source,
        min_version,
        names_origin: names_origin.to_owned(),
        cipher_suites,
        ignored_cipher_suites: ignored,
        tls13_suites_implied: !names_tls13,
        crypto: Crypto::standard(),
        dropped_for_crypto: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::fips;

    fn suites(policy: &TlsPolicy) -> Vec<CipherSuite> {
        policy.cipher_suites().to_vec()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    const TLS13: [CipherSuite; 3] = [
        CipherSuite::TLS13_AES_128_GCM_SHA256,
        CipherSuite::TLS13_AES_256_GCM_SHA384,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ];

    const TLS12_ECDHE_AEAD: [CipherSuite; 6] = [
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];

    #[test]
    fn iana_and_openssl_names_map_to_the_same_suites() {
        let iana = TlsPolicy::from_flags(
            "VersionTLS12",
            &names(&[
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
                "TLS_AES_128_GCM_SHA256",
            ]),
        )
        .unwrap();
        let openssl = TlsPolicy::from_flags(
            "VersionTLS12",
            &names(&[
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-RSA-CHACHA20-POLY1305",
                "TLS_AES_128_GCM_SHA256",
            ]),
        )
        .unwrap();
        let expected = vec![
            CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            CipherSuite::TLS13_AES_128_GCM_SHA256,
        ];
        assert_eq!(suites(&iana), expected);
        assert_eq!(suites(&openssl), expected);
        assert!(iana.ignored_cipher_suites().is_empty());
        assert!(iana.warnings().is_empty());
    }

    #[test]
    fn go_legacy_chacha_names_and_duplicates_and_commas() {
        let policy = TlsPolicy::from_flags(
            "VersionTLS12",
            &names(&[
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305, ECDHE-ECDSA-CHACHA20-POLY1305",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,,",
            ]),
        )
        .unwrap();
        let mut expected = vec![
            CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ];
        // No TLS 1.3 suite named: all three stay enabled, as in Go.
        expected.extend([
            CipherSuite::TLS13_AES_256_GCM_SHA384,
            CipherSuite::TLS13_AES_128_GCM_SHA256,
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        ]);
        assert_eq!(suites(&policy), expected);
        assert!(policy.to_string().contains("TLS 1.3 suites implied"));
    }

    #[test]
    fn unknown_names_are_an_error_naming_the_flag_and_each_name() {
        let err = TlsPolicy::from_flags(
            "VersionTLS12",
            &names(&[
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "ECDHE-RSA-AES128-GCM-SHA265",
                "DES-CBC3-SHA",
                "tls_aes_128_gcm_sha256",
            ]),
        )
        .unwrap_err();
        assert_eq!(err.kind(), "unknown_cipher_suite");
        let message = err.to_string();
        assert!(message.contains("--tls-cipher-suites"), "{message}");
        assert!(message.contains("ECDHE-RSA-AES128-GCM-SHA265"), "{message}");
        assert!(message.contains("tls_aes_128_gcm_sha256"), "{message}");
        assert!(!message.contains("DES-CBC3-SHA"), "{message}");
    }

    #[test]
    fn unsupported_names_are_ignored_with_one_warning_listing_them() {
        let policy = TlsPolicy::from_flags(
            "VersionTLS12",
            &names(&[
                "TLS_RSA_WITH_AES_128_CBC_SHA",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "DES-CBC3-SHA",
                "DHE-RSA-AES128-GCM-SHA256",
                "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
                "DES-CBC3-SHA",
            ]),
        )
        .unwrap();
        assert_eq!(
            policy.ignored_cipher_suites(),
            [
                "TLS_RSA_WITH_AES_128_CBC_SHA",
                "DES-CBC3-SHA",
                "DHE-RSA-AES128-GCM-SHA256",
                "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA"
            ]
        );
        assert_eq!(
            suites(&policy)[0],
            CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        );
        let warnings = policy.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("TLS_RSA_WITH_AES_128_CBC_SHA, DES-CBC3-SHA"));
    }

    #[test]
    fn a_list_of_only_unsupported_suites_is_an_error_naming_the_flag() {
        let err = TlsPolicy::from_flags(
            "VersionTLS12",
            &names(&["AES128-SHA", "TLS_RSA_WITH_AES_256_GCM_SHA384"]),
        )
        .unwrap_err();
        assert_eq!(err.kind(), "no_usable_cipher_suite");
        assert!(err.to_string().contains("--tls-cipher-suites"), "{err}");
        assert!(err.to_string().contains("AES128-SHA"), "{err}");
    }

    #[test]
    fn no_suites_means_intermediate_and_min_version_is_honoured() {
        let policy = TlsPolicy::from_flags("VersionTLS13", &[]).unwrap();
        assert_eq!(policy.min_version(), TlsVersion::Tls13);
        assert_eq!(policy.protocol_versions(), [&rustls::version::TLS13]);
        assert_eq!(
            suites(&policy),
            suites(&TlsPolicy::from_profile(&TlsProfile::Intermediate, "x").unwrap())
        );
        let blank = TlsPolicy::from_flags("", &names(&[""])).unwrap();
        assert_eq!(blank.min_version(), TlsVersion::Tls12);
        assert_eq!(suites(&blank), suites(&TlsPolicy::intermediate()));
    }

    #[test]
    fn unknown_min_version_is_an_error_naming_the_flag() {
        let err = TlsPolicy::from_flags("TLS12", &[]).unwrap_err();
        assert_eq!(err.kind(), "unknown_tls_version");
        assert!(err.to_string().contains("--tls-min-version"), "{err}");
        assert!(err.to_string().contains("\"TLS12\""), "{err}");
    }

    #[test]
    fn tls10_and_tls11_mean_tls12_with_one_warning() {
        for version in ["VersionTLS10", "VersionTLS11"] {
            let policy = TlsPolicy::from_flags(version, &[]).unwrap();
            assert_eq!(
                policy.protocol_versions(),
                [&rustls::version::TLS13, &rustls::version::TLS12]
            );
            let warnings = policy.warnings();
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(warnings[0].contains(version), "{warnings:?}");
            assert!(warnings[0].contains("TLS 1.2"), "{warnings:?}");
        }
    }

    #[test]
    fn intermediate_profile_is_openshifts_list() {
        let policy = TlsPolicy::intermediate();
        assert_eq!(policy.min_version(), TlsVersion::Tls12);
        let mut expected = TLS13.to_vec();
        expected.extend(TLS12_ECDHE_AEAD);
        assert_eq!(suites(&policy), expected);
        assert!(policy.ignored_cipher_suites().is_empty());
        assert!(policy.warnings().is_empty());
    }

    #[test]
    fn modern_profile_is_tls13_only() {
        let policy = TlsPolicy::from_profile(&TlsProfile::Modern, "test").unwrap();
        assert_eq!(policy.min_version(), TlsVersion::Tls13);
        assert_eq!(policy.protocol_versions(), [&rustls::version::TLS13]);
        assert_eq!(suites(&policy), TLS13.to_vec());
        assert!(policy.warnings().is_empty());
    }

    #[test]
    fn old_profile_keeps_the_aead_suites_and_warns_once_about_the_rest() {
        let policy = TlsPolicy::from_profile(&TlsProfile::Old, "test").unwrap();
        assert_eq!(policy.min_version(), TlsVersion::Tls10);
        let mut expected = TLS13.to_vec();
        expected.extend(TLS12_ECDHE_AEAD);
        assert_eq!(suites(&policy), expected);
        // 24 names in the profile: 9 usable, the 15 CBC/3DES/RSA-kx ones ignored.
        assert_eq!(policy.ignored_cipher_suites().len(), 15);
        assert!(policy
            .ignored_cipher_suites()
            .contains(&"DES-CBC3-SHA".to_owned()));
        assert_eq!(policy.warnings().len(), 2, "{:?}", policy.warnings());
    }

    #[test]
    fn every_builtin_profile_name_is_known() {
        for name in OLD_CIPHERS
            .iter()
            .chain(INTERMEDIATE_CIPHERS)
            .chain(MODERN_CIPHERS)
        {
            assert!(
                supported_suite(name).is_some() || UNSUPPORTED_NAMES.contains(name),
                "{name}"
            );
        }
    }

    #[test]
    fn manifest_without_profile_is_intermediate() {
        let yaml = "apiVersion: config.openshift.io/v1\nkind: APIServer\nmetadata:\n  name: cluster\nspec:\n  audit:\n    profile: Default\n  servingCerts: {}\nstatus: {}\n";
        assert_eq!(
            TlsProfile::from_apiserver_yaml(yaml).unwrap(),
            TlsProfile::Intermediate
        );
        assert_eq!(
            TlsProfile::from_apiserver_yaml("kind: APIServer\n").unwrap(),
            TlsProfile::Intermediate
        );
        assert_eq!(
            TlsProfile::from_apiserver_yaml("spec:\n  tlsSecurityProfile: {}\n").unwrap(),
            TlsProfile::Intermediate
        );
    }

    #[test]
    fn manifest_profile_types() {
        let parse = |body: &str| {
            TlsProfile::from_apiserver_yaml(&format!(
                "apiVersion: config.openshift.io/v1\nkind: APIServer\nspec:\n  tlsSecurityProfile:\n{body}"
            ))
        };
        assert_eq!(
            parse("    type: Old\n    old: {}\n").unwrap(),
            TlsProfile::Old
        );
        assert_eq!(
            parse("    type: Intermediate\n    intermediate: {}\n").unwrap(),
            TlsProfile::Intermediate
        );
        assert_eq!(
            parse("    type: Modern\n    modern: {}\n").unwrap(),
            TlsProfile::Modern
        );
        // The type decides, not which sub-object is present (as upstream).
        assert_eq!(
            parse("    type: Modern\n    old: {}\n").unwrap(),
            TlsProfile::Modern
        );
        assert_eq!(
            parse(
                "    type: Custom\n    custom:\n      ciphers:\n      - ECDHE-ECDSA-AES128-GCM-SHA256\n      - TLS_AES_128_GCM_SHA256\n      minTLSVersion: VersionTLS13\n"
            )
            .unwrap(),
            TlsProfile::Custom {
                ciphers: names(&["ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_AES_128_GCM_SHA256"]),
                min_tls_version: "VersionTLS13".into()
            }
        );
        // Custom without a custom spec falls back to Intermediate (as upstream).
        assert_eq!(
            parse("    type: Custom\n").unwrap(),
            TlsProfile::Intermediate
        );
        let err = parse("    type: Paranoid\n").unwrap_err();
        assert!(err.to_string().contains("Paranoid"), "{err}");
        assert!(TlsProfile::from_apiserver_yaml("kind: Secret\n").is_err());
        assert!(TlsProfile::from_apiserver_yaml("spec: [").is_err());
    }

    #[test]
    fn custom_profile_behaves_like_the_flags() {
        let ciphers = names(&[
            "ECDHE-RSA-AES256-GCM-SHA384",
            "AES128-SHA",
            "TLS_AES_256_GCM_SHA384",
        ]);
        let profile = TlsProfile::Custom {
            ciphers: ciphers.clone(),
            min_tls_version: "VersionTLS11".into(),
        };
        let from_profile = TlsPolicy::from_profile(&profile, "api-server.yaml").unwrap();
        let from_flags = TlsPolicy::from_flags("VersionTLS11", &ciphers).unwrap();
        assert_eq!(suites(&from_profile), suites(&from_flags));
        assert_eq!(from_profile.min_version(), from_flags.min_version());
        assert_eq!(
            from_profile.ignored_cipher_suites(),
            from_flags.ignored_cipher_suites()
        );
        assert_eq!(
            suites(&from_profile),
            [
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                CipherSuite::TLS13_AES_256_GCM_SHA384
            ]
        );

        let typo = TlsProfile::Custom {
            ciphers: names(&["ECDHE-RSA-AES256-GCM-SHA348"]),
            min_tls_version: "VersionTLS12".into(),
        };
        let err = TlsPolicy::from_profile(&typo, "/b/api-server/api-server.yaml").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/b/api-server/api-server.yaml: spec.tlsSecurityProfile"),
            "{err}"
        );
        let bad_version = TlsProfile::Custom {
            ciphers: vec![],
            min_tls_version: "VersionTLS14".into(),
        };
        let err = TlsPolicy::from_profile(&bad_version, "m.yaml").unwrap_err();
        assert!(err.to_string().contains("minTLSVersion"), "{err}");
    }

    fn fips() -> Crypto {
        Crypto::assume_fips_for_tests()
    }

    #[test]
    fn fips_mode_drops_chacha20_from_openshift_profiles_with_one_warning() {
        // What the operator passes in every cluster: the Intermediate profile, ChaCha20 included.
        let intermediate = TlsPolicy::from_flags("VersionTLS12", &names(INTERMEDIATE_CIPHERS))
            .unwrap()
            .with_crypto(&fips())
            .unwrap();
        assert_eq!(
            suites(&intermediate),
            [
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS13_AES_256_GCM_SHA384,
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            ]
        );
        let warnings = intermediate.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("FIPS mode"), "{warnings:?}");
        assert!(warnings[0].contains("TLS13_CHACHA20_POLY1305_SHA256"));
        assert!(warnings[0].contains("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"));
        for profile in [TlsProfile::Old, TlsProfile::Modern] {
            let policy = TlsPolicy::from_profile(&profile, "m.yaml").unwrap();
            let policy = policy.with_crypto(&fips()).unwrap();
            assert!(suites(&policy).iter().all(|s| fips::suite_approved(*s)));
        }
        // Without FIPS nothing is dropped.
        let standard = TlsPolicy::intermediate()
            .with_crypto(&Crypto::standard())
            .unwrap();
        assert_eq!(suites(&standard), suites(&TlsPolicy::intermediate()));
        assert!(standard.warnings().is_empty());
    }

    #[test]
    fn fips_mode_refuses_a_version_configured_with_only_unapproved_suites() {
        let err = TlsPolicy::from_flags("VersionTLS12", &names(&["ECDHE-RSA-CHACHA20-POLY1305"]))
            .unwrap()
            .with_crypto(&fips())
            .unwrap_err();
        assert_eq!(err.kind(), "no_cipher_suite_for_crypto");
        let line = err.to_string();
        assert!(line.starts_with("--tls-cipher-suites: FIPS mode"), "{line}");
        assert!(line.contains("TLS 1.2"), "{line}");
        assert!(
            line.contains("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"),
            "{line}"
        );

        let err = TlsPolicy::from_flags(
            "VersionTLS12",
            &names(&[
                "TLS_CHACHA20_POLY1305_SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
            ]),
        )
        .unwrap()
        .with_crypto(&fips())
        .unwrap_err();
        assert!(err.to_string().contains("TLS 1.3"), "{err}");

        // With a TLS 1.3 minimum, TLS 1.2 suites are never used: only TLS 1.3 must be left.
        let tls13 = TlsPolicy::from_flags("VersionTLS13", &names(&["ECDHE-RSA-CHACHA20-POLY1305"]))
            .unwrap()
            .with_crypto(&fips())
            .unwrap();
        assert_eq!(
            suites(&tls13),
            [
                CipherSuite::TLS13_AES_256_GCM_SHA384,
                CipherSuite::TLS13_AES_128_GCM_SHA256
            ]
        );
    }

    #[test]
    fn the_kubernetes_client_gets_the_policys_suites_and_tls13_only_in_fips_mode() {
        let client_suites = |policy: &TlsPolicy| -> Vec<CipherSuite> {
            let provider = policy.client_provider();
            provider.cipher_suites.iter().map(|s| s.suite()).collect()
        };
        let standard = TlsPolicy::intermediate();
        assert_eq!(client_suites(&standard), suites(&standard));
        let tls13 = TlsPolicy::from_flags("VersionTLS13", &[]).unwrap();
        assert!(client_suites(&tls13).iter().all(|s| is_tls13(*s)));
        let in_fips = TlsPolicy::intermediate().with_crypto(&fips()).unwrap();
        assert_eq!(
            client_suites(&in_fips),
            [
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS13_AES_256_GCM_SHA384
            ]
        );
    }

    #[test]
    fn manifest_files() {
        let dir = tempfile::tempdir().unwrap();
        // Absent: Intermediate.
        let absent = TlsPolicy::for_bootstrap(dir.path()).unwrap();
        assert_eq!(suites(&absent), suites(&TlsPolicy::intermediate()));

        std::fs::create_dir(dir.path().join("api-server")).unwrap();
        let path = dir.path().join(APISERVER_MANIFEST);
        std::fs::write(
            &path,
            "apiVersion: config.openshift.io/v1\nkind: APIServer\nmetadata:\n  name: cluster\nspec:\n  tlsSecurityProfile:\n    type: Modern\n    modern: {}\n",
        )
        .unwrap();
        let modern = TlsPolicy::for_bootstrap(dir.path()).unwrap();
        assert_eq!(modern.min_version(), TlsVersion::Tls13);
        assert!(modern.source().contains("Modern"), "{}", modern.source());

        std::fs::write(&path, "spec: {tlsSecurityProfile: [").unwrap();
        let err = TlsPolicy::for_bootstrap(dir.path()).unwrap_err();
        assert_eq!(err.kind(), "manifest_invalid");
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }
}
