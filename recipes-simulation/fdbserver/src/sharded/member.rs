//! One member's executor: the sharded runner machine fed in simulated time, its commands
//! carried out, and fenced work on each shard it owns.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

use fdb_leader_election::shard::machine::{ShardCommand, ShardCtx, ShardEvent, ShardMachine};
use fdb_leader_election::shard::{Layout, Member, ShardedElection};
use fdb_leader_election::{
    Ballot, ElectionConfig, ElectionTxn, LocalInstant, ReadMode, ShardId, Watch,
};
use foundationdb::Database;

use crate::incarnation::txn::{run, timeout_of};
use crate::log::{self, Entry};
use crate::options::Plant;
use crate::sim::{Sim, SimClock};
use crate::tester::{Beliefs, Shared};

type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// A shard guard, as this executor keeps it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Guard {
    ballot: Ballot,
    deadline: LocalInstant,
    closed: bool,
}

/// What a member shares with its cycle's transaction closure.
pub(super) struct Brain {
    pub(super) machine: ShardMachine,
    pub(super) guards: BTreeMap<ShardId, Guard>,
}

/// One member's executor.
pub(super) struct MemberLoop {
    pub(super) sim: Sim,
    pub(super) db: Arc<Database>,
    pub(super) election: ShardedElection,
    pub(super) member: Member,
    pub(super) clock: SimClock,
    pub(super) config: ElectionConfig,
    pub(super) layout: Layout,
    pub(super) tester: Shared,
    pub(super) plant: Option<Plant>,
    pub(super) brain: Rc<RefCell<Brain>>,
    pub(super) beliefs: Rc<RefCell<BTreeMap<ShardId, Beliefs>>>,
    pub(super) queue: VecDeque<ShardCommand>,
    pub(super) op: Option<LocalFuture<ShardEvent>>,
    pub(super) sleeping: Option<LocalInstant>,
    /// `WaitUntil`: only time ends it.
    pub(super) waiting: Option<LocalInstant>,
    pub(super) draining: Option<f64>,
    pub(super) inbox: Option<Watch>,
    /// The shard whose work is in flight, and the work.
    pub(super) work: Option<(ShardId, LocalFuture<()>)>,
    pub(super) next_work_at: f64,
    pub(super) stopped: bool,
    pub(super) shutdown_fed: bool,
    /// The last token of each shard the planted unfenced work used.
    pub(super) last_tokens: BTreeMap<ShardId, Ballot>,
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

    pub(super) async fn run(mut self, shutdown_at: f64) {
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
}

/// The member's context: its clock, ownership and lease, and the shards whose work is idle.
pub(super) fn ctx_of(member: &Member, busy: Option<ShardId>) -> ShardCtx {
    let owned = member.owned_shards();
    let idle = owned.keys().copied().filter(|s| Some(*s) != busy).collect();
    ShardCtx::new(member.now(), owned, member.lease_deadline(), idle)
}

/// Samples every shard's belief: owned, until the member's lease deadline.
pub(super) fn sample(
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
pub(super) fn apply(brain: &Rc<RefCell<Brain>>, tester: &Shared, command: ShardCommand) {
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
