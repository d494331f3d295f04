//! Processes: one candidate incarnation each, with its own clock, driven by the library's own
//! runner machine (`runner::machine::Machine`), the same one the tokio `Runner` executes. This
//! file is the simulation's executor: it feeds the machine events in simulated time and
//! carries out its commands (transactions whose commits land at later events, sleeps, guards,
//! watches), as `runner::Runner`'s executor does with tokio.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use fdb_leader_election::runner::StopReason;
use fdb_leader_election::runner::machine::{
    Belief, Command, Ctx, CycleReport, Event as In, Failure, Machine, RecordRead, Settings,
};
use fdb_leader_election::{
    Candidate, CandidateId, ElectionError, LocalInstant, Priority, ResignOutcome, TxnError,
    TxnErrorKind, Watch,
};
use rand::{Rng, RngCore};

use super::commit::kind_name;
use super::{Actor, Kind, Pending, World};
use crate::events::{Chaos, Event};
use crate::history::{CandView, Entry, Op, RecordView};
use crate::oracles::{Bounds, Cadence, Closed, Progress, Renewal, Violation};
use crate::plants::Plant;
use crate::time::{MS, Nanos, SimClock, dur, nanos};

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
    /// The identity the rogue watches and when (local) it first saw it.
    pub(crate) rogue_obs: Option<((u64, u64), Nanos)>,
    pub(crate) rogue_seq: u64,
    /// Plant `uncapped-shorter-lease`: the belief (ballot, local end) it keeps after writing a
    /// shorter lease.
    pub(crate) uncapped: Option<(u64, Nanos)>,
    /// Oracle 9's record of its renewals.
    pub(crate) cadence: Cadence,
    /// The cycle in flight is not counted by oracle 9: it started while the guard was
    /// closed, or because the leader record changed (seen through the watch).
    pub(crate) cycle_uncounted: bool,
    /// The machine is handling a read of the leader record (a cycle it asks for now is run
    /// because the record changed).
    pub(crate) reading: bool,
    /// Plant `keep-closed-guard`: the next resignation is not carried out.
    pub(crate) drop_resign: bool,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("label", &self.label)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// How an election call failed, for the simulation's own bookkeeping.
fn unexpected(e: &ElectionError) -> Option<String> {
    match e {
        ElectionError::Database(_)
        | ElectionError::NotRegistered { .. }
        | ElectionError::NotInitialized => None,
        other => Some(other.to_string()),
    }
}

/// What bounds how long a guard may stay closed, in the machine's configuration.
fn bounds(m: &Machine) -> Bounds {
    let c = m.config();
    Bounds {
        grace: nanos(c.handover_grace()),
        heartbeat: nanos(c.heartbeat_interval()),
        timeout: nanos(c.transaction_timeout()),
    }
}

fn local(t: Nanos) -> LocalInstant {
    LocalInstant::from_origin(dur(t))
}

impl World {
    /// Starts a new incarnation on `node` with `priority`, `delay` from now.
    pub(super) fn spawn(&mut self, node: usize, priority: i32, delay: Nanos) {
        let incarnation = self
            .nodes
            .get(node)
            .map_or(0, |n| n.incarnations)
            .saturating_add(1);
        let label = format!("n{node}v{incarnation}");
        let spread = self.params.clock_spread_ppm;
        let rate = if spread > 0 {
            self.rng.random_range(spread.saturating_neg()..=spread)
        } else {
            0
        };
        let offset = self
            .rng
            .random_range(0..=1_000_000u64)
            .saturating_mul(crate::time::SEC);
        let clock = SimClock::new(self.time.clone(), offset, rate);
        let id = match CandidateId::with_nonce(&label, self.rng.next_u64()) {
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
        let seed = self.rng.next_u64();
        let machine = Machine::new(
            Settings::new(Some(id.clone()), self.params.config.clone(), seed),
            local(clock.local_now()),
        );
        let pid = self.procs.len();
        let rogue = self.plant == Some(Plant::TakeoverAfterHalfLease) && node == 0;
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
            reading: false,
            drop_resign: false,
        });
        if let Some(n) = self.nodes.get_mut(node) {
            n.current = Some(pid);
            n.incarnations = incarnation;
            n.restart_pending = false;
        }
        self.log(format!(
            "{label} start id={id} priority={priority} clock_rate={rate}ppm{}{}",
            if rogue { " ROGUE" } else { "" },
            if claims_only { " claims-only" } else { "" }
        ));
        self.schedule_control(pid, delay);
    }

    /// Schedules the process's next wake-up `delay` from now (superseding any other).
    pub(super) fn schedule_control(&mut self, pid: usize, delay: Nanos) {
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
    pub(super) fn local_delay(&self, pid: usize, local: Nanos) -> Nanos {
        self.procs
            .get(pid)
            .map_or(local, |p| p.clock.true_for_local(local))
    }

    /// Live processes whose machine went quiet: nothing in flight (operation or drain) and no
    /// wake-up scheduled. Each is reported once.
    pub(super) fn quiet_machines(&mut self) -> Vec<String> {
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

    /// The process's wake-up: its machine starts, or looks again.
    pub(super) fn control(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.wake_pending = false;
        if p.status == Status::Dead {
            return;
        }
        let first = !std::mem::replace(&mut p.started, true);
        self.feed(pid, if first { In::Start } else { In::Tick });
    }

    pub(super) fn label(&self, pid: usize) -> String {
        self.procs
            .get(pid)
            .map_or_else(|| format!("p{pid}"), |p| p.label.clone())
    }

    pub(super) fn entry_for(&self, pid: usize, op: Op) -> Entry {
        let (label, id, prio) = self.procs.get(pid).map_or_else(
            || (format!("p{pid}"), None, 0),
            |p| {
                (
                    p.label.clone(),
                    Some(p.candidate.id().to_string()),
                    p.candidate.priority().get(),
                )
            },
        );
        Entry::new(&label, id, prio, op)
    }

    /// Feeds `pid`'s machine one event and carries out what it says.
    pub(super) fn feed(&mut self, pid: usize, event: In) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.status == Status::Dead {
            return;
        }
        let busy = p.work_inflight > 0;
        let mut ctx = Ctx::of(Some(&p.candidate), &p.clock, busy);
        if self.plant == Some(Plant::BeliefShorterThanMargin) {
            // The planted defect: the machine is told of a belief that ends earlier, by the
            // renewal margin and half a heartbeat, than the candidate's.
            let config = p.machine.config();
            let cut = config.renewal_margin().saturating_add(
                config
                    .heartbeat_interval()
                    .checked_div(2)
                    .unwrap_or_default(),
            );
            let belief = p.candidate.leadership().map(|l| Belief {
                ballot: l.ballot,
                valid_until: LocalInstant::from_origin(
                    l.valid_until.since_origin().saturating_sub(cut),
                ),
            });
            ctx = Ctx::new(p.candidate.now(), belief, busy);
        }
        let reading = matches!(event, In::RecordRead(_));
        let outer = std::mem::replace(&mut p.reading, reading);
        let commands = p.machine.handle(event, ctx);
        for command in commands {
            self.carry(pid, command);
        }
        if let Some(p) = self.procs.get_mut(pid) {
            p.reading = outer;
        }
    }

    /// Carries out one of the machine's commands.
    fn carry(&mut self, pid: usize, command: Command) {
        match command {
            Command::Register => self.start_op(pid, OpKind::Register),
            Command::RunCycle => {
                self.cycle_starts(pid);
                self.start_op(pid, OpKind::Cycle);
            }
            Command::Resign { expected } => {
                let dropped = self.procs.get_mut(pid).is_some_and(|p| {
                    p.cadence.excuse();
                    std::mem::take(&mut p.drop_resign)
                });
                if dropped {
                    // Plant `keep-closed-guard`: the resignation that follows
                    // `SteppingDownAnyway` is never run; the executor's timeout reports it done
                    // (as the machine hears of any resignation), and the leader renews on with
                    // its closed guard.
                    let label = self.label(pid);
                    self.log(format!("{label} resignation dropped (plant)"));
                    self.start_dropped(pid);
                    return;
                }
                self.start_op_with(pid, OpKind::Resign, Some(expected.get()));
            }
            Command::Leave => {
                if let Some(p) = self.procs.get_mut(pid) {
                    p.cadence.excuse();
                }
                self.start_op(pid, OpKind::Leave);
            }
            Command::ReadRecord { watch, .. } => self.read_record(pid, watch),
            Command::DisarmWatch => {
                if let Some(p) = self.procs.get_mut(pid) {
                    p.watch = None;
                }
            }
            Command::DrainTasks { bound } => self.drain(pid, nanos(bound)),
            Command::SleepUntil(at) => {
                if self.plant == Some(Plant::LostWakeup) && self.rng.random_ratio(1, 50) {
                    return;
                }
                let Some(p) = self.procs.get(pid) else {
                    return;
                };
                let now = p.clock.local_now();
                let wait = nanos(at.since_origin()).saturating_sub(now).max(1);
                let d = self.local_delay(pid, wait);
                self.schedule_control(pid, d.max(1));
            }
            Command::IssueGuard { ballot, deadline } => {
                let label = self.label(pid);
                if let Some(p) = self.procs.get_mut(pid) {
                    let now = p.clock.local_now();
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
                self.start_work_loop(pid);
            }
            Command::SetGuardDeadline(deadline) => {
                self.set_guard_deadline(pid, nanos(deadline.since_origin()))
            }
            Command::CloseGuard => {
                if let Some(p) = self.procs.get_mut(pid) {
                    let now = p.clock.local_now();
                    let bounds = bounds(&p.machine);
                    let tenure = nanos(p.machine.config().min_tenure());
                    if let Some(g) = p.guard.as_mut() {
                        g.closed = true;
                        let tenure_end = g.issued_at.saturating_add(tenure);
                        g.closed_since
                            .get_or_insert_with(|| Closed::new(now, tenure_end, bounds));
                    }
                }
            }
            Command::HandoverRequested(requester) => self.honours_request(pid, requester.id()),
            Command::SteppingDownAnyway => self.stepping_down_anyway(pid),
            Command::Renewed {
                started,
                took: Some(_),
                ..
            } => self.renewed(pid, nanos(started.since_origin())),
            Command::RevokeGuard(reason) => {
                if let Some(p) = self.procs.get_mut(pid) {
                    p.cadence.excuse();
                }
                self.revoke(pid, &reason);
            }
            Command::EndLeadership { ballot, reason } => {
                let label = self.label(pid);
                if let Some(p) = self.procs.get_mut(pid) {
                    p.cadence.excuse();
                    if let Some(g) = p.guard.as_mut() {
                        g.revoked = true;
                    }
                    p.guard = None;
                    p.held_revoke = false;
                    p.held_deadline = None;
                }
                self.log(format!(
                    "{label} leadership b{} ended: {}",
                    ballot.get(),
                    reason.as_str()
                ));
            }
            Command::LateRenewal { .. } | Command::StepDownLocally => {
                if let Some(p) = self.procs.get(pid) {
                    p.candidate.step_down_locally();
                }
            }
            Command::RejectResign { .. } => {
                let label = self.label(pid);
                self.log(format!("{label} resign rejected: not leading"));
            }
            Command::Stop { .. } => self.exit(pid, "left the election (graceful shutdown)"),
            // Publication, metrics and logs: nothing to carry out in the simulation.
            _ => {}
        }
    }

    /// A cycle attempt starts: oracle 9 checks it is not too late, and notes whether it
    /// counts (not while the guard is closed, nor because the record changed).
    fn cycle_starts(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.cycle_uncounted = p.reading || p.guard.as_ref().is_some_and(|g| g.closed);
        let now = p.clock.local_now();
        if let Some(v) = p.cadence.cycle_started(&p.label, now) {
            self.found.push(v);
        }
    }

    /// A confirmed renewal (or acquisition) of the guard's ballot: oracle 9 counts it.
    fn renewed(&mut self, pid: usize, started: Nanos) {
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
    fn honours_request(&mut self, pid: usize, requester: &CandidateId) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let busy = p.work_inflight > 0 || p.task_ballot.is_some();
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
    fn stepping_down_anyway(&mut self, pid: usize) {
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

    /// Oracles 9 and 10 at the current step, for every live process.
    pub(super) fn check_runner_oracles(&mut self) {
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
    pub(super) fn paused_oracles(&mut self, pid: usize, end: Nanos) {
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
    fn closed_op_failed(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let now = p.clock.local_now();
        if let Some(c) = p.guard.as_mut().and_then(|g| g.closed_since.as_mut()) {
            c.failed(now);
        }
    }

    /// Moves the guard's deadline at once (its timer re-armed), unless the plant
    /// `guard-deadline-after-reply` holds back a lowered deadline while a cycle is in flight
    /// until the operation ends, as the executor did before the fix of DESIGN §10.3.
    fn set_guard_deadline(&mut self, pid: usize, deadline: Nanos) {
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
    fn revoke(&mut self, pid: usize, reason: &StopReason) {
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

    // ----- operations -----------------------------------------------------------------------

    fn start_op(&mut self, pid: usize, kind: OpKind) {
        self.start_op_with(pid, kind, None);
    }

    /// Plant `keep-closed-guard`: an operation with no transaction, ended by its timeout.
    fn start_dropped(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.op_seq = p.op_seq.saturating_add(1);
        let seq = p.op_seq;
        p.op = Some((seq, OpKind::DroppedResign));
        let timeout = nanos(p.machine.config().transaction_timeout());
        let d = self.local_delay(pid, timeout);
        self.queue
            .push(self.now.saturating_add(d), Event::Timeout { pid, op: seq });
    }

    /// Starts an operation: its first attempt now, and the executor's timeout.
    fn start_op_with(&mut self, pid: usize, kind: OpKind, expected: Option<u64>) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.op_seq = p.op_seq.saturating_add(1);
        let seq = p.op_seq;
        p.op = Some((seq, kind));
        let timeout = nanos(p.machine.config().transaction_timeout());
        let d = self.local_delay(pid, timeout);
        self.queue
            .push(self.now.saturating_add(d), Event::Timeout { pid, op: seq });
        self.attempt(pid, seq, kind, expected);
    }

    /// One attempt of the operation `seq`: runs it on a fresh transaction and schedules its
    /// commit. A conflict or `transaction_too_old` runs it again (the store's retry loop).
    fn attempt(&mut self, pid: usize, seq: u64, kind: OpKind, expected: Option<u64>) {
        let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
            return;
        };
        if kind == OpKind::Cycle && self.rogue_due(pid) {
            self.start_rogue(pid, seq);
            return;
        }
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let result: Result<(Kind, Entry), ElectionError> = match kind {
            OpKind::DroppedResign => {
                // No transaction: the plant's executor never runs it.
                self.faults.close(txn.id());
                return;
            }
            OpKind::Register => {
                let init = self.params.config.clone();
                let res = self.rt.block_on(async {
                    election.initialize_with_config(&txn, &init).await?;
                    election.register_candidate(&txn, &cand).await?;
                    let config = election.read_config(&txn).await?;
                    let me = election.get_candidate(&txn, cand.id()).await?;
                    Ok::<_, ElectionError>((config, me))
                });
                res.map(|(config, me)| {
                    let mut entry = self.entry_for(pid, Op::Register);
                    if let Some(rec) = me {
                        entry
                            .candidates_set
                            .push((cand.id().to_string(), CandView::of(&rec)));
                    }
                    (Kind::Register(Box::new(config)), entry)
                })
            }
            OpKind::Cycle => self.cycle_body(pid, &txn, &cand),
            OpKind::Resign => {
                let expected = expected.map(fdb_leader_election::Ballot::new);
                let res = self.rt.block_on(async {
                    let prior = election.leader_record(&txn).await?;
                    let outcome = election.resign_leadership(&txn, &cand, expected).await?;
                    let written = election.leader_record(&txn).await?;
                    Ok::<_, ElectionError>((prior, outcome, written))
                });
                // Inside the transaction, before its commit.
                self.feed(pid, In::ResignDecided);
                res.map(|(prior, outcome, written)| {
                    let mut entry = self.entry_for(pid, Op::Resign);
                    if matches!(outcome, ResignOutcome::Resigned { .. }) {
                        entry.prior = Some(RecordView::of(&prior));
                        entry.leader = Some(RecordView::of(&written));
                    } else {
                        entry.op = Op::ResignRejected;
                    }
                    (Kind::Resign, entry)
                })
            }
            OpKind::Leave => {
                let res = self.rt.block_on(async {
                    let prior = election.leader_record(&txn).await?;
                    let outcome = election.unregister_candidate(&txn, &cand).await?;
                    let written = election.leader_record(&txn).await?;
                    Ok::<_, ElectionError>((prior, outcome, written))
                });
                res.map(|(prior, outcome, written)| {
                    let resigned = matches!(outcome, Some(ResignOutcome::Resigned { .. }));
                    let mut entry = self.entry_for(pid, Op::Unregister { resigned });
                    if prior != written {
                        entry.prior = Some(RecordView::of(&prior));
                        entry.leader = Some(RecordView::of(&written));
                    }
                    entry.candidates_cleared.push(cand.id().to_string());
                    (Kind::Unregister, entry)
                })
            }
        };
        // The process's new transaction has taken its read version: commits of its earlier
        // ones that are still in flight land now.
        self.land_held_commits(pid);
        match result {
            Ok((kind, entry)) => {
                self.schedule_commit(Pending {
                    actor: Actor::Proc(pid),
                    txn,
                    kind,
                    entry,
                    zombie: false,
                    faultless: false,
                    op: Some(seq),
                    landing: false,
                });
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.op_failed(pid, seq, &e);
            }
        }
    }

    /// An operation's attempt failed before its commit (or its commit failed).
    fn op_failed(&mut self, pid: usize, seq: u64, e: &ElectionError) {
        let label = self.label(pid);
        if let Some(what) = unexpected(e) {
            self.log(format!("{label} failed: {what}"));
            self.found
                .push(Progress::unexpected_error(&label, "operation", &what));
        }
        if let ElectionError::Database(t) = e {
            self.count_txn_error(t);
            self.log(format!("{label} operation failed: {}", kind_name(t)));
        }
        let Some(kind) = self.current_op(pid, seq) else {
            return;
        };
        if let ElectionError::Database(t) = e {
            if matches!(t.kind(), TxnErrorKind::Conflict | TxnErrorKind::TooOld) {
                // The store's retry loop runs the transaction again at once.
                let expected = self
                    .procs
                    .get(pid)
                    .and_then(|p| p.guard.as_ref().map(|g| g.ballot).or(p.cached_token));
                self.attempt(pid, seq, kind, expected);
                return;
            }
        }
        self.finish_op(pid, Err(Failure::of(e)));
    }

    /// The kind of operation `seq`, if it is the one in flight.
    pub(super) fn current_op(&self, pid: usize, seq: u64) -> Option<OpKind> {
        self.procs
            .get(pid)
            .and_then(|p| p.op)
            .filter(|(s, _)| *s == seq)
            .map(|(_, k)| k)
    }

    /// The operation in flight ended: feed the machine its result.
    pub(super) fn finish_op(&mut self, pid: usize, result: Result<Kind, Failure>) {
        let Some((_, kind)) = self.procs.get_mut(pid).and_then(|p| p.op.take()) else {
            return;
        };
        self.release_held_revoke(pid);
        let event = match (kind, result) {
            (OpKind::Register, Ok(Kind::Register(config))) => {
                if let Some(p) = self.procs.get_mut(pid) {
                    if p.status == Status::Registering {
                        p.status = Status::Running;
                    }
                }
                In::Registered(Ok(*config))
            }
            (OpKind::Register, Err(f)) => In::Registered(Err(f)),
            (OpKind::Cycle, Ok(Kind::Cycle(cycle))) => {
                let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
                    return;
                };
                let adopted = cand.adopt((*cycle).clone());
                let report = CycleReport::new(&cycle, &adopted);
                drop(cycle);
                self.rogue_observe(pid, report.record());
                // (The planted uncapped belief ends where the library's would have: when a
                // cycle finds the record no longer names it at that ballot.)
                if let Some(p) = self.procs.get_mut(pid) {
                    let mine = report.record().owner().is_some_and(|o| o.id() == cand.id());
                    if p.uncapped
                        .is_some_and(|(b, _)| !mine || report.record().ballot().get() != b)
                    {
                        p.uncapped = None;
                    }
                }
                In::CycleCommitted(report)
            }
            (OpKind::Cycle, Err(f)) => {
                self.closed_op_failed(pid);
                if f.kind() == "not_registered" {
                    self.stats.reregistrations = self.stats.reregistrations.saturating_add(1);
                }
                In::CycleFailed(f)
            }
            (OpKind::Resign, result) => {
                if result.is_err() {
                    self.closed_op_failed(pid);
                }
                In::ResignDone
            }
            (OpKind::DroppedResign, _) => In::ResignDone,
            (OpKind::Leave, Ok(_)) => In::Left(Ok(())),
            (OpKind::Leave, Err(f)) => In::Left(Err(f)),
            (_, Ok(_)) => In::Tick,
        };
        if let Some(p) = self.procs.get_mut(pid) {
            if p.status == Status::Registering && !matches!(event, In::Registered(Err(_))) {
                // Registered before (an eviction made it register again).
                p.status = Status::Running;
            }
        }
        self.feed(pid, event);
    }

    /// The plants' held revoke and held deadline take effect once the transaction ended.
    fn release_held_revoke(&mut self, pid: usize) {
        if let Some(p) = self.procs.get_mut(pid) {
            if p.held_revoke {
                p.held_revoke = false;
                if let Some(g) = p.guard.as_mut() {
                    g.revoked = true;
                }
            }
            if let Some(deadline) = p.held_deadline.take() {
                if let Some(g) = p.guard.as_mut() {
                    g.deadline = deadline;
                }
            }
        }
    }

    /// The executor's transaction timeout: an operation still in flight fails as maybe
    /// committed; its commit, if still pending, lands later with nobody listening.
    pub(super) fn op_timeout(&mut self, pid: usize, seq: u64) {
        match self.current_op(pid, seq) {
            None => return,
            Some(OpKind::DroppedResign) => {
                self.finish_op(pid, Ok(Kind::Resign));
                return;
            }
            Some(_) => {}
        }
        self.abandon(pid, seq);
        let label = self.label(pid);
        self.stats.timeouts = self.stats.timeouts.saturating_add(1);
        self.log(format!("{label} operation timed out (maybe committed)"));
        let timeout = fdb_leader_election::TransactionTimedOut {
            after: self.procs.get(pid).map_or_else(Default::default, |p| {
                p.machine.config().transaction_timeout()
            }),
        };
        self.finish_op(pid, Err(Failure::of(&timeout.into_error())));
    }

    /// Abandons operation `seq`, as the tokio runner drops a transaction it stops waiting for:
    /// its commit, if pending, still lands (nobody hears of it), and what the attempt
    /// prepared (a cycle) is dropped.
    fn abandon(&mut self, pid: usize, seq: u64) {
        for q in self.pending.values_mut() {
            if q.actor == Actor::Proc(pid) && q.op == Some(seq) {
                q.zombie = true;
                q.kind = Kind::Abandoned;
            }
        }
        // A slow reply on its way is ignored when it arrives; what it carries (a cycle) is
        // dropped now.
        for r in self.replies.values_mut() {
            if r.pid == pid && r.op == Some(seq) {
                r.kind = Kind::Abandoned;
            }
        }
    }

    /// A commit's result reaches its process.
    pub(super) fn deliver(
        &mut self,
        pid: usize,
        op: Option<u64>,
        kind: Kind,
        result: Result<(), TxnError>,
    ) {
        if matches!(kind, Kind::Work | Kind::Shadow) {
            if let Some(p) = self.procs.get_mut(pid) {
                p.work_inflight = p.work_inflight.saturating_sub(1);
            }
            self.work_done(pid);
            return;
        }
        if self.procs.get(pid).is_none_or(|p| p.status == Status::Dead) {
            return;
        }
        let Some(seq) = op else {
            return;
        };
        if let Kind::Rogue {
            ballot,
            valid_until,
        } = kind
        {
            // Its commit result, known or not, is what the rogue acts on (only a confirmed
            // commit makes it believe).
            self.rogue_done(pid, seq, ballot, valid_until, result.is_ok());
            return;
        }
        match result {
            Ok(()) => {
                if self.current_op(pid, seq).is_some() {
                    self.finish_op(pid, Ok(kind));
                }
            }
            Err(e) => {
                // The failed attempt's cycle ends with its transaction, before a retry.
                drop(kind);
                self.op_failed(pid, seq, &ElectionError::Database(e));
            }
        }
    }

    // ----- reads, watches, drains -----------------------------------------------------------

    /// Reads the leader record and arms a watch, in one read-only transaction committed at
    /// once (reads see partitions and outages like any other).
    fn read_record(&mut self, pid: usize, want_watch: bool) {
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let watching = want_watch && self.db.watches_enabled();
        let read = self.rt.block_on(async {
            let record = election.leader_record(&txn).await?;
            let watch = watching.then(|| election.watch_leader(&txn));
            Ok::<_, ElectionError>((record, watch))
        });
        let committed = self.rt.block_on(txn.clone().commit());
        let _ = self.faults.take_last_written();
        self.faults.close(txn.id());
        let event = match (read, committed) {
            (Ok((record, watch)), Ok(())) => {
                let armed = match watch {
                    Some(Ok(w)) => {
                        if let Some(p) = self.procs.get_mut(pid) {
                            p.watch = Some(w);
                        }
                        Some(true)
                    }
                    Some(Err(_)) => Some(false),
                    None => want_watch.then_some(false),
                };
                In::RecordRead(Ok(RecordRead {
                    record,
                    config: None,
                    watch: armed,
                }))
            }
            (Err(e), _) => In::RecordRead(Err(Failure::of(&e))),
            (_, Err(e)) => In::RecordRead(Err(Failure::of(&ElectionError::Database(e)))),
        };
        self.feed(pid, event);
    }

    /// Wakes the processes whose watch fired (each at once, or when its pause ends).
    pub(super) fn poll_watches(&mut self) {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut fired = Vec::new();
        for (pid, p) in self.procs.iter_mut().enumerate() {
            let Some(w) = p.watch.as_mut() else {
                continue;
            };
            if let Poll::Ready(r) = w.as_mut().poll(&mut cx) {
                p.watch = None;
                if p.status != Status::Dead {
                    fired.push((pid, r.is_ok()));
                }
            }
        }
        for (pid, ok) in fired {
            let d = self.between(0, MS);
            self.queue
                .push(self.now.saturating_add(d), Event::WatchFired { pid, ok });
        }
    }

    /// A watch that fired reaches its machine.
    pub(super) fn watch_fired(&mut self, pid: usize, ok: bool) {
        let fired = if ok {
            Ok(())
        } else {
            Err(Failure::of(&ElectionError::Database(TxnError::new(
                TxnErrorKind::OtherRetryable,
            ))))
        };
        self.feed(pid, In::WatchFired(fired));
    }

    /// Waits (within `bound` on the process's clock) for the guarded task in flight.
    fn drain(&mut self, pid: usize, bound: Nanos) {
        let busy = self.procs.get(pid).is_some_and(|p| p.work_inflight > 0);
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
    pub(super) fn drain_bound(&mut self, pid: usize, epoch: u64) {
        let waiting = self
            .procs
            .get_mut(pid)
            .is_some_and(|p| p.draining.take_if(|e| *e == epoch).is_some());
        if waiting {
            self.feed(pid, In::Drained(false));
        }
    }

    // ----- workload: resignations and shutdowns ---------------------------------------------

    /// The application asks to resign (the machine waits for guarded work, within the grace).
    pub(super) fn request_resign(&mut self, pid: usize) {
        let label = self.label(pid);
        self.log(format!("{label} asks to resign"));
        self.feed(pid, In::ResignRequested);
    }

    /// Graceful shutdown: the machine ends the leadership, drains, resigns and unregisters.
    pub(super) fn request_shutdown(&mut self, pid: usize) {
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

    /// The process leaves for good (graceful exit or abandonment).
    pub(super) fn exit(&mut self, pid: usize, why: &str) {
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
    pub(super) fn acting_belief(&self, pid: usize) -> Option<(u64, Nanos)> {
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
