//! The TLS port's certificate as `explain` reports it: what the `--cert` and `--key` files
//! hold (the key's algorithm and size, the leaf's expiry), since when (the files' change
//! times), and whether this build serves with the pair, decided by the same loader the server
//! starts and reloads with. Reads the two files; serves nothing.

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::report::CertificateReport;
use crate::mcn::desired::rfc3339_seconds;
use crate::server::tls::{key_kind, leaf_not_after_unix, load_certificate, TlsPolicy};

/// The report of the pair `cert`/`key` under `policy`.
pub fn report(cert: &Path, key: &Path, policy: &TlsPolicy) -> CertificateReport {
    let changed = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|meta| meta.modified())
            .ok()
            .map(rfc3339_seconds)
    };
    let key_kind = std::fs::read(key)
        .ok()
        .and_then(|pem| PrivateKeyDer::from_pem_slice(&pem).ok())
        .and_then(|der| key_kind::of_private_key(&der))
        .map(|kind| kind.to_string());
    let not_after = std::fs::read(cert)
        .ok()
        .and_then(|pem| CertificateDer::from_pem_slice(&pem).ok())
        .and_then(|leaf| leaf_not_after_unix(&leaf).ok())
        .and_then(|secs| u64::try_from(secs).ok())
        .map(|secs| rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)));
    CertificateReport {
        cert_file: cert.display().to_string(),
        key_file: key.display().to_string(),
        key: key_kind,
        not_after,
        cert_changed: changed(cert),
        key_changed: changed(key),
        refused: load_certificate(cert, key, policy)
            .err()
            .map(|error| error.to_string()),
    }
}

/// One line for the text report.
pub fn text(report: &CertificateReport) -> String {
    let what = match (&report.key, &report.not_after) {
        (Some(key), Some(until)) => format!("{key}, valid until {until}"),
        (Some(key), None) => key.clone(),
        (None, Some(until)) => format!("valid until {until}"),
        (None, None) => "unreadable here".to_owned(),
    };
    let since = match (&report.cert_changed, &report.key_changed) {
        (Some(cert), Some(key)) if cert == key => format!("; files changed {cert}"),
        (Some(cert), Some(key)) => format!("; certificate changed {cert}, key {key}"),
        _ => String::new(),
    };
    let verdict = match &report.refused {
        None => "this build serves with it".to_owned(),
        Some(why) => format!("REFUSED: {why}"),
    };
    format!(
        "{} with {} ({what}{since})\n{verdict}",
        report.cert_file, report.key_file
    )
}
