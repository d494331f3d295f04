//! Processes: one candidate incarnation each, with its own clock, driven by the library's own
//! runner machine (`runner::machine::Machine`), the same one the tokio `Runner` executes; their
//! start, exit and what they act on.

use std::sync::Arc;

use fdb_leader_election::runner::machine::{Machine, Settings};
use fdb_leader_election::{Candidate, CandidateId, ElectionError, Priority, Watch};
use rand::{Rng, RngCore};

use super::World;
use crate::events::Event;
use crate::history::{Entry, Op};
use crate::oracles::{Bounds, Cadence, Closed, Progress};
use crate::plants::Plant;
use crate::time::{Nanos, SimClock, local, nanos};

mod carry;
mod guard;
mod ops;
mod oracles;
mod watch;

/// A process's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Started; registering.
    Registering,
    /// Registered; cycling.
    Running,
    /// Crashed or exited.
    Dead,
}

/// The rogue's own belief, from its raw takeover (plant `takeover-after-half-lease`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RogueTenure {
    pub(crate) ballot: u64,
    pub(crate) valid_until: Nanos,
}

/// A leadership guard, as the simulation's executor keeps it (the `LeadershipGuard` of the
/// tokio runner).
#[derive(Clone, Debug)]
pub(crate) struct SimGuard {
    pub(crate) ballot: u64,
    /// The guard's deadline on the process's clock.
    pub(crate) deadline: Nanos,
    /// Cancelled: guarded tasks stop at their next await point.
    pub(crate) revoked: bool,
    /// Accepts no new work (a handover or resignation is pending).
    pub(crate) closed: bool,
    /// Since when it is closed (oracle 10).
    pub(crate) closed_since: Option<Closed>,
    /// It was closed for a candidate's handover request.
    pub(crate) closed_for_request: bool,
    /// When it was issued, on the process's clock.
    pub(crate) issued_at: Nanos,
}

impl SimGuard {
    /// Whether a guarded task's await point finds the guard cancelled: revoked, or its
    /// deadline passed (the tokio runner's timer fires at the deadline).
    pub(crate) fn cancelled_at(&self, local_now: Nanos) -> bool {
        self.revoked || local_now >= self.deadline
    }
}

/// The machine's operation in flight, as the executor runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    Register,
    Cycle,
    Resign,
    /// Plant `keep-closed-guard`: a resignation the executor never runs; its timeout reports
    /// it done.
    DroppedResign,
    Leave,
}

/// One process incarnation.
pub(crate) struct Process {
    pub(crate) label: String,
    pub(crate) node: usize,
    pub(crate) candidate: Candidate,
    pub(crate) clock: SimClock,
    pub(crate) status: Status,
    pub(crate) machine: Machine,
    /// The machine was started.
    pub(crate) started: bool,
    /// A graceful shutdown was requested.
    pub(crate) shutdown: bool,
    pub(crate) paused_until: Nanos,
    /// Epoch of the machine's wake-up (a newer sleep supersedes an older one).
    pub(crate) ctl_epoch: u64,
    /// A wake-up of the machine is scheduled (the epoch `ctl_epoch` is still to fire).
    pub(crate) wake_pending: bool,
    /// The machine went quiet (reported once).
    pub(crate) quiet: bool,
    /// The operation in flight, with its sequence number.
    pub(crate) op: Option<(u64, OpKind)>,
    pub(crate) op_seq: u64,
    /// The guard handed out, if any; guards that ended and whose tasks still run.
    pub(crate) guard: Option<SimGuard>,
    pub(crate) draining: Option<u64>,
    /// A revoke the plant `revoke-guard-after-commit` holds back until the commit.
    pub(crate) held_revoke: bool,
    /// A lowered guard deadline the plant `guard-deadline-after-reply` holds back until the
    /// cycle's operation ends.
    pub(crate) held_deadline: Option<Nanos>,
    pub(crate) work_epoch: u64,
    pub(crate) work_inflight: u32,
    /// The ballot of the guarded task in flight, and how many more pieces of work it does.
    pub(crate) task_ballot: Option<u64>,
    pub(crate) task_left: u32,
    pub(crate) work_seq: u64,
    pub(crate) watch: Option<Watch>,
    /// The token of the last guard (what a process that skips its lease check acts on).
    pub(crate) cached_token: Option<u64>,
    pub(crate) rogue: bool,
    /// The application claims with `try_claim_leadership` and never heartbeats: its
    /// registration ages, and eviction races its claims.
    pub(crate) claims_only: bool,
    pub(crate) rogue_tenure: Option<RogueTenure>,
    /// The identity the rogue watches, when (local) it first saw it, and the record's lease.
    pub(crate) rogue_obs: Option<((u64, u64), Nanos, Nanos)>,
    pub(crate) rogue_seq: u64,
    /// Plant `uncapped-shorter-lease`: the belief (ballot, local end) it keeps after writing a
    /// shorter lease.
    pub(crate) uncapped: Option<(u64, Nanos)>,
    /// Oracle 9's record of its renewals.
    pub(crate) cadence: Cadence,
    /// The cycle in flight is not counted by oracle 9: it started while the guard was
    /// closed, because the leader record changed (seen through the watch), or as the retry
    /// of a failed cycle.
    pub(crate) cycle_uncounted: bool,
    /// The last cycle failed: the next one is its retry (after the machine's back-off).
    pub(crate) cycle_failed: bool,
    /// The machine is handling a read of the leader record (a cycle it asks for now is run
    /// because the record changed).
    pub(crate) reading: bool,
    /// Plant `keep-closed-guard`: the next resignation is not carried out.
    pub(crate) drop_resign: bool,
    /// Its health checks and what they make of it.
    pub(crate) checks: super::health::Checks,
    /// Plant `reservation-waits-a-lease`: the vacancy reserved for another candidate it last
    /// read (its identity), first seen when (local) and its lease.
    pub(crate) reserved_identity: Option<(u64, u64)>,
    pub(crate) reserved_seen: Option<(Nanos, Nanos)>,
}

impl Process {
    /// Guarded work is in flight: a guarded task runs (between its pieces of work too) or a
    /// piece of its work is committing. What the tokio runner counts as its guarded tasks in
    /// flight, both for the machine (`Ctx`) and for the candidate (`set_busy`).
    pub(crate) fn busy(&self) -> bool {
        self.task_ballot.is_some() || self.work_inflight > 0
    }
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("label", &self.label)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// A node's stable name: every incarnation on it registers under it, so an operator's mark
/// outlives its restarts.
pub(crate) fn node_name(node: usize) -> String {
    format!("n{node}")
}

/// How an election call failed, for the simulation's own bookkeeping.
pub(super) fn unexpected(e: &ElectionError) -> Option<String> {
    match e {
        ElectionError::Database(_)
        | ElectionError::NotRegistered { .. }
        | ElectionError::NotInitialized => None,
        other => Some(other.to_string()),
    }
}

/// What bounds how long a guard may stay closed, in the machine's configuration.
pub(super) fn bounds(m: &Machine) -> Bounds {
    let c = m.config();
    Bounds {
        grace: nanos(c.handover_grace()),
        heartbeat: nanos(c.heartbeat_interval()),
        timeout: nanos(c.transaction_timeout()),
        min_tenure: nanos(c.min_tenure()),
    }
}

impl World {
    /// Starts a new incarnation on `node` with `priority`, `delay` from now.
    pub(in crate::world) fn spawn(&mut self, node: usize, priority: i32, delay: Nanos) {
        let incarnation = self
            .nodes
            .get(node)
            .map_or(0, |n| n.incarnations)
            .saturating_add(1);
        let label = format!("n{node}v{incarnation}");
        let clock =
            crate::time::draw_clock(&mut self.rng, &self.time, self.params.clock_spread_ppm);
        let rate = clock.rate_ppm();
        // Every incarnation of a node registers under the node's name (an operator's mark
        // outlives restarts), with a nonce of its own.
        let name = node_name(node);
        let id = match CandidateId::with_nonce(&name, self.rng.next_u64()) {
            Ok(id) => id,
            Err(e) => {
                self.found.push(Progress::unexpected_error(
                    &label,
                    "CandidateId",
                    &e.to_string(),
                ));
                return;
            }
        };
        let candidate =
            Candidate::with_clock(id.clone(), Priority::new(priority), Arc::new(clock.clone()));
        // The node's version; one incarnation in ten registers none (an older binary).
        let version = self
            .nodes
            .get(node)
            .and_then(|n| n.version.clone())
            .filter(|_| !self.rng.random_ratio(1, 10));
        candidate.set_version(version.clone());
        let checks = self.draw_checks();
        let seed = self.rng.next_u64();
        let machine = Machine::new(
            Settings::new(Some(id.clone()), self.params.config.clone(), seed),
            local(clock.local_now()),
        );
        let pid = self.procs.len();
        let rogue = (self.plant == Some(Plant::TakeoverAfterHalfLease) && node == 0)
            || self.plant == Some(Plant::TakeoverIgnoresRank);
        let claims_only = self.rng.random_ratio(1, 8);
        self.procs.push(Process {
            label: label.clone(),
            node,
            candidate,
            clock,
            status: Status::Registering,
            machine,
            started: false,
            shutdown: false,
            paused_until: 0,
            ctl_epoch: 0,
            op: None,
            op_seq: 0,
            wake_pending: false,
            quiet: false,
            guard: None,
            draining: None,
            held_revoke: false,
            held_deadline: None,
            work_epoch: 0,
            work_inflight: 0,
            task_ballot: None,
            task_left: 0,
            work_seq: 0,
            watch: None,
            cached_token: None,
            rogue,
            claims_only,
            rogue_tenure: None,
            rogue_obs: None,
            rogue_seq: 1 << 48,
            uncapped: None,
            cadence: Cadence::default(),
            cycle_uncounted: false,
            cycle_failed: false,
            reading: false,
            drop_resign: false,
            checks,
            reserved_identity: None,
            reserved_seen: None,
        });
        if let Some(n) = self.nodes.get_mut(node) {
            n.current = Some(pid);
            n.incarnations = incarnation;
            n.restart_pending = false;
        }
        self.log(format!(
            "{label} start id={id} priority={priority} version={} clock_rate={rate}ppm{}{}",
            version.map_or_else(|| "none".to_owned(), |v| v.to_string()),
            if rogue { " ROGUE" } else { "" },
            if claims_only { " claims-only" } else { "" }
        ));
        self.start_checks(pid, delay);
        self.schedule_control(pid, delay);
    }

    /// Schedules the process's next wake-up `delay` from now (superseding any other).
    pub(in crate::world) fn schedule_control(&mut self, pid: usize, delay: Nanos) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.ctl_epoch = p.ctl_epoch.saturating_add(1);
        p.wake_pending = true;
        let epoch = p.ctl_epoch;
        self.queue.push(
            self.now.saturating_add(delay),
            Event::Control { pid, epoch },
        );
    }

    /// The true time for `local` nanoseconds on `pid`'s clock.
    pub(in crate::world) fn local_delay(&self, pid: usize, local: Nanos) -> Nanos {
        self.procs
            .get(pid)
            .map_or(local, |p| p.clock.true_for_local(local))
    }

    /// Live processes whose machine went quiet: nothing in flight (operation or drain) and no
    /// wake-up scheduled. Each is reported once.
    pub(in crate::world) fn quiet_machines(&mut self) -> Vec<String> {
        let mut quiet = Vec::new();
        for p in &mut self.procs {
            let waiting = p.op.is_some() || p.draining.is_some() || p.wake_pending;
            if p.status != Status::Dead && p.started && !waiting && !p.quiet {
                p.quiet = true;
                quiet.push(p.label.clone());
            }
        }
        quiet
    }

    pub(in crate::world) fn label(&self, pid: usize) -> String {
        self.procs
            .get(pid)
            .map_or_else(|| format!("p{pid}"), |p| p.label.clone())
    }

    pub(in crate::world) fn entry_for(&self, pid: usize, op: Op) -> Entry {
        let (label, id, prio, version) = self.procs.get(pid).map_or_else(
            || (format!("p{pid}"), None, 0, None),
            |p| {
                (
                    p.label.clone(),
                    Some(p.candidate.id().to_string()),
                    p.candidate.priority().get(),
                    p.candidate.version().map(|v| v.to_string()),
                )
            },
        );
        let mut entry = Entry::new(&label, id, prio, op);
        entry.actor_version = version;
        entry
    }

    /// The process leaves for good (graceful exit or abandonment).
    pub(in crate::world) fn exit(&mut self, pid: usize, why: &str) {
        let label = self.label(pid);
        if let Some(p) = self.procs.get_mut(pid) {
            p.candidate.step_down_locally();
            p.status = Status::Dead;
            p.watch = None;
            p.guard = None;
            p.op = None;
            p.work_epoch = p.work_epoch.saturating_add(1);
            p.ctl_epoch = p.ctl_epoch.saturating_add(1);
            if let Some(n) = self.nodes.get_mut(p.node) {
                if n.current == Some(pid) {
                    n.current = None;
                }
            }
        }
        self.log(format!("{label} exit: {why}"));
    }

    /// What `pid` acts on as leader now: (ballot, remaining on its clock).
    pub(in crate::world) fn acting_belief(&self, pid: usize) -> Option<(u64, Nanos)> {
        let p = self.procs.get(pid)?;
        if p.status == Status::Dead {
            return None;
        }
        if self.plant == Some(Plant::ActWithoutLeaseCheck) {
            return p.cached_token.map(|b| (b, 0));
        }
        let now = p.clock.local_now();
        if let Some(r) = p.rogue_tenure {
            if now < r.valid_until {
                return Some((r.ballot, r.valid_until.saturating_sub(now)));
            }
        }
        let belief = p
            .candidate
            .leadership()
            .map(|l| (l.ballot.get(), nanos(l.remaining)));
        match p.uncapped {
            Some((b, until)) if now < until && belief.is_none_or(|(lb, _)| lb == b) => {
                Some((b, until.saturating_sub(now)))
            }
            _ => belief,
        }
    }
}
