//! The bytes Go's JSON encoders write, for answers that must equal the original's byte for byte.
//!
//! The original marshals what it serves with `github.com/clarketm/json` (v1.17.1, a fork of
//! Go 1.10's `encoding/json` that also omits empty structs; `pkg/server/api.go`,
//! `pkg/server/server.go`), and passes through raw JSON that Go's standard `encoding/json` of
//! Go 1.22 or newer wrote (a MachineConfig's `spec.config` and `managedFields[].fieldsV1` as the
//! kube-apiserver sent them, or as `ghodss/yaml` converted the bootstrap YAML). What differs
//! from `serde_json`'s output, and is reproduced here:
//!
//! - `<`, `>` and `&` in strings are `\u003c`, `\u003e`, `\u0026`, and U+2028 and U+2029 are
//!   `\u2028` and `\u2029` (both encoders escape HTML by default; clarketm's `compact` escapes
//!   them again in the raw JSON it passes through, `clarketm/json/indent.go`);
//! - control bytes other than `\n`, `\r` and `\t` are `\u00XX` in clarketm's encoder
//!   ([`Escaping::Clarketm`]); Go 1.22's `encoding/json` writes `\b` and `\f` short
//!   ([`Escaping::Go122`], `encoding/json/encode.go` `appendString`), as `serde_json` does;
//! - a float is written as Go's `strconv.FormatFloat(f, 'f' or 'e', -1, 64)` with the exponent
//!   cleaned up as `encoding/json` does (`1e-07`, `1e+21`), not as `serde_json` does (`1e-7`,
//!   `1e21`, `1.0`);
//! - `MarshalIndent` is `Marshal` followed by `Indent` ([`indent`]): `{}` and `[]` stay empty on
//!   one line, `": "` after a key.
//!
//! Object keys are written in the order the value holds them (`serde_json` keeps insertion
//! order in this crate), or sorted as Go writes a map ([`Keys::Sorted`]). Pure; no I/O.

use serde_json::{Number, Value};

/// Which Go encoder's string escaping to reproduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Escaping {
    /// `github.com/clarketm/json`, the original's own encoder: every control byte other than
    /// `\n`, `\r`, `\t` as `\u00XX`.
    Clarketm,
    /// Go 1.22 and newer `encoding/json` (the kube-apiserver, `ghodss/yaml`): `\b` and `\f` short.
    Go122,
}

/// The order object keys are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// As the value holds them (a Go struct's order, when the value was built in it).
    AsGiven,
    /// Sorted by their bytes, at every depth, as Go's `encoding/json` writes a map.
    Sorted,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `value` as compact JSON.
pub fn to_vec(value: &Value, escaping: Escaping, keys: Keys) -> Vec<u8> {
    // Room for all of it from the start: grown by doubling, a payload of megabytes would be
    // copied a few times and, at each copy, held twice (a render's peak, benches/README.md).
    let unescaped = unescaped_len(value);
    let mut out = Vec::with_capacity(unescaped + unescaped / 64 + 64);
    write_value(&mut out, value, escaping, keys);
    out
}

/// The length of `value` as compact JSON before any escape (an escape only adds to it).
fn unescaped_len(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(number) => number.to_string().len(),
        Value::String(text) => text.len() + 2,
        // Brackets, commas between, items.
        Value::Array(items) => {
            2 + items.len().saturating_sub(1) + items.iter().map(unescaped_len).sum::<usize>()
        }
        // Braces, commas between, quoted keys and colons, members.
        Value::Object(members) => {
            2 + members.len().saturating_sub(1)
                + members
                    .iter()
                    .map(|(key, member)| key.len() + 3 + unescaped_len(member))
                    .sum::<usize>()
        }
    }
}

/// Appends `value` as compact JSON.
pub fn write_value(out: &mut Vec<u8>, value: &Value, escaping: Escaping, keys: Keys) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => write_str(out, text, escaping),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item, escaping, keys);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            if keys == Keys::Sorted {
                members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            }
            out.push(b'{');
            for (i, (key, member)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key, escaping);
                out.push(b':');
                write_value(out, member, escaping, keys);
            }
            out.push(b'}');
        }
    }
}

/// Appends `text` as a JSON string, escaped as the Go encoder `escaping` names escapes it.
pub fn write_str(out: &mut Vec<u8>, text: &str, escaping: Escaping) {
    out.push(b'"');
    let bytes = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        let b = bytes[i];
        // U+2028 and U+2029 are E2 80 A8 and E2 80 A9 (`text` is valid UTF-8).
        let separator = b == 0xe2
            && bytes.get(i + 1) == Some(&0x80)
            && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9));
        let short: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 if escaping == Escaping::Go122 => Some(b"\\b"),
            0x0c if escaping == Escaping::Go122 => Some(b"\\f"),
            _ => None,
        };
        if short.is_none() && !separator && b >= 0x20 && !matches!(b, b'<' | b'>' | b'&') {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        if let Some(short) = short {
            out.extend_from_slice(short);
            i += 1;
        } else if separator {
            out.extend_from_slice(b"\\u202");
            out.push(HEX[usize::from(bytes[i + 2] & 0xf)]);
            i += 3;
        } else {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
            i += 1;
        }
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends a number as Go writes it: integers as they are, floats as `encoding/json` formats a
/// `float64` (shortest representation; exponent form below 1e-6 and from 1e21 on).
pub fn write_number(out: &mut Vec<u8>, number: &Number) {
    if let Some(n) = number.as_u64() {
        out.extend_from_slice(n.to_string().as_bytes());
    } else if let Some(n) = number.as_i64() {
        out.extend_from_slice(n.to_string().as_bytes());
    } else if let Some(f) = number.as_f64() {
        out.extend_from_slice(go_float(f).as_bytes());
    }
}

/// `encoding/json`'s `floatEncoder` for a finite `float64` (JSON has no other floats).
fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Shortest digits in exponent form: Go's 'e' format writes the exponent with a sign and
        // at least two digits, then `encoding/json` cleans `e-07` up to `e-7` (not `e+21`).
        let text = format!("{f:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        match exponent.strip_prefix('-') {
            Some(digits) => format!("{mantissa}e-{digits}"),
            None => format!("{mantissa}e+{exponent:0>2}"),
        }
    } else {
        // Shortest digits, plain: Rust's `Display` for `f64` (`1` for 1.0), as Go's 'f' format
        // with precision -1.
        format!("{f}")
    }
}

/// Go's `json.Indent(dst, src, "", indent)` of compact JSON `src` (as [`write_value`] writes
/// it): a newline and `indent` per depth before each member and element and before a closing
/// bracket, `": "` after a key, and `{}`/`[]` kept on one line when empty.
pub fn indent(src: &[u8], indent: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(src.len() + src.len() / 4);
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        for _ in 0..depth {
            out.extend_from_slice(indent.as_bytes());
        }
    };
    let (mut depth, mut need_indent) = (0usize, false);
    let (mut in_string, mut escaped) = (false, false);
    for &c in src {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            continue;
        }
        if need_indent && c != b'}' && c != b']' {
            need_indent = false;
            depth += 1;
            newline(&mut out, depth);
        }
        match c {
            b'{' | b'[' => {
                // Delayed, so that an empty object or array stays `{}` or `[]`.
                need_indent = true;
                out.push(c);
            }
            b',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            b'}' | b']' => {
                if need_indent {
                    need_indent = false;
                } else {
                    depth = depth.saturating_sub(1);
                    newline(&mut out, depth);
                }
                out.push(c);
            }
            b'"' => {
                in_string = true;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn string(text: &str, escaping: Escaping) -> String {
        let mut out = Vec::new();
        write_str(&mut out, text, escaping);
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn the_room_made_for_a_value_is_its_length_without_escapes() {
        let value = json!({"a": [1, -2.5, true, false, null, "x"], "bc": {"d": "e f"}, "g": []});
        let written = to_vec(&value, Escaping::Clarketm, Keys::AsGiven);
        assert_eq!(unescaped_len(&value), written.len());
        let escaped = json!({"a": "<&>"});
        assert!(
            unescaped_len(&escaped) < to_vec(&escaped, Escaping::Clarketm, Keys::AsGiven).len()
        );
    }

    #[test]
    fn strings_are_escaped_as_go_escapes_them() {
        // Go: json.Marshal("a<b>&c\"d\\e\nf\rg\th") with HTML escaping (the default).
        assert_eq!(
            string("a<b>&c\"d\\e\nf\rg\th", Escaping::Clarketm),
            r#""a\u003cb\u003e\u0026c\"d\\e\nf\rg\th""#
        );
        // clarketm (Go 1.10's encoder) has no short \b and \f; Go 1.22's has.
        assert_eq!(
            string("\u{8}\u{c}\u{1}\u{1f}", Escaping::Clarketm),
            r#""\u0008\u000c\u0001\u001f""#
        );
        assert_eq!(
            string("\u{8}\u{c}\u{1}\u{1f}", Escaping::Go122),
            r#""\b\f\u0001\u001f""#
        );
        // U+2028 and U+2029 always; other non-ASCII and DEL as they are.
        assert_eq!(
            string(
                "x\u{2028}y\u{2029}z é\u{7f}\u{2027}\u{202a}",
                Escaping::Go122
            ),
            "\"x\\u2028y\\u2029z é\u{7f}\u{2027}\u{202a}\""
        );
        assert_eq!(string("", Escaping::Clarketm), r#""""#);
        assert_eq!(string("\u{2028}", Escaping::Clarketm), r#""\u2028""#);
    }

    #[test]
    fn numbers_are_written_as_go_writes_them() {
        let written = |value: Value| {
            String::from_utf8(to_vec(&value, Escaping::Go122, Keys::AsGiven)).unwrap()
        };
        assert_eq!(
            written(json!([420, -1, 0, u64::MAX])),
            "[420,-1,0,18446744073709551615]"
        );
        // Go 1.26: json.Marshal([]float64{1, 1.5, 1e-6, 1e-7, 1e21, 1.2345678901234568e20,
        // -2.5e-8, 1e-300, 1e300}).
        assert_eq!(
            written(json!([
                1.0,
                1.5,
                0.000001,
                0.0000001,
                1e21,
                1.2345678901234568e20,
                -2.5e-8,
                1e-300,
                1e300
            ])),
            "[1,1.5,0.000001,1e-7,1e+21,123456789012345680000,-2.5e-8,1e-300,1e+300]"
        );
    }

    #[test]
    fn keys_as_given_or_sorted_as_a_go_map() {
        let value = json!({"b": {"z": 1, "a": 2}, "a": [true, null, "x"]});
        assert_eq!(
            to_vec(&value, Escaping::Clarketm, Keys::AsGiven),
            br#"{"b":{"z":1,"a":2},"a":[true,null,"x"]}"#
        );
        assert_eq!(
            to_vec(&value, Escaping::Clarketm, Keys::Sorted),
            br#"{"a":[true,null,"x"],"b":{"a":2,"z":1}}"#
        );
    }

    #[test]
    fn indent_is_go_json_indent() {
        // Go: json.Indent(&b, []byte(src), "", "    ").
        let src = br#"{"a":{},"b":[],"c":[1,{"d":"x,:{}[]\"y"}],"e":{"f":null}}"#;
        let expected = "{\n    \"a\": {},\n    \"b\": [],\n    \"c\": [\n        1,\n        {\n            \"d\": \"x,:{}[]\\\"y\"\n        }\n    ],\n    \"e\": {\n        \"f\": null\n    }\n}";
        assert_eq!(String::from_utf8(indent(src, "    ")).unwrap(), expected);
        assert_eq!(indent(b"{}", "    "), b"{}");
        assert_eq!(indent(br#""\\""#, "  "), br#""\\""#);
    }
}
