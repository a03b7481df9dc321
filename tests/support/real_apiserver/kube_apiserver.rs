//! kube-apiserver for the real-server tier, started as envtest starts it
//! (controller-runtime `pkg/internal/testing/controlplane/apiserver.go`): secure serving on a
//! free loopback port with a generated serving certificate, client-certificate
//! authentication against a generated CA, `--authorization-mode=RBAC`, a generated
//! service-account signing key (so TokenRequest works and the RBAC test can act as the
//! server's ServiceAccount), the `ServiceAccount` admission plugin disabled (no controller
//! creates default ServiceAccounts), and an audit log of every request (the real
//! counterpart of the fake server's request log).
//!
//! Pure parts ([`Pki`], [`apiserver_args`], [`kubeconfig_yaml`], [`parse_audit_log`]) are
//! unit-tested in `tests/real_apiserver.rs`; starting the process needs the binary.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use super::process::{free_loopback_port, Process};
use crate::fake_apiserver::RequestRecord;

/// User of the client identity the tests' own client uses (fixtures, reads).
pub const FIXTURE_USER: &str = "mcs-test-fixtures";
/// User of the identity in [`super::RealApiServer::kubeconfig_file`], the one the code under
/// test uses; the request log is its requests.
pub const UNDER_TEST_USER: &str = "mcs-under-test";
/// Group both identities belong to: cluster-admin, as envtest's default user.
pub const ADMIN_GROUP: &str = "system:masters";

/// A client identity: a certificate and key signed by the client CA.
#[derive(Clone, Debug)]
pub struct ClientCert {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The generated certificates and keys of one API server.
pub struct Pki {
    /// Signs the client certificates (the server authenticates them against it) and, unless a
    /// test gives its own serving chain, the serving certificate.
    pub ca_pem: String,
    /// What clients trust for the serving certificate: [`Pki::ca_pem`], or the CA of a chain a
    /// test gave ([`Pki::serving_from`]).
    pub serving_ca_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
    pub fixtures: ClientCert,
    pub under_test: ClientCert,
    /// Service-account token signing key (private, PKCS#8) and its public key.
    pub sa_private_pem: String,
    pub sa_public_pem: String,
}

impl Pki {
    pub fn generate() -> Result<Pki, String> {
        let err = |e: rcgen::Error| e.to_string();
        let ca_key = rcgen::KeyPair::generate().map_err(err)?;
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "mcs real-apiserver tier CA");
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca = ca_params.self_signed(&ca_key).map_err(err)?;

        let serving_key = rcgen::KeyPair::generate().map_err(err)?;
        let mut serving =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .map_err(err)?;
        serving
            .distinguished_name
            .push(rcgen::DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &ca, &ca_key).map_err(err)?;

        let client = |user: &str| -> Result<ClientCert, String> {
            let key = rcgen::KeyPair::generate().map_err(err)?;
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
            // Kubernetes reads the user from CN and the groups from O.
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, user);
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, ADMIN_GROUP);
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
            let cert = params.signed_by(&key, &ca, &ca_key).map_err(err)?;
            Ok(ClientCert {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
            })
        };
        let sa = rcgen::KeyPair::generate().map_err(err)?;
        Ok(Pki {
            ca_pem: ca.pem(),
            serving_ca_pem: ca.pem(),
            serving_cert_pem: serving_cert.pem(),
            serving_key_pem: serving_key.serialize_pem(),
            fixtures: client(FIXTURE_USER)?,
            under_test: client(UNDER_TEST_USER)?,
            sa_private_pem: sa.serialize_pem(),
            sa_public_pem: sa.public_key_pem(),
        })
    }

    /// The serving chain of `dir` instead of the generated one (`tls.crt`, `tls.key` and the
    /// `ca.crt` that signed it, as `tests/fixtures/pki/<kind>/` holds them): a kube-apiserver
    /// serving with a key of that kind.
    pub fn serving_from(mut self, dir: &Path) -> Result<Pki, String> {
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| format!("{}: {e}", dir.join(name).display()))
        };
        self.serving_cert_pem = read("tls.crt")?;
        self.serving_key_pem = read("tls.key")?;
        self.serving_ca_pem = read("ca.crt")?;
        Ok(self)
    }

    /// Writes the files [`apiserver_args`] names into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        for (file, contents) in [
            (files::CA, &self.ca_pem),
            (files::SERVING_CERT, &self.serving_cert_pem),
            (files::SERVING_KEY, &self.serving_key_pem),
            (files::SA_PRIVATE, &self.sa_private_pem),
            (files::SA_PUBLIC, &self.sa_public_pem),
            (files::AUDIT_POLICY, &AUDIT_POLICY.to_string()),
        ] {
            let path = dir.join(file);
            std::fs::write(&path, contents).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(())
    }
}

/// File names under the server's directory.
pub mod files {
    pub const CA: &str = "ca.crt";
    pub const SERVING_CERT: &str = "apiserver.crt";
    pub const SERVING_KEY: &str = "apiserver.key";
    pub const SA_PRIVATE: &str = "sa-signer.key";
    pub const SA_PUBLIC: &str = "sa-signer.pub";
    pub const AUDIT_POLICY: &str = "audit-policy.yaml";
    pub const AUDIT_LOG: &str = "audit.log";
    pub const LOG: &str = "kube-apiserver.log";
}

/// Every request at `Metadata` level (who, verb, resource, name, status; no bodies), logged
/// once it completes (watches also when they start).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// The flags of kube-apiserver serving on `127.0.0.1:port` with the files of [`Pki::write`]
/// in `dir`, storing in `etcd_url`: envtest's defaults, with the certificates it generates
/// named explicitly and the audit log added.
pub fn apiserver_args(dir: &Path, port: u16, etcd_url: &str) -> Vec<String> {
    let file = |name: &str| dir.join(name).display().to_string();
    vec![
        format!("--etcd-servers={etcd_url}"),
        "--advertise-address=127.0.0.1".to_string(),
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", dir.display()),
        format!("--tls-cert-file={}", file(files::SERVING_CERT)),
        format!("--tls-private-key-file={}", file(files::SERVING_KEY)),
        format!("--client-ca-file={}", file(files::CA)),
        "--authorization-mode=RBAC".to_string(),
        // As envtest: no controller creates the `default` ServiceAccounts this plugin wants.
        "--disable-admission-plugins=ServiceAccount".to_string(),
        "--service-cluster-ip-range=10.0.0.0/24".to_string(),
        "--allow-privileged=true".to_string(),
        format!("--service-account-issuer=https://127.0.0.1:{port}/"),
        format!("--service-account-key-file={}", file(files::SA_PUBLIC)),
        format!(
            "--service-account-signing-key-file={}",
            file(files::SA_PRIVATE)
        ),
        format!("--audit-policy-file={}", file(files::AUDIT_POLICY)),
        format!("--audit-log-path={}", file(files::AUDIT_LOG)),
        "--audit-log-format=json".to_string(),
    ]
}

/// How a kubeconfig user authenticates.
pub enum Credentials<'a> {
    Certificate(&'a ClientCert),
    Token(&'a str),
}

/// A kubeconfig with one cluster/context/user `envtest` for `server`, trusting `ca_pem`.
pub fn kubeconfig_yaml(server: &str, ca_pem: &str, credentials: Credentials) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let user = match credentials {
        Credentials::Certificate(cert) => serde_json::json!({
            "client-certificate-data": b64(&cert.cert_pem),
            "client-key-data": b64(&cert.key_pem),
        }),
        Credentials::Token(token) => serde_json::json!({ "token": token }),
    };
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "envtest", "cluster": {
            "server": server,
            "certificate-authority-data": b64(ca_pem),
        }}],
        "users": [{"name": "envtest", "user": user}],
        "contexts": [{"name": "envtest", "context": {
            "cluster": "envtest", "user": "envtest", "namespace": "default",
        }}],
        "current-context": "envtest",
    });
    serde_yaml::to_string(&config).unwrap_or_default()
}

/// The requests of `user` in an audit log (JSON lines), in order, as the fake server's request
/// log records them: one record per request (a watch is logged when it starts and when it
/// ends; the first is kept).
pub fn parse_audit_log(text: &str, user: &str) -> Vec<RequestRecord> {
    let mut seen = std::collections::HashSet::new();
    let mut records = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event["user"]["username"] != user {
            continue;
        }
        let id = event["auditID"].as_str().unwrap_or_default().to_string();
        if !seen.insert(id) {
            continue;
        }
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let verb = text(&event["verb"]);
        let object = &event["objectRef"];
        let uri = text(&event["requestURI"]);
        let path = uri.split('?').next().unwrap_or_default().to_string();
        let optional = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        records.push(RequestRecord {
            method: http_method(&verb).to_string(),
            path,
            group: text(&object["apiGroup"]),
            version: text(&object["apiVersion"]),
            resource: text(&object["resource"]),
            subresource: optional(&object["subresource"]),
            namespace: optional(&object["namespace"]),
            // The audit log fills a create's name in from the object (so does the fake
            // server's log); the authorizer sees none, since RBAC cannot restrict creates by
            // name (tests that check rights drop it).
            name: optional(&object["name"]),
            status: event["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
            verb,
            user: user.to_string(),
        });
    }
    records
}

fn http_method(verb: &str) -> &'static str {
    match verb {
        "create" => "POST",
        "update" => "PUT",
        "patch" => "PATCH",
        "delete" | "deletecollection" => "DELETE",
        _ => "GET",
    }
}

/// A running kube-apiserver (or one stopped by [`KubeApiServer::stop`], restartable on the
/// same port with the same storage).
pub struct KubeApiServer {
    binary: PathBuf,
    dir: PathBuf,
    port: u16,
    args: Vec<String>,
    process: Option<Process>,
    /// Length of the audit log at the last [`KubeApiServer::clear_requests`].
    requests_from: std::sync::atomic::AtomicUsize,
}

impl KubeApiServer {
    /// Starts `binary` with [`apiserver_args`] on a free port (the PKI must be written in
    /// `dir`). Readiness is the caller's to wait for (it needs a client).
    pub fn spawn(binary: &Path, dir: &Path, etcd_url: &str) -> Result<KubeApiServer, String> {
        let port = free_loopback_port()?;
        let args = apiserver_args(dir, port, etcd_url);
        let mut server = KubeApiServer {
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
            port,
            args,
            process: None,
            requests_from: Default::default(),
        };
        server.restart()?;
        Ok(server)
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// Kills the server (clients see their connections reset and the port refused).
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts the server again on the same port and storage; readiness is the caller's.
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        let log = self.dir.join(files::LOG);
        self.process = Some(Process::spawn(
            "kube-apiserver",
            &self.binary,
            &self.args,
            &log,
        )?);
        Ok(())
    }

    /// `Err` with the log when the process has exited.
    pub fn check_running(&mut self) -> Result<(), String> {
        match self.process.as_mut() {
            None => Err("fatal: kube-apiserver is stopped".to_string()),
            Some(process) => match process.exited() {
                Some(status) => Err(format!(
                    "fatal: kube-apiserver exited: {status}\n{}",
                    process.log_tail()
                )),
                None => Ok(()),
            },
        }
    }

    /// The requests of `user` so far, from the audit log.
    pub fn requests(&self, user: &str) -> Vec<RequestRecord> {
        let text = self.audit_log();
        let from = self.requests_from.load(std::sync::atomic::Ordering::SeqCst);
        parse_audit_log(text.get(from..).unwrap_or_default(), user)
    }

    /// Forgets the requests logged so far.
    pub fn clear_requests(&self) {
        let length = self.audit_log().len();
        self.requests_from
            .store(length, std::sync::atomic::Ordering::SeqCst);
    }

    fn audit_log(&self) -> String {
        std::fs::read_to_string(self.dir.join(files::AUDIT_LOG)).unwrap_or_default()
    }

    pub fn log_tail(&self) -> String {
        self.process
            .as_ref()
            .map(Process::log_tail)
            .unwrap_or_default()
    }
}

/// How long kube-apiserver may take to answer `/readyz` (it bootstraps RBAC roles and
/// priority levels first; several seconds on a loaded machine).
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);
