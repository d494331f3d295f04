//! End-to-end election scenarios over any database backend.
//!
//! Every candidate uses a shared `ManualClock` standing in for true time, so "two candidates
//! believe they lead" is checked exactly at each step.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

use std::sync::Arc;

use fdb_leader_election::Clock;
use std::time::Duration;

use fdb_leader_election::{
    Action, Ballot, Candidate, CandidateId, ElectionConfig, ElectionError, ElectionResult,
    LeaderElection, LeaderRecord, ManualClock, Priority, ResignOutcome,
};

/// The operations the scenarios need, each run in its own retried transaction.
pub trait Backend: Send + Sync {
    fn election(&self) -> &LeaderElection;
    async fn init(&self, cfg: &ElectionConfig) -> Result<(), ElectionError>;
    async fn register(&self, c: &Candidate) -> Result<(), ElectionError>;
    /// One cycle, adopted after the commit.
    async fn cycle(&self, c: &Candidate) -> Result<(Action, ElectionResult), ElectionError>;
    async fn try_claim(&self, c: &Candidate) -> Result<(Action, ElectionResult), ElectionError>;
    async fn resign(&self, c: &Candidate) -> Result<ResignOutcome, ElectionError>;
    async fn record(&self) -> Result<LeaderRecord, ElectionError>;
    /// Increments the counter at `key` in a transaction fenced by `token`.
    async fn fenced_increment(&self, token: Ballot, key: &[u8]) -> Result<u64, ElectionError>;
    async fn read_counter(&self, key: &[u8]) -> Result<u64, ElectionError>;
}

pub struct World {
    pub clock: ManualClock,
}

impl World {
    pub fn new() -> Self {
        World {
            clock: ManualClock::new(),
        }
    }

    pub fn candidate(&self, label: &str, prio: i32) -> Candidate {
        let id = CandidateId::random(label).unwrap();
        Candidate::with_clock(id, Priority::new(prio), Arc::new(self.clock.clone()))
    }

    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }
}

/// Fails if two candidates believe they lead right now.
pub fn assert_no_overlap(cands: &[&Candidate]) {
    let leaders: Vec<_> = cands
        .iter()
        .filter(|c| c.believes_it_leads())
        .map(|c| c.id().clone())
        .collect();
    assert!(leaders.len() <= 1, "overlapping leaders: {leaders:?}");
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn config() -> ElectionConfig {
    ElectionConfig::default()
}

pub async fn several_candidates_elect_one_leader<B: Backend>(b: &B) {
    let w = World::new();
    b.init(&config()).await.unwrap();
    let cands: Vec<Candidate> = (0..5)
        .map(|i| w.candidate(&format!("node{i}"), 1))
        .collect();
    for c in &cands {
        b.register(c).await.unwrap();
    }
    for _ in 0..2 {
        for c in &cands {
            b.cycle(c).await.unwrap();
            w.advance(ms(10));
        }
    }
    let refs: Vec<&Candidate> = cands.iter().collect();
    assert_no_overlap(&refs);
    let leaders: Vec<_> = cands.iter().filter(|c| c.believes_it_leads()).collect();
    assert_eq!(leaders.len(), 1);
    let rec = b.record().await.unwrap();
    assert_eq!(rec.ballot(), Ballot::new(1));
    assert_eq!(rec.owner().map(|o| o.id()), Some(leaders[0].id()));
}

pub async fn renewal_keeps_the_ballot<B: Backend>(b: &B) {
    let w = World::new();
    b.init(&config()).await.unwrap();
    let a = w.candidate("a", 1);
    b.register(&a).await.unwrap();
    let (action, _) = b.cycle(&a).await.unwrap();
    assert_eq!(action, Action::Acquired);
    let first = b.record().await.unwrap();
    for _ in 0..5 {
        w.advance(Duration::from_secs(3));
        let (action, res) = b.cycle(&a).await.unwrap();
        assert_eq!(action, Action::Renewed);
        assert!(res.is_leader());
    }
    let rec = b.record().await.unwrap();
    assert_eq!(rec.ballot(), first.ballot());
    assert_eq!(rec.renewal(), first.renewal() + 5);
    assert_eq!(a.fencing_token(), Some(first.ballot()));
}

/// The leader crashes (stops cycling). A follower takes over exactly one full lease after it
/// first saw the last renewal: not one tick earlier.
pub async fn crash_failover_waits_one_full_lease<B: Backend>(b: &B) {
    let w = World::new();
    let cfg = config();
    b.init(&cfg).await.unwrap();
    let a = w.candidate("a", 1);
    let f = w.candidate("f", 1);
    b.register(&a).await.unwrap();
    b.register(&f).await.unwrap();
    b.cycle(&a).await.unwrap();
    w.advance(Duration::from_secs(3));
    b.cycle(&a).await.unwrap(); // last renewal; then `a` crashes
    let seen_at = w.clock.now();
    b.cycle(&f).await.unwrap(); // first sight of the last renewal
    let mut t = Duration::ZERO;
    let step = Duration::from_secs(3);
    while t + step < cfg.lease_duration() {
        w.advance(step);
        t += step;
        let (action, res) = b.cycle(&f).await.unwrap();
        assert_eq!(action, Action::None);
        assert!(!res.is_leader());
        assert_no_overlap(&[&a, &f]);
    }
    // One nanosecond short of the full lease: still nothing.
    w.clock
        .advance_to(seen_at.saturating_add(cfg.lease_duration() - Duration::from_nanos(1)));
    let (action, _) = b.cycle(&f).await.unwrap();
    assert_eq!(action, Action::None);
    assert!(
        !a.believes_it_leads(),
        "the crashed leader's own belief ended before"
    );
    // Exactly the full lease: take over with the next ballot.
    w.clock
        .advance_to(seen_at.saturating_add(cfg.lease_duration()));
    let (action, res) = b.cycle(&f).await.unwrap();
    assert_eq!(action, Action::Acquired);
    assert!(res.is_leader());
    assert_eq!(f.fencing_token(), Some(Ballot::new(2)));
    assert_no_overlap(&[&a, &f]);
}

pub async fn resign_reserves_for_the_best_live_candidate<B: Backend>(b: &B) {
    let w = World::new();
    let cfg = ElectionConfig::builder()
        .allow_preemption(false)
        .build()
        .unwrap();
    b.init(&cfg).await.unwrap();
    let a = w.candidate("a", 1);
    let best = w.candidate("best", 5);
    let mid = w.candidate("mid", 3);
    // `a` is elected alone (with the others registered, rank stagger would favour `best`).
    b.register(&a).await.unwrap();
    b.cycle(&a).await.unwrap();
    b.register(&best).await.unwrap();
    b.register(&mid).await.unwrap();
    b.cycle(&best).await.unwrap();
    b.cycle(&mid).await.unwrap();
    assert!(a.believes_it_leads());
    let out = b.resign(&a).await.unwrap();
    match out {
        ResignOutcome::Resigned {
            ballot,
            reserved_for,
        } => {
            assert_eq!(ballot, Ballot::new(1));
            assert_eq!(
                reserved_for.map(|n| n.id().clone()),
                Some(best.id().clone())
            );
        }
        other => panic!("resign rejected: {other:?}"),
    }
    assert!(!a.believes_it_leads());
    // No time passes: the middle candidate may not take it; the reserved one fills it at once.
    assert_eq!(b.cycle(&mid).await.unwrap().0, Action::None);
    let (action, res) = b.cycle(&best).await.unwrap();
    assert_eq!(action, Action::Acquired);
    assert!(res.is_leader());
    assert_eq!(best.fencing_token(), Some(Ballot::new(2)));
    assert_no_overlap(&[&a, &best, &mid]);
    // A second resign by the old leader is rejected and changes nothing.
    assert!(matches!(
        b.resign(&a).await.unwrap(),
        ResignOutcome::Rejected(_)
    ));
    assert_eq!(b.record().await.unwrap().ballot(), Ballot::new(2));
}

/// A higher-priority candidate joins; leadership moves cooperatively, and at no sampled
/// instant do two candidates hold valid leases.
pub async fn priority_handover_without_overlap<B: Backend>(b: &B) {
    let w = World::new();
    let cfg = ElectionConfig::builder()
        .handover_grace(Duration::ZERO)
        .build()
        .unwrap();
    b.init(&cfg).await.unwrap();
    let old = w.candidate("old", 1);
    let new = w.candidate("new", 2);
    b.register(&old).await.unwrap();
    b.cycle(&old).await.unwrap();
    b.register(&new).await.unwrap();
    let mut actions = Vec::new();
    for _ in 0..6 {
        for c in [&new, &old] {
            let (action, _) = b.cycle(c).await.unwrap();
            actions.push(action);
            assert_no_overlap(&[&old, &new]);
            for _ in 0..5 {
                w.advance(ms(100));
                assert_no_overlap(&[&old, &new]);
            }
        }
    }
    assert!(actions.contains(&Action::RequestedHandover), "{actions:?}");
    assert!(actions.contains(&Action::HandedOver), "{actions:?}");
    assert!(new.believes_it_leads() && !old.believes_it_leads());
    assert_eq!(new.fencing_token(), Some(Ballot::new(2)));
    assert_eq!(
        b.record().await.unwrap().owner().map(|o| o.id().clone()),
        Some(new.id().clone())
    );
}

pub async fn equal_priority_never_preempts<B: Backend>(b: &B) {
    let w = World::new();
    b.init(&config()).await.unwrap();
    let a = w.candidate("a", 4);
    let peer = w.candidate("peer", 4);
    b.register(&a).await.unwrap();
    b.cycle(&a).await.unwrap();
    b.register(&peer).await.unwrap();
    for _ in 0..10 {
        let (action, _) = b.cycle(&peer).await.unwrap();
        assert_eq!(action, Action::None);
        b.cycle(&a).await.unwrap();
        w.advance(Duration::from_secs(3));
    }
    let rec = b.record().await.unwrap();
    assert_eq!(rec.ballot(), Ballot::new(1));
    assert!(rec.handover_request().is_none());
    assert!(a.believes_it_leads() && !peer.believes_it_leads());
}

pub async fn preemption_disabled_stops_requests<B: Backend>(b: &B) {
    let w = World::new();
    let cfg = ElectionConfig::builder()
        .allow_preemption(false)
        .build()
        .unwrap();
    b.init(&cfg).await.unwrap();
    let a = w.candidate("a", 1);
    let high = w.candidate("high", 9);
    b.register(&a).await.unwrap();
    b.cycle(&a).await.unwrap();
    b.register(&high).await.unwrap();
    for _ in 0..5 {
        assert_eq!(b.cycle(&high).await.unwrap().0, Action::None);
        b.cycle(&a).await.unwrap();
        w.advance(Duration::from_secs(3));
    }
    let rec = b.record().await.unwrap();
    assert!(rec.handover_request().is_none());
    assert_eq!(rec.ballot(), Ballot::new(1));
    assert!(a.believes_it_leads());
}

/// A paused ex-leader wakes up after a takeover: its fenced write is rejected, and the counter
/// guarded by the fence holds exactly the successful increments.
pub async fn stale_ex_leader_is_fenced<B: Backend>(b: &B) {
    let w = World::new();
    b.init(&config()).await.unwrap();
    let a = w.candidate("a", 1);
    let f = w.candidate("f", 1);
    b.register(&a).await.unwrap();
    b.register(&f).await.unwrap();
    b.cycle(&a).await.unwrap();
    let stale = a.fencing_token().unwrap();
    assert_eq!(b.fenced_increment(stale, b"counter").await.unwrap(), 1);
    b.cycle(&f).await.unwrap();
    w.advance(Duration::from_secs(11)); // `a` is paused through a whole lease
    assert_eq!(b.cycle(&f).await.unwrap().0, Action::Acquired);
    let fresh = f.fencing_token().unwrap();
    assert!(fresh > stale);
    assert_eq!(b.fenced_increment(fresh, b"counter").await.unwrap(), 2);
    match b.fenced_increment(stale, b"counter").await {
        Err(ElectionError::StaleToken { token, current, .. }) => {
            assert_eq!((token, current), (stale, fresh));
        }
        other => panic!("stale write was not rejected: {other:?}"),
    }
    assert_eq!(b.read_counter(b"counter").await.unwrap(), 2);
}

pub async fn unregistered_candidates_cannot_claim<B: Backend>(b: &B) {
    let w = World::new();
    b.init(&config()).await.unwrap();
    let ghost = w.candidate("ghost", 100);
    assert!(matches!(
        b.try_claim(&ghost).await,
        Err(ElectionError::NotRegistered { .. })
    ));
    assert!(matches!(
        b.cycle(&ghost).await,
        Err(ElectionError::NotRegistered { .. })
    ));
    assert!(!ghost.believes_it_leads());
    assert_eq!(b.record().await.unwrap().ballot(), Ballot::ZERO);
}

/// Calls `$m!(name, …)` with the name of every scenario above, for each store's test file to
/// make one test of each (tests/election/memdb.rs, tests/sqlite_conformance.rs,
/// tests/fdb_integration.rs): the list is kept here, once.
#[allow(unused_macros)]
macro_rules! every_scenario {
    ($m:ident) => {
        $m!(
            several_candidates_elect_one_leader,
            renewal_keeps_the_ballot,
            crash_failover_waits_one_full_lease,
            resign_reserves_for_the_best_live_candidate,
            priority_handover_without_overlap,
            equal_priority_never_preempts,
            preemption_disabled_stops_requests,
            stale_ex_leader_is_fenced,
            unregistered_candidates_cannot_claim,
        );
    };
}

/// The counter of [`Backend::fenced_increment`] as stored: 8 bytes, little-endian (0 absent).
pub fn read_u64(v: Option<Vec<u8>>) -> u64 {
    v.map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .unwrap_or(0)
}

/// `impl Backend for $ty` on a store with a `run` retry loop (MemDb's, SQLite's): `$ty` has
/// a field `election`, and `self.$db` (`db`, or `db()`) is the store each transaction runs on.
#[allow(unused_macros)]
macro_rules! run_loop_backend {
    ($ty:ty, $($db:tt)+) => {
        impl $crate::common::scenarios::Backend for $ty {
            fn election(&self) -> &fdb_leader_election::LeaderElection {
                &self.election
            }

            async fn init(
                &self,
                cfg: &fdb_leader_election::ElectionConfig,
            ) -> Result<(), fdb_leader_election::ElectionError> {
                self.$($db)+
                    .run(|txn, _| {
                        let (e, cfg) = (self.election.clone(), cfg.clone());
                        async move { e.initialize_with_config(&txn, &cfg).await }
                    })
                    .await
            }

            async fn register(
                &self,
                c: &fdb_leader_election::Candidate,
            ) -> Result<(), fdb_leader_election::ElectionError> {
                self.$($db)+
                    .run(|txn, _| {
                        let (e, c) = (self.election.clone(), c.clone());
                        async move { e.register_candidate(&txn, &c).await }
                    })
                    .await
            }

            async fn cycle(
                &self,
                c: &fdb_leader_election::Candidate,
            ) -> Result<
                (fdb_leader_election::Action, fdb_leader_election::ElectionResult),
                fdb_leader_election::ElectionError,
            > {
                let cycle = self
                    .$($db)+
                    .run(|txn, _| {
                        let (e, c) = (self.election.clone(), c.clone());
                        async move { e.run_election_cycle(&txn, &c).await }
                    })
                    .await?;
                Ok((cycle.action(), c.adopt(cycle)))
            }

            async fn try_claim(
                &self,
                c: &fdb_leader_election::Candidate,
            ) -> Result<
                (fdb_leader_election::Action, fdb_leader_election::ElectionResult),
                fdb_leader_election::ElectionError,
            > {
                let cycle = self
                    .$($db)+
                    .run(|txn, _| {
                        let (e, c) = (self.election.clone(), c.clone());
                        async move { e.try_claim_leadership(&txn, &c).await }
                    })
                    .await?;
                Ok((cycle.action(), c.adopt(cycle)))
            }

            async fn resign(
                &self,
                c: &fdb_leader_election::Candidate,
            ) -> Result<fdb_leader_election::ResignOutcome, fdb_leader_election::ElectionError>
            {
                self.$($db)+
                    .run(|txn, _| {
                        let (e, c) = (self.election.clone(), c.clone());
                        async move { e.resign_leadership(&txn, &c, None).await }
                    })
                    .await
            }

            async fn record(
                &self,
            ) -> Result<fdb_leader_election::LeaderRecord, fdb_leader_election::ElectionError>
            {
                self.$($db)+
                    .run(|txn, _| {
                        let e = self.election.clone();
                        async move { e.leader_record(&txn).await }
                    })
                    .await
            }

            async fn fenced_increment(
                &self,
                token: fdb_leader_election::Ballot,
                key: &[u8],
            ) -> Result<u64, fdb_leader_election::ElectionError> {
                use fdb_leader_election::{ElectionTxn, ReadMode};
                use $crate::common::scenarios::read_u64;
                self.$($db)+
                    .run(|txn, _| {
                        let (e, key) = (self.election.clone(), key.to_vec());
                        async move {
                            e.fence(&txn, token).await?;
                            let n = read_u64(txn.get(&key, ReadMode::Serializable).await?) + 1;
                            txn.set(&key, &n.to_le_bytes());
                            Ok(n)
                        }
                    })
                    .await
            }

            async fn read_counter(
                &self,
                key: &[u8],
            ) -> Result<u64, fdb_leader_election::ElectionError> {
                use fdb_leader_election::{ElectionTxn, ReadMode};
                use $crate::common::scenarios::read_u64;
                self.$($db)+
                    .run(|txn, _| {
                        let key = key.to_vec();
                        async move { Ok(read_u64(txn.get(&key, ReadMode::Snapshot).await?)) }
                    })
                    .await
            }
        }
    };
}

#[allow(unused_imports)]
pub(crate) use {every_scenario, run_loop_backend};
