//! [`RunnerBuilder`]: the settings of a runner ([`start`] validates them and starts it).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use foundationdb_tuple::Subspace;

use super::checks::{Check, Checks};
use super::events::ElectionCallbacks;
use super::handle::Runner;
use crate::candidate::Candidate;
use crate::clock::Clock;
use crate::config::ElectionConfig;
use crate::core::UnhealthyPolicy;
use crate::core::health::CheckSettings;
use crate::core::runner::OnLoss;
use crate::error::printable_key;
use crate::ids::{CandidateId, Priority};
use crate::store::database::ElectionDatabase;

pub(crate) mod start;

/// Builds and starts a [`Runner`]. Obtain one with [`Runner::builder`] (a candidate) or
/// [`Runner::observer`] (watches only).
#[must_use = "a builder does nothing until `start` is called"]
pub struct RunnerBuilder<D: ElectionDatabase> {
    db: D,
    subspace: Subspace,
    observe_only: bool,
    label: Option<String>,
    id: Option<CandidateId>,
    candidate: Option<Candidate>,
    priority: Option<Priority>,
    payload: Option<Vec<u8>>,
    metadata: Option<Vec<u8>>,
    config: Option<ElectionConfig>,
    clock: Option<Arc<dyn Clock>>,
    seed: Option<u64>,
    on_loss: OnLoss,
    callbacks: Option<Arc<dyn ElectionCallbacks>>,
    stop_timeout: Option<Duration>,
    event_capacity: usize,
    name: Option<String>,
    checks: Checks,
    unhealthy: Option<UnhealthyPolicy>,
    version: Option<String>,
}

impl<D: ElectionDatabase> std::fmt::Debug for RunnerBuilder<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunnerBuilder")
            .field("subspace", &printable_key(self.subspace.bytes()))
            .field("observe_only", &self.observe_only)
            .field("label", &self.label)
            .field("id", &self.id)
            .field("priority", &self.priority)
            .field("version", &self.version)
            .field("on_loss", &self.on_loss)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The default capacity of the leader-change channel.
pub const DEFAULT_EVENT_CAPACITY: usize = 64;

impl<D: ElectionDatabase> RunnerBuilder<D> {
    pub(crate) fn new(db: D, subspace: Subspace, observe_only: bool) -> Self {
        RunnerBuilder {
            db,
            subspace,
            observe_only,
            label: None,
            id: None,
            candidate: None,
            priority: None,
            payload: None,
            metadata: None,
            config: None,
            clock: None,
            seed: None,
            on_loss: OnLoss::default(),
            callbacks: None,
            stop_timeout: None,
            event_capacity: DEFAULT_EVENT_CAPACITY,
            name: None,
            checks: Checks::default(),
            unhealthy: None,
            version: None,
        }
    }

    /// The human-readable part of the candidate id (default `"candidate"`); random bits are
    /// appended, so each start is a new incarnation.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// An explicit candidate id, instead of `label` plus random bits. It must be fresh for
    /// each process incarnation.
    pub fn candidate_id(mut self, id: CandidateId) -> Self {
        self.id = Some(id);
        self
    }

    /// Drive an existing [`Candidate`] (its id, priority, payload, metadata and clock) rather
    /// than building one. Its local state carries over: for example, a runner restarted over
    /// the same candidate recognises the writes of the previous one.
    ///
    /// While the runner drives it, do not run cycles, resignations or `step_down_locally` of
    /// that candidate yourself: the runner learns of a change of belief only at its own next
    /// event, so a guarded task would run on (not valid, since
    /// [`LeadershipGuard::is_valid`](crate::LeadershipGuard::is_valid) follows the belief)
    /// until then. Use the runner's handle ([`Runner::resign`](crate::Runner::resign),
    /// [`Runner::shutdown`](crate::Runner::shutdown)) instead.
    pub fn candidate(mut self, candidate: Candidate) -> Self {
        self.candidate = Some(candidate);
        self
    }

    /// The candidate's priority (default 0). Higher wins; a strictly higher priority asks the
    /// leader to hand over when preemption is enabled.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = Some(priority);
        self
    }

    /// The version this candidate runs (docs/design.md §14.1), a semantic version such as `"1.5.0"`
    /// (the `semver` crate's precedence orders them). The election's
    /// [`VersionPolicy`](crate::VersionPolicy) ranks candidates by it before their priority:
    /// under `prefer-newest` a rolling deploy moves the leadership to the new version, under
    /// `prefer-oldest` the old version leads until its last instance has left, under
    /// `no-downgrade` leadership never goes back to an older version while one at least as
    /// new as the leader's is live (see the configuration's
    /// [`version_policy`](crate::ElectionConfigBuilder::version_policy)). Without it, the
    /// candidate ranks as the oldest of all under every policy. The leader record keeps the
    /// leader's version ([`LeaderInfo::version`](crate::runner::LeaderInfo::version)).
    ///
    /// A string that is no semantic version makes [`start`](Self::start) fail with
    /// [`BuildError::InvalidVersion`](crate::runner::BuildError::InvalidVersion).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fdb_leader_election::runner::{BuildError, Runner};
    /// use fdb_leader_election::{ElectionConfig, MemDb, Version, VersionPolicy};
    /// use foundationdb_tuple::Subspace;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let db = MemDb::new();
    /// let config = ElectionConfig::with_lease_duration(Duration::from_millis(600))?
    ///     .to_builder()
    ///     .version_policy(VersionPolicy::PreferNewest)
    ///     .build()?;
    /// let start = |version: &str| {
    ///     Runner::builder(db.clone(), Subspace::from("jobs"))
    ///         .version(version)
    ///         .config(config.clone())
    ///         .start()
    /// };
    /// let old = start("1.4.0")?;
    /// old.elected().await.ok_or("stopped")?;
    /// let new = start("1.5.0")?;
    /// new.elected().await.ok_or("stopped")?; // the newer version took over, cooperatively
    /// assert_eq!(old.leader().and_then(|l| l.version), Some(Version::new(1, 5, 0)));
    ///
    /// let bad = start("1.5");
    /// assert!(matches!(bad, Err(BuildError::InvalidVersion { ref version, .. }) if version == "1.5"));
    /// # new.shutdown().await;
    /// # old.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn version(mut self, version: &str) -> Self {
        self.version = Some(version.to_owned());
        self
    }

    /// The payload published in the leader record while this candidate leads (for example,
    /// the address where it serves). At most [`MAX_PAYLOAD_BYTES`](crate::MAX_PAYLOAD_BYTES).
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(payload.into());
        self
    }

    /// The metadata stored in the candidate's registration. At most
    /// [`MAX_METADATA_BYTES`](crate::MAX_METADATA_BYTES).
    pub fn metadata(mut self, metadata: impl Into<Vec<u8>>) -> Self {
        self.metadata = Some(metadata.into());
        self
    }

    /// The configuration the election is created with if it does not exist yet (default:
    /// [`ElectionConfig::default`]). An existing election keeps its stored configuration,
    /// which the runner follows.
    pub fn config(mut self, config: ElectionConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// The local monotonic clock (default [`TokioClock`](crate::TokioClock), which follows tokio's paused time in
    /// tests). It must advance with tokio's timers: the runner sleeps with them.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Seeds the heartbeat jitter (default: drawn from the operating system).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// What to do after losing leadership (default [`OnLoss::Recampaign`]).
    pub fn on_loss(mut self, on_loss: OnLoss) -> Self {
        self.on_loss = on_loss;
        self
    }

    /// Callbacks for elections, stops, leader changes and handover requests.
    pub fn callbacks(mut self, callbacks: impl ElectionCallbacks) -> Self {
        self.callbacks = Some(Arc::new(callbacks));
        self
    }

    /// How long the runner waits for guarded tasks to end after a leadership ends, before it
    /// competes again or leaves (default: one heartbeat).
    pub fn stop_timeout(mut self, timeout: Duration) -> Self {
        self.stop_timeout = Some(timeout);
        self
    }

    /// How many leader changes a slow [`subscribe`](Runner::subscribe)r may fall behind
    /// before it misses some (default [`DEFAULT_EVENT_CAPACITY`]).
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// The `election` label on metrics and the `election` field of log spans (default: the
    /// subspace, printable).
    pub fn election_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// A **readiness** check (docs/design.md §13.5): can this host lead (its database reachable, its
    /// disk writable). It runs on every candidate, leader and followers alike, every
    /// `settings.interval()`, beside the election (never inside its transactions); an answer
    /// later than `settings.timeout()` is a failure (the check's future is dropped). The
    /// candidate is not eligible until its first answer passes, nor after `fall` consecutive
    /// failures, until `rise` consecutive passes: an ineligible candidate never campaigns,
    /// and an ineligible leader hands over to the best live eligible candidate (see
    /// [`unhealthy_policy`](Self::unhealthy_policy) for when none is).
    ///
    /// The check must not block its thread: wrap blocking work in
    /// `tokio::task::spawn_blocking`. Do not check the leader's work here (followers have
    /// none, and would all be ineligible): that is [`leader_health_check`](Self::leader_health_check).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fdb_leader_election::runner::{CheckSettings, Runner};
    /// use fdb_leader_election::{ElectionConfig, MemDb};
    /// use fdb_leader_election::Subspace;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = ElectionConfig::with_lease_duration(Duration::from_millis(600))?;
    /// let every_100ms = CheckSettings::new(Duration::from_millis(100), Duration::from_millis(50), 2, 1)?;
    /// let runner = Runner::builder(MemDb::new(), Subspace::from("jobs"))
    ///     .config(config)
    ///     .readiness_check(every_100ms, || async {
    ///         // e.g. a ping of this host's database
    ///         Err::<(), _>("database unreachable".to_owned())
    ///     })
    ///     .start()?;
    /// tokio::time::sleep(Duration::from_secs(2)).await;
    /// assert!(!runner.is_leader());
    /// assert_eq!(runner.eligibility().reason(), Some("not ready: database unreachable"));
    /// # runner.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn readiness_check<F, Fut>(mut self, settings: CheckSettings, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.checks.readiness = Some(Check::new(settings, check));
        self
    }

    /// A **leader health** check (docs/design.md §13.5): is the leader's work healthy (the service
    /// it runs while leading answers). It runs only while this candidate leads, first one
    /// `settings.interval()` after the leadership began, beside the election; an answer later
    /// than `settings.timeout()` is a failure. After `fall` consecutive failures the leader is
    /// not eligible: it stops its guarded work (the guard is closed, then cancelled, at most
    /// the handover grace) and hands over in one commit to the best live eligible candidate,
    /// then stays ineligible for the [cool-down](Self::health_cool_down). A follower is never
    /// judged by it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fdb_leader_election::runner::{CheckSettings, Runner, StopReason};
    /// use fdb_leader_election::{ElectionConfig, MemDb};
    /// use fdb_leader_election::Subspace;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let db = MemDb::new();
    /// let config = ElectionConfig::with_lease_duration(Duration::from_millis(600))?;
    /// let settings = CheckSettings::new(Duration::from_millis(100), Duration::from_millis(50), 2, 1)?;
    /// let start = |name: &str, healthy: bool| {
    ///     Runner::builder(db.clone(), Subspace::from("jobs"))
    ///         .label(name)
    ///         .config(config.clone())
    ///         .leader_health_check(settings, move || async move {
    ///             if healthy { Ok(()) } else { Err("the service does not answer".to_owned()) }
    ///         })
    ///         .start()
    /// };
    /// let sick = start("sick", false)?;
    /// let guard = sick.elected().await.ok_or("stopped")?;
    /// let well = start("well", true)?;
    /// let guard_well = well.elected().await.ok_or("stopped")?; // handed over to it
    /// assert!(matches!(guard.stop_reason(), Some(StopReason::Ineligible { .. })));
    /// assert!(guard_well.ballot() > guard.ballot());
    /// # well.shutdown().await;
    /// # sick.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn leader_health_check<F, Fut>(mut self, settings: CheckSettings, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.checks.leader = Some(Check::new(settings, check));
        self
    }

    /// A readiness check already built (the sharded runner gives its coordinator runner the
    /// member's).
    pub(crate) fn with_readiness(mut self, check: Check) -> Self {
        self.checks.readiness = Some(check);
        self
    }

    /// How long a leader that stepped down while its [leader health
    /// check](Self::leader_health_check) failed stays ineligible, so leadership does not flap
    /// between two sick processes (default: one lease of the stored configuration). At most
    /// [`MAX_DURATION`](crate::MAX_DURATION).
    pub fn health_cool_down(mut self, cool_down: Duration) -> Self {
        self.checks.cool_down = Some(cool_down);
        self
    }

    /// What this candidate does when it leads, is not eligible, and no live candidate is
    /// (default [`UnhealthyPolicy::Hold`]: keep leading and hand over once one is; `Release`
    /// writes an unreserved vacancy anyway). See [`Candidate::set_unhealthy_policy`].
    pub fn unhealthy_policy(mut self, policy: UnhealthyPolicy) -> Self {
        self.unhealthy = Some(policy);
        self
    }
}

impl Runner {
    /// A builder for a candidate competing in the election under `subspace`.
    pub fn builder<D: ElectionDatabase>(db: D, subspace: Subspace) -> RunnerBuilder<D> {
        RunnerBuilder::new(db, subspace, false)
    }

    /// A builder for an observer of the election under `subspace`: it never registers or
    /// competes, and follows the leader (and its payload) through watches, with polling as
    /// the fallback. It reports a leader as gone once it has seen its record unchanged for a
    /// full lease.
    pub fn observer<D: ElectionDatabase>(db: D, subspace: Subspace) -> RunnerBuilder<D> {
        RunnerBuilder::new(db, subspace, true)
    }
}
