//! The pure decision core: no I/O, no clocks, no randomness.
//!
//! Given the decoded records, the candidate's local state and two clock readings (one taken
//! before the attempt, one after its reads), [`decide_cycle`] says what to write and what to
//! adopt once the commit is confirmed. It keeps the protocol's asymmetry:
//!
//! - **belief is lost early**: demotions (lease lapsed locally, record moved on, stepping down
//!   for a handover, resigning) take effect in the local state at once, before any commit;
//! - **belief is gained late**: leadership is adopted only from a confirmed commit, or from
//!   finding one's own attempt id in the record, and always dated from that attempt's start.

pub(crate) mod operator;
mod state;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use state::Role;
pub(crate) use state::{LocalState, PendingAttempt, Tenure};

use std::time::Duration;

use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::ids::{CandidateId, Priority};
use crate::record::{AttemptId, CandidateRecord, FenceRecord, LeaderRecord, Named};

/// What a cycle is allowed to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Everything: acquire, renew, request or honour a handover, step down.
    Cycle,
    /// Only renew an existing, locally valid leadership (v0.11's `refresh_lease`).
    RefreshOnly,
}

/// The inputs of one attempt, besides the local state.
#[derive(Debug)]
pub(crate) struct CycleInput<'a> {
    pub(crate) config: &'a ElectionConfig,
    pub(crate) leader: &'a LeaderRecord,
    /// This candidate's priority, as registered in this same transaction.
    pub(crate) priority: Priority,
    /// The payload to publish while leading.
    pub(crate) payload: Option<&'a [u8]>,
    /// A clock reading taken before the attempt's reads.
    pub(crate) started_at: LocalInstant,
    /// A clock reading taken after the attempt's reads.
    pub(crate) read_at: LocalInstant,
    pub(crate) mode: Mode,
}

/// What the attempt does to the leader record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: this candidate follows (or leads and was only refreshed by someone else).
    None,
    /// Acquired a vacancy or took over a lapsed lease: a new ballot.
    Acquired,
    /// Renewed its own lease, keeping the ballot.
    Renewed,
    /// Asked the (lower-priority) leader to hand over.
    RequestedHandover,
    /// Stepped down for a handover, reserving the vacancy for the requester.
    HandedOver,
    /// Stepped down because elections are disabled.
    SteppedDown,
    /// Resigned, reserving the vacancy for the best live candidate if there is one.
    Resigned,
}

/// The decision for one attempt.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "short-lived: returned once per attempt and destructured at once; boxing the plan \
              would only add an allocation per cycle"
)]
pub(crate) enum Decision {
    /// Taking over is due but depends on this candidate's rank among live candidates: scan
    /// the registry, store the rank with [`LocalState::set_rank`], and decide again.
    NeedRank,
    /// The plan for this attempt.
    Plan(Plan),
}

/// What to write, and what to adopt after the commit is confirmed.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) action: Action,
    /// The new leader record; when set, the leader key must also get a read-conflict range.
    pub(crate) write: Option<LeaderRecord>,
    /// The new fence record, when ownership changes.
    pub(crate) fence: Option<FenceRecord>,
    /// The tenure to adopt once this attempt's commit is confirmed.
    pub(crate) adopt: Option<Adoption>,
    /// The earliest local instant at which this candidate could act without any change to the
    /// record (takeover eligibility, end of a handover grace).
    pub(crate) next_action_at: Option<LocalInstant>,
}

/// Leadership prepared by an attempt, to adopt only after its commit is confirmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Adoption {
    pub(crate) seq: u64,
    pub(crate) tenure: Tenure,
}

fn nothing(next_action_at: Option<LocalInstant>) -> Decision {
    Decision::Plan(Plan {
        action: Action::None,
        write: None,
        fence: None,
        adopt: None,
        next_action_at,
    })
}

pub(crate) fn next_renewal(r: &LeaderRecord) -> Result<u64, ElectionError> {
    r.renewal
        .checked_add(1)
        .ok_or(ElectionError::CounterExhausted { what: "renewal" })
}

/// The instant `d` after `t`, saturating (durations are bounded by configuration).
fn after(t: LocalInstant, d: Duration) -> LocalInstant {
    t.saturating_add(d)
}

/// Decides one election cycle. Mutates `st` only with facts and demotions; promotions are
/// returned in the plan for [`LocalState::adopt`].
///
/// # Errors
///
/// Only exhausted counters (ballot or renewal at `u64::MAX`).
pub(crate) fn decide_cycle(
    st: &mut LocalState,
    input: &CycleInput<'_>,
) -> Result<Decision, ElectionError> {
    let rec = input.leader;
    let cfg = input.config;
    let t0 = input.started_at;

    st.recognize_own_write(rec, cfg);
    st.check_tenure(rec, t0);
    st.observe(rec, input.read_at);

    if let Some(tenure) = st.tenure().cloned() {
        return decide_as_leader(st, input, tenure);
    }
    if input.mode == Mode::RefreshOnly || !cfg.election_enabled {
        return Ok(nothing(None));
    }
    decide_as_follower(st, input)
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
        st.demote();
        let write = vacancy(st, rec, None, cfg.lease_duration)?;
        return Ok(release(st, write, Action::SteppedDown, t0));
    }

    let mut next_action_at = None;
    let mut keep_request = None;
    if let Some(req) = rec.handover.as_ref() {
        let honourable = cfg.allow_preemption && req.priority > input.priority;
        if honourable {
            let tenure_end = after(tenure.acquired_at, cfg.min_tenure);
            if t0 >= tenure_end {
                let seen = st.note_handover_request(t0);
                let grace_end = after(seen, cfg.handover_grace);
                if !st.busy() || t0 >= grace_end {
                    st.demote();
                    let write = vacancy(st, rec, Some(req.clone()), cfg.lease_duration)?;
                    return Ok(release(st, write, Action::HandedOver, t0));
                }
                next_action_at = Some(grace_end);
            } else {
                next_action_at = Some(tenure_end);
            }
            keep_request = Some(req.clone());
        }
        // A request that is not honourable (preemption disabled, or the requester no longer
        // outranks this leader) is dropped by the renewal below.
    }

    // Renew: same ballot, new renewal, validity from this attempt's start.
    let handover_seen_at = keep_request
        .as_ref()
        .and_then(|_| st.tenure().and_then(|t| t.handover_seen_at));
    let owned = Owned {
        ballot: rec.ballot,
        handover: keep_request,
        acquired_at: tenure.acquired_at,
        // Read back after noting the request, so the grace is not restarted by renewals.
        handover_seen_at,
    };
    let mut plan = write_owned(st, input, owned)?;
    plan.action = Action::Renewed;
    plan.next_action_at = next_action_at;
    Ok(Decision::Plan(plan))
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
    let reserved_for_me = rec.reservation.as_ref().is_some_and(|r| &r.id == st.id());
    let takeover_at = if reserved_for_me {
        // The leader stepped down for this candidate: fill the reservation at once.
        return acquire(st, input);
    } else {
        // Base instant, and the reading it is compared with.
        let (base, now) = if rec.owner.is_none() && rec.reservation.is_none() {
            // An unreserved vacancy: nobody believes they lead, so timing is irrelevant to
            // safety; only the rank stagger applies, counted from the first sighting.
            (obs.first_seen, input.read_at)
        } else {
            // A lease held by someone (possibly this candidate's own lost record), or a
            // vacancy reserved for someone else: a full lease of unchanged observation,
            // counted from a reading taken after the read that first saw it, compared with
            // a reading taken before this attempt (so before the belief would start).
            (after(obs.first_seen, rec.lease), t0)
        };
        let at = if now < base || cfg.takeover_stagger.is_zero() {
            base // not due yet (the rank is looked up only when it is), or no stagger
        } else {
            match obs.rank {
                None => return Ok(Decision::NeedRank),
                Some(rank) => {
                    // Capped at one heartbeat: ranks are liveness only, and candidates that
                    // died while renewals were frozen can still count as live, so the bound
                    // "a leader within lease + 2 heartbeats" must not depend on them.
                    let stagger = cfg
                        .takeover_stagger
                        .saturating_mul(rank)
                        .min(cfg.heartbeat_interval);
                    after(base, stagger)
                }
            }
        };
        if now >= at {
            return acquire(st, input);
        }
        Some(at)
    };

    // Not taking over now: ask a lower-priority leader to hand over?
    if let Some(owner) = rec.owner.as_ref() {
        let outranks_owner = input.priority > owner.priority && &owner.id != st.id();
        let outranks_request = rec
            .handover
            .as_ref()
            .is_none_or(|h| input.priority > h.priority && &h.id != st.id());
        if cfg.allow_preemption && outranks_owner && outranks_request {
            let seq = st.next_seq()?;
            let mut write = rec.clone();
            write.handover = Some(Named::new(st.id().clone(), input.priority));
            write.writer = Some(AttemptId {
                candidate: st.id().clone(),
                seq,
            });
            st.push_pending(PendingAttempt {
                seq,
                started_at: t0,
                promotes: false,
            });
            return Ok(Decision::Plan(Plan {
                action: Action::RequestedHandover,
                write: Some(write),
                fence: None,
                adopt: None,
                next_action_at: takeover_at,
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
        acquired_at: input.started_at,
        handover_seen_at: None,
    };
    let mut plan = write_owned(st, input, owned)?;
    plan.action = Action::Acquired;
    plan.fence = plan.write.as_ref().map(FenceRecord::of);
    Ok(Decision::Plan(plan))
}

/// What differs between renewing and acquiring an owned record.
struct Owned {
    ballot: crate::ids::Ballot,
    handover: Option<Named>,
    acquired_at: LocalInstant,
    handover_seen_at: Option<LocalInstant>,
}

/// The record this candidate writes as owner (renewal + 1, the configured lease, its payload,
/// this attempt's id) and the tenure to adopt once that write is confirmed, dated from this
/// attempt's start. The caller sets the action, the fence and the next action time.
fn write_owned(
    st: &mut LocalState,
    input: &CycleInput<'_>,
    owned: Owned,
) -> Result<Plan, ElectionError> {
    let t0 = input.started_at;
    let lease = input.config.lease_duration;
    let seq = st.next_seq()?;
    let write = LeaderRecord {
        ballot: owned.ballot,
        owner: Some(Named::new(st.id().clone(), input.priority)),
        renewal: next_renewal(input.leader)?,
        lease,
        handover: owned.handover,
        reservation: None,
        payload: input.payload.map(<[u8]>::to_vec),
        writer: Some(AttemptId {
            candidate: st.id().clone(),
            seq,
        }),
    };
    let tenure = Tenure {
        ballot: write.ballot,
        renewal: write.renewal,
        lease,
        valid_until: after(t0, input.config.local_validity(lease)),
        acquired_at: owned.acquired_at,
        handover_seen_at: owned.handover_seen_at,
    };
    st.push_pending(PendingAttempt {
        seq,
        started_at: t0,
        promotes: true,
    });
    Ok(Plan {
        action: Action::None,
        write: Some(write),
        fence: None,
        adopt: Some(Adoption { seq, tenure }),
        next_action_at: None,
    })
}

/// A vacancy written by the current owner: same ballot, new renewal, optionally reserved.
fn vacancy(
    st: &mut LocalState,
    rec: &LeaderRecord,
    reserve_for: Option<Named>,
    lease: Duration,
) -> Result<LeaderRecord, ElectionError> {
    let seq = st.next_seq()?;
    Ok(LeaderRecord {
        ballot: rec.ballot,
        owner: None,
        renewal: next_renewal(rec)?,
        lease,
        handover: None,
        reservation: reserve_for,
        payload: None,
        writer: Some(AttemptId {
            candidate: st.id().clone(),
            seq,
        }),
    })
}

fn release(st: &mut LocalState, write: LeaderRecord, action: Action, t0: LocalInstant) -> Decision {
    if let Some(w) = write.writer.as_ref() {
        st.push_pending(PendingAttempt {
            seq: w.seq,
            started_at: t0,
            promotes: false,
        });
    }
    let fence = FenceRecord::of(&write);
    Decision::Plan(Plan {
        action,
        write: Some(write),
        fence: Some(fence),
        adopt: None,
        next_action_at: None,
    })
}

/// Why a resignation was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResignRejected {
    /// The record is not owned by this candidate.
    NotLeader {
        /// The current owner, if any.
        current: Option<CandidateId>,
    },
    /// The caller expected a different ballot than the one it holds.
    BallotMismatch {
        /// The ballot the caller expected.
        expected: crate::ids::Ballot,
        /// The ballot in the record.
        current: crate::ids::Ballot,
    },
}

/// Decides a resignation. On success the candidate has already stopped believing it leads.
///
/// `best` is the best live candidate other than this one, if any; the vacancy is reserved
/// for it so leadership moves in one commit instead of one lease.
pub(crate) fn decide_resign(
    st: &mut LocalState,
    rec: &LeaderRecord,
    cfg: &ElectionConfig,
    expected: Option<crate::ids::Ballot>,
    best: Option<Named>,
    t0: LocalInstant,
) -> Result<Result<Plan, ResignRejected>, ElectionError> {
    if !rec.is_owned_by(st.id()) {
        return Ok(Err(ResignRejected::NotLeader {
            current: rec.owner.as_ref().map(|o| o.id.clone()),
        }));
    }
    if let Some(expected) = expected {
        if expected != rec.ballot {
            return Ok(Err(ResignRejected::BallotMismatch {
                expected,
                current: rec.ballot,
            }));
        }
    }
    st.demote();
    let write = vacancy(st, rec, best, cfg.lease_duration)?;
    match release(st, write, Action::Resigned, t0) {
        Decision::Plan(plan) => Ok(Ok(plan)),
        Decision::NeedRank => Ok(Err(ResignRejected::NotLeader { current: None })),
    }
}

/// This candidate's rank among the live candidates that could take over: how many of them
/// have a higher priority, or the same priority and an earlier registration. Candidates in
/// `exclude` (the lapsed owner, the lapsed reservation holder) are not counted.
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
                && c.is_live(current_renewal, max_lag)
                && (c.priority > my_priority
                    || (c.priority == my_priority && c.registration < my_registration))
        })
        .count();
    u32::try_from(ahead).unwrap_or(u32::MAX)
}

/// The best live candidate other than `me`: highest priority, then earliest registration.
pub(crate) fn best_live(
    me: &CandidateId,
    candidates: &[(CandidateId, CandidateRecord)],
    current_renewal: u64,
    max_lag: u64,
) -> Option<Named> {
    candidates
        .iter()
        .filter(|(id, c)| id != me && c.is_live(current_renewal, max_lag))
        .max_by(|(_, a), (_, b)| {
            a.priority
                .cmp(&b.priority)
                .then(b.registration.cmp(&a.registration))
        })
        .map(|(id, c)| Named::new(id.clone(), c.priority))
}
