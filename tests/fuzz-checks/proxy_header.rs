//! The PROXY protocol header (`server::proxy_protocol::parse` and `sniff`). The input is the
//! first bytes of a connection from a trusted load balancer.
//!
//! Properties:
//! - a header's length is within the input and the specification's bounds (107 bytes for v1,
//!   16 + the accepted payload for v2); the header alone parses the same, and so does the
//!   header followed by any other bytes (what follows is never read);
//! - every prefix shorter than a complete header is `Incomplete`, never an answer;
//! - `Incomplete` only while fewer bytes than the longest header were given;
//! - `sniff` agrees: a v1 or v2 signature decides the version, `Missing` is exactly "no
//!   signature" (`Other`);
//! - a client address round-trips: written as a canonical v1 line and as a v2 header (this
//!   module's own encoders, after the specification), it parses to the same header.

use std::net::SocketAddr;

use machine_config_server::server::proxy_protocol::{
    parse, sniff, Header, ParseError, Sniff, V1_MAX, V1_SIGNATURE, V2_MAX_PAYLOAD, V2_SIGNATURE,
};

pub fn check(data: &[u8]) {
    let result = parse(data);
    let sniffed = sniff(data);
    match (&result, sniffed) {
        (Err(ParseError::Missing), Sniff::Other) => {}
        (Err(ParseError::Missing), other) => panic!("Missing but sniffed {other:?}"),
        (_, Sniff::Other) => panic!("sniffed Other but parsed {result:?}"),
        _ => {}
    }
    if data.starts_with(V1_SIGNATURE) {
        assert_eq!(sniffed, Sniff::V1, "the v1 signature decides");
    }
    if data.starts_with(V2_SIGNATURE) {
        assert_eq!(sniffed, Sniff::V2, "the v2 signature decides");
    }
    let longest = if sniffed == Sniff::V1 {
        V1_MAX
    } else {
        16 + V2_MAX_PAYLOAD
    };
    match result {
        Ok((header, length)) => {
            assert!(length <= data.len(), "the header is within the input");
            assert!(length <= longest, "a header of {length} bytes is too long");
            assert_eq!(
                parse(&data[..length]),
                Ok((header, length)),
                "the header alone"
            );
            let mut more = data[..length].to_vec();
            more.extend_from_slice(b"\x16\x03\x01GET / HTTP/1.1\r\n");
            assert_eq!(
                parse(&more),
                Ok((header, length)),
                "what follows is not read"
            );
            let prefixes: Vec<usize> = if length <= 128 {
                (0..length).collect()
            } else {
                vec![0, 1, 12, 13, 15, 16, length / 2, length - 1]
            };
            for k in prefixes {
                assert_eq!(
                    parse(&data[..k]),
                    Err(ParseError::Incomplete),
                    "a {k}-byte prefix of a {length}-byte header"
                );
            }
            if let Header::Proxied {
                source,
                destination,
            } = header
            {
                round_trips(source, destination);
            }
        }
        Err(ParseError::Incomplete) => {
            assert!(
                data.len() < longest,
                "still incomplete after {} bytes",
                data.len()
            );
        }
        Err(ParseError::Missing | ParseError::Malformed(_)) => {}
    }
}

fn round_trips(source: SocketAddr, destination: SocketAddr) {
    let expected = Header::Proxied {
        source,
        destination,
    };
    if source.is_ipv4() == destination.is_ipv4() {
        let family = if source.is_ipv4() { "TCP4" } else { "TCP6" };
        let line = format!(
            "PROXY {family} {} {} {} {}\r\n",
            source.ip(),
            destination.ip(),
            source.port(),
            destination.port()
        );
        assert_eq!(
            parse(line.as_bytes()),
            Ok((expected, line.len())),
            "{line:?} round-trips"
        );
    }
    let mut v2 = V2_SIGNATURE.to_vec();
    v2.push(0x21);
    let block: Vec<u8> = match (source, destination) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => {
            v2.push(0x11);
            [&s.ip().octets()[..], &d.ip().octets()[..]].concat()
        }
        (SocketAddr::V6(s), SocketAddr::V6(d)) => {
            v2.push(0x21);
            [&s.ip().octets()[..], &d.ip().octets()[..]].concat()
        }
        _ => return,
    };
    let mut block = block;
    block.extend_from_slice(&source.port().to_be_bytes());
    block.extend_from_slice(&destination.port().to_be_bytes());
    v2.extend_from_slice(&u16::try_from(block.len()).unwrap().to_be_bytes());
    v2.extend_from_slice(&block);
    assert_eq!(
        parse(&v2),
        Ok((expected, v2.len())),
        "the v2 encoding round-trips"
    );
}
