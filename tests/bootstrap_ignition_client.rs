//! The real Ignition client (Debian's `ignition`, fetch stage) boots from the server over TLS:
//! a pointer config with the development CA merges `/config/master`, and the config Ignition
//! caches contains the files the server appends.

use std::path::Path;
use std::process::Command;
use support::fixtures;
use support::mcs;
use support::tier;
use support::upstream;

use base64::Engine as _;

const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";

fn pointer_config(url: &str, ca_pem: &[u8]) -> serde_json::Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    serde_json::json!({
        "ignition": {
            "version": "3.2.0",
            "config": { "merge": [ { "source": url } ] },
            "security": { "tls": { "certificateAuthorities": [
                { "source": format!("data:text/plain;charset=utf-8;base64,{ca}") }
            ] } }
        }
    })
}

/// Run Ignition's fetch stage with `pointer` as the user config; returns the cached config.
fn ignition_fetch(work: &Path, pointer: &serde_json::Value) -> Result<serde_json::Value, String> {
    assert!(
        Path::new(IGNITION).exists(),
        "{IGNITION} is missing: install Debian's `ignition` package (.ci/run does)"
    );
    let pointer_file = work.join("pointer.ign");
    std::fs::write(&pointer_file, serde_json::to_vec(pointer).unwrap()).unwrap();
    let cache = work.join("ignition.json");
    let output = Command::new(IGNITION)
        .args([
            "-platform",
            "file",
            "-stage",
            "fetch",
            "-log-to-stdout",
            "-fetch-timeout",
            "30s",
        ])
        .arg("-config-cache")
        .arg(&cache)
        .arg("-state-file")
        .arg(work.join("state"))
        .arg("-neednet")
        .arg(work.join("neednet"))
        .arg("-root")
        .arg(work.join("root"))
        .env("IGNITION_CONFIG_FILE", &pointer_file)
        .output()
        .expect("run ignition");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if !output.status.success() {
        return Err(log);
    }
    let cached = std::fs::read(&cache).map_err(|e| format!("no cached config ({e}):\n{log}"))?;
    serde_json::from_slice(&cached).map_err(|e| format!("cached config is not JSON ({e}):\n{log}"))
}

#[tier(ignition)]
#[test]
fn ignition_fetches_the_master_config_over_tls() {
    let server = mcs::Server::bootstrap(&mcs::repo().join("config/bootstrap"), &[]);
    let work = tempfile::tempdir().unwrap();
    let url = format!("https://localhost:{}/config/master", server.secure.port());
    let ca = std::fs::read(mcs::repo().join("certs/ca.crt")).unwrap();
    let cached =
        ignition_fetch(work.path(), &pointer_config(&url, &ca)).or_panic_with_logs(&server);
    let paths: Vec<String> = mcs::served_files(&cached)
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    for expected in [
        "/etc/motd",
        "/etc/machine-config-daemon/node-annotations.json",
        "/etc/kubernetes/kubeconfig",
        "/etc/mcs-machine-config-content.json",
        "/etc/ignition-machine-config-encapsulated.json",
    ] {
        assert!(
            paths.iter().any(|p| p == expected),
            "{expected} not in the cached config: {paths:?}"
        );
    }
    let kubeconfig = mcs::served_files(&cached)
        .into_iter()
        .find(|(path, _)| path == "/etc/kubernetes/kubeconfig")
        .unwrap()
        .1;
    assert_eq!(
        kubeconfig,
        std::fs::read(mcs::repo().join("config/bootstrap/kubeconfig")).unwrap()
    );
    // Ignition told the server which spec it speaks.
    assert!(
        server.output().contains("vnd.coreos.ignition+json"),
        "{}",
        server.output()
    );
}

#[tier(ignition)]
#[test]
fn ignition_fetches_the_full_size_fixture() {
    fetches_a_full_size_config(&fixtures::bootstrap_full());
}

#[tier(ignition, upstream)]
#[test]
fn ignition_fetches_the_upstream_rendered_fixture() {
    fetches_a_full_size_config(&upstream::realistic_fixture());
}

fn fetches_a_full_size_config(fixture: &Path) {
    let server = mcs::Server::bootstrap(fixture, &[]);
    let work = tempfile::tempdir().unwrap();
    let url = format!("https://127.0.0.1:{}/config/master", server.secure.port());
    let ca = std::fs::read(mcs::repo().join("certs/ca.crt")).unwrap();
    let cached =
        ignition_fetch(work.path(), &pointer_config(&url, &ca)).or_panic_with_logs(&server);
    let files = mcs::served_files(&cached);
    assert!(
        files.len() > 50,
        "expected the realistic config's files, got {}",
        files.len()
    );
    assert_eq!(
        files.last().map(|(p, _)| p.as_str()),
        Some("/etc/ignition-machine-config-encapsulated.json")
    );
}

/// Every key the cluster's PKI configuration can issue reaches a booting machine: Ignition
/// (Go's crypto/tls) fetches over a P-521 chain, an RSA 8192 one, and each under a CA of the
/// other kind, trusting the chain's CA from its pointer config.
#[tier(ignition)]
#[test]
fn ignition_fetches_over_p521_and_rsa8192_chains() {
    for kind in [
        "p521",
        "rsa8192",
        "cross-p521-under-rsa8192",
        "cross-rsa8192-under-p521",
    ] {
        let dir = mcs::repo().join("tests/fixtures/pki").join(kind);
        let (cert, key) = (
            dir.join("tls.crt").display().to_string(),
            dir.join("tls.key").display().to_string(),
        );
        let base = mcs::repo().join("config/bootstrap");
        let (base_text, kubeconfig) = (
            base.display().to_string(),
            base.join("kubeconfig").display().to_string(),
        );
        let server = mcs::Server::start(&[
            "--cert",
            &cert,
            "--key",
            &key,
            "bootstrap",
            "--server-basedir",
            &base_text,
            "--bootstrap-kubeconfig",
            &kubeconfig,
        ]);
        let work = tempfile::tempdir().unwrap();
        let url = format!("https://localhost:{}/config/master", server.secure.port());
        let ca = std::fs::read(dir.join("ca.crt")).unwrap();
        let cached =
            ignition_fetch(work.path(), &pointer_config(&url, &ca)).or_panic_with_logs(&server);
        assert!(
            mcs::served_files(&cached)
                .iter()
                .any(|(path, _)| path == "/etc/kubernetes/kubeconfig"),
            "{kind}: the cached config is the server's"
        );
    }
}

#[tier(ignition)]
#[test]
fn ignition_refuses_a_server_it_does_not_trust() {
    let server = mcs::Server::bootstrap(&mcs::repo().join("config/bootstrap"), &[]);
    let work = tempfile::tempdir().unwrap();
    let url = format!("https://localhost:{}/config/master", server.secure.port());
    // A CA that did not sign the server certificate.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let mut pointer = pointer_config(&url, other.cert.pem().as_bytes());
    pointer["ignition"]["timeouts"] = serde_json::json!({ "httpTotal": 3 });
    let result = std::thread::scope(|scope| {
        let handle = scope.spawn(|| ignition_fetch(work.path(), &pointer));
        handle.join().unwrap()
    });
    assert!(
        result.is_err(),
        "Ignition accepted a server signed by an unknown CA"
    );
}

trait OrPanic {
    fn or_panic_with_logs(self, server: &mcs::Server) -> serde_json::Value;
}

impl OrPanic for Result<serde_json::Value, String> {
    fn or_panic_with_logs(self, server: &mcs::Server) -> serde_json::Value {
        self.unwrap_or_else(|log| {
            panic!(
                "ignition fetch failed:\n{log}\n--- server output ---\n{}",
                server.output()
            )
        })
    }
}
