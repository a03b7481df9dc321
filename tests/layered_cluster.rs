//! Layered pools in cluster mode, end to end: objects written to a Kubernetes API server (the
//! in-test fake, `tests/support/fake_apiserver`), the real cluster source (kube-rs reflectors,
//! snapshot builder), and the real router, payload cache, metrics and status board. Each
//! scenario of the layered-serving safety story is checked in the bytes a booting node gets:
//! - the build succeeded but no node runs it yet: the base image;
//! - the first node finishes updating to it: the next request gets the layered image (node
//!   annotations and encapsulated `osImageURL`), within a second of the node's update;
//! - a node degrades: back to the base image;
//! - the image lives in the in-cluster registry: the base image, even once validated.

use std::time::{Duration, Instant};
use tokio::sync::watch;

use http::StatusCode;
use machine_config_server::app::{App, Mode, Serving, Settings};
use machine_config_server::ignition::dataurl;
use machine_config_server::mcn;
use machine_config_server::source::cluster::ClusterSettings;
use serde_json::{json, Value};
use support::api_server::{ApiServer, Options};

const DEADLINE: Duration = Duration::from_secs(20);
/// The issue's promise: a node finishing its update switches what new nodes get this fast.
const SWITCH_WITHIN: Duration = Duration::from_secs(1);

const POOL: &str = "layered-worker";
const RENDERED: &str = "rendered-layered-worker-4a23d8fb65153ffa640ed631d46a8aa0";
const INFRA_RENDERED: &str = "rendered-infra-5b6c7d8e9f00112233445566778899aa";
const BASE_IMAGE: &str = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0000000000000000000000000000000000000000000000000000000000000000";
const IMAGE: &str = "quay.io/example/layered-rhcos@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const EXTENSIONS_IMAGE: &str = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:2222222222222222222222222222222222222222222222222222222222222222";
const INTERNAL_IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-infra@sha256:3333333333333333333333333333333333333333333333333333333333333333";

const CURRENT_IMAGE: &str = "machineconfiguration.openshift.io/currentImage";
const DESIRED_IMAGE: &str = "machineconfiguration.openshift.io/desiredImage";

/// The cluster: pools `layered-worker` (external registry) and `infra` (in-cluster registry),
/// their rendered configs, MachineOSConfigs and succeeded builds, the ControllerConfig, and the
/// image registry's Service and Route.
fn cluster_yaml() -> String {
    let mut docs = vec![controller_config()];
    for (pool, rendered, image) in [
        (POOL, RENDERED, IMAGE),
        ("infra", INFRA_RENDERED, INTERNAL_IMAGE),
    ] {
        docs.push(pool_yaml(pool, rendered));
        docs.push(machine_config(rendered, pool));
        docs.push(mosc(pool, image));
        docs.push(succeeded_build(pool, rendered, image));
    }
    docs.push(
        r#"
apiVersion: v1
kind: Namespace
metadata:
  name: openshift-image-registry
---
apiVersion: v1
kind: Service
metadata:
  name: image-registry
  namespace: openshift-image-registry
spec:
  ports:
  - name: 5000-tcp
    port: 5000
    protocol: TCP
    targetPort: 5000
  selector:
    docker-registry: default
"#
        .to_string(),
    );
    docs.push(
        r#"
apiVersion: route.openshift.io/v1
kind: Route
metadata:
  name: default-route
  namespace: openshift-image-registry
spec:
  host: default-route-openshift-image-registry.apps.example.com
  to:
    kind: Service
    name: image-registry
"#
        .to_string(),
    );
    docs.join("\n---\n")
}

fn controller_config() -> String {
    support::CONTROLLER_CONFIG.to_string()
}

fn pool_yaml(name: &str, rendered: &str) -> String {
    format!(
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
  paused: false
status:
  configuration:
    name: {rendered}
  machineCount: 1
  updatedMachineCount: 0
  readyMachineCount: 0
  unavailableMachineCount: 1
  degradedMachineCount: 0
"#
    )
}

fn machine_config(name: &str, pool: &str) -> String {
    format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
  annotations:
    machineconfiguration.openshift.io/generated-by-controller-version: 4.19.0
  labels:
    machineconfiguration.openshift.io/role: {pool}
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
          source: data:,hello%20{pool}
  baseOSExtensionsContainerImage: {EXTENSIONS_IMAGE}
  kernelArguments:
  - nosmt
  - mitigations=auto
  extensions:
  - usbguard
  fips: true
  kernelType: realtime
"#
    )
}

fn mosc(pool: &str, image: &str) -> String {
    format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: {pool}
spec:
  machineConfigPool:
    name: {pool}
  imageBuilder:
    imageBuilderType: Job
  baseImagePullSecret:
    name: pull-secret
  renderedImagePushSecret:
    name: push-secret
  renderedImagePushSpec: quay.io/example/layered-rhcos:latest
  containerFile:
  - containerfileArch: NoArch
    content: |
      FROM configs AS final
      RUN rpm-ostree install httpd && ostree container commit
status:
  observedGeneration: 1
  currentImagePullSpec: "{image}"
  machineOSBuild:
    group: machineconfiguration.openshift.io
    resource: machineosbuilds
    name: {pool}-build-1
  conditions:
  - type: Degraded
    status: "False"
    reason: AsExpected
    message: ""
    lastTransitionTime: "2025-05-01T10:00:00Z"
"#
    )
}

fn succeeded_build(pool: &str, rendered: &str, image: &str) -> String {
    format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSBuild
metadata:
  name: {pool}-build-1
spec:
  machineConfig:
    name: {rendered}
  machineOSConfig:
    name: {pool}
  renderedImagePushSpec: quay.io/example/layered-rhcos:latest
status:
  buildStart: "2025-05-01T10:01:00Z"
  buildEnd: "2025-05-01T10:20:00Z"
  builder:
    imageBuilderType: Job
    job:
      group: batch
      resource: jobs
      namespace: openshift-machine-config-operator
      name: build-{pool}-build-1
  conditions:
  - type: Prepared
    status: "False"
    reason: Prepared
    message: ""
    lastTransitionTime: "2025-05-01T10:20:00Z"
  - type: Building
    status: "False"
    reason: Building
    message: ""
    lastTransitionTime: "2025-05-01T10:20:00Z"
  - type: Succeeded
    status: "True"
    reason: Succeeded
    message: Build succeeded
    lastTransitionTime: "2025-05-01T10:20:00Z"
  - type: Failed
    status: "False"
    reason: Failed
    message: ""
    lastTransitionTime: "2025-05-01T10:20:00Z"
  - type: Interrupted
    status: "False"
    reason: Interrupted
    message: ""
    lastTransitionTime: "2025-05-01T10:20:00Z"
  digestedImagePushSpec: "{image}"
"#
    )
}

/// A node of `pool` as the daemon leaves it: `state`, and `image` as current/desired image.
fn node(name: &str, pool: &str, rendered: &str, image: Option<&str>, state: &str) -> Value {
    let mut annotations = json!({
        "machineconfiguration.openshift.io/currentConfig": rendered,
        "machineconfiguration.openshift.io/desiredConfig": rendered,
        "machineconfiguration.openshift.io/state": state,
    });
    if let Some(image) = image {
        annotations[CURRENT_IMAGE] = json!(image);
        annotations[DESIRED_IMAGE] = json!(image);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/worker": "",
                format!("node-role.kubernetes.io/{pool}"): "",
            },
            "annotations": annotations,
        },
    })
}

/// The application as `start` runs it, in-process, on the test's API server.
struct Cluster {
    api: ApiServer,
    shutdown: watch::Sender<bool>,
    app: Option<App>,
    _token_dir: tempfile::TempDir,
}

impl Cluster {
    async fn start() -> Cluster {
        let api = ApiServer::start(Options::default());
        if let Err(e) = api.load_yaml_str(&cluster_yaml()) {
            panic!("loading the cluster objects: {e}");
        }
        // Nodes as the installer leaves them mid-rollout: one per pool, still updating.
        for (name, pool, rendered) in [
            ("worker-a", POOL, RENDERED),
            ("infra-a", "infra", INFRA_RENDERED),
        ] {
            api.apply_object(&node(name, pool, rendered, None, "Working"))
                .unwrap_or_else(|e| panic!("node {name}: {e:?}"));
        }

        let token_dir = tempfile::tempdir().unwrap();
        std::fs::write(token_dir.path().join("token"), "bootstrap-token-for-tests").unwrap();
        std::fs::write(
            token_dir.path().join("ca.crt"),
            "-----BEGIN CERTIFICATE-----\nTEST CA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let mut source = ClusterSettings::new("https://api-int.example.com:6443");
        source.kubeconfig = Some(api.kubeconfig_file().to_path_buf());
        source.bootstrap_token_dir = token_dir.path().to_path_buf();
        let publisher = mcn::PublisherSettings::new("layered-test", "layered-test");
        let (shutdown, shutdown_rx) = watch::channel(false);
        let app = App::start(
            Settings {
                serving: Serving::plain_http("127.0.0.1:0".parse().unwrap()),
                mode: Mode::Cluster { source, publisher },
            },
            shutdown_rx,
        )
        .await
        .unwrap_or_else(|e| panic!("the application: {e}"));
        let mut ready = app.ready.clone();
        tokio::time::timeout(DEADLINE, ready.wait_for(|ready| *ready))
            .await
            .expect("cluster source ready in time")
            .expect("cluster source running");
        // A layered pool serves once its own caches have synced too (its builds, the registry,
        // and under the Node-validated gate its Nodes): until then it answers 503.
        let mut snapshots = app.snapshots.clone();
        tokio::time::timeout(
            DEADLINE,
            snapshots.wait_for(|s| {
                s.pools
                    .keys()
                    .all(|pool| machine_config_server::render::waiting_for(s, pool).is_empty())
            }),
        )
        .await
        .expect("every pool's caches synced in time")
        .expect("cluster source running");
        Cluster {
            api,
            shutdown,
            app: Some(app),
            _token_dir: token_dir,
        }
    }

    /// What a node booting into `pool` gets: the image in its node annotations and in the
    /// encapsulated MachineConfig.
    async fn boot(&self, pool: &str) -> Boot {
        let (status, body) =
            support::router_get(&self.app().router(), &format!("/config/{pool}")).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        let config: Value = serde_json::from_slice(&body).unwrap();
        let file = |path: &str| -> Value {
            let files = config["storage"]["files"].as_array().unwrap();
            let found: Vec<&Value> = files.iter().filter(|f| f["path"] == path).collect();
            assert_eq!(found.len(), 1, "one {path} in the served config");
            let source = found[0]["contents"]["source"].as_str().unwrap();
            serde_json::from_slice(&dataurl::decode(source).unwrap()).unwrap()
        };
        let annotations = file("/etc/machine-config-daemon/node-annotations.json");
        let encapsulated = file("/etc/ignition-machine-config-encapsulated.json");
        let image = |key: &str| {
            annotations
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        assert_eq!(image(CURRENT_IMAGE), image(DESIRED_IMAGE));
        Boot {
            annotation_image: image(CURRENT_IMAGE),
            os_image_url: encapsulated["spec"]["osImageURL"]
                .as_str()
                .unwrap()
                .to_string(),
            encapsulated_spec: encapsulated["spec"].clone(),
        }
    }

    /// Boots until the served image is `want` or `within` passes; returns how long it took.
    async fn boot_until(&self, pool: &str, want: Option<&str>, within: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let boot = self.boot(pool).await;
            if boot.annotation_image.as_deref() == want {
                boot.assert(want);
                return start.elapsed();
            }
            assert!(
                start.elapsed() < within,
                "pool {pool}: still served {:?} after {within:?}, want {want:?}",
                boot.annotation_image
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the published snapshot holds the node `name` (the cluster source saw it).
    async fn wait_for_node(&self, name: &str) {
        let mut snapshots = self.app().snapshots.clone();
        let seen = snapshots.wait_for(|snapshot| {
            snapshot
                .layered
                .nodes
                .iter()
                .any(|node| node.metadata.name.as_deref() == Some(name))
        });
        tokio::time::timeout(DEADLINE, seen)
            .await
            .expect("node reaches the snapshot in time")
            .expect("cluster source running");
    }

    async fn status(&self, pool: &str) -> Value {
        let (status, body) = support::router_get(&self.app().admin_router(), "/status").await;
        assert_eq!(status, StatusCode::OK);
        let page: Value = serde_json::from_slice(&body).unwrap();
        page["pools"][pool]["layered"].clone()
    }

    fn app(&self) -> &App {
        self.app.as_ref().expect("running")
    }

    async fn stop(mut self) {
        self.shutdown.send_replace(true);
        if let Some(app) = self.app.take() {
            tokio::time::timeout(DEADLINE, app.wait())
                .await
                .expect("the application stops")
                .expect("the application stops cleanly");
        }
    }
}

#[derive(Debug)]
struct Boot {
    annotation_image: Option<String>,
    os_image_url: String,
    /// The encapsulated MachineConfig's whole `spec`.
    encapsulated_spec: Value,
}

impl Boot {
    fn assert(&self, image: Option<&str>) {
        assert_eq!(self.annotation_image.as_deref(), image);
        assert_eq!(self.os_image_url, image.unwrap_or(BASE_IMAGE));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_up_gets_the_layered_image_only_once_a_node_of_the_pool_runs_it() {
    let cluster = Cluster::start().await;

    // The build succeeded but the pool's only node is still updating to it.
    cluster.boot(POOL).await.assert(None);
    let status = cluster.status(POOL).await;
    assert_eq!(
        (status["decision"].as_str(), status["reason"].as_str()),
        (Some("base"), Some("not_validated"))
    );

    // A node of another pool running the image proves nothing for this one.
    cluster
        .api
        .apply_object(&node(
            "other-a",
            "infra",
            INFRA_RENDERED,
            Some(IMAGE),
            "Done",
        ))
        .unwrap();
    cluster.wait_for_node("other-a").await;
    cluster.boot(POOL).await.assert(None);

    // The first node of the pool finishes: the next booting node gets the layered image.
    cluster
        .api
        .apply_object(&node("worker-a", POOL, RENDERED, Some(IMAGE), "Done"))
        .unwrap();
    let took = cluster.boot_until(POOL, Some(IMAGE), SWITCH_WITHIN).await;
    eprintln!("switched to the layered image {took:?} after the node's update");
    // The layered rule changes only osImageURL (and, as always, the encapsulated config);
    // every other field of the rendered MachineConfig reaches the node unchanged.
    let mut source = cluster
        .api
        .get("MachineConfig", None, RENDERED)
        .expect("the rendered config")["spec"]
        .clone();
    source["osImageURL"] = json!(IMAGE);
    source["config"] = json!({"ignition": {"version": "3.5.0"}});
    assert_eq!(cluster.boot(POOL).await.encapsulated_spec, source);
    let status = cluster.status(POOL).await;
    assert_eq!(status["decision"], "layered");
    assert_eq!(status["reason"], "validated");
    assert_eq!(status["image"], IMAGE);

    // That node degrades: new nodes boot the base image again.
    cluster
        .api
        .apply_object(&node("worker-a", POOL, RENDERED, Some(IMAGE), "Degraded"))
        .unwrap();
    cluster.boot_until(POOL, None, SWITCH_WITHIN).await;

    let (_, metrics) = support::router_get(&cluster.app().admin_router(), "/metrics").await;
    let metrics = String::from_utf8(metrics).unwrap();
    for series in [
        r#"mcs_layered_decisions_total{pool="layered-worker",decision="base",reason="not_validated"}"#,
        r#"mcs_layered_decisions_total{pool="layered-worker",decision="layered",reason="validated"}"#,
    ] {
        assert!(metrics.contains(series), "{series} missing from\n{metrics}");
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_in_the_in_cluster_registry_boots_the_base_image() {
    let cluster = Cluster::start().await;
    cluster
        .api
        .apply_object(&node(
            "infra-a",
            "infra",
            INFRA_RENDERED,
            Some(INTERNAL_IMAGE),
            "Done",
        ))
        .unwrap();
    // Wait until the validation is visible (the reason moves on from not_validated), then
    // check what is served.
    let start = Instant::now();
    loop {
        cluster.boot("infra").await.assert(None);
        if cluster.status("infra").await["reason"] == "in_cluster_registry" {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "infra never reached in_cluster_registry"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(cluster.status("infra").await["decision"], "base");

    // Without the registry's Service and Route, the same image is not known to be in-cluster
    // any more: proof that the hosts come from the watched objects.
    cluster
        .api
        .delete(
            "services",
            Some("openshift-image-registry"),
            "image-registry",
        )
        .unwrap();
    cluster
        .api
        .delete("routes", Some("openshift-image-registry"), "default-route")
        .unwrap();
    cluster
        .boot_until("infra", Some(INTERNAL_IMAGE), DEADLINE)
        .await;
    cluster.stop().await;
}
