//! Accept-header negotiation (placeholder; replaced by the ignition-engine work).

use super::SpecVersion;

/// The Accept header named an Ignition version this server cannot serve (HTTP 400).
#[derive(Debug, thiserror::Error)]
#[error("unsupported Ignition version in Accept header: {header}")]
pub struct UnsupportedVersion {
    pub header: String,
}

/// Pick the spec version to serve for an `Accept` header (`None` when absent).
pub fn negotiate(header: Option<&str>) -> Result<SpecVersion, UnsupportedVersion> {
    let _ = header;
    Ok(SpecVersion::V3_5)
}
