//! FIPS mode decisions: whether the process runs in FIPS mode, and what FIPS mode allows.
//!
//! Pure functions and tables, plus one file read at the edge ([`read_kernel_flag`], whose path the
//! caller passes so tests inject their own). Nothing here loads a module or logs: the activation
//! is [`super::Crypto::for_process`]'s job. Must not touch: OpenSSL, sockets, the environment.
//!
//! # What is approved, and from where
//! - TLS 1.2 and 1.3 (NIST SP 800-52 Rev. 2, §3.1); rustls has nothing older anyway.
//! - Cipher suites: ECDHE with AES-GCM for TLS 1.2 and the two AES-GCM suites of TLS 1.3
//!   (SP 800-52 Rev. 2, §3.3.1). ChaCha20-Poly1305 is not a FIPS-approved cipher.
//! - Key exchange: the NIST curves P-256, P-384 and P-521 (SP 800-56A Rev. 3 via SP 800-186).
//!   X25519 is not approved for key agreement, nor is the hybrid X25519MLKEM768.
//! - Signatures: ECDSA on the NIST curves and RSA (PKCS#1 v1.5 and PSS), with SHA-256, SHA-384
//!   or SHA-512 (FIPS 186-5). Ed25519 is left out: the FIPS provider of OpenSSL 3.0 (RHEL 9's
//!   validated module) does not offer it as approved. Nothing with SHA-1.
//!
//! Go's FIPS mode (what the original runs with in a FIPS cluster) allows the same suites and the
//! same curves, and drops the configured suites it cannot use without complaint; this server
//! drops them with one warning (see [`crate::server::tls::TlsPolicy::with_crypto`]).

use std::fmt;
use std::path::{Path, PathBuf};

use rustls::pki_types::{alg_id, AlgorithmIdentifier};
use rustls::{CipherSuite, NamedGroup, SignatureScheme};

/// Where Linux says whether the kernel runs in FIPS mode (`1`) or not (`0`).
pub const KERNEL_FLAG: &str = "/proc/sys/crypto/fips_enabled";

/// The cipher suites FIPS mode allows, TLS 1.3 first.
pub const APPROVED_CIPHER_SUITES: [CipherSuite; 6] = [
    CipherSuite::TLS13_AES_256_GCM_SHA384,
    CipherSuite::TLS13_AES_128_GCM_SHA256,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
];

/// The key exchange groups FIPS mode allows.
pub const APPROVED_GROUPS: [NamedGroup; 3] = [
    NamedGroup::secp256r1,
    NamedGroup::secp384r1,
    NamedGroup::secp521r1,
];

/// The signature schemes FIPS mode signs and verifies handshakes with.
pub const APPROVED_SIGNATURE_SCHEMES: [SignatureScheme; 9] = [
    SignatureScheme::ECDSA_NISTP256_SHA256,
    SignatureScheme::ECDSA_NISTP384_SHA384,
    SignatureScheme::ECDSA_NISTP521_SHA512,
    SignatureScheme::RSA_PSS_SHA256,
    SignatureScheme::RSA_PSS_SHA384,
    SignatureScheme::RSA_PSS_SHA512,
    SignatureScheme::RSA_PKCS1_SHA256,
    SignatureScheme::RSA_PKCS1_SHA384,
    SignatureScheme::RSA_PKCS1_SHA512,
];

/// The certificate signature algorithms FIPS mode verifies (the same families as
/// [`APPROVED_SIGNATURE_SCHEMES`], as X.509 algorithm identifiers).
pub const APPROVED_SIGNATURE_ALGORITHMS: [AlgorithmIdentifier; 9] = [
    alg_id::ECDSA_SHA256,
    alg_id::ECDSA_SHA384,
    alg_id::ECDSA_SHA512,
    alg_id::RSA_PSS_SHA256,
    alg_id::RSA_PSS_SHA384,
    alg_id::RSA_PSS_SHA512,
    alg_id::RSA_PKCS1_SHA256,
    alg_id::RSA_PKCS1_SHA384,
    alg_id::RSA_PKCS1_SHA512,
];

/// Whether FIPS mode allows `suite`.
pub fn suite_approved(suite: CipherSuite) -> bool {
    APPROVED_CIPHER_SUITES.contains(&suite)
}

/// Whether FIPS mode allows key exchange `group`.
pub fn group_approved(group: NamedGroup) -> bool {
    APPROVED_GROUPS.contains(&group)
}

/// Whether FIPS mode allows handshake signatures with `scheme`.
pub fn scheme_approved(scheme: SignatureScheme) -> bool {
    APPROVED_SIGNATURE_SCHEMES.contains(&scheme)
}

/// Whether FIPS mode allows certificate signatures with `algorithm`.
pub fn signature_algorithm_approved(algorithm: &AlgorithmIdentifier) -> bool {
    APPROVED_SIGNATURE_ALGORITHMS.contains(algorithm)
}

/// What the kernel's FIPS flag says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelFlag {
    /// The file does not exist: a kernel without FIPS support, or not Linux.
    Absent,
    /// `0`.
    Off,
    /// `1`: the host was booted with `fips=1` (OpenShift's `fips: true` installs).
    On,
}

/// Why FIPS mode is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FipsTrigger {
    /// `--fips` was given.
    Flag,
    /// The kernel runs in FIPS mode.
    Kernel,
    /// Both.
    FlagAndKernel,
}

impl fmt::Display for FipsTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag => f.write_str("--fips"),
            Self::Kernel => write!(f, "{KERNEL_FLAG} is 1"),
            Self::FlagAndKernel => write!(f, "--fips, and {KERNEL_FLAG} is 1"),
        }
    }
}

/// The kernel's flag could not be read or is not `0` or `1`. In doubt the server does not start:
/// guessing "not FIPS" on a FIPS host would be the one silent fallback FIPS mode must not have.
#[derive(Debug, thiserror::Error)]
pub enum KernelFlagError {
    #[error("cannot read {} (the kernel's FIPS flag): {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: expected 0 or 1 (the kernel's FIPS flag), found {content:?}", path.display())]
    Invalid { path: PathBuf, content: String },
}

/// Reads the kernel's FIPS flag at `path` (normally [`KERNEL_FLAG`]).
pub fn read_kernel_flag(path: &Path) -> Result<KernelFlag, KernelFlagError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_kernel_flag(&text).ok_or_else(|| KernelFlagError::Invalid {
            path: path.to_owned(),
            content: text.chars().take(32).collect(),
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(KernelFlag::Absent),
        Err(source) => Err(KernelFlagError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The flag file's contents: `0` or `1`, with the trailing newline the kernel writes.
pub fn parse_kernel_flag(text: &str) -> Option<KernelFlag> {
    match text.trim() {
        "0" => Some(KernelFlag::Off),
        "1" => Some(KernelFlag::On),
        _ => None,
    }
}

/// Whether FIPS mode is on, and why: `--fips`, the kernel, both, or neither (`None`).
pub fn decide(flag: bool, kernel: KernelFlag) -> Option<FipsTrigger> {
    match (flag, kernel == KernelFlag::On) {
        (true, true) => Some(FipsTrigger::FlagAndKernel),
        (true, false) => Some(FipsTrigger::Flag),
        (false, true) => Some(FipsTrigger::Kernel),
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_flag_decides_unless_the_flag_forces_fips() {
        assert_eq!(decide(false, KernelFlag::Absent), None);
        assert_eq!(decide(false, KernelFlag::Off), None);
        assert_eq!(decide(false, KernelFlag::On), Some(FipsTrigger::Kernel));
        assert_eq!(decide(true, KernelFlag::Absent), Some(FipsTrigger::Flag));
        assert_eq!(decide(true, KernelFlag::Off), Some(FipsTrigger::Flag));
        assert_eq!(
            decide(true, KernelFlag::On),
            Some(FipsTrigger::FlagAndKernel)
        );
    }

    #[test]
    fn kernel_flag_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fips_enabled");
        assert_eq!(read_kernel_flag(&path).unwrap(), KernelFlag::Absent);
        std::fs::write(&path, "1\n").unwrap();
        assert_eq!(read_kernel_flag(&path).unwrap(), KernelFlag::On);
        std::fs::write(&path, "0\n").unwrap();
        assert_eq!(read_kernel_flag(&path).unwrap(), KernelFlag::Off);
        std::fs::write(&path, "yes\n").unwrap();
        let err = read_kernel_flag(&path).unwrap_err();
        assert!(err.to_string().contains("fips_enabled"), "{err}");
        assert!(err.to_string().contains("\"yes\\n\""), "{err}");
        // A path that exists but cannot be read as a file is an error, not "no FIPS".
        let err = read_kernel_flag(dir.path()).unwrap_err();
        assert!(matches!(err, KernelFlagError::Read { .. }), "{err}");
    }

    #[test]
    fn triggers_name_the_flag_and_the_file() {
        assert_eq!(FipsTrigger::Flag.to_string(), "--fips");
        assert_eq!(
            FipsTrigger::Kernel.to_string(),
            "/proc/sys/crypto/fips_enabled is 1"
        );
        assert!(FipsTrigger::FlagAndKernel.to_string().contains("--fips"));
    }

    #[test]
    fn approved_tables() {
        assert!(suite_approved(CipherSuite::TLS13_AES_128_GCM_SHA256));
        assert!(suite_approved(
            CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
        ));
        assert!(!suite_approved(CipherSuite::TLS13_CHACHA20_POLY1305_SHA256));
        assert!(!suite_approved(
            CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        ));
        assert!(group_approved(NamedGroup::secp384r1));
        assert!(!group_approved(NamedGroup::X25519));
        assert!(!group_approved(NamedGroup::X25519MLKEM768));
        assert!(scheme_approved(SignatureScheme::RSA_PSS_SHA256));
        assert!(!scheme_approved(SignatureScheme::ED25519));
        assert!(!scheme_approved(SignatureScheme::RSA_PKCS1_SHA1));
        assert!(!scheme_approved(SignatureScheme::ECDSA_SHA1_Legacy));
        assert!(signature_algorithm_approved(&alg_id::ECDSA_SHA384));
        assert!(!signature_algorithm_approved(&alg_id::ED25519));
    }
}
