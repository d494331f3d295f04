//! The placement the coordinator writes (docs/design.md §12.3): the steps it takes (balance,
//! frozen or not, and the withdrawals of whatever names a member that is not live), the weight
//! a member is placed with, and what one shard's steps do to its record and to the members'
//! inboxes. Pure.

use std::collections::{BTreeMap, BTreeSet};

use super::placement::{self, MemberShare, Placement, PlacementStep, ShardState};
use crate::codec;
use crate::ids::{CandidateId, ShardId, Weight};
use crate::record::AttemptId;
use crate::record::shard::{Inbox, Layout, MemberRecord, ShardOwner, ShardRecord};

/// The shard a placement step is about.
pub(super) fn step_shard(step: &PlacementStep) -> ShardId {
    match step {
        PlacementStep::Reserve { shard, .. }
        | PlacementStep::Move { shard, .. }
        | PlacementStep::Withdraw { shard } => *shard,
    }
}

/// Whether an ownership lives: its member is live at the epoch it owns the shard in.
fn owner_live(epochs: &BTreeMap<&CandidateId, u64>, o: &ShardOwner) -> bool {
    epochs.get(&o.member).is_some_and(|e| *e == o.epoch)
}

/// A change to one member's inbox.
#[derive(Debug)]
pub(super) enum InboxEdit {
    /// The shard leaves the member's reservations.
    Unreserve(CandidateId),
    /// The shard leaves the member's requests to hand over.
    Unrequest(CandidateId),
    /// The shard is reserved for the member.
    Reserve(CandidateId),
    /// The member is asked to hand the shard over to `to`.
    Request { from: CandidateId, to: CandidateId },
}

impl InboxEdit {
    pub(super) fn member(&self) -> &CandidateId {
        match self {
            InboxEdit::Unreserve(m)
            | InboxEdit::Unrequest(m)
            | InboxEdit::Reserve(m)
            | InboxEdit::Request { from: m, .. } => m,
        }
    }

    /// The encoded length the edit adds for `shard`, if it adds an entry.
    pub(super) fn added_len(&self, shard: ShardId) -> Option<usize> {
        match self {
            InboxEdit::Unreserve(_) | InboxEdit::Unrequest(_) => None,
            InboxEdit::Reserve(_) => Some(codec::reserved_entry_len(shard)),
            InboxEdit::Request { to, .. } => Some(codec::hand_over_entry_len(shard, to)),
        }
    }

    pub(super) fn apply(self, inbox: &mut Inbox, shard: ShardId) {
        match self {
            InboxEdit::Unreserve(_) => inbox.reserved.retain(|s| *s != shard),
            InboxEdit::Unrequest(_) => inbox.hand_over.retain(|(s, _)| *s != shard),
            InboxEdit::Reserve(_) => inbox.reserved.push(shard),
            InboxEdit::Request { to, .. } => inbox.hand_over.push((shard, to)),
        }
    }
}

/// The record one shard's steps leave, and the inbox edits they make (in order).
pub(super) fn apply_steps(
    current: &ShardRecord,
    steps: &[&PlacementStep],
    writer: &AttemptId,
    epochs: &BTreeMap<&CandidateId, u64>,
) -> (ShardRecord, Vec<InboxEdit>) {
    let mut next = ShardRecord {
        writer: Some(writer.clone()),
        ..current.clone()
    };
    let mut edits = Vec::new();
    for step in steps {
        // Whatever the step, an old reservation or request leaves its member's inbox.
        if let Some(h) = &next.reserved_for {
            edits.push(InboxEdit::Unreserve(h.clone()));
        }
        if let (Some(o), Some(_)) = (&next.owner, &next.move_to) {
            edits.push(InboxEdit::Unrequest(o.member.clone()));
        }
        match step {
            PlacementStep::Reserve { holder, .. } => {
                next.owner = None;
                next.move_to = None;
                next.reserved_for = Some(holder.clone());
                edits.push(InboxEdit::Reserve(holder.clone()));
            }
            PlacementStep::Move { from, to, .. } => {
                next.move_to = Some(to.clone());
                next.reserved_for = None;
                edits.push(InboxEdit::Request {
                    from: from.clone(),
                    to: to.clone(),
                });
            }
            PlacementStep::Withdraw { .. } => {
                next.move_to = None;
                next.reserved_for = None;
                // An owner whose epoch ended owns nothing: the record stops naming it.
                if next.owner.as_ref().is_some_and(|o| !owner_live(epochs, o)) {
                    next.owner = None;
                }
            }
        }
    }
    (next, edits)
}

/// Placement as the coordinator computes it (docs/design.md §12.3): from the live members (with
/// their effective weights) at their current epochs and every shard's record, the target and
/// the next steps; under a frozen layout, only the steps that change no live member's
/// holding (reservations of shards nobody live holds, withdrawals of moves and reservations
/// toward members that are not live); with elections disabled, only withdrawals. Either way,
/// every record that still names a member that is not live is withdrawn (the owner of an
/// ended epoch is written out).
pub(crate) fn place(
    layout: &Layout,
    elections: bool,
    live: &[MemberShare],
    epochs: &BTreeMap<&CandidateId, u64>,
    shards: &[Option<ShardRecord>],
) -> Placement {
    let mut placement = balance(layout, live, epochs, shards);
    if !elections {
        // Elections disabled: nothing is placed; what was asked is withdrawn.
        placement.steps.clear();
    }
    // Whatever placement leaves alone that still names a member that is not live (a
    // reservation, a move request, an owner whose epoch ended) is withdrawn, so that no
    // record keeps naming a member after its epoch has ended and it can be forgotten.
    let placed: BTreeSet<ShardId> = placement.steps.iter().map(step_shard).collect();
    let is_live = |id: &CandidateId| epochs.contains_key(id);
    for (i, rec) in shards.iter().enumerate() {
        let shard = ShardId::new(u32::try_from(i).unwrap_or(u32::MAX));
        let Some(r) = rec else { continue };
        let stale = r.owner.as_ref().is_some_and(|o| !owner_live(epochs, o))
            || r.move_to
                .as_ref()
                .is_some_and(|to| !is_live(to) || !elections)
            || r.reserved_for
                .as_ref()
                .is_some_and(|h| !is_live(h) || !elections);
        if stale && !placed.contains(&shard) {
            placement.steps.push(PlacementStep::Withdraw { shard });
        }
    }
    placement.steps.sort_by_key(step_shard);
    placement
}

/// Balance alone ([`placement::plan`] over the records), frozen or not.
fn balance(
    layout: &Layout,
    live: &[MemberShare],
    epochs: &BTreeMap<&CandidateId, u64>,
    shards: &[Option<ShardRecord>],
) -> Placement {
    let owner_live = |o: &ShardOwner| epochs.get(&o.member).is_some_and(|e| *e == o.epoch);
    let states: Vec<ShardState> = shards
        .iter()
        .map(|r| match r {
            None => ShardState::Vacant,
            Some(r) => match (&r.owner, &r.move_to, &r.reserved_for) {
                (Some(o), Some(to), _) if owner_live(o) => ShardState::Moving {
                    owner: o.member.clone(),
                    to: to.clone(),
                },
                (Some(o), None, _) if owner_live(o) => ShardState::Owned {
                    owner: o.member.clone(),
                },
                // An owner whose epoch ended (fenced now or before): nobody's.
                (Some(_), _, _) => ShardState::Vacant,
                (None, _, Some(h)) => ShardState::Reserved { holder: h.clone() },
                (None, _, None) => ShardState::Vacant,
            },
        })
        .collect();
    let mut placement = placement::plan(live, &states, layout.max_concurrent_moves);
    if layout.frozen {
        // Frozen: nothing a live member holds changes hands (no move, no reservation taken
        // from a live holder); shards nobody live holds are still reserved.
        let live_ids: BTreeSet<&CandidateId> = live.iter().map(|m| &m.id).collect();
        // A move in flight to a live member (an operator's, made under the freeze) lands:
        // only moves and reservations toward members that are not live are withdrawn.
        placement.steps.retain(|s| match s {
            PlacementStep::Move { .. } => false,
            PlacementStep::Reserve { shard, .. } => !matches!(
                states.get(idx(*shard)),
                Some(ShardState::Reserved { holder }) if live_ids.contains(holder)
            ),
            PlacementStep::Withdraw { shard } => !matches!(
                states.get(idx(*shard)),
                Some(ShardState::Moving { to, .. }) if live_ids.contains(to)
            ),
        });
    }
    placement
}

/// The weight placement gives a member: 0 once an operator drained it (docs/design.md §12.5) or
/// while it is not eligible (§13.8), its own otherwise.
pub(crate) fn effective_weight(
    id: &CandidateId,
    rec: &MemberRecord,
    drained: &BTreeSet<CandidateId>,
) -> Weight {
    if drained.contains(id) || !rec.eligibility.is_eligible() {
        Weight::DRAINED
    } else {
        rec.weight
    }
}

pub(super) fn idx(shard: ShardId) -> usize {
    usize::try_from(shard.get()).unwrap_or(usize::MAX)
}
