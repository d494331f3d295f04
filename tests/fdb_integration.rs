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
//! separate `#[test]`s. It runs the transaction conformance suite, adapter-specific checks, and
//! then every end-to-end election scenario of `tests/common/scenarios.rs` (the same ones
//! `tests/election_memdb.rs` runs on MemDb), each on a fresh subspace of its own. Each run
//! writes only below `fdb-leader-election-tests/<random>/`; every election scenario clears its
//! own subspace when it finishes, and the whole range is cleared when the run finishes (a
//! panicking scenario leaves it behind).
#![cfg(feature = "fdb")]

mod common;

use std::error::Error;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use common::conformance::{self, Backend};
use common::scenarios::{self, Backend as ScenarioBackend};
use fdb_leader_election::fdb::election_error;
use fdb_leader_election::{
    Action, Ballot, Candidate, ElectionConfig, ElectionError, ElectionResult, ElectionTxn,
    LeaderElection, LeaderRecord, ReadMode, ResignOutcome, TxnError, TxnErrorKind,
};
use foundationdb::options::DatabaseOption;
use foundationdb::{Database, FdbBindingError, FdbError, Transaction};
use foundationdb_tuple::Subspace;
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

    /// Real time: the cluster's versions advance about a million per second.
    async fn age(&self, by: Duration) {
        tokio::time::sleep(by).await;
    }

    fn set_watch_limit(&self, limit: usize) -> bool {
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        self.db
            .set_option(DatabaseOption::MaxWatches(limit))
            .is_ok()
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

/// Runs each named function of `common::scenarios` against a fresh [`ElectionDb`] (its own
/// subspace), then clears that subspace. The scenarios fail by panicking, which skips the
/// clearing (see the module docs).
macro_rules! election_scenarios {
    ($backend:expr, $($name:ident),+ $(,)?) => {
        $(
            let db = ElectionDb::new($backend);
            let result = scenario(concat!("election: ", stringify!($name)), async {
                scenarios::$name(&db).await;
                Ok(())
            })
            .await;
            let cleared = db.clear().await;
            result?;
            cleared?;
        )+
    };
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
    scenario(
        "binding errors convert back to the election errors they carry",
        binding_errors_convert_back(backend),
    )
    .await?;
    election_scenarios!(
        backend,
        several_candidates_elect_one_leader,
        renewal_keeps_the_ballot,
        crash_failover_waits_one_full_lease,
        resign_reserves_for_the_best_live_candidate,
        priority_handover_without_overlap,
        equal_priority_never_preempts,
        preemption_disabled_stops_requests,
        stale_ex_leader_is_fenced,
        unregistered_candidates_cannot_claim,
    );
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

/// Election-scenario backend: each operation is one `Database::run`, on a subspace no other
/// scenario uses.
struct ElectionDb<'a> {
    db: &'a Database,
    /// Everything the scenario writes: the election below `("election",)`, the fenced
    /// counters below `("counter", key)`.
    root: Subspace,
    election: LeaderElection,
}

impl<'a> ElectionDb<'a> {
    /// A fresh subspace below this run's random root.
    fn new(b: &'a FdbBackend) -> Self {
        let root = Subspace::from_bytes(b.fresh_prefix());
        let election = LeaderElection::new(root.subspace(&("election",)));
        ElectionDb {
            db: &b.db,
            root,
            election,
        }
    }

    fn counter_key(&self, key: &[u8]) -> Vec<u8> {
        self.root.pack(&("counter", key))
    }

    /// Clears everything the scenario wrote.
    async fn clear(&self) -> Result<(), FdbBindingError> {
        let (begin, end) = self.root.range();
        let (begin, end) = (&begin, &end);
        self.db
            .run(|trx, _maybe_committed| async move {
                trx.clear_range(begin, end);
                Ok(())
            })
            .await
    }
}

impl ScenarioBackend for ElectionDb<'_> {
    fn election(&self) -> &LeaderElection {
        &self.election
    }

    async fn init(&self, cfg: &ElectionConfig) -> Result<(), ElectionError> {
        let e = &self.election;
        self.db
            .run(|trx, _maybe_committed| async move {
                e.initialize_with_config(&trx, cfg)
                    .await
                    .map_err(FdbBindingError::from)
            })
            .await
            .map_err(election_error)
    }

    async fn register(&self, c: &Candidate) -> Result<(), ElectionError> {
        let e = &self.election;
        self.db
            .run(|trx, _maybe_committed| async move {
                e.register_candidate(&trx, c)
                    .await
                    .map_err(FdbBindingError::from)
            })
            .await
            .map_err(election_error)
    }

    async fn cycle(&self, c: &Candidate) -> Result<(Action, ElectionResult), ElectionError> {
        let e = &self.election;
        let cycle = self
            .db
            .run(|trx, _maybe_committed| async move {
                e.run_election_cycle(&trx, c)
                    .await
                    .map_err(FdbBindingError::from)
            })
            .await
            .map_err(election_error)?;
        // Adopted only now that the commit is confirmed.
        Ok((cycle.action(), c.adopt(cycle)))
    }

    async fn try_claim(&self, c: &Candidate) -> Result<(Action, ElectionResult), ElectionError> {
        let e = &self.election;
        let cycle = self
            .db
            .run(|trx, _maybe_committed| async move {
                e.try_claim_leadership(&trx, c)
                    .await
                    .map_err(FdbBindingError::from)
            })
            .await
            .map_err(election_error)?;
        Ok((cycle.action(), c.adopt(cycle)))
    }

    async fn resign(&self, c: &Candidate) -> Result<ResignOutcome, ElectionError> {
        let e = &self.election;
        self.db
            .run(|trx, _maybe_committed| async move {
                e.resign_leadership(&trx, c, None)
                    .await
                    .map_err(FdbBindingError::from)
            })
            .await
            .map_err(election_error)
    }

    async fn record(&self) -> Result<LeaderRecord, ElectionError> {
        let e = &self.election;
        self.db
            .run(|trx, _maybe_committed| async move {
                e.leader_record(&trx).await.map_err(FdbBindingError::from)
            })
            .await
            .map_err(election_error)
    }

    async fn fenced_increment(&self, token: Ballot, key: &[u8]) -> Result<u64, ElectionError> {
        let e = &self.election;
        let key = self.counter_key(key);
        let key = key.as_slice();
        self.db
            .run(|trx, _maybe_committed| async move {
                // The fence check and the counter's read-modify-write commit together.
                e.fence(&trx, token).await?;
                let stored = ElectionTxn::get(&trx, key, ReadMode::Serializable).await?;
                let n = counter_value(stored)?
                    .checked_add(1)
                    .ok_or(ElectionError::CounterExhausted { what: "scenario" })?;
                ElectionTxn::set(&trx, key, &n.to_le_bytes());
                Ok(n)
            })
            .await
            .map_err(election_error)
    }

    async fn read_counter(&self, key: &[u8]) -> Result<u64, ElectionError> {
        let key = self.counter_key(key);
        let key = key.as_slice();
        self.db
            .run(|trx, _maybe_committed| async move {
                let stored = ElectionTxn::get(&trx, key, ReadMode::Snapshot).await?;
                Ok(counter_value(stored)?)
            })
            .await
            .map_err(election_error)
    }
}

/// A scenario counter: absent is 0, otherwise 8 little-endian bytes.
fn counter_value(stored: Option<Vec<u8>>) -> Result<u64, ElectionError> {
    let Some(bytes) = stored else { return Ok(0) };
    let len = bytes.len();
    let bytes: [u8; 8] = bytes.try_into().map_err(|_| {
        TxnError::with_source(
            TxnErrorKind::Fatal,
            format!("scenario counter is {len} bytes, not 8"),
        )
    })?;
    Ok(u64::from_le_bytes(bytes))
}

/// Every path of `fdb_leader_election::fdb::election_error`, without touching the cluster.
async fn binding_errors_convert_back(_b: &FdbBackend) -> TestResult {
    // Non-database election errors come back unchanged.
    let stale = ElectionError::StaleToken {
        token: Ballot::new(1),
        current: Ballot::new(2),
        vacant: false,
    };
    let back = election_error(FdbBindingError::from(stale));
    assert!(
        matches!(back, ElectionError::StaleToken { token, current, vacant: false }
            if token == Ballot::new(1) && current == Ballot::new(2)),
        "{back:?}"
    );
    // A database error with a code travels as the bare code; kind and code come back.
    let conflict = ElectionError::from(TxnError::from(FdbError::from_code(1020)));
    let back = election_error(FdbBindingError::from(conflict));
    assert!(
        matches!(&back, ElectionError::Database(t)
            if t.kind() == TxnErrorKind::Conflict && t.code() == Some(1020)),
        "{back:?}"
    );
    // What `run` returns when `on_error` gives up or a commit fails for good.
    let back = election_error(FdbBindingError::NonRetryableFdbError(FdbError::from_code(
        1007,
    )));
    assert!(
        matches!(&back, ElectionError::Database(t)
            if t.kind() == TxnErrorKind::TooOld && t.code() == Some(1007)),
        "{back:?}"
    );
    // Database errors without a code, boxed as an `ElectionError` or as a bare `TxnError`.
    let back = election_error(FdbBindingError::from(ElectionError::from(TxnError::new(
        TxnErrorKind::Unavailable,
    ))));
    assert!(
        matches!(&back, ElectionError::Database(t)
            if t.kind() == TxnErrorKind::Unavailable && t.code().is_none()),
        "{back:?}"
    );
    let back = election_error(FdbBindingError::from(TxnError::new(
        TxnErrorKind::CommitUnknown,
    )));
    assert!(
        matches!(&back, ElectionError::Database(t)
            if t.kind() == TxnErrorKind::CommitUnknown && t.code().is_none()),
        "{back:?}"
    );
    // Boxed FoundationDB errors, directly or nested in a binding error.
    let back = election_error(FdbBindingError::CustomError(Box::new(FdbError::from_code(
        1021,
    ))));
    assert!(
        matches!(&back, ElectionError::Database(t)
            if t.kind() == TxnErrorKind::CommitUnknown && t.code() == Some(1021)),
        "{back:?}"
    );
    let nested = FdbBindingError::CustomError(Box::new(FdbBindingError::from(
        ElectionError::NotInitialized,
    )));
    let back = election_error(nested);
    assert!(matches!(back, ElectionError::NotInitialized), "{back:?}");
    // Nothing to recover: fatal, with the binding error as the source.
    let back = election_error(FdbBindingError::ReferenceToTransactionKept);
    assert!(
        matches!(&back, ElectionError::Database(t)
            if t.kind() == TxnErrorKind::Fatal
                && t.code().is_none()
                && Error::source(t).is_some_and(|s| s.is::<FdbBindingError>())),
        "{back:?}"
    );
    Ok(())
}
