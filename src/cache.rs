//! Payload cache: the serialized body per (pool, spec version, snapshot generation), rendered
//! once and shared by every request for the same key.
//!
//! Owns: the map of finished renders and renders in flight, its memory bound, and its counters.
//! Must not touch: how a render is done (the caller passes a closure), HTTP, metrics registries
//! or logging. The caller turns [`CacheOutcome`] into metrics.
//!
//! Rules, and why:
//! - **One render per key.** The first request for a missing key starts the render on a blocking
//!   thread; every concurrent request for that key waits for that one result, so a burst of
//!   hundreds of booting machines costs one render, not hundreds.
//! - **A render finishes even if its requester goes away.** The blocking task itself stores the
//!   result and wakes the waiters, so a client that disconnects mid-render cannot strand the
//!   others. That task is deliberately not joined by the requester for the same reason; it
//!   always ends (the render is CPU work without I/O) and reports through the slot.
//! - **Errors are cached per generation.** A render is a pure function of the snapshot, so for a
//!   given generation a failure is deterministic. Ignition retries every 5xx forever, every
//!   machine every few seconds; caching the error keeps that retry storm from re-rendering.
//!   Errors live in their own small LRU (at most [`MAX_ERROR_ENTRIES`]) so that requests for
//!   arbitrary pool names can neither grow memory nor evict good bodies.
//! - **A panicking render is not cached.** Its waiters get an error (a 500, so Ignition
//!   retries) and the next request renders again.
//! - **Bounded by body bytes.** Finished bodies are evicted oldest generation first, then least
//!   recently used, until the total fits `max_bytes`. A render in flight holds no bytes yet and is
//!   never evicted. A body larger than the whole budget is served but not kept.
//! - **Generations.** [`PayloadCache::retain_generation`] drops every finished entry of an older
//!   generation; a render of an older generation that finishes later is handed to its waiters but
//!   not stored.
//! - **Prewarm.** [`PayloadCache::advance_and_prewarm`] does the same and then renders again,
//!   one at a time, the payloads that were being served, so the first machine asking after a
//!   change does not wait for a render. A failed prewarm is not stored (the first request renders
//!   again and is logged and counted like any failure); a newer generation stops it.
//! - **Renders queue for the cores.** At most [`render_parallelism`] renders run at once; the
//!   others wait for a permit (on the runtime, not on a blocking thread). A render is CPU work
//!   whose transient memory is several times its body (the config parsed, translated and written
//!   out): twenty pools asked for at once, each on its own blocking thread, would hold twenty of
//!   those at the same moment on two cores and finish no sooner than one after another. At least
//!   two, so that one slow render never holds up every other pool (one permit was measured too:
//!   no lower peak in the cluster rows, benches/README.md "Where the memory goes").
//! - **No lock across `.await`.** One `std::sync::Mutex` guards the map; it is held only for
//!   a hash lookup or an insert, never while rendering or waiting.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{watch, Semaphore};

use crate::ignition::SpecVersion;
use crate::render::{RenderError, Rendered};

/// At most this many failed renders are kept (least recently used evicted first).
pub const MAX_ERROR_ENTRIES: usize = 256;

/// What a lookup returns: the shared body or the shared error.
pub type RenderResult = Result<Arc<Rendered>, Arc<RenderError>>;

/// Identifies one payload: a render is a pure function of these three.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    pub pool: Arc<str>,
    /// The version negotiated from the Accept header (the served one also depends on the
    /// rendered config, which the generation fixes: [`crate::render::render`]).
    pub version: SpecVersion,
    pub generation: u64,
}

/// How a lookup was answered, for the request handler's metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Served from a finished entry (body or cached error).
    Hit,
    /// Nothing was cached: this lookup started the render and waited for it.
    Miss,
    /// A render for the key was already in flight: this lookup waited for its result.
    Joined,
}

impl CacheOutcome {
    /// Short, stable name used as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::Joined => "joined",
        }
    }
}

/// The result of [`PayloadCache::lookup`]: the payload (or error) and how it was obtained.
#[derive(Clone, Debug)]
pub struct Lookup {
    pub result: RenderResult,
    pub outcome: CacheOutcome,
}

/// Counters and sizes, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from a finished entry.
    pub hits: u64,
    /// Lookups that had to wait for a render (started by themselves or joined).
    pub misses: u64,
    /// Render closures started (by requests and prewarms).
    pub renders: u64,
    /// Renders started ahead of any request by [`PayloadCache::prewarm`].
    pub prewarms: u64,
    /// Finished entries of the map (bodies and errors).
    pub entries: usize,
    /// Of `entries`, how many are errors.
    pub error_entries: usize,
    /// Total body bytes of the finished entries.
    pub bytes: usize,
    /// Renders currently running.
    pub in_flight: usize,
    /// Entries removed to respect the memory bound (not counting generation changes).
    pub evictions: u64,
}

/// Cheap-to-clone handle to the shared cache.
#[derive(Clone, Debug)]
pub struct PayloadCache {
    inner: Arc<Mutex<Inner>>,
    /// Permits to run a render (module docs: renders queue for the cores).
    renders: Arc<Semaphore>,
}

/// How many renders run at once: one per core the process may use, at least two (so that a
/// slow render never holds up every other pool).
pub fn render_parallelism() -> usize {
    std::thread::available_parallelism()
        .map_or(2, std::num::NonZeroUsize::get)
        .max(2)
}

#[derive(Debug)]
struct Inner {
    max_bytes: usize,
    slots: HashMap<CacheKey, Slot>,
    /// Monotonic clock for least-recently-used ordering.
    tick: u64,
    next_render_id: u64,
    /// Renders of generations below this are served to their waiters but not stored.
    oldest_generation: u64,
    stats: CacheStats,
}

#[derive(Debug)]
enum Slot {
    Ready {
        result: RenderResult,
        last_used: u64,
    },
    InFlight {
        /// Tells this render apart from a later one for the same key.
        id: u64,
        done: watch::Receiver<Option<RenderResult>>,
    },
}

/// Who asks: a request (counted as hit or miss, failures cached) or a prewarm.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Why {
    Request,
    Prewarm,
}

/// What a lookup does after leaving the lock.
enum Begin {
    Hit(RenderResult),
    Join(watch::Receiver<Option<RenderResult>>),
    Lead(watch::Receiver<Option<RenderResult>>, Completion),
}

impl PayloadCache {
    /// An empty cache keeping at most `max_bytes` of bodies.
    pub fn new(max_bytes: usize) -> Self {
        PayloadCache {
            inner: Arc::new(Mutex::new(Inner {
                max_bytes,
                slots: HashMap::new(),
                tick: 0,
                next_render_id: 0,
                oldest_generation: 0,
                stats: CacheStats::default(),
            })),
            renders: Arc::new(Semaphore::new(render_parallelism())),
        }
    }

    /// Runs `render` for `completion` once a permit is free, on a blocking thread. Not joined
    /// by anyone on purpose (module docs): the task reports through the completion, and a
    /// task dropped while it waits (the runtime shutting down) drops the completion, which
    /// wakes the waiters with an error.
    fn start<F>(&self, completion: Completion, render: F)
    where
        F: FnOnce() -> Result<Rendered, RenderError> + Send + 'static,
    {
        let renders = self.renders.clone();
        drop(tokio::spawn(async move {
            // The semaphore is never closed.
            let Ok(permit) = renders.acquire_owned().await else {
                return;
            };
            drop(tokio::task::spawn_blocking(move || {
                let _permit = permit;
                let outcome = run_render(&completion.key, render);
                completion.finish(outcome);
            }));
        }));
    }

    /// Returns the cached render for `key`, or runs `render` once (on a blocking thread: it is
    /// CPU work of a few ms to 100s of ms) while concurrent callers for the same key wait for
    /// that one result.
    pub async fn get_or_render<F>(&self, key: CacheKey, render: F) -> RenderResult
    where
        F: FnOnce() -> Result<Rendered, RenderError> + Send + 'static,
    {
        self.lookup(key, render).await.result
    }

    /// [`Self::get_or_render`], also saying whether the answer was a hit, a miss or joined an
    /// in-flight render.
    pub async fn lookup<F>(&self, key: CacheKey, render: F) -> Lookup
    where
        F: FnOnce() -> Result<Rendered, RenderError> + Send + 'static,
    {
        let (mut done, outcome) = match self.begin(&key, Why::Request) {
            Begin::Hit(result) => {
                return Lookup {
                    result,
                    outcome: CacheOutcome::Hit,
                }
            }
            Begin::Join(done) => (done, CacheOutcome::Joined),
            Begin::Lead(done, completion) => {
                self.start(completion, render);
                (done, CacheOutcome::Miss)
            }
        };
        let result = match done.wait_for(Option::is_some).await {
            Ok(value) => value.clone().unwrap_or_else(|| Err(abandoned(&key))),
            // The render task was dropped without running (the runtime is shutting down).
            Err(_) => Err(abandoned(&key)),
        };
        Lookup { result, outcome }
    }

    /// Renders `key` ahead of any request, unless it is cached or already being rendered, and
    /// waits for the render. Requests arriving meanwhile join it. Unlike a request's render, a
    /// failure is handed to the requests that joined but not stored: the first request after it
    /// renders again, so its failure is logged and counted where requests are.
    /// Returns whether it rendered.
    pub async fn prewarm<F>(&self, key: CacheKey, render: F) -> bool
    where
        F: FnOnce() -> Result<Rendered, RenderError> + Send + 'static,
    {
        let Begin::Lead(mut done, completion) = self.begin(&key, Why::Prewarm) else {
            return false;
        };
        self.start(completion, render);
        let _ = done.wait_for(Option::is_some).await;
        true
    }

    /// Under the lock: answer from a finished entry, join a render in flight, or register a new
    /// one (the caller then starts it, outside the lock).
    fn begin(&self, key: &CacheKey, why: Why) -> Begin {
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.tick += 1;
        let tick = inner.tick;
        let request = why == Why::Request;
        match inner.slots.get_mut(key) {
            Some(Slot::Ready { result, last_used }) => {
                if request {
                    *last_used = tick;
                    inner.stats.hits += 1;
                }
                Begin::Hit(result.clone())
            }
            Some(Slot::InFlight { done, .. }) => {
                if request {
                    inner.stats.misses += 1;
                }
                Begin::Join(done.clone())
            }
            None => {
                inner.next_render_id += 1;
                let id = inner.next_render_id;
                let (sender, done) = watch::channel(None);
                inner.slots.insert(
                    key.clone(),
                    Slot::InFlight {
                        id,
                        done: done.clone(),
                    },
                );
                if request {
                    inner.stats.misses += 1;
                } else {
                    inner.stats.prewarms += 1;
                }
                inner.stats.renders += 1;
                inner.stats.in_flight += 1;
                let completion = Completion {
                    cache: self.clone(),
                    key: key.clone(),
                    id,
                    store_errors: request,
                    sender: Some(sender),
                };
                Begin::Lead(done, completion)
            }
        }
    }

    /// Drop every entry of an older generation (called when a new snapshot is published).
    pub fn retain_generation(&self, generation: u64) {
        let _served = self.advance_generation(generation);
    }

    /// [`Self::retain_generation`], returning what was being served: the pool and version of
    /// every dropped body, moved to `generation`, most recently used first. Failed renders are
    /// not included.
    pub fn advance_generation(&self, generation: u64) -> Vec<CacheKey> {
        let mut inner = self.lock();
        inner.oldest_generation = inner.oldest_generation.max(generation);
        let oldest = inner.oldest_generation;
        let mut stale: Vec<(u64, CacheKey, bool)> = inner
            .slots
            .iter()
            .filter(|(key, _)| key.generation < oldest)
            .filter_map(|(key, slot)| match slot {
                Slot::Ready { result, last_used } => {
                    Some((*last_used, key.clone(), result.is_ok()))
                }
                Slot::InFlight { .. } => None,
            })
            .collect();
        for (_, key, _) in &stale {
            inner.remove_ready(key);
        }
        stale.sort_by_key(|(last_used, _, _)| std::cmp::Reverse(*last_used));
        let mut served: Vec<CacheKey> = Vec::new();
        for (_, key, ok) in stale {
            let key = CacheKey {
                generation: oldest,
                ..key
            };
            if ok && !served.contains(&key) {
                served.push(key);
            }
        }
        served
    }

    /// Moves the cache to `generation` ([`Self::advance_generation`]) and renders again, one at a
    /// time, what was being served, so that the first request after a change finds its payload
    /// ready instead of waiting for a render. `render_for` makes the render of a key (the same
    /// pure render a request would run); `superseded` is checked before each render, so a newer
    /// generation stops the work for this one.
    pub async fn advance_and_prewarm<M, F>(
        &self,
        generation: u64,
        mut render_for: M,
        superseded: impl Fn() -> bool,
    ) where
        M: FnMut(&CacheKey) -> F,
        F: FnOnce() -> Result<Rendered, RenderError> + Send + 'static,
    {
        for key in self.advance_generation(generation) {
            if superseded() {
                return;
            }
            let render = render_for(&key);
            self.prewarm(key, render).await;
        }
    }

    /// Counters and sizes right now.
    pub fn stats(&self) -> CacheStats {
        self.lock().stats
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding the lock; if something ever did, the map is still
        // consistent enough to keep serving.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs the caller's render, turning a panic into an error that is not cached.
fn run_render<F>(key: &CacheKey, render: F) -> (RenderResult, bool)
where
    F: FnOnce() -> Result<Rendered, RenderError>,
{
    match catch_unwind(AssertUnwindSafe(render)) {
        Ok(Ok(rendered)) => (Ok(Arc::new(rendered)), true),
        Ok(Err(error)) => (Err(Arc::new(error)), true),
        Err(_) => (
            Err(Arc::new(RenderError::InvalidInput(format!(
                "rendering pool {:?} for spec {} panicked",
                key.pool, key.version
            )))),
            false,
        ),
    }
}

fn abandoned(key: &CacheKey) -> Arc<RenderError> {
    Arc::new(RenderError::InvalidInput(format!(
        "rendering pool {:?} for spec {} was abandoned",
        key.pool, key.version
    )))
}

/// Bytes an entry counts against the bound. Errors are bounded by count instead.
fn body_cost(result: &RenderResult) -> usize {
    match result {
        Ok(rendered) => rendered.body.len(),
        Err(_) => 0,
    }
}

/// Owned by the render task: stores the result and wakes the waiters. If dropped without
/// finishing, it removes the in-flight slot so the next request renders again.
struct Completion {
    cache: PayloadCache,
    key: CacheKey,
    id: u64,
    /// False for a prewarm: a failure is not kept (see [`PayloadCache::prewarm`]).
    store_errors: bool,
    sender: Option<watch::Sender<Option<RenderResult>>>,
}

impl Completion {
    fn finish(mut self, (result, cacheable): (RenderResult, bool)) {
        {
            let mut inner = self.cache.lock();
            inner.stats.in_flight = inner.stats.in_flight.saturating_sub(1);
            if inner.owns_slot(&self.key, self.id) {
                inner.slots.remove(&self.key);
                let keep = cacheable
                    && (result.is_ok() || self.store_errors)
                    && self.key.generation >= inner.oldest_generation
                    && body_cost(&result) <= inner.max_bytes;
                if keep {
                    inner.insert_ready(self.key.clone(), result.clone());
                }
            }
        }
        if let Some(sender) = self.sender.take() {
            sender.send_replace(Some(result));
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if self.sender.is_some() {
            let mut inner = self.cache.lock();
            inner.stats.in_flight = inner.stats.in_flight.saturating_sub(1);
            if inner.owns_slot(&self.key, self.id) {
                inner.slots.remove(&self.key);
            }
            // Dropping the sender (after the lock) wakes the waiters with an error.
        }
    }
}

impl Inner {
    fn owns_slot(&self, key: &CacheKey, render_id: u64) -> bool {
        matches!(self.slots.get(key), Some(Slot::InFlight { id, .. }) if *id == render_id)
    }

    fn insert_ready(&mut self, key: CacheKey, result: RenderResult) {
        self.tick += 1;
        let is_error = result.is_err();
        self.stats.bytes += body_cost(&result);
        self.stats.entries += 1;
        if is_error {
            self.stats.error_entries += 1;
        }
        self.slots.insert(
            key.clone(),
            Slot::Ready {
                result,
                last_used: self.tick,
            },
        );
        if is_error {
            while self.stats.error_entries > MAX_ERROR_ENTRIES {
                if !self.evict_one(&key, true) {
                    break;
                }
            }
        } else {
            while self.stats.bytes > self.max_bytes {
                if !self.evict_one(&key, false) {
                    break;
                }
            }
        }
    }

    /// Evicts the finished body (or error) of the oldest generation, least recently used first,
    /// other than `keep`. Returns false if there was nothing to evict.
    fn evict_one(&mut self, keep: &CacheKey, errors: bool) -> bool {
        let victim = self
            .slots
            .iter()
            .filter_map(|(key, slot)| match slot {
                Slot::Ready { result, last_used } if result.is_err() == errors && key != keep => {
                    Some(((key.generation, *last_used), key))
                }
                _ => None,
            })
            .min_by_key(|(order, _)| *order)
            .map(|(_, key)| key.clone());
        match victim {
            Some(key) => {
                self.remove_ready(&key);
                self.stats.evictions += 1;
                true
            }
            None => false,
        }
    }

    fn remove_ready(&mut self, key: &CacheKey) {
        if let Some(Slot::Ready { result, .. }) = self.slots.get(key) {
            let cost = body_cost(result);
            let is_error = result.is_err();
            self.slots.remove(key);
            self.stats.bytes -= cost;
            self.stats.entries -= 1;
            if is_error {
                self.stats.error_entries -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn key(pool: &str, generation: u64) -> CacheKey {
        CacheKey {
            pool: Arc::from(pool),
            version: SpecVersion::V3_5,
            generation,
        }
    }

    fn rendered(body: &str) -> Rendered {
        Rendered {
            body: Bytes::from(body.to_owned()),
            rendered_config: "rendered-master-1".into(),
            version: SpecVersion::V3_5,
            image: None,
            layered: None,
        }
    }

    /// A render that counts its calls and returns `body`.
    fn counting(
        calls: &Arc<AtomicUsize>,
        body: &'static str,
    ) -> impl FnOnce() -> Result<Rendered, RenderError> + Send + 'static {
        let calls = calls.clone();
        move || {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(rendered(body))
        }
    }

    /// Polls `condition` until it holds, failing the test after a generous deadline.
    async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// A gate a render blocks on until the test opens it.
    fn gate() -> (std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>) {
        std::sync::mpsc::channel()
    }

    fn spawn<T: Send + 'static>(
        future: impl Future<Output = T> + Send + 'static,
    ) -> tokio::task::JoinHandle<T> {
        tokio::spawn(future)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_pools_asked_at_once_render_at_most_one_per_core_at_a_time() {
        let cache = PayloadCache::new(1 << 20);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let pools = 3 * render_parallelism();
        let requests: Vec<_> = (0..pools)
            .map(|i| {
                let (cache, running, most) = (cache.clone(), running.clone(), most.clone());
                spawn(async move {
                    let pool = format!("pool{i}");
                    cache
                        .get_or_render(key(&pool, 1), move || {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(20));
                            running.fetch_sub(1, Ordering::SeqCst);
                            Ok(rendered("{}"))
                        })
                        .await
                })
            })
            .collect();
        for request in requests {
            assert!(request.await.unwrap().is_ok(), "every pool is served");
        }
        let most = most.load(Ordering::SeqCst);
        assert!(
            (1..=render_parallelism()).contains(&most),
            "{most} renders ran at once, for {} permits",
            render_parallelism()
        );
        assert_eq!(cache.stats().renders, pools as u64);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_cold_requests_render_once() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        let (open, gate) = gate();

        let first = {
            let (cache, calls) = (cache.clone(), calls.clone());
            spawn(async move {
                cache
                    .lookup(key("master", 1), move || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        gate.recv().map_err(|_| RenderError::NotReady(Vec::new()))?;
                        Ok(rendered("{\"ignition\":{}}"))
                    })
                    .await
            })
        };
        wait_until("the first render to start", || cache.stats().in_flight == 1).await;

        let second = {
            let (cache, calls) = (cache.clone(), calls.clone());
            spawn(async move {
                cache
                    .lookup(key("master", 1), counting(&calls, "other"))
                    .await
            })
        };
        // The second lookup has joined the in-flight render once it counted as a miss.
        wait_until("the second lookup to join", || cache.stats().misses == 2).await;
        open.send(()).unwrap();

        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        assert_eq!(calls.load(Ordering::SeqCst), 1, "rendered exactly once");
        assert_eq!(first.outcome, CacheOutcome::Miss);
        assert_eq!(second.outcome, CacheOutcome::Joined);
        let (first, second) = (first.result.unwrap(), second.result.unwrap());
        assert!(
            Arc::ptr_eq(&first, &second),
            "both got the same shared body"
        );
        assert_eq!(first.body, Bytes::from_static(b"{\"ignition\":{}}"));

        let third = cache.lookup(key("master", 1), counting(&calls, "x")).await;
        assert_eq!(third.outcome, CacheOutcome::Hit);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.renders), (1, 2, 1));
        assert_eq!((stats.entries, stats.bytes, stats.in_flight), (1, 15, 0));
    }

    #[tokio::test]
    async fn new_generation_renders_again_and_retain_drops_old() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        let old = cache
            .get_or_render(key("master", 1), counting(&calls, "old"))
            .await;
        assert_eq!(old.unwrap().body, "old");
        let again = cache
            .get_or_render(key("master", 1), counting(&calls, "new"))
            .await;
        assert_eq!(
            again.unwrap().body,
            "old",
            "same generation is served from the cache"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let new = cache
            .get_or_render(key("master", 2), counting(&calls, "new"))
            .await;
        assert_eq!(
            new.unwrap().body,
            "new",
            "a new generation is rendered, not served stale"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(cache.stats().entries, 2);

        cache.retain_generation(2);
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.bytes), (1, 3));
        // A late render of a retired generation is served but not stored.
        let late = cache
            .get_or_render(key("master", 1), counting(&calls, "late"))
            .await;
        assert_eq!(late.unwrap().body, "late");
        assert_eq!(cache.stats().entries, 1);
    }

    #[tokio::test]
    async fn memory_bound_evicts_least_recently_used() {
        let cache = PayloadCache::new(250);
        let calls = Arc::new(AtomicUsize::new(0));
        let hundred = "x".repeat(100).leak();
        for pool in ["a", "b"] {
            cache
                .get_or_render(key(pool, 1), counting(&calls, hundred))
                .await
                .unwrap();
        }
        // Touch "a" so that "b" is the least recently used.
        let hit = cache.lookup(key("a", 1), counting(&calls, hundred)).await;
        assert_eq!(hit.outcome, CacheOutcome::Hit);
        cache
            .get_or_render(key("c", 1), counting(&calls, hundred))
            .await
            .unwrap();

        let stats = cache.stats();
        assert_eq!((stats.entries, stats.bytes, stats.evictions), (2, 200, 1));
        assert_eq!(
            cache
                .lookup(key("a", 1), counting(&calls, hundred))
                .await
                .outcome,
            CacheOutcome::Hit
        );
        assert_eq!(
            cache
                .lookup(key("c", 1), counting(&calls, hundred))
                .await
                .outcome,
            CacheOutcome::Hit
        );
        assert_eq!(
            cache
                .lookup(key("b", 1), counting(&calls, hundred))
                .await
                .outcome,
            CacheOutcome::Miss
        );
        assert!(cache.stats().bytes <= 250);
    }

    #[tokio::test]
    async fn older_generation_is_evicted_first() {
        let cache = PayloadCache::new(250);
        let calls = Arc::new(AtomicUsize::new(0));
        let hundred = "x".repeat(100).leak();
        cache
            .get_or_render(key("a", 2), counting(&calls, hundred))
            .await
            .unwrap();
        cache
            .get_or_render(key("b", 1), counting(&calls, hundred))
            .await
            .unwrap();
        cache
            .get_or_render(key("c", 2), counting(&calls, hundred))
            .await
            .unwrap();
        assert_eq!(
            cache
                .lookup(key("a", 2), counting(&calls, hundred))
                .await
                .outcome,
            CacheOutcome::Hit
        );
        assert_eq!(
            cache
                .lookup(key("b", 1), counting(&calls, hundred))
                .await
                .outcome,
            CacheOutcome::Miss
        );
    }

    #[tokio::test]
    async fn body_larger_than_the_budget_is_served_but_not_kept() {
        let cache = PayloadCache::new(10);
        let calls = Arc::new(AtomicUsize::new(0));
        let small = cache
            .get_or_render(key("a", 1), counting(&calls, "tiny"))
            .await;
        assert_eq!(small.unwrap().body, "tiny");
        let big = cache
            .get_or_render(key("b", 1), counting(&calls, "this is too big"))
            .await;
        assert_eq!(big.unwrap().body, "this is too big");
        let stats = cache.stats();
        assert_eq!(
            (stats.entries, stats.bytes),
            (1, 4),
            "the small entry survives"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_flight_render_is_not_evicted() {
        let cache = PayloadCache::new(150);
        let calls = Arc::new(AtomicUsize::new(0));
        let (open, gate) = gate();
        let slow = {
            let cache = cache.clone();
            spawn(async move {
                cache
                    .get_or_render(key("slow", 1), move || {
                        gate.recv().map_err(|_| RenderError::NotReady(Vec::new()))?;
                        Ok(rendered("slow body"))
                    })
                    .await
            })
        };
        wait_until("the slow render to start", || cache.stats().in_flight == 1).await;
        let hundred = "x".repeat(100).leak();
        for pool in ["a", "b", "c"] {
            cache
                .get_or_render(key(pool, 1), counting(&calls, hundred))
                .await
                .unwrap();
        }
        // Eviction ran twice meanwhile; the in-flight render is still the one a joiner waits on.
        let joiner = {
            let (cache, calls) = (cache.clone(), calls.clone());
            spawn(async move {
                cache
                    .lookup(key("slow", 1), counting(&calls, "second render"))
                    .await
            })
        };
        wait_until("the joiner to join", || cache.stats().misses == 5).await;
        open.send(()).unwrap();
        assert_eq!(slow.await.unwrap().unwrap().body, "slow body");
        let joined = joiner.await.unwrap();
        assert_eq!(joined.outcome, CacheOutcome::Joined);
        assert_eq!(joined.result.unwrap().body, "slow body");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn panicking_render_fails_its_waiters_and_is_retried() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        let (open, gate) = gate();
        let first = {
            let cache = cache.clone();
            spawn(async move {
                cache
                    .get_or_render(key("master", 1), move || {
                        // Wait for the joiner, then fail the way a bug would.
                        let _ = gate.recv();
                        panic!("render bug");
                    })
                    .await
            })
        };
        wait_until("the render to start", || cache.stats().in_flight == 1).await;
        let joiner = {
            let (cache, calls) = (cache.clone(), calls.clone());
            spawn(async move {
                cache
                    .lookup(key("master", 1), counting(&calls, "never"))
                    .await
            })
        };
        wait_until("the joiner to join", || cache.stats().misses == 2).await;
        open.send(()).unwrap();

        let first = first.await.unwrap().unwrap_err();
        assert_eq!(first.kind(), "invalid_input");
        assert!(first.to_string().contains("panicked"), "{first}");
        let joined = joiner.await.unwrap();
        assert_eq!(joined.outcome, CacheOutcome::Joined);
        assert!(joined.result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 0, "the joiner did not render");

        let stats = cache.stats();
        assert_eq!(
            (stats.entries, stats.in_flight),
            (0, 0),
            "a panic is not cached"
        );
        let retry = cache
            .lookup(key("master", 1), counting(&calls, "fixed"))
            .await;
        assert_eq!(retry.outcome, CacheOutcome::Miss);
        assert_eq!(retry.result.unwrap().body, "fixed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn render_completes_for_waiters_when_its_requester_goes_away() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        let (open, gate) = gate();
        let requester = {
            let cache = cache.clone();
            spawn(async move {
                cache
                    .get_or_render(key("master", 1), move || {
                        gate.recv().map_err(|_| RenderError::NotReady(Vec::new()))?;
                        Ok(rendered("body"))
                    })
                    .await
            })
        };
        wait_until("the render to start", || cache.stats().in_flight == 1).await;
        let joiner = {
            let (cache, calls) = (cache.clone(), calls.clone());
            spawn(async move {
                cache
                    .lookup(key("master", 1), counting(&calls, "never"))
                    .await
            })
        };
        wait_until("the joiner to join", || cache.stats().misses == 2).await;
        // The client that caused the render disconnects.
        requester.abort();
        assert!(requester.await.unwrap_err().is_cancelled());
        open.send(()).unwrap();

        let joined = joiner.await.unwrap();
        assert_eq!(joined.result.unwrap().body, "body");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(
            cache.stats().entries,
            1,
            "the result was stored for later requests"
        );
    }

    #[tokio::test]
    async fn errors_are_cached_per_generation() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        let failing = |calls: &Arc<AtomicUsize>| {
            let calls = calls.clone();
            move || {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(RenderError::NotFound(
                    "machine-pools/master.yaml not found".into(),
                ))
            }
        };
        let first = cache.lookup(key("master", 1), failing(&calls)).await;
        assert_eq!(first.outcome, CacheOutcome::Miss);
        assert_eq!(first.result.unwrap_err().kind(), "not_found");
        let again = cache.lookup(key("master", 1), failing(&calls)).await;
        assert_eq!(again.outcome, CacheOutcome::Hit);
        assert_eq!(again.result.unwrap_err().kind(), "not_found");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "a retry storm does not re-render"
        );

        // The fix arrives as a new generation and is served at once.
        let fixed = cache
            .get_or_render(key("master", 2), counting(&calls, "fixed"))
            .await;
        assert_eq!(fixed.unwrap().body, "fixed");
    }

    #[tokio::test]
    async fn cached_errors_are_bounded_and_never_evict_bodies() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        cache
            .get_or_render(key("master", 1), counting(&calls, "body"))
            .await
            .unwrap();
        for n in 0..MAX_ERROR_ENTRIES + 10 {
            let pool = format!("no-such-pool-{n}");
            let error = cache
                .get_or_render(key(&pool, 1), move || Err(RenderError::PoolNotServed(pool)))
                .await;
            assert!(error.is_err());
        }
        let stats = cache.stats();
        assert_eq!(stats.error_entries, MAX_ERROR_ENTRIES);
        assert_eq!(stats.entries, MAX_ERROR_ENTRIES + 1);
        let body = cache
            .lookup(key("master", 1), counting(&calls, "other"))
            .await;
        assert_eq!(body.outcome, CacheOutcome::Hit);
        // The oldest errors went first.
        let oldest = cache
            .lookup(key("no-such-pool-0", 1), || {
                Err(RenderError::NotReady(Vec::new()))
            })
            .await;
        assert_eq!(oldest.outcome, CacheOutcome::Miss);
    }

    #[tokio::test]
    async fn advance_returns_what_was_served_most_recent_first() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        for pool in ["a", "b"] {
            cache
                .get_or_render(key(pool, 1), counting(&calls, "body"))
                .await
                .unwrap();
        }
        let failed = cache
            .get_or_render(key("c", 1), || Err(RenderError::NotReady(Vec::new())))
            .await;
        assert!(failed.is_err());
        // "a" becomes the most recently used.
        cache
            .get_or_render(key("a", 1), counting(&calls, "body"))
            .await
            .unwrap();

        let served = cache.advance_generation(2);
        assert_eq!(
            served,
            vec![key("a", 2), key("b", 2)],
            "bodies only, most recent first"
        );
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.bytes), (0, 0));
    }

    #[tokio::test]
    async fn prewarmed_payload_is_ready_for_the_first_request_after_a_change() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        cache
            .get_or_render(key("master", 1), counting(&calls, "old"))
            .await
            .unwrap();

        cache
            .advance_and_prewarm(2, |_| counting(&calls, "new"), || false)
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let first = cache
            .lookup(key("master", 2), counting(&calls, "again"))
            .await;
        assert_eq!(first.outcome, CacheOutcome::Hit);
        assert_eq!(first.result.unwrap().body, "new");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "the request did not render"
        );
        let stats = cache.stats();
        assert_eq!((stats.prewarms, stats.renders, stats.entries), (1, 2, 1));
    }

    #[tokio::test]
    async fn a_failed_prewarm_is_not_stored() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        cache
            .get_or_render(key("master", 1), counting(&calls, "old"))
            .await
            .unwrap();

        cache
            .advance_and_prewarm(
                2,
                |_| {
                    || {
                        Err(RenderError::NotFound(
                            "machine-pools/master.yaml not found".into(),
                        ))
                    }
                },
                || false,
            )
            .await;
        assert_eq!(cache.stats().entries, 0);
        // The first request renders itself, so its failure would be logged and counted there.
        let first = cache
            .lookup(key("master", 2), counting(&calls, "fixed"))
            .await;
        assert_eq!(first.outcome, CacheOutcome::Miss);
        assert_eq!(first.result.unwrap().body, "fixed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_during_a_prewarm_joins_it() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        cache
            .get_or_render(key("master", 1), counting(&calls, "old"))
            .await
            .unwrap();
        let (open, gate) = gate();
        let gate = Arc::new(Mutex::new(Some(gate)));
        let prewarm = {
            let cache = cache.clone();
            spawn(async move {
                cache
                    .advance_and_prewarm(
                        2,
                        move |_| {
                            let gate = gate.lock().unwrap().take();
                            move || {
                                if let Some(gate) = gate {
                                    gate.recv().map_err(|_| RenderError::NotReady(Vec::new()))?;
                                }
                                Ok(rendered("new"))
                            }
                        },
                        || false,
                    )
                    .await
            })
        };
        wait_until("the prewarm to start", || cache.stats().in_flight == 1).await;
        let request = {
            let (cache, calls) = (cache.clone(), calls.clone());
            spawn(async move {
                cache
                    .lookup(key("master", 2), counting(&calls, "dup"))
                    .await
            })
        };
        wait_until("the request to join", || cache.stats().misses == 2).await;
        open.send(()).unwrap();
        prewarm.await.unwrap();
        let request = request.await.unwrap();
        assert_eq!(request.outcome, CacheOutcome::Joined);
        assert_eq!(request.result.unwrap().body, "new");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "only the first generation's render ran"
        );
    }

    #[tokio::test]
    async fn a_superseded_generation_is_not_prewarmed() {
        let cache = PayloadCache::new(1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        for pool in ["a", "b"] {
            cache
                .get_or_render(key(pool, 1), counting(&calls, "old"))
                .await
                .unwrap();
        }
        cache
            .advance_and_prewarm(2, |_| counting(&calls, "new"), || true)
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(cache.stats().prewarms, 0);
    }
}
