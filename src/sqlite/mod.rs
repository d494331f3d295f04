//! An embedded store in a SQLite file, with FoundationDB's transaction semantics, so that
//! several processes on one host can elect a leader through a file (feature `sqlite`).
//!
//! [`SqliteDb`] implements [`ElectionTxn`](crate::ElectionTxn) transactions with the same
//! semantics as [`MemDb`](crate::MemDb), checked by the same conformance suite: snapshot reads
//! at a read version, read-your-writes, serializable optimistic commits that fail with a
//! retryable conflict (1020), `transaction_too_old` (1007) after 5 s, and watches.
//!
//! # How
//!
//! SQLite in write-ahead-log mode gives every reader a stable snapshot while one writer
//! commits. On top of it, the store runs FoundationDB-style optimistic concurrency:
//!
//! - **Snapshots.** A transaction's first read opens a SQLite read transaction on a connection
//!   of its own and reads the store's current version from `meta`. That snapshot serves all its
//!   reads; other processes keep committing meanwhile. Writes are buffered in memory.
//! - **Commits.** `BEGIN IMMEDIATE` takes the write lock (waiting up to
//!   [`busy_timeout`](SqliteOptions::busy_timeout)); the `log` table, which records the keys
//!   every commit wrote, tells whether a key in the read-conflict set was written after the
//!   read version (a conflict: nothing is applied); otherwise the writes land at the next
//!   version. The lock is held for the check and the writes only, never while the application
//!   runs, so followers' read-mostly cycles do not queue behind the leader.
//! - **Log retention** is counted in versions ([`log_retention`](SqliteOptions::log_retention)),
//!   never in wall-clock time, so processes with different clocks agree: a transaction whose
//!   read version the log no longer covers gets `transaction_too_old` (retryable), never a
//!   missed conflict.
//! - **Watches** poll `PRAGMA data_version` on a dedicated connection every
//!   [`watch_poll_interval`](SqliteOptions::watch_poll_interval) and re-read their key only
//!   when another connection committed.
//!
//! # File format
//!
//! ```sql
//! CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
//!   -- 'schema' = SCHEMA_VERSION, 'version' = latest commit, 'log_floor' = see below
//! CREATE TABLE kv (key BLOB PRIMARY KEY, value BLOB NOT NULL, version INTEGER NOT NULL)
//!   WITHOUT ROWID;
//! CREATE TABLE log (version INTEGER NOT NULL, key BLOB NOT NULL, PRIMARY KEY (version, key))
//!   WITHOUT ROWID;  -- every key written (set or cleared) by every version above log_floor
//! CREATE INDEX log_by_key ON log (key, version);
//! ```
//!
//! The file's `PRAGMA application_id` is `0x46444C45` ("FDLE"). Opening a file that is not a
//! SQLite database, another application's database, or a store of an unknown
//! [`SCHEMA_VERSION`] fails with a [`SqliteOpenError`] and leaves the file untouched.
//!
//! # Durability and placement
//!
//! By default ([`Durability::Full`]) every write commit is flushed to stable storage before it
//! returns: a ballot, once handed out, is never handed out again, even after a power loss.
//! [`Durability::Normal`] skips that flush (SQLite's `synchronous = NORMAL` in WAL mode): the
//! file stays consistent, but the last commits before a power failure or OS crash may be
//! lost, so a ballot could be reissued after a reboot. A process crash loses nothing in either
//! mode.
//!
//! The file must be on a local file system: write-ahead logging needs shared memory between
//! the processes, which network file systems do not provide. SQLite creates `-wal` and `-shm`
//! files beside it, so its directory must be writable. The path must name a regular file (or
//! nothing yet): a directory, a FIFO or a device (`/dev/null`) is refused with
//! [`SqliteOpenError::NotAFile`] before anything is created.
//!
//! # Deleted or replaced files
//!
//! The `-wal` and `-shm` are part of the store: the log holds the latest commits, the index
//! holds the locks between processes. A handle whose files are deleted or replaced at their
//! paths while it runs (`rm election.db*`, `rm election.db-wal election.db-shm`, a `mv` over
//! one) refuses every commit and watch from then on, with a fatal error whose source is a
//! [`StoreFileChanged`] naming the file, and [`SqliteDb::check_files`] says so on demand; a
//! store opened while another process still uses older files at its paths is refused
//! ([`SqliteOpenError::InUseThroughOtherFiles`]). Why this rule is exact, and when SQLite
//! itself deletes and recreates these files: [`files`].
//!
//! # Blocking
//!
//! SQLite calls block the calling thread. Reads in WAL mode do not wait for writers and take
//! microseconds, so they run inline. The one call that may wait, the commit's
//! `BEGIN IMMEDIATE`, runs on tokio's blocking pool when a runtime is present
//! (`spawn_blocking`), and inline otherwise.
//!
//! # With the runner
//!
//! `SqliteDb` implements [`ElectionDatabase`]: pass a handle
//! to [`Runner::builder`](crate::Runner::builder) in each process, opened on the same file.
//! Keep [`busy_timeout`](SqliteOptions::busy_timeout) in mind: the runner bounds each
//! transaction by the election's `transaction_timeout` (1 s by default), so a commit that
//! waits longer for another process's write lock is reported as maybe committed and retried
//! at the next cycle.
//!
//! # Example
//!
//! ```
//! use fdb_leader_election::sqlite::SqliteDb;
//! use fdb_leader_election::{ElectionTxn, ReadMode, TxnError};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("election.db");
//!
//! // Two handles on one file, as two processes would have.
//! let first = SqliteDb::open(&path)?;
//! let second = SqliteDb::open(&path)?;
//!
//! first
//!     .run(|txn, _maybe_committed| async move {
//!         txn.set(b"greeting", b"hello");
//!         Ok::<_, TxnError>(())
//!     })
//!     .await?;
//!
//! let txn = second.create_transaction();
//! let value = txn.get(b"greeting", ReadMode::Serializable).await?;
//! assert_eq!(value.as_deref(), Some(&b"hello"[..]));
//! assert_eq!(second.committed_version()?, 1);
//! # Ok(())
//! # }
//! ```
//!
//! The store shares MemDb's client side (buffered writes, read-your-writes, conflicts, size
//! accounting, watches' bookkeeping, retry loop), so it differs from FoundationDB exactly where
//! MemDb does:
//!
#![doc = include_str!("../store/differences.md")]

mod error;
pub mod files;
mod options;
mod schema;
mod sql;
mod transaction;
mod watch;

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::Connection;

pub use error::SqliteOpenError;
use files::StoreFiles;
pub use files::{FileChange, StoreFile, StoreFileChanged};
pub use options::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_LOG_RETENTION, DEFAULT_MAX_IDLE_CONNECTIONS,
    DEFAULT_WATCH_POLL_INTERVAL, Durability, SqliteOptions,
};
pub use schema::SCHEMA_VERSION;
pub use transaction::SqliteTransaction;

use crate::error::ElectionError;
use crate::store::database::{ElectionDatabase, transact_with};
use crate::store::retry::{EmbeddedStore, MaybeCommitted, RetryClassify, RunOptions, retry_loop};
use crate::store::stats::{Counters, StoreStats};
use crate::store::txn::TxnError;
use crate::store::watch::WatchLimit;

/// A handle on a store in a SQLite file, with FoundationDB's transaction semantics.
///
/// A cheap `Clone`: clones share the connections and counters. Any number of handles, in any
/// number of processes on the host, may use the same file at once. See
/// [`SqliteTransaction`] for the transaction semantics and [the module](self) for how it
/// works and an example.
#[derive(Clone)]
pub struct SqliteDb {
    shared: Arc<Shared>,
}

/// The state shared by a handle's clones and its transactions.
struct Shared {
    path: PathBuf,
    options: SqliteOptions,
    /// How its connections open the file.
    access: schema::Access,
    /// The store's files as this handle opened them ([the rule](files)).
    files: StoreFiles,
    /// Idle connections, none inside a transaction.
    pool: Mutex<Vec<Connection>>,
    /// The anchor: the handle's first connection, closed only with the handle. It holds
    /// SQLite's shared lock on the database file (so SQLite never deletes the `-wal` and
    /// `-shm` while the handle lives) and serves the watches' polls. It never writes after the
    /// open, so its `data_version` moves only with other connections' commits.
    anchor: Mutex<Connection>,
    counters: Counters,
    watch_limit: WatchLimit,
    next_txn_id: AtomicU64,
}

impl Shared {
    /// An idle connection, or a new one.
    fn checkout(&self) -> Result<Connection, TxnError> {
        let idle = lock(&self.pool).pop();
        match idle {
            Some(conn) => Ok(conn),
            None => schema::reconnect(&self.path, &self.options, self.access),
        }
    }

    /// Gives `conn` back: rolls back any transaction left open on it, and keeps it if the pool
    /// has room (otherwise closes it).
    fn checkin(&self, conn: Connection) {
        if !conn.is_autocommit() && conn.execute_batch("ROLLBACK").is_err() {
            return;
        }
        let mut pool = lock(&self.pool);
        if pool.len() < self.options.max_idle_connections {
            pool.push(conn);
        }
    }

    /// For a watch: whether `key`'s latest committed value differs from `expected`. Re-reads
    /// the key only if another connection committed since `seen` (the anchor's
    /// `data_version` at the watch's last look), and updates `seen`. Fails, for good, once
    /// the store's files are no longer this handle's.
    fn watch_changed(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        seen: &mut Option<i64>,
    ) -> Result<bool, TxnError> {
        self.files.check().map_err(error::files_changed)?;
        let conn = lock(&self.anchor);
        let data_version: i64 = conn
            .query_row("PRAGMA data_version", [], |row| row.get(0))
            .map_err(error::txn_error)?;
        if *seen == Some(data_version) {
            return Ok(false);
        }
        let current = sql::read_value(&conn, key)?;
        *seen = Some(data_version);
        Ok(current.as_deref() != expected)
    }
}

/// Locks `mutex`. Nothing panics while holding these locks; if something did, the data (a
/// list of idle connections, one connection) is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SqliteDb {
    /// Opens the store at `path` with default [`SqliteOptions`], creating the file and its
    /// tables if the file does not exist (or is empty).
    ///
    /// # Errors
    ///
    /// A [`SqliteOpenError`]: the path is not a regular file, the file cannot be opened or
    /// created, is not a SQLite database, is corrupt, is another application's database, has
    /// an unknown schema version, or another process still uses older files at its paths.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteDb, SqliteOpenError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the store at `path` with `options`, creating the file and its tables if the file
    /// does not exist (or is empty). Safe to call from several processes at once.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteDb, SqliteOpenError> {
        let path = path.as_ref().to_path_buf();
        let (anchor, files, access) = schema::open(&path, &options)?;
        Ok(SqliteDb {
            shared: Arc::new(Shared {
                path,
                options,
                access,
                files,
                pool: Mutex::new(Vec::new()),
                anchor: Mutex::new(anchor),
                counters: Counters::default(),
                watch_limit: WatchLimit::default(),
                next_txn_id: AtomicU64::new(1),
            }),
        })
    }

    /// A new transaction. Its read version (and snapshot) is taken at its first read or watch.
    pub fn create_transaction(&self) -> SqliteTransaction {
        let id = self.shared.next_txn_id.fetch_add(1, Ordering::Relaxed);
        SqliteTransaction::new(Arc::clone(&self.shared), id)
    }

    /// Runs `closure` in a transaction and commits it, retrying forever what FoundationDB's
    /// `Database::run` retries. See [`run_with`](Self::run_with).
    ///
    /// # Errors
    ///
    /// The first error that is not retryable, from the closure or from the commit.
    pub async fn run<F, Fut, T, E>(&self, closure: F) -> Result<T, E>
    where
        F: FnMut(SqliteTransaction, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<TxnError> + RetryClassify,
    {
        self.run_with(RunOptions::default(), closure).await
    }

    /// Runs `closure` in a fresh transaction per attempt and commits it, retrying as `options`
    /// say: the same loop as [`MemDb::run_with`](crate::MemDb::run_with), retrying exactly the
    /// codes FoundationDB's `on_error` retries, and an error without a code (a busy file) when
    /// its kind is retryable. Conflicts and `transaction_too_old` are retried at once; the
    /// others after an exponential back-off. After an unknown commit result, later attempts get
    /// [`MaybeCommitted(true)`](MaybeCommitted).
    ///
    /// # Errors
    ///
    /// The first non-retryable error, or the last error once `options.max_attempts` attempts
    /// have failed.
    pub async fn run_with<F, Fut, T, E>(&self, options: RunOptions, closure: F) -> Result<T, E>
    where
        F: FnMut(SqliteTransaction, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<TxnError> + RetryClassify,
    {
        retry_loop(self, options, closure).await
    }

    /// The latest committed version in the file (0 for a new store; one more per write
    /// commit, by any handle or process).
    ///
    /// # Errors
    ///
    /// A SQLite error reading the file.
    pub fn committed_version(&self) -> Result<u64, TxnError> {
        let conn = self.shared.checkout()?;
        let version = sql::meta(&conn, schema::META_VERSION);
        self.shared.checkin(conn);
        version
    }

    /// The cumulative counters of this handle and its clones (not of other handles or
    /// processes on the same file). `unknown_results` counts nothing here; `watches_fired`
    /// counts watches whose poll saw the change.
    pub fn stats(&self) -> StoreStats {
        self.shared.counters.snapshot()
    }

    /// Sets every counter of this handle to zero.
    pub fn reset_stats(&self) {
        self.shared.counters.reset();
    }

    /// Sets this handle's limit on outstanding watches (default
    /// [`DEFAULT_MAX_WATCHES`](crate::memdb::DEFAULT_MAX_WATCHES), 10,000), as
    /// [`MemDb::set_max_watches`](crate::MemDb::set_max_watches) does for MemDb: a watch
    /// created at the limit fails through its future with `too_many_watches` (1032).
    ///
    /// # Errors
    ///
    /// `invalid_option_value` (2006) above
    /// [`ABSOLUTE_MAX_WATCHES`](crate::memdb::ABSOLUTE_MAX_WATCHES) (1,000,000), as
    /// FoundationDB's option; the limit is left as it was.
    pub fn set_max_watches(&self, max: usize) -> Result<(), TxnError> {
        self.shared.watch_limit.set_max(max)
    }

    /// This handle's limit on outstanding watches.
    pub fn max_watches(&self) -> usize {
        self.shared.watch_limit.max()
    }

    /// How many of this handle's watches are outstanding.
    pub fn outstanding_watches(&self) -> usize {
        self.shared.watch_limit.outstanding()
    }

    /// Whether the store's files at their paths (the database file, its `-wal` and `-shm`) are
    /// still the files this handle opened: the check every commit and every watch poll makes
    /// (see [the rule](files)). A few `stat` calls; nothing is opened.
    ///
    /// # Errors
    ///
    /// A [`StoreFileChanged`] naming the first file that was deleted or replaced. It never
    /// heals: every later commit and watch of this handle fails too.
    pub fn check_files(&self) -> Result<(), StoreFileChanged> {
        self.shared.files.check()
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The options this handle was opened with.
    pub fn options(&self) -> &SqliteOptions {
        &self.shared.options
    }
}

/// Runs the runner's transactions through [`SqliteDb::run_with`]'s loop: conflicts and
/// `transaction_too_old` are retried inside, everything else is returned to the runner, and a
/// tokio timeout bounds the whole call. A commit cut off by the timeout while it waits for
/// SQLite's write lock may still apply (within the busy timeout); the runner treats it as
/// maybe committed, as it must.
impl ElectionDatabase for SqliteDb {
    type Txn = SqliteTransaction;

    fn transact<F, Fut, T>(
        &self,
        timeout: Duration,
        body: F,
    ) -> impl Future<Output = Result<T, ElectionError>> + Send
    where
        F: Fn(Self::Txn) -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, ElectionError>> + Send,
        T: Send,
    {
        transact_with(self.clone(), timeout, body)
    }
}

impl EmbeddedStore for SqliteDb {
    type Txn = SqliteTransaction;

    fn begin(&self) -> SqliteTransaction {
        self.create_transaction()
    }

    fn commit(txn: SqliteTransaction) -> impl Future<Output = Result<(), TxnError>> + Send {
        txn.commit()
    }
}

impl fmt::Debug for SqliteDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteDb")
            .field("path", &self.shared.path)
            .field("options", &self.shared.options)
            .field("idle_connections", &lock(&self.shared.pool).len())
            .finish()
    }
}
