//! The coordinator's decisions (docs/design.md §12.2, §12.3): the leader of the sharded election's
//! coordinator election times every member's record (the one lapse rule), fences out the
//! members whose record stayed unchanged for a full lease (their epoch bumped, in the same
//! commit as the reservations of their shards), and writes the next placement steps. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::budget::{Budget, InboxFill, KeyLens};
use super::placement::{MemberShare, Placement};
use super::steps::{apply_steps, effective_weight, idx, place, step_shard};
use crate::clock::LocalInstant;
use crate::codec;
use crate::core::lapse_at;
use crate::error::ElectionError;
use crate::ids::{CandidateId, ShardId, Weight};
use crate::record::AttemptId;
use crate::record::shard::{Inbox, Layout, MemberRecord, ShardRecord};

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
    /// The last attempt left work to the next for want of budget: it is due at once.
    again: bool,
}

impl CoordinatorState {
    /// How long after `now` the next timing reading is due: `period` after the last one, or
    /// sooner, at the instant the earliest member timed unchanged lapses (a reading at that
    /// instant or later fences it out; waiting for the next period would add up to a period
    /// to a dead member's failover).
    /// After an attempt whose budget left work undone, the next is due at once (each attempt
    /// writes a budget's worth, so this ends).
    pub(crate) fn next_reading_in(&self, now: LocalInstant, period: Duration) -> Duration {
        if self.again {
            return Duration::ZERO;
        }
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
    /// Whether the stored configuration enables elections. Disabled, the coordinator places
    /// nothing (it withdraws every reservation and move request, and the members give their
    /// shards back) and still fences out the members that lapse: failover never stops.
    pub(crate) elections: bool,
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
    /// The election's key lengths, for the transaction's budget.
    pub(crate) keys: KeyLens,
}

/// The writes of a coordinator attempt.
#[derive(Debug, Default)]
pub(crate) struct CoordinatorPlan {
    /// Members fenced out now (their epoch bumped).
    pub(crate) fenced: Vec<(CandidateId, MemberRecord)>,
    /// Members forgotten now: fenced out before, named by no shard record, their keys
    /// cleared (record, epoch mark, inbox).
    pub(crate) forgotten: Vec<CandidateId>,
    pub(crate) shards: Vec<(ShardId, ShardRecord)>,
    pub(crate) inboxes: Vec<(CandidateId, Inbox)>,
    /// The placement computed (for status and metrics).
    pub(crate) placement: Option<Placement>,
    /// Placement steps left to a later attempt: the transaction's budget was spent, or the
    /// member's inbox is full.
    pub(crate) deferred: usize,
    /// A new assignments marker to write: the records read differ from the ones the stored
    /// marker was published for, so observers wake and read them.
    pub(crate) publish: Option<u64>,
}

/// A digest of what observers of the assignments see in the records: every shard's record
/// (owner and its epoch, ballot, move request, reservation; not its writer) and every member's
/// epoch and whether it is fenced out (not its renewals). Any change of ownership, request or
/// liveness changes it; a steady heartbeat does not. The same on every platform and build
/// (XXH3 over a fixed byte layout): coordinators built apart agree on it, so a coordinator's
/// failover rewrites the marker only if the records changed.
pub(crate) fn assignments_digest(
    members: &BTreeMap<CandidateId, (MemberRecord, Inbox)>,
    shards: &[Option<ShardRecord>],
) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let id = |h: &mut xxhash_rust::xxh3::Xxh3, id: Option<&CandidateId>| match id {
        None => h.update(&[0]),
        Some(id) => {
            let bytes = id.as_str().as_bytes();
            h.update(&[1]);
            h.update(&u64::try_from(bytes.len()).unwrap_or(u64::MAX).to_be_bytes());
            h.update(bytes);
        }
    };
    for (member, (rec, _)) in members {
        id(&mut h, Some(member));
        h.update(&rec.epoch.to_be_bytes());
        h.update(&[u8::from(rec.fenced)]);
    }
    for rec in shards {
        match rec {
            None => h.update(&[0]),
            Some(r) => {
                h.update(&[1]);
                h.update(&r.ballot.get().to_be_bytes());
                id(&mut h, r.owner.as_ref().map(|o| &o.member));
                h.update(&r.owner.as_ref().map_or(0, |o| o.epoch).to_be_bytes());
                id(&mut h, r.move_to.as_ref());
                id(&mut h, r.reserved_for.as_ref());
            }
        }
    }
    h.digest()
}

/// Times every member record as read, with `read_at` a clock reading taken after the read: a
/// record whose observation identity (epoch, renewal, writer) changed is first seen now; one
/// seen unchanged for a full lease (its own lease, on this clock: the one lapse rule of
/// docs/design.md §7) has lapsed. Forgets members gone. Returns the members not fenced out, each with
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

/// Decides one coordinator attempt: fence out the members that lapsed, forget those fenced
/// out before that no shard record names any more, and write the next placement steps, as
/// many as the transaction's budget and the members' inboxes hold (the rest at the next
/// attempts, the first of them at once when the budget was what stopped this one).
///
/// # Errors
///
/// Exhausted counters.
pub(crate) fn decide_coordinator(
    st: &mut CoordinatorState,
    input: &CoordinatorInput<'_>,
) -> Result<CoordinatorPlan, ElectionError> {
    let mut plan = CoordinatorPlan::default();
    let mut budget = Budget::new();
    let mut live: Vec<MemberShare> = Vec::new();
    let mut epochs: BTreeMap<&CandidateId, u64> = BTreeMap::new();
    // What every attempt may add besides its steps: the coordinator election's fence, read
    // serializably; conflicts on the layout and the configuration; the assignments marker
    // written (an 8-byte digest). These keys sit beside the shards' subspace, shorter than
    // the longest shard key plus the longest of their names (`"coordinator"`, `"fence"`).
    let fixed_key = input.keys.fixed();
    budget.force(
        Budget::conflict_cost(fixed_key)
            .saturating_mul(3)
            .saturating_add(Budget::set_cost(fixed_key, 8)),
    );
    // The steps are decided on the drain marks read: conflicts on them.
    for id in input.members.keys().chain(input.drained) {
        budget.force(Budget::conflict_cost(input.keys.member(id)));
    }
    let mut over_budget = false;
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
            let fenced = MemberRecord {
                epoch,
                renewal,
                fenced: true,
                writer: None,
                ..rec.clone()
            };
            let key = input.keys.member(id);
            let cost = [
                Budget::conflict_cost(key),
                Budget::set_cost(key, codec::member_len(&fenced)),
                Budget::set_cost(key, codec::EPOCH_MARK_MAX),
            ]
            .into_iter()
            .fold(0usize, usize::saturating_add);
            if budget.take(cost) {
                plan.fenced.push((id.clone(), fenced));
                // Its timing stays: should this commit fail, the next attempt fences it at
                // once; one past the budget is fenced by the next attempt, at once too.
                continue;
            }
            // Not fenced in this attempt (no room): placed as a live member of weight 0, so
            // that nothing it holds changes hands before the commit that ends its epoch and
            // nothing new is reserved for it; the next attempt, at once, fences it.
            over_budget = true;
        }
        epochs.insert(id, rec.epoch);
        live.push(MemberShare {
            id: id.clone(),
            priority: rec.priority,
            weight: if lapsed {
                Weight::DRAINED
            } else {
                effective_weight(id, rec, input.drained)
            },
        });
    }
    let placement = place(input.layout, input.elections, &live, &epochs, input.shards);

    let seq = st.next_seq;
    st.next_seq = seq
        .checked_add(1)
        .ok_or(ElectionError::CounterExhausted { what: "attempt" })?;
    let writer = AttemptId {
        candidate: input.me.clone(),
        seq,
    };
    // Inboxes as this attempt leaves them, and how full each is.
    let mut inboxes: BTreeMap<CandidateId, (Inbox, InboxFill)> = BTreeMap::new();
    let mut steps = placement.steps.iter().peekable();
    while let Some(first) = steps.next() {
        // The steps of one shard (a withdrawal and a new move) are written together or not.
        let shard = step_shard(first);
        let mut group = vec![first];
        while let Some(next) = steps.next_if(|s| step_shard(s) == shard) {
            group.push(next);
        }
        let current = input
            .shards
            .get(idx(shard))
            .cloned()
            .flatten()
            .unwrap_or_else(ShardRecord::initial);
        let (next, edits) = apply_steps(&current, &group, &writer, &epochs);
        // The budget: the shard's write and its conflict, each inbox's write the first time
        // this attempt touches it, and each entry added; every inbox within its own budget.
        let mut cost = Budget::conflict_cost(input.keys.shard)
            .saturating_add(Budget::set_cost(input.keys.shard, codec::shard_len(&next)));
        let mut fills: BTreeMap<CandidateId, InboxFill> = BTreeMap::new();
        let mut fits = true;
        for edit in &edits {
            let who = edit.member();
            let Some((_, read)) = input.members.get(who) else {
                continue; // no such member: its inbox is left alone (see `apply_edit`)
            };
            let fill = fills
                .entry(who.clone())
                .or_insert_with(|| match inboxes.get(who) {
                    Some((_, f)) => *f,
                    None => {
                        let f = InboxFill::of(read);
                        let key = input.keys.member(who);
                        cost = cost
                            .saturating_add(Budget::conflict_cost(key))
                            .saturating_add(Budget::set_cost(key, f.len()));
                        f
                    }
                });
            if let Some(entry) = edit.added_len(shard) {
                fits &= fill.fits(entry);
                fill.add(entry);
                cost = cost.saturating_add(entry);
            }
        }
        if !fits {
            plan.deferred = plan.deferred.saturating_add(1);
            continue;
        }
        if !budget.take(cost) {
            plan.deferred = plan.deferred.saturating_add(1);
            over_budget = true;
            continue;
        }
        for edit in edits {
            let who = edit.member().clone();
            let Some((_, read)) = input.members.get(&who) else {
                continue;
            };
            let (inbox, fill) = inboxes
                .entry(who.clone())
                .or_insert_with(|| (read.clone(), InboxFill::of(read)));
            if let Some(f) = fills.get(&who) {
                *fill = *f;
            }
            edit.apply(inbox, shard);
        }
        plan.shards.push((shard, next));
    }
    for (id, (mut i, _)) in inboxes {
        let before = input.members.get(&id).map(|(_, b)| b);
        if before != Some(&i) {
            i.seq = i.seq.saturating_add(1);
            plan.inboxes.push((id, i));
        }
    }
    // Forgotten: fenced out before this attempt, named by no shard record as read nor by
    // this attempt's writes. Its keys are cleared in a commit that conflicts with every write
    // that could name it again (its own join writes its record; a handover to it, its inbox).
    let named = named_members(input.shards, &plan.shards);
    for (id, (rec, _)) in input.members {
        if !rec.fenced || named.contains(id) {
            continue;
        }
        let key = input.keys.member(id);
        let cost = Budget::conflict_cost(key)
            .saturating_add(Budget::clear_cost(key))
            .saturating_mul(3);
        if budget.take(cost) {
            plan.forgotten.push(id.clone());
        } else {
            over_budget = true;
        }
    }
    st.again = over_budget;
    plan.placement = Some(placement);
    let digest = assignments_digest(input.members, input.shards);
    plan.publish = (input.marker != Some(digest)).then_some(digest);
    Ok(plan)
}

/// Every member a shard record names (owner, move request, reservation), in the records read
/// or as this attempt rewrites them.
fn named_members<'a>(
    read: &'a [Option<ShardRecord>],
    written: &'a [(ShardId, ShardRecord)],
) -> BTreeSet<&'a CandidateId> {
    let names = |r: &'a ShardRecord| {
        r.owner
            .as_ref()
            .map(|o| &o.member)
            .into_iter()
            .chain(r.move_to.as_ref())
            .chain(r.reserved_for.as_ref())
    };
    read.iter()
        .flatten()
        .chain(written.iter().map(|(_, r)| r))
        .flat_map(names)
        .collect()
}
