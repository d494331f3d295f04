//! Sharded leadership at its edges, through the runner (issue 29): elections off gives every
//! shard back and stops nothing of failover; members that crash are forgotten, so the
//! records read per coordinator attempt do not grow with every restart.

use std::time::Duration;

use fdb_leader_election::shard::machine::ShardStop;
use fdb_leader_election::shard::{ShardedElection, ShardedRunner};
use fdb_leader_election::{ElectionConfig, ElectionTxn, MemDb, ReadMode, TokioClock};
use foundationdb_tuple::Subspace;
use std::sync::Arc;

use crate::shard_support::*;

const LEASE: Duration = Duration::from_millis(300);

async fn set_elections(db: &MemDb, e: &ShardedElection, on: bool) {
    let e = e.clone();
    in_txn!(db, [e], |txn| {
        let c = e.read_config(&txn).await?;
        let c = c.to_builder().election_enabled(on).build()?;
        e.write_config(&txn, &c).await
    })
    .unwrap();
}

/// How many keys the members' range holds (what every coordinator attempt and standby reads).
async fn member_keys(db: &MemDb) -> usize {
    let s = Subspace::from("adversarial-runner").subspace(&("members",));
    let (begin, end) = s.range();
    db.create_transaction()
        .get_range(&begin, &end, ReadMode::Snapshot)
        .await
        .unwrap()
        .len()
}

#[tokio::test(start_paused = true)]
async fn elections_off_gives_every_shard_back_and_a_crashed_member_is_still_fenced_out() {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let config = runner_config(30);
    let a = runner(&db, "a", 8, &config);
    let b = runner(&db, "bb", 8, &config);
    let c = runner(&db, "ccc", 8, &config);
    let all = [&a, &b, &c];
    until(&all, Duration::from_secs(3), || exclusive_guards(&all) == 8).await;
    let mut changes = a.subscribe();
    let e = a.election().clone();
    set_elections(&db, &e, false).await;
    // Every guard ends, every shard record ends vacant and unreserved.
    until(&all, LEASE * 3, || exclusive_guards(&all) == 0).await;
    tokio::time::sleep(LEASE).await;
    let assignments = e.assignments(&db.create_transaction()).await.unwrap();
    assert_eq!(assignments.vacant(), 8, "{assignments:?}");
    assert!(
        assignments
            .shards()
            .iter()
            .all(|s| s.reserved_for.is_none() && s.moving_to.is_none()),
        "nothing reserved or moving while elections are off"
    );
    let mut reasons = Vec::new();
    while let Ok(change) = changes.try_recv() {
        reasons.extend(change.ended);
    }
    assert!(
        !reasons.is_empty() && reasons.iter().all(|r| *r == ShardStop::ElectionsDisabled),
        "{reasons:?}"
    );
    // A member crashes while elections are off: it is still fenced out (or already
    // forgotten) about a lease after its last renewal.
    let victim = c.id().clone();
    c.abort();
    let crashed = tokio::time::Instant::now();
    loop {
        let rec = e
            .member_record(&db.create_transaction(), &victim)
            .await
            .unwrap();
        if rec.is_none_or(|r| r.is_fenced()) {
            break;
        }
        assert!(
            crashed.elapsed() < LEASE * 3,
            "not fenced out: failover stopped"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // An operator's move is refused while elections are off, even frozen: nobody would act
    // on it. Nothing is written.
    let operator = fdb_leader_election::CandidateId::with_nonce("operator", 1).unwrap();
    let refused = in_txn!(db, [e, to = a.id(), op = operator], |txn| {
        e.set_frozen(&txn, true).await?;
        e.move_shard(&txn, fdb_leader_election::ShardId::new(0), &to, &op)
            .await
    });
    assert!(
        matches!(&refused, Err(fdb_leader_election::ElectionError::OperatorRefused { reason }) if reason.contains("elections")),
        "{refused:?}"
    );
    let assignments = e.assignments(&db.create_transaction()).await.unwrap();
    assert!(
        assignments
            .shards()
            .iter()
            .all(|s| s.reserved_for.is_none())
    );
    // Elections on again: the two live members take every shard.
    set_elections(&db, &e, true).await;
    let live = [&a, &b];
    until(&live, LEASE * 4, || exclusive_guards(&live) == 8).await;
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn forty_crashed_incarnations_are_forgotten() {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let config: ElectionConfig = runner_config(30);
    let steady = runner(&db, "steady", 4, &config);
    for i in 0..40 {
        let r: ShardedRunner = runner(&db, &format!("restarting-{i}"), 4, &config);
        tokio::time::sleep(LEASE / 2).await;
        r.abort();
    }
    // A few leases after the last crash, only the live member is left to read (and perhaps
    // the last ones fenced, awaiting the coordinator's next attempt).
    tokio::time::sleep(LEASE * 4).await;
    let keys = member_keys(&db).await;
    let members = steady
        .election()
        .members(&db.create_transaction())
        .await
        .unwrap();
    assert_eq!(
        members.keys().collect::<Vec<_>>(),
        vec![steady.id()],
        "every crashed incarnation forgotten"
    );
    // Its record, epoch mark and inbox at most.
    assert!(keys <= 3, "{keys} keys under the members");
    assert_eq!(exclusive_guards(&[&steady]), 4);
    steady.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_ineligible_members_shards_move_away_without_a_gap_and_stay_when_nobody_else_may_take_them()
 {
    let db = MemDb::with_clock(Arc::new(TokioClock::new()));
    let config = runner_config(30);
    let a = runner(&db, "a", 12, &config);
    let b = runner(&db, "bb", 12, &config);
    let c = runner(&db, "ccc", 12, &config);
    let all = [&a, &b, &c];
    until(&all, Duration::from_secs(3), || {
        exclusive_guards(&all) == 12
    })
    .await;
    until(&all, Duration::from_secs(3), || a.owned().len() == 4).await;
    a.set_eligible(false, "disk full").unwrap();
    // Every shard stays owned (a move keeps the shard until it lands) while a's move away.
    let started = tokio::time::Instant::now();
    while !a.owned().is_empty() {
        assert!(
            started.elapsed() < LEASE * 10,
            "a kept {:?}",
            a.owned().keys()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(exclusive_guards(&all), 12, "a gap while moving away");
    }
    let rec = a
        .election()
        .member_record(&db.create_transaction(), a.id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.eligibility().reason(), Some("disk full"));
    // Nor does it coordinate (its candidate in the coordinator election is ineligible too).
    until(&all, LEASE * 3, || !a.is_coordinator()).await;
    // Nobody else may take shards: b and c ineligible too; they keep what they have.
    b.set_eligible(false, "maintenance").unwrap();
    c.set_eligible(false, "maintenance").unwrap();
    tokio::time::sleep(LEASE * 3).await;
    assert_eq!(exclusive_guards(&all), 12, "held, not dropped");
    assert!(a.owned().is_empty());
    // Eligible again: a takes its share back.
    a.set_eligible(true, "").unwrap();
    b.set_eligible(true, "").unwrap();
    c.set_eligible(true, "").unwrap();
    until(&all, LEASE * 10, || a.owned().len() == 4).await;
    for r in all {
        r.shutdown().await;
    }
}
