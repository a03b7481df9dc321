//! TLS 1.3's HKDF for the OpenSSL backend: OpenSSL's own HKDF (the FIPS provider's in FIPS
//! mode, as before), with one OpenSSL context per thread reused from call to call.
//!
//! Why: rustls-openssl creates a new `EVP_PKEY_CTX` for every HKDF step, and OpenSSL 3.0 pays
//! for each with algorithm and key-management lookups under locks. A TLS 1.3 handshake takes
//! about twenty steps; profiling `Connection: close` load (`benches/run.sh`) put a quarter of the
//! server's CPU there. Only where the context comes from changes: the computation is OpenSSL's
//! HKDF, checked against rustls-openssl's in the tests below. Must not touch: anything but HKDF
//! (the suites' hash, AEAD and HMAC stay rustls-openssl's).

use std::cell::RefCell;
use std::sync::OnceLock;

use openssl::error::ErrorStack;
use openssl::md::{Md, MdRef};
use openssl::pkey::Id;
use openssl::pkey_ctx::{HkdfMode, PkeyCtx};
use rustls::crypto::hash::HashAlgorithm;
use rustls::crypto::hmac::Tag;
use rustls::crypto::tls13::{Hkdf, HkdfExpander, OkmBlock, OutputLengthError};
use rustls::crypto::CipherSuiteCommon;
use rustls::{SupportedCipherSuite, Tls13CipherSuite};

/// The largest hash output of a TLS 1.3 suite (SHA-384).
const MAX_HASH_LEN: usize = 48;

thread_local! {
    /// This thread's HKDF context, created on first use.
    static CONTEXT: RefCell<Option<PkeyCtx<()>>> = const { RefCell::new(None) };
}

/// One HKDF extract or expand step in this thread's context.
fn hkdf_step(
    mode: HkdfMode,
    md: &MdRef,
    key: &[u8],
    salt: Option<&[u8]>,
    info: &[&[u8]],
    output: &mut [u8],
) -> Result<(), ErrorStack> {
    CONTEXT.with(|cell| {
        let mut slot = cell.borrow_mut();
        let ctx = match slot.as_mut() {
            Some(ctx) => ctx,
            None => slot.insert(PkeyCtx::new_id(Id::HKDF)?),
        };
        // A new derivation: OpenSSL drops the previous one's key, salt and info.
        ctx.derive_init()?;
        ctx.set_hkdf_mode(mode)?;
        ctx.set_hkdf_md(md)?;
        ctx.set_hkdf_key(key)?;
        if let Some(salt) = salt {
            ctx.set_hkdf_salt(salt)?;
        }
        // One info string: OpenSSL before 3.4 mishandles several (openssl/openssl#23448).
        if !info.is_empty() {
            ctx.add_hkdf_info(&info.concat())?;
        }
        ctx.derive(Some(output))?;
        Ok(())
    })
}

/// HKDF with a suite's hash; `original` (rustls-openssl's) computes the finished MACs and
/// answers whatever a context error leaves (it would report the same OpenSSL failure).
struct ReusedContextHkdf {
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

impl Hkdf for ReusedContextHkdf {
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

impl ReusedContextHkdf {
    fn extract(&self, salt: Option<&[u8]>, secret: &[u8]) -> Option<Box<dyn HkdfExpander>> {
        let zeros = [0u8; MAX_HASH_LEN];
        let salt = salt.unwrap_or(&zeros[..self.hash_len]);
        let mut prk = [0u8; MAX_HASH_LEN];
        hkdf_step(
            HkdfMode::EXTRACT_ONLY,
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
        match hkdf_step(HkdfMode::EXPAND_ONLY, self.md, prk, None, info, output) {
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

/// rustls-openssl's TLS 1.3 suites with this HKDF, each with its hash's HKDF, made once.
fn registry() -> &'static [(&'static Tls13CipherSuite, &'static ReusedContextHkdf)] {
    static SUITES: OnceLock<Vec<(&'static Tls13CipherSuite, &'static ReusedContextHkdf)>> =
        OnceLock::new();
    SUITES.get_or_init(|| {
        rustls_openssl::ALL_CIPHER_SUITES
            .iter()
            .filter_map(|suite| match suite {
                SupportedCipherSuite::Tls13(original) => {
                    let (md, hash_len) = match original.common.hash_provider.algorithm() {
                        HashAlgorithm::SHA256 => (Md::sha256(), 32),
                        HashAlgorithm::SHA384 => (Md::sha384(), 48),
                        _ => return None,
                    };
                    // Three suites, once per process: leaked on purpose, as rustls wants
                    // `'static` suites.
                    let hkdf: &'static ReusedContextHkdf = Box::leak(Box::new(ReusedContextHkdf {
                        md,
                        hash_len,
                        original: original.hkdf_provider,
                    }));
                    let faster: &'static Tls13CipherSuite = Box::leak(Box::new(Tls13CipherSuite {
                        common: CipherSuiteCommon {
                            suite: original.common.suite,
                            hash_provider: original.common.hash_provider,
                            confidentiality_limit: original.common.confidentiality_limit,
                        },
                        hkdf_provider: hkdf,
                        aead_alg: original.aead_alg,
                        quic: original.quic,
                    }));
                    Some((faster, hkdf))
                }
                SupportedCipherSuite::Tls12(_) => None,
            })
            .collect()
    })
}

/// `suite`, with this HKDF when it is a TLS 1.3 suite.
pub(super) fn with_reused_context(suite: SupportedCipherSuite) -> SupportedCipherSuite {
    let SupportedCipherSuite::Tls13(original) = suite else {
        return suite;
    };
    registry()
        .iter()
        .find(|(faster, _)| faster.common.suite == original.common.suite)
        .map_or(suite, |(faster, _)| SupportedCipherSuite::Tls13(faster))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Same outputs as rustls-openssl's HKDF, step after step on one thread's context.
    #[test]
    fn outputs_equal_rustls_openssls_hkdf() {
        for (suite, hkdf) in registry() {
            let original = hkdf.original;
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
            }
        }
        assert_eq!(registry().len(), 3);
    }

    #[test]
    fn tls12_suites_are_left_as_they_are() {
        let suite = rustls_openssl::cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256;
        assert!(matches!(
            with_reused_context(suite),
            SupportedCipherSuite::Tls12(_)
        ));
        let tls13 = rustls_openssl::cipher_suite::TLS13_AES_256_GCM_SHA384;
        let SupportedCipherSuite::Tls13(replaced) = with_reused_context(tls13) else {
            panic!("a TLS 1.3 suite stays TLS 1.3");
        };
        assert_eq!(replaced.common.suite, tls13.suite());
    }
}
