//! FoundationDB's retry loop over any store, and the types that steer it: what
//! [`MemDb::run`](crate::MemDb::run) and `SqliteDb::run` share.

use std::future::Future;
use std::time::Duration;

use crate::error::ElectionError;
use crate::store::fdb_codes;
use crate::store::txn::{TxnError, TxnErrorKind};

/// Whether an earlier attempt of a [`MemDb::run`](crate::MemDb::run) (or `SqliteDb::run`) loop
/// may have committed: `true` once an attempt failed with an unknown commit result
/// ([`TxnErrorKind::CommitUnknown`]), and for every attempt after it. The closure should then
/// check whether its earlier writes landed before writing again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MaybeCommitted(pub bool);

impl MaybeCommitted {
    /// Whether an earlier attempt may have committed.
    pub fn is_maybe_committed(self) -> bool {
        self.0
    }
}

/// Finds the database error inside an error type, so that [`MemDb::run`](crate::MemDb::run)
/// (and `SqliteDb::run`) can tell whether to retry.
pub trait RetryClassify {
    /// The database error this error is, or wraps; `None` for errors that retrying cannot fix.
    fn txn_error(&self) -> Option<&TxnError>;

    /// The same, to change: the loop gives a closure's error that carries a FoundationDB code
    /// the kind that code has, as FoundationDB's `Database::run` does (its `on_error` knows
    /// the error only by its code). `None` (the default) leaves the error as it is.
    fn txn_error_mut(&mut self) -> Option<&mut TxnError> {
        None
    }
}

impl RetryClassify for TxnError {
    fn txn_error(&self) -> Option<&TxnError> {
        Some(self)
    }

    fn txn_error_mut(&mut self) -> Option<&mut TxnError> {
        Some(self)
    }
}

impl RetryClassify for ElectionError {
    fn txn_error(&self) -> Option<&TxnError> {
        match self {
            ElectionError::Database(e) => Some(e),
            _ => None,
        }
    }

    fn txn_error_mut(&mut self) -> Option<&mut TxnError> {
        match self {
            ElectionError::Database(e) => Some(e),
            _ => None,
        }
    }
}

/// How [`MemDb::run_with`](crate::MemDb::run_with) (and `SqliteDb::run_with`) retry.
///
/// ```
/// use fdb_leader_election::memdb::RunOptions;
///
/// let options = RunOptions { max_attempts: Some(3), ..RunOptions::default() };
/// assert_eq!(options, RunOptions::default().with_max_attempts(3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunOptions {
    /// The most attempts to make (`Some(0)` counts as one); `None`, the default, retries
    /// forever, like FoundationDB.
    pub max_attempts: Option<u32>,
    /// The first back-off after a failure other than a conflict or `transaction_too_old`
    /// (which are retried at once). Default 10 ms.
    pub initial_backoff: Duration,
    /// The back-off doubles after each such failure, up to this. Default 1 s.
    pub max_backoff: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            max_attempts: None,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_secs(1),
        }
    }
}

impl RunOptions {
    /// These options, with at most `max_attempts` attempts.
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }
}

/// A store FoundationDB's retry loop runs over: MemDb and SQLite, whose `run`, `run_with` and
/// [`ElectionDatabase`](crate::ElectionDatabase) all go through [`retry_loop`].
pub(crate) trait EmbeddedStore: Clone + Send + Sync + 'static {
    /// Its transaction.
    type Txn: Clone + Send + 'static;

    /// Starts a transaction.
    fn begin(&self) -> Self::Txn;

    /// Commits `txn`.
    fn commit(txn: Self::Txn) -> impl Future<Output = Result<(), TxnError>> + Send;
}

/// FoundationDB's retry loop over `store`: each attempt runs `closure` in a new transaction
/// and commits it. The one loop of [`MemDb::run_with`](crate::MemDb::run_with), the SQLite
/// store's `run_with` and both stores' `ElectionDatabase`, so all retry exactly alike (see
/// [`MemDb::run_with`](crate::MemDb::run_with) for the policy).
pub(crate) async fn retry_loop<S, F, Fut, T, E>(
    store: &S,
    options: RunOptions,
    mut closure: F,
) -> Result<T, E>
where
    S: EmbeddedStore,
    F: FnMut(S::Txn, MaybeCommitted) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: From<TxnError> + RetryClassify,
{
    let max_attempts = options.max_attempts.map(|m| m.max(1));
    let mut attempts: u32 = 0;
    let mut maybe_committed = false;
    let mut backoff = options.initial_backoff;
    loop {
        attempts = attempts.saturating_add(1);
        let txn = store.begin();
        let error = match closure(txn.clone(), MaybeCommitted(maybe_committed)).await {
            Ok(value) => match S::commit(txn).await {
                Ok(()) => return Ok(value),
                // The store's own: its kind is already its code's, in a commit.
                Err(e) => E::from(e),
            },
            Err(mut e) => {
                if let Some(txn_error) = e.txn_error_mut() {
                    fdb_codes::classify_returned(txn_error);
                }
                e
            }
        };
        let kind = match error.txn_error() {
            Some(e) if fdb_codes::retried_by_run(e) => e.kind(),
            _ => return Err(error),
        };
        if max_attempts.is_some_and(|max| attempts >= max) {
            return Err(error);
        }
        maybe_committed |= fdb_codes::may_have_committed(error.txn_error());
        if !matches!(kind, TxnErrorKind::Conflict | TxnErrorKind::TooOld) {
            if !backoff.is_zero() {
                tokio::time::sleep(backoff).await;
            }
            backoff = backoff.saturating_mul(2).min(options.max_backoff);
        }
    }
}
