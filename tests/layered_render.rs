//! Layered pools as a booting node sees them, through the real router and payload cache in
//! cluster mode: the scale-up scenarios of the layered-serving safety story, checked in the
//! served bytes (node annotations file, encapsulated MachineConfig, MachineConfig content), plus
//! the metric and the admin `/status` entry that explain each decision.
//!
//! Snapshots are published by hand here, as the cluster source does after a watch event; the
//! end-to-end version against a Kubernetes API server lives in the cluster-mode tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::StatusCode;
use k8s_openapi::api::core::v1::{Node, Service};
use machine_config_server::api::imagebuild::{MachineOSBuild, MachineOSConfig, Route};
use machine_config_server::api::{MachineConfig, MachineConfigPool};
use machine_config_server::app::ServingState;
use machine_config_server::ignition::dataurl;
use machine_config_server::render::layered::registry_hosts;
use machine_config_server::snapshot::LayeredInputs;
use machine_config_server::snapshot::{Input, Mode, Snapshot};
use serde_json::Value;
use tokio::sync::watch;

const POOL: &str = "layered-worker";
const RENDERED: &str = "rendered-layered-worker-4a23d8fb65153ffa640ed631d46a8aa0";
const BASE_IMAGE: &str = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0000000000000000000000000000000000000000000000000000000000000000";
const IMAGE: &str = "quay.io/example/layered-rhcos@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const INTERNAL_IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-layered-worker@sha256:3333333333333333333333333333333333333333333333333333333333333333";
const PRE_BUILT: &str = "quay.io/example/layered-rhcos:latest@sha256:abcd1234567890abcdef1234567890abcdef1234567890abcdef1234567890ab";

const ANNOTATIONS_PATH: &str = "/etc/machine-config-daemon/node-annotations.json";
const ENCAPSULATED_PATH: &str = "/etc/ignition-machine-config-encapsulated.json";
const CONTENT_PATH: &str = "/etc/mcs-machine-config-content.json";
const CURRENT_IMAGE: &str = "machineconfiguration.openshift.io/currentImage";
const DESIRED_IMAGE: &str = "machineconfiguration.openshift.io/desiredImage";

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("bad test object: {e}\n{text}"))
}

fn pool(name: &str, rendered: &str) -> MachineConfigPool {
    yaml(&format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: {name}
spec:
  configuration:
    name: {rendered}
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: {name}
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/{name}: ""
status:
  configuration:
    name: {rendered}
  machineCount: 2
  updatedMachineCount: 0
"#
    ))
}

fn machine_config(name: &str, pool: &str, pre_built: Option<&str>) -> MachineConfig {
    let annotation = pre_built
        .map(|image| {
            format!("\n    machineconfiguration.openshift.io/pre-built-image: \"{image}\"")
        })
        .unwrap_or_default();
    yaml(&format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
  annotations:
    machineconfiguration.openshift.io/generated-by-controller-version: 4.19.0{annotation}
  ownerReferences:
  - apiVersion: machineconfiguration.openshift.io/v1
    kind: MachineConfigPool
    name: {pool}
    controller: true
    blockOwnerDeletion: true
    uid: ""
spec:
  osImageURL: {BASE_IMAGE}
  config:
    ignition:
      version: 3.5.0
    storage:
      files:
      - path: /etc/motd
        mode: 420
        overwrite: true
        contents:
          source: data:,layered%20test
  kernelArguments: []
  extensions: []
  fips: false
  kernelType: default
"#
    ))
}

fn mosc() -> MachineOSConfig {
    yaml(&format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: {POOL}
spec:
  machineConfigPool:
    name: {POOL}
  imageBuilder:
    imageBuilderType: Job
  renderedImagePushSecret:
    name: push-secret
  renderedImagePushSpec: quay.io/example/layered-rhcos:latest
  containerFile:
  - containerfileArch: NoArch
    content: FROM configs AS final
status:
  currentImagePullSpec: "{IMAGE}"
"#
    ))
}

fn succeeded_build(image: &str) -> MachineOSBuild {
    yaml(&format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSBuild
metadata:
  name: {POOL}-build-1
  creationTimestamp: "2025-05-01T10:00:00Z"
spec:
  machineConfig:
    name: {RENDERED}
  machineOSConfig:
    name: {POOL}
  renderedImagePushSpec: quay.io/example/layered-rhcos:latest
status:
  conditions:
  - type: Building
    status: "False"
    reason: Built
    message: ""
    lastTransitionTime: "2025-05-01T10:20:00Z"
  - type: Succeeded
    status: "True"
    reason: Built
    message: ""
    lastTransitionTime: "2025-05-01T10:20:00Z"
  digestedImagePushSpec: "{image}"
"#
    ))
}

fn node(name: &str, current_image: Option<&str>, state: &str) -> Node {
    let image = current_image
        .map(|image| {
            format!("\n    {CURRENT_IMAGE}: \"{image}\"\n    {DESIRED_IMAGE}: \"{image}\"")
        })
        .unwrap_or_default();
    yaml(&format!(
        r#"
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    kubernetes.io/os: linux
    node-role.kubernetes.io/worker: ""
    node-role.kubernetes.io/{POOL}: ""
  annotations:
    machineconfiguration.openshift.io/currentConfig: {RENDERED}
    machineconfiguration.openshift.io/desiredConfig: {RENDERED}
    machineconfiguration.openshift.io/state: {state}{image}
"#
    ))
}

fn registry() -> Vec<String> {
    let service: Service = yaml(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: image-registry\n  namespace: openshift-image-registry\nspec:\n  ports:\n  - port: 5000\n    protocol: TCP\n",
    );
    let route: Route = yaml(
        "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata:\n  name: default-route\n  namespace: openshift-image-registry\nspec:\n  host: default-route-openshift-image-registry.apps.example.com\n",
    );
    registry_hosts(&[service], &[route])
}

/// A cluster with pools `master` (not layered) and `layered-worker`, its MOSC, one build and
/// the given nodes.
fn snapshot(
    generation: u64,
    build_image: &str,
    nodes: Vec<Node>,
    pre_built: Option<&str>,
) -> Snapshot {
    let mut snapshot = Snapshot::empty(Mode::Cluster);
    snapshot.generation = generation;
    // Every cache synced, as the cluster source publishes it.
    snapshot.synced = Input::ALL.into_iter().collect();
    let master_rendered = "rendered-master-debfb7e8dc78d7bb874cdfefd71e66d1";
    let pools = [pool("master", master_rendered), pool(POOL, RENDERED)];
    snapshot.machine_configs = BTreeMap::from([
        (
            master_rendered.to_string(),
            Ok(Arc::new(machine_config(master_rendered, "master", None))),
        ),
        (
            RENDERED.to_string(),
            Ok(Arc::new(machine_config(RENDERED, POOL, pre_built))),
        ),
    ]);
    snapshot.controller_config = Some(Ok(Arc::new(yaml(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: ControllerConfig
metadata:
  name: machine-config-controller
spec:
  kubeAPIServerServingCAData: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
  platformSpec:
    type: None
"#,
    ))));
    snapshot.kubeconfig = Arc::from(&b"apiVersion: v1\nkind: Config\n"[..]);
    snapshot.layered = LayeredInputs {
        machine_os_configs: vec![Arc::new(mosc())],
        machine_os_builds: vec![Arc::new(succeeded_build(build_image))],
        nodes: nodes.into_iter().map(Arc::new).collect(),
        registry_hosts: registry(),
        pools: pools.iter().cloned().map(Arc::new).collect(),
        ..LayeredInputs::default()
    };
    snapshot.pools = pools
        .into_iter()
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), Ok(Arc::new(p))))
        .collect();
    snapshot
}

struct Harness {
    snapshots: watch::Sender<Arc<Snapshot>>,
    app: axum::Router,
    admin: axum::Router,
    _ready: watch::Sender<bool>,
}

impl Harness {
    fn new(first: Snapshot) -> Harness {
        let (snapshots, snapshot_rx) = watch::channel(Arc::new(first));
        let (ready, ready_rx) = watch::channel(true);
        // The routers `start` serves, over snapshots this test publishes itself.
        let routers = ServingState::new(snapshot_rx, ready_rx).routers();
        Harness {
            snapshots,
            app: routers.public,
            admin: routers.admin,
            _ready: ready,
        }
    }

    fn publish(&self, snapshot: Snapshot) {
        self.snapshots.send_replace(Arc::new(snapshot));
    }

    /// Fetches the pool's config as Ignition would and returns the files the node cares about.
    async fn served(&self, pool: &str) -> Served {
        let (status, body) = support::router_get(&self.app, &format!("/config/{pool}")).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        let config: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(config["ignition"]["version"], "3.5.0");
        let file = |path: &str| -> Value {
            let files = config["storage"]["files"].as_array().unwrap();
            let matching: Vec<&Value> = files.iter().filter(|f| f["path"] == path).collect();
            assert_eq!(matching.len(), 1, "exactly one {path} in {config}");
            let source = matching[0]["contents"]["source"].as_str().unwrap();
            serde_json::from_slice(&dataurl::decode(source).unwrap()).unwrap()
        };
        Served {
            annotations: file(ANNOTATIONS_PATH),
            encapsulated: file(ENCAPSULATED_PATH),
            content: file(CONTENT_PATH),
        }
    }

    async fn metric(&self, pool: &str, decision: &str, reason: &str) -> u64 {
        let (_, body) = support::router_get(&self.admin, "/metrics").await;
        let text = String::from_utf8(body).unwrap();
        let series = format!(
            "mcs_layered_decisions_total{{pool=\"{pool}\",decision=\"{decision}\",reason=\"{reason}\"}} "
        );
        text.lines()
            .find_map(|line| line.strip_prefix(&series))
            .map_or(0, |value| value.trim().parse().unwrap())
    }

    async fn status(&self, pool: &str) -> Value {
        let (status, body) = support::router_get(&self.admin, "/status").await;
        assert_eq!(status, StatusCode::OK);
        let page: Value = serde_json::from_slice(&body).unwrap();
        page["pools"][pool]["layered"].clone()
    }
}

struct Served {
    annotations: Value,
    encapsulated: Value,
    content: Value,
}

impl Served {
    fn assert_base(&self) {
        assert_eq!(
            self.annotations.get(CURRENT_IMAGE),
            None,
            "{}",
            self.annotations
        );
        assert_eq!(
            self.annotations.get(DESIRED_IMAGE),
            None,
            "{}",
            self.annotations
        );
        assert_eq!(
            self.annotations["machineconfiguration.openshift.io/currentConfig"],
            RENDERED
        );
        assert_eq!(self.encapsulated["spec"]["osImageURL"], BASE_IMAGE);
        assert_eq!(self.content["spec"]["osImageURL"], BASE_IMAGE);
    }

    fn assert_layered(&self, image: &str) {
        assert_eq!(
            self.annotations[CURRENT_IMAGE], image,
            "{}",
            self.annotations
        );
        assert_eq!(
            self.annotations[DESIRED_IMAGE], image,
            "{}",
            self.annotations
        );
        assert_eq!(
            self.annotations["machineconfiguration.openshift.io/state"],
            "Done"
        );
        assert_eq!(self.encapsulated["spec"]["osImageURL"], image);
        assert_eq!(self.content["spec"]["osImageURL"], image);
    }
}

#[tokio::test]
async fn scale_up_during_a_rollout_gets_the_layered_image_once_a_node_validated_it() {
    // The build succeeded, but the only node of the pool is still updating to it.
    let harness = Harness::new(snapshot(
        1,
        IMAGE,
        vec![node("worker-a", None, "Working")],
        None,
    ));
    harness.served(POOL).await.assert_base();
    assert_eq!(harness.metric(POOL, "base", "not_validated").await, 1);
    let status = harness.status(POOL).await;
    assert_eq!(status["decision"], "base");
    assert_eq!(status["reason"], "not_validated");
    assert_eq!(status["image"], Value::Null);

    // The node finishes: the very next request gets the layered image in one reboot.
    harness.publish(snapshot(
        2,
        IMAGE,
        vec![node("worker-a", Some(IMAGE), "Done")],
        None,
    ));
    harness.served(POOL).await.assert_layered(IMAGE);
    harness.served(POOL).await.assert_layered(IMAGE);
    assert_eq!(harness.metric(POOL, "layered", "validated").await, 2);
    assert_eq!(harness.metric(POOL, "base", "not_validated").await, 1);
    let status = harness.status(POOL).await;
    assert_eq!(status["decision"], "layered");
    assert_eq!(status["reason"], "validated");
    assert_eq!(status["image"], IMAGE);

    // The node degrades: new nodes fall back to the base image.
    harness.publish(snapshot(
        3,
        IMAGE,
        vec![node("worker-a", Some(IMAGE), "Degraded")],
        None,
    ));
    harness.served(POOL).await.assert_base();
    assert_eq!(harness.metric(POOL, "base", "not_validated").await, 2);
}

#[tokio::test]
async fn an_image_in_the_in_cluster_registry_is_never_served_to_a_booting_node() {
    let nodes = vec![node("worker-a", Some(INTERNAL_IMAGE), "Done")];
    let harness = Harness::new(snapshot(1, INTERNAL_IMAGE, nodes, None));
    harness.served(POOL).await.assert_base();
    assert_eq!(harness.metric(POOL, "base", "in_cluster_registry").await, 1);
    assert_eq!(harness.status(POOL).await["reason"], "in_cluster_registry");
}

#[tokio::test]
async fn other_pools_are_not_layered() {
    let harness = Harness::new(snapshot(
        1,
        IMAGE,
        vec![node("worker-a", Some(IMAGE), "Done")],
        None,
    ));
    let master = harness.served("master").await;
    assert_eq!(master.annotations.get(CURRENT_IMAGE), None);
    assert_eq!(master.encapsulated["spec"]["osImageURL"], BASE_IMAGE);
    assert_eq!(harness.metric("master", "base", "not_layered").await, 1);
    harness.served(POOL).await.assert_layered(IMAGE);
}

#[tokio::test]
async fn a_pre_built_image_annotation_wins_for_the_node_annotations() {
    // Not validated: the encapsulated MC keeps its own osImageURL, the annotations name the
    // install-time image.
    let harness = Harness::new(snapshot(1, IMAGE, vec![], Some(PRE_BUILT)));
    let served = harness.served(POOL).await;
    assert_eq!(served.annotations[CURRENT_IMAGE], PRE_BUILT);
    assert_eq!(served.annotations[DESIRED_IMAGE], PRE_BUILT);
    assert_eq!(served.encapsulated["spec"]["osImageURL"], BASE_IMAGE);

    // Validated: the served image goes into the encapsulated MC, the annotation still wins for
    // the node annotations.
    harness.publish(snapshot(
        2,
        IMAGE,
        vec![node("worker-a", Some(IMAGE), "Done")],
        Some(PRE_BUILT),
    ));
    let served = harness.served(POOL).await;
    assert_eq!(served.annotations[CURRENT_IMAGE], PRE_BUILT);
    assert_eq!(served.encapsulated["spec"]["osImageURL"], IMAGE);
}
