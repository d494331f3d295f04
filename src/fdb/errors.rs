//! FoundationDB errors to election errors and back: the kind table, what `Database::run` retries.

use foundationdb::{FdbBindingError, FdbError, TransactionCommitError};

use crate::error::ElectionError;
use crate::store::fdb_codes::{self, Phase, Predicates};
use crate::store::txn::{TxnError, TxnErrorKind};

/// What `libfdb_c` says about a code this crate does not name.
fn predicates(err: FdbError) -> Predicates {
    Predicates {
        maybe_committed: err.is_maybe_committed(),
        retryable: err.is_retryable(),
    }
}

/// The [`TxnError`] for `err`, raised in `phase` (see the module docs for the table).
pub(super) fn txn_error(err: FdbError, phase: Phase) -> TxnError {
    let kind = fdb_codes::kind_of(err.code(), phase, || predicates(err));
    TxnError::with_source(kind, err).with_code(err.code())
}

/// Keeps the code and the [`FdbError`] (as the source); the kind follows the table in the
/// [module docs](crate::fdb#errors), for an error that did not come from a commit.
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
