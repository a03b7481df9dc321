//! `--min-ignition-version` (off by default): config requests from an Ignition release older
//! than the minimum are refused, because the boot image the machine started from is too old to
//! boot the cluster's current configuration (boot image skew, openshift/enhancements #1761 and
//! #1973). The refusal is a `503` with an empty body: Ignition retries every 5xx forever
//! (`shouldRetryHttp` in its `internal/resource/http.go`), so the machine waits until its boot
//! image is updated instead of giving up (any other status below 500 strands it).
//!
//! Only a `User-Agent` that names an Ignition release can be too old; requests without one
//! (curl, a browser) are served as without the option. Each refusal is counted
//! (`mcs_ignition_refusals_total{pool,ignition_version}`); for an existing pool, one log line
//! and one Warning Event `BootImageTooOld` naming the version go out at most once per pool and
//! [`NOTICE_INTERVAL`] (the Event through the lease holder, as every Event).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::ignition::client::IgnitionRelease;
use crate::metrics::MAX_POOL_LABELS;

/// At most one log line and Event per pool and this interval.
pub const NOTICE_INTERVAL: Duration = Duration::from_secs(600);

/// The minimum and when each pool's refusals were last told.
#[derive(Debug)]
pub struct MinIgnition {
    minimum: IgnitionRelease,
    told: Mutex<HashMap<String, Instant>>,
}

/// A refused request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// True for the pool's first refusal of the interval: log it and send the Event notice.
    pub tell: bool,
}

impl MinIgnition {
    pub fn new(minimum: IgnitionRelease) -> Self {
        MinIgnition {
            minimum,
            told: Mutex::new(HashMap::new()),
        }
    }

    /// The minimum release.
    pub fn minimum(&self) -> &IgnitionRelease {
        &self.minimum
    }

    /// Decides a request for `pool` (`pool_exists`: an existing pool) from `client` at `now`.
    pub fn check(
        &self,
        pool: &str,
        pool_exists: bool,
        client: Option<&IgnitionRelease>,
        now: Instant,
    ) -> Option<Refusal> {
        if !client?.is_older_than(&self.minimum) {
            return None;
        }
        if !pool_exists {
            return Some(Refusal { tell: false });
        }
        let mut told = self.told.lock().unwrap_or_else(PoisonError::into_inner);
        let due = told
            .get(pool)
            .is_none_or(|last| now.saturating_duration_since(*last) >= NOTICE_INTERVAL);
        // Existing pools only, and never more than the metrics' pool bound.
        let room = told.contains_key(pool) || told.len() < MAX_POOL_LABELS;
        if due && room {
            told.insert(pool.to_owned(), now);
        }
        Some(Refusal { tell: due && room })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ua(text: &str) -> Option<IgnitionRelease> {
        IgnitionRelease::from_user_agent(Some(text))
    }

    #[test]
    fn older_clients_are_refused_and_told_once_per_pool_and_interval() {
        let floor = MinIgnition::new(IgnitionRelease::parse_flag("2.20.0").unwrap());
        let t0 = Instant::now();
        let old = ua("Ignition/2.14.0");
        assert_eq!(
            floor.check("worker", true, old.as_ref(), t0),
            Some(Refusal { tell: true })
        );
        assert_eq!(
            floor.check("worker", true, old.as_ref(), t0 + Duration::from_secs(5)),
            Some(Refusal { tell: false })
        );
        assert_eq!(
            floor.check("infra", true, old.as_ref(), t0 + Duration::from_secs(5)),
            Some(Refusal { tell: true })
        );
        assert_eq!(
            floor.check("worker", true, old.as_ref(), t0 + NOTICE_INTERVAL),
            Some(Refusal { tell: true })
        );
        // Unknown pools are refused but never told; new enough and non-Ignition clients pass.
        assert_eq!(
            floor.check("nope", false, old.as_ref(), t0),
            Some(Refusal { tell: false })
        );
        assert_eq!(
            floor.check("worker", true, ua("Ignition/2.20.0").as_ref(), t0),
            None
        );
        assert_eq!(
            floor.check("worker", true, ua("Ignition/3.0.0").as_ref(), t0),
            None
        );
        assert_eq!(floor.check("worker", true, None, t0), None);
    }
}
