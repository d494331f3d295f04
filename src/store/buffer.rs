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
use crate::store::limits::{self, MAX_TRANSACTION_BYTES, READ_KEY_LIMIT};
use crate::store::size;
use crate::store::stats::{Counters, TxnStats, bump};
use crate::store::txn::{KeyValue, ReadMode, TxnError, Watch};
use crate::store::watch::{self, PendingWatch, WatchHandle, WatchLimit, WatchSlot};

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

/// What a store gives the buffer to read its committed data. The buffer asks for it only when a
/// read cannot be served from the transaction's own writes, and the first time it asks, the
/// read version is taken: as FoundationDB takes it at the first read that reaches the cluster
/// (or at an explicit read version, a watch that reads, or a writing commit), never at a read
/// served from the transaction's own writes or at an empty or inverted range.
pub(crate) trait Snapshot {
    /// The read version: `slot`'s, or one taken now into `slot`. Fails with
    /// `transaction_too_old` (1007) once the transaction is too old.
    fn read_version(&mut self, slot: &mut Option<ReadVersion>) -> Result<u64, TxnError>;

    /// `key`'s committed value at `version`.
    fn get(&mut self, version: u64, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError>;

    /// The committed pairs in `[begin, end)` (`begin < end`) at `version`, in key order.
    fn range(&mut self, version: u64, begin: &[u8], end: &[u8]) -> Result<Vec<KeyValue>, TxnError>;
}

/// One transaction's client-side state. `W` is the store's handle on a pending watch.
///
/// It follows FoundationDB's client (`ReadYourWritesTransaction`, and `ThreadSafeTransaction`
/// before it) step by step:
///
/// - an invalid write or conflict key (a system key, a key or value over the limits) does not
///   fail where it is made: it becomes the transaction's **deferred error**, which every later
///   read, watch, read version, size and commit fails with, and every later write or conflict
///   key is ignored (the first such error wins);
/// - a read that reached the database and failed (too old, an injected fault) fails the
///   commit with its error, read-only or not (FoundationDB's commit waits for the
///   transaction's reads);
/// - a read of a key the transaction wrote, or of a range whose every key it wrote, is served
///   from its writes without the database: no read version is taken, no conflict range
///   added.
#[derive(Debug)]
pub(crate) struct TxnBuffer<W> {
    phase: Phase,
    /// Taken at the first read that reaches the database (or watch, or commit).
    pub(crate) read_version: Option<ReadVersion>,
    writes: Writes,
    conflicts: ReadConflicts,
    watches: Vec<PendingWatch<W>>,
    /// The first invalid write or conflict key.
    deferred: Option<TxnError>,
    /// The first read that reached the database and failed.
    failed_read: Option<TxnError>,
    /// FoundationDB's running estimate of the transaction's size (`getApproximateSize`).
    approximate_size: usize,
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
            failed_read: None,
            approximate_size: 0,
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

    /// A read of this transaction that reached the database failed with `error` (an injected
    /// fault, say): its commit fails with the first such error, even if it writes nothing,
    /// as FoundationDB's does. Returns `error`.
    pub(crate) fn read_failed(&mut self, error: TxnError) -> TxnError {
        if self.failed_read.is_none() {
            self.failed_read = Some(errors::copy_of(&error));
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

    /// The deferred error, if an earlier write or conflict key was invalid.
    fn check_deferred(&self) -> Result<(), TxnError> {
        match &self.deferred {
            Some(e) => Err(errors::copy_of(e)),
            None => Ok(()),
        }
    }

    /// Whether a point read of `key` would reach the database (so a store may inject a fault
    /// into it): not when it fails its checks, reads a key that cannot exist, or reads the
    /// transaction's own write.
    pub(crate) fn get_reaches_database(&self, key: &[u8]) -> bool {
        self.phase == Phase::Open
            && self.deferred.is_none()
            && !limits::is_system(key)
            && key.len() <= READ_KEY_LIMIT
            && !self.writes.contains_key(key)
    }

    /// Whether a range read of `[begin, end)` would reach the database (see
    /// [`get_reaches_database`](Self::get_reaches_database)).
    pub(crate) fn range_reaches_database(&self, begin: &[u8], end: &[u8]) -> bool {
        self.phase == Phase::Open
            && self.deferred.is_none()
            && limits::check_range(begin, end).is_ok()
            && begin < end
            && !self.covered_by_writes(begin, end)
    }

    /// Whether the transaction wrote every key of `[begin, end)` (`begin < end`): a chain of
    /// adjacent keys from `begin` on.
    fn covered_by_writes(&self, begin: &[u8], end: &[u8]) -> bool {
        let mut next: Vec<u8> = begin.to_vec();
        for key in self
            .writes
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
            .map(|(k, _)| k)
        {
            if key.as_slice() != next.as_slice() {
                return false;
            }
            next = key_after(key);
        }
        next.as_slice() >= end
    }

    /// The length of the first key of `[begin, end)` after the chain of adjacent keys from
    /// `begin` on that the transaction set (not cleared): `begin`'s own length if it did not set
    /// `begin`. FoundationDB's estimate of a range read starts there.
    fn after_leading_sets(&self, begin: &[u8], end: &[u8]) -> usize {
        let mut next = begin.to_vec();
        for (key, value) in self
            .writes
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
        {
            if *key != next || value.is_none() {
                break;
            }
            next = key_after(key);
        }
        next.len()
    }

    /// Reads from the database through `snapshot`, taking the read version if needed; a
    /// failure is remembered for the commit ([`read_failed`](Self::read_failed)).
    fn read_database<S: Snapshot + ?Sized, T>(
        &mut self,
        snapshot: &mut S,
        read: impl FnOnce(&mut S, u64) -> Result<T, TxnError>,
    ) -> Result<T, TxnError> {
        let outcome = snapshot
            .read_version(&mut self.read_version)
            .and_then(|version| read(snapshot, version));
        outcome.map_err(|e| self.read_failed(e))
    }

    /// The read version, taken now through `snapshot` if no read has taken it yet, as
    /// FoundationDB's `get_read_version` takes it. A version already taken is returned at any
    /// age.
    pub(crate) fn read_version(&mut self, snapshot: &mut impl Snapshot) -> Result<u64, TxnError> {
        self.check_deferred()?;
        if let Some(rv) = self.read_version {
            return Ok(rv.version);
        }
        self.ensure_open()?;
        snapshot.read_version(&mut self.read_version)
    }

    /// FoundationDB's running estimate of the transaction's size (`get_approximate_size`):
    /// what each operation added so far (see [`size`](crate::store::size)), never merged.
    pub(crate) fn approximate_size(&self) -> Result<usize, TxnError> {
        self.check_deferred()?;
        Ok(self.approximate_size)
    }

    /// The transaction's size as its commit would count it against
    /// [`MAX_TRANSACTION_BYTES`](MAX_TRANSACTION_BYTES).
    pub(crate) fn size(&self) -> usize {
        commit_size(&self.writes, &self.conflicts)
    }

    fn estimate(&mut self, bytes: usize) {
        self.approximate_size = self.approximate_size.saturating_add(bytes);
    }

    /// Buffers one write (`None` clears), counted whether or not it is accepted. After the
    /// commit has begun, or after a deferred error, the write is ignored. An invalid write
    /// becomes the deferred error; a clear of a key that cannot exist is ignored.
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
        if self.phase != Phase::Open || self.deferred.is_some() {
            return;
        }
        let checked = match value {
            Some(v) => {
                limits::check_set(key, v).map(|()| Some(size::set_estimate(key.len(), v.len())))
            }
            None => limits::check_not_system(key)
                .map(|()| (key.len() <= READ_KEY_LIMIT).then(|| size::clear_estimate(key.len()))),
        };
        let estimate = match checked {
            Ok(Some(estimate)) => estimate,
            // A clear of a key longer than any key can be: nothing to do.
            Ok(None) => return,
            Err(e) => {
                self.deferred = Some(e);
                return;
            }
        };
        self.estimate(estimate);
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

    /// Adds `key` to the read-conflict set, as FoundationDB's `add_conflict_range` does: never
    /// failing at once. A system key becomes the deferred error; a key longer than any key can
    /// be is dropped; a key this transaction already set or cleared adds nothing (conflict
    /// ranges cover only keys whose value does not come from the transaction's own writes).
    /// Counted either way.
    pub(crate) fn add_read_conflict_key(&mut self, counters: &Counters, key: &[u8]) {
        self.stats.read_conflict_keys = self.stats.read_conflict_keys.saturating_add(1);
        bump(&counters.read_conflict_keys, 1);
        if self.phase != Phase::Open || self.deferred.is_some() {
            return;
        }
        if let Err(e) = limits::check_not_system(key) {
            self.deferred = Some(e);
            return;
        }
        if key.len() <= READ_KEY_LIMIT {
            self.add_conflict_key(key);
        }
    }

    /// A serializable read of `key`: its conflict range, unless the transaction wrote it.
    fn add_conflict_key(&mut self, key: &[u8]) {
        if !self.writes.contains_key(key) {
            self.conflicts.add_key(key);
            self.estimate(size::read_key_estimate(key.len()));
        }
    }

    /// A point read: the transaction's own write of `key` if there is one; otherwise the
    /// committed value through `snapshot`, adding `key` to the read-conflict set for a
    /// serializable read. A system key fails the read alone (2004); a key longer than any key
    /// can be reads as absent without reaching the database. Counted when served.
    pub(crate) fn point_read(
        &mut self,
        counters: &Counters,
        key: &[u8],
        mode: ReadMode,
        snapshot: &mut impl Snapshot,
    ) -> Result<Option<Vec<u8>>, TxnError> {
        self.check_deferred()?;
        self.ensure_open()?;
        limits::check_not_system(key)?;
        let value = match self.writes.get(key) {
            _ if key.len() > READ_KEY_LIMIT => None,
            Some(own) => own.clone(),
            None => {
                let value = self.read_database(snapshot, |s, version| s.get(version, key))?;
                if mode == ReadMode::Serializable {
                    self.add_conflict_key(key);
                }
                value
            }
        };
        self.stats.point_reads = self.stats.point_reads.saturating_add(1);
        bump(&counters.point_reads, 1);
        Ok(value)
    }

    /// A range read of `[begin, end)`: the committed pairs merged with the transaction's own
    /// writes in the range (read-your-writes, clears included). A bound beyond `\xff` fails the
    /// read alone (2004); an empty or inverted range, or one whose every key the transaction
    /// wrote, is served without the database. A serializable read adds the range to the
    /// read-conflict set, less the keys the transaction wrote itself. Counted when served.
    pub(crate) fn range_read(
        &mut self,
        counters: &Counters,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
        snapshot: &mut impl Snapshot,
    ) -> Result<Vec<KeyValue>, TxnError> {
        self.check_deferred()?;
        self.ensure_open()?;
        limits::check_range(begin, end)?;
        let result = if begin >= end {
            Vec::new()
        } else if self.covered_by_writes(begin, end) {
            overlay_range(Vec::new(), &self.writes, None, begin, end)
        } else {
            let committed =
                self.read_database(snapshot, |s, version| s.range(version, begin, end))?;
            let mut gaps = Vec::new();
            let result = overlay_range(committed, &self.writes, Some(&mut gaps), begin, end);
            if mode == ReadMode::Serializable {
                // FoundationDB's estimate counts the whole range once per gap, from after the
                // keys the transaction set at its very beginning.
                let from = self.after_leading_sets(begin, end);
                let estimate = size::read_range_estimate(from, end.len());
                for (b, e) in gaps {
                    self.conflicts.add_range(&b, &e);
                    self.estimate(estimate);
                }
            }
            result
        };
        let returned = u64::try_from(result.len()).unwrap_or(u64::MAX);
        self.stats.range_reads = self.stats.range_reads.saturating_add(1);
        self.stats.range_keys_read = self.stats.range_keys_read.saturating_add(returned);
        bump(&counters.range_reads, 1);
        bump(&counters.range_keys_read, returned);
        Ok(result)
    }

    /// Creates a watch on `key`, as FoundationDB does. Every error comes through the returned
    /// future, never at once, and leaves the transaction as it was: a deferred error, a commit
    /// already begun (2017), watches disabled (`enabled == false`, 1034), a system key (2004),
    /// a key over the limit (2102), a failed read, or the database's `limit` on outstanding
    /// watches (1032). Otherwise the key is read (its own write, or through `snapshot` with a
    /// read conflict) and the watch remembers the value seen; `make` builds the store's handle
    /// and the future from the key, that value and the watch's slot under the limit.
    pub(crate) fn watch(
        &mut self,
        counters: &Counters,
        limit: &WatchLimit,
        enabled: bool,
        key: &[u8],
        snapshot: &mut impl Snapshot,
        make: impl FnOnce(&[u8], Option<&[u8]>, WatchSlot) -> (W, Watch),
    ) -> Watch {
        let checked = self
            .check_deferred()
            .and_then(|()| self.ensure_open())
            .and_then(|()| {
                if enabled {
                    Ok(())
                } else {
                    Err(errors::watches_disabled())
                }
            })
            .and_then(|()| limits::check_watch(key));
        if let Err(e) = checked {
            return watch::failed(e);
        }
        let seen = match self.writes.get(key) {
            Some(own) => own.clone(),
            None => {
                // A failed read fails the watch, not the transaction.
                let read = snapshot
                    .read_version(&mut self.read_version)
                    .and_then(|version| snapshot.get(version, key));
                match read {
                    Ok(value) => {
                        self.add_conflict_key(key);
                        value
                    }
                    Err(e) => return watch::failed(e),
                }
            }
        };
        self.stats.watches_created = self.stats.watches_created.saturating_add(1);
        bump(&counters.watches_created, 1);
        let Some(slot) = limit.acquire() else {
            bump(&counters.watches_refused, 1);
            return limit.refused();
        };
        let (handle, watch) = make(key, seen.as_deref(), slot.clone());
        self.watches.push(PendingWatch {
            key: key.to_vec(),
            seen,
            handle,
        });
        slot.hold(watch)
    }

    /// Begins the commit: from now on reads fail and writes are ignored. Returns what the
    /// commit needs, or ends the commit at once with an error: the deferred error or the first
    /// failed read's error (FoundationDB never starts such a commit, and the pending watches
    /// are cancelled with the transaction, 1025), or `transaction_too_large` (2101) for a
    /// writing transaction over FoundationDB's limit counted by [`size`](Self::size) (the
    /// commit fails, and the pending watches with it).
    pub(crate) fn begin_commit(&mut self) -> Result<CommitParts<W>, TxnError> {
        self.ensure_open()?;
        self.phase = Phase::Committing;
        let never_sent = self.deferred.take().or_else(|| self.failed_read.take());
        if let Some(error) = never_sent {
            self.phase = Phase::Done;
            for w in self.watches.drain(..) {
                w.handle.fail(errors::cancelled_with_transaction(&error));
            }
            return Err(error);
        }
        let size = self.size();
        if !self.writes.is_empty() && size > MAX_TRANSACTION_BYTES {
            let error = limits::transaction_too_large(size);
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

/// A transaction's size as FoundationDB's client counts it at commit (`Transaction::getSize`,
/// see [`size`](crate::store::size)): its mutations (each set; each run of adjacent cleared
/// keys as one clear range), its write conflict ranges (each run of adjacent written keys as
/// one range) and its read conflict ranges (merged where they overlap or touch, keys clipped
/// as FoundationDB clips them).
pub(crate) fn commit_size(writes: &Writes, conflicts: &ReadConflicts) -> usize {
    /// A run of adjacent keys `first`, `first\x00`, ... `last`: the range `[first, last\x00)`.
    fn run_bytes(first: &[u8], last: &[u8]) -> usize {
        first.len().saturating_add(last.len()).saturating_add(1)
    }
    let mut total: usize = 0;
    let mut clears: Option<(&[u8], &[u8])> = None;
    let mut written: Option<(&[u8], &[u8])> = None;
    fn close(run: Option<(&[u8], &[u8])>, overhead: usize, total: &mut usize) {
        if let Some((first, last)) = run {
            *total = total
                .saturating_add(overhead)
                .saturating_add(run_bytes(first, last));
        }
    }
    for (key, value) in writes {
        let key = key.as_slice();
        written = match written {
            Some((first, last)) if size::is_next(last, key) => Some((first, key)),
            run => {
                close(run, size::RANGE_OVERHEAD, &mut total);
                Some((key, key))
            }
        };
        match value {
            Some(v) => {
                close(clears.take(), size::MUTATION_OVERHEAD, &mut total);
                total = total
                    .saturating_add(size::MUTATION_OVERHEAD)
                    .saturating_add(key.len())
                    .saturating_add(v.len());
            }
            None => {
                clears = match clears {
                    Some((first, last)) if size::is_next(last, key) => Some((first, key)),
                    run => {
                        close(run, size::MUTATION_OVERHEAD, &mut total);
                        Some((key, key))
                    }
                };
            }
        }
    }
    close(clears, size::MUTATION_OVERHEAD, &mut total);
    close(written, size::RANGE_OVERHEAD, &mut total);
    let points: Vec<Vec<u8>> = conflicts.points.iter().map(|k| key_after(k)).collect();
    let reads = conflicts
        .points
        .iter()
        .zip(&points)
        .map(|(k, end)| (k.as_slice(), end.as_slice()))
        .chain(
            conflicts
                .ranges
                .iter()
                .map(|(b, e)| (b.as_slice(), e.as_slice())),
        )
        .collect();
    total.saturating_add(size::ranges_bytes(size::coalesce(reads)))
}

/// Merges a committed range read of `[begin, end)` with the transaction's own writes in that
/// range (clears included), and, if `gaps` is given, lists the parts of the range the
/// transaction did not write (its read conflict ranges, were the read serializable).
fn overlay_range(
    committed: Vec<KeyValue>,
    writes: &Writes,
    mut gaps: Option<&mut Vec<(Vec<u8>, Vec<u8>)>>,
    begin: &[u8],
    end: &[u8],
) -> Vec<KeyValue> {
    let bounds = (Bound::Included(begin), Bound::Excluded(end));
    let mut own = writes.range::<[u8], _>(bounds).peekable();
    if own.peek().is_none() {
        if let Some(gaps) = gaps {
            gaps.push((begin.to_vec(), end.to_vec()));
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
        if let Some(gaps) = gaps.as_deref_mut() {
            if gap_start.as_slice() < key.as_slice() {
                gaps.push((gap_start.clone(), key.clone()));
            }
        }
        gap_start = key_after(key);
    }
    if let Some(gaps) = gaps {
        if gap_start.as_slice() < end {
            gaps.push((gap_start, end.to_vec()));
        }
    }
    merged.into_iter().collect()
}
