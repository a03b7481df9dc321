//! Self-tests of the fake Kubernetes API server (`tests/support/fake_apiserver/`), using kube-rs
//! itself as the client, so the fake is held to what the server's real client expects: status
//! codes and Status bodies, resourceVersion semantics, watches that kube-runtime's watcher and
//! reflector can follow through compaction and outages, server-side apply, CRD validation.

use std::time::Duration;
use support::tier;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind, ObjectMeta};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use machine_config_server::api::{
    MachineConfigPool, MachineConfigPoolSpec, MachineConfigPoolStatus,
};
use serde_json::{json, Value};
use support::fake_apiserver::{real_crds, validate_against, FakeApiServer, Options};

const DEADLINE: Duration = Duration::from_secs(20);

/// Polls `check` until it holds or the deadline passes.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates namespaces (a fresh server has only `default` and the `kube-*` ones; a namespaced
/// create elsewhere is a 404, as on kube-apiserver).
fn create_namespaces(server: &FakeApiServer, names: &[&str]) {
    for name in names {
        server
            .create(
                &json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }),
            )
            .unwrap_or_else(|e| panic!("namespace {name}: {e}"));
    }
}

/// The Kubernetes Status of a failed call; panics if the call succeeded or failed otherwise.
fn status_of<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error Status, got {other:?}"),
    }
}

fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn pool(name: &str, rendered: &str) -> MachineConfigPool {
    let mut pool = MachineConfigPool::new(name, MachineConfigPoolSpec::default());
    pool.spec.configuration.name = rendered.to_string();
    pool
}

/// A server with the real OpenShift CRDs (for `#[tier(upstream)]` tests).
fn real_crd_options() -> Options {
    Options {
        crd_dir: Some(support::upstream::crds()),
        ..Options::default()
    }
}

fn mcn_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "machineconfiguration.openshift.io",
            "v1",
            "MachineConfigNode",
        ),
        "machineconfignodes",
    )
}

fn mcn(name: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigNode",
        "metadata": { "name": name },
        "spec": {
            "node": { "name": name },
            "pool": { "name": "worker" },
            "configVersion": { "desired": "rendered-worker-1" },
        },
    })
}

fn condition(kind: &str, status: &str) -> Value {
    json!({
        "type": kind,
        "status": status,
        "reason": "Testing",
        "message": format!("{kind} is {status}"),
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    })
}

#[tokio::test]
async fn kubeconfig_discovery_and_unknown_api() {
    let server = FakeApiServer::start(Options {
        routes: false,
        ..Options::default()
    });
    let text = std::fs::read_to_string(server.kubeconfig_file()).expect("kubeconfig written");
    assert!(
        text.contains(&server.url()),
        "kubeconfig points at the server: {text}"
    );
    let client = server.client().await;

    let discovery = kube::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let mco = discovery
        .get("machineconfiguration.openshift.io")
        .expect("MCO group discovered");
    let kinds: Vec<String> = mco
        .recommended_resources()
        .into_iter()
        .map(|(r, _)| r.kind)
        .collect();
    for kind in [
        "MachineConfig",
        "MachineConfigPool",
        "MachineConfigNode",
        "ControllerConfig",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    assert!(
        discovery.get("route.openshift.io").is_none(),
        "routes disabled"
    );

    // Without the Route API, a request for it is a 404 like on plain Kubernetes (the mux's
    // plain-text page, which kube-rs reports without a reason).
    let route = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("route.openshift.io", "v1", "Route"),
        "routes",
    );
    let routes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "openshift-image-registry", &route);
    let status = status_of(routes.list(&ListParams::default()).await);
    assert_eq!(status.code, 404);

    // With it (the default), the same list works.
    let openshift = FakeApiServer::start(Options::default());
    let routes: Api<DynamicObject> =
        Api::namespaced_with(openshift.client().await, "openshift-image-registry", &route);
    assert!(routes
        .list(&ListParams::default())
        .await
        .expect("list routes")
        .items
        .is_empty());
}

#[tokio::test]
async fn get_create_replace_delete_status_codes() {
    let server = FakeApiServer::start(Options::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");

    let missing = status_of(api.get("nope").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.message, "configmaps \"nope\" not found");
    assert_eq!(
        missing.details.as_ref().map(|d| d.name.as_str()),
        Some("nope")
    );

    let created = api
        .create(&PostParams::default(), &config_map("a", &[], &[("k", "1")]))
        .await
        .expect("create");
    let meta = &created.metadata;
    assert!(
        meta.uid.as_deref().is_some_and(|u| u.len() == 36),
        "uid set: {meta:?}"
    );
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    let first_rv: u64 = meta
        .resource_version
        .as_deref()
        .unwrap_or_default()
        .parse()
        .expect("numeric rv");

    let dup = status_of(
        api.create(&PostParams::default(), &config_map("a", &[], &[]))
            .await,
    );
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    // Replace with the current resourceVersion succeeds and moves it forward.
    let mut fresh = created.clone();
    fresh.data = Some([("k".to_string(), "2".to_string())].into());
    let replaced = api
        .replace("a", &PostParams::default(), &fresh)
        .await
        .expect("replace");
    let second_rv: u64 = replaced
        .metadata
        .resource_version
        .as_deref()
        .unwrap_or_default()
        .parse()
        .expect("rv");
    assert!(second_rv > first_rv);
    assert_eq!(replaced.metadata.uid, created.metadata.uid);

    // Replacing again from the stale copy is a conflict.
    let stale = status_of(api.replace("a", &PostParams::default(), &created).await);
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert!(
        stale.message.contains("the object has been modified"),
        "{}",
        stale.message
    );

    // Replacing something that does not exist is a 404.
    let ghost = status_of(
        api.replace(
            "ghost",
            &PostParams::default(),
            &config_map("ghost", &[], &[]),
        )
        .await,
    );
    assert_eq!(ghost.code, 404);

    // Merge patch changes only what it names.
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "extra": "x" } })),
        )
        .await
        .expect("merge patch");
    let data = patched.data.unwrap_or_default();
    assert_eq!(
        (
            data.get("k").map(String::as_str),
            data.get("extra").map(String::as_str)
        ),
        (Some("2"), Some("x"))
    );

    // Delete, then delete again.
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    let gone = status_of(api.delete("a", &DeleteParams::default()).await);
    assert_eq!((gone.code, gone.reason.as_str()), (404, "NotFound"));
    assert!(server.get("ConfigMap", Some("default"), "a").is_none());
}

#[tokio::test]
async fn list_selectors_pagination_and_all_namespaces() {
    let server = FakeApiServer::start(Options::default());
    create_namespaces(&server, &["other"]);
    let client = server.client().await;
    for (ns, name, labels) in [
        ("default", "cm-1", vec![("app", "a"), ("tier", "web")]),
        ("default", "cm-2", vec![("app", "a")]),
        ("default", "cm-3", vec![("app", "b")]),
        ("other", "cm-4", vec![("app", "a")]),
        ("other", "cm-5", vec![]),
    ] {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        api.create(&PostParams::default(), &config_map(name, &labels, &[]))
            .await
            .expect("create");
    }
    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect()
    };
    let default: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let all: Api<ConfigMap> = Api::all(client.clone());

    assert_eq!(
        names(default.list(&ListParams::default()).await.expect("list")),
        ["cm-1", "cm-2", "cm-3"]
    );
    assert_eq!(
        names(
            all.list(&ListParams::default().labels("app=a"))
                .await
                .expect("list")
        ),
        ["cm-1", "cm-2", "cm-4"]
    );
    assert_eq!(
        names(
            all.list(&ListParams::default().labels("app=a,!tier"))
                .await
                .expect("list")
        ),
        ["cm-2", "cm-4"]
    );
    assert_eq!(
        names(
            all.list(&ListParams::default().labels("tier"))
                .await
                .expect("list")
        ),
        ["cm-1"]
    );
    assert_eq!(
        names(
            all.list(&ListParams::default().labels("app in (b),app!=a"))
                .await
                .expect("list")
        ),
        ["cm-3"]
    );
    assert_eq!(
        names(
            all.list(&ListParams::default().fields("metadata.name=cm-5"))
                .await
                .expect("list")
        ),
        ["cm-5"]
    );
    assert_eq!(
        names(
            all.list(&ListParams::default().fields("metadata.namespace=other,metadata.name!=cm-5"))
                .await
                .expect("list")
        ),
        ["cm-4"]
    );
    let bad = status_of(
        all.list(&ListParams::default().fields("spec.nodeName=x"))
            .await,
    );
    assert_eq!(bad.code, 400);

    // Pages of two with continue tokens, all reporting the first page's resourceVersion.
    let first = all
        .list(&ListParams::default().limit(2))
        .await
        .expect("page 1");
    let list_rv = first.metadata.resource_version.clone();
    let mut token = first.metadata.continue_.clone();
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let mut seen = names(first);
    while let Some(next) = token.filter(|t| !t.is_empty()) {
        let page = all
            .list(&ListParams::default().limit(2).continue_token(&next))
            .await
            .expect("next page");
        assert_eq!(page.metadata.resource_version, list_rv);
        token = page.metadata.continue_.clone();
        seen.extend(names(page));
    }
    assert_eq!(seen, ["cm-1", "cm-2", "cm-3", "cm-4", "cm-5"]);

    let invalid = status_of(
        all.list(&ListParams::default().limit(2).continue_token("garbage"))
            .await,
    );
    assert_eq!(invalid.code, 400);
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let server = FakeApiServer::start(Options::default());
    let api: Api<MachineConfigPool> = Api::all(server.client().await);

    let mut with_status = pool("worker", "rendered-worker-1");
    with_status.status = Some(MachineConfigPoolStatus {
        machine_count: 3,
        ..Default::default()
    });
    let created = api
        .create(&PostParams::default(), &with_status)
        .await
        .expect("create");
    assert!(
        created.status.is_none(),
        "status is dropped on create: {:?}",
        created.status
    );
    assert_eq!(created.metadata.generation, Some(1));

    // /status writes change only status and do not bump the generation.
    let mut status_write = created.clone();
    status_write.spec.configuration.name = "ignored".into();
    status_write.status = Some(MachineConfigPoolStatus {
        updated_machine_count: 1,
        configuration: machine_config_server::api::PoolConfiguration {
            name: "rendered-worker-1".into(),
            source: None,
        },
        ..Default::default()
    });
    let after_status = api
        .replace_status("worker", &PostParams::default(), &status_write)
        .await
        .expect("replace status");
    assert_eq!(after_status.spec.configuration.name, "rendered-worker-1");
    assert_eq!(
        after_status
            .status
            .as_ref()
            .map(|s| s.updated_machine_count),
        Some(1)
    );
    assert_eq!(after_status.metadata.generation, Some(1));

    // Main-resource writes ignore status and bump the generation on spec changes.
    let mut main_write = after_status.clone();
    main_write.spec.configuration.name = "rendered-worker-2".into();
    main_write.status = None;
    let after_main = api
        .replace("worker", &PostParams::default(), &main_write)
        .await
        .expect("replace");
    assert_eq!(after_main.spec.configuration.name, "rendered-worker-2");
    assert_eq!(
        after_main.status.as_ref().map(|s| s.updated_machine_count),
        Some(1)
    );
    assert_eq!(after_main.metadata.generation, Some(2));

    // A label change is a metadata change: no generation bump.
    let relabeled = api
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "x": "y" } } })),
        )
        .await
        .expect("patch labels");
    assert_eq!(relabeled.metadata.generation, Some(2));

    // Status patch through the subresource.
    let patched = api
        .patch_status(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "machineCount": 5 } })),
        )
        .await
        .expect("patch status");
    assert_eq!(patched.status.as_ref().map(|s| s.machine_count), Some(5));
    assert_eq!(
        server
            .get("MachineConfigPool", None, "worker")
            .expect("stored")["status"]["machineCount"],
        5
    );
}

#[tokio::test]
async fn leases_replace_with_resource_version() {
    let server = FakeApiServer::start(Options::default());
    create_namespaces(&server, &["openshift-machine-config-operator"]);
    let api: Api<Lease> =
        Api::namespaced(server.client().await, "openshift-machine-config-operator");
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("machine-config-server".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("a".into()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
    };
    let held = api
        .create(&PostParams::default(), &lease)
        .await
        .expect("create lease");
    let mut renew = held.clone();
    renew.spec.as_mut().expect("spec").holder_identity = Some("a".into());
    renew.spec.as_mut().expect("spec").lease_transitions = Some(1);
    let renewed = api
        .replace("machine-config-server", &PostParams::default(), &renew)
        .await
        .expect("renew");
    assert_ne!(
        renewed.metadata.resource_version,
        held.metadata.resource_version
    );

    // Another candidate acting on the old copy loses.
    let mut steal = held.clone();
    steal.spec.as_mut().expect("spec").holder_identity = Some("b".into());
    let lost = status_of(
        api.replace("machine-config-server", &PostParams::default(), &steal)
            .await,
    );
    assert_eq!((lost.code, lost.reason.as_str()), (409, "Conflict"));
    let stored = server
        .get(
            "Lease",
            Some("openshift-machine-config-operator"),
            "machine-config-server",
        )
        .expect("lease");
    assert_eq!(stored["spec"]["holderIdentity"], "a");
}

#[tokio::test]
async fn server_side_apply_ownership_conflicts_and_list_maps() {
    let server = FakeApiServer::start(Options::default());
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &mcn_resource());
    let alice = PatchParams::apply("alice");
    let bob = PatchParams::apply("bob");

    // Apply creates, and records alice's fields in FieldsV1.
    let mut config = mcn("node-a");
    config["metadata"]["labels"] = json!({ "team": "a", "temp": "yes" });
    let created = api
        .patch("node-a", &alice, &Patch::Apply(&config))
        .await
        .expect("apply create");
    let managed = created.metadata.managed_fields.clone().unwrap_or_default();
    assert_eq!(managed.len(), 1, "{managed:?}");
    assert_eq!(
        (
            managed[0].manager.as_deref(),
            managed[0].operation.as_deref()
        ),
        (Some("alice"), Some("Apply"))
    );
    let fields = serde_json::to_value(&managed[0].fields_v1).expect("fieldsV1");
    assert_eq!(fields["f:spec"]["f:pool"]["f:name"], json!({}), "{fields}");
    assert_eq!(
        fields["f:metadata"]["f:labels"]["f:team"],
        json!({}),
        "{fields}"
    );

    // Bob setting a field alice owns to another value conflicts...
    let mut takeover = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigNode",
        "metadata": { "name": "node-a" },
        "spec": { "pool": { "name": "infra" } },
    });
    let conflict = status_of(api.patch("node-a", &bob, &Patch::Apply(&takeover)).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict.message.contains("conflict with \"alice\""),
        "{}",
        conflict.message
    );
    assert!(
        conflict.message.contains(".spec.pool.name"),
        "{}",
        conflict.message
    );
    let causes = conflict
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert_eq!(
        causes.first().map(|c| c.field.as_str()),
        Some(".spec.pool.name")
    );

    // ...but the same value is shared ownership, not a conflict.
    takeover["spec"]["pool"]["name"] = json!("worker");
    api.patch("node-a", &bob, &Patch::Apply(&takeover))
        .await
        .expect("same value applies");

    // Forcing moves ownership to bob.
    takeover["spec"]["pool"]["name"] = json!("infra");
    let forced = api
        .patch("node-a", &bob.clone().force(), &Patch::Apply(&takeover))
        .await
        .expect("forced");
    assert_eq!(forced.data["spec"]["pool"]["name"], "infra");
    let alice_fields = forced
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.manager.as_deref() == Some("alice"))
        .map(|m| serde_json::to_value(&m.fields_v1).expect("json"))
        .expect("alice still manages other fields");
    assert!(
        alice_fields["f:spec"]["f:pool"].get("f:name").is_none(),
        "alice lost .spec.pool.name: {alice_fields}"
    );

    // Alice re-applies without the `temp` label: it is removed; `team` stays.
    let mut again = mcn("node-a");
    again["spec"]["pool"]["name"] = json!("infra");
    again["metadata"]["labels"] = json!({ "team": "a" });
    let pruned = api
        .patch("node-a", &alice, &Patch::Apply(&again))
        .await
        .expect("re-apply");
    let labels = pruned.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    assert!(
        !labels.contains_key("temp"),
        "omitted label removed: {labels:?}"
    );

    // Status conditions are a list-map keyed by `type`: two managers' conditions merge.
    let status_of_manager = |kind: &str, status: &str| {
        json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigNode",
            "metadata": { "name": "node-a" },
            "status": { "conditions": [condition(kind, status)] },
        })
    };
    api.patch_status(
        "node-a",
        &alice,
        &Patch::Apply(&status_of_manager("Updated", "True")),
    )
    .await
    .expect("alice status");
    let merged = api
        .patch_status(
            "node-a",
            &bob,
            &Patch::Apply(&status_of_manager("UpdatePrepared", "False")),
        )
        .await
        .expect("bob status");
    let types: Vec<&str> = merged.data["status"]["conditions"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["type"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(types, ["Updated", "UpdatePrepared"]);
    let status_entry = merged
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.manager.as_deref() == Some("bob") && m.subresource.as_deref() == Some("status"))
        .map(|m| serde_json::to_value(&m.fields_v1).expect("json"))
        .expect("bob's status entry");
    let item = &status_entry["f:status"]["f:conditions"]["k:{\"type\":\"UpdatePrepared\"}"];
    assert_eq!(item["."], json!({}), "{status_entry}");
    assert_eq!(item["f:status"], json!({}), "{status_entry}");

    // Bob flipping alice's condition conflicts; dropping his own removes only his.
    let conflict = status_of(
        api.patch_status(
            "node-a",
            &bob,
            &Patch::Apply(&status_of_manager("Updated", "False")),
        )
        .await,
    );
    assert_eq!(conflict.code, 409);
    let mut nothing = status_of_manager("x", "True");
    nothing["status"]["conditions"] = json!([]);
    let after = api
        .patch_status("node-a", &bob, &Patch::Apply(&nothing))
        .await
        .expect("bob drops his condition");
    let types: Vec<&str> = after.data["status"]["conditions"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["type"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(types, ["Updated"]);

    // Applying to the main resource never touches status; the spec apply was a no-op.
    let rv_before = after.metadata.resource_version.clone();
    let same = api
        .patch("node-a", &alice, &Patch::Apply(&again))
        .await
        .expect("no-op apply");
    assert_eq!(
        same.metadata.resource_version, rv_before,
        "identical apply does not write"
    );
    assert_eq!(
        same.data["status"]["conditions"].as_array().map(Vec::len),
        Some(1)
    );

    // Apply requires a field manager.
    let status = status_of(
        api.patch("node-a", &PatchParams::default(), &Patch::Apply(&again))
            .await,
    );
    assert_eq!(status.code, 422);
}

#[tier(upstream)]
#[tokio::test]
async fn crd_validation_and_pruning() {
    // The rules checked here (required fields, patterns, bounds) are the real CRD's.
    let crds = real_crds();
    let server = FakeApiServer::start(real_crd_options());
    let api: Api<DynamicObject> = Api::all_with(server.client().await, &mcn_resource());

    // Missing required fields, a bad enum, a bad pattern and a bad date-time: 422 with causes.
    let mut bad = mcn("node-b");
    bad["spec"].as_object_mut().expect("spec").remove("pool");
    let status = status_of(
        api.patch("node-b", &PatchParams::apply("t"), &Patch::Apply(&bad))
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.contains("spec.pool: Required value"),
        "{}",
        status.message
    );

    api.patch(
        "node-b",
        &PatchParams::apply("t"),
        &Patch::Apply(&mcn("node-b")),
    )
    .await
    .expect("valid create");
    let mut bad_condition = condition("Updated", "Maybe");
    bad_condition["reason"] = json!("not a reason!");
    bad_condition["lastTransitionTime"] = json!("yesterday");
    let status = status_of(
        api.patch_status(
            "node-b",
            &PatchParams::apply("t"),
            &Patch::Merge(json!({ "status": { "conditions": [bad_condition] } })),
        )
        .await,
    );
    assert_eq!(status.code, 422);
    let causes: Vec<String> = status
        .details
        .map(|d| d.causes.into_iter().map(|c| c.field).collect())
        .unwrap_or_default();
    for field in [
        "status.conditions[0].status",
        "status.conditions[0].reason",
        "status.conditions[0].lastTransitionTime",
    ] {
        assert!(causes.iter().any(|c| c == field), "{field} in {causes:?}");
    }

    // Unknown fields: an apply cannot be typed (a plain 500, as kube-apiserver 1.36 answers);
    // a create prunes them (and is rejected with fieldValidation=Strict).
    let mut extra = mcn("node-c");
    extra["spec"]["bogus"] = json!(1);
    match api
        .patch("node-c", &PatchParams::apply("t"), &Patch::Apply(&extra))
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 500);
            assert!(
                status
                    .message
                    .ends_with(".spec.bogus: field not declared in schema"),
                "{}",
                status.message
            );
        }
        other => panic!("an apply with an undeclared field: {other:?}"),
    }
    let strict = PostParams::default();
    let mut strict_obj: DynamicObject = serde_json::from_value(extra.clone()).expect("object");
    strict_obj.metadata.name = Some("node-d".into());
    // The CRD's CEL rule: spec.node.name must match metadata.name.
    strict_obj.data["spec"]["node"]["name"] = json!("node-d");
    let created = api
        .create(&strict, &strict_obj)
        .await
        .expect("created with default Warn");
    assert!(created.data["spec"].get("bogus").is_none());

    // The same checks as a plain function.
    assert_eq!(
        validate_against(crds, "MachineConfigNode", &mcn("n")),
        Ok(())
    );
    let problems = validate_against(crds, "MachineConfigNode", &bad).expect_err("invalid");
    assert!(
        problems.iter().any(|p| p == "spec.pool: Required value"),
        "{problems:?}"
    );
    let problems = validate_against(crds, "MachineConfigNode", &extra).expect_err("unknown field");
    assert!(
        problems.iter().any(|p| p.contains("spec.bogus")),
        "{problems:?}"
    );
}

#[tokio::test]
async fn watcher_and_reflector_follow_changes() {
    let server = FakeApiServer::start(Options::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let (reader, writer) = reflector::store();
    let events = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(events.for_each(|_| async {}));

    let data = |name: &str| {
        reader
            .get(&reflector::ObjectRef::new(name).within("default"))
            .and_then(|c| c.data.clone())
            .and_then(|d| d.get("k").cloned())
    };
    api.create(&PostParams::default(), &config_map("w", &[], &[("k", "1")]))
        .await
        .expect("create");
    eventually("reflector sees the add", || {
        data("w").as_deref() == Some("1")
    })
    .await;
    // A change made through the handle is seen too.
    server
        .apply_object(&json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "w", "namespace": "default" }, "data": { "k": "2" } }))
        .expect("apply through handle");
    eventually("reflector sees the modify", || {
        data("w").as_deref() == Some("2")
    })
    .await;
    api.delete("w", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("reflector sees the delete", || {
        reader
            .get(&reflector::ObjectRef::new("w").within("default"))
            .is_none()
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn watch_after_compaction_gets_410_and_watcher_relists() {
    let server = FakeApiServer::start(Options::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    api.create(&PostParams::default(), &config_map("old", &[], &[]))
        .await
        .expect("create");
    let old_rv = server.resource_version().to_string();
    api.create(&PostParams::default(), &config_map("new", &[], &[]))
        .await
        .expect("create");

    // A resume from before the compaction answers with an ERROR event carrying 410 Expired.
    server.compact();
    let mut stream = api
        .watch(&WatchParams::default().timeout(5), &old_rv)
        .await
        .expect("watch starts")
        .boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    // A resume from now still works and replays later changes.
    let now = server.resource_version().to_string();
    let mut stream = api
        .watch(&WatchParams::default().timeout(5), &now)
        .await
        .expect("watch")
        .boxed();
    api.delete("old", &DeleteParams::default())
        .await
        .expect("delete");
    match stream.next().await {
        Some(Ok(WatchEvent::Deleted(cm))) => assert_eq!(cm.metadata.name.as_deref(), Some("old")),
        other => panic!("expected DELETED, got {other:?}"),
    }

    // kube-runtime's watcher: cut its stream (outage), change things, compact, come back. It
    // gets 410 on resume and re-lists, so the reflector drops what was deleted meanwhile.
    let (reader, writer) = reflector::store();
    let events = watcher(api.clone(), watcher::Config::default().disable_bookmarks())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(events.for_each(|_| async {}));
    let has = |name: &str| {
        reader
            .get(&reflector::ObjectRef::new(name).within("default"))
            .is_some()
    };
    eventually("initial list", || has("new")).await;
    let lists_before = count(&server, "list", "configmaps");

    server.stop();
    server
        .delete("ConfigMap", Some("default"), "new")
        .expect("delete while down");
    server
        .create(&serde_json::to_value(config_map("later", &[], &[])).expect("json"))
        .expect("create while down");
    server.compact();
    server.restart();
    eventually("reflector re-listed after 410", || {
        has("later") && !has("new")
    })
    .await;
    assert!(
        count(&server, "list", "configmaps") > lists_before,
        "a new LIST was made"
    );
    task.abort();
}

fn count(server: &FakeApiServer, verb: &str, resource: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.verb == verb && r.resource == resource)
        .count()
}

#[tokio::test]
async fn watcher_resumes_after_outage_without_relisting() {
    let server = FakeApiServer::start(Options::default());
    let api: Api<MachineConfigPool> = Api::all(server.client().await);
    api.create(&PostParams::default(), &pool("master", "rendered-master-1"))
        .await
        .expect("create");
    let (reader, writer) = reflector::store();
    let events = watcher(api.clone(), watcher::Config::default().disable_bookmarks())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(events.for_each(|_| async {}));
    let rendered = |name: &str| {
        reader
            .get(&reflector::ObjectRef::new(name))
            .map(|p| p.spec.configuration.name.clone())
    };
    eventually("initial list", || {
        rendered("master").as_deref() == Some("rendered-master-1")
    })
    .await;
    let lists_before = count(&server, "list", "machineconfigpools");
    let watches_before = count(&server, "watch", "machineconfigpools");

    server.stop();
    // Connections are refused while stopped.
    assert!(
        std::net::TcpStream::connect(server.address()).is_err(),
        "port closed while stopped"
    );
    let mut changed = server
        .get("MachineConfigPool", None, "master")
        .expect("stored");
    changed["spec"]["configuration"]["name"] = json!("rendered-master-2");
    server.update(&changed).expect("update while down");
    server.restart();

    eventually("reflector sees the change made during the outage", || {
        rendered("master").as_deref() == Some("rendered-master-2")
    })
    .await;
    assert_eq!(
        count(&server, "list", "machineconfigpools"),
        lists_before,
        "resumed from history, no re-list"
    );
    assert!(count(&server, "watch", "machineconfigpools") > watches_before);
    task.abort();
}

#[tokio::test]
async fn bookmarks_and_streaming_lists() {
    let server = FakeApiServer::start(Options {
        bookmark_interval: Duration::from_millis(100),
        ..Options::default()
    });
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    api.create(&PostParams::default(), &config_map("x", &[], &[]))
        .await
        .expect("create");
    let rv = server.resource_version();

    let mut stream = api
        .watch(&WatchParams::default().timeout(10), &rv.to_string())
        .await
        .expect("watch")
        .boxed();
    // A change to another resource moves the global revision; the bookmark reports it.
    server
        .apply_object(&serde_json::to_value(pool("infra", "r")).expect("json"))
        .expect("pool");
    let now = server.resource_version();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let event = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("bookmark in time");
        match event {
            Some(Ok(WatchEvent::Bookmark(b))) => {
                let at: u64 = b.metadata.resource_version.parse().expect("numeric");
                if at >= now {
                    break;
                }
            }
            Some(Ok(other)) => panic!("only bookmarks expected, got {other:?}"),
            other => panic!("stream ended: {other:?}"),
        }
    }

    // Streaming list: initial ADDED events, then the initial-events-end bookmark.
    let (reader, writer) = reflector::store();
    let events = watcher(api.clone(), watcher::Config::default().streaming_lists())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(events.for_each(|_| async {}));
    eventually("streaming list delivered the object", || {
        reader
            .get(&reflector::ObjectRef::new("x").within("default"))
            .is_some()
    })
    .await;
    assert_eq!(
        count(&server, "list", "configmaps"),
        0,
        "no LIST with streaming lists"
    );
    task.abort();
}

#[tokio::test]
async fn request_log_records_verbs() {
    let server = FakeApiServer::start(Options::default());
    create_namespaces(&server, &["ns1"]);
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "ns1");
    api.create(&PostParams::default(), &config_map("r", &[], &[]))
        .await
        .expect("create");
    api.get("r").await.expect("get");
    api.list(&ListParams::default()).await.expect("list");
    api.patch(
        "r",
        &PatchParams::apply("m"),
        &Patch::Apply(&config_map("r", &[], &[("a", "b")])),
    )
    .await
    .expect("apply");
    api.delete("r", &DeleteParams::default())
        .await
        .expect("delete");
    type Seen = (String, String, Option<String>, Option<String>, u16);
    let log: Vec<Seen> = server
        .requests()
        .into_iter()
        .map(|r| (r.verb, r.resource, r.namespace, r.name, r.status))
        .collect();
    let ns = Some("ns1".to_string());
    let r = Some("r".to_string());
    assert_eq!(
        log,
        [
            // A create names its object as kube-apiserver's audit log does (from the body).
            (
                "create".into(),
                "configmaps".into(),
                ns.clone(),
                r.clone(),
                201
            ),
            (
                "get".into(),
                "configmaps".into(),
                ns.clone(),
                r.clone(),
                200
            ),
            ("list".into(), "configmaps".into(), ns.clone(), None, 200),
            (
                "patch".into(),
                "configmaps".into(),
                ns.clone(),
                r.clone(),
                200
            ),
            ("delete".into(), "configmaps".into(), ns, r, 200),
        ]
    );
}

#[tokio::test]
async fn fixtures_load_from_yaml() {
    let server = FakeApiServer::start(Options::default());
    create_namespaces(&server, &["openshift-machine-config-operator"]);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("pools.yaml"),
        "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: master
spec:
  configuration:
    name: rendered-master-1
status:
  updatedMachineCount: 1
  configuration:
    name: rendered-master-0
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: kubeconfig-data
    namespace: openshift-machine-config-operator
  data:
    ca-bundle.crt: abc
",
    )
    .expect("write");
    let loaded = server.load_yaml_dir(dir.path()).expect("load");
    assert_eq!(loaded.len(), 2);
    let api: Api<MachineConfigPool> = Api::all(server.client().await);
    let master = api.get("master").await.expect("pool");
    assert_eq!(
        master.served_config_name(),
        "rendered-master-1",
        "status loaded through /status"
    );
    assert!(server
        .get(
            "ConfigMap",
            Some("openshift-machine-config-operator"),
            "kubeconfig-data"
        )
        .is_some());
    let invalid = server.load_yaml_str("apiVersion: v1\nkind: Nope\nmetadata: {name: x}\n");
    assert!(invalid.is_err());

    // A partial change from the test: spec and status parts both land, the rest stays.
    let patched = server
        .merge_patch(
            "MachineConfigPool",
            None,
            "master",
            &json!({ "spec": { "paused": true }, "status": { "updatedMachineCount": 0 } }),
        )
        .expect("merge patch");
    assert_eq!(patched["spec"]["paused"], true);
    assert_eq!(
        patched["spec"]["configuration"]["name"],
        "rendered-master-1"
    );
    assert_eq!(patched["status"]["updatedMachineCount"], 0);
    let master = api.get("master").await.expect("pool");
    assert_eq!(master.served_config_name(), "rendered-master-0");
    assert_eq!(
        server
            .merge_patch("MachineConfigPool", None, "nope", &json!({}))
            .map_err(|e| e.code),
        Err(404)
    );
}

/// One raw HTTP/1.1 request; returns the status code and the body parsed as JSON (Null if not).
async fn raw(
    server: &FakeApiServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value) {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    send(server, &request).await
}

/// Sends one complete HTTP/1.1 request (`Connection: close`); the status code and the body
/// parsed as JSON (Null if not).
async fn send(server: &FakeApiServer, request: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // As the cluster admin of the server's kubeconfig (a request without a token is a 401).
    let request = match request.split_once("\r\n") {
        Some((line, rest)) if !rest.contains("Authorization:") => format!(
            "{line}\r\nAuthorization: Bearer {}\r\n{rest}",
            server.admin_token()
        ),
        _ => request.to_string(),
    };
    let mut stream = tokio::net::TcpStream::connect(server.address())
        .await
        .expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A server-side apply whose configuration has a field the kind does not declare cannot be
/// typed by structured-merge-diff: kube-apiserver answers a plain 500 (no reason) naming the
/// field, whatever `fieldValidation` says (kubernetes/kubernetes#139253; the MCN publisher met
/// it on a real 1.36 with a CRD that lacks `spec.configImage`).
#[tokio::test]
async fn an_apply_with_an_undeclared_field_is_the_typed_patch_500() {
    let server = FakeApiServer::start(Options::default());
    create_namespaces(&server, &["d"]);
    for validation in ["", "&fieldValidation=Strict", "&fieldValidation=Ignore"] {
        let (code, body) = raw(
            &server,
            "PATCH",
            &format!("/api/v1/namespaces/d/configmaps/c?fieldManager=m{validation}"),
            "application/apply-patch+yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\nspec: {x: 1}\n",
        )
        .await;
        assert_eq!(code, 500, "{validation}: {body}");
        // A plain error: the Status has no reason.
        assert!(body.get("reason").is_none(), "{body}");
        assert_eq!(
            body["message"],
            "failed to create typed patch object (d/c; /v1, Kind=ConfigMap): .spec: field not declared in schema",
            "{validation}"
        );
    }
    assert!(
        server.get("ConfigMap", Some("d"), "c").is_none(),
        "nothing was written"
    );
}

#[tokio::test]
async fn malformed_requests_get_status_errors_and_never_crash() {
    let server = FakeApiServer::start(Options::default());
    create_namespaces(&server, &["d", "other"]);
    server
        .create(&json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "c", "namespace": "d" } }))
        .expect("seed");
    let cm = "/api/v1/namespaces/d/configmaps";
    let json_ct = "application/json";
    let cases: Vec<(&str, String, &str, &str, u16)> = vec![
        ("GET", "/nope".into(), json_ct, "", 404),
        // (An unknown group's paths are the plain-text 404 page: see
        // `unserved_api_paths_are_the_plain_404_page`.)
        ("GET", "/api/v1/namespaces/d/nodes".into(), json_ct, "", 404),
        ("GET", "/api/v1/configmaps/c".into(), json_ct, "", 404),
        ("GET", format!("{cm}/c/scale"), json_ct, "", 404),
        ("GET", format!("{cm}/c/status"), json_ct, "", 404),
        (
            "GET",
            format!("{cm}?labelSelector=a%20in%20(b"),
            json_ct,
            "",
            400,
        ),
        (
            "GET",
            format!("{cm}?labelSelector=%3D%3Dx"),
            json_ct,
            "",
            400,
        ),
        // A limit that is not an int64 (a negative one is no limit: see the list test).
        ("GET", format!("{cm}?limit=x"), json_ct, "", 400),
        ("GET", format!("{cm}?resourceVersion=abc"), json_ct, "", 400),
        (
            "GET",
            format!("{cm}?resourceVersion=99999999"),
            json_ct,
            "",
            504,
        ),
        (
            "GET",
            format!("{cm}?resourceVersion=1&resourceVersionMatch=Exact"),
            json_ct,
            "",
            410,
        ),
        (
            "GET",
            format!("{cm}?watch=1&resourceVersion=x"),
            json_ct,
            "",
            400,
        ),
        (
            "GET",
            format!("{cm}?watch=1&timeoutSeconds=x"),
            json_ct,
            "",
            400,
        ),
        (
            "GET",
            format!("{cm}?watch=1&sendInitialEvents=true"),
            json_ct,
            "",
            422,
        ),
        ("POST", cm.into(), json_ct, "{not json", 400),
        ("POST", cm.into(), json_ct, "[1,2]", 400),
        (
            "POST",
            cm.into(),
            json_ct,
            r#"{"kind":"Secret","metadata":{"name":"x"}}"#,
            400,
        ),
        (
            "POST",
            cm.into(),
            json_ct,
            r#"{"apiVersion":"v2","metadata":{"name":"x"}}"#,
            400,
        ),
        ("POST", cm.into(), json_ct, r#"{"metadata":"x"}"#, 400),
        ("POST", cm.into(), json_ct, r#"{"metadata":{}}"#, 422),
        (
            "POST",
            cm.into(),
            json_ct,
            r#"{"metadata":{"name":"UPPER"}}"#,
            422,
        ),
        (
            "POST",
            cm.into(),
            json_ct,
            r#"{"metadata":{"name":"x","namespace":"other"}}"#,
            400,
        ),
        (
            "POST",
            cm.into(),
            json_ct,
            r#"{"metadata":{"name":"x","labels":{"a":5}}}"#,
            400,
        ),
        (
            "POST",
            format!("{cm}?dryRun=Maybe"),
            json_ct,
            r#"{"metadata":{"name":"x"}}"#,
            422,
        ),
        (
            "POST",
            format!("{cm}?fieldValidation=Loose"),
            json_ct,
            r#"{"metadata":{"name":"x"}}"#,
            422,
        ),
        (
            "PUT",
            format!("{cm}/c"),
            json_ct,
            r#"{"metadata":{"name":"other"}}"#,
            400,
        ),
        (
            "PUT",
            format!("{cm}/c"),
            json_ct,
            r#"{"metadata":{"name":"c","uid":"wrong"}}"#,
            409,
        ),
        ("PATCH", format!("{cm}/c"), "text/plain", "{}", 415),
        (
            "PATCH",
            format!("{cm}/c"),
            "application/merge-patch+json",
            "[]",
            400,
        ),
        (
            "PATCH",
            format!("{cm}/c"),
            "application/merge-patch+json",
            r#"{"metadata":null}"#,
            400,
        ),
        (
            "PATCH",
            format!("{cm}/c"),
            "application/merge-patch+json",
            r#"{"metadata":{"resourceVersion":"1"}}"#,
            409,
        ),
        (
            "PATCH",
            format!("{cm}/c"),
            "application/json-patch+json",
            r#"[{"op":"remove","path":"/nope/deeper"}]"#,
            422,
        ),
        (
            "PATCH",
            format!("{cm}/c"),
            "application/json-patch+json",
            r#"{"op":"x"}"#,
            400,
        ),
        (
            "PATCH",
            format!("{cm}/c"),
            "application/apply-patch+yaml",
            "a: b",
            422,
        ),
        (
            "PATCH",
            format!("{cm}/c?fieldManager=m"),
            "application/apply-patch+yaml",
            "- just\n- a list",
            400,
        ),
        (
            "PATCH",
            format!("{cm}/c?fieldManager=m"),
            "application/apply-patch+yaml",
            ": : :",
            400,
        ),
        (
            "PATCH",
            format!("{cm}/c?fieldManager=m"),
            "application/apply-patch+yaml",
            "metadata: {name: other}",
            400,
        ),
        (
            "PATCH",
            format!("{cm}/missing"),
            "application/merge-patch+json",
            "{}",
            404,
        ),
        (
            "PATCH",
            "/apis/machineconfiguration.openshift.io/v1/machineconfigs/x".into(),
            "application/strategic-merge-patch+json",
            "{}",
            415,
        ),
        ("DELETE", format!("{cm}/c"), json_ct, "{garbage", 400),
        (
            "DELETE",
            format!("{cm}/c"),
            json_ct,
            r#"{"preconditions":{"uid":"wrong"}}"#,
            409,
        ),
        ("DELETE", format!("{cm}/missing"), json_ct, "", 404),
        ("OPTIONS", cm.into(), json_ct, "", 405),
        // A create names no object, an update or patch one.
        (
            "POST",
            format!("{cm}/c"),
            json_ct,
            r#"{"metadata":{"name":"c"}}"#,
            405,
        ),
        (
            "PUT",
            cm.into(),
            json_ct,
            r#"{"metadata":{"name":"c"}}"#,
            405,
        ),
        ("POST", "/apis".into(), json_ct, "", 405),
    ];
    for (method, path, content_type, body, want) in cases {
        let (code, status) = raw(&server, method, &path, content_type, body).await;
        assert_eq!(code, want, "{method} {path} {body:?}: {status}");
        assert_eq!(
            status["kind"], "Status",
            "{method} {path}: a Status body: {status}"
        );
        assert_eq!(status["code"], want, "{method} {path}: {status}");
        assert_eq!(status["status"], "Failure");
    }
    // Still serving, and the object the bad requests aimed at is intact.
    let (code, object) = raw(&server, "GET", &format!("{cm}/c"), json_ct, "").await;
    assert_eq!(
        (code, object["metadata"]["name"].as_str()),
        (200, Some("c"))
    );
}

#[tokio::test]
async fn watch_selectors_follow_label_transitions() {
    let server = FakeApiServer::start(Options::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    api.create(
        &PostParams::default(),
        &config_map("s", &[("role", "x")], &[]),
    )
    .await
    .expect("create");
    let rv = server.resource_version().to_string();
    let mut stream = api
        .watch(
            &WatchParams::default()
                .labels("role=y")
                .timeout(10)
                .disable_bookmarks(),
            &rv,
        )
        .await
        .expect("watch")
        .boxed();
    let relabel = |role: &str| Patch::Merge(json!({ "metadata": { "labels": { "role": role } } }));
    api.patch("s", &PatchParams::default(), &relabel("y"))
        .await
        .expect("into selection");
    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "a": "b" } })),
    )
    .await
    .expect("modify");
    api.patch("s", &PatchParams::default(), &relabel("z"))
        .await
        .expect("out of selection");
    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "a": "c" } })),
    )
    .await
    .expect("unseen");
    let mut seen = Vec::new();
    for _ in 0..3 {
        match tokio::time::timeout(DEADLINE, stream.next())
            .await
            .expect("event in time")
        {
            Some(Ok(WatchEvent::Added(_))) => seen.push("ADDED"),
            Some(Ok(WatchEvent::Modified(_))) => seen.push("MODIFIED"),
            Some(Ok(WatchEvent::Deleted(_))) => seen.push("DELETED"),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["ADDED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn finalizers_preconditions_json_patch_generate_name_and_dry_run() {
    let server = FakeApiServer::start(Options::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");

    // generateName picks a name.
    let generated = api
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    generate_name: Some("gen-".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("generateName");
    let name = generated.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    // dryRun stores nothing.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    api.create(&dry, &config_map("dry", &[], &[]))
        .await
        .expect("dry run create");
    assert!(server.get("ConfigMap", Some("default"), "dry").is_none());
    // ... nor does a dry-run update, patch or delete change what is stored.
    api.create(
        &PostParams::default(),
        &config_map("wet", &[], &[("k", "v")]),
    )
    .await
    .expect("create");
    let stored = server.get("ConfigMap", Some("default"), "wet").unwrap();
    let mut changed = config_map("wet", &[], &[("k", "changed")]);
    changed.metadata.resource_version = stored["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    let answered = api
        .replace("wet", &dry, &changed)
        .await
        .expect("dry update");
    assert_eq!(answered.data.unwrap()["k"], "changed");
    let dry_patch = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    api.patch(
        "wet",
        &dry_patch,
        &Patch::Merge(json!({ "data": { "k": "patched" } })),
    )
    .await
    .expect("dry patch");
    let dry_delete = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    api.delete("wet", &dry_delete).await.expect("dry delete");
    assert_eq!(
        server.get("ConfigMap", Some("default"), "wet").unwrap(),
        stored
    );

    // JSON patch with a failing test op is rejected; a good one applies.
    api.create(&PostParams::default(), &config_map("f", &[], &[("k", "v")]))
        .await
        .expect("create");
    let failing = json_patch::Patch(
        serde_json::from_value(json!([{ "op": "test", "path": "/data/k", "value": "other" }]))
            .expect("patch"),
    );
    assert_eq!(
        status_of(
            api.patch("f", &PatchParams::default(), &Patch::<()>::Json(failing))
                .await
        )
        .code,
        422
    );
    let good = json_patch::Patch(
        serde_json::from_value(json!([
            { "op": "test", "path": "/data/k", "value": "v" },
            { "op": "add", "path": "/metadata/finalizers", "value": ["example.com/hold"] },
        ]))
        .expect("patch"),
    );
    api.patch("f", &PatchParams::default(), &Patch::<()>::Json(good))
        .await
        .expect("json patch");

    // A stale uid precondition refuses the delete.
    let wrong = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(status_of(api.delete("f", &wrong).await).code, 409);

    // With a finalizer, delete only marks the object; removing the finalizer completes it.
    api.delete("f", &DeleteParams::default())
        .await
        .expect("delete marks");
    let marked = api.get("f").await.expect("still there");
    assert!(marked.metadata.deletion_timestamp.is_some());
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .expect("drop finalizer");
    assert_eq!(status_of(api.get("f").await).code, 404);
}

#[tokio::test]
async fn apply_conflicts_with_the_creator_of_a_field() {
    // Kubernetes tracks non-apply writers too (operation Update): applying a different value
    // to a field someone created with POST conflicts with that creator.
    let server = FakeApiServer::start(Options::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    let created = api
        .create(&pp, &config_map("o", &[], &[("k", "1")]))
        .await
        .expect("create");
    let managed = created.metadata.managed_fields.unwrap_or_default();
    assert_eq!(
        (
            managed[0].manager.as_deref(),
            managed[0].operation.as_deref()
        ),
        (Some("creator"), Some("Update"))
    );
    let status = status_of(
        api.patch(
            "o",
            &PatchParams::apply("applier"),
            &Patch::Apply(&config_map("o", &[], &[("k", "2")])),
        )
        .await,
    );
    assert!(
        status.message.contains("conflict with \"creator\""),
        "{}",
        status.message
    );
    let forced = api
        .patch(
            "o",
            &PatchParams::apply("applier").force(),
            &Patch::Apply(&config_map("o", &[], &[("k", "2")])),
        )
        .await
        .expect("forced");
    let creator = forced
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.manager.as_deref() == Some("creator"))
        .map(|m| serde_json::to_value(&m.fields_v1).expect("json"))
        .unwrap_or_default();
    // The creator keeps the `.data` map node it added (structured-merge-diff's Compare adds
    // nodes), but not the field the applier forced.
    assert_eq!(
        creator["f:data"],
        json!({}),
        "creator lost .data.k: {creator}"
    );
}

#[tokio::test]
async fn extra_resources_can_be_registered() {
    use support::fake_apiserver::ResourceDef;
    let server = FakeApiServer::start(Options {
        extra_resources: vec![ResourceDef::builtin(
            "",
            "podtemplates",
            "PodTemplate",
            true,
            false,
        )],
        ..Options::default()
    });
    let api: Api<k8s_openapi::api::core::v1::PodTemplate> =
        Api::namespaced(server.client().await, "default");
    let template = k8s_openapi::api::core::v1::PodTemplate {
        metadata: ObjectMeta {
            name: Some("t1".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    api.create(&PostParams::default(), &template)
        .await
        .expect("create pod template");
    assert_eq!(api.list(&Default::default()).await.unwrap().items.len(), 1);
    let duplicate = FakeApiServer::try_start(Options {
        extra_resources: vec![ResourceDef::builtin(
            "",
            "configmaps",
            "ConfigMap",
            true,
            false,
        )],
        ..Options::default()
    });
    assert!(duplicate.is_err(), "a resource cannot be registered twice");
}

#[tokio::test]
async fn metadata_only_list_get_and_watch() {
    let server = FakeApiServer::start(Options::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    api.create(
        &PostParams::default(),
        &config_map("m", &[("l", "v")], &[("big", "data")]),
    )
    .await
    .expect("create");
    let listed = api
        .list_metadata(&ListParams::default())
        .await
        .expect("list_metadata");
    assert_eq!(listed.items.len(), 1);
    let meta = api.get_metadata("m").await.expect("get_metadata");
    assert_eq!(
        meta.metadata
            .labels
            .unwrap_or_default()
            .get("l")
            .map(String::as_str),
        Some("v")
    );
    let (code, raw_list) = raw_with_accept(
        &server,
        "/api/v1/namespaces/default/configmaps",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!(
        (code, raw_list["kind"].as_str()),
        (200, Some("PartialObjectMetadataList"))
    );
    assert!(
        raw_list["items"][0].get("data").is_none(),
        "metadata only: {raw_list}"
    );

    let (reader, writer) = reflector::store();
    // `Api<PartialObjectMeta<K>>` makes kube-rs send metadata-only requests.
    let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(server.client().await, "default");
    let events = watcher(meta_api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(events.for_each(|_| async {}));
    api.create(&PostParams::default(), &config_map("m2", &[], &[]))
        .await
        .expect("create");
    eventually("metadata watcher sees both", || reader.state().len() == 2).await;
    task.abort();
}

async fn raw_with_accept(server: &FakeApiServer, path: &str, accept: &str) -> (u16, Value) {
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept: {accept}\r\n\r\n");
    send(server, &request).await
}

// --- Field ownership, status subresource, generation and defaults, as Kubernetes does them ---

/// One raw HTTP/1.1 request with extra headers (e.g. `User-Agent`); status code and JSON body.
async fn raw_with_headers(
    server: &FakeApiServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Value) {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let content_type = match method {
        "PATCH" => "application/merge-patch+json",
        _ => "application/json",
    };
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(h, _)| h.eq_ignore_ascii_case("content-type"))
    {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    send(server, &format!("{head}\r\n{body}")).await
}

/// `(manager, operation, subresource)` of every managedFields entry, in the stored order.
fn entries(object: &Value) -> Vec<(String, String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let text = |f: &str| e[f].as_str().unwrap_or_default().to_string();
            (text("manager"), text("operation"), text("subresource"))
        })
        .collect()
}

/// The FieldsV1 of the entry of `manager`/`operation`/`subresource` ("" for none).
fn fields_of(object: &Value, manager: &str, operation: &str, subresource: &str) -> Value {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| {
            e["manager"] == manager
                && e["operation"] == operation
                && e["subresource"].as_str().unwrap_or_default() == subresource
        })
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

const CM_PATH: &str = "/api/v1/namespaces/default/configmaps";
const MCN_PATH: &str = "/apis/machineconfiguration.openshift.io/v1/machineconfignodes";

fn cm_json(name: &str, labels: Value, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "labels": labels },
        "data": data,
    })
}

#[tokio::test]
async fn managed_fields_record_manager_operation_and_subresource_of_every_write() {
    let server = FakeApiServer::start(Options::default());
    // Create (POST, operation Update): the creator owns every field it added, map nodes
    // included (`.`), with apiVersion, time and fieldsType as Kubernetes writes them.
    let (code, created) = raw_with_headers(
        &server,
        "POST",
        &format!("{MCN_PATH}?fieldManager=creator"),
        &[],
        &mcn("n1"),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(entry["manager"], "creator");
    assert_eq!(entry["operation"], "Update");
    assert_eq!(entry["apiVersion"], "machineconfiguration.openshift.io/v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(
        entry["time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{entry}"
    );
    assert!(entry.get("subresource").is_none(), "{entry}");
    assert_eq!(
        entry["fieldsV1"]["f:spec"],
        json!({
            ".": {},
            "f:configVersion": { ".": {}, "f:desired": {} },
            "f:node": { ".": {}, "f:name": {} },
            "f:pool": { ".": {}, "f:name": {} },
        })
    );

    // A patch by the same manager merges into its one Update entry.
    let (code, patched) = raw_with_headers(
        &server,
        "PATCH",
        &format!("{MCN_PATH}/n1?fieldManager=creator"),
        &[],
        &json!({ "metadata": { "labels": { "a": "1" } } }),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        entries(&patched),
        [("creator".into(), "Update".into(), "".into())]
    );
    assert_eq!(
        fields_of(&patched, "creator", "Update", "")["f:metadata"],
        json!({ "f:labels": { ".": {}, "f:a": {} } })
    );

    // A /status write is its own entry (subresource: status), even for the same manager.
    let mut with_status = patched.clone();
    with_status["status"] = json!({ "observedGeneration": 1 });
    let (code, status_written) = raw_with_headers(
        &server,
        "PUT",
        &format!("{MCN_PATH}/n1/status?fieldManager=creator"),
        &[],
        &with_status,
    )
    .await;
    assert_eq!(code, 200, "{status_written}");
    assert_eq!(
        fields_of(&status_written, "creator", "Update", "status"),
        json!({ "f:status": { ".": {}, "f:observedGeneration": {} } })
    );

    // Apply on the main resource and on /status: two Apply entries, listed before the Update
    // ones (sortEncodedManagedFields: operation first).
    let api: Api<DynamicObject> = Api::all_with(server.client().await, &mcn_resource());
    let mut config = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "metadata": { "name": "n1", "labels": { "b": "2" } },
    });
    api.patch("n1", &PatchParams::apply("applier"), &Patch::Apply(&config))
        .await
        .expect("apply main");
    config["metadata"] = json!({ "name": "n1" });
    config["status"] = json!({ "conditions": [condition("Updated", "True")] });
    let applied = api
        .patch_status("n1", &PatchParams::apply("applier"), &Patch::Apply(&config))
        .await
        .expect("apply status");
    let stored = server.get("MachineConfigNode", None, "n1").expect("stored");
    assert_eq!(
        entries(&stored),
        [
            ("applier".into(), "Apply".into(), "".into()),
            ("applier".into(), "Apply".into(), "status".into()),
            ("creator".into(), "Update".into(), "".into()),
            ("creator".into(), "Update".into(), "status".into()),
        ]
    );
    // Apply owns list items (with `.`) and leaves, never the nodes of declared structs.
    assert_eq!(
        fields_of(&stored, "applier", "Apply", "status"),
        json!({ "f:status": { "f:conditions": { "k:{\"type\":\"Updated\"}": {
            ".": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {},
            "f:status": {}, "f:type": {}
        } } } })
    );
    // The same apply again changes nothing: same resourceVersion, same times.
    let again = api
        .patch_status("n1", &PatchParams::apply("applier"), &Patch::Apply(&config))
        .await
        .expect("apply again");
    assert_eq!(
        again.metadata.resource_version,
        applied.metadata.resource_version
    );
    assert_eq!(
        server.get("MachineConfigNode", None, "n1").expect("stored"),
        stored
    );
}

#[tokio::test]
async fn managed_fields_follow_takeovers_and_removals_and_drop_empty_entries() {
    let server = FakeApiServer::start(Options::default());
    let write = |method: &'static str, path: String, body: Value| {
        let server = &server;
        async move { raw_with_headers(server, method, &path, &[], &body).await }
    };
    let (code, _) = write(
        "POST",
        format!("{CM_PATH}?fieldManager=creator"),
        cm_json("c", json!({ "a": "1" }), json!({ "k": "1" })),
    )
    .await;
    assert_eq!(code, 201);
    // A labeler adds one label, another manager changes it: the labeler's entry owns nothing
    // any more and goes.
    write(
        "PATCH",
        format!("{CM_PATH}/c?fieldManager=labeler"),
        json!({ "metadata": { "labels": { "x": "1" } } }),
    )
    .await;
    let (_, taken) = write(
        "PATCH",
        format!("{CM_PATH}/c?fieldManager=other"),
        json!({ "metadata": { "labels": { "x": "2" } } }),
    )
    .await;
    assert_eq!(
        entries(&taken),
        [
            ("creator".into(), "Update".into(), "".into()),
            ("other".into(), "Update".into(), "".into()),
        ],
        "{taken}"
    );
    // A removal takes the field from its owner and gives the remover nothing.
    let (_, removed) = write(
        "PATCH",
        format!("{CM_PATH}/c?fieldManager=remover"),
        json!({ "metadata": { "labels": { "a": null } } }),
    )
    .await;
    assert!(entries(&removed).iter().all(|(m, _, _)| m != "remover"));
    assert_eq!(
        fields_of(&removed, "creator", "Update", "")["f:metadata"]["f:labels"],
        json!({}),
        "the creator keeps the labels map it added, not the removed label"
    );

    // An applier that applies an empty set loses its entry, and its fields go with it, even
    // one it shares with an Update manager (only other appliers keep a dropped field).
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let mut config = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "c", "labels": { "y": "1" } },
        "data": { "k": "1" },
    });
    api.patch("c", &PatchParams::apply("applier"), &Patch::Apply(&config))
        .await
        .expect("apply");
    let shared = server
        .get("ConfigMap", Some("default"), "c")
        .expect("stored");
    assert_eq!(
        fields_of(&shared, "creator", "Update", "")["f:data"]["f:k"],
        json!({})
    );
    assert_eq!(
        fields_of(&shared, "applier", "Apply", "")["f:data"]["f:k"],
        json!({})
    );
    config["metadata"] = json!({ "name": "c" });
    config.as_object_mut().expect("config").remove("data");
    let emptied = api
        .patch("c", &PatchParams::apply("applier"), &Patch::Apply(&config))
        .await
        .expect("apply empty");
    assert!(!emptied
        .metadata
        .labels
        .unwrap_or_default()
        .contains_key("y"));
    assert!(!emptied.data.unwrap_or_default().contains_key("k"));
    let stored = server
        .get("ConfigMap", Some("default"), "c")
        .expect("stored");
    assert!(
        entries(&stored).iter().all(|(m, _, _)| m != "applier"),
        "{stored}"
    );
}

#[tokio::test]
async fn the_field_manager_defaults_to_the_user_agent_product() {
    let server = FakeApiServer::start(Options::default());
    let (code, created) = raw_with_headers(
        &server,
        "POST",
        CM_PATH,
        &[(
            "User-Agent",
            "kubectl/v1.31.0 (linux/amd64) kubernetes/abcdef",
        )],
        &cm_json("ua", json!({}), json!({ "k": "1" })),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(entries(&created)[0].0, "kubectl");
    let (_, anonymous) = raw_with_headers(
        &server,
        "POST",
        CM_PATH,
        &[],
        &cm_json("no-ua", json!({}), json!({ "k": "1" })),
    )
    .await;
    assert_eq!(entries(&anonymous)[0].0, "unknown");
    // Server-side apply has no default: fieldManager is required.
    let (code, status) = raw_with_headers(
        &server,
        "PATCH",
        &format!("{CM_PATH}/ua"),
        &[("Content-Type", "application/apply-patch+yaml")],
        &cm_json("ua", json!({}), json!({ "k": "2" })),
    )
    .await;
    assert_eq!(code, 422, "{status}");
}

#[tokio::test]
async fn managed_fields_sent_in_a_request_rewrite_reset_or_are_refused() {
    let server = FakeApiServer::start(Options::default());
    let (_, created) = raw_with_headers(
        &server,
        "POST",
        &format!("{CM_PATH}?fieldManager=creator"),
        &[],
        &cm_json("m", json!({}), json!({ "k": "1" })),
    )
    .await;
    // A PUT may rewrite ownership (decodeLiveOrNew takes valid managedFields from the request).
    let mut claimed = created.clone();
    claimed["metadata"]["managedFields"] = json!([{
        "manager": "claimer", "operation": "Update", "apiVersion": "v1",
        "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": { "f:data": { "f:k": {} } }
    }]);
    let (code, rewritten) = raw_with_headers(
        &server,
        "PUT",
        &format!("{CM_PATH}/m?fieldManager=putter"),
        &[],
        &claimed,
    )
    .await;
    assert_eq!(code, 200, "{rewritten}");
    assert_eq!(
        entries(&rewritten),
        [("claimer".into(), "Update".into(), "".into())]
    );
    // `[{}]` resets them: a write that changes nothing leaves none at all.
    let mut reset = rewritten.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    let (_, cleared) = raw_with_headers(
        &server,
        "PUT",
        &format!("{CM_PATH}/m?fieldManager=putter"),
        &[],
        &reset,
    )
    .await;
    assert!(
        cleared["metadata"].get("managedFields").is_none(),
        "{cleared}"
    );
    // `[]` resets too; the writer then owns only what this write changed.
    let mut reset = cleared.clone();
    reset["metadata"]["managedFields"] = json!([]);
    reset["data"]["k"] = json!("2");
    let (_, owned) = raw_with_headers(
        &server,
        "PUT",
        &format!("{CM_PATH}/m?fieldManager=resetter"),
        &[],
        &reset,
    )
    .await;
    assert_eq!(
        fields_of(&owned, "resetter", "Update", ""),
        json!({ "f:data": { "f:k": {} } })
    );
    // On a subresource the request's managedFields are ignored.
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": "n" },
        "status": { "phase": "Running" },
    });
    let (_, node) = raw_with_headers(
        &server,
        "POST",
        "/api/v1/nodes?fieldManager=kubelet",
        &[],
        &node,
    )
    .await;
    let mut claim = node.clone();
    claim["metadata"]["managedFields"] = json!([{
        "manager": "claimer", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": { "f:status": { "f:phase": {} } }
    }]);
    let (_, after) = raw_with_headers(
        &server,
        "PUT",
        "/api/v1/nodes/n/status?fieldManager=kubelet",
        &[],
        &claim,
    )
    .await;
    assert!(
        entries(&after).iter().all(|(m, _, _)| m != "claimer"),
        "{after}"
    );
    // Server-side apply refuses them.
    let mut config = cm_json("m", json!({}), json!({ "k": "3" }));
    config["metadata"]["managedFields"] = json!([]);
    let (code, status) = raw_with_headers(
        &server,
        "PATCH",
        &format!("{CM_PATH}/m?fieldManager=applier"),
        &[("Content-Type", "application/apply-patch+yaml")],
        &config,
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["message"], "metadata.managedFields must be nil");
}

#[tokio::test]
async fn apply_conflicts_are_worded_and_resolved_as_kubernetes_does() {
    let server = FakeApiServer::start(Options::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().await, "default");
    let creator = PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    api.create(&creator, &config_map("c", &[], &[("k1", "1"), ("k2", "2")]))
        .await
        .expect("create");
    api.patch(
        "c",
        &PatchParams {
            field_manager: Some("second".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({ "data": { "k3": "3" } })),
    )
    .await
    .expect("patch");
    let apply = |manager: &str, data: &[(&str, &str)], force: bool| {
        let params = if force {
            PatchParams::apply(manager).force()
        } else {
            PatchParams::apply(manager)
        };
        let config = config_map("c", &[], data);
        let api = api.clone();
        async move { api.patch("c", &params, &Patch::Apply(&config)).await }
    };

    let one = status_of(apply("applier", &[("k1", "x")], false).await);
    assert_eq!(one.code, 409);
    assert_eq!(one.reason, "Conflict");
    assert_eq!(
        one.message,
        "Apply failed with 1 conflict: conflict with \"creator\" using v1: .data.k1"
    );
    let causes = one
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".data.k1");
    assert_eq!(causes[0].message, "conflict with \"creator\" using v1");

    let two = status_of(apply("applier", &[("k1", "x"), ("k3", "y")], false).await);
    assert_eq!(
        two.message,
        "Apply failed with 2 conflicts: conflicts with \"creator\" using v1:\n- .data.k1\nconflicts with \"second\" using v1:\n- .data.k3"
    );
    // The creator's own Update entry is another manager than its Apply: it conflicts too.
    let own = status_of(apply("creator", &[("k1", "z")], false).await);
    assert!(
        own.message.contains("conflict with \"creator\" using v1"),
        "{}",
        own.message
    );

    // The same value is no conflict: both own the field.
    let shared = apply("applier", &[("k2", "2")], false)
        .await
        .expect("same value");
    let shared = serde_json::to_value(&shared).expect("json");
    assert_eq!(
        fields_of(&shared, "applier", "Apply", "")["f:data"]["f:k2"],
        json!({})
    );
    assert_eq!(
        fields_of(&shared, "creator", "Update", "")["f:data"]["f:k2"],
        json!({})
    );

    // force takes the fields over.
    let forced = apply("applier", &[("k1", "x"), ("k2", "2"), ("k3", "y")], true)
        .await
        .expect("forced");
    let forced = serde_json::to_value(&forced).expect("json");
    assert!(fields_of(&forced, "creator", "Update", "")["f:data"]
        .get("f:k1")
        .is_none());
    assert!(
        entries(&forced).iter().all(|(m, _, _)| m != "second"),
        "{forced}"
    );

    // A status subresource manager is named with its subresource.
    let mcns: Api<DynamicObject> = Api::all_with(server.client().await, &mcn_resource());
    let (_, created) = raw_with_headers(
        &server,
        "POST",
        &format!("{MCN_PATH}?fieldManager=op"),
        &[],
        &mcn("s"),
    )
    .await;
    let mut with_status = created.clone();
    with_status["status"] = json!({ "observedGeneration": 1 });
    raw_with_headers(
        &server,
        "PUT",
        &format!("{MCN_PATH}/s/status?fieldManager=daemon"),
        &[],
        &with_status,
    )
    .await;
    let config = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "metadata": { "name": "s" }, "status": { "observedGeneration": 2 },
    });
    let status = status_of(
        mcns.patch_status("s", &PatchParams::apply("applier"), &Patch::Apply(&config))
            .await,
    );
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"daemon\" with subresource \"status\" using machineconfiguration.openshift.io/v1: .status.observedGeneration"
    );
}

/// A custom resource for merge-strategy and defaulting tests: a list-map, a set, an atomic
/// list, an atomic map, a granular map, and `default:` values at several depths.
fn widget_resource() -> support::fake_apiserver::ResourceDef {
    let schema = json!({
        "type": "object",
        "properties": {
            "apiVersion": { "type": "string" },
            "kind": { "type": "string" },
            "metadata": { "type": "object" },
            "spec": {
                "type": "object",
                "properties": {
                    "mode": { "type": "string", "default": "Auto" },
                    "limits": {
                        "type": "object",
                        "default": {},
                        "properties": { "cpu": { "type": "integer", "default": 2 } }
                    },
                    "items": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": { "type": "string" },
                                "value": { "type": "string" },
                                "weight": { "type": "integer", "default": 1 }
                            }
                        }
                    },
                    "tags": {
                        "type": "array", "x-kubernetes-list-type": "set",
                        "items": { "type": "string" }
                    },
                    "order": { "type": "array", "items": { "type": "string" } },
                    "selector": {
                        "type": "object", "x-kubernetes-map-type": "atomic",
                        "additionalProperties": { "type": "string" }
                    },
                    "settings": {
                        "type": "object",
                        "additionalProperties": { "type": "string" }
                    }
                }
            },
            "status": {
                "type": "object",
                "properties": { "phase": { "type": "string", "default": "Pending" }, "count": { "type": "integer" } }
            }
        }
    });
    support::fake_apiserver::ResourceDef {
        group: "example.com".into(),
        version: "v1".into(),
        plural: "widgets".into(),
        singular: "widget".into(),
        kind: "Widget".into(),
        namespaced: false,
        status_subresource: true,
        schema: Some(std::sync::Arc::new(schema)),
        builtin: None,
    }
}

fn widget_api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

fn widget(name: &str, spec: Value) -> Value {
    json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": name }, "spec": spec })
}

#[tokio::test]
async fn apply_merges_list_maps_sets_and_granular_maps_and_replaces_atomic_values() {
    let server = FakeApiServer::start(Options {
        extra_resources: vec![widget_resource()],
        ..Options::default()
    });
    let api: Api<DynamicObject> = Api::all_with(server.client().await, &widget_api_resource());
    let apply = |manager: &'static str, spec: Value, force: bool| {
        let api = api.clone();
        async move {
            let params = if force {
                PatchParams::apply(manager).force()
            } else {
                PatchParams::apply(manager)
            };
            api.patch("w", &params, &Patch::Apply(&widget("w", spec)))
                .await
        }
    };
    apply(
        "alice",
        json!({
            "items": [{ "name": "a", "value": "1" }],
            "tags": ["t1"], "order": ["x", "y"],
            "selector": { "app": "a" }, "settings": { "s1": "1" },
        }),
        false,
    )
    .await
    .expect("alice");
    apply(
        "bob",
        json!({ "items": [{ "name": "b", "value": "2" }], "tags": ["t2"], "settings": { "s2": "2" } }),
        false,
    )
    .await
    .expect("bob");
    let stored = server.get("Widget", None, "w").expect("stored");
    assert_eq!(
        stored["spec"]["items"],
        json!([{ "name": "a", "value": "1", "weight": 1 }, { "name": "b", "value": "2", "weight": 1 }])
    );
    assert_eq!(stored["spec"]["tags"], json!(["t1", "t2"]));
    assert_eq!(stored["spec"]["settings"], json!({ "s1": "1", "s2": "2" }));
    let alice = fields_of(&stored, "alice", "Apply", "");
    assert_eq!(
        alice["f:spec"]["f:items"],
        json!({ "k:{\"name\":\"a\"}": { ".": {}, "f:name": {}, "f:value": {} } })
    );
    assert_eq!(alice["f:spec"]["f:tags"], json!({ "v:\"t1\"": {} }));
    assert_eq!(alice["f:spec"]["f:order"], json!({}));
    assert_eq!(alice["f:spec"]["f:selector"], json!({}));
    // Atomic values are owned whole: another key in an atomic map is a conflict at the map.
    let status = status_of(apply("bob", json!({ "selector": { "tier": "b" } }), false).await);
    assert!(
        status
            .message
            .ends_with("conflict with \"alice\": .spec.selector"),
        "{}",
        status.message
    );
    let status = status_of(apply("bob", json!({ "order": ["z"] }), false).await);
    assert!(
        status.message.ends_with(".spec.order"),
        "{}",
        status.message
    );
    let bob_config = json!({
        "items": [{ "name": "b", "value": "2" }], "tags": ["t2"], "settings": { "s2": "2" },
        "selector": { "tier": "b" },
    });
    apply("bob", bob_config, true).await.expect("forced");
    let stored = server.get("Widget", None, "w").expect("stored");
    assert_eq!(
        stored["spec"]["selector"],
        json!({ "tier": "b" }),
        "replaced, not merged"
    );
    assert!(fields_of(&stored, "alice", "Apply", "")["f:spec"]
        .get("f:selector")
        .is_none());
    // Items alice stops applying go; bob's stay.
    apply("alice", json!({ "tags": ["t1"] }), false)
        .await
        .expect("alice again");
    let stored = server.get("Widget", None, "w").expect("stored");
    assert_eq!(
        stored["spec"]["items"],
        json!([{ "name": "b", "value": "2", "weight": 1 }])
    );
    assert_eq!(stored["spec"]["settings"], json!({ "s2": "2" }));
}

#[tokio::test]
async fn schema_defaults_fill_absent_fields_on_every_write() {
    let server = FakeApiServer::start(Options {
        extra_resources: vec![widget_resource()],
        ..Options::default()
    });
    let path = "/apis/example.com/v1/widgets";
    // Create: top-level, nested (inside a defaulted object) and list-item defaults.
    let (code, created) = raw_with_headers(
        &server,
        "POST",
        &format!("{path}?fieldManager=creator"),
        &[],
        &widget("d", json!({ "items": [{ "name": "a" }], "mode": null })),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["spec"]["mode"], "Auto",
        "a null non-nullable field is defaulted"
    );
    assert_eq!(created["spec"]["limits"], json!({ "cpu": 2 }));
    assert_eq!(created["spec"]["items"][0]["weight"], 1);
    // The creator (an Update) owns what defaulting filled in, as the request decoded with it.
    assert_eq!(
        fields_of(&created, "creator", "Update", "")["f:spec"]["f:mode"],
        json!({})
    );
    // Update: a removed field comes back as its default.
    let mut replaced = created.clone();
    replaced["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("mode");
    replaced["spec"]["limits"] = json!({});
    let (_, updated) = raw_with_headers(&server, "PUT", &format!("{path}/d"), &[], &replaced).await;
    assert_eq!(updated["spec"]["mode"], "Auto");
    assert_eq!(updated["spec"]["limits"], json!({ "cpu": 2 }));
    // Status writes are defaulted too.
    let mut status = updated.clone();
    status["status"] = json!({ "count": 1 });
    let (_, with_status) =
        raw_with_headers(&server, "PUT", &format!("{path}/d/status"), &[], &status).await;
    assert_eq!(
        with_status["status"],
        json!({ "count": 1, "phase": "Pending" })
    );
    // Apply: defaults fill the merged object; the applier does not own them.
    let api: Api<DynamicObject> = Api::all_with(server.client().await, &widget_api_resource());
    let applied = api
        .patch(
            "e",
            &PatchParams::apply("applier"),
            &Patch::Apply(&widget("e", json!({ "tags": ["t"] }))),
        )
        .await
        .expect("apply");
    let applied = serde_json::to_value(&applied).expect("json");
    assert_eq!(applied["spec"]["mode"], "Auto");
    assert_eq!(
        fields_of(&applied, "applier", "Apply", ""),
        json!({ "f:spec": { "f:tags": { "v:\"t\"": {} } } })
    );
}

#[tier(upstream)]
#[tokio::test]
async fn real_controller_config_gets_its_schema_defaults() {
    // The real CRD's defaults (upstream tier): what our code reads from a ControllerConfig the
    // API server stores.
    let server = FakeApiServer::start(real_crd_options());
    let stored = server
        .load_yaml_str(support::CONTROLLER_CONFIG)
        .expect("load")
        .remove(0);
    let infra_status = &stored["spec"]["infra"]["status"];
    if infra_status.is_object() {
        assert_eq!(
            infra_status["controlPlaneTopology"], "HighlyAvailable",
            "{infra_status}"
        );
        assert_eq!(infra_status["infrastructureTopology"], "HighlyAvailable");
        assert_eq!(infra_status["cpuPartitioning"], "None");
    } else {
        // Our fixture has no infra.status: defaults apply only where the parent exists.
        assert!(stored["spec"]["infra"].get("status").is_none());
        let mut with_status: Value =
            serde_yaml::from_str(support::CONTROLLER_CONFIG).expect("yaml");
        with_status["spec"]["infra"]["status"] = json!({ "platform": "None" });
        let stored = server.apply_object(&with_status).expect("apply");
        let infra_status = &stored["spec"]["infra"]["status"];
        assert_eq!(
            infra_status["controlPlaneTopology"], "HighlyAvailable",
            "{infra_status}"
        );
        assert_eq!(infra_status["infrastructureTopology"], "HighlyAvailable");
        assert_eq!(infra_status["cpuPartitioning"], "None");
    }
}

#[tokio::test]
async fn status_subresource_rules_differ_for_custom_resources_and_nodes() {
    let server = FakeApiServer::start(Options::default());
    // Nodes keep the status a create sends (nodeStrategy); custom resources drop it.
    let (_, node) = raw_with_headers(
        &server,
        "POST",
        "/api/v1/nodes",
        &[],
        &json!({
            "apiVersion": "v1", "kind": "Node", "metadata": { "name": "n" },
            "spec": { "unschedulable": false }, "status": { "phase": "Running" },
        }),
    )
    .await;
    assert_eq!(node["status"]["phase"], "Running");
    // The typed Node as encoding/json prints it: zero values of fields without omitempty.
    assert_eq!(
        node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        0
    );
    assert_eq!(node["status"]["nodeInfo"]["machineID"], "");
    // TaintNodesByCondition (admission): a new Node is not ready.
    assert_eq!(
        node["spec"]["taints"],
        json!([{ "key": "node.kubernetes.io/not-ready", "effect": "NoSchedule" }])
    );
    // Node /status: spec changes ignored, metadata changes kept (only spec is reset).
    let mut status_write = node.clone();
    status_write["spec"]["unschedulable"] = json!(true);
    status_write["metadata"]["labels"] = json!({ "from-status": "yes" });
    status_write["status"]["phase"] = json!("Terminated");
    let (_, after) =
        raw_with_headers(&server, "PUT", "/api/v1/nodes/n/status", &[], &status_write).await;
    // (`unschedulable: false` is omitempty: the stored spec prints without it.)
    assert_eq!(after["spec"], node["spec"]);
    assert_eq!(after["metadata"]["labels"]["from-status"], "yes");
    assert_eq!(after["status"]["phase"], "Terminated");
    // Node main resource: status changes ignored.
    let mut main_write = after.clone();
    main_write["status"]["phase"] = json!("Pending");
    let (_, after_main) =
        raw_with_headers(&server, "PUT", "/api/v1/nodes/n", &[], &main_write).await;
    assert_eq!(after_main["status"]["phase"], "Terminated");

    // Custom resource /status: everything but status comes from the stored object, labels too;
    // resourceVersion moves, generation does not.
    let (_, created) = raw_with_headers(&server, "POST", MCN_PATH, &[], &mcn("c")).await;
    let mut status_write = created.clone();
    status_write["metadata"]["labels"] = json!({ "from-status": "yes" });
    status_write["spec"]["pool"]["name"] = json!("master");
    status_write["status"] = json!({ "observedGeneration": 1 });
    let (_, after) = raw_with_headers(
        &server,
        "PUT",
        &format!("{MCN_PATH}/c/status"),
        &[],
        &status_write,
    )
    .await;
    assert!(after["metadata"].get("labels").is_none(), "{after}");
    assert_eq!(after["spec"]["pool"]["name"], "worker");
    assert_eq!(after["status"]["observedGeneration"], 1);
    assert_eq!(after["metadata"]["generation"], 1);
    assert_ne!(
        after["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );

    // Generation: not on metadata-only applies, yes on spec changes, and when deletion starts.
    let api: Api<DynamicObject> = Api::all_with(server.client().await, &mcn_resource());
    let mut config = mcn("c");
    config["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let held = api
        .patch("c", &PatchParams::apply("holder"), &Patch::Apply(&config))
        .await
        .expect("apply finalizer");
    assert_eq!(held.metadata.generation, Some(1));
    config["spec"]["pool"]["name"] = json!("master");
    let moved = api
        .patch(
            "c",
            &PatchParams::apply("holder").force(),
            &Patch::Apply(&config),
        )
        .await
        .expect("apply spec");
    assert_eq!(moved.metadata.generation, Some(2));
    api.delete("c", &DeleteParams::default())
        .await
        .expect("delete");
    let deleting = server
        .get("MachineConfigNode", None, "c")
        .expect("held by its finalizer");
    assert!(deleting["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(deleting["metadata"]["generation"], 3);
}

// --- Kubernetes' own rules, beyond what the recorded corpus (tests/apiserver_corpus.rs) asks ---

#[test]
fn timestamps_parse_and_print_as_metav1_time_and_micro_time() {
    use support::fake_apiserver::gotime::{normalize, parse, Layout};
    assert_eq!(
        parse("yesterday", Layout::Rfc3339Micro).unwrap_err(),
        r#"parsing time "yesterday" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "yesterday" as "2006""#
    );
    // A MicroTime has exactly six fraction digits.
    assert_eq!(
        parse("2026-11-25T03:00:00Z", Layout::Rfc3339Micro).unwrap_err(),
        r#"parsing time "2026-11-25T03:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000""#
    );
    assert_eq!(
        parse("2026-11-25T03:00:00.123456789Z", Layout::Rfc3339Micro).unwrap_err(),
        r#"parsing time "2026-11-25T03:00:00.123456789Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "789Z" as "Z07:00""#
    );
    assert_eq!(
        parse("2026-13-25T03:00:00Z", Layout::Rfc3339).unwrap_err(),
        r#"parsing time "2026-13-25T03:00:00Z": month out of range"#
    );
    assert_eq!(
        parse("2026-02-30T03:00:00Z", Layout::Rfc3339).unwrap_err(),
        r#"parsing time "2026-02-30T03:00:00Z": day out of range"#
    );
    assert_eq!(
        parse("2026-11-25T03:00:00Zjunk", Layout::Rfc3339).unwrap_err(),
        r#"parsing time "2026-11-25T03:00:00Zjunk": extra text: "junk""#
    );
    // A Time is stored in UTC to the second, a MicroTime to the microsecond.
    assert_eq!(
        normalize("2026-11-25T04:00:00.5+01:00", Layout::Rfc3339).unwrap(),
        "2026-11-25T03:00:00Z"
    );
    assert_eq!(
        normalize("2026-11-25T03:00:00.123456-00:30", Layout::Rfc3339Micro).unwrap(),
        "2026-11-25T03:30:00.123456Z"
    );
}

#[test]
fn object_meta_rules_are_apimachinerys() {
    use support::fake_apiserver::meta::{validate_create, validate_update, NameRule};
    let fields = |errors: Vec<support::fake_apiserver::FieldError>| -> Vec<(String, String)> {
        errors.iter().map(|e| (e.field.clone(), e.body())).collect()
    };
    // generateName is checked as a prefix (a trailing '-' is fine), the name in full.
    let errors = validate_create(
        &json!({"generateName": "Bad-", "name": "Bad-x7k2m"}),
        false,
        NameRule::DnsSubdomain,
    );
    assert_eq!(
        errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
        ["metadata.generateName", "metadata.name"]
    );
    assert!(validate_create(
        &json!({"generateName": "ok-"}),
        false,
        NameRule::DnsSubdomain
    )
    .iter()
    .all(|e| e.field == "metadata.name"));
    // Annotations: keys are qualified names in any case; keys and values at most 256 KiB.
    let big = "x".repeat(256 * 1024);
    assert_eq!(
        fields(validate_create(
            &json!({"name": "a", "annotations": {"Example.com/Key": "v", "k": big}}),
            false,
            NameRule::DnsSubdomain
        )),
        [(
            "metadata.annotations".to_string(),
            "Too long: may not be more than 262144 bytes".to_string()
        )]
    );
    // Owner references: a version, kind, name and uid; no Event owners; one controller.
    let owners = json!({"name": "a", "ownerReferences": [
        {"apiVersion": "", "kind": "K", "name": "n", "uid": "u", "controller": true},
        {"apiVersion": "v1", "kind": "Event", "name": "m", "uid": "u2", "controller": true}
    ]});
    let errors = fields(validate_create(&owners, false, NameRule::DnsSubdomain));
    assert_eq!(errors[0].0, "metadata.ownerReferences.apiVersion");
    assert_eq!(
        errors[0].1,
        r#"Invalid value: "": version must not be empty"#
    );
    assert!(errors[1]
        .1
        .ends_with("/v1, Kind=Event is disallowed from being an owner"));
    assert!(errors[2].1.ends_with(
        r#"Only one reference can have Controller set to true. Found "true" in references for K/n and Event/m"#
    ));
    // Finalizers: qualified names, and not both orphan and foregroundDeletion.
    let errors = fields(validate_create(
        &json!({"name": "a", "finalizers": ["orphan", "foregroundDeletion", "a/b/c"]}),
        false,
        NameRule::DnsSubdomain,
    ));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[1]
        .1
        .ends_with("finalizer orphan and foregroundDeletion cannot be both set"));
    // A namespaced kind needs a namespace; a cluster-scoped one may not have one.
    assert_eq!(
        fields(validate_create(
            &json!({"name": "a"}),
            true,
            NameRule::DnsSubdomain
        )),
        [(
            "metadata.namespace".to_string(),
            "Required value".to_string()
        )]
    );
    // Updates: identity fields are immutable, finalizers cannot be added while deleting.
    let old = json!({"name": "a", "uid": "u1", "resourceVersion": "5",
                     "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["x/y"]});
    let new = json!({"name": "a", "uid": "u2", "resourceVersion": "5",
                     "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["x/y", "x/z"]});
    assert_eq!(
        fields(validate_update(&new, &old)),
        [
            (
                "metadata.finalizers".to_string(),
                r#"Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"x/z"}"#.to_string()
            ),
            (
                "metadata.uid".to_string(),
                r#"Invalid value: "u2": field is immutable"#.to_string()
            ),
        ]
    );
}

/// One raw request to the in-test server with a bearer token (or none); status, Warning headers
/// and body.
async fn raw_as(
    server: &FakeApiServer,
    token: Option<&str>,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Vec<String>, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(server.address())
        .await
        .expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let warnings = head
        .lines()
        .filter_map(|l| {
            l.strip_prefix("warning: ")
                .or_else(|| l.strip_prefix("Warning: "))
        })
        .map(str::to_string)
        .collect();
    (
        code,
        warnings,
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn built_in_kinds_decode_and_print_as_their_go_types() {
    let server = FakeApiServer::start(Options::default());
    let admin = server.admin_token();
    let post = |path: &'static str, body: Value| {
        let admin = admin.clone();
        let server = &server;
        async move {
            raw_as(
                server,
                Some(&admin),
                "POST",
                path,
                "application/json",
                &body,
            )
            .await
        }
    };
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    // A type mismatch is Go's json error in a 400.
    let (code, _, status) = post(
        leases,
        json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": "15"}}),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        r#"Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal string into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32"#
    );
    // An int32 out of range too.
    let (code, _, _) = post(
        leases,
        json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 3_000_000_000u64}}),
    )
    .await;
    assert_eq!(code, 400);
    // []byte fields are base64.
    let (code, _, status) = post(
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "s"}, "data": {"k": "not base64!"}}),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert!(status["message"]
        .as_str()
        .unwrap()
        .ends_with("illegal base64 data at input byte 3"));
    // Unknown fields of a built-in kind are warned about, and dropped.
    let (code, warnings, config_map) = post(
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "c"}, "data": {}, "extra": 1}),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(warnings, [r#"299 - "unknown field \"extra\"""#]);
    // Empty omitempty maps are not printed.
    assert!(config_map.get("data").is_none(), "{config_map}");
    assert!(config_map.get("extra").is_none());
    // A built-in kind's list prints its items without apiVersion and kind.
    let (_, _, list) = raw_as(
        &server,
        Some(&admin),
        "GET",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &Value::Null,
    )
    .await;
    assert_eq!(list["kind"], "ConfigMapList");
    assert!(list["metadata"].get("continue").is_none(), "{list}");
    assert_eq!(list["items"][0]["metadata"]["name"], "c");
    assert!(list["items"][0].get("kind").is_none(), "{list}");
    // Timestamps without omitempty print as null; a Time field is stored to the second.
    let (code, _, node) = post(
        "/api/v1/nodes",
        json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready",
               "status": "True", "lastHeartbeatTime": "2026-11-25T03:00:00.75Z"}]}}),
    )
    .await;
    assert_eq!(code, 201, "{node}");
    let condition = &node["status"]["conditions"][0];
    assert_eq!(condition["lastHeartbeatTime"], "2026-11-25T03:00:00Z");
    assert!(condition["lastTransitionTime"].is_null());
    assert!(condition.get("lastTransitionTime").is_some());
    // Field selectors: the kind's own labels, with the value of an unset field.
    let (code, _, nodes) = raw_as(
        &server,
        Some(&admin),
        "GET",
        "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse",
        "application/json",
        &Value::Null,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(1));
    let (code, _, status) = raw_as(
        &server,
        Some(&admin),
        "GET",
        "/api/v1/nodes?fieldSelector=metadata.namespace%3Dx",
        "application/json",
        &Value::Null,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        "field label not supported: metadata.namespace"
    );
}

#[tokio::test]
async fn namespaces_must_exist_and_a_terminating_one_takes_no_new_objects() {
    let server = FakeApiServer::start(Options::default());
    let admin = server.admin_token();
    let config_map = json!({"metadata": {"name": "c"}});
    let (code, _, status) = raw_as(
        &server,
        Some(&admin),
        "POST",
        "/api/v1/namespaces/missing/configmaps",
        "application/json",
        &config_map,
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(status["message"], r#"namespaces "missing" not found"#);
    create_namespaces(&server, &["going"]);
    let created = server.get("Namespace", None, "going").unwrap();
    assert_eq!(
        created["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "going"
    );
    assert_eq!(created["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(created["status"]["phase"], "Active");
    // Without a namespace controller a deleted namespace stays Terminating.
    let deleted = server.delete("Namespace", None, "going").unwrap();
    assert_eq!(deleted["status"]["phase"], "Terminating");
    let (code, _, status) = raw_as(
        &server,
        Some(&admin),
        "POST",
        "/api/v1/namespaces/going/configmaps",
        "application/json",
        &config_map,
    )
    .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        r#"configmaps "c" is forbidden: unable to create new content in namespace going because it is being terminated"#
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "NamespaceTerminating"
    );
    let err = server.delete("Namespace", None, "default").unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            403,
            r#"namespaces "default" is forbidden: this namespace may not be deleted"#
        )
    );
}

#[tokio::test]
async fn service_account_tokens_are_authorized_by_the_stored_rbac() {
    let server = FakeApiServer::start(Options::default());
    create_namespaces(&server, &["ops"]);
    server
        .load_yaml_str(
            "apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: ops}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: robot, namespace: ops}
rules:
- apiGroups: ['']
  resources: [configmaps]
  resourceNames: [mine]
  verbs: [get, list, watch, patch]
- apiGroups: ['coordination.k8s.io']
  resources: [leases]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: robot, namespace: ops}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: robot}
subjects:
- {kind: ServiceAccount, name: robot, namespace: ops}
",
        )
        .expect("load");
    assert_eq!(server.token_for("ops", "nobody").unwrap_err().code, 404);
    let token = server.token_for("ops", "robot").expect("token");
    let get = |path: &'static str, token: Option<String>| {
        let server = &server;
        async move {
            raw_as(
                server,
                token.as_deref(),
                "GET",
                path,
                "application/json",
                &Value::Null,
            )
            .await
        }
    };
    // No token, or an unknown one: 401.
    assert_eq!(get("/api/v1/namespaces/ops/configmaps", None).await.0, 401);
    assert_eq!(
        get("/api/v1/namespaces/ops/configmaps", Some("nope".into()))
            .await
            .0,
        401
    );
    // Discovery is every authenticated user's.
    assert_eq!(get("/api", Some(token.clone())).await.0, 200);
    // resourceNames: a list is allowed only when a field selector pins the name.
    let (code, _, status) = get("/api/v1/namespaces/ops/configmaps", Some(token.clone())).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        r#"configmaps is forbidden: User "system:serviceaccount:ops:robot" cannot list resource "configmaps" in API group "" in the namespace "ops""#
    );
    assert_eq!(
        get(
            "/api/v1/namespaces/ops/configmaps?fieldSelector=metadata.name%3Dmine",
            Some(token.clone())
        )
        .await
        .0,
        200
    );
    let (code, _, status) = get(
        "/api/v1/namespaces/default/configmaps/mine",
        Some(token.clone()),
    )
    .await;
    assert_eq!(code, 403, "other namespaces are not bound: {status}");
    // An apply that creates needs `create` too: `patch` alone gets a 403 after validation.
    let apply = |token: String| {
        let server = &server;
        async move {
            raw_as(
                server,
                Some(&token),
                "PATCH",
                "/api/v1/namespaces/ops/configmaps/mine?fieldManager=robot",
                "application/apply-patch+yaml",
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine"}}),
            )
            .await
        }
    };
    let (code, _, status) = apply(token.clone()).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["details"]["name"], "mine");
    server
        .create(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine", "namespace": "ops"}}))
        .expect("create as admin");
    assert_eq!(
        apply(token.clone()).await.0,
        200,
        "patching an existing one is granted"
    );
    // The request log names the user.
    let records = server.requests_of("system:serviceaccount:ops:robot");
    assert!(records.iter().any(|r| r.status == 403 && r.verb == "list"));
    assert!(records
        .iter()
        .all(|r| r.user == "system:serviceaccount:ops:robot"));
}

#[tokio::test]
async fn foreground_and_orphan_deletion_wait_for_a_garbage_collector() {
    // Without kube-controller-manager nothing removes the finalizer a propagation policy adds:
    // the object stays, marked for deletion, as on a bare kube-apiserver.
    let server = FakeApiServer::start(Options::default());
    let admin = server.admin_token();
    let pools = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools";
    for (name, options, finalizer) in [
        (
            "fg",
            json!({"propagationPolicy": "Foreground"}),
            Some("foregroundDeletion"),
        ),
        (
            "orphan",
            json!({"propagationPolicy": "Orphan"}),
            Some("orphan"),
        ),
        ("bg", json!({"propagationPolicy": "Background"}), None),
    ] {
        server
            .create(&serde_json::to_value(pool(name, "rendered-x")).unwrap())
            .unwrap();
        let (code, _, answer) = raw_as(
            &server,
            Some(&admin),
            "DELETE",
            &format!("{pools}/{name}"),
            "application/json",
            &options,
        )
        .await;
        assert_eq!(code, 200, "{answer}");
        match finalizer {
            Some(finalizer) => {
                assert_eq!(
                    answer["metadata"]["finalizers"],
                    json!([finalizer]),
                    "{answer}"
                );
                let kept = server.get("MachineConfigPool", None, name).unwrap();
                assert!(kept["metadata"]["deletionTimestamp"].is_string());
            }
            None => {
                assert_eq!(answer["status"], "Success", "{answer}");
                assert!(server.get("MachineConfigPool", None, name).is_none());
            }
        }
    }
}

/// [`raw_as`] as the cluster admin.
async fn admin_call(
    server: &FakeApiServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: Value,
) -> (u16, Vec<String>, Value) {
    let admin = server.admin_token();
    raw_as(server, Some(&admin), method, path, content_type, &body).await
}

fn cause_fields(status: &Value) -> Vec<(String, String)> {
    let mut causes: Vec<(String, String)> = status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let t = |f: &str| c[f].as_str().unwrap_or_default().to_string();
            (t("field"), t("reason"))
        })
        .collect();
    causes.sort();
    causes
}

/// A Node's `podCIDR` and `podCIDRs` go through the internal type (one list; `podCIDR` wins
/// when they differ), are validated as CIDRs (one per IP family) and never change once set, nor
/// does `providerID`; taints are validated under `metadata.taints` (ValidateNode's path); the
/// deprecated `spec.configSource` is dropped from a new Node; conditions print an unset
/// `lastHeartbeatTime` as null.
#[tokio::test]
async fn node_pod_cidrs_provider_id_taints_and_config_source_as_kubernetes_has_them() {
    let server = FakeApiServer::start(Options::default());
    let node = |name: &str, spec: Value| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec,
               "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    };
    let (code, _, created) = admin_call(
        &server,
        "POST",
        "/api/v1/nodes",
        "application/json",
        node(
            "n1",
            json!({"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.1.0.0/24"], "providerID": "aws:///a",
                   "configSource": {"configMap": {"name": "x", "namespace": "y", "kubeletConfigKey": "k"}}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["podCIDRs"], json!(["10.0.0.0/24"]));
    assert_eq!(created["spec"]["podCIDR"], "10.0.0.0/24");
    assert!(created["spec"].get("configSource").is_none(), "{created}");
    assert_eq!(
        created["status"]["conditions"][0]["lastHeartbeatTime"],
        Value::Null
    );
    assert!(created["status"]["conditions"][0]
        .as_object()
        .unwrap()
        .contains_key("lastHeartbeatTime"));

    let (code, _, only_single) = admin_call(
        &server,
        "POST",
        "/api/v1/nodes",
        "application/json",
        node("n2", json!({"podCIDR": "10.2.0.0/24"})),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(only_single["spec"]["podCIDRs"], json!(["10.2.0.0/24"]));

    for (spec, field) in [
        (json!({"podCIDR": "10.0.0.0"}), "spec.podCIDRs[0]"),
        (
            json!({"podCIDRs": ["10.0.0.0/24", "10.1.0.0/24"]}),
            "spec.podCIDRs",
        ),
        (
            json!({"taints": [{"key": "bad key", "effect": "NoSchedule"}]}),
            "metadata.taints[0].key",
        ),
        (
            json!({"taints": [{"key": "k", "effect": "Sometimes"}]}),
            "metadata.taints[0].effect",
        ),
    ] {
        let (code, _, status) = admin_call(
            &server,
            "POST",
            "/api/v1/nodes",
            "application/json",
            node("n3", spec.clone()),
        )
        .await;
        assert_eq!(code, 422, "{spec}: {status}");
        assert_eq!(cause_fields(&status)[0].0, field, "{spec}: {status}");
    }
    // A dual-stack pair is fine.
    let (code, _, status) = admin_call(
        &server,
        "POST",
        "/api/v1/nodes",
        "application/json",
        node("n4", json!({"podCIDRs": ["10.0.0.0/24", "fd00::/64"]})),
    )
    .await;
    assert_eq!(code, 201, "{status}");

    for (patch, field) in [
        (json!({"spec": {"podCIDR": "10.9.0.0/24"}}), "spec.podCIDRs"),
        (
            json!({"spec": {"providerID": "aws:///b"}}),
            "spec.providerID",
        ),
    ] {
        let (code, _, status) = admin_call(
            &server,
            "PATCH",
            "/api/v1/nodes/n1",
            "application/strategic-merge-patch+json",
            patch.clone(),
        )
        .await;
        assert_eq!(code, 422, "{patch}: {status}");
        assert_eq!(
            cause_fields(&status),
            vec![(field.to_string(), "FieldValueForbidden".to_string())]
        );
    }
    // Setting a providerID where there was none is allowed.
    let (code, _, status) = admin_call(
        &server,
        "PATCH",
        "/api/v1/nodes/n4",
        "application/merge-patch+json",
        json!({"spec": {"providerID": "aws:///first"}}),
    )
    .await;
    assert_eq!(code, 200, "{status}");
}

/// Strategic merge patches as apimachinery applies them: merge-key lists merged item by item
/// with a new item first (`normalizeElementOrder`), `finalizers` and owner references merged,
/// `$deleteFromPrimitiveList`, `$patch: replace` and `delete` in a map, `$patch: delete` in a
/// list; an unknown `$patch` is a 500.
#[tokio::test]
async fn strategic_merge_patch_directives_and_list_order() {
    let server = FakeApiServer::start(Options::default());
    let smp = "application/strategic-merge-patch+json";
    let (code, _, _) = admin_call(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "finalizers": ["example.com/a"]},
               "data": {"a": "1", "b": "2"}}),
    )
    .await;
    assert_eq!(code, 201);
    let path = "/api/v1/namespaces/default/configmaps/c";
    let (code, warnings, cm) = admin_call(
        &server,
        "PATCH",
        path,
        smp,
        json!({"metadata": {"finalizers": ["example.com/b"], "ownerReferences": [
            {"apiVersion": "v1", "kind": "Secret", "name": "s1", "uid": "6b8c3c56-0000-4000-8000-000000000011"}]}}),
    )
    .await;
    assert_eq!(code, 200, "{cm}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        cm["metadata"]["finalizers"],
        json!(["example.com/b", "example.com/a"])
    );
    let (_, _, cm) = admin_call(
        &server,
        "PATCH",
        path,
        smp,
        json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Secret", "name": "s2", "uid": "6b8c3c56-0000-4000-8000-000000000012"}]}}),
    )
    .await;
    let owners: Vec<&str> = cm["metadata"]["ownerReferences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(owners, ["s2", "s1"]);
    let (code, warnings, cm) = admin_call(
        &server,
        "PATCH",
        path,
        smp,
        json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["example.com/a"],
            "ownerReferences": [{"$patch": "delete", "uid": "6b8c3c56-0000-4000-8000-000000000011"}]},
            "data": {"$patch": "replace", "only": "this"}}),
    )
    .await;
    assert_eq!(code, 200, "{cm}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(cm["metadata"]["finalizers"], json!(["example.com/b"]));
    assert_eq!(
        cm["metadata"]["ownerReferences"].as_array().unwrap().len(),
        1
    );
    assert_eq!(cm["data"], json!({"only": "this"}));
    let (code, _, status) = admin_call(
        &server,
        "PATCH",
        path,
        smp,
        json!({"data": {"$patch": "frob"}}),
    )
    .await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "unknown patch type: frob in map: map[$patch:frob]"
    );

    // A condition of a new type goes first; an updated one keeps its place.
    let (code, _, _) = admin_call(
        &server,
        "POST",
        "/api/v1/nodes",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
               "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    )
    .await;
    assert_eq!(code, 201);
    let condition_types = |node: &Value| -> Vec<String> {
        node["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, _, node) = admin_call(
        &server,
        "PATCH",
        "/api/v1/nodes/n/status",
        smp,
        json!({"status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]}}),
    )
    .await;
    assert_eq!(condition_types(&node), ["MemoryPressure", "Ready"]);
    let (_, _, node) = admin_call(
        &server,
        "PATCH",
        "/api/v1/nodes/n/status",
        smp,
        json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .await;
    assert_eq!(condition_types(&node), ["MemoryPressure", "Ready"]);
    assert_eq!(node["status"]["conditions"][1]["status"], "True");
}

/// JSON patches follow evanphx/json-patch v4 as kube-apiserver does: `replace` of a missing
/// key adds it, a path without its leading `/` loses its first segment, `test` compares,
/// `remove` of a missing key and a failed `test` are 422s; `move` and `copy` work.
#[tokio::test]
async fn json_patches_follow_json_patch_v4() {
    let server = FakeApiServer::start(Options::default());
    let jp = "application/json-patch+json";
    let (code, _, _) = admin_call(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
               "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(code, 201);
    let path = "/api/v1/namespaces/default/configmaps/c";
    let (code, _, cm) = admin_call(
        &server,
        "PATCH",
        path,
        jp,
        json!([{"op": "test", "path": "/data/a", "value": "1"},
               {"op": "replace", "path": "/data/new", "value": "2"},
               {"op": "copy", "from": "/data/a", "path": "/data/copied"},
               {"op": "move", "from": "/data/new", "path": "/data/moved"}]),
    )
    .await;
    assert_eq!(code, 200, "{cm}");
    assert_eq!(cm["data"], json!({"a": "1", "copied": "1", "moved": "2"}));
    // `data/b` names the top-level `b` (an unknown field), not `data.b`.
    let (code, warnings, cm) = admin_call(
        &server,
        "PATCH",
        path,
        jp,
        json!([{"op": "add", "path": "data/b", "value": "3"}]),
    )
    .await;
    assert_eq!(code, 200, "{cm}");
    assert_eq!(cm["data"], json!({"a": "1", "copied": "1", "moved": "2"}));
    assert_eq!(
        warnings,
        vec!["299 - \"unknown field \\\"b\\\"\"".to_string()]
    );
    for failing in [
        json!([{"op": "test", "path": "/data/a", "value": "2"}]),
        json!([{"op": "remove", "path": "/data/missing"}]),
        json!([{"op": "add", "path": "/nothere/x", "value": 1}]),
        json!([{"op": "frob", "path": "/data/a"}]),
    ] {
        let (code, _, status) = admin_call(&server, "PATCH", path, jp, failing.clone()).await;
        assert_eq!(code, 422, "{failing}: {status}");
    }
}

/// How bodies of the wrong type fail: a custom resource needs `kind` (400, also for an
/// apply), another `kind` is the validator's 422 on `kind`, a patch changing `apiVersion` a 422
/// on `apiVersion` (a PUT's a 400); a patched object that does not decode (bad base64,
/// strict unknown fields) is the patcher's 422 on `patch`; a resourceVersion that is no
/// number is strconv's plain 500.
#[tokio::test]
async fn bodies_of_the_wrong_type_fail_as_kubernetes_fails_them() {
    let server = FakeApiServer::start(Options::default());
    let pools = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools";
    let api_version = "machineconfiguration.openshift.io/v1";
    let (code, _, status) = admin_call(
        &server,
        "POST",
        pools,
        "application/json",
        json!({"metadata": {"name": "p"}}),
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("Object 'Kind' is missing"),
        "{status}"
    );
    let (code, _, status) = admin_call(
        &server,
        "POST",
        pools,
        "application/json",
        json!({"apiVersion": api_version, "kind": "MachineConfig", "metadata": {"name": "p"}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        cause_fields(&status),
        [("kind".to_string(), "FieldValueInvalid".to_string())]
    );
    let (code, _, status) = admin_call(
        &server,
        "PATCH",
        &format!("{pools}/p?fieldManager=m"),
        "application/apply-patch+yaml",
        json!({"apiVersion": api_version, "metadata": {"name": "p"}}),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    let (code, _, _) = admin_call(
        &server,
        "POST",
        pools,
        "application/json",
        serde_json::to_value(pool("p", "rendered-p")).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let (code, warnings, status) = admin_call(
        &server,
        "PATCH",
        &format!("{pools}/p"),
        "application/merge-patch+json",
        json!({"apiVersion": "machineconfiguration.openshift.io/v2"}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    // The failed request still warns of the fields the other version does not know.
    assert_eq!(warnings, ["299 - \"unknown field \\\"spec\\\"\""]);
    assert_eq!(
        cause_fields(&status),
        [("apiVersion".to_string(), "FieldValueInvalid".to_string())]
    );
    let (code, _, status) = admin_call(
        &server,
        "PUT",
        &format!("{pools}/p"),
        "application/json",
        json!({"apiVersion": "machineconfiguration.openshift.io/v2", "kind": "MachineConfigPool",
               "metadata": {"name": "p"}}),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    let (code, _, status) = admin_call(
        &server,
        "PUT",
        &format!("{pools}/p"),
        "application/json",
        json!({"apiVersion": api_version, "kind": "MachineConfigPool",
               "metadata": {"name": "p", "resourceVersion": "abc"}}),
    )
    .await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "strconv.ParseUint: parsing \"abc\": invalid syntax"
    );

    let (code, _, _) = admin_call(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
    )
    .await;
    assert_eq!(code, 201);
    for (content_type, patch) in [
        (
            "application/merge-patch+json",
            json!({"binaryData": {"bad": "%%%"}}),
        ),
        (
            "application/strategic-merge-patch+json",
            json!({"bogus": 1}),
        ),
    ] {
        let (code, _, status) = admin_call(
            &server,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c?fieldValidation=Strict",
            content_type,
            patch.clone(),
        )
        .await;
        assert_eq!(code, 422, "{patch}: {status}");
        assert_eq!(
            cause_fields(&status),
            [("patch".to_string(), "FieldValueInvalid".to_string())]
        );
    }
}

fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {list}"))
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Lists as kube-apiserver serves them: in etcd's key order (`<namespace>/<name>` as one
/// string, so `a-b/x` before `a/x`); a page with selectors has no `remainingItemCount` and
/// continues whenever more keys follow; a continued list and `resourceVersionMatch=Exact`
/// are snapshots at their revision; `resourceVersion=0` ignores the limit; a limit of zero or
/// less is none; `ListOptions` are validated (422); `k>n` selects integer labels.
#[tokio::test]
async fn lists_follow_key_order_snapshots_and_list_options() {
    let server = FakeApiServer::start(Options::default());
    create_namespaces(&server, &["ns", "ns-b"]);
    let cm = |ns: &str, name: &str, labels: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": ns, "labels": labels}})
    };
    for (ns, name, labels) in [
        ("ns", "c0", json!({"app": "a", "tier": "1"})),
        ("ns", "c1", json!({})),
        ("ns", "c2", json!({"app": "a", "tier": "3"})),
        ("ns-b", "c3", json!({"app": "a"})),
    ] {
        server.create(&cm(ns, name, labels)).unwrap();
    }
    let get = |query: String| {
        let server = &server;
        async move {
            admin_call(
                server,
                "GET",
                &format!("/api/v1/configmaps?{query}"),
                "application/json",
                Value::Null,
            )
            .await
        }
    };
    let (_, _, all) = get("labelSelector=app".into()).await;
    assert_eq!(item_names(&all), ["c3", "c0", "c2"]);
    let (_, _, tier) = get("labelSelector=tier%3E2".into()).await;
    assert_eq!(item_names(&tier), ["c2"]);

    let (_, _, page) = get("labelSelector=app&limit=2".into()).await;
    assert_eq!(item_names(&page), ["c3", "c0"]);
    assert!(
        page["metadata"].get("remainingItemCount").is_none(),
        "{page}"
    );
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    // A change after the first page is not in the rest of the list.
    server
        .merge_patch(
            "ConfigMap",
            Some("ns"),
            "c2",
            &json!({"metadata": {"labels": {"changed": "yes"}}}),
        )
        .unwrap();
    let (_, _, rest) = get(format!("labelSelector=app&limit=2&continue={token}")).await;
    assert_eq!(item_names(&rest), ["c2"]);
    assert!(rest["items"][0]["metadata"]["labels"]
        .get("changed")
        .is_none());
    // c1 follows c0 without matching: the page of one continues.
    let (_, _, one) = get("labelSelector=tier%3D1&limit=1".into()).await;
    assert_eq!(item_names(&one), ["c0"]);
    assert!(one["metadata"]["continue"]
        .as_str()
        .is_some_and(|c| !c.is_empty()));
    let (_, _, unselected) = get("limit=1".into()).await;
    assert_eq!(unselected["metadata"]["remainingItemCount"], 3);

    let (_, _, cached) = get("labelSelector=app&limit=1&resourceVersion=0".into()).await;
    assert_eq!(item_names(&cached).len(), 3);
    assert!(cached["metadata"].get("continue").is_none(), "{cached}");
    let (code, _, unlimited) = get("limit=-1".into()).await;
    assert_eq!((code, item_names(&unlimited).len()), (200, 4));

    let c0_version = all["items"][1]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _, exact) = get(format!(
        "resourceVersion={c0_version}&resourceVersionMatch=Exact"
    ))
    .await;
    assert_eq!(code, 200, "{exact}");
    assert_eq!(item_names(&exact), ["c0"]);
    assert_eq!(exact["metadata"]["resourceVersion"], c0_version);

    for (query, field) in [
        ("resourceVersionMatch=NotOlderThan", "FieldValueForbidden"),
        (
            "resourceVersion=0&resourceVersionMatch=Newest",
            "FieldValueNotSupported",
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            "FieldValueForbidden",
        ),
    ] {
        let (code, _, status) = get(query.into()).await;
        assert_eq!(code, 422, "{query}: {status}");
        assert_eq!(
            cause_fields(&status),
            [("resourceVersionMatch".to_string(), field.to_string())]
        );
    }
}

/// A path under `/apis/` that no built-in API serves and no CRD resolves (unknown group,
/// version or resource, a cluster-scoped resource under `namespaces/`) is the mux's plain-text
/// `404 page not found`; an unknown subresource of a CRD's resource, and unknown core paths,
/// are `Status` answers.
#[tokio::test]
async fn unserved_api_paths_are_the_plain_404_page() {
    let server = FakeApiServer::start(Options::default());
    let plain = |path: &'static str| {
        let server = &server;
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let request = format!(
                "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {}\r\n\r\n",
                server.admin_token()
            );
            let mut stream = tokio::net::TcpStream::connect(server.address())
                .await
                .unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut response = Vec::new();
            stream.read_to_end(&mut response).await.unwrap();
            String::from_utf8_lossy(&response).into_owned()
        }
    };
    for path in [
        "/apis/machineconfiguration.openshift.io/v1/machineconfigz",
        "/apis/example.com/v1/things",
        "/apis/machineconfiguration.openshift.io/v9/machineconfigs",
        "/apis/machineconfiguration.openshift.io/v1/namespaces/default/machineconfigs",
    ] {
        let response = plain(path).await;
        assert!(response.starts_with("HTTP/1.1 404"), "{path}: {response}");
        assert!(
            response.ends_with("\r\n\r\n404 page not found\n"),
            "{path}: {response}"
        );
    }
    for path in [
        "/apis/machineconfiguration.openshift.io/v1/machineconfigs/x/scale",
        "/api/v1/widgets",
        "/apis/coordination.k8s.io/v1/widgets",
    ] {
        let response = plain(path).await;
        assert!(response.starts_with("HTTP/1.1 404"), "{path}: {response}");
        assert!(
            response.contains("\"kind\":\"Status\""),
            "{path}: {response}"
        );
    }
}

/// Leases as kube-apiserver's lease strategy has them: no update without a resourceVersion
/// (422), a PUT of a missing Lease creates it (201, a sent resourceVersion dropped), and
/// without the CoordinatedLeaderElection feature a new Lease keeps no `strategy` or
/// `preferredHolder`.
#[tokio::test]
async fn leases_need_a_resource_version_and_are_created_by_put() {
    let server = FakeApiServer::start(Options::default());
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = |name: &str, rv: Option<&str>| {
        let mut lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                     "strategy": "OldestEmulationVersion", "preferredHolder": "b"}});
        if let Some(rv) = rv {
            lease["metadata"]["resourceVersion"] = json!(rv);
        }
        lease
    };
    let (code, _, created) = admin_call(
        &server,
        "PUT",
        &format!("{leases}/l1"),
        "application/json",
        lease("l1", Some("7")),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"].get("strategy"), None, "{created}");
    assert_eq!(created["spec"].get("preferredHolder"), None, "{created}");
    let (code, _, status) = admin_call(
        &server,
        "PUT",
        &format!("{leases}/l1"),
        "application/json",
        lease("l1", None),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        cause_fields(&status),
        [(
            "metadata.resourceVersion".to_string(),
            "FieldValueInvalid".to_string()
        )]
    );
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let (code, _, updated) = admin_call(
        &server,
        "PUT",
        &format!("{leases}/l1"),
        "application/json",
        lease("l1", Some(rv)),
    )
    .await;
    assert_eq!(code, 200, "{updated}");
}

/// Secrets of the well-known types need their keys (TLS: `tls.crt` and `tls.key`; docker
/// config: the key, holding a JSON object; basic-auth: `username` or `password`;
/// service-account token: the service account annotation), on create and on update.
#[tokio::test]
async fn secrets_of_known_types_need_their_keys() {
    let server = FakeApiServer::start(Options::default());
    let secrets = "/api/v1/namespaces/default/secrets";
    let secret = |name: &str, kind: &str, data: Value| {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
               "type": kind, "data": data})
    };
    let not_json = "bm90IGpzb24="; // "not json"
    for (kind, data, fields) in [
        (
            "kubernetes.io/tls",
            json!({}),
            vec![
                ("data[tls.crt]", "FieldValueRequired"),
                ("data[tls.key]", "FieldValueRequired"),
            ],
        ),
        (
            "kubernetes.io/dockerconfigjson",
            json!({".dockerconfigjson": not_json}),
            vec![("data[.dockerconfigjson]", "FieldValueInvalid")],
        ),
        (
            "kubernetes.io/dockerconfigjson",
            json!({"a": "MQ=="}),
            vec![("data[.dockerconfigjson]", "FieldValueRequired")],
        ),
        (
            "kubernetes.io/basic-auth",
            json!({"a": "MQ=="}),
            vec![
                ("data[password]", "FieldValueRequired"),
                ("data[username]", "FieldValueRequired"),
            ],
        ),
        (
            "kubernetes.io/service-account-token",
            json!({}),
            vec![(
                "metadata.annotations[kubernetes.io/service-account.name]",
                "FieldValueRequired",
            )],
        ),
    ] {
        let (code, _, status) = admin_call(
            &server,
            "POST",
            secrets,
            "application/json",
            secret("s", kind, data.clone()),
        )
        .await;
        assert_eq!(code, 422, "{kind} {data}: {status}");
        let want: Vec<(String, String)> = fields
            .iter()
            .map(|(f, r)| (f.to_string(), r.to_string()))
            .collect();
        assert_eq!(cause_fields(&status), want, "{kind} {data}");
    }
    for (name, kind, data) in [
        (
            "tls",
            "kubernetes.io/tls",
            json!({"tls.crt": "", "tls.key": ""}),
        ),
        (
            "docker",
            "kubernetes.io/dockerconfigjson",
            json!({".dockerconfigjson": "e30="}),
        ),
        ("basic", "kubernetes.io/basic-auth", json!({"username": ""})),
        ("opaque", "Opaque", json!({})),
    ] {
        let (code, _, body) = admin_call(
            &server,
            "POST",
            secrets,
            "application/json",
            secret(name, kind, data),
        )
        .await;
        assert_eq!(code, 201, "{kind}: {body}");
    }
    let (code, _, status) = admin_call(
        &server,
        "PATCH",
        &format!("{secrets}/tls"),
        "application/json-patch+json",
        json!([{"op": "remove", "path": "/data/tls.key"}]),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        cause_fields(&status),
        [(
            "data[tls.key]".to_string(),
            "FieldValueRequired".to_string()
        )]
    );
}

/// Finalizer names and Namespaces as the core validation has them: a built-in object's
/// finalizer without a `/` must be a standard one (422), a custom resource's only draws a
/// warning (worded by whether it has a dot); a Namespace's spec finalizers are validated on
/// `spec.finalizers`; its phase may only be Active without a deletionTimestamp; deleting it
/// sets no grace period; a main-resource patch of its spec finalizers is owned but ignored.
#[tokio::test]
async fn finalizer_names_and_namespace_rules() {
    let server = FakeApiServer::start(Options::default());
    let (code, _, status) = admin_call(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "finalizers": ["keep", "kubernetes", "example.com/ok"]}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        cause_fields(&status),
        [(
            "metadata.finalizers[0]".to_string(),
            "FieldValueInvalid".to_string()
        )]
    );
    let pools = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools";
    let mut pool = serde_json::to_value(pool("p", "rendered-p")).unwrap();
    pool["metadata"]["finalizers"] = json!(["keep", "example.com"]);
    let (code, warnings, body) = admin_call(&server, "POST", pools, "application/json", pool).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        warnings,
        [
            "299 - \"metadata.finalizers: \\\"example.com\\\": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers\"",
            "299 - \"metadata.finalizers: \\\"keep\\\": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers\"",
        ]
    );

    let (code, _, status) = admin_call(
        &server,
        "POST",
        "/api/v1/namespaces",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bad"},
               "spec": {"finalizers": ["bad finalizer"]}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        cause_fields(&status),
        [
            (
                "spec.finalizers".to_string(),
                "FieldValueInvalid".to_string()
            ),
            (
                "spec.finalizers".to_string(),
                "FieldValueInvalid".to_string()
            )
        ]
    );
    create_namespaces(&server, &["n"]);
    let (code, _, status) = admin_call(
        &server,
        "PUT",
        "/api/v1/namespaces/n/status",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"},
               "status": {"phase": "Terminating"}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        cause_fields(&status),
        [("status.Phase".to_string(), "FieldValueInvalid".to_string())]
    );
    let (code, _, patched) = admin_call(
        &server,
        "PATCH",
        "/api/v1/namespaces/n",
        "application/json-patch+json",
        json!([{"op": "add", "path": "/spec/finalizers/-", "value": "example.com/x"}]),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["spec"]["finalizers"], json!(["kubernetes"]));
    assert!(
        patched["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["fieldsV1"]["f:spec"] == json!({"f:finalizers": {}})),
        "{patched}"
    );
    let (code, _, deleted) = admin_call(
        &server,
        "DELETE",
        "/api/v1/namespaces/n",
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{deleted}");
    assert!(deleted["metadata"].get("deletionTimestamp").is_some());
    assert!(
        deleted["metadata"]
            .get("deletionGracePeriodSeconds")
            .is_none(),
        "{deleted}"
    );
}

/// Routing and decoding details of kube-apiserver: a custom resource POSTed to an object's
/// URL is created, a write to its collection is a 400 (`name must be provided`); a built-in
/// namespaced kind POSTed outside a namespace is a 405; a custom resource's metadata must
/// decode as ObjectMeta (400); a written selfLink is dropped; the strict decoder indexes list
/// items in unknown-field paths; events.k8s.io Events are selected by their own field labels.
#[tokio::test]
async fn routing_decoding_and_event_field_labels() {
    let server = FakeApiServer::start(Options::default());
    let pools = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools";
    let (code, _, created) = admin_call(
        &server,
        "POST",
        &format!("{pools}/p"),
        "application/json",
        serde_json::to_value(pool("p", "rendered-p")).unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    for method in ["PUT", "PATCH"] {
        let content_type = if method == "PUT" {
            "application/json"
        } else {
            "application/merge-patch+json"
        };
        let (code, _, status) = admin_call(
            &server,
            method,
            pools,
            content_type,
            serde_json::to_value(pool("p", "rendered-p")).unwrap(),
        )
        .await;
        assert_eq!(code, 400, "{method}: {status}");
        assert_eq!(status["message"], "name must be provided");
    }
    let (code, _, _) = admin_call(
        &server,
        "POST",
        "/api/v1/configmaps",
        "application/json",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "namespace": "default"}}),
    )
    .await;
    assert_eq!(code, 405);
    let mut numeric_label = serde_json::to_value(pool("q", "rendered-q")).unwrap();
    numeric_label["metadata"]["labels"] = json!({"a": 1});
    let (code, _, status) =
        admin_call(&server, "POST", pools, "application/json", numeric_label).await;
    assert_eq!(code, 400, "{status}");
    let (code, _, patched) = admin_call(
        &server,
        "PATCH",
        &format!("{pools}/p"),
        "application/merge-patch+json",
        json!({"metadata": {"selfLink": "/x"}}),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert!(patched["metadata"].get("selfLink").is_none(), "{patched}");

    let (code, warnings, _) = admin_call(
        &server,
        "POST",
        "/api/v1/nodes",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
               "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1", "zone": "a"}]}}),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        ["299 - \"unknown field \\\"status.addresses[0].zone\\\"\""]
    );

    let events = "/apis/events.k8s.io/v1/namespaces/default/events";
    for (name, reason, kind) in [("e0", "R0", "ReplicaSet"), ("e1", "R1", "Pod")] {
        let (code, _, body) = admin_call(
            &server,
            "POST",
            events,
            "application/json",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                   "metadata": {"name": name}, "eventTime": "2026-11-25T03:00:00.000000Z",
                   "action": "Serve", "reason": reason, "type": "Normal",
                   "reportingController": "example.com/c", "reportingInstance": "i",
                   "regarding": {"apiVersion": "v1", "kind": kind, "name": "x", "namespace": "default"}}),
        )
        .await;
        assert_eq!(code, 201, "{body}");
    }
    for (selector, names) in [
        ("reason%3DR1", vec!["e1"]),
        ("regarding.kind%3DReplicaSet", vec!["e0"]),
        (
            "type%3DNormal,reportingController%3Dexample.com%2Fc",
            vec!["e0", "e1"],
        ),
    ] {
        let (code, _, list) = admin_call(
            &server,
            "GET",
            &format!("{events}?fieldSelector={selector}"),
            "application/json",
            Value::Null,
        )
        .await;
        assert_eq!(code, 200, "{selector}: {list}");
        assert_eq!(item_names(&list), names, "{selector}");
    }
    let (code, _, _) = admin_call(
        &server,
        "GET",
        &format!("{events}?fieldSelector=involvedObject.kind%3DPod"),
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(code, 400);
}

/// An apply of an empty map owns the map itself (a leaf, `f:spec: {}`), and drops what the
/// manager applied under it before; a later apply of fields under it keeps what other appliers
/// own there.
#[tokio::test]
async fn an_applied_empty_map_is_owned_as_a_leaf() {
    let server = FakeApiServer::start(Options::default());
    let path = "/api/v1/namespaces/default/configmaps/c";
    let apply = |manager: &'static str, data: Value| {
        let server = &server;
        async move {
            admin_call(
                server,
                "PATCH",
                &format!("{path}?fieldManager={manager}"),
                "application/apply-patch+yaml",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "c", "namespace": "default"}, "data": data}),
            )
            .await
        }
    };
    let (code, _, _) = apply("a", json!({"k1": "a", "k2": "a"})).await;
    assert_eq!(code, 201);
    let (code, _, _) = apply("b", json!({"k3": "b"})).await;
    assert_eq!(code, 200);
    let (code, _, cm) = apply("a", json!({})).await;
    assert_eq!(code, 200, "{cm}");
    assert_eq!(cm["data"], json!({"k3": "b"}));
    assert_eq!(fields_of(&cm, "a", "Apply", ""), json!({"f:data": {}}));
    let (code, _, cm) = apply("a", json!({"k4": "a"})).await;
    assert_eq!(code, 200, "{cm}");
    assert_eq!(cm["data"], json!({"k3": "b", "k4": "a"}));
    assert_eq!(
        fields_of(&cm, "a", "Apply", ""),
        json!({"f:data": {"f:k4": {}}})
    );
}

/// An apply configuration structured-merge-diff cannot type is the plain 500 `failed to
/// create typed patch object`: a value of another type, two list-map items with one key, an
/// item without its key; a key with a schema default addresses the item by the default
/// without being owned.
#[tokio::test]
async fn untypable_apply_configurations_are_500s_and_key_defaults_address_items() {
    let mut def = widget_resource();
    let mut schema = (**def.schema.as_ref().unwrap()).clone();
    schema["properties"]["spec"]["properties"]["files"] = json!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["arch"],
        "items": {"type": "object", "properties": {
            "arch": {"type": "string", "default": "NoArch"},
            "content": {"type": "string"}}}
    });
    def.schema = Some(std::sync::Arc::new(schema));
    let server = FakeApiServer::start(Options {
        extra_resources: vec![def],
        ..Options::default()
    });
    let apply = |manager: &'static str, spec: Value| {
        let server = &server;
        async move {
            admin_call(
                server,
                "PATCH",
                &format!("/apis/example.com/v1/widgets/w?fieldManager={manager}"),
                "application/apply-patch+yaml",
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"name": "w"}, "spec": spec}),
            )
            .await
        }
    };
    for spec in [
        json!({"order": "a"}),
        json!({"items": [{"name": "x"}, {"name": "x"}]}),
        json!({"items": [{"value": "no name"}]}),
    ] {
        let (code, _, status) = apply("a", spec.clone()).await;
        assert_eq!(code, 500, "{spec}: {status}");
        assert!(
            status["message"].as_str().unwrap().starts_with(
                "failed to create typed patch object (/w; example.com/v1, Kind=Widget): .spec."
            ),
            "{status}"
        );
        assert!(status.get("reason").is_none(), "{status}");
    }
    let (code, _, _) = apply("a", json!({"files": [{"arch": "AMD64", "content": "x"}]})).await;
    assert_eq!(code, 201);
    let (code, _, widget) = apply("b", json!({"files": [{"content": "y"}]})).await;
    assert_eq!(code, 200, "{widget}");
    assert_eq!(
        widget["spec"]["files"],
        json!([{"arch": "AMD64", "content": "x"}, {"arch": "NoArch", "content": "y"}])
    );
    assert_eq!(
        fields_of(&widget, "b", "Apply", ""),
        json!({"f:spec": {"f:files": {"k:{\"arch\":\"NoArch\"}": {".": {}, "f:content": {}}}}})
    );
}

/// A delete that chooses a propagation replaces the garbage collector's finalizers, also on
/// an object already being deleted: a Background delete of an object an Orphan delete left
/// waiting removes `orphan`, and with no finalizer left the object goes.
#[tokio::test]
async fn a_chosen_propagation_replaces_the_garbage_collector_finalizers() {
    let server = FakeApiServer::start(Options::default());
    let path = "/api/v1/namespaces/default/configmaps/c";
    server
        .create(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "c", "namespace": "default",
                                      "finalizers": ["example.com/keep"]}}))
        .unwrap();
    let delete = |query: &'static str, body: Value| {
        let server = &server;
        async move {
            admin_call(
                server,
                "DELETE",
                &format!("{path}{query}"),
                "application/json",
                body,
            )
            .await
        }
    };
    let (code, _, cm) = delete("", json!({"propagationPolicy": "Orphan"})).await;
    assert_eq!(code, 200, "{cm}");
    assert_eq!(
        cm["metadata"]["finalizers"],
        json!(["example.com/keep", "orphan"])
    );
    // Deleting again without a choice changes nothing.
    let (_, _, again) = delete("", Value::Null).await;
    assert_eq!(
        again["metadata"]["finalizers"],
        cm["metadata"]["finalizers"]
    );
    let (code, _, cm) = delete("?propagationPolicy=Foreground", Value::Null).await;
    assert_eq!(code, 200, "{cm}");
    assert_eq!(
        cm["metadata"]["finalizers"],
        json!(["example.com/keep", "foregroundDeletion"])
    );
    let (code, _, _) = admin_call(
        &server,
        "PATCH",
        path,
        "application/merge-patch+json",
        json!({"metadata": {"finalizers": ["foregroundDeletion"]}}),
    )
    .await;
    assert_eq!(code, 200);
    let (code, _, status) = delete("?propagationPolicy=Background", Value::Null).await;
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["status"], "Success", "{status}");
    let (code, _, _) = admin_call(&server, "GET", path, "application/json", Value::Null).await;
    assert_eq!(code, 404);
}

/// Built-in details: a Node capacity that is no quantity does not decode (400); a
/// RoleBinding's roleRef.apiGroup defaults to the RBAC group and its roleRef is atomic; a
/// ServiceAccount's secrets are a list map keyed by name.
#[tokio::test]
async fn quantities_role_refs_and_service_account_secrets() {
    let server = FakeApiServer::start(Options::default());
    for (cpu, want) in [("lots", 400), ("1k", 201), ("1.5e3", 201), ("2Ki", 201)] {
        let (code, _, body) = admin_call(
            &server,
            "POST",
            "/api/v1/nodes",
            "application/json",
            json!({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": format!("n-{}", cpu.to_lowercase().replace('.', "-"))},
                   "status": {"capacity": {"cpu": cpu}}}),
        )
        .await;
        assert_eq!(code, want, "{cpu}: {body}");
    }
    let bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let (code, _, status) = admin_call(
        &server,
        "POST",
        bindings,
        "application/json",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "b"}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        cause_fields(&status),
        [
            (
                "roleRef.kind".to_string(),
                "FieldValueNotSupported".to_string()
            ),
            ("roleRef.name".to_string(), "FieldValueRequired".to_string())
        ]
    );
    let (code, _, binding) = admin_call(
        &server,
        "POST",
        bindings,
        "application/json",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "r"}}),
    )
    .await;
    assert_eq!(code, 201, "{binding}");
    assert_eq!(binding["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(
        binding["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:roleRef": {}})
    );
    let (code, _, account) = admin_call(
        &server,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        "application/json",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
               "secrets": [{"name": "x"}]}),
    )
    .await;
    assert_eq!(code, 201, "{account}");
    assert_eq!(
        account["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:secrets": {".": {}, "k:{\"name\":\"x\"}": {}}})
    );
}

/// JSON merge patches prune the nulls inside what they put in place (evanphx/json-patch's
/// `MergePatch`): a list item's `null` member is gone, even where the schema allows null.
#[tokio::test]
async fn merge_patches_prune_nulls_inside_lists() {
    let mut def = widget_resource();
    let mut schema = (**def.schema.as_ref().unwrap()).clone();
    schema["properties"]["spec"]["properties"]["items"]["items"]["properties"]["note"] =
        json!({"type": "string", "nullable": true});
    def.schema = Some(std::sync::Arc::new(schema));
    let server = FakeApiServer::start(Options {
        extra_resources: vec![def],
        ..Options::default()
    });
    let widgets = "/apis/example.com/v1/widgets";
    let (code, _, _) = admin_call(
        &server,
        "POST",
        widgets,
        "application/json",
        widget("w", json!({})),
    )
    .await;
    assert_eq!(code, 201);
    let (code, _, patched) = admin_call(
        &server,
        "PATCH",
        &format!("{widgets}/w"),
        "application/merge-patch+json",
        json!({"spec": {"items": [{"name": "a", "note": null}], "mode": null}}),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        patched["spec"]["items"],
        json!([{"name": "a", "weight": 1}]),
        "{patched}"
    );
}

/// An integer beyond its `int32` format, or with a fraction, is reported by kube-openapi's
/// format check on the object holding it (`spec`: "... in count"); a fraction is also a type
/// error naming the format and float64.
#[tokio::test]
async fn int32_fields_are_checked_on_their_parent() {
    let mut def = widget_resource();
    let mut schema = (**def.schema.as_ref().unwrap()).clone();
    schema["properties"]["spec"]["properties"]["count"] =
        json!({"type": "integer", "format": "int32"});
    def.schema = Some(std::sync::Arc::new(schema));
    let server = FakeApiServer::start(Options {
        extra_resources: vec![def],
        ..Options::default()
    });
    for (count, causes) in [
        (json!(4294967296u64), vec![("spec", "FieldValueInvalid")]),
        (
            json!(1.5),
            vec![
                ("spec", "FieldValueInvalid"),
                ("spec.count", "FieldValueTypeInvalid"),
            ],
        ),
    ] {
        let (code, _, status) = admin_call(
            &server,
            "POST",
            "/apis/example.com/v1/widgets",
            "application/json",
            widget("w", json!({"count": count})),
        )
        .await;
        assert_eq!(code, 422, "{count}: {status}");
        let want: Vec<(String, String)> = causes
            .iter()
            .map(|(f, r)| (f.to_string(), r.to_string()))
            .collect();
        assert_eq!(cause_fields(&status), want, "{count}: {status}");
        assert!(
            status["details"]["causes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["message"]
                    == "Invalid value: \"\": Checked value must be of type integer with format int32 in count"),
            "{status}"
        );
    }
}

/// Core v1 Events and events.k8s.io Events are one storage served by two APIs: each reads
/// the other's objects in its own form (involvedObject/regarding, message/note, source/
/// deprecatedSource, ...; managedFields as written), selects on its own field labels (core
/// `source`: the source component, else the reporting controller), and validates a write by
/// its own rules (a core Event needs no eventTime, type or reporting controller).
#[tokio::test]
async fn core_and_events_k8s_io_events_share_their_storage() {
    let server = FakeApiServer::start(Options::default());
    let core = "/api/v1/namespaces/default/events";
    let events = "/apis/events.k8s.io/v1/namespaces/default/events";
    let (code, _, created) = admin_call(
        &server,
        "POST",
        events,
        "application/json",
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "new"},
               "eventTime": "2026-11-25T03:00:00.000000Z", "action": "Serve", "reason": "R",
               "type": "Normal", "note": "served", "reportingController": "example.com/c",
               "reportingInstance": "i",
               "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "default"}}),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let (code, _, as_core) = admin_call(
        &server,
        "GET",
        &format!("{core}/new"),
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{as_core}");
    assert_eq!(as_core["apiVersion"], "v1");
    assert_eq!(as_core["message"], "served");
    assert_eq!(as_core["involvedObject"]["name"], "p");
    assert_eq!(as_core["reportingComponent"], "example.com/c");
    assert_eq!(as_core["source"], json!({}));
    assert_eq!(
        as_core["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );

    let (code, _, minimal) = admin_call(
        &server,
        "POST",
        core,
        "application/json",
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "old"},
               "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
               "message": "started", "count": 1, "type": "Info",
               "source": {"component": "kubelet", "host": "n1"}}),
    )
    .await;
    assert_eq!(code, 201, "{minimal}");
    assert_eq!(minimal["reportingComponent"], "");
    assert_eq!(minimal["eventTime"], Value::Null);
    let (code, _, as_new) = admin_call(
        &server,
        "GET",
        &format!("{events}/old"),
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{as_new}");
    assert_eq!(as_new["apiVersion"], "events.k8s.io/v1");
    assert_eq!(as_new["note"], "started");
    assert_eq!(as_new["deprecatedCount"], 1);
    assert_eq!(
        as_new["deprecatedSource"],
        json!({"component": "kubelet", "host": "n1"})
    );

    let (code, _, status) = admin_call(
        &server,
        "POST",
        core,
        "application/json",
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "elsewhere"},
               "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        cause_fields(&status),
        [(
            "involvedObject.namespace".to_string(),
            "FieldValueInvalid".to_string()
        )]
    );

    for (selector, names) in [
        ("source%3Dexample.com%2Fc", vec!["new"]),
        ("source%3Dkubelet", vec!["old"]),
        ("involvedObject.name%3Dp", vec!["new", "old"]),
    ] {
        let (code, _, list) = admin_call(
            &server,
            "GET",
            &format!("{core}?fieldSelector={selector}"),
            "application/json",
            Value::Null,
        )
        .await;
        assert_eq!(code, 200, "{selector}: {list}");
        assert_eq!(item_names(&list), names, "{selector}");
        assert!(list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e.get("involvedObject").is_some()));
    }
}

/// A custom resource's apply configuration is typed, not decoded: a `null` it sends is not
/// pruned but merged, and a field that may not be null fails validation (422).
#[tokio::test]
async fn an_applied_null_reaches_validation() {
    let server = FakeApiServer::start(Options {
        extra_resources: vec![widget_resource()],
        ..Options::default()
    });
    let (code, _, status) = admin_call(
        &server,
        "PATCH",
        "/apis/example.com/v1/widgets/w?fieldManager=m",
        "application/apply-patch+yaml",
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
               "spec": {"tags": ["a"], "order": null}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        cause_fields(&status),
        [(
            "spec.order".to_string(),
            "FieldValueTypeInvalid".to_string()
        )]
    );
}

/// A Namespace's `/finalize` subresource replaces its spec finalizers (which the main
/// resource keeps), keeps its status, and records the writer under the subresource
/// `finalize`; it serves only updates.
#[tokio::test]
async fn the_namespace_finalize_subresource_sets_spec_finalizers() {
    let server = FakeApiServer::start(Options::default());
    create_namespaces(&server, &["n"]);
    let (code, _, namespace) = admin_call(
        &server,
        "PUT",
        "/api/v1/namespaces/n/finalize",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"},
               "spec": {"finalizers": ["example.com/x"]}, "status": {"phase": "Terminating"}}),
    )
    .await;
    assert_eq!(code, 200, "{namespace}");
    assert_eq!(namespace["spec"]["finalizers"], json!(["example.com/x"]));
    assert_eq!(namespace["status"]["phase"], "Active");
    assert_eq!(
        fields_of(&namespace, "unknown", "Update", "finalize"),
        json!({"f:spec": {"f:finalizers": {}}})
    );
    let (code, _, _) = admin_call(
        &server,
        "PATCH",
        "/api/v1/namespaces/n/finalize",
        "application/merge-patch+json",
        json!({"spec": {"finalizers": []}}),
    )
    .await;
    assert_eq!(code, 405);
}

/// A custom resource's unknown fields are warned of metadata's first (the schema coercer
/// reads ObjectMeta before it prunes), then the pruned ones.
#[tokio::test]
async fn unknown_metadata_fields_are_warned_of_first() {
    let server = FakeApiServer::start(Options {
        extra_resources: vec![widget_resource()],
        ..Options::default()
    });
    let mut body = widget("w", json!({"bogus": 1}));
    body["metadata"]["zzz"] = json!("x");
    body["aaa"] = json!("y");
    let (code, warnings, created) = admin_call(
        &server,
        "POST",
        "/apis/example.com/v1/widgets",
        "application/json",
        body,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        warnings,
        [
            "299 - \"unknown field \\\"metadata.zzz\\\"\"",
            "299 - \"unknown field \\\"aaa\\\"\"",
            "299 - \"unknown field \\\"spec.bogus\\\"\"",
        ]
    );
}

/// Field errors print a list or struct value as JSON, as Kubernetes 1.34+ does (an owner
/// reference with its set fields, a string list, an internal type's field names).
#[tokio::test]
async fn field_errors_print_structured_values_as_json() {
    let server = FakeApiServer::start(Options::default());
    let (code, _, status) = admin_call(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c",
               "finalizers": ["orphan", "foregroundDeletion"],
               "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e",
                                    "uid": "6b8c3c56-0000-4000-8000-000000000011"}]}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    let messages: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert!(messages.contains(&"Invalid value: {\"apiVersion\":\"v1\",\"kind\":\"Event\",\"name\":\"e\",\"uid\":\"6b8c3c56-0000-4000-8000-000000000011\"}: /v1, Kind=Event is disallowed from being an owner"), "{messages:?}");
    assert!(messages.contains(&"Invalid value: [\"orphan\",\"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set"), "{messages:?}");
    let (code, _, status) = admin_call(
        &server,
        "POST",
        "/api/v1/nodes",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
               "spec": {"taints": [{"key": "a", "value": "x", "effect": "NoSchedule"},
                                   {"key": "a", "value": "y", "effect": "NoSchedule"}]}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Duplicate value: {\"Key\":\"a\",\"Value\":\"y\",\"Effect\":\"NoSchedule\",\"TimeAdded\":null}: taints must be unique by key and effect pair"
    );
}

/// An update's body checked against the URL as kube-apiserver words it: another namespace
/// first ("provided object"), a missing name ("undeterminable"), and a uid precondition as
/// the storage's error naming the object's key.
#[tokio::test]
async fn update_body_checks_are_worded_as_kubernetes_words_them() {
    let server = FakeApiServer::start(Options::default());
    let path = "/api/v1/namespaces/default/configmaps/c";
    server
        .create(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "c", "namespace": "default"}}))
        .unwrap();
    for (metadata, message) in [
        (
            json!({"name": "other", "namespace": "elsewhere"}),
            "the namespace of the provided object does not match the namespace sent on the request",
        ),
        (
            json!({}),
            "the name of the object (c based on URL) was undeterminable: name must be provided",
        ),
    ] {
        let (code, _, status) = admin_call(
            &server,
            "PUT",
            path,
            "application/json",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}),
        )
        .await;
        assert_eq!(code, 400, "{status}");
        assert_eq!(status["message"], message);
    }
    let (code, _, status) = admin_call(
        &server,
        "PUT",
        path,
        "application/json",
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "uid": "6b8c3c56-0000-4000-8000-000000000001"}}),
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert!(status["message"].as_str().unwrap().starts_with(
        "Operation cannot be fulfilled on configmaps \"c\": StorageError: invalid object, Code: 4, Key: /registry/configmaps/default/c, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 6b8c3c56-0000-4000-8000-000000000001, UID in object meta: "
    ), "{status}");
}

/// A field label a kind does not support: kinds with their own field label conversion (and
/// custom resources) say `field label not supported`, built-in kinds without one answer with
/// the default conversion's words.
#[tokio::test]
async fn unsupported_field_labels_are_worded_by_the_kinds_conversion() {
    let server = FakeApiServer::start(Options::default());
    for (path, message) in [
        (
            "/api/v1/namespaces/default/configmaps?fieldSelector=data.i%3D1",
            "\"data.i\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
        ),
        (
            "/api/v1/namespaces?fieldSelector=spec.finalizers%3Dkubernetes",
            "field label not supported: spec.finalizers",
        ),
        (
            "/apis/machineconfiguration.openshift.io/v1/machineconfigs?fieldSelector=spec.fips%3Dtrue",
            "field label not supported: spec.fips",
        ),
    ] {
        let (code, _, status) =
            admin_call(&server, "GET", path, "application/json", Value::Null).await;
        assert_eq!(code, 400, "{path}: {status}");
        assert_eq!(status["message"], message, "{path}");
    }
}

/// A status update of a custom resource is validated by the status schema alone: the
/// messages name paths relative to `status`, the causes keep the full field path.
#[tokio::test]
async fn status_schema_messages_name_paths_relative_to_status() {
    let server = FakeApiServer::start(Options {
        extra_resources: vec![widget_resource()],
        ..Options::default()
    });
    let widgets = "/apis/example.com/v1/widgets";
    let (code, _, _) = admin_call(
        &server,
        "POST",
        widgets,
        "application/json",
        widget("w", json!({})),
    )
    .await;
    assert_eq!(code, 201);
    let (code, _, status) = admin_call(
        &server,
        "PATCH",
        &format!("{widgets}/w/status"),
        "application/merge-patch+json",
        json!({"status": {"count": "many"}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "status.count");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Invalid value: \"string\": count in body must be of type integer: \"string\""
    );
}

/// The apiextensions handler's words for what it cannot serve on a custom resource: another
/// path under an object is that object not found, an unsupported verb is named with the
/// resource; a patch body that does not decode is worded as `encoding/json` fails it.
#[tokio::test]
async fn custom_resource_paths_and_patch_bodies_are_worded_as_kubernetes_words_them() {
    let server = FakeApiServer::start(Options::default());
    let configs = "/apis/machineconfiguration.openshift.io/v1/machineconfigs";
    for path in [
        format!("{configs}/x/scale"),
        format!("{configs}/x/status/y"),
    ] {
        let (code, _, status) =
            admin_call(&server, "GET", &path, "application/json", Value::Null).await;
        assert_eq!(code, 404, "{path}: {status}");
        assert_eq!(
            status["message"],
            "machineconfigs.machineconfiguration.openshift.io \"x\" not found"
        );
    }
    let pools = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools";
    let (code, _, status) = admin_call(
        &server,
        "DELETE",
        &format!("{pools}/p/status"),
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(code, 405, "{status}");
    assert_eq!(
        status["message"],
        "delete is not supported on resources of kind \"machineconfigpools.machineconfiguration.openshift.io\""
    );
    server
        .create(&serde_json::to_value(pool("p", "rendered-p")).unwrap())
        .unwrap();
    for (content_type, body, message) in [
        (
            "application/merge-patch+json",
            json!([1]),
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            "application/json-patch+json",
            json!({}),
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        ),
    ] {
        let (code, _, status) =
            admin_call(&server, "PATCH", &format!("{pools}/p"), content_type, body).await;
        assert_eq!(code, 400, "{status}");
        assert_eq!(status["message"], message);
    }
}

/// Messages as kube-apiserver 1.36 words them: DNS names and ConfigMap keys too long in
/// characters (label keys and values in bytes), a resourceVersion that is no number, an apply
/// body or custom resource body that is no object.
#[tokio::test]
async fn length_version_and_body_messages_are_worded_as_kubernetes_words_them() {
    let server = FakeApiServer::start(Options::default());
    let long = "n".repeat(64);
    let (code, _, status) = admin_call(
        &server,
        "POST",
        "/api/v1/namespaces",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": long}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    let messages: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert!(
        messages.contains(
            &format!("Invalid value: \"{long}\": must be no more than 63 characters").as_str()
        ),
        "{messages:?}"
    );
    assert!(
        messages.contains(
            &format!("Invalid value: \"{long}\": must be no more than 63 bytes").as_str()
        ),
        "{messages:?}"
    );
    let configs = "/apis/machineconfiguration.openshift.io/v1/machineconfigs";
    for (method, path, content_type, body, message) in [
        (
            "GET",
            format!("{configs}?resourceVersion=abc"),
            "application/json",
            Value::Null,
            "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax".to_string(),
        ),
        (
            "PATCH",
            format!("{configs}/x?fieldManager=m"),
            "application/apply-patch+yaml",
            json!("text"),
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type map[string]interface {}".to_string(),
        ),
        (
            "POST",
            configs.to_string(),
            "application/json",
            json!([1]),
            "the object provided is unrecognized (must be of type MachineConfig): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (5b315d)".to_string(),
        ),
    ] {
        let (code, _, status) = admin_call(&server, method, &path, content_type, body).await;
        assert_eq!(code, 400, "{path}: {status}");
        assert_eq!(status["message"], message, "{path}");
    }
}
