//! Reporting of layered decisions as they are served: a debug log line per request, an info
//! line when a pool's decision changes, the `mcs_layered_decisions_total` metric and the pool's
//! entry on the admin status board.
//!
//! Stateful (the last decision per pool), so it lives beside the server that serves the decisions,
//! outside the pure [`crate::render::layered::decide`]. The server owns one [`DecisionTracker`] in its application state and calls
//! [`DecisionTracker::observe`] for every config served in cluster mode, with the decision the
//! render carried ([`crate::render::Rendered::layered`]). Reports names and image pull specs
//! only, never secrets.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::metrics::{Metrics, PoolLabel, PoolStatusBoard};
use crate::render::layered::{DecisionReason, LayeredDecision};

/// What identifies a pool's decision for change detection. The validating node is left out: a
/// different node proving the same image changes nothing a booting node gets.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DecisionKey {
    rendered_config: String,
    reason: DecisionReason,
    image: Option<String>,
    machine_os_build: Option<String>,
}

/// The last decision served per pool. Share it behind an `Arc`; its std mutex is held only for
/// a map lookup, never across `.await`.
#[derive(Debug, Default)]
pub struct DecisionTracker {
    last: Mutex<BTreeMap<String, DecisionKey>>,
}

impl DecisionTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reports the decision served for one request to `pool`: debug log, metric, status board,
    /// and an info log when it changed. Returns whether it changed.
    pub fn observe(
        &self,
        pool: &str,
        rendered_config: &str,
        decision: &LayeredDecision,
        metrics: &Metrics,
        board: &PoolStatusBoard,
    ) -> bool {
        let label = PoolLabel::known(pool);
        metrics.layered_decision(&label, decision.decision(), decision.reason.as_str());
        board.record_layered(
            &label,
            decision.decision(),
            decision.reason.as_str(),
            decision.image.as_deref(),
        );
        self.record(pool, rendered_config, decision)
    }

    /// Logs the decision for one request to `pool` (debug), and at info level when the pool's
    /// rendered config, reason, image or build differs from the previous one (the first
    /// decision for a pool counts as a change). Returns whether it changed.
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
        let key = DecisionKey {
            rendered_config: rendered_config.to_owned(),
            reason: decision.reason,
            image: decision.image.clone(),
            machine_os_build: decision.machine_os_build.clone(),
        };
        let previous = {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            match last.get(pool) {
                Some(previous) if *previous == key => return false,
                _ => last.insert(pool.to_owned(), key),
            }
        };
        tracing::info!(
            pool,
            rendered_config,
            decision = decision.decision(),
            reason = decision.reason.as_str(),
            previous_reason = previous.as_ref().map(|p| p.reason.as_str()),
            image = decision.image.as_deref(),
            machine_os_config = decision.machine_os_config.as_deref(),
            machine_os_build = decision.machine_os_build.as_deref(),
            build_image = decision.build_image.as_deref(),
            validated_by = decision.validated_by.as_deref(),
            "layered image decision changed"
        );
        true
    }

    /// Forgets pools for which `exists` is false (pools deleted from the cluster).
    pub fn retain(&self, mut exists: impl FnMut(&str) -> bool) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.retain(|pool, _| exists(pool));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(reason: DecisionReason, image: Option<&str>, node: &str) -> LayeredDecision {
        LayeredDecision {
            image: image.map(str::to_string),
            reason,
            machine_os_config: Some("worker".into()),
            machine_os_build: Some("worker-abc".into()),
            build_image: Some("quay.io/x@sha256:1".into()),
            validated_by: Some(node.into()),
        }
    }

    #[test]
    fn reports_changes_only() {
        let tracker = DecisionTracker::new();
        let base = decision(DecisionReason::NotValidated, None, "");
        let layered = decision(DecisionReason::Validated, Some("quay.io/x@sha256:1"), "w-0");
        let layered_other_node =
            decision(DecisionReason::Validated, Some("quay.io/x@sha256:1"), "w-1");

        assert!(tracker.record("worker", "rendered-worker-1", &base));
        assert!(!tracker.record("worker", "rendered-worker-1", &base));
        assert!(tracker.record("infra", "rendered-infra-1", &base));
        assert!(tracker.record("worker", "rendered-worker-1", &layered));
        assert!(!tracker.record("worker", "rendered-worker-1", &layered_other_node));
        assert!(tracker.record("worker", "rendered-worker-2", &layered));

        tracker.retain(|pool| pool == "worker");
        assert!(tracker.record("infra", "rendered-infra-1", &base));
    }

    #[test]
    fn observe_feeds_metric_and_status_board() {
        let tracker = DecisionTracker::new();
        let metrics = Metrics::new();
        let board = PoolStatusBoard::new();
        let layered = decision(DecisionReason::Validated, Some("quay.io/x@sha256:1"), "w-0");
        let base = decision(DecisionReason::InClusterRegistry, None, "w-0");

        assert!(tracker.observe("worker", "rendered-worker-1", &layered, &metrics, &board));
        assert!(!tracker.observe("worker", "rendered-worker-1", &layered, &metrics, &board));
        assert!(tracker.observe("infra", "rendered-infra-1", &base, &metrics, &board));

        let text = metrics.encode();
        assert!(
            text.contains(
                r#"mcs_layered_decisions_total{pool="worker",decision="layered",reason="validated"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"mcs_layered_decisions_total{pool="infra",decision="base",reason="in_cluster_registry"} 1"#
            ),
            "{text}"
        );
        let status = board.snapshot();
        let worker = status["worker"].layered.as_ref().unwrap();
        assert_eq!(
            (worker.decision, worker.reason, worker.image.as_deref()),
            ("layered", "validated", Some("quay.io/x@sha256:1"))
        );
        let infra = status["infra"].layered.as_ref().unwrap();
        assert_eq!(
            (infra.decision, infra.reason, infra.image.as_deref()),
            ("base", "in_cluster_registry", None)
        );
    }
}
