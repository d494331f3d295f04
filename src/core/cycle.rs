//! One election cycle decided, as the leader (renew, hand over, step down) or as a follower
//! ([`follower`]).

use super::operator::{DirectedRefusal, directed_target};
use super::rank::{Ranking, Standing, best_live};
use super::write::{Owned, step_down, write_owned};
use super::{
    Action, CycleInput, Decision, Drain, Ineligible, LocalState, Lookup, Mode, Tenure,
    UnhealthyPolicy, after, nothing,
};
use crate::error::ElectionError;
use crate::record::{CandidateRecord, Named, Party};
use follower::decide_as_follower;

mod follower;

/// Decides one election cycle. Mutates `st` only with facts and demotions; promotions are
/// returned in the plan for [`LocalState::adopt`]. A [`Decision::Need`] changes nothing
/// that deciding again with the same input would not change the same way.
///
/// # Errors
///
/// Exhausted counters (ballot or renewal at `u64::MAX`), and
/// [`ElectionError::CycleInProgress`] when the record read is this candidate's own write from
/// this same transaction (a cycle whose transaction had not ended).
pub(crate) fn decide_cycle(
    st: &mut LocalState,
    input: &CycleInput<'_>,
) -> Result<Decision, ElectionError> {
    let rec = input.leader;
    let cfg = input.config;
    let t0 = input.started_at;

    st.recognize_own_write(rec, cfg, input.read_version)?;
    st.check_tenure(rec, t0);
    st.observe(rec, input.read_at);

    if let Some(tenure) = st.tenure().cloned() {
        return decide_as_leader(st, input, tenure);
    }
    if input.mode == Mode::RefreshOnly {
        return Ok(nothing(None));
    }
    if st.unwritten_release(rec) {
        // This candidate stepped down, but its vacancy never landed: the record still names
        // it (and nobody else believes), so write the vacancy again.
        return release_again(st, input);
    }
    if !cfg.election_enabled || !input.eligible {
        // Elections off, or not eligible: it never campaigns (docs/design.md §13.2).
        return Ok(nothing(None));
    }
    decide_as_follower(st, input)
}

/// Whether `reg` is a live registration, measured against the record's renewals.
fn live(input: &CycleInput<'_>, reg: Option<&CandidateRecord>) -> bool {
    reg.is_some_and(|r| r.is_live(input.leader.renewal, input.config.renewals_before_dead()))
}

/// The ranking of this election's candidates (docs/design.md §14.3): its version policy, against the
/// version of its current (or last) leader.
fn ranking<'a>(input: &CycleInput<'a>) -> Ranking<'a> {
    Ranking {
        policy: input.config.version_policy,
        leader_version: input.leader.leader_version.as_ref(),
    }
}

/// This candidate's standing, as it registers in this transaction.
fn my_standing<'a>(input: &CycleInput<'a>) -> Standing<'a> {
    Standing {
        eligible: input.eligible,
        version: input.version,
        priority: input.priority,
    }
}

/// A candidate's handover request, if this leader must honour it: preemption is on, and the
/// requester is registered, live, eligible and outranks this leader by its registration (the
/// ranking of docs/design.md §14.3: version under the policy, then priority). `Err` asks for the
/// requester's registration first.
fn honourable_request(input: &CycleInput<'_>, req: &Named) -> Result<Option<Party>, Lookup> {
    if !input.config.allow_preemption {
        return Ok(None);
    }
    let Some(roster) = input.lookups.requester else {
        return Err(Lookup::Requester(req.id.clone()));
    };
    let reg = roster.find(&req.id);
    let outranks = reg.is_some_and(|r| {
        ranking(input).outranks(&roster.standing(&req.id, r), &my_standing(input))
    });
    Ok((outranks && live(input, reg)).then(|| Party::Candidate(req.clone())))
}

/// The best live eligible candidate other than this one, to reserve a vacancy for. `Err` asks
/// for the registry first.
fn best_live_reservation(st: &LocalState, input: &CycleInput<'_>) -> Result<Option<Party>, Lookup> {
    let roster = input.lookups.registry.ok_or(Lookup::Registry)?;
    Ok(best_live(
        st.id(),
        roster,
        input.leader.renewal,
        input.config.renewals_before_dead(),
        ranking(input),
    )
    .map(Party::Candidate))
}

fn decide_as_leader(
    st: &mut LocalState,
    input: &CycleInput<'_>,
    tenure: Tenure,
) -> Result<Decision, ElectionError> {
    let rec = input.leader;
    let cfg = input.config;
    let t0 = input.started_at;

    if !cfg.election_enabled {
        return step_down(st, input, None, Action::SteppedDown);
    }
    // The grace counts from the guard's closing: when the runner closed it (after the commit
    // that closed it was confirmed, and however the drain's reason changed since); without a
    // runner's word, the start of the cycle whose renewal closed it, noted by the adoption of
    // that renewal only; else this cycle, if its own renewal closes it. A renewal that never
    // committed closed nothing, so it starts no grace (docs/design.md §10.6).
    let drain_since = st
        .guard_closed_at()
        .or(tenure.drain.as_ref().map(|d| d.since))
        .unwrap_or(t0);
    let grace_end = after(drain_since, cfg.handover_grace);
    let mut ineligible = None;
    if !input.eligible {
        // Not eligible (docs/design.md §13.3): hand over to the best live eligible candidate as an
        // honoured request does (its work drained first, at most the grace); with nobody
        // eligible, the policy decides.
        // An operator's directed request is honoured here too (docs/design.md §13.6).
        let reserve = match directed_or_best(st, input) {
            Ok(reserve) => reserve,
            Err(need) => return Ok(Decision::Need(need)),
        };
        if reserve.is_some() || input.when_ineligible == UnhealthyPolicy::Release {
            if !st.busy() || t0 >= grace_end {
                return step_down(st, input, reserve, Action::SteppedDownIneligible)
                    .map(|d| stepping_down_ineligible(d, Ineligible::SteppingDown));
            }
            // Draining: renew meanwhile, keeping any request as it stands.
            let owned = Owned {
                ballot: rec.ballot,
                handover: rec.handover.clone(),
                handover_to: rec.handover_to.clone(),
                acquired_at: tenure.acquired_at,
                drain: Some(Drain {
                    since: drain_since,
                    request: tenure.drain.and_then(|d| d.request),
                }),
            };
            let mut plan = write_owned(st, input, owned)?;
            plan.action = Action::Renewed;
            plan.next_action_at = Some(grace_end);
            plan.ineligible = Some(Ineligible::SteppingDown);
            return Ok(Decision::Plan(plan));
        }
        // Hold: keep leading (nobody live is eligible), and hand over once one is.
        ineligible = Some(Ineligible::Holding);
    }

    // The request read, as the drain notes it: one other than the drain's is seen for the
    // first time.
    let request = rec
        .handover
        .clone()
        .map(|party| (party, rec.handover_to.clone()));
    let first_sight = tenure.drain.as_ref().is_none_or(|d| d.request != request);
    let mut next_action_at = None;
    // The request the renewal keeps in the record, and whether its keeping closes the guard.
    let mut keep_request = None;
    let mut closes = false;
    let mut refused = None;
    match rec.handover.as_ref() {
        None => {}
        Some(Party::Candidate(req)) => {
            let reserve = match honourable_request(input, req) {
                Ok(reserve) => reserve,
                Err(need) => return Ok(Decision::Need(need)),
            };
            if let Some(reserve) = reserve {
                keep_request = rec.handover.clone();
                let tenure_end = after(tenure.acquired_at, cfg.min_tenure);
                if t0 < tenure_end && tenure.drain.is_none() {
                    // Within the minimum tenure the request is kept, but the guard stays
                    // open: a closed guard is never held longer than the grace and a
                    // heartbeat (docs/design.md §10.6). The drain starts at the first cycle
                    // from the tenure's end.
                    next_action_at = Some(tenure_end);
                } else if !st.busy() || t0 >= grace_end {
                    return step_down(st, input, Some(reserve), Action::HandedOver)
                        .map(|d| honouring(d, rec.handover.clone()));
                } else {
                    // The guard closes now (or stays closed, if an earlier request or the
                    // leader's ineligibility closed it: the grace then runs from then).
                    next_action_at = Some(grace_end);
                    closes = true;
                }
            }
            // A request that is not honourable (preemption disabled, the requester no longer
            // outranks this leader, or is gone) is dropped by the renewal below.
        }
        Some(Party::Operator(_)) => {
            // An operator's request: step down whatever the priorities and the preemption
            // setting, after draining in-flight work within the grace, and reserve for the
            // best live eligible candidate (or the one of the name the request directs it to)
            // so leadership moves in one commit.
            if let (Some(to), true) = (rec.handover_to.as_deref(), first_sight) {
                // A directed request whose target is not live and eligible, or not allowed by
                // the version policy, when the leader first reads it is refused before the
                // guard closes for it: the leader keeps leading, the request is cleared, and
                // the reason is published (docs/design.md §13.6, §14.2).
                match directed_reservation(st, input, to) {
                    Err(need) => return Ok(Decision::Need(need)),
                    Ok(Err(why)) => {
                        refused = Some(format!("{why}, when the leader read the request"));
                    }
                    Ok(Ok(_)) => {}
                }
            }
            if refused.is_none() {
                if !st.busy() || t0 >= grace_end {
                    let reserve = match directed_or_best(st, input) {
                        Ok(reserve) => reserve,
                        Err(need) => return Ok(Decision::Need(need)),
                    };
                    return step_down(st, input, reserve, Action::HandedOver)
                        .map(|d| honouring(d, rec.handover.clone()));
                }
                next_action_at = Some(grace_end);
                keep_request = rec.handover.clone();
                closes = true;
            }
        }
    }

    // Renew: same ballot, new renewal, validity from this attempt's start. A renewal that
    // closes the guard notes the drain, adopted only once its commit is confirmed.
    let drain = if closes {
        Some(Drain {
            since: drain_since,
            request,
        })
    } else {
        None
    };
    let handover_to = keep_request
        .as_ref()
        .and_then(Party::operator)
        .and_then(|_| rec.handover_to.clone());
    let owned = Owned {
        ballot: rec.ballot,
        handover: keep_request,
        handover_to,
        acquired_at: tenure.acquired_at,
        drain,
    };
    let honoured = if closes { owned.handover.clone() } else { None };
    let mut plan = write_owned(st, input, owned)?;
    plan.action = Action::Renewed;
    plan.next_action_at = next_action_at;
    plan.honoured = honoured;
    plan.ineligible = ineligible;
    plan.refused = refused;
    Ok(Decision::Plan(plan))
}

/// The candidate an operator's directed request in the record names, if it is live and
/// eligible; else (no directed request, or its target died or became ineligible while the
/// work drained, the guard closed already) the best live eligible candidate. `Err` asks for
/// the registry first.
fn directed_or_best(st: &LocalState, input: &CycleInput<'_>) -> Result<Option<Party>, Lookup> {
    let rec = input.leader;
    if let (Some(Party::Operator(_)), Some(to)) = (&rec.handover, rec.handover_to.as_deref()) {
        if let Ok(found) = directed_reservation(st, input, to)? {
            return Ok(Some(found));
        }
    }
    best_live_reservation(st, input)
}

/// The target of an operator's directed request named `name`
/// ([`directed_target`](super::operator::directed_target): live, eligible, and allowed by the
/// version policy), or why there is none. `Err` asks for the registry first.
fn directed_reservation(
    st: &LocalState,
    input: &CycleInput<'_>,
    name: &str,
) -> Result<Result<Party, DirectedRefusal>, Lookup> {
    let roster = input.lookups.registry.ok_or(Lookup::Registry)?;
    Ok(directed_target(
        st.id(),
        roster,
        name,
        input.leader.renewal,
        input.config.renewals_before_dead(),
        ranking(input),
    )
    .map(Party::Candidate))
}

/// The decision, noting that this leader steps down because it is not eligible.
fn stepping_down_ineligible(d: Decision, why: Ineligible) -> Decision {
    match d {
        Decision::Plan(mut plan) => {
            plan.ineligible = Some(why);
            Decision::Plan(plan)
        }
        need => need,
    }
}

/// The decision, noting the request it honours.
fn honouring(d: Decision, request: Option<Party>) -> Decision {
    match d {
        Decision::Plan(mut plan) => {
            plan.honoured = request;
            Decision::Plan(plan)
        }
        need => need,
    }
}

/// Writes the vacancy again after a release whose write never landed (the record still
/// names this candidate, which no longer believes). The reason and the reservation are chosen
/// again from the record and the registry as they are now, as a leader would choose them:
/// elections disabled: unreserved; an honourable candidate request: the requester; an
/// operator's request: the candidate it directs to while live and eligible, else the best
/// live candidate; no reason left (the request was withdrawn or
/// is no longer honourable): a resignation, reserved for the best live candidate.
fn release_again(st: &mut LocalState, input: &CycleInput<'_>) -> Result<Decision, ElectionError> {
    let rec = input.leader;
    if !input.config.election_enabled {
        return step_down(st, input, None, Action::SteppedDown);
    }
    if !input.eligible {
        // Not eligible: the live eligible target of an operator's directed request, else the
        // best live eligible candidate, or unreserved (it let go already, so holding is no
        // longer an option).
        return match directed_or_best(st, input) {
            Ok(reserve) => step_down(st, input, reserve, Action::SteppedDownIneligible)
                .map(|d| stepping_down_ineligible(d, Ineligible::SteppingDown)),
            Err(need) => Ok(Decision::Need(need)),
        };
    }
    if let Some(Party::Candidate(req)) = rec.handover.as_ref() {
        match honourable_request(input, req) {
            Ok(Some(reserve)) => {
                return step_down(st, input, Some(reserve), Action::HandedOver)
                    .map(|d| honouring(d, rec.handover.clone()));
            }
            Ok(None) => {}
            Err(need) => return Ok(Decision::Need(need)),
        }
    }
    let (action, honoured) = match rec.handover {
        Some(Party::Operator(_)) => (Action::HandedOver, rec.handover.clone()),
        _ => (Action::Resigned, None),
    };
    // An operator's request directed at a name: that candidate while it is live and eligible,
    // as the release that never landed chose it (docs/design.md §13.6); else the best.
    match directed_or_best(st, input) {
        Ok(reserve) => step_down(st, input, reserve, action).map(|d| honouring(d, honoured)),
        Err(need) => Ok(Decision::Need(need)),
    }
}
