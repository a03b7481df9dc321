//! Loading a cluster snapshot: the cluster source started until its caches sync (or the
//! timeout), then stopped. Nothing is written to the cluster.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cli::{PathProblem, RunError, SourceFlags, UsageError};
use crate::source::cluster::{self, ClusterObserver, ClusterSettings};

use super::Loaded;

/// The cluster source started until every cache has synced and the caches of `pools` (every
/// pool when empty) too (or `--timeout-seconds`), then stopped. Nothing is written to the
/// cluster.
pub(super) async fn load_cluster(
    flags: &SourceFlags,
    pools: &[String],
) -> Result<Loaded, RunError> {
    if flags.apiserver_url.is_empty() {
        return Err(UsageError::Missing {
            flag: "--apiserver-url",
            why: " in cluster mode: it is written into the served kubeconfig",
        }
        .into());
    }
    // Without a token the cluster source never becomes ready; say so now, naming the flag.
    let inputs = cluster::kubeconfig::read_token_dir(&flags.bootstrap_token_dir, None).await;
    if let Err(e) = inputs.token {
        return Err(UsageError::Path {
            flag: "--bootstrap-token-dir",
            path: flags.bootstrap_token_dir.clone(),
            problem: PathProblem::Token(e),
        }
        .into());
    }
    let mut settings = ClusterSettings {
        kubeconfig: flags.kubeconfig.clone(),
        bootstrap_token_dir: flags.bootstrap_token_dir.clone(),
        ..ClusterSettings::new(flags.apiserver_url.clone())
    };
    if flags.served.advertise_failure_reporting {
        settings.advertise_failure_reporting();
    }
    let source_name = match &flags.kubeconfig {
        Some(path) => format!("kubeconfig {}", path.display()),
        None => "in-cluster configuration".to_string(),
    };
    let syncs = Arc::new(SyncRecorder::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let source = cluster::start(settings, syncs.clone(), async move {
        let _ = stopped.await;
    })
    .await
    .map_err(UsageError::from)?;

    let timeout = Duration::from_secs(flags.timeout_seconds);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut ready = source.ready.clone();
    let ready = matches!(
        tokio::time::timeout_at(deadline, ready.wait_for(|ready| *ready)).await,
        Ok(Ok(_))
    );
    // Then, within the same time, until the rights are known and the pool's own caches (a
    // layered pool's Nodes, say) have synced, as a request would find them.
    let mut notes = Vec::new();
    if ready {
        let mut grants = source.rights.subscribe();
        let _ = tokio::time::timeout_at(deadline, grants.wait_for(|g| g.is_known())).await;
        let mut snapshots = source.snapshots.clone();
        let synced = tokio::time::timeout_at(
            deadline,
            snapshots.wait_for(|s| {
                let every_pool: Vec<&String> = s.pools.keys().collect();
                let names: Vec<&String> = if pools.is_empty() {
                    every_pool
                } else {
                    pools.iter().collect()
                };
                names
                    .into_iter()
                    .all(|pool| crate::render::waiting_for(s, pool).is_empty())
            }),
        )
        .await;
        if !matches!(synced, Ok(Ok(_))) {
            let which = if pools.is_empty() {
                "every pool".to_string()
            } else {
                format!("pool {}", pools.join(", pool "))
            };
            notes.push(format!(
                "the caches {which} reads had not all synced within {} s (--timeout-seconds)",
                timeout.as_secs()
            ));
        }
    }
    let features = Some(super::FeatureReport::all(&source.rights.current()));
    let snapshot = source.snapshots.borrow().clone();
    let _ = stop.send(());
    if tokio::time::timeout(Duration::from_secs(5), source.join())
        .await
        .is_err()
    {
        tracing::warn!("the cluster source did not stop within 5 s");
    }
    if !ready {
        notes.push(syncs.summary(timeout));
    }
    Ok(Loaded {
        snapshot,
        ready,
        source: source_name,
        notes,
        features,
    })
}

/// Records which watch caches synced and which failed, to say why a cluster was not ready.
#[derive(Default)]
pub(super) struct SyncRecorder {
    kinds: Mutex<BTreeMap<&'static str, Option<&'static str>>>,
}

impl SyncRecorder {
    pub(super) fn record(&self, kind: &'static str, failure: Option<&'static str>) {
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        match (kinds.get(kind), failure) {
            // A failure after the cache synced does not make it unsynced.
            (Some(None), Some(_)) => {}
            _ => {
                kinds.insert(kind, failure);
            }
        }
    }

    pub(super) fn summary(&self, waited: Duration) -> String {
        let kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        let synced: Vec<&str> = kinds
            .iter()
            .filter(|(_, failure)| failure.is_none())
            .map(|(kind, _)| *kind)
            .collect();
        let failing: Vec<String> = kinds
            .iter()
            .filter_map(|(kind, failure)| failure.map(|reason| format!("{kind} ({reason})")))
            .collect();
        let list = |items: Vec<String>| {
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join(", ")
            }
        };
        format!(
            "the watch caches did not all sync within {} s (--timeout-seconds); failing: {}; synced: {}",
            waited.as_secs(),
            list(failing),
            list(synced.into_iter().map(str::to_string).collect())
        )
    }
}

impl ClusterObserver for SyncRecorder {
    fn watch_failed(&self, kind: &'static str, reason: &'static str) {
        self.record(kind, Some(reason));
    }

    fn cache_synced(&self, kind: &'static str) {
        self.record(kind, None);
    }
}
