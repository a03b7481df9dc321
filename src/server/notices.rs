//! What the request path and the MachineConfigNode publisher tell the Kubernetes Event
//! publisher ([`crate::events`]): a render that failed or succeeded for a pool, the first
//! config a Node's machine was served, a machine's first-boot failure (from the shared records,
//! so that a report any replica received reaches the lease holder), and config requests refused
//! for a too old Ignition. Sending never blocks and never fails the sender: a full
//! queue drops the notice and counts it (`mcs_events_total{result="dropped"}`).
//!
//! Owns the notices and their channel, so that the request path and the publisher above it
//! share one type without the server depending on the tasks that read it.

use std::collections::{HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::UNIX_EPOCH;

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use tokio::sync::mpsc;

use super::served::{FailureRecord, ServedRecord};
use crate::ignition::SpecVersion;
use crate::metrics::Metrics;

/// Notices waiting for the publisher; more are dropped.
pub(crate) const QUEUE: usize = 1024;
/// Node uids remembered as announced (a cluster's nodes; the oldest is forgotten beyond).
const ANNOUNCED_NODES: usize = 8192;
/// Failure reports remembered as announced (the oldest is forgotten beyond).
const ANNOUNCED_FAILURES: usize = 4096;

/// What the request path and the MachineConfigNode publisher tell the event publisher.
#[derive(Clone, Debug)]
pub enum Notice {
    /// A render for an existing pool failed (`kind`: the error's kind; `message`: its chain).
    RenderFailed {
        pool: String,
        version: SpecVersion,
        kind: &'static str,
        status: u16,
        message: String,
    },
    /// A render for the pool succeeded (a later failure is news again).
    Rendered { pool: String, version: SpecVersion },
    /// The publisher matched a served record to this Node: the first config its machine got.
    FirstConfigServed {
        node: ObjectReference,
        record: ServedRecord,
    },
    /// A machine at `address` reported a first-boot failure (already sanitized).
    FirstbootFailed {
        address: IpAddr,
        failure: FailureRecord,
    },
    /// Config requests for `pool` from Ignition `client` were refused: older than `minimum`.
    IgnitionTooOld {
        pool: String,
        client: String,
        minimum: String,
    },
}

/// Which failure reports were announced: (address, time in ms, node ID), bounded.
type FailureKey = (IpAddr, u128, String);

/// The sending side, cheap to clone; every call returns at once. The default handle sends
/// nowhere (bootstrap mode, tests).
#[derive(Clone, Debug, Default)]
pub struct EventNotices {
    inner: Option<Arc<NoticesInner>>,
}

#[derive(Debug)]
struct NoticesInner {
    tx: mpsc::Sender<Notice>,
    metrics: Arc<Metrics>,
    announced: Mutex<(HashSet<String>, VecDeque<String>)>,
    announced_failures: Mutex<(HashSet<FailureKey>, VecDeque<FailureKey>)>,
}

impl EventNotices {
    /// A handle and the receiver the event publisher ([`crate::events::start`]) reads.
    pub fn channel(metrics: Arc<Metrics>) -> (Self, mpsc::Receiver<Notice>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let inner = NoticesInner {
            tx,
            metrics,
            announced: Mutex::new((HashSet::new(), VecDeque::new())),
            announced_failures: Mutex::new((HashSet::new(), VecDeque::new())),
        };
        (
            EventNotices {
                inner: Some(Arc::new(inner)),
            },
            rx,
        )
    }

    /// A render for `pool` (an existing pool) in spec `version` failed.
    pub fn render_failed(
        &self,
        pool: &str,
        version: SpecVersion,
        kind: &'static str,
        status: u16,
        message: String,
    ) {
        self.send(Notice::RenderFailed {
            pool: pool.to_owned(),
            version,
            kind,
            status,
            message,
        });
    }

    /// A render for `pool` in spec `version` succeeded.
    pub fn rendered(&self, pool: &str, version: SpecVersion) {
        self.send(Notice::Rendered {
            pool: pool.to_owned(),
            version,
        });
    }

    /// The MachineConfigNode publisher's hook: `record` is what `node`'s machine was served
    /// before it joined. Announced once per Node uid; later calls for it do nothing.
    pub fn first_config_served(&self, node: &Node, record: &ServedRecord) {
        let Some(inner) = &self.inner else { return };
        let Some(uid) = node.metadata.uid.clone() else {
            return;
        };
        // Held while sending (a non-blocking `try_send`), so that a Node counts as announced
        // only once its notice is queued: one dropped on a full queue is sent on a later pass.
        let mut announced = inner
            .announced
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if announced.0.contains(&uid) {
            return;
        }
        let queued = self.send(Notice::FirstConfigServed {
            node: reference(node),
            record: record.clone(),
        });
        if !queued {
            return;
        }
        announced.0.insert(uid.clone());
        announced.1.push_back(uid);
        while announced.1.len() > ANNOUNCED_NODES {
            if let Some(oldest) = announced.1.pop_front() {
                announced.0.remove(&oldest);
            }
        }
    }

    /// The publisher's hook, on every pass: the first-boot failures of every replica's records
    /// (own memory and shared). Each report is announced once (by address, time and node ID);
    /// one dropped on a full queue is sent on a later pass.
    pub fn firstboot_failures<'a>(
        &self,
        failures: impl IntoIterator<Item = (IpAddr, &'a FailureRecord)>,
    ) {
        let Some(inner) = &self.inner else { return };
        let mut announced = inner
            .announced_failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (address, failure) in failures {
            let at = failure
                .reported_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            let key = (address.to_canonical(), at, failure.node_id.clone());
            if announced.0.contains(&key) {
                continue;
            }
            let queued = self.send(Notice::FirstbootFailed {
                address: key.0,
                failure: failure.clone(),
            });
            if !queued {
                return;
            }
            announced.0.insert(key.clone());
            announced.1.push_back(key);
            while announced.1.len() > ANNOUNCED_FAILURES {
                if let Some(oldest) = announced.1.pop_front() {
                    announced.0.remove(&oldest);
                }
            }
        }
    }

    /// Config requests for `pool` from Ignition `client` were refused (older than `minimum`);
    /// the caller sends this at most once per pool and interval.
    pub fn ignition_too_old(&self, pool: &str, client: &str, minimum: &str) {
        self.send(Notice::IgnitionTooOld {
            pool: pool.to_owned(),
            client: client.to_owned(),
            minimum: minimum.to_owned(),
        });
    }

    /// Queues `notice`; false (counted as dropped) when the queue is full or closed.
    fn send(&self, notice: Notice) -> bool {
        let Some(inner) = &self.inner else {
            return false;
        };
        let queued = inner.tx.try_send(notice).is_ok();
        if !queued {
            inner.metrics.kube_event("dropped");
            tracing::debug!("event notice queue full or closed; notice dropped");
        }
        queued
    }
}

/// A reference naming the object (kind, name, uid), without the resourceVersion: the
/// recorder aggregates repeats by reference, and a new resourceVersion is the same object.
pub fn reference<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    let meta: &ObjectMeta = object.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        ..ObjectReference::default()
    }
}
