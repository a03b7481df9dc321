//! Pure snapshot building: the contents of the watch caches at one moment plus the served
//! kubeconfig become one immutable [`Snapshot`], and a list of [`Problem`]s worth one log line
//! each (an object that does not decode, a pool whose rendered MachineConfig is missing).
//!
//! Owns the mapping from cluster objects to snapshot fields; no I/O, no logging, no caches.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};

use super::kubeconfig::CONFIG_MAP_CA_KEY;
use super::lenient::Lenient;
use crate::api::imagebuild::{MachineOSBuild, MachineOSConfig, Route};
use crate::api::machineconfignode::MachineConfigNode;
use crate::api::{ControllerConfig, MachineConfig, MachineConfigPool};
use crate::render::layered::{
    machine_config_node_render_digest, node_render_digest, registry_hosts,
};
use crate::snapshot::{
    FailureReporting, Input, LayeredGate, LayeredInputs, LoadError, Mode, Snapshot,
};

/// Name of the one ControllerConfig the server reads.
pub const CONTROLLER_CONFIG_NAME: &str = "machine-config-controller";

/// The contents of every watch cache at one moment, each list sorted by namespace and name so
/// that equal contents give equal snapshots.
#[derive(Clone, Debug, Default)]
pub struct ClusterObjects {
    pub pools: Vec<Arc<Lenient<MachineConfigPool>>>,
    pub machine_configs: Vec<Arc<Lenient<MachineConfig>>>,
    pub controller_configs: Vec<Arc<Lenient<ControllerConfig>>>,
    pub config_maps: Vec<Arc<Lenient<ConfigMap>>>,
    pub machine_os_configs: Vec<Arc<Lenient<MachineOSConfig>>>,
    pub machine_os_builds: Vec<Arc<Lenient<MachineOSBuild>>>,
    pub nodes: Vec<Arc<Lenient<Node>>>,
    pub machine_config_nodes: Vec<Arc<Lenient<MachineConfigNode>>>,
    pub services: Vec<Arc<Lenient<Service>>>,
    pub routes: Vec<Arc<Lenient<Route>>>,
    /// The inputs whose caches have synced (the lists of the others are empty).
    pub synced: BTreeSet<Input>,
    /// The layered gate this identity's rights allow.
    pub gate: LayeredGate,
    /// `--advertise-failure-reporting`, as far as the rights and the Infrastructure allow
    /// (`None`: the original's answers).
    pub failure_reporting: Option<FailureReporting>,
}

/// A 128-bit hash of the identity of every cached object (kind, namespace/name, version), in a
/// fixed order: equal fingerprints mean equal inputs (up to a 2^-128 collision), so a re-list
/// that changed nothing does not publish a new snapshot. Hashed rather than listed: on a large
/// cluster the builder compares tens of thousands of entries per change.
pub type Fingerprint = u128;

/// Two SipHash states with different keys, for a 128-bit [`Fingerprint`].
struct FingerprintHasher(
    std::collections::hash_map::DefaultHasher,
    std::collections::hash_map::DefaultHasher,
);

impl FingerprintHasher {
    fn new() -> Self {
        let mut second = std::collections::hash_map::DefaultHasher::new();
        second.write_u64(0x9e37_79b9_7f4a_7c15);
        FingerprintHasher(std::collections::hash_map::DefaultHasher::new(), second)
    }

    fn add(&mut self, entry: impl Hash) {
        entry.hash(&mut self.0);
        entry.hash(&mut self.1);
    }

    fn finish(&self) -> Fingerprint {
        (u128::from(self.0.finish()) << 64) | u128::from(self.1.finish())
    }
}

/// Render digests of Nodes and MachineConfigNodes by name, each with the resourceVersion it was
/// computed at: between two snapshots almost every object is unchanged, and hashing the labels
/// and annotations of thousands of Nodes on every change would dominate the builder's time.
#[derive(Debug, Default)]
pub struct RenderDigests {
    nodes: HashMap<String, (String, u64)>,
    machine_config_nodes: HashMap<String, (String, Option<u64>)>,
}

impl RenderDigests {
    fn lookup<K, D: Copy>(
        memo: &mut HashMap<String, (String, D)>,
        fresh: &mut HashMap<String, (String, D)>,
        object: &Lenient<K>,
        digest: impl Fn(&K) -> D,
        undecodable: D,
    ) -> D {
        let version = object.resource_version();
        let value = match memo.remove(object.name()) {
            Some((seen, value)) if seen == version && !version.is_empty() => value,
            _ => object.object().map_or(undecodable, |o| digest(o)),
        };
        fresh.insert(object.name().to_owned(), (version.to_owned(), value));
        value
    }
}

/// A hash of what the server reads of a Node: uid, labels, annotations, creation and
/// deletion time, `status.addresses`, `status.phase`, the boot ID and the `Ready` condition's
/// status and transition time (renders read labels and annotations; the MachineConfigNode
/// publisher all of it). Not the resourceVersion and nothing else of the status (no heartbeat
/// time): kubelets rewrite Node status every few seconds, and on a large cluster a new snapshot
/// per heartbeat would rebuild (and re-render) continuously. The watch keeps only these fields.
pub fn node_digest(node: &Node) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let metadata = &node.metadata;
    metadata.uid.hash(&mut hasher);
    metadata.labels.hash(&mut hasher);
    metadata.annotations.hash(&mut hasher);
    metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .hash(&mut hasher);
    metadata
        .deletion_timestamp
        .as_ref()
        .map(|t| t.0)
        .hash(&mut hasher);
    if let Some(status) = &node.status {
        status.phase.hash(&mut hasher);
        for address in status.addresses.iter().flatten() {
            (&address.type_, &address.address).hash(&mut hasher);
        }
        status
            .node_info
            .as_ref()
            .map(|i| &i.boot_id)
            .hash(&mut hasher);
        for condition in status.conditions.iter().flatten() {
            (
                &condition.type_,
                &condition.status,
                condition.last_transition_time.as_ref().map(|t| t.0),
            )
                .hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// Something about the cluster state worth one log line until it changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// What it is about, e.g. `machineconfigpool/worker`.
    pub subject: String,
    /// Why, in one sentence; a new reason for the same subject logs again.
    pub reason: String,
}

impl ClusterObjects {
    /// Sorts every list by (namespace, name).
    pub fn sort(&mut self) {
        fn by_key<K>(list: &mut [Arc<Lenient<K>>]) {
            list.sort_by(|a, b| (a.namespace(), a.name()).cmp(&(b.namespace(), b.name())));
        }
        by_key(&mut self.pools);
        by_key(&mut self.machine_configs);
        by_key(&mut self.controller_configs);
        by_key(&mut self.config_maps);
        by_key(&mut self.machine_os_configs);
        by_key(&mut self.machine_os_builds);
        by_key(&mut self.nodes);
        by_key(&mut self.machine_config_nodes);
        by_key(&mut self.services);
        by_key(&mut self.routes);
    }

    /// See [`Fingerprint`]; every object by its resourceVersion.
    pub fn fingerprint(&self) -> Fingerprint {
        let mut out = FingerprintHasher::new();
        add_versions(&mut out, "nodes", &self.nodes);
        add_versions(&mut out, "machineconfignodes", &self.machine_config_nodes);
        self.add_other_versions(&mut out);
        out.finish()
    }

    /// Every kind but Nodes and MachineConfigNodes, by resourceVersion: the part both
    /// fingerprints share (renders read all of these objects).
    fn add_other_versions(&self, out: &mut FingerprintHasher) {
        // What has synced and the gate change what renders answer (503, the layered gate).
        out.add(("synced", &self.synced));
        out.add(("gate", self.gate));
        out.add(("failure_reporting", &self.failure_reporting));
        add_versions(out, "machineconfigpools", &self.pools);
        add_versions(out, "machineconfigs", &self.machine_configs);
        add_versions(out, "controllerconfigs", &self.controller_configs);
        add_versions(out, "configmaps", &self.config_maps);
        add_versions(out, "machineosconfigs", &self.machine_os_configs);
        add_versions(out, "machineosbuilds", &self.machine_os_builds);
        add_versions(out, "services", &self.services);
        add_versions(out, "routes", &self.routes);
    }

    /// Like [`ClusterObjects::fingerprint`], but of what renders read only: Nodes by their
    /// [`node_render_digest`], and only the MachineConfigNodes a render can see
    /// ([`machine_config_node_render_digest`]). Equal render fingerprints (and kubeconfig) mean
    /// equal payloads, so the snapshot keeps its generation and the payload cache its entries
    /// when, say, the publisher creates an MCN, a daemon updates one, or a kubelet a Node's
    /// status. `memo` keeps digests between calls.
    pub fn render_fingerprint(&self, memo: &mut RenderDigests) -> Fingerprint {
        let mut out = FingerprintHasher::new();
        let mut nodes = HashMap::with_capacity(self.nodes.len());
        out.add(("nodes", self.nodes.len()));
        for node in &self.nodes {
            let digest =
                RenderDigests::lookup(&mut memo.nodes, &mut nodes, node, node_render_digest, 0);
            out.add((node.name(), digest));
        }
        memo.nodes = nodes;
        let mut mcns = HashMap::with_capacity(self.machine_config_nodes.len());
        out.add("machineconfignodes");
        for mcn in &self.machine_config_nodes {
            let digest = RenderDigests::lookup(
                &mut memo.machine_config_nodes,
                &mut mcns,
                mcn,
                machine_config_node_render_digest,
                None,
            );
            if let Some(digest) = digest {
                out.add((mcn.name(), digest));
            }
        }
        memo.machine_config_nodes = mcns;
        self.add_other_versions(&mut out);
        out.finish()
    }

    /// `binaryData["ca-bundle.crt"]` of the `kubeconfig-data` ConfigMap (the only one watched).
    pub fn config_map_ca(&self) -> Option<Vec<u8>> {
        self.config_maps.iter().find_map(|cm| {
            let cm = cm.object().ok()?;
            let data = cm.binary_data.as_ref()?.get(CONFIG_MAP_CA_KEY)?;
            Some(data.0.clone())
        })
    }
}

/// Builds the snapshot a render reads from the cache contents and the served kubeconfig.
pub fn build_snapshot(
    objects: &ClusterObjects,
    kubeconfig: Arc<[u8]>,
    generation: u64,
) -> Snapshot {
    Snapshot {
        generation,
        mode: Mode::Cluster,
        pools: loaded_by_name("MachineConfigPool", &objects.pools),
        machine_configs: loaded_by_name("MachineConfig", &objects.machine_configs),
        file_type_meta: Default::default(),
        controller_config: objects
            .controller_configs
            .iter()
            .find(|cc| cc.name() == CONTROLLER_CONFIG_NAME)
            .map(|cc| loaded("ControllerConfig", cc)),
        kubeconfig,
        registry_certs: Vec::new(),
        layered: LayeredInputs {
            machine_os_configs: decoded(&objects.machine_os_configs),
            machine_os_builds: decoded(&objects.machine_os_builds),
            nodes: decoded(&objects.nodes),
            machine_config_nodes: decoded(&objects.machine_config_nodes),
            registry_hosts: registry_hosts(&owned(&objects.services), &owned(&objects.routes)),
            pools: decoded(&objects.pools),
            gate: objects.gate,
        },
        synced: objects.synced.clone(),
        failure_reporting: objects.failure_reporting.clone(),
    }
}

/// What a snapshot built from `objects` cannot serve, or serves without some input: objects
/// that do not decode, pools without a usable rendered config, a missing ControllerConfig.
pub fn problems(objects: &ClusterObjects) -> Vec<Problem> {
    let mut out = Vec::new();
    undecodable(&mut out, "machineconfigpool", &objects.pools);
    undecodable(&mut out, "machineconfig", &objects.machine_configs);
    undecodable(&mut out, "controllerconfig", &objects.controller_configs);
    undecodable(&mut out, "configmap", &objects.config_maps);
    undecodable(&mut out, "machineosconfig", &objects.machine_os_configs);
    undecodable(&mut out, "machineosbuild", &objects.machine_os_builds);
    undecodable(&mut out, "node", &objects.nodes);
    undecodable(&mut out, "machineconfignode", &objects.machine_config_nodes);
    undecodable(&mut out, "service", &objects.services);
    undecodable(&mut out, "route", &objects.routes);

    let known_configs: std::collections::BTreeSet<&str> =
        objects.machine_configs.iter().map(|mc| mc.name()).collect();
    for pool in &objects.pools {
        let Ok(decoded) = pool.object() else { continue };
        let name = decoded.served_config_name();
        let reason = if name.is_empty() {
            "pool has no rendered configuration yet; /config answers 500 until it has".to_owned()
        } else if !known_configs.contains(name) {
            format!(
                "rendered MachineConfig {name:?} does not exist; /config answers 500 until it does"
            )
        } else {
            continue;
        };
        out.push(Problem {
            subject: format!("machineconfigpool/{}", pool.name()),
            reason,
        });
    }

    if !objects
        .controller_configs
        .iter()
        .any(|cc| cc.name() == CONTROLLER_CONFIG_NAME)
    {
        out.push(Problem {
            subject: format!("controllerconfig/{CONTROLLER_CONFIG_NAME}"),
            reason: "ControllerConfig does not exist; /config answers 500 until it does".to_owned(),
        });
    }
    out
}

fn loaded<K>(what: &str, object: &Lenient<K>) -> Result<Arc<K>, LoadError> {
    object
        .object()
        .cloned()
        .map_err(|reason| LoadError::Invalid {
            what: format!("{what} {:?}", object.name()),
            reason: reason.to_string(),
        })
}

fn loaded_by_name<K>(
    what: &str,
    list: &[Arc<Lenient<K>>],
) -> BTreeMap<String, Result<Arc<K>, LoadError>> {
    list.iter()
        .map(|object| (object.name().to_owned(), loaded(what, object)))
        .collect()
}

fn decoded<K>(list: &[Arc<Lenient<K>>]) -> Vec<Arc<K>> {
    list.iter()
        .filter_map(|o| o.object().ok().cloned())
        .collect()
}

/// Copies of the decoded objects (for the few small kinds a pure function takes by value).
fn owned<K: Clone>(list: &[Arc<Lenient<K>>]) -> Vec<K> {
    list.iter()
        .filter_map(|o| o.object().ok().map(|k| K::clone(k)))
        .collect()
}

fn undecodable<K>(out: &mut Vec<Problem>, kind: &str, list: &[Arc<Lenient<K>>]) {
    for object in list {
        if let Err(reason) = object.object() {
            let name = match object.namespace() {
                "" => object.name().to_owned(),
                ns => format!("{ns}/{}", object.name()),
            };
            out.push(Problem {
                subject: format!("{kind}/{name}"),
                reason: format!("cannot be decoded, ignored: {reason}"),
            });
        }
    }
}

/// One kind's objects into a fingerprint: their count, then each by namespace, name and
/// resourceVersion.
fn add_versions<K>(out: &mut FingerprintHasher, kind: &'static str, list: &[Arc<Lenient<K>>]) {
    out.add((kind, list.len()));
    for o in list {
        out.add((o.namespace(), o.name(), o.resource_version()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::cluster::lenient::Decode;

    fn obj<K: Decode>(value: serde_json::Value) -> Arc<Lenient<K>> {
        Arc::new(
            serde_json::from_value(value).expect("lenient decode never fails on valid metadata"),
        )
    }

    fn pool(name: &str, spec: &str, status: &str, updated: i64) -> Arc<Lenient<MachineConfigPool>> {
        obj(serde_json::json!({
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"configuration": {"name": spec}},
            "status": {"configuration": {"name": status}, "updatedMachineCount": updated}
        }))
    }

    fn mc(name: &str) -> Arc<Lenient<MachineConfig>> {
        obj(serde_json::json!({
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"config": {"ignition": {"version": "3.4.0"}}}
        }))
    }

    fn controller_config() -> Arc<Lenient<ControllerConfig>> {
        obj(serde_json::json!({
            "metadata": {"name": CONTROLLER_CONFIG_NAME, "resourceVersion": "3"},
            "spec": {"kubeAPIServerServingCAData": "Y2E=", "clusterDNSIP": "172.30.0.10"}
        }))
    }

    fn base() -> ClusterObjects {
        ClusterObjects {
            pools: vec![pool("worker", "rendered-worker-2", "rendered-worker-1", 0)],
            machine_configs: vec![mc("rendered-worker-1"), mc("rendered-worker-2")],
            controller_configs: vec![controller_config()],
            synced: Input::ALL.into_iter().collect(),
            ..ClusterObjects::default()
        }
    }

    #[test]
    fn what_has_synced_and_the_gate_are_render_inputs() {
        let a = base();
        let mut b = base();
        b.synced.remove(&Input::Nodes);
        assert_ne!(render(&a), render(&b));
        assert_ne!(a.fingerprint(), b.fingerprint());
        let mut c = base();
        c.gate = LayeredGate::PoolUpdatedMachineCount;
        assert_ne!(render(&a), render(&c));
        let snapshot = build_snapshot(&c, Arc::from(&b""[..]), 1);
        assert_eq!(snapshot.layered.gate, LayeredGate::PoolUpdatedMachineCount);
        assert!(snapshot.synced.contains(&Input::Nodes));
        // So is what served configs tell machines about failure reports.
        let mut d = base();
        d.failure_reporting = Some(FailureReporting {
            server_url: Some("https://api-int.example.test:22623".into()),
        });
        assert_ne!(render(&a), render(&d));
        assert_ne!(a.fingerprint(), d.fingerprint());
        let snapshot = build_snapshot(&d, Arc::from(&b""[..]), 1);
        assert_eq!(snapshot.failure_reporting, d.failure_reporting);
    }

    #[test]
    fn snapshot_holds_pools_configs_and_controller_config() {
        let snapshot = build_snapshot(&base(), Arc::from(&b"kc"[..]), 7);
        assert_eq!(snapshot.generation, 7);
        assert_eq!(snapshot.mode, Mode::Cluster);
        assert_eq!(&*snapshot.kubeconfig, b"kc");
        let worker = snapshot.pools["worker"].as_ref().expect("valid pool");
        assert_eq!(worker.served_config_name(), "rendered-worker-1");
        assert!(snapshot.machine_configs.contains_key("rendered-worker-2"));
        let cc = snapshot.controller_config.expect("present").expect("valid");
        assert_eq!(
            cc.spec.kube_api_server_serving_ca().expect("base64"),
            Some(b"ca".to_vec())
        );
        assert!(problems(&base()).is_empty());
    }

    #[test]
    fn broken_objects_fail_alone_with_a_reason() {
        let mut objects = base();
        objects.machine_configs.push(obj(serde_json::json!({
            "metadata": {"name": "rendered-infra-1"},
            "spec": {"kernelArguments": 5}
        })));
        let snapshot = build_snapshot(&objects, Arc::from(&b""[..]), 1);
        assert!(snapshot.machine_configs["rendered-worker-1"].is_ok());
        match &snapshot.machine_configs["rendered-infra-1"] {
            Err(LoadError::Invalid { what, .. }) => assert!(what.contains("rendered-infra-1")),
            other => panic!("expected invalid, got {other:?}"),
        }
        let found = problems(&objects);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].subject, "machineconfig/rendered-infra-1");
    }

    #[test]
    fn pools_without_a_usable_rendered_config_are_problems() {
        let mut objects = base();
        objects.pools = vec![
            pool("worker", "rendered-worker-3", "rendered-worker-1", 1),
            pool("infra", "", "", 0),
        ];
        let found = problems(&objects);
        let subjects: Vec<&str> = found.iter().map(|p| p.subject.as_str()).collect();
        assert_eq!(
            subjects,
            ["machineconfigpool/worker", "machineconfigpool/infra"]
        );
        assert!(found[0].reason.contains("rendered-worker-3"));
    }

    #[test]
    fn missing_controller_config_is_a_problem_and_absent_from_the_snapshot() {
        let mut objects = base();
        objects.controller_configs.clear();
        assert!(build_snapshot(&objects, Arc::from(&b""[..]), 1)
            .controller_config
            .is_none());
        assert_eq!(
            problems(&objects)[0].subject,
            "controllerconfig/machine-config-controller"
        );
    }

    #[test]
    fn registry_hosts_come_from_services_and_routes() {
        let services: Vec<Arc<Lenient<Service>>> = vec![
            obj(serde_json::json!({
                "metadata": {"name": "image-registry", "namespace": "openshift-image-registry"},
                "spec": {"ports": [{"port": 5000}, {"port": 5001}]}
            })),
            obj(serde_json::json!({
                "metadata": {"name": "headless", "namespace": "openshift-image-registry"},
                "spec": {}
            })),
        ];
        let routes: Vec<Arc<Lenient<Route>>> = vec![
            obj(serde_json::json!({
                "metadata": {"name": "default-route", "namespace": "openshift-image-registry"},
                "spec": {"host": "default-route-openshift-image-registry.apps.example.com"}
            })),
            obj(serde_json::json!({
                "metadata": {"name": "no-host", "namespace": "openshift-image-registry"},
                "spec": {}
            })),
        ];
        let objects = ClusterObjects {
            services,
            routes,
            ..base()
        };
        let snapshot = build_snapshot(&objects, Arc::from(&b""[..]), 1);
        assert_eq!(
            snapshot.layered.registry_hosts,
            [
                "default-route-openshift-image-registry.apps.example.com",
                "headless.openshift-image-registry.svc",
                "image-registry.openshift-image-registry.svc:5000",
            ]
        );
    }

    #[test]
    fn fingerprint_changes_only_with_resource_versions() {
        let a = base();
        let b = base();
        assert_eq!(a.fingerprint(), b.fingerprint());
        let mut c = base();
        c.pools = vec![obj(serde_json::json!({
            "metadata": {"name": "worker", "resourceVersion": "2"},
            "spec": {}
        }))];
        assert_ne!(a.fingerprint(), c.fingerprint());
    }

    fn render(objects: &ClusterObjects) -> Fingerprint {
        objects.render_fingerprint(&mut RenderDigests::default())
    }

    #[test]
    fn node_status_changes_do_not_change_the_render_fingerprint() {
        let node = |rv: &str, ready: &str, role: &str| -> Arc<Lenient<Node>> {
            obj(serde_json::json!({
                "metadata": {"name": "w1", "resourceVersion": rv,
                             "labels": {"node-role.kubernetes.io/worker": role}},
                "status": {"conditions": [{"type": "Ready", "status": ready}],
                           "addresses": [{"type": "InternalIP", "address": format!("10.0.0.{rv}")}]}
            }))
        };
        let with = |n| ClusterObjects {
            nodes: vec![n],
            ..base()
        };
        let (first, heartbeat) = (with(node("1", "True", "")), with(node("2", "False", "")));
        assert_ne!(first.fingerprint(), heartbeat.fingerprint());
        assert_eq!(render(&first), render(&heartbeat));
        assert_ne!(render(&first), render(&with(node("3", "False", "x"))));
    }

    #[test]
    fn render_digests_are_remembered_per_resource_version() {
        let node = |rv: &str, role: &str| -> Arc<Lenient<Node>> {
            obj(serde_json::json!({
                "metadata": {"name": "w1", "resourceVersion": rv,
                             "labels": {"node-role.kubernetes.io/worker": role}}
            }))
        };
        let with = |n| ClusterObjects {
            nodes: vec![n],
            ..base()
        };
        let mut memo = RenderDigests::default();
        let first = with(node("1", "")).render_fingerprint(&mut memo);
        assert_eq!(first, with(node("1", "")).render_fingerprint(&mut memo));
        let relabelled = with(node("2", "x")).render_fingerprint(&mut memo);
        assert_ne!(first, relabelled);
        assert_eq!(relabelled, render(&with(node("2", "x"))));
        // A deleted Node leaves the memo.
        base().render_fingerprint(&mut memo);
        assert!(memo.nodes.is_empty());
    }

    #[test]
    fn publisher_writes_keep_the_render_fingerprint() {
        let mcn = |name: &str,
                   rv: &str,
                   image: Option<&str>,
                   updated: &str|
         -> Arc<Lenient<MachineConfigNode>> {
            let mut status = serde_json::json!({
                "conditions": [{"type": "Updated", "status": updated, "reason": "r", "message": "",
                                "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            });
            if let Some(image) = image {
                status["configImage"] = serde_json::json!({"currentImage": image});
            }
            obj(serde_json::json!({
                "metadata": {"name": name, "resourceVersion": rv},
                "spec": {"node": {"name": name}, "pool": {"name": "worker"}, "configVersion": {"desired": "x"}},
                "status": status
            }))
        };
        let with = |m: Vec<Arc<Lenient<MachineConfigNode>>>| ClusterObjects {
            machine_config_nodes: m,
            ..base()
        };
        let first = with(vec![mcn("w1", "1", None, "True")]);
        let daemon_wrote = with(vec![mcn("w1", "2", None, "False")]);
        let created = with(vec![
            mcn("w1", "2", None, "False"),
            mcn("w2", "3", None, "True"),
        ]);
        assert_ne!(first.fingerprint(), daemon_wrote.fingerprint());
        assert_eq!(render(&first), render(&daemon_wrote));
        assert_eq!(render(&first), render(&created));
        let new_image = with(vec![mcn("w1", "4", Some("quay.io/x@sha256:1"), "True")]);
        assert_ne!(render(&first), render(&new_image));
    }

    #[test]
    fn config_map_ca_is_read_from_binary_data() {
        let mut objects = base();
        assert_eq!(objects.config_map_ca(), None);
        objects.config_maps.push(obj(serde_json::json!({
            "metadata": {"name": "kubeconfig-data", "namespace": "openshift-machine-config-operator"},
            "binaryData": {"ca-bundle.crt": "Y20tY2E="}
        })));
        assert_eq!(objects.config_map_ca(), Some(b"cm-ca".to_vec()));
    }
}
