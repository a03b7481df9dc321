//! What kind of key a PEM key file or a certificate holds: its algorithm and size, read from the
//! DER with a minimal walk (PKCS#8 `PrivateKeyInfo`, PKCS#1 `RSAPrivateKey`, SEC1
//! `ECPrivateKey`, X.509 `SubjectPublicKeyInfo`), so that a key the server cannot use is refused
//! naming what it is ("an RSA key of 1024 bits", "an ECDSA key on brainpoolP256r1") instead of
//! a parser's generic error, and the status page says what is served. Pure: no file access, no
//! cryptography (nothing here decides whether a key is valid; the crypto provider does).
//! Must not touch: sockets, logging, metrics.

use std::fmt;

/// A key's algorithm and size, as far as the DER says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// RSA, with its modulus size in bits.
    Rsa {
        bits: usize,
    },
    /// ECDSA (an `id-ecPublicKey` key) on a named curve.
    Ec {
        curve: Curve,
    },
    Ed25519,
    Ed448,
    /// An algorithm this walk does not name, by its object identifier.
    Other {
        oid: String,
    },
}

/// An elliptic curve, by name where it is one TLS servers meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Curve {
    P256,
    P384,
    P521,
    Secp256k1,
    BrainpoolP256r1,
    BrainpoolP384r1,
    BrainpoolP512r1,
    /// Another named curve, by its object identifier; or explicit parameters (`None`).
    Other(Option<String>),
}

impl fmt::Display for Curve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Curve::P256 => f.write_str("P-256"),
            Curve::P384 => f.write_str("P-384"),
            Curve::P521 => f.write_str("P-521"),
            Curve::Secp256k1 => f.write_str("secp256k1"),
            Curve::BrainpoolP256r1 => f.write_str("brainpoolP256r1"),
            Curve::BrainpoolP384r1 => f.write_str("brainpoolP384r1"),
            Curve::BrainpoolP512r1 => f.write_str("brainpoolP512r1"),
            Curve::Other(Some(oid)) => write!(f, "the curve {oid}"),
            Curve::Other(None) => f.write_str("explicit curve parameters"),
        }
    }
}

impl fmt::Display for KeyKind {
    /// `RSA 8192`, `ECDSA P-521`, `Ed25519`, ...: what operators and the PKI resource call them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyKind::Rsa { bits } => write!(f, "RSA {bits}"),
            KeyKind::Ec { curve } => write!(f, "ECDSA {curve}"),
            KeyKind::Ed25519 => f.write_str("Ed25519"),
            KeyKind::Ed448 => f.write_str("Ed448"),
            KeyKind::Other { oid } => write!(f, "algorithm {oid}"),
        }
    }
}

impl KeyKind {
    /// Whether the cluster's PKI configuration can issue such a key (RSA 2048 to 8192 bits in
    /// steps of 1024, ECDSA on P-256, P-384 or P-521) or it is Ed25519, which every build signs
    /// with too: the keys the server is expected to serve with.
    pub fn is_supported(&self) -> bool {
        match self {
            KeyKind::Rsa { bits } => (2048..=8192).contains(bits),
            KeyKind::Ec { curve } => matches!(curve, Curve::P256 | Curve::P384 | Curve::P521),
            KeyKind::Ed25519 => true,
            KeyKind::Ed448 | KeyKind::Other { .. } => false,
        }
    }
}

/// What every build of the server signs with, for error messages.
pub const SUPPORTED: &str = "RSA of 2048 to 8192 bits, ECDSA on P-256, P-384 or P-521, or Ed25519";

// Object identifiers, DER-encoded contents (without tag and length).
const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];
const OID_ED448: &[u8] = &[0x2b, 0x65, 0x71];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];
const OID_SECP256K1: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x0a];
const OID_BRAINPOOL_P256R1: &[u8] = &[0x2b, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x07];
const OID_BRAINPOOL_P384R1: &[u8] = &[0x2b, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x0b];
const OID_BRAINPOOL_P512R1: &[u8] = &[0x2b, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x0d];

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;
const BIT_STRING: u8 = 0x03;
const OID: u8 = 0x06;

/// The kind of a private key in one of the PEM key forms rustls reads (`PrivateKeyDer`'s
/// variants: PKCS#8, PKCS#1 RSA, SEC1 EC); `None` when the DER is not one of them.
pub fn of_private_key(der: &rustls::pki_types::PrivateKeyDer<'_>) -> Option<KeyKind> {
    use rustls::pki_types::PrivateKeyDer;
    match der {
        PrivateKeyDer::Pkcs8(pkcs8) => of_pkcs8(pkcs8.secret_pkcs8_der()),
        PrivateKeyDer::Pkcs1(pkcs1) => {
            rsa_private_key_bits(pkcs1.secret_pkcs1_der()).map(|bits| KeyKind::Rsa { bits })
        }
        PrivateKeyDer::Sec1(sec1) => {
            sec1_curve(sec1.secret_sec1_der(), None).map(|curve| KeyKind::Ec { curve })
        }
        _ => None,
    }
}

/// The kind of a certificate's public key (its `SubjectPublicKeyInfo`).
pub fn of_certificate(cert: &[u8]) -> Option<KeyKind> {
    let (certificate, _) = expect(cert, SEQUENCE)?;
    let (mut tbs, _) = expect(certificate, SEQUENCE)?;
    // [0] EXPLICIT version
    if tbs.first() == Some(&0xa0) {
        tbs = read(tbs)?.2;
    }
    let mut rest = tbs;
    // serialNumber, signature, issuer, validity, subject
    for _ in 0..5 {
        rest = read(rest)?.2;
    }
    let (spki, _) = expect(rest, SEQUENCE)?;
    let (algorithm, rest) = expect(spki, SEQUENCE)?;
    let (oid, parameters) = expect(algorithm, OID)?;
    let (public_key, _) = expect(rest, BIT_STRING)?;
    Some(match oid {
        OID_RSA => {
            // The BIT STRING's first byte counts unused bits; then RSAPublicKey.
            let (rsa_public_key, _) = expect(public_key.get(1..)?, SEQUENCE)?;
            let (modulus, _) = expect(rsa_public_key, INTEGER)?;
            KeyKind::Rsa {
                bits: integer_bits(modulus),
            }
        }
        OID_EC_PUBLIC_KEY => KeyKind::Ec {
            curve: curve_of_parameters(parameters),
        },
        OID_ED25519 => KeyKind::Ed25519,
        OID_ED448 => KeyKind::Ed448,
        other => KeyKind::Other {
            oid: oid_text(other),
        },
    })
}

/// PKCS#8 `PrivateKeyInfo` (or `OneAsymmetricKey`): version, algorithm, privateKey.
fn of_pkcs8(der: &[u8]) -> Option<KeyKind> {
    let (info, _) = expect(der, SEQUENCE)?;
    let (_, rest) = expect(info, INTEGER)?;
    let (algorithm, rest) = expect(rest, SEQUENCE)?;
    let (oid, parameters) = expect(algorithm, OID)?;
    let (private_key, _) = expect(rest, OCTET_STRING)?;
    Some(match oid {
        OID_RSA => KeyKind::Rsa {
            bits: rsa_private_key_bits(private_key)?,
        },
        OID_EC_PUBLIC_KEY => KeyKind::Ec {
            curve: sec1_curve(private_key, Some(curve_of_parameters(parameters)))?,
        },
        OID_ED25519 => KeyKind::Ed25519,
        OID_ED448 => KeyKind::Ed448,
        other => KeyKind::Other {
            oid: oid_text(other),
        },
    })
}

/// PKCS#1 `RSAPrivateKey`: version, modulus, ...: the modulus's size.
fn rsa_private_key_bits(der: &[u8]) -> Option<usize> {
    let (key, _) = expect(der, SEQUENCE)?;
    let (_, rest) = expect(key, INTEGER)?;
    let (modulus, _) = expect(rest, INTEGER)?;
    Some(integer_bits(modulus))
}

/// SEC1 `ECPrivateKey`: version, privateKey, [0] parameters (optional: PKCS#8 puts the curve in
/// the algorithm's parameters instead, given as `outer`).
fn sec1_curve(der: &[u8], outer: Option<Curve>) -> Option<Curve> {
    let (key, _) = expect(der, SEQUENCE)?;
    let (_, rest) = expect(key, INTEGER)?;
    let (_, mut rest) = expect(rest, OCTET_STRING)?;
    while !rest.is_empty() {
        let (tag, contents, next) = read(rest)?;
        if tag == 0xa0 {
            return Some(curve_of_parameters(contents));
        }
        rest = next;
    }
    outer.or(Some(Curve::Other(None)))
}

/// `ECParameters` as a named curve's OID; anything else is explicit parameters.
fn curve_of_parameters(parameters: &[u8]) -> Curve {
    match expect(parameters, OID) {
        Some((OID_P256, _)) => Curve::P256,
        Some((OID_P384, _)) => Curve::P384,
        Some((OID_P521, _)) => Curve::P521,
        Some((OID_SECP256K1, _)) => Curve::Secp256k1,
        Some((OID_BRAINPOOL_P256R1, _)) => Curve::BrainpoolP256r1,
        Some((OID_BRAINPOOL_P384R1, _)) => Curve::BrainpoolP384r1,
        Some((OID_BRAINPOOL_P512R1, _)) => Curve::BrainpoolP512r1,
        Some((other, _)) => Curve::Other(Some(oid_text(other))),
        None => Curve::Other(None),
    }
}

/// The size in bits of a DER INTEGER's (unsigned) value.
fn integer_bits(contents: &[u8]) -> usize {
    let significant: &[u8] = match contents.iter().position(|b| *b != 0) {
        Some(first) => &contents[first..],
        None => return 0,
    };
    significant.len() * 8 - significant[0].leading_zeros() as usize
}

/// Dotted text of an OID's DER contents (`1.3.36.3.3.2.8.1.1.7`).
fn oid_text(contents: &[u8]) -> String {
    let mut arcs = Vec::new();
    let mut value: u64 = 0;
    for (i, byte) in contents.iter().enumerate() {
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            if arcs.is_empty() {
                let (first, second) = match value {
                    0..=39 => (0, value),
                    40..=79 => (1, value - 40),
                    _ => (2, value - 80),
                };
                arcs.push(first);
                arcs.push(second);
            } else {
                arcs.push(value);
            }
            value = 0;
        } else if i + 1 == contents.len() || value > u64::MAX >> 7 {
            break;
        }
    }
    arcs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// One DER TLV: (tag, contents, rest). Single-byte tags and definite lengths (what DER allows
/// for the structures walked here).
fn read(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, byte| (acc << 8) | usize::from(*byte));
        (len, &rest[count..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (found, contents, rest) = read(input)?;
    (found == tag).then_some((contents, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    #[test]
    fn generated_keys_and_certificates_say_what_they_are() {
        for (alg, expected) in [
            (&rcgen::PKCS_ECDSA_P256_SHA256, "ECDSA P-256"),
            (&rcgen::PKCS_ECDSA_P384_SHA384, "ECDSA P-384"),
            (&rcgen::PKCS_ED25519, "Ed25519"),
        ] {
            let key = rcgen::KeyPair::generate_for(alg).unwrap();
            let der = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
            let kind = of_private_key(&der).expect("a kind");
            assert_eq!(kind.to_string(), expected);
            assert!(kind.is_supported());
            let params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
            let cert = params.self_signed(&key).unwrap();
            assert_eq!(of_certificate(cert.der()), Some(kind));
        }
    }

    #[test]
    fn the_pki_fixtures_keys_and_certificates_say_what_they_are() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pki");
        for (file, expected, supported) in [
            ("rsa2048/tls", "RSA 2048", true),
            ("rsa8192/tls", "RSA 8192", true),
            ("p521/tls", "ECDSA P-521", true),
            ("refused/rsa1024", "RSA 1024", false),
            ("refused/brainpoolP256r1", "ECDSA brainpoolP256r1", false),
            ("refused/secp256k1", "ECDSA secp256k1", false),
            ("refused/ed448", "Ed448", false),
        ] {
            let key_pem = std::fs::read(dir.join(format!("{file}.key"))).unwrap();
            let der = PrivateKeyDer::from_pem_slice(&key_pem).unwrap();
            let kind = of_private_key(&der).expect(file);
            assert_eq!(kind.to_string(), expected, "{file}.key");
            assert_eq!(kind.is_supported(), supported, "{file}");
            let cert_pem = std::fs::read(dir.join(format!("{file}.crt"))).unwrap();
            let cert = CertificateDer::from_pem_slice(&cert_pem).unwrap();
            assert_eq!(of_certificate(&cert), Some(kind), "{file}.crt");
        }
    }

    #[test]
    fn pkcs1_and_sec1_forms_are_read_too() {
        // `openssl rsa -traditional` and `openssl ec` forms of small keys, made once.
        let pkcs1 = PrivateKeyDer::from_pem_slice(include_bytes!(
            "../../../tests/fixtures/pki/forms/rsa2048-pkcs1.key"
        ))
        .unwrap();
        assert!(matches!(pkcs1, PrivateKeyDer::Pkcs1(_)));
        assert_eq!(of_private_key(&pkcs1), Some(KeyKind::Rsa { bits: 2048 }));
        let sec1 = PrivateKeyDer::from_pem_slice(include_bytes!(
            "../../../tests/fixtures/pki/forms/p521-sec1.key"
        ))
        .unwrap();
        assert!(matches!(sec1, PrivateKeyDer::Sec1(_)));
        assert_eq!(
            of_private_key(&sec1),
            Some(KeyKind::Ec { curve: Curve::P521 })
        );
    }

    #[test]
    fn unknown_oids_are_named_in_dotted_form() {
        assert_eq!(oid_text(OID_BRAINPOOL_P256R1), "1.3.36.3.3.2.8.1.1.7");
        assert_eq!(oid_text(OID_RSA), "1.2.840.113549.1.1.1");
        assert_eq!(integer_bits(&[0x00, 0x80, 0x00]), 16);
        assert_eq!(integer_bits(&[0x01]), 1);
        assert!(of_certificate(&[0x30, 0x00]).is_none());
    }
}
