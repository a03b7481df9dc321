//! The aws-lc-rs backend: rustls's `aws-lc-rs` crypto provider, AWS-LC compiled into the binary
//! (its build needs a C compiler, nothing else: no system library at run time). It signs with
//! every key the cluster's PKI configuration can issue (RSA 2048 to 8192 bits, ECDSA on P-256,
//! P-384 and P-521) and verifies chains of all of them, which ring, the backend before it, could
//! not (no P-521, RSA signing only up to 4096 bits). It is no FIPS 140-validated module in this
//! build (aws-lc-rs's `fips` feature would need CMake and Go to build), so it refuses FIPS mode.
//! Must not touch: anything but aws-lc-rs's provider.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::ProducesTickets;

/// The provider's name in logs and metrics.
pub(super) const NAME: &str = "aws-lc-rs";

/// What the crypto library is, for logs and metrics.
pub(super) fn library() -> String {
    "AWS-LC (aws-lc-rs, compiled in)".to_owned()
}

/// aws-lc-rs's provider: every suite and its default key exchange groups (X25519MLKEM768,
/// X25519, P-256, P-384).
pub(super) fn default_provider() -> CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}

/// aws-lc-rs's key loader.
pub(super) fn key_provider() -> &'static dyn rustls::crypto::KeyProvider {
    rustls::crypto::aws_lc_rs::default_provider().key_provider
}

/// Every key exchange group aws-lc-rs offers (P-521 included, which is not a default).
pub(super) fn all_kx_groups() -> Vec<&'static dyn rustls::crypto::SupportedKxGroup> {
    rustls::crypto::aws_lc_rs::ALL_KX_GROUPS.to_vec()
}

/// Stateless session tickets, encrypted by aws-lc-rs with keys rotated every six hours.
pub(super) fn ticketer() -> Result<Option<Arc<dyn ProducesTickets>>, rustls::Error> {
    rustls::crypto::aws_lc_rs::Ticketer::new().map(Some)
}

/// A FIPS module, which this build does not have (never constructed).
#[derive(Debug)]
pub(super) enum FipsModule {}

/// Why FIPS mode is impossible with this build.
pub(super) fn enable_fips() -> Result<FipsModule, String> {
    Err(
        "this build's TLS crypto is AWS-LC compiled in (aws-lc-rs), not a FIPS 140-validated \
         module here; FIPS mode needs the OpenSSL build (cargo feature `openssl`, as in the \
         container image)"
            .to_owned(),
    )
}
