//! Every key the cluster's PKI configuration can issue (config.openshift.io/v1alpha1 `PKI`:
//! RSA of 2048 to 8192 bits in steps of 1024, ECDSA on P-256, P-384 and P-521), served by the
//! real binary in bootstrap mode with a certificate of each kind (`tests/fixtures/pki/`, chains
//! whose CA is the same kind and two whose CA is another), under each TLS profile the server
//! takes (the installer's APIServer manifest: Old, Intermediate, Modern), over TLS 1.2 and 1.3,
//! from start and after a hot reload that changes the algorithm; each connection made by real
//! clients: rustls (with this build's crypto), OpenSSL's `s_client` (what was negotiated: the
//! protocol, the suite, the signature the server made) and curl (the answer). A key no build can
//! use is refused naming its algorithm and size, at start and at reload.
//!
//! The same tests run on the OpenSSL build (`.ci/run` runs this file there too): the matrix is
//! the backend's, whichever it is.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use machine_config_server::server::tls::TlsPolicy;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;
use support::mcs::{self, poll, repo, Server};

const ACCEPT_34: &str = "application/vnd.coreos.ignition+json;version=3.4.0";
const DEADLINE: Duration = Duration::from_secs(30);

/// The fixtures' chains: each kind under a CA of its own kind, and two across kinds.
const KINDS: [&str; 12] = [
    "rsa2048",
    "rsa3072",
    "rsa4096",
    "rsa5120",
    "rsa6144",
    "rsa7168",
    "rsa8192",
    "p256",
    "p384",
    "p521",
    "cross-p521-under-rsa8192",
    "cross-rsa8192-under-p521",
];

fn pki(kind: &str) -> PathBuf {
    repo().join("tests/fixtures/pki").join(kind)
}

/// What the server's handshake signature must be for the leaf's key, as `s_client -brief`
/// names it (signature type, hash): TLS 1.3 signs RSA with PSS; each ECDSA curve with its own
/// hash (rustls signs ECDSA only with the curve's hash, as TLS 1.3 requires and Go does).
fn expected_signature(kind: &str) -> (&'static str, &'static str) {
    let leaf = kind.trim_start_matches("cross-");
    match &leaf[..4] {
        "p256" => ("ECDSA", "SHA256"),
        "p384" => ("ECDSA", "SHA384"),
        "p521" => ("ECDSA", "SHA512"),
        _ => ("RSA-PSS", ""),
    }
}

fn leaf_is_ecdsa(kind: &str) -> bool {
    kind.trim_start_matches("cross-").starts_with('p')
}

/// The key kind as `/status` and the errors name it.
fn key_name(kind: &str) -> String {
    let leaf = kind
        .trim_start_matches("cross-")
        .split("-under-")
        .next()
        .unwrap_or(kind);
    match leaf {
        "p256" => "ECDSA P-256".into(),
        "p384" => "ECDSA P-384".into(),
        "p521" => "ECDSA P-521".into(),
        rsa => format!("RSA {}", rsa.trim_start_matches("rsa")),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Profile {
    Old,
    Intermediate,
    Modern,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Old => "Old",
            Profile::Intermediate => "Intermediate",
            Profile::Modern => "Modern",
        }
    }

    fn allows_tls12(self) -> bool {
        self != Profile::Modern
    }
}

/// The bundled example with an installer's APIServer manifest naming `profile`.
fn base_dir(profile: Profile) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    mcs::copy_dir(&repo().join("config/bootstrap"), dir.path());
    let manifest = format!(
        "apiVersion: config.openshift.io/v1\nkind: APIServer\nmetadata:\n  name: cluster\nspec:\n  tlsSecurityProfile:\n    type: {}\n    {}: {{}}\n",
        profile.name(),
        profile.name().to_ascii_lowercase()
    );
    std::fs::create_dir_all(dir.path().join("api-server")).unwrap();
    std::fs::write(dir.path().join("api-server/api-server.yaml"), manifest).unwrap();
    dir
}

fn start(base: &Path, cert: &Path, key: &Path) -> Server {
    let base_text = base.display().to_string();
    let kubeconfig = base.join("kubeconfig").display().to_string();
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    Server::start(&[
        "--cert",
        &cert,
        "--key",
        &key,
        "bootstrap",
        "--server-basedir",
        &base_text,
        "--bootstrap-kubeconfig",
        &kubeconfig,
    ])
}

/// A rustls client with this build's crypto (the Intermediate profile's suites), trusting `ca`
/// and speaking `version` only.
fn rustls_client(
    ca: &Path,
    version: &'static rustls::SupportedProtocolVersion,
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(TlsPolicy::intermediate().client_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// What one rustls connection saw: the answer's status, the suite, the leaf certificate.
struct RustlsSeen {
    status: u16,
    suite: String,
    leaf: Vec<u8>,
}

fn rustls_get(
    address: SocketAddr,
    client: Arc<rustls::ClientConfig>,
) -> Result<RustlsSeen, String> {
    let stream =
        TcpStream::connect_timeout(&address, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut tls = mcs::tls_client(client, stream).map_err(|e| e.to_string())?;
    tls.write_all(&mcs::request_bytes(
        "GET",
        "/config/master",
        &[("Accept", ACCEPT_34)],
    ))
    .map_err(|e| format!("handshake or write: {e}"))?;
    let mut raw = Vec::new();
    mcs::read_to_close(&mut tls, &mut raw).map_err(|e| e.to_string())?;
    let response = mcs::parse_response(&raw, false).map_err(|e| e.to_string())?;
    let suite = tls
        .conn
        .negotiated_cipher_suite()
        .map(|s| format!("{:?}", s.suite()))
        .unwrap_or_default();
    let leaf = tls
        .conn
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|c| c.as_ref().to_vec())
        .unwrap_or_default();
    Ok(RustlsSeen {
        status: response.status,
        suite,
        leaf,
    })
}

/// `openssl s_client -brief` against `address`: its report, and whether it connected.
fn s_client(address: SocketAddr, ca: &Path, version_flag: &str) -> (bool, String) {
    let mut child = Command::new("openssl")
        .args([
            "s_client",
            "-brief",
            "-verify_return_error",
            "-servername",
            "localhost",
        ])
        .arg("-connect")
        .arg(address.to_string())
        .arg("-CAfile")
        .arg(ca)
        .arg(version_flag)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the openssl CLI is installed");
    // End the session at once: the handshake is what is looked at.
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (
        text.contains("CONNECTION ESTABLISHED") && text.contains("Verification: OK"),
        text,
    )
}

/// The `s_client -brief` field `name`.
fn field<'a>(report: &'a str, name: &str) -> Option<&'a str> {
    report
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// curl's status for `/config/master` over TLS `version` only (`None`: no answer).
fn curl_status(address: SocketAddr, ca: &Path, version: &str) -> Option<u16> {
    let output = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "20",
        ])
        .arg(format!("--tlsv{version}"))
        .args(["--tls-max", version])
        .arg("--cacert")
        .arg(ca)
        .args(["-H", &format!("Accept: {ACCEPT_34}")])
        .arg(format!(
            "https://localhost:{}/config/master",
            address.port()
        ))
        .output()
        .expect("curl is installed");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .ok()
        .filter(|code| *code != 0)
}

/// Every check of one server (one kind under one profile); the failures, if any.
fn check_server(kind: &str, profile: Profile) -> Vec<String> {
    let dir = pki(kind);
    let base = base_dir(profile);
    let server = start(base.path(), &dir.join("tls.crt"), &dir.join("tls.key"));
    let ca = dir.join("ca.crt");
    let leaf_pem = std::fs::read(dir.join("tls.crt")).unwrap();
    let leaf = CertificateDer::from_pem_slice(&leaf_pem).unwrap();
    let mut failures = Vec::new();
    let mut fail = |what: String| failures.push(format!("{kind} under {}: {what}", profile.name()));
    for (version, rustls_version, s_client_flag) in [
        ("1.2", &rustls::version::TLS12, "-tls1_2"),
        ("1.3", &rustls::version::TLS13, "-tls1_3"),
    ] {
        let allowed = version == "1.3" || profile.allows_tls12();
        // rustls: the answer, the suite, the certificate.
        match rustls_get(server.secure, rustls_client(&ca, rustls_version)) {
            Ok(seen) if allowed => {
                if seen.status != 200 {
                    fail(format!("rustls TLS {version}: status {}", seen.status));
                }
                if seen.leaf != leaf.as_ref() {
                    fail(format!(
                        "rustls TLS {version}: another certificate was served"
                    ));
                }
                let family = if leaf_is_ecdsa(kind) { "ECDSA" } else { "RSA" };
                if version == "1.2" && !seen.suite.contains(&format!("ECDHE_{family}_")) {
                    fail(format!(
                        "rustls TLS 1.2 negotiated {} for a {family} key",
                        seen.suite
                    ));
                }
            }
            Ok(_) => fail(format!(
                "rustls TLS {version} connected; the profile forbids it"
            )),
            Err(e) if allowed => fail(format!("rustls TLS {version}: {e}")),
            Err(_) => {}
        }
        // s_client: what was negotiated and signed.
        let (connected, report) = s_client(server.secure, &ca, s_client_flag);
        if connected != allowed {
            fail(format!(
                "s_client TLS {version}: connected {connected}, expected {allowed}:\n{report}"
            ));
        } else if connected {
            let (signature, hash) = expected_signature(kind);
            let protocol = format!("TLSv{version}");
            if field(&report, "Protocol version") != Some(protocol.as_str()) {
                fail(format!(
                    "s_client TLS {version}: protocol {:?}",
                    field(&report, "Protocol version")
                ));
            }
            if field(&report, "Signature type") != Some(signature)
                || (!hash.is_empty() && field(&report, "Hash used") != Some(hash))
            {
                fail(format!(
                    "s_client TLS {version}: signature {:?} with {:?}, expected {signature} {hash}",
                    field(&report, "Signature type"),
                    field(&report, "Hash used")
                ));
            }
        }
        // curl: the answer a client sees.
        let status = curl_status(server.secure, &ca, version);
        if allowed && status != Some(200) {
            fail(format!("curl TLS {version}: {status:?}"));
        }
        if !allowed && status.is_some() {
            fail(format!(
                "curl TLS {version} was answered {status:?}; the profile forbids it"
            ));
        }
    }
    // The status page names what is served.
    let page = server.admin_status();
    if page["serving_certificate"]["key"] != key_name(kind).as_str() {
        fail(format!("/status says {}", page["serving_certificate"]));
    }
    failures
}

#[test]
fn every_key_the_pki_allows_serves_under_every_profile_over_tls12_and_tls13() {
    let cases: Vec<(&str, Profile)> = KINDS
        .iter()
        .flat_map(|kind| {
            [Profile::Old, Profile::Intermediate, Profile::Modern]
                .into_iter()
                .map(move |profile| (*kind, profile))
        })
        .collect();
    // A few servers at a time: RSA 8192 handshakes take a while, the rest is waiting.
    let failures: Vec<String> = cases
        .chunks(6)
        .flat_map(|chunk| {
            std::thread::scope(|scope| {
                let running: Vec<_> = chunk
                    .iter()
                    .map(|(kind, profile)| scope.spawn(move || check_server(kind, *profile)))
                    .collect();
                running
                    .into_iter()
                    .flat_map(|t| t.join().unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Replaces the pair the server reads with `kind`'s, the certificate first, as a writer that
/// is not atomic would (the reloader waits until both are stable).
fn replace_pair(cert: &Path, key: &Path, kind: &str) {
    std::fs::copy(pki(kind).join("tls.crt"), cert).unwrap();
    std::fs::copy(pki(kind).join("tls.key"), key).unwrap();
}

fn leaf_of(kind: &str) -> Vec<u8> {
    let pem = std::fs::read(pki(kind).join("tls.crt")).unwrap();
    CertificateDer::from_pem_slice(&pem)
        .unwrap()
        .as_ref()
        .to_vec()
}

/// Waits until a new connection gets `kind`'s certificate (trusting `kind`'s CA).
fn wait_for_leaf(server: &Server, kind: &str) {
    let expected = leaf_of(kind);
    let ca = pki(kind).join("ca.crt");
    poll(
        &format!("{kind}'s certificate on new connections"),
        DEADLINE,
        || {
            rustls_get(server.secure, rustls_client(&ca, &rustls::version::TLS13))
                .ok()
                .filter(|seen| seen.leaf == expected && seen.status == 200)
        },
    );
    let (connected, report) = s_client(server.secure, &ca, "-tls1_2");
    assert!(
        connected,
        "s_client TLS 1.2 after the reload to {kind}:\n{report}"
    );
    assert_eq!(curl_status(server.secure, &ca, "1.2"), Some(200), "{kind}");
}

#[test]
fn a_running_server_reloads_from_rsa_to_ecdsa_and_back_and_from_p256_to_p521() {
    let work = tempfile::tempdir().unwrap();
    let (cert, key) = (work.path().join("tls.crt"), work.path().join("tls.key"));
    replace_pair(&cert, &key, "rsa3072");
    let base = base_dir(Profile::Intermediate);
    let server = start(base.path(), &cert, &key);
    wait_for_leaf(&server, "rsa3072");
    for kind in [
        "p521",
        "rsa8192",
        "p256",
        "p521",
        "cross-rsa8192-under-p521",
        "rsa2048",
    ] {
        replace_pair(&cert, &key, kind);
        wait_for_leaf(&server, kind);
        let page = server.admin_status();
        assert_eq!(
            page["serving_certificate"]["key"],
            key_name(kind).as_str(),
            "{page}"
        );
    }
    let reloads = server.metric_value("mcs_certificate_reloads_total", &[("result", "success")]);
    assert_eq!(reloads, Some(6.0), "{}", server.output());
}

#[test]
fn a_key_no_build_can_use_is_refused_naming_its_algorithm_and_size() {
    let refused = repo().join("tests/fixtures/pki/refused");
    let base = base_dir(Profile::Intermediate);
    for (kind, named) in [
        ("rsa1024", "RSA 1024"),
        ("brainpoolP256r1", "ECDSA brainpoolP256r1"),
        ("secp256k1", "ECDSA secp256k1"),
        ("ed448", "Ed448"),
    ] {
        // At start: exit code 64 and one line naming the file, the kind and what is supported
        // (the key is read before any port is bound).
        let output = Command::new(mcs::bin())
            .arg("--cert")
            .arg(refused.join(format!("{kind}.crt")))
            .arg("--key")
            .arg(refused.join(format!("{kind}.key")))
            .args([
                "--secure-port",
                "1",
                "--insecure-port",
                "0",
                "--metrics-bind-address",
                "",
            ])
            .arg("bootstrap")
            .arg("--server-basedir")
            .arg(base.path())
            .arg("--bootstrap-kubeconfig")
            .arg(base.path().join("kubeconfig"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{kind}:\n{stderr}");
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("machine-config-server:"))
            .collect();
        assert_eq!(lines.len(), 1, "{kind}: one error line:\n{stderr}");
        let line = lines[0];
        assert!(line.contains(&format!("{kind}.key")), "{line}");
        assert!(line.contains(&format!("an {named} private key")), "{line}");
        assert!(
            line.contains("RSA of 2048 to 8192 bits, ECDSA on P-256, P-384 or P-521"),
            "{line}"
        );
        assert!(
            !line.contains("failed to parse"),
            "no parser's generic error: {line}"
        );
    }

    // At reload: the old certificate keeps serving; one error line, the metric, /status.
    let work = tempfile::tempdir().unwrap();
    let (cert, key) = (work.path().join("tls.crt"), work.path().join("tls.key"));
    replace_pair(&cert, &key, "p384");
    let server = start(base.path(), &cert, &key);
    wait_for_leaf(&server, "p384");
    std::fs::copy(refused.join("brainpoolP256r1.crt"), &cert).unwrap();
    std::fs::copy(refused.join("brainpoolP256r1.key"), &key).unwrap();
    let page = poll("the refused reload on /status", DEADLINE, || {
        let page = server.admin_status();
        page["serving_certificate"]["last_rejected"]["error"]
            .is_string()
            .then_some(page)
    });
    let certificate = &page["serving_certificate"];
    let error = certificate["last_rejected"]["error"].as_str().unwrap();
    assert!(
        error.contains("an ECDSA brainpoolP256r1 private key"),
        "{certificate}"
    );
    assert_eq!(
        certificate["key"], "ECDSA P-384",
        "the old key still serves: {certificate}"
    );
    assert_eq!(certificate["last_rejected"]["kind"], "invalid_key");
    assert_eq!(
        server.metric_value("mcs_certificate_reloads_total", &[("result", "failure")]),
        Some(1.0)
    );
    wait_for_leaf(&server, "p384");
    let rejected_lines = server
        .output()
        .lines()
        .filter(|l| l.contains("TLS certificate reload rejected"))
        .count();
    assert_eq!(rejected_lines, 1, "{}", server.output());
}
