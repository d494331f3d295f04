//! [`MemTransaction`]: one optimistic, serializable transaction over a [`MemDb`].

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::faults::{
    CommitContext, CommitDecision, CommitFault, ReadContext, ReadTarget, WrittenKeys,
};
use super::stats::{MemTxnStats, bump};
use super::store::{Deferred, ReadConflicts, Store, buffer_write, overlay_range};
use super::watch::PendingWatch;
use super::{MAX_TRANSACTION_AGE, MemDb, Shared, errors};
use crate::clock::LocalInstant;
use crate::txn::{ElectionTxn, KeyValue, ReadMode, TxnError, TxnErrorKind, Watch};

/// A transaction on a [`MemDb`], with FoundationDB's semantics.
///
/// - **Read version.** Taken at the transaction's first read (or watch, or commit). Every read
///   observes the database as committed at that version, overlaid with this transaction's own
///   earlier sets and clears (read-your-writes, for point and range reads alike).
/// - **Conflicts.** A [`ReadMode::Serializable`] read adds the key (or the range) to the
///   transaction's read-conflict set, except for keys this transaction had already set or
///   cleared (their value does not depend on the database, as in FoundationDB);
///   [`add_read_conflict_key`](ElectionTxn::add_read_conflict_key) and
///   [`watch`](ElectionTxn::watch) add the key too. Snapshot reads add nothing.
/// - **Commit.** [`commit`](Self::commit) applies every write atomically at a new version,
///   unless a transaction that committed after this one's read version wrote a key in the
///   read-conflict set: then it fails with a retryable conflict (code 1020). A transaction
///   that writes nothing commits without conflict checks.
/// - **Age.** Once the database clock shows [`MAX_TRANSACTION_AGE`] (5 s) since the read version
///   was taken, reads, watches and the commit fail with `transaction_too_old` (code 1007).
/// - **Limits.** Keys are at most 10,000 bytes and below `\xff`; values at most 100,000 bytes;
///   the writes at most 10,000,000 bytes. Bad reads fail at once; bad writes fail the commit.
///
/// The handle is a cheap `Clone` (clones are the same transaction), so it can be moved into
/// `async move` blocks. Once the commit has begun, reads and watches fail with
/// `used_during_commit` (code 2017) and writes are discarded.
#[derive(Clone)]
pub struct MemTransaction {
    inner: Arc<TxnInner>,
}

struct TxnInner {
    db: Arc<Shared>,
    id: u64,
    state: Mutex<TxnState>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    #[default]
    Open,
    Committing,
    Done,
}

#[derive(Clone, Copy, Debug)]
struct ReadVersion {
    version: u64,
    taken_at: LocalInstant,
}

#[derive(Debug, Default)]
struct TxnState {
    phase: Phase,
    read_version: Option<ReadVersion>,
    /// Sets (`Some`) and clears (`None`), by key.
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    conflicts: ReadConflicts,
    watches: Vec<PendingWatch>,
    /// The first invalid write, reported by the commit.
    deferred: Option<TxnError>,
    /// Bytes of keys and values written.
    size: usize,
    stats: MemTxnStats,
}

impl TxnState {
    fn ensure_open(&self) -> Result<(), TxnError> {
        match self.phase {
            Phase::Open => Ok(()),
            Phase::Committing | Phase::Done => Err(errors::used_during_commit()),
        }
    }

    /// Takes the read version if this is the first operation, and checks the transaction's
    /// age. Commits in flight land just after a read version is taken (so this transaction
    /// does not see them). `store` must be locked by the caller.
    fn read_version(&mut self, store: &mut Store, db: &Shared) -> Result<u64, TxnError> {
        let now = db.clock.now();
        let rv = match self.read_version {
            Some(rv) => rv,
            None => {
                let rv = ReadVersion {
                    version: store.version(),
                    taken_at: now,
                };
                self.read_version = Some(rv);
                bump(&db.counters.watches_fired, store.land_deferred(now));
                rv
            }
        };
        if now.saturating_duration_since(rv.taken_at) >= MAX_TRANSACTION_AGE {
            return Err(errors::too_old());
        }
        Ok(rv.version)
    }

    fn write(&mut self, key: &[u8], value: Option<&[u8]>) {
        buffer_write(
            &mut self.writes,
            &mut self.size,
            &mut self.deferred,
            key,
            value,
        );
    }
}

impl MemTransaction {
    pub(super) fn new(db: Arc<Shared>, id: u64) -> Self {
        MemTransaction {
            inner: Arc::new(TxnInner {
                db,
                id,
                state: Mutex::new(TxnState::default()),
            }),
        }
    }

    /// This transaction's id: increasing in creation order, unique within its database.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The read version, once the first read (or watch, or commit) has taken it.
    pub fn read_version(&self) -> Option<u64> {
        self.state().read_version.map(|rv| rv.version)
    }

    /// The I/O this transaction issued so far.
    pub fn stats(&self) -> MemTxnStats {
        self.state().stats
    }

    /// The database this transaction belongs to.
    pub fn db(&self) -> MemDb {
        MemDb {
            shared: Arc::clone(&self.inner.db),
        }
    }

    /// Commits the transaction.
    ///
    /// Consults the database's [`FaultInjector`](super::FaultInjector) first, which may delay
    /// the commit or inject a failure. Then, if the transaction wrote anything, applies its
    /// writes atomically at a new version unless a key in its read-conflict set changed after
    /// its read version. On success, the transaction's watches are armed.
    ///
    /// # Errors
    ///
    /// - [`TxnErrorKind::Conflict`] (1020): a key this transaction read serializably was
    ///   written by a transaction that committed after this one's read version (or an injected
    ///   conflict). Nothing was applied.
    /// - [`TxnErrorKind::TooOld`] (1007): 5 s or more passed since the read version was taken.
    /// - [`TxnErrorKind::CommitUnknown`] (1021), [`TxnErrorKind::Unavailable`]: injected.
    /// - [`TxnErrorKind::Fatal`]: an invalid write (2101, 2102, 2103, 2004), or the commit was
    ///   already started through a clone (2017).
    ///
    /// If the commit fails, the transaction's watches fail with a copy of the error.
    pub async fn commit(self) -> Result<(), TxnError> {
        let db = Arc::clone(&self.inner.db);
        bump(&db.counters.commits_attempted, 1);
        let result = self.commit_inner().await;
        match &result {
            Ok(()) => bump(&db.counters.commits_succeeded, 1),
            Err(e) if e.kind() == TxnErrorKind::Conflict => bump(&db.counters.conflicts, 1),
            Err(_) => {}
        }
        result
    }

    async fn commit_inner(&self) -> Result<(), TxnError> {
        let db = &self.inner.db;
        let decision = {
            let mut guard = self.state();
            let state = &mut *guard;
            state.ensure_open()?;
            state.phase = Phase::Committing;
            if let Some(error) = state.deferred.take() {
                state.phase = Phase::Done;
                for w in state.watches.drain(..) {
                    w.fail(errors::copy_for_watch(&error));
                }
                return Err(error);
            }
            let commit_seq = db.next_commit_seq();
            match db.injector() {
                Some(injector) => injector.on_commit(&CommitContext {
                    txn_id: self.inner.id,
                    commit_seq,
                    read_only: state.writes.is_empty(),
                    written_keys: WrittenKeys(&state.writes),
                }),
                None => CommitDecision::proceed(),
            }
        };
        if !decision.latency.is_zero() {
            tokio::time::sleep(decision.latency).await;
        }
        let result = match decision.fault {
            None => self.apply(true),
            Some(CommitFault::Conflict) => Err(errors::conflict()),
            Some(CommitFault::Unavailable) => Err(errors::unavailable()),
            Some(CommitFault::UnknownNotApplied) => {
                bump(&db.counters.unknown_results, 1);
                Err(errors::commit_unknown())
            }
            Some(CommitFault::UnknownApplied) => {
                // Whatever the commit itself decided, its reply is lost.
                let _ = self.apply(false);
                bump(&db.counters.unknown_results, 1);
                Err(errors::commit_unknown())
            }
            Some(CommitFault::UnknownAppliedLater) => {
                self.defer();
                bump(&db.counters.unknown_results, 1);
                Err(errors::commit_unknown())
            }
        };
        let mut state = self.state();
        state.phase = Phase::Done;
        if let Err(e) = &result {
            for w in state.watches.drain(..) {
                w.fail(errors::copy_for_watch(e));
            }
        }
        result
    }

    /// Hands the commit to the store, to land later (its watches are never armed).
    fn defer(&self) {
        let db = &self.inner.db;
        let mut guard = self.state();
        let state = &mut *guard;
        let mut store = db.store();
        let Ok(read_version) = state.read_version(&mut store, db) else {
            return; // too old: it would never land
        };
        let Some(taken_at) = state.read_version.map(|rv| rv.taken_at) else {
            return;
        };
        if state.writes.is_empty() {
            return;
        }
        store.defer(Deferred {
            read_version,
            taken_at,
            writes: std::mem::take(&mut state.writes),
            conflicts: std::mem::take(&mut state.conflicts),
        });
    }

    /// The commit proper: age check, conflict check, apply, and (if `arm`) arm the watches.
    fn apply(&self, arm: bool) -> Result<(), TxnError> {
        let db = &self.inner.db;
        let mut guard = self.state();
        let state = &mut *guard;
        let mut store = db.store();
        let rv = state.read_version(&mut store, db)?;
        let now = db.clock.now();
        let mut fired: u64 = 0;
        if !state.writes.is_empty() {
            if store.conflicts(rv, &state.conflicts) {
                return Err(errors::conflict());
            }
            fired = store.apply(&state.writes, now)?;
        }
        if arm {
            for w in state.watches.drain(..) {
                if store.arm_watch(w) {
                    fired = fired.saturating_add(1);
                }
            }
        }
        drop(store);
        bump(&db.counters.watches_fired, fired);
        Ok(())
    }

    fn state(&self) -> MutexGuard<'_, TxnState> {
        // Nothing panics while holding the lock; if something did, the state is still usable.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Consults the fault injector before a read.
    async fn read_fault(&self, target: ReadTarget<'_>, mode: ReadMode) -> Result<(), TxnError> {
        let db = &self.inner.db;
        let read_seq = db.next_read_seq();
        let Some(injector) = db.injector() else {
            return Ok(());
        };
        let decision = injector.on_read(&ReadContext {
            txn_id: self.inner.id,
            read_seq,
            target,
            mode,
        });
        drop(injector);
        if !decision.latency.is_zero() {
            tokio::time::sleep(decision.latency).await;
        }
        if decision.unavailable {
            return Err(errors::unavailable());
        }
        Ok(())
    }

    async fn get_inner(&self, key: &[u8], mode: ReadMode) -> Result<Option<Vec<u8>>, TxnError> {
        errors::check_key(key)?;
        self.read_fault(ReadTarget::Key(key), mode).await?;
        let db = &self.inner.db;
        let mut guard = self.state();
        let state = &mut *guard;
        state.ensure_open()?;
        let mut store = db.store();
        let rv = state.read_version(&mut store, db)?;
        let value = match state.writes.get(key) {
            Some(own) => own.clone(),
            None => {
                if mode == ReadMode::Serializable {
                    state.conflicts.add_key(key);
                }
                store.get_at(key, rv).map(<[u8]>::to_vec)
            }
        };
        drop(store);
        state.stats.point_reads = state.stats.point_reads.saturating_add(1);
        bump(&db.counters.point_reads, 1);
        Ok(value)
    }

    async fn get_range_inner(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> Result<Vec<KeyValue>, TxnError> {
        errors::check_range_end(end)?;
        self.read_fault(ReadTarget::Range { begin, end }, mode)
            .await?;
        let db = &self.inner.db;
        let mut guard = self.state();
        let state = &mut *guard;
        state.ensure_open()?;
        let mut store = db.store();
        let rv = state.read_version(&mut store, db)?;
        let result = if begin < end {
            let committed = store.range_at(begin, end, rv);
            drop(store);
            overlay_range(
                committed,
                &state.writes,
                &mut state.conflicts,
                begin,
                end,
                mode,
            )
        } else {
            Vec::new()
        };
        let returned = u64::try_from(result.len()).unwrap_or(u64::MAX);
        state.stats.range_reads = state.stats.range_reads.saturating_add(1);
        state.stats.range_keys_read = state.stats.range_keys_read.saturating_add(returned);
        bump(&db.counters.range_reads, 1);
        bump(&db.counters.range_keys_read, returned);
        Ok(result)
    }
}

impl ElectionTxn for MemTransaction {
    fn get(
        &self,
        key: &[u8],
        mode: ReadMode,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, TxnError>> + Send {
        self.get_inner(key, mode)
    }

    fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> impl Future<Output = Result<Vec<KeyValue>, TxnError>> + Send {
        self.get_range_inner(begin, end, mode)
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        bump(&self.inner.db.counters.sets, 1);
        let mut state = self.state();
        state.stats.sets = state.stats.sets.saturating_add(1);
        if state.phase == Phase::Open {
            state.write(key, Some(value));
        }
    }

    fn clear(&self, key: &[u8]) {
        bump(&self.inner.db.counters.clears, 1);
        let mut state = self.state();
        state.stats.clears = state.stats.clears.saturating_add(1);
        if state.phase == Phase::Open {
            state.write(key, None);
        }
    }

    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), TxnError> {
        errors::check_key(key)?;
        let mut state = self.state();
        state.ensure_open()?;
        state.conflicts.add_key(key);
        state.stats.read_conflict_keys = state.stats.read_conflict_keys.saturating_add(1);
        bump(&self.inner.db.counters.read_conflict_keys, 1);
        Ok(())
    }

    /// Watches `key`, as FoundationDB does: the key is read (serializably, so the commit
    /// conflicts if it changed, unless this transaction wrote it) and the watch remembers the
    /// value this transaction sees. When the transaction commits, the watch is armed; it fires
    /// at once if the committed value already differs, otherwise at the first later commit that
    /// changes it. Writing an identical value does not fire it; clearing an existing key does.
    ///
    /// The watch fails with the commit's error if the commit fails, and with
    /// `transaction_cancelled` (1025) if the transaction is dropped without committing.
    fn read_version(&self) -> impl Future<Output = Result<Option<u64>, TxnError>> + Send {
        std::future::ready(Ok(MemTransaction::read_version(self)))
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, TxnError> {
        errors::check_key(key)?;
        let db = &self.inner.db;
        if !db.watches_enabled() {
            return Err(errors::watches_disabled());
        }
        let mut guard = self.state();
        let state = &mut *guard;
        state.ensure_open()?;
        let mut store = db.store();
        let rv = state.read_version(&mut store, db)?;
        let value = match state.writes.get(key) {
            Some(own) => own.clone(),
            None => {
                state.conflicts.add_key(key);
                store.get_at(key, rv).map(<[u8]>::to_vec)
            }
        };
        drop(store);
        let (pending, watch) = PendingWatch::new(key.to_vec(), value);
        state.watches.push(pending);
        state.stats.watches_created = state.stats.watches_created.saturating_add(1);
        bump(&db.counters.watches_created, 1);
        Ok(watch)
    }
}

impl fmt::Debug for MemTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("MemTransaction")
            .field("id", &self.inner.id)
            .field("read_version", &state.read_version.map(|rv| rv.version))
            .field("phase", &state.phase)
            .field("writes", &state.writes.len())
            .field("watches", &state.watches.len())
            .finish()
    }
}

#[cfg(test)]
impl MemTransaction {
    pub(super) fn has_read_conflicts(&self) -> bool {
        !self.state().conflicts.is_empty()
    }
}
