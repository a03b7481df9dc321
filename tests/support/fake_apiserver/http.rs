//! HTTP surface: routes Kubernetes API paths to store operations and encodes the answers.
//!
//! Owns path parsing (`/api/v1/...`, `/apis/<group>/<version>/...`, namespaces, subresources),
//! query parsing, verb selection (get/list/watch/create/update/patch/delete/deletecollection),
//! content types, the request log, and turning every failure into a Kubernetes `Status` body.
//! It never panics on client input. Object semantics live in `store.rs`, watch streams in
//! `watch.rs`, the socket and connection lifecycle in `mod.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{header, HeaderValue, Method, StatusCode};
use percent_encoding::percent_decode_str;
use serde_json::{json, Value};

use super::authz::{self, Attributes, User};
use super::meta;
use super::registry::{ResourceDef, ResourceId};
use super::selectors::{FieldSelector, LabelSelector, Selectors};
use super::status::{go_quote, ApiError, BadValue, FieldError};
use super::store::{
    now_rfc3339, parse_json, served_as, FieldValidation, ListParams, PatchType, Preconditions,
    Scope, Target, WriteParams,
};
use super::watch::{partial_metadata, WatchParams, WatchStream};
use super::{RequestRecord, Shared};

/// Request bodies above this size are refused, as kube-apiserver's `MaxRequestBodyBytes`.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// The router: one fallback handler that parses every path itself.
pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(shared)
}

/// A parsed resource path.
#[derive(Clone, Debug)]
struct ResourcePath {
    id: ResourceId,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

/// What a path addresses.
enum Route {
    Json(Value),
    Resource(ResourcePath),
    /// A path under `/apis/<group>/` that no built-in API serves and no CRD resolves: the
    /// apiextensions handler passes it to the mux's plain-text `404 page not found`.
    PageNotFound,
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let query = parse_query(request.uri().query().unwrap_or_default());
    let mut record = RequestRecord {
        method: method.to_string(),
        path: path.clone(),
        verb: String::new(),
        group: String::new(),
        version: String::new(),
        resource: String::new(),
        subresource: None,
        namespace: None,
        name: None,
        status: 0,
        user: String::new(),
    };
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let user = match shared.tokens.lock() {
        Ok(tokens) => tokens.authenticate(authorization.as_deref()),
        Err(_) => Err(ApiError::internal("token table lock poisoned")),
    };
    let review = path == SELF_SUBJECT_ACCESS_REVIEWS;
    let response = match (user, route(&shared, &path)) {
        (Ok(user), _) if review => {
            record.user = user.name.clone();
            record.verb = if method == Method::POST {
                "create"
            } else {
                non_resource_verb(&method)
            }
            .to_string();
            record.group = "authorization.k8s.io".into();
            record.version = "v1".into();
            record.resource = "selfsubjectaccessreviews".into();
            self_subject_access_review(&shared, &user, &method, request).await
        }
        (Err(err), _) => {
            record.verb = non_resource_verb(&method).to_string();
            error_response(&err)
        }
        (Ok(user), Err(err)) => {
            record.user = user.name.clone();
            record.verb = non_resource_verb(&method).to_string();
            error_response(&err)
        }
        (Ok(user), Ok(Route::PageNotFound)) => {
            record.user = user.name.clone();
            record.verb = non_resource_verb(&method).to_string();
            let attributes = non_resource_attributes(&record.verb, &path);
            if authorized(&shared, &user, &attributes) {
                page_not_found()
            } else {
                error_response(&authz::forbidden(&user, &attributes))
            }
        }
        (Ok(user), Ok(Route::Json(doc))) => {
            record.user = user.name.clone();
            record.verb = non_resource_verb(&method).to_string();
            let attributes = non_resource_attributes(&record.verb, &path);
            if !authorized(&shared, &user, &attributes) {
                error_response(&authz::forbidden(&user, &attributes))
            } else if method == Method::GET {
                json_response(StatusCode::OK, &doc, &[])
            } else {
                error_response(&ApiError::method_not_allowed(format!(
                    "{method} is not supported on {path}"
                )))
            }
        }
        (Ok(user), Ok(Route::Resource(target))) => {
            record.user = user.name.clone();
            let def = shared.registry.get(target.id);
            record.group = def.group.clone();
            record.version = def.version.clone();
            record.resource = def.plural.clone();
            record.subresource = target.subresource.clone();
            record.namespace = target.namespace.clone();
            record.name = target.name.clone();
            record.verb = resource_verb(&method, &target, &query).to_string();
            // As the real API server's RequestInfo: a list or watch whose field selector requires
            // `metadata.name=<name>` is authorized as a request for that name (RBAC resourceNames).
            if record.name.is_none() && matches!(record.verb.as_str(), "list" | "watch") {
                record.name = query
                    .get("fieldSelector")
                    .and_then(|selector| selected_name(selector));
            }
            let attributes = Attributes {
                verb: record.verb.clone(),
                resource_request: true,
                group: record.group.clone(),
                resource: record.resource.clone(),
                subresource: record.subresource.clone(),
                namespace: record.namespace.clone(),
                name: record.name.clone(),
                path: path.clone(),
            };
            if !authorized(&shared, &user, &attributes) {
                error_response(&authz::forbidden(&user, &attributes))
            } else {
                // An update or apply that creates is authorized as a create as well, once the
                // object is found missing (kube-apiserver's createAuthorizerAttributes).
                let create = Attributes {
                    verb: "create".into(),
                    ..attributes.clone()
                };
                let create_forbidden = (matches!(record.verb.as_str(), "update" | "patch")
                    && !authorized(&shared, &user, &create))
                .then(|| {
                    let mut err = ApiError::forbidden(
                        &create.group,
                        &create.resource,
                        create.name.as_deref().unwrap_or_default(),
                        "",
                    );
                    err.message = err.message.trim_end().to_string();
                    err
                });
                let context = RequestContext {
                    verb: &record.verb,
                    user: &user,
                    create_forbidden,
                };
                match resource_request(&shared, request, &target, &query, context).await {
                    Ok(response) => response,
                    Err(err) => error_response(&err),
                }
            }
        }
    };
    record.status = response.status().as_u16();
    // As kube-apiserver's audit (`LogRequestObject` completes the object reference from the
    // request's object): a create at a collection URL is recorded with the created name.
    let response = if record.verb == "create"
        && record.name.is_none()
        && !record.resource.is_empty()
        && response.status().is_success()
    {
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        record.name = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|object| object["metadata"]["name"].as_str().map(str::to_string));
        Response::from_parts(parts, Body::from(bytes))
    } else {
        response
    };
    if let Ok(mut log) = shared.requests.lock() {
        log.push(record);
    }
    response
}

/// The one path of the authorization API this server serves.
const SELF_SUBJECT_ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

/// `POST` a SelfSubjectAccessReview: 201 with the review and its `status`, decided by the same
/// RBAC rules as every request (a create any authenticated user may make). Other methods: 405.
async fn self_subject_access_review(
    shared: &Shared,
    user: &User,
    method: &Method,
    request: Request,
) -> Response {
    if *method != Method::POST {
        return error_response(&ApiError::method_not_allowed(format!(
            "{method} is not supported on {SELF_SUBJECT_ACCESS_REVIEWS}"
        )));
    }
    let body = match axum::body::to_bytes(request.into_body(), 1 << 20).await {
        Ok(body) => body,
        Err(e) => return error_response(&ApiError::bad_request(e.to_string())),
    };
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => return error_response(&ApiError::bad_request(e.to_string())),
    };
    let answer = match shared.lock_store() {
        Ok(store) => authz::self_subject_access_review(&store, &shared.registry, user, &body),
        Err(_) => Err(ApiError::internal("store lock poisoned")),
    };
    match answer {
        Ok(review) => json_response(StatusCode::CREATED, &review, &[]),
        Err(err) => error_response(&err),
    }
}

/// The RBAC decision for a request (the store locked for the read).
fn authorized(shared: &Shared, user: &User, attributes: &Attributes) -> bool {
    if user.groups.iter().any(|g| g == "system:masters") {
        return true;
    }
    match shared.lock_store() {
        Ok(store) => authz::allowed(&store, &shared.registry, user, attributes),
        Err(_) => false,
    }
}

/// Who asks, for what verb, and whether a create it may turn into is forbidden.
struct RequestContext<'a> {
    verb: &'a str,
    user: &'a User,
    create_forbidden: Option<ApiError>,
}

/// The name a field selector pins (`metadata.name=x` or `metadata.name==x`), if any.
fn selected_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term.trim().strip_prefix("metadata.name")?;
        let value = value
            .strip_prefix("==")
            .or_else(|| value.strip_prefix('='))?;
        (!value.is_empty()).then(|| value.to_string())
    })
}

fn non_resource_verb(method: &Method) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => "get",
        Method::POST => "post",
        Method::PUT => "put",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
    }
}

/// What the authorizer is asked about a request to a non-resource path (discovery, an unserved
/// path).
fn non_resource_attributes(verb: &str, path: &str) -> Attributes {
    Attributes {
        verb: verb.to_string(),
        resource_request: false,
        path: path.to_string(),
        ..Attributes::default()
    }
}

fn resource_verb(
    method: &Method,
    target: &ResourcePath,
    query: &HashMap<String, String>,
) -> &'static str {
    let named = target.name.is_some();
    match *method {
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD if is_true(query.get("watch")) => "watch",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    }
}

fn is_true(value: Option<&String>) -> bool {
    matches!(value.map(String::as_str), Some("1" | "true" | "True"))
}

/// Parses a URL path into a discovery document or a resource request.
/// The mux's answer to a path nothing serves.
fn page_not_found() -> Response {
    let mut response = Response::new(Body::from("404 page not found\n"));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response.headers_mut().insert(
        "X-Content-Type-Options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn route(shared: &Shared, path: &str) -> Result<Route, ApiError> {
    match resource_route(shared, path) {
        Err(err) if err.code == 404 && !custom_resource_served(shared, path) => {
            Ok(Route::PageNotFound)
        }
        route => route,
    }
}

/// Whether a failed path is the apiextensions handler's to answer (with a `Status`): any path
/// outside `/apis/<group>/<version>/<resource path>` of a group no built-in API serves, or one
/// that names a CRD's resource in its scope (a namespaced one under `namespaces/<ns>/`).
fn custom_resource_served(shared: &Shared, path: &str) -> bool {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let ["apis", group, version, rest @ ..] = segs.as_slice() else {
        return true;
    };
    if rest.is_empty() || shared.registry.built_in_group(group) {
        return true;
    }
    let (namespaced, plural) = match rest {
        ["namespaces", _, plural, ..] => (true, *plural),
        [plural, ..] => (false, *plural),
        [] => return true,
    };
    shared
        .registry
        .find(group, version, plural)
        .is_some_and(|id| shared.registry.get(id).namespaced == namespaced)
}

fn resource_route(shared: &Shared, path: &str) -> Result<Route, ApiError> {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    let registry = &shared.registry;
    let (group, version, rest) = match segs.as_slice() {
        ["api"] => return Ok(Route::Json(registry.core_versions(&shared.address()))),
        ["apis"] => return Ok(Route::Json(registry.group_list())),
        ["version"] => {
            return Ok(Route::Json(serde_json::json!({
                "major": "1", "minor": "33", "gitVersion": "v1.33.0-fake",
                "platform": "linux/amd64", "goVersion": "go1.24", "compiler": "gc",
                "buildDate": "2025-01-01T00:00:00Z", "gitCommit": "0000000", "gitTreeState": "clean",
            })))
        }
        ["healthz"] | ["livez"] | ["readyz"] => return Ok(Route::Json(Value::String("ok".into()))),
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group] => {
            return registry
                .group(group)
                .map(Route::Json)
                .ok_or_else(ApiError::unknown_resource)
        }
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::unknown_resource()),
    };
    if rest.is_empty() {
        return registry
            .resource_list(group, version)
            .map(Route::Json)
            .ok_or_else(ApiError::unknown_resource);
    }
    let (namespace, rest) = match rest {
        // A Namespace's own subresources, not a namespaced resource called `status`.
        ["namespaces", _, "status" | "finalize"] if group.is_empty() => (None, rest.to_vec()),
        ["namespaces", ns, plural, tail @ ..] => (Some(ns.to_string()), {
            let mut v = vec![*plural];
            v.extend_from_slice(tail);
            v
        }),
        other => (None, other.to_vec()),
    };
    let (plural, name, subresource, deeper) = match rest.as_slice() {
        [plural] => (*plural, None, None, false),
        [plural, name] => (*plural, Some(name.to_string()), None, false),
        [plural, name, sub, more @ ..] => (
            *plural,
            Some(name.to_string()),
            Some(sub.to_string()),
            !more.is_empty(),
        ),
        _ => return Err(ApiError::unknown_resource()),
    };
    let id = registry
        .find(group, version, plural)
        .ok_or_else(ApiError::unknown_resource)?;
    let def = registry.get(id);
    // The apiextensions handler answers any other path under a custom resource's object as
    // that object not found.
    let known_subresource = matches!(subresource.as_deref(), None | Some("status"))
        && (subresource.is_none() || def.status_subresource);
    if def.is_custom() && (deeper || !known_subresource) {
        return Err(ApiError::not_found(
            def,
            name.as_deref().unwrap_or_default(),
        ));
    }
    if deeper {
        return Err(ApiError::unknown_resource());
    }
    if namespace.is_some() && !def.namespaced {
        return Err(ApiError::unknown_resource());
    }
    if namespace.is_none() && def.namespaced && name.is_some() {
        return Err(ApiError::unknown_resource());
    }
    match subresource.as_deref() {
        None => {}
        Some("status") if def.status_subresource => {}
        Some("finalize") if def.group.is_empty() && def.plural == "namespaces" => {}
        Some("token") if def.group.is_empty() && def.plural == "serviceaccounts" => {}
        Some(_) => return Err(ApiError::unknown_resource()),
    }
    Ok(Route::Resource(ResourcePath {
        id,
        namespace,
        name,
        subresource,
    }))
}

fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| {
                percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (decode(k), decode(v))
        })
        .collect()
}

fn selectors(def: &ResourceDef, query: &HashMap<String, String>) -> Result<Selectors, ApiError> {
    Ok(Selectors {
        labels: LabelSelector::parse(
            query
                .get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )?,
        fields: FieldSelector::parse(
            query
                .get("fieldSelector")
                .map(String::as_str)
                .unwrap_or_default(),
            &def.field_labels(),
        )
        .map_err(|err| default_conversion_error(def, err))?,
    })
}

/// A built-in kind without a field label conversion of its own (only `metadata.name` and
/// `metadata.namespace`) refuses another label with `DefaultMetaV1FieldSelectorConversion`'s
/// words.
fn default_conversion_error(def: &ResourceDef, err: ApiError) -> ApiError {
    let labels = def.field_labels();
    let default_only = def.builtin.is_some()
        && labels.len() == 2
        && labels
            .iter()
            .all(|(l, _)| matches!(*l, "metadata.name" | "metadata.namespace"));
    match err.message.strip_prefix("field label not supported: ") {
        Some(label) if default_only => ApiError::bad_request(format!(
            "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
            go_quote(label)
        )),
        _ => err,
    }
}

/// The kind of options a verb takes, as validation errors name it.
fn options_kind(verb: &str) -> &'static str {
    match verb {
        "create" => "CreateOptions",
        "update" => "UpdateOptions",
        "patch" => "PatchOptions",
        _ => "DeleteOptions",
    }
}

/// The write options of a request, validated as `ValidateCreateOptions` (and the update, patch
/// and delete variants) do: 422 for an unsupported `dryRun` or `fieldValidation`, a bad
/// `fieldManager`, `force` on a patch that is no apply.
fn write_params(
    request_headers: &http::HeaderMap,
    query: &HashMap<String, String>,
    verb: &str,
    apply: bool,
) -> Result<WriteParams, ApiError> {
    let mut errors = Vec::new();
    let field_validation = match query.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Ignore") => FieldValidation::Ignore,
        Some("Strict") => FieldValidation::Strict,
        Some(other) => {
            errors.push(FieldError::not_supported(
                "fieldValidation",
                BadValue::Str(other.into()),
                &["".into(), "Ignore".into(), "Strict".into(), "Warn".into()],
            ));
            FieldValidation::Warn
        }
    };
    let dry_run = match query.get("dryRun").map(String::as_str) {
        None => false,
        Some("All") => true,
        Some(other) => {
            errors.push(FieldError::not_supported(
                "dryRun",
                BadValue::Printed(json!([other]).to_string()),
                &["All".into()],
            ));
            false
        }
    };
    let field_manager = query.get("fieldManager").cloned();
    if verb == "patch" {
        if !apply && query.contains_key("force") {
            errors.push(FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
        if apply && field_manager.as_deref().unwrap_or("").is_empty() {
            errors.push(FieldError::required(
                "fieldManager",
                "is required for apply patch",
            ));
        }
    }
    if verb != "delete" {
        errors.extend(meta::field_manager(
            field_manager.as_deref().unwrap_or(""),
            "fieldManager",
        ));
    }
    if !errors.is_empty() {
        let causes: Vec<_> = errors.iter().map(FieldError::to_cause).collect();
        return Err(ApiError::invalid_in(
            "meta.k8s.io",
            options_kind(verb),
            "",
            &causes,
        ));
    }
    Ok(WriteParams {
        field_manager,
        force: is_true(query.get("force")),
        dry_run,
        field_validation,
        user_agent: request_headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        create_forbidden: None,
    })
}

async fn read_body(request: Request) -> Result<bytes::Bytes, ApiError> {
    axum::body::to_bytes(request.into_body(), MAX_BODY)
        .await
        .map_err(|_| {
            ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {MAX_BODY}"),
            )
        })
}

async fn resource_request(
    shared: &Arc<Shared>,
    request: Request,
    path: &ResourcePath,
    query: &HashMap<String, String>,
    context: RequestContext<'_>,
) -> Result<Response, ApiError> {
    let verb = context.verb;
    let def = shared.registry.get(path.id).clone();
    if def.is_custom() {
        // The apiextensions handler serves every verb on every path of a custom resource: a
        // create at an object's URL creates the body's object; an update or patch needs a
        // name.
        if matches!(verb, "update" | "patch") && path.name.is_none() {
            return Err(ApiError::bad_request("name must be provided"));
        }
    } else {
        // What go-restful routes nowhere for a built-in kind: a create of a named object or
        // of a namespaced kind outside a namespace, a write to a collection.
        let misdirected = match verb {
            "create" => {
                (path.name.is_some() && path.subresource.as_deref() != Some("token"))
                    || (def.namespaced && path.namespace.is_none())
            }
            "update" | "patch" => path.name.is_none(),
            _ => false,
        };
        if misdirected {
            return Err(ApiError::generic(405));
        }
    }
    let scope = match path.subresource.as_deref() {
        None => Scope::Main,
        Some("finalize") if verb == "update" => Scope::Finalize,
        // The finalize subresource serves only updates.
        Some("finalize") => return Err(ApiError::generic(405)),
        Some(_) => Scope::Status,
    };
    let target = || Target {
        id: path.id,
        namespace: path.namespace.clone(),
        name: path.name.clone().unwrap_or_default(),
    };
    let headers = request.headers().clone();
    // `Accept: application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1` (kube-rs
    // metadata watches, list_metadata, get_metadata) asks for metadata-only objects.
    let metadata_only = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("as=PartialObjectMetadata"));
    match verb {
        "get" => {
            let store = shared.lock_store()?;
            let object = store
                .get(
                    path.id,
                    path.namespace.as_deref(),
                    path.name.as_deref().unwrap_or_default(),
                )
                .ok_or_else(|| {
                    ApiError::not_found(&def, path.name.as_deref().unwrap_or_default())
                })?;
            let object = served_as(&def, object);
            let object = if metadata_only {
                partial_metadata(&object)
            } else {
                object
            };
            Ok(json_response(StatusCode::OK, &object, &[]))
        }
        "list" if path.subresource.is_none() => {
            let params = ListParams {
                selectors: selectors(&def, query)?,
                // `ListOptions.Limit` is an int64; zero or less means no limit.
                limit: match query.get("limit").filter(|l| !l.is_empty()) {
                    Some(l) => usize::try_from(l.parse::<i64>().map_err(|_| {
                        ApiError::bad_request(format!(
                            "strconv.ParseInt: parsing {}: invalid syntax",
                            go_quote(l)
                        ))
                    })?)
                    .ok()
                    .filter(|l| *l > 0),
                    None => None,
                },
                continue_token: query.get("continue").cloned(),
                resource_version: query.get("resourceVersion").cloned(),
                resource_version_match: query
                    .get("resourceVersionMatch")
                    .cloned()
                    .filter(|m| !m.is_empty()),
            };
            let mut list =
                shared
                    .lock_store()?
                    .list(&def, path.id, path.namespace.as_deref(), &params)?;
            if metadata_only {
                list["kind"] = Value::from("PartialObjectMetadataList");
                list["apiVersion"] = Value::from("meta.k8s.io/v1");
                if let Some(Value::Array(items)) = list.get_mut("items") {
                    for item in items.iter_mut() {
                        *item = partial_metadata(item);
                    }
                }
            }
            Ok(json_response(StatusCode::OK, &list, &[]))
        }
        "watch" if path.subresource.is_none() => {
            let timeout = match query.get("timeoutSeconds").filter(|t| !t.is_empty()) {
                Some(t) => Some(Duration::from_secs(t.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid timeoutSeconds: {t:?}"))
                })?)),
                None => None,
            };
            let params = WatchParams {
                resource: path.id,
                namespace: path.namespace.clone(),
                selectors: selectors(&def, query)?,
                resource_version: query.get("resourceVersion").cloned(),
                send_initial_events: is_true(query.get("sendInitialEvents")),
                allow_bookmarks: is_true(query.get("allowWatchBookmarks")),
                timeout,
                bookmark_interval: shared.options.bookmark_interval,
                metadata_only,
            };
            let stream = WatchStream::start(shared.store.clone(), def, params)?;
            let body = futures::stream::unfold(stream, |mut stream| async move {
                stream
                    .next_chunk()
                    .await
                    .map(|chunk| (Ok::<_, std::convert::Infallible>(chunk), stream))
            });
            let mut response = Response::new(Body::from_stream(body));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Ok(response)
        }
        "create" if path.subresource.as_deref() == Some("token") => {
            let body = read_body(request).await?;
            token_request(shared, path, &body)
        }
        "create" if path.subresource.is_none() => {
            let params = write_params(&headers, query, verb, false)?;
            let body = parse_json(&read_body(request).await?)?;
            let outcome = shared.lock_store()?.create(
                &def,
                path.id,
                path.namespace.as_deref(),
                body,
                &params,
            )?;
            Ok(json_response(
                StatusCode::CREATED,
                &outcome.object,
                &outcome.warnings,
            ))
        }
        "update" => {
            let mut params = write_params(&headers, query, verb, false)?;
            params.create_forbidden = context.create_forbidden.clone();
            let body = parse_json(&read_body(request).await?)?;
            let outcome = shared
                .lock_store()?
                .replace(&def, &target(), body, scope, &params)?;
            let status = if outcome.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json_response(status, &outcome.object, &outcome.warnings))
        }
        "patch" => {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string();
            // Strategic merge patches exist for built-in kinds only.
            let accepted: &[&str] = if def.is_custom() {
                &[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                ]
            } else {
                &[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                    "application/apply-patch+yaml",
                ]
            };
            if !accepted.contains(&content_type.as_str()) {
                return Err(ApiError::unsupported_media_type(accepted));
            }
            let apply = content_type == "application/apply-patch+yaml";
            let mut params = write_params(&headers, query, verb, apply)?;
            params.create_forbidden = context.create_forbidden.clone();
            let body = read_body(request).await?;
            let patch_type = match content_type.as_str() {
                "application/merge-patch+json" => PatchType::Merge,
                "application/json-patch+json" => PatchType::Json,
                _ => PatchType::Strategic,
            };
            let outcome = if apply {
                shared
                    .lock_store()?
                    .apply(&def, &target(), &body, scope, &params)?
            } else {
                shared
                    .lock_store()?
                    .patch(&def, &target(), patch_type, &body, scope, &params)?
            };
            let status = if outcome.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json_response(status, &outcome.object, &outcome.warnings))
        }
        "delete" if path.subresource.is_none() => {
            let body = read_body(request).await?;
            let options: Value = if body.iter().all(u8::is_ascii_whitespace) {
                Value::Null
            } else {
                serde_json::from_slice(&body).map_err(|e| {
                    ApiError::bad_request(format!(
                        "DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions: {e}"
                    ))
                })?
            };
            let policy = options["propagationPolicy"]
                .as_str()
                .or(query.get("propagationPolicy").map(String::as_str));
            let orphan_dependents = options["orphanDependents"]
                .as_bool()
                .or(query.get("orphanDependents").map(|v| v == "true"));
            let preconditions = Preconditions {
                uid: options["preconditions"]["uid"].as_str().map(str::to_string),
                resource_version: options["preconditions"]["resourceVersion"]
                    .as_str()
                    .map(str::to_string),
                // shouldOrphanDependents/shouldDeleteDependents: orphanDependents decides alone
                // (false is a background deletion), else the propagation policy.
                propagation_finalizer: match (orphan_dependents, policy) {
                    (Some(true), _) | (None, Some("Orphan")) => Some("orphan".into()),
                    (None, Some("Foreground")) => Some("foregroundDeletion".into()),
                    _ => None,
                },
                propagation_chosen: orphan_dependents.is_some() || policy.is_some(),
            };
            let mut errors = Vec::new();
            if policy.is_some() && orphan_dependents.is_some() {
                errors.push(FieldError::invalid(
                    "propagationPolicy",
                    BadValue::Str(policy.unwrap_or_default().into()),
                    "orphanDependents and deletionPropagation cannot be both set",
                ));
            }
            if let Some(policy) = policy {
                if !matches!(policy, "Foreground" | "Background" | "Orphan") {
                    errors.push(FieldError::not_supported(
                        "propagationPolicy",
                        BadValue::Str(policy.into()),
                        &[
                            "Foreground".into(),
                            "Background".into(),
                            "Orphan".into(),
                            "nil".into(),
                        ],
                    ));
                }
            }
            let body_dry_run: Vec<String> = options["dryRun"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            if body_dry_run.iter().any(|d| d != "All") {
                errors.push(FieldError::not_supported(
                    "dryRun",
                    BadValue::Printed(format!(
                        "[]string{{{}}}",
                        body_dry_run
                            .iter()
                            .map(|d| go_quote(d))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                    &["All".into()],
                ));
            }
            if !errors.is_empty() {
                let causes: Vec<_> = errors.iter().map(FieldError::to_cause).collect();
                return Err(ApiError::invalid_in(
                    "meta.k8s.io",
                    "DeleteOptions",
                    "",
                    &causes,
                ));
            }
            let dry_run =
                write_params(&headers, query, verb, false)?.dry_run || !body_dry_run.is_empty();
            let object = shared
                .lock_store()?
                .delete(&def, &target(), &preconditions, dry_run)?;
            Ok(json_response(StatusCode::OK, &object, &[]))
        }
        "deletecollection" if path.subresource.is_none() => {
            let dry_run = write_params(&headers, query, verb, false)?.dry_run;
            let list = shared.lock_store()?.delete_collection(
                &def,
                path.id,
                path.namespace.as_deref(),
                &selectors(&def, query)?,
                dry_run,
            )?;
            Ok(json_response(StatusCode::OK, &list, &[]))
        }
        // The apiextensions handler's NewMethodNotSupported for a custom resource.
        _ if def.is_custom() => {
            let verb = if verb == "other" { "" } else { verb };
            let mut err = ApiError::method_not_allowed(format!(
                "{verb} is not supported on resources of kind \"{}.{}\"",
                def.plural, def.group
            ));
            *err.details = json!({ "group": def.group, "kind": def.plural });
            Err(err)
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({verb})"
        ))),
    }
}

/// `POST .../serviceaccounts/<name>/token`: a token that authenticates as the ServiceAccount.
fn token_request(shared: &Shared, path: &ResourcePath, body: &[u8]) -> Result<Response, ApiError> {
    let request: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {e}"
            ))
        })?
    };
    let namespace = path.namespace.clone().unwrap_or_default();
    let name = path.name.clone().unwrap_or_default();
    let def = shared.registry.get(path.id);
    let (exists, seed) = {
        let store = shared.lock_store()?;
        (
            store.get(path.id, Some(&namespace), &name).is_some(),
            store.revision(),
        )
    };
    if !exists {
        return Err(ApiError::not_found(def, &name));
    }
    let token = shared
        .tokens
        .lock()
        .map_err(|_| ApiError::internal("token table lock poisoned"))?
        .issue(User::service_account(&namespace, &name), seed);
    let expiration = request["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(3600);
    let answer = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": { "name": name, "namespace": namespace, "creationTimestamp": null },
        "spec": {
            "audiences": request["spec"]["audiences"].as_array().cloned().unwrap_or_default(),
            "expirationSeconds": expiration,
            "boundObjectRef": null,
        },
        "status": { "token": token, "expirationTimestamp": now_rfc3339() },
    });
    Ok(json_response(StatusCode::CREATED, &answer, &[]))
}

fn json_response(status: StatusCode, body: &Value, warnings: &[String]) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for warning in warnings {
        let text = format!("299 - {}", go_quote(warning));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

fn error_response(err: &ApiError) -> Response {
    let status = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, &err.to_status(), &err.warnings)
}
