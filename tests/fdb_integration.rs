//! The FoundationDB adapter against a real cluster.
//!
//! Everything here runs only with the `fdb` feature (an API version such as `fdb-7_3`),
//! `libfdb_c` to link, and `FDB_CLUSTER_FILE` naming a cluster file. Otherwise it says on
//! stderr why it was skipped (`fdb_integration: SKIPPED: ...`) and runs nothing. One command
//! starts a local cluster (`scripts/fdb-local start`, README "First run on a real cluster") and
//! one runs every check against it (`scripts/fdb-check`). By hand:
//!
//! ```text
//! FDB_CLUSTER_FILE=/etc/foundationdb/fdb.cluster \
//!     cargo test --features fdb-7_3,cli --test fdb_integration
//! ```
//!
//! (`cli` adds the `fdb-leader run --cluster-file` scenario.)
//!
//! The FoundationDB network can be started only once per process and must be stopped before
//! the process exits, so this test binary has a harness of its own (`harness = false`): `main`
//! boots the network, runs each check as a test of its own (reported as libtest reports them,
//! `test NAME ... ok` and a closing `test result:` line, so every check counts), then stops the
//! network. Arguments are substring filters, as with libtest (`--list` lists the tests). It
//! runs the transaction conformance suite check by check (`tests/common/conformance.rs`, the
//! same checks MemDb and SQLite pass), the differential test (`differential::`, issue 30: the
//! scripted transactions, transaction sizes, retry loops and random interleavings of
//! `tests/common/differential.rs`, on the cluster, MemDb and SQLite, compared), adapter-specific
//! checks, every end-to-end election
//! scenario of `tests/common/scenarios.rs` (the same ones `tests/election/memdb.rs` runs on
//! MemDb), then the runner on `Arc<Database>` in real time: crash failover, a priority
//! handover, follower cycles against renewals (with `ReportConflictingKeys`), commits cut short
//! by FoundationDB's timer, the watch limit, and `fdb-leader run --cluster-file` under SIGTERM.
//! Each test works on a fresh subspace. Each run writes only below
//! `fdb-leader-election-tests/<random>/`; every election scenario clears its own subspace when
//! it finishes, and the whole range is cleared when the run finishes.

#![allow(
    clippy::arithmetic_side_effects,
    reason = "test code: sums of a few seconds and counts of a few dozen"
)]

use std::io::Write;
use std::process::ExitCode;

/// Writes `line` to stderr directly, so that a skipped or failed cluster run is seen in any
/// `cargo test` output.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The closing line libtest prints, which `.ci/run` counts.
fn result_line(passed: usize, failed: usize, filtered: usize, secs: f64) -> String {
    format!(
        "test result: {}. {passed} passed; {failed} failed; 0 ignored; 0 measured; \
         {filtered} filtered out; finished in {secs:.2}s",
        if failed == 0 { "ok" } else { "FAILED" }
    )
}

fn main() -> ExitCode {
    #[cfg(feature = "fdb")]
    {
        cluster::main()
    }
    #[cfg(not(feature = "fdb"))]
    {
        say(
            "fdb_integration: SKIPPED: built without the `fdb` feature. The FoundationDB tests \
             need --features fdb-7_3 (or fdb-7_1, fdb-7_4), libfdb_c, and FDB_CLUSTER_FILE \
             naming a cluster; scripts/fdb-check runs them all.",
        );
        println!("\nrunning 0 tests\n\n{}\n", result_line(0, 0, 0, 0.0));
        ExitCode::SUCCESS
    }
}

#[cfg(feature = "fdb")]
mod common;

#[cfg(feature = "fdb")]
mod cluster {
    use super::{result_line, say};

    use std::error::Error;
    use std::future::Future;
    use std::panic::AssertUnwindSafe;
    use std::pin::Pin;
    use std::process::ExitCode;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::time::Duration;

    use crate::common::backends::MemBackend;
    use crate::common::conformance::{self, Backend};
    use crate::common::differential;
    use crate::common::scenarios::{self, Backend as ScenarioBackend};
    use fdb_leader_election::fdb::election_error;
    use fdb_leader_election::runner::{ElectionDatabase, Runner, TransactionTimedOut};
    use fdb_leader_election::{
        Action, Ballot, Candidate, CandidateId, ElectionConfig, ElectionError, ElectionResult,
        ElectionTxn, LeaderElection, LeaderRecord, Priority, ReadMode, ResignOutcome, TxnError,
        TxnErrorKind,
    };
    use foundationdb::options::{DatabaseOption, TransactionOption};
    use foundationdb::{Database, FdbBindingError, FdbError, Transaction};
    use foundationdb_tuple::Subspace;
    use rand::{Rng, SeedableRng};
    use tokio::time::Instant;

    type TestResult = Result<(), Box<dyn Error>>;

    /// Everything this run writes lives below this prefix, followed by a random run id.
    const TEST_ROOT: &[u8] = b"fdb-leader-election-tests/";

    /// Conformance backend: each transaction is an `Arc<Transaction>`, which dereferences to
    /// `Transaction` and therefore implements `ElectionTxn` through the adapter.
    struct FdbBackend {
        db: Database,
        /// The cluster file, for scenarios that need a `Database` handle of their own (its
        /// options then reach no other scenario).
        cluster_file: String,
        /// `TEST_ROOT` + random run id + `/`.
        run_root: Vec<u8>,
        next_prefix: AtomicU64,
    }

    impl FdbBackend {
        fn new(cluster_file: &str) -> Result<Self, FdbError> {
            let run_id: u64 = rand::rngs::StdRng::from_os_rng().random();
            Ok(FdbBackend {
                db: Database::new(Some(cluster_file))?,
                cluster_file: cluster_file.to_owned(),
                run_root: [TEST_ROOT, format!("{run_id:016x}/").as_bytes()].concat(),
                next_prefix: AtomicU64::new(0),
            })
        }

        /// A `Database` handle of its own on the same cluster.
        fn own_handle(&self) -> Result<Arc<Database>, FdbError> {
            Ok(Arc::new(Database::new(Some(&self.cluster_file))?))
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

        /// Real time: the cluster's versions advance about a million per second. A storage
        /// server refuses a read version only once it has moved its oldest version past it,
        /// which an idle cluster may not do for a while: small commits every 50 ms keep it
        /// moving, as any cluster in use does.
        async fn age(&self, by: Duration) {
            let until = Instant::now() + by;
            let tick = [self.run_root.as_slice(), b"tick"].concat();
            while Instant::now() < until {
                if let Ok(trx) = self.db.create_trx() {
                    trx.set(&tick, b"x");
                    let _ = trx.commit().await;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }

        fn set_watch_limit(&self, limit: usize) -> bool {
            let limit = i32::try_from(limit).unwrap_or(i32::MAX);
            self.db
                .set_option(DatabaseOption::MaxWatches(limit))
                .is_ok()
        }
    }

    /// One test: its name and its body, on the shared backend.
    type Body = Box<dyn Fn(Arc<FdbBackend>) -> Pin<Box<dyn Future<Output = TestResult>>>>;

    /// A test whose body is an async fn of the backend.
    fn test<F, Fut>(name: impl Into<String>, body: F) -> (String, Body)
    where
        F: Fn(Arc<FdbBackend>) -> Fut + 'static,
        Fut: Future<Output = TestResult> + 'static,
    {
        (name.into(), Box::new(move |b| Box::pin(body(b))))
    }

    /// Every test, in order.
    fn tests() -> Vec<(String, Body)> {
        let mut all: Vec<(String, Body)> = Vec::new();
        macro_rules! conformance_checks {
            ($($check:ident),* $(,)?) => {
                $(
                    all.push(test(
                        concat!("conformance::", stringify!($check)),
                        |b: Arc<FdbBackend>| async move {
                            conformance::$check(&*b).await;
                            Ok(())
                        },
                    ));
                )*
            };
        }
        conformance::with_checks!(conformance_checks);
        all.push(test("differential::scripts", |b| async move {
            differential_scripts(&b).await
        }));
        all.push(test("differential::sizes", |b| async move {
            differential_sizes(&b).await
        }));
        all.push(test(
            "differential::range_estimate_in_one_piece",
            |b| async move {
                // FoundationDB adds one range per reply: more than the one MemDb adds.
                let (fdb, one_range) = differential::long_range_estimate(&*b).await;
                let (mem, _) = differential::long_range_estimate(&MemBackend::new()).await;
                if mem != one_range || fdb <= one_range {
                    return Err(
                        format!("FoundationDB {fdb}, MemDb {mem}, one range {one_range}").into(),
                    );
                }
                say(&format!("range estimate: FoundationDB {fdb}, MemDb {mem}"));
                Ok(())
            },
        ));
        all.push(test(
            "differential::max_watches_above_the_absolute_limit",
            |b| async move {
                // `max-watches-refused-at-once`, FoundationDB's side, on a handle of its own: the
                // option is accepted, and every later operation of the handle fails with 2006.
                let db = b.own_handle()?;
                db.set_option(DatabaseOption::MaxWatches(1_000_001))?;
                let trx = Arc::new(db.create_trx()?);
                let read = trx.get(&b.fresh_prefix(), ReadMode::Snapshot).await;
                match read {
                    Err(e) if e.code() == Some(2006) => Ok(()),
                    other => Err(format!("a read after MaxWatches(1,000,001): {other:?}").into()),
                }
            },
        ));
        all.push(test("differential::run_retries", |b| async move {
            differential_run_retries(&b).await
        }));
        all.push(test("differential::transact_retries", |b| async move {
            differential_transact_retries(&b).await
        }));
        all.push(test("differential::random_interleavings", |b| async move {
            differential_random(&b).await
        }));
        all.push(test(
            "adapter::range_reads_return_every_row_across_batches",
            |b| async move { range_reads_return_every_row(&b).await },
        ));
        all.push(test(
            "adapter::a_conflict_raised_inside_database_run_is_retried",
            |b| async move { conflict_inside_run_is_retried(&b).await },
        ));
        all.push(test(
            "adapter::other_election_errors_end_database_run",
            |b| async move { other_errors_end_run(&b).await },
        ));
        all.push(test(
            "adapter::binding_errors_convert_back_to_the_election_errors_they_carry",
            |b| async move { binding_errors_convert_back(&b).await },
        ));
        macro_rules! election_scenarios {
            ($($name:ident),* $(,)?) => {
                $(
                    all.push(test(
                        concat!("election::", stringify!($name)),
                        |b: Arc<FdbBackend>| async move {
                            let db = ElectionDb::new(&b);
                            scenarios::$name(&db).await;
                            db.clear().await?;
                            Ok(())
                        },
                    ));
                )*
            };
        }
        scenarios::every_scenario!(election_scenarios);
        all.push(test(
            "runner::a_crashed_leaders_successor_leads_within_lease_and_2_heartbeats",
            |b| async move { runner_crash_failover(&b).await },
        ));
        all.push(test(
            "runner::a_higher_priority_takes_over_by_handover_without_overlap",
            |b| async move { runner_priority_handover(&b).await },
        ));
        all.push(test(
            "runner::follower_cycles_never_conflict_with_renewals",
            |b| async move { follower_cycles_never_conflict_with_renewals(&b).await },
        ));
        all.push(test(
            "runner::commits_cut_short_by_foundationdbs_timer_come_back_maybe_committed",
            |b| async move { commit_timeouts_come_back_maybe_committed(&b).await },
        ));
        all.push(test(
            "runner::runners_under_max_watches_1_poll_without_spinning",
            |b| async move { runners_under_a_watch_limit_do_not_spin(&b).await },
        ));
        all.push(test(
            "sharded::the_largest_layout_places_moves_and_leaves_within_foundationdbs_limits",
            |b| async move { sharded_largest_layout(&b).await },
        ));
        all.push(test(
            "cli::fdb_leader_run_exits_cleanly_on_sigterm_after_a_leader_change",
            |b| async move { cli_run_exits_cleanly_after_a_leader_change(&b).await },
        ));
        all
    }

    /// What the command line asks for: substring filters (libtest's), `--list`.
    struct Args {
        filters: Vec<String>,
        skips: Vec<String>,
        exact: bool,
        list: bool,
    }

    fn args() -> Args {
        let mut parsed = Args {
            filters: Vec::new(),
            skips: Vec::new(),
            exact: false,
            list: false,
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--list" => parsed.list = true,
                "--exact" => parsed.exact = true,
                "--skip" => parsed.skips.extend(it.next()),
                // libtest's options that take a value: their values are no filters.
                "--test-threads" | "--color" | "--format" | "--logfile" | "-Z" => {
                    it.next();
                }
                flag if flag.starts_with('-') => {}
                filter => parsed.filters.push(filter.to_owned()),
            }
        }
        parsed
    }

    impl Args {
        fn selects(&self, name: &str) -> bool {
            let matches = |f: &String| {
                if self.exact {
                    name == f
                } else {
                    name.contains(f.as_str())
                }
            };
            (self.filters.is_empty() || self.filters.iter().any(matches))
                && !self.skips.iter().any(|s| name.contains(s.as_str()))
        }
    }

    /// Boots the network, runs the selected tests one by one (a failure, or a panic, fails
    /// that test and the run goes on), clears what the run wrote, stops the network.
    pub(crate) fn main() -> ExitCode {
        let args = args();
        let all = tests();
        let (selected, filtered): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|(name, _)| args.selects(name));
        if args.list {
            for (name, _) in &selected {
                println!("{name}: test");
            }
            return ExitCode::SUCCESS;
        }
        let cluster_file = match std::env::var("FDB_CLUSTER_FILE") {
            Ok(path) if !path.is_empty() => path,
            _ => {
                say(
                    "fdb_integration: SKIPPED: FDB_CLUSTER_FILE is not set (point it at a \
                     cluster file to run the FoundationDB tests)",
                );
                println!("\nrunning 0 tests\n\n{}\n", result_line(0, 0, 0, 0.0));
                return ExitCode::SUCCESS;
            }
        };

        // SAFETY: `boot` may run once per process, and the guard it returns must be dropped
        // before the process exits. This is the only call in this test binary, and `network`
        // lives in this frame: it is dropped (network stopped, its thread joined) before
        // `main` returns. Panics of the tests are caught below, so this frame always gets
        // there.
        #[allow(
            unsafe_code,
            reason = "foundationdb::boot is unsafe only because its guard must be dropped before \
                  exit, which this frame guarantees"
        )]
        let network = unsafe { foundationdb::boot() };
        let started = std::time::Instant::now();
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                say(&format!("fdb_integration: cannot start a runtime: {e}"));
                drop(network);
                return ExitCode::FAILURE;
            }
        };
        let backend = match FdbBackend::new(&cluster_file) {
            Ok(b) => Arc::new(b),
            Err(e) => {
                say(&format!("fdb_integration: cannot open the cluster: {e}"));
                drop(runtime);
                drop(network);
                return ExitCode::FAILURE;
            }
        };
        println!("\nrunning {} tests", selected.len());
        let mut failures: Vec<(String, String)> = Vec::new();
        for (name, body) in &selected {
            say(&format!("test {name} ..."));
            let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
                runtime.block_on(body(Arc::clone(&backend)))
            }));
            let failed = match run {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(panic) => Some(
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "panicked".to_owned()),
                ),
            };
            match failed {
                None => println!("test {name} ... ok"),
                Some(why) => {
                    println!("test {name} ... FAILED");
                    failures.push((name.clone(), why));
                }
            }
        }
        let cleaned = runtime.block_on(backend.clean_up());
        // Every `Database` and `Transaction` is gone; stop the network last.
        drop(backend);
        drop(runtime);
        drop(network);
        let failed = failures.len();
        if let Err(e) = cleaned {
            failures.push((
                "clean-up of fdb-leader-election-tests/".to_owned(),
                e.to_string(),
            ));
        }
        if !failures.is_empty() {
            println!("\nfailures:");
            for (name, why) in &failures {
                println!("    {name}: {why}");
            }
        }
        let passed = selected.len().saturating_sub(failed);
        println!(
            "\n{}\n",
            result_line(
                passed,
                failed,
                filtered.len(),
                started.elapsed().as_secs_f64()
            )
        );
        if failures.is_empty() {
            say("fdb_integration: PASSED: every test against the cluster");
            ExitCode::SUCCESS
        } else {
            say(&format!(
                "fdb_integration: FAILED: {failed} of {}",
                selected.len()
            ));
            ExitCode::FAILURE
        }
    }

    /// Whether to print every trace (`DIFFERENTIAL_PRINT=1`), to see what each store does.
    fn print_traces() -> bool {
        std::env::var_os("DIFFERENTIAL_PRINT").is_some()
    }

    /// `ops`' traces on the embedded stores: MemDb, and SQLite when it is built (the
    /// FoundationDB tier builds it, with `cli`).
    async fn embedded_traces(ops: &[differential::Op]) -> Vec<(&'static str, Vec<String>)> {
        #[allow(unused_mut, reason = "without the sqlite feature, MemDb alone")]
        let mut traces = vec![("MemDb", differential::run(&MemBackend::new(), ops).await)];
        #[cfg(feature = "sqlite")]
        traces.push((
            "SQLite",
            differential::run(
                &crate::common::backends::SqliteBackend::with_handles(1),
                ops,
            )
            .await,
        ));
        traces
    }

    /// The scripted cases of the differential test (tests/common/differential.rs): on this
    /// cluster, each must give FoundationDB's expected trace; on MemDb and SQLite, the same or
    /// the declared deliberate difference.
    async fn differential_scripts(b: &FdbBackend) -> TestResult {
        let mut failures = Vec::new();
        for script in differential::scripts() {
            let ops = script.ops();
            let fdb = differential::run(b, &ops).await;
            let embedded = embedded_traces(&ops).await;
            if print_traces() {
                say(&format!("== {}", script.name));
                for (i, line) in fdb.iter().enumerate() {
                    let others: Vec<(&str, &str)> = embedded
                        .iter()
                        .map(|(store, t)| (*store, t.get(i).map_or("", String::as_str)))
                        .collect();
                    let same = others.iter().all(|(_, o)| o == line);
                    say(&format!("{} fdb: {line}", if same { "  " } else { "!!" }));
                    for (store, other) in others.iter().filter(|(_, o)| o != line) {
                        say(&format!("   {store}: {other}"));
                    }
                }
            }
            let what = format!("{} on FoundationDB", script.name);
            if let Err(report) = differential::compare(&what, &script.expected(false), &fdb) {
                failures.push(report);
            }
            for (store, trace) in &embedded {
                let what = format!("{} on {store}", script.name);
                if let Err(report) = differential::compare(&what, &script.expected(true), trace) {
                    failures.push(report);
                }
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n").into())
        }
    }

    /// Seeded random interleavings of three clients: FoundationDB gives the traces recorded in
    /// tests/data/differential-foundationdb.txt (which tests/differential.rs holds MemDb and
    /// SQLite to), and MemDb and SQLite give FoundationDB's. With `DIFFERENTIAL_RECORD=PATH`,
    /// FoundationDB's traces are written to PATH instead of compared with the record.
    async fn differential_random(b: &FdbBackend) -> TestResult {
        let record = std::env::var_os("DIFFERENTIAL_RECORD");
        let recorded = differential::recorded_traces();
        let mut traces = Vec::new();
        for seed in 0..differential::RECORDED_SEEDS {
            let ops = differential::random_script(seed, differential::RECORDED_STEPS);
            let fdb = differential::run(b, &ops).await;
            for (store, trace) in embedded_traces(&ops).await {
                differential::compare(
                    &format!("seed {seed}: {store} against FoundationDB"),
                    &fdb,
                    &trace,
                )?;
            }
            if record.is_none() {
                let index = usize::try_from(seed)?;
                let expected = recorded.get(index).ok_or("the record has fewer seeds")?;
                differential::compare(
                    &format!("seed {seed}: FoundationDB against its recorded trace"),
                    expected,
                    &fdb,
                )?;
            }
            traces.push(fdb);
        }
        if let Some(path) = record {
            std::fs::write(path, differential::format_recorded(&traces))?;
        }
        Ok(())
    }

    /// Each size case of the differential test counts on FoundationDB exactly what MemDb
    /// counts: a transaction of the case plus fillers up to exactly 10,000,000 bytes passes the
    /// size check, one byte more fails it with 2101.
    async fn differential_sizes(b: &FdbBackend) -> TestResult {
        for (name, ops, measured) in differential::size_cases() {
            for (over, expected) in [(0, "fits"), (1, "too large")] {
                let got = differential::size_boundary(b, &ops, measured, over).await;
                if got != expected {
                    return Err(format!("{name}, {over} byte(s) over: {got}").into());
                }
            }
        }
        Ok(())
    }

    /// `Database::run` retries an error its closure returns exactly as the differential test's
    /// table says for this client's version (by `on_error`, through the adapter's conversion),
    /// for every kind and code.
    async fn differential_run_retries(b: &FdbBackend) -> TestResult {
        let client = differential::FdbClient(foundationdb::api::get_max_api_version());
        for kind in differential::KINDS {
            for code in differential::CODES {
                let attempts = AtomicUsize::new(0);
                let outcome =
                    b.db.run(|_trx, _maybe_committed| {
                        let error = FdbBindingError::from(differential::error_of(kind, code));
                        differential::fail_first(&attempts, error)
                    })
                    .await;
                let retried = differential::run_retries_on_foundationdb(client, kind, code);
                if outcome.is_ok() != retried {
                    return Err(format!("{kind:?} {code:?} on {client:?}: {outcome:?}").into());
                }
                if let Err(e) = outcome {
                    // Stopped with the same code, and the kind that code has (what MemDb and
                    // SQLite return too: `run_loop_errors`).
                    let back = election_error(e);
                    let expected = differential::stopped_with(kind, code);
                    let same = matches!(
                        &back,
                        ElectionError::Database(t) if differential::shown(t) == expected
                    );
                    if !same {
                        return Err(format!(
                            "{kind:?} {code:?} came back as {back:?}, not {expected}"
                        )
                        .into());
                    }
                }
            }
        }
        // `maybe-committed-is-sticky`: the binding tells only the attempt after 1021.
        let errors = std::sync::Mutex::new(vec![1020, 1021]);
        let seen = std::sync::Mutex::new(Vec::new());
        b.db.run(|_trx, maybe_committed| {
            seen.lock()
                .map(|mut s| s.push(bool::from(maybe_committed)))
                .ok();
            let next = errors.lock().ok().and_then(|mut e| e.pop());
            async move {
                match next {
                    Some(code) => Err(FdbBindingError::NonRetryableFdbError(FdbError::from_code(
                        code,
                    ))),
                    None => Ok(()),
                }
            }
        })
        .await?;
        let seen = seen.into_inner().map_err(|_| "poisoned")?;
        if seen != differential::MAYBE_COMMITTED_ON_FOUNDATIONDB {
            return Err(format!("MaybeCommitted on FoundationDB: {seen:?}").into());
        }
        Ok(())
    }

    /// The adapter's `transact` retries exactly what MemDb's and SQLite's do, but for what this
    /// client's `on_error` does not retry (`codes-new-in-7-4-retried` on a 7.3 client).
    async fn differential_transact_retries(b: &FdbBackend) -> TestResult {
        let client = differential::FdbClient(foundationdb::api::get_max_api_version());
        let db = b.own_handle()?;
        for kind in differential::KINDS {
            for code in differential::CODES {
                let (outcome, _) =
                    differential::transact_failing_once(&db, Duration::from_secs(10), kind, code)
                        .await;
                let retried = differential::transact_retries_on_foundationdb(client, kind, code);
                if outcome.is_ok() != retried {
                    return Err(format!("{kind:?} {code:?} on {client:?}: {outcome:?}").into());
                }
            }
        }
        Ok(())
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

        async fn try_claim(
            &self,
            c: &Candidate,
        ) -> Result<(Action, ElectionResult), ElectionError> {
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

    // -----------------------------------------------------------------------------------------
    // The runner on `Arc<Database>`, in real time (paused tokio time would auto-advance while
    // FoundationDB futures are pending, so every transaction would time out).

    /// Lease 1.5 s, heartbeat 300 ms, 250 ms per transaction.
    const LEASE: Duration = Duration::from_millis(1_500);
    const HEARTBEAT: Duration = Duration::from_millis(300);

    fn runner_config() -> Result<ElectionConfig, Box<dyn Error>> {
        Ok(ElectionConfig::builder()
            .lease_duration(LEASE)
            .heartbeat_interval(HEARTBEAT)
            .candidate_timeout(Duration::from_secs(4))
            .transaction_timeout(Duration::from_millis(250))
            .takeover_stagger(Duration::from_millis(20))
            .build()?)
    }

    fn start_runner<D: ElectionDatabase>(
        db: D,
        subspace: &Subspace,
        name: &str,
        priority: i32,
    ) -> Result<Runner, Box<dyn Error>> {
        Ok(Runner::builder(db, subspace.clone())
            .label(name)
            .priority(Priority::new(priority))
            .payload(format!("{name}:7000"))
            .config(runner_config()?)
            .start()?)
    }

    /// The one runner of `runners` that believes it leads; an error if two do.
    fn sole_leader(runners: &[&Runner]) -> Result<Option<usize>, Box<dyn Error>> {
        let leading: Vec<usize> = (0..runners.len())
            .filter(|&i| runners.get(i).is_some_and(|r| r.is_leader()))
            .collect();
        match leading.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(*one)),
            _ => Err(format!("runners {leading:?} lead at once").into()),
        }
    }

    /// Waits (checking exclusion every 5 ms) until `pick` finds a leader, for at most `bound`.
    async fn wait_for_leader(
        runners: &[&Runner],
        bound: Duration,
        pick: impl Fn(usize) -> bool,
    ) -> Result<(usize, Duration), Box<dyn Error>> {
        let start = Instant::now();
        while start.elapsed() < bound {
            if let Some(i) = sole_leader(runners)?.filter(|&i| pick(i)) {
                return Ok((i, start.elapsed()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Err(format!("no leader within {bound:?}").into())
    }

    /// `Arc<Database>` that notes the largest transaction it commits, as FoundationDB counts
    /// it (`get_approximate_size` just before the commit).
    #[derive(Clone)]
    struct Measured {
        db: Arc<Database>,
        largest: Arc<AtomicU64>,
    }

    impl ElectionDatabase for Measured {
        type Txn = Arc<Transaction>;

        async fn transact<F, Fut, T>(&self, timeout: Duration, body: F) -> Result<T, ElectionError>
        where
            F: Fn(Self::Txn) -> Fut + Send + Sync,
            Fut: Future<Output = Result<T, ElectionError>> + Send,
            T: Send,
        {
            let largest = Arc::clone(&self.largest);
            let body = &body;
            self.db
                .transact(timeout, move |txn| {
                    let largest = Arc::clone(&largest);
                    async move {
                        let out = body(Arc::clone(&txn)).await?;
                        let size = txn
                            .get_approximate_size()
                            .await
                            .map_err(|e| ElectionError::Database(TxnError::from(e)))?;
                        largest.fetch_max(u64::try_from(size).unwrap_or(0), Ordering::SeqCst);
                        Ok(out)
                    }
                })
                .await
        }
    }

    /// The sharded election at `MAX_SHARDS` (tests/common/shard_limits.rs): FoundationDB
    /// itself refuses any value or transaction past its limits.
    async fn sharded_largest_layout(b: &FdbBackend) -> TestResult {
        let db = Measured {
            db: Arc::new(Database::new(Some(&b.cluster_file))?),
            largest: Arc::new(AtomicU64::new(0)),
        };
        let subspace = Subspace::from_bytes(b.fresh_prefix());
        let figures = crate::common::shard_limits::largest_layout(db.clone(), subspace)
            .await
            .map_err(|e| e.to_string())?;
        let largest = db.largest.load(Ordering::SeqCst);
        say(&format!(
            "  {figures:?}; largest transaction {largest} bytes (FoundationDB's count)"
        ));
        // The sharded election's budget is 1,000,000 bytes as FoundationDB counts them (a tenth
        // of its 10,000,000-byte limit): its count of our largest must agree.
        if largest > 1_000_000 {
            return Err(format!("a transaction of {largest} bytes, past the budget").into());
        }
        Ok(())
    }

    async fn runner_crash_failover(b: &FdbBackend) -> TestResult {
        let db = Arc::new(Database::new(Some(&b.cluster_file))?);
        let subspace = Subspace::from_bytes(b.fresh_prefix());
        let runners = ["a", "b", "c"]
            .iter()
            .map(|name| start_runner(Arc::clone(&db), &subspace, name, 1))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Runner> = runners.iter().collect();
        let (first, _) = wait_for_leader(&refs, LEASE * 4, |_| true).await?;
        let ballot = refs
            .get(first)
            .and_then(|r| r.leadership())
            .ok_or("the leader has no guard")?
            .ballot();
        // Let everyone see a few renewals, then crash the leader: no resignation.
        tokio::time::sleep(HEARTBEAT * 3).await;
        refs.get(first).ok_or("no leader")?.abort();
        let (next, took) = wait_for_leader(&refs, LEASE * 4, |i| i != first).await?;
        say(&format!(
            "  failover after a crash took {took:?} (lease {LEASE:?})"
        ));
        if took > LEASE + HEARTBEAT * 2 {
            return Err(format!("failover took {took:?}, more than lease + 2 heartbeats").into());
        }
        let successor = refs
            .get(next)
            .and_then(|r| r.leadership())
            .ok_or("the successor has no guard")?;
        if successor.ballot() != Ballot::new(ballot.get() + 1) {
            return Err(format!("successor ballot {} after {ballot}", successor.ballot()).into());
        }
        for r in &runners {
            r.shutdown().await;
        }
        Ok(())
    }

    async fn runner_priority_handover(b: &FdbBackend) -> TestResult {
        let db = Arc::new(Database::new(Some(&b.cluster_file))?);
        let subspace = Subspace::from_bytes(b.fresh_prefix());
        let low = start_runner(Arc::clone(&db), &subspace, "low", 1)?;
        let old = tokio::time::timeout(LEASE * 4, low.elected())
            .await?
            .ok_or("the first runner stopped")?;
        let high = start_runner(Arc::clone(&db), &subspace, "high", 5)?;
        let started = Instant::now();
        let new = tokio::time::timeout(LEASE * 4, high.elected())
            .await?
            .ok_or("the higher priority stopped")?;
        let took = started.elapsed();
        say(&format!("  handover took {took:?}"));
        // The old guard ends before the new one is issued: no overlap.
        if !old.is_cancelled() {
            return Err("the old leader's guard was still valid when the successor led".into());
        }
        if new.ballot() != Ballot::new(old.ballot().get() + 1) {
            return Err(format!("ballot {} after {}", new.ballot(), old.ballot()).into());
        }
        if took > LEASE {
            return Err(format!("a cooperative handover took {took:?}, a lease or more").into());
        }
        high.shutdown().await;
        low.shutdown().await;
        Ok(())
    }

    /// One cycle of `c` in a transaction of its own that reports its conflicting keys, not
    /// yet committed.
    async fn open_cycle(
        db: &Database,
        election: &LeaderElection,
        c: &Candidate,
    ) -> Result<(Transaction, fdb_leader_election::Cycle), Box<dyn Error>> {
        let trx = db.create_trx()?;
        trx.set_option(TransactionOption::ReportConflictingKeys)?;
        let cycle = election.run_election_cycle(&&trx, c).await?;
        Ok((trx, cycle))
    }

    /// Commits a cycle's transaction; a conflict is an error naming the conflicting keys.
    async fn commit_cycle(
        trx: Transaction,
        cycle: fdb_leader_election::Cycle,
        c: &Candidate,
        who: &str,
    ) -> Result<ElectionResult, Box<dyn Error>> {
        match trx.commit().await {
            Ok(_) => Ok(c.adopt(cycle)),
            Err(failed) => {
                let keys = failed.conflicting_keys().await.unwrap_or_default();
                let keys: Vec<String> = keys
                    .iter()
                    .map(|k| {
                        format!(
                            "[{}, {})",
                            fdb_leader_election::printable_key(k.begin()),
                            fdb_leader_election::printable_key(k.end())
                        )
                    })
                    .collect();
                Err(format!("{who}'s cycle failed ({failed}); conflicting keys: {keys:?}").into())
            }
        }
    }

    async fn follower_cycles_never_conflict_with_renewals(b: &FdbBackend) -> TestResult {
        const ROUNDS: usize = 50;
        let db = ElectionDb::new(b);
        let cfg = runner_config()?;
        db.init(&cfg).await?;
        let leader = Candidate::new(CandidateId::random("leader")?, Priority::new(1));
        let follower = Candidate::new(CandidateId::random("follower")?, Priority::new(1));
        db.register(&leader).await?;
        db.register(&follower).await?;
        let (_, first) = db.cycle(&leader).await?;
        if !first.is_leader() {
            return Err("the first candidate did not lead".into());
        }
        let election = db.election().clone();
        let mut renewals = 0_usize;
        for _ in 0..ROUNDS {
            // The follower reads first; the leader renews and commits; then the follower
            // commits. Its snapshot read of the leader record must not conflict.
            let (f_trx, f_cycle) = open_cycle(db.db, &election, &follower).await?;
            let (l_trx, l_cycle) = open_cycle(db.db, &election, &leader).await?;
            if l_cycle.action() == Action::Renewed {
                renewals += 1;
            }
            commit_cycle(l_trx, l_cycle, &leader, "the leader").await?;
            commit_cycle(f_trx, f_cycle, &follower, "a follower").await?;
        }
        say(&format!(
            "  {ROUNDS} follower cycles, {renewals} renewals committed between their reads and commits, 0 conflicts"
        ));
        if renewals == 0 {
            return Err("the leader never renewed: the check proved nothing".into());
        }
        db.clear().await?;
        Ok(())
    }

    async fn commit_timeouts_come_back_maybe_committed(b: &FdbBackend) -> TestResult {
        // The runner's own bound: a tokio timeout, reported as maybe committed.
        let db = b.own_handle()?;
        let prefix = b.fresh_prefix();
        let probe = key(&prefix, "probe");
        let tiny = db
            .transact(Duration::from_micros(1), |trx| {
                let probe = probe.clone();
                async move {
                    ElectionTxn::get(&trx, &probe, ReadMode::Serializable).await?;
                    ElectionTxn::set(&trx, &probe, b"x");
                    Ok(())
                }
            })
            .await;
        match &tiny {
            Ok(()) => {}
            Err(ElectionError::Database(t))
                if t.is_maybe_committed()
                    && Error::source(t).is_some_and(|s| s.is::<TransactionTimedOut>()) => {}
            Err(e) => return Err(format!("a 1 µs transact returned {e:?}").into()),
        }

        // FoundationDB's own timer (a database-wide transaction timeout an operator may set):
        // the body waits until just before it fires, so it often fires during the commit.
        let (mut committed, mut unknown, mut during_body) = (0, 0, 0);
        for attempt in 0..40_u64 {
            let timeout_ms: u64 = 20;
            db.set_option(DatabaseOption::TransactionTimeout(20))?;
            let margin = Duration::from_micros(250 * (attempt % 12));
            let body_done = Arc::new(AtomicBool::new(false));
            let k = key(&prefix, &format!("t{attempt}"));
            let result = db
                .transact(Duration::from_secs(5), |trx| {
                    let (k, body_done) = (k.clone(), Arc::clone(&body_done));
                    async move {
                        let started = Instant::now();
                        ElectionTxn::get(&trx, &k, ReadMode::Serializable).await?;
                        let fire = started + Duration::from_millis(timeout_ms);
                        tokio::time::sleep_until(fire.checked_sub(margin).unwrap_or(fire)).await;
                        ElectionTxn::set(&trx, &k, b"x");
                        body_done.store(true, Ordering::SeqCst);
                        Ok(())
                    }
                })
                .await;
            let after_body = body_done.load(Ordering::SeqCst);
            match result {
                Ok(()) => committed += 1,
                Err(ElectionError::Database(t))
                    if t.code() == Some(1031) || t.code() == Some(1004) =>
                {
                    if after_body {
                        if t.kind() != TxnErrorKind::CommitUnknown {
                            return Err(format!("a commit that timed out came back as {t}").into());
                        }
                        unknown += 1;
                    } else {
                        if t.is_maybe_committed() {
                            return Err(format!("a read that timed out came back as {t}").into());
                        }
                        during_body += 1;
                    }
                }
                Err(e) => return Err(format!("attempt {attempt}: {e:?}").into()),
            }
        }
        db.set_option(DatabaseOption::TransactionTimeout(0))?;
        say(&format!(
            "  FoundationDB timeouts: {unknown} during the commit (maybe committed), \
             {during_body} during the body, {committed} commits in time"
        ));
        Ok(())
    }

    /// Counts the transactions the runners run.
    #[derive(Clone)]
    struct Counting {
        db: Arc<Database>,
        calls: Arc<AtomicU64>,
    }

    impl ElectionDatabase for Counting {
        type Txn = Arc<Transaction>;

        fn transact<F, Fut, T>(
            &self,
            timeout: Duration,
            body: F,
        ) -> impl Future<Output = Result<T, ElectionError>> + Send
        where
            F: Fn(Self::Txn) -> Fut + Send + Sync,
            Fut: Future<Output = Result<T, ElectionError>> + Send,
            T: Send,
        {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.db.transact(timeout, body)
        }
    }

    async fn runners_under_a_watch_limit_do_not_spin(b: &FdbBackend) -> TestResult {
        const HEARTBEATS: u32 = 30;
        let db = b.own_handle()?;
        db.set_option(DatabaseOption::MaxWatches(1))?;
        let counting = Counting {
            db: Arc::clone(&db),
            calls: Arc::new(AtomicU64::new(0)),
        };
        let subspace = Subspace::from_bytes(b.fresh_prefix());
        let a = start_runner(counting.clone(), &subspace, "a", 1)?;
        let c = start_runner(counting.clone(), &subspace, "c", 1)?;
        let refs = [&a, &c];
        wait_for_leader(&refs, LEASE * 4, |_| true).await?;
        let before = counting.calls.load(Ordering::SeqCst);
        let start = Instant::now();
        while start.elapsed() < HEARTBEAT * HEARTBEATS {
            sole_leader(&refs)?;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let calls = counting.calls.load(Ordering::SeqCst).saturating_sub(before);
        say(&format!(
            "  {calls} transactions in {HEARTBEATS} heartbeats, two runners, MaxWatches(1)"
        ));
        // A cycle and a watch per runner and heartbeat is about 120; a runner re-arming a
        // refused watch at once would run thousands.
        if calls > u64::from(HEARTBEATS) * 8 {
            return Err(
                format!("{calls} transactions in {HEARTBEATS} heartbeats: spinning").into(),
            );
        }
        a.shutdown().await;
        c.shutdown().await;
        Ok(())
    }

    /// `fdb-leader run --cluster-file`: two processes; after the higher-priority one has
    /// taken over, SIGTERM ends it cleanly (exit 0: child stopped, resigned) and the other
    /// leads again.
    async fn cli_run_exits_cleanly_after_a_leader_change(b: &FdbBackend) -> TestResult {
        let Some(bin) = option_env!("CARGO_BIN_EXE_fdb-leader") else {
            say("  skipped: fdb-leader is built only with the `cli` feature");
            return Ok(());
        };
        let dir = tempfile::tempdir()?;
        let election = format!(
            "it-{:016x}",
            rand::rngs::StdRng::from_os_rng().random::<u64>()
        );
        let start = |name: &str, priority: &str| -> std::io::Result<Supervisor> {
            let out = std::fs::File::create(dir.path().join(format!("{name}.out")))?;
            let child = std::process::Command::new(bin)
                .args(["--cluster-file", &b.cluster_file, "--election", &election])
                .args(["run", "--name", name, "--priority", priority])
                .args(["--lease", "2s", "--heartbeat", "500ms", "--"])
                .args(["sh", "-c", &format!("echo {name} leads; exec sleep 1000")])
                .stdout(out)
                .stderr(std::fs::File::create(
                    dir.path().join(format!("{name}.err")),
                )?)
                .spawn()?;
            Ok(Supervisor(child))
        };
        let leads = |name: &str| {
            std::fs::read_to_string(dir.path().join(format!("{name}.out")))
                .map(|s| s.matches(&format!("{name} leads")).count())
                .unwrap_or(0)
        };
        let wait = |what: String, bound: Duration, f: &dyn Fn() -> bool| {
            let start = std::time::Instant::now();
            while start.elapsed() < bound {
                if f() {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let err = |name: &str| {
                std::fs::read_to_string(dir.path().join(format!("{name}.err"))).unwrap_or_default()
            };
            Err(format!(
                "{what} within {bound:?}\n--- low's stderr:\n{}--- high's stderr:\n{}",
                err("low"),
                err("high")
            ))
        };
        let mut low = start("low", "1")?;
        wait("low to lead".into(), Duration::from_secs(10), &|| {
            leads("low") == 1
        })?;
        let mut high = start("high", "5")?;
        wait("high to take over".into(), Duration::from_secs(10), &|| {
            leads("high") == 1
        })?;
        // Right after the leader change: SIGTERM to the new leader.
        let status = std::process::Command::new("kill")
            .args(["-TERM", &high.0.id().to_string()])
            .status()?;
        if !status.success() {
            return Err("kill -TERM failed".into());
        }
        let exited = wait_exit(&mut high.0, Duration::from_secs(10))?;
        if exited.code() != Some(0) {
            let err = std::fs::read_to_string(dir.path().join("high.err")).unwrap_or_default();
            return Err(format!("fdb-leader exited with {exited} after SIGTERM:\n{err}").into());
        }
        wait("low to lead again".into(), Duration::from_secs(10), &|| {
            leads("low") == 2
        })?;
        std::process::Command::new("kill")
            .args(["-TERM", &low.0.id().to_string()])
            .status()?;
        let exited = wait_exit(&mut low.0, Duration::from_secs(10))?;
        if exited.code() != Some(0) {
            return Err(format!("the last fdb-leader exited with {exited}").into());
        }
        Ok(())
    }

    /// A started `fdb-leader run`, killed (SIGKILL) if still running when dropped: its
    /// watchdog then kills its child's group, so a failed scenario leaves nothing behind.
    struct Supervisor(std::process::Child);

    impl Drop for Supervisor {
        fn drop(&mut self) {
            if matches!(self.0.try_wait(), Ok(None)) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }

    /// Waits for `child` to exit, for at most `bound` (then kills it).
    fn wait_exit(
        child: &mut std::process::Child,
        bound: Duration,
    ) -> Result<std::process::ExitStatus, Box<dyn Error>> {
        let start = std::time::Instant::now();
        while start.elapsed() < bound {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        Err(format!("fdb-leader did not exit within {bound:?}").into())
    }
}
