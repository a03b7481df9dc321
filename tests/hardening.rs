//! Hardening against misuse, with the real binary: access control, slow and oversized requests,
//! clients that stop reading, graceful shutdown, and broken inputs that must not affect other
//! pools.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use support::mcs;

use mcs::Server;

const IGNITION_3_5: &str = "application/vnd.coreos.ignition+json;version=3.5.0";

fn example_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    extra.to_vec()
}

#[test]
fn allowed_source_cidrs_deny_other_addresses_but_not_healthz() {
    let denied = Server::bootstrap(
        &mcs::repo().join("config/bootstrap"),
        &example_args(&["--allowed-source-cidrs", "192.0.2.0/24,10.0.0.0/8"]),
    );
    let response = denied.http("GET", "/config/master", &[("Accept", IGNITION_3_5)]);
    assert_eq!(response.status, 403);
    assert_eq!(response.header("content-length"), Some("0"));
    assert_eq!(denied.http("GET", "/healthz", &[]).status, 200);
    // The denial is logged by the server's task, possibly after the response went out.
    mcs::poll("the denial logged", Duration::from_secs(5), || {
        denied.output().contains("source_not_allowed").then_some(())
    });

    let allowed = Server::bootstrap(
        &mcs::repo().join("config/bootstrap"),
        &["--allowed-source-cidrs", "127.0.0.0/8"],
    );
    assert_eq!(
        allowed
            .http("GET", "/config/master", &[("Accept", IGNITION_3_5)])
            .status,
        200
    );
}

#[test]
fn required_token_is_checked_and_never_logged() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "correct-horse-battery-staple\n").unwrap();
    let server = Server::bootstrap(
        &mcs::repo().join("config/bootstrap"),
        &["--require-token-file", token_file.to_str().unwrap()],
    );
    let accept = ("Accept", IGNITION_3_5);
    assert_eq!(server.http("GET", "/config/master", &[accept]).status, 403);
    assert_eq!(
        server
            .https(
                "GET",
                "/config/master",
                &[accept, ("Authorization", "Bearer wrong-token")]
            )
            .status,
        403
    );
    assert_eq!(
        server
            .https(
                "GET",
                "/config/master",
                &[
                    accept,
                    ("Authorization", "Bearer correct-horse-battery-staple")
                ]
            )
            .status,
        200
    );
    // Denials are logged by the server's task, possibly after the response.
    let log = mcs::poll("both denials logged", Duration::from_secs(5), || {
        let log = server.output();
        (log.contains("wrong_token") && log.contains("missing_token")).then_some(log)
    });
    assert!(
        !log.contains("correct-horse") && !log.contains("wrong-token"),
        "token leaked into logs:\n{log}"
    );
}

#[test]
fn missing_token_file_is_a_start_up_error_naming_the_flag() {
    let output = std::process::Command::new(mcs::bin())
        .args([
            "--secure-port",
            "0",
            "--insecure-port",
            "0",
            "--metrics-bind-address",
            "",
        ])
        .args(["--require-token-file", "/nonexistent/token", "bootstrap"])
        .arg("--server-basedir")
        .arg(mcs::repo().join("config/bootstrap"))
        .arg("--bootstrap-kubeconfig")
        .arg(mcs::repo().join("config/bootstrap/kubeconfig"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--require-token-file /nonexistent/token"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
}

#[test]
fn slowloris_is_cut_off_and_others_keep_being_served() {
    let server = Server::bootstrap(
        &mcs::repo().join("config/bootstrap"),
        &["--header-read-timeout-seconds", "1"],
    );
    let mut slow = TcpStream::connect(server.insecure).unwrap();
    slow.write_all(b"GET /config/master HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let started = Instant::now();
    // Keep trickling a header byte now and then; the server must still close the connection.
    mcs::poll(
        "the slow connection to be closed",
        Duration::from_secs(10),
        || {
            let _ = slow.write_all(b"X");
            slow.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let mut buf = [0u8; 1024];
            match slow.read(&mut buf) {
                Ok(_) => Some(()),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    assert_eq!(
                        server
                            .http("GET", "/config/master", &[("Accept", IGNITION_3_5)])
                            .status,
                        200
                    );
                    None
                }
                Err(_) => Some(()),
            }
        },
    );
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[test]
fn oversized_headers_are_refused() {
    let server = Server::bootstrap(&mcs::repo().join("config/bootstrap"), &[]);
    let huge = "a".repeat(200 * 1024);
    let raw = mcs::exchange(
        server.insecure,
        None,
        &mcs::request_bytes("GET", "/config/master", &[("X-Huge", &huge)]),
    );
    match raw {
        Ok(bytes) if !bytes.is_empty() => {
            let response = mcs::parse_response(&bytes, false).unwrap();
            assert_eq!(response.status, 431);
        }
        // Closing the connection is an acceptable refusal too.
        _ => {}
    }
    assert_eq!(
        server
            .http("GET", "/config/master", &[("Accept", IGNITION_3_5)])
            .status,
        200
    );
}

#[test]
fn malformed_requests_get_clean_answers() {
    let server = Server::bootstrap(&mcs::repo().join("config/bootstrap"), &[]);
    for (path, status) in [
        ("/config/%zz", 400),
        ("/config/%ff%fe", 400),
        ("/config/.", 404),
        ("/config/..", 404),
        ("/config/%00", 404),
        ("/config/..%2f..%2fetc", 404),
        ("/config/..%2f..%2f..%2fetc%2fpasswd", 404),
        ("/config/master%00.yaml", 404),
    ] {
        let response = server.http("GET", path, &[]);
        assert_eq!(response.status, status, "{path}");
        assert!(response.body.is_empty(), "{path}");
    }
    let long = format!("/config/{}", "a".repeat(5000));
    assert_eq!(server.http("GET", &long, &[]).status, 404);
    // Garbage that is not HTTP at all: the connection is answered or closed, never a crash.
    let _ = mcs::exchange(server.insecure, None, b"\x16\x03\x01\x00\x05hello\r\n\r\n");
    let _ = mcs::exchange(server.secure, None, b"GET / HTTP/1.1\r\n\r\n");
    // A truncated TLS handshake.
    let mut truncated = TcpStream::connect(server.secure).unwrap();
    truncated
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .unwrap();
    drop(truncated);
    assert_eq!(
        server
            .https("GET", "/config/master", &[("Accept", IGNITION_3_5)])
            .status,
        200
    );
}

/// The arbiter pool file, pointing at `rendered-arbiter-broken`.
const ARBITER_POOL: &str = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: arbiter\nspec:\n  configuration:\n    name: rendered-arbiter-broken\nstatus:\n  configuration:\n    name: rendered-arbiter-broken\n";

fn broken_machine_config(config_yaml: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: rendered-arbiter-broken\n  annotations:\n    case: \"{}\"\nspec:\n{config_yaml}",
        config_yaml.len()
    )
}

#[test]
fn broken_machine_configs_get_a_clear_status_and_other_pools_keep_serving() {
    let dir = tempfile::tempdir().unwrap();
    mcs::copy_dir(&mcs::repo().join("config/bootstrap"), dir.path());
    std::fs::write(dir.path().join("machine-pools/arbiter.yaml"), ARBITER_POOL).unwrap();
    let mc_path = dir
        .path()
        .join("machine-configs/rendered-arbiter-broken.yaml");
    std::fs::write(
        &mc_path,
        broken_machine_config("  config:\n    ignition:\n      version: 3.5.0\n"),
    )
    .unwrap();
    let server = Server::bootstrap(dir.path(), &[]);
    assert_eq!(
        server
            .http("GET", "/config/arbiter", &[("Accept", IGNITION_3_5)])
            .status,
        200
    );

    let file = |entry: &str| {
        format!(
            "  config:\n    ignition:\n      version: 3.5.0\n    storage:\n      files:\n{entry}"
        )
    };
    let cases: Vec<(&str, String, &str, u16)> = vec![
        (
            "relative file path",
            file("      - path: relative/path\n        mode: 420\n"),
            "3.5.0",
            500,
        ),
        (
            "unknown spec version",
            "  config:\n    ignition:\n      version: 3.7.0\n".into(),
            "3.5.0",
            500,
        ),
        (
            "not a semver",
            "  config:\n    ignition:\n      version: banana\n".into(),
            "3.5.0",
            500,
        ),
        (
            "config is not an object",
            "  config: \"not an ignition config\"\n".into(),
            "3.5.0",
            500,
        ),
        (
            "mode beyond 07777",
            file("      - path: /etc/x\n        mode: 8192\n"),
            "3.5.0",
            500,
        ),
        (
            "special mode bits below 3.4",
            file("      - path: /usr/local/bin/x\n        mode: 2541\n"),
            "3.3.0",
            500,
        ),
        (
            "special mode bits in 3.4",
            file("      - path: /usr/local/bin/x\n        mode: 2541\n"),
            "3.4.0",
            200,
        ),
        (
            "bad base64 data URL",
            file(
                "      - path: /etc/x\n        contents:\n          source: \"data:;base64,@@@\"\n",
            ),
            "3.5.0",
            500,
        ),
        (
            "duplicate file paths",
            file("      - path: /etc/x\n      - path: /etc/x\n"),
            "3.5.0",
            500,
        ),
        (
            "float where an integer belongs",
            file("      - path: /etc/x\n        mode: 420.5\n"),
            "3.5.0",
            500,
        ),
    ];
    let valid = broken_machine_config("  config:\n    ignition:\n      version: 3.5.0\n");
    let mentions = |response: &mcs::Response, text: &str| {
        String::from_utf8_lossy(&response.body).contains(text)
    };
    for (label, config, version, expected) in &cases {
        // From a known-good state, so each answer is caused by this case's own config.
        std::fs::write(&mc_path, &valid).unwrap();
        mcs::poll("the valid config again", Duration::from_secs(5), || {
            let response = server.http("GET", "/config/arbiter", &[("Accept", IGNITION_3_5)]);
            (response.status == 200
                && !mentions(&response, "\"/etc/x\"")
                && !mentions(&response, "/usr/local/bin/x"))
            .then_some(())
        });
        std::fs::write(&mc_path, broken_machine_config(config)).unwrap();
        let accept = format!("application/vnd.coreos.ignition+json;version={version}");
        mcs::poll(
            &format!("{label}: {expected}"),
            Duration::from_secs(5),
            || {
                let response = server.http("GET", "/config/arbiter", &[("Accept", &accept)]);
                let this_config = *expected != 200 || mentions(&response, "/usr/local/bin/x");
                (response.status == *expected && this_config).then_some(response)
            },
        );
        // The other pool is unaffected.
        assert_eq!(
            server
                .https("GET", "/config/master", &[("Accept", IGNITION_3_5)])
                .status,
            200,
            "{label}"
        );
    }
    // A MachineConfig file that is not even YAML: 500, cause logged once, others still served.
    std::fs::write(&mc_path, "spec: [unclosed").unwrap();
    mcs::poll("unparseable YAML: 500", Duration::from_secs(5), || {
        (server
            .http("GET", "/config/arbiter", &[("Accept", IGNITION_3_5)])
            .status
            == 500)
            .then_some(())
    });
    assert!(
        server.output().contains("rendered-arbiter-broken"),
        "causes are logged:\n{}",
        server.output()
    );
    assert_eq!(
        server
            .http("GET", "/config/master", &[("Accept", IGNITION_3_5)])
            .status,
        200
    );
}

/// The bundled bootstrap directory with a file of 4 MiB added to the master pool's rendered
/// config: an answer larger than the kernel takes in one go, as a real pool's can be.
fn bootstrap_dir_with_a_large_master_config() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    mcs::copy_dir(&mcs::repo().join("config/bootstrap"), dir.path());
    let mc_path = dir
        .path()
        .join("machine-configs/rendered-master-example.yaml");
    let mut mc = std::fs::read_to_string(&mc_path).unwrap();
    let big = "x".repeat(4 << 20);
    mc = mc.replace(
        "      files:\n",
        &format!("      files:\n        - path: /etc/big\n          mode: 420\n          contents:\n            source: data:,{big}\n"),
    );
    std::fs::write(&mc_path, mc).unwrap();
    dir
}

#[test]
fn sigterm_lets_an_in_flight_large_response_complete_then_exits_zero() {
    // A large answer, so the response is still being written when SIGTERM arrives.
    let dir = bootstrap_dir_with_a_large_master_config();
    let mut server = Server::bootstrap(dir.path(), &[]);
    let mut stream = TcpStream::connect(server.insecure).unwrap();
    stream
        .write_all(&mcs::request_bytes(
            "GET",
            "/config/master",
            &[("Accept", IGNITION_3_5)],
        ))
        .unwrap();
    // Read a little, then signal, then read the rest slowly.
    let mut received = vec![0u8; 16 * 1024];
    stream.read_exact(&mut received).unwrap();
    server.terminate();
    let mut rest = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        std::thread::sleep(Duration::from_millis(2));
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => rest.extend_from_slice(&buf[..n]),
            Err(e) => panic!(
                "response cut short after {} bytes: {e}",
                received.len() + rest.len()
            ),
        }
    }
    received.extend_from_slice(&rest);
    let response = mcs::parse_response(&received, false).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(
        response
            .header("content-length")
            .unwrap()
            .parse::<usize>()
            .unwrap(),
        response.body.len()
    );
    assert!(response.body.len() > 4 << 20);
    let status = server.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", server.output());
    // New connections are refused once draining started.
    assert!(TcpStream::connect(server.insecure).is_err());
}

/// A rolling update's SIGTERM reaches a replica that a balancer still counts in: connections
/// it was handed just before (one accepted and idle, over TLS after its handshake, and one still
/// in the kernel's backlog because accepting is paused at `--max-connections`) get their first
/// request answered before the server exits, instead of a reset or a close without an answer.
#[test]
fn sigterm_answers_the_connections_already_handed_to_it() {
    let mut server = Server::bootstrap(
        &mcs::repo().join("config/bootstrap"),
        &["--max-connections=1"],
    );
    let request = mcs::request_bytes(
        "GET",
        "/config/master",
        &[("Accept", IGNITION_3_5), ("User-Agent", "Ignition/2.20.0")],
    );
    // Accepted, TLS handshake done, no request yet.
    let mut tls = mcs::tls_client(
        mcs::dev_ca_client(),
        TcpStream::connect(server.secure).unwrap(),
    )
    .unwrap();
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).unwrap();
    }
    // Accepted, nothing sent: the one connection the plain port accepts at a time.
    let mut idle = TcpStream::connect(server.insecure).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Completed by the kernel, never accepted: the port's cap is reached.
    let mut waiting = TcpStream::connect(server.insecure).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    server.terminate();
    std::thread::sleep(Duration::from_millis(300));
    let read_all = |stream: &mut TcpStream| {
        let mut out = Vec::new();
        stream
            .read_to_end(&mut out)
            .map(|_| out)
            .map_err(|e| format!("{e}"))
    };
    for (name, stream) in [("backlog", &mut waiting), ("idle", &mut idle)] {
        stream.write_all(&request).unwrap();
        let raw = read_all(stream).unwrap_or_else(|e| panic!("{name}: cut: {e}"));
        let response = mcs::parse_response(&raw, false)
            .unwrap_or_else(|e| panic!("{name}: no answer ({e}): {raw:?}\n{}", server.output()));
        assert_eq!(response.status, 200, "{name}");
    }
    tls.write_all(&request).unwrap();
    let mut raw = Vec::new();
    mcs::read_to_close(&mut tls, &mut raw).expect("the TLS connection's answer");
    assert_eq!(mcs::parse_response(&raw, false).unwrap().status, 200, "tls");
    let status = server.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", server.output());
}

/// What the server's kernel holds of an answer for one connection, as `ss -tn` shows it in
/// `Send-Q`: bytes written to the socket and not yet acknowledged by the client (the `tx_queue`
/// of `/proc/net/tcp`), read once it has stopped changing.
fn settled_send_queue(server: SocketAddr, client: SocketAddr) -> u64 {
    let line_of = |table: &str| {
        let local = format!(":{:04X}", server.port());
        let remote = format!(":{:04X}", client.port());
        table.lines().skip(1).find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(1)?.ends_with(&local) && fields.get(2)?.ends_with(&remote))
                .then(|| u64::from_str_radix(fields.get(4)?.split(':').next()?, 16).ok())
                .flatten()
        })
    };
    let mut last = None;
    mcs::poll_every(Duration::from_millis(200), Duration::from_secs(10), || {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let now = line_of(&table).expect("the server's side of the connection in /proc/net/tcp");
        let settled = last == Some(now);
        last = Some(now);
        settled.then_some(now)
    })
    .expect("the server's send queue settled within 10 s")
}

/// A machine that stops reading in the middle of its answer (a slow or stalled link; hundreds
/// in a scale-up) leaves little of that answer in the server's kernel memory, which counts
/// against the pod's memory limit: the rest waits in the server's one copy of the answer. Over
/// TLS and plain HTTP; once the machine reads again it gets the whole answer.
#[test]
fn a_machine_that_stops_reading_leaves_little_of_its_answer_queued_in_the_server() {
    let dir = bootstrap_dir_with_a_large_master_config();
    let server = Server::bootstrap(dir.path(), &[]);
    let request = mcs::request_bytes("GET", "/config/master", &[("Accept", IGNITION_3_5)]);
    // Without a bound the kernel queued 3.7 to 4.1 MB here, the whole answer but what the
    // client's buffer took; with it, the bound (`UNSENT_LOW_WATER`, 1 MiB) and at most one
    // write beyond it.
    const AT_MOST: u64 = 1280 * 1024;

    let mut plain = TcpStream::connect(server.insecure).unwrap();
    plain.write_all(&request).unwrap();
    let mut received = vec![0u8; 16 * 1024];
    plain.read_exact(&mut received).unwrap();
    let queued = settled_send_queue(server.insecure, plain.local_addr().unwrap());
    assert!(
        queued <= AT_MOST,
        "plain HTTP: {queued} bytes of the answer queued in the server's socket"
    );
    plain.read_to_end(&mut received).unwrap();
    let answer = mcs::parse_response(&received, false).unwrap();
    assert_eq!(answer.status, 200);
    assert!(answer.body.len() > 4 << 20);
    assert_eq!(
        answer.json()["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|file| file["path"] == "/etc/big")
            .count(),
        1
    );

    let mut secure = mcs::tls_client(
        mcs::dev_ca_client(),
        TcpStream::connect(server.secure).unwrap(),
    )
    .unwrap();
    secure.write_all(&request).unwrap();
    let mut received = vec![0u8; 16 * 1024];
    secure.read_exact(&mut received).unwrap();
    let client = secure.sock.local_addr().unwrap();
    let queued = settled_send_queue(server.secure, client);
    assert!(
        queued <= AT_MOST,
        "TLS: {queued} bytes of the answer queued in the server's socket"
    );
    if let Err(e) = mcs::read_to_close(&mut secure, &mut received) {
        panic!("TLS answer cut short after {} bytes: {e}", received.len());
    }
    let secure_answer = mcs::parse_response(&received, false).unwrap();
    assert_eq!(secure_answer.status, 200);
    assert_eq!(secure_answer.body, answer.body);
}

/// A new server certificate for localhost signed by the development CA, via the openssl CLI.
fn issue_certificate(
    dir: &std::path::Path,
    name: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let key = dir.join(format!("{name}.key"));
    let csr = dir.join(format!("{name}.csr"));
    let cert = dir.join(format!("{name}.crt"));
    let ext = dir.join(format!("{name}.ext"));
    std::fs::write(&ext, "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl CLI (installed by .ci/run)");
        assert!(
            status.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&status.stderr)
        );
    };
    let ca = mcs::repo().join("certs");
    run(&[
        "genpkey".as_ref(),
        "-algorithm".as_ref(),
        "EC".as_ref(),
        "-pkeyopt".as_ref(),
        "ec_paramgen_curve:P-256".as_ref(),
        "-out".as_ref(),
        key.as_os_str(),
    ]);
    run(&[
        "req".as_ref(),
        "-new".as_ref(),
        "-key".as_ref(),
        key.as_os_str(),
        "-subj".as_ref(),
        format!("/CN={name}").as_ref(),
        "-out".as_ref(),
        csr.as_os_str(),
    ]);
    run(&[
        "x509".as_ref(),
        "-req".as_ref(),
        "-in".as_ref(),
        csr.as_os_str(),
        "-CA".as_ref(),
        ca.join("ca.crt").as_os_str(),
        "-CAkey".as_ref(),
        ca.join("ca.key").as_os_str(),
        "-CAcreateserial".as_ref(),
        "-CAserial".as_ref(),
        dir.join("ca.srl").as_os_str(),
        "-days".as_ref(),
        "2".as_ref(),
        "-extfile".as_ref(),
        ext.as_os_str(),
        "-out".as_ref(),
        cert.as_os_str(),
    ]);
    (cert, key)
}

/// The leaf certificate a TLS server presents.
fn presented_certificate(address: std::net::SocketAddr) -> Vec<u8> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut connection = rustls::ClientConnection::new(mcs::dev_ca_client(), name).unwrap();
    let mut tcp = TcpStream::connect(address).unwrap();
    while connection.is_handshaking() {
        connection.complete_io(&mut tcp).unwrap();
    }
    connection.peer_certificates().unwrap()[0].to_vec()
}

fn pem_der(path: &std::path::Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject as _;
    rustls::pki_types::CertificateDer::from_pem_file(path)
        .unwrap()
        .to_vec()
}

#[test]
fn certificate_rotation_under_load_loses_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let (first_cert, first_key) = issue_certificate(dir.path(), "first");
    let (second_cert, second_key) = issue_certificate(dir.path(), "second");
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::copy(&first_cert, &cert).unwrap();
    std::fs::copy(&first_key, &key).unwrap();
    let server = Server::bootstrap(
        &mcs::repo().join("config/bootstrap"),
        &[
            "--cert",
            cert.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
    );
    assert_eq!(presented_certificate(server.secure), pem_der(&first_cert));

    let stop = mcs::StopFlag::new();
    // A failed check below stops the load too, instead of leaving it hammering a dead server.
    let _stop_load = stop.set_on_drop();
    let load = {
        let stop = stop.clone();
        let address = server.secure;
        std::thread::spawn(move || {
            let (mut ok, mut failed) = (0u32, Vec::new());
            while !stop.is_set() {
                match mcs::try_request(
                    address,
                    Some(mcs::dev_ca_client()),
                    "GET",
                    "/config/master",
                    &[("Accept", IGNITION_3_5)],
                ) {
                    Ok(response) if response.status == 200 => ok += 1,
                    Ok(response) => failed.push(format!("status {}", response.status)),
                    Err(e) => failed.push(e.to_string()),
                }
            }
            (ok, failed)
        })
    };

    // A corrupt replacement first: the old certificate keeps serving.
    std::fs::write(
        &cert,
        "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    mcs::poll(
        "the corrupt certificate to be rejected",
        Duration::from_secs(10),
        || {
            let metrics = mcs::request(server.metrics, None, "GET", "/metrics", &[]);
            let text = String::from_utf8_lossy(&metrics.body).into_owned();
            text.lines()
                .any(|l| {
                    l.starts_with("mcs_certificate_reloads_total{result=\"failure\"}")
                        && !l.ends_with(" 0")
                })
                .then_some(())
        },
    );
    assert_eq!(presented_certificate(server.secure), pem_der(&first_cert));

    // Then a valid new pair, written key first (as a secret update may land).
    std::fs::copy(&second_key, &key).unwrap();
    std::fs::copy(&second_cert, &cert).unwrap();
    mcs::poll(
        "the new certificate to be served",
        Duration::from_secs(10),
        || (presented_certificate(server.secure) == pem_der(&second_cert)).then_some(()),
    );
    std::thread::sleep(Duration::from_millis(300));
    stop.set();
    let (ok, failed) = load.join().unwrap();
    assert!(
        failed.is_empty(),
        "requests failed during rotation: {failed:?}"
    );
    assert!(ok > 10, "too few requests under load: {ok}");
}
