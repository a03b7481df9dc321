use super::*;
use crate::mcn::matching::CLOCK_SKEW;
use crate::server::served::{Answer, ServedRecord};
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::api::MachineConfigPool;
use crate::snapshot::Mode;

const CREATED: i64 = 1_700_000_000;

fn node(name: &str, roles: &[&str], ip: &str, annotations: Value) -> Arc<Node> {
    let labels: serde_json::Map<String, Value> = roles
        .iter()
        .map(|r| (format!("node-role.kubernetes.io/{r}"), json!("")))
        .collect();
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "uid": format!("uid-{name}"),
                "creationTimestamp": "2023-11-14T22:13:20Z",
                "labels": labels,
                "annotations": annotations,
            },
            "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
        }))
        .unwrap(),
    )
}

fn pool(name: &str, status_config: &str) -> MachineConfigPool {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "configuration": {"name": format!("{status_config}-next")},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}
        },
        "status": {"configuration": {"name": status_config}, "updatedMachineCount": 0}
    }))
    .unwrap()
}

fn world<'a>(nodes: &'a [Arc<Node>], mcns: &'a [Arc<MachineConfigNode>]) -> World<'a> {
    let pools = ["master", "worker", "infra", "gpu", "arbiter"]
        .map(|name| PoolSelector::of(&pool(name, &format!("rendered-{name}-1"))))
        .to_vec();
    let serving = ["master", "worker", "infra", "gpu", "arbiter"]
        .into_iter()
        .map(|name| {
            (
                name.to_owned(),
                PoolServing {
                    rendered_config: format!("rendered-{name}-1"),
                    image: None,
                },
            )
        })
        .collect();
    World {
        nodes,
        machine_config_nodes: mcns,
        pools,
        serving,
    }
}

fn no_records(_: IpAddr) -> Option<ServedRecord> {
    None
}

fn record(config: &str, at: i64) -> ServedRecord {
    ServedRecord::new(
        Answer::worker(config),
        UNIX_EPOCH + Duration::from_secs(u64::try_from(at).unwrap()),
    )
}

fn mcn(value: Value) -> Arc<MachineConfigNode> {
    let mut base = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigNode",
        "spec": {"node": {"name": "w1"}, "pool": {"name": "worker"}, "configVersion": {"desired": "not-yet-set"}}
    });
    merge(&mut base, value);
    Arc::new(serde_json::from_value(base).unwrap())
}

fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p,
    }
}

fn ours() -> Value {
    json!({annotations::CREATED_BY: annotations::CREATED_BY_VALUE})
}

#[test]
fn a_new_node_gets_an_mcn_and_its_initial_status() {
    let nodes = [node("w1", &["worker"], "10.0.0.21", json!({}))];
    let plan = plan(&world(&nodes, &[]), no_records, false);
    assert!(plan.unpooled.is_empty());
    let [Action::Create { mcn, status }] = plan.actions.as_slice() else {
        panic!("{:?}", plan.actions);
    };
    assert_eq!(mcn.metadata.name.as_deref(), Some("w1"));
    assert_eq!(mcn.spec.pool.name, "worker");
    assert_eq!(mcn.spec.config_version.desired, "rendered-worker-1");
    assert_eq!(status.spec_desired, "rendered-worker-1");
    assert_eq!(status.node, "w1");
}

#[test]
fn provisioning_and_deleted_nodes_are_skipped() {
    let mut pending = (*node("p1", &["worker"], "10.0.0.1", json!({}))).clone();
    pending.status.as_mut().unwrap().phase = Some("Pending".into());
    let mut provisioning = (*node("p2", &["worker"], "10.0.0.2", json!({}))).clone();
    provisioning.status.as_mut().unwrap().phase = Some("Provisioning".into());
    let mut deleting = (*node("p3", &["worker"], "10.0.0.3", json!({}))).clone();
    deleting.metadata.deletion_timestamp = deleting.metadata.creation_timestamp.clone();
    let nodes = [
        Arc::new(pending),
        Arc::new(provisioning),
        Arc::new(deleting),
    ];
    let plan = plan(&world(&nodes, &[]), no_records, false);
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
}

#[test]
fn primary_pool_follows_the_mco_rule() {
    let nodes = [
        node("a-worker", &["worker"], "10.0.0.1", json!({})),
        node("b-infra", &["worker", "infra"], "10.0.0.2", json!({})),
        node("c-master", &["master", "worker"], "10.0.0.3", json!({})),
        node(
            "d-master-infra",
            &["master", "infra"],
            "10.0.0.4",
            json!({}),
        ),
        node("e-arbiter", &["arbiter"], "10.0.0.5", json!({})),
        node(
            "f-two-custom",
            &["worker", "infra", "gpu"],
            "10.0.0.6",
            json!({}),
        ),
        node("g-none", &["other"], "10.0.0.7", json!({})),
    ];
    let plan = plan(&world(&nodes, &[]), no_records, false);
    let pools: HashMap<&str, &str> = plan
        .actions
        .iter()
        .map(|a| match a {
            Action::Create { mcn, .. } => (a.name(), mcn.spec.pool.name.as_str()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        pools,
        HashMap::from([
            ("a-worker", "worker"),
            ("b-infra", "infra"),
            ("c-master", "master"),
            ("d-master-infra", "master"),
            ("e-arbiter", "arbiter"),
        ])
    );
    assert_eq!(plan.unpooled, ["f-two-custom", "g-none"]);
}

#[test]
fn an_mcn_someone_else_wrote_is_left_alone() {
    let nodes = [node("w1", &["worker"], "10.0.0.21", json!({}))];
    // Not ours: not-yet-set, no status, another pool; still nothing to do.
    let theirs = [mcn(
        json!({"metadata": {"name": "w1"}, "spec": {"pool": {"name": "infra"}}}),
    )];
    let records = |_: IpAddr| Some(record("rendered-worker-1", CREATED - 60));
    let plan = plan(&world(&nodes, &theirs), records, true);
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
}

#[test]
fn our_not_yet_set_desired_config_is_filled_and_nothing_else_changes() {
    let nodes = [node(
        "w1",
        &["worker"],
        "10.0.0.21",
        json!({"machineconfiguration.openshift.io/desiredConfig": "rendered-worker-7"}),
    )];
    let mut annotations = ours();
    merge(&mut annotations, json!({"example.com/someone-elses": "x"}));
    let existing = [mcn(json!({
        "metadata": {
            "name": "w1", "uid": "mcn-uid", "generation": 2, "annotations": annotations,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "w1", "uid": "uid-w1"},
                {"apiVersion": "example.com/v1", "kind": "Other", "name": "o", "uid": "o"}
            ]
        },
        "status": {"conditions": [], "configVersion": {"desired": "not-yet-set"}, "observedGeneration": 1}
    }))];
    let plan = plan(&world(&nodes, &existing), no_records, false);
    let [Action::Fill { mcn, filled, .. }] = plan.actions.as_slice() else {
        panic!("{:?}", plan.actions);
    };
    assert_eq!(filled, &["spec.configVersion.desired"]);
    assert_eq!(mcn.spec.config_version.desired, "rendered-worker-7");
    assert_eq!(mcn.spec.node.name, "w1");
    assert_eq!(mcn.spec.pool.name, "worker");
    let a = mcn.metadata.annotations.as_ref().unwrap();
    assert_eq!(a.len(), 1, "only our annotations are applied: {a:?}");
    let owners = mcn.metadata.owner_references.as_ref().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].uid, "uid-w1");
}

#[test]
fn a_bootstrap_record_found_later_is_filled_in() {
    let nodes = [node("w1", &["worker"], "10.0.0.21", json!({}))];
    let existing = [mcn(json!({
        "metadata": {"name": "w1", "annotations": ours()},
        "spec": {"configVersion": {"desired": "rendered-worker-1"}},
        "status": {"configVersion": {"desired": "not-yet-set"}}
    }))];
    let records = |ip: IpAddr| {
        (ip == "10.0.0.21".parse::<IpAddr>().unwrap())
            .then(|| record("rendered-worker-1", CREATED - 60))
    };
    let plan = plan(&world(&nodes, &existing), records, false);
    let [Action::Fill { mcn, filled, .. }] = plan.actions.as_slice() else {
        panic!("{:?}", plan.actions);
    };
    assert_eq!(filled, &["bootstrap record"]);
    assert_eq!(mcn.spec.config_version.desired, "rendered-worker-1");
    let a = mcn.metadata.annotations.as_ref().unwrap();
    assert_eq!(a[annotations::BOOTSTRAP_CONFIG], "rendered-worker-1");
    assert_eq!(a[annotations::CREATED_BY], annotations::CREATED_BY_VALUE);
    // The same match names the node for its FirstConfigServed Event.
    let matched: Vec<(&str, &str)> = plan
        .matched
        .iter()
        .map(|(node, record)| (node_name(node), record.rendered_config.as_str()))
        .collect();
    assert_eq!(matched, [("w1", "rendered-worker-1")]);

    // Once recorded, nothing more to do.
    let mut done = (*existing[0]).clone();
    done.metadata.annotations = mcn.metadata.annotations.clone();
    let done = [Arc::new(done)];
    assert!(super::plan(&world(&nodes, &done), records, false)
        .actions
        .is_empty());
}

#[test]
fn our_mcn_without_status_gets_its_initial_status() {
    let nodes = [node("w1", &["worker"], "10.0.0.21", json!({}))];
    let existing = [mcn(json!({
        "metadata": {"name": "w1", "generation": 1, "resourceVersion": "7", "annotations": ours()},
        "spec": {"configVersion": {"desired": "rendered-worker-1"}}
    }))];
    let plan = plan(&world(&nodes, &existing), no_records, false);
    let [Action::InitStatus {
        name,
        status,
        generation,
        resource_version,
    }] = plan.actions.as_slice()
    else {
        panic!("{:?}", plan.actions);
    };
    assert_eq!(name, "w1");
    assert_eq!(*generation, 1);
    assert_eq!(resource_version.as_deref(), Some("7"));
    assert_eq!(status.spec_desired, "rendered-worker-1");
}

/// An MCN of `name` whose owner reference names the Node uid `owner_uid`.
fn owned_mcn(name: &str, owner_uid: &str, annotations: Value) -> Arc<MachineConfigNode> {
    mcn(json!({"metadata": {
        "name": name,
        "uid": format!("mcn-uid-{name}"),
        "annotations": annotations,
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": owner_uid}]
    }}))
}

#[test]
fn only_our_mcns_of_gone_nodes_are_deletion_candidates() {
    let nodes = [node("w1", &["worker"], "10.0.0.21", json!({}))];
    let mcns = [
        owned_mcn("w1", "uid-w1", ours()),
        owned_mcn("gone", "uid-gone", ours()),
        // Written by the daemon or the operator, for a Node our cache does not show (yet).
        owned_mcn("foreign", "uid-foreign", json!({})),
        mcn(json!({"metadata": {"name": "foreign-no-owner"}})),
        // Ours but without an owner reference: nothing proves which Node it was for.
        mcn(json!({"metadata": {"name": "ours-no-owner", "annotations": ours()}})),
    ];
    let plan = plan(&world(&nodes, &mcns), no_records, false);
    let deletes: Vec<_> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete {
                name,
                uid,
                node_uid,
            } => Some((name.as_str(), uid.as_deref(), node_uid.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(deletes, [("gone", Some("mcn-uid-gone"), "uid-gone")]);

    // Every node gone: still only ours.
    let all_gone = super::plan(&world(&[], &mcns), no_records, false);
    let names: Vec<&str> = all_gone.actions.iter().map(Action::name).collect();
    assert_eq!(names, ["gone", "w1"]);
}

#[test]
fn our_mcn_of_an_earlier_node_with_the_same_name_is_not_filled_but_replaced() {
    // w1 was deleted and created again: same name, new uid.
    let nodes = [node("w1", &["worker"], "10.0.0.21", json!({}))];
    let mcns = [owned_mcn("w1", "uid-of-the-old-w1", ours())];
    let plan = plan(
        &world(&nodes, &mcns),
        |_| Some(record("rendered-worker-1", CREATED - 10)),
        false,
    );
    let [Action::Delete { name, node_uid, .. }] = plan.actions.as_slice() else {
        panic!(
            "only a delete, no fill or status for the new node: {:?}",
            plan.actions
        );
    };
    assert_eq!(
        (name.as_str(), node_uid.as_str()),
        ("w1", "uid-of-the-old-w1")
    );

    // Someone else's MCN of an earlier w1: left alone, and none of ours is created over it.
    let foreign = [owned_mcn("w1", "uid-of-the-old-w1", json!({}))];
    let plan = super::plan(&world(&nodes, &foreign), no_records, false);
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
}

#[test]
fn the_bootstrap_record_must_predate_the_node() {
    let nodes = [node("w1", &["worker"], "10.0.0.21", json!({}))];
    let created_action = |records: &dyn Fn(IpAddr) -> Option<ServedRecord>| {
        let plan = plan(&world(&nodes, &[]), records, false);
        match plan.actions.into_iter().next() {
            Some(Action::Create { mcn, .. }) => mcn,
            other => panic!("{other:?}"),
        }
    };
    let before = created_action(&|_| Some(record("rendered-worker-0", CREATED - 300)));
    assert!(desired::has_bootstrap_record(&before));
    assert_eq!(before.spec.config_version.desired, "rendered-worker-0");
    // Served long after the node joined: another machine reusing the address.
    let after = created_action(&|_| {
        Some(record(
            "rendered-worker-0",
            CREATED + i64::try_from(CLOCK_SKEW.as_secs()).unwrap() + 1,
        ))
    });
    assert!(!desired::has_bootstrap_record(&after));
    assert_eq!(after.spec.config_version.desired, "rendered-worker-1");
}

#[test]
fn serving_by_pool_is_what_a_request_would_get() {
    let mut snapshot = Snapshot::empty(Mode::Cluster);
    let mut proven = pool("worker", "rendered-worker-1");
    proven.status.as_mut().unwrap().updated_machine_count = 1;
    let mut fresh = pool("infra", "");
    fresh.status = None;
    snapshot.pools.insert("worker".into(), Ok(Arc::new(proven)));
    snapshot.pools.insert("infra".into(), Ok(Arc::new(fresh)));
    snapshot.pools.insert(
        "broken".into(),
        Err(crate::snapshot::LoadError::NotFound("x".into())),
    );
    let serving = serving_by_pool(&snapshot);
    assert_eq!(serving["worker"].rendered_config, "rendered-worker-1-next");
    assert_eq!(serving["worker"].image, None);
    assert_eq!(serving["infra"].rendered_config, "");
    assert!(!serving.contains_key("broken"));
}

#[test]
fn a_shared_address_gives_source_unknown_never_another_machines_record() {
    // Two Nodes report the same InternalIP (a NAT, or an address reused while the old Node is
    // still there): the record served to that address names neither.
    let nodes = [
        node("w0", &["worker"], "10.0.0.1", json!({})),
        node("w1", &["worker"], "10.0.0.1", json!({})),
    ];
    let records = |_: IpAddr| Some(record("rendered-worker-1", CREATED - 60));
    let plan = plan(&world(&nodes, &[]), records, false);
    assert_eq!(plan.actions.len(), 2, "{:?}", plan.actions);
    for action in &plan.actions {
        let Action::Create { mcn, .. } = action else {
            panic!("{action:?}");
        };
        let a = mcn.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            a[annotations::BOOTSTRAP_SOURCE_UNKNOWN],
            "address-of-another-node"
        );
        assert_eq!(a[annotations::BOOTSTRAP_ADDRESS], "10.0.0.1");
        assert!(!a.contains_key(annotations::BOOTSTRAP_CONFIG), "{a:?}");
        assert!(desired::has_bootstrap_record(mcn));
    }
    assert!(plan.matched.is_empty(), "{:?}", plan.matched);

    // Our MCN without a record learns that the source is unknown once, then is left alone.
    let nodes = [
        node("w0", &["worker"], "10.0.0.1", json!({})),
        node("w1", &["worker"], "10.0.0.1", json!({})),
    ];
    let existing = [mcn(json!({
        "metadata": {"name": "w1", "annotations": ours()},
        "spec": {"configVersion": {"desired": "rendered-worker-1"}},
        "status": {"configVersion": {"desired": "not-yet-set"}}
    }))];
    let plan = super::plan(&world(&nodes[1..], &existing), records, false);
    assert!(
        matches!(plan.actions.as_slice(), [Action::Fill { .. }]),
        "w1 alone: its record, {:?}",
        plan.actions
    );
    let plan = super::plan(&world(&nodes, &existing), records, false);
    let fills: Vec<_> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Fill { mcn, filled, .. } => Some((mcn, filled)),
            _ => None,
        })
        .collect();
    let [(mcn, filled)] = fills.as_slice() else {
        panic!("{:?}", plan.actions);
    };
    assert_eq!(filled.as_slice(), ["bootstrap record (source unknown)"]);
    let mut done = (*existing[0]).clone();
    done.metadata.annotations = mcn.metadata.annotations.clone();
    let done = [Arc::new(done)];
    assert!(!super::plan(&world(&nodes, &done), records, false)
        .actions
        .iter()
        .any(|a| matches!(a, Action::Fill { .. })));
}

/// One failure report from `address`, reported at `at` (Unix seconds).
#[derive(Clone, Copy)]
struct Failures {
    address: IpAddr,
    at: i64,
}

impl ServedLookup for Failures {
    fn served_to(&self, _: IpAddr) -> Vec<crate::mcn::matching::Served> {
        Vec::new()
    }

    fn failures_from(&self, address: IpAddr) -> Vec<crate::mcn::matching::Reported> {
        (address == self.address)
            .then(|| crate::mcn::matching::Reported {
                replica: "r0".into(),
                failure: crate::server::served::FailureRecord {
                    pool: "worker".into(),
                    node_id: "localhost".into(),
                    stage: "firstboot-update".into(),
                    message: "error pulling image: token=[REDACTED]".into(),
                    image: "quay.io".into(),
                    reported_at: UNIX_EPOCH + Duration::from_secs(u64::try_from(self.at).unwrap()),
                },
            })
            .into_iter()
            .collect()
    }
}

/// `node` with a boot ID and, when `ready_at` is given, `Ready` since then.
fn booted(node: &Arc<Node>, boot_id: &str, ready_at: Option<&str>) -> Arc<Node> {
    let mut value = serde_json::to_value(node.as_ref()).unwrap();
    value["status"]["nodeInfo"] = json!({
        "bootID": boot_id, "machineID": "", "systemUUID": "", "kernelVersion": "", "osImage": "",
        "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "",
        "operatingSystem": "linux", "architecture": "amd64"
    });
    if let Some(at) = ready_at {
        value["status"]["conditions"] =
            json!([{"type": "Ready", "status": "True", "lastTransitionTime": at}]);
    }
    Arc::new(serde_json::from_value(value).unwrap())
}

/// The failure annotations of an MCN written by a plan's only action (create or fill).
fn written_annotations(plan: &Plan) -> std::collections::BTreeMap<String, String> {
    match plan.actions.as_slice() {
        [Action::Create { mcn, .. }] | [Action::Fill { mcn, .. }] => {
            mcn.metadata.annotations.clone().unwrap_or_default()
        }
        other => panic!("{other:?}"),
    }
}

/// `existing[0]` with the annotations `plan` wrote.
fn after(existing: &[Arc<MachineConfigNode>], plan: &Plan) -> [Arc<MachineConfigNode>; 1] {
    let mut mcn = (*existing[0]).clone();
    mcn.metadata.annotations = Some(written_annotations(plan));
    [Arc::new(mcn)]
}

#[test]
fn a_failure_reported_before_the_node_registered_is_written_as_history() {
    // The machine failed its first boot, reported it, and registered its Node on a later boot
    // (the kubelet runs only once the first-boot update succeeded).
    let plain = node("w1", &["worker"], "10.0.0.21", json!({}));
    let nodes = [booted(&plain, "boot-2", Some("2023-11-14T22:14:00Z"))];
    let failures = Failures {
        address: "10.0.0.21".parse().unwrap(),
        at: CREATED - 120,
    };
    // A new node: its MCN is created with the failure, already past.
    let plan = plan(&world(&nodes, &[]), failures, false);
    assert!(matches!(plan.actions.as_slice(), [Action::Create { .. }]));
    let a = written_annotations(&plan);
    assert_eq!(a[annotations::FIRSTBOOT_FAILURE_STAGE], "firstboot-update");
    assert_eq!(a[annotations::FIRSTBOOT_FAILURE_AT], "2023-11-14T22:11:20Z");
    assert_eq!(a[annotations::FIRSTBOOT_FAILURE_ADDRESS], "10.0.0.21");
    assert_eq!(a[annotations::FIRSTBOOT_FAILURE_BOOT_ID], "boot-2");
    assert_eq!(a[annotations::FIRSTBOOT_FAILURE_IMAGE], "quay.io");
    assert_eq!(a[annotations::FIRSTBOOT_FAILURE_NODE_ID], "localhost");
    assert_eq!(
        a[annotations::FIRSTBOOT_FAILURE_MESSAGE],
        "error pulling image: token=[REDACTED]"
    );
    assert_eq!(
        a[annotations::FIRSTBOOT_FAILURE_CLEARED_AT],
        "2023-11-14T22:14:00Z"
    );

    // Our MCN created before the report was known, its Node not ready yet: filled in with the
    // failure, not yet past; once ready, cleared (the failure stays, as history); then done.
    let existing = [mcn(json!({
        "metadata": {"name": "w1", "annotations": ours()},
        "spec": {"configVersion": {"desired": "rendered-worker-1"}},
        "status": {"configVersion": {"desired": "not-yet-set"}}
    }))];
    let starting = [booted(&plain, "boot-2", None)];
    let plan = super::plan(&world(&starting, &existing), failures, false);
    let [Action::Fill { filled, .. }] = plan.actions.as_slice() else {
        panic!("{:?}", plan.actions);
    };
    assert_eq!(filled, &["firstboot failure"]);
    assert!(!written_annotations(&plan).contains_key(annotations::FIRSTBOOT_FAILURE_CLEARED_AT));
    let with_failure = after(&existing, &plan);
    assert!(
        super::plan(&world(&starting, &with_failure), failures, false)
            .actions
            .is_empty()
    );
    let plan = super::plan(&world(&nodes, &with_failure), failures, false);
    let [Action::Fill { filled, .. }] = plan.actions.as_slice() else {
        panic!("{:?}", plan.actions);
    };
    assert_eq!(filled, &["firstboot failure cleared"]);
    let a = written_annotations(&plan);
    for key in annotations::FIRSTBOOT_FAILURE {
        assert!(a.contains_key(key), "{key} stays");
    }
    assert_eq!(
        a[annotations::FIRSTBOOT_FAILURE_CLEARED_AT],
        "2023-11-14T22:14:00Z"
    );
    assert_eq!(a[annotations::CREATED_BY], annotations::CREATED_BY_VALUE);
    let done = after(&existing, &plan);
    let rebooted = [booted(&plain, "boot-3", Some("2023-11-15T08:00:00Z"))];
    for nodes in [&nodes, &rebooted] {
        assert!(super::plan(&world(nodes, &done), failures, false)
            .actions
            .is_empty());
    }
}

#[test]
fn a_failure_reported_after_the_node_registered_is_cleared_by_a_later_boot_only() {
    // Reported within the clock-skew allowance after the Node registered: the boot that
    // registered it is not known to be past the failure.
    let plain = node("w1", &["worker"], "10.0.0.21", json!({}));
    let nodes = [booted(&plain, "boot-1", Some("2023-11-14T22:14:00Z"))];
    let failures = Failures {
        address: "10.0.0.21".parse().unwrap(),
        at: CREATED + 10,
    };
    let existing = [mcn(json!({
        "metadata": {"name": "w1", "annotations": ours()},
        "spec": {"configVersion": {"desired": "rendered-worker-1"}},
        "status": {"configVersion": {"desired": "not-yet-set"}}
    }))];
    let plan = super::plan(&world(&nodes, &existing), failures, false);
    let a = written_annotations(&plan);
    assert_eq!(a[annotations::FIRSTBOOT_FAILURE_BOOT_ID], "boot-1");
    assert!(!a.contains_key(annotations::FIRSTBOOT_FAILURE_CLEARED_AT));
    let with_failure = after(&existing, &plan);
    // The same boot, or a later one not ready yet: nothing to do.
    let rebooting = [booted(&plain, "boot-2", None)];
    for nodes in [&nodes, &rebooting] {
        assert!(super::plan(&world(nodes, &with_failure), failures, false)
            .actions
            .is_empty());
    }
    // A later boot that became ready: cleared.
    let rebooted = [booted(&plain, "boot-2", Some("2023-11-15T08:00:00Z"))];
    let plan = super::plan(&world(&rebooted, &with_failure), failures, false);
    assert_eq!(
        written_annotations(&plan)[annotations::FIRSTBOOT_FAILURE_CLEARED_AT],
        "2023-11-15T08:00:00Z"
    );

    // Written without a boot ID: never cleared by a guess.
    let unbooted = [plain.clone()];
    let plan = super::plan(&world(&unbooted, &existing), failures, false);
    assert!(!written_annotations(&plan).contains_key(annotations::FIRSTBOOT_FAILURE_BOOT_ID));
    let written = after(&existing, &plan);
    assert!(super::plan(&world(&rebooted, &written), failures, false)
        .actions
        .is_empty());
}
