//! The [runner](crate::runner) over SQLite: [`ElectionDatabase`] for [`SqliteDb`].

use std::fmt;
use std::future::Future;
use std::time::Duration;

use super::{SqliteDb, SqliteTransaction};
use crate::error::ElectionError;
use crate::memdb::{RetryClassify, RunOptions};
use crate::runner::{ElectionDatabase, TransactionTimedOut};
use crate::txn::{TxnError, TxnErrorKind};

/// An attempt's error, retried by [`SqliteDb::run_with`] only when it is a conflict or
/// `transaction_too_old`; every other error (a busy file, say) goes back to the runner, which
/// backs off. (The same policy as the runner's own `MemDb` implementation.)
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
            ElectionError::Database(e)
                if matches!(e.kind(), TxnErrorKind::Conflict | TxnErrorKind::TooOld) =>
            {
                Some(e)
            }
            _ => None,
        }
    }
}

/// Runs the runner's transactions through [`SqliteDb::run_with`]: conflicts and
/// `transaction_too_old` are retried inside, everything else is returned to the runner, and a
/// tokio timeout bounds the whole call. A commit cut off by the timeout while it waits for
/// SQLite's write lock may still apply (within the busy timeout); the runner treats it as
/// maybe committed, as it must.
impl ElectionDatabase for SqliteDb {
    type Txn = SqliteTransaction;

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
        let db = self.clone();
        async move {
            let run = db.run_with(RunOptions::default(), |txn, _maybe_committed| {
                let attempt = body(txn);
                async move { attempt.await.map_err(Attempt) }
            });
            match tokio::time::timeout(timeout, run).await {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(Attempt(e))) => Err(e),
                Err(_elapsed) => Err(TransactionTimedOut { after: timeout }.into_error()),
            }
        }
    }
}
