//! JSON-shape helpers shared by parsing and translation: emulate the original's
//! marshal→parse round trip (nulls and empty arrays/objects vanish, `""`/`false` stay) and find
//! the first field where two documents differ (the "nothing dropped silently" guard).

use serde_json::{Map, Value};

/// Remove `null` members and members whose value is an empty array or object, recursively
/// (children first, so an object that only held empty members disappears too). Array
/// elements are kept; only their insides are cleaned.
pub(crate) fn strip_empty(value: &mut Value) {
    match value {
        Value::Object(map) => strip_object(map),
        Value::Array(items) => items.iter_mut().for_each(strip_empty),
        _ => {}
    }
}

fn strip_object(map: &mut Map<String, Value>) {
    map.retain(|_, member| {
        strip_empty(member);
        !is_empty(member)
    });
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// Append an object key to a field path (`storage` + `files` -> `storage.files`).
pub(crate) fn join_key(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Append an array index to a field path (`storage.files` + 1 -> `storage.files[1]`).
pub(crate) fn join_index(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// The path of the first place where `actual` does not carry what `expected` has (a missing
/// or changed member, or an extra one). `None` when they are equal.
pub(crate) fn first_difference(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, e_member) in e {
                let member_path = join_key(path, key);
                match a.get(key) {
                    // A missing object: name the first member inside it that went missing.
                    None if e_member.is_object() => {
                        let empty = Value::Object(Map::new());
                        return first_difference(e_member, &empty, &member_path)
                            .or(Some(member_path));
                    }
                    None => return Some(member_path),
                    Some(a_member) => {
                        if let Some(found) = first_difference(e_member, a_member, &member_path) {
                            return Some(found);
                        }
                    }
                }
            }
            a.keys()
                .find(|key| !e.contains_key(*key))
                .map(|key| join_key(path, key))
        }
        (Value::Array(e), Value::Array(a)) => {
            for (i, e_item) in e.iter().enumerate() {
                let item_path = join_index(path, i);
                match a.get(i) {
                    None => return Some(item_path),
                    Some(a_item) => {
                        if let Some(found) = first_difference(e_item, a_item, &item_path) {
                            return Some(found);
                        }
                    }
                }
            }
            (a.len() > e.len()).then(|| join_index(path, e.len()))
        }
        _ => (expected != actual).then(|| path.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strip_removes_null_and_empty_but_keeps_falsy_scalars() {
        let mut v = json!({
            "a": null, "b": [], "c": {}, "d": {"e": null, "f": []},
            "g": "", "h": false, "i": 0, "j": [{"k": null}], "l": {"m": {"n": {}}}
        });
        strip_empty(&mut v);
        assert_eq!(v, json!({"g": "", "h": false, "i": 0, "j": [{}]}));
    }

    #[test]
    fn first_difference_names_the_path() {
        let e = json!({"storage": {"luks": [{"name": "x", "cex": {"enabled": true}}]}});
        let a = json!({"storage": {"luks": [{"name": "x"}]}});
        assert_eq!(
            first_difference(&e, &a, "").as_deref(),
            Some("storage.luks[0].cex.enabled")
        );
        assert_eq!(first_difference(&e, &e, ""), None);
        assert_eq!(
            first_difference(&json!({"a": [1]}), &json!({"a": [1, 2]}), "").as_deref(),
            Some("a[1]")
        );
    }
}
