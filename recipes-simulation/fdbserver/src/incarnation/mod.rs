//! One candidate incarnation, driven by the library's own runner machine
//! (`runner::machine::Machine`, which the tokio `Runner` executes): this is one more executor
//! of it, in simulated time. It feeds the machine events and carries out its commands, so the
//! code that decides when to cycle and wake, when a guard is issued, closed or revoked, how
//! long a drain waits, and how failures and unknown commits are handled is the code users
//! run. Its transactions run through FoundationDB's own retry loop (`Database::run`), inside
//! the simulator, under its faults.
//!
//! As the tokio executor does: one operation (a transaction, a sleep, a drain) at a time, the
//! queue of commands carried out in order, `CycleDecided` fed inside the cycle's transaction
//! before its commit (a revoked guard is revoked then), and while an operation runs only the
//! guard's deadline and the candidate's eligibility are attended to. Guarded work runs beside
//! the machine, as an application's tasks do: one fenced transaction at a time while the guard
//! takes work, the candidate busy meanwhile, and the machine told when it goes idle.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

use fdb_leader_election::runner::StopReason;
use fdb_leader_election::runner::machine::{
    Belief, Command, Ctx, CycleReport, Event, Failure, Machine, RecordRead,
};
use fdb_leader_election::{
    Action, Ballot, Candidate, ElectionConfig, ElectionError, ElectionTxn, LeaderElection,
    LeaderRecord, LocalInstant, ReadMode, ResignOutcome, Watch,
};
use foundationdb::options::TransactionOption;
use foundationdb::{Database, FdbBindingError, RetryableTransaction};
use foundationdb_simulation::Severity;

use crate::log::{self, Entry, Prior, Row};
use crate::options::Plant;
use crate::sim::{Sim, SimClock};
use crate::tester::{Beliefs, Shared};

type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// The guard the machine handed out, as this executor keeps it.
#[derive(Clone, Copy, Debug)]
struct Guard {
    ballot: Ballot,
    deadline: LocalInstant,
    closed: bool,
    revoked: bool,
}

/// What an incarnation shares with its transactions' closures (all on one thread).
struct Brain {
    machine: Machine,
    guard: Option<Guard>,
}

/// How an operation ended.
enum Outcome {
    Event(Event),
    Read(Result<(Option<ElectionConfig>, LeaderRecord, Option<Watch>), ElectionError>),
}

/// What the leader's guarded work is.
#[derive(Clone)]
pub(crate) enum Role {
    /// The fenced counter, and its log entries.
    Counter,
    /// The sharded election's coordinator: placement steps, fenced by the coordinator
    /// election's token (`ShardedElection::coordinate`).
    Coordinator(
        Box<(
            fdb_leader_election::shard::ShardedElection,
            fdb_leader_election::shard::Coordinator,
        )>,
    ),
}

/// Plant `takeover-ignores-rank`: the observation identity (ballot, renewal) a candidate's
/// cycles read, and since when on its clock.
pub(crate) type Seen = Rc<RefCell<Option<((u64, u64), LocalInstant)>>>;

/// The fixed parts of an incarnation.
#[derive(Clone)]
pub(crate) struct Setup {
    pub(crate) role: Role,
    pub(crate) sim: Sim,
    pub(crate) db: Arc<Database>,
    pub(crate) election: LeaderElection,
    pub(crate) candidate: Candidate,
    pub(crate) clock: SimClock,
    pub(crate) init_config: ElectionConfig,
    pub(crate) tester: Shared,
    pub(crate) beliefs: Rc<RefCell<Beliefs>>,
    pub(crate) plant: Option<Plant>,
    pub(crate) seed: u64,
    /// Whether guarded work is in flight (what the candidate and the machine are told).
    pub(crate) busy: Rc<std::cell::Cell<bool>>,
    /// Plant `takeover-ignores-rank`: the observation identity the candidate's cycles read,
    /// and since when (on its clock).
    pub(crate) seen: Seen,
}

/// One incarnation's executor.
pub(crate) struct Incarnation {
    s: Setup,
    brain: Rc<RefCell<Brain>>,
    queue: VecDeque<Command>,
    /// The operation in flight (a transaction, or a drain's wait).
    op: Option<LocalFuture<Outcome>>,
    /// `SleepUntil`: the machine waits until then (or until something happens).
    sleeping: Option<LocalInstant>,
    /// `DrainTasks`: waiting for guarded work until then (simulated time).
    draining: Option<f64>,
    watch: Option<Watch>,
    work: Option<LocalFuture<()>>,
    next_work_at: f64,
    /// The last token the planted unfenced work used.
    last_token: Option<Ballot>,
    stopped: bool,
    shutdown_fed: bool,
}

impl Incarnation {
    pub(crate) fn new(s: Setup) -> Self {
        let config = s.init_config.clone();
        let now = s.candidate.now();
        let settings = fdb_leader_election::runner::machine::Settings::new(
            Some(s.candidate.id().clone()),
            config,
            s.seed,
        );
        Incarnation {
            brain: Rc::new(RefCell::new(Brain {
                machine: Machine::new(settings, now),
                guard: None,
            })),
            next_work_at: s.sim.now(),
            s,
            queue: VecDeque::new(),
            op: None,
            sleeping: None,
            draining: None,
            watch: None,
            work: None,
            last_token: None,
            stopped: false,
            shutdown_fed: false,
        }
    }

    fn ctx(&self) -> Ctx {
        ctx_of(&self.s.candidate, self.work.is_some())
    }

    fn feed(&mut self, event: Event) {
        let ctx = self.ctx();
        let commands = self.brain.borrow_mut().machine.handle(event, ctx);
        self.sample();
        self.queue.extend(commands);
    }

    fn sample(&self) {
        let leadership = belief_of(&self.s.candidate);
        self.s
            .beliefs
            .borrow_mut()
            .sample(&self.s.tester, self.s.sim.now(), leadership);
    }

    /// Runs the incarnation until its machine stops, or until `shutdown_at` (simulated time)
    /// asks it to leave gracefully. A crash is the caller dropping this future.
    pub(crate) async fn run(mut self, shutdown_at: f64) {
        self.feed(Event::Start);
        let mut chaos_at = self.s.sim.now() + self.s.sim.between(1.0, 8.0);
        let mut healthy_at: Option<f64> = None;
        loop {
            let now = self.s.sim.now();
            if now >= chaos_at && !self.shutdown_fed {
                chaos_at = now + self.s.sim.between(1.0, 8.0);
                self.chaos(&mut healthy_at).await;
            }
            if healthy_at.is_some_and(|t| self.s.sim.now() >= t) {
                healthy_at = None;
                if self.s.candidate.set_eligible(true, "").is_ok() && self.op.is_none() {
                    self.sleeping = None;
                    self.feed(Event::EligibilityChanged);
                }
            }
            self.carry_queue();
            if self.stopped {
                return;
            }
            if !self.shutdown_fed && self.s.sim.now() >= shutdown_at {
                self.shutdown_fed = true;
                self.op = None;
                self.sleeping = None;
                self.feed(Event::ShutdownRequested);
                continue;
            }
            self.maybe_start_work();
            let wake = self.next_wake(shutdown_at);
            let woke = self.wait(wake).await;
            self.on(woke);
        }
    }

    /// Carries out commands until one starts an operation or a sleep.
    fn carry_queue(&mut self) {
        while self.op.is_none() && self.sleeping.is_none() && self.draining.is_none() {
            let Some(command) = self.queue.pop_front() else {
                return;
            };
            self.carry(command);
        }
    }

    fn carry(&mut self, command: Command) {
        match command {
            Command::Register => self.op = Some(Box::pin(self.register())),
            Command::RunCycle => self.op = Some(Box::pin(self.cycle())),
            Command::ReadRecord { watch, config } => {
                self.op = Some(Box::pin(self.read_record(watch, config)));
            }
            Command::DisarmWatch => self.watch = None,
            Command::Resign { expected } => self.op = Some(Box::pin(self.resign(expected))),
            Command::Leave => self.op = Some(Box::pin(self.leave())),
            Command::DrainTasks { bound } => {
                if self.work.is_some() {
                    self.draining = Some(self.s.sim.now() + bound.as_secs_f64());
                } else {
                    self.feed(Event::Drained(true));
                }
            }
            Command::SleepUntil(at) => self.sleeping = Some(at),
            Command::Stop { .. } => self.stopped = true,
            other => apply(&self.s, &self.brain, other),
        }
    }

    /// The simulated time to wake at, whatever else happens.
    fn next_wake(&self, shutdown_at: f64) -> f64 {
        let now = self.s.sim.now();
        let mut at = if self.shutdown_fed {
            now + 1.0
        } else {
            shutdown_at
        };
        if let Some(t) = self.sleeping {
            at = at.min(now + self.s.clock.until(t));
        }
        // The guard's deadline (the machine revokes it then); one that passed needs no wake.
        if let Some(g) = self.brain.borrow().guard {
            let until = self.s.clock.until(g.deadline);
            if !g.revoked && until > 0.0 {
                at = at.min(now + until);
            }
        }
        if let Some(t) = self.draining {
            at = at.min(t);
        }
        if self.work.is_none() && self.work_allowed() {
            at = at.min(self.next_work_at);
        }
        at.max(now)
    }

    /// Waits for the first of: the operation, guarded work, the watch, or `wake`.
    async fn wait(&mut self, wake: f64) -> Woke {
        let mut timer = Box::pin(self.s.sim.delay(wake - self.s.sim.now()));
        let (op, work, watch) = (&mut self.op, &mut self.work, &mut self.watch);
        poll_fn(|cx| {
            if let Some(f) = op.as_mut() {
                if let Poll::Ready(outcome) = f.as_mut().poll(cx) {
                    *op = None;
                    return Poll::Ready(Woke::Op(outcome));
                }
            }
            if let Some(f) = work.as_mut() {
                if let Poll::Ready(()) = f.as_mut().poll(cx) {
                    *work = None;
                    return Poll::Ready(Woke::WorkDone);
                }
            }
            if let Some(w) = watch.as_mut() {
                if let Poll::Ready(fired) = w.as_mut().poll(cx) {
                    *watch = None;
                    return Poll::Ready(Woke::Watch(
                        fired.map_err(|e| Failure::of(&ElectionError::Database(e))),
                    ));
                }
            }
            match timer.as_mut().poll(cx) {
                Poll::Ready(_) => Poll::Ready(Woke::Time),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    fn on(&mut self, woke: Woke) {
        match woke {
            Woke::Op(Outcome::Event(event)) => self.feed(event),
            Woke::Op(Outcome::Read(read)) => {
                let event = match read {
                    Ok((config, record, watch)) => {
                        let armed = watch.is_some();
                        self.watch = watch;
                        Event::RecordRead(Ok(RecordRead {
                            record,
                            config,
                            watch: armed.then_some(true),
                        }))
                    }
                    Err(e) => Event::RecordRead(Err(Failure::of(&e))),
                };
                self.feed(event);
            }
            Woke::WorkDone => {
                self.s.busy.set(false);
                self.s.candidate.set_busy(false);
                if self.draining.take().is_some() {
                    self.feed(Event::Drained(true));
                } else if self.sleeping.take().is_some() {
                    self.feed(Event::WorkIdle);
                }
            }
            Woke::Watch(fired) => {
                if self.sleeping.take().is_some() {
                    self.feed(Event::WatchFired(fired));
                }
            }
            Woke::Time => {
                let now = self.s.sim.now();
                if self.draining.is_some_and(|t| now >= t) {
                    self.draining = None;
                    self.feed(Event::Drained(false));
                } else if self.op.is_some() {
                    // While an operation runs, only the guard's deadline matters: what the
                    // machine says now does not wait.
                    let ctx = self.ctx();
                    let commands = self.brain.borrow_mut().machine.handle(Event::Tick, ctx);
                    self.sample();
                    for c in commands {
                        apply(&self.s, &self.brain, c);
                    }
                } else if self.sleeping.is_some() {
                    self.sleeping = None;
                    self.feed(Event::Tick);
                }
            }
        }
    }

    /// Whether guarded work may start now: the guard takes work and its deadline has not
    /// passed (the plant `unfenced-work` asks nothing of the guard).
    fn work_allowed(&self) -> bool {
        if self.s.plant == Some(Plant::UnfencedWork) {
            return self.last_token.is_some() || self.brain.borrow().guard.is_some();
        }
        self.brain
            .borrow()
            .guard
            .is_some_and(|g| !g.closed && !g.revoked && self.s.candidate.now() < g.deadline)
    }

    fn maybe_start_work(&mut self) {
        let now = self.s.sim.now();
        if self.work.is_some() || now < self.next_work_at || !self.work_allowed() {
            return;
        }
        let token = match self.brain.borrow().guard {
            Some(g) => g.ballot,
            None => match self.last_token {
                Some(t) => t,
                None => return,
            },
        };
        self.last_token = Some(token);
        self.next_work_at = now + self.s.sim.between(0.1, 0.6);
        self.s.busy.set(true);
        self.s.candidate.set_busy(true);
        self.work = Some(Box::pin(work(self.s.clone(), token)));
    }

    // ----- operations ------------------------------------------------------------------------

    fn register(&self) -> impl Future<Output = Outcome> + use<> {
        let (db, election, me, init) = (
            Arc::clone(&self.s.db),
            self.s.election.clone(),
            self.s.candidate.clone(),
            self.s.init_config.clone(),
        );
        let (sim, tester) = (self.s.sim.clone(), Rc::clone(&self.s.tester));
        async move {
            let result = run(&db, &sim, &tester, timeout_of(&init), |trx| {
                let (election, me, init) = (election.clone(), me.clone(), init.clone());
                async move {
                    election.initialize_with_config(&trx, &init).await?;
                    election.register_candidate(&trx, &me).await?;
                    Ok(election.read_config(&trx).await?)
                }
            })
            .await;
            Outcome::Event(Event::Registered(result.map_err(|e| Failure::of(&e))))
        }
    }

    fn cycle(&self) -> impl Future<Output = Outcome> + use<> {
        let s = self.s.clone();
        let brain = Rc::clone(&self.brain);
        let timeout = timeout_of(brain.borrow().machine.config());
        async move {
            s.tester.borrow_mut().stats.cycles += 1;
            let result = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
                let (s, brain) = (s.clone(), Rc::clone(&brain));
                async move {
                    let started_at = s.sim.now();
                    let prior = s.election.leader_record(&trx).await?;
                    let cycle = s.election.run_election_cycle(&trx, &s.candidate).await;
                    decided(
                        &s,
                        &brain,
                        Event::CycleDecided(match &cycle {
                            Ok(c) => Ok((c.action(), c.record().clone())),
                            Err(e) => Err(Failure::of(e)),
                        }),
                    );
                    let cycle = cycle?;
                    record_cycle(&s, &trx, &cycle, &prior, started_at).await?;
                    if s.plant == Some(Plant::TakeoverIgnoresRank) {
                        rogue_takeover(&s, &trx, &cycle).await?;
                    }
                    Ok(cycle)
                }
            })
            .await;
            match result {
                Ok(cycle) => {
                    if cycle.action() == Action::Acquired {
                        s.tester.borrow_mut().stats.acquisitions += 1;
                    }
                    let adopted = s.candidate.adopt(cycle.clone());
                    Outcome::Event(Event::CycleCommitted(CycleReport::new(&cycle, &adopted)))
                }
                Err(e) => {
                    crate::tester::failed_cycle(&s.tester, &e);
                    s.sim.trace(
                        Severity::Info,
                        "LeaderElectionCycleFailed",
                        &[
                            ("Candidate".into(), s.candidate.id().to_string()),
                            ("Error".into(), format!("{e:?}")),
                        ],
                    );
                    Outcome::Event(Event::CycleFailed(Failure::of(&e)))
                }
            }
        }
    }

    fn read_record(&self, watch: bool, with_config: bool) -> impl Future<Output = Outcome> + use<> {
        let (db, election) = (Arc::clone(&self.s.db), self.s.election.clone());
        let (sim, tester) = (self.s.sim.clone(), Rc::clone(&self.s.tester));
        let timeout = timeout_of(self.brain.borrow().machine.config());
        async move {
            let armed: Rc<RefCell<Option<Watch>>> = Rc::new(RefCell::new(None));
            let slot = Rc::clone(&armed);
            let result = run(&db, &sim, &tester, timeout, |trx| {
                let (election, slot) = (election.clone(), Rc::clone(&slot));
                async move {
                    let config = if with_config {
                        Some(election.read_config(&trx).await?)
                    } else {
                        None
                    };
                    let record = election.leader_record(&trx).await?;
                    if watch {
                        *slot.borrow_mut() = election.watch_leader(&trx).ok();
                    }
                    Ok((config, record))
                }
            })
            .await;
            let w = armed.borrow_mut().take();
            Outcome::Read(result.map(|(config, record)| (config, record, w)))
        }
    }

    fn resign(&self, expected: Ballot) -> impl Future<Output = Outcome> + use<> {
        let s = self.s.clone();
        let brain = Rc::clone(&self.brain);
        let timeout = timeout_of(brain.borrow().machine.config());
        async move {
            let _ = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
                let (s, brain) = (s.clone(), Rc::clone(&brain));
                async move {
                    let outcome = s
                        .election
                        .resign_leadership(&trx, &s.candidate, Some(expected))
                        .await;
                    decided(&s, &brain, Event::ResignDecided);
                    let outcome = outcome?;
                    if let ResignOutcome::Resigned {
                        ballot,
                        reserved_for,
                    } = &outcome
                    {
                        resigned(&s, &trx, *ballot, reserved_for.as_ref(), "resigned").await?;
                    }
                    Ok(outcome)
                }
            })
            .await;
            Outcome::Event(Event::ResignDone)
        }
    }

    fn leave(&self) -> impl Future<Output = Outcome> + use<> {
        let s = self.s.clone();
        let timeout = timeout_of(self.brain.borrow().machine.config());
        async move {
            let result = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
                let s = s.clone();
                async move {
                    let outcome = s.election.unregister_candidate(&trx, &s.candidate).await?;
                    if let Some(ResignOutcome::Resigned {
                        ballot,
                        reserved_for,
                    }) = &outcome
                    {
                        resigned(&s, &trx, *ballot, reserved_for.as_ref(), "left").await?;
                    }
                    Ok(())
                }
            })
            .await;
            if result.is_ok() {
                s.tester.borrow_mut().stats.leaves += 1;
            }
            Outcome::Event(Event::Left(result.map_err(|e| Failure::of(&e))))
        }
    }

    /// A fault of the candidate's own, now and then: a stop-the-world pause (nothing of it
    /// runs, its belief and its transactions in flight go on), its health failing for a while
    /// (it becomes ineligible: a leader hands over), the application resigning, or its
    /// priority changing.
    async fn chaos(&mut self, healthy_at: &mut Option<f64>) {
        let sim = self.s.sim.clone();
        // A leader's pause is the one that matters most (a zombie leader): a third of a
        // leader's faults are pauses.
        let leads = self.s.candidate.leadership().is_some();
        let pick = if leads && sim.chance(0.33) {
            0
        } else {
            sim.below(8)
        };
        match pick {
            0 => {
                self.s.tester.borrow_mut().stats.stalls += 1;
                let pause = sim.between(0.2, 15.0);
                sim.trace(
                    Severity::Info,
                    "LeaderElectionStall",
                    &[
                        ("Candidate".into(), self.s.candidate.id().to_string()),
                        ("Seconds".into(), format!("{pause:.3}")),
                        (
                            "Leads".into(),
                            self.s.candidate.leadership().is_some().to_string(),
                        ),
                    ],
                );
                sim.sleep(pause).await;
                self.sample();
            }
            1 if healthy_at.is_none()
                && self
                    .s
                    .candidate
                    .set_eligible(false, "sim: its readiness check fails")
                    .is_ok() =>
            {
                self.s.tester.borrow_mut().stats.flaps += 1;
                *healthy_at = Some(sim.now() + sim.between(1.0, 12.0));
                if self.op.is_none() {
                    self.sleeping = None;
                    self.feed(Event::EligibilityChanged);
                }
            }
            2 if self.s.candidate.leadership().is_some() && self.op.is_none() => {
                self.s.tester.borrow_mut().stats.resigns += 1;
                self.sleeping = None;
                self.feed(Event::ResignRequested);
            }
            3 => {
                let p = i32::try_from(sim.below(10)).unwrap_or(0);
                self.s
                    .candidate
                    .set_priority(fdb_leader_election::Priority::new(p));
                self.s.tester.borrow_mut().stats.priority_changes += 1;
            }
            _ => {}
        }
    }
}

/// What ended a wait (matched at once, never stored).
#[allow(clippy::large_enum_variant)]
enum Woke {
    Op(Outcome),
    WorkDone,
    Watch(Result<(), Failure>),
    Time,
}

/// The moment of an event: the candidate's clock, its belief, and whether work is in flight.
fn ctx_of(candidate: &Candidate, work_in_flight: bool) -> Ctx {
    let belief = candidate.leadership().map(|l| Belief {
        ballot: l.ballot,
        valid_until: l.valid_until,
    });
    Ctx::new(candidate.now(), belief, work_in_flight)
}

/// The candidate's belief: the ballot, and when it ends on its clock.
fn belief_of(candidate: &Candidate) -> Option<(Ballot, LocalInstant)> {
    candidate.leadership().map(|l| (l.ballot, l.valid_until))
}

/// Inside a transaction, before its commit: feeds the machine what the election decided, and
/// carries out at once the revoke (or the shorter deadline) it answers with.
fn decided(s: &Setup, brain: &Rc<RefCell<Brain>>, event: Event) {
    let ctx = ctx_of(&s.candidate, s.busy.get());
    let commands = brain.borrow_mut().machine.handle(event, ctx);
    s.beliefs
        .borrow_mut()
        .sample(&s.tester, s.sim.now(), belief_of(&s.candidate));
    for command in commands {
        match command {
            Command::RevokeGuard(_) | Command::SetGuardDeadline(_) => apply(s, brain, command),
            _ => {}
        }
    }
}

/// Carries out a command that does not wait.
fn apply(s: &Setup, brain: &Rc<RefCell<Brain>>, command: Command) {
    let now = s.candidate.now();
    let mut b = brain.borrow_mut();
    match command {
        Command::IssueGuard { ballot, deadline } | Command::ReissueGuard { ballot, deadline } => {
            s.sim.trace(
                Severity::Info,
                "LeaderElectionGuard",
                &[
                    ("Candidate".into(), s.candidate.id().to_string()),
                    ("Ballot".into(), ballot.get().to_string()),
                    ("ValidFor".into(), format!("{:.3}", s.clock.until(deadline))),
                ],
            );
            s.candidate.set_guard_closed_at(None);
            b.guard = Some(Guard {
                ballot,
                deadline,
                closed: false,
                revoked: false,
            });
            s.tester.borrow_mut().stats.guards += 1;
        }
        Command::SetGuardDeadline(deadline) => {
            if let Some(g) = b.guard.as_mut() {
                g.deadline = deadline;
            }
        }
        Command::CloseGuard => {
            if let Some(g) = b.guard.as_mut() {
                g.closed = true;
            }
            s.candidate.set_guard_closed_at(Some(now));
            s.tester.borrow_mut().stats.drains += 1;
        }
        Command::RevokeGuard(_) => {
            if let Some(g) = b.guard.as_mut() {
                g.revoked = true;
            }
        }
        Command::EndLeadership { reason, .. } => {
            b.guard = None;
            s.candidate.set_guard_closed_at(None);
            if matches!(reason, StopReason::HandedOver { .. }) {
                s.tester.borrow_mut().stats.handovers += 1;
            }
        }
        Command::LateRenewal { .. } | Command::StepDownLocally => s.candidate.step_down_locally(),
        // Publication, metrics, logs: nothing to carry out here.
        _ => {}
    }
}

/// The attempt's bound: the configuration's transaction timeout, as the tokio runner's.
fn timeout_of(config: &ElectionConfig) -> i32 {
    i32::try_from(config.transaction_timeout().as_millis()).unwrap_or(i32::MAX)
}

/// Runs `f` through FoundationDB's retry loop, each attempt bounded by `timeout_ms` (a commit
/// that times out is `transaction_timed_out`, its result unknown), counting the attempts run
/// again after an unknown commit result.
pub(crate) async fn run<T, F, Fut>(
    db: &Database,
    _sim: &Sim,
    tester: &Shared,
    timeout_ms: i32,
    f: F,
) -> Result<T, ElectionError>
where
    F: Fn(RetryableTransaction) -> Fut,
    Fut: Future<Output = Result<T, FdbBindingError>>,
{
    let result = db
        .run(|trx, maybe_committed| {
            if maybe_committed.into() {
                tester.borrow_mut().stats.unknown_commits += 1;
            }
            let set = trx.set_option(TransactionOption::Timeout(timeout_ms));
            let attempt = f(trx);
            async move {
                set?;
                attempt.await
            }
        })
        .await
        .map_err(fdb_leader_election::fdb::election_error);
    if let Err(ElectionError::Database(e)) = &result {
        // The attempt's bound passed (transaction_timed_out): its commit, if it had begun,
        // may have applied. A commit_unknown_result returned (not retried) counts as one.
        match e.code() {
            Some(1031) => tester.borrow_mut().stats.timeouts += 1,
            Some(1021) => tester.borrow_mut().stats.unknown_commits += 1,
            _ => {}
        }
    }
    result
}

/// Logs what a committed cycle did, in its own transaction: its heartbeat, and an acquisition
/// (with the registry it read) or a vacancy it wrote over its own leadership.
async fn record_cycle(
    s: &Setup,
    trx: &RetryableTransaction,
    cycle: &fdb_leader_election::Cycle,
    prior: &LeaderRecord,
    started_at: f64,
) -> Result<(), FdbBindingError> {
    let me = s.candidate.id().to_string();
    let mut entries = Vec::new();
    if let Some(reg) = s.election.get_candidate(trx, s.candidate.id()).await? {
        entries.push(Entry::Heartbeat {
            candidate: me.clone(),
            heartbeat: reg.heartbeat(),
            started_at,
        });
    }
    let record = cycle.record();
    match cycle.action() {
        Action::Acquired => {
            entries.push(acquisition(s, trx, record.ballot().get(), prior).await?);
        }
        Action::HandedOver
        | Action::Resigned
        | Action::SteppedDown
        | Action::SteppedDownIneligible => entries.push(Entry::Vacancy {
            ballot: record.ballot().get(),
            by: me,
            reserved_for: record.reservation().map(|r| r.id().to_string()),
            why: format!("{:?}", cycle.action()),
        }),
        _ => {}
    }
    log::append(trx, &entries);
    Ok(())
}

/// The log entry of an acquisition of `ballot` over `prior`, with the registry this
/// transaction reads (snapshot reads: no conflict added).
pub(crate) async fn acquisition(
    s: &Setup,
    trx: &RetryableTransaction,
    ballot: u64,
    prior: &LeaderRecord,
) -> Result<Entry, FdbBindingError> {
    let config = s.election.read_config(trx).await?;
    let rows = s.election.list_candidates(trx).await?;
    Ok(Entry::Acquired {
        ballot,
        candidate: s.candidate.id().to_string(),
        version: s.candidate.version().map(|v| v.to_string()),
        prior: Prior {
            ballot: prior.ballot().get(),
            owner: prior.owner().map(|o| o.id().to_string()),
            reservation: prior.reservation().map(|r| r.id().to_string()),
            leader_version: prior.leader_version().map(ToString::to_string),
        },
        decided_at: s.sim.now(),
        policy: config.version_policy().to_string(),
        reservation_timeout: config.reservation_timeout().as_secs_f64(),
        rho_ppm: config.max_clock_rate_error_ppm(),
        registry: rows
            .into_iter()
            .map(|c| Row {
                id: c.id.to_string(),
                version: c.record.version().map(ToString::to_string),
                eligible: c.record.is_eligible(),
                live: c.live,
                heartbeat: c.record.heartbeat(),
            })
            .collect(),
    })
}

/// Plant `takeover-ignores-rank`: a follower whose cycle did nothing, over a record owned by
/// another that it has seen unchanged for that record's full lease on its own clock, writes a
/// takeover record (ballot + 1, itself the owner) and its fence in the same transaction, by
/// the library's raw encoding, whatever its rank; and logs it as the acquisition it is. It
/// does not believe it leads (it adopts nothing): only who took over is wrong.
async fn rogue_takeover(
    s: &Setup,
    trx: &RetryableTransaction,
    cycle: &fdb_leader_election::Cycle,
) -> Result<(), FdbBindingError> {
    let record = cycle.record();
    let now = s.candidate.now();
    let id = (record.ballot().get(), record.renewal());
    let other = record.owner().is_some_and(|o| o.id() != s.candidate.id());
    if cycle.action() != Action::None || !other || s.candidate.leadership().is_some() {
        *s.seen.borrow_mut() = None;
        return Ok(());
    }
    let first = {
        let mut seen = s.seen.borrow_mut();
        match *seen {
            Some((i, first)) if i == id => first,
            _ => {
                *seen = Some((id, now));
                return Ok(());
            }
        }
    };
    if now < first.saturating_add(record.lease_duration()) {
        return Ok(());
    }
    let ballot = record.ballot().next()?;
    let takeover = fdb_leader_election::raw::owned_record(
        ballot,
        s.candidate.id(),
        s.candidate.priority(),
        record.renewal().saturating_add(1),
        record.lease_duration(),
        1 << 48,
    )?;
    trx.add_read_conflict_key(s.election.leader_key())
        .map_err(ElectionError::Database)?;
    trx.set(
        s.election.leader_key(),
        &fdb_leader_election::raw::encode_leader(&takeover)?,
    );
    trx.set(
        s.election.fence_key(),
        &fdb_leader_election::raw::fence_record(ballot, false)?,
    );
    let entry = acquisition(s, trx, ballot.get(), record).await?;
    // After the cycle's own entries (at most two).
    log::append_at(trx, 2, &[entry]);
    s.tester.borrow_mut().stats.rogue_takeovers += 1;
    *s.seen.borrow_mut() = None;
    Ok(())
}

/// Logs a resignation's vacancy; under the plant `ballot-reset`, rewrites it at ballot 0.
async fn resigned(
    s: &Setup,
    trx: &RetryableTransaction,
    ballot: Ballot,
    reserved_for: Option<&fdb_leader_election::Named>,
    why: &str,
) -> Result<(), FdbBindingError> {
    let mut reset = false;
    if s.plant == Some(Plant::BallotReset) {
        let record = fdb_leader_election::raw::vacancy_record(
            Ballot::new(0),
            0,
            s.init_config.lease_duration(),
            None,
            (s.candidate.id(), 0),
        )?;
        trx.set(
            s.election.leader_key(),
            &fdb_leader_election::raw::encode_leader(&record)?,
        );
        trx.set(
            s.election.fence_key(),
            &fdb_leader_election::raw::fence_record(Ballot::new(0), true)?,
        );
        reset = true;
    }
    log::append(
        trx,
        &[Entry::Vacancy {
            ballot: if reset { 0 } else { ballot.get() },
            by: s.candidate.id().to_string(),
            reserved_for: reserved_for.map(|r| r.id().to_string()),
            why: why.to_owned(),
        }],
    );
    Ok(())
}

/// One piece of guarded work: in one transaction, the fence (unless planted away), a read of
/// the counter, the counter plus one, and its log entry; or, for a coordinator, one step of
/// placement.
async fn work(s: Setup, token: Ballot) {
    if let Role::Coordinator(both) = &s.role {
        let timeout = timeout_of(&s.init_config);
        let (e, c) = (both.0.clone(), both.1.clone());
        let done = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
            let (e, c) = (e.clone(), c.clone());
            async move { Ok(e.coordinate(&trx, &c, token).await?) }
        })
        .await;
        match done {
            Ok(c) => {
                s.tester.borrow_mut().stats.fenced_writes += 1;
                s.sim.trace(
                    Severity::Info,
                    "LeaderElectionCoordinated",
                    &[
                        ("Ballot".into(), token.get().to_string()),
                        ("Fenced".into(), c.fenced.len().to_string()),
                        ("ShardsWritten".into(), c.shards_written.to_string()),
                    ],
                );
            }
            Err(e) => {
                s.tester.borrow_mut().stats.fenced_rejected += 1;
                s.sim.trace(
                    Severity::Info,
                    "LeaderElectionCoordinateFailed",
                    &[("Error".into(), format!("{e:?}"))],
                );
            }
        }
        return;
    }
    let fenced = s.plant != Some(Plant::UnfencedWork);
    let timeout = timeout_of(&s.init_config);
    let result = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
        let s = s.clone();
        async move {
            if fenced {
                s.election.fence(&trx, token).await?;
            }
            let key = log::counter_key();
            let current = ElectionTxn::get(&trx, &key, ReadMode::Serializable)
                .await?
                .and_then(|v| <[u8; 8]>::try_from(&v[..]).ok())
                .map_or(0, u64::from_le_bytes);
            let next = current.saturating_add(1);
            ElectionTxn::set(&trx, &key, &next.to_le_bytes());
            log::append(
                &trx,
                &[Entry::Work {
                    ballot: token.get(),
                    candidate: s.candidate.id().to_string(),
                    counter: next,
                }],
            );
            Ok(())
        }
    })
    .await;
    match result {
        Ok(()) => s.tester.borrow_mut().stats.fenced_writes += 1,
        Err(e) => {
            s.tester.borrow_mut().stats.fenced_rejected += 1;
            s.sim.trace(
                Severity::Info,
                "LeaderElectionWorkFailed",
                &[
                    ("Candidate".into(), s.candidate.id().to_string()),
                    ("Ballot".into(), token.get().to_string()),
                    ("Error".into(), format!("{e:?}")),
                ],
            );
        }
    }
}
