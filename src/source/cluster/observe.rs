//! What the cluster source reports about itself: the [`ClusterObserver`] hook (metrics attach
//! here without this module depending on them) and [`ApiReachability`], which turns the
//! outcome of every Kubernetes API request into one log line and one callback per transition
//! between "reachable" and "unreachable".
//!
//! Owns no metric and no I/O: it only calls the observer and logs.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::metrics::{unix_now, Metrics};

/// Callbacks for what the cluster source observes. Every method has an empty default so an
/// implementation picks what it records. Kinds are kind names (`MachineConfigPool`,
/// `ConfigMap`, ...). Calls happen on source tasks and must not block.
pub trait ClusterObserver: Send + Sync + 'static {
    /// A watch of `kind` started over from a full list (after an error, a 410 Gone or a
    /// server-side timeout that lost its place); the first list is not a restart.
    fn watch_restarted(&self, _kind: &'static str) {}
    /// A list or watch of `kind` failed; `reason` is a short label (`unreachable`, `forbidden`,
    /// `not_found`, `gone`, `api_error`, `decode`).
    fn watch_failed(&self, _kind: &'static str, _reason: &'static str) {}
    /// The cache of `kind` holds a complete list (initially and after every re-list).
    fn cache_synced(&self, _kind: &'static str) {}
    /// The cache of `kind` applied a watch event.
    fn cache_updated(&self, _kind: &'static str) {}
    /// The Kubernetes API became unreachable (`false`) or reachable again (`true`).
    fn api_reachability_changed(&self, _reachable: bool) {}
    /// A snapshot with this generation was published.
    fn snapshot_published(&self, _generation: u64) {}
    /// Every cache synced and the first complete snapshot was published.
    fn ready(&self) {}
    /// A feature beyond the original is on or off now (`feature`: its stable name).
    fn feature_enabled(&self, _feature: &'static str, _enabled: bool) {}
}

/// An observer that records nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopObserver;

impl ClusterObserver for NoopObserver {}

/// The server's metrics: watch restarts and last sync time per kind, API reachability.
impl ClusterObserver for Metrics {
    fn watch_restarted(&self, kind: &'static str) {
        self.watch_restart(kind);
    }

    fn cache_synced(&self, kind: &'static str) {
        self.synced(kind, unix_now());
    }

    fn cache_updated(&self, kind: &'static str) {
        self.synced(kind, unix_now());
    }

    fn api_reachability_changed(&self, reachable: bool) {
        self.set_api_reachable(reachable);
    }

    fn feature_enabled(&self, feature: &'static str, enabled: bool) {
        self.set_feature_enabled(feature, enabled);
    }
}

/// Whether the Kubernetes API answers, derived from the outcome of every request the client
/// makes: any HTTP response means reachable, a transport error (refused, reset, timeout) means
/// unreachable. The first outcome is always reported (so a gauge starts right) but logged only
/// when it is a failure.
#[derive(Clone)]
pub struct ApiReachability {
    reachable: Arc<Mutex<Option<bool>>>,
    observer: Arc<dyn ClusterObserver>,
    /// Counts the API's successful (2xx) answers.
    successes: watch::Sender<u64>,
}

impl ApiReachability {
    pub fn new(observer: Arc<dyn ClusterObserver>) -> Self {
        ApiReachability {
            reachable: Arc::new(Mutex::new(None)),
            observer,
            successes: watch::Sender::new(0),
        }
    }

    /// Records the outcome of one request; logs and reports only transitions.
    pub fn record(&self, reachable: bool, detail: &dyn std::fmt::Display) {
        let previous = {
            let mut current = match self.reachable.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            current.replace(reachable)
        };
        if previous == Some(reachable) {
            return;
        }
        if reachable && previous.is_none() {
            debug!("Kubernetes API answered");
        } else if reachable {
            info!("Kubernetes API is reachable again; watches resume");
        } else {
            warn!(error = %detail, "Kubernetes API is unreachable; serving the last known state while watches retry with backoff");
        }
        self.observer.api_reachability_changed(reachable);
    }

    /// The API answered a request with a 2xx.
    pub fn record_success(&self) {
        self.successes
            .send_modify(|count| *count = count.wrapping_add(1));
    }

    /// Changes with every successful (2xx) answer of the API: a writer backing off after a
    /// failure (an outage, 429s, 5xx) learns that the API works again without waiting out its
    /// backoff.
    pub fn successes(&self) -> watch::Receiver<u64> {
        self.successes.subscribe()
    }

    /// Whether the last request got an answer; `None` before the first request ends.
    pub fn is_reachable(&self) -> Option<bool> {
        match self.reachable.lock() {
            Ok(guard) => *guard,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counting {
        down: AtomicUsize,
        up: AtomicUsize,
    }

    impl ClusterObserver for Counting {
        fn api_reachability_changed(&self, reachable: bool) {
            if reachable {
                self.up.fetch_add(1, Ordering::SeqCst);
            } else {
                self.down.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    #[test]
    fn only_transitions_are_reported() {
        let observer = Arc::new(Counting::default());
        let reachability = ApiReachability::new(observer.clone());
        assert_eq!(reachability.is_reachable(), None);
        reachability.record(true, &"ok");
        reachability.record(true, &"ok");
        reachability.record(false, &"refused");
        reachability.record(false, &"refused");
        reachability.record(false, &"refused");
        assert_eq!(reachability.is_reachable(), Some(false));
        reachability.record(true, &"200");
        reachability.record(true, &"200");
        assert_eq!(observer.down.load(Ordering::SeqCst), 1);
        assert_eq!(observer.up.load(Ordering::SeqCst), 2);
    }
}
