//! [`ReasonLog`]: "log once per subject and state, not once per retry".
//!
//! Ignition retries a failing `/config/<pool>` forever, every few seconds; logging each retry
//! would bury everything else. A `ReasonLog` remembers the last reason logged for each subject
//! (a pool, an object) and says "log" only when the reason changes; clearing the subject once it
//! is healthy makes the next failure log again. The server uses one for request-time errors
//! (unknown pool); the cluster source uses one for what it sees while building snapshots
//! (a pool whose rendered MachineConfig is missing, an object that does not decode).
//!
//! Owns only the bookkeeping; the caller writes the log line.

use std::collections::HashMap;
use std::sync::Mutex;

/// Subjects remembered at most; pool names come from request paths, so the map is bounded and
/// simply starts over when full (a repeated line is better than unbounded memory).
const DEFAULT_CAPACITY: usize = 4096;

/// Remembers the last logged reason per subject.
#[derive(Debug)]
pub struct ReasonLog {
    last: Mutex<HashMap<String, String>>,
    capacity: usize,
}

impl Default for ReasonLog {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }
}

impl ReasonLog {
    /// A log remembering at most `capacity` subjects.
    pub fn with_capacity(capacity: usize) -> Self {
        ReasonLog {
            last: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// Records `reason` as the current state of `subject`. Returns true when the caller should
    /// log: the subject was healthy or failing for a different reason.
    pub fn should_log(&self, subject: &str, reason: &str) -> bool {
        let mut last = match self.last.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if last.get(subject).is_some_and(|logged| logged == reason) {
            return false;
        }
        if last.len() >= self.capacity && !last.contains_key(subject) {
            last.clear();
        }
        last.insert(subject.to_owned(), reason.to_owned());
        true
    }

    /// Marks `subject` healthy: its next failure logs again. Returns true when it was failing
    /// (so the caller can log the recovery once).
    pub fn clear(&self, subject: &str) -> bool {
        let mut last = match self.last.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        last.remove(subject).is_some()
    }

    /// Keeps only the subjects for which `keep` is true; returns the ones dropped.
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) -> Vec<String> {
        let mut last = match self.last.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let dropped: Vec<String> = last.keys().filter(|s| !keep(s)).cloned().collect();
        for subject in &dropped {
            last.remove(subject);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_once_per_subject_and_reason() {
        let log = ReasonLog::default();
        assert!(log.should_log("worker", "unknown pool"));
        assert!(!log.should_log("worker", "unknown pool"));
        assert!(log.should_log("infra", "unknown pool"));
        assert!(log.should_log("worker", "missing rendered-worker-2"));
        assert!(!log.should_log("worker", "missing rendered-worker-2"));
        assert!(log.clear("worker"));
        assert!(!log.clear("worker"));
        assert!(log.should_log("worker", "missing rendered-worker-2"));
    }

    #[test]
    fn memory_is_bounded() {
        let log = ReasonLog::with_capacity(3);
        for pool in ["a", "b", "c", "d"] {
            assert!(log.should_log(pool, "unknown pool"));
        }
        // The fourth subject started over: only it is remembered.
        assert!(!log.should_log("d", "unknown pool"));
        assert!(log.should_log("a", "unknown pool"));
    }

    #[test]
    fn retain_forgets_resolved_subjects() {
        let log = ReasonLog::default();
        log.should_log("machineconfigpool/worker", "missing");
        log.should_log("machineconfigpool/infra", "missing");
        let dropped = log.retain(|subject| subject.ends_with("/infra"));
        assert_eq!(dropped, ["machineconfigpool/worker"]);
        assert!(log.should_log("machineconfigpool/worker", "missing"));
        assert!(!log.should_log("machineconfigpool/infra", "missing"));
    }
}
