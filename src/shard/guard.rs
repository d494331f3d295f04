//! [`ShardGuard`]: one shard's ownership handed to the application, and the work run under it.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::member::Member;
use crate::clock::LocalInstant;
use crate::core::shard::machine::messages::ShardStop;
use crate::ids::{Ballot, ShardId};
use crate::runner::guard_core::GuardCore;

/// One shard's ownership (one ballot of one shard) by this member, handed to the application
/// by the [`ShardedRunner`](super::ShardedRunner). Cheap to clone.
///
/// It is **cancelled** when the ownership ends: the shard is handed over (cancelled inside the
/// transaction that writes the handover, before it can commit), the member's lease ends
/// locally without a renewal (even while the database is unreachable), or the runner shuts
/// down. When the coordinator asks for the shard, the guard first stops accepting new work
/// ([`handover_requested`](Self::handover_requested)); the member hands the shard over once
/// the work in flight is done, or the grace has passed.
///
/// Carry [`fencing_token`](Self::fencing_token) with every write of the shard's work and
/// fence it: [`ShardedElection::fence_shard`](super::ShardedElection::fence_shard) in the same
/// transaction.
#[derive(Clone)]
pub struct ShardGuard {
    inner: Arc<Inner>,
}

struct Inner {
    shard: ShardId,
    ballot: Ballot,
    member: Member,
    core: GuardCore<ShardStop>,
    /// Woken when one of this guard's tasks ends (the runner looks for idle shards).
    idle: Arc<Notify>,
}

/// Notifies the runner when a guarded task ends.
struct TaskEnd(Arc<Notify>);

impl Drop for TaskEnd {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

impl ShardGuard {
    pub(crate) fn new(
        shard: ShardId,
        ballot: Ballot,
        member: Member,
        deadline: LocalInstant,
        idle: Arc<Notify>,
    ) -> Self {
        ShardGuard {
            inner: Arc::new(Inner {
                shard,
                ballot,
                member,
                core: GuardCore::new(deadline),
                idle,
            }),
        }
    }

    /// The shard.
    pub fn shard(&self) -> ShardId {
        self.inner.shard
    }

    /// The fencing token of this ownership: the shard's ballot.
    pub fn fencing_token(&self) -> Ballot {
        self.inner.ballot
    }

    /// The local instant (the member's clock) the ownership ends at unless renewed.
    pub fn deadline(&self) -> LocalInstant {
        self.inner.core.deadline()
    }

    /// Resolves the next time the [`deadline`](Self::deadline) moves (a renewal of the member,
    /// or a shortened lease moving it back) after this call, even if it is first polled later:
    /// create it, then read the deadline, and no move is missed. For a process that relays the
    /// deadline elsewhere (`fdb-leader run --shards` tells each child's watchdog every renewal
    /// at once).
    pub fn deadline_moved(&self) -> impl Future<Output = ()> + Send + 'static {
        self.inner.core.deadline_moved()
    }

    /// Whether the member owns the shard with this ballot, now: not cancelled, before the
    /// deadline, and the member still believes it. O(log M) in the member's shards.
    pub fn is_valid(&self) -> bool {
        self.valid_at(
            self.inner.member.now(),
            self.inner.member.shard_token(self.inner.shard),
        )
    }

    /// The rule of [`is_valid`](Self::is_valid), given the member's clock reading `now` and
    /// its token for this shard at `now` (`member_token`).
    pub(crate) fn valid_at(&self, now: LocalInstant, member_token: Option<Ballot>) -> bool {
        !self.is_cancelled() && now < self.deadline() && member_token == Some(self.inner.ballot)
    }

    /// Whether the guard has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.core.is_cancelled()
    }

    /// Resolves when the guard is cancelled (`'static`: move it into other tasks).
    pub fn cancelled(&self) -> WaitForCancellationFutureOwned {
        self.inner.core.cancelled()
    }

    /// A token cancelled with the guard.
    pub fn token(&self) -> CancellationToken {
        self.inner.core.token()
    }

    /// Why the ownership ended, once it has.
    pub fn stop_reason(&self) -> Option<ShardStop> {
        self.inner.core.stop_reason()
    }

    /// Whether the coordinator asked for this shard (the guard accepts no new work).
    pub fn is_handover_requested(&self) -> bool {
        self.inner.core.is_handover_requested()
    }

    /// Resolves when a handover is requested, or the guard is cancelled.
    pub fn handover_requested(&self) -> WaitForCancellationFutureOwned {
        self.inner.core.handover_requested()
    }

    /// Whether [`spawn`](Self::spawn) would start new work now.
    pub fn accepts_work(&self) -> bool {
        self.is_valid() && !self.is_handover_requested()
    }

    /// Runs `work` as a tokio task under this ownership: cancelled with the guard, never
    /// started on an ownership that ended or is being handed over; the member hands the shard
    /// over only once such tasks are done (within the grace). `Some` if the work ran to
    /// completion. Must be called within a tokio runtime.
    pub fn spawn<F>(&self, work: F) -> JoinHandle<Option<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let guard = self.clone();
        let busy = self
            .accepts_work()
            .then(|| TaskEnd(Arc::clone(&self.inner.idle)));
        self.inner.core.spawn(work, busy, move || guard.is_valid())
    }

    /// How many of this guard's tasks are running.
    pub fn tasks_running(&self) -> usize {
        self.inner.core.tasks_running()
    }

    pub(crate) fn revoke(&self, reason: ShardStop) {
        self.inner.core.revoke(reason);
    }

    pub(crate) fn close(&self) {
        self.inner.core.close();
    }

    pub(crate) fn set_deadline(&self, deadline: LocalInstant) {
        self.inner.core.set_deadline(deadline);
    }

    pub(crate) async fn wait_tasks(&self, bound: Duration) -> bool {
        self.inner.core.wait_tasks(bound).await
    }
}

impl fmt::Debug for ShardGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardGuard")
            .field("shard", &self.inner.shard)
            .field("ballot", &self.inner.ballot)
            .field("deadline", &self.deadline())
            .field("cancelled", &self.is_cancelled())
            .field("handover_requested", &self.is_handover_requested())
            .finish()
    }
}
