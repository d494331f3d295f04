//! Table and property tests of placement: balanced, minimal, rate-limited, deterministic,
//! stable.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::placement::{MemberShare, Placement, PlacementStep, ShardState, plan, quotas};
use crate::ids::{CandidateId, Priority, ShardId, Weight};

fn id(s: &str) -> CandidateId {
    CandidateId::parse(s).unwrap()
}

fn member(name: &str, priority: i32, weight: u32) -> MemberShare {
    MemberShare {
        id: id(name),
        priority: Priority::new(priority),
        weight: Weight::new(weight),
    }
}

fn owned(owners: &[&str]) -> Vec<ShardState> {
    owners
        .iter()
        .map(|o| ShardState::Owned { owner: id(o) })
        .collect()
}

/// Carries out every step (as if each commit landed), returning the new states.
fn apply(states: &[ShardState], steps: &[PlacementStep]) -> Vec<ShardState> {
    carry_out(states, steps, true)
}

/// Carries out every step, returning the new states: as if each commit `landed`, or as the
/// coordinator writes them (a move becomes a move in flight, a reservation a reservation).
fn carry_out(states: &[ShardState], steps: &[PlacementStep], landed: bool) -> Vec<ShardState> {
    let mut out = states.to_vec();
    for step in steps {
        let (shard, state) = match step {
            PlacementStep::Reserve { shard, holder } if landed => (
                shard,
                ShardState::Owned {
                    owner: holder.clone(),
                },
            ),
            PlacementStep::Reserve { shard, holder } => (
                shard,
                ShardState::Reserved {
                    holder: holder.clone(),
                },
            ),
            PlacementStep::Move { shard, to, .. } if landed => {
                (shard, ShardState::Owned { owner: to.clone() })
            }
            PlacementStep::Move { shard, from, to } => (
                shard,
                ShardState::Moving {
                    owner: from.clone(),
                    to: to.clone(),
                },
            ),
            PlacementStep::Withdraw { shard } => match &out[shard.get() as usize] {
                ShardState::Moving { owner, .. } => (
                    shard,
                    ShardState::Owned {
                        owner: owner.clone(),
                    },
                ),
                _ => (shard, ShardState::Vacant),
            },
        };
        out[shard.get() as usize] = state;
    }
    out
}

fn counts(states: &[ShardState]) -> BTreeMap<CandidateId, u32> {
    let mut c = BTreeMap::new();
    for s in states {
        if let ShardState::Owned { owner } = s {
            *c.entry(owner.clone()).or_insert(0) += 1;
        }
    }
    c
}

/// Every one of `n` vacant shards where a first placement among `members` puts it.
fn placed(members: &[MemberShare], n: u32) -> Vec<ShardState> {
    let vacant = vec![ShardState::Vacant; n as usize];
    apply(&vacant, &plan(members, &vacant, n).steps)
}

/// Members a, b and c (equals) placed on `n` shards, then `newcomer` joins: the members
/// now, the shards' states before, and the placement planned.
fn joined(n: u32, newcomer: MemberShare) -> (Vec<MemberShare>, Vec<ShardState>, Placement) {
    let three = [member("a", 1, 1), member("b", 1, 1), member("c", 1, 1)];
    let start = placed(&three, n);
    let all = [three.to_vec(), vec![newcomer]].concat();
    let p = plan(&all, &start, n);
    (all, start, p)
}

fn moves(steps: &[PlacementStep]) -> usize {
    steps
        .iter()
        .filter(|s| matches!(s, PlacementStep::Move { .. }))
        .count()
}

#[test]
fn quotas_are_floor_or_ceiling_of_the_weighted_share_extras_to_higher_priority() {
    let q = quotas(
        &[member("a", 1, 1), member("b", 5, 1), member("c", 1, 1)],
        64,
    );
    assert_eq!((q[&id("a")], q[&id("b")], q[&id("c")]), (21, 22, 21));
    // 10 shards, weights 2:1:1 → 5, 2.5, 2.5: the extra one to the higher priority.
    let q = quotas(
        &[member("a", 1, 2), member("b", 1, 1), member("c", 3, 1)],
        10,
    );
    assert_eq!((q[&id("a")], q[&id("b")], q[&id("c")]), (5, 2, 3));
    // Equal priorities: the smaller id.
    let q = quotas(&[member("b", 1, 1), member("a", 1, 1)], 3);
    assert_eq!((q[&id("a")], q[&id("b")]), (2, 1));
    // An integer share never takes an extra one, whatever its priority.
    let q = quotas(
        &[member("top", 9, 2), member("x", 1, 1), member("y", 1, 1)],
        6,
    );
    assert_eq!((q[&id("top")], q[&id("x")], q[&id("y")]), (3, 2, 1));
    // Drained members own nothing; everyone drained: nobody owns anything.
    let q = quotas(&[member("a", 1, 0), member("b", 1, 1)], 4);
    assert_eq!((q[&id("a")], q[&id("b")]), (0, 4));
    let q = quotas(&[member("a", 1, 0)], 4);
    assert_eq!(q[&id("a")], 0);
}

#[test]
fn a_first_placement_reserves_every_shard_balanced_with_no_move() {
    let members = [member("a", 1, 1), member("b", 1, 1), member("c", 1, 1)];
    let p = plan(&members, &vec![ShardState::Vacant; 64], 4);
    assert_eq!(moves(&p.steps), 0);
    assert_eq!(
        p.steps.len(),
        64,
        "every vacant shard reserved, not rate-limited"
    );
    let c = counts(&apply(&vec![ShardState::Vacant; 64], &p.steps));
    assert_eq!((c[&id("a")], c[&id("b")], c[&id("c")]), (22, 21, 21));
}

#[test]
fn a_join_moves_exactly_the_new_members_quota_and_nothing_else() {
    let (four, start, p) = joined(64, member("d", 1, 1));
    assert_eq!(p.quotas[&id("d")], 16);
    assert_eq!(moves(&p.steps), 16, "{:?}", p.steps);
    assert!(p.steps.iter().all(|s| matches!(
        s,
        PlacementStep::Move { to, .. } if *to == id("d")
    )));
    let after = apply(&start, &p.steps);
    assert_eq!(
        counts(&after).values().copied().collect::<Vec<_>>(),
        [16; 4]
    );
    assert!(
        plan(&four, &after, 64).steps.is_empty(),
        "stable once there"
    );
}

#[test]
fn a_new_high_priority_member_takes_its_share_not_everything() {
    let (_, _, p) = joined(60, member("v2", 9, 1));
    assert_eq!(p.quotas[&id("v2")], 15);
    assert_eq!(moves(&p.steps), 15);
}

#[test]
fn a_leave_reserves_exactly_the_leavers_shards() {
    let states = owned(&["a", "b", "c", "a", "b", "c", "a", "b", "c"]);
    let p = plan(&[member("a", 1, 1), member("b", 1, 1)], &states, 1);
    // c's three shards are nobody's now: reserved, not moves, whatever the limit.
    let reserved: Vec<ShardId> = p
        .steps
        .iter()
        .map(|s| match s {
            PlacementStep::Reserve { shard, .. } => *shard,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(reserved, [2, 5, 8].map(ShardId::new));
    let c = counts(&apply(&states, &p.steps));
    assert!(c[&id("a")].abs_diff(c[&id("b")]) <= 1);
}

#[test]
fn moves_in_flight_count_against_the_limit_and_the_rest_are_deferred() {
    let members = [member("a", 1, 1), member("b", 1, 1)];
    let mut states = owned(&["a"; 10]);
    states[9] = ShardState::Moving {
        owner: id("a"),
        to: id("b"),
    };
    let p = plan(&members, &states, 3);
    assert_eq!(
        moves(&p.steps),
        2,
        "one in flight + two new = the limit of 3"
    );
    assert_eq!(p.deferred_moves, 2);
    assert_eq!(p.changes(), 4);
}

#[test]
fn a_move_or_reservation_to_a_member_that_left_is_withdrawn() {
    let states = vec![
        ShardState::Moving {
            owner: id("a"),
            to: id("gone"),
        },
        ShardState::Reserved { holder: id("gone") },
    ];
    let p = plan(&[member("a", 1, 1)], &states, 8);
    assert_eq!(
        p.steps,
        vec![
            PlacementStep::Withdraw {
                shard: ShardId::new(0)
            },
            PlacementStep::Reserve {
                shard: ShardId::new(1),
                holder: id("a")
            },
        ]
    );
}

#[test]
fn a_move_whose_target_no_longer_needs_it_is_withdrawn_when_its_owner_keeps_it() {
    let moving = |s: &str| ShardState::Moving {
        owner: id("a"),
        to: id(s),
    };
    let owned_by_a = ShardState::Owned { owner: id("a") };
    // a handed nothing over yet; b was drained meanwhile: both moves go back to a.
    let states = vec![
        owned_by_a.clone(),
        owned_by_a.clone(),
        moving("b"),
        moving("b"),
    ];
    let p = plan(&[member("a", 1, 1), member("b", 1, 0)], &states, 1);
    assert_eq!(
        p.steps,
        vec![
            PlacementStep::Withdraw {
                shard: ShardId::new(2)
            },
            PlacementStep::Withdraw {
                shard: ShardId::new(3)
            },
        ]
    );
    assert_eq!(p.changes(), 0, "no shard changes hands");
    assert_eq!(p.targets, vec![Some(id("a")); 4]);
    // a's weight grew to 3 while two moves to b were in flight: b's quota is 1 now. One move
    // lands (it counts against the limit of 1), the other goes back to a: no move is planned
    // and, once the first lands, nothing goes back and forth.
    let members = [member("a", 1, 3), member("b", 1, 1)];
    let states = vec![owned_by_a.clone(), owned_by_a, moving("b"), moving("b")];
    let p = plan(&members, &states, 1);
    assert_eq!(
        p.steps,
        vec![PlacementStep::Withdraw {
            shard: ShardId::new(3)
        }]
    );
    assert_eq!((p.changes(), p.deferred_moves), (0, 0));
    let landed = land(&apply_in_flight(&states, &p.steps), &members);
    assert_eq!(
        counts(&landed),
        BTreeMap::from([(id("a"), 3), (id("b"), 1)])
    );
    assert!(plan(&members, &landed, 1).steps.is_empty());
}

#[test]
fn draining_a_member_moves_its_shards_to_the_others() {
    let states = owned(&["a", "a", "b", "b"]);
    let p = plan(&[member("a", 1, 0), member("b", 1, 1)], &states, 8);
    assert_eq!(moves(&p.steps), 2);
    assert_eq!(counts(&apply(&states, &p.steps))[&id("b")], 4);
    // Everyone drained: nothing moves (there is nowhere to go).
    let p = plan(&[member("a", 1, 0)], &states[..2], 8);
    assert!(p.steps.is_empty());
}

fn member_strategy() -> impl Strategy<Value = Vec<MemberShare>> {
    prop::collection::vec((0i32..3, 0u32..4), 1..6).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (p, w))| member(&format!("m{i}"), p, w))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn placement_converges_to_balance_within_the_round_bound_and_stays(
        members in member_strategy(),
        owners in prop::collection::vec(prop::option::of(0usize..8), 1..80),
        limit in 1u32..6,
    ) {
        let names: Vec<CandidateId> = (0..8).map(|i| id(&format!("m{i}"))).collect();
        let mut states: Vec<ShardState> = owners
            .iter()
            .map(|o| match o {
                Some(i) => ShardState::Owned { owner: names[*i].clone() },
                None => ShardState::Vacant,
            })
            .collect();
        let first = plan(&members, &states, limit);
        // Deterministic.
        prop_assert_eq!(&first, &plan(&members, &states, limit));
        let needed = first.changes();
        let moves_needed = moves(&first.steps) as u32 + first.deferred_moves;
        let rounds_bound = moves_needed.div_ceil(limit) + 1;
        let mut rounds = 0;
        let mut changed = 0u32;
        loop {
            let p = plan(&members, &states, limit);
            prop_assert!(moves(&p.steps) as u32 <= limit);
            if p.steps.is_empty() {
                break;
            }
            changed += p.steps.iter().filter(|s| !matches!(s, PlacementStep::Withdraw { .. })).count() as u32;
            states = apply(&states, &p.steps);
            rounds += 1;
            prop_assert!(rounds <= rounds_bound, "{rounds} rounds > {rounds_bound}");
        }
        // Minimal: exactly what the first plan said was needed changed hands.
        prop_assert_eq!(changed, needed);
        // Balanced: every member owns its quota; drained members nothing.
        let q = quotas(&members, states.len() as u32);
        let c = counts(&states);
        let total_weight: u32 = members.iter().map(|m| m.weight.get()).sum();
        for m in &members {
            let owns = c.get(&m.id).copied().unwrap_or(0);
            if total_weight > 0 {
                prop_assert_eq!(owns, q[&m.id], "{:?}", m);
                let exact = states.len() as u64 * u64::from(m.weight.get());
                let lo = exact / u64::from(total_weight);
                let hi = exact.div_ceil(u64::from(total_weight));
                prop_assert!(u64::from(owns) >= lo && u64::from(owns) <= hi);
            }
        }
        // Stable: nothing more to do.
        prop_assert!(plan(&members, &states, limit).steps.is_empty());
    }
}

/// Lands what is in flight (a reservation filled, a move completed), as the members would
/// between two plans.
fn land(states: &[ShardState], live: &[MemberShare]) -> Vec<ShardState> {
    let is_live = |m: &CandidateId| live.iter().any(|l| l.id == *m);
    states
        .iter()
        .map(|s| match s {
            ShardState::Reserved { holder } if is_live(holder) => ShardState::Owned {
                owner: holder.clone(),
            },
            ShardState::Moving { owner, to } if is_live(to) && is_live(owner) => {
                ShardState::Owned { owner: to.clone() }
            }
            // The coordinator fences a dead owner out: its shard is nobody's.
            ShardState::Owned { owner } | ShardState::Moving { owner, .. } if !is_live(owner) => {
                ShardState::Vacant
            }
            other => other.clone(),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn placement_converges_from_any_state_with_moves_and_reservations_in_flight(
        members in member_strategy(),
        shards in prop::collection::vec((0u8..4, 0usize..8, 0usize..8), 1..60),
        limit in 1u32..6,
    ) {
        let names: Vec<CandidateId> = (0..8).map(|i| id(&format!("m{i}"))).collect();
        let mut states: Vec<ShardState> = shards
            .iter()
            .map(|(k, i, j)| match k {
                0 => ShardState::Vacant,
                1 => ShardState::Owned { owner: names[*i].clone() },
                2 => ShardState::Reserved { holder: names[*i].clone() },
                _ => ShardState::Moving { owner: names[*i].clone(), to: names[*j].clone() },
            })
            .collect();
        let mut rounds = 0;
        loop {
            let p = plan(&members, &states, limit);
            prop_assert!(moves(&p.steps) as u32 <= limit);
            let next = land(&apply_in_flight(&states, &p.steps), &members);
            if p.steps.is_empty() && next == states {
                break;
            }
            states = next;
            rounds += 1;
            prop_assert!(rounds <= 200, "no convergence");
        }
        let total_weight: u32 = members.iter().map(|m| m.weight.get()).sum();
        if total_weight > 0 {
            let q = quotas(&members, states.len() as u32);
            let c = counts(&states);
            for m in &members {
                prop_assert_eq!(c.get(&m.id).copied().unwrap_or(0), q[&m.id]);
            }
        }
    }
}

/// Carries out the steps as the coordinator writes them: a move becomes a move in flight, a
/// reservation a reservation (they land in [`land`]).
fn apply_in_flight(states: &[ShardState], steps: &[PlacementStep]) -> Vec<ShardState> {
    carry_out(states, steps, false)
}
