//! The records a member attempt reads beyond its own three keys: the shards and inboxes its
//! inbox asks about, within the transaction's budget.

use std::collections::{BTreeMap, BTreeSet};

use super::MemberInput;
use crate::core::shard::budget::reads_within_budget;
use crate::core::shard::member::{ACQUIRE_PER_CYCLE, MemberState};
use crate::ids::{CandidateId, ShardId};
use crate::record::shard::{Inbox, ShardRecord};

/// The most shard records one member attempt reads.
const MAX_LOOKUPS: usize = 1024;

/// Records a member attempt reads beyond its three keys, only when its inbox asks something.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemberLookups {
    /// How many shards the layout has (read with the lookups).
    pub(crate) shard_count: u32,
    /// The shards named in the inbox (absent: never written).
    pub(crate) shards: BTreeMap<ShardId, ShardRecord>,
    /// The inboxes of the members shards are handed over to.
    pub(crate) inboxes: BTreeMap<CandidateId, Inbox>,
}

/// The records a member attempt reads beyond its three keys, at most [`MAX_LOOKUPS`] shards
/// and as many as a quarter of the budget's conflict ranges hold, in this order: releases to
/// write again, requests to hand over whose work has stopped, shards to give back while
/// elections are disabled, reservations (the first [`ACQUIRE_PER_CYCLE`]), then the other
/// requests (to drop the stale ones); and the inboxes of the members the ready shards are
/// handed over to. What is not read waits for a later cycle.
pub(super) fn wanted_lookups(
    st: &MemberState,
    input: &MemberInput<'_>,
    ready: &BTreeSet<ShardId>,
    elections: bool,
) -> (Vec<ShardId>, Vec<CandidateId>) {
    let cap = MAX_LOOKUPS.min(reads_within_budget(input.keys));
    let mut seen = BTreeSet::new();
    let hand_over = |is_ready: bool| {
        input
            .inbox
            .hand_over
            .iter()
            .map(|(s, _)| *s)
            .filter(move |s| elections && ready.contains(s) == is_ready)
    };
    let give_back = st
        .owned
        .keys()
        .filter(|s| !elections && ready.contains(s))
        .copied();
    let reserved = input
        .inbox
        .reserved
        .iter()
        .take(ACQUIRE_PER_CYCLE)
        .filter(|_| elections)
        .copied();
    let shards: Vec<ShardId> = st
        .unreleased
        .keys()
        .copied()
        .chain(hand_over(true))
        .chain(give_back)
        .chain(reserved)
        .chain(hand_over(false))
        .filter(|s| seen.insert(*s))
        .take(cap)
        .collect();
    let read: BTreeSet<&ShardId> = shards.iter().collect();
    let inboxes: Vec<CandidateId> = input
        .inbox
        .hand_over
        .iter()
        .filter(|(s, t)| elections && *t != st.id && ready.contains(s) && read.contains(s))
        .map(|(_, t)| t.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    (
        shards
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        inboxes,
    )
}
