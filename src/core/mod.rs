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
pub(crate) mod runner;
pub(crate) mod shard;
mod state;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use state::Role;
pub(crate) use state::{LocalState, Observed, PendingAttempt, Tenure};

use std::time::Duration;

use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::ids::{CandidateId, Priority};
use crate::record::{AttemptId, CandidateRecord, FenceRecord, LeaderRecord, Named, Party};

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
    /// This candidate's registration number (its own record, read in this transaction).
    pub(crate) registration: u64,
    /// The payload to publish while leading.
    pub(crate) payload: Option<&'a [u8]>,
    /// A clock reading taken before the attempt's reads.
    pub(crate) started_at: LocalInstant,
    /// A clock reading taken after the attempt's reads.
    pub(crate) read_at: LocalInstant,
    /// The read version this attempt's reads observed, when the store reports one.
    pub(crate) read_version: Option<u64>,
    pub(crate) mode: Mode,
    /// Registry facts, present once a [`Decision::Need`] asked for them.
    pub(crate) lookups: Lookups<'a>,
}

/// Registry facts a decision may need, looked up only when it asks ([`Decision::Need`]): most
/// cycles need none, so they read no more than three keys.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lookups<'a> {
    /// Every registered candidate (a snapshot scan of the registry).
    pub(crate) registry: Option<&'a [(CandidateId, CandidateRecord)]>,
    /// The registration of the candidate whose handover request the record carries:
    /// `Some(None)` when it is not registered.
    pub(crate) requester: Option<Option<&'a CandidateRecord>>,
}

/// A registry fact a decision needs before it can be taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Scan the registry (ranks, the best live candidate).
    Registry,
    /// Read this candidate's registration (the author of a handover request).
    Requester(CandidateId),
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
    /// Stepped down for a handover, reserving the vacancy for the requester (or, for an
    /// operator's request, for the best live candidate).
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
    /// The decision depends on a registry fact: look it up, add it to the input's
    /// [`Lookups`], and decide again. Nothing was changed locally.
    Need(Lookup),
    /// The plan for this attempt.
    Plan(Plan),
}

/// What to write, and what to adopt after the commit is confirmed.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) action: Action,
    /// The new leader record; when set, the leader key must also get a read-conflict range
    /// (and so must the registration of a candidate the record reserves the vacancy for).
    pub(crate) write: Option<LeaderRecord>,
    /// The new fence record, when ownership changes.
    pub(crate) fence: Option<FenceRecord>,
    /// The tenure to adopt once this attempt's commit is confirmed.
    pub(crate) adopt: Option<Adoption>,
    /// The earliest local instant at which this candidate could act without any change to the
    /// record (takeover eligibility, end of a handover grace).
    pub(crate) next_action_at: Option<LocalInstant>,
    /// The handover request (a candidate's or an operator's) this leader honours: it steps
    /// down now, or drains its work first (then the renewal keeps the request).
    pub(crate) honoured: Option<Party>,
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
        honoured: None,
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

/// **The lapse rule**, the one place it is written: an observation identity first seen at
/// `first_seen` (a clock reading taken *after* the read that first saw it) has been unchanged
/// for a full `lease` from the returned instant on. A follower may take over from then
/// (comparing a reading taken *before* its attempt), and an observer reports the lease lapsed.
/// Used by followers' cycles, [`LeaderElection::current_leader`](crate::LeaderElection) and
/// the runner's observer mode.
pub(crate) fn lapse_at(first_seen: LocalInstant, lease: Duration) -> LocalInstant {
    after(first_seen, lease)
}

/// **The vacancy's lease**, the one place it is written: a vacancy written over `rec` makes
/// successors wait at least the lease `rec` was written with, the lease its owner (or any
/// other process with the owner's id) may still believe in, even when the configured lease
/// is shorter now. Used by resignations, stepping down, unregistering and `force_vacate`.
pub(crate) fn vacancy_lease(rec: &LeaderRecord, cfg: &ElectionConfig) -> Duration {
    rec.lease.max(cfg.lease_duration)
}

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
    if !cfg.election_enabled {
        return Ok(nothing(None));
    }
    decide_as_follower(st, input)
}

/// Whether `reg` is a live registration, measured against the record's renewals.
fn live(input: &CycleInput<'_>, reg: Option<&CandidateRecord>) -> bool {
    reg.is_some_and(|r| r.is_live(input.leader.renewal, input.config.renewals_before_dead()))
}

/// A candidate's handover request, if this leader must honour it: preemption is on, the
/// requester outranks this leader (in its request and in its registration), and it is
/// registered and live. `Err` asks for the requester's registration first.
fn honourable_request(input: &CycleInput<'_>, req: &Named) -> Result<Option<Party>, Lookup> {
    if !input.config.allow_preemption || req.priority <= input.priority {
        return Ok(None);
    }
    let Some(reg) = input.lookups.requester else {
        return Err(Lookup::Requester(req.id.clone()));
    };
    let outranks = reg.is_some_and(|r| r.priority > input.priority);
    Ok((outranks && live(input, reg)).then(|| Party::Candidate(req.clone())))
}

/// The best live candidate other than this one, to reserve a vacancy for. `Err` asks for the
/// registry first.
fn best_live_reservation(st: &LocalState, input: &CycleInput<'_>) -> Result<Option<Party>, Lookup> {
    let rows = input.lookups.registry.ok_or(Lookup::Registry)?;
    Ok(best_live(
        st.id(),
        rows,
        input.leader.renewal,
        input.config.renewals_before_dead(),
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

    let mut next_action_at = None;
    let mut keep_request = None;
    match rec.handover.as_ref() {
        None => {}
        Some(Party::Candidate(req)) => {
            let reserve = match honourable_request(input, req) {
                Ok(reserve) => reserve,
                Err(need) => return Ok(Decision::Need(need)),
            };
            if let Some(reserve) = reserve {
                let tenure_end = after(tenure.acquired_at, cfg.min_tenure);
                if t0 < tenure_end {
                    next_action_at = Some(tenure_end);
                } else {
                    let grace_end = after(st.note_handover_request(t0), cfg.handover_grace);
                    if !st.busy() || t0 >= grace_end {
                        return step_down(st, input, Some(reserve), Action::HandedOver)
                            .map(|d| honouring(d, rec.handover.clone()));
                    }
                    next_action_at = Some(grace_end);
                }
                keep_request = rec.handover.clone();
            }
            // A request that is not honourable (preemption disabled, the requester no longer
            // outranks this leader, or is gone) is dropped by the renewal below.
        }
        Some(Party::Operator(_)) => {
            // An operator's request: step down whatever the priorities and the preemption
            // setting, after draining in-flight work within the grace, and reserve for the
            // best live candidate so leadership moves in one commit.
            let grace_end = after(st.note_handover_request(t0), cfg.handover_grace);
            if !st.busy() || t0 >= grace_end {
                let reserve = match best_live_reservation(st, input) {
                    Ok(reserve) => reserve,
                    Err(need) => return Ok(Decision::Need(need)),
                };
                return step_down(st, input, reserve, Action::HandedOver)
                    .map(|d| honouring(d, rec.handover.clone()));
            }
            next_action_at = Some(grace_end);
            keep_request = rec.handover.clone();
        }
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
    let honoured = owned.handover.clone();
    let mut plan = write_owned(st, input, owned)?;
    plan.action = Action::Renewed;
    plan.next_action_at = next_action_at;
    plan.honoured = honoured;
    Ok(Decision::Plan(plan))
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
/// operator's request: the best live candidate; no reason left (the request was withdrawn or
/// is no longer honourable): a resignation, reserved for the best live candidate.
fn release_again(st: &mut LocalState, input: &CycleInput<'_>) -> Result<Decision, ElectionError> {
    let rec = input.leader;
    if !input.config.election_enabled {
        return step_down(st, input, None, Action::SteppedDown);
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
    match best_live_reservation(st, input) {
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
        let (base, now) = if rec.owner.is_none() && rec.reservation.is_none() {
            // An unreserved vacancy: nobody believes they lead, so timing is irrelevant to
            // safety; only the rank stagger applies, counted from the first sighting.
            (obs.first_seen, input.read_at)
        } else {
            // A lease held by someone (possibly this candidate's own lost record), or a
            // vacancy held for someone else (a candidate or an operator): a full lease of
            // unchanged observation, compared with a reading taken before this attempt (so
            // before the belief would start).
            (lapse_at(obs.first_seen, rec.lease), t0)
        };
        let at = if now < base || cfg.takeover_stagger.is_zero() {
            base // not due yet (the rank is looked up only when it is), or no stagger
        } else {
            let rank = match obs.rank {
                Some(rank) => rank,
                None => {
                    let Some(rows) = input.lookups.registry else {
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
                    let rank = rank_among(
                        st.id(),
                        input.priority,
                        input.registration,
                        rows,
                        rec.renewal,
                        cfg.renewals_before_dead(),
                        &exclude,
                    );
                    st.set_rank(rank);
                    rank
                }
            };
            // Capped at one heartbeat: ranks are liveness only, and candidates that died
            // while renewals were frozen can still count as live, so the bound "a leader
            // within lease + 2 heartbeats" must not depend on them.
            let stagger = cfg
                .takeover_stagger
                .saturating_mul(rank)
                .min(cfg.heartbeat_interval);
            after(base, stagger)
        };
        if now >= at {
            return acquire(st, input);
        }
        Some(at)
    };

    // Not taking over now: ask a lower-priority leader to hand over?
    if let Some(owner) = rec.owner.as_ref() {
        let outranks_owner = input.priority > owner.priority && &owner.id != st.id();
        // A candidate's request is replaced only by a strictly higher one; an operator's
        // request is never replaced.
        let outranks_request = match rec.handover.as_ref() {
            None => true,
            Some(Party::Candidate(h)) => input.priority > h.priority && &h.id != st.id(),
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
            return Ok(Decision::Plan(Plan {
                action: Action::RequestedHandover,
                write: Some(write),
                fence: None,
                adopt: None,
                next_action_at: takeover_at,
                honoured: None,
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
    handover: Option<Party>,
    acquired_at: LocalInstant,
    handover_seen_at: Option<LocalInstant>,
}

/// The record this candidate writes as owner (renewal + 1, the configured lease, its payload,
/// this attempt's id) and the tenure to adopt once that write is confirmed, dated from this
/// attempt's start. The caller sets the action, the fence and the next action time.
///
/// A write that shortens the lease caps the belief held now, before the commit: if the
/// commit's result is unknown but it applied, followers time the shorter lease, and the
/// belief must already end as the shorter lease says (DESIGN §10.3).
fn write_owned(
    st: &mut LocalState,
    input: &CycleInput<'_>,
    owned: Owned,
) -> Result<Plan, ElectionError> {
    let t0 = input.started_at;
    let lease = input.config.lease_duration;
    let valid_until = after(t0, input.config.local_validity(lease));
    st.cap_belief(lease, valid_until);
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
        valid_until,
        acquired_at: owned.acquired_at,
        handover_seen_at: owned.handover_seen_at,
    };
    st.push_pending(PendingAttempt {
        seq,
        started_at: t0,
        promotes: true,
        read_version: input.read_version,
    });
    Ok(Plan {
        action: Action::None,
        write: Some(write),
        fence: None,
        adopt: Some(Adoption { seq, tenure }),
        next_action_at: None,
        honoured: None,
    })
}

/// Stops believing at once, then plans the vacancy (same ballot, new renewal) reserved for
/// `reserve`. Remembers the release, so a vacancy that never lands is written again.
fn step_down(
    st: &mut LocalState,
    input: &CycleInput<'_>,
    reserve: Option<Party>,
    action: Action,
) -> Result<Decision, ElectionError> {
    st.demote();
    release(
        st,
        input.leader,
        reserve,
        input.config,
        action,
        input.started_at,
        input.read_version,
    )
    .map(Decision::Plan)
}

/// The vacancy plan of a candidate that has already stopped believing: same ballot, new
/// renewal, optionally reserved, written by this attempt.
fn release(
    st: &mut LocalState,
    rec: &LeaderRecord,
    reserve: Option<Party>,
    cfg: &ElectionConfig,
    action: Action,
    t0: LocalInstant,
    read_version: Option<u64>,
) -> Result<Plan, ElectionError> {
    let seq = st.next_seq()?;
    let write = LeaderRecord {
        ballot: rec.ballot,
        owner: None,
        renewal: next_renewal(rec)?,
        lease: vacancy_lease(rec, cfg),
        handover: None,
        reservation: reserve,
        payload: None,
        writer: Some(AttemptId {
            candidate: st.id().clone(),
            seq,
        }),
    };
    st.push_pending(PendingAttempt {
        seq,
        started_at: t0,
        promotes: false,
        read_version,
    });
    st.note_release(rec.ballot);
    let fence = FenceRecord::of(&write);
    Ok(Plan {
        action,
        write: Some(write),
        fence: Some(fence),
        adopt: None,
        next_action_at: None,
        honoured: None,
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
/// for it so leadership moves in one commit instead of one lease, if this candidate held the
/// ballot itself (otherwise the vacancy waits a full lease: see below).
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
    // Only a candidate that held this ballot itself knows that nobody believes in it once it
    // stops: another process (or another `Candidate` value) with the same id may still do.
    // Then the vacancy is held like an operator's, so successors wait a full lease.
    let reserve = if st.held(rec.ballot) {
        best.map(Party::Candidate)
    } else {
        Some(Party::Operator(st.id().clone()))
    };
    st.demote();
    release(st, rec, reserve, cfg, Action::Resigned, t0, None).map(Ok)
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
