//! Who a request is and what it may do, as kube-apiserver's authentication and RBAC
//! authorizer decide.
//!
//! Owns the bearer tokens ([`ADMIN_TOKEN`], the kubeconfig's, a member of `system:masters`;
//! ServiceAccount tokens issued by the TokenRequest subresource), the request attributes the
//! authorizer sees (verb, API group, resource and subresource, namespace, name, or the path of
//! a non-resource request), and the RBAC decision over the Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings stored in the server (plus the discovery, public-info and basic-user rules
//! every authenticated user has), worded as kube-apiserver words a 403, and the answer to a
//! SelfSubjectAccessReview ([`self_subject_access_review`]). A request without a known
//! token is a 401. Pure decisions over the store; HTTP is `http.rs`.

use std::collections::HashMap;

use serde_json::Value;

use super::registry::{Registry, ResourceId};
use super::status::ApiError;
use super::store::Store;

/// The token of the kubeconfig [`super::FakeApiServer`] writes: a cluster admin.
pub const ADMIN_TOKEN: &str = "fake-token";
/// The user the admin token authenticates as.
pub const ADMIN_USER: &str = "fake-admin";

/// An authenticated identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    pub fn admin() -> Self {
        User {
            name: ADMIN_USER.into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }

    /// `system:serviceaccount:<namespace>:<name>` with the ServiceAccount groups.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        User {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }
}

/// The tokens this server accepts.
#[derive(Debug, Default)]
pub struct Tokens {
    issued: HashMap<String, User>,
    counter: u64,
}

impl Tokens {
    /// The user of `Authorization: Bearer <token>`, or 401.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<User, ApiError> {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(ApiError::unauthorized)?;
        if token == ADMIN_TOKEN {
            return Ok(User::admin());
        }
        self.issued
            .get(token)
            .cloned()
            .ok_or_else(ApiError::unauthorized)
    }

    /// A new token for `user` (TokenRequest).
    pub fn issue(&mut self, user: User, seed: u64) -> String {
        self.counter += 1;
        let token = format!(
            "fake-sa-token-{:016x}{:04x}",
            seed ^ self.counter.rotate_left(23),
            self.counter
        );
        self.issued.insert(token.clone(), user);
        token
    }
}

/// What the authorizer is asked about a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    /// Whether the request is for a resource (else `path` is what is asked about).
    pub resource_request: bool,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub path: String,
}

/// Rules every authenticated user has: `system:discovery` and `system:public-info-viewer`.
const DISCOVERY_URLS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

fn list(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn matches(list: &[&str], value: &str) -> bool {
    list.iter().any(|v| *v == "*" || *v == value)
}

/// `RuleAllows` of Kubernetes' RBAC.
fn rule_allows(rule: &Value, attributes: &Attributes) -> bool {
    let verbs = list(&rule["verbs"]);
    if !matches(&verbs, &attributes.verb) {
        return false;
    }
    if !attributes.resource_request {
        return list(&rule["nonResourceURLs"]).iter().any(|url| {
            *url == "*"
                || *url == attributes.path
                || url
                    .strip_suffix('*')
                    .is_some_and(|prefix| attributes.path.starts_with(prefix))
        });
    }
    let combined = match &attributes.subresource {
        Some(sub) => format!("{}/{sub}", attributes.resource),
        None => attributes.resource.clone(),
    };
    let resource_ok = list(&rule["resources"]).iter().any(|r| {
        *r == "*"
            || *r == combined
            || attributes
                .subresource
                .as_deref()
                .is_some_and(|sub| r.strip_prefix("*/") == Some(sub))
    });
    let names = list(&rule["resourceNames"]);
    let name_ok = names.is_empty()
        || attributes
            .name
            .as_deref()
            .is_some_and(|n| names.contains(&n));
    matches(&list(&rule["apiGroups"]), &attributes.group) && resource_ok && name_ok
}

/// Whether `subject` of a binding in `binding_namespace` is `user`.
fn applies_to(subject: &Value, user: &User, binding_namespace: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => name == user.name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let namespace = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            user.name == format!("system:serviceaccount:{namespace}:{name}")
        }
        _ => false,
    }
}

/// The RBAC decision: allowed for `system:masters`, for the discovery rules of authenticated
/// users and their self reviews (`system:basic-user`), and by any rule of a role bound to the
/// user (ClusterRoleBindings everywhere, RoleBindings in their namespace).
pub fn allowed(store: &Store, registry: &Registry, user: &User, attributes: &Attributes) -> bool {
    if user.groups.iter().any(|g| g == "system:masters") {
        return true;
    }
    if !attributes.resource_request
        && attributes.verb == "get"
        && DISCOVERY_URLS.iter().any(|url| {
            *url == attributes.path
                || url
                    .strip_suffix('*')
                    .is_some_and(|prefix| attributes.path.starts_with(prefix))
        })
    {
        return true;
    }
    // `system:basic-user`, bound to every authenticated user: what may I do?
    if attributes.resource_request
        && attributes.verb == "create"
        && attributes.group == "authorization.k8s.io"
        && matches!(
            attributes.resource.as_str(),
            "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
        )
    {
        return true;
    }
    let id = |plural: &str| -> Option<ResourceId> {
        registry.find("rbac.authorization.k8s.io", "v1", plural)
    };
    let (Some(cluster_roles), Some(roles), Some(cluster_bindings), Some(bindings)) = (
        id("clusterroles"),
        id("roles"),
        id("clusterrolebindings"),
        id("rolebindings"),
    ) else {
        return false;
    };
    let role_rules = |binding: &Value, binding_namespace: Option<&str>| -> Vec<Value> {
        let role_ref = &binding["roleRef"];
        let name = role_ref["name"].as_str().unwrap_or_default();
        let role = match role_ref["kind"].as_str() {
            Some("ClusterRole") => store.get(cluster_roles, None, name),
            Some("Role") => binding_namespace.and_then(|ns| store.get(roles, Some(ns), name)),
            _ => None,
        };
        role.and_then(|r| r["rules"].as_array().cloned())
            .unwrap_or_default()
    };
    let bound = |binding: &Value, namespace: &str| {
        binding["subjects"]
            .as_array()
            .is_some_and(|subjects| subjects.iter().any(|s| applies_to(s, user, namespace)))
    };
    for binding in store.objects(cluster_bindings, None) {
        if bound(binding, "")
            && role_rules(binding, None)
                .iter()
                .any(|r| rule_allows(r, attributes))
        {
            return true;
        }
    }
    if let Some(namespace) = attributes.namespace.as_deref() {
        for binding in store.objects(bindings, Some(namespace)) {
            if bound(binding, namespace)
                && role_rules(binding, Some(namespace))
                    .iter()
                    .any(|r| rule_allows(r, attributes))
            {
                return true;
            }
        }
    }
    false
}

/// The 403 kube-apiserver answers when the authorizer says no.
pub fn forbidden(user: &User, attributes: &Attributes) -> ApiError {
    if !attributes.resource_request {
        let mut err = ApiError::new(
            403,
            "Forbidden",
            format!(
                "forbidden: User \"{}\" cannot {} path \"{}\"",
                user.name, attributes.verb, attributes.path
            ),
        );
        *err.details = serde_json::json!({});
        return err;
    }
    let resource = match &attributes.subresource {
        Some(sub) => format!("{}/{sub}", attributes.resource),
        None => attributes.resource.clone(),
    };
    let scope = match attributes.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".into(),
    };
    let why = format!(
        "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        user.name, attributes.verb, attributes.group
    );
    ApiError::forbidden(
        &attributes.group,
        &attributes.resource,
        attributes.name.as_deref().unwrap_or_default(),
        &why,
    )
}

/// The answer to a SelfSubjectAccessReview `body` by `user`: the review with its `status`, as
/// kube-apiserver's RBAC authorizer decides (`allowed`, and a `reason` when allowed). A body
/// without `spec.resourceAttributes` or `spec.nonResourceAttributes` is a 422, as there.
pub fn self_subject_access_review(
    store: &Store,
    registry: &Registry,
    user: &User,
    body: &Value,
) -> Result<Value, ApiError> {
    let spec = &body["spec"];
    let text = |value: &Value| value.as_str().map(str::to_string).unwrap_or_default();
    let attributes = if let Some(resource) =
        spec.get("resourceAttributes").filter(|v| v.is_object())
    {
        let optional = |value: &Value| value.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        Attributes {
            verb: text(&resource["verb"]),
            resource_request: true,
            group: text(&resource["group"]),
            resource: text(&resource["resource"]),
            subresource: optional(&resource["subresource"]),
            namespace: optional(&resource["namespace"]),
            name: optional(&resource["name"]),
            path: String::new(),
        }
    } else if let Some(non_resource) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        Attributes {
            verb: text(&non_resource["verb"]),
            resource_request: false,
            path: text(&non_resource["path"]),
            ..Attributes::default()
        }
    } else {
        let required = super::status::FieldError::required(
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        );
        return Err(ApiError::invalid_in(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "",
            &[required.to_cause()],
        ));
    };
    let allowed = allowed(store, registry, user, &attributes);
    let mut status = serde_json::json!({ "allowed": allowed });
    if allowed {
        status["reason"] = Value::String(format!(
            "RBAC: allowed for {:?} by a role bound to it",
            user.name
        ));
    }
    let mut review = body.clone();
    review["apiVersion"] = Value::String("authorization.k8s.io/v1".into());
    review["kind"] = Value::String("SelfSubjectAccessReview".into());
    review["metadata"] = serde_json::json!({ "creationTimestamp": null });
    review["status"] = status;
    Ok(review)
}
