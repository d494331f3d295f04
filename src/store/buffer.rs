//! A transaction's client side, shared by MemDb and the SQLite store: buffered writes, the
//! read-your-writes overlay, the read-conflict set, size accounting, pending watches and the
//! transaction's I/O counts.
//!
//! A store keeps one [`TxnBuffer`] per transaction (behind its own lock) and supplies what is
//! its own: the read version, the committed values a read falls through to, and the commit.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::time::Duration;

use crate::clock::LocalInstant;
use crate::store::errors;
use crate::store::stats::{Counters, TxnStats, bump};
use crate::store::txn::{KeyValue, ReadMode, TxnError, TxnErrorKind, Watch};
use crate::store::watch::{PendingWatch, WatchHandle, WatchLimit};

/// How long a transaction may use its read version: reads and write commits fail with
/// `transaction_too_old` (1007) once the store's clock shows this much time since the read
/// version was taken. FoundationDB's limit.
pub const MAX_TRANSACTION_AGE: Duration = Duration::from_secs(5);

/// A transaction's writes: sets (`Some`) and clears (`None`), by key.
pub(crate) type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Where a transaction is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Reads and writes are accepted.
    #[default]
    Open,
    /// The commit has begun: reads fail with `used_during_commit`, writes are discarded.
    Committing,
    /// The commit has ended.
    Done,
}

/// A transaction's read version and when it was taken (by the store's clock).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadVersion {
    pub(crate) version: u64,
    pub(crate) taken_at: LocalInstant,
}

impl ReadVersion {
    /// Whether the read version is [`MAX_TRANSACTION_AGE`] old or more at `now`.
    pub(crate) fn is_too_old(&self, now: LocalInstant) -> bool {
        now.saturating_duration_since(self.taken_at) >= MAX_TRANSACTION_AGE
    }

    /// The version, or `transaction_too_old` (1007) if it is too old at `now`.
    pub(crate) fn check(&self, now: LocalInstant) -> Result<u64, TxnError> {
        if self.is_too_old(now) {
            return Err(errors::too_old());
        }
        Ok(self.version)
    }
}

/// A transaction's read-conflict set.
#[derive(Debug, Default)]
pub(crate) struct ReadConflicts {
    points: BTreeSet<Vec<u8>>,
    /// Half-open ranges `[begin, end)`, each non-empty.
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

impl ReadConflicts {
    pub(crate) fn add_key(&mut self, key: &[u8]) {
        if !self.points.contains(key) {
            self.points.insert(key.to_vec());
        }
    }

    /// Adds `[begin, end)` (ignored when empty).
    pub(crate) fn add_range(&mut self, begin: &[u8], end: &[u8]) {
        if begin < end {
            self.ranges.push((begin.to_vec(), end.to_vec()));
        }
    }

    /// Whether any of `keys` (sorted) falls inside the set.
    pub(crate) fn intersects(&self, keys: &[Vec<u8>]) -> bool {
        if keys.iter().any(|k| self.points.contains(k)) {
            return true;
        }
        self.ranges.iter().any(|(begin, end)| {
            let first = keys.partition_point(|k| k < begin);
            keys.get(first).is_some_and(|k| k < end)
        })
    }

    #[cfg(any(test, feature = "sqlite"))]
    pub(crate) fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }

    /// The single keys in the set, in key order.
    #[cfg(feature = "sqlite")]
    pub(crate) fn points(&self) -> impl Iterator<Item = &[u8]> {
        self.points.iter().map(Vec::as_slice)
    }

    /// The ranges `[begin, end)` in the set, in the order they were added.
    #[cfg(feature = "sqlite")]
    pub(crate) fn ranges(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.ranges
            .iter()
            .map(|(b, e)| (b.as_slice(), e.as_slice()))
    }
}

/// The key immediately after `key` in key order.
pub(crate) fn key_after(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len().saturating_add(1));
    k.extend_from_slice(key);
    k.push(0);
    k
}

/// What a commit takes from the buffer: the writes, the read-conflict set, the pending
/// watches and the read version (if a read took one).
#[derive(Debug)]
pub(crate) struct CommitParts<W> {
    pub(crate) read_version: Option<ReadVersion>,
    pub(crate) writes: Writes,
    pub(crate) conflicts: ReadConflicts,
    pub(crate) watches: Vec<PendingWatch<W>>,
}

impl<W: WatchHandle> CommitParts<W> {
    /// Whether the transaction writes nothing (its commit is not checked for conflicts).
    pub(crate) fn is_read_only(&self) -> bool {
        self.writes.is_empty()
    }

    /// The commit failed: every pending watch fails with a copy of `error`.
    pub(crate) fn fail_watches(&mut self, error: &TxnError) {
        fail_all(&mut self.watches, error);
    }
}

fn fail_all<W: WatchHandle>(watches: &mut Vec<PendingWatch<W>>, error: &TxnError) {
    for w in watches.drain(..) {
        w.handle.fail(errors::copy_for_watch(error));
    }
}

/// One transaction's client-side state. `W` is the store's handle on a pending watch.
#[derive(Debug)]
pub(crate) struct TxnBuffer<W> {
    phase: Phase,
    /// Taken by the store at the first read (or watch, or commit).
    pub(crate) read_version: Option<ReadVersion>,
    writes: Writes,
    conflicts: ReadConflicts,
    watches: Vec<PendingWatch<W>>,
    /// The first invalid write, or the first read that found the transaction too old:
    /// reported by the commit.
    deferred: Option<TxnError>,
    stats: TxnStats,
}

impl<W> Default for TxnBuffer<W> {
    fn default() -> Self {
        TxnBuffer {
            phase: Phase::Open,
            read_version: None,
            writes: Writes::new(),
            conflicts: ReadConflicts::default(),
            watches: Vec::new(),
            deferred: None,
            stats: TxnStats::default(),
        }
    }
}

impl<W: WatchHandle> TxnBuffer<W> {
    /// Where the transaction is in its life.
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// The I/O this transaction issued so far.
    pub(crate) fn stats(&self) -> TxnStats {
        self.stats
    }

    /// How many writes (keys) and pending watches the transaction holds, for `Debug`.
    pub(crate) fn pending(&self) -> (usize, usize) {
        (self.writes.len(), self.watches.len())
    }

    #[cfg(test)]
    pub(crate) fn has_read_conflicts(&self) -> bool {
        !self.conflicts.is_empty()
    }

    /// A read (or watch) of this transaction failed with `error`. If the transaction was too
    /// old (1007), its commit fails with the same error even if it writes nothing, as
    /// FoundationDB's does (a read-only transaction whose reads all succeeded still commits,
    /// whatever its age). Returns `error`.
    pub(crate) fn read_failed(&mut self, error: TxnError) -> TxnError {
        if error.kind() == TxnErrorKind::TooOld && self.deferred.is_none() {
            self.deferred = Some(errors::copy_of(&error));
        }
        error
    }

    /// `used_during_commit` (2017) once the commit has begun.
    pub(crate) fn ensure_open(&self) -> Result<(), TxnError> {
        match self.phase {
            Phase::Open => Ok(()),
            Phase::Committing | Phase::Done => Err(errors::used_during_commit()),
        }
    }

    /// Buffers one write (`None` clears), counted whether or not it is accepted. After the
    /// commit has begun the write is discarded. An invalid key or value is reported by the
    /// commit (as FoundationDB reports invalid writes there).
    ///
    /// A pending watch of this transaction on `key` that saw another value fires at once, as
    /// FoundationDB's does: the transaction itself changed the key.
    pub(crate) fn write(&mut self, counters: &Counters, key: &[u8], value: Option<&[u8]>) {
        match value {
            Some(_) => {
                bump(&counters.sets, 1);
                self.stats.sets = self.stats.sets.saturating_add(1);
            }
            None => {
                bump(&counters.clears, 1);
                self.stats.clears = self.stats.clears.saturating_add(1);
            }
        }
        if self.phase != Phase::Open {
            return;
        }
        let checked = errors::check_key(key).and_then(|()| match value {
            Some(v) => errors::check_value(v),
            None => Ok(()),
        });
        if let Err(e) = checked {
            self.deferred.get_or_insert(e);
            return;
        }
        self.writes.insert(key.to_vec(), value.map(<[u8]>::to_vec));
        self.fire_watches_changed_by_own_write(counters, key, value);
    }

    fn fire_watches_changed_by_own_write(
        &mut self,
        counters: &Counters,
        key: &[u8],
        value: Option<&[u8]>,
    ) {
        if !self
            .watches
            .iter()
            .any(|w| w.key == key && w.seen.as_deref() != value)
        {
            return;
        }
        let mut fired: u64 = 0;
        for w in std::mem::take(&mut self.watches) {
            if w.key == key && w.seen.as_deref() != value {
                if w.handle.fire() {
                    fired = fired.saturating_add(1);
                }
            } else {
                self.watches.push(w);
            }
        }
        bump(&counters.watches_fired, fired);
    }

    /// Adds `key` to the read-conflict set, unless this transaction already set or cleared
    /// it: like FoundationDB, which adds conflict ranges only over keys whose value does not
    /// come from the transaction's own writes. Counted either way.
    pub(crate) fn add_read_conflict_key(
        &mut self,
        counters: &Counters,
        key: &[u8],
    ) -> Result<(), TxnError> {
        errors::check_key(key)?;
        self.ensure_open()?;
        if !self.writes.contains_key(key) {
            self.conflicts.add_key(key);
        }
        self.stats.read_conflict_keys = self.stats.read_conflict_keys.saturating_add(1);
        bump(&counters.read_conflict_keys, 1);
        Ok(())
    }

    /// A point read: the transaction's own write of `key` if there is one; otherwise
    /// `committed()`, adding `key` to the read-conflict set for a serializable read. A key
    /// longer than FoundationDB's limit cannot exist: it reads as absent, with no conflict.
    /// Counted when served.
    pub(crate) fn point_read(
        &mut self,
        counters: &Counters,
        key: &[u8],
        mode: ReadMode,
        committed: impl FnOnce() -> Result<Option<Vec<u8>>, TxnError>,
    ) -> Result<Option<Vec<u8>>, TxnError> {
        let value = match self.writes.get(key) {
            _ if key.len() > errors::KEY_SIZE_LIMIT => None,
            Some(own) => own.clone(),
            None => {
                let value = committed()?;
                if mode == ReadMode::Serializable {
                    self.conflicts.add_key(key);
                }
                value
            }
        };
        self.stats.point_reads = self.stats.point_reads.saturating_add(1);
        bump(&counters.point_reads, 1);
        Ok(value)
    }

    /// A range read of `[begin, end)`: `committed()` merged with the transaction's own writes
    /// in the range (read-your-writes, clears included). A serializable read adds the range to
    /// the read-conflict set, less the keys the transaction wrote itself (FoundationDB adds no
    /// conflict for reading one's own writes). Counted when served.
    pub(crate) fn range_read(
        &mut self,
        counters: &Counters,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
        committed: impl FnOnce() -> Result<Vec<KeyValue>, TxnError>,
    ) -> Result<Vec<KeyValue>, TxnError> {
        let result = if begin < end {
            overlay_range(
                committed()?,
                &self.writes,
                &mut self.conflicts,
                begin,
                end,
                mode,
            )
        } else {
            Vec::new()
        };
        let returned = u64::try_from(result.len()).unwrap_or(u64::MAX);
        self.stats.range_reads = self.stats.range_reads.saturating_add(1);
        self.stats.range_keys_read = self.stats.range_keys_read.saturating_add(returned);
        bump(&counters.range_reads, 1);
        bump(&counters.range_keys_read, returned);
        Ok(result)
    }

    /// Creates a watch on `key`, as FoundationDB does: the key is read (its own write, or
    /// `committed()` with a read conflict) and the watch remembers the value seen. `make`
    /// builds the store's handle and the future from the key and that value. Beyond the
    /// database's `limit` on outstanding watches, the watch fails through its future with
    /// `too_many_watches` (1032) and is never armed; the transaction is unaffected.
    pub(crate) fn watch(
        &mut self,
        counters: &Counters,
        limit: &WatchLimit,
        key: &[u8],
        committed: impl FnOnce() -> Result<Option<Vec<u8>>, TxnError>,
        make: impl FnOnce(&[u8], Option<&[u8]>) -> (W, Watch),
    ) -> Result<Watch, TxnError> {
        let seen = match self.writes.get(key) {
            Some(own) => own.clone(),
            None => {
                let value = committed()?;
                self.conflicts.add_key(key);
                value
            }
        };
        self.stats.watches_created = self.stats.watches_created.saturating_add(1);
        bump(&counters.watches_created, 1);
        let Some(slot) = limit.acquire() else {
            bump(&counters.watches_refused, 1);
            return Ok(limit.refused());
        };
        let (handle, watch) = make(key, seen.as_deref());
        self.watches.push(PendingWatch {
            key: key.to_vec(),
            seen,
            handle,
        });
        Ok(slot.hold(watch))
    }

    /// Begins the commit: from now on reads fail and writes are discarded. Returns what the
    /// commit needs, or the first invalid write, or `transaction_too_large` (2101) for a
    /// writing transaction over FoundationDB's limit by [`commit_size`] (the commit then ends
    /// at once, failing the pending watches with it).
    pub(crate) fn begin_commit(&mut self) -> Result<CommitParts<W>, TxnError> {
        self.ensure_open()?;
        self.phase = Phase::Committing;
        let error = self.deferred.take().or_else(|| {
            let size = commit_size(&self.writes, &self.conflicts);
            (!self.writes.is_empty() && size > errors::TRANSACTION_SIZE_LIMIT)
                .then(|| errors::transaction_too_large(size))
        });
        if let Some(error) = error {
            self.phase = Phase::Done;
            fail_all(&mut self.watches, &error);
            return Err(error);
        }
        Ok(CommitParts {
            read_version: self.read_version,
            writes: std::mem::take(&mut self.writes),
            conflicts: std::mem::take(&mut self.conflicts),
            watches: std::mem::take(&mut self.watches),
        })
    }

    /// The commit has ended.
    pub(crate) fn end_commit(&mut self) {
        self.phase = Phase::Done;
    }
}

/// What FoundationDB charges per mutation and per conflict range besides its keys and values:
/// at least the size of a `MutationRef` (40 bytes) and of a `KeyRangeRef` (32 bytes) in its
/// client.
const MUTATION_OVERHEAD: usize = 40;
const RANGE_OVERHEAD: usize = 32;

/// A writing transaction's size as FoundationDB measures it at commit against its 10,000,000
/// byte limit (`Transaction::getSize`): its mutations plus its write and read conflict
/// ranges. A set of `k` to `v` costs about `3k + v` (the mutation, and the write conflict
/// range `[k, k\x00)`), a clear of one key about `4k`, a read conflict on a key about `2k`, on
/// a range its two bounds. FoundationDB merges overlapping conflict ranges, so it may count a
/// little less.
pub(crate) fn commit_size(writes: &Writes, conflicts: &ReadConflicts) -> usize {
    let single_key_range = |k: &[u8]| {
        k.len()
            .saturating_mul(2)
            .saturating_add(1)
            .saturating_add(RANGE_OVERHEAD)
    };
    let mutations = writes.iter().fold(0_usize, |total, (k, v)| {
        let mutation = match v {
            Some(v) => k.len().saturating_add(v.len()),
            // A clear of one key is the clear of the range [k, k\x00).
            None => k.len().saturating_mul(2).saturating_add(1),
        };
        total
            .saturating_add(mutation)
            .saturating_add(MUTATION_OVERHEAD)
            .saturating_add(single_key_range(k))
    });
    let reads = conflicts
        .points
        .iter()
        .map(|k| single_key_range(k))
        .chain(conflicts.ranges.iter().map(|(b, e)| {
            b.len()
                .saturating_add(e.len())
                .saturating_add(RANGE_OVERHEAD)
        }))
        .fold(0_usize, usize::saturating_add);
    mutations.saturating_add(reads)
}

/// Merges a committed range read of `[begin, end)` with the transaction's own writes in that
/// range (clears included), and, for a serializable read, adds the read conflict ranges: the
/// whole range, less the keys the transaction wrote itself.
fn overlay_range(
    committed: Vec<KeyValue>,
    writes: &Writes,
    conflicts: &mut ReadConflicts,
    begin: &[u8],
    end: &[u8],
    mode: ReadMode,
) -> Vec<KeyValue> {
    let serializable = mode == ReadMode::Serializable;
    let bounds = (Bound::Included(begin), Bound::Excluded(end));
    let mut own = writes.range::<[u8], _>(bounds).peekable();
    if own.peek().is_none() {
        if serializable {
            conflicts.add_range(begin, end);
        }
        return committed;
    }
    let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = committed.into_iter().collect();
    let mut gap_start = begin.to_vec();
    for (key, value) in own {
        match value {
            Some(v) => merged.insert(key.clone(), v.clone()),
            None => merged.remove(key),
        };
        if serializable {
            conflicts.add_range(&gap_start, key);
        }
        gap_start = key_after(key);
    }
    if serializable {
        conflicts.add_range(&gap_start, end);
    }
    merged.into_iter().collect()
}
