//! Pending watches: created by a transaction, held until its commit arms or fails them.

use crate::store::txn::TxnError;

/// A store's handle on a watch whose transaction has not committed yet.
pub(crate) trait WatchHandle {
    /// The transaction failed to commit (or was dropped): the watch fails with `error`.
    fn fail(self, error: TxnError);
}

/// A watch created by a transaction that has not committed yet.
#[derive(Debug)]
pub(crate) struct PendingWatch<W> {
    /// The watched key.
    pub(crate) key: Vec<u8>,
    /// The key's value as the transaction saw it when it created the watch.
    pub(crate) seen: Option<Vec<u8>>,
    /// The store's handle.
    pub(crate) handle: W,
}
