use super::*;

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

fn proxied(source: &str, destination: &str) -> Header {
    Header::Proxied {
        source: addr(source),
        destination: addr(destination),
    }
}

/// A v2 header: version/command byte, family/protocol byte, the address block.
fn v2(version_command: u8, family_protocol: u8, block: &[u8]) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(version_command);
    out.push(family_protocol);
    out.extend_from_slice(&u16::try_from(block.len()).unwrap().to_be_bytes());
    out.extend_from_slice(block);
    out
}

fn v4_block(source: [u8; 4], destination: [u8; 4], ports: (u16, u16)) -> Vec<u8> {
    let mut block = source.to_vec();
    block.extend_from_slice(&destination);
    block.extend_from_slice(&ports.0.to_be_bytes());
    block.extend_from_slice(&ports.1.to_be_bytes());
    block
}

#[test]
fn v1_headers_as_the_specification_writes_them() {
    let line = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n";
    assert_eq!(
        parse(line),
        Ok((proxied("192.168.0.1:56324", "192.168.0.11:443"), 47))
    );
    let six = b"PROXY TCP6 fd00::1 fd00:0:0:0:0:0:0:2 0 65535\r\n";
    assert_eq!(
        parse(six),
        Ok((proxied("[fd00::1]:0", "[fd00::2]:65535"), six.len()))
    );
    assert_eq!(parse(b"PROXY UNKNOWN\r\n"), Ok((Header::Local, 15)));
    // What haproxy writes (inet_ntop) when one side is IPv4 and the other IPv6.
    let mixed = b"PROXY TCP6 ::ffff:10.0.0.7 fd00::1 40000 22623\r\n";
    assert_eq!(
        parse(mixed),
        Ok((
            proxied("[::ffff:10.0.0.7]:40000", "[fd00::1]:22623"),
            mixed.len()
        ))
    );
    let worst = b"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    assert_eq!(worst.len(), V1_MAX);
    assert_eq!(parse(worst), Ok((Header::Local, V1_MAX)));
    let longest = b"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n";
    assert_eq!(parse(longest).map(|(_, n)| n), Ok(56));
}

#[test]
fn v1_prefixes_are_incomplete_and_deviations_malformed() {
    let line = b"PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n";
    for n in 0..line.len() {
        assert_eq!(parse(&line[..n]), Err(ParseError::Incomplete), "{n} bytes");
    }
    for bad in [
        &b"PROXY TCP4 10.0.0.1 10.0.0.2 1 2\n"[..],
        b"PROXY TCP4 10.0.0.1 10.0.0.2 1 2\rX",
        b"PROXY TCP4 10.0.0.01 10.0.0.2 1 2\r\n",
        b"PROXY TCP4 10.0.0.1 10.0.0.2 01 2\r\n",
        b"PROXY TCP4 10.0.0.1 10.0.0.2 1 65536\r\n",
        b"PROXY TCP4 10.0.0.256 10.0.0.2 1 2\r\n",
        b"PROXY TCP4 10.0.0 10.0.0.2 1 2\r\n",
        b"PROXY TCP4 fd00::1 10.0.0.2 1 2\r\n",
        b"PROXY TCP6 10.0.0.1 fd00::2 1 2\r\n",
        b"PROXY TCP6 fd00::1%eth0 fd00::2 1 2\r\n",
        b"PROXY TCP4  10.0.0.1 10.0.0.2 1 2\r\n",
        b"PROXY TCP4 10.0.0.1 10.0.0.2 1\r\n",
        b"PROXY TCP4 10.0.0.1 10.0.0.2 1 2 3\r\n",
        b"PROXY UDP4 10.0.0.1 10.0.0.2 1 2\r\n",
        b"PROXY tcp4 10.0.0.1 10.0.0.2 1 2\r\n",
        b"PROXY UNKNOWNX\r\n",
        b"PROXY \r\n",
        b"PROXY TCP4 10.0.0.1 10.0.0.2 1 +2\r\n",
    ] {
        assert!(
            matches!(parse(bad), Err(ParseError::Malformed(_))),
            "{:?}: {:?}",
            String::from_utf8_lossy(bad),
            parse(bad)
        );
    }
    // No CRLF within 107 bytes.
    let mut long = b"PROXY UNKNOWN ".to_vec();
    long.resize(V1_MAX, b'x');
    assert!(matches!(parse(&long), Err(ParseError::Malformed(_))));
    assert_eq!(parse(&long[..V1_MAX - 1]), Err(ParseError::Incomplete));
    // A CR as the 107th byte: its LF would be the 108th (found by fuzzing).
    long[V1_MAX - 1] = b'\r';
    assert!(matches!(parse(&long), Err(ParseError::Malformed(_))));
    // Whatever UNKNOWN carries is ignored; elsewhere non-ASCII is refused.
    assert!(matches!(
        parse("PROXY UNKNOWN é\r\n".as_bytes()),
        Ok((Header::Local, _))
    ));
    assert!(matches!(
        parse("PROXY TCP4 1.2.3.4 é 1 2\r\n".as_bytes()),
        Err(ParseError::Malformed(_))
    ));
}

#[test]
fn v2_headers_name_the_client_or_fall_back_on_the_real_endpoints() {
    let header = v2(
        0x21,
        0x11,
        &v4_block([10, 0, 0, 7], [10, 0, 0, 1], (40000, 22623)),
    );
    let mut stream = header.clone();
    stream.extend_from_slice(b"\x16\x03\x01rest of a ClientHello");
    assert_eq!(
        parse(&stream),
        Ok((proxied("10.0.0.7:40000", "10.0.0.1:22623"), 28))
    );
    // With TLVs after the addresses (a balancer's extras): skipped.
    let mut block = v4_block([10, 0, 0, 7], [10, 0, 0, 1], (1, 2));
    block.extend_from_slice(&[0xEA, 0, 3, b'v', b'p', b'c']);
    assert_eq!(
        parse(&v2(0x21, 0x11, &block)),
        Ok((proxied("10.0.0.7:1", "10.0.0.1:2"), 16 + 18))
    );
    let mut six = [0u8; 36];
    six[0] = 0xfd;
    six[15] = 7;
    six[16] = 0xfd;
    six[31] = 1;
    six[32..34].copy_from_slice(&443u16.to_be_bytes());
    six[34..36].copy_from_slice(&22623u16.to_be_bytes());
    assert_eq!(
        parse(&v2(0x21, 0x21, &six)),
        Ok((proxied("[fd00::7]:443", "[fd00::1]:22623"), 52))
    );
    // LOCAL (health checks), whatever follows; UNSPEC, UNIX and datagrams fall back.
    assert_eq!(parse(&v2(0x20, 0x00, &[])), Ok((Header::Local, 16)));
    assert_eq!(parse(&v2(0x20, 0x11, &[1, 2, 3])), Ok((Header::Local, 19)));
    assert_eq!(parse(&v2(0x21, 0x00, &[])), Ok((Header::Local, 16)));
    assert_eq!(parse(&v2(0x21, 0x31, &[0; 216])), Ok((Header::Local, 232)));
    assert_eq!(
        parse(&v2(
            0x21,
            0x12,
            &v4_block([1, 2, 3, 4], [5, 6, 7, 8], (1, 2))
        )),
        Ok((Header::Local, 28))
    );
}

#[test]
fn v2_prefixes_are_incomplete_and_deviations_malformed() {
    let header = v2(0x21, 0x11, &v4_block([10, 0, 0, 7], [10, 0, 0, 1], (1, 2)));
    for n in 0..header.len() {
        assert_eq!(
            parse(&header[..n]),
            Err(ParseError::Incomplete),
            "{n} bytes"
        );
    }
    for (what, bad) in [
        ("version 1", v2(0x11, 0x11, &[0; 12])),
        ("version 3", v2(0x31, 0x11, &[0; 12])),
        ("command 2", v2(0x22, 0x11, &[0; 12])),
        ("family 4", v2(0x21, 0x41, &[0; 12])),
        ("protocol 3", v2(0x21, 0x13, &[0; 12])),
        ("short IPv4 block", v2(0x21, 0x11, &[0; 11])),
        ("short IPv6 block", v2(0x21, 0x21, &[0; 35])),
        ("too long", v2(0x21, 0x11, &vec![0; V2_MAX_PAYLOAD + 1])),
    ] {
        assert!(
            matches!(parse(&bad), Err(ParseError::Malformed(_))),
            "{what}: {:?}",
            parse(&bad)
        );
    }
    // A wrong version is refused from byte 13 on, without waiting for the rest.
    assert!(matches!(
        parse(&v2(0x11, 0x11, &[])[..13]),
        Err(ParseError::Malformed(_))
    ));
}

#[test]
fn other_protocols_are_no_header() {
    for other in [
        &b"\x16\x03\x01\x02\x00"[..],
        b"GET /config/worker HTTP/1.1\r\n",
        b"PRI * HTTP/2.0\r\n",
        b"PROX\r\n",
        b"\r\n\r\nGET",
    ] {
        assert_eq!(parse(other), Err(ParseError::Missing), "{other:?}");
        assert_eq!(sniff(other), Sniff::Other, "{other:?}");
    }
    assert_eq!(sniff(b""), Sniff::NeedMore);
    assert_eq!(sniff(b"PROX"), Sniff::NeedMore);
    assert_eq!(sniff(b"\r\n\r\n\0"), Sniff::NeedMore);
    assert_eq!(sniff(b"PROXY "), Sniff::V1);
    assert_eq!(sniff(V2_SIGNATURE), Sniff::V2);
}

async fn intake_of(
    protocol: &ProxyProtocol,
    bytes: &[u8],
    peer: &str,
) -> (Option<(Vec<u8>, SocketAddr)>, String) {
    let metrics = Metrics::new();
    let (mut client, server) = tokio::io::duplex(4096);
    tokio::io::AsyncWriteExt::write_all(&mut client, bytes)
        .await
        .unwrap();
    drop(client);
    let result = match protocol.intake(server, addr(peer), &metrics).await {
        Some((mut stream, remote)) => {
            let mut rest = Vec::new();
            stream.read_to_end(&mut rest).await.unwrap();
            Some((rest, remote))
        }
        None => None,
    };
    (result, metrics.encode())
}

#[tokio::test]
async fn trusted_balancers_must_send_a_header_and_others_must_not() {
    let protocol = ProxyProtocol::new(
        vec![Cidr::parse("192.0.2.0/24").unwrap()],
        Duration::from_secs(5),
    );
    let header = b"PROXY TCP4 10.0.0.7 10.0.0.1 40000 22624\r\nGET / HTTP/1.1\r\n\r\n";
    let (result, metrics) = intake_of(&protocol, header, "192.0.2.10:5555").await;
    assert_eq!(
        result,
        Some((b"GET / HTTP/1.1\r\n\r\n".to_vec(), addr("10.0.0.7:40000")))
    );
    assert!(
        metrics.contains(r#"mcs_proxy_protocol_connections_total{outcome="proxied"} 1"#),
        "{metrics}"
    );
    // A health check's LOCAL header: the balancer's own address.
    let mut local = v2(0x20, 0x00, &[]);
    local.extend_from_slice(b"GET /healthz HTTP/1.1\r\n\r\n");
    let (result, _) = intake_of(&protocol, &local, "192.0.2.10:5555").await;
    assert_eq!(
        result,
        Some((
            b"GET /healthz HTTP/1.1\r\n\r\n".to_vec(),
            addr("192.0.2.10:5555")
        ))
    );
    // A trusted balancer without a header, with a malformed one, or cut short.
    for (bytes, outcome) in [
        (&b"GET / HTTP/1.1\r\n\r\n"[..], "missing_header"),
        (b"PROXY TCP4 10.0.0.7\r\n", "malformed_header"),
        (b"PROXY TCP4 10.0.0.7 10.0.0.1 1", "incomplete_header"),
    ] {
        let (result, metrics) = intake_of(&protocol, bytes, "192.0.2.10:5555").await;
        assert_eq!(result, None, "{outcome}");
        assert!(
            metrics.contains(&format!(
                r#"mcs_proxy_protocol_connections_total{{outcome="{outcome}"}} 1"#
            )),
            "{metrics}"
        );
    }
    // Anyone else: a header is refused, everything else passes untouched.
    let (result, metrics) = intake_of(&protocol, header, "198.51.100.1:5555").await;
    assert_eq!(result, None);
    assert!(
        metrics.contains(r#"outcome="untrusted_header"} 1"#),
        "{metrics}"
    );
    let (result, metrics) = intake_of(&protocol, b"GET / HTTP/1.1\r\n\r\n", "198.51.100.1:1").await;
    assert_eq!(
        result,
        Some((b"GET / HTTP/1.1\r\n\r\n".to_vec(), addr("198.51.100.1:1")))
    );
    assert!(
        !metrics.contains("mcs_proxy_protocol_connections_total{"),
        "{metrics}"
    );
    // An untrusted client whose last bytes looked like a header's start keeps them.
    let (result, _) = intake_of(&protocol, b"PRO", "198.51.100.1:1").await;
    assert_eq!(result, Some((b"PRO".to_vec(), addr("198.51.100.1:1"))));
    // Closed before a byte (a plain TCP health check): nothing to do.
    let (result, metrics) = intake_of(&protocol, b"", "192.0.2.10:1").await;
    assert_eq!(result, None);
    assert!(
        !metrics.contains("mcs_proxy_protocol_connections_total{"),
        "{metrics}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_header_that_never_completes_times_out() {
    let protocol = ProxyProtocol::new(
        vec![Cidr::parse("127.0.0.0/8").unwrap()],
        Duration::from_secs(3),
    );
    let metrics = Metrics::new();
    let (mut client, server) = tokio::io::duplex(64);
    tokio::io::AsyncWriteExt::write_all(&mut client, b"PROXY TCP4 ")
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    assert!(protocol
        .intake(server, addr("127.0.0.1:9"), &metrics)
        .await
        .is_none());
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert!(metrics
        .encode()
        .contains(r#"mcs_proxy_protocol_connections_total{outcome="header_timeout"} 1"#));
    drop(client);
}
