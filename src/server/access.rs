//! Optional access control for `/config/` (off by default, so the default stays drop-in):
//! `--allowed-source-cidrs` limits which client addresses may fetch configs, and
//! `--require-token-file` requires `Authorization: Bearer <token>` (Ignition pointer configs can
//! send it through `httpHeaders`). `/healthz` stays open: load balancers probe it and it
//! reveals nothing. The config handler asks [`AccessPolicy::check`] first; a denial answers 403
//! with an empty body, is logged without the token, and is counted with every other answer.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::HeaderValue;
use subtle::ConstantTimeEq as _;

/// Why an access setting (`--allowed-source-cidrs`, `--require-token-file`) is unusable.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("{0:?} is not an IP address or CIDR")]
    NotAnAddress(String),
    #[error("{0:?} has an invalid prefix length")]
    InvalidPrefix(String),
    #[error("{}: {source}", path.display())]
    ReadToken {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the token file is not UTF-8")]
    TokenNotUtf8,
    #[error("the token file is empty")]
    TokenEmpty,
}

impl AccessError {
    /// A short label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotAnAddress(_) => "not_an_address",
            Self::InvalidPrefix(_) => "invalid_prefix",
            Self::ReadToken { .. } => "read_token",
            Self::TokenNotUtf8 => "token_not_utf8",
            Self::TokenEmpty => "token_empty",
        }
    }
}

/// An IPv4 or IPv6 network in CIDR notation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parse `a.b.c.d/n`, `x:y::/n`, or a bare address (a single host).
    pub fn parse(text: &str) -> Result<Cidr, AccessError> {
        let text = text.trim();
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address
            .parse()
            .map_err(|_| AccessError::NotAnAddress(text.to_owned()))?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| AccessError::InvalidPrefix(text.to_owned()))?,
        };
        Ok(Cidr { network, prefix })
    }

    /// Whether `address` is inside this network. IPv4-mapped IPv6 addresses count as IPv4, and
    /// an IPv6 network holds an IPv4 address when it holds its mapped form, so that a network
    /// written as `::ffff:10.0.0.0/104` holds `10.1.2.3` whichever way the client appears.
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = match (self.network, address) {
            (IpAddr::V6(_), IpAddr::V4(v4)) => IpAddr::V6(v4.to_ipv6_mapped()),
            (IpAddr::V4(_), IpAddr::V6(v6)) => {
                v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(address)
            }
            _ => address,
        };
        match (self.network, address) {
            (IpAddr::V4(net), IpAddr::V4(addr)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(addr) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(addr)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(addr) & mask
            }
            _ => false,
        }
    }
}

/// Who may fetch configs. The default allows everyone, as the original.
#[derive(Clone, Debug, Default)]
pub struct AccessPolicy {
    /// Empty: any source.
    allowed_sources: Vec<Cidr>,
    /// `None`: no token required.
    token: Option<Arc<[u8]>>,
}

/// Why a request was refused (a label for logs; never contains the token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denial {
    SourceNotAllowed,
    MissingToken,
    WrongToken,
}

impl Denial {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SourceNotAllowed => "source_not_allowed",
            Self::MissingToken => "missing_token",
            Self::WrongToken => "wrong_token",
        }
    }
}

impl AccessPolicy {
    /// From `--allowed-source-cidrs` values and the `--require-token-file` contents.
    pub fn new(
        allowed_sources: Vec<Cidr>,
        token: Option<Vec<u8>>,
    ) -> Result<AccessPolicy, AccessError> {
        let token = match token {
            None => None,
            Some(bytes) => {
                let trimmed = String::from_utf8(bytes)
                    .map_err(|_| AccessError::TokenNotUtf8)?
                    .trim()
                    .to_string();
                if trimmed.is_empty() {
                    return Err(AccessError::TokenEmpty);
                }
                Some(Arc::from(trimmed.into_bytes()))
            }
        };
        Ok(AccessPolicy {
            allowed_sources,
            token,
        })
    }

    /// Read the token file for `--require-token-file`.
    pub fn read_token(path: &Path) -> Result<Vec<u8>, AccessError> {
        std::fs::read(path).map_err(|source| AccessError::ReadToken {
            path: path.to_owned(),
            source,
        })
    }

    /// Whether any restriction is configured.
    pub fn is_restricted(&self) -> bool {
        !self.allowed_sources.is_empty() || self.token.is_some()
    }

    /// Decide one request.
    pub fn check(
        &self,
        remote: Option<IpAddr>,
        authorization: Option<&HeaderValue>,
    ) -> Result<(), Denial> {
        if !self.allowed_sources.is_empty() {
            let allowed =
                remote.is_some_and(|ip| self.allowed_sources.iter().any(|cidr| cidr.contains(ip)));
            if !allowed {
                return Err(Denial::SourceNotAllowed);
            }
        }
        if let Some(expected) = &self.token {
            let presented = authorization
                .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "))
                .ok_or(Denial::MissingToken)?;
            // Constant time over the token's length; only the (public) length can leak.
            if !bool::from(presented.ct_eq(expected)) {
                return Err(Denial::WrongToken);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn cidrs_match_as_networks() {
        let net = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(net.contains("10.1.2.3".parse().unwrap()));
        assert!(!net.contains("11.0.0.1".parse().unwrap()));
        assert!(net.contains("::ffff:10.9.9.9".parse().unwrap()));
        assert!(Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert!(Cidr::parse("fd00::/8")
            .unwrap()
            .contains("fd12::1".parse().unwrap()));
        assert!(!Cidr::parse("fd00::/8")
            .unwrap()
            .contains("10.0.0.1".parse().unwrap()));
        assert!(Cidr::parse("192.168.1.7")
            .unwrap()
            .contains("192.168.1.7".parse().unwrap()));
        // Found by fuzzing (token_file target): an IPv4-mapped network held nothing, since
        // the client's mapped address was compared as IPv4 against an IPv6 network.
        let mapped = Cidr::parse("::ffff:10.0.0.0/104").unwrap();
        assert!(mapped.contains("10.1.2.3".parse().unwrap()));
        assert!(mapped.contains("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!mapped.contains("11.0.0.1".parse().unwrap()));
        assert!(!mapped.contains("fd00::1".parse().unwrap()));
        assert!(!Cidr::parse("fd00::/8")
            .unwrap()
            .contains("::ffff:10.0.0.1".parse().unwrap()));
        for bad in ["10.0.0.0/33", "nonsense", "10.0.0.0/x", "::/129", ""] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn default_policy_allows_everything() {
        assert_eq!(AccessPolicy::default().check(None, None), Ok(()));
    }

    #[test]
    fn source_and_token_rules() {
        let policy = AccessPolicy::new(
            vec![Cidr::parse("127.0.0.0/8").unwrap()],
            Some(b"s3cret\n".to_vec()),
        )
        .unwrap();
        let good = HeaderValue::from_static("Bearer s3cret");
        assert_eq!(policy.check(ip("127.0.0.1"), Some(&good)), Ok(()));
        assert_eq!(
            policy.check(ip("192.0.2.1"), Some(&good)),
            Err(Denial::SourceNotAllowed)
        );
        assert_eq!(
            policy.check(ip("127.0.0.1"), None),
            Err(Denial::MissingToken)
        );
        assert_eq!(
            policy.check(
                ip("127.0.0.1"),
                Some(&HeaderValue::from_static("Basic s3cret"))
            ),
            Err(Denial::MissingToken)
        );
        assert_eq!(
            policy.check(
                ip("127.0.0.1"),
                Some(&HeaderValue::from_static("Bearer s3cre"))
            ),
            Err(Denial::WrongToken)
        );
        assert_eq!(
            policy.check(
                ip("127.0.0.1"),
                Some(&HeaderValue::from_static("Bearer s3cret2"))
            ),
            Err(Denial::WrongToken)
        );
        assert!(AccessPolicy::new(vec![], Some(b"  \n".to_vec())).is_err());
    }
}
