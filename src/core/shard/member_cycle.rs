//! A member attempt's decision (docs/design.md §12.1, §12.2, §12.4): from the records read and the
//! member's local state ([`MemberState`]), what to write and what to adopt after the commit.
//! The rules of ownership lost early and gained late are those of [`super::member`].

use std::collections::{BTreeMap, BTreeSet};

use super::budget::{Budget, InboxFill, KeyLens};
use super::member::{ACQUIRE_PER_CYCLE, MemberAdoption, MemberLease, MemberState, PendingMember};
use crate::clock::LocalInstant;
use crate::codec;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId, Priority, ShardId, Weight};
use crate::record::shard::{Inbox, MemberRecord, ShardOwner, ShardRecord};
use crate::record::{AttemptId, Eligibility};
use lookups::{MemberLookups, wanted_lookups};

pub(crate) mod lookups;

/// The inputs of one member attempt, besides the local state.
#[derive(Debug)]
pub(crate) struct MemberInput<'a> {
    pub(crate) config: &'a ElectionConfig,
    /// This member's record, as read (serializably) in this transaction.
    pub(crate) record: Option<&'a MemberRecord>,
    /// This member's inbox, as read (serializably) in this transaction.
    pub(crate) inbox: &'a Inbox,
    pub(crate) priority: Priority,
    pub(crate) weight: Weight,
    /// Whether this member may own shards (its health; placement gives it weight 0 if not).
    pub(crate) eligibility: &'a Eligibility,
    /// Shards whose work has stopped: they may be handed over now.
    pub(crate) ready: &'a BTreeSet<ShardId>,
    /// A clock reading taken before the attempt's reads.
    pub(crate) started_at: LocalInstant,
    /// The read version of this attempt's reads, when the store reports one.
    pub(crate) read_version: Option<u64>,
    /// The records the decision asked for ([`MemberDecision::Need`]).
    pub(crate) lookups: Option<&'a MemberLookups>,
    /// The election's key lengths, for the transaction's budget.
    pub(crate) keys: KeyLens,
}

/// What a member attempt decided.
#[derive(Debug)]
pub(crate) enum MemberDecision {
    /// Read these shard records and inboxes (serializably), then decide again.
    Need {
        shards: Vec<ShardId>,
        inboxes: Vec<CandidateId>,
    },
    /// Write these and adopt `adoption` after the commit.
    Plan(Box<MemberPlan>),
    /// The inbox asks something impossible (why): nothing is written, the attempt fails
    /// closed (docs/design.md §6) and the member's lease runs out unless the inbox is repaired.
    CorruptInbox(&'static str),
}

/// The writes of a member attempt.
#[derive(Debug)]
pub(crate) struct MemberPlan {
    pub(crate) record: MemberRecord,
    pub(crate) shards: Vec<(ShardId, ShardRecord)>,
    /// Inboxes changed: this member's own, and those of the members it handed shards to.
    pub(crate) inboxes: Vec<(CandidateId, Inbox)>,
    pub(crate) adoption: MemberAdoption,
    /// Whether this attempt joins (a first time, or again at a new epoch).
    pub(crate) joined: bool,
    /// The shards whose work this member is to stop: those it is asked to hand over, or all
    /// it owns while elections are disabled (it gives them back once their work has stopped).
    pub(crate) stop: Vec<ShardId>,
    /// Whether another attempt has work to do at once (reservations left, or writes this
    /// attempt's budget left over).
    pub(crate) more: bool,
    /// Whether the commit must conflict on the configuration: it acquires or hands over a
    /// shard, which only an election-enabled configuration allows, so a configuration that
    /// disables elections, committed after this attempt read it, fails this commit rather
    /// than let an acquisition land after elections were turned off.
    pub(crate) config_conflict: bool,
}

/// Whether `inbox` names a shard beyond the layout's `shard_count`.
fn inbox_outside_layout(inbox: &Inbox, shard_count: u32) -> bool {
    inbox
        .reserved
        .iter()
        .chain(inbox.hand_over.iter().map(|(s, _)| s))
        .any(|s| s.get() >= shard_count)
}

/// Decides one member attempt. Mutates `st` only with facts and losses; gains are adopted
/// after the commit ([`MemberState::adopt`]).
///
/// # Errors
///
/// [`ElectionError::CycleInProgress`] when the record read is this member's own write from
/// this same transaction; exhausted counters.
pub(crate) fn decide_member(
    st: &mut MemberState,
    input: &MemberInput<'_>,
) -> Result<MemberDecision, ElectionError> {
    let record = input.record;
    if let Some(p) = st.pending_of(record.and_then(|r| r.writer.as_ref())) {
        if p.read_version.is_some() && p.read_version == input.read_version {
            // Read-your-writes: this transaction's own, uncommitted write (docs/design.md §10.1).
            return Err(ElectionError::CycleInProgress {
                candidate: st.id.clone(),
            });
        }
        // Found committed by a later transaction: adopted, dated from its own start.
        let adoption = p.adoption.clone();
        st.adopt(&adoption);
    }
    // Lost early: an ended epoch (a takeover fenced this member out, or the record is gone),
    // or a lease that lapsed locally, drops every shard before anything else.
    let epoch_ended = match (st.epoch, record) {
        (Some(e), Some(r)) => r.fenced || r.epoch != e,
        (Some(_), None) => true,
        (None, _) => false,
    };
    let lapsed = st.lease.is_none_or(|l| input.started_at >= l.valid_until);
    if lapsed && !epoch_ended {
        // A lease that lapsed at an epoch the records may still hold: what they give this
        // member stays tied to it until a join at a new epoch lands (which this attempt
        // writes, perhaps without a confirmed commit). A leave before then gives it back.
        st.keep_to_give_back();
    }
    if epoch_ended || lapsed {
        st.lose_all();
    }
    // Join (again) at a new epoch unless this member holds a live lease at its epoch.
    let renewing = !epoch_ended && st.lease.is_some() && st.epoch.is_some();
    let joined = !renewing;
    let epoch = if renewing {
        st.epoch.unwrap_or(1)
    } else {
        let previous = record.map_or(0, |r| r.epoch).max(st.epoch.unwrap_or(0));
        previous
            .checked_add(1)
            .ok_or(ElectionError::CounterExhausted { what: "epoch" })?
    };

    // Shards whose work has stopped: those the caller says, and those whose release this
    // member wrote without a confirmed commit (their work stopped when the belief did).
    let ready: BTreeSet<ShardId> = input
        .ready
        .iter()
        .chain(st.unreleased.keys())
        .copied()
        .collect();
    let elections = input.config.election_enabled();
    let (wants_shards, wants_inboxes) = wanted_lookups(st, input, &ready, elections);
    let lookups = match input.lookups {
        // A shard the layout does not have was never reserved or requested by this library:
        // the member acts on none of it, nor on the rest of that inbox.
        Some(l) if inbox_outside_layout(input.inbox, l.shard_count) => {
            return Ok(MemberDecision::CorruptInbox(
                "a shard outside the layout in an inbox",
            ));
        }
        Some(l) => l,
        None if !wants_shards.is_empty() && !joined => {
            return Ok(MemberDecision::Need {
                shards: wants_shards,
                inboxes: wants_inboxes,
            });
        }
        None => &MemberLookups::default(),
    };

    let seq = st.next_seq()?;
    let writer = AttemptId {
        candidate: st.id.clone(),
        seq,
    };
    let lease = input.config.lease_duration();
    let valid_until = input
        .started_at
        .saturating_add(input.config.local_validity(lease));
    // Judged as if it committed (docs/design.md §10.3): a renewal writing a shorter lease than the
    // one the belief was computed from ends the belief as that lease says, from now on.
    st.cap_belief(valid_until);
    let renewal = match (renewing, record) {
        (true, Some(r)) => r
            .renewal
            .checked_add(1)
            .ok_or(ElectionError::CounterExhausted { what: "renewal" })?,
        _ => 1,
    };
    let new_record = MemberRecord {
        epoch,
        renewal,
        lease,
        priority: input.priority,
        weight: input.weight,
        fenced: false,
        writer: Some(writer.clone()),
        eligibility: input.eligibility.clone(),
    };

    // The transaction's budget: first what it cannot do without (its record, epoch mark and
    // inbox, and the conflicts of what it read), then each optional write while it fits.
    let keys = input.keys;
    let mut budget = Budget::new();
    let own_key = keys.member(&st.id);
    budget.force(
        [
            Budget::conflict_cost(own_key).saturating_mul(2),
            Budget::set_cost(own_key, codec::member_len(&new_record)),
            Budget::set_cost(own_key, codec::EPOCH_MARK_MAX),
            Budget::set_cost(own_key, codec::inbox_len(input.inbox)),
        ]
        .into_iter()
        .chain(
            lookups
                .shards
                .keys()
                .map(|_| Budget::conflict_cost(keys.shard)),
        )
        .chain(
            lookups
                .inboxes
                .keys()
                .map(|t| Budget::conflict_cost(keys.member(t))),
        )
        // The configuration's conflict, should this attempt acquire or hand over a shard.
        .chain((elections && !joined).then(|| Budget::conflict_cost(keys.fixed())))
        .fold(0usize, usize::saturating_add),
    );
    let mut deferred = false;
    let shard_write = |r: &ShardRecord| Budget::set_cost(keys.shard, codec::shard_len(r));

    let mut inbox = input.inbox.clone();
    let mut shards = Vec::new();
    let mut targets: BTreeMap<CandidateId, (Inbox, InboxFill)> = BTreeMap::new();
    let mut released = Vec::new();
    let mut acquired = Vec::new();
    let me = ShardOwner {
        member: st.id.clone(),
        epoch,
    };
    if !joined && elections {
        // Hand over: a shard this member owns (or owned, and whose release did not land),
        // whose work has stopped, is written vacant and reserved for its target; the target
        // learns of it in its inbox, in the same commit (while that inbox has room).
        inbox.hand_over.retain(|(shard, to)| {
            let Some(rec) = lookups.shards.get(shard) else {
                return true; // not read by this cycle: a later one
            };
            if rec.owner.as_ref() != Some(&me) {
                return false; // not ours (any more): the request is stale
            }
            if *to == st.id || !ready.contains(shard) {
                return *to != st.id; // still working on it: keep the request
            }
            let Some(read) = lookups.inboxes.get(to) else {
                return true; // its inbox was not read: next cycle
            };
            let next = ShardRecord {
                ballot: rec.ballot,
                owner: None,
                move_to: None,
                reserved_for: Some(to.clone()),
                writer: Some(writer.clone()),
            };
            let entry = codec::reserved_entry_len(*shard);
            let (fill, first) = match targets.get(to) {
                Some((_, f)) => (*f, false),
                None => (InboxFill::of(read), true),
            };
            let cost = shard_write(&next).saturating_add(if first {
                Budget::set_cost(keys.member(to), fill.len())
            } else {
                0
            });
            if !fill.fits(entry) {
                // The target's inbox is full (it acquires what it holds first): the shard
                // stays this member's, its work stopped, until a later cycle finds room.
                return true;
            }
            if !budget.take(cost.saturating_add(entry)) {
                deferred = true; // this transaction is full: the next cycle, at once
                return true;
            }
            st.owned.remove(shard);
            st.unreleased.insert(*shard, rec.ballot);
            released.push(*shard);
            shards.push((*shard, next));
            let (target, fill) = targets
                .entry(to.clone())
                .or_insert_with(|| (read.clone(), fill));
            fill.add(entry);
            if !target.reserved.contains(shard) {
                target.reserved.push(*shard);
            }
            false
        });
    }
    if !joined {
        // A release whose commit was not confirmed is written again while the record still
        // names this member at that ballot (docs/design.md §10.6 per shard): handed over above if it
        // is still requested; vacant otherwise (the request was withdrawn meanwhile: the
        // coordinator places the shard again). Forgotten once the record names someone else.
        // Elections disabled, every shard whose work has stopped is given back the same way.
        let asked: BTreeSet<ShardId> = inbox
            .hand_over
            .iter()
            .map(|(s, _)| *s)
            .filter(|_| elections)
            .chain(released.iter().copied())
            .collect();
        let mut give_back: Vec<(ShardId, Ballot)> = st
            .unreleased
            .iter()
            .map(|(s, b)| (*s, *b))
            .filter(|(s, _)| !asked.contains(s))
            .collect();
        if !elections {
            give_back.extend(
                st.owned
                    .iter()
                    .filter(|(s, _)| ready.contains(s))
                    .map(|(s, b)| (*s, *b)),
            );
        }
        for (shard, ballot) in give_back {
            match lookups.shards.get(&shard) {
                Some(rec) if rec.owner.as_ref() == Some(&me) && rec.ballot == ballot => {
                    let next = ShardRecord {
                        ballot,
                        owner: None,
                        move_to: None,
                        reserved_for: None,
                        writer: Some(writer.clone()),
                    };
                    if !budget.take(shard_write(&next)) {
                        deferred = true;
                        continue;
                    }
                    st.owned.remove(&shard);
                    st.unreleased.insert(shard, ballot);
                    released.push(shard);
                    shards.push((shard, next));
                }
                None => {} // not read by this cycle: a later one
                Some(_) => {
                    st.unreleased.remove(&shard);
                }
            }
        }
    }
    if !joined && elections {
        // Acquire: a shard still vacant and reserved for this member, ballot + 1.
        let mut count = ACQUIRE_PER_CYCLE;
        inbox.reserved.retain(|shard| {
            let Some(rec) = lookups.shards.get(shard) else {
                return true; // not read by this cycle: a later one
            };
            if rec.owner.is_some() || rec.reserved_for.as_ref() != Some(&st.id) {
                return false; // stale: someone else's now
            }
            if count == 0 {
                return true;
            }
            let Some(ballot) = rec.ballot.get().checked_add(1).map(Ballot::new) else {
                return false; // an exhausted ballot is never acquired again
            };
            let next = ShardRecord {
                ballot,
                owner: Some(me.clone()),
                move_to: None,
                reserved_for: None,
                writer: Some(writer.clone()),
            };
            if !budget.take(shard_write(&next)) {
                deferred = true;
                return true;
            }
            count = count.saturating_sub(1);
            acquired.push((*shard, ballot));
            shards.push((*shard, next));
            false
        });
    }
    let config_conflict = !acquired.is_empty() || !targets.is_empty();
    let mut inboxes: Vec<(CandidateId, Inbox)> =
        targets.into_iter().map(|(t, (i, _))| (t, i)).collect();
    for (t, i) in &mut inboxes {
        let before = lookups.inboxes.get(t).map_or(0, |b| b.seq);
        i.seq = before.saturating_add(1);
    }
    if inbox != *input.inbox {
        inbox.seq = inbox.seq.saturating_add(1);
        inboxes.push((st.id.clone(), inbox.clone()));
    }
    if joined {
        st.epoch = Some(epoch);
    }
    // What this member is to stop: the shards it is asked to hand over, or every shard it
    // owns while elections are disabled.
    let stop: Vec<ShardId> = if elections {
        inbox.hand_over.iter().map(|(s, _)| *s).collect()
    } else {
        st.owned.keys().copied().collect()
    };
    // More to do at once: writes this transaction's budget left to the next, or reservations
    // left while this attempt changed the inbox (acquired or dropped some: the next reads the
    // ones after them). An attempt that changed nothing waits for the heartbeat or a watch.
    let more = deferred || (elections && !inbox.reserved.is_empty() && inbox != *input.inbox);
    let adoption = MemberAdoption {
        seq,
        started_at: input.started_at,
        lease: MemberLease {
            epoch,
            renewal,
            valid_until,
        },
        acquired,
        released,
    };
    st.push_pending(PendingMember {
        adoption: adoption.clone(),
        read_version: input.read_version,
    });
    Ok(MemberDecision::Plan(Box::new(MemberPlan {
        record: new_record,
        shards,
        inboxes,
        adoption,
        joined,
        stop,
        more,
        config_conflict,
    })))
}
