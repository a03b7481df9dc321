//! The PROXY protocol (versions 1 and 2, haproxy's `doc/proxy-protocol.txt`) from trusted load
//! balancers: where the balancer in front of the serving ports does not keep client addresses
//! (AWS NLB with IP targets, haproxy in TCP mode), it prepends a header naming the client, and
//! that address then stands for the client everywhere: the access policy, the served records
//! (so records match the machine's Node), the logs and the metrics.
//!
//! Off by default, and then nothing here runs: the listener hands the accepted socket on as it
//! always did. With `--proxy-protocol-from CIDRS` ([`ProxyProtocol`]):
//! - a connection from those networks must start with a valid v1 or v2 header, read under a
//!   timeout before anything else (before the TLS ClientHello on the secure port); the header's
//!   source address is the client's. A `LOCAL` header (v2 health checks) or `UNKNOWN` (v1), and
//!   v2 families the server cannot use (UNIX sockets, unspecified), keep the balancer's own
//!   address, as the specification requires;
//! - a connection from anywhere else that starts with a header is closed: only the trusted
//!   balancers may speak for someone else;
//! - a missing, malformed, oversized or incomplete header from a trusted address closes the
//!   connection too.
//!
//! Every closed connection is counted (`mcs_proxy_protocol_connections_total{outcome}`) and
//! logged at most once per source address and minute ([`super::per_source`]).
//!
//! The parser ([`parse`]) is pure and takes any prefix of the connection's bytes; the intake
//! ([`ProxyProtocol::intake`]) reads until the parser decides and gives back the bytes read
//! past the header ([`Rewind`]).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::access::Cidr;
use super::per_source::PerSource;
use crate::metrics::Metrics;

/// The v1 header's first bytes.
pub const V1_SIGNATURE: &[u8] = b"PROXY ";
/// The v2 header's first twelve bytes.
pub const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// Longest v1 line, CRLF included (the specification's worst case).
pub const V1_MAX: usize = 107;
/// Longest v2 header accepted: the 16 fixed bytes and up to this many address and TLV bytes.
/// Addresses take at most 216 bytes; balancers add a few small TLVs (AWS: the VPC endpoint).
pub const V2_MAX_PAYLOAD: usize = 2048;
/// How long a connection gets to send its header (or, from an untrusted address, enough bytes
/// to tell that it sends none). The specification asks for at least 3 s.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// One log line per source address and this interval.
pub const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// What a complete header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// Relayed for a client: its address and the address it connected to.
    Proxied {
        source: SocketAddr,
        destination: SocketAddr,
    },
    /// The balancer's own connection (v2 `LOCAL`, v1 `UNKNOWN`, or a v2 family or protocol
    /// the receiver falls back on): the real endpoints stand.
    Local,
}

/// Why the bytes are no (complete, valid) header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A prefix of a header: more bytes are needed.
    #[error("incomplete header")]
    Incomplete,
    /// The bytes do not start with either signature.
    #[error("no PROXY protocol header")]
    Missing,
    /// A header signature followed by something the specification does not allow.
    #[error("malformed PROXY protocol header: {0}")]
    Malformed(&'static str),
}

/// Parses the header at the start of `bytes`: the header and its length in bytes. Needs no more
/// than [`V1_MAX`] or 16 + [`V2_MAX_PAYLOAD`] bytes to decide.
pub fn parse(bytes: &[u8]) -> Result<(Header, usize), ParseError> {
    match sniff(bytes) {
        Sniff::V1 => parse_v1(bytes),
        Sniff::V2 => parse_v2(bytes),
        Sniff::NeedMore => Err(ParseError::Incomplete),
        Sniff::Other => Err(ParseError::Missing),
    }
}

/// What the first bytes of a connection look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sniff {
    /// They start with the v1 signature.
    V1,
    /// They start with the v2 signature.
    V2,
    /// They are a prefix of a signature: more bytes decide.
    NeedMore,
    /// Neither: another protocol (TLS, HTTP).
    Other,
}

/// Tells whether `bytes` start like a header (decides on at most 12 bytes).
pub fn sniff(bytes: &[u8]) -> Sniff {
    let starts = |signature: &[u8]| {
        let n = bytes.len().min(signature.len());
        bytes[..n] == signature[..n]
    };
    let v1 = starts(V1_SIGNATURE);
    let v2 = starts(V2_SIGNATURE);
    if v1 && bytes.len() >= V1_SIGNATURE.len() {
        Sniff::V1
    } else if v2 && bytes.len() >= V2_SIGNATURE.len() {
        Sniff::V2
    } else if v1 || v2 {
        Sniff::NeedMore
    } else {
        Sniff::Other
    }
}

fn parse_v1(bytes: &[u8]) -> Result<(Header, usize), ParseError> {
    let window = &bytes[..bytes.len().min(V1_MAX)];
    // A bare CR or LF never ends the line; the CRLF must come within the first 107 bytes.
    let Some(cr) = window.iter().position(|b| *b == b'\r' || *b == b'\n') else {
        return if bytes.len() >= V1_MAX {
            Err(ParseError::Malformed("v1 line longer than 107 bytes"))
        } else {
            Err(ParseError::Incomplete)
        };
    };
    if window[cr] != b'\r' {
        return Err(ParseError::Malformed("v1 line ends with a bare LF"));
    }
    // The LF must come within the 107 bytes too (found by fuzzing: a CR as the 107th byte
    // left the header incomplete instead of too long).
    if cr + 2 > V1_MAX {
        return Err(ParseError::Malformed("v1 line longer than 107 bytes"));
    }
    match window.get(cr + 1) {
        None if bytes.len() <= cr + 1 => return Err(ParseError::Incomplete),
        Some(b'\n') => {}
        _ => return Err(ParseError::Malformed("v1 line ends with a bare CR")),
    }
    let length = cr + 2;
    let line = &window[V1_SIGNATURE.len()..cr];
    if line == b"UNKNOWN" || line.starts_with(b"UNKNOWN ") {
        // The receiver ignores anything before the CRLF and uses the real endpoints.
        return Ok((Header::Local, length));
    }
    let line = std::str::from_utf8(line)
        .ok()
        .filter(|line| line.is_ascii())
        .ok_or(ParseError::Malformed("v1 line is not ASCII"))?;
    let fields: Vec<&str> = line.split(' ').collect();
    let [protocol, source, destination, source_port, destination_port] = fields[..] else {
        return Err(ParseError::Malformed("v1 line does not have five fields"));
    };
    let (source, destination) = match protocol {
        "TCP4" => (IpAddr::V4(v4(source)?), IpAddr::V4(v4(destination)?)),
        "TCP6" => (IpAddr::V6(v6(source)?), IpAddr::V6(v6(destination)?)),
        _ => {
            return Err(ParseError::Malformed(
                "v1 protocol is not TCP4, TCP6 or UNKNOWN",
            ))
        }
    };
    Ok((
        Header::Proxied {
            source: SocketAddr::new(source, port(source_port)?),
            destination: SocketAddr::new(destination, port(destination_port)?),
        },
        length,
    ))
}

/// A decimal number without leading zeros (`0` itself allowed).
fn decimal(text: &str, max: u32) -> Option<u32> {
    let bytes = text.as_bytes();
    if bytes.is_empty()
        || bytes.len() > 5
        || !bytes.iter().all(u8::is_ascii_digit)
        || (bytes.len() > 1 && bytes[0] == b'0')
    {
        return None;
    }
    text.parse().ok().filter(|n| *n <= max)
}

fn port(text: &str) -> Result<u16, ParseError> {
    decimal(text, u32::from(u16::MAX))
        .and_then(|p| u16::try_from(p).ok())
        .ok_or(ParseError::Malformed(
            "v1 port is not a decimal in 0..65535",
        ))
}

/// Exactly four decimal octets without leading zeros.
fn v4(text: &str) -> Result<Ipv4Addr, ParseError> {
    let octets: Vec<u8> = text
        .split('.')
        .map(|o| decimal(o, 255).and_then(|o| u8::try_from(o).ok()))
        .collect::<Option<_>>()
        .ok_or(ParseError::Malformed(
            "v1 TCP4 address is not a dotted quad",
        ))?;
    let octets: [u8; 4] = octets
        .try_into()
        .map_err(|_| ParseError::Malformed("v1 TCP4 address is not a dotted quad"))?;
    Ok(Ipv4Addr::from(octets))
}

/// Hexadecimal groups and at most one `::`, and the embedded IPv4 form `inet_ntop` writes for
/// IPv4-mapped addresses (`::ffff:10.0.0.7`: haproxy sends that when one side of the relayed
/// connection is IPv4 and the other IPv6; found by fuzzing); no zone.
fn v6(text: &str) -> Result<Ipv6Addr, ParseError> {
    let valid = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
    valid
        .then(|| text.parse::<Ipv6Addr>().ok())
        .flatten()
        .ok_or(ParseError::Malformed(
            "v1 TCP6 address is not an IPv6 address",
        ))
}

fn parse_v2(bytes: &[u8]) -> Result<(Header, usize), ParseError> {
    if bytes.len() < 16 {
        // The version nibble is known from byte 13 on: reject early what can never be valid.
        if let Some(version_command) = bytes.get(12) {
            check_version_command(*version_command)?;
        }
        return Err(ParseError::Incomplete);
    }
    let command = check_version_command(bytes[12])?;
    let family = bytes[13] >> 4;
    let protocol = bytes[13] & 0x0f;
    if family > 3 {
        return Err(ParseError::Malformed("v2 address family is not one of 0-3"));
    }
    if protocol > 2 {
        return Err(ParseError::Malformed(
            "v2 transport protocol is not one of 0-2",
        ));
    }
    let payload = usize::from(u16::from_be_bytes([bytes[14], bytes[15]]));
    if payload > V2_MAX_PAYLOAD {
        return Err(ParseError::Malformed("v2 header longer than accepted"));
    }
    let length = 16 + payload;
    if bytes.len() < length {
        return Err(ParseError::Incomplete);
    }
    let block = &bytes[16..length];
    // LOCAL: the balancer's own connection, whatever the family says.
    if command == 0 {
        return Ok((Header::Local, length));
    }
    let port_at = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
    let header = match (family, protocol) {
        // TCP over IPv4.
        (1, 1) => {
            if block.len() < 12 {
                return Err(ParseError::Malformed(
                    "v2 IPv4 address block shorter than 12 bytes",
                ));
            }
            let source = Ipv4Addr::new(block[0], block[1], block[2], block[3]);
            let destination = Ipv4Addr::new(block[4], block[5], block[6], block[7]);
            Header::Proxied {
                source: SocketAddr::new(source.into(), port_at(8)),
                destination: SocketAddr::new(destination.into(), port_at(10)),
            }
        }
        // TCP over IPv6.
        (2, 1) => {
            if block.len() < 36 {
                return Err(ParseError::Malformed(
                    "v2 IPv6 address block shorter than 36 bytes",
                ));
            }
            let address = |at: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&block[at..at + 16]);
                Ipv6Addr::from(octets)
            };
            Header::Proxied {
                source: SocketAddr::new(address(0).into(), port_at(32)),
                destination: SocketAddr::new(address(16).into(), port_at(34)),
            }
        }
        // Unspecified, UNIX sockets, datagrams: the receiver falls back on the real endpoints.
        _ => Header::Local,
    };
    Ok((header, length))
}

/// The command of a v2 version-and-command byte (version must be 2, command LOCAL or PROXY).
fn check_version_command(byte: u8) -> Result<u8, ParseError> {
    if byte >> 4 != 2 {
        return Err(ParseError::Malformed("v2 version is not 2"));
    }
    match byte & 0x0f {
        command @ (0 | 1) => Ok(command),
        _ => Err(ParseError::Malformed(
            "v2 command is neither LOCAL nor PROXY",
        )),
    }
}

/// Why a connection was closed before HTTP (the `outcome` label of
/// `mcs_proxy_protocol_connections_total`, beside `proxied` and `local`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// A header from an address outside `--proxy-protocol-from`.
    UntrustedHeader,
    /// A trusted address sent no header.
    MissingHeader,
    /// A trusted address sent a header the specification does not allow.
    MalformedHeader,
    /// The header (or the bytes telling there is none) did not arrive in time.
    Timeout,
    /// The connection ended or failed before the header was complete.
    Incomplete,
}

impl Rejection {
    /// The metric label and log reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::UntrustedHeader => "untrusted_header",
            Rejection::MissingHeader => "missing_header",
            Rejection::MalformedHeader => "malformed_header",
            Rejection::Timeout => "header_timeout",
            Rejection::Incomplete => "incomplete_header",
        }
    }
}

/// `--proxy-protocol-from`: which peers are balancers that must send a header.
#[derive(Debug)]
pub struct ProxyProtocol {
    trusted: Vec<Cidr>,
    header_timeout: Duration,
    log_gate: PerSource,
}

impl ProxyProtocol {
    /// Headers required from (and only accepted from) `trusted` networks.
    pub fn new(trusted: Vec<Cidr>, header_timeout: Duration) -> Self {
        ProxyProtocol {
            trusted,
            header_timeout,
            log_gate: PerSource::once_per(LOG_INTERVAL),
        }
    }

    /// Whether `peer` is one of the trusted balancers.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        self.trusted.iter().any(|cidr| cidr.contains(peer))
    }

    /// Reads what the PROXY protocol requires of a new connection from `peer`: from a trusted
    /// balancer its header, from anyone else enough bytes to tell that it sends none. Returns
    /// the stream (with any bytes read past the header put back) and the client's address, or
    /// `None` when the connection must be closed (counted and logged here).
    pub async fn intake<S>(
        &self,
        mut stream: S,
        peer: SocketAddr,
        metrics: &Metrics,
    ) -> Option<(Rewind<S>, SocketAddr)>
    where
        S: AsyncRead + Unpin,
    {
        let trusted = self.trusts(peer.ip());
        let mut buffer = BytesMut::with_capacity(if trusted { 512 } else { 16 });
        let outcome = tokio::time::timeout(self.header_timeout, async {
            loop {
                let decided = if trusted {
                    match parse(&buffer) {
                        Ok((header, length)) => Some(Ok((header, length))),
                        Err(ParseError::Incomplete) => None,
                        Err(ParseError::Missing) => Some(Err(Rejection::MissingHeader)),
                        Err(ParseError::Malformed(_)) => Some(Err(Rejection::MalformedHeader)),
                    }
                } else {
                    match sniff(&buffer) {
                        Sniff::V1 | Sniff::V2 => Some(Err(Rejection::UntrustedHeader)),
                        // Not a header: nothing consumed, the real peer stands.
                        Sniff::Other => Some(Ok((Header::Local, 0))),
                        Sniff::NeedMore => None,
                    }
                };
                if let Some(decided) = decided {
                    return Some(decided);
                }
                match stream.read_buf(&mut buffer).await {
                    // Closed (or failed) before a byte: nothing to serve, nothing to report
                    // (a balancer's plain TCP health check).
                    Ok(0) | Err(_) if buffer.is_empty() => return None,
                    // An untrusted client's last bytes looked like the start of a header:
                    // they are its (HTTP or TLS) business, as without the option.
                    Ok(0) | Err(_) if !trusted => return Some(Ok((Header::Local, 0))),
                    Ok(0) | Err(_) => return Some(Err(Rejection::Incomplete)),
                    Ok(_) => {}
                }
            }
        })
        .await
        .unwrap_or(Some(Err(Rejection::Timeout)));
        let outcome = outcome?;
        match outcome {
            Ok((header, length)) => {
                let remote = match header {
                    Header::Proxied { source, .. } => {
                        metrics.proxy_protocol("proxied");
                        tracing::trace!(balancer = %peer, client = %source, "PROXY protocol header");
                        source
                    }
                    Header::Local => {
                        if trusted {
                            metrics.proxy_protocol("local");
                        }
                        peer
                    }
                };
                buffer.advance(length);
                Some((Rewind::new(stream, buffer), remote))
            }
            Err(rejection) => {
                metrics.proxy_protocol(rejection.as_str());
                if self.log_gate.allow(peer.ip(), Instant::now()) {
                    tracing::warn!(
                        peer = %peer,
                        reason = rejection.as_str(),
                        trusted,
                        "closing connection: PROXY protocol header {} (at most one line per source and minute)",
                        match rejection {
                            Rejection::UntrustedHeader => "from an address outside --proxy-protocol-from",
                            Rejection::MissingHeader => "missing from a trusted balancer",
                            Rejection::MalformedHeader => "malformed",
                            Rejection::Timeout => "not received in time",
                            Rejection::Incomplete => "incomplete",
                        }
                    );
                }
                None
            }
        }
    }
}

/// Shared handle of the setting, as the listeners take it.
pub type SharedProxyProtocol = Option<Arc<ProxyProtocol>>;

/// A stream that first yields bytes already read from it (those past the PROXY header), then
/// reads on. Writes go straight through.
#[derive(Debug)]
pub struct Rewind<S> {
    inner: S,
    prefix: BytesMut,
}

impl<S> Rewind<S> {
    pub fn new(inner: S, prefix: BytesMut) -> Self {
        Rewind { inner, prefix }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests;
