//! Adversarial review of sharded leadership (docs/design.md §12), the coordinator's side: coordinator
//! failover, the move limit, moves withdrawn when their target no longer needs the shard, and
//! operators (freeze, drain, move) racing the protocol.

use std::collections::BTreeMap;
use std::sync::Arc;

use fdb_leader_election::shard::{Member, ShardMove, ShardedElection};
use fdb_leader_election::{Ballot, CandidateId, Clock, ElectionError, ShardId};

use crate::shard_support::*;

// Coordinator failover (docs/design.md §12.3: "A coordinator failover pauses moves, never
// ownership"; §12.2: the lapse rule has no shortcut): the new coordinator times every member
// from its own first observation; the old coordinator's token is refused; the live member
// keeps its shards throughout.
#[tokio::test]
async fn held_a_coordinator_failover_times_members_from_scratch_and_refuses_the_old_token() {
    let w = World::new(4, 4).await;
    let (c1, coord1) = w.coordinator().await;
    let (c2, coord2) = w
        .coordinator_on("coordinator-2", Arc::new(w.clock.clone()))
        .await;
    assert!(c2.fencing_token().is_none());
    let (a, b) = (w.member("a", 1), w.member("b", 1));
    w.cycle(&a).await;
    w.cycle(&b).await;
    w.coordinate(&c1, &coord1).await;
    w.cycle(&a).await;
    w.cycle(&b).await;
    let b_owned = b.owned_shards();
    assert_eq!(b_owned.len(), 2);
    // a dies (its last renewal seen by c1); c1 coordinates 1.5 s more, then dies too.
    w.cycle(&a).await;
    w.coordinate(&c1, &coord1).await;
    let old_token = c1.fencing_token().unwrap();
    for _ in 0..6 {
        w.advance(ms(250));
        w.cycle(&b).await;
        assert!(w.coordinate(&c1, &coord1).await.is_empty());
        w.election
            .coordinator_election()
            .run_cycle(&w.db, &c2)
            .await
            .unwrap();
    }
    // c2 takes over the coordinator election after c1's lease, then times a from scratch.
    let mut c2_first = None;
    let mut fenced_at = None;
    for _ in 0..60 {
        w.advance(ms(250));
        w.cycle(&b).await;
        assert_eq!(b.owned_shards(), b_owned, "b's ownership never pauses");
        assert_exclusive(&[&a, &b], "failover");
        w.election
            .coordinator_election()
            .run_cycle(&w.db, &c2)
            .await
            .unwrap();
        let Some(token) = c2.fencing_token() else {
            continue;
        };
        assert!(token > old_token);
        c2_first.get_or_insert(w.clock.now());
        if !w.coordinate_with(&coord2, token).await.unwrap().is_empty() {
            fenced_at = Some(w.clock.now());
            break;
        }
    }
    let (first, fenced) = (c2_first.unwrap(), fenced_at.unwrap());
    assert!(
        fenced.saturating_duration_since(first) >= w.config.lease_duration(),
        "c2 fenced a {:?} after its first look",
        fenced.saturating_duration_since(first)
    );
    assert!(a.owned_shards().is_empty());
    w.cycle(&b).await;
    assert_eq!(b.owned_shards().len(), 4);
    // The old coordinator comes back with its old token: refused.
    assert!(matches!(
        w.coordinate_with(&coord1, old_token).await,
        Err(ElectionError::StaleToken { .. })
    ));
}

// Operators racing with moves and acquisitions (docs/design.md §10.4, §12.5): an operator's move of a
// shard, in a transaction that overlaps the target's acquisition, never gives the shard to two
// members: whichever commits second conflicts and re-decides on the new state.
#[tokio::test]
async fn held_an_operator_move_racing_an_acquisition_never_makes_two_owners() {
    let w = World::new(6, 6).await;
    let (leader, coord) = w.coordinator().await;
    let (a, b, c) = (w.member("a", 1), w.member("b", 1), w.member("c", 1));
    for m in [&a, &b, &c] {
        w.cycle(m).await;
    }
    w.coordinate(&leader, &coord).await;
    for m in [&a, &b, &c] {
        w.cycle(m).await;
    }
    w.operate(|e, txn| async move { e.set_frozen(&txn, true).await })
        .await
        .unwrap();
    let op = CandidateId::parse("ops").unwrap();
    let move_to = |s: ShardId, to: &Member| {
        let (to, op) = (to.id().clone(), op.clone());
        move |e: ShardedElection, txn: fdb_leader_election::memdb::MemTransaction| {
            let (to, op) = (to.clone(), op.clone());
            async move { e.move_shard(&txn, s, &to, &op).await }
        }
    };
    let (s, t) = a.owned_shards().into_iter().next().unwrap();
    assert_eq!(
        w.operate(move_to(s, &b)).await.unwrap(),
        ShardMove::Requested {
            from: a.id().clone()
        }
    );
    w.cycle_ready(&a).await; // a hands s over to b
    assert_eq!(a.shard_token(s), None);

    // Race 1: the operator's move to c decides first; b's acquisition commits first.
    let op_txn = w.db.create_transaction();
    let decided = w
        .election
        .move_shard(&op_txn, s, c.id(), &op)
        .await
        .unwrap();
    assert_eq!(decided, ShardMove::Reserved);
    w.cycle(&b).await;
    let t1 = Ballot::new(t.get() + 1);
    assert_eq!(b.shard_token(s), Some(t1));
    assert!(
        op_txn.commit().await.is_err(),
        "the operator's write conflicts"
    );
    assert_eq!(
        w.operate(move_to(s, &c)).await.unwrap(),
        ShardMove::Requested {
            from: b.id().clone()
        }
    );
    w.cycle_ready(&b).await;
    assert_exclusive(&[&a, &b, &c], "race 1");

    // Race 2: c's acquisition decides first; the operator's move (to a) commits first.
    let c_txn = w.db.create_transaction();
    let c_cycle = w.election.member_cycle(&c_txn, &c, &none()).await.unwrap();
    assert_eq!(c_cycle.acquired(), vec![(s, Ballot::new(t.get() + 2))]);
    assert_eq!(
        w.operate(move_to(s, &a)).await.unwrap(),
        ShardMove::Reserved
    );
    assert!(c_txn.commit().await.is_err(), "c's acquisition conflicts");
    drop(c_cycle);
    assert_eq!(c.shard_token(s), None);
    w.cycle(&c).await;
    assert_eq!(c.shard_token(s), None, "reserved for a now");
    w.cycle(&a).await;
    assert_eq!(
        a.shard_token(s),
        Some(Ballot::new(t.get() + 2)),
        "ballot + 1, once"
    );
    assert_exclusive(&[&a, &b, &c], "race 2");
    for stale in [t, t1] {
        assert!(matches!(
            w.fence(s, stale).await,
            Err(ElectionError::StaleToken { .. })
        ));
    }
    w.fence(s, Ballot::new(t.get() + 2)).await.unwrap();
}

// Guarantee 4, the move limit, in the manual flow: never more than `max_concurrent_moves`
// requests in flight, however long the owners and the target take. (Note: a shard handed over
// but not yet acquired no longer counts as a move, by design -- placement.rs: "Shards nobody
// live holds are not moves" -- so with a slow target the shards in transit, owned by nobody,
// can exceed the limit; printed here, not asserted.)
#[tokio::test]
async fn held_the_move_limit_bounds_the_requests_in_flight() {
    let (w, leader, coord, a) = World::with_owner(12, 2).await;
    let b = w.member("b", 1);
    w.cycle(&b).await;
    let mut max_in_transit = 0;
    for round in 0..8 {
        w.coordinate(&leader, &coord).await;
        let mut requested = 0;
        let mut in_transit = 0;
        for s in (0..12).map(ShardId::new) {
            let rec = w.shard(s).await.unwrap();
            requested += usize::from(rec.move_to().is_some());
            in_transit += usize::from(rec.owner().is_none() && rec.reserved_for().is_some());
        }
        assert!(
            requested <= 2,
            "round {round}: {requested} move requests in flight"
        );
        max_in_transit = max_in_transit.max(in_transit + requested);
        w.cycle_ready(&a).await; // a hands over at once; b is slow: one cycle in three
        if round % 3 == 2 {
            w.cycle(&b).await;
        }
        assert_exclusive(&[&a, &b], "moves");
    }
    eprintln!("shards requested or in transit at once, limit 2: at most {max_in_transit}");
}

/// The straddling tests' set-up: `a` owns every shard, `b` joins, and a coordinator attempt
/// (`txn`, not yet committed) has read and planned two moves a -> b.
async fn an_attempt_planning_two_moves_to_b() -> (
    World,
    fdb_leader_election::Candidate,
    fdb_leader_election::shard::Coordinator,
    Member,
    Member,
    fdb_leader_election::memdb::MemTransaction,
) {
    let (w, leader, coord, a) = World::with_owner(4, 4).await;
    let b = w.member("b", 1);
    w.cycle(&b).await;
    w.election
        .coordinator_election()
        .run_cycle(&w.db, &leader)
        .await
        .unwrap();
    let token = leader.fencing_token().unwrap();
    let txn = w.db.create_transaction();
    let planned = w.election.coordinate(&txn, &coord, token).await.unwrap();
    assert_eq!(planned.shards_written, 2, "two moves a -> b planned");
    (w, leader, coord, a, b, txn)
}

// Operators, docs/design.md §12.5 / `set_frozen`'s contract: "While frozen, the coordinator moves
// nothing a live member holds (no move requests ...)". Not an ownership-safety matter: moves
// stay cooperative and fenced. (Found by the adversarial review; failed before the fix.)
//
// 1. a owns all 4 shards; b joins.
// 2. A coordinator attempt starts: it reads the layout (not frozen) and plans 2 moves a -> b.
// 3. Meanwhile an operator freezes placement (`set_frozen(true)` commits).
// 4. The attempt's commit conflicts: an attempt that writes placement steps adds a read
//    conflict on the layout (and on the drain marks of the members it placed), so no step
//    decided before the freeze lands after it; retried, it decides on the frozen layout.
//    (Before the fix it read the layout with a snapshot read and no conflict range, and
//    committed two move requests after placement was frozen.)
#[tokio::test]
async fn a_coordinator_attempt_straddling_set_frozen_writes_no_move_after_the_freeze() {
    // The coordinator's attempt reads and decides...
    let (w, _leader, _coord, _a, _b, txn) = an_attempt_planning_two_moves_to_b().await;
    // ... the operator freezes placement ...
    w.operate(|e, txn| async move { e.set_frozen(&txn, true).await })
        .await
        .unwrap();
    // ... and the attempt commits.
    let committed = txn.commit().await.is_ok();
    let mut requested = Vec::new();
    for s in 0..4 {
        if let Some(to) = w.shard(ShardId::new(s)).await.unwrap().move_to() {
            requested.push((s, to.clone()));
        }
    }
    assert!(
        requested.is_empty(),
        "move requests written by a commit after set_frozen(true) committed \
         (attempt committed: {committed}): {requested:?}"
    );
}

// The same rule for a drain (docs/design.md §12.5): a coordinator attempt that planned moves toward a
// member, straddling an operator's `set_drained` of that member, conflicts; retried, it moves
// nothing toward the drained member.
#[tokio::test]
async fn a_coordinator_attempt_straddling_set_drained_writes_no_move_toward_the_drained_member() {
    let (w, leader, coord, _a, b, txn) = an_attempt_planning_two_moves_to_b().await;
    let b_id = b.id().clone();
    w.set_drained(&b_id, true).await;
    assert!(txn.commit().await.is_err(), "the attempt conflicts");
    w.coordinate(&leader, &coord).await;
    for s in (0..4).map(ShardId::new) {
        assert_eq!(w.shard(s).await.unwrap().move_to(), None);
    }
}

// Guarantee 4: placement is "minimal" and "stable (no oscillation)": "a join or leave moves
// only as many shards as balance needs" (docs/design.md §12.3). (Found by the adversarial review;
// failed before the fix.)
//
// 1. a owns all 4 shards (ballot 1). b joins: the coordinator asks a to hand shards 2 and 3
//    over to b (two moves, within the limit of 4).
// 2. Before a has handed them over, an operator drains b (`set_drained(b, true)`): b's quota
//    becomes 0, a's 4. At that instant the records already are balanced: a owns all 4.
// 3. The coordinator withdraws the two requests: a move in flight whose target no longer needs
//    the shard goes back to its owner when the owner has room (`placement::plan`), and a's
//    inbox no longer asks for them.
// 4. No shard changes owner; every ballot stays 1. (Before the fix placement let the moves
//    land -- "in flight between live members: let it land (no churn)" -- and then moved both
//    shards back from b to a: 4 changes of owner where balance needed none.)
#[tokio::test]
async fn a_move_toward_a_member_drained_meanwhile_is_withdrawn_not_made_twice() {
    let (w, leader, coord, a) = World::with_owner(4, 4).await;
    assert_eq!(a.owned_shards().len(), 4);
    let b = w.member("b", 1);
    w.cycle(&b).await;
    w.coordinate(&leader, &coord).await; // asks a for 2 shards
    let mut asked = Vec::new();
    for s in (0..4).map(ShardId::new) {
        if w.shard(s).await.unwrap().move_to() == Some(b.id()) {
            asked.push(s);
        }
    }
    assert_eq!(asked.len(), 2, "two move requests a -> b in flight");
    let b_id = b.id().clone();
    w.set_drained(&b_id, true).await;
    // Balanced as it stands: a owns all 4, b (drained) none. Now let the world settle.
    let before: BTreeMap<ShardId, Ballot> = a.owned_shards();
    for _ in 0..6 {
        w.coordinate(&leader, &coord).await;
        w.cycle_ready(&a).await;
        w.cycle_ready(&b).await;
        w.cycle(&a).await;
        w.cycle(&b).await;
        assert_exclusive(&[&a, &b], "settling");
    }
    assert_eq!(a.owned_shards().len(), 4, "balanced in the end");
    let mut changes = Vec::new();
    for (s, ballot) in &before {
        let now = w.shard(*s).await.unwrap().ballot();
        if now != *ballot {
            changes.push((*s, *ballot, now));
        }
    }
    assert!(
        changes.is_empty(),
        "draining b, whose records were already balanced, changed owners (shard, ballot \
         before, ballot after): {changes:?}"
    );
}
