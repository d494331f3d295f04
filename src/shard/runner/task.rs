//! The member's task: carries out the [`ShardMachine`]'s commands (cycles, guards, the
//! drain and the leave) and decides nothing itself.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::{ShardChange, Shared, metrics};
use crate::clock::Clock;
use crate::config::ElectionConfig;
use crate::core::runner::Failure;
use crate::core::shard::machine::ShardMachine;
use crate::core::shard::machine::messages::{ShardCommand, ShardCtx, ShardEvent, ShardStop};
use crate::ids::ShardId;
use crate::record::shard::Layout;
use crate::shard::election::ShardedElection;
use crate::shard::guard::ShardGuard;
use crate::shard::member::Member;
use crate::store::database::ElectionDatabase;
use crate::store::txn::{ElectionTxn, Watch};

/// The member's task.
pub(super) struct MemberTask<D: ElectionDatabase> {
    pub(super) db: D,
    pub(super) election: ShardedElection,
    pub(super) member: Member,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) shared: Arc<Shared>,
    pub(super) idle: Arc<Notify>,
    pub(super) machine: Arc<Mutex<ShardMachine>>,
    /// The configuration this member creates the election with, if it is the first (the
    /// stored one paces everything else: `Shared::timing`).
    pub(super) config: ElectionConfig,
    pub(super) layout: Layout,
    pub(super) ended: Vec<ShardGuard>,
    /// The watch on this member's inbox, armed by its last committed cycle.
    pub(super) inbox: Option<Watch>,
    /// Whether this member has seen the election initialized (it creates it at first).
    pub(super) initialized: Arc<std::sync::atomic::AtomicBool>,
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

    pub(super) async fn run(mut self) {
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
            ShardCommand::WaitUntil(at) => {
                tokio::time::sleep(at.saturating_duration_since(self.clock.now())).await;
                self.feed(ShardEvent::Tick)
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
                    .transact(self.shared.timing().transaction_timeout(), |txn| {
                        let (election, member) = (election.clone(), member.clone());
                        async move { election.leave(&txn, &member).await }
                    })
                    .await;
                self.feed(ShardEvent::Left(left.map_err(|e| Failure::of(&e))))
            }
            other => {
                self.apply(other);
                Vec::new()
            }
        }
    }

    /// Carries out a command that takes no time (guards, reports); the others wait for
    /// [`carry`](Self::carry), and the machine issues none of them while a cycle runs.
    fn apply(&mut self, command: ShardCommand) {
        match command {
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
            }
            ShardCommand::SetDeadline(deadline) => {
                for guard in self.shared.guards().values() {
                    guard.set_deadline(deadline);
                }
            }
            ShardCommand::CloseGuard(shard) => {
                if let Some(guard) = self.shared.guards().get(&shard) {
                    guard.close();
                }
            }
            ShardCommand::RevokeGuard { shard, reason } => self.revoke(shard, reason),
            ShardCommand::Failed { kind, warn: true } => {
                tracing::warn!(kind, "member cycle failed; retrying");
            }
            // Commands that wait (or future ones): not carried out here.
            _ => {}
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
        // Woken when the transaction moves the guards' deadline back (a capped belief).
        let moved = Arc::new(Notify::new());
        let moved_inside = Arc::clone(&moved);
        let db = self.db.clone();
        let op = db.transact(self.shared.timing().transaction_timeout(), |txn| {
            let (election, member, ready) = (election.clone(), member.clone(), ready.clone());
            let (machine, shared, clock) = (
                Arc::clone(&machine),
                Arc::clone(&shared),
                Arc::clone(&clock),
            );
            let (config, initialized) = (config.clone(), Arc::clone(&initialized));
            let moved = Arc::clone(&moved_inside);
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
                // Inside the transaction, before the commit: revoke what is handed over,
                // and move the guards' deadline back to a capped belief's.
                let ctx = ctx_of(&member, &shared, clock.now());
                let commands = machine
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .handle(ShardEvent::CycleDecided, &ctx);
                for command in commands {
                    match command {
                        ShardCommand::RevokeGuard { shard, reason } => {
                            revoke(&shared, shard, reason);
                        }
                        ShardCommand::SetDeadline(deadline) => {
                            for guard in shared.guards().values() {
                                guard.set_deadline(deadline);
                            }
                            moved.notify_one();
                        }
                        _ => {}
                    }
                }
                Ok((cycle, inbox))
            }
        });
        tokio::pin!(op);
        // While the transaction runs (up to its timeout), the guards still end at their
        // deadline: the machine revokes them at a tick then, as it does while sleeping.
        let result = loop {
            let now = self.clock.now();
            let wait = if self.shared.guards().is_empty() {
                None
            } else {
                let deadline = self.member.lease_deadline().unwrap_or(now);
                Some(deadline.saturating_duration_since(now))
            };
            tokio::select! {
                biased;
                result = &mut op => break result,
                () = sleep_for(wait) => {
                    for command in self.feed(ShardEvent::Tick) {
                        self.apply(command);
                    }
                }
                () = moved.notified() => {}
            }
        };
        match result {
            Ok((cycle, inbox)) => {
                self.inbox = inbox;
                self.initialized
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                let hand_over = cycle.hand_over_requested();
                let more = cycle.more_to_acquire();
                // The stored configuration wins over the builder's (docs/design.md §10.6: the rule
                // that schedules renewals is the one that validated the configuration).
                let stored = cycle.config().clone();
                self.shared.set_timing(&stored);
                self.member.adopt(cycle);
                if self.member.owned_shards().is_empty() {
                    self.shared.status.not_leading();
                } else {
                    self.shared
                        .status
                        .renewed(started_at, stored.lease_duration());
                }
                self.feed(ShardEvent::CycleCommitted {
                    hand_over,
                    more,
                    config: stored,
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

/// Sleeps for `wait`, or forever.
async fn sleep_for(wait: Option<std::time::Duration>) {
    match wait {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
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
