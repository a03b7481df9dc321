//! CRD schema checks: structural pruning and OpenAPI v3 validation of custom resources, plus
//! the object-name rules every kind shares.
//!
//! Owns what the API server does with a CRD's `openAPIV3Schema` on every write: drop unknown
//! fields (honouring `x-kubernetes-preserve-unknown-fields`, `additionalProperties` and
//! `x-kubernetes-embedded-resource`) and nulls in non-nullable fields, then check `type`,
//! `required`, `enum`, `pattern`, `minLength`/`maxLength`, `minItems`/`maxItems`,
//! `minProperties`/`maxProperties`, `minimum`/`maximum`, `format` (date-time, date, byte, int32),
//! `x-kubernetes-int-or-string`, list-type `map`/`set` uniqueness, `allOf`/`anyOf`/`oneOf`/`not`.
//! On writes, [`validate_write`] then runs the CRD's CEL rules (`x-kubernetes-validations`,
//! `cel.rs`) unless an OpenAPI error blocks them, as kube-apiserver does. Also structural
//! defaulting ([`apply_defaults`]: `default:` values, as the apiextensions `Default` algorithm:
//! a property's default fills it when absent, nested defaults inside apply too, list items and
//! `additionalProperties` values included). Pure functions; no store, no HTTP.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{Map, Value};

use super::registry::{real_crds, ResourceDef};
use super::status::{ApiError, Cause};

/// Fields of ObjectMeta the server keeps; anything else under `metadata` is pruned.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Checks an object against the real CRD of `kind` (upstream tier) the way the API server would
/// on a create with `fieldValidation=Strict`: unknown fields (which the server would silently
/// drop) are errors too, and so are broken CEL rules. Returns every problem as `field: message`; `None` when the real CRDs
/// are not available (recorded as not run).
pub fn validate_against_real_crd(kind: &str, object: &Value) -> Option<Result<(), Vec<String>>> {
    Some(validate_against(real_crds()?, kind, object))
}

/// [`validate_against_real_crd`] against the CRDs `crds`.
pub fn validate_against(
    crds: &[ResourceDef],
    kind: &str,
    object: &Value,
) -> Result<(), Vec<String>> {
    let def = crds
        .iter()
        .find(|d| d.kind == kind)
        .ok_or_else(|| vec![format!("no CRD defines kind {kind:?}")])?;
    let mut problems = Vec::new();
    if object["apiVersion"].as_str() != Some(def.api_version().as_str()) {
        problems.push(format!("apiVersion: must be {:?}", def.api_version()));
    }
    if object["kind"].as_str() != Some(kind) {
        problems.push(format!("kind: must be {kind:?}"));
    }
    let mut pruned = object.clone();
    problems.extend(
        prune_object(def, &mut pruned)
            .into_iter()
            .map(|f| format!("{f}: unknown field")),
    );
    if let Err(causes) = validate_object(def, &pruned) {
        problems.extend(causes.iter().map(super::status::cause_text));
    }
    if let (true, Some(schema)) = (problems.is_empty(), &def.schema) {
        // The CEL rules, as on a create (transition rules need an old object).
        match super::cel::validate(schema, None, &pruned) {
            Ok(causes) => problems.extend(causes.iter().map(super::status::cause_text)),
            Err(unsupported) => problems.push(unsupported.to_string()),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Prunes a custom resource in place; returns the paths of the unknown fields it dropped.
/// Built-in kinds are left alone.
pub fn prune_object(def: &ResourceDef, object: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some(schema) = &def.schema {
        prune(object, schema, "", true, &mut unknown);
    }
    unknown
}

/// Fills absent fields of a custom resource with their schema `default:` values (after pruning,
/// so non-nullable nulls are already gone and get their default too). `metadata` is left alone.
/// Built-in kinds are left alone.
pub fn apply_defaults(def: &ResourceDef, object: &mut Value) {
    let Some(schema) = &def.schema else { return };
    let Value::Object(map) = object else { return };
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, prop) in properties.into_iter().flatten() {
        if matches!(key.as_str(), "metadata" | "apiVersion" | "kind") {
            continue;
        }
        if let Some(default) = prop.get("default").filter(|_| !map.contains_key(key)) {
            map.insert(key.clone(), default.clone());
        }
        if let Some(child) = map.get_mut(key) {
            default_value(child, prop);
        }
    }
}

/// A schema without its `default:` keywords (properties named `default` are kept).
pub fn without_defaults(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let stripped = match (key.as_str(), value) {
            ("default", _) => continue,
            ("properties" | "patternProperties" | "definitions", Value::Object(props)) => {
                Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), without_defaults(s)))
                        .collect(),
                )
            }
            ("items" | "additionalProperties" | "not", _) => without_defaults(value),
            ("allOf" | "anyOf" | "oneOf", Value::Array(list)) => {
                Value::Array(list.iter().map(without_defaults).collect())
            }
            _ => value.clone(),
        };
        out.insert(key.clone(), stripped);
    }
    Value::Object(out)
}

fn default_value(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            for (key, prop) in properties.into_iter().flatten() {
                if let Some(default) = prop.get("default").filter(|_| !map.contains_key(key)) {
                    map.insert(key.clone(), default.clone());
                }
            }
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in map.iter_mut() {
                if let Some(child_schema) = properties.and_then(|p| p.get(key)).or(additional) {
                    default_value(child, child_schema);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    default_value(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn is_true(schema: &Value, flag: &str) -> bool {
    schema.get(flag).and_then(Value::as_bool) == Some(true)
}

fn prune(
    value: &mut Value,
    schema: &Value,
    path: &str,
    resource_root: bool,
    unknown: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let preserve = is_true(schema, "x-kubernetes-preserve-unknown-fields");
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child_path = join(path, &key);
                if resource_root && (key == "apiVersion" || key == "kind") {
                    continue;
                }
                if resource_root && key == "metadata" {
                    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                        meta.retain(|field, _| {
                            let known = OBJECT_META_FIELDS.contains(&field.as_str());
                            if !known {
                                unknown.push(join(&child_path, field));
                            }
                            known
                        });
                    }
                    continue;
                }
                let child_schema = properties
                    .and_then(|p| p.get(&key))
                    .or_else(|| additional.filter(|a| a.is_object()));
                match child_schema {
                    Some(child_schema) => {
                        let is_null = map.get(&key).is_some_and(Value::is_null);
                        if is_null && !is_true(child_schema, "nullable") {
                            map.remove(&key);
                            continue;
                        }
                        if let Some(child) = map.get_mut(&key) {
                            let embedded = is_true(child_schema, "x-kubernetes-embedded-resource");
                            prune(child, child_schema, &child_path, embedded, unknown);
                        }
                    }
                    None if preserve || additional == Some(&Value::Bool(true)) => {}
                    None => {
                        map.remove(&key);
                        unknown.push(child_path);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    let embedded = is_true(item_schema, "x-kubernetes-embedded-resource");
                    prune(
                        item,
                        item_schema,
                        &format!("{path}[{i}]"),
                        embedded,
                        unknown,
                    );
                }
            }
        }
        _ => {}
    }
}

/// The validation of a write (after pruning): [`validate_object`], then the CEL rules with
/// `old` as `oldSelf`, skipped with one extra cause when an OpenAPI error blocks them (wrong
/// type, required, enum, too long, too many), as kube-apiserver's `hasBlockingErr` does. A rule
/// the in-test server cannot evaluate is a 500 naming it, recorded for `FakeApiServer`'s drop.
pub fn validate_write(def: &ResourceDef, old: Option<&Value>, new: &Value) -> Result<(), ApiError> {
    let mut causes = validate_object(def, new).err().unwrap_or_default();
    if let Some(schema) = &def.schema {
        if causes.iter().any(blocks_cel) {
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
                field: "<nil>".into(),
            });
        } else {
            match super::cel::validate(schema, old, new) {
                Ok(rule_causes) => causes.extend(rule_causes),
                Err(unsupported) => {
                    super::cel::record_failure(schema, &unsupported);
                    return Err(ApiError::new(500, "InternalError", unsupported.to_string()));
                }
            }
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid(def, name, &causes))
}

/// Kubernetes' blocking error types: NotSupported, Required, TooLong, TooMany, TypeInvalid
/// (our type errors are the `... must be of type <json type>: <actual type>` causes).
fn blocks_cel(cause: &Cause) -> bool {
    let type_error = cause.message.contains(" in body must be of type ")
        && cause.message.rsplit(": ").next().is_some_and(|actual| {
            matches!(
                actual,
                "null" | "boolean" | "number" | "integer" | "string" | "array" | "object"
            )
        });
    type_error
        || matches!(
            cause.reason.as_str(),
            "FieldValueNotSupported"
                | "FieldValueRequired"
                | "FieldValueTooLong"
                | "FieldValueTooMany"
                | "FieldValueTypeInvalid"
        )
}

/// Validates an object: the name rules of every kind, and the CRD schema for custom resources.
pub fn validate_object(def: &ResourceDef, object: &Value) -> Result<(), Vec<Cause>> {
    let mut v = Validator::default();
    validate_metadata(def, &object["metadata"], &mut v.causes);
    if let Some(schema) = &def.schema {
        if let Value::Object(map) = object {
            // The root: apiVersion/kind/metadata are the server's; check the rest.
            let mut body = map.clone();
            body.remove("apiVersion");
            body.remove("kind");
            if let Some(name_schema) = schema.pointer("/properties/metadata/properties/name") {
                if let Some(name) = object["metadata"].get("name") {
                    v.check(name, name_schema, "metadata.name");
                }
            }
            body.remove("metadata");
            let mut root = schema.as_ref().clone();
            if let Some(Value::Array(required)) = root.get_mut("required") {
                required
                    .retain(|r| !matches!(r.as_str(), Some("apiVersion" | "kind" | "metadata")));
            }
            if let Some(Value::Object(props)) = root.get_mut("properties") {
                props.remove("metadata");
                props.remove("apiVersion");
                props.remove("kind");
            }
            v.check(&Value::Object(body), &root, "");
        }
    }
    if v.causes.is_empty() {
        Ok(())
    } else {
        Err(v.causes)
    }
}

fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {detail}", short(value)),
        field: field.to_string(),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 120 {
        let cut: String = text.chars().take(117).collect();
        format!("{cut}...")
    } else {
        text
    }
}

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns_label)
}

fn qualified_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

fn label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => dns_subdomain(prefix) && qualified_name_part(name),
        None => qualified_name_part(key),
    }
}

fn label_value(value: &str) -> bool {
    value.is_empty() || qualified_name_part(value)
}

fn validate_metadata(def: &ResourceDef, meta: &Value, causes: &mut Vec<Cause>) {
    match meta["name"].as_str() {
        None | Some("") => causes.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: name or generateName is required".into(),
            field: "metadata.name".into(),
        }),
        Some(name) if !dns_subdomain(name) => causes.push(invalid(
            "metadata.name",
            &meta["name"],
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        )),
        Some(_) => {}
    }
    if def.namespaced {
        if let Some(ns) = meta["namespace"].as_str() {
            if !dns_label(ns) {
                causes.push(invalid("metadata.namespace", &meta["namespace"], "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"));
            }
        }
    }
    if let Some(labels) = meta.get("labels") {
        match labels {
            Value::Object(map) => {
                for (k, v) in map {
                    if !label_key(k) {
                        causes.push(invalid("metadata.labels", &Value::String(k.clone()), "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
                    }
                    match v.as_str() {
                        Some(text) if label_value(text) => {}
                        _ => causes.push(invalid(&format!("metadata.labels[{k}]"), v, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")),
                    }
                }
            }
            Value::Null => {}
            other => causes.push(invalid(
                "metadata.labels",
                other,
                "must be a map of strings",
            )),
        }
    }
    if let Some(annotations) = meta.get("annotations") {
        match annotations {
            Value::Object(map) => {
                for (k, v) in map {
                    if !label_key(k) {
                        causes.push(invalid(
                            "metadata.annotations",
                            &Value::String(k.clone()),
                            "name part must consist of alphanumeric characters, '-', '_' or '.'",
                        ));
                    }
                    if !v.is_string() {
                        causes.push(invalid(
                            &format!("metadata.annotations[{k}]"),
                            v,
                            "must be a string",
                        ));
                    }
                }
            }
            Value::Null => {}
            other => causes.push(invalid(
                "metadata.annotations",
                other,
                "must be a map of strings",
            )),
        }
    }
}

#[derive(Default)]
struct Validator {
    causes: Vec<Cause>,
    patterns: HashMap<String, Option<regex::Regex>>,
}

impl Validator {
    fn type_error(&mut self, path: &str, value: &Value, wanted: &str) {
        let shown = if path.is_empty() { "body" } else { path };
        self.causes.push(invalid(
            path,
            value,
            &format!(
                "{shown} in body must be of type {wanted}: {}",
                type_name(value)
            ),
        ));
    }

    fn check(&mut self, value: &Value, schema: &Value, path: &str) {
        if value.is_null() {
            if !is_true(schema, "nullable") && schema.get("type").is_some() {
                self.type_error(path, value, schema["type"].as_str().unwrap_or("object"));
            }
            return;
        }
        if !self.check_type(value, schema, path) {
            return;
        }
        if let Some(Value::Array(allowed)) = schema.get("enum") {
            if !allowed.contains(value) {
                let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
                self.causes.push(Cause {
                    reason: "FieldValueNotSupported".into(),
                    message: format!(
                        "Unsupported value: {}: supported values: {}",
                        short(value),
                        listed.join(", ")
                    ),
                    field: path.to_string(),
                });
            }
        }
        match value {
            Value::String(text) => self.check_string(text, value, schema, path),
            Value::Number(_) => self.check_number(value, schema, path),
            Value::Array(items) => self.check_array(items, value, schema, path),
            Value::Object(map) => self.check_object(map, value, schema, path),
            _ => {}
        }
        self.check_combinators(value, schema, path);
    }

    /// Returns false (after recording the error) when the value has the wrong type.
    fn check_type(&mut self, value: &Value, schema: &Value, path: &str) -> bool {
        if is_true(schema, "x-kubernetes-int-or-string") {
            if value.is_string() || is_integer(value) {
                return true;
            }
            self.type_error(path, value, "integer or string");
            return false;
        }
        let Some(wanted) = schema.get("type").and_then(Value::as_str) else {
            return true;
        };
        let ok = match wanted {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => is_integer(value),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        if !ok {
            self.type_error(path, value, wanted);
        }
        ok
    }

    fn check_string(&mut self, text: &str, value: &Value, schema: &Value, path: &str) {
        let length = text.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
            if length > max {
                self.causes.push(Cause {
                    reason: "FieldValueTooLong".into(),
                    message: format!("Too long: may not be more than {max} bytes"),
                    field: path.to_string(),
                });
            }
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
            if length < min {
                self.causes.push(invalid(
                    path,
                    value,
                    &format!("{path} in body should be at least {min} chars long"),
                ));
            }
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            let compiled = self
                .patterns
                .entry(pattern.to_string())
                .or_insert_with(|| regex::Regex::new(pattern).ok());
            if let Some(re) = compiled {
                if !re.is_match(text) {
                    self.causes.push(invalid(
                        path,
                        value,
                        &format!("{path} in body should match '{pattern}'"),
                    ));
                }
            }
        }
        if let Some(format) = schema.get("format").and_then(Value::as_str) {
            let ok = match format {
                "date-time" => text.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
                "date" => text.parse::<k8s_openapi::jiff::civil::Date>().is_ok(),
                "byte" => base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .is_ok(),
                _ => true,
            };
            if !ok {
                self.causes.push(invalid(
                    path,
                    value,
                    &format!("{path} in body must be of type {format}: {value}"),
                ));
            }
        }
    }

    fn check_number(&mut self, value: &Value, schema: &Value, path: &str) {
        let Some(n) = value.as_f64() else { return };
        if schema.get("format").and_then(Value::as_str) == Some("int32")
            && (n < f64::from(i32::MIN) || n > f64::from(i32::MAX))
        {
            self.causes.push(invalid(
                path,
                value,
                &format!("{path} in body must be of type int32: {value}"),
            ));
        }
        let exclusive_max = is_true(schema, "exclusiveMaximum");
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            if n > max || (exclusive_max && n >= max) {
                let op = if exclusive_max {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.causes.push(invalid(
                    path,
                    value,
                    &format!("{path} in body should be {op} {max}"),
                ));
            }
        }
        let exclusive_min = is_true(schema, "exclusiveMinimum");
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            if n < min || (exclusive_min && n <= min) {
                let op = if exclusive_min {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.causes.push(invalid(
                    path,
                    value,
                    &format!("{path} in body should be {op} {min}"),
                ));
            }
        }
    }

    fn check_array(&mut self, items: &[Value], value: &Value, schema: &Value, path: &str) {
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
            if items.len() as u64 > max {
                self.causes.push(Cause {
                    reason: "FieldValueTooMany".into(),
                    message: format!("Too many: {}: must have at most {max} items", items.len()),
                    field: path.to_string(),
                });
            }
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < min {
                self.causes.push(invalid(
                    path,
                    value,
                    &format!("{path} in body should have at least {min} items"),
                ));
            }
        }
        match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => {
                let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .map(|k| k.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut seen = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let key: Vec<&Value> = keys.iter().map(|k| &item[*k]).collect();
                    if seen.contains(&key) {
                        self.causes.push(duplicate(&format!("{path}[{i}]"), item));
                    } else {
                        seen.push(key);
                    }
                }
            }
            Some("set") => {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        self.causes.push(duplicate(&format!("{path}[{i}]"), item));
                    }
                }
            }
            _ => {}
        }
        if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
            for (i, item) in items.iter().enumerate() {
                self.check(item, item_schema, &format!("{path}[{i}]"));
            }
        }
    }

    fn check_object(
        &mut self,
        map: &Map<String, Value>,
        value: &Value,
        schema: &Value,
        path: &str,
    ) {
        if let Some(Value::Array(required)) = schema.get("required") {
            for field in required.iter().filter_map(Value::as_str) {
                // Presence is what counts: a null that a nullable property keeps is there.
                let nullable = schema
                    .pointer(&format!(
                        "/properties/{}",
                        field.replace('~', "~0").replace('/', "~1")
                    ))
                    .is_some_and(|p| is_true(p, "nullable"));
                if map.get(field).is_none_or(|v| v.is_null() && !nullable) {
                    self.causes.push(Cause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value".into(),
                        field: join(path, field),
                    });
                }
            }
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64) {
            if map.len() as u64 > max {
                self.causes.push(Cause {
                    reason: "FieldValueTooMany".into(),
                    message: format!("Too many: {}: must have at most {max} items", map.len()),
                    field: path.to_string(),
                });
            }
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64) {
            if (map.len() as u64) < min {
                self.causes.push(invalid(
                    path,
                    value,
                    &format!("{path} in body should have at least {min} properties"),
                ));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        for (key, child) in map {
            if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
                let child_path = join(path, key);
                if is_true(child_schema, "x-kubernetes-embedded-resource") {
                    self.check_embedded(child, child_schema, &child_path);
                } else {
                    self.check(child, child_schema, &child_path);
                }
            } else if let Some(child_schema) = additional {
                self.check(child, child_schema, &format!("{path}[{key}]"));
            }
        }
    }

    /// An embedded resource carries its own apiVersion/kind/metadata.
    fn check_embedded(&mut self, value: &Value, schema: &Value, path: &str) {
        if let Value::Object(map) = value {
            for field in ["apiVersion", "kind"] {
                if map
                    .get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    self.causes.push(Cause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value: must not be empty".into(),
                        field: join(path, field),
                    });
                }
            }
        }
        self.check(value, schema, path);
    }

    fn check_combinators(&mut self, value: &Value, schema: &Value, path: &str) {
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for sub in all {
                self.check(value, sub, path);
            }
        }
        let passes = |sub: &Value| {
            let mut probe = Validator::default();
            probe.check(value, sub, path);
            probe.causes.is_empty()
        };
        if let Some(Value::Array(any)) = schema.get("anyOf") {
            if !any.iter().any(passes) {
                self.causes.push(invalid(
                    path,
                    value,
                    &format!(
                        "{} in body must match at least one schema (anyOf)",
                        if path.is_empty() { "body" } else { path }
                    ),
                ));
            }
        }
        if let Some(Value::Array(one)) = schema.get("oneOf") {
            let matching = one.iter().filter(|s| passes(s)).count();
            if matching != 1 {
                self.causes.push(invalid(
                    path,
                    value,
                    &format!(
                        "{} in body must match exactly one schema in oneOf",
                        if path.is_empty() { "body" } else { path }
                    ),
                ));
            }
        }
        if let Some(not) = schema.get("not").filter(|s| s.is_object()) {
            if passes(not) {
                self.causes.push(invalid(
                    path,
                    value,
                    &format!(
                        "{} in body must not validate the schema (not)",
                        if path.is_empty() { "body" } else { path }
                    ),
                ));
            }
        }
    }
}

fn duplicate(path: &str, item: &Value) -> Cause {
    Cause {
        reason: "FieldValueDuplicate".into(),
        message: format!("Duplicate value: {}", short(item)),
        field: path.to_string(),
    }
}

fn is_integer(value: &Value) -> bool {
    value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
