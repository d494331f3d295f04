//! [`ShardedRunnerBuilder`]: a sharded runner's settings, and its start (the member's task
//! and its coordinator loop).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use foundationdb_tuple::Subspace;
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::coordinate::coordinate;
use super::task::MemberTask;
use super::{ShardedRunner, Shared};
use crate::clock::{Clock, TokioClock};
use crate::config::ElectionConfig;
use crate::core::health::CheckSettings;
use crate::core::shard::machine::ShardMachine;
use crate::error::printable_key;
use crate::ids::{CandidateId, Priority, Weight};
use crate::record::shard::Layout;
use crate::runner::builder::start::parse_version;
use crate::runner::checks::Check;
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
    readiness: Option<Check>,
    version: Option<String>,
    name: Option<String>,
}

impl<D: ElectionDatabase> std::fmt::Debug for ShardedRunnerBuilder<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedRunnerBuilder")
            .field("shards", &self.shards)
            .field("label", &self.label)
            .field("priority", &self.priority)
            .field("weight", &self.weight)
            .field("version", &self.version)
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
            readiness: None,
            version: None,
            name: None,
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

    /// The version this member runs (docs/design.md §14.1), a semantic version such as `"1.5.0"`: it
    /// registers it in the coordinator election, which ranks the members by the sharded
    /// election's [`VersionPolicy`](crate::VersionPolicy) (its configuration's, set with
    /// [`ShardedElection::write_config`](crate::shard::ShardedElection::write_config) or `fdb-leader
    /// config set --sharded --version-policy`), as
    /// [`RunnerBuilder::version`](crate::runner::RunnerBuilder::version) does for a single
    /// election: under `prefer-newest` a member of a newer version takes over the
    /// coordination, under `prefer-oldest` the oldest version coordinates until its last
    /// member has left. Shard placement does not depend on versions. A string that is no
    /// semantic version makes [`start`](Self::start) fail with
    /// [`BuildError::InvalidVersion`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use fdb_leader_election::shard::ShardedRunner;
    /// use fdb_leader_election::{ElectionConfig, MemDb, VersionPolicy};
    /// use foundationdb_tuple::Subspace;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let db = MemDb::new();
    /// let config = ElectionConfig::with_lease_duration(Duration::from_millis(600))?
    ///     .to_builder()
    ///     .version_policy(VersionPolicy::PreferOldest)
    ///     .build()?;
    /// let start = |version: &str| {
    ///     ShardedRunner::builder(db.clone(), Subspace::from("jobs"))
    ///         .shards(4)
    ///         .version(version)
    ///         .config(config.clone())
    ///         .start()
    /// };
    /// let old = start("1.4.0")?;
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// let new = start("1.5.0")?;
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert!(old.is_coordinator() && !new.is_coordinator()); // the oldest coordinates
    /// old.shutdown().await;
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert!(new.is_coordinator());
    /// # new.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn version(mut self, version: &str) -> Self {
        self.version = Some(version.to_owned());
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

    /// A readiness check (docs/design.md §13.5, §13.8): can this member own shards. It runs every
    /// `settings.interval()`, beside the member and its coordinator (never inside their
    /// transactions), an answer later than `settings.timeout()` failing. The member is not
    /// eligible until its first answer passes, nor after `fall` consecutive failures, until
    /// `rise` passes: an ineligible member is placed as if its weight were 0 (its shards move
    /// away cooperatively, each kept until its move lands; with nobody else eligible it keeps
    /// them) and does not coordinate. See
    /// [`RunnerBuilder::readiness_check`](crate::runner::RunnerBuilder::readiness_check).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fdb_leader_election::runner::CheckSettings;
    /// use fdb_leader_election::shard::ShardedRunner;
    /// use fdb_leader_election::{ElectionConfig, MemDb};
    /// use fdb_leader_election::Subspace;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = ElectionConfig::with_lease_duration(Duration::from_millis(600))?;
    /// let settings = CheckSettings::new(Duration::from_millis(100), Duration::from_millis(50), 1, 1)?;
    /// let member = ShardedRunner::builder(MemDb::new(), Subspace::from("jobs"))
    ///     .shards(4)
    ///     .config(config)
    ///     .readiness_check(settings, || async { Err::<(), _>("disk full".to_owned()) })
    ///     .start()?;
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert!(member.owned().is_empty()); // nobody eligible: nobody owns a shard
    /// assert_eq!(member.member().eligibility().reason(), Some("not ready: disk full"));
    /// # member.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn readiness_check<F, Fut>(mut self, settings: CheckSettings, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        self.readiness = Some(Check::new(settings, check));
        self
    }

    /// The `election` field of log spans and label of the coordinator election's metrics
    /// (default: the subspace, printable). The coordinator election is named `NAME
    /// coordinator`.
    pub fn election_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Starts the member (and its bid for the coordinator election) on the current tokio
    /// runtime.
    ///
    /// # Errors
    ///
    /// [`BuildError`] for an invalid label, layout or version, or outside a runtime.
    pub fn start(self) -> Result<ShardedRunner, BuildError> {
        let readiness = self.readiness.clone();
        let _ = tokio::runtime::Handle::try_current().map_err(BuildError::NoRuntime)?;
        if let Some(v) = &self.version {
            parse_version(v)?;
        }
        let layout =
            Layout::new(self.shards, self.max_concurrent_moves).map_err(BuildError::Candidate)?;
        let label = self.label.clone().unwrap_or_else(|| "member".to_owned());
        let id = CandidateId::random(&label).map_err(BuildError::Candidate)?;
        let clock: Arc<dyn Clock> = self.clock.unwrap_or_else(|| Arc::new(TokioClock::new()));
        let member = Member::with_clock(id.clone(), self.priority, self.weight, Arc::clone(&clock));
        let config = self.config.unwrap_or_default();
        let election = ShardedElection::new(self.subspace.clone());
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| printable_key(self.subspace.bytes()));
        let mut coordinator =
            Runner::builder(self.db.clone(), self.subspace.subspace(&("coordinator",)))
                .election_name(format!("{name} coordinator"))
                .candidate_id(id.clone())
                .priority(self.priority)
                .config(config.clone())
                .clock(Arc::clone(&clock));
        if let Some(check) = readiness {
            coordinator = coordinator.with_readiness(check);
        }
        if let Some(v) = &self.version {
            coordinator = coordinator.version(v);
        }
        let coordinator = coordinator.start()?;
        // The readiness check runs once, in the coordinator runner: the member follows its
        // candidate's eligibility from the start (not ready before the first answer).
        if let Some(candidate) = coordinator.candidate().cloned() {
            let own = candidate.eligibility();
            member
                .set_eligible(own.is_eligible(), own.reason().unwrap_or_default())
                .map_err(BuildError::Candidate)?;
            let (member, mut updates) = (member.clone(), coordinator.eligibility_updates());
            tokio::spawn(async move {
                while updates.changed().await.is_ok() {
                    let own = candidate.eligibility();
                    let _ =
                        member.set_eligible(own.is_eligible(), own.reason().unwrap_or_default());
                }
            });
        }
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
        let span = tracing::info_span!("sharded_election", election = %name, member = %id);
        tokio::spawn(task.run().instrument(span.clone()));
        tokio::spawn(
            coordinate(
                self.db,
                election.clone(),
                coordinator.clone(),
                Coordinator::with_clock(id, clock),
                Arc::clone(&shared),
            )
            .instrument(span),
        );
        Ok(ShardedRunner {
            member,
            election,
            coordinator,
            shared,
        })
    }
}
