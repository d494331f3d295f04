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
//! use fdb_leader_election::Subspace;
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
//! # Planted faults (feature `planted-faults` only)
//!
//! The chaos harness checks that its checks catch a mishandled unknown commit on a real
//! cluster. In a build with the feature `planted-faults` (this project's chaos harness and tests
//! only; never in a build you deploy), with one of these variables set to `1`, the runner's
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
//! Without the feature, debug or release, nothing reads the variables (they are not in the
//! binary).
//!
//! [`ElectionTxn`]: crate::store::txn::ElectionTxn
//! [`ElectionTxn::watch`]: crate::store::txn::ElectionTxn::watch
//! [`TxnError`]: crate::store::txn::TxnError
//! [`TxnError::code`]: crate::store::txn::TxnError::code
//! [`TxnErrorKind`]: crate::store::txn::TxnErrorKind
//! [`TxnErrorKind::CommitUnknown`]: crate::store::txn::TxnErrorKind::CommitUnknown
//! [`ElectionError`]: crate::error::ElectionError
//! [`ElectionError::Database`]: crate::error::ElectionError::Database
//! [`ElectionDatabase`]: crate::store::database::ElectionDatabase
//! [`TransactionTimedOut`]: crate::store::database::TransactionTimedOut
//! [`FdbError`]: foundationdb::FdbError
//! [`FdbBindingError`]: foundationdb::FdbBindingError
//! [`FdbBindingError::NonRetryableFdbError`]: foundationdb::FdbBindingError::NonRetryableFdbError
//! [`FdbBindingError::CustomError`]: foundationdb::FdbBindingError::CustomError
//! [`TransactionCommitError`]: foundationdb::TransactionCommitError

mod database;
mod errors;
mod plants;
// These tests type-check everywhere and run only where libfdb_c can be linked (the adapter
// links it even though these conversions never call into it).
#[cfg(test)]
mod tests;
mod txn;

pub use errors::election_error;
