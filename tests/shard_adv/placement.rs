//! Adversarial review of sharded leadership (docs/design.md §12.3): placement as a pure function --
//! balanced, minimal, rate-limited, deterministic and stable over random worlds, and never
//! "everything to the highest priority".

use std::collections::BTreeSet;

use fdb_leader_election::shard::placement::{self, MemberShare, PlacementStep, ShardState};
use fdb_leader_election::{CandidateId, Priority, Weight};

use crate::shard_support::*;

/// Runs placement rounds to quiescence as the protocol would carry them out (moves handed
/// over, reservations acquired by live members); checks the rate limit every round. Returns
/// (rounds, owner changes per shard, final states).
fn converge(
    members: &[MemberShare],
    mut states: Vec<ShardState>,
    max_moves: u32,
) -> (u32, Vec<u32>, Vec<ShardState>) {
    let live: BTreeSet<CandidateId> = members.iter().map(|m| m.id.clone()).collect();
    let mut changes = vec![0u32; states.len()];
    let mut rounds = 0;
    loop {
        let p = placement::plan(members, &states, max_moves);
        assert_eq!(
            p,
            placement::plan(members, &states, max_moves),
            "deterministic"
        );
        if p.steps.is_empty() {
            return (rounds, changes, states);
        }
        rounds += 1;
        assert!(rounds < 200, "placement never settles: {:?}", p.steps);
        for step in &p.steps {
            match step {
                PlacementStep::Reserve { shard, holder } => {
                    states[shard.get() as usize] = ShardState::Reserved {
                        holder: holder.clone(),
                    };
                }
                PlacementStep::Move { shard, from, to } => {
                    let i = shard.get() as usize;
                    assert_eq!(
                        states[i],
                        ShardState::Owned {
                            owner: from.clone()
                        },
                        "a move only from the owner"
                    );
                    states[i] = ShardState::Moving {
                        owner: from.clone(),
                        to: to.clone(),
                    };
                }
                PlacementStep::Withdraw { shard } => {
                    let i = shard.get() as usize;
                    states[i] = match &states[i] {
                        ShardState::Moving { owner, .. } => ShardState::Owned {
                            owner: owner.clone(),
                        },
                        _ => ShardState::Vacant,
                    };
                }
            }
        }
        let moving = states
            .iter()
            .filter(|s| matches!(s, ShardState::Moving { owner, to } if live.contains(owner) && live.contains(to)))
            .count() as u32;
        assert!(
            moving <= max_moves,
            "{moving} moves in flight, limit {max_moves}"
        );
        // Owners hand over, targets acquire.
        for (i, s) in states.iter_mut().enumerate() {
            if let ShardState::Moving { to, .. } = s {
                *s = ShardState::Reserved { holder: to.clone() };
            }
            if let ShardState::Reserved { holder } = s {
                if live.contains(holder) {
                    *s = ShardState::Owned {
                        owner: holder.clone(),
                    };
                    changes[i] += 1;
                }
            }
        }
    }
}

// Guarantee 4 over random worlds: from any ownership (live owners, dead owners, vacancies),
// placement converges to a balanced assignment (each live member of weight w owns ⌊M·w/W⌋ or
// ⌈M·w/W⌉, the extra shards to higher priorities), with never more than `max_concurrent_moves`
// cooperative moves in flight, minimal (each shard changes owner at most once, and exactly
// Σ max(0, owned − quota) + the shards nobody live owns change), deterministic, within
// ⌈moves / limit⌉ + 1 rounds, and stable once there (no steps; no oscillation). Then a member
// joins, one leaves, or a priority changes, and the same holds from the settled state.
#[test]
fn held_placement_is_balanced_minimal_rate_limited_and_stable_over_random_worlds() {
    for seed in 1..=400u64 {
        let mut rng = Rng::new(seed);
        let n = 1 + rng.below(6) as usize;
        let m = 1 + rng.below(70) as u32;
        let max_moves = 1 + rng.below(5) as u32;
        let mut members: Vec<MemberShare> = (0..n)
            .map(|i| MemberShare {
                id: cid(&format!("m{i}")),
                priority: Priority::new(rng.below(3) as i32),
                weight: Weight::new(if rng.chance(10) {
                    0
                } else {
                    1 + rng.below(3) as u32
                }),
            })
            .collect();
        if members.iter().all(|x| x.weight.get() == 0) {
            members[0].weight = Weight::ONE;
        }
        let pick = |rng: &mut Rng| -> ShardState {
            match rng.below(4) {
                0 => ShardState::Vacant,
                1 => ShardState::Owned { owner: cid("dead") },
                _ => ShardState::Owned {
                    owner: cid(&format!("m{}", rng.below(n as u64))),
                },
            }
        };
        let states: Vec<ShardState> = (0..m).map(|_| pick(&mut rng)).collect();
        let mut phase = 0;
        let mut states = states;
        loop {
            let quotas = placement::quotas(&members, m);
            let owned_by = |states: &[ShardState], id: &CandidateId| {
                states
                    .iter()
                    .filter(|s| matches!(s, ShardState::Owned { owner } if owner == id))
                    .count() as u32
            };
            let live: BTreeSet<&CandidateId> = members.iter().map(|x| &x.id).collect();
            let unowned = states
                .iter()
                .filter(|s| !matches!(s, ShardState::Owned { owner } if live.contains(owner)))
                .count() as u32;
            let above: u32 = members
                .iter()
                .map(|x| owned_by(&states, &x.id).saturating_sub(quotas[&x.id]))
                .sum();
            let (rounds, changes, settled) = converge(&members, states.clone(), max_moves);
            let ctx = format!("seed {seed} phase {phase}: {members:?} M={m} limit {max_moves}");
            assert!(
                changes.iter().all(|c| *c <= 1),
                "{ctx}: a shard moved twice: {changes:?}"
            );
            assert_eq!(
                changes.iter().sum::<u32>(),
                above + unowned,
                "{ctx}: not minimal"
            );
            assert!(
                rounds <= above.div_ceil(max_moves) + 1,
                "{ctx}: {rounds} rounds for {above} moves"
            );
            let b = bounds(&members, m);
            let mut total = 0;
            for x in &members {
                let have = owned_by(&settled, &x.id);
                total += have;
                let (lo, hi) = b[&x.id];
                assert!(
                    lo <= have && have <= hi,
                    "{ctx}: {} owns {have}, not in [{lo}, {hi}]",
                    x.id
                );
            }
            assert_eq!(total, m, "{ctx}: every shard owned");
            // The extra shards go to higher priorities first.
            for x in &members {
                for y in &members {
                    let (fx, fy) = (b[&x.id], b[&y.id]);
                    let extra = |id: &CandidateId, f: (u32, u32)| owned_by(&settled, id) - f.0;
                    if x.priority > y.priority && fx.0 != fx.1 && fy.0 != fy.1 {
                        assert!(
                            extra(&x.id, fx) >= extra(&y.id, fy),
                            "{ctx}: priority order"
                        );
                    }
                }
            }
            assert!(
                placement::plan(&members, &settled, max_moves)
                    .steps
                    .is_empty()
            );
            phase += 1;
            if phase == 3 {
                break;
            }
            // Change the world: a join, a leave, or a priority change.
            states = settled;
            match rng.below(3) {
                0 => members.push(MemberShare {
                    id: cid(&format!("j{phase}")),
                    priority: Priority::new(rng.below(4) as i32),
                    weight: Weight::new(1 + rng.below(3) as u32),
                }),
                1 if members.len() > 1 => {
                    members.remove(rng.below(members.len() as u64) as usize);
                }
                _ => {
                    let i = rng.below(members.len() as u64) as usize;
                    members[i].priority = Priority::new(rng.below(4) as i32);
                }
            }
            if members.iter().all(|x| x.weight.get() == 0) {
                members[0].weight = Weight::ONE;
            }
        }
    }
}

// Guarantee 4, "never everything to the highest priority": a rolling deploy's first new
// member, of a higher priority, takes its share only. (Also a note on the README's claim "a
// join moves exactly the newcomer's quota": with unequal weights a join can also shift one
// extra shard between old members, because the ⌈⌉ shares are re-ranked; that move is needed by
// the balance rule itself, so placement stays minimal, but the README's wording is too strong.)
#[test]
fn held_a_high_priority_newcomer_takes_its_share_only() {
    let mut members: Vec<MemberShare> = (0..10)
        .map(|i| MemberShare {
            id: cid(&format!("old{i}")),
            priority: Priority::new(0),
            weight: Weight::ONE,
        })
        .collect();
    let (_, _, settled) = converge(&members, vec![ShardState::Vacant; 64], 8);
    members.push(MemberShare {
        id: cid("new"),
        priority: Priority::new(10),
        weight: Weight::ONE,
    });
    let p = placement::plan(&members, &settled, 64);
    assert_eq!(p.quotas[&cid("new")], 6, "⌈64/11⌉");
    assert_eq!(p.changes(), 6, "only the newcomer's quota moves");

    // The README's wording, with unequal weights: z joins with quota 0, one shard still moves
    // (b's share drops from 4/3 to exactly 1; a's 0.67 becomes 0.5 and takes the extra one).
    let a = MemberShare {
        id: cid("a"),
        priority: Priority::new(0),
        weight: Weight::ONE,
    };
    let b = MemberShare {
        id: cid("b"),
        priority: Priority::new(1),
        weight: Weight::new(2),
    };
    let z = MemberShare {
        id: cid("z"),
        priority: Priority::new(0),
        weight: Weight::ONE,
    };
    let (_, _, before) = converge(&[a.clone(), b.clone()], vec![ShardState::Vacant; 2], 2);
    let p = placement::plan(&[a, b, z.clone()], &before, 2);
    assert_eq!(p.quotas[&z.id], 0);
    assert_eq!(p.changes(), 1, "one move, though the newcomer's quota is 0");
}
