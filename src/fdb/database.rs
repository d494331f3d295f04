//! [`ElectionDatabase`] for `Arc<Database>`: the runner's transactions, retried and logged.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use foundationdb::{Database, FdbError, Transaction};

use super::errors::txn_error;
use super::plants::{
    log_planted, planted, unknown_adopted_as_committed, unknown_reported_as_not_committed,
};
use crate::error::ElectionError;
use crate::store::database::{ElectionDatabase, TransactionTimedOut};
use crate::store::fdb_codes::{self, Phase, code};
use crate::store::txn::{TxnError, TxnErrorKind};

/// The runner's transactions on FoundationDB (see
/// [the module docs](crate::fdb#the-runners-transactions)): a loop of `create_trx`, the body, `commit` and `on_error` that retries only conflicts and
/// `transaction_too_old`, bounded by the tokio timeout alone.
///
/// `Txn` is `Arc<Transaction>`, which implements [`ElectionTxn`](crate::store::txn::ElectionTxn) like the
/// `RetryableTransaction` of `Database::run`. The body must not keep a clone of it past its
/// future: the commit needs the transaction back (as `Database::run` does, it fails with a
/// fatal error otherwise).
impl ElectionDatabase for Arc<Database> {
    type Txn = Arc<Transaction>;

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
        let db = Arc::clone(self);
        async move {
            // Whether the attempt in flight had sent its commit when the time ran out.
            let committing = AtomicBool::new(false);
            let deadline = tokio::time::Instant::now().checked_add(timeout);
            let attempts = attempts(&db, &body, &committing, deadline);
            match tokio::time::timeout(timeout, attempts).await {
                Ok(result) => result,
                // Dropping the attempts destroys the transaction, cancelling what it awaited;
                // a commit already sent may still apply.
                Err(_elapsed) => {
                    let phase = if committing.load(Ordering::Relaxed) {
                        Phase::Commit
                    } else {
                        Phase::Operation
                    };
                    log_error(code::TRANSACTION_TIMED_OUT, phase, false);
                    Err(
                        match (TransactionTimedOut { after: timeout }).into_error() {
                            ElectionError::Database(e) => ElectionError::Database(planted(
                                e,
                                unknown_reported_as_not_committed(),
                            )),
                            other => other,
                        },
                    )
                }
            }
        }
    }
}

/// Logs, at debug level, an error one of the runner's transactions met: its code, where it
/// arose, and whether the loop retries it. The caller's timeout is logged as 1031
/// (`transaction_timed_out`), the code FoundationDB gives the same event when the timeout is
/// its own option; `phase=commit` then means the commit had been sent, so it may have applied.
/// The chaos harness counts these lines (`RUST_LOG=fdb_leader_election::fdb=debug`).
fn log_error(code: i32, phase: Phase, retried: bool) {
    let phase = match phase {
        Phase::Operation => "operation",
        Phase::Commit => "commit",
    };
    tracing::debug!(code, phase, retried, "FoundationDB transaction error");
}

/// Runs `body` and commits, on one transaction reset by `on_error` between attempts, until an
/// attempt commits or fails with an error [`fdb_codes::retry_code`] does not retry. Sets
/// `committing` while a commit is in flight. `deadline` is the caller's (used only by the
/// planted fault that adopts unknown results).
async fn attempts<F, Fut, T>(
    db: &Database,
    body: &F,
    committing: &AtomicBool,
    deadline: Option<tokio::time::Instant>,
) -> Result<T, ElectionError>
where
    F: Fn(Arc<Transaction>) -> Fut,
    Fut: Future<Output = Result<T, ElectionError>>,
{
    let mut trx = db.create_trx().map_err(TxnError::from)?;
    loop {
        let shared = Arc::new(trx);
        let outcome = body(Arc::clone(&shared)).await;
        let Ok(owned) = Arc::try_unwrap(shared) else {
            return Err(outcome.err().unwrap_or_else(reference_kept));
        };
        let error = match outcome {
            Ok(value) => {
                committing.store(true, Ordering::Relaxed);
                let commit = owned.commit();
                let committed = match deadline.filter(|_| unknown_adopted_as_committed()) {
                    // The planted fault: the caller's timeout during the commit counts as
                    // committed (this deadline comes no later than the caller's timer, which
                    // polls this future before its own).
                    Some(deadline) => match tokio::time::timeout_at(deadline, commit).await {
                        Ok(committed) => committed,
                        Err(_elapsed) => {
                            log_error(code::TRANSACTION_TIMED_OUT, Phase::Commit, false);
                            log_planted(code::TRANSACTION_TIMED_OUT, "committed");
                            return Ok(value);
                        }
                    },
                    None => commit.await,
                };
                committing.store(false, Ordering::Relaxed);
                match committed {
                    Ok(_committed) => return Ok(value),
                    Err(failed) => {
                        let fdb_error = *failed;
                        let error = txn_error(fdb_error, Phase::Commit);
                        if unknown_adopted_as_committed()
                            && error.kind() == TxnErrorKind::CommitUnknown
                        {
                            log_error(fdb_error.code(), Phase::Commit, false);
                            log_planted(fdb_error.code(), "committed");
                            return Ok(value);
                        }
                        let error = ElectionError::Database(planted(
                            error,
                            unknown_reported_as_not_committed(),
                        ));
                        let retried = fdb_codes::retry_code(&error).is_some();
                        log_error(fdb_error.code(), Phase::Commit, retried);
                        if !retried {
                            return Err(error);
                        }
                        // Resets the transaction after FoundationDB's back-off.
                        trx = failed.on_error().await.map_err(TxnError::from)?;
                        continue;
                    }
                }
            }
            Err(error) => error,
        };
        let retry = fdb_codes::retry_code(&error);
        if let ElectionError::Database(e) = &error {
            if let Some(code) = e.code() {
                log_error(code, Phase::Operation, retry.is_some());
            }
        }
        let Some(code) = retry else {
            return Err(error);
        };
        trx = owned
            .on_error(FdbError::from_code(code))
            .await
            .map_err(TxnError::from)?;
    }
}

/// The body kept a clone of the transaction, so it cannot be committed.
fn reference_kept() -> ElectionError {
    ElectionError::Database(TxnError::with_source(
        TxnErrorKind::Fatal,
        "the transaction body kept a reference to its transaction past its future",
    ))
}
