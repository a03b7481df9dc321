//! The immutable state a render reads. A source builds a new [`Snapshot`] whenever any of its
//! inputs changes and publishes it behind an `Arc` with a higher generation; renders and the
//! payload cache key on that generation, so nothing on the request path touches I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::api::imagebuild::{MachineOSBuild, MachineOSConfig};
use crate::api::machineconfignode::MachineConfigNode;
use crate::api::{ControllerConfig, MachineConfig, MachineConfigPool};

/// Cluster objects the layered-image decision reads. Empty in bootstrap mode.
#[derive(Clone, Debug, Default)]
pub struct LayeredInputs {
    pub machine_os_configs: Vec<Arc<MachineOSConfig>>,
    pub machine_os_builds: Vec<Arc<MachineOSBuild>>,
    /// All Nodes (the decision selects the pool's own).
    pub nodes: Vec<Arc<Node>>,
    pub machine_config_nodes: Vec<Arc<MachineConfigNode>>,
    /// Host prefixes of the in-cluster image registry (`<svc>.<ns>.svc:<port>`, route hosts):
    /// images there are unreachable for a booting node.
    pub registry_hosts: Vec<String>,
    /// All MachineConfigPools, for the primary-pool rule when a node matches several pools.
    /// When empty, a node belongs to the decided pool if that pool's selector matches it.
    pub pools: Vec<Arc<MachineConfigPool>>,
    /// Which proof a layered image needs before it is served.
    pub gate: LayeredGate,
}

/// What proves a layered pool's image before booting nodes get it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LayeredGate {
    /// A Node of the pool runs the image and is done updating (needs Node rights).
    #[default]
    NodeValidated,
    /// The original's gate: the pool's `status.updatedMachineCount > 0` (the server's identity
    /// may not read Nodes).
    PoolUpdatedMachineCount,
}

/// A cluster input whose watch cache a render or the publisher may need before it acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Input {
    MachineConfigPools,
    MachineConfigs,
    ControllerConfig,
    /// The `kubeconfig-data` ConfigMap (the served kubeconfig's CA).
    KubeconfigData,
    MachineOSConfigs,
    MachineOSBuilds,
    /// The in-cluster registry's Services (its host names).
    RegistryServices,
    /// The in-cluster registry's Routes (its host names).
    RegistryRoutes,
    Nodes,
    MachineConfigNodes,
}

impl Input {
    /// Every input.
    pub const ALL: [Input; 10] = [
        Input::MachineConfigPools,
        Input::MachineConfigs,
        Input::ControllerConfig,
        Input::KubeconfigData,
        Input::MachineOSConfigs,
        Input::MachineOSBuilds,
        Input::RegistryServices,
        Input::RegistryRoutes,
        Input::Nodes,
        Input::MachineConfigNodes,
    ];

    /// What every pool's answer reads (whether a pool is layered is known from the
    /// MachineOSConfigs): the cluster source is ready once these have synced.
    pub const EVERY_POOL: [Input; 5] = [
        Input::MachineConfigPools,
        Input::MachineConfigs,
        Input::ControllerConfig,
        Input::KubeconfigData,
        Input::MachineOSConfigs,
    ];

    /// The watched kind behind the input (log lines, `/status`).
    pub fn kind(self) -> &'static str {
        match self {
            Input::MachineConfigPools => "MachineConfigPool",
            Input::MachineConfigs => "MachineConfig",
            Input::ControllerConfig => "ControllerConfig",
            Input::KubeconfigData => "ConfigMap",
            Input::MachineOSConfigs => "MachineOSConfig",
            Input::MachineOSBuilds => "MachineOSBuild",
            Input::RegistryServices => "Service",
            Input::RegistryRoutes => "Route",
            Input::Nodes => "Node",
            Input::MachineConfigNodes => "MachineConfigNode",
        }
    }

    /// The input of a watched kind.
    pub fn of_kind(kind: &str) -> Option<Input> {
        Input::ALL.into_iter().find(|input| input.kind() == kind)
    }
}

/// `--advertise-failure-reporting`: what every served config tells the machine about where
/// and how to report a first-boot failure, as upstream's PR #6124 serves it (the root CA of
/// this server's certificate, and in cluster mode this server's URL in the node annotations).
/// A snapshot without it serves the original's answers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FailureReporting {
    /// `https://<host>:22623`, from the cluster's Infrastructure: the node annotation
    /// `machineconfiguration.openshift.io/machineConfigServerURL`. `None` in bootstrap mode, and
    /// where the Infrastructure could not be read at start (served without the annotation, as
    /// upstream).
    pub server_url: Option<String>,
}

/// Which kind of source produced the snapshot; it decides a few upstream status-code rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `machine-config-server bootstrap`: a base directory on the installer's bootstrap node.
    Bootstrap,
    /// `machine-config-server start`: Kubernetes watch caches.
    Cluster,
}

/// An input object that could not be loaded. Kept in the snapshot so that a broken file or
/// object fails only the requests that need it, with the reason, while other pools keep working.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The file (bootstrap) does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The file or object exists but is not valid.
    #[error("{what} is invalid: {reason}")]
    Invalid { what: String, reason: String },
}

/// The `kind` and `apiVersion` a bootstrap file names (each empty when the file has none), as
/// the original's `ghodss/yaml` reads them into `metav1.TypeMeta`: a number or boolean is
/// taken as its text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileTypeMeta {
    pub kind: String,
    pub api_version: String,
}

/// One loaded input: the object or why it could not be loaded.
pub type Loaded<T> = Result<Arc<T>, LoadError>;

/// A loaded file's bytes, or why it could not be read.
pub type LoadedBytes = Result<Arc<[u8]>, LoadError>;

/// Everything a render needs, immutable once published.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Increases whenever something a render reads changes; part of every payload cache key.
    /// Cluster mode may publish snapshots that differ only in what no render reads (an MCN's
    /// daemon-written status, a Node's addresses) under the same generation: they render the
    /// same bytes.
    pub generation: u64,
    pub mode: Mode,
    /// MachineConfigPools by name. Bootstrap mode holds only the pools it can serve
    /// (`master`, `arbiter`), with a [`LoadError`] for a missing or broken file.
    pub pools: BTreeMap<String, Loaded<MachineConfigPool>>,
    /// Rendered MachineConfigs by name (those referenced by a pool, in bootstrap mode).
    pub machine_configs: BTreeMap<String, Loaded<MachineConfig>>,
    /// Bootstrap mode: the `kind` and `apiVersion` each MachineConfig's file names, by
    /// MachineConfig name (the original writes them back into the MachineConfig files it
    /// serves). Empty in cluster mode: an object from a watch has none.
    pub file_type_meta: BTreeMap<String, FileTypeMeta>,
    /// The `machine-config-controller` ControllerConfig (its CA bundles are served).
    pub controller_config: Option<Loaded<ControllerConfig>>,
    /// The kubeconfig written to `/etc/kubernetes/kubeconfig` on the node.
    pub kubeconfig: Arc<[u8]>,
    /// Bootstrap `--bootstrap-certs name=file`: served as `/etc/docker/certs.d/<name>/ca.crt`.
    pub registry_certs: Vec<(String, LoadedBytes)>,
    /// Cluster-mode inputs of the layered-image decision (empty in bootstrap mode).
    pub layered: LayeredInputs,
    /// Cluster mode: the inputs whose caches have synced (a render needing another one answers
    /// 503, naming it). Bootstrap mode reads everything before its first snapshot: empty, and
    /// not consulted.
    pub synced: BTreeSet<Input>,
    /// What served configs tell the machine about first-boot failure reports (`None`: nothing,
    /// the original's answers).
    pub failure_reporting: Option<FailureReporting>,
}

impl Snapshot {
    /// A snapshot with nothing in it, for the given mode.
    pub fn empty(mode: Mode) -> Self {
        Snapshot {
            generation: 0,
            mode,
            pools: BTreeMap::new(),
            machine_configs: BTreeMap::new(),
            file_type_meta: BTreeMap::new(),
            controller_config: None,
            kubeconfig: Arc::from(Vec::new()),
            registry_certs: Vec::new(),
            layered: LayeredInputs::default(),
            synced: BTreeSet::new(),
            failure_reporting: None,
        }
    }
}
