//! The installer's bootstrap server's records (`bootstrap --served-records-kubeconfig`): what
//! it served each control-plane machine, written under its own key
//! ([`exchange::BOOTSTRAP_SERVER_KEY`]) of the shared served-records ConfigMap once the
//! bootstrap node's API server takes it, so that the cluster's replicas, tens of minutes later,
//! give every master's MachineConfigNode its bootstrap record as they do every worker's.
//!
//! # Never in the way
//! No answer waits for this: the writer is no [`crate::server::commit`] writer, so bootstrap
//! mode's answers go out as they always did ([`crate::server::commit::Durability::NoWriter`]).
//! The records are first kept in a file of their own (written atomically: a temporary file
//! renamed over the old one), a flush interval after they change, so a restart of the static
//! pod loses none: the next process takes them back before it serves. Then the writer applies
//! the key whenever its content changed and the API accepts it: before the API is up (connection
//! refused), while the namespace does not exist yet (404) or the identity may not write (403),
//! every write is retried with jittered backoff up to 30 s; each state is logged once, not per
//! retry.
//!
//! # Time
//! Records are stamped by the served log's clock ([`crate::clock`]): on the bootstrap node the
//! API server runs on the same machine, so its clock and the API's agree; the cluster's
//! replicas match them against Nodes created later in the API's time.
//!
//! Owns the records file and the bootstrap key's writes. Must not touch: the request path, the
//! replicas' keys, MachineConfigNodes (the cluster's Lease holder writes those).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::exchange::{self, ExchangeSettings};
use crate::metrics::Metrics;
use crate::server::served::{ServedLog, WriteSet};
use crate::telemetry::ErrorChain;

/// The file under the records directory.
pub const FILE_NAME: &str = "bootstrap-served-records.json";
/// The default records directory (a host path the bootstrap pod mounts).
pub const DEFAULT_DIR: &str = "/var/lib/machine-config-server";

/// Where the bootstrap server keeps and writes its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapRecordsSettings {
    /// The bootstrap node's own API server (`--served-records-kubeconfig`).
    pub kubeconfig: PathBuf,
    /// The directory of the records file (`--served-records-dir`).
    pub dir: PathBuf,
    /// The shared object and this writer's key (the bootstrap key).
    pub exchange: ExchangeSettings,
}

impl BootstrapRecordsSettings {
    pub fn new(kubeconfig: PathBuf, dir: PathBuf) -> Self {
        BootstrapRecordsSettings {
            kubeconfig,
            dir,
            exchange: ExchangeSettings::new(exchange::BOOTSTRAP_SERVER_KEY),
        }
    }

    /// The records file.
    pub fn file(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }
}

/// Why the records file cannot be read at start (a usage error: the server does not start, so
/// that a broken file is seen instead of records silently lost).
#[derive(Debug, thiserror::Error)]
pub enum RecordsFileError {
    #[error("--served-records-dir: cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--served-records-dir: {} is not a served-records file: {source}", path.display())]
    Decode {
        path: PathBuf,
        #[source]
        source: exchange::DecodeError,
    },
    #[error("--served-records-dir: cannot create {}: {source}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Takes back the records a previous process kept in the file (none when it does not exist
/// yet) into `served`, and checks the directory can be written. Call before serving.
pub fn restore(
    settings: &BootstrapRecordsSettings,
    served: &ServedLog,
) -> Result<usize, RecordsFileError> {
    std::fs::create_dir_all(&settings.dir).map_err(|source| RecordsFileError::Create {
        path: settings.dir.clone(),
        source,
    })?;
    let path = settings.file();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => return Err(RecordsFileError::Read { path, source }),
    };
    let decoded =
        exchange::decode_all(&text).map_err(|source| RecordsFileError::Decode { path, source })?;
    let count = decoded.served.len();
    served.restore(decoded.served);
    served.restore_failures(decoded.failures);
    Ok(count)
}

/// Starts the writer: keeps the file and the bootstrap key up to date with `served` until
/// `shutdown`, then writes both once more (the API for at most two seconds) and says, in one
/// warning line, when records never reached the API.
pub fn start(
    settings: BootstrapRecordsSettings,
    served: ServedLog,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(Writer::new(settings, served, metrics).run(shutdown))
}

/// What the API said last, so that each state is logged once.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ApiState {
    Unknown,
    Written,
    Failing(String),
}

struct Writer {
    settings: BootstrapRecordsSettings,
    served: ServedLog,
    metrics: Arc<Metrics>,
    api: Option<Api<ConfigMap>>,
    /// The encoded records as last kept in the file, and as last accepted by the API.
    in_file: Option<String>,
    in_api: Option<String>,
    state: ApiState,
    failures: u32,
    not_before: Instant,
}

impl Writer {
    fn new(settings: BootstrapRecordsSettings, served: ServedLog, metrics: Arc<Metrics>) -> Self {
        Writer {
            settings,
            served,
            metrics,
            api: None,
            in_file: None,
            in_api: None,
            state: ApiState::Unknown,
            failures: 0,
            not_before: Instant::now(),
        }
    }

    async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.settings.exchange.flush_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
            let text = self.encoded();
            self.keep_in_file(&text);
            if Instant::now() >= self.not_before && self.in_api.as_deref() != Some(text.as_str()) {
                self.write_to_api(&text).await;
            }
        }
        // On the way out: the file, then one more try at the API (bounded).
        let text = self.encoded();
        self.keep_in_file(&text);
        if self.in_api.as_deref() != Some(text.as_str()) {
            let _ = tokio::time::timeout(
                crate::server::commit::DEFAULT_WAIT_BOUND,
                self.write_to_api(&text),
            )
            .await;
        }
        let records = self.served.len();
        if records > 0 && self.in_api.as_deref() != Some(text.as_str()) {
            warn!(
                records,
                file = %self.settings.file().display(),
                "the bootstrap server's served records never reached the API: the control-plane machines' MachineConfigNodes will not say how they were born (the records stay in the file, and are lost with the bootstrap node)"
            );
        }
    }

    fn encoded(&self) -> String {
        let WriteSet {
            served, failures, ..
        } = self.served.write_set();
        exchange::encode_with_failures(
            &served,
            &failures,
            self.settings.exchange.max_entries,
            self.settings.exchange.max_bytes,
        )
        .0
    }

    /// Writes the file when its content changed: a temporary file beside it, synced, renamed
    /// over it, so a crash leaves the old file or the new one, never half of one.
    fn keep_in_file(&mut self, text: &str) {
        if self.in_file.as_deref() == Some(text) {
            return;
        }
        let path = self.settings.file();
        match write_atomically(&path, text.as_bytes()) {
            Ok(()) => self.in_file = Some(text.to_owned()),
            Err(error) => {
                warn!(file = %path.display(), %error, "cannot keep the bootstrap server's served records in their file; a restart would lose them")
            }
        }
    }

    async fn write_to_api(&mut self, text: &str) {
        let api = match &self.api {
            Some(api) => api.clone(),
            None => match connect(&self.settings.kubeconfig).await {
                Ok(client) => {
                    let api = Api::namespaced(client, &self.settings.exchange.namespace);
                    self.api = Some(api.clone());
                    api
                }
                Err(error) => {
                    self.failed(error);
                    return;
                }
            },
        };
        match tokio::time::timeout(
            exchange::WRITE_TIMEOUT,
            exchange::apply_key(&api, &self.settings.exchange, text),
        )
        .await
        {
            Ok(Ok(())) => {
                self.in_api = Some(text.to_owned());
                self.failures = 0;
                self.metrics.mcn_records("published", "", 1);
                if self.state != ApiState::Written {
                    info!(
                        records = self.served.len(),
                        key = %self.settings.exchange.replica,
                        "the bootstrap server's served records are in the API; the cluster's replicas will write them on the control-plane machines' MachineConfigNodes"
                    );
                }
                debug!(
                    bytes = text.len(),
                    "wrote the bootstrap server's served records"
                );
                self.state = ApiState::Written;
            }
            Ok(Err(error)) => self.failed(describe(&error)),
            Err(_) => self.failed(format!("no answer within {:?}", exchange::WRITE_TIMEOUT)),
        }
    }

    fn failed(&mut self, why: String) {
        self.metrics.mcn_records("publish_failed", "", 1);
        self.failures = self.failures.saturating_add(1);
        let delay = self
            .settings
            .exchange
            .retry_initial
            .saturating_mul(1u32 << self.failures.saturating_sub(1).min(16))
            .min(self.settings.exchange.retry_max);
        let delay = exchange::jittered(
            delay,
            (u64::from(std::process::id()) << 20) | u64::from(self.failures),
        );
        self.not_before = Instant::now() + delay;
        let state = ApiState::Failing(why.clone());
        if self.state != state {
            info!(
                reason = %why,
                retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                pending = self.served.len(),
                "the bootstrap server's served records wait for the API (kept in their file meanwhile; answers do not wait)"
            );
            self.state = state;
        }
    }
}

/// A short, stable description of a write's failure (the same failure is logged once).
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => match status.code {
            404 => "the namespace does not exist yet (404)".to_owned(),
            403 => format!("forbidden (403): {}", status.message),
            code => format!("the API answered {code}: {}", status.message),
        },
        other => format!("the API is not reachable: {}", ErrorChain(other)),
    }
}

async fn connect(kubeconfig: &Path) -> Result<kube::Client, String> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| format!("--served-records-kubeconfig {}: {e}", kubeconfig.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| format!("--served-records-kubeconfig {}: {e}", kubeconfig.display()))?;
    kube::Client::try_from(config).map_err(|e| format!("the Kubernetes client: {e}"))
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let temporary = path.with_extension("json.tmp");
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    // The rename itself survives a power loss once the directory is synced.
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::served::{Answer, ServedRecord};
    use std::net::IpAddr;
    use std::time::SystemTime;

    fn master_answer() -> Answer {
        Answer {
            pool: "master".into(),
            ..Answer::worker("rendered-master-1")
        }
    }

    #[test]
    fn records_kept_in_the_file_are_taken_back_by_the_next_process() {
        let dir = tempfile::tempdir().unwrap();
        let settings = BootstrapRecordsSettings::new(
            dir.path().join("kubeconfig"),
            dir.path().join("records"),
        );
        let served = ServedLog::default();
        assert_eq!(restore(&settings, &served).unwrap(), 0, "no file yet");
        let address: IpAddr = "10.0.0.5".parse().unwrap();
        served.record(
            address,
            ServedRecord::new(master_answer(), SystemTime::now()),
        );
        let mut writer = Writer::new(settings.clone(), served, Arc::new(Metrics::new()));
        let text = writer.encoded();
        writer.keep_in_file(&text);
        assert!(settings.file().is_file());
        assert!(!settings.file().with_extension("json.tmp").exists());

        let next = ServedLog::default();
        assert_eq!(restore(&settings, &next).unwrap(), 1);
        assert_eq!(
            next.get(address).map(|r| r.pool.clone()),
            Some("master".to_owned())
        );
    }

    #[test]
    fn a_broken_records_file_stops_the_start_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let settings =
            BootstrapRecordsSettings::new(dir.path().join("kubeconfig"), dir.path().to_owned());
        std::fs::write(settings.file(), "not json").unwrap();
        let error = restore(&settings, &ServedLog::default()).unwrap_err();
        assert!(error.to_string().contains(FILE_NAME), "{error}");
        assert!(
            error.to_string().starts_with("--served-records-dir"),
            "{error}"
        );
    }

    #[test]
    fn the_writer_uses_the_bootstrap_key_and_its_own_field_manager() {
        let settings = BootstrapRecordsSettings::new("k".into(), "d".into());
        assert_eq!(settings.exchange.replica, exchange::BOOTSTRAP_SERVER_KEY);
        assert_eq!(
            settings.exchange.field_manager(),
            format!(
                "{}{}",
                exchange::FIELD_MANAGER_PREFIX,
                exchange::BOOTSTRAP_SERVER_KEY
            )
        );
    }
}
