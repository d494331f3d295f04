//! The differential test (issue 30) on MemDb and the SQLite store, against FoundationDB's
//! behaviour as probed on a 7.3.79 cluster (tests/common/differential.rs): the scripted
//! transactions with FoundationDB's outcome on every line, transaction sizes measured on the
//! cluster, the retry loops' policy, and seeded random interleavings of three clients compared
//! with the traces the cluster gave (tests/data/differential-foundationdb.txt). The
//! FoundationDB tier (`scripts/fdb-tier`) runs the same on a local cluster
//! (tests/fdb_integration.rs, `differential::`) and checks the recorded traces are still the
//! cluster's.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

mod common;

use std::time::Duration;

use common::backends::{MemBackend, SqliteBackend};
use common::conformance::Backend;
use common::differential::{self, Difference};
use fdb_leader_election::{
    ElectionDatabase, ElectionTxn, MaybeCommitted, MemDb, RunOptions, SqliteDb, TxnError,
};

/// Every scripted case, on a store, against FoundationDB's outcomes (or the declared
/// difference); all failures are reported together.
async fn scripts_on<B: Backend>(store: &str, backend: impl Fn() -> B) {
    let mut failures = Vec::new();
    for script in differential::scripts() {
        let trace = differential::run(&backend(), &script.ops()).await;
        let what = format!("{} on {store}", script.name);
        if let Err(report) = differential::compare(&what, &script.expected(true), &trace) {
            failures.push(report);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_give_foundationdbs_outcomes_on_memdb() {
    scripts_on("MemDb", MemBackend::new).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_give_foundationdbs_outcomes_on_sqlite() {
    scripts_on("SQLite", || SqliteBackend::with_handles(1)).await;
}

/// One table of deliberate differences, shown in the docs: every declared difference is a row
/// of it (named in backquotes), and every row is a declared difference.
#[test]
fn the_docs_table_lists_exactly_the_declared_differences() {
    let rows: Vec<&str> = differential::DIFFERENCES_DOC
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    let declared: Vec<&str> = Difference::ALL.iter().map(|d| d.name()).collect();
    assert_eq!(rows, declared, "the table's rows, in order");
    for doc in [
        include_str!("../src/memdb/mod.rs"),
        include_str!("../src/sqlite/mod.rs"),
    ] {
        assert!(
            doc.contains("#![doc = include_str!(\"../store/differences.md\")]")
                || doc.contains("#[doc = include_str!(\"../store/differences.md\")]"),
            "the memdb and sqlite docs show the table"
        );
    }
    // Every difference a script pins is declared (the others are pinned by the tests named in
    // the table).
    for script in differential::scripts() {
        for d in script.differences() {
            assert!(Difference::ALL.contains(&d), "{}: {d:?}", script.name);
        }
    }
}

/// The size each case counts against FoundationDB's limit, as measured on the cluster; and the
/// limit falls exactly there (a transaction of exactly `MAX_TRANSACTION_BYTES` commits, one
/// byte more does not).
async fn sizes_on<B: Backend>(backend: &B, size_of: impl Fn(&B::Txn) -> usize) {
    for (name, ops, measured) in differential::size_cases() {
        let t = backend.begin();
        let prefix = backend.fresh_prefix();
        differential::apply(&t, &prefix, &ops).await;
        assert_eq!(size_of(&t), measured, "{name}");
        drop(t);
        for (over, expected) in [(0, "fits"), (1, "too large")] {
            let got = differential::size_boundary(backend, &ops, measured, over).await;
            assert_eq!(got, expected, "{name}, {over} byte(s) over the limit");
        }
    }
}

#[tokio::test]
async fn transaction_sizes_are_counted_as_foundationdb_counts_them_on_memdb() {
    let backend = MemBackend::new();
    sizes_on(&backend, |t| t.size()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_sizes_are_counted_as_foundationdb_counts_them_on_sqlite() {
    let backend = SqliteBackend::with_handles(1);
    sizes_on(&backend, |t| t.size()).await;
}

/// Seeded random interleavings of three clients give, on MemDb and on SQLite, the traces a
/// FoundationDB 7.3.79 cluster gave (recorded by the FoundationDB tier).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_interleavings_give_foundationdbs_recorded_traces() {
    let recorded = differential::recorded_traces();
    assert_eq!(
        recorded.len() as u64,
        differential::RECORDED_SEEDS,
        "recorded seeds"
    );
    for (seed, fdb) in recorded.iter().enumerate() {
        let ops = differential::random_script(seed as u64, differential::RECORDED_STEPS);
        let mem = differential::run(&MemBackend::new(), &ops).await;
        differential::assert_same(&format!("seed {seed}: MemDb"), fdb, &mem);
        let sql = differential::run(&SqliteBackend::with_handles(1), &ops).await;
        differential::assert_same(&format!("seed {seed}: SQLite"), fdb, &sql);
    }
}

/// `range-estimate-in-one-piece`: a range read adds its range to the approximate size once,
/// however many rows it returns (FoundationDB adds one per reply: the FoundationDB tier pins it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_range_read_adds_one_range_to_the_estimate() {
    let (mem, one_range) = differential::long_range_estimate(&MemBackend::new()).await;
    assert_eq!(mem, one_range);
    let (sql, one_range) = differential::long_range_estimate(&SqliteBackend::with_handles(1)).await;
    assert_eq!(sql, one_range);
}

/// `max-watches-refused-at-once`: a limit on outstanding watches above FoundationDB's
/// 1,000,000 is refused at once with `invalid_option_value` (2006), and the store keeps working
/// with its limit unchanged (FoundationDB accepts the option and poisons the database handle:
/// `differential::max_watches_above_the_absolute_limit` in the FoundationDB tier).
#[tokio::test]
async fn a_watch_limit_above_a_million_is_refused_at_once() {
    let mem = MemDb::new();
    let dir = tempfile::tempdir().unwrap();
    let sql = SqliteDb::open(dir.path().join("limit.db")).unwrap();
    let max = fdb_leader_election::memdb::ABSOLUTE_MAX_WATCHES;
    for (store, set, get) in [
        (
            "MemDb",
            &(|n| mem.set_max_watches(n)) as &dyn Fn(usize) -> Result<(), TxnError>,
            &(|| mem.max_watches()) as &dyn Fn() -> usize,
        ),
        ("SQLite", &|n| sql.set_max_watches(n), &|| sql.max_watches()),
    ] {
        let e = set(max + 1).unwrap_err();
        assert_eq!(e.code(), Some(2006), "{store}: {e}");
        assert_eq!(
            get(),
            fdb_leader_election::memdb::DEFAULT_MAX_WATCHES,
            "{store}"
        );
        set(max).unwrap();
        assert_eq!(get(), max, "{store}");
    }
    let t = mem.create_transaction();
    t.set(b"still", b"working");
    t.commit().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Retry loops (item 5): `run` retries what FoundationDB's `Database::run` retries, and
// `ElectionDatabase::transact` what the FoundationDB adapter's `transact` retries, for every
// kind and code an error can have. The FoundationDB tier checks the same table on a cluster.

/// What `run` does when its closure fails once with `error`: `retried` (a second attempt
/// committed) or `stopped <code>`.
async fn run_once_failing<F, Fut>(run: F, error: TxnError) -> String
where
    F: FnOnce(Box<dyn FnMut(MaybeCommitted) -> Result<(), TxnError> + Send>) -> Fut,
    Fut: std::future::Future<Output = Result<(), TxnError>>,
{
    let mut first = Some(error);
    let outcome = run(Box::new(move |_| match first.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }))
    .await;
    match outcome {
        Ok(()) => "retried".to_owned(),
        Err(e) => format!("stopped {}", differential::shown(&e)),
    }
}

/// What `run` does with an error of `kind` and `code`: retried, or stopped with the kind the
/// code has (`run_loop_errors`: MemDb and SQLite returned the closure's kind, `Conflict:1031`
/// where FoundationDB returns `Unavailable:1031`).
fn expected_run(kind: fdb_leader_election::TxnErrorKind, code: Option<i32>) -> String {
    if differential::run_retries_embedded(kind, code) {
        "retried".to_owned()
    } else {
        format!("stopped {}", differential::stopped_with(kind, code))
    }
}

#[tokio::test(start_paused = true)]
async fn memdb_run_retries_exactly_what_database_run_retries() {
    let db = MemDb::new();
    for kind in differential::KINDS {
        for code in differential::CODES {
            let got = run_once_failing(
                |mut body| {
                    db.run_with(
                        RunOptions::default().with_max_attempts(2),
                        move |_txn, m| {
                            let r = body(m);
                            async move { r }
                        },
                    )
                },
                differential::error_of(kind, code),
            )
            .await;
            assert_eq!(got, expected_run(kind, code), "{kind:?} {code:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_run_retries_exactly_what_database_run_retries() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(dir.path().join("retry.db")).unwrap();
    let options = RunOptions {
        max_attempts: Some(2),
        initial_backoff: Duration::ZERO,
        ..RunOptions::default()
    };
    for kind in differential::KINDS {
        for code in differential::CODES {
            let got = run_once_failing(
                |mut body| {
                    db.run_with(options, move |_txn, m| {
                        let r = body(m);
                        async move { r }
                    })
                },
                differential::error_of(kind, code),
            )
            .await;
            assert_eq!(got, expected_run(kind, code), "{kind:?} {code:?}");
        }
    }
}

/// `transact` retries a conflict or `transaction_too_old` whose code `on_error` retries, and
/// returns everything else, on MemDb and SQLite alike.
async fn transact_table<D: ElectionDatabase>(db: &D) {
    for kind in differential::KINDS {
        for code in differential::CODES {
            let (outcome, attempts) =
                differential::transact_failing_once(db, Duration::from_secs(5), kind, code).await;
            let retried = differential::transact_retries(kind, code);
            assert_eq!(outcome.is_ok(), retried, "{kind:?} {code:?}: {outcome:?}");
            let expected_attempts = if retried { 2 } else { 1 };
            assert_eq!(attempts, expected_attempts, "{kind:?} {code:?}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn memdb_transact_retries_what_the_foundationdb_adapter_retries() {
    transact_table(&MemDb::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_transact_retries_what_the_foundationdb_adapter_retries() {
    let dir = tempfile::tempdir().unwrap();
    transact_table(&SqliteDb::open(dir.path().join("transact.db")).unwrap()).await;
}

/// `maybe-committed-is-sticky`: after an unknown result (1021), a conflict (1020), then
/// success, `run` tells every later attempt that an earlier one may have committed; FoundationDB
/// Rust binding's `Database::run` tells only the attempt right after the unknown result
/// (tests/fdb_integration.rs pins that side).
#[tokio::test(start_paused = true)]
async fn maybe_committed_stays_true_for_every_later_attempt() {
    let db = MemDb::new();
    let mut errors = vec![1020, 1021];
    let mut seen = Vec::new();
    db.run(|_txn, maybe| {
        seen.push(maybe.is_maybe_committed());
        let next = errors.pop();
        async move {
            match next {
                Some(code) => {
                    Err(TxnError::new(fdb_leader_election::TxnErrorKind::Fatal).with_code(code))
                }
                None => Ok(()),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(seen, vec![false, true, true]);
    assert_eq!(
        differential::MAYBE_COMMITTED_ON_FOUNDATIONDB,
        [false, true, false]
    );
}
