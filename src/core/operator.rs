//! Operator overrides: decisions taken by a tool acting on the election from outside, not by
//! a candidate. Neither may let two processes believe they lead at once (docs/design.md §10.4):
//!
//! - `force_vacate` fences the leader out at once and leaves a vacancy *held for the
//!   operator*, which no candidate can fill (an operator is not a candidate, whatever id it
//!   gave): every candidate waits a full lease of unchanged observation first, by which time
//!   the old leader's own belief has ended;
//! - `request_resign` asks the leader to step down; the leader stops believing, then reserves
//!   the vacancy for the best live candidate, so leadership moves in one commit.

use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::record::{AttemptId, LeaderRecord, Party};

use super::next_renewal;
use super::resign::ResignRejected;

fn operator_attempt(operator: &CandidateId) -> Option<AttemptId> {
    Some(AttemptId {
        candidate: operator.clone(),
        seq: 0,
    })
}

/// Fences the current leader out at once: the ballot grows by one, the record becomes a
/// vacancy held for `operator`, and candidates wait a full lease (at least the old leader's)
/// before taking over with the next ballot.
pub(crate) fn force_vacate(
    rec: &LeaderRecord,
    cfg: &ElectionConfig,
    operator: &CandidateId,
    expected: Ballot,
) -> Result<Result<LeaderRecord, ResignRejected>, ElectionError> {
    if rec.ballot != expected {
        return Ok(Err(ResignRejected::BallotMismatch {
            expected,
            current: rec.ballot,
        }));
    }
    Ok(Ok(LeaderRecord {
        ballot: rec.ballot.next()?,
        owner: None,
        renewal: next_renewal(rec)?,
        // Followers wait this long: never less than the lease the old leader believes in.
        lease: super::vacancy_lease(rec, cfg),
        handover: None,
        reservation: Some(Party::Operator(operator.clone())),
        payload: None,
        writer: operator_attempt(operator),
        handover_to: None,
        leader_version: rec.leader_version.clone(),
    }))
}

/// Asks the leader of `expected` to step down: an operator's handover request. The leader
/// honours it at its next cycle whatever the priorities and the preemption setting (after
/// draining its work within the grace), leaving a vacancy reserved for the best live
/// candidate. Neither the observation identity nor the owner's attempt id changes, so
/// followers keep timing a dead leader and the owner can still recognise its own unknown
/// commit.
pub(crate) fn request_resign(
    rec: &LeaderRecord,
    operator: &CandidateId,
    expected: Ballot,
    to: Option<&str>,
) -> Result<LeaderRecord, ResignRejected> {
    if rec.owner.is_none() {
        return Err(ResignRejected::NotLeader { current: None });
    }
    if rec.ballot != expected {
        return Err(ResignRejected::BallotMismatch {
            expected,
            current: rec.ballot,
        });
    }
    let mut write = rec.clone();
    write.handover = Some(Party::Operator(operator.clone()));
    write.handover_to = to.map(str::to_owned);
    Ok(write)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;

    fn id(s: &str) -> CandidateId {
        CandidateId::parse(s).unwrap()
    }

    fn owned(lease: Duration) -> LeaderRecord {
        LeaderRecord {
            ballot: Ballot::new(4),
            owner: Some(crate::record::Named::new(
                id("old"),
                crate::ids::Priority::new(1),
            )),
            renewal: 9,
            lease,
            handover: None,
            reservation: None,
            payload: Some(b"addr".to_vec()),
            writer: Some(AttemptId {
                candidate: id("old"),
                seq: 3,
            }),
            handover_to: None,
            leader_version: None,
        }
    }

    #[test]
    fn force_vacate_bumps_the_ballot_and_holds_the_vacancy_for_at_least_the_old_lease() {
        let cfg = ElectionConfig::default();
        let long = owned(Duration::from_secs(30));
        let w = force_vacate(&long, &cfg, &id("ops"), Ballot::new(4))
            .unwrap()
            .unwrap();
        assert_eq!(
            (w.ballot, w.renewal, w.owner.clone()),
            (Ballot::new(5), 10, None)
        );
        assert_eq!(w.lease, Duration::from_secs(30));
        assert_eq!(w.operator_hold(), Some(&id("ops")));
        assert_eq!(w.reservation(), None);
        assert!(w.payload.is_none() && w.handover.is_none());
        let short = owned(Duration::from_secs(2));
        let w = force_vacate(&short, &cfg, &id("ops"), Ballot::new(4))
            .unwrap()
            .unwrap();
        assert_eq!(w.lease, cfg.lease_duration());
        assert!(matches!(
            force_vacate(&short, &cfg, &id("ops"), Ballot::new(3)).unwrap(),
            Err(ResignRejected::BallotMismatch { .. })
        ));
        assert!(w.check().is_ok());
    }

    #[test]
    fn request_resign_keeps_the_observation_and_outranks_everyone() {
        let rec = owned(Duration::from_secs(10));
        let w = request_resign(&rec, &id("ops"), Ballot::new(4), None).unwrap();
        assert_eq!(
            (w.ballot, w.renewal, w.owner.clone()),
            (rec.ballot, rec.renewal, rec.owner.clone())
        );
        assert_eq!(w.operator_request(), Some(&id("ops")));
        assert_eq!(w.handover_request(), None);
        // The owner's attempt id is kept: its unknown commit stays recognisable.
        assert_eq!(w.writer, rec.writer);
        assert!(request_resign(&rec, &id("ops"), Ballot::new(5), None).is_err());
        let mut vacant = rec.clone();
        vacant.owner = None;
        vacant.payload = None;
        assert!(matches!(
            request_resign(&vacant, &id("ops"), Ballot::new(4), None),
            Err(ResignRejected::NotLeader { .. })
        ));
    }
}
