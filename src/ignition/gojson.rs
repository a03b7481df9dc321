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
        Value::Array(items) => write_array(out, items.iter(), |out, item| {
            write_value(out, item, escaping, keys);
        }),
        Value::Object(map) => {
            write_object(out, map.iter().collect(), escaping, keys, |out, member| {
                write_value(out, member, escaping, keys);
            })
        }
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => write_str(out, text, escaping),
    }
}

/// `[item,...]`, each item written by `write_item`.
fn write_array<I>(
    out: &mut Vec<u8>,
    items: impl Iterator<Item = I>,
    mut write_item: impl FnMut(&mut Vec<u8>, I),
) {
    out.push(b'[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_item(out, item);
    }
    out.push(b']');
}

/// `{"key":member,...}` in `keys`' order, each member written by `write_member`.
fn write_object<M>(
    out: &mut Vec<u8>,
    mut members: Vec<(&String, M)>,
    escaping: Escaping,
    keys: Keys,
    mut write_member: impl FnMut(&mut Vec<u8>, M),
) {
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
        write_member(out, member);
    }
    out.push(b'}');
}

/// One node of a value that the caller writes instead of the node's own JSON: see
/// [`drain_to_vec`].
pub struct Splice<'a> {
    /// The node, compared by address (found in the value after its last reordering).
    pub at: *const Value,
    /// How many bytes `write` appends (room is made for them up front).
    pub len: usize,
    /// Appends the node's JSON.
    pub write: &'a mut dyn FnMut(&mut Vec<u8>),
}

/// `value` as compact JSON, as [`to_vec`] writes it but for `splice`'s node, whose bytes
/// `splice.write` appends in its place; `value` is left `null`. `None` when the node is not in
/// `value` (nothing took its place: the output would be wrong). Every string is freed as soon
/// as it is written, so the output grows while the value shrinks: the two are never both
/// whole, and the spliced bytes (a render's MachineConfig content, megabytes) never exist on
/// their own. Together they were most of a render's peak beside the bodies already cached
/// (benches/README.md, "Seventh pass").
pub fn drain_to_vec(
    value: &mut Value,
    escaping: Escaping,
    keys: Keys,
    splice: Splice<'_>,
) -> Option<Vec<u8>> {
    let unescaped = unescaped_len(value) + splice.len;
    let mut out = Vec::with_capacity(unescaped + unescaped / 64 + 64);
    let mut splice = (splice, false);
    write_taking(&mut out, value, escaping, keys, &mut splice);
    splice.1.then_some(out)
}

/// Appends `value` (or the splice, at its node, noting that it was written) and leaves `null`
/// in its place.
fn write_taking(
    out: &mut Vec<u8>,
    value: &mut Value,
    escaping: Escaping,
    keys: Keys,
    splice: &mut (Splice<'_>, bool),
) {
    if std::ptr::eq(value, splice.0.at) {
        (splice.0.write)(out);
        splice.1 = true;
    } else {
        match &mut *value {
            Value::Array(items) => write_array(out, items.iter_mut(), |out, item| {
                write_taking(out, item, escaping, keys, splice);
            }),
            Value::Object(map) => {
                write_object(
                    out,
                    map.iter_mut().collect(),
                    escaping,
                    keys,
                    |out, member| {
                        write_taking(out, member, escaping, keys, splice);
                    },
                );
            }
            scalar => write_value(out, &*scalar, escaping, keys),
        }
    }
    *value = Value::Null;
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
    indent_into(src, indent, &mut |bytes| out.extend_from_slice(bytes));
    out
}

/// [`indent`], handing the output to `out` piece by piece instead of collecting it (a render
/// escapes the indented MachineConfig content straight into the body).
pub fn indent_into(src: &[u8], indent: &str, out: &mut impl FnMut(&[u8])) {
    let newline = |out: &mut dyn FnMut(&[u8]), depth: usize| {
        out(b"\n");
        for _ in 0..depth {
            out(indent.as_bytes());
        }
    };
    let (mut depth, mut need_indent) = (0usize, false);
    let (mut in_string, mut escaped) = (false, false);
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        if in_string {
            let taken = if escaped {
                escaped = false;
                1
            } else if c == b'\\' {
                escaped = true;
                1
            } else if c == b'"' {
                in_string = false;
                1
            } else {
                // A run of plain string bytes at once.
                src[i..]
                    .iter()
                    .position(|&b| b == b'\\' || b == b'"')
                    .unwrap_or(src.len() - i)
            };
            out(&src[i..i + taken]);
            i += taken;
            continue;
        }
        if need_indent && c != b'}' && c != b']' {
            need_indent = false;
            depth += 1;
            newline(out, depth);
        }
        match c {
            b'{' | b'[' => {
                // Delayed, so that an empty object or array stays `{}` or `[]`.
                need_indent = true;
                out(&[c]);
            }
            b',' => {
                out(b",");
                newline(out, depth);
            }
            b':' => out(b": "),
            b'}' | b']' => {
                if need_indent {
                    need_indent = false;
                } else {
                    depth = depth.saturating_sub(1);
                    newline(out, depth);
                }
                out(&[c]);
            }
            b'"' => {
                in_string = true;
                out(b"\"");
            }
            _ => out(&[c]),
        }
        i += 1;
    }
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

    /// `value` drained with `bytes` spliced in at the node `at`.
    fn spliced(
        value: &mut Value,
        at: *const Value,
        bytes: &[u8],
        escaping: Escaping,
        keys: Keys,
    ) -> Option<Vec<u8>> {
        let mut write = |out: &mut Vec<u8>| out.extend_from_slice(bytes);
        let splice = Splice {
            at,
            len: bytes.len(),
            write: &mut write,
        };
        drain_to_vec(value, escaping, keys, splice)
    }

    #[test]
    fn a_spliced_node_is_written_by_the_caller_and_the_rest_as_to_vec_writes_it() {
        let original = json!({"b": {"z": "<x>", "a": [1.5, "stand-in", null]}, "a": true});
        for keys in [Keys::AsGiven, Keys::Sorted] {
            let mut value = original.clone();
            let at: *const Value = value.pointer("/b/a/1").unwrap();
            let out = spliced(&mut value, at, br#""spliced""#, Escaping::Clarketm, keys).unwrap();
            let mut expected = original.clone();
            expected["b"]["a"][1] = json!("spliced");
            assert_eq!(out, to_vec(&expected, Escaping::Clarketm, keys));
            assert_eq!(value, Value::Null);
            // The whole value spliced: its root is the node.
            let mut value = original.clone();
            let at: *const Value = &value;
            assert_eq!(
                spliced(&mut value, at, b"0", Escaping::Go122, keys).unwrap(),
                b"0"
            );
            // A node that is not in the value: no output, rather than the value without it.
            let elsewhere = json!("stand-in");
            let mut value = original.clone();
            assert_eq!(
                spliced(&mut value, &elsewhere, b"0", Escaping::Clarketm, keys),
                None
            );
        }
    }

    #[test]
    fn indent_is_go_json_indent() {
        // Go: json.Indent(&b, []byte(src), "", "    ").
        let src = br#"{"a":{},"b":[],"c":[1,{"d":"x,:{}[]\"y"}],"e":{"f":null}}"#;
        let expected = "{\n    \"a\": {},\n    \"b\": [],\n    \"c\": [\n        1,\n        {\n            \"d\": \"x,:{}[]\\\"y\"\n        }\n    ],\n    \"e\": {\n        \"f\": null\n    }\n}";
        assert_eq!(String::from_utf8(indent(src, "    ")).unwrap(), expected);
        assert_eq!(indent(b"{}", "    "), b"{}");
        assert_eq!(indent(br#""\\""#, "  "), br#""\\""#);
        // In pieces, as a render escapes it: the same bytes.
        let mut pieces = Vec::new();
        indent_into(src, "    ", &mut |piece| pieces.push(piece.to_vec()));
        assert!(pieces.len() > 1);
        assert_eq!(pieces.concat(), expected.as_bytes());
        // In pieces, as a render escapes it: the same bytes.
        let mut pieces = Vec::new();
        indent_into(src, "    ", &mut |piece| pieces.push(piece.to_vec()));
        assert!(pieces.len() > 1);
        assert_eq!(pieces.concat(), expected.as_bytes());
    }
}
