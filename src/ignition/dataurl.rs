//! RFC 2397 data URLs (placeholder; replaced by the ignition-engine work).

/// `data:,` + percent-encoding exactly as Go's `dataurl.Escape`.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::from("data:,");
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Why a data URL could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("invalid data URL")]
pub struct DataUrlError;

/// Decode a `data:` URL (placeholder: percent form only).
pub fn decode(url: &str) -> Result<Vec<u8>, DataUrlError> {
    let data = url.strip_prefix("data:").ok_or(DataUrlError)?;
    let (_, payload) = data.split_once(',').ok_or(DataUrlError)?;
    Ok(percent_encoding::percent_decode_str(payload).collect())
}
