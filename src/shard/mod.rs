//! Sharded leadership (docs/design.md §12): M shards, one owner and one fencing token (ballot) each,
//! owned by live members under one lease per member, balanced over them by a pure placement
//! function ([`placement::plan`]) and moved cooperatively.
//!
//! The manual flow: every member runs [`ShardedElection::member_cycle`] once per heartbeat in
//! a transaction of its own and adopts it after the commit ([`Member::adopt`]); the leader of
//! the [coordinator election](ShardedElection::coordinator_election) runs
//! [`ShardedElection::coordinate`] once per heartbeat; every write of a shard's work is fenced
//! with [`ShardedElection::fence_shard`] in its own transaction.

mod assignments;
mod coordination;
mod cycle;
mod election;
mod fence;
mod guard;
mod member;
mod observer;
mod operator;
mod runner;

pub use crate::core::shard::operator::ShardMove;
pub use crate::core::shard::placement;
pub use crate::record::shard as record;

/// A member's runner decisions as a pure state machine, without I/O, clocks or tokio: the
/// [`ShardedRunner`] executes it. See [`ShardMachine`](machine::ShardMachine).
pub mod machine {
    pub use crate::core::shard::machine::ShardMachine;
    pub use crate::core::shard::machine::messages::{
        ShardCommand, ShardCtx, ShardEvent, ShardStop,
    };
}
pub use crate::record::shard::{Inbox, Layout, MAX_SHARDS, MemberRecord, ShardOwner, ShardRecord};
pub use assignments::{AssignmentChange, Assignments, ShardAssignment};
pub use coordination::Coordination;
pub use election::ShardedElection;
pub use guard::ShardGuard;
pub use member::{Coordinator, Member, MemberCycle};
pub use observer::AssignmentObserver;
pub use runner::{ShardChange, ShardedRunner, ShardedRunnerBuilder, metrics};
