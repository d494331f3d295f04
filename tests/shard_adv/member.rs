//! Adversarial review of sharded leadership (docs/design.md §12), the members' side through the manual
//! flow: at most one member believes it owns a shard at any instant, beliefs come only from
//! confirmed commits (read-your-writes, unknown results, one unsettled cycle), clock rates
//! within ρ, a shorter lease caps the belief, leaves, and handovers that fail or are
//! withdrawn.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::{
    Ballot, Clock, CommitFault, ElectionError, LeaderElection, ManualClock, ShardId,
};

use crate::shard_support::*;

// Guarantee 5 (docs/design.md §10.1 per shard): a cycle read back inside its own transaction never
// promotes; a second cycle while one is unsettled is a typed error, from the same transaction
// or another; queries inside the writing transaction see the uncommitted write and change
// nothing; a transaction dropped without its commit leaves no belief.
#[tokio::test]
async fn held_read_your_writes_never_promotes_and_one_cycle_is_unsettled_at_a_time() {
    let w = World::new(4, 4).await;
    let (leader, coord) = w.coordinator().await;
    let a = w.member("a", 1);
    let in_progress = |r: &Result<_, ElectionError>| matches!(r, Err(ElectionError::CycleInProgress { candidate }) if candidate == a.id());
    // Its join, read back in the same transaction.
    let txn = w.db.create_transaction();
    let join = w.election.member_cycle(&txn, &a, &none()).await.unwrap();
    assert!(join.joined());
    assert!(in_progress(
        &w.election.member_cycle(&txn, &a, &none()).await.map(drop)
    ));
    let other = w.db.create_transaction();
    assert!(in_progress(
        &w.election.member_cycle(&other, &a, &none()).await.map(drop)
    ));
    drop(join);
    assert!(
        in_progress(&w.election.member_cycle(&txn, &a, &none()).await.map(drop)),
        "its own uncommitted join, read back, is refused"
    );
    drop(txn);
    assert_eq!(
        a.lease_deadline(),
        None,
        "no lease from an uncommitted join"
    );

    // Its acquisition, read back in the same transaction.
    w.cycle(&a).await;
    w.coordinate(&leader, &coord).await;
    let txn = w.db.create_transaction();
    let acquire = w.election.member_cycle(&txn, &a, &none()).await.unwrap();
    assert_eq!(acquire.acquired().len(), 4);
    drop(acquire);
    assert!(in_progress(
        &w.election.member_cycle(&txn, &a, &none()).await.map(drop)
    ));
    let rec = w
        .election
        .shard_record(&txn, ShardId::new(0))
        .await
        .unwrap();
    assert_eq!(
        rec.owner().map(|o| o.member()),
        Some(a.id()),
        "read-your-writes"
    );
    let view = w.election.assignments(&txn).await.unwrap();
    assert_eq!(view.shards_of(a.id()).len(), 4);
    w.election.placement(&txn).await.unwrap();
    // Even the fence admits the uncommitted token inside that transaction (it commits only
    // with the acquisition): but the member believes nothing.
    w.election
        .fence_shard(&txn, ShardId::new(0), Ballot::new(1))
        .await
        .unwrap();
    assert!(
        a.owned_shards().is_empty(),
        "no belief from an uncommitted write"
    );
    drop(txn);
    // Nothing landed: the next cycle acquires at ballot 1 (no ballot skipped).
    let owned = w.cycle(&a).await;
    assert_eq!(owned.len(), 4);
    assert!(owned.values().all(|t| *t == Ballot::new(1)), "{owned:?}");
}

// Guarantees 1, 3, 5 across unknown commit results: an acquisition whose commit fails is
// believed only if it landed and only once recognised by a later transaction (after the
// writing one ended), and one logical claim never bumps a ballot twice: conflicts, timeouts,
// unknown results that did or did not apply, and unknown results that land *later* (after the
// next transaction has taken its read version).
#[tokio::test]
async fn held_unknown_commit_results_never_promote_early_nor_bump_a_ballot_twice() {
    let faults = [
        CommitFault::Conflict,
        CommitFault::UnknownNotApplied,
        CommitFault::UnknownApplied,
        CommitFault::UnknownAppliedLater,
        CommitFault::Error(1031),
        CommitFault::ErrorAfterApplying(1031),
        CommitFault::ErrorAfterApplying(1021),
    ];
    for fault in faults {
        let (w, leader, coord, a, b) = World::with_two_members(4, 4).await;
        let txn = w.db.create_transaction();
        let cycle = w.election.member_cycle(&txn, &a, &none()).await.unwrap();
        assert_eq!(cycle.acquired().len(), 2);
        w.faults.push_commit_fault(fault);
        assert!(txn.commit().await.is_err(), "{fault:?}");
        drop(cycle);
        assert!(
            a.owned_shards().is_empty(),
            "{fault:?}: believed before recognition"
        );
        // b and the coordinator go on meanwhile (the first transaction after a late-landing
        // commit reads the state before it).
        w.cycle(&b).await;
        w.coordinate(&leader, &coord).await;
        assert_exclusive(&[&a, &b], "after the fault");
        let owned = w.cycle(&a).await;
        assert_eq!(owned.len(), 2, "{fault:?}");
        assert!(
            owned.values().all(|t| *t == Ballot::new(1)),
            "{fault:?}: {owned:?}"
        );
        w.cycle(&b).await;
        assert_exclusive(&[&a, &b], "after recognition");
        for (s, t) in owned {
            assert_eq!(w.shard(s).await.unwrap().ballot(), t);
            w.fence(s, t).await.unwrap();
        }
    }
}

// Guarantee 1 under clock rate errors: the member's clock runs slow by ρ, the coordinator's
// fast by ρ (the worst case the rules allow): the member's belief ends at the very step the
// coordinator fences it out, never after. The same run with 3ρ shows an overlap: the check is
// not vacuous.
#[tokio::test]
async fn held_clock_rates_within_rho_leave_no_overlap_and_beyond_rho_the_check_sees_one() {
    let within = rate_run(-10_000, 10_000).await;
    assert_eq!(within.0, Vec::<String>::new(), "within ρ");
    assert!(within.1, "a was fenced out and b took its shards");
    let beyond = rate_run(-30_000, 30_000).await;
    assert!(
        !beyond.0.is_empty(),
        "beyond ρ an overlap is expected (plant)"
    );
}

/// a (clock at `member_ppm`) stops renewing right after the coordinator (clock at
/// `coordinator_ppm`) first sees its last renewal; b goes on. Returns the overlaps seen and
/// whether b ended with every shard.
async fn rate_run(member_ppm: i64, coordinator_ppm: i64) -> (Vec<String>, bool) {
    let w = World::new(4, 4).await;
    let (a_clock, c_clock) = (ManualClock::new(), ManualClock::new());
    let (leader, coord) = w
        .coordinator_on("coordinator", Arc::new(c_clock.clone()))
        .await;
    assert!(leader.fencing_token().is_some());
    let a = w.member_on("a", 1, Arc::new(a_clock.clone()));
    let b = w.member("b", 1);
    w.cycle(&a).await;
    w.cycle(&b).await;
    w.coordinate(&leader, &coord).await;
    w.cycle(&a).await;
    w.cycle(&b).await;
    assert_eq!(a.owned_shards().len(), 2);
    // a's last renewal, seen by the coordinator at the same true instant.
    w.cycle(&a).await;
    w.coordinate(&leader, &coord).await;
    let step = ms(10);
    let mut seen = Vec::new();
    for _ in 0..500 {
        w.advance(step);
        a_clock.advance(scaled(step, member_ppm));
        c_clock.advance(scaled(step, coordinator_ppm));
        w.cycle(&b).await;
        w.coordinate(&leader, &coord).await;
        w.cycle(&b).await;
        for o in overlaps(&[&a, &b]) {
            seen.push(format!("{o:?} at {:?}", w.clock.now()));
        }
        if b.owned_shards().len() == 4 {
            break;
        }
    }
    (seen, b.owned_shards().len() == 4)
}

// Guarantee 1; docs/design.md §10.3 per shard (§12.5): "Shortening the lease shortens the belief at
// once ... before the commit ... Any write whose outcome may be unknown is judged as if it
// committed". (Found by the adversarial review; failed before the fix.)
//
// 1. The sharded election runs with a 10 s lease; a and b each own 2 of 4 shards. a's belief
//    (from its last renewal at t = 0) lasts until 10 s × 0.99/1.01 ≈ 9.8 s.
// 2. An operator shortens the lease to 1 s. The sharded election's configuration is the
//    single election's record at `S + ("config",)`, so this is
//    `LeaderElection::new(S).write_config(..)` -- exactly what `fdb-leader config` writes.
// 3. a renews: its member record now says `lease = 1 s`. The commit applies but its reply is
//    lost (`CommitFault::UnknownApplied`), so a adopts nothing.
// 4. The coordinator sees a's new record and, after a full lease of *that record's* lease
//    (1 s) unchanged, fences a out and reserves a's shards for b; b acquires them at t ≈ 1.35 s.
// 5. By then a's belief has ended: the renewal capped it, before its commit, at
//    0.1 s + 1 s × 0.99/1.01 ≈ 1.08 s. (Before the fix a kept believing its old 10 s lease,
//    until 9.8 s: two believers; `decide_member` never capped the belief when the record it
//    wrote carried a shorter lease, as the single election's `cap_belief` does.)
#[tokio::test]
async fn a_shorter_lease_caps_the_belief_before_an_unknown_commit() {
    let long = timings(10_000, 3000, 20_000, 1000);
    let short = config_with(1_000);
    let w = World::with_config(4, 4, long).await;
    let (leader, coord) = w.coordinator().await;
    let (a, b) = (w.member("a", 1), w.member("b", 1));
    w.cycle(&a).await;
    w.cycle(&b).await;
    w.coordinate(&leader, &coord).await;
    w.cycle(&a).await;
    w.cycle(&b).await;
    let a_shards = a.owned_shards();
    assert_eq!((a_shards.len(), b.owned_shards().len()), (2, 2));

    // The operator shortens the lease (the single election's config record, same key).
    let single = LeaderElection::new(w.election.subspace().clone());
    assert_eq!(
        single.config_key(),
        w.election.subspace().pack(&("config",))
    );
    let s2 = short.clone();
    in_txn!(w.db, [single, s2], |txn| single
        .write_config(&txn, &s2)
        .await)
    .unwrap();

    // a renews with the 1 s lease; the commit applies, its reply is lost.
    w.advance(ms(100));
    let txn = w.db.create_transaction();
    let cycle = w.election.member_cycle(&txn, &a, &none()).await.unwrap();
    w.faults.push_commit_fault(CommitFault::UnknownApplied);
    assert!(txn.commit().await.is_err(), "the reply is lost");
    drop(cycle); // judged as if committed (docs/design.md §10.3): but nothing caps the belief
    let rec = w.election_member(&a).await;
    assert_eq!(
        rec.lease_duration(),
        Duration::from_secs(1),
        "the write applied"
    );

    // a says nothing more (its next cycle would be fenced anyway). b renews; the coordinator
    // times a's record with its 1 s lease.
    let mut overlap = Vec::new();
    for _ in 0..16 {
        w.advance(ms(250));
        w.cycle(&b).await;
        let fenced = w.coordinate(&leader, &coord).await;
        if !fenced.is_empty() {
            assert_eq!(fenced, vec![a.id().clone()]);
            // Guarantee 2 holds: a's tokens are refused from the fencing commit on.
            let (s, t) = a_shards.iter().next().map(|(s, t)| (*s, *t)).unwrap();
            assert!(matches!(
                w.fence(s, t).await,
                Err(ElectionError::StaleToken { .. })
            ));
        }
        w.cycle(&b).await; // acquires what was reserved for it
        overlap = overlaps(&[&a, &b]);
        if !overlap.is_empty() {
            break;
        }
    }
    assert!(
        overlap.is_empty(),
        "at t = {:?}: b acquired a's shards while a still believes it owns them \
         (a's belief ends at {:?}): {overlap:?}",
        w.clock.now(),
        a.lease_deadline(),
    );
}

// Guarantees 1 and 5; `leave`'s contract: "The member owns nothing from now on (before the
// commit)". (Found by the adversarial review; failed before the fix.)
//
// An application runs the member's heartbeat on one task and handles shutdown on another
// (`Member` is a cheap `Clone` handle shared by both, as documented):
// 1. a and b have joined; the coordinator reserved 2 of 4 shards for each.
// 2. The heartbeat task runs `member_cycle` for a: it acquires its 2 shards; the commit is
//    confirmed, and the task is about to call `Member::adopt`.
// 3. Meanwhile the shutdown task runs `leave` for a, which ends a's epoch: the 2 shards are
//    now owned by a dead epoch, "nobody's".
// 4. The heartbeat task adopts its confirmed cycle: it must revive nothing. (Before the fix,
//    `leave` dropped the belief but not the local epoch, so `MemberState::adopt` re-created
//    a's lease and the 2 shards, which the coordinator then reserved for b at once: two
//    believers. Now the leave ends the epoch locally first, and decides in the core,
//    `core::shard::leave`.)
#[tokio::test]
async fn a_cycle_confirmed_before_a_leave_and_adopted_after_it_revives_nothing() {
    let (w, leader, coord, a, b) = World::with_two_members(4, 4).await;
    w.cycle(&b).await;
    assert_eq!(b.owned_shards().len(), 2);

    // The heartbeat task: a's acquisition commits; adoption is next.
    let txn = w.db.create_transaction();
    let cycle = w.election.member_cycle(&txn, &a, &none()).await.unwrap();
    assert_eq!(cycle.acquired().len(), 2);
    txn.commit().await.unwrap();

    // The shutdown task: a leaves, in one commit.
    let (e, a2) = (w.election.clone(), a.clone());
    in_txn!(w.db, [e, a2], |txn| e.leave(&txn, &a2).await).unwrap();
    assert!(
        a.owned_shards().is_empty(),
        "leave: owns nothing from now on"
    );

    // The heartbeat task adopts its confirmed cycle.
    let after_leave = a.adopt(cycle);

    // The coordinator reserves the left member's shards for b; b acquires them.
    w.coordinate(&leader, &coord).await;
    w.cycle(&b).await;
    assert_eq!(b.owned_shards().len(), 4);
    for (s, t) in &after_leave {
        // Guarantee 2 holds: a's tokens are refused (its epoch ended).
        assert!(w.fence(*s, *t).await.is_err());
    }
    assert!(
        after_leave.is_empty(),
        "a member that left believes it owns {after_leave:?} (overlap with b: {:?})",
        overlaps(&[&a, &b])
    );
    assert_exclusive(&[&a, &b], "after the leave");
}

// The same rule in the manual flow, where the request is withdrawn before the member's next
// cycle (liveness; and the records must never name an owner that does not believe it owns the
// shard, for good). (Found by the adversarial review; failed before the fix.)
//
// 1. a owns 4 shards; b joins; the coordinator asks a for shards 2 and 3.
// 2. a's handover cycle (work stopped: `ready` = every shard) drops 2 and 3 from its belief;
//    its commit fails without applying (a conflict).
// 3. Before a's next cycle, b leaves: the coordinator withdraws the two requests (their target
//    is gone): the records say "owned by a, at a's live epoch", a's inbox no longer mentions
//    them.
// 4. a's next cycle writes the release again, now vacant (no request stands); the coordinator
//    reserves the shards (for a, the only member left) and a acquires them at ballot + 1.
//    (Before the fix a never read those two records again: shards 2 and 3 stayed owned by a
//    live member that did no work on them, and no step of placement would change that.)
#[tokio::test]
async fn a_failed_handover_whose_request_is_withdrawn_is_vacated_not_kept_by_a_ghost() {
    let (w, leader, coord, a) = World::with_owner(4, 4).await;
    let b = w.member("b", 1);
    w.cycle(&b).await;
    w.coordinate(&leader, &coord).await;
    // a's handover cycle: its commit fails.
    let all: BTreeSet<ShardId> = (0..4).map(ShardId::new).collect();
    let txn = w.db.create_transaction();
    let cycle = w.election.member_cycle(&txn, &a, &all).await.unwrap();
    assert_eq!(cycle.released().len(), 2);
    w.faults.push_commit_fault(CommitFault::Conflict);
    assert!(txn.commit().await.is_err());
    drop(cycle);
    assert_eq!(a.owned_shards().len(), 2, "lost early: right");
    // b leaves; the coordinator withdraws the moves.
    let (e, b2) = (w.election.clone(), b.clone());
    in_txn!(w.db, [e, b2], |txn| e.leave(&txn, &b2).await).unwrap();
    for _ in 0..10 {
        w.advance(ms(500));
        w.coordinate(&leader, &coord).await;
        w.try_cycle(&a, &all).await.unwrap();
    }
    let view = w
        .operate(|e, txn| async move { e.assignments(&txn).await })
        .await
        .unwrap();
    let ghosts: Vec<ShardId> = view
        .shards_of(a.id())
        .into_iter()
        .filter(|s| a.shard_token(*s).is_none())
        .collect();
    assert!(
        ghosts.is_empty() && a.owned_shards().len() == 4,
        "5 s later, no fault since: a believes {:?}; the records give a {ghosts:?} too",
        a.owned_shards()
    );
}

// Liveness and balance: issue 23 "after faults stop, every shard is owned within lease + 2
// heartbeats and placement is balanced within a bounded number of rounds"; docs/design.md §12.4 "A
// reservation ... for a member is also visible to it through something it reads ... in O(1)
// per heartbeat". Found by the review's seeded simulation (seed 19), reduced here; failed
// before the fix.
//
// 1. a and b have joined; the coordinator reserves shards 0, 1 for a and 2, 3 for b (each
//    listed in the holder's inbox). b acquires its two.
// 2. Before acquiring, a leaves gracefully (`leave`): it ends its epoch and clears its inbox,
//    and withdraws the two reservations for it in the same commit (shards 0 and 1 vacant).
// 3. a's loop runs again with the same handle (its next `member_cycle`) before the coordinator
//    has looked: a rejoins at a new epoch, with an empty inbox.
// 4. The coordinator reserves shards 0 and 1 again (for a, whose quota they fill), listed in
//    a's inbox; a acquires them. (Before the fix the leave cleared the inbox but left the
//    records "vacant, reserved for a": the coordinator saw reservations for a live member
//    whose quota they filled and wrote nothing, a never learnt of them, and the shards stayed
//    unowned for good.)
#[tokio::test]
async fn a_leave_then_rejoin_strands_no_shard_reserved_for_the_member() {
    let (w, leader, coord, a, b) = World::with_two_members(4, 4).await;
    w.cycle(&b).await;
    assert_eq!(b.owned_shards().len(), 2);
    let (e, a2) = (w.election.clone(), a.clone());
    in_txn!(w.db, [e, a2], |txn| e.leave(&txn, &a2).await).unwrap();
    w.cycle(&a).await; // rejoins at a new epoch
    for _ in 0..20 {
        w.advance(ms(500));
        w.coordinate(&leader, &coord).await;
        w.cycle_ready(&a).await;
        w.cycle_ready(&b).await;
        assert_exclusive(&[&a, &b], "after the rejoin");
    }
    let mut stranded = Vec::new();
    for s in (0..4).map(ShardId::new) {
        let rec = w.shard(s).await.unwrap();
        if rec.owner().is_none() {
            stranded.push((s, rec.reserved_for().cloned()));
        }
    }
    assert!(
        stranded.is_empty() && a.owned_shards().len() == 2,
        "10 s (3 leases) after the rejoin, with no fault: a owns {:?}; unowned shards (and \
         their reservation): {stranded:?}",
        a.owned_shards()
    );
}
