//! Request targets and pool paths. The input is a request target as a client sends it: it goes
//! through `http::Uri` (what hyper does with the request line) to the path, and, when it is
//! UTF-8, to `server::pool_path::parse` directly as well.
//!
//! Properties: the parse is deterministic; a path is `Malformed` exactly when it is not valid
//! percent-encoded UTF-8 (Go's `PathUnescape`, checked by an independent decoder here); a pool
//! is the `path.Base` of the decoded path and is always a DNS-1123 subdomain, so it can neither
//! contain `/` nor be `.` or `..`; `traversal` is set exactly when a decoded segment is `.` or
//! `..`; and percent-decoding round-trips: re-encoding the decoded path (every byte escaped, or
//! only the unsafe ones) answers the same, and a pool name percent-encoded under `/config/`
//! names that pool.

use machine_config_server::server::pool_path::{self, PoolPathError, PoolRequest};

pub fn check(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        check_path(text);
    }
    if let Ok(uri) = http::Uri::try_from(data) {
        check_path(uri.path());
    }
}

fn check_path(path: &str) {
    let parsed = pool_path::parse(path);
    assert_eq!(parsed, pool_path::parse(path), "parse is deterministic");
    let decoded = unescape(path);
    let Some(decoded) = decoded else {
        assert_eq!(
            parsed,
            Err(PoolPathError::Malformed),
            "{path:?} is not valid percent-encoded UTF-8"
        );
        return;
    };
    let base = go_path_base(&decoded);
    match &parsed {
        Err(PoolPathError::Malformed) => {
            panic!("{path:?} decodes to {decoded:?} but was called malformed")
        }
        Err(PoolPathError::InvalidName(shown)) => {
            assert!(!is_dns1123_subdomain(base), "{base:?} was refused");
            assert!(
                shown.chars().count() <= 65,
                "the error quotes at most 64 characters"
            );
        }
        Ok(PoolRequest { pool, traversal }) => {
            assert_eq!(pool, base, "the pool is path.Base of {decoded:?}");
            assert!(is_dns1123_subdomain(pool), "{pool:?} is not a valid name");
            assert!(!pool.contains('/') && pool != "." && pool != "..");
            let climbs = decoded.split('/').any(|s| s == "." || s == "..");
            assert_eq!(*traversal, climbs, "traversal flag of {decoded:?}");
            let encoded: String = pool.bytes().map(|b| format!("%{b:02X}")).collect();
            assert_eq!(
                pool_path::parse(&format!("/config/{encoded}")),
                Ok(PoolRequest {
                    pool: pool.clone(),
                    traversal: false
                }),
                "{pool:?} percent-encoded under /config/"
            );
        }
    }
    // Percent-decoding round-trips: the same answer for the decoded path written again.
    let every_byte: String = decoded.bytes().map(|b| format!("%{b:02x}")).collect();
    assert_eq!(
        pool_path::parse(&every_byte),
        parsed,
        "{path:?} fully escaped"
    );
    let minimal: String = decoded
        .bytes()
        .map(|b| match b {
            b'%' => "%25".to_string(),
            b if b.is_ascii_graphic() => char::from(b).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect();
    assert_eq!(
        pool_path::parse(&minimal),
        parsed,
        "{path:?} minimally escaped"
    );
}

/// Go's `url.PathUnescape` followed by a UTF-8 check: `%XX` with two hex digits, anything else
/// as is. Written independently of the server's decoder.
fn unescape(path: &str) -> Option<String> {
    let mut out = Vec::new();
    let mut rest = path.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'%' {
            let hex = tail.get(..2)?;
            let text = std::str::from_utf8(hex).ok()?;
            if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(text, 16).ok()?);
            rest = &tail[2..];
        } else {
            out.push(first);
            rest = tail;
        }
    }
    String::from_utf8(out).ok()
}

/// Go's `path.Base`.
fn go_path_base(path: &str) -> &str {
    if path.is_empty() {
        return ".";
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// Kubernetes' `IsDNS1123Subdomain`: at most 253 characters, dot-separated labels of
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns1123_subdomain(name: &str) -> bool {
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
            }
            _ => false,
        }
    };
    !name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)
}
