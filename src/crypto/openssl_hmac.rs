//! HMAC-SHA256 and HMAC-SHA384 (RFC 2104) on libcrypto's SHA-2 functions, for the TLS 1.3 key
//! schedule of the OpenSSL backend outside FIPS mode (HKDF is rustls's `HkdfUsingHmac` over it).
//!
//! Why: in OpenSSL 3.0 every HKDF step and every HMAC through the EVP layer fetches its KDF,
//! MAC and digest by name, under the method store's lock, and builds an `OSSL_PARAM` list: a
//! TLS 1.3 handshake takes about thirty such steps, and under a connection-per-request load they
//! were a sixth of the server's CPU (benches/README.md, "The per-connection row"), several
//! times the hashing they do. Here a key's inner and outer padded states are hashed once, when
//! rustls keys the HMAC, and each MAC clones them: two or three SHA-2 compressions, no
//! allocation, no lookup. The compression functions are libcrypto's (`SHA256_Update`,
//! `SHA512_Update`: the same code the default provider runs).
//!
//! Never in FIPS mode: those functions are outside the FIPS provider, so there the key schedule
//! stays in it ([`super::openssl_hkdf`]'s KDF-API HKDF, rustls-openssl's HMAC). Must not touch:
//! anything but HMAC over SHA-256 and SHA-384.

use openssl::sha::{Sha256, Sha384};
use rustls::crypto::hmac::{Hmac, Key, Tag};

/// The SHA-2 hashes of the TLS 1.3 suites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sha2 {
    Sha256,
    Sha384,
}

impl Sha2 {
    fn output_len(self) -> usize {
        match self {
            Sha2::Sha256 => 32,
            Sha2::Sha384 => 48,
        }
    }

    /// The hash's input block: HMAC pads its key to this.
    fn block_len(self) -> usize {
        match self {
            Sha2::Sha256 => 64,
            Sha2::Sha384 => 128,
        }
    }

    fn start(self) -> State {
        match self {
            Sha2::Sha256 => State::Sha256(Sha256::new()),
            Sha2::Sha384 => State::Sha384(Sha384::new()),
        }
    }

    fn digest(self, data: &[u8]) -> Tag {
        let mut state = self.start();
        state.update(data);
        state.finish()
    }
}

/// A hash in progress (cloned to fork it).
#[derive(Clone)]
enum State {
    Sha256(Sha256),
    Sha384(Sha384),
}

impl State {
    fn update(&mut self, data: &[u8]) {
        match self {
            State::Sha256(state) => state.update(data),
            State::Sha384(state) => state.update(data),
        }
    }

    /// The hash (rustls's `Tag` holds any SHA-2 output).
    fn finish(self) -> Tag {
        match self {
            State::Sha256(state) => Tag::new(&state.finish()),
            State::Sha384(state) => Tag::new(&state.finish()),
        }
    }
}

/// The largest block (SHA-384's 128 bytes).
const MAX_BLOCK_LEN: usize = 128;

/// HMAC with one of the SHA-2 hashes ([`rustls::crypto::hmac::Hmac`]).
#[derive(Debug)]
pub(super) struct Sha2Hmac(pub(super) Sha2);

pub(super) static HMAC_SHA256: Sha2Hmac = Sha2Hmac(Sha2::Sha256);
pub(super) static HMAC_SHA384: Sha2Hmac = Sha2Hmac(Sha2::Sha384);

impl Hmac for Sha2Hmac {
    fn with_key(&self, key: &[u8]) -> Box<dyn Key> {
        Box::new(KeyedHmac::new(self.0, key))
    }

    fn hash_output_len(&self) -> usize {
        self.0.output_len()
    }
}

/// A key's padded states, each with its pad block already hashed.
struct KeyedHmac {
    hash: Sha2,
    inner: State,
    outer: State,
}

impl KeyedHmac {
    fn new(hash: Sha2, key: &[u8]) -> Self {
        let block_len = hash.block_len();
        // A key longer than a block is hashed first (RFC 2104, section 2).
        let hashed;
        let key = if key.len() > block_len {
            hashed = hash.digest(key);
            hashed.as_ref()
        } else {
            key
        };
        let mut pad = [0u8; MAX_BLOCK_LEN];
        let pad = &mut pad[..block_len];
        let mut state_with = |byte: u8| {
            pad.fill(byte);
            for (p, k) in pad.iter_mut().zip(key) {
                *p ^= k;
            }
            let mut state = hash.start();
            state.update(pad);
            state
        };
        let inner = state_with(0x36);
        let outer = state_with(0x5c);
        // The pads are the key in all but name: not left on the stack.
        pad.fill(0);
        Self { hash, inner, outer }
    }
}

impl Key for KeyedHmac {
    fn sign_concat(&self, first: &[u8], middle: &[&[u8]], last: &[u8]) -> Tag {
        let mut inner = self.inner.clone();
        inner.update(first);
        for part in middle {
            inner.update(part);
        }
        inner.update(last);
        let inner = inner.finish();
        let mut outer = self.outer.clone();
        outer.update(inner.as_ref());
        outer.finish()
    }

    fn tag_len(&self) -> usize {
        self.hash.output_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 4231's test cases 1, 2 and 6 (a key longer than SHA-256's block, hashed first).
    #[test]
    fn rfc_4231_vectors() {
        let cases: [(Vec<u8>, &[u8], &str, &str); 3] = [
            (
                vec![0x0b; 20],
                b"Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
                "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c\
                 faea9ea9076ede7f4af152e8b2fa9cb6",
            ),
            (
                b"Jefe".to_vec(),
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
                "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e\
                 8e2240ca5e69e2c78b3239ecfab21649",
            ),
            (
                vec![0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
                "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c6\
                 0c2ef6ab4030fe8296248df163f44952",
            ),
        ];
        for (key, data, sha256, sha384) in cases {
            let sha384 = sha384.replace(char::is_whitespace, "");
            for (hmac, expected) in [(&HMAC_SHA256, sha256), (&HMAC_SHA384, sha384.as_str())] {
                let tag = hmac.with_key(&key).sign(&[data]);
                assert_eq!(tag.as_ref(), hex(expected), "{:?}", hmac.0);
                // Split anywhere, the same MAC.
                let (a, b) = data.split_at(3);
                let tag = hmac.with_key(&key).sign_concat(a, &[b"", b], b"");
                assert_eq!(tag.as_ref(), hex(expected), "{:?}", hmac.0);
            }
        }
    }

    /// The same MACs as rustls-openssl's HMAC (OpenSSL's EVP HMAC) for keys of every length
    /// around the block sizes, one key reused for several messages. (OpenSSL refuses an empty
    /// HMAC key; its MAC is the well-known one.)
    #[test]
    fn tags_equal_openssls_evp_hmac() {
        assert_eq!(
            HMAC_SHA256.with_key(b"").sign(&[b""]).as_ref(),
            hex("b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        );
        for (ours, hash) in [
            (&HMAC_SHA256, openssl::hash::MessageDigest::sha256()),
            (&HMAC_SHA384, openssl::hash::MessageDigest::sha384()),
        ] {
            for key_len in [1usize, 32, 48, 63, 64, 65, 127, 128, 129, 300] {
                let key: Vec<u8> = (0..key_len).map(|i| (i * 7 + key_len) as u8).collect();
                let keyed = ours.with_key(&key);
                for message_len in [0usize, 1, 55, 56, 64, 111, 112, 128, 1000] {
                    let message: Vec<u8> = (0..message_len).map(|i| (i * 13) as u8).collect();
                    let pkey = openssl::pkey::PKey::hmac(&key).unwrap();
                    let mut signer = openssl::sign::Signer::new(hash, &pkey).unwrap();
                    signer.update(&message).unwrap();
                    let expected = signer.sign_to_vec().unwrap();
                    assert_eq!(
                        keyed.sign(&[&message]).as_ref(),
                        expected,
                        "{:?} key {key_len} message {message_len}",
                        ours.0
                    );
                }
                assert_eq!(keyed.tag_len(), ours.hash_output_len());
            }
        }
    }
}
