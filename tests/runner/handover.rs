//! Cooperative handovers driven by the runner, in tokio's paused time: preemption, resign and
//! shutdown hand over within a few commits when watches work and within about one heartbeat
//! when they do not; a busy leader finishes its guarded work (within the grace) first; the
//! old guard is always cancelled before the successor becomes valid.

use std::time::Duration;

use crate::runner_support::*;
use fdb_leader_election::runner::{ChangeReason, OnLoss, RunnerState, StopReason};
use fdb_leader_election::{Ballot, ResignOutcome};
use tokio::time::Instant;

/// Starts `a` (priority 1) and lets it settle as leader; returns it, its guard, and a
/// recorder of its callbacks.
async fn settled_leader(
    db: &fdb_leader_election::MemDb,
) -> (
    fdb_leader_election::Runner,
    fdb_leader_election::LeadershipGuard,
    Recorder,
) {
    let (a, rec, guard) = recorded_leader(db.clone(), "a", 1).await;
    tokio::time::sleep(HEARTBEAT * 3).await;
    (a, guard, rec)
}

#[tokio::test(start_paused = true)]
async fn preemption_with_watches_takes_a_few_commits_and_no_wait() {
    let db = db();
    let (a, ga, ra) = settled_leader(&db).await;
    let writes = LeaderWrites::install(&db);
    let started = Instant::now();
    let (b, rb, gb) = recorded_leader(db.clone(), "b", 2).await;
    let took = started.elapsed();
    // Request, vacancy reserved for b, acquisition: three writes of the leader record (a
    // renewal of a may slip in between).
    assert!(writes.get() <= 4, "{} leader writes", writes.get());
    assert!(took < HEARTBEAT / 2, "handover took {took:?} with watches");
    assert!(ga.is_cancelled());
    assert_eq!(
        ga.stop_reason(),
        Some(StopReason::HandedOver {
            to: b.id().cloned()
        })
    );
    assert_eq!(gb.ballot(), Ballot::new(2));
    assert!(
        ra.all()
            .iter()
            .any(|(_, s)| matches!(s, Seen::Handover(n) if Some(n.id()) == b.id())),
        "the leader was told about the request"
    );
    // b's view: it was elected by a handover.
    let last = rb.changes().pop().unwrap();
    assert_eq!(last.reason, ChangeReason::HandedOver);
    assert_eq!(last.new.unwrap().id, *b.id().unwrap());
    // a follows, b stays.
    tokio::time::sleep(LEASE * 2).await;
    assert!(gb.is_valid());
    assert_eq!(a.state(), RunnerState::Follower);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn preemption_without_watches_takes_about_one_heartbeat() {
    let db = db();
    db.set_watches_enabled(false);
    let (a, ga, _) = settled_leader(&db).await;
    let started = Instant::now();
    let b = builder(db.clone(), "b", 2).start().unwrap();
    let gb = b.elected().await.unwrap();
    let took = started.elapsed();
    // The leader sees the request at its next cycle (within a heartbeat); b polls while its
    // request is pending, so it fills the vacancy within an eighth of a heartbeat.
    assert!(
        took <= HEARTBEAT + HEARTBEAT / 8 + Duration::from_millis(2),
        "took {took:?}"
    );
    assert!(ga.is_cancelled());
    assert_eq!(gb.ballot(), Ballot::new(2));
    // a learns of its successor at its next cycle.
    tokio::time::sleep(HEARTBEAT).await;
    assert_eq!(a.leader().map(|l| l.id), b.id().cloned());
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn resign_reserves_for_the_next_candidate_with_and_without_watches() {
    for watches in [true, false] {
        let db = db();
        db.set_watches_enabled(watches);
        let (a, ga, ra) = settled_leader(&db).await;
        let b = builder(db.clone(), "b", 1).start().unwrap();
        tokio::time::sleep(HEARTBEAT * 2).await;
        let resigned_at = Instant::now();
        let outcome = a.resign().await.unwrap();
        assert!(
            matches!(&outcome, ResignOutcome::Resigned { ballot, reserved_for: Some(n) }
                if *ballot == Ballot::new(1) && Some(n.id()) == b.id()),
            "{outcome:?}"
        );
        assert!(ga.is_cancelled());
        let gb = b.elected().await.unwrap();
        let took = resigned_at.elapsed();
        let bound = if watches { HEARTBEAT / 4 } else { HEARTBEAT };
        assert!(took <= bound, "watches={watches}: took {took:?}");
        assert_eq!(gb.ballot(), Ballot::new(2));
        assert_eq!(ra.stopped(), vec![(Ballot::new(1), StopReason::Resigned)]);
        // Resigning is not losing: a keeps competing (as a follower).
        tokio::time::sleep(HEARTBEAT * 3).await;
        assert_eq!(a.state(), RunnerState::Follower);
        a.shutdown().await;
        b.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn resign_waits_for_busy_guarded_work_within_the_grace() {
    let db = db();
    let (a, ga, _ra) = settled_leader(&db).await;
    let b = builder(db.clone(), "b", 1).start().unwrap();
    tokio::time::sleep(HEARTBEAT * 2).await;
    let work = Duration::from_millis(250);
    let task = ga.spawn(async move {
        tokio::time::sleep(work).await;
        "done"
    });
    let asked = Instant::now();
    let outcome = a.resign().await.unwrap();
    let took = asked.elapsed();
    assert!(
        matches!(outcome, ResignOutcome::Resigned { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        task.await.unwrap(),
        Some("done"),
        "the busy work finished first"
    );
    assert!(
        took >= work,
        "resigned after {took:?}, before the work finished"
    );
    assert!(
        took <= work + HEARTBEAT,
        "resigned {took:?} after it was asked"
    );
    assert!(ga.is_cancelled());
    assert_eq!(b.elected().await.unwrap().ballot(), Ballot::new(2));
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_task_that_first_runs_after_its_leadership_ended_never_starts_its_work() {
    // The test runtime has one thread: a spawned task first runs when this test yields.
    let db = db();
    let (a, ga, _ra) = settled_leader(&db).await;
    let started = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&started);
    let task = ga.spawn(async move {
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    // The belief ends before the task first runs (the guard is not cancelled yet: the runner
    // has not run either).
    a.candidate().unwrap().step_down_locally();
    assert!(!ga.is_valid());
    assert_eq!(task.await.unwrap(), None);
    assert!(
        !started.load(std::sync::atomic::Ordering::SeqCst),
        "work began on an ended leadership"
    );
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_hands_over_in_one_commit() {
    let db = db();
    let (a, ga, ra) = settled_leader(&db).await;
    let b = builder(db.clone(), "b", 1).start().unwrap();
    let c = builder(db.clone(), "c", 3)
        .config(config())
        .start()
        .unwrap();
    // c outranks a, so it takes over by handover first; then c shuts down.
    let gc = c.elected().await.unwrap();
    assert!(ga.is_cancelled());
    tokio::time::sleep(HEARTBEAT * 2).await;
    let writes = LeaderWrites::install(&db);
    let report = c.shutdown().await;
    assert!(report.clean && report.unregistered && report.tasks_finished);
    assert!(gc.is_cancelled());
    let to = match &report.resigned {
        Some(ResignOutcome::Resigned {
            ballot,
            reserved_for,
        }) => {
            assert_eq!(*ballot, gc.ballot());
            reserved_for.clone().unwrap()
        }
        other => panic!("{other:?}"),
    };
    // Equal priorities: the earlier registration (a) gets the reservation.
    assert_eq!(Some(to.id()), a.id());
    let g = a.elected().await.unwrap();
    assert_eq!(g.ballot(), gc.ballot().next().unwrap());
    // The resignation and the acquisition: two writes of the leader record.
    assert_eq!(writes.get(), 2);
    assert_eq!(c.state(), RunnerState::Stopped);
    assert!(c.health().is_ok(), "a stopped runner is not unhealthy");
    assert_eq!(ra.elected(), vec![Ballot::new(1), Ballot::new(3)]);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_busy_leader_finishes_guarded_work_then_hands_over_at_once() {
    let db = db();
    let (a, ga, ra) = settled_leader(&db).await;
    let work = Duration::from_millis(250);
    let task = ga.spawn(async move {
        tokio::time::sleep(work).await;
        "done"
    });
    let started = Instant::now();
    let b = builder(db.clone(), "b", 2).start().unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(ga.is_handover_requested(), "the leader saw the request");
    assert!(
        ga.is_valid(),
        "and keeps leading while its work is in flight"
    );
    assert!(!ga.accepts_work());
    assert_eq!(
        ga.spawn(async { "late" }).await.unwrap(),
        None,
        "no new work after the request"
    );
    let gb = b.elected().await.unwrap();
    let took = started.elapsed();
    assert_eq!(
        task.await.unwrap(),
        Some("done"),
        "in-flight work ran to completion"
    );
    assert!(
        took >= work,
        "handed over before the work finished ({took:?})"
    );
    assert!(
        took <= work + Duration::from_millis(5),
        "handed over {took:?} after the request"
    );
    assert!(ga.is_cancelled());
    assert_eq!(gb.ballot(), Ballot::new(2));
    assert!(
        ra.all()
            .iter()
            .any(|(_, s)| matches!(s, Seen::Handover(n) if Some(n.id()) == b.id()))
    );
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn work_longer_than_the_grace_is_cancelled_when_the_grace_ends() {
    let db = db();
    let grace = Duration::from_millis(400);
    let cfg = config().to_builder().handover_grace(grace).build().unwrap();
    let a = builder(db.clone(), "a", 1).config(cfg).start().unwrap();
    let ga = a.elected().await.unwrap();
    let task = ga.spawn(async {
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
    let started = Instant::now();
    let b = builder(db.clone(), "b", 2).start().unwrap();
    let gb = b.elected().await.unwrap();
    let took = started.elapsed();
    assert!(took >= grace && took <= grace + HEARTBEAT, "took {took:?}");
    assert_eq!(task.await.unwrap(), None, "the task was cancelled");
    assert!(ga.is_cancelled() && gb.is_valid());
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn exit_on_loss_leaves_the_election() {
    let db = db();
    let a = builder(db.clone(), "a", 1)
        .on_loss(OnLoss::Exit)
        .start()
        .unwrap();
    let ga = a.elected().await.unwrap();
    let b = builder(db.clone(), "b", 2).start().unwrap();
    b.elected().await.unwrap();
    let mut states = a.state_updates();
    tokio::time::timeout(LEASE, states.wait_for(|s| *s == RunnerState::Stopped))
        .await
        .unwrap()
        .unwrap();
    assert!(ga.is_cancelled());
    let report = a.shutdown().await;
    assert!(report.unregistered && report.resigned.is_none());
    assert!(a.elected().await.is_none());
    let listed = in_txn!(db, [e = a.election()], |txn| e.list_candidates(&txn).await).unwrap();
    assert_eq!(listed.len(), 1, "a unregistered");
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_guard_is_never_valid_together_with_a_successor() {
    // Preemptions back and forth, resigns and shutdowns, checked every millisecond.
    let db = db();
    let a = builder(db.clone(), "a", 1).start().unwrap();
    let b = builder(db.clone(), "b", 2).start().unwrap();
    let check = |rs: &[&fdb_leader_election::Runner]| {
        let valid: Vec<_> = rs.iter().filter_map(|r| r.leadership()).collect();
        assert!(valid.len() <= 1, "two valid guards: {valid:?}");
    };
    let mut ballots = Vec::new();
    for round in 0..6 {
        let limit = Instant::now() + LEASE * 4;
        while Instant::now() < limit {
            check(&[&a, &b]);
            if let Some(g) = a.leadership().or_else(|| b.leadership()) {
                if ballots.last() != Some(&g.ballot()) {
                    ballots.push(g.ballot());
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Swap priorities: the lower one asks for the leadership back.
        let (pa, pb) = if round % 2 == 0 { (3, 2) } else { (2, 3) };
        a.candidate()
            .unwrap()
            .set_priority(fdb_leader_election::Priority::new(pa));
        b.candidate()
            .unwrap()
            .set_priority(fdb_leader_election::Priority::new(pb));
    }
    assert!(ballots.len() >= 6, "ballots {ballots:?}");
    assert!(
        ballots.windows(2).all(|w| w[0] < w[1]),
        "ballots {ballots:?}"
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// docs/design.md §10.6: no leader keeps a closed guard. `b` (priority 5) asks `a` to hand over while
/// `a` runs a 400 ms guarded job; `a` closes its guard and drains; `b` shuts down meanwhile
/// (its unregistration withdraws the request). When the job is done, `a` must not renew with
/// its guard closed for good: it steps down anyway, reserving for the best live candidate
/// (`c`), within the grace plus a heartbeat. (Before the fix `a` renewed forever with a closed
/// guard and `c` never led.)
#[tokio::test(start_paused = true)]
async fn a_leader_whose_requester_left_during_the_drain_steps_down_anyway() {
    let db = db();
    let (a, ga, _ra) = settled_leader(&db).await;
    let c = builder(db.clone(), "c", 1).start().unwrap();
    tokio::time::sleep(HEARTBEAT * 2).await;
    let job = ga.spawn(tokio::time::sleep(Duration::from_millis(400)));
    let b = builder(db.clone(), "b", 5).start().unwrap();
    wait_until("a is asked to hand over", LEASE, || {
        ga.is_handover_requested()
    })
    .await;
    assert!(!ga.accepts_work());
    b.shutdown().await;
    let drained = Instant::now();
    assert_eq!(job.await.unwrap(), Some(()), "the in-flight job finished");
    let gc = tokio::time::timeout(config().handover_grace() + HEARTBEAT, c.elected())
        .await
        .expect("c leads within the grace and a heartbeat")
        .unwrap();
    assert!(ga.is_cancelled(), "a's closed guard ended before c led");
    // a stepped down on its own: the application never asked it to resign.
    assert_eq!(ga.stop_reason(), Some(StopReason::SteppedDown));
    assert_eq!(gc.ballot(), Ballot::new(2));
    assert!(drained.elapsed() <= config().handover_grace() + HEARTBEAT);
    a.shutdown().await;
    c.shutdown().await;
}
