//! Eligibility through the public API (docs/design.md §13.1–3, §13.6): a candidate that says it is
//! not eligible, or that an operator marks by name, never leads and hands over when it does;
//! a directed resign reserves for the named candidate or is refused, visibly, changing
//! nothing; a vacancy reserved for a candidate that died opens after the reservation timeout.

use crate::runner_support::in_txn;

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
        in_txn!(w.db, [e], |txn| {
            // No rank stagger: whoever cycles first fills an unreserved vacancy.
            let config = ElectionConfig::builder()
                .takeover_stagger(Duration::ZERO)
                .build()?;
            e.initialize_with_config(&txn, &config).await
        })
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
        in_txn!(self.db, [e, c2], |txn| e
            .register_candidate(&txn, &c2)
            .await)
        .unwrap();
        c
    }

    /// Three candidates: "leader" (priority 5) leads, "best" (9) outranks it but was not
    /// eligible when it acquired (it warmed up), "chosen" (1) ranks last.
    async fn leader_best_and_chosen(&self) -> (Candidate, Candidate, Candidate) {
        let leader = self.join("leader", 5).await;
        let best = self.join("best", 9).await;
        let chosen = self.join("chosen", 1).await;
        best.set_eligible(false, "warming up").unwrap();
        assert_eq!(self.cycle(&leader).await, Action::Acquired);
        (leader, best, chosen)
    }

    /// Three candidates joined, the first leading and the other two followers that cycled
    /// once.
    async fn led_by(&self, [first, second, third]: [(&str, i32); 3]) -> [Candidate; 3] {
        let leader = self.join(first.0, first.1).await;
        let (b, c) = (
            self.join(second.0, second.1).await,
            self.join(third.0, third.1).await,
        );
        assert_eq!(self.cycle(&leader).await, Action::Acquired);
        for follower in [&b, &c] {
            assert_eq!(self.cycle(follower).await, Action::None);
        }
        [leader, b, c]
    }

    /// `c`, leading, resigns (a graceful stop, `Runner::resign`); the reservation it wrote.
    async fn resign(&self, c: &Candidate) -> Option<CandidateId> {
        in_txn!(self.db, [e = self.election, c], |txn| e
            .resign_leadership(&txn, &c, None)
            .await)
        .unwrap();
        self.record().await.reservation().map(|r| r.id().clone())
    }

    async fn cycle(&self, c: &Candidate) -> Action {
        self.election.run_cycle(&self.db, c).await.unwrap().action
    }

    async fn mark(&self, name: &str, eligible: bool, reason: &str) {
        let e = self.election.clone();
        let name = name.to_owned();
        let reason = reason.to_owned();
        in_txn!(self.db, [e, name, reason], |txn| e
            .set_eligible(&txn, &name, eligible, &reason)
            .await)
        .unwrap();
    }

    async fn resign_to(&self, to: &str) -> Result<OperatorOutcome, ElectionError> {
        let e = self.election.clone();
        let ballot = self.record().await.ballot();
        let to = to.to_owned();
        in_txn!(self.db, [e, to], |txn| {
            e.request_resign_to(&txn, &CandidateId::parse("ops")?, ballot, &to)
                .await
        })
    }

    async fn record(&self) -> fdb_leader_election::LeaderRecord {
        let e = self.election.clone();
        in_txn!(self.db, [e], |txn| e.leader_record(&txn).await).unwrap()
    }
}

#[tokio::test]
async fn an_ineligible_candidate_never_leads_and_an_ineligible_leader_hands_over() {
    let w = World::new().await;
    let sick = w.join("sick", 9).await;
    let fit = w.join("fit", 1).await;
    sick.set_eligible(false, "database unreachable").unwrap();
    assert_eq!(w.cycle(&sick).await, Action::None, "never acquires");
    assert_eq!(w.cycle(&fit).await, Action::Acquired);
    // Its registration says why; it never asks the lower-priority leader to hand over.
    assert_eq!(w.cycle(&sick).await, Action::None);
    let list = in_txn!(w.db, [e = w.election], |txn| e.list_candidates(&txn).await).unwrap();
    let sick_row = list.iter().find(|c| c.id == *sick.id()).unwrap();
    assert_eq!(
        sick_row.record.eligibility().reason(),
        Some("database unreachable")
    );
    // Healthy again, it outranks the leader: the usual handover.
    sick.set_eligible(true, "").unwrap();
    assert_eq!(w.cycle(&sick).await, Action::RequestedHandover);
    assert_eq!(w.cycle(&fit).await, Action::HandedOver);
    assert_eq!(w.cycle(&sick).await, Action::Acquired);
    // Now the leader falls ill: it hands over in one commit to the best live eligible one.
    sick.set_eligible(false, "disk full").unwrap();
    assert_eq!(w.cycle(&sick).await, Action::SteppedDownIneligible);
    let rec = w.record().await;
    assert_eq!(rec.reservation().map(|r| r.id()), Some(fit.id()));
    assert_eq!(w.cycle(&fit).await, Action::Acquired);
    // The fit leader falls ill too, nobody else eligible: it holds (the default policy)...
    fit.set_eligible(false, "disk full").unwrap();
    assert_eq!(w.cycle(&fit).await, Action::Renewed);
    assert!(fit.believes_it_leads());
    // ... or lets go under the release policy.
    fit.set_unhealthy_policy(UnhealthyPolicy::Release);
    assert_eq!(w.cycle(&fit).await, Action::SteppedDownIneligible);
    let rec = w.record().await;
    assert_eq!((rec.owner(), rec.reservation()), (None, None));
}

#[tokio::test]
async fn an_operators_mark_outlives_restarts_and_excludes_a_leader() {
    let w = World::new().await;
    let first = w.join("db-host-3", 9).await;
    let other = w.join("other", 1).await;
    assert_eq!(w.cycle(&first).await, Action::Acquired);
    w.mark("db-host-3", false, "disk replacement").await;
    // The marked leader hands over to the best live eligible candidate.
    assert_eq!(w.cycle(&first).await, Action::SteppedDownIneligible);
    assert_eq!(w.cycle(&other).await, Action::Acquired);
    // A restart (a new id, the same name) is marked as well.
    let restarted = w.join("db-host-3", 9).await;
    assert_eq!(w.cycle(&restarted).await, Action::None);
    w.mark("db-host-3", true, "").await;
    assert_eq!(w.cycle(&restarted).await, Action::RequestedHandover);
}

#[tokio::test]
async fn a_directed_resign_reserves_for_the_named_candidate_or_is_refused_changing_nothing() {
    let w = World::new().await;
    let (leader, best, chosen) = w.leader_best_and_chosen().await;
    for c in [&best, &chosen] {
        w.cycle(c).await;
    }
    // Unknown names are refused, and so is an ineligible one; nothing is written.
    let before = w.record().await;
    for name in ["nobody", "best"] {
        let r = w.resign_to(name).await;
        assert!(
            matches!(r, Err(ElectionError::OperatorRefused { .. })),
            "{name}: {r:?}"
        );
    }
    assert_eq!(w.record().await, before);
    // A live eligible name: the leader reserves for it, though "best" has a higher priority.
    assert!(matches!(
        w.resign_to("chosen").await,
        Ok(OperatorOutcome::Done { .. })
    ));
    assert_eq!(w.record().await.operator_request_to(), Some("chosen"));
    assert_eq!(w.cycle(&leader).await, Action::HandedOver);
    assert_eq!(w.cycle(&chosen).await, Action::Acquired);
    // Directed at a name that left before the leader read the request: the leader keeps
    // leading, the request is cleared, and why is published.
    let late = w.join("late", 1).await;
    w.cycle(&late).await;
    assert!(matches!(
        w.resign_to("late").await,
        Ok(OperatorOutcome::Done { .. })
    ));
    let e = w.election.clone();
    let l = late.clone();
    in_txn!(w.db, [e, l], |txn| e.unregister_candidate(&txn, &l).await).unwrap();
    assert_eq!(w.cycle(&chosen).await, Action::Renewed);
    assert!(chosen.believes_it_leads());
    let rec = w.record().await;
    assert_eq!(
        (rec.operator_request(), rec.operator_request_to()),
        (None, None)
    );
    let refusal = in_txn!(w.db, [e = w.election], |txn| e.resign_refusal(&txn).await)
        .unwrap()
        .expect("the refusal is published");
    assert_eq!((refusal.to(), refusal.ballot()), ("late", rec.ballot()));
    assert!(refusal.reason().contains("late"), "{}", refusal.reason());
}

#[tokio::test]
async fn a_vacancy_reserved_for_a_candidate_that_died_opens_after_the_reservation_timeout() {
    let w = World::new().await;
    let leader = w.join("leader", 1).await;
    let heir = w.join("heir", 9).await;
    let other = w.join("other", 5).await;
    assert_eq!(w.cycle(&leader).await, Action::Acquired);
    w.cycle(&heir).await;
    w.cycle(&other).await;
    // The heir dies (it stops cycling, still registered and "live"); the leader resigns for it.
    assert_eq!(w.resign(&leader).await.as_ref(), Some(heir.id()));
    let timeout = ElectionConfig::default().reservation_timeout();
    assert_eq!(w.cycle(&other).await, Action::None);
    w.clock.advance(timeout - Duration::from_millis(10));
    assert_eq!(w.cycle(&other).await, Action::None);
    // Two heartbeats (6 s), not the lease (10 s).
    w.clock.advance(Duration::from_millis(20));
    assert_eq!(w.cycle(&other).await, Action::Acquired);
}

// Found by an adversarial review: a directed resign (`resign --to NAME`) and a leader that
// is not eligible.

/// docs/design.md §13.6: `resign --to NAME` "asks the leader to reserve its vacancy for that
/// candidate". A leader that turns ineligible (its own health, or an operator's mark) before
/// it reads the directed request steps down for its health instead, to the best live eligible
/// candidate, ignoring the operator's live, eligible target, and publishes no refusal: the
/// direction is dropped silently.
#[tokio::test]
async fn an_ineligible_leader_with_a_directed_request_reserves_for_the_named_candidate() {
    let w = World::new().await;
    let (leader, best, chosen) = w.leader_best_and_chosen().await;
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

// Issue 39: an operator's mark by name against a namesake whose registration, written before
// the mark, still says it is eligible.

/// Two live candidates named "a" (the CLI warns, but allows it) and "b". `eligible a false`
/// made the leader step down and reserve the vacancy for the other "a", which read the mark at
/// its next cycle and could not take it; "b", the only eligible candidate, waited out the
/// reservation timeout with nobody leading.
#[tokio::test]
async fn a_mark_by_name_reserves_for_no_candidate_of_that_name() {
    let w = World::new().await;
    let [a1, a2, b] = w.led_by([("a", 9), ("a", 5), ("b", 1)]).await;
    w.mark("a", false, "disk maintenance").await;
    // The leader reads the mark on its name; its namesake has not cycled since.
    assert_eq!(w.cycle(&a1).await, Action::SteppedDownIneligible);
    let rec = w.record().await;
    assert_eq!(
        rec.reservation().map(|r| r.id()),
        Some(b.id()),
        "the vacancy went to {:?}, not to b, the only eligible candidate",
        rec.reservation()
    );
    assert_eq!(
        w.cycle(&a2).await,
        Action::None,
        "a marked namesake never leads"
    );
    assert_eq!(
        w.cycle(&b).await,
        Action::Acquired,
        "at once, not after a timeout"
    );
}

/// The same for a resignation (`Runner::resign`, a graceful stop) and for a directed resign:
/// neither reserves for, nor is directed to, a candidate whose name is marked.
#[tokio::test]
async fn neither_a_resignation_nor_a_directed_resign_chooses_a_marked_candidate() {
    let w = World::new().await;
    let [leader, _marked, other] = w
        .led_by([("leader", 9), ("db-host-3", 5), ("other", 1)])
        .await;
    w.mark("db-host-3", false, "disk replacement").await;
    let refused = w.resign_to("db-host-3").await;
    assert!(
        matches!(&refused, Err(ElectionError::OperatorRefused { reason }) if reason.contains("db-host-3")),
        "{refused:?}"
    );
    assert_eq!(w.record().await.operator_request(), None, "nothing written");
    assert_eq!(w.resign(&leader).await.as_ref(), Some(other.id()));
    assert_eq!(w.cycle(&other).await, Action::Acquired);
}

/// A mark written while a resignation's transaction is open, on the name of the candidate it
/// chose, makes that transaction conflict (it read the mark), and the retry chooses again: no
/// reservation commits for a candidate marked before the commit.
#[tokio::test]
async fn a_mark_written_meanwhile_makes_a_reservation_for_its_name_retry() {
    let w = World::new().await;
    let [leader, _soon_marked, other] = w
        .led_by([("leader", 9), ("db-host-3", 5), ("other", 1)])
        .await;
    let attempts = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (e, l, db) = (w.election.clone(), leader.clone(), w.db.clone());
    let outcome = in_txn!(w.db, [e, l, db, attempts], |txn| {
        let outcome = e.resign_leadership(&txn, &l, None).await?;
        if attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            // An operator marks the chosen candidate's name before this commits.
            in_txn!(db, [e], |mark| {
                e.set_eligible(&mark, "db-host-3", false, "disk replacement")
                    .await
            })?;
        }
        Ok::<_, ElectionError>(outcome)
    })
    .unwrap();
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 2);
    let reserved = w.record().await.reservation().map(|r| r.id().clone());
    assert_eq!(reserved.as_ref(), Some(other.id()), "{outcome:?}");
}

/// `resign --to` given an id, copied from `status` (which lists ids): that candidate, even
/// where a namesake ranks better; an id nobody live has is refused, saying it was an id.
#[tokio::test]
async fn a_directed_resign_given_an_id_reserves_for_that_candidate() {
    let w = World::new().await;
    let [leader, better, chosen] = w
        .led_by([("leader", 9), ("worker", 5), ("worker", 1)])
        .await;
    let gone = CandidateId::with_nonce("worker", 0xff).unwrap();
    let refused = w.resign_to(gone.as_str()).await;
    assert!(
        matches!(&refused, Err(ElectionError::OperatorRefused { reason })
            if reason.contains(&format!("with the id {:?}", gone.as_str()))),
        "{refused:?}"
    );
    assert!(matches!(
        w.resign_to(chosen.id().as_str()).await,
        Ok(OperatorOutcome::Done { .. })
    ));
    assert_eq!(w.cycle(&leader).await, Action::HandedOver);
    assert_eq!(
        w.record().await.reservation().map(|r| r.id()),
        Some(chosen.id())
    );
    assert_eq!(w.cycle(&better).await, Action::None);
    assert_eq!(w.cycle(&chosen).await, Action::Acquired);
}
