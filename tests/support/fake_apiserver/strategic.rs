//! Strategic merge patches of built-in kinds, as apimachinery's `strategicpatch` applies them.
//!
//! Owns the merge itself: maps merged key by key (`null` deletes), the `$patch` directive of a
//! map (`replace`, `delete`; another is a 500), `$deleteFromPrimitiveList/<field>`, lists
//! merged by their merge key (the kind's list-map key; `$patch: delete` items remove entries)
//! or, for sets of primitives (`patchStrategy: merge`, e.g. `finalizers`), deduplicated; every
//! other list replaced. Merged lists are ordered as `normalizeElementOrder` orders them: the
//! patch's items in the patch's order, the items only the server had in their old order,
//! interleaved by the server's order where both are known, so a new item comes first.
//! `$setElementOrder` and `$retainKeys` are read as directives (never as fields) but not
//! otherwise applied.

use serde_json::{Map, Value};

use super::status::ApiError;

const DIRECTIVE: &str = "$patch";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const RETAIN_KEYS: &str = "$retainKeys";

/// Applies the strategic merge patch `patch` (an object) to `target`, `shape` being the kind's
/// shape (`properties`, `items`, `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`).
pub fn apply(target: &mut Value, patch: &Value, shape: Option<&Value>) -> Result<(), ApiError> {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    let original = match target {
        Value::Object(map) => std::mem::take(map),
        _ => Map::new(),
    };
    *target = Value::Object(merge_map(original, patch, shape)?);
    Ok(())
}

fn child_shape<'a>(shape: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    shape
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.get(key))
        .or_else(|| shape.and_then(|s| s.get("additionalProperties")))
}

/// How a list field merges.
enum ListStrategy {
    /// Items are maps merged by this key.
    MergeKey(String),
    /// Primitive items, deduplicated.
    Primitives,
    Replace,
}

fn list_strategy(shape: Option<&Value>) -> ListStrategy {
    match shape.and_then(|s| s["x-kubernetes-list-type"].as_str()) {
        Some("map") => shape
            .and_then(|s| s["x-kubernetes-list-map-keys"][0].as_str())
            .map_or(ListStrategy::Replace, |k| ListStrategy::MergeKey(k.into())),
        Some("set") => ListStrategy::Primitives,
        _ => ListStrategy::Replace,
    }
}

/// Go's `%v` of a decoded JSON map (`map[k:v ...]`, keys sorted).
fn go_map(map: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    let items: Vec<String> = keys
        .into_iter()
        .map(|k| {
            let v = match &map[k] {
                Value::String(s) => s.clone(),
                Value::Object(m) => go_map(m),
                other => other.to_string(),
            };
            format!("{k}:{v}")
        })
        .collect();
    format!("map[{}]", items.join(" "))
}

fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    shape: Option<&Value>,
) -> Result<Map<String, Value>, ApiError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                let mut replaced = patch.clone();
                replaced.remove(DIRECTIVE);
                replaced.retain(|_, v| !v.is_null());
                Ok(replaced)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(ApiError::plain(format!(
                "unknown patch type: {} in map: {}",
                directive
                    .as_str()
                    .map_or(directive.to_string(), str::to_string),
                go_map(patch)
            ))),
        };
    }
    if let Some(Value::Array(keep)) = patch.get(RETAIN_KEYS) {
        original.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    for (key, values) in patch {
        let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else {
            continue;
        };
        if let (Some(Value::Array(list)), Value::Array(remove)) = (original.get_mut(field), values)
        {
            list.retain(|item| !remove.contains(item));
        }
    }
    for (key, value) in patch {
        if key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || key.starts_with(SET_ELEMENT_ORDER)
            || key == RETAIN_KEYS
        {
            continue;
        }
        if value.is_null() {
            original.remove(key);
            continue;
        }
        let shape = child_shape(shape, key);
        let merged = match (original.remove(key), value) {
            (Some(Value::Object(old)), Value::Object(patch)) => {
                Value::Object(merge_map(old, patch, shape)?)
            }
            (Some(Value::Array(old)), Value::Array(patch)) => {
                Value::Array(merge_list(old, patch, shape)?)
            }
            (_, other) => {
                let mut cleaned = other.clone();
                strip_nulls(&mut cleaned);
                cleaned
            }
        };
        original.insert(key.clone(), merged);
    }
    Ok(original)
}

fn merge_list(
    original: Vec<Value>,
    patch: &[Value],
    shape: Option<&Value>,
) -> Result<Vec<Value>, ApiError> {
    match list_strategy(shape) {
        ListStrategy::Replace => {
            let mut list = patch.to_vec();
            list.iter_mut().for_each(strip_nulls);
            Ok(list)
        }
        ListStrategy::Primitives => {
            let mut merged: Vec<Value> = Vec::new();
            for item in original.iter().chain(patch) {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
            let identity = |v: &Value| v.clone();
            Ok(order(merged, patch, &original, identity))
        }
        ListStrategy::MergeKey(key) => {
            let items = shape.and_then(|s| s.get("items"));
            let mut original = original;
            let mut plain = Vec::new();
            for item in patch {
                match item.get(DIRECTIVE).and_then(Value::as_str) {
                    Some("delete") => {
                        let wanted = item.get(&key);
                        original.retain(|o| o.get(&key) != wanted);
                    }
                    Some("replace") => {
                        original.clear();
                    }
                    Some(other) => {
                        return Err(ApiError::plain(format!(
                            "Unknown patch type {other} in list"
                        )))
                    }
                    None => plain.push(item.clone()),
                }
            }
            let mut merged = original.clone();
            for item in &plain {
                let wanted = item.get(&key);
                match merged.iter().position(|o| o.get(&key) == wanted) {
                    Some(i) => {
                        let old = match std::mem::take(&mut merged[i]) {
                            Value::Object(map) => map,
                            _ => Map::new(),
                        };
                        let patch = item.as_object().cloned().unwrap_or_default();
                        merged[i] = Value::Object(merge_map(old, &patch, items)?);
                    }
                    None => {
                        let mut added = item.clone();
                        strip_nulls(&mut added);
                        merged.push(added);
                    }
                }
            }
            let identity = |v: &Value| v.get(&key).cloned().unwrap_or(Value::Null);
            Ok(order(merged, &plain, &original, identity))
        }
    }
}

/// `normalizeElementOrder`: the merged items the patch names, in the patch's order, with the
/// items only the server had (in the server's order) inserted before the first patch item the
/// server had later; a patch item the server did not have goes before them.
fn order(
    merged: Vec<Value>,
    patch: &[Value],
    server: &[Value],
    identity: impl Fn(&Value) -> Value,
) -> Vec<Value> {
    let position =
        |list: &[Value], item: &Value| list.iter().position(|x| identity(x) == identity(item));
    let (mut from_patch, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| position(patch, item).is_some());
    from_patch.sort_by_key(|item| position(patch, item));
    let mut out = Vec::with_capacity(from_patch.len() + server_only.len());
    let (mut left, mut right) = (server_only.into_iter().peekable(), from_patch.into_iter());
    let mut next_right = right.next();
    loop {
        match (left.peek(), &next_right) {
            (None, None) => break,
            (Some(_), None) => out.extend(left.next()),
            (None, Some(_)) => {
                out.extend(next_right.take());
                next_right = right.next();
            }
            (Some(l), Some(r)) => {
                let server_first = matches!(
                    (position(server, l), position(server, r)),
                    (Some(li), Some(ri)) if li < ri
                );
                if server_first {
                    out.extend(left.next());
                } else {
                    out.extend(next_right.take());
                    next_right = right.next();
                }
            }
        }
    }
    out
}

fn strip_nulls(value: &mut Value) {
    if let Value::Object(map) = value {
        map.retain(|_, v| !v.is_null());
        for child in map.values_mut() {
            strip_nulls(child);
        }
    }
}
