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

mod commands;
mod ops;
pub(crate) mod txn;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

use fdb_leader_election::runner::machine::{Command, Ctx, Event, Failure, Machine, RecordRead};
use fdb_leader_election::{
    Ballot, Candidate, ElectionConfig, ElectionError, LeaderElection, LeaderRecord, LocalInstant,
    Watch,
};
use foundationdb::Database;
use foundationdb_simulation::Severity;

use crate::options::Plant;
use crate::sim::{Sim, SimClock};
use crate::tester::{Beliefs, Shared};
use commands::{apply, belief_of, ctx_of};
use txn::work;

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
