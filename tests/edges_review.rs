//! The edges found by an adversarial review of the public API (after issues 9 and 10): each
//! test tries to break a guarantee through what a user can call. The first five failed before
//! their fixes (another candidate timing an uncommitted write in a composed transaction; a
//! vacancy held by an operator's resignation with a lease shorter than the owner's; one
//! `Candidate` in two elections; the README's layout); the others cover what nothing else
//! reached (corrupt values through every operation, stale cycle clones).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::scenarios::{World, assert_no_overlap};
use fdb_leader_election::{
    Action, Ballot, Candidate, ElectionConfig, ElectionError, ElectionResult, ElectionTxn,
    LeaderElection, LeaderRecord, MemDb, MemTransaction, Priority, ResignOutcome, ScriptedFaults,
};
use foundationdb_tuple::Subspace;

struct Env {
    db: MemDb,
    election: LeaderElection,
    world: World,
    #[allow(dead_code)]
    faults: ScriptedFaults,
}

impl Env {
    async fn new(config: &ElectionConfig) -> Self {
        Self::with_subspace(config, "adversarial").await
    }

    async fn with_subspace(config: &ElectionConfig, name: &str) -> Self {
        let env = Env {
            db: MemDb::new(),
            election: LeaderElection::new(Subspace::from(name)),
            world: World::new(),
            faults: ScriptedFaults::new(),
        };
        env.db.set_fault_injector(Arc::new(env.faults.clone()));
        env.init(config).await;
        env
    }

    async fn init(&self, config: &ElectionConfig) {
        let (e, c) = (self.election.clone(), config.clone());
        self.db
            .run(|txn, _| {
                let (e, c) = (e.clone(), c.clone());
                async move { e.initialize_with_config(&txn, &c).await }
            })
            .await
            .unwrap();
    }

    async fn candidate(&self, label: &str, prio: i32) -> Candidate {
        let c = self.world.candidate(label, prio);
        self.register(&c).await;
        c
    }

    async fn register(&self, c: &Candidate) {
        let (e, c) = (self.election.clone(), c.clone());
        self.db
            .run(|txn, _| {
                let (e, c) = (e.clone(), c.clone());
                async move { e.register_candidate(&txn, &c).await }
            })
            .await
            .unwrap();
    }

    async fn cycle(&self, c: &Candidate) -> Result<ElectionResult, ElectionError> {
        self.election.run_cycle(&self.db, c).await.map(|o| o.result)
    }

    async fn action(&self, c: &Candidate) -> Action {
        self.election.run_cycle(&self.db, c).await.unwrap().action
    }

    async fn record(&self) -> LeaderRecord {
        let e = self.election.clone();
        self.db
            .run(|txn, _| {
                let e = e.clone();
                async move { e.leader_record(&txn).await }
            })
            .await
            .unwrap()
    }

    async fn txn<T, F, Fut>(&self, f: F) -> Result<T, ElectionError>
    where
        F: Fn(LeaderElection, MemTransaction) -> Fut,
        Fut: std::future::Future<Output = Result<T, ElectionError>>,
    {
        self.db.run(|txn, _| f(self.election.clone(), txn)).await
    }

    fn advance(&self, d: Duration) {
        self.world.advance(d);
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn no_stagger() -> ElectionConfig {
    ElectionConfig::builder()
        .takeover_stagger(Duration::ZERO)
        .build()
        .unwrap()
}

fn short_lease() -> ElectionConfig {
    ElectionConfig::builder()
        .lease_duration(Duration::from_secs(1))
        .heartbeat_interval(ms(300))
        .candidate_timeout(Duration::from_secs(2))
        .transaction_timeout(ms(200))
        .takeover_stagger(Duration::ZERO)
        .build()
        .unwrap()
}

// -------------------------------------------------------------------------------------------
// A composed transaction with two candidates' cycles. DESIGN §10.1: "A read inside
// the transaction that wrote the leader record returns that transaction's own, uncommitted
// write: it must never promote, never start or restart takeover timing". The guard against it
// (`cycle_open`, read-version match on the candidate's own pending attempt) is per candidate:
// candidate B's cycle in the transaction where leader A just renewed starts B's takeover timer
// on A's *uncommitted* renewal. The transaction is then abandoned (the application's own
// write failed). When A later writes the same (ballot, renewal) for real, B's timer is
// already running, and B takes over while A still believes.
// -------------------------------------------------------------------------------------------
#[tokio::test]
async fn a_second_candidates_cycle_in_the_leaders_transaction_does_not_time_its_uncommitted_renewal()
 {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    assert_eq!(env.action(&b).await, Action::None);
    env.advance(Duration::from_secs(1));

    // One application transaction (say, a process hosting both candidates, or a batch job):
    // A's cycle renews, then B's cycle runs in the same transaction and reads A's renewal
    // through read-your-writes.
    let t = env.db.create_transaction();
    let ca = env.election.run_election_cycle(&t, &a).await.unwrap();
    assert_eq!(ca.action(), Action::Renewed);
    let renewed = ca.record().clone();
    let cb = env.election.run_election_cycle(&t, &b).await.unwrap();
    assert_eq!(cb.action(), Action::None);
    // The application gives up on the transaction: nothing commits, nothing is adopted.
    drop((ca, cb));
    drop(t);

    // Two seconds later A renews for real: the same (ballot, renewal) as the abandoned write.
    env.advance(Duration::from_secs(2));
    assert_eq!(env.action(&a).await, Action::Renewed);
    let rec = env.record().await;
    assert_eq!(
        (rec.ballot(), rec.renewal()),
        (renewed.ballot(), renewed.renewal())
    );
    assert!(a.believes_it_leads());
    // A is then paused (or partitioned) for a while; B keeps cycling. A believes until
    // 3 s + 10 s × 0.99/1.01 ≈ 12.8 s; B must not take over before 3 s + 10 s = 13 s.
    for _ in 0..100 {
        env.advance(ms(100));
        let _ = env.cycle(&b).await.unwrap();
        assert_no_overlap(&[&a, &b]);
    }
}

// -------------------------------------------------------------------------------------------
// An operator's resignation "by id" after the lease was shortened. README: "A
// `Candidate` value that never held the ballot itself (an operator unregistering a live owner
// by its id) cannot know that nobody still believes in it: its resignation holds the vacancy
// for a full lease instead." DESIGN §10.4: "Operators never create a second believer." The
// hold is written with the *configured* lease (core `release`: `lease: cfg.lease_duration`),
// not the lease the owner believes in. `force_vacate` gets this right
// (`rec.lease.max(cfg.lease_duration)`); the stranger's resignation does not.
// -------------------------------------------------------------------------------------------
#[tokio::test]
async fn an_operator_unregistering_the_owner_by_id_after_a_lease_cut_holds_the_owners_lease() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader()); // A believes until ≈ 9.8 s
    assert_eq!(env.action(&b).await, Action::None);
    env.advance(ms(500));
    // An operator shortens the lease (A has not renewed since)...
    env.txn(|e, txn| async move { e.write_config(&txn, &short_lease()).await })
        .await
        .unwrap();
    // ...then removes A's registration by its id (A's process is wedged, say).
    let stranger = Candidate::with_clock(
        a.id().clone(),
        Priority::new(1),
        Arc::new(env.world.clock.clone()),
    );
    let out = env
        .txn(|e, txn| {
            let s = stranger.clone();
            async move { e.unregister_candidate(&txn, &s).await }
        })
        .await
        .unwrap();
    assert!(matches!(out, Some(ResignOutcome::Resigned { .. })));
    let rec = env.record().await;
    assert_eq!(rec.operator_hold(), Some(a.id()), "held for a full lease");
    // Which lease? The one A believes in was 10 s.
    for _ in 0..60 {
        env.advance(ms(100));
        let _ = env.cycle(&b).await.unwrap();
        assert_no_overlap(&[&a, &b]);
    }
}

// Same, through `resign_leadership` with the owner's id (no unregistering).
#[tokio::test]
async fn a_resignation_by_another_value_of_the_owners_id_after_a_lease_cut_holds_the_owners_lease()
{
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    assert_eq!(env.action(&b).await, Action::None);
    env.advance(ms(500));
    env.txn(|e, txn| async move { e.write_config(&txn, &short_lease()).await })
        .await
        .unwrap();
    let stranger = Candidate::with_clock(
        a.id().clone(),
        Priority::new(1),
        Arc::new(env.world.clock.clone()),
    );
    let out = env
        .txn(|e, txn| {
            let s = stranger.clone();
            async move { e.resign_leadership(&txn, &s, Some(Ballot::new(1))).await }
        })
        .await
        .unwrap();
    assert!(matches!(out, ResignOutcome::Resigned { .. }));
    for _ in 0..60 {
        env.advance(ms(100));
        let _ = env.cycle(&b).await.unwrap();
        assert_no_overlap(&[&a, &b]);
    }
}

// -------------------------------------------------------------------------------------------
// One `Candidate` in two elections. A `Candidate` carries one election's local state (tenure,
// the observation it is timing, pending attempts). Reused in a second election (a process
// with one election per shard), what it timed in shard X would count for the same (ballot,
// renewal) in shard Y, and it would take over Y while Y's leader believes. A candidate is
// bound to the first election it takes part in; every other election refuses it with a typed
// error, and a separate `Candidate` (the same id is fine) waits a full lease in Y.
// -------------------------------------------------------------------------------------------
#[tokio::test]
async fn one_candidate_in_two_elections_is_refused_and_a_second_one_waits_a_full_lease() {
    let cfg = no_stagger();
    let x = Env::with_subspace(&cfg, "shard-x").await;
    // Shard Y on the same database, same true time.
    let y_election = LeaderElection::new(Subspace::from("shard-y"));
    {
        let (e, c) = (y_election.clone(), cfg.clone());
        x.db.run(|txn, _| {
            let (e, c) = (e.clone(), c.clone());
            async move { e.initialize_with_config(&txn, &c).await }
        })
        .await
        .unwrap();
    }
    let shared = x.world.candidate("proc", 1);
    let dead_x = x.world.candidate("dead-x", 1);
    let leader_y = x.world.candidate("leader-y", 1);
    let register = |e: &LeaderElection, c: &Candidate| {
        let (e, c, db) = (e.clone(), c.clone(), x.db.clone());
        async move {
            db.run(|txn, _| {
                let (e, c) = (e.clone(), c.clone());
                async move { e.register_candidate(&txn, &c).await }
            })
            .await
        }
    };
    register(&x.election, &shared).await.unwrap();
    register(&x.election, &dead_x).await.unwrap();
    register(&y_election, &leader_y).await.unwrap();
    // Shard X: dead_x acquires (ballot 1, renewal 1) and then dies. `shared` starts timing it.
    assert!(
        x.election
            .run_cycle(&x.db, &dead_x)
            .await
            .unwrap()
            .is_leader()
    );
    assert_eq!(
        x.election.run_cycle(&x.db, &shared).await.unwrap().action,
        Action::None
    );
    // Shard Y refuses `shared`, with a typed error naming it, for every operation.
    let refused = |r: Result<_, ElectionError>| matches!(r, Err(ElectionError::CandidateOfAnotherElection { ref candidate }) if candidate == shared.id());
    assert!(refused(register(&y_election, &shared).await.map(|_| ())));
    assert!(refused(
        y_election.run_cycle(&x.db, &shared).await.map(|_| ())
    ));
    // A separate Candidate with the same id takes part in Y.
    let in_y = Candidate::with_clock(
        shared.id().clone(),
        Priority::new(1),
        Arc::new(x.world.clock.clone()),
    );
    register(&y_election, &in_y).await.unwrap();
    // 9.9 s later, shard Y gets its first leader: also (ballot 1, renewal 1).
    x.advance(ms(9_900));
    assert!(
        y_election
            .run_cycle(&x.db, &leader_y)
            .await
            .unwrap()
            .is_leader()
    );
    // `in_y` has never seen Y's record: it waits a full lease, so nobody overlaps.
    for _ in 0..120 {
        x.advance(ms(100));
        let _ = y_election.run_cycle(&x.db, &in_y).await.unwrap();
        assert_no_overlap(&[&in_y, &leader_y]);
    }
    // And `shared` still works in X.
    assert!(x.election.run_cycle(&x.db, &shared).await.is_ok());
}

// -------------------------------------------------------------------------------------------
// Corrupt stored values, through every public operation: never a panic (DESIGN §6: "nothing
// panics and nothing is overwritten blindly"). Mutated valid encodings (bit flips, truncation,
// extension, version 1 bodies) at every key, plus malformed registration keys.
// -------------------------------------------------------------------------------------------
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutate(rng: &mut Rng, mut v: Vec<u8>) -> Vec<u8> {
    for _ in 0..=rng.below(3) {
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            2 => {
                let n = rng.below(v.len() + 1);
                v.truncate(n);
            }
            3 => {
                for _ in 0..rng.below(8) {
                    v.push(rng.next() as u8);
                }
            }
            4 if !v.is_empty() => v[0] = 1,
            _ if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = [0x00, 0x7f, 0x80, 0xfb, 0xfc, 0xfd, 0xfe, 0xff][rng.below(8)];
            }
            _ => {}
        }
    }
    v
}

async fn one_operation(
    i: usize,
    t: &MemTransaction,
    e: &LeaderElection,
    a: &Candidate,
    b: &Candidate,
) -> Result<(), ElectionError> {
    match i {
        0 => {
            let c = e.run_election_cycle(t, a).await?;
            a.adopt(c);
        }
        1 => drop(e.try_claim_leadership(t, a).await?),
        2 => drop(e.refresh_lease(t, a).await?),
        3 => drop(e.run_election_cycle(t, b).await?),
        4 => drop(e.leader_record(t).await?),
        5 => {
            let _ = e.read_config(t).await?;
        }
        6 => drop(e.list_candidates(t).await?),
        7 => drop(e.evict_dead_candidates(t).await?),
        8 => drop(e.is_leader(t, a).await?),
        9 => drop(e.current_leader(t, a).await?),
        10 => drop(e.current_leader_unchecked(t).await?),
        11 => e.fence(t, Ballot::new(1)).await?,
        12 => drop(e.get_candidate(t, a.id()).await?),
        13 => e.heartbeat_candidate(t, a).await?,
        14 => e.register_candidate(t, a).await?,
        15 => drop(e.resign_leadership(t, a, None).await?),
        16 => drop(e.unregister_candidate(t, b).await?),
        17 => drop(e.force_vacate(t, a.id(), Ballot::new(1)).await?),
        18 => drop(e.request_resign(t, a.id(), Ballot::new(1)).await?),
        19 => e.initialize(t).await?,
        _ => e.write_config(t, &ElectionConfig::default()).await?,
    }
    Ok(())
}

async fn every_operation(
    db: &MemDb,
    e: &LeaderElection,
    a: &Candidate,
    b: &Candidate,
) -> Vec<Result<(), String>> {
    let mut out = Vec::new();
    for i in 0..=20 {
        let (db, e, a, b) = (db.clone(), e.clone(), a.clone(), b.clone());
        let r = tokio::spawn(async move {
            let t = db.create_transaction();
            // Errors are expected (typed); only a panic fails.
            let _ = one_operation(i, &t, &e, &a, &b).await;
        })
        .await;
        out.push(r.map_err(|j| format!("op {i}: {j:?}")));
    }
    out
}

// Every public operation on mutated stored values and malformed keys.
#[tokio::test]
async fn corrupt_values_at_every_key_are_typed_errors_through_every_operation() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut panics = Vec::new();
    for round in 0..150 {
        let env = Env::new(&no_stagger()).await;
        let a = env.candidate("a", 1).await;
        let b = env.candidate("b", 5).await;
        assert!(env.cycle(&a).await.unwrap().is_leader());
        let _ = env.cycle(&b).await.unwrap(); // a handover request
        let e = env.election.clone();
        let keys = [
            e.leader_key().to_vec(),
            e.fence_key().to_vec(),
            e.config_key().to_vec(),
            e.candidate_key(a.id()).unwrap(),
            e.candidate_key(b.id()).unwrap(),
        ];
        let which = rng.below(keys.len() + 1);
        let t = env.db.create_transaction();
        if which == keys.len() {
            // A malformed registration key under the candidates prefix.
            let mut k = e.candidate_key(a.id()).unwrap();
            let cut = rng.below(k.len());
            k.truncate(cut.max(k.len() - 4));
            for _ in 0..rng.below(6) {
                k.push(rng.next() as u8);
            }
            let v = t
                .get(&keys[3], fdb_leader_election::ReadMode::Snapshot)
                .await
                .unwrap()
                .unwrap();
            t.set(&k, &v);
        } else {
            let k = &keys[which];
            let v = t
                .get(k, fdb_leader_election::ReadMode::Snapshot)
                .await
                .unwrap()
                .unwrap();
            t.set(k, &mutate(&mut rng, v));
        }
        t.commit().await.unwrap();
        for (i, r) in every_operation(&env.db, &e, &a, &b)
            .await
            .into_iter()
            .enumerate()
        {
            if let Err(p) = r {
                panics.push(format!("round {round} key {which} op {i}: {p}"));
            }
        }
    }
    assert!(panics.is_empty(), "panics: {panics:#?}");
}

// -------------------------------------------------------------------------------------------
// The same defect through the runner, in paused time: an operator shortens the lease and
// unregisters the (partitioned) leader by its id in one transaction. Runner B is elected
// while runner A's guard is still valid (DESIGN §9: "no guarded work runs outside its
// guard's validity"; §10.4: "Operators never create a second believer").
// -------------------------------------------------------------------------------------------
#[path = "runner_support/mod.rs"]
mod runner_support;

#[tokio::test(start_paused = true)]
async fn runner_b_is_not_elected_while_a_guard_is_valid_after_an_operator_unregisters_a_by_id_with_a_shorter_lease()
 {
    use runner_support::{Cuttable, builder, subspace, wait_until};
    let db = runner_support::db();
    let cut_a = Cuttable::new(&db);
    let a = builder(cut_a.clone(), "a", 1).start().unwrap();
    let guard = a.elected().await.unwrap();
    let b = builder(db.clone(), "b", 1).start().unwrap();
    tokio::time::sleep(ms(250)).await;
    // A is partitioned just after a renewal.
    wait_until("a fresh renewal", Duration::from_secs(2), || {
        guard.remaining() > ms(270)
    })
    .await;
    cut_a.set_cut(true);
    let short = ElectionConfig::builder()
        .lease_duration(ms(150))
        .heartbeat_interval(ms(50))
        .candidate_timeout(ms(600))
        .transaction_timeout(ms(30))
        .takeover_stagger(ms(10))
        .handover_grace(Duration::from_secs(1))
        .build()
        .unwrap();
    let e = LeaderElection::new(subspace());
    let stranger = Candidate::with_clock(
        a.id().unwrap().clone(),
        Priority::new(1),
        Arc::new(fdb_leader_election::TokioClock::new()),
    );
    db.run(|txn, _| {
        let (e, s, short) = (e.clone(), stranger.clone(), short.clone());
        async move {
            e.write_config(&txn, &short).await?;
            e.unregister_candidate(&txn, &s).await
        }
    })
    .await
    .unwrap();
    wait_until("b elected", Duration::from_secs(2), || {
        b.is_leader() || !guard.is_valid()
    })
    .await;
    assert!(
        !(b.is_leader() && guard.is_valid()),
        "B leads while A's guard is valid for {:?} more",
        guard.remaining()
    );
}

// -------------------------------------------------------------------------------------------
// Adopting a stale clone of a committed cycle after a resignation. `Cycle` is `Clone`; a clone
// of the acquiring cycle (kept by a retry wrapper, say) adopted after the candidate resigned
// and a successor took over must not revive the old belief.
// -------------------------------------------------------------------------------------------
// resign_leadership opens no cycle, so it can run while a clone is alive.
#[tokio::test]
async fn a_stale_clone_of_a_committed_cycle_adopted_after_a_resignation_revives_nothing() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    let (e, ac) = (env.election.clone(), a.clone());
    let cycle = env
        .db
        .run(|txn, _| {
            let (e, a) = (e.clone(), ac.clone());
            async move { e.run_election_cycle(&txn, &a).await }
        })
        .await
        .unwrap();
    let stale = cycle.clone();
    assert!(a.adopt(cycle).is_leader());
    let out = env
        .txn(|e, txn| {
            let a = a.clone();
            async move { e.resign_leadership(&txn, &a, None).await }
        })
        .await
        .unwrap();
    assert!(matches!(out, ResignOutcome::Resigned { .. }));
    // B fills the reservation (the open-cycle flag is per candidate, so A's live clone does
    // not stop B).
    assert!(env.cycle(&b).await.unwrap().is_leader());
    assert!(!a.adopt(stale).is_leader());
    assert!(!a.believes_it_leads());
    assert_no_overlap(&[&a, &b]);
}

// -------------------------------------------------------------------------------------------
// The README's "Layout" names `src/database.rs` (the store layer's `ElectionDatabase`
// trait) and `src/txn.rs` (the `ElectionTxn` trait); neither file exists (they live in
// `src/store/`).
// -------------------------------------------------------------------------------------------
#[test]
fn every_source_path_the_readme_layout_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let layout = readme
        .split("## Layout")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let missing: Vec<&str> = layout
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|p| p.starts_with("src/") || p.starts_with("recipes-simulation/"))
        .filter(|p| !root.join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "README Layout names missing paths: {missing:?}"
    );
}
