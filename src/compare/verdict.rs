//! How the original's answer to one request compares with this server's: the verdict of a
//! row. Pure.
//!
//! In order: both statuses equal and both bodies the same bytes is `identical`; the same
//! status and bodies that are equal as JSON is `same-json` (with the first byte that differs);
//! a difference a documented deviation explains ([`super::deviations`]) is `deviation`, named;
//! any other status difference is `status`, any other body difference `different`, with the
//! first JSON path whose values differ. A `data:` URL (a served file) is looked into: a
//! difference inside the MachineConfig a node is served shows as its path inside the file.

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use super::deviations::{self, Context, Deviation};
use super::local::Local;
use crate::ignition::dataurl;

/// The original's answer to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    pub status: u16,
    pub body: Bytes,
}

/// The verdict of one row; in JSON `{"verdict": "different", "detail": {...}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "detail", rename_all = "kebab-case")]
pub enum Verdict {
    /// The same status and the same bytes.
    Identical,
    /// The same status, bodies equal as JSON but not byte for byte.
    SameJson {
        /// The first byte offset where the bodies differ.
        offset: usize,
        /// The bytes around it, ours and the original's.
        ours: String,
        theirs: String,
    },
    /// A difference a documented deviation explains (docs/compatibility.md).
    Deviation { deviations: Vec<&'static str> },
    /// Different statuses, no documented deviation explaining them.
    Status { ours: u16, theirs: u16 },
    /// Different bodies: the first JSON path whose values differ, both values shortened.
    Different {
        path: String,
        ours: String,
        theirs: String,
    },
}

impl Verdict {
    /// The verdict's name, as rows print it.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Identical => "identical",
            Verdict::SameJson { .. } => "same-json",
            Verdict::Deviation { .. } => "deviation",
            Verdict::Status { .. } => "status",
            Verdict::Different { .. } => "different",
        }
    }

    /// Whether the row stops the switch (non-zero exit status).
    pub fn fails(&self) -> bool {
        matches!(self, Verdict::Status { .. } | Verdict::Different { .. })
    }
}

/// How long a value or excerpt may be in a row.
pub const EXCERPT_CHARS: usize = 60;

/// The verdict of `local` against `remote`, `context` telling what the deviations need.
pub fn classify(local: &Local, remote: &Remote, context: &Context<'_>) -> Verdict {
    if local.status != remote.status {
        return match deviations::of_status(local, remote.status, context) {
            Some(deviation) => named(&[deviation]),
            None => Verdict::Status {
                ours: local.status,
                theirs: remote.status,
            },
        };
    }
    if local.body == remote.body {
        return Verdict::Identical;
    }
    let parsed = (
        serde_json::from_slice::<Value>(&local.body),
        serde_json::from_slice::<Value>(&remote.body),
    );
    let (Ok(ours), Ok(theirs)) = parsed else {
        let offset = first_byte_difference(&local.body, &remote.body);
        return Verdict::Different {
            path: format!("(the body is not JSON; first difference at byte {offset})"),
            ours: byte_excerpt(&local.body, offset),
            theirs: byte_excerpt(&remote.body, offset),
        };
    };
    if ours == theirs {
        let offset = first_byte_difference(&local.body, &remote.body);
        return Verdict::SameJson {
            offset,
            ours: byte_excerpt(&local.body, offset),
            theirs: byte_excerpt(&remote.body, offset),
        };
    }
    let explained = deviations::of_body(&ours, &theirs, local, context);
    if !explained.is_empty() {
        return named(&explained);
    }
    let (path, ours, theirs) = first_difference(&ours, &theirs, "")
        .unwrap_or_else(|| ("(document)".to_string(), String::new(), String::new()));
    Verdict::Different { path, ours, theirs }
}

fn named(deviations: &[&'static Deviation]) -> Verdict {
    Verdict::Deviation {
        deviations: deviations.iter().map(|d| d.name).collect(),
    }
}

/// The first offset where `a` and `b` differ (the shorter one's length when one is a prefix).
pub fn first_byte_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

/// The bytes of `body` around `offset`, as text (invalid UTF-8 replaced).
fn byte_excerpt(body: &[u8], offset: usize) -> String {
    let start = offset.saturating_sub(EXCERPT_CHARS / 3);
    let end = (offset + EXCERPT_CHARS * 2 / 3).min(body.len());
    let text = String::from_utf8_lossy(body.get(start..end).unwrap_or_default());
    let mut excerpt = String::new();
    if start > 0 {
        excerpt.push('…');
    }
    excerpt.push_str(&text);
    if end < body.len() {
        excerpt.push('…');
    }
    excerpt
}

/// The first path (`storage.files[3].contents.source`) where `a` and `b` differ, with both
/// values shortened; `None` when they are equal. Members are visited in `a`'s order, then
/// those only `b` has; a `data:` URL both sides hold is decoded and, when both decode to JSON,
/// looked into (`storage.files[40].contents.source:spec.osImageURL`).
pub fn first_difference(a: &Value, b: &Value, path: &str) -> Option<(String, String, String)> {
    if a == b {
        return None;
    }
    let member = |key: &str| {
        if path.is_empty() || path.ends_with(':') {
            format!("{path}{key}")
        } else {
            format!("{path}.{key}")
        }
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (key, value) in x {
                match y.get(key) {
                    Some(other) => {
                        if let Some(found) = first_difference(value, other, &member(key)) {
                            return Some(found);
                        }
                    }
                    None => return Some((member(key), shorten(value), "(absent)".into())),
                }
            }
            let (key, value) = y.iter().find(|(key, _)| !x.contains_key(*key))?;
            Some((member(key), "(absent)".into(), shorten(value)))
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (value, other)) in x.iter().zip(y).enumerate() {
                if let Some(found) = first_difference(value, other, &format!("{path}[{i}]")) {
                    return Some(found);
                }
            }
            let i = x.len().min(y.len());
            let at = format!("{path}[{i}]");
            match (x.get(i), y.get(i)) {
                (Some(value), None) => Some((at, shorten(value), "(absent)".into())),
                (None, Some(value)) => Some((at, "(absent)".into(), shorten(value))),
                _ => None,
            }
        }
        (Value::String(x), Value::String(y)) => Some(string_difference(x, y, path)),
        _ => Some((path_or_document(path), shorten(a), shorten(b))),
    }
}

fn path_or_document(path: &str) -> String {
    if path.is_empty() {
        "(document)".to_string()
    } else {
        path.to_string()
    }
}

/// Two different strings: inside them when both are `data:` URLs, else around the first
/// character that differs.
fn string_difference(x: &str, y: &str, path: &str) -> (String, String, String) {
    if let (Ok(a), Ok(b)) = (data(x), data(y)) {
        let parsed = (
            serde_json::from_slice::<Value>(&a),
            serde_json::from_slice::<Value>(&b),
        );
        if let (Ok(a), Ok(b)) = parsed {
            if let Some(found) = first_difference(&a, &b, &format!("{path}:")) {
                return found;
            }
        }
        let at = first_byte_difference(&a, &b);
        return (
            format!("{path} (decoded, byte {at})"),
            byte_excerpt(&a, at),
            byte_excerpt(&b, at),
        );
    }
    let at = first_byte_difference(x.as_bytes(), y.as_bytes());
    (
        path_or_document(path),
        quoted_excerpt(x, at),
        quoted_excerpt(y, at),
    )
}

fn data(text: &str) -> Result<Vec<u8>, ()> {
    if !text.starts_with("data:") {
        return Err(());
    }
    dataurl::decode(text).map_err(|_| ())
}

/// `value` as JSON, at most [`EXCERPT_CHARS`] characters.
pub fn shorten(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= EXCERPT_CHARS {
        return text;
    }
    let mut short: String = text.chars().take(EXCERPT_CHARS - 1).collect();
    short.push('…');
    short
}

/// A string as JSON, around byte `at` (where it differs from the other side).
fn quoted_excerpt(text: &str, at: usize) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    if quoted.chars().count() <= EXCERPT_CHARS {
        return quoted;
    }
    // The offset in the quoted text is at least `at` + 1 (escapes only lengthen it).
    byte_excerpt(quoted.as_bytes(), (at + 1).min(quoted.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::asks::Ask;
    use serde_json::json;

    fn local(status: u16, body: &str) -> Local {
        Local {
            status,
            body: Bytes::from(body.to_string()),
            served: None,
            error: None,
            layered: None,
        }
    }

    fn remote(status: u16, body: &str) -> Remote {
        Remote {
            status,
            body: Bytes::from(body.to_string()),
        }
    }

    fn verdict(ours: &Local, theirs: &Remote) -> Verdict {
        classify(ours, theirs, &Context::new(Ask::NoAccept, None))
    }

    #[test]
    fn same_bytes_are_identical_whatever_the_status() {
        assert_eq!(
            verdict(&local(200, "{}"), &remote(200, "{}")),
            Verdict::Identical
        );
        assert_eq!(
            verdict(&local(404, ""), &remote(404, "")),
            Verdict::Identical
        );
        assert!(!Verdict::Identical.fails());
    }

    #[test]
    fn equal_json_in_other_bytes_is_same_json_at_the_first_byte() {
        let v = verdict(
            &local(200, r#"{"a":"<","b":1}"#),
            &remote(200, r#"{"a":"\u003c","b":1}"#),
        );
        assert_eq!(
            v,
            Verdict::SameJson {
                offset: 6,
                ours: r#"{"a":"<","b":1}"#.into(),
                theirs: r#"{"a":"\u003c","b":1}"#.into(),
            }
        );
        assert!(!v.fails());
    }

    #[test]
    fn a_status_difference_is_status() {
        let v = verdict(&local(200, "{}"), &remote(500, ""));
        assert_eq!(
            v,
            Verdict::Status {
                ours: 200,
                theirs: 500
            }
        );
        assert!(v.fails());
    }

    #[test]
    fn a_body_difference_names_the_first_json_path() {
        let v = verdict(
            &local(
                200,
                r#"{"storage":{"files":[{"path":"/a","mode":420},{"path":"/b"}]}}"#,
            ),
            &remote(
                200,
                r#"{"storage":{"files":[{"path":"/a","mode":384},{"path":"/b"}]}}"#,
            ),
        );
        assert_eq!(
            v,
            Verdict::Different {
                path: "storage.files[0].mode".into(),
                ours: "420".into(),
                theirs: "384".into()
            }
        );
        assert!(v.fails());
        // Absent on one side, and a longer list.
        assert_eq!(
            first_difference(&json!({"a": 1}), &json!({"a": 1, "b": [2]}), ""),
            Some(("b".into(), "(absent)".into(), "[2]".into()))
        );
        assert_eq!(
            first_difference(&json!([1, 2]), &json!([1]), "x"),
            Some(("x[1]".into(), "2".into(), "(absent)".into()))
        );
        assert_eq!(
            first_difference(&json!(1), &json!("1"), ""),
            Some(("(document)".into(), "1".into(), "\"1\"".into()))
        );
    }

    #[test]
    fn a_difference_inside_a_served_file_is_named_inside_it() {
        let file = |image: &str| {
            let mc = json!({"spec": {"osImageURL": image, "config": {}}}).to_string();
            json!({"storage": {"files": [{"contents": {"source": dataurl::encode(mc.as_bytes())}}]}})
        };
        assert_eq!(
            first_difference(&file("quay.io/a"), &file("quay.io/b"), ""),
            Some((
                "storage.files[0].contents.source:spec.osImageURL".into(),
                "\"quay.io/a\"".into(),
                "\"quay.io/b\"".into()
            ))
        );
        // Not JSON inside: the decoded bytes around the first difference.
        let text = |t: &str| json!({"s": dataurl::encode(t.as_bytes())});
        assert_eq!(
            first_difference(&text("kubeconfig: a"), &text("kubeconfig: b"), ""),
            Some((
                "s (decoded, byte 12)".into(),
                "kubeconfig: a".into(),
                "kubeconfig: b".into()
            ))
        );
    }

    #[test]
    fn long_values_are_shortened_around_the_difference() {
        let long_a = format!("{}A{}", "x".repeat(100), "y".repeat(100));
        let long_b = format!("{}B{}", "x".repeat(100), "y".repeat(100));
        let (path, ours, theirs) = first_difference(&json!(long_a), &json!(long_b), "k").unwrap();
        assert_eq!(path, "k");
        assert!(
            ours.contains("xA") && theirs.contains("xB"),
            "{ours} {theirs}"
        );
        assert!(ours.chars().count() <= EXCERPT_CHARS + 2, "{ours}");
        assert!(shorten(&json!("z".repeat(200))).ends_with('…'));
        let v = verdict(&local(200, "not json a"), &remote(200, "not json b"));
        assert_eq!(v.name(), "different");
    }
}
