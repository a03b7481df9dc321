//! The last layered decision served per pool: logs each one (debug) and each change (info), and
//! backs the read-only status page. Stateful, so it lives outside the pure [`super::decide`];
//! the server owns one in its application state and calls [`DecisionTracker::record`] for every
//! served layered-relevant request. Holds no secrets: pool, config, build and image names only.

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::{DecisionReason, LayeredDecision};

/// What the status page shows for one pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolDecisionStatus {
    pub pool: String,
    pub rendered_config: String,
    /// `"layered"` or `"base"`.
    pub decision: &'static str,
    pub reason: DecisionReason,
    pub image: Option<String>,
    pub machine_os_config: Option<String>,
    pub machine_os_build: Option<String>,
    pub build_image: Option<String>,
    pub validated_by: Option<String>,
    /// When this decision was first served (RFC 3339).
    pub since: String,
    /// Requests served with this decision since then.
    pub requests: u64,
}

/// Per-pool record of the last decision served. Cheap to share behind an `Arc`; the lock is a
/// std mutex held only for a map update, never across `.await`.
#[derive(Debug, Default)]
pub struct DecisionTracker {
    pools: Mutex<BTreeMap<String, PoolDecisionStatus>>,
}

impl DecisionTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the decision served for one request to `pool`. Logs it at debug level, and at
    /// info level when the pool's decision, reason, image or build differs from the previous
    /// one. Returns whether it changed (the first decision for a pool counts as a change).
    pub fn record(&self, pool: &str, rendered_config: &str, decision: &LayeredDecision) -> bool {
        tracing::debug!(
            pool,
            rendered_config,
            decision = decision.decision(),
            reason = decision.reason.as_str(),
            image = decision.image.as_deref(),
            machine_os_config = decision.machine_os_config.as_deref(),
            machine_os_build = decision.machine_os_build.as_deref(),
            build_image = decision.build_image.as_deref(),
            validated_by = decision.validated_by.as_deref(),
            "layered image decision"
        );
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        let previous = pools.get_mut(pool);
        if let Some(previous) = previous {
            let same = previous.reason == decision.reason
                && previous.image == decision.image
                && previous.machine_os_build == decision.machine_os_build
                && previous.rendered_config == rendered_config;
            if same {
                previous.requests += 1;
                // Names of the validating node may change without changing what is served.
                previous.validated_by.clone_from(&decision.validated_by);
                return false;
            }
        }
        let status = PoolDecisionStatus {
            pool: pool.to_string(),
            rendered_config: rendered_config.to_string(),
            decision: decision.decision(),
            reason: decision.reason,
            image: decision.image.clone(),
            machine_os_config: decision.machine_os_config.clone(),
            machine_os_build: decision.machine_os_build.clone(),
            build_image: decision.build_image.clone(),
            validated_by: decision.validated_by.clone(),
            since: Timestamp::now().to_string(),
            requests: 1,
        };
        let old = pools.insert(pool.to_string(), status);
        drop(pools);
        tracing::info!(
            pool,
            rendered_config,
            decision = decision.decision(),
            reason = decision.reason.as_str(),
            previous_reason = old.as_ref().map(|o| o.reason.as_str()),
            image = decision.image.as_deref(),
            machine_os_build = decision.machine_os_build.as_deref(),
            build_image = decision.build_image.as_deref(),
            validated_by = decision.validated_by.as_deref(),
            "layered image decision changed"
        );
        true
    }

    /// The current decision of every pool seen, by pool name.
    pub fn statuses(&self) -> Vec<PoolDecisionStatus> {
        let pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        pools.values().cloned().collect()
    }

    /// Forgets pools for which `keep` is false (pools deleted from the cluster).
    pub fn retain_pools(&self, keep: impl Fn(&str) -> bool) {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        pools.retain(|name, _| keep(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(reason: DecisionReason, image: Option<&str>) -> LayeredDecision {
        LayeredDecision {
            image: image.map(str::to_string),
            reason,
            machine_os_config: Some("worker".into()),
            machine_os_build: Some("worker-abc".into()),
            build_image: Some("quay.io/x@sha256:1".into()),
            validated_by: None,
        }
    }

    #[test]
    fn reports_changes_only() {
        let tracker = DecisionTracker::new();
        let base = decision(DecisionReason::NotValidated, None);
        let layered = decision(DecisionReason::Validated, Some("quay.io/x@sha256:1"));

        assert!(tracker.record("worker", "rendered-worker-1", &base));
        assert!(!tracker.record("worker", "rendered-worker-1", &base));
        assert!(tracker.record("infra", "rendered-infra-1", &base));
        assert!(tracker.record("worker", "rendered-worker-1", &layered));
        assert!(!tracker.record("worker", "rendered-worker-1", &layered));
        assert!(tracker.record("worker", "rendered-worker-2", &layered));

        let statuses = tracker.statuses();
        assert_eq!(statuses.len(), 2);
        let worker = &statuses[1];
        assert_eq!(worker.pool, "worker");
        assert_eq!(worker.decision, "layered");
        assert_eq!(worker.reason, DecisionReason::Validated);
        assert_eq!(worker.rendered_config, "rendered-worker-2");
        assert_eq!(worker.requests, 1);
        assert_eq!(statuses[0].requests, 1);

        let json = serde_json::to_value(worker).unwrap();
        assert_eq!(json["reason"], "validated");
        assert_eq!(json["image"], "quay.io/x@sha256:1");

        tracker.retain_pools(|pool| pool == "worker");
        assert_eq!(tracker.statuses().len(), 1);
    }
}
