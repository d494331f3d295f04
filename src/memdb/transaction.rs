//! [`MemTransaction`]: one optimistic, serializable transaction over a [`MemDb`].

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::faults::{
    CommitContext, CommitDecision, CommitFault, ReadContext, ReadTarget, WrittenKeys,
};
use super::versions::{Deferred, Versions};
use super::watch::MemWatch;
use super::{MemDb, Shared};
use crate::store::buffer::reads::Snapshot;
use crate::store::buffer::{CommitParts, ReadVersion, TxnBuffer};
use crate::store::errors;
use crate::store::fdb_codes::{self, Phase};
use crate::store::stats::{TxnStats, bump};
use crate::store::txn::{ElectionTxn, KeyValue, ReadMode, TxnError, Watch};

/// A transaction on a [`MemDb`], with FoundationDB's semantics.
///
/// - **Read version.** Taken by the first read that reaches the database (or a watch, a
///   writing commit, or [`ElectionTxn::read_version`]); a read served from the transaction's
///   own writes (a key it set or cleared, a range whose every key it wrote) and an empty or
///   inverted range take none. Every read observes the database as committed at that version,
///   overlaid with this transaction's own earlier sets and clears (read-your-writes, for point
///   and range reads alike).
/// - **Conflicts.** A [`ReadMode::Serializable`] read adds the key (or the range) to the
///   transaction's read-conflict set, except for keys this transaction had already set or
///   cleared (their value does not depend on the database, as in FoundationDB);
///   [`add_read_conflict_key`](ElectionTxn::add_read_conflict_key) and
///   [`watch`](ElectionTxn::watch) add the key too. Snapshot reads add nothing.
/// - **Conflict keys on own writes.** `add_read_conflict_key` on a key this transaction has
///   already set or cleared adds nothing, as in FoundationDB (conflict ranges cover only keys
///   whose value does not come from the transaction's own writes): add it before writing.
/// - **Commit.** [`commit`](Self::commit) applies every write atomically at a new version,
///   unless a transaction that committed after this one's read version wrote a key in the
///   read-conflict set: then it fails with a retryable conflict (code 1020). A transaction
///   that writes nothing is never sent to FoundationDB's cluster: its commit succeeds without
///   conflict or age checks, unless one of its reads failed (then it fails with that error).
/// - **Age.** Once the database clock shows [`MAX_TRANSACTION_AGE`](super::MAX_TRANSACTION_AGE)
///   (5 s) since the read version was taken, reads that reach the database, watches and a
///   writing commit fail with `transaction_too_old` (code 1007).
/// - **Watches** fire once their key's value differs from the value the transaction saw, and
///   at once if the same transaction then writes the key with another value (as
///   FoundationDB's do). Beyond the database's [limit](MemDb::set_max_watches) on
///   outstanding watches (10,000 by default), a watch fails through its future with
///   `too_many_watches` (1032) while its transaction commits. Every watch error comes through
///   its future.
/// - **Limits and system keys**, at FoundationDB's step. A key of at most 10,000 bytes
///   ([`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES)) below `\xff`, a value of at most 100,000
///   ([`MAX_VALUE_BYTES`](crate::MAX_VALUE_BYTES)). A read of a key in the system keys (at or
///   after `\xff`), or of a range reaching beyond `\xff`, fails alone with 2004. A set of a
///   system key (2004), an oversized key (2102) or value (2103), a clear of a system key, and a
///   system conflict key do not fail where they are made: the first becomes the transaction's
///   deferred error, which every later read, watch, read version and the commit fail with
///   (later writes are ignored). A read of a key longer than any key can be returns absent; a
///   clear or a conflict key on it is dropped. A writing transaction may be at most
///   [`MAX_TRANSACTION_BYTES`](crate::MAX_TRANSACTION_BYTES), counted as FoundationDB counts
///   it ([`size`](Self::size)); over it the commit fails with `transaction_too_large` (2101).
///
/// Where MemDb deliberately differs from FoundationDB, [the module docs](super) say so.
///
/// The handle is a cheap `Clone` (clones are the same transaction), so it can be moved into
/// `async move` blocks. Once the commit has begun, reads and watches fail with
/// `used_during_commit` (code 2017) and writes are ignored.
#[derive(Clone)]
pub struct MemTransaction {
    inner: Arc<TxnInner>,
}

struct TxnInner {
    db: Arc<Shared>,
    id: u64,
    state: Mutex<TxnBuffer<MemWatch>>,
}

/// MemDb's committed data, as the transaction buffer reads it: the locked store.
struct MemSnapshot<'a> {
    store: &'a mut Versions,
    db: &'a Shared,
}

impl Snapshot for MemSnapshot<'_> {
    fn read_version(&mut self, slot: &mut Option<ReadVersion>) -> Result<u64, TxnError> {
        read_version(slot, self.store, self.db)
    }

    fn get(&mut self, version: u64, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        Ok(self.store.get_at(key, version).map(<[u8]>::to_vec))
    }

    fn range(&mut self, version: u64, begin: &[u8], end: &[u8]) -> Result<Vec<KeyValue>, TxnError> {
        Ok(self.store.range_at(begin, end, version))
    }
}

/// Takes the read version into `slot` if no read has taken it yet, and checks the
/// transaction's age. Commits in flight land just after a read version is taken (so this
/// transaction does not see them). `store` must be locked by the caller.
fn read_version(
    slot: &mut Option<ReadVersion>,
    store: &mut Versions,
    db: &Shared,
) -> Result<u64, TxnError> {
    let now = db.clock.now();
    let rv = match *slot {
        Some(rv) => rv,
        None => {
            let rv = ReadVersion {
                version: store.version(),
                taken_at: now,
            };
            *slot = Some(rv);
            bump(&db.counters.watches_fired, store.land_deferred(now));
            rv
        }
    };
    rv.check(now)
}

impl MemTransaction {
    pub(super) fn new(db: Arc<Shared>, id: u64) -> Self {
        MemTransaction {
            inner: Arc::new(TxnInner {
                db,
                id,
                state: Mutex::new(TxnBuffer::default()),
            }),
        }
    }

    /// This transaction's id: increasing in creation order, unique within its database.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The read version, once a read that reached the database (or a watch, a commit, or
    /// [`ElectionTxn::read_version`]) has taken it. Only looks: unlike
    /// [`ElectionTxn::read_version`], it never takes one.
    pub fn read_version(&self) -> Option<u64> {
        self.state().read_version.map(|rv| rv.version)
    }

    /// The I/O this transaction issued so far.
    pub fn stats(&self) -> TxnStats {
        self.state().stats()
    }

    /// The transaction's size as FoundationDB counts it at commit against
    /// [`MAX_TRANSACTION_BYTES`](crate::MAX_TRANSACTION_BYTES): its mutations and its read and
    /// write conflict ranges, merged where they touch (see
    /// [`TransactionSize`](crate::TransactionSize)). A writing transaction over the limit fails
    /// to commit with `transaction_too_large` (2101).
    pub fn size(&self) -> usize {
        self.state().size()
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
    /// - [`Conflict`](crate::TxnErrorKind::Conflict) (1020): a key this transaction read
    ///   serializably was written by a transaction that committed after this one's read
    ///   version (or an injected conflict). Nothing was applied.
    /// - [`TooOld`](crate::TxnErrorKind::TooOld) (1007): the transaction writes, and 5 s or
    ///   more passed since the read version was taken.
    /// - [`CommitUnknown`](crate::TxnErrorKind::CommitUnknown) (1021),
    ///   [`Unavailable`](crate::TxnErrorKind::Unavailable), or the kind of an injected
    ///   FoundationDB code: injected.
    /// - [`Fatal`](crate::TxnErrorKind::Fatal): an invalid write or conflict key (2102, 2103,
    ///   2004), a transaction too large (2101), or the commit was already started through a
    ///   clone (2017).
    /// - The error of a read of this transaction that reached the database and failed.
    ///
    /// If the commit fails, the transaction's watches fail with a copy of the error, or, when
    /// the commit was never sent (an invalid write or conflict key, a failed read), with
    /// `transaction_cancelled` (1025), as FoundationDB cancels them with the transaction.
    pub async fn commit(self) -> Result<(), TxnError> {
        let db = Arc::clone(&self.inner.db);
        db.counters.count_commit(self.commit_inner()).await
    }

    async fn commit_inner(&self) -> Result<(), TxnError> {
        let db = &self.inner.db;
        let (mut parts, decision) = {
            let mut state = self.state();
            let parts = state.begin_commit()?;
            let commit_seq = db.next_commit_seq();
            let decision = match db.injector() {
                Some(injector) => injector.on_commit(&CommitContext {
                    txn_id: self.inner.id,
                    commit_seq,
                    read_only: parts.is_read_only(),
                    written_keys: WrittenKeys(&parts.writes),
                }),
                None => CommitDecision::proceed(),
            };
            (parts, decision)
        };
        if !decision.latency.is_zero() {
            tokio::time::sleep(decision.latency).await;
        }
        let result = match decision.fault {
            None => self.apply(&mut parts, true),
            Some(CommitFault::Conflict) => Err(errors::conflict()),
            Some(CommitFault::Unavailable) => Err(errors::unavailable()),
            Some(CommitFault::UnknownNotApplied) => {
                bump(&db.counters.unknown_results, 1);
                Err(errors::commit_unknown())
            }
            Some(CommitFault::UnknownApplied) => {
                // Whatever the commit itself decided, its reply is lost.
                let _ = self.apply(&mut parts, false);
                bump(&db.counters.unknown_results, 1);
                Err(errors::commit_unknown())
            }
            Some(CommitFault::UnknownAppliedLater) => {
                self.defer(&mut parts);
                bump(&db.counters.unknown_results, 1);
                Err(errors::commit_unknown())
            }
            Some(CommitFault::Error(code)) => {
                let error = fdb_codes::injected(code, Phase::Commit);
                if error.is_maybe_committed() {
                    bump(&db.counters.unknown_results, 1);
                }
                Err(error)
            }
            Some(CommitFault::ErrorAfterApplying(code)) => {
                let error = fdb_codes::injected(code, Phase::Commit);
                if error.is_maybe_committed() {
                    // Whatever the commit itself decided, its reply is this error.
                    let _ = self.apply(&mut parts, false);
                    bump(&db.counters.unknown_results, 1);
                }
                Err(error)
            }
        };
        if let Err(e) = &result {
            parts.fail_watches(e);
        }
        {
            let mut state = self.state();
            state.read_version = parts.read_version;
            state.end_commit();
        }
        if !decision.reply_latency.is_zero() {
            tokio::time::sleep(decision.reply_latency).await;
        }
        result
    }

    /// Hands the commit to the store, to land later (its watches are never armed).
    fn defer(&self, parts: &mut CommitParts<MemWatch>) {
        let db = &self.inner.db;
        let mut store = db.store();
        let Ok(read_version) = read_version(&mut parts.read_version, &mut store, db) else {
            return; // too old: it would never land
        };
        let Some(taken_at) = parts.read_version.map(|rv| rv.taken_at) else {
            return;
        };
        if parts.is_read_only() {
            return;
        }
        store.defer(Deferred {
            read_version,
            taken_at,
            writes: std::mem::take(&mut parts.writes),
            conflicts: std::mem::take(&mut parts.conflicts),
        });
    }

    /// The commit proper: age check, conflict check, apply, and (if `arm`) arm the watches. A
    /// transaction that writes nothing is never sent to FoundationDB's cluster, so it is
    /// neither checked for conflicts nor too old: it only arms its watches.
    fn apply(&self, parts: &mut CommitParts<MemWatch>, arm: bool) -> Result<(), TxnError> {
        let db = &self.inner.db;
        let mut store = db.store();
        let mut fired: u64 = 0;
        if !parts.is_read_only() {
            let rv = read_version(&mut parts.read_version, &mut store, db)?;
            if store.conflicts(rv, &parts.conflicts) {
                return Err(errors::conflict());
            }
            fired = store.apply(&parts.writes, db.clock.now())?;
        }
        if arm {
            for w in parts.watches.drain(..) {
                if store.arm_watch(w) {
                    fired = fired.saturating_add(1);
                }
            }
        }
        drop(store);
        bump(&db.counters.watches_fired, fired);
        Ok(())
    }

    fn state(&self) -> MutexGuard<'_, TxnBuffer<MemWatch>> {
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
        match decision.error {
            Some(code) => Err(fdb_codes::injected(code, Phase::Operation)),
            None => Ok(()),
        }
    }

    async fn get_inner(&self, key: &[u8], mode: ReadMode) -> Result<Option<Vec<u8>>, TxnError> {
        // A read served from the transaction's own writes never reaches the database, so no
        // fault can hit it.
        if self.state().get_reaches_database(key) {
            if let Err(e) = self.read_fault(ReadTarget::Key(key), mode).await {
                return Err(self.state().read_failed(e));
            }
        }
        let db = &self.inner.db;
        let mut state = self.state();
        let mut store = db.store();
        let mut snapshot = MemSnapshot {
            store: &mut store,
            db,
        };
        state.point_read(&db.counters, key, mode, &mut snapshot)
    }

    async fn get_range_inner(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> Result<Vec<KeyValue>, TxnError> {
        if self.state().range_reaches_database(begin, end) {
            if let Err(e) = self
                .read_fault(ReadTarget::Range { begin, end }, mode)
                .await
            {
                return Err(self.state().read_failed(e));
            }
        }
        let db = &self.inner.db;
        let mut state = self.state();
        let mut store = db.store();
        let mut snapshot = MemSnapshot {
            store: &mut store,
            db,
        };
        state.range_read(&db.counters, begin, end, mode, &mut snapshot)
    }

    /// [`ElectionTxn::read_version`]: the read version, taken now if no read has taken it.
    fn take_read_version(&self) -> Result<u64, TxnError> {
        let db = &self.inner.db;
        let mut state = self.state();
        let mut store = db.store();
        let mut snapshot = MemSnapshot {
            store: &mut store,
            db,
        };
        state.read_version(&mut snapshot)
    }
}

impl ElectionTxn for MemTransaction {
    async fn get(&self, key: &[u8], mode: ReadMode) -> Result<Option<Vec<u8>>, TxnError> {
        self.get_inner(key, mode).await
    }

    async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> Result<Vec<KeyValue>, TxnError> {
        self.get_range_inner(begin, end, mode).await
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        self.state()
            .write(&self.inner.db.counters, key, Some(value));
    }

    fn clear(&self, key: &[u8]) {
        self.state().write(&self.inner.db.counters, key, None);
    }

    /// Never fails at once, as FoundationDB's `add_conflict_range`: a system key makes every
    /// later read and the commit fail with 2004; a key longer than any key can be is dropped.
    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), TxnError> {
        self.state()
            .add_read_conflict_key(&self.inner.db.counters, key);
        Ok(())
    }

    /// The read version, taken now if no read has taken it yet (FoundationDB's
    /// `get_read_version`); always `Some`. Unlike the inherent
    /// [`MemTransaction::read_version`], which only looks.
    fn read_version(&self) -> impl Future<Output = Result<Option<u64>, TxnError>> + Send {
        std::future::ready(self.take_read_version().map(Some))
    }

    fn approximate_size(&self) -> impl Future<Output = Result<Option<usize>, TxnError>> + Send {
        std::future::ready(self.state().approximate_size().map(Some))
    }

    /// Watches `key`, as FoundationDB does: the key is read (serializably, so the commit
    /// conflicts if it changed, unless this transaction wrote it) and the watch remembers the
    /// value this transaction sees. When the transaction commits, the watch is armed; it fires
    /// at once if the committed value already differs, otherwise at the first later commit that
    /// changes it. Writing an identical value does not fire it; clearing an existing key does.
    ///
    /// Never fails at once: every error comes through the future (a system key, 2004; a key
    /// over 10,000 bytes, 2102; watches disabled, 1034; too many watches, 1032; the
    /// transaction's deferred error; a failed read), as FoundationDB's. The watch fails with
    /// the commit's error if the commit fails, and with `transaction_cancelled` (1025) if the
    /// transaction is dropped without committing.
    fn watch(&self, key: &[u8]) -> Result<Watch, TxnError> {
        let db = &self.inner.db;
        let mut state = self.state();
        let mut store = db.store();
        let mut snapshot = MemSnapshot {
            store: &mut store,
            db,
        };
        Ok(state.watch(
            &db.counters,
            &db.watch_limit,
            db.watches_enabled(),
            key,
            &mut snapshot,
            |_key, _seen, slot| MemWatch::new(slot),
        ))
    }
}

impl fmt::Debug for MemTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        let (writes, watches) = state.pending();
        f.debug_struct("MemTransaction")
            .field("id", &self.inner.id)
            .field("read_version", &state.read_version.map(|rv| rv.version))
            .field("phase", &state.phase())
            .field("writes", &writes)
            .field("watches", &watches)
            .finish()
    }
}

#[cfg(test)]
impl MemTransaction {
    pub(super) fn has_read_conflicts(&self) -> bool {
        self.state().has_read_conflicts()
    }
}
