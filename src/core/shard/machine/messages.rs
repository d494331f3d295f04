//! What goes in and out of a [`ShardMachine`](super::ShardMachine): the events the runner
//! reports, the facts it passes with each (its [`ShardCtx`]), the commands the machine gives
//! back, and why a shard's guard ended.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::core::runner::Failure;
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
    /// The member gave the shard back, vacant: the stored configuration disables elections.
    ElectionsDisabled,
    /// The move that closed the guard was withdrawn (its target left or no longer needs the
    /// shard) while the shard's work drained: this guard ends, and a fresh guard of the same
    /// shard and ballot follows at once (the member still owns the shard and takes new work).
    MoveWithdrawn,
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
    /// Sleep until then, or until an event (a shutdown asked for, work gone idle, the inbox
    /// changed).
    SleepUntil(LocalInstant),
    /// Wait until then, whatever happens meanwhile: only time ends this wait. A leave's retry
    /// after a failed attempt: the shutdown it carries out was asked for already (a shutdown
    /// token stays cancelled, and a sleep it could end would end at once, again and again),
    /// and no other event changes when the leave is retried.
    WaitUntil(LocalInstant),
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
