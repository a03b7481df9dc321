//! The `--require-token-file` token (`server::access::AccessPolicy::new`) and, line by line,
//! `--allowed-source-cidrs` values (`server::access::Cidr::parse`). The input is the file.
//!
//! Properties: the token is accepted exactly when it is UTF-8 with something left after
//! trimming whitespace; then a request must present exactly `Bearer <trimmed token>`: without
//! it the answer is `missing_token`, with another token `wrong_token`, with it allowed. A CIDR
//! that parses contains its own address.

use std::net::IpAddr;

use http::HeaderValue;
use machine_config_server::server::access::{AccessPolicy, Cidr, Denial};

pub fn check(data: &[u8]) {
    check_token(data);
    for line in String::from_utf8_lossy(data).lines() {
        check_cidr(line);
    }
}

fn check_token(data: &[u8]) {
    let policy = AccessPolicy::new(Vec::new(), Some(data.to_vec()));
    let trimmed = std::str::from_utf8(data).ok().map(str::trim);
    let Some(token) = trimmed.filter(|t| !t.is_empty()) else {
        assert!(
            policy.is_err(),
            "a token file that is not UTF-8 text or is blank is refused"
        );
        return;
    };
    let policy = policy.unwrap_or_else(|e| panic!("a text token is accepted: {e}"));
    assert!(policy.is_restricted());
    assert_eq!(policy.check(None, None), Err(Denial::MissingToken));
    let header = |text: &str| HeaderValue::from_bytes(text.as_bytes()).ok();
    if let Some(right) = header(&format!("Bearer {token}")) {
        assert_eq!(policy.check(None, Some(&right)), Ok(()), "the right token");
    }
    if let Some(wrong) = header(&format!("Bearer {token}x")) {
        assert_eq!(policy.check(None, Some(&wrong)), Err(Denial::WrongToken));
    }
    if let Some(basic) = header(&format!("Basic {token}")) {
        assert_eq!(policy.check(None, Some(&basic)), Err(Denial::MissingToken));
    }
}

fn check_cidr(line: &str) {
    let Ok(cidr) = Cidr::parse(line) else {
        return;
    };
    let address = line.trim().split('/').next().unwrap_or_default();
    let address: IpAddr = address.parse().expect("a parsed CIDR has an address");
    assert!(cidr.contains(address), "{line:?} contains its own address");
}
