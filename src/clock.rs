//! The cluster's clock: the time the Kubernetes API server keeps, as this replica estimates it
//! from the `Date` header of the API's answers.
//!
//! Served records are stamped and aged with it, because they are compared with timestamps the
//! API server wrote (a record must predate its Node's `creationTimestamp`, see
//! [`crate::mcn::matching`]): a replica whose own clock is wrong (minutes ahead after a bad NTP
//! step, a drifting RTC) still records when it answered in the cluster's time, so its records
//! still match the Nodes they belong to and age out when the others do.
//!
//! `Date` has a resolution of one second, and one answer only says that the API server's clock
//! read between `Date` and a second later at some moment before the answer arrived. Each answer
//! gives a lower bound of the offset (`Date` minus the local time it arrived); over the answers
//! of the last [`WINDOW`] (a replica gets several a second) the largest of them is the offset
//! to within the fastest answer's latency, since answers arrive at every phase of the API's
//! second ([`OffsetWindow`]). The latest answer alone was up to a second off, enough to order
//! two replicas' records of one machine wrongly (a retry half a second after a SIGKILL, on the
//! real kube-apiserver). A lower bound under the window's by more than [`IGNORED_SKEW`] is a
//! clock step: the window starts over from it. An offset under [`IGNORED_SKEW`] is taken as
//! none and the local clock is used as it is. Until the API has answered (and in bootstrap mode,
//! which has no API) the local clock is used.
//!
//! Owns only the offset. The cluster client feeds it ([`crate::source::cluster`]); the served
//! log and the records exchange read it ([`crate::mcn`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// Offsets smaller than this are the `Date` header's rounding and the request's latency, not
/// a wrong clock.
pub const IGNORED_SKEW: Duration = Duration::from_secs(2);

/// How long an answer's lower bound counts towards the offset.
pub const WINDOW: Duration = Duration::from_secs(60);

/// The most lower bounds kept (a replica under load gets far more answers than this a minute;
/// the newest are kept).
const WINDOW_SAMPLES: usize = 512;

/// This replica's estimate of the API server's clock (cheap to clone, shared).
#[derive(Clone, Debug, Default)]
pub struct ClusterClock {
    /// API server time minus local time, in milliseconds (0: the clocks agree).
    offset_ms: Arc<AtomicI64>,
    window: Arc<Mutex<OffsetWindow>>,
}

/// The lower bounds of the offset (milliseconds) the answers of the last [`WINDOW`] gave, and
/// when each arrived (module docs).
#[derive(Debug, Default)]
pub struct OffsetWindow {
    bounds: VecDeque<(Instant, i64)>,
}

impl OffsetWindow {
    /// Takes an answer's lower bound, arrived at `at`; returns the offset estimate: the largest
    /// lower bound of the window.
    pub fn observe(&mut self, lower_bound_ms: i64, at: Instant) -> i64 {
        while self
            .bounds
            .front()
            .is_some_and(|(then, _)| at.saturating_duration_since(*then) > WINDOW)
        {
            self.bounds.pop_front();
        }
        let skew_ms = i64::try_from(IGNORED_SKEW.as_millis()).unwrap_or(i64::MAX);
        if self
            .estimate()
            .is_some_and(|estimate| lower_bound_ms < estimate.saturating_sub(skew_ms))
        {
            // The local clock stepped ahead (or the API server's back): what came before no
            // longer bounds the offset.
            self.bounds.clear();
        }
        // Only the largest of later bounds matters: drop the smaller ones before it.
        while self
            .bounds
            .back()
            .is_some_and(|(_, bound)| *bound <= lower_bound_ms)
        {
            self.bounds.pop_back();
        }
        self.bounds.push_back((at, lower_bound_ms));
        if self.bounds.len() > WINDOW_SAMPLES {
            self.bounds.pop_front();
        }
        self.estimate().unwrap_or(lower_bound_ms)
    }

    /// The largest lower bound kept (the front: the bounds decrease from front to back).
    fn estimate(&self) -> Option<i64> {
        self.bounds.front().map(|(_, bound)| *bound)
    }
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
        let offset = {
            let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
            ignore_small(window.observe(lower_bound_ms(date, received), Instant::now()))
        };
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

/// The least the offset (milliseconds, API server minus local) can be, from an answer dated
/// `date` (whole seconds, truncated: the API's clock read at least that when it answered) and
/// received at local time `received` (after it answered).
pub fn lower_bound_ms(date: SystemTime, received: SystemTime) -> i64 {
    match date.duration_since(received) {
        Ok(ahead) => i64::try_from(ahead.as_millis()).unwrap_or(i64::MAX),
        Err(behind) => -i64::try_from(behind.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// `offset_ms`, or 0 when it is under [`IGNORED_SKEW`].
fn ignore_small(offset_ms: i64) -> i64 {
    if offset_ms.unsigned_abs() < IGNORED_SKEW.as_millis() as u64 {
        0
    } else {
        offset_ms
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
        assert_eq!(ignore_small(lower_bound_ms(at(1000, 0), at(1000, 900))), 0);
        assert_eq!(ignore_small(lower_bound_ms(at(1000, 0), at(999, 0))), 0);
        assert_eq!(ignore_small(lower_bound_ms(at(1000, 0), at(1001, 400))), 0);
    }

    #[test]
    fn a_clock_minutes_ahead_is_measured_to_the_second() {
        // Local clock 10 minutes ahead: the API's answer is dated 600 s earlier.
        let offset = lower_bound_ms(at(1000, 0), at(1600, 300));
        assert!((-601_000..=-600_000).contains(&offset), "{offset}");
        assert!(lower_bound_ms(at(1600, 0), at(1000, 0)) >= 599_000);
    }

    /// The rehearsal's skewed replica, 300 s ahead: answers arrive at every phase of the API's
    /// second, 5 ms after it answered. The latest answer alone is up to a second off; the
    /// window's estimate is within the latency.
    #[test]
    fn many_answers_pin_the_offset_far_below_the_dates_second() {
        let true_offset_ms: i64 = -300_000;
        let start = Instant::now();
        let mut window = OffsetWindow::default();
        let mut worst_single = 0;
        let mut estimate = 0;
        for i in 0..200u64 {
            // API time of the answer: 1000 s plus i * 137 ms (every phase of the second).
            let api_ms = 1_000_000 + i * 137;
            let date = at(api_ms / 1000, 0);
            let received_local_ms = (api_ms as i64 - true_offset_ms + 5) as u64;
            let received = at(received_local_ms / 1000, received_local_ms % 1000);
            let bound = lower_bound_ms(date, received);
            assert!(bound <= true_offset_ms, "a lower bound: {bound}");
            worst_single = worst_single.max(true_offset_ms - bound);
            estimate = window.observe(bound, start + Duration::from_millis(i * 137));
        }
        assert!(worst_single > 900, "{worst_single}");
        assert!(
            (true_offset_ms - 10..=true_offset_ms).contains(&estimate),
            "{estimate}"
        );
    }

    #[test]
    fn a_clock_step_starts_the_window_over_and_old_bounds_expire() {
        let start = Instant::now();
        let mut window = OffsetWindow::default();
        assert_eq!(window.observe(-300_000, start), -300_000);
        assert_eq!(
            window.observe(-300_800, start + Duration::from_secs(1)),
            -300_000
        );
        // NTP stepped the local clock back by 300 s: the offset is about 0 at once.
        assert_eq!(window.observe(-400, start + Duration::from_secs(2)), -400);
        assert_eq!(window.observe(-900, start + Duration::from_secs(3)), -400);
        // ...and stepped ahead by 5 s: a bound far below the estimate starts over too.
        assert_eq!(
            window.observe(-5_600, start + Duration::from_secs(4)),
            -5_600
        );
        // A bound older than the window no longer counts.
        assert_eq!(
            window.observe(-5_900, start + Duration::from_secs(30)),
            -5_600
        );
        assert_eq!(
            window.observe(
                -5_950,
                start + Duration::from_secs(4) + WINDOW + Duration::from_secs(1)
            ),
            -5_900
        );
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
