//! The conformance suite against MemDb, plus MemDb-only tests: transaction age, injected
//! faults, the retry loop, counters, watch errors and memory bounds.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

// Only the conformance suite and the backends of tests/common are needed here.
mod common {
    pub(crate) mod backends;
    pub(crate) mod conformance;
    pub(crate) mod timings;
}

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::backends::MemBackend;
use common::conformance;
use common::timings::timings;
use fdb_leader_election::memdb::{
    CommitFault, MaybeCommitted, MemDb, MemDbStats, MemTransaction, MemTxnStats, RunOptions,
    ScriptedFaults,
};
use fdb_leader_election::{
    ElectionDatabase, ElectionError, ElectionTxn, KeyValue, ManualClock, ReadMode, TokioClock,
    TxnError, TxnErrorKind,
};

macro_rules! conformance_tests {
    ($($check:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $check() {
                conformance::$check(&MemBackend::new()).await;
            }
        )*
    };
}

conformance::with_checks!(conformance_tests);

#[tokio::test]
async fn run_all_on_one_shared_database() {
    conformance::run_all(&MemBackend::new()).await;
}

// ---------------------------------------------------------------------------------------------
// MemDb only.

fn manual_db() -> (MemDb, ManualClock) {
    let clock = ManualClock::new();
    (MemDb::with_clock(Arc::new(clock.clone())), clock)
}

async fn put(db: &MemDb, key: &[u8], value: &[u8]) {
    let t = db.create_transaction();
    t.set(key, value);
    t.commit().await.unwrap();
}

async fn read(db: &MemDb, key: &[u8]) -> Option<Vec<u8>> {
    db.create_transaction()
        .get(key, ReadMode::Snapshot)
        .await
        .unwrap()
}

#[track_caller]
fn assert_kind(e: &TxnError, kind: TxnErrorKind, code: Option<i32>) {
    assert_eq!((e.kind(), e.code()), (kind, code), "{e}");
}

#[tokio::test]
async fn too_old_after_five_seconds() {
    let (db, clock) = manual_db();
    put(&db, b"k", b"v").await;
    let t = db.create_transaction();
    clock.advance(Duration::from_secs(60)); // the read version is taken at the first read
    t.get(b"k", ReadMode::Serializable).await.unwrap();
    clock.advance(Duration::from_millis(4_999));
    t.get(b"k", ReadMode::Snapshot).await.unwrap();
    t.get_range(b"a", b"z", ReadMode::Snapshot).await.unwrap();
    clock.advance(Duration::from_millis(1));
    let e = t.get(b"k", ReadMode::Snapshot).await.unwrap_err();
    assert_kind(&e, TxnErrorKind::TooOld, Some(1007));
    assert!(e.is_retryable());
    let e = t
        .get_range(b"a", b"z", ReadMode::Snapshot)
        .await
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::TooOld, Some(1007));
    let e = t.watch(b"k").unwrap().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::TooOld, Some(1007));
    t.set(b"k", b"late");
    let e = t.commit().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::TooOld, Some(1007));
    assert_eq!(read(&db, b"k").await, Some(b"v".to_vec()));

    // A read-only transaction is never sent to FoundationDB's cluster: once it is too old its
    // reads fail, and its commit succeeds unless one of its reads failed (then the commit
    // fails with that read's error, as FoundationDB's does).
    let t = db.create_transaction();
    t.get(b"k", ReadMode::Snapshot).await.unwrap();
    let untouched = db.create_transaction();
    untouched.get(b"k", ReadMode::Snapshot).await.unwrap();
    clock.advance(Duration::from_secs(5));
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

    // A blind write takes its read version at commit, so it is never too old.
    let t = db.create_transaction();
    t.set(b"k", b"blind");
    clock.advance(Duration::from_secs(10));
    t.commit().await.unwrap();
}

#[tokio::test]
async fn run_retries_too_old() {
    let (db, clock) = manual_db();
    let mut attempts = 0;
    db.run(|txn, _| {
        attempts += 1;
        let clock = clock.clone();
        let first = attempts == 1;
        async move {
            txn.get(b"k", ReadMode::Serializable).await?;
            if first {
                clock.advance(Duration::from_secs(5));
            }
            txn.set(b"k", b"done");
            Ok::<_, TxnError>(())
        }
    })
    .await
    .unwrap();
    assert_eq!(attempts, 2);
    assert_eq!(read(&db, b"k").await, Some(b"done".to_vec()));
}

#[tokio::test(start_paused = true)]
async fn latency_ages_transactions() {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    faults.set_read_latency(Duration::from_secs(2));
    let start = tokio::time::Instant::now();
    let t = db.create_transaction();
    t.get(b"k", ReadMode::Snapshot).await.unwrap(); // read version taken at 2 s
    t.get(b"k", ReadMode::Snapshot).await.unwrap(); // served at 4 s: 2 s old
    t.get(b"k", ReadMode::Snapshot).await.unwrap(); // served at 6 s: 4 s old
    let e = t.get(b"k", ReadMode::Snapshot).await.unwrap_err(); // 6 s old
    assert_kind(&e, TxnErrorKind::TooOld, Some(1007));
    assert_eq!(start.elapsed(), Duration::from_secs(8));

    faults.set_read_latency(Duration::ZERO);
    faults.set_commit_latency(Duration::from_secs(5));
    let t = db.create_transaction();
    t.get(b"k", ReadMode::Snapshot).await.unwrap();
    t.set(b"k", b"slow");
    let e = t.commit().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::TooOld, Some(1007));
    assert_eq!(start.elapsed(), Duration::from_secs(13));
}

#[tokio::test]
async fn unknown_applied_is_applied() {
    let (db, _) = manual_db();
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    faults.push_commit_fault(CommitFault::UnknownApplied);
    let t = db.create_transaction();
    t.set(b"k", b"v");
    let e = t.commit().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::CommitUnknown, Some(1021));
    assert!(e.is_retryable() && e.is_maybe_committed());
    assert_eq!(read(&db, b"k").await, Some(b"v".to_vec()));
    assert_eq!(db.committed_version(), 1);
    assert_eq!(faults.pending_commit_faults(), 0);
}

#[tokio::test]
async fn unknown_not_applied_is_not_applied() {
    let (db, _) = manual_db();
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    faults.push_commit_fault(CommitFault::UnknownNotApplied);
    let t = db.create_transaction();
    t.set(b"k", b"v");
    let e = t.commit().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::CommitUnknown, Some(1021));
    assert!(e.is_maybe_committed());
    assert_eq!(read(&db, b"k").await, None);
    assert_eq!(db.committed_version(), 0);
}

#[tokio::test]
async fn forced_conflict_applies_nothing_and_read_only_commits_skip_the_queue() {
    let (db, _) = manual_db();
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    faults.push_commit_fault(CommitFault::Conflict);
    faults.push_commit_fault(CommitFault::Unavailable);

    let read_only = db.create_transaction();
    read_only.get(b"k", ReadMode::Serializable).await.unwrap();
    read_only.commit().await.unwrap();
    assert_eq!(faults.pending_commit_faults(), 2);

    let t = db.create_transaction();
    t.set(b"k", b"v");
    assert_kind(
        &t.commit().await.unwrap_err(),
        TxnErrorKind::Conflict,
        Some(1020),
    );
    let t = db.create_transaction();
    t.set(b"k", b"v");
    assert_kind(
        &t.commit().await.unwrap_err(),
        TxnErrorKind::Unavailable,
        None,
    );
    assert_eq!(read(&db, b"k").await, None);
    put(&db, b"k", b"v").await;
    assert_eq!(read(&db, b"k").await, Some(b"v".to_vec()));
    let stats = db.stats();
    assert_eq!(stats.conflicts, 1);
    assert_eq!(stats.commits_attempted, 4);
    assert_eq!(stats.commits_succeeded, 2);
}

#[tokio::test(start_paused = true)]
async fn run_retries_faults_and_reports_maybe_committed() {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    faults.push_commit_fault(CommitFault::UnknownApplied);
    faults.push_commit_fault(CommitFault::Conflict);
    faults.push_commit_fault(CommitFault::UnknownNotApplied);

    let mut seen: Vec<MaybeCommitted> = Vec::new();
    let value = db
        .run(|txn, maybe| {
            seen.push(maybe);
            async move {
                // Idempotent increment: after an unknown result, look before writing again.
                let n = txn
                    .get(b"n", ReadMode::Serializable)
                    .await?
                    .map_or(0, |v| v[0]);
                if maybe.is_maybe_committed() && n == 1 {
                    return Ok::<_, ElectionError>(n);
                }
                txn.set(b"n", &[n + 1]);
                Ok(n + 1)
            }
        })
        .await
        .unwrap();
    // Attempt 1 applied but reported an unknown result; attempt 2 was told so, found its
    // write and returned without writing again.
    assert_eq!(value, 1);
    assert_eq!(
        seen,
        vec![MaybeCommitted(false), MaybeCommitted(true)],
        "later attempts are told an earlier one may have committed"
    );
    assert_eq!(read(&db, b"n").await, Some(vec![1]));
    // The second attempt was read-only, so it did not consume the queued faults.
    assert_eq!(faults.pending_commit_faults(), 2);

    // Now a writing retry meets the forced conflict and then another unknown result.
    let mut seen: Vec<bool> = Vec::new();
    db.run(|txn, maybe| {
        seen.push(maybe.is_maybe_committed());
        async move {
            txn.set(b"m", b"x");
            Ok::<_, TxnError>(())
        }
    })
    .await
    .unwrap();
    assert_eq!(seen, vec![false, false, true]);
    assert_eq!(faults.pending_commit_faults(), 0);
    let stats = db.stats();
    assert_eq!(stats.unknown_results, 2);
    assert_eq!(stats.conflicts, 1);
}

/// Injected FoundationDB codes are classified as the FoundationDB adapter classifies them:
/// the retry loop retries them (after a back-off unless they are conflicts or too old), and
/// tells later attempts when one may have committed.
#[tokio::test(start_paused = true)]
async fn injected_fdb_codes_classify_and_retry_like_foundationdb() {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));

    // Reads: unavailable (1009, 1037, throttled), too old, a timeout outside a commit.
    for (code, kind) in [
        (1009, TxnErrorKind::Unavailable),
        (1037, TxnErrorKind::Unavailable),
        (1213, TxnErrorKind::Unavailable),
        (1007, TxnErrorKind::TooOld),
        (1031, TxnErrorKind::Unavailable),
    ] {
        faults.push_read_error(code);
        let e = db
            .create_transaction()
            .get(b"k", ReadMode::Snapshot)
            .await
            .unwrap_err();
        assert_kind(&e, kind, Some(code));
        assert!(e.is_retryable() && !e.is_maybe_committed(), "{code}");
    }

    // Commits: a timeout may have committed; throttling and lagging servers did not.
    for (fault, kind, applied) in [
        (CommitFault::Error(1009), TxnErrorKind::Unavailable, false),
        (CommitFault::Error(1037), TxnErrorKind::Unavailable, false),
        (CommitFault::Error(1235), TxnErrorKind::Unavailable, false),
        (CommitFault::Error(1031), TxnErrorKind::CommitUnknown, false),
        (
            CommitFault::ErrorAfterApplying(1031),
            TxnErrorKind::CommitUnknown,
            true,
        ),
        (
            CommitFault::ErrorAfterApplying(1004),
            TxnErrorKind::CommitUnknown,
            true,
        ),
        // FoundationDB never applies a commit it reports as not committed.
        (
            CommitFault::ErrorAfterApplying(1037),
            TxnErrorKind::Unavailable,
            false,
        ),
    ] {
        faults.push_commit_fault(fault);
        let before = db.committed_version();
        let t = db.create_transaction();
        t.set(b"k", b"v");
        let e = t.commit().await.unwrap_err();
        assert_eq!(e.kind(), kind, "{fault:?}");
        assert_eq!(
            e.is_maybe_committed(),
            kind == TxnErrorKind::CommitUnknown,
            "{fault:?}"
        );
        assert_eq!(db.committed_version() > before, applied, "{fault:?}");
    }
    assert_eq!(db.stats().unknown_results, 3);

    // The retry loop retries what FoundationDB's `on_error` retries: a throttled commit and a
    // lagging read after a back-off; a commit that timed out (1031) it does not retry, and
    // neither does `run`, though it may have committed.
    faults.push_read_error(1037);
    faults.push_commit_fault(CommitFault::Error(1213));
    faults.push_commit_fault(CommitFault::ErrorAfterApplying(1031));
    let start = tokio::time::Instant::now();
    let mut seen = Vec::new();
    let e = db
        .run(|txn, maybe| {
            seen.push(maybe.is_maybe_committed());
            async move {
                txn.get(b"k", ReadMode::Serializable).await?;
                txn.set(b"n", b"1");
                Ok::<_, TxnError>(())
            }
        })
        .await
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::CommitUnknown, Some(1031));
    assert_eq!(seen, vec![false, false, false]);
    // 10 + 20 ms of back-off: neither is retried at once.
    assert_eq!(start.elapsed(), Duration::from_millis(30));

    // ElectionDatabase::transact retries none of them: each comes back to the caller.
    for (fault, kind) in [
        (CommitFault::Error(1009), TxnErrorKind::Unavailable),
        (
            CommitFault::ErrorAfterApplying(1031),
            TxnErrorKind::CommitUnknown,
        ),
    ] {
        faults.push_commit_fault(fault);
        let attempts = AtomicU64::new(0);
        let e = db
            .transact(Duration::from_secs(1), |txn| {
                attempts.fetch_add(1, Ordering::SeqCst);
                async move {
                    txn.set(b"t", b"x");
                    Ok(())
                }
            })
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ElectionError::Database(t) if t.kind() == kind),
            "{fault:?}: {e:?}"
        );
        assert_eq!(attempts.load(Ordering::SeqCst), 1, "{fault:?}");
    }
}

/// A read that reached the database and failed fails the commit with its error, whatever the
/// error (FoundationDB's commit waits for the transaction's reads), and the transaction's
/// watches are cancelled with it (1025). A read served from the transaction's own writes never
/// reaches the database, so no fault is injected into it.
#[tokio::test]
async fn a_failed_read_fails_the_commit_with_its_error() {
    let (db, _) = manual_db();
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    for writes in [true, false] {
        let t = db.create_transaction();
        if writes {
            t.set(b"mine", b"1");
        }
        faults.push_read_error(1037);
        if writes {
            // Served from its own write: the fault stays queued.
            assert_eq!(
                t.get(b"mine", ReadMode::Serializable).await.unwrap(),
                Some(b"1".to_vec())
            );
        }
        let watch = t.watch(b"w").unwrap();
        let e = t.get(b"k", ReadMode::Snapshot).await.unwrap_err();
        assert_kind(&e, TxnErrorKind::Unavailable, Some(1037));
        // Read-only or not, the commit fails with the read's error.
        let e = t.commit().await.unwrap_err();
        assert_kind(&e, TxnErrorKind::Unavailable, Some(1037));
        let e = watch.await.unwrap_err();
        assert_kind(&e, TxnErrorKind::Fatal, Some(1025));
    }
    assert_eq!(read(&db, b"mine").await, None);
}

#[tokio::test(start_paused = true)]
async fn unavailability_then_recovery() {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    faults.set_unavailable(true);

    let t = db.create_transaction();
    let e = t.get(b"k", ReadMode::Snapshot).await.unwrap_err();
    assert_kind(&e, TxnErrorKind::Unavailable, None);
    assert!(e.is_retryable());
    let e = t
        .get_range(b"a", b"b", ReadMode::Snapshot)
        .await
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::Unavailable, None);
    t.set(b"k", b"lost");
    let e = t.commit().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::Unavailable, None);

    let attempts = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&attempts);
    let runner = db.clone();
    let task = tokio::spawn(async move {
        runner
            .run(move |txn, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    let v = txn.get(b"k", ReadMode::Serializable).await?;
                    txn.set(b"k", b"recovered");
                    Ok::<_, TxnError>(v)
                }
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!task.is_finished());
    faults.set_unavailable(false);
    assert_eq!(task.await.unwrap().unwrap(), None);
    // Back-off 10, 20, 40, 80, 160, 320 ms: the 7th attempt, at 630 ms, succeeds.
    assert_eq!(attempts.load(Ordering::SeqCst), 7);
    assert_eq!(read(&db, b"k").await, Some(b"recovered".to_vec()));
}

#[tokio::test]
async fn run_with_max_attempts_returns_the_last_error() {
    let (db, _) = manual_db();
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    for _ in 0..5 {
        faults.push_commit_fault(CommitFault::Conflict);
    }
    let mut attempts = 0;
    let e = db
        .run_with(
            RunOptions {
                max_attempts: Some(3),
                ..RunOptions::default()
            },
            |txn, _| {
                attempts += 1;
                async move {
                    txn.set(b"k", b"v");
                    Ok::<_, TxnError>(())
                }
            },
        )
        .await
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::Conflict, Some(1020));
    assert_eq!(attempts, 3);
    assert_eq!(faults.pending_commit_faults(), 2);
    assert_eq!(read(&db, b"k").await, None);
}

#[tokio::test]
async fn stats_count_exactly() {
    let (db, _) = manual_db();
    put(&db, b"a", b"1").await;
    put(&db, b"b", b"2").await;
    db.reset_stats();
    assert_eq!(db.stats(), MemDbStats::default());

    let t = db.create_transaction();
    t.get(b"a", ReadMode::Serializable).await.unwrap();
    t.get(b"zz", ReadMode::Snapshot).await.unwrap();
    let got = t.get_range(b"a", b"c", ReadMode::Snapshot).await.unwrap();
    assert_eq!(got.len(), 2);
    t.get_range(b"x", b"y", ReadMode::Serializable)
        .await
        .unwrap();
    t.set(b"c", b"3");
    t.set(b"c", b"4");
    t.clear(b"a");
    t.add_read_conflict_key(b"b").unwrap();
    let _watch = t.watch(b"b").unwrap();

    let mut expected_txn = MemTxnStats::default();
    expected_txn.point_reads = 2;
    expected_txn.range_reads = 2;
    expected_txn.range_keys_read = 2;
    expected_txn.sets = 2;
    expected_txn.clears = 1;
    expected_txn.read_conflict_keys = 1;
    expected_txn.watches_created = 1;
    assert_eq!(t.stats(), expected_txn);
    let before_commit = db.stats();
    t.clone().commit().await.unwrap();
    assert_eq!(t.stats(), expected_txn);

    // A conflicting transaction.
    let loser = db.create_transaction();
    loser.get(b"c", ReadMode::Serializable).await.unwrap();
    put(&db, b"c", b"5").await; // b is unchanged: the watch stays quiet
    loser.set(b"d", b"x");
    assert!(loser.commit().await.is_err());
    put(&db, b"b", b"changed").await; // fires the watch

    let mut expected = MemDbStats::default();
    expected.point_reads = 3;
    expected.range_reads = 2;
    expected.range_keys_read = 2;
    expected.sets = 5;
    expected.clears = 1;
    expected.read_conflict_keys = 1;
    expected.commits_attempted = 4;
    expected.commits_succeeded = 3;
    expected.conflicts = 1;
    expected.watches_created = 1;
    expected.watches_fired = 1;
    assert_eq!(db.stats(), expected);
    let delta = db.stats().since(&before_commit);
    assert_eq!(delta.commits_attempted, 4);
    assert_eq!(delta.point_reads, 1);

    db.reset_stats();
    assert_eq!(db.stats(), MemDbStats::default());
}

#[tokio::test]
async fn watches_disabled_error_code() {
    let (db, _) = manual_db();
    db.set_watches_enabled(false);
    assert!(!db.watches_enabled());
    let t = db.create_transaction();
    // As FoundationDB reports every watch error: through the watch's future.
    let e = t.watch(b"k").unwrap().await.unwrap_err();
    assert_kind(&e, TxnErrorKind::Fatal, Some(1034));
    assert!(!e.is_retryable());
    db.set_watches_enabled(true);
    let mut armed = t.watch(b"k").unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(10), &mut armed)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn watch_fails_when_the_transaction_is_dropped() {
    let (db, _) = manual_db();
    let t = db.create_transaction();
    let clone = t.clone();
    let watch = t.watch(b"k").unwrap();
    drop(t);
    drop(clone);
    let e = tokio::time::timeout(Duration::from_secs(1), watch)
        .await
        .unwrap()
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::Fatal, Some(1025));
    assert!(
        std::error::Error::source(&e)
            .unwrap()
            .to_string()
            .contains("dropped before commit")
    );
}

#[tokio::test]
async fn watch_fails_with_the_commit_error() {
    let (db, _) = manual_db();
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    faults.push_commit_fault(CommitFault::UnknownApplied);
    let t = db.create_transaction();
    let watch = t.watch(b"k").unwrap();
    t.set(b"other", b"x");
    assert!(t.commit().await.is_err());
    let e = tokio::time::timeout(Duration::from_secs(1), watch)
        .await
        .unwrap()
        .unwrap_err();
    assert_kind(&e, TxnErrorKind::CommitUnknown, Some(1021));
}

#[tokio::test]
async fn dropping_an_armed_watch_cancels_it() {
    let (db, _) = manual_db();
    let t = db.create_transaction();
    let watch = t.watch(b"k").unwrap();
    t.commit().await.unwrap();
    drop(watch);
    put(&db, b"k", b"v").await;
    assert_eq!(db.stats().watches_fired, 0);
    assert_eq!(db.armed_watches(), 0);
}

#[tokio::test]
async fn history_stays_bounded() {
    let (db, clock) = manual_db();
    let step = Duration::from_millis(10);
    let window = 500; // commits per 5 s
    let keys = 7;
    put(&db, b"k0", b"start").await;

    let mut reader: Option<(MemTransaction, Vec<KeyValue>)> = None;
    for i in 0..10_000_u32 {
        clock.advance(step);
        match i {
            // A reader starts in the middle of the churn...
            2_000 => {
                let r = db.create_transaction();
                let seen = r.get_range(b"k", b"l", ReadMode::Snapshot).await.unwrap();
                assert!(!seen.is_empty());
                reader = Some((r, seen));
            }
            // ... still sees its version 4.99 s later, despite the pruning meanwhile ...
            2_499 => {
                let (r, seen) = reader.as_ref().unwrap();
                let again = r.get_range(b"k", b"l", ReadMode::Snapshot).await.unwrap();
                assert_eq!(&again, seen);
                for (k, v) in seen {
                    assert_eq!(
                        r.get(k, ReadMode::Snapshot).await.unwrap().as_ref(),
                        Some(v)
                    );
                }
            }
            // ... and is too old at 5 s.
            2_500 => {
                let (r, _) = reader.take().unwrap();
                let e = r.get(b"k0", ReadMode::Snapshot).await.unwrap_err();
                assert_kind(&e, TxnErrorKind::TooOld, Some(1007));
            }
            _ => {}
        }
        let t = db.create_transaction();
        let key = format!("k{}", i % keys);
        if i % 3 == 0 {
            t.clear(key.as_bytes());
        } else {
            t.set(key.as_bytes(), &i.to_be_bytes());
        }
        t.commit().await.unwrap();
        assert!(db.retained_commits() <= window + 1);
        assert!(db.retained_value_versions() <= keys as usize + window + 1);
    }

    // Once time moves on, a single commit collapses the history.
    clock.advance(Duration::from_secs(6));
    put(&db, b"k0", b"end").await;
    assert_eq!(db.retained_commits(), 1);
    assert!(db.retained_value_versions() <= keys as usize + 1);
    assert_eq!(db.committed_version(), 10_002);
}

#[tokio::test]
async fn election_errors_retry_through_run() {
    let (db, _) = manual_db();
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    faults.push_commit_fault(CommitFault::Conflict);
    let mut attempts = 0;
    let r: Result<(), ElectionError> = db
        .run(|txn, _| {
            attempts += 1;
            async move {
                txn.set(b"k", b"v");
                Ok(())
            }
        })
        .await;
    r.unwrap();
    assert_eq!(attempts, 2);
}

#[tokio::test]
async fn transactions_are_send_and_clone_into_tasks() {
    let (db, _) = manual_db();
    put(&db, b"k", b"v").await;
    let t = db.create_transaction();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let t = t.clone();
            tokio::spawn(async move { t.get(b"k", ReadMode::Serializable).await })
        })
        .collect();
    for h in handles {
        assert_eq!(h.await.unwrap().unwrap(), Some(b"v".to_vec()));
    }
    assert_eq!(t.stats().point_reads, 4);
    assert_eq!(t.db().stats().point_reads, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_increments_are_serializable() {
    let db = MemDb::new();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
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
        read(&db, b"counter").await,
        Some(400u64.to_be_bytes().to_vec())
    );
    let stats = db.stats();
    assert_eq!(stats.commits_succeeded, 400);
    assert_eq!(stats.commits_attempted, 400 + stats.conflicts);
}

// ---------------------------------------------------------------------------------------------
// The watch limit.

#[tokio::test]
async fn watches_beyond_the_limit_fail_through_their_future() {
    let (db, _) = manual_db();
    assert_eq!(
        db.max_watches(),
        fdb_leader_election::memdb::DEFAULT_MAX_WATCHES
    );
    assert_eq!(db.max_watches(), 10_000);
    db.set_max_watches(2).unwrap();
    let t = db.create_transaction();
    let w1 = t.watch(b"a").unwrap();
    let w2 = t.watch(b"b").unwrap();
    let w3 = t.watch(b"c").unwrap();
    t.set(b"out", b"x");
    t.commit().await.unwrap();
    assert_eq!(db.outstanding_watches(), 2);
    let e = w3.await.unwrap_err();
    assert_kind(&e, TxnErrorKind::Fatal, Some(1032));
    let s = db.stats();
    assert_eq!((s.watches_created, s.watches_refused), (3, 1));

    // A slot frees when a watch fires or is dropped, never goes below zero, and a pending
    // watch of a dropped transaction gives its slot back too.
    put(&db, b"a", b"1").await;
    w1.await.unwrap();
    assert_eq!(db.outstanding_watches(), 1);
    drop(w2);
    assert_eq!(db.outstanding_watches(), 0);
    let t = db.create_transaction();
    let pending = t.watch(b"a").unwrap();
    assert_eq!(db.outstanding_watches(), 1);
    drop(t);
    assert_kind(&pending.await.unwrap_err(), TxnErrorKind::Fatal, Some(1025));
    assert_eq!(db.outstanding_watches(), 0);

    // A watch that fired because its own transaction wrote the key holds no slot either.
    let t = db.create_transaction();
    let own = t.watch(b"a").unwrap();
    t.set(b"a", b"2");
    own.await.unwrap();
    assert_eq!(db.outstanding_watches(), 0);
    assert_eq!(db.stats().watches_fired, 2);
}

/// Runners on a database that refuses every watch through the watch's future (as
/// FoundationDB does beyond its limit) fall back to polling, and try a watch again only every
/// ten heartbeats instead of spinning; once watches are allowed again they arm them.
#[tokio::test(start_paused = true)]
async fn runners_poll_without_spinning_when_every_watch_fails() {
    use fdb_leader_election::Priority;
    use fdb_leader_election::runner::Runner;
    use foundationdb_tuple::Subspace;

    const HEARTBEAT_MS: u64 = 100;
    const HEARTBEAT: Duration = Duration::from_millis(HEARTBEAT_MS);
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    db.set_max_watches(0).unwrap();
    let config = timings(300, HEARTBEAT_MS, 600, 30);
    let runners: Vec<Runner> = ["a", "b"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            Runner::builder(db.clone(), Subspace::from("election"))
                .label(*name)
                .priority(Priority::new(1))
                .config(config.clone())
                .seed(i as u64)
                .start()
                .unwrap()
        })
        .collect();
    tokio::time::sleep(HEARTBEAT * 50).await;
    assert_eq!(runners.iter().filter(|r| r.is_leader()).count(), 1);
    let s = db.stats();
    assert_eq!(s.watches_created, s.watches_refused, "{s:?}");
    // One try at start and one per ten heartbeats, per runner: about 12 in all. A runner that
    // re-armed every heartbeat would have made about 100.
    assert!(
        (2..=20).contains(&s.watches_refused),
        "{} refused watches in 50 heartbeats",
        s.watches_refused
    );

    db.set_max_watches(fdb_leader_election::memdb::DEFAULT_MAX_WATCHES)
        .unwrap();
    tokio::time::sleep(HEARTBEAT * 12).await;
    assert!(db.outstanding_watches() > 0, "the runners armed no watch");
    for r in &runners {
        r.shutdown().await;
    }
}
