//! The one ranking of candidates for leadership (docs/design.md §13.2, §14.3): eligibility first, then
//! the version under the election's policy, then priority, then registration order (earlier
//! first). Preemption, handover targets, resignations, the takeover stagger and every
//! reservation use it, and nothing else ranks candidates.
//!
//! Only eligible candidates rank: an ineligible one counts in no rank and is never the best.
//! Whether another candidate is eligible is judged by [`Roster::eligible`] alone: its
//! registration, and the operators' mark on its name as the deciding transaction read it.
//! Candidates that registered no version rank as the oldest under every version policy.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;

use semver::Version;

use crate::config::VersionPolicy;
use crate::ids::{CandidateId, Priority};
use crate::record::{CandidateRecord, Eligibility, Named};

/// The operators' marks (docs/design.md §13.6), by the candidate name each excludes.
pub(crate) type Marks = BTreeMap<String, Eligibility>;

/// No marks at all.
#[cfg(test)]
static NO_MARKS: Marks = BTreeMap::new();

/// The candidates as a decision reads them: their registrations, and the operators' marks by
/// name. Every rule that ranks or chooses another candidate reads it through here, so none
/// can see a registration without its mark.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Roster<'a> {
    rows: &'a [(CandidateId, CandidateRecord)],
    marks: &'a Marks,
}

impl<'a> Roster<'a> {
    /// The registrations `rows` under the operators' `marks`.
    pub(crate) fn new(rows: &'a [(CandidateId, CandidateRecord)], marks: &'a Marks) -> Self {
        Roster { rows, marks }
    }

    /// The registrations `rows`, no operator having marked any name.
    #[cfg(test)]
    pub(crate) fn unmarked(rows: &'a [(CandidateId, CandidateRecord)]) -> Self {
        Roster::new(rows, &NO_MARKS)
    }

    /// Other registrations under the same marks.
    pub(crate) fn with_rows<'b>(self, rows: &'b [(CandidateId, CandidateRecord)]) -> Roster<'b>
    where
        'a: 'b,
    {
        Roster::new(rows, self.marks)
    }

    /// The registrations.
    pub(crate) fn rows(&self) -> &'a [(CandidateId, CandidateRecord)] {
        self.rows
    }

    /// `id`'s registration, if it is listed.
    pub(crate) fn find(&self, id: &CandidateId) -> Option<&'a CandidateRecord> {
        self.rows.iter().find(|(c, _)| c == id).map(|(_, r)| r)
    }

    /// **Whether a registered candidate may lead**, the one place another candidate's
    /// eligibility is judged (docs/design.md §13.1, §13.6): its registration says so (its
    /// health, and the mark it read when it last wrote it) and no operator's mark on its name
    /// excludes it now. A mark reaches the registrations of that name only as each candidate
    /// writes its next one; until then the mark itself decides, so no rule ranks, reserves
    /// for or waits on a candidate an operator has excluded, whichever candidate of the name.
    pub(crate) fn eligible(&self, id: &CandidateId, rec: &CandidateRecord) -> bool {
        rec.is_eligible()
            && self
                .marks
                .get(id.name())
                .is_none_or(Eligibility::is_eligible)
    }

    /// How a registered candidate stands for leadership: what the ranking compares.
    pub(crate) fn standing(&self, id: &CandidateId, rec: &'a CandidateRecord) -> Standing<'a> {
        Standing {
            eligible: self.eligible(id, rec),
            version: rec.version.as_ref(),
            priority: rec.priority,
        }
    }
}

/// How a candidate stands for leadership: what the ranking compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Standing<'a> {
    pub(crate) eligible: bool,
    pub(crate) version: Option<&'a Version>,
    pub(crate) priority: Priority,
}

/// What the ranking knows of the election: its version policy, and the version of its
/// current (or last) leader, which `no-downgrade` ranks against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ranking<'a> {
    pub(crate) policy: VersionPolicy,
    pub(crate) leader_version: Option<&'a Version>,
}

/// A version as the policies order it: by semver precedence (docs/design.md §14.1), so build
/// metadata (`2.0.0+sha.b`) makes no version newer or older than the one without it; no
/// version sorts before every version.
#[derive(Clone, Copy, Debug)]
struct Precedence<'a>(Option<&'a Version>);

impl Ord for Precedence<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.0, other.0) {
            (Some(a), Some(b)) => a.cmp_precedence(b),
            (a, b) => a.is_some().cmp(&b.is_some()),
        }
    }
}

impl PartialOrd for Precedence<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Precedence<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Precedence<'_> {}

/// A version's place under a policy: greater ranks higher. Only values of one policy are
/// ever compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum VersionClass<'a> {
    /// `ignore`: every version alike.
    Flat,
    /// `prefer-newest`: newer first; no version is the oldest (`None` sorts first).
    Newer(Precedence<'a>),
    /// `prefer-oldest`: older first; no version is the oldest, so first of all.
    Older(Reverse<Precedence<'a>>),
    /// `no-downgrade`: whether the version is at least the leader's.
    NotOlder(bool),
}

impl<'a> Ranking<'a> {
    fn class(&self, version: Option<&'a Version>) -> VersionClass<'a> {
        match self.policy {
            VersionPolicy::PreferNewest => VersionClass::Newer(Precedence(version)),
            VersionPolicy::PreferOldest => VersionClass::Older(Reverse(Precedence(version))),
            VersionPolicy::NoDowngrade => VersionClass::NotOlder(match self.leader_version {
                None => true,
                Some(l) => Precedence(version) >= Precedence(Some(l)),
            }),
            _ => VersionClass::Flat,
        }
    }

    /// How `a` compares with `b` (eligibility, version class, priority; not registration).
    pub(crate) fn compare(&self, a: &Standing<'a>, b: &Standing<'a>) -> Ordering {
        (a.eligible, self.class(a.version), a.priority).cmp(&(
            b.eligible,
            self.class(b.version),
            b.priority,
        ))
    }

    /// Whether `a` ranks ahead of `b` by eligibility and the version policy alone, before
    /// any priority: the part of the ranking that is a rule for takeovers, not a preference
    /// (docs/design.md §4, §14.3). Under [`VersionPolicy::Ignore`] nobody does, between
    /// eligible candidates.
    pub(crate) fn policy_outranks(&self, a: &Standing<'a>, b: &Standing<'a>) -> bool {
        (a.eligible, self.class(a.version)) > (b.eligible, self.class(b.version))
    }

    /// Whether `a` may preempt `b`: `a` is eligible and ranks strictly above `b` (equal
    /// standings never preempt; an ineligible candidate preempts nobody, also a leader that
    /// holds while not eligible itself, against whom two ineligible standings would compare
    /// by version and priority alone).
    pub(crate) fn outranks(&self, a: &Standing<'a>, b: &Standing<'a>) -> bool {
        a.eligible && self.compare(a, b) == Ordering::Greater
    }

    /// The total order of registrations: standing, then the earlier registration.
    fn total(&self, a: (Standing<'a>, u64), b: (Standing<'a>, u64)) -> Ordering {
        self.compare(&a.0, &b.0).then(b.1.cmp(&a.1))
    }
}

/// The live eligible candidates that rank ahead of this one for a takeover, by the total
/// order (standing, then the earlier registration). Candidates in `exclude` (the lapsed owner,
/// the reservation holder) are not counted.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ranked_ahead<'a>(
    me: &CandidateId,
    mine: Standing<'a>,
    my_registration: u64,
    roster: Roster<'a>,
    current_renewal: u64,
    max_lag: u64,
    exclude: &[&CandidateId],
    ranking: Ranking<'a>,
) -> Vec<&'a (CandidateId, CandidateRecord)> {
    roster
        .rows
        .iter()
        .filter(|(id, c)| {
            id != me
                && !exclude.contains(&id)
                && roster.eligible(id, c)
                && c.is_live(current_renewal, max_lag)
                && ranking
                    .compare(&roster.standing(id, c), &mine)
                    .then(my_registration.cmp(&c.registration))
                    == Ordering::Greater
        })
        .collect()
}

/// This candidate's rank among the live eligible candidates that could take over: how many of
/// them rank above it ([`ranked_ahead`]).
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rank_among<'a>(
    me: &CandidateId,
    mine: Standing<'a>,
    my_registration: u64,
    roster: Roster<'a>,
    current_renewal: u64,
    max_lag: u64,
    exclude: &[&CandidateId],
    ranking: Ranking<'a>,
) -> u32 {
    let ahead = ranked_ahead(
        me,
        mine,
        my_registration,
        roster,
        current_renewal,
        max_lag,
        exclude,
        ranking,
    );
    u32::try_from(ahead.len()).unwrap_or(u32::MAX)
}

/// **What the version policy allows**, the one place it is written: the live eligible
/// candidates (other than those in `exclude`) that the policy ranks ahead of `standing`
/// ([`Ranking::policy_outranks`]: their version, before any priority). A candidate with none
/// ahead of it is one the policy lets lead; one with some must wait for them: a follower to
/// take over (while they heartbeat, docs/design.md §4), an operator's `resign --to` to name
/// it (docs/design.md §13.6, §14.2).
pub(crate) fn policy_ahead<'a>(
    standing: &Standing<'a>,
    roster: Roster<'a>,
    current_renewal: u64,
    max_lag: u64,
    exclude: &[&CandidateId],
    ranking: Ranking<'a>,
) -> Vec<&'a (CandidateId, CandidateRecord)> {
    roster
        .rows
        .iter()
        .filter(|(id, c)| {
            !exclude.contains(&id)
                && roster.eligible(id, c)
                && c.is_live(current_renewal, max_lag)
                && ranking.policy_outranks(&roster.standing(id, c), standing)
        })
        .collect()
}

/// **The reservation target**, the one place it is chosen: the best live eligible candidate
/// other than `me`, by the ranking. Eligible as [`Roster::eligible`] judges it, so never a
/// candidate whose name an operator has marked, even one whose registration, written before
/// the mark, still says it is eligible.
pub(crate) fn best_live<'a>(
    me: &CandidateId,
    roster: Roster<'a>,
    current_renewal: u64,
    max_lag: u64,
    ranking: Ranking<'a>,
) -> Option<Named> {
    roster
        .rows
        .iter()
        .filter(|(id, c)| id != me && roster.eligible(id, c) && c.is_live(current_renewal, max_lag))
        .max_by(|(ia, a), (ib, b)| {
            ranking.total(
                (roster.standing(ia, a), a.registration),
                (roster.standing(ib, b), b.registration),
            )
        })
        .map(|(id, c)| Named::new(id.clone(), c.priority))
}
