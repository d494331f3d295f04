//! Sharded leadership on MemDb through the public API (the manual flow): members join and the
//! coordinator balances the shards; a member joining takes its share by cooperative moves
//! (two commits each); a crashed member is fenced out by its epoch after a full lease and its
//! shards are owned again; a member's steady heartbeat reads three keys and writes one,
//! whatever the number of shards; stale tokens are refused; one unsettled cycle per member.

use crate::shard_support::in_txn;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::shard_support::{World, timings};
use fdb_leader_election::ElectionTxn;
use fdb_leader_election::shard::{Coordinator, Member, ShardMove, ShardedElection};
use fdb_leader_election::{Ballot, Candidate, CandidateId, ElectionError, LeaderElection, ShardId};
use foundationdb_tuple::Subspace;

const M: u32 = 64;

/// The world of these tests: `shards` shards, at most `max_moves` moves at once, a 3 s lease.
async fn world(shards: u32, max_moves: u32) -> World {
    World::with_config(shards, max_moves, timings(3000, 1000, 6000, 300)).await
}

/// Rounds of coordinate, hand over (work stopped), acquire, until a round changes nothing;
/// returns how many rounds changed something.
async fn settle(w: &World, leader: &Candidate, c: &Coordinator, members: &[&Member]) -> u32 {
    let mut rounds = 0;
    loop {
        let before: Vec<_> = members.iter().map(|m| m.owned_shards()).collect();
        w.coordinate_leading(leader, c).await;
        for m in members {
            w.cycle_ready(m).await;
            assert_exclusive(members);
        }
        for m in members {
            w.cycle(m).await;
            assert_exclusive(members);
        }
        let after: Vec<_> = members.iter().map(|m| m.owned_shards()).collect();
        if before == after {
            return rounds;
        }
        rounds += 1;
        assert!(rounds < 20, "placement did not settle");
    }
}

/// No shard is believed owned by two members at once.
fn assert_exclusive(members: &[&Member]) {
    let mut seen: BTreeMap<ShardId, &str> = BTreeMap::new();
    for m in members {
        for shard in m.owned_shards().keys() {
            if let Some(other) = seen.insert(*shard, m.id().as_str()) {
                panic!("shard {shard} owned by {other} and {}", m.id());
            }
        }
    }
}

#[tokio::test]
async fn three_members_are_balanced_and_a_fourth_takes_its_share_by_cooperative_moves() {
    let w = world(M, 8).await;
    let (leader, coord) = w.coordinator().await;
    let (a, b, c) = (w.member("a", 1), w.member("b", 1), w.member("c", 1));
    for m in [&a, &b, &c] {
        w.cycle(m).await; // join
    }
    w.coordinate_leading(&leader, &coord).await; // reserves all 64
    for m in [&a, &b, &c] {
        w.cycle(m).await; // acquire
    }
    let counts: Vec<usize> = [&a, &b, &c]
        .iter()
        .map(|m| m.owned_shards().len())
        .collect();
    assert_eq!(counts.iter().sum::<usize>(), 64);
    assert!(counts.iter().all(|n| *n == 21 || *n == 22), "{counts:?}");
    assert_exclusive(&[&a, &b, &c]);
    // Every owned shard's token is admitted, at ballot 1; a stale or foreign one is not.
    let (shard, token) = a.owned_shards().into_iter().next().unwrap();
    assert_eq!(token, Ballot::new(1));
    w.fence(shard, token).await.unwrap();
    assert!(matches!(
        w.fence(shard, Ballot::new(2)).await,
        Err(ElectionError::StaleToken { .. })
    ));

    // d joins: the coordinator asks for 16 moves (limit 8 per round); owners hand over once
    // ready; d acquires: two commits per move, ballot + 1.
    let d = w.member("d", 1);
    w.cycle(&d).await;
    let mut rounds = 0;
    while d.owned_shards().len() < 16 {
        rounds += 1;
        assert!(rounds <= 4, "balance not restored in {rounds} rounds");
        w.coordinate_leading(&leader, &coord).await;
        for m in [&a, &b, &c] {
            w.cycle_ready(m).await; // hand over (the work is stopped)
        }
        assert_exclusive(&[&a, &b, &c, &d]);
        w.cycle(&d).await; // acquire
        assert_exclusive(&[&a, &b, &c, &d]);
    }
    assert_eq!(rounds, 2, "16 moves at 8 per round");
    for m in [&a, &b, &c, &d] {
        assert_eq!(m.owned_shards().len(), 16, "{m:?}");
    }
    for (_, ballot) in d.owned_shards() {
        assert_eq!(ballot, Ballot::new(2), "moved once: ballot + 1");
    }
    // Stable: another round moves nothing.
    w.coordinate_leading(&leader, &coord).await;
    for m in [&a, &b, &c, &d] {
        w.cycle_ready(m).await;
        assert_eq!(m.owned_shards().len(), 16);
    }
}

#[tokio::test]
async fn a_crashed_member_is_fenced_by_its_epoch_after_a_lease_and_its_shards_are_owned_again() {
    let w = world(M, 8).await;
    let (leader, coord) = w.coordinator().await;
    let (a, b) = (w.member("a", 1), w.member("b", 1));
    for m in [&a, &b] {
        w.cycle(m).await;
    }
    w.coordinate_leading(&leader, &coord).await;
    for m in [&a, &b] {
        w.cycle(m).await;
    }
    let b_shards = b.owned_shards();
    assert_eq!(b_shards.len(), 32);
    // b crashes: it never cycles again. a keeps renewing; the coordinator keeps timing.
    let mut t = Duration::ZERO;
    let mut fenced = Vec::new();
    while fenced.is_empty() {
        w.advance(Duration::from_millis(500));
        t += Duration::from_millis(500);
        w.cycle(&a).await;
        fenced = w.coordinate_leading(&leader, &coord).await;
        // Before a full lease of b's unchanged record, nobody else owns b's shards.
        assert_exclusive(&[&a, &b]);
    }
    assert_eq!(fenced, vec![b.id().clone()]);
    assert!(t >= w.config.lease_duration(), "fenced after {t:?}");
    // The member records list both, b fenced out at a new epoch.
    let members = w
        .operate(|e, txn| async move { e.members(&txn).await })
        .await
        .unwrap();
    assert_eq!(members.len(), 2);
    assert!(!members[a.id()].is_fenced() && members[a.id()].epoch() == 1);
    assert!(members[b.id()].is_fenced() && members[b.id()].epoch() == 2);
    // b's belief had ended before the fencing (its lease from its last renewal).
    assert!(b.owned_shards().is_empty());
    // Its tokens are refused at once (its epoch ended), before anyone acquires its shards.
    let (shard, token) = b_shards.into_iter().next().unwrap();
    assert!(matches!(
        w.fence(shard, token).await,
        Err(ElectionError::StaleToken { vacant: true, .. })
    ));
    // a acquires them all (the reservations were written in the fencing commit).
    w.cycle(&a).await;
    assert_eq!(a.owned_shards().len(), 64);
    assert_eq!(a.owned_shards()[&shard], Ballot::new(token.get() + 1));
    w.fence(shard, Ballot::new(token.get() + 1)).await.unwrap();
}

#[tokio::test]
async fn a_steady_member_heartbeat_reads_three_keys_and_writes_one_whatever_m() {
    for shards in [16, 1_024] {
        let w = world(shards, 64).await;
        let (leader, coord) = w.coordinator().await;
        let a = w.member("a", 1);
        w.cycle(&a).await;
        w.coordinate_leading(&leader, &coord).await;
        // Acquire everything (at most 512 per cycle).
        for _ in 0..3 {
            w.cycle(&a).await;
        }
        assert_eq!(a.owned_shards().len(), shards as usize);
        let e = w.election.clone();
        let txn = w.db.create_transaction();
        let cycle = e.member_cycle(&txn, &a, &BTreeSet::new()).await.unwrap();
        let stats = txn.stats();
        txn.commit().await.unwrap();
        a.adopt(cycle);
        assert_eq!(stats.point_reads, 3, "M = {shards}: {stats:?}");
        assert_eq!(stats.range_reads, 0);
        assert_eq!(stats.sets, 1, "M = {shards}: {stats:?}");
    }
}

#[tokio::test]
async fn a_lapsed_member_rejoins_at_a_new_epoch_and_owns_nothing_until_reassigned() {
    let w = world(8, 8).await;
    let (leader, coord) = w.coordinator().await;
    let a = w.member("a", 1);
    w.cycle(&a).await;
    w.coordinate_leading(&leader, &coord).await;
    w.cycle(&a).await;
    assert_eq!(a.owned_shards().len(), 8);
    assert_eq!(a.epoch(), Some(1));
    // a pauses longer than its lease (the coordinator keeps its own leadership): a's belief
    // ends locally, at once.
    for _ in 0..8 {
        w.advance(Duration::from_millis(500));
        let e = w.election.coordinator_election();
        assert!(e.run_cycle(&w.db, &leader).await.unwrap().is_leader());
    }
    assert!(a.owned_shards().is_empty());
    let (shard, token) = (ShardId::new(0), Ballot::new(1));
    // Its next cycle joins again at epoch 2: the epoch-1 ownerships are over.
    w.cycle(&a).await;
    assert_eq!(a.epoch(), Some(2));
    assert!(matches!(
        w.fence(shard, token).await,
        Err(ElectionError::StaleToken { .. })
    ));
    // The coordinator sees the epoch-1 shards as nobody's and reserves them again.
    w.coordinate_leading(&leader, &coord).await;
    w.cycle(&a).await;
    assert_eq!(a.owned_shards().len(), 8);
    assert_eq!(a.shard_token(shard), Some(Ballot::new(2)));
}

#[tokio::test]
async fn one_unsettled_cycle_per_member_and_only_the_coordinators_leader_places() {
    let w = world(8, 8).await;
    let a = w.member("a", 1);
    let txn = w.db.create_transaction();
    let first = w
        .election
        .member_cycle(&txn, &a, &BTreeSet::new())
        .await
        .unwrap();
    assert!(matches!(
        w.election.member_cycle(&txn, &a, &BTreeSet::new()).await,
        Err(ElectionError::CycleInProgress { .. })
    ));
    drop(first);
    drop(txn);
    let c = Coordinator::with_clock(
        CandidateId::random("rogue").unwrap(),
        Arc::new(w.clock.clone()),
    );
    let e = w.election.clone();
    let refused = in_txn!(w.db, [e, c], |txn| e
        .coordinate(&txn, &c, Ballot::new(1))
        .await);
    assert!(
        matches!(refused, Err(ElectionError::StaleToken { .. })),
        "{refused:?}"
    );
    let _ = LeaderElection::new(Subspace::from("unused"));
}

// docs/design.md §10 per shard: an acquisition whose commit result was unknown is adopted only once
// a later cycle finds the member's own attempt in its record, dated from that attempt's
// start; the cycle read back inside its own transaction never makes the member believe.
#[tokio::test]
async fn an_acquisition_with_an_unknown_result_is_recognised_by_the_next_cycle() {
    use fdb_leader_election::{CommitFault, ScriptedFaults};
    let w = world(8, 8).await;
    let faults = ScriptedFaults::new();
    w.db.set_fault_injector(Arc::new(faults.clone()));
    let (leader, coord) = w.coordinator().await;
    let a = w.member("a", 1);
    w.cycle(&a).await;
    w.coordinate_leading(&leader, &coord).await;
    // The acquisition applies, its reply is lost: nothing is adopted.
    faults.push_commit_fault(CommitFault::UnknownApplied);
    let txn = w.db.create_transaction();
    let cycle = w
        .election
        .member_cycle(&txn, &a, &BTreeSet::new())
        .await
        .unwrap();
    assert_eq!(cycle.acquired().len(), 8);
    assert!(txn.commit().await.is_err());
    drop(cycle);
    assert!(
        a.owned_shards().is_empty(),
        "no belief from an unknown result"
    );
    // The next cycle finds its own attempt in the record: the shards are adopted, at the
    // ballot the lost commit wrote (no second acquisition, no ballot skipped).
    w.cycle(&a).await;
    let owned = a.owned_shards();
    assert_eq!(owned.len(), 8);
    assert!(owned.values().all(|b| *b == Ballot::new(1)), "{owned:?}");
}

#[tokio::test]
async fn a_drained_member_hands_every_shard_over_and_takes_its_share_again_when_undrained() {
    let w = world(M, 8).await;
    let (leader, coord) = w.coordinator().await;
    let (a, b, c) = (w.member("a", 1), w.member("b", 1), w.member("c", 1));
    for m in [&a, &b, &c] {
        w.cycle(m).await;
    }
    settle(&w, &leader, &coord, &[&a, &b, &c]).await;
    assert!(b.owned_shards().len() >= 21);
    let b_id = b.id().clone();
    w.set_drained(&b_id, true).await;
    let drained = w
        .operate(|e, txn| async move { e.drained_members(&txn).await })
        .await
        .unwrap();
    assert_eq!(drained, BTreeSet::from([b_id.clone()]));
    // At most 8 moves in flight: 21 or 22 shards leave b in three rounds.
    let rounds = settle(&w, &leader, &coord, &[&a, &b, &c]).await;
    assert!((3..=4).contains(&rounds), "{rounds} rounds");
    assert!(b.owned_shards().is_empty(), "{:?}", b.owned_shards());
    assert_eq!(a.owned_shards().len() + c.owned_shards().len(), 64);
    // b still renews (drained is not dead): its record is live, its quota 0.
    let placement = w
        .operate(|e, txn| async move { e.placement(&txn).await })
        .await
        .unwrap();
    assert_eq!(placement.quotas.get(&b_id), Some(&0));
    w.set_drained(&b_id, false).await;
    settle(&w, &leader, &coord, &[&a, &b, &c]).await;
    let counts: Vec<usize> = [&a, &b, &c]
        .iter()
        .map(|m| m.owned_shards().len())
        .collect();
    assert!(counts.iter().all(|n| *n == 21 || *n == 22), "{counts:?}");
}

#[tokio::test]
async fn an_operator_moves_a_shard_by_hand_under_a_frozen_placement_and_it_stays() {
    let w = world(M, 8).await;
    let (leader, coord) = w.coordinator().await;
    let (a, b) = (w.member("a", 1), w.member("b", 1));
    for m in [&a, &b] {
        w.cycle(m).await;
    }
    settle(&w, &leader, &coord, &[&a, &b]).await;
    let operator = CandidateId::parse("ops").unwrap();
    let (shard, old_token) = a.owned_shards().into_iter().next().unwrap();
    let move_to_b = |shard: ShardId| {
        let (b_id, operator) = (b.id().clone(), operator.clone());
        move |e: ShardedElection, txn| {
            let (b_id, operator) = (b_id.clone(), operator.clone());
            async move { e.move_shard(&txn, shard, &b_id, &operator).await }
        }
    };
    // Refused while the coordinator balances: it would move the shard back.
    assert!(matches!(
        w.operate(move_to_b(shard)).await,
        Err(ElectionError::OperatorRefused { .. })
    ));
    w.operate(|e, txn| async move { e.set_frozen(&txn, true).await })
        .await
        .unwrap();
    // A target that never joined, and a shard out of range, are refused.
    let nobody = CandidateId::parse("nobody").unwrap();
    let (n2, op2) = (nobody.clone(), operator.clone());
    assert!(matches!(
        w.operate(|e, txn| {
            let (n2, op2) = (n2.clone(), op2.clone());
            async move { e.move_shard(&txn, shard, &n2, &op2).await }
        })
        .await,
        Err(ElectionError::NotRegistered { candidate }) if candidate == nobody
    ));
    assert!(matches!(
        w.operate(move_to_b(ShardId::new(M))).await,
        Err(ElectionError::InvalidLayout { .. })
    ));
    let outcome = w.operate(move_to_b(shard)).await.unwrap();
    assert_eq!(
        outcome,
        ShardMove::Requested {
            from: a.id().clone()
        }
    );
    // Until its work stops, a keeps the shard and its token still fences.
    w.cycle(&a).await;
    assert_eq!(a.shard_token(shard), Some(old_token));
    w.fence(shard, old_token).await.unwrap();
    // a hands it over (one commit), b acquires it (one commit), ballot + 1.
    w.try_cycle(&a, &BTreeSet::from([shard])).await.unwrap();
    assert_eq!(a.shard_token(shard), None);
    assert!(matches!(
        w.fence(shard, old_token).await,
        Err(ElectionError::StaleToken { .. })
    ));
    w.cycle(&b).await;
    let new_token = Ballot::new(old_token.get() + 1);
    assert_eq!(b.shard_token(shard), Some(new_token));
    w.fence(shard, new_token).await.unwrap();
    // Frozen: the coordinator leaves the unbalanced placement (33 to 31) as it is.
    assert_eq!(settle(&w, &leader, &coord, &[&a, &b]).await, 0);
    assert_eq!(b.owned_shards().len(), 33);
    assert_eq!(
        w.operate(move_to_b(shard)).await.unwrap(),
        ShardMove::AlreadyThere
    );
    // Unfrozen: balance comes back with one move.
    w.operate(|e, txn| async move { e.set_frozen(&txn, false).await })
        .await
        .unwrap();
    assert_eq!(settle(&w, &leader, &coord, &[&a, &b]).await, 1);
    assert_eq!((a.owned_shards().len(), b.owned_shards().len()), (32, 32));
}

#[tokio::test]
async fn a_frozen_placement_still_fails_over_and_takes_nothing_from_a_live_holder() {
    let w = world(8, 8).await;
    let (leader, coord) = w.coordinator().await;
    let (a, b, c) = (w.member("a", 1), w.member("b", 1), w.member("c", 1));
    for m in [&a, &b] {
        w.cycle(m).await;
    }
    w.operate(|e, txn| async move { e.set_frozen(&txn, true).await })
        .await
        .unwrap();
    // Frozen from the start: vacant shards are still reserved (nobody live holds them).
    settle(&w, &leader, &coord, &[&a, &b]).await;
    assert_eq!((a.owned_shards().len(), b.owned_shards().len()), (4, 4));
    // c joins: frozen, nothing moves to it.
    w.cycle(&c).await;
    assert_eq!(settle(&w, &leader, &coord, &[&a, &c]).await, 0);
    assert!(c.owned_shards().is_empty());
    // b crashes; after a full lease the coordinator fences it out and, in the same commit,
    // reserves its shards for c (below its quota).
    let b_shards = b.owned_shards();
    let mut fenced = Vec::new();
    while fenced.is_empty() {
        w.advance(Duration::from_millis(500));
        w.cycle(&a).await;
        w.cycle(&c).await;
        fenced = w.coordinate_leading(&leader, &coord).await;
    }
    // c is drained before it acquires them: frozen, the coordinator leaves the reservations
    // of a live holder where they are (frozen wins over drained).
    let c_id = c.id().clone();
    w.set_drained(&c_id, true).await;
    w.coordinate_leading(&leader, &coord).await;
    for shard in b_shards.keys() {
        let rec = w
            .operate(|e, txn| async move { e.shard_record(&txn, *shard).await })
            .await
            .unwrap();
        assert_eq!(rec.reserved_for(), Some(&c_id), "shard {shard}");
    }
    w.cycle(&c).await;
    let owned: Vec<ShardId> = c.owned_shards().keys().copied().collect();
    assert_eq!(owned, b_shards.keys().copied().collect::<Vec<_>>());
    // Unfrozen, the drain takes effect: c hands everything to a.
    w.operate(|e, txn| async move { e.set_frozen(&txn, false).await })
        .await
        .unwrap();
    settle(&w, &leader, &coord, &[&a, &c]).await;
    assert_eq!((a.owned_shards().len(), c.owned_shards().len()), (8, 0));
}

#[tokio::test]
async fn the_coordinator_rewrites_the_assignments_marker_on_changes_only() {
    let w = world(8, 8).await;
    let (leader, coord) = w.coordinator().await;
    let a = w.member("a", 1);
    w.cycle(&a).await;
    // Arms a watch on the marker (in a read-only transaction of its own).
    let arm = || async {
        let e = w.election.clone();
        let armed = w.db.run(|txn, _| {
            let e = e.clone();
            async move { Ok::<_, ElectionError>(txn.watch(e.assignments_key())?) }
        });
        [armed.await.unwrap()]
    };
    let fired = |[watch]: [fdb_leader_election::Watch; 1]| async {
        tokio::time::timeout(Duration::from_millis(50), watch)
            .await
            .is_ok()
    };
    let watch = arm().await;
    w.coordinate_leading(&leader, &coord).await; // first sight: published; reserves the 8 shards
    assert!(fired(watch).await, "the first coordination publishes");
    let watch = arm().await;
    w.cycle(&a).await; // a acquires the 8
    w.coordinate_leading(&leader, &coord).await;
    assert!(
        fired(watch).await,
        "the reservations and the acquisitions changed the records"
    );
    // Steady: renewals and coordinations change nothing an observer sees.
    let watch = arm().await;
    for _ in 0..3 {
        w.cycle(&a).await;
        w.coordinate_leading(&leader, &coord).await;
    }
    assert!(!fired(watch).await, "a steady heartbeat rewrote the marker");
    let view = w
        .operate(|e, txn| async move { e.assignments(&txn).await })
        .await
        .unwrap();
    assert_eq!(view.shards_of(a.id()).len(), 8);
}
