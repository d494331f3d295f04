//! Which store errors heal by themselves (retry) and which never do (stop, exit 3 at once,
//! with a message naming the file and the fix).
//!
//! The runner retries every error forever, as a library should: a busy file, a full disk, an
//! unreachable cluster all pass. A supervisor must not: a store it may not write, a file that
//! is not (or no longer) its database, a schema from a newer release stay broken however
//! long it waits, and meanwhile it would look alive while doing nothing.

use std::error::Error;
use std::path::Path;

use fdb_leader_election::sqlite::{SqliteOpenError, StoreFileChanged};
use rusqlite::ErrorCode;

use crate::exit::outer_and_root;

/// Why a store can never work as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// This user may not read or write the file or its directory.
    PermissionDenied,
    /// The file, its directory or its file system is read-only (or the file is immutable).
    ReadOnly,
    /// The path cannot be opened at all (its directory is missing, or the file vanished).
    CannotOpen,
    /// The file is not a SQLite database.
    NotADatabase,
    /// SQLite found the file corrupt.
    Corrupt,
    /// Another application's database.
    Foreign,
    /// An election store of a newer schema.
    NewerSchema,
    /// Write-ahead logging is impossible (typically a network file system).
    NoWriteAheadLog,
    /// The file, its `-wal` or its `-shm` was deleted or replaced while in use.
    Moved,
    /// The path names a directory, a FIFO, a device (`/dev/null`) or a socket.
    NotAFile,
    /// Another process still uses the store through a `-wal` and `-shm` that were deleted or
    /// replaced under it.
    InUseThroughOtherFiles,
}

/// Whether waiting can fix an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Healing {
    /// Retry: it may pass (busy, full disk, timeouts, conflicts, an unreachable cluster).
    Heals,
    /// Stop: it cannot pass without an operator.
    Never(Cause),
}

/// SQLite's extended result code for a write to a database file that was unlinked or renamed
/// (`SQLITE_READONLY_DBMOVED`).
const SQLITE_READONLY_DBMOVED: i32 = 1032;

/// Classifies an error by the first cause in its chain that says anything.
pub(crate) fn classify(e: &(dyn Error + 'static)) -> Healing {
    let mut next: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(open) = err.downcast_ref::<SqliteOpenError>() {
            if let Some(healing) = classify_open(open) {
                return healing;
            }
        }
        if err.downcast_ref::<StoreFileChanged>().is_some() {
            return Healing::Never(Cause::Moved);
        }
        if let Some(sqlite) = err.downcast_ref::<rusqlite::Error>() {
            return classify_sqlite(sqlite);
        }
        next = err.source();
    }
    Healing::Heals
}

/// An open error's class, `None` to look at its source.
fn classify_open(e: &SqliteOpenError) -> Option<Healing> {
    let cause = match e {
        SqliteOpenError::NotADatabase { .. } => Cause::NotADatabase,
        SqliteOpenError::Corrupt { .. } => Cause::Corrupt,
        SqliteOpenError::WrongSchema { .. } => Cause::Foreign,
        SqliteOpenError::UnsupportedSchemaVersion { .. } => Cause::NewerSchema,
        SqliteOpenError::NoWriteAheadLog { .. } => Cause::NoWriteAheadLog,
        SqliteOpenError::NotAFile { .. } => Cause::NotAFile,
        SqliteOpenError::InUseThroughOtherFiles { .. } => Cause::InUseThroughOtherFiles,
        SqliteOpenError::FilesChanged { .. } => Cause::Moved,
        // CannotOpen and Sqlite: SQLite's own code (the source) says which.
        _ => return None,
    };
    Some(Healing::Never(cause))
}

fn classify_sqlite(e: &rusqlite::Error) -> Healing {
    let rusqlite::Error::SqliteFailure(failure, _) = e else {
        return Healing::Heals;
    };
    if failure.extended_code == SQLITE_READONLY_DBMOVED {
        return Healing::Never(Cause::Moved);
    }
    match failure.code {
        ErrorCode::ReadOnly => Healing::Never(Cause::ReadOnly),
        ErrorCode::PermissionDenied | ErrorCode::AuthorizationForStatementDenied => {
            Healing::Never(Cause::PermissionDenied)
        }
        ErrorCode::CannotOpen => Healing::Never(Cause::CannotOpen),
        ErrorCode::NotADatabase => Healing::Never(Cause::NotADatabase),
        ErrorCode::DatabaseCorrupt => Healing::Never(Cause::Corrupt),
        // Busy, locked, full, I/O errors (which a remount or a freed disk can cure), ...
        _ => Healing::Heals,
    }
}

/// What to do about `cause`, for the store at `path`.
pub(crate) fn fix(cause: Cause, path: &Path) -> String {
    let p = path.display();
    match cause {
        Cause::PermissionDenied => format!(
            "this user (uid {}) may not read and write {p}: give it read and write access to \
             the file and its directory (SQLite creates {p}-wal and {p}-shm beside it), or run \
             fdb-leader as the user that owns them",
            nix::unistd::getuid()
        ),
        Cause::ReadOnly => format!(
            "{p} cannot be written (a read-only file, directory or file system, or an immutable \
             file): make it writable for this user, or put the store on a writable local file \
             system"
        ),
        Cause::CannotOpen => format!(
            "{p} cannot be opened: check that its directory exists and this user may create \
             files in it"
        ),
        Cause::NotADatabase => {
            format!("{p} is not a SQLite database: was the path mistyped? (it is left untouched)")
        }
        Cause::Corrupt => format!(
            "{p} is corrupt: stop every fdb-leader using it, then restore it from a backup (a \
             new file would restart ballots at 1)"
        ),
        Cause::Foreign => {
            format!(
                "{p} belongs to another application: choose another path (it is left untouched)"
            )
        }
        Cause::NewerSchema => format!(
            "{p} was written by a newer fdb-leader-election: upgrade this fdb-leader (it is \
             left untouched)"
        ),
        Cause::NoWriteAheadLog => format!(
            "{p} is on a file system without the shared memory SQLite's write-ahead log needs \
             (a network file system?): put the store on a local file system"
        ),
        Cause::Moved => format!(
            "{p}, its -wal or its -shm was deleted or replaced while this process used it: a \
             new file would restart ballots at 1 and defeat fencing (a new -wal lacks the \
             commits still in the old one, a new -shm holds locks that do not exclude this \
             process), so stop every fdb-leader on the old files, then start them again on one \
             store; never delete the -wal or -shm of a store in use"
        ),
        Cause::NotAFile => format!(
            "--sqlite {p}: give --sqlite the path of a store file, or of a new file in a \
             writable local directory"
        ),
        Cause::InUseThroughOtherFiles => format!(
            "the -wal and -shm of {p} were deleted or replaced while that process used them: \
             stop it (an fdb-leader on the old files notices within 50 ms and exits 3 by \
             itself), then start this one again; never delete the -wal or -shm of a store in \
             use"
        ),
    }
}

/// The message for an error that never heals: the error, then the fix.
pub(crate) fn message(e: &(dyn Error + 'static), cause: Cause, path: &Path) -> String {
    format!(
        "the store cannot be used: {} ({})",
        outer_and_root(e),
        fix(cause, path)
    )
}

#[cfg(test)]
mod tests {
    use fdb_leader_election::{ElectionError, TxnError, TxnErrorKind};
    use rusqlite::ffi;

    use super::*;

    fn sqlite(extended: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(extended), None)
    }

    /// A runtime error as the runner sees it: an election error over a transaction error over
    /// SQLite's.
    fn runtime(extended: i32) -> ElectionError {
        ElectionError::Database(TxnError::with_source(TxnErrorKind::Fatal, sqlite(extended)))
    }

    #[test]
    fn what_an_operator_must_fix_never_heals() {
        let cases = [
            (ffi::SQLITE_READONLY, Cause::ReadOnly),
            (ffi::SQLITE_READONLY_DIRECTORY, Cause::ReadOnly),
            (SQLITE_READONLY_DBMOVED, Cause::Moved),
            (ffi::SQLITE_PERM, Cause::PermissionDenied),
            (ffi::SQLITE_CANTOPEN, Cause::CannotOpen),
            (ffi::SQLITE_NOTADB, Cause::NotADatabase),
            (ffi::SQLITE_CORRUPT, Cause::Corrupt),
        ];
        for (code, cause) in cases {
            assert_eq!(
                classify(&runtime(code)),
                Healing::Never(cause),
                "code {code}"
            );
        }
    }

    #[test]
    fn what_passes_by_itself_heals() {
        for code in [
            ffi::SQLITE_BUSY,
            ffi::SQLITE_LOCKED,
            ffi::SQLITE_FULL,
            ffi::SQLITE_IOERR,
            ffi::SQLITE_IOERR_FSYNC,
        ] {
            assert_eq!(classify(&runtime(code)), Healing::Heals, "code {code}");
        }
        assert_eq!(
            classify(&ElectionError::Database(TxnError::new(
                TxnErrorKind::CommitUnknown
            ))),
            Healing::Heals
        );
        assert_eq!(classify(&ElectionError::NotInitialized), Healing::Heals);
    }

    #[test]
    fn files_deleted_under_the_store_never_heal() {
        use fdb_leader_election::sqlite::{FileChange, StoreFile};
        let changed =
            StoreFileChanged::new("/x/e.db-wal", StoreFile::WriteAheadLog, FileChange::Deleted);
        let e = ElectionError::Database(TxnError::with_source(TxnErrorKind::Fatal, changed));
        assert_eq!(classify(&e), Healing::Never(Cause::Moved));
        let split = SqliteOpenError::InUseThroughOtherFiles {
            path: "/x/e.db".into(),
            pid: 7,
        };
        assert_eq!(
            classify(&split),
            Healing::Never(Cause::InUseThroughOtherFiles)
        );
        let device = SqliteOpenError::NotAFile {
            path: "/dev/null".into(),
            file: "/dev/null".into(),
            kind: "a character device",
        };
        assert_eq!(classify(&device), Healing::Never(Cause::NotAFile));
    }

    #[test]
    fn open_errors_are_classified_by_variant_or_sqlite_code() {
        let path = Path::new("/x/e.db");
        let newer = SqliteOpenError::UnsupportedSchemaVersion {
            path: path.into(),
            found: 9,
            supported: 1,
        };
        assert_eq!(classify(&newer), Healing::Never(Cause::NewerSchema));
        let denied = SqliteOpenError::CannotOpen {
            path: path.into(),
            source: Box::new(sqlite(ffi::SQLITE_PERM)),
        };
        assert_eq!(classify(&denied), Healing::Never(Cause::PermissionDenied));
        let busy = SqliteOpenError::Sqlite {
            path: path.into(),
            source: Box::new(sqlite(ffi::SQLITE_BUSY)),
        };
        assert_eq!(classify(&busy), Healing::Heals);
    }

    #[test]
    fn every_fix_names_the_file() {
        let path = Path::new("/srv/jobs/election.db");
        for cause in [
            Cause::PermissionDenied,
            Cause::ReadOnly,
            Cause::CannotOpen,
            Cause::NotADatabase,
            Cause::Corrupt,
            Cause::Foreign,
            Cause::NewerSchema,
            Cause::NoWriteAheadLog,
            Cause::Moved,
            Cause::NotAFile,
            Cause::InUseThroughOtherFiles,
        ] {
            let text = fix(cause, path);
            assert!(text.contains("/srv/jobs/election.db"), "{cause:?}: {text}");
            assert!(text.contains(": "), "{cause:?} gives no fix: {text}");
        }
    }
}
