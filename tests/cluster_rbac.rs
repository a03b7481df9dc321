//! The RBAC in `config/deploy/rbac.yaml` (the original's job) and
//! `config/deploy/extras/rbac.yaml` (the features beyond it) is exactly what
//! `machine-config-server start` uses with every feature on (`--advertise-failure-reporting`
//! too: it reads the Infrastructure).
//!
//! The real binary runs a full life against the fake API server, which logs every request the
//! way the real API server's authorizer sees it (verb, API group, resource/subresource,
//! namespace, and the name, including the one a `metadata.name` field selector pins for list
//! and watch): caches sync, a node boots and joins (its MachineConfigNode is created and gets
//! its status), the node is removed (its MachineConfigNode is deleted after a direct read of
//! the Node), the publisher's Lease is taken, renewed and released at shutdown; the lease holder
//! publishes Kubernetes Events (the node's first config; a pool that cannot be rendered, then
//! renders, then cannot again: the repeat is a patch of the same Event). Then:
//! - every request is granted by a rule bound to the server's ServiceAccount (or, for its
//!   SelfSubjectAccessReviews, by Kubernetes' default `system:basic-user`);
//! - every (verb, resource, name) a rule grants was used: nothing more is granted.
//!
//! On a real kube-apiserver (`KUBEBUILDER_ASSETS`) the request log is its audit log. A second
//! test runs the binary as the ServiceAccount itself with `config/deploy/` applied: the API
//! server's RBAC (kube-apiserver's, or the in-test server's model of it) forbids none of its
//! requests.

use std::collections::BTreeSet;
use std::time::Duration;
use support::mcs;

use mcs::{poll, Server};
use serde::Deserialize;
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options, RequestRecord};
use support::cluster::{
    copy_rendered_config, load_realistic_cluster, node_with_roles, pool_at, token_dir,
    APISERVER_URL, WORKER_RENDERED,
};

const DEADLINE: Duration = Duration::from_secs(30);
/// Short MachineConfigNode publisher timings, so that the Lease is renewed during a run.
const MCN_TIMINGS: &[(&str, &str)] = &[
    ("MCS_MCN_LEASE_DURATION_MS", "3000"),
    ("MCS_MCN_RENEW_DEADLINE_MS", "2000"),
    ("MCS_MCN_RENEW_PERIOD_MS", "200"),
    ("MCS_MCN_RETRY_PERIOD_MS", "200"),
    ("MCS_MCN_RESYNC_MS", "500"),
    ("MCS_MCN_DELETE_GRACE_MS", "1000"),
];
const SERVICE_ACCOUNT: (&str, &str) =
    ("openshift-machine-config-operator", "machine-config-server");

/// One RBAC rule, with the namespace it applies in (`None`: a ClusterRole, all namespaces).
#[derive(Debug)]
struct Rule {
    namespace: Option<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    verbs: Vec<String>,
    origin: String,
}

/// A permission a request needs, or a rule grants: (verb, group, resource[/subresource],
/// namespace, name).
type Permission = (String, String, String, Option<String>, Option<String>);

/// The RBAC manifests of a fresh deployment: the original's rights and the extras'.
const RBAC_FILES: [&str; 2] = ["rbac.yaml", "extras/rbac.yaml"];

fn rbac_rules() -> Vec<Rule> {
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/deploy");
    let docs: Vec<Value> = RBAC_FILES
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(deploy.join(file)).unwrap();
            serde_yaml::Deserializer::from_str(&text)
                .map(|d| Value::deserialize(d).unwrap())
                .filter(|d| !d.is_null())
                .collect::<Vec<Value>>()
        })
        .collect();
    let str_list = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    // Only roles bound to the server's ServiceAccount count.
    let bound: BTreeSet<(String, Option<String>, String)> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
        .filter(|d| {
            d["subjects"].as_array().is_some_and(|subjects| {
                subjects.iter().any(|s| {
                    s["kind"] == "ServiceAccount"
                        && s["namespace"] == SERVICE_ACCOUNT.0
                        && s["name"] == SERVICE_ACCOUNT.1
                })
            })
        })
        .map(|d| {
            let namespace = d["metadata"]["namespace"].as_str().map(str::to_owned);
            (
                d["roleRef"]["kind"].as_str().unwrap().to_owned(),
                namespace,
                d["roleRef"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut rules = Vec::new();
    for doc in &docs {
        let kind = doc["kind"].as_str().unwrap_or_default();
        if kind != "ClusterRole" && kind != "Role" {
            continue;
        }
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        let namespace = doc["metadata"]["namespace"].as_str().map(str::to_owned);
        let bound_here = match kind {
            "ClusterRole" => bound.contains(&("ClusterRole".into(), None, name.clone())),
            _ => bound.contains(&("Role".into(), namespace.clone(), name.clone())),
        };
        assert!(bound_here, "{kind} {name} is bound to the ServiceAccount");
        for rule in doc["rules"].as_array().unwrap() {
            rules.push(Rule {
                namespace: namespace.clone(),
                groups: str_list(&rule["apiGroups"]),
                resources: str_list(&rule["resources"]),
                names: str_list(&rule["resourceNames"]),
                verbs: str_list(&rule["verbs"]),
                origin: format!(
                    "{kind} {}{name}",
                    namespace
                        .as_deref()
                        .map(|n| format!("{n}/"))
                        .unwrap_or_default()
                ),
            });
        }
    }
    rules
}

/// Every permission kube-apiserver checks for `request` (an apply that creates needs `create`
/// as well as `patch`).
fn needed(request: &RequestRecord) -> Vec<Permission> {
    let resource = match &request.subresource {
        Some(sub) => format!("{}/{sub}", request.resource),
        None => request.resource.clone(),
    };
    request
        .authorized_verbs()
        .into_iter()
        .map(|verb| {
            // RBAC cannot restrict a create by name: the authorizer sees none.
            let name = request.name.clone().filter(|_| verb != "create");
            (
                verb.to_owned(),
                request.group.clone(),
                resource.clone(),
                request.namespace.clone(),
                name,
            )
        })
        .collect()
}

fn grants(rule: &Rule, (verb, group, resource, namespace, name): &Permission) -> bool {
    let has = |list: &[String], value: &str| list.iter().any(|v| v == "*" || v == value);
    (rule.namespace.is_none() || rule.namespace == *namespace)
        && has(&rule.groups, group)
        && has(&rule.resources, resource)
        && has(&rule.verbs, verb)
        && (rule.names.is_empty()
            || name
                .as_deref()
                .is_some_and(|n| rule.names.iter().any(|r| r == n)))
}

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "node-role.kubernetes.io/worker": ""}
        },
        "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}
    })
}

/// The cluster's Infrastructure, which `--advertise-failure-reporting` reads.
fn load_infrastructure(api: &ApiServer) {
    api.create(&json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
        "metadata": {"name": "cluster"}, "spec": {"platformSpec": {"type": "None"}}
    }))
    .unwrap();
}

/// The server in cluster mode with `kubeconfig` and every feature asked for, ready, having
/// served a worker its config.
fn start_and_serve_a_worker(kubeconfig: &std::path::Path, tokens: &std::path::Path) -> Server {
    let server = Server::start_cluster_with_flags(
        kubeconfig,
        APISERVER_URL,
        tokens,
        &["--advertise-failure-reporting"],
        MCN_TIMINGS,
    );
    poll("ready", DEADLINE, || {
        (mcs::request(server.metrics, None, "GET", "/readyz", &[]).status == 200).then_some(())
    });
    let accept = (
        "Accept",
        "application/vnd.coreos.ignition+json;version=3.5.0",
    );
    assert_eq!(server.http("GET", "/config/worker", &[accept]).status, 200);
    server
}

#[test]
fn rbac_grants_exactly_the_calls_the_server_makes() {
    let api = ApiServer::start(Options::default());
    load_realistic_cluster(&api);
    load_infrastructure(&api);
    pool_at(&api, "broken", "rendered-broken-missing");
    let tokens = token_dir();
    // A machine boots from this server and joins as a Node.
    let mut server = start_and_serve_a_worker(api.kubeconfig_file(), tokens.path());
    // Its served record is shared (the ConfigMap is created, then its key applied) before the
    // node joins; once the node exists the record is settled and may never be written.
    poll("the served record shared", DEADLINE, || {
        api.get(
            "ConfigMap",
            Some("openshift-machine-config-operator"),
            "machine-config-server-served-records",
        )
        .filter(|c| c["data"].as_object().is_some_and(|d| !d.is_empty()))
    });
    api.apply_object(&node("worker-0")).unwrap();
    poll("its MachineConfigNode with a status", DEADLINE, || {
        api.get("MachineConfigNode", None, "worker-0")
            .filter(|mcn| !mcn["status"].is_null())
    });
    // A Node of a pool with no rendered config yet: its MCN's desired config is `not-yet-set`,
    // and filled in (a conditional merge patch) once the pool has one.
    pool_at(&api, "fresh", "");
    api.apply_object(&node_with_roles(
        "fresh-0",
        "10.0.9.1",
        &["worker", "fresh"],
    ))
    .unwrap();
    poll("its MachineConfigNode", DEADLINE, || {
        api.get("MachineConfigNode", None, "fresh-0")
    });
    pool_at(&api, "fresh", WORKER_RENDERED);
    poll("its desired config filled in", DEADLINE, || {
        api.get("MachineConfigNode", None, "fresh-0")
            .filter(|mcn| mcn["spec"]["configVersion"]["desired"] == WORKER_RENDERED)
    });
    // A pool whose rendered config is missing, then present, then missing again: a Warning
    // Event is created, and its repeat patches the same Event's series.
    let broken_status = |status: u16| {
        poll(
            &format!("/config/broken answering {status}"),
            DEADLINE,
            || {
                let answer = server.http("GET", "/config/broken", &[]);
                (answer.status == status).then_some(())
            },
        )
    };
    broken_status(500);
    copy_rendered_config(&api, WORKER_RENDERED, "rendered-broken-missing");
    broken_status(200);
    api.delete("MachineConfig", None, "rendered-broken-missing")
        .unwrap();
    broken_status(500);
    poll("the repeated event patched", DEADLINE, || {
        // As a machine retries (the failure may first be met by the server's own re-render).
        server.http("GET", "/config/broken", &[]);
        api.requests()
            .iter()
            .any(|r| r.resource == "events" && r.verb == "patch")
            .then_some(())
    });
    poll("the node's first-config event", DEADLINE, || {
        api.list("events.events.k8s.io")
            .iter()
            .any(|e| e["reason"] == "FirstConfigServed")
            .then_some(())
    });
    poll("a Lease renewal", DEADLINE, || {
        api.requests()
            .iter()
            .any(|r| r.resource == "leases" && r.verb == "update")
            .then_some(())
    });
    // The machine is removed.
    api.delete("Node", None, "worker-0").unwrap();
    poll("its MachineConfigNode to be deleted", DEADLINE, || {
        api.get("MachineConfigNode", None, "worker-0")
            .is_none()
            .then_some(())
    });
    server.terminate();
    assert!(server.wait_exit(DEADLINE).success(), "{}", server.output());

    let rules = rbac_rules();
    let requests = api.requests();
    let mut used: BTreeSet<Permission> = BTreeSet::new();
    for request in &requests {
        assert!(
            !request.resource.is_empty(),
            "only resource requests are expected, got {} {}",
            request.method,
            request.path
        );
        // Every authenticated identity may ask what it may do (`system:basic-user`).
        if request.group == "authorization.k8s.io"
            && request.resource == "selfsubjectaccessreviews"
            && request.verb == "create"
        {
            continue;
        }
        for permission in needed(request) {
            assert!(
                rules.iter().any(|rule| grants(rule, &permission)),
                "{permission:?} ({} {}) is not granted by config/deploy/{{rbac.yaml,extras/rbac.yaml}}",
                request.method,
                request.path
            );
            used.insert(permission);
        }
    }

    // Nothing more: every (verb, resource, name) of every rule was needed by some request.
    for rule in &rules {
        for group in &rule.groups {
            for resource in &rule.resources {
                for verb in &rule.verbs {
                    let names: Vec<Option<&String>> = if rule.names.is_empty() {
                        vec![None]
                    } else {
                        rule.names.iter().map(Some).collect()
                    };
                    for name in names {
                        let exercised = used.iter().any(|(v, g, r, ns, n)| {
                            v == verb
                                && g == group
                                && r == resource
                                && (rule.namespace.is_none() || *ns == rule.namespace)
                                && name.is_none_or(|name| n.as_ref() == Some(name))
                        });
                        assert!(
                            exercised,
                            "{}: {verb} {group}/{resource} {name:?} is granted but never used",
                            rule.origin
                        );
                    }
                }
            }
        }
    }
}

/// The authorizer's view of the test above: the binary authenticated as its ServiceAccount (a
/// TokenRequest token) and authorized by the API server's own RBAC with `config/deploy/`
/// applied lives the same life, and the API server forbids none of its requests. On a real
/// kube-apiserver (`KUBEBUILDER_ASSETS`) that is kube-apiserver's RBAC authorizer; on the
/// in-test server its model of it (`tests/support/fake_apiserver/authz.rs`), which fails this
/// test with a 403 wherever `rbac.yaml` lacks a grant.
#[test]
fn the_api_server_forbids_none_of_the_service_accounts_requests() {
    let api = ApiServer::start(Options::default());
    // The namespaces the manifests write into exist first, as in a cluster.
    load_realistic_cluster(&api);
    load_infrastructure(&api);
    let deploy = mcs::repo().join("config/deploy");
    for manifest in ["serviceaccount.yaml", "rbac.yaml", "extras/rbac.yaml"] {
        if let Err(e) = api.load_yaml_file(deploy.join(manifest)) {
            panic!("{manifest}: {e}");
        }
    }
    let (namespace, name) = SERVICE_ACCOUNT;
    let token = api.token_for(namespace, name).unwrap();
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(kubeconfig.path(), api.kubeconfig_with_token(&token)).unwrap();
    let tokens = token_dir();
    let user = format!("system:serviceaccount:{namespace}:{name}");
    // A 403 ends the test at once (the server would otherwise retry until a deadline).
    let not_forbidden = || {
        let forbidden: Vec<RequestRecord> = api
            .requests_of(&user)
            .into_iter()
            .filter(|r| r.status == 403)
            .collect();
        assert!(
            forbidden.is_empty(),
            "the API server forbade {forbidden:#?}"
        );
    };
    let mut server = start_and_serve_a_worker(kubeconfig.path(), tokens.path());
    api.apply_object(&node("worker-0")).unwrap();
    poll("its MachineConfigNode with a status", DEADLINE, || {
        not_forbidden();
        api.get("MachineConfigNode", None, "worker-0")
            .filter(|mcn| !mcn["status"].is_null())
    });
    poll("a Lease renewal", DEADLINE, || {
        not_forbidden();
        api.requests_of(&user)
            .iter()
            .any(|r| r.resource == "leases" && r.verb == "update" && r.status == 200)
            .then_some(())
    });
    api.delete("Node", None, "worker-0").unwrap();
    poll("its MachineConfigNode to be deleted", DEADLINE, || {
        not_forbidden();
        api.get("MachineConfigNode", None, "worker-0")
            .is_none()
            .then_some(())
    });
    server.terminate();
    assert!(server.wait_exit(DEADLINE).success(), "{}", server.output());

    let requests = api.requests_of(&user);
    assert!(
        requests
            .iter()
            .any(|r| r.resource == "machineconfignodes" && r.verb == "create" && r.status == 201),
        "the ServiceAccount created the MachineConfigNode: {requests:#?}"
    );
    let forbidden: Vec<&RequestRecord> = requests.iter().filter(|r| r.status == 403).collect();
    assert!(
        forbidden.is_empty(),
        "the API server forbade {forbidden:#?}\n{}",
        server.output()
    );
}
