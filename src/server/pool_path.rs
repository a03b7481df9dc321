//! Pool names from request paths.
//!
//! The original takes `path.Base` of the percent-decoded path: trailing slashes dropped, the last
//! segment wins (`/config/master/` -> `master`, `/config/a/b` -> `b`, `/config/` -> `config`,
//! `/config/..%2fmaster` -> `master`). We keep that, and answer paths that are not a plausible
//! pool name with a clean 4xx instead of passing them on: a pool name is only ever a map key
//! here, never a file path, but a name that cannot exist should not look like a retryable 500.

use http::StatusCode;

/// Longest Kubernetes object name.
const MAX_NAME_LEN: usize = 253;

/// Why a path does not name a pool.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolPathError {
    /// Bad percent-escapes or a decoded path that is not UTF-8 (400, as Go's server does).
    #[error("path is not valid percent-encoded UTF-8")]
    Malformed,
    /// The last segment cannot be a Kubernetes object name (404: no such pool can exist).
    #[error("{0:?} is not a valid pool name")]
    InvalidName(String),
}

impl PoolPathError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Malformed => StatusCode::BAD_REQUEST,
            Self::InvalidName(_) => StatusCode::NOT_FOUND,
        }
    }
}

/// The pool a `/config/...` path asks for.
pub fn pool_from_path(raw_path: &str) -> Result<String, PoolPathError> {
    parse(raw_path).map(|request| request.pool)
}

/// A parsed `/config/...` path.
#[derive(Debug, PartialEq, Eq)]
pub struct PoolRequest {
    pub pool: String,
    /// The decoded path climbs directories (`..`/`.` segments, e.g. `/config/..%2f..%2fetc`).
    /// No Ignition client sends that, so when such a path does not resolve to a servable pool
    /// the answer is a plain 404 rather than the retryable 500 of an unknown pool.
    pub traversal: bool,
}

/// Parse a `/config/...` path.
pub fn parse(raw_path: &str) -> Result<PoolRequest, PoolPathError> {
    let decoded = decode(raw_path)?;
    let traversal = decoded
        .split('/')
        .any(|segment| segment == ".." || segment == ".");
    let base = path_base(&decoded);
    if is_valid_name(base) {
        Ok(PoolRequest {
            pool: base.to_string(),
            traversal,
        })
    } else {
        let mut shown: String = base.chars().take(64).collect();
        if base.len() > shown.len() {
            shown.push('…');
        }
        Err(PoolPathError::InvalidName(shown))
    }
}

fn decode(raw_path: &str) -> Result<String, PoolPathError> {
    let bytes = raw_path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            // Two hex digits, as Go's unescape requires (`from_str_radix` alone would also
            // take a sign: `%+2`).
            let hex = bytes.get(i + 1..i + 3).ok_or(PoolPathError::Malformed)?;
            let (Some(high), Some(low)) = (hex_digit(hex[0]), hex_digit(hex[1])) else {
                return Err(PoolPathError::Malformed);
            };
            out.push((high << 4) | low);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| PoolPathError::Malformed)
}

fn hex_digit(byte: u8) -> Option<u8> {
    char::from(byte)
        .to_digit(16)
        .and_then(|digit| u8::try_from(digit).ok())
}

/// Go's `path.Base`: trailing slashes removed, then the part after the last slash.
fn path_base(path: &str) -> &str {
    if path.is_empty() {
        return ".";
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    match trimmed.rfind('/') {
        Some(i) => &trimmed[i + 1..],
        None => trimmed,
    }
}

/// A DNS-1123 subdomain, what Kubernetes requires of a MachineConfigPool name.
fn is_valid_name(name: &str) -> bool {
    name.len() <= MAX_NAME_LEN
        && !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_go_path_base() {
        assert_eq!(pool_from_path("/config/master").unwrap(), "master");
        assert_eq!(pool_from_path("/config/master/").unwrap(), "master");
        assert_eq!(pool_from_path("/config/master//").unwrap(), "master");
        assert_eq!(pool_from_path("/config/").unwrap(), "config");
        assert_eq!(pool_from_path("/config/a/b").unwrap(), "b");
        assert_eq!(pool_from_path("/config/..%2fmaster").unwrap(), "master");
        assert_eq!(pool_from_path("/config/..%2F..%2Fetc").unwrap(), "etc");
        assert_eq!(
            pool_from_path("/config/worker.custom").unwrap(),
            "worker.custom"
        );
    }

    #[test]
    fn flags_traversal() {
        assert!(parse("/config/..%2f..%2fetc").unwrap().traversal);
        assert!(parse("/config/./master").unwrap().traversal);
        assert!(!parse("/config/master").unwrap().traversal);
        assert!(!parse("/config/a/master/").unwrap().traversal);
    }

    #[test]
    fn rejects_names_that_cannot_be_pools() {
        for path in [
            "/config/.",
            "/config/..",
            "/config/%00",
            "/config/mas%00ter",
            "/config/Master",
            "/config/a%20b",
            "/config/-a",
        ] {
            assert!(
                matches!(pool_from_path(path), Err(PoolPathError::InvalidName(_))),
                "{path}"
            );
        }
        let long = format!("/config/{}", "a".repeat(254));
        assert_eq!(
            pool_from_path(&long).unwrap_err().status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            pool_from_path(&format!("/config/{}", "a".repeat(253)))
                .unwrap()
                .len(),
            253
        );
    }

    #[test]
    fn malformed_escapes_are_bad_requests() {
        for path in [
            "/config/%zz",
            "/config/%",
            "/config/%4",
            "/config/%ff",
            "/config/%C3%28",
            // Found by fuzzing (pool_path target): a sign was taken as part of the escape.
            "/config/%+2fc",
            "/config/a%-1",
        ] {
            assert_eq!(
                pool_from_path(path),
                Err(PoolPathError::Malformed),
                "{path}"
            );
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any path, bytes or percent-escapes: an answer, never a panic, and a pool name that is
        /// always a plain Kubernetes name (no separators, no traversal).
        #[test]
        fn never_panics_and_names_are_plain(path in "/config/[a-z0-9%./\\-_A-Z\u{0}-\u{7f}é]{0,80}") {
            if let Ok(request) = parse(&path) {
                prop_assert!(is_valid_name(&request.pool));
                prop_assert!(!request.pool.contains('/'));
                prop_assert!(request.pool != "." && request.pool != "..");
            }
        }

        /// Percent-encoding a valid name and putting it anywhere after `/config/` finds it.
        #[test]
        fn encoded_names_round_trip(name in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", prefix in "(/[a-z]{1,5}){0,3}") {
            let encoded: String = name.bytes().map(|b| format!("%{b:02X}")).collect();
            let path = format!("/config{prefix}/{encoded}/");
            prop_assert_eq!(parse(&path).map(|r| r.pool), Ok(name));
        }
    }
}
