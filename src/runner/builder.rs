//! [`RunnerBuilder`]: the validated settings of a runner, and how it starts.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use foundationdb_tuple::Subspace;
use rand::TryRngCore;
use tracing::Instrument;

use super::checks::{Check, Checks, HealthTask};
use super::events::ElectionCallbacks;
use super::executor::{Executor, Setup};
use super::handle::Runner;
use super::shared::Shared;
use crate::candidate::Candidate;
use crate::clock::{Clock, TokioClock};
use crate::config::{ElectionConfig, MAX_DURATION};
use crate::core::UnhealthyPolicy;
use crate::core::health::CheckSettings;
use crate::core::runner::{Machine, OnLoss, Settings};
use crate::election::LeaderElection;
use crate::error::{ElectionError, printable_key};
use crate::ids::{CandidateId, Priority};
use crate::store::database::ElectionDatabase;

/// A runner setting that was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The candidate could not be built (an empty or oversized label, payload or metadata),
    /// or the [`Candidate`] given already takes part in another election.
    #[error("invalid candidate setting")]
    Candidate(#[source] ElectionError),
    /// Two settings contradict each other.
    #[error("{setting} cannot be combined with {with}")]
    Conflicting {
        /// The setting.
        setting: &'static str,
        /// The setting it contradicts.
        with: &'static str,
    },
    /// The leader-change channel needs room for at least one change.
    #[error("event_capacity must be at least 1")]
    ZeroEventCapacity,
    /// The stop timeout must be between zero and [`MAX_DURATION`].
    #[error("stop_timeout ({0:?}) must be at most {MAX_DURATION:?}")]
    StopTimeoutTooLong(Duration),
    /// The health checks' cool-down must be at most [`MAX_DURATION`].
    #[error("health_cool_down ({0:?}) must be at most {MAX_DURATION:?}")]
    CoolDownTooLong(Duration),
    /// `start` was called outside a tokio runtime.
    #[error("the runner must be started within a tokio runtime")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
    /// The version given to [`RunnerBuilder::version`] (or
    /// [`ShardedRunnerBuilder::version`](crate::shard::ShardedRunnerBuilder::version)) is not a
    /// semantic version.
    #[error(
        "version {version:?} is not a semantic version: expected MAJOR.MINOR.PATCH, e.g. 1.5.0 \
         (optionally -PRERELEASE and +BUILD)"
    )]
    #[non_exhaustive]
    InvalidVersion {
        /// The string given.
        version: String,
        /// Why the `semver` crate refused it.
        #[source]
        source: semver::Error,
    },
}

/// `version` parsed as a semantic version (docs/design.md §14.1), or [`BuildError::InvalidVersion`].
pub(crate) fn parse_version(version: &str) -> Result<semver::Version, BuildError> {
    semver::Version::parse(version).map_err(|source| BuildError::InvalidVersion {
        version: version.to_owned(),
        source,
    })
}

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
    /// [`BuildError::InvalidVersion`].
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

    /// The local monotonic clock (default [`TokioClock`], which follows tokio's paused time in
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
    /// [`MAX_DURATION`].
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

    fn check(&self) -> Result<(), BuildError> {
        let conflict = |setting, with| Err(BuildError::Conflicting { setting, with });
        if self.observe_only {
            for (set, name) in [
                (self.label.is_some(), "label"),
                (self.id.is_some(), "candidate_id"),
                (self.candidate.is_some(), "candidate"),
                (self.priority.is_some(), "priority"),
                (self.payload.is_some(), "payload"),
                (self.metadata.is_some(), "metadata"),
                (self.checks.readiness.is_some(), "readiness_check"),
                (self.checks.leader.is_some(), "leader_health_check"),
                (self.checks.cool_down.is_some(), "health_cool_down"),
                (self.unhealthy.is_some(), "unhealthy_policy"),
                (self.version.is_some(), "version"),
            ] {
                if set {
                    return conflict(name, "an observer");
                }
            }
        }
        if self.candidate.is_some() {
            for (set, name) in [
                (self.label.is_some(), "label"),
                (self.id.is_some(), "candidate_id"),
                (self.priority.is_some(), "priority"),
                (self.payload.is_some(), "payload"),
                (self.metadata.is_some(), "metadata"),
                (self.clock.is_some(), "clock"),
                (self.version.is_some(), "version"),
            ] {
                if set {
                    return conflict(name, "candidate");
                }
            }
        }
        if self.label.is_some() && self.id.is_some() {
            return conflict("label", "candidate_id");
        }
        if self.event_capacity == 0 {
            return Err(BuildError::ZeroEventCapacity);
        }
        if let Some(t) = self.stop_timeout.filter(|t| *t > MAX_DURATION) {
            return Err(BuildError::StopTimeoutTooLong(t));
        }
        if let Some(t) = self.checks.cool_down.filter(|t| *t > MAX_DURATION) {
            return Err(BuildError::CoolDownTooLong(t));
        }
        if let Some(v) = &self.version {
            parse_version(v)?;
        }
        Ok(())
    }

    fn build_candidate(&mut self, clock: &Arc<dyn Clock>) -> Result<Candidate, BuildError> {
        if let Some(c) = self.candidate.take() {
            return Ok(c);
        }
        let id = match (self.id.take(), self.label.take()) {
            (Some(id), _) => id,
            (None, label) => CandidateId::random(label.as_deref().unwrap_or("candidate"))
                .map_err(BuildError::Candidate)?,
        };
        let c = Candidate::with_clock(id, self.priority.unwrap_or_default(), Arc::clone(clock));
        c.set_payload(self.payload.take())
            .map_err(BuildError::Candidate)?;
        c.set_metadata(self.metadata.take())
            .map_err(BuildError::Candidate)?;
        c.set_version(self.version.as_deref().map(parse_version).transpose()?);
        Ok(c)
    }

    /// Validates the settings and starts the runner on the current tokio runtime. The
    /// runner registers (creating the election if needed) and competes until
    /// [`Runner::shutdown`] (or until every handle is dropped, which also shuts it down).
    ///
    /// # Errors
    ///
    /// [`BuildError`] naming the setting that was rejected; nothing was started.
    pub fn start(mut self) -> Result<Runner, BuildError> {
        self.check()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(BuildError::NoRuntime)?;
        let candidate = if self.observe_only {
            None
        } else {
            let clock = self
                .clock
                .clone()
                .unwrap_or_else(|| Arc::new(TokioClock::new()));
            Some(self.build_candidate(&clock)?)
        };
        let clock: Arc<dyn Clock> = match (&candidate, self.clock.take()) {
            (Some(c), _) => Arc::clone(c.clock()),
            (None, Some(clock)) => clock,
            (None, None) => Arc::new(TokioClock::new()),
        };
        let config = self.config.take().unwrap_or_default();
        let name = self
            .name
            .take()
            .unwrap_or_else(|| printable_key(self.subspace.bytes()));
        // The machine's jitter: seeded for reproducible runs, from the OS otherwise.
        let seed = match self.seed {
            Some(seed) => seed,
            None => rand::rngs::OsRng.try_next_u64().unwrap_or_default(),
        };
        let election = LeaderElection::new(self.subspace.clone());
        if let Some(c) = &candidate {
            election.bind(c).map_err(BuildError::Candidate)?;
        }
        // The checks decide the eligibility from the start: a candidate whose readiness has
        // not answered yet is not eligible in its first registration.
        let health = self.checks.health(config.lease_duration());
        if let Some(c) = &candidate {
            if let Some(policy) = self.unhealthy {
                c.set_unhealthy_policy(policy);
            }
            if !self.checks.is_empty() {
                let e = health.eligibility(c.now());
                c.set_eligible(e.is_eligible(), e.reason().unwrap_or_default())
                    .map_err(BuildError::Candidate)?;
            }
        }
        let (shared, parts) = Shared::new(
            &name,
            candidate.clone(),
            clock,
            config.lease_duration(),
            self.event_capacity,
            self.callbacks.take(),
        );
        let stop_timeout = self.stop_timeout;
        let span = match &candidate {
            Some(c) => tracing::info_span!("election", election = %name, candidate = %c.id()),
            None => tracing::info_span!("election", election = %name, observer = true),
        };
        let machine = Machine::new(
            Settings::new(
                candidate.as_ref().map(|c| c.id().clone()),
                config.clone(),
                seed,
            )
            .on_loss(self.on_loss)
            .stop_timeout(stop_timeout),
            shared.clock.now(),
        );
        let executor = Executor::new(Setup {
            db: self.db,
            election: election.clone(),
            me: candidate.clone(),
            clock: Arc::clone(&shared.clock),
            init_config: config,
            machine,
            shared: Arc::clone(&shared),
            requests: parts.requests_rx,
            shutdown: parts.shutdown.clone(),
        });
        if let (Some(c), false) = (&candidate, self.checks.is_empty()) {
            let task = HealthTask {
                checks: std::mem::take(&mut self.checks),
                health,
                candidate: c.clone(),
                shared: Arc::clone(&shared),
            };
            runtime.spawn(task.run().instrument(span.clone()));
        }
        let task = runtime.spawn(executor.run().instrument(span));
        Ok(Runner::new(
            shared,
            candidate,
            election,
            name,
            parts.requests_tx,
            parts.shutdown,
            task.abort_handle(),
        ))
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
