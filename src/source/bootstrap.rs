//! Bootstrap source: reads the installer's base directory and publishes snapshots.
//!
//! Layout (as the original): `machine-pools/<pool>.yaml` (only `master` and `arbiter` are
//! served), `machine-configs/<status.configuration.name>.yaml`,
//! `controller-config/machine-config-controller.yaml`, plus the bootstrap kubeconfig and the
//! `--bootstrap-certs` files (relative to the base directory). The original reads these files on
//! every request; we read them once per change: a poller compares file metadata every
//! [`POLL_INTERVAL`] and publishes a new snapshot generation when anything changed, so edits
//! are picked up without a restart and a request never touches the filesystem. Pool names from
//! URLs never reach this module: it only ever opens the fixed pool file names above.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::api::{ControllerConfig, MachineConfig, MachineConfigPool};
use crate::render::BOOTSTRAP_POOLS;
use crate::snapshot::{
    FailureReporting, FileTypeMeta, LoadError, Loaded, LoadedBytes, Mode, Snapshot,
};

/// How often the base directory is checked for changes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// What the bootstrap source reads.
#[derive(Clone, Debug)]
pub struct BootstrapSettings {
    /// `--server-basedir`.
    pub base_dir: PathBuf,
    /// `--bootstrap-kubeconfig`: served as the node's kubeconfig.
    pub kubeconfig: PathBuf,
    /// `--bootstrap-certs name=file`, file relative to the base directory.
    pub registry_certs: Vec<(String, PathBuf)>,
    /// `--advertise-failure-reporting`: every config also carries the root CA the daemon
    /// reports through (no server URL: upstream's bootstrap server has none).
    pub advertise_failure_reporting: bool,
}

/// Start-up failures (the original refuses to start without the kubeconfig).
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("kubeconfig not found at location: {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Handle to the running source: the latest snapshot, updated as files change.
pub struct BootstrapSource {
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub task: tokio::task::JoinHandle<()>,
}

/// Load the directory once, then keep polling it until `shutdown` fires.
pub fn start(
    settings: BootstrapSettings,
    mut shutdown: watch::Receiver<bool>,
) -> Result<BootstrapSource, BootstrapError> {
    let mut last_kubeconfig = read_kubeconfig(&settings)?;
    let (mut fingerprint, mut snapshot) = load(&settings, 1, &mut last_kubeconfig);
    log_problems(&snapshot);
    let (tx, rx) = watch::channel(Arc::new(snapshot.clone()));

    let task = tokio::spawn(async move {
        let mut interval = tokio::time::interval(POLL_INTERVAL);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = interval.tick() => {}
                _ = shutdown.changed() => return,
            }
            let settings = settings.clone();
            let previous = fingerprint.clone();
            let generation = snapshot.generation + 1;
            let mut kubeconfig = last_kubeconfig.clone();
            let scanned = tokio::task::spawn_blocking(move || {
                if scan(&settings) == previous {
                    return None;
                }
                let (fingerprint, snapshot) = load(&settings, generation, &mut kubeconfig);
                Some((fingerprint, snapshot, kubeconfig))
            })
            .await;
            match scanned {
                Ok(Some((new_fingerprint, new_snapshot, kubeconfig))) => {
                    tracing::info!(
                        generation = new_snapshot.generation,
                        "bootstrap directory changed, reloaded"
                    );
                    log_problems(&new_snapshot);
                    fingerprint = new_fingerprint;
                    last_kubeconfig = kubeconfig;
                    snapshot = new_snapshot;
                    tx.send_replace(Arc::new(snapshot.clone()));
                }
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "bootstrap directory scan failed"),
            }
        }
    });
    Ok(BootstrapSource {
        snapshots: rx,
        task,
    })
}

/// Read the base directory once into a snapshot (generation 1), as [`start`] does before it
/// starts polling: the kubeconfig must exist, every other problem is kept in the snapshot. For
/// callers that need one consistent view and no polling (`explain`).
pub fn load_once(settings: &BootstrapSettings) -> Result<Snapshot, BootstrapError> {
    let mut kubeconfig = read_kubeconfig(settings)?;
    Ok(load(settings, 1, &mut kubeconfig).1)
}

/// The bootstrap kubeconfig, required at start as the original does.
fn read_kubeconfig(settings: &BootstrapSettings) -> Result<Arc<[u8]>, BootstrapError> {
    fs::read(&settings.kubeconfig)
        .map(Arc::from)
        .map_err(|source| BootstrapError::Kubeconfig {
            path: settings.kubeconfig.clone(),
            source,
        })
}

/// Metadata of every file a snapshot depends on; a different value means "reload".
type Fingerprint = Vec<(PathBuf, Option<(SystemTime, u64, u64)>)>;

fn file_fingerprint(path: &Path) -> Option<(SystemTime, u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len(), meta.ino()))
}

fn pool_path(base: &Path, pool: &str) -> PathBuf {
    base.join("machine-pools").join(format!("{pool}.yaml"))
}

fn controller_config_path(base: &Path) -> PathBuf {
    base.join("controller-config")
        .join("machine-config-controller.yaml")
}

/// The files to watch: pools, the MachineConfigs they reference right now, the controller
/// config, the kubeconfig and registry certificates.
fn scan(settings: &BootstrapSettings) -> Fingerprint {
    let base = &settings.base_dir;
    let mut paths = Vec::new();
    for pool in BOOTSTRAP_POOLS {
        let path = pool_path(base, pool);
        if let Ok(Ok(pool)) = read_yaml::<MachineConfigPool>(&path) {
            if let Some(path) = machine_config_path(base, configuration_name(&pool)) {
                paths.push(path);
            }
        }
        paths.push(path);
    }
    paths.push(controller_config_path(base));
    paths.push(settings.kubeconfig.clone());
    paths.extend(
        settings
            .registry_certs
            .iter()
            .map(|(_, file)| base.join(file)),
    );
    paths
        .into_iter()
        .map(|path| {
            let meta = file_fingerprint(&path);
            (path, meta)
        })
        .collect()
}

fn configuration_name(pool: &MachineConfigPool) -> &str {
    pool.status
        .as_ref()
        .map(|s| s.configuration.name.as_str())
        .unwrap_or_default()
}

/// `machine-configs/<name>.yaml`, or `None` when `name` could escape the directory.
fn machine_config_path(base: &Path, name: &str) -> Option<PathBuf> {
    let safe = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']);
    safe.then(|| base.join("machine-configs").join(format!("{name}.yaml")))
}

/// Read everything into a snapshot. A missing kubeconfig keeps the last good one (the
/// original requires it at start and it is only ever replaced, never meant to disappear).
fn load(
    settings: &BootstrapSettings,
    generation: u64,
    kubeconfig: &mut Arc<[u8]>,
) -> (Fingerprint, Snapshot) {
    let fingerprint = scan(settings);
    let base = &settings.base_dir;
    let mut snapshot = Snapshot::empty(Mode::Bootstrap);
    snapshot.generation = generation;

    for pool in BOOTSTRAP_POOLS {
        let loaded = load_yaml::<MachineConfigPool>(&pool_path(base, pool));
        if let Ok(pool_object) = &loaded {
            let name = configuration_name(pool_object).to_string();
            let machine_config = match machine_config_path(base, &name) {
                Some(path) => {
                    let (machine_config, type_meta) = load_machine_config(&path);
                    if let Some(type_meta) = type_meta {
                        snapshot.file_type_meta.insert(name.clone(), type_meta);
                    }
                    machine_config
                }
                None => Err(LoadError::Invalid {
                    what: format!("machine pool {pool:?}"),
                    reason: format!(
                        "status.configuration.name {name:?} is not a valid MachineConfig name"
                    ),
                }),
            };
            snapshot.machine_configs.insert(name, machine_config);
        }
        snapshot.pools.insert(pool.to_string(), loaded);
    }
    snapshot.controller_config = Some(load_yaml::<ControllerConfig>(&controller_config_path(base)));
    match fs::read(&settings.kubeconfig) {
        Ok(bytes) => *kubeconfig = Arc::from(bytes),
        Err(e) => tracing::error!(
            path = %settings.kubeconfig.display(), error = %e,
            "cannot read the bootstrap kubeconfig; serving the last one read"
        ),
    }
    snapshot.kubeconfig = kubeconfig.clone();
    snapshot.failure_reporting = settings
        .advertise_failure_reporting
        .then(FailureReporting::default);
    snapshot.registry_certs = settings
        .registry_certs
        .iter()
        .map(|(name, file)| (name.clone(), load_bytes(&base.join(file))))
        .collect();
    (fingerprint, snapshot)
}

/// A MachineConfig file, and the `kind` and `apiVersion` it names when it loads.
fn load_machine_config(path: &Path) -> (Loaded<MachineConfig>, Option<FileTypeMeta>) {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => return (Err(io_error(path, e)), None),
    };
    match serde_yaml::from_slice::<MachineConfig>(&bytes) {
        Ok(machine_config) => {
            let type_meta = serde_yaml::from_slice::<TypeMetaFields>(&bytes)
                .map(TypeMetaFields::into_type_meta)
                .unwrap_or_default();
            (Ok(Arc::new(machine_config)), Some(type_meta))
        }
        Err(e) => (
            Err(LoadError::Invalid {
                what: format!("file {}", path.display()),
                reason: e.to_string(),
            }),
            None,
        ),
    }
}

/// The TypeMeta members of a file; everything else is skipped.
#[derive(serde::Deserialize)]
struct TypeMetaFields {
    #[serde(default)]
    kind: Option<serde_yaml::Value>,
    #[serde(rename = "apiVersion", default)]
    api_version: Option<serde_yaml::Value>,
}

impl TypeMetaFields {
    fn into_type_meta(self) -> FileTypeMeta {
        FileTypeMeta {
            kind: scalar_text(self.kind),
            api_version: scalar_text(self.api_version),
        }
    }
}

/// A scalar as `ghodss/yaml` hands it to a Go string field: strings as they are, numbers and
/// booleans as their text; anything else (null, a list, a map) as nothing.
fn scalar_text(value: Option<serde_yaml::Value>) -> String {
    match value {
        Some(serde_yaml::Value::String(text)) => text,
        Some(serde_yaml::Value::Number(number)) => number.to_string(),
        Some(serde_yaml::Value::Bool(flag)) => flag.to_string(),
        _ => String::new(),
    }
}

fn load_bytes(path: &Path) -> LoadedBytes {
    fs::read(path).map(Arc::from).map_err(|e| io_error(path, e))
}

fn io_error(path: &Path, e: io::Error) -> LoadError {
    if e.kind() == io::ErrorKind::NotFound {
        LoadError::NotFound(format!("file {}", path.display()))
    } else {
        LoadError::Invalid {
            what: format!("file {}", path.display()),
            reason: e.to_string(),
        }
    }
}

fn read_yaml<T: DeserializeOwned>(path: &Path) -> io::Result<Result<T, serde_yaml::Error>> {
    let bytes = fs::read(path)?;
    Ok(serde_yaml::from_slice(&bytes))
}

fn load_yaml<T: DeserializeOwned>(path: &Path) -> Loaded<T> {
    match read_yaml::<T>(path) {
        Ok(Ok(object)) => Ok(Arc::new(object)),
        Ok(Err(e)) => Err(LoadError::Invalid {
            what: format!("file {}", path.display()),
            reason: e.to_string(),
        }),
        Err(e) => Err(io_error(path, e)),
    }
}

/// One line per broken input at load time, so an operator sees it before any node asks.
fn log_problems(snapshot: &Snapshot) {
    let pools = snapshot
        .pools
        .iter()
        .map(|(k, v)| (format!("pool {k}"), v.as_ref().err()));
    let configs = snapshot
        .machine_configs
        .iter()
        .map(|(k, v)| (format!("machine config {k}"), v.as_ref().err()));
    let controller = std::iter::once((
        "controller config".to_string(),
        snapshot
            .controller_config
            .as_ref()
            .and_then(|c| c.as_ref().err()),
    ));
    let problems: BTreeMap<String, &LoadError> = pools
        .chain(configs)
        .chain(controller)
        .filter_map(|(k, e)| e.map(|e| (k, e)))
        .collect();
    for (input, error) in problems {
        match error {
            // A missing pool file is normal (most clusters have no arbiter pool): 404 on request.
            LoadError::NotFound(_) if input.starts_with("pool ") => {
                tracing::debug!(%input, %error, "bootstrap pool not present")
            }
            LoadError::NotFound(_) => tracing::warn!(%input, %error, "bootstrap input missing"),
            LoadError::Invalid { .. } => tracing::error!(%input, %error, "bootstrap input invalid"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(yaml: &str) -> (Loaded<MachineConfig>, Option<FileTypeMeta>) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("mc.yaml");
        fs::write(&path, yaml).expect("written");
        load_machine_config(&path)
    }

    #[test]
    fn a_machine_config_file_keeps_the_kind_and_api_version_it_names() {
        let (mc, type_meta) = loaded(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: m\nspec: {}\n",
        );
        assert_eq!(mc.unwrap().metadata.name.as_deref(), Some("m"));
        assert_eq!(
            type_meta,
            Some(FileTypeMeta {
                kind: "MachineConfig".into(),
                api_version: "machineconfiguration.openshift.io/v1".into()
            })
        );
        // None named: none written back; a number is its text, as ghodss/yaml hands it to Go.
        let (_, type_meta) = loaded("apiVersion: 1\nmetadata:\n  name: m\nspec: {}\n");
        assert_eq!(
            type_meta,
            Some(FileTypeMeta {
                kind: String::new(),
                api_version: "1".into()
            })
        );
        // A file that does not load has none.
        let (mc, type_meta) = loaded("spec: [");
        assert!(mc.is_err());
        assert_eq!(type_meta, None);
    }
}
