//! The state a runner's task shares with its handles, and the requests handles send it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Notify, broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::events::{Channels, ElectionCallbacks, spawn_dispatcher};
use super::guard::{LeadershipGuard, Work};
use super::health::Status;
use super::metrics::Metrics;
use crate::candidate::Candidate;
use crate::clock::Clock;
use crate::core::runner::{LeaderChange, LeaderInfo};
use crate::election::ResignOutcome;
use crate::error::ElectionError;
use crate::record::Eligibility;

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

/// A request from a handle to the runner task.
pub(crate) enum Request {
    Resign(oneshot::Sender<Result<ResignOutcome, ElectionError>>),
}

/// The state shared by the runner task and its handles.
pub(crate) struct Shared {
    pub(crate) status: Status,
    channels: Mutex<Channels>,
    pub(crate) guard_tx: watch::Sender<Option<LeadershipGuard>>,
    pub(crate) leader_rx: watch::Receiver<Option<LeaderInfo>>,
    changes: Mutex<Option<broadcast::Sender<LeaderChange>>>,
    pub(crate) report_tx: watch::Sender<Option<ShutdownReport>>,
    /// Woken when guarded work goes idle.
    pub(crate) wake: Arc<Notify>,
    pub(crate) work: Option<Arc<Work>>,
    pub(crate) metrics: Metrics,
    pub(crate) clock: Arc<dyn Clock>,
    /// Set by [`Runner::abort`](super::Runner::abort): the task's end is deliberate.
    pub(crate) aborted: std::sync::atomic::AtomicBool,
    /// Whether the candidate may lead, as the runner last published it (its own eligibility,
    /// unless an operator's mark excludes it).
    pub(crate) eligibility_tx: watch::Sender<Eligibility>,
    /// Notified by the health checks' task when the candidate's own eligibility changed: the
    /// runner cycles at once.
    pub(crate) eligibility_changed: Notify,
    /// The stored configuration's lease (the default cool-down of the health checks).
    pub(crate) lease_tx: watch::Sender<std::time::Duration>,
}

/// The ends of the channels between a handle and the task.
pub(crate) struct Parts {
    pub(crate) requests_tx: mpsc::UnboundedSender<Request>,
    pub(crate) requests_rx: mpsc::UnboundedReceiver<Request>,
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
        let channels = Channels::new(leader_tx, changes.clone(), notices, metrics.clone());
        let wake = Arc::new(Notify::new());
        let work = candidate
            .as_ref()
            .map(|c| Arc::new(Work::new(c.clone(), Arc::clone(&wake))));
        let (requests_tx, requests_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            status: Status::new(lease),
            channels: Mutex::new(channels),
            guard_tx: watch::Sender::new(None),
            leader_rx,
            changes: Mutex::new(Some(changes)),
            report_tx: watch::Sender::new(None),
            wake,
            work,
            metrics,
            clock,
            aborted: std::sync::atomic::AtomicBool::new(false),
            eligibility_tx: watch::Sender::new(
                candidate
                    .as_ref()
                    .map(Candidate::eligibility)
                    .unwrap_or_default(),
            ),
            eligibility_changed: Notify::new(),
            lease_tx: watch::Sender::new(lease),
        });
        let parts = Parts {
            requests_tx,
            requests_rx,
            shutdown: CancellationToken::new(),
        };
        (shared, parts)
    }

    pub(crate) fn channels(&self) -> MutexGuard<'_, Channels> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
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
        self.channels().close();
        self.changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    pub(crate) fn guard(&self) -> Option<LeadershipGuard> {
        self.guard_tx.borrow().clone()
    }
}
