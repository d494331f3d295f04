//! Sharded leadership on MemDb through the public API (the manual flow): members join and the
//! coordinator balances the shards; a member joining takes its share by cooperative moves
//! (two commits each); a crashed member is fenced out by its epoch after a full lease and its
//! shards are owned again; a member's steady heartbeat reads three keys and writes one,
//! whatever the number of shards; stale tokens are refused; one unsettled cycle per member.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::shard::{Coordinator, Layout, Member, ShardedElection};
use fdb_leader_election::{
    Ballot, Candidate, CandidateId, ElectionConfig, ElectionError, LeaderElection, ManualClock,
    MemDb, Priority, ShardId, Weight,
};
use foundationdb_tuple::Subspace;

const M: u32 = 64;

struct World {
    db: MemDb,
    clock: ManualClock,
    election: ShardedElection,
    config: ElectionConfig,
}

impl World {
    async fn new(shards: u32, max_moves: u32) -> World {
        let clock = ManualClock::new();
        let db = MemDb::with_clock(Arc::new(clock.clone()));
        let election = ShardedElection::new(Subspace::from("shards-test"));
        let config = ElectionConfig::builder()
            .lease_duration(Duration::from_secs(3))
            .heartbeat_interval(Duration::from_secs(1))
            .candidate_timeout(Duration::from_secs(6))
            .transaction_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let layout = Layout::new(shards, max_moves).unwrap();
        let (e, c) = (election.clone(), config.clone());
        db.run(|txn, _| {
            let (e, c) = (e.clone(), c.clone());
            async move { e.initialize(&txn, &c, &layout).await }
        })
        .await
        .unwrap();
        World {
            db,
            clock,
            election,
            config,
        }
    }

    fn member(&self, name: &str, priority: i32) -> Member {
        Member::with_clock(
            CandidateId::random(name).unwrap(),
            Priority::new(priority),
            Weight::ONE,
            Arc::new(self.clock.clone()),
        )
    }

    /// One member cycle, adopted after its commit; `ready`: shards whose work stopped.
    async fn cycle(&self, m: &Member, ready: &BTreeSet<ShardId>) -> BTreeMap<ShardId, Ballot> {
        let e = self.election.clone();
        let cycle = self
            .db
            .run(|txn, _| {
                let (e, m, ready) = (e.clone(), m.clone(), ready.clone());
                async move { e.member_cycle(&txn, &m, &ready).await }
            })
            .await
            .unwrap();
        m.adopt(cycle)
    }

    /// A cycle in which every shard the member was asked to hand over is ready.
    async fn cycle_all_ready(&self, m: &Member) -> BTreeMap<ShardId, Ballot> {
        let all: BTreeSet<ShardId> = (0..M).map(ShardId::new).collect();
        self.cycle(m, &all).await
    }

    /// The coordinator election's leader and its token.
    async fn coordinator(&self) -> (Candidate, Coordinator) {
        let id = CandidateId::random("coordinator").unwrap();
        let candidate =
            Candidate::with_clock(id.clone(), Priority::new(1), Arc::new(self.clock.clone()));
        let e = self.election.coordinator_election().clone();
        let c = candidate.clone();
        self.db
            .run(|txn, _| {
                let (e, c) = (e.clone(), c.clone());
                async move { e.register_candidate(&txn, &c).await }
            })
            .await
            .unwrap();
        assert!(e.run_cycle(&self.db, &candidate).await.unwrap().is_leader());
        (
            candidate,
            Coordinator::with_clock(id, Arc::new(self.clock.clone())),
        )
    }

    /// The coordinator renews its leadership of the coordinator election, then coordinates.
    async fn coordinate(&self, leader: &Candidate, c: &Coordinator) -> Vec<CandidateId> {
        let renewed = self
            .election
            .coordinator_election()
            .run_cycle(&self.db, leader)
            .await
            .unwrap();
        assert!(renewed.is_leader());
        let token = leader.fencing_token().unwrap();
        let e = self.election.clone();
        let done = self
            .db
            .run(|txn, _| {
                let (e, c) = (e.clone(), c.clone());
                async move { e.coordinate(&txn, &c, token).await }
            })
            .await
            .unwrap();
        done.fenced
    }

    async fn fence(&self, shard: ShardId, token: Ballot) -> Result<(), ElectionError> {
        let e = self.election.clone();
        self.db
            .run(|txn, _| {
                let e = e.clone();
                async move { e.fence_shard(&txn, shard, token).await }
            })
            .await
    }

    fn advance(&self, d: Duration) {
        self.clock.advance(d);
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
    let w = World::new(M, 8).await;
    let (leader, coord) = w.coordinator().await;
    let (a, b, c) = (w.member("a", 1), w.member("b", 1), w.member("c", 1));
    for m in [&a, &b, &c] {
        w.cycle(m, &BTreeSet::new()).await; // join
    }
    w.coordinate(&leader, &coord).await; // reserves all 64
    for m in [&a, &b, &c] {
        w.cycle(m, &BTreeSet::new()).await; // acquire
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
    w.cycle(&d, &BTreeSet::new()).await;
    let mut rounds = 0;
    while d.owned_shards().len() < 16 {
        rounds += 1;
        assert!(rounds <= 4, "balance not restored in {rounds} rounds");
        w.coordinate(&leader, &coord).await;
        for m in [&a, &b, &c] {
            w.cycle_all_ready(m).await; // hand over (the work is stopped)
        }
        assert_exclusive(&[&a, &b, &c, &d]);
        w.cycle(&d, &BTreeSet::new()).await; // acquire
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
    w.coordinate(&leader, &coord).await;
    for m in [&a, &b, &c, &d] {
        w.cycle_all_ready(m).await;
        assert_eq!(m.owned_shards().len(), 16);
    }
}

#[tokio::test]
async fn a_crashed_member_is_fenced_by_its_epoch_after_a_lease_and_its_shards_are_owned_again() {
    let w = World::new(M, 8).await;
    let (leader, coord) = w.coordinator().await;
    let (a, b) = (w.member("a", 1), w.member("b", 1));
    for m in [&a, &b] {
        w.cycle(m, &BTreeSet::new()).await;
    }
    w.coordinate(&leader, &coord).await;
    for m in [&a, &b] {
        w.cycle(m, &BTreeSet::new()).await;
    }
    let b_shards = b.owned_shards();
    assert_eq!(b_shards.len(), 32);
    // b crashes: it never cycles again. a keeps renewing; the coordinator keeps timing.
    let mut t = Duration::ZERO;
    let mut fenced = Vec::new();
    while fenced.is_empty() {
        w.advance(Duration::from_millis(500));
        t += Duration::from_millis(500);
        w.cycle(&a, &BTreeSet::new()).await;
        fenced = w.coordinate(&leader, &coord).await;
        // Before a full lease of b's unchanged record, nobody else owns b's shards.
        assert_exclusive(&[&a, &b]);
    }
    assert_eq!(fenced, vec![b.id().clone()]);
    assert!(t >= w.config.lease_duration(), "fenced after {t:?}");
    // b's belief had ended before the fencing (its lease from its last renewal).
    assert!(b.owned_shards().is_empty());
    // Its tokens are refused at once (its epoch ended), before anyone acquires its shards.
    let (shard, token) = b_shards.into_iter().next().unwrap();
    assert!(matches!(
        w.fence(shard, token).await,
        Err(ElectionError::StaleToken { vacant: true, .. })
    ));
    // a acquires them all (the reservations were written in the fencing commit).
    w.cycle(&a, &BTreeSet::new()).await;
    assert_eq!(a.owned_shards().len(), 64);
    assert_eq!(a.owned_shards()[&shard], Ballot::new(token.get() + 1));
    w.fence(shard, Ballot::new(token.get() + 1)).await.unwrap();
}

#[tokio::test]
async fn a_steady_member_heartbeat_reads_three_keys_and_writes_one_whatever_m() {
    for shards in [16, 1_024] {
        let w = World::new(shards, 64).await;
        let (leader, coord) = w.coordinator().await;
        let a = w.member("a", 1);
        w.cycle(&a, &BTreeSet::new()).await;
        w.coordinate(&leader, &coord).await;
        // Acquire everything (at most 512 per cycle).
        for _ in 0..3 {
            w.cycle(&a, &BTreeSet::new()).await;
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
    let w = World::new(8, 8).await;
    let (leader, coord) = w.coordinator().await;
    let a = w.member("a", 1);
    w.cycle(&a, &BTreeSet::new()).await;
    w.coordinate(&leader, &coord).await;
    w.cycle(&a, &BTreeSet::new()).await;
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
    w.cycle(&a, &BTreeSet::new()).await;
    assert_eq!(a.epoch(), Some(2));
    assert!(matches!(
        w.fence(shard, token).await,
        Err(ElectionError::StaleToken { .. })
    ));
    // The coordinator sees the epoch-1 shards as nobody's and reserves them again.
    w.coordinate(&leader, &coord).await;
    w.cycle(&a, &BTreeSet::new()).await;
    assert_eq!(a.owned_shards().len(), 8);
    assert_eq!(a.shard_token(shard), Some(Ballot::new(2)));
}

#[tokio::test]
async fn one_unsettled_cycle_per_member_and_only_the_coordinators_leader_places() {
    let w = World::new(8, 8).await;
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
    let refused =
        w.db.run(|txn, _| {
            let (e, c) = (e.clone(), c.clone());
            async move { e.coordinate(&txn, &c, Ballot::new(1)).await }
        })
        .await;
    assert!(
        matches!(refused, Err(ElectionError::StaleToken { .. })),
        "{refused:?}"
    );
    let _ = LeaderElection::new(Subspace::from("unused"));
}

// DESIGN §10 per shard: an acquisition whose commit result was unknown is adopted only once
// a later cycle finds the member's own attempt in its record, dated from that attempt's
// start; the cycle read back inside its own transaction never makes the member believe.
#[tokio::test]
async fn an_acquisition_with_an_unknown_result_is_recognised_by_the_next_cycle() {
    use fdb_leader_election::{CommitFault, ScriptedFaults};
    let w = World::new(8, 8).await;
    let faults = ScriptedFaults::new();
    w.db.set_fault_injector(Arc::new(faults.clone()));
    let (leader, coord) = w.coordinator().await;
    let a = w.member("a", 1);
    w.cycle(&a, &BTreeSet::new()).await;
    w.coordinate(&leader, &coord).await;
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
    w.cycle(&a, &BTreeSet::new()).await;
    let owned = a.owned_shards();
    assert_eq!(owned.len(), 8);
    assert!(owned.values().all(|b| *b == Ballot::new(1)), "{owned:?}");
}
