//! Kubernetes `Status` errors: the one error type of the fake API server.
//!
//! Owns the mapping from a failed request to the HTTP status code, `reason` and message text a
//! real kube-apiserver would answer with (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`,
//! `Expired`, ...). It knows nothing about storage or HTTP routing.

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

/// A request that failed the way a Kubernetes API server would fail it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status code (404, 409, 422, ...).
    pub code: u16,
    /// `Status.reason` (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `Expired`, ...).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details` (may be an empty object).
    pub details: Value,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: json!({}),
        }
    }

    fn with_details(mut self, resource: &ResourceDef, name: &str) -> Self {
        let mut details = json!({ "name": name, "kind": resource.plural });
        if !resource.group.is_empty() {
            details["group"] = json!(resource.group);
        }
        self.details = details;
        self
    }

    /// 404 for an object that does not exist: `configmaps "x" not found`.
    pub fn not_found(resource: &ResourceDef, name: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", resource.qualified_name(), name),
        )
        .with_details(resource, name)
    }

    /// 404 for a path no registered API serves (unknown group, version or resource).
    pub fn unknown_resource() -> Self {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 409 for a create of a name that is taken.
    pub fn already_exists(resource: &ResourceDef, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", resource.qualified_name(), name),
        )
        .with_details(resource, name)
    }

    /// 409 for a failed precondition (stale resourceVersion, UID mismatch).
    pub fn conflict(resource: &ResourceDef, name: &str, why: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                resource.qualified_name(),
                name,
                why
            ),
        )
        .with_details(resource, name)
    }

    /// 409 for the stale-resourceVersion case, with the message Kubernetes uses.
    pub fn stale(resource: &ResourceDef, name: &str) -> Self {
        ApiError::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 for a server-side apply that would change fields other managers own.
    pub fn apply_conflict(
        resource: &ResourceDef,
        name: &str,
        message: String,
        causes: &[Cause],
    ) -> Self {
        let mut err = ApiError::new(409, "Conflict", message).with_details(resource, name);
        err.details["causes"] = causes_json(causes);
        err
    }

    /// 400 for a malformed request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    /// 422 for an object that fails validation; `causes` become `details.causes`.
    pub fn invalid(resource: &ResourceDef, name: &str, causes: &[Cause]) -> Self {
        let listed: Vec<String> = causes.iter().map(cause_text).collect();
        let summary = if listed.len() == 1 {
            listed[0].clone()
        } else {
            format!("[{}]", listed.join(", "))
        };
        let mut err = ApiError::new(
            422,
            "Invalid",
            format!(
                "{}.{} \"{}\" is invalid: {}",
                resource.kind, resource.group, name, summary
            ),
        );
        if resource.group.is_empty() {
            err.message = format!("{} \"{}\" is invalid: {}", resource.kind, name, summary);
        }
        err.details = json!({ "name": name, "kind": resource.kind, "causes": causes_json(causes) });
        if !resource.group.is_empty() {
            err.details["group"] = json!(resource.group);
        }
        err
    }

    /// 410 for a resourceVersion or continue token older than the kept history.
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// 415 for an unsupported patch or body content type.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {content_type:?}"),
        )
    }

    /// The `Status` object the server writes as the response body.
    pub fn to_status(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        })
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
