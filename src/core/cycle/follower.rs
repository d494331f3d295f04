//! A follower's cycle: wait out the leader's lease, or take the leadership when it lapsed,
//! was handed to this candidate, or this candidate may preempt it.

use super::{my_standing, ranking};
use crate::clock::LocalInstant;
use crate::core::rank::{Standing, policy_ahead, ranked_ahead};
use crate::core::write::{Owned, write_owned};
use crate::core::{
    Action, CycleInput, Decision, LocalState, Lookup, Plan, after, lapse_at, nothing,
};
use crate::error::ElectionError;
use crate::ids::CandidateId;
use crate::record::{FenceRecord, Named, Party};

pub(super) fn decide_as_follower(
    st: &mut LocalState,
    input: &CycleInput<'_>,
) -> Result<Decision, ElectionError> {
    let rec = input.leader;
    let cfg = input.config;
    let t0 = input.started_at;
    let Some(obs) = st.observed().cloned() else {
        return Ok(nothing(None));
    };

    // When may this candidate take over, and does it depend on rank?
    let reserved_for_me = rec
        .reservation
        .as_ref()
        .is_some_and(|r| r.is_candidate(st.id()));
    let takeover_at = if reserved_for_me {
        // The leader stepped down for this candidate: fill the reservation at once.
        return acquire(st, input);
    } else {
        // Base instant, and the reading it is compared with.
        let leader_written = rec.owner.is_none()
            && rec
                .reservation
                .as_ref()
                .is_none_or(|r| r.candidate().is_some());
        let (base, now) = if rec.owner.is_none() && rec.reservation.is_none() {
            // An unreserved vacancy: nobody believes they lead, so timing is irrelevant to
            // safety; only the ranking applies, from the first sighting.
            (obs.first_seen, input.read_at)
        } else if leader_written {
            // A vacancy its leader reserved for another candidate (a handover, a resignation,
            // a step-down for health): nobody believes in it either, so it opens to the others
            // once its holder has not filled it for the reservation timeout (a holder that
            // died must not cost a lease, docs/design.md §4), then by rank.
            (
                after(obs.first_seen, cfg.reservation_timeout()),
                input.read_at,
            )
        } else {
            // A lease held by someone (possibly this candidate's own lost record), or a
            // vacancy an operator holds: a full lease of unchanged observation, compared with
            // a reading taken before this attempt (so before the belief would start).
            (lapse_at(obs.first_seen, rec.lease), t0)
        };
        // Who ranks ahead is looked up from the last reservation timeout before the takeover
        // falls due, so that a candidate ranked ahead that died with the leader has been
        // heard silent by then; never in a healthy lease's first heartbeat, so followers of a
        // leader that renews read the registry no more than before (docs/design.md §5).
        let silence = cfg.silence_before_passed_over();
        let scan_from = LocalInstant::from_origin(base.since_origin().saturating_sub(silence))
            .max(after(obs.first_seen, cfg.heartbeat_interval).min(base));
        let at = if now < scan_from {
            base // not due yet (the registry is looked up only when it soon is)
        } else {
            // Who ranks ahead of this candidate among the live eligible ones (docs/design.md
            // §4, §14.3)? The ranking is judged against the record's leader version: a lapsed
            // leader's, kept in the record, so `no-downgrade` ranks a takeover as it ranks a
            // handover.
            let Some(roster) = input.lookups.registry else {
                return Ok(Decision::Need(Lookup::Registry));
            };
            let exclude: Vec<&CandidateId> = [
                rec.owner.as_ref().map(|o| &o.id),
                rec.reservation
                    .as_ref()
                    .and_then(Party::candidate)
                    .map(|r| &r.id),
            ]
            .into_iter()
            .flatten()
            .collect();
            let mine = my_standing(input);
            let ahead = ranked_ahead(
                st.id(),
                mine,
                input.registration,
                roster,
                rec.renewal,
                cfg.renewals_before_dead(),
                &exclude,
                ranking(input),
            );
            // The rule: a candidate the version policy ranks ahead (docs/design.md §14.2: a
            // version `prefer-oldest` or `no-downgrade` would not let this one pass) that
            // still heartbeats takes over, not this one; this one takes over only once each
            // of them has been silent for `silence_before_passed_over` (dead, though the registry,
            // measured in renewals that stopped with the leader, still shows it live).
            // Priority is a preference, not a rule: a takeover by a lower priority is followed
            // by a cooperative preemption.
            let mut exclude_me = exclude.clone();
            exclude_me.push(st.id());
            let beats: Vec<(&CandidateId, u64)> = policy_ahead(
                &mine,
                roster,
                rec.renewal,
                cfg.renewals_before_dead(),
                &exclude_me,
                ranking(input),
            )
            .into_iter()
            .map(|(id, c)| (id, c.heartbeat))
            .collect();
            let silent_from = st.silent_ahead_from(&beats, input.read_at, silence);
            // The speed-up: the rank stagger (priority included), so the best usually goes
            // first and a takeover is rarely followed by a preemption. Capped at one heartbeat.
            let rank = u32::try_from(ahead.len()).unwrap_or(u32::MAX);
            let stagger = cfg
                .takeover_stagger
                .saturating_mul(rank)
                .min(cfg.heartbeat_interval);
            let staggered = after(base, stagger);
            silent_from.map_or(staggered, |s| s.max(staggered))
        };
        if now >= at {
            return acquire(st, input);
        }
        Some(at)
    };

    // Not taking over now: ask a leader this candidate outranks to hand over? (The ranking of
    // docs/design.md §14.3: the leader's version is the record's, its priority the one it renewed
    // with; equal standings never preempt.)
    if let Some(owner) = rec.owner.as_ref() {
        let r = ranking(input);
        let owner_standing = Standing {
            eligible: true,
            version: rec.leader_version.as_ref(),
            priority: owner.priority,
        };
        let outranks_owner =
            &owner.id != st.id() && r.outranks(&my_standing(input), &owner_standing);
        // A candidate's request is replaced only by one that strictly outranks it (by its
        // registration); an operator's request is never replaced.
        let outranks_request = match rec.handover.as_ref() {
            None => true,
            Some(Party::Candidate(h)) if &h.id == st.id() => false,
            Some(Party::Candidate(h)) => {
                if !outranks_owner {
                    false
                } else {
                    match input.lookups.requester {
                        None => return Ok(Decision::Need(Lookup::Requester(h.id.clone()))),
                        Some(roster) => roster.find(&h.id).is_none_or(|reg| {
                            r.outranks(&my_standing(input), &roster.standing(&h.id, reg))
                        }),
                    }
                }
            }
            Some(Party::Operator(_)) => false,
        };
        if cfg.allow_preemption && outranks_owner && outranks_request {
            // The request changes neither the observation identity nor the attempt id, so
            // followers keep timing a dead leader and the owner can still recognise its own
            // unknown commit.
            let mut write = rec.clone();
            write.handover = Some(Party::Candidate(Named::new(
                st.id().clone(),
                input.priority,
            )));
            write.handover_to = None;
            return Ok(Decision::Plan(Plan {
                action: Action::RequestedHandover,
                write: Some(write),
                fence: None,
                adopt: None,
                next_action_at: takeover_at,
                honoured: None,
                ineligible: None,
                refused: None,
            }));
        }
    }
    Ok(nothing(takeover_at))
}

/// Acquire the record: ballot + 1, validity from this attempt's start.
fn acquire(st: &mut LocalState, input: &CycleInput<'_>) -> Result<Decision, ElectionError> {
    let owned = Owned {
        ballot: input.leader.ballot.next()?,
        handover: None,
        handover_to: None,
        acquired_at: input.started_at,
        drain: None,
    };
    let mut plan = write_owned(st, input, owned)?;
    plan.action = Action::Acquired;
    plan.fence = plan.write.as_ref().map(FenceRecord::of);
    Ok(Decision::Plan(plan))
}
