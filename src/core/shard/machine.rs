//! A member's runner decisions, as a pure state machine (DESIGN §7, §12.5): when to run the
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
//! - the member renews before its lease ends, leaving room for one attempt
//!   ([`ElectionConfig::renewal_margin`]), and cycles again at once while its inbox has work.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::core::runner::Failure;
use crate::core::runner::pacing::{Backoff, WarnLimiter, before, jittered};
use crate::ids::{Ballot, ShardId};

/// Why a shard's guard ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardStop {
    /// The member handed the shard over (a move the coordinator asked for).
    HandedOver,
    /// The member's lease ended before a renewal (locally), or its epoch ended.
    LeaseExpired,
    /// The runner shut down.
    Shutdown,
}

/// What the member owns at an event, and which shards' guarded work is idle.
#[derive(Clone, Debug, Default)]
pub struct ShardCtx {
    pub(crate) now: LocalInstant,
    /// The shards the member owns now (its belief), with their ballots.
    pub(crate) owned: BTreeMap<ShardId, Ballot>,
    /// The member's lease deadline, while it holds a lease.
    pub(crate) deadline: Option<LocalInstant>,
    /// Shards whose guarded work has no task in flight.
    pub(crate) idle: BTreeSet<ShardId>,
}

impl ShardCtx {
    /// The moment `now`, with the member's ownership and lease deadline, and the idle shards.
    pub fn new(
        now: LocalInstant,
        owned: BTreeMap<ShardId, Ballot>,
        deadline: Option<LocalInstant>,
        idle: BTreeSet<ShardId>,
    ) -> Self {
        ShardCtx {
            now,
            owned,
            deadline,
            idle,
        }
    }
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardEvent {
    /// The runner started.
    Start,
    /// Time passed (a sleep ended).
    Tick,
    /// Inside the member cycle's transaction, after the decision, before the commit.
    CycleDecided,
    /// The member cycle committed. `hand_over`: the shards its inbox asks it to hand over
    /// (still its own); `more`: the inbox still has work (shards to acquire or hand over).
    CycleCommitted {
        /// Shards the coordinator asked the member to hand over.
        hand_over: Vec<ShardId>,
        /// Whether another cycle has work to do at once.
        more: bool,
        /// The configuration the cycle read.
        config: ElectionConfig,
    },
    /// The member cycle failed.
    CycleFailed(Failure),
    /// A shard's guarded work went idle.
    WorkIdle,
    /// The member's inbox changed (a watch fired): the coordinator or another member asks
    /// something of it, so the next cycle runs now rather than at the heartbeat.
    InboxChanged,
    /// Shutdown was asked for.
    ShutdownRequested,
    /// The guarded work of the ended guards was awaited (`true`: all of it finished).
    Drained(bool),
    /// The leave transaction ended (`Ok`: committed).
    Left(Result<(), Failure>),
}

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardCommand {
    /// Run a member cycle that may hand over these shards (their work is stopped).
    RunCycle {
        /// Shards ready to be handed over.
        ready: BTreeSet<ShardId>,
    },
    /// Sleep until then, or until an event.
    SleepUntil(LocalInstant),
    /// Hand the application a guard for `shard` at `ballot`, valid until `deadline`.
    IssueGuard {
        /// The shard.
        shard: ShardId,
        /// Its ballot (fencing token).
        ballot: Ballot,
        /// The member's lease deadline.
        deadline: LocalInstant,
    },
    /// Every live guard's deadline is now this (a renewal moved the member's lease).
    SetDeadline(LocalInstant),
    /// The shard's guard accepts no new work: a move was requested.
    CloseGuard(ShardId),
    /// End the shard's guard now.
    RevokeGuard {
        /// The shard.
        shard: ShardId,
        /// Why.
        reason: ShardStop,
    },
    /// Await the ended guards' work (at most `bound`).
    DrainTasks {
        /// The bound.
        bound: Duration,
    },
    /// Leave: hand every shard back and end this member's epoch, in one commit.
    Leave,
    /// Report a failure (`warn`: log it now).
    Failed {
        /// The error kind.
        kind: &'static str,
        /// Whether to log it.
        warn: bool,
    },
    /// The runner is done.
    Stop,
}

#[derive(Clone, Debug)]
struct Guard {
    ballot: Ballot,
    /// Since when it accepts no new work (a move requested).
    closed_at: Option<LocalInstant>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Running,
    Draining,
    Leaving { attempt: u32 },
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
                // Shards handed over inside this transaction: revoked before the commit.
                self.revoke_unowned(ctx, ShardStop::HandedOver, &mut out);
                // A shorter lease written by this attempt capped the belief: the guards'
                // deadline moves with it before the commit (DESIGN §10.3).
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
                for shard in hand_over {
                    if let Some(g) = self.guards.get_mut(&shard) {
                        if g.closed_at.is_none() {
                            g.closed_at = Some(ctx.now);
                            out.push(ShardCommand::CloseGuard(shard));
                        }
                    }
                }
            }
            ShardEvent::CycleFailed(f) => {
                self.in_flight = false;
                self.failing = true;
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
                    self.phase = Phase::Leaving { attempt: 1 };
                }
            }
            ShardEvent::Left(result) => {
                self.in_flight = false;
                match (result, self.phase) {
                    (Ok(()), _) => self.phase = Phase::Stopped,
                    (Err(_), Phase::Leaving { attempt }) if attempt < LEAVE_ATTEMPTS => {
                        self.phase = Phase::Leaving {
                            attempt: attempt.saturating_add(1),
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

    /// Shards whose handover may proceed: closed, and idle or past the grace.
    fn ready(&self, ctx: &ShardCtx) -> BTreeSet<ShardId> {
        let grace = self.config.handover_grace();
        self.guards
            .iter()
            .filter_map(|(s, g)| {
                let closed = g.closed_at?;
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
            Phase::Leaving { .. } => {
                out.push(ShardCommand::Leave);
                self.in_flight = true;
                return;
            }
            Phase::Running => {}
        }
        let ready = self.ready(ctx);
        let due = self.due_at();
        if self.run_now || !ready.is_empty() || ctx.now >= due {
            self.run_now = false;
            out.push(ShardCommand::RunCycle { ready });
            self.in_flight = true;
            return;
        }
        let mut wake = due;
        let grace = self.config.handover_grace();
        for g in self.guards.values() {
            if let Some(closed) = g.closed_at {
                wake = wake.min(closed.saturating_add(grace));
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]

    use super::*;

    fn at(ms: u64) -> LocalInstant {
        LocalInstant::from_origin(Duration::from_millis(ms))
    }

    fn config() -> ElectionConfig {
        ElectionConfig::builder()
            .lease_duration(Duration::from_millis(300))
            .heartbeat_interval(Duration::from_millis(100))
            .candidate_timeout(Duration::from_millis(600))
            .transaction_timeout(Duration::from_millis(30))
            .handover_grace(Duration::from_millis(200))
            .build()
            .unwrap()
    }

    fn ctx(now: u64, owned: &[(u32, u64)], deadline: Option<u64>, idle: &[u32]) -> ShardCtx {
        ShardCtx::new(
            at(now),
            owned
                .iter()
                .map(|(s, b)| (ShardId::new(*s), Ballot::new(*b)))
                .collect(),
            deadline.map(at),
            idle.iter().map(|s| ShardId::new(*s)).collect(),
        )
    }

    fn committed(hand_over: &[u32], more: bool) -> ShardEvent {
        ShardEvent::CycleCommitted {
            hand_over: hand_over.iter().map(|s| ShardId::new(*s)).collect(),
            more,
            config: config(),
        }
    }

    fn run(ready: &[u32]) -> ShardCommand {
        ShardCommand::RunCycle {
            ready: ready.iter().map(|s| ShardId::new(*s)).collect(),
        }
    }

    /// A member owning shards 1 and 2 at ballot 5, lease until 294 ms, idle.
    fn owning() -> ShardMachine {
        let mut m = ShardMachine::new(config(), 7, at(0));
        assert_eq!(
            m.handle(ShardEvent::Start, &ctx(0, &[], None, &[])),
            vec![run(&[])]
        );
        let out = m.handle(
            committed(&[], false),
            &ctx(0, &[(1, 5), (2, 5)], Some(294), &[]),
        );
        assert!(out.contains(&ShardCommand::IssueGuard {
            shard: ShardId::new(1),
            ballot: Ballot::new(5),
            deadline: at(294)
        }));
        assert!(
            matches!(out.last(), Some(ShardCommand::SleepUntil(_))),
            "{out:?}"
        );
        m
    }

    #[test]
    fn guards_are_issued_after_a_commit_and_follow_the_lease() {
        let mut m = owning();
        assert_eq!(m.guarded().len(), 2);
        // The next cycle is due by the jittered heartbeat (80-100 ms).
        let out = m.handle(
            ShardEvent::Tick,
            &ctx(100, &[(1, 5), (2, 5)], Some(294), &[]),
        );
        assert_eq!(out, vec![run(&[])]);
        // A renewal moves every guard's deadline.
        let out = m.handle(
            committed(&[], false),
            &ctx(100, &[(1, 5), (2, 5)], Some(394), &[]),
        );
        assert!(out.contains(&ShardCommand::SetDeadline(at(394))), "{out:?}");
        assert!(
            !out.iter()
                .any(|c| matches!(c, ShardCommand::IssueGuard { .. }))
        );
    }

    #[test]
    fn a_lapsed_lease_revokes_every_guard() {
        let mut m = owning();
        let out = m.handle(ShardEvent::Tick, &ctx(294, &[], None, &[]));
        let revoked: Vec<_> = out
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    ShardCommand::RevokeGuard {
                        reason: ShardStop::LeaseExpired,
                        ..
                    }
                )
            })
            .collect();
        assert_eq!(revoked.len(), 2, "{out:?}");
        assert!(m.guarded().is_empty());
    }

    #[test]
    fn a_move_closes_the_guard_waits_for_idle_work_and_revokes_inside_the_transaction() {
        let mut m = owning();
        m.handle(
            ShardEvent::Tick,
            &ctx(90, &[(1, 5), (2, 5)], Some(294), &[]),
        );
        // The coordinator asks for shard 1; its work is busy.
        let out = m.handle(
            committed(&[1], false),
            &ctx(90, &[(1, 5), (2, 5)], Some(384), &[]),
        );
        assert!(out.contains(&ShardCommand::CloseGuard(ShardId::new(1))));
        assert!(
            !out.iter()
                .any(|c| matches!(c, ShardCommand::RunCycle { .. })),
            "{out:?}"
        );
        // Its work goes idle: a cycle that may hand it over, at once.
        let out = m.handle(
            ShardEvent::WorkIdle,
            &ctx(95, &[(1, 5), (2, 5)], Some(384), &[1]),
        );
        assert_eq!(out, vec![run(&[1])]);
        // Inside the transaction, shard 1 is no longer owned: revoked before the commit.
        let out = m.handle(
            ShardEvent::CycleDecided,
            &ctx(96, &[(2, 5)], Some(384), &[1]),
        );
        assert_eq!(
            out,
            vec![ShardCommand::RevokeGuard {
                shard: ShardId::new(1),
                reason: ShardStop::HandedOver
            }]
        );
        let out = m.handle(committed(&[], false), &ctx(97, &[(2, 5)], Some(390), &[1]));
        assert!(
            !out.iter()
                .any(|c| matches!(c, ShardCommand::IssueGuard { .. }))
        );
        assert_eq!(m.guarded(), [ShardId::new(2)].into());
    }

    #[test]
    fn a_shorter_lease_moves_the_guards_deadline_back_inside_the_transaction() {
        let mut m = owning();
        let owned = [(1, 5), (2, 5)];
        assert_eq!(
            m.handle(ShardEvent::Tick, &ctx(90, &owned, Some(294), &[])),
            vec![run(&[])]
        );
        // The attempt writes a shorter lease: the belief is capped at 150 before the commit.
        let out = m.handle(ShardEvent::CycleDecided, &ctx(91, &owned, Some(150), &[]));
        assert_eq!(out, vec![ShardCommand::SetDeadline(at(150))]);
        // A later attempt's own longer end does not extend it before its commit.
        let out = m.handle(ShardEvent::CycleDecided, &ctx(92, &owned, Some(390), &[]));
        assert!(out.is_empty(), "{out:?}");
        // Unconfirmed (the reply is lost): every guard ends at the capped deadline.
        let failure = Failure {
            kind: "commit_unknown_result",
            retryable: true,
            not_registered: false,
            not_initialized: false,
        };
        m.handle(
            ShardEvent::CycleFailed(failure),
            &ctx(120, &owned, Some(150), &[]),
        );
        let out = m.handle(ShardEvent::Tick, &ctx(150, &[], Some(150), &[]));
        let expired = out
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    ShardCommand::RevokeGuard {
                        reason: ShardStop::LeaseExpired,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(expired, 2, "{out:?}");
    }

    #[test]
    fn a_busy_shard_is_handed_over_when_the_grace_ends() {
        let mut m = owning();
        m.handle(
            ShardEvent::Tick,
            &ctx(90, &[(1, 5), (2, 5)], Some(294), &[]),
        );
        let out = m.handle(
            committed(&[1], false),
            &ctx(90, &[(1, 5), (2, 5)], Some(384), &[]),
        );
        // It sleeps at most until the grace (200 ms) ends.
        let wake = out.iter().find_map(|c| match c {
            ShardCommand::SleepUntil(t) => Some(*t),
            _ => None,
        });
        assert!(wake.is_some_and(|t| t <= at(290)), "{out:?}");
        let out = m.handle(
            ShardEvent::Tick,
            &ctx(290, &[(1, 5), (2, 5)], Some(384), &[]),
        );
        assert_eq!(out, vec![run(&[1])]);
    }

    #[test]
    fn more_work_in_the_inbox_cycles_again_at_once_and_failures_back_off() {
        let mut m = owning();
        m.handle(
            ShardEvent::Tick,
            &ctx(90, &[(1, 5), (2, 5)], Some(294), &[]),
        );
        let out = m.handle(
            committed(&[], true),
            &ctx(91, &[(1, 5), (2, 5)], Some(385), &[]),
        );
        assert!(out.contains(&run(&[])), "{out:?}");
        let failure = Failure {
            kind: "conflict",
            retryable: true,
            not_registered: false,
            not_initialized: false,
        };
        let out = m.handle(
            ShardEvent::CycleFailed(failure),
            &ctx(92, &[(1, 5), (2, 5)], Some(385), &[]),
        );
        assert_eq!(
            out.first(),
            Some(&ShardCommand::Failed {
                kind: "conflict",
                warn: true
            })
        );
        let wake = out.iter().find_map(|c| match c {
            ShardCommand::SleepUntil(t) => Some(*t),
            _ => None,
        });
        assert!(
            wake.is_some_and(|t| t > at(92) && t <= at(92 + 50)),
            "{out:?}"
        );
    }

    #[test]
    fn an_inbox_change_cycles_at_once_unless_backing_off() {
        let mut m = owning();
        let owned = [(1, 5), (2, 5)];
        // Sleeping until the heartbeat: the watch fires at 20 ms, the cycle runs then.
        let out = m.handle(ShardEvent::InboxChanged, &ctx(20, &owned, Some(294), &[]));
        assert_eq!(out, vec![run(&[])]);
        let failure = Failure {
            kind: "unavailable",
            retryable: true,
            not_registered: false,
            not_initialized: false,
        };
        m.handle(
            ShardEvent::CycleFailed(failure),
            &ctx(25, &owned, Some(294), &[]),
        );
        let out = m.handle(ShardEvent::InboxChanged, &ctx(26, &owned, Some(294), &[]));
        assert!(
            matches!(out.as_slice(), [ShardCommand::SleepUntil(t)] if *t > at(26)),
            "a watch must not cut the back-off short: {out:?}"
        );
    }

    #[test]
    fn shutdown_revokes_drains_leaves_and_stops() {
        let mut m = owning();
        let out = m.handle(
            ShardEvent::ShutdownRequested,
            &ctx(10, &[(1, 5), (2, 5)], Some(294), &[]),
        );
        let revoked = out
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    ShardCommand::RevokeGuard {
                        reason: ShardStop::Shutdown,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(revoked, 2);
        assert!(
            matches!(out.last(), Some(ShardCommand::DrainTasks { .. })),
            "{out:?}"
        );
        let out = m.handle(ShardEvent::Drained(true), &ctx(20, &[], Some(294), &[]));
        assert_eq!(out, vec![ShardCommand::Leave]);
        let failure = Failure {
            kind: "unavailable",
            retryable: true,
            not_registered: false,
            not_initialized: false,
        };
        let out = m.handle(ShardEvent::Left(Err(failure)), &ctx(30, &[], None, &[]));
        assert_eq!(out, vec![ShardCommand::Leave], "a failed leave is retried");
        let out = m.handle(ShardEvent::Left(Ok(())), &ctx(40, &[], None, &[]));
        assert_eq!(out, vec![ShardCommand::Stop]);
        assert!(
            m.handle(ShardEvent::Tick, &ctx(50, &[], None, &[]))
                .is_empty()
        );
    }
}
