//! The publisher's write budget: a token bucket that bounds how many API writes per second the
//! MachineConfigNode publisher makes (`--mcn-max-writes-per-second`), so that a replica starting
//! against thousands of Nodes without an MCN works through them at a steady pace instead of
//! flooding the API server.
//!
//! Pure: the caller passes the current time; no clock, no sleeping, no I/O. The bucket holds at
//! most one token, so writes are spaced at least `1 / rate` apart and no 1-second window holds
//! more than `rate + 1` of them (`rate` when they are counted per second from the first).
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

/// A token bucket of capacity one, refilled at `rate` tokens per second.
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
            interval: Duration::from_secs(1) / rate.get(),
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
        assert_eq!(budget.try_take(t0), Ok(()));
        assert_eq!(budget.try_take(t0), Err(Duration::from_millis(50)));
        assert_eq!(
            budget.try_take(t0 + Duration::from_millis(30)),
            Err(Duration::from_millis(20))
        );
        assert_eq!(budget.try_take(t0 + Duration::from_millis(50)), Ok(()));
        assert_eq!(budget.available_at(), t0 + Duration::from_millis(100));
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
        assert_eq!(taken.len(), 200);
        for (i, start) in taken.iter().enumerate() {
            let in_window = taken[i..].iter().take_while(|t| **t < start + 1000).count();
            assert!(
                in_window <= 20,
                "{in_window} writes in the second from {start} ms"
            );
        }
    }

    #[test]
    fn high_rates_keep_a_positive_interval() {
        let t0 = Instant::now();
        let mut budget = WriteBudget::new(rate(1_000_000), t0);
        assert_eq!(budget.try_take(t0), Ok(()));
        assert!(budget.try_take(t0).is_err());
        assert_eq!(budget.try_take(t0 + Duration::from_micros(1)), Ok(()));
    }
}
