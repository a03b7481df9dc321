//! An in-process fake Kubernetes API server for integration tests, held to what a real
//! kube-apiserver answers: `tests/apiserver_corpus.rs` replays recorded kube-apiserver 1.36
//! answers against it.
//!
//! No real kube-apiserver can run on the build machines (Debian ships only the clients), so
//! cluster-mode tests run the real binary and real kube-rs clients against this server over
//! plain HTTP/1.1 on `127.0.0.1:<ephemeral>`.
//!
//! What it implements (see each module's docs):
//! - `registry.rs`: the built-in kinds of `builtin.rs` and the CRDs derived from our API
//!   types, or the real ones from the upstream tier via [`Options::crd_dir`] (Routes
//!   optional); discovery documents.
//! - `store.rs`: objects keyed by resource/namespace/name (two APIs of one kind, core and
//!   events.k8s.io Events, share a storage and read each other's objects converted), one
//!   global resourceVersion; each
//!   write runs kube-apiserver's stages in its order (decode, the body's namespace, field
//!   management, admission with namespace existence, `PrepareForCreate`/`BeforeUpdate`,
//!   validation, resourceVersion rules, storage); get/list (selectors, limit/continue), create,
//!   replace, merge/JSON/strategic patch, apply, delete (preconditions, finalizers, `Success`
//!   Status), `/status` subresource rules.
//! - `meta.rs`: ObjectMeta validation as apimachinery does it, with its messages.
//! - `builtin.rs`: built-in kinds as their Go types (decode errors, zero values, `omitempty`,
//!   `Time`/`MicroTime`), defaults, strategies, validation and admission.
//! - `gotime.rs`: Go's time parsing and its error texts.
//! - `jsonpatch.rs`: JSON patches with evanphx/json-patch v4's rules.
//! - `strategic.rs`: strategic merge patches (directives, merge keys, list order).
//! - `apply.rs`: managedFields as Kubernetes records them (per manager, operation, subresource,
//!   and apiVersion for `Update`; Compare-based ownership of non-apply writes; request
//!   managedFields used, reset or ignored as `decodeLiveOrNew` does), server-side apply with
//!   conflicts worded like Kubernetes, `force`, removal of omitted fields, list-map/set/atomic
//!   merging from the CRD schema or the built-in kind's shape.
//! - `schema.rs`: CRD schema pruning, `default:` values and validation (422 Invalid) with
//!   kube-openapi's messages, also as [`validate_against_real_crd`].
//! - `cel.rs`: the CRDs' `x-kubernetes-validations` (CEL) rules on every write, transition
//!   rules with `oldSelf`, Kubernetes' library functions and error texts; a rule it cannot
//!   evaluate is a 500 and fails the test when the server is dropped.
//! - `authz.rs`: bearer tokens (the kubeconfig's cluster admin; ServiceAccount tokens from
//!   TokenRequest) and RBAC over the stored Roles and bindings.
//! - `watch.rs`: watches with history replay, 410 Expired after [`FakeApiServer::compact`],
//!   bookmarks, streaming lists (`sendInitialEvents`), timeouts.
//! - `http.rs`: routing, authentication and authorization, write options, content types,
//!   status codes, the request log.
//!
//! This module owns the test-facing handle, [`FakeApiServer`]: starting the server on its own
//! thread and runtime (so tests that block do not stall it), stopping and restarting it on the
//! same port, the kubeconfig, and helpers that write through the same code path as HTTP.
//!
//! Usage (in `tests/<name>.rs`):
//! ```text
//! use support::fake_apiserver::{FakeApiServer, Options};
//!
//! let api = FakeApiServer::start(Options::default());
//! api.load_yaml_dir("tests/fixtures/cluster")?;          // objects incl. .status
//! let child = Command::new(env!("CARGO_BIN_EXE_machine-config-server"))
//!     .args(["start", "--kubeconfig"]).arg(api.kubeconfig_file())
//!     .args(["--apiserver-url", "https://api-int.example:6443"]).spawn()?;
//! // ... change objects with api.apply_object / update_status / delete, observe the binary ...
//! api.stop();     // outage: port refuses connections, watch streams are cut
//! api.restart();  // same port, same objects; clients resume their watches
//! let mcn = api.get("MachineConfigNode", None, "node-1");
//! let verbs = api.requests();  // what the binary called, for RBAC checks
//! ```
//!
//! Known simplifications: only the built-in kinds of `builtin.rs` are modelled (others given
//! as extra resources are stored as sent), no controllers (a deleted Namespace stays
//! `Terminating`, Services get no cluster IP), admission is NamespaceLifecycle and
//! TaintNodesByCondition only, RBAC knows no aggregation and no escalation checks, no CEL cost
//! budgets (see `cel.rs`), a list snapshot reaches back only as far as the change history,
//! strategic merge patches do not apply `$setElementOrder` or `$retainKeys` (see
//! `strategic.rs`), quantities are not canonicalized. Field management: no cap of ten
//! `Update` managers (`ancient-changes`), no last-applied annotation handling, metadata other
//! than labels/annotations/finalizers/ownerReferences is not owned by appliers, an apply to a
//! built-in's `/status` applies only `.status`. Defaults are applied on writes, not again on reads (schemas
//! never change while a server runs). The CRDs derived from our types carry no `default:`
//! (schemars adds one per `#[serde(default)]` field; the real CRDs do not).
#![allow(dead_code, unused_imports)]

mod apply;
mod authz;
mod builtin;
pub mod cel;
pub mod gotime;
mod http;
mod jsonpatch;
pub mod meta;
mod registry;
mod schema;
mod selectors;
mod status;
mod store;
mod strategic;
mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

pub use registry::{derived_crds, real_crds};
pub use registry::{ResourceDef, ResourceId};
pub use schema::{validate_against, validate_against_real_crd};
pub use status::{ApiError, BadValue, Cause, ErrorType, FieldError};
pub use store::{freeze_clock, Scope, WriteParams};

use registry::Registry;
use store::{Preconditions, Store, Target};

/// Field manager the fixture helpers ([`FakeApiServer::apply_object`], `load_yaml_*`) use.
pub const FIXTURE_MANAGER: &str = "fake-apiserver-fixtures";

/// The namespaces a fresh kube-apiserver has.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// How to start a [`FakeApiServer`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Serve `route.openshift.io/v1` Routes (an OpenShift cluster). When `false` the API is
    /// unknown and requests for it get 404, as on plain Kubernetes.
    pub routes: bool,
    /// How often watches that allow bookmarks get a BOOKMARK event.
    pub bookmark_interval: Duration,
    /// How many changes the watch history keeps before old resourceVersions expire (410).
    pub history_limit: usize,
    /// CRD directory (e.g. the real CRDs, `support::upstream::crds()`); `None` serves the CRDs
    /// derived from our own API types.
    pub crd_dir: Option<PathBuf>,
    /// More resources to serve, e.g. `ResourceDef::builtin("", "podtemplates", "PodTemplate",
    /// true, false)` (stored as sent).
    pub extra_resources: Vec<ResourceDef>,
    /// [`crate::api_server::ApiServer::start`] creates the namespaces every OpenShift cluster
    /// has (`openshift-machine-config-operator`); `false` leaves them to the test, as on the
    /// bootstrap node's API server before the installer's manifests are applied.
    pub cluster_namespaces: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            routes: true,
            bookmark_interval: Duration::from_secs(5),
            history_limit: 10_000,
            crd_dir: None,
            extra_resources: Vec::new(),
            cluster_namespaces: true,
        }
    }
}

/// One API request the server received, for tests that check RBAC coverage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection
    /// (non-resource paths: the lower-case HTTP method).
    pub verb: String,
    /// API group ("" for core and non-resource paths).
    pub group: String,
    pub version: String,
    /// Plural resource ("" for discovery and other non-resource paths).
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    /// The object named in the path, or for list/watch the name a `metadata.name` field
    /// selector pins (what RBAC `resourceNames` are checked against).
    pub name: Option<String>,
    /// HTTP status of the response (200 for a watch that started).
    pub status: u16,
    /// The authenticated user (empty when authentication failed).
    pub user: String,
}

impl RequestRecord {
    /// The verbs kube-apiserver's authorizer checks for this request: the request's own verb,
    /// and `create` as well when a patch (server-side apply) or an update created the object
    /// (the API server authorizes that create separately, after the patch or update itself).
    pub fn authorized_verbs(&self) -> Vec<&str> {
        let mut verbs = vec![self.verb.as_str()];
        if matches!(self.verb.as_str(), "patch" | "update") && self.status == 201 {
            verbs.push("create");
        }
        verbs
    }
}

/// State shared by the HTTP handlers and the test handle.
pub struct Shared {
    registry: Registry,
    tokens: Mutex<authz::Tokens>,
    store: Arc<Mutex<Store>>,
    requests: Mutex<Vec<RequestRecord>>,
    options: Options,
    address: SocketAddr,
}

impl Shared {
    fn lock_store(&self) -> Result<MutexGuard<'_, Store>, ApiError> {
        self.store
            .lock()
            .map_err(|_| ApiError::new(500, "InternalError", "store lock poisoned"))
    }

    fn address(&self) -> String {
        self.address.to_string()
    }
}

enum Control {
    Stop(std::sync::mpsc::Sender<()>),
    Start(std::sync::mpsc::Sender<Result<(), String>>),
    Shutdown,
}

/// Handle to a running fake API server. Dropping it shuts the server down.
pub struct FakeApiServer {
    shared: Arc<Shared>,
    control: tokio::sync::mpsc::UnboundedSender<Control>,
    thread: Option<std::thread::JoinHandle<()>>,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl FakeApiServer {
    /// Starts a server on `127.0.0.1:<ephemeral>`. Panics when it cannot (CRDs unreadable,
    /// no port): a test set-up failure, not a request error.
    pub fn start(options: Options) -> Self {
        match Self::try_start(options) {
            Ok(server) => server,
            Err(e) => panic!("fake API server failed to start: {e}"),
        }
    }

    /// [`FakeApiServer::start`] returning the reason it could not start.
    pub fn try_start(options: Options) -> Result<Self, String> {
        let registry = Registry::standard(
            options.routes,
            options.crd_dir.as_deref(),
            &options.extra_resources,
        )?;
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("set_nonblocking: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("local_addr: {e}"))?;
        let namespaces = registry.find("", "v1", "namespaces");
        let mut store = Store::new(registry.len(), options.history_limit, namespaces);
        // Core and events.k8s.io Events are one storage served by two APIs.
        if let (Some(core), Some(events)) = (
            registry.find("", "v1", "events"),
            registry.find("events.k8s.io", "v1", "events"),
        ) {
            store.share(core, events);
        }
        let shared = Arc::new(Shared {
            registry,
            tokens: Mutex::new(authz::Tokens::default()),
            store: Arc::new(Mutex::new(store)),
            requests: Mutex::new(Vec::new()),
            options,
            address,
        });

        // What every kube-apiserver creates at start (its bootstrap controller).
        if let Some(id) = namespaces {
            let def = shared.registry.get(id).clone();
            let mut store = shared.lock_store().map_err(|e| e.to_string())?;
            for name in SYSTEM_NAMESPACES {
                let namespace = serde_json::json!({
                    "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name }
                });
                store
                    .create(&def, id, None, namespace, &Self::params("kube-apiserver"))
                    .map_err(|e| format!("namespace {name}: {e}"))?;
            }
        }

        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig_yaml(&format!("http://{address}"), authz::ADMIN_TOKEN),
        )
        .map_err(|e| format!("writing kubeconfig: {e}"))?;

        let (control, control_rx) = tokio::sync::mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fake-apiserver".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("runtime: {e}")));
                        return;
                    }
                };
                runtime.block_on(control_loop(thread_shared, listener, control_rx, ready_tx));
            })
            .map_err(|e| format!("spawning server thread: {e}"))?;
        ready_rx
            .recv()
            .map_err(|_| "server thread exited during start".to_string())??;
        Ok(FakeApiServer {
            shared,
            control,
            thread: Some(thread),
            kubeconfig,
            _dir: dir,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.address)
    }

    pub fn address(&self) -> SocketAddr {
        self.shared.address
    }

    /// A kubeconfig file pointing at this server (cluster/context/user `fake`, namespace
    /// `default`), for `--kubeconfig` and `kube::Config`.
    pub fn kubeconfig_file(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kube-rs client configured from [`FakeApiServer::kubeconfig_file`].
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = match kube::config::Kubeconfig::read_from(&self.kubeconfig) {
            Ok(k) => k,
            Err(e) => panic!("reading fake kubeconfig: {e}"),
        };
        let config =
            match kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await {
                Ok(c) => c,
                Err(e) => panic!("fake kubeconfig rejected by kube-rs: {e}"),
            };
        match kube::Client::try_from(config) {
            Ok(c) => c,
            Err(e) => panic!("kube client from fake kubeconfig: {e}"),
        }
    }

    /// Stops serving: the port refuses connections and open connections (watch streams
    /// included) are cut. Objects and history are kept. Returns once the port is closed.
    pub fn stop(&self) {
        let (done, wait) = std::sync::mpsc::channel();
        if self.control.send(Control::Stop(done)).is_ok() {
            let _ = wait.recv();
        }
    }

    /// Serves again on the same port after [`FakeApiServer::stop`], with the same state.
    /// Panics if the port cannot be bound again within a few seconds.
    pub fn restart(&self) {
        let (done, wait) = std::sync::mpsc::channel();
        if self.control.send(Control::Start(done)).is_err() {
            panic!("fake API server thread is gone");
        }
        match wait.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("fake API server restart failed: {e}"),
            Err(_) => panic!("fake API server thread is gone"),
        }
    }

    /// Drops the watch history: a watch from any resourceVersion before now gets an `ERROR`
    /// event with a 410 `Expired` Status (clients must re-list). Like an etcd compaction.
    pub fn compact(&self) {
        self.store().compact();
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.store().revision()
    }

    /// The cluster-admin token of [`FakeApiServer::kubeconfig_file`] (a `system:masters` user).
    pub fn admin_token(&self) -> String {
        authz::ADMIN_TOKEN.to_string()
    }

    /// A token of the ServiceAccount `namespace/name`, as a TokenRequest gives one: requests
    /// with it are that ServiceAccount's and the server's RBAC authorizes them against the
    /// stored Roles, ClusterRoles and bindings. 404 when the ServiceAccount does not exist.
    pub fn token_for(&self, namespace: &str, name: &str) -> Result<String, ApiError> {
        let id = self.resolve("ServiceAccount");
        let def = self.shared.registry.get(id);
        let (exists, seed) = {
            let store = self.store();
            (
                store.get(id, Some(namespace), name).is_some(),
                store.revision(),
            )
        };
        if !exists {
            return Err(ApiError::not_found(def, name));
        }
        let user = authz::User::service_account(namespace, name);
        match self.shared.tokens.lock() {
            Ok(mut tokens) => Ok(tokens.issue(user, seed)),
            Err(_) => Err(ApiError::internal("token table lock poisoned")),
        }
    }

    /// A kubeconfig for this server that authenticates with `token`.
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        kubeconfig_yaml(&self.url(), token)
    }

    /// The requests `user` made (e.g. `system:serviceaccount:<namespace>:<name>`), in order.
    pub fn requests_of(&self, user: &str) -> Vec<RequestRecord> {
        self.requests()
            .into_iter()
            .filter(|r| r.user == user)
            .collect()
    }

    /// Every API request received so far, in order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    pub fn clear_requests(&self) {
        if let Ok(mut r) = self.shared.requests.lock() {
            r.clear();
        }
    }

    /// The registry entry of a kind (`ConfigMap`), plural (`configmaps`) or qualified plural.
    /// Panics for an unknown name (a bug in the test).
    pub fn resource(&self, kind: &str) -> &ResourceDef {
        self.shared.registry.get(self.resolve(kind))
    }

    fn resolve(&self, kind: &str) -> ResourceId {
        match self.shared.registry.resolve(kind) {
            Some(id) => id,
            None => panic!("fake API server does not serve {kind:?}"),
        }
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        match self.shared.store.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// One object, or `None`. `namespace` is `None` for cluster-scoped kinds.
    pub fn get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let id = self.resolve(kind);
        self.store().get(id, namespace, name).cloned()
    }

    /// Every object of a kind, in all namespaces, sorted by namespace and name.
    pub fn list(&self, kind: &str) -> Vec<Value> {
        let id = self.resolve(kind);
        self.store().objects(id, None).cloned().collect()
    }

    /// Resource and target of an object by its apiVersion/kind/metadata (namespaced objects
    /// without a namespace go to `default`, like kubectl).
    fn locate(&self, object: &Value) -> Result<(ResourceId, Target), ApiError> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let id = self
            .shared
            .registry
            .find_kind(api_version, kind)
            .ok_or_else(|| {
                ApiError::bad_request(format!("no resource serves {api_version} {kind}"))
            })?;
        let def = self.shared.registry.get(id);
        let namespace = def.namespaced.then(|| {
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
        Ok((
            id,
            Target {
                id,
                namespace,
                name,
            },
        ))
    }

    fn params(manager: &str) -> WriteParams {
        WriteParams {
            field_manager: Some(manager.to_string()),
            ..WriteParams::default()
        }
    }

    /// POST semantics (status dropped for kinds with a status subresource).
    pub fn create(&self, object: &Value) -> Result<Value, ApiError> {
        self.create_as(FIXTURE_MANAGER, object)
    }

    /// POST as field manager `manager` (operation `Update`, like a client-go `Create`); a
    /// `metadata.managedFields` in `object` is treated as Kubernetes treats one in a request.
    pub fn create_as(&self, manager: &str, object: &Value) -> Result<Value, ApiError> {
        let (id, target) = self.locate(object)?;
        let def = self.shared.registry.get(id);
        self.store()
            .create(
                def,
                id,
                target.namespace.as_deref(),
                object.clone(),
                &Self::params(manager),
            )
            .map(|o| o.object)
    }

    /// PUT semantics on the main resource (409 when `metadata.resourceVersion` is stale).
    pub fn update(&self, object: &Value) -> Result<Value, ApiError> {
        self.replace(object, Scope::Main)
    }

    /// PUT semantics on `/status`.
    pub fn update_status(&self, object: &Value) -> Result<Value, ApiError> {
        self.replace(object, Scope::Status)
    }

    fn replace(&self, object: &Value, scope: Scope) -> Result<Value, ApiError> {
        self.replace_as(FIXTURE_MANAGER, object, scope)
    }

    /// PUT on the main resource or `/status` as field manager `manager` (operation `Update`).
    pub fn replace_as(
        &self,
        manager: &str,
        object: &Value,
        scope: Scope,
    ) -> Result<Value, ApiError> {
        let (id, target) = self.locate(object)?;
        let def = self.shared.registry.get(id);
        self.store()
            .replace(def, &target, object.clone(), scope, &Self::params(manager))
            .map(|o| o.object)
    }

    /// Server-side apply as `manager` to the main resource or `/status`.
    pub fn apply_as(
        &self,
        manager: &str,
        object: &Value,
        scope: Scope,
        force: bool,
    ) -> Result<Value, ApiError> {
        let (id, target) = self.locate(object)?;
        let def = self.shared.registry.get(id);
        let body = object.to_string();
        let params = WriteParams {
            force,
            ..Self::params(manager)
        };
        self.store()
            .apply(def, &target, body.as_bytes(), scope, &params)
            .map(|o| o.object)
    }

    /// Fixture loading: creates or updates the object by force server-side apply as
    /// [`FIXTURE_MANAGER`], then applies its `.status` through `/status` when the kind has that
    /// subresource, so the stored object carries the given status.
    ///
    /// This is real apply semantics: applying a *partial* object later removes the fields the
    /// earlier apply set and this one omits. To change a few fields use
    /// [`FakeApiServer::merge_patch`].
    pub fn apply_object(&self, object: &Value) -> Result<Value, ApiError> {
        let (id, _) = self.locate(object)?;
        let stored = self.apply_as(FIXTURE_MANAGER, object, Scope::Main, true)?;
        let has_status_subresource = self.shared.registry.get(id).status_subresource;
        match object.get("status") {
            Some(status) if has_status_subresource && !status.is_null() => {
                let mut status_only = serde_json::json!({
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

    /// JSON merge patch (RFC 7386) of an existing object, as [`FIXTURE_MANAGER`]. A `status`
    /// in the patch goes through `/status` when the kind has that subresource, the rest through
    /// the main resource, so both parts take effect. Returns the stored object.
    pub fn merge_patch(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        let id = self.resolve(kind);
        let def = self.shared.registry.get(id);
        let target = Target {
            id,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        };
        let params = Self::params(FIXTURE_MANAGER);
        let mut main = patch.clone();
        let status = match (&mut main, def.status_subresource) {
            (Value::Object(map), true) => map.remove("status"),
            _ => None,
        };
        let mut store = self.store();
        let mut stored = store
            .patch(
                def,
                &target,
                store::PatchType::Merge,
                main.to_string().as_bytes(),
                Scope::Main,
                &params,
            )?
            .object;
        if let Some(status) = status {
            let status_patch = serde_json::json!({ "status": status });
            stored = store
                .patch(
                    def,
                    &target,
                    store::PatchType::Merge,
                    status_patch.to_string().as_bytes(),
                    Scope::Status,
                    &params,
                )?
                .object;
        }
        Ok(stored)
    }

    /// DELETE semantics (404 when missing; finalizers delay the removal).
    pub fn delete(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let id = self.resolve(kind);
        let def = self.shared.registry.get(id);
        let target = Target {
            id,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        };
        self.store()
            .delete(def, &target, &Preconditions::default(), false)
    }

    /// Applies every object of a YAML (or JSON) text: multiple documents and `kind: List`
    /// are expanded. Returns the stored objects.
    pub fn load_yaml_str(&self, text: &str) -> Result<Vec<Value>, String> {
        apply_yaml_str(text, |o| self.apply_object(o))
    }

    /// [`FakeApiServer::load_yaml_str`] on a file.
    pub fn load_yaml_file(&self, path: impl AsRef<Path>) -> Result<Vec<Value>, String> {
        apply_yaml_file(path.as_ref(), |o| self.apply_object(o))
    }

    /// Loads every `*.yaml`, `*.yml` and `*.json` file under `dir` (recursively, sorted by
    /// path).
    pub fn load_yaml_dir(&self, dir: impl AsRef<Path>) -> Result<Vec<Value>, String> {
        apply_yaml_dir(dir.as_ref(), |o| self.apply_object(o))
    }
}

/// Applies every object of a YAML (or JSON) text with `apply` (either API server's
/// `apply_object`); returns the stored objects.
pub fn apply_yaml_str(
    text: &str,
    apply: impl Fn(&Value) -> Result<Value, ApiError>,
) -> Result<Vec<Value>, String> {
    yaml_objects(text)?
        .iter()
        .map(|object| apply(object).map_err(|e| e.to_string()))
        .collect()
}

/// [`apply_yaml_str`] on a file; errors name the file.
pub fn apply_yaml_file(
    path: &Path,
    apply: impl Fn(&Value) -> Result<Value, ApiError>,
) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    apply_yaml_str(&text, apply).map_err(|e| format!("{}: {e}", path.display()))
}

/// [`apply_yaml_file`] on every file [`yaml_files`] finds under `dir`.
pub fn apply_yaml_dir(
    dir: &Path,
    apply: impl Fn(&Value) -> Result<Value, ApiError>,
) -> Result<Vec<Value>, String> {
    let mut stored = Vec::new();
    for file in yaml_files(dir)? {
        stored.extend(apply_yaml_file(&file, &apply)?);
    }
    Ok(stored)
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Shutdown);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // A CEL rule the server could not evaluate was answered with 500; make sure the test
        // notices even if the client retried or ignored the error.
        let registry = &self.shared.registry;
        let failed: Vec<String> = (0..registry.len())
            .filter_map(|id| registry.get(id).schema.as_ref())
            .flat_map(cel::take_failures)
            .collect();
        if !failed.is_empty() && !std::thread::panicking() {
            panic!(
                "the fake API server could not evaluate CEL rules:\n{}",
                failed.join("\n")
            );
        }
    }
}

/// The objects of a YAML (or JSON) text: several documents, `kind: List` expanded, empty
/// documents skipped.
pub fn yaml_objects(text: &str) -> Result<Vec<Value>, String> {
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(document).map_err(|e| e.to_string())?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                objects.extend(
                    map.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => objects.push(other),
        }
    }
    Ok(objects)
}

/// Every `*.yaml`, `*.yml` and `*.json` file under `dir` (recursively), sorted by path.
pub fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    collect_files(dir, &mut files)?;
    files.sort();
    Ok(files)
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.is_dir() {
            collect_files(&path, out)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(path);
        }
    }
    Ok(())
}

fn kubeconfig_yaml(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {server}
users:
- name: fake
  user:
    token: {token}
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: default
current-context: fake
"
    )
}

/// A running accept loop and the switch that stops it.
struct Serving {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Serving {
    fn spawn(shared: Arc<Shared>, listener: tokio::net::TcpListener) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(accept_loop(shared, listener, stopped));
        Serving { stop, task }
    }

    async fn shut(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Runs on the server thread: serves, and obeys stop/start/shutdown from the handle.
async fn control_loop(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    mut control: tokio::sync::mpsc::UnboundedReceiver<Control>,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(format!("listener: {e}")));
            return;
        }
    };
    let mut serving = Some(Serving::spawn(shared.clone(), listener));
    let _ = ready.send(Ok(()));
    while let Some(command) = control.recv().await {
        match command {
            Control::Stop(done) => {
                if let Some(s) = serving.take() {
                    s.shut().await;
                }
                let _ = done.send(());
            }
            Control::Start(done) => {
                if serving.is_none() {
                    match bind_again(shared.address).await {
                        Ok(listener) => serving = Some(Serving::spawn(shared.clone(), listener)),
                        Err(e) => {
                            let _ = done.send(Err(e));
                            continue;
                        }
                    }
                }
                let _ = done.send(Ok(()));
            }
            Control::Shutdown => break,
        }
    }
    if let Some(s) = serving.take() {
        s.shut().await;
    }
}

/// Binds the old address again; retries briefly in case the port is still being released.
async fn bind_again(address: SocketAddr) -> Result<tokio::net::TcpListener, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::net::TcpListener::bind(address).await {
            Ok(listener) => return Ok(listener),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(format!("binding {address} again: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Accepts HTTP/1.1 connections until stopped, then drops the listener and aborts every open
/// connection (a client sees its connection reset, as in an API server outage).
async fn accept_loop(
    shared: Arc<Shared>,
    listener: tokio::net::TcpListener,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let router = http::router(shared);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let service = hyper_util::service::TowerToHyperService::new(router.clone());
                connections.spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    // Errors here are client disconnects; nothing to report.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}
