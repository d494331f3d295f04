//! The records a decision writes: an owned record (acquire, renew) or a vacancy (step down).

use super::{
    Action, Adoption, CycleInput, Decision, LocalState, PendingAttempt, Plan, Tenure, after,
    next_renewal, vacancy_lease,
};
use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::record::{AttemptId, FenceRecord, LeaderRecord, Named, Party};

/// What differs between renewing and acquiring an owned record.
pub(super) struct Owned {
    pub(super) ballot: crate::ids::Ballot,
    pub(super) handover: Option<Party>,
    /// With an operator's request kept: the name it directs the vacancy to.
    pub(super) handover_to: Option<String>,
    pub(super) acquired_at: LocalInstant,
    pub(super) drain: Option<super::Drain>,
}

/// The record this candidate writes as owner (renewal + 1, the configured lease, its payload,
/// this attempt's id) and the tenure to adopt once that write is confirmed, dated from this
/// attempt's start. The caller sets the action, the fence and the next action time.
///
/// A write that shortens the lease caps the belief held now, before the commit: if the
/// commit's result is unknown but it applied, followers time the shorter lease, and the
/// belief must already end as the shorter lease says (docs/design.md §10.3).
pub(super) fn write_owned(
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
        handover_to: owned.handover_to,
        leader_version: input.version.cloned(),
    };
    let tenure = Tenure {
        ballot: write.ballot,
        renewal: write.renewal,
        lease,
        valid_until,
        acquired_at: owned.acquired_at,
        drain: owned.drain,
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
        ineligible: None,
        refused: None,
    })
}

/// Stops believing at once, then plans the vacancy (same ballot, new renewal) reserved for
/// `reserve`. Remembers the release, so a vacancy that never lands is written again.
pub(super) fn step_down(
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
pub(super) fn release(
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
        handover_to: None,
        leader_version: rec.leader_version.clone(),
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
        ineligible: None,
        refused: None,
    })
}
