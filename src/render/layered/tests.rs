//! Table tests of the layered-image decision, on objects shaped like the real CRDs
//! (`shared/crds/`) and the `layered-worker` pool of the realistic bootstrap fixture.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};

use super::*;
use crate::api::imagebuild::Route;

const POOL: &str = "layered-worker";
const RENDERED: &str = "rendered-layered-worker-4a23d8fb65153ffa640ed631d46a8aa0";
const PREVIOUS_RENDERED: &str = "rendered-layered-worker-0c1f2e3d4c5b6a798877665544332211";
const IMAGE: &str = "quay.io/example/layered-rhcos@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const OLDER_IMAGE: &str = "quay.io/example/layered-rhcos@sha256:2222222222222222222222222222222222222222222222222222222222222222";
const INTERNAL_IMAGE: &str = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/ocb-layered-worker@sha256:3333333333333333333333333333333333333333333333333333333333333333";
const ROUTE_IMAGE: &str = "default-route-openshift-image-registry.apps.ci.example.com/openshift-machine-config-operator/ocb-layered-worker@sha256:4444444444444444444444444444444444444444444444444444444444444444";
const HEADLESS_IMAGE: &str = "registry-headless.openshift-image-registry.svc:443/openshift-machine-config-operator/ocb@sha256:5555555555555555555555555555555555555555555555555555555555555555";

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    match serde_yaml::from_str(text) {
        Ok(value) => value,
        Err(e) => panic!("test object does not deserialize: {e}\n{text}"),
    }
}

/// A MachineConfigPool like the fixture's, selecting `node-role.kubernetes.io/<role>`.
fn pool(name: &str, updated_machine_count: i64) -> MachineConfigPool {
    yaml(&format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: {name}
spec:
  configuration:
    name: rendered-{name}-new
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: {name}
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/{name}: ""
  paused: false
status:
  configuration:
    name: rendered-{name}-old
  machineCount: 3
  updatedMachineCount: {updated_machine_count}
  readyMachineCount: 0
  unavailableMachineCount: 0
  degradedMachineCount: 0
"#
    ))
}

fn mosc(name: &str, pool: &str, current_image: Option<&str>) -> Arc<MachineOSConfig> {
    let status = match current_image {
        Some(image) => format!(
            r#"
status:
  observedGeneration: 1
  currentImagePullSpec: "{image}"
  machineOSBuild:
    group: machineconfiguration.openshift.io
    resource: machineosbuilds
    name: {name}-newest
  conditions:
  - type: Degraded
    status: "False"
    reason: AsExpected
    message: ""
    lastTransitionTime: "2025-05-01T10:00:00Z""#
        ),
        None => String::new(),
    };
    Arc::new(yaml(&format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: {name}
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
{status}
"#
    )))
}

#[derive(Clone, Copy)]
enum Build<'a> {
    NoStatus,
    Prepared,
    Building,
    Failed,
    Interrupted,
    /// `Succeeded=True` but the digest is not recorded yet.
    SucceededNoDigest,
    Succeeded(&'a str),
}

fn condition(kind: &str, on: bool) -> String {
    let status = if on { "True" } else { "False" };
    format!(
        r#"
  - type: {kind}
    status: "{status}"
    reason: {kind}
    message: ""
    lastTransitionTime: "2025-05-01T10:05:00Z""#
    )
}

fn mosb(
    name: &str,
    mosc: &str,
    rendered: &str,
    created: &str,
    state: Build,
) -> Arc<MachineOSBuild> {
    let flags = |prepared, building, succeeded, failed, interrupted| {
        [
            condition("Prepared", prepared),
            condition("Building", building),
            condition("Succeeded", succeeded),
            condition("Failed", failed),
            condition("Interrupted", interrupted),
        ]
        .concat()
    };
    let (conditions, digest) = match state {
        Build::NoStatus => (None, None),
        Build::Prepared => (Some(flags(true, false, false, false, false)), None),
        Build::Building => (Some(flags(false, true, false, false, false)), None),
        Build::Failed => (Some(flags(false, false, false, true, false)), None),
        Build::Interrupted => (Some(flags(false, false, false, false, true)), None),
        Build::SucceededNoDigest => (Some(flags(false, false, true, false, false)), None),
        Build::Succeeded(image) => (Some(flags(false, false, true, false, false)), Some(image)),
    };
    let status = match conditions {
        None => String::new(),
        Some(conditions) => format!(
            r#"
status:
  buildStart: "2025-05-01T10:01:00Z"
  builder:
    imageBuilderType: Job
    job:
      group: batch
      resource: jobs
      namespace: openshift-machine-config-operator
      name: build-{name}
  conditions:{conditions}
{digest}"#,
            digest = digest
                .map(|image| format!("  digestedImagePushSpec: \"{image}\""))
                .unwrap_or_default()
        ),
    };
    Arc::new(yaml(&format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSBuild
metadata:
  name: {name}
  creationTimestamp: "{created}"
  labels:
    machineconfiguration.openshift.io/machine-os-config: {mosc}
    machineconfiguration.openshift.io/target-machine-config-pool: {POOL}
spec:
  machineConfig:
    name: {rendered}
  machineOSConfig:
    name: {mosc}
  renderedImagePushSpec: quay.io/example/layered-rhcos:latest
{status}
"#
    )))
}

/// A Node with the given role labels, current image annotation and daemon state.
fn node(name: &str, roles: &[&str], current_image: Option<&str>, state: &str) -> Arc<Node> {
    let labels: String = roles
        .iter()
        .map(|role| format!("\n    node-role.kubernetes.io/{role}: \"\""))
        .collect();
    let image = current_image
        .map(|image| {
            format!(
                "\n    machineconfiguration.openshift.io/currentImage: \"{image}\"\n    machineconfiguration.openshift.io/desiredImage: \"{image}\""
            )
        })
        .unwrap_or_default();
    Arc::new(yaml(&format!(
        r#"
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    kubernetes.io/hostname: {name}
    kubernetes.io/os: linux{labels}
  annotations:
    machineconfiguration.openshift.io/currentConfig: {RENDERED}
    machineconfiguration.openshift.io/desiredConfig: {RENDERED}
    machineconfiguration.openshift.io/state: {state}
    machineconfiguration.openshift.io/reason: ""{image}
status:
  nodeInfo:
    osImage: Red Hat Enterprise Linux CoreOS 9.6
"#
    )))
}

fn mcn(node: &str, current_image: Option<&str>, degraded: bool) -> Arc<MachineConfigNode> {
    let image = current_image
        .map(|image| {
            format!(
                "\n  configImage:\n    currentImage: \"{image}\"\n    desiredImage: \"{image}\""
            )
        })
        .unwrap_or_default();
    let degraded = if degraded { "True" } else { "False" };
    Arc::new(yaml(&format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigNode
metadata:
  name: {node}
spec:
  node:
    name: {node}
  pool:
    name: {POOL}
  configVersion:
    desired: {RENDERED}
status:
  observedGeneration: 2
  configVersion:
    current: {RENDERED}
    desired: {RENDERED}{image}
  conditions:
  - type: Updated
    status: "True"
    reason: Updated
    message: ""
    lastTransitionTime: "2025-05-01T11:00:00Z"
  - type: NodeDegraded
    status: "{degraded}"
    reason: NodeDegraded
    message: ""
    lastTransitionTime: "2025-05-01T11:00:00Z"
"#
    )))
}

fn service(name: &str, port: Option<i32>) -> Service {
    let ports = port
        .map(|port| {
            format!("  ports:\n  - name: {port}-tcp\n    port: {port}\n    protocol: TCP\n")
        })
        .unwrap_or_default();
    yaml(&format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: openshift-image-registry\nspec:\n  clusterIP: 172.30.0.50\n{ports}"
    ))
}

fn route(host: &str) -> Route {
    yaml(&format!(
        "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata:\n  name: default-route\n  namespace: openshift-image-registry\nspec:\n  host: {host}\n  to:\n    kind: Service\n    name: image-registry\n"
    ))
}

/// The registry of a typical cluster: the image-registry Service, a port-less Service and the
/// default Route.
fn cluster_registry_hosts() -> Vec<String> {
    registry_hosts(
        &[
            service("image-registry", Some(5000)),
            service("registry-headless", None),
        ],
        &[route(
            "default-route-openshift-image-registry.apps.ci.example.com",
        )],
    )
}

/// The common starting point: pool `layered-worker` with its MOSC (image ready), the other
/// pools of a cluster, and the in-cluster registry hosts. Each case adds builds and nodes.
fn base_inputs() -> LayeredInputs {
    LayeredInputs {
        machine_os_configs: vec![mosc(POOL, POOL, Some(IMAGE))],
        pools: ["master", "worker", POOL]
            .iter()
            .map(|name| Arc::new(pool(name, 0)))
            .collect(),
        registry_hosts: cluster_registry_hosts(),
        ..LayeredInputs::default()
    }
}

const T1: &str = "2025-05-01T10:00:00Z";
const T2: &str = "2025-05-02T10:00:00Z";

fn succeeded(image: &str) -> Vec<Arc<MachineOSBuild>> {
    vec![mosb(
        "layered-worker-build-a",
        POOL,
        RENDERED,
        T1,
        Build::Succeeded(image),
    )]
}

fn done_node(image: &str) -> Vec<Arc<Node>> {
    vec![node("worker-0", &["worker", POOL], Some(image), "Done")]
}

struct Case {
    name: &'static str,
    inputs: LayeredInputs,
    reason: DecisionReason,
    image: Option<&'static str>,
    build: Option<&'static str>,
}

fn with(f: impl FnOnce(&mut LayeredInputs)) -> LayeredInputs {
    let mut inputs = base_inputs();
    f(&mut inputs);
    inputs
}

fn cases() -> Vec<Case> {
    use DecisionReason::*;
    vec![
        Case {
            name: "no MachineOSConfig: not layered",
            inputs: with(|i| {
                i.machine_os_configs.clear();
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = done_node(IMAGE);
            }),
            reason: NotLayered,
            image: None,
            build: None,
        },
        Case {
            name: "MachineOSConfig named like the pool but pointing at another pool",
            inputs: with(|i| {
                i.machine_os_configs = vec![mosc(POOL, "infra", Some(IMAGE))];
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = done_node(IMAGE);
            }),
            reason: NotLayered,
            image: None,
            build: None,
        },
        Case {
            name: "MachineOSConfig without status: no image yet",
            inputs: with(|i| {
                i.machine_os_configs = vec![mosc(POOL, POOL, None)];
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = done_node(IMAGE);
            }),
            reason: NoImageYet,
            image: None,
            build: None,
        },
        Case {
            name: "MachineOSConfig with an empty image: no image yet",
            inputs: with(|i| {
                i.machine_os_configs = vec![mosc(POOL, POOL, Some(""))];
                i.machine_os_builds = succeeded(IMAGE);
            }),
            reason: NoImageYet,
            image: None,
            build: None,
        },
        Case {
            name: "only a build of the previous rendered config",
            inputs: with(|i| {
                i.machine_os_builds = vec![mosb(
                    "old",
                    POOL,
                    PREVIOUS_RENDERED,
                    T1,
                    Build::Succeeded(IMAGE),
                )];
                i.nodes = done_node(IMAGE);
            }),
            reason: NoBuildForConfig,
            image: None,
            build: None,
        },
        Case {
            name: "only a build of another MachineOSConfig",
            inputs: with(|i| {
                i.machine_os_builds = vec![mosb(
                    "infra-build",
                    "infra",
                    RENDERED,
                    T1,
                    Build::Succeeded(IMAGE),
                )];
                i.nodes = done_node(IMAGE);
            }),
            reason: NoBuildForConfig,
            image: None,
            build: None,
        },
        Case {
            name: "build without status is pending",
            inputs: with(|i| {
                i.machine_os_builds = vec![mosb("b", POOL, RENDERED, T1, Build::NoStatus)]
            }),
            reason: BuildPending,
            image: None,
            build: Some("b"),
        },
        Case {
            name: "prepared build is pending",
            inputs: with(|i| {
                i.machine_os_builds = vec![mosb("b", POOL, RENDERED, T1, Build::Prepared)]
            }),
            reason: BuildPending,
            image: None,
            build: Some("b"),
        },
        Case {
            name: "succeeded without a digest is still pending",
            inputs: with(|i| {
                i.machine_os_builds = vec![mosb("b", POOL, RENDERED, T1, Build::SucceededNoDigest)];
                i.nodes = done_node(IMAGE);
            }),
            reason: BuildPending,
            image: None,
            build: Some("b"),
        },
        Case {
            name: "running build",
            inputs: with(|i| {
                i.machine_os_builds = vec![mosb("b", POOL, RENDERED, T1, Build::Building)]
            }),
            reason: BuildBuilding,
            image: None,
            build: Some("b"),
        },
        Case {
            name: "failed build",
            inputs: with(|i| {
                i.machine_os_builds = vec![mosb("b", POOL, RENDERED, T1, Build::Failed)]
            }),
            reason: BuildFailed,
            image: None,
            build: Some("b"),
        },
        Case {
            name: "interrupted build",
            inputs: with(|i| {
                i.machine_os_builds = vec![mosb("b", POOL, RENDERED, T1, Build::Interrupted)]
            }),
            reason: BuildInterrupted,
            image: None,
            build: Some("b"),
        },
        Case {
            name: "build succeeded, pool has no node",
            inputs: with(|i| i.machine_os_builds = succeeded(IMAGE)),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "updatedMachineCount > 0 is not proof",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.pools = vec![Arc::new(pool(POOL, 3))];
                i.nodes = vec![node("worker-0", &[POOL], None, "Done")];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "one node of the pool updated to the image (node annotation)",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = vec![
                    node("worker-0", &["worker", POOL], Some(IMAGE), "Done"),
                    node("worker-1", &["worker", POOL], None, "Working"),
                ];
            }),
            reason: Validated,
            image: Some(IMAGE),
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "one node of the pool updated to the image (MachineConfigNode status)",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = vec![node("worker-0", &[POOL], Some(OLDER_IMAGE), "Done")];
                i.machine_config_nodes = vec![mcn("worker-0", Some(IMAGE), false)];
            }),
            reason: Validated,
            image: Some(IMAGE),
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "a node of the pool at an older image of the same pool",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = vec![node(
                    "worker-0",
                    &["worker", POOL],
                    Some(OLDER_IMAGE),
                    "Done",
                )];
                i.machine_config_nodes = vec![mcn("worker-0", Some(OLDER_IMAGE), false)];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "a node of another pool reports the image",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = vec![node("worker-9", &["worker"], Some(IMAGE), "Done")];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "a master that also carries the pool's label belongs to master",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = vec![node("master-0", &["master", POOL], Some(IMAGE), "Done")];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "a node claimed by two custom pools belongs to none",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.pools.push(Arc::new(pool("infra", 0)));
                i.nodes = vec![node(
                    "worker-0",
                    &["worker", "infra", POOL],
                    Some(IMAGE),
                    "Done",
                )];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "without the pool list a node is judged by the pool's own selector",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.pools.clear();
                i.nodes = done_node(IMAGE);
            }),
            reason: Validated,
            image: Some(IMAGE),
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "node at the image but mid-update",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = vec![node("worker-0", &[POOL], Some(IMAGE), "Working")];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "node at the image but degraded",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = vec![node("worker-0", &[POOL], Some(IMAGE), "Degraded")];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "node at the image but unreconcilable",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = vec![node("worker-0", &[POOL], Some(IMAGE), "Unreconcilable")];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "node Done by annotation but its MachineConfigNode is degraded",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = vec![node("worker-0", &[POOL], Some(IMAGE), "Done")];
                i.machine_config_nodes = vec![mcn("worker-0", Some(IMAGE), true)];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "two builds of the config: older validated, newer not",
            inputs: with(|i| {
                i.machine_os_builds = vec![
                    mosb(
                        "layered-worker-build-new",
                        POOL,
                        RENDERED,
                        T2,
                        Build::Succeeded(IMAGE),
                    ),
                    mosb(
                        "layered-worker-build-old",
                        POOL,
                        RENDERED,
                        T1,
                        Build::Succeeded(OLDER_IMAGE),
                    ),
                ];
                i.nodes = done_node(OLDER_IMAGE);
            }),
            reason: Validated,
            image: Some(OLDER_IMAGE),
            build: Some("layered-worker-build-old"),
        },
        Case {
            name: "two builds of the config, both validated: the newest wins",
            inputs: with(|i| {
                i.machine_os_builds = vec![
                    mosb(
                        "layered-worker-build-old",
                        POOL,
                        RENDERED,
                        T1,
                        Build::Succeeded(OLDER_IMAGE),
                    ),
                    mosb(
                        "layered-worker-build-new",
                        POOL,
                        RENDERED,
                        T2,
                        Build::Succeeded(IMAGE),
                    ),
                ];
                i.nodes = vec![
                    node("worker-0", &[POOL], Some(OLDER_IMAGE), "Done"),
                    node("worker-1", &[POOL], Some(IMAGE), "Done"),
                ];
            }),
            reason: Validated,
            image: Some(IMAGE),
            build: Some("layered-worker-build-new"),
        },
        Case {
            name: "two builds, none validated: explained by the newest succeeded",
            inputs: with(|i| {
                i.machine_os_builds = vec![
                    mosb(
                        "layered-worker-build-old",
                        POOL,
                        RENDERED,
                        T1,
                        Build::Succeeded(OLDER_IMAGE),
                    ),
                    mosb(
                        "layered-worker-build-new",
                        POOL,
                        RENDERED,
                        T2,
                        Build::Succeeded(IMAGE),
                    ),
                ];
            }),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-new"),
        },
        Case {
            name: "same timestamp: the greater name is newer",
            inputs: with(|i| {
                i.machine_os_builds = vec![
                    mosb(
                        "layered-worker-build-b",
                        POOL,
                        RENDERED,
                        T1,
                        Build::Succeeded(IMAGE),
                    ),
                    mosb(
                        "layered-worker-build-a",
                        POOL,
                        RENDERED,
                        T1,
                        Build::Succeeded(OLDER_IMAGE),
                    ),
                ];
                i.nodes = vec![
                    node("worker-0", &[POOL], Some(OLDER_IMAGE), "Done"),
                    node("worker-1", &[POOL], Some(IMAGE), "Done"),
                ];
            }),
            reason: Validated,
            image: Some(IMAGE),
            build: Some("layered-worker-build-b"),
        },
        Case {
            name: "newest build failed, an older one is validated",
            inputs: with(|i| {
                i.machine_os_builds = vec![
                    mosb(
                        "layered-worker-build-new",
                        POOL,
                        RENDERED,
                        T2,
                        Build::Failed,
                    ),
                    mosb(
                        "layered-worker-build-old",
                        POOL,
                        RENDERED,
                        T1,
                        Build::Succeeded(OLDER_IMAGE),
                    ),
                ];
                i.nodes = done_node(OLDER_IMAGE);
            }),
            reason: Validated,
            image: Some(OLDER_IMAGE),
            build: Some("layered-worker-build-old"),
        },
        Case {
            name: "the MachineOSConfig's image may differ from the served build's",
            inputs: with(|i| {
                i.machine_os_configs = vec![mosc(
                    POOL,
                    POOL,
                    Some("quay.io/example/layered-rhcos@sha256:newer-render"),
                )];
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = done_node(IMAGE);
            }),
            reason: Validated,
            image: Some(IMAGE),
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "a second MachineOSConfig for the pool: the one named like the pool wins",
            inputs: with(|i| {
                i.machine_os_configs
                    .insert(0, mosc("a-stray", POOL, Some(IMAGE)));
                i.machine_os_builds = vec![
                    mosb("stray-build", "a-stray", RENDERED, T2, Build::Failed),
                    mosb(
                        "layered-worker-build-a",
                        POOL,
                        RENDERED,
                        T1,
                        Build::Succeeded(IMAGE),
                    ),
                ];
                i.nodes = done_node(IMAGE);
            }),
            reason: Validated,
            image: Some(IMAGE),
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "validated image in the in-cluster registry (service with port)",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(INTERNAL_IMAGE);
                i.nodes = done_node(INTERNAL_IMAGE);
            }),
            reason: InClusterRegistry,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "validated image in the in-cluster registry (service without ports)",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(HEADLESS_IMAGE);
                i.nodes = done_node(HEADLESS_IMAGE);
            }),
            reason: InClusterRegistry,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "validated image behind the registry route",
            inputs: with(|i| {
                i.machine_os_builds = succeeded(ROUTE_IMAGE);
                i.nodes = done_node(ROUTE_IMAGE);
            }),
            reason: InClusterRegistry,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "registry image is not validated yet: validation is reported first",
            inputs: with(|i| i.machine_os_builds = succeeded(INTERNAL_IMAGE)),
            reason: NotValidated,
            image: None,
            build: Some("layered-worker-build-a"),
        },
        Case {
            name: "internal image is served when no registry hosts are known",
            inputs: with(|i| {
                i.registry_hosts.clear();
                i.machine_os_builds = succeeded(INTERNAL_IMAGE);
                i.nodes = done_node(INTERNAL_IMAGE);
            }),
            reason: Validated,
            image: Some(INTERNAL_IMAGE),
            build: Some("layered-worker-build-a"),
        },
    ]
}

#[test]
fn decision_table() {
    let pool = pool(POOL, 1);
    let mut failures = Vec::new();
    for case in cases() {
        let decision = decide(&pool, RENDERED, &case.inputs);
        let got = (
            decision.reason,
            decision.image.as_deref(),
            decision.machine_os_build.as_deref(),
        );
        let want = (case.reason, case.image, case.build);
        if got != want {
            failures.push(format!("{}: got {got:?}, want {want:?}", case.name));
        }
        // Invariants of every decision.
        assert_eq!(
            decision.image.is_some(),
            decision.reason == DecisionReason::Validated,
            "{}",
            case.name
        );
        assert_eq!(
            decision.decision(),
            if decision.image.is_some() {
                "layered"
            } else {
                "base"
            },
            "{}",
            case.name
        );
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The original's gate (the server may not read Nodes): `(pool's updatedMachineCount,
/// inputs, reason, image served)`.
fn original_gate_cases() -> Vec<(
    &'static str,
    i64,
    LayeredInputs,
    DecisionReason,
    Option<&'static str>,
)> {
    use DecisionReason::*;
    let original = |f: &dyn Fn(&mut LayeredInputs)| {
        with(|i| {
            i.gate = LayeredGate::PoolUpdatedMachineCount;
            f(i);
        })
    };
    vec![
        (
            "a machine of the pool updated: the MachineOSConfig's image, no node needed",
            1,
            original(&|i| {
                // The build's digest differs: the original serves the MachineOSConfig's image.
                i.machine_os_builds = succeeded(OLDER_IMAGE);
            }),
            PoolUpdated,
            Some(IMAGE),
        ),
        (
            "no machine of the pool updated: held, although a node runs the image",
            0,
            original(&|i| {
                i.machine_os_builds = succeeded(IMAGE);
                i.nodes = done_node(IMAGE);
            }),
            PoolNotUpdated,
            None,
        ),
        (
            "updated, but the image is in the in-cluster registry",
            1,
            original(&|i| {
                i.machine_os_configs = vec![mosc(POOL, POOL, Some(INTERNAL_IMAGE))];
                i.machine_os_builds = succeeded(INTERNAL_IMAGE);
            }),
            InClusterRegistry,
            None,
        ),
        (
            "updated, but no build of the rendered config succeeded",
            1,
            original(&|i| {
                i.machine_os_builds = vec![mosb(
                    "layered-worker-build-a",
                    POOL,
                    RENDERED,
                    T1,
                    Build::Building,
                )];
            }),
            BuildBuilding,
            None,
        ),
    ]
}

#[test]
fn the_original_gate_serves_what_the_original_serves() {
    for (name, updated, inputs, reason, image) in original_gate_cases() {
        let decision = decide(&pool(POOL, updated), RENDERED, &inputs);
        assert_eq!(decision.reason, reason, "{name}");
        assert_eq!(decision.image.as_deref(), image, "{name}");
        assert_eq!(
            decision.validated_by, None,
            "{name}: no node proves anything"
        );
        let since = not_validated_since(&decision, RENDERED, &inputs);
        assert_eq!(
            since.is_some(),
            reason == DecisionReason::PoolNotUpdated,
            "{name}"
        );
    }
}

#[test]
fn every_reason_is_covered_by_the_table() {
    let pool_of = |updated| pool(POOL, updated);
    let seen: std::collections::BTreeSet<DecisionReason> = cases()
        .iter()
        .map(|case| decide(&pool_of(1), RENDERED, &case.inputs).reason)
        .chain(
            original_gate_cases()
                .into_iter()
                .map(|(_, updated, inputs, _, _)| {
                    decide(&pool_of(updated), RENDERED, &inputs).reason
                }),
        )
        .collect();
    for reason in DecisionReason::ALL {
        assert!(seen.contains(&reason), "no case yields {reason}");
    }
}

#[test]
fn explanation_names_the_objects() {
    let inputs = with(|i| {
        i.machine_os_builds = succeeded(INTERNAL_IMAGE);
        i.nodes = done_node(INTERNAL_IMAGE);
    });
    let decision = decide(&pool(POOL, 1), RENDERED, &inputs);
    assert_eq!(
        decision,
        LayeredDecision {
            image: None,
            reason: DecisionReason::InClusterRegistry,
            machine_os_config: Some(POOL.into()),
            machine_os_build: Some("layered-worker-build-a".into()),
            build_image: Some(INTERNAL_IMAGE.into()),
            validated_by: Some("worker-0".into()),
        }
    );
}

#[test]
fn a_pool_without_a_usable_selector_has_no_members() {
    let mut unselective = pool(POOL, 1);
    unselective.spec.node_selector = Some(serde_json::json!({}));
    let inputs = with(|i| {
        i.machine_os_builds = succeeded(IMAGE);
        i.pools.clear();
        i.nodes = done_node(IMAGE);
    });
    assert_eq!(
        decide(&unselective, RENDERED, &inputs).reason,
        DecisionReason::NotValidated
    );
    unselective.spec.node_selector = None;
    assert_eq!(
        decide(&unselective, RENDERED, &inputs).reason,
        DecisionReason::NotValidated
    );
}

#[test]
fn the_rendered_config_selects_the_build() {
    let inputs = with(|i| {
        i.machine_os_builds = vec![
            mosb("build-current", POOL, RENDERED, T2, Build::Building),
            mosb(
                "build-previous",
                POOL,
                PREVIOUS_RENDERED,
                T1,
                Build::Succeeded(OLDER_IMAGE),
            ),
        ];
        i.nodes = done_node(OLDER_IMAGE);
    });
    let pool = pool(POOL, 0);
    let current = decide(&pool, RENDERED, &inputs);
    assert_eq!(current.reason, DecisionReason::BuildBuilding);
    let previous = decide(&pool, PREVIOUS_RENDERED, &inputs);
    assert_eq!(previous.reason, DecisionReason::Validated);
    assert_eq!(previous.image.as_deref(), Some(OLDER_IMAGE));
}

#[test]
fn reason_labels_are_stable() {
    let labels: Vec<(&str, &str)> = DecisionReason::ALL
        .iter()
        .map(|r| (r.as_str(), r.decision()))
        .collect();
    assert_eq!(
        labels,
        vec![
            ("not_layered", "base"),
            ("no_image_yet", "base"),
            ("no_build_for_config", "base"),
            ("build_pending", "base"),
            ("build_building", "base"),
            ("build_failed", "base"),
            ("build_interrupted", "base"),
            ("not_validated", "base"),
            ("pool_not_updated", "base"),
            ("in_cluster_registry", "base"),
            ("validated", "layered"),
            ("pool_updated", "layered"),
        ]
    );
    for reason in DecisionReason::ALL {
        assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
    }
}

/// The rendered MachineConfig of the fixture's `layered-worker` pool (metadata and the fields
/// the rule reads), optionally annotated with a pre-built image as install-time image mode does.
fn rendered_mc(pre_built_image: Option<&str>) -> MachineConfig {
    let annotation = pre_built_image
        .map(|image| {
            format!("\n    machineconfiguration.openshift.io/pre-built-image: \"{image}\"")
        })
        .unwrap_or_default();
    yaml(&format!(
        r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  annotations:
    machineconfiguration.openshift.io/generated-by-controller-version: was-not-built-properly
    machineconfiguration.openshift.io/os-image-url-overridden: "true"
    machineconfiguration.openshift.io/release-image-version: ""{annotation}
  name: {RENDERED}
  ownerReferences:
  - apiVersion: machineconfiguration.openshift.io/v1
    blockOwnerDeletion: true
    controller: true
    kind: MachineConfigPool
    name: layered-worker
    uid: ""
spec:
  baseOSExtensionsContainerImage: ""
  config:
    ignition:
      version: 3.5.0
  extensions: []
  fips: false
  kernelArguments: []
  kernelType: default
  osImageURL: quay.io/example/layered-rhcos:latest@sha256:abcd1234567890abcdef1234567890abcdef1234567890abcdef1234567890ab
"#
    ))
}

const PRE_BUILT: &str = "quay.io/example/layered-rhcos:latest@sha256:abcd1234567890abcdef1234567890abcdef1234567890abcdef1234567890ab";

#[test]
fn pre_built_image_annotation_wins_for_node_annotations() {
    let served = decide(
        &pool(POOL, 1),
        RENDERED,
        &with(|i| {
            i.machine_os_builds = succeeded(IMAGE);
            i.nodes = done_node(IMAGE);
        }),
    );
    assert_eq!(served.image.as_deref(), Some(IMAGE));
    let base = decide(
        &pool(POOL, 1),
        RENDERED,
        &with(|i| i.machine_os_builds = succeeded(IMAGE)),
    );
    assert_eq!(base.image, None);
    let bootstrap = LayeredDecision::not_layered();

    let annotated = rendered_mc(Some(PRE_BUILT));
    let plain = rendered_mc(None);
    let empty_annotation = rendered_mc(Some(""));

    // The annotation wins in both modes, whatever the decision.
    assert_eq!(
        node_annotation_image(&annotated, served.image.as_deref()).as_deref(),
        Some(PRE_BUILT)
    );
    assert_eq!(
        node_annotation_image(&annotated, base.image.as_deref()).as_deref(),
        Some(PRE_BUILT)
    );
    assert_eq!(
        node_annotation_image(&annotated, bootstrap.image.as_deref()).as_deref(),
        Some(PRE_BUILT)
    );
    // Without it (or empty), the served image, or nothing.
    assert_eq!(
        node_annotation_image(&plain, served.image.as_deref()).as_deref(),
        Some(IMAGE)
    );
    assert_eq!(
        node_annotation_image(&empty_annotation, served.image.as_deref()).as_deref(),
        Some(IMAGE)
    );
    assert_eq!(node_annotation_image(&plain, base.image.as_deref()), None);
    assert_eq!(
        node_annotation_image(&plain, bootstrap.image.as_deref()),
        None
    );

    // The encapsulated MC's osImageURL is the served image, else the MC's own.
    assert_eq!(encapsulated_os_image_url(&annotated, &served), IMAGE);
    assert_eq!(encapsulated_os_image_url(&annotated, &base), PRE_BUILT);
    assert_eq!(
        encapsulated_os_image_url(&plain, &bootstrap),
        plain.spec.os_image_url
    );
}

#[test]
fn held_since_is_when_the_first_unvalidated_build_succeeded() {
    let layered_pool = pool(POOL, 0);
    // Two succeeded builds of the served config, none validated: held since the earlier
    // success (the fixture's Succeeded transition, 2025-05-01T10:05:00Z).
    let inputs = with(|i| {
        i.machine_os_builds = vec![
            mosb("a", POOL, RENDERED, T1, Build::Succeeded(IMAGE)),
            mosb("b", POOL, RENDERED, T2, Build::Succeeded(OLDER_IMAGE)),
        ]
    });
    let decision = decide(&layered_pool, RENDERED, &inputs);
    assert_eq!(decision.reason, DecisionReason::NotValidated);
    assert_eq!(
        not_validated_since(&decision, RENDERED, &inputs),
        Some(1_746_093_900)
    );

    // Validated, building, or not layered: not held for want of validation.
    let validated = with(|i| {
        i.machine_os_builds = succeeded(IMAGE);
        i.nodes = done_node(IMAGE);
    });
    let building = with(|i| {
        i.machine_os_builds = vec![mosb("b", POOL, RENDERED, T1, Build::Building)];
    });
    for inputs in [validated, building, LayeredInputs::default()] {
        let decision = decide(&layered_pool, RENDERED, &inputs);
        assert_ne!(decision.reason, DecisionReason::NotValidated);
        assert_eq!(not_validated_since(&decision, RENDERED, &inputs), None);
    }
}
