//! Watches: armed when their transaction commits, then resolved by polling the file.
//!
//! SQLite has no change notification across processes. A watch polls every
//! [`watch_poll_interval`](super::SqliteOptions::watch_poll_interval): it asks the handle's
//! watch connection for `PRAGMA data_version`, which changes exactly when some *other*
//! connection (of any process) committed, and re-reads its key only then. The watch
//! connection never writes, so its own activity never changes the number.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::oneshot;

use super::Shared;
use crate::store::errors;
use crate::store::stats::bump;
use crate::store::txn::{TxnError, Watch};
use crate::store::watch::WatchHandle;

/// What becomes of a pending watch.
#[derive(Debug)]
enum Signal {
    /// Its transaction committed: poll the file.
    Armed,
    /// Its own transaction changed the key: it has fired.
    Fired,
}

/// The SQLite store's handle on a watch whose transaction has not committed yet.
#[derive(Debug)]
pub(super) struct SqlWatch {
    reply: oneshot::Sender<Result<Signal, TxnError>>,
}

impl SqlWatch {
    /// A pending watch on `key`, which the transaction saw holding `value`, and the future that
    /// reports it.
    pub(super) fn new(db: &Arc<Shared>, key: Vec<u8>, value: Option<Vec<u8>>) -> (Self, Watch) {
        let (reply, armed) = oneshot::channel();
        let db = Arc::downgrade(db);
        let future: Watch = Box::pin(async move {
            match armed.await {
                Ok(Ok(Signal::Armed)) => poll(db, key, value).await,
                Ok(Ok(Signal::Fired)) => Ok(()),
                Ok(Err(e)) => Err(e),
                // The transaction was dropped without committing.
                Err(_) => Err(errors::dropped_before_commit()),
            }
        });
        (SqlWatch { reply }, future)
    }

    /// The transaction committed: start polling.
    pub(super) fn arm(self) {
        // The receiver may be gone: the caller dropped the watch, which cancels it.
        let _ = self.reply.send(Ok(Signal::Armed));
    }
}

impl WatchHandle for SqlWatch {
    fn fire(self) -> bool {
        self.reply.send(Ok(Signal::Fired)).is_ok()
    }

    fn fail(self, error: TxnError) {
        let _ = self.reply.send(Err(error));
    }
}

/// Polls until `key`'s committed value differs from `expected`. Checks once at once (the value
/// may have changed before the watch was armed), then once per poll interval.
async fn poll(db: Weak<Shared>, key: Vec<u8>, expected: Option<Vec<u8>>) -> Result<(), TxnError> {
    let mut seen: Option<i64> = None;
    loop {
        let interval: Duration = {
            // Only a weak reference is kept between polls: dropping every handle of the
            // database ends its watches.
            let Some(db) = db.upgrade() else {
                return Err(errors::database_dropped());
            };
            match db.watch_changed(&key, expected.as_deref(), &mut seen) {
                Ok(true) => {
                    bump(&db.counters.watches_fired, 1);
                    return Ok(());
                }
                Ok(false) => {}
                // A lock held past the busy timeout, say: look again at the next tick.
                Err(e) if e.is_retryable() => {}
                Err(e) => return Err(e),
            }
            db.options.watch_poll_interval
        };
        tokio::time::sleep(interval).await;
    }
}
