//! A read-only SQLite handle (`SqliteOptions::read_only`): it reads what writers commit,
//! creates and changes nothing (an adversarial review found files it created), refuses every
//! write, and refuses a file that is no store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "common/sqlite_read_only.rs"]
mod sqlite_read_only_support;

use std::fs;
use std::time::Duration;

use fdb_leader_election::sqlite::{SqliteDb, SqliteOpenError};
use fdb_leader_election::{ElectionTxn, ReadMode, TxnErrorKind};
use sqlite_read_only_support::{file_names, get, put, read_only, store_with};

#[tokio::test]
async fn a_read_only_handle_reads_what_a_writer_commits_and_writes_nothing() {
    let (_dir, path, writer) = store_with(b"1").await;
    let reader = SqliteDb::open_with(&path, read_only()).unwrap();
    assert_eq!(get(&reader, b"k").await.as_deref(), Some(&b"1"[..]));
    // A later commit of the writer is seen, and fires the reader's watch.
    let txn = reader.create_transaction();
    txn.get(b"k", ReadMode::Serializable).await.unwrap();
    let watch = txn.watch(b"k").unwrap();
    txn.commit().await.unwrap();
    put(&writer, b"k", b"2").await;
    tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .expect("the watch fires")
        .unwrap();
    assert_eq!(get(&reader, b"k").await.as_deref(), Some(&b"2"[..]));
    // A write through the reader fails for good, and changes nothing.
    let txn = reader.create_transaction();
    txn.set(b"k", b"3");
    let err = txn.commit().await.unwrap_err();
    assert_eq!(err.kind(), TxnErrorKind::Fatal, "{err}");
    assert_eq!(get(&writer, b"k").await.as_deref(), Some(&b"2"[..]));
}

#[tokio::test]
async fn a_read_only_open_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    // No file: refused, and none is created.
    let err = SqliteDb::open_with(&path, read_only()).unwrap_err();
    assert!(matches!(err, SqliteOpenError::CannotOpen { .. }), "{err:?}");
    assert!(
        file_names(dir.path()).is_empty(),
        "{:?}",
        file_names(dir.path())
    );
    // An empty file (a writer created it and has not written the schema yet): no store in
    // it yet, and it stays empty.
    fs::write(&path, b"").unwrap();
    let err = SqliteDb::open_with(&path, read_only()).unwrap_err();
    assert!(matches!(err, SqliteOpenError::Empty { .. }), "{err:?}");
    assert_eq!(fs::read(&path).unwrap(), b"");
    // A store nobody has open (its -wal and -shm gone with its last writer): read, and
    // the file is left byte for byte.
    fs::remove_file(&path).unwrap();
    {
        let writer = SqliteDb::open(&path).unwrap();
        put(&writer, b"k", b"v").await;
    }
    let before = fs::read(&path).unwrap();
    {
        let reader = SqliteDb::open_with(&path, read_only()).unwrap();
        assert_eq!(get(&reader, b"k").await.as_deref(), Some(&b"v"[..]));
    }
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[tokio::test]
async fn a_read_only_open_refuses_what_is_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (x)").unwrap();
    }
    let err = SqliteDb::open_with(&path, read_only()).unwrap_err();
    assert!(
        matches!(err, SqliteOpenError::WrongSchema { .. }),
        "{err:?}"
    );
    fs::write(
        dir.path().join("text.db"),
        b"not a database, at all, not one bit",
    )
    .unwrap();
    let err = SqliteDb::open_with(dir.path().join("text.db"), read_only()).unwrap_err();
    assert!(
        matches!(err, SqliteOpenError::NotADatabase { .. }),
        "{err:?}"
    );
}

/// A store nobody has open, in a folder this user may write: the read-only handle must not
/// create its `-wal` or `-shm` (docs: "A read-only handle creates nothing").
#[tokio::test]
async fn a_read_only_handle_creates_no_wal_or_shm_beside_a_store_nobody_has_open() {
    let (dir, path, writer) = store_with(b"v").await;
    drop(writer);
    assert_eq!(file_names(dir.path()), ["e.db"]);
    let reader = SqliteDb::open_with(&path, read_only()).unwrap();
    assert_eq!(get(&reader, b"k").await.as_deref(), Some(&b"v"[..]));
    let during = file_names(dir.path());
    drop(reader);
    let after = file_names(dir.path());
    assert_eq!(
        (during, after),
        (vec!["e.db".to_owned()], vec!["e.db".to_owned()]),
        "files beside the store while a read-only handle had it open, and after"
    );
}
