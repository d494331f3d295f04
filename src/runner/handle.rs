//! [`Runner`]: the handle of a running election participant (or observer).

use std::fmt;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use super::guard::LeadershipGuard;
use super::health::HealthProblem;
use super::shared::{Request, Shared, ShutdownReport};
use crate::candidate::Candidate;
use crate::core::runner::{LeaderChange, LeaderInfo, RunnerState, StopReason};
use crate::election::{LeaderElection, ResignOutcome};
use crate::error::ElectionError;
use crate::ids::CandidateId;
use crate::record::Eligibility;

/// Why a runner request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// The runner has stopped.
    #[error("the election runner has stopped")]
    Stopped,
    /// An observer does not compete.
    #[error("an observer does not compete")]
    Observer,
    /// The election operation failed.
    #[error("election operation failed")]
    Election(#[from] ElectionError),
}

/// A running election participant (or observer): the handle an application keeps.
///
/// Cheap to clone. When the last handle is dropped the runner shuts down gracefully in the
/// background; call [`shutdown`](Self::shutdown) to wait for it.
///
/// ```
/// use std::time::Duration;
/// use fdb_leader_election::runner::Runner;
/// use fdb_leader_election::{ElectionConfig, MemDb, Priority};
/// use fdb_leader_election::Subspace;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let db = MemDb::new();
/// let config = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
/// let runner = Runner::builder(db, Subspace::from("scheduler"))
///     .label("scheduler-a")
///     .priority(Priority::new(1))
///     .payload("10.0.0.1:7000")
///     .config(config)
///     .start()?;
///
/// // Wait until elected, then do leader work under the guard.
/// let guard = runner.elected().await.ok_or("runner stopped")?;
/// let token = guard.fencing_token(); // carry it with every leader-only write
/// let work = guard.spawn(async move { format!("work fenced by ballot {token}") });
/// assert_eq!(work.await?.as_deref(), Some("work fenced by ballot 1"));
///
/// // Everyone, followers included, knows the leader and its payload.
/// let leader = runner.leader().ok_or("no leader")?;
/// assert_eq!(leader.payload_str(), Some("10.0.0.1:7000"));
///
/// // Graceful shutdown: stop leader work, resign (reserving for the best live candidate),
/// // unregister.
/// let report = runner.shutdown().await;
/// assert!(guard.is_cancelled() && report.unregistered && report.resigned.is_some());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Runner {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    shared: Arc<Shared>,
    candidate: Option<Candidate>,
    election: LeaderElection,
    name: String,
    requests: mpsc::UnboundedSender<Request>,
    shutdown: CancellationToken,
    abort: AbortHandle,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl fmt::Debug for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runner")
            .field("election", &self.inner.name)
            .field("candidate", &self.id())
            .field("state", &self.state())
            .field("leader", &self.leader())
            .finish_non_exhaustive()
    }
}

impl Runner {
    pub(crate) fn new(
        shared: Arc<Shared>,
        candidate: Option<Candidate>,
        election: LeaderElection,
        name: String,
        requests: mpsc::UnboundedSender<Request>,
        shutdown: CancellationToken,
        abort: AbortHandle,
    ) -> Self {
        Runner {
            inner: Arc::new(HandleInner {
                shared,
                candidate,
                election,
                name,
                requests,
                shutdown,
                abort,
            }),
        }
    }

    /// The candidate this runner drives (`None` for an observer). Change its priority or
    /// payload through it; the next cycle writes them.
    pub fn candidate(&self) -> Option<&Candidate> {
        self.inner.candidate.as_ref()
    }

    /// The candidate's id (`None` for an observer).
    pub fn id(&self) -> Option<&CandidateId> {
        self.inner.candidate.as_ref().map(Candidate::id)
    }

    /// The election this runner takes part in.
    pub fn election(&self) -> &LeaderElection {
        &self.inner.election
    }

    /// What the runner is doing now.
    pub fn state(&self) -> RunnerState {
        self.inner.shared.status.state()
    }

    /// The state, as a channel that reports every change.
    pub fn state_updates(&self) -> watch::Receiver<RunnerState> {
        self.inner.shared.status.subscribe()
    }

    /// The health check: fails only if this process believes it leads but has not renewed
    /// within the lease (a wedged runner), or if the runner task died. Never fails for being a
    /// follower, an observer, or for having been shut down.
    ///
    /// # Errors
    ///
    /// The [`HealthProblem`].
    pub fn health(&self) -> Result<(), HealthProblem> {
        let shared = &self.inner.shared;
        shared.status.check(shared.clock.now())
    }

    /// Whether this candidate is eligible to lead now, and if not why (docs/design.md §13): its
    /// [health checks](super::RunnerBuilder::readiness_check) (or
    /// [`Candidate::set_eligible`]), unless an operator's mark read by its last cycle
    /// excludes it. Always eligible for an observer.
    pub fn eligibility(&self) -> Eligibility {
        self.inner.shared.eligibility_tx.borrow().clone()
    }

    /// The eligibility, as a channel that reports every change.
    pub fn eligibility_updates(&self) -> watch::Receiver<Eligibility> {
        self.inner.shared.eligibility_tx.subscribe()
    }

    /// The leader as this runner knows it now (`None`: vacant, unknown, or lapsed).
    pub fn leader(&self) -> Option<LeaderInfo> {
        self.inner.shared.leader_rx.borrow().clone()
    }

    /// The current leader, as a channel that reports every change.
    pub fn leader_updates(&self) -> watch::Receiver<Option<LeaderInfo>> {
        self.inner.shared.leader_rx.clone()
    }

    /// The stream of leader changes from now on. It ends (`RecvError::Closed`) after the
    /// runner stops; a receiver that falls more than the
    /// [event capacity](super::RunnerBuilder::event_capacity) behind gets `RecvError::Lagged` and
    /// should read [`leader`](Self::leader) to resynchronise.
    pub fn subscribe(&self) -> broadcast::Receiver<LeaderChange> {
        self.inner.shared.subscribe()
    }

    /// The current leadership, if this process leads.
    pub fn leadership(&self) -> Option<LeadershipGuard> {
        self.inner.shared.guard().filter(LeadershipGuard::is_valid)
    }

    /// Whether this process leads now.
    pub fn is_leader(&self) -> bool {
        self.leadership().is_some()
    }

    /// Waits until this process leads, and returns its leadership; `None` once the runner has
    /// stopped (or for an observer, at once).
    pub async fn elected(&self) -> Option<LeadershipGuard> {
        self.inner.candidate.as_ref()?;
        let shared = &self.inner.shared;
        let mut guards = shared.guard_tx.subscribe();
        let mut states = shared.status.subscribe();
        loop {
            let guard = guards.borrow_and_update().clone();
            if let Some(guard) = guard.filter(LeadershipGuard::is_valid) {
                return Some(guard);
            }
            if *states.borrow_and_update() == RunnerState::Stopped {
                return None;
            }
            tokio::select! {
                r = guards.changed() => r.ok()?,
                r = states.changed() => r.ok()?,
            }
        }
    }

    /// Resigns if this process leads: stops its guarded work, then writes a vacancy (same
    /// ballot) reserved for the best live candidate. The runner keeps competing; if no other
    /// live candidate exists, it may be elected again (with a higher ballot).
    ///
    /// # Errors
    ///
    /// [`RunnerError::Observer`], [`RunnerError::Stopped`], or the election error.
    pub async fn resign(&self) -> Result<ResignOutcome, RunnerError> {
        if self.inner.candidate.is_none() {
            return Err(RunnerError::Observer);
        }
        let (tx, rx) = oneshot::channel();
        self.inner
            .requests
            .send(Request::Resign(tx))
            .map_err(|_| RunnerError::Stopped)?;
        Ok(rx.await.map_err(|_| RunnerError::Stopped)??)
    }

    /// Shuts the runner down and waits for it: stops new leader work, cancels the guard and
    /// waits (within the stop timeout) for guarded tasks, then resigns (reserving the vacancy
    /// for the best live candidate, so leadership moves in one commit) and unregisters, in one
    /// transaction. Idempotent: later calls return the same report.
    pub async fn shutdown(&self) -> ShutdownReport {
        self.inner.shutdown.cancel();
        let mut reports = self.inner.shared.report_tx.subscribe();
        let mut states = self.inner.shared.status.subscribe();
        loop {
            if let Some(report) = reports.borrow_and_update().clone() {
                return report;
            }
            if self.inner.shared.status.is_dead() || self.inner.abort.is_finished() {
                return reports.borrow().clone().unwrap_or_default();
            }
            tokio::select! {
                r = reports.changed() => if r.is_err() { return ShutdownReport::default() },
                r = states.changed() => if r.is_err() { return ShutdownReport::default() },
            }
        }
    }

    /// Stops the runner task at once, as if the process had crashed: no resignation, no
    /// unregistration (the lease lapses, the registration goes stale). The guard is cancelled
    /// and [`health`](Self::health) reports [`HealthProblem::RunnerDied`]. For tests and demos.
    pub fn abort(&self) {
        self.inner
            .shared
            .aborted
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.abort.abort();
        // The task ends at its next poll; the leadership ends now.
        if let Some(guard) = self.inner.shared.guard() {
            guard.revoke(StopReason::RunnerStopped);
        }
    }
}
