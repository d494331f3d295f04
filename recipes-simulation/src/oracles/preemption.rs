//! Oracle 4: preemption only by a strictly higher rank, only while enabled, and only
//! through the handover; no lease is taken before it lapsed.
//!
//! - A new handover request must come from a candidate that ranks strictly above the owner
//!   (DESIGN §14.3: the version under the stored policy, then priority; with no versions, a
//!   strictly higher priority), while the stored configuration allows preemption.
//! - A leader may hand over (write a vacancy reserved for the requester) only to a candidate
//!   ranked strictly above it, as the registry its transaction read shows it, while
//!   preemption is allowed.
//! - Ownership may change without a wait only through a vacancy: an unreserved one, or one
//!   reserved for the acquirer. Taking over a record that is owned (by anyone, including a
//!   lapsed record of the acquirer) or held by an operator requires that the record's
//!   observation identity (ballot, renewal) stayed unchanged for at least
//!   `lease / (1 + ρ)` of true time before the commit: a follower waits a full lease on its
//!   own clock, counted from a reading taken after the read that first saw the identity, and
//!   no clock runs faster than `1 + ρ`. A vacancy its leader reserved for another candidate
//!   (DESIGN §4) needs `reservation_timeout / (1 + ρ)`, the shortest reservation timeout of
//!   the configurations stored while that identity stood (a follower may have read any).

use super::rank::{Rank, Stand, version};
use super::{CommitFacts, OracleId, Violation};
use crate::history::{ConfigView, CycleAction, Op, RecordView};
use crate::time::{Nanos, PPM, scale, secs};

/// Oracle 4.
#[derive(Debug)]
pub struct Preemption {
    rho_ppm: u64,
    config: Option<ConfigView>,
    /// The current observation identity and the true time of the commit that set it.
    identity: Option<((u64, u64), Nanos)>,
    /// The shortest reservation timeout stored since that identity stood (nanoseconds).
    shortest_reservation: Option<u64>,
}

impl Preemption {
    /// The oracle, for clocks whose rate error is at most `rho_ppm`.
    pub fn new(rho_ppm: u32) -> Self {
        Preemption {
            rho_ppm: u64::from(rho_ppm),
            config: None,
            identity: None,
            shortest_reservation: None,
        }
    }

    fn allowed(&self) -> bool {
        self.config.as_ref().is_some_and(|c| c.allow_preemption)
    }

    /// The ranking of the stored configuration's policy, against the record's leader.
    fn rank(&self, prior: &RecordView) -> Rank {
        Rank {
            policy: self
                .config
                .as_ref()
                .map(ConfigView::policy)
                .unwrap_or_default(),
            leader: version(prior.leader_version.as_deref()),
        }
    }

    /// Checks a committed transaction.
    pub fn on_commit(&mut self, c: &CommitFacts<'_>) -> Option<Violation> {
        if !c.applied {
            return None;
        }
        let e = c.entry;
        let verdict = match (&e.prior, &e.leader) {
            (Some(prior), Some(new)) => self.transition(c, prior, new),
            _ => None,
        };
        if let Some(cfg) = &e.config {
            self.config = Some(cfg.clone());
            self.shortest_reservation = Some(
                self.shortest_reservation
                    .map_or(cfg.reservation_timeout, |r| r.min(cfg.reservation_timeout)),
            );
        }
        if let Some(new) = &e.leader {
            let id = new.identity();
            if self.identity.map(|(i, _)| i) != Some(id) {
                self.identity = Some((id, c.at));
                self.shortest_reservation = self.config.as_ref().map(|c| c.reservation_timeout);
            }
        }
        verdict
    }

    fn transition(
        &self,
        c: &CommitFacts<'_>,
        prior: &RecordView,
        new: &RecordView,
    ) -> Option<Violation> {
        let e = c.entry;
        let fail = |m: String| Some(Violation::new(OracleId::Preemption, m));
        // A new handover request.
        if new.owner.is_some() && new.handover.is_some() && new.handover != prior.handover {
            let (req, req_prio) = new.handover.clone()?;
            let owner_prio = prior.owner.as_ref().map_or(i32::MIN, |o| o.1);
            if !self.allowed() {
                return fail(format!(
                    "{req} requested a handover while preemption is disabled (version {})",
                    e.version
                ));
            }
            let rank = self.rank(prior);
            let requester = Stand {
                version: version(e.actor_version.as_deref()),
                priority: req_prio,
            };
            let owner = Stand {
                version: version(prior.leader_version.as_deref()),
                priority: owner_prio,
            };
            if !rank.outranks(&requester, &owner) {
                return fail(format!(
                    "{req} (priority {req_prio}, version {}) requested a handover from an owner \
                     of priority {owner_prio} (version {}): not ranked strictly above it under \
                     the {} policy (version {})",
                    e.actor_version.as_deref().unwrap_or("none"),
                    prior.leader_version.as_deref().unwrap_or("none"),
                    rank.policy,
                    e.version
                ));
            }
        }
        // A handover (an operator's request is no preemption: it is honoured whatever the
        // priorities and the setting).
        if e.op == Op::Cycle(CycleAction::HandedOver) && prior.operator_request.is_none() {
            let (to, to_prio) = new.reservation.clone()?;
            if !self.allowed() {
                return fail(format!(
                    "{} handed over to {to} while preemption is disabled (version {})",
                    e.actor, e.version
                ));
            }
            let rank = self.rank(prior);
            // The requester's version, as the transaction read its registration.
            let to_version = c
                .read
                .and_then(|r| r.registry.iter().find(|row| row.id == to))
                .and_then(|row| version(row.cand.version.as_deref()));
            let target = Stand {
                version: to_version,
                priority: to_prio,
            };
            let leader = Stand {
                version: version(e.actor_version.as_deref()),
                priority: e.actor_priority,
            };
            if !rank.outranks(&target, &leader) {
                return fail(format!(
                    "{} (priority {}) handed over to {to} (priority {to_prio}): not ranked \
                     strictly above it under the {} policy (version {})",
                    e.actor, e.actor_priority, rank.policy, e.version
                ));
            }
        }
        // A change of ownership.
        let acquires = new.owner.is_some() && new.ballot != prior.ballot;
        if !acquires {
            return None;
        }
        let acquirer = new.owner_id()?;
        // A vacancy held by an operator is nobody's to fill at once.
        let vacancy_for_me = prior.owner.is_none()
            && prior.operator_hold.is_none()
            && prior.reservation.as_ref().is_none_or(|r| r.0 == acquirer);
        if vacancy_for_me {
            return None;
        }
        let (id, since) = self.identity?;
        if id != prior.identity() {
            // The history oracle reports a prior that is not the current record.
            return None;
        }
        // A vacancy its leader reserved for another candidate opens after the reservation
        // timeout; a lease held (or an operator's hold) after a full lease.
        let leader_reserved = prior.owner.is_none() && prior.operator_hold.is_none();
        let wait = match self.shortest_reservation {
            Some(r) if leader_reserved => r.min(prior.lease),
            _ => prior.lease,
        };
        let min_wait = scale(
            wait,
            PPM.unsigned_abs(),
            PPM.unsigned_abs().saturating_add(self.rho_ppm),
        );
        let waited = c.at.saturating_sub(since);
        if waited < min_wait {
            let held_by = match (&prior.owner, &prior.reservation, &prior.operator_hold) {
                (Some(o), _, _) => format!("owned by {}", o.0),
                (None, Some(r), _) => format!("reserved for {}", r.0),
                (None, None, Some(op)) => format!("held by operator {op}"),
                (None, None, None) => "vacant".to_owned(),
            };
            return fail(format!(
                "{acquirer} took ballot {} over a record {held_by} (ballot {}, renewal {}) \
                 that had been unchanged for only {} s of true time; it needs at least \
                 {}/(1+rho) = {} s (version {})",
                new.ballot,
                prior.ballot,
                prior.renewal,
                secs(waited),
                if leader_reserved {
                    "reservation_timeout"
                } else {
                    "lease"
                },
                secs(min_wait),
                e.version
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::arithmetic_side_effects)]

    use super::*;
    use crate::history::Entry;
    use crate::time::SEC;

    fn rec(ballot: u64, renewal: u64, owner: Option<(&str, i32)>) -> RecordView {
        RecordView {
            ballot,
            owner: owner.map(|(o, p)| (o.to_owned(), p)),
            renewal,
            lease: 2 * SEC,
            ..RecordView::default()
        }
    }

    fn entry(op: Op, prior: RecordView, new: RecordView) -> Entry {
        let mut e = Entry::new("x", None, 1, op);
        e.prior = Some(prior);
        e.leader = Some(new);
        e
    }

    fn commit(o: &mut Preemption, at: Nanos, e: &Entry) -> Option<Violation> {
        o.on_commit(&CommitFacts::applied(at, e, None))
    }

    #[test]
    fn takeover_needs_a_lapse_in_true_time() {
        let mut o = Preemption::new(10_000);
        let mut init = Entry::new("op", None, 0, Op::Init);
        init.leader = Some(rec(0, 0, None));
        init.config = Some(ConfigView::enabled(2 * SEC));
        assert!(commit(&mut o, 0, &init).is_none());
        // An unreserved vacancy is filled at once.
        let a = entry(
            Op::Cycle(CycleAction::Acquired),
            rec(0, 0, None),
            rec(1, 1, Some(("a", 1))),
        );
        assert!(commit(&mut o, 1, &a).is_none());
        // Taking over a lease after one second of a two-second lease fails...
        let b = entry(
            Op::Cycle(CycleAction::Acquired),
            rec(1, 1, Some(("a", 1))),
            rec(2, 2, Some(("b", 1))),
        );
        assert!(commit(&mut o, SEC, &b).is_some());
        // ...and after lease/(1+rho) passes.
        let mut o2 = Preemption::new(10_000);
        assert!(commit(&mut o2, 0, &init).is_none());
        assert!(commit(&mut o2, 1, &a).is_none());
        assert!(commit(&mut o2, 1 + 2 * SEC * 100 / 101 + 1, &b).is_none());
    }

    #[test]
    fn requests_need_a_strictly_higher_priority_and_preemption_on() {
        let mut o = Preemption::new(10_000);
        let mut cfg = Entry::new("op", None, 0, Op::Config);
        cfg.config = Some(ConfigView::enabled(2 * SEC));
        assert!(commit(&mut o, 0, &cfg).is_none());
        let owned = rec(1, 5, Some(("a", 3)));
        let mut asks = owned.clone();
        asks.handover = Some(("b".into(), 3));
        let equal = entry(
            Op::Cycle(CycleAction::RequestedHandover),
            owned.clone(),
            asks,
        );
        assert!(commit(&mut o, 0, &equal).is_some());
        let mut higher = owned.clone();
        higher.handover = Some(("b".into(), 4));
        let e = entry(
            Op::Cycle(CycleAction::RequestedHandover),
            owned.clone(),
            higher.clone(),
        );
        assert!(commit(&mut o, 0, &e).is_none());
        cfg.config = Some(ConfigView {
            allow_preemption: false,
            ..ConfigView::enabled(2 * SEC)
        });
        assert!(commit(&mut o, 0, &cfg).is_none());
        let e = entry(Op::Cycle(CycleAction::RequestedHandover), owned, higher);
        assert!(commit(&mut o, 0, &e).is_some());
    }
}
