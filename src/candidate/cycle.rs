//! What one election cycle of a [`Candidate`](super::Candidate) prepared ([`Cycle`]), and
//! what it came to once adopted ([`CycleOutcome`], [`ElectionResult`]).

use std::sync::Arc;

use super::Settle;
use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::core::runner::CycleReport;
use crate::core::{Action, Adoption, Ineligible};
use crate::ids::CandidateId;
use crate::record::{Eligibility, LeaderRecord, LeaderState, Party};

/// The prepared outcome of one election cycle (or claim, or refresh): what the attempt wrote.
///
/// # Commit semantics
///
/// A `Cycle` is only *prepared* state. It becomes true when its transaction commits; pass it
/// to [`Candidate::adopt`](super::Candidate::adopt) then, and not before. Demotions (stepping down for a handover,
/// elections disabled, a lapsed lease) have already taken effect locally when the cycle was
/// decided: belief is lost early and gained late.
///
/// # One cycle per transaction
///
/// While a `Cycle` (or a clone of it) is alive, its transaction is taken to be open, and
/// another cycle of the same candidate fails with
/// [`ElectionError::CycleInProgress`](crate::ElectionError::CycleInProgress): reads inside
/// that transaction return its own uncommitted write, which must never make anyone believe or
/// start timing. Return the `Cycle` from the transaction's closure, then adopt it (after an
/// `Ok` commit) or drop it.
#[derive(Clone, Debug)]
#[must_use = "adopt the cycle with Candidate::adopt after the transaction commits"]
pub struct Cycle {
    pub(crate) candidate: CandidateId,
    pub(crate) _settle: Arc<Settle>,
    pub(crate) action: Action,
    pub(crate) record: LeaderRecord,
    pub(crate) adoption: Option<Adoption>,
    pub(crate) next_action_at: Option<LocalInstant>,
    /// The handover request this leader honoured (stepping down, or draining first).
    pub(crate) honoured: Option<Party>,
    /// This leader is not eligible: it holds, or steps down (now, or once drained).
    pub(crate) ineligible: Option<Ineligible>,
    pub(crate) config: ElectionConfig,
    /// Whether the candidate was eligible, as this attempt judged it.
    pub(crate) eligibility: Eligibility,
    /// The operator's mark this attempt read (eligible: none).
    pub(crate) mark: Eligibility,
}

impl Cycle {
    /// Whether the candidate was eligible to lead, as this attempt judged it: its own
    /// eligibility ([`Candidate::set_eligible`](super::Candidate::set_eligible)) unless an operator's mark excluded it
    /// ([`LeaderElection::set_eligible`](crate::LeaderElection::set_eligible)).
    pub fn eligibility(&self) -> &Eligibility {
        &self.eligibility
    }

    /// What the attempt did to the leader record.
    pub fn action(&self) -> Action {
        self.action
    }

    /// The leader record as this attempt left it (written, or as read).
    pub fn record(&self) -> &LeaderRecord {
        &self.record
    }

    /// The earliest local instant at which the candidate could act without any change to the
    /// record: a runner sleeps until then (or until a watch fires) rather than a full
    /// heartbeat, so a lapsed lease is taken over on time.
    pub fn next_action_at(&self) -> Option<LocalInstant> {
        self.next_action_at
    }

    /// The election's configuration as this attempt read it from the database (the stored
    /// configuration every participant shares), so a driver can follow configuration changes
    /// without reading it again.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }
}

/// A cycle whose commit was confirmed and which was adopted
/// ([`LeaderElection::run_cycle`](crate::LeaderElection::run_cycle)): what it did, the record it
/// left, and what the candidate believes now.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CycleOutcome {
    /// What the cycle did to the leader record.
    pub action: Action,
    /// The leader record as the cycle left it.
    pub record: LeaderRecord,
    /// What the candidate believes after adopting it.
    pub result: ElectionResult,
    /// The earliest local instant (on the candidate's clock) at which the candidate could act
    /// without any change to the record: a follower timing a lease, a leader's minimum tenure
    /// or handover grace ending. Run the next cycle at this instant or one heartbeat from now,
    /// whichever is sooner, and a lapsed lease is taken over on time (as the runner does).
    pub next_action_at: Option<LocalInstant>,
}

impl CycleOutcome {
    /// Whether the candidate leads after this cycle.
    pub fn is_leader(&self) -> bool {
        self.result.is_leader()
    }
}

/// The result of an election cycle, once adopted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElectionResult {
    /// This candidate leads, with this state.
    Leader(LeaderState),
    /// This candidate follows; the record names this leader (which may have crashed), or none.
    Follower(Option<LeaderState>),
}

impl ElectionResult {
    /// Whether this candidate leads.
    pub fn is_leader(&self) -> bool {
        matches!(self, ElectionResult::Leader(_))
    }

    /// The leader named in the record, if any.
    pub fn leader_state(&self) -> Option<&LeaderState> {
        match self {
            ElectionResult::Leader(s) => Some(s),
            ElectionResult::Follower(s) => s.as_ref(),
        }
    }
}

impl CycleReport {
    /// The report of `cycle`, whose commit was confirmed and which was adopted with the
    /// result `adopted`.
    pub fn new(cycle: &Cycle, adopted: &ElectionResult) -> Self {
        CycleReport {
            action: cycle.action(),
            record: cycle.record().clone(),
            config: cycle.config().clone(),
            next_action_at: cycle.next_action_at(),
            leading: match adopted {
                ElectionResult::Leader(state) => Some(state.ballot),
                ElectionResult::Follower(_) => None,
            },
            honoured: cycle.honoured.clone(),
            ineligible: cycle.ineligible,
        }
    }
}
