//! The runner's explicit state and its health check.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::LocalInstant;
use crate::core::runner::RunnerState;

/// Why the health check fails.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HealthProblem {
    /// This process believes it leads but has not renewed within the lease: its runner is
    /// stuck (a renewal never overruns the lease otherwise; the belief ends at the local
    /// deadline).
    #[error(
        "wedged: leading, but the last renewal started {since_renewal:?} ago (lease {lease:?})"
    )]
    Wedged {
        /// Time since the last successful renewal started.
        since_renewal: Duration,
        /// The lease.
        lease: Duration,
    },
    /// The runner task ended without shutting down (it panicked or was aborted).
    #[error("the election runner task died")]
    RunnerDied,
}

#[derive(Debug)]
struct Inner {
    state: RunnerState,
    leading: bool,
    renewed_at: Option<LocalInstant>,
    lease: Duration,
    dead: bool,
}

/// The state shared by the runner task and its handles.
#[derive(Debug)]
pub(crate) struct Status {
    inner: Mutex<Inner>,
    tx: watch::Sender<RunnerState>,
}

impl Status {
    pub(crate) fn new(lease: Duration) -> Self {
        Status {
            inner: Mutex::new(Inner {
                state: RunnerState::NotParticipating,
                leading: false,
                renewed_at: None,
                lease,
                dead: false,
            }),
            tx: watch::Sender::new(RunnerState::NotParticipating),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn state(&self) -> RunnerState {
        self.lock().state
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<RunnerState> {
        self.tx.subscribe()
    }

    /// Sets the state (a stopped runner stays stopped).
    pub(crate) fn set(&self, state: RunnerState) {
        let mut inner = self.lock();
        if inner.state == RunnerState::Stopped || inner.state == state {
            return;
        }
        inner.state = state;
        drop(inner);
        self.tx.send_replace(state);
    }

    /// A renewal (or acquisition) whose attempt started at `at` succeeded, with `lease`.
    pub(crate) fn renewed(&self, at: LocalInstant, lease: Duration) {
        let mut inner = self.lock();
        inner.leading = true;
        inner.renewed_at = Some(at);
        inner.lease = lease;
    }

    pub(crate) fn not_leading(&self) {
        self.lock().leading = false;
    }

    pub(crate) fn mark_dead(&self) {
        self.lock().dead = true;
        self.set(RunnerState::Stopped);
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.lock().dead
    }

    pub(crate) fn check(&self, now: LocalInstant) -> Result<(), HealthProblem> {
        let inner = self.lock();
        if inner.dead {
            return Err(HealthProblem::RunnerDied);
        }
        if inner.leading {
            if let Some(at) = inner.renewed_at {
                let since_renewal = now.saturating_duration_since(at);
                if since_renewal >= inner.lease {
                    return Err(HealthProblem::Wedged {
                        since_renewal,
                        lease: inner.lease,
                    });
                }
            }
        }
        Ok(())
    }
}
