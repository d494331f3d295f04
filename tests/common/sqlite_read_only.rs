//! The set-up of the read-only SQLite tests (tests/sqlite_read_only.rs): read-only options, one committed write, one committed
//! serializable read. Included by path (`#[path = "common/sqlite_read_only.rs"]`).
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

#[path = "files.rs"]
mod files;

use std::path::PathBuf;

use fdb_leader_election::sqlite::{SqliteDb, SqliteOptions};
use fdb_leader_election::{ElectionTxn, ReadMode};
use tempfile::TempDir;

#[allow(unused_imports)]
pub use files::file_names;

/// A store `e.db` in a folder of its own, its key `k` set to `value` by the writer returned.
pub async fn store_with(value: &[u8]) -> (TempDir, PathBuf, SqliteDb) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let writer = SqliteDb::open(&path).unwrap();
    put(&writer, b"k", value).await;
    (dir, path, writer)
}

/// The options of a read-only handle.
pub fn read_only() -> SqliteOptions {
    SqliteOptions::default().with_read_only(true)
}

/// Sets `key` to `value` in one committed transaction.
pub async fn put(db: &SqliteDb, key: &[u8], value: &[u8]) {
    let txn = db.create_transaction();
    txn.set(key, value);
    txn.commit().await.unwrap();
}

/// Reads `key` (serializable) in one committed transaction.
pub async fn get(db: &SqliteDb, key: &[u8]) -> Option<Vec<u8>> {
    let txn = db.create_transaction();
    let value = txn.get(key, ReadMode::Serializable).await.unwrap();
    txn.commit().await.unwrap();
    value
}
