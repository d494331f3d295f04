//! The adversarial review of sharded leadership (docs/design.md §12) through the public API
//! (tests/shard_adv/), and the worlds it runs in: the manual flow on MemDb under a
//! `ManualClock` (a coordinator, members), the runners on tokio's paused clock, mirrors of the
//! stored forms for planting values, and a small deterministic generator.
//!
//! Each test attacks one guarantee:
//!
//! 1. at most one member believes it owns a shard at any instant (`Member::owned_shards`,
//!    `Member::shard_token`, `ShardGuard::is_valid` / its cancellation);
//! 2. `fence_shard` admits a token only while it is the shard's ballot and its owner's epoch
//!    lives;
//! 3. a shard's ballot never decreases and grows by exactly one per change of owner;
//! 4. placement is balanced, minimal, rate-limited, stable, and never "everything to the
//!    highest priority";
//! 5. the manual flow: adoption only after the commit, one unsettled cycle per member,
//!    read-your-writes never promotes;
//! 6. bad input gives typed errors, never panics, and the library never writes what it cannot
//!    read back.
//!
//! The comment above each test gives the scenario and the rule; for a breach the review found
//! (now fixed), also the root cause.

// Test code: failing loudly is the point. The items are `pub` for the test crates that include
// this module (`mod shard_support;`); each uses a part of it.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

#[path = "../common/timings.rs"]
mod timings;
#[path = "../common/txn.rs"]
mod txn;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::shard::placement::MemberShare;
use fdb_leader_election::shard::{
    Coordinator, Layout, Member, ShardRecord, ShardedElection, ShardedRunner,
};
use fdb_leader_election::{
    Ballot, Candidate, CandidateId, Clock, ElectionConfig, ElectionError, ElectionTxn, ManualClock,
    MemDb, Priority, ReadMode, ScriptedFaults, ShardId, Weight,
};
use foundationdb_tuple::Subspace;
#[allow(unused_imports)]
pub use timings::{timed, timings};
#[allow(unused_imports)]
pub(crate) use txn::in_txn;

pub fn config_with(lease_ms: u64) -> ElectionConfig {
    timings(lease_ms, lease_ms / 3, lease_ms * 2, lease_ms / 10)
}

pub struct World {
    pub db: MemDb,
    /// True time (the database's clock, and the default clock of members).
    pub clock: ManualClock,
    pub election: ShardedElection,
    pub config: ElectionConfig,
    pub faults: ScriptedFaults,
    pub shards: u32,
}

impl World {
    pub async fn new(shards: u32, max_moves: u32) -> World {
        World::with_config(shards, max_moves, config_with(3_000)).await
    }

    pub async fn with_config(shards: u32, max_moves: u32, config: ElectionConfig) -> World {
        let clock = ManualClock::new();
        let db = MemDb::with_clock(Arc::new(clock.clone()));
        let faults = ScriptedFaults::new();
        db.set_fault_injector(Arc::new(faults.clone()));
        let election = ShardedElection::new(Subspace::from("adversarial"));
        let layout = Layout::new(shards, max_moves).unwrap();
        let (e, c) = (election.clone(), config.clone());
        in_txn!(db, [e, c], |txn| e.initialize(&txn, &c, &layout).await).unwrap();
        World {
            db,
            clock,
            election,
            config,
            faults,
            shards,
        }
    }

    pub fn member(&self, name: &str, priority: i32) -> Member {
        self.member_on(name, priority, Arc::new(self.clock.clone()))
    }

    pub fn member_on(&self, name: &str, priority: i32, clock: Arc<dyn Clock>) -> Member {
        Member::with_clock(
            CandidateId::random(name).unwrap(),
            Priority::new(priority),
            Weight::ONE,
            clock,
        )
    }

    /// One member cycle through the retry loop, adopted after its commit.
    pub async fn try_cycle(
        &self,
        m: &Member,
        ready: &BTreeSet<ShardId>,
    ) -> Result<BTreeMap<ShardId, Ballot>, ElectionError> {
        let e = self.election.clone();
        let cycle = in_txn!(self.db, [e, m, ready], |txn| e
            .member_cycle(&txn, &m, &ready)
            .await)?;
        Ok(m.adopt(cycle))
    }

    pub async fn cycle(&self, m: &Member) -> BTreeMap<ShardId, Ballot> {
        self.try_cycle(m, &BTreeSet::new()).await.unwrap()
    }

    /// A cycle in which every shard's work has stopped (it may hand any of them over).
    pub async fn cycle_ready(&self, m: &Member) -> BTreeMap<ShardId, Ballot> {
        let all: BTreeSet<ShardId> = (0..self.shards).map(ShardId::new).collect();
        self.try_cycle(m, &all).await.unwrap()
    }

    /// A coordinator: the leader of the coordinator election, on `clock`.
    pub async fn coordinator_on(
        &self,
        name: &str,
        clock: Arc<dyn Clock>,
    ) -> (Candidate, Coordinator) {
        let id = CandidateId::random(name).unwrap();
        let candidate = Candidate::with_clock(id.clone(), Priority::new(1), Arc::clone(&clock));
        let e = self.election.coordinator_election().clone();
        let c = candidate.clone();
        in_txn!(self.db, [e, c], |txn| e.register_candidate(&txn, &c).await).unwrap();
        e.run_cycle(&self.db, &candidate).await.unwrap();
        (candidate, Coordinator::with_clock(id, clock))
    }

    /// The set-up most attacks start from: a world of `shards` shards (at most `max_moves`
    /// moves at once), its coordinator, and member `a` (priority 1) owning every shard after
    /// its join, one coordination and its next cycle.
    pub async fn with_owner(
        shards: u32,
        max_moves: u32,
    ) -> (World, Candidate, Coordinator, Member) {
        let w = World::new(shards, max_moves).await;
        let (leader, coord) = w.coordinator().await;
        let a = w.member("a", 1);
        w.cycle(&a).await;
        w.coordinate(&leader, &coord).await;
        w.cycle(&a).await;
        (w, leader, coord, a)
    }

    /// A world of `shards` shards (at most `max_moves` moves at once), its coordinator, and
    /// members `a` and `b` (priority 1) joined before the first coordination.
    pub async fn with_two_members(
        shards: u32,
        max_moves: u32,
    ) -> (World, Candidate, Coordinator, Member, Member) {
        let w = World::new(shards, max_moves).await;
        let (leader, coord) = w.coordinator().await;
        let (a, b) = (w.member("a", 1), w.member("b", 1));
        w.cycle(&a).await;
        w.cycle(&b).await;
        w.coordinate(&leader, &coord).await;
        (w, leader, coord, a, b)
    }

    pub async fn coordinator(&self) -> (Candidate, Coordinator) {
        let (leader, c) = self
            .coordinator_on("coordinator", Arc::new(self.clock.clone()))
            .await;
        assert!(leader.fencing_token().is_some());
        (leader, c)
    }

    /// The coordinator renews its leadership, then coordinates (if it still leads).
    pub async fn coordinate(&self, leader: &Candidate, c: &Coordinator) -> Vec<CandidateId> {
        self.election
            .coordinator_election()
            .run_cycle(&self.db, leader)
            .await
            .unwrap();
        let Some(token) = leader.fencing_token() else {
            return Vec::new();
        };
        self.coordinate_with(c, token).await.unwrap()
    }

    /// As [`coordinate`](Self::coordinate), for a coordinator that must still lead: its renewal
    /// losing the leadership fails the test.
    pub async fn coordinate_leading(
        &self,
        leader: &Candidate,
        c: &Coordinator,
    ) -> Vec<CandidateId> {
        let renewed = self
            .election
            .coordinator_election()
            .run_cycle(&self.db, leader)
            .await
            .unwrap();
        assert!(renewed.is_leader(), "the coordinator lost its leadership");
        let token = leader.fencing_token().unwrap();
        self.coordinate_with(c, token).await.unwrap()
    }

    pub async fn coordinate_with(
        &self,
        c: &Coordinator,
        token: Ballot,
    ) -> Result<Vec<CandidateId>, ElectionError> {
        let e = self.election.clone();
        let done = in_txn!(self.db, [e, c], |txn| e.coordinate(&txn, &c, token).await)?;
        Ok(done.fenced)
    }

    pub async fn fence(&self, shard: ShardId, token: Ballot) -> Result<(), ElectionError> {
        let e = self.election.clone();
        in_txn!(self.db, [e], |txn| e.fence_shard(&txn, shard, token).await)
    }

    pub async fn shard(&self, shard: ShardId) -> Result<ShardRecord, ElectionError> {
        let e = self.election.clone();
        in_txn!(self.db, [e], |txn| e.shard_record(&txn, shard).await)
    }

    pub async fn operate<T, F, Fut>(&self, body: F) -> Result<T, ElectionError>
    where
        F: Fn(ShardedElection, fdb_leader_election::memdb::MemTransaction) -> Fut,
        Fut: std::future::Future<Output = Result<T, ElectionError>>,
    {
        let e = self.election.clone();
        self.db.run(|txn, _| body(e.clone(), txn)).await
    }

    /// An operator marks `id` drained (or no longer), in a transaction of its own.
    pub async fn set_drained(&self, id: &CandidateId, drained: bool) {
        self.operate(|e, txn| {
            let id = id.clone();
            async move { e.set_drained(&txn, &id, drained).await }
        })
        .await
        .unwrap();
    }

    /// Writes raw bytes at `key` (a corrupt value, or a planted one).
    pub async fn raw_set(&self, key: &[u8], value: &[u8]) {
        let txn = self.db.create_transaction();
        txn.set(key, value);
        txn.commit().await.unwrap();
    }

    pub async fn raw_get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let txn = self.db.create_transaction();
        txn.get(key, ReadMode::Snapshot).await.unwrap()
    }

    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }
}

/// The shards believed owned by more than one of `members` now.
pub fn overlaps(members: &[&Member]) -> Vec<(ShardId, CandidateId, CandidateId)> {
    let mut seen: BTreeMap<ShardId, &CandidateId> = BTreeMap::new();
    let mut out = Vec::new();
    for m in members {
        for shard in m.owned_shards().keys() {
            if let Some(other) = seen.insert(*shard, m.id()) {
                out.push((*shard, other.clone(), m.id().clone()));
            }
        }
    }
    out
}

pub fn assert_exclusive(members: &[&Member], when: &str) {
    let o = overlaps(members);
    assert!(
        o.is_empty(),
        "{when}: shards believed owned by two members: {o:?}"
    );
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn none() -> BTreeSet<ShardId> {
    BTreeSet::new()
}

impl World {
    pub async fn election_member(&self, m: &Member) -> fdb_leader_election::shard::MemberRecord {
        let (e, id) = (self.election.clone(), m.id().clone());
        in_txn!(self.db, [e, id], |txn| e.member_record(&txn, &id).await)
            .unwrap()
            .unwrap()
    }
}

pub fn runner_config(transaction_timeout_ms: u64) -> ElectionConfig {
    timed(300, 100, 600, transaction_timeout_ms)
        .handover_grace(ms(200))
        .build()
        .unwrap()
}

pub fn runner(db: &MemDb, name: &str, shards: u32, config: &ElectionConfig) -> ShardedRunner {
    ShardedRunner::builder(db.clone(), Subspace::from("adversarial-runner"))
        .shards(shards)
        .max_concurrent_moves(8)
        .label(name)
        .weight(Weight::ONE)
        .config(config.clone())
        .seed(name.len() as u64)
        .start()
        .unwrap()
}

/// Panics if two runners hold a valid guard of one shard; returns how many shards are held.
pub fn exclusive_guards(runners: &[&ShardedRunner]) -> usize {
    let mut seen: BTreeMap<ShardId, usize> = BTreeMap::new();
    for (i, r) in runners.iter().enumerate() {
        for shard in r.owned().keys() {
            if let Some(j) = seen.insert(*shard, i) {
                panic!("shard {shard} held (valid guard) by runners {j} and {i}");
            }
        }
    }
    seen.len()
}

/// Waits (checking exclusivity every millisecond) until `done`, at most `bound`.
pub async fn until(runners: &[&ShardedRunner], bound: Duration, done: impl Fn() -> bool) {
    let start = tokio::time::Instant::now();
    while !done() {
        exclusive_guards(runners);
        assert!(start.elapsed() < bound, "not reached within {bound:?}");
        tokio::time::sleep(ms(1)).await;
    }
}

/// The inbox's stored form (mirrors the crate's codec: the format version byte, then bincode 2
/// `standard()` over serde).
#[derive(serde::Serialize)]
pub struct InboxWire {
    pub seq: u64,
    pub reserved: Vec<u32>,
    pub hand_over: Vec<(u32, String)>,
}

#[derive(serde::Serialize)]
pub struct AttemptWire {
    pub candidate: String,
    pub seq: u64,
}

#[derive(serde::Serialize)]
pub struct ShardWire {
    pub ballot: u64,
    pub owner: Option<(String, u64)>,
    pub move_to: Option<String>,
    pub reserved_for: Option<String>,
    pub writer: Option<AttemptWire>,
}

/// The format version the crate writes a sharded election's values at: 2 (their body has not
/// changed since; `FORMAT_VERSION` is the newest the crate reads).
pub const SHARD_FORMAT: u8 = 2;

pub fn wire<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![SHARD_FORMAT];
    out.extend(bincode::serde::encode_to_vec(value, bincode::config::standard()).unwrap());
    out
}

/// The mirror encodes exactly as the crate does (checked on a real inbox and shard record).
pub async fn check_mirror(w: &World, member: &Member) {
    let inbox = w.raw_get(&w.election.inbox_key(member.id())).await.unwrap();
    let rec = w.shard(ShardId::new(0)).await.unwrap();
    let shard = w
        .raw_get(&w.election.shard_key(ShardId::new(0)))
        .await
        .unwrap();
    let ours = wire(&ShardWire {
        ballot: rec.ballot().get(),
        owner: rec
            .owner()
            .map(|o| (o.member().as_str().to_owned(), o.epoch())),
        move_to: rec.move_to().map(|m| m.as_str().to_owned()),
        reserved_for: rec.reserved_for().map(|m| m.as_str().to_owned()),
        writer: Some(AttemptWire {
            candidate: member.id().as_str().to_owned(),
            seq: 2,
        }),
    });
    assert_eq!(ours, shard, "the shard mirror encodes as the crate does");
    assert_eq!(inbox.first(), Some(&SHARD_FORMAT));
}

pub fn scaled(d: Duration, ppm: i64) -> Duration {
    let n = i128::try_from(d.as_nanos()).unwrap() * (1_000_000 + i128::from(ppm)) / 1_000_000;
    Duration::from_nanos(u64::try_from(n).unwrap())
}

/// A small deterministic generator (xorshift64).
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub fn cid(s: &str) -> CandidateId {
    CandidateId::parse(s).unwrap()
}

/// The members' floor and ceiling of M·w/W.
pub fn bounds(members: &[MemberShare], m: u32) -> BTreeMap<CandidateId, (u32, u32)> {
    let total: u64 = members.iter().map(|x| u64::from(x.weight.get())).sum();
    members
        .iter()
        .map(|x| {
            let share = u64::from(m) * u64::from(x.weight.get());
            let floor = (share / total.max(1)) as u32;
            let ceil = share.div_ceil(total.max(1)) as u32;
            (x.id.clone(), (floor, ceil))
        })
        .collect()
}
