//! WATCH: the streaming response of newline-delimited JSON watch events.
//!
//! Owns the watch semantics: where a watch starts (synthetic ADDED events for "any"/unset
//! versions and `sendInitialEvents=true` streaming lists with their `k8s.io/initial-events-end`
//! bookmark; replay from the history for a given resourceVersion; an `ERROR` event with a 410
//! `Expired` Status when that version is older than the history), selector transitions
//! (an object that stops matching is DELETED for that watcher), periodic BOOKMARKs, and
//! `timeoutSeconds`. The stream ends when the client goes away or the server stops; it holds the
//! store lock only while reading, never across an `.await`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::broadcast;
use tokio::time::{Instant, Interval};

use super::registry::{ResourceDef, ResourceId};
use super::selectors::Selectors;
use super::status::ApiError;
use super::store::{parse_revision, served_as, Change, ChangeKind, Store};

/// Parameters of one WATCH request.
#[derive(Clone, Debug)]
pub struct WatchParams {
    pub resource: ResourceId,
    /// `None` watches all namespaces (or a cluster-scoped resource).
    pub namespace: Option<String>,
    pub selectors: Selectors,
    pub resource_version: Option<String>,
    pub send_initial_events: bool,
    pub allow_bookmarks: bool,
    pub timeout: Option<Duration>,
    pub bookmark_interval: Duration,
    /// `Accept: ...;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`: send metadata only.
    pub metadata_only: bool,
}

/// Where a watch reads: the storage slot of its resource, and the kind its objects are
/// served as (converted when another API of the same storage wrote them).
#[derive(Clone, Debug)]
struct Source {
    slot: ResourceId,
    def: ResourceDef,
}

/// A running watch: the events still to send and the live feed of changes.
pub struct WatchStream {
    store: Arc<Mutex<Store>>,
    def: ResourceDef,
    params: WatchParams,
    source: Source,
    pending: VecDeque<Bytes>,
    changes: broadcast::Receiver<Arc<Change>>,
    /// Every change up to this revision has been considered (sent or filtered out).
    seen_revision: u64,
    bookmarks: Option<Interval>,
    deadline: Option<Instant>,
    finished: bool,
}

impl WatchStream {
    /// Starts a watch: reads the start state under the store lock and subscribes to changes in
    /// the same critical section, so nothing is missed or duplicated.
    pub fn start(
        store: Arc<Mutex<Store>>,
        def: ResourceDef,
        params: WatchParams,
    ) -> Result<Self, ApiError> {
        if params.send_initial_events && !params.allow_bookmarks {
            return Err(ApiError::new(
                422,
                "Invalid",
                "ListOptions.meta.k8s.io \"\" is invalid: allowWatchBookmarks: Required value: allowWatchBookmarks must be set to true when sendInitialEvents is set",
            ));
        }
        let requested = match params.resource_version.as_deref() {
            None | Some("") | Some("0") => None,
            Some(rv) => Some(parse_revision(rv)?),
        };
        let mut pending = VecDeque::new();
        let mut finished = false;
        let (changes, seen_revision, source) = {
            let store_guard = store.lock().map_err(|_| poisoned())?;
            let source = Source {
                slot: store_guard.slot(params.resource),
                def: def.clone(),
            };
            let changes = store_guard.subscribe();
            let now = store_guard.revision();
            let initial = params.send_initial_events || requested.is_none();
            if initial {
                for stored in store_guard.objects(params.resource, params.namespace.as_deref()) {
                    let object = served_as(&source.def, stored);
                    if params.selectors.matches(&object) {
                        pending.push_back(object_event(&params, "ADDED", &object));
                    }
                }
                if params.send_initial_events {
                    pending.push_back(bookmark_line(&def, &params, now, true));
                }
            } else if let Some(from) = requested {
                if from < store_guard.oldest_resumable() {
                    let gone = ApiError::expired(format!(
                        "too old resource version: {from} ({})",
                        store_guard.oldest_resumable()
                    ));
                    pending.push_back(event_line("ERROR", &gone.to_status()));
                    finished = true;
                } else {
                    for change in store_guard.history_after(from) {
                        if let Some(line) = filter_change(&params, &source, change) {
                            pending.push_back(line);
                        }
                    }
                }
            }
            (changes, now, source)
        };
        let bookmarks = params.allow_bookmarks.then(|| {
            let period = params.bookmark_interval.max(Duration::from_millis(10));
            tokio::time::interval_at(Instant::now() + period, period)
        });
        // A timeout too large to represent means "no timeout".
        let deadline = params.timeout.and_then(|t| Instant::now().checked_add(t));
        Ok(WatchStream {
            store,
            def,
            params,
            source,
            pending,
            changes,
            seen_revision,
            bookmarks,
            deadline,
            finished,
        })
    }

    /// The next chunk of the response body, or `None` when the watch ends.
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(line);
            }
            if self.finished {
                return None;
            }
            let deadline = self.deadline;
            let timed_out = async move {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            let bookmarks = &mut self.bookmarks;
            let tick = async move {
                match bookmarks {
                    Some(interval) => {
                        interval.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = timed_out => return None,
                _ = tick => self.bookmark(),
                received = self.changes.recv() => match received {
                    Ok(change) => self.consider(&change),
                    // A watcher that falls this far behind is closed, as Kubernetes closes slow
                    // watchers; the client resumes from its last resourceVersion.
                    Err(broadcast::error::RecvError::Lagged(_)) => return None,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    }

    fn consider(&mut self, change: &Change) {
        self.seen_revision = self.seen_revision.max(change.revision);
        if let Some(line) = filter_change(&self.params, &self.source, change) {
            self.pending.push_back(line);
        }
    }

    /// Queues a BOOKMARK at a revision this watcher has fully caught up with: every change
    /// committed before the store's current revision was read is drained first.
    fn bookmark(&mut self) {
        let Ok(current) = self.store.lock().map(|s| s.revision()) else {
            self.finished = true;
            return;
        };
        loop {
            match self.changes.try_recv() {
                Ok(change) => self.consider(&change),
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(_) => {
                    self.finished = true;
                    return;
                }
            }
        }
        let revision = self.seen_revision.max(current);
        self.seen_revision = revision;
        self.pending
            .push_back(bookmark_line(&self.def, &self.params, revision, false));
    }
}

fn poisoned() -> ApiError {
    ApiError::new(500, "InternalError", "store lock poisoned")
}

/// The watch event a change produces for this watcher, if any, with selector transitions:
/// an object entering the selection is ADDED, one leaving it is DELETED.
fn filter_change(params: &WatchParams, source: &Source, change: &Change) -> Option<Bytes> {
    if change.resource != source.slot {
        return None;
    }
    if let Some(ns) = &params.namespace {
        if *ns != change.namespace {
            return None;
        }
    }
    let object = served_as(&source.def, &change.object);
    let now = params.selectors.matches(&object);
    let before = change
        .previous
        .as_ref()
        .is_some_and(|p| params.selectors.matches(&served_as(&source.def, p)));
    let kind = match change.kind {
        ChangeKind::Added if now => "ADDED",
        ChangeKind::Modified if now && before => "MODIFIED",
        ChangeKind::Modified if now => "ADDED",
        ChangeKind::Modified if before => "DELETED",
        ChangeKind::Deleted if now || before => "DELETED",
        _ => return None,
    };
    Some(object_event(params, kind, &object))
}

/// A watch event for an object, in the representation the client asked for.
fn object_event(params: &WatchParams, kind: &str, object: &Value) -> Bytes {
    if params.metadata_only {
        event_line(kind, &partial_metadata(object))
    } else {
        event_line(kind, object)
    }
}

/// The `meta.k8s.io/v1` `PartialObjectMetadata` form of an object.
pub fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({ "type": kind, "object": object }).to_string();
    line.push('\n');
    Bytes::from(line)
}

fn bookmark_line(
    def: &ResourceDef,
    params: &WatchParams,
    revision: u64,
    initial_events_end: bool,
) -> Bytes {
    let mut metadata = json!({ "resourceVersion": revision.to_string() });
    if initial_events_end {
        metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    let object = json!({ "kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata });
    object_event(params, "BOOKMARK", &object)
}
