//! A member's graceful leave (docs/design.md §12.2, §12.3, §12.4): its belief ends at once, then one
//! commit ends its epoch, clears its inbox and gives back everything the records tie to it --
//! the shards it owned, vacated; those reserved for it, their reservation withdrawn -- so the
//! coordinator places them again at once, without a lease's wait, and no record is left asking
//! something of a member whose inbox no longer says so. Pure.
//!
//! A leave is not a cycle: it may run while a cycle of the same member is unsettled (another
//! task's heartbeat). Whatever that cycle did, it can no longer be adopted once the leave has
//! begun: the leave ends the member's epoch locally first (nothing is adopted at an epoch the
//! member no longer holds), and the two transactions write the member's record, so at most one
//! of them commits after the other has read it.

use std::collections::{BTreeMap, BTreeSet};

use super::budget::{Budget, KeyLens, reads_within_budget};
use super::member::MemberState;
use crate::codec;
use crate::error::ElectionError;
use crate::ids::ShardId;
use crate::record::shard::{Inbox, MemberRecord, ShardRecord};

/// The writes of a leave.
#[derive(Debug)]
pub(crate) struct LeavePlan {
    /// The member's record, fenced at its next epoch.
    pub(crate) record: MemberRecord,
    /// Shards given back: those it owned at its epoch, vacated; those reserved for it, their
    /// reservation withdrawn. (Its inbox is cleared.)
    pub(crate) shards: Vec<(ShardId, ShardRecord)>,
}

impl MemberState {
    /// The first step of a leave, before anything is read: the member owns nothing from now
    /// on, adopts and recognises no attempt made before (its epoch is unknown locally until
    /// [`decide_leave`] sets the one the leave writes). Returns the shards the records may
    /// still tie to it, to give back: those it believed it owned, those whose release is not
    /// confirmed, those its unconfirmed attempts acquired (their commits may have landed), and
    /// those of every earlier try of this leave (whose commit failed or is unknown: the retry
    /// owns nothing locally any more, yet gives back what the first try would have).
    pub(crate) fn begin_leave(&mut self) -> BTreeSet<ShardId> {
        self.keep_to_give_back();
        let pending: Vec<ShardId> = self.pending_acquisitions().collect();
        self.leaving.extend(pending);
        let leaving = self.leaving.clone();
        self.lose_all();
        self.forget_attempts();
        self.epoch = None;
        leaving
    }
}

/// The shards a leave reads: those [`MemberState::begin_leave`] returned, and those its inbox
/// names (reserved for it, or to hand over), so that once it has left no record ties a shard to
/// it while its inbox, cleared, no longer says so; at most as many as a quarter of the
/// transaction's budget of conflict ranges holds (a member owning more leaves the rest naming
/// it at the epoch the leave ends: nobody's, and the coordinator withdraws them).
pub(crate) fn leave_lookups(
    believed: &BTreeSet<ShardId>,
    inbox: &Inbox,
    keys: KeyLens,
) -> Vec<ShardId> {
    let mut all = believed.clone();
    all.extend(inbox.reserved.iter().copied());
    all.extend(inbox.hand_over.iter().map(|(s, _)| *s));
    all.into_iter().take(reads_within_budget(keys)).collect()
}

/// Decides a leave from the member's record and the records of the shards [`leave_lookups`]
/// named, as read (serializably) in the leave's transaction. `None`: nothing to write (the member never
/// joined, or its epoch has already ended). Ends the member's epoch locally either way: no
/// attempt made before the leave is adopted afterwards.
///
/// # Errors
///
/// Exhausted counters.
pub(crate) fn decide_leave(
    st: &mut MemberState,
    record: Option<&MemberRecord>,
    shards: &BTreeMap<ShardId, ShardRecord>,
    keys: KeyLens,
) -> Result<Option<LeavePlan>, ElectionError> {
    // Whatever was adopted since `begin_leave` was decided before the leave read the record.
    st.lose_all();
    st.forget_attempts();
    let Some(record) = record else {
        st.leaving.clear();
        return Ok(None);
    };
    if record.fenced {
        // The epoch has ended (this leave's earlier try landed, or a takeover): whatever the
        // records still tie to it is nobody's.
        st.leaving.clear();
        st.epoch = Some(record.epoch);
        return Ok(None);
    }
    let gone = MemberRecord {
        epoch: record
            .epoch
            .checked_add(1)
            .ok_or(ElectionError::CounterExhausted { what: "epoch" })?,
        renewal: record
            .renewal
            .checked_add(1)
            .ok_or(ElectionError::CounterExhausted { what: "renewal" })?,
        fenced: true,
        writer: None,
        ..record.clone()
    };
    st.epoch = Some(gone.epoch);
    // The budget: the record, its mark and the inbox's clear, the conflicts of what was read,
    // then each shard given back while it fits (the rest name the member at the epoch this
    // leave ends: nobody's; the coordinator withdraws them).
    let mut budget = Budget::new();
    let own = keys.member(&st.id);
    budget.force(
        [
            Budget::conflict_cost(own).saturating_mul(2),
            Budget::set_cost(own, codec::member_len(&gone)),
            Budget::set_cost(own, codec::EPOCH_MARK_MAX),
            Budget::clear_cost(own),
            Budget::conflict_cost(keys.shard).saturating_mul(shards.len()),
        ]
        .into_iter()
        .fold(0usize, usize::saturating_add),
    );
    // Owned by this member at its current epoch, or at an earlier one (a cycle of this member
    // that began after the leave did joined at a new epoch and landed first): either way the
    // epoch the record names ends now, and what it gave this member is given back.
    let mut writes = Vec::new();
    for (shard, rec) in shards {
        let owned = rec
            .owner
            .as_ref()
            .is_some_and(|o| o.member == st.id && o.epoch <= record.epoch);
        let reserved = rec.owner.is_none() && rec.reserved_for.as_ref() == Some(&st.id);
        if owned || reserved {
            let next = ShardRecord {
                owner: None,
                move_to: None,
                reserved_for: None,
                ..rec.clone()
            };
            if budget.take(Budget::set_cost(keys.shard, codec::shard_len(&next))) {
                writes.push((*shard, next));
            }
        }
    }
    Ok(Some(LeavePlan {
        record: gone,
        shards: writes,
    }))
}
