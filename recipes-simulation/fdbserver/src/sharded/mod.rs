//! The workload `ShardedElection`: members of a sharded election, each driven by the
//! library's sharded runner machine (`shard::machine::ShardMachine`, which `ShardedRunner`
//! executes) in simulated time, with fenced work per owned shard; beside each member, its
//! candidate for the coordinator election, driven by the runner machine as in the single
//! workload, whose leader runs placement (`ShardedElection::coordinate`) as its guarded
//! work. Tester 0 then checks the coordinator election as the single workload checks its
//! election, and every shard: ballots, fenced writes in ballot order with no lost update,
//! one believer at a time.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

use fdb_leader_election::runner::machine::Failure;
use fdb_leader_election::shard::machine::{ShardCommand, ShardCtx, ShardEvent, ShardMachine};
use fdb_leader_election::shard::{Coordinator, Layout, Member, ShardedElection};
use fdb_leader_election::{
    Ballot, Candidate, CandidateId, ElectionConfig, ElectionTxn, LocalInstant, Priority, ReadMode,
    ShardId, Subspace, VersionPolicy, Watch, Weight,
};
use foundationdb::Database;
use foundationdb_simulation::{RustWorkload, Severity, SimDatabase};
use futures_util::future::{Either, join_all, select};

use crate::check::{self, Counts, Violation};
use crate::incarnation::txn::run;
use crate::incarnation::{Incarnation, Role, Setup};
use crate::log::{self, Entry};
use crate::operator;
use crate::options::{Options, Plant};
use crate::sim::{Sim, SimClock};
use crate::single::{metrics, read_back, report, write_intervals};
use crate::tester::{Beliefs, Shared, Tester};

type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// The sharded election's subspace.
fn sharded() -> ShardedElection {
    ShardedElection::new(Subspace::from("sharded-election-sim"))
}

/// A shard guard, as this executor keeps it.
#[derive(Clone, Copy, Debug)]
struct Guard {
    ballot: Ballot,
    deadline: LocalInstant,
    closed: bool,
}

/// What a member shares with its cycle's transaction closure.
struct Brain {
    machine: ShardMachine,
    guards: BTreeMap<ShardId, Guard>,
}

/// One member's executor.
struct MemberLoop {
    sim: Sim,
    db: Arc<Database>,
    election: ShardedElection,
    member: Member,
    clock: SimClock,
    config: ElectionConfig,
    layout: Layout,
    tester: Shared,
    plant: Option<Plant>,
    brain: Rc<RefCell<Brain>>,
    beliefs: Rc<RefCell<BTreeMap<ShardId, Beliefs>>>,
    queue: VecDeque<ShardCommand>,
    op: Option<LocalFuture<ShardEvent>>,
    sleeping: Option<LocalInstant>,
    /// `WaitUntil`: only time ends it.
    waiting: Option<LocalInstant>,
    draining: Option<f64>,
    inbox: Option<Watch>,
    /// The shard whose work is in flight, and the work.
    work: Option<(ShardId, LocalFuture<()>)>,
    next_work_at: f64,
    stopped: bool,
    shutdown_fed: bool,
    /// The last token of each shard the planted unfenced work used.
    last_tokens: BTreeMap<ShardId, Ballot>,
}

/// What ended a wait.
enum Woke {
    Op(ShardEvent),
    WorkDone,
    Inbox,
    Time,
}

impl MemberLoop {
    fn ctx(&self) -> ShardCtx {
        ctx_of(&self.member, self.work.as_ref().map(|(s, _)| *s))
    }

    fn feed(&mut self, event: ShardEvent) {
        let ctx = self.ctx();
        let commands = self.brain.borrow_mut().machine.handle(event, &ctx);
        sample(&self.sim, &self.tester, &self.member, &self.beliefs);
        self.queue.extend(commands);
    }

    async fn run(mut self, shutdown_at: f64) {
        self.feed(ShardEvent::Start);
        loop {
            while self.op.is_none()
                && self.sleeping.is_none()
                && self.waiting.is_none()
                && self.draining.is_none()
            {
                let Some(command) = self.queue.pop_front() else {
                    break;
                };
                self.carry(command);
            }
            if self.stopped {
                return;
            }
            if !self.shutdown_fed && self.sim.now() >= shutdown_at && self.op.is_none() {
                self.shutdown_fed = true;
                self.sleeping = None;
                self.feed(ShardEvent::ShutdownRequested);
                continue;
            }
            self.maybe_start_work();
            let wake = self.next_wake(shutdown_at);
            let woke = self.wait(wake).await;
            self.on(woke);
        }
    }

    fn carry(&mut self, command: ShardCommand) {
        match command {
            ShardCommand::RunCycle { ready } => self.op = Some(Box::pin(self.cycle(ready))),
            ShardCommand::SleepUntil(at) => self.sleeping = Some(at),
            ShardCommand::WaitUntil(at) => self.waiting = Some(at),
            ShardCommand::DrainTasks { bound } => {
                if self.work.is_some() {
                    self.draining = Some(self.sim.now() + bound.as_secs_f64());
                } else {
                    self.feed(ShardEvent::Drained(true));
                }
            }
            ShardCommand::Leave => self.op = Some(Box::pin(self.leave())),
            ShardCommand::Stop => self.stopped = true,
            other => apply(&self.brain, &self.tester, other),
        }
    }

    fn next_wake(&self, shutdown_at: f64) -> f64 {
        let now = self.sim.now();
        let mut at = if self.shutdown_fed {
            now + 1.0
        } else {
            shutdown_at
        };
        for t in [self.sleeping, self.waiting].into_iter().flatten() {
            at = at.min(now + self.clock.until(t));
        }
        // The lease's end, while guards stand on it (one that passed needs no wake: the
        // guards are invalid by their deadline).
        if let Some(d) = self.member.lease_deadline() {
            let until = self.clock.until(d);
            if !self.brain.borrow().guards.is_empty() && until > 0.0 {
                at = at.min(now + until);
            }
        }
        if let Some(t) = self.draining {
            at = at.min(t);
        }
        if self.work.is_none() && self.work_possible() {
            at = at.min(self.next_work_at);
        }
        at.max(now)
    }

    async fn wait(&mut self, wake: f64) -> Woke {
        let mut timer = Box::pin(self.sim.delay(wake - self.sim.now()));
        let (op, work, inbox) = (&mut self.op, &mut self.work, &mut self.inbox);
        poll_fn(|cx| {
            if let Some(f) = op.as_mut() {
                if let Poll::Ready(event) = f.as_mut().poll(cx) {
                    *op = None;
                    return Poll::Ready(Woke::Op(event));
                }
            }
            if let Some((_, f)) = work.as_mut() {
                if let Poll::Ready(()) = f.as_mut().poll(cx) {
                    *work = None;
                    return Poll::Ready(Woke::WorkDone);
                }
            }
            if let Some(w) = inbox.as_mut() {
                if let Poll::Ready(fired) = w.as_mut().poll(cx) {
                    *inbox = None;
                    // A failed watch leaves the heartbeat to find what changed.
                    if fired.is_ok() {
                        return Poll::Ready(Woke::Inbox);
                    }
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
            Woke::Op(event) => self.feed(event),
            Woke::WorkDone => {
                if self.draining.take().is_some() {
                    self.feed(ShardEvent::Drained(true));
                } else if self.sleeping.take().is_some() {
                    self.feed(ShardEvent::WorkIdle);
                }
            }
            Woke::Inbox => {
                if self.sleeping.take().is_some() {
                    self.feed(ShardEvent::InboxChanged);
                }
            }
            Woke::Time => {
                let now = self.member.now();
                if self.draining.is_some_and(|t| self.sim.now() >= t) {
                    self.draining = None;
                    self.feed(ShardEvent::Drained(false));
                } else if self.waiting.is_some_and(|t| now >= t) {
                    self.waiting = None;
                    self.feed(ShardEvent::Tick);
                } else if self.op.is_some() {
                    let ctx = self.ctx();
                    let commands = self
                        .brain
                        .borrow_mut()
                        .machine
                        .handle(ShardEvent::Tick, &ctx);
                    sample(&self.sim, &self.tester, &self.member, &self.beliefs);
                    for c in commands {
                        apply(&self.brain, &self.tester, c);
                    }
                } else if self.sleeping.is_some() {
                    self.sleeping = None;
                    self.feed(ShardEvent::Tick);
                }
            }
        }
    }

    /// Whether some shard's guarded work could start (so the next work time is worth waking
    /// for).
    fn work_possible(&self) -> bool {
        if self.plant == Some(Plant::UnfencedShardWork) {
            return !self.last_tokens.is_empty() || !self.brain.borrow().guards.is_empty();
        }
        let local = self.member.now();
        self.brain
            .borrow()
            .guards
            .values()
            .any(|g| !g.closed && local < g.deadline)
    }

    /// Starts one piece of a shard's guarded work, for the first shard whose guard takes
    /// work (the planted unfenced work asks nothing of the guards).
    fn maybe_start_work(&mut self) {
        let now = self.sim.now();
        if self.work.is_some() || now < self.next_work_at {
            return;
        }
        let local = self.member.now();
        let planted = self.plant == Some(Plant::UnfencedShardWork);
        let open: Vec<(ShardId, Ballot)> = self
            .brain
            .borrow()
            .guards
            .iter()
            .filter(|(_, g)| planted || (!g.closed && local < g.deadline))
            .map(|(s, g)| (*s, g.ballot))
            .collect();
        for (s, b) in &open {
            self.last_tokens.insert(*s, *b);
        }
        let pick = if planted {
            self.last_tokens
                .iter()
                .map(|(s, b)| (*s, *b))
                .collect::<Vec<_>>()
        } else {
            open
        };
        if pick.is_empty() {
            return;
        }
        let (shard, token) = pick[usize::try_from(self.sim.below(pick.len() as u64)).unwrap_or(0)];
        self.next_work_at = now + self.sim.between(0.05, 0.3);
        let (db, sim, tester, election) = (
            Arc::clone(&self.db),
            self.sim.clone(),
            Rc::clone(&self.tester),
            self.election.clone(),
        );
        let member = self.member.id().to_string();
        let fenced = !planted;
        let timeout = timeout_of(&self.config);
        let work = async move {
            let done = run(&db, &sim, &tester, timeout, |trx| {
                let (election, member) = (election.clone(), member.clone());
                async move {
                    if fenced {
                        election.fence_shard(&trx, shard, token).await?;
                    }
                    let key = log::shard_counter_key(shard.get());
                    let current = ElectionTxn::get(&trx, &key, ReadMode::Serializable)
                        .await?
                        .and_then(|v| <[u8; 8]>::try_from(&v[..]).ok())
                        .map_or(0, u64::from_le_bytes);
                    let next = current.saturating_add(1);
                    ElectionTxn::set(&trx, &key, &next.to_le_bytes());
                    log::append(
                        &trx,
                        &[Entry::ShardWork {
                            shard: shard.get(),
                            ballot: token.get(),
                            member,
                            counter: next,
                        }],
                    );
                    Ok(())
                }
            })
            .await;
            let mut t = tester.borrow_mut();
            match done {
                Ok(()) => t.stats.fenced_writes += 1,
                Err(_) => t.stats.fenced_rejected += 1,
            }
        };
        self.work = Some((shard, Box::pin(work)));
    }

    fn cycle(&self, ready: BTreeSet<ShardId>) -> impl Future<Output = ShardEvent> + use<> {
        let (db, sim, tester) = (
            Arc::clone(&self.db),
            self.sim.clone(),
            Rc::clone(&self.tester),
        );
        let (election, member) = (self.election.clone(), self.member.clone());
        let (config, layout) = (self.config.clone(), self.layout);
        let brain = Rc::clone(&self.brain);
        let beliefs = Rc::clone(&self.beliefs);
        let busy = Rc::new(Cell::new(None::<ShardId>));
        let timeout = timeout_of(&config);
        async move {
            tester.borrow_mut().stats.cycles += 1;
            let inbox: Rc<RefCell<Option<Watch>>> = Rc::default();
            let slot = Rc::clone(&inbox);
            let result = run(&db, &sim, &tester, timeout, |trx| {
                let (election, member, ready, config) = (
                    election.clone(),
                    member.clone(),
                    ready.clone(),
                    config.clone(),
                );
                let (brain, beliefs, slot, sim, tester, busy) = (
                    Rc::clone(&brain),
                    Rc::clone(&beliefs),
                    Rc::clone(&slot),
                    sim.clone(),
                    Rc::clone(&tester),
                    Rc::clone(&busy),
                );
                async move {
                    election.initialize(&trx, &config, &layout).await?;
                    let cycle = election.member_cycle(&trx, &member, &ready).await?;
                    *slot.borrow_mut() = trx.watch(&election.inbox_key(member.id())).ok();
                    let ctx = ctx_of(&member, busy.get());
                    let commands = brain
                        .borrow_mut()
                        .machine
                        .handle(ShardEvent::CycleDecided, &ctx);
                    sample(&sim, &tester, &member, &beliefs);
                    for command in commands {
                        if matches!(
                            command,
                            ShardCommand::RevokeGuard { .. } | ShardCommand::SetDeadline(_)
                        ) {
                            apply(&brain, &tester, command);
                        }
                    }
                    let acquired: Vec<Entry> = cycle
                        .acquired()
                        .into_iter()
                        .map(|(shard, ballot)| Entry::ShardAcquired {
                            shard: shard.get(),
                            ballot: ballot.get(),
                            member: member.id().to_string(),
                        })
                        .collect();
                    log::append(&trx, &acquired);
                    Ok(cycle)
                }
            })
            .await;
            match result {
                Ok(cycle) => {
                    let hand_over = cycle.hand_over_requested();
                    let more = cycle.more_to_acquire();
                    let config = cycle.config().clone();
                    tester.borrow_mut().stats.acquisitions +=
                        u64::try_from(cycle.acquired().len()).unwrap_or(0);
                    member.adopt(cycle);
                    sample(&sim, &tester, &member, &beliefs);
                    ShardEvent::CycleCommitted {
                        hand_over,
                        more,
                        config,
                    }
                }
                Err(e) => {
                    crate::tester::failed_cycle(&tester, &e);
                    sim.trace(
                        Severity::Info,
                        "LeaderElectionMemberCycleFailed",
                        &[
                            ("Member".into(), member.id().to_string()),
                            ("Error".into(), format!("{e:?}")),
                        ],
                    );
                    ShardEvent::CycleFailed(Failure::of(&e))
                }
            }
        }
    }

    fn leave(&self) -> impl Future<Output = ShardEvent> + use<> {
        let (db, sim, tester) = (
            Arc::clone(&self.db),
            self.sim.clone(),
            Rc::clone(&self.tester),
        );
        let (election, member) = (self.election.clone(), self.member.clone());
        let timeout = timeout_of(&self.config);
        async move {
            let left = run(&db, &sim, &tester, timeout, |trx| {
                let (election, member) = (election.clone(), member.clone());
                async move { Ok(election.leave(&trx, &member).await?) }
            })
            .await;
            if left.is_ok() {
                tester.borrow_mut().stats.leaves += 1;
            }
            ShardEvent::Left(left.map_err(|e| Failure::of(&e)))
        }
    }
}

/// The member's context: its clock, ownership and lease, and the shards whose work is idle.
fn ctx_of(member: &Member, busy: Option<ShardId>) -> ShardCtx {
    let owned = member.owned_shards();
    let idle = owned.keys().copied().filter(|s| Some(*s) != busy).collect();
    ShardCtx::new(member.now(), owned, member.lease_deadline(), idle)
}

/// Samples every shard's belief: owned, until the member's lease deadline.
fn sample(
    sim: &Sim,
    tester: &Shared,
    member: &Member,
    beliefs: &Rc<RefCell<BTreeMap<ShardId, Beliefs>>>,
) {
    let owned = member.owned_shards();
    let deadline = member.lease_deadline();
    let now = sim.now();
    for (shard, b) in beliefs.borrow_mut().iter_mut() {
        let belief = owned.get(shard).copied().zip(deadline);
        b.sample(tester, now, belief);
    }
}

/// Carries out a command that does not wait.
fn apply(brain: &Rc<RefCell<Brain>>, tester: &Shared, command: ShardCommand) {
    let mut b = brain.borrow_mut();
    match command {
        ShardCommand::IssueGuard {
            shard,
            ballot,
            deadline,
        } => {
            b.guards.insert(
                shard,
                Guard {
                    ballot,
                    deadline,
                    closed: false,
                },
            );
            tester.borrow_mut().stats.guards += 1;
        }
        ShardCommand::SetDeadline(deadline) => {
            for g in b.guards.values_mut() {
                g.deadline = deadline;
            }
        }
        ShardCommand::CloseGuard(shard) => {
            if let Some(g) = b.guards.get_mut(&shard) {
                g.closed = true;
                tester.borrow_mut().stats.drains += 1;
            }
        }
        ShardCommand::RevokeGuard { shard, .. } => {
            b.guards.remove(&shard);
        }
        _ => {}
    }
}

fn timeout_of(config: &ElectionConfig) -> i32 {
    i32::try_from(config.transaction_timeout().as_millis()).unwrap_or(i32::MAX)
}

/// The sharded election's workload, one per tester.
pub(crate) struct ShardedWorkload {
    sim: Sim,
    options: Options,
    tester: Shared,
    checked: Option<(Counts, Vec<Violation>)>,
}

impl ShardedWorkload {
    pub(crate) fn new(sim: Sim) -> Self {
        let options = Options::read(sim.context(), true);
        ShardedWorkload {
            sim,
            options,
            tester: Rc::new(RefCell::new(Tester::default())),
            checked: None,
        }
    }

    fn config(&self) -> ElectionConfig {
        operator::config(self.options.lease, VersionPolicy::Ignore, true).unwrap_or_default()
    }

    fn layout(&self) -> Option<Layout> {
        Layout::new(self.options.shards, 2).ok()
    }

    /// One member slot: incarnations (a member and its coordinator candidate) one after
    /// another until `end`.
    async fn slot(&self, db: &SimDatabase, slot: u32, end: f64) {
        let sim = &self.sim;
        let Some(layout) = self.layout() else {
            return;
        };
        let name = format!("m{}s{slot}", sim.client());
        let config = self.config();
        while sim.now() < end {
            let Ok(id) = CandidateId::with_nonce(&name, sim.bits()) else {
                return;
            };
            let bound: i64 = if self.options.plant == Some(Plant::ClockBeyondRho) {
                450_000
            } else {
                9_000
            };
            let rate = i64::try_from(sim.below(2 * bound as u64 + 1)).unwrap_or(0) - bound;
            let clock = SimClock::new(sim.between(0.0, 1.0e6), rate);
            let priority = Priority::new(i32::try_from(sim.below(10)).unwrap_or(0));
            let weight = Weight::new(u32::try_from(sim.below(3)).unwrap_or(0).saturating_add(1));
            let member = Member::with_clock(id.clone(), priority, weight, Arc::new(clock));
            let beliefs: BTreeMap<ShardId, Beliefs> = (0..self.options.shards)
                .map(|s| {
                    (
                        ShardId::new(s),
                        Beliefs::new(format!("shard {s}"), id.to_string(), clock),
                    )
                })
                .collect();
            let beliefs = Rc::new(RefCell::new(beliefs));
            let election = sharded();
            let member_loop = MemberLoop {
                sim: sim.clone(),
                db: Arc::clone(db),
                election: election.clone(),
                member: member.clone(),
                clock,
                config: config.clone(),
                layout,
                tester: Rc::clone(&self.tester),
                plant: self.options.plant,
                brain: Rc::new(RefCell::new(Brain {
                    machine: ShardMachine::new(config.clone(), sim.bits(), member.now()),
                    guards: BTreeMap::new(),
                })),
                beliefs: Rc::clone(&beliefs),
                queue: VecDeque::new(),
                op: None,
                sleeping: None,
                waiting: None,
                draining: None,
                inbox: None,
                work: None,
                next_work_at: sim.now(),
                stopped: false,
                shutdown_fed: false,
                last_tokens: BTreeMap::new(),
            };
            // The member's candidate for the coordinator election: the same id, its leader
            // work placement.
            let candidate = Candidate::with_clock(id.clone(), priority, Arc::new(clock));
            let coordinator_beliefs = Rc::new(RefCell::new(Beliefs::new(
                String::new(),
                id.to_string(),
                clock,
            )));
            let coordinator = Incarnation::new(Setup {
                role: Role::Coordinator(Box::new((
                    election.clone(),
                    Coordinator::with_clock(id.clone(), Arc::new(clock)),
                ))),
                sim: sim.clone(),
                db: Arc::clone(db),
                election: election.coordinator_election().clone(),
                candidate,
                clock,
                init_config: config.clone(),
                tester: Rc::clone(&self.tester),
                beliefs: Rc::clone(&coordinator_beliefs),
                plant: None,
                seed: sim.bits(),
                busy: Rc::default(),
                seen: Rc::default(),
            });
            self.tester.borrow_mut().stats.incarnations += 1;
            let lifetime = sim.between(5.0, 40.0).min((end - sim.now()).max(0.5));
            let graceful = sim.chance(0.5);
            let shutdown_at = if graceful {
                sim.now() + lifetime
            } else {
                f64::INFINITY
            };
            let bound = lifetime + if graceful { 10.0 } else { 0.0 };
            if self.options.plant == Some(Plant::Idle) {
                sim.sleep(bound).await;
            } else {
                let both = futures_util::future::join(
                    member_loop.run(shutdown_at),
                    coordinator.run(shutdown_at),
                );
                if let Either::Right(_) = select(Box::pin(both), Box::pin(sim.sleep(bound))).await {
                    self.tester.borrow_mut().stats.crashes += 1;
                }
            }
            let now = sim.now();
            for b in beliefs.borrow_mut().values_mut() {
                b.close(&self.tester, now);
            }
            coordinator_beliefs.borrow_mut().close(&self.tester, now);
            sim.sleep(sim.between(0.2, 3.0)).await;
        }
    }
}

impl RustWorkload for ShardedWorkload {
    async fn setup(&mut self, db: SimDatabase) {
        let invalid = self.options.invalid.clone().or_else(|| {
            self.layout()
                .is_none()
                .then(|| format!("shards = {}: not a layout", self.options.shards))
        });
        if let Some(why) = invalid {
            self.options.invalid = Some(why.clone());
            self.sim.trace(
                Severity::Error,
                "LeaderElectionBadOption",
                &[("Reason".into(), why)],
            );
            return;
        }
        if self.sim.client() == 0 {
            let (e, config) = (sharded(), self.config());
            let Some(layout) = self.layout() else {
                return;
            };
            let _ = run(&db, &self.sim, &self.tester, 5000, |trx| {
                let (e, config) = (e.clone(), config.clone());
                async move { Ok(e.initialize(&trx, &config, &layout).await?) }
            })
            .await;
        }
    }

    async fn start(&mut self, db: SimDatabase) {
        if self.options.invalid.is_some() {
            return;
        }
        let end = self.sim.now() + self.options.duration;
        join_all((0..self.options.candidates).map(|s| self.slot(&db, s, end))).await;
        write_intervals(&self.sim, &db, &self.tester).await;
    }

    async fn check(&mut self, db: SimDatabase) {
        if self.sim.client() != 0 || self.options.invalid.is_some() {
            return;
        }
        match read_back(&db).await {
            Ok((entries, intervals, stats)) => {
                let cluster = check::Cluster::of(&stats);
                let (counts, found) = check::check_sharded(&entries, &intervals, cluster);
                report(&self.sim, &counts, &found, self.options.plant, cluster);
                self.checked = Some((counts, found));
            }
            Err(why) => self.sim.trace(
                Severity::Error,
                "LeaderElectionCheckUnreadable",
                &[("Reason".into(), why)],
            ),
        }
    }

    fn get_metrics(&self, mut out: foundationdb_simulation::Metrics) {
        metrics(&mut out, &self.tester.borrow().stats, self.checked.as_ref());
        if let Some((c, _)) = &self.checked {
            #[allow(clippy::cast_precision_loss)]
            out.extend([
                foundationdb_simulation::Metric::val(
                    "shard_acquisitions",
                    c.shard_acquisitions as f64,
                ),
                foundationdb_simulation::Metric::val("shard_writes", c.shard_writes as f64),
            ]);
        }
    }

    fn get_check_timeout(&self) -> f64 {
        3000.0
    }
}
