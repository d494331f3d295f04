//! Oracle 26: every change of owner lands on a candidate the version policy allows, given the
//! registry its transaction read (DESIGN §14.5: "every change of owner lands on a candidate the
//! policy allows, given the registry read by that transaction, or on the best live one when
//! none is allowed").
//!
//! A cooperative change of owner is decided by the transaction that writes the vacancy (the
//! successor fills it in one commit); so this oracle judges that transaction, by why it let
//! go:
//!
//! - honouring a candidate's handover request: reserved for the requester, which the read
//!   shows live, eligible, and ranked above the leader (version under the policy, then
//!   priority: DESIGN §14.3);
//! - an operator's request directed at a name or an id (by a leader eligible or not): reserved
//!   for the best live eligible candidate it names that the version policy lets lead (none of a
//!   version it ranks ahead is live, but the leader), or (none left) the best live eligible
//!   one;
//! - an operator's request, a resignation, a step-down for ineligibility: reserved for the best
//!   live eligible candidate (of equals, the earlier registration), or unreserved if the read
//!   shows none;
//! - elections off: unreserved.
//!
//! A takeover (a lapsed lease, an unreserved vacancy, a reservation its holder did not fill in
//! time) is decided by the transaction that acquires: it must not land on a candidate while
//! another one that the policy ranks ahead of it (DESIGN §4: its version, against the version
//! of the record's last leader, kept in the record) still heartbeats. "Still heartbeats", as
//! the acquirer can know it: the registry its transaction read shows that candidate live and
//! eligible, not the lapsed owner nor the holder of the reservation that timed out, and the
//! heartbeat it shows was committed less than `reservation_timeout / (1 + ρ)` of true time
//! before that read (a candidate silent for the reservation timeout on the acquirer's clock
//! is passed over: it died, though the registry, measured in renewals that stopped with the
//! leader, still shows it live). Priority and registration order among candidates the policy
//! ranks alike are a preference that the rank stagger serves and preemption restores, not
//! judged here. A heartbeat is timed from the commit that first wrote it, or from an earlier
//! write of the same heartbeat that never committed but that another candidate's cycle,
//! composed into the same transaction, read (the library times what it reads).

use std::collections::BTreeMap;

use fdb_leader_election::CandidateId;

use super::rank::{Rank, RegView, Stand, best, version};
use super::{CommitFacts, OracleId, Violation};
use crate::history::{CycleAction, Op, RecordView};
use crate::time::{Nanos, PPM, scale, secs};

/// Oracle 26.
#[derive(Debug, Default)]
pub struct Successor {
    rho_ppm: u64,
    /// Each candidate's last heartbeat committed, and the true time of the commit that first
    /// wrote it.
    heard: BTreeMap<String, (u64, Nanos)>,
    /// A heartbeat written by a transaction that never committed, read there by a composed
    /// cycle, and when: a later commit of the same heartbeat counts from here.
    uncommitted: BTreeMap<String, (u64, Nanos)>,
}

/// Who the vacancy must go to.
#[derive(Debug, PartialEq, Eq)]
enum Due {
    /// This candidate.
    To(String),
    /// Nobody: unreserved.
    Nobody,
}

impl Successor {
    /// The oracle, for clocks whose rate error is at most `rho_ppm`.
    pub fn new(rho_ppm: u32) -> Self {
        Successor {
            rho_ppm: u64::from(rho_ppm),
            heard: BTreeMap::new(),
            uncommitted: BTreeMap::new(),
        }
    }

    /// Checks a committed transaction, then notes the heartbeats it wrote.
    pub fn on_commit(&mut self, c: &CommitFacts<'_>) -> Option<Violation> {
        if !c.applied {
            return None;
        }
        let verdict = Self::vacancy(c).or_else(|| self.takeover(c));
        for (id, cand) in &c.entry.candidates_set {
            // The commit that first wrote this heartbeat (a write that keeps it, a claim
            // without a heartbeat, is no sign of life), or the uncommitted write of it that a
            // composed cycle read before.
            let known = self.heard.get(id).is_some_and(|h| h.0 == cand.heartbeat);
            let early = self.uncommitted.remove(id);
            if !known {
                let at = early
                    .filter(|u| u.0 == cand.heartbeat)
                    .map_or(c.at, |u| u.1.min(c.at));
                self.heard.insert(id.clone(), (cand.heartbeat, at));
            }
        }
        for id in &c.entry.candidates_cleared {
            self.heard.remove(id);
            self.uncommitted.remove(id);
        }
        verdict
    }

    /// Notes a heartbeat written at `at` by a transaction that never commits, read there by
    /// another candidate's cycle composed into it: that candidate saw it from then on, and a
    /// later commit of the same heartbeat (the counter did not move) counts from here.
    pub fn note_uncommitted(&mut self, id: &str, heartbeat: u64, at: Nanos) {
        if self.heard.get(id).is_none_or(|h| h.0 != heartbeat) {
            self.uncommitted.insert(id.to_owned(), (heartbeat, at));
        }
    }

    /// A takeover: an acquisition of a new ballot that is not the fill of the acquirer's own
    /// reservation, by a process's cycle (or a planted raw takeover).
    fn takeover(&self, c: &CommitFacts<'_>) -> Option<Violation> {
        let e = c.entry;
        if !matches!(e.op, Op::Cycle(CycleAction::Acquired) | Op::RogueTakeover) {
            return None;
        }
        let (read, prior, new) = (c.read?, e.prior.as_ref()?, e.leader.as_ref()?);
        let me = e.actor_id.as_deref()?;
        let mine = read.registry.iter().find(|r| r.id == me)?;
        if prior.reservation.as_ref().is_some_and(|r| r.0 == me) {
            return None;
        }
        let rank = Rank {
            policy: read.config.policy(),
            leader: version(prior.leader_version.as_deref()),
        };
        let excluded = |id: &str| {
            prior.owner.as_ref().is_some_and(|o| o.0 == id)
                || prior.reservation.as_ref().is_some_and(|r| r.0 == id)
        };
        let silence = scale(
            read.config.reservation_timeout,
            PPM.unsigned_abs(),
            PPM.unsigned_abs().saturating_add(self.rho_ppm),
        );
        let my_version = version(mine.cand.version.as_deref());
        let lag = read.config.renewals_before_dead;
        read.registry
            .iter()
            .filter(|r| r.id != me && !excluded(&r.id) && r.cand.eligible)
            .filter(|r| r.live(prior.renewal, lag))
            .filter(|r| {
                rank.versions(
                    version(r.cand.version.as_deref()).as_ref(),
                    my_version.as_ref(),
                ) == std::cmp::Ordering::Greater
            })
            .find_map(|r| {
                let &(heartbeat, at) = self.heard.get(&r.id)?;
                let ago = read.at.saturating_sub(at);
                (heartbeat == r.cand.heartbeat && ago < silence).then(|| {
                    Violation::new(
                        OracleId::Successor,
                        format!(
                            "{} ({}, version {}) took ballot {} over a record of ballot {} \
                             while {} (version {}), ranked ahead of it under the {} policy \
                             (leader version {}), had heartbeated {} s before its read, less \
                             than reservation_timeout/(1+rho) = {} s (version {})",
                            e.actor,
                            me,
                            mine.cand.version.as_deref().unwrap_or("none"),
                            new.ballot,
                            prior.ballot,
                            r.id,
                            r.cand.version.as_deref().unwrap_or("none"),
                            rank.policy,
                            prior.leader_version.as_deref().unwrap_or("none"),
                            secs(ago),
                            secs(silence),
                            e.version
                        ),
                    )
                })
            })
    }

    /// A vacancy written over the writer's own leadership.
    fn vacancy(c: &CommitFacts<'_>) -> Option<Violation> {
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
        // An operator's request directed at a name (or at one candidate's id): the best live
        // eligible one it names that the version policy lets lead (no live eligible candidate but the leader and
        // itself has a version the policy ranks ahead), else the best live eligible one.
        let allowed = |r: &&RegView| {
            let mine = version(r.cand.version.as_deref());
            !read.registry.iter().any(|o| {
                o.id != me
                    && o.id != r.id
                    && o.cand.eligible
                    && o.live(renewal, lag)
                    && rank.versions(version(o.cand.version.as_deref()).as_ref(), mine.as_ref())
                        == std::cmp::Ordering::Greater
            })
        };
        let directed_or_best = || {
            let directed = prior.operator_request.as_ref().and_then(|_| {
                prior.operator_request_to.as_ref().and_then(|to| {
                    // An id is its name, a `-` and 16 hexadecimal digits: no name ends so.
                    let is_id = CandidateId::parse(to).is_ok_and(|id| id.name() != to.as_str());
                    best_of(
                        &mut read
                            .registry
                            .iter()
                            .filter(|r| if is_id { &r.id == to } else { &r.name == to })
                            .filter(allowed),
                    )
                })
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
        Successor::new(0).on_commit(&CommitFacts {
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

    const MS: Nanos = 1_000_000;

    /// `me` (1.0.0) takes ballot 5 over `old`'s lapsed lease (2.0.0); `c` (2.0.0) is live;
    /// the transaction read at 10 s, with a reservation timeout of 100 ms.
    fn takeover(policy: VersionPolicy) -> (Entry, TxnRead) {
        let mut e = Entry::new(
            "n0v1",
            Some("me".into()),
            9,
            Op::Cycle(CycleAction::Acquired),
        );
        e.prior = Some(RecordView {
            ballot: 4,
            renewal: 6,
            owner: Some(("old".into(), 5)),
            leader_version: Some("2.0.0".into()),
            ..RecordView::default()
        });
        e.leader = Some(RecordView {
            ballot: 5,
            renewal: 7,
            owner: Some(("me".into(), 9)),
            ..RecordView::default()
        });
        let mut r = read(policy);
        r.config.reservation_timeout = 100 * MS;
        r.registry = vec![
            reg("me", 9, Some("1.0.0"), 0),
            reg("old", 5, Some("2.0.0"), 1),
            reg("c", 1, Some("2.0.0"), 2),
        ];
        r.at = 10_000 * MS;
        (e, r)
    }

    /// The oracle, having seen `c`'s heartbeat 0 committed at `at`.
    fn heard_at(at: Nanos) -> Successor {
        let mut o = Successor::new(0);
        let mut hb = Entry::new("n2v1", Some("c".into()), 1, Op::Cycle(CycleAction::None));
        hb.candidates_set
            .push(("c".into(), reg("c", 1, Some("2.0.0"), 2).cand));
        assert!(
            o.on_commit(&CommitFacts {
                at,
                entry: &hb,
                applied: true,
                read: None,
            })
            .is_none()
        );
        o
    }

    fn judged(o: &mut Successor, e: &Entry, r: &TxnRead) -> Option<Violation> {
        o.on_commit(&CommitFacts {
            at: r.at.saturating_add(MS),
            entry: e,
            applied: true,
            read: Some(r),
        })
    }

    #[test]
    fn a_takeover_never_passes_over_a_version_ranked_ahead_that_still_heartbeats() {
        let (e, r) = takeover(VersionPolicy::NoDowngrade);
        // c heartbeated 50 ms before the read: still there.
        let v = judged(&mut heard_at(9_950 * MS), &e, &r);
        assert!(v.is_some_and(|v| v.message.contains("ranked ahead")));
        // Silent for the reservation timeout: passed over.
        assert!(judged(&mut heard_at(9_900 * MS), &e, &r).is_none());
        // A heartbeat that only a later write repeated (a claim) counts from its first commit.
        let mut o = heard_at(9_800 * MS);
        let mut again = Entry::new("n2v1", Some("c".into()), 1, Op::Cycle(CycleAction::None));
        again
            .candidates_set
            .push(("c".into(), reg("c", 1, Some("2.0.0"), 2).cand));
        o.on_commit(&CommitFacts {
            at: 9_990 * MS,
            entry: &again,
            applied: true,
            read: None,
        });
        assert!(judged(&mut o, &e, &r).is_none());
        // An uncommitted write of the same heartbeat, read by a composed cycle, counts from
        // then.
        let mut o = Successor::new(0);
        o.note_uncommitted("c", 0, 9_950 * MS);
        o.on_commit(&CommitFacts {
            at: 9_990 * MS,
            entry: &again,
            applied: true,
            read: None,
        });
        let (_, at) = o.heard.get("c").copied().unwrap_or_default();
        assert_eq!(at, 9_950 * MS);
    }

    #[test]
    fn a_takeover_is_judged_by_the_version_policy_alone() {
        // Under ignore, c (priority 1) is no rule for me (priority 9) nor would a higher
        // priority be: the stagger's preference, restored by preemption.
        let (e, r) = takeover(VersionPolicy::Ignore);
        assert!(judged(&mut heard_at(9_990 * MS), &e, &r).is_none());
        // The lapsed owner and the holder of a reservation that timed out are not waited for.
        let (mut e, r) = takeover(VersionPolicy::NoDowngrade);
        if let Some(p) = e.prior.as_mut() {
            p.owner = None;
            p.reservation = Some(("c".into(), 1));
        }
        assert!(judged(&mut heard_at(9_990 * MS), &e, &r).is_none());
        // Filling one's own reservation is no takeover.
        if let Some(p) = e.prior.as_mut() {
            p.reservation = Some(("me".into(), 9));
        }
        assert!(judged(&mut heard_at(9_990 * MS), &e, &r).is_none());
        // An older version than the lapsed leader's is not ahead under no-downgrade.
        let (e, mut r) = takeover(VersionPolicy::NoDowngrade);
        if let Some(c) = r.registry.get_mut(2) {
            c.cand.version = Some("1.5.0".into());
        }
        let mut o = heard_at(9_990 * MS);
        assert!(judged(&mut o, &e, &r).is_none());
    }
}
