//! The cluster's `Infrastructure` (`config.openshift.io/v1`, the object named `cluster`): only
//! what tells a booting machine where this server is, and the address upstream's PR #6124
//! derives from it for first-boot failure reports.
//!
//! Upstream (`pkg/server/server.go` `GetIgnitionHost` at 89aa74a52) takes the host of
//! `status.apiServerInternalURI` as Go's `net/url` parses it (`url.Parse`, then `Hostname()`),
//! joined with `:22623` by plain formatting (an IPv6 host stays unbracketed); on BareMetal,
//! OpenStack, oVirt and VSphere with `apiServerInternalIPs`, the first of those instead, joined
//! as `net.JoinHostPort` joins (IPv6 bracketed). The port is upstream's constant, not the
//! server's `--secure-port`. A URI Go refuses to parse gives no address. [`ignition_host`]
//! reproduces that, byte for byte, for every host Go can produce as UTF-8.
//!
//! Owns the data shape and that pure decision; no I/O.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machineconfig::Rest;

/// Name of the one Infrastructure object a cluster has.
pub const NAME: &str = "cluster";
/// API group of the Infrastructure kind.
pub const GROUP: &str = "config.openshift.io";
/// The port upstream joins to the host (its `server.SecurePort`, whatever the server listens
/// on).
pub const IGNITION_PORT: u16 = 22623;

/// `Infrastructure.spec`: not read; kept as it came.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "Infrastructure",
    status = "InfrastructureStatus"
)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct InfrastructureSpec {
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// `Infrastructure.status`: the internal API server URI and the platform's addresses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct InfrastructureStatus {
    /// `apiServerInternalURI` (Go's field `APIServerInternalURL`).
    #[serde(
        rename = "apiServerInternalURI",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_server_internal_uri: Option<String>,
    #[serde(
        rename = "platformStatus",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub platform_status: Option<PlatformStatus>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// `status.platformStatus`: the platform's type and, for the platforms that run their own
/// load balancer, its addresses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct PlatformStatus {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(rename = "baremetal", default, skip_serializing_if = "Option::is_none")]
    pub bare_metal: Option<InternalIps>,
    #[serde(rename = "openstack", default, skip_serializing_if = "Option::is_none")]
    pub open_stack: Option<InternalIps>,
    #[serde(rename = "ovirt", default, skip_serializing_if = "Option::is_none")]
    pub ovirt: Option<InternalIps>,
    #[serde(rename = "vsphere", default, skip_serializing_if = "Option::is_none")]
    pub vsphere: Option<InternalIps>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// A platform status's `apiServerInternalIPs` (the rest as it came).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct InternalIps {
    #[serde(
        rename = "apiServerInternalIPs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_server_internal_ips: Option<Vec<String>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: Rest,
}

/// Why no address comes of an Infrastructure's status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Go's `url.Parse` refuses `apiServerInternalURI`.
    #[error("status.apiServerInternalURI {uri:?}: {reason}")]
    Uri { uri: String, reason: &'static str },
    /// The host percent-decodes to bytes that are not UTF-8 (Go would serve them replaced).
    #[error("status.apiServerInternalURI {0:?}: the host is not UTF-8 once percent-decoded")]
    NotUtf8(String),
}

/// `host:port` of this server as upstream computes it from `status` (module docs): the string
/// that `https://` is put before.
pub fn ignition_host(status: &InfrastructureStatus) -> Result<String, HostError> {
    let uri = status
        .api_server_internal_uri
        .as_deref()
        .unwrap_or_default();
    let host = go_url::hostname(uri).map_err(|reason| HostError::Uri {
        uri: uri.to_owned(),
        reason,
    })?;
    let host = String::from_utf8(host).map_err(|_| HostError::NotUtf8(uri.to_owned()))?;
    let mut ignition_host = format!("{host}:{IGNITION_PORT}");
    if let Some(platform) = &status.platform_status {
        let ips = match platform.type_.as_deref().unwrap_or_default() {
            "BareMetal" => platform.bare_metal.as_ref(),
            "OpenStack" => platform.open_stack.as_ref(),
            "oVirt" => platform.ovirt.as_ref(),
            "VSphere" => platform.vsphere.as_ref(),
            _ => None,
        };
        if let Some(first) = ips
            .and_then(|ips| ips.api_server_internal_ips.as_deref())
            .and_then(<[String]>::first)
        {
            ignition_host = join_host_port(first, IGNITION_PORT);
        }
    }
    Ok(ignition_host)
}

/// `net.JoinHostPort`: a host with a colon is bracketed.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// What Go 1.26's `net/url` makes of a URL: `url.Parse(s)` and then `Hostname()`, reproduced
/// for the host only (the rest of the URL is checked as Go checks it, then dropped). The HTTP
/// and HTTPS schemes refuse a second colon in the host (`urlstrictcolons`, on for modules of Go
/// 1.26, as the MCO's is).
mod go_url {
    /// Which characters Go's `shouldEscape` lets through in a host (`encodeHost`).
    fn host_char(c: u8) -> bool {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'_'
                    | b'.'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'['
                    | b']'
                    | b'<'
                    | b'>'
                    | b'"'
            )
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Mode {
        /// Paths, fragments, user information: only `%` escapes are checked.
        Other,
        Host,
        Zone,
    }

    fn hex(c: u8) -> Option<u8> {
        (c as char).to_digit(16).map(|d| d as u8)
    }

    /// Go's `unescape(s, mode)`.
    fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, &'static str> {
        let mut out = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            match s[i] {
                b'%' => {
                    let (Some(hi), Some(lo)) = (
                        s.get(i + 1).copied().and_then(hex),
                        s.get(i + 2).copied().and_then(hex),
                    ) else {
                        return Err("invalid URL escape");
                    };
                    let escape = &s[i..i + 3];
                    if mode == Mode::Host && hi < 8 && escape != b"%25" {
                        return Err("invalid URL escape");
                    }
                    let value = hi << 4 | lo;
                    if mode == Mode::Zone
                        && escape != b"%25"
                        && value != b' '
                        && !(value >= 0x80 || host_char(value))
                    {
                        return Err("invalid URL escape");
                    }
                    out.push(value);
                    i += 3;
                }
                c => {
                    if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && !host_char(c) {
                        return Err("invalid character in host name");
                    }
                    out.push(c);
                    i += 1;
                }
            }
        }
        Ok(out)
    }

    /// `validOptionalPort`: empty, or a colon and digits.
    fn valid_optional_port(port: &[u8]) -> bool {
        match port.split_first() {
            None => true,
            Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
            Some(_) => false,
        }
    }

    fn find(s: &[u8], c: u8) -> Option<usize> {
        s.iter().position(|&b| b == c)
    }

    fn rfind(s: &[u8], c: u8) -> Option<usize> {
        s.iter().rposition(|&b| b == c)
    }

    /// `netip.ParseAddr` of a bracketed host, for what `parseHost` decides: an IPv6 address
    /// (IPv4-mapped included) with an optional non-empty zone is accepted; IPv4 is not.
    fn ipv6_literal(text: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(text) else {
            return false;
        };
        let (address, zone) = match text.split_once('%') {
            Some((address, zone)) => (address, Some(zone)),
            None => (text, None),
        };
        zone.is_none_or(|z| !z.is_empty()) && address.parse::<std::net::Ipv6Addr>().is_ok()
    }

    /// `parseHost(scheme, host)`: the host as `URL.Host` holds it.
    fn parse_host(scheme: &str, host: &[u8]) -> Result<Vec<u8>, &'static str> {
        match rfind(host, b'[') {
            Some(i) if i > 0 => return Err("invalid IP-literal"),
            Some(_) => {
                let close = rfind(host, b']').ok_or("missing ']' in host")?;
                let colon_port = &host[close + 1..];
                if !valid_optional_port(colon_port) {
                    return Err("invalid port after host");
                }
                let colon_port = unescape(colon_port, Mode::Host)?;
                let name = &host[1..close];
                let unescaped = match name.windows(3).position(|w| w == b"%25") {
                    Some(zone) => {
                        let mut part = unescape(&name[..zone], Mode::Host)?;
                        part.extend(unescape(&name[zone..], Mode::Zone)?);
                        part
                    }
                    None => unescape(name, Mode::Host)?,
                };
                if !ipv6_literal(&unescaped) {
                    return Err("invalid host");
                }
                let mut out = vec![b'['];
                out.extend(unescaped);
                out.push(b']');
                out.extend(colon_port);
                return Ok(out);
            }
            None => {}
        }
        if let Some(first) = find(host, b':') {
            let last = rfind(host, b':').unwrap_or(first);
            let strict = scheme == "http" || scheme == "https";
            let at = if last != first && !strict {
                last
            } else {
                first
            };
            if !valid_optional_port(&host[at..]) {
                return Err("invalid port after host");
            }
        }
        unescape(host, Mode::Host)
    }

    /// `validUserinfo`.
    fn valid_userinfo(s: &[u8]) -> bool {
        // Go walks runes; every byte of a multi-byte rune is >= 0x80 and refused as it is.
        s.iter().all(|&c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'-' | b'.'
                        | b'_'
                        | b':'
                        | b'~'
                        | b'!'
                        | b'$'
                        | b'&'
                        | b'\''
                        | b'('
                        | b')'
                        | b'*'
                        | b'+'
                        | b','
                        | b';'
                        | b'='
                        | b'%'
                        | b'@'
                )
        })
    }

    /// `url.Parse(raw)` then `Hostname()`: the host's bytes (empty for a URL without one).
    pub(super) fn hostname(raw: &str) -> Result<Vec<u8>, &'static str> {
        let (rest, fragment) = match raw.split_once('#') {
            Some((rest, fragment)) => (rest.as_bytes(), Some(fragment.as_bytes())),
            None => (raw.as_bytes(), None),
        };
        let host = parse(rest)?;
        if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
            unescape(fragment, Mode::Other)?;
        }
        Ok(split_host(&host))
    }

    /// Go's `parse(rawURL, false)`, keeping only `URL.Host`.
    fn parse(raw: &[u8]) -> Result<Vec<u8>, &'static str> {
        if raw.iter().any(|&b| b < b' ' || b == 0x7f) {
            return Err("invalid control character in URL");
        }
        if raw == b"*" {
            return Ok(Vec::new());
        }
        // getScheme
        let mut scheme = String::new();
        let mut rest = raw;
        for (i, &c) in raw.iter().enumerate() {
            if c.is_ascii_alphabetic() {
                continue;
            }
            if c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.') {
                if i == 0 {
                    break;
                }
                continue;
            }
            if c == b':' {
                if i == 0 {
                    return Err("missing protocol scheme");
                }
                scheme = String::from_utf8_lossy(&raw[..i]).to_ascii_lowercase();
                rest = &raw[i + 1..];
            }
            break;
        }
        // The query.
        let questions = rest.iter().filter(|&&b| b == b'?').count();
        if rest.last() == Some(&b'?') && questions == 1 {
            rest = &rest[..rest.len() - 1];
        } else if let Some(i) = find(rest, b'?') {
            rest = &rest[..i];
        }
        if !rest.starts_with(b"/") {
            if !scheme.is_empty() {
                // Opaque: no host.
                return Ok(Vec::new());
            }
            let segment = match find(rest, b'/') {
                Some(i) => &rest[..i],
                None => rest,
            };
            if segment.contains(&b':') {
                return Err("first path segment in URL cannot contain colon");
            }
        }
        let mut host = Vec::new();
        if (!scheme.is_empty() || !rest.starts_with(b"///")) && rest.starts_with(b"//") {
            let mut authority = &rest[2..];
            rest = &[];
            if let Some(i) = find(authority, b'/') {
                rest = &authority[i..];
                authority = &authority[..i];
            }
            let at = rfind(authority, b'@');
            host = parse_host(&scheme, &authority[at.map_or(0, |i| i + 1)..])?;
            if let Some(at) = at {
                let userinfo = &authority[..at];
                if !valid_userinfo(userinfo) {
                    return Err("invalid userinfo");
                }
                // User name and password: only their escapes are checked.
                unescape(userinfo, Mode::Other)?;
            }
        }
        unescape(rest, Mode::Other)?;
        Ok(host)
    }

    /// `splitHostPort(u.Host)`'s host: a valid port dropped, then the brackets.
    fn split_host(host: &[u8]) -> Vec<u8> {
        let mut host = host;
        if let Some(colon) = rfind(host, b':') {
            if valid_optional_port(&host[colon..]) {
                host = &host[..colon];
            }
        }
        if host.len() >= 2 && host.starts_with(b"[") && host.ends_with(b"]") {
            host = &host[1..host.len() - 1];
        }
        host.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(uri: &str) -> InfrastructureStatus {
        InfrastructureStatus {
            api_server_internal_uri: Some(uri.to_owned()),
            ..Default::default()
        }
    }

    fn on(platform: &str, key: &str, ips: &[&str]) -> InfrastructureStatus {
        let mut status: InfrastructureStatus = serde_json::from_value(serde_json::json!({
            "apiServerInternalURI": "https://api-int.example.test:6443",
            "platformStatus": {"type": platform, key: {"apiServerInternalIPs": ips}}
        }))
        .expect("status");
        status.rest.clear();
        status
    }

    /// Hosts as Go 1.26's `url.Parse(uri).Hostname()` gives them (and its errors), checked
    /// against a Go program once; `None` is an error.
    const GO_HOSTNAMES: &[(&str, Option<&str>)] = &[
        (
            "https://api-int.example.test:6443",
            Some("api-int.example.test"),
        ),
        ("https://api-int.example.test", Some("api-int.example.test")),
        (
            "https://API-INT.Example.Test:6443/",
            Some("API-INT.Example.Test"),
        ),
        (
            "HTTPS://api-int.example.test:6443",
            Some("api-int.example.test"),
        ),
        ("https://[fd00::1]:6443", Some("fd00::1")),
        ("https://[fd00::1]", Some("fd00::1")),
        ("https://[fe80::1%25eth0]:6443", Some("fe80::1%eth0")),
        ("https://[::ffff:10.0.0.1]:6443", Some("::ffff:10.0.0.1")),
        ("https://[10.0.0.1]:6443", None),
        ("https://[fd00::1", None),
        ("https://a[fd00::1]:6443", None),
        ("https://10.0.0.5:6443", Some("10.0.0.5")),
        (
            "https://user:pw@api-int.example.test:6443/x?y#z",
            Some("api-int.example.test"),
        ),
        ("https://api-int.example.test:64a3", None),
        ("https://a:b:6443", None),
        ("tcp://a:b:6443", Some("a:b")),
        ("https://host%41:6443", None),
        ("https://h%C3%A9:6443", Some("hé")),
        ("https://h%zz", None),
        ("https://h/%zz", None),
        ("https://h#%zz", None),
        (
            "https://h_x!$&'()*+,;=<>\"~:6443",
            Some("h_x!$&'()*+,;=<>\"~"),
        ),
        ("https://h x", None),
        ("https://h\tx", None),
        ("https://us er@h", None),
        ("api-int.example.test:6443", Some("")),
        ("api-int.example.test", Some("")),
        ("//api-int.example.test:6443", Some("api-int.example.test")),
        ("///api-int.example.test", Some("")),
        ("https:api-int", Some("")),
        (":6443", None),
        ("1http://h", None),
        ("", Some("")),
        ("*", Some("")),
        ("https://:6443", Some("")),
        ("https://h:", Some("h")),
        ("https://h:6443?", Some("h")),
    ];

    #[test]
    fn hosts_are_what_go_net_url_makes_of_the_uri() {
        for (uri, expected) in GO_HOSTNAMES {
            let got = go_url::hostname(uri).ok();
            let got = got.map(|h| String::from_utf8(h).expect("UTF-8"));
            assert_eq!(got.as_deref(), *expected, "{uri:?}");
        }
    }

    #[test]
    fn the_host_is_the_uris_with_upstreams_port_unbracketed() {
        assert_eq!(
            ignition_host(&status("https://api-int.example.test:6443")),
            Ok("api-int.example.test:22623".to_owned())
        );
        // fmt.Sprintf("%s:%s"): an IPv6 host is not bracketed.
        assert_eq!(
            ignition_host(&status("https://[fd00::1]:6443")),
            Ok("fd00::1:22623".to_owned())
        );
        // No URI: an empty host, as upstream's (its URL is then https://:22623).
        assert_eq!(
            ignition_host(&InfrastructureStatus::default()),
            Ok(":22623".to_owned())
        );
        assert!(matches!(
            ignition_host(&status("https://a:b:6443")),
            Err(HostError::Uri { .. })
        ));
        assert!(matches!(
            ignition_host(&status("https://h%FF")),
            Err(HostError::NotUtf8(_))
        ));
    }

    #[test]
    fn four_platforms_take_their_first_internal_address_joined_as_go_joins() {
        assert_eq!(
            ignition_host(&on("BareMetal", "baremetal", &["192.0.2.5", "192.0.2.6"])),
            Ok("192.0.2.5:22623".to_owned())
        );
        assert_eq!(
            ignition_host(&on("OpenStack", "openstack", &["fd00::5"])),
            Ok("[fd00::5]:22623".to_owned())
        );
        assert_eq!(
            ignition_host(&on("oVirt", "ovirt", &["192.0.2.7"])),
            Ok("192.0.2.7:22623".to_owned())
        );
        assert_eq!(
            ignition_host(&on("VSphere", "vsphere", &["192.0.2.8"])),
            Ok("192.0.2.8:22623".to_owned())
        );
        // Another platform, a type that does not match the block, no addresses: the URI's host.
        for status in [
            on("AWS", "baremetal", &["192.0.2.5"]),
            on("BareMetal", "openstack", &["192.0.2.5"]),
            on("BareMetal", "baremetal", &[]),
            on("Ovirt", "ovirt", &["192.0.2.7"]),
        ] {
            assert_eq!(
                ignition_host(&status),
                Ok("api-int.example.test:22623".to_owned())
            );
        }
    }

    #[test]
    fn an_infrastructure_decodes_from_what_the_api_server_sends() {
        let infrastructure: Infrastructure = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "Infrastructure",
            "metadata": {"name": "cluster"},
            "spec": {"platformSpec": {"type": "BareMetal"}},
            "status": {
                "apiServerInternalURI": "https://api-int.example.test:6443",
                "infrastructureName": "example-abcde",
                "platformStatus": {"type": "BareMetal", "baremetal": {
                    "apiServerInternalIPs": ["fd00::5"], "ingressIPs": ["fd00::6"]
                }}
            }
        }))
        .expect("Infrastructure");
        let status = infrastructure.status.expect("status");
        assert_eq!(ignition_host(&status), Ok("[fd00::5]:22623".to_owned()));
        // Null lists and blocks are absent ones.
        let status: InfrastructureStatus = serde_json::from_value(serde_json::json!({
            "apiServerInternalURI": null,
            "platformStatus": {"type": "BareMetal", "baremetal": {"apiServerInternalIPs": null}}
        }))
        .expect("status");
        assert_eq!(ignition_host(&status), Ok(":22623".to_owned()));
    }
}
