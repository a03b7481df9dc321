//! The real-API-server tier's own parts (`tests/support/real_apiserver`): etcd from the
//! `etcd-bin-vendored` crate really runs here; the kube-apiserver launcher's flags, PKI,
//! kubeconfig files and audit-log reading are checked as far as they can be without the
//! binary (openssl verifies the certificates, kube-rs reads the kubeconfig); with
//! `KUBEBUILDER_ASSETS` a real kube-apiserver is started and every fixture operation the
//! cluster tests use is exercised against it. Without it that test records the tier as not
//! run.

use std::process::Command;
use support::tier;

use serde_json::json;
use support::api_server::{ApiServer, Options, Scope};
use support::fake_apiserver::FakeApiServer;
use support::real_apiserver::client::ApiClient;
use support::real_apiserver::etcd::{self, Etcd};
use support::real_apiserver::kube_apiserver::{
    apiserver_args, files, kubeconfig_yaml, parse_audit_log, Credentials, Pki, ADMIN_GROUP,
    FIXTURE_USER, UNDER_TEST_USER,
};
use support::real_apiserver::{self as real, process};

#[test]
fn vendored_etcd_serves_on_loopback_and_is_removed_on_drop() {
    let binary = etcd::vendored_binary().unwrap();
    let etcd = Etcd::start(&binary).unwrap();
    assert!(etcd.healthy().unwrap());
    let dir = etcd.dir().to_path_buf();
    assert!(dir.join("data/member").is_dir(), "etcd writes its data dir");

    // A key written through the JSON gateway, then the history compacted: a read at the
    // older revision fails as etcd fails it for kube-apiserver after a compaction.
    let put = etcd
        .call(
            "/v3/kv/put",
            &json!({"key": etcd::b64("/registry/a"), "value": etcd::b64("1")}),
        )
        .unwrap();
    let first: u64 = put["header"]["revision"].as_str().unwrap().parse().unwrap();
    etcd.call(
        "/v3/kv/put",
        &json!({"key": etcd::b64("/registry/a"), "value": etcd::b64("2")}),
    )
    .unwrap();
    let old = json!({"key": etcd::b64("/registry/a"), "revision": first.to_string()});
    let value = etcd.call("/v3/kv/range", &old).unwrap();
    assert_eq!(value["kvs"][0]["value"], etcd::b64("1"));
    assert!(etcd.compact().unwrap() > first);
    let compacted = etcd.call("/v3/kv/range", &old).unwrap_err();
    assert!(compacted.contains("compacted"), "{compacted}");

    let port = etcd.client_port();
    drop(etcd);
    assert!(!dir.exists(), "data dir removed on drop");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "etcd stopped on drop"
    );
}

#[test]
fn etcd_flags_keep_everything_on_loopback() {
    let args = etcd_args_for_test();
    for flag in [
        "--listen-client-urls=http://127.0.0.1:2001",
        "--advertise-client-urls=http://127.0.0.1:2001",
        "--listen-peer-urls=http://127.0.0.1:2002",
        "--initial-advertise-peer-urls=http://127.0.0.1:2002",
        "--initial-cluster=default=http://127.0.0.1:2002",
        "--data-dir=/tmp/d",
        "--unsafe-no-fsync=true",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} in {args:?}");
    }
}

fn etcd_args_for_test() -> Vec<String> {
    etcd::etcd_args(std::path::Path::new("/tmp/d"), 2001, 2002)
}

#[test]
fn kube_apiserver_flags_are_envtests_with_every_named_file_written() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::generate().unwrap();
    pki.write(dir.path()).unwrap();
    let args = apiserver_args(dir.path(), 6443, "http://127.0.0.1:2379");
    let value = |flag: &str| -> String {
        let prefix = format!("--{flag}=");
        let found: Vec<&String> = args.iter().filter(|a| a.starts_with(&prefix)).collect();
        assert_eq!(found.len(), 1, "--{flag} exactly once in {args:?}");
        found[0][prefix.len()..].to_string()
    };
    // envtest's defaults (controller-runtime pkg/internal/testing/controlplane/apiserver.go).
    assert_eq!(value("etcd-servers"), "http://127.0.0.1:2379");
    assert_eq!(value("secure-port"), "6443");
    assert_eq!(value("bind-address"), "127.0.0.1");
    assert_eq!(value("authorization-mode"), "RBAC");
    assert_eq!(value("disable-admission-plugins"), "ServiceAccount");
    assert_eq!(value("service-cluster-ip-range"), "10.0.0.0/24");
    assert_eq!(value("allow-privileged"), "true");
    assert_eq!(value("service-account-issuer"), "https://127.0.0.1:6443/");
    assert!(
        !args.iter().any(|a| a.starts_with("--insecure-port")),
        "gone since 1.24"
    );
    for flag in [
        "tls-cert-file",
        "tls-private-key-file",
        "client-ca-file",
        "service-account-key-file",
        "service-account-signing-key-file",
        "audit-policy-file",
    ] {
        let path = value(flag);
        assert!(std::path::Path::new(&path).is_file(), "--{flag}={path}");
    }
    let audit_policy: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(dir.path().join(files::AUDIT_POLICY)).unwrap(),
    )
    .unwrap();
    assert_eq!(audit_policy["kind"], "Policy");
    assert_eq!(audit_policy["rules"][0]["level"], "Metadata");
}

/// openssl (not our own code) checks the chain, the serving names and the client identities.
#[test]
fn generated_certificates_verify_with_openssl() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::generate().unwrap();
    pki.write(dir.path()).unwrap();
    let ca = dir.path().join(files::CA);
    let openssl = |args: &[&str]| -> String {
        let out = Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let serving = dir.path().join(files::SERVING_CERT);
    let ca_arg = ca.to_str().unwrap();
    openssl(&[
        "verify",
        "-CAfile",
        ca_arg,
        "-purpose",
        "sslserver",
        "-verify_ip",
        "127.0.0.1",
        serving.to_str().unwrap(),
    ]);
    for (cert, user) in [
        (&pki.fixtures, FIXTURE_USER),
        (&pki.under_test, UNDER_TEST_USER),
    ] {
        let path = dir.path().join(format!("{user}.crt"));
        std::fs::write(&path, &cert.cert_pem).unwrap();
        openssl(&[
            "verify",
            "-CAfile",
            ca_arg,
            "-purpose",
            "sslclient",
            path.to_str().unwrap(),
        ]);
        let subject = openssl(&[
            "x509",
            "-noout",
            "-subject",
            "-nameopt",
            "RFC2253",
            "-in",
            path.to_str().unwrap(),
        ]);
        assert!(subject.contains(&format!("CN={user}")), "{subject}");
        assert!(subject.contains(&format!("O={ADMIN_GROUP}")), "{subject}");
    }
    // The service-account signing key and its public key are one pair.
    let private = dir.path().join(files::SA_PRIVATE);
    let derived = openssl(&["pkey", "-pubout", "-in", private.to_str().unwrap()]);
    assert_eq!(derived.trim(), pki.sa_public_pem.trim());
}

#[tokio::test]
async fn kubeconfigs_are_read_by_kube_rs() {
    let pki = Pki::generate().unwrap();
    for credentials in [
        Credentials::Certificate(&pki.under_test),
        Credentials::Token("sa-token"),
    ] {
        let text = kubeconfig_yaml("https://127.0.0.1:6443", &pki.ca_pem, credentials);
        let kubeconfig: kube::config::Kubeconfig = serde_yaml::from_str(&text).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(config.root_cert.as_ref().map(Vec::len), Some(1));
        assert_eq!(config.default_namespace, "default");
        kube::Client::try_from(config).expect("a client from the kubeconfig");
    }
}

/// Audit events as kube-apiserver writes them (audit.k8s.io/v1 `Event`, one JSON per line).
#[test]
fn the_audit_log_reads_as_the_fake_servers_request_log() {
    let event = |id: &str,
                 stage: &str,
                 user: &str,
                 verb: &str,
                 uri: &str,
                 object: serde_json::Value,
                 code: u16| {
        json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
            "auditID": id, "stage": stage, "requestURI": uri, "verb": verb,
            "user": {"username": user, "groups": [ADMIN_GROUP, "system:authenticated"]},
            "sourceIPs": ["127.0.0.1"], "userAgent": "machine-config-server",
            "objectRef": object, "responseStatus": {"metadata": {}, "code": code},
        })
        .to_string()
    };
    let leases = json!({"resource": "leases", "namespace": "openshift-machine-config-operator",
        "name": "machine-config-server-mcn", "apiGroup": "coordination.k8s.io", "apiVersion": "v1"});
    let pools = json!({"resource": "machineconfigpools",
        "apiGroup": "machineconfiguration.openshift.io", "apiVersion": "v1"});
    let log = [
        event("1", "ResponseComplete", FIXTURE_USER, "create", "/api/v1/nodes", json!({"resource": "nodes", "apiVersion": "v1"}), 201),
        event("2", "ResponseStarted", UNDER_TEST_USER, "watch",
              "/apis/machineconfiguration.openshift.io/v1/machineconfigpools?watch=true", pools.clone(), 200),
        event("3", "ResponseComplete", UNDER_TEST_USER, "update",
              "/apis/coordination.k8s.io/v1/namespaces/openshift-machine-config-operator/leases/machine-config-server-mcn",
              leases, 200),
        event("2", "ResponseComplete", UNDER_TEST_USER, "watch",
              "/apis/machineconfiguration.openshift.io/v1/machineconfigpools?watch=true", pools, 200),
        event("4", "ResponseComplete", UNDER_TEST_USER, "create",
              "/apis/machineconfiguration.openshift.io/v1/machineconfignodes",
              json!({"resource": "machineconfignodes", "name": "worker-0",
                     "apiGroup": "machineconfiguration.openshift.io", "apiVersion": "v1"}), 201),
    ]
    .join("\n");
    let records = parse_audit_log(&log, UNDER_TEST_USER);
    assert_eq!(records.len(), 3, "{records:?}");
    assert_eq!(records[0].verb, "watch");
    assert_eq!(records[0].method, "GET");
    assert_eq!(
        records[0].path,
        "/apis/machineconfiguration.openshift.io/v1/machineconfigpools"
    );
    assert_eq!(records[0].name, None);
    assert_eq!(records[1].verb, "update");
    assert_eq!(records[1].method, "PUT");
    assert_eq!(records[1].group, "coordination.k8s.io");
    assert_eq!(records[1].resource, "leases");
    assert_eq!(
        records[1].namespace.as_deref(),
        Some("openshift-machine-config-operator")
    );
    assert_eq!(
        records[1].name.as_deref(),
        Some("machine-config-server-mcn")
    );
    assert_eq!(records[1].status, 200);
    // A create's name is in the audit event (from the object), as the fake server records it
    // (tests that check what RBAC authorizes drop it: RBAC cannot restrict a create by name).
    assert_eq!(
        (records[2].verb.as_str(), records[2].method.as_str()),
        ("create", "POST")
    );
    assert_eq!(records[2].name.as_deref(), Some("worker-0"));
    assert_eq!(records[2].status, 201);
}

#[test]
fn free_ports_are_loopback_and_bindable() {
    let port = process::free_loopback_port().unwrap();
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
}

/// With `KUBEBUILDER_ASSETS`: every operation the cluster tests use, on a real server.
#[tier(real_apiserver)]
#[test]
fn the_api_server_of_a_test_is_real_with_kubebuilder_assets() {
    let api = ApiServer::start(Options::default());
    let real = api
        .real()
        .expect("KUBEBUILDER_ASSETS gives a real kube-apiserver");
    fixture_operations(real);

    // An outage and back: kube-apiserver killed and started again on its port and storage.
    api.stop();
    api.restart();
    assert!(api.get("MachineConfigPool", None, "worker").is_some());
}

/// The operations the cluster tests use, through [`ApiClient`] (HTTP), checked by reading back.
fn fixture_operations(api: &ApiClient) {
    let pool = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {"machineConfigSelector": {}, "nodeSelector": {},
                 "configuration": {"name": "rendered-worker-1"}},
        "status": {"machineCount": 3}
    });
    let stored = api.apply_object(&pool).unwrap();
    assert_eq!(
        stored["status"]["machineCount"], 3,
        "status through /status: {stored}"
    );
    let got = api.get("MachineConfigPool", None, "worker").unwrap();
    assert_eq!(got["spec"]["configuration"]["name"], "rendered-worker-1");
    assert_eq!(api.list("MachineConfigPool").len(), 1);
    api.merge_patch(
        "MachineConfigPool",
        None,
        "worker",
        &json!({"spec": {"paused": true}, "status": {"machineCount": 4}}),
    )
    .unwrap();
    let got = api.get("MachineConfigPool", None, "worker").unwrap();
    assert_eq!(
        (
            got["spec"]["paused"].clone(),
            got["status"]["machineCount"].clone()
        ),
        (json!(true), json!(4))
    );
    let conflict = api
        .apply_as(
            "someone-else",
            &json!({"apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool", "metadata": {"name": "worker"},
            "spec": {"paused": false}}),
            Scope::Main,
            false,
        )
        .unwrap_err();
    assert_eq!(conflict.code, 409, "{conflict}");
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "a-new-namespace"}, "data": {"k": "v"}});
    api.create(&configmap).unwrap();
    assert_eq!(api.create(&configmap).unwrap_err().code, 409);
    api.delete("ConfigMap", Some("a-new-namespace"), "c")
        .unwrap();
    assert!(api.get("ConfigMap", Some("a-new-namespace"), "c").is_none());
    // PUT on the main resource and on /status, with the stored resourceVersion.
    let mut pool = api.get("MachineConfigPool", None, "worker").unwrap();
    pool["spec"]["paused"] = json!(false);
    api.update(&pool).unwrap();
    let mut pool = api.get("MachineConfigPool", None, "worker").unwrap();
    pool["status"]["machineCount"] = json!(5);
    api.update_status(&pool).unwrap();
    let loaded = api
        .load_yaml_str(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d, namespace: other}\n---\n",
        )
        .unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!(
        api.list("ConfigMap")
            .iter()
            .filter(|c| c["metadata"]["name"] == "d")
            .count(),
        1
    );
}

/// The HTTP fixture operations against the one API server this machine has, the in-test one:
/// paths, content types, apply and merge-patch parameters, status through `/status`, errors,
/// and namespaces created on first use, read back through the fake server's own store.
#[test]
fn the_fixture_operations_over_http_are_what_the_in_test_server_serves() {
    let fake = FakeApiServer::start(Options::default());
    let api = ApiClient::connect(fake.kubeconfig_file()).unwrap();
    fixture_operations(&api);
    let stored = fake.get("MachineConfigPool", None, "worker").unwrap();
    assert_eq!(stored["spec"]["paused"], false);
    assert_eq!(stored["status"]["machineCount"], 5);
    assert!(
        fake.get("Namespace", None, "a-new-namespace").is_some(),
        "created on first use"
    );
    assert!(fake
        .get("ConfigMap", Some("a-new-namespace"), "c")
        .is_none());
    // Every write went over HTTP, with the parameters the fixture helpers promise.
    let writes: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.verb != "get" && r.verb != "list")
        .map(|r| {
            format!(
                "{} {}{}",
                r.verb,
                r.resource,
                r.subresource
                    .as_deref()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        writes,
        [
            "patch machineconfigpools",
            "patch machineconfigpools/status",
            "patch machineconfigpools",
            "patch machineconfigpools/status",
            "patch machineconfigpools",
            "patch namespaces",
            "create configmaps",
            "create configmaps",
            "delete configmaps",
            "update machineconfigpools",
            "update machineconfigpools/status",
            "patch namespaces",
            "patch configmaps",
        ]
    );
}

#[test]
fn kubebuilder_assets_name_kube_apiserver_and_optionally_etcd() {
    assert!(real::assets_in(None).is_none());
    assert!(real::assets_in(Some("".into())).is_none());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kube-apiserver"), "").unwrap();
    let assets = real::assets_in(Some(dir.path().into())).unwrap();
    assert_eq!(assets.kube_apiserver, dir.path().join("kube-apiserver"));
    assert_eq!(
        assets.etcd,
        etcd::vendored_binary().unwrap(),
        "the vendored etcd by default"
    );
    std::fs::write(dir.path().join("etcd"), "").unwrap();
    let assets = real::assets_in(Some(dir.path().into())).unwrap();
    assert_eq!(
        assets.etcd,
        dir.path().join("etcd"),
        "the directory's etcd when it has one"
    );
}

#[test]
#[should_panic(expected = "has no kube-apiserver")]
fn kubebuilder_assets_without_kube_apiserver_is_an_error_not_a_skip() {
    let dir = tempfile::tempdir().unwrap();
    real::assets_in(Some(dir.path().into()));
}

/// The generated kubeconfig works with kube-rs's TLS stack (the one the binary uses): it
/// trusts the serving certificate for `127.0.0.1` through the CA, and presents the client
/// certificate that kube-apiserver's `--client-ca-file` authenticates (checked here by a rustls
/// server that requires a client certificate signed by that CA).
#[tokio::test]
async fn the_generated_kubeconfig_authenticates_by_client_certificate_over_tls() {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let pki = Pki::generate().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(pki.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder(roots.into())
        .build()
        .unwrap();
    let config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(pki.serving_cert_pem.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(pki.serving_key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor
            .accept(tcp)
            .await
            .expect("TLS handshake with a client certificate");
        let presented = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        let mut request = vec![0; 4096];
        let n = tls.read(&mut request).await.unwrap();
        let body = "ok";
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(response.as_bytes()).await.unwrap();
        tls.flush().await.unwrap();
        (
            presented,
            String::from_utf8_lossy(&request[..n]).into_owned(),
        )
    });

    let text = kubeconfig_yaml(
        &format!("https://127.0.0.1:{port}"),
        &pki.ca_pem,
        Credentials::Certificate(&pki.under_test),
    );
    let kubeconfig: kube::config::Kubeconfig = serde_yaml::from_str(&text).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let answer = client
        .request_text(http::Request::get("/readyz").body(Vec::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(answer, "ok");
    let (presented, request) = server.await.unwrap();
    let expected = CertificateDer::from_pem_slice(pki.under_test.cert_pem.as_bytes()).unwrap();
    assert_eq!(presented, expected, "the under-test identity's certificate");
    assert!(request.starts_with("GET /readyz "), "{request}");
}
