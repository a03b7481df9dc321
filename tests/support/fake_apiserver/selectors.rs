//! Label and field selectors for LIST and WATCH, parsed from query strings.
//!
//! Owns the selector grammar (a practical subset of Kubernetes': `k=v`, `k==v`, `k!=v`, `k`,
//! `!k`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n` for labels; for fields `=`, `==`, `!=` on the labels the
//! resource supports, others a 400 `field label not supported`) and matching objects against
//! it. Pure: no I/O, no store.

use serde_json::Value;

use super::status::ApiError;

#[derive(Clone, Debug, PartialEq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    /// `k>n`, `k<n`: the label is an integer greater (less) than `n`.
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed `labelSelector`; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelRequirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: {part:?}: found unsupported or malformed selector"
                ))
            })?);
        }
        Ok(LabelSelector(requirements))
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelRequirement::Equals(k, v) => label(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::DoesNotExist(k) => label(k).is_none(),
            LabelRequirement::GreaterThan(k, n) => label(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l > *n),
            LabelRequirement::LessThan(k, n) => label(k)
                .and_then(|l| l.parse::<i64>().ok())
                .is_some_and(|l| l < *n),
        })
    }
}

/// Splits on commas that are not inside parentheses (`a in (x,y),b`).
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_requirement(part: &str) -> Option<LabelRequirement> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| LabelRequirement::DoesNotExist(key.to_string()));
    }
    if let Some((key, rest)) = part.split_once("!=") {
        return equality(key, rest).map(|(k, v)| LabelRequirement::NotEquals(k, v));
    }
    if let Some((key, rest)) = part.split_once("==") {
        return equality(key, rest).map(|(k, v)| LabelRequirement::Equals(k, v));
    }
    if let Some((key, rest)) = part.split_once('=') {
        return equality(key, rest).map(|(k, v)| LabelRequirement::Equals(k, v));
    }
    for (operator, make) in [
        (
            '>',
            LabelRequirement::GreaterThan as fn(String, i64) -> LabelRequirement,
        ),
        ('<', LabelRequirement::LessThan),
    ] {
        if let Some((key, rest)) = part.split_once(operator) {
            let (key, value) = (key.trim(), rest.trim().parse::<i64>().ok()?);
            return valid_key(key).then(|| make(key.to_string(), value));
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = words[0].trim();
        let rest = words[1].trim();
        let (negated, list) = if let Some(list) = rest.strip_prefix("notin") {
            (true, list)
        } else if let Some(list) = rest.strip_prefix("in") {
            (false, list)
        } else {
            return None;
        };
        let inner = list.trim().strip_prefix('(')?.strip_suffix(')')?;
        let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
        if !valid_key(key) || values.iter().any(|v| !valid_value(v)) {
            return None;
        }
        let key = key.to_string();
        return Some(if negated {
            LabelRequirement::NotIn(key, values)
        } else {
            LabelRequirement::In(key, values)
        });
    }
    valid_key(part).then(|| LabelRequirement::Exists(part.to_string()))
}

fn equality(key: &str, value: &str) -> Option<(String, String)> {
    let (key, value) = (key.trim(), value.trim());
    (valid_key(key) && valid_value(value)).then(|| (key.to_string(), value.to_string()))
}

/// One `fieldSelector` requirement: a field path, `=`/`==` or `!=`, a value, and the value an
/// object without the field has.
#[derive(Clone, Debug, PartialEq)]
struct FieldRequirement {
    /// The fields the label reads, the first set one deciding.
    paths: Vec<String>,
    equal: bool,
    value: String,
    unset: String,
}

/// A parsed `fieldSelector`, limited to the labels the resource supports (`metadata.name`,
/// `metadata.namespace` for namespaced kinds, and a built-in kind's own fields).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<FieldRequirement>);

impl FieldSelector {
    /// Parses `text`; a label not among `labels` (label, value when unset) is a 400
    /// `field label not supported`.
    pub fn parse(text: &str, labels: &[(&str, &str)]) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            // A label is its field's path, or `label=path|path`: the first of those fields
            // that is set (core Events' `source`: the source component, else the reporting
            // component).
            let Some((spec, unset)) = labels
                .iter()
                .find(|(label, _)| label.split('=').next() == Some(field))
            else {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            };
            requirements.push(FieldRequirement {
                paths: spec
                    .split_once('=')
                    .map_or(vec![field.to_string()], |(_, paths)| {
                        paths.split('|').map(str::to_string).collect()
                    }),
                equal,
                value: value.trim().to_string(),
                unset: unset.to_string(),
            });
        }
        Ok(FieldSelector(requirements))
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|req| {
            let actual = req
                .paths
                .iter()
                .find_map(|path| {
                    let found = path
                        .split('.')
                        .try_fold(object, |v, segment| v.get(segment));
                    match found {
                        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
                        Some(Value::Bool(b)) => Some(b.to_string()),
                        Some(Value::Number(n)) => Some(n.to_string()),
                        _ => None,
                    }
                })
                .unwrap_or_else(|| req.unset.clone());
            (actual == req.value) == req.equal
        })
    }
}

/// Both selectors of a LIST or WATCH.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    /// Whether neither selector has a requirement.
    pub fn is_empty(&self) -> bool {
        self.labels.0.is_empty() && self.fields.0.is_empty()
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }
}
