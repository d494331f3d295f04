//! Found by an adversarial review: read-only SQLite handles
//! (`SqliteOptions::read_only`) must create and change nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::Path;

use fdb_leader_election::sqlite::{SqliteDb, SqliteOptions};
use fdb_leader_election::{ElectionTxn, ReadMode};

fn read_only() -> SqliteOptions {
    SqliteOptions::default().with_read_only(true)
}

async fn put(db: &SqliteDb, key: &[u8], value: &[u8]) {
    let txn = db.create_transaction();
    txn.set(key, value);
    txn.commit().await.unwrap();
}

async fn get(db: &SqliteDb, key: &[u8]) -> Option<Vec<u8>> {
    let txn = db.create_transaction();
    let value = txn.get(key, ReadMode::Serializable).await.unwrap();
    txn.commit().await.unwrap();
    value
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A store nobody has open, in a folder this user may write: the read-only handle must not
/// create its `-wal` or `-shm` (docs: "A read-only handle creates nothing").
#[tokio::test]
async fn a_read_only_handle_creates_no_wal_or_shm_beside_a_store_nobody_has_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    {
        let writer = SqliteDb::open(&path).unwrap();
        put(&writer, b"k", b"v").await;
    }
    assert_eq!(names(dir.path()), ["e.db"]);
    let reader = SqliteDb::open_with(&path, read_only()).unwrap();
    assert_eq!(get(&reader, b"k").await.as_deref(), Some(&b"v"[..]));
    let during = names(dir.path());
    drop(reader);
    let after = names(dir.path());
    assert_eq!(
        (during, after),
        (vec!["e.db".to_owned()], vec!["e.db".to_owned()]),
        "files beside the store while a read-only handle had it open, and after"
    );
}
