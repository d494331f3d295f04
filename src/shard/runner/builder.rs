//! [`ShardedRunnerBuilder`]: a sharded runner's settings, and its start (the member's task
//! and its coordinator loop).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use foundationdb_tuple::Subspace;
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::coordinate::coordinate;
use super::task::MemberTask;
use super::{ShardedRunner, Shared};
use crate::clock::{Clock, TokioClock};
use crate::config::ElectionConfig;
use crate::core::shard::machine::ShardMachine;
use crate::ids::{CandidateId, Priority, Weight};
use crate::record::shard::Layout;
use crate::runner::health::Status;
use crate::runner::{BuildError, Runner};
use crate::shard::election::ShardedElection;
use crate::shard::member::{Coordinator, Member};
use crate::store::database::ElectionDatabase;

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

impl<D: ElectionDatabase> ShardedRunnerBuilder<D> {
    pub(super) fn new(db: D, subspace: Subspace) -> Self {
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
            timing: Mutex::new(config.clone()),
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
