//! The SQLite store's errors: [`SqliteOpenError`] for opening a file, and the mapping of
//! SQLite's errors into [`TxnError`] for everything after.

use std::error::Error as StdError;
use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

use super::files::StoreFileChanged;
use crate::store::txn::{TxnError, TxnErrorKind};

/// Why [`SqliteDb::open`](super::SqliteDb::open) failed.
///
/// Every variant names the file. The SQLite error, where there is one, is the
/// [`source`](std::error::Error::source) (a `rusqlite::Error`, reachable by downcasting).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteOpenError {
    /// The file could not be opened or created: its directory does not exist, or the process
    /// may not read or write it (SQLite also needs to create `-wal` and `-shm` files beside
    /// it).
    #[error("cannot open or create the SQLite database {}", path.display())]
    CannotOpen {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: Box<dyn StdError + Send + Sync + 'static>,
    },
    /// The file exists but is not a SQLite database (or is encrypted).
    #[error("{} is not a SQLite database", path.display())]
    NotADatabase {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: Box<dyn StdError + Send + Sync + 'static>,
    },
    /// SQLite found the file corrupt.
    #[error("the SQLite database {} is corrupt", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: Box<dyn StdError + Send + Sync + 'static>,
    },
    /// A [read-only](super::SqliteOptions::read_only) open found no store in the file: it is
    /// empty, or a writer has created it and not yet written the schema. A read-write open
    /// would make it a store; a read-only one creates nothing.
    #[error("{} holds no election store yet (empty)", path.display())]
    Empty {
        /// The database file.
        path: PathBuf,
    },
    /// The file is a SQLite database, but not one this store created: other tables, missing
    /// tables or columns, or another application's id.
    #[error("{} is a SQLite database but not an election store: {reason}", path.display())]
    WrongSchema {
        /// The database file.
        path: PathBuf,
        /// What did not match.
        reason: String,
    },
    /// The file is an election store of a schema version this build does not know (written by
    /// a newer version of this crate). It is left untouched.
    #[error(
        "the election store {} has schema version {found}; this build reads version {supported} only",
        path.display()
    )]
    UnsupportedSchemaVersion {
        /// The database file.
        path: PathBuf,
        /// The version found in the file.
        found: i64,
        /// The version this build reads and writes.
        supported: i64,
    },
    /// SQLite could not put the database in write-ahead-log mode (for example on a file system
    /// without shared memory support, such as many network file systems).
    #[error("cannot use write-ahead logging on {} (journal mode is {mode:?})", path.display())]
    NoWriteAheadLog {
        /// The database file.
        path: PathBuf,
        /// The journal mode SQLite reported instead.
        mode: String,
    },
    /// The path (or the `-wal` or `-shm` file beside it) is not a regular file: a directory,
    /// a FIFO, a character or block device (`/dev/null`), a socket. Nothing was created.
    #[error(
        "{} is {kind}, not a regular file: a SQLite store and its -wal and -shm files must be \
         regular files (nothing was created)",
        file.display()
    )]
    NotAFile {
        /// The database file.
        path: PathBuf,
        /// The file that is not a regular file: the database file, or its `-wal` or `-shm`.
        file: PathBuf,
        /// What it is instead ("a directory", "a character device", ...).
        kind: &'static str,
    },
    /// One of the store's files was deleted or replaced while it was being opened (see
    /// [`StoreFileChanged`]).
    #[error("the files of the SQLite store {} changed while it was being opened", path.display())]
    FilesChanged {
        /// The database file.
        path: PathBuf,
        /// Which file, and how.
        #[source]
        source: StoreFileChanged,
    },
    /// Another process uses the store through a `-shm` (and so a `-wal`) that is no longer at
    /// its path: they were deleted or replaced while it used them. Opening the store now
    /// would start a second log beside that process's, without the commits still in its log,
    /// with locks that do not exclude it. Stop that process first (a handle on the old files
    /// fails every commit, and `fdb-leader` exits). See [the rule](super::files).
    #[error(
        "process {pid} uses the SQLite store {} through a -wal and -shm that are no longer at \
         their paths (deleted or replaced while in use): opening it now would start a second \
         log beside that process's",
        path.display()
    )]
    InUseThroughOtherFiles {
        /// The database file.
        path: PathBuf,
        /// The process that uses the old files.
        pid: u32,
    },
    /// Any other SQLite error while opening, for example a lock held longer than the busy
    /// timeout.
    #[error("SQLite error while opening {}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: Box<dyn StdError + Send + Sync + 'static>,
    },
}

impl SqliteOpenError {
    /// The database file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            SqliteOpenError::CannotOpen { path, .. }
            | SqliteOpenError::NotADatabase { path, .. }
            | SqliteOpenError::Corrupt { path, .. }
            | SqliteOpenError::WrongSchema { path, .. }
            | SqliteOpenError::Empty { path }
            | SqliteOpenError::UnsupportedSchemaVersion { path, .. }
            | SqliteOpenError::NoWriteAheadLog { path, .. }
            | SqliteOpenError::NotAFile { path, .. }
            | SqliteOpenError::FilesChanged { path, .. }
            | SqliteOpenError::InUseThroughOtherFiles { path, .. }
            | SqliteOpenError::Sqlite { path, .. } => path,
        }
    }

    /// Classifies a SQLite error met while opening `path`.
    pub(super) fn from_sqlite(path: &Path, e: rusqlite::Error) -> Self {
        let path = path.to_path_buf();
        match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase) => SqliteOpenError::NotADatabase {
                path,
                source: Box::new(e),
            },
            Some(ErrorCode::DatabaseCorrupt) => SqliteOpenError::Corrupt {
                path,
                source: Box::new(e),
            },
            Some(
                ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::ReadOnly
                | ErrorCode::NotFound,
            ) => SqliteOpenError::CannotOpen {
                path,
                source: Box::new(e),
            },
            _ => SqliteOpenError::Sqlite {
                path,
                source: Box::new(e),
            },
        }
    }
}

/// Maps a SQLite error into a [`TxnError`] with the SQLite error as its source:
///
/// - `SQLITE_BUSY`, `SQLITE_LOCKED` (the busy timeout ran out): [`TxnErrorKind::Unavailable`];
/// - `SQLITE_FULL` (disk full; may pass): [`TxnErrorKind::OtherRetryable`];
/// - anything else (I/O errors, corruption, not a database, a file removed or made
///   read-only, a schema changed under us): [`TxnErrorKind::Fatal`].
///
/// No numeric code is attached: [`TxnError::code`] carries FoundationDB's codes, which SQLite's
/// overlap.
pub(super) fn txn_error(e: rusqlite::Error) -> TxnError {
    let kind = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => TxnErrorKind::Unavailable,
        Some(ErrorCode::DiskFull) => TxnErrorKind::OtherRetryable,
        _ => TxnErrorKind::Fatal,
    };
    TxnError::with_source(kind, e)
}

/// The store's files are no longer the ones this handle has open: a fatal error (it never
/// heals) whose source names the file.
pub(super) fn files_changed(e: StoreFileChanged) -> TxnError {
    TxnError::with_source(TxnErrorKind::Fatal, e)
}

/// The commit statement itself failed after the writes were made: whether they reached the
/// file is unknown (`commit_unknown_result`, 1021).
pub(super) fn commit_unknown(e: rusqlite::Error) -> TxnError {
    TxnError::with_source(TxnErrorKind::CommitUnknown, e).with_code(1021)
}

/// The log no longer covers the transaction's read version: conflicts with it cannot be
/// checked (`transaction_too_old`, 1007).
pub(super) fn log_pruned(read_version: u64, floor: u64) -> TxnError {
    TxnError::with_source(
        TxnErrorKind::TooOld,
        format!(
            "the commit log was pruned up to version {floor}, past the read version {read_version}"
        ),
    )
    .with_code(1007)
}

/// The store holds a value the schema does not allow (a negative version, say).
pub(super) fn malformed(what: &str) -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Fatal,
        format!("the SQLite store is malformed: {what}"),
    )
}

/// The blocking task that ran a commit did not report back.
pub(super) fn commit_task_lost(e: tokio::task::JoinError) -> TxnError {
    TxnError::with_source(TxnErrorKind::CommitUnknown, e).with_code(1021)
}
