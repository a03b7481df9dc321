//! The object store: every object of every resource, the global resourceVersion counter and the
//! bounded change history that watches replay from.
//!
//! Owns the semantics of each verb on stored objects (get, list with selectors and pagination,
//! create, replace, patch, delete, status subresource rules, preconditions, generation,
//! finalizers) and the publication of every change to watchers. All callers (HTTP handlers and
//! the test handle) go through these methods, so watches see test-made changes too. Each write
//! runs kube-apiserver's stages in its order (decode, namespace of the body, field management,
//! admission, `PrepareForCreate`/`BeforeUpdate`, validation, resourceVersion rules, storage),
//! so that a request with several faults fails on the one Kubernetes reports. Knows nothing
//! about HTTP framing; schema checks live in `schema.rs`, ObjectMeta rules in `meta.rs`,
//! built-in kinds in `builtin.rs`, field ownership in `apply.rs`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{json, Map, Value};
use tokio::sync::broadcast;

use super::apply;
use super::builtin::{self, Encoding};
use super::jsonpatch;
use super::meta::{self, NameRule};
use super::registry::{ResourceDef, ResourceId};
use super::schema;
use super::selectors::Selectors;
use super::status::{causes_of, go_quote, ApiError, BadValue, Cause, FieldError};
use super::strategic;

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One committed change, as kept in the history and sent to watchers.
#[derive(Clone, Debug)]
pub struct Change {
    pub resource: ResourceId,
    pub namespace: String,
    pub kind: ChangeKind,
    /// The object after the change (for `Deleted`: its last state, at the deletion's version).
    pub object: Value,
    /// The object before the change (`None` for `Added`); used for selector transitions.
    pub previous: Option<Value>,
    pub revision: u64,
}

/// Which object a write targets. `namespace` is `None` for cluster-scoped resources.
#[derive(Clone, Debug)]
pub struct Target {
    pub id: ResourceId,
    pub namespace: Option<String>,
    pub name: String,
}

/// `fieldValidation` of a write: what to do with fields the schema does not know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and return a `Warning` header (the server default).
    #[default]
    Warn,
    /// Reject the request with 400.
    Strict,
}

/// Query parameters that shape a write.
#[derive(Clone, Debug, Default)]
pub struct WriteParams {
    /// `fieldManager`; defaults to the client's User-Agent product name like Kubernetes does.
    pub field_manager: Option<String>,
    /// `force` of a server-side apply.
    pub force: bool,
    /// `dryRun=All`: run every check, store nothing.
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    /// The request's User-Agent (for the default field manager).
    pub user_agent: Option<String>,
    /// The 403 to answer if the write turns out to create the object (an update or apply the
    /// writer may not create with), after validation as kube-apiserver's `createValidation`.
    pub create_forbidden: Option<ApiError>,
}

impl WriteParams {
    /// The manager recorded in managedFields for a non-apply write: `fieldManager`, else the
    /// User-Agent up to its first `/` (printable characters, at most 128 bytes, as Kubernetes'
    /// `prefixFromUserAgent`), else `unknown` (`buildManagerInfo`).
    pub fn manager(&self) -> String {
        if let Some(m) = self.field_manager.as_deref().filter(|m| !m.is_empty()) {
            return m.to_string();
        }
        let mut prefix = String::new();
        let product = self.user_agent.as_deref().unwrap_or_default();
        for c in product.split('/').next().unwrap_or_default().chars() {
            if c.is_control() {
                continue;
            }
            if prefix.len() + c.len_utf8() > 128 {
                break;
            }
            prefix.push(c);
        }
        if prefix.is_empty() {
            "unknown".to_string()
        } else {
            prefix
        }
    }
}

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The main resource: everything, except `.status` when the resource has a status
    /// subresource.
    Main,
    /// The `/status` subresource: only `.status`.
    Status,
    /// A Namespace's `/finalize` subresource: everything but `.status` (its strategy keeps
    /// the stored status), recorded under the subresource `finalize`.
    Finalize,
}

/// The result of a write: the stored object, whether it was created, and warnings for the
/// `Warning` response header.
#[derive(Clone, Debug)]
pub struct WriteOutcome {
    pub object: Value,
    pub created: bool,
    pub warnings: Vec<String>,
}

/// Optional preconditions of a DELETE (`DeleteOptions.preconditions`).
#[derive(Clone, Debug, Default)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// The finalizer a delete's propagation adds (`foregroundDeletion` for `Foreground`,
    /// `orphan` for `Orphan`): with no garbage collector running it stays, and so does the object.
    pub propagation_finalizer: Option<String>,
    /// Whether the delete chose a propagation (a policy or `orphanDependents`): then the
    /// garbage collector's finalizers the object has are replaced by the chosen one
    /// (`deletionFinalizersForGarbageCollection`), also on an object already being deleted.
    pub propagation_chosen: bool,
}

/// Parameters of a LIST.
#[derive(Clone, Debug, Default)]
pub struct ListParams {
    pub selectors: Selectors,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

type ObjectKey = (String, String);

/// All objects and the change history. Guarded by one mutex in the server; every method is
/// synchronous and short, so the lock is never held across an `.await`.
pub struct Store {
    objects: Vec<BTreeMap<ObjectKey, Value>>,
    revision: u64,
    history: VecDeque<Arc<Change>>,
    /// A watch may resume from any revision `>=` this one: every change after it is in
    /// `history`.
    oldest_resumable: u64,
    history_limit: usize,
    events: broadcast::Sender<Arc<Change>>,
    uid_seed: u64,
    uid_counter: u64,
    /// The Namespace resource, when served: namespaced creates need their namespace.
    namespaces: Option<ResourceId>,
    /// Where each resource's objects are kept: its own id, or that of the resource it shares
    /// its storage with (core and events.k8s.io Events).
    slots: Vec<ResourceId>,
}

impl Store {
    pub fn new(resources: usize, history_limit: usize, namespaces: Option<ResourceId>) -> Self {
        let (events, _) = broadcast::channel(4096);
        let uid_seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ u64::from(std::process::id()).rotate_left(32);
        Store {
            objects: vec![BTreeMap::new(); resources],
            // Real servers start far from zero; starting at 1000 keeps "0" special (any version).
            revision: 1000,
            history: VecDeque::new(),
            oldest_resumable: 1000,
            history_limit: history_limit.max(1),
            events,
            uid_seed,
            uid_counter: 0,
            namespaces,
            slots: (0..resources).collect(),
        }
    }

    /// The storage slot of resource `id` (what its changes are published under).
    pub fn slot(&self, id: ResourceId) -> ResourceId {
        self.slots[id]
    }

    /// Serves resource `id` from the storage of resource `with` (two APIs of one kind).
    pub fn share(&mut self, id: ResourceId, with: ResourceId) {
        self.slots[id] = self.slots[with];
    }

    /// The stored object as resource `def` serves it (converted when another API stored it).
    fn get_as(&self, def: &ResourceDef, target: &Target) -> Option<Value> {
        let stored = self.get(target.id, target.namespace.as_deref(), &target.name)?;
        Some(served_as(def, stored))
    }

    /// The current global resourceVersion.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The oldest revision a watch can resume from.
    pub fn oldest_resumable(&self) -> u64 {
        self.oldest_resumable
    }

    /// Drops the whole change history: watches from any earlier revision get 410 Expired.
    pub fn compact(&mut self) {
        self.history.clear();
        self.oldest_resumable = self.revision;
    }

    /// A receiver of every change committed from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.events.subscribe()
    }

    /// Changes with revision `> after`, oldest first. Caller checks `oldest_resumable` first.
    pub fn history_after(&self, after: u64) -> impl Iterator<Item = &Arc<Change>> {
        self.history.iter().filter(move |c| c.revision > after)
    }

    pub fn get(&self, id: ResourceId, namespace: Option<&str>, name: &str) -> Option<&Value> {
        self.objects[self.slots[id]]
            .get(&(namespace.unwrap_or_default().to_string(), name.to_string()))
    }

    /// Objects of a resource (in one namespace, or all), sorted by namespace and name.
    pub fn objects<'a>(
        &'a self,
        id: ResourceId,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects[self.slots[id]]
            .iter()
            .filter(move |((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .map(|(_, v)| v)
    }

    /// LIST: a `<Kind>List` with `metadata.resourceVersion`, honouring selectors and
    /// `limit`/`continue`.
    pub fn list(
        &self,
        def: &ResourceDef,
        id: ResourceId,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> Result<Value, ApiError> {
        check_list_options(params)?;
        let from_cache = params.resource_version.as_deref() == Some("0");
        let (list_revision, start_after) = match params.continue_token.as_deref() {
            Some(token) if !token.is_empty() => {
                let (rv, key) = decode_continue(token)?;
                if rv < self.oldest_resumable {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    ));
                }
                (rv, Some(key))
            }
            _ => (self.list_version(params)?, None),
        };
        // A list at an older revision (a continued list, `Exact`) is a snapshot of it.
        let snapshot = self.objects_at(id, list_revision);
        // etcd's key order: `<namespace>/<name>` as one string.
        let mut keyed: Vec<(String, &ObjectKey, &Value)> = snapshot
            .iter()
            .filter(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .map(|(key, obj)| (storage_key(key), key, obj))
            .filter(|(k, _, _)| {
                start_after
                    .as_ref()
                    .is_none_or(|after| k > &storage_key(after))
            })
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        // The watch cache serves resourceVersion=0 whole, whatever the limit.
        let limit = params.limit.filter(|_| !from_cache);
        let mut items = Vec::new();
        for (i, (_, key, stored)) in keyed.iter().enumerate() {
            let obj = served_as(def, stored);
            if !params.selectors.matches(&obj) {
                continue;
            }
            items.push(obj);
            if limit.is_some_and(|l| items.len() >= l) && i + 1 < keyed.len() {
                // The page is full and more keys follow (matching or not): the list continues
                // after this one; how many remain is only known without selectors.
                let remaining = params.selectors.is_empty().then_some(keyed.len() - i - 1);
                let token = encode_continue(list_revision, key);
                return Ok(list_json(
                    def,
                    list_revision,
                    items,
                    Some((token, remaining)),
                ));
            }
        }
        Ok(list_json(def, list_revision, items, None))
    }

    /// The objects of resource `id` as they were at `revision`: the current ones with the
    /// history's later changes undone (`revision` is at least `oldest_resumable`).
    fn objects_at(&self, id: ResourceId, revision: u64) -> BTreeMap<ObjectKey, Value> {
        let mut objects = self.objects[self.slots[id]].clone();
        for change in self.history.iter().rev() {
            if change.revision <= revision {
                break;
            }
            if change.resource != self.slots[id] {
                continue;
            }
            let name = change.object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let key = (change.namespace.clone(), name);
            match change.kind {
                ChangeKind::Added => {
                    objects.remove(&key);
                }
                ChangeKind::Modified | ChangeKind::Deleted => {
                    let before = change
                        .previous
                        .clone()
                        .unwrap_or_else(|| change.object.clone());
                    objects.insert(key, before);
                }
            }
        }
        objects
    }

    /// The revision a list without `continue` is served at: the current one, or for
    /// `resourceVersionMatch=Exact` the one asked for (410 when the history no longer reaches
    /// back to it); a resourceVersion newer than the store is a 504.
    fn list_version(&self, params: &ListParams) -> Result<u64, ApiError> {
        let Some(rv) = params
            .resource_version
            .as_deref()
            .filter(|rv| !rv.is_empty())
        else {
            return Ok(self.revision);
        };
        let wanted = parse_revision(rv)?;
        if wanted > self.revision {
            return Err(ApiError::new(
                504,
                "Timeout",
                format!(
                    "Too large resource version: {wanted}, current: {}",
                    self.revision
                ),
            ));
        }
        match params.resource_version_match.as_deref() {
            Some("Exact") if wanted < self.oldest_resumable => Err(ApiError::expired(format!(
                "too old resource version: {wanted} ({})",
                self.oldest_resumable
            ))),
            Some("Exact") => Ok(wanted),
            _ => Ok(self.revision),
        }
    }

    /// POST: creates an object, in kube-apiserver's order: decode (unknown fields, defaults),
    /// system fields wiped, namespace of the body against the URL (400), field management,
    /// mutating admission (the namespace must exist and not be terminating; built-in
    /// admission), then the store's create: system fields, generated name, `PrepareForCreate`,
    /// validation (422), resourceVersion must be unset (500), the name free (409).
    pub fn create(
        &mut self,
        def: &ResourceDef,
        id: ResourceId,
        namespace: Option<&str>,
        body: Value,
        params: &WriteParams,
    ) -> Result<WriteOutcome, ApiError> {
        let (mut object, warnings) = decode(def, body, params)?;
        wipe_system_fields(&mut object);
        ensure_namespace_matches(def, namespace, &mut object)?;
        let object = manage_update(def, None, object, &params.manager(), Scope::Main);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let target = Target {
            id,
            namespace: namespace.map(str::to_string),
            name,
        };
        self.create_stages(def, &target, object, params, warnings)
    }

    /// The part of a create after field management (also an apply or update that creates).
    fn create_stages(
        &mut self,
        def: &ResourceDef,
        target: &Target,
        mut object: Value,
        params: &WriteParams,
        mut warnings: Vec<String>,
    ) -> Result<WriteOutcome, ApiError> {
        self.admit_create(def, target.namespace.as_deref(), &mut object)?;
        // FillObjectMetaSystemFields and the generated name.
        {
            let uid = self.next_uid();
            let meta = ensure_object(&mut object, "metadata");
            meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
            meta.insert("uid".into(), json!(uid));
        }
        let generate_name = object["metadata"]["generateName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if object["metadata"]["name"].as_str().unwrap_or("").is_empty() && !generate_name.is_empty()
        {
            let name = self.generated_name(&generate_name);
            object["metadata"]["name"] = json!(name);
        }
        prepare_create(def, &mut object);
        normalize_metadata(def, &mut object);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (causes, ratcheted) = validate_create(def, &object)?;
        if !causes.is_empty() {
            return Err(ApiError::invalid_in(
                def.error_group(),
                &def.kind,
                &name,
                &causes,
            ));
        }
        warnings.extend(ratcheted);
        let generic =
            meta::validate_create(&object["metadata"], def.namespaced, NameRule::PathSegment);
        if !generic.is_empty() {
            return Err(ApiError::invalid_in(
                def.error_group(),
                &def.kind,
                &name,
                &causes_of(&generic),
            ));
        }
        if let Some(forbidden) = &params.create_forbidden {
            return Err(forbidden.clone());
        }
        if def.is_custom() {
            warnings.extend(finalizer_warnings(&object, None));
        }
        let target = Target {
            name: name.clone(),
            ..target.clone()
        };
        if !params.dry_run {
            let rv = object["metadata"]["resourceVersion"].as_str().unwrap_or("");
            if rv.parse::<u64>().is_ok_and(|v| v != 0) {
                return Err(ApiError::plain(
                    "resourceVersion should not be set on objects to be created",
                ));
            }
        }
        ensure_object(&mut object, "metadata").remove("resourceVersion");
        if let Some(existing) = self.get(target.id, target.namespace.as_deref(), &name) {
            let mut err = ApiError::already_exists(def, &name);
            if existing["metadata"].get("deletionTimestamp").is_some() {
                err.message = format!("object is being deleted: {}", err.message);
            }
            return Err(err);
        }
        if params.dry_run {
            return Ok(WriteOutcome {
                object,
                created: true,
                warnings,
            });
        }
        let object = self.commit(&target, None, Some(object));
        Ok(WriteOutcome {
            object,
            created: true,
            warnings,
        })
    }

    /// Mutating admission of a create: NamespaceLifecycle (the namespace must exist and not be
    /// terminating) and the built-in kind's own (TaintNodesByCondition).
    fn admit_create(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        if let (true, Some(ns), Some(namespaces)) = (def.namespaced, namespace, self.namespaces) {
            match self.get(namespaces, None, ns) {
                None => return Err(ApiError::not_found_in("", "namespaces", ns)),
                Some(found) if found["metadata"].get("deletionTimestamp").is_some() => {
                    let mut err = ApiError::forbidden(
                        &def.group,
                        &def.plural,
                        object["metadata"]["name"].as_str().unwrap_or_default(),
                        &format!(
                            "unable to create new content in namespace {ns} because it is being terminated"
                        ),
                    );
                    err.details["causes"] = json!([{
                        "reason": "NamespaceTerminating",
                        "message": format!("namespace {ns} is being terminated"),
                        "field": "metadata.namespace",
                    }]);
                    return Err(err);
                }
                Some(_) => {}
            }
        }
        if let Some(kind) = def.builtin {
            kind.admit_create(object);
            *object = builtin::encode(kind, object, Encoding::Json);
        }
        Ok(())
    }

    /// `SimpleNameGenerator`: the prefix (cut to 58 bytes) and five random characters.
    fn generated_name(&mut self, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut cut = prefix.len().min(58);
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        self.uid_counter += 1;
        let mut bits = splitmix64(self.uid_seed ^ self.uid_counter.rotate_left(17));
        let mut name = prefix[..cut].to_string();
        for _ in 0..5 {
            name.push(ALPHABET[(bits % ALPHABET.len() as u64) as usize] as char);
            bits /= ALPHABET.len() as u64;
        }
        name
    }

    /// PUT on the main resource or `/status`: decode, the body's name and namespace against the
    /// URL (400), the stored object (404, or a create where the kind allows it), a uid in the
    /// body as a precondition (409), then [`Store::update_stages`].
    pub fn replace(
        &mut self,
        def: &ResourceDef,
        target: &Target,
        body: Value,
        scope: Scope,
        params: &WriteParams,
    ) -> Result<WriteOutcome, ApiError> {
        let (object, warnings) = decode(def, body, params)?;
        check_name(target, &object)?;
        let Some(old) = self.get_as(def, target) else {
            let creates = def.builtin.is_some_and(|k| k.create_on_update);
            if creates && scope == Scope::Main {
                let mut object = object;
                wipe_system_fields(&mut object);
                // The update's storage prepares the new object: a sent resourceVersion is
                // dropped, not refused as a create's would be.
                ensure_object(&mut object, "metadata").remove("resourceVersion");
                ensure_namespace_matches(def, target.namespace.as_deref(), &mut object)?;
                let object = manage_update(def, None, object, &params.manager(), Scope::Main);
                return self.create_stages(def, target, object, params, warnings);
            }
            return Err(ApiError::not_found(def, &target.name));
        };
        if let Some(uid) = object["metadata"]["uid"].as_str().filter(|u| !u.is_empty()) {
            check_preconditions(
                def,
                &target.name,
                &old,
                &Preconditions {
                    uid: Some(uid.to_string()),
                    ..Preconditions::default()
                },
            )?;
        }
        let new = manage_update(def, Some(&old), object, &params.manager(), scope);
        self.update_stages(def, target, old, new, scope, params, warnings)
    }

    /// The store's update after field management: the resourceVersion (unset: 422 for kinds
    /// that refuse unconditional updates, else the current one; stale: 409), `BeforeUpdate`
    /// (namespace, generation, `PrepareForUpdate` with the status subresource rules, identity
    /// fields kept), validation (422), no-op detection, dry-run, finishing a deletion whose
    /// finalizers are gone, commit.
    #[allow(clippy::too_many_arguments)]
    fn update_stages(
        &mut self,
        def: &ResourceDef,
        target: &Target,
        old: Value,
        mut new: Value,
        scope: Scope,
        params: &WriteParams,
        mut warnings: Vec<String>,
    ) -> Result<WriteOutcome, ApiError> {
        let current = old["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let sent = new["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match parse_resource_version(&sent) {
            // `ObjectResourceVersion` parses it with strconv: a plain 500.
            Err(message) => return Err(ApiError::plain(message)),
            Ok(0)
                if def
                    .builtin
                    .map_or(!def.is_custom(), |k| k.unconditional_update) =>
            {
                new["metadata"]["resourceVersion"] = json!(current);
            }
            Ok(0) => {
                return Err(ApiError::invalid_in(
                    &def.group,
                    &def.plural,
                    &target.name,
                    &[FieldError::invalid(
                        "metadata.resourceVersion",
                        BadValue::Int(0),
                        "must be specified for an update",
                    )
                    .to_cause()],
                ))
            }
            Ok(_) if sent != current => return Err(ApiError::stale(def, &target.name)),
            Ok(_) => {}
        }
        // BeforeUpdate.
        {
            let request_ns = target.namespace.clone().unwrap_or_default();
            let meta = ensure_object(&mut new, "metadata");
            if def.namespaced {
                let ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
                if !ns.is_empty() && ns != request_ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                meta.insert("namespace".into(), json!(request_ns));
            } else {
                meta.remove("namespace");
            }
            match old["metadata"].get("generation") {
                Some(g) => meta.insert("generation".into(), g.clone()),
                None => meta.remove("generation"),
            };
            // selfLink is no longer served: a written one is dropped.
            meta.remove("selfLink");
        }
        let mut new = scoped_replacement(def, &old, new, scope);
        if def.is_custom() && scope == Scope::Main && spec_changed(def, &old, &new) {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(0);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        {
            let meta = ensure_object(&mut new, "metadata");
            if meta
                .get("uid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                meta.insert("uid".into(), old["metadata"]["uid"].clone());
            }
            for field in ["creationTimestamp", "deletionTimestamp"] {
                if let Some(v) = old["metadata"].get(field) {
                    meta.insert(field.into(), v.clone());
                }
            }
            if let Some(v) = old["metadata"].get("deletionGracePeriodSeconds") {
                if meta
                    .get("deletionGracePeriodSeconds")
                    .is_none_or(Value::is_null)
                {
                    meta.insert("deletionGracePeriodSeconds".into(), v.clone());
                }
            }
        }
        if let Some(kind) = def.builtin {
            new = builtin::encode(kind, &new, Encoding::Json);
        }
        normalize_metadata(def, &mut new);
        let (causes, ratcheted) = validate_update(def, &old, &new, scope)?;
        if !causes.is_empty() {
            return Err(ApiError::invalid_in(
                def.error_group(),
                &def.kind,
                &target.name,
                &causes,
            ));
        }
        warnings.extend(ratcheted);
        if def.is_custom() {
            warnings.extend(finalizer_warnings(&new, Some(&old)));
        }
        if same_content(&old, &new) {
            return Ok(WriteOutcome {
                object: old,
                created: false,
                warnings,
            });
        }
        ensure_object(&mut new, "metadata").remove("resourceVersion");
        if params.dry_run {
            new["metadata"]["resourceVersion"] = json!(current);
            return Ok(WriteOutcome {
                object: new,
                created: false,
                warnings,
            });
        }
        let finished = new["metadata"].get("deletionTimestamp").is_some()
            && new["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty())
            && !is_namespace(def);
        let object = if finished {
            self.remove(target, old, new)
        } else {
            self.commit(target, Some(old), Some(new))
        };
        Ok(WriteOutcome {
            object,
            created: false,
            warnings,
        })
    }

    /// PATCH with a JSON merge patch, a JSON patch, or (built-in kinds) a strategic merge patch,
    /// applied to the stored object as JSON; the result is decoded, its name checked against the
    /// URL (400), and updated as a PUT would be.
    pub fn patch(
        &mut self,
        def: &ResourceDef,
        target: &Target,
        patch_type: PatchType,
        body: &[u8],
        scope: Scope,
        params: &WriteParams,
    ) -> Result<WriteOutcome, ApiError> {
        let old = self
            .get_as(def, target)
            .ok_or_else(|| ApiError::not_found(def, &target.name))?;
        let mut patched = old.clone();
        match patch_type {
            PatchType::Merge | PatchType::Strategic => {
                let patch: Value = serde_json::from_slice(body).map_err(|e| {
                    ApiError::bad_request(format!(
                        "error decoding patch: {}",
                        go_json_error(body, &e)
                    ))
                })?;
                if !patch.is_object() {
                    return Err(ApiError::bad_request(format!(
                        "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                        go_json_type(&patch)
                    )));
                }
                if patch_type == PatchType::Merge {
                    jsonpatch::merge_patch(&mut patched, &patch);
                } else {
                    let shape = def.builtin.map(|k| k.shape());
                    strategic::apply(&mut patched, &patch, shape)?;
                }
            }
            PatchType::Json => {
                // jsonpatch.DecodePatch only needs a list of objects (else 400); an operation
                // it cannot apply (unknown op, missing path, failed test) is a 422.
                let parsed: Value = serde_json::from_slice(body).map_err(|e| {
                    ApiError::bad_request(format!(
                        "error decoding patch: {}",
                        go_json_error(body, &e)
                    ))
                })?;
                let not_operations = || {
                    ApiError::bad_request(format!(
                        "error decoding patch: json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
                        go_json_type(&parsed)
                    ))
                };
                let operations: Vec<Map<String, Value>> = match &parsed {
                    Value::Array(items) => items
                        .iter()
                        .map(|op| op.as_object().cloned().ok_or_else(not_operations))
                        .collect::<Result<_, _>>()?,
                    _ => return Err(not_operations()),
                };
                jsonpatch::apply(&mut patched, &operations).map_err(|_| ApiError::generic(422))?;
            }
        }
        let printed = match patch_type {
            // The strategic patcher reports the patch as Go prints the decoded map.
            PatchType::Strategic => serde_json::from_slice::<Value>(body)
                .map(|p| go_value(&p))
                .unwrap_or_default(),
            _ => patched.to_string(),
        };
        if def.is_custom() {
            check_patched_version(def, &patched).map_err(|mut err| {
                // Decoded at another version than the URL's, the object has no schema:
                // every field but the type and metadata is unknown (warned even though the
                // request fails).
                if params.field_validation == FieldValidation::Warn {
                    if let Value::Object(map) = &patched {
                        err.warnings = map
                            .keys()
                            .filter(|k| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                            .map(|k| format!("unknown field \"{k}\""))
                            .collect();
                    }
                }
                err
            })?;
        }
        let (object, warnings) =
            decode(def, patched, params).map_err(|e| undecodable_patch(e, printed))?;
        check_name(target, &object)?;
        let new = manage_update(def, Some(&old), object, &params.manager(), scope);
        self.update_stages(def, target, old, new, scope, params, warnings)
    }

    /// PATCH with `application/apply-patch+yaml`: server-side apply; creates a missing object
    /// (201), else updates it. Conflicts with other managers are a 409 unless forced.
    pub fn apply(
        &mut self,
        def: &ResourceDef,
        target: &Target,
        body: &[u8],
        scope: Scope,
        params: &WriteParams,
    ) -> Result<WriteOutcome, ApiError> {
        let manager = params
            .field_manager
            .clone()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                ApiError::invalid_in(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    &[
                        FieldError::required("fieldManager", "is required for apply patch")
                            .to_cause(),
                    ],
                )
            })?;
        let config: Value = serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        if !config.is_object() {
            return Err(ApiError::bad_request(format!(
                "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_json_type(&config)
            )));
        }
        if def.is_custom() && config["kind"].as_str().unwrap_or_default().is_empty() {
            // The apply configuration's type is taken from the body.
            return Err(ApiError::bad_request(format!(
                "invalid object type: {}, Kind=",
                def.api_version()
            )));
        }
        let config = check_body(def, config)?;
        if config["metadata"]
            .get("managedFields")
            .is_some_and(|m| !m.is_null())
        {
            return Err(ApiError::bad_request("metadata.managedFields must be nil"));
        }
        let typed = apply::typed_errors(def, &config);
        if !typed.is_empty() {
            return Err(untyped_apply(
                def,
                target.namespace.as_deref(),
                &target.name,
                &typed,
            ));
        }
        let sent = config.clone();
        let (mut config, unknown) = decode_fields(def, config)?;
        if def.is_custom() {
            // The apply configuration is typed, not decoded: its nulls are not pruned, and
            // reach validation with the merged object.
            restore_nulls(&mut config, &sent);
        }
        if !unknown.is_empty() {
            let errors: Vec<String> = unknown
                .iter()
                .map(|path| format!(".{path}: field not declared in schema"))
                .collect();
            return Err(untyped_apply(
                def,
                target.namespace.as_deref(),
                &target.name,
                &errors,
            ));
        }
        match config["metadata"]["name"].as_str() {
            Some(name) if name == target.name => {}
            Some(name) => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({name}) does not match the name on the URL ({})",
                    target.name
                )))
            }
            None => config["metadata"]["name"] = json!(target.name),
        }
        ensure_namespace_matches(def, target.namespace.as_deref(), &mut config)?;
        let old = self.get_as(def, target);
        if scope == Scope::Status && old.is_none() {
            return Err(ApiError::not_found(def, &target.name));
        }
        if let Some(old) = &old {
            check_preconditions(
                def,
                &target.name,
                old,
                &Preconditions {
                    uid: config["metadata"]["uid"].as_str().map(str::to_string),
                    resource_version: config["metadata"]["resourceVersion"]
                        .as_str()
                        .map(str::to_string),
                    ..Preconditions::default()
                },
            )?;
        }
        let live = old.as_ref().map(|o| fm_view(def, o));
        let merged =
            apply::server_side_apply(def, live.as_ref(), &config, &manager, params.force, scope)
                .map_err(|conflicts| apply::conflict_error(&conflicts))?;
        let mut merged = with_defaults(def, merged);
        match old {
            None => {
                wipe_system_fields(&mut merged);
                self.create_stages(def, target, merged, params, Vec::new())
            }
            Some(old) => {
                merged["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
                self.update_stages(def, target, old, merged, scope, params, Vec::new())
            }
        }
    }

    /// DELETE: `BeforeDelete`'s preconditions (409), then removal, or a `deletionTimestamp`
    /// while finalizers remain (Namespaces: phase `Terminating` until their `spec.finalizers`
    /// are done, which needs a controller this server does not run). Answers the object while
    /// it stays, else a `Success` Status (or the last object for kinds that return it).
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        target: &Target,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let old = self
            .get_as(def, target)
            .ok_or_else(|| ApiError::not_found(def, &target.name))?;
        if let Some(uid) = preconditions.uid.as_deref() {
            let actual = old["metadata"]["uid"].as_str().unwrap_or_default();
            if uid != actual {
                return Err(ApiError::conflict_in(
                    &def.group,
                    &def.kind,
                    &target.name,
                    &format!("the UID in the precondition ({uid}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"),
                ));
            }
        }
        if let Some(rv) = preconditions.resource_version.as_deref() {
            let actual = old["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            if rv != actual {
                return Err(ApiError::conflict_in(
                    &def.group,
                    &def.kind,
                    &target.name,
                    &format!("the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({actual}). The object might have been modified"),
                ));
            }
        }
        let mut finalizers: Vec<Value> = old["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let before = finalizers.clone();
        if preconditions.propagation_chosen {
            finalizers.retain(|f| f != "orphan" && f != "foregroundDeletion");
        }
        if let Some(added) = preconditions.propagation_finalizer.as_deref() {
            if !finalizers.iter().any(|f| f == added) {
                finalizers.push(json!(added));
            }
        }
        let has_finalizers = !finalizers.is_empty();
        if is_namespace(def) {
            if matches!(
                target.name.as_str(),
                "default" | "kube-system" | "kube-public"
            ) {
                return Err(ApiError::forbidden(
                    "",
                    "namespaces",
                    &target.name,
                    "this namespace may not be deleted",
                ));
            }
            if old["metadata"].get("deletionTimestamp").is_some() || dry_run {
                return Ok(old);
            }
            // The namespace storage's own delete marks it without a grace period.
            let mut marked = old.clone();
            marked["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            marked["status"]["phase"] = json!("Terminating");
            return Ok(self.commit(target, Some(old), Some(marked)));
        }
        if has_finalizers {
            let deleting = old["metadata"].get("deletionTimestamp").is_some();
            if deleting && finalizers != before && !dry_run {
                let mut updated = old.clone();
                updated["metadata"]["finalizers"] = Value::Array(finalizers);
                return Ok(self.commit(target, Some(old), Some(updated)));
            }
            if deleting || dry_run {
                return Ok(old);
            }
            let mut marked = old.clone();
            marked["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            marked["metadata"]["finalizers"] = Value::Array(finalizers);
            // markAsDeleting: an object with a generation gets a new one when it starts
            // being deleted.
            if let Some(generation) = old["metadata"]["generation"].as_i64().filter(|g| *g > 0) {
                marked["metadata"]["generation"] = json!(generation + 1);
            }
            return Ok(self.commit(target, Some(old), Some(marked)));
        }
        let last = if dry_run {
            old.clone()
        } else {
            self.commit(target, Some(old.clone()), None)
        };
        if def.builtin.is_some_and(|k| k.returns_deleted_object) {
            return Ok(last);
        }
        let mut details = json!({
            "name": target.name,
            "kind": def.plural,
            "uid": old["metadata"]["uid"],
        });
        if !def.group.is_empty() {
            details["group"] = json!(def.group);
        }
        Ok(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }))
    }

    /// DELETE on a collection: deletes every matching object.
    pub fn delete_collection(
        &mut self,
        def: &ResourceDef,
        id: ResourceId,
        namespace: Option<&str>,
        selectors: &Selectors,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let names: Vec<(String, String)> = self.objects[self.slots[id]]
            .iter()
            .filter(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .filter(|(_, obj)| selectors.matches(obj))
            .map(|(key, _)| key.clone())
            .collect();
        let mut deleted = Vec::new();
        for (ns, name) in names {
            let target = Target {
                id,
                namespace: (!ns.is_empty()).then_some(ns),
                name,
            };
            let before = self
                .get(id, target.namespace.as_deref(), &target.name)
                .cloned();
            self.delete(def, &target, &Preconditions::default(), dry_run)?;
            deleted.extend(before);
        }
        Ok(list_json(def, self.revision, deleted, None))
    }

    /// Stores `new` (or deletes when `None`) at a fresh revision, records the change and tells
    /// watchers. Returns the stored (or last) object.
    fn commit(&mut self, target: &Target, old: Option<Value>, new: Option<Value>) -> Value {
        match (new, old) {
            (Some(new), None) => self.record(target, None, ChangeKind::Added, new),
            (Some(new), Some(old)) => self.record(target, Some(old), ChangeKind::Modified, new),
            (None, Some(old)) => {
                let last = old.clone();
                self.record(target, Some(old), ChangeKind::Deleted, last)
            }
            (None, None) => Value::Null,
        }
    }

    /// Deletes the object whose last state (what watchers see and the writer gets) is `last`.
    fn remove(&mut self, target: &Target, old: Value, last: Value) -> Value {
        self.record(target, Some(old), ChangeKind::Deleted, last)
    }

    fn record(
        &mut self,
        target: &Target,
        old: Option<Value>,
        kind: ChangeKind,
        mut object: Value,
    ) -> Value {
        self.revision += 1;
        let revision = self.revision;
        let key = (
            target.namespace.clone().unwrap_or_default(),
            target.name.clone(),
        );
        ensure_object(&mut object, "metadata")
            .insert("resourceVersion".into(), json!(revision.to_string()));
        if kind == ChangeKind::Deleted {
            self.objects[self.slots[target.id]].remove(&key);
        } else {
            self.objects[self.slots[target.id]].insert(key.clone(), object.clone());
        }
        let change = Arc::new(Change {
            resource: self.slots[target.id],
            namespace: key.0,
            kind,
            object: object.clone(),
            previous: old,
            revision,
        });
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.oldest_resumable = dropped.revision;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.events.send(change);
        object
    }

    fn next_uid(&mut self) -> String {
        self.uid_counter += 1;
        let a = splitmix64(self.uid_seed.wrapping_add(self.uid_counter));
        let b = splitmix64(a ^ self.uid_counter);
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }
}

/// Patch content types other than server-side apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    Strategic,
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The second every server of this process reports as "now", when frozen (see
/// [`freeze_clock`]).
static FROZEN_SECOND: std::sync::OnceLock<i64> = std::sync::OnceLock::new();

/// Freezes the time every in-test API server of this process writes (creation, deletion and
/// managedFields times) at the current second, for good.
///
/// For the corpus replay (`tests/apiserver_corpus.rs`) only: managedFields entries of one
/// operation sort by their time to the second before their manager, so their order depends
/// on whether two writes fell in the same second. The recordings were made with each burst of
/// writes to one object inside one second, as on a fast server (the recorder starts a burst on
/// a fresh second); a replay on a loaded machine could cross a second and list the same
/// entries in another order. Nothing else in a recorded answer depends on the time (the times
/// themselves are normalized away).
pub fn freeze_clock() {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    FROZEN_SECOND.get_or_init(|| now);
}

/// RFC 3339 UTC time with second precision, as Kubernetes writes timestamps.
pub fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    let second = FROZEN_SECOND.get().copied().unwrap_or(now.as_second());
    k8s_openapi::jiff::Timestamp::from_second(second)
        .unwrap_or(now)
        .to_string()
}

pub fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request was in an unknown format: {e}"
        ))
    })
}

pub fn parse_revision(rv: &str) -> Result<u64, ApiError> {
    rv.parse::<u64>()
        .map_err(|_| {
            ApiError::bad_request(format!(
                "invalid resource version: resourceVersion: Invalid value: {}: strconv.ParseUint: parsing {}: invalid syntax",
                go_quote(rv),
                go_quote(rv)
            ))
        })
}

/// `APIObjectVersioner.ParseResourceVersion`: "" and "0" are unset; anything else must be a
/// number (the error is Go's `strconv.ParseUint` text).
fn parse_resource_version(rv: &str) -> Result<u64, String> {
    if rv.is_empty() {
        return Ok(0);
    }
    rv.parse::<u64>().map_err(|_| {
        let why = if rv.bytes().all(|b| b.is_ascii_digit()) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        format!("strconv.ParseUint: parsing {}: {why}", go_quote(rv))
    })
}

/// The metadata map of an object, created if missing or not an object.
pub fn ensure_object<'a>(value: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    if !value.is_object() {
        *value = json!({});
    }
    let Value::Object(map) = value else {
        unreachable!("value was just made an object")
    };
    let entry = map.entry(field.to_string()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    match entry {
        Value::Object(inner) => inner,
        _ => unreachable!("entry was just made an object"),
    }
}

fn remove_field(value: &mut Value, field: &str) {
    if let Value::Object(map) = value {
        map.remove(field);
    }
}

fn is_namespace(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.kind == "Namespace"
}

/// Checks the body is an object of this resource's apiVersion/kind (filling them in when
/// absent) and that `metadata` is an object.
fn check_body(def: &ResourceDef, mut body: Value) -> Result<Value, ApiError> {
    if def.is_custom() && !body.is_object() {
        // The unstructured decoder reads the type first; it quotes the body in hex.
        let text = body.to_string();
        let hex: String = text.bytes().map(|b| format!("{b:02x}")).collect();
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }} ({hex})",
            def.kind,
            go_json_type(&body)
        )));
    }
    let Value::Object(map) = &mut body else {
        return Err(ApiError::undecodable(
            def,
            "json: cannot unmarshal non-object into Go value of type struct",
        ));
    };
    let api_version = def.api_version();
    if def.is_custom() {
        check_custom_type(def, map)?;
    }
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), json!(api_version));
        }
        Some(v) if v == api_version => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )))
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), json!(def.kind));
        }
        Some(k) if k == def.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )))
        }
    }
    match map.get("metadata") {
        None | Some(Value::Null) => {
            map.insert("metadata".into(), json!({}));
        }
        Some(Value::Object(_)) => {}
        Some(other) => {
            return Err(ApiError::undecodable(
                def,
                &format!(
                "json: cannot unmarshal {} into Go struct field {}.metadata of type v1.ObjectMeta",
                json_kind(other),
                def.kind
            ),
            ))
        }
    }
    Ok(body)
}

/// The type of a custom resource's body: unlike a built-in kind's decoder, the unstructured
/// one needs `kind` (400, the body quoted); a `kind` other than the resource's is the custom
/// resource validator's 422.
fn check_custom_type(def: &ResourceDef, map: &Map<String, Value>) -> Result<(), ApiError> {
    let name = map
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            let body = Value::Object(map.clone()).to_string();
            let mut short: String = body.chars().take(30).collect();
            if short.len() < body.len() {
                short.push_str(" ...");
            }
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): Object 'Kind' is missing in '{body}' ({short})",
                def.kind
            )));
        }
        Some(kind) if kind != def.kind => {
            return Err(ApiError::invalid_in(
                &def.group,
                kind,
                name,
                &[FieldError::invalid(
                    "kind",
                    BadValue::Str(kind.to_string()),
                    format!("must be {}", def.kind),
                )
                .to_cause()],
            ))
        }
        Some(_) => {}
    }
    Ok(())
}

/// A patch of a custom resource that changes its `apiVersion`: the patched object is not
/// decoded against the URL's version, the custom resource validator refuses it (422).
fn check_patched_version(def: &ResourceDef, object: &Value) -> Result<(), ApiError> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api_version = def.api_version();
    match object.get("apiVersion").and_then(Value::as_str) {
        Some(v) if !v.is_empty() && v != api_version => Err(ApiError::invalid_in(
            &def.group,
            &def.kind,
            name,
            &[FieldError::invalid(
                "apiVersion",
                BadValue::Str(v.to_string()),
                format!("must be {api_version}"),
            )
            .to_cause()],
        )),
        _ => Ok(()),
    }
}

/// The type `encoding/json` names in an unmarshal error.
fn go_json_type(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    }
}

/// `encoding/json`'s text for a body that is no JSON (an empty one: `unexpected end of JSON
/// input`; else the parser's own words).
fn go_json_error(body: &[u8], error: &serde_json::Error) -> String {
    if body.iter().all(u8::is_ascii_whitespace) {
        "unexpected end of JSON input".into()
    } else {
        error.to_string()
    }
}

/// A patched object that does not decode (a type error, a strict-decoding error) is the
/// patcher's 422 on the field `patch`, its value the patched object (or the strategic patch).
fn undecodable_patch(err: ApiError, printed: String) -> ApiError {
    if err.code != 400 {
        return err;
    }
    let why = err
        .message
        .split_once(": ")
        .filter(|(head, _)| head.contains(" cannot be handled as a "))
        .map_or(err.message.as_str(), |(_, why)| why);
    ApiError::invalid_in(
        "",
        "",
        "",
        &[FieldError::invalid("patch", BadValue::Str(printed), why.to_string()).to_cause()],
    )
}

/// Go's `%v` of a decoded JSON value (`map[k:v ...]` with sorted keys, `[a b]`).
fn go_value(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_value(&map[k])))
                .collect();
            format!("map[{}]", items.join(" "))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_value).collect::<Vec<_>>().join(" ")
        ),
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        other => other.to_string(),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Decodes a request body as kube-apiserver's decoder for the resource does: apiVersion and
/// kind checked; a custom resource pruned by its schema (unknown fields), its metadata
/// coerced as `ObjectMeta` (malformed fields dropped) and defaulted; a built-in kind decoded as
/// its Go type (type errors are 400) and defaulted. Unknown fields are warnings, or a 400 with
/// `fieldValidation=Strict`. Returns the object as it will be stored, and the warnings.
fn decode(
    def: &ResourceDef,
    body: Value,
    params: &WriteParams,
) -> Result<(Value, Vec<String>), ApiError> {
    let (object, warnings) = decode_sparse(def, body, params)?;
    Ok((with_defaults(def, object), warnings))
}

/// Defaults (`default:` of a CRD schema, `SetDefaults_*` of a built-in kind) and, for built-in
/// kinds, the printed form of the typed object.
fn with_defaults(def: &ResourceDef, mut object: Value) -> Value {
    if def.is_custom() {
        schema::apply_defaults(def, &mut object);
    } else if let Some(kind) = def.builtin {
        kind.apply_defaults(&mut object);
        object = builtin::encode(kind, &object, Encoding::Json);
    }
    object
}

/// [`decode`] without defaults: only what the request sets (an apply configuration).
fn decode_sparse(
    def: &ResourceDef,
    body: Value,
    params: &WriteParams,
) -> Result<(Value, Vec<String>), ApiError> {
    let (object, unknown) = decode_fields(def, body)?;
    let mut warnings = Vec::new();
    if !unknown.is_empty() {
        let texts: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        match params.field_validation {
            FieldValidation::Ignore => {}
            FieldValidation::Warn => warnings.extend(texts),
            FieldValidation::Strict => {
                return Err(ApiError::undecodable(
                    def,
                    &format!("strict decoding error: {}", texts.join(", ")),
                ))
            }
        }
    }
    Ok((object, warnings))
}

/// The object as its kind decodes it, and the paths of the fields it does not know (sorted).
fn decode_fields(def: &ResourceDef, body: Value) -> Result<(Value, Vec<String>), ApiError> {
    let mut object = check_body(def, body)?;
    let mut unknown = Vec::new();
    if def.is_custom() {
        // The schema coercer reads ObjectMeta first, then prunes: metadata's unknown fields
        // come first.
        let mut in_metadata = coerce_metadata(def, &mut object)?;
        in_metadata.sort();
        let mut pruned = schema::prune_object(def, &mut object);
        pruned.sort();
        unknown.extend(in_metadata);
        unknown.extend(pruned);
    } else if let Some(kind) = def.builtin {
        let (decoded, fields) =
            builtin::decode(kind, &object).map_err(|e| ApiError::undecodable(def, &e.0))?;
        unknown.extend(fields);
        object = decoded;
        unknown.sort();
    }
    Ok((object, unknown))
}

/// Puts back the `null` members of `sent` that decoding dropped from `decoded`, where the
/// object holding them survived.
fn restore_nulls(decoded: &mut Value, sent: &Value) {
    let (Value::Object(decoded), Value::Object(sent)) = (decoded, sent) else {
        return;
    };
    for (key, value) in sent {
        match (value, decoded.get_mut(key)) {
            (Value::Null, None) if key != "metadata" => {
                decoded.insert(key.clone(), Value::Null);
            }
            (Value::Object(_), Some(child)) => restore_nulls(child, value),
            _ => {}
        }
    }
}

/// An apply configuration structured-merge-diff cannot type (fields its kind does not
/// declare, whatever `fieldValidation` says; values of another type; list-map items without
/// their keys or with the same key): kube-apiserver answers with that plain error (500, no
/// reason): `failed to create typed patch object (ns/name; group/version, Kind=K): .spec.x:
/// field not declared in schema`.
fn untyped_apply(
    def: &ResourceDef,
    namespace: Option<&str>,
    name: &str,
    errors: &[String],
) -> ApiError {
    let version = if def.group.is_empty() {
        format!("/{}", def.version)
    } else {
        format!("{}/{}", def.group, def.version)
    };
    let detail = match errors {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    ApiError::plain(format!(
        "failed to create typed patch object ({}/{name}; {version}, Kind={}): {detail}",
        namespace.unwrap_or_default(),
        def.kind
    ))
}

/// The metadata of a custom resource as `ObjectMeta` decodes it (`GetObjectMetaWithOptions` with
/// malformed fields dropped) and prints it again; returns unknown metadata fields.
fn coerce_metadata(def: &ResourceDef, object: &mut Value) -> Result<Vec<String>, ApiError> {
    let shape = builtin::object_meta_shape();
    let meta = object["metadata"].clone();
    let Value::Object(fields) = &meta else {
        return Ok(Vec::new());
    };
    let mut kept = Map::new();
    let mut unknown = Vec::new();
    for (field, value) in fields {
        let single = json!({ field.clone(): value.clone() });
        // A request's metadata must decode as ObjectMeta (only objects read back from
        // storage have malformed fields dropped).
        let (decoded, extra) = builtin::decode_as(&shape, &single, "metadata").map_err(|_| {
            // A map or list of strings with another value inside names the string it wanted.
            let inner = matches!(value, Value::Object(_) | Value::Array(_));
            let go_type = match &shape["properties"][field]["type"] {
                Value::String(t) if t == "object" && !inner => "map[string]string",
                Value::String(t) if t == "array" && !inner => "[]string",
                Value::String(t) if t == "integer" => "int64",
                _ => "string",
            };
            ApiError::undecodable(
                def,
                &format!(
                    "json: cannot unmarshal {} into Go struct field ObjectMeta.{field} of type {go_type}",
                    first_mismatch(value)
                ),
            )
        })?;
        unknown.extend(extra);
        if let Some(v) = decoded.get(field) {
            kept.insert(field.clone(), v.clone());
        }
    }
    object["metadata"] = builtin::encode_as(&shape, &Value::Object(kept), Encoding::FieldManager);
    Ok(unknown)
}

/// The JSON type `encoding/json` names in a type error: a map or list's first value that is
/// no string, else the value's own type.
fn first_mismatch(value: &Value) -> &'static str {
    let inner = match value {
        Value::Object(map) => map.values().find(|v| !v.is_string()),
        Value::Array(items) => items.iter().find(|v| !v.is_string()),
        _ => None,
    };
    json_kind(inner.unwrap_or(value))
}

/// What the field manager sees of an object (the typed object as the unstructured converter
/// prints it for built-in kinds; custom resources as they are).
fn fm_view(def: &ResourceDef, object: &Value) -> Value {
    match def.builtin {
        Some(kind) => builtin::encode(kind, object, Encoding::FieldManager),
        None => object.clone(),
    }
}

/// Field management of a non-apply write by `manager` (operation `Update`): the request's own
/// managedFields as Kubernetes' `decodeLiveOrNew` takes them, then what the write changed moves
/// to the manager. Works on the field manager's views: the live object (a create: the zero
/// object of the kind), and the new one without what the strategy resets (status on the main
/// resource of a kind with a status subresource; all but status on `/status`). Returns the
/// stored form with the new managedFields.
fn manage_update(
    def: &ResourceDef,
    old: Option<&Value>,
    new: Value,
    manager: &str,
    scope: Scope,
) -> Value {
    let base = apply::base_entries_from_request(&new, old, scope);
    let old_view = match (old, def.builtin) {
        (Some(old), _) => Some(fm_view(def, old)),
        (None, Some(kind)) => Some(builtin::zero(kind)),
        (None, None) => None,
    };
    let mut view = fm_view(def, &new);
    match &old_view {
        Some(live) => view = reset_fields(def, live, view, scope),
        None if scope == Scope::Main && def.status_subresource => remove_field(&mut view, "status"),
        None => {}
    }
    let meta = ensure_object(&mut view, "metadata");
    meta.remove("managedFields");
    if !base.is_null() {
        meta.insert("managedFields".into(), base);
    }
    apply::record_update(def, old_view.as_ref(), &mut view, manager, scope);
    let mut stored = new;
    match view["metadata"].get("managedFields") {
        Some(entries) => {
            ensure_object(&mut stored, "metadata").insert("managedFields".into(), entries.clone())
        }
        None => ensure_object(&mut stored, "metadata").remove("managedFields"),
    };
    stored
}

/// A custom resource's metadata as the API server stores it: printed through `ObjectMeta`
/// (empty labels, annotations and finalizers left out).
fn normalize_metadata(def: &ResourceDef, object: &mut Value) {
    if def.is_custom() {
        let shape = builtin::object_meta_shape();
        let meta = builtin::encode_as(&shape, &object["metadata"], Encoding::FieldManager);
        object["metadata"] = meta;
    }
}

/// `WipeObjectMetaSystemFields`: a create never takes these from the request.
fn wipe_system_fields(object: &mut Value) {
    let meta = ensure_object(object, "metadata");
    for field in [
        "creationTimestamp",
        "uid",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(field);
    }
}

/// `EnsureObjectNamespaceMatchesRequestNamespace`: a namespaced object takes the URL's namespace
/// (a different one is a 400); a cluster-scoped one has none.
fn ensure_namespace_matches(
    def: &ResourceDef,
    namespace: Option<&str>,
    object: &mut Value,
) -> Result<(), ApiError> {
    let meta = ensure_object(object, "metadata");
    let requested = if def.namespaced {
        namespace.unwrap_or_default()
    } else {
        ""
    };
    let sent = meta
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if sent == requested {
    } else if sent.is_empty() {
        meta.insert("namespace".into(), json!(requested));
    } else if requested.is_empty() {
        meta.remove("namespace");
    } else {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if requested.is_empty() {
        meta.remove("namespace");
    }
    Ok(())
}

/// The body's namespace (`EnsureObjectNamespaceMatchesRequestNamespace`, first), then
/// `checkName` of update and patch: the object's name against the URL.
fn check_name(target: &Target, object: &Value) -> Result<(), ApiError> {
    if let Some(requested) = target.namespace.as_deref().filter(|n| !n.is_empty()) {
        let sent = object["metadata"]["namespace"].as_str().unwrap_or_default();
        if !sent.is_empty() && sent != requested {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({} based on URL) was undeterminable: name must be provided",
            target.name
        )));
    }
    if name != target.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            target.name
        )));
    }
    Ok(())
}

/// `PrepareForCreate`: custom resources drop status (with a status subresource) and start at
/// generation 1; built-in kinds do their own.
fn prepare_create(def: &ResourceDef, object: &mut Value) {
    if def.is_custom() {
        if def.status_subresource {
            remove_field(object, "status");
        }
        ensure_object(object, "metadata").insert("generation".into(), json!(1));
    } else if let Some(kind) = def.builtin {
        kind.prepare_create(object);
        *object = builtin::encode(kind, object, Encoding::Json);
    }
}

/// The strategy's `Validate` on create: ObjectMeta, schema and CEL rules for custom resources
/// (the rules skipped when an OpenAPI error blocks them), the kind's own rules for built-ins.
/// Returns the causes and the warnings of ratcheted rules.
fn validate_create(
    def: &ResourceDef,
    object: &Value,
) -> Result<(Vec<Cause>, Vec<String>), ApiError> {
    if def.is_custom() {
        let meta_errors =
            meta::validate_create(&object["metadata"], def.namespaced, NameRule::DnsSubdomain);
        return schema::validate_custom(def, None, object, meta_errors, false);
    }
    let errors = match def.builtin {
        Some(kind) => {
            let mut errors = kind.validate(object);
            errors.extend(kube_finalizers(object));
            errors
        }
        None => meta::validate_create(&object["metadata"], def.namespaced, NameRule::DnsSubdomain),
    };
    Ok((causes_of(&errors), Vec::new()))
}

/// `BeforeUpdate`'s validation: the generic ObjectMeta checks (`validateCommonFields`), then the
/// strategy's `ValidateUpdate`.
fn validate_update(
    def: &ResourceDef,
    old: &Value,
    new: &Value,
    scope: Scope,
) -> Result<(Vec<Cause>, Vec<String>), ApiError> {
    let mut errors = meta::validate_create(&new["metadata"], def.namespaced, NameRule::PathSegment);
    errors.extend(meta::validate_update(&new["metadata"], &old["metadata"]));
    let mut causes = causes_of(&errors);
    let mut warnings = Vec::new();
    if def.is_custom() {
        let meta_errors = meta::validate_update(&new["metadata"], &old["metadata"]);
        let (more, ratcheted) =
            schema::validate_custom(def, Some(old), new, meta_errors, scope == Scope::Status)?;
        causes.extend(more);
        warnings = ratcheted;
    } else if let Some(kind) = def.builtin {
        causes.extend(causes_of(&kind.validate_update(new, old)));
        causes.extend(causes_of(&kube_finalizers(new)));
    }
    Ok((causes, warnings))
}

/// The core ObjectMeta validation of a built-in kind adds `validateKubeFinalizerName` to
/// apimachinery's checks of `metadata.finalizers`.
fn kube_finalizers(object: &Value) -> Vec<FieldError> {
    object["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, f)| {
            builtin::kube_finalizer_name(
                f.as_str().unwrap_or_default(),
                &format!("metadata.finalizers[{i}]"),
            )
        })
        .collect()
}

/// Finalizers Kubernetes knows; others should be domain-qualified.
const STANDARD_FINALIZERS: &[&str] = &[
    "kubernetes",
    "orphan",
    "foregroundDeletion",
    "batch.kubernetes.io/job-tracking",
];

/// The custom resource strategy's warnings about finalizers a write adds.
fn finalizer_warnings(new: &Value, old: Option<&Value>) -> Vec<String> {
    let list = |o: &Value| -> Vec<String> {
        o["metadata"]["finalizers"]
            .as_array()
            .map(|f| {
                f.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let before: Vec<String> = old.map(list).unwrap_or_default();
    let mut added: Vec<String> = list(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    added.sort();
    added.dedup();
    let mut warnings = Vec::new();
    for finalizer in added {
        for msg in meta::label_key(&finalizer) {
            warnings.push(format!(
                "metadata.finalizers: {}: {msg}",
                go_quote(&finalizer)
            ));
        }
        if !finalizer.contains('/') && !STANDARD_FINALIZERS.contains(&finalizer.as_str()) {
            // A name with a dot looks like a domain already: it is asked for a path.
            let prefer = if finalizer.contains('.') {
                "prefer a domain-qualified finalizer name including a path (/)"
            } else {
                "prefer a domain-qualified finalizer name"
            };
            warnings.push(format!(
                "metadata.finalizers: {}: {prefer} to avoid accidental conflicts with other finalizer writers",
                go_quote(&finalizer)
            ));
        }
    }
    warnings
}

/// uid/resourceVersion preconditions: a set, non-empty value must equal the stored one.
fn check_preconditions(
    def: &ResourceDef,
    name: &str,
    current: &Value,
    pre: &Preconditions,
) -> Result<(), ApiError> {
    if let Some(uid) = pre.uid.as_deref().filter(|u| !u.is_empty()) {
        let actual = current["metadata"]["uid"].as_str().unwrap_or_default();
        if uid != actual {
            // The storage's precondition check: a StorageError naming the etcd key (custom
            // resources under their group, built-in kinds under the resource alone).
            let namespace = current["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default();
            let mut key = String::from("/registry/");
            if def.is_custom() {
                key.push_str(&format!("{}/", def.group));
            }
            key.push_str(&def.plural);
            if !namespace.is_empty() {
                key.push_str(&format!("/{namespace}"));
            }
            key.push_str(&format!("/{name}"));
            return Err(ApiError::conflict(
                def,
                name,
                &format!(
                    "StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = pre.resource_version.as_deref().filter(|r| !r.is_empty()) {
        if Some(rv) != current["metadata"]["resourceVersion"].as_str() {
            return Err(ApiError::stale(def, name));
        }
    }
    Ok(())
}

/// What a write to `scope` turns the stored object into: the main resource keeps the stored
/// `.status` when there is a status subresource; `/status` changes only `.status` of a custom
/// resource and everything but `spec` of a built-in one.
fn scoped_replacement(def: &ResourceDef, old: &Value, body: Value, scope: Scope) -> Value {
    let mut body = reset_fields(def, old, body, scope);
    if scope == Scope::Main && is_namespace(def) {
        // The namespace strategy keeps spec.finalizers (the finalize subresource owns them),
        // after field management saw them: they are not among its reset fields.
        if let Some(finalizers) = old["spec"].get("finalizers") {
            ensure_object(&mut body, "spec").insert("finalizers".into(), finalizers.clone());
        }
    }
    body
}

/// The fields a scope's strategy resets from the stored object (`GetResetFields`), which
/// field management does not count as changed by the writer.
fn reset_fields(def: &ResourceDef, old: &Value, mut body: Value, scope: Scope) -> Value {
    match scope {
        Scope::Main if def.status_subresource => {
            remove_field(&mut body, "status");
            if let (Value::Object(map), Some(status)) = (&mut body, old.get("status")) {
                map.insert("status".into(), status.clone());
            }
            body
        }
        Scope::Main => body,
        Scope::Finalize => {
            remove_field(&mut body, "status");
            if let (Value::Object(map), Some(status)) = (&mut body, old.get("status")) {
                map.insert("status".into(), status.clone());
            }
            body
        }
        // Built-in status strategies (nodeStatusStrategy, serviceStatusStrategy) reset only
        // `spec`: metadata changes sent to /status are kept.
        Scope::Status if !def.is_custom() => {
            remove_field(&mut body, "spec");
            if let (Value::Object(map), Some(spec)) = (&mut body, old.get("spec")) {
                map.insert("spec".into(), spec.clone());
            }
            body
        }
        Scope::Status => {
            // The custom resource status strategy copies everything but `status` from the
            // stored object, metadata included (managedFields excepted).
            let mut new = old.clone();
            remove_field(&mut new, "status");
            if let (Value::Object(map), Some(status)) = (&mut new, body.get("status")) {
                map.insert("status".into(), status.clone());
            }
            match body["metadata"].get("managedFields") {
                Some(managed) => ensure_object(&mut new, "metadata")
                    .insert("managedFields".into(), managed.clone()),
                None => ensure_object(&mut new, "metadata").remove("managedFields"),
            };
            new
        }
    }
}

/// Whether a custom resource's generation must move: anything but metadata (and status, with
/// a status subresource) changed.
fn spec_changed(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        remove_field(&mut v, "metadata");
        if def.status_subresource {
            remove_field(&mut v, "status");
        }
        v
    };
    strip(old) != strip(new)
}

/// Equal apart from resourceVersion and managedFields timestamps: such a write is a no-op.
fn same_content(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        let meta = ensure_object(&mut v, "metadata");
        meta.remove("resourceVersion");
        if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
            for entry in entries {
                remove_field(entry, "time");
            }
        }
        v
    };
    strip(old) == strip(new)
}

/// A stored object as resource `def` serves it: a built-in kind's objects stored through another
/// API of the same storage are converted to this one's form.
pub fn served_as(def: &ResourceDef, stored: &Value) -> Value {
    match def.builtin {
        Some(kind) => builtin::convert(kind, stored),
        None => stored.clone(),
    }
}

/// `ValidateListOptions`: `resourceVersionMatch` needs a resourceVersion, is one of its values,
/// and `Exact` needs a resourceVersion other than 0 (422 on `ListOptions`).
fn check_list_options(params: &ListParams) -> Result<(), ApiError> {
    let Some(wanted) = params.resource_version_match.as_deref() else {
        return Ok(());
    };
    let rv = params.resource_version.as_deref().unwrap_or_default();
    let error = if rv.is_empty() {
        Some(FieldError::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ))
    } else if !matches!(wanted, "Exact" | "NotOlderThan") {
        Some(FieldError::not_supported(
            "resourceVersionMatch",
            BadValue::Str(wanted.to_string()),
            &["Exact".into(), "NotOlderThan".into(), "".into()],
        ))
    } else if wanted == "Exact" && rv == "0" {
        Some(FieldError::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        ))
    } else {
        None
    };
    match error {
        Some(error) => Err(ApiError::invalid_in(
            "meta.k8s.io",
            "ListOptions",
            "",
            &[error.to_cause()],
        )),
        None => Ok(()),
    }
}

/// The object's key in storage, after the resource prefix (`<namespace>/<name>`, or the name).
fn storage_key((namespace, name): &ObjectKey) -> String {
    if namespace.is_empty() {
        name.clone()
    } else {
        format!("{namespace}/{name}")
    }
}

fn list_json(
    def: &ResourceDef,
    revision: u64,
    items: Vec<Value>,
    more: Option<(String, Option<usize>)>,
) -> Value {
    let mut metadata = json!({ "resourceVersion": revision.to_string() });
    match more {
        Some((token, remaining)) => {
            metadata["continue"] = json!(token);
            if let Some(remaining) = remaining {
                metadata["remainingItemCount"] = json!(remaining);
            }
        }
        // An unstructured list (custom resources) always carries `continue`.
        None if def.is_custom() => metadata["continue"] = json!(""),
        None => {}
    }
    // Items of a built-in kind's typed list are printed without their apiVersion and kind;
    // an unstructured list (custom resources) keeps them.
    let items: Vec<Value> = if def.is_custom() {
        items
    } else {
        items
            .into_iter()
            .map(|mut item| {
                if let Value::Object(map) = &mut item {
                    map.remove("apiVersion");
                    map.remove("kind");
                }
                item
            })
            .collect()
    };
    json!({
        "kind": format!("{}List", def.kind),
        "apiVersion": def.api_version(),
        "metadata": metadata,
        "items": items,
    })
}

fn encode_continue(revision: u64, after: &ObjectKey) -> String {
    let token = json!({ "v": "meta.k8s.io/v1", "rv": revision, "start": [after.0, after.1] });
    base64::engine::general_purpose::STANDARD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, ObjectKey), ApiError> {
    let invalid = || ApiError::bad_request("continue key is not valid");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let rv = value["rv"].as_u64().ok_or_else(invalid)?;
    let ns = value["start"][0].as_str().ok_or_else(invalid)?;
    let name = value["start"][1].as_str().ok_or_else(invalid)?;
    Ok((rv, (ns.to_string(), name.to_string())))
}
