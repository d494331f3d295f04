//! The FoundationDB adapter against a real cluster.
//!
//! Runs when `FDB_CLUSTER_FILE` names a cluster file; otherwise the test prints
//! `skipped: FDB_CLUSTER_FILE not set` and passes. Needs the `fdb` feature with an API version
//! (for example `--features fdb-7_3`) and `libfdb_c` to link:
//!
//! ```text
//! FDB_CLUSTER_FILE=/etc/foundationdb/fdb.cluster \
//!     cargo test --features fdb-7_3 --test fdb_integration -- --nocapture
//! ```
//!
//! The FoundationDB network can be started only once per process and must be stopped before
//! the process exits, so every scenario runs inside the one test [`against_a_cluster`], which
//! owns the network for its whole duration. Add new scenarios to [`run_scenarios`], not as
//! separate `#[test]`s. Each run writes only below `fdb-leader-election-tests/<random>/` and
//! clears that range when the scenarios finish (a panicking scenario leaves it behind).
#![cfg(feature = "fdb")]

// Only the conformance module of tests/common is needed here.
mod common {
    pub(crate) mod conformance;
}

use std::error::Error;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use common::conformance::{self, Backend};
use fdb_leader_election::{ElectionError, ElectionTxn, ReadMode, TxnError, TxnErrorKind};
use foundationdb::{Database, FdbBindingError, Transaction};
use rand::{Rng, SeedableRng};

type TestResult = Result<(), Box<dyn Error>>;

/// Everything this run writes lives below this prefix, followed by a random run id.
const TEST_ROOT: &[u8] = b"fdb-leader-election-tests/";

/// Conformance backend: each transaction is an `Arc<Transaction>`, which dereferences to
/// `Transaction` and therefore implements `ElectionTxn` through the adapter.
struct FdbBackend {
    db: Database,
    /// `TEST_ROOT` + random run id + `/`.
    run_root: Vec<u8>,
    next_prefix: AtomicU64,
}

impl FdbBackend {
    fn new(db: Database) -> Self {
        let run_id: u64 = rand::rngs::StdRng::from_os_rng().random();
        FdbBackend {
            db,
            run_root: [TEST_ROOT, format!("{run_id:016x}/").as_bytes()].concat(),
            next_prefix: AtomicU64::new(0),
        }
    }

    /// Clears everything this run wrote.
    async fn clean_up(&self) -> Result<(), FdbBindingError> {
        let end = [self.run_root.as_slice(), b"\xff"].concat();
        let (begin, end) = (&self.run_root, &end);
        self.db
            .run(|trx, _maybe_committed| async move {
                trx.clear_range(begin, end);
                Ok(())
            })
            .await
    }
}

impl Backend for FdbBackend {
    type Txn = Arc<Transaction>;

    #[allow(
        clippy::panic,
        reason = "`begin` cannot return an error; creating a transaction fails only when the \
                  client cannot allocate one, and the test must stop then"
    )]
    fn begin(&self) -> Self::Txn {
        match self.db.create_trx() {
            Ok(trx) => Arc::new(trx),
            Err(e) => panic!("cannot create a FoundationDB transaction: {e}"),
        }
    }

    async fn commit(&self, txn: Self::Txn) -> Result<(), TxnError> {
        let trx = Arc::try_unwrap(txn).map_err(|_| {
            TxnError::with_source(
                TxnErrorKind::Fatal,
                "commit: the transaction is still shared (a clone is alive)",
            )
        })?;
        // `From<TransactionCommitError>` treats a commit timeout as an unknown result.
        trx.commit().await?;
        Ok(())
    }

    fn fresh_prefix(&self) -> Vec<u8> {
        let n = self.next_prefix.fetch_add(1, Ordering::Relaxed);
        [self.run_root.as_slice(), format!("{n:06}/").as_bytes()].concat()
    }
}

#[test]
fn against_a_cluster() -> TestResult {
    let cluster_file = match std::env::var("FDB_CLUSTER_FILE") {
        Ok(path) if !path.is_empty() => path,
        Ok(_) | Err(std::env::VarError::NotPresent) => {
            println!("skipped: FDB_CLUSTER_FILE not set");
            return Ok(());
        }
        Err(e) => return Err(format!("FDB_CLUSTER_FILE: {e}").into()),
    };

    // SAFETY: `boot` may run once per process, and the guard it returns must be dropped before
    // the process exits. This is the only call in this test binary, made by its only test
    // that talks to a cluster, and `network` lives in this frame: it is dropped (network
    // stopped, its thread joined) when this test returns or unwinds, before the harness exits.
    #[allow(
        unsafe_code,
        reason = "foundationdb::boot is unsafe only because its guard must be dropped before \
                  exit, which this frame guarantees"
    )]
    let network = unsafe { foundationdb::boot() };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let backend = FdbBackend::new(Database::new(Some(&cluster_file))?);
        let result = run_scenarios(&backend).await;
        let cleaned = backend.clean_up().await;
        result?;
        cleaned?;
        Ok::<(), Box<dyn Error>>(())
    });
    // Every `Database` and `Transaction` is gone; stop the network last.
    drop(runtime);
    drop(network);
    result
}

/// Every scenario, in order. The first failure stops the run.
async fn run_scenarios(backend: &FdbBackend) -> TestResult {
    scenario("conformance suite", async {
        conformance::run_all(backend).await;
        Ok(())
    })
    .await?;
    scenario(
        "range reads return every row across batches",
        range_reads_return_every_row(backend),
    )
    .await?;
    scenario(
        "a conflict raised inside Database::run is retried",
        conflict_inside_run_is_retried(backend),
    )
    .await?;
    scenario(
        "other election errors end Database::run",
        other_errors_end_run(backend),
    )
    .await?;
    Ok(())
}

async fn scenario(name: &str, body: impl Future<Output = TestResult>) -> TestResult {
    println!("scenario: {name}");
    body.await
        .map_err(|e| format!("scenario `{name}` failed: {e}").into())
}

fn key(prefix: &[u8], suffix: &str) -> Vec<u8> {
    [prefix, suffix.as_bytes()].concat()
}

/// More rows than one reply carries (FoundationDB caps a reply at roughly 80 kB), read from
/// storage and through the transaction's own uncommitted writes.
async fn range_reads_return_every_row(b: &FdbBackend) -> TestResult {
    const ROWS: usize = 300;
    let prefix = b.fresh_prefix();
    let end = key(&prefix, "\u{7f}");
    let value_of = |i: usize| format!("{i:04}").repeat(250).into_bytes(); // 1000 bytes

    let writer = b.begin();
    for i in 0..ROWS {
        writer.set(&key(&prefix, &format!("row/{i:04}")), &value_of(i));
    }
    let own_writes = writer
        .get_range(&prefix, &end, ReadMode::Serializable)
        .await?;
    assert_eq!(own_writes.len(), ROWS, "read-your-writes range");
    b.commit(writer).await?;

    let reader = b.begin();
    let rows = reader.get_range(&prefix, &end, ReadMode::Snapshot).await?;
    assert_eq!(rows.len(), ROWS, "committed range");
    for (i, (k, v)) in rows.iter().enumerate() {
        assert_eq!(
            k,
            &key(&prefix, &format!("row/{i:04}")),
            "row {i} out of order"
        );
        assert_eq!(v, &value_of(i), "row {i} value");
    }
    let some = reader
        .get_range(
            &key(&prefix, "row/0010"),
            &key(&prefix, "row/0020"),
            ReadMode::Serializable,
        )
        .await?;
    assert_eq!(some.len(), 10, "[row/0010, row/0020) is half-open");
    let none = reader
        .get_range(&end, &prefix, ReadMode::Serializable)
        .await?;
    assert!(none.is_empty(), "an inverted range is empty");
    Ok(())
}

/// Makes FoundationDB reject a transaction with a genuine `not_committed` (1020): `loser`
/// reads `key`, `winner` writes it and commits first, then `loser` writes and commits.
async fn lose_a_conflict(b: &FdbBackend, key: &[u8]) -> Result<(), ElectionError> {
    let loser = b.begin();
    loser.get(key, ReadMode::Serializable).await?;
    let winner = b.begin();
    winner.set(key, b"winner");
    b.commit(winner).await?;
    loser.set(key, b"loser");
    b.commit(loser).await?;
    Ok(())
}

async fn conflict_inside_run_is_retried(b: &FdbBackend) -> TestResult {
    let prefix = b.fresh_prefix();
    let contended = key(&prefix, "contended");
    let marker = key(&prefix, "marker");
    let attempts = AtomicUsize::new(0);

    let attempt_that_committed =
        b.db.run(|trx, _maybe_committed| {
            let (attempts, contended, marker) = (&attempts, &contended, &marker);
            async move {
                let attempt = attempts.fetch_add(1, Ordering::SeqCst).saturating_add(1);
                // `trx` is a `RetryableTransaction`; this is the election's `get`.
                let before = trx.get(marker, ReadMode::Serializable).await?;
                assert_eq!(before, None, "attempt {attempt} saw the marker");
                if attempt == 1 {
                    let lost = lose_a_conflict(b, contended).await;
                    assert!(
                        matches!(&lost, Err(ElectionError::Database(e))
                            if e.kind() == TxnErrorKind::Conflict && e.code() == Some(1020)),
                        "expected a conflict, got {lost:?}"
                    );
                    // The conversion under test: ElectionError -> FdbBindingError, which
                    // `run` must hand to `on_error` and retry.
                    lost?;
                }
                trx.set(marker, b"committed");
                Ok(attempt)
            }
        })
        .await?;

    assert_eq!(attempt_that_committed, 2);
    assert_eq!(attempts.load(Ordering::SeqCst), 2, "closure invocations");
    let check = b.begin();
    assert_eq!(
        check.get(&marker, ReadMode::Snapshot).await?.as_deref(),
        Some(&b"committed"[..])
    );
    Ok(())
}

async fn other_errors_end_run(b: &FdbBackend) -> TestResult {
    let attempts = AtomicUsize::new(0);
    let outcome: Result<(), FdbBindingError> =
        b.db.run(|_trx, _maybe_committed| {
            let attempts = &attempts;
            async move {
                attempts.fetch_add(1, Ordering::SeqCst);
                Err(FdbBindingError::from(ElectionError::NotInitialized))
            }
        })
        .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "closure invocations");
    assert!(
        matches!(&outcome, Err(FdbBindingError::CustomError(e))
            if matches!(e.downcast_ref::<ElectionError>(), Some(ElectionError::NotInitialized))),
        "got {outcome:?}"
    );
    Ok(())
}
