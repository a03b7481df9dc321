//! Certificate/key pair → `Arc<rustls::ServerConfig>`.
//!
//! Reads a PEM certificate chain (leaf first) and a PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC),
//! checks that the key belongs to the leaf certificate, and builds a server config that follows a
//! [`TlsPolicy`] with the policy's crypto (`crate::crypto`), offers ALPN `http/1.1` only, and
//! resumes sessions (a stateful cache, and stateless tickets where the crypto backend encrypts
//! them: AWS-LC; OpenSSL resumes from the cache only). Also reads the leaf's notAfter for the expiry metric with a minimal DER walk (no X.509
//! crate needed for one field). Must not touch: sockets, logging, metrics.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{InconsistentKeys, ServerConfig};

use super::session_cache::SessionStore;
use super::{key_kind, KeyKind, TlsError, TlsPolicy};

/// The only application protocol offered: the original disables HTTP/2.
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// Sessions kept for resumption (TLS 1.2 session IDs; TLS 1.3 tickets where the backend has no
/// ticket encrypter).
const SESSION_CACHE_SIZE: usize = 4096;

/// A validated server config and the facts about its certificate that operators watch.
#[derive(Clone)]
pub struct LoadedCertificate {
    /// The config to hand to `tokio_rustls::TlsAcceptor`.
    pub config: Arc<ServerConfig>,
    /// The leaf certificate's notAfter, seconds since the Unix epoch.
    pub not_after_unix: i64,
    /// What the key is (algorithm and size), when its DER says.
    pub key: Option<KeyKind>,
}

impl std::fmt::Debug for LoadedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedCertificate")
            .field("not_after_unix", &self.not_after_unix)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Loads `cert` and `key` into a server config following `policy`. Errors name the file.
pub fn load_server_config(
    cert: &Path,
    key: &Path,
    policy: &TlsPolicy,
) -> Result<Arc<ServerConfig>, TlsError> {
    load_certificate(cert, key, policy).map(|loaded| loaded.config)
}

/// Like [`load_server_config`], and also returns the leaf certificate's notAfter.
pub fn load_certificate(
    cert: &Path,
    key: &Path,
    policy: &TlsPolicy,
) -> Result<LoadedCertificate, TlsError> {
    build(&PemPair::read(cert, key)?, policy)
}

/// The raw contents of a certificate/key pair, as read from disk.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct PemPair {
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl PemPair {
    pub(super) fn read(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::ReadFile {
                path: path.to_owned(),
                source,
            })
        };
        Ok(Self {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
            cert_path: cert.to_owned(),
            key_path: key.to_owned(),
        })
    }
}

/// Validates a pair and builds the config.
///
/// Each config gets its own session cache and ticket keys: a resumed session skips the
/// certificate, so sharing them across a reload would let clients keep using sessions made with
/// the replaced certificate (for hours, the ticket lifetime) instead of seeing the new one.
pub(super) fn build(pair: &PemPair, policy: &TlsPolicy) -> Result<LoadedCertificate, TlsError> {
    let cert_path = &pair.cert_path;
    let key_path = &pair.key_path;

    let chain = CertificateDer::pem_slice_iter(&pair.cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| pem_error(cert_path, err))?;
    let Some(leaf) = chain.first() else {
        return Err(TlsError::Pem {
            path: cert_path.clone(),
            reason: "no CERTIFICATE block found".into(),
        });
    };
    let not_after_unix =
        leaf_not_after_unix(leaf).map_err(|reason| TlsError::InvalidCertificate {
            path: cert_path.clone(),
            reason: reason.to_string(),
        })?;

    let key_der = PrivateKeyDer::from_pem_slice(&pair.key_pem).map_err(|err| match err {
        pem::Error::NoItemsFound => TlsError::Pem {
            path: key_path.clone(),
            reason: "no PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block found".into(),
        },
        other => pem_error(key_path, other),
    })?;

    let provider = Arc::new(policy.server_provider());
    let key_kind = key_kind::of_private_key(&key_der);
    // Every build takes the same keys: what the cluster's PKI configuration issues, and Ed25519.
    // OpenSSL would load others too (RSA 1024, brainpool or Ed448 keys), some of which no
    // handshake could then be signed with; AWS-LC refuses them.
    if let Some(kind) = key_kind.as_ref().filter(|kind| !kind.is_supported()) {
        return Err(TlsError::InvalidKey {
            path: key_path.clone(),
            kind: Some(kind.clone()),
            source: rustls::Error::General(format!("{kind} keys are not served")),
        });
    }
    let signing_key = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|source| TlsError::InvalidKey {
            path: key_path.clone(),
            kind: key_kind.clone(),
            source,
        })?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        // AWS-LC's and OpenSSL's keys can always produce their public key; "unknown" cannot
        // happen with them.
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => {}
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
            return Err(TlsError::KeyMismatch {
                cert: cert_path.clone(),
                key: key_path.clone(),
            })
        }
        Err(other) => {
            return Err(TlsError::InvalidCertificate {
                path: cert_path.clone(),
                reason: other.to_string(),
            })
        }
    }

    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(policy.protocol_versions())
        .map_err(|source| TlsError::Rustls {
            cert: cert_path.clone(),
            key: key_path.clone(),
            source,
        })?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
    config.session_storage = Arc::new(SessionStore::new(SESSION_CACHE_SIZE));
    // Fails only if the system RNG fails.
    let ticketer = policy
        .crypto()
        .ticketer()
        .map_err(|source| TlsError::Rustls {
            cert: cert_path.clone(),
            key: key_path.clone(),
            source,
        })?;
    if let Some(ticketer) = ticketer {
        config.ticketer = ticketer;
    }
    if policy.crypto().is_fips() {
        // FIPS allows the TLS 1.2 key derivation only with the Extended Master Secret (RFC 7627).
        config.require_ems = true;
        if !config.fips() {
            return Err(TlsError::Rustls {
                cert: cert_path.clone(),
                key: key_path.clone(),
                source: rustls::Error::General(
                    "FIPS mode: the server configuration does not report FIPS operation".into(),
                ),
            });
        }
    }

    Ok(LoadedCertificate {
        config: Arc::new(config),
        not_after_unix,
        key: key_kind,
    })
}

fn pem_error(path: &Path, err: pem::Error) -> TlsError {
    TlsError::Pem {
        path: path.to_owned(),
        reason: format!("invalid PEM: {err}"),
    }
}

/// Why a certificate's notAfter could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DerError {
    #[error("truncated DER at {0}")]
    Truncated(&'static str),
    #[error("bad DER length at {0}")]
    BadLength(&'static str),
    #[error("unexpected DER tag {found:#04x} at {what} (expected {expected:#04x})")]
    UnexpectedTag {
        what: &'static str,
        found: u8,
        expected: u8,
    },
    #[error("malformed notAfter time")]
    MalformedTime,
}

/// The notAfter of a DER certificate, in seconds since the Unix epoch.
///
/// Walks `Certificate → tbsCertificate → [version] serialNumber signature issuer validity` and
/// decodes the second `Time` (UTCTime or GeneralizedTime in the RFC 5280 form `...Z`).
pub fn leaf_not_after_unix(cert: &CertificateDer<'_>) -> Result<i64, DerError> {
    const SEQUENCE: u8 = 0x30;
    const INTEGER: u8 = 0x02;
    const VERSION: u8 = 0xa0; // [0] EXPLICIT

    let (certificate, _) = der_expect(cert.as_ref(), SEQUENCE, "Certificate")?;
    let (mut tbs, _) = der_expect(certificate, SEQUENCE, "tbsCertificate")?;
    if tbs.first() == Some(&VERSION) {
        tbs = der_expect(tbs, VERSION, "version")?.1;
    }
    let (_, rest) = der_expect(tbs, INTEGER, "serialNumber")?;
    let (_, rest) = der_expect(rest, SEQUENCE, "signature")?;
    let (_, rest) = der_expect(rest, SEQUENCE, "issuer")?;
    let (validity, _) = der_expect(rest, SEQUENCE, "validity")?;
    let (_, _, rest) = der_read(validity, "notBefore")?;
    let (tag, not_after, _) = der_read(rest, "notAfter")?;
    decode_time(tag, not_after).ok_or(DerError::MalformedTime)
}

/// Reads one DER TLV: (tag, contents, rest). Single-byte tags and definite lengths only, which is
/// all DER allows for the fields walked here.
fn der_read<'a>(input: &'a [u8], what: &'static str) -> Result<(u8, &'a [u8], &'a [u8]), DerError> {
    let truncated = || DerError::Truncated(what);
    let (&tag, rest) = input.split_first().ok_or_else(truncated)?;
    let (&first, rest) = rest.split_first().ok_or_else(truncated)?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return Err(DerError::BadLength(what));
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, byte| (acc << 8) | usize::from(*byte));
        (len, &rest[count..])
    };
    if rest.len() < len {
        return Err(truncated());
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

fn der_expect<'a>(
    input: &'a [u8],
    tag: u8,
    what: &'static str,
) -> Result<(&'a [u8], &'a [u8]), DerError> {
    let (found, contents, rest) = der_read(input, what)?;
    if found != tag {
        return Err(DerError::UnexpectedTag {
            what,
            found,
            expected: tag,
        });
    }
    Ok((contents, rest))
}

/// UTCTime (`YYMMDDHHMMSSZ`, years 1950-2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
fn decode_time(tag: u8, bytes: &[u8]) -> Option<i64> {
    const UTC_TIME: u8 = 0x17;
    const GENERALIZED_TIME: u8 = 0x18;
    let text = std::str::from_utf8(bytes).ok()?;
    let digits = text.strip_suffix('Z')?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |range: std::ops::Range<usize>| digits.get(range)?.parse::<i64>().ok();
    let (year, rest) = match (tag, digits.len()) {
        (UTC_TIME, 12) => {
            let yy = num(0..2)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, 2)
        }
        (GENERALIZED_TIME, 14) => (num(0..4)?, 4),
        _ => return None,
    };
    let month = num(rest..rest + 2)?;
    let day = num(rest + 2..rest + 4)?;
    let hour = num(rest + 4..rest + 6)?;
    let minute = num(rest + 6..rest + 8)?;
    let second = num(rest + 8..rest + 10)?;
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12; // March = 0
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        // 2036-11-18T05:20:24Z, checked with `date -u -d ... +%s`.
        assert_eq!(decode_time(0x17, b"361118052024Z"), Some(2_110_598_424));
        assert_eq!(decode_time(0x18, b"20361118052024Z"), Some(2_110_598_424));
        assert_eq!(decode_time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(decode_time(0x17, b"500101000000Z"), Some(-631_152_000));
        assert_eq!(decode_time(0x17, b"361118052024"), None);
        assert_eq!(decode_time(0x17, b"361318052024Z"), None);
        assert_eq!(decode_time(0x18, b"361118052024Z"), None);
    }

    #[test]
    fn not_after_of_generated_certificates() {
        for (year, month, day) in [(2031, 5, 17), (2051, 2, 28), (1999, 12, 31)] {
            let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
            params.not_after = rcgen::date_time_ymd(year, month, day);
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = params.self_signed(&key).unwrap();
            let expected =
                days_from_civil(i64::from(year), i64::from(month), i64::from(day)) * 86_400;
            assert_eq!(leaf_not_after_unix(cert.der()), Ok(expected), "{year}");
        }
    }

    #[test]
    fn not_after_rejects_garbage() {
        assert!(leaf_not_after_unix(&CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01])).is_err());
        assert!(leaf_not_after_unix(&CertificateDer::from(vec![0x04, 0x00])).is_err());
        assert!(leaf_not_after_unix(&CertificateDer::from(Vec::new())).is_err());
    }
}
