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
