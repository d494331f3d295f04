//! The process's guard as the machine keeps it (its deadline, revocation), draining busy
//! work, and the application's requests to resign or shut down.

use fdb_leader_election::runner::StopReason;
use fdb_leader_election::runner::machine::Event as In;
use fdb_leader_election::{Ballot, LocalInstant};

use super::{OpKind, Process, SimGuard, Status, nanos};
use crate::events::Event;
use crate::plants::Plant;
use crate::time::Nanos;
use crate::world::World;

impl World {
    /// Hands the process a guard of `ballot` (a new leadership, or a fresh guard of the same
    /// ballot after a withdrawn handover) and starts its work loop.
    pub(super) fn issue_guard(&mut self, pid: usize, ballot: Ballot, deadline: LocalInstant) {
        let label = self.label(pid);
        if let Some(p) = self.procs.get_mut(pid) {
            let now = p.clock.local_now();
            p.candidate.set_guard_closed_at(None);
            p.guard = Some(SimGuard {
                ballot: ballot.get(),
                deadline: nanos(deadline.since_origin()),
                revoked: false,
                closed: false,
                closed_since: None,
                closed_for_request: false,
                issued_at: now,
            });
            p.cached_token = Some(ballot.get());
        }
        self.log(format!("{label} guard issued b{}", ballot.get()));
        self.leadership_began(pid, ballot.get());
        self.start_work_loop(pid);
    }

    /// Moves the guard's deadline at once (its timer re-armed), unless the plant
    /// `guard-deadline-after-reply` holds back a lowered deadline while a cycle is in flight
    /// until the operation ends, as the executor did before the fix of DESIGN §10.3.
    pub(super) fn set_guard_deadline(&mut self, pid: usize, deadline: Nanos) {
        let plant = self.plant == Some(Plant::GuardDeadlineAfterReply);
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let in_cycle = matches!(p.op, Some((_, OpKind::Cycle)));
        let Some(g) = p.guard.as_mut() else {
            return;
        };
        if plant && in_cycle && deadline < g.deadline {
            p.held_deadline = Some(deadline);
            return;
        }
        g.deadline = deadline;
        p.held_deadline = None;
    }

    /// Revokes the guard (unless the plant holds the revoke back until the commit).
    pub(super) fn revoke(&mut self, pid: usize, reason: &StopReason) {
        self.drain_served(pid, reason);
        let in_cycle = self
            .procs
            .get(pid)
            .is_some_and(|p| matches!(p.op, Some((_, OpKind::Cycle | OpKind::Resign))));
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if self.plant == Some(Plant::RevokeGuardAfterCommit)
            && in_cycle
            && !matches!(reason, StopReason::LeaseExpired)
        {
            p.held_revoke = true;
            return;
        }
        if let Some(g) = p.guard.as_mut() {
            g.revoked = true;
        }
    }

    /// Waits (within `bound` on the process's clock) for the guarded task in flight.
    pub(super) fn drain(&mut self, pid: usize, bound: Nanos) {
        let busy = self.procs.get(pid).is_some_and(Process::busy);
        if !busy {
            self.feed(pid, In::Drained(true));
            return;
        }
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.ctl_epoch = p.ctl_epoch.saturating_add(1);
        p.wake_pending = false;
        let epoch = p.ctl_epoch;
        p.draining = Some(epoch);
        let d = self.local_delay(pid, bound);
        self.queue
            .push(self.now.saturating_add(d), Event::DrainBound { pid, epoch });
    }

    /// The drain bound passed with guarded work still in flight.
    pub(in crate::world) fn drain_bound(&mut self, pid: usize, epoch: u64) {
        let waiting = self
            .procs
            .get_mut(pid)
            .is_some_and(|p| p.draining.take_if(|e| *e == epoch).is_some());
        if waiting {
            self.feed(pid, In::Drained(false));
        }
    }

    /// The application asks to resign (the machine waits for guarded work, within the grace).
    pub(in crate::world) fn request_resign(&mut self, pid: usize) {
        let label = self.label(pid);
        self.log(format!("{label} asks to resign"));
        self.feed(pid, In::ResignRequested);
    }

    /// Graceful shutdown: the machine ends the leadership, drains, resigns and unregisters.
    pub(in crate::world) fn request_shutdown(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.status == Status::Dead || p.shutdown {
            return;
        }
        p.shutdown = true;
        // An operation in flight is abandoned, as the tokio runner drops it.
        if let Some((seq, _)) = p.op.take() {
            self.abandon(pid, seq);
        }
        let label = self.label(pid);
        self.log(format!("{label} graceful shutdown (replaced)"));
        self.feed(pid, In::ShutdownRequested);
    }
}
