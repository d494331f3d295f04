//! Processes: one candidate incarnation each, with its own clock, and its election loop
//! (register, cycle, resign, unregister), driven through the library's public API.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use fdb_leader_election::{
    Candidate, CandidateId, ElectionError, ElectionTxn, Priority, ResignOutcome, TxnError, Watch,
};
use rand::{Rng, RngCore};

use super::commit::kind_name;
use super::{Actor, Kind, Pending, World};
use crate::events::{Event, WorkStep};
use crate::history::{CandView, CycleAction, Entry, Op, RecordView};
use crate::oracles::Progress;
use crate::plants::Plant;
use crate::time::{MS, Nanos, SimClock, nanos};
use crate::wire;

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

/// One process incarnation.
pub(crate) struct Process {
    pub(crate) label: String,
    pub(crate) node: usize,
    pub(crate) candidate: Candidate,
    pub(crate) clock: SimClock,
    pub(crate) status: Status,
    /// A graceful shutdown was requested.
    pub(crate) shutdown: bool,
    pub(crate) shutdown_attempts: u32,
    /// The shutdown's resignation step is done.
    pub(crate) resigned: bool,
    pub(crate) paused_until: Nanos,
    pub(crate) ctl_epoch: u64,
    pub(crate) ctl_inflight: bool,
    pub(crate) work_epoch: u64,
    pub(crate) work_inflight: u32,
    pub(crate) work_seq: u64,
    pub(crate) watch: Option<Watch>,
    /// The token of the last cycle adopted as leader (what a process that skips its lease
    /// check acts on).
    pub(crate) cached_token: Option<u64>,
    pub(crate) rogue: bool,
    pub(crate) rogue_tenure: Option<RogueTenure>,
    /// The identity the rogue watches and when (local) it first saw it.
    pub(crate) rogue_obs: Option<((u64, u64), Nanos)>,
    pub(crate) rogue_seq: u64,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("label", &self.label)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// How an election call failed.
enum Failure {
    /// A database error (injected fault, conflict, too old, partition, outage).
    Db(TxnError),
    /// The candidate's registration is gone (evicted).
    NotRegistered,
    /// Anything else: no fault explains it.
    Unexpected(String),
}

fn classify(e: ElectionError) -> Failure {
    match e {
        ElectionError::Database(t) => Failure::Db(t),
        ElectionError::NotRegistered { .. } => Failure::NotRegistered,
        other => Failure::Unexpected(other.to_string()),
    }
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
        let pid = self.procs.len();
        let rogue = self.plant == Some(Plant::TakeoverAfterHalfLease) && node == 0;
        self.procs.push(Process {
            label: label.clone(),
            node,
            candidate,
            clock,
            status: Status::Registering,
            shutdown: false,
            shutdown_attempts: 0,
            resigned: false,
            paused_until: 0,
            ctl_epoch: 0,
            ctl_inflight: false,
            work_epoch: 0,
            work_inflight: 0,
            work_seq: 0,
            watch: None,
            cached_token: None,
            rogue,
            rogue_tenure: None,
            rogue_obs: None,
            rogue_seq: 1 << 48,
        });
        if let Some(n) = self.nodes.get_mut(node) {
            n.current = Some(pid);
            n.incarnations = incarnation;
            n.restart_pending = false;
        }
        self.log(format!(
            "{label} start id={id} priority={priority} clock_rate={rate}ppm{}",
            if rogue { " ROGUE" } else { "" }
        ));
        self.schedule_control(pid, delay);
    }

    /// Schedules the process's next control step `delay` from now (superseding any other).
    pub(super) fn schedule_control(&mut self, pid: usize, delay: Nanos) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.ctl_epoch = p.ctl_epoch.saturating_add(1);
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

    /// A retry after a failed step: a quarter heartbeat, jittered, on the process's clock.
    fn retry_delay(&mut self, pid: usize) -> Nanos {
        let hb = self.params.heartbeat;
        let local = self.between(hb / 8, hb / 4);
        self.local_delay(pid, local)
    }

    /// The process's control step.
    pub(super) fn control(&mut self, pid: usize) {
        let Some(p) = self.procs.get(pid) else {
            return;
        };
        if p.ctl_inflight {
            return;
        }
        match (p.status, p.shutdown) {
            (Status::Dead, _) => {}
            (Status::Registering, false) => self.start_register(pid),
            (Status::Registering, true) => self.exit(pid, "shut down before registering"),
            (Status::Running, true) => self.start_shutdown_step(pid),
            (Status::Running, false) => {
                let believes = self.acting_belief(pid).is_some();
                if believes && !self.quiet && self.rng.random_ratio(1, 150) {
                    self.start_resign(pid);
                } else if self.rogue_due(pid) {
                    self.start_rogue(pid);
                } else {
                    self.start_cycle(pid);
                }
            }
        }
    }

    fn op_failed(&mut self, pid: usize, what: &str, f: Failure) {
        let label = self.label(pid);
        match f {
            Failure::Db(e) => {
                self.count_txn_error(&e);
                self.log(format!("{label} {what} failed: {}", kind_name(&e)));
                let d = self.retry_delay(pid);
                self.schedule_control(pid, d);
            }
            Failure::NotRegistered => {
                self.stats.reregistrations = self.stats.reregistrations.saturating_add(1);
                self.log(format!(
                    "{label} {what}: not registered (evicted); registering again"
                ));
                if let Some(p) = self.procs.get_mut(pid) {
                    p.status = Status::Registering;
                    p.cached_token = None;
                }
                let d = self.retry_delay(pid);
                self.schedule_control(pid, d);
            }
            Failure::Unexpected(e) => {
                self.log(format!("{label} {what} failed: {e}"));
                self.found
                    .push(Progress::unexpected_error(&label, what, &e));
            }
        }
    }

    pub(super) fn label(&self, pid: usize) -> String {
        self.procs
            .get(pid)
            .map_or_else(|| format!("p{pid}"), |p| p.label.clone())
    }

    fn entry_for(&self, pid: usize, op: Op) -> Entry {
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

    fn start_register(&mut self, pid: usize) {
        let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
            return;
        };
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let res = self.rt.block_on(async {
            election.register_candidate(&txn, &cand).await?;
            election.get_candidate(&txn, cand.id()).await
        });
        match res {
            Ok(rec) => {
                let mut entry = self.entry_for(pid, Op::Register);
                if let Some(rec) = rec {
                    entry
                        .candidates_set
                        .push((cand.id().to_string(), CandView::of(&rec)));
                }
                self.begin_ctl(pid, txn, Kind::Register, entry);
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.op_failed(pid, "register", classify(e));
            }
        }
    }

    fn begin_ctl(
        &mut self,
        pid: usize,
        txn: fdb_leader_election::MemTransaction,
        kind: Kind,
        entry: Entry,
    ) {
        if let Some(p) = self.procs.get_mut(pid) {
            p.ctl_inflight = true;
        }
        self.schedule_commit(Pending {
            actor: Actor::Proc(pid),
            txn,
            kind,
            entry,
            zombie: false,
            faultless: false,
        });
    }

    fn start_cycle(&mut self, pid: usize) {
        let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
            return;
        };
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let res = self.rt.block_on(async {
            let prior = election.leader_record(&txn).await?;
            let cycle = election.run_election_cycle(&txn, &cand).await?;
            let written = election.leader_record(&txn).await?;
            let me = election.get_candidate(&txn, cand.id()).await?;
            Ok::<_, ElectionError>((prior, cycle, written, me))
        });
        match res {
            Ok((prior, cycle, written, me)) => {
                let prior = RecordView::of(&prior);
                self.rogue_observe(pid, &prior);
                let action = CycleAction::of(cycle.action());
                let mut entry = self.entry_for(pid, Op::Cycle(action));
                if action != CycleAction::None {
                    entry.prior = Some(prior);
                    entry.leader = Some(RecordView::of(&written));
                }
                if let Some(me) = me {
                    entry
                        .candidates_set
                        .push((cand.id().to_string(), CandView::of(&me)));
                }
                self.begin_ctl(pid, txn, Kind::Cycle(Box::new(cycle)), entry);
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.op_failed(pid, "cycle", classify(e));
            }
        }
    }

    fn start_resign(&mut self, pid: usize) {
        let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
            return;
        };
        let expected = cand.fencing_token();
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let res = self.rt.block_on(async {
            let prior = election.leader_record(&txn).await?;
            let outcome = election.resign_leadership(&txn, &cand, expected).await?;
            let written = election.leader_record(&txn).await?;
            Ok::<_, ElectionError>((prior, outcome, written))
        });
        match res {
            Ok((prior, ResignOutcome::Resigned { .. }, written)) => {
                if let Some(p) = self.procs.get_mut(pid) {
                    p.cached_token = None;
                }
                let mut entry = self.entry_for(pid, Op::Resign);
                entry.prior = Some(RecordView::of(&prior));
                entry.leader = Some(RecordView::of(&written));
                self.begin_ctl(pid, txn, Kind::Resign, entry);
            }
            Ok((_, other, _)) => {
                self.faults.close(txn.id());
                let label = self.label(pid);
                self.log(format!("{label} resign rejected: {other:?}"));
                if let Some(p) = self.procs.get_mut(pid) {
                    p.resigned |= p.shutdown;
                }
                self.schedule_control(pid, MS);
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.op_failed(pid, "resign", classify(e));
            }
        }
    }

    /// One step of a graceful shutdown: resign if this process owns the record, then
    /// unregister.
    fn start_shutdown_step(&mut self, pid: usize) {
        let Some(p) = self.procs.get(pid) else {
            return;
        };
        if p.shutdown_attempts >= 5 {
            self.exit(pid, "gave up shutting down gracefully");
            return;
        }
        if let Some(p) = self.procs.get_mut(pid) {
            p.shutdown_attempts = p.shutdown_attempts.saturating_add(1);
        }
        let resigned = self.procs.get(pid).is_some_and(|p| p.resigned);
        if !resigned {
            self.start_resign(pid);
            return;
        }
        let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
            return;
        };
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let res = self.rt.block_on(async {
            let prior = election.leader_record(&txn).await?;
            let outcome = election.unregister_candidate(&txn, &cand).await?;
            let written = election.leader_record(&txn).await?;
            Ok::<_, ElectionError>((prior, outcome, written))
        });
        match res {
            Ok((prior, outcome, written)) => {
                let resigned = matches!(outcome, Some(ResignOutcome::Resigned { .. }));
                let mut entry = self.entry_for(pid, Op::Unregister { resigned });
                if resigned {
                    entry.prior = Some(RecordView::of(&prior));
                    entry.leader = Some(RecordView::of(&written));
                }
                entry.candidates_cleared.push(cand.id().to_string());
                self.begin_ctl(pid, txn, Kind::Unregister, entry);
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.op_failed(pid, "unregister", classify(e));
            }
        }
    }

    /// The process leaves for good (graceful exit or abandonment).
    pub(super) fn exit(&mut self, pid: usize, why: &str) {
        let label = self.label(pid);
        if let Some(p) = self.procs.get_mut(pid) {
            p.candidate.step_down_locally();
            p.status = Status::Dead;
            p.watch = None;
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

    /// A commit's result reaches its process.
    pub(super) fn deliver(
        &mut self,
        pid: usize,
        kind: Kind,
        result: Result<(), TxnError>,
        applied: bool,
    ) {
        if let Some(p) = self.procs.get_mut(pid) {
            if matches!(kind, Kind::Work | Kind::Shadow) {
                p.work_inflight = p.work_inflight.saturating_sub(1);
            } else {
                p.ctl_inflight = false;
            }
        }
        if self.procs.get(pid).is_none_or(|p| p.status == Status::Dead) {
            return;
        }
        let label = self.label(pid);
        match kind {
            Kind::Register => {
                if result.is_ok() {
                    if let Some(p) = self.procs.get_mut(pid) {
                        p.status = Status::Running;
                    }
                    self.schedule_control(pid, MS);
                    self.start_work_loop(pid);
                } else {
                    let d = self.retry_delay(pid);
                    self.schedule_control(pid, d);
                }
            }
            Kind::Cycle(cycle) => {
                if result.is_ok() {
                    let next_action_at = cycle.next_action_at();
                    let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
                        return;
                    };
                    let adopted = cand.adopt(*cycle);
                    let token = match &adopted {
                        fdb_leader_election::ElectionResult::Leader(s) => Some(s.ballot.get()),
                        fdb_leader_election::ElectionResult::Follower(_) => None,
                    };
                    if let Some(p) = self.procs.get_mut(pid) {
                        p.cached_token = token;
                    }
                    self.log(format!(
                        "{label} adopted: {}",
                        match token {
                            Some(b) => format!("leader b{b}"),
                            None => "follower".to_owned(),
                        }
                    ));
                    self.arm_watch(pid);
                    let d =
                        self.next_cycle_delay(pid, next_action_at.map(|t| nanos(t.since_origin())));
                    self.schedule_control(pid, d);
                } else {
                    let d = self.retry_delay(pid);
                    self.schedule_control(pid, d);
                }
            }
            Kind::Resign => {
                if let Some(p) = self.procs.get_mut(pid) {
                    if p.shutdown {
                        p.resigned = true;
                    }
                }
                self.schedule_control(pid, MS);
            }
            Kind::Unregister => {
                if result.is_ok() {
                    self.exit(pid, "unregistered (graceful shutdown)");
                } else {
                    let d = self.retry_delay(pid);
                    self.schedule_control(pid, d);
                }
            }
            Kind::Rogue {
                ballot,
                valid_until,
            } => {
                if result.is_ok() && applied {
                    if let Some(p) = self.procs.get_mut(pid) {
                        p.rogue_tenure = Some(RogueTenure {
                            ballot,
                            valid_until,
                        });
                    }
                    self.log(format!(
                        "{label} ROGUE leads b{ballot} by its own raw takeover"
                    ));
                }
                self.schedule_control(pid, MS);
            }
            Kind::Work | Kind::Shadow => self.work_done(pid),
            Kind::Init | Kind::Config { .. } | Kind::Evict => {}
        }
    }

    /// The delay until the next cycle: a heartbeat (jittered down to three quarters) on the
    /// process's clock, or sooner if the cycle said when it could next act.
    fn next_cycle_delay(&mut self, pid: usize, next_action_at: Option<Nanos>) -> Nanos {
        let hb = self.params.heartbeat;
        let mut local = self.between(hb.saturating_mul(3) / 4, hb);
        if let (Some(at), Some(p)) = (next_action_at, self.procs.get(pid)) {
            let now = p.clock.local_now();
            local = local
                .min(at.saturating_sub(now))
                .max(if at > now { 1 } else { MS });
        }
        self.local_delay(pid, local)
    }

    /// Arms a watch on the leader record in its own read-only transaction, so a change (a
    /// handover request, a reservation) wakes the process at once.
    fn arm_watch(&mut self, pid: usize) {
        if !self.db.watches_enabled() {
            return;
        }
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let watch = election.watch_leader(&txn);
        let committed = self.rt.block_on(txn.clone().commit());
        let _ = self.faults.take_last_written();
        self.faults.close(txn.id());
        if let (Ok(w), Ok(())) = (watch, committed) {
            if let Some(p) = self.procs.get_mut(pid) {
                p.watch = Some(w);
            }
        }
    }

    /// Wakes the processes whose watch fired.
    pub(super) fn poll_watches(&mut self) {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut woken = Vec::new();
        for (pid, p) in self.procs.iter_mut().enumerate() {
            let Some(w) = p.watch.as_mut() else {
                continue;
            };
            if let Poll::Ready(r) = w.as_mut().poll(&mut cx) {
                p.watch = None;
                if r.is_ok() && p.status == Status::Running && !p.ctl_inflight {
                    woken.push(pid);
                }
            }
        }
        for pid in woken {
            let d = self.between(0, MS);
            self.schedule_control(pid, d);
        }
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
        if let Some(r) = p.rogue_tenure {
            let now = p.clock.local_now();
            if now < r.valid_until {
                return Some((r.ballot, r.valid_until.saturating_sub(now)));
            }
        }
        p.candidate
            .leadership()
            .map(|l| (l.ballot.get(), nanos(l.remaining)))
    }

    fn rogue_observe(&mut self, pid: usize, prior: &RecordView) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if !p.rogue {
            return;
        }
        let id = prior.identity();
        if p.rogue_obs.map(|(i, _)| i) != Some(id) {
            p.rogue_obs = Some((id, p.clock.local_now()));
        }
    }

    /// Whether the rogue's half-lease wait is over for a record owned by someone else.
    fn rogue_due(&self, pid: usize) -> bool {
        let Some(p) = self.procs.get(pid) else {
            return false;
        };
        if !p.rogue || self.acting_belief(pid).is_some() {
            return false;
        }
        p.rogue_obs.is_some_and(|(_, first)| {
            p.clock.local_now() >= first.saturating_add(self.params.lease / 2)
        })
    }

    /// The planted rogue takeover: a raw transaction that writes a takeover record (ballot + 1,
    /// owned by the rogue) and the matching fence, conflict-checked on both keys, after half a
    /// lease of unchanged observation.
    fn start_rogue(&mut self, pid: usize) {
        let Some((cand, obs, seq)) = self
            .procs
            .get(pid)
            .map(|p| (p.candidate.clone(), p.rogue_obs, p.rogue_seq))
        else {
            return;
        };
        let t0 = self.procs.get(pid).map_or(0, |p| p.clock.local_now());
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let (leader_key, fence_key) = (wire::leader_key(), wire::fence_key());
        let res = self.rt.block_on(async {
            let prior = election.leader_record(&txn).await?;
            let config = election.read_config(&txn).await?;
            let owned_by_other = prior.owner().is_some_and(|o| o.id() != cand.id());
            if obs.map(|(i, _)| i) != Some((prior.ballot().get(), prior.renewal()))
                || !owned_by_other
            {
                return Ok(None);
            }
            txn.add_read_conflict_key(&leader_key)?;
            txn.add_read_conflict_key(&fence_key)?;
            let ballot = prior.ballot().next()?;
            let lease = config.lease_duration();
            let record = wire::takeover_record(
                ballot,
                cand.id(),
                cand.priority(),
                prior.renewal().saturating_add(1),
                nanos(lease),
                seq,
            );
            let (Some(record), Some(fence)) = (record, wire::owned_fence(ballot)) else {
                return Ok(None);
            };
            txn.set(&leader_key, &record);
            txn.set(&fence_key, &fence);
            let written = election.leader_record(&txn).await?;
            let validity = nanos(config.local_validity(lease));
            Ok::<_, ElectionError>(Some((prior, written, ballot, validity)))
        });
        if let Some(p) = self.procs.get_mut(pid) {
            p.rogue_seq = seq.saturating_add(1);
        }
        match res {
            Ok(Some((prior, written, ballot, validity))) => {
                let label = self.label(pid);
                self.log(format!(
                    "{label} ROGUE takes over b{} after half a lease",
                    ballot.get()
                ));
                let mut entry = self.entry_for(pid, Op::RogueTakeover);
                entry.prior = Some(RecordView::of(&prior));
                entry.leader = Some(RecordView::of(&written));
                let kind = Kind::Rogue {
                    ballot: ballot.get(),
                    valid_until: t0.saturating_add(validity),
                };
                self.begin_ctl(pid, txn, kind, entry);
            }
            Ok(None) => {
                self.faults.close(txn.id());
                self.start_cycle(pid);
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.op_failed(pid, "rogue takeover", classify(e));
            }
        }
    }

    /// Starts the leader-work loop of a freshly registered process.
    fn start_work_loop(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.work_inflight > 0 {
            return;
        }
        p.work_epoch = p.work_epoch.saturating_add(1);
        let epoch = p.work_epoch;
        let d = self.between(0, self.params.heartbeat / 2);
        self.queue.push(
            self.now.saturating_add(d),
            Event::Work {
                pid,
                epoch,
                step: WorkStep::Check,
            },
        );
    }
}
