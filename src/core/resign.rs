//! A resignation decided, or why it was rejected.

use super::write::release;
use super::{Action, LocalState, Plan};
use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::ids::CandidateId;
use crate::record::{LeaderRecord, Named, Party};

/// Why a resignation was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResignRejected {
    /// The record is not owned by this candidate.
    NotLeader {
        /// The current owner, if any.
        current: Option<CandidateId>,
    },
    /// The caller expected a different ballot than the one it holds.
    BallotMismatch {
        /// The ballot the caller expected.
        expected: crate::ids::Ballot,
        /// The ballot in the record.
        current: crate::ids::Ballot,
    },
}

/// Decides a resignation. On success the candidate has already stopped believing it leads.
///
/// `best` is the best live candidate other than this one, if any; the vacancy is reserved
/// for it so leadership moves in one commit instead of one lease, if this candidate held the
/// ballot itself (otherwise the vacancy waits a full lease: see below).
pub(crate) fn decide_resign(
    st: &mut LocalState,
    rec: &LeaderRecord,
    cfg: &ElectionConfig,
    expected: Option<crate::ids::Ballot>,
    best: Option<Named>,
    t0: LocalInstant,
) -> Result<Result<Plan, ResignRejected>, ElectionError> {
    if !rec.is_owned_by(st.id()) {
        return Ok(Err(ResignRejected::NotLeader {
            current: rec.owner.as_ref().map(|o| o.id.clone()),
        }));
    }
    if let Some(expected) = expected {
        if expected != rec.ballot {
            return Ok(Err(ResignRejected::BallotMismatch {
                expected,
                current: rec.ballot,
            }));
        }
    }
    // Only a candidate that held this ballot itself knows that nobody believes in it once it
    // stops: another process (or another `Candidate` value) with the same id may still do.
    // Then the vacancy is held like an operator's, so successors wait a full lease.
    let reserve = if st.held(rec.ballot) {
        best.map(Party::Candidate)
    } else {
        Some(Party::Operator(st.id().clone()))
    };
    st.demote();
    release(st, rec, reserve, cfg, Action::Resigned, t0, None).map(Ok)
}
