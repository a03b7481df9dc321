//! The crypto of the real binary as OpenShift checks it: its ELF dynamic section read the way
//! openshift/check-payload reads it, `--fips` refused in one line when no FIPS provider can be
//! loaded, `/metrics` naming the provider, and (the FIPS end-to-end tier, OpenSSL build with
//! OpenSSL's FIPS provider at hand) the server in FIPS mode: its log line, its metric, and what
//! OpenSSL's own client can and cannot negotiate with it.

use std::process::{Command, Stdio};

use support::elf;
use support::mcs::{self, Server};

/// The binary under test, as cargo built it for these tests.
const BIN: &str = env!("CARGO_BIN_EXE_machine-config-server");

/// The provider name `mcs_tls_crypto_info` carries in this build.
const PROVIDER: &str = if cfg!(feature = "openssl") {
    "openssl"
} else {
    "aws-lc-rs"
};

fn bootstrap_args() -> Vec<String> {
    let base = mcs::repo().join("config/bootstrap");
    vec![
        "bootstrap".into(),
        "--server-basedir".into(),
        base.display().to_string(),
        "--bootstrap-kubeconfig".into(),
        base.join("kubeconfig").display().to_string(),
    ]
}

// ---------------------------------------------------------------------------------------------
// The ELF dynamic section, as check-payload reads it (support::elf)
// ---------------------------------------------------------------------------------------------

#[test]
fn the_binary_is_dynamically_linked_and_names_libcrypto_exactly_in_the_openssl_build() {
    let facts = elf::read(&std::fs::read(BIN).unwrap());
    assert!(facts.is_executable(), "{facts:?}");
    assert!(facts.has_interpreter, "statically linked: {facts:?}");
    let libcrypto: Vec<&String> = facts
        .needed
        .iter()
        .filter(|lib| lib.starts_with("libcrypto.so"))
        .collect();
    if cfg!(feature = "openssl") {
        assert_eq!(libcrypto, ["libcrypto.so.3"], "{facts:?}");
    } else {
        assert!(libcrypto.is_empty(), "{facts:?}");
    }
    // The reader is checked against binutils' where it is installed.
    if let Ok(output) = Command::new("readelf").args(["-d", BIN]).output() {
        let text = String::from_utf8_lossy(&output.stdout);
        for lib in &facts.needed {
            assert!(text.contains(&format!("[{lib}]")), "{lib} not in:\n{text}");
        }
        assert_eq!(
            text.matches("(NEEDED)").count(),
            facts.needed.len(),
            "{text}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// FIPS mode refused
// ---------------------------------------------------------------------------------------------

/// `--fips` where no FIPS provider can be loaded (OpenSSL pointed at an empty module directory,
/// whatever the host has; or the aws-lc-rs build): exit 64 before any port is bound, with one line on
/// stderr naming FIPS mode and why.
#[test]
fn fips_without_a_loadable_fips_provider_refuses_to_start_in_one_line() {
    let no_modules = tempfile::tempdir().unwrap();
    let port = mcs::free_port();
    let output = Command::new(BIN)
        .arg("--fips")
        .args(["--secure-port", &port.to_string(), "--insecure-port", "0"])
        .args(["--bind-address", "127.0.0.1", "--metrics-bind-address", ""])
        .arg("--cert")
        .arg(mcs::repo().join("certs/tls.crt"))
        .arg("--key")
        .arg(mcs::repo().join("certs/tls.key"))
        .args(bootstrap_args())
        .env("OPENSSL_MODULES", no_modules.path())
        .env_remove("OPENSSL_CONF")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(64), "{stderr}{stdout}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line:\n{stderr}");
    assert!(stdout.trim().is_empty(), "nothing else printed:\n{stdout}");
    let line = lines[0];
    assert!(
        line.starts_with("machine-config-server: FIPS mode (--fips): "),
        "{line}"
    );
    if cfg!(feature = "openssl") {
        assert!(
            line.contains("cannot load OpenSSL's FIPS provider (fips)"),
            "{line}"
        );
    } else {
        assert!(
            line.contains("aws-lc-rs") && line.contains("OpenSSL build"),
            "{line}"
        );
    }
    // Nothing was bound.
    assert!(std::net::TcpListener::bind(("127.0.0.1", port)).is_ok());
}

// ---------------------------------------------------------------------------------------------
// What /metrics says, and what OpenSSL's client negotiates
// ---------------------------------------------------------------------------------------------

/// `mcs_tls_crypto_info`'s sample, from the admin listener.
fn crypto_info(server: &Server) -> String {
    let metrics = mcs::request(server.metrics, None, "GET", "/metrics", &[]);
    let text = String::from_utf8(metrics.body).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("mcs_tls_crypto_info{"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    lines[0].to_owned()
}

/// What `openssl s_client` (the system's OpenSSL, not in FIPS mode) negotiated with extra
/// options, e.g. `-groups X25519`: the cipher, or `None` when the handshake failed.
fn s_client(server: &Server, options: &[&str]) -> Option<String> {
    let output = Command::new("openssl")
        .args(["s_client", "-connect", &server.secure.to_string()])
        .args(["-servername", "localhost", "-CAfile"])
        .arg(mcs::repo().join("certs/ca.crt"))
        .args(options)
        .env_remove("OPENSSL_CONF")
        .env_remove("OPENSSL_MODULES")
        .stdin(Stdio::null())
        .output()
        .expect("openssl CLI (Debian package openssl)");
    let text = String::from_utf8_lossy(&output.stdout);
    let cipher = text.lines().find_map(|l| {
        l.split_once(", Cipher is ")
            .map(|(_, c)| c.trim().to_owned())
    })?;
    (cipher != "(NONE)" && text.contains("Verify return code: 0 (ok)")).then_some(cipher)
}

/// Without FIPS mode the build's provider negotiates everything the Intermediate profile has,
/// X25519 and ChaCha20 included: the contrast to FIPS mode below.
#[test]
fn without_fips_mode_metrics_name_the_provider_and_x25519_and_chacha20_are_negotiated() {
    let server = Server::bootstrap(&mcs::repo().join("config/bootstrap"), &[]);
    let info = crypto_info(&server);
    assert!(
        info.starts_with(&format!("mcs_tls_crypto_info{{provider=\"{PROVIDER}\",")),
        "{info}"
    );
    assert!(info.contains("fips=\"false\"} 1"), "{info}");
    if cfg!(feature = "openssl") {
        assert!(info.contains("library=\"OpenSSL 3."), "{info}");
    }
    assert!(!server.output().contains("FIPS mode on"));
    assert_eq!(
        s_client(&server, &["-groups", "X25519"]).as_deref(),
        Some("TLS_AES_256_GCM_SHA384")
    );
    assert_eq!(
        s_client(&server, &["-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"]).as_deref(),
        Some("TLS_CHACHA20_POLY1305_SHA256")
    );
    assert_eq!(
        s_client(
            &server,
            &["-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"]
        )
        .as_deref(),
        Some("ECDHE-ECDSA-CHACHA20-POLY1305")
    );
}

/// FIPS mode end to end, with OpenSSL's FIPS provider: one log line, the metric, approved
/// algorithms negotiated and everything else refused, and a config served over TLS.
#[cfg(feature = "openssl")]
#[support::tier(openssl_fips)]
#[test]
fn fips_mode_end_to_end_with_openssls_fips_provider() {
    let env = support::openssl_fips::server_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut args = vec!["--fips".to_owned()];
    args.extend(bootstrap_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start_with_env(&args, &env);

    let output = server.output();
    let fips_lines: Vec<&str> = output
        .lines()
        .filter(|l| l.contains("FIPS mode on (--fips)"))
        .collect();
    assert_eq!(fips_lines.len(), 1, "{output}");
    // The Intermediate profile's ChaCha20 suites are dropped with one warning.
    assert_eq!(
        output.matches("FIPS mode (only AES-GCM").count(),
        1,
        "{output}"
    );
    let info = crypto_info(&server);
    assert!(info.contains("provider=\"openssl\""), "{info}");
    assert!(info.contains("fips=\"true\"} 1"), "{info}");

    // Approved: AES-GCM on P-256, P-384 or P-521, TLS 1.3 and 1.2.
    assert_eq!(
        s_client(&server, &[]).as_deref(),
        Some("TLS_AES_256_GCM_SHA384")
    );
    for group in ["P-256", "P-384", "P-521"] {
        assert!(s_client(&server, &["-groups", group]).is_some(), "{group}");
    }
    assert_eq!(
        s_client(
            &server,
            &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"]
        )
        .as_deref(),
        Some("ECDHE-ECDSA-AES128-GCM-SHA256")
    );
    // Refused: X25519, ChaCha20 in either version.
    assert_eq!(s_client(&server, &["-groups", "X25519"]), None);
    assert_eq!(
        s_client(&server, &["-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"]),
        None
    );
    assert_eq!(
        s_client(
            &server,
            &["-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"]
        ),
        None
    );
    // A node's fetch works.
    let response = server.https(
        "GET",
        "/config/master",
        &[(
            "Accept",
            "application/vnd.coreos.ignition+json;version=3.4.0",
        )],
    );
    assert_eq!(response.status, 200);
    assert!(!response.body.is_empty());
}

/// FIPS mode with the keys the PKI configuration allows beyond P-256 (the FIPS provider
/// approves P-521 and RSA of any size from 2048 bits): each serves over TLS 1.3 and 1.2, its
/// handshake signed with an approved scheme.
#[cfg(feature = "openssl")]
#[support::tier(openssl_fips)]
#[test]
fn fips_mode_serves_with_p521_and_rsa8192_keys() {
    let env = support::openssl_fips::server_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for (kind, signature) in [
        ("p521", "ECDSA"),
        ("rsa8192", "RSA-PSS"),
        ("cross-p521-under-rsa8192", "ECDSA"),
    ] {
        let dir = mcs::repo().join("tests/fixtures/pki").join(kind);
        let (cert, key) = (
            dir.join("tls.crt").display().to_string(),
            dir.join("tls.key").display().to_string(),
        );
        let mut args = vec![
            "--fips".to_owned(),
            "--cert".to_owned(),
            cert,
            "--key".to_owned(),
            key,
        ];
        args.extend(bootstrap_args());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = Server::start_with_env(&args, &env);
        assert!(server.output().contains("FIPS mode on (--fips)"));
        for version in ["-tls1_3", "-tls1_2"] {
            let output = Command::new("openssl")
                .args(["s_client", "-brief", "-verify_return_error"])
                .args([
                    "-connect",
                    &server.secure.to_string(),
                    "-servername",
                    "localhost",
                ])
                .arg("-CAfile")
                .arg(dir.join("ca.crt"))
                .arg(version)
                .env_remove("OPENSSL_CONF")
                .env_remove("OPENSSL_MODULES")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&output.stdout).into_owned()
                + &String::from_utf8_lossy(&output.stderr);
            assert!(
                text.contains("Verification: OK")
                    && text.contains(&format!("Signature type: {signature}")),
                "{kind} {version}:\n{text}"
            );
        }
        // A node's fetch (curl: the system's OpenSSL, outside FIPS mode, verifies P-521).
        let fetched = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(dir.join("ca.crt"))
            .args([
                "-H",
                "Accept: application/vnd.coreos.ignition+json;version=3.4.0",
            ])
            .arg(format!(
                "https://localhost:{}/config/master",
                server.secure.port()
            ))
            .env_remove("OPENSSL_CONF")
            .env_remove("OPENSSL_MODULES")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&fetched.stdout), "200", "{kind}");
    }
}
