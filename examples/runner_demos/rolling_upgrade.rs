//! The rolling upgrade demo, for any [`ElectionDatabase`] (docs/design.md §14): three instances of
//! version 1.4.0, all of one priority, are upgraded to 1.5.0 one at a time (each old instance
//! shuts down gracefully, then its 1.5.0 replacement starts), under a version policy:
//!
//! - `prefer-oldest`: the 1.4.0 instances keep the leadership until the last of them leaves;
//!   only then does it move, once, to a 1.5.0 instance (a new leader never writes state an old
//!   follower cannot read);
//! - `prefer-newest`: the first 1.5.0 instance to join takes the leadership at once, by a
//!   cooperative handover, without anyone touching priorities.
//!
//! Each leadership change is printed (version, ballot, reason), every millisecond at most one
//! instance may hold a valid guard, and the time nobody leads is added up.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fdb_leader_election::runner::{ElectionDatabase, Runner};
use fdb_leader_election::{CandidateId, ElectionConfig, Priority, Version, VersionPolicy};
use foundationdb_tuple::Subspace;

use crate::runner_demos::{DemoResult, label, say, wait_until};

/// What one upgrade showed.
#[derive(Debug)]
pub(crate) struct Upgrade {
    /// The version of each leader in turn, from the first.
    pub(crate) leader_versions: Vec<Version>,
    /// How many times the leadership changed hands.
    pub(crate) changes: u32,
    /// Millisecond samples with two valid guards.
    pub(crate) overlaps: u32,
    /// Milliseconds with nobody holding a valid guard, after the first leader.
    pub(crate) without_leader_ms: u64,
}

/// Upgrades three instances from 1.4.0 to 1.5.0 under `policy`.
pub(crate) async fn run<D: ElectionDatabase>(
    db: D,
    space: Subspace,
    config: ElectionConfig,
    policy: VersionPolicy,
) -> DemoResult<Upgrade> {
    let start = Instant::now();
    // README: upgrade-policy
    let config = config.to_builder().version_policy(policy).build()?;
    // README: end
    let step = config.heartbeat_interval().saturating_mul(4);
    let within = config.lease_duration().saturating_mul(4);
    println!("--- {policy}: three instances, 1.4.0 -> 1.5.0, one at a time");
    let start_instance = |name: &str, version: &str| -> DemoResult<Runner> {
        // README: upgrade-instance
        let runner = Runner::builder(db.clone(), space.clone())
            .label(name)
            .priority(Priority::new(1))
            .version(version) // "1.4.0", then "1.5.0": a semantic version
            .config(config.clone())
            .start()?;
        // README: end
        say(start, format!("{name} {version} started"));
        Ok(runner)
    };
    let versions: Arc<Mutex<Vec<(CandidateId, Version)>>> = Arc::new(Mutex::new(Vec::new()));
    let running: Arc<Mutex<Vec<Runner>>> = Arc::new(Mutex::new(Vec::new()));
    let add = |r: &Runner, version: &str| -> DemoResult {
        let id = r.id().ok_or("a runner without a candidate")?.clone();
        versions
            .lock()
            .map_err(|_| "poisoned")?
            .push((id, Version::parse(version)?));
        running.lock().map_err(|_| "poisoned")?.push(r.clone());
        Ok(())
    };
    let mut instances = Vec::new();
    for name in ["a", "b", "c"] {
        let r = start_instance(name, "1.4.0")?;
        add(&r, "1.4.0")?;
        instances.push(r);
    }
    wait_until("an instance leads", within, || {
        instances.iter().any(Runner::is_leader)
    })
    .await?;

    // Every millisecond: the leader now, overlaps, time without a leader, and every change.
    let overlaps = Arc::new(AtomicU32::new(0));
    let without = Arc::new(AtomicU64::new(0));
    let changes = Arc::new(AtomicU32::new(0));
    let leaders: Arc<Mutex<Vec<Version>>> = Arc::new(Mutex::new(Vec::new()));
    let watching = Arc::new(AtomicBool::new(true));
    let monitor = {
        let (running, versions) = (Arc::clone(&running), Arc::clone(&versions));
        let (overlaps, without, changes, leaders, watching) = (
            Arc::clone(&overlaps),
            Arc::clone(&without),
            Arc::clone(&changes),
            Arc::clone(&leaders),
            Arc::clone(&watching),
        );
        tokio::spawn(async move {
            let mut last: Option<(CandidateId, u64)> = None;
            let mut last_tick = Instant::now();
            while watching.load(Ordering::SeqCst) {
                let guards: Vec<_> = running
                    .lock()
                    .map(|rs| {
                        rs.iter()
                            .filter_map(|r| Some((r.id()?.clone(), r.leadership()?)))
                            .collect()
                    })
                    .unwrap_or_default();
                // Read one after the other: a guard read before the last one and still valid
                // was valid together with it.
                let earlier = guards.len().saturating_sub(1);
                if guards.iter().take(earlier).any(|(_, g)| g.is_valid()) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let now = guards
                    .iter()
                    .find(|(_, g)| g.is_valid())
                    .map(|(id, g)| (id.clone(), g.ballot().get()));
                let elapsed = last_tick.elapsed();
                last_tick = Instant::now();
                match &now {
                    None => {
                        without.fetch_add(
                            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                            Ordering::SeqCst,
                        );
                    }
                    Some((id, ballot)) if last.as_ref().map(|(l, _)| l) != Some(id) => {
                        let version = versions.lock().ok().and_then(|vs| {
                            vs.iter().find(|(i, _)| i == id).map(|(_, v)| v.clone())
                        });
                        if let Some(version) = version {
                            let reason = if last.is_none() {
                                "elected"
                            } else {
                                "handover"
                            };
                            if last.is_some() {
                                changes.fetch_add(1, Ordering::SeqCst);
                            }
                            say(
                                start,
                                format!(
                                    "leader now {} {version} (ballot {ballot}, {reason})",
                                    label(id)
                                ),
                            );
                            if let Ok(mut ls) = leaders.lock() {
                                ls.push(version);
                            }
                        }
                        last = now.clone();
                    }
                    Some(_) => {}
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    tokio::time::sleep(step).await;

    // The upgrade: each old instance shuts down gracefully (a leader hands over first), then
    // its replacement starts.
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        let old = instances[i].clone();
        let was_leader = old.is_leader();
        let report = old.shutdown().await;
        say(
            start,
            format!(
                "{name} 1.4.0 shut down{}",
                if was_leader && report.resigned.is_some() {
                    " (it led: handed over first)"
                } else {
                    ""
                }
            ),
        );
        if let Ok(mut rs) = running.lock() {
            rs.retain(|r| r.id() != old.id());
        }
        let new = start_instance(&format!("{name}2"), "1.5.0")?;
        add(&new, "1.5.0")?;
        instances[i] = new;
        tokio::time::sleep(step).await;
    }
    wait_until("a 1.5.0 instance leads", within, || {
        instances.iter().any(Runner::is_leader)
    })
    .await?;
    tokio::time::sleep(step).await;
    watching.store(false, Ordering::SeqCst);
    monitor.await?;
    for r in &instances {
        r.shutdown().await;
    }
    let upgrade = Upgrade {
        leader_versions: leaders.lock().map_err(|_| "poisoned")?.clone(),
        changes: changes.load(Ordering::SeqCst),
        overlaps: overlaps.load(Ordering::SeqCst),
        without_leader_ms: without.load(Ordering::SeqCst),
    };
    println!(
        "summary: policy={policy} overlaps={} leadership_changes={} without_leader_ms={} leaders={}",
        upgrade.overlaps,
        upgrade.changes,
        upgrade.without_leader_ms,
        upgrade
            .leader_versions
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    if upgrade.overlaps > 0 {
        return Err(format!("{} overlapping leaderships observed", upgrade.overlaps).into());
    }
    Ok(upgrade)
}
