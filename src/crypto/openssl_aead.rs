//! TLS 1.3 record protection for the OpenSSL backend: OpenSSL's AEADs (the FIPS provider's in
//! FIPS mode, as before), with one OpenSSL cipher context per direction of a connection, keyed
//! once, instead of a new context keyed again for every record.
//!
//! Why: rustls-openssl creates and keys a fresh `EVP_CIPHER_CTX` for each record, so every
//! 16 KiB record of a config pays the AES key schedule and GCM table set-up again, and OpenSSL
//! 3.0 adds its per-context bookkeeping; a 0.4 MiB config is about 25 records. Here the context
//! is keyed when rustls installs the traffic key and each record only sets its nonce
//! (`EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, nonce)`, OpenSSL's documented way to start a new
//! message under the same key). The computation is OpenSSL's AEAD, checked against
//! rustls-openssl's record for record in the tests below. Must not touch: anything but TLS 1.3
//! record protection (TLS 1.2 suites, QUIC and key export stay rustls-openssl's).

use std::sync::OnceLock;

use openssl::cipher::{Cipher, CipherRef};
use openssl::cipher_ctx::CipherCtx;
use openssl::error::ErrorStack;
use rustls::crypto::cipher::{
    make_tls13_aad, AeadKey, InboundOpaqueMessage, InboundPlainMessage, Iv, MessageDecrypter,
    MessageEncrypter, Nonce, OutboundOpaqueMessage, OutboundPlainMessage, PrefixedPayload,
    Tls13AeadAlgorithm, UnsupportedOperationError,
};
use rustls::{CipherSuite, ConnectionTrafficSecrets, ContentType, Error, ProtocolVersion};

/// The tag length of every TLS 1.3 AEAD.
const TAG_LEN: usize = 16;

/// A TLS 1.3 AEAD by its OpenSSL name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AeadCipher {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
}

impl AeadCipher {
    fn openssl_name(self) -> &'static str {
        match self {
            AeadCipher::Aes128Gcm => "AES-128-GCM",
            AeadCipher::Aes256Gcm => "AES-256-GCM",
            AeadCipher::ChaCha20Poly1305 => "ChaCha20-Poly1305",
        }
    }

    /// The cipher, fetched once per process (after FIPS mode, if any, set the default
    /// properties: the first handshake comes after start-up).
    fn load(self) -> Result<&'static CipherRef, ErrorStack> {
        static FETCHED: [OnceLock<Result<Cipher, ErrorStack>>; 3] =
            [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        let slot = &FETCHED[self as usize];
        match slot.get_or_init(|| Cipher::fetch(None, self.openssl_name(), None)) {
            Ok(cipher) => Ok(cipher),
            Err(e) => Err(e.clone()),
        }
    }

    /// The AEAD a TLS 1.3 suite names.
    pub(super) fn of(suite: CipherSuite) -> Option<AeadCipher> {
        match suite {
            CipherSuite::TLS13_AES_128_GCM_SHA256 => Some(AeadCipher::Aes128Gcm),
            CipherSuite::TLS13_AES_256_GCM_SHA384 => Some(AeadCipher::Aes256Gcm),
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => Some(AeadCipher::ChaCha20Poly1305),
            _ => None,
        }
    }
}

/// A suite's AEAD with keyed contexts; `original` (rustls-openssl's) answers what this does not
/// change, and takes over if OpenSSL refuses to key a context (it reports the same failure).
pub(super) struct KeyedContextAead {
    cipher: AeadCipher,
    original: &'static dyn Tls13AeadAlgorithm,
}

impl KeyedContextAead {
    pub(super) fn new(cipher: AeadCipher, original: &'static dyn Tls13AeadAlgorithm) -> Self {
        KeyedContextAead { cipher, original }
    }
}

/// One direction of one connection: its keyed context and static IV.
struct KeyedRecords {
    ctx: CipherCtx,
    iv: Iv,
}

impl KeyedRecords {
    fn new(cipher: AeadCipher, key: &AeadKey, iv: Iv, encrypt: bool) -> Result<Self, ErrorStack> {
        let cipher = cipher.load()?;
        let mut ctx = CipherCtx::new()?;
        if encrypt {
            ctx.encrypt_init(Some(cipher), Some(key.as_ref()), None)?;
        } else {
            ctx.decrypt_init(Some(cipher), Some(key.as_ref()), None)?;
        }
        Ok(KeyedRecords { ctx, iv })
    }

    fn seal(&mut self, seq: u64, aad: &[u8], data: &mut [u8]) -> Result<[u8; TAG_LEN], ErrorStack> {
        let nonce = Nonce::new(&self.iv, seq).0;
        self.ctx.encrypt_init(None, None, Some(&nonce))?;
        self.ctx.cipher_update(aad, None)?;
        let len = data.len();
        self.ctx.cipher_update_inplace(data, len)?;
        self.ctx.cipher_final(&mut [])?;
        let mut tag = [0u8; TAG_LEN];
        self.ctx.tag(&mut tag)?;
        Ok(tag)
    }

    /// Decrypts `ciphertext` in place; Err when the tag does not match (or OpenSSL fails).
    fn open(
        &mut self,
        seq: u64,
        aad: &[u8],
        ciphertext: &mut [u8],
        tag: &[u8],
    ) -> Result<(), ErrorStack> {
        let nonce = Nonce::new(&self.iv, seq).0;
        self.ctx.decrypt_init(None, None, Some(&nonce))?;
        self.ctx.cipher_update(aad, None)?;
        self.ctx.set_tag(tag)?;
        let len = ciphertext.len();
        self.ctx.cipher_update_inplace(ciphertext, len)?;
        self.ctx.cipher_final(&mut [])?;
        Ok(())
    }
}

impl Tls13AeadAlgorithm for KeyedContextAead {
    fn encrypter(&self, key: AeadKey, iv: Iv) -> Box<dyn MessageEncrypter> {
        match KeyedRecords::new(self.cipher, &key, Iv::copy(iv.as_ref()), true) {
            Ok(records) => Box::new(records),
            Err(_) => self.original.encrypter(key, iv),
        }
    }

    fn decrypter(&self, key: AeadKey, iv: Iv) -> Box<dyn MessageDecrypter> {
        match KeyedRecords::new(self.cipher, &key, Iv::copy(iv.as_ref()), false) {
            Ok(records) => Box::new(records),
            Err(_) => self.original.decrypter(key, iv),
        }
    }

    fn key_len(&self) -> usize {
        self.original.key_len()
    }

    fn extract_keys(
        &self,
        key: AeadKey,
        iv: Iv,
    ) -> Result<ConnectionTrafficSecrets, UnsupportedOperationError> {
        self.original.extract_keys(key, iv)
    }

    fn fips(&self) -> bool {
        self.original.fips()
    }
}

impl MessageEncrypter for KeyedRecords {
    fn encrypt(
        &mut self,
        msg: OutboundPlainMessage<'_>,
        seq: u64,
    ) -> Result<OutboundOpaqueMessage, Error> {
        let total_len = self.encrypted_payload_len(msg.payload.len());
        let mut payload = PrefixedPayload::with_capacity(total_len);
        payload.extend_from_chunks(&msg.payload);
        payload.extend_from_slice(&msg.typ.to_array());
        let aad = make_tls13_aad(total_len);
        let tag = self
            .seal(seq, &aad, payload.as_mut())
            .map_err(|e| Error::General(format!("OpenSSL error: {e}")))?;
        payload.extend_from_slice(&tag);
        // TLS 1.3 records carry the TLS 1.2 legacy version (RFC 8446, section 5.1).
        Ok(OutboundOpaqueMessage::new(
            ContentType::ApplicationData,
            ProtocolVersion::TLSv1_2,
            payload,
        ))
    }

    fn encrypted_payload_len(&self, payload_len: usize) -> usize {
        payload_len + 1 + TAG_LEN
    }
}

impl MessageDecrypter for KeyedRecords {
    fn decrypt<'a>(
        &mut self,
        mut msg: InboundOpaqueMessage<'a>,
        seq: u64,
    ) -> Result<InboundPlainMessage<'a>, Error> {
        let payload = &mut msg.payload;
        if payload.len() < TAG_LEN {
            return Err(Error::DecryptError);
        }
        let aad = make_tls13_aad(payload.len());
        let plaintext_len = payload.len() - TAG_LEN;
        let (ciphertext, tag) = payload.split_at_mut(plaintext_len);
        self.open(seq, &aad, ciphertext, tag)
            .map_err(|_| Error::DecryptError)?;
        payload.truncate(plaintext_len);
        msg.into_tls13_unpadded_message()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::crypto::cipher::OutboundChunks;

    fn originals() -> Vec<(CipherSuite, &'static dyn Tls13AeadAlgorithm)> {
        rustls_openssl::ALL_CIPHER_SUITES
            .iter()
            .filter_map(|suite| match suite {
                rustls::SupportedCipherSuite::Tls13(suite) => {
                    Some((suite.common.suite, suite.aead_alg))
                }
                rustls::SupportedCipherSuite::Tls12(_) => None,
            })
            .collect()
    }

    /// A 32-byte key: AES-128 reads its first 16 bytes, in both implementations.
    fn key_for(seed: u8) -> AeadKey {
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = seed.wrapping_mul(31).wrapping_add(i as u8);
        }
        AeadKey::from(key)
    }

    /// Record for record the same bytes as rustls-openssl's, in both directions, and a record
    /// with a flipped bit is refused.
    #[test]
    fn records_equal_rustls_openssls() {
        let originals = originals();
        assert_eq!(originals.len(), 3, "three TLS 1.3 suites");
        for (suite, original) in originals {
            let cipher = AeadCipher::of(suite).expect("a TLS 1.3 AEAD");
            let ours = KeyedContextAead::new(cipher, original);
            for seed in 0u8..3 {
                let iv = || Iv::new([seed; 12]);
                let mut our_sealer = ours.encrypter(key_for(seed), iv());
                let mut their_sealer = original.encrypter(key_for(seed), iv());
                let mut our_opener = ours.decrypter(key_for(seed), iv());
                for (seq, len) in [(0u64, 0usize), (1, 1), (2, 300), (7, 16384), (8, 5)] {
                    let data: Vec<u8> = (0..len).map(|i| (i as u8) ^ seed).collect();
                    let message = || OutboundPlainMessage {
                        typ: ContentType::ApplicationData,
                        version: ProtocolVersion::TLSv1_2,
                        payload: OutboundChunks::Single(&data),
                    };
                    let mine = our_sealer.encrypt(message(), seq).unwrap().encode();
                    let theirs = their_sealer.encrypt(message(), seq).unwrap().encode();
                    assert_eq!(mine, theirs, "{cipher:?} seq {seq} len {len}");

                    let mut wire = mine.clone();
                    let inbound = InboundOpaqueMessage::new(
                        ContentType::ApplicationData,
                        ProtocolVersion::TLSv1_2,
                        &mut wire[5..],
                    );
                    let plain = our_opener.decrypt(inbound, seq).unwrap();
                    assert_eq!(plain.payload, &data[..]);

                    let mut tampered = mine.clone();
                    let last = tampered.len() - 1;
                    tampered[last] ^= 1;
                    let inbound = InboundOpaqueMessage::new(
                        ContentType::ApplicationData,
                        ProtocolVersion::TLSv1_2,
                        &mut tampered[5..],
                    );
                    assert!(matches!(
                        our_opener.decrypt(inbound, seq),
                        Err(Error::DecryptError)
                    ));
                }
            }
        }
    }
}
