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
//! heartbeat it shows was committed less than `max(reservation_timeout, 2 × heartbeat) / (1 + ρ)`
//! of true time before that read (a candidate silent that long on the acquirer's clock
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
        // A live candidate heartbeats at most a heartbeat apart: a reservation timeout set
        // shorter passes over nobody live (DESIGN §4).
        let silence = scale(
            read.config
                .reservation_timeout
                .max(read.config.heartbeat.saturating_mul(2)),
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
                             than max(reservation_timeout, 2 heartbeats)/(1+rho) = {} s (version {})",
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
mod tests;
