//! Regression tests for the edges of the API (docs/design.md §10, issue "Safety at the API's edges"):
//! each test drives, through the public API over MemDb, a defect an adversarial review found,
//! and fails on the code that had it. The last section holds what a second review found after
//! those fixes (another candidate timing an uncommitted write in a composed transaction; a
//! vacancy held with a lease shorter than the owner's; one `Candidate` in two elections; the
//! README's layout), and coverage nothing else reached (corrupt values through every
//! operation, stale cycle clones).

use std::sync::Arc;
use std::time::Duration;

use crate::common::scenarios::{World, assert_no_overlap};
use crate::runner_support::{in_txn, timed};
use fdb_leader_election::{
    Action, Ballot, Candidate, CandidateId, CommitFault, Cycle, ElectionConfig, ElectionError,
    ElectionResult, ElectionTxn, LeaderElection, LeaderRecord, MemDb, MemTransaction,
    OperatorOutcome, Priority, ReadMode, ResignOutcome, RunOptions, ScriptedFaults,
};
use foundationdb_tuple::Subspace;

struct Env {
    db: MemDb,
    election: LeaderElection,
    world: World,
    faults: ScriptedFaults,
}

impl Env {
    async fn new(config: &ElectionConfig) -> Self {
        Self::with_subspace(config, "edges").await
    }

    async fn with_subspace(config: &ElectionConfig, name: &str) -> Self {
        let env = Env {
            db: MemDb::new(),
            election: LeaderElection::new(Subspace::from(name)),
            world: World::new(),
            faults: ScriptedFaults::new(),
        };
        env.db.set_fault_injector(Arc::new(env.faults.clone()));
        let (e, c) = (env.election.clone(), config.clone());
        in_txn!(env.db, [e, c], |txn| e
            .initialize_with_config(&txn, &c)
            .await)
        .unwrap();
        env
    }

    async fn candidate(&self, label: &str, prio: i32) -> Candidate {
        let c = self.world.candidate(label, prio);
        self.register(&c).await;
        c
    }

    async fn register(&self, c: &Candidate) {
        let (e, c) = (self.election.clone(), c.clone());
        in_txn!(self.db, [e, c], |txn| e.register_candidate(&txn, &c).await).unwrap();
    }

    /// One cycle through the helper that adopts only after the commit.
    async fn cycle(&self, c: &Candidate) -> Result<ElectionResult, ElectionError> {
        self.election.run_cycle(&self.db, c).await.map(|o| o.result)
    }

    /// One cycle, adopted after its commit; returns what it did.
    async fn action(&self, c: &Candidate) -> Action {
        let (e, cc) = (self.election.clone(), c.clone());
        let cycle = in_txn!(self.db, [e, c = cc], |txn| e
            .run_election_cycle(&txn, &c)
            .await)
        .unwrap();
        let action = cycle.action();
        c.adopt(cycle);
        action
    }

    /// One cycle in a single attempt whose commit is hit by `fault`; the cycle is dropped.
    async fn cycle_with_fault(&self, c: &Candidate, fault: CommitFault) -> ElectionError {
        self.faults.push_commit_fault(fault);
        let (e, c) = (self.election.clone(), c.clone());
        self.db
            .run_with(RunOptions::default().with_max_attempts(1), |txn, _| {
                let (e, c) = (e.clone(), c.clone());
                async move { e.run_election_cycle(&txn, &c).await }
            })
            .await
            .map(drop)
            .unwrap_err()
    }

    async fn record(&self) -> LeaderRecord {
        let e = self.election.clone();
        in_txn!(self.db, [e], |txn| e.leader_record(&txn).await).unwrap()
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

    /// Another `Candidate` value with `owner`'s id, holding no local state: what an operator
    /// builds to unregister or resign it, or a process's candidate for a second election.
    fn stranger(&self, owner: &Candidate) -> Candidate {
        Candidate::with_clock(
            owner.id().clone(),
            Priority::new(1),
            Arc::new(self.world.clock.clone()),
        )
    }

    /// `steps` times: time moves on by `step`, `c` cycles, and no two of `watched` believe.
    async fn cycle_checking_overlap(
        &self,
        c: &Candidate,
        steps: u32,
        step: Duration,
        watched: &[&Candidate],
    ) {
        for _ in 0..steps {
            self.advance(step);
            let _ = self.cycle(c).await.unwrap();
            assert_no_overlap(watched);
        }
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

// --- Defect 1: read-your-writes adoption ---

#[tokio::test]
async fn is_leader_inside_the_acquiring_transaction_never_makes_a_believer() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    // A's application transaction: a cycle (acquires the vacancy), then is_leader, then the
    // fence and a protected write, all before the commit.
    let ta = env.db.create_transaction();
    let cycle = env.election.run_election_cycle(&ta, &a).await.unwrap();
    assert_eq!(cycle.action(), Action::Acquired);
    assert!(!env.election.is_leader(&ta, &a).await.unwrap());
    assert!(!a.believes_it_leads());
    assert_eq!(a.fencing_token(), None);
    // Meanwhile B acquires the same vacancy and commits first.
    assert!(env.cycle(&b).await.unwrap().is_leader());
    assert!(matches!(
        ta.commit().await,
        Err(e) if e.kind() == fdb_leader_election::TxnErrorKind::Conflict
    ));
    drop(cycle);
    assert!(
        !a.believes_it_leads(),
        "A's commit failed: it never believed"
    );
    assert_no_overlap(&[&a, &b]);
    // A's next cycle, in a new transaction, sees B's record: A follows.
    assert!(!env.cycle(&a).await.unwrap().is_leader());
    assert_eq!(b.fencing_token(), Some(Ballot::new(1)));
}

#[tokio::test]
async fn a_second_cycle_in_the_same_transaction_is_a_typed_error() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let t = env.db.create_transaction();
    let first = env.election.try_claim_leadership(&t, &a).await.unwrap();
    assert_eq!(first.action(), Action::Acquired);
    assert!(matches!(
        env.election.run_election_cycle(&t, &a).await,
        Err(ElectionError::CycleInProgress { .. })
    ));
    // Even with the first cycle dropped inside the transaction, the record read back is this
    // transaction's own write (same read version): never recognised.
    drop(first);
    assert!(matches!(
        env.election.run_election_cycle(&t, &a).await,
        Err(ElectionError::CycleInProgress { .. })
    ));
    assert!(!a.believes_it_leads());
    drop(t);
    // Once the transaction is gone, cycles run again.
    assert!(env.cycle(&a).await.unwrap().is_leader());
}

#[tokio::test]
async fn current_leader_after_an_uncommitted_acquire_starts_no_takeover_timer() {
    let env = Env::new(&no_stagger()).await;
    let f = env.candidate("f", 1).await;
    let g = env.candidate("g", 1).await;
    let tf = env.db.create_transaction();
    let cycle = env.election.run_election_cycle(&tf, &f).await.unwrap();
    assert_eq!(cycle.action(), Action::Acquired);
    // The query reads F's own uncommitted acquisition.
    let seen = env.election.current_leader(&tf, &f).await.unwrap();
    assert_eq!(seen.map(|s| s.leader_id), Some(f.id().clone()));
    // G acquires the same vacancy (same ballot and renewal) a second later and commits first.
    env.advance(Duration::from_secs(1));
    assert!(env.cycle(&g).await.unwrap().is_leader());
    assert!(tf.commit().await.is_err());
    drop(cycle);
    // Ten seconds after F's query (nine into G's lease), F must not take over: its wait
    // starts at its own cycle's first sighting of G's committed record, not at the query.
    env.advance(Duration::from_secs(9));
    assert_eq!(env.action(&f).await, Action::None);
    assert!(!f.believes_it_leads() && g.believes_it_leads());
    assert_no_overlap(&[&f, &g]);
    // A full lease after F's own cycle first saw G's record, it may.
    env.advance(Duration::from_secs(10));
    assert_eq!(env.action(&f).await, Action::Acquired);
}

#[tokio::test]
async fn adopting_inside_the_closure_before_the_commit_is_what_run_cycle_prevents() {
    // The manual flow done wrong (docs/design.md §10.7): adopt before the commit. Both believe, and
    // the fence (which knows only the ballot) admits both. `run_cycle` adopts after.
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    let ta = env.db.create_transaction();
    let cycle: Cycle = env.election.run_election_cycle(&ta, &a).await.unwrap();
    let wrong = a.adopt(cycle); // the footgun
    assert!(wrong.is_leader());
    assert!(env.cycle(&b).await.unwrap().is_leader());
    assert!(ta.commit().await.is_err());
    assert!(
        a.believes_it_leads() && b.believes_it_leads(),
        "two believers"
    );
    assert_eq!(a.fencing_token(), b.fencing_token());
    // The helper never does this.
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    env.faults.push_commit_fault(CommitFault::Conflict);
    env.faults.push_commit_fault(CommitFault::UnknownNotApplied);
    assert!(
        env.cycle(&a).await.is_err(),
        "the unknown result is an error"
    );
    assert!(!a.believes_it_leads());
    assert!(env.cycle(&b).await.unwrap().is_leader());
    assert!(!env.cycle(&a).await.unwrap().is_leader());
    assert_no_overlap(&[&a, &b]);
}

#[tokio::test]
async fn run_cycle_recognises_its_own_unknown_commit_next_time() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    env.faults.push_commit_fault(CommitFault::UnknownApplied);
    assert!(
        env.cycle(&a)
            .await
            .is_err_and(|e| e.is_maybe_committed() && !a.believes_it_leads())
    );
    let r = env.cycle(&a).await.unwrap();
    assert!(r.is_leader());
    assert_eq!(
        a.fencing_token(),
        Some(Ballot::new(1)),
        "one claim, one ballot"
    );
}

#[tokio::test]
async fn a_cycle_adopted_by_another_candidate_is_not_adopted() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    let ta = env.db.create_transaction();
    let cycle = env.election.run_election_cycle(&ta, &a).await.unwrap();
    ta.commit().await.unwrap();
    assert!(!b.adopt(cycle).is_leader());
    assert!(!b.believes_it_leads() && !a.believes_it_leads());
}

// --- Defect 2: a shorter lease and an unknown commit ---

#[tokio::test]
async fn shortening_the_lease_caps_the_leaders_belief_even_if_the_commit_is_unknown() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    env.advance(Duration::from_secs(1));
    let short = timed(1000, 300, 2000, 200)
        .takeover_stagger(Duration::ZERO)
        .build()
        .unwrap();
    env.txn(|e, txn| {
        let short = short.clone();
        async move { e.write_config(&txn, &short).await }
    })
    .await
    .unwrap();
    // A renews with the 1 s lease; the commit applies but its result is unknown.
    let err = env.cycle_with_fault(&a, CommitFault::UnknownApplied).await;
    assert!(err.is_maybe_committed());
    assert_eq!(env.record().await.lease_duration(), Duration::from_secs(1));
    // B sees the 1 s lease unrenewed and takes over after a full (short) lease. At every
    // step, at most one of them believes.
    assert_eq!(env.action(&b).await, Action::None);
    for _ in 0..12 {
        env.advance(ms(100));
        assert_no_overlap(&[&a, &b]);
        let _ = env.action(&b).await;
        assert_no_overlap(&[&a, &b]);
    }
    assert!(b.believes_it_leads(), "B took over the short lease");
    assert!(!a.believes_it_leads());
}

// --- Defect 3: force_vacate with a registered candidate's id ---

#[tokio::test]
async fn force_vacate_with_a_registered_id_never_lets_that_candidate_in_early() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    let bid = b.id().clone();
    let out = env
        .txn(|e, txn| {
            let bid = bid.clone();
            async move { e.force_vacate(&txn, &bid, Ballot::new(1)).await }
        })
        .await
        .unwrap();
    assert_eq!(
        out,
        OperatorOutcome::Done {
            ballot: Ballot::new(2)
        }
    );
    let rec = env.record().await;
    assert_eq!(rec.operator_hold(), Some(b.id()));
    assert_eq!(
        rec.reservation(),
        None,
        "an operator hold is not a reservation"
    );
    // B does not fill it at once: it waits a full lease like everyone, while A's belief runs
    // out.
    assert_eq!(env.action(&b).await, Action::None);
    for _ in 0..9 {
        env.advance(Duration::from_secs(1));
        assert_eq!(env.action(&b).await, Action::None);
        assert_no_overlap(&[&a, &b]);
    }
    env.advance(Duration::from_secs(1));
    assert_eq!(env.action(&b).await, Action::Acquired);
    assert_eq!(b.fencing_token(), Some(Ballot::new(3)));
    assert!(!a.believes_it_leads());
}

// --- Defect 4: is_leader on an older read version ---

#[tokio::test]
async fn is_leader_on_an_older_read_version_never_demotes_the_leader() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    // The application's transaction takes its read version...
    let app = env.db.create_transaction();
    let _ = app.get(b"app/x", ReadMode::Snapshot).await.unwrap();
    // ...the leader renews in its own transaction...
    env.advance(Duration::from_secs(3));
    assert_eq!(env.action(&a).await, Action::Renewed);
    // ...then the application asks: the older renewal still names A at its ballot.
    assert!(env.election.is_leader(&app, &a).await.unwrap());
    assert!(a.believes_it_leads(), "a query never demotes");
    assert_eq!(env.action(&a).await, Action::Renewed);
}

#[tokio::test]
async fn queries_never_change_what_a_candidate_believes_or_times() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let f = env.candidate("f", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    // F never cycled: its queries neither time the record nor report a lapse.
    for _ in 0..30 {
        env.advance(Duration::from_secs(1));
        let t = env.db.create_transaction();
        assert!(env.election.current_leader(&t, &f).await.unwrap().is_some());
        assert!(!env.election.is_leader(&t, &f).await.unwrap());
    }
    // F's first cycle starts its wait now, not at its first query 30 s ago.
    assert_eq!(env.action(&f).await, Action::None);
    env.advance(Duration::from_secs(9));
    assert_eq!(env.action(&f).await, Action::None);
    env.advance(Duration::from_secs(1));
    assert_eq!(env.action(&f).await, Action::Acquired);
}

// --- Defect 5: a handover to a requester that left ---

#[tokio::test]
async fn a_requester_that_unregisters_withdraws_its_request() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let h = env.candidate("h", 9).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    // H asks for a handover (its cycle commits, A has not cycled since)...
    assert_eq!(env.action(&h).await, Action::RequestedHandover);
    assert!(env.record().await.handover_request().is_some());
    // ...then leaves (a rolled-back deploy).
    let out = env
        .txn(|e, txn| {
            let h = h.clone();
            async move { e.unregister_candidate(&txn, &h).await }
        })
        .await
        .unwrap();
    assert!(out.is_none());
    assert_eq!(env.record().await.handover_request(), None);
    // The leader keeps leading.
    assert_eq!(env.action(&a).await, Action::Renewed);
    assert!(a.believes_it_leads());
}

#[tokio::test]
async fn a_leader_drops_a_request_whose_author_is_gone() {
    // The request landed while its author was already unregistered (a raw record from an
    // older version, or any path around the registry): the leader drops it.
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let h = env.candidate("h", 9).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    // H's request and its unregistration race: both transactions read before either commits.
    let th = env.db.create_transaction();
    let req = env.election.run_election_cycle(&th, &h).await.unwrap();
    assert_eq!(req.action(), Action::RequestedHandover);
    let tu = env.db.create_transaction();
    env.election.unregister_candidate(&tu, &h).await.unwrap();
    th.commit().await.unwrap();
    drop(req);
    // The unregistration read the leader record with a conflict range: it retries.
    assert!(tu.commit().await.is_err());
    env.txn(|e, txn| {
        let h = h.clone();
        async move { e.unregister_candidate(&txn, &h).await }
    })
    .await
    .unwrap();
    assert_eq!(env.record().await.handover_request(), None);
    assert_eq!(env.action(&a).await, Action::Renewed);
}

#[tokio::test]
async fn a_reservation_for_a_candidate_that_unregisters_is_withdrawn() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 5).await;
    let c = env.candidate("c", 0).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    for x in [&b, &c] {
        let _ = env.action(x).await;
    }
    // A resigns, reserving for B (the best live); B leaves before filling it.
    let out = env
        .txn(|e, txn| {
            let a = a.clone();
            async move { e.resign_leadership(&txn, &a, None).await }
        })
        .await
        .unwrap();
    assert!(
        matches!(out, ResignOutcome::Resigned { reserved_for: Some(ref n), .. } if n.id() == b.id())
    );
    env.txn(|e, txn| {
        let b = b.clone();
        async move { e.unregister_candidate(&txn, &b).await }
    })
    .await
    .unwrap();
    assert_eq!(env.record().await.reservation(), None);
    // Nobody waits a lease for B: C takes the unreserved vacancy at once.
    assert_eq!(env.action(&c).await, Action::Acquired);
}

#[tokio::test]
async fn a_resignation_never_reserves_for_a_candidate_unregistering_concurrently() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 5).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    let _ = env.action(&b).await;
    let tr = env.db.create_transaction();
    let out = env.election.resign_leadership(&tr, &a, None).await.unwrap();
    assert!(matches!(
        out,
        ResignOutcome::Resigned {
            reserved_for: Some(_),
            ..
        }
    ));
    let tu = env.db.create_transaction();
    env.election.unregister_candidate(&tu, &b).await.unwrap();
    tu.commit().await.unwrap();
    // The resignation conflicts on the reserved candidate's registration.
    assert!(tr.commit().await.is_err());
    let rec = env.record().await;
    assert!(rec.reservation().is_none_or(|r| r.id() != b.id()));
}

// --- Defect 6: eviction races a claim ---

#[tokio::test]
async fn eviction_never_unregisters_a_candidate_that_claims_concurrently() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let x = env.candidate("x", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    // A renews until X (who never heartbeats) looks dead.
    for _ in 0..8 {
        env.advance(Duration::from_secs(3));
        assert_eq!(env.action(&a).await, Action::Renewed);
    }
    // A crashes. X claims without heartbeats (`try_claim_leadership`), so it still looks
    // dead: its first claim only starts its wait.
    let first = env
        .txn(|e, txn| {
            let x = x.clone();
            async move { e.try_claim_leadership(&txn, &x).await }
        })
        .await
        .unwrap();
    assert_eq!(first.action(), Action::None);
    drop(first);
    env.advance(Duration::from_secs(11));
    // The eviction reads (and means to remove X) while X's claim commits.
    let te = env.db.create_transaction();
    let tc = env.db.create_transaction();
    let claim = env.election.try_claim_leadership(&tc, &x).await.unwrap();
    assert_eq!(claim.action(), Action::Acquired);
    let evicted = env.election.evict_dead_candidates(&te).await.unwrap();
    assert!(evicted.contains(x.id()), "X looked dead to the eviction");
    tc.commit().await.unwrap();
    x.adopt(claim);
    // Whatever the eviction saw, it read the leader record with a conflict range: it retries.
    assert!(te.commit().await.is_err());
    let evicted = env
        .txn(|e, txn| async move { e.evict_dead_candidates(&txn).await })
        .await
        .unwrap();
    assert!(!evicted.contains(x.id()), "the owner is never evicted");
    let rec = env.record().await;
    assert_eq!(rec.owner().map(|o| o.id()), Some(x.id()));
    let reg = env
        .txn(|e, txn| {
            let id = x.id().clone();
            async move { e.get_candidate(&txn, &id).await }
        })
        .await
        .unwrap();
    assert!(reg.is_some(), "the owner is registered");
}

// --- Defect 7: operator resign hands over in one commit ---

#[tokio::test]
async fn an_operator_resign_is_honoured_without_preemption_and_hands_over_at_once() {
    let config = ElectionConfig::builder()
        .allow_preemption(false)
        .takeover_stagger(Duration::ZERO)
        .build()
        .unwrap();
    let env = Env::new(&config).await;
    let a = env.candidate("a", 9).await;
    let b = env.candidate("b", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    let _ = env.action(&b).await;
    let ops = CandidateId::random("operator").unwrap();
    let out = env
        .txn(|e, txn| {
            let ops = ops.clone();
            async move { e.request_resign(&txn, &ops, Ballot::new(1)).await }
        })
        .await
        .unwrap();
    assert_eq!(
        out,
        OperatorOutcome::Done {
            ballot: Ballot::new(1)
        }
    );
    let rec = env.record().await;
    assert_eq!(rec.operator_request(), Some(&ops));
    assert_eq!(rec.handover_request(), None);
    assert_eq!(env.action(&a).await, Action::HandedOver);
    assert_eq!(
        env.record().await.reservation().map(|r| r.id()),
        Some(b.id())
    );
    assert_eq!(env.action(&b).await, Action::Acquired);
    assert_eq!(b.fencing_token(), Some(Ballot::new(2)));
}

// --- Defect 8: smaller gaps ---

#[tokio::test]
async fn a_handover_request_keeps_the_owners_attempt_id_so_its_unknown_commit_is_recognised() {
    let config = ElectionConfig::builder()
        .handover_grace(Duration::from_secs(2))
        .takeover_stagger(Duration::ZERO)
        .build()
        .unwrap();
    let env = Env::new(&config).await;
    let a = env.candidate("a", 1).await;
    let h = env.candidate("h", 9).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    env.advance(Duration::from_secs(1));
    // A's renewal applies, but A is told "unknown".
    assert!(
        env.cycle_with_fault(&a, CommitFault::UnknownApplied)
            .await
            .is_maybe_committed()
    );
    let writer = env.record().await.writer().cloned();
    // H's request lands on top of it.
    assert_eq!(env.action(&h).await, Action::RequestedHandover);
    assert_eq!(env.record().await.writer().cloned(), writer);
    // A (busy, within the grace) recognises its renewal and keeps leading while it drains.
    a.set_busy(true);
    assert_eq!(env.action(&a).await, Action::Renewed);
    assert!(a.believes_it_leads());
}

#[tokio::test]
async fn a_vacancy_that_failed_to_land_is_written_again() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let h = env.candidate("h", 9).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    assert_eq!(env.action(&h).await, Action::RequestedHandover);
    // A steps down; its vacancy does not land.
    let err = env.cycle_with_fault(&a, CommitFault::Unavailable).await;
    assert!(err.is_retryable());
    assert!(!a.believes_it_leads());
    assert!(env.record().await.owner().is_some_and(|o| o.id() == a.id()));
    // Its next cycle writes the vacancy again (no lease lost), and H fills it at once.
    assert_eq!(env.action(&a).await, Action::HandedOver);
    assert_eq!(env.action(&h).await, Action::Acquired);
    assert_no_overlap(&[&a, &h]);
}

#[tokio::test]
async fn states_the_protocol_never_writes_fail_closed_through_the_api() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let h = env.candidate("h", 9).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    assert_eq!(env.action(&h).await, Action::RequestedHandover);
    let good = env.record().await;
    let key = {
        let t = env.db.create_transaction();
        let rows = t.get_range(b"", b"\xff", ReadMode::Snapshot).await.unwrap();
        let bytes_of = |v: &[u8]| v.to_vec();
        rows.into_iter()
            .find(|(k, _)| k.ends_with(b"leader\x00"))
            .map(|(k, v)| (k, bytes_of(&v)))
            .unwrap()
    };
    assert_eq!(good.ballot(), Ballot::new(1));
    // Flip the owner's id into the request (a request from the owner itself): the stored
    // value is re-encoded by hand, byte for byte, replacing h's id with a's.
    let (k, v) = key;
    let (hid, aid) = (h.id().as_str().as_bytes(), a.id().as_str().as_bytes());
    assert_eq!(hid.len(), aid.len());
    let pos = v.windows(hid.len()).position(|w| w == hid).unwrap();
    let mut bad = v.clone();
    bad[pos..pos + hid.len()].copy_from_slice(aid);
    let t = env.db.create_transaction();
    t.set(&k, &bad);
    t.commit().await.unwrap();
    assert!(matches!(
        env.cycle(&h).await,
        Err(ElectionError::Corrupt { .. })
    ));
}

#[tokio::test]
async fn an_unknown_commit_that_lands_later_is_never_a_second_ballot() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    // A's acquisition is in flight when A is told "unknown".
    let err = env
        .cycle_with_fault(&a, CommitFault::UnknownAppliedLater)
        .await;
    assert!(err.is_maybe_committed());
    // It lands just after B's next transaction takes its read version: B's acquisition of
    // the same vacancy then conflicts, and A recognises its own write.
    let tb = env.db.create_transaction();
    let cb = env.election.run_election_cycle(&tb, &b).await.unwrap();
    assert_eq!(cb.action(), Action::Acquired);
    assert!(tb.commit().await.is_err());
    drop(cb);
    assert!(env.cycle(&a).await.unwrap().is_leader());
    assert_eq!(a.fencing_token(), Some(Ballot::new(1)));
    assert!(!env.cycle(&b).await.unwrap().is_leader());
}

#[tokio::test]
async fn the_database_helper_and_the_local_check_have_distinct_names() {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let r = env.cycle(&a).await.unwrap();
    assert!(r.is_leader());
    assert!(a.believes_it_leads());
    let t = env.db.create_transaction();
    assert!(env.election.is_leader(&t, &a).await.unwrap());
    let _ = Priority::new(0);
}

#[tokio::test]
async fn a_candidate_value_that_never_held_the_ballot_cannot_hand_it_over_at_once() {
    // An operator builds a `Candidate` for a registered id to unregister it; that id owns the
    // record and its real process still believes. The resignation must not let anyone in
    // before the real owner's belief has ended.
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 9).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    let _ = env.action(&b).await; // (b asks for a handover; a has not cycled since)
    let stranger = env.stranger(&a);
    let out = env
        .txn(|e, txn| {
            let s = stranger.clone();
            async move { e.unregister_candidate(&txn, &s).await }
        })
        .await
        .unwrap();
    assert!(matches!(
        out,
        Some(ResignOutcome::Resigned {
            reserved_for: None,
            ..
        })
    ));
    let rec = env.record().await;
    assert_eq!(rec.operator_hold(), Some(a.id()), "held, not reserved");
    // B waits a full lease, while A's belief runs out.
    assert_eq!(env.action(&b).await, Action::None);
    for _ in 0..9 {
        env.advance(Duration::from_secs(1));
        let _ = env.action(&b).await;
        assert_no_overlap(&[&a, &b]);
    }
    env.advance(Duration::from_secs(1));
    assert_eq!(env.action(&b).await, Action::Acquired);
    assert!(!a.believes_it_leads());
}

// --- Found by an adversarial review after the fixes above ---

fn short_lease() -> ElectionConfig {
    timed(1000, 300, 2000, 200)
        .takeover_stagger(Duration::ZERO)
        .build()
        .unwrap()
}

// -------------------------------------------------------------------------------------------
// A composed transaction with two candidates' cycles. docs/design.md §10.1: "A read inside
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
    env.cycle_checking_overlap(&b, 100, ms(100), &[&a, &b])
        .await;
}

// -------------------------------------------------------------------------------------------
// An operator's resignation "by id" after the lease was shortened. README: "A
// `Candidate` value that never held the ballot itself (an operator unregistering a live owner
// by its id) cannot know that nobody still believes in it: its resignation holds the vacancy
// for a full lease instead." docs/design.md §10.4: "Operators never create a second believer." The
// hold was written with the *configured* lease, shorter than the one the owner believes in;
// every vacancy now keeps the longer of the stored and configured leases (`vacancy_lease`,
// shared with `force_vacate`).
// -------------------------------------------------------------------------------------------

/// A leads (believing until ≈ 9.8 s), B follows, and 0.5 s later an operator shortens the
/// lease to 1 s (A has not renewed since).
async fn leader_then_a_lease_cut() -> (Env, Candidate, Candidate) {
    let env = Env::new(&no_stagger()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    assert_eq!(env.action(&b).await, Action::None);
    env.advance(ms(500));
    env.txn(|e, txn| async move { e.write_config(&txn, &short_lease()).await })
        .await
        .unwrap();
    (env, a, b)
}

#[tokio::test]
async fn an_operator_unregistering_the_owner_by_id_after_a_lease_cut_holds_the_owners_lease() {
    let (env, a, b) = leader_then_a_lease_cut().await;
    // An operator removes A's registration by its id (A's process is wedged, say).
    let stranger = env.stranger(&a);
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
    env.cycle_checking_overlap(&b, 60, ms(100), &[&a, &b]).await;
}

// Same, through `resign_leadership` with the owner's id (no unregistering).
#[tokio::test]
async fn a_resignation_by_another_value_of_the_owners_id_after_a_lease_cut_holds_the_owners_lease()
{
    let (env, a, b) = leader_then_a_lease_cut().await;
    let stranger = env.stranger(&a);
    let out = env
        .txn(|e, txn| {
            let s = stranger.clone();
            async move { e.resign_leadership(&txn, &s, Some(Ballot::new(1))).await }
        })
        .await
        .unwrap();
    assert!(matches!(out, ResignOutcome::Resigned { .. }));
    env.cycle_checking_overlap(&b, 60, ms(100), &[&a, &b]).await;
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
        in_txn!(x.db, [e, c], |txn| e.initialize_with_config(&txn, &c).await).unwrap();
    }
    let shared = x.world.candidate("proc", 1);
    let dead_x = x.world.candidate("dead-x", 1);
    let leader_y = x.world.candidate("leader-y", 1);
    let register = |e: &LeaderElection, c: &Candidate| {
        let (e, c, db) = (e.clone(), c.clone(), x.db.clone());
        async move { in_txn!(db, [e, c], |txn| e.register_candidate(&txn, &c).await) }
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
    let in_y = x.stranger(&shared);
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
// Corrupt stored values, through every public operation: never a panic (docs/design.md §6: "nothing
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
// while runner A's guard is still valid (docs/design.md §9: "no guarded work runs outside its
// guard's validity"; §10.4: "Operators never create a second believer").
// -------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn runner_b_is_not_elected_while_a_guard_is_valid_after_an_operator_unregisters_a_by_id_with_a_shorter_lease()
 {
    use crate::runner_support::{Cuttable, builder, subspace, wait_until};
    let db = crate::runner_support::db();
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
    let short = timed(150, 50, 600, 30)
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
    in_txn!(db, [e, s = stranger, short], |txn| {
        e.write_config(&txn, &short).await?;
        e.unregister_candidate(&txn, &s).await
    })
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
    let cycle = in_txn!(env.db, [e, a = ac], |txn| e
        .run_election_cycle(&txn, &a)
        .await)
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
// The README's "Layout" named `src/database.rs` (the store layer's `ElectionDatabase`
// trait) and `src/txn.rs` (the `ElectionTxn` trait); neither file exists (they live in
// `src/store/`). The layout is now docs/design.md's "Where the code is".
// -------------------------------------------------------------------------------------------
#[test]
fn every_source_path_the_design_layout_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
    let layout = design
        .split("## Where the code is")
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
        "docs/design.md's layout names missing paths: {missing:?}"
    );
}

// The easy flow says when to act next (issue 20, item 8): `run_cycle`'s outcome carries the
// cycle's `next_action_at`, so a user of `run_cycle` paces takeovers as the runner does.
#[tokio::test]
async fn run_cycle_tells_a_follower_when_the_lease_it_times_lapses() {
    let config = timed(3000, 1000, 6000, 300)
        .takeover_stagger(Duration::ZERO)
        .build()
        .unwrap();
    let env = Env::new(&config).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    let led = env.election.run_cycle(&env.db, &a).await.unwrap();
    assert!(led.is_leader());
    assert_eq!(
        led.next_action_at, None,
        "a leader with no tenure or grace waits for nothing"
    );
    let first = env.election.run_cycle(&env.db, &b).await.unwrap();
    let seen_at = b.now();
    let takeover = first.next_action_at.expect("a follower times the lease");
    assert!(
        takeover >= seen_at.saturating_add(Duration::from_secs(3))
            && takeover <= seen_at.saturating_add(Duration::from_millis(3_001)),
        "{takeover:?} vs {seen_at:?}"
    );
    // The leader stops renewing; at that instant (not a heartbeat later) b takes over.
    env.world
        .advance(takeover.saturating_duration_since(b.now()));
    let took = env.election.run_cycle(&env.db, &b).await.unwrap();
    assert!(took.is_leader(), "{took:?}");
    assert_eq!(took.record.ballot(), Ballot::new(2));
}

// A rolling upgrade (issue 21): the previous release wrote the fence as version 2 + bincode.
// This release reads it (the old leader's fenced writes keep passing) and, at the next change
// of owner, writes the tuple fence every binding reads.
#[tokio::test]
async fn a_fence_of_the_previous_release_is_read_and_the_next_owner_writes_the_tuple_fence() {
    let env = Env::new(&short_lease()).await;
    let a = env.candidate("a", 1).await;
    let b = env.candidate("b", 1).await;
    assert!(env.cycle(&a).await.unwrap().is_leader());
    // What the previous release wrote for ballot 1: version 2, varint 1, false.
    let key = env.election.fence_key().to_vec();
    let legacy = key.clone();
    env.txn(move |_, txn| {
        let key = legacy.clone();
        async move {
            txn.set(&key, &[2, 1, 0]);
            Ok(())
        }
    })
    .await
    .unwrap();
    env.txn(|e, txn| async move { e.fence(&txn, Ballot::new(1)).await })
        .await
        .expect("the old fence admits its leader");
    assert!(matches!(
        env.txn(|e, txn| async move { e.fence(&txn, Ballot::new(2)).await })
            .await,
        Err(ElectionError::StaleToken { .. })
    ));
    // a stops renewing; b takes over a full lease later, at ballot 2.
    assert!(!env.cycle(&b).await.unwrap().is_leader());
    env.advance(Duration::from_millis(1_001));
    assert!(env.cycle(&b).await.unwrap().is_leader());
    let bytes = env
        .txn(move |_, txn| {
            let key = key.clone();
            async move { txn.get(&key, ReadMode::Snapshot).await.map_err(Into::into) }
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bytes, foundationdb_tuple::pack(&(3u16, 2u64, false)));
    assert!(matches!(
        env.txn(|e, txn| async move { e.fence(&txn, Ballot::new(1)).await })
            .await,
        Err(ElectionError::StaleToken { .. })
    ));
    env.txn(|e, txn| async move { e.fence(&txn, Ballot::new(2)).await })
        .await
        .unwrap();
}
