use super::*;
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::server::served::{Answer, ServedRecord};

const DIGEST_IMAGE: &str = "quay.example.com/ocp/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn node(annotations: &[(&str, &str)]) -> Node {
    serde_json::from_value(json!({
        "metadata": {
            "name": "worker-1.example.com",
            "uid": "0f6c2a2e-1111-2222-3333-444455556666",
            "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        },
        "status": {"addresses": [
            {"type": "Hostname", "address": "worker-1"},
            {"type": "InternalIP", "address": "10.0.0.21"},
            {"type": "InternalIP", "address": "fd00::21"},
            {"type": "ExternalIP", "address": "203.0.113.9"}
        ]}
    }))
    .unwrap()
}

fn bootstrap(config: &str, image: Option<&str>) -> Bootstrap {
    Bootstrap {
        address: "10.0.0.21".parse().unwrap(),
        record: ServedRecord::new(
            Answer {
                image: image.map(str::to_owned),
                ignition: Some("2.20.0".into()),
                ..Answer::worker(config)
            },
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        ),
        served_by: None,
        also_served_by: Vec::new(),
    }
}

fn serving(config: &str, image: Option<&str>) -> PoolServing {
    PoolServing {
        rendered_config: config.into(),
        image: image.map(str::to_owned),
    }
}

fn inputs<'a>(
    node: &'a Node,
    serving: Option<&'a PoolServing>,
    bootstrap: Option<&'a Bootstrap>,
) -> NodeInputs<'a> {
    NodeInputs {
        node,
        pool: "worker",
        serving,
        bootstrap,
        source_unknown: None,
        failure: None,
        config_image_declared: false,
    }
}

#[test]
fn mcn_names_the_node_its_pool_and_owner() {
    let node = node(&[(node_annotations::DESIRED_CONFIG, "rendered-worker-aaa")]);
    let mcn = build_mcn(&inputs(&node, None, None));
    assert_eq!(mcn.metadata.name.as_deref(), Some("worker-1.example.com"));
    assert_eq!(mcn.spec.node.name, "worker-1.example.com");
    assert_eq!(mcn.spec.pool.name, "worker");
    assert_eq!(mcn.spec.config_version.desired, "rendered-worker-aaa");
    assert_eq!(mcn.spec.config_image, None);
    let owners = mcn.metadata.owner_references.as_ref().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].api_version, "v1");
    assert_eq!(owners[0].kind, "Node");
    assert_eq!(owners[0].name, "worker-1.example.com");
    assert_eq!(owners[0].uid, "0f6c2a2e-1111-2222-3333-444455556666");
    assert_eq!(owners[0].controller, None);
    assert!(is_ours(&mcn));
    assert!(!has_bootstrap_record(&mcn));

    // What goes on the wire: no status, no namespace, only declared fields.
    let wire = serde_json::to_value(&mcn).unwrap();
    assert_eq!(wire["apiVersion"], "machineconfiguration.openshift.io/v1");
    assert_eq!(wire["kind"], "MachineConfigNode");
    assert!(wire.get("status").is_none(), "{wire}");
    assert!(wire["spec"].get("configImage").is_none(), "{wire}");
    assert!(wire["metadata"].get("namespace").is_none(), "{wire}");
}

#[test]
fn desired_config_prefers_annotation_then_served_record_then_pool() {
    let annotated = node(&[(node_annotations::DESIRED_CONFIG, "rendered-worker-ann")]);
    let bare = node(&[]);
    let record = bootstrap("rendered-worker-booted", None);
    let pool = serving("rendered-worker-now", None);

    assert_eq!(
        desired_config(&inputs(&annotated, Some(&pool), Some(&record))),
        "rendered-worker-ann"
    );
    assert_eq!(
        desired_config(&inputs(&bare, Some(&pool), Some(&record))),
        "rendered-worker-booted"
    );
    assert_eq!(
        desired_config(&inputs(&bare, Some(&pool), None)),
        "rendered-worker-now"
    );
    assert_eq!(desired_config(&inputs(&bare, None, None)), NOT_YET_SET);
    // A pool without a rendered config yet serves nothing.
    let empty = PoolServing::default();
    assert_eq!(
        desired_config(&inputs(&bare, Some(&empty), None)),
        NOT_YET_SET
    );
}

#[test]
fn values_the_crd_would_reject_are_never_written() {
    let bad = node(&[
        (node_annotations::DESIRED_CONFIG, "Rendered_Worker!"),
        (node_annotations::CURRENT_CONFIG, "-bad-"),
    ]);
    let pool = serving("rendered-worker-now", None);
    assert_eq!(
        desired_config(&inputs(&bad, Some(&pool), None)),
        "rendered-worker-now"
    );
    let status = InitialStatus::for_node(&bad, "rendered-worker-now");
    assert_eq!(status.current, None);
    assert_eq!(status.status_desired, NOT_YET_SET);
}

#[test]
fn bootstrap_record_annotations_say_what_was_served() {
    let node = node(&[]);
    let record = bootstrap("rendered-worker-booted", Some(DIGEST_IMAGE));
    let mcn = build_mcn(&inputs(&node, None, Some(&record)));
    let a = mcn.metadata.annotations.unwrap();
    assert_eq!(a[annotations::CREATED_BY], "machine-config-server");
    assert_eq!(a[annotations::BOOTSTRAP_ADDRESS], "10.0.0.21");
    assert_eq!(a[annotations::BOOTSTRAP_POOL], "worker");
    assert_eq!(a[annotations::BOOTSTRAP_CONFIG], "rendered-worker-booted");
    assert_eq!(a[annotations::BOOTSTRAP_IMAGE], DIGEST_IMAGE);
    assert_eq!(a[annotations::BOOTSTRAP_SPEC_VERSION], "3.4.0");
    assert_eq!(a[annotations::BOOTSTRAP_SERVED_AT], "2023-11-14T22:13:20Z");
    assert_eq!(a[annotations::BOOTSTRAP_IGNITION_CLIENT], "2.20.0");
    assert!(a.keys().all(|k| k.starts_with(annotations::PREFIX)));

    let without_image = bootstrap_annotations(&bootstrap("rendered-worker-booted", None));
    assert!(!without_image.contains_key(annotations::BOOTSTRAP_IMAGE));
    // A request whose User-Agent named no Ignition release.
    let mut curl = bootstrap("rendered-worker-booted", None);
    curl.record.answer_mut().ignition = None;
    assert_eq!(
        bootstrap_annotations(&curl)[annotations::BOOTSTRAP_IGNITION_CLIENT],
        "unknown"
    );
}

#[test]
fn config_image_only_where_declared_and_in_digest_form() {
    let node = node(&[]);
    let layered = serving("rendered-worker-now", Some(DIGEST_IMAGE));
    let mut declared = inputs(&node, Some(&layered), None);
    declared.config_image_declared = true;
    assert_eq!(
        build_mcn(&declared).spec.config_image,
        Some(SpecConfigImage {
            desired_image: DIGEST_IMAGE.into()
        })
    );
    // The shared (default feature set) CRD does not declare it.
    assert_eq!(
        build_mcn(&inputs(&node, Some(&layered), None))
            .spec
            .config_image,
        None
    );
    // A tag would fail the newer CRDs' digest rule.
    let tagged = serving(
        "rendered-worker-now",
        Some("quay.example.com/ocp/os:latest"),
    );
    let mut declared = inputs(&node, Some(&tagged), None);
    declared.config_image_declared = true;
    assert_eq!(build_mcn(&declared).spec.config_image, None);
    // The node's own desiredImage annotation wins.
    let other = format!("registry.example.com/x/os@sha256:{}", "f".repeat(64));
    let annotated = self::node(&[(node_annotations::DESIRED_IMAGE, &other)]);
    assert_eq!(
        desired_image(&inputs(&annotated, Some(&layered), None)),
        Some(other)
    );
    assert_eq!(desired_image(&inputs(&node, None, None)), None);
}

#[test]
fn digest_image_rule() {
    assert!(is_digest_image(DIGEST_IMAGE));
    assert!(is_digest_image(&format!(
        "registry.example.com:5000/os@sha256:{}",
        "a".repeat(64)
    )));
    assert!(!is_digest_image("quay.example.com/ocp/os:latest"));
    assert!(!is_digest_image(&format!(
        "quay.example.com/ocp/os@sha256:{}",
        "A".repeat(64)
    )));
    assert!(!is_digest_image(&format!(
        "quay.example.com/ocp/os@sha256:{}",
        "a".repeat(63)
    )));
    assert!(!is_digest_image(&format!(
        "localregistry/os@sha256:{}",
        "a".repeat(64)
    )));
    assert!(!is_digest_image(&format!("os@sha256:{}", "a".repeat(64))));
}

#[test]
fn dns1123_subdomain_rule() {
    for good in ["rendered-worker-0123abcd", "a", "a.b-c.d", "not-yet-set"] {
        assert!(is_dns1123_subdomain(good), "{good}");
    }
    for bad in ["", "A", "-a", "a-", "a..b", "a_b", ".a", &"a".repeat(254)] {
        assert!(!is_dns1123_subdomain(bad), "{bad}");
    }
}

fn condition<'a>(status: &'a MachineConfigNodeStatus, type_: &str) -> &'a Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no condition {type_}"))
}

#[test]
fn initial_status_of_a_node_at_its_desired_config() {
    let node = node(&[
        (node_annotations::CURRENT_CONFIG, "rendered-worker-aaa"),
        (node_annotations::DESIRED_CONFIG, "rendered-worker-aaa"),
    ]);
    let now = Timestamp::from_second(1_700_000_123).unwrap();
    let status = InitialStatus::for_node(&node, "rendered-worker-aaa").build(1, now);

    let updated = condition(&status, "Updated");
    assert_eq!(status.conditions[0].type_, "Updated");
    assert_eq!(updated.status, "True");
    assert_eq!(updated.reason, "Updated");
    assert_eq!(updated.message, "Node worker-1.example.com Updated");

    // Every type of the MCN design, once each, within the CRD's maxItems.
    let types: BTreeSet<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types.len(), status.conditions.len());
    assert_eq!(status.conditions.len(), 14);
    assert!(status.conditions.len() <= 20);
    for type_ in NOT_YET_OCCURRED_CONDITIONS {
        let c = condition(&status, type_);
        assert_eq!(c.status, "False", "{type_}");
        assert_eq!(c.reason, "NotYetOccurred", "{type_}");
        assert_eq!(
            c.message,
            format!("This node has not yet entered the {type_} phase")
        );
    }
    for c in &status.conditions {
        assert_eq!(c.last_transition_time, "2023-11-14T22:15:23Z");
        assert_eq!(c.observed_generation, Some(1));
        assert!(c.reason.chars().all(|ch| ch.is_ascii_alphanumeric()));
    }
    assert_eq!(
        status.config_version,
        Some(StatusConfigVersion {
            current: "rendered-worker-aaa".into(),
            desired: "rendered-worker-aaa".into()
        })
    );
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.config_image, None);
}

use std::collections::BTreeSet;

#[test]
fn initial_status_of_a_node_behind_or_not_yet_reporting() {
    let behind = node(&[(node_annotations::CURRENT_CONFIG, "rendered-worker-old")]);
    let status =
        InitialStatus::for_node(&behind, "rendered-worker-new").build(3, Timestamp::UNIX_EPOCH);
    let updated = condition(&status, "Updated");
    assert_eq!(updated.status, "False");
    assert_eq!(updated.message, "Node worker-1.example.com needs an update");
    let version = status.config_version.as_ref().unwrap();
    assert_eq!(version.current, "rendered-worker-old");
    // The daemon sets status.desired only once it has validated the update.
    assert_eq!(version.desired, NOT_YET_SET);
    assert_eq!(status.observed_generation, Some(3));

    let silent = node(&[]);
    let status =
        InitialStatus::for_node(&silent, "rendered-worker-new").build(0, Timestamp::UNIX_EPOCH);
    let updated = condition(&status, "Updated");
    assert_eq!(updated.status, "False");
    assert_eq!(updated.reason, "Updated");
    // The CRD requires observedGeneration >= 1.
    assert_eq!(status.observed_generation, Some(1));
    // `current` is left out of the wire form when unknown.
    let wire = serde_json::to_value(&status).unwrap();
    assert!(wire["configVersion"].get("current").is_none(), "{wire}");
    assert_eq!(wire["configVersion"]["desired"], NOT_YET_SET);
}
