//! Watches: pending ones (held by a transaction until it commits) and armed ones (held by the
//! store until their key's value changes).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::oneshot;

use crate::store::errors;
use crate::store::txn::{TxnError, Watch};
use crate::store::watch::{PendingWatch, WatchHandle, WatchSlot};

type Reply = oneshot::Sender<Result<(), TxnError>>;

/// MemDb's handle on a pending watch: the channel its future waits on, which the store keeps
/// once the watch is armed, and the watch's place under the database's limit, given back once
/// the watch fires or fails.
#[derive(Debug)]
pub(super) struct MemWatch {
    reply: Reply,
    armed: Arc<AtomicBool>,
    slot: WatchSlot,
}

impl MemWatch {
    /// A handle holding `slot` and the future that reports it.
    pub(super) fn new(slot: WatchSlot) -> (MemWatch, Watch) {
        let (reply, rx) = oneshot::channel();
        let armed = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&armed);
        let future: Watch = Box::pin(async move {
            match rx.await {
                Ok(outcome) => outcome,
                // The sender was dropped without a reply: either the transaction was dropped
                // before committing, or the database was dropped while the watch was armed.
                Err(_) if seen.load(Ordering::Acquire) => Err(errors::database_dropped()),
                Err(_) => Err(errors::dropped_before_commit()),
            }
        });
        (MemWatch { reply, armed, slot }, future)
    }
}

impl WatchHandle for MemWatch {
    fn fire(self) -> bool {
        self.slot.release();
        self.reply.send(Ok(())).is_ok()
    }

    fn fail(self, error: TxnError) {
        self.slot.release();
        // The receiver may be gone: the caller dropped the watch, which cancels it.
        let _ = self.reply.send(Err(error));
    }
}

/// The armed watches, by key.
#[derive(Debug, Default)]
pub(super) struct WatchRegistry {
    by_key: HashMap<Vec<u8>, Vec<Armed>>,
    /// How many armed watches `by_key` holds.
    len: usize,
    /// Drop cancelled watches once `len` reaches this.
    sweep_at: usize,
}

#[derive(Debug)]
struct Armed {
    value: Option<Vec<u8>>,
    reply: Reply,
    slot: WatchSlot,
}

impl Armed {
    /// Fires the watch, giving its slot back; whether anyone was still waiting.
    fn fire(self) -> bool {
        self.slot.release();
        self.reply.send(Ok(())).is_ok()
    }
}

const MIN_SWEEP: usize = 64;

impl WatchRegistry {
    /// Arms `watch` against the key's current committed value `current`: fires it at once if
    /// the value already differs from the one the transaction saw. Returns whether it fired.
    pub(super) fn arm(&mut self, watch: PendingWatch<MemWatch>, current: Option<&[u8]>) -> bool {
        let PendingWatch {
            key,
            seen: value,
            handle: MemWatch { reply, armed, slot },
        } = watch;
        armed.store(true, Ordering::Release);
        let armed = Armed { value, reply, slot };
        if armed.value.as_deref() != current {
            return armed.fire();
        }
        if armed.reply.is_closed() {
            return false;
        }
        self.by_key.entry(key).or_default().push(armed);
        self.len = self.len.saturating_add(1);
        if self.len >= self.sweep_at.max(MIN_SWEEP) {
            self.sweep();
        }
        false
    }

    /// A commit set `key` to `new` (`None`: cleared). Fires the watches whose value differs
    /// and returns how many fired (cancelled watches are dropped without counting).
    pub(super) fn changed(&mut self, key: &[u8], new: Option<&[u8]>) -> u64 {
        let Some(list) = self.by_key.get_mut(key) else {
            return 0;
        };
        let before = list.len();
        let mut fired: u64 = 0;
        let mut kept = Vec::with_capacity(list.len());
        for w in list.drain(..) {
            if w.value.as_deref() != new {
                if w.fire() {
                    fired = fired.saturating_add(1);
                }
            } else if !w.reply.is_closed() {
                kept.push(w);
            }
        }
        self.len = self.len.saturating_sub(before.saturating_sub(kept.len()));
        if kept.is_empty() {
            self.by_key.remove(key);
        } else {
            *list = kept;
        }
        fired
    }

    /// Drops the watches whose future was dropped.
    fn sweep(&mut self) {
        self.by_key.retain(|_, list| {
            list.retain(|w| !w.reply.is_closed());
            !list.is_empty()
        });
        self.len = self.by_key.values().map(Vec::len).sum();
        self.sweep_at = self.len.saturating_mul(2);
    }

    /// How many armed watches are held (cancelled ones included until the next sweep).
    pub(super) fn len(&self) -> usize {
        self.len
    }
}
