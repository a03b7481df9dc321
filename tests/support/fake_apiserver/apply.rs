//! Field ownership: `metadata.managedFields` and server-side apply.
//!
//! Owns the field-set model (paths of `f:` fields, `k:` list-map keys, `v:` set values), its
//! FieldsV1 encoding, the bookkeeping of non-apply writes (operation `Update`: the writer takes
//! the fields it changed), and server-side apply: conflicts with other managers (409 unless
//! `force`, which moves ownership), removal of fields the same manager applied before and now
//! omits, and merging (maps recursively, `x-kubernetes-list-type: map` lists by their keys,
//! `set` lists by value, other lists atomic). Object metadata follows the built-in rules
//! (labels/annotations granular maps, finalizers a set, ownerReferences keyed by uid). Pure
//! functions over `serde_json::Value`; no store, no HTTP.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use super::registry::ResourceDef;
use super::status::{ApiError, Cause};
use super::store::{ensure_object, now_rfc3339, Scope};

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Element {
    /// A field of an object: `f:<name>`.
    Field(String),
    /// An item of a list-map, by its key fields as canonical JSON: `k:{"type":"Ready"}`.
    Key(String),
    /// An item of a set list, by value as JSON: `v:"foo"`.
    Value(String),
    /// An item of a list by position: `i:<n>` (only read from clients' FieldsV1).
    Index(usize),
}

pub type FieldPath = Vec<Element>;
pub type FieldSet = BTreeSet<FieldPath>;

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    manager: String,
    operation: String,
    subresource: Option<String>,
    api_version: String,
    time: String,
    fields: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }
}

/// A field another manager owns with a different value than an apply sets.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    pub manager: String,
    pub api_version: String,
    pub path: FieldPath,
}

/// How a list is merged, from the schema.
enum ListKind {
    Map(Vec<String>),
    Set,
    Atomic,
}

/// A position in a schema (`None`: no schema, everything granular maps and atomic lists).
#[derive(Clone, Copy)]
struct Shape<'a>(Option<&'a Value>);

impl<'a> Shape<'a> {
    fn field(self, name: &str) -> Shape<'a> {
        let Some(schema) = self.0 else {
            return Shape(None);
        };
        Shape(
            schema
                .get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object())),
        )
    }

    fn items(self) -> Shape<'a> {
        Shape(self.0.and_then(|s| s.get("items")))
    }

    fn list_kind(self) -> ListKind {
        let Some(schema) = self.0 else {
            return ListKind::Atomic;
        };
        match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => ListKind::Map(
                schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            Some("set") => ListKind::Set,
            _ => ListKind::Atomic,
        }
    }

    fn atomic_map(self) -> bool {
        self.0
            .and_then(|s| s.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            == Some("atomic")
    }
}

/// The built-in shape of the ObjectMeta fields that take part in field management.
fn metadata_shape() -> &'static Value {
    static SHAPE: OnceLock<Value> = OnceLock::new();
    SHAPE.get_or_init(|| {
        json!({
            "type": "object",
            "properties": {
                "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                "annotations": { "type": "object", "additionalProperties": { "type": "string" } },
                "finalizers": { "type": "array", "items": { "type": "string" }, "x-kubernetes-list-type": "set" },
                "ownerReferences": {
                    "type": "array",
                    "items": { "type": "object" },
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["uid"]
                }
            }
        })
    })
}

const MANAGED_METADATA: &[&str] = &["labels", "annotations", "finalizers", "ownerReferences"];

fn root_shape(def: &ResourceDef) -> Shape<'_> {
    Shape(def.schema.as_deref())
}

/// Whether a top-level field belongs to the part of the object `scope` writes.
fn in_scope(def: &ResourceDef, field: &str, scope: Scope) -> bool {
    match (scope, field) {
        (_, "apiVersion" | "kind" | "metadata") => false,
        (Scope::Status, "status") => true,
        (Scope::Status, _) => false,
        (Scope::Main, "status") => !def.status_subresource,
        (Scope::Main, _) => true,
    }
}

/// The fields an object sets, within `scope`.
fn owned_fields(def: &ResourceDef, object: &Value, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    let Value::Object(map) = object else {
        return out;
    };
    let mut prefix = Vec::new();
    if scope == Scope::Main {
        if let Some(Value::Object(meta)) = map.get("metadata") {
            let shape = Shape(Some(metadata_shape()));
            prefix.push(Element::Field("metadata".into()));
            for field in MANAGED_METADATA {
                if let Some(value) = meta.get(*field).filter(|v| !v.is_null()) {
                    prefix.push(Element::Field(field.to_string()));
                    collect(value, shape.field(field), &mut prefix, &mut out);
                    prefix.pop();
                }
            }
            prefix.pop();
        }
    }
    let shape = root_shape(def);
    for (field, value) in map {
        if in_scope(def, field, scope) && !value.is_null() {
            prefix.push(Element::Field(field.clone()));
            collect(value, shape.field(field), &mut prefix, &mut out);
            prefix.pop();
        }
    }
    out
}

fn collect(value: &Value, shape: Shape, prefix: &mut FieldPath, out: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() && !shape.atomic_map() => {
            for (field, child) in map {
                if child.is_null() {
                    continue;
                }
                prefix.push(Element::Field(field.clone()));
                collect(child, shape.field(field), prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match shape.list_kind() {
            ListKind::Map(keys) => {
                let item_shape = shape.items();
                if items.iter().any(|item| item_key(item, &keys).is_none()) {
                    // Items without their keys cannot be addressed: own the list whole.
                    out.insert(prefix.clone());
                    return;
                }
                for item in items {
                    let Some(key) = item_key(item, &keys) else {
                        continue;
                    };
                    prefix.push(Element::Key(key));
                    out.insert(prefix.clone());
                    collect(item, item_shape, prefix, out);
                    prefix.pop();
                }
            }
            ListKind::Set => {
                for item in items {
                    prefix.push(Element::Value(item.to_string()));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
            }
            ListKind::Atomic => {
                out.insert(prefix.clone());
            }
        },
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The canonical key of a list-map item: its key fields, sorted, as compact JSON.
fn item_key(item: &Value, keys: &[String]) -> Option<String> {
    if keys.is_empty() {
        return None;
    }
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    let mut key = Map::new();
    for k in sorted {
        key.insert(
            k.clone(),
            item.get(k.as_str()).filter(|v| !v.is_null())?.clone(),
        );
    }
    Some(Value::Object(key).to_string())
}

fn matches_key(item: &Value, key: &str) -> bool {
    match serde_json::from_str::<Map<String, Value>>(key) {
        Ok(fields) => fields.iter().all(|(k, v)| item.get(k) == Some(v)),
        Err(_) => false,
    }
}

/// Whether a set-list item is the one a `v:` element names (JSON text).
fn is_set_value(item: &Value, text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| *item == v)
}

/// The value at a path, if present.
fn get_at<'v>(value: &'v Value, path: &[Element]) -> Option<&'v Value> {
    let mut current = value;
    for element in path {
        current = match (element, current) {
            (Element::Field(name), Value::Object(map)) => map.get(name)?,
            (Element::Key(key), Value::Array(items)) => {
                items.iter().find(|i| matches_key(i, key))?
            }
            (Element::Value(text), Value::Array(items)) => {
                items.iter().find(|i| is_set_value(i, text))?
            }
            (Element::Index(i), Value::Array(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Removes the node at a path, if present.
fn remove_at(value: &mut Value, path: &[Element]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut parent = value;
    for element in parent_path {
        let next = match (element, parent) {
            (Element::Field(name), Value::Object(map)) => map.get_mut(name),
            (Element::Key(key), Value::Array(items)) => {
                items.iter_mut().find(|i| matches_key(i, key))
            }
            (Element::Value(text), Value::Array(items)) => {
                items.iter_mut().find(|i| is_set_value(i, text))
            }
            (Element::Index(i), Value::Array(items)) => items.get_mut(*i),
            _ => None,
        };
        match next {
            Some(n) => parent = n,
            None => return,
        }
    }
    match (last, parent) {
        (Element::Field(name), Value::Object(map)) => {
            map.shift_remove(name);
        }
        (Element::Key(key), Value::Array(items)) => items.retain(|i| !matches_key(i, key)),
        (Element::Value(text), Value::Array(items)) => items.retain(|i| !is_set_value(i, text)),
        (Element::Index(i), Value::Array(items)) if *i < items.len() => {
            items.remove(*i);
        }
        _ => {}
    }
}

/// `.spec.conditions[type="Ready"].status`, as apply conflicts print paths.
pub fn path_text(path: &[Element]) -> String {
    let mut text = String::new();
    for element in path {
        match element {
            Element::Field(name) => {
                text.push('.');
                text.push_str(name);
            }
            Element::Key(key) => {
                let fields: Vec<String> = serde_json::from_str::<Map<String, Value>>(key)
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                text.push_str(&format!("[{}]", fields.join(",")));
            }
            Element::Value(v) => text.push_str(&format!("[={v}]")),
            Element::Index(i) => text.push_str(&format!("[{i}]")),
        }
    }
    text
}

// --- FieldsV1 encoding ---------------------------------------------------------------------

#[derive(Default)]
struct Node {
    member: bool,
    children: BTreeMap<Element, Node>,
}

fn element_text(element: &Element) -> String {
    match element {
        Element::Field(name) => format!("f:{name}"),
        Element::Key(key) => format!("k:{key}"),
        Element::Value(v) => format!("v:{v}"),
        Element::Index(i) => format!("i:{i}"),
    }
}

fn parse_element(text: &str) -> Option<Element> {
    let (prefix, rest) = text.split_once(':')?;
    match prefix {
        "f" => Some(Element::Field(rest.to_string())),
        "k" => serde_json::from_str::<Map<String, Value>>(rest)
            .ok()
            .map(|m| {
                let mut sorted: Vec<(&String, &Value)> = m.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(b.0));
                let canonical: Map<String, Value> = sorted
                    .into_iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                Element::Key(Value::Object(canonical).to_string())
            }),
        "v" => serde_json::from_str::<Value>(rest)
            .ok()
            .map(|v| Element::Value(v.to_string())),
        "i" => rest.parse().ok().map(Element::Index),
        _ => None,
    }
}

/// FieldsV1 JSON of a field set: nested `f:`/`k:`/`v:` keys, `{}` leaves, `".": {}` for a
/// node that is owned itself and has owned children.
pub fn fields_v1(set: &FieldSet) -> Value {
    let mut root = Node::default();
    for path in set {
        let mut node = &mut root;
        for element in path {
            node = node.children.entry(element.clone()).or_default();
        }
        node.member = true;
    }
    node_json(&root)
}

fn node_json(node: &Node) -> Value {
    let mut map = Map::new();
    if node.member && !node.children.is_empty() {
        map.insert(".".into(), json!({}));
    }
    for (element, child) in &node.children {
        map.insert(element_text(element), node_json(child));
    }
    Value::Object(map)
}

/// The field set of a FieldsV1 value (unknown entries are skipped).
pub fn parse_fields_v1(value: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    let mut prefix = Vec::new();
    parse_node(value, &mut prefix, &mut set);
    set
}

fn parse_node(value: &Value, prefix: &mut FieldPath, set: &mut FieldSet) {
    let Value::Object(map) = value else { return };
    if map.is_empty() && !prefix.is_empty() {
        set.insert(prefix.clone());
        return;
    }
    for (key, child) in map {
        if key == "." {
            if !prefix.is_empty() {
                set.insert(prefix.clone());
            }
            continue;
        }
        if let Some(element) = parse_element(key) {
            prefix.push(element);
            parse_node(child, prefix, set);
            prefix.pop();
        }
    }
}

fn read_entries(object: Option<&Value>) -> Vec<Entry> {
    let Some(Value::Array(entries)) = object.and_then(|o| o["metadata"].get("managedFields"))
    else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|e| {
            Some(Entry {
                manager: e["manager"].as_str()?.to_string(),
                operation: e["operation"].as_str().unwrap_or("Update").to_string(),
                subresource: e["subresource"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
                api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                time: e["time"].as_str().unwrap_or_default().to_string(),
                fields: parse_fields_v1(&e["fieldsV1"]),
            })
        })
        .collect()
}

fn write_entries(object: &mut Value, entries: &[Entry]) {
    let meta = ensure_object(object, "metadata");
    if entries.is_empty() {
        meta.remove("managedFields");
        return;
    }
    let rendered: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut entry = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": fields_v1(&e.fields),
            });
            if let Some(sub) = &e.subresource {
                entry["subresource"] = json!(sub);
            }
            entry
        })
        .collect();
    meta.insert("managedFields".into(), Value::Array(rendered));
}

fn subresource(scope: Scope) -> Option<&'static str> {
    match scope {
        Scope::Main => None,
        Scope::Status => Some("status"),
    }
}

// --- Update bookkeeping --------------------------------------------------------------------

/// Records a non-apply write (create, update, patch) by `manager`: it takes ownership of every
/// field it set to a new value; other managers lose those fields.
pub fn record_update(
    def: &ResourceDef,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    scope: Scope,
) {
    let mut entries = read_entries(old);
    let changed: FieldSet = owned_fields(def, new, scope)
        .into_iter()
        .filter(|path| match old {
            None => true,
            Some(old) => get_at(old, path) != get_at(new, path),
        })
        .collect();
    if !changed.is_empty() {
        for entry in &mut entries {
            entry.fields.retain(|p| !changed.contains(p));
        }
        let sub = subresource(scope);
        match entries.iter_mut().find(|e| e.is(manager, "Update", sub)) {
            Some(entry) => {
                entry.fields.extend(changed);
                entry.time = now_rfc3339();
                entry.api_version = def.api_version();
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                subresource: sub.map(str::to_string),
                api_version: def.api_version(),
                time: now_rfc3339(),
                fields: changed,
            }),
        }
    }
    write_entries(new, &entries);
}

/// Drops owned paths that no longer exist in the object, and entries left with nothing.
pub fn prune_managed_fields(object: &mut Value) {
    let mut entries = read_entries(Some(object));
    if entries.is_empty() {
        return;
    }
    for entry in &mut entries {
        entry.fields.retain(|p| get_at(object, p).is_some());
    }
    entries.retain(|e| !e.fields.is_empty());
    write_entries(object, &entries);
}

// --- Server-side apply ---------------------------------------------------------------------

/// The apply configuration restricted to what `scope` may change.
fn scoped_config(def: &ResourceDef, config: &Value, scope: Scope) -> Value {
    let mut scoped = Map::new();
    if let Value::Object(map) = config {
        for (field, value) in map {
            if field == "apiVersion" || field == "kind" || in_scope(def, field, scope) {
                scoped.insert(field.clone(), value.clone());
            }
        }
        if let Some(Value::Object(meta)) = map.get("metadata") {
            let mut kept = Map::new();
            for (field, value) in meta {
                let identity = field == "name" || field == "namespace";
                if identity || (scope == Scope::Main && MANAGED_METADATA.contains(&field.as_str()))
                {
                    kept.insert(field.clone(), value.clone());
                }
            }
            scoped.insert("metadata".into(), Value::Object(kept));
        }
    }
    Value::Object(scoped)
}

/// Server-side apply of `config` by `manager` onto `live` (`None`: create). Returns the new
/// object with `metadata.managedFields` updated, or the conflicts when another manager owns a
/// field the config sets to a different value and `force` is false.
pub fn server_side_apply(
    def: &ResourceDef,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    scope: Scope,
) -> Result<Value, Vec<Conflict>> {
    let config = scoped_config(def, config, scope);
    let applied = owned_fields(def, &config, scope);
    let sub = subresource(scope);
    let mut entries = read_entries(live);

    if let Some(live) = live {
        let mut conflicts = Vec::new();
        for entry in entries.iter().filter(|e| !e.is(manager, "Apply", sub)) {
            for path in applied.intersection(&entry.fields) {
                let item_only = matches!(path.last(), Some(Element::Key(_) | Element::Value(_)));
                if item_only {
                    continue;
                }
                if let (Some(current), Some(wanted)) = (get_at(live, path), get_at(&config, path)) {
                    if current != wanted {
                        conflicts.push(Conflict {
                            manager: entry.manager.clone(),
                            api_version: entry.api_version.clone(),
                            path: path.clone(),
                        });
                    }
                }
            }
        }
        if !conflicts.is_empty() {
            if !force {
                return Err(conflicts);
            }
            for entry in &mut entries {
                entry.fields.retain(|p| {
                    !conflicts
                        .iter()
                        .any(|c| c.manager == entry.manager && c.path == *p)
                });
            }
        }
    }

    let previous: FieldSet = entries
        .iter()
        .find(|e| e.is(manager, "Apply", sub))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let owned_by_others: FieldSet = entries
        .iter()
        .filter(|e| !e.is(manager, "Apply", sub))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();

    let mut result = match live {
        Some(live) => live.clone(),
        None => {
            json!({ "apiVersion": config["apiVersion"], "kind": config["kind"], "metadata": {} })
        }
    };
    // Fields this manager applied before, omits now, and nobody else owns, go away. Shallower
    // paths first: removing a list-map item's key field first would leave it unaddressable.
    let mut removed: Vec<&FieldPath> = previous
        .iter()
        .filter(|p| !applied.contains(*p) && !owned_by_others.contains(*p))
        .collect();
    removed.sort_by_key(|p| p.len());
    for path in removed {
        remove_at(&mut result, path);
    }

    merge_root(def, &mut result, &config);

    // The manager's entry keeps its place (and its time when nothing changed), so an
    // identical apply leaves managedFields identical and is a no-op.
    let position = entries.iter().position(|e| e.is(manager, "Apply", sub));
    let time = match position {
        Some(i) if entries[i].fields == applied => entries[i].time.clone(),
        _ => now_rfc3339(),
    };
    let entry = Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        subresource: sub.map(str::to_string),
        api_version: def.api_version(),
        time,
        fields: applied,
    };
    match position {
        Some(i) if entry.fields.is_empty() => {
            entries.remove(i);
        }
        Some(i) => entries[i] = entry,
        None if entry.fields.is_empty() => {}
        None => entries.push(entry),
    }
    write_entries(&mut result, &entries);
    Ok(result)
}

/// The 409 a rejected apply answers with, worded like Kubernetes.
pub fn conflict_error(def: &ResourceDef, name: &str, conflicts: &[Conflict]) -> ApiError {
    let mut by_manager: Vec<(String, String, Vec<String>)> = Vec::new();
    for c in conflicts {
        let path = path_text(&c.path);
        match by_manager.iter_mut().find(|(m, _, _)| *m == c.manager) {
            Some((_, _, paths)) => paths.push(path),
            None => by_manager.push((c.manager.clone(), c.api_version.clone(), vec![path])),
        }
    }
    let count = conflicts.len();
    let parts: Vec<String> = by_manager
        .iter()
        .map(|(manager, api_version, paths)| {
            if paths.len() == 1 {
                format!(
                    "conflict with \"{manager}\" using {api_version}: {}",
                    paths[0]
                )
            } else {
                format!(
                    "conflicts with \"{manager}\" using {api_version}:\n- {}",
                    paths.join("\n- ")
                )
            }
        })
        .collect();
    let message = format!(
        "Apply failed with {count} conflict{}: {}",
        if count == 1 { "" } else { "s" },
        parts.join("\n")
    );
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|c| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with \"{}\" using {}", c.manager, c.api_version),
            field: path_text(&c.path),
        })
        .collect();
    ApiError::apply_conflict(def, name, message, &causes)
}

fn merge_root(def: &ResourceDef, live: &mut Value, config: &Value) {
    let Value::Object(config_map) = config else {
        return;
    };
    let shape = root_shape(def);
    for (field, value) in config_map {
        match field.as_str() {
            "apiVersion" | "kind" => {
                if let Value::Object(map) = live {
                    map.insert(field.clone(), value.clone());
                }
            }
            "metadata" => {
                let meta = ensure_object(live, "metadata");
                let Value::Object(config_meta) = value else {
                    continue;
                };
                let meta_shape = Shape(Some(metadata_shape()));
                for (mfield, mvalue) in config_meta {
                    merge_field(meta, mfield, mvalue, meta_shape.field(mfield));
                }
            }
            _ => {
                if let Value::Object(map) = live {
                    merge_field(map, field, value, shape.field(field));
                }
            }
        }
    }
}

fn merge_field(map: &mut Map<String, Value>, field: &str, value: &Value, shape: Shape) {
    if value.is_null() {
        map.shift_remove(field);
        return;
    }
    match map.get_mut(field) {
        Some(existing) => merge(existing, value, shape),
        None => {
            map.insert(field.to_string(), without_nulls(value));
        }
    }
}

fn merge(live: &mut Value, config: &Value, shape: Shape) {
    match (live, config) {
        (Value::Object(live_map), Value::Object(config_map)) if !shape.atomic_map() => {
            for (field, value) in config_map {
                merge_field(live_map, field, value, shape.field(field));
            }
        }
        (Value::Array(live_items), Value::Array(config_items)) => match shape.list_kind() {
            ListKind::Map(keys)
                if live_items
                    .iter()
                    .chain(config_items)
                    .all(|i| item_key(i, &keys).is_some()) =>
            {
                for item in config_items {
                    let key = item_key(item, &keys);
                    match live_items.iter_mut().find(|l| item_key(l, &keys) == key) {
                        Some(existing) => merge(existing, item, shape.items()),
                        None => live_items.push(without_nulls(item)),
                    }
                }
            }
            ListKind::Set => {
                for item in config_items {
                    if !live_items.contains(item) {
                        live_items.push(item.clone());
                    }
                }
            }
            _ => *live_items = config_items.iter().map(without_nulls).collect(),
        },
        (live, config) => *live = without_nulls(config),
    }
}

fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}
