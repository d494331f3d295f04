//! Processes: one candidate incarnation each, with its own clock, driven by the library's own
//! runner machine (`runner::machine::Machine`), the same one the tokio `Runner` executes. This
//! file is the simulation's executor: it feeds the machine events in simulated time and
//! carries out its commands (transactions whose commits land at later events, sleeps, guards,
//! watches), as `runner::Runner`'s executor does with tokio.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use fdb_leader_election::runner::StopReason;
use fdb_leader_election::runner::machine::{
    Command, Ctx, CycleReport, Event as In, Failure, Machine, RecordRead, Settings,
};
use fdb_leader_election::{
    Candidate, CandidateId, ElectionError, LocalInstant, Priority, ResignOutcome, TxnError,
    TxnErrorKind, Watch,
};
use rand::{Rng, RngCore};

use super::commit::kind_name;
use super::{Actor, Kind, Pending, World};
use crate::events::Event;
use crate::history::{CandView, Entry, Op, RecordView};
use crate::oracles::Progress;
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
        let ctx = Ctx::of(Some(&p.candidate), &p.clock, p.work_inflight > 0);
        let commands = p.machine.handle(event, ctx);
        for command in commands {
            self.carry(pid, command);
        }
    }

    /// Carries out one of the machine's commands.
    fn carry(&mut self, pid: usize, command: Command) {
        match command {
            Command::Register => self.start_op(pid, OpKind::Register),
            Command::RunCycle => self.start_op(pid, OpKind::Cycle),
            Command::Resign { expected } => {
                self.start_op_with(pid, OpKind::Resign, Some(expected.get()));
            }
            Command::Leave => self.start_op(pid, OpKind::Leave),
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
                    p.guard = Some(SimGuard {
                        ballot: ballot.get(),
                        deadline: nanos(deadline.since_origin()),
                        revoked: false,
                        closed: false,
                    });
                    p.cached_token = Some(ballot.get());
                }
                self.log(format!("{label} guard issued b{}", ballot.get()));
                self.start_work_loop(pid);
            }
            Command::SetGuardDeadline(deadline) => {
                if let Some(g) = self.procs.get_mut(pid).and_then(|p| p.guard.as_mut()) {
                    g.deadline = nanos(deadline.since_origin());
                }
            }
            Command::CloseGuard => {
                if let Some(g) = self.procs.get_mut(pid).and_then(|p| p.guard.as_mut()) {
                    g.closed = true;
                }
            }
            Command::RevokeGuard(reason) => self.revoke(pid, &reason),
            Command::EndLeadership { ballot, reason } => {
                let label = self.label(pid);
                if let Some(p) = self.procs.get_mut(pid) {
                    if let Some(g) = p.guard.as_mut() {
                        g.revoked = true;
                    }
                    p.guard = None;
                    p.held_revoke = false;
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
                if f.kind() == "not_registered" {
                    self.stats.reregistrations = self.stats.reregistrations.saturating_add(1);
                }
                In::CycleFailed(f)
            }
            (OpKind::Resign, _) => In::ResignDone,
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

    /// The plant's held revoke takes effect once the transaction ended.
    fn release_held_revoke(&mut self, pid: usize) {
        if let Some(p) = self.procs.get_mut(pid) {
            if p.held_revoke {
                p.held_revoke = false;
                if let Some(g) = p.guard.as_mut() {
                    g.revoked = true;
                }
            }
        }
    }

    /// The executor's transaction timeout: an operation still in flight fails as maybe
    /// committed; its commit, if still pending, lands later with nobody listening.
    pub(super) fn op_timeout(&mut self, pid: usize, seq: u64) {
        if self.current_op(pid, seq).is_none() {
            return;
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
