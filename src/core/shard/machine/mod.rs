//! A member's runner decisions, as a pure state machine (docs/design.md §7, §12.5): when to run the
//! next member cycle and which shards it may hand over, when a shard's guard is issued,
//! closed (a move was requested: no new work), moved to a new deadline or revoked, how long a
//! handover waits for the shard's work (at most the grace), back-off after failures, and the
//! graceful leave. The tokio [`ShardedRunner`](crate::shard::ShardedRunner) carries its
//! commands out; nothing here reads a clock or does I/O.
//!
//! Rules (each in one place):
//!
//! - a shard's guard is issued only after a confirmed commit made the member own the shard,
//!   with the member's lease deadline, and follows that deadline;
//! - a shard the member no longer owns (handed over inside the transaction, an ended epoch, a
//!   lapsed lease) has its guard revoked at once: inside the transaction, before the commit,
//!   for a handover;
//! - a handover waits for the shard's work to go idle, at most the grace from the request;
//! - no closed guard is kept: one whose request was withdrawn meanwhile is replaced, once its
//!   work is idle or the grace has passed, by a fresh guard of the same ballot;
//! - the member renews before its lease ends, leaving room for one attempt
//!   ([`ElectionConfig::renewal_margin`]), and cycles again at once while its inbox has work;
//! - once a shutdown is asked for, only time and the outcomes of the machine's own commands
//!   move it: a failed leave is retried after its back-off ([`ShardCommand::WaitUntil`]),
//!   which no event cuts short.

use std::collections::{BTreeMap, BTreeSet};

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::core::runner::pacing::{Backoff, WarnLimiter, before, jittered};
use crate::ids::{Ballot, ShardId};
use messages::{ShardCommand, ShardCtx, ShardEvent, ShardStop};

pub(crate) mod messages;

#[derive(Clone, Debug)]
struct Guard {
    ballot: Ballot,
    /// Since when it accepts no new work (a move requested).
    closed_at: Option<LocalInstant>,
    /// Whether the member's inbox still asks for the shard, as the last committed cycle read
    /// it (a closed guard whose request was withdrawn is not handed over, but reopened).
    requested: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Running,
    Draining,
    /// Leaving: the attempt under way or next, and when the next may start (after a failed
    /// one, the same back-off as a failed cycle's: a failing store is not retried back to
    /// back).
    Leaving {
        attempt: u32,
        retry_at: Option<LocalInstant>,
    },
    Stopped,
}

/// How many times a leave is attempted before giving up (the lease then lapses).
const LEAVE_ATTEMPTS: u32 = 3;

/// A member's runner decisions: feed it [`ShardEvent`]s with [`handle`](Self::handle) and
/// carry out the [`ShardCommand`]s it returns, in order.
#[derive(Debug)]
pub struct ShardMachine {
    config: ElectionConfig,
    rng: StdRng,
    phase: Phase,
    in_flight: bool,
    guards: BTreeMap<ShardId, Guard>,
    deadline: Option<LocalInstant>,
    next_cycle_at: LocalInstant,
    run_now: bool,
    failing: bool,
    backoff: Backoff,
    warn: WarnLimiter,
}

impl ShardMachine {
    /// A machine starting with `config` (the stored one replaces it once read), its jitter
    /// drawn from `seed`, created at `now`.
    pub fn new(config: ElectionConfig, seed: u64, now: LocalInstant) -> Self {
        ShardMachine {
            config,
            rng: StdRng::seed_from_u64(seed),
            phase: Phase::Idle,
            in_flight: false,
            guards: BTreeMap::new(),
            deadline: None,
            next_cycle_at: now,
            run_now: true,
            failing: false,
            backoff: Backoff::default(),
            warn: WarnLimiter::default(),
        }
    }

    /// The shards with a live guard.
    pub fn guarded(&self) -> BTreeSet<ShardId> {
        self.guards.keys().copied().collect()
    }

    /// Feeds one event at `ctx`; returns the commands to carry out, in order.
    pub fn handle(&mut self, event: ShardEvent, ctx: &ShardCtx) -> Vec<ShardCommand> {
        let mut out = Vec::new();
        if self.phase == Phase::Stopped {
            return out;
        }
        let inside_transaction = matches!(event, ShardEvent::CycleDecided);
        match event {
            ShardEvent::Start => {
                if self.phase == Phase::Idle {
                    self.phase = Phase::Running;
                }
            }
            ShardEvent::Tick | ShardEvent::WorkIdle => {}
            // While failing, the back-off stands: a watch is no reason to hammer the store.
            ShardEvent::InboxChanged => self.run_now |= !self.failing,
            ShardEvent::CycleDecided => {
                // Shards handed over (or, elections disabled, given back) inside this
                // transaction: revoked before the commit.
                let reason = if self.config.election_enabled() {
                    ShardStop::HandedOver
                } else {
                    ShardStop::ElectionsDisabled
                };
                self.revoke_unowned(ctx, reason, &mut out);
                // A shorter lease written by this attempt capped the belief: the guards'
                // deadline moves with it before the commit (docs/design.md §10.3).
                self.cap_deadline(ctx, &mut out);
            }
            ShardEvent::CycleCommitted {
                hand_over,
                more,
                config,
            } => {
                self.in_flight = false;
                self.config = config;
                self.failing = false;
                self.backoff.reset();
                let _ = self.warn.success();
                let heartbeat = self.config.heartbeat_interval();
                self.next_cycle_at = ctx.now.saturating_add(jittered(&mut self.rng, heartbeat));
                self.run_now = more;
                let asked: BTreeSet<ShardId> = hand_over.into_iter().collect();
                for (shard, g) in &mut self.guards {
                    g.requested = asked.contains(shard);
                    if g.requested && g.closed_at.is_none() {
                        g.closed_at = Some(ctx.now);
                        out.push(ShardCommand::CloseGuard(*shard));
                    }
                }
            }
            ShardEvent::CycleFailed(f) => {
                self.in_flight = false;
                self.failing = true;
                // A watch that fired while the cycle ran is answered by the retry, after the
                // back-off (the retry reads the inbox): not by a cycle at once.
                self.run_now = false;
                out.push(ShardCommand::Failed {
                    kind: f.kind,
                    warn: self.warn.failure(ctx.now).is_some(),
                });
                let delay = self
                    .backoff
                    .next(&mut self.rng, self.config.heartbeat_interval());
                self.next_cycle_at = ctx.now.saturating_add(delay);
            }
            ShardEvent::ShutdownRequested => {
                if matches!(self.phase, Phase::Idle | Phase::Running) {
                    self.phase = Phase::Draining;
                    let shards: Vec<ShardId> = self.guards.keys().copied().collect();
                    for shard in shards {
                        self.guards.remove(&shard);
                        out.push(ShardCommand::RevokeGuard {
                            shard,
                            reason: ShardStop::Shutdown,
                        });
                    }
                }
            }
            ShardEvent::Drained(_) => {
                self.in_flight = false;
                if self.phase == Phase::Draining {
                    self.phase = Phase::Leaving {
                        attempt: 1,
                        retry_at: None,
                    };
                }
            }
            ShardEvent::Left(result) => {
                self.in_flight = false;
                match (result, self.phase) {
                    (Ok(()), _) => self.phase = Phase::Stopped,
                    (Err(_), Phase::Leaving { attempt, .. }) if attempt < LEAVE_ATTEMPTS => {
                        let delay = self
                            .backoff
                            .next(&mut self.rng, self.config.heartbeat_interval());
                        self.phase = Phase::Leaving {
                            attempt: attempt.saturating_add(1),
                            retry_at: Some(ctx.now.saturating_add(delay)),
                        };
                    }
                    (Err(_), _) => self.phase = Phase::Stopped,
                }
                if self.phase == Phase::Stopped {
                    out.push(ShardCommand::Stop);
                    return out;
                }
            }
        }
        if !inside_transaction {
            self.reconcile(ctx, &mut out);
            self.next(ctx, &mut out);
        }
        out
    }

    /// Revokes the guards of shards the member does not own now.
    fn revoke_unowned(&mut self, ctx: &ShardCtx, reason: ShardStop, out: &mut Vec<ShardCommand>) {
        let gone: Vec<ShardId> = self
            .guards
            .iter()
            .filter(|(s, g)| ctx.owned.get(*s) != Some(&g.ballot))
            .map(|(s, _)| *s)
            .collect();
        for shard in gone {
            self.guards.remove(&shard);
            out.push(ShardCommand::RevokeGuard {
                shard,
                reason: reason.clone(),
            });
        }
    }

    /// Moves every guard's deadline back to the belief's, when that is earlier (a cap before
    /// a commit); never later (only a confirmed commit extends it, in `reconcile`).
    fn cap_deadline(&mut self, ctx: &ShardCtx, out: &mut Vec<ShardCommand>) {
        if let (Some(capped), Some(current)) = (ctx.deadline, self.deadline) {
            if capped < current {
                self.deadline = Some(capped);
                if !self.guards.is_empty() {
                    out.push(ShardCommand::SetDeadline(capped));
                }
            }
        }
    }

    /// Guards follow the member's belief: revoked for shards it no longer owns (or all, at the
    /// lease's end), issued for shards it now owns, their deadline the lease's.
    fn reconcile(&mut self, ctx: &ShardCtx, out: &mut Vec<ShardCommand>) {
        if !matches!(self.phase, Phase::Running) {
            return;
        }
        let valid = ctx.deadline.is_some_and(|d| ctx.now < d);
        let owned = if valid {
            ctx.owned.clone()
        } else {
            BTreeMap::new()
        };
        let reason = if valid {
            ShardStop::HandedOver
        } else {
            ShardStop::LeaseExpired
        };
        self.revoke_unowned(
            &ShardCtx {
                owned: owned.clone(),
                ..ctx.clone()
            },
            reason,
            out,
        );
        // No closed guard is kept (docs/design.md §10.6): one whose move was withdrawn while its work
        // drained ends once that work is idle or the grace has passed, and a fresh guard of the
        // same ballot (below) takes new work again; the member never stopped owning the shard.
        let grace = self.config.handover_grace();
        let withdrawn: Vec<ShardId> = self
            .guards
            .iter()
            .filter(|(s, g)| {
                !g.requested
                    && g.closed_at.is_some_and(|closed| {
                        ctx.idle.contains(*s) || ctx.now >= closed.saturating_add(grace)
                    })
            })
            .map(|(s, _)| *s)
            .collect();
        for shard in withdrawn {
            self.guards.remove(&shard);
            out.push(ShardCommand::RevokeGuard {
                shard,
                reason: ShardStop::MoveWithdrawn,
            });
        }
        if let Some(deadline) = ctx.deadline.filter(|_| valid) {
            if self.deadline != Some(deadline) && !self.guards.is_empty() {
                out.push(ShardCommand::SetDeadline(deadline));
            }
            self.deadline = Some(deadline);
            for (shard, ballot) in owned {
                if let std::collections::btree_map::Entry::Vacant(e) = self.guards.entry(shard) {
                    e.insert(Guard {
                        ballot,
                        closed_at: None,
                        requested: false,
                    });
                    out.push(ShardCommand::IssueGuard {
                        shard,
                        ballot,
                        deadline,
                    });
                }
            }
        } else {
            self.deadline = None;
        }
    }

    /// Shards whose handover may proceed: closed, still requested, and idle or past the grace.
    fn ready(&self, ctx: &ShardCtx) -> BTreeSet<ShardId> {
        let grace = self.config.handover_grace();
        self.guards
            .iter()
            .filter_map(|(s, g)| {
                let closed = g.closed_at.filter(|_| g.requested)?;
                (ctx.idle.contains(s) || ctx.now >= closed.saturating_add(grace)).then_some(*s)
            })
            .collect()
    }

    fn next(&mut self, ctx: &ShardCtx, out: &mut Vec<ShardCommand>) {
        if self.in_flight {
            return;
        }
        match self.phase {
            Phase::Idle | Phase::Stopped => return,
            Phase::Draining => {
                out.push(ShardCommand::DrainTasks {
                    bound: self.config.heartbeat_interval(),
                });
                self.in_flight = true;
                return;
            }
            Phase::Leaving { retry_at, .. } => {
                match retry_at.filter(|at| ctx.now < *at) {
                    Some(at) => out.push(ShardCommand::WaitUntil(at)),
                    None => {
                        out.push(ShardCommand::Leave);
                        self.in_flight = true;
                    }
                }
                return;
            }
            Phase::Running => {}
        }
        let ready = self.ready(ctx);
        let due = self.due_at();
        // A shard ready to hand over cycles at once, unless the last cycle failed: then the
        // back-off stands, as for a watch (a failing store is retried at its pace, not back to
        // back while a handover waits).
        if self.run_now || (!ready.is_empty() && !self.failing) || ctx.now >= due {
            self.run_now = false;
            out.push(ShardCommand::RunCycle { ready });
            self.in_flight = true;
            return;
        }
        let mut wake = due;
        let grace = self.config.handover_grace();
        for g in self.guards.values() {
            // A grace still running ends a wait; one already over is waiting for `due`.
            if let Some(end) = g
                .closed_at
                .map(|closed| closed.saturating_add(grace))
                .filter(|end| *end > ctx.now)
            {
                wake = wake.min(end);
            }
        }
        if let Some(d) = self.deadline {
            wake = wake.min(d);
        }
        out.push(ShardCommand::SleepUntil(wake));
    }

    /// When the next member cycle is due: the jittered heartbeat, or the renewal margin
    /// before the lease ends (the rule validation checks), whichever is sooner.
    fn due_at(&self) -> LocalInstant {
        let mut due = self.next_cycle_at;
        if let (Some(d), false) = (self.deadline, self.failing) {
            due = due.min(before(d, self.config.renewal_margin()));
        }
        due
    }
}

#[cfg(test)]
mod tests;
