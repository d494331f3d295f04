//! The coordinator's decisions (DESIGN §12.2, §12.3): the leader of the sharded election's
//! coordinator election times every member's record (the one lapse rule), fences out the
//! members whose record stayed unchanged for a full lease (their epoch bumped, in the same
//! commit as the reservations of their shards), and writes the next placement steps. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::placement::{self, MemberShare, Placement, PlacementStep, ShardState};
use crate::clock::LocalInstant;
use crate::core::lapse_at;
use crate::error::ElectionError;
use crate::ids::{CandidateId, ShardId, Weight};
use crate::record::AttemptId;
use crate::record::shard::{Inbox, Layout, MemberRecord, ShardOwner, ShardRecord};

/// A member record's observation identity, and since when the coordinator has seen it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    epoch: u64,
    renewal: u64,
    writer: Option<AttemptId>,
    first_seen: LocalInstant,
}

/// What the coordinator knows locally: when it first saw each member's current record.
#[derive(Clone, Debug, Default)]
pub(crate) struct CoordinatorState {
    seen: BTreeMap<CandidateId, Seen>,
    next_seq: u64,
    /// The earliest instant at which a member timed at the last reading, not lapsed then,
    /// lapses if its record stays unchanged.
    next_lapse: Option<LocalInstant>,
}

impl CoordinatorState {
    /// How long after `now` the next timing reading is due: `period` after the last one, or
    /// sooner, at the instant the earliest member timed unchanged lapses (a reading at that
    /// instant or later fences it out; waiting for the next period would add up to a period
    /// to a dead member's failover).
    pub(crate) fn next_reading_in(&self, now: LocalInstant, period: Duration) -> Duration {
        self.next_lapse
            .map_or(period, |at| at.saturating_duration_since(now).min(period))
    }
}

/// The inputs of one coordinator attempt.
#[derive(Debug)]
pub(crate) struct CoordinatorInput<'a> {
    /// The coordinator's id (the writer of what it writes).
    pub(crate) me: &'a CandidateId,
    pub(crate) layout: &'a Layout,
    /// Every member's record and inbox, as read.
    pub(crate) members: &'a BTreeMap<CandidateId, (MemberRecord, Inbox)>,
    /// Every shard's record (`None`: never written), by shard number.
    pub(crate) shards: &'a [Option<ShardRecord>],
    /// The members an operator drained: placed as if their weight were 0.
    pub(crate) drained: &'a BTreeSet<CandidateId>,
    /// A clock reading taken after the reads.
    pub(crate) read_at: LocalInstant,
    /// The assignments marker as read ([`assignments_digest`] of the records that published
    /// it), if any.
    pub(crate) marker: Option<u64>,
}

/// The writes of a coordinator attempt.
#[derive(Debug, Default)]
pub(crate) struct CoordinatorPlan {
    /// Members fenced out now (their epoch bumped).
    pub(crate) fenced: Vec<(CandidateId, MemberRecord)>,
    pub(crate) shards: Vec<(ShardId, ShardRecord)>,
    pub(crate) inboxes: Vec<(CandidateId, Inbox)>,
    /// The placement computed (for status and metrics).
    pub(crate) placement: Option<Placement>,
    /// A new assignments marker to write: the records read differ from the ones the stored
    /// marker was published for, so observers wake and read them.
    pub(crate) publish: Option<u64>,
}

/// A digest of what observers of the assignments see in the records: every shard's record
/// (owner and its epoch, ballot, move request, reservation; not its writer) and every member's
/// epoch and whether it is fenced out (not its renewals). Any change of ownership, request or
/// liveness changes it; a steady heartbeat does not.
pub(crate) fn assignments_digest(
    members: &BTreeMap<CandidateId, (MemberRecord, Inbox)>,
    shards: &[Option<ShardRecord>],
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    for (id, (rec, _)) in members {
        (id, rec.epoch, rec.fenced).hash(&mut h);
    }
    for rec in shards {
        rec.as_ref()
            .map(|r| (r.ballot, &r.owner, &r.move_to, &r.reserved_for))
            .hash(&mut h);
    }
    h.finish()
}

/// Times every member record as read, with `read_at` a clock reading taken after the read: a
/// record whose observation identity (epoch, renewal, writer) changed is first seen now; one
/// seen unchanged for a full lease (its own lease, on this clock: the one lapse rule of DESIGN
/// §7) has lapsed. Forgets members gone. Returns the members not fenced out, each with
/// whether it lapsed. The coordinator times members at every attempt; a member that may
/// become coordinator times them meanwhile too (a standby), so that a coordinator's successor
/// need not start timing from nothing.
pub(crate) fn time_members<'a>(
    st: &mut CoordinatorState,
    members: &'a BTreeMap<CandidateId, (MemberRecord, Inbox)>,
    read_at: LocalInstant,
) -> Vec<(&'a CandidateId, &'a MemberRecord, bool)> {
    st.seen.retain(|id, _| members.contains_key(id));
    st.next_lapse = None;
    let mut out = Vec::new();
    for (id, (rec, _)) in members {
        if rec.fenced {
            continue;
        }
        let same = st.seen.get(id).is_some_and(|s| {
            s.epoch == rec.epoch && s.renewal == rec.renewal && s.writer == rec.writer
        });
        if !same {
            st.seen.insert(
                id.clone(),
                Seen {
                    epoch: rec.epoch,
                    renewal: rec.renewal,
                    writer: rec.writer.clone(),
                    first_seen: read_at,
                },
            );
        }
        let lapses_at = st.seen.get(id).map(|s| lapse_at(s.first_seen, rec.lease));
        let lapsed = lapses_at.is_some_and(|at| read_at >= at);
        if let Some(at) = lapses_at.filter(|_| !lapsed) {
            st.next_lapse = Some(st.next_lapse.map_or(at, |n| n.min(at)));
        }
        out.push((id, rec, lapsed));
    }
    out
}

/// Decides one coordinator attempt.
///
/// # Errors
///
/// Exhausted counters.
pub(crate) fn decide_coordinator(
    st: &mut CoordinatorState,
    input: &CoordinatorInput<'_>,
) -> Result<CoordinatorPlan, ElectionError> {
    let mut plan = CoordinatorPlan::default();
    let mut live: Vec<MemberShare> = Vec::new();
    let mut epochs: BTreeMap<&CandidateId, u64> = BTreeMap::new();
    for (id, rec, lapsed) in time_members(st, input.members, input.read_at) {
        if lapsed {
            // Unchanged for a full lease: fence it out (its belief ended long ago).
            let epoch = rec
                .epoch
                .checked_add(1)
                .ok_or(ElectionError::CounterExhausted { what: "epoch" })?;
            let renewal = rec
                .renewal
                .checked_add(1)
                .ok_or(ElectionError::CounterExhausted { what: "renewal" })?;
            plan.fenced.push((
                id.clone(),
                MemberRecord {
                    epoch,
                    renewal,
                    fenced: true,
                    writer: None,
                    ..rec.clone()
                },
            ));
            // Its timing stays: should this commit fail, the next attempt fences it at once.
        } else {
            epochs.insert(id, rec.epoch);
            live.push(MemberShare {
                id: id.clone(),
                priority: rec.priority,
                weight: effective_weight(id, rec, input.drained),
            });
        }
    }
    let placement = place(input.layout, &live, &epochs, input.shards);
    let seq = st.next_seq;
    st.next_seq = seq
        .checked_add(1)
        .ok_or(ElectionError::CounterExhausted { what: "attempt" })?;
    let writer = AttemptId {
        candidate: input.me.clone(),
        seq,
    };
    let mut inboxes: BTreeMap<CandidateId, Inbox> = BTreeMap::new();
    let inbox = |id: &CandidateId, inboxes: &mut BTreeMap<CandidateId, Inbox>| -> bool {
        if !inboxes.contains_key(id) {
            match input.members.get(id) {
                Some((_, i)) => {
                    inboxes.insert(id.clone(), i.clone());
                }
                None => return false,
            }
        }
        true
    };
    for step in &placement.steps {
        let (shard, current) = match step {
            PlacementStep::Reserve { shard, .. }
            | PlacementStep::Move { shard, .. }
            | PlacementStep::Withdraw { shard } => (*shard, input.shards.get(idx(*shard))),
        };
        let current = current
            .cloned()
            .flatten()
            .unwrap_or_else(ShardRecord::initial);
        // Whatever the step, an old reservation or request leaves its member's inbox.
        if let Some(h) = &current.reserved_for {
            if inbox(h, &mut inboxes) {
                if let Some(i) = inboxes.get_mut(h) {
                    i.reserved.retain(|s| *s != shard);
                }
            }
        }
        if let (Some(o), Some(_)) = (&current.owner, &current.move_to) {
            if inbox(&o.member, &mut inboxes) {
                if let Some(i) = inboxes.get_mut(&o.member) {
                    i.hand_over.retain(|(s, _)| *s != shard);
                }
            }
        }
        let mut next = ShardRecord {
            writer: Some(writer.clone()),
            ..current.clone()
        };
        match step {
            PlacementStep::Reserve { holder, .. } => {
                next.owner = None;
                next.move_to = None;
                next.reserved_for = Some(holder.clone());
                if inbox(holder, &mut inboxes) {
                    if let Some(i) = inboxes.get_mut(holder) {
                        i.reserved.push(shard);
                    }
                }
            }
            PlacementStep::Move { from, to, .. } => {
                next.move_to = Some(to.clone());
                if inbox(from, &mut inboxes) {
                    if let Some(i) = inboxes.get_mut(from) {
                        i.hand_over.push((shard, to.clone()));
                    }
                }
            }
            PlacementStep::Withdraw { .. } => {
                next.move_to = None;
                next.reserved_for = None;
            }
        }
        plan.shards.push((shard, next));
    }
    for (id, mut i) in inboxes {
        let before = input.members.get(&id).map(|(_, b)| b);
        if before != Some(&i) {
            i.seq = i.seq.saturating_add(1);
            plan.inboxes.push((id, i));
        }
    }
    plan.placement = Some(placement);
    let digest = assignments_digest(input.members, input.shards);
    plan.publish = (input.marker != Some(digest)).then_some(digest);
    Ok(plan)
}

/// Placement as the coordinator computes it (DESIGN §12.3): from the live members (with
/// their effective weights) at their current epochs and every shard's record, the target and
/// the next steps; under a frozen layout, only the steps that change no live member's
/// holding (reservations of shards nobody live holds, withdrawals).
pub(crate) fn place(
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
        placement.steps.retain(|s| match s {
            PlacementStep::Move { .. } => false,
            PlacementStep::Reserve { shard, .. } => !matches!(
                states.get(idx(*shard)),
                Some(ShardState::Reserved { holder }) if live_ids.contains(holder)
            ),
            PlacementStep::Withdraw { .. } => true,
        });
    }
    placement
}

/// The weight placement gives a member: 0 once an operator drained it (DESIGN §12.5), its
/// own otherwise.
pub(crate) fn effective_weight(
    id: &CandidateId,
    rec: &MemberRecord,
    drained: &BTreeSet<CandidateId>,
) -> Weight {
    if drained.contains(id) {
        Weight::DRAINED
    } else {
        rec.weight
    }
}

fn idx(shard: ShardId) -> usize {
    usize::try_from(shard.get()).unwrap_or(usize::MAX)
}
