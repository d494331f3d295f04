//! The narrow transaction interface the election is written against.
//!
//! The election logic never names a concrete database. It needs point reads (serializable or
//! snapshot), range reads, sets, clears, explicit read-conflict keys and watches, with
//! FoundationDB's semantics: serializable optimistic transactions whose reads observe one read
//! version plus the transaction's own writes. [`MemDb`](crate::MemDb) implements it in memory;
//! behind the `fdb` feature, anything that dereferences to `foundationdb::Transaction` does.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

/// Whether a read adds a read-conflict range to the transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadMode {
    /// The read conflicts: the transaction fails to commit if the key (or range) changed
    /// between its read version and its commit.
    Serializable,
    /// The read adds no conflict range: a later change by another transaction does not abort
    /// this one.
    Snapshot,
}

/// A key and its value, as returned by a range read.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// A watch: resolves once the watched key's value differs from the value it had when the
/// transaction that created the watch committed. Dropping it cancels the watch.
pub type Watch = Pin<Box<dyn Future<Output = Result<(), TxnError>> + Send + 'static>>;

/// One database transaction, as seen by the election.
///
/// # Contract
///
/// - Reads observe a single read version plus this transaction's own earlier writes.
/// - A [`ReadMode::Serializable`] read, and [`add_read_conflict_key`](Self::add_read_conflict_key),
///   make the commit fail with a retryable conflict if another transaction changed that key
///   after this transaction's read version.
/// - Writes take effect atomically at commit, or not at all. A commit may also end with an
///   unknown result, in which case it may or may not have applied
///   ([`TxnError::is_maybe_committed`]).
/// - The implementation does not commit; the caller's retry loop does.
pub trait ElectionTxn: Send + Sync {
    /// Reads one key.
    fn get(
        &self,
        key: &[u8],
        mode: ReadMode,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, TxnError>> + Send;

    /// Reads every key in `[begin, end)`, in key order.
    fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> impl Future<Output = Result<Vec<KeyValue>, TxnError>> + Send;

    /// Writes `value` at `key`.
    fn set(&self, key: &[u8], value: &[u8]);

    /// Removes `key`.
    fn clear(&self, key: &[u8]);

    /// Makes the commit conflict with any change to `key` after this transaction's read
    /// version, as if it had been read with [`ReadMode::Serializable`].
    ///
    /// # Errors
    ///
    /// None from FoundationDB or the embedded stores, which defer an invalid key (one in the
    /// system keys, at or after `\xff`) to the transaction's later reads and commit, and drop
    /// a key longer than any key can be. Another implementation may report one here.
    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), TxnError>;

    /// Watches `key`. The watch is armed when this transaction commits.
    ///
    /// # Errors
    ///
    /// None from FoundationDB or the embedded stores, which report every watch error through
    /// the returned future (too many outstanding watches, 1032; a system key, 2004; a key
    /// over 10,000 bytes, 2102; the transaction failed to commit). Another implementation may
    /// report one here.
    fn watch(&self, key: &[u8]) -> Result<Watch, TxnError>;

    /// The read version this transaction's reads observe: taken now if no read has taken it
    /// yet (FoundationDB's `get_read_version`), so a commit by another transaction after this
    /// call is invisible to the later reads. `None` where the store cannot say.
    ///
    /// The election uses it to tell the leader record a transaction wrote itself, read back
    /// through read-your-writes, from the same record committed: a commit always lands at a
    /// version newer than its own transaction's read version, so a record naming an attempt,
    /// read at that attempt's very read version, is still uncommitted (docs/design.md §10.1). Stores
    /// that return `None` rely on the [`Cycle`](crate::Cycle) being alive until the
    /// transaction ends.
    fn read_version(&self) -> impl Future<Output = Result<Option<u64>, TxnError>> + Send {
        std::future::ready(Ok(None))
    }

    /// FoundationDB's running estimate of this transaction's size
    /// (`get_approximate_size`): what each of its operations adds to the size its commit is
    /// held to ([`MAX_TRANSACTION_BYTES`](crate::MAX_TRANSACTION_BYTES)), before merging, so at
    /// least that size unless the transaction read the same key serializably twice. `None`
    /// where the store cannot say. MemDb and the SQLite store compute FoundationDB's estimate.
    fn approximate_size(&self) -> impl Future<Output = Result<Option<usize>, TxnError>> + Send {
        std::future::ready(Ok(None))
    }
}

/// What went wrong with a transaction, as far as retrying it is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TxnErrorKind {
    /// A key this transaction read was changed by a transaction that committed first.
    /// Retryable.
    Conflict,
    /// The transaction's read version is too old (it ran for more than five seconds).
    /// Retryable.
    TooOld,
    /// The commit's outcome is unknown: it may or may not have applied. Retryable, and the
    /// retry must be idempotent with respect to the first attempt.
    CommitUnknown,
    /// The database could not be reached or did not answer in time. Retryable.
    Unavailable,
    /// Any other error the database reported as retryable.
    OtherRetryable,
    /// An error that retrying will not fix.
    Fatal,
}

impl TxnErrorKind {
    /// Whether a retry loop should run the transaction again.
    pub fn is_retryable(self) -> bool {
        !matches!(self, TxnErrorKind::Fatal)
    }
}

impl fmt::Display for TxnErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TxnErrorKind::Conflict => "transaction conflict",
            TxnErrorKind::TooOld => "transaction too old",
            TxnErrorKind::CommitUnknown => "commit result unknown",
            TxnErrorKind::Unavailable => "database unavailable",
            TxnErrorKind::OtherRetryable => "retryable database error",
            TxnErrorKind::Fatal => "database error",
        })
    }
}

/// An error from the database underneath the election, keeping its retryability and its
/// original error as the source.
#[derive(Debug, thiserror::Error)]
#[error("{kind}{}", code.map(|c| format!(" (code {c})")).unwrap_or_default())]
pub struct TxnError {
    kind: TxnErrorKind,
    code: Option<i32>,
    #[source]
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl TxnError {
    /// An error of `kind` with no further detail.
    pub fn new(kind: TxnErrorKind) -> Self {
        TxnError {
            kind,
            code: None,
            source: None,
        }
    }

    /// An error of `kind` caused by `source`.
    pub fn with_source(
        kind: TxnErrorKind,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        TxnError {
            kind,
            code: None,
            source: Some(source.into()),
        }
    }

    /// Attaches the database's numeric error code (FoundationDB's codes: 1020 conflict,
    /// 1007 too old, 1021 unknown result, ...).
    pub fn with_code(mut self, code: i32) -> Self {
        self.code = Some(code);
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> TxnErrorKind {
        self.kind
    }

    /// Sets the kind (a retry loop gives a coded error its code's kind).
    pub(crate) fn set_kind(&mut self, kind: TxnErrorKind) {
        self.kind = kind;
    }

    /// The database's numeric error code, if it has one.
    pub fn code(&self) -> Option<i32> {
        self.code
    }

    /// Whether running the transaction again may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }

    /// Whether the failed commit may nevertheless have applied.
    pub fn is_maybe_committed(&self) -> bool {
        matches!(self.kind, TxnErrorKind::CommitUnknown)
    }
}
