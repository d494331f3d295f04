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
use crate::store::buffer::{CommitParts, ReadVersion, TxnBuffer};
use crate::store::errors;
use crate::store::fdb_codes::{self, Phase};
use crate::store::stats::{TxnStats, bump};
use crate::store::txn::{ElectionTxn, KeyValue, ReadMode, TxnError, Watch};

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
/// - **Conflict keys on own writes.** `add_read_conflict_key` on a key this transaction has
///   already set or cleared adds nothing, as in FoundationDB (conflict ranges cover only keys
///   whose value does not come from the transaction's own writes): add it before writing.
/// - **Commit.** [`commit`](Self::commit) applies every write atomically at a new version,
///   unless a transaction that committed after this one's read version wrote a key in the
///   read-conflict set: then it fails with a retryable conflict (code 1020). A transaction
///   that writes nothing is never sent to FoundationDB's cluster: its commit succeeds without
///   conflict or age checks.
/// - **Age.** Once the database clock shows [`MAX_TRANSACTION_AGE`](super::MAX_TRANSACTION_AGE)
///   (5 s) since the read version was taken, reads, watches and a writing commit fail with
///   `transaction_too_old` (code 1007).
/// - **Watches** fire once their key's committed value differs from the value the transaction
///   saw, and at once if the same transaction then writes the key with another value (as
///   FoundationDB's do). Beyond the database's [limit](MemDb::set_max_watches) on
///   outstanding watches (10,000 by default), a watch fails through its future with
///   `too_many_watches` (1032) while its transaction commits.
/// - **Limits.** Keys are at most 10,000 bytes and below `\xff`; values at most 100,000 bytes.
///   Reading a longer key returns absent (no such key can exist); writing one fails the
///   commit. A writing transaction may be at most 10,000,000 bytes, counted as FoundationDB
///   counts it: mutations plus write and read conflict ranges (about `3 × key + value` per
///   set), so `transaction_too_large` (2101) comes before the written bytes alone reach the
///   limit. Bad reads fail at once; bad writes fail the commit.
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
    state: Mutex<TxnBuffer<MemWatch>>,
}

/// Takes the read version into `slot` if this is the transaction's first operation, and
/// checks the transaction's age. Commits in flight land just after a read version is taken
/// (so this transaction does not see them). `store` must be locked by the caller.
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

    /// The read version, once the first read (or watch, or commit) has taken it.
    pub fn read_version(&self) -> Option<u64> {
        self.state().read_version.map(|rv| rv.version)
    }

    /// The I/O this transaction issued so far.
    pub fn stats(&self) -> TxnStats {
        self.state().stats()
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
    /// - [`Fatal`](crate::TxnErrorKind::Fatal): an invalid write (2101, 2102, 2103, 2004), or
    ///   the commit was already started through a clone (2017).
    ///
    /// If the commit fails, the transaction's watches fail with a copy of the error.
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
        errors::check_read_key(key)?;
        self.read_fault(ReadTarget::Key(key), mode).await?;
        let db = &self.inner.db;
        let mut guard = self.state();
        let state = &mut *guard;
        state.ensure_open()?;
        let mut store = db.store();
        let rv = read_version(&mut state.read_version, &mut store, db)?;
        state.point_read(&db.counters, key, mode, || {
            Ok(store.get_at(key, rv).map(<[u8]>::to_vec))
        })
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
        let rv = read_version(&mut state.read_version, &mut store, db)?;
        state.range_read(&db.counters, begin, end, mode, || {
            Ok(store.range_at(begin, end, rv))
        })
    }
}

impl ElectionTxn for MemTransaction {
    async fn get(&self, key: &[u8], mode: ReadMode) -> Result<Option<Vec<u8>>, TxnError> {
        self.get_inner(key, mode)
            .await
            .map_err(|e| self.state().read_failed(e))
    }

    async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> Result<Vec<KeyValue>, TxnError> {
        self.get_range_inner(begin, end, mode)
            .await
            .map_err(|e| self.state().read_failed(e))
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        self.state()
            .write(&self.inner.db.counters, key, Some(value));
    }

    fn clear(&self, key: &[u8]) {
        self.state().write(&self.inner.db.counters, key, None);
    }

    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), TxnError> {
        self.state()
            .add_read_conflict_key(&self.inner.db.counters, key)
    }

    fn read_version(&self) -> impl Future<Output = Result<Option<u64>, TxnError>> + Send {
        std::future::ready(Ok(MemTransaction::read_version(self)))
    }

    /// Watches `key`, as FoundationDB does: the key is read (serializably, so the commit
    /// conflicts if it changed, unless this transaction wrote it) and the watch remembers the
    /// value this transaction sees. When the transaction commits, the watch is armed; it fires
    /// at once if the committed value already differs, otherwise at the first later commit that
    /// changes it. Writing an identical value does not fire it; clearing an existing key does.
    ///
    /// The watch fails with the commit's error if the commit fails, and with
    /// `transaction_cancelled` (1025) if the transaction is dropped without committing.
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
        let rv = read_version(&mut state.read_version, &mut store, db)
            .map_err(|e| state.read_failed(e))?;
        state.watch(
            &db.counters,
            &db.watch_limit,
            key,
            || Ok(store.get_at(key, rv).map(<[u8]>::to_vec)),
            |_key, _seen| MemWatch::new(),
        )
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
