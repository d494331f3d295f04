//! The errors MemDb and the SQLite store report, with FoundationDB's numeric codes (the errors
//! of its limits are with the limits, in [`limits`](crate::store::limits)).

use crate::store::txn::{TxnError, TxnErrorKind};

/// `not_committed` (1020): a read key changed after the read version.
pub(crate) fn conflict() -> TxnError {
    TxnError::new(TxnErrorKind::Conflict).with_code(1020)
}

/// `transaction_too_old` (1007).
pub(crate) fn too_old() -> TxnError {
    TxnError::new(TxnErrorKind::TooOld).with_code(1007)
}

/// `commit_unknown_result` (1021).
pub(crate) fn commit_unknown() -> TxnError {
    TxnError::with_source(
        TxnErrorKind::CommitUnknown,
        "injected fault: the commit's reply was lost",
    )
    .with_code(1021)
}

/// Injected unavailability. FoundationDB has no single code for it, so none is attached.
pub(crate) fn unavailable() -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Unavailable,
        "injected fault: the database is unavailable",
    )
}

/// `used_during_commit` (2017): an operation on a transaction whose commit has begun.
pub(crate) fn used_during_commit() -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Fatal,
        "the transaction is committing or has committed",
    )
    .with_code(2017)
}

/// `watches_disabled` (1034).
pub(crate) fn watches_disabled() -> TxnError {
    TxnError::with_source(TxnErrorKind::Fatal, "watches are disabled").with_code(1034)
}

/// `transaction_cancelled` (1025), for the watches of a transaction dropped before committing.
pub(crate) fn dropped_before_commit() -> TxnError {
    TxnError::with_source(TxnErrorKind::Fatal, "transaction dropped before commit").with_code(1025)
}

/// `transaction_cancelled` (1025), for the watches of a transaction whose commit failed before
/// it was sent (`error`, a deferred error or a failed read): FoundationDB cancels them with the
/// transaction.
pub(crate) fn cancelled_with_transaction(error: &TxnError) -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Fatal,
        format!("the watching transaction was cancelled: its commit failed with {error}"),
    )
    .with_code(1025)
}

/// For armed watches whose database was dropped.
pub(crate) fn database_dropped() -> TxnError {
    TxnError::with_source(TxnErrorKind::Fatal, "the database was dropped")
}

/// The database ran out of versions (after 2^64 commits).
pub(crate) fn versions_exhausted() -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Fatal,
        "the database ran out of commit versions",
    )
}

/// A copy of `e` for a watch whose transaction failed to commit (the source is not cloneable,
/// so it is replaced by its message).
pub(crate) fn copy_for_watch(e: &TxnError) -> TxnError {
    copy_with(e, format!("the watching transaction failed to commit: {e}"))
}

/// A copy of `e` (same kind and code), for a second place that reports it.
pub(crate) fn copy_of(e: &TxnError) -> TxnError {
    copy_with(e, e.to_string())
}

fn copy_with(e: &TxnError, source: String) -> TxnError {
    let copy = TxnError::with_source(e.kind(), source);
    match e.code() {
        Some(code) => copy.with_code(code),
        None => copy,
    }
}
