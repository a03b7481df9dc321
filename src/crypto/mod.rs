//! The process's TLS cryptography: which rustls crypto provider does the work of every TLS
//! connection the server accepts (the Ignition port) or makes (the Kubernetes client), and
//! whether it runs in FIPS mode.
//!
//! Owns: the compiled-in choice of backend (cargo feature `aws-lc-rs`, the default: AWS-LC
//! compiled in; or `openssl`, the system's `libcrypto.so.3` through rustls-openssl: the build the
//! container image ships), the
//! FIPS decision and activation ([`Crypto::for_process`]), and the provider a TLS policy's suites
//! are served with ([`Crypto::provider`]): in FIPS mode only approved key exchange groups and
//! signature algorithms, and a key loader that signs only with approved schemes. Must not
//! touch: policy parsing (`server::tls`), sockets, metrics, logging (callers log [`Crypto`]'s
//! summary once).
//!
//! With both features enabled, OpenSSL is used (AWS-LC is then compiled in but unused); the
//! release build is `--no-default-features --features openssl`, which has no AWS-LC code at all.
//! Both backends sign with every key the cluster's PKI configuration issues (RSA 2048 to 8192
//! bits, ECDSA P-256, P-384 and P-521) and verify chains of them.

pub mod fips;

#[cfg(feature = "openssl")]
#[path = "openssl.rs"]
mod backend;
#[cfg(all(feature = "aws-lc-rs", not(feature = "openssl")))]
#[path = "aws_lc.rs"]
mod backend;
#[cfg(feature = "openssl")]
mod openssl_aead;
#[cfg(feature = "openssl")]
mod openssl_hkdf;
#[cfg(feature = "openssl")]
mod openssl_hmac;
#[cfg(not(any(feature = "aws-lc-rs", feature = "openssl")))]
compile_error!("enable a TLS crypto backend: cargo feature `aws-lc-rs` (default) or `openssl`");

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::crypto::{CryptoProvider, KeyProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{PrivateKeyDer, SignatureVerificationAlgorithm, SubjectPublicKeyInfoDer};
use rustls::server::ProducesTickets;
use rustls::sign::{Signer, SigningKey};
use rustls::{CipherSuite, SignatureAlgorithm, SignatureScheme, SupportedCipherSuite};

pub use fips::{FipsTrigger, KernelFlag, KernelFlagError};

/// Why the process's crypto cannot be set up. Each is a settings error: the server does not start.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    /// The kernel's FIPS flag is unreadable or malformed.
    #[error(transparent)]
    KernelFlag(#[from] KernelFlagError),
    /// FIPS mode is required but cannot be had: a build without OpenSSL, or OpenSSL without a
    /// loadable FIPS provider. Never answered by running without it.
    #[error("FIPS mode ({trigger}): {reason}")]
    FipsUnavailable {
        trigger: FipsTrigger,
        reason: String,
    },
}

impl CryptoError {
    /// Short, stable name used as a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::KernelFlag(_) => "kernel_fips_flag",
            Self::FipsUnavailable { .. } => "fips_unavailable",
        }
    }
}

/// The process's crypto: the compiled backend, in FIPS mode or not. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Crypto {
    fips: Option<FipsTrigger>,
    /// Keeps OpenSSL's FIPS provider loaded for as long as any clone lives.
    _module: Option<Arc<backend::FipsModule>>,
}

impl Crypto {
    /// The backend without FIPS mode (tests, and hosts that do not ask for FIPS).
    pub fn standard() -> Self {
        Self::default()
    }

    /// Decides FIPS mode from `--fips` and the kernel's flag at `kernel_flag` (normally
    /// [`fips::KERNEL_FLAG`]), and when it is on, activates the backend's FIPS module. Call once,
    /// before anything else uses TLS. An error means the server must not start.
    pub fn for_process(fips_flag: bool, kernel_flag: &Path) -> Result<Self, CryptoError> {
        let kernel = fips::read_kernel_flag(kernel_flag)?;
        let Some(trigger) = fips::decide(fips_flag, kernel) else {
            return Ok(Self::standard());
        };
        let module = backend::enable_fips()
            .map_err(|reason| CryptoError::FipsUnavailable { trigger, reason })?;
        let crypto = Self {
            fips: Some(trigger),
            _module: Some(Arc::new(module)),
        };
        // Every part of the restricted provider must report FIPS operation, or nothing starts.
        let provider = crypto.provider(&fips::APPROVED_CIPHER_SUITES);
        if provider.cipher_suites.is_empty() || provider.kx_groups.is_empty() {
            return Err(CryptoError::FipsUnavailable {
                trigger,
                reason: "the FIPS provider offers no approved cipher suite or key exchange group"
                    .into(),
            });
        }
        if !provider.fips() {
            return Err(CryptoError::FipsUnavailable {
                trigger,
                reason: "the FIPS provider is loaded, but the TLS provider does not report FIPS \
                         operation for every algorithm"
                    .into(),
            });
        }
        Ok(crypto)
    }

    /// FIPS mode's restrictions without loading a module, for unit tests of the decisions that
    /// depend on it (suites, groups, signature schemes).
    #[cfg(test)]
    pub(crate) fn assume_fips_for_tests() -> Self {
        Self {
            fips: Some(FipsTrigger::Flag),
            _module: None,
        }
    }

    /// The backend's name: `aws-lc-rs` or `openssl`.
    pub fn provider_name(&self) -> &'static str {
        backend::NAME
    }

    /// The crypto library in use, e.g. `OpenSSL 3.0.19 27 Jan 2026`.
    pub fn library(&self) -> String {
        backend::library()
    }

    /// Why FIPS mode is on, or `None` when it is off.
    pub fn fips(&self) -> Option<FipsTrigger> {
        self.fips
    }

    /// Whether FIPS mode is on.
    pub fn is_fips(&self) -> bool {
        self.fips.is_some()
    }

    /// Whether this backend, in this mode, can negotiate `suite`.
    pub fn supports(&self, suite: CipherSuite) -> bool {
        (!self.is_fips() || fips::suite_approved(suite))
            && backend::default_provider()
                .cipher_suites
                .iter()
                .any(|s| s.suite() == suite)
    }

    /// A provider offering `suites` (in that order; ones the backend lacks are left out). In FIPS
    /// mode the key exchange groups, the signature algorithms verified and the schemes signed
    /// with are the approved ones, whatever `suites` says; callers filter suites themselves.
    pub fn provider(&self, suites: &[CipherSuite]) -> CryptoProvider {
        let base = backend::default_provider();
        let cipher_suites: Vec<SupportedCipherSuite> = suites
            .iter()
            .filter(|id| !self.is_fips() || fips::suite_approved(**id))
            .filter_map(|id| base.cipher_suites.iter().find(|s| s.suite() == *id))
            .copied()
            .collect();
        if !self.is_fips() {
            return CryptoProvider {
                cipher_suites,
                ..base
            };
        }
        let mut kx_groups = backend::all_kx_groups();
        kx_groups.retain(|group| fips::group_approved(group.name()));
        CryptoProvider {
            cipher_suites,
            kx_groups,
            signature_verification_algorithms: fips_signature_algorithms(
                base.signature_verification_algorithms,
            ),
            secure_random: base.secure_random,
            key_provider: &FipsKeyProvider,
        }
    }

    /// Stateless session tickets, where the backend has a ticket encrypter.
    pub fn ticketer(&self) -> Result<Option<Arc<dyn ProducesTickets>>, rustls::Error> {
        backend::ticketer()
    }

    /// One line for the log when FIPS mode is on (`None` when off).
    pub fn fips_summary(&self) -> Option<String> {
        let trigger = self.fips?;
        Some(format!(
            "FIPS mode on ({trigger}): TLS through OpenSSL's FIPS provider ({}), every algorithm \
             fetched with fips=yes; TLS 1.2 and 1.3 with AES-GCM suites only, key exchange on \
             P-256, P-384 and P-521, signatures ECDSA or RSA with SHA-2; the Kubernetes client \
             speaks TLS 1.3",
            self.library()
        ))
    }
}

/// The backend's certificate signature algorithms less the unapproved ones (Ed25519), kept for
/// the life of the process (providers borrow them as `'static`).
fn fips_signature_algorithms(all: WebPkiSupportedAlgorithms) -> WebPkiSupportedAlgorithms {
    type Algorithm = &'static dyn SignatureVerificationAlgorithm;
    type Approved = (Vec<Algorithm>, Vec<(SignatureScheme, &'static [Algorithm])>);
    static APPROVED: OnceLock<Approved> = OnceLock::new();
    let (algorithms, mapping) = APPROVED.get_or_init(|| {
        let algorithms = all
            .all
            .iter()
            .copied()
            .filter(|alg| fips::signature_algorithm_approved(&alg.signature_alg_id()))
            .collect();
        let mapping = all
            .mapping
            .iter()
            .copied()
            .filter(|(scheme, _)| fips::scheme_approved(*scheme))
            .collect();
        (algorithms, mapping)
    });
    WebPkiSupportedAlgorithms {
        all: algorithms,
        mapping,
    }
}

/// The backend's key loader, restricted to RSA and ECDSA keys that sign with approved schemes.
#[derive(Debug)]
struct FipsKeyProvider;

impl KeyProvider for FipsKeyProvider {
    fn load_private_key(
        &self,
        key_der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        let key = backend::key_provider().load_private_key(key_der)?;
        match key.algorithm() {
            SignatureAlgorithm::RSA | SignatureAlgorithm::ECDSA => {
                Ok(Arc::new(FipsSigningKey(key)))
            }
            other => Err(rustls::Error::General(format!(
                "{other:?} keys are not FIPS-approved (RSA and ECDSA keys are)"
            ))),
        }
    }

    fn fips(&self) -> bool {
        backend::key_provider().fips()
    }
}

/// A signing key that picks only approved schemes from what the peer offers.
#[derive(Debug)]
struct FipsSigningKey(Arc<dyn SigningKey>);

impl SigningKey for FipsSigningKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        let approved: Vec<SignatureScheme> = offered
            .iter()
            .copied()
            .filter(|scheme| fips::scheme_approved(*scheme))
            .collect();
        self.0.choose_scheme(&approved)
    }

    fn public_key(&self) -> Option<SubjectPublicKeyInfoDer<'_>> {
        self.0.public_key()
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        self.0.algorithm()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_provider_offers_the_suites_asked_for_in_order() {
        let crypto = Crypto::standard();
        let asked = [
            CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            CipherSuite::TLS13_AES_128_GCM_SHA256,
        ];
        let provider = crypto.provider(&asked);
        let offered: Vec<_> = provider.cipher_suites.iter().map(|s| s.suite()).collect();
        assert_eq!(offered, asked);
        assert!(!crypto.is_fips());
        assert!(crypto.fips_summary().is_none());
    }

    #[test]
    fn without_fips_the_kernel_flag_file_decides_nothing_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("fips_enabled");
        std::fs::write(&flag, "0\n").unwrap();
        let crypto = Crypto::for_process(false, &flag).unwrap();
        assert!(!crypto.is_fips());
        let crypto = Crypto::for_process(false, &dir.path().join("absent")).unwrap();
        assert!(!crypto.is_fips());
        std::fs::write(&flag, "2\n").unwrap();
        let err = Crypto::for_process(false, &flag).unwrap_err();
        assert_eq!(err.kind(), "kernel_fips_flag");
    }

    #[test]
    fn fips_providers_offer_only_approved_suites_groups_and_signature_algorithms() {
        let crypto = Crypto::assume_fips_for_tests();
        let provider = crypto.provider(&[
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
            CipherSuite::TLS13_AES_128_GCM_SHA256,
            CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ]);
        let suites: Vec<_> = provider.cipher_suites.iter().map(|s| s.suite()).collect();
        assert_eq!(
            suites,
            [
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            ]
        );
        let groups: Vec<_> = provider.kx_groups.iter().map(|g| g.name()).collect();
        assert!(
            groups.contains(&rustls::NamedGroup::secp256r1),
            "{groups:?}"
        );
        assert!(
            groups.contains(&rustls::NamedGroup::secp384r1),
            "{groups:?}"
        );
        assert!(
            groups.iter().all(|g| fips::group_approved(*g)),
            "{groups:?}"
        );
        let algorithms = provider.signature_verification_algorithms;
        assert!(!algorithms.all.is_empty());
        assert!(algorithms
            .all
            .iter()
            .all(|alg| fips::signature_algorithm_approved(&alg.signature_alg_id())));
        let schemes: Vec<_> = algorithms.mapping.iter().map(|(s, _)| *s).collect();
        assert!(schemes.contains(&SignatureScheme::ECDSA_NISTP256_SHA256));
        assert!(schemes.contains(&SignatureScheme::RSA_PSS_SHA256));
        assert!(!schemes.contains(&SignatureScheme::ED25519));
        // The standard provider keeps what the backend offers by default (X25519 among them).
        let standard = Crypto::standard().provider(&[CipherSuite::TLS13_AES_128_GCM_SHA256]);
        assert!(standard
            .kx_groups
            .iter()
            .any(|g| g.name() == rustls::NamedGroup::X25519));
    }

    #[test]
    fn the_fips_key_loader_refuses_ed25519_and_signs_only_with_approved_schemes() {
        // A PKCS#8 v1 Ed25519 key (RFC 8410 §7: OID 1.3.101.112, then the 32-byte seed), which
        // AWS-LC and OpenSSL 3.0 both read (OpenSSL 3.0 does not read the v2 encoding).
        let mut pkcs8 = vec![
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ];
        pkcs8.extend(1..=32u8);
        let der = PrivateKeyDer::try_from(pkcs8).unwrap();
        let err = FipsKeyProvider.load_private_key(der).unwrap_err();
        assert!(err.to_string().contains("not FIPS-approved"), "{err}");

        let p256 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let der = PrivateKeyDer::try_from(p256.serialize_der()).unwrap();
        let key = FipsKeyProvider.load_private_key(der).unwrap();
        assert!(key.public_key().is_some());
        let chosen = key
            .choose_scheme(&[
                SignatureScheme::ED25519,
                SignatureScheme::ECDSA_SHA1_Legacy,
                SignatureScheme::ECDSA_NISTP256_SHA256,
            ])
            .expect("an approved scheme was offered");
        assert_eq!(chosen.scheme(), SignatureScheme::ECDSA_NISTP256_SHA256);
        assert!(key
            .choose_scheme(&[SignatureScheme::ECDSA_SHA1_Legacy])
            .is_none());
    }

    /// The aws-lc-rs build refuses FIPS mode, from the flag or the kernel, with one line naming
    /// both.
    #[cfg(not(feature = "openssl"))]
    #[test]
    fn the_aws_lc_build_refuses_fips_mode() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("fips_enabled");
        std::fs::write(&flag, "1\n").unwrap();
        for (fips_flag, named) in [(false, "fips_enabled is 1"), (true, "--fips")] {
            let err = Crypto::for_process(fips_flag, &flag).unwrap_err();
            let line = err.to_string();
            assert_eq!(err.kind(), "fips_unavailable");
            assert!(line.starts_with("FIPS mode ("), "{line}");
            assert!(line.contains(named), "{line}");
            assert!(
                line.contains("aws-lc-rs") && line.contains("OpenSSL"),
                "{line}"
            );
            assert!(!line.contains('\n'), "{line}");
        }
        let err = Crypto::for_process(true, &dir.path().join("absent")).unwrap_err();
        assert!(err.to_string().starts_with("FIPS mode (--fips)"), "{err}");
    }
}
