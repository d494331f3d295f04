//! What the runner tells the application: leader changes (for everyone), and this process's
//! own elections, stops and handover requests (through [`ElectionCallbacks`]).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc, watch};

use super::guard::LeadershipGuard;
use super::metrics::Metrics;
use crate::ids::{Ballot, CandidateId, Priority};
use crate::record::{LeaderRecord, Named};

/// A leader as this process knows it: the owner named in the leader record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderInfo {
    /// The leader's ballot: its term, and the fencing token its work carries.
    pub ballot: Ballot,
    /// The leader.
    pub id: CandidateId,
    /// The leader's priority.
    pub priority: Priority,
    /// The payload the leader publishes (for example, the address where it serves).
    pub payload: Option<Vec<u8>>,
}

impl LeaderInfo {
    fn of(record: &LeaderRecord) -> Option<Self> {
        record.owner().map(|owner| LeaderInfo {
            ballot: record.ballot(),
            id: owner.id().clone(),
            priority: owner.priority(),
            payload: record.payload().map(<[u8]>::to_vec),
        })
    }

    /// The payload as UTF-8 text, if it is.
    pub fn payload_str(&self) -> Option<&str> {
        self.payload
            .as_deref()
            .and_then(|p| std::str::from_utf8(p).ok())
    }
}

/// Why the leader changed, as far as this process observed (a process that misses an
/// intermediate record, for example between two polls, reports the change it saw).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeReason {
    /// The first leader this process saw (or a leader seen again after it was reported gone).
    Discovered,
    /// A candidate filled an unreserved vacancy.
    Acquired,
    /// A candidate filled the vacancy its predecessor reserved for it (a cooperative handover
    /// or a resignation).
    HandedOver,
    /// A new ballot replaced the leader this process last saw: a takeover of a lease that had
    /// lapsed (its leader crashed, or stopped renewing), or a handover whose vacancy this
    /// process did not see.
    Replaced,
    /// The leader stepped down (handover, resignation, shutdown, elections disabled): the
    /// record is vacant, possibly reserved for a successor.
    SteppedDown {
        /// The candidate the vacancy is reserved for, if any.
        reserved_for: Option<CandidateId>,
    },
    /// The leader's lease lapsed: an observer saw the record unchanged for a full lease, or
    /// this process's own lease ran out locally.
    LeaseLapsed,
    /// The same leader published a new payload.
    PayloadChanged,
}

impl ChangeReason {
    /// A short, stable name (used as a metric label and in logs).
    pub fn as_str(&self) -> &'static str {
        match self {
            ChangeReason::Discovered => "discovered",
            ChangeReason::Acquired => "acquired",
            ChangeReason::HandedOver => "handed_over",
            ChangeReason::Replaced => "replaced",
            ChangeReason::SteppedDown { .. } => "stepped_down",
            ChangeReason::LeaseLapsed => "lease_lapsed",
            ChangeReason::PayloadChanged => "payload_changed",
        }
    }
}

/// A change of leader, delivered to every runner (followers and observers included).
///
/// Consecutive changes chain: each one's `old` is the previous one's `new`, and `old != new`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderChange {
    /// The leader before the change (`None`: none known, vacant, or lapsed).
    pub old: Option<LeaderInfo>,
    /// The leader after the change.
    pub new: Option<LeaderInfo>,
    /// Why it changed.
    pub reason: ChangeReason,
}

/// Why this process's leadership ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// It handed over to a higher-priority candidate that asked for it.
    HandedOver {
        /// The candidate the vacancy was reserved for.
        to: Option<CandidateId>,
    },
    /// The application asked it to resign ([`Runner::resign`](super::Runner::resign)).
    Resigned,
    /// Another candidate owns the record now (this process's lease had lapsed).
    Superseded,
    /// The lease ran out locally before a renewal succeeded (for example, the database was
    /// unreachable).
    LeaseExpired,
    /// Elections were disabled in the configuration.
    ElectionsDisabled,
    /// The candidate's registration disappeared (it was evicted as dead).
    Unregistered,
    /// The runner is shutting down.
    Shutdown,
    /// The runner task ended without shutting down (aborted, or its runtime was dropped).
    RunnerStopped,
}

impl StopReason {
    /// A short, stable name (used as a metric label and in logs).
    pub fn as_str(&self) -> &'static str {
        match self {
            StopReason::HandedOver { .. } => "handed_over",
            StopReason::Resigned => "resigned",
            StopReason::Superseded => "superseded",
            StopReason::LeaseExpired => "lease_expired",
            StopReason::ElectionsDisabled => "elections_disabled",
            StopReason::Unregistered => "unregistered",
            StopReason::Shutdown => "shutdown",
            StopReason::RunnerStopped => "runner_stopped",
        }
    }

    /// Whether the application asked for it (resign, shutdown), rather than losing it.
    pub fn is_requested(&self) -> bool {
        matches!(self, StopReason::Resigned | StopReason::Shutdown)
    }
}

/// Callbacks for one runner. Every method has an empty default.
///
/// They are called in order, one at a time, from a task of their own, never from the
/// election loop: a slow callback delays later callbacks, never a renewal. Leadership is
/// already effective (or already over) when they run, so act on the [`LeadershipGuard`],
/// whose cancellation is immediate, rather than on the callback's timing.
///
/// For each ballot this process wins, [`on_elected`](Self::on_elected) is called exactly once
/// and [`on_stopped`](Self::on_stopped) exactly once, after it.
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
}

/// One callback to deliver.
pub(crate) enum Notice {
    Elected(LeadershipGuard),
    Stopped(Ballot, StopReason),
    Changed(LeaderChange),
    HandoverRequested(Named, LeadershipGuard),
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

/// The leader as this process knows it, and the channels that publish its changes.
pub(crate) struct Publisher {
    me: Option<CandidateId>,
    record: Option<LeaderRecord>,
    leader: Option<LeaderInfo>,
    leader_tx: watch::Sender<Option<LeaderInfo>>,
    changes: Option<broadcast::Sender<LeaderChange>>,
    notices: Option<mpsc::UnboundedSender<Notice>>,
    metrics: Metrics,
    /// Set when the leader changed; the runner refreshes the candidate count then.
    pub(crate) changed: bool,
}

impl Publisher {
    pub(crate) fn new(
        me: Option<CandidateId>,
        leader_tx: watch::Sender<Option<LeaderInfo>>,
        changes: broadcast::Sender<LeaderChange>,
        notices: Option<mpsc::UnboundedSender<Notice>>,
        metrics: Metrics,
    ) -> Self {
        Publisher {
            me,
            record: None,
            leader: None,
            leader_tx,
            changes: Some(changes),
            notices,
            metrics,
            changed: false,
        }
    }

    /// The last leader record seen.
    pub(crate) fn record(&self) -> Option<&LeaderRecord> {
        self.record.as_ref()
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

    /// A leader record was read (or written). `leading` is the ballot this process leads, if
    /// any; `lapsed` says the record's owner is known to have lapsed. `fallback` is the reason
    /// reported when this process's own record no longer counts as leading.
    pub(crate) fn observe(
        &mut self,
        record: &LeaderRecord,
        leading: Option<Ballot>,
        lapsed: bool,
        fallback: ChangeReason,
    ) {
        self.observe_written(record, leading, lapsed, fallback, ChangeReason::Discovered);
    }

    /// As [`observe`](Self::observe); `first` is the reason reported when no earlier record
    /// was seen (the writer of the record knows what it did).
    pub(crate) fn observe_written(
        &mut self,
        record: &LeaderRecord,
        leading: Option<Ballot>,
        lapsed: bool,
        fallback: ChangeReason,
        first: ChangeReason,
    ) {
        let own = record
            .owner()
            .is_some_and(|o| Some(o.id()) == self.me.as_ref());
        let new = if lapsed || (own && leading != Some(record.ballot())) {
            None
        } else {
            LeaderInfo::of(record)
        };
        let reason = match (&self.record, &new) {
            _ if new.is_none() && record.owner().is_none() => ChangeReason::SteppedDown {
                reserved_for: record.reservation().map(|r| r.id().clone()),
            },
            (_, None) => {
                if lapsed {
                    ChangeReason::LeaseLapsed
                } else {
                    fallback
                }
            }
            (None, Some(_)) => first,
            (Some(prev), Some(n)) => {
                if n.ballot > prev.ballot() {
                    if prev.reservation().map(Named::id) == Some(&n.id) {
                        ChangeReason::HandedOver
                    } else if prev.owner().is_some() {
                        ChangeReason::Replaced
                    } else {
                        ChangeReason::Acquired
                    }
                } else if self.leader.as_ref().is_some_and(|l| l.id == n.id) {
                    ChangeReason::PayloadChanged
                } else {
                    ChangeReason::Discovered
                }
            }
        };
        self.metrics.ballot.set(u64_to_f64(record.ballot().get()));
        self.record = Some(record.clone());
        self.set(new, reason);
    }

    /// Re-evaluates the last record (after this process's own leadership ended).
    pub(crate) fn refresh(&mut self, leading: Option<Ballot>, fallback: ChangeReason) {
        if let Some(record) = self.record.clone() {
            self.observe(&record, leading, false, fallback);
        }
    }

    fn set(&mut self, new: Option<LeaderInfo>, reason: ChangeReason) {
        if new == self.leader {
            return;
        }
        let old = std::mem::replace(&mut self.leader, new.clone());
        let change = LeaderChange { old, new, reason };
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
        self.changed = true;
    }
}

/// A gauge value (exact below 2^53, which ballots do not reach in practice).
fn u64_to_f64(n: u64) -> f64 {
    n as f64
}
