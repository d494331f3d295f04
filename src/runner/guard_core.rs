//! What every guard handed to the application shares (a leadership's [`LeadershipGuard`], a
//! shard's [`ShardGuard`](crate::shard::ShardGuard)): a deadline, cancellation, a handover
//! flag, the reason it ended, and the guarded tasks, with the one rule for starting them.
//!
//! [`LeadershipGuard`]: super::LeadershipGuard

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tokio_util::task::TaskTracker;

use crate::clock::LocalInstant;

/// The state of one guard, `R` being why it ended.
#[derive(Debug)]
pub(crate) struct GuardCore<R> {
    /// The local deadline, in nanoseconds since the clock's origin.
    deadline: AtomicU64,
    /// Notified each time the deadline is set.
    moved: Arc<Notify>,
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
            moved: Arc::new(Notify::new()),
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
        self.moved.notify_waiters();
    }

    /// Resolves at the first [`set_deadline`](Self::set_deadline) after this call (not after
    /// the first poll: created before a read of the deadline, it misses no later move).
    pub(crate) fn deadline_moved(&self) -> impl Future<Output = ()> + Send + 'static {
        Arc::clone(&self.moved).notified_owned()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::pin::pin;
    use std::task::{Context, Waker};

    use super::*;

    fn at(ms: u64) -> LocalInstant {
        LocalInstant::from_origin(Duration::from_millis(ms))
    }

    /// Whether `f` is ready at its first poll.
    fn ready(f: impl Future<Output = ()>) -> bool {
        let mut f = pin!(f);
        f.as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_ready()
    }

    // What `fdb-leader run` relies on to tell a watchdog each renewal at once: a wait for the
    // deadline's next move, created before a read of the deadline, misses no move made after
    // it, even one made before its first poll; and it ignores moves made before it.
    #[test]
    fn a_deadline_move_after_the_wait_was_created_wakes_it_even_unpolled() {
        let core: GuardCore<()> = GuardCore::new(at(100));
        let before = core.deadline_moved();
        core.set_deadline(at(200));
        let after = core.deadline_moved();
        assert_eq!(core.deadline(), at(200));
        assert!(ready(before), "the move after its creation wakes it");
        assert!(
            !ready(after),
            "a wait created after the move waits for the next one"
        );
        let next = core.deadline_moved();
        core.set_deadline(at(150)); // moved back (a shortened lease): a move too
        assert!(ready(next));
    }
}
