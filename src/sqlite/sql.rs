//! The SQL of a transaction: reads at its snapshot, and a commit's conflict check and writes
//! under the write lock.

use rusqlite::{Connection, OptionalExtension};

use super::error::{commit_unknown, files_changed, log_pruned, malformed, txn_error};
use super::files::StoreFiles;
use super::schema::{
    DELETE_VALUE, INSERT_LOG, LOG_HAS_KEY_SINCE, LOG_HAS_RANGE_SINCE, LOG_KEYS_SINCE,
    META_LOG_FLOOR, META_VERSION, PRUNE_LOG, SELECT_META, SELECT_RANGE, SELECT_VALUE, UPDATE_META,
    UPSERT_VALUE,
};
use crate::store::buffer::conflicts::{ReadConflicts, Writes};
use crate::store::errors;
use crate::store::txn::{KeyValue, TxnError, TxnErrorKind};

/// Up to this many versions between the read version and the commit, the conflict check reads
/// every key written since (one scan of the log by version) and intersects them with the
/// read-conflict set in memory; beyond, it asks the log's key index once per conflict key or
/// range.
const SCAN_VERSIONS: u64 = 256;

pub(super) fn to_sql_version(version: u64) -> Result<i64, TxnError> {
    i64::try_from(version).map_err(|_| errors::versions_exhausted())
}

/// A `meta` row: a version or the log floor.
pub(super) fn meta(conn: &Connection, name: &str) -> Result<u64, TxnError> {
    let value: Option<i64> = conn
        .prepare_cached(SELECT_META)
        .and_then(|mut stmt| stmt.query_row([name], |row| row.get(0)).optional())
        .map_err(txn_error)?;
    let value = value.ok_or_else(|| malformed(&format!("no meta row {name:?}")))?;
    u64::try_from(value).map_err(|_| malformed(&format!("meta row {name:?} is {value}")))
}

pub(super) fn set_meta(conn: &Connection, name: &str, value: u64) -> Result<(), TxnError> {
    let value = to_sql_version(value)?;
    conn.prepare_cached(UPDATE_META)
        .and_then(|mut stmt| stmt.execute((name, value)))
        .map_err(txn_error)?;
    Ok(())
}

/// `key`'s value as the connection sees it (its snapshot, or the latest commit outside one).
pub(super) fn read_value(conn: &Connection, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
    conn.prepare_cached(SELECT_VALUE)
        .and_then(|mut stmt| stmt.query_row([key], |row| row.get(0)).optional())
        .map_err(txn_error)
}

pub(super) fn read_range(
    conn: &Connection,
    begin: &[u8],
    end: &[u8],
) -> Result<Vec<KeyValue>, TxnError> {
    let mut stmt = conn.prepare_cached(SELECT_RANGE).map_err(txn_error)?;
    let rows = stmt
        .query_map([begin, end], |row| Ok((row.get(0)?, row.get(1)?)))
        .map_err(txn_error)?;
    rows.collect::<Result<Vec<KeyValue>, _>>()
        .map_err(txn_error)
}

/// The write commit, blocking: ends the snapshot, takes the write lock, checks that the
/// store's files are still this handle's ([the rule](super::files)), checks for conflicts,
/// applies, commits. Returns the new version.
pub(super) fn commit_locked(
    conn: &Connection,
    files: &StoreFiles,
    read_version: Option<u64>,
    writes: &Writes,
    conflicts: &ReadConflicts,
    retention: u64,
    too_old: impl FnOnce() -> bool,
) -> Result<u64, TxnError> {
    if !conn.is_autocommit() {
        // The read snapshot; nothing was written in it.
        conn.execute_batch("ROLLBACK").map_err(txn_error)?;
    }
    // Waits up to the busy timeout for another writer; SQLITE_BUSY then (Unavailable).
    conn.execute_batch("BEGIN IMMEDIATE").map_err(txn_error)?;
    let applied = if too_old() {
        Err(errors::too_old())
    } else if let Err(changed) = files.check() {
        Err(files_changed(changed))
    } else {
        apply(conn, read_version, writes, conflicts, retention)
    };
    match applied {
        Ok(version) => match conn.execute_batch("COMMIT") {
            Ok(()) => Ok(version),
            // Still in the transaction: it did not commit.
            Err(e) if !conn.is_autocommit() => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(txn_error(e))
            }
            Err(e) => Err(commit_unknown(e)),
        },
        Err(e) => {
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            Err(e)
        }
    }
}

/// Under the write lock: the conflict check, then the writes, the log and the version.
pub(super) fn apply(
    conn: &Connection,
    read_version: Option<u64>,
    writes: &Writes,
    conflicts: &ReadConflicts,
    retention: u64,
) -> Result<u64, TxnError> {
    let current = meta(conn, META_VERSION)?;
    let floor = meta(conn, META_LOG_FLOOR)?;
    // A transaction that never read takes its read version now: nothing can conflict.
    let read_version = read_version.unwrap_or(current);
    if read_version < floor {
        return Err(log_pruned(read_version, floor));
    }
    if read_version > current {
        // Only if the file was replaced by an older copy while the transaction ran.
        return Err(TxnError::with_source(
            TxnErrorKind::TooOld,
            format!("the store's version went back from {read_version} to {current}"),
        )
        .with_code(1007));
    }
    if changed_since(conn, read_version, current, conflicts)? {
        return Err(errors::conflict());
    }
    let version = current
        .checked_add(1)
        .ok_or_else(errors::versions_exhausted)?;
    let sql_version = to_sql_version(version)?;
    {
        let mut upsert = conn.prepare_cached(UPSERT_VALUE).map_err(txn_error)?;
        let mut delete = conn.prepare_cached(DELETE_VALUE).map_err(txn_error)?;
        let mut log = conn.prepare_cached(INSERT_LOG).map_err(txn_error)?;
        for (key, value) in writes {
            match value {
                Some(value) => upsert.execute((key, value, sql_version)),
                None => delete.execute([key]),
            }
            .map_err(txn_error)?;
            log.execute((sql_version, key)).map_err(txn_error)?;
        }
    }
    set_meta(conn, META_VERSION, version)?;
    // Keep the writes of the last `retention` versions: transactions reading at or after the
    // new floor can still be checked; older ones get `transaction_too_old`.
    let new_floor = version.saturating_sub(retention);
    if new_floor > floor {
        conn.prepare_cached(PRUNE_LOG)
            .and_then(|mut stmt| stmt.execute([to_sql_version(new_floor).unwrap_or(i64::MAX)]))
            .map_err(txn_error)?;
        set_meta(conn, META_LOG_FLOOR, new_floor)?;
    }
    Ok(version)
}

/// Whether a commit after `read_version` (up to `current`) wrote a key in `conflicts`.
pub(super) fn changed_since(
    conn: &Connection,
    read_version: u64,
    current: u64,
    conflicts: &ReadConflicts,
) -> Result<bool, TxnError> {
    if conflicts.is_empty() || read_version >= current {
        return Ok(false);
    }
    let since = to_sql_version(read_version)?;
    if current.saturating_sub(read_version) <= SCAN_VERSIONS {
        let mut stmt = conn.prepare_cached(LOG_KEYS_SINCE).map_err(txn_error)?;
        let written = stmt
            .query_map([since], |row| row.get::<_, Vec<u8>>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(txn_error)?;
        // Sorted by SQLite's BLOB order (memcmp, then length): Rust's order of byte strings.
        return Ok(conflicts.intersects(&written));
    }
    let mut point = conn.prepare_cached(LOG_HAS_KEY_SINCE).map_err(txn_error)?;
    for key in conflicts.points() {
        let hit: bool = point
            .query_row((key, since), |row| row.get(0))
            .map_err(txn_error)?;
        if hit {
            return Ok(true);
        }
    }
    let mut range = conn
        .prepare_cached(LOG_HAS_RANGE_SINCE)
        .map_err(txn_error)?;
    for (begin, end) in conflicts.ranges() {
        let hit: bool = range
            .query_row((begin, end, since), |row| row.get(0))
            .map_err(txn_error)?;
        if hit {
            return Ok(true);
        }
    }
    Ok(false)
}
