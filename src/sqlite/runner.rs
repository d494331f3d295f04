//! [`ElectionDatabase`] for [`SqliteDb`]: the runner and `run_cycle` over SQLite.

use std::future::Future;
use std::time::Duration;

use super::{SqliteDb, SqliteTransaction};
use crate::database::{Attempt, ElectionDatabase, bounded};
use crate::error::ElectionError;
use crate::memdb::RunOptions;

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
            bounded(
                timeout,
                db.run_with(RunOptions::default(), |txn, _maybe_committed| {
                    let attempt = body(txn);
                    async move { attempt.await.map_err(Attempt) }
                }),
            )
            .await
        }
    }
}
