//! [`ShardedRunner`]: a member of a sharded election on a tokio task, handing the application
//! one [`ShardGuard`] per owned shard; and, while it leads the coordinator election, the
//! coordinator. It carries out the [`ShardMachine`]'s commands and decides nothing itself.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use foundationdb_tuple::Subspace;
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::election::ShardedElection;
use super::guard::ShardGuard;
use super::member::{Coordinator, Member};
use super::record::Layout;
use crate::clock::{Clock, TokioClock};
use crate::config::ElectionConfig;
use crate::core::runner::Failure;
use crate::core::shard::machine::{ShardCommand, ShardCtx, ShardEvent, ShardMachine, ShardStop};
use crate::database::ElectionDatabase;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, Priority, ShardId, Weight};
use crate::runner::health::Status;
use crate::runner::{BuildError, HealthProblem, Runner};
use crate::txn::{ElectionTxn, Watch};

/// The metrics of a sharded runner (through the `metrics` facade).
pub mod metrics {
    /// Gauge: how many shards this member owns.
    pub const SHARDS_OWNED: &str = "fdb_leader_shards_owned";
    /// Counter: shards this member handed over (cooperative moves).
    pub const SHARD_MOVES: &str = "fdb_leader_shard_moves_total";
    /// Counter: members this coordinator fenced out (their shards taken over).
    pub const SHARD_TAKEOVERS: &str = "fdb_leader_shard_takeovers_total";
}

/// A change of this member's ownership.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardChange {
    /// The shard.
    pub shard: ShardId,
    /// Its ballot (the fencing token of the ownership that began or ended).
    pub ballot: Ballot,
    /// `None`: acquired; `Some(reason)`: lost.
    pub ended: Option<ShardStop>,
}

struct Shared {
    guards: Mutex<BTreeMap<ShardId, ShardGuard>>,
    changes: broadcast::Sender<ShardChange>,
    shutdown: CancellationToken,
    /// Set by `abort`: stop at once, leaving nothing (a crash, for tests).
    aborted: CancellationToken,
    stopped: CancellationToken,
    /// The member's health: owning shards with a renewal older than the lease is wedged.
    status: Status,
}

impl Shared {
    fn guards(&self) -> MutexGuard<'_, BTreeMap<ShardId, ShardGuard>> {
        self.guards.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A member of a sharded election, run on a tokio task. Cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use fdb_leader_election::shard::ShardedRunner;
/// use fdb_leader_election::{ElectionConfig, MemDb, Weight};
/// use foundationdb_tuple::Subspace;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let db = MemDb::new();
/// let config = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
/// let start = |name: &str| {
///     ShardedRunner::builder(db.clone(), Subspace::from("jobs"))
///         .shards(16)
///         .label(name)
///         .weight(Weight::ONE)
///         .config(config.clone())
///         .start()
/// };
/// let (a, b) = (start("a")?, start("b")?);
/// tokio::time::sleep(Duration::from_secs(2)).await;
/// assert_eq!(a.owned().len() + b.owned().len(), 16);
/// assert_eq!(a.owned().len(), 8); // balanced
/// for (shard, guard) in a.owned() {
///     assert_eq!(guard.shard(), shard); // fence its writes with guard.fencing_token()
/// }
/// a.shutdown().await; // hands its shards back at once
/// tokio::time::sleep(Duration::from_secs(1)).await;
/// assert_eq!(b.owned().len(), 16);
/// # b.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ShardedRunner {
    member: Member,
    election: ShardedElection,
    coordinator: Runner,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ShardedRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedRunner")
            .field("member", self.member.id())
            .field("owned", &self.shared.guards().len())
            .finish()
    }
}

/// Builds and starts a [`ShardedRunner`].
#[must_use = "a builder does nothing until `start` is called"]
pub struct ShardedRunnerBuilder<D: ElectionDatabase> {
    db: D,
    subspace: Subspace,
    shards: u32,
    max_concurrent_moves: u32,
    label: Option<String>,
    priority: Priority,
    weight: Weight,
    config: Option<ElectionConfig>,
    clock: Option<Arc<dyn Clock>>,
    seed: Option<u64>,
}

impl<D: ElectionDatabase> std::fmt::Debug for ShardedRunnerBuilder<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedRunnerBuilder")
            .field("shards", &self.shards)
            .field("label", &self.label)
            .field("priority", &self.priority)
            .field("weight", &self.weight)
            .finish()
    }
}

impl ShardedRunner {
    /// A builder for a member of the sharded election under `subspace` on `db`.
    pub fn builder<D: ElectionDatabase>(db: D, subspace: Subspace) -> ShardedRunnerBuilder<D> {
        ShardedRunnerBuilder {
            db,
            subspace,
            shards: 64,
            max_concurrent_moves: 8,
            label: None,
            priority: Priority::new(0),
            weight: Weight::ONE,
            config: None,
            clock: None,
            seed: None,
        }
    }

    /// This member's id.
    pub fn id(&self) -> &CandidateId {
        self.member.id()
    }

    /// The shards this member owns now, with their guards.
    pub fn owned(&self) -> BTreeMap<ShardId, ShardGuard> {
        self.shared
            .guards()
            .iter()
            .filter(|(_, g)| g.is_valid())
            .map(|(s, g)| (*s, g.clone()))
            .collect()
    }

    /// The guard of `shard`, if this member owns it now.
    pub fn guard(&self, shard: ShardId) -> Option<ShardGuard> {
        self.owned().remove(&shard)
    }

    /// A stream of this member's ownership changes (acquired, lost).
    pub fn subscribe(&self) -> broadcast::Receiver<ShardChange> {
        self.shared.changes.subscribe()
    }

    /// The sharded election.
    pub fn election(&self) -> &ShardedElection {
        &self.election
    }

    /// The member handle (its belief, for fencing checks).
    pub fn member(&self) -> &Member {
        &self.member
    }

    /// Whether this process currently coordinates placement.
    pub fn is_coordinator(&self) -> bool {
        self.coordinator.is_leader()
    }

    /// The health check: fails if this member owns shards but its last successful cycle
    /// started a lease ago or more (a wedged member: its guards have expired, its work is
    /// stopped, and it does nothing), if its task died (it did not shut down), or if its
    /// coordinator runner fails its own check. Never fails for owning nothing.
    ///
    /// # Errors
    ///
    /// The [`HealthProblem`].
    pub fn health(&self) -> Result<(), HealthProblem> {
        self.shared.status.check(self.member.now())?;
        self.coordinator.health()
    }

    /// Stops every shard's work (cancels and awaits it, within a heartbeat), hands every shard
    /// back and ends this member's epoch in one commit, and leaves the coordinator election
    /// (handing it over).
    pub async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        self.shared.stopped.cancelled().await;
        self.coordinator.shutdown().await;
    }

    /// Stops at once without leaving, as a crash would: the member's shards are owned again
    /// after the coordinator has seen its record unchanged for a full lease. For tests.
    pub fn abort(&self) {
        self.shared.aborted.cancel();
        self.coordinator.abort();
    }
}

impl<D: ElectionDatabase> ShardedRunnerBuilder<D> {
    /// How many shards the election has (used when this member creates it). Default 64.
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = shards;
        self
    }

    /// The most cooperative moves in flight at once (used when this member creates the
    /// election). Default 8.
    pub fn max_concurrent_moves(mut self, n: u32) -> Self {
        self.max_concurrent_moves = n;
        self
    }

    /// A human label for the member's id (random bits are added).
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// The member's priority (the larger shares go to higher priorities).
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The member's weight (0: drained).
    pub fn weight(mut self, weight: Weight) -> Self {
        self.weight = weight;
        self
    }

    /// The timing (used when this member creates the election; the stored one wins).
    pub fn config(mut self, config: ElectionConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// The clock (default: tokio's).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The seed of the runner's jitter.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Starts the member (and its bid for the coordinator election) on the current tokio
    /// runtime.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for an invalid label or layout, or outside a runtime.
    pub fn start(self) -> Result<ShardedRunner, BuildError> {
        let _ = tokio::runtime::Handle::try_current().map_err(BuildError::NoRuntime)?;
        let layout =
            Layout::new(self.shards, self.max_concurrent_moves).map_err(BuildError::Candidate)?;
        let label = self.label.clone().unwrap_or_else(|| "member".to_owned());
        let id = CandidateId::random(&label).map_err(BuildError::Candidate)?;
        let clock: Arc<dyn Clock> = self.clock.unwrap_or_else(|| Arc::new(TokioClock::new()));
        let member = Member::with_clock(id.clone(), self.priority, self.weight, Arc::clone(&clock));
        let config = self.config.unwrap_or_default();
        let election = ShardedElection::new(self.subspace.clone());
        let coordinator =
            Runner::builder(self.db.clone(), self.subspace.subspace(&("coordinator",)))
                .candidate_id(id.clone())
                .priority(self.priority)
                .config(config.clone())
                .clock(Arc::clone(&clock))
                .start()?;
        let (changes, _) = broadcast::channel(1024);
        let shared = Arc::new(Shared {
            guards: Mutex::new(BTreeMap::new()),
            changes,
            shutdown: CancellationToken::new(),
            aborted: CancellationToken::new(),
            stopped: CancellationToken::new(),
            status: Status::new(config.lease_duration()),
        });
        let seed = self.seed.unwrap_or_else(|| {
            id.as_str()
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
        });
        let task = MemberTask {
            db: self.db.clone(),
            election: election.clone(),
            member: member.clone(),
            clock: Arc::clone(&clock),
            shared: Arc::clone(&shared),
            idle: Arc::new(Notify::new()),
            machine: Arc::new(Mutex::new(ShardMachine::new(
                config.clone(),
                seed,
                clock.now(),
            ))),
            config: config.clone(),
            layout,
            ended: Vec::new(),
            inbox: None,
            initialized: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        tokio::spawn(task.run());
        tokio::spawn(coordinate(
            self.db,
            election.clone(),
            coordinator.clone(),
            Coordinator::with_clock(id, clock),
            config,
            Arc::clone(&shared),
        ));
        Ok(ShardedRunner {
            member,
            election,
            coordinator,
            shared,
        })
    }
}

/// The member's task.
struct MemberTask<D: ElectionDatabase> {
    db: D,
    election: ShardedElection,
    member: Member,
    clock: Arc<dyn Clock>,
    shared: Arc<Shared>,
    idle: Arc<Notify>,
    machine: Arc<Mutex<ShardMachine>>,
    config: ElectionConfig,
    layout: Layout,
    ended: Vec<ShardGuard>,
    /// The watch on this member's inbox, armed by its last committed cycle.
    inbox: Option<Watch>,
    /// Whether this member has seen the election initialized (it creates it at first).
    initialized: Arc<std::sync::atomic::AtomicBool>,
}

impl<D: ElectionDatabase> MemberTask<D> {
    fn ctx(&self) -> ShardCtx {
        ctx_of(&self.member, &self.shared, self.clock.now())
    }

    fn feed(&self, event: ShardEvent) -> Vec<ShardCommand> {
        let ctx = self.ctx();
        self.machine
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .handle(event, &ctx)
    }

    async fn run(mut self) {
        // A panic or an abort drops this before the end: the member is then reported dead.
        let died = DeadOnDrop(Arc::clone(&self.shared));
        let mut queue: std::collections::VecDeque<ShardCommand> =
            self.feed(ShardEvent::Start).into();
        let aborted = self.shared.aborted.clone();
        while let Some(command) = queue.pop_front() {
            if command == ShardCommand::Stop {
                break;
            }
            let more = tokio::select! {
                biased;
                () = aborted.cancelled() => break,
                more = self.carry(command) => more,
            };
            queue.extend(more);
        }
        for guard in self.shared.guards().values() {
            guard.revoke(ShardStop::Shutdown);
        }
        self.shared.guards().clear();
        ::metrics::gauge!(metrics::SHARDS_OWNED).set(0.0);
        if !self.shared.aborted.is_cancelled() {
            std::mem::forget(died);
        }
        self.shared.status.not_leading();
        self.shared.stopped.cancel();
    }

    async fn carry(&mut self, command: ShardCommand) -> Vec<ShardCommand> {
        match command {
            ShardCommand::RunCycle { ready } => self.cycle(ready).await,
            ShardCommand::SleepUntil(at) => self.sleep(at).await,
            ShardCommand::IssueGuard {
                shard,
                ballot,
                deadline,
            } => {
                let guard = ShardGuard::new(
                    shard,
                    ballot,
                    self.member.clone(),
                    deadline,
                    Arc::clone(&self.idle),
                );
                self.shared.guards().insert(shard, guard);
                let _ = self.shared.changes.send(ShardChange {
                    shard,
                    ballot,
                    ended: None,
                });
                self.owned_gauge();
                Vec::new()
            }
            ShardCommand::SetDeadline(deadline) => {
                for guard in self.shared.guards().values() {
                    guard.set_deadline(deadline);
                }
                Vec::new()
            }
            ShardCommand::CloseGuard(shard) => {
                if let Some(guard) = self.shared.guards().get(&shard) {
                    guard.close();
                }
                Vec::new()
            }
            ShardCommand::RevokeGuard { shard, reason } => {
                self.revoke(shard, reason);
                Vec::new()
            }
            ShardCommand::DrainTasks { bound } => {
                let mut all = true;
                for guard in std::mem::take(&mut self.ended) {
                    all &= guard.wait_tasks(bound).await;
                }
                self.feed(ShardEvent::Drained(all))
            }
            ShardCommand::Leave => {
                let (election, member) = (self.election.clone(), self.member.clone());
                let left = self
                    .db
                    .transact(self.config.transaction_timeout(), |txn| {
                        let (election, member) = (election.clone(), member.clone());
                        async move { election.leave(&txn, &member).await }
                    })
                    .await;
                self.feed(ShardEvent::Left(left.map_err(|e| Failure::of(&e))))
            }
            ShardCommand::Failed { kind, warn } => {
                if warn {
                    tracing::warn!(kind, "member cycle failed; retrying");
                }
                Vec::new()
            }
            // Future commands of the machine: nothing to carry out here.
            _ => Vec::new(),
        }
    }

    fn revoke(&mut self, shard: ShardId, reason: ShardStop) {
        if let Some(guard) = revoke(&self.shared, shard, reason) {
            self.ended.push(guard);
        }
    }

    fn owned_gauge(&self) {
        owned_gauge(&self.shared);
    }

    async fn cycle(&mut self, ready: BTreeSet<ShardId>) -> Vec<ShardCommand> {
        let (election, member) = (self.election.clone(), self.member.clone());
        let machine = Arc::clone(&self.machine);
        let shared = Arc::clone(&self.shared);
        let clock = Arc::clone(&self.clock);
        let layout = self.layout;
        let config = self.config.clone();
        let initialized = Arc::clone(&self.initialized);
        let started_at = self.clock.now();
        let result = self
            .db
            .transact(self.config.transaction_timeout(), |txn| {
                let (election, member, ready) = (election.clone(), member.clone(), ready.clone());
                let (machine, shared, clock) = (
                    Arc::clone(&machine),
                    Arc::clone(&shared),
                    Arc::clone(&clock),
                );
                let (config, initialized) = (config.clone(), Arc::clone(&initialized));
                async move {
                    // The first member creates the election (once per runner).
                    use std::sync::atomic::Ordering;
                    if !initialized.load(Ordering::SeqCst) {
                        election.initialize(&txn, &config, &layout).await?;
                    }
                    let cycle = election.member_cycle(&txn, &member, &ready).await?;
                    // Wakes the member when its inbox changes after this commit (the inbox was
                    // read serializably: the watch adds no conflict). Without watches, the
                    // heartbeat alone paces it.
                    let inbox = txn.watch(&election.inbox_key(member.id())).ok();
                    // Inside the transaction, before the commit: revoke what is handed over.
                    let ctx = ctx_of(&member, &shared, clock.now());
                    let commands = machine
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .handle(ShardEvent::CycleDecided, &ctx);
                    for command in commands {
                        if let ShardCommand::RevokeGuard { shard, reason } = command {
                            revoke(&shared, shard, reason);
                        }
                    }
                    Ok((cycle, inbox))
                }
            })
            .await;
        match result {
            Ok((cycle, inbox)) => {
                self.inbox = inbox;
                self.initialized
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                let hand_over = cycle.hand_over_requested();
                let more = cycle.more_to_acquire();
                self.member.adopt(cycle);
                if self.member.owned_shards().is_empty() {
                    self.shared.status.not_leading();
                } else {
                    self.shared
                        .status
                        .renewed(started_at, self.config.lease_duration());
                }
                self.feed(ShardEvent::CycleCommitted {
                    hand_over,
                    more,
                    config: self.config.clone(),
                })
            }
            Err(e) => self.feed(ShardEvent::CycleFailed(Failure::of(&e))),
        }
    }

    async fn sleep(&mut self, at: crate::clock::LocalInstant) -> Vec<ShardCommand> {
        let now = self.clock.now();
        let wait = at.saturating_duration_since(now);
        let shutdown = self.shared.shutdown.clone();
        let idle = Arc::clone(&self.idle);
        let inbox = async {
            match self.inbox.as_mut().map(|w| w.as_mut()) {
                Some(w) => {
                    // A failed watch (watches unavailable, too many) leaves the heartbeat.
                    let fired = w.await.is_ok();
                    self.inbox = None;
                    if !fired {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        };
        let event = tokio::select! {
            () = shutdown.cancelled() => ShardEvent::ShutdownRequested,
            () = idle.notified() => ShardEvent::WorkIdle,
            () = inbox => ShardEvent::InboxChanged,
            () = tokio::time::sleep(wait) => ShardEvent::Tick,
        };
        self.feed(event)
    }
}

/// Marks the member dead when dropped: armed for the task's life, forgotten at a clean end.
struct DeadOnDrop(Arc<Shared>);

impl Drop for DeadOnDrop {
    fn drop(&mut self) {
        self.0.status.mark_dead();
    }
}

/// Revokes `shard`'s guard (if any) for `reason`: counted, streamed, and returned so that its
/// work can be awaited.
fn revoke(shared: &Shared, shard: ShardId, reason: ShardStop) -> Option<ShardGuard> {
    let guard = shared.guards().remove(&shard)?;
    guard.revoke(reason.clone());
    if reason == ShardStop::HandedOver {
        ::metrics::counter!(metrics::SHARD_MOVES).increment(1);
    }
    let _ = shared.changes.send(ShardChange {
        shard,
        ballot: guard.fencing_token(),
        ended: Some(reason),
    });
    owned_gauge(shared);
    Some(guard)
}

fn owned_gauge(shared: &Shared) {
    #[expect(clippy::cast_precision_loss, reason = "a gauge of at most 2^20 shards")]
    let n = shared.guards().len() as f64;
    ::metrics::gauge!(metrics::SHARDS_OWNED).set(n);
}

fn ctx_of(member: &Member, shared: &Shared, now: crate::clock::LocalInstant) -> ShardCtx {
    let idle: BTreeSet<ShardId> = shared
        .guards()
        .iter()
        .filter(|(_, g)| g.tasks_running() == 0)
        .map(|(s, _)| *s)
        .collect();
    ShardCtx::new(now, member.owned_shards(), member.lease_deadline(), idle)
}

/// While this process leads the coordinator election: one coordinator attempt per
/// heartbeat, fenced by its token.
async fn coordinate<D: ElectionDatabase>(
    db: D,
    election: ShardedElection,
    runner: Runner,
    coordinator: Coordinator,
    config: ElectionConfig,
    shared: Arc<Shared>,
) {
    loop {
        let elected = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            () = shared.aborted.cancelled() => return,
            guard = runner.elected() => guard,
        };
        let Some(guard) = elected else {
            return;
        };
        while guard.is_valid() {
            let token = guard.fencing_token();
            let (e, c) = (election.clone(), coordinator.clone());
            let done = db
                .transact(config.transaction_timeout(), |txn| {
                    let (e, c) = (e.clone(), c.clone());
                    async move { e.coordinate(&txn, &c, token).await }
                })
                .await;
            match done {
                Ok(done) => {
                    if !done.fenced.is_empty() {
                        ::metrics::counter!(metrics::SHARD_TAKEOVERS)
                            .increment(u64::try_from(done.fenced.len()).unwrap_or(u64::MAX));
                    }
                }
                Err(ElectionError::NotInitialized) => {}
                Err(e) => tracing::debug!(error = %e, "coordinator attempt failed"),
            }
            let pause = config
                .heartbeat_interval()
                .checked_div(4)
                .unwrap_or(Duration::ZERO);
            tokio::select! {
                () = shared.shutdown.cancelled() => return,
                () = shared.aborted.cancelled() => return,
                () = guard.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}
