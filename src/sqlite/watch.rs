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
use crate::store::watch::{WatchHandle, WatchSlot};

/// What becomes of a pending watch.
#[derive(Debug)]
enum Signal {
    /// Its transaction committed, outside a tokio runtime: the future polls the file itself.
    Armed,
    /// Its transaction committed: a task polls the file and reports here.
    Polled(oneshot::Receiver<Result<(), TxnError>>),
    /// Its own transaction changed the key: it has fired.
    Fired,
}

/// The SQLite store's handle on a watch whose transaction has not committed yet.
#[derive(Debug)]
pub(super) struct SqlWatch {
    reply: oneshot::Sender<Result<Signal, TxnError>>,
    db: Weak<Shared>,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    slot: WatchSlot,
}

impl SqlWatch {
    /// A pending watch on `key`, which the transaction saw holding `value`, holding `slot` under
    /// the handle's limit, and the future that reports it.
    pub(super) fn new(
        db: &Arc<Shared>,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        slot: WatchSlot,
    ) -> (Self, Watch) {
        let (reply, armed) = oneshot::channel();
        let weak = Arc::downgrade(db);
        let (own_key, own_value) = (key.clone(), value.clone());
        let future: Watch = Box::pin(async move {
            match armed.await {
                Ok(Ok(Signal::Polled(outcome))) => {
                    // The polling task ends only by reporting, unless the runtime shut down.
                    outcome
                        .await
                        .unwrap_or_else(|_| Err(errors::database_dropped()))
                }
                Ok(Ok(Signal::Armed)) => {
                    poll(&weak, &own_key, own_value.as_deref(), || false).await
                }
                Ok(Ok(Signal::Fired)) => Ok(()),
                Ok(Err(e)) => Err(e),
                // The transaction was dropped without committing.
                Err(_) => Err(errors::dropped_before_commit()),
            }
        });
        let db = Arc::downgrade(db);
        (
            SqlWatch {
                reply,
                db,
                key,
                value,
                slot,
            },
            future,
        )
    }

    /// The transaction committed: start polling. Inside a tokio runtime a task of its own
    /// polls, so the watch fires (and gives its slot back) whether or not its future is polled,
    /// as FoundationDB's does; the task ends early once the future is dropped.
    pub(super) fn arm(self) {
        let SqlWatch {
            reply,
            db,
            key,
            value,
            slot,
        } = self;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // The future polls when it is polled; it holds a slot of its own.
            drop(slot);
            let _ = reply.send(Ok(Signal::Armed));
            return;
        };
        let (report, outcome) = oneshot::channel();
        // The receiver may be gone: the caller dropped the watch, which cancels it.
        if reply.send(Ok(Signal::Polled(outcome))).is_err() {
            return;
        }
        runtime.spawn(async move {
            let outcome = poll(&db, &key, value.as_deref(), || report.is_closed()).await;
            slot.release();
            let _ = report.send(outcome);
        });
    }
}

impl WatchHandle for SqlWatch {
    fn fire(self) -> bool {
        self.slot.release();
        self.reply.send(Ok(Signal::Fired)).is_ok()
    }

    fn fail(self, error: TxnError) {
        self.slot.release();
        let _ = self.reply.send(Err(error));
    }
}

/// Polls until `key`'s committed value differs from `expected`, or until `cancelled()`. Checks
/// once at once (the value may have changed before the watch was armed), then once per poll
/// interval.
async fn poll(
    db: &Weak<Shared>,
    key: &[u8],
    expected: Option<&[u8]>,
    cancelled: impl Fn() -> bool,
) -> Result<(), TxnError> {
    let mut seen: Option<i64> = None;
    loop {
        if cancelled() {
            return Err(errors::dropped_before_commit());
        }
        let interval: Duration = {
            // Only a weak reference is kept between polls: dropping every handle of the
            // database ends its watches.
            let Some(db) = db.upgrade() else {
                return Err(errors::database_dropped());
            };
            match db.watch_changed(key, expected, &mut seen) {
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
