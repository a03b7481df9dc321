//! JSON patches (RFC 6902) as kube-apiserver applies them: with evanphx/json-patch v4, whose
//! readings of the RFC differ from a strict one, and clients depend on them.
//!
//! Owns the operations `add`, `remove`, `replace`, `move`, `copy` and `test` on a JSON value
//! and the v4 rules: a path is split at `/` and its first segment ignored whatever it is (so
//! `spec/fips` names the top-level `fips`); every segment but the last must exist; `replace`
//! and `test` of a missing object key act on a missing value (`replace` adds it, `test`
//! passes only against `null`); array indexes may be negative (counted from the end) for
//! `add` and `remove`; `-` appends. Errors are texts; the caller answers them with a 422.
//!
//! Also JSON merge patches (RFC 7386) as the same library applies them: besides `null`
//! deleting a key, the nulls inside a value the patch puts in place (a new key, a list, a value
//! replacing a non-object) are pruned, list items included.

use serde_json::{Map, Value};

/// Applies `operations` (already checked to be a list of objects) to `doc` in order.
pub fn apply(doc: &mut Value, operations: &[Map<String, Value>]) -> Result<(), String> {
    for op in operations {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("unknown");
        match kind {
            "add" => {
                let path = path_of(op, "path", "add operation failed to decode path")?;
                let value = op.get("value").cloned().unwrap_or(Value::Null);
                add(doc, &path, value)?;
            }
            "remove" => {
                let path = path_of(op, "path", "remove operation failed to decode path")?;
                remove(doc, &path)?;
            }
            "replace" => {
                let path = path_of(op, "path", "replace operation failed to decode path")?;
                let value = op.get("value").cloned().unwrap_or(Value::Null);
                replace(doc, &path, value)?;
            }
            "move" => {
                let from = path_of(op, "from", "move operation failed to decode from")?;
                let value = get(doc, &from)?.unwrap_or(Value::Null);
                remove(doc, &from)?;
                let path = path_of(op, "path", "move operation failed to decode path")?;
                add(doc, &path, value)?;
            }
            "copy" => {
                let from = path_of(op, "from", "copy operation failed to decode from")?;
                let value = get(doc, &from)?.unwrap_or(Value::Null);
                let path = path_of(op, "path", "copy operation failed to decode path")?;
                add(doc, &path, value)?;
            }
            "test" => {
                let path = path_of(op, "path", "test operation failed to decode path")?;
                let expected = op.get("value").cloned().unwrap_or(Value::Null);
                let actual = get(doc, &path)?.unwrap_or(Value::Null);
                if actual != expected {
                    return Err(format!("testing value {path} failed: test failed"));
                }
            }
            other => return Err(format!("Unexpected kind: {other}")),
        }
    }
    Ok(())
}

fn path_of(op: &Map<String, Value>, field: &str, missing: &str) -> Result<String, String> {
    match op.get(field) {
        Some(Value::String(path)) => Ok(path.clone()),
        _ => Err(format!("{missing}: missing value")),
    }
}

/// `~1` is `/`, `~0` is `~` (in that order, as v4 decodes them).
fn decode_key(key: &str) -> String {
    key.replace("~1", "/").replace("~0", "~")
}

/// `findObject`: the container the path's last segment lives in, and that segment. `None`
/// when a path has no `/` or a segment on the way is missing or not a container.
fn container<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let segments: Vec<&str> = path.split('/').collect();
    if segments.len() < 2 {
        return None;
    }
    let mut current = doc;
    for part in &segments[1..segments.len() - 1] {
        let key = decode_key(part);
        current = match current {
            Value::Object(map) => map.get_mut(&key)?,
            Value::Array(items) => {
                let index: usize = key.parse().ok()?;
                items.get_mut(index)?
            }
            _ => return None,
        };
        if !current.is_object() && !current.is_array() {
            return None;
        }
    }
    Some((current, decode_key(segments[segments.len() - 1])))
}

fn missing_path(operation: &str, path: &str) -> String {
    format!("{operation} operation does not apply: doc is missing path: \"{path}\": missing value")
}

/// The value at `path` (`None`: a missing object key, which v4 does not treat as an error).
fn get(doc: &mut Value, path: &str) -> Result<Option<Value>, String> {
    let (parent, key) = container(doc, path).ok_or_else(|| missing_path("get", path))?;
    match parent {
        Value::Object(map) => Ok(map.get(&key).cloned()),
        Value::Array(items) => {
            let index = parse_index(&key)?;
            usize::try_from(index)
                .ok()
                .and_then(|i| items.get(i))
                .cloned()
                .map(Some)
                .ok_or_else(|| invalid_index(index))
        }
        _ => Err(missing_path("get", path)),
    }
}

fn parse_index(key: &str) -> Result<i64, String> {
    key.parse()
        .map_err(|_| format!("strconv.Atoi: parsing {key:?}: invalid syntax"))
}

fn invalid_index(index: i64) -> String {
    format!("Unable to access invalid index: {index}: invalid index referenced")
}

/// An index of `len` items, negative ones counted from the end (v4's `SupportNegativeIndices`).
fn resolve(index: i64, len: usize) -> Result<usize, String> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let resolved = if index < 0 { index + len } else { index };
    if index >= len || resolved < 0 {
        return Err(invalid_index(index));
    }
    usize::try_from(resolved).map_err(|_| invalid_index(index))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let (parent, key) = container(doc, path).ok_or_else(|| missing_path("add", path))?;
    match parent {
        Value::Object(map) => {
            map.insert(key, value);
            Ok(())
        }
        Value::Array(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            let index = parse_index(&key)
                .map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
            // An insert may address one past the end.
            let at = resolve(index, items.len() + 1)?;
            items.insert(at, value);
            Ok(())
        }
        _ => Err(missing_path("add", path)),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<(), String> {
    let (parent, key) = container(doc, path).ok_or_else(|| missing_path("remove", path))?;
    match parent {
        Value::Object(map) => map.remove(&key).map(|_| ()).ok_or_else(|| {
            format!("error in remove for path: '{path}': Unable to remove nonexistent key: {key}: missing value")
        }),
        Value::Array(items) => {
            let index = parse_index(&key)?;
            let at = resolve(index, items.len())?;
            items.remove(at);
            Ok(())
        }
        _ => Err(missing_path("remove", path)),
    }
}

fn replace(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let (parent, key) = container(doc, path).ok_or_else(|| missing_path("replace", path))?;
    match parent {
        Value::Object(map) => {
            map.insert(key, value);
            Ok(())
        }
        Value::Array(items) => {
            let index = parse_index(&key)?;
            let slot = usize::try_from(index)
                .ok()
                .and_then(|i| items.get_mut(i))
                .ok_or_else(|| {
                    format!("replace operation does not apply: doc is missing key: {path}: missing value")
                })?;
            *slot = value;
            Ok(())
        }
        _ => Err(missing_path("replace", path)),
    }
}

/// Applies the JSON merge patch `patch` to `doc` (`MergePatch`, with its null pruning).
pub fn merge_patch(doc: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        let mut replaced = patch.clone();
        prune_nulls(&mut replaced);
        *doc = replaced;
        return;
    };
    if !doc.is_object() {
        let mut replaced = Value::Object(patch.clone());
        prune_nulls(&mut replaced);
        *doc = replaced;
        return;
    }
    let Value::Object(target) = doc else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
            continue;
        }
        match target.get_mut(key) {
            None => {
                let mut added = value.clone();
                prune_nulls(&mut added);
                target.insert(key.clone(), added);
            }
            // `merge`: onto an object, an object patch merges and anything else replaces as
            // sent; onto anything else, the patch replaces with its nulls pruned.
            Some(current @ Value::Object(_)) if value.is_object() => merge_patch(current, value),
            Some(current @ Value::Object(_)) => *current = value.clone(),
            Some(current) => {
                let mut replaced = value.clone();
                prune_nulls(&mut replaced);
                *current = replaced;
            }
        }
    }
}

/// `pruneNulls`: drops null members of objects and null items of lists, at any depth.
fn prune_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => {
            items.retain(|v| !v.is_null());
            items.iter_mut().for_each(prune_nulls);
        }
        _ => {}
    }
}
