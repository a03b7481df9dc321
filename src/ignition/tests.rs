//! Engine-level unit tests: the public functions together (parse → translate → serialize).

use serde_json::{json, Value};

use super::*;

fn parse(v: Value) -> Config {
    parse_config(Some(&v)).unwrap()
}

#[test]
fn empty_config_serializes_per_version() {
    for v in SpecVersion::ALL {
        assert_eq!(
            to_value_as(&empty_config(), v).unwrap(),
            json!({"ignition": {"version": v.as_str()}}),
            "{v}"
        );
    }
}

#[test]
fn missing_or_null_config_is_empty() {
    assert_eq!(parse_config(None).unwrap(), empty_config());
    assert_eq!(parse_config(Some(&Value::Null)).unwrap(), empty_config());
    assert_eq!(parse_config_slice(b"").unwrap(), empty_config());
}

#[test]
fn none_scalars_are_not_serialized_as_null() {
    let c = parse(
        json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [
        {"path": "/etc/a", "contents": {"source": "data:,a"}, "mode": 420}]}}),
    );
    let bytes = serialize_as(&c, SpecVersion::V3_5).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert!(!text.contains("null"), "{text}");
    assert_eq!(
        text,
        r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"},"mode":420}]}}"#
    );
}
