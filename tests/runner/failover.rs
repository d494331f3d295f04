//! Runner failover on MemDb, in tokio's paused time: one leader at a time, crash failover
//! within lease + heartbeat, and the guard cancelled (even while the database is unreachable)
//! before any successor becomes valid.

use std::time::Duration;

use crate::runner_support::*;
use fdb_leader_election::runner::{RunnerState, StopReason};
use fdb_leader_election::{Ballot, ResignOutcome};
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn three_candidates_elect_one_leader_that_everyone_knows() {
    let db = db();
    let runners: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|n| builder(db.clone(), n, 1).start().unwrap())
        .collect();
    let refs: Vec<_> = runners.iter().collect();
    wait_until("a leader", LEASE, || sole_leader(&refs).is_some()).await;
    // Let everyone cycle once more, checking exclusion at every millisecond.
    let start = Instant::now();
    while start.elapsed() < HEARTBEAT * 3 {
        sole_leader(&refs);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let leader = sole_leader(&refs).unwrap();
    let guard = leader.leadership().unwrap();
    assert_eq!(guard.ballot(), Ballot::new(1), "one election, one ballot");
    let id = leader.id().unwrap().clone();
    for r in &runners {
        let seen = r.leader().expect("every runner knows the leader");
        assert_eq!(seen.id, id);
        assert_eq!(seen.ballot, Ballot::new(1));
        assert_eq!(
            seen.payload_str(),
            Some(format!("{}:7000", id.as_str().rsplit_once('-').unwrap().0).as_str())
        );
        let expected = if r.id() == Some(&id) {
            RunnerState::Leader
        } else {
            RunnerState::Follower
        };
        assert_eq!(r.state(), expected);
        assert!(r.health().is_ok());
    }
    for r in &runners {
        r.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_crashed_leader_is_replaced_within_lease_plus_heartbeat() {
    let db = db();
    let a = builder(db.clone(), "a", 1).start().unwrap();
    let ga = a.elected().await.unwrap();
    let b = builder(db.clone(), "b", 1).start().unwrap();
    let c = builder(db.clone(), "c", 1).start().unwrap();
    // Run a while so the followers are in their steady state.
    tokio::time::sleep(HEARTBEAT * 5).await;
    assert!(a.is_leader());

    let crashed_at = Instant::now();
    a.abort();
    let failover = wait_until("a successor", LEASE * 3, || b.is_leader() || c.is_leader()).await;
    assert!(
        failover <= LEASE + HEARTBEAT,
        "failover took {failover:?}, more than lease + heartbeat"
    );
    // Not before the lease: the followers wait a full lease of unchanged observation.
    assert!(failover >= LEASE / 2, "took over after only {failover:?}");
    let successor = if b.is_leader() { &b } else { &c };
    assert_eq!(successor.leadership().unwrap().ballot(), Ballot::new(2));
    assert!(ga.is_cancelled() && !ga.is_valid());
    assert_eq!(ga.stop_reason(), Some(StopReason::RunnerStopped));
    assert!(crashed_at.elapsed() >= failover);
    b.shutdown().await;
    c.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_leader_stops_at_its_local_deadline_before_anyone_takes_over() {
    let db = db();
    let link = Cuttable::new(&db);
    let (a, ra, ga) = recorded_leader(link.clone(), "a", 1).await;
    let rb = Recorder::default();
    let b = builder(db.clone(), "b", 1)
        .callbacks(rb.clone())
        .start()
        .unwrap();
    tokio::time::sleep(HEARTBEAT * 4).await;
    assert!(ga.is_valid());

    link.set_cut(true);
    let cut_at = Instant::now();
    let cancelled = ga.cancelled();
    // The guard is cancelled on its own, while every renewal fails.
    tokio::time::timeout(LEASE, cancelled)
        .await
        .expect("the guard was not cancelled by its deadline");
    let stopped_after = cut_at.elapsed();
    assert!(!ga.is_valid());
    assert_eq!(ga.stop_reason(), Some(StopReason::LeaseExpired));
    assert!(
        !b.is_leader(),
        "nobody may lead while the old leader's lease runs"
    );
    assert!(stopped_after < LEASE);

    let gb = b.elected().await.unwrap();
    let elected_after = cut_at.elapsed();
    assert!(
        elected_after > stopped_after,
        "the successor became valid before the guard was cancelled"
    );
    assert_eq!(gb.ballot(), Ballot::new(2));
    // a stays a (failing) candidate and is healthy: it does not lead.
    assert!(!a.is_leader());
    assert_eq!(a.state(), RunnerState::Error);
    assert!(a.health().is_ok());
    // Exactly one stop, for the lease that expired.
    assert_eq!(
        ra.stopped(),
        vec![(Ballot::new(1), StopReason::LeaseExpired)]
    );
    assert_eq!(rb.elected(), vec![Ballot::new(2)]);

    // The partition heals: a follows b and does not disturb it.
    link.set_cut(false);
    tokio::time::sleep(LEASE * 2).await;
    assert!(gb.is_valid());
    assert_eq!(a.state(), RunnerState::Follower);
    assert_eq!(a.leader().map(|l| l.ballot), Some(Ballot::new(2)));
    assert_eq!(ra.elected(), vec![Ballot::new(1)]);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_database_going_away_and_back_never_ends_participation() {
    let db = db();
    let faults = fdb_leader_election::ScriptedFaults::new();
    db.set_fault_injector(std::sync::Arc::new(faults.clone()));
    let a = builder(db.clone(), "a", 1).start().unwrap();
    let g1 = a.elected().await.unwrap();
    faults.set_unavailable(true);
    tokio::time::sleep(LEASE * 10).await;
    assert!(g1.is_cancelled());
    assert_eq!(a.state(), RunnerState::Error);
    assert!(a.health().is_ok());
    faults.set_unavailable(false);
    let g2 = tokio::time::timeout(LEASE * 3, a.elected())
        .await
        .unwrap()
        .unwrap();
    assert!(g2.ballot() > g1.ballot(), "a new term after the lapse");
    assert_eq!(a.state(), RunnerState::Leader);
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_resignation_rejected_because_the_lease_ran_out_while_waiting_leaves_the_runner_running()
{
    // A busy leader asked to resign waits for its guarded work (within the grace); its
    // lease runs out meanwhile (the store is unreachable), so the resignation is rejected.
    // The runner must go on as a candidate, not fall silent.
    let db = db();
    let link = Cuttable::new(&db);
    let cfg = config()
        .to_builder()
        .handover_grace(Duration::from_secs(30))
        .build()
        .unwrap();
    let a = builder(link.clone(), "a", 1).config(cfg).start().unwrap();
    let ga = a.elected().await.unwrap();
    let _task = ga.spawn(async {
        tokio::time::sleep(Duration::from_secs(600)).await;
    });
    link.set_cut(true);
    let resign = tokio::spawn({
        let a = a.clone();
        async move { a.resign().await }
    });
    tokio::time::timeout(LEASE, ga.cancelled())
        .await
        .expect("the guard was not cancelled by its deadline");
    let outcome = resign.await.unwrap().unwrap();
    assert!(
        matches!(outcome, ResignOutcome::Rejected(_)),
        "the resignation of a leadership that ended is rejected: {outcome:?}"
    );
    link.set_cut(false);
    let again = tokio::time::timeout(LEASE * 4, a.elected())
        .await
        .expect("the runner fell silent after the rejected resignation")
        .unwrap();
    assert!(again.ballot() > ga.ballot());
    assert_ne!(a.state(), RunnerState::Stopped);
    a.shutdown().await;
}

/// Makes the reply of the next commit that writes the leader record take `delay` once
/// armed, after the commit applied; records when that commit was processed.
#[derive(Debug, Default)]
struct SlowLeaderReply {
    armed: std::sync::atomic::AtomicBool,
    at: std::sync::Mutex<Option<Instant>>,
}

impl fdb_leader_election::FaultInjector for SlowLeaderReply {
    fn on_commit(
        &self,
        ctx: &fdb_leader_election::memdb::CommitContext<'_>,
    ) -> fdb_leader_election::memdb::CommitDecision {
        use std::sync::atomic::Ordering;
        let decision = fdb_leader_election::memdb::CommitDecision::proceed();
        if ctx.written_keys.contains(&leader_key()) && self.armed.swap(false, Ordering::SeqCst) {
            *self.at.lock().unwrap() = Some(Instant::now());
            return decision.with_reply_latency(Duration::from_secs(2));
        }
        decision
    }
}

/// docs/design.md §10.3: the guard never outlives the lease any commit of its candidate may have
/// written, however late the reply. An operator shortens the lease from 30 s to 600 ms; the
/// leader's next renewal writes the shorter lease, applies at once, and its reply takes 2 s
/// (well within the old configuration's 4 s attempts). The belief is capped before the commit
/// at the attempt's start + 588 ms; the guard, and the work it runs, must end then, not when
/// the reply comes: a follower with the new lease may take over from 600 ms on. (Before the
/// fix the guard's timer moved only when the reply came: its work ran on for 1.4 s more.)
#[tokio::test(start_paused = true)]
async fn a_shortened_lease_with_a_slow_reply_ends_the_guard_at_the_shorter_deadline() {
    use fdb_leader_election::runner::ElectionDatabase;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    let old = timings(30_000, 5000, 60_000, 4000);
    let short = timings(600, 200, 1200, 60);
    let db = db();
    let slow = Arc::new(SlowLeaderReply::default());
    db.set_fault_injector(slow.clone());
    let a = builder(db.clone(), "a", 1).config(old).start().unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), a.elected())
        .await
        .unwrap()
        .unwrap();
    // Guarded work: notes (in ms since `t0`) every millisecond it runs.
    let t0 = Instant::now();
    let last_ran = Arc::new(AtomicU64::new(0));
    let ran = Arc::clone(&last_ran);
    let work = guard.spawn(async move {
        loop {
            ran.store(
                u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
                Ordering::SeqCst,
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    // The operator shortens the lease; the leader's next renewal writes it, slowly answered.
    let election = a.election().clone();
    db.transact(Duration::from_secs(1), |txn| {
        let (e, short) = (election.clone(), short.clone());
        async move { e.write_config(&txn, &short).await }
    })
    .await
    .unwrap();
    slow.armed.store(true, Ordering::SeqCst);
    let ended = tokio::time::timeout(Duration::from_secs(20), guard.cancelled()).await;
    assert!(ended.is_ok(), "the guard was never cancelled");
    let ended_at = t0.elapsed();
    let committed = slow.at.lock().unwrap().expect("the renewal was slowed");
    let committed = committed.duration_since(t0);
    // The attempt started at or before the commit: the capped belief ends by commit + 588 ms.
    let capped = committed + short.local_validity(short.lease_duration());
    assert!(
        ended_at <= capped + Duration::from_millis(1),
        "guard cancelled {:?} after the capped deadline (commit at {committed:?})",
        ended_at.saturating_sub(capped)
    );
    assert!(
        work.await.unwrap().is_none(),
        "the guarded work was cancelled"
    );
    let last = Duration::from_millis(last_ran.load(Ordering::SeqCst));
    assert!(
        last <= capped + Duration::from_millis(1),
        "guarded work ran until {last:?}, past the capped deadline {capped:?}"
    );
    a.shutdown().await;
}
