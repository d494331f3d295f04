//! Placement: which live member should own each shard, and the next moves to get there
//! (docs/design.md §12.3). A pure function of the live members and the shards' current state.
//!
//! **Balanced.** With live members of weights `w_i` (total `W`), member `i` owns
//! `⌊M·w_i/W⌋` shards, plus one if its share is not an integer and it is among the highest
//! priorities (ties by id) that take the `M − Σ⌊M·w_i/W⌋` shards left over: every member
//! owns `⌊M·w/W⌋` or `⌈M·w/W⌉`. Weight 0 is drained. Never "everything to the highest
//! priority": a new member of a rolling deploy takes only its share.
//!
//! **Minimal.** A member keeps what it holds up to its quota; only shards above quota, and
//! shards no live member holds, change hands. So the moves planned are exactly
//! `Σ max(0, held_i − quota_i)` over live members plus the shards nobody live holds: a member
//! joining takes its quota and nothing else moves; a member leaving gives up what it held and
//! nothing else moves. A move in flight counts for its target; one whose target no longer
//! needs it (drained, or its quota shrank meanwhile) goes back to its owner when the owner has
//! room, and the request is withdrawn: no shard goes there and back.
//!
//! Shards owned by a member that is not live (its lease lapsed) are reserved for their targets
//! only once the coordinator has fenced that member out (bumped its epoch, docs/design.md §12.2):
//! placement plans the reservation; the coordinator writes it after the fencing.
//!
//! **Rate-limited.** At most `max_concurrent_moves` cooperative moves (a live owner handing a
//! shard over) are in flight, those already requested included. Shards nobody live holds are
//! not moves (there is no work to stop): they are reserved for their targets at once.
//!
//! **Deterministic and stable.** Members are ranked by priority (higher first), then id;
//! shards by number. Recomputed with nothing changed, the plan is the same; once the
//! planned moves are done, it plans none (no oscillation, equal priorities included).

use std::collections::BTreeMap;

use crate::ids::{CandidateId, Priority, ShardId, Weight};

/// A live member, as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberShare {
    /// The member.
    pub id: CandidateId,
    /// Its priority: the larger shares go to higher priorities.
    pub priority: Priority,
    /// Its weight (0: drained).
    pub weight: Weight,
}

/// A shard's current state, as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardState {
    /// Nobody owns it and nobody is to fill it.
    Vacant,
    /// `owner` owns it (whether or not `owner` is live).
    Owned {
        /// The owner.
        owner: CandidateId,
    },
    /// Vacant and reserved for `holder`, which is to acquire it.
    Reserved {
        /// Who is to acquire it.
        holder: CandidateId,
    },
    /// `owner` owns it and was asked to hand it over to `to` (a move in flight).
    Moving {
        /// The owner.
        owner: CandidateId,
        /// The member it is handed over to.
        to: CandidateId,
    },
}

/// What the coordinator should write next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementStep {
    /// Reserve a shard no live member holds for `holder` (no work to stop: not a move).
    Reserve {
        /// The shard.
        shard: ShardId,
        /// Who is to acquire it.
        holder: CandidateId,
    },
    /// Ask `from`, which owns the shard, to hand it over to `to` (a cooperative move).
    Move {
        /// The shard.
        shard: ShardId,
        /// Its owner.
        from: CandidateId,
        /// Its target.
        to: CandidateId,
    },
    /// Withdraw a move or a reservation whose target is no longer live.
    Withdraw {
        /// The shard.
        shard: ShardId,
    },
}

/// The target placement and the steps toward it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Each member's quota: how many shards it should own.
    pub quotas: BTreeMap<CandidateId, u32>,
    /// Each shard's target owner (`None`: no live member with a weight).
    pub targets: Vec<Option<CandidateId>>,
    /// What to write now, in shard order: reservations and withdrawals, and at most
    /// `max_concurrent_moves` moves in flight (counting those already requested).
    pub steps: Vec<PlacementStep>,
    /// Moves still needed beyond this round's limit.
    pub deferred_moves: u32,
}

impl Placement {
    /// How many shards would change hands to reach the target: the planned and deferred
    /// moves plus the reservations of shards nobody live holds.
    pub fn changes(&self) -> u32 {
        let planned = self
            .steps
            .iter()
            .filter(|s| !matches!(s, PlacementStep::Withdraw { .. }))
            .count();
        u32::try_from(planned)
            .unwrap_or(u32::MAX)
            .saturating_add(self.deferred_moves)
    }
}

/// Each live member's quota of `shards` shards, by weight, the extra shards to the highest
/// priorities whose share is not an integer (ties: the smaller id).
pub fn quotas(members: &[MemberShare], shards: u32) -> BTreeMap<CandidateId, u32> {
    let total: u128 = members.iter().map(|m| u128::from(m.weight.get())).sum();
    let mut out = BTreeMap::new();
    if total == 0 {
        for m in members {
            out.insert(m.id.clone(), 0);
        }
        return out;
    }
    let mut given: u128 = 0;
    let mut fractional = Vec::new();
    for m in ranked(members) {
        let share = u128::from(shards).saturating_mul(u128::from(m.weight.get()));
        let floor = share.checked_div(total).unwrap_or(0);
        given = given.saturating_add(floor);
        if share.checked_rem(total).unwrap_or(0) != 0 {
            fractional.push(m.id.clone());
        }
        out.insert(m.id.clone(), u32::try_from(floor).unwrap_or(u32::MAX));
    }
    let left = u128::from(shards).saturating_sub(given);
    for id in fractional
        .into_iter()
        .take(usize::try_from(left).unwrap_or(usize::MAX))
    {
        if let Some(q) = out.get_mut(&id) {
            *q = q.saturating_add(1);
        }
    }
    out
}

/// Members by priority (higher first), then id.
fn ranked(members: &[MemberShare]) -> Vec<&MemberShare> {
    let mut v: Vec<&MemberShare> = members.iter().collect();
    v.sort_by(|a, b| b.priority.cmp(&a.priority).then_with(|| a.id.cmp(&b.id)));
    v
}

/// Plans the placement of `shards` (indexed by shard number) over the live `members`.
pub fn plan(
    members: &[MemberShare],
    shards: &[ShardState],
    max_concurrent_moves: u32,
) -> Placement {
    let count = u32::try_from(shards.len()).unwrap_or(u32::MAX);
    let quotas = quotas(members, count);
    let live = |id: &CandidateId| quotas.contains_key(id);
    // Who holds each shard for placement's purposes: its live owner, or the live member a
    // move or reservation in flight brings it to.
    let held: Vec<Option<&CandidateId>> = shards
        .iter()
        .map(|s| match s {
            ShardState::Vacant => None,
            ShardState::Owned { owner } => live(owner).then_some(owner),
            ShardState::Reserved { holder } => live(holder).then_some(holder),
            ShardState::Moving { owner, to } => {
                if live(to) {
                    Some(to)
                } else {
                    live(owner).then_some(owner)
                }
            }
        })
        .collect();
    let mut by_member: BTreeMap<&CandidateId, Vec<usize>> = BTreeMap::new();
    for (i, h) in held.iter().enumerate() {
        if let Some(m) = h {
            by_member.entry(m).or_default().push(i);
        }
    }
    let mut targets: Vec<Option<CandidateId>> = vec![None; shards.len()];
    let mut free: Vec<usize> = Vec::new();
    let mut room: Vec<(&MemberShare, u32)> = Vec::new();
    for m in ranked(members) {
        let quota = quotas.get(&m.id).copied().unwrap_or(0);
        let mut mine = by_member.remove(&m.id).unwrap_or_default();
        // Keep the shards in flight to this member first (they are on their way), then its
        // own, by number; the rest above quota go.
        mine.sort_by_key(|&i| (!in_flight_to(&shards[i], &m.id), i));
        let keep = usize::try_from(quota).unwrap_or(usize::MAX).min(mine.len());
        for &i in &mine[..keep] {
            targets[i] = Some(m.id.clone());
        }
        free.extend_from_slice(&mine[keep..]);
        let kept = u32::try_from(keep).unwrap_or(u32::MAX);
        room.push((m, quota.saturating_sub(kept)));
    }
    free.extend(
        held.iter()
            .enumerate()
            .filter(|(_, h)| h.is_none())
            .map(|(i, _)| i),
    );
    free.sort_unstable();
    // A shard on its way to a member that no longer needs it goes back to its owner first, if
    // the owner has room: it never left, so keeping it changes no owner (the move is
    // withdrawn below) where sending it on would change two.
    free.retain(|&i| {
        let ShardState::Moving { owner, .. } = &shards[i] else {
            return true;
        };
        let Some((_, space)) = room.iter_mut().find(|(m, _)| m.id == *owner) else {
            return true;
        };
        if *space == 0 {
            return true;
        }
        *space = space.saturating_sub(1);
        targets[i] = Some(owner.clone());
        false
    });
    // Fill the members with room, highest rank first, shards by number.
    let mut free_iter = free.into_iter();
    'fill: for (m, space) in &room {
        for _ in 0..*space {
            let Some(i) = free_iter.next() else {
                break 'fill;
            };
            targets[i] = Some(m.id.clone());
        }
    }

    // Moves in flight between live members that stay in flight (those going back to their
    // owner are withdrawn below).
    let mut in_flight = u32::try_from(
        shards
            .iter()
            .zip(&targets)
            .filter(|(s, t)| {
                matches!(s, ShardState::Moving { to, owner }
                    if live(to) && live(owner) && t.as_ref() != Some(owner))
            })
            .count(),
    )
    .unwrap_or(u32::MAX);
    let mut steps = Vec::new();
    let mut deferred_moves = 0u32;
    for (i, (state, target)) in shards.iter().zip(&targets).enumerate() {
        let shard = ShardId::new(u32::try_from(i).unwrap_or(u32::MAX));
        let Some(target) = target else {
            // No live member with a weight: leave it as it is, withdrawing dead targets.
            if matches!(state, ShardState::Reserved { holder } if !live(holder))
                || matches!(state, ShardState::Moving { to, .. } if !live(to))
            {
                steps.push(PlacementStep::Withdraw { shard });
            }
            continue;
        };
        let mut move_from = |owner: &CandidateId, steps: &mut Vec<PlacementStep>| {
            if in_flight < max_concurrent_moves {
                in_flight = in_flight.saturating_add(1);
                steps.push(PlacementStep::Move {
                    shard,
                    from: owner.clone(),
                    to: target.clone(),
                });
            } else {
                deferred_moves = deferred_moves.saturating_add(1);
            }
        };
        let reserve = |steps: &mut Vec<PlacementStep>| {
            steps.push(PlacementStep::Reserve {
                shard,
                holder: target.clone(),
            });
        };
        match state {
            ShardState::Vacant => reserve(&mut steps),
            ShardState::Owned { owner } if owner == target => {}
            // A live owner hands the shard over; one nobody live owns (its owner's epoch was
            // bumped: the coordinator passes such shards as vacant) is reserved.
            ShardState::Owned { owner } if live(owner) => move_from(owner, &mut steps),
            ShardState::Owned { .. } => reserve(&mut steps),
            ShardState::Reserved { holder } if holder == target => {}
            // A reservation for another member is replaced (the two writes conflict with the
            // holder's acquisition: only one of them commits).
            ShardState::Reserved { .. } => reserve(&mut steps),
            // A move from an owner that is no longer live cannot complete: once the coordinator
            // has fenced that owner out, the shard is reserved for its target.
            ShardState::Moving { owner, .. } if !live(owner) => reserve(&mut steps),
            ShardState::Moving { to, .. } if to == target => {}
            // Its target no longer needs it and its owner keeps it: withdrawn (no churn).
            ShardState::Moving { owner, .. } if owner == target => {
                steps.push(PlacementStep::Withdraw { shard });
            }
            // Another move in flight between live members: let it land (no churn); the next
            // plan moves the shard on if it is then above that member's quota.
            ShardState::Moving { to, .. } if live(to) => {}
            // A move to a member that left: withdrawn, and the live owner moves the shard to
            // its target if that is another member.
            ShardState::Moving { owner, .. } => {
                steps.push(PlacementStep::Withdraw { shard });
                if owner != target {
                    move_from(owner, &mut steps);
                }
            }
        }
    }
    Placement {
        quotas,
        targets,
        steps,
        deferred_moves,
    }
}

/// Whether `state` brings the shard to `member` (a move or a reservation in flight).
fn in_flight_to(state: &ShardState, member: &CandidateId) -> bool {
    match state {
        ShardState::Reserved { holder } => holder == member,
        ShardState::Moving { to, .. } => to == member,
        ShardState::Vacant | ShardState::Owned { .. } => false,
    }
}
