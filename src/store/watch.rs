//! Watches on the client side: pending ones (held by a transaction until its commit arms or
//! fails them) and the per-database limit on outstanding watches.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use crate::store::limits::{
    ABSOLUTE_MAX_WATCHES, DEFAULT_MAX_WATCHES, invalid_max_watches, too_many_watches,
};
use crate::store::txn::{TxnError, Watch};

/// A store's handle on a watch whose transaction has not committed yet.
pub(crate) trait WatchHandle {
    /// The same transaction wrote the watched key with a value other than the one the watch
    /// saw: the watch fires at once, as FoundationDB's does. Returns whether anyone was still
    /// waiting for it.
    fn fire(self) -> bool;

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

/// A database's limit on outstanding watches, as FoundationDB's client keeps it
/// (`DatabaseContext::increaseWatchCounter`): a watch is outstanding from its creation until it
/// fires, fails or is dropped, whether or not anyone polls its future. A watch created beyond
/// the limit fails through its future with `too_many_watches` (1032), while its transaction
/// commits normally.
#[derive(Debug)]
pub(crate) struct WatchLimit {
    max: AtomicUsize,
    outstanding: Arc<AtomicUsize>,
}

impl Default for WatchLimit {
    fn default() -> Self {
        WatchLimit {
            max: AtomicUsize::new(DEFAULT_MAX_WATCHES),
            outstanding: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl WatchLimit {
    /// The limit.
    pub(crate) fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    /// Sets the limit. Watches already outstanding are unaffected. Above
    /// [`ABSOLUTE_MAX_WATCHES`] it fails, as FoundationDB's option does, with
    /// `invalid_option_value` (2006), and the limit is left as it was.
    pub(crate) fn set_max(&self, max: usize) -> Result<(), TxnError> {
        if max > ABSOLUTE_MAX_WATCHES {
            return Err(invalid_max_watches(max));
        }
        self.max.store(max, Ordering::SeqCst);
        Ok(())
    }

    /// How many watches are outstanding.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::SeqCst)
    }

    /// A slot for one more watch, or `None` at the limit.
    pub(crate) fn acquire(&self) -> Option<WatchSlot> {
        let max = self.max();
        self.outstanding
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then(|| n.saturating_add(1))
            })
            .ok()
            .map(|_| {
                WatchSlot(Arc::new(Slot {
                    outstanding: Arc::clone(&self.outstanding),
                    released: AtomicBool::new(false),
                }))
            })
    }

    /// The future of a watch refused at the limit: it fails at once with `too_many_watches`.
    pub(crate) fn refused(&self) -> Watch {
        failed(too_many_watches(self.max()))
    }
}

/// The future of a watch that fails at once with `error` (and holds no slot), as
/// FoundationDB's watch call reports every error through its future.
pub(crate) fn failed(error: TxnError) -> Watch {
    Box::pin(std::future::ready(Err(error)))
}

/// One outstanding watch's place under the limit. Clones share it: the store's handle keeps one
/// until the watch fires or fails (or its transaction is dropped), the watch's future keeps one
/// until it resolves or is dropped; the first clone to be dropped or
/// [`release`](Self::release)d gives the place back.
#[derive(Clone, Debug)]
pub(crate) struct WatchSlot(Arc<Slot>);

#[derive(Debug)]
struct Slot {
    outstanding: Arc<AtomicUsize>,
    released: AtomicBool,
}

impl Slot {
    fn release(&self) {
        if !self.released.swap(true, Ordering::SeqCst) {
            // Never below zero: each slot added one.
            let _ = self
                .outstanding
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
    }
}

impl WatchSlot {
    /// The watch fired, failed or was dropped: its place is free.
    pub(crate) fn release(&self) {
        self.0.release();
    }

    /// `watch`, giving this slot back when it resolves or is dropped.
    pub(crate) fn hold(self, watch: Watch) -> Watch {
        Box::pin(Held { watch, slot: self })
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.release();
    }
}

/// A watch's future with its slot, released once the future resolves or is dropped.
struct Held {
    watch: Watch,
    slot: WatchSlot,
}

impl Future for Held {
    type Output = Result<(), TxnError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let outcome = self.watch.as_mut().poll(cx);
        if outcome.is_ready() {
            self.slot.release();
        }
        outcome
    }
}
