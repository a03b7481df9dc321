//! The ring backend: rustls's `ring` crypto provider, compiled into the binary. Builds anywhere a
//! Rust toolchain does (no system library), and is no FIPS 140-validated module, so it refuses
//! FIPS mode. Must not touch: anything but ring's provider.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::ProducesTickets;

/// The provider's name in logs and metrics.
pub(super) const NAME: &str = "ring";

/// What the crypto library is, for logs and metrics.
pub(super) fn library() -> String {
    "ring (compiled in)".to_owned()
}

/// ring's provider: every suite and ring's key exchange groups (X25519, P-256, P-384).
pub(super) fn default_provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// ring's key loader.
pub(super) fn key_provider() -> &'static dyn rustls::crypto::KeyProvider {
    rustls::crypto::ring::default_provider().key_provider
}

/// Every key exchange group ring offers (its defaults are all it has).
pub(super) fn all_kx_groups() -> Vec<&'static dyn rustls::crypto::SupportedKxGroup> {
    rustls::crypto::ring::ALL_KX_GROUPS.to_vec()
}

/// Stateless session tickets, encrypted by ring with keys rotated every six hours.
pub(super) fn ticketer() -> Result<Option<Arc<dyn ProducesTickets>>, rustls::Error> {
    rustls::crypto::ring::Ticketer::new().map(Some)
}

/// A FIPS module, which this build does not have (never constructed).
#[derive(Debug)]
pub(super) enum FipsModule {}

/// Why FIPS mode is impossible with this build.
pub(super) fn enable_fips() -> Result<FipsModule, String> {
    Err(
        "this build's TLS crypto is ring, compiled in, which is not a FIPS 140-validated module; \
         FIPS mode needs the OpenSSL build (cargo feature `openssl`, as in the container image)"
            .to_owned(),
    )
}
