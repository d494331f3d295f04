//! The rolling deploy demo, for any [`ElectionDatabase`]: three old instances (priority 1)
//! run; new instances (priority 2) start one by one. Leadership migrates to the first new
//! instance cooperatively — the old leader finishes its in-flight job, steps down, and
//! reserves the vacancy — with no overlap; then the old instances shut down gracefully.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fdb_leader_election::runner::{ElectionDatabase, Runner};
use fdb_leader_election::{ElectionConfig, Priority};
use foundationdb_tuple::Subspace;

use crate::runner_demos::{DemoResult, label, say, wait_until};

/// The application of one instance: while it leads, it runs 150 ms jobs under the guard, one
/// after the other; when asked to hand over, it starts no new job.
async fn app(runner: Runner, jobs_done: Arc<AtomicU32>, start: Instant) {
    let who = runner.id().map(label).unwrap_or("?").to_owned();
    while let Some(guard) = runner.elected().await {
        say(start, format!("{who} leads (ballot {})", guard.ballot()));
        let (asked, name) = (guard.clone(), who.clone());
        tokio::spawn(async move {
            asked.handover_requested().await;
            if !asked.is_cancelled() {
                say(
                    start,
                    format!(
                        "{name} was asked to hand over: finishing its in-flight job, starting no new one"
                    ),
                );
            }
        });
        while guard.accepts_work() {
            let job = guard.spawn(tokio::time::sleep(Duration::from_millis(150)));
            if let Ok(Some(())) = job.await {
                jobs_done.fetch_add(1, Ordering::SeqCst);
            }
        }
        guard.cancelled().await;
        say(
            start,
            format!("{who} stopped leading ({:?})", guard.stop_reason()),
        );
    }
}

pub(crate) async fn run<D: ElectionDatabase>(
    db: D,
    space: Subspace,
    config: ElectionConfig,
) -> DemoResult {
    let start = Instant::now();
    // The demo's own pace: four heartbeats between steps.
    let step = config.heartbeat_interval().saturating_mul(4);
    let within = config.lease_duration().saturating_mul(4);
    let jobs_done = Arc::new(AtomicU32::new(0));
    let start_instance = |name: &str, priority: i32| -> DemoResult<Runner> {
        let runner = Runner::builder(db.clone(), space.clone())
            .label(name)
            .priority(Priority::new(priority))
            .payload(format!("{name}.internal:8080"))
            .config(config.clone())
            .start()?;
        tokio::spawn(app(runner.clone(), Arc::clone(&jobs_done), start));
        say(start, format!("{name} started (priority {priority})"));
        Ok(runner)
    };

    let old: Vec<Runner> = ["v1-a", "v1-b", "v1-c"]
        .into_iter()
        .map(|n| start_instance(n, 1))
        .collect::<DemoResult<_>>()?;
    // Whichever old instance wins first: on MemDb the first started, on a real cluster any.
    wait_until("an old instance leads", within, || {
        old.iter().any(Runner::is_leader)
    })
    .await?;

    // Every millisecond: at most one instance may hold a valid guard. The instances are read
    // one after the other, so a handover between two reads shows two guards: the ones read
    // before the last are checked again, and one still valid was valid together with it.
    let all: Arc<std::sync::Mutex<Vec<Runner>>> = Arc::new(std::sync::Mutex::new(old.clone()));
    let overlaps = Arc::new(AtomicU32::new(0));
    let watching = Arc::new(AtomicBool::new(true));
    let monitor = {
        let (all, overlaps, watching) = (
            Arc::clone(&all),
            Arc::clone(&overlaps),
            Arc::clone(&watching),
        );
        tokio::spawn(async move {
            while watching.load(Ordering::SeqCst) {
                let guards: Vec<_> = all
                    .lock()
                    .map(|rs| rs.iter().filter_map(Runner::leadership).collect())
                    .unwrap_or_default();
                let earlier = guards.len().saturating_sub(1);
                if guards.iter().take(earlier).any(|g| g.is_valid()) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    tokio::time::sleep(step).await;

    // The deploy: new instances one by one.
    let mut new = Vec::new();
    for name in ["v2-a", "v2-b", "v2-c"] {
        let runner = start_instance(name, 2)?;
        if let Ok(mut rs) = all.lock() {
            rs.push(runner.clone());
        }
        new.push(runner);
        tokio::time::sleep(step).await;
    }
    wait_until("a new instance leads", within, || {
        new.iter().any(Runner::is_leader)
    })
    .await?;
    let leader = new
        .iter()
        .find(|r| r.is_leader())
        .ok_or("leadership did not move to a new instance")?;
    let leader_name = leader.id().map(label).unwrap_or("?").to_owned();
    let ballot = leader.leadership().map(|g| g.ballot()).ok_or("no guard")?;

    // The old instances shut down gracefully: they do not lead, so each just unregisters.
    for r in &old {
        let report = r.shutdown().await;
        let name = r.id().map(label).unwrap_or("?");
        say(
            start,
            format!(
                "{name} shut down (unregistered: {}, resigned: {})",
                report.unregistered,
                report.resigned.is_some()
            ),
        );
        if !report.unregistered {
            return Err(format!("{name} did not unregister: {:?}", report.error).into());
        }
    }
    tokio::time::sleep(step).await;
    if !leader.is_leader() {
        return Err("the new leader lost its leadership".into());
    }
    watching.store(false, Ordering::SeqCst);
    monitor.await?;
    let live = leader.election().clone();
    let listed = db
        .transact(Duration::from_secs(1), |txn| {
            let live = live.clone();
            async move { live.list_candidates(&txn).await }
        })
        .await?;
    say(
        start,
        "deploy done; shutting the new instances down too (each hands over to the next)",
    );
    for r in &new {
        r.shutdown().await;
    }
    let overlaps = overlaps.load(Ordering::SeqCst);
    if overlaps > 0 {
        return Err(format!("{overlaps} overlapping leaderships observed").into());
    }
    println!(
        "summary: leader={leader_name} ballot={ballot} registered_after_deploy={} jobs_done={} overlaps={overlaps}",
        listed.len(),
        jobs_done.load(Ordering::SeqCst)
    );
    Ok(())
}
