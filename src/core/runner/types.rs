//! What the runner reports: its state, why a leadership ended, and leader changes. Plain data,
//! decided by the [machine](super::Machine) and published by the tokio runner.

use std::fmt;

use crate::ids::{Ballot, CandidateId, Priority};
use crate::record::LeaderRecord;

/// What a runner is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunnerState {
    /// Not competing: an observer, or a candidate not registered yet.
    NotParticipating,
    /// Competing, and another candidate leads (or nobody does yet).
    Follower,
    /// This process leads.
    Leader,
    /// The last attempt failed (for example, the database is unreachable); the runner keeps
    /// retrying. A leader whose lease is still valid stays [`Leader`](Self::Leader).
    Error,
    /// The runner has stopped (shut down, exited after a loss, or its task ended).
    Stopped,
}

impl RunnerState {
    /// A short, stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerState::NotParticipating => "not_participating",
            RunnerState::Follower => "follower",
            RunnerState::Leader => "leader",
            RunnerState::Error => "error",
            RunnerState::Stopped => "stopped",
        }
    }
}

impl fmt::Display for RunnerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a runner does after losing leadership (other than by resigning or shutting down).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnLoss {
    /// Keep competing (the default). The runner first waits (within the stop timeout) for the
    /// lost leadership's guarded tasks to end.
    #[default]
    Recampaign,
    /// Leave the election (wait for guarded tasks, unregister) and stop: the runner's state
    /// becomes [`Stopped`](RunnerState::Stopped). For services that prefer to restart after
    /// losing leadership.
    Exit,
}

/// Why this process's leadership ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// It handed over: to a higher-priority candidate that asked for it, or (for an operator's
    /// request) to the best live candidate.
    HandedOver {
        /// The candidate the vacancy was reserved for.
        to: Option<CandidateId>,
    },
    /// The application asked it to resign (`Runner::resign`).
    Resigned,
    /// Another candidate owns the record now (this process's lease had lapsed, or an operator
    /// forced the vacancy).
    Superseded,
    /// The lease ran out locally before a renewal succeeded (for example, the database was
    /// unreachable).
    LeaseExpired,
    /// Elections were disabled in the configuration.
    ElectionsDisabled,
    /// It was not eligible to lead (its health check failed, or an operator excluded it) and
    /// handed over to the best live eligible candidate (`to`), or let go (`None`, under the
    /// `release` policy with nobody eligible).
    Ineligible {
        /// The candidate the vacancy was reserved for.
        to: Option<CandidateId>,
    },
    /// Its guard had closed for a handover that can no longer happen: it was not eligible,
    /// and the successor it drained its work for died or became ineligible, so it keeps the
    /// leadership (the `hold` policy, nobody live eligible). This guard ends once its work is
    /// idle (at most the grace), and a fresh guard of the same ballot, taking new work,
    /// follows at once: the leadership itself never stopped.
    HandoverWithdrawn,
    /// Its guard had closed for a handover or a step-down that no longer applies (the
    /// requester unregistered or died, preemption was turned off, or it became eligible again
    /// while it drained), and it stepped down anyway once its work was idle or the grace had
    /// passed, reserving for the best live candidate: no leader keeps a closed guard
    /// (docs/design.md §10.6). The application did not ask for it.
    SteppedDown,
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
            StopReason::Ineligible { .. } => "ineligible",
            StopReason::HandoverWithdrawn => "handover_withdrawn",
            StopReason::SteppedDown => "stepped_down",
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

/// A leader as this process knows it: the owner named in the leader record.
///
/// Its `Debug` shows a payload that is UTF-8 as text (an address reads as one), any other as
/// bytes.
#[derive(Clone, PartialEq, Eq)]
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
    /// The version the leader runs, as its record names it (docs/design.md §14.1: written when
    /// it acquires and at each renewal, from its registration), if it registered one
    /// ([`RunnerBuilder::version`](crate::runner::RunnerBuilder::version)).
    pub version: Option<semver::Version>,
}

impl LeaderInfo {
    pub(crate) fn of(record: &LeaderRecord) -> Option<Self> {
        record.owner().map(|owner| LeaderInfo {
            ballot: record.ballot(),
            id: owner.id().clone(),
            priority: owner.priority(),
            payload: record.payload().map(<[u8]>::to_vec),
            version: record.leader_version().cloned(),
        })
    }

    /// The payload as UTF-8 text, if it is.
    pub fn payload_str(&self) -> Option<&str> {
        self.payload
            .as_deref()
            .and_then(|p| std::str::from_utf8(p).ok())
    }
}

impl std::fmt::Debug for LeaderInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        /// The payload as text when it is UTF-8, else as its bytes.
        struct Payload<'a>(&'a [u8]);
        impl std::fmt::Debug for Payload<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match std::str::from_utf8(self.0) {
                    Ok(text) => text.fmt(f),
                    Err(_) => self.0.fmt(f),
                }
            }
        }
        /// A version as it is written (`1.5.0`).
        struct Shown<'a>(&'a semver::Version);
        impl std::fmt::Debug for Shown<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(self.0, f)
            }
        }
        f.debug_struct("LeaderInfo")
            .field("ballot", &self.ballot)
            .field("id", &self.id)
            .field("priority", &self.priority)
            .field("payload", &self.payload.as_deref().map(Payload))
            .field("version", &self.version.as_ref().map(Shown))
            .finish()
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
    /// An operator forced the leader out (`force_vacate`): the record is vacant at a new
    /// ballot, and no candidate takes over before a full lease.
    ForcedVacant {
        /// The id the operator gave.
        operator: CandidateId,
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
            ChangeReason::ForcedVacant { .. } => "forced_vacant",
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
