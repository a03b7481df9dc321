//! `machine-config-server cleanup`, the way back to the original, run as an operator runs it
//! after switching back: the real binary, against the API server of the test (the in-test one,
//! or a real kube-apiserver with `KUBEBUILDER_ASSETS`), as the ServiceAccount of
//! `config/deploy/cleanup/rbac.yaml`.
//!
//! A cluster-mode server runs and a machine boots from it and joins: the served-records
//! ConfigMap, the publisher's Lease, an MCN with our annotations and initial status, and an
//! Event exist. The MCO then writes on that MCN as it does (its operator an annotation by an
//! update, its daemon the status by a forced apply under `machine-config-operator`); another
//! MCN this server created is left alone by everyone; one more MCN was created by the MCO
//! itself, with an annotation under our prefix. Then:
//! - while the server runs, `--remove` removes nothing (a replica holds the Lease) and exits 2;
//! - the server stops (SIGTERM); a dry run lists each thing, changes nothing and exits 2;
//! - `--remove` removes them and exits 0; a second dry run lists nothing and exits 0;
//! - the MCO's annotation and status fields are still there, its MCN is untouched, and no MCN
//!   is deleted; the Events are left (counted);
//! - every request of the ServiceAccount was granted and every rule it has was used;
//! - with the API server gone, cleanup exits 1 with one line.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options, Scope};
use support::cluster::{
    lease_holder, load_realistic_cluster, token_dir, worker_node, APISERVER_URL, WORKER_RENDERED,
};
use support::mcs::{self, poll, Server};

const DEADLINE: Duration = Duration::from_secs(30);
const NAMESPACE: &str = "openshift-machine-config-operator";
const RECORDS: &str = "machine-config-server-served-records";
const LEASE: &str = "machine-config-server-mcn-publisher";
const MCN: &str = "MachineConfigNode";
const PREFIX: &str = "mcs.machineconfiguration.openshift.io/";
const OURS: &str = "machine-config-server-mcn";
const MCO: &str = "machine-config-operator";
const MCO_ANNOTATION: &str = "machineconfiguration.openshift.io/mco-note";
const SERVICE_ACCOUNT: &str = "machine-config-server-cleanup";
const MCN_TIMINGS: &[(&str, &str)] = &[
    ("POD_NAME", "mcs-cleanup-test"),
    ("NODE_NAME", "master-0"),
    ("MCS_MCN_LEASE_DURATION_MS", "3000"),
    ("MCS_MCN_RENEW_DEADLINE_MS", "2000"),
    ("MCS_MCN_RENEW_PERIOD_MS", "200"),
    ("MCS_MCN_RETRY_PERIOD_MS", "200"),
    ("MCS_MCN_RESYNC_MS", "300"),
];

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", self.stdout, self.stderr))
    }

    fn assert_code(&self, code: i32) {
        assert_eq!(
            self.code,
            Some(code),
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
    }
}

fn cleanup(kubeconfig: &std::path::Path, extra: &[&str]) -> Run {
    let output = Command::new(mcs::bin())
        .arg("cleanup")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(extra)
        // As an operator runs it: the default log.
        .env_remove("RUST_LOG")
        .output()
        .expect("cleanup runs");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The MCN the MCO's operator creates for a Node (`syncMachineConfigNodes`), with an
/// annotation under our prefix (whoever writes one there, it is theirs).
fn mco_mcn(name: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": MCN,
        "metadata": {
            "name": name,
            "annotations": {format!("{PREFIX}note"): "written by the MCO"}
        },
        "spec": {
            "node": {"name": name},
            "pool": {"name": "worker"},
            "configVersion": {"desired": "not-yet-set"}
        }
    })
}

/// `(kind, name)` and the fields of every item of a cleanup report.
fn items(report: &Value) -> Vec<(String, String, Vec<String>)> {
    report["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            let fields = item["fields"]
                .as_array()
                .map(|f| f.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            (
                item["kind"].as_str().unwrap().to_owned(),
                item["name"].as_str().unwrap().to_owned(),
                fields,
            )
        })
        .collect()
}

fn annotations(mcn: &Value) -> Vec<String> {
    mcn["metadata"]["annotations"]
        .as_object()
        .map(|a| a.keys().cloned().collect())
        .unwrap_or_default()
}

fn has_entry(mcn: &Value, manager: &str, subresource: Option<&str>) -> bool {
    mcn["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["manager"] == manager && e["subresource"].as_str() == subresource)
}

#[test]
fn cleanup_removes_only_what_this_server_wrote() {
    let api = ApiServer::start(Options::default());
    eprintln!("API server: {}", api.describe());
    load_realistic_cluster(&api);
    let rbac = mcs::repo().join("config/deploy/cleanup/rbac.yaml");
    api.load_yaml_file(&rbac).unwrap();
    let token = api.token_for(NAMESPACE, SERVICE_ACCOUNT).unwrap();
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(kubeconfig.path(), api.kubeconfig_with_token(&token)).unwrap();
    let kubeconfig = kubeconfig.path();

    // The MCO created an MCN for its Node before this server ran.
    api.create(&worker_node("worker-foreign", "10.0.0.99"))
        .unwrap();
    api.create_as(MCO, &mco_mcn("worker-foreign")).unwrap();

    // This server runs; a machine boots from it and joins as worker-one (its record is shared
    // through the ConfigMap first); worker-two joins without a record.
    let tokens = token_dir();
    let mut server = Server::start_cluster(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
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
    poll("the served record shared", DEADLINE, || {
        api.get("ConfigMap", Some(NAMESPACE), RECORDS)
            .filter(|c| c["data"].as_object().is_some_and(|d| !d.is_empty()))
    });
    api.create(&worker_node("worker-one", "127.0.0.1")).unwrap();
    api.create(&worker_node("worker-two", "10.0.0.12")).unwrap();
    for name in ["worker-one", "worker-two"] {
        poll(
            &format!("the MCN of {name} with its status"),
            DEADLINE,
            || {
                api.get(MCN, None, name)
                    .filter(|mcn| !mcn["status"].is_null() && has_entry(mcn, OURS, Some("status")))
            },
        );
    }
    poll("the bootstrap record of worker-one", DEADLINE, || {
        api.get(MCN, None, "worker-one").filter(|mcn| {
            mcn["metadata"]["annotations"][format!("{PREFIX}bootstrap-served-at")].is_string()
        })
    });
    poll("a lease holder", DEADLINE, || lease_holder(&api));
    poll("an Event of this server", DEADLINE, || {
        api.list("events.events.k8s.io").into_iter().find(|e| {
            e["reportingController"] == "machineconfiguration.openshift.io/machine-config-server"
        })
    });

    // The MCO writes on worker-one as it does: its operator's update keeps the object's
    // metadata and adds to it, its daemon applies the status it reports (forced).
    let mut mcn = api.get(MCN, None, "worker-one").unwrap();
    mcn["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    mcn["metadata"]["annotations"][MCO_ANNOTATION] = json!("kept");
    api.replace_as(MCO, &mcn, Scope::Main).unwrap();
    let reported = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": MCN,
        "metadata": {"name": "worker-one"},
        "status": {
            "conditions": [{
                "type": "Updated", "status": "True", "reason": "Updated",
                "message": "Node worker-one Updated by the daemon",
                "lastTransitionTime": "2030-01-01T00:00:00Z"
            }],
            "configVersion": {"current": WORKER_RENDERED, "desired": WORKER_RENDERED},
            "observedGeneration": 2
        }
    });
    api.apply_as(MCO, &reported, Scope::Status, true).unwrap();

    // While the server runs, nothing is removed.
    let refused = cleanup(kubeconfig, &["--remove", "--output", "json"]);
    refused.assert_code(2);
    let report = refused.json();
    assert!(
        report["holder"]["identity"]
            .as_str()
            .is_some_and(|h| h.starts_with("mcs-cleanup-test_")),
        "{report:#}"
    );
    assert!(
        report["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["outcome"]["result"] == "not-removed"),
        "{report:#}"
    );
    assert!(api.get("ConfigMap", Some(NAMESPACE), RECORDS).is_some());

    server.terminate();
    assert!(server.wait_exit(DEADLINE).success(), "{}", server.output());
    assert_eq!(lease_holder(&api), None, "released on the way out");
    let foreign_before = api.get(MCN, None, "worker-foreign").unwrap();
    let one_before = api.get(MCN, None, "worker-one").unwrap();

    // A dry run lists each thing and changes nothing.
    let dry = cleanup(kubeconfig, &["--output", "json"]);
    dry.assert_code(2);
    assert!(
        dry.stderr.contains("cleanup --remove removes them"),
        "{}",
        dry.stderr
    );
    let report = dry.json();
    let listed = items(&report);
    let kinds: BTreeSet<(&str, &str)> = listed
        .iter()
        .map(|(k, n, _)| (k.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            ("ConfigMap", RECORDS),
            ("Lease", LEASE),
            (MCN, "worker-one"),
            (MCN, "worker-two"),
        ]),
        "{report:#}"
    );
    let one: Vec<&Vec<String>> = listed
        .iter()
        .filter(|(_, n, _)| n == "worker-one")
        .map(|(_, _, f)| f)
        .collect();
    assert_eq!(one.len(), 2, "annotations and status: {report:#}");
    assert!(one[0].contains(&format!("{PREFIX}created-by")), "{one:?}");
    assert!(
        one[0].contains(&format!("{PREFIX}bootstrap-served-at")),
        "{one:?}"
    );
    assert!(one[0].iter().all(|k| k.starts_with(PREFIX)), "{one:?}");
    assert!(
        one[1]
            .iter()
            .any(|f| f.starts_with("status.conditions[type=UpdatePrepared]")),
        "{one:?}"
    );
    assert!(
        !one[1].iter().any(|f| f == "status.observedGeneration"),
        "the daemon's: {one:?}"
    );
    assert!(report["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["outcome"]["result"] == "listed"));
    assert!(
        report["events"]["count"].as_u64().unwrap() >= 1,
        "{report:#}"
    );
    let kept = report["kept"].as_array().unwrap();
    assert!(
        kept.iter()
            .any(|k| k["name"] == "worker-foreign" && k["why"].as_str().unwrap().contains(MCO)),
        "{report:#}"
    );
    assert_eq!(report["summary"]["left"], 6, "{report:#}");
    assert_eq!(
        api.get(MCN, None, "worker-one").unwrap()["metadata"]["resourceVersion"],
        one_before["metadata"]["resourceVersion"],
        "a dry run changes nothing"
    );
    let text = cleanup(kubeconfig, &[]);
    text.assert_code(2);
    for needle in [
        "ConfigMap openshift-machine-config-operator/machine-config-server-served-records",
        "MachineConfigNode worker-two",
        "kept on purpose:",
        "events: ",
        "6 left",
    ] {
        assert!(
            text.stdout.contains(needle),
            "{needle:?} in:\n{}",
            text.stdout
        );
    }

    // --remove removes them.
    let removed = cleanup(kubeconfig, &["--remove"]);
    removed.assert_code(0);
    assert!(
        removed.stdout.contains("nothing of this server is left"),
        "{}",
        removed.stdout
    );
    assert_eq!(api.get("ConfigMap", Some(NAMESPACE), RECORDS), None);
    assert_eq!(api.get("Lease", Some(NAMESPACE), LEASE), None);
    // worker-one: our annotations and status fields are gone, the MCO's are all there.
    let one = api.get(MCN, None, "worker-one").expect("never deleted");
    assert_eq!(annotations(&one), [MCO_ANNOTATION], "{one:#}");
    assert_eq!(one["metadata"]["annotations"][MCO_ANNOTATION], "kept");
    let status = &one["status"];
    assert_eq!(status["observedGeneration"], 2, "{one:#}");
    assert_eq!(status["configVersion"], reported["status"]["configVersion"]);
    let conditions = status["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1, "only the daemon's condition: {one:#}");
    let updated = &conditions[0];
    for field in ["type", "status", "reason", "message", "lastTransitionTime"] {
        assert_eq!(
            updated[field], reported["status"]["conditions"][0][field],
            "{field}: {one:#}"
        );
    }
    assert!(!has_entry(&one, OURS, Some("status")), "{one:#}");
    assert!(
        has_entry(&one, MCO, Some("status")) && has_entry(&one, MCO, None),
        "{one:#}"
    );
    assert_eq!(one["spec"], one_before["spec"], "the spec stays");
    // worker-two: only ours, now without our annotations and status; the object stays.
    let two = api.get(MCN, None, "worker-two").expect("never deleted");
    assert!(
        annotations(&two).iter().all(|k| !k.starts_with(PREFIX)),
        "{two:#}"
    );
    // What is left of its status is at most empty containers (kept by the API server when
    // it removes their last item, as structured-merge-diff keeps them).
    let status = &two["status"];
    assert!(
        status["conditions"].as_array().is_none_or(|c| c.is_empty()),
        "{two:#}"
    );
    assert!(status["observedGeneration"].is_null(), "{two:#}");
    assert!(status["configVersion"]["desired"].is_null(), "{two:#}");
    assert_eq!(two["spec"]["node"]["name"], "worker-two");
    // The MCO's own MCN: untouched.
    assert_eq!(api.get(MCN, None, "worker-foreign"), Some(foreign_before));

    // A second dry run lists nothing; the Events are left to expire.
    let again = cleanup(kubeconfig, &["--output", "json"]);
    again.assert_code(0);
    let report = again.json();
    assert_eq!(report["items"], json!([]), "{report:#}");
    assert_eq!(report["summary"]["left"], 0);
    assert!(
        report["events"]["count"].as_u64().unwrap() >= 1,
        "{report:#}"
    );

    // Every request of the ServiceAccount was granted, and every rule was used.
    let user = format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}");
    let requests = api.requests_of(&user);
    let forbidden: Vec<_> = requests.iter().filter(|r| r.status == 403).collect();
    assert!(forbidden.is_empty(), "forbidden: {forbidden:#?}");
    for (verb, group, resource, namespace, name) in granted(&rbac) {
        assert!(
            requests.iter().any(|r| {
                let full = match &r.subresource {
                    Some(sub) => format!("{}/{sub}", r.resource),
                    None => r.resource.clone(),
                };
                r.verb == verb
                    && r.group == group
                    && full == resource
                    && (namespace.is_none() || r.namespace == namespace)
                    && (name.is_none() || r.name == name)
                    && (200..300).contains(&r.status)
            }),
            "the rule {verb} {group}/{resource} {namespace:?} {name:?} is never used: {requests:#?}"
        );
    }

    // Without an API server: exit 1, one line.
    api.stop();
    let unreachable = cleanup(kubeconfig, &["--request-timeout-seconds", "5"]);
    unreachable.assert_code(1);
    assert_eq!(
        unreachable.stderr.trim().lines().count(),
        1,
        "{}",
        unreachable.stderr
    );
    assert!(
        unreachable.stderr.contains("cannot read"),
        "{}",
        unreachable.stderr
    );
}

/// Every (verb, group, resource, namespace, name) the manifest's roles grant.
type Grant = (String, String, String, Option<String>, Option<String>);

fn granted(manifest: &std::path::Path) -> Vec<Grant> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let doc = Value::deserialize(doc).unwrap();
        if doc["kind"] != "Role" && doc["kind"] != "ClusterRole" {
            continue;
        }
        let namespace = doc["metadata"]["namespace"].as_str().map(str::to_owned);
        for rule in doc["rules"].as_array().unwrap() {
            let names = strings(&rule["resourceNames"]);
            let names: Vec<Option<String>> = if names.is_empty() {
                vec![None]
            } else {
                names.into_iter().map(Some).collect()
            };
            for verb in strings(&rule["verbs"]) {
                for group in strings(&rule["apiGroups"]) {
                    for resource in strings(&rule["resources"]) {
                        for name in &names {
                            out.push((
                                verb.clone(),
                                group.clone(),
                                resource.clone(),
                                namespace.clone(),
                                name.clone(),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}
