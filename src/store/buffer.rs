//! A transaction's client side, shared by MemDb and the SQLite store: buffered writes, the
//! read-your-writes overlay ([`reads`]), the read-conflict set ([`conflicts`]), size
//! accounting, pending watches and the transaction's I/O counts.
//!
//! A store keeps one [`TxnBuffer`] per transaction (behind its own lock) and supplies what is
//! its own: the read version, the committed values a read falls through to, and the commit.

use std::time::Duration;

use crate::clock::LocalInstant;
use crate::store::errors;
use crate::store::limits::{self, MAX_TRANSACTION_BYTES, READ_KEY_LIMIT};
use crate::store::size;
use crate::store::stats::{Counters, TxnStats, bump};
use crate::store::txn::TxnError;
use crate::store::watch::{PendingWatch, WatchHandle};
use conflicts::{ReadConflicts, Writes, commit_size};

pub(crate) mod conflicts;
pub(crate) mod reads;

/// How long a transaction may use its read version: reads and write commits fail with
/// `transaction_too_old` (1007) once the store's clock shows this much time since the read
/// version was taken. FoundationDB's limit.
pub const MAX_TRANSACTION_AGE: Duration = Duration::from_secs(5);

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
