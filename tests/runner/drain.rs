//! Found by an adversarial review: a leader's renewal that keeps a handover request but whose
//! commit fails starts the grace in the core while the runner's guard stays open, so the
//! next successful cycle cuts the work in flight with no drain at all.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::runner_support::*;
use fdb_leader_election::memdb::{CommitContext, CommitDecision};
use fdb_leader_election::{CommitFault, FaultInjector};
use tokio::time::Instant;

/// Fails the leader's ("alpha") writes of the leader record for `window` from the commit of
/// the requester's ("bravo") handover request on; everything else proceeds.
#[derive(Debug, Clone)]
struct FailAlphaAfterRequest {
    armed_at: Arc<Mutex<Option<Instant>>>,
    window: Duration,
}

impl FaultInjector for FailAlphaAfterRequest {
    fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
        let writes_leader = ctx.written_keys.contains(&leader_key());
        let by = |who: &[u8]| {
            ctx.written_keys
                .iter()
                .any(|k| k.windows(who.len()).any(|w| w == who))
        };
        let mut armed = self.armed_at.lock().unwrap();
        if writes_leader && by(b"bravo") && armed.is_none() {
            *armed = Some(Instant::now());
            return CommitDecision::proceed();
        }
        if let Some(t) = *armed {
            if writes_leader && by(b"alpha") && t.elapsed() < self.window {
                return CommitDecision::fail(CommitFault::Unavailable);
            }
        }
        CommitDecision::proceed()
    }
}

/// A busy leader ("alpha", priority 1) is asked to hand over by "bravo" (priority 2); its
/// writes of the leader record fail for `window` from the request on. Asserts that the work
/// in flight is cut no sooner than the grace after the guard closed.
async fn busy_leader_asked_to_hand_over(window: Duration) {
    let db = db();
    let grace = Duration::from_millis(100);
    let faults = FailAlphaAfterRequest {
        armed_at: Arc::new(Mutex::new(None)),
        window,
    };
    db.set_fault_injector(Arc::new(faults.clone()));
    let Busy { a, ga, task, b } = busy_leader_then(&db, grace, (1, 2), None).await;
    // Watch the guard: when it closes (the drain begins) and when it is cancelled.
    let mut closed_at = None;
    let start = Instant::now();
    while !ga.is_cancelled() {
        if closed_at.is_none() && ga.is_handover_requested() {
            closed_at = Some(Instant::now());
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no handover");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let cancelled_at = Instant::now();
    assert!(
        faults.armed_at.lock().unwrap().is_some(),
        "the request was written"
    );
    let reason = ga.stop_reason();
    let drained = closed_at.map(|c| cancelled_at - c);
    assert!(
        drained.is_some_and(|d| d >= grace),
        "the work in flight was cut {drained:?} after the guard closed (grace {grace:?}); \
         stop reason {reason:?}"
    );
    assert_eq!(task.await.unwrap(), None);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_busy_leader_drains_for_the_grace_after_its_guard_closes() {
    busy_leader_asked_to_hand_over(Duration::ZERO).await;
}

/// The renewal that keeps the request fails (110 ms of failed commits, shorter than the
/// belief, longer than the 100 ms grace): the core noted the request at that cycle's start,
/// the runner never closed the guard; the first cycle that commits closes it and cuts the
/// work in the same step.
#[tokio::test(start_paused = true)]
async fn a_failed_keep_of_a_request_does_not_cut_the_work_without_a_drain() {
    busy_leader_asked_to_hand_over(Duration::from_millis(110)).await;
}

/// docs/design.md §10.6: no path leaves a leader holding the leadership with a closed guard
/// for longer than `handover_grace` plus one heartbeat. An idle leader within its minimum
/// tenure that is asked to hand over closes its guard at once (it starts no new work) and
/// keeps the leadership, workless, until the tenure ends.
#[tokio::test(start_paused = true)]
async fn an_idle_leader_within_its_minimum_tenure_does_not_sit_on_a_closed_guard() {
    let db = db();
    let grace = Duration::from_millis(100);
    let cfg = config()
        .to_builder()
        .handover_grace(grace)
        .min_tenure(Duration::from_secs(2))
        .build()
        .unwrap();
    let a = builder(db.clone(), "alpha", 1)
        .config(cfg.clone())
        .start()
        .unwrap();
    let ga = a.elected().await.unwrap();
    let b = builder(db.clone(), "bravo", 2).config(cfg).start().unwrap();
    let start = Instant::now();
    let mut closed_at = None;
    while !ga.is_cancelled() {
        if closed_at.is_none() && !ga.accepts_work() {
            closed_at = Some(Instant::now());
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no handover");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let held = closed_at.map(|c| c.elapsed());
    assert!(
        held.is_none_or(|h| h <= grace + HEARTBEAT),
        "the leader held its leadership with a closed guard (no work accepted) for {held:?}"
    );
    b.elected().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}
