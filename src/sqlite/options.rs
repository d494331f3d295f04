//! [`SqliteOptions`]: how a [`SqliteDb`](super::SqliteDb)(super::SqliteDb) waits, polls, flushes and keeps its
//! conflict log, and their defaults.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};

/// The default [`SqliteOptions::busy_timeout`]: 5 s.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// The default [`SqliteOptions::watch_poll_interval`]: 25 ms.
pub const DEFAULT_WATCH_POLL_INTERVAL: Duration = Duration::from_millis(25);
/// The default [`SqliteOptions::log_retention`]: 10,000 versions.
///
/// A transaction lives at most 5 s, so pruning can only turn a commit into a (retryable)
/// `transaction_too_old` at a sustained 2,000 write commits per second, several times what a
/// SQLite file with [`Durability::Full`] commits. The log stays a few megabytes at most.
pub const DEFAULT_LOG_RETENTION: u64 = 10_000;
/// The default [`SqliteOptions::max_idle_connections`]: 4.
pub const DEFAULT_MAX_IDLE_CONNECTIONS: usize = 4;

/// How hard a write commit insists that its writes reach stable storage before it returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Durability {
    /// SQLite's `synchronous = FULL`: each write commit is flushed (`fsync`) before it returns,
    /// so it survives a power loss or an OS crash. The default: a ballot handed out is never
    /// lost and reissued. Costs one flush per write commit, which is little at election rates
    /// (a few commits per candidate per heartbeat).
    #[default]
    Full,
    /// SQLite's `synchronous = NORMAL`: no flush per commit. The file stays consistent, and a
    /// process crash loses nothing, but the last commits before a power loss or OS crash may
    /// be lost. For tests and throw-away stores.
    Normal,
}

/// How a [`SqliteDb`](super::SqliteDb) handle behaves. Build one from [`Default`] and the `with_*` methods.
///
/// ```
/// use std::time::Duration;
/// use fdb_leader_election::sqlite::{Durability, SqliteOptions};
///
/// let options = SqliteOptions::default()
///     .with_watch_poll_interval(Duration::from_millis(10))
///     .with_durability(Durability::Normal);
/// assert_eq!(options.busy_timeout, Duration::from_secs(5));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// How long a commit waits for another connection's write lock (and any statement for a
    /// lock) before failing with a retryable [`TxnErrorKind::Unavailable`](crate::TxnErrorKind)
    /// error. Default [`DEFAULT_BUSY_TIMEOUT`] (5 s).
    pub busy_timeout: Duration,
    /// How often an armed watch checks the file for commits. Default
    /// [`DEFAULT_WATCH_POLL_INTERVAL`] (25 ms). Each check is one `PRAGMA data_version` (and a
    /// read of the key when something committed).
    pub watch_poll_interval: Duration,
    /// The clock transactions age by (`transaction_too_old` after 5 s). Default
    /// [`SystemClock`]. Local to this handle: never stored, never compared across processes.
    pub clock: Arc<dyn Clock>,
    /// Flush each write commit to stable storage? Default [`Durability::Full`].
    pub durability: Durability,
    /// How many recent versions keep their written keys in the log for conflict checks
    /// (at least 1). A transaction whose read version is older than that many versions fails
    /// its commit with `transaction_too_old`, as a retryable error: never a missed conflict.
    /// Default [`DEFAULT_LOG_RETENTION`] (10,000). Each handle prunes the log as it commits;
    /// all handles on a file should use the same value.
    pub log_retention: u64,
    /// How many idle connections the handle keeps for later transactions. Default
    /// [`DEFAULT_MAX_IDLE_CONNECTIONS`] (4). A transaction holds a connection from its first
    /// read to its commit; more are opened when needed.
    pub max_idle_connections: usize,
    /// Open the store only to read it. Default `false`. A read-only handle creates nothing
    /// (the store must exist: [`SqliteDb::open_with`](super::SqliteDb::open_with) fails
    /// otherwise, with [`SqliteOpenError::Empty`](super::SqliteOpenError::Empty) for a file
    /// that holds no store yet) and changes nothing, not even the journal mode or the files
    /// beside it, so it works on a file this user may only read (a `0444` file, a read-only
    /// mount) and leaves nothing behind. Every commit that writes fails with a fatal error.
    ///
    /// With a writer at work (its `-wal` beside the file), it reads as the writer's peer and
    /// sees its commits. With none, it reads the file as it stands (SQLite's `immutable`,
    /// which needs no `-shm`), and once a writer starts or comes and goes every commit and
    /// watch fails with a [`StoreFileChanged`](super::StoreFileChanged) of
    /// [`FileChange::Created`](super::FileChange::Created) or
    /// [`FileChange::Modified`](super::FileChange::Modified): open the store again to read
    /// on.
    pub read_only: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            watch_poll_interval: DEFAULT_WATCH_POLL_INTERVAL,
            clock: Arc::new(SystemClock),
            durability: Durability::default(),
            log_retention: DEFAULT_LOG_RETENTION,
            max_idle_connections: DEFAULT_MAX_IDLE_CONNECTIONS,
            read_only: false,
        }
    }
}

impl SqliteOptions {
    /// These options, with `busy_timeout`.
    pub fn with_busy_timeout(mut self, busy_timeout: Duration) -> Self {
        self.busy_timeout = busy_timeout;
        self
    }

    /// These options, with `watch_poll_interval`.
    pub fn with_watch_poll_interval(mut self, interval: Duration) -> Self {
        self.watch_poll_interval = interval;
        self
    }

    /// These options, with `clock` (for example a [`ManualClock`](crate::ManualClock) in
    /// tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// These options, with `durability`.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// These options, with `log_retention` versions (0 counts as 1).
    pub fn with_log_retention(mut self, log_retention: u64) -> Self {
        self.log_retention = log_retention;
        self
    }

    /// These options, with `max_idle_connections`.
    pub fn with_max_idle_connections(mut self, max_idle_connections: usize) -> Self {
        self.max_idle_connections = max_idle_connections;
        self
    }

    /// These options, with `read_only` (see [`read_only`](Self::read_only)).
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }
}
