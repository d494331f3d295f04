//! [`SqliteTransaction`]: one optimistic, serializable transaction over a [`SqliteDb`].

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rusqlite::Connection;

use super::error::{commit_task_lost, files_changed, malformed, txn_error};
use super::schema::META_VERSION;
use super::sql::{commit_locked, meta, read_range, read_value};
use super::watch::SqlWatch;
use super::{Shared, SqliteDb};
use crate::store::buffer::conflicts::{ReadConflicts, Writes};
use crate::store::buffer::reads::Snapshot;
use crate::store::buffer::{ReadVersion, TxnBuffer};
use crate::store::errors;
use crate::store::stats::TxnStats;
use crate::store::txn::{ElectionTxn, KeyValue, ReadMode, TxnError, Watch};

/// A transaction on a [`SqliteDb`], with FoundationDB's semantics (the same as
/// [`MemTransaction`](crate::MemTransaction)'s, checked by the same conformance suite).
///
/// - **Read version.** Taken, as in MemDb, by the first read that reaches the store (or a
///   watch, or [`ElectionTxn::read_version`]; never by a read served from the transaction's
///   own writes or by an empty range): the transaction opens a SQLite read transaction on a
///   connection of its own and reads the store's version. In write-ahead-log
///   mode that read transaction pins a snapshot of the file, so every later read observes the
///   store as committed at that version, overlaid with this transaction's own earlier sets and
///   clears (read-your-writes, for point and range reads alike). Writers are not blocked.
/// - **Writes** are buffered in memory until the commit.
/// - **Conflicts.** A [`ReadMode::Serializable`] read adds the key (or the range) to the
///   read-conflict set, except for keys this transaction had already written;
///   [`add_read_conflict_key`](ElectionTxn::add_read_conflict_key) and
///   [`watch`](ElectionTxn::watch) add the key too (again, unless already written). Snapshot
///   reads add nothing.
/// - **Commit.** [`commit`](Self::commit) takes SQLite's write lock (`BEGIN IMMEDIATE`,
///   waiting up to the busy timeout), checks the store's log of written keys for a write
///   after this transaction's read version inside its read-conflict set (then it fails with a
///   retryable conflict, code 1020, applying nothing), and otherwise applies every write at
///   the next version and logs the written keys. A transaction that writes nothing commits
///   without taking the lock, and is never too old.
/// - **Age.** Once the store's clock shows
///   [`MAX_TRANSACTION_AGE`](crate::memdb::MAX_TRANSACTION_AGE) (5 s) since the read version
///   was taken, reads, watches and a writing commit fail with `transaction_too_old` (1007).
///   So does a commit whose read version the log no longer covers
///   ([`log_retention`](super::SqliteOptions::log_retention)).
/// - **Limits and system keys.** FoundationDB's, at FoundationDB's step, as in
///   [`MemTransaction`](crate::MemTransaction): an invalid write or conflict key fails the
///   transaction's later reads, watches and commit; a writing transaction may be at most
///   [`MAX_TRANSACTION_BYTES`](crate::MAX_TRANSACTION_BYTES), counted as FoundationDB counts it
///   ([`size`](Self::size)).
/// - **Watches** fire at once when their own transaction writes the key with another value;
///   beyond the handle's [limit](SqliteDb::set_max_watches) they fail through their future
///   with `too_many_watches` (1032). Every watch error comes through its future.
///
/// The handle is a cheap `Clone` (clones are the same transaction). Once the commit has
/// begun, reads and watches fail with `used_during_commit` (2017) and writes are discarded.
/// Dropping every clone without committing rolls the transaction back.
#[derive(Clone)]
pub struct SqliteTransaction {
    inner: Arc<TxnInner>,
}

struct TxnInner {
    db: Arc<Shared>,
    id: u64,
    state: Mutex<TxnState>,
}

/// A transaction's state: the shared client side, and the connection holding its snapshot.
#[derive(Debug, Default)]
struct TxnState {
    buffer: TxnBuffer<SqlWatch>,
    /// The connection holding this transaction's read snapshot (an open SQLite read
    /// transaction), from the first read to the commit.
    conn: Option<Connection>,
}

/// The store's committed data, as the transaction buffer reads it: the connection holding
/// the transaction's snapshot, opened at the first read that needs it.
struct SqlSnapshot<'a> {
    conn: &'a mut Option<Connection>,
    db: &'a Shared,
}

impl SqlSnapshot<'_> {
    fn conn(&self) -> Result<&Connection, TxnError> {
        self.conn
            .as_ref()
            .ok_or_else(|| malformed("a read without a snapshot"))
    }
}

impl Snapshot for SqlSnapshot<'_> {
    /// Takes the read version (and the snapshot) if no read has taken it yet, and checks the
    /// transaction's age.
    fn read_version(&mut self, slot: &mut Option<ReadVersion>) -> Result<u64, TxnError> {
        let db = self.db;
        if let Some(rv) = slot {
            return rv.check(db.options.clock.now());
        }
        let conn = db.checkout()?;
        // A deferred BEGIN takes no lock; the first read then pins the snapshot.
        let version = conn
            .execute_batch("BEGIN")
            .map_err(txn_error)
            .and_then(|()| meta(&conn, META_VERSION));
        let version = match version {
            Ok(v) => v,
            Err(e) => {
                db.checkin(conn);
                return Err(e);
            }
        };
        *slot = Some(ReadVersion {
            version,
            taken_at: db.options.clock.now(),
        });
        *self.conn = Some(conn);
        Ok(version)
    }

    fn get(&mut self, _version: u64, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
        read_value(self.conn()?, key)
    }

    fn range(
        &mut self,
        _version: u64,
        begin: &[u8],
        end: &[u8],
    ) -> Result<Vec<KeyValue>, TxnError> {
        read_range(self.conn()?, begin, end)
    }
}

impl SqliteTransaction {
    pub(super) fn new(db: Arc<Shared>, id: u64) -> Self {
        SqliteTransaction {
            inner: Arc::new(TxnInner {
                db,
                id,
                state: Mutex::new(TxnState::default()),
            }),
        }
    }

    /// This transaction's id: increasing in creation order, unique within its [`SqliteDb`]
    /// handle (not across handles or processes).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The read version, once a read that reached the store (or a watch, or
    /// [`ElectionTxn::read_version`]) has taken it. Only looks: unlike
    /// [`ElectionTxn::read_version`], it never takes one.
    pub fn read_version(&self) -> Option<u64> {
        self.state().buffer.read_version.map(|rv| rv.version)
    }

    /// The I/O this transaction issued so far.
    pub fn stats(&self) -> TxnStats {
        self.state().buffer.stats()
    }

    /// The transaction's size as FoundationDB counts it at commit against
    /// [`MAX_TRANSACTION_BYTES`](crate::MAX_TRANSACTION_BYTES) (see
    /// [`MemTransaction::size`](crate::MemTransaction::size)).
    pub fn size(&self) -> usize {
        self.state().buffer.size()
    }

    /// The database handle this transaction belongs to.
    pub fn db(&self) -> SqliteDb {
        SqliteDb {
            shared: Arc::clone(&self.inner.db),
        }
    }

    /// Commits the transaction.
    ///
    /// A transaction that wrote nothing ends its snapshot and succeeds (after the age check).
    /// Otherwise the commit takes SQLite's write lock, waiting up to the busy timeout, on a
    /// blocking thread (`tokio::task::spawn_blocking`, when called inside a tokio runtime), so
    /// a wait for another process's commit does not stall the runtime. Under the lock it checks
    /// for conflicts and applies the writes at the next version. On success, the
    /// transaction's watches are armed.
    ///
    /// Dropping the future before it finishes does not stop a commit already under way: its
    /// outcome is then unknown to the caller.
    ///
    /// # Errors
    ///
    /// - [`TxnErrorKind::Conflict`](crate::store::txn::TxnErrorKind::Conflict) (1020): a key this transaction read serializably was
    ///   written by a commit after this one's read version. Nothing was applied.
    /// - [`TxnErrorKind::TooOld`](crate::store::txn::TxnErrorKind::TooOld) (1007): 5 s or more passed since the read version was taken,
    ///   or the log was pruned past the read version. Nothing was applied.
    /// - [`TxnErrorKind::Unavailable`](crate::store::txn::TxnErrorKind::Unavailable): the write lock was not granted within the busy timeout
    ///   (another process holds it). Nothing was applied.
    /// - [`TxnErrorKind::CommitUnknown`](crate::store::txn::TxnErrorKind::CommitUnknown) (1021): SQLite's `COMMIT` itself failed (an I/O
    ///   error, say): the writes may or may not be in the file.
    /// - [`TxnErrorKind::Fatal`](crate::store::txn::TxnErrorKind::Fatal): an invalid write (2101, 2102, 2103, 2004), the commit was
    ///   already started through a clone (2017), or a SQLite error retrying will not fix
    ///   (corruption, I/O, a file removed or made read-only).
    ///
    /// If the commit fails, the transaction's watches fail with a copy of the error.
    pub async fn commit(self) -> Result<(), TxnError> {
        let db = Arc::clone(&self.inner.db);
        db.counters.count_commit(self.commit_inner()).await
    }

    async fn commit_inner(&self) -> Result<(), TxnError> {
        let db = &self.inner.db;
        let (conn, mut parts) = {
            let mut guard = self.state();
            let state = &mut *guard;
            let begun = state.buffer.begin_commit().and_then(|mut parts| {
                // A transaction that writes nothing is never too old (FoundationDB never sends
                // it to the cluster).
                let too_old = !parts.is_read_only()
                    && parts
                        .read_version
                        .is_some_and(|rv| rv.is_too_old(db.options.clock.now()));
                if too_old {
                    let error = errors::too_old();
                    parts.fail_watches(&error);
                    state.buffer.end_commit();
                    return Err(error);
                }
                Ok(parts)
            });
            let conn = state.conn.take();
            match begun {
                Ok(parts) => (conn, parts),
                Err(e) => {
                    if let Some(conn) = conn {
                        db.checkin(conn);
                    }
                    return Err(e);
                }
            }
        };
        let result = if parts.is_read_only() {
            // Read-only: no conflict to check, nothing to apply; but what it read must come
            // from the store's files.
            if let Some(conn) = conn {
                db.checkin(conn);
            }
            db.files.check().map_err(files_changed)
        } else {
            let writes = std::mem::take(&mut parts.writes);
            let conflicts = std::mem::take(&mut parts.conflicts);
            self.write_commit(conn, parts.read_version, writes, conflicts)
                .await
        };
        self.state().buffer.end_commit();
        match &result {
            Ok(()) => parts.watches.into_iter().for_each(|w| w.handle.arm()),
            Err(e) => parts.fail_watches(e),
        }
        result
    }

    /// Takes the write lock, checks and applies, off the async runtime if there is one.
    async fn write_commit(
        &self,
        conn: Option<Connection>,
        read_version: Option<ReadVersion>,
        writes: Writes,
        conflicts: ReadConflicts,
    ) -> Result<(), TxnError> {
        let db = &self.inner.db;
        let conn = match conn {
            Some(conn) => conn,
            None => db.checkout()?,
        };
        let retention = db.options.log_retention.max(1);
        let clock = Arc::clone(&db.options.clock);
        let version = read_version.map(|rv| rv.version);
        let shared = Arc::clone(db);
        let work = move || {
            let result = commit_locked(
                &conn,
                &shared.files,
                version,
                &writes,
                &conflicts,
                retention,
                || {
                    // Checked again once the lock is granted: a commit that waited for it past
                    // the age limit fails as FoundationDB's would.
                    read_version.is_some_and(|rv| rv.is_too_old(clock.now()))
                },
            );
            (conn, result)
        };
        let (conn, result) = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime
                .spawn_blocking(work)
                .await
                .map_err(commit_task_lost)?,
            Err(_) => work(),
        };
        db.checkin(conn);
        result.map(|_version| ())
    }

    fn state(&self) -> MutexGuard<'_, TxnState> {
        // Nothing panics while holding the lock; if something did, the state is still usable.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the buffer with the transaction's snapshot.
    fn with_snapshot<T>(
        &self,
        f: impl FnOnce(&mut TxnBuffer<SqlWatch>, &mut SqlSnapshot<'_>) -> T,
    ) -> T {
        let db = &self.inner.db;
        let mut guard = self.state();
        let TxnState { buffer, conn } = &mut *guard;
        let mut snapshot = SqlSnapshot { conn, db };
        f(buffer, &mut snapshot)
    }
}

impl ElectionTxn for SqliteTransaction {
    async fn get(&self, key: &[u8], mode: ReadMode) -> Result<Option<Vec<u8>>, TxnError> {
        let counters = &self.inner.db.counters;
        self.with_snapshot(|buffer, snapshot| buffer.point_read(counters, key, mode, snapshot))
    }

    async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> Result<Vec<KeyValue>, TxnError> {
        let counters = &self.inner.db.counters;
        self.with_snapshot(|buffer, snapshot| {
            buffer.range_read(counters, begin, end, mode, snapshot)
        })
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        self.state()
            .buffer
            .write(&self.inner.db.counters, key, Some(value));
    }

    fn clear(&self, key: &[u8]) {
        self.state()
            .buffer
            .write(&self.inner.db.counters, key, None);
    }

    /// Never fails at once, as FoundationDB's `add_conflict_range`: a system key makes every
    /// later read and the commit fail with 2004; a key longer than any key can be is dropped.
    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), TxnError> {
        self.state()
            .buffer
            .add_read_conflict_key(&self.inner.db.counters, key);
        Ok(())
    }

    /// The read version, taken now (with the snapshot) if no read has taken it yet
    /// (FoundationDB's `get_read_version`); always `Some`. Unlike the inherent
    /// [`SqliteTransaction::read_version`], which only looks.
    fn read_version(&self) -> impl Future<Output = Result<Option<u64>, TxnError>> + Send {
        let version = self.with_snapshot(|buffer, snapshot| buffer.read_version(snapshot));
        std::future::ready(version.map(Some))
    }

    fn approximate_size(&self) -> impl Future<Output = Result<Option<usize>, TxnError>> + Send {
        std::future::ready(self.state().buffer.approximate_size().map(Some))
    }

    /// Watches `key`, as FoundationDB does: the key is read (serializably, so the commit
    /// conflicts if it changed, unless this transaction wrote it) and the watch remembers the
    /// value this transaction sees. When the transaction commits, the watch is armed; it fires
    /// once the committed value differs from the remembered one (at once if it already does).
    /// Writing an identical value does not fire it; clearing an existing key does.
    ///
    /// The store notices changes by polling (see [`SqliteOptions`](super::SqliteOptions)), so
    /// a change is seen within one poll interval, and a change that is undone within one poll
    /// interval may be missed (as FoundationDB may miss one, too). Inside a tokio runtime the
    /// polling runs on a task of its own once the watch is armed, so a watch fires (and stops
    /// counting against the limit) whether or not its future is polled.
    ///
    /// Never fails at once: every error comes through the future (a system key, 2004; a key
    /// over 10,000 bytes, 2102; too many watches, 1032; the transaction's deferred error; a
    /// failed read), as FoundationDB's. The watch fails with the commit's error if the commit
    /// fails, with `transaction_cancelled` (1025) if the transaction is dropped without
    /// committing, and with a fatal error once every handle of the database has been dropped.
    fn watch(&self, key: &[u8]) -> Result<Watch, TxnError> {
        let db = &self.inner.db;
        Ok(self.with_snapshot(|buffer, snapshot| {
            buffer.watch(
                &db.counters,
                &db.watch_limit,
                true,
                key,
                snapshot,
                |key, seen, slot| SqlWatch::new(db, key.to_vec(), seen.map(<[u8]>::to_vec), slot),
            )
        }))
    }
}

impl Drop for TxnInner {
    fn drop(&mut self) {
        // Roll the snapshot back and give its connection back. Pending watches fail with
        // `transaction_cancelled` as their senders drop.
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(conn) = state.conn.take() {
            self.db.checkin(conn);
        }
    }
}

impl fmt::Debug for SqliteTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        let (writes, watches) = state.buffer.pending();
        f.debug_struct("SqliteTransaction")
            .field("id", &self.inner.id)
            .field(
                "read_version",
                &state.buffer.read_version.map(|rv| rv.version),
            )
            .field("phase", &state.buffer.phase())
            .field("writes", &writes)
            .field("watches", &watches)
            .finish()
    }
}
