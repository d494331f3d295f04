//! The errors MemDb and the SQLite store report, with FoundationDB's numeric codes, and the
//! checks of keys and values against FoundationDB's limits, in FoundationDB's order.

use crate::keys::MAX_KEY_BYTES;
use crate::record::MAX_VALUE_BYTES;
use crate::store::size::MAX_TRANSACTION_BYTES;
use crate::store::txn::{TxnError, TxnErrorKind};

/// The longest key a read, a clear or a conflict key hands to FoundationDB's cluster:
/// [`MAX_KEY_BYTES`] plus the 8 bytes of a tenant prefix (`getMaxKeySize` in its client). A
/// longer key cannot exist, so a read of it returns nothing, and a clear or a conflict key on
/// it is dropped; keys of up to this length are read (taking the read version and a conflict
/// range) and counted in the transaction's size, though only [`MAX_KEY_BYTES`] can be written.
pub(crate) const READ_KEY_LIMIT: usize = MAX_KEY_BYTES + 8;

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

/// `invalid_option_value` (2006): a limit on outstanding watches above FoundationDB's
/// `ABSOLUTE_MAX_WATCHES`.
pub(crate) fn invalid_max_watches(max: usize) -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Fatal,
        format!(
            "a limit of {max} outstanding watches is above {}",
            crate::store::watch::ABSOLUTE_MAX_WATCHES
        ),
    )
    .with_code(2006)
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

/// Whether `key` is in FoundationDB's system keys (at or after `\xff`), which a transaction
/// without the system-keys option may not read, write or watch.
pub(crate) fn is_system(key: &[u8]) -> bool {
    key.first() == Some(&0xff)
}

/// `key_outside_legal_range` (2004) for a key in the system keys.
pub(crate) fn check_not_system(key: &[u8]) -> Result<(), TxnError> {
    if is_system(key) {
        return Err(outside_legal_range());
    }
    Ok(())
}

/// Checks a set, as FoundationDB's client does (`ReadYourWritesTransaction::set`): a system
/// key (2004), then a key over [`MAX_KEY_BYTES`] (`key_too_large`, 2102), then a value over
/// [`MAX_VALUE_BYTES`] (`value_too_large`, 2103).
pub(crate) fn check_set(key: &[u8], value: &[u8]) -> Result<(), TxnError> {
    check_not_system(key)?;
    check_key_size(key)?;
    if value.len() > MAX_VALUE_BYTES {
        return Err(TxnError::with_source(
            TxnErrorKind::Fatal,
            format!(
                "value of {} bytes exceeds the limit of {MAX_VALUE_BYTES}",
                value.len()
            ),
        )
        .with_code(2103));
    }
    Ok(())
}

/// Checks a watched key: a system key (2004), then a key over [`MAX_KEY_BYTES`] (2102).
pub(crate) fn check_watch(key: &[u8]) -> Result<(), TxnError> {
    check_not_system(key)?;
    check_key_size(key)
}

fn check_key_size(key: &[u8]) -> Result<(), TxnError> {
    if key.len() > MAX_KEY_BYTES {
        return Err(TxnError::with_source(
            TxnErrorKind::Fatal,
            format!(
                "key of {} bytes exceeds the limit of {MAX_KEY_BYTES}",
                key.len()
            ),
        )
        .with_code(2102));
    }
    Ok(())
}

/// Checks the bounds of a range read: neither may lie beyond `\xff` (2004); `\xff` itself is
/// allowed as either bound. Checked before an empty or inverted range returns nothing.
pub(crate) fn check_range(begin: &[u8], end: &[u8]) -> Result<(), TxnError> {
    let max = [0xff_u8];
    if begin > max.as_slice() || end > max.as_slice() {
        return Err(outside_legal_range());
    }
    Ok(())
}

/// `transaction_too_large` (2101).
pub(crate) fn transaction_too_large(size: usize) -> TxnError {
    TxnError::with_source(
        TxnErrorKind::Fatal,
        format!("transaction of {size} bytes exceeds the limit of {MAX_TRANSACTION_BYTES}"),
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
