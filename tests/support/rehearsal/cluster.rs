//! The cluster's side of the rehearsal, played truthfully through the API: the objects a
//! cluster has before the scale-up (the realistic fixture's pools and rendered configs, the
//! layered pool's MachineOSConfig and first build, the Nodes already running and the
//! MachineConfigNodes the operator made for them), and what the rest of the cluster does
//! during it: kubelets registering Nodes, daemons reporting, the operator rolling a pool to a
//! new rendered config and a new image build succeeding.
//!
//! Every write goes through the test's API server ([`ApiServer`]): the in-test one, or a real
//! kube-apiserver when `KUBEBUILDER_ASSETS` names one.

use std::net::Ipv4Addr;
use std::time::Duration;

use serde_json::{json, Value};

use super::plan::Pool;
use crate::api_server::ApiServer;
use crate::cluster::{load_realistic_cluster, node_with_roles};

/// The field manager the harness writes as when it plays the machine-config-operator (the
/// MachineConfigNodes of the Nodes already there: not this server's to touch).
pub const OPERATOR: &str = "machine-config-operator";
/// The field manager of the harness as the nodes' daemons.
pub const DAEMON: &str = "machine-config-daemon";

pub const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";
pub const DESIRED_CONFIG: &str = "machineconfiguration.openshift.io/desiredConfig";
pub const STATE: &str = "machineconfiguration.openshift.io/state";
pub const CURRENT_IMAGE: &str = "machineconfiguration.openshift.io/currentImage";
pub const DESIRED_IMAGE: &str = "machineconfiguration.openshift.io/desiredImage";

/// The new rendered config the worker pool rolls out to during the storm.
pub const WORKER_NEXT: &str = "rendered-worker-rehearsal-next";
/// The layered pool's second build and its image.
pub const BUILD_NEXT: &str = "layered-worker-build-rehearsal";
pub const IMAGE_NEXT: &str = "image-registry.example.com/openshift-machine-config-operator/layered-worker@sha256:2222222222222222222222222222222222222222222222222222222222222222";
/// The cluster's internal API host (the Infrastructure's): the name the development
/// certificate of the replicas carries, so a machine checks it as it checks `api-int`.
pub const REPORT_HOST: &str = "localhost";

/// Names of what the cluster serves before the day starts.
#[derive(Clone, Debug)]
pub struct Before {
    /// Each pool's rendered config.
    pub master: String,
    pub worker: String,
    pub layered: String,
    /// The layered pool's image, which its running nodes have proven.
    pub image: String,
    /// The rendered configs' Ignition spec (the newest spec a machine can be answered in).
    pub config_spec: String,
    /// The Nodes already running (with the operator's MCNs) per pool.
    pub nodes: Vec<(String, Pool)>,
}

/// The Nodes running before the scale-up: three control-plane nodes (the replicas' own hosts),
/// three workers, two layered workers.
fn existing_nodes() -> Vec<(String, Pool, Ipv4Addr)> {
    let mut nodes = Vec::new();
    for i in 0..3u8 {
        nodes.push((
            format!("master-{i}"),
            Pool::Master,
            Ipv4Addr::new(127, 18, 0, i + 1),
        ));
        nodes.push((
            format!("worker-{i}"),
            Pool::Worker,
            Ipv4Addr::new(127, 18, 1, i + 1),
        ));
    }
    for i in 0..2u8 {
        nodes.push((
            format!("layered-{i}"),
            Pool::Layered,
            Ipv4Addr::new(127, 18, 2, i + 1),
        ));
    }
    nodes
}

/// Loads the cluster as it is before the scale-up and returns what it serves: its objects
/// ([`load_objects`]) and the Nodes already running, each with the operator's MCN, every pool
/// fully updated.
pub fn load(api: &ApiServer) -> Result<Before, String> {
    let mut before = load_objects(api)?;
    let (master, worker, layered, image) = (
        before.master.clone(),
        before.worker.clone(),
        before.layered.clone(),
        before.image.clone(),
    );
    let mut nodes = Vec::new();
    for (name, pool, address) in existing_nodes() {
        let (config, image) = match pool {
            Pool::Master => (&master, None),
            Pool::Worker => (&worker, None),
            Pool::Layered => (&layered, Some(image.as_str())),
        };
        let mut node = kubelet_node(&name, pool, address, &format!("boot-{name}-1"));
        node["metadata"]["annotations"] = daemon_annotations(config, image, "Done");
        let created = api.create(&node).map_err(|e| format!("node {name}: {e}"))?;
        let uid = created["metadata"]["uid"].as_str().unwrap_or_default();
        let mcn = json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigNode",
            "metadata": {
                "name": name,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]
            },
            "spec": {"node": {"name": name}, "pool": {"name": pool.name()},
                     "configVersion": {"desired": config}}
        });
        api.create_as(OPERATOR, &mcn)
            .map_err(|e| format!("the operator's MCN of {name}: {e}"))?;
        nodes.push((name, pool));
    }
    // Every pool fully updated: the pools' `updatedMachineCount` counts their nodes.
    for (pool, count) in [(Pool::Master, 3), (Pool::Worker, 3), (Pool::Layered, 2)] {
        api.merge_patch(
            "MachineConfigPool",
            None,
            pool.name(),
            &json!({"status": {"machineCount": count, "updatedMachineCount": count,
                               "readyMachineCount": count}}),
        )
        .map_err(|e| format!("pool {}: {e}", pool.name()))?;
    }
    before.nodes = nodes;
    Ok(before)
}

/// The cluster's objects, as the installer's bootstrap manifests and the operator create them:
/// the realistic fixture's pools, rendered configs and ControllerConfig, the layered pool's
/// MachineOSConfig and first build, the Infrastructure (where a failing machine reports) and
/// the worker pool's next rendered config. No Node.
pub fn load_objects(api: &ApiServer) -> Result<Before, String> {
    load_realistic_cluster(api);
    api.load_yaml_file(crate::fixtures::layered_objects())?;
    let layered_pool = api
        .get("MachineConfigPool", None, Pool::Layered.name())
        .ok_or("the fixture has no layered pool")?;
    let rendered = |pool: &Value| {
        pool["spec"]["configuration"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let mosc = api
        .get("MachineOSConfig", None, Pool::Layered.name())
        .ok_or("the fixture has no MachineOSConfig")?;
    let image = mosc["status"]["currentImagePullSpec"]
        .as_str()
        .ok_or("the MachineOSConfig has no image")?
        .to_string();
    let master = rendered(
        &api.get("MachineConfigPool", None, "master")
            .ok_or("no master pool")?,
    );
    let worker = rendered(
        &api.get("MachineConfigPool", None, "worker")
            .ok_or("no worker pool")?,
    );
    let layered = rendered(&layered_pool);
    let config_spec = api
        .get("MachineConfig", None, &worker)
        .and_then(|mc| {
            mc["spec"]["config"]["ignition"]["version"]
                .as_str()
                .map(str::to_string)
        })
        .ok_or("the worker's rendered config has no Ignition version")?;

    // Where a failing machine reports (upstream PR #6124, served with
    // `--advertise-failure-reporting`): the Infrastructure's internal API host, here the name
    // the development certificate carries, and the cluster's root CA (which signed it).
    let infrastructure = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": {"platformSpec": {"type": "AWS"}}
    });
    api.create(&infrastructure)
        .map_err(|e| format!("Infrastructure: {e}"))?;
    api.merge_patch(
        "Infrastructure",
        None,
        "cluster",
        &json!({"status": {
            "apiServerInternalURI": format!("https://{REPORT_HOST}:6443"),
            "apiServerURL": format!("https://{REPORT_HOST}:6443"),
            "controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable",
            "cpuPartitioning": "None", "etcdDiscoveryDomain": "", "infrastructureName": "rehearsal",
            "platform": "AWS", "platformStatus": {"type": "AWS", "aws": {"region": "us-east-1"}}
        }}),
    )
    .map_err(|e| format!("Infrastructure status: {e}"))?;
    let root_ca = std::fs::read(crate::mcs::repo().join("certs/ca.crt"))
        .map_err(|e| format!("certs/ca.crt: {e}"))?;
    {
        use base64::Engine as _;
        api.merge_patch(
            "ControllerConfig",
            None,
            "machine-config-controller",
            &json!({"spec": {"rootCAData": base64::engine::general_purpose::STANDARD.encode(root_ca)}}),
        )
        .map_err(|e| format!("ControllerConfig rootCAData: {e}"))?;
    }
    // The rendered config the worker pool will move to: the same config under a new name, as
    // the operator renders one when a MachineConfig changes.
    crate::cluster::copy_rendered_config(api, &worker, WORKER_NEXT);
    Ok(Before {
        master,
        worker,
        layered,
        image,
        config_spec,
        nodes: Vec::new(),
    })
}

/// A Node as a kubelet registers it: its pool's role labels, `address` as `InternalIP`, a
/// boot ID and `Ready`.
pub fn kubelet_node(name: &str, pool: Pool, address: Ipv4Addr, boot_id: &str) -> Value {
    let mut node = node_with_roles(name, address, pool.roles());
    let now = super::rfc3339_now();
    node["status"]["nodeInfo"] = json!({
        "bootID": boot_id, "machineID": format!("machine-{name}"), "systemUUID": format!("uuid-{name}"),
        "kernelVersion": "5.14.0-570.el9.x86_64", "osImage": "Red Hat Enterprise Linux CoreOS",
        "containerRuntimeVersion": "cri-o://1.33.0", "kubeletVersion": "v1.33.0",
        "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"
    });
    node["status"]["conditions"] = json!([{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now, "lastTransitionTime": now
    }]);
    node
}

/// The annotations a machine-config daemon leaves on its Node.
pub fn daemon_annotations(config: &str, image: Option<&str>, state: &str) -> Value {
    let mut annotations = json!({
        CURRENT_CONFIG: config,
        DESIRED_CONFIG: config,
        STATE: state,
    });
    if let Some(image) = image {
        annotations[CURRENT_IMAGE] = json!(image);
        annotations[DESIRED_IMAGE] = json!(image);
    }
    annotations
}

/// The kubelet of a machine registers its Node.
pub fn register(
    api: &ApiServer,
    name: &str,
    pool: Pool,
    address: Ipv4Addr,
    boot_id: &str,
) -> Result<(), String> {
    let node = kubelet_node(name, pool, address, boot_id);
    let mut attempts = 0;
    as_a_kubelet(|| {
        attempts += 1;
        match api.create(&node) {
            // An earlier attempt was taken though its answer was lost.
            Err(e) if e.code == 409 && attempts > 1 => Ok(()),
            other => other.map(|_| ()),
        }
    })
    .map_err(|e| format!("node {name}: {e}"))
}

/// How long a kubelet (or a daemon) goes on trying a write the API could not take; a real one
/// never stops, the rehearsal's day is shorter than this.
const KUBELET_RETRIES_FOR: Duration = Duration::from_secs(90);

/// `write`, tried again as a kubelet does while the API cannot take it (no connection, 429,
/// 5xx: the API server restarting); any other answer is final.
fn as_a_kubelet(
    mut write: impl FnMut() -> Result<(), crate::api_server::ApiError>,
) -> Result<(), crate::api_server::ApiError> {
    let until = std::time::Instant::now() + KUBELET_RETRIES_FOR;
    let mut delay = Duration::from_millis(200);
    loop {
        match write() {
            Err(e) if (e.code == 429 || e.code >= 500) && std::time::Instant::now() < until => {
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_secs(2));
            }
            other => return other,
        }
    }
}

/// The daemon of a joined machine reports the config (and image) it runs, done.
pub fn daemon_reports(
    api: &ApiServer,
    name: &str,
    config: &str,
    image: Option<&str>,
) -> Result<(), String> {
    annotate(api, name, daemon_annotations(config, image, "Done"))
}

fn annotate(api: &ApiServer, name: &str, annotations: Value) -> Result<(), String> {
    let patch = json!({"metadata": {"annotations": annotations}});
    as_a_kubelet(|| api.merge_patch("Node", None, name, &patch).map(|_| ()))
        .map_err(|e| format!("node {name}: {e}"))
}

/// The operator starts rolling the worker pool to [`WORKER_NEXT`]: no node is updated for it
/// yet (`status.updatedMachineCount` 0, written first, as the pool's status controller sees
/// the new target), then the new `spec.configuration`.
pub fn start_worker_rollout(api: &ApiServer) -> Result<(), String> {
    api.merge_patch(
        "MachineConfigPool",
        None,
        "worker",
        &json!({"status": {"updatedMachineCount": 0}}),
    )
    .map_err(|e| format!("worker pool status: {e}"))?;
    api.merge_patch(
        "MachineConfigPool",
        None,
        "worker",
        &json!({"spec": {"configuration": {"name": WORKER_NEXT}}}),
    )
    .map(|_| ())
    .map_err(|e| format!("worker pool spec: {e}"))
}

/// One worker updates to the new config (its daemon: working, then done) and the pool counts
/// it: the proof that the new rendered config boots.
pub fn prove_worker_rollout(api: &ApiServer, node: &str, old: &str) -> Result<(), String> {
    let mut working = daemon_annotations(old, None, "Working");
    working[DESIRED_CONFIG] = json!(WORKER_NEXT);
    annotate(api, node, working)?;
    annotate(api, node, daemon_annotations(WORKER_NEXT, None, "Done"))?;
    api.merge_patch(
        "MachineConfigPool",
        None,
        "worker",
        &json!({"status": {"updatedMachineCount": 1}}),
    )
    .map(|_| ())
    .map_err(|e| format!("worker pool status: {e}"))
}

/// The layered pool's new MachineOSBuild (of the same rendered config: a new Containerfile)
/// is created and starts building.
pub fn start_build(api: &ApiServer, rendered: &str) -> Result<(), String> {
    let build = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineOSBuild",
        "metadata": {
            "name": BUILD_NEXT,
            "labels": {"machineconfiguration.openshift.io/machine-os-config": Pool::Layered.name()}
        },
        "spec": {
            "machineConfig": {"name": rendered},
            "machineOSConfig": {"name": Pool::Layered.name()},
            "renderedImagePushSpec": "image-registry.example.com/openshift-machine-config-operator/layered-worker:latest"
        }
    });
    api.create(&build)
        .map_err(|e| format!("MachineOSBuild {BUILD_NEXT}: {e}"))?;
    let now = super::rfc3339_now();
    api.merge_patch(
        "MachineOSBuild",
        None,
        BUILD_NEXT,
        &json!({"status": {
            "buildStart": now,
            "conditions": [
                condition("Prepared", "False", "Prepared", &now),
                condition("Building", "True", "Building", &now),
                condition("Succeeded", "False", "Building", &now),
                condition("Failed", "False", "Building", &now),
                condition("Interrupted", "False", "Building", &now),
            ]
        }}),
    )
    .map(|_| ())
    .map_err(|e| format!("MachineOSBuild {BUILD_NEXT} status: {e}"))
}

/// The new build succeeds: its image is pushed, the MachineOSConfig points at it. No node
/// runs it yet.
pub fn build_succeeds(api: &ApiServer) -> Result<(), String> {
    let now = super::rfc3339_now();
    api.merge_patch(
        "MachineOSBuild",
        None,
        BUILD_NEXT,
        &json!({"status": {
            "buildEnd": now,
            "digestedImagePushSpec": IMAGE_NEXT,
            "conditions": [
                condition("Prepared", "False", "Prepared", &now),
                condition("Building", "False", "Building", &now),
                condition("Succeeded", "True", "Ready", &now),
                condition("Failed", "False", "Failed", &now),
                condition("Interrupted", "False", "Interrupted", &now),
            ]
        }}),
    )
    .map_err(|e| format!("MachineOSBuild {BUILD_NEXT} status: {e}"))?;
    api.merge_patch(
        "MachineOSConfig",
        None,
        Pool::Layered.name(),
        &json!({"status": {
            "currentImagePullSpec": IMAGE_NEXT,
            "machineOSBuild": {"group": "machineconfiguration.openshift.io",
                               "resource": "machineosbuilds", "name": BUILD_NEXT}
        }}),
    )
    .map(|_| ())
    .map_err(|e| format!("MachineOSConfig status: {e}"))
}

/// One layered node updates to the new image (its daemon: working, then done): the proof that
/// the new image boots.
pub fn prove_image(
    api: &ApiServer,
    node: &str,
    rendered: &str,
    old_image: &str,
) -> Result<(), String> {
    let mut working = daemon_annotations(rendered, Some(old_image), "Working");
    working[DESIRED_IMAGE] = json!(IMAGE_NEXT);
    annotate(api, node, working)?;
    annotate(
        api,
        node,
        daemon_annotations(rendered, Some(IMAGE_NEXT), "Done"),
    )
}

fn condition(type_: &str, status: &str, reason: &str, at: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": "",
           "lastTransitionTime": at})
}
