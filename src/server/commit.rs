//! Group commit of served records: a config answer waits until the write that carries its
//! record has succeeded, so a replica that dies right after answering (an OOM kill, a kernel
//! panic, a power loss) has lost nothing a machine was told.
//!
//! The request path and the records writer ([`crate::mcn::exchange`]) meet here and nowhere else:
//! - [`super::served::ServedLog`] numbers every record it keeps (a sequence number, in order) and
//!   wakes the writer ([`GroupCommit::recorded`]).
//! - The writer takes every record kept so far in one go, together with the count of records
//!   numbered so far, writes them in one batch and, once the API has accepted the write,
//!   declares that count durable ([`CommitWriter::committed`]). Records that arrive while a
//!   write is in flight go in the next one: one write carries every answer of its interval,
//!   never one write per request.
//! - An answer waits for its number to be durable ([`GroupCommit::wait`]), at most a bound
//!   (2 s by default; its body is sent meanwhile, all but the last byte: [`super::held_tail`]):
//!   when the API is slow or unreachable the config is served anyway, the
//!   record stays pending in memory and is published when the API is back, and the answer is
//!   counted as sent before its record was durable (`mcs_mcn_records_served_before_durable`).
//!   A booting machine is never refused because of the API, and never delayed beyond the bound.
//! - The writer writes at most once per flush interval, except when waiting longer cannot make
//!   the batch any larger: every open connection of the serving ports is an answer waiting for
//!   its record ([`GroupCommit::connection`] counts them, [`GroupCommit::wait`] the waiting
//!   ones), and at least [`EARLY_BATCH`] answers wait ([`CommitWriter::everyone_waits`]). Then
//!   nobody is on the way who could still join this write, and waiting out the interval would
//!   only delay every answer of the batch. A batch that small or a connection doing something
//!   else (a handshake, a request not yet answered, a response that carries no new record, an
//!   idle keep-alive) keeps the interval (an answer whose body is on its way while its last
//!   byte waits for the record counts as waiting from the moment its record exists): a trickle of machines or a port scan never writes more often than
//!   before, and a write goes early only with at least [`EARLY_BATCH`] records in it.
//!
//! Without a writer (bootstrap mode has no API to write to) nobody waits.
//!
//! Owns only the counters and the wake-up between the two sides; no I/O, no lock held across
//! an `.await`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};

/// How long a config answer waits at most for its record to be durable.
pub const DEFAULT_WAIT_BOUND: Duration = Duration::from_secs(2);

/// The fewest records a write carries when it goes before its flush interval is over (module
/// docs): a write that goes early carries at least this many answers, so writes per answer
/// never exceed one in this many on that path.
pub const EARLY_BATCH: u64 = 16;

/// How a wait for durability ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The write carrying the record succeeded.
    Durable,
    /// The bound passed first: the answer goes out, the record is still pending.
    Pending,
    /// Nothing writes records (bootstrap mode): there is nothing to wait for.
    NoWriter,
}

/// The shared handle (cheap to clone) between the request path and the records writer.
#[derive(Clone, Debug)]
pub struct GroupCommit {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Records numbered below this are durable.
    durable: watch::Sender<u64>,
    /// Wakes the writer when a record was added.
    pending: Notify,
    /// True once a writer exists (cluster mode).
    writer: AtomicBool,
    /// What the serving ports are doing, for the writer's early writes.
    activity: watch::Sender<Activity>,
}

/// What the serving ports are doing (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Activity {
    /// Open connections of the serving ports.
    open: usize,
    /// Serving listeners that may still hand over connections: at shutdown a listener takes
    /// the connections already completed in its backlog, and until it has, "no connection
    /// open" does not mean drained.
    listening: usize,
    /// Answers waiting for their record to be durable.
    waiting: usize,
}

impl Default for GroupCommit {
    fn default() -> Self {
        GroupCommit {
            inner: Arc::new(Inner {
                durable: watch::Sender::new(0),
                pending: Notify::new(),
                writer: AtomicBool::new(false),
                activity: watch::Sender::new(Activity::default()),
            }),
        }
    }
}

impl GroupCommit {
    /// A record was added: wake the writer (a wake-up given while it writes is kept, so the
    /// records of that interval go in the next write).
    pub fn recorded(&self) {
        self.inner.pending.notify_one();
    }

    /// A connection of a serving port opened; it counts until the handle is dropped.
    pub fn connection(&self) -> OpenConnection {
        Counted::new(&self.inner, |activity| &mut activity.open)
    }

    /// A serving listener started; it counts until the handle is dropped, which it does once it
    /// has handed over every connection it will (its backlog's, at shutdown).
    pub fn listener(&self) -> OpenListener {
        Counted::new(&self.inner, |activity| &mut activity.listening)
    }

    /// Waits at most `bound` for record `sequence` to be durable. The answer counts as waiting
    /// from this call on, not from the future's first poll: an answer that sends its body while
    /// the write is on its way ([`super::held_tail`]) polls it only for its last byte, and the
    /// writer's early write must see it waiting as soon as its record exists.
    pub fn wait(
        &self,
        sequence: u64,
        bound: Duration,
    ) -> impl Future<Output = Durability> + Send + 'static {
        let waiting = self
            .inner
            .writer
            .load(Ordering::Acquire)
            .then(|| Waiting::new(self.inner.clone()));
        let mut durable = self.inner.durable.subscribe();
        async move {
            let Some(_waiting) = waiting else {
                return Durability::NoWriter;
            };
            let written = tokio::time::timeout(bound, async {
                durable.wait_for(|count| *count > sequence).await.is_ok()
            })
            .await;
            if written == Ok(true) {
                Durability::Durable
            } else {
                Durability::Pending
            }
        }
    }

    /// The writer's side. There is one writer per process (the exchange's flusher); from now
    /// on answers wait for their records.
    pub fn writer(&self) -> CommitWriter {
        self.inner.writer.store(true, Ordering::Release);
        CommitWriter {
            inner: self.inner.clone(),
        }
    }

    /// How many records are durable (numbered below this).
    pub fn durable(&self) -> u64 {
        *self.inner.durable.borrow()
    }
}

/// An open connection of a serving port (see [`GroupCommit::connection`]).
pub type OpenConnection = Counted;

/// A serving listener of [`GroupCommit::listener`], until it has handed over its last
/// connection.
pub type OpenListener = Counted;

/// One count of [`Activity`] (which one, `count` says), held while this lives.
pub struct Counted {
    inner: Arc<Inner>,
    count: fn(&mut Activity) -> &mut usize,
}

impl Counted {
    fn new(inner: &Arc<Inner>, count: fn(&mut Activity) -> &mut usize) -> Self {
        inner.activity.send_modify(|activity| *count(activity) += 1);
        Counted {
            inner: inner.clone(),
            count,
        }
    }
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counted")
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let count = self.count;
        self.inner.activity.send_modify(|activity| {
            let counted = count(activity);
            *counted = counted.saturating_sub(1);
        });
    }
}

/// One answer waiting in [`GroupCommit::wait`], for as long as it waits.
struct Waiting {
    inner: Arc<Inner>,
}

impl Waiting {
    fn new(inner: Arc<Inner>) -> Self {
        inner.activity.send_modify(|activity| activity.waiting += 1);
        Waiting { inner }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.inner
            .activity
            .send_modify(|activity| activity.waiting = activity.waiting.saturating_sub(1));
    }
}

/// The records writer's handle: waits for records and declares them durable.
#[derive(Debug)]
pub struct CommitWriter {
    inner: Arc<Inner>,
}

impl CommitWriter {
    /// Resolves when a record was added since the last call (at once if one was meanwhile).
    pub async fn pending(&self) {
        self.inner.pending.notified().await;
    }

    /// Resolves once waiting longer cannot make the next write carry more (module docs): at
    /// least `at_least` answers wait for their records, and every open connection of the
    /// serving ports is one of them. Answers, not records: records nobody waits for (those of
    /// answers already sent after the bound, or kept while the API was away) never make a
    /// write go early, so a writer with such records and nobody asking keeps its interval
    /// instead of writing again at once (the scale bench's Node churn found that loop).
    pub async fn everyone_waits(&self, at_least: u64) {
        let at_least = usize::try_from(at_least).unwrap_or(usize::MAX).max(1);
        let mut activity = self.inner.activity.subscribe();
        let _ = activity
            .wait_for(|a| a.waiting >= at_least && a.waiting >= a.open)
            .await;
    }

    /// Resolves once no connection of the serving ports is open and no serving listener can
    /// hand over another (at shutdown: drained, the backlogs' connections included).
    pub fn connections_closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut activity = self.inner.activity.subscribe();
        async move {
            let _ = activity.wait_for(|a| a.open == 0 && a.listening == 0).await;
        }
    }

    /// Every record numbered below `count` is durable (a write that carried all of them
    /// succeeded, or they were forgotten as settled or expired). Never goes back.
    pub fn committed(&self, count: u64) {
        self.inner.durable.send_if_modified(|durable| {
            let advanced = count > *durable;
            if advanced {
                *durable = count;
            }
            advanced
        });
    }

    /// How many records are durable.
    pub fn durable(&self) -> u64 {
        *self.inner.durable.borrow()
    }
}

impl Drop for CommitWriter {
    /// A writer that stops (shutdown) stops answers from waiting for it.
    fn drop(&mut self) {
        self.inner.writer.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn without_a_writer_nobody_waits() {
        let commit = GroupCommit::default();
        assert_eq!(
            commit.wait(0, Duration::from_secs(2)).await,
            Durability::NoWriter
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_waits_for_the_write_that_carries_its_record() {
        let commit = GroupCommit::default();
        let writer = commit.writer();
        let waiting = tokio::spawn({
            let commit = commit.clone();
            async move { commit.wait(2, Duration::from_secs(2)).await }
        });
        commit.recorded();
        writer.pending().await;
        // A write that carried records 0 and 1 only does not release record 2.
        writer.committed(2);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished());
        writer.committed(3);
        assert_eq!(waiting.await.unwrap(), Durability::Durable);
        // Never goes back.
        writer.committed(1);
        assert_eq!(commit.durable(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_waits_at_most_the_bound() {
        let commit = GroupCommit::default();
        let _writer = commit.writer();
        let started = tokio::time::Instant::now();
        assert_eq!(
            commit.wait(0, Duration::from_secs(2)).await,
            Durability::Pending
        );
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn records_added_during_a_write_wake_the_writer_for_the_next() {
        let commit = GroupCommit::default();
        let writer = commit.writer();
        // Two records while the writer is busy: one wake-up is kept for it.
        commit.recorded();
        commit.recorded();
        tokio::time::timeout(Duration::from_millis(1), writer.pending())
            .await
            .expect("a kept wake-up");
        assert!(
            tokio::time::timeout(Duration::from_millis(1), writer.pending())
                .await
                .is_err(),
            "one wake-up for the whole batch"
        );
    }

    /// Whether the writer would write before its interval is over now.
    async fn early(writer: &CommitWriter) -> bool {
        tokio::time::timeout(
            Duration::from_millis(10),
            writer.everyone_waits(EARLY_BATCH),
        )
        .await
        .is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_goes_early_only_when_every_open_connection_waits_with_a_full_batch() {
        let commit = GroupCommit::default();
        let writer = commit.writer();
        // A batch of EARLY_BATCH answers, each on its own connection, and one more connection
        // still on its way (a handshake): not yet.
        let mut connections: Vec<OpenConnection> =
            (0..=EARLY_BATCH).map(|_| commit.connection()).collect();
        let waits: Vec<_> = (0..EARLY_BATCH)
            .map(|sequence| {
                commit.recorded();
                let commit = commit.clone();
                tokio::spawn(async move { commit.wait(sequence, Duration::from_secs(2)).await })
            })
            .collect();
        tokio::task::yield_now().await;
        assert!(!early(&writer).await, "a connection is still on its way");
        // That connection goes away (a port scan's connect): everyone left waits.
        connections.pop();
        assert!(early(&writer).await);
        writer.committed(EARLY_BATCH);
        for wait in waits {
            assert_eq!(wait.await.unwrap(), Durability::Durable);
        }
        drop(connections);
        // One machine alone waits on its connection: too small a batch to go early.
        let _connection = commit.connection();
        commit.recorded();
        let alone = tokio::spawn({
            let commit = commit.clone();
            async move { commit.wait(EARLY_BATCH, Duration::from_secs(2)).await }
        });
        tokio::task::yield_now().await;
        assert!(!early(&writer).await, "one record waits for the interval");
        writer.committed(EARLY_BATCH + 1);
        assert_eq!(alone.await.unwrap(), Durability::Durable);
    }

    #[tokio::test(start_paused = true)]
    async fn records_nobody_waits_for_never_make_a_write_go_early() {
        let commit = GroupCommit::default();
        let writer = commit.writer();
        // Many records not yet durable, no connection, nobody waiting (their answers went out
        // after the bound): the writer keeps its interval.
        for _ in 0..4 * EARLY_BATCH {
            commit.recorded();
        }
        assert!(!early(&writer).await, "nobody waits for these records");
        // Still none after a write that did not carry them all.
        writer.committed(EARLY_BATCH);
        assert!(!early(&writer).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_writer_releases_nobody_but_stops_new_waits() {
        let commit = GroupCommit::default();
        let writer = commit.writer();
        drop(writer);
        assert_eq!(
            commit.wait(0, Duration::from_secs(2)).await,
            Durability::NoWriter
        );
    }

    /// At shutdown a listener hands over the connections completed in its backlog after the
    /// records writer may already have looked: "drained" waits for the listener too (the switch
    /// rehearsal found an answer from the backlog without its record: the writer had seen no
    /// connection open and stopped).
    #[tokio::test(start_paused = true)]
    async fn drained_waits_for_the_listeners_backlog() {
        let commit = GroupCommit::default();
        let writer = commit.writer();
        let listening = commit.listener();
        let drained = tokio::spawn(writer.connections_closed());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            !drained.is_finished(),
            "no connection is open, but the listener may hand one over"
        );
        // The listener takes a connection from its backlog, then is done.
        let from_backlog = commit.connection();
        drop(listening);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            !drained.is_finished(),
            "the backlog's connection is still open"
        );
        drop(from_backlog);
        tokio::time::timeout(Duration::from_secs(1), drained)
            .await
            .expect("drained once the last connection closed")
            .unwrap();
        // Without listeners or connections, drained at once.
        tokio::time::timeout(Duration::from_millis(1), writer.connections_closed())
            .await
            .expect("nothing open");
    }
}
