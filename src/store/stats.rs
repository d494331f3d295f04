//! I/O and outcome counters, shared by MemDb and the SQLite store.

use std::sync::atomic::{AtomicU64, Ordering};

/// Cumulative counts of what a store did: a [`MemDb`](crate::MemDb) since it was created or
/// since [`MemDb::reset_stats`](crate::MemDb::reset_stats); a `SqliteDb` handle (and its
/// clones) likewise, counting only its own transactions.
///
/// Reads are counted when they are served (a read that fails, for example with an injected
/// unavailability or `transaction_too_old`, is not counted); writes and conflict keys are
/// counted when the transaction issues them, whether or not it later commits.
///
/// [`since`](Self::since) gives the counts between two snapshots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct StoreStats {
    /// Point reads served (`get`), snapshot or serializable.
    pub point_reads: u64,
    /// Range reads served (`get_range`).
    pub range_reads: u64,
    /// Key-value pairs returned by range reads.
    pub range_keys_read: u64,
    /// `set` calls.
    pub sets: u64,
    /// `clear` calls.
    pub clears: u64,
    /// `add_read_conflict_key` calls that succeeded.
    pub read_conflict_keys: u64,
    /// `commit` calls, including read-only commits and commits that failed.
    pub commits_attempted: u64,
    /// Commits that returned `Ok`, including read-only commits.
    pub commits_succeeded: u64,
    /// Commits that failed with a conflict, detected or injected.
    pub conflicts: u64,
    /// Commits that failed with an injected error that may have committed (an unknown result
    /// or a timeout during the commit; applied or not).
    pub unknown_results: u64,
    /// Watches created (`watch` calls that succeeded), refused ones included.
    pub watches_created: u64,
    /// Watches refused at the database's limit on outstanding watches: their future failed
    /// with `too_many_watches` (1032).
    pub watches_refused: u64,
    /// Watches that fired because their key's value changed (by a later commit, or by their
    /// own transaction).
    pub watches_fired: u64,
}

impl StoreStats {
    /// The counts accumulated between `earlier` and `self` (saturating at zero, should
    /// `earlier` have been taken after a reset).
    pub fn since(&self, earlier: &StoreStats) -> StoreStats {
        StoreStats {
            point_reads: self.point_reads.saturating_sub(earlier.point_reads),
            range_reads: self.range_reads.saturating_sub(earlier.range_reads),
            range_keys_read: self.range_keys_read.saturating_sub(earlier.range_keys_read),
            sets: self.sets.saturating_sub(earlier.sets),
            clears: self.clears.saturating_sub(earlier.clears),
            read_conflict_keys: self
                .read_conflict_keys
                .saturating_sub(earlier.read_conflict_keys),
            commits_attempted: self
                .commits_attempted
                .saturating_sub(earlier.commits_attempted),
            commits_succeeded: self
                .commits_succeeded
                .saturating_sub(earlier.commits_succeeded),
            conflicts: self.conflicts.saturating_sub(earlier.conflicts),
            unknown_results: self.unknown_results.saturating_sub(earlier.unknown_results),
            watches_created: self.watches_created.saturating_sub(earlier.watches_created),
            watches_refused: self.watches_refused.saturating_sub(earlier.watches_refused),
            watches_fired: self.watches_fired.saturating_sub(earlier.watches_fired),
        }
    }
}

/// The I/O counts of one transaction (a [`MemTransaction`](crate::MemTransaction) or a
/// `SqliteTransaction`), counted as in [`StoreStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TxnStats {
    /// Point reads served.
    pub point_reads: u64,
    /// Range reads served.
    pub range_reads: u64,
    /// Key-value pairs returned by range reads.
    pub range_keys_read: u64,
    /// `set` calls.
    pub sets: u64,
    /// `clear` calls.
    pub clears: u64,
    /// `add_read_conflict_key` calls that succeeded.
    pub read_conflict_keys: u64,
    /// Watches created.
    pub watches_created: u64,
}

/// The database-wide counters, updated without taking the store's lock.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) point_reads: AtomicU64,
    pub(crate) range_reads: AtomicU64,
    pub(crate) range_keys_read: AtomicU64,
    pub(crate) sets: AtomicU64,
    pub(crate) clears: AtomicU64,
    pub(crate) read_conflict_keys: AtomicU64,
    pub(crate) commits_attempted: AtomicU64,
    pub(crate) commits_succeeded: AtomicU64,
    pub(crate) conflicts: AtomicU64,
    pub(crate) unknown_results: AtomicU64,
    pub(crate) watches_created: AtomicU64,
    pub(crate) watches_refused: AtomicU64,
    pub(crate) watches_fired: AtomicU64,
}

/// Adds `n` to a counter. (A counter would need centuries of operations to wrap.)
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    /// Runs a commit, counting it: attempted, then succeeded or (for a conflict) conflicted.
    pub(crate) async fn count_commit(
        &self,
        commit: impl std::future::Future<Output = Result<(), crate::store::txn::TxnError>>,
    ) -> Result<(), crate::store::txn::TxnError> {
        bump(&self.commits_attempted, 1);
        let result = commit.await;
        match &result {
            Ok(()) => bump(&self.commits_succeeded, 1),
            Err(e) if e.kind() == crate::store::txn::TxnErrorKind::Conflict => {
                bump(&self.conflicts, 1);
            }
            Err(_) => {}
        }
        result
    }

    pub(crate) fn snapshot(&self) -> StoreStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StoreStats {
            point_reads: get(&self.point_reads),
            range_reads: get(&self.range_reads),
            range_keys_read: get(&self.range_keys_read),
            sets: get(&self.sets),
            clears: get(&self.clears),
            read_conflict_keys: get(&self.read_conflict_keys),
            commits_attempted: get(&self.commits_attempted),
            commits_succeeded: get(&self.commits_succeeded),
            conflicts: get(&self.conflicts),
            unknown_results: get(&self.unknown_results),
            watches_created: get(&self.watches_created),
            watches_refused: get(&self.watches_refused),
            watches_fired: get(&self.watches_fired),
        }
    }

    pub(crate) fn reset(&self) {
        for c in [
            &self.point_reads,
            &self.range_reads,
            &self.range_keys_read,
            &self.sets,
            &self.clears,
            &self.read_conflict_keys,
            &self.commits_attempted,
            &self.commits_succeeded,
            &self.conflicts,
            &self.unknown_results,
            &self.watches_created,
            &self.watches_refused,
            &self.watches_fired,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// The former name of [`StoreStats`], from when only MemDb counted.
pub type MemDbStats = StoreStats;

/// The former name of [`TxnStats`], from when only MemDb counted.
pub type MemTxnStats = TxnStats;
