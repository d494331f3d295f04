//! [`Runner`]: the handle of a running election participant (or observer).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use foundationdb_tuple::Subspace;
use tokio::sync::{Notify, broadcast, mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use super::builder::RunnerBuilder;
use super::events::{ElectionCallbacks, LeaderChange, LeaderInfo, Publisher, spawn_dispatcher};
use super::guard::{LeadershipGuard, Work};
use super::health::{HealthProblem, RunnerState, Status};
use super::metrics::Metrics;
use crate::candidate::Candidate;
use crate::clock::Clock;
use crate::database::ElectionDatabase;
use crate::election::{LeaderElection, ResignOutcome};
use crate::error::ElectionError;
use crate::ids::CandidateId;

/// What a runner reports when it has left the election.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Whether this process led at shutdown and resigned: then the vacancy (with the same
    /// ballot) is reserved for the best live candidate, if there was one.
    pub resigned: Option<ResignOutcome>,
    /// Whether the candidate's registration was removed.
    pub unregistered: bool,
    /// Whether every guarded task ended within the stop timeout.
    pub tasks_finished: bool,
    /// The error that prevented resigning or unregistering, if any (the leadership still ended
    /// locally, and the lease lapses by itself).
    pub error: Option<String>,
    /// False if the runner task ended without shutting down (it was aborted or panicked).
    pub clean: bool,
}

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

/// A request from a handle to the runner task.
pub(crate) enum Command {
    Resign(oneshot::Sender<Result<ResignOutcome, ElectionError>>),
}

/// The state shared by the runner task and its handles.
pub(crate) struct Shared {
    pub(crate) status: Status,
    publisher: Mutex<Publisher>,
    pub(crate) guard_tx: watch::Sender<Option<LeadershipGuard>>,
    pub(crate) leader_rx: watch::Receiver<Option<LeaderInfo>>,
    changes: Mutex<Option<broadcast::Sender<LeaderChange>>>,
    pub(crate) report_tx: watch::Sender<Option<ShutdownReport>>,
    /// Woken when guarded work goes idle.
    pub(crate) wake: Arc<Notify>,
    pub(crate) work: Option<Arc<Work>>,
    pub(crate) metrics: Metrics,
    pub(crate) clock: Arc<dyn Clock>,
}

/// The ends of the channels between a handle and the task.
pub(crate) struct Parts {
    pub(crate) commands_tx: mpsc::UnboundedSender<Command>,
    pub(crate) commands_rx: mpsc::UnboundedReceiver<Command>,
    pub(crate) shutdown: CancellationToken,
}

impl Shared {
    pub(crate) fn new(
        name: &str,
        candidate: Option<Candidate>,
        clock: Arc<dyn Clock>,
        lease: std::time::Duration,
        capacity: usize,
        callbacks: Option<Arc<dyn ElectionCallbacks>>,
    ) -> (Arc<Shared>, Parts) {
        let (leader_tx, leader_rx) = watch::channel(None);
        let (changes, _) = broadcast::channel(capacity);
        let notices = callbacks.map(spawn_dispatcher);
        let metrics = Metrics::new(name);
        let publisher = Publisher::new(
            candidate.as_ref().map(|c| c.id().clone()),
            leader_tx,
            changes.clone(),
            notices,
            metrics.clone(),
        );
        let wake = Arc::new(Notify::new());
        let work = candidate
            .as_ref()
            .map(|c| Arc::new(Work::new(c.clone(), Arc::clone(&wake))));
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            status: Status::new(lease),
            publisher: Mutex::new(publisher),
            guard_tx: watch::Sender::new(None),
            leader_rx,
            changes: Mutex::new(Some(changes)),
            report_tx: watch::Sender::new(None),
            wake,
            work,
            metrics,
            clock,
        });
        let parts = Parts {
            commands_tx,
            commands_rx,
            shutdown: CancellationToken::new(),
        };
        (shared, parts)
    }

    pub(crate) fn publisher(&self) -> MutexGuard<'_, Publisher> {
        self.publisher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A receiver of the change stream (already closed once the runner stopped).
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<LeaderChange> {
        let changes = self.changes.lock().unwrap_or_else(PoisonError::into_inner);
        match changes.as_ref() {
            Some(tx) => tx.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    /// Ends the change stream and the callbacks: the runner stopped.
    pub(crate) fn close(&self) {
        self.publisher().close();
        self.changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    pub(crate) fn guard(&self) -> Option<LeadershipGuard> {
        self.guard_tx.borrow().clone()
    }
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
/// use foundationdb_tuple::Subspace;
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
    commands: mpsc::UnboundedSender<Command>,
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

    pub(crate) fn new(
        shared: Arc<Shared>,
        candidate: Option<Candidate>,
        election: LeaderElection,
        name: String,
        commands: mpsc::UnboundedSender<Command>,
        shutdown: CancellationToken,
        abort: AbortHandle,
    ) -> Self {
        Runner {
            inner: Arc::new(HandleInner {
                shared,
                candidate,
                election,
                name,
                commands,
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
    /// [event capacity](RunnerBuilder::event_capacity) behind gets `RecvError::Lagged` and
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
            .commands
            .send(Command::Resign(tx))
            .map_err(|_| RunnerError::Stopped)?;
        self.inner.shared.wake.notify_one();
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
        self.inner.abort.abort();
        // The task ends at its next poll; the leadership ends now.
        if let Some(guard) = self.inner.shared.guard() {
            guard.revoke(super::events::StopReason::RunnerStopped);
        }
    }
}
