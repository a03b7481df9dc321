//! The Kubernetes client's TLS, with the real binary in `start` mode: the API server (the in-test
//! one, which speaks HTTP) sits behind a TLS front that records every ClientHello and forwards
//! the bytes. What the binary's client offers is what the process's crypto and the TLS policy
//! say, whichever backend the build has: the policy's suites (`--tls-cipher-suites`), TLS 1.3
//! only with `--tls-min-version VersionTLS13`, and, in FIPS mode (the FIPS end-to-end tier),
//! only approved suites, groups and signature schemes over TLS 1.3. In each case the server
//! syncs its caches through the front and serves configs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use machine_config_server::server::tls::TlsPolicy;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{CipherSuite, NamedGroup, ProtocolVersion, SignatureScheme};
use support::cluster::{load_realistic_cluster, token_dir, APISERVER_URL};
use support::fake_apiserver::{FakeApiServer, Options};
use support::mcs::{self, poll, Server};

const DEADLINE: Duration = Duration::from_secs(30);

/// What one client offered, and what was negotiated if the handshake completed.
#[derive(Clone, Debug)]
struct Hello {
    suites: Vec<CipherSuite>,
    groups: Vec<NamedGroup>,
    schemes: Vec<SignatureScheme>,
}

#[derive(Clone, Debug)]
struct Negotiated {
    version: ProtocolVersion,
    suite: CipherSuite,
    /// `None` for a resumed TLS 1.2 session (no key exchange).
    group: Option<NamedGroup>,
}

#[derive(Debug, Default)]
struct Seen {
    hellos: Vec<Hello>,
    negotiated: Vec<Negotiated>,
}

/// Records each ClientHello, then serves the development certificate.
#[derive(Debug)]
struct Recorder {
    key: Arc<CertifiedKey>,
    seen: Arc<Mutex<Seen>>,
}

impl ResolvesServerCert for Recorder {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.seen.lock().unwrap().hellos.push(Hello {
            suites: hello
                .cipher_suites()
                .iter()
                .copied()
                .filter(|s| *s != CipherSuite::TLS_EMPTY_RENEGOTIATION_INFO_SCSV)
                .collect(),
            groups: hello.named_groups().unwrap_or_default().to_vec(),
            schemes: hello.signature_schemes().to_vec(),
        });
        Some(self.key.clone())
    }
}

/// The certificate chain the API server serves, its key, and the CA a client trusts for it.
struct Chain {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
}

impl Chain {
    /// The development certificate (ECDSA P-256).
    fn development() -> Chain {
        let certs = mcs::repo().join("certs");
        Chain {
            cert: certs.join("tls.crt"),
            key: certs.join("tls.key"),
            ca: certs.join("ca.crt"),
        }
    }

    /// One of the PKI fixtures (`tests/fixtures/pki/<kind>`).
    fn pki(kind: &str) -> Chain {
        let dir = mcs::repo().join("tests/fixtures/pki").join(kind);
        Chain {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            ca: dir.join("ca.crt"),
        }
    }
}

/// A TLS front on a free loopback port for `upstream` (plain HTTP): every suite and group its
/// provider has, TLS 1.2 and 1.3, so that what is negotiated is the client's choice.
struct TlsFront {
    address: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    _runtime: tokio::runtime::Runtime,
}

impl TlsFront {
    /// ring, an implementation other than the server's, with the development certificate.
    fn start(upstream: SocketAddr) -> TlsFront {
        TlsFront::start_with(
            upstream,
            rustls::crypto::ring::default_provider(),
            &Chain::development(),
            &[&rustls::version::TLS13, &rustls::version::TLS12],
        )
    }

    /// `provider` serving `chain` (ring signs neither P-521 nor RSA above 4096 bits; a real
    /// kube-apiserver, Go's crypto/tls, signs with both).
    fn start_with(
        upstream: SocketAddr,
        provider: rustls::crypto::CryptoProvider,
        chain: &Chain,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> TlsFront {
        let provider = Arc::new(provider);
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&chain.cert)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let key = PrivateKeyDer::from_pem_file(&chain.key).unwrap();
        let key = provider.key_provider.load_private_key(key).unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let resolver = Recorder {
            key: Arc::new(CertifiedKey::new(certs, key)),
            seen: seen.clone(),
        };
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver));
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let recorded = seen.clone();
        runtime.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, recorded) = (acceptor.clone(), recorded.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let connection = tls.get_ref().1;
                    recorded.lock().unwrap().negotiated.push(Negotiated {
                        version: connection.protocol_version().unwrap(),
                        suite: connection.negotiated_cipher_suite().unwrap().suite(),
                        group: connection
                            .negotiated_key_exchange_group()
                            .map(|group| group.name()),
                    });
                    let Ok(mut plain) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront {
            address,
            seen,
            _runtime: runtime,
        }
    }

    fn seen(&self) -> (Vec<Hello>, Vec<Negotiated>) {
        let seen = self.seen.lock().unwrap();
        (seen.hellos.clone(), seen.negotiated.clone())
    }
}

/// A kubeconfig for `https://127.0.0.1:PORT` trusting `ca`, with the in-test server's token.
fn write_kubeconfig(path: &Path, front: SocketAddr, ca: &Path) {
    let ca = std::fs::read(ca).unwrap();
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: front\n  cluster:\n    server: https://{front}\n    certificate-authority-data: {ca}\nusers:\n- name: fake\n  user:\n    token: fake-token\ncontexts:\n- name: front\n  context:\n    cluster: front\n    user: fake\n    namespace: default\ncurrent-context: front\n"
        ),
    )
    .unwrap();
}

/// The realistic cluster behind a TLS front, and the binary in `start` mode through it with
/// `extra` flags and environment; returns once the server is ready (every cache synced over
/// TLS) and has served a worker config.
struct Through {
    _api: FakeApiServer,
    front: TlsFront,
    _dir: tempfile::TempDir,
    _tokens: tempfile::TempDir,
    server: Server,
}

fn start_through_tls(extra: &[&str], env: &[(&str, &str)]) -> Through {
    start_through(extra, env, |api| {
        (TlsFront::start(api), Chain::development().ca)
    })
}

/// [`start_through_tls`] behind the front `front` makes for the API server's address (and the
/// CA the kubeconfig trusts).
fn start_through(
    extra: &[&str],
    env: &[(&str, &str)],
    front: impl FnOnce(SocketAddr) -> (TlsFront, PathBuf),
) -> Through {
    let api = FakeApiServer::start(Options::default());
    load_realistic_cluster(&api);
    let (front, ca) = front(api.address());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    write_kubeconfig(&kubeconfig, front.address, &ca);
    let tokens = token_dir();
    let mut args = vec![
        "start",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--apiserver-url",
        APISERVER_URL,
        "--bootstrap-token-dir",
        tokens.path().to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let server = Server::start_with_env(&args, env);
    poll("/readyz 200 through the TLS front", DEADLINE, || {
        let ready = mcs::try_request(server.metrics, None, "GET", "/readyz", &[]).ok()?;
        (ready.status == 200).then_some(())
    });
    let config = server.https(
        "GET",
        "/config/worker",
        &[(
            "Accept",
            "application/vnd.coreos.ignition+json;version=3.4.0",
        )],
    );
    assert_eq!(config.status, 200, "{}", server.output());
    Through {
        _api: api,
        front,
        _dir: dir,
        _tokens: tokens,
        server,
    }
}

/// Every key the cluster's PKI configuration can issue, on the API server's side: its serving
/// certificate and its signer of each kind (and of two kinds at once), served by this build's
/// crypto (the server under test must verify what a kube-apiserver with such a chain sends:
/// the chain's signatures and the handshake's). The server syncs every cache through it and
/// serves, over TLS 1.3 and TLS 1.2 both.
#[test]
fn the_kubernetes_client_trusts_an_api_server_chain_of_every_key_the_pki_allows() {
    for kind in [
        "p521",
        "p384",
        "rsa8192",
        "rsa6144",
        "cross-p521-under-rsa8192",
        "cross-rsa8192-under-p521",
    ] {
        for (version, protocol) in [
            (&rustls::version::TLS13, ProtocolVersion::TLSv1_3),
            (&rustls::version::TLS12, ProtocolVersion::TLSv1_2),
        ] {
            // start_through waits for every cache to sync and a worker config to be served.
            let through = start_through(&[], &[], |api| {
                let chain = Chain::pki(kind);
                let provider = TlsPolicy::intermediate().server_provider();
                (
                    TlsFront::start_with(api, provider, &chain, &[version]),
                    chain.ca,
                )
            });
            let (_, negotiated) = through.front.seen();
            assert!(!negotiated.is_empty(), "{kind}: no TLS session");
            assert!(
                negotiated.iter().all(|n| n.version == protocol),
                "{kind}: {negotiated:?}"
            );
        }
    }
}

#[cfg(feature = "openssl")]
fn tls13(suite: &CipherSuite) -> bool {
    format!("{suite:?}").starts_with("TLS13_")
}

#[test]
fn the_kubernetes_client_offers_the_policys_suites_and_the_backends_groups() {
    let through = start_through_tls(&[], &[]);
    let (hellos, negotiated) = through.front.seen();
    assert!(!hellos.is_empty() && !negotiated.is_empty());
    // The Intermediate profile (the default): every suite of it, TLS 1.2 and 1.3.
    let intermediate = [
        CipherSuite::TLS13_AES_128_GCM_SHA256,
        CipherSuite::TLS13_AES_256_GCM_SHA384,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    for hello in &hellos {
        assert_eq!(hello.suites, intermediate, "{hello:?}");
        // Both backends offer X25519, P-256 and P-384 (OpenSSL 3.5 adds X25519MLKEM768).
        for group in [
            NamedGroup::X25519,
            NamedGroup::secp256r1,
            NamedGroup::secp384r1,
        ] {
            assert!(hello.groups.contains(&group), "{hello:?}");
        }
        assert!(hello
            .schemes
            .contains(&SignatureScheme::ECDSA_NISTP256_SHA256));
    }
    for n in &negotiated {
        assert_eq!(n.version, ProtocolVersion::TLSv1_3, "{n:?}");
        let group = n.group.expect("TLS 1.3 always exchanges a key");
        assert!(hellos.iter().all(|h| h.groups.contains(&group)), "{n:?}");
    }
    assert!(!through.server.output().contains("FIPS mode on"));
}

#[test]
fn the_kubernetes_client_follows_tls_min_version_and_tls_cipher_suites() {
    let through = start_through_tls(
        &[
            "--tls-min-version",
            "VersionTLS13",
            "--tls-cipher-suites",
            "ECDHE-ECDSA-AES256-GCM-SHA384,TLS_AES_256_GCM_SHA384",
        ],
        &[],
    );
    let (hellos, negotiated) = through.front.seen();
    for hello in &hellos {
        // TLS 1.2 suites are not offered with a TLS 1.3 minimum.
        assert_eq!(
            hello.suites,
            [CipherSuite::TLS13_AES_256_GCM_SHA384],
            "{hello:?}"
        );
    }
    for n in &negotiated {
        assert_eq!(n.suite, CipherSuite::TLS13_AES_256_GCM_SHA384, "{n:?}");
    }

    let through = start_through_tls(
        &[
            "--tls-cipher-suites",
            "ECDHE-ECDSA-AES128-GCM-SHA256,TLS_AES_128_GCM_SHA256",
        ],
        &[],
    );
    let (hellos, _) = through.front.seen();
    for hello in &hellos {
        assert_eq!(
            hello.suites,
            [
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                CipherSuite::TLS13_AES_128_GCM_SHA256
            ],
            "{hello:?}"
        );
    }
}

/// FIPS mode: the client offers only approved suites (TLS 1.3), groups and signature schemes.
#[cfg(feature = "openssl")]
#[support::tier(openssl_fips)]
#[test]
fn in_fips_mode_the_kubernetes_client_offers_only_approved_algorithms() {
    let env = support::openssl_fips::server_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let through = start_through_tls(&["--fips"], &env);
    assert!(through.server.output().contains("FIPS mode on (--fips)"));
    let (hellos, negotiated) = through.front.seen();
    assert!(!hellos.is_empty());
    for hello in &hellos {
        assert_eq!(
            hello.suites,
            [
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS13_AES_256_GCM_SHA384
            ],
            "{hello:?}"
        );
        assert!(hello.suites.iter().all(tls13));
        assert!(!hello.groups.is_empty());
        for group in &hello.groups {
            assert!(
                matches!(
                    group,
                    NamedGroup::secp256r1 | NamedGroup::secp384r1 | NamedGroup::secp521r1
                ),
                "{hello:?}"
            );
        }
        assert!(!hello.schemes.is_empty());
        for scheme in &hello.schemes {
            assert!(
                !matches!(
                    scheme,
                    SignatureScheme::ED25519
                        | SignatureScheme::ED448
                        | SignatureScheme::RSA_PKCS1_SHA1
                        | SignatureScheme::ECDSA_SHA1_Legacy
                ),
                "{hello:?}"
            );
        }
    }
    for n in &negotiated {
        assert_eq!(n.version, ProtocolVersion::TLSv1_3, "{n:?}");
        assert_ne!(n.group, Some(NamedGroup::X25519), "{n:?}");
    }
}

/// The same on a real kube-apiserver (Go's crypto/tls) serving with an ECDSA P-521 chain and
/// with an RSA 8192 one: the server, as the MCO's DaemonSet runs it, syncs and serves.
#[support::tier(real_apiserver, upstream)]
#[test]
fn the_kubernetes_client_trusts_a_real_kube_apiserver_serving_p521_and_rsa8192() {
    for kind in ["p521", "rsa8192"] {
        let api = support::api_server::ApiServer::start_real_serving(
            support::fake_apiserver::Options::default(),
            &mcs::repo().join("tests/fixtures/pki").join(kind),
        )
        .expect("KUBEBUILDER_ASSETS names a kube-apiserver");
        load_realistic_cluster(&api);
        let tokens = token_dir();
        let server =
            Server::start_cluster(api.kubeconfig_file(), APISERVER_URL, tokens.path(), &[]);
        poll(&format!("/readyz 200 from {kind}"), DEADLINE, || {
            let ready = mcs::try_request(server.metrics, None, "GET", "/readyz", &[]).ok()?;
            (ready.status == 200).then_some(())
        });
        let config = server.https(
            "GET",
            "/config/worker",
            &[(
                "Accept",
                "application/vnd.coreos.ignition+json;version=3.4.0",
            )],
        );
        assert_eq!(config.status, 200, "{kind}: {}", server.output());
    }
}
