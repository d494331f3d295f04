//! The MemDb demos (`examples/runner_demos/`) run to their end in the test suite: each fails
//! on what it claims (an overlap, a lost or out-of-order write, a missed takeover), so the
//! examples a user copies stay true. Real time, a few seconds each.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../examples/runner_demos/mod.rs"]
mod runner_demos;

#[path = "../examples/runner_demos/fenced_jobs.rs"]
mod fenced_jobs;
#[path = "../examples/runner_demos/job_scheduler.rs"]
mod job_scheduler;
#[path = "../examples/runner_demos/observer.rs"]
mod observer;
#[path = "../examples/runner_demos/rolling_deploy.rs"]
mod rolling_deploy;
#[path = "../examples/runner_demos/rolling_upgrade.rs"]
mod rolling_upgrade;
#[path = "../examples/runner_demos/sharded_scheduler.rs"]
mod sharded_scheduler;

use fdb_leader_election::MemDb;
use foundationdb_tuple::Subspace;

/// One demo at a time: they run in real time on short leases, and the machine may have two
/// cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn config() -> fdb_leader_election::ElectionConfig {
    runner_demos::init_logging();
    runner_demos::fast_config().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_scheduler_demo_runs_clean() {
    let _one = ONE_AT_A_TIME.lock().await;
    job_scheduler::run(MemDb::new(), Subspace::from("demo"), config())
        .await
        .unwrap();
}

/// Issue 39: a runner's guard fences leader-only writes in the caller's transaction, on every
/// store (`LeadershipGuard::fence`), with nothing else to build. The demo fails on a write
/// with a stale guard that is not refused, or on a job holding any but its leader's ballot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_jobs_demo_fences_from_the_guard_on_memdb() {
    let _one = ONE_AT_A_TIME.lock().await;
    fenced_jobs::run(MemDb::new(), Subspace::from("demo"), config())
        .await
        .unwrap();
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_jobs_demo_fences_from_the_guard_on_sqlite() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let db = fdb_leader_election::SqliteDb::open(dir.path().join("jobs.db")).unwrap();
    fenced_jobs::run(db, Subspace::from("demo"), config())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rolling_deploy_demo_runs_clean() {
    let _one = ONE_AT_A_TIME.lock().await;
    rolling_deploy::run(MemDb::new(), Subspace::from("demo"), config())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observer_demo_runs_clean() {
    let _one = ONE_AT_A_TIME.lock().await;
    observer::run(MemDb::new(), Subspace::from("demo"), config())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharded_scheduler_demo_runs_clean() {
    let _one = ONE_AT_A_TIME.lock().await;
    sharded_scheduler::run(MemDb::new(), Subspace::from("demo"), config())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rolling_upgrade_demo_keeps_the_policy_with_no_overlap() {
    use fdb_leader_election::{Version, VersionPolicy};
    let _one = ONE_AT_A_TIME.lock().await;
    let (old, new) = (Version::new(1, 4, 0), Version::new(1, 5, 0));
    // prefer-oldest: every leader is 1.4.0 until the last 1.4.0 instance left, then 1.5.0.
    let up = rolling_upgrade::run(
        MemDb::new(),
        Subspace::from("upgrade-oldest"),
        config(),
        VersionPolicy::PreferOldest,
    )
    .await
    .unwrap();
    let first_new = up.leader_versions.iter().position(|v| *v == new).unwrap();
    assert!(
        up.leader_versions[..first_new].iter().all(|v| *v == old),
        "{up:?}"
    );
    assert!(
        up.leader_versions[first_new..].iter().all(|v| *v == new),
        "{up:?}"
    );
    assert_eq!(up.overlaps, 0);
    // prefer-newest: once a 1.5.0 instance leads, no 1.4.0 one ever leads again.
    let up = rolling_upgrade::run(
        MemDb::new(),
        Subspace::from("upgrade-newest"),
        config(),
        VersionPolicy::PreferNewest,
    )
    .await
    .unwrap();
    let first_new = up.leader_versions.iter().position(|v| *v == new).unwrap();
    assert!(
        up.leader_versions[first_new..].iter().all(|v| *v == new),
        "{up:?}"
    );
    assert_eq!(up.overlaps, 0);
    // Graceful restarts and handovers: no lease (300 ms) is ever waited for.
    assert!(
        up.without_leader_ms < 300,
        "{} ms without a leader: a lease was waited for",
        up.without_leader_ms
    );
}
