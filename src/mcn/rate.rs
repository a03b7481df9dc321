//! The publisher's write budget: a token bucket that bounds how many API writes per second the
//! MachineConfigNode publisher makes (`--mcn-max-writes-per-second`), so that a replica starting
//! against thousands of Nodes without an MCN works through them at a steady pace instead of
//! flooding the API server.
//!
//! Pure: the caller passes the current time; no clock, no sleeping, no I/O. The bucket holds at
//! most one token, refilled every `(1 s + JITTER_MARGIN) / rate`: `rate + 1` writes span more
//! than a second by [`JITTER_MARGIN`], so no 1-second window holds more than `rate` of them even
//! as the API server sees them, a few milliseconds of scheduling and network jitter later (at
//! exactly `1 / rate` apart, a window that begins on a write and ends on the `rate + 1`th holds
//! `rate + 1`). The cost is 2.5% of the rate.
//!
//! Owns the arithmetic only; the controller decides what to do while it waits.

use std::num::NonZeroU32;
use std::time::Duration;

use tokio::time::Instant;

/// Default `--mcn-max-writes-per-second`.
pub const DEFAULT_MAX_WRITES_PER_SECOND: NonZeroU32 = match NonZeroU32::new(20) {
    Some(rate) => rate,
    None => panic!("20 is not zero"),
};

/// What `rate + 1` consecutive writes span beyond one second: the jitter between when the
/// publisher writes and when the API server records it that still keeps every 1-second window
/// at `rate` writes or fewer.
pub const JITTER_MARGIN: Duration = Duration::from_millis(25);

/// A token bucket of capacity one, refilled at `rate` tokens per `1 s + JITTER_MARGIN`.
#[derive(Clone, Debug)]
pub struct WriteBudget {
    interval: Duration,
    /// When the next token is (or was) available.
    next: Instant,
}

impl WriteBudget {
    /// A full bucket at `now`: the first write may go at once.
    pub fn new(rate: NonZeroU32, now: Instant) -> Self {
        WriteBudget {
            interval: (Duration::from_secs(1) + JITTER_MARGIN) / rate.get(),
            next: now,
        }
    }

    /// Takes the token if it is there at `now`; otherwise says how long until it is. A token
    /// not taken does not accumulate beyond one: idle time buys no burst.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        if now < self.next {
            return Err(self.next - now);
        }
        self.next = now + self.interval;
        Ok(())
    }

    /// When the next token is available (`now` or earlier means at once).
    pub fn available_at(&self) -> Instant {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    #[test]
    fn first_write_goes_at_once_then_one_per_interval() {
        let t0 = Instant::now();
        let mut budget = WriteBudget::new(rate(20), t0);
        // (1000 ms + 25 ms) / 20.
        let interval = Duration::from_micros(51_250);
        assert_eq!(budget.try_take(t0), Ok(()));
        assert_eq!(budget.try_take(t0), Err(interval));
        assert_eq!(
            budget.try_take(t0 + Duration::from_millis(30)),
            Err(interval - Duration::from_millis(30))
        );
        assert_eq!(budget.try_take(t0 + interval), Ok(()));
        assert_eq!(budget.available_at(), t0 + interval * 2);
    }

    #[test]
    fn idle_time_buys_no_burst() {
        let t0 = Instant::now();
        let mut budget = WriteBudget::new(rate(10), t0);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(budget.try_take(later), Ok(()));
        assert!(budget.try_take(later).is_err());
    }

    #[test]
    fn a_caller_taking_greedily_never_exceeds_the_rate_in_any_second() {
        // Someone polling every millisecond for 10 s takes whatever the budget gives.
        let t0 = Instant::now();
        let mut budget = WriteBudget::new(rate(20), t0);
        let mut taken = Vec::new();
        for ms in 0..10_000u64 {
            let now = t0 + Duration::from_millis(ms);
            if budget.try_take(now).is_ok() {
                taken.push(ms);
            }
        }
        assert!((190..=200).contains(&taken.len()), "{}", taken.len());
        // Any 21 consecutive writes span more than a second by the margin: a second's window
        // holds 20 even when each write is seen up to 12 ms late or early.
        for pair in taken.windows(21) {
            assert!(
                pair[20] - pair[0] >= 1025,
                "21 writes within {} ms",
                pair[20] - pair[0]
            );
        }
    }

    #[test]
    fn high_rates_keep_a_positive_interval() {
        let t0 = Instant::now();
        let mut budget = WriteBudget::new(rate(1_000_000), t0);
        assert_eq!(budget.try_take(t0), Ok(()));
        assert!(budget.try_take(t0).is_err());
        assert_eq!(budget.try_take(t0 + Duration::from_micros(2)), Ok(()));
    }
}
