//! Table tests of a coordinator attempt's writes (docs/design.md §12.2, §12.3): what fits one
//! transaction and one inbox at the largest layout, what elections off leaves, which members
//! are forgotten, and what a frozen placement keeps.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::budget::{Budget, INBOX_BUDGET, KeyLens, TXN_BUDGET};
use super::coordinator::{CoordinatorInput, CoordinatorPlan, CoordinatorState, decide_coordinator};
use super::member_tests::{KEYS, at, id};
use super::placement::PlacementStep;
use crate::codec;
use crate::ids::{Ballot, CandidateId, Priority, ShardId, Weight};
use crate::record::shard::{Inbox, Layout, MAX_SHARDS, MemberRecord, ShardOwner, ShardRecord};
use crate::record::{AttemptId, Eligibility};

fn live(name: &str, epoch: u64, renewal: u64) -> MemberRecord {
    MemberRecord {
        epoch,
        renewal,
        lease: Duration::from_millis(300),
        priority: Priority::new(0),
        weight: Weight::ONE,
        fenced: false,
        writer: Some(AttemptId {
            candidate: id(name),
            seq: renewal,
        }),
        eligibility: Eligibility::Eligible,
    }
}

fn fenced(epoch: u64) -> MemberRecord {
    MemberRecord {
        epoch,
        renewal: 9,
        lease: Duration::from_millis(300),
        priority: Priority::new(0),
        weight: Weight::ONE,
        fenced: true,
        writer: None,
        eligibility: Eligibility::Eligible,
    }
}

fn owned(by: &str, epoch: u64) -> ShardRecord {
    ShardRecord {
        ballot: Ballot::new(3),
        owner: Some(ShardOwner {
            member: id(by),
            epoch,
        }),
        move_to: None,
        reserved_for: None,
        writer: None,
    }
}

struct Attempt {
    layout: Layout,
    elections: bool,
    members: BTreeMap<CandidateId, (MemberRecord, Inbox)>,
    shards: Vec<Option<ShardRecord>>,
    keys: KeyLens,
}

impl Attempt {
    fn new(shards: u32, members: &[(&str, MemberRecord)]) -> Attempt {
        Attempt {
            layout: Layout::new(shards, 4).unwrap(),
            elections: true,
            members: members
                .iter()
                .map(|(n, r)| (id(n), (r.clone(), Inbox::default())))
                .collect(),
            shards: vec![None; shards as usize],
            keys: KEYS,
        }
    }

    fn decide(&self, st: &mut CoordinatorState, ms: u64) -> CoordinatorPlan {
        decide_coordinator(
            st,
            &CoordinatorInput {
                me: &id("coordinator"),
                layout: &self.layout,
                elections: self.elections,
                members: &self.members,
                shards: &self.shards,
                drained: &BTreeSet::new(),
                read_at: at(ms),
                marker: None,
                keys: self.keys,
            },
        )
        .unwrap()
    }

    /// How many shards are reserved or owned.
    fn placed(&self) -> usize {
        self.shards
            .iter()
            .flatten()
            .filter(|r| r.owner.is_some() || r.reserved_for.is_some())
            .count()
    }

    /// Lands a plan's writes.
    fn land(&mut self, plan: &CoordinatorPlan) {
        for (s, rec) in &plan.shards {
            self.shards[s.get() as usize] = Some(rec.clone());
        }
        for (m, inbox) in &plan.inboxes {
            if let Some((_, i)) = self.members.get_mut(m) {
                *i = inbox.clone();
            }
        }
        for (m, rec) in &plan.fenced {
            if let Some((r, _)) = self.members.get_mut(m) {
                *r = rec.clone();
            }
        }
        for m in &plan.forgotten {
            self.members.remove(m);
        }
    }
}

/// What a plan's transaction counts toward FoundationDB's limit, key lengths from `keys`: each
/// write with its read conflict, as the coordinator's transaction makes them.
fn plan_bytes(plan: &CoordinatorPlan, keys: KeyLens) -> usize {
    let shards: usize = plan
        .shards
        .iter()
        .map(|(_, r)| {
            Budget::conflict_cost(keys.shard) + Budget::set_cost(keys.shard, codec::shard_len(r))
        })
        .sum();
    let inboxes: usize = plan
        .inboxes
        .iter()
        .map(|(m, i)| {
            let k = keys.member(m);
            Budget::conflict_cost(k) + Budget::set_cost(k, codec::inbox_len(i))
        })
        .sum();
    shards + inboxes
}

#[test]
fn a_lone_member_at_the_largest_layout_is_placed_over_attempts_each_within_the_limits() {
    // A long subspace makes every key longer: the budget counts the real lengths.
    let keys = KeyLens {
        shard: 200,
        member_base: 220,
    };
    let mut a = Attempt::new(MAX_SHARDS, &[("solo", live("solo", 1, 1))]);
    a.keys = keys;
    let mut st = CoordinatorState::default();
    let mut reserved = 0usize;
    let mut attempts = 0;
    while reserved < MAX_SHARDS as usize {
        attempts += 1;
        assert!(attempts < 200, "no end: {reserved} reserved");
        let plan = a.decide(&mut st, 1);
        let bytes = plan_bytes(&plan, keys);
        assert!(bytes <= TXN_BUDGET, "attempt {attempts}: {bytes} bytes");
        for (_, inbox) in &plan.inboxes {
            let len = codec::encode_inbox(inbox).unwrap().len();
            assert!(len <= INBOX_BUDGET, "an inbox of {len} bytes");
        }
        assert!(!plan.shards.is_empty(), "attempt {attempts} wrote nothing");
        let left = MAX_SHARDS as usize - reserved - plan.shards.len();
        assert_eq!(plan.deferred, left, "every step not written is deferred");
        reserved += plan.shards.len();
        a.land(&plan);
        // The member acquires what its inbox holds (its cycles, elsewhere), emptying it.
        let (_, inbox) = a.members.get_mut(&id("solo")).unwrap();
        for s in std::mem::take(&mut inbox.reserved) {
            a.shards[s.get() as usize] = Some(owned("solo", 1));
        }
    }
    assert!(attempts > 1, "chunked: {attempts} attempts");
    assert!(
        a.shards
            .iter()
            .all(|r| r.as_ref() == Some(&owned("solo", 1))),
        "every shard placed"
    );
    // Nothing left: the next attempt writes nothing and is not due at once.
    let plan = a.decide(&mut st, 2);
    assert_eq!((plan.shards.len(), plan.deferred), (0, 0));
    assert!(!st.next_reading_in(at(2), Duration::from_secs(1)).is_zero());
}

#[test]
fn an_attempt_cut_by_its_budget_is_due_again_at_once_one_cut_by_a_full_inbox_is_not() {
    let period = Duration::from_millis(100);
    // Budget: a lone member whose inbox is emptied between attempts.
    let keys = KeyLens {
        shard: 2_000,
        member_base: 30,
    };
    let mut a = Attempt::new(4_096, &[("solo", live("solo", 1, 1))]);
    a.keys = keys;
    let mut st = CoordinatorState::default();
    let plan = a.decide(&mut st, 1);
    assert!(plan.deferred > 0);
    assert!(plan_bytes(&plan, keys) <= TXN_BUDGET);
    assert_eq!(st.next_reading_in(at(1), period), Duration::ZERO);
    // Inbox: the member has not yet acquired what its inbox holds, and that fills it.
    let mut a = Attempt::new(MAX_SHARDS, &[("solo", live("solo", 1, 1))]);
    let mut st = CoordinatorState::default();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let plan = a.decide(&mut st, 1);
        a.land(&plan);
        if plan.shards.is_empty() {
            assert_eq!(plan.deferred, MAX_SHARDS as usize - a.placed());
            break;
        }
        assert!(attempts < 100);
    }
    let inbox = &a.members[&id("solo")].1;
    let len = codec::encode_inbox(inbox).unwrap().len();
    assert!(len <= INBOX_BUDGET && len > INBOX_BUDGET - 100, "{len}");
    assert_eq!(st.next_reading_in(at(2), period), period, "not a loop");
}

#[test]
fn elections_off_withdraws_every_request_keeps_live_owners_and_still_fences_the_lapsed() {
    let mut a = Attempt::new(4, &[("a", live("a", 1, 1)), ("dead", live("dead", 2, 5))]);
    a.elections = false;
    a.shards[0] = Some(owned("a", 1));
    a.shards[1] = Some(ShardRecord {
        move_to: Some(id("dead")),
        ..owned("a", 1)
    });
    a.shards[2] = Some(ShardRecord {
        owner: None,
        reserved_for: Some(id("a")),
        ..owned("a", 1)
    });
    a.shards[3] = Some(owned("dead", 2));
    a.members.get_mut(&id("a")).unwrap().1 = Inbox {
        seq: 3,
        reserved: vec![ShardId::new(2)],
        hand_over: vec![(ShardId::new(1), id("dead"))],
    };
    let mut st = CoordinatorState::default();
    let first = a.decide(&mut st, 0);
    assert!(first.fenced.is_empty());
    a.land(&first);
    // A lease later, "dead" (unchanged) lapses; "a" renewed meanwhile.
    a.members.get_mut(&id("a")).unwrap().0 = live("a", 1, 2);
    let plan = a.decide(&mut st, 400);
    assert_eq!(
        plan.fenced
            .iter()
            .map(|(m, _)| m.clone())
            .collect::<Vec<_>>(),
        vec![id("dead")],
        "failover never stops"
    );
    a.land(&plan);
    let records: Vec<ShardRecord> = a.shards.iter().map(|r| r.clone().unwrap()).collect();
    assert_eq!(records[0], owned("a", 1), "a live owner keeps its shard");
    assert_eq!(records[1].move_to, None, "the move request is withdrawn");
    assert_eq!(records[1].owner, owned("a", 1).owner);
    assert_eq!(
        records[2].reserved_for, None,
        "the reservation is withdrawn"
    );
    assert_eq!(
        records[3].owner, None,
        "the fenced owner's shard is nobody's"
    );
    assert_eq!(records[3].ballot, Ballot::new(3), "no ballot changes");
    let inbox = &a.members[&id("a")].1;
    assert!(inbox.reserved.is_empty() && inbox.hand_over.is_empty());
    // Nothing is reserved while elections are off, whatever is vacant.
    let plan = a.decide(&mut st, 500);
    assert!(
        plan.placement
            .as_ref()
            .unwrap()
            .steps
            .iter()
            .all(|s| matches!(s, PlacementStep::Withdraw { .. })),
        "{:?}",
        plan.placement
    );
}

#[test]
fn a_fenced_member_is_forgotten_once_no_shard_record_names_it() {
    let mut a = Attempt::new(3, &[("a", live("a", 1, 1)), ("gone", fenced(4))]);
    // Named as an owner at its ended epoch: placement reserves the shard for "a" first.
    a.shards[0] = Some(owned("gone", 3));
    let mut st = CoordinatorState::default();
    let plan = a.decide(&mut st, 0);
    assert!(plan.forgotten.is_empty(), "still named as it was read");
    assert_eq!(
        plan.shards[0].1.reserved_for,
        Some(id("a")),
        "its shard is reserved for a live member"
    );
    a.land(&plan);
    let plan = a.decide(&mut st, 1);
    assert_eq!(plan.forgotten, vec![id("gone")]);
    a.land(&plan);
    assert!(!a.members.contains_key(&id("gone")));
    // A live member, or a fenced one still named (a reservation, a move request), stays.
    for named in [
        ShardRecord {
            owner: None,
            reserved_for: Some(id("late")),
            ..owned("a", 1)
        },
        ShardRecord {
            move_to: Some(id("late")),
            ..owned("a", 1)
        },
    ] {
        let mut a = Attempt::new(1, &[("a", live("a", 1, 1)), ("late", fenced(2))]);
        a.layout = Layout {
            frozen: true,
            ..a.layout
        };
        a.shards[0] = Some(named);
        let plan = a.decide(&mut CoordinatorState::default(), 0);
        assert!(plan.forgotten.is_empty(), "named as read: {plan:?}");
    }
}

#[test]
fn with_no_live_member_a_dead_owners_shard_is_written_vacant_so_it_can_be_forgotten() {
    let mut a = Attempt::new(2, &[("gone", fenced(2))]);
    a.shards[0] = Some(owned("gone", 1));
    a.shards[1] = Some(ShardRecord {
        owner: None,
        reserved_for: Some(id("gone")),
        ..owned("gone", 1)
    });
    let mut st = CoordinatorState::default();
    let plan = a.decide(&mut st, 0);
    assert_eq!(plan.shards.len(), 2);
    for (_, r) in &plan.shards {
        assert_eq!(
            (&r.owner, &r.reserved_for, &r.move_to),
            (&None, &None, &None)
        );
        assert_eq!(r.ballot, Ballot::new(3));
    }
    a.land(&plan);
    assert_eq!(a.decide(&mut st, 1).forgotten, vec![id("gone")]);
}

#[test]
fn a_frozen_placement_keeps_a_move_in_flight_to_a_live_member() {
    // "a" holds both shards; an operator moved shard 1 to "b" under the freeze. Balance
    // alone would keep it with its owner (and withdraw the move); frozen, it lands.
    let mut a = Attempt::new(2, &[("a", live("a", 1, 1)), ("b", live("b", 1, 1))]);
    a.members.get_mut(&id("a")).unwrap().0.priority = Priority::new(5);
    a.layout = Layout {
        frozen: true,
        ..Layout::new(2, 4).unwrap()
    };
    a.shards[0] = Some(owned("a", 1));
    a.shards[1] = Some(ShardRecord {
        move_to: Some(id("b")),
        ..owned("a", 1)
    });
    // Weight 0 for "b": balance sends nothing to it.
    a.members.get_mut(&id("b")).unwrap().0.weight = Weight::DRAINED;
    let plan = a.decide(&mut CoordinatorState::default(), 0);
    assert!(plan.shards.is_empty(), "{:?}", plan.shards);
    // Unfrozen, the same move is withdrawn (its target takes no shard).
    a.layout.frozen = false;
    let plan = a.decide(&mut CoordinatorState::default(), 0);
    assert_eq!(plan.shards.len(), 1);
    assert_eq!(plan.shards[0].1.move_to, None);
}

#[test]
fn the_assignments_digest_is_the_same_on_every_build() {
    // A fixed value: the digest is part of what coordinators of different builds compare.
    let mut a = Attempt::new(3, &[("a", live("a", 2, 1)), ("gone", fenced(4))]);
    a.shards[1] = Some(owned("a", 2));
    a.shards[2] = Some(ShardRecord {
        move_to: Some(id("b")),
        ..owned("a", 2)
    });
    let digest = super::coordinator::assignments_digest(&a.members, &a.shards);
    assert_eq!(digest, 0xf081_519a_dd5f_1775, "{digest:#018x}");
}

#[test]
fn an_ineligible_member_is_placed_as_drained_and_keeps_its_shards_until_each_move_lands() {
    let mut a = Attempt::new(4, &[("a", live("a", 1, 1)), ("b", live("b", 1, 1))]);
    for s in 0..2 {
        a.shards[s] = Some(owned("a", 1));
    }
    for s in 2..4 {
        a.shards[s] = Some(owned("b", 1));
    }
    a.members.get_mut(&id("a")).unwrap().0.eligibility =
        crate::record::Eligibility::ineligible("disk full").unwrap();
    let plan = a.decide(&mut CoordinatorState::default(), 0);
    let placement = plan.placement.unwrap();
    assert_eq!(placement.quotas.get(&id("a")), Some(&0));
    assert_eq!(placement.quotas.get(&id("b")), Some(&4));
    // Cooperative moves (asked of a, which keeps each shard until it hands it over).
    assert_eq!(plan.shards.len(), 2);
    for (_, r) in &plan.shards {
        assert_eq!(r.owner, owned("a", 1).owner, "still a's");
        assert_eq!(r.move_to, Some(id("b")));
    }
    // Nobody eligible to take them: nothing moves.
    a.members.get_mut(&id("b")).unwrap().0.eligibility =
        crate::record::Eligibility::ineligible("maintenance").unwrap();
    let mut a2 = Attempt::new(
        4,
        &[
            ("a", a.members[&id("a")].0.clone()),
            ("b", a.members[&id("b")].0.clone()),
        ],
    );
    a2.shards = a.shards.clone();
    let plan = a2.decide(&mut CoordinatorState::default(), 0);
    assert!(plan.shards.is_empty(), "{:?}", plan.shards);
}
