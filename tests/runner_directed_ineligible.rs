//! Found by an adversarial review: a directed resign (`resign --to NAME`) and a
//! leader that is not eligible.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    dead_code,
    unused_imports
)]

use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::{
    Action, Candidate, CandidateId, ElectionConfig, ElectionError, LeaderElection, ManualClock,
    MemDb, OperatorOutcome, Priority, UnhealthyPolicy,
};
use foundationdb_tuple::Subspace;

struct World {
    db: MemDb,
    election: LeaderElection,
    clock: ManualClock,
}

impl World {
    async fn new() -> World {
        let w = World {
            db: MemDb::new(),
            election: LeaderElection::new(Subspace::from("health")),
            clock: ManualClock::new(),
        };
        let e = w.election.clone();
        w.db.run(|txn, _| {
            let e = e.clone();
            async move {
                // No rank stagger: whoever cycles first fills an unreserved vacancy.
                let config = ElectionConfig::builder()
                    .takeover_stagger(Duration::ZERO)
                    .build()?;
                e.initialize_with_config(&txn, &config).await
            }
        })
        .await
        .unwrap();
        w
    }

    async fn join(&self, label: &str, priority: i32) -> Candidate {
        let c = Candidate::with_clock(
            CandidateId::random(label).unwrap(),
            Priority::new(priority),
            Arc::new(self.clock.clone()),
        );
        let (e, c2) = (self.election.clone(), c.clone());
        self.db
            .run(|txn, _| {
                let (e, c2) = (e.clone(), c2.clone());
                async move { e.register_candidate(&txn, &c2).await }
            })
            .await
            .unwrap();
        c
    }

    async fn cycle(&self, c: &Candidate) -> Action {
        self.election.run_cycle(&self.db, c).await.unwrap().action
    }

    async fn mark(&self, name: &str, eligible: bool, reason: &str) {
        let e = self.election.clone();
        let name = name.to_owned();
        let reason = reason.to_owned();
        self.db
            .run(|txn, _| {
                let (e, name, reason) = (e.clone(), name.clone(), reason.clone());
                async move { e.set_eligible(&txn, &name, eligible, &reason).await }
            })
            .await
            .unwrap();
    }

    async fn resign_to(&self, to: &str) -> Result<OperatorOutcome, ElectionError> {
        let e = self.election.clone();
        let ballot = self.record().await.ballot();
        let to = to.to_owned();
        self.db
            .run(|txn, _| {
                let (e, to) = (e.clone(), to.clone());
                async move {
                    e.request_resign_to(&txn, &CandidateId::parse("ops")?, ballot, &to)
                        .await
                }
            })
            .await
    }

    async fn record(&self) -> fdb_leader_election::LeaderRecord {
        let e = self.election.clone();
        self.db
            .run(|txn, _| {
                let e = e.clone();
                async move { e.leader_record(&txn).await }
            })
            .await
            .unwrap()
    }
}

/// docs/design.md §13.6: `resign --to NAME` "asks the leader to reserve its vacancy for that
/// candidate". A leader that turns ineligible (its own health, or an operator's mark) before
/// it reads the directed request steps down for its health instead, to the best live eligible
/// candidate, ignoring the operator's live, eligible target, and publishes no refusal: the
/// direction is dropped silently.
#[tokio::test]
async fn an_ineligible_leader_with_a_directed_request_reserves_for_the_named_candidate() {
    let w = World::new().await;
    let leader = w.join("leader", 5).await;
    let best = w.join("best", 9).await;
    let chosen = w.join("chosen", 1).await;
    best.set_eligible(false, "warming up").unwrap();
    assert_eq!(w.cycle(&leader).await, Action::Acquired);
    best.set_eligible(true, "").unwrap();
    for c in [&best, &chosen] {
        w.cycle(c).await;
    }
    assert!(matches!(
        w.resign_to("chosen").await,
        Ok(OperatorOutcome::Done { .. })
    ));
    // The leader falls ill before its next cycle.
    leader.set_eligible(false, "disk full").unwrap();
    let action = w.cycle(&leader).await;
    let rec = w.record().await;
    let reserved = rec.reservation().map(|r| r.id().clone());
    assert_eq!(
        reserved.as_ref(),
        Some(chosen.id()),
        "the operator directed the vacancy to 'chosen' (live, eligible); the leader ({action:?}) \
         reserved it for {reserved:?} (best is {})",
        best.id()
    );
}
