//! The manifests in `config/deploy/` decode as the Kubernetes types they claim to be and keep
//! the original's deployment shape: host network on control-plane nodes, ports 22623/22624,
//! the serving certificate at /etc/ssl/mcs and the node-bootstrapper token at
//! /etc/mcs/bootstrap-token, one ServiceAccount bound by every role. (Which API calls the roles
//! grant is checked against a real run in `cluster_rbac.rs`.)

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use serde::Deserialize;

const NAMESPACE: &str = "openshift-machine-config-operator";

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/deploy")
}

/// Every YAML document of `file` as JSON values.
fn documents(file: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(deploy_dir().join(file)).expect("manifest readable");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde_json::Value::deserialize(doc).expect("valid YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

fn of_kind<T: serde::de::DeserializeOwned>(file: &str, kind: &str) -> Vec<T> {
    documents(file)
        .into_iter()
        .filter(|doc| doc["kind"] == kind)
        .map(|doc| serde_json::from_value(doc).expect("decodes as its kind"))
        .collect()
}

#[test]
fn daemonset_matches_the_original_deployment() {
    let daemonsets: Vec<DaemonSet> = of_kind("daemonset.yaml", "DaemonSet");
    assert_eq!(daemonsets.len(), 1);
    let ds = &daemonsets[0];
    assert_eq!(ds.metadata.namespace.as_deref(), Some(NAMESPACE));
    let pod = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec");
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("machine-config-server")
    );
    let selector = pod.node_selector.as_ref().expect("node selector");
    assert_eq!(
        selector
            .get("node-role.kubernetes.io/master")
            .map(String::as_str),
        Some("")
    );

    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["machine-config-server", "kube-rbac-proxy"]);
    let container = &pod.containers[0];
    let args = container.args.as_ref().expect("args");
    assert_eq!(args[0], "start");
    assert!(args
        .iter()
        .any(|a| a.starts_with("--apiserver-url=https://")));
    let ports: Vec<i32> = container
        .ports
        .iter()
        .flatten()
        .map(|p| p.container_port)
        .collect();
    assert_eq!(ports, [22623, 22624]);

    let volumes = pod.volumes.as_ref().expect("volumes");
    let secret_of = |mount_path: &str| {
        let mount = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == mount_path)
            .unwrap_or_else(|| panic!("{mount_path} is mounted"));
        volumes
            .iter()
            .find(|v| v.name == mount.name)
            .and_then(|v| v.secret.as_ref())
            .and_then(|s| s.secret_name.clone())
            .unwrap_or_else(|| panic!("{mount_path} comes from a secret"))
    };
    assert_eq!(secret_of("/etc/ssl/mcs"), "machine-config-server-tls");
    assert_eq!(
        secret_of("/etc/mcs/bootstrap-token"),
        "node-bootstrapper-token"
    );

    let readiness = container
        .readiness_probe
        .as_ref()
        .and_then(|p| p.http_get.as_ref())
        .expect("readiness probe");
    assert_eq!(readiness.path.as_deref(), Some("/readyz"));
    assert_eq!(
        readiness.port,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(22625)
    );
}

#[test]
fn every_binding_names_the_service_account() {
    let accounts: Vec<ServiceAccount> = of_kind("serviceaccount.yaml", "ServiceAccount");
    assert_eq!(accounts.len(), 1);
    let account = accounts[0].metadata.name.clone().expect("name");
    let mut bindings = 0;
    for file in ["rbac.yaml", "extras/rbac.yaml", "scc.yaml"] {
        let cluster: Vec<ClusterRoleBinding> = of_kind(file, "ClusterRoleBinding");
        let namespaced: Vec<RoleBinding> = of_kind(file, "RoleBinding");
        let subjects = cluster
            .iter()
            .map(|b| &b.subjects)
            .chain(namespaced.iter().map(|b| &b.subjects));
        for subjects in subjects {
            bindings += 1;
            let subjects = subjects.as_ref().expect("subjects");
            assert_eq!(subjects.len(), 1);
            assert_eq!(subjects[0].kind, "ServiceAccount");
            assert_eq!(subjects[0].name, account);
            assert_eq!(subjects[0].namespace.as_deref(), Some(NAMESPACE));
        }
    }
    assert!(
        bindings >= 4,
        "ClusterRole, two Roles and the SCC role are bound"
    );
}

#[test]
fn kustomization_lists_every_manifest() {
    let kustomization = &documents("kustomization.yaml")[0];
    let mut listed: Vec<String> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r.as_str().map(str::to_owned))
        .collect();
    listed.sort();
    // Manifests, and directories that are kustomizations of their own (extras).
    let mut present: Vec<String> = std::fs::read_dir(deploy_dir())
        .expect("deploy dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| {
            (name.ends_with(".yaml") && name != "kustomization.yaml")
                || deploy_dir().join(name).join("kustomization.yaml").is_file()
        })
        .collect();
    present.sort();
    assert_eq!(listed, present);
}

/// The extras are granted beside the MCO's own RBAC without touching it: every object of
/// `config/deploy/extras` has a name of its own (the MCO owns and keeps in sync the ClusterRole
/// and bindings named `machine-config-server`), binds only the server's ServiceAccount, and
/// the directory applies on its own (`kubectl apply -k config/deploy/extras`).
#[test]
fn the_extras_overwrite_nothing_the_mco_owns() {
    let extras = documents("extras/rbac.yaml");
    assert!(!extras.is_empty());
    for doc in &extras {
        let name = doc["metadata"]["name"].as_str().expect("named");
        assert_eq!(
            name, "machine-config-server-extras",
            "{} {name}: the MCO owns `machine-config-server`",
            doc["kind"]
        );
        assert!(
            matches!(
                doc["kind"].as_str(),
                Some("ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding")
            ),
            "only RBAC in the extras: {}",
            doc["kind"]
        );
    }
    let kustomization = &documents("extras/kustomization.yaml")[0];
    assert_eq!(kustomization["resources"], serde_json::json!(["rbac.yaml"]));
}

/// Prometheus reaches the metrics only through the kube-rbac-proxy sidecar: TLS on the host
/// network, `/metrics` only, upstream the loopback admin listener; the Service, the
/// ServiceMonitor and the proxy's serving certificate agree on port, name and secret.
#[test]
fn metrics_are_scraped_through_the_authorizing_proxy() {
    let daemonsets: Vec<DaemonSet> = of_kind("daemonset.yaml", "DaemonSet");
    let pod = daemonsets[0]
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec");
    let proxy = pod
        .containers
        .iter()
        .find(|c| c.name == "kube-rbac-proxy")
        .expect("the proxy sidecar");
    let args = proxy.args.clone().unwrap_or_default();
    let arg = |flag: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("{flag}=")))
            .unwrap_or_else(|| panic!("{flag} is set"))
            .to_owned()
    };
    // The server's own admin listener keeps its loopback default.
    let server_args = pod.containers[0].args.clone().unwrap_or_default();
    assert!(!server_args
        .iter()
        .any(|a| a.starts_with("--metrics-bind-address")));
    assert_eq!(
        arg("--upstream"),
        format!(
            "http://{}/",
            machine_config_server::server::admin::DEFAULT_BIND_ADDRESS
        )
    );
    assert_eq!(arg("--allow-paths"), "/metrics");
    assert_eq!(arg("--secure-listen-address"), "0.0.0.0:22626");
    let port = proxy
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .expect("a port named metrics");
    assert_eq!((port.container_port, port.host_port), (22626, Some(22626)));
    let mount = proxy
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| arg("--tls-cert-file").starts_with(&m.mount_path))
        .expect("the certificate is mounted");
    let secret = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .and_then(|v| v.secret.as_ref())
        .and_then(|s| s.secret_name.clone())
        .expect("from a secret");

    let services: Vec<Service> = of_kind("metrics.yaml", "Service");
    assert_eq!(services.len(), 1);
    let service = &services[0];
    assert_eq!(
        service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("service.beta.openshift.io/serving-cert-secret-name")),
        Some(&secret),
        "the service CA issues the proxy's certificate"
    );
    let spec = service.spec.as_ref().expect("service spec");
    let template_labels = daemonsets[0]
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    // An empty selector would select no pods (a Service) or every Service (a ServiceMonitor).
    let selector = spec.selector.clone().unwrap_or_default();
    assert!(
        !selector.is_empty(),
        "the Service selects the pods by label"
    );
    for (key, value) in &selector {
        assert_eq!(template_labels.get(key), Some(value), "selects the pods");
    }
    let service_port = spec.ports.iter().flatten().next().expect("a port");
    assert_eq!(service_port.port, 22626);
    assert_eq!(
        service_port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into()))
    );

    let monitors = documents("metrics.yaml")
        .into_iter()
        .filter(|d| d["kind"] == "ServiceMonitor")
        .collect::<Vec<_>>();
    assert_eq!(monitors.len(), 1);
    let monitor = &monitors[0];
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    let service_labels = service.metadata.labels.clone().unwrap_or_default();
    let match_labels = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels");
    assert!(
        !match_labels.is_empty(),
        "the ServiceMonitor selects by label"
    );
    for (key, value) in match_labels {
        assert_eq!(service_labels.get(key).map(String::as_str), value.as_str());
    }
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "metrics");
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(endpoint["path"], "/metrics");
    assert!(
        endpoint["bearerTokenFile"].is_string(),
        "scrapes with a token"
    );
    assert_eq!(
        endpoint["tlsConfig"]["serverName"],
        format!(
            "{}.{NAMESPACE}.svc",
            service.metadata.name.as_deref().unwrap()
        )
    );
}
