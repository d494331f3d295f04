//! The errors MemDb and the SQLite store report, with FoundationDB's numeric codes, and
//! FoundationDB's key, value and transaction size limits.

use crate::store::txn::{TxnError, TxnErrorKind};

/// FoundationDB's largest key, in bytes.
pub(crate) const KEY_SIZE_LIMIT: usize = 10_000;
/// FoundationDB's largest value, in bytes.
pub(crate) const VALUE_SIZE_LIMIT: usize = 100_000;
/// FoundationDB's largest transaction (mutations), in bytes.
pub(crate) const TRANSACTION_SIZE_LIMIT: usize = 10_000_000;

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

/// `too_many_watches` (1032): the database's limit on outstanding watches was reached. Like
/// FoundationDB, reported through the watch's future; not retryable.
pub(crate) fn too_many_watches(max: usize) -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Fatal,
        format!("too many outstanding watches (the database's limit is {max})"),
    )
    .with_code(1032)
}

/// `watches_disabled` (1034).
pub(crate) fn watches_disabled() -> TxnError {
    TxnError::with_source(TxnErrorKind::Fatal, "watches are disabled").with_code(1034)
}

/// `transaction_cancelled` (1025), for the watches of a transaction dropped before committing.
pub(crate) fn dropped_before_commit() -> TxnError {
    TxnError::with_source(TxnErrorKind::Fatal, "transaction dropped before commit").with_code(1025)
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

/// Checks a key that is read, written, watched or added as a conflict key: at most
/// [`KEY_SIZE_LIMIT`] bytes (`key_too_large`, 2102) and below `\xff`
/// (`key_outside_legal_range`, 2004; there is no system keyspace).
pub(crate) fn check_key(key: &[u8]) -> Result<(), TxnError> {
    if key.len() > KEY_SIZE_LIMIT {
        return Err(TxnError::with_source(
            TxnErrorKind::Fatal,
            format!(
                "key of {} bytes exceeds the limit of {KEY_SIZE_LIMIT}",
                key.len()
            ),
        )
        .with_code(2102));
    }
    if key.first() == Some(&0xff) {
        return Err(outside_legal_range());
    }
    Ok(())
}

/// Checks a key that is read: below `\xff` (`key_outside_legal_range`, 2004). A longer key
/// than [`KEY_SIZE_LIMIT`] is not an error: no such key exists, so the read returns nothing.
pub(crate) fn check_read_key(key: &[u8]) -> Result<(), TxnError> {
    if key.first() == Some(&0xff) {
        return Err(outside_legal_range());
    }
    Ok(())
}

/// Checks the end of a range read: at most `\xff`.
pub(crate) fn check_range_end(end: &[u8]) -> Result<(), TxnError> {
    if end > [0xff_u8].as_slice() {
        return Err(outside_legal_range());
    }
    Ok(())
}

/// Checks a value that is written: at most [`VALUE_SIZE_LIMIT`] bytes (`value_too_large`, 2103).
pub(crate) fn check_value(value: &[u8]) -> Result<(), TxnError> {
    if value.len() > VALUE_SIZE_LIMIT {
        return Err(TxnError::with_source(
            TxnErrorKind::Fatal,
            format!(
                "value of {} bytes exceeds the limit of {VALUE_SIZE_LIMIT}",
                value.len()
            ),
        )
        .with_code(2103));
    }
    Ok(())
}

/// `transaction_too_large` (2101).
pub(crate) fn transaction_too_large(size: usize) -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Fatal,
        format!("transaction of {size} bytes exceeds the limit of {TRANSACTION_SIZE_LIMIT}"),
    )
    .with_code(2101)
}

fn outside_legal_range() -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Fatal,
        "key outside the legal range (there are no system keys at or after \\xff)",
    )
    .with_code(2004)
}
