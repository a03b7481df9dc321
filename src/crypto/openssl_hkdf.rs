//! TLS 1.3's key schedule for the OpenSSL backend, and the suites' assembly.
//!
//! In FIPS mode ([`KeySchedule::Provider`]): OpenSSL's own HKDF (the FIPS provider's), called
//! through OpenSSL 3's KDF API (`EVP_KDF`, as libssl does) instead of the legacy
//! `EVP_PKEY_derive` wrapper. rustls-openssl runs every HKDF step through a new `EVP_PKEY_CTX`,
//! and in OpenSSL 3.0 each `EVP_PKEY_derive` step fetches the key-exchange wrapper, the KDF
//! (several times) and the digest by name, under locks. A TLS 1.3 handshake takes about thirty
//! steps; counting OpenSSL calls under `Connection: close` load (`perf probe`) found about 130
//! KDF, 60 key-exchange and 140 digest fetches per connection, nginx on the same OpenSSL about
//! 6 and 14. The KDF API fetches the KDF once and the digest once per step.
//!
//! Outside FIPS mode ([`KeySchedule::Sha2Functions`]): rustls's HKDF over
//! [`super::openssl_hmac`], HMAC on libcrypto's SHA-2 functions, which fetch nothing at all
//! (the KDF API's fetches and parameter lists were still a sixth of the server's CPU under a
//! connection-per-request load). Both compute what rustls-openssl's HKDF computes, checked in
//! the tests below. The TLS 1.3 suites built here (`with_tls13_fast_paths`) also take
//! [`super::openssl_aead`]'s record protection. Must not touch: anything but HKDF and the
//! suites' assembly (the suites' transcript hash stays rustls-openssl's).

use std::sync::OnceLock;

use openssl::error::ErrorStack;
use openssl::kdf::HkdfMode;
use openssl::md::{Md, MdRef};
use rustls::crypto::cipher::Tls13AeadAlgorithm;
use rustls::crypto::hash::HashAlgorithm;
use rustls::crypto::hmac::Tag;
use rustls::crypto::tls13::{Hkdf, HkdfExpander, HkdfUsingHmac, OkmBlock, OutputLengthError};
use rustls::crypto::CipherSuiteCommon;
use rustls::{SupportedCipherSuite, Tls13CipherSuite};

use super::openssl_aead::{AeadCipher, KeyedContextAead};
use super::openssl_hmac::{HMAC_SHA256, HMAC_SHA384};

/// The largest hash output of a TLS 1.3 suite (SHA-384).
const MAX_HASH_LEN: usize = 48;

/// One HKDF extract or expand step, through OpenSSL's KDF API (`EVP_KDF`).
fn hkdf_step(
    mode: HkdfMode,
    md: &MdRef,
    key: &[u8],
    salt: Option<&[u8]>,
    info: &[&[u8]],
    output: &mut [u8],
) -> Result<(), ErrorStack> {
    // One info string: OpenSSL before 3.4 mishandles several (openssl/openssl#23448).
    let info = (!info.is_empty()).then(|| info.concat());
    openssl::kdf::hkdf(md, key, salt, info.as_deref(), mode, None, output)
}

/// HKDF with a suite's hash; `original` (rustls-openssl's) computes the finished MACs and
/// answers whatever a context error leaves (it would report the same OpenSSL failure).
struct KdfApiHkdf {
    md: &'static MdRef,
    hash_len: usize,
    original: &'static dyn Hkdf,
}

struct Expander {
    prk: [u8; MAX_HASH_LEN],
    md: &'static MdRef,
    hash_len: usize,
    original: Box<dyn HkdfExpander>,
}

impl Hkdf for KdfApiHkdf {
    fn extract_from_zero_ikm(&self, salt: Option<&[u8]>) -> Box<dyn HkdfExpander> {
        let zeros = [0u8; MAX_HASH_LEN];
        self.extract(salt, &zeros[..self.hash_len])
            .unwrap_or_else(|| self.original.extract_from_zero_ikm(salt))
    }

    fn extract_from_secret(&self, salt: Option<&[u8]>, secret: &[u8]) -> Box<dyn HkdfExpander> {
        self.extract(salt, secret)
            .unwrap_or_else(|| self.original.extract_from_secret(salt, secret))
    }

    fn expander_for_okm(&self, okm: &OkmBlock) -> Box<dyn HkdfExpander> {
        let original = self.original.expander_for_okm(okm);
        let mut prk = [0u8; MAX_HASH_LEN];
        let okm = okm.as_ref();
        if okm.len() != self.hash_len {
            return original;
        }
        prk[..okm.len()].copy_from_slice(okm);
        Box::new(Expander {
            prk,
            md: self.md,
            hash_len: self.hash_len,
            original,
        })
    }

    fn hmac_sign(&self, key: &OkmBlock, message: &[u8]) -> Tag {
        self.original.hmac_sign(key, message)
    }

    fn fips(&self) -> bool {
        self.original.fips()
    }
}

impl KdfApiHkdf {
    fn extract(&self, salt: Option<&[u8]>, secret: &[u8]) -> Option<Box<dyn HkdfExpander>> {
        let zeros = [0u8; MAX_HASH_LEN];
        let salt = salt.unwrap_or(&zeros[..self.hash_len]);
        let mut prk = [0u8; MAX_HASH_LEN];
        hkdf_step(
            HkdfMode::ExtractOnly,
            self.md,
            secret,
            Some(salt),
            &[],
            &mut prk[..self.hash_len],
        )
        .ok()?;
        let okm = OkmBlock::new(&prk[..self.hash_len]);
        Some(Box::new(Expander {
            prk,
            md: self.md,
            hash_len: self.hash_len,
            original: self.original.expander_for_okm(&okm),
        }))
    }
}

impl HkdfExpander for Expander {
    fn expand_slice(&self, info: &[&[u8]], output: &mut [u8]) -> Result<(), OutputLengthError> {
        if output.len() > 255 * self.hash_len {
            return Err(OutputLengthError);
        }
        let prk = &self.prk[..self.hash_len];
        match hkdf_step(HkdfMode::ExpandOnly, self.md, prk, None, info, output) {
            Ok(()) => Ok(()),
            Err(_) => self.original.expand_slice(info, output),
        }
    }

    fn expand_block(&self, info: &[&[u8]]) -> OkmBlock {
        let mut output = [0u8; MAX_HASH_LEN];
        let len = self.hash_len;
        match self.expand_slice(info, &mut output[..len]) {
            Ok(()) => OkmBlock::new(&output[..len]),
            Err(_) => self.original.expand_block(info),
        }
    }

    fn hash_len(&self) -> usize {
        self.hash_len
    }
}

/// Which HKDF a process's TLS 1.3 suites run their key schedule on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeySchedule {
    /// OpenSSL's HKDF through the KDF API, HMAC through rustls-openssl: every step in the
    /// provider (the FIPS provider's in FIPS mode).
    Provider,
    /// HKDF over [`super::openssl_hmac`]'s HMAC on libcrypto's SHA-2 functions: no lookup, no
    /// allocation per step. Outside FIPS mode only.
    Sha2Functions,
}

impl KeySchedule {
    /// The key schedule for this process: [`KeySchedule::Provider`] whenever OpenSSL runs with
    /// the FIPS default property, whatever asked for it.
    pub(super) fn for_process() -> Self {
        use rustls::crypto::SecureRandom as _;
        if rustls_openssl::SecureRandom.fips() {
            KeySchedule::Provider
        } else {
            KeySchedule::Sha2Functions
        }
    }
}

/// rustls-openssl's TLS 1.3 suites with `schedule`'s HKDF (each with its hash's) and
/// keyed-context record protection, made once per key schedule; each beside rustls-openssl's
/// own HKDF for its hash, which the tests compare it with.
fn registry(schedule: KeySchedule) -> &'static [(&'static Tls13CipherSuite, &'static dyn Hkdf)] {
    type Suites = Vec<(&'static Tls13CipherSuite, &'static dyn Hkdf)>;
    static SUITES: [OnceLock<Suites>; 2] = [OnceLock::new(), OnceLock::new()];
    SUITES[schedule as usize].get_or_init(|| {
        rustls_openssl::ALL_CIPHER_SUITES
            .iter()
            .filter_map(|suite| match suite {
                SupportedCipherSuite::Tls13(original) => {
                    let (md, hash_len, hmac) = match original.common.hash_provider.algorithm() {
                        HashAlgorithm::SHA256 => (Md::sha256(), 32, &HMAC_SHA256),
                        HashAlgorithm::SHA384 => (Md::sha384(), 48, &HMAC_SHA384),
                        _ => return None,
                    };
                    // Three suites per key schedule, once per process: leaked on purpose, as
                    // rustls wants `'static` suites.
                    let hkdf: &'static dyn Hkdf = match schedule {
                        KeySchedule::Provider => Box::leak(Box::new(KdfApiHkdf {
                            md,
                            hash_len,
                            original: original.hkdf_provider,
                        })),
                        KeySchedule::Sha2Functions => Box::leak(Box::new(HkdfUsingHmac(hmac))),
                    };
                    let aead: &'static dyn Tls13AeadAlgorithm =
                        match AeadCipher::of(original.common.suite) {
                            Some(cipher) => Box::leak(Box::new(KeyedContextAead::new(
                                cipher,
                                original.aead_alg,
                            ))),
                            None => original.aead_alg,
                        };
                    let faster: &'static Tls13CipherSuite = Box::leak(Box::new(Tls13CipherSuite {
                        common: CipherSuiteCommon {
                            suite: original.common.suite,
                            hash_provider: original.common.hash_provider,
                            confidentiality_limit: original.common.confidentiality_limit,
                        },
                        hkdf_provider: hkdf,
                        aead_alg: aead,
                        quic: original.quic,
                    }));
                    Some((faster, original.hkdf_provider))
                }
                SupportedCipherSuite::Tls12(_) => None,
            })
            .collect()
    })
}

/// `suite`, with `schedule`'s HKDF and keyed-context record protection when it is a TLS 1.3
/// suite.
pub(super) fn with_tls13_fast_paths(
    suite: SupportedCipherSuite,
    schedule: KeySchedule,
) -> SupportedCipherSuite {
    let SupportedCipherSuite::Tls13(original) = suite else {
        return suite;
    };
    registry(schedule)
        .iter()
        .find(|(faster, _)| faster.common.suite == original.common.suite)
        .map_or(suite, |(faster, _)| SupportedCipherSuite::Tls13(faster))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Same outputs as rustls-openssl's HKDF, step after step, for both key schedules; the
    /// finished MACs too.
    #[test]
    fn outputs_equal_rustls_openssls_hkdf() {
        let schedules = [KeySchedule::Provider, KeySchedule::Sha2Functions];
        for (suite, original) in schedules.into_iter().flat_map(registry) {
            let original = *original;
            let faster = suite.hkdf_provider;
            for round in 0u8..4 {
                let secret = [round; 40];
                let salt = [round.wrapping_add(7); 20];
                let ours = faster.extract_from_secret(Some(&salt), &secret);
                let theirs = original.extract_from_secret(Some(&salt), &secret);
                let info: [&[u8]; 3] = [b"tls13 ", b"derived", &[round]];
                assert_eq!(
                    ours.expand_block(&info).as_ref(),
                    theirs.expand_block(&info).as_ref()
                );
                let mut a = [0u8; 80];
                let mut b = [0u8; 80];
                ours.expand_slice(&info[..2], &mut a).unwrap();
                theirs.expand_slice(&info[..2], &mut b).unwrap();
                assert_eq!(a, b);
                let zero_ours = faster.extract_from_zero_ikm(None).expand_block(&info);
                let zero_theirs = original.extract_from_zero_ikm(None).expand_block(&info);
                assert_eq!(zero_ours.as_ref(), zero_theirs.as_ref());
                let okm = theirs.expand_block(&info);
                assert_eq!(
                    faster
                        .expander_for_okm(&okm)
                        .expand_block(&info[1..])
                        .as_ref(),
                    original
                        .expander_for_okm(&okm)
                        .expand_block(&info[1..])
                        .as_ref()
                );
                assert_eq!(
                    faster.hmac_sign(&okm, b"finished").as_ref(),
                    original.hmac_sign(&okm, b"finished").as_ref()
                );
            }
        }
        assert_eq!(registry(KeySchedule::Provider).len(), 3);
        assert_eq!(registry(KeySchedule::Sha2Functions).len(), 3);
    }

    #[test]
    fn tls12_suites_are_left_as_they_are() {
        let suite = rustls_openssl::cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256;
        for schedule in [KeySchedule::Provider, KeySchedule::Sha2Functions] {
            assert!(matches!(
                with_tls13_fast_paths(suite, schedule),
                SupportedCipherSuite::Tls12(_)
            ));
            let tls13 = rustls_openssl::cipher_suite::TLS13_AES_256_GCM_SHA384;
            let SupportedCipherSuite::Tls13(replaced) = with_tls13_fast_paths(tls13, schedule)
            else {
                panic!("a TLS 1.3 suite stays TLS 1.3");
            };
            assert_eq!(replaced.common.suite, tls13.suite());
        }
        // Without the FIPS provider loaded, this process's key schedule is the fast one.
        assert_eq!(KeySchedule::for_process(), KeySchedule::Sha2Functions);
    }
}
