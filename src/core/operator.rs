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
use crate::record::{AttemptId, CandidateRecord, LeaderRecord, Named, Party};

use super::next_renewal;
use super::rank::{Ranking, Roster, best_live, policy_ahead};
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

/// Whom an operator's directed request (`resign --to`) names: one candidate by its id, as
/// `status` lists it, or every candidate of a name, its `--name` (docs/design.md §13.6). An id
/// is its name, a `-` and 16 hexadecimal digits ([`CandidateId::name`] strips them), which no
/// name ends with, so the two never clash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Addressee<'a> {
    /// The candidate of this id.
    Id(CandidateId),
    /// Every candidate of this name.
    Name(&'a str),
}

impl<'a> Addressee<'a> {
    /// What `to` names.
    pub(crate) fn of(to: &'a str) -> Self {
        match CandidateId::parse(to) {
            Ok(id) if id.name() != to => Addressee::Id(id),
            _ => Addressee::Name(to),
        }
    }

    /// Whether it names `id`.
    pub(crate) fn names(&self, id: &CandidateId) -> bool {
        match self {
            Addressee::Id(given) => given == id,
            Addressee::Name(name) => id.name() == *name,
        }
    }
}

impl std::fmt::Display for Addressee<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Addressee::Id(id) => write!(f, "with the id {:?}", id.as_str()),
            Addressee::Name(name) => write!(f, "named {name:?}"),
        }
    }
}

/// Why no candidate a directed request names may take leadership from it (`resign --to`,
/// docs/design.md §13.6, §14.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DirectedRefusal {
    /// No live eligible candidate of that name (or that id), other than the leader.
    NoneLive { name: String },
    /// Every live eligible candidate of that name is one the version policy does not let
    /// lead: a live eligible candidate it ranks ahead is there.
    Policy(Box<PolicyRefusal>),
}

/// A directed request the version policy refuses: the name asked for, the policy, the
/// versions of the target, the leader and the candidate (`ahead`) the policy ranks first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PolicyRefusal {
    name: String,
    policy: crate::config::VersionPolicy,
    target_version: Option<semver::Version>,
    leader_version: Option<semver::Version>,
    ahead: CandidateId,
    ahead_version: Option<semver::Version>,
}

impl std::fmt::Display for DirectedRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |v: &Option<semver::Version>| {
            v.as_ref()
                .map_or_else(|| "no version".to_owned(), ToString::to_string)
        };
        match self {
            DirectedRefusal::NoneLive { name } => write!(
                f,
                "no live eligible candidate {} (other than the leader)",
                Addressee::of(name)
            ),
            DirectedRefusal::Policy(p) => write!(
                f,
                "the version policy {policy} does not let {:?} ({}) lead while {} ({}) is \
                 live and eligible (the leader runs {}); change the policy first, or \
                 resign without a target",
                p.name,
                v(&p.target_version),
                p.ahead,
                v(&p.ahead_version),
                v(&p.leader_version),
                policy = p.policy,
            ),
        }
    }
}

/// **The target of an operator's directed request**, the one place it is chosen: the best
/// live eligible candidate that `name` names ([`Addressee`]: the candidate of that id, or
/// those of that name) other than `leader` (by the ranking) that the version policy lets
/// lead, judged against the leader's version: no live eligible candidate other than the
/// leader and itself ranks ahead of it by version ([`policy_ahead`](super::rank::policy_ahead)).
/// Used by [`request_resign_to`](crate::LeaderElection::request_resign_to) when the operator
/// asks, and by the leader when it reads the request and when it steps down.
pub(crate) fn directed_target<'a>(
    leader: &CandidateId,
    roster: Roster<'a>,
    name: &str,
    current_renewal: u64,
    max_lag: u64,
    ranking: Ranking<'a>,
) -> Result<Named, DirectedRefusal> {
    let to = Addressee::of(name);
    let named: Vec<&(CandidateId, CandidateRecord)> = roster
        .rows()
        .iter()
        .filter(|(id, c)| {
            to.names(id)
                && id != leader
                && roster.eligible(id, c)
                && c.is_live(current_renewal, max_lag)
        })
        .collect();
    let mut blocked = None;
    let allowed: Vec<(CandidateId, CandidateRecord)> = named
        .iter()
        .filter(|(id, c)| {
            let ahead = policy_ahead(
                &roster.standing(id, c),
                roster,
                current_renewal,
                max_lag,
                &[leader, id],
                ranking,
            );
            match ahead.first() {
                None => true,
                Some((a, ac)) => {
                    blocked.get_or_insert_with(|| {
                        DirectedRefusal::Policy(Box::new(PolicyRefusal {
                            name: name.to_owned(),
                            policy: ranking.policy,
                            target_version: c.version.clone(),
                            leader_version: ranking.leader_version.cloned(),
                            ahead: a.clone(),
                            ahead_version: ac.version.clone(),
                        }))
                    });
                    false
                }
            }
        })
        .map(|row| (*row).clone())
        .collect();
    best_live(
        leader,
        roster.with_rows(&allowed),
        current_renewal,
        max_lag,
        ranking,
    )
    .ok_or_else(|| {
        blocked.unwrap_or(DirectedRefusal::NoneLive {
            name: name.to_owned(),
        })
    })
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
