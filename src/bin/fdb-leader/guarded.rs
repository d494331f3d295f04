//! A store wrapper that reports errors that cannot heal, while the runner goes on retrying
//! (as a library should): the supervisor then stops the child and exits 3.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use fdb_leader_election::ElectionError;
use fdb_leader_election::runner::ElectionDatabase;

use crate::classify::{Healing, classify, message};
use crate::signals::Fatal;

/// `inner`, with every failed transaction classified; the first that cannot heal is reported
/// through `fatal`.
#[derive(Clone, Debug)]
pub(crate) struct Guarded<D> {
    inner: D,
    /// The store file, for messages (`None`: not a file).
    path: Option<PathBuf>,
    fatal: Fatal,
}

impl<D> Guarded<D> {
    pub(crate) fn new(inner: D, path: Option<PathBuf>, fatal: Fatal) -> Self {
        Guarded { inner, path, fatal }
    }
}

impl<D: ElectionDatabase> ElectionDatabase for Guarded<D> {
    type Txn = D::Txn;

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
        let run = self.inner.transact(timeout, body);
        let (path, fatal) = (self.path.clone(), self.fatal.clone());
        async move {
            let result = run.await;
            if let Err(e) = &result {
                if let (Healing::Never(cause), Some(path)) = (classify(e), &path) {
                    fatal.raise(message(e, cause, path));
                }
            }
            result
        }
    }
}
