//! The runner oracles' feed (9, renewal cadence; 10, no closed guard kept; 27, a drain
//! served in full): what each process's executor tells them as its machine cycles, renews,
//! closes and ends its guard.

use fdb_leader_election::CandidateId;
use fdb_leader_election::runner::StopReason;
use rand::Rng;

use super::{Status, bounds};
use crate::events::{Chaos, Event};
use crate::oracles::{Closed, Renewal, Violation, drain_served};
use crate::plants::Plant;
use crate::time::{Nanos, nanos};
use crate::world::World;

impl World {
    /// A cycle attempt starts: oracle 9 checks it is not too late, and notes whether it
    /// counts (not while the guard is closed, nor because the record changed).
    pub(super) fn cycle_starts(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.cycle_uncounted = p.reading
            || std::mem::take(&mut p.cycle_failed)
            || p.guard.as_ref().is_some_and(|g| g.closed);
        let now = p.clock.local_now();
        if let Some(v) = p.cadence.cycle_started(&p.label, now) {
            self.found.push(v);
        }
    }

    /// A confirmed renewal (or acquisition) of the guard's ballot: oracle 9 counts it.
    pub(super) fn renewed(&mut self, pid: usize, started: Nanos) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let (Some(g), Some(belief)) = (p.guard.as_ref(), p.candidate.leadership()) else {
            return;
        };
        let config = p.machine.config();
        let renewal = Renewal {
            ballot: g.ballot,
            started,
            counted: !p.cycle_uncounted,
            heartbeat: nanos(config.heartbeat_interval()),
            timeout: nanos(config.transaction_timeout()),
            belief_end: nanos(belief.valid_until.since_origin()),
            confirmed: p.clock.local_now(),
        };
        if let Some(v) = p.cadence.renewed(&p.label, renewal) {
            self.found.push(v);
        }
    }

    /// The leader honours a candidate's handover request and drains its guarded work first
    /// (its guard closed). Now and then, while that work is busy, the requester leaves
    /// (a graceful shutdown unregisters it) or crashes and the operator removes its
    /// registration: the request is withdrawn during the drain (DESIGN §10.6).
    pub(super) fn honours_request(&mut self, pid: usize, requester: &CandidateId) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let busy = p.busy();
        let Some(g) = p.guard.as_mut().filter(|g| g.closed && !g.revoked) else {
            return;
        };
        g.closed_for_request = true;
        if self.quiet || !busy || !self.rng.random_ratio(1, 2) {
            return;
        }
        let Some(rid) = self.procs.iter().position(|q| {
            q.status == Status::Running && !q.shutdown && q.candidate.id() == requester
        }) else {
            return;
        };
        let crash = self.rng.random_bool(0.5);
        let d = self.between(0, self.params.heartbeat / 4);
        self.queue.push(
            self.now.saturating_add(d),
            Event::Chaos(Chaos::Withdraw { pid: rid, crash }),
        );
    }

    /// The machine steps down although nothing ends its closed guard (a withdrawn request,
    /// or a failed resignation). Plant `keep-closed-guard` drops the resignation that follows.
    pub(super) fn stepping_down_anyway(&mut self, pid: usize) {
        let plant = self.plant == Some(Plant::KeepClosedGuard);
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let withdrawn = p.guard.as_ref().is_some_and(|g| g.closed_for_request);
        p.drop_resign = plant;
        self.stats.stepped_down_anyway = self.stats.stepped_down_anyway.saturating_add(1);
        if withdrawn {
            self.stats.withdrawn_in_drain = self.stats.withdrawn_in_drain.saturating_add(1);
        }
        let label = self.label(pid);
        self.log(format!(
            "{label} steps down anyway: its guard is closed and {}",
            if withdrawn {
                "the request that closed it was withdrawn"
            } else {
                "nothing else ends it"
            }
        ));
    }

    /// Oracle 27 as the guard of `pid` ends for `reason`: an end that drains first (a
    /// handover, an ineligible step-down, a withdrawn handover, a resignation, a step-down
    /// anyway) of a guard with a guarded task in flight comes no sooner than the grace from
    /// the closing; a guard that never closed is not ended so, unless the grace is zero.
    pub(super) fn drain_served(&mut self, pid: usize, reason: &StopReason) {
        let drains = matches!(
            reason,
            StopReason::HandedOver { .. }
                | StopReason::Ineligible { .. }
                | StopReason::HandoverWithdrawn
                | StopReason::Resigned
                | StopReason::SteppedDown
        );
        let stored_grace = self.stored_grace;
        let Some(p) = self.procs.get(pid).filter(|_| drains) else {
            return;
        };
        let Some(g) = p.guard.as_ref().filter(|g| !g.revoked) else {
            return;
        };
        let now = p.clock.local_now();
        // A guard that never closed drained nothing: as if it closed now.
        let mut c = g
            .closed_since
            .unwrap_or_else(|| Closed::new(now, g.issued_at, bounds(&p.machine)));
        c.lower_grace(bounds(&p.machine).grace);
        c.lower_grace(stored_grace);
        let why = if g.closed_since.is_some() {
            reason.as_str().to_owned()
        } else {
            format!("{}, without closing it first", reason.as_str())
        };
        let found = drain_served::check(&c, &p.label, g.ballot, now, p.busy(), &why);
        self.found.extend(found);
    }

    /// A configuration with `grace` was committed: every closed guard's leader may read it
    /// (oracle 27).
    pub(in crate::world) fn grace_committed(&mut self, grace: Nanos) {
        for p in &mut self.procs {
            if let Some(c) = p.guard.as_mut().and_then(|g| g.closed_since.as_mut()) {
                c.lower_grace(grace);
            }
        }
    }

    /// Oracles 9 and 10 at the current step, for every live process.
    pub(in crate::world) fn check_runner_oracles(&mut self) {
        let mut found: Vec<Violation> = Vec::new();
        for p in &self.procs {
            if p.status == Status::Dead {
                continue;
            }
            let now = p.clock.local_now();
            found.extend(p.cadence.check(&p.label, now));
            let live_closed = p
                .guard
                .as_ref()
                .filter(|g| !g.revoked && !g.cancelled_at(now) && g.closed);
            if let Some((g, c)) = live_closed.and_then(|g| g.closed_since.map(|c| (g, c))) {
                found.extend(c.check(&p.label, g.ballot, now, bounds(&p.machine)));
            }
        }
        self.found.extend(found);
    }

    /// A stop-the-world pause of `pid` until true time `end`: oracle 9 expects nothing of it
    /// meanwhile, and oracle 10 gives its closed guard that much longer.
    pub(in crate::world) fn paused_oracles(&mut self, pid: usize, end: Nanos) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.cadence.excuse();
        let local = p.clock.local_at(end).saturating_sub(p.clock.local_now());
        if let Some(c) = p.guard.as_mut().and_then(|g| g.closed_since.as_mut()) {
            c.paused(local);
        }
    }

    /// A cycle or resignation failed while the guard is closed: oracle 10 allows for it.
    pub(super) fn closed_op_failed(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let now = p.clock.local_now();
        if let Some(c) = p.guard.as_mut().and_then(|g| g.closed_since.as_mut()) {
            c.failed(now);
        }
    }
}
