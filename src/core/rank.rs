//! The registered candidates ranked: a candidate's rank among the live ones, the best live one.
//! Only eligible candidates rank (DESIGN §13.2): an ineligible one counts in no rank and is
//! never the best.

use crate::ids::{CandidateId, Priority};
use crate::record::{CandidateRecord, Named};

/// This candidate's rank among the live eligible candidates that could take over: how many of
/// them have a higher priority, or the same priority and an earlier registration. Candidates
/// in `exclude` (the lapsed owner, the reservation holder) are not counted.
pub(crate) fn rank_among(
    me: &CandidateId,
    my_priority: Priority,
    my_registration: u64,
    candidates: &[(CandidateId, CandidateRecord)],
    current_renewal: u64,
    max_lag: u64,
    exclude: &[&CandidateId],
) -> u32 {
    let ahead = candidates
        .iter()
        .filter(|(id, c)| {
            id != me
                && !exclude.contains(&id)
                && c.is_eligible()
                && c.is_live(current_renewal, max_lag)
                && (c.priority > my_priority
                    || (c.priority == my_priority && c.registration < my_registration))
        })
        .count();
    u32::try_from(ahead).unwrap_or(u32::MAX)
}

/// The best live eligible candidate other than `me`: highest priority, then earliest
/// registration.
pub(crate) fn best_live(
    me: &CandidateId,
    candidates: &[(CandidateId, CandidateRecord)],
    current_renewal: u64,
    max_lag: u64,
) -> Option<Named> {
    candidates
        .iter()
        .filter(|(id, c)| id != me && c.is_eligible() && c.is_live(current_renewal, max_lag))
        .max_by(|(_, a), (_, b)| {
            a.priority
                .cmp(&b.priority)
                .then(b.registration.cmp(&a.registration))
        })
        .map(|(id, c)| Named::new(id.clone(), c.priority))
}
