//! Validating a [`RunnerBuilder`]'s settings, and starting the runner they describe.

use std::sync::Arc;
use std::time::Duration;

use rand::TryRngCore;
use tracing::Instrument;

use super::RunnerBuilder;
use crate::candidate::Candidate;
use crate::clock::{Clock, TokioClock};
use crate::config::MAX_DURATION;
use crate::core::runner::{Machine, Settings};
use crate::election::LeaderElection;
use crate::error::{ElectionError, printable_key};
use crate::ids::CandidateId;
use crate::runner::checks::HealthTask;
use crate::runner::executor::{Executor, Setup};
use crate::runner::handle::Runner;
use crate::runner::shared::Shared;
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

impl<D: ElectionDatabase> RunnerBuilder<D> {
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
