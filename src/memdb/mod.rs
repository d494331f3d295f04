//! An in-memory database with FoundationDB's transaction semantics.
//!
//! [`MemDb`] is the embedded default for examples, a substrate for unit tests of code written
//! against [`ElectionTxn`](crate::ElectionTxn), and the database of the deterministic
//! simulation. It models what the election relies on, as FoundationDB does it:
//!
//! - multi-version concurrency: each transaction reads at one read version, overlaid with its
//!   own writes; the read version is taken by the first read that reaches the database (or an
//!   explicit [`read_version`](crate::ElectionTxn::read_version), a watch, a writing commit),
//!   never by a read served from the transaction's own writes or by an empty range;
//! - optimistic, serializable commits that fail with a retryable conflict (1020) when a key in
//!   the read-conflict set changed after the read version;
//! - `transaction_too_old` (1007) once a transaction is [`MAX_TRANSACTION_AGE`] old, measured
//!   by the database's injected [`Clock`] (a transaction that writes nothing commits anyway:
//!   FoundationDB never sends it to the cluster);
//! - watches, with FoundationDB's limit on outstanding watches, every error reported through
//!   the watch's future;
//! - FoundationDB's key, value and transaction size limits and system keys, each failing at
//!   FoundationDB's step: an invalid write or conflict key fails the transaction's later reads
//!   and its commit; the transaction's size is counted as FoundationDB counts it
//!   ([`MemTransaction::size`], [`TransactionSize`](crate::TransactionSize));
//! - fault injection ([`FaultInjector`], [`ScriptedFaults`]): latency, forced conflicts,
//!   unknown commit results that did or did not apply (or land later), unavailability, and
//!   any FoundationDB error code (classified as the FoundationDB adapter classifies it);
//! - exact I/O counters ([`StoreStats`], [`TxnStats`]);
//! - FoundationDB's retry loop ([`MemDb::run`]), retrying what `Database::run` retries.
//!
//! It keeps old versions only as long as a live transaction may read them, so memory stays
//! bounded by the data plus the commits of the last five seconds.
//!
#![doc = include_str!("../store/differences.md")]

mod faults;
mod run;
mod transaction;
mod versions;
mod watch;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

pub use crate::store::buffer::MAX_TRANSACTION_AGE;
pub use crate::store::limits::{ABSOLUTE_MAX_WATCHES, DEFAULT_MAX_WATCHES};
pub use crate::store::retry::{MaybeCommitted, RetryClassify, RunOptions};
pub use crate::store::stats::{MemDbStats, MemTxnStats, StoreStats, TxnStats};
pub use faults::{
    CommitContext, CommitDecision, CommitFault, FaultInjector, ReadContext, ReadDecision,
    ReadTarget, ScriptedFaults, WrittenKeys,
};
pub use transaction::MemTransaction;

use crate::clock::{Clock, SystemClock};
use crate::store::stats::{self, Counters};
use crate::store::txn::TxnError;
use crate::store::watch::WatchLimit;
use versions::Versions;

/// An in-memory database with FoundationDB's transaction semantics.
///
/// A cheap `Clone` handle: clones share the same data. See [`MemTransaction`] for the
/// transaction semantics and [the module](self) for an overview.
///
/// ```
/// use fdb_leader_election::memdb::MemDb;
/// use fdb_leader_election::{ElectionTxn, ReadMode, TxnError};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), TxnError> {
/// let db = MemDb::new();
///
/// let writer = db.create_transaction();
/// writer.set(b"greeting", b"hello");
/// writer.commit().await?;
///
/// let reader = db.create_transaction();
/// let value = reader.get(b"greeting", ReadMode::Serializable).await?;
/// assert_eq!(value.as_deref(), Some(&b"hello"[..]));
/// assert_eq!(db.stats().commits_succeeded, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct MemDb {
    shared: Arc<Shared>,
}

/// The state shared by a database's handles and its transactions.
struct Shared {
    clock: Arc<dyn Clock>,
    store: Mutex<Versions>,
    counters: Counters,
    faults: RwLock<Option<Arc<dyn FaultInjector>>>,
    watches_enabled: AtomicBool,
    watch_limit: WatchLimit,
    /// The next transaction id, read version sequence number and commit sequence number.
    next_txn_id: AtomicU64,
    next_read_seq: AtomicU64,
    next_commit_seq: AtomicU64,
}

impl Shared {
    fn store(&self) -> MutexGuard<'_, Versions> {
        // Nothing panics while holding the lock; if something did, the store is still
        // consistent (every mutation completes before the lock is released).
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn injector(&self) -> Option<Arc<dyn FaultInjector>> {
        self.faults
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn watches_enabled(&self) -> bool {
        self.watches_enabled.load(Ordering::SeqCst)
    }

    fn next_read_seq(&self) -> u64 {
        self.next_read_seq.fetch_add(1, Ordering::Relaxed)
    }

    fn next_commit_seq(&self) -> u64 {
        self.next_commit_seq.fetch_add(1, Ordering::Relaxed)
    }
}

impl MemDb {
    /// An empty database on the operating system's monotonic clock ([`SystemClock`]).
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// An empty database whose transactions age by `clock` (for example a
    /// [`ManualClock`](crate::ManualClock) in tests, or a [`TokioClock`](crate::TokioClock)
    /// under paused tokio time). MemDb reads time only through this clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemDb {
            shared: Arc::new(Shared {
                clock,
                store: Mutex::new(Versions::default()),
                counters: Counters::default(),
                faults: RwLock::new(None),
                watches_enabled: AtomicBool::new(true),
                watch_limit: WatchLimit::default(),
                next_txn_id: AtomicU64::new(1),
                next_read_seq: AtomicU64::new(1),
                next_commit_seq: AtomicU64::new(1),
            }),
        }
    }

    /// A new transaction. Its read version is taken at its first read (or watch, or commit).
    pub fn create_transaction(&self) -> MemTransaction {
        let id = self.shared.next_txn_id.fetch_add(1, Ordering::Relaxed);
        MemTransaction::new(Arc::clone(&self.shared), id)
    }

    /// The database's clock.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.shared.clock)
    }

    /// Enables or disables watches. While disabled, [`watch`](crate::ElectionTxn::watch) fails
    /// with `watches_disabled` (code 1034, not retryable), as FoundationDB does when the
    /// client disables them, so callers fall back to polling. Armed watches are unaffected.
    pub fn set_watches_enabled(&self, enabled: bool) {
        self.shared.watches_enabled.store(enabled, Ordering::SeqCst);
    }

    /// Whether watches are enabled (the default).
    pub fn watches_enabled(&self) -> bool {
        self.shared.watches_enabled()
    }

    /// Sets the limit on outstanding watches (default [`DEFAULT_MAX_WATCHES`], 10,000, as
    /// FoundationDB's `DatabaseOption::MaxWatches`). A watch is outstanding from its creation
    /// until its future resolves or is dropped; one created at the limit fails through its
    /// future with `too_many_watches` (1032, not retryable), while its transaction commits.
    /// Watches already outstanding are unaffected.
    ///
    /// # Errors
    ///
    /// `invalid_option_value` (2006) above [`ABSOLUTE_MAX_WATCHES`] (1,000,000), as
    /// FoundationDB's option; the limit is left as it was.
    pub fn set_max_watches(&self, max: usize) -> Result<(), TxnError> {
        self.shared.watch_limit.set_max(max)
    }

    /// The limit on outstanding watches.
    pub fn max_watches(&self) -> usize {
        self.shared.watch_limit.max()
    }

    /// How many watches are outstanding: created, and neither resolved nor dropped.
    pub fn outstanding_watches(&self) -> usize {
        self.shared.watch_limit.outstanding()
    }

    /// Installs `injector`, consulted by every later read and commit (replacing any previous
    /// one).
    pub fn set_fault_injector(&self, injector: Arc<dyn FaultInjector>) {
        *self
            .shared
            .faults
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(injector);
    }

    /// Removes the fault injector.
    pub fn clear_fault_injector(&self) {
        *self
            .shared
            .faults
            .write()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Lands every commit still in flight
    /// ([`CommitFault::UnknownAppliedLater`]) now, as if the next transaction had started:
    /// each applies unless it conflicts or has become too old.
    pub fn land_deferred_commits(&self) {
        let fired = self.shared.store().land_deferred(self.shared.clock.now());
        stats::bump(&self.shared.counters.watches_fired, fired);
    }

    /// The cumulative counters.
    pub fn stats(&self) -> StoreStats {
        self.shared.counters.snapshot()
    }

    /// Sets every counter to zero.
    pub fn reset_stats(&self) {
        self.shared.counters.reset();
    }

    /// The latest committed version (0 before the first write commit; one more per write
    /// commit).
    pub fn committed_version(&self) -> u64 {
        self.shared.store().version()
    }

    /// How many write commits are retained for conflict detection: those a live transaction
    /// may still conflict with. A diagnostic of memory: it stays bounded by the transactions
    /// in flight, whatever the number of commits.
    ///
    /// ```
    /// use fdb_leader_election::MemDb;
    ///
    /// let db = MemDb::new();
    /// assert_eq!(db.retained_commits(), 0);
    /// ```
    pub fn retained_commits(&self) -> usize {
        self.shared.store().retained_commits()
    }

    /// How many value versions (clears included) are retained over all keys: one per key,
    /// plus those a live transaction may still read. A diagnostic of memory.
    ///
    /// ```
    /// use fdb_leader_election::MemDb;
    ///
    /// let db = MemDb::new();
    /// assert_eq!(db.retained_value_versions(), 0);
    /// ```
    pub fn retained_value_versions(&self) -> usize {
        self.shared.store().retained_values()
    }

    /// How many watches are armed (cancelled ones count until they are swept). A diagnostic
    /// of memory: dropped watches do not accumulate.
    ///
    /// ```
    /// use fdb_leader_election::MemDb;
    ///
    /// let db = MemDb::new();
    /// assert_eq!(db.armed_watches(), 0);
    /// ```
    pub fn armed_watches(&self) -> usize {
        self.shared.store().armed_watches()
    }
}

impl Default for MemDb {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (version, keys) = {
            let store = self.shared.store();
            (store.version(), store.live_keys())
        };
        f.debug_struct("MemDb")
            .field("committed_version", &version)
            .field("keys", &keys)
            .field("clock", &self.shared.clock)
            .field("watches_enabled", &self.watches_enabled())
            .field("fault_injector", &self.shared.injector())
            .finish()
    }
}
