//! CRD schema checks: structural pruning and OpenAPI v3 validation of custom resources, plus
//! the object-name rules every kind shares.
//!
//! Owns what the API server does with a CRD's `openAPIV3Schema` on every write: drop unknown
//! fields (honouring `x-kubernetes-preserve-unknown-fields`, `additionalProperties` and
//! `x-kubernetes-embedded-resource`) and nulls in non-nullable fields, then check `type`,
//! `required`, `enum`, `pattern`, `minLength`/`maxLength`, `minItems`/`maxItems`,
//! `minProperties`/`maxProperties`, `minimum`/`maximum`, `multipleOf`, `uniqueItems`, the string
//! `format`s of kube-openapi's registry (date-time, date, byte, uuid, ipv4/6, cidr, mac,
//! hostname, email, uri) and integer formats, `x-kubernetes-int-or-string`, list-type
//! `map`/`set` uniqueness, `allOf`/`anyOf`/`oneOf`/`not`, with kube-openapi's messages and the
//! field error types apiextensions turns them into (`FieldValueTypeInvalid` for types and
//! formats). On writes, [`validate_custom`] then runs the CRD's CEL rules
//! (`x-kubernetes-validations`, `cel.rs`) unless an error blocks them, as kube-apiserver does. Also structural
//! defaulting ([`apply_defaults`]: `default:` values, as the apiextensions `Default` algorithm:
//! a property's default fills it when absent, nested defaults inside apply too, list items and
//! `additionalProperties` values included). Pure functions; no store, no HTTP.

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::{Map, Value};

use super::registry::{real_crds, ResourceDef};
use super::status::{go_float, go_quote, ApiError, BadValue, Cause, ErrorType, FieldError};

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
/// drop) are errors too, and so are broken CEL rules. Returns every problem as
/// `field: message`. For `#[tier(upstream)]` tests.
pub fn validate_against_real_crd(kind: &str, object: &Value) -> Result<(), Vec<String>> {
    validate_against(real_crds(), kind, object)
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

/// The schema part of a custom resource strategy's `Validate`/`ValidateUpdate`: `meta_errors`
/// (ObjectMeta, checked by the caller), the OpenAPI schema and list-type uniqueness, then the
/// CRD's CEL rules with `old` as `oldSelf`, skipped with one extra cause when an error blocks
/// them (wrong type or format, required, enum, too long, too many), as kube-apiserver's
/// `hasBlockingErr` does. A rule the in-test server cannot evaluate is a 500 naming it,
/// recorded for `FakeApiServer`'s drop.
pub fn validate_custom(
    def: &ResourceDef,
    old: Option<&Value>,
    new: &Value,
    meta_errors: Vec<FieldError>,
    status_only: bool,
) -> Result<(Vec<Cause>, Vec<String>), ApiError> {
    let mut causes: Vec<Cause> = meta_errors.iter().map(FieldError::to_cause).collect();
    let mut warnings = Vec::new();
    causes.extend(schema_errors(def, new, status_only));
    if let Some(schema) = def.schema.as_ref().filter(|s| super::cel::has_rules(s)) {
        if causes.iter().any(blocks_cel) {
            causes.push(
                FieldError::invalid(
                    "<nil>",
                    BadValue::Null,
                    "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                )
                .to_cause(),
            );
        } else {
            match super::cel::validate_ratcheting(schema, old, new) {
                Ok((rule_causes, rule_warnings)) => {
                    causes.extend(rule_causes);
                    warnings.extend(rule_warnings);
                }
                Err(unsupported) => {
                    super::cel::record_failure(schema, &unsupported);
                    return Err(ApiError::internal(unsupported.to_string()));
                }
            }
        }
    }
    Ok((causes, warnings))
}

/// Kubernetes' blocking error types: NotSupported, Required, TooLong, TooMany, TypeInvalid.
fn blocks_cel(cause: &Cause) -> bool {
    matches!(
        cause.reason.as_str(),
        "FieldValueNotSupported"
            | "FieldValueRequired"
            | "FieldValueTooLong"
            | "FieldValueTooMany"
            | "FieldValueTypeInvalid"
    )
}

/// Validates an object: the ObjectMeta rules of a create, and the CRD schema for custom
/// resources.
pub fn validate_object(def: &ResourceDef, object: &Value) -> Result<(), Vec<Cause>> {
    let mut causes: Vec<Cause> = super::meta::validate_create(
        &object["metadata"],
        def.namespaced,
        super::meta::NameRule::DnsSubdomain,
    )
    .iter()
    .map(FieldError::to_cause)
    .collect();
    causes.extend(schema_errors(def, object, false));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(causes)
    }
}

/// The OpenAPI schema errors of a custom resource (nothing for built-in kinds).
fn schema_errors(def: &ResourceDef, object: &Value, status_only: bool) -> Vec<Cause> {
    let mut v = Validator {
        status_only,
        ..Validator::default()
    };
    if let (Some(schema), Value::Object(map)) = (&def.schema, object) {
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
            required.retain(|r| !matches!(r.as_str(), Some("apiVersion" | "kind" | "metadata")));
        }
        if let Some(Value::Object(props)) = root.get_mut("properties") {
            props.remove("metadata");
            props.remove("apiVersion");
            props.remove("kind");
        }
        v.check(&Value::Object(body), &root, "");
    }
    v.errors.iter().map(FieldError::to_cause).collect()
}

#[derive(Default)]
struct Validator {
    errors: Vec<FieldError>,
    patterns: HashMap<String, Option<regex::Regex>>,
    /// A status update is validated by the status schema alone: its messages name paths
    /// relative to `status` (the field paths keep it).
    status_only: bool,
}

impl Validator {
    /// `path` as kube-openapi names it in messages (`body` for the root of what it validates).
    fn shown<'p>(&self, path: &'p str) -> &'p str {
        let path = if self.status_only {
            path.strip_prefix("status.").unwrap_or(path)
        } else {
            path
        };
        if path.is_empty() {
            "body"
        } else {
            path
        }
    }

    fn invalid(&mut self, path: &str, value: BadValue, detail: String) {
        self.errors.push(FieldError::invalid(path, value, detail));
    }

    /// kube-openapi's `InvalidType`: `<path> in body must be of type <t>: "<actual>"`, a
    /// `FieldValueTypeInvalid` whose bad value is the actual type's name.
    fn type_error(&mut self, path: &str, value: &Value, wanted: &str) {
        let actual = type_name(value);
        self.errors.push(FieldError::new(
            ErrorType::TypeInvalid,
            path,
            BadValue::Str(actual.into()),
            format!(
                "{} in body must be of type {wanted}: {}",
                self.shown(path),
                go_quote(actual)
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
                let listed: Vec<String> = allowed
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                self.errors.push(FieldError::not_supported(
                    path,
                    BadValue::of(value),
                    &listed,
                ));
            }
        }
        match value {
            Value::String(text) => self.check_string(text, schema, path),
            Value::Number(_) => self.check_number(value, schema, path),
            Value::Array(items) => self.check_array(items, schema, path),
            Value::Object(map) => self.check_object(map, schema, path),
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
            self.type_error(path, value, "integer,string");
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
        if !ok && wanted == "integer" && value.is_number() {
            // A fraction: kube-openapi's type check names the format and Go's float64, and
            // its format check reports the value as well.
            let format = schema.get("format").and_then(Value::as_str);
            self.errors.push(FieldError::new(
                ErrorType::TypeInvalid,
                path,
                BadValue::Str("float64".into()),
                format!(
                    "{} in body must be of type {}: \"float64\"",
                    self.shown(path),
                    format.unwrap_or("integer")
                ),
            ));
            self.check_number(value, schema, path);
        } else if !ok {
            self.type_error(path, value, wanted);
        }
        ok
    }

    fn check_string(&mut self, text: &str, schema: &Value, path: &str) {
        self.check_format(text, schema, path);
        // kube-openapi's string validator reports the first of maxLength, minLength, pattern.
        let length = text.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
            if length > max {
                self.errors.push(FieldError::too_long(path, max as usize));
                return;
            }
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
            if length < min {
                self.invalid(
                    path,
                    BadValue::Str(text.into()),
                    format!(
                        "{} in body should be at least {min} chars long",
                        self.shown(path)
                    ),
                );
                return;
            }
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            let compiled = self
                .patterns
                .entry(pattern.to_string())
                .or_insert_with(|| regex::Regex::new(pattern).ok());
            if let Some(re) = compiled {
                if !re.is_match(text) {
                    self.invalid(
                        path,
                        BadValue::Str(text.into()),
                        format!("{} in body should match '{pattern}'", self.shown(path)),
                    );
                }
            }
        }
    }

    /// A string `format` of kube-openapi's registry: a `FieldValueTypeInvalid` when the value
    /// is not of it.
    fn check_format(&mut self, text: &str, schema: &Value, path: &str) {
        if let Some(format) = schema.get("format").and_then(Value::as_str) {
            if !valid_format(format, text) {
                self.errors.push(FieldError::new(
                    ErrorType::TypeInvalid,
                    path,
                    BadValue::Str(text.into()),
                    format!(
                        "{} in body must be of type {format}: {}",
                        self.shown(path),
                        go_quote(text)
                    ),
                ));
            }
        }
    }

    fn check_number(&mut self, value: &Value, schema: &Value, path: &str) {
        let Some(n) = value.as_f64() else { return };
        if schema.get("type").and_then(Value::as_str) == Some("integer") {
            let format = schema.get("format").and_then(Value::as_str);
            let fits = match format {
                Some("int32") => value.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                _ => value.as_i64().is_some() || n.fract() == 0.0 && n.abs() < 9.2e18,
            };
            if !fits {
                // Reported on the object holding the field, naming the field in it (the root
                // prints as `<nil>`).
                let (parent, field) = match path.rsplit_once('.') {
                    Some((parent, field)) => (parent, field),
                    None => ("<nil>", path),
                };
                let detail = match format {
                    Some(f) => {
                        format!("Checked value must be of type integer with format {f} in {field}")
                    }
                    None => format!("Checked value must be of type integer in {field}"),
                };
                self.invalid(parent, BadValue::Str(String::new()), detail);
            }
        }
        let exclusive_max = is_true(schema, "exclusiveMaximum");
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            if n > max || (exclusive_max && n >= max) {
                let op = if exclusive_max {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.invalid(
                    path,
                    BadValue::of(value),
                    format!(
                        "{} in body should be {op} {}",
                        self.shown(path),
                        go_float(max)
                    ),
                );
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
                self.invalid(
                    path,
                    BadValue::of(value),
                    format!(
                        "{} in body should be {op} {}",
                        self.shown(path),
                        go_float(min)
                    ),
                );
            }
        }
        if let Some(factor) = schema.get("multipleOf").and_then(Value::as_f64) {
            if factor != 0.0 && (n / factor).fract() != 0.0 {
                self.invalid(
                    path,
                    BadValue::of(value),
                    format!(
                        "{} in body should be a multiple of {}",
                        self.shown(path),
                        go_float(factor)
                    ),
                );
            }
        }
    }

    fn check_array(&mut self, items: &[Value], schema: &Value, path: &str) {
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
            if items.len() as u64 > max {
                self.errors
                    .push(FieldError::too_many(path, items.len(), max as usize));
            }
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < min {
                self.invalid(
                    path,
                    BadValue::Int(items.len() as i64),
                    format!(
                        "{} in body should have at least {min} items",
                        self.shown(path)
                    ),
                );
            }
        }
        if is_true(schema, "uniqueItems") {
            let duplicated = items
                .iter()
                .enumerate()
                .any(|(i, a)| items[..i].contains(a));
            if duplicated {
                self.invalid(
                    path,
                    BadValue::Printed(super::status::go_json(&Value::Array(items.to_vec()))),
                    format!("{} in body shouldn't contain duplicates", self.shown(path)),
                );
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
                        let shown_key: serde_json::Map<String, Value> = keys
                            .iter()
                            .map(|k| (k.to_string(), item[*k].clone()))
                            .collect();
                        self.errors.push(FieldError::duplicate(
                            &format!("{path}[{i}]"),
                            BadValue::of(&Value::Object(shown_key)),
                        ));
                    } else {
                        seen.push(key);
                    }
                }
            }
            Some("set") => {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        self.errors.push(FieldError::duplicate(
                            &format!("{path}[{i}]"),
                            BadValue::of(item),
                        ));
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

    fn check_object(&mut self, map: &Map<String, Value>, schema: &Value, path: &str) {
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
                    self.errors
                        .push(FieldError::required(&join(path, field), ""));
                }
            }
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64) {
            if map.len() as u64 > max {
                self.errors
                    .push(FieldError::too_many(path, map.len(), max as usize));
            }
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64) {
            if (map.len() as u64) < min {
                self.invalid(
                    path,
                    BadValue::Int(map.len() as i64),
                    format!(
                        "{} in body should have at least {min} properties",
                        self.shown(path)
                    ),
                );
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
                    self.errors.push(FieldError::required(
                        &join(path, field),
                        "must not be empty",
                    ));
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
            probe.errors.is_empty()
        };
        if let Some(Value::Array(any)) = schema.get("anyOf") {
            if !any.iter().any(passes) {
                self.invalid(
                    path,
                    BadValue::Str(String::new()),
                    format!(
                        "{} in body must validate at least one schema (anyOf)",
                        self.shown(path)
                    ),
                );
            }
        }
        if let Some(Value::Array(one)) = schema.get("oneOf") {
            let matching = one.iter().filter(|s| passes(s)).count();
            if matching != 1 {
                self.invalid(
                    path,
                    BadValue::Str(String::new()),
                    format!(
                        "{} in body must validate one and only one schema (oneOf)",
                        self.shown(path)
                    ),
                );
            }
        }
        if let Some(not) = schema.get("not").filter(|s| s.is_object()) {
            if passes(not) {
                self.invalid(
                    path,
                    BadValue::Str(String::new()),
                    format!(
                        "{} in body shouldn't validate the schema (not)",
                        self.shown(path)
                    ),
                );
            }
        }
    }
}

/// The string formats kube-openapi's default registry knows; others are not checked.
fn valid_format(format: &str, text: &str) -> bool {
    use std::str::FromStr;
    match format {
        "date-time" | "datetime" => {
            text.parse::<k8s_openapi::jiff::Timestamp>().is_ok()
                || k8s_openapi::jiff::civil::DateTime::from_str(text).is_ok()
        }
        "date" => text.parse::<k8s_openapi::jiff::civil::Date>().is_ok(),
        // kube-openapi refuses the empty string as base64 data.
        "byte" => {
            !text.is_empty()
                && base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .is_ok()
        }
        "uuid" | "uuid3" | "uuid4" | "uuid5" => {
            let groups: Vec<&str> = text.split('-').collect();
            let lengths = [8, 4, 4, 4, 12];
            let shape = groups.len() == 5
                && groups
                    .iter()
                    .zip(lengths)
                    .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
            let version = |v: u8| groups.get(2).is_some_and(|g| g.as_bytes()[0] == v);
            shape
                && match format {
                    "uuid3" => version(b'3'),
                    "uuid4" => version(b'4'),
                    "uuid5" => version(b'5'),
                    _ => true,
                }
        }
        "ipv4" => std::net::Ipv4Addr::from_str(text).is_ok(),
        "ipv6" => std::net::Ipv6Addr::from_str(text).is_ok(),
        "cidr" => text.split_once('/').is_some_and(|(ip, bits)| {
            let bits: Option<u8> = bits.parse().ok();
            match std::net::IpAddr::from_str(ip) {
                Ok(std::net::IpAddr::V4(_)) => bits.is_some_and(|b| b <= 32),
                Ok(std::net::IpAddr::V6(_)) => bits.is_some_and(|b| b <= 128),
                Err(_) => false,
            }
        }),
        "mac" => {
            let parts: Vec<&str> = text.split([':', '-']).collect();
            matches!(parts.len(), 6 | 8 | 20)
                && parts
                    .iter()
                    .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
        }
        "hostname" => {
            text.len() <= 255
                && !text.is_empty()
                && text.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                })
        }
        "email" => text
            .split_once('@')
            .is_some_and(|(user, host)| !user.is_empty() && host.contains('.')),
        // Go's url.ParseRequestURI: an absolute URI or an absolute path.
        "uri" => {
            text.starts_with('/')
                || text.split_once(':').is_some_and(|(scheme, _)| {
                    !scheme.is_empty()
                        && scheme.as_bytes()[0].is_ascii_alphabetic()
                        && scheme
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
                })
        }
        _ => true,
    }
}

fn is_integer(value: &Value) -> bool {
    value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() && n.as_f64().is_some_and(|f| f.fract() != 0.0) => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
