//! The kubeconfig served to nodes at `/etc/kubernetes/kubeconfig` in cluster mode.
//!
//! Built, as the original, from the node-bootstrapper token directory (`token`, `ca.crt`) and
//! `--apiserver-url`: one cluster `local`, one user `kubelet` with the token, one context
//! `kubelet`. The CA is taken from `binaryData["ca-bundle.crt"]` of the ConfigMap
//! `openshift-machine-config-operator/kubeconfig-data` when it is present, from `ca.crt`
//! otherwise. The YAML keeps the original's shape: keys sorted (its `yaml.Marshal` goes through
//! JSON), and no `preferences` (client-go's `clientcmd/api/v1.Config` at the original's commit
//! 7ff337a4f tags it `json:"preferences,omitzero"`, and an empty `Preferences` is zero).
//!
//! Owns building the bytes and reading the two files; when to re-read them is the source's job.

use std::io;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Serialize;

/// File in the token directory holding the bootstrap token.
pub const TOKEN_FILE: &str = "token";
/// File in the token directory holding the API server CA bundle.
pub const CA_FILE: &str = "ca.crt";
/// Key of the CA bundle in the `kubeconfig-data` ConfigMap's `binaryData`.
pub const CONFIG_MAP_CA_KEY: &str = "ca-bundle.crt";

/// Why no kubeconfig can be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigError {
    /// A file of the token directory cannot be read.
    #[error("cannot read {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    /// The token file is empty.
    #[error("{0} is empty")]
    EmptyToken(PathBuf),
    /// The token is not UTF-8 text.
    #[error("{0} is not UTF-8 text")]
    TokenNotText(PathBuf),
    /// Neither the ConfigMap nor `ca.crt` provides a CA bundle.
    #[error("no CA bundle: {0}")]
    NoCa(String),
    /// Serialization failed (not expected for these plain strings).
    #[error("cannot serialize kubeconfig: {0}")]
    Serialize(String),
}

impl KubeconfigError {
    /// Short, stable name used as a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
            Self::EmptyToken(_) => "empty_token",
            Self::TokenNotText(_) => "token_not_text",
            Self::NoCa(_) => "no_ca",
            Self::Serialize(_) => "serialize",
        }
    }
}

/// The raw inputs of the served kubeconfig, compared as a whole to notice rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeconfigInputs {
    /// Contents of `token`, or why it could not be read.
    pub token: Result<Vec<u8>, KubeconfigError>,
    /// Contents of `ca.crt`, or why it could not be read.
    pub ca_file: Result<Vec<u8>, KubeconfigError>,
    /// `binaryData["ca-bundle.crt"]` of the `kubeconfig-data` ConfigMap, if present.
    pub config_map_ca: Option<Vec<u8>>,
}

impl KubeconfigInputs {
    /// Builds the served kubeconfig for `apiserver_url` from these inputs.
    pub fn build(&self, apiserver_url: &str) -> Result<Vec<u8>, KubeconfigError> {
        let token = self.token.clone()?;
        // An empty ConfigMap entry would give nodes a kubeconfig that trusts nothing; the file
        // is the better answer then (the original would use the empty bundle).
        let ca = match &self.config_map_ca {
            Some(ca) if !ca.is_empty() => ca.clone(),
            _ => self
                .ca_file
                .clone()
                .map_err(|error| KubeconfigError::NoCa(error.to_string()))?,
        };
        served_kubeconfig(apiserver_url, &token, &ca)
    }
}

/// Reads `token` and `ca.crt` from the token directory. Never fails: a missing file is recorded
/// in the result so a rotation in progress is retried at the next poll.
pub async fn read_token_dir(dir: &Path, config_map_ca: Option<Vec<u8>>) -> KubeconfigInputs {
    let token_path = dir.join(TOKEN_FILE);
    let token = match read_file(&token_path).await {
        Ok(bytes) if bytes.is_empty() => Err(KubeconfigError::EmptyToken(token_path)),
        other => other,
    };
    let ca_file = read_file(&dir.join(CA_FILE)).await;
    KubeconfigInputs {
        token,
        ca_file,
        config_map_ca,
    }
}

async fn read_file(path: &Path) -> Result<Vec<u8>, KubeconfigError> {
    tokio::fs::read(path)
        .await
        .map_err(|error: io::Error| KubeconfigError::Read {
            path: path.to_owned(),
            reason: error.to_string(),
        })
}

/// The kubeconfig a node's kubelet uses to join: server `apiserver_url`, the CA bundle `ca`
/// embedded, the bootstrap `token` used as is (as the original does).
pub fn served_kubeconfig(
    apiserver_url: &str,
    token: &[u8],
    ca: &[u8],
) -> Result<Vec<u8>, KubeconfigError> {
    let token = std::str::from_utf8(token)
        .map_err(|_| KubeconfigError::TokenNotText(PathBuf::from(TOKEN_FILE)))?;
    let config = Kubeconfig {
        clusters: vec![NamedCluster {
            cluster: Cluster {
                certificate_authority_data: base64::engine::general_purpose::STANDARD.encode(ca),
                server: apiserver_url,
            },
            name: "local",
        }],
        contexts: vec![NamedContext {
            context: Context {
                cluster: "local",
                user: "kubelet",
            },
            name: "kubelet",
        }],
        current_context: "kubelet",
        users: vec![NamedUser {
            name: "kubelet",
            user: User { token },
        }],
    };
    serde_yaml::to_string(&config)
        .map(String::into_bytes)
        .map_err(|error| KubeconfigError::Serialize(error.to_string()))
}

// Field order is alphabetical, as the original's JSON-to-YAML marshalling writes it. No
// `preferences`: the original's `Preferences` is `omitzero` and always empty (see the module doc).
#[derive(Serialize)]
struct Kubeconfig<'a> {
    clusters: Vec<NamedCluster<'a>>,
    contexts: Vec<NamedContext<'a>>,
    #[serde(rename = "current-context")]
    current_context: &'a str,
    users: Vec<NamedUser<'a>>,
}

#[derive(Serialize)]
struct NamedCluster<'a> {
    cluster: Cluster<'a>,
    name: &'a str,
}

#[derive(Serialize)]
struct Cluster<'a> {
    #[serde(rename = "certificate-authority-data")]
    certificate_authority_data: String,
    server: &'a str,
}

#[derive(Serialize)]
struct NamedContext<'a> {
    context: Context<'a>,
    name: &'a str,
}

#[derive(Serialize)]
struct Context<'a> {
    cluster: &'a str,
    user: &'a str,
}

#[derive(Serialize)]
struct NamedUser<'a> {
    name: &'a str,
    user: User<'a>,
}

#[derive(Serialize)]
struct User<'a> {
    token: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn kubeconfig_has_the_original_shape() {
        let yaml =
            served_kubeconfig("https://api-int.example:6443", b"abc.def", CA).expect("builds");
        let expected = format!(
            "clusters:\n\
             - cluster:\n    certificate-authority-data: {}\n    server: https://api-int.example:6443\n  name: local\n\
             contexts:\n\
             - context:\n    cluster: local\n    user: kubelet\n  name: kubelet\n\
             current-context: kubelet\n\
             users:\n\
             - name: kubelet\n  user:\n    token: abc.def\n",
            base64::engine::general_purpose::STANDARD.encode(CA)
        );
        assert_eq!(String::from_utf8(yaml).expect("utf-8"), expected);
    }

    #[test]
    fn kubeconfig_parses_back_with_token_and_ca() {
        let yaml =
            served_kubeconfig("https://api-int.example:6443", b"tok:en\n", CA).expect("builds");
        let parsed: serde_yaml::Value = serde_yaml::from_slice(&yaml).expect("valid yaml");
        assert_eq!(
            parsed["users"][0]["user"]["token"].as_str(),
            Some("tok:en\n")
        );
        let ca = parsed["clusters"][0]["cluster"]["certificate-authority-data"]
            .as_str()
            .expect("ca");
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(ca)
                .expect("base64"),
            CA
        );
    }

    #[test]
    fn config_map_ca_wins_over_the_file() {
        let inputs = KubeconfigInputs {
            token: Ok(b"t".to_vec()),
            ca_file: Ok(b"file-ca".to_vec()),
            config_map_ca: Some(b"cm-ca".to_vec()),
        };
        let with_cm = inputs.build("https://a:6443").expect("builds");
        assert_eq!(
            with_cm,
            served_kubeconfig("https://a:6443", b"t", b"cm-ca").expect("builds")
        );
        let empty_cm = KubeconfigInputs {
            config_map_ca: Some(Vec::new()),
            ..inputs.clone()
        };
        assert_eq!(
            empty_cm.build("https://a:6443").expect("builds"),
            served_kubeconfig("https://a:6443", b"t", b"file-ca").expect("builds")
        );
    }

    #[test]
    fn config_map_ca_makes_the_ca_file_optional_but_not_the_token() {
        let missing = |name: &str| {
            Err(KubeconfigError::Read {
                path: PathBuf::from(name),
                reason: "No such file or directory".into(),
            })
        };
        let inputs = KubeconfigInputs {
            token: Ok(b"t".to_vec()),
            ca_file: missing("ca.crt"),
            config_map_ca: Some(b"cm-ca".to_vec()),
        };
        assert!(inputs.build("https://a:6443").is_ok());
        let no_ca = KubeconfigInputs {
            config_map_ca: None,
            ..inputs.clone()
        };
        assert_eq!(
            no_ca.build("https://a:6443").map_err(|e| e.kind()),
            Err("no_ca")
        );
        let no_token = KubeconfigInputs {
            token: missing("token"),
            ..inputs
        };
        assert_eq!(
            no_token.build("https://a:6443").map_err(|e| e.kind()),
            Err("read")
        );
    }

    #[tokio::test]
    async fn reads_the_token_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let inputs = read_token_dir(dir.path(), None).await;
        assert!(inputs.token.is_err() && inputs.ca_file.is_err());
        std::fs::write(dir.path().join(TOKEN_FILE), b"").expect("write");
        std::fs::write(dir.path().join(CA_FILE), CA).expect("write");
        let inputs = read_token_dir(dir.path(), None).await;
        assert_eq!(inputs.token.map_err(|e| e.kind()), Err("empty_token"));
        assert_eq!(inputs.ca_file.as_deref(), Ok(CA));
    }
}
