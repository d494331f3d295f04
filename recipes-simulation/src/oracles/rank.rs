//! The ranking the oracles judge by, as DESIGN §13.2 and §14.2–3 state it: only eligible
//! candidates rank; among them the version under the election's policy comes first, then the
//! priority; of equals, the earlier registration. Written from the DESIGN for the oracles (the
//! library's own ranking is the thing judged), on the views the simulation records.
//!
//! - `ignore`: versions play no part;
//! - `prefer-newest`: a newer version ranks above an older one (no version is the oldest);
//! - `prefer-oldest`: an older version ranks above a newer one (no version is the oldest, so
//!   it ranks first);
//! - `no-downgrade`: a version at least the current (or last) leader's ranks above an older
//!   one; with no leader version, every version is at least it.

use std::cmp::Ordering;

use fdb_leader_election::{Version, VersionPolicy};

use crate::history::CandView;

/// A parsed version (`None`: none registered, or one that does not parse).
pub fn version(v: Option<&str>) -> Option<Version> {
    v.and_then(|s| Version::parse(s).ok())
}

/// How a candidate stands: its version and priority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stand {
    /// Its version.
    pub version: Option<Version>,
    /// Its priority.
    pub priority: i32,
}

impl Stand {
    /// The standing a registration gives.
    pub fn of(c: &CandView) -> Self {
        Stand {
            version: version(c.version.as_deref()),
            priority: c.priority,
        }
    }
}

/// The election's ranking: its policy, and the version of its current (or last) leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rank {
    /// The version policy.
    pub policy: VersionPolicy,
    /// The version of the leader the record names (or last named).
    pub leader: Option<Version>,
}

/// `a` against `b` by semver precedence (DESIGN §14.1: build metadata makes no version newer
/// or older); no version sorts first.
fn precedence(a: Option<&Version>, b: Option<&Version>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.cmp_precedence(b),
        (a, b) => a.is_some().cmp(&b.is_some()),
    }
}

impl Rank {
    /// How `a`'s version compares with `b`'s under the policy (greater ranks higher).
    pub fn versions(&self, a: Option<&Version>, b: Option<&Version>) -> Ordering {
        match self.policy {
            VersionPolicy::PreferNewest => precedence(a, b),
            VersionPolicy::PreferOldest => precedence(b, a),
            VersionPolicy::NoDowngrade => {
                let at_least = |v: Option<&Version>| match &self.leader {
                    None => true,
                    Some(l) => v.is_some_and(|v| v.cmp_precedence(l) != Ordering::Less),
                };
                at_least(a).cmp(&at_least(b))
            }
            _ => Ordering::Equal,
        }
    }

    /// How `a` compares with `b`: version under the policy, then priority.
    pub fn compare(&self, a: &Stand, b: &Stand) -> Ordering {
        self.versions(a.version.as_ref(), b.version.as_ref())
            .then(a.priority.cmp(&b.priority))
    }

    /// Whether `a` ranks strictly above `b` (what preemption needs).
    pub fn outranks(&self, a: &Stand, b: &Stand) -> bool {
        self.compare(a, b) == Ordering::Greater
    }
}

/// A registration as a transaction read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegView {
    /// Its candidate id.
    pub id: String,
    /// Its stable name (`CandidateId::name`).
    pub name: String,
    /// Its fields.
    pub cand: CandView,
}

impl RegView {
    /// Whether it was live measured against the leader record's renewal `renewal`.
    pub fn live(&self, renewal: u64, lag: u64) -> bool {
        renewal.saturating_sub(self.cand.seen_renewal) <= lag
    }
}

/// The candidate a leader reserves its vacancy for, of `rows` (other than `me`): the live
/// eligible one ranked first, of equals the earlier registration. `None`: nobody live is
/// eligible.
pub fn best<'a>(
    rank: &Rank,
    rows: impl IntoIterator<Item = &'a RegView>,
    me: &str,
    renewal: u64,
    lag: u64,
) -> Option<&'a RegView> {
    rows.into_iter()
        .filter(|r| r.id != me && r.cand.eligible && r.live(renewal, lag))
        .max_by(|a, b| {
            rank.compare(&Stand::of(&a.cand), &Stand::of(&b.cand))
                .then(b.cand.registration.cmp(&a.cand.registration))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn s(v: Option<&str>, priority: i32) -> Stand {
        Stand {
            version: version(v),
            priority,
        }
    }

    fn rank(policy: VersionPolicy, leader: Option<&str>) -> Rank {
        Rank {
            policy,
            leader: version(leader),
        }
    }

    #[test]
    fn every_policy_ranks_as_the_design_says() {
        let (old, new, none) = (Some("1.4.0"), Some("1.5.0"), None);
        let r = rank(VersionPolicy::Ignore, None);
        assert!(r.outranks(&s(old, 2), &s(new, 1)));
        let r = rank(VersionPolicy::PreferNewest, None);
        assert!(r.outranks(&s(new, 1), &s(old, 9)));
        assert!(
            r.outranks(&s(old, 1), &s(none, 9)),
            "no version is the oldest"
        );
        let r = rank(VersionPolicy::PreferOldest, None);
        assert!(r.outranks(&s(old, 1), &s(new, 9)));
        assert!(
            r.outranks(&s(none, 1), &s(old, 9)),
            "no version ranks first"
        );
        let r = rank(VersionPolicy::NoDowngrade, new);
        assert!(
            r.outranks(&s(new, 1), &s(old, 9)),
            "older than the leader's"
        );
        assert!(
            r.outranks(&s(Some("1.6.0"), 2), &s(new, 1)),
            "then priority"
        );
        assert!(
            !r.outranks(&s(Some("1.6.0"), 1), &s(new, 1)),
            "equal standings"
        );
        let r = rank(VersionPolicy::NoDowngrade, None);
        assert!(
            r.outranks(&s(none, 2), &s(new, 1)),
            "no leader version: priority"
        );
    }

    #[test]
    fn the_best_is_live_eligible_and_first_registered_of_equals() {
        let row = |id: &str, prio: i32, reg: u64, seen: u64, eligible: bool| RegView {
            id: id.into(),
            name: id.into(),
            cand: CandView {
                priority: prio,
                registration: reg,
                heartbeat: 0,
                seen_renewal: seen,
                eligible,
                version: None,
            },
        };
        let rows = [
            row("me", 9, 0, 10, true),
            row("sick", 8, 1, 10, false),
            row("dead", 8, 2, 1, true),
            row("late", 5, 4, 10, true),
            row("early", 5, 3, 10, true),
        ];
        let r = rank(VersionPolicy::Ignore, None);
        assert_eq!(
            best(&r, &rows, "me", 10, 3).map(|b| b.id.as_str()),
            Some("early")
        );
        assert!(best(&r, &rows[..3], "me", 10, 3).is_none());
    }
}
