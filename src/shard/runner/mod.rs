//! [`ShardedRunner`]: a member of a sharded election on a tokio task, handing the application
//! one [`ShardGuard`] per owned shard; and, while it leads the coordinator election, the
//! coordinator. It carries out the [`ShardMachine`]'s commands and decides nothing itself.

mod builder;
mod coordinate;
mod task;

pub use builder::ShardedRunnerBuilder;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use foundationdb_tuple::Subspace;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::config::ElectionConfig;
use crate::core::shard::machine::messages::ShardStop;
use crate::ids::{Ballot, CandidateId, ShardId};
use crate::runner::health::Status;
use crate::runner::{HealthProblem, Runner};
use crate::shard::election::ShardedElection;
use crate::shard::guard::ShardGuard;
use crate::shard::member::Member;
use crate::store::database::ElectionDatabase;

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
    /// The election's timing: the builder's until a cycle has read the stored one, which wins
    /// (the member's and the coordinator's pace, their transactions' timeout).
    timing: Mutex<ElectionConfig>,
}

impl Shared {
    fn guards(&self) -> MutexGuard<'_, BTreeMap<ShardId, ShardGuard>> {
        self.guards.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn timing(&self) -> ElectionConfig {
        self.timing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_timing(&self, stored: &ElectionConfig) {
        let mut timing = self.timing.lock().unwrap_or_else(PoisonError::into_inner);
        if *timing != *stored {
            *timing = stored.clone();
        }
    }
}

/// A member of a sharded election, run on a tokio task. Cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use fdb_leader_election::shard::ShardedRunner;
/// use fdb_leader_election::{ElectionConfig, MemDb, Weight};
/// use fdb_leader_election::Subspace;
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

impl ShardedRunner {
    /// A builder for a member of the sharded election under `subspace` on `db`.
    pub fn builder<D: ElectionDatabase>(db: D, subspace: Subspace) -> ShardedRunnerBuilder<D> {
        ShardedRunnerBuilder::new(db, subspace)
    }

    /// This member's id.
    pub fn id(&self) -> &CandidateId {
        self.member.id()
    }

    /// The shards this member owns now, with their guards: those whose guard
    /// [`is_valid`](ShardGuard::is_valid). O(M) in all (one clock reading, one pass over the
    /// guards beside the member's shards, both in shard order).
    pub fn owned(&self) -> BTreeMap<ShardId, ShardGuard> {
        let guards = self.shared.guards();
        self.member.with_owned(|now, owned| {
            let mut tokens = owned.into_iter().flatten().peekable();
            guards
                .iter()
                .filter(|(shard, guard)| {
                    // Both maps are in shard order: skip the member's shards below this one.
                    while tokens.next_if(|(s, _)| *s < *shard).is_some() {}
                    let token = tokens.next_if(|(s, _)| *s == *shard).map(|(_, b)| *b);
                    guard.valid_at(now, token)
                })
                .map(|(shard, guard)| (*shard, guard.clone()))
                .collect()
        })
    }

    /// The guard of `shard`, if this member owns it now. O(log M).
    pub fn guard(&self, shard: ShardId) -> Option<ShardGuard> {
        let guard = self.shared.guards().get(&shard).cloned()?;
        guard.is_valid().then_some(guard)
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

    /// Says whether this member may own shards (docs/design.md §13.8): published at its next
    /// renewal, after which the coordinator places it as if its weight were 0 (its shards
    /// move away cooperatively, at the move limit, each kept until its move lands; with no
    /// eligible member to take them, it keeps them). The same goes for the coordinator
    /// election: an ineligible member does not coordinate (it hands coordination over). Its
    /// readiness check, if it has one, sets this too.
    ///
    /// # Errors
    ///
    /// [`ElectionError::TooLarge`](crate::ElectionError::TooLarge) for a reason longer than
    /// [`MAX_REASON_BYTES`](crate::MAX_REASON_BYTES); nothing changes.
    pub fn set_eligible(&self, eligible: bool, reason: &str) -> Result<(), crate::ElectionError> {
        self.member.set_eligible(eligible, reason)?;
        if let Some(c) = self.coordinator.candidate() {
            c.set_eligible(eligible, reason)?;
        }
        Ok(())
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
