//! [`ElectionDatabase`]: a database that runs a transaction with its own retry loop, bounded
//! in time, beside [`ElectionTxn`]. [`MemDb`](crate::MemDb) and `SqliteDb` implement it in
//! their modules through [`transact_with`], the attempt/timeout wrapper they share; (behind
//! `fdb`) `Arc<foundationdb::Database>` in the adapter, with a loop of its own. The
//! tokio runner and `LeaderElection::run_cycle`
//! drive elections through it.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::error::ElectionError;
use crate::store::fdb_codes::retried_in_transact;
use crate::store::retry::{EmbeddedStore, RetryClassify, RunOptions, retry_loop};
use crate::store::txn::{ElectionTxn, TxnError, TxnErrorKind};

/// A database the tokio runner and `LeaderElection::run_cycle` can drive: it runs a
/// closure in a transaction, commits it, and retries conflicts the way the database's own
/// retry loop does, all within a time bound.
///
/// Implemented for [`MemDb`](crate::MemDb), for `SqliteDb` (feature `sqlite`) and, with the
/// `fdb` feature, for `Arc<foundationdb::Database>`. Implement it to drive the runner over
/// another [`ElectionTxn`] implementation.
///
/// # Contract
///
/// - `body` may run several times (one per attempt); only the last attempt's result is
///   returned, and only after its commit succeeded.
/// - Conflicts and `transaction_too_old` are retried inside, when they carry a code
///   FoundationDB's `on_error` retries (every store's own do); other failures (unavailability,
///   unknown commit results, fatal errors) are returned, and the runner backs off and tries
///   again later.
/// - The whole call ends within `timeout`. A call that runs out of time returns a
///   [`TxnErrorKind::CommitUnknown`] error whose source is [`TransactionTimedOut`]: its
///   commit may or may not have applied, which the election recognises at its next cycle.
pub trait ElectionDatabase: Clone + Send + Sync + 'static {
    /// The transaction handed to `body`.
    type Txn: ElectionTxn + 'static;

    /// Runs `body` in a transaction and commits it, retrying conflicts, within `timeout`.
    ///
    /// # Errors
    ///
    /// The first error that is not a conflict, or a timeout (see the trait's contract).
    fn transact<F, Fut, T>(
        &self,
        timeout: Duration,
        body: F,
    ) -> impl Future<Output = Result<T, ElectionError>> + Send
    where
        F: Fn(Self::Txn) -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, ElectionError>> + Send,
        T: Send;
}

/// The source of the error an [`ElectionDatabase::transact`] call returns when it runs out of
/// time. The commit may have applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the transaction did not finish within {after:?}")]
pub struct TransactionTimedOut {
    /// The time bound that was exceeded.
    pub after: Duration,
}

impl TransactionTimedOut {
    /// The election error for a call that ran out of time: retryable, maybe committed.
    pub fn into_error(self) -> ElectionError {
        ElectionError::Database(TxnError::with_source(TxnErrorKind::CommitUnknown, self))
    }
}

/// An attempt's error, retried by the store's loop only when it is a conflict or
/// `transaction_too_old` (as FoundationDB's `on_error` would at once); every other error is
/// returned to the runner, which backs off.
struct Attempt(ElectionError);

impl fmt::Debug for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<TxnError> for Attempt {
    fn from(e: TxnError) -> Self {
        Attempt(ElectionError::Database(e))
    }
}

impl RetryClassify for Attempt {
    fn txn_error(&self) -> Option<&TxnError> {
        match &self.0 {
            ElectionError::Database(e) if retried_in_transact(e) => Some(e),
            _ => None,
        }
    }
}

/// [`ElectionDatabase::transact`] for a store with FoundationDB's retry loop (MemDb, SQLite):
/// runs `body` through [`retry_loop`] over `store`, retrying conflicts and
/// `transaction_too_old` only, and bounds the whole call by `timeout`.
pub(crate) async fn transact_with<S, F, Fut, T>(
    store: S,
    timeout: Duration,
    body: F,
) -> Result<T, ElectionError>
where
    S: EmbeddedStore,
    F: Fn(S::Txn) -> Fut,
    Fut: Future<Output = Result<T, ElectionError>>,
{
    let attempts = retry_loop(&store, RunOptions::default(), |txn, _maybe_committed| {
        let attempt = body(txn);
        async move { attempt.await.map_err(Attempt) }
    });
    match tokio::time::timeout(timeout, attempts).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(Attempt(e))) => Err(e),
        Err(_elapsed) => Err(TransactionTimedOut { after: timeout }.into_error()),
    }
}
