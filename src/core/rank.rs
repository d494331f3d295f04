//! The one ranking of candidates for leadership (docs/design.md §13.2, §14.3): eligibility first, then
//! the version under the election's policy, then priority, then registration order (earlier
//! first). Preemption, handover targets, resignations, the takeover stagger and every
//! reservation use it, and nothing else ranks candidates.
//!
//! Only eligible candidates rank: an ineligible one counts in no rank and is never the best.
//! Candidates that registered no version rank as the oldest under every version policy.

use std::cmp::{Ordering, Reverse};

use semver::Version;

use crate::ids::{CandidateId, Priority};
use crate::record::{CandidateRecord, Named, VersionPolicy};

/// How a candidate stands for leadership: what the ranking compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Standing<'a> {
    pub(crate) eligible: bool,
    pub(crate) version: Option<&'a Version>,
    pub(crate) priority: Priority,
}

impl<'a> Standing<'a> {
    /// The standing a registration gives.
    pub(crate) fn of(rec: &'a CandidateRecord) -> Self {
        Standing {
            eligible: rec.is_eligible(),
            version: rec.version.as_ref(),
            priority: rec.priority,
        }
    }
}

/// What the ranking knows of the election: its version policy, and the version of its
/// current (or last) leader, which `no-downgrade` ranks against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ranking<'a> {
    pub(crate) policy: VersionPolicy,
    pub(crate) leader_version: Option<&'a Version>,
}

/// A version's place under a policy: greater ranks higher. Only values of one policy are
/// ever compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum VersionClass<'a> {
    /// `ignore`: every version alike.
    Flat,
    /// `prefer-newest`: newer first; no version is the oldest (`None` sorts first).
    Newer(Option<&'a Version>),
    /// `prefer-oldest`: older first; no version is the oldest, so first of all.
    Older(Reverse<Option<&'a Version>>),
    /// `no-downgrade`: whether the version is at least the leader's.
    NotOlder(bool),
}

impl<'a> Ranking<'a> {
    fn class(&self, version: Option<&'a Version>) -> VersionClass<'a> {
        match self.policy {
            VersionPolicy::PreferNewest => VersionClass::Newer(version),
            VersionPolicy::PreferOldest => VersionClass::Older(Reverse(version)),
            VersionPolicy::NoDowngrade => VersionClass::NotOlder(match self.leader_version {
                None => true,
                Some(l) => version.is_some_and(|v| v >= l),
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
    fn total(&self, a: &(&'a CandidateRecord, u64), b: &(&'a CandidateRecord, u64)) -> Ordering {
        self.compare(&Standing::of(a.0), &Standing::of(b.0))
            .then(b.1.cmp(&a.1))
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
    candidates: &'a [(CandidateId, CandidateRecord)],
    current_renewal: u64,
    max_lag: u64,
    exclude: &[&CandidateId],
    ranking: Ranking<'a>,
) -> Vec<&'a (CandidateId, CandidateRecord)> {
    candidates
        .iter()
        .filter(|(id, c)| {
            id != me
                && !exclude.contains(&id)
                && c.is_eligible()
                && c.is_live(current_renewal, max_lag)
                && ranking
                    .compare(&Standing::of(c), &mine)
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
    candidates: &'a [(CandidateId, CandidateRecord)],
    current_renewal: u64,
    max_lag: u64,
    exclude: &[&CandidateId],
    ranking: Ranking<'a>,
) -> u32 {
    let ahead = ranked_ahead(
        me,
        mine,
        my_registration,
        candidates,
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
    candidates: &'a [(CandidateId, CandidateRecord)],
    current_renewal: u64,
    max_lag: u64,
    exclude: &[&CandidateId],
    ranking: Ranking<'a>,
) -> Vec<&'a (CandidateId, CandidateRecord)> {
    candidates
        .iter()
        .filter(|(id, c)| {
            !exclude.contains(&id)
                && c.is_eligible()
                && c.is_live(current_renewal, max_lag)
                && ranking.policy_outranks(&Standing::of(c), standing)
        })
        .collect()
}

/// The best live eligible candidate other than `me`, by the ranking.
pub(crate) fn best_live<'a>(
    me: &CandidateId,
    candidates: &'a [(CandidateId, CandidateRecord)],
    current_renewal: u64,
    max_lag: u64,
    ranking: Ranking<'a>,
) -> Option<Named> {
    candidates
        .iter()
        .filter(|(id, c)| id != me && c.is_eligible() && c.is_live(current_renewal, max_lag))
        .max_by(|(_, a), (_, b)| ranking.total(&(a, a.registration), &(b, b.registration)))
        .map(|(id, c)| Named::new(id.clone(), c.priority))
}
