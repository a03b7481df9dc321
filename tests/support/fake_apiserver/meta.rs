//! ObjectMeta rules every kind shares, as apimachinery checks them: `ValidateObjectMetaAccessor`
//! on create ([`validate_create`]: name or generateName by the kind's name rule, namespace,
//! generation, labels, annotations and their total size, owner references, finalizers,
//! managedFields) and `ValidateObjectMetaAccessorUpdate` on update ([`validate_update`]: no new
//! finalizers while deleting, resourceVersion, immutable identity fields), and the formats
//! behind them (DNS-1123 subdomains and labels, label keys and values, config keys, path
//! segments) with Kubernetes' messages. Pure functions over JSON; no store, no HTTP.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{json, Value};

use super::status::{go_quote, BadValue, ErrorType, FieldError};

/// How a kind's names are checked (apimachinery's `ValidateNameFunc`s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: most kinds, custom resources included.
    DnsSubdomain,
    /// `NameIsDNSLabel` (`ValidateNamespaceName`).
    DnsLabel,
    /// `path.ValidatePathSegmentName`: what every name must be (the generic check).
    PathSegment,
}

impl NameRule {
    /// The problems of `name`, or of a `generateName` prefix when `prefix`.
    pub fn check(self, name: &str, prefix: bool) -> Vec<String> {
        match self {
            NameRule::DnsSubdomain => dns1123_subdomain(&mask_trailing_dash(name, prefix)),
            NameRule::DnsLabel => dns1123_label(&mask_trailing_dash(name, prefix)),
            NameRule::PathSegment => path_segment(name, prefix),
        }
    }
}

/// `maskTrailingDash`: a prefix may end in `-` (a suffix follows). Kubernetes replaces the last
/// two characters by `a`, and so does this.
fn mask_trailing_dash(name: &str, prefix: bool) -> String {
    if prefix && name.len() > 1 && name.ends_with('-') {
        let mut cut = name.len() - 2;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}a", &name[..cut])
    } else {
        name.to_string()
    }
}

fn regex(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("a valid regex"))
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn dns1123_subdomain_fmt() -> String {
    format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*")
}

fn is_dns1123_subdomain_text(value: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    regex(&RE, &format!("^{}$", dns1123_subdomain_fmt())).is_match(value)
}

/// `RegexError`: the message, examples and the regex.
pub fn regex_error(message: &str, pattern: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{message} (regex used for validation is '{pattern}')");
    }
    let mut text = format!("{message} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            text.push_str(" or ");
        }
        text.push_str(&format!("'{example}', "));
    }
    text.push_str(&format!("regex used for validation is '{pattern}')"));
    text
}

/// `content.MaxLenError` (label keys and values).
fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} bytes")
}

/// `validation.MaxLenError` (DNS names, ConfigMap keys).
fn max_chars_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_chars_error(253));
    }
    if !is_dns1123_subdomain_text(value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            &dns1123_subdomain_fmt(),
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1123Label`.
pub fn dns1123_label(value: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_chars_error(63));
    }
    if !regex(&RE, &format!("^{DNS1123_LABEL_FMT}$")).is_match(value) {
        if is_dns1123_subdomain_text(value) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsQualifiedName` / `IsLabelKey`: an optional DNS subdomain prefix and `/`, then a name.
pub fn label_key(value: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                // content.IsLabelKey: its own subdomain check, counting bytes.
                errs.extend(dns1123_subdomain(prefix).into_iter().map(|m| {
                    let m = m.replace(&max_chars_error(253), &max_len_error(253));
                    format!("prefix part {m}")
                }));
            }
            name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !regex(&RE, &format!("^{LABEL_KEY_FMT}$")).is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let pattern = format!("({LABEL_KEY_FMT})?");
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !regex(&RE, &format!("^{pattern}$")).is_match(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &pattern,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsConfigMapKey`: keys of ConfigMap and Secret data.
pub fn config_map_key(value: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    const FMT: &str = "[-._a-zA-Z0-9]+";
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_chars_error(253));
    }
    if !regex(&RE, &format!("^{FMT}$")).is_match(value) {
        errs.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    match value {
        "." => errs.push("must not be '.'".into()),
        ".." => errs.push("must not be '..'".into()),
        v if v.starts_with("..") => errs.push("must not start with '..'".into()),
        _ => {}
    }
    errs
}

/// `ValidatePathSegmentName`: never `.` or `..`, never `/` or `%`.
pub fn path_segment(name: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        for illegal in [".", ".."] {
            if name == illegal {
                return vec![format!("may not be '{illegal}'")];
            }
        }
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

fn text<'a>(meta: &'a Value, field: &str) -> &'a str {
    meta.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// `ValidateObjectMetaAccessor`: what a new object's metadata must be, names checked by `rule`.
pub fn validate_create(meta: &Value, namespaced: bool, rule: NameRule) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate_name = text(meta, "generateName");
    if !generate_name.is_empty() {
        for msg in rule.check(generate_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                BadValue::Str(generate_name.into()),
                msg,
            ));
        }
    }
    let name = text(meta, "name");
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in rule.check(name, false) {
            errs.push(FieldError::invalid(
                "metadata.name",
                BadValue::Str(name.into()),
                msg,
            ));
        }
    }
    let namespace = text(meta, "namespace");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in dns1123_label(namespace) {
                errs.push(FieldError::invalid(
                    "metadata.namespace",
                    BadValue::Str(namespace.into()),
                    msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(generation) = meta.get("generation").and_then(Value::as_i64) {
        if generation < 0 {
            errs.push(FieldError::invalid(
                "metadata.generation",
                BadValue::Int(generation),
                "must be greater than or equal to 0",
            ));
        }
    }
    errs.extend(common(meta));
    errs.extend(finalizers(meta));
    errs
}

/// Labels, annotations, owner references and managedFields: checked on create and update.
fn common(meta: &Value) -> Vec<FieldError> {
    let mut errs = labels(meta);
    errs.extend(annotations(meta));
    errs.extend(owner_references(meta));
    errs.extend(managed_fields(meta));
    errs
}

fn string_map(meta: &Value, field: &str) -> Vec<(String, String)> {
    meta.get(field)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `ValidateLabels`: every key a qualified name, every value a label value.
pub fn labels(meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (key, value) in string_map(meta, "labels") {
        for msg in label_key(&key) {
            errs.push(FieldError::invalid(
                "metadata.labels",
                BadValue::Str(key.clone()),
                msg,
            ));
        }
        for msg in label_value(&value) {
            errs.push(FieldError::invalid(
                "metadata.labels",
                BadValue::Str(value.clone()),
                msg,
            ));
        }
    }
    errs
}

/// Kubernetes' limit on the bytes of all annotation keys and values together.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// `ValidateAnnotations`: keys are qualified names (case does not matter); keys and values
/// together at most 256 KiB.
pub fn annotations(meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let entries = string_map(meta, "annotations");
    for (key, _) in &entries {
        for msg in label_key(&key.to_lowercase()) {
            errs.push(FieldError::invalid(
                "metadata.annotations",
                BadValue::Str(key.clone()),
                msg,
            ));
        }
    }
    let total: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(
            "metadata.annotations",
            TOTAL_ANNOTATION_SIZE_LIMIT,
        ));
    }
    errs
}

/// Go's `%#v` of a `metav1.OwnerReference`.
/// An OwnerReference as `encoding/json` prints it (its fields in order, unset pointers left
/// out), the way field errors show it.
fn owner_reference_json(owner: &Value) -> String {
    let mut fields = vec![
        format!("\"apiVersion\":{}", json!(text(owner, "apiVersion"))),
        format!("\"kind\":{}", json!(text(owner, "kind"))),
        format!("\"name\":{}", json!(text(owner, "name"))),
        format!("\"uid\":{}", json!(text(owner, "uid"))),
    ];
    for pointer in ["controller", "blockOwnerDeletion"] {
        if let Some(b) = owner.get(pointer).and_then(Value::as_bool) {
            fields.push(format!("\"{pointer}\":{b}"));
        }
    }
    format!("{{{}}}", fields.join(","))
}

/// `ValidateOwnerReferences`: apiVersion (with a version), kind, name and uid set, no Event
/// owners, at most one controller.
pub fn owner_references(meta: &Value) -> Vec<FieldError> {
    let path = "metadata.ownerReferences";
    let mut errs = Vec::new();
    let Some(owners) = meta.get("ownerReferences").and_then(Value::as_array) else {
        return errs;
    };
    let mut first_controller: Option<String> = None;
    for owner in owners {
        let api_version = text(owner, "apiVersion");
        let kind = text(owner, "kind");
        // schema.ParseGroupVersion: "" and "v1" have no group; more than one '/' is no version.
        let (group, version) = match api_version.matches('/').count() {
            0 => ("", api_version),
            1 => api_version.split_once('/').unwrap_or(("", "")),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &format!("{path}.apiVersion"),
                BadValue::Str(api_version.into()),
                "version must not be empty",
            ));
        }
        for (field, value) in [
            ("kind", kind),
            ("name", text(owner, "name")),
            ("uid", text(owner, "uid")),
        ] {
            if value.is_empty() {
                errs.push(FieldError::invalid(
                    &format!("{path}.{field}"),
                    BadValue::Str(value.into()),
                    "must not be empty",
                ));
            }
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(FieldError::invalid(
                path,
                BadValue::Printed(owner_reference_json(owner)),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if owner.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{kind}/{}", text(owner, "name"));
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    path,
                    BadValue::Printed(format!(
                        "[{}]",
                        owners
                            .iter()
                            .map(owner_reference_json)
                            .collect::<Vec<_>>()
                            .join(",")
                    )),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

fn string_list(meta: &Value, field: &str) -> Vec<String> {
    meta.get(field)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|i| i.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Go's `%#v` of a `[]string`.
fn json_string_list(items: &[String]) -> String {
    json!(items).to_string()
}

/// Go's `%#v` of a `[]string` (messages that format the value themselves).
fn go_string_slice(items: &[String]) -> String {
    format!(
        "[]string{{{}}}",
        items
            .iter()
            .map(|i| go_quote(i))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `ValidateFinalizers`: qualified names; `orphan` and `foregroundDeletion` not both.
pub fn finalizers(meta: &Value) -> Vec<FieldError> {
    let path = "metadata.finalizers";
    let list = string_list(meta, "finalizers");
    let mut errs = Vec::new();
    for finalizer in &list {
        for msg in label_key(finalizer) {
            errs.push(FieldError::invalid(
                path,
                BadValue::Str(finalizer.clone()),
                msg,
            ));
        }
    }
    if list.iter().any(|f| f == "orphan") && list.iter().any(|f| f == "foregroundDeletion") {
        errs.push(FieldError::invalid(
            path,
            BadValue::Printed(json_string_list(&list)),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

/// `ValidateManagedFields`: operations, fieldsType, manager names, subresource lengths.
fn managed_fields(meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(entries) = meta.get("managedFields").and_then(Value::as_array) else {
        return errs;
    };
    for (i, entry) in entries.iter().enumerate() {
        let path = format!("metadata.managedFields[{i}]");
        let operation = text(entry, "operation");
        if !matches!(operation, "Apply" | "Update") {
            errs.push(FieldError::invalid(
                &format!("{path}.operation"),
                BadValue::Str(operation.into()),
                "must be `Apply` or `Update`",
            ));
        }
        let fields_type = text(entry, "fieldsType");
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errs.push(FieldError::invalid(
                &format!("{path}.fieldsType"),
                BadValue::Str(fields_type.into()),
                "must be `FieldsV1`",
            ));
        }
        errs.extend(field_manager(
            text(entry, "manager"),
            &format!("{path}.manager"),
        ));
        if text(entry, "subresource").len() > 256 {
            errs.push(FieldError::too_long(&format!("{path}.subresource"), 256));
        }
    }
    errs
}

/// `ValidateFieldManager`: at most 128 bytes, printable characters only.
pub fn field_manager(manager: &str, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if manager.len() > 128 {
        errs.push(FieldError::too_long(path, 128));
    }
    for (i, c) in manager.char_indices() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            errs.push(FieldError::invalid(
                path,
                BadValue::Str(manager.into()),
                format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    errs
}

/// `ValidateObjectMetaAccessorUpdate`: the rules of a changed object's metadata against the
/// stored one.
pub fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old.get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
        let before: BTreeSet<String> = string_list(old, "finalizers").into_iter().collect();
        let added: BTreeSet<String> = string_list(new, "finalizers")
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            let added: Vec<String> = added.into_iter().collect();
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_string_slice(&added)
                ),
            ));
        }
    }
    if text(new, "resourceVersion").is_empty() {
        errs.push(FieldError::invalid(
            "metadata.resourceVersion",
            BadValue::Str(String::new()),
            "must be specified for an update",
        ));
    }
    let generation = |m: &Value| m.get("generation").and_then(Value::as_i64).unwrap_or(0);
    if generation(new) < generation(old) {
        errs.push(FieldError::invalid(
            "metadata.generation",
            BadValue::Int(generation(new)),
            "must not be decremented",
        ));
    }
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        let (a, b) = (
            new.get(field).unwrap_or(&Value::Null),
            old.get(field).unwrap_or(&Value::Null),
        );
        let same = a == b || (is_empty_scalar(a) && is_empty_scalar(b));
        if !same {
            errs.push(FieldError::invalid(
                &format!("metadata.{field}"),
                immutable_value(field, a),
                "field is immutable",
            ));
        }
    }
    errs.extend(common(new));
    errs
}

fn is_empty_scalar(value: &Value) -> bool {
    value.is_null() || value.as_str() == Some("")
}

fn immutable_value(field: &str, value: &Value) -> BadValue {
    match (field, value) {
        ("deletionGracePeriodSeconds", Value::Null) => BadValue::Null,
        (_, Value::Null) => BadValue::Str(String::new()),
        (_, other) => BadValue::of(other),
    }
}

/// Errors of these kinds keep CEL rules from running (`hasBlockingErr`).
pub fn blocks_cel(kind: ErrorType) -> bool {
    matches!(
        kind,
        ErrorType::NotSupported
            | ErrorType::Required
            | ErrorType::TooLong
            | ErrorType::TooMany
            | ErrorType::TypeInvalid
    )
}
