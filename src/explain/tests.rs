//! Unit tests of the explanation and its text form.
use super::*;
use crate::api::{ControllerConfig, MachineConfig, MachineConfigPool};
use crate::ignition::dataurl;
use crate::render;
use crate::render::layered::DecisionReason;
use crate::snapshot::{Input, LoadError, Mode};
use serde_json::Value;
use std::time::Duration;

use super::cluster_mode::SyncRecorder;
use super::text::files_table;
use crate::source::cluster::ClusterObserver as _;
use base64::Engine as _;
use serde_json::json;

const SECRET_TOKEN: &str = "sEcReT-bootstrap-token";
const SECRET_CONTENT: &str = "sEcReT-file-content";

fn machine_config(name: &str, kernel_arguments: &[&str]) -> Arc<MachineConfig> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": name},
            "spec": {
                "osImageURL": "quay.io/os@sha256:1",
                "kernelArguments": kernel_arguments,
                "config": {
                    "ignition": {"version": "3.5.0"},
                    "storage": {"files": [
                        {"path": "/etc/kubernetes/kubelet-ca.crt", "mode": 420,
                         "contents": {"source": "data:,old%20CA"}},
                        {"path": "/etc/motd", "mode": 384,
                         "contents": {"source": format!("data:,{SECRET_CONTENT}")}}
                    ]},
                    "systemd": {"units": [{"name": "a.service"}, {"name": "b.service"}]}
                }
            }
        }))
        .expect("machine config"),
    )
}

/// A cluster-mode snapshot: pool `worker` at `rendered-worker-old`, with a newer
/// `rendered-worker-new` in its spec that no node runs yet.
fn cluster_snapshot(updated_machine_count: i64) -> Snapshot {
    let mut snapshot = Snapshot::empty(Mode::Cluster);
    snapshot.generation = 1;
    // Every cache synced, as the cluster source publishes it.
    snapshot.synced = Input::ALL.into_iter().collect();
    let pool: MachineConfigPool = serde_json::from_value(json!({
        "metadata": {"name": "worker"},
        "spec": {"configuration": {"name": "rendered-worker-new"}},
        "status": {"configuration": {"name": "rendered-worker-old"},
                   "updatedMachineCount": updated_machine_count}
    }))
    .expect("pool");
    snapshot.pools.insert("worker".into(), Ok(Arc::new(pool)));
    for name in ["rendered-worker-old", "rendered-worker-new"] {
        snapshot
            .machine_configs
            .insert(name.into(), Ok(machine_config(name, &["nosmt"])));
    }
    let ca = base64::engine::general_purpose::STANDARD.encode("new CA");
    let controller_config: ControllerConfig = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "ControllerConfig",
        "metadata": {"name": "machine-config-controller"},
        "spec": {"kubeAPIServerServingCAData": ca}
    }))
    .expect("controller config");
    snapshot.controller_config = Some(Ok(Arc::new(controller_config)));
    snapshot.kubeconfig = Arc::from(format!("token: {SECRET_TOKEN}\n").into_bytes());
    snapshot
}

fn explain_worker(snapshot: &Snapshot, ready: bool, spec: &SpecRequest) -> Explained {
    explain(snapshot, ready, "worker", spec, "test".into())
}

#[test]
fn served_config_is_described_from_its_bytes() {
    let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
    let e = &explained.explanation;
    assert_eq!((e.status, e.status_text.as_str()), (200, "OK"));
    assert!(e.error.is_none());
    let served = e.served.as_ref().expect("served");
    let body = explained.body.as_ref().expect("body");
    assert_eq!(served.body_bytes, body.len());
    // The default Accept asks for the newest spec (3.6); the rendered config is 3.5, so 3.5 is
    // served, as the original at 7ff337a4f does, and the report says which rule decided.
    assert_eq!(served.ignition_version, "3.5.0");
    assert_eq!(e.spec_version.as_deref(), Some("3.5.0"));
    let rule = e.spec_rule.as_deref().expect("the rule");
    assert!(
        rule.starts_with("Accept asks for 3.6.0: spec 3.6.0; the rendered MachineConfig rendered-worker-old is spec 3.5.0, not 3.6"),
        "{rule}"
    );
    assert!(
        rule.ends_with("served as 3.5.0, as the original at 7ff337a4f does"),
        "{rule}"
    );
    let files: Vec<(&str, FileOrigin, Option<&str>)> = served
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.origin, f.role))
        .collect();
    assert_eq!(
        files,
        vec![
            (
                render::KUBELET_CA_PATH,
                FileOrigin::Replaced,
                Some("kubelet CA")
            ),
            ("/etc/motd", FileOrigin::MachineConfig, None),
            (
                render::NODE_ANNOTATIONS_PATH,
                FileOrigin::Appended,
                Some("node annotations")
            ),
            (
                render::KUBECONFIG_PATH,
                FileOrigin::Appended,
                Some("kubeconfig")
            ),
            (
                render::MACHINE_CONFIG_CONTENT_PATH,
                FileOrigin::Appended,
                Some("machine config content")
            ),
            (
                render::ENCAPSULATED_PATH,
                FileOrigin::Appended,
                Some("encapsulated machine config")
            ),
        ]
    );
    assert_eq!(served.files[0].size, Some("new CA".len()));
    assert_eq!(served.files[1].size, Some(SECRET_CONTENT.len()));
    assert_eq!(served.files[1].mode, Some(0o600));
    assert_eq!(
        served.files[3].size,
        Some(format!("token: {SECRET_TOKEN}\n").len())
    );
    assert_eq!(served.systemd_units, 2);
    assert_eq!(served.kernel_arguments.machine_config, vec!["nosmt"]);
    assert_eq!(served.os_image_url.as_deref(), Some("quay.io/os@sha256:1"));
    assert_eq!(served.node_annotations_image, None);
}

#[test]
fn cluster_selection_names_the_rule_the_render_followed() {
    let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
    let selection = explained.explanation.selection.expect("selection");
    assert_eq!(selection.rendered_config, "rendered-worker-old");
    assert!(
        selection.rule.starts_with("status.configuration"),
        "{}",
        selection.rule
    );
    assert_eq!(selection.machine_config, "found");
    let node_annotations = served_annotations(&explained.body.expect("body"));
    assert!(node_annotations.contains("rendered-worker-old"));

    let explained = explain_worker(&cluster_snapshot(2), true, &SpecRequest::default_accept());
    let selection = explained.explanation.selection.expect("selection");
    assert_eq!(selection.rendered_config, "rendered-worker-new");
    assert!(
        selection.rule.starts_with("spec.configuration"),
        "{}",
        selection.rule
    );
    assert!(selection.rule.contains("updatedMachineCount is 2"));
    let node_annotations = served_annotations(&explained.body.expect("body"));
    assert!(node_annotations.contains("rendered-worker-new"));
}

fn served_annotations(body: &[u8]) -> String {
    let document: Value = serde_json::from_slice(body).expect("json");
    let files = document["storage"]["files"].as_array().expect("files");
    let file = files
        .iter()
        .find(|f| f["path"] == render::NODE_ANNOTATIONS_PATH)
        .expect("annotations file");
    let data =
        dataurl::decode(file["contents"]["source"].as_str().expect("source")).expect("data url");
    String::from_utf8(data).expect("utf-8")
}

#[test]
fn cluster_layered_decision_is_reported() {
    let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
    let e = explained.explanation;
    let decision = e.layered.as_ref().expect("cluster mode decides");
    assert_eq!(decision.reason, DecisionReason::NotLayered);
    let text = format_text(&e);
    assert!(text.contains("base image: not_layered"), "{text}");
}

#[test]
fn failures_carry_the_servers_status_and_error_chain() {
    let snapshot = cluster_snapshot(0);
    let spec = SpecRequest::default_accept();

    let missing = explain(&snapshot, true, "infra", &spec, "test".into()).explanation;
    assert_eq!(missing.status, 500);
    assert!(!missing.pool_found);
    assert_eq!(missing.known_pools, vec!["worker"]);
    let error = missing.error.as_ref().expect("error");
    assert_eq!(error.kind, "unknown_pool");
    assert!(error.message.contains("\"infra\""));
    assert!(missing.served.is_none());
    assert!(missing.node_behaviour.contains("retries"));

    let not_ready = explain_worker(&snapshot, false, &spec).explanation;
    assert_eq!(not_ready.status, 503);
    assert_eq!(not_ready.error.expect("error").kind, "not_ready");

    let invalid_name = explain(&snapshot, true, "Worker", &spec, "test".into()).explanation;
    assert_eq!(invalid_name.status, 404);
    assert!(invalid_name.node_behaviour.contains("gives up"));

    let mut broken = cluster_snapshot(0);
    broken.controller_config = None;
    let broken = explain_worker(&broken, true, &spec).explanation;
    assert_eq!(broken.status, 500);
    assert_eq!(broken.error.expect("error").kind, "invalid_input");
}

#[test]
fn bootstrap_mode_refuses_other_pools_and_reports_missing_files() {
    let mut snapshot = Snapshot::empty(Mode::Bootstrap);
    snapshot.pools.insert(
        "arbiter".into(),
        Err(LoadError::NotFound(
            "file /base/machine-pools/arbiter.yaml".into(),
        )),
    );
    let spec = SpecRequest::Exact(SpecVersion::NEWEST);
    let worker = explain(&snapshot, true, "worker", &spec, "test".into()).explanation;
    assert_eq!(worker.status, 500);
    assert_eq!(
        worker.error.as_ref().expect("error").kind,
        "pool_not_served"
    );
    assert!(worker
        .pool_problem
        .expect("problem")
        .contains("master and arbiter"));

    let arbiter = explain(&snapshot, true, "arbiter", &spec, "test".into()).explanation;
    assert_eq!(arbiter.status, 404);
    assert!(!arbiter.pool_found);
    assert_eq!(arbiter.spec_version_from, "spec");
    assert!(arbiter.accept.is_none());
    let text = format_text(&arbiter);
    assert!(text.contains("not layered (bootstrap mode)"), "{text}");
    assert!(text.contains("404 Not Found"), "{text}");
}

#[test]
fn reports_never_contain_file_contents_or_the_kubeconfig() {
    let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
    let body = String::from_utf8_lossy(explained.body.as_ref().expect("body")).into_owned();
    // The served bytes do carry them...
    assert!(body.contains(SECRET_TOKEN) && body.contains(SECRET_CONTENT));
    // ...the report does not.
    let text = format_text(&explained.explanation);
    let json = serde_json::to_string(&explained.explanation).expect("json");
    for output in [&text, &json] {
        assert!(!output.contains(SECRET_TOKEN), "{output}");
        assert!(!output.contains(SECRET_CONTENT), "{output}");
    }
}

#[test]
fn text_lists_every_file_with_mode_size_and_marker() {
    let explained = explain_worker(&cluster_snapshot(0), true, &SpecRequest::default_accept());
    let text = format_text(&explained.explanation);
    assert!(text.starts_with("What a node asking for /config/worker would get:\n"));
    assert!(text.contains("0600"), "{text}");
    assert!(
        text.contains(&format!(
            "{}  [replaced by server: kubelet CA]",
            render::KUBELET_CA_PATH
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{}  [appended by server: kubeconfig]",
            render::KUBECONFIG_PATH
        )),
        "{text}"
    );
    assert!(text.contains("6 (in served order)"), "{text}");
    assert!(text.contains("spec.kernelArguments: nosmt"), "{text}");
}

#[test]
fn kernel_arguments_are_read_back_where_the_node_gets_them() {
    let mut snapshot = cluster_snapshot(0);
    let mut machine_config = (*machine_config("rendered-worker-old", &["nosmt"])).clone();
    if let Some(config) = machine_config.spec.config.as_mut() {
        config.modify(|config| {
            config["kernelArguments"] = json!({"shouldExist": ["mitigations=off"]})
        });
    }
    snapshot
        .machine_configs
        .insert("rendered-worker-old".into(), Ok(Arc::new(machine_config)));

    let newest = explain_worker(&snapshot, true, &SpecRequest::Exact(SpecVersion::V3_5));
    let k = newest.explanation.served.expect("served").kernel_arguments;
    assert_eq!(k.ignition_should_exist, vec!["mitigations=off"]);
    assert_eq!(k.machine_config, vec!["nosmt"]);

    // Below 3.3 Ignition has no kernel arguments: the server moves them to the MachineConfig.
    let old = explain_worker(&snapshot, true, &SpecRequest::Exact(SpecVersion::V3_2));
    let k = old.explanation.served.expect("served").kernel_arguments;
    assert!(k.ignition_should_exist.is_empty());
    assert_eq!(k.machine_config, vec!["nosmt", "mitigations=off"]);
}

#[test]
fn remote_and_compressed_sources_are_labelled() {
    let body = json!({
        "ignition": {"version": "3.4.0"},
        "storage": {"files": [
            {"path": "/a", "contents": {"source": "https://example.test/a?token=x"}},
            {"path": "/b", "contents": {"source": "data:,abc", "compression": "gzip"}},
            {"path": "/c"}
        ]}
    });
    let served = describe_served(body.to_string().as_bytes(), &[]);
    let kinds: Vec<(&str, Option<usize>)> =
        served.files.iter().map(|f| (f.contents, f.size)).collect();
    assert_eq!(
        kinds,
        vec![("remote", None), ("data", Some(3)), ("none", None)]
    );
    assert_eq!(served.files[1].compression.as_deref(), Some("gzip"));
    let table = files_table(&served.files);
    assert!(!table.contains("token=x"));
    assert!(table.contains("/b (gzip compressed)"));
}

#[test]
fn spec_and_pool_flags_are_checked() {
    assert_eq!(parse_spec("3.4.0").ok(), Some(SpecVersion::V3_4));
    assert_eq!(parse_spec("2.2").ok(), Some(SpecVersion::V2_2));
    assert!(parse_spec("3.9.0").is_err());
    assert!(parse_spec("").is_err());
    assert!(check_pool("worker").is_ok());
    // Explained as the 404 a node gets, not refused.
    assert!(check_pool("Worker").is_ok());
    assert!(check_pool("a/b").is_err());
    assert!(check_pool("../master").is_err());
    assert!(check_pool("master/").is_err());
}

#[test]
fn sync_summary_names_failing_and_synced_kinds() {
    let recorder = SyncRecorder::default();
    recorder.watch_failed("MachineOSBuild", "forbidden");
    recorder.cache_synced("MachineConfigPool");
    recorder.watch_failed("MachineConfigPool", "unreachable");
    let summary = recorder.summary(Duration::from_secs(30));
    assert!(summary.contains("within 30 s"), "{summary}");
    assert!(
        summary.contains("failing: MachineOSBuild (forbidden)"),
        "{summary}"
    );
    assert!(summary.contains("synced: MachineConfigPool"), "{summary}");
}

#[test]
fn readiness_and_features_are_reported_in_cluster_mode() {
    use crate::rights::{Feature, Grants, Names, Requirements};
    let mut snapshot = cluster_snapshot(0);
    snapshot.synced.remove(&Input::MachineConfigs);
    let explained = explain_worker(&snapshot, true, &SpecRequest::default_accept());
    let mut e = explained.explanation;
    assert_eq!(e.waiting_for, ["MachineConfig"]);
    assert_eq!(e.status, 503);
    // Under the MCO's own rights: every feature off, saying what it misses and what runs instead.
    let requirements = Requirements::new(&Names::openshift());
    let answers = requirements
        .all_rules()
        .into_iter()
        .map(|rule| {
            let read =
                rule.resource == "configmaps" && rule.verb != "create" && rule.verb != "patch";
            (rule, read)
        })
        .collect();
    let grants = Grants::unknown(requirements).probed(answers);
    e.features = Some(FeatureReport::all(&grants));
    let text = format_text(&e);
    assert!(
        text.contains("readiness:        waiting for the MachineConfig caches to sync"),
        "{text}"
    );
    let gate = Feature::LayeredNodeGate.as_str();
    assert!(
        text.contains(&format!(
            "{gate}: off (not granted: list nodes, watch nodes"
        )),
        "{text}"
    );
    assert!(text.contains(Feature::LayeredNodeGate.when_off()), "{text}");
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["features"][1]["feature"], "mcn-publisher");
    assert_eq!(json["features"][1]["enabled"], false);
    // Bootstrap mode has neither line.
    let bootstrap = explain(
        &Snapshot::empty(Mode::Bootstrap),
        true,
        "master",
        &SpecRequest::default_accept(),
        "test".into(),
    );
    let text = format_text(&bootstrap.explanation);
    assert!(
        !text.contains("readiness:") && !text.contains("features:"),
        "{text}"
    );
}

/// `cluster_snapshot` with its rendered configs in spec 3.6, `rendered-worker-old` carrying a
/// setuid file.
fn cluster_snapshot_3_6() -> Snapshot {
    let mut snapshot = cluster_snapshot(0);
    for name in ["rendered-worker-old", "rendered-worker-new"] {
        let mut mc = (*machine_config(name, &["nosmt"])).clone();
        if let Some(config) = mc.spec.config.as_mut() {
            config.modify(|config| {
                config["ignition"]["version"] = json!("3.6.0");
                config["storage"]["files"][1]["mode"] = json!(0o4755);
            });
        }
        snapshot
            .machine_configs
            .insert(name.into(), Ok(Arc::new(mc)));
    }
    snapshot
}

#[test]
fn a_spec_3_6_rendered_config_is_served_as_3_6_and_the_rule_says_why() {
    let snapshot = cluster_snapshot_3_6();
    let explained = explain_worker(&snapshot, true, &SpecRequest::default_accept());
    let e = &explained.explanation;
    assert_eq!(e.status, 200, "{:?}", e.error);
    assert_eq!(e.spec_version.as_deref(), Some("3.6.0"));
    assert_eq!(e.served.as_ref().expect("served").ignition_version, "3.6.0");
    assert_eq!(
        e.spec_rule.as_deref(),
        Some("Accept asks for 3.6.0: spec 3.6.0; the rendered MachineConfig rendered-worker-old is spec 3.6.0 (an MCO that renders 3.6): served as 3.6.0")
    );
    let newer = SpecRequest::Accept("application/vnd.coreos.ignition+json;version=3.7.0".into());
    let e = explain_worker(&snapshot, true, &newer).explanation;
    assert_eq!(e.spec_version.as_deref(), Some("3.6.0"));
    assert!(e.spec_rule.as_deref().expect("rule").starts_with(
        "Accept asks for 3.7.0, a 3.x minor newer than any known here: the newest, 3.6.0;"
    ));

    // Older specs are translated down, and the setuid bit cannot be said below 3.6: the error
    // names the field and its cause once.
    let old = SpecRequest::Accept("application/vnd.coreos.ignition+json;version=3.4.0".into());
    let e = explain_worker(&snapshot, true, &old).explanation;
    assert_eq!(e.status, 500);
    assert_eq!(e.spec_version.as_deref(), Some("3.4.0"));
    assert!(e.spec_rule.as_deref().expect("rule").ends_with(
        "; translated down from the rendered MachineConfig rendered-worker-old (spec 3.6.0)"
    ));
    let error = e.error.expect("error");
    assert_eq!(error.kind, "translate");
    assert_eq!(
        error.message,
        "machine config \"rendered-worker-old\": translating to spec 3.4.0 failed: storage.files[1].mode: special mode bits are not supported in spec v3.5"
    );
    let text = super::text::format_text(&e_text(&snapshot, &old));
    assert_eq!(
        text.matches("special mode bits are not supported").count(),
        1,
        "{text}"
    );
    assert!(text.contains("version rule:"), "{text}");
}

fn e_text(snapshot: &Snapshot, spec: &SpecRequest) -> Explanation {
    explain_worker(snapshot, true, spec).explanation
}

#[test]
fn a_parse_error_is_named_once() {
    // The case: a rendered config of a spec this server does not read.
    let mut snapshot = cluster_snapshot(0);
    let mut mc = (*machine_config("rendered-worker-old", &[])).clone();
    if let Some(config) = mc.spec.config.as_mut() {
        config.modify(|config| config["ignition"]["version"] = json!("3.7.0"));
    }
    snapshot
        .machine_configs
        .insert("rendered-worker-old".into(), Ok(Arc::new(mc)));
    let e = explain_worker(&snapshot, true, &SpecRequest::default_accept()).explanation;
    assert_eq!(e.status, 500);
    let error = e.error.expect("error");
    assert_eq!(
        error.message,
        "machine config \"rendered-worker-old\": parsing Ignition config failed: unknown version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5,3.6"
    );
}
