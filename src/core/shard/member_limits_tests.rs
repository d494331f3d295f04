//! Table tests of a member's decisions at the edges (docs/design.md §12, issue 29): what one attempt
//! reads and writes at most, a handover toward a full inbox, a leave of many shards, and
//! elections disabled (every shard given back, nothing acquired).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

use std::collections::BTreeMap;

use super::budget::{Budget, INBOX_BUDGET, KeyLens, TXN_BUDGET};
use super::leave::{decide_leave, leave_lookups};
use super::member::ACQUIRE_PER_CYCLE;
use super::member_cycle::MemberPlan;
use super::member_tests::{KEYS, World, id, owning};
use crate::codec;
use crate::ids::ShardId;
use crate::record::shard::Inbox;

/// What a member plan's transaction counts: its writes (record, mark, shards, inboxes) and
/// the conflicts of what it read (`reads` shard records).
fn plan_bytes(plan: &MemberPlan, me: &str, keys: KeyLens, reads: usize) -> usize {
    let own = keys.member(&id(me));
    let shards: usize = plan
        .shards
        .iter()
        .map(|(_, r)| Budget::set_cost(keys.shard, codec::shard_len(r)))
        .sum();
    let inboxes: usize = plan
        .inboxes
        .iter()
        .map(|(m, i)| Budget::set_cost(keys.member(m), codec::inbox_len(i)))
        .sum();
    Budget::set_cost(own, codec::member_len(&plan.record))
        + Budget::set_cost(own, codec::EPOCH_MARK_MAX)
        + shards
        + inboxes
        + reads * Budget::conflict_cost(keys.shard)
}

/// Member `a` of an election of `shard_count` shards whose shard keys are `shard_key` bytes
/// long, registered, every shard reserved for it.
fn all_reserved(shard_key: usize, shard_count: u32) -> World {
    let mut w = World::new("a", 10_000);
    w.keys = KeyLens {
        shard: shard_key,
        member_base: 30,
    };
    w.shard_count = shard_count;
    w.cycle(0, &[]);
    let all: Vec<u32> = (0..shard_count).collect();
    w.reserve(&all);
    w
}

#[test]
fn a_cycle_acquires_at_most_its_count_and_its_budget_and_goes_on_at_once() {
    // Long keys: the budget, not the count, bounds a cycle.
    let mut w = all_reserved(3_000, 4_096);
    let keys = w.keys;
    let mut owned = 0;
    let mut cycles = 0;
    while owned < 4_096 {
        cycles += 1;
        assert!(cycles < 500, "no end");
        let plan = w.cycle(10 + cycles, &[]);
        let got = plan.adoption.acquired.len();
        assert!(got > 0 && got <= ACQUIRE_PER_CYCLE);
        let bytes = plan_bytes(&plan, "a", keys, w.reads);
        assert!(bytes <= TXN_BUDGET, "cycle {cycles}: {bytes} bytes");
        owned += got;
        assert_eq!(plan.more, owned < 4_096, "cycle {cycles}");
    }
    assert_eq!(w.owned(200).len(), 4_096);
    assert!(cycles > 4_096 / ACQUIRE_PER_CYCLE as u64, "{cycles} cycles");
}

#[test]
fn a_handover_toward_a_full_inbox_waits_and_does_not_loop() {
    let mut w = owning();
    // The target's inbox is full of reservations it has not acquired yet.
    let full = Inbox {
        seq: 4,
        reserved: (0..((INBOX_BUDGET - 10) / 3) as u32)
            .map(|s| ShardId::new(s + 300))
            .collect(),
        hand_over: vec![],
    };
    assert!(codec::inbox_len(&full) <= INBOX_BUDGET);
    w.inboxes.insert(id("b"), full.clone());
    w.ask(&[1], "b");
    let plan = w.cycle(20, &[1]);
    assert!(
        plan.adoption.released.is_empty(),
        "kept: no room in b's inbox"
    );
    assert!(!plan.more, "waits for a heartbeat or a watch, not a loop");
    assert_eq!(plan.stop, vec![ShardId::new(1)], "its work stays stopped");
    assert_eq!(w.owned(20), vec![0, 1, 2, 3]);
    // Once b has acquired what it held, the handover goes through.
    w.inboxes.insert(id("b"), Inbox::default());
    let plan = w.cycle(30, &[1]);
    assert_eq!(plan.adoption.released, vec![ShardId::new(1)]);
    assert_eq!(w.inboxes[&id("b")].reserved, vec![ShardId::new(1)]);
}

#[test]
fn a_leave_of_many_shards_fits_one_transaction_and_ends_the_epoch_whatever_it_leaves() {
    let mut w = all_reserved(1_000, 16_384);
    let keys = w.keys;
    let mut c = 0;
    while w.owned(10 + c).len() < 16_384 {
        c += 1;
        assert!(c < 1_000);
        w.cycle(10 + c, &[]);
    }
    assert_eq!(w.owned(10 + c).len(), 16_384);
    let believed = w.st.begin_leave();
    let wanted = leave_lookups(&believed, &w.inbox, keys);
    assert!(wanted.len() < 16_384, "reads bounded: {}", wanted.len());
    let read: BTreeMap<ShardId, _> = wanted.iter().map(|s| (*s, w.shards[s].clone())).collect();
    let plan = decide_leave(&mut w.st, w.record.as_ref(), &read, keys)
        .unwrap()
        .unwrap();
    assert!(plan.record.fenced, "the epoch ends in this one commit");
    let bytes: usize = plan
        .shards
        .iter()
        .map(|(_, r)| Budget::set_cost(keys.shard, codec::shard_len(r)))
        .sum::<usize>()
        + read.len() * Budget::conflict_cost(keys.shard);
    assert!(bytes <= TXN_BUDGET, "{bytes}");
    assert!(!plan.shards.is_empty());
}

#[test]
fn elections_off_acquire_nothing_and_give_back_every_shard_once_its_work_stopped() {
    let mut w = owning();
    w.reserve(&[4, 5]);
    w.config = w
        .config
        .to_builder()
        .election_enabled(false)
        .build()
        .unwrap();
    // The cycle asks to stop all four; nothing is acquired, nothing released yet.
    let plan = w.cycle(20, &[]);
    assert!(plan.adoption.acquired.is_empty());
    assert!(plan.adoption.released.is_empty());
    let stop: Vec<u32> = plan.stop.iter().map(|s| s.get()).collect();
    assert_eq!(stop, vec![0, 1, 2, 3]);
    assert!(!plan.more, "reservations left do not make it loop");
    // Shards 0 and 2 are idle: given back, vacant and unreserved, ballots unchanged.
    let plan = w.cycle(30, &[0, 2]);
    let released: Vec<u32> = plan.adoption.released.iter().map(|s| s.get()).collect();
    assert_eq!(released, vec![0, 2]);
    for s in [0, 2] {
        let r = &w.shards[&ShardId::new(s)];
        assert_eq!((&r.owner, &r.reserved_for), (&None, &None));
    }
    assert_eq!(w.owned(30), vec![1, 3]);
    let plan = w.cycle(40, &[1, 3]);
    assert_eq!(plan.adoption.released.len(), 2);
    assert!(w.owned(40).is_empty());
    assert!(plan.stop.is_empty());
    // Enabled again: the reservations still in the inbox are acquired.
    w.config = w
        .config
        .to_builder()
        .election_enabled(true)
        .build()
        .unwrap();
    let plan = w.cycle(50, &[]);
    let got: Vec<u32> = plan
        .adoption
        .acquired
        .iter()
        .map(|(s, _)| s.get())
        .collect();
    assert_eq!(got, vec![4, 5]);
    let _ = KEYS;
}
