//! The cluster's clock: the time the Kubernetes API server keeps, as this replica estimates it
//! from the `Date` header of the API's answers.
//!
//! Served records are stamped and aged with it, because they are compared with timestamps the
//! API server wrote (a record must predate its Node's `creationTimestamp`, see
//! [`crate::mcn::matching`]): a replica whose own clock is wrong (minutes ahead after a bad NTP
//! step, a drifting RTC) still records when it answered in the cluster's time, so its records
//! still match the Nodes they belong to and age out when the others do.
//!
//! `Date` has a resolution of one second, so an offset under [`IGNORED_SKEW`] is taken as none
//! and the local clock is used as it is; a larger one is applied as the latest answer measured
//! it. Until the API has answered (and in bootstrap mode, which has no API) the local clock is
//! used.
//!
//! Owns only the offset. The cluster client feeds it ([`crate::source::cluster`]); the served
//! log and the records exchange read it ([`crate::mcn`]).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Offsets smaller than this are the `Date` header's rounding and the request's latency, not
/// a wrong clock.
pub const IGNORED_SKEW: Duration = Duration::from_secs(2);

/// This replica's estimate of the API server's clock (cheap to clone, shared).
#[derive(Clone, Debug, Default)]
pub struct ClusterClock {
    /// API server time minus local time, in milliseconds (0: the clocks agree).
    offset_ms: Arc<AtomicI64>,
}

impl ClusterClock {
    /// The cluster's time now.
    pub fn now(&self) -> SystemTime {
        shift(SystemTime::now(), self.offset_ms())
    }

    /// API server time minus local time, in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// An API answer received at local time `received` carried this `Date` header.
    pub fn observe_date(&self, date: &http::HeaderValue, received: SystemTime) {
        let Some(date) = date
            .to_str()
            .ok()
            .and_then(|text| httpdate::parse_http_date(text).ok())
        else {
            return;
        };
        let offset = offset_from(date, received);
        let previous = self.offset_ms.swap(offset, Ordering::Relaxed);
        if (previous == 0) != (offset == 0) {
            if offset == 0 {
                tracing::info!("this replica's clock agrees with the API server's again");
            } else {
                tracing::warn!(
                    offset_ms = -offset,
                    "this replica's clock is off from the API server's; served records are stamped in the API server's time"
                );
            }
        }
    }
}

/// The offset (milliseconds, API server minus local) an answer dated `date` (whole seconds,
/// truncated) and received at local time `received` shows; 0 when it is under
/// [`IGNORED_SKEW`].
pub fn offset_from(date: SystemTime, received: SystemTime) -> i64 {
    // The server's time was somewhere in [date, date + 1 s): take the middle.
    let server = date + Duration::from_millis(500);
    let offset = match server.duration_since(received) {
        Ok(ahead) => i64::try_from(ahead.as_millis()).unwrap_or(i64::MAX),
        Err(behind) => -i64::try_from(behind.duration().as_millis()).unwrap_or(i64::MAX),
    };
    if offset.unsigned_abs() < IGNORED_SKEW.as_millis() as u64 {
        0
    } else {
        offset
    }
}

fn shift(time: SystemTime, offset_ms: i64) -> SystemTime {
    let by = Duration::from_millis(offset_ms.unsigned_abs());
    if offset_ms >= 0 {
        time + by
    } else {
        time.checked_sub(by).unwrap_or(time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, millis: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis)
    }

    #[test]
    fn rounding_and_latency_are_no_skew() {
        assert_eq!(offset_from(at(1000, 0), at(1000, 900)), 0);
        assert_eq!(offset_from(at(1000, 0), at(999, 0)), 0);
        assert_eq!(offset_from(at(1000, 0), at(1001, 400)), 0);
    }

    #[test]
    fn a_clock_minutes_ahead_is_measured_to_the_second() {
        // Local clock 10 minutes ahead: the API's answer is dated 600 s earlier.
        let offset = offset_from(at(1000, 0), at(1600, 300));
        assert!((-600_000..=-599_000).contains(&offset), "{offset}");
        assert!(offset_from(at(1600, 0), at(1000, 0)) >= 599_000);
    }

    #[test]
    fn the_clock_follows_the_latest_date_header() {
        let clock = ClusterClock::default();
        let local = SystemTime::now();
        let api_time = local - Duration::from_secs(600);
        let date = http::HeaderValue::from_str(&httpdate::fmt_http_date(api_time)).unwrap();
        clock.observe_date(&date, local);
        let skew = clock.now().duration_since(api_time).unwrap_or_default();
        assert!(skew < Duration::from_secs(3), "{skew:?}");
        // The clocks agree again (NTP fixed it).
        let date = http::HeaderValue::from_str(&httpdate::fmt_http_date(local)).unwrap();
        clock.observe_date(&date, local);
        assert_eq!(clock.offset_ms(), 0);
        // A header that is no date changes nothing.
        clock.observe_date(&http::HeaderValue::from_static("soon"), local);
        assert_eq!(clock.offset_ms(), 0);
    }
}
