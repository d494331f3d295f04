//! Adversarial review of sharded leadership (docs/design.md §12), fencing tokens per shard: a token is
//! admitted only while it is the shard's ballot and its owner's epoch lives (every end of the
//! epoch aborts a fenced write in flight), never aborted by the owner's renewals, and one token
//! per shard at a time, across handovers, takeovers, rejoins and restarts.

use std::sync::Arc;

use fdb_leader_election::shard::Member;
use fdb_leader_election::{Ballot, ElectionError, ElectionTxn, Priority, ShardId, Weight};

use crate::shard_support::*;

// Guarantee 2: stale tokens are refused after a handover, a takeover (before anyone acquires),
// and a rejoin at a new epoch; at no point are two tokens of one shard admitted.
#[tokio::test]
async fn held_stale_tokens_are_refused_and_one_token_per_shard_is_admitted() {
    let (w, leader, coord, a) = World::with_owner(4, 4).await;
    let b = w.member("b", 1);
    let s = ShardId::new(3);
    let admitted = |w: &World| {
        let e = w.election.clone();
        let db = w.db.clone();
        async move {
            let mut ok = Vec::new();
            for t in 0..6 {
                let e = e.clone();
                let r = in_txn!(db, [e], |txn| e.fence_shard(&txn, s, Ballot::new(t)).await);
                match r {
                    Ok(()) => ok.push(t),
                    Err(ElectionError::StaleToken { .. }) => {}
                    Err(other) => panic!("{other:?}"),
                }
            }
            ok
        }
    };
    assert_eq!(admitted(&w).await, vec![1]);
    // b joins: a hands s over (shards 2, 3 move); between handover and acquisition, none.
    w.cycle(&b).await;
    w.coordinate(&leader, &coord).await;
    w.cycle_ready(&a).await;
    assert_eq!(admitted(&w).await, Vec::<u64>::new(), "vacant");
    w.cycle(&b).await;
    assert_eq!(b.shard_token(s), Some(Ballot::new(2)));
    assert_eq!(admitted(&w).await, vec![2]);
    // b dies; once fenced out, its token is refused before anyone acquires.
    let mut fenced = Vec::new();
    while fenced.is_empty() {
        w.advance(ms(500));
        w.cycle(&a).await;
        assert_eq!(admitted(&w).await.len(), 1);
        fenced = w.coordinate(&leader, &coord).await;
    }
    assert_eq!(admitted(&w).await, Vec::<u64>::new(), "b's epoch ended");
    w.cycle(&a).await;
    assert_eq!(admitted(&w).await, vec![3]);
    // a pauses past its lease and rejoins at a new epoch: its old tokens end at the rejoin,
    // before the coordinator reserves anything again.
    for _ in 0..8 {
        w.advance(ms(500));
        w.election
            .coordinator_election()
            .run_cycle(&w.db, &leader)
            .await
            .unwrap();
    }
    assert!(a.owned_shards().is_empty());
    w.cycle(&a).await;
    assert_eq!(admitted(&w).await, Vec::<u64>::new(), "a's old epoch ended");
    w.coordinate(&leader, &coord).await;
    w.cycle(&a).await;
    assert_eq!(admitted(&w).await, vec![4]);
}

// Member restarts. With the same handle (a paused process resuming), a member whose lease
// lapsed rejoins at a new epoch and its old tokens die with the rejoin. A restarted *process*
// must take a fresh id (`CandidateId::random`, as `ShardedRunner` does): the contract of
// `Member` is one id per incarnation. If an application reuses an id anyway while the old
// incarnation still runs (a zombie), the new incarnation's join bumps the epoch, the
// coordinator then treats the zombie's shards as nobody's at once, and the zombie may still
// *believe* it owns them for the rest of its lease: that is outside the contract and not
// counted as a violation here, but the fence holds: every write of the zombie is refused from
// the new incarnation's join on.
#[tokio::test]
async fn held_a_restart_under_the_same_id_ends_the_old_incarnations_tokens() {
    let (w, _leader, _coord, a, b) = World::with_two_members(4, 4).await;
    w.cycle(&a).await;
    w.cycle(&b).await;
    let zombie_tokens = a.owned_shards();
    assert_eq!(zombie_tokens.len(), 2);
    // A second incarnation under the same id (against the contract).
    let again = Member::with_clock(
        a.id().clone(),
        Priority::new(1),
        Weight::ONE,
        Arc::new(w.clock.clone()),
    );
    w.cycle(&again).await;
    assert_eq!(again.epoch(), Some(2));
    assert!(
        again.owned_shards().is_empty(),
        "a new incarnation inherits nothing"
    );
    for (s, t) in &zombie_tokens {
        assert!(matches!(
            w.fence(*s, *t).await,
            Err(ElectionError::StaleToken { .. })
        ));
    }
    // The zombie's own next cycle finds its epoch ended and believes nothing any more.
    w.cycle(&a).await;
    assert!(a.owned_shards().is_empty());
    for (s, t) in &zombie_tokens {
        assert!(w.fence(*s, *t).await.is_err());
    }
}

// Guarantee 2's other half, a documented property of `fence_shard`: "Member renewals never
// abort it"; README: "A member renewal never aborts a fenced write". (Found by the adversarial
// review; failed before the fix.)
//
// 1. a owns shard s at ballot t. A job's transaction fences its write with
//    `fence_shard(txn, s, t)` and writes its result.
// 2. Before that transaction commits, a renews (its steady heartbeat, one write to its member
//    record).
// 3. The job commits: `fence_shard` reads the owner's epoch mark serializably
//    (`members/(id, "epoch")`, written only when the epoch starts or ends), not its member
//    record, which every renewal rewrites. (Before the fix it read the member record
//    serializably: every renewal of the owner aborted every fenced write in flight on any of
//    its shards; jobs longer than a heartbeat might never commit.)
#[tokio::test]
async fn a_renewal_of_the_owner_never_aborts_a_fenced_write() {
    let (w, _leader, _coord, a) = World::with_owner(4, 4).await;
    let (s, t) = a.owned_shards().into_iter().next().unwrap();
    let txn = w.db.create_transaction();
    w.election.fence_shard(&txn, s, t).await.unwrap();
    txn.set(b"job-result", b"1");
    w.advance(ms(10));
    w.cycle(&a).await; // a's steady heartbeat
    assert_eq!(
        a.shard_token(s),
        Some(t),
        "a still owns the shard, same token"
    );
    let committed = txn.commit().await;
    assert!(
        committed.is_ok(),
        "a fenced write of the shard's current owner was aborted by the owner's renewal: \
         {committed:?}"
    );
}

// Guarantee 2 with the epoch mark: a fenced write in flight is aborted by every end of its
// owner's epoch -- the coordinator fencing the owner out, the owner's leave, the owner's join
// at a new epoch after its lease lapsed -- even before any other member acquires the shard.
#[tokio::test]
async fn every_end_of_the_owners_epoch_aborts_a_fenced_write_in_flight() {
    for end in ["fenced out", "leave", "rejoin"] {
        let (w, leader, coord, a) = World::with_owner(4, 4).await;
        let (s, t) = a.owned_shards().into_iter().next().unwrap();
        let txn = w.db.create_transaction();
        w.election.fence_shard(&txn, s, t).await.unwrap();
        txn.set(b"job-result", b"1");
        match end {
            "fenced out" => {
                let mut fenced = Vec::new();
                while fenced.is_empty() {
                    w.advance(ms(500));
                    fenced = w.coordinate(&leader, &coord).await;
                }
            }
            "leave" => {
                let (e, a2) = (w.election.clone(), a.clone());
                in_txn!(w.db, [e, a2], |txn| e.leave(&txn, &a2).await).unwrap();
            }
            _ => {
                w.advance(ms(3_500));
                assert!(w.cycle(&a).await.is_empty(), "joined again, owning nothing");
                assert_eq!(a.epoch(), Some(2));
            }
        }
        // Nobody else acquired it yet (the leave vacates it; the others leave it as it is).
        let owner = w.shard(s).await.unwrap().owner().cloned();
        assert!(
            owner
                .as_ref()
                .is_none_or(|o| o.member() == a.id() && o.epoch() == 1),
            "{end}: {owner:?}"
        );
        assert!(
            txn.commit().await.is_err(),
            "{end}: a fenced write committed after its owner's epoch ended"
        );
        assert!(matches!(
            w.fence(s, t).await,
            Err(ElectionError::StaleToken { .. })
        ));
    }
}

// A member whose record predates epoch marks (no `members/(id, "epoch")` key) is fenced on its
// record, as before the marks: a renewal may abort a fenced write (safe), and the end of its
// epoch refuses its token. Its next join writes the mark.
#[tokio::test]
async fn a_member_without_an_epoch_mark_is_fenced_on_its_record() {
    let (w, leader, coord, a) = World::with_owner(4, 4).await;
    let mark = w.election.epoch_key(a.id());
    assert!(w.raw_get(&mark).await.is_some(), "the join wrote the mark");
    let txn = w.db.create_transaction();
    txn.clear(&mark);
    txn.commit().await.unwrap();
    let (s, t) = a.owned_shards().into_iter().next().unwrap();
    w.fence(s, t).await.unwrap();
    let txn = w.db.create_transaction();
    w.election.fence_shard(&txn, s, t).await.unwrap();
    txn.set(b"job-result", b"1");
    w.advance(ms(10));
    w.cycle(&a).await;
    assert!(
        txn.commit().await.is_err(),
        "fenced on the record: the renewal conflicts"
    );
    let mut fenced = Vec::new();
    while fenced.is_empty() {
        w.advance(ms(500));
        fenced = w.coordinate(&leader, &coord).await;
    }
    assert!(matches!(
        w.fence(s, t).await,
        Err(ElectionError::StaleToken { .. })
    ));
    assert!(
        w.raw_get(&mark).await.is_some(),
        "the fencing wrote the mark"
    );
}
