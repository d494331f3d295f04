//! The retry loop ([`MemDb::run`], [`MemDb::run_with`]) and [`ElectionDatabase`] for MemDb,
//! both over the store layer's loop.

use std::future::Future;
use std::time::Duration;

use super::{MemDb, MemTransaction};
use crate::error::ElectionError;
use crate::store::database::{ElectionDatabase, transact_with};
use crate::store::retry::{EmbeddedStore, MaybeCommitted, RetryClassify, RunOptions, retry_loop};
use crate::store::txn::TxnError;

impl MemDb {
    /// Runs `closure` in a transaction and commits it, retrying retryable failures forever
    /// (like FoundationDB's `Database::run`). See [`run_with`](Self::run_with).
    ///
    /// ```
    /// use fdb_leader_election::memdb::MemDb;
    /// use fdb_leader_election::{ElectionTxn, ReadMode, TxnError};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), TxnError> {
    /// let db = MemDb::new();
    /// for _ in 0..3 {
    ///     db.run(|txn, _maybe_committed| async move {
    ///         let n = match txn.get(b"counter", ReadMode::Serializable).await? {
    ///             Some(v) => u64::from_be_bytes(v.try_into().unwrap_or([0; 8])),
    ///             None => 0,
    ///         };
    ///         txn.set(b"counter", &(n + 1).to_be_bytes());
    ///         Ok::<_, TxnError>(())
    ///     })
    ///     .await?;
    /// }
    /// let txn = db.create_transaction();
    /// let value = txn.get(b"counter", ReadMode::Snapshot).await?;
    /// assert_eq!(value, Some(3u64.to_be_bytes().to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The first error that is not retryable, from the closure or from the commit.
    pub async fn run<F, Fut, T, E>(&self, closure: F) -> Result<T, E>
    where
        F: FnMut(MemTransaction, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<TxnError> + RetryClassify,
    {
        self.run_with(RunOptions::default(), closure).await
    }

    /// Runs `closure` in a fresh transaction per attempt and commits it, retrying as `options`
    /// say.
    ///
    /// An error, from the closure or from the commit, is retried exactly when FoundationDB's
    /// `Database::run` would retry it: [`RetryClassify::txn_error`] finds a [`TxnError`] in it
    /// whose code FoundationDB's `on_error` retries (1007, 1009, 1020, 1021, 1037, 1038, 1042,
    /// 1051, 1078, 1079, 1213, 1223), whatever its kind says; an error with any other code
    /// (timeouts 1004 and 1031 included) ends the loop. An error without a code, which
    /// FoundationDB never raises, is retried when its kind is retryable (MemDb's injected
    /// unavailability; a declared difference, see [the module docs](super)). Conflicts and
    /// `transaction_too_old` are retried at once; the others after an exponential back-off
    /// (`tokio::time::sleep`, so a tokio runtime with time enabled is needed then). After an
    /// unknown commit result (1021), later attempts get [`MaybeCommitted(true)`](MaybeCommitted).
    /// An error the closure returns with a code is returned with the kind that code has, as
    /// FoundationDB's `Database::run` returns it (its `on_error` knows only the code): a
    /// `Conflict` carrying 1031 comes back `Unavailable`, as 1031 is
    /// ([`RetryClassify::txn_error_mut`] finds it).
    ///
    /// # Errors
    ///
    /// The first non-retryable error, or the last error once `options.max_attempts` attempts
    /// have failed.
    pub async fn run_with<F, Fut, T, E>(&self, options: RunOptions, closure: F) -> Result<T, E>
    where
        F: FnMut(MemTransaction, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<TxnError> + RetryClassify,
    {
        retry_loop(self, options, closure).await
    }
}

/// Runs the runner's transactions through [`MemDb::run_with`]'s loop: conflicts and
/// `transaction_too_old` are retried inside, everything else is returned to the runner, and a
/// tokio timeout bounds the whole call.
impl ElectionDatabase for MemDb {
    type Txn = MemTransaction;

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
        transact_with(self.clone(), timeout, body)
    }
}

impl EmbeddedStore for MemDb {
    type Txn = MemTransaction;

    fn begin(&self) -> MemTransaction {
        self.create_transaction()
    }

    fn commit(txn: MemTransaction) -> impl Future<Output = Result<(), TxnError>> + Send {
        txn.commit()
    }
}
