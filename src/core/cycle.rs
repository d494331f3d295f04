//! One election cycle decided, as the leader (renew, hand over, step down) or as a follower.

use super::operator::{DirectedRefusal, directed_target};
use super::rank::{Ranking, Standing, best_live, policy_ahead, ranked_ahead};
use super::write::{Owned, step_down, write_owned};
use super::{
    Action, CycleInput, Decision, Drain, Ineligible, LocalState, Lookup, Mode, Plan, Tenure,
    UnhealthyPolicy, after, lapse_at, nothing,
};
use crate::clock::LocalInstant;
use crate::error::ElectionError;
use crate::ids::CandidateId;
use crate::record::{CandidateRecord, FenceRecord, Named, Party};

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

fn decide_as_follower(
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
        let silence = cfg.reservation_timeout();
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
            // of them has been silent for the reservation timeout (dead, though the registry,
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
