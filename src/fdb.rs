//! FoundationDB adapter (cargo feature `fdb`).
//!
//! With this feature, anything that dereferences to [`foundationdb::Transaction`] implements
//! [`ElectionTxn`]: the [`RetryableTransaction`](foundationdb::RetryableTransaction) handed to a
//! [`Database::run`](foundationdb::Database::run) closure, an `Arc<Transaction>`, a
//! `&Transaction`. Every election operation therefore runs inside the caller's own
//! transaction and commits, or retries, together with the caller's writes.
//!
//! On a `RetryableTransaction` or an `Arc<Transaction>`, with [`ElectionTxn`] in scope,
//! `trx.get(key, ReadMode::Snapshot)` is the election's read. On a plain `Transaction` (or
//! `&Transaction`), method syntax finds `Transaction`'s own `get(key, snapshot: bool)` first:
//! pass `&trx` to code that is generic over `ElectionTxn` instead.
//!
//! # Choosing the FoundationDB API version
//!
//! `foundationdb-sys` needs exactly one API-version feature. This crate passes them through:
//!
//! | feature                | effect                                                        |
//! |------------------------|---------------------------------------------------------------|
//! | `fdb-7_1`              | `fdb` + `foundationdb/fdb-7_1`                                |
//! | `fdb-7_3`              | `fdb` + `foundationdb/fdb-7_3`                                |
//! | `fdb-7_4`              | `fdb` + `foundationdb/fdb-7_4`                                |
//! | `embedded-fdb-include` | compile against the C headers bundled with `foundationdb-sys` instead of the system's `/usr/include/foundationdb` |
//! | `fdb`                  | the adapter itself, with no version of its own                |
//!
//! ```toml
//! [dependencies]
//! fdb-leader-election = { version = "0.1", features = ["fdb-7_3"] }
//! ```
//!
//! `fdb` alone deliberately picks no default version: cargo unifies features, so an
//! application that already depends on `foundationdb` with, say, `fdb-7_4` can enable plain
//! `fdb` here and both crates use 7.4; a default would then select a second version and break
//! the build. If no crate in the build selects a version, `foundationdb-sys`'s build script
//! stops with "foundationdb-sys requires a version feature to be specified" and lists the
//! version features, which have the same names here. For the same reason, never build with
//! `--all-features`: it selects three API versions at once.
//!
//! Building needs `libclang` (for bindgen); linking a binary needs `libfdb_c` of a matching
//! or newer version.
//!
//! # Use inside `Database::run`
//!
//! Election errors convert into [`FdbBindingError`] with `?`, and FoundationDB's retry loop
//! sees through them: a conflict, a transaction that became too old, an unknown commit result
//! raised by an election operation is retried exactly as if FoundationDB had raised it in the
//! closure. Errors that are not database errors (a corrupt record, an unregistered candidate,
//! ...) end the loop and come back as [`FdbBindingError::CustomError`] holding the
//! [`ElectionError`] (or the [`TxnError`]), ready to be downcast.
//!
//! ```no_run
//! use fdb_leader_election::{Candidate, CandidateId, LeaderElection, Priority};
//! use foundationdb::{Database, FdbBindingError};
//! use foundationdb_tuple::Subspace;
//!
//! async fn one_cycle(db: &Database) -> Result<(), Box<dyn std::error::Error>> {
//!     let election = LeaderElection::new(Subspace::from("scheduler"));
//!     let me = Candidate::new(CandidateId::random("worker")?, Priority::new(1));
//!     db.run(|trx, _maybe_committed| {
//!         let (election, me) = (election.clone(), me.clone());
//!         async move {
//!             election.initialize(&trx).await?;
//!             election.register_candidate(&trx, &me).await?;
//!             Ok::<(), FdbBindingError>(())
//!         }
//!     })
//!     .await?;
//!     // Conflicts, too-old transactions and unknown results raised by the election are
//!     // retried by `run`; the cycle is adopted only once `run` has committed it.
//!     let cycle = db
//!         .run(|trx, _maybe_committed| {
//!             let (election, me) = (election.clone(), me.clone());
//!             async move { Ok(election.run_election_cycle(&trx, &me).await?) }
//!         })
//!         .await?;
//!     if me.adopt(cycle).is_leader() {
//!         let token = me.fencing_token().ok_or("lost the lease already")?;
//!         db.run(|trx, _maybe_committed| {
//!             let election = election.clone();
//!             async move {
//!                 // Commits only while `token` is the leading ballot.
//!                 election.fence(&trx, token).await?;
//!                 trx.set(b"jobs/42", b"assigned");
//!                 Ok(())
//!             }
//!         })
//!         .await?;
//!     }
//!     Ok(())
//! }
//! # fn main() {
//! #     let _ = one_cycle;
//! # }
//! ```
//!
//! # Errors
//!
//! An [`FdbError`] becomes a [`TxnError`] that keeps the numeric code
//! ([`TxnError::code`]) and the `FdbError` as its source. Its [`TxnErrorKind`] depends on the
//! code and on whether it came from a **commit** ([`TransactionCommitError`]) or from any
//! other operation (a read, a watch, `on_error`):
//!
//! | code(s)                                                      | operation          | commit             |
//! |--------------------------------------------------------------|--------------------|--------------------|
//! | 1020 `not_committed`                                         | `Conflict`         | `Conflict`         |
//! | 1007 `transaction_too_old`                                   | `TooOld`           | `TooOld`           |
//! | 1021 `commit_unknown_result`, 1039 `cluster_version_changed` | `CommitUnknown`    | `CommitUnknown`    |
//! | 1004 `timed_out`, 1031 `transaction_timed_out`               | `Unavailable`      | `CommitUnknown`    |
//! | 1009 `future_version`, 1037 `process_behind`, 1038 `database_locked`, 1042/1078 proxy memory limits, 1051/1213/1223/1235 throttling | `Unavailable` | `Unavailable` |
//! | 1032 `too_many_watches`                                      | `Fatal`            | `Fatal`            |
//! | any other code FoundationDB calls maybe-committed            | `CommitUnknown`    | `CommitUnknown`    |
//! | any other code FoundationDB calls retryable                  | `OtherRetryable`   | `OtherRetryable`   |
//! | everything else                                              | `Fatal`            | `Fatal`            |
//!
//! A commit that timed out (1004, 1031) may have applied: FoundationDB stops waiting for it,
//! not the commit already on its way. The same timeout while reading means the attempt never
//! committed. FoundationDB's own retry loop does not retry 1004 and 1031 (a timeout the
//! caller set is final for that loop); they are retryable here so that a driver that owns
//! its loop, such as the election runner, tries again later.
//!
//! In the other direction, an [`ElectionError::Database`] (or a [`TxnError`]) that carries a
//! code becomes [`FdbBindingError::NonRetryableFdbError`] with that code. Despite its name,
//! `Database::run` hands that variant's error to `Transaction::on_error`, which backs off and
//! retries every retryable code and returns the others. Anything else becomes
//! [`FdbBindingError::CustomError`].
//!
//! # The runner's transactions
//!
//! `Arc<Database>` implements [`ElectionDatabase`], so it drives the
//! [runner](crate::runner) and [`LeaderElection::run_cycle`](crate::LeaderElection::run_cycle).
//! Its loop is not `Database::run`, which retries unknown results (1021, 1039) itself and
//! reports a commit that timed out like any other failure. Instead each call creates a
//! transaction, runs the body on it (as an `Arc<Transaction>`) and commits it, and:
//!
//! - retries, through `on_error` (FoundationDB's back-off), only conflicts (1020) and
//!   `transaction_too_old` (1007): known not to have committed;
//! - returns every other error, with the kind above: a commit that may have applied comes
//!   back as [`TxnErrorKind::CommitUnknown`], which the election recognises at its next cycle;
//! - is bounded by one timer, the caller's tokio timeout. The adapter does not set
//!   FoundationDB's `Timeout` transaction option, so the two never race; a call that runs
//!   out of time is reported as maybe committed
//!   ([`TransactionTimedOut`]), and dropping it destroys the
//!   transaction, which cancels its outstanding reads. A database-wide
//!   `DatabaseOption::TransactionTimeout` you set yourself still applies, classified as in
//!   the table.
//!
//! # Watches
//!
//! [`ElectionTxn::watch`] arms a FoundationDB watch. As in FoundationDB, it fires only after
//! the transaction that created it commits; if that transaction is dropped or fails, the watch
//! resolves with an error. Each database allows 10,000 outstanding watches by default; drop
//! watches that are no longer needed.
//!
//! Every error one of these transactions meets is logged at debug level (target
//! `fdb_leader_election::fdb`, message `FoundationDB transaction error`) with its `code`, its
//! `phase` (`operation` or `commit`) and whether the loop `retried` it; the caller's timeout
//! is logged as 1031 (`transaction_timed_out`, FoundationDB's code for the same event under
//! its own timeout option), `phase=commit` if the commit had been sent. The chaos harness
//! counts these lines.
//!
//! # Planted faults, in debug builds only
//!
//! The chaos harness checks that its checks catch a mishandled unknown commit on a real
//! cluster. In a **debug** build, with one of these variables set to `1`, the runner's
//! transactions mishandle a commit whose result is unknown (1021, 1039, a commit that timed
//! out, the caller's timeout while the commit was in flight), log a warning once, and log
//! each use at debug level (`planted fault: ...`):
//!
//! - `FDB_LEADER_DEBUG_UNKNOWN_AS_NOT_COMMITTED`: reported as not committed (1020), and
//!   retried at once like a conflict. The election is meant to survive this: leadership is
//!   adopted only from a confirmed commit or from the candidate's own attempt id found in the
//!   record, never from how a failure was classified.
//! - `FDB_LEADER_DEBUG_UNKNOWN_AS_COMMITTED`: reported as committed, so the election adopts
//!   a cycle whose write may never have landed (a renewal or an acquisition the store does not
//!   show).
//!
//! Release builds never read the variables (they are not in the binary).

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use foundationdb::options::{ConflictRangeType, StreamingMode};
use foundationdb::{
    Database, FdbBindingError, FdbError, RangeOption, Transaction, TransactionCommitError,
};

use crate::error::ElectionError;
use crate::store::database::{ElectionDatabase, TransactionTimedOut};
use crate::store::fdb_codes::{self, Phase, Predicates, code};
use crate::store::txn::{ElectionTxn, KeyValue, ReadMode, TxnError, TxnErrorKind, Watch};

fn is_snapshot(mode: ReadMode) -> bool {
    match mode {
        ReadMode::Serializable => false,
        ReadMode::Snapshot => true,
    }
}

/// Runs every election operation on the FoundationDB transaction `self` dereferences to.
///
/// The methods call `Transaction`'s inherent methods by path (`Transaction::get(trx, ..)`),
/// never by method syntax, so they cannot resolve back to this trait.
impl<T> ElectionTxn for T
where
    T: Deref<Target = Transaction> + Send + Sync,
{
    fn get(
        &self,
        key: &[u8],
        mode: ReadMode,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, TxnError>> + Send {
        // The read is issued now; the returned future borrows nothing.
        let read = Transaction::get(self, key, is_snapshot(mode));
        async move { Ok(read.await?.map(|value| value.to_vec())) }
    }

    fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> impl Future<Output = Result<Vec<KeyValue>, TxnError>> + Send {
        let trx: &Transaction = self;
        let snapshot = is_snapshot(mode);
        async move {
            let mut out = Vec::new();
            if begin >= end {
                return Ok(out);
            }
            let mut opt = RangeOption {
                // The caller wants the whole range: fetch it in as few round trips as possible.
                mode: StreamingMode::WantAll,
                ..RangeOption::from((begin, end))
            };
            loop {
                // `iteration` only matters in `StreamingMode::Iterator`.
                let batch = Transaction::get_range(trx, &opt, 1, snapshot).await?;
                out.extend(
                    batch
                        .iter()
                        .map(|kv| (kv.key().to_vec(), kv.value().to_vec())),
                );
                // `None` once FoundationDB reports no more rows; otherwise the same range
                // starting just after the last key returned.
                match opt.next_range(&batch) {
                    Some(next) => opt = next,
                    None => return Ok(out),
                }
            }
        }
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        Transaction::set(self, key, value);
    }

    fn clear(&self, key: &[u8]) {
        Transaction::clear(self, key);
    }

    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), TxnError> {
        // The single-key range [key, key + \x00).
        let mut end = Vec::with_capacity(key.len().saturating_add(1));
        end.extend_from_slice(key);
        end.push(0);
        Transaction::add_conflict_range(self, key, &end, ConflictRangeType::Read)?;
        Ok(())
    }

    fn read_version(&self) -> impl Future<Output = Result<Option<u64>, TxnError>> + Send {
        // Cached by the transaction once its first read has taken it.
        let version = Transaction::get_read_version(self);
        async move { Ok(u64::try_from(version.await?).ok()) }
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, TxnError> {
        // FoundationDB reports watch errors (too many watches, the creating transaction
        // failed) through the future, never synchronously.
        let watch = Transaction::watch(self, key);
        Ok(Box::pin(async move { Ok(watch.await?) }))
    }
}

/// What `libfdb_c` says about a code this crate does not name.
fn predicates(err: FdbError) -> Predicates {
    Predicates {
        maybe_committed: err.is_maybe_committed(),
        retryable: err.is_retryable(),
    }
}

/// The [`TxnError`] for `err`, raised in `phase` (see the module docs for the table).
fn txn_error(err: FdbError, phase: Phase) -> TxnError {
    let kind = fdb_codes::kind_of(err.code(), phase, || predicates(err));
    TxnError::with_source(kind, err).with_code(err.code())
}

/// Keeps the code and the [`FdbError`] (as the source); the kind follows the table in the
/// [module docs](self#errors), for an error that did not come from a commit.
impl From<FdbError> for TxnError {
    fn from(err: FdbError) -> Self {
        txn_error(err, Phase::Operation)
    }
}

/// Like `From<FdbError>`, classified as a commit's error: a commit that timed out (1004, 1031)
/// may have applied and is therefore [`TxnErrorKind::CommitUnknown`]. The transaction inside
/// the commit error is dropped.
impl From<TransactionCommitError> for TxnError {
    fn from(err: TransactionCommitError) -> Self {
        txn_error(FdbError::from(err), Phase::Commit)
    }
}

/// A `TxnError` with a code becomes [`FdbBindingError::NonRetryableFdbError`] with that code,
/// so that `Database::run` retries it when FoundationDB considers it retryable; one without a
/// code becomes [`FdbBindingError::CustomError`].
impl From<TxnError> for FdbBindingError {
    fn from(err: TxnError) -> Self {
        match err.code() {
            Some(code) => retried_by_run(code),
            None => FdbBindingError::CustomError(Box::new(err)),
        }
    }
}

/// An [`ElectionError::Database`] with a code becomes
/// [`FdbBindingError::NonRetryableFdbError`] with that code, so that `Database::run` retries
/// it when FoundationDB considers it retryable; every other error becomes
/// [`FdbBindingError::CustomError`] holding the `ElectionError`.
impl From<ElectionError> for FdbBindingError {
    fn from(err: ElectionError) -> Self {
        match &err {
            ElectionError::Database(txn) => match txn.code() {
                Some(code) => retried_by_run(code),
                None => FdbBindingError::CustomError(Box::new(err)),
            },
            _ => FdbBindingError::CustomError(Box::new(err)),
        }
    }
}

/// The binding error that `Database::run` retries when `code` is retryable.
///
/// In foundationdb 0.11.0, `src/database.rs`, `run_with_hooks` takes the `FdbError` out of a
/// closure error with `e.get_fdb_error()` (line 170), and `FdbBindingError::get_fdb_error`
/// returns it for `NonRetryableFdbError` (`src/error.rs`, lines 149-151). `run_with_hooks`
/// then calls `transaction.on_error(fdb_err)` (line 175), which backs off and runs the closure
/// again for a retryable code, and returns the error for any other code (lines 189-190). So,
/// the variant's name notwithstanding, this is how a closure asks `run` to retry.
/// `CustomError(Box<ElectionError>)` would not be retried: `get_fdb_error` only looks inside a
/// `CustomError` for an `FdbError` or an `FdbBindingError`.
fn retried_by_run(code: i32) -> FdbBindingError {
    FdbBindingError::NonRetryableFdbError(FdbError::from_code(code))
}

/// The [`ElectionError`] that a failed `Database::run` stands for; the inverse of
/// `From<ElectionError> for FdbBindingError`. The runner uses it to report FoundationDB
/// failures with their kind and code.
///
/// - `CustomError` holding an `ElectionError` (every election error except a database error
///   with a code, and a database error without a code): that error, unchanged.
/// - `CustomError` holding a `TxnError` (the adapter's `From<TxnError>` for errors without a
///   code): `ElectionError::Database` of it.
/// - Anything carrying an `FdbError` (`NonRetryableFdbError`, which is what a database error
///   with a code became, and what `run` returns when `on_error` gives up or a commit fails;
///   or a boxed `FdbError` / `FdbBindingError`): `ElectionError::Database` of
///   `TxnError::from(fdb_error)`, which restores the kind and the code.
/// - Anything else (`ReferenceToTransactionKept`, tuple-packing errors, foreign custom
///   errors): a fatal `ElectionError::Database` with the binding error as its source.
pub fn election_error(err: FdbBindingError) -> ElectionError {
    let custom = match err {
        FdbBindingError::CustomError(custom) => custom,
        other => return fdb_error_or_fatal(other),
    };
    let custom = match custom.downcast::<ElectionError>() {
        Ok(election) => return *election,
        Err(custom) => custom,
    };
    let custom = match custom.downcast::<TxnError>() {
        Ok(txn) => return ElectionError::Database(*txn),
        Err(custom) => custom,
    };
    let custom = match custom.downcast::<FdbError>() {
        Ok(fdb) => return ElectionError::Database(TxnError::from(*fdb)),
        Err(custom) => custom,
    };
    match custom.downcast::<FdbBindingError>() {
        Ok(binding) => election_error(*binding),
        Err(custom) => fdb_error_or_fatal(FdbBindingError::CustomError(custom)),
    }
}

/// A binding error that is not a boxed election error: its `FdbError` if it carries one,
/// otherwise a fatal database error caused by it.
fn fdb_error_or_fatal(err: FdbBindingError) -> ElectionError {
    match err.get_fdb_error() {
        Some(fdb) => ElectionError::Database(TxnError::from(fdb)),
        None => ElectionError::Database(TxnError::with_source(TxnErrorKind::Fatal, err)),
    }
}

/// The runner's transactions on FoundationDB (see
/// [the module docs](self#the-runners-transactions)): a loop of `create_trx`, the body, `commit` and `on_error` that retries only conflicts and
/// `transaction_too_old`, bounded by the tokio timeout alone.
///
/// `Txn` is `Arc<Transaction>`, which implements [`ElectionTxn`] like the
/// `RetryableTransaction` of `Database::run`. The body must not keep a clone of it past its
/// future: the commit needs the transaction back (as `Database::run` does, it fails with a
/// fatal error otherwise).
impl ElectionDatabase for Arc<Database> {
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
        let db = Arc::clone(self);
        async move {
            // Whether the attempt in flight had sent its commit when the time ran out.
            let committing = AtomicBool::new(false);
            let deadline = tokio::time::Instant::now().checked_add(timeout);
            let attempts = attempts(&db, &body, &committing, deadline);
            match tokio::time::timeout(timeout, attempts).await {
                Ok(result) => result,
                // Dropping the attempts destroys the transaction, cancelling what it awaited;
                // a commit already sent may still apply.
                Err(_elapsed) => {
                    let phase = if committing.load(Ordering::Relaxed) {
                        Phase::Commit
                    } else {
                        Phase::Operation
                    };
                    log_error(code::TRANSACTION_TIMED_OUT, phase, false);
                    Err(
                        match (TransactionTimedOut { after: timeout }).into_error() {
                            ElectionError::Database(e) => ElectionError::Database(planted(
                                e,
                                unknown_reported_as_not_committed(),
                            )),
                            other => other,
                        },
                    )
                }
            }
        }
    }
}

/// Logs, at debug level, an error one of the runner's transactions met: its code, where it
/// arose, and whether the loop retries it. The caller's timeout is logged as 1031
/// (`transaction_timed_out`), the code FoundationDB gives the same event when the timeout is
/// its own option; `phase=commit` then means the commit had been sent, so it may have applied.
/// The chaos harness counts these lines (`RUST_LOG=fdb_leader_election::fdb=debug`).
fn log_error(code: i32, phase: Phase, retried: bool) {
    let phase = match phase {
        Phase::Operation => "operation",
        Phase::Commit => "commit",
    };
    tracing::debug!(code, phase, retried, "FoundationDB transaction error");
}

/// Runs `body` and commits, on one transaction reset by `on_error` between attempts, until an
/// attempt commits or fails with an error [`fdb_codes::retry_code`] does not retry. Sets
/// `committing` while a commit is in flight. `deadline` is the caller's (used only by the
/// planted fault that adopts unknown results).
async fn attempts<F, Fut, T>(
    db: &Database,
    body: &F,
    committing: &AtomicBool,
    deadline: Option<tokio::time::Instant>,
) -> Result<T, ElectionError>
where
    F: Fn(Arc<Transaction>) -> Fut,
    Fut: Future<Output = Result<T, ElectionError>>,
{
    let mut trx = db.create_trx().map_err(TxnError::from)?;
    loop {
        let shared = Arc::new(trx);
        let outcome = body(Arc::clone(&shared)).await;
        let Ok(owned) = Arc::try_unwrap(shared) else {
            return Err(outcome.err().unwrap_or_else(reference_kept));
        };
        let error = match outcome {
            Ok(value) => {
                committing.store(true, Ordering::Relaxed);
                let commit = owned.commit();
                let committed = match deadline.filter(|_| unknown_adopted_as_committed()) {
                    // The planted fault: the caller's timeout during the commit counts as
                    // committed (this deadline comes no later than the caller's timer, which
                    // polls this future before its own).
                    Some(deadline) => match tokio::time::timeout_at(deadline, commit).await {
                        Ok(committed) => committed,
                        Err(_elapsed) => {
                            log_error(code::TRANSACTION_TIMED_OUT, Phase::Commit, false);
                            log_planted(code::TRANSACTION_TIMED_OUT, "committed");
                            return Ok(value);
                        }
                    },
                    None => commit.await,
                };
                committing.store(false, Ordering::Relaxed);
                match committed {
                    Ok(_committed) => return Ok(value),
                    Err(failed) => {
                        let fdb_error = *failed;
                        let error = txn_error(fdb_error, Phase::Commit);
                        if unknown_adopted_as_committed()
                            && error.kind() == TxnErrorKind::CommitUnknown
                        {
                            log_error(fdb_error.code(), Phase::Commit, false);
                            log_planted(fdb_error.code(), "committed");
                            return Ok(value);
                        }
                        let error = ElectionError::Database(planted(
                            error,
                            unknown_reported_as_not_committed(),
                        ));
                        let retried = fdb_codes::retry_code(&error).is_some();
                        log_error(fdb_error.code(), Phase::Commit, retried);
                        if !retried {
                            return Err(error);
                        }
                        // Resets the transaction after FoundationDB's back-off.
                        trx = failed.on_error().await.map_err(TxnError::from)?;
                        continue;
                    }
                }
            }
            Err(error) => error,
        };
        let retry = fdb_codes::retry_code(&error);
        if let ElectionError::Database(e) = &error {
            if let Some(code) = e.code() {
                log_error(code, Phase::Operation, retry.is_some());
            }
        }
        let Some(code) = retry else {
            return Err(error);
        };
        trx = owned
            .on_error(FdbError::from_code(code))
            .await
            .map_err(TxnError::from)?;
    }
}

/// The environment variable of the first planted fault ([module docs](self#planted-faults-in-debug-builds-only)).
#[cfg_attr(
    not(debug_assertions),
    allow(dead_code, reason = "release builds never read it")
)]
const PLANT_UNKNOWN_AS_NOT_COMMITTED: &str = "FDB_LEADER_DEBUG_UNKNOWN_AS_NOT_COMMITTED";

/// The environment variable of the second planted fault ([module docs](self#planted-faults-in-debug-builds-only)).
#[cfg_attr(
    not(debug_assertions),
    allow(dead_code, reason = "release builds never read it")
)]
const PLANT_UNKNOWN_AS_COMMITTED: &str = "FDB_LEADER_DEBUG_UNKNOWN_AS_COMMITTED";

/// Whether this debug build was asked for the planted fault `name` (read once; warned once).
#[cfg(debug_assertions)]
fn plant_on(name: &str, what: &str) -> bool {
    let on = std::env::var_os(name).is_some_and(|v| v == "1");
    if on {
        tracing::warn!(
            "{name}=1: this debug build {what} (a planted fault, for the chaos harness)"
        );
    }
    on
}

/// Whether this debug build reports unknown commit results as not committed.
#[cfg(debug_assertions)]
fn unknown_reported_as_not_committed() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        plant_on(
            PLANT_UNKNOWN_AS_NOT_COMMITTED,
            "reports unknown commit results as not committed",
        )
    })
}

/// Whether this debug build reports unknown commit results as committed.
#[cfg(debug_assertions)]
fn unknown_adopted_as_committed() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        plant_on(
            PLANT_UNKNOWN_AS_COMMITTED,
            "reports unknown commit results as committed",
        )
    })
}

/// Release builds never plant a fault.
#[cfg(not(debug_assertions))]
const fn unknown_reported_as_not_committed() -> bool {
    false
}

/// Release builds never plant a fault.
#[cfg(not(debug_assertions))]
const fn unknown_adopted_as_committed() -> bool {
    false
}

/// Logs, at debug level, one use of a planted fault: the unknown result `code` was reported
/// as `as_what`. The chaos harness counts these lines.
fn log_planted(code: i32, as_what: &str) {
    tracing::debug!(
        code,
        as_what,
        "planted fault: an unknown commit result reported"
    );
}

/// The first planted fault: with `on`, a commit that may have applied is reported as one
/// that did not (`not_committed`, 1020). Otherwise `error` unchanged.
fn planted(error: TxnError, on: bool) -> TxnError {
    if on && error.kind() == TxnErrorKind::CommitUnknown {
        log_planted(
            error.code().unwrap_or(code::TRANSACTION_TIMED_OUT),
            "not_committed",
        );
        TxnError::with_source(TxnErrorKind::Conflict, error).with_code(code::NOT_COMMITTED)
    } else {
        error
    }
}

/// The body kept a clone of the transaction, so it cannot be committed.
fn reference_kept() -> ElectionError {
    ElectionError::Database(TxnError::with_source(
        TxnErrorKind::Fatal,
        "the transaction body kept a reference to its transaction past its future",
    ))
}

// These tests type-check everywhere and run only where libfdb_c can be linked (the adapter
// links it even though these conversions never call into it).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::txn::TxnErrorKind;

    #[test]
    fn the_planted_fault_reports_only_unknown_results_as_not_committed() {
        let unknown = txn_error(FdbError::from_code(1021), Phase::Commit);
        let planted_unknown = planted(unknown, true);
        assert_eq!(planted_unknown.kind(), TxnErrorKind::Conflict);
        assert_eq!(planted_unknown.code(), Some(1020));
        assert!(!planted_unknown.is_maybe_committed());
        // A timed-out commit too; a real conflict or a fatal error unchanged.
        let timed_out = planted(txn_error(FdbError::from_code(1031), Phase::Commit), true);
        assert_eq!(timed_out.code(), Some(1020));
        for code in [1020, 1007, 2000] {
            let e = planted(txn_error(FdbError::from_code(code), Phase::Commit), true);
            assert_eq!(e.code(), Some(code));
        }
        // Off: nothing changes.
        let unknown = txn_error(FdbError::from_code(1021), Phase::Commit);
        assert_eq!(planted(unknown, false).kind(), TxnErrorKind::CommitUnknown);
    }

    #[test]
    fn release_builds_never_plant_the_fault() {
        // The test binary's environment does not set the variables, so debug builds read
        // `false` too; in a release build the functions are constants.
        if !cfg!(debug_assertions) {
            assert!(!unknown_reported_as_not_committed());
            assert!(!unknown_adopted_as_committed());
        }
        for (name, on) in [
            (
                PLANT_UNKNOWN_AS_NOT_COMMITTED,
                unknown_reported_as_not_committed(),
            ),
            (PLANT_UNKNOWN_AS_COMMITTED, unknown_adopted_as_committed()),
        ] {
            let asked = std::env::var_os(name).is_some_and(|v| v == "1");
            assert_eq!(on, asked && cfg!(debug_assertions), "{name}");
        }
    }

    fn binding_code(err: &FdbBindingError) -> Option<i32> {
        err.get_fdb_error().map(FdbError::code)
    }

    #[test]
    fn database_errors_with_a_code_reach_on_error() {
        for (kind, code) in [
            (TxnErrorKind::Conflict, 1020),
            (TxnErrorKind::TooOld, 1007),
            (TxnErrorKind::CommitUnknown, 1021),
            (TxnErrorKind::Unavailable, 1031),
            (TxnErrorKind::Fatal, 2101),
        ] {
            let err = ElectionError::from(TxnError::new(kind).with_code(code));
            let binding = FdbBindingError::from(err);
            assert!(
                matches!(&binding, FdbBindingError::NonRetryableFdbError(e) if e.code() == code),
                "{kind:?}/{code} became {binding:?}"
            );
            // What `Database::run` looks at to decide whether to call `on_error`.
            assert_eq!(binding_code(&binding), Some(code));

            let binding = FdbBindingError::from(TxnError::new(kind).with_code(code));
            assert!(
                matches!(&binding, FdbBindingError::NonRetryableFdbError(e) if e.code() == code)
            );
        }
    }

    #[test]
    fn other_election_errors_become_custom_errors() {
        let binding = FdbBindingError::from(ElectionError::NotInitialized);
        assert_eq!(binding_code(&binding), None);
        assert!(matches!(
            &binding,
            FdbBindingError::CustomError(e)
                if matches!(e.downcast_ref::<ElectionError>(), Some(ElectionError::NotInitialized))
        ));
    }

    #[test]
    fn database_errors_without_a_code_become_custom_errors() {
        let binding =
            FdbBindingError::from(ElectionError::from(TxnError::new(TxnErrorKind::Conflict)));
        assert_eq!(binding_code(&binding), None);
        assert!(matches!(
            &binding,
            FdbBindingError::CustomError(e)
                if matches!(e.downcast_ref::<ElectionError>(), Some(ElectionError::Database(t)) if t.kind() == TxnErrorKind::Conflict)
        ));

        let binding = FdbBindingError::from(TxnError::new(TxnErrorKind::Unavailable));
        assert!(matches!(
            &binding,
            FdbBindingError::CustomError(e)
                if e.downcast_ref::<TxnError>().is_some_and(|t| t.kind() == TxnErrorKind::Unavailable)
        ));
    }

    #[test]
    fn named_fdb_codes_classify_without_asking_libfdb_c() {
        for (code, kind) in [
            (1020, TxnErrorKind::Conflict),
            (1007, TxnErrorKind::TooOld),
            (1021, TxnErrorKind::CommitUnknown),
            (1039, TxnErrorKind::CommitUnknown),
            (1004, TxnErrorKind::Unavailable),
            (1009, TxnErrorKind::Unavailable),
            (1031, TxnErrorKind::Unavailable),
            (1037, TxnErrorKind::Unavailable),
            (1038, TxnErrorKind::Unavailable),
            (1042, TxnErrorKind::Unavailable),
            (1051, TxnErrorKind::Unavailable),
            (1078, TxnErrorKind::Unavailable),
            (1213, TxnErrorKind::Unavailable),
            (1223, TxnErrorKind::Unavailable),
            (1235, TxnErrorKind::Unavailable),
        ] {
            let err = TxnError::from(FdbError::from_code(code));
            assert_eq!(err.kind(), kind, "code {code}");
            assert_eq!(err.code(), Some(code));
            assert_eq!(
                err.is_maybe_committed(),
                kind == TxnErrorKind::CommitUnknown
            );
            let source = std::error::Error::source(&err);
            assert!(
                source
                    .and_then(|s| s.downcast_ref::<FdbError>())
                    .is_some_and(|e| e.code() == code),
                "code {code}: the FdbError is not the source"
            );
        }
    }

    #[test]
    fn a_round_trip_keeps_the_code() {
        let txn = TxnError::from(FdbError::from_code(1020));
        let binding = FdbBindingError::from(ElectionError::from(txn));
        assert_eq!(binding_code(&binding), Some(1020));
    }
}
