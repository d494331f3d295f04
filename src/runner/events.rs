//! What the runner tells the application: leader changes (for everyone), and this process's
//! own elections, stops and handover requests (through [`ElectionCallbacks`]).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc, watch};

use super::guard::LeadershipGuard;
use super::metrics::Metrics;
use crate::core::runner::{LeaderChange, LeaderInfo, StopReason};
use crate::ids::{Ballot, CandidateId};
use crate::record::{Eligibility, Named};

/// Callbacks for one runner. Every method has an empty default.
///
/// They are called in order, one at a time, from a task of their own, never from the
/// election loop: a slow callback delays later callbacks, never a renewal. Leadership is
/// already effective (or already over) when they run, so act on the [`LeadershipGuard`],
/// whose cancellation is immediate, rather than on the callback's timing.
///
/// For each guard this process is handed, [`on_elected`](Self::on_elected) is called exactly
/// once and [`on_stopped`](Self::on_stopped) exactly once, after it: one guard per ballot it
/// wins, and a fresh one of the same ballot after a handover withdrawn while it held
/// ([`StopReason::HandoverWithdrawn`](super::StopReason::HandoverWithdrawn) ends the first).
pub trait ElectionCallbacks: Send + Sync + 'static {
    /// This process became leader.
    fn on_elected(&self, guard: &LeadershipGuard) {
        let _ = guard;
    }

    /// This process's leadership of `ballot` ended.
    fn on_stopped(&self, ballot: Ballot, reason: &StopReason) {
        let _ = (ballot, reason);
    }

    /// The leader changed (for every runner, followers and observers included).
    fn on_leader_changed(&self, change: &LeaderChange) {
        let _ = change;
    }

    /// A higher-priority candidate asked this leader to hand over. The runner accepts no new
    /// guarded work from now on, and steps down once the guarded work in flight is done (or
    /// the configured `handover_grace` has passed).
    fn on_handover_requested(&self, requester: &Named, guard: &LeadershipGuard) {
        let _ = (requester, guard);
    }

    /// An operator asked this leader to step down
    /// ([`LeaderElection::request_resign`](crate::LeaderElection::request_resign)), giving
    /// `operator` as its id. As for a handover, the runner accepts no new guarded work, and
    /// steps down (reserving the vacancy for the best live candidate) once the work in flight
    /// is done or the grace has passed.
    fn on_operator_request(&self, operator: &CandidateId, guard: &LeadershipGuard) {
        let _ = (operator, guard);
    }

    /// This candidate's eligibility to lead changed (docs/design.md §13): its health checks
    /// ([`RunnerBuilder::readiness_check`](super::RunnerBuilder::readiness_check),
    /// [`leader_health_check`](super::RunnerBuilder::leader_health_check)) or an operator's
    /// mark. An ineligible leader hands over to the best live eligible candidate (its guard is
    /// closed, then cancelled, as for a handover); an ineligible follower never campaigns.
    fn on_eligibility_changed(&self, eligibility: &Eligibility) {
        let _ = eligibility;
    }
}

/// One callback to deliver.
pub(crate) enum Notice {
    Elected(LeadershipGuard),
    Stopped(Ballot, StopReason),
    Changed(LeaderChange),
    HandoverRequested(Named, LeadershipGuard),
    OperatorRequest(CandidateId, LeadershipGuard),
    EligibilityChanged(Eligibility),
}

/// Starts the task that delivers callbacks, in order. It ends when the sender is dropped.
pub(crate) fn spawn_dispatcher(
    callbacks: Arc<dyn ElectionCallbacks>,
) -> mpsc::UnboundedSender<Notice> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Notice>();
    tokio::spawn(async move {
        while let Some(notice) = rx.recv().await {
            let cb = &*callbacks;
            let outcome = catch_unwind(AssertUnwindSafe(|| match &notice {
                Notice::Elected(guard) => cb.on_elected(guard),
                Notice::Stopped(ballot, reason) => cb.on_stopped(*ballot, reason),
                Notice::Changed(change) => cb.on_leader_changed(change),
                Notice::HandoverRequested(by, guard) => cb.on_handover_requested(by, guard),
                Notice::OperatorRequest(by, guard) => cb.on_operator_request(by, guard),
                Notice::EligibilityChanged(e) => cb.on_eligibility_changed(e),
            }));
            if outcome.is_err() {
                tracing::error!(
                    "an election callback panicked; later callbacks are still delivered"
                );
            }
        }
    });
    tx
}

/// The channels that publish leader changes: the current leader, the change stream, and the
/// callbacks. What changed, and why, is the machine's decision ([`LeaderView`]).
///
/// [`LeaderView`]: crate::core::runner::LeaderView
pub(crate) struct Channels {
    leader_tx: watch::Sender<Option<LeaderInfo>>,
    changes: Option<broadcast::Sender<LeaderChange>>,
    notices: Option<mpsc::UnboundedSender<Notice>>,
    metrics: Metrics,
}

impl Channels {
    pub(crate) fn new(
        leader_tx: watch::Sender<Option<LeaderInfo>>,
        changes: broadcast::Sender<LeaderChange>,
        notices: Option<mpsc::UnboundedSender<Notice>>,
        metrics: Metrics,
    ) -> Self {
        Channels {
            leader_tx,
            changes: Some(changes),
            notices,
            metrics,
        }
    }

    /// Closes the change stream and the callbacks (the runner stopped): subscribers see the
    /// end of the stream once they have received every change.
    pub(crate) fn close(&mut self) {
        self.changes = None;
        self.notices = None;
    }

    /// Delivers a callback (dropped when no callbacks are installed).
    pub(crate) fn notify(&self, notice: Notice) {
        if let Some(tx) = self.notices.as_ref() {
            // The dispatcher ends only when this sender is dropped.
            let _ = tx.send(notice);
        }
    }

    /// Publishes a leader change everywhere: the current leader, the stream, the callbacks,
    /// the metrics and the log.
    pub(crate) fn publish(&self, change: LeaderChange) {
        tracing::info!(
            old_leader = change.old.as_ref().map(|l| tracing::field::display(&l.id)),
            old_ballot = change.old.as_ref().map(|l| l.ballot.get()),
            new_leader = change.new.as_ref().map(|l| tracing::field::display(&l.id)),
            ballot = change.new.as_ref().map(|l| l.ballot.get()),
            reason = change.reason.as_str(),
            "leader changed"
        );
        self.metrics.leader_change(change.reason.as_str());
        self.leader_tx.send_replace(change.new.clone());
        if let Some(changes) = self.changes.as_ref() {
            // No receiver is not an error: nobody subscribed.
            let _ = changes.send(change.clone());
        }
        self.notify(Notice::Changed(change));
    }
}
