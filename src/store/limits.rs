//! FoundationDB's limits on keys, values, transactions and watches, and the errors that
//! report each one broken, in FoundationDB's order: what MemDb and SQLite check, what
//! [`size`](crate::store::size) counts and what [`watch`](crate::store::watch) enforces.

use crate::keys::MAX_KEY_BYTES;
use crate::record::MAX_VALUE_BYTES;
use crate::store::txn::{TxnError, TxnErrorKind};

/// The largest transaction FoundationDB commits, in bytes (its `TRANSACTION_SIZE_LIMIT` knob),
/// counted as [`TransactionSize`](crate::TransactionSize) says. A writing transaction over it fails to commit with
/// `transaction_too_large` (2101, not retryable), on FoundationDB, MemDb and SQLite alike.
pub const MAX_TRANSACTION_BYTES: usize = 10_000_000;

/// The longest key a read, a clear or a conflict key hands to FoundationDB's cluster:
/// [`MAX_KEY_BYTES`] plus the 8 bytes of a tenant prefix (`getMaxKeySize` in its client). A
/// longer key cannot exist, so a read of it returns nothing, and a clear or a conflict key on
/// it is dropped; keys of up to this length are read (taking the read version and a conflict
/// range) and counted in the transaction's size, though only [`MAX_KEY_BYTES`] can be written.
pub(crate) const READ_KEY_LIMIT: usize = MAX_KEY_BYTES + 8;

/// The default limit on a database's outstanding watches: 10,000, FoundationDB's default
/// (`DatabaseOption::MaxWatches`).
pub const DEFAULT_MAX_WATCHES: usize = 10_000;

/// The highest limit on outstanding watches a database accepts: 1,000,000, FoundationDB's
/// (`ABSOLUTE_MAX_WATCHES`; `DatabaseOption::MaxWatches` above it fails with
/// `invalid_option_value`, 2006).
pub const ABSOLUTE_MAX_WATCHES: usize = 1_000_000;

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
        format!("a limit of {max} outstanding watches is above {ABSOLUTE_MAX_WATCHES}"),
    )
    .with_code(2006)
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
