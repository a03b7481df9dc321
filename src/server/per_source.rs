//! Per-source-address budgets: a token bucket per client address, bounded in memory. Used to
//! rate-limit failure reports (`/v1/node-failure`) and to write at most one log line per source
//! and interval (PROXY protocol rejections), so that one noisy or hostile address can neither
//! flood the cluster with Events nor the log with lines.
//!
//! Pure bookkeeping: the caller passes the time. The table holds at most `capacity` addresses;
//! when it is full, addresses whose budget is whole again are forgotten first (they carry no
//! state), and when every remembered address is still busy, a new address shares one overflow
//! budget with every other newcomer: a flood from many addresses is still bounded, and never
//! grows memory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Most addresses remembered by default.
pub const DEFAULT_CAPACITY: usize = 4096;

/// A token bucket per source address.
#[derive(Debug)]
pub struct PerSource {
    burst: u32,
    refill: Duration,
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    buckets: HashMap<IpAddr, Bucket>,
    overflow: Option<Bucket>,
}

/// Tokens as of `at`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: u32,
    at: Instant,
}

impl Bucket {
    /// The bucket refilled up to `now` (one token per `refill`, at most `burst`).
    fn refilled(self, now: Instant, burst: u32, refill: Duration) -> Bucket {
        if self.tokens >= burst || refill.is_zero() {
            return Bucket {
                tokens: burst,
                at: now,
            };
        }
        let elapsed = now.saturating_duration_since(self.at);
        let gained = elapsed.as_nanos() / refill.as_nanos();
        let gained = u32::try_from(gained).unwrap_or(u32::MAX);
        if gained == 0 {
            return self;
        }
        let tokens = self.tokens.saturating_add(gained).min(burst);
        let at = if tokens >= burst {
            now
        } else {
            self.at + refill * gained
        };
        Bucket { tokens, at }
    }
}

impl PerSource {
    /// `burst` events at once per address, one more every `refill`; at most `capacity`
    /// addresses remembered.
    pub fn new(burst: u32, refill: Duration, capacity: usize) -> Self {
        PerSource {
            burst: burst.max(1),
            refill,
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// At most one event per `interval` per address (e.g. one log line).
    pub fn once_per(interval: Duration) -> Self {
        Self::new(1, interval, DEFAULT_CAPACITY)
    }

    /// Takes a token for `address` at `now`; false when its budget is spent.
    pub fn allow(&self, address: IpAddr, now: Instant) -> bool {
        let address = address.to_canonical();
        let (burst, refill) = (self.burst, self.refill);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if !inner.buckets.contains_key(&address) && inner.buckets.len() >= self.capacity {
            // Forget addresses whose budget is whole again: they hold no state.
            inner
                .buckets
                .retain(|_, bucket| bucket.refilled(now, burst, refill).tokens < burst);
        }
        let bucket = if let Some(bucket) = inner.buckets.get_mut(&address) {
            bucket
        } else if inner.buckets.len() < self.capacity {
            inner.buckets.entry(address).or_insert(Bucket {
                tokens: burst,
                at: now,
            })
        } else {
            inner.overflow.get_or_insert(Bucket {
                tokens: burst,
                at: now,
            })
        };
        let mut refilled = bucket.refilled(now, burst, refill);
        let allowed = refilled.tokens > 0;
        if allowed {
            if refilled.tokens == burst {
                // The refill clock starts when a whole bucket is first spent.
                refilled.at = now;
            }
            refilled.tokens -= 1;
        }
        *bucket = refilled;
        allowed
    }

    /// How many addresses are remembered.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .buckets
            .len()
    }

    /// True when no address is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_burst_then_one_per_refill() {
        let limiter = PerSource::new(3, Duration::from_secs(10), 16);
        let t0 = Instant::now();
        let a = ip("10.0.0.1");
        assert!(limiter.allow(a, t0));
        assert!(limiter.allow(a, t0));
        assert!(limiter.allow(a, t0));
        assert!(!limiter.allow(a, t0 + Duration::from_secs(9)));
        // Another address has its own budget.
        assert!(limiter.allow(ip("10.0.0.2"), t0));
        assert!(limiter.allow(a, t0 + Duration::from_secs(10)));
        assert!(!limiter.allow(a, t0 + Duration::from_secs(11)));
        // Long quiet: whole again, but never more than the burst.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert!(limiter.allow(a, later));
        }
        assert!(!limiter.allow(a, later));
        // IPv4-mapped IPv6 is the same address.
        assert!(!limiter.allow(ip("::ffff:10.0.0.1"), later));
    }

    #[test]
    fn once_per_interval() {
        let gate = PerSource::once_per(Duration::from_secs(60));
        let t0 = Instant::now();
        let a = ip("192.0.2.7");
        assert!(gate.allow(a, t0));
        assert!(!gate.allow(a, t0 + Duration::from_secs(59)));
        assert!(gate.allow(a, t0 + Duration::from_secs(60)));
    }

    #[test]
    fn a_flood_of_addresses_stays_bounded_and_shares_an_overflow_budget() {
        let limiter = PerSource::new(1, Duration::from_secs(60), 4);
        let t0 = Instant::now();
        for i in 0..4u8 {
            assert!(limiter.allow(IpAddr::from([10, 0, 0, i]), t0));
        }
        assert_eq!(limiter.len(), 4);
        // The table is full of busy addresses: newcomers share one budget.
        assert!(limiter.allow(ip("10.0.1.1"), t0));
        assert!(!limiter.allow(ip("10.0.1.2"), t0));
        assert_eq!(limiter.len(), 4);
        // Once the remembered ones are whole again they are forgotten for a newcomer.
        let later = t0 + Duration::from_secs(61);
        assert!(limiter.allow(ip("10.0.1.3"), later));
        assert_eq!(limiter.len(), 1);
    }
}
