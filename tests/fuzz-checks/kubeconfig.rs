//! Kubeconfig and token-directory files. The input is used twice:
//! - whole, as a `--kubeconfig` file, read with `kube::config::Kubeconfig::from_yaml` as the
//!   cluster source reads it (`Kubeconfig::read_from`): it must not panic, and what it reads,
//!   written as JSON (which is YAML), must read back the same;
//! - split at the first two NUL bytes into the node-bootstrapper `token` file, the `ca.crt`
//!   file and the `--apiserver-url`, for the kubeconfig served to nodes
//!   (`source::cluster::kubeconfig::served_kubeconfig` and `KubeconfigInputs::build`).
//!
//! Properties of the served kubeconfig: a token that is not UTF-8 is refused (`token_not_text`),
//! any other token builds one; it reads back, with kube's reader and with serde_yaml, as one
//! cluster `local` at the URL with the CA base64-encoded, one user `kubelet` with exactly the
//! token, and current context `kubelet`; the ConfigMap's CA wins over the file's unless empty,
//! and an empty token is refused.

use base64::Engine as _;
use kube::config::Kubeconfig;
use machine_config_server::source::cluster::kubeconfig::{
    served_kubeconfig, KubeconfigError, KubeconfigInputs,
};
use serde_json::Value;

pub fn check(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        check_kubeconfig_file(text);
    }
    let mut parts = data.splitn(3, |b| *b == 0);
    let token = parts.next().unwrap_or_default();
    let ca = parts.next().unwrap_or_default();
    let url = parts
        .next()
        .and_then(|u| std::str::from_utf8(u).ok())
        .unwrap_or("https://api-int.example.com:6443");
    check_served(url, token, ca);
    check_inputs(url, token, ca);
}

fn check_kubeconfig_file(text: &str) {
    let Ok(config) = Kubeconfig::from_yaml(text) else {
        return;
    };
    let value = serde_json::to_value(&config).expect("a read kubeconfig serializes");
    let again = Kubeconfig::from_yaml(&value.to_string())
        .unwrap_or_else(|e| panic!("kube cannot read back its own kubeconfig: {e}\n{value}"));
    assert_eq!(serde_json::to_value(&again).ok(), Some(value), "round trip");
}

fn check_served(url: &str, token: &[u8], ca: &[u8]) {
    let served = served_kubeconfig(url, token, ca);
    let Ok(token) = std::str::from_utf8(token) else {
        assert!(
            matches!(served, Err(KubeconfigError::TokenNotText(_))),
            "{served:?}"
        );
        return;
    };
    let yaml = served.unwrap_or_else(|e| panic!("a text token builds a kubeconfig: {e}"));
    let text = std::str::from_utf8(&yaml).expect("the kubeconfig is UTF-8");
    let read = Kubeconfig::from_yaml(text)
        .unwrap_or_else(|e| panic!("kube cannot read the served kubeconfig: {e}\n{text}"));
    let kube_value = serde_json::to_value(&read).expect("serializes");
    let yaml_value: Value = serde_yaml::from_str(text).expect("serde_yaml reads it");
    let ca_data = base64::engine::general_purpose::STANDARD.encode(ca);
    for value in [&kube_value, &yaml_value] {
        let at = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
        assert_eq!(at("/clusters/0/name"), Some("local"));
        assert_eq!(at("/clusters/0/cluster/server"), Some(url), "server URL");
        assert_eq!(
            at("/clusters/0/cluster/certificate-authority-data"),
            Some(&ca_data[..])
        );
        assert_eq!(at("/users/0/name"), Some("kubelet"));
        assert_eq!(at("/users/0/user/token"), Some(token), "token\n{text}");
        assert_eq!(at("/current-context"), Some("kubelet"));
        assert_eq!(at("/contexts/0/context/user"), Some("kubelet"));
    }
}

fn check_inputs(url: &str, token: &[u8], ca: &[u8]) {
    let inputs = KubeconfigInputs {
        token: Ok(token.to_vec()),
        ca_file: Ok(b"file-ca".to_vec()),
        config_map_ca: Some(ca.to_vec()),
    };
    let expected_ca: &[u8] = if ca.is_empty() { b"file-ca" } else { ca };
    assert_eq!(
        inputs.build(url),
        served_kubeconfig(url, token, expected_ca)
    );
}
