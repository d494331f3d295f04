//! A measuring [`ElectionTxn`] wrapper: what a transaction would cost a FoundationDB cluster.
//!
//! MemDb counts every `get` call. A FoundationDB client serves a repeated read of a key, or a
//! read of a key the transaction wrote, from the transaction's read-your-writes cache, without
//! a trip to the cluster; it sends a read conflict range for each key read serializably (unless
//! the transaction wrote it first) and for each explicit conflict key, and a write conflict
//! range for each key written. [`Probe`] forwards every call to the wrapped transaction
//! unchanged and counts, per [`Tally`]:
//!
//! - `storage_reads`: reads the cluster would serve (a key's first read in the transaction,
//!   unless the transaction wrote it before);
//! - `rounds`: sequential read rounds, the round trips a transaction waits for before its
//!   commit. A storage read that starts while no other storage read of the transaction is in
//!   flight opens a new round; reads issued together (`tokio::join!`) share one. Each storage
//!   read waits for the configured latency (at least one scheduler yield), so reads that are
//!   awaited one after the other never overlap;
//! - `read_conflict_ranges` and `write_conflict_ranges`: distinct keys (and ranges) per
//!   transaction attempt.

#![warn(clippy::arithmetic_side_effects)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fdb_leader_election::{ElectionTxn, KeyValue, ReadMode, TxnError, Watch};

/// What probed transactions cost, summed over every attempt that used the tally.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Point and range reads the cluster serves.
    pub(crate) storage_reads: u64,
    /// Sequential read rounds before the commit.
    pub(crate) rounds: u64,
    /// Read conflict ranges sent with the commit.
    pub(crate) read_conflict_ranges: u64,
    /// Write conflict ranges sent with the commit.
    pub(crate) write_conflict_ranges: u64,
}

/// Shared counters for any number of probed transactions.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tally(Arc<Mutex<TallyInner>>);

#[derive(Debug, Default)]
struct TallyInner {
    counts: Counts,
    /// Every key (or range) any probed attempt sent as a read conflict range.
    read_conflict_keys: HashSet<Vec<u8>>,
    /// Every key any probed attempt wrote.
    written_keys: HashSet<Vec<u8>>,
}

impl Tally {
    /// The counts so far.
    pub(crate) fn counts(&self) -> Counts {
        self.lock().counts
    }

    /// How many of the read conflict ranges this tally saw are keys that `writer` saw
    /// written: for one follower cycle and one leader cycle, the follower's conflict ranges
    /// that a renewal committing first invalidates (so the follower aborts).
    pub(crate) fn conflicts_with_writes_of(&self, writer: &Tally) -> u64 {
        let written = writer.lock().written_keys.clone();
        let n = self
            .lock()
            .read_conflict_keys
            .iter()
            .filter(|k| written.contains(*k))
            .count();
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, TallyInner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The keys one attempt has read and written, and its reads in flight.
#[derive(Debug, Default)]
struct Attempt {
    /// Keys read or written: a later read of them is served by the client.
    cached: HashSet<Vec<u8>>,
    written: HashSet<Vec<u8>>,
    read_conflicts: HashSet<Vec<u8>>,
    in_flight: u32,
}

/// Wraps one transaction attempt; see [the module](self).
#[derive(Debug)]
pub(crate) struct Probe<T> {
    inner: T,
    tally: Tally,
    latency: Duration,
    attempt: Mutex<Attempt>,
}

impl<T: ElectionTxn> Probe<T> {
    /// Probes `inner`; storage reads take `latency` (zero: one scheduler yield).
    pub(crate) fn new(inner: T, tally: &Tally, latency: Duration) -> Self {
        Probe {
            inner,
            tally: tally.clone(),
            latency,
            attempt: Mutex::new(Attempt::default()),
        }
    }

    fn attempt(&self) -> MutexGuard<'_, Attempt> {
        self.attempt.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a read of `key` (a range is recorded under a key of its own) and, if the
    /// cluster serves it, starts it: returns whether it is a storage read.
    fn begin_read(&self, key: Vec<u8>, mode: ReadMode, range: bool) -> bool {
        let mut a = self.attempt();
        let mut tally = self.tally.lock();
        if mode == ReadMode::Serializable
            && !a.written.contains(&key)
            && a.read_conflicts.insert(key.clone())
        {
            tally.counts.read_conflict_ranges = tally.counts.read_conflict_ranges.saturating_add(1);
            tally.read_conflict_keys.insert(key.clone());
        }
        // A range read always goes to the cluster (the client does not know which keys the
        // range holds); a point read only the first time.
        let storage = range || a.cached.insert(key);
        if storage {
            tally.counts.storage_reads = tally.counts.storage_reads.saturating_add(1);
            if a.in_flight == 0 {
                tally.counts.rounds = tally.counts.rounds.saturating_add(1);
            }
            a.in_flight = a.in_flight.saturating_add(1);
        }
        storage
    }

    fn end_read(&self) {
        let mut a = self.attempt();
        a.in_flight = a.in_flight.saturating_sub(1);
    }

    /// The round trip of one storage read.
    async fn wait(&self) {
        if self.latency.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(self.latency).await;
        }
    }

    fn record_write(&self, key: &[u8]) {
        let mut a = self.attempt();
        a.cached.insert(key.to_vec());
        if a.written.insert(key.to_vec()) {
            let mut tally = self.tally.lock();
            tally.counts.write_conflict_ranges =
                tally.counts.write_conflict_ranges.saturating_add(1);
            tally.written_keys.insert(key.to_vec());
        }
    }
}

impl<T: ElectionTxn> ElectionTxn for Probe<T> {
    async fn get(&self, key: &[u8], mode: ReadMode) -> Result<Option<Vec<u8>>, TxnError> {
        let storage = self.begin_read(key.to_vec(), mode, false);
        if storage {
            self.wait().await;
        }
        let value = self.inner.get(key, mode).await;
        if storage {
            self.end_read();
        }
        value
    }

    async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> Result<Vec<KeyValue>, TxnError> {
        let mut name = b"range:".to_vec();
        name.extend_from_slice(begin);
        name.push(0xff);
        name.extend_from_slice(end);
        self.begin_read(name, mode, true);
        self.wait().await;
        let rows = self.inner.get_range(begin, end, mode).await;
        self.end_read();
        rows
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        self.record_write(key);
        self.inner.set(key, value);
    }

    fn clear(&self, key: &[u8]) {
        self.record_write(key);
        self.inner.clear(key);
    }

    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), TxnError> {
        self.inner.add_read_conflict_key(key)?;
        let mut a = self.attempt();
        if a.read_conflicts.insert(key.to_vec()) {
            let mut tally = self.tally.lock();
            tally.counts.read_conflict_ranges = tally.counts.read_conflict_ranges.saturating_add(1);
            tally.read_conflict_keys.insert(key.to_vec());
        }
        Ok(())
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, TxnError> {
        self.inner.watch(key)
    }
}
