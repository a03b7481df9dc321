//! Certificate reload: polls the certificate and key files and publishes a new
//! `Arc<rustls::ServerConfig>` on a `watch` channel once the new pair validates.
//!
//! Every interval (default 1 s) the poller stats both paths, following symlinks, and compares
//! (device, inode, size, mtime, ctime). That notices in-place writes, editors that write a new file
//! and rename it over the old one, and Kubernetes secret volumes, where `tls.crt` points through
//! the `..data` symlink into a timestamped directory that is swapped atomically. A change is acted
//! on once it has been stable for one more interval, so a writer that replaces the certificate and
//! then the key is not caught half-way. Then the files are read; identical contents are a no-op;
//! a pair that does not validate (unreadable, partial, corrupt, key not matching) keeps the current
//! config serving, is logged once and counted once, and is not retried until the files change
//! again. New connections pick up whichever config is current; open connections keep theirs, and
//! sessions made with the old certificate are not resumed by the new config.
//!
//! Owns the polling task and its counters. Must not touch: sockets, the metrics registry (callers
//! read [`ReloadStats`] or pass a [`ReloadObserver`]).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::ServerConfig;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use serde::Serialize;

use super::load::{build, LoadedCertificate, PemPair};
use super::{KeyKind, TlsError, TlsPolicy};

/// How often the files are checked unless the caller says otherwise.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// What one reload attempt did. Attempts happen only when the files changed.
#[derive(Debug)]
pub enum ReloadOutcome {
    /// A new pair validated and is now served to new connections.
    Reloaded {
        /// The new leaf certificate's notAfter, seconds since the Unix epoch.
        not_after_unix: i64,
        /// What its key is.
        key: Option<KeyKind>,
    },
    /// The changed files do not make a valid pair; the previous config keeps serving.
    Rejected {
        /// Why; `error.kind()` is a metric label.
        error: TlsError,
    },
}

/// Called after every reload attempt, on the reloader's task; keep it quick (e.g. bump a metric).
pub type ReloadObserver = Arc<dyn Fn(&ReloadOutcome) + Send + Sync>;

/// Reload counters and the serving certificate's expiry. Cheap to clone; all clones share state.
#[derive(Clone, Debug, Default)]
pub struct ReloadStats {
    inner: Arc<StatsInner>,
}

#[derive(Debug, Default)]
struct StatsInner {
    successes: AtomicU64,
    failures: AtomicU64,
    not_after_unix: AtomicI64,
    /// What the status page shows; written only by the reloader, on a change of files.
    state: Mutex<CertificateState>,
}

/// Which files hold the serving certificate, what it is and since when it is served, and the
/// newest reload that was refused (kept until a later one succeeds): the admin listener's
/// `/status` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CertificateState {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// The key's algorithm and size (`ECDSA P-521`, `RSA 8192`), or `unknown`.
    pub key: String,
    /// The leaf certificate's notAfter, seconds since the Unix epoch.
    pub not_after_unix: i64,
    /// When this pair began to be served to new connections (start or reload).
    pub serving_since_unix: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_rejected: Option<RejectedReload>,
}

/// A reload that was refused: the previous certificate kept serving.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RejectedReload {
    pub at_unix: i64,
    /// The one error line that was logged.
    pub error: String,
    /// Its kind, as the metric counts it.
    pub kind: &'static str,
}

impl ReloadStats {
    /// Reloads that swapped in a new config (the initial load is not counted).
    pub fn successes(&self) -> u64 {
        self.inner.successes.load(Ordering::Relaxed)
    }

    /// Changed file states that were rejected (each bad state counts once).
    pub fn failures(&self) -> u64 {
        self.inner.failures.load(Ordering::Relaxed)
    }

    /// The serving leaf certificate's notAfter, seconds since the Unix epoch.
    pub fn not_after_unix(&self) -> i64 {
        self.inner.not_after_unix.load(Ordering::Relaxed)
    }

    /// What is served, from which files, since when, and the newest refused reload.
    pub fn certificate(&self) -> CertificateState {
        self.state().clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CertificateState> {
        // Only plain field writes happen under the lock: a poisoned one still holds a state.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn serving(&self, not_after_unix: i64, key: Option<&KeyKind>) {
        let mut state = self.state();
        state.key = key.map_or_else(|| "unknown".to_owned(), KeyKind::to_string);
        state.not_after_unix = not_after_unix;
        state.serving_since_unix = unix_now();
        state.last_rejected = None;
    }

    fn record(&self, outcome: &ReloadOutcome) {
        match outcome {
            ReloadOutcome::Reloaded {
                not_after_unix,
                key,
            } => {
                self.inner
                    .not_after_unix
                    .store(*not_after_unix, Ordering::Relaxed);
                self.inner.successes.fetch_add(1, Ordering::Relaxed);
                self.serving(*not_after_unix, key.as_ref());
            }
            ReloadOutcome::Rejected { error } => {
                self.inner.failures.fetch_add(1, Ordering::Relaxed);
                self.state().last_rejected = Some(RejectedReload {
                    at_unix: unix_now(),
                    error: error.to_string(),
                    kind: error.kind(),
                });
            }
        }
    }
}

/// Serves the current TLS config and keeps it up to date with the files. Keep it alive for as
/// long as the server runs: dropping it (or [`TlsReloader::stop`]) ends the polling task, and the
/// last config stays in the channel.
#[must_use = "dropping the reloader stops certificate reload"]
pub struct TlsReloader {
    configs: watch::Receiver<Arc<ServerConfig>>,
    stats: ReloadStats,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl TlsReloader {
    /// Loads the pair (a start-up error if it is invalid) and starts polling every `interval`.
    /// Must be called within a Tokio runtime.
    pub fn start(
        cert: &Path,
        key: &Path,
        policy: TlsPolicy,
        interval: Duration,
    ) -> Result<Self, TlsError> {
        Self::start_with_observer(
            cert,
            key,
            policy,
            interval,
            Arc::new(|_: &ReloadOutcome| {}),
        )
    }

    /// Like [`Self::start`], and calls `observer` after every reload attempt.
    pub fn start_with_observer(
        cert: &Path,
        key: &Path,
        policy: TlsPolicy,
        interval: Duration,
        observer: ReloadObserver,
    ) -> Result<Self, TlsError> {
        let (poller, initial) = Poller::new(cert, key, policy)?;
        warn_if_expired(cert, initial.not_after_unix);
        let stats = ReloadStats::default();
        stats
            .inner
            .not_after_unix
            .store(initial.not_after_unix, Ordering::Relaxed);
        {
            let mut state = stats.state();
            state.cert_file = cert.to_owned();
            state.key_file = key.to_owned();
        }
        stats.serving(initial.not_after_unix, initial.key.as_ref());
        let (sender, configs) = watch::channel(initial.config);
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(poll_loop(
            poller,
            sender,
            stats.clone(),
            observer,
            interval,
            stopped,
        ));
        Ok(Self {
            configs,
            stats,
            stop,
            task,
        })
    }

    /// A receiver of the current config; `borrow()` it for each new connection.
    pub fn subscribe(&self) -> watch::Receiver<Arc<ServerConfig>> {
        self.configs.clone()
    }

    /// The config new connections get now.
    pub fn current(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.configs.borrow())
    }

    /// Reload counters and the serving certificate's expiry.
    pub fn stats(&self) -> ReloadStats {
        self.stats.clone()
    }

    /// Stops polling and waits for the task to end.
    pub async fn stop(self) {
        // The task may already have ended; then there is nobody to tell.
        let _ = self.stop.send(());
        if let Err(err) = self.task.await {
            tracing::error!(error = %err, "TLS certificate reload task failed");
        }
    }
}

async fn poll_loop(
    mut poller: Poller,
    sender: watch::Sender<Arc<ServerConfig>>,
    stats: ReloadStats,
    observer: ReloadObserver,
    interval: Duration,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await; // the first tick is immediate; the files were just loaded
    loop {
        tokio::select! {
            // A stop request, or the reloader was dropped.
            _ = &mut stopped => return,
            _ = ticker.tick() => {}
        }
        // stat() and read() block; keep them off the async workers.
        let joined = tokio::task::spawn_blocking(move || {
            let attempt = poller.poll();
            (poller, attempt)
        })
        .await;
        let attempt = match joined {
            Ok((returned, attempt)) => {
                poller = returned;
                attempt
            }
            Err(err) => {
                tracing::error!(error = %err, "TLS certificate reload stopped: poll failed");
                return;
            }
        };
        let outcome = match attempt {
            None => continue,
            Some(Ok(loaded)) => {
                let kind = loaded
                    .key
                    .as_ref()
                    .map_or_else(|| "unknown".to_owned(), KeyKind::to_string);
                tracing::info!(
                    cert = %poller.cert.display(),
                    key = %poller.key.display(),
                    key_kind = %kind,
                    not_after_unix = loaded.not_after_unix,
                    "reloaded TLS certificate; new connections use it"
                );
                warn_if_expired(&poller.cert, loaded.not_after_unix);
                sender.send_replace(loaded.config);
                ReloadOutcome::Reloaded {
                    not_after_unix: loaded.not_after_unix,
                    key: loaded.key,
                }
            }
            Some(Err(error)) => {
                tracing::error!(
                    error = %error,
                    kind = error.kind(),
                    "TLS certificate reload rejected; still serving the previous certificate"
                );
                ReloadOutcome::Rejected { error }
            }
        };
        stats.record(&outcome);
        observer(&outcome);
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

fn warn_if_expired(cert: &Path, not_after_unix: i64) {
    if not_after_unix < unix_now() {
        tracing::warn!(
            cert = %cert.display(),
            not_after_unix,
            "TLS certificate has expired; clients will reject it"
        );
    }
}

/// Identity and change markers of one file, following symlinks; `Err` keeps the kind of failure
/// so that "missing" and "unreadable" are distinct states.
type FileStamp = Result<(u64, u64, u64, i64, i64, i64, i64), std::io::ErrorKind>;

fn file_stamp(path: &Path) -> FileStamp {
    std::fs::metadata(path)
        .map(|meta| {
            (
                meta.dev(),
                meta.ino(),
                meta.size(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec(),
            )
        })
        .map_err(|err| err.kind())
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct PairStamp {
    cert: FileStamp,
    key: FileStamp,
}

impl PairStamp {
    fn of(cert: &Path, key: &Path) -> Self {
        Self {
            cert: file_stamp(cert),
            key: file_stamp(key),
        }
    }
}

/// The change-detection state machine, free of async so it can be driven step by step.
struct Poller {
    cert: PathBuf,
    key: PathBuf,
    policy: TlsPolicy,
    /// The file state last acted on (loaded or rejected).
    handled: PairStamp,
    /// A new file state seen once, waiting to be seen again unchanged.
    settling: Option<PairStamp>,
    /// The contents now serving.
    serving: PemPair,
}

impl Poller {
    fn new(
        cert: &Path,
        key: &Path,
        policy: TlsPolicy,
    ) -> Result<(Self, LoadedCertificate), TlsError> {
        // Stamp before reading: a change during the read shows up as a new stamp later.
        let handled = PairStamp::of(cert, key);
        let serving = PemPair::read(cert, key)?;
        let loaded = build(&serving, &policy)?;
        let poller = Self {
            cert: cert.to_owned(),
            key: key.to_owned(),
            policy,
            handled,
            settling: None,
            serving,
        };
        Ok((poller, loaded))
    }

    /// One poll: `None` when there is nothing to do, else the result of a reload attempt.
    fn poll(&mut self) -> Option<Result<LoadedCertificate, TlsError>> {
        let stamp = PairStamp::of(&self.cert, &self.key);
        if stamp == self.handled {
            self.settling = None;
            return None;
        }
        if self.settling.as_ref() != Some(&stamp) {
            self.settling = Some(stamp);
            return None;
        }
        self.settling = None;
        self.handled = stamp;
        let pair = match PemPair::read(&self.cert, &self.key) {
            Ok(pair) => pair,
            Err(err) => return Some(Err(err)),
        };
        if pair == self.serving {
            return None; // touched or rewritten with the same contents
        }
        let loaded = build(&pair, &self.policy);
        if loaded.is_ok() {
            self.serving = pair;
        }
        Some(loaded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pair {
        cert: String,
        key: String,
    }

    fn generate(name: &str) -> Pair {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        Pair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    fn write(dir: &Path, pair: &Pair) {
        std::fs::write(dir.join("tls.crt"), &pair.cert).unwrap();
        std::fs::write(dir.join("tls.key"), &pair.key).unwrap();
    }

    fn poller(dir: &Path) -> Poller {
        Poller::new(
            &dir.join("tls.crt"),
            &dir.join("tls.key"),
            TlsPolicy::intermediate(),
        )
        .unwrap()
        .0
    }

    #[test]
    fn a_change_is_loaded_after_it_settles() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &generate("one"));
        let mut poller = poller(dir.path());
        assert!(poller.poll().is_none());

        write(dir.path(), &generate("two"));
        assert!(
            poller.poll().is_none(),
            "first sight: wait for it to settle"
        );
        let loaded = poller.poll().expect("attempt").expect("valid pair");
        assert!(loaded.not_after_unix > 0);
        assert!(poller.poll().is_none(), "nothing changed since");
    }

    #[test]
    fn a_half_written_pair_is_not_attempted_while_it_keeps_changing() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &generate("one"));
        let mut poller = poller(dir.path());
        let next = generate("two");
        std::fs::write(dir.path().join("tls.crt"), &next.cert).unwrap();
        assert!(poller.poll().is_none());
        std::fs::write(dir.path().join("tls.key"), &next.key).unwrap();
        assert!(poller.poll().is_none(), "changed again: still settling");
        assert!(poller.poll().expect("attempt").is_ok());
    }

    #[test]
    fn a_bad_state_is_reported_once_and_the_same_contents_are_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let original = generate("one");
        write(dir.path(), &original);
        let mut poller = poller(dir.path());

        // Mismatched: the key of another pair.
        std::fs::write(dir.path().join("tls.key"), generate("other").key).unwrap();
        assert!(poller.poll().is_none());
        let err = poller.poll().expect("attempt").unwrap_err();
        assert_eq!(err.kind(), "key_mismatch");
        for _ in 0..3 {
            assert!(
                poller.poll().is_none(),
                "same bad state: not reported again"
            );
        }

        // Back to the serving contents (new inode, same bytes): nothing to reload.
        std::fs::remove_file(dir.path().join("tls.key")).unwrap();
        std::fs::write(dir.path().join("tls.key"), &original.key).unwrap();
        assert!(poller.poll().is_none());
        assert!(poller.poll().is_none());

        // A missing key file is a bad state too.
        std::fs::remove_file(dir.path().join("tls.key")).unwrap();
        assert!(poller.poll().is_none());
        assert_eq!(poller.poll().expect("attempt").unwrap_err().kind(), "read");
    }

    #[test]
    fn stats_count_outcomes() {
        let stats = ReloadStats::default();
        stats.record(&ReloadOutcome::Reloaded {
            not_after_unix: 42,
            key: None,
        });
        stats.record(&ReloadOutcome::Rejected {
            error: TlsError::KeyMismatch {
                cert: "c".into(),
                key: "k".into(),
            },
        });
        assert_eq!(
            (stats.successes(), stats.failures(), stats.not_after_unix()),
            (1, 1, 42)
        );
    }
}
