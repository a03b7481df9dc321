//! Kubernetes `Status` errors: the one error type of the fake API server.
//!
//! Owns the mapping from a failed request to the HTTP status code, `reason` and message text a
//! real kube-apiserver would answer with (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`,
//! `Expired`, `Forbidden`, ...), and field errors as apimachinery's `field.Error` prints them
//! ([`FieldError`]: `Invalid value: "x": detail`, `Required value`, `Too long: ...`). It knows
//! nothing about storage or HTTP routing.

use std::fmt;

use serde_json::{json, Value};

use super::registry::ResourceDef;

/// One field-level cause of an `Invalid` (422) or apply `Conflict` (409) error.
#[derive(Clone, Debug, PartialEq)]
pub struct Cause {
    /// Machine-readable reason, e.g. `FieldValueRequired`, `FieldManagerConflict`.
    pub reason: String,
    /// Human-readable message, without the field path.
    pub message: String,
    /// Field path, e.g. `spec.node.name` or `.spec.x` (apply conflicts use the leading dot).
    pub field: String,
}

/// apimachinery's `field.ErrorType`: the kind of a field error, its cause reason and the words
/// its message starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
    TypeInvalid,
}

impl ErrorType {
    /// `details.causes[].reason`.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    fn words(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }
}

/// The bad value of a field error, as Go prints it (`%q` for strings, `%v` for numbers and
/// booleans, `null` for nil, nothing when omitted).
#[derive(Clone, Debug, PartialEq)]
pub enum BadValue {
    Omit,
    Null,
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// Already printed (Go's `%#v` of a slice or struct, say).
    Printed(String),
}

impl BadValue {
    /// The value of a JSON field as Go would hold and print it after decoding.
    pub fn of(value: &Value) -> BadValue {
        match value {
            Value::Null => BadValue::Null,
            Value::Bool(b) => BadValue::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => BadValue::Int(i),
                None => BadValue::Float(n.as_f64().unwrap_or_default()),
            },
            Value::String(s) => BadValue::Str(s.clone()),
            // Since 1.34 a list or map value is printed as JSON.
            other => BadValue::Printed(go_json(other)),
        }
    }

    fn text(&self) -> Option<String> {
        match self {
            BadValue::Omit => None,
            BadValue::Null => Some("null".into()),
            BadValue::Str(s) => Some(go_quote(s)),
            BadValue::Int(i) => Some(i.to_string()),
            BadValue::Float(f) => Some(go_float(*f)),
            BadValue::Bool(b) => Some(b.to_string()),
            BadValue::Printed(p) => Some(p.clone()),
        }
    }
}

/// One `field.Error`: type, path, bad value and detail.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub kind: ErrorType,
    pub field: String,
    pub value: BadValue,
    pub detail: String,
}

impl FieldError {
    pub fn new(kind: ErrorType, field: &str, value: BadValue, detail: impl Into<String>) -> Self {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            detail: detail.into(),
        }
    }

    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(field: &str, value: BadValue, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, field, value, detail)
    }

    /// `field.Required(path, detail)`.
    pub fn required(field: &str, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::Omit, detail)
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(field: &str, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::Omit, detail)
    }

    /// `field.TooLong(path, value, max)`: `may not be more than <max> bytes`.
    pub fn too_long(field: &str, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self::new(
            ErrorType::TooLong,
            field,
            BadValue::Omit,
            format!("may not be more than {max} {unit}"),
        )
    }

    /// `field.TooMany(path, actual, max)`.
    pub fn too_many(field: &str, actual: usize, max: usize) -> Self {
        let unit = if max == 1 { "item" } else { "items" };
        Self::new(
            ErrorType::TooMany,
            field,
            BadValue::Int(actual as i64),
            format!("must have at most {max} {unit}"),
        )
    }

    /// `field.NotSupported(path, value, supported)`.
    pub fn not_supported(field: &str, value: BadValue, supported: &[String]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|v| go_quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorType::NotSupported, field, value, detail)
    }

    /// `field.Duplicate(path, value)`.
    pub fn duplicate(field: &str, value: BadValue) -> Self {
        Self::new(ErrorType::Duplicate, field, value, "")
    }

    /// `ErrorBody()`: the message without the field path.
    pub fn body(&self) -> String {
        let mut text = self.kind.words().to_string();
        let shows_value = !matches!(
            self.kind,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal
        );
        if shows_value {
            if let Some(value) = self.value.text() {
                text.push_str(": ");
                text.push_str(&value);
            }
        }
        if !self.detail.is_empty() {
            text.push_str(": ");
            text.push_str(&self.detail);
        }
        text
    }

    pub fn to_cause(&self) -> Cause {
        Cause {
            reason: self.kind.reason().to_string(),
            message: self.body(),
            field: self.field.clone(),
        }
    }
}

/// The causes of field errors, in order.
pub fn causes_of(errors: &[FieldError]) -> Vec<Cause> {
    errors.iter().map(FieldError::to_cause).collect()
}

/// Go's `strconv.Quote` for the characters API objects hold.
pub fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%v` of a float64 (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest digits, with
/// an exponent (`1e+06`) when it is below -4 or at least 6.
pub fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let exp: i32 = exponent.parse().unwrap_or_default();
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// Go's `%#v` of a decoded JSON value (`[]interface {}{...}`, `map[string]interface {}{...}`).
/// `encoding/json` of a decoded JSON value (`map[string]interface{}` keys sorted), as field
/// errors print a list or map value.
pub fn go_json(value: &Value) -> String {
    match value {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_json).collect::<Vec<_>>().join(",")
        ),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            format!(
                "{{{}}}",
                keys.iter()
                    .map(|k| format!("{}:{}", Value::from(k.as_str()), go_json(&map[k.as_str()])))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        other => other.to_string(),
    }
}

pub fn go_sharp_v(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => format!("{i}"),
            None => go_float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => go_quote(s),
        Value::Array(items) => format!(
            "[]interface {{}}{{{}}}",
            items.iter().map(go_sharp_v).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            format!(
                "map[string]interface {{}}{{{}}}",
                keys.iter()
                    .map(|k| format!("{}:{}", go_quote(k), go_sharp_v(&map[k.as_str()])))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    }
}

/// A request that failed the way a Kubernetes API server would fail it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status code (404, 409, 422, ...).
    pub code: u16,
    /// `Status.reason` (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `Expired`, ...);
    /// empty for an error kube-apiserver did not classify (then the field is left out).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`; `Null` when the answer has none (boxed: the error stays small).
    pub details: Box<Value>,
    /// `Warning` headers the request drew before it failed (kube-apiserver sends them with
    /// the error).
    pub warnings: Vec<String>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// A Status without details (`NewBadRequest`, `NewResourceExpired`, ...).
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: Box::new(Value::Null),
            warnings: Vec::new(),
        }
    }

    /// An error that is no API status (a plain Go error): code 500, no reason, its text.
    pub fn plain(message: impl Into<String>) -> Self {
        ApiError::new(500, "", message)
    }

    /// `NewInternalError`: 500 `InternalError`, the cause in `details`.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        let mut err = ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        );
        *err.details = json!({ "causes": [{ "message": message }] });
        err
    }

    /// `NewGenericServerResponse` without a resource: the code's stock message, empty details.
    pub fn generic(code: u16) -> Self {
        let (reason, message) = match code {
            422 => (
                "Invalid",
                "the server rejected our request due to an error in our request",
            ),
            404 => (
                "NotFound",
                "the server could not find the requested resource",
            ),
            405 => (
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ),
            _ => ("", "the server responded with an error"),
        };
        let mut err = ApiError::new(code, reason, message);
        *err.details = json!({});
        err
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut details = json!({ "name": name, "kind": kind });
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        if name.is_empty() {
            if let Some(map) = details.as_object_mut() {
                map.remove("name");
            }
        }
        *self.details = details;
        self
    }

    /// 404 for an object that does not exist: `configmaps "x" not found`.
    pub fn not_found(resource: &ResourceDef, name: &str) -> Self {
        ApiError::not_found_in(&resource.group, &resource.plural, name)
    }

    /// 404 for `name` of the resource `plural` of `group` (`namespaces "x" not found`).
    pub fn not_found_in(group: &str, plural: &str, name: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", qualified(group, plural), name),
        )
        .with_details(group, plural, name)
    }

    /// 404 for a path no registered API serves (unknown group, version or resource).
    pub fn unknown_resource() -> Self {
        ApiError::generic(404)
    }

    /// 409 for a create of a name that is taken.
    pub fn already_exists(resource: &ResourceDef, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", resource.qualified_name(), name),
        )
        .with_details(&resource.group, &resource.plural, name)
    }

    /// 409 for a failed precondition (stale resourceVersion, UID mismatch).
    pub fn conflict(resource: &ResourceDef, name: &str, why: &str) -> Self {
        ApiError::conflict_in(&resource.group, &resource.plural, name, why)
    }

    /// `NewConflict` for `plural` (a resource, or a kind as delete preconditions name it).
    pub fn conflict_in(group: &str, plural: &str, name: &str, why: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                qualified(group, plural),
                name,
                why
            ),
        )
        .with_details(group, plural, name)
    }

    /// 409 for the stale-resourceVersion case, with the message Kubernetes uses.
    pub fn stale(resource: &ResourceDef, name: &str) -> Self {
        ApiError::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 for a server-side apply that would change fields other managers own
    /// (`NewApplyConflict`: the details hold only the causes).
    pub fn apply_conflict(message: String, causes: &[Cause]) -> Self {
        let mut err = ApiError::new(409, "Conflict", message);
        *err.details = json!({ "causes": causes_json(causes) });
        err
    }

    /// 400 for a malformed request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    /// 400 for a body that does not decode: `<Kind> in version "v1" cannot be handled as a
    /// <Kind>: <why>`.
    pub fn undecodable(resource: &ResourceDef, why: &str) -> Self {
        ApiError::bad_request(format!(
            "{} in version {} cannot be handled as a {}: {why}",
            resource.kind,
            go_quote(&resource.version),
            resource.kind
        ))
    }

    /// 422 for an object that fails validation; `causes` become `details.causes`.
    pub fn invalid(resource: &ResourceDef, name: &str, causes: &[Cause]) -> Self {
        ApiError::invalid_in(&resource.group, &resource.kind, name, causes)
    }

    /// 422 `NewInvalid` for the group kind `kind` of `group` (a kind, or a resource as the
    /// storage's missing-resourceVersion error names it, or `PatchOptions` of `meta.k8s.io`).
    /// The message lists each distinct cause once, as `ErrorList.ToAggregate` does.
    pub fn invalid_in(group: &str, kind: &str, name: &str, causes: &[Cause]) -> Self {
        let mut listed: Vec<String> = Vec::new();
        for text in causes.iter().map(cause_text) {
            if !listed.contains(&text) {
                listed.push(text);
            }
        }
        let subject = format!("{} {} is invalid", qualified(group, kind), go_quote(name));
        let message = match listed.as_slice() {
            [] => subject,
            [one] => format!("{subject}: {one}"),
            many => format!("{subject}: [{}]", many.join(", ")),
        };
        let mut err = ApiError::new(422, "Invalid", message);
        *err.details = json!({ "name": name, "kind": kind, "causes": causes_json(causes) });
        if !group.is_empty() {
            err.details["group"] = json!(group);
        }
        if name.is_empty() {
            if let Some(map) = err.details.as_object_mut() {
                map.remove("name");
            }
        }
        err
    }

    /// 403 `NewForbidden` for `plural` of `group`, object `name` (may be empty).
    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let subject = if name.is_empty() {
            qualified(group, plural)
        } else {
            format!("{} {}", qualified(group, plural), go_quote(name))
        };
        ApiError::new(403, "Forbidden", format!("{subject} is forbidden: {why}"))
            .with_details(group, plural, name)
    }

    /// 401 for a request without valid credentials.
    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 410 for a resourceVersion or continue token older than the kept history.
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// 415 for an unsupported patch or body content type, listing what is accepted.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// The `Status` object the server writes as the response body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        if !self.reason.is_empty() {
            status["reason"] = json!(self.reason);
        }
        if !self.details.is_null() {
            status["details"] = (*self.details).clone();
        }
        status
    }

    /// The `causes` of a 422 or apply 409, as `field: message` strings.
    pub fn cause_messages(&self) -> Vec<String> {
        self.details["causes"]
            .as_array()
            .map(|causes| {
                causes
                    .iter()
                    .map(|c| {
                        format!(
                            "{}: {}",
                            c["field"].as_str().unwrap_or_default(),
                            c["message"].as_str().unwrap_or_default()
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `resource.group` (or `resource` for the core group), as `GroupResource.String()` prints it.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// `field: message`, the way field errors are printed in Kubernetes messages.
pub fn cause_text(cause: &Cause) -> String {
    if cause.field.is_empty() {
        cause.message.clone()
    } else {
        format!("{}: {}", cause.field, cause.message)
    }
}

fn causes_json(causes: &[Cause]) -> Value {
    Value::Array(
        causes
            .iter()
            .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
            .collect(),
    )
}
