//! The OpenSSL backend: rustls over the system's `libcrypto.so.3` through the `rustls-openssl`
//! provider, so every TLS primitive (key exchange, signatures, AEAD, hashes, HKDF and the TLS 1.2
//! PRF, randomness) is OpenSSL's. In FIPS mode it loads OpenSSL's FIPS provider and makes
//! `fips=yes` the default property, so any algorithm the FIPS provider does not have fails to
//! fetch instead of coming from another provider. Must not touch: anything but OpenSSL's
//! providers and rustls-openssl.

use std::sync::Arc;

use openssl::provider::Provider;
use rustls::crypto::{CryptoProvider, SecureRandom as _};
use rustls::server::ProducesTickets;

/// The provider's name in logs and metrics.
pub(super) const NAME: &str = "openssl";

/// The OpenSSL the process runs with (the shared library's version, not the headers').
pub(super) fn library() -> String {
    openssl::version::version().to_owned()
}

/// rustls-openssl's key loader (OpenSSL decodes the key and signs with it).
pub(super) fn key_provider() -> &'static dyn rustls::crypto::KeyProvider {
    &rustls_openssl::KeyProvider
}

/// rustls-openssl's provider: the suites and default key exchange groups this OpenSSL offers at
/// run time (ChaCha20 and X25519MLKEM768 only where the loaded providers have them).
pub(super) fn default_provider() -> CryptoProvider {
    let mut provider = rustls_openssl::default_provider();
    let schedule = super::openssl_hkdf::KeySchedule::for_process();
    for suite in &mut provider.cipher_suites {
        *suite = super::openssl_hkdf::with_tls13_fast_paths(*suite, schedule);
    }
    provider
}

/// Every key exchange group this OpenSSL offers (P-521 included, which is not a default).
pub(super) fn all_kx_groups() -> Vec<&'static dyn rustls::crypto::SupportedKxGroup> {
    rustls_openssl::kx_group::available_groups()
}

/// No stateless tickets: rustls-openssl has no ticket encrypter, and one written here would be
/// cryptography outside the provider. Sessions resume from the server's session cache instead
/// (TLS 1.2 session IDs, TLS 1.3 tickets that name a cache entry).
pub(super) fn ticketer() -> Result<Option<Arc<dyn ProducesTickets>>, rustls::Error> {
    Ok(None)
}

/// The loaded FIPS and base providers; they stay loaded while this is alive (for the process).
pub(super) struct FipsModule {
    _fips: Provider,
    _base: Provider,
}

impl std::fmt::Debug for FipsModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FipsModule")
    }
}

/// Loads OpenSSL's FIPS provider (its self-tests run on load) and the base provider (key
/// decoding), then requires `fips=yes` of every algorithm fetched from now on.
pub(super) fn enable_fips() -> Result<FipsModule, String> {
    let load = |name: &str, what: &str| {
        Provider::load(None, name).map_err(|error| {
            format!(
                "cannot load OpenSSL's {what} ({name}): {}",
                one_line(&error.to_string())
            )
        })
    };
    let fips = load("fips", "FIPS provider")?;
    let base = load("base", "base provider")?;
    // Sets the default properties to `fips=yes`. It loads the same two providers again (already
    // loaded above, so that cannot fail) and panics on an error, which only an allocation failure
    // could cause; the panic is caught so that even then the server stops with one line.
    std::panic::catch_unwind(rustls_openssl::fips::enable)
        .map_err(|_| "OpenSSL refused the default property fips=yes".to_owned())?;
    if !rustls_openssl::SecureRandom.fips() {
        return Err("the FIPS provider loaded, but OpenSSL does not report FIPS mode".to_owned());
    }
    Ok(FipsModule {
        _fips: fips,
        _base: base,
    })
}

/// OpenSSL error stacks can span lines; logs and the exit line need one.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
