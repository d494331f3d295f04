//! Oracle 26: every vacancy a leader writes over its own leadership goes to the candidate the
//! version policy allows, given the registry its transaction read (DESIGN §14.5: "every
//! change of owner lands on a candidate the policy allows, given the registry read by that
//! transaction, or on the best live one when none is allowed").
//!
//! A cooperative change of owner is decided by the transaction that writes the vacancy (the
//! successor fills it in one commit); so this oracle judges that transaction, by why it let
//! go:
//!
//! - honouring a candidate's handover request: reserved for the requester, which the read
//!   shows live, eligible, and ranked above the leader (version under the policy, then
//!   priority: DESIGN §14.3);
//! - an operator's request directed at a name (by a leader eligible or not): reserved for the
//!   best live eligible candidate of that name, or (none left) the best live eligible one;
//! - an operator's request, a resignation, a step-down for ineligibility: reserved for the best
//!   live eligible candidate (of equals, the earlier registration), or unreserved if the read
//!   shows none;
//! - elections off: unreserved.
//!
//! Takeovers (a lapsed lease, an unreserved vacancy, a reservation its holder did not fill in
//! time) are ordered by the rank stagger, which is liveness only (DESIGN §4: capped at a
//! heartbeat, since the registry's liveness lags a crash), so who wins one is not judged here:
//! oracle 23 judges that the winner is eligible, and oracles 5 and 24 that the best one leads
//! once faults stop.

use super::rank::{Rank, RegView, Stand, best, version};
use super::{CommitFacts, OracleId, Violation};
use crate::history::{CycleAction, Op, RecordView};

/// Oracle 26.
#[derive(Debug, Default)]
pub struct Successor;

/// Who the vacancy must go to.
#[derive(Debug, PartialEq, Eq)]
enum Due {
    /// This candidate.
    To(String),
    /// Nobody: unreserved.
    Nobody,
}

impl Successor {
    /// Checks a committed transaction.
    pub fn on_commit(c: &CommitFacts<'_>) -> Option<Violation> {
        if !c.applied {
            return None;
        }
        let e = c.entry;
        let read = c.read?;
        let (prior, new) = (e.prior.as_ref()?, e.leader.as_ref()?);
        let me = e.actor_id.as_deref()?;
        // A vacancy written over this leader's own record.
        if prior.owner_id() != Some(me) || new.owner.is_some() || new.operator_hold.is_some() {
            return None;
        }
        let rank = Rank {
            policy: read.config.policy(),
            leader: version(prior.leader_version.as_deref()),
        };
        let (renewal, lag) = (prior.renewal, read.config.renewals_before_dead);
        let best_of = |rows: &mut dyn Iterator<Item = &RegView>| {
            best(&rank, rows, me, renewal, lag).map(|r| r.id.clone())
        };
        let best_live = || best_of(&mut read.registry.iter());
        // An operator's request directed at a name: the best live eligible one of that name,
        // else the best live eligible one.
        let directed_or_best = || {
            let directed = prior.operator_request.as_ref().and_then(|_| {
                prior
                    .operator_request_to
                    .as_ref()
                    .and_then(|name| best_of(&mut read.registry.iter().filter(|r| &r.name == name)))
            });
            directed.or_else(best_live).map_or(Due::Nobody, Due::To)
        };
        let due = match e.op {
            Op::Cycle(CycleAction::SteppedDown) => Due::Nobody,
            Op::Cycle(CycleAction::HandedOver) if prior.operator_request.is_none() => {
                let (requester, _) = prior.handover.as_ref()?;
                return Self::requester(c, read, prior, new, &rank, requester);
            }
            // A leader that is not eligible honours an operator's directed request too.
            Op::Cycle(CycleAction::HandedOver | CycleAction::SteppedDownIneligible) => {
                directed_or_best()
            }
            Op::Cycle(CycleAction::Resigned) | Op::Resign | Op::Unregister { resigned: true } => {
                best_live().map_or(Due::Nobody, Due::To)
            }
            _ => return None,
        };
        let got = new
            .reservation
            .as_ref()
            .map_or(Due::Nobody, |(id, _)| Due::To(id.clone()));
        (got != due).then(|| {
            Violation::new(
                OracleId::Successor,
                format!(
                    "{} ({:?}) wrote a vacancy of ballot {} {} under the {} policy (leader \
                     version {}), where the registry its transaction read gives {} (version {})",
                    e.actor,
                    e.op,
                    new.ballot,
                    describe(&got),
                    rank.policy,
                    prior.leader_version.as_deref().unwrap_or("none"),
                    describe(&due),
                    e.version
                ),
            )
        })
    }

    /// A handover to the candidate that asked: the requester, live, eligible and ranked above
    /// the leader.
    fn requester(
        c: &CommitFacts<'_>,
        read: &super::TxnRead,
        prior: &RecordView,
        new: &RecordView,
        rank: &Rank,
        requester: &str,
    ) -> Option<Violation> {
        let e = c.entry;
        let fail = |why: String| {
            Some(Violation::new(
                OracleId::Successor,
                format!(
                    "{} handed ballot {} over to {requester}'s request: {why} (version {})",
                    e.actor, new.ballot, e.version
                ),
            ))
        };
        if new.reservation.as_ref().map(|r| r.0.as_str()) != Some(requester) {
            return fail(format!(
                "the vacancy is reserved for {:?}",
                new.reservation.as_ref().map(|r| &r.0)
            ));
        }
        let Some(row) = read.registry.iter().find(|r| r.id == requester) else {
            return fail("the requester is not registered in what it read".to_owned());
        };
        if !row.cand.eligible || !row.live(prior.renewal, read.config.renewals_before_dead) {
            return fail("the requester is not live and eligible in what it read".to_owned());
        }
        let leader = Stand {
            version: version(e.actor_version.as_deref()),
            priority: e.actor_priority,
        };
        if !rank.outranks(&Stand::of(&row.cand), &leader) {
            return fail(format!(
                "the requester (version {}, priority {}) does not rank above the leader \
                 (version {}, priority {}) under the {} policy",
                row.cand.version.as_deref().unwrap_or("none"),
                row.cand.priority,
                e.actor_version.as_deref().unwrap_or("none"),
                e.actor_priority,
                rank.policy
            ));
        }
        None
    }
}

fn describe(d: &Due) -> String {
    match d {
        Due::To(id) => format!("reserved for {id}"),
        Due::Nobody => "unreserved".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use fdb_leader_election::VersionPolicy;

    use super::*;
    use crate::history::{CandView, ConfigView, Entry};
    use crate::oracles::TxnRead;

    fn reg(id: &str, prio: i32, v: Option<&str>, registration: u64) -> RegView {
        RegView {
            id: id.into(),
            name: id.trim_end_matches(char::is_numeric).into(),
            cand: CandView {
                priority: prio,
                registration,
                heartbeat: 0,
                seen_renewal: 5,
                eligible: true,
                version: v.map(str::to_owned),
            },
        }
    }

    fn read(policy: VersionPolicy) -> TxnRead {
        TxnRead {
            config: ConfigView {
                version_policy: policy.as_str().to_owned(),
                renewals_before_dead: 4,
                ..ConfigView::default()
            },
            registry: vec![
                reg("me", 5, Some("1.0.0"), 0),
                reg("old", 1, Some("1.0.0"), 1),
                reg("new", 9, Some("1.1.0"), 2),
            ],
            ..TxnRead::default()
        }
    }

    fn resign(to: Option<&str>) -> Entry {
        let mut e = Entry::new("n0v1", Some("me".into()), 5, Op::Resign);
        e.actor_version = Some("1.0.0".into());
        e.prior = Some(RecordView {
            ballot: 4,
            renewal: 6,
            owner: Some(("me".into(), 5)),
            leader_version: Some("1.0.0".into()),
            ..RecordView::default()
        });
        e.leader = Some(RecordView {
            ballot: 4,
            renewal: 7,
            reservation: to.map(|t| (t.to_owned(), 0)),
            ..RecordView::default()
        });
        e
    }

    fn judge(e: &Entry, r: &TxnRead) -> Option<Violation> {
        Successor::on_commit(&CommitFacts {
            at: 0,
            entry: e,
            applied: true,
            read: Some(r),
        })
    }

    #[test]
    fn a_resignation_goes_to_the_candidate_the_policy_ranks_first() {
        let newest = read(VersionPolicy::PreferNewest);
        assert!(judge(&resign(Some("new")), &newest).is_none());
        assert!(judge(&resign(Some("old")), &newest).is_some());
        let oldest = read(VersionPolicy::PreferOldest);
        assert!(judge(&resign(Some("old")), &oldest).is_none());
        assert!(judge(&resign(Some("new")), &oldest).is_some());
        assert!(judge(&resign(None), &oldest).is_some(), "someone was live");
        let mut nobody = oldest.clone();
        nobody.registry.truncate(1);
        assert!(judge(&resign(None), &nobody).is_none());
    }

    #[test]
    fn a_requested_handover_goes_to_a_requester_that_outranks_the_leader() {
        let mut e = resign(Some("old"));
        e.op = Op::Cycle(CycleAction::HandedOver);
        if let Some(p) = e.prior.as_mut() {
            p.handover = Some(("old".into(), 1));
        }
        assert!(
            judge(&e, &read(VersionPolicy::Ignore)).is_some(),
            "priority 1 < 5"
        );
        let mut r = read(VersionPolicy::NoDowngrade);
        if let Some(row) = r.registry.get_mut(1) {
            row.cand.priority = 6;
        }
        assert!(judge(&e, &r).is_none(), "same version, higher priority");
        if let Some(row) = r.registry.get_mut(1) {
            row.cand.version = Some("0.9.0".into());
        }
        assert!(judge(&e, &r).is_some(), "a downgrade");
    }

    #[test]
    fn a_directed_request_goes_to_its_target_while_it_is_live_and_eligible() {
        let mut e = resign(Some("old"));
        e.op = Op::Cycle(CycleAction::HandedOver);
        if let Some(p) = e.prior.as_mut() {
            p.operator_request = Some("op".into());
            p.operator_request_to = Some("old".into());
        }
        let mut r = read(VersionPolicy::Ignore);
        assert!(judge(&e, &r).is_none());
        if let Some(row) = r.registry.get_mut(1) {
            row.cand.eligible = false;
        }
        assert!(
            judge(&e, &r).is_some(),
            "the best live eligible one instead"
        );
        if let Some(l) = e.leader.as_mut() {
            l.reservation = Some(("new".into(), 9));
        }
        assert!(judge(&e, &r).is_none());
    }
}
