//! Built-in kinds as kube-apiserver's Go types and registry strategies make them behave.
//!
//! Owns, per served built-in kind ([`Kind`]): its Go struct shape written as an OpenAPI-like
//! schema (field names, Go types, `omitempty`, pointers, list and map types for field
//! management), decoding as kube-apiserver's JSON decoder does ([`decode`]: Go type errors,
//! `metav1.Time`/`MicroTime` parse errors, base64 `[]byte`, unknown fields), encoding as
//! `encoding/json` prints the typed object ([`encode`]: zero values of non-`omitempty` fields,
//! `null` for unset timestamps, times in UTC) and as the field manager sees it (`omitempty`
//! zero structs left out), `SetDefaults_*`, `PrepareForCreate`/`PrepareForUpdate`, the
//! validation of each kind (ObjectMeta with its name rule, ConfigMap keys and size, Event and
//! Lease rules, Node taints, Namespace finalizers, RBAC rules and bindings), the mutating
//! admission that applies (TaintNodesByCondition), update policy (unconditional updates,
//! create on update) and selectable fields. Pure functions; storage is `store.rs`.

use std::sync::OnceLock;

use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::gotime::{self, Layout};
use super::meta::{self, NameRule};
use super::status::{BadValue, FieldError};

/// One built-in kind.
pub struct Kind {
    pub group: &'static str,
    /// The group of the internal type (validation errors name the kind in it).
    pub internal_group: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub status_subresource: bool,
    shape: fn() -> Value,
    pub name_rule: NameRule,
    /// `AllowUnconditionalUpdate`: a PUT without resourceVersion is accepted.
    pub unconditional_update: bool,
    /// `AllowCreateOnUpdate`: a PUT of a missing object creates it.
    pub create_on_update: bool,
    /// The field selector labels the kind's field label conversion accepts, with the value an
    /// object without the field has (`strconv.FormatBool(false)` for an unset bool); a label
    /// selecting on another field than its name is written `label=path|path` (see
    /// `selectors.rs`).
    pub field_labels: &'static [(&'static str, &'static str)],
    /// Whether a delete answers with the deleted object instead of a `Status`.
    pub returns_deleted_object: bool,
    defaults: fn(&mut Value),
    prepare_create: fn(&mut Value),
    validate: fn(&Value) -> Vec<FieldError>,
    validate_update: fn(&Value, &Value) -> Vec<FieldError>,
    admit_create: fn(&mut Value),
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "builtin::Kind({}/{})", self.group, self.kind)
    }
}

impl Kind {
    /// The kind's shape (cached): what `decode`/`encode` and field management read.
    pub fn shape(&self) -> &'static Value {
        static SHAPES: OnceLock<Vec<Value>> = OnceLock::new();
        let shapes = SHAPES.get_or_init(|| KINDS.iter().map(|k| (k.shape)()).collect());
        let index = KINDS
            .iter()
            .position(|k| std::ptr::eq(k, self))
            .expect("a kind of KINDS");
        &shapes[index]
    }

    /// `SetDefaults_*`: applied as a request is decoded (the writer owns what it fills).
    pub fn apply_defaults(&self, object: &mut Value) {
        (self.defaults)(object)
    }

    /// `PrepareForCreate` (after field management): server-set fields of a new object.
    pub fn prepare_create(&self, object: &mut Value) {
        (self.prepare_create)(object)
    }

    /// Mutating admission on create.
    pub fn admit_create(&self, object: &mut Value) {
        (self.admit_create)(object)
    }

    /// The strategy's `Validate`, ObjectMeta included.
    pub fn validate(&self, object: &Value) -> Vec<FieldError> {
        (self.validate)(object)
    }

    /// The strategy's `ValidateUpdate`, ObjectMeta included.
    pub fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        (self.validate_update)(new, old)
    }
}

/// The built-in kind served as `group`/`kind`, if this server models it.
pub fn lookup(group: &str, kind: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.group == group && k.kind == kind)
}

/// Every modelled built-in kind.
pub fn kinds() -> &'static [Kind] {
    KINDS
}

fn none(_: &mut Value) {}

fn meta_only(rule: NameRule, namespaced: bool) -> impl Fn(&Value) -> Vec<FieldError> {
    move |object| meta::validate_create(&object["metadata"], namespaced, rule)
}

fn meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    meta::validate_update(&new["metadata"], &old["metadata"])
}

static KINDS: &[Kind] = &[
    Kind {
        group: "",
        internal_group: "",
        plural: "nodes",
        kind: "Node",
        namespaced: false,
        status_subresource: true,
        shape: node_shape,
        name_rule: NameRule::DnsSubdomain,
        unconditional_update: true,
        create_on_update: false,
        field_labels: &[("metadata.name", ""), ("spec.unschedulable", "false")],
        returns_deleted_object: false,
        defaults: node_defaults,
        prepare_create: node_prepare_create,
        validate: validate_node,
        validate_update: validate_node_update,
        admit_create: taint_not_ready,
    },
    Kind {
        group: "",
        internal_group: "",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        status_subresource: true,
        shape: namespace_shape,
        name_rule: NameRule::DnsLabel,
        unconditional_update: true,
        create_on_update: false,
        field_labels: &[("metadata.name", ""), ("status.phase", "")],
        returns_deleted_object: true,
        defaults: namespace_defaults,
        prepare_create: namespace_prepare_create,
        validate: validate_namespace,
        validate_update: validate_namespace_update,
        admit_create: none,
    },
    Kind {
        group: "",
        internal_group: "",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        status_subresource: false,
        shape: config_map_shape,
        name_rule: NameRule::DnsSubdomain,
        unconditional_update: true,
        create_on_update: false,
        field_labels: &[("metadata.name", ""), ("metadata.namespace", "")],
        returns_deleted_object: false,
        defaults: none,
        prepare_create: none,
        validate: validate_config_map,
        validate_update: validate_config_map_update,
        admit_create: none,
    },
    Kind {
        group: "",
        internal_group: "",
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
        status_subresource: false,
        shape: secret_shape,
        name_rule: NameRule::DnsSubdomain,
        unconditional_update: true,
        create_on_update: false,
        field_labels: &[
            ("metadata.name", ""),
            ("metadata.namespace", ""),
            ("type", ""),
        ],
        returns_deleted_object: false,
        defaults: secret_defaults,
        prepare_create: none,
        validate: validate_secret,
        validate_update: validate_secret_update,
        admit_create: none,
    },
    Kind {
        group: "",
        internal_group: "",
        plural: "services",
        kind: "Service",
        namespaced: true,
        status_subresource: true,
        shape: service_shape,
        name_rule: NameRule::DnsSubdomain,
        unconditional_update: true,
        create_on_update: false,
        field_labels: &[
            ("metadata.name", ""),
            ("metadata.namespace", ""),
            ("spec.clusterIP", ""),
            ("spec.type", ""),
        ],
        returns_deleted_object: true,
        defaults: service_defaults,
        prepare_create: service_prepare_create,
        validate: validate_service,
        validate_update: meta_update,
        admit_create: none,
    },
    Kind {
        group: "",
        internal_group: "",
        plural: "serviceaccounts",
        kind: "ServiceAccount",
        namespaced: true,
        status_subresource: false,
        shape: service_account_shape,
        name_rule: NameRule::DnsSubdomain,
        unconditional_update: true,
        create_on_update: false,
        field_labels: &[("metadata.name", ""), ("metadata.namespace", "")],
        returns_deleted_object: false,
        defaults: none,
        prepare_create: none,
        validate: validate_service_account,
        validate_update: meta_update,
        admit_create: none,
    },
    Kind {
        group: "coordination.k8s.io",
        internal_group: "coordination.k8s.io",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        status_subresource: false,
        shape: lease_shape,
        name_rule: NameRule::DnsSubdomain,
        unconditional_update: false,
        create_on_update: true,
        field_labels: &[("metadata.name", ""), ("metadata.namespace", "")],
        returns_deleted_object: false,
        defaults: none,
        prepare_create: lease_prepare_create,
        validate: validate_lease,
        validate_update: validate_lease_update,
        admit_create: none,
    },
    Kind {
        group: "",
        internal_group: "",
        plural: "events",
        kind: "Event",
        namespaced: true,
        status_subresource: false,
        shape: core_event_shape,
        name_rule: NameRule::DnsSubdomain,
        unconditional_update: true,
        create_on_update: true,
        field_labels: &[
            ("metadata.name", ""),
            ("metadata.namespace", ""),
            ("involvedObject.kind", ""),
            ("involvedObject.namespace", ""),
            ("involvedObject.name", ""),
            ("involvedObject.uid", ""),
            ("involvedObject.apiVersion", ""),
            ("involvedObject.resourceVersion", ""),
            ("involvedObject.fieldPath", ""),
            ("reason", ""),
            ("reportingComponent", ""),
            ("source=source.component|reportingComponent", ""),
            ("type", ""),
        ],
        returns_deleted_object: false,
        defaults: none,
        prepare_create: none,
        validate: validate_core_event,
        validate_update: validate_core_event_update,
        admit_create: none,
    },
    Kind {
        group: "events.k8s.io",
        internal_group: "",
        plural: "events",
        kind: "Event",
        namespaced: true,
        status_subresource: false,
        shape: event_shape,
        name_rule: NameRule::DnsSubdomain,
        unconditional_update: true,
        create_on_update: true,
        // events.k8s.io's field label conversion (to the core fields the storage selects on).
        field_labels: &[
            ("metadata.name", ""),
            ("metadata.namespace", ""),
            ("reason", ""),
            ("regarding.kind", ""),
            ("regarding.namespace", ""),
            ("regarding.name", ""),
            ("regarding.uid", ""),
            ("regarding.apiVersion", ""),
            ("regarding.resourceVersion", ""),
            ("regarding.fieldPath", ""),
            ("reportingController", ""),
            ("type", ""),
        ],
        returns_deleted_object: false,
        defaults: none,
        prepare_create: none,
        validate: validate_event,
        validate_update: validate_event_update,
        admit_create: none,
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        internal_group: "rbac.authorization.k8s.io",
        plural: "roles",
        kind: "Role",
        namespaced: true,
        status_subresource: false,
        shape: role_shape,
        name_rule: NameRule::PathSegment,
        unconditional_update: true,
        create_on_update: true,
        field_labels: &[("metadata.name", ""), ("metadata.namespace", "")],
        returns_deleted_object: false,
        defaults: none,
        prepare_create: none,
        validate: validate_role,
        validate_update: validate_role_update,
        admit_create: none,
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        internal_group: "rbac.authorization.k8s.io",
        plural: "clusterroles",
        kind: "ClusterRole",
        namespaced: false,
        status_subresource: false,
        shape: cluster_role_shape,
        name_rule: NameRule::PathSegment,
        unconditional_update: true,
        create_on_update: true,
        field_labels: &[("metadata.name", ""), ("metadata.namespace", "")],
        returns_deleted_object: false,
        defaults: none,
        prepare_create: none,
        validate: validate_cluster_role,
        validate_update: validate_cluster_role_update,
        admit_create: none,
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        internal_group: "rbac.authorization.k8s.io",
        plural: "rolebindings",
        kind: "RoleBinding",
        namespaced: true,
        status_subresource: false,
        shape: role_binding_shape,
        name_rule: NameRule::PathSegment,
        unconditional_update: true,
        create_on_update: true,
        field_labels: &[("metadata.name", ""), ("metadata.namespace", "")],
        returns_deleted_object: false,
        defaults: binding_defaults,
        prepare_create: none,
        validate: validate_role_binding,
        validate_update: validate_role_binding_update,
        admit_create: none,
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        internal_group: "rbac.authorization.k8s.io",
        plural: "clusterrolebindings",
        kind: "ClusterRoleBinding",
        namespaced: false,
        status_subresource: false,
        shape: cluster_role_binding_shape,
        name_rule: NameRule::PathSegment,
        unconditional_update: true,
        create_on_update: true,
        field_labels: &[("metadata.name", ""), ("metadata.namespace", "")],
        returns_deleted_object: false,
        defaults: binding_defaults,
        prepare_create: none,
        validate: validate_cluster_role_binding,
        validate_update: validate_cluster_role_binding_update,
        admit_create: none,
    },
];

// --- Shapes --------------------------------------------------------------------------------

fn string() -> Value {
    json!({ "type": "string" })
}

fn int32() -> Value {
    json!({ "type": "integer", "format": "int32" })
}

fn int64() -> Value {
    json!({ "type": "integer", "format": "int64" })
}

fn boolean() -> Value {
    json!({ "type": "boolean" })
}

fn time() -> Value {
    json!({ "type": "string", "x-go": "Time" })
}

fn micro_time() -> Value {
    json!({ "type": "string", "x-go": "MicroTime" })
}

fn bytes() -> Value {
    json!({ "type": "string", "x-go": "[]byte" })
}

fn quantity() -> Value {
    json!({ "x-kubernetes-int-or-string": true, "x-go": "Quantity" })
}

fn int_or_string() -> Value {
    json!({ "x-kubernetes-int-or-string": true, "x-go": "IntOrString" })
}

/// Free-form JSON (`runtime.RawExtension`, types this server does not model).
fn any() -> Value {
    json!({ "x-kubernetes-preserve-unknown-fields": true, "x-go": "any" })
}

fn map_of(values: Value) -> Value {
    json!({ "type": "object", "additionalProperties": values })
}

fn string_map() -> Value {
    map_of(string())
}

fn list(items: Value) -> Value {
    json!({ "type": "array", "items": items, "x-kubernetes-list-type": "atomic" })
}

fn set(items: Value) -> Value {
    json!({ "type": "array", "items": items, "x-kubernetes-list-type": "set" })
}

fn list_map(items: Value, keys: &[&str]) -> Value {
    json!({ "type": "array", "items": items, "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": keys })
}

/// A Go struct: `go_type` as errors name it (`v1.NodeSpec`), fields in declaration order.
fn object(go_type: &str, fields: Vec<(&str, Value)>) -> Value {
    let mut properties = Map::new();
    for (name, schema) in fields {
        properties.insert(name.to_string(), schema);
    }
    json!({ "type": "object", "x-go-type": go_type, "properties": properties })
}

/// `omitempty`: a zero value is left out when printed.
fn omit(mut schema: Value) -> Value {
    schema["x-omitempty"] = json!(true);
    schema
}

/// A pointer field (`*T` with `omitempty`): absent unless set, kept when set to a zero value.
fn ptr(mut schema: Value) -> Value {
    schema["x-pointer"] = json!(true);
    schema
}

/// `+structType=atomic`: owned and replaced whole.
fn atomic(mut schema: Value) -> Value {
    schema["x-kubernetes-map-type"] = json!("atomic");
    schema
}

fn type_meta(fields: Vec<(&'static str, Value)>) -> Vec<(&'static str, Value)> {
    let mut all = vec![("apiVersion", omit(string())), ("kind", omit(string()))];
    all.push(("metadata", omit(object_meta_shape())));
    all.extend(fields);
    all
}

fn owner_reference_shape() -> Value {
    atomic(object(
        "v1.OwnerReference",
        vec![
            ("apiVersion", string()),
            ("kind", string()),
            ("name", string()),
            ("uid", string()),
            ("controller", ptr(boolean())),
            ("blockOwnerDeletion", ptr(boolean())),
        ],
    ))
}

/// `metav1.ObjectMeta`.
pub fn object_meta_shape() -> Value {
    object(
        "v1.ObjectMeta",
        vec![
            ("name", omit(string())),
            ("generateName", omit(string())),
            ("namespace", omit(string())),
            ("selfLink", omit(string())),
            ("uid", omit(string())),
            ("resourceVersion", omit(string())),
            ("generation", omit(int64())),
            ("creationTimestamp", omit(time())),
            ("deletionTimestamp", ptr(time())),
            ("deletionGracePeriodSeconds", ptr(int64())),
            ("labels", omit(string_map())),
            ("annotations", omit(string_map())),
            (
                "ownerReferences",
                omit(list_map(owner_reference_shape(), &["uid"])),
            ),
            ("finalizers", omit(set(string()))),
            ("managedFields", omit(list(any()))),
        ],
    )
}

fn node_shape() -> Value {
    let taint = object(
        "v1.Taint",
        vec![
            ("key", string()),
            ("value", omit(string())),
            ("effect", string()),
            ("timeAdded", ptr(time())),
        ],
    );
    let condition = object(
        "v1.NodeCondition",
        vec![
            ("type", string()),
            ("status", string()),
            // metav1.Time structs: `omitempty` never leaves them out, unset prints null.
            ("lastHeartbeatTime", time()),
            ("lastTransitionTime", time()),
            ("reason", omit(string())),
            ("message", omit(string())),
        ],
    );
    let address = object(
        "v1.NodeAddress",
        vec![("type", string()), ("address", string())],
    );
    let spec = object(
        "v1.NodeSpec",
        vec![
            ("podCIDR", omit(string())),
            ("podCIDRs", omit(set(string()))),
            ("providerID", omit(string())),
            ("unschedulable", omit(boolean())),
            ("taints", omit(list(taint))),
            ("configSource", ptr(any())),
            ("externalID", omit(string())),
        ],
    );
    let system_info = object(
        "v1.NodeSystemInfo",
        vec![
            ("machineID", string()),
            ("systemUUID", string()),
            ("bootID", string()),
            ("kernelVersion", string()),
            ("osImage", string()),
            ("containerRuntimeVersion", string()),
            ("kubeletVersion", string()),
            ("kubeProxyVersion", string()),
            ("operatingSystem", string()),
            ("architecture", string()),
            ("swap", ptr(any())),
        ],
    );
    let status = object(
        "v1.NodeStatus",
        vec![
            ("capacity", omit(map_of(quantity()))),
            ("allocatable", omit(map_of(quantity()))),
            ("phase", omit(string())),
            ("conditions", omit(list_map(condition, &["type"]))),
            ("addresses", omit(list_map(address, &["type"]))),
            (
                "daemonEndpoints",
                omit(object(
                    "v1.NodeDaemonEndpoints",
                    vec![(
                        "kubeletEndpoint",
                        omit(object("v1.DaemonEndpoint", vec![("Port", int32())])),
                    )],
                )),
            ),
            ("nodeInfo", omit(system_info)),
            ("images", omit(list(any()))),
            ("volumesInUse", omit(list(string()))),
            ("volumesAttached", omit(list(any()))),
            ("config", ptr(any())),
            ("runtimeHandlers", omit(list(any()))),
            ("features", ptr(any())),
            ("declaredFeatures", omit(list(string()))),
        ],
    );
    object(
        "v1.Node",
        type_meta(vec![("spec", omit(spec)), ("status", omit(status))]),
    )
}

fn namespace_shape() -> Value {
    object(
        "v1.Namespace",
        type_meta(vec![
            (
                "spec",
                omit(object(
                    "v1.NamespaceSpec",
                    vec![("finalizers", omit(list(string())))],
                )),
            ),
            (
                "status",
                omit(object(
                    "v1.NamespaceStatus",
                    vec![
                        ("phase", omit(string())),
                        ("conditions", omit(list_map(any(), &["type"]))),
                    ],
                )),
            ),
        ]),
    )
}

fn config_map_shape() -> Value {
    object(
        "v1.ConfigMap",
        type_meta(vec![
            ("immutable", ptr(boolean())),
            ("data", omit(string_map())),
            ("binaryData", omit(map_of(bytes()))),
        ]),
    )
}

fn secret_shape() -> Value {
    object(
        "v1.Secret",
        type_meta(vec![
            ("immutable", ptr(boolean())),
            ("data", omit(map_of(bytes()))),
            ("stringData", omit(string_map())),
            ("type", omit(string())),
        ]),
    )
}

fn service_shape() -> Value {
    let port = object(
        "v1.ServicePort",
        vec![
            ("name", omit(string())),
            ("protocol", omit(string())),
            ("appProtocol", ptr(string())),
            ("port", int32()),
            ("targetPort", omit(int_or_string())),
            ("nodePort", omit(int32())),
        ],
    );
    let spec = object(
        "v1.ServiceSpec",
        vec![
            ("ports", omit(list_map(port, &["port", "protocol"]))),
            ("selector", omit(string_map())),
            ("clusterIP", omit(string())),
            ("clusterIPs", omit(list(string()))),
            ("type", omit(string())),
            ("externalIPs", omit(list(string()))),
            ("sessionAffinity", omit(string())),
            ("loadBalancerIP", omit(string())),
            ("loadBalancerSourceRanges", omit(list(string()))),
            ("externalName", omit(string())),
            ("externalTrafficPolicy", omit(string())),
            ("healthCheckNodePort", omit(int32())),
            ("publishNotReadyAddresses", omit(boolean())),
            ("sessionAffinityConfig", ptr(any())),
            ("ipFamilies", omit(list(string()))),
            ("ipFamilyPolicy", ptr(string())),
            ("allocateLoadBalancerNodePorts", ptr(boolean())),
            ("loadBalancerClass", ptr(string())),
            ("internalTrafficPolicy", ptr(string())),
            ("trafficDistribution", ptr(string())),
        ],
    );
    let status = object(
        "v1.ServiceStatus",
        vec![
            (
                "loadBalancer",
                omit(object(
                    "v1.LoadBalancerStatus",
                    vec![("ingress", omit(list(any())))],
                )),
            ),
            ("conditions", omit(list_map(any(), &["type"]))),
        ],
    );
    object(
        "v1.Service",
        type_meta(vec![("spec", omit(spec)), ("status", omit(status))]),
    )
}

fn service_account_shape() -> Value {
    object(
        "v1.ServiceAccount",
        type_meta(vec![
            // `+listType=map +listMapKey=name` of atomic object references.
            (
                "secrets",
                omit(list_map(object_reference_shape(), &["name"])),
            ),
            ("imagePullSecrets", omit(list(any()))),
            ("automountServiceAccountToken", ptr(boolean())),
        ]),
    )
}

fn lease_shape() -> Value {
    object(
        "v1.Lease",
        type_meta(vec![(
            "spec",
            omit(object(
                "v1.LeaseSpec",
                vec![
                    ("holderIdentity", ptr(string())),
                    ("leaseDurationSeconds", ptr(int32())),
                    ("acquireTime", ptr(micro_time())),
                    ("renewTime", ptr(micro_time())),
                    ("leaseTransitions", ptr(int32())),
                    ("strategy", ptr(string())),
                    ("preferredHolder", ptr(string())),
                ],
            )),
        )]),
    )
}

fn object_reference_shape() -> Value {
    atomic(object(
        "v1.ObjectReference",
        vec![
            ("kind", omit(string())),
            ("namespace", omit(string())),
            ("name", omit(string())),
            ("uid", omit(string())),
            ("apiVersion", omit(string())),
            ("resourceVersion", omit(string())),
            ("fieldPath", omit(string())),
        ],
    ))
}

/// `v1.EventSource` (core `source`, events.k8s.io `deprecatedSource`).
fn event_source_shape() -> Value {
    object(
        "v1.EventSource",
        vec![("component", omit(string())), ("host", omit(string()))],
    )
}

/// The core `v1.Event`: the same stored object as events.k8s.io's, other field names.
fn core_event_shape() -> Value {
    object(
        "v1.Event",
        type_meta(vec![
            ("involvedObject", object_reference_shape()),
            ("reason", omit(string())),
            ("message", omit(string())),
            ("source", omit(event_source_shape())),
            ("firstTimestamp", omit(time())),
            ("lastTimestamp", omit(time())),
            ("count", omit(int32())),
            ("type", omit(string())),
            ("eventTime", micro_time()),
            (
                "series",
                ptr(object(
                    "v1.EventSeries",
                    vec![("count", int32()), ("lastObservedTime", micro_time())],
                )),
            ),
            ("action", omit(string())),
            ("related", ptr(object_reference_shape())),
            ("reportingComponent", string()),
            ("reportingInstance", string()),
        ]),
    )
}

/// Core `v1.Event` fields and their events.k8s.io names (the rest are the same).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// A stored object as `kind` serves it: objects of two APIs that share their storage (core and
/// events.k8s.io Events) are converted field by field; any other object is served as stored.
pub fn convert(kind: &Kind, object: &Value) -> Value {
    let api_version = if kind.group.is_empty() {
        "v1".to_string()
    } else {
        format!("{}/v1", kind.group)
    };
    let stored = object["apiVersion"].as_str().unwrap_or_default();
    if kind.kind != "Event" || stored == api_version || object["kind"] != "Event" {
        return object.clone();
    }
    let Value::Object(map) = object else {
        return object.clone();
    };
    let to_core = kind.group.is_empty();
    let mut out = Map::new();
    for (field, value) in map {
        let renamed = EVENT_FIELDS.iter().find_map(|(core, new)| {
            if to_core && field == new {
                Some(*core)
            } else if !to_core && field == core {
                Some(*new)
            } else {
                None
            }
        });
        out.insert(renamed.unwrap_or(field).to_string(), value.clone());
    }
    out.insert("apiVersion".into(), json!(api_version));
    encode(kind, &Value::Object(out), Encoding::Json)
}

fn event_shape() -> Value {
    object(
        "v1.Event",
        type_meta(vec![
            ("eventTime", micro_time()),
            (
                "series",
                ptr(object(
                    "v1.EventSeries",
                    vec![("count", int32()), ("lastObservedTime", micro_time())],
                )),
            ),
            ("reportingController", omit(string())),
            ("reportingInstance", omit(string())),
            ("action", omit(string())),
            ("reason", omit(string())),
            ("regarding", omit(object_reference_shape())),
            ("related", ptr(object_reference_shape())),
            ("note", omit(string())),
            ("type", omit(string())),
            ("deprecatedSource", omit(event_source_shape())),
            ("deprecatedFirstTimestamp", omit(time())),
            ("deprecatedLastTimestamp", omit(time())),
            ("deprecatedCount", omit(int32())),
        ]),
    )
}

fn policy_rules() -> Value {
    omit(list(object(
        "v1.PolicyRule",
        vec![
            ("verbs", list(string())),
            ("apiGroups", omit(list(string()))),
            ("resources", omit(list(string()))),
            ("resourceNames", omit(list(string()))),
            ("nonResourceURLs", omit(list(string()))),
        ],
    )))
}

fn role_shape() -> Value {
    object("v1.Role", type_meta(vec![("rules", policy_rules())]))
}

fn cluster_role_shape() -> Value {
    object(
        "v1.ClusterRole",
        type_meta(vec![
            ("rules", policy_rules()),
            ("aggregationRule", ptr(any())),
        ]),
    )
}

fn binding_fields() -> Vec<(&'static str, Value)> {
    vec![
        (
            "subjects",
            omit(list(object(
                "v1.Subject",
                vec![
                    ("kind", string()),
                    ("apiGroup", omit(string())),
                    ("name", string()),
                    ("namespace", omit(string())),
                ],
            ))),
        ),
        (
            "roleRef",
            // `+structType=atomic`.
            atomic(object(
                "v1.RoleRef",
                vec![
                    ("apiGroup", string()),
                    ("kind", string()),
                    ("name", string()),
                ],
            )),
        ),
    ]
}

fn role_binding_shape() -> Value {
    object("v1.RoleBinding", type_meta(binding_fields()))
}

fn cluster_role_binding_shape() -> Value {
    object("v1.ClusterRoleBinding", type_meta(binding_fields()))
}

// --- Decoding ------------------------------------------------------------------------------

/// Why a body does not decode: Go's error text (wrapped by the caller into
/// `<Kind> in version "v1" cannot be handled as a <Kind>: ...`).
#[derive(Debug)]
pub struct DecodeError(pub String);

struct Decoder {
    /// The first type mismatch (Go keeps decoding and reports it at the end).
    type_error: Option<String>,
    unknown: Vec<String>,
}

fn json_type(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// The Go type of a shape, as `UnmarshalTypeError` prints it.
fn go_type(schema: &Value) -> String {
    if let Some(t) = schema.get("x-go-type").and_then(Value::as_str) {
        return t.to_string();
    }
    match schema.get("x-go").and_then(Value::as_str) {
        Some("Time") => return "v1.Time".into(),
        Some("MicroTime") => return "v1.MicroTime".into(),
        Some("[]byte") => return "[]uint8".into(),
        Some("Quantity") => return "resource.Quantity".into(),
        Some("IntOrString") => return "intstr.IntOrString".into(),
        Some("any") => return "interface {}".into(),
        _ => {}
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => "string".into(),
        Some("boolean") => "bool".into(),
        Some("integer") => match schema.get("format").and_then(Value::as_str) {
            Some("int32") => "int32".into(),
            _ => "int64".into(),
        },
        Some("array") => format!("[]{}", go_type(&schema["items"])),
        Some("object") => format!("map[string]{}", go_type(&schema["additionalProperties"])),
        _ => "interface {}".into(),
    }
}

impl Decoder {
    fn mismatch(&mut self, value_desc: String, go_struct: &str, path: &str, schema: &Value) {
        if self.type_error.is_none() {
            self.type_error = Some(if go_struct.is_empty() {
                format!(
                    "json: cannot unmarshal {value_desc} into Go value of type {}",
                    go_type(schema)
                )
            } else {
                format!(
                    "json: cannot unmarshal {value_desc} into Go struct field {go_struct}.{path} of type {}",
                    go_type(schema)
                )
            });
        }
    }

    /// Decodes `value` as `schema`; `go_struct` is the Go struct holding it and `path` its field
    /// path (for messages). Returns the value as stored, `None` for a value Go leaves unset.
    fn decode(
        &mut self,
        value: &Value,
        schema: &Value,
        go_struct: &str,
        path: &str,
        // The path the strict decoder names unknown fields by (list items indexed).
        strict: &str,
    ) -> Result<Option<Value>, DecodeError> {
        if value.is_null() {
            return Ok(None);
        }
        match schema.get("x-go").and_then(Value::as_str) {
            Some("any") => return Ok(Some(value.clone())),
            Some(kind @ ("Time" | "MicroTime")) => {
                let Value::String(text) = value else {
                    return Err(DecodeError(format!(
                        "json: cannot unmarshal {} into Go value of type string",
                        json_type(value)
                    )));
                };
                let layout = if kind == "Time" {
                    Layout::Rfc3339
                } else {
                    Layout::Rfc3339Micro
                };
                return gotime::normalize(text, layout)
                    .map(|t| Some(Value::String(t)))
                    .map_err(DecodeError);
            }
            Some("[]byte") => {
                let Value::String(text) = value else {
                    self.mismatch(json_type(value), go_struct, path, schema);
                    return Ok(None);
                };
                return match base64::engine::general_purpose::STANDARD.decode(text) {
                    Ok(_) => Ok(Some(value.clone())),
                    Err(e) => Err(DecodeError(base64_error(text, &e))),
                };
            }
            Some("Quantity") => {
                return match value {
                    Value::String(text) if is_quantity(text) => Ok(Some(value.clone())),
                    Value::Number(n) => Ok(Some(Value::String(n.to_string()))),
                    _ => Err(DecodeError(
                        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                            .into(),
                    )),
                };
            }
            Some("IntOrString") => {
                return match value {
                    Value::String(_) => Ok(Some(value.clone())),
                    Value::Number(n) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => {
                        Ok(Some(value.clone()))
                    }
                    other => Err(DecodeError(format!(
                        "json: cannot unmarshal {} into Go value of type int32",
                        number_desc(other)
                    ))),
                };
            }
            _ => {}
        }
        let wanted = schema.get("type").and_then(Value::as_str).unwrap_or("");
        match (wanted, value) {
            ("string", Value::String(_)) | ("boolean", Value::Bool(_)) => Ok(Some(value.clone())),
            ("integer", Value::Number(n)) => {
                let fits = match schema.get("format").and_then(Value::as_str) {
                    Some("int32") => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                    _ => n.as_i64().is_some(),
                };
                if fits {
                    Ok(Some(value.clone()))
                } else {
                    self.mismatch(number_desc(value), go_struct, path, schema);
                    Ok(None)
                }
            }
            ("array", Value::Array(items)) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let item_path = format!("{strict}[{i}]");
                    let decoded =
                        self.decode(item, &schema["items"], go_struct, path, &item_path)?;
                    out.push(decoded.unwrap_or(Value::Null));
                }
                Ok(Some(Value::Array(out)))
            }
            ("object", Value::Object(map)) => {
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    let struct_name = schema
                        .get("x-go-type")
                        .and_then(Value::as_str)
                        .map(|t| t.rsplit('.').next().unwrap_or(t))
                        .unwrap_or(go_struct);
                    let mut out = Map::new();
                    for (key, child) in map {
                        let child_path = join(path, key);
                        let child_strict = join(strict, key);
                        match properties.get(key) {
                            Some(child_schema) => {
                                if let Some(decoded) = self.decode(
                                    child,
                                    child_schema,
                                    struct_name,
                                    &child_path,
                                    &child_strict,
                                )? {
                                    out.insert(key.clone(), decoded);
                                }
                            }
                            None => self.unknown.push(child_strict),
                        }
                    }
                    Ok(Some(Value::Object(out)))
                } else {
                    let values = &schema["additionalProperties"];
                    let mut out = Map::new();
                    for (key, child) in map {
                        let child_strict = join(strict, key);
                        if let Some(decoded) =
                            self.decode(child, values, go_struct, path, &child_strict)?
                        {
                            out.insert(key.clone(), decoded);
                        } else if !child.is_null() {
                            continue;
                        } else {
                            out.insert(key.clone(), Value::Null);
                        }
                    }
                    Ok(Some(Value::Object(out)))
                }
            }
            _ => {
                self.mismatch(json_type(value), go_struct, path, schema);
                Ok(None)
            }
        }
    }
}

/// Whether `text` parses as a `resource.Quantity`: a signed decimal number and a suffix
/// (binary `Ki`..`Ei`, decimal `n`..`E`, or an `e`/`E` exponent).
fn is_quantity(text: &str) -> bool {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(split);
    let digits = number.chars().filter(char::is_ascii_digit).count();
    if digits == 0 || number.matches('.').count() > 1 {
        return false;
    }
    const SUFFIXES: &[&str] = &[
        "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    if SUFFIXES.contains(&suffix) {
        return true;
    }
    suffix
        .strip_prefix(['e', 'E'])
        .map(|exp| exp.strip_prefix(['+', '-']).unwrap_or(exp))
        .is_some_and(|exp| !exp.is_empty() && exp.chars().all(|c| c.is_ascii_digit()))
}

fn number_desc(value: &Value) -> String {
    match value {
        Value::Number(n) => format!("number {n}"),
        other => json_type(other),
    }
}

fn base64_error(text: &str, _error: &base64::DecodeError) -> String {
    // Go's base64 reports the offset of the first byte that is not base64 (or where the
    // padding goes wrong).
    let offset = text
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'='))
        .unwrap_or(text.len().saturating_sub(text.len() % 4));
    format!("illegal base64 data at input byte {offset}")
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// Decodes a request body of `kind` as kube-apiserver's JSON decoder does: the value as
/// stored (times normalized, unset fields dropped) and the paths of unknown fields.
pub fn decode(kind: &Kind, body: &Value) -> Result<(Value, Vec<String>), DecodeError> {
    decode_as(kind.shape(), body, "")
}

/// [`decode`] against any shape (e.g. [`object_meta_shape`]), the value found at `path`.
pub fn decode_as(
    shape: &Value,
    value: &Value,
    path: &str,
) -> Result<(Value, Vec<String>), DecodeError> {
    let mut decoder = Decoder {
        type_error: None,
        unknown: Vec::new(),
    };
    let decoded = decoder.decode(value, shape, "", path, path)?;
    if let Some(error) = decoder.type_error {
        return Err(DecodeError(error));
    }
    Ok((decoded.unwrap_or_else(|| json!({})), decoder.unknown))
}

/// How [`encode`] prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// `encoding/json` of the typed object: what the API answers with.
    Json,
    /// The unstructured converter's view the field manager works on: as printed, without
    /// `null`s (zero timestamps, unset lists and maps of fields without `omitempty`).
    FieldManager,
}

/// The zero object of `kind` as the field manager sees it (the live object of a create).
pub fn zero(kind: &Kind) -> Value {
    encode(kind, &json!({}), Encoding::FieldManager)
}

/// Prints a decoded object of `kind` as the API server prints the typed object.
pub fn encode(kind: &Kind, object: &Value, encoding: Encoding) -> Value {
    encode_as(kind.shape(), object, encoding)
}

/// [`encode`] against any shape.
pub fn encode_as(shape: &Value, value: &Value, encoding: Encoding) -> Value {
    encode_value(Some(value), shape, encoding).unwrap_or_else(|| json!({}))
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

/// The printed form of `value` (`None`: nothing printed for an unset value of a struct field
/// that is left out).
fn encode_value(value: Option<&Value>, schema: &Value, encoding: Encoding) -> Option<Value> {
    let pointer = schema.get("x-pointer") == Some(&json!(true));
    let omitempty = pointer || schema.get("x-omitempty") == Some(&json!(true));
    let present = value.filter(|v| !v.is_null());
    if pointer && present.is_none() {
        return None;
    }
    let go = schema.get("x-go").and_then(Value::as_str);
    let printed = match go {
        Some("Time" | "MicroTime") => present.cloned().unwrap_or(Value::Null),
        Some(_) => present.cloned().unwrap_or(Value::Null),
        None => match schema.get("type").and_then(Value::as_str) {
            Some("string") => present.cloned().unwrap_or_else(|| json!("")),
            Some("integer") => present.cloned().unwrap_or_else(|| json!(0)),
            Some("boolean") => present.cloned().unwrap_or_else(|| json!(false)),
            Some("array") => match present {
                Some(Value::Array(items)) => Value::Array(
                    items
                        .iter()
                        .map(|i| {
                            encode_value(Some(i), &schema["items"], encoding).unwrap_or(Value::Null)
                        })
                        .collect(),
                ),
                _ => Value::Null,
            },
            Some("object") if schema.get("properties").is_some() => {
                let properties = schema["properties"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                let mut out = Map::new();
                for (field, field_schema) in &properties {
                    let child = present.and_then(|p| p.get(field));
                    if let Some(printed) = encode_value(child, field_schema, encoding) {
                        out.insert(field.clone(), printed);
                    }
                }
                Value::Object(out)
            }
            Some("object") => match present {
                Some(Value::Object(map)) => Value::Object(
                    map.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                encode_value(Some(v), &schema["additionalProperties"], encoding)
                                    .unwrap_or(Value::Null),
                            )
                        })
                        .collect(),
                ),
                _ => Value::Null,
            },
            _ => present.cloned().unwrap_or(Value::Null),
        },
    };
    if pointer {
        return Some(printed);
    }
    let is_struct = schema.get("properties").is_some() || matches!(go, Some("Time" | "MicroTime"));
    match encoding {
        // encoding/json never leaves a struct out; a zero timestamp prints as null.
        Encoding::Json if omitempty && !is_struct && is_zero(&printed) => None,
        Encoding::Json => Some(printed),
        // The unstructured converter leaves out the same zero values (structs never), and
        // structured-merge-diff ignores nulls, except a zero metav1.Time struct, which the
        // converter keeps as a null (a new list item sent with one owns it).
        Encoding::FieldManager if printed.is_null() && matches!(go, Some("Time" | "MicroTime")) => {
            Some(printed)
        }
        Encoding::FieldManager if printed.is_null() => None,
        Encoding::FieldManager if omitempty && !is_struct && is_zero(&printed) => None,
        Encoding::FieldManager => Some(printed),
    }
}

// --- Defaults, preparation, admission ------------------------------------------------------

fn node_defaults(node: &mut Value) {
    // SetDefaults_NodeStatus: allocatable defaults to capacity.
    if let Some(capacity) = node["status"].get("capacity").cloned() {
        if node["status"].get("allocatable").is_none_or(Value::is_null) {
            node["status"]["allocatable"] = capacity;
        }
    }
    node_pod_cidrs(node);
}

/// The v1 -> internal -> v1 round trip of a decoded Node: the internal type has only
/// `podCIDRs`; `podCIDR` is authoritative when both are set and differ, fills an empty
/// `podCIDRs`, and is printed back as `podCIDRs[0]`.
fn node_pod_cidrs(node: &mut Value) {
    let Some(spec) = node.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let single = spec
        .get("podCIDR")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let first = spec
        .get("podCIDRs")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .and_then(Value::as_str)
        .map(str::to_string);
    if !single.is_empty() && first.as_deref() != Some(single.as_str()) {
        spec.insert("podCIDRs".into(), json!([single]));
    } else if let Some(first) = first {
        spec.insert("podCIDR".into(), json!(first));
    }
}

/// `leaseStrategy.PrepareForCreate`: without the CoordinatedLeaderElection feature (off by
/// default) a new Lease keeps no `strategy` or `preferredHolder`.
fn lease_prepare_create(lease: &mut Value) {
    if let Some(spec) = lease.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("strategy");
        spec.remove("preferredHolder");
    }
}

/// `nodeStrategy.PrepareForCreate`: the deprecated `spec.configSource` and `status.config`
/// are dropped from a new Node.
fn node_prepare_create(node: &mut Value) {
    for (part, field) in [("spec", "configSource"), ("status", "config")] {
        if let Some(map) = node.get_mut(part).and_then(Value::as_object_mut) {
            map.remove(field);
        }
    }
}

/// TaintNodesByCondition: a new Node is not ready until its kubelet says so.
fn taint_not_ready(node: &mut Value) {
    const KEY: &str = "node.kubernetes.io/not-ready";
    let spec = ensure(node, "spec");
    let taints = spec.entry("taints").or_insert_with(|| json!([]));
    if !taints.is_array() {
        *taints = json!([]);
    }
    if let Value::Array(list) = taints {
        let present = list
            .iter()
            .any(|t| t["key"] == KEY && t["effect"] == "NoSchedule");
        if !present {
            list.push(json!({ "key": KEY, "effect": "NoSchedule" }));
        }
    }
}

fn ensure<'a>(value: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    if !value.is_object() {
        *value = json!({});
    }
    let Value::Object(map) = value else {
        unreachable!("made an object above")
    };
    let entry = map.entry(field.to_string()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    match entry {
        Value::Object(inner) => inner,
        _ => unreachable!("made an object above"),
    }
}

fn namespace_defaults(namespace: &mut Value) {
    let name = namespace["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !name.is_empty() {
        let meta = ensure(namespace, "metadata");
        let labels = ensure_map(meta, "labels");
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    let status = ensure(namespace, "status");
    if status
        .get("phase")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        status.insert("phase".into(), json!("Active"));
    }
}

fn ensure_map<'a>(map: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    let entry = map.entry(field.to_string()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    match entry {
        Value::Object(inner) => inner,
        _ => unreachable!("made an object above"),
    }
}

fn namespace_prepare_create(namespace: &mut Value) {
    namespace["status"] = json!({ "phase": "Active" });
    let spec = ensure(namespace, "spec");
    let finalizers = spec.entry("finalizers").or_insert_with(|| json!([]));
    if !finalizers.is_array() {
        *finalizers = json!([]);
    }
    if let Value::Array(list) = finalizers {
        if !list.iter().any(|f| f == "kubernetes") {
            list.push(json!("kubernetes"));
        }
    }
}

fn secret_defaults(secret: &mut Value) {
    if secret["type"].as_str().unwrap_or("").is_empty() {
        secret["type"] = json!("Opaque");
    }
    // stringData is write-only: merged into data (base64) when decoded.
    if let Some(Value::Object(string_data)) =
        secret.as_object_mut().and_then(|m| m.remove("stringData"))
    {
        let data = ensure(secret, "data");
        for (key, value) in string_data {
            let text = value.as_str().unwrap_or_default();
            data.insert(
                key,
                json!(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
}

fn service_defaults(service: &mut Value) {
    let spec = ensure(service, "spec");
    let service_type = spec
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .unwrap_or("ClusterIP")
        .to_string();
    spec.insert("type".into(), json!(service_type));
    if spec
        .get("sessionAffinity")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        spec.insert("sessionAffinity".into(), json!("None"));
    }
    if service_type != "ExternalName"
        && spec.get("internalTrafficPolicy").is_none_or(Value::is_null)
    {
        spec.insert("internalTrafficPolicy".into(), json!("Cluster"));
    }
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            if port
                .get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                port.insert("protocol".into(), json!("TCP"));
            }
            let target_unset = port
                .get("targetPort")
                .is_none_or(|t| t.is_null() || t == &json!(0) || t == &json!(""));
            if target_unset {
                if let Some(number) = port.get("port").cloned() {
                    port.insert("targetPort".into(), number);
                }
            }
        }
    }
}

fn service_prepare_create(service: &mut Value) {
    service["status"] = json!({ "loadBalancer": {} });
}

fn binding_defaults(binding: &mut Value) {
    // SetDefaults_RoleBinding / SetDefaults_ClusterRoleBinding: the RBAC group for the role.
    let role_ref = ensure(binding, "roleRef");
    if role_ref
        .get("apiGroup")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        role_ref.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
    }
    // SetDefaults_Subject: the RBAC group for users and groups.
    if let Some(Value::Array(subjects)) = binding.get_mut("subjects") {
        for subject in subjects.iter_mut().filter_map(Value::as_object_mut) {
            let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
            let group_unset = subject
                .get("apiGroup")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty();
            if group_unset && matches!(kind, "User" | "Group") {
                subject.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
            }
        }
    }
}

// --- Validation ----------------------------------------------------------------------------

fn validate_node(node: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&node["metadata"], false, NameRule::DnsSubdomain);
    errs.extend(node_taints(node));
    errs.extend(node_pod_cidr_values(node));
    errs
}

fn validate_node_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta_update(new, old);
    let cidrs = |node: &Value| -> Vec<Value> {
        node["spec"]["podCIDRs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // Only the controller manager's first assignment (from none) is allowed.
    let (old_cidrs, new_cidrs) = (cidrs(old), cidrs(new));
    if !old_cidrs.is_empty() {
        let changed = if old_cidrs.len() != new_cidrs.len() {
            1
        } else {
            old_cidrs
                .iter()
                .zip(&new_cidrs)
                .filter(|(a, b)| a != b)
                .count()
        };
        for _ in 0..changed {
            errs.push(FieldError::forbidden(
                "spec.podCIDRs",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
    }
    let old_provider = field_text(old, "spec", "providerID");
    if !old_provider.is_empty() && old_provider != field_text(new, "spec", "providerID") {
        errs.push(FieldError::forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    errs.extend(node_taints(new));
    errs
}

fn field_text<'a>(object: &'a Value, part: &str, field: &str) -> &'a str {
    object[part][field].as_str().unwrap_or_default()
}

/// `ValidateNode` on `spec.podCIDRs`: each a CIDR, and more than one only as a dual-stack pair.
fn node_pod_cidr_values(node: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let cidrs: Vec<&str> = node["spec"]["podCIDRs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap_or_default())
        .collect();
    let mut families = Vec::new();
    for (i, cidr) in cidrs.iter().enumerate() {
        match parse_cidr(cidr) {
            Some(v6) => families.push(v6),
            None => errs.push(FieldError::invalid(
                &format!("spec.podCIDRs[{i}]"),
                BadValue::Str(cidr.to_string()),
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            )),
        }
    }
    let dual_stack = families.len() == 2 && families[0] != families[1];
    if cidrs.len() > 1 && (!dual_stack || cidrs.len() > 2) {
        errs.push(FieldError::invalid(
            "spec.podCIDRs",
            BadValue::Printed(json!(cidrs).to_string()),
            "may specify no more than one CIDR for each IP family",
        ));
    }
    errs
}

/// Whether `text` is a CIDR (`address/prefix`): `Some(true)` for IPv6, `Some(false)` for IPv4.
fn parse_cidr(text: &str) -> Option<bool> {
    let (address, prefix) = text.split_once('/')?;
    let prefix: u8 = prefix.parse().ok()?;
    match address.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(_) if prefix <= 32 => Some(false),
        std::net::IpAddr::V6(_) if prefix <= 128 => Some(true),
        _ => None,
    }
}

fn node_taints(node: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    for (i, taint) in node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        // ValidateNode validates the taints under `metadata` (its field path), not `spec`.
        let path = format!("metadata.taints[{i}]");
        let key = taint["key"].as_str().unwrap_or_default();
        for msg in meta::label_key(key) {
            errs.push(FieldError::invalid(
                &format!("{path}.key"),
                BadValue::Str(key.into()),
                msg,
            ));
        }
        let value = taint["value"].as_str().unwrap_or_default();
        for msg in meta::label_value(value) {
            errs.push(FieldError::invalid(
                &format!("{path}.value"),
                BadValue::Str(value.into()),
                msg,
            ));
        }
        let effect = taint["effect"].as_str().unwrap_or_default();
        if effect.is_empty() {
            errs.push(FieldError::required(&format!("{path}.effect"), ""));
        } else if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            errs.push(FieldError::not_supported(
                &format!("{path}.effect"),
                BadValue::Str(effect.into()),
                &[
                    "NoSchedule".into(),
                    "PreferNoSchedule".into(),
                    "NoExecute".into(),
                ],
            ));
        }
        let pair = (key.to_string(), effect.to_string());
        if seen.contains(&pair) {
            errs.push(FieldError::duplicate(
                &path,
                // The internal core.Taint, which has no JSON tags.
                BadValue::Printed(format!(
                    "{{\"Key\":{},\"Value\":{},\"Effect\":{},\"TimeAdded\":null}}",
                    json!(key),
                    json!(value),
                    json!(effect)
                )),
            ));
            if let Some(last) = errs.last_mut() {
                last.detail = "taints must be unique by key and effect pair".into();
            }
        } else {
            seen.push(pair);
        }
    }
    errs
}

fn validate_namespace(namespace: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&namespace["metadata"], false, NameRule::DnsLabel);
    // ValidateNamespace names the list, not the item.
    for finalizer in namespace["spec"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = finalizer.as_str().unwrap_or_default();
        for msg in meta::label_key(name) {
            errs.push(FieldError::invalid(
                "spec.finalizers",
                BadValue::Str(name.into()),
                msg,
            ));
        }
        errs.extend(kube_finalizer_name(name, "spec.finalizers"));
    }
    errs
}

/// `ValidateNamespaceUpdate`, and `ValidateNamespaceStatusUpdate`'s phase rule (only a
/// status update can change the phase; the main strategy keeps the stored one).
fn validate_namespace_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta_update(new, old);
    let phase = new["status"]["phase"].as_str().unwrap_or_default();
    let (wanted, detail) = if new["metadata"].get("deletionTimestamp").is_none() {
        (
            "Active",
            "may only be 'Active' if `deletionTimestamp` is empty",
        )
    } else {
        (
            "Terminating",
            "may only be 'Terminating' if `deletionTimestamp` is not empty",
        )
    };
    if phase != wanted {
        errs.push(FieldError::invalid(
            "status.Phase",
            BadValue::Str(phase.into()),
            detail,
        ));
    }
    errs
}

/// The finalizers Kubernetes itself defines (`IsStandardFinalizerName`).
const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

/// `validateKubeFinalizerName`: a built-in object's finalizer without a `/` must be one of the
/// standard ones.
pub fn kube_finalizer_name(name: &str, path: &str) -> Option<FieldError> {
    (!name.contains('/') && !STANDARD_FINALIZERS.contains(&name)).then(|| {
        FieldError::invalid(
            path,
            BadValue::Str(name.into()),
            "name is neither a standard finalizer name nor is it fully qualified",
        )
    })
}

/// Kubernetes' limit on ConfigMap and Secret data (`MaxSecretSize`).
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

fn data_keys(object: &Value, field: &str, errs: &mut Vec<FieldError>) -> usize {
    let mut size = 0;
    for (key, value) in object[field].as_object().into_iter().flatten() {
        for msg in meta::config_map_key(key) {
            errs.push(FieldError::invalid(
                &format!("{field}[{key}]"),
                BadValue::Str(key.clone()),
                msg,
            ));
        }
        let text = value.as_str().unwrap_or_default();
        size += if field == "binaryData" || field == "data" && is_base64_field(object) {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map(|b| b.len())
                .unwrap_or(text.len())
        } else {
            text.len()
        };
    }
    size
}

/// Secret data is base64 (`[]byte`); ConfigMap data is text.
fn is_base64_field(object: &Value) -> bool {
    object["kind"] == "Secret"
}

fn validate_config_map(config_map: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&config_map["metadata"], true, NameRule::DnsSubdomain);
    let mut size = data_keys(config_map, "data", &mut errs);
    size += data_keys(config_map, "binaryData", &mut errs);
    for key in config_map["binaryData"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if config_map["data"].get(key).is_some() {
            errs.push(FieldError::invalid(
                &format!("data[{key}]"),
                BadValue::Str(key.clone()),
                "duplicate of key present in binaryData",
            ));
        }
    }
    if size > MAX_DATA_SIZE {
        errs.push(FieldError::too_long("[]", MAX_DATA_SIZE));
    }
    errs
}

fn immutable_data(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    if old["immutable"] == json!(true) {
        if new["immutable"] != json!(true) {
            errs.push(FieldError::forbidden(
                "immutable",
                "field is immutable when `immutable` is set",
            ));
        }
        for field in ["data", "binaryData"] {
            let same =
                new.get(field).filter(|v| !is_zero(v)) == old.get(field).filter(|v| !is_zero(v));
            if !same {
                errs.push(FieldError::forbidden(
                    field,
                    "field is immutable when `immutable` is set",
                ));
            }
        }
    }
}

fn validate_config_map_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta_update(new, old);
    immutable_data(new, old, &mut errs);
    let mut again = validate_config_map(new);
    again.retain(|e| !e.field.starts_with("metadata."));
    errs.extend(again);
    errs
}

fn validate_secret(secret: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&secret["metadata"], true, NameRule::DnsSubdomain);
    errs.extend(secret_data(secret));
    errs
}

/// `ValidateSecret` past ObjectMeta: the data keys and size, and the keys each type needs.
fn secret_data(secret: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let size = data_keys(secret, "data", &mut errs);
    if size > MAX_DATA_SIZE {
        errs.push(FieldError::too_long("data", MAX_DATA_SIZE));
    }
    let data = secret["data"].as_object();
    let has = |key: &str| data.is_some_and(|d| d.contains_key(key));
    let required = |key: &str| FieldError::required(&format!("data[{key}]"), "");
    // A well-formed JSON object, as `json.Unmarshal` into a map checks it.
    let json_object = |key: &str| -> Option<FieldError> {
        let text = data?.get(key)?.as_str().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap_or_default();
        let why = match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(_)) => return None,
            Ok(other) => format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                json_type(&other)
            ),
            Err(e) => e.to_string(),
        };
        Some(FieldError::invalid(
            &format!("data[{key}]"),
            BadValue::Str("<secret contents redacted>".into()),
            why,
        ))
    };
    match secret["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let name = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                .as_str()
                .unwrap_or_default();
            if name.is_empty() {
                errs.push(FieldError::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        kind @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
            let key = if kind.ends_with("json") {
                ".dockerconfigjson"
            } else {
                ".dockercfg"
            };
            if !has(key) {
                errs.push(required(key));
            } else {
                errs.extend(json_object(key));
            }
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(required("username"));
            errs.push(required("password"));
        }
        "kubernetes.io/ssh-auth" => {
            let key = data
                .and_then(|d| d.get("ssh-privatekey"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if key.is_empty() {
                errs.push(required("ssh-privatekey"));
            }
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    errs.push(required(key));
                }
            }
        }
        _ => {}
    }
    errs
}

fn validate_secret_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta_update(new, old);
    if new["type"] != old["type"] {
        errs.push(FieldError::invalid(
            "type",
            BadValue::of(&new["type"]),
            "field is immutable",
        ));
    }
    immutable_data(new, old, &mut errs);
    errs.extend(secret_data(new));
    errs
}

fn validate_service(service: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&service["metadata"], true, NameRule::DnsLabel);
    let spec = &service["spec"];
    let headless = spec["clusterIP"] == "None";
    let ports = spec["ports"].as_array().map_or(0, Vec::len);
    if ports == 0 && !headless && spec["type"] != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    for (i, port) in spec["ports"].as_array().into_iter().flatten().enumerate() {
        let number = port["port"].as_i64().unwrap_or(0);
        if !(1..=65535).contains(&number) {
            errs.push(FieldError::invalid(
                &format!("spec.ports[{i}].port"),
                BadValue::Int(number),
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
    errs
}

fn validate_service_account(account: &Value) -> Vec<FieldError> {
    meta::validate_create(&account["metadata"], true, NameRule::DnsSubdomain)
}

fn validate_lease(lease: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&lease["metadata"], true, NameRule::DnsSubdomain);
    errs.extend(lease_spec(lease));
    errs
}

fn validate_lease_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta_update(new, old);
    errs.extend(lease_spec(new));
    errs
}

fn lease_spec(lease: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &lease["spec"];
    if let Some(duration) = spec["leaseDurationSeconds"].as_i64() {
        if duration <= 0 {
            errs.push(FieldError::invalid(
                "spec.leaseDurationSeconds",
                BadValue::Int(duration),
                "must be greater than 0",
            ));
        }
    }
    if let Some(transitions) = spec["leaseTransitions"].as_i64() {
        if transitions < 0 {
            errs.push(FieldError::invalid(
                "spec.leaseTransitions",
                BadValue::Int(transitions),
                "must be greater than or equal to 0",
            ));
        }
    }
    if spec.get("preferredHolder").is_some_and(|p| !p.is_null())
        && spec.get("strategy").is_none_or(Value::is_null)
    {
        errs.push(FieldError::forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        ));
    }
    errs
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// `legacyValidateEvent` and the strict events.k8s.io/v1 rules of `ValidateEventCreate`, with
/// the internal Event's field names (`involvedObject`, `message`, `source`, ...).
fn validate_event(event: &Value) -> Vec<FieldError> {
    let mut errs = legacy_event(event);
    errs.extend(meta::validate_create(
        &event["metadata"],
        true,
        NameRule::DnsSubdomain,
    ));
    errs.extend(event_series(event));
    if event.get("eventTime").is_none_or(Value::is_null) {
        errs.push(FieldError::required("eventTime", ""));
    }
    let event_type = text(event, "type");
    if event_type != "Normal" && event_type != "Warning" {
        errs.push(FieldError::invalid(
            "type",
            BadValue::Str(String::new()),
            format!("has invalid value: {event_type}"),
        ));
    }
    for (field, internal) in [
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
    ] {
        if event.get(field).is_some_and(|t| !t.is_null()) {
            errs.push(FieldError::invalid(
                internal,
                BadValue::Str(String::new()),
                "needs to be unset",
            ));
        }
    }
    if event["deprecatedCount"].as_i64().unwrap_or(0) != 0 {
        errs.push(FieldError::invalid(
            "count",
            BadValue::Str(String::new()),
            "needs to be unset",
        ));
    }
    let source = &event["deprecatedSource"];
    if !text(source, "component").is_empty() || !text(source, "host").is_empty() {
        errs.push(FieldError::invalid(
            "source",
            BadValue::Str(String::new()),
            "needs to be unset",
        ));
    }
    errs
}

fn event_series(event: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(series) = event.get("series").filter(|s| !s.is_null()) {
        if series["count"].as_i64().unwrap_or(0) < 2 {
            errs.push(FieldError::invalid(
                "series.count",
                BadValue::Str(String::new()),
                "should be at least 2",
            ));
        }
        if series.get("lastObservedTime").is_none_or(Value::is_null) {
            errs.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    errs
}

fn legacy_event(event: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let namespace = event["metadata"]["namespace"].as_str().unwrap_or_default();
    let involved_namespace = text(&event["regarding"], "namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            BadValue::Str(involved_namespace.into()),
            "does not match event.namespace",
        )
    };
    if event.get("eventTime").is_none_or(Value::is_null) {
        if involved_namespace.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                errs.push(mismatch());
            }
        } else if namespace != involved_namespace {
            errs.push(mismatch());
        }
    } else {
        if involved_namespace.is_empty() && namespace != "default" && namespace != "kube-system" {
            errs.push(mismatch());
        }
        let controller = text(event, "reportingController");
        if controller.is_empty() {
            errs.push(FieldError::required("reportingController", ""));
        }
        for msg in meta::label_key(controller) {
            errs.push(FieldError::invalid(
                "reportingController",
                BadValue::Str(controller.into()),
                msg,
            ));
        }
        for (field, internal, limit) in [
            ("reportingInstance", "reportingInstance", 128),
            ("action", "action", 128),
            ("reason", "reason", 128),
        ] {
            let value = text(event, field);
            if value.is_empty() {
                errs.push(FieldError::required(internal, ""));
            }
            if value.len() > limit {
                errs.push(FieldError::invalid(
                    internal,
                    BadValue::Str(String::new()),
                    format!("can have at most {limit} characters"),
                ));
            }
        }
        if text(event, "note").len() > 1024 {
            errs.push(FieldError::invalid(
                "message",
                BadValue::Str(String::new()),
                "can have at most 1024 characters",
            ));
        }
    }
    for msg in meta::dns1123_subdomain(namespace) {
        errs.push(FieldError::invalid(
            "namespace",
            BadValue::Str(namespace.into()),
            msg,
        ));
    }
    errs
}

/// `ValidateEventCreate` of a core v1 request: only the legacy rules (on the events.k8s.io
/// form, the reporting controller named `reportingComponent`) and ObjectMeta.
fn validate_core_event(event: &Value) -> Vec<FieldError> {
    let mut errs = core_legacy_event(event);
    errs.extend(meta::validate_create(
        &event["metadata"],
        true,
        NameRule::DnsSubdomain,
    ));
    errs
}

fn validate_core_event_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = core_legacy_event(new);
    errs.extend(meta_update(new, old));
    errs
}

fn core_legacy_event(event: &Value) -> Vec<FieldError> {
    let Some(events) = lookup("events.k8s.io", "Event") else {
        return Vec::new();
    };
    let mut errs = legacy_event(&convert(events, event));
    for err in &mut errs {
        if err.field == "reportingController" {
            err.field = "reportingComponent".into();
        }
    }
    errs
}

fn validate_event_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = legacy_event(new);
    errs.extend(meta_update(new, old));
    if new.get("series") != old.get("series") {
        errs.extend(event_series(new));
    }
    for (field, internal) in [
        ("regarding", "involvedObject"),
        ("reason", "reason"),
        ("note", "message"),
        ("deprecatedSource", "source"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("type", "type"),
        ("eventTime", "eventTime"),
        ("action", "action"),
        ("related", "related"),
        ("reportingController", "reportingController"),
        ("reportingInstance", "reportingInstance"),
    ] {
        let (a, b) = (
            new.get(field).unwrap_or(&Value::Null),
            old.get(field).unwrap_or(&Value::Null),
        );
        if a != b && !(is_zero(a) && is_zero(b)) {
            errs.push(FieldError::invalid(
                internal,
                BadValue::of(a),
                "field is immutable",
            ));
        }
    }
    errs
}

fn policy_rule_errors(object: &Value, errs: &mut Vec<FieldError>) {
    for (i, rule) in object["rules"].as_array().into_iter().flatten().enumerate() {
        let path = format!("rules[{i}]");
        let count = |field: &str| rule[field].as_array().map_or(0, Vec::len);
        if count("verbs") == 0 {
            errs.push(FieldError::required(
                &format!("{path}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        if count("nonResourceURLs") > 0 {
            if object["kind"] == "Role" {
                errs.push(FieldError::invalid(
                    &format!("{path}.nonResourceURLs"),
                    BadValue::Printed(format!("{:?}", rule["nonResourceURLs"])),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if count("apiGroups") > 0 || count("resources") > 0 || count("resourceNames") > 0 {
                errs.push(FieldError::invalid(
                    &format!("{path}.nonResourceURLs"),
                    BadValue::Printed(format!("{:?}", rule["nonResourceURLs"])),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if count("apiGroups") == 0 {
            errs.push(FieldError::required(
                &format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if count("resources") == 0 {
            errs.push(FieldError::required(
                &format!("{path}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

fn validate_role(role: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&role["metadata"], true, NameRule::PathSegment);
    policy_rule_errors(role, &mut errs);
    errs
}

fn validate_role_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta_update(new, old);
    policy_rule_errors(new, &mut errs);
    errs
}

fn validate_cluster_role(role: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&role["metadata"], false, NameRule::PathSegment);
    policy_rule_errors(role, &mut errs);
    errs
}

fn validate_cluster_role_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta_update(new, old);
    policy_rule_errors(new, &mut errs);
    errs
}

fn binding_errors(binding: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
    let role_ref = &binding["roleRef"];
    if text(role_ref, "apiGroup") != "rbac.authorization.k8s.io" {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            BadValue::Str(text(role_ref, "apiGroup").into()),
            &["rbac.authorization.k8s.io".into()],
        ));
    }
    let allowed: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = text(role_ref, "kind");
    if !allowed.contains(&kind) {
        errs.push(FieldError::not_supported(
            "roleRef.kind",
            BadValue::Str(kind.into()),
            &allowed.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
        ));
    }
    let name = text(role_ref, "name");
    if name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    } else {
        for msg in meta::path_segment(name, false) {
            errs.push(FieldError::invalid(
                "roleRef.name",
                BadValue::Str(name.into()),
                msg,
            ));
        }
    }
    for (i, subject) in binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("subjects[{i}]");
        if text(subject, "name").is_empty() {
            errs.push(FieldError::required(&format!("{path}.name"), ""));
        }
        let kind = text(subject, "kind");
        match kind {
            "ServiceAccount" => {
                if !namespaced && text(subject, "namespace").is_empty() {
                    errs.push(FieldError::required(&format!("{path}.namespace"), ""));
                }
            }
            "User" | "Group" => {}
            other => errs.push(FieldError::not_supported(
                &format!("{path}.kind"),
                BadValue::Str(other.into()),
                &["ServiceAccount".into(), "User".into(), "Group".into()],
            )),
        }
    }
}

fn validate_role_binding(binding: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&binding["metadata"], true, NameRule::PathSegment);
    binding_errors(binding, true, &mut errs);
    errs
}

fn validate_role_binding_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta_update(new, old);
    binding_errors(new, true, &mut errs);
    if new["roleRef"] != old["roleRef"] {
        errs.push(FieldError::invalid(
            "roleRef",
            BadValue::Omit,
            "cannot change roleRef",
        ));
    }
    errs
}

fn validate_cluster_role_binding(binding: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_create(&binding["metadata"], false, NameRule::PathSegment);
    binding_errors(binding, false, &mut errs);
    errs
}

fn validate_cluster_role_binding_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = meta_update(new, old);
    binding_errors(new, false, &mut errs);
    if new["roleRef"] != old["roleRef"] {
        errs.push(FieldError::invalid(
            "roleRef",
            BadValue::Omit,
            "cannot change roleRef",
        ));
    }
    errs
}
