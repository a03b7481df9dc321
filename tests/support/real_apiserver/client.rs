//! The fixture operations of the in-test server (`get`, `list`, `create`, `update`,
//! `update_status`, `apply_as`, `apply_object`, `merge_patch`, `delete`, `load_yaml_*`) over
//! HTTP, for any API server a kubeconfig reaches: a kube-rs client on its own runtime (so the
//! calls are synchronous, like the fake server's, and work inside async tests too), kinds
//! resolved through discovery, namespaces created on first use (a real server serves only
//! existing ones), loading CRDs until they are Established, and ServiceAccount tokens.
//!
//! `tests/real_apiserver.rs` runs these operations against the in-test server (the only API
//! server this machine has); with `KUBEBUILDER_ASSETS` they run against kube-apiserver.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use super::process;
use crate::fake_apiserver::{
    apply_yaml_dir, apply_yaml_file, apply_yaml_str, yaml_files, yaml_objects, ApiError, Scope,
    FIXTURE_MANAGER,
};

/// A served resource, from discovery.
#[derive(Clone, Debug)]
struct Resource {
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespaced: bool,
    status_subresource: bool,
}

impl Resource {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `/api/v1/namespaces/ns/configmaps[/name]`, `/apis/g/v/plural[/name]`.
    fn path(&self, namespace: Option<&str>, name: Option<&str>) -> String {
        let mut path = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if let (true, Some(namespace)) = (self.namespaced, namespace) {
            path.push_str(&format!("/namespaces/{namespace}"));
        }
        path.push('/');
        path.push_str(&self.plural);
        if let Some(name) = name {
            path.push('/');
            path.push_str(name);
        }
        path
    }
}

/// A client of one API server, with the fixture operations.
pub struct ApiClient {
    runtime: Option<tokio::runtime::Runtime>,
    client: kube::Client,
    resources: Mutex<Vec<Resource>>,
    namespaces: Mutex<HashSet<String>>,
}

impl ApiClient {
    /// A client for the server and user of `kubeconfig`. Discovery runs on first use.
    pub fn connect(kubeconfig: &Path) -> Result<ApiClient, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("api-client")
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        let kubeconfig = kubeconfig.to_path_buf();
        let client = on_runtime(&runtime, async move { client_from(&kubeconfig).await })??;
        Ok(ApiClient {
            runtime: Some(runtime),
            client,
            resources: Mutex::new(Vec::new()),
            namespaces: Mutex::new(HashSet::new()),
        })
    }

    /// Whether `/readyz` answers `ok` (an error while the server is not up).
    pub fn readyz(&self) -> Result<bool, String> {
        self.run(|client| {
            Box::pin(async move {
                let request = http::Request::get("/readyz")
                    .body(Vec::new())
                    .map_err(|e| e.to_string())?;
                client
                    .request_text(request)
                    .await
                    .map(|text| text.trim() == "ok")
                    .map_err(|e| e.to_string())
            })
        })
    }

    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(
            kube::Client,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>,
    ) -> T {
        let runtime = self.runtime.as_ref().expect("runtime present until drop");
        let future = work(self.client.clone());
        match on_runtime(runtime, future) {
            Ok(value) => value,
            Err(e) => panic!("API client: {e}"),
        }
    }

    /// Applies every CRD of `dir`, waits for each to be Established, then for discovery to
    /// serve its kind.
    pub fn load_crds(&self, dir: &Path, routes: bool) -> Result<(), String> {
        let crd_resource = Resource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
            namespaced: false,
            status_subresource: true,
        };
        let mut names = Vec::new();
        for file in yaml_files(dir)? {
            let text =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            for crd in yaml_objects(&text)? {
                if crd["kind"] != "CustomResourceDefinition"
                    || (!routes && crd["spec"]["group"] == "route.openshift.io")
                {
                    continue;
                }
                let name = crd["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                self.apply_to(&crd_resource, &crd, FIXTURE_MANAGER, Scope::Main, true)
                    .map_err(|e| format!("CRD {name}: {e}"))?;
                names.push((
                    name,
                    crd["spec"]["names"]["kind"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ));
            }
        }
        for (name, _) in &names {
            process::poll(
                &format!("CRD {name} Established"),
                Duration::from_secs(60),
                || {
                    let crd = self.request("GET", &crd_resource.path(None, Some(name)), None, None);
                    let established = crd.ok().is_some_and(|crd| {
                        crd["status"]["conditions"]
                            .as_array()
                            .is_some_and(|conditions| {
                                conditions
                                    .iter()
                                    .any(|c| c["type"] == "Established" && c["status"] == "True")
                            })
                    });
                    Ok(established.then_some(()))
                },
            )?;
        }
        process::poll("discovery of the CRDs", Duration::from_secs(60), || {
            self.discover()?;
            let resources = self.resources.lock().map_err(|e| e.to_string())?;
            Ok(names
                .iter()
                .all(|(_, kind)| resources.iter().any(|r| &r.kind == kind))
                .then_some(()))
        })
    }

    /// Refreshes the resource map from discovery.
    fn discover(&self) -> Result<(), String> {
        let found = self.run(|client| {
            Box::pin(async move {
                let discovery = kube::discovery::Discovery::new(client)
                    .run()
                    .await
                    .map_err(|e| e.to_string())?;
                let mut found = Vec::new();
                for group in discovery.groups() {
                    for (resource, capabilities) in group.recommended_resources() {
                        found.push(Resource {
                            group: resource.group.clone(),
                            version: resource.version.clone(),
                            kind: resource.kind.clone(),
                            plural: resource.plural.clone(),
                            namespaced: capabilities.scope == kube::discovery::Scope::Namespaced,
                            status_subresource: capabilities
                                .subresources
                                .iter()
                                .any(|(sub, _)| sub.plural == "status"),
                        });
                    }
                }
                Ok::<_, String>(found)
            })
        })?;
        // The core group first: `Event` means the core one, as for the fake server.
        let mut found = found;
        found.sort_by_key(|r| !r.group.is_empty());
        *self.resources.lock().map_err(|e| e.to_string())? = found;
        Ok(())
    }

    fn resolve(&self, kind: &str) -> Resource {
        let find = || {
            let resources = self.resources.lock().ok()?;
            resources
                .iter()
                .find(|r| {
                    r.kind == kind
                        || r.plural == kind
                        || format!("{}.{}", r.plural, r.group) == kind
                })
                .cloned()
        };
        if let Some(resource) = find() {
            return resource;
        }
        let _ = self.discover();
        find().unwrap_or_else(|| panic!("the API server does not serve {kind:?}"))
    }

    fn locate(&self, object: &Value) -> Result<(Resource, Option<String>, String), ApiError> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let find = || {
            self.resources.lock().ok().and_then(|resources| {
                resources
                    .iter()
                    .find(|r| r.kind == kind && r.api_version() == api_version)
                    .cloned()
            })
        };
        let resource = match find() {
            Some(r) => r,
            None => {
                let _ = self.discover();
                find().ok_or_else(|| {
                    ApiError::new(
                        400,
                        "BadRequest",
                        format!("no resource serves {api_version} {kind}"),
                    )
                })?
            }
        };
        let namespace = resource.namespaced.then(|| {
            object["metadata"]["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or("default")
                .to_string()
        });
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok((resource, namespace, name))
    }

    /// One request as the fixture user; the JSON answer or the API's error.
    fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Result<Value, ApiError> {
        let method = method.to_string();
        let path = path.to_string();
        let content_type = content_type.map(str::to_string);
        self.run(move |client| {
            Box::pin(async move {
                let mut builder = http::Request::builder().method(method.as_str()).uri(path);
                if let Some(content_type) = content_type {
                    builder = builder.header("Content-Type", content_type);
                }
                let request = builder
                    .body(body.unwrap_or_default())
                    .map_err(|e| ApiError::new(400, "BadRequest", e.to_string()))?;
                client.request::<Value>(request).await.map_err(api_error)
            })
        })
    }

    /// Creates the namespace of a namespaced object when this server has not seen it yet
    /// (the fake server serves every namespace; a real one only existing ones).
    fn ensure_namespace(&self, namespace: Option<&str>) -> Result<(), ApiError> {
        let Some(namespace) = namespace else {
            return Ok(());
        };
        if self
            .namespaces
            .lock()
            .map(|n| n.contains(namespace))
            .unwrap_or(false)
        {
            return Ok(());
        }
        let resource = self.resolve("Namespace");
        let object =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        self.apply_to(&resource, &object, FIXTURE_MANAGER, Scope::Main, true)?;
        if let Ok(mut known) = self.namespaces.lock() {
            known.insert(namespace.to_string());
        }
        Ok(())
    }

    fn apply_to(
        &self,
        resource: &Resource,
        object: &Value,
        manager: &str,
        scope: Scope,
        force: bool,
    ) -> Result<Value, ApiError> {
        let namespace = resource.namespaced.then(|| {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
        });
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let mut path = resource.path(namespace, Some(name));
        if scope == Scope::Status {
            path.push_str("/status");
        }
        path.push_str(&format!("?fieldManager={manager}&force={force}"));
        self.request(
            "PATCH",
            &path,
            Some("application/apply-patch+yaml"),
            Some(object.to_string().into_bytes()),
        )
    }

    /// A token of the ServiceAccount `namespace/name` (TokenRequest): requests with it are
    /// authenticated as that ServiceAccount and authorized by RBAC.
    pub fn token_for(&self, namespace: &str, name: &str) -> Result<String, ApiError> {
        let resource = self.resolve("ServiceAccount");
        let path = format!("{}/token", resource.path(Some(namespace), Some(name)));
        let request = json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600}
        });
        let answer = self.request(
            "POST",
            &path,
            Some("application/json"),
            Some(request.to_string().into_bytes()),
        )?;
        answer["status"]["token"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError::new(500, "InternalError", format!("no token in {answer}")))
    }

    pub fn get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let resource = self.resolve(kind);
        match self.request("GET", &resource.path(namespace, Some(name)), None, None) {
            Ok(object) => Some(with_type(object, &resource)),
            Err(e) if e.code == 404 => None,
            Err(e) => panic!("GET {kind} {name}: {e}"),
        }
    }

    /// Every object of a kind, in all namespaces, sorted by namespace and name.
    pub fn list(&self, kind: &str) -> Vec<Value> {
        let resource = self.resolve(kind);
        let all = Resource {
            namespaced: false,
            ..resource.clone()
        };
        let list = match self.request("GET", &all.path(None, None), None, None) {
            Ok(list) => list,
            Err(e) => panic!("LIST {kind}: {e}"),
        };
        let mut items: Vec<Value> = list["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|item| with_type(item, &resource))
            .collect();
        let key = |o: &Value| {
            (
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        };
        items.sort_by_key(key);
        items
    }

    pub fn create(&self, object: &Value) -> Result<Value, ApiError> {
        self.create_as(FIXTURE_MANAGER, object)
    }

    /// POST as field manager `manager`.
    pub fn create_as(&self, manager: &str, object: &Value) -> Result<Value, ApiError> {
        let (resource, namespace, _) = self.locate(object)?;
        self.ensure_namespace(namespace.as_deref())?;
        let path = format!(
            "{}?fieldManager={manager}",
            resource.path(namespace.as_deref(), None)
        );
        self.request(
            "POST",
            &path,
            Some("application/json"),
            Some(object.to_string().into_bytes()),
        )
    }

    pub fn update(&self, object: &Value) -> Result<Value, ApiError> {
        self.replace_as(FIXTURE_MANAGER, object, Scope::Main)
    }

    pub fn update_status(&self, object: &Value) -> Result<Value, ApiError> {
        self.replace_as(FIXTURE_MANAGER, object, Scope::Status)
    }

    /// PUT on the main resource, `/status` or `/finalize` as field manager `manager`.
    pub fn replace_as(
        &self,
        manager: &str,
        object: &Value,
        scope: Scope,
    ) -> Result<Value, ApiError> {
        let subresource = match scope {
            Scope::Main => "",
            Scope::Status => "/status",
            Scope::Finalize => "/finalize",
        };
        let (resource, namespace, name) = self.locate(object)?;
        let path = format!(
            "{}{subresource}?fieldManager={manager}",
            resource.path(namespace.as_deref(), Some(&name))
        );
        self.request(
            "PUT",
            &path,
            Some("application/json"),
            Some(object.to_string().into_bytes()),
        )
    }

    pub fn apply_as(
        &self,
        manager: &str,
        object: &Value,
        scope: Scope,
        force: bool,
    ) -> Result<Value, ApiError> {
        let (resource, namespace, _) = self.locate(object)?;
        self.ensure_namespace(namespace.as_deref())?;
        self.apply_to(&resource, object, manager, scope, force)
    }

    /// As the fake server's: force-apply as [`FIXTURE_MANAGER`], then the `.status` through
    /// `/status` when the kind has that subresource.
    pub fn apply_object(&self, object: &Value) -> Result<Value, ApiError> {
        let (resource, _, _) = self.locate(object)?;
        let stored = self.apply_as(FIXTURE_MANAGER, object, Scope::Main, true)?;
        match object.get("status") {
            Some(status) if resource.status_subresource && !status.is_null() => {
                let mut status_only = json!({
                    "apiVersion": object["apiVersion"],
                    "kind": object["kind"],
                    "metadata": { "name": object["metadata"]["name"] },
                    "status": status,
                });
                if let Some(ns) = stored["metadata"].get("namespace") {
                    status_only["metadata"]["namespace"] = ns.clone();
                }
                self.apply_as(FIXTURE_MANAGER, &status_only, Scope::Status, true)
            }
            _ => Ok(stored),
        }
    }

    /// As the fake server's: `status` through `/status`, the rest through the main resource.
    pub fn merge_patch(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        let resource = self.resolve(kind);
        let mut main = patch.clone();
        let status = match (&mut main, resource.status_subresource) {
            (Value::Object(map), true) => map.remove("status"),
            _ => None,
        };
        let path = resource.path(namespace, Some(name));
        let merge = "application/merge-patch+json";
        let query = format!("?fieldManager={FIXTURE_MANAGER}");
        let mut stored = self.request(
            "PATCH",
            &format!("{path}{query}"),
            Some(merge),
            Some(main.to_string().into_bytes()),
        )?;
        if let Some(status) = status {
            let body = json!({ "status": status }).to_string().into_bytes();
            stored = self.request(
                "PATCH",
                &format!("{path}/status{query}"),
                Some(merge),
                Some(body),
            )?;
        }
        Ok(stored)
    }

    pub fn delete(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let resource = self.resolve(kind);
        self.request("DELETE", &resource.path(namespace, Some(name)), None, None)
    }

    pub fn load_yaml_str(&self, text: &str) -> Result<Vec<Value>, String> {
        apply_yaml_str(text, |o| self.apply_object(o))
    }

    pub fn load_yaml_file(&self, path: impl AsRef<Path>) -> Result<Vec<Value>, String> {
        apply_yaml_file(path.as_ref(), |o| self.apply_object(o))
    }

    pub fn load_yaml_dir(&self, dir: impl AsRef<Path>) -> Result<Vec<Value>, String> {
        apply_yaml_dir(dir.as_ref(), |o| self.apply_object(o))
    }
}

impl Drop for ApiClient {
    fn drop(&mut self) {
        // Dropping a runtime inside an async test would panic; this does not block.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs `future` on `runtime` and waits for it from any thread, inside an async test too
/// (where `block_on` would panic).
fn on_runtime<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    future: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, String> {
    let (done, wait) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        let _ = done.send(future.await);
    });
    wait.recv()
        .map_err(|_| "client task ended without an answer".to_string())
}

async fn client_from(kubeconfig: &Path) -> Result<kube::Client, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// Lists do not carry apiVersion/kind per item; the fake server's objects always do.
fn with_type(mut object: Value, resource: &Resource) -> Value {
    if let Value::Object(map) = &mut object {
        map.insert("apiVersion".into(), Value::from(resource.api_version()));
        map.insert("kind".into(), Value::from(resource.kind.clone()));
    }
    object
}

/// The API's error as the fake server's error type.
fn api_error(error: kube::Error) -> ApiError {
    match error {
        kube::Error::Api(status) => {
            let reason = KNOWN_REASONS
                .iter()
                .find(|r| **r == status.reason)
                .copied()
                .unwrap_or("Unknown");
            let mut api_error = ApiError::new(status.code, reason, status.message.clone());
            if let Some(details) = status
                .details
                .as_ref()
                .and_then(|d| serde_json::to_value(d).ok())
            {
                *api_error.details = details;
            }
            api_error
        }
        other => ApiError::new(503, "ServiceUnavailable", other.to_string()),
    }
}

/// `metav1.StatusReason` values.
const KNOWN_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];
