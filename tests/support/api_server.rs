//! "The API server of this test": a real kube-apiserver when `KUBEBUILDER_ASSETS` names one
//! (`support::real_apiserver`, the real-server tier), else the in-test server
//! (`support::fake_apiserver`), behind one handle with the operations the cluster tests use.
//!
//! Both backends run the code under test over HTTP with the kubeconfig of
//! [`ApiServer::kubeconfig_file`]; the fixture operations write through the API (fake: the
//! same code path as HTTP). Powers only the fake has are explicit: a test that needs one is
//! marked `#[tier(in_test_apiserver)]`, ignored (with the reason) when the tests get a real
//! server.
//! `stop`/`restart` (kube-apiserver killed and started again on its port and storage),
//! `compact` (etcd compaction), `requests` (the audit log of the code under test's
//! identity) and ServiceAccount tokens authorized by RBAC have real counterparts.

use std::path::Path;

use serde_json::Value;

use crate::fake_apiserver::FakeApiServer;
pub use crate::fake_apiserver::{ApiError, Options, RequestRecord, Scope};
use crate::real_apiserver::{self, RealApiServer};

/// Namespaces every OpenShift cluster has and the code under test writes into (a fresh API
/// server, real or in-test, has only `default` and the `kube-*` ones).
const CLUSTER_NAMESPACES: &[&str] = &["openshift-machine-config-operator"];

fn create_cluster_namespaces(apply: impl Fn(&Value) -> Result<Value, ApiError>) {
    for namespace in CLUSTER_NAMESPACES {
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
        });
        if let Err(e) = apply(&object) {
            panic!("namespace {namespace}: {e}");
        }
    }
}

/// The API server of a test (see the module docs); dropping it stops the server.
pub enum ApiServer {
    Fake(FakeApiServer),
    Real(Box<RealApiServer>),
}

macro_rules! either {
    ($self:ident, $server:ident => $call:expr) => {
        match $self {
            ApiServer::Fake($server) => $call,
            ApiServer::Real($server) => $call,
        }
    };
}

impl ApiServer {
    /// A real kube-apiserver with the real CRDs (`options.crd_dir`, else the upstream tier's;
    /// `options.routes` decides whether the Route CRD is loaded) when `KUBEBUILDER_ASSETS` is
    /// set, else the in-test server with `options`. A real
    /// server has its own bookmark interval and watch history and serves every built-in kind,
    /// so it ignores the other options.
    pub fn start(options: Options) -> Self {
        let namespaces = options.cluster_namespaces;
        let Some(assets) = real_apiserver::assets() else {
            let server = FakeApiServer::start(options);
            if namespaces {
                create_cluster_namespaces(|object| server.apply_object(object));
            }
            return ApiServer::Fake(server);
        };
        let crd_dir = match options
            .crd_dir
            .clone()
            .or_else(crate::upstream::crds_if_present)
        {
            Some(dir) => dir,
            None => panic!(
                "the real API server tier loads the real CRDs: set {} (see docs/testing.md, upstream tier)",
                crate::upstream::VAR
            ),
        };
        let server = match RealApiServer::start(&assets, &crd_dir, options.routes) {
            Ok(server) => server,
            Err(e) => panic!("real API server failed to start: {e}"),
        };
        if namespaces {
            create_cluster_namespaces(|object| server.apply_object(object));
        }
        ApiServer::Real(Box::new(server))
    }

    /// A real kube-apiserver as [`ApiServer::start`] starts one, serving the chain of
    /// `serving` (`tls.crt`, `tls.key`, `ca.crt`: e.g. a `tests/fixtures/pki/<kind>`), or
    /// `None` without `KUBEBUILDER_ASSETS`.
    pub fn start_real_serving(options: Options, serving: &Path) -> Option<Self> {
        let assets = real_apiserver::assets()?;
        let crd_dir = options
            .crd_dir
            .clone()
            .or_else(crate::upstream::crds_if_present)
            .unwrap_or_else(|| {
                panic!(
                    "the real API server tier loads the real CRDs: set {}",
                    crate::upstream::VAR
                )
            });
        let server = RealApiServer::start_serving(&assets, &crd_dir, options.routes, Some(serving))
            .unwrap_or_else(|e| panic!("real API server failed to start: {e}"));
        create_cluster_namespaces(|object| server.apply_object(object));
        Some(ApiServer::Real(Box::new(server)))
    }

    pub fn is_real(&self) -> bool {
        matches!(self, ApiServer::Real(_))
    }

    /// Which API server a test runs against, for its log.
    pub fn describe(&self) -> &'static str {
        if self.is_real() {
            "a real kube-apiserver (KUBEBUILDER_ASSETS)"
        } else {
            "the in-test one"
        }
    }

    /// The real server, for what only it has (ServiceAccount tokens, any user's requests).
    pub fn real(&self) -> Option<&RealApiServer> {
        match self {
            ApiServer::Fake(_) => None,
            ApiServer::Real(real) => Some(real),
        }
    }

    /// The in-test server, for what only it can do.
    pub fn fake(&self) -> Option<&FakeApiServer> {
        match self {
            ApiServer::Fake(fake) => Some(fake),
            ApiServer::Real(_) => None,
        }
    }

    pub fn kubeconfig_file(&self) -> &Path {
        either!(self, s => s.kubeconfig_file())
    }

    pub fn get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        either!(self, s => s.get(kind, namespace, name))
    }

    pub fn list(&self, kind: &str) -> Vec<Value> {
        either!(self, s => s.list(kind))
    }

    pub fn create(&self, object: &Value) -> Result<Value, ApiError> {
        either!(self, s => s.create(object))
    }

    /// POST as field manager `manager` (operation `Update`, like a client-go `Create`).
    pub fn create_as(&self, manager: &str, object: &Value) -> Result<Value, ApiError> {
        either!(self, s => s.create_as(manager, object))
    }

    /// PUT on the main resource or `/status` as field manager `manager`.
    pub fn replace_as(
        &self,
        manager: &str,
        object: &Value,
        scope: Scope,
    ) -> Result<Value, ApiError> {
        either!(self, s => s.replace_as(manager, object, scope))
    }

    pub fn update(&self, object: &Value) -> Result<Value, ApiError> {
        either!(self, s => s.update(object))
    }

    pub fn update_status(&self, object: &Value) -> Result<Value, ApiError> {
        either!(self, s => s.update_status(object))
    }

    pub fn apply_as(
        &self,
        manager: &str,
        object: &Value,
        scope: Scope,
        force: bool,
    ) -> Result<Value, ApiError> {
        either!(self, s => s.apply_as(manager, object, scope, force))
    }

    pub fn apply_object(&self, object: &Value) -> Result<Value, ApiError> {
        either!(self, s => s.apply_object(object))
    }

    pub fn merge_patch(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        either!(self, s => s.merge_patch(kind, namespace, name, patch))
    }

    pub fn delete(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        either!(self, s => s.delete(kind, namespace, name))
    }

    pub fn load_yaml_str(&self, text: &str) -> Result<Vec<Value>, String> {
        either!(self, s => s.load_yaml_str(text))
    }

    pub fn load_yaml_file(&self, path: impl AsRef<Path>) -> Result<Vec<Value>, String> {
        either!(self, s => s.load_yaml_file(path))
    }

    pub fn load_yaml_dir(&self, dir: impl AsRef<Path>) -> Result<Vec<Value>, String> {
        either!(self, s => s.load_yaml_dir(dir))
    }

    /// An outage: the port refuses connections, open connections (watches) are cut.
    pub fn stop(&self) {
        either!(self, s => s.stop())
    }

    /// Serves again on the same port with the same objects.
    pub fn restart(&self) {
        either!(self, s => s.restart())
    }

    /// Old resourceVersions expire (watches from them get 410).
    pub fn compact(&self) {
        either!(self, s => s.compact())
    }

    /// The requests of the code under test, as the authorizer sees them.
    pub fn requests(&self) -> Vec<RequestRecord> {
        either!(self, s => s.requests())
    }

    /// The requests of `user` (e.g. `system:serviceaccount:<namespace>:<name>`).
    pub fn requests_of(&self, user: &str) -> Vec<RequestRecord> {
        either!(self, s => s.requests_of(user))
    }

    /// A token of the ServiceAccount `namespace/name` (a TokenRequest): requests with it are
    /// that ServiceAccount's, authorized by the server's RBAC.
    pub fn token_for(&self, namespace: &str, name: &str) -> Result<String, ApiError> {
        either!(self, s => s.token_for(namespace, name))
    }

    /// A kubeconfig for this server that authenticates with `token`.
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        either!(self, s => s.kubeconfig_with_token(token))
    }

    pub fn clear_requests(&self) {
        either!(self, s => s.clear_requests())
    }
}

/// The fixture operations the shared cluster fixtures (`support::cluster`) use, so that they
/// take the test's [`ApiServer`] or, for tests that need the in-test server itself, a
/// [`FakeApiServer`].
pub trait FixtureApi {
    fn get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value>;
    fn apply_object(&self, object: &Value) -> Result<Value, ApiError>;
    fn load_yaml_dir(&self, dir: &Path) -> Result<Vec<Value>, String>;
}

impl FixtureApi for ApiServer {
    fn get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        ApiServer::get(self, kind, namespace, name)
    }
    fn apply_object(&self, object: &Value) -> Result<Value, ApiError> {
        ApiServer::apply_object(self, object)
    }
    fn load_yaml_dir(&self, dir: &Path) -> Result<Vec<Value>, String> {
        ApiServer::load_yaml_dir(self, dir)
    }
}

impl FixtureApi for FakeApiServer {
    fn get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        FakeApiServer::get(self, kind, namespace, name)
    }
    fn apply_object(&self, object: &Value) -> Result<Value, ApiError> {
        FakeApiServer::apply_object(self, object)
    }
    fn load_yaml_dir(&self, dir: &Path) -> Result<Vec<Value>, String> {
        FakeApiServer::load_yaml_dir(self, dir)
    }
}
