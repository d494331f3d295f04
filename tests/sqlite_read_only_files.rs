//! Found by an adversarial review: read-only SQLite handles
//! (`SqliteOptions::read_only`) must create and change nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "common/sqlite_read_only.rs"]
mod sqlite_read_only_support;

use fdb_leader_election::sqlite::SqliteDb;
use sqlite_read_only_support::{file_names, get, read_only, store_with};

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
