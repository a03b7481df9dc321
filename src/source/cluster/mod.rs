//! The cluster source (`machine-config-server start`): everything served comes from the
//! Kubernetes API through kube-runtime watch caches, never from API calls on the request path.
//!
//! [`start`] connects (`--kubeconfig`, or the in-cluster config), starts one reflector per kind
//! ([`watches`]), and a builder task that turns the caches plus the served kubeconfig
//! ([`kubeconfig`], from `--bootstrap-token-dir` and `--apiserver-url`) into immutable
//! [`Snapshot`]s ([`build`]). The builder wakes on every cache change that matters (debounced,
//! so a burst of events gives one snapshot; a Node's status heartbeat does not wake it, see
//! [`watches`]) and polls the token directory for rotation; it publishes only when something
//! changed, with a new generation only when something a render reads changed, and never before every cache has synced and the served kubeconfig
//! could be built once (token and CA readable): until then `ready` stays false and the server
//! answers 503. A later failure to re-read the token directory keeps the last good kubeconfig. During an API outage the caches keep their last contents,
//! watches reconnect with backoff, and [`observe::ApiReachability`] logs and reports the outage
//! and the recovery once each.
//!
//! Owns the cluster connection, the caches and snapshot publication. It must not render,
//! serve, or write to the cluster (the MachineConfigNode publisher does that with [`ClusterSource::client`]).

pub mod build;
pub mod failure_reporting;
pub mod kubeconfig;
pub mod lenient;
pub mod log_once;
pub mod observe;
pub mod rights;
pub mod slim_mcn;
pub mod slim_node;
pub mod watches;

use std::collections::BTreeSet;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::client::{ClientBuilder, DynBody};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use self::build::{build_snapshot, problems, Fingerprint, RenderDigests};
use self::failure_reporting::Advertisement;
use self::kubeconfig::{read_token_dir, KubeconfigInputs};
pub use self::log_once::ReasonLog;
pub use self::observe::{ApiReachability, ClusterObserver, NoopObserver};
use self::rights::{Rights, RightsSettings};
use self::watches::{Caches, SyncTracker, WatchContext, DEFAULT_LIST_INTERVAL};
use crate::clock::ClusterClock;
use crate::rights::{Feature, Grants, Names, Requirements};
use crate::snapshot::{Input, LayeredGate, Mode, Snapshot};

/// Default `--bootstrap-token-dir`: the node-bootstrapper token secret's mount point.
pub const DEFAULT_BOOTSTRAP_TOKEN_DIR: &str = "/etc/mcs/bootstrap-token";

/// How the cluster source connects and what it serves.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// `--kubeconfig`: run outside a cluster; the in-cluster config is used when `None`.
    pub kubeconfig: Option<PathBuf>,
    /// `--apiserver-url`: the API server URL written into served kubeconfigs.
    pub apiserver_url: String,
    /// `--bootstrap-token-dir`: holds `token` and `ca.crt` for the served kubeconfig.
    pub bootstrap_token_dir: PathBuf,
    /// How often the token directory is re-read to pick up a rotated token or CA.
    pub token_poll_interval: Duration,
    /// How long the builder waits after a change for more before building a snapshot.
    pub debounce: Duration,
    /// Fed with the `Date` header of every API answer (see [`crate::clock`]).
    pub clock: ClusterClock,
    /// What the features beyond the original need, asked of the API server.
    pub requirements: Requirements,
    /// When the rights are asked about.
    pub rights: RightsSettings,
    /// How often a kind that may be listed but not watched is listed again.
    pub list_interval: Duration,
}

impl ClusterSettings {
    /// Settings with the defaults of the original for everything but the API server URL.
    pub fn new(apiserver_url: impl Into<String>) -> Self {
        ClusterSettings {
            kubeconfig: None,
            apiserver_url: apiserver_url.into(),
            bootstrap_token_dir: PathBuf::from(DEFAULT_BOOTSTRAP_TOKEN_DIR),
            token_poll_interval: Duration::from_secs(1),
            debounce: Duration::from_millis(50),
            clock: ClusterClock::default(),
            requirements: Requirements::new(&Names::openshift()),
            rights: RightsSettings::default(),
            list_interval: DEFAULT_LIST_INTERVAL,
        }
    }

    /// `--advertise-failure-reporting`: asks for the feature (and its right).
    pub fn advertise_failure_reporting(&mut self) {
        self.requirements = self.requirements.clone().advertising_failure_reporting();
    }
}

/// Why the cluster source could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--kubeconfig` cannot be read or used.
    #[error("--kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No `--kubeconfig` and not running in a pod.
    #[error("no --kubeconfig given and the in-cluster configuration is unavailable: {0}")]
    InCluster(#[source] kube::config::InClusterError),
    /// The client cannot be built from the configuration (e.g. a bad TLS setting).
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

impl Error {
    /// Short, stable name used as a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Kubeconfig { .. } => "kubeconfig",
            Self::InCluster(_) => "in_cluster",
            Self::Client(_) => "client",
        }
    }
}

/// Handles on a running cluster source.
pub struct ClusterSource {
    /// The latest snapshot; generation 0 (empty) until every cache has synced.
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    /// True once every cache has synced and the first snapshot is published; stays true
    /// through API outages (the last known state keeps being served).
    pub ready: watch::Receiver<bool>,
    /// The client the caches use (with reachability reporting), for other cluster-mode parts.
    pub client: Client,
    /// Whether the API answered the last request.
    pub reachability: ApiReachability,
    /// What this identity may do: which features beyond the original run.
    pub rights: Rights,
    tasks: Vec<JoinHandle<()>>,
}

impl ClusterSource {
    /// Waits for every task of the source to end (they end when `shutdown` completes).
    pub async fn join(self) {
        for task in self.tasks {
            if let Err(error) = task.await {
                warn!(%error, "cluster source task ended abnormally");
            }
        }
    }
}

/// Connects to the API, starts the watches and the snapshot builder, and returns at once; the
/// caches fill in the background (watch `ready`). Everything stops when `shutdown` completes.
pub async fn start(
    settings: ClusterSettings,
    observer: Arc<dyn ClusterObserver>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ClusterSource, Error> {
    let config = client_config(&settings).await?;
    let reachability = ApiReachability::new(observer.clone());
    let client = build_client(config, reachability.clone(), settings.clock.clone())?;

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (rights, rights_task) = rights::start(
        client.clone(),
        settings.requirements.clone(),
        settings.rights.clone(),
        observer.clone(),
        shutdown_rx.clone(),
    );
    let ctx = WatchContext {
        changed: Arc::new(Notify::new()),
        sync: Arc::new(SyncTracker::default()),
        observer: observer.clone(),
        shutdown: shutdown_rx.clone(),
        rights: rights.clone(),
        list_interval: settings.list_interval,
    };
    let (caches, mut tasks) = watches::spawn_all(&client, &ctx);
    tasks.push(rights_task);
    let advertisement = if settings
        .requirements
        .requests(Feature::AdvertiseFailureReporting)
    {
        let (advertisement, task) =
            failure_reporting::start(client.clone(), rights.clone(), shutdown_rx.clone());
        tasks.push(task);
        advertisement
    } else {
        failure_reporting::off()
    };

    let (snapshots_tx, snapshots) = watch::channel(Arc::new(Snapshot::empty(Mode::Cluster)));
    let (ready_tx, ready) = watch::channel(false);
    let builder = Builder {
        caches,
        sync: ctx.sync.clone(),
        rights: rights.clone(),
        advertisement,
        settings,
        observer,
        problems: ReasonLog::default(),
        snapshots: snapshots_tx,
        ready: ready_tx,
        inputs: None,
        kubeconfig: None,
        published: None,
        rendered_from: None,
        render_digests: RenderDigests::default(),
        generation: 0,
        dirty: true,
    };
    tasks.push(tokio::spawn(builder.run(ctx.changed.clone(), shutdown_rx)));
    tasks.push(tokio::spawn(async move {
        shutdown.await;
        let _ = shutdown_tx.send(true);
    }));

    Ok(ClusterSource {
        snapshots,
        ready,
        client,
        reachability,
        rights,
        tasks,
    })
}

/// A plain client of the cluster (`kubeconfig`, else the in-cluster configuration), without
/// the caches: for the subcommands that make a few direct requests and stop (`cleanup`). Each
/// request gives up after `timeout` (connecting, and waiting for the answer).
pub async fn plain_client(
    kubeconfig: Option<&std::path::Path>,
    timeout: Duration,
) -> Result<Client, Error> {
    let settings = ClusterSettings {
        kubeconfig: kubeconfig.map(std::path::Path::to_path_buf),
        ..ClusterSettings::new("")
    };
    let mut config = client_config(&settings).await?;
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    Client::try_from(config).map_err(Error::Client)
}

async fn client_config(settings: &ClusterSettings) -> Result<kube::Config, Error> {
    match &settings.kubeconfig {
        Some(path) => {
            let wrap = |source| Error::Kubeconfig {
                path: path.clone(),
                source,
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(wrap)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(wrap)
        }
        None => kube::Config::incluster().map_err(Error::InCluster),
    }
}

/// The default kube client stack, wrapped so that every request outcome feeds `reachability`
/// and every answer's `Date` header feeds `clock`.
fn build_client(
    config: kube::Config,
    reachability: ApiReachability,
    clock: ClusterClock,
) -> Result<Client, Error> {
    type Outcome = Result<http::Response<Box<DynBody>>, tower::BoxError>;
    let observe = tower::util::MapResultLayer::new(move |outcome: Outcome| {
        match &outcome {
            Ok(response) => {
                reachability.record(true, &"response received");
                if response.status().is_success() {
                    reachability.record_success();
                }
                if let Some(date) = response.headers().get(http::header::DATE) {
                    clock.observe_date(date, std::time::SystemTime::now());
                }
            }
            Err(error) => reachability.record(false, error),
        }
        outcome
    });
    let builder = ClientBuilder::try_from(config).map_err(Error::Client)?;
    Ok(builder.with_layer(&observe).build())
}

/// The task that turns cache contents and the token directory into published snapshots.
struct Builder {
    caches: Caches,
    sync: Arc<SyncTracker>,
    rights: Rights,
    /// What served configs tell machines about failure reports; nothing is published while it
    /// is pending.
    advertisement: watch::Receiver<Advertisement>,
    settings: ClusterSettings,
    observer: Arc<dyn ClusterObserver>,
    /// Build-time problems (and the kubeconfig's), each logged once per state.
    problems: ReasonLog,
    snapshots: watch::Sender<Arc<Snapshot>>,
    ready: watch::Sender<bool>,
    /// The token directory and ConfigMap CA as last read.
    inputs: Option<KubeconfigInputs>,
    /// The last kubeconfig that could be built; kept while a rotation is half done.
    kubeconfig: Option<Arc<[u8]>>,
    /// What the published snapshot was built from.
    published: Option<(Fingerprint, Arc<[u8]>)>,
    /// What renders of the current generation read ([`ClusterObjects::render_fingerprint`]).
    rendered_from: Option<(Fingerprint, Arc<[u8]>)>,
    render_digests: RenderDigests,
    generation: u64,
    /// A cache changed since the last published snapshot.
    dirty: bool,
}

/// The layered gate the grants allow. Until the rights are known a layered pool waits as if
/// the Node-validated gate applied (its Nodes have not synced), so that no image is served by
/// the weaker gate for want of an answer.
fn layered_gate(grants: &Grants) -> LayeredGate {
    if grants.is_known() && !grants.enabled(Feature::LayeredNodeGate) {
        LayeredGate::PoolUpdatedMachineCount
    } else {
        LayeredGate::NodeValidated
    }
}

/// Subject under which kubeconfig problems are logged once.
const KUBECONFIG_SUBJECT: &str = "served kubeconfig";

/// How long the caches may take to sync before the builder names the ones still missing.
const SYNC_WARNING_AFTER: Duration = Duration::from_secs(30);

/// Waits for the failure-report advertisement to change. A server without
/// `--advertise-failure-reporting` gets an advertisement whose sender is gone at once (it can
/// never change), and a closed channel's `changed()` returns at once, every time: waiting on it
/// as it is turned the builder's loop into a busy loop (a core spent re-reading the token
/// directory through the blocking pool, for as long as the server ran). A closed channel waits
/// forever instead.
async fn advertisement_changed(advertisement: &mut watch::Receiver<Advertisement>) {
    if advertisement.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl Builder {
    async fn run(mut self, changed: Arc<Notify>, mut shutdown: watch::Receiver<bool>) {
        let started = tokio::time::Instant::now();
        let mut warned_unsynced = false;
        let mut warned_undecided = false;
        let mut poll = tokio::time::interval(self.settings.token_poll_interval);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut grants = self.rights.subscribe();
        let mut advertisement = self.advertisement.clone();
        loop {
            let caches_changed = tokio::select! {
                _ = shutdown.changed() => break,
                _ = changed.notified() => {
                    // Let the rest of a burst (a re-list, a rollout touching many objects)
                    // land in the caches so that it becomes one snapshot.
                    tokio::time::sleep(self.settings.debounce).await;
                    true
                }
                // The layered gate follows the rights.
                _ = grants.changed() => true,
                _ = advertisement_changed(&mut advertisement) => true,
                _ = poll.tick() => false,
            };
            self.dirty |= caches_changed;
            let synced = self.sync.synced_inputs();
            let pending: Vec<&str> = Input::EVERY_POOL
                .iter()
                .filter(|input| !synced.contains(input))
                .map(|input| input.kind())
                .collect();
            if !pending.is_empty() {
                if !warned_unsynced && started.elapsed() >= SYNC_WARNING_AFTER {
                    warned_unsynced = true;
                    warn!(?pending, "caches every pool reads have not synced yet; /config answers 503 until they have");
                }
                continue;
            }
            if self.advertisement.borrow().reporting().is_none() {
                if !warned_undecided && started.elapsed() >= SYNC_WARNING_AFTER {
                    warned_undecided = true;
                    warn!("--advertise-failure-reporting: the rights probe (or the Infrastructure read) has not answered yet; /config answers 503 until it has");
                }
                continue;
            }
            self.refresh(synced).await;
        }
    }

    /// Re-reads the token directory and, when anything changed, publishes a new snapshot.
    async fn refresh(&mut self, synced: BTreeSet<Input>) {
        let Some(failure_reporting) = self.advertisement.borrow().reporting() else {
            return;
        };
        let gate = layered_gate(&self.rights.current());
        let objects_of = |caches: &Caches| {
            let mut objects = caches.objects(&synced, gate);
            objects.failure_reporting = failure_reporting.clone();
            objects
        };
        let objects = self.dirty.then(|| objects_of(&self.caches));
        let config_map_ca = match &objects {
            Some(objects) => objects.config_map_ca(),
            None => self.inputs.as_ref().and_then(|i| i.config_map_ca.clone()),
        };
        let inputs = read_token_dir(&self.settings.bootstrap_token_dir, config_map_ca).await;
        let kubeconfig_changed = self.inputs.as_ref() != Some(&inputs);
        if kubeconfig_changed {
            self.update_kubeconfig(&inputs);
            self.inputs = Some(inputs);
        }
        if objects.is_none() && !kubeconfig_changed {
            return;
        }
        let Some(kubeconfig) = self.kubeconfig.clone() else {
            return;
        };
        let objects = objects.unwrap_or_else(|| objects_of(&self.caches));
        self.dirty = false;

        let fingerprint = objects.fingerprint();
        if let Some((published, published_kubeconfig)) = &self.published {
            if *published == fingerprint && Arc::ptr_eq(published_kubeconfig, &kubeconfig) {
                return;
            }
        }

        self.log_problems(&objects);
        // A change no render reads (an MCN the publisher or a daemon wrote, a Node's
        // addresses) is published for the publisher, under the same generation: the payloads
        // rendered so far stay valid and stay cached.
        let render_fingerprint = objects.render_fingerprint(&mut self.render_digests);
        let renders_change = self.rendered_from.as_ref().is_none_or(|(rendered, from)| {
            *rendered != render_fingerprint || !Arc::ptr_eq(from, &kubeconfig)
        });
        if renders_change {
            self.generation += 1;
            self.rendered_from = Some((render_fingerprint, kubeconfig.clone()));
        }
        let snapshot = build_snapshot(&objects, kubeconfig.clone(), self.generation);
        self.snapshots.send_replace(Arc::new(snapshot));
        self.observer.snapshot_published(self.generation);
        self.published = Some((fingerprint, kubeconfig));
        if !*self.ready.borrow() {
            self.ready.send_replace(true);
            info!(
                generation = self.generation,
                "the caches every pool reads have synced; serving cluster state"
            );
            self.observer.ready();
        }
    }

    fn update_kubeconfig(&mut self, inputs: &KubeconfigInputs) {
        match inputs.build(&self.settings.apiserver_url) {
            Ok(bytes) => {
                if self.kubeconfig.is_some() {
                    info!("token directory or CA bundle changed; serving the updated kubeconfig");
                }
                self.problems.clear(KUBECONFIG_SUBJECT);
                self.kubeconfig = Some(Arc::from(bytes));
            }
            Err(error) => {
                if self
                    .problems
                    .should_log(KUBECONFIG_SUBJECT, &error.to_string())
                {
                    if self.kubeconfig.is_some() {
                        warn!(%error, kind = error.kind(), "cannot rebuild the served kubeconfig; keeping the previous one");
                    } else {
                        warn!(%error, kind = error.kind(), "cannot build the served kubeconfig; not ready until it can be built");
                    }
                }
            }
        }
    }

    fn log_problems(&self, objects: &build::ClusterObjects) {
        let found = problems(objects);
        for problem in &found {
            if self.problems.should_log(&problem.subject, &problem.reason) {
                warn!(subject = %problem.subject, "{}", problem.reason);
            }
        }
        let resolved = self.problems.retain(|subject| {
            subject == KUBECONFIG_SUBJECT || found.iter().any(|p| p.subject == subject)
        });
        for subject in resolved {
            info!(%subject, "resolved");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The advertisement of a server without `--advertise-failure-reporting` is a closed
    /// channel; the builder waiting on it must sleep, not return at once every time (which
    /// spent a core on an idle server).
    #[tokio::test(start_paused = true)]
    async fn an_advertisement_that_can_never_change_never_wakes_the_builder() {
        let mut closed = failure_reporting::off();
        assert!(
            closed.changed().await.is_err(),
            "the advertisement of a server without the flag is a closed channel"
        );
        let mut off = failure_reporting::off();
        let woke =
            tokio::time::timeout(Duration::from_secs(3600), advertisement_changed(&mut off)).await;
        assert!(woke.is_err(), "a closed advertisement woke the builder");
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_advertisement_wakes_the_builder() {
        let (tx, mut rx) = watch::channel(Advertisement::Pending);
        let waiting = tokio::spawn(async move { advertisement_changed(&mut rx).await });
        tx.send(Advertisement::Off).unwrap();
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("the builder woke on the change")
            .unwrap();
    }
}
