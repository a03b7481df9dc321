//! Field ownership: `metadata.managedFields` and server-side apply.
//!
//! Owns the field-set model (paths of `f:` fields, `k:` list-map keys, `v:` set values), its
//! FieldsV1 encoding, the bookkeeping of non-apply writes (operation `Update`: the writer takes
//! what structured-merge-diff's `Compare` reports added or modified, map and list-item nodes
//! included, and every manager loses what was removed), and server-side apply: the applier owns
//! its configuration's field set (`ToFieldSet`: leaves, list items, atomic lists/maps, no
//! nodes of declared structs), conflicts are other managers' fields the apply adds or modifies
//! (409 unless `force`, which moves ownership), removal of fields the same manager applied
//! before and now omits, and merging (maps recursively, `x-kubernetes-list-type: map` lists by
//! their keys, `set` lists by value, other lists atomic). Managers are told apart as Kubernetes'
//! `BuildManagerIdentifier` does: name, operation, subresource, and for `Update` the
//! apiVersion; entries are sorted like `sortEncodedManagedFields`. Object metadata follows the
//! built-in rules (labels/annotations granular maps, finalizers a set, ownerReferences keyed by
//! uid; name, uid and the other server-set fields are stripped as `stripMetaManager` does).
//! Pure functions over `serde_json::Value`; no store, no HTTP.

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
    /// `None` for an entry whose apply changed nothing (Kubernetes writes no time then).
    time: Option<String>,
    fields: FieldSet,
}

impl Entry {
    /// Whether this entry is the manager `BuildManagerIdentifier` builds for these values: the
    /// apiVersion counts for `Update` entries only.
    fn is(
        &self,
        manager: &str,
        operation: &str,
        subresource: Option<&str>,
        api_version: &str,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
            && (operation == "Apply" || self.api_version == api_version)
    }

    /// The manager identifier as Kubernetes encodes it (JSON of the identifying fields); the
    /// order conflict messages list managers in.
    fn identifier(&self) -> String {
        let mut id = Map::new();
        id.insert("manager".into(), json!(self.manager));
        id.insert("operation".into(), json!(self.operation));
        if self.operation != "Apply" {
            id.insert("apiVersion".into(), json!(self.api_version));
        }
        if let Some(sub) = &self.subresource {
            id.insert("subresource".into(), json!(sub));
        }
        Value::Object(id).to_string()
    }

    /// How Kubernetes' `printManager` names this manager in conflict messages.
    fn printed(&self) -> String {
        let mut text = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            text.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            text.push_str(&format!(" using {}", self.api_version));
        }
        text
    }
}

/// A field another manager owns that an apply adds or changes.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    /// The manager as conflict messages print it (`"kubectl" using v1`).
    pub manager: String,
    /// The manager identifier (sort key of the message).
    pub identifier: String,
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

    /// Whether `name` is a key of a map rather than a declared field of a struct
    /// (`additionalProperties`, or an unknown field kept by `x-kubernetes-preserve-unknown-fields`):
    /// structured-merge-diff makes such an entry a member of the field set itself.
    fn undeclared(self, name: &str) -> bool {
        let Some(schema) = self.0 else {
            return false;
        };
        let declared = schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(name));
        !declared
            && (schema
                .get("additionalProperties")
                .is_some_and(Value::is_object)
                || schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true)))
    }
}

/// What structured-merge-diff cannot type in an apply configuration (`FromUnstructured`),
/// as `.path: problem` texts: a value of another type than the schema's, a list-map item that
/// omits every key field (none defaulted), two items with the same key.
pub fn typed_errors(def: &ResourceDef, config: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let shape = root_shape(def);
    if let Value::Object(map) = config {
        for (field, value) in map {
            if !matches!(field.as_str(), "apiVersion" | "kind" | "metadata") {
                type_check(value, shape.field(field), &format!(".{field}"), &mut errors);
            }
        }
    }
    errors
}

/// A list-map item of an apply configuration that omits a key field with a schema default
/// is addressed by the default (structured-merge-diff fills key defaults in), without owning
/// it: the paths of the filled-in keys go to `filled`.
fn default_keys(value: &mut Value, shape: Shape, prefix: &mut FieldPath, filled: &mut FieldSet) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                prefix.push(Element::Field(key.clone()));
                default_keys(child, shape.field(key), prefix, filled);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            let item_shape = shape.items();
            let keys = match shape.list_kind() {
                ListKind::Map(keys) => keys,
                _ => Vec::new(),
            };
            for item in items.iter_mut() {
                let mut defaulted = Vec::new();
                if let (Value::Object(fields), Some(schema)) = (&mut *item, item_shape.0) {
                    for key in &keys {
                        if let Some(default) = schema["properties"][key.as_str()].get("default") {
                            if !fields.contains_key(key) {
                                fields.insert(key.clone(), default.clone());
                                defaulted.push(key.clone());
                            }
                        }
                    }
                }
                let element = match item_key(item, &keys) {
                    Some(key) if !keys.is_empty() => Element::Key(key),
                    _ => continue,
                };
                prefix.push(element);
                for key in defaulted {
                    let mut path = prefix.clone();
                    path.push(Element::Field(key));
                    filled.insert(path);
                }
                default_keys(item, item_shape, prefix, filled);
                prefix.pop();
            }
        }
        _ => {}
    }
}

/// How structured-merge-diff prints an unstructured value in a type error.
fn smd_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("&{{{s}}}"),
        other => format!("&value.valueUnstructured{{Value:{other}}}"),
    }
}

fn type_check(value: &Value, shape: Shape, path: &str, errors: &mut Vec<String>) {
    let Some(schema) = shape.0 else {
        return;
    };
    if value.is_null()
        || schema.get("x-go").is_some()
        || schema.get("x-kubernetes-int-or-string") == Some(&json!(true))
        || schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true))
    {
        return;
    }
    let expected = match schema.get("type").and_then(Value::as_str) {
        Some("array") if !value.is_array() => Some("list"),
        Some("object") if !value.is_object() => Some("map"),
        Some("string") if !value.is_string() => Some("string"),
        Some("boolean") if !value.is_boolean() => Some("bool"),
        Some("integer" | "number") if !value.is_number() => Some("numeric (int or float)"),
        _ => None,
    };
    if let Some(expected) = expected {
        errors.push(format!(
            "{path}: expected {expected}, got {}",
            smd_value(value)
        ));
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                type_check(child, shape.field(key), &format!("{path}.{key}"), errors);
            }
        }
        Value::Array(items) => {
            let item_shape = shape.items();
            if let ListKind::Map(keys) = shape.list_kind() {
                let defaulted = |k: &String| {
                    item_shape
                        .0
                        .is_some_and(|s| s["properties"][k.as_str()].get("default").is_some())
                };
                let mut seen: Vec<String> = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let present: Vec<&String> = keys
                        .iter()
                        .filter(|k| item.get(k.as_str()).is_some())
                        .collect();
                    if present.is_empty() && !keys.iter().any(defaulted) {
                        errors.push(format!(
                            "{path}: element {i}: associative list with keys has an element that omits all key fields {} (and doesn't have default values for any key fields)",
                            json!(keys)
                        ));
                        return;
                    }
                    let key = keys
                        .iter()
                        .filter_map(|k| item.get(k.as_str()).map(|v| format!("{k}={v}")))
                        .collect::<Vec<_>>()
                        .join(",");
                    if !present.is_empty() && seen.contains(&key) {
                        errors.push(format!("{path}: duplicate entries for key [{key}]"));
                        return;
                    }
                    seen.push(key);
                }
            }
            for (i, item) in items.iter().enumerate() {
                type_check(item, item_shape, &format!("{path}[{i}]"), errors);
            }
        }
        _ => {}
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
                    "items": { "type": "object", "x-kubernetes-map-type": "atomic" },
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["uid"]
                }
            }
        })
    })
}

const MANAGED_METADATA: &[&str] = &["labels", "annotations", "finalizers", "ownerReferences"];

/// The schema of a custom resource, or the Go shape of a modelled built-in kind (list and map
/// types as Kubernetes' OpenAPI declares them); neither: granular maps and atomic lists.
fn root_shape(def: &ResourceDef) -> Shape<'_> {
    Shape(
        def.schema
            .as_deref()
            .or_else(|| def.builtin.map(|kind| kind.shape())),
    )
}

/// Whether a top-level field belongs to the part of the object `scope` writes.
fn in_scope(def: &ResourceDef, field: &str, scope: Scope) -> bool {
    match (scope, field) {
        (_, "apiVersion" | "kind" | "metadata") => false,
        (Scope::Status, "status") => true,
        (Scope::Status, _) => false,
        (Scope::Finalize, "status") => false,
        (Scope::Finalize, _) => true,
        (Scope::Main, "status") => !def.status_subresource,
        (Scope::Main, _) => true,
    }
}

/// The fields an object sets, within `scope`, as structured-merge-diff's `ToFieldSet`
/// computes an apply configuration's set: scalars, atomic lists and maps, list items (and their
/// fields), map entries, and an empty map as a leaf (`spec: {}` owns `.spec`); never the node
/// of a non-empty struct.
fn owned_fields(def: &ResourceDef, object: &Value, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    let Value::Object(map) = object else {
        return out;
    };
    let mut prefix = Vec::new();
    if scope != Scope::Status {
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
            if shape.undeclared(field) {
                out.insert(prefix.clone());
            }
            prefix.pop();
        }
    }
    out
}

fn collect(value: &Value, shape: Shape, prefix: &mut FieldPath, out: &mut FieldSet) {
    match value {
        // An atomic map, and an empty one (a leaf with nothing under it), is owned whole.
        Value::Object(map) if shape.atomic_map() || map.is_empty() => {
            out.insert(prefix.clone());
        }
        Value::Object(map) => {
            for (field, child) in map {
                prefix.push(Element::Field(field.clone()));
                collect(child, shape.field(field), prefix, out);
                if shape.undeclared(field) {
                    out.insert(prefix.clone());
                }
                prefix.pop();
            }
        }
        Value::Array(items) => match shape.list_kind() {
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

// --- Compare (non-apply writes) ------------------------------------------------------------

/// What a write changed, as structured-merge-diff's `TypedValue.Compare` reports it: leaves
/// (scalars, atomic lists and maps, lists and maps empty on both sides) that were added, removed
/// or modified, and map, list and list-item nodes that were added or removed.
#[derive(Default, Debug)]
struct Comparison {
    added: FieldSet,
    modified: FieldSet,
    removed: FieldSet,
}

/// ObjectMeta paths `stripMetaManager` keeps out of every manager's set (with `apiVersion`,
/// `kind` and the `metadata` node itself).
const STRIPPED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

fn compare_objects(def: &ResourceDef, old: Option<&Value>, new: &Value) -> Comparison {
    let mut out = Comparison::default();
    let empty = Map::new();
    let as_map = |v: Option<&Value>| match v {
        Some(Value::Object(m)) => m.clone(),
        _ => empty.clone(),
    };
    let old_map = as_map(old);
    let new_map = as_map(Some(new));
    let shape = root_shape(def);
    let mut prefix = Vec::new();
    for field in union_keys(&old_map, &new_map) {
        match field.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                let old_meta = as_map(old_map.get("metadata"));
                let new_meta = as_map(new_map.get("metadata"));
                let meta_shape = Shape(Some(metadata_shape()));
                prefix.push(Element::Field("metadata".into()));
                for mfield in union_keys(&old_meta, &new_meta) {
                    if STRIPPED_METADATA.contains(&mfield.as_str()) {
                        continue;
                    }
                    prefix.push(Element::Field(mfield.clone()));
                    compare_value(
                        old_meta.get(&mfield),
                        new_meta.get(&mfield),
                        meta_shape.field(&mfield),
                        &mut prefix,
                        &mut out,
                    );
                    prefix.pop();
                }
                prefix.pop();
            }
            _ => {
                prefix.push(Element::Field(field.clone()));
                compare_value(
                    old_map.get(&field),
                    new_map.get(&field),
                    shape.field(&field),
                    &mut prefix,
                    &mut out,
                );
                prefix.pop();
            }
        }
    }
    out
}

fn union_keys(a: &Map<String, Value>, b: &Map<String, Value>) -> Vec<String> {
    let mut keys: Vec<String> = a.keys().cloned().collect();
    keys.extend(b.keys().filter(|k| !a.contains_key(*k)).cloned());
    keys
}

fn compare_leaf(lhs: Option<&Value>, rhs: Option<&Value>, path: &FieldPath, out: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => {
            out.added.insert(path.clone());
        }
        (Some(_), None) => {
            out.removed.insert(path.clone());
        }
        (Some(l), Some(r)) if l != r => {
            out.modified.insert(path.clone());
        }
        _ => {}
    }
}

/// The list items of a non-atomic list by their path element, or `None` when an item cannot be
/// addressed (then the list is compared as one leaf).
fn list_elements<'v>(items: &'v [Value], kind: &ListKind) -> Option<Vec<(Element, &'v Value)>> {
    items
        .iter()
        .map(|item| match kind {
            ListKind::Map(keys) => item_key(item, keys).map(|k| (Element::Key(k), item)),
            ListKind::Set => Some((Element::Value(item.to_string()), item)),
            ListKind::Atomic => None,
        })
        .collect()
}

fn compare_value(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    shape: Shape,
    prefix: &mut FieldPath,
    out: &mut Comparison,
) {
    let empty_map = Map::new();
    let is_object = |v: Option<&Value>| v.is_none_or(Value::is_object);
    let is_array = |v: Option<&Value>| v.is_none_or(Value::is_array);
    if lhs.is_some_and(Value::is_object) || rhs.is_some_and(Value::is_object) {
        let both_maps = is_object(lhs) && is_object(rhs);
        let map_of = |v: Option<&Value>| match v {
            Some(Value::Object(m)) => m.clone(),
            _ => empty_map.clone(),
        };
        let (l, r) = (map_of(lhs), map_of(rhs));
        if !both_maps || shape.atomic_map() || (l.is_empty() && r.is_empty()) {
            compare_leaf(lhs, rhs, prefix, out);
            return;
        }
        for key in union_keys(&l, &r) {
            prefix.push(Element::Field(key.clone()));
            compare_value(l.get(&key), r.get(&key), shape.field(&key), prefix, out);
            prefix.pop();
        }
        compare_node(lhs, rhs, prefix, out);
        return;
    }
    if lhs.is_some_and(Value::is_array) || rhs.is_some_and(Value::is_array) {
        let kind = shape.list_kind();
        let items = |v: Option<&Value>| match v {
            Some(Value::Array(items)) => items.clone(),
            _ => Vec::new(),
        };
        let (l, r) = (items(lhs), items(rhs));
        let elements = (is_array(lhs) && is_array(rhs) && !(l.is_empty() && r.is_empty()))
            .then(|| Some((list_elements(&l, &kind)?, list_elements(&r, &kind)?)))
            .flatten();
        let Some((l_items, r_items)) = elements else {
            compare_leaf(lhs, rhs, prefix, out);
            return;
        };
        let mut seen: Vec<&Element> = Vec::new();
        for (element, _) in l_items.iter().chain(r_items.iter()) {
            if seen.contains(&element) {
                continue;
            }
            seen.push(element);
            let find = |list: &[(Element, &Value)]| {
                list.iter()
                    .find(|(e, _)| e == element)
                    .map(|(_, v)| (*v).clone())
            };
            let (li, ri) = (find(&l_items), find(&r_items));
            prefix.push(element.clone());
            compare_value(li.as_ref(), ri.as_ref(), shape.items(), prefix, out);
            prefix.pop();
        }
        compare_node(lhs, rhs, prefix, out);
        return;
    }
    compare_leaf(lhs, rhs, prefix, out);
}

/// A map, list or list item after its children: added or removed as a whole.
fn compare_node(lhs: Option<&Value>, rhs: Option<&Value>, path: &FieldPath, out: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => {
            out.added.insert(path.clone());
        }
        (Some(_), None) => {
            out.removed.insert(path.clone());
        }
        _ => {}
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
    match object.and_then(|o| o["metadata"].get("managedFields")) {
        Some(Value::Array(entries)) => decode_entries(entries).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Entries as Kubernetes' `DecodeManagedFields` reads them: `None` when one is invalid
/// (operation not `Apply`/`Update`, no apiVersion, fieldsType not `FieldsV1`).
fn decode_entries(entries: &[Value]) -> Option<Vec<Entry>> {
    entries
        .iter()
        .map(|e| {
            let operation = e["operation"]
                .as_str()
                .filter(|o| matches!(*o, "Apply" | "Update"))?;
            let api_version = e["apiVersion"].as_str().filter(|v| !v.is_empty())?;
            if e["fieldsType"].as_str() != Some("FieldsV1") {
                return None;
            }
            Some(Entry {
                manager: e["manager"].as_str().unwrap_or_default().to_string(),
                operation: operation.to_string(),
                subresource: e["subresource"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
                api_version: api_version.to_string(),
                time: e["time"].as_str().map(str::to_string),
                fields: parse_fields_v1(&e["fieldsV1"]),
            })
        })
        .collect()
}

/// Where the field ownership a non-apply write starts from comes from, as Kubernetes'
/// `decodeLiveOrNew` decides: on a subresource always the stored object's; on the main resource
/// the request's own `managedFields` when it sends valid, non-empty ones (clients may rewrite
/// ownership), none at all when it sends `[]` or `[{}]` (a reset), else the stored object's.
pub fn base_entries_from_request(request: &Value, stored: Option<&Value>, scope: Scope) -> Value {
    let stored_entries = || {
        stored
            .and_then(|o| o["metadata"].get("managedFields"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    if scope == Scope::Status {
        return stored_entries();
    }
    match request["metadata"].get("managedFields") {
        Some(Value::Array(entries)) if entries.is_empty() => json!([]),
        Some(Value::Array(entries)) if entries.len() == 1 && entries[0] == json!({}) => json!([]),
        Some(Value::Array(entries)) if decode_entries(entries).is_some_and(|e| !e.is_empty()) => {
            Value::Array(entries.clone())
        }
        _ => stored_entries(),
    }
}

fn write_entries(object: &mut Value, entries: &[Entry]) {
    let meta = ensure_object(object, "metadata");
    if entries.is_empty() {
        meta.remove("managedFields");
        return;
    }
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    // sortEncodedManagedFields: operation, time (to the second), manager, apiVersion, subresource.
    sorted.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then_with(|| p.time.cmp(&q.time))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    let rendered: Vec<Value> = sorted
        .into_iter()
        .map(|e| {
            let mut entry = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "fieldsType": "FieldsV1",
                "fieldsV1": fields_v1(&e.fields),
            });
            if let Some(time) = &e.time {
                entry["time"] = json!(time);
            }
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
        Scope::Finalize => Some("finalize"),
    }
}

// --- Update bookkeeping --------------------------------------------------------------------

/// Records a non-apply write (create, update, patch) by `manager` onto the entries already in
/// `new` (see [`base_entries_from_request`]), as structured-merge-diff's `Updater.Update` and
/// Kubernetes' `managedFieldsUpdater` do: what the write added or modified moves to the
/// manager's `Update` entry (whose time moves only then), what it removed leaves every entry,
/// and entries left with nothing go.
pub fn record_update(
    def: &ResourceDef,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    scope: Scope,
) {
    let mut entries = read_entries(Some(new));
    let comparison = compare_objects(def, old, new);
    let changed: FieldSet = comparison
        .added
        .union(&comparison.modified)
        .cloned()
        .collect();
    for entry in &mut entries {
        entry
            .fields
            .retain(|p| !changed.contains(p) && !comparison.removed.contains(p));
    }
    let taken: FieldSet = changed.difference(&comparison.removed).cloned().collect();
    if !taken.is_empty() {
        let sub = subresource(scope);
        let api_version = def.api_version();
        match entries
            .iter_mut()
            .find(|e| e.is(manager, "Update", sub, &api_version))
        {
            Some(entry) => {
                entry.fields.extend(taken);
                entry.time = Some(now_rfc3339());
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                subresource: sub.map(str::to_string),
                api_version,
                time: Some(now_rfc3339()),
                fields: taken,
            }),
        }
    }
    entries.retain(|e| !e.fields.is_empty());
    write_entries(new, &entries);
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
                if identity
                    || (scope != Scope::Status && MANAGED_METADATA.contains(&field.as_str()))
                {
                    kept.insert(field.clone(), value.clone());
                }
            }
            scoped.insert("metadata".into(), Value::Object(kept));
        }
    }
    Value::Object(scoped)
}

/// Server-side apply of `config` by `manager` onto `live` (`None`: create), as
/// structured-merge-diff's `Updater.Apply`: the manager's `Apply` entry becomes the
/// configuration's field set; fields it applied before and omits now go unless another applier
/// owns them (an `Update` co-owner does not keep them); other managers' fields the result adds or modifies are conflicts (returned unless
/// `force`, which takes them over); fields the result removed leave every entry. The entry's time
/// moves only when the object changed. Returns the new object with `metadata.managedFields`.
pub fn server_side_apply(
    def: &ResourceDef,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    scope: Scope,
) -> Result<Value, Vec<Conflict>> {
    let mut config = scoped_config(def, config, scope);
    let mut filled = FieldSet::new();
    default_keys(&mut config, root_shape(def), &mut Vec::new(), &mut filled);
    let mut applied = owned_fields(def, &config, scope);
    applied.retain(|p| !filled.contains(p));
    let sub = subresource(scope);
    let api_version = def.api_version();
    let mut entries = read_entries(live);
    let is_self = |e: &Entry| e.is(manager, "Apply", sub, &api_version);

    let previous = entries.iter().find(|e| is_self(e));
    let previous_fields: FieldSet = previous.map(|e| e.fields.clone()).unwrap_or_default();
    let previous_time = previous.and_then(|e| e.time.clone());
    // Only other appliers keep a dropped field (structured-merge-diff's addBackOwnedItems);
    // an Update manager sharing it does not.
    let owned_by_others: FieldSet = entries
        .iter()
        .filter(|e| !is_self(e) && e.operation == "Apply")
        .flat_map(|e| e.fields.iter().cloned())
        .collect();

    let mut result = match live {
        Some(live) => live.clone(),
        None => {
            json!({ "apiVersion": config["apiVersion"], "kind": config["kind"], "metadata": {} })
        }
    };
    // Fields this manager applied before, omits now, and no other applier owns, go away. Shallower
    // paths first: removing a list-map item's key field first would leave it unaddressable.
    // A dropped node (an empty map applied before) under which this or another applier still
    // owns fields stays: those fields are added back with it.
    let kept_below = |p: &FieldPath| {
        applied
            .iter()
            .chain(owned_by_others.iter())
            .any(|q| q.len() > p.len() && q.starts_with(p))
    };
    let mut removed: Vec<&FieldPath> = previous_fields
        .iter()
        .filter(|p| !applied.contains(*p) && !owned_by_others.contains(*p) && !kept_below(p))
        .collect();
    removed.sort_by_key(|p| p.len());
    for path in removed {
        remove_at(&mut result, path);
    }

    merge_root(def, &mut result, &config);

    let comparison = compare_objects(def, live, &result);
    let changed: FieldSet = comparison
        .added
        .union(&comparison.modified)
        .cloned()
        .collect();
    let mut conflicts = Vec::new();
    for entry in entries.iter().filter(|e| !is_self(e)) {
        for path in entry.fields.intersection(&changed) {
            conflicts.push(Conflict {
                manager: entry.printed(),
                identifier: entry.identifier(),
                path: path.clone(),
            });
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    for entry in entries.iter_mut().filter(|e| !is_self(e)) {
        entry
            .fields
            .retain(|p| !changed.contains(p) && !comparison.removed.contains(p));
    }

    let object_changed = live.is_none_or(|live| {
        let strip = |v: &Value| {
            let mut v = v.clone();
            ensure_object(&mut v, "metadata").remove("managedFields");
            v
        };
        strip(live) != strip(&result)
    });
    let time = if object_changed {
        Some(now_rfc3339())
    } else {
        previous_time
    };
    let entry = Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        subresource: sub.map(str::to_string),
        api_version: api_version.clone(),
        time,
        fields: applied,
    };
    match entries.iter().position(is_self) {
        Some(i) => entries[i] = entry,
        None => entries.push(entry),
    }
    entries.retain(|e| !e.fields.is_empty());
    write_entries(&mut result, &entries);
    Ok(result)
}

/// The 409 a rejected apply answers with, worded like Kubernetes' `NewConflictError`.
pub fn conflict_error(conflicts: &[Conflict]) -> ApiError {
    let message = if let [only] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager,
            path_text(&only.path)
        )
    } else {
        let mut identifiers: Vec<&Conflict> = Vec::new();
        for c in conflicts {
            if !identifiers.iter().any(|i| i.identifier == c.identifier) {
                identifiers.push(c);
            }
        }
        identifiers.sort_by(|a, b| a.identifier.cmp(&b.identifier));
        let mut lines = Vec::new();
        for first in identifiers {
            lines.push(format!("conflicts with {}:", first.manager));
            for c in conflicts
                .iter()
                .filter(|c| c.identifier == first.identifier)
            {
                lines.push(format!("- {}", path_text(&c.path)));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|c| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {}", c.manager),
            field: path_text(&c.path),
        })
        .collect();
    ApiError::apply_conflict(message, &causes)
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

/// An explicit `null` in an apply configuration is a value, as structured-merge-diff takes it:
/// the field is set to null (and owned); the schema's pruning then keeps it where the field is
/// `nullable` and drops it elsewhere (`kubectl apply --server-side` can set a nullable field to
/// null, which a merge patch cannot).
fn merge_field(map: &mut Map<String, Value>, field: &str, value: &Value, shape: Shape) {
    match map.get_mut(field) {
        Some(existing) if !value.is_null() => merge(existing, value, shape),
        _ => {
            map.insert(field.to_string(), value.clone());
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
                        None => live_items.push(item.clone()),
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
            _ => *live_items = config_items.clone(),
        },
        (live, config) => *live = config.clone(),
    }
}
