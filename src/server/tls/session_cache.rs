//! The TLS session store of the secure port: sessions a client may resume (TLS 1.2 session
//! IDs, and the TLS 1.3 tickets of a backend without a ticket encrypter, whose tickets name an
//! entry here), at most a fixed number, the oldest forgotten first.
//!
//! Why not rustls's `ServerSessionMemoryCache`: it finds the entry a resumption takes by a
//! linear scan of its insertion order, one comparison per entry, on every resumed handshake.
//! With OpenSSL (no stateless tickets) every TLS 1.3 connection resumes from the store and adds
//! tickets to it, so under one connection per request the store is full (4096 entries) and
//! that scan was 3.7% of the server's CPU (`perf`, benches/README.md, "Issue 58"). Here a
//! resumption is a hash lookup; the order of insertion is kept beside the map and cleaned
//! lazily. Must not touch: anything but the sessions it is given.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use rustls::server::StoresServerSessions;

/// A bounded store of sessions; see the module documentation.
#[derive(Debug)]
pub struct SessionStore {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<Vec<u8>, Vec<u8>>,
    /// Keys in insertion order; some may have been taken already (removed lazily).
    order: VecDeque<Vec<u8>>,
}

impl SessionStore {
    /// A store of at most `capacity` sessions (at least one).
    pub fn new(capacity: usize) -> SessionStore {
        SessionStore {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Only map and queue operations happen under the lock: a poisoned one is still whole.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl StoresServerSessions for SessionStore {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut inner = self.inner();
        if inner.sessions.insert(key.clone(), value).is_none() {
            inner.order.push_back(key);
        }
        while inner.sessions.len() > self.capacity {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            inner.sessions.remove(&oldest);
        }
        // Taken sessions leave their keys in the queue; drop them before it grows past twice
        // the capacity, so that memory stays bounded whatever the mix of puts and takes.
        if inner.order.len() > 2 * self.capacity {
            let Inner { sessions, order } = &mut *inner;
            order.retain(|key| sessions.contains_key(key));
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner().sessions.get(key).cloned()
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner().sessions.remove(key)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_put_got_taken_once_and_the_oldest_forgotten() {
        let store = SessionStore::new(3);
        for i in 0..3u8 {
            assert!(store.put(vec![i], vec![i + 10]));
        }
        assert_eq!(store.get(&[1]), Some(vec![11]));
        assert_eq!(store.take(&[1]), Some(vec![11]));
        assert_eq!(store.take(&[1]), None, "taken once");
        store.put(vec![3], vec![13]);
        store.put(vec![4], vec![14]);
        // 0 was the oldest: forgotten once a fourth session came in.
        assert_eq!(store.get(&[0]), None);
        for i in [2u8, 3, 4] {
            assert_eq!(store.get(&[i]), Some(vec![i + 10]), "{i}");
        }
        // Putting a key again replaces its value and keeps one entry.
        store.put(vec![4], vec![40]);
        assert_eq!(store.get(&[4]), Some(vec![40]));
        assert_eq!(store.inner().sessions.len(), 3);
    }

    #[test]
    fn taken_keys_do_not_grow_the_queue_without_bound() {
        let store = SessionStore::new(4);
        for i in 0..1000u32 {
            let key = i.to_be_bytes().to_vec();
            store.put(key.clone(), vec![0]);
            assert!(store.take(&key).is_some());
        }
        let inner = store.inner();
        assert!(inner.sessions.is_empty());
        assert!(inner.order.len() <= 8, "{}", inner.order.len());
    }
}
