//! Real TLS handshakes against a tokio-rustls acceptor built from `server::tls`: the `openssl
//! s_client` CLI and a rustls client connect on 127.0.0.1:0 and we check what a client notices
//! (refused versions and suites, the negotiated suite, ALPN, resumption, which certificate is
//! served, and certificate reload).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use machine_config_server::server::tls::{
    load_certificate, load_server_config, ReloadOutcome, TlsError, TlsPolicy, TlsProfile,
    TlsReloader,
};
use rustls::client::ClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{CipherSuite, HandshakeKind, ProtocolVersion, RootCertStore, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::{TlsAcceptor, TlsConnector};

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

fn dev_certs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("certs")
}

/// Accepts TLS connections with whichever config is current when each connection arrives, and
/// answers every completed handshake with a fixed HTTP response.
async fn spawn_server(configs: watch::Receiver<Arc<ServerConfig>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = TlsAcceptor::from(Arc::clone(&configs.borrow()));
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(RESPONSE).await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    address
}

async fn serve_config(config: Arc<ServerConfig>) -> SocketAddr {
    let (sender, receiver) = watch::channel(config);
    // The sender only needs to outlive the test; leaking it keeps the channel open.
    std::mem::forget(sender);
    spawn_server(receiver).await
}

async fn serve_dev_certs(policy: &TlsPolicy) -> SocketAddr {
    let certs = dev_certs();
    let config = load_server_config(&certs.join("tls.crt"), &certs.join("tls.key"), policy)
        .expect("development certificates load");
    serve_config(config).await
}

/// What `openssl s_client` reports.
#[derive(Debug)]
struct OpensslSession {
    connected: bool,
    protocol: String,
    cipher: String,
    alpn: Option<String>,
    verified: bool,
    output: String,
}

/// Runs `openssl s_client` against `address` with extra arguments, trusting the dev CA.
async fn s_client(address: SocketAddr, args: &[&str]) -> OpensslSession {
    let mut command = Command::new("openssl");
    command
        .arg("s_client")
        .arg("-connect")
        .arg(address.to_string())
        .arg("-servername")
        .arg("localhost")
        .arg("-CAfile")
        .arg(dev_certs().join("ca.crt"))
        .arg("-verify_ip")
        .arg("127.0.0.1")
        .args(args)
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("the openssl CLI is installed");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // "New, TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384" or "New, (NONE), Cipher is (NONE)".
    let (protocol, cipher) = text
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix("New, ")?;
            let (protocol, cipher) = rest.split_once(", Cipher is ")?;
            Some((protocol.to_owned(), cipher.trim().to_owned()))
        })
        .unwrap_or_else(|| ("(NONE)".into(), "(NONE)".into()));
    let alpn = text
        .lines()
        .find_map(|line| line.strip_prefix("ALPN protocol: "))
        .map(str::to_owned);
    OpensslSession {
        connected: output.status.success() && cipher != "(NONE)",
        protocol,
        cipher,
        alpn,
        verified: text.contains("Verify return code: 0 (ok)"),
        output: text,
    }
}

/// What a rustls client saw.
#[derive(Debug)]
struct Handshake {
    version: ProtocolVersion,
    suite: CipherSuite,
    alpn: Option<Vec<u8>>,
    leaf: CertificateDer<'static>,
    kind: HandshakeKind,
}

async fn rustls_connect(
    address: SocketAddr,
    config: Arc<ClientConfig>,
) -> Result<Handshake, std::io::Error> {
    let tcp = TcpStream::connect(address).await?;
    let mut tls = TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await?;
    // Reading the response also processes TLS 1.3 session tickets.
    let mut body = Vec::new();
    tls.read_to_end(&mut body).await?;
    assert_eq!(body, RESPONSE);
    let (_, connection) = tls.get_ref();
    Ok(Handshake {
        version: connection.protocol_version().unwrap(),
        suite: connection.negotiated_cipher_suite().unwrap().suite(),
        alpn: connection.alpn_protocol().map(<[u8]>::to_vec),
        leaf: connection.peer_certificates().unwrap()[0].clone(),
        kind: connection.handshake_kind().unwrap(),
    })
}

fn client_config(
    ca_pem: &[u8],
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

fn dev_client(versions: &[&'static rustls::SupportedProtocolVersion]) -> Arc<ClientConfig> {
    let ca = std::fs::read(dev_certs().join("ca.crt")).unwrap();
    client_config(&ca, versions, &[b"http/1.1"])
}

const TLS12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
const TLS13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

// ---------------------------------------------------------------------------------------------
// Policy on the wire
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn intermediate_serves_tls12_and_tls13_with_a_profile_suite_and_a_valid_dev_certificate() {
    let address = serve_dev_certs(&TlsPolicy::intermediate()).await;
    let profile_names = TlsProfile::Intermediate.ciphers();
    for (flag, protocol) in [("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")] {
        let session = s_client(address, &[flag]).await;
        assert!(session.connected, "{flag}: {}", session.output);
        assert_eq!(session.protocol, protocol);
        assert!(
            profile_names.contains(&session.cipher),
            "{flag}: negotiated {} is not in the Intermediate profile",
            session.cipher
        );
        assert!(
            session.verified,
            "dev certificate chain: {}",
            session.output
        );
    }
}

#[tokio::test]
async fn intermediate_refuses_tls10_and_tls11_clients() {
    let address = serve_dev_certs(&TlsPolicy::intermediate()).await;
    for flag in ["-tls1", "-tls1_1"] {
        let session = s_client(address, &[flag, "-cipher", "DEFAULT@SECLEVEL=0"]).await;
        assert!(
            !session.connected,
            "{flag} was accepted: {}",
            session.output
        );
    }
}

#[tokio::test]
async fn old_profile_still_refuses_tls10_because_rustls_cannot_do_it() {
    let policy = TlsPolicy::from_profile(&TlsProfile::Old, "test").unwrap();
    assert!(policy.warnings().iter().any(|w| w.contains("VersionTLS10")));
    let address = serve_dev_certs(&policy).await;
    let session = s_client(address, &["-tls1", "-cipher", "DEFAULT@SECLEVEL=0"]).await;
    assert!(!session.connected, "{}", session.output);
    let session = s_client(address, &["-tls1_2"]).await;
    assert!(session.connected, "{}", session.output);
}

#[tokio::test]
async fn modern_refuses_tls12_clients_and_serves_tls13() {
    let policy = TlsPolicy::from_profile(&TlsProfile::Modern, "test").unwrap();
    let address = serve_dev_certs(&policy).await;

    let session = s_client(address, &["-tls1_2"]).await;
    assert!(!session.connected, "TLS 1.2 accepted: {}", session.output);
    assert!(rustls_connect(address, dev_client(TLS12)).await.is_err());

    let session = s_client(address, &["-tls1_3"]).await;
    assert!(session.connected, "{}", session.output);
    let handshake = rustls_connect(address, dev_client(TLS13)).await.unwrap();
    assert_eq!(handshake.version, ProtocolVersion::TLSv1_3);
}

#[tokio::test]
async fn a_custom_suite_list_is_what_gets_negotiated() {
    // Dev certificate is ECDSA: of the TLS 1.2 suites only ECDHE-ECDSA ones can be used.
    let policy = TlsPolicy::from_flags(
        "VersionTLS12",
        &[
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256".to_owned(),
            "TLS_AES_128_GCM_SHA256".to_owned(),
        ],
    )
    .unwrap();
    let address = serve_dev_certs(&policy).await;

    let session = s_client(address, &["-tls1_2"]).await;
    assert!(session.connected, "{}", session.output);
    assert_eq!(session.cipher, "ECDHE-ECDSA-CHACHA20-POLY1305");
    let session = s_client(
        address,
        &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"],
    )
    .await;
    assert!(
        !session.connected,
        "unlisted suite accepted: {}",
        session.output
    );

    let session = s_client(address, &["-tls1_3"]).await;
    assert!(session.connected, "{}", session.output);
    assert_eq!(session.cipher, "TLS_AES_128_GCM_SHA256");
    let session = s_client(
        address,
        &["-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"],
    )
    .await;
    assert!(
        !session.connected,
        "unlisted TLS 1.3 suite accepted: {}",
        session.output
    );

    let handshake = rustls_connect(address, dev_client(TLS12)).await.unwrap();
    assert_eq!(
        handshake.suite,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
    );
}

#[tokio::test]
async fn alpn_offers_http11_only() {
    let address = serve_dev_certs(&TlsPolicy::intermediate()).await;
    let ca = std::fs::read(dev_certs().join("ca.crt")).unwrap();
    let versions = &[&rustls::version::TLS13, &rustls::version::TLS12];

    // A client that wants h2 only must not get it (rustls refuses: no_application_protocol).
    let h2_only = client_config(&ca, versions, &[b"h2"]);
    match rustls_connect(address, h2_only).await {
        Err(_) => {}
        Ok(handshake) => assert_ne!(handshake.alpn.as_deref(), Some(&b"h2"[..])),
    }
    let session = s_client(address, &["-alpn", "h2"]).await;
    assert_ne!(session.alpn.as_deref(), Some("h2"), "{}", session.output);

    let both = client_config(&ca, versions, &[b"h2", b"http/1.1"]);
    let handshake = rustls_connect(address, both).await.unwrap();
    assert_eq!(handshake.alpn.as_deref(), Some(&b"http/1.1"[..]));
    let session = s_client(address, &["-alpn", "h2,http/1.1"]).await;
    assert_eq!(
        session.alpn.as_deref(),
        Some("http/1.1"),
        "{}",
        session.output
    );

    // No ALPN at all is fine (curl --http1.1 without ALPN, older Ignition).
    let none = client_config(&ca, versions, &[]);
    let handshake = rustls_connect(address, none).await.unwrap();
    assert_eq!(handshake.alpn, None);
}

#[tokio::test]
async fn sessions_resume_over_tls12_and_tls13() {
    let address = serve_dev_certs(&TlsPolicy::intermediate()).await;
    for versions in [TLS12, TLS13] {
        // One client config = one client session cache.
        let client = dev_client(versions);
        let first = rustls_connect(address, Arc::clone(&client)).await.unwrap();
        assert_eq!(first.kind, HandshakeKind::Full);
        let second = rustls_connect(address, client).await.unwrap();
        assert_eq!(second.kind, HandshakeKind::Resumed, "{:?}", second.version);
    }
}

// ---------------------------------------------------------------------------------------------
// Loading files
// ---------------------------------------------------------------------------------------------

fn openssl(args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the openssl CLI is installed");
    assert!(status.success(), "openssl {args:?}");
}

/// A self-signed certificate for 127.0.0.1 for an existing key file.
fn self_signed_cert(dir: &Path, key: &Path) -> PathBuf {
    let cert = dir.join("tls.crt");
    openssl(&[
        "req",
        "-x509",
        "-new",
        "-key",
        key.to_str().unwrap(),
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-days",
        "2",
        "-out",
        cert.to_str().unwrap(),
    ]);
    cert
}

#[tokio::test]
async fn pkcs1_rsa_and_sec1_ec_keys_load_and_serve() {
    let dir = tempfile::tempdir().unwrap();
    let rsa_key = dir.path().join("rsa.key");
    openssl(&[
        "genrsa",
        "-traditional",
        "-out",
        rsa_key.to_str().unwrap(),
        "2048",
    ]);
    let ec_key = dir.path().join("ec.key");
    openssl(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        ec_key.to_str().unwrap(),
    ]);
    for (key, marker, key_exchange) in [
        (&rsa_key, "BEGIN RSA PRIVATE KEY", "ECDHE_RSA"),
        (&ec_key, "BEGIN EC PRIVATE KEY", "ECDHE_ECDSA"),
    ] {
        assert!(std::fs::read_to_string(key).unwrap().contains(marker));
        let cert = self_signed_cert(dir.path(), key);
        let config =
            load_server_config(&cert, key, &TlsPolicy::intermediate()).expect("key format loads");
        let address = serve_config(config).await;
        let client = client_config(&std::fs::read(&cert).unwrap(), TLS12, &[b"http/1.1"]);
        let handshake = rustls_connect(address, client).await.unwrap();
        let suite = format!("{:?}", handshake.suite);
        assert!(suite.contains(key_exchange), "{marker}: {suite}");
    }
}

#[test]
fn mismatched_certificate_and_key_fail_naming_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let other_key = dir.path().join("other.key");
    std::fs::write(
        &other_key,
        rcgen::KeyPair::generate().unwrap().serialize_pem(),
    )
    .unwrap();
    let cert = dev_certs().join("tls.crt");
    let err = load_server_config(&cert, &other_key, &TlsPolicy::intermediate()).unwrap_err();
    assert_eq!(err.kind(), "key_mismatch");
    let message = err.to_string();
    assert!(message.contains(&*cert.to_string_lossy()), "{message}");
    assert!(message.contains(&*other_key.to_string_lossy()), "{message}");
}

#[test]
fn broken_files_fail_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good_cert = dev_certs().join("tls.crt");
    let good_key = dev_certs().join("tls.key");
    let policy = TlsPolicy::intermediate();
    let check = |cert: &Path, key: &Path, named: &Path, kind: &str| {
        let err = load_server_config(cert, key, &policy).unwrap_err();
        assert_eq!(err.kind(), kind, "{err}");
        assert!(
            err.to_string().contains(&*named.to_string_lossy()),
            "{err} does not name {}",
            named.display()
        );
    };

    let missing = dir.path().join("missing.crt");
    check(&missing, &good_key, &missing, "read");

    let truncated = dir.path().join("truncated.crt");
    let pem = std::fs::read_to_string(&good_cert).unwrap();
    std::fs::write(&truncated, &pem[..pem.len() / 2]).unwrap();
    check(&truncated, &good_key, &truncated, "pem");

    let empty = dir.path().join("empty.crt");
    std::fs::write(&empty, "").unwrap();
    check(&empty, &good_key, &empty, "pem");

    let not_a_cert = dir.path().join("garbage.crt");
    std::fs::write(
        &not_a_cert,
        "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    check(&not_a_cert, &good_key, &not_a_cert, "invalid_certificate");

    // A key file that holds a certificate only.
    check(&good_cert, &good_cert, &good_cert, "pem");

    let bad_key = dir.path().join("bad.key");
    std::fs::write(
        &bad_key,
        "-----BEGIN PRIVATE KEY-----\naGVsbG8gd29ybGQ=\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    check(&good_cert, &bad_key, &bad_key, "invalid_key");
}

#[test]
fn dev_certificate_expiry_is_read() {
    let certs = dev_certs();
    let loaded = load_certificate(
        &certs.join("tls.crt"),
        &certs.join("tls.key"),
        &TlsPolicy::intermediate(),
    )
    .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    // Long-lived development certificates: still valid in five years.
    assert!(loaded.not_after_unix > now + 5 * 365 * 86_400, "{loaded:?}");
}

// ---------------------------------------------------------------------------------------------
// Reload
// ---------------------------------------------------------------------------------------------

const RELOAD_INTERVAL: Duration = Duration::from_millis(100);
const DEADLINE: Duration = Duration::from_secs(10);

struct TestCa {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

struct Leaf {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
}

impl TestCa {
    fn new() -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "reload test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Self { cert, key }
    }

    fn leaf(&self) -> Leaf {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&key, &self.cert, &self.key)
            .unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    fn client(&self) -> Arc<ClientConfig> {
        client_config(
            self.cert.pem().as_bytes(),
            &[&rustls::version::TLS13, &rustls::version::TLS12],
            &[b"http/1.1"],
        )
    }
}

/// Replaces a file the way editors and `mv` do: write a new file, rename it over the old one.
fn replace(path: &Path, contents: &str) {
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, contents).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

/// Connects until the served leaf is `expected`, or fails at the deadline. The client config (and
/// so its session cache) is reused on purpose: a resumed session must not hide a new certificate.
async fn wait_for_leaf(address: SocketAddr, client: &Arc<ClientConfig>, expected: &Leaf) {
    let start = Instant::now();
    loop {
        let served = rustls_connect(address, Arc::clone(client)).await.unwrap();
        if served.leaf == expected.der {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "expected certificate not served after {DEADLINE:?}: served {} bytes, expected {}",
            served.leaf.len(),
            expected.der.len()
        );
        tokio::time::sleep(RELOAD_INTERVAL / 2).await;
    }
}

async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(RELOAD_INTERVAL / 2).await;
    }
}

type Outcomes = Arc<Mutex<Vec<String>>>;

fn start_reloader(cert: &Path, key: &Path) -> (TlsReloader, Outcomes) {
    let outcomes: Outcomes = Arc::default();
    let seen = Arc::clone(&outcomes);
    let reloader = TlsReloader::start_with_observer(
        cert,
        key,
        TlsPolicy::intermediate(),
        RELOAD_INTERVAL,
        Arc::new(move |outcome: &ReloadOutcome| {
            let label = match outcome {
                ReloadOutcome::Reloaded { .. } => "reloaded".to_owned(),
                ReloadOutcome::Rejected { error } => error.kind().to_owned(),
            };
            seen.lock().unwrap().push(label);
        }),
    )
    .unwrap();
    (reloader, outcomes)
}

#[tokio::test]
async fn a_replaced_pair_is_served_to_new_connections() {
    let ca = TestCa::new();
    let (first, second) = (ca.leaf(), ca.leaf());
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &first.cert_pem).unwrap();
    std::fs::write(&key, &first.key_pem).unwrap();

    let (reloader, outcomes) = start_reloader(&cert, &key);
    let address = spawn_server(reloader.subscribe()).await;
    let client = ca.client();
    wait_for_leaf(address, &client, &first).await;

    replace(&key, &second.key_pem);
    replace(&cert, &second.cert_pem);
    wait_for_leaf(address, &client, &second).await;
    wait_until("the success to be counted", || {
        reloader.stats().successes() == 1
    })
    .await;
    assert!(reloader.stats().not_after_unix() > 0);
    // The two renames are not atomic together; a poll between them is only acted on if the
    // half-replaced state stays unchanged for a whole interval, so normally nothing fails.
    assert_eq!(
        outcomes.lock().unwrap().last().map(String::as_str),
        Some("reloaded")
    );
    reloader.stop().await;
}

#[tokio::test]
async fn a_kubernetes_secret_symlink_swap_is_picked_up() {
    let ca = TestCa::new();
    let (first, second) = (ca.leaf(), ca.leaf());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // The kubelet's atomic writer layout: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>.
    let write_version = |name: &str, leaf: &Leaf| {
        let version = root.join(name);
        std::fs::create_dir(&version).unwrap();
        std::fs::write(version.join("tls.crt"), &leaf.cert_pem).unwrap();
        std::fs::write(version.join("tls.key"), &leaf.key_pem).unwrap();
    };
    write_version("..2026_01_01_00_00_00.1", &first);
    std::os::unix::fs::symlink("..2026_01_01_00_00_00.1", root.join("..data")).unwrap();
    for file in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{file}"), root.join(file)).unwrap();
    }

    let (reloader, outcomes) = start_reloader(&root.join("tls.crt"), &root.join("tls.key"));
    let address = spawn_server(reloader.subscribe()).await;
    let client = ca.client();
    wait_for_leaf(address, &client, &first).await;

    write_version("..2026_02_01_00_00_00.2", &second);
    std::os::unix::fs::symlink("..2026_02_01_00_00_00.2", root.join("..data_tmp")).unwrap();
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    std::fs::remove_dir_all(root.join("..2026_01_01_00_00_00.1")).unwrap();

    wait_for_leaf(address, &client, &second).await;
    wait_until("the success to be counted", || {
        reloader.stats().successes() == 1
    })
    .await;
    // The swap is atomic: no intermediate state was ever rejected.
    assert_eq!(reloader.stats().failures(), 0);
    assert_eq!(*outcomes.lock().unwrap(), ["reloaded"]);
    reloader.stop().await;
}

#[tokio::test]
async fn bad_replacements_keep_the_old_certificate_and_count_failures() {
    let ca = TestCa::new();
    let (first, second) = (ca.leaf(), ca.leaf());
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &first.cert_pem).unwrap();
    std::fs::write(&key, &first.key_pem).unwrap();

    let (reloader, outcomes) = start_reloader(&cert, &key);
    let address = spawn_server(reloader.subscribe()).await;
    let client = ca.client();
    wait_for_leaf(address, &client, &first).await;
    let stats = reloader.stats();

    // A partial write: half a certificate.
    replace(&cert, &second.cert_pem[..second.cert_pem.len() / 2]);
    wait_until("the partial file to be rejected", || stats.failures() == 1).await;
    wait_for_leaf(address, &client, &first).await;

    // A complete certificate whose key is not the one on disk.
    replace(&cert, &second.cert_pem);
    wait_until("the mismatched pair to be rejected", || {
        stats.failures() == 2
    })
    .await;
    wait_for_leaf(address, &client, &first).await;

    // Garbage where the key should be.
    replace(&key, "not a key\n");
    wait_until("the corrupt key to be rejected", || stats.failures() == 3).await;
    wait_for_leaf(address, &client, &first).await;
    assert_eq!(stats.successes(), 0);

    // The right key arrives: the new pair is served.
    replace(&key, &second.key_pem);
    wait_for_leaf(address, &client, &second).await;
    wait_until("the success to be counted", || stats.successes() == 1).await;
    assert_eq!(
        *outcomes.lock().unwrap(),
        ["pem", "key_mismatch", "pem", "reloaded"]
    );
    reloader.stop().await;
}

#[test]
fn an_invalid_pair_at_start_is_an_error() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("tls.key");
    std::fs::write(&key, rcgen::KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let result = runtime.block_on(async {
        TlsReloader::start(
            &dev_certs().join("tls.crt"),
            &key,
            TlsPolicy::intermediate(),
            RELOAD_INTERVAL,
        )
        .map(|_| ())
    });
    assert!(matches!(result, Err(TlsError::KeyMismatch { .. })));
}
