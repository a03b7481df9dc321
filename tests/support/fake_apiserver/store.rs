//! The object store: every object of every resource, the global resourceVersion counter and the
//! bounded change history that watches replay from.
//!
//! Owns the semantics of each verb on stored objects (get, list with selectors and pagination,
//! create, replace, patch, delete, status subresource rules, preconditions, generation,
//! finalizers) and the publication of every change to watchers. All callers (HTTP handlers and
//! the test handle) go through these methods, so watches see test-made changes too. Knows
//! nothing about HTTP framing; schema checks live in `schema.rs`, field ownership in `apply.rs`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{json, Map, Value};
use tokio::sync::broadcast;

use super::apply;
use super::registry::{ResourceDef, ResourceId};
use super::schema;
use super::selectors::Selectors;
use super::status::{ApiError, Cause};

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
}

impl Store {
    pub fn new(resources: usize, history_limit: usize) -> Self {
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
        }
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
        self.objects[id].get(&(namespace.unwrap_or_default().to_string(), name.to_string()))
    }

    /// Objects of a resource (in one namespace, or all), sorted by namespace and name.
    pub fn objects<'a>(
        &'a self,
        id: ResourceId,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects[id]
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
            _ => {
                self.check_list_version(params)?;
                (self.revision, None)
            }
        };
        let mut matching = self.objects[id]
            .iter()
            .filter(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .filter(|(key, _)| start_after.as_ref().is_none_or(|after| *key > after))
            .filter(|(_, obj)| params.selectors.matches(obj));
        let mut items = Vec::new();
        let mut last_key = None;
        let limit = params.limit.filter(|l| *l > 0);
        for (key, obj) in matching.by_ref() {
            if limit.is_some_and(|l| items.len() >= l) {
                // One more exists: the page is full and the list continues after `last_key`.
                let remaining = 1 + matching.count();
                let token = encode_continue(list_revision, last_key.unwrap_or(key));
                return Ok(list_json(
                    def,
                    list_revision,
                    items,
                    Some((token, remaining)),
                ));
            }
            items.push(obj.clone());
            last_key = Some(key);
        }
        Ok(list_json(def, list_revision, items, None))
    }

    /// Kubernetes list semantics for `resourceVersion`/`resourceVersionMatch`: unset or "0"
    /// means "any", `NotOlderThan` is served from the current state, `Exact` only for the
    /// current revision (this store keeps no snapshots).
    fn check_list_version(&self, params: &ListParams) -> Result<(), ApiError> {
        let Some(rv) = params
            .resource_version
            .as_deref()
            .filter(|rv| !rv.is_empty())
        else {
            if params.resource_version_match.is_some() {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            return Ok(());
        };
        let wanted = parse_revision(rv)?;
        match params.resource_version_match.as_deref() {
            Some("Exact") if wanted != self.revision => Err(ApiError::expired(format!(
                "too old resource version: {wanted} ({})",
                self.revision
            ))),
            Some("Exact") | Some("NotOlderThan") | None | Some("") => {
                if wanted > self.revision {
                    Err(ApiError::new(
                        504,
                        "Timeout",
                        format!(
                            "Too large resource version: {wanted}, current: {}",
                            self.revision
                        ),
                    ))
                } else {
                    Ok(())
                }
            }
            Some(other) => Err(ApiError::bad_request(format!(
                "resourceVersionMatch: Unsupported value: {other:?}"
            ))),
        }
    }

    /// POST: creates an object. Status is dropped for resources with a status subresource
    /// (except Nodes, as in Kubernetes).
    pub fn create(
        &mut self,
        def: &ResourceDef,
        id: ResourceId,
        namespace: Option<&str>,
        body: Value,
        params: &WriteParams,
    ) -> Result<WriteOutcome, ApiError> {
        let mut object = check_body(def, body)?;
        let name = match object["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            Some(name) => name.to_string(),
            None => match object["metadata"]["generateName"]
                .as_str()
                .filter(|n| !n.is_empty())
            {
                Some(prefix) => {
                    let suffix = self.next_uid().replace('-', "");
                    format!("{prefix}{}", &suffix[..5])
                }
                None => {
                    return Err(ApiError::invalid(
                        def,
                        "",
                        &[Cause {
                            reason: "FieldValueRequired".into(),
                            message: "Required value: name or generateName is required".into(),
                            field: "metadata.name".into(),
                        }],
                    ))
                }
            },
        };
        object["metadata"]["name"] = json!(name);
        let target = Target {
            id,
            namespace: namespace.map(str::to_string),
            name,
        };
        set_namespace(def, &target, &mut object)?;
        // Nodes keep their status on create (the kubelet registers a Node with its addresses;
        // Kubernetes' node strategy does not clear status in PrepareForCreate).
        if def.status_subresource && !keeps_status_on_create(def) {
            remove_field(&mut object, "status");
        }
        if self.get(id, namespace, &target.name).is_some() {
            return Err(ApiError::already_exists(def, &target.name));
        }
        self.write(
            def,
            &target,
            None,
            object,
            params,
            WriteKind::Update(Scope::Main),
        )
    }

    /// PUT on the main resource or `/status`.
    pub fn replace(
        &mut self,
        def: &ResourceDef,
        target: &Target,
        body: Value,
        scope: Scope,
        params: &WriteParams,
    ) -> Result<WriteOutcome, ApiError> {
        let body = check_body(def, body)?;
        match body["metadata"]["name"].as_str() {
            Some(name) if name == target.name => {}
            Some(name) if !name.is_empty() => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({name}) does not match the name on the URL ({})",
                    target.name
                )))
            }
            _ => {}
        }
        let old = self
            .get(target.id, target.namespace.as_deref(), &target.name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, &target.name))?;
        check_preconditions(
            def,
            &target.name,
            &old,
            &Preconditions {
                uid: body["metadata"]["uid"].as_str().map(str::to_string),
                resource_version: body["metadata"]["resourceVersion"]
                    .as_str()
                    .map(str::to_string),
            },
        )?;
        let new = scoped_replacement(def, &old, body, scope);
        let mut new = new;
        set_namespace(def, target, &mut new)?;
        self.write(
            def,
            target,
            Some(old),
            new,
            params,
            WriteKind::Update(scope),
        )
    }

    /// PATCH with a JSON merge patch, JSON patch, or (for built-in kinds) strategic merge
    /// patch treated as a merge patch; server-side apply goes to [`Store::apply`].
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
            .get(target.id, target.namespace.as_deref(), &target.name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, &target.name))?;
        let mut patched = old.clone();
        match patch_type {
            PatchType::Merge => {
                let patch: Value = parse_json(body)?;
                if !patch.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                json_patch::merge(&mut patched, &patch);
            }
            PatchType::Json => {
                let patch: json_patch::Patch = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
                json_patch::patch(&mut patched, &patch).map_err(|e| {
                    ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?;
            }
        }
        // A resourceVersion the patch sets (or keeps) is a precondition, as in Kubernetes.
        let wanted_rv = patched["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string);
        if wanted_rv.as_deref() != old["metadata"]["resourceVersion"].as_str() {
            check_preconditions(
                def,
                &target.name,
                &old,
                &Preconditions {
                    uid: None,
                    resource_version: wanted_rv,
                },
            )?;
        }
        let mut body = check_body(def, patched)?;
        if body["metadata"]["name"].as_str() != Some(target.name.as_str()) {
            return Err(ApiError::bad_request(
                "a patch may not change metadata.name",
            ));
        }
        let uid_changed = body["metadata"]["uid"] != old["metadata"]["uid"];
        if uid_changed {
            return Err(ApiError::conflict(
                def,
                &target.name,
                "a patch may not change metadata.uid",
            ));
        }
        set_namespace(def, target, &mut body)?;
        let new = scoped_replacement(def, &old, body, scope);
        self.write(
            def,
            target,
            Some(old),
            new,
            params,
            WriteKind::Update(scope),
        )
    }

    /// PATCH with `application/apply-patch+yaml`: server-side apply.
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
                ApiError::new(
                    422,
                    "Invalid",
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                )
            })?;
        let config: Value = serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        let mut config = check_body(def, config)?;
        if config["metadata"]
            .get("managedFields")
            .is_some_and(|m| !m.is_null())
        {
            return Err(ApiError::bad_request("metadata.managedFields must be nil"));
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
        set_namespace(def, target, &mut config)?;
        let old = self
            .get(target.id, target.namespace.as_deref(), &target.name)
            .cloned();
        if scope == Scope::Status && old.is_none() {
            return Err(ApiError::not_found(def, &target.name));
        }
        if let Some(old) = &old {
            let wanted_rv = config["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string);
            check_preconditions(
                def,
                &target.name,
                old,
                &Preconditions {
                    uid: config["metadata"]["uid"].as_str().map(str::to_string),
                    resource_version: wanted_rv,
                },
            )?;
        }
        let mut warnings = Vec::new();
        let unknown = schema::prune_object(def, &mut config);
        reject_or_warn_unknown(params, &unknown, &mut warnings)?;
        let merged =
            apply::server_side_apply(def, old.as_ref(), &config, &manager, params.force, scope)
                .map_err(|conflicts| apply::conflict_error(def, &target.name, &conflicts))?;
        let mut outcome =
            self.write(def, target, old, merged, params, WriteKind::Applied(scope))?;
        outcome.warnings.splice(0..0, warnings);
        Ok(outcome)
    }

    /// DELETE: removes the object, or marks it with `deletionTimestamp` while finalizers
    /// remain. Returns the object's last state.
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        target: &Target,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let old = self
            .get(target.id, target.namespace.as_deref(), &target.name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, &target.name))?;
        check_preconditions(def, &target.name, &old, preconditions)?;
        let has_finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if dry_run {
            return Ok(old);
        }
        if has_finalizers {
            if old["metadata"].get("deletionTimestamp").is_some() {
                return Ok(old);
            }
            let mut marked = old.clone();
            marked["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            // markAsDeleting: an object with a generation gets a new one when it starts
            // being deleted.
            if let Some(generation) = old["metadata"]["generation"].as_i64().filter(|g| *g > 0) {
                marked["metadata"]["generation"] = json!(generation + 1);
            }
            return Ok(self.commit(target, Some(old), Some(marked)));
        }
        Ok(self.commit(target, Some(old), None))
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
        let names: Vec<(String, String)> = self.objects[id]
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
            deleted.push(self.delete(def, &target, &Preconditions::default(), dry_run)?);
        }
        Ok(list_json(def, self.revision, deleted, None))
    }

    /// The shared tail of every write: schema pruning and validation, server-owned metadata,
    /// managedFields, generation, no-op detection, finalizer completion, commit.
    fn write(
        &mut self,
        def: &ResourceDef,
        target: &Target,
        old: Option<Value>,
        mut new: Value,
        params: &WriteParams,
        kind: WriteKind,
    ) -> Result<WriteOutcome, ApiError> {
        let mut warnings = Vec::new();
        let unknown = schema::prune_object(def, &mut new);
        reject_or_warn_unknown(params, &unknown, &mut warnings)?;
        schema::apply_defaults(def, &mut new);

        // managedFields an apply computed are kept; for other writes see
        // `apply::base_entries_from_request` (Kubernetes' decodeLiveOrNew).
        let managed = match kind {
            WriteKind::Applied(_) => new["metadata"].get("managedFields").cloned(),
            WriteKind::Update(scope) => {
                Some(apply::base_entries_from_request(&new, old.as_ref(), scope))
            }
        };
        // Server-owned metadata comes from the stored object, never from the request.
        let meta = ensure_object(&mut new, "metadata");
        for field in [
            "creationTimestamp",
            "uid",
            "resourceVersion",
            "generation",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(field);
        }
        match &old {
            Some(old) => {
                for field in [
                    "creationTimestamp",
                    "uid",
                    "generation",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generateName",
                ] {
                    if let Some(v) = old["metadata"].get(field) {
                        meta.insert(field.into(), v.clone());
                    }
                }
            }
            None => {
                meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
                let uid = self.next_uid();
                ensure_object(&mut new, "metadata").insert("uid".into(), json!(uid));
            }
        }
        if def.is_custom() {
            let generation = match &old {
                None => 1,
                Some(old) => {
                    let previous = old["metadata"]["generation"].as_i64().unwrap_or(1);
                    if spec_changed(def, old, &new) {
                        previous + 1
                    } else {
                        previous
                    }
                }
            };
            ensure_object(&mut new, "metadata").insert("generation".into(), json!(generation));
        }
        if let Some(managed) = managed.filter(|m| !m.is_null()) {
            ensure_object(&mut new, "metadata").insert("managedFields".into(), managed);
        }
        if let WriteKind::Update(scope) = kind {
            apply::record_update(def, old.as_ref(), &mut new, &params.manager(), scope)
        }

        schema::validate_write(def, old.as_ref(), &new)?;

        if let Some(old) = &old {
            if same_content(old, &new) {
                return Ok(WriteOutcome {
                    object: old.clone(),
                    created: false,
                    warnings,
                });
            }
        }
        let created = old.is_none();
        if params.dry_run {
            return Ok(WriteOutcome {
                object: new,
                created,
                warnings,
            });
        }
        let finished = new["metadata"].get("deletionTimestamp").is_some()
            && new["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty());
        let object = if finished {
            self.commit(target, old, None)
        } else {
            self.commit(target, old, Some(new))
        };
        Ok(WriteOutcome {
            object,
            created,
            warnings,
        })
    }

    /// Stores `new` (or deletes when `None`) at a fresh revision, records the change and tells
    /// watchers. Returns the stored (or last) object.
    fn commit(&mut self, target: &Target, old: Option<Value>, new: Option<Value>) -> Value {
        self.revision += 1;
        let revision = self.revision;
        let key = (
            target.namespace.clone().unwrap_or_default(),
            target.name.clone(),
        );
        let (kind, mut object) = match (new, &old) {
            (Some(new), None) => (ChangeKind::Added, new),
            (Some(new), Some(_)) => (ChangeKind::Modified, new),
            (None, Some(old)) => (ChangeKind::Deleted, old.clone()),
            (None, None) => return Value::Null,
        };
        ensure_object(&mut object, "metadata")
            .insert("resourceVersion".into(), json!(revision.to_string()));
        if kind == ChangeKind::Deleted {
            self.objects[target.id].remove(&key);
        } else {
            self.objects[target.id].insert(key.clone(), object.clone());
        }
        let change = Arc::new(Change {
            resource: target.id,
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

/// Kind of write, for managedFields bookkeeping.
#[derive(Clone, Copy, Debug)]
enum WriteKind {
    /// create/update/patch: the manager takes the fields it changed (operation `Update`).
    Update(Scope),
    /// server-side apply: managedFields were computed by `apply.rs`.
    Applied(Scope),
}

/// Patch content types other than server-side apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// RFC 3339 UTC time with second precision, as Kubernetes writes timestamps.
pub fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::jiff::Timestamp::from_second(now.as_second())
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
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))
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

/// Checks the body is an object of this resource's apiVersion/kind (filling them in when
/// absent) and that `metadata` is an object.
fn check_body(def: &ResourceDef, mut body: Value) -> Result<Value, ApiError> {
    let Value::Object(map) = &mut body else {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    };
    let api_version = def.api_version();
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
        None => {
            map.insert("metadata".into(), json!({}));
        }
        Some(Value::Object(_)) => {}
        Some(_) => return Err(ApiError::bad_request("metadata must be an object")),
    }
    Ok(body)
}

/// Sets (namespaced) or clears (cluster-scoped) `metadata.namespace`, rejecting a body whose
/// namespace disagrees with the URL.
fn set_namespace(def: &ResourceDef, target: &Target, object: &mut Value) -> Result<(), ApiError> {
    let meta = ensure_object(object, "metadata");
    if !def.namespaced {
        meta.remove("namespace");
        return Ok(());
    }
    let url_ns = target.namespace.clone().unwrap_or_default();
    match meta.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() && ns != url_ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            meta.insert("namespace".into(), json!(url_ns));
            Ok(())
        }
    }
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
            return Err(ApiError::conflict(
                def,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
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
fn scoped_replacement(def: &ResourceDef, old: &Value, mut body: Value, scope: Scope) -> Value {
    match scope {
        Scope::Main if def.status_subresource => {
            remove_field(&mut body, "status");
            if let (Value::Object(map), Some(status)) = (&mut body, old.get("status")) {
                map.insert("status".into(), status.clone());
            }
            body
        }
        Scope::Main => body,
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
            // stored object, metadata included.
            let mut new = old.clone();
            remove_field(&mut new, "status");
            if let (Value::Object(map), Some(status)) = (&mut new, body.get("status")) {
                map.insert("status".into(), status.clone());
            }
            new
        }
    }
}

/// Nodes take `status` from a create (nodeStrategy.PrepareForCreate keeps it); other kinds with
/// a status subresource drop it (custom resources, Services).
fn keeps_status_on_create(def: &ResourceDef) -> bool {
    !def.is_custom() && def.group.is_empty() && def.kind == "Node"
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

fn reject_or_warn_unknown(
    params: &WriteParams,
    unknown: &[String],
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    if unknown.is_empty() {
        return Ok(());
    }
    match params.field_validation {
        FieldValidation::Ignore => Ok(()),
        FieldValidation::Warn => {
            warnings.extend(unknown.iter().map(|f| format!("unknown field \"{f}\"")));
            Ok(())
        }
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn list_json(
    def: &ResourceDef,
    revision: u64,
    items: Vec<Value>,
    more: Option<(String, usize)>,
) -> Value {
    let mut metadata = json!({ "resourceVersion": revision.to_string() });
    if let Some((token, remaining)) = more {
        metadata["continue"] = json!(token);
        metadata["remainingItemCount"] = json!(remaining);
    }
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
