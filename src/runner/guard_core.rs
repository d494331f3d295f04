//! What every guard handed to the application shares (a leadership's [`LeadershipGuard`], a
//! shard's [`ShardGuard`](crate::shard::ShardGuard)): a deadline, cancellation, a handover
//! flag, the reason it ended, and the guarded tasks, with the one rule for starting them.
//!
//! [`LeadershipGuard`]: super::LeadershipGuard

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tokio_util::task::TaskTracker;

use crate::clock::LocalInstant;

/// The state of one guard, `R` being why it ended.
#[derive(Debug)]
pub(crate) struct GuardCore<R> {
    /// The local deadline, in nanoseconds since the clock's origin.
    deadline: AtomicU64,
    token: CancellationToken,
    handover: CancellationToken,
    reason: Mutex<Option<R>>,
    tracker: TaskTracker,
}

fn nanos(t: LocalInstant) -> u64 {
    u64::try_from(t.since_origin().as_nanos()).unwrap_or(u64::MAX)
}

impl<R: Clone> GuardCore<R> {
    pub(crate) fn new(deadline: LocalInstant) -> Self {
        GuardCore {
            deadline: AtomicU64::new(nanos(deadline)),
            token: CancellationToken::new(),
            handover: CancellationToken::new(),
            reason: Mutex::new(None),
            tracker: TaskTracker::new(),
        }
    }

    pub(crate) fn deadline(&self) -> LocalInstant {
        LocalInstant::from_origin(Duration::from_nanos(self.deadline.load(Ordering::SeqCst)))
    }

    pub(crate) fn set_deadline(&self, deadline: LocalInstant) {
        self.deadline.store(nanos(deadline), Ordering::SeqCst);
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    pub(crate) fn cancelled(&self) -> WaitForCancellationFutureOwned {
        self.token.clone().cancelled_owned()
    }

    pub(crate) fn token(&self) -> CancellationToken {
        self.token.child_token()
    }

    pub(crate) fn is_handover_requested(&self) -> bool {
        self.handover.is_cancelled()
    }

    pub(crate) fn handover_requested(&self) -> WaitForCancellationFutureOwned {
        self.handover.clone().cancelled_owned()
    }

    fn reason_slot(&self) -> MutexGuard<'_, Option<R>> {
        self.reason.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn stop_reason(&self) -> Option<R> {
        self.reason_slot().clone()
    }

    /// Ends the guard (the first reason sticks) and cancels it.
    pub(crate) fn revoke(&self, reason: R) {
        {
            let mut slot = self.reason_slot();
            if slot.is_none() {
                *slot = Some(reason);
            }
        }
        self.handover.cancel();
        self.token.cancel();
    }

    /// Accepts no new work from now on.
    pub(crate) fn close(&self) {
        self.handover.cancel();
    }

    /// Stops accepting tasks and waits for the ones in flight, at most `bound`.
    pub(crate) async fn wait_tasks(&self, bound: Duration) -> bool {
        self.tracker.close();
        tokio::time::timeout(bound, self.tracker.wait())
            .await
            .is_ok()
    }

    pub(crate) fn tasks_running(&self) -> usize {
        self.tracker.len()
    }

    /// Runs `work` as a task of this guard: it starts only if `still_valid()` holds when it
    /// first runs (a task scheduled late never starts work on a guard that ended meanwhile),
    /// and is cancelled (dropped at its next `.await`) with the guard. `busy`, held for the
    /// task's life, tells the runner work is in flight; `None` when the guard accepts no work
    /// (the task then returns `None` at once).
    pub(crate) fn spawn<F, B, V>(
        &self,
        work: F,
        busy: Option<B>,
        still_valid: V,
    ) -> JoinHandle<Option<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
        B: Send + 'static,
        V: FnOnce() -> bool + Send + 'static,
    {
        let token = self.token.clone();
        self.tracker.spawn(async move {
            let _busy = busy?;
            if !still_valid() {
                return None;
            }
            tokio::select! {
                biased;
                () = token.cancelled() => None,
                out = work => Some(out),
            }
        })
    }
}
