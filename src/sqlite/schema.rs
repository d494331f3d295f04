//! The file format: tables, the `meta` rows, opening and checking a file, and setting up each
//! connection.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::error::{SqliteOpenError, txn_error};
use super::files::{self, StoreFiles};
use super::{Durability, SqliteOptions};
use crate::store::txn::TxnError;

/// The schema (file format) version this build reads and writes, stored in `meta` under
/// `schema`. A file with another version is refused.
pub const SCHEMA_VERSION: i64 = 1;

/// `PRAGMA application_id` of a store file ("FDLE"), so that other tools (`file(1)`) and this
/// crate recognise it.
const APPLICATION_ID: i64 = 0x4644_4C45;

/// The `meta` row holding the latest committed version.
pub(super) const META_VERSION: &str = "version";
/// The `meta` row holding the log floor: the log holds every write of every version above it.
pub(super) const META_LOG_FLOOR: &str = "log_floor";
/// The `meta` row holding the schema version.
const META_SCHEMA: &str = "schema";

const CREATE: &str = "
    CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE kv (
        key BLOB PRIMARY KEY,
        value BLOB NOT NULL,
        version INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE log (
        version INTEGER NOT NULL,
        key BLOB NOT NULL,
        PRIMARY KEY (version, key)
    ) WITHOUT ROWID;
    CREATE INDEX log_by_key ON log (key, version);
";

/// Every statement the store runs, prepared once at open to check the tables and columns.
pub(super) const STATEMENTS: &[&str] = &[
    SELECT_META,
    UPDATE_META,
    SELECT_VALUE,
    SELECT_RANGE,
    UPSERT_VALUE,
    DELETE_VALUE,
    INSERT_LOG,
    PRUNE_LOG,
    LOG_KEYS_SINCE,
    LOG_HAS_KEY_SINCE,
    LOG_HAS_RANGE_SINCE,
];

pub(super) const SELECT_META: &str = "SELECT value FROM meta WHERE name = ?1";
pub(super) const UPDATE_META: &str = "UPDATE meta SET value = ?2 WHERE name = ?1";
pub(super) const SELECT_VALUE: &str = "SELECT value FROM kv WHERE key = ?1";
pub(super) const SELECT_RANGE: &str =
    "SELECT key, value FROM kv WHERE key >= ?1 AND key < ?2 ORDER BY key";
pub(super) const UPSERT_VALUE: &str = "INSERT INTO kv (key, value, version) VALUES (?1, ?2, ?3) \
     ON CONFLICT (key) DO UPDATE SET value = excluded.value, version = excluded.version";
pub(super) const DELETE_VALUE: &str = "DELETE FROM kv WHERE key = ?1";
pub(super) const INSERT_LOG: &str = "INSERT INTO log (version, key) VALUES (?1, ?2)";
pub(super) const PRUNE_LOG: &str = "DELETE FROM log WHERE version <= ?1";
pub(super) const LOG_KEYS_SINCE: &str =
    "SELECT DISTINCT key FROM log WHERE version > ?1 ORDER BY key";
pub(super) const LOG_HAS_KEY_SINCE: &str =
    "SELECT EXISTS (SELECT 1 FROM log WHERE key = ?1 AND version > ?2)";
pub(super) const LOG_HAS_RANGE_SINCE: &str =
    "SELECT EXISTS (SELECT 1 FROM log WHERE key >= ?1 AND key < ?2 AND version > ?3)";

/// How a handle's connections open the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// Read and write (the anchor of a new handle may create the file).
    ReadWrite,
    /// Read only ([`SqliteOptions::read_only`]).
    ReadOnly,
    /// Read only, the file as it stands (SQLite's `immutable`: no locks, no `-shm`), for a
    /// read-only handle that cannot make the `-shm` (see [`SqliteOptions::read_only`]).
    Frozen,
}

/// Opens `path` (creating it if `create`, read-write only) and sets the connection up: busy
/// timeout, durability.
fn connect(
    path: &Path,
    options: &SqliteOptions,
    access: Access,
    create: bool,
) -> rusqlite::Result<Connection> {
    let conn = match access {
        Access::ReadWrite => {
            let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            if create {
                flags |= OpenFlags::SQLITE_OPEN_CREATE;
            }
            Connection::open_with_flags(path, flags)?
        }
        Access::ReadOnly => Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?,
        Access::Frozen => Connection::open_with_flags(
            immutable_uri(path),
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )?,
    };
    conn.busy_timeout(options.busy_timeout)?;
    if access == Access::ReadWrite {
        conn.execute_batch(match options.durability {
            Durability::Full => "PRAGMA synchronous = FULL",
            Durability::Normal => "PRAGMA synchronous = NORMAL",
        })?;
    }
    conn.set_prepared_statement_cache_capacity(STATEMENTS.len().saturating_add(4));
    Ok(conn)
}

/// The URI that opens `path` as it stands (`file:` and the path, percent-encoded, with
/// `immutable=1`).
fn immutable_uri(path: &Path) -> String {
    use std::fmt::Write as _;
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            let _ = write!(uri, "%{b:02X}");
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Another connection to an opened store (for the pool or the watch poller).
pub(super) fn reconnect(
    path: &Path,
    options: &SqliteOptions,
    access: Access,
) -> Result<Connection, TxnError> {
    connect(path, options, access, false).map_err(txn_error)
}

/// What a path names, if it exists and is not a regular file (symbolic links followed).
fn not_regular(path: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(path).ok()?;
    let kind = meta.file_type();
    if kind.is_file() {
        return None;
    }
    if kind.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if kind.is_char_device() {
            return Some("a character device");
        }
        if kind.is_block_device() {
            return Some("a block device");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// Refuses a path (or a `-wal` or `-shm` beside it) that names something other than a
/// regular file, before anything is opened or created.
fn check_regular(path: &Path) -> Result<(), SqliteOpenError> {
    for file in [
        path.to_path_buf(),
        with_suffix(path, "-wal"),
        with_suffix(path, "-shm"),
    ] {
        if let Some(kind) = not_regular(&file) {
            return Err(SqliteOpenError::NotAFile {
                path: path.to_path_buf(),
                file,
                kind,
            });
        }
    }
    Ok(())
}

/// Opens (creating if absent) the store at `path`: checks that the file is empty or ours,
/// then turns write-ahead logging on, records the store's files (see [`StoreFiles`]) and
/// creates or checks the schema. Returns the handle's anchor connection (it has read in WAL
/// mode, so it holds SQLite's shared lock and the `-wal` and `-shm` open) and the files.
pub(super) fn open(
    path: &Path,
    options: &SqliteOptions,
) -> Result<(Connection, StoreFiles, Access), SqliteOpenError> {
    check_regular(path)?;
    if options.read_only {
        return open_read_only(path, options);
    }
    let sqlite = |e| SqliteOpenError::from_sqlite(path, e);
    let conn = connect(path, options, Access::ReadWrite, true).map_err(sqlite)?;
    let patience = options.busy_timeout;
    // Read-only first: a file that is not a database fails here, and another application's
    // database is refused before anything (its journal mode included) is changed.
    let (objects, application_id) = retry_busy(patience, || header(&conn)).map_err(sqlite)?;
    if application_id != APPLICATION_ID && (objects != 0 || application_id != 0) {
        return Err(SqliteOpenError::WrongSchema {
            path: path.to_path_buf(),
            reason: format!("application id {application_id:#x}, expected {APPLICATION_ID:#x}"),
        });
    }
    let mode: String = retry_busy(patience, || {
        conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
    })
    .map_err(sqlite)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(SqliteOpenError::NoWriteAheadLog {
            path: path.to_path_buf(),
            mode,
        });
    }
    // A read in WAL mode: from here on this connection holds its shared lock on the file and
    // has the -wal and -shm open, until the handle drops. Then the files are recorded, and a
    // process still using older files at these paths is looked for, before anything is
    // written.
    retry_busy(patience, || header(&conn)).map_err(sqlite)?;
    let files =
        StoreFiles::record(path, &conn).map_err(|source| SqliteOpenError::FilesChanged {
            path: path.to_path_buf(),
            source,
        })?;
    if let Some(pid) = files.user_of_other_files() {
        return Err(SqliteOpenError::InUseThroughOtherFiles {
            path: path.to_path_buf(),
            pid,
        });
    }
    retry_busy(patience, || conn.execute_batch("BEGIN IMMEDIATE")).map_err(sqlite)?;
    let checked = create_or_check(&conn, path);
    let end = match &checked {
        Ok(()) => conn.execute_batch("COMMIT"),
        Err(_) => conn.execute_batch("ROLLBACK"),
    };
    checked?;
    end.map_err(sqlite)?;
    Ok((conn, files, Access::ReadWrite))
}

/// Opens the existing store at `path` to read it only ([`SqliteOptions::read_only`]):
/// creates and changes nothing; checks that it is an election store of this schema.
fn open_read_only(
    path: &Path,
    options: &SqliteOptions,
) -> Result<(Connection, StoreFiles, Access), SqliteOpenError> {
    let sqlite = |e| SqliteOpenError::from_sqlite(path, e);
    let patience = options.busy_timeout;
    // Taken first: a write after it fails a frozen handle's reads (StoreFiles::check).
    let at_open = files::stamp(path);
    if at_open.is_some_and(|s| s.is_empty()) {
        return Err(SqliteOpenError::Empty {
            path: path.to_path_buf(),
        });
    }
    // With no `-wal` beside the file no writer is at work (one keeps its `-wal` there from
    // its first read to its last close), so the file is the whole store: it is read as it
    // stands, which creates no `-wal` or `-shm` (SQLite would, for a reader, and leave them,
    // owned by this user). A writer that starts later shows, by its `-wal` or by writing the
    // file, and fails the handle (see `StoreFiles`). With a `-wal`, the store is read as a
    // writer's peer, its `-shm` shared.
    let mut access = if with_suffix(path, "-wal").exists() {
        Access::ReadOnly
    } else {
        Access::Frozen
    };
    let mut conn = connect(path, options, access, false).map_err(sqlite)?;
    let read = match retry_busy(patience, || header(&conn)) {
        // The writer left meanwhile, taking its `-wal` and `-shm` along, and SQLite cannot
        // make the `-shm` (a folder this user may not write): read the file as it stands.
        Err(e) if cannot_share(&e) && !with_suffix(path, "-wal").exists() => {
            access = Access::Frozen;
            conn = connect(path, options, access, false).map_err(sqlite)?;
            retry_busy(patience, || header(&conn))
        }
        read => read,
    };
    let (objects, application_id) = read.map_err(sqlite)?;
    if objects == 0 && application_id == 0 {
        return Err(SqliteOpenError::Empty {
            path: path.to_path_buf(),
        });
    }
    if objects == 0 {
        return Err(SqliteOpenError::WrongSchema {
            path: path.to_path_buf(),
            reason: format!("empty, but marked with another application id ({application_id:#x})"),
        });
    }
    let frozen = at_open.filter(|_| access == Access::Frozen);
    let files = StoreFiles::record_read_only(path, &conn, frozen).map_err(|source| {
        SqliteOpenError::FilesChanged {
            path: path.to_path_buf(),
            source,
        }
    })?;
    retry_busy(patience, || conn.execute_batch("BEGIN")).map_err(sqlite)?;
    let checked = check_schema(&conn, path, application_id);
    let end = conn.execute_batch("ROLLBACK");
    checked?;
    end.map_err(sqlite)?;
    Ok((conn, files, access))
}

/// Whether SQLite failed for want of the `-shm`: a read-only connection to a file in
/// write-ahead-log mode whose `-shm` it may not create.
fn cannot_share(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
    )
}

/// `path` with `suffix` appended to its last component.
fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    std::path::PathBuf::from(name)
}

/// How many schema objects the file holds, and its application id.
fn header(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    let objects = conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))?;
    let application_id = conn.query_row("PRAGMA application_id", [], |row| row.get(0))?;
    Ok((objects, application_id))
}

/// Runs `op` again while SQLite reports the file busy or locked, backing off from 1 ms to
/// 50 ms, for at most about `patience` in all. Needed while several processes create the same
/// new file at once: switching the journal mode can report `SQLITE_BUSY` without consulting
/// the busy handler. The time is counted from the sleeps themselves, not read from a clock.
fn retry_busy<T>(
    patience: Duration,
    mut op: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let mut delay = Duration::from_millis(1);
    let mut waited = Duration::ZERO;
    loop {
        match op() {
            Err(e) if is_busy(&e) && waited < patience => {
                std::thread::sleep(delay);
                waited = waited.saturating_add(delay);
                delay = delay.saturating_mul(2).min(Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Inside a write transaction: creates the schema in an empty database, or checks an existing
/// one.
fn create_or_check(conn: &Connection, path: &Path) -> Result<(), SqliteOpenError> {
    let sqlite = |e| SqliteOpenError::from_sqlite(path, e);
    let wrong = |reason: String| SqliteOpenError::WrongSchema {
        path: path.to_path_buf(),
        reason,
    };
    let objects: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))
        .map_err(sqlite)?;
    let application_id: i64 = conn
        .query_row("PRAGMA application_id", [], |row| row.get(0))
        .map_err(sqlite)?;
    if objects == 0 {
        if application_id != 0 {
            return Err(wrong(format!(
                "empty, but marked with another application id ({application_id:#x})"
            )));
        }
        conn.execute_batch(CREATE).map_err(sqlite)?;
        conn.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))
            .map_err(sqlite)?;
        let mut insert = conn
            .prepare("INSERT INTO meta (name, value) VALUES (?1, ?2)")
            .map_err(sqlite)?;
        for (name, value) in [
            (META_SCHEMA, SCHEMA_VERSION),
            (META_VERSION, 0),
            (META_LOG_FLOOR, 0),
        ] {
            insert.execute((name, value)).map_err(sqlite)?;
        }
        return Ok(());
    }
    check_schema(conn, path, application_id)
}

/// Checks the schema of an existing store (not empty), whose `application_id` was read in
/// the same transaction.
fn check_schema(
    conn: &Connection,
    path: &Path,
    application_id: i64,
) -> Result<(), SqliteOpenError> {
    let sqlite = |e| SqliteOpenError::from_sqlite(path, e);
    let wrong = |reason: String| SqliteOpenError::WrongSchema {
        path: path.to_path_buf(),
        reason,
    };
    if application_id != APPLICATION_ID {
        return Err(wrong(format!(
            "application id {application_id:#x}, expected {APPLICATION_ID:#x}"
        )));
    }
    let has_meta: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta')",
            [],
            |row| row.get(0),
        )
        .map_err(sqlite)?;
    if !has_meta {
        return Err(wrong("no meta table".to_owned()));
    }
    let meta = |name: &str| -> Result<Option<i64>, SqliteOpenError> {
        conn.query_row(SELECT_META, [name], |row| row.get::<_, i64>(0))
            .optional()
            .map_err(|e| match e {
                rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::FromSqlConversionFailure(..) => {
                    wrong(format!("meta row {name:?} is not an integer"))
                }
                e => sqlite(e),
            })
    };
    match meta(META_SCHEMA)? {
        None => return Err(wrong("no schema version in meta".to_owned())),
        Some(SCHEMA_VERSION) => {}
        Some(found) => {
            return Err(SqliteOpenError::UnsupportedSchemaVersion {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
    }
    for name in [META_VERSION, META_LOG_FLOOR] {
        match meta(name)? {
            Some(v) if v >= 0 => {}
            Some(v) => return Err(wrong(format!("meta row {name:?} is negative ({v})"))),
            None => return Err(wrong(format!("no meta row {name:?}"))),
        }
    }
    // Preparing every statement checks the tables and columns they use.
    for sql in STATEMENTS {
        if let Err(e) = conn.prepare(sql) {
            return Err(match e.sqlite_error_code() {
                // "no such table" / "no such column" are plain SQLITE_ERROR.
                Some(rusqlite::ErrorCode::Unknown) | None => wrong(format!("{e} (in `{sql}`)")),
                _ => sqlite(e),
            });
        }
    }
    Ok(())
}
