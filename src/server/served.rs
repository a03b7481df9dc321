//! The served-request record: for each remote IP address, the last config this process answered
//! with a 200 (pool, rendered config, image, Ignition spec version, the client's Ignition
//! release, time in the API server's clock, [`crate::clock`]), and the last first-boot failure
//! the machine at that address reported (`POST /v1/node-failure`, sanitized: [`FailureRecord`]).
//!
//! Written by the `/config` handler on every successful answer ([`ServedLog::record`]) and read by
//! the MachineConfigNode publisher, which matches a joining Node's `InternalIP` against it to
//! write the bootstrap record on the node's MachineConfigNode. Owns only this bounded in-memory
//! map: it never touches the network, and holds its lock for a map operation only (never across
//! an `.await`), so the request path never waits on the publisher.
//!
//! Every record is numbered in order; the records writer tells through [`GroupCommit`] up to
//! which number they are durable, and the answer's last byte waits for its own
//! ([`ServedLog::durable`], bounded; see [`super::commit`] and [`super::held_tail`]).
//!
//! A failure report is numbered and made durable the same way, so that the machine's
//! MachineConfigNode can carry it once its Node exists. A config answered to the address after
//! the failure (the machine started over from Ignition) supersedes it: the failure is forgotten.
//!
//! The map is bounded ([`DEFAULT_CAPACITY`] addresses, [`FAILURE_CAPACITY`] failures); when full,
//! the address answered (or the failure reported) longest ago is forgotten. A booting machine asks once (plus retries) and joins within minutes, so only
//! recent answers matter; the bound keeps a scan of the port or a flood of requests from growing
//! memory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use super::commit::{Durability, GroupCommit};
use crate::clock::ClusterClock;
use crate::ignition::client::IgnitionRelease;
use crate::ignition::SpecVersion;
use crate::render::Rendered;

/// Most addresses remembered by default.
pub const DEFAULT_CAPACITY: usize = 4096;
/// Most failure reports remembered (one per address).
pub const FAILURE_CAPACITY: usize = 1024;

/// What a machine was answered, apart from when: the same for every machine of a pool that
/// asked with the same client release, so the records of a burst share one
/// ([`ServedRecord::answer`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Answer {
    /// The pool named in the request path.
    pub pool: String,
    /// The rendered MachineConfig the payload was built from.
    pub rendered_config: String,
    /// The OS image written into the node annotations / encapsulated config, if any.
    pub image: Option<String>,
    /// The Ignition spec version of the payload.
    pub spec_version: SpecVersion,
    /// The client's Ignition release from its `User-Agent` (`None`: not an Ignition one).
    pub ignition: Option<String>,
}

#[cfg(test)]
impl Answer {
    /// The tests' usual answer: `rendered_config` to a worker at spec 3.4, no image, no
    /// client release (struct update syntax changes the rest).
    pub fn worker(rendered_config: &str) -> Answer {
        Answer {
            pool: "worker".into(),
            rendered_config: rendered_config.into(),
            image: None,
            spec_version: SpecVersion::V3_4,
            ignition: None,
        }
    }
}

/// What one successful config request was answered with, and when. Reads as its [`Answer`]
/// (`record.pool`); the answer itself is shared: thousands of records (a scale-up, each copy
/// the records writer, the shared view and the publisher take) hold a few distinct answers,
/// and four strings each made them the largest part of the memory a burst of new machines
/// leaves behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedRecord {
    pub answer: Arc<Answer>,
    /// When the answer was sent.
    pub served_at: SystemTime,
}

impl ServedRecord {
    pub fn new(answer: Answer, served_at: SystemTime) -> Self {
        ServedRecord {
            answer: Arc::new(answer),
            served_at,
        }
    }

    /// The same answer (pool, rendered config, image, spec version) to the same client
    /// release, whenever it was given.
    pub fn same_answer(&self, other: &ServedRecord) -> bool {
        // Arc's equality of an `Eq` type is the pointer's first: shared answers compare at once.
        self.answer == other.answer
    }

    /// The answer, to change it (a copy of its own when it is shared).
    pub fn answer_mut(&mut self) -> &mut Answer {
        Arc::make_mut(&mut self.answer)
    }
}

impl std::ops::Deref for ServedRecord {
    type Target = Answer;

    fn deref(&self) -> &Answer {
        &self.answer
    }
}

/// Shares equal answers: one allocation per distinct answer however many records hold it.
#[derive(Debug, Default)]
struct AnswerTable {
    answers: HashSet<Arc<Answer>>,
}

impl AnswerTable {
    /// Answers no record holds any more are dropped once the table holds this many.
    const PRUNE_AT: usize = 256;

    /// The shared answer equal to `answer` (`answer` itself when it is new).
    fn share(&mut self, answer: Arc<Answer>) -> Arc<Answer> {
        if let Some(known) = self.answers.get(&answer) {
            return known.clone();
        }
        if self.answers.len() >= Self::PRUNE_AT {
            self.answers.retain(|known| Arc::strong_count(known) > 1);
        }
        self.answers.insert(answer.clone());
        answer
    }
}

/// A first-boot failure a machine reported, already sanitized (the message cut and its secrets
/// redacted, the image reduced to its registry host): nothing here may leak a secret, since it
/// is shared through the API and written on MachineConfigNodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureRecord {
    /// The pool the machine named.
    pub pool: String,
    /// The node identifier it reported (its host name, maybe a temporary one).
    pub node_id: String,
    /// The stage that failed, as reported (cut to a few dozen characters).
    pub stage: String,
    /// The sanitized error message.
    pub message: String,
    /// The registry host of the image it failed on, `none` or `invalid-url`.
    pub image: String,
    /// When the report was received (API server clock).
    pub reported_at: SystemTime,
}

/// What one write of the records writer carries ([`ServedLog::write_set`]).
#[derive(Clone, Debug, Default)]
pub struct WriteSet {
    /// Every remembered record, the one remembered last first.
    pub served: Vec<(IpAddr, ServedRecord)>,
    /// Every remembered failure report, the one reported last first.
    pub failures: Vec<(IpAddr, FailureRecord)>,
    /// How many records and failures were numbered so far: a write of these makes every
    /// number below it durable.
    pub count: u64,
}

/// Bounded map remote IP -> last [`ServedRecord`] (and last [`FailureRecord`]). Cheap to clone
/// (shared handle).
#[derive(Clone, Debug)]
pub struct ServedLog {
    inner: Arc<Mutex<Inner>>,
    commit: GroupCommit,
    clock: ClusterClock,
}

#[derive(Debug)]
struct Inner {
    capacity: usize,
    /// Increases with every record; orders entries by age and numbers records for the group
    /// commit (records numbered below it exist).
    next_sequence: u64,
    by_address: HashMap<IpAddr, (u64, ServedRecord)>,
    by_age: BTreeMap<u64, IpAddr>,
    failures: HashMap<IpAddr, (u64, FailureRecord)>,
    failures_by_age: BTreeMap<u64, IpAddr>,
    answers: AnswerTable,
}

impl Inner {
    /// Remembers `record` for the (canonical) `address`, forgetting the oldest when full;
    /// returns the record's number.
    fn insert(&mut self, address: IpAddr, mut record: ServedRecord) -> u64 {
        record.answer = self.answers.share(record.answer);
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        // The machine started over from Ignition: an earlier failure is history.
        if self
            .failures
            .get(&address)
            .is_some_and(|(_, failure)| failure.reported_at <= record.served_at)
        {
            self.remove_failure(address);
        }
        if let Some((old_sequence, _)) = self.by_address.insert(address, (sequence, record)) {
            self.by_age.remove(&old_sequence);
        }
        self.by_age.insert(sequence, address);
        while self.by_address.len() > self.capacity {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.by_address.remove(&oldest);
        }
        sequence
    }

    /// Remembers `failure` for the (canonical) `address`, forgetting the oldest when full;
    /// returns its number.
    fn insert_failure(&mut self, address: IpAddr, failure: FailureRecord) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        if let Some((old_sequence, _)) = self.failures.insert(address, (sequence, failure)) {
            self.failures_by_age.remove(&old_sequence);
        }
        self.failures_by_age.insert(sequence, address);
        while self.failures.len() > FAILURE_CAPACITY {
            let Some((_, oldest)) = self.failures_by_age.pop_first() else {
                break;
            };
            self.failures.remove(&oldest);
        }
        sequence
    }

    fn remove_failure(&mut self, address: IpAddr) {
        if let Some((sequence, _)) = self.failures.remove(&address) {
            self.failures_by_age.remove(&sequence);
        }
    }
}

impl Default for ServedLog {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }
}

impl ServedLog {
    /// A log remembering at most `capacity` addresses (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        ServedLog {
            inner: Arc::new(Mutex::new(Inner {
                capacity: capacity.max(1),
                next_sequence: 0,
                by_address: HashMap::new(),
                by_age: BTreeMap::new(),
                failures: HashMap::new(),
                failures_by_age: BTreeMap::new(),
                answers: AnswerTable::default(),
            })),
            commit: GroupCommit::default(),
            clock: ClusterClock::default(),
        }
    }

    /// Remembers `record` as the last answer to `address`, forgetting the oldest address when
    /// full. IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, seen on dual-stack listeners) are
    /// stored as the IPv4 address a Node reports. Returns the record's number and wakes the
    /// records writer.
    pub fn record(&self, address: IpAddr, record: ServedRecord) -> u64 {
        let sequence = self.lock().insert(address.to_canonical(), record);
        self.commit.recorded();
        sequence
    }

    /// The `/config` handler's hook: remembers that `remote` (whose `User-Agent` named the
    /// Ignition release `client`, if any) was answered `rendered` for `pool` just now, and
    /// returns the number of the record the answer waits for ([`ServedLog::durable`]). `None`,
    /// nothing to wait for: without a remote address (a test harness), or when this address was
    /// already given the same answer and that record is durable (a retry, a machine
    /// provisioned again, a health probe): its time is refreshed in memory and goes out with
    /// the next write, and the answer goes out at once.
    pub fn record_answer(
        &self,
        remote: Option<SocketAddr>,
        pool: &str,
        rendered: &Rendered,
        client: Option<&IgnitionRelease>,
    ) -> Option<u64> {
        let address = remote?.ip().to_canonical();
        let record = ServedRecord::new(
            Answer {
                pool: pool.to_owned(),
                rendered_config: rendered.rendered_config.clone(),
                image: rendered.image.clone(),
                spec_version: rendered.version,
                ignition: client.map(|c| c.as_str().to_owned()),
            },
            self.clock.now(),
        );
        if self.refresh_durable(address, &record) {
            return None;
        }
        Some(self.record(address, record))
    }

    /// When `address`'s remembered record is durable and says the same answer as `record`
    /// (and no failure report of the address waits to be superseded by this answer), moves
    /// its time to `record`'s (never back) and returns true.
    fn refresh_durable(&self, address: IpAddr, record: &ServedRecord) -> bool {
        let durable = self.commit.durable();
        let mut inner = self.lock();
        if inner.failures.contains_key(&address) {
            return false;
        }
        match inner.by_address.get_mut(&address) {
            Some((sequence, known)) if *sequence < durable && known.same_answer(record) => {
                known.served_at = known.served_at.max(record.served_at);
                true
            }
            _ => false,
        }
    }

    /// Remembers `failure` as the last one the machine at `address` reported; returns its
    /// number ([`ServedLog::durable`]) and wakes the records writer.
    pub fn record_failure(&self, address: IpAddr, failure: FailureRecord) -> u64 {
        let sequence = self.lock().insert_failure(address.to_canonical(), failure);
        self.commit.recorded();
        sequence
    }

    /// Every remembered failure report, the one reported last first.
    pub fn failures(&self) -> Vec<(IpAddr, FailureRecord)> {
        Self::failures_of(&self.lock())
    }

    /// The last failure reported from `address`, if it is still remembered.
    pub fn failure(&self, address: IpAddr) -> Option<FailureRecord> {
        self.lock()
            .failures
            .get(&address.to_canonical())
            .map(|(_, failure)| failure.clone())
    }

    fn failures_of(inner: &Inner) -> Vec<(IpAddr, FailureRecord)> {
        inner
            .failures_by_age
            .values()
            .rev()
            .filter_map(|address| {
                let (_, failure) = inner.failures.get(address)?;
                Some((*address, failure.clone()))
            })
            .collect()
    }

    /// Every remembered record and failure and how many were numbered so far (one lock): what
    /// one write of the records writer carries.
    pub fn write_set(&self) -> WriteSet {
        let inner = self.lock();
        WriteSet {
            served: Self::entries_of(&inner),
            failures: Self::failures_of(&inner),
            count: inner.next_sequence,
        }
    }

    /// Takes back failures this replica published before it restarted (a newer one for the
    /// same address is kept; one superseded by a config answered since is not taken back).
    pub fn restore_failures(&self, mut failures: Vec<(IpAddr, FailureRecord)>) {
        failures.sort_by_key(|(_, failure)| failure.reported_at);
        let mut inner = self.lock();
        for (address, failure) in failures {
            let address = address.to_canonical();
            let newer = inner
                .failures
                .get(&address)
                .is_some_and(|(_, known)| known.reported_at >= failure.reported_at);
            let superseded = inner
                .by_address
                .get(&address)
                .is_some_and(|(_, served)| served.served_at >= failure.reported_at);
            if !newer && !superseded {
                inner.insert_failure(address, failure);
            }
        }
    }

    /// Forgets every failure for which `keep` is false; returns how many were forgotten.
    pub fn retain_failures(&self, mut keep: impl FnMut(IpAddr, &FailureRecord) -> bool) -> usize {
        let mut inner = self.lock();
        let gone: Vec<IpAddr> = inner
            .failures
            .iter()
            .filter(|(address, (_, failure))| !keep(**address, failure))
            .map(|(address, _)| *address)
            .collect();
        for address in &gone {
            inner.remove_failure(*address);
        }
        gone.len()
    }

    /// Waits at most `bound` until the write carrying record `sequence` has succeeded (the
    /// answer counts as waiting from this call on: [`GroupCommit::wait`]).
    pub fn durable(
        &self,
        sequence: u64,
        bound: Duration,
    ) -> impl Future<Output = Durability> + Send + 'static {
        self.commit.wait(sequence, bound)
    }

    /// The group commit between the handler and the records writer (the writer takes its
    /// side with [`GroupCommit::writer`]).
    pub fn commit(&self) -> &GroupCommit {
        &self.commit
    }

    /// The clock records are stamped with: the API server's, as the cluster client measures
    /// it (cluster mode feeds it; see [`crate::clock`]).
    pub fn clock(&self) -> &ClusterClock {
        &self.clock
    }

    /// How many records were numbered so far.
    pub fn recorded(&self) -> u64 {
        self.lock().next_sequence
    }

    /// The last answer to `address`, if it is still remembered.
    pub fn get(&self, address: IpAddr) -> Option<ServedRecord> {
        self.lock()
            .by_address
            .get(&address.to_canonical())
            .map(|(_, record)| record.clone())
    }

    /// Every remembered (address, record), the one remembered last first.
    pub fn entries(&self) -> Vec<(IpAddr, ServedRecord)> {
        Self::entries_of(&self.lock())
    }

    fn entries_of(inner: &Inner) -> Vec<(IpAddr, ServedRecord)> {
        inner
            .by_age
            .values()
            .rev()
            .filter_map(|address| {
                let (_, record) = inner.by_address.get(address)?;
                Some((*address, record.clone()))
            })
            .collect()
    }

    /// Takes back records this replica published before it restarted: each is remembered
    /// unless the address was answered since (a newer record is kept), oldest first so that
    /// the age order follows the answers' times.
    pub fn restore(&self, mut entries: Vec<(IpAddr, ServedRecord)>) {
        entries.sort_by_key(|(_, record)| record.served_at);
        // One lock for the check and the insert: an answer given meanwhile is never replaced.
        let mut inner = self.lock();
        for (address, record) in entries {
            let address = address.to_canonical();
            let newer = inner
                .by_address
                .get(&address)
                .is_some_and(|(_, known)| known.served_at >= record.served_at);
            if !newer {
                inner.insert(address, record);
            }
        }
    }

    /// Forgets every record for which `keep` is false; returns how many were forgotten.
    pub fn retain(&self, mut keep: impl FnMut(IpAddr, &ServedRecord) -> bool) -> usize {
        let mut inner = self.lock();
        let gone: Vec<(IpAddr, u64)> = inner
            .by_address
            .iter()
            .filter(|(address, (_, record))| !keep(**address, record))
            .map(|(address, (sequence, _))| (*address, *sequence))
            .collect();
        for (address, sequence) in &gone {
            inner.by_address.remove(address);
            inner.by_age.remove(sequence);
        }
        gone.len()
    }

    /// How many addresses are remembered.
    pub fn len(&self) -> usize {
        self.lock().by_address.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map stays consistent even if a holder panicked: every operation completes its
        // two-map update before it can panic (allocation aside), so keep serving.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn record(config: &str) -> ServedRecord {
        ServedRecord::new(
            Answer {
                ignition: Some("2.20.0".into()),
                ..Answer::worker(config)
            },
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        )
    }

    /// A burst of new machines leaves thousands of records of a few answers: each answer is
    /// held once, however many records (and copies of them) carry it.
    #[test]
    fn records_of_the_same_answer_share_it() {
        let log = ServedLog::with_capacity(100);
        for i in 0..50u8 {
            log.record(IpAddr::from([10, 0, 0, i]), record("rendered-worker-1"));
        }
        log.record(IpAddr::from([10, 0, 1, 1]), record("rendered-worker-2"));
        let entries = log.entries();
        let first = &entries.last().unwrap().1;
        let shared = entries
            .iter()
            .filter(|(_, r)| Arc::ptr_eq(&r.answer, &first.answer))
            .count();
        assert_eq!(shared, 50);
        assert_eq!(entries[0].1.rendered_config, "rendered-worker-2");
        assert!(!Arc::ptr_eq(&entries[0].1.answer, &first.answer));
        // Changing one record's answer leaves the others as they were.
        let mut changed = first.clone();
        changed.answer_mut().ignition = None;
        assert_eq!(first.ignition.as_deref(), Some("2.20.0"));
        assert!(!changed.same_answer(first));
    }

    #[test]
    fn the_answer_table_forgets_answers_no_record_holds() {
        let mut table = AnswerTable::default();
        let kept = table.share(record("kept").answer);
        for i in 0..1000 {
            table.share(record(&format!("gone-{i}")).answer);
        }
        assert!(table.answers.len() <= AnswerTable::PRUNE_AT);
        assert!(Arc::ptr_eq(&table.share(record("kept").answer), &kept));
    }

    fn failure(at_secs: u64) -> FailureRecord {
        FailureRecord {
            pool: "worker".into(),
            node_id: "worker-0".into(),
            stage: "firstboot-update".into(),
            message: "pull failed".into(),
            image: "quay.io".into(),
            reported_at: SystemTime::UNIX_EPOCH + Duration::from_secs(at_secs),
        }
    }

    #[test]
    fn failures_share_the_numbering_and_a_later_answer_supersedes_them() {
        let log = ServedLog::default();
        let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        let first = log.record(
            ip("10.0.0.5"),
            ServedRecord {
                served_at: at(100),
                ..record("a")
            },
        );
        let reported = log.record_failure(ip("::ffff:10.0.0.5"), failure(200));
        assert_eq!(reported, first + 1);
        assert_eq!(
            log.failure(ip("10.0.0.5")).unwrap().stage,
            "firstboot-update"
        );
        let set = log.write_set();
        assert_eq!((set.served.len(), set.failures.len(), set.count), (1, 1, 2));
        // Another address's answer changes nothing; the machine's own later answer clears it.
        log.record(
            ip("10.0.0.6"),
            ServedRecord {
                served_at: at(300),
                ..record("b")
            },
        );
        assert!(log.failure(ip("10.0.0.5")).is_some());
        log.record(
            ip("10.0.0.5"),
            ServedRecord {
                served_at: at(300),
                ..record("a")
            },
        );
        assert_eq!(log.failure(ip("10.0.0.5")), None);
        assert!(log.failures().is_empty());
        // Restored failures: not over a newer one, not over a later answer.
        log.restore_failures(vec![
            (ip("10.0.0.5"), failure(250)),
            (ip("10.0.0.7"), failure(250)),
        ]);
        assert_eq!(log.failure(ip("10.0.0.5")), None);
        assert!(log.failure(ip("10.0.0.7")).is_some());
        assert_eq!(log.retain_failures(|_, _| false), 1);
        assert!(log.failures().is_empty());
    }

    #[test]
    fn failures_stay_bounded() {
        let log = ServedLog::default();
        for i in 0..(FAILURE_CAPACITY as u32 + 10) {
            log.record_failure(IpAddr::from(i.to_be_bytes()), failure(u64::from(i)));
        }
        assert_eq!(log.failures().len(), FAILURE_CAPACITY);
        assert_eq!(log.lock().failures_by_age.len(), FAILURE_CAPACITY);
        assert_eq!(log.failure(IpAddr::from(0u32.to_be_bytes())), None);
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn rendered(config: &str) -> Rendered {
        Rendered {
            body: bytes::Bytes::from_static(b"{}"),
            rendered_config: config.into(),
            version: SpecVersion::V3_4,
            image: None,
            layered: None,
        }
    }

    #[test]
    fn an_answer_already_durable_at_the_address_waits_for_nothing() {
        let log = ServedLog::default();
        let writer = log.commit().writer();
        let machine = Some(SocketAddr::from(([10, 0, 0, 5], 40000)));
        let first = log
            .record_answer(machine, "worker", &rendered("rendered-worker-a"), None)
            .expect("a new record to wait for");
        // Not durable yet: a retry waits for a write too (its own record).
        let retry = log
            .record_answer(machine, "worker", &rendered("rendered-worker-a"), None)
            .expect("not durable yet");
        assert!(retry > first);
        let count = log.write_set().count;
        writer.committed(count);
        // Durable: the same answer again (another connection, same address) waits for nothing.
        assert_eq!(
            log.record_answer(
                Some(SocketAddr::from(([10, 0, 0, 5], 40001))),
                "worker",
                &rendered("rendered-worker-a"),
                None
            ),
            None
        );
        assert_eq!(log.recorded(), count, "no new record");
        // Another answer to the address is a new record; so is the first answer elsewhere.
        assert!(log
            .record_answer(machine, "worker", &rendered("rendered-worker-b"), None)
            .is_some());
        assert!(log
            .record_answer(
                Some(SocketAddr::from(([10, 0, 0, 6], 40000))),
                "worker",
                &rendered("rendered-worker-b"),
                None
            )
            .is_some());
        // Without a writer (bootstrap mode) nothing is durable: every answer is recorded.
        let bootstrap = ServedLog::default();
        assert!(bootstrap
            .record_answer(machine, "worker", &rendered("rendered-worker-a"), None)
            .is_some());
        assert!(bootstrap
            .record_answer(machine, "worker", &rendered("rendered-worker-a"), None)
            .is_some());
    }

    #[test]
    fn keeps_the_last_answer_per_address() {
        let log = ServedLog::default();
        log.record(ip("10.0.0.5"), record("rendered-worker-a"));
        log.record(ip("10.0.0.5"), record("rendered-worker-b"));
        log.record(ip("10.0.0.6"), record("rendered-worker-c"));
        assert_eq!(log.len(), 2);
        assert_eq!(
            log.get(ip("10.0.0.5")).unwrap().rendered_config,
            "rendered-worker-b"
        );
        assert_eq!(log.get(ip("10.0.0.7")), None);
    }

    #[test]
    fn ipv4_mapped_addresses_match_the_ipv4_address() {
        let log = ServedLog::default();
        log.record(ip("::ffff:10.0.0.5"), record("rendered-worker-a"));
        assert!(log.get(ip("10.0.0.5")).is_some());
        assert!(log.get(ip("::ffff:10.0.0.5")).is_some());
    }

    #[test]
    fn evicts_the_address_answered_longest_ago() {
        let log = ServedLog::with_capacity(3);
        log.record(ip("10.0.0.1"), record("a"));
        log.record(ip("10.0.0.2"), record("b"));
        log.record(ip("10.0.0.3"), record("c"));
        // Answering .1 again makes it the newest; .2 is now the oldest.
        log.record(ip("10.0.0.1"), record("a2"));
        log.record(ip("10.0.0.4"), record("d"));
        assert_eq!(log.len(), 3);
        assert_eq!(log.get(ip("10.0.0.2")), None);
        assert_eq!(log.get(ip("10.0.0.1")).unwrap().rendered_config, "a2");
        assert!(log.get(ip("10.0.0.3")).is_some());
        assert!(log.get(ip("10.0.0.4")).is_some());
    }

    #[test]
    fn restore_keeps_newer_answers_and_retain_forgets() {
        let log = ServedLog::default();
        let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        log.record(
            ip("10.0.0.1"),
            ServedRecord {
                served_at: at(200),
                ..record("answered-since")
            },
        );
        log.restore(vec![
            (
                ip("10.0.0.1"),
                ServedRecord {
                    served_at: at(100),
                    ..record("published-before")
                },
            ),
            (
                ip("10.0.0.2"),
                ServedRecord {
                    served_at: at(150),
                    ..record("restored")
                },
            ),
        ]);
        assert_eq!(
            log.get(ip("10.0.0.1")).unwrap().rendered_config,
            "answered-since"
        );
        assert_eq!(log.get(ip("10.0.0.2")).unwrap().rendered_config, "restored");
        let order: Vec<IpAddr> = log.entries().into_iter().map(|(a, _)| a).collect();
        assert_eq!(
            order,
            [ip("10.0.0.2"), ip("10.0.0.1")],
            "last remembered first"
        );
        assert_eq!(log.retain(|address, _| address == ip("10.0.0.1")), 1);
        assert_eq!(log.len(), 1);
        assert_eq!(log.lock().by_age.len(), 1);
    }

    #[test]
    fn stays_bounded_under_a_flood_of_addresses() {
        let log = ServedLog::with_capacity(DEFAULT_CAPACITY);
        for i in 0..(DEFAULT_CAPACITY as u32 * 3) {
            log.record(IpAddr::from(i.to_be_bytes()), record("x"));
        }
        assert_eq!(log.len(), DEFAULT_CAPACITY);
        let inner = log.lock();
        assert_eq!(inner.by_age.len(), DEFAULT_CAPACITY);
    }
}
