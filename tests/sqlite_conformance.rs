//! The SQLite store (feature `sqlite`): the transaction conformance suite MemDb passes (on one
//! handle, and alternating between two handles on one file as two processes would), the
//! election scenarios, and SQLite-only tests: files that are not stores, the write lock, age,
//! log pruning, watches across handles, serializability under concurrency.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::backends::{POLL, SqliteBackend};
use common::conformance;
use common::scenarios;
use fdb_leader_election::sqlite::{
    Durability, FileChange, SCHEMA_VERSION, SqliteDb, SqliteOpenError, SqliteOptions, StoreFile,
    StoreFileChanged,
};
use fdb_leader_election::{
    Candidate, ElectionConfig, ElectionTxn, LeaderElection, ManualClock, ReadMode, RunOptions,
    TxnError, TxnErrorKind,
};
use foundationdb_tuple::Subspace;
use tempfile::TempDir;
use txn::in_txn;

fn options() -> SqliteOptions {
    SqliteOptions::default().with_watch_poll_interval(POLL)
}

/// Runs `sql` on a connection of its own to the store at `path`, as another program would:
/// it bypasses every invariant of the store (to plant a foreign schema, say).
fn sql(path: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute_batch(sql).unwrap();
}

/// The first column of the first row of `query` on the store at `path`, read on a connection
/// of its own.
fn query_i64(path: &Path, query: &str) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.query_row(query, [], |row| row.get(0)).unwrap()
}

/// Takes SQLite's write lock on a connection of its own to the store at `path` and holds it
/// until the connection is dropped, as another process committing slowly would.
fn hold_write_lock(path: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

/// A store in a fresh temporary directory (removed when the `TempDir` drops).
fn temp_store(options: SqliteOptions) -> (TempDir, PathBuf, SqliteDb) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("election.db");
    let db = SqliteDb::open_with(&path, options).unwrap();
    (dir, path, db)
}

// ---------------------------------------------------------------------------------------------
// The conformance suite.

macro_rules! conformance_tests {
    ($($check:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $check() {
                conformance::$check(&SqliteBackend::with_handles(1)).await;
            }
        )*
    };
}

conformance::with_checks!(conformance_tests);

#[tokio::test]
async fn run_all_on_one_shared_database() {
    conformance::run_all(&SqliteBackend::with_handles(1)).await;
}

/// Every check again, each transaction on the next of three handles on one file: what one
/// process commits, another sees and conflicts with (watches included).
#[tokio::test]
async fn run_all_across_three_handles_on_one_file() {
    conformance::run_all(&SqliteBackend::with_handles(3)).await;
}

// ---------------------------------------------------------------------------------------------
// The election scenarios.

/// The scenario backend: each operation runs in a retried transaction on the next of two
/// handles on one file.
struct Election {
    _dir: TempDir,
    handles: [SqliteDb; 2],
    next: AtomicU64,
    election: LeaderElection,
}

impl Election {
    fn new() -> Self {
        let (dir, path, first) = temp_store(options());
        let second = SqliteDb::open_with(&path, options()).unwrap();
        Election {
            _dir: dir,
            handles: [first, second],
            next: AtomicU64::new(0),
            election: LeaderElection::new(Subspace::from("election")),
        }
    }

    fn db(&self) -> &SqliteDb {
        let n = self.next.fetch_add(1, Ordering::Relaxed) as usize;
        &self.handles[n % 2]
    }
}

scenarios::run_loop_backend!(Election, db());

macro_rules! scenario {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                scenarios::$name(&Election::new()).await;
            }
        )*
    };
}

scenarios::every_scenario!(scenario);

// ---------------------------------------------------------------------------------------------
// SQLite only.

async fn put(db: &SqliteDb, key: &[u8], value: &[u8]) {
    let t = db.create_transaction();
    t.set(key, value);
    t.commit().await.unwrap();
}

async fn read(db: &SqliteDb, key: &[u8]) -> Option<Vec<u8>> {
    db.create_transaction()
        .get(key, ReadMode::Snapshot)
        .await
        .unwrap()
}

#[track_caller]
fn assert_kind(e: &TxnError, kind: TxnErrorKind, code: Option<i32>) {
    assert_eq!((e.kind(), e.code()), (kind, code), "{e}");
}

fn open_err(path: &Path) -> SqliteOpenError {
    match SqliteDb::open(path) {
        Ok(db) => panic!("opened {}: {db:?}", path.display()),
        Err(e) => e,
    }
}

#[tokio::test]
async fn a_new_file_gets_the_schema_and_reopens_with_its_data() {
    let (dir, path, db) = temp_store(options());
    assert_eq!(db.committed_version().unwrap(), 0);
    assert_eq!(
        query_i64(&path, "SELECT value FROM meta WHERE name = 'schema'"),
        SCHEMA_VERSION
    );
    put(&db, b"k", b"v").await;
    drop(db);
    let again = SqliteDb::open(&path).unwrap();
    assert_eq!(read(&again, b"k").await, Some(b"v".to_vec()));
    assert_eq!(again.committed_version().unwrap(), 1);
    assert_eq!(again.path(), path.as_path());
    // An empty file is an empty database: it gets the schema too.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let db = SqliteDb::open(&empty).unwrap();
    assert_eq!(db.committed_version().unwrap(), 0);
}

/// Processes starting together on a new file: one creates the schema, the others wait for its
/// lock and find it.
#[test]
fn concurrent_opens_of_a_new_file_agree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (path, barrier) = (path.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                SqliteDb::open(&path).map(|db| db.committed_version())
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().unwrap().unwrap(), 0);
    }
}

#[tokio::test]
async fn two_handles_see_each_other_and_conflict() {
    let (_dir, path, a) = temp_store(options());
    let b = SqliteDb::open_with(&path, options()).unwrap();

    put(&a, b"k", b"from a").await;
    assert_eq!(read(&b, b"k").await, Some(b"from a".to_vec()));
    assert_eq!(b.committed_version().unwrap(), 1);

    // b reads k; a changes it; b's commit conflicts and applies nothing.
    let tb = b.create_transaction();
    assert_eq!(
        tb.get(b"k", ReadMode::Serializable).await.unwrap(),
        Some(b"from a".to_vec())
    );
    assert_eq!(tb.read_version(), Some(1));
    put(&a, b"k", b"again from a").await;
    // b's snapshot still shows the old value.
    assert_eq!(
        tb.get(b"k", ReadMode::Snapshot).await.unwrap(),
        Some(b"from a".to_vec())
    );
    tb.set(b"out", b"b");
    let e = tb.commit().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::Conflict, Some(1020));
    assert_eq!(read(&a, b"out").await, None);
    assert_eq!(b.stats().conflicts, 1);
    assert_eq!(a.stats().conflicts, 0);

    // The other way round, through the retry loop: b's retry sees a's write.
    let attempts = AtomicU64::new(0);
    let seen = b
        .run(|txn, _| {
            let n = attempts.fetch_add(1, Ordering::SeqCst);
            let a = a.clone();
            async move {
                let v = txn.get(b"k", ReadMode::Serializable).await?;
                if n == 0 {
                    put(&a, b"k", b"raced").await;
                }
                txn.set(b"out", b"b");
                Ok::<_, TxnError>(v)
            }
        })
        .await
        .unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(seen, Some(b"raced".to_vec()));
    assert_eq!(read(&a, b"out").await, Some(b"b".to_vec()));
}

#[tokio::test]
async fn random_bytes_are_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.db");
    let mut bytes = Vec::with_capacity(8192);
    let mut x: u32 = 0x1234_5678;
    for _ in 0..8192 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        bytes.push(x as u8);
    }
    std::fs::write(&path, &bytes).unwrap();
    let e = open_err(&path);
    assert!(matches!(e, SqliteOpenError::NotADatabase { .. }), "{e:?}");
    assert_eq!(e.path(), path.as_path());
    assert!(e.to_string().contains("not a SQLite database"), "{e}");
    assert!(std::error::Error::source(&e).is_some());
    // Untouched.
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

/// A store with `n` values of 500 bytes, checkpointed into the main file, closed. Returns its
/// bytes.
async fn checkpointed_store(path: &Path, n: u32) -> Vec<u8> {
    let db = SqliteDb::open_with(path, options().with_durability(Durability::Normal)).unwrap();
    for i in 0..n {
        put(&db, format!("key{i:04}").as_bytes(), &[7; 500]).await;
    }
    sql(path, "PRAGMA wal_checkpoint(TRUNCATE)");
    drop(db);
    std::fs::read(path).unwrap()
}

fn scribble(bytes: &mut [u8], from: usize) {
    for (i, b) in bytes.iter_mut().enumerate().skip(from) {
        *b = (i * 31 % 251) as u8;
    }
}

#[tokio::test]
async fn a_damaged_store_is_refused_or_fails_reads_never_panics() {
    let dir = tempfile::tempdir().unwrap();

    // Everything after the first page overwritten: the tables' pages are garbage.
    let path = dir.path().join("scribbled.db");
    let mut bytes = checkpointed_store(&path, 200).await;
    scribble(&mut bytes, 4096);
    std::fs::write(&path, &bytes).unwrap();
    let e = open_err(&path);
    assert!(matches!(e, SqliteOpenError::Corrupt { .. }), "{e:?}");
    assert!(e.to_string().contains("corrupt"), "{e}");

    // Only the data pages at the end overwritten: the store opens (the schema is intact) and
    // reading the damaged part fails with a fatal error.
    let path = dir.path().join("tail.db");
    let mut bytes = checkpointed_store(&path, 400).await;
    let half = bytes.len() / 2;
    scribble(&mut bytes, half);
    std::fs::write(&path, &bytes).unwrap();
    let db = SqliteDb::open(&path).unwrap();
    let t = db.create_transaction();
    let e = t
        .get_range(b"", b"\xff", ReadMode::Snapshot)
        .await
        .expect_err("read a damaged file");
    assert_kind(&e, TxnErrorKind::Fatal, None);
    assert!(
        std::error::Error::source(&e)
            .unwrap()
            .to_string()
            .contains("malformed"),
        "{e:?}"
    );
    drop(t);
    // A write that touches the damaged pages fails too, without panicking.
    let t = db.create_transaction();
    for i in 0..400_u32 {
        t.set(format!("key{i:04}").as_bytes(), b"new");
    }
    assert!(t.commit().await.is_err());
}

#[tokio::test]
async fn missing_or_unusable_directories_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_err(&dir.path().join("no/such/dir/election.db"));
    assert!(matches!(e, SqliteOpenError::CannotOpen { .. }), "{e:?}");
    assert!(e.to_string().contains("cannot open"), "{e}");

    // A path through a regular file.
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let e = open_err(&file.join("election.db"));
    assert!(matches!(e, SqliteOpenError::CannotOpen { .. }), "{e:?}");

    // A directory: not a regular file (see `paths_that_are_not_regular_files_are_refused`).
    let e = open_err(dir.path());
    assert!(matches!(e, SqliteOpenError::NotAFile { .. }), "{e:?}");

    // A read-only directory (unless running as root, who may write anyway).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let ro = dir.path().join("read-only");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o500)).unwrap();
        let probe = ro.join("probe");
        if std::fs::write(&probe, b"").is_ok() {
            eprintln!("skipped the read-only directory check: running with root's rights");
        } else {
            let e = open_err(&ro.join("election.db"));
            assert!(matches!(e, SqliteOpenError::CannotOpen { .. }), "{e:?}");
        }
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}

#[tokio::test]
async fn unknown_schema_versions_and_foreign_databases_are_refused() {
    let (_dir, path, db) = temp_store(options());
    put(&db, b"k", b"v").await;

    sql(&path, "UPDATE meta SET value = 99 WHERE name = 'schema'");
    let e = open_err(&path);
    match &e {
        SqliteOpenError::UnsupportedSchemaVersion {
            found, supported, ..
        } => assert_eq!((*found, *supported), (99, SCHEMA_VERSION)),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("schema version 99"), "{e}");
    // Refusing leaves the file as it was.
    assert!(matches!(
        open_err(&path),
        SqliteOpenError::UnsupportedSchemaVersion { found: 99, .. }
    ));

    sql(&path, "DELETE FROM meta WHERE name = 'schema'");
    assert!(matches!(
        open_err(&path),
        SqliteOpenError::WrongSchema { .. }
    ));

    sql(
        &path,
        &format!(
            "INSERT INTO meta VALUES ('schema', {SCHEMA_VERSION}); \
             DROP TABLE log; CREATE TABLE log (something_else INTEGER)"
        ),
    );
    let e = open_err(&path);
    assert!(matches!(e, SqliteOpenError::WrongSchema { .. }), "{e:?}");
    assert!(e.to_string().contains("column named version"), "{e}");

    sql(&path, "DROP TABLE meta");
    let e = open_err(&path);
    assert!(matches!(e, SqliteOpenError::WrongSchema { .. }), "{e:?}");
    assert!(e.to_string().contains("no meta table"), "{e}");

    // Another application's database.
    sql(&path, "PRAGMA application_id = 42");
    let e = open_err(&path);
    assert!(e.to_string().contains("application id 0x2a"), "{e}");
}

#[tokio::test]
async fn too_old_after_five_seconds_by_the_injected_clock() {
    let clock = ManualClock::new();
    let (_dir, _path, db) = temp_store(options().with_clock(Arc::new(clock.clone())));
    put(&db, b"k", b"v").await;

    let t = db.create_transaction();
    t.get(b"k", ReadMode::Serializable).await.unwrap();
    t.set(b"k", b"w");
    clock.advance(Duration::from_millis(4_999));
    t.get(b"j", ReadMode::Snapshot).await.unwrap();
    clock.advance(Duration::from_millis(1));
    assert_kind(
        &t.get(b"j", ReadMode::Snapshot).await.unwrap_err(),
        TxnErrorKind::TooOld,
        Some(1007),
    );
    // Its own write is served from its writes, at any age (as on FoundationDB).
    assert_eq!(
        t.get(b"k", ReadMode::Snapshot).await.unwrap().as_deref(),
        Some(&b"w"[..])
    );
    assert_kind(
        &t.get_range(b"a", b"z", ReadMode::Snapshot)
            .await
            .unwrap_err(),
        TxnErrorKind::TooOld,
        Some(1007),
    );
    assert_kind(
        &t.watch(b"j").unwrap().await.unwrap_err(),
        TxnErrorKind::TooOld,
        Some(1007),
    );
    let e = t.commit().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::TooOld, Some(1007));
    assert!(e.is_retryable());
    assert_eq!(read(&db, b"k").await, Some(b"v".to_vec()));

    // A read-only transaction's reads are too old as well. Its commit is not (FoundationDB
    // never sends it to the cluster) unless one of its reads failed: then, as on
    // FoundationDB, it fails with that error. A fresh one is fine.
    let t = db.create_transaction();
    t.get(b"k", ReadMode::Snapshot).await.unwrap();
    let untouched = db.create_transaction();
    untouched.get(b"k", ReadMode::Snapshot).await.unwrap();
    clock.advance(Duration::from_secs(6));
    assert_kind(
        &t.get(b"k", ReadMode::Snapshot).await.unwrap_err(),
        TxnErrorKind::TooOld,
        Some(1007),
    );
    assert_kind(
        &t.commit().await.unwrap_err(),
        TxnErrorKind::TooOld,
        Some(1007),
    );
    untouched.commit().await.unwrap();
    put(&db, b"k", b"fresh").await;
}

#[tokio::test]
async fn pruning_the_log_never_loses_a_conflict() {
    let (_dir, path, db) = temp_store(
        options()
            .with_log_retention(2)
            .with_durability(Durability::Normal),
    );
    let other = SqliteDb::open_with(&path, options().with_log_retention(2)).unwrap();
    put(&db, b"k", b"0").await; // version 1

    // Within the retention: the conflict is found.
    let t = db.create_transaction();
    t.get(b"k", ReadMode::Serializable).await.unwrap(); // read version 1
    put(&other, b"k", b"1").await; // version 2
    put(&other, b"x", b"1").await; // version 3: the log keeps versions 2 and 3
    t.set(b"out", b"t");
    assert_kind(
        &t.commit().await.unwrap_err(),
        TxnErrorKind::Conflict,
        Some(1020),
    );

    // Past the retention: the write that conflicts has left the log, so the stale
    // transaction gets `transaction_too_old`, never a silent success.
    let t = db.create_transaction();
    t.get(b"k", ReadMode::Serializable).await.unwrap(); // read version 3
    put(&other, b"k", b"2").await; // version 4
    put(&other, b"x", b"2").await; // version 5
    put(&other, b"x", b"3").await; // version 6: the log keeps 5 and 6 only
    t.set(b"out", b"t");
    let e = t.commit().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::TooOld, Some(1007));
    assert!(e.to_string().contains("too old"), "{e}");
    assert!(
        std::error::Error::source(&e)
            .unwrap()
            .to_string()
            .contains("pruned"),
        "{e:?}"
    );
    assert_eq!(read(&db, b"out").await, None);

    // The log holds the last two versions' keys only, and the floor says so.
    assert_eq!(query_i64(&path, "SELECT count(*) FROM log"), 2);
    assert_eq!(query_i64(&path, "SELECT min(version) FROM log"), 5);
    assert_eq!(
        query_i64(&path, "SELECT value FROM meta WHERE name = 'log_floor'"),
        4
    );

    // A retry through the loop succeeds.
    db.run(|txn, _| async move {
        txn.get(b"k", ReadMode::Serializable).await?;
        txn.set(b"out", b"retried");
        Ok::<_, TxnError>(())
    })
    .await
    .unwrap();
    assert_eq!(read(&other, b"out").await, Some(b"retried".to_vec()));
}

/// Hundreds of commits between a read and its commit: the conflict check goes through the
/// log's key index instead of scanning the versions, with the same answers.
#[tokio::test]
async fn conflict_check_through_the_key_index() {
    let (_dir, _path, db) = temp_store(options().with_durability(Durability::Normal));
    put(&db, b"k", b"0").await;
    let point = db.create_transaction();
    point.get(b"k", ReadMode::Serializable).await.unwrap();
    let range = db.create_transaction();
    range
        .get_range(b"r/", b"r0", ReadMode::Serializable)
        .await
        .unwrap();
    let quiet = db.create_transaction();
    quiet.get(b"k", ReadMode::Serializable).await.unwrap();
    quiet
        .get_range(b"r/", b"r0", ReadMode::Serializable)
        .await
        .unwrap();
    for i in 0..300_u32 {
        put(&db, format!("noise/{i}").as_bytes(), b"x").await;
    }
    put(&db, b"r0", b"at the end of the range").await;
    put(&db, b"q", b"before the range").await;
    quiet.set(b"out", b"quiet");
    quiet.commit().await.unwrap();

    put(&db, b"k", b"1").await;
    put(&db, b"r/m", b"inserted").await;
    point.set(b"out", b"point");
    assert_kind(
        &point.commit().await.unwrap_err(),
        TxnErrorKind::Conflict,
        Some(1020),
    );
    range.set(b"out", b"range");
    assert_kind(
        &range.commit().await.unwrap_err(),
        TxnErrorKind::Conflict,
        Some(1020),
    );
    assert_eq!(read(&db, b"out").await, Some(b"quiet".to_vec()));
}

#[tokio::test]
async fn a_held_write_lock_makes_commits_wait_then_fail_retryably() {
    let (_dir, path, db) = temp_store(
        options()
            .with_busy_timeout(Duration::from_millis(300))
            .with_durability(Durability::Normal),
    );
    put(&db, b"k", b"v").await;
    let lock = hold_write_lock(&path);

    // Readers are not blocked by a writer.
    let reader = db.create_transaction();
    assert_eq!(
        reader.get(b"k", ReadMode::Serializable).await.unwrap(),
        Some(b"v".to_vec())
    );
    reader.commit().await.unwrap();

    let t = db.create_transaction();
    t.set(b"k", b"w");
    let started = Instant::now();
    let e = t.commit().await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_kind(&e, TxnErrorKind::Unavailable, None);
    assert!(e.is_retryable() && !e.is_maybe_committed());

    // The retry loop backs off and gets through once the lock is released.
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(lock);
    });
    db.run(|txn, _| async move {
        txn.set(b"k", b"after the lock");
        Ok::<_, TxnError>(())
    })
    .await
    .unwrap();
    release.await.unwrap();
    assert_eq!(read(&db, b"k").await, Some(b"after the lock".to_vec()));
}

/// A commit waiting for the write lock waits on tokio's blocking pool: other tasks of a
/// single-threaded runtime keep running meanwhile.
#[tokio::test(flavor = "current_thread")]
async fn waiting_for_the_lock_does_not_block_the_runtime() {
    let (_dir, path, db) = temp_store(options().with_busy_timeout(Duration::from_secs(5)));
    let lock = hold_write_lock(&path);
    let committer = {
        let db = db.clone();
        tokio::spawn(async move {
            let t = db.create_transaction();
            t.set(b"k", b"v");
            t.commit().await
        })
    };
    let mut ticks = 0;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(read(&db, b"k").await, None);
        ticks += 1;
    }
    assert_eq!(ticks, 10);
    assert!(!committer.is_finished());
    drop(lock);
    committer.await.unwrap().unwrap();
    assert_eq!(read(&db, b"k").await, Some(b"v".to_vec()));
}

#[tokio::test]
async fn watches_fire_across_handles() {
    let (_dir, path, a) = temp_store(options());
    let b = SqliteDb::open_with(&path, options()).unwrap();
    put(&a, b"w", b"1").await;

    let t = a.create_transaction();
    let mut watch = t.watch(b"w").unwrap();
    let cleared = t.watch(b"gone").unwrap();
    t.commit().await.unwrap();

    // An identical write from the other handle does not fire it; a change does.
    put(&b, b"w", b"1").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut watch)
            .await
            .is_err()
    );
    put(&b, b"w", b"2").await;
    tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .expect("the watch did not fire")
        .unwrap();
    assert_eq!(a.stats().watches_fired, 1);

    // A watch on an absent key fires when the key appears.
    put(&b, b"gone", b"here").await;
    tokio::time::timeout(Duration::from_secs(5), cleared)
        .await
        .expect("the watch did not fire")
        .unwrap();

    // A watch whose key changed between the read and the commit fires at once.
    let t = a.create_transaction();
    let watch = t.watch(b"w").unwrap();
    put(&b, b"w", b"3").await;
    t.commit().await.unwrap(); // read-only: no conflict
    tokio::time::timeout(Duration::from_secs(5), watch)
        .await
        .expect("the watch did not fire")
        .unwrap();
}

#[tokio::test]
async fn watches_fail_with_their_transaction() {
    let (_dir, _path, db) = temp_store(options());
    put(&db, b"k", b"0").await;

    // Dropped without committing: transaction_cancelled.
    let t = db.create_transaction();
    let watch = t.watch(b"k").unwrap();
    drop(t);
    let e = tokio::time::timeout(Duration::from_secs(1), watch)
        .await
        .unwrap()
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::Fatal, Some(1025));

    // A conflicting commit: the watch fails with a copy of the conflict.
    let t = db.create_transaction();
    let watch = t.watch(b"k").unwrap();
    put(&db, b"k", b"1").await;
    t.set(b"other", b"x");
    assert!(t.commit().await.is_err());
    let e = tokio::time::timeout(Duration::from_secs(1), watch)
        .await
        .unwrap()
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::Conflict, Some(1020));

    // Every handle dropped: armed watches fail instead of waiting forever.
    let t = db.create_transaction();
    let watch = t.watch(b"k").unwrap();
    t.commit().await.unwrap();
    drop(db);
    let e = tokio::time::timeout(Duration::from_secs(1), watch)
        .await
        .unwrap()
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::Fatal, None);
}

#[tokio::test]
async fn limits_and_used_during_commit_match_memdb() {
    let (_dir, _path, db) = temp_store(options());
    let t = db.create_transaction();
    assert_kind(
        &t.get(b"\xffsystem", ReadMode::Snapshot).await.unwrap_err(),
        TxnErrorKind::Fatal,
        Some(2004),
    );
    t.set(&vec![b'k'; 10_001], b"v");
    assert_kind(
        &t.clone().commit().await.unwrap_err(),
        TxnErrorKind::Fatal,
        Some(2102),
    );
    assert_kind(
        &t.get(b"k", ReadMode::Snapshot).await.unwrap_err(),
        TxnErrorKind::Fatal,
        Some(2017),
    );
    let t = db.create_transaction();
    t.set(b"k", &vec![0; 100_001]);
    assert_kind(
        &t.commit().await.unwrap_err(),
        TxnErrorKind::Fatal,
        Some(2103),
    );
    // Empty keys and values are fine.
    put(&db, b"", b"").await;
    assert_eq!(read(&db, b"").await, Some(Vec::new()));
}

#[tokio::test]
async fn stats_count_this_handle() {
    let (_dir, _path, db) = temp_store(options());
    put(&db, b"a", b"1").await;
    db.reset_stats();
    let t = db.create_transaction();
    t.get(b"a", ReadMode::Serializable).await.unwrap();
    t.get_range(b"a", b"z", ReadMode::Snapshot).await.unwrap();
    t.set(b"b", b"2");
    t.clear(b"a");
    t.add_read_conflict_key(b"c").unwrap();
    let _w = t.watch(b"a").unwrap();
    let txn_stats = t.stats();
    assert_eq!(
        (
            txn_stats.point_reads,
            txn_stats.range_reads,
            txn_stats.range_keys_read,
            txn_stats.sets,
            txn_stats.clears,
            txn_stats.read_conflict_keys,
            txn_stats.watches_created
        ),
        (1, 1, 1, 1, 1, 1, 1)
    );
    t.commit().await.unwrap();
    let s = db.stats();
    assert_eq!(
        (s.commits_attempted, s.commits_succeeded, s.conflicts),
        (1, 1, 0)
    );
    assert_eq!(db.committed_version().unwrap(), 2);
}

/// Eight tasks on four threads, over two handles on one file, increment one counter through
/// the retry loop: every increment lands exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_increments_across_handles_are_serializable() {
    let (_dir, path, a) = temp_store(options().with_durability(Durability::Normal));
    let b = SqliteDb::open_with(&path, options().with_durability(Durability::Normal)).unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let db = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move {
                for _ in 0..25 {
                    db.run(|txn, _| async move {
                        let n = txn
                            .get(b"counter", ReadMode::Serializable)
                            .await?
                            .map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
                        tokio::task::yield_now().await;
                        txn.set(b"counter", &(n + 1).to_be_bytes());
                        Ok::<_, TxnError>(())
                    })
                    .await
                    .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        read(&a, b"counter").await,
        Some(200u64.to_be_bytes().to_vec())
    );
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sa.commits_succeeded + sb.commits_succeeded, 200);
    assert_eq!(
        sa.commits_attempted + sb.commits_attempted,
        200 + sa.conflicts + sb.conflicts
    );
    assert_eq!(a.committed_version().unwrap(), 200);
}

#[tokio::test]
async fn run_with_max_attempts_returns_the_last_conflict() {
    let (_dir, _path, db) = temp_store(options());
    let mut attempts = 0;
    let e = db
        .run_with(RunOptions::default().with_max_attempts(3), |txn, _| {
            attempts += 1;
            let db = db.clone();
            async move {
                txn.get(b"k", ReadMode::Serializable).await?;
                put(&db, b"k", b"interloper").await;
                txn.set(b"k", b"mine");
                Ok::<_, TxnError>(())
            }
        })
        .await
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::Conflict, Some(1020));
    assert_eq!(attempts, 3);
    assert_eq!(read(&db, b"k").await, Some(b"interloper".to_vec()));
}

/// One election cycle, measured: the leader's renewal and a follower's cycle on two handles
/// (printed with `--nocapture`; asserted only loosely, as machines differ).
#[tokio::test]
async fn cycle_latency() {
    for durability in [Durability::Full, Durability::Normal] {
        let (_dir, path, leader_db) = temp_store(options().with_durability(durability));
        let follower_db =
            SqliteDb::open_with(&path, options().with_durability(durability)).unwrap();
        let election = LeaderElection::new(Subspace::from("bench"));
        let leader = Candidate::new(
            fdb_leader_election::CandidateId::random("leader").unwrap(),
            fdb_leader_election::Priority::new(1),
        );
        let follower = Candidate::new(
            fdb_leader_election::CandidateId::random("follower").unwrap(),
            fdb_leader_election::Priority::new(1),
        );
        for (db, c) in [(&leader_db, &leader), (&follower_db, &follower)] {
            in_txn!(db, [e = election, c], |txn| {
                e.initialize(&txn).await?;
                e.register_candidate(&txn, &c).await
            })
            .unwrap();
        }
        let cycle = |db: SqliteDb, c: Candidate| {
            let election = election.clone();
            async move {
                let cycle = in_txn!(db, [e = election, c], |txn| e
                    .run_election_cycle(&txn, &c)
                    .await)
                .unwrap();
                c.adopt(cycle)
            }
        };
        assert!(cycle(leader_db.clone(), leader.clone()).await.is_leader());
        let rounds = 50_u32;
        let mut took = [Duration::ZERO; 2];
        for _ in 0..rounds {
            for (i, (db, c)) in [(&leader_db, &leader), (&follower_db, &follower)]
                .into_iter()
                .enumerate()
            {
                let started = Instant::now();
                cycle(db.clone(), c.clone()).await;
                took[i] += started.elapsed();
            }
        }
        assert!(leader.believes_it_leads() && !follower.believes_it_leads());
        let [l, f] = took.map(|t| t / rounds);
        eprintln!("{durability:?}: leader cycle {l:?}, follower cycle {f:?} (mean of {rounds})");
        assert!(l < Duration::from_secs(1) && f < Duration::from_secs(1));
    }
}

/// Two runners, each on its own handle on one file (as two processes would be): one leads,
/// the other follows; when the leader shuts down, the other takes over at once with a higher
/// ballot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runners_on_two_handles_elect_one_leader_and_hand_over() {
    use fdb_leader_election::runner::Runner;

    let (_dir, path, a_db) = temp_store(options());
    let b_db = SqliteDb::open_with(&path, options()).unwrap();
    let config = ElectionConfig::with_lease_duration(Duration::from_secs(2)).unwrap();
    let start = |db: SqliteDb, name: &str| {
        Runner::builder(db, Subspace::from("jobs"))
            .label(name)
            .config(config.clone())
            .start()
            .unwrap()
    };
    let a = start(a_db, "a");
    let guard = tokio::time::timeout(Duration::from_secs(5), a.elected())
        .await
        .unwrap()
        .unwrap();
    let b = start(b_db, "b");
    let deadline = Instant::now() + Duration::from_millis(700);
    while Instant::now() < deadline {
        assert!(!(a.is_leader() && b.is_leader()), "two leaders");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(a.is_leader() && !b.is_leader());

    let handover = Instant::now();
    a.shutdown().await;
    assert!(guard.is_cancelled());
    let b_guard = tokio::time::timeout(Duration::from_secs(5), b.elected())
        .await
        .unwrap()
        .unwrap();
    assert!(b_guard.ballot() > guard.ballot());
    eprintln!("handover took {:?}", handover.elapsed());
    assert!(handover.elapsed() < Duration::from_secs(2));
    b.shutdown().await;
}

#[test]
fn a_foreign_database_is_refused_and_left_byte_for_byte_untouched() {
    for setup in [
        "PRAGMA application_id = 7; CREATE TABLE t (x); INSERT INTO t VALUES (1);",
        // No application id at all, but not empty: still not ours.
        "CREATE TABLE t (x); INSERT INTO t VALUES (1);",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        {
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch(setup).unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let e = SqliteDb::open(&path).err().unwrap();
        assert!(matches!(e, SqliteOpenError::WrongSchema { .. }), "{e:?}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "{setup}");
        assert!(
            !dir.path().join("other.db-wal").exists(),
            "switched to WAL: {setup}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The store's files: paths that are not regular files, and files deleted or replaced while in
// use (the rule of `fdb_leader_election::sqlite::files`).

/// `path` with `suffix` appended.
fn side(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    common::files::file_names(dir)
}

#[test]
fn paths_that_are_not_regular_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // /dev/null: SQLite would open it, find an empty database and create /dev/null-wal (or,
    // before WAL mode, /dev/null-journal).
    let created_before: Vec<bool> = ["-journal", "-wal", "-shm"]
        .iter()
        .map(|s| side(Path::new("/dev/null"), s).exists())
        .collect();
    let e = open_err(Path::new("/dev/null"));
    assert!(
        matches!(&e, SqliteOpenError::NotAFile { kind, .. } if *kind == "a character device"),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("/dev/null is a character device"),
        "{e}"
    );
    assert_eq!(e.path(), Path::new("/dev/null"));
    let created_after: Vec<bool> = ["-journal", "-wal", "-shm"]
        .iter()
        .map(|s| side(Path::new("/dev/null"), s).exists())
        .collect();
    assert_eq!(
        created_before, created_after,
        "a file was created beside /dev/null"
    );

    // A FIFO, and a directory where the -wal would go.
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let e = open_err(&fifo);
        assert!(
            matches!(&e, SqliteOpenError::NotAFile { kind, .. } if kind.contains("FIFO")),
            "{e:?}"
        );
    } else {
        eprintln!("skipped the FIFO: no mkfifo");
    }
    let db = dir.path().join("election.db");
    std::fs::create_dir(side(&db, "-wal")).unwrap();
    let e = open_err(&db);
    assert!(
        matches!(&e, SqliteOpenError::NotAFile { file, kind, .. }
            if *file == side(&db, "-wal") && *kind == "a directory"),
        "{e:?}"
    );
    assert_eq!(e.path(), db.as_path());
    let mut expected = vec!["election.db-wal".to_owned()];
    if fifo.exists() {
        expected.insert(1, "fifo".to_owned());
    }
    expected.sort();
    assert_eq!(listing(dir.path()), expected, "something was created");
}

/// The `StoreFileChanged` at the root of `e`, a transaction error.
#[track_caller]
fn changed_of(e: &TxnError) -> StoreFileChanged {
    assert_kind(e, TxnErrorKind::Fatal, None);
    assert!(!e.is_retryable());
    let source = std::error::Error::source(e).unwrap_or_else(|| panic!("no source: {e:?}"));
    source
        .downcast_ref::<StoreFileChanged>()
        .unwrap_or_else(|| panic!("not a StoreFileChanged: {source:?}"))
        .clone()
}

/// Deleting the -wal and -shm (or only the -shm, or replacing the database file) under a
/// handle: from then on its commits (read-only ones too) and watches fail with a fatal error
/// naming the file, and `check_files` says so. Before, they went on, on files no other process
/// would ever see again.
#[tokio::test]
async fn files_deleted_or_replaced_under_a_handle_fail_its_commits_and_watches() {
    type Damage = fn(&Path);
    let cases: [(&str, Damage, StoreFile, FileChange); 4] = [
        (
            "rm -wal -shm",
            |p| {
                std::fs::remove_file(side(p, "-wal")).unwrap();
                std::fs::remove_file(side(p, "-shm")).unwrap();
            },
            StoreFile::WriteAheadLog,
            FileChange::Deleted,
        ),
        (
            "rm -shm",
            |p| std::fs::remove_file(side(p, "-shm")).unwrap(),
            StoreFile::SharedMemoryIndex,
            FileChange::Deleted,
        ),
        (
            "mv over -wal",
            |p| {
                std::fs::write(side(p, ".other"), b"").unwrap();
                std::fs::rename(side(p, ".other"), side(p, "-wal")).unwrap();
            },
            StoreFile::WriteAheadLog,
            FileChange::Replaced,
        ),
        (
            "mv over the database",
            |p| {
                std::fs::copy(p, side(p, ".copy")).unwrap();
                std::fs::rename(side(p, ".copy"), p).unwrap();
            },
            StoreFile::Database,
            FileChange::Replaced,
        ),
    ];
    for (what, damage, file, change) in cases {
        let (_dir, path, db) = temp_store(options());
        put(&db, b"k", b"1").await;
        db.check_files().unwrap();
        let t = db.create_transaction();
        let watch = t.watch(b"k").unwrap();
        t.commit().await.unwrap();

        damage(&path);

        let expected_path = match file {
            StoreFile::Database => path.clone(),
            StoreFile::WriteAheadLog => side(&path, "-wal"),
            _ => side(&path, "-shm"),
        };
        let checked = db.check_files().unwrap_err();
        assert_eq!(
            (checked.file(), checked.change(), checked.path()),
            (file, change, expected_path.as_path()),
            "{what}"
        );
        let t = db.create_transaction();
        t.set(b"k", b"2");
        let e = t.commit().await.unwrap_err();
        assert_eq!(changed_of(&e), checked, "{what}");
        assert!(
            e.to_string().contains("database error")
                && checked
                    .to_string()
                    .contains(&expected_path.display().to_string()),
            "{what}: {e} / {checked}"
        );
        // A read-only commit too: what it read may not be the store's any more.
        let t = db.create_transaction();
        let _ = t.get(b"k", ReadMode::Serializable).await;
        let e = t.commit().await.unwrap_err();
        assert_eq!(changed_of(&e), checked, "{what}");
        // The watch armed before fails instead of waiting for a change no one will make.
        let e = tokio::time::timeout(Duration::from_secs(5), watch)
            .await
            .expect("the watch neither fired nor failed")
            .unwrap_err();
        assert_eq!(changed_of(&e), checked, "{what}");
        // The retry loop does not retry it.
        let attempts = AtomicU64::new(0);
        let e = db
            .run(|t, _| {
                attempts.fetch_add(1, Ordering::SeqCst);
                async move {
                    t.set(b"k", b"3");
                    Ok::<_, TxnError>(())
                }
            })
            .await
            .unwrap_err();
        assert_eq!(changed_of(&e), checked, "{what}");
        assert_eq!(attempts.load(Ordering::SeqCst), 1, "{what}");
    }
}

/// What SQLite does to the files on its own never trips the rule: checkpoints (TRUNCATE
/// too), a size limit on the log, connections opened and closed (a pool that keeps none),
/// other handles closing, the last handle closing (SQLite deletes the -wal and -shm) and the
/// store opened again (new ones).
#[tokio::test]
async fn what_sqlite_does_to_its_files_never_trips_the_rule() {
    let (_dir, path, a) = temp_store(options());
    let b = SqliteDb::open_with(&path, options().with_max_idle_connections(0)).unwrap();
    let c = SqliteDb::open_with(&path, options()).unwrap();
    for round in 0..20u32 {
        let value = round.to_be_bytes();
        put(&a, b"k", &value).await;
        put(&b, b"k", &value).await;
        assert_eq!(read(&c, b"k").await, Some(value.to_vec()));
        match round {
            // Another program checkpoints the log.
            5 => sql(&path, "PRAGMA wal_checkpoint(TRUNCATE)"),
            8 => sql(
                &path,
                "PRAGMA journal_size_limit = 0; PRAGMA wal_checkpoint(RESTART)",
            ),
            // Another handle comes and goes.
            11 => drop(SqliteDb::open_with(&path, options()).unwrap()),
            _ => {}
        }
        for db in [&a, &b, &c] {
            db.check_files().unwrap();
        }
    }
    assert!(side(&path, "-wal").exists());
    drop(c);
    put(&a, b"k", b"after c").await;
    drop(b);
    put(&a, b"k", b"after b").await;
    a.check_files().unwrap();
    // The last handle closes: SQLite checkpoints and deletes the -wal and -shm.
    drop(a);
    assert!(!side(&path, "-wal").exists() && !side(&path, "-shm").exists());
    let again = SqliteDb::open_with(&path, options()).unwrap();
    assert_eq!(read(&again, b"k").await, Some(b"after b".to_vec()));
    put(&again, b"k", b"again").await;
    again.check_files().unwrap();
}

/// The environment variable that turns [`helper_process_holding_a_store`] into a process
/// holding the store at its path.
const HOLD_ENV: &str = "SQLITE_CONFORMANCE_HOLD_STORE";

/// Not a test by itself: the other process of
/// `opening_beside_a_process_on_deleted_files_is_refused`, which runs this test binary again
/// with [`HOLD_ENV`] set. Opens the store, commits, prints `ready`, and holds the store until
/// its standard input closes.
#[test]
#[ignore = "a helper process, started by another test"]
fn helper_process_holding_a_store() {
    use std::io::{Read, Write};
    let Some(path) = std::env::var_os(HOLD_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let db = SqliteDb::open_with(&path, options()).unwrap();
    runtime.block_on(put(&db, b"held", b"yes"));
    println!("ready");
    std::io::stdout().flush().unwrap();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(db);
}

/// Kills the helper process when dropped, also when an assertion fails.
struct Helper(std::process::Child);

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Another process holds the store; its -wal and -shm are deleted (or only its -shm). A
/// handle opened now would create new ones, without the commits in the old log and with locks
/// that do not exclude the other process's: it is refused, naming that process, until that
/// process is gone. Before, it opened (and the two led side by side with one ballot).
#[test]
fn opening_beside_a_process_on_deleted_files_is_refused() {
    use std::io::BufRead;
    if !Path::new("/proc/locks").exists() {
        eprintln!("SKIPPED: no /proc/locks on this system");
        return;
    }
    for only_shm in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("election.db");
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "helper_process_holding_a_store",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HOLD_ENV, &path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut helper = Helper(child);
        let pid = helper.0.id();
        let stdout = helper.0.stdout.take().unwrap();
        let ready = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("ready"));
        assert!(ready, "the helper process never held the store");

        // A healthy store opens beside it.
        drop(SqliteDb::open_with(&path, options()).unwrap());

        if !only_shm {
            std::fs::remove_file(side(&path, "-wal")).unwrap();
        }
        std::fs::remove_file(side(&path, "-shm")).unwrap();
        let started = Instant::now();
        let e = SqliteDb::open_with(&path, options())
            .err()
            .unwrap_or_else(|| {
                panic!("opened beside process {pid} on deleted files (only -shm: {only_shm})")
            });
        eprintln!(
            "refused after {:?} (only -shm: {only_shm}): {e}",
            started.elapsed()
        );
        assert!(
            matches!(&e, SqliteOpenError::InUseThroughOtherFiles { pid: p, .. } if *p == pid),
            "{e:?}"
        );
        assert!(e.to_string().contains(&format!("process {pid}")), "{e}");
        assert_eq!(e.path(), path.as_path());

        // Once that process is gone, the store opens again.
        drop(helper);
        let db = SqliteDb::open_with(&path, options()).unwrap();
        db.check_files().unwrap();
    }
}

// Shared test helpers (tests/common).
#[path = "common/txn.rs"]
mod txn;
