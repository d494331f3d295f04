//! The runner's explicit state and health check, in tokio's paused time: the check fails
//! only for a wedged leader or a dead runner task, never for a follower, an observer, a
//! failing database or a clean shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::runner_support::*;
use fdb_leader_election::runner::{HealthProblem, Runner, RunnerState};
use fdb_leader_election::shard::ShardedRunner;
use fdb_leader_election::{Clock, LocalInstant, TokioClock};

/// Tokio's clock plus a jump the test controls: a jump forward looks, to the runner, exactly
/// like its task having been stalled for that long.
#[derive(Debug, Default)]
struct JumpClock {
    base: TokioClock,
    extra_nanos: AtomicU64,
}

impl JumpClock {
    fn jump(&self, d: Duration) {
        self.extra_nanos
            .fetch_add(u64::try_from(d.as_nanos()).unwrap(), Ordering::SeqCst);
    }
}

impl Clock for JumpClock {
    fn now(&self) -> LocalInstant {
        self.base.now().saturating_add(Duration::from_nanos(
            self.extra_nanos.load(Ordering::SeqCst),
        ))
    }
}

#[tokio::test(start_paused = true)]
async fn states_follow_the_runner_through_its_life() {
    let (db, faults) = faulty_db();
    let a = builder(db.clone(), "a", 1).start().unwrap();
    let mut states = a.state_updates();
    assert_eq!(*states.borrow_and_update(), RunnerState::NotParticipating);
    a.elected().await.unwrap();
    assert_eq!(a.state(), RunnerState::Leader);
    let b = builder(db.clone(), "b", 1).start().unwrap();
    wait_until("b follows", HEARTBEAT, || {
        b.state() == RunnerState::Follower
    })
    .await;
    assert!(a.health().is_ok() && b.health().is_ok());

    // The database goes away: the leader stays Leader while its lease is valid, then both
    // report Error, and both stay healthy.
    faults.set_unavailable(true);
    tokio::time::sleep(HEARTBEAT * 2).await;
    assert_eq!(a.state(), RunnerState::Leader);
    assert_eq!(b.state(), RunnerState::Error);
    wait_until("a's lease ends", LEASE, || a.state() == RunnerState::Error).await;
    tokio::time::sleep(LEASE * 5).await;
    for r in [&a, &b] {
        assert_eq!(r.state(), RunnerState::Error);
        assert!(r.health().is_ok(), "a failing follower is not unhealthy");
    }
    faults.set_unavailable(false);
    wait_until("a leader again", LEASE * 3, || {
        a.is_leader() || b.is_leader()
    })
    .await;
    tokio::time::sleep(HEARTBEAT * 2).await;
    let states_now = [a.state(), b.state()];
    assert!(
        states_now.contains(&RunnerState::Leader) && states_now.contains(&RunnerState::Follower)
    );

    a.shutdown().await;
    assert_eq!(a.state(), RunnerState::Stopped);
    assert!(a.health().is_ok(), "a clean shutdown is healthy");
    // The state channel saw every stage, in order, without repeats.
    let mut seen = vec![RunnerState::NotParticipating];
    while states.has_changed().unwrap_or(false) || seen.last() != Some(&RunnerState::Stopped) {
        states.changed().await.unwrap();
        seen.push(*states.borrow_and_update());
    }
    assert!(seen.windows(2).all(|w| w[0] != w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&RunnerState::Stopped));
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_observer_is_not_participating_and_healthy() {
    let db = db();
    let observer = Runner::observer(db.clone(), subspace()).start().unwrap();
    tokio::time::sleep(HEARTBEAT).await;
    assert_eq!(observer.state(), RunnerState::NotParticipating);
    assert!(observer.health().is_ok());
    assert!(!observer.is_leader());
    observer.shutdown().await;
    assert_eq!(observer.state(), RunnerState::Stopped);
}

#[tokio::test(start_paused = true)]
async fn a_dead_runner_task_fails_the_check() {
    let db = db();
    let a = builder(db.clone(), "a", 1).start().unwrap();
    let b = builder(db.clone(), "b", 1).start().unwrap();
    a.elected().await.unwrap();
    tokio::time::sleep(HEARTBEAT).await;
    b.abort();
    a.abort();
    tokio::task::yield_now().await;
    for r in [&a, &b] {
        assert_eq!(r.health(), Err(HealthProblem::RunnerDied));
        assert_eq!(r.state(), RunnerState::Stopped);
        assert!(!r.is_leader());
        let report = r.shutdown().await;
        assert!(!report.clean && !report.unregistered);
    }
}

#[tokio::test(start_paused = true)]
async fn a_stalled_leader_is_wedged_until_its_loop_runs_again() {
    let db = db();
    let clock = Arc::new(JumpClock::default());
    let a = builder(db.clone(), "a", 1)
        .clock(clock.clone())
        .start()
        .unwrap();
    let guard = a.elected().await.unwrap();
    tokio::time::sleep(HEARTBEAT * 2).await;
    assert!(a.health().is_ok());

    // The task stalls for two leases (seen through the clock): the process still says it
    // leads, but has not renewed within the lease.
    clock.jump(LEASE * 2);
    assert_wedged(a.health());
    // The guard does not wait for the loop: it is invalid at once.
    assert!(!guard.is_valid());
    // The loop runs again: the leadership ends (lease expired) and the check passes.
    wait_until("the loop notices", HEARTBEAT, || a.health().is_ok()).await;
    assert!(guard.is_cancelled());
    a.shutdown().await;
}

/// `health` says the process is wedged: no renewal for two leases at least.
#[track_caller]
fn assert_wedged(health: Result<(), HealthProblem>) {
    match health {
        Err(HealthProblem::Wedged {
            since_renewal,
            lease,
        }) => {
            assert_eq!(lease, LEASE);
            assert!(since_renewal >= LEASE * 2);
        }
        other => panic!("expected a wedge, got {other:?}"),
    }
}

fn sharded(db: &fdb_leader_election::MemDb, clock: Arc<JumpClock>) -> ShardedRunner {
    ShardedRunner::builder(db.clone(), subspace())
        .shards(4)
        .label("member")
        .config(config())
        .clock(clock)
        .start()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_stalled_sharded_member_is_wedged_until_its_loop_runs_again() {
    let db = db();
    let clock = Arc::new(JumpClock::default());
    let member = sharded(&db, Arc::clone(&clock));
    wait_until("the member owns its shards", LEASE * 4, || {
        member.owned().len() == 4
    })
    .await;
    assert_eq!(member.health(), Ok(()));
    let guards = member.owned();
    clock.jump(LEASE * 2);
    assert_wedged(member.health());
    // Its guards do not wait for the loop: invalid at once.
    assert!(guards.values().all(|g| !g.is_valid()));
    wait_until("the loop runs again", HEARTBEAT * 3, || {
        member.health().is_ok()
    })
    .await;
    member.shutdown().await;
    assert_eq!(member.health(), Ok(()), "a clean shutdown is healthy");
}

#[tokio::test(start_paused = true)]
async fn a_sharded_member_that_owns_nothing_is_healthy_and_an_aborted_one_is_dead() {
    let db = db();
    let clock = Arc::new(JumpClock::default());
    let member = sharded(&db, Arc::clone(&clock));
    // Owning nothing yet, a stall is no wedge.
    clock.jump(LEASE * 2);
    assert_eq!(member.health(), Ok(()));
    wait_until("the member owns its shards", LEASE * 4, || {
        member.owned().len() == 4
    })
    .await;
    member.abort();
    tokio::task::yield_now().await;
    assert_eq!(member.health(), Err(HealthProblem::RunnerDied));
}
