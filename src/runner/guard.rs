//! [`LeadershipGuard`]: the leadership handed to the application, and the leader work run
//! under it.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::guard_core::GuardCore;
use crate::candidate::Candidate;
use crate::clock::LocalInstant;
use crate::core::runner::StopReason;
use crate::election::LeaderElection;
use crate::error::ElectionError;
use crate::ids::Ballot;
use crate::store::txn::ElectionTxn;

/// One leadership (one ballot) of this process, handed to the application when it is
/// elected. Cheap to clone; clones are the same leadership.
///
/// The guard is **cancelled** — [`cancelled`](Self::cancelled) resolves and every
/// [`token`](Self::token) is cancelled — when the leadership ends, whichever comes first:
///
/// - the leader record moves on, or the runner hands over, resigns or steps down. When the
///   runner writes a vacancy, the guard is cancelled *before* that write can commit, so it is
///   cancelled before any successor can be elected;
/// - the local lease deadline passes without a renewal, even while the database is
///   unreachable;
/// - the runner shuts down, or its task ends.
///
/// [`is_valid`](Self::is_valid) is the precise check: it turns false at the local deadline by
/// itself. A guard is never valid again once cancelled; a later election hands out a new
/// guard with a higher ballot.
///
/// Leadership is not authority: a process can pause between a check and the act. Fence every
/// leader-only write: [`fence`](Self::fence) in the write's own transaction (on any store), or
/// carry [`fencing_token`](Self::fencing_token) to a [`FenceGate`](crate::FenceGate) at an
/// external resource.
#[derive(Clone)]
pub struct LeadershipGuard {
    inner: Arc<GuardInner>,
}

struct GuardInner {
    ballot: Ballot,
    candidate: Candidate,
    /// The election this leadership is of: its fence key.
    election: LeaderElection,
    core: GuardCore<StopReason>,
    work: Arc<Work>,
}

/// Counts the guarded tasks in flight, across guards, and tells the candidate it is busy
/// while there are any (so a handover waits for them, within the grace).
#[derive(Debug)]
pub(crate) struct Work {
    in_flight: Mutex<usize>,
    candidate: Candidate,
    /// Woken when the last task in flight finishes.
    pub(crate) idle: Arc<Notify>,
}

impl Work {
    pub(crate) fn new(candidate: Candidate, idle: Arc<Notify>) -> Self {
        Work {
            in_flight: Mutex::new(0),
            candidate,
            idle,
        }
    }

    fn count(&self) -> MutexGuard<'_, usize> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// How many guarded tasks are in flight.
    pub(crate) fn in_flight(&self) -> usize {
        *self.count()
    }

    fn begin(self: &Arc<Self>) -> Busy {
        let mut n = self.count();
        *n = n.saturating_add(1);
        if *n == 1 {
            self.candidate.set_busy(true);
        }
        Busy(Arc::clone(self))
    }
}

/// One guarded task in flight; dropping it (the task ended, was cancelled, or panicked) ends it.
struct Busy(Arc<Work>);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut n = self.0.count();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.0.candidate.set_busy(false);
            drop(n);
            self.0.idle.notify_one();
        }
    }
}

impl LeadershipGuard {
    pub(crate) fn new(
        ballot: Ballot,
        candidate: Candidate,
        election: LeaderElection,
        deadline: LocalInstant,
        work: Arc<Work>,
    ) -> Self {
        LeadershipGuard {
            inner: Arc::new(GuardInner {
                ballot,
                candidate,
                election,
                core: GuardCore::new(deadline),
                work,
            }),
        }
    }

    /// The ballot of this leadership.
    pub fn ballot(&self) -> Ballot {
        self.inner.ballot
    }

    /// The fencing token to attach to leader-only work: the ballot.
    pub fn fencing_token(&self) -> Ballot {
        self.inner.ballot
    }

    /// **Fences the caller's transaction with this leadership**, on any store: reads the
    /// election's fence with a conflict range and requires that this guard's ballot is the
    /// current one and its leader has not stepped down. A leader-only write in the same
    /// transaction then commits only while this leadership holds: a successor's acquisition
    /// changes the fence, so the write fails (or conflicts and, retried, fails) instead of
    /// landing beside it. The fence changes only when ownership changes, so renewals never
    /// abort fenced transactions. It is [`LeaderElection::fence`] with
    /// [`fencing_token`](Self::fencing_token), on the runner's own election: nothing else to
    /// build.
    ///
    /// The check is the store's, not the local clock's: call it in every transaction that
    /// writes leader-only data, whatever [`is_valid`](Self::is_valid) said before it.
    ///
    /// ```
    /// use fdb_leader_election::runner::{ElectionDatabase, LeadershipGuard, Runner};
    /// use fdb_leader_election::{ElectionError, ElectionTxn, MemDb, Subspace};
    /// use std::time::Duration;
    ///
    /// /// Leader-only work: one write, committed only while `guard`'s ballot leads.
    /// async fn assign<D: ElectionDatabase>(db: &D, guard: &LeadershipGuard) -> Result<(), ElectionError> {
    ///     db.transact(Duration::from_secs(1), |txn| {
    ///         let guard = guard.clone();
    ///         async move {
    ///             guard.fence(&txn).await?;
    ///             txn.set(b"jobs/42", b"assigned");
    ///             Ok(())
    ///         }
    ///     })
    ///     .await
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let db = MemDb::new();
    /// let runner = Runner::builder(db.clone(), Subspace::from("jobs")).start()?;
    /// let guard = runner.elected().await.ok_or("the runner stopped")?;
    /// assign(&db, &guard).await?;
    /// runner.shutdown().await; // resigns: the ballot's leader stepped down
    /// assert!(matches!(assign(&db, &guard).await, Err(ElectionError::StaleToken { .. })));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ElectionError::StaleToken`] if another ballot leads or this one's leader stepped
    /// down; corrupt values; the store's errors.
    pub async fn fence<T: ElectionTxn>(&self, txn: &T) -> Result<(), ElectionError> {
        self.inner.election.fence(txn, self.inner.ballot).await
    }

    /// The local instant (on the candidate's clock) at which this leadership ends unless it is
    /// renewed. Each renewal moves it forward.
    pub fn deadline(&self) -> LocalInstant {
        self.inner.core.deadline()
    }

    /// Resolves the next time the [`deadline`](Self::deadline) moves (a renewal, or a
    /// shortened lease moving it back) after this call, even if it is first polled later:
    /// create it, then read the deadline, and no move is missed. For a process that relays the
    /// deadline elsewhere (`fdb-leader run` tells its child's watchdog every renewal at once).
    pub fn deadline_moved(&self) -> impl Future<Output = ()> + Send + 'static {
        self.inner.core.deadline_moved()
    }

    /// How long the leadership lasts from now without another renewal (zero once it ended).
    pub fn remaining(&self) -> Duration {
        if self.is_cancelled() {
            return Duration::ZERO;
        }
        self.deadline()
            .saturating_duration_since(self.inner.candidate.now())
    }

    /// Whether this process still leads with this ballot, now: not cancelled, before the
    /// local deadline, and the candidate still believes in this ballot.
    pub fn is_valid(&self) -> bool {
        !self.is_cancelled()
            && self.inner.candidate.now() < self.deadline()
            && self.inner.candidate.fencing_token() == Some(self.inner.ballot)
    }

    /// Whether the guard has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.core.is_cancelled()
    }

    /// A future that resolves when the guard is cancelled. It is `'static`: move it into
    /// other tasks freely.
    pub fn cancelled(&self) -> WaitForCancellationFutureOwned {
        self.inner.core.cancelled()
    }

    /// A token cancelled with the guard (a child token: cancelling it does not end the
    /// leadership).
    pub fn token(&self) -> CancellationToken {
        self.inner.core.token()
    }

    /// Why the leadership ended, once it has.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.inner.core.stop_reason()
    }

    /// Whether this leader is about to step down: a higher-priority candidate (or an
    /// operator) asked it to hand over, or the application asked it to resign. From then on
    /// the guard accepts no new work; the leader steps down once the work in flight is done,
    /// or the configured grace has passed.
    pub fn is_handover_requested(&self) -> bool {
        self.inner.core.is_handover_requested()
    }

    /// A future that resolves when a handover is requested, or the guard is cancelled.
    pub fn handover_requested(&self) -> WaitForCancellationFutureOwned {
        self.inner.core.handover_requested()
    }

    /// Runs `work` as a tokio task under this leadership: it is cancelled (dropped at its next
    /// `.await`) when the guard is cancelled, and the runner waits for it (within a bound)
    /// before it competes again or shuts down. While guarded tasks are in flight, a handover
    /// waits for them, at most the configured `handover_grace`.
    ///
    /// The task's output is `Some` if `work` ran to completion, and `None` if it was cancelled
    /// or never started: the guard was already cancelled or no longer valid, or a handover
    /// was requested, when `spawn` was called *or* when the task first ran (a task scheduled
    /// late never starts work on a leadership that ended meanwhile).
    ///
    /// Must be called within a tokio runtime.
    pub fn spawn<F>(&self, work: F) -> JoinHandle<Option<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let guard = self.clone();
        let busy = self.accepts_work().then(|| self.inner.work.begin());
        self.inner.core.spawn(work, busy, move || guard.is_valid())
    }

    /// Whether [`spawn`](Self::spawn) would start new work now.
    pub fn accepts_work(&self) -> bool {
        self.is_valid() && !self.is_handover_requested()
    }

    /// Ends the leadership (the first reason sticks) and cancels the guard.
    pub(crate) fn revoke(&self, reason: StopReason) {
        self.inner.core.revoke(reason);
    }

    /// Sets the deadline: the belief's (a renewal moves it forward; writing a shorter lease
    /// moves it back).
    pub(crate) fn set_deadline(&self, deadline: LocalInstant) {
        self.inner.core.set_deadline(deadline);
    }

    /// Accepts no new work from now on: a handover or a resignation is pending.
    pub(crate) fn close(&self) {
        self.inner.core.close();
    }

    /// Stops accepting tasks and waits for the ones in flight, at most `bound`. Returns
    /// whether they all finished.
    pub(crate) async fn wait_tasks(&self, bound: Duration) -> bool {
        self.inner.core.wait_tasks(bound).await
    }

    /// How many of this guard's tasks are still running.
    pub(crate) fn tasks_running(&self) -> usize {
        self.inner.core.tasks_running()
    }
}

impl fmt::Debug for LeadershipGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeadershipGuard")
            .field("ballot", &self.inner.ballot)
            .field("candidate", self.inner.candidate.id())
            .field("deadline", &self.deadline())
            .field("cancelled", &self.is_cancelled())
            .field("handover_requested", &self.is_handover_requested())
            .field("stop_reason", &self.stop_reason())
            .field("tasks", &self.tasks_running())
            .finish()
    }
}
