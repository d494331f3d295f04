//! Rolling upgrades (docs/design.md §14, issue 33 item 5), measured through the public API on any
//! [`ElectionDatabase`]: on MemDb in every run, and on the FoundationDB cluster in the cluster
//! mode, with the same code and schedule.
//!
//! One trial: `N` instances (`Runner`s of one priority, lease 300 ms, heartbeat 100 ms) of
//! version 1.4.0 elect a leader; then each instance in turn restarts gracefully as 1.5.0
//! (`Runner::shutdown`, which hands the leadership over if it leads, then a new `Runner` with
//! the same label and `.version("1.5.0")`), the next restart coming once the new instance has
//! registered and five heartbeats have passed (a rollout's readiness delay). The restart order
//! is one of two: the instance that led when the rollout began restarts first
//! (`leader_first`) or last (`leader_last`); the others restart from the last started to the
//! first (a StatefulSet's rolling update order, highest ordinal first).
//!
//! Each runner's leaderships are stamped where they happen: a task per runner awaits its
//! guard (`Runner::elected`) and the guard's end (`LeadershipGuard::cancelled`). The
//! **leadership changes** of a trial are the ballots taken during the rollout (each
//! acquisition takes the next ballot, and a restart is a new candidate). From the spans: the
//! **time without a leader per change** (from the end of one leadership to
//! the start of the next; a lease waited for would show as about 300 ms), and overlaps (a
//! leadership whose guard was valid together with another runner's: must be 0).
//!
//! The **fewest changes the restart order allows** (`fewest`), whatever the ranking: the
//! leadership must end on a 1.5.0 instance. When the old leader restarts last, the first
//! 1.5.0 instances are live by then, so one change can do (1). When it restarts first, no
//! 1.5.0 instance is live yet: the leadership must go to another 1.4.0 instance, and move
//! again once a 1.5.0 one is there (2). Each policy is measured against that.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fdb_leader_election::runner::{Runner, RunnerState};
use fdb_leader_election::{ElectionConfig, ElectionDatabase, Priority, VersionPolicy};
use foundationdb_tuple::Subspace;
use serde::Serialize;

use crate::{Res, median};

/// The version every instance runs before the rollout.
const OLD: &str = "1.4.0";
/// The version it restarts with.
const NEW: &str = "1.5.0";
/// The instance counts.
const INSTANCES: [usize; 2] = [3, 5];
/// The lease of every trial (heartbeat a third of it).
const LEASE: Duration = Duration::from_millis(300);
/// Heartbeats between a new instance's registration and the next restart.
const SETTLE_HEARTBEATS: u32 = 5;
/// How long a trial waits for a registration or a leader before it calls the trial failed:
/// far beyond anything it measures.
const LIMIT: Duration = Duration::from_secs(20);

/// When the instance that led at the start restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// Before every other instance.
    LeaderFirst,
    /// After every other instance.
    LeaderLast,
}

impl Order {
    fn as_str(self) -> &'static str {
        match self {
            Order::LeaderFirst => "leader_first",
            Order::LeaderLast => "leader_last",
        }
    }

    /// The fewest leadership changes a rollout in this order allows (see the module's
    /// documentation).
    fn fewest(self) -> u32 {
        match self {
            Order::LeaderFirst => 2,
            Order::LeaderLast => 1,
        }
    }
}

/// The figures of one policy, instance count and order, over its trials.
#[derive(Serialize, Clone, Debug)]
pub(crate) struct Row {
    /// The version policy.
    pub(crate) policy: &'static str,
    /// Instances upgraded.
    pub(crate) instances: usize,
    /// `leader_first` or `leader_last`.
    pub(crate) order: &'static str,
    /// Trials (each a whole rollout on a fresh election).
    pub(crate) trials: u32,
    /// Leadership changes per rollout: the fewest and the most over the trials.
    pub(crate) changes_min: u32,
    pub(crate) changes_max: u32,
    /// The fewest the restart order allows.
    pub(crate) fewest: u32,
    /// Time without a leader per change, ms: median and largest over every change.
    pub(crate) without_leader_ms_median: f64,
    pub(crate) without_leader_ms_max: f64,
    /// Leaderships whose guard was valid together with another runner's (must be 0).
    pub(crate) overlaps: u32,
    /// Changes after at least half a lease without a leader: a lease waited for, which no
    /// graceful restart needs (a leader that missed its renewals on a loaded host).
    pub(crate) lease_waits: u32,
    /// The versions of the successive leaders of the first trial.
    pub(crate) leaders: String,
}

/// The rolling-upgrade figures (`upgrade_*` keys of the JSON line; the same keys in `fdb`).
#[derive(Serialize, Clone, Debug, Default)]
pub(crate) struct UpgradeFigures {
    /// Lease of every trial, ms (heartbeat a third of it).
    pub(crate) upgrade_lease_ms: f64,
    /// One row per policy, instance count and restart order.
    pub(crate) upgrade_rollouts: Vec<Row>,
}

/// Trials per row in both modes.
pub(crate) const TRIALS: u32 = 3;

/// Measures every row on stores from `fresh`, under `root` (a subspace per trial).
pub(crate) async fn measure<D: ElectionDatabase>(
    store: &str,
    fresh: impl Fn() -> D,
    root: &Subspace,
    trials: u32,
) -> Res<UpgradeFigures> {
    let started = Instant::now();
    let base = ElectionConfig::with_lease_duration(LEASE)?;
    let mut f = UpgradeFigures {
        upgrade_lease_ms: LEASE.as_secs_f64() * 1e3,
        upgrade_rollouts: Vec::new(),
    };
    for policy in VersionPolicy::ALL {
        let cfg = base.to_builder().version_policy(policy).build()?;
        for n in INSTANCES {
            for order in [Order::LeaderFirst, Order::LeaderLast] {
                let mut seen = Vec::new();
                for t in 0..trials {
                    let space = root.subspace(&(policy.as_str(), n, order.as_str(), t));
                    seen.push(trial(fresh(), space, &cfg, n, order).await?);
                }
                f.upgrade_rollouts.push(row(policy, n, order, &seen));
            }
        }
        eprintln!(
            "perf_report: {store} rolling upgrades, {policy}: {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(f)
}

/// What one rollout showed.
#[derive(Debug)]
struct Trial {
    changes: u32,
    gaps_ms: Vec<f64>,
    overlaps: u32,
    leaders: Vec<&'static str>,
}

fn row(policy: VersionPolicy, n: usize, order: Order, seen: &[Trial]) -> Row {
    let mut gaps: Vec<f64> = seen.iter().flat_map(|t| t.gaps_ms.clone()).collect();
    Row {
        policy: policy.as_str(),
        instances: n,
        order: order.as_str(),
        trials: u32::try_from(seen.len()).unwrap_or(u32::MAX),
        changes_min: seen.iter().map(|t| t.changes).min().unwrap_or(0),
        changes_max: seen.iter().map(|t| t.changes).max().unwrap_or(0),
        fewest: order.fewest(),
        without_leader_ms_max: gaps.iter().copied().fold(0.0, f64::max),
        without_leader_ms_median: median(&mut gaps),
        overlaps: seen.iter().map(|t| t.overlaps).sum(),
        lease_waits: seen
            .iter()
            .flat_map(|t| t.gaps_ms.iter())
            .filter(|g| **g >= LEASE.as_secs_f64() * 1e3 / 2.0)
            .count()
            .try_into()
            .unwrap_or(u32::MAX),
        leaders: seen
            .first()
            .map(|t| t.leaders.join(","))
            .unwrap_or_default(),
    }
}

/// One leadership: who, which version, from when to when.
#[derive(Clone, Debug)]
struct Span {
    runner: usize,
    version: &'static str,
    start: Instant,
    end: Option<Instant>,
}

/// What the stamping tasks of one trial record.
#[derive(Default)]
struct Seen {
    /// Every leadership, stamped.
    spans: Mutex<Vec<Span>>,
    /// Every runner started, to check at each new leadership.
    runners: Mutex<Vec<Runner>>,
    /// New leaderships that began while another runner's guard was still valid.
    overlaps: AtomicU32,
}

type Spans = Arc<Seen>;

/// Starts instance `slot` (a new runner: a restart is a new candidate) of `version`, and a
/// task stamping its leaderships into `spans` (under the number `runner`). When a leadership
/// begins, the task checks every other runner's guard: one still valid, while this one is
/// valid before and after the check, is two leaders at once (a stamp order cannot tell that:
/// tasks wake late).
fn start<D: ElectionDatabase>(
    db: &D,
    space: &Subspace,
    cfg: &ElectionConfig,
    slot: usize,
    version: &'static str,
    runner: usize,
    spans: &Spans,
) -> Res<(Runner, tokio::task::JoinHandle<()>)> {
    let r = Runner::builder(db.clone(), space.clone())
        .label(format!("i{slot}"))
        .priority(Priority::new(1))
        .version(version)
        .config(cfg.clone())
        .start()?;
    spans
        .runners
        .lock()
        .map_err(|_| "poisoned")?
        .push(r.clone());
    let (watched, spans) = (r.clone(), Arc::clone(spans));
    let task = tokio::spawn(async move {
        while let Some(guard) = watched.elected().await {
            let at = Instant::now();
            let others_valid = spans.runners.lock().is_ok_and(|rs| {
                rs.iter()
                    .any(|o| o.id() != watched.id() && o.leadership().is_some_and(|g| g.is_valid()))
            });
            if others_valid && guard.is_valid() {
                spans.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            let index = spans
                .spans
                .lock()
                .map(|mut s| {
                    s.push(Span {
                        runner,
                        version,
                        start: at,
                        end: None,
                    });
                    s.len() - 1
                })
                .ok();
            guard.cancelled().await;
            let ended = Instant::now();
            if let Some(i) = index {
                if let Some(span) = spans.spans.lock().ok().as_mut().and_then(|s| s.get_mut(i)) {
                    span.end = Some(ended);
                }
            }
        }
    });
    Ok((r, task))
}

/// Waits until `ok` holds, at most [`LIMIT`].
async fn until(what: &str, ok: impl Fn() -> bool) -> Res<()> {
    let started = Instant::now();
    while !ok() {
        if started.elapsed() > LIMIT {
            return Err(format!("rolling upgrade: {what} not within {LIMIT:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// The ballot of the leadership `r` sees.
fn ballot(r: &Runner) -> Option<u64> {
    r.leader().map(|l| l.ballot.get())
}

fn registered(r: &Runner) -> bool {
    matches!(r.state(), RunnerState::Follower | RunnerState::Leader)
}

/// One rollout of `n` instances from [`OLD`] to [`NEW`] in `order`, on a fresh election.
async fn trial<D: ElectionDatabase>(
    db: D,
    space: Subspace,
    cfg: &ElectionConfig,
    n: usize,
    order: Order,
) -> Res<Trial> {
    let settle = cfg.heartbeat_interval() * SETTLE_HEARTBEATS;
    let spans: Spans = Arc::default();
    let mut tasks = Vec::new();
    let mut slots = Vec::with_capacity(n);
    for i in 0..n {
        let (r, task) = start(&db, &space, cfg, i, OLD, tasks.len(), &spans)?;
        slots.push(r);
        tasks.push(task);
    }
    until("every instance registered and one leading", || {
        slots.iter().all(registered) && slots.iter().any(Runner::is_leader)
    })
    .await?;
    tokio::time::sleep(settle).await;
    // A leader that missed its renewals (a loaded host) may be between two leaderships.
    until("one leading before the rollout", || {
        slots.iter().any(Runner::is_leader)
    })
    .await?;
    let leader = slots
        .iter()
        .position(Runner::is_leader)
        .ok_or("rolling upgrade: nobody leads before the rollout")?;
    let first_ballot =
        ballot(&slots[leader]).ok_or("rolling upgrade: a leader without a ballot")?;
    // The others from the last started to the first; the leader first or last.
    let others: Vec<usize> = (0..n).rev().filter(|i| *i != leader).collect();
    let sequence: Vec<usize> = match order {
        Order::LeaderFirst => std::iter::once(leader).chain(others).collect(),
        Order::LeaderLast => others.into_iter().chain(std::iter::once(leader)).collect(),
    };
    for slot in sequence {
        slots[slot].shutdown().await;
        let (r, task) = start(&db, &space, cfg, slot, NEW, tasks.len(), &spans)?;
        tasks.push(task);
        until("the restarted instance registered", || registered(&r)).await?;
        slots[slot] = r;
        tokio::time::sleep(settle).await;
    }
    until("a leader after the rollout", || {
        slots.iter().any(Runner::is_leader)
    })
    .await?;
    // The rollout is over: the shutdowns below hand the leadership from one instance to the
    // next, which are no changes of the rollout.
    let over = Instant::now();
    let last_ballot = slots
        .iter()
        .find(|r| r.is_leader())
        .and_then(ballot)
        .ok_or("rolling upgrade: nobody leads after the rollout")?;
    for r in &slots {
        r.shutdown().await;
    }
    for task in tasks {
        task.await?;
    }
    let overlaps = spans.overlaps.load(Ordering::SeqCst);
    let mut spans = spans.spans.lock().map_err(|_| "poisoned")?.clone();
    spans.retain(|s| s.start < over);
    spans.sort_by_key(|s| s.start);
    // Every acquisition takes the next ballot, and each is by another candidate than the
    // last (a restart is a new candidate; a leader never takes its own vacancy back): the
    // ballots count the changes exactly, also a leadership too short for its span to be
    // stamped (its runner's `elected` may skip it), which would show as one longer gap.
    let changes = last_ballot
        .checked_sub(first_ballot)
        .ok_or("rolling upgrade: the ballot went back")?;
    let mut t = Trial {
        changes: u32::try_from(changes)?,
        gaps_ms: Vec::new(),
        overlaps,
        leaders: spans.first().map(|s| s.version).into_iter().collect(),
    };
    for pair in spans.windows(2) {
        let (prev, next) = (&pair[0], &pair[1]);
        let end = prev
            .end
            .ok_or("rolling upgrade: a leadership never ended")?;
        // A start stamped before the previous end is a late wake-up of the ending task
        // (the guards' check above counts real overlaps): no time without a leader.
        let gap = next.start.saturating_duration_since(end);
        t.gaps_ms.push(gap.as_secs_f64() * 1e3);
        if next.runner != prev.runner {
            t.leaders.push(next.version);
        }
    }
    Ok(t)
}

/// The rows as a table.
pub(crate) fn print(store: &str, f: &UpgradeFigures) {
    println!();
    println!(
        "rolling upgrades on {store}: {OLD} -> {NEW}, graceful restarts, lease {:.0} ms; \
         changes per rollout (min-max over the trials) against the fewest the order allows, \
         time without a leader per change",
        f.upgrade_lease_ms
    );
    println!(
        "{:<14} {:>2} {:<13} {:>8} {:>6} {:>10} {:>9} {:>8} {:>11}  leaders (first trial)",
        "policy",
        "N",
        "order",
        "changes",
        "fewest",
        "gap ms p50",
        "gap max",
        "overlaps",
        "lease waits"
    );
    for r in &f.upgrade_rollouts {
        let changes = if r.changes_min == r.changes_max {
            r.changes_min.to_string()
        } else {
            format!("{}-{}", r.changes_min, r.changes_max)
        };
        println!(
            "{:<14} {:>2} {:<13} {:>8} {:>6} {:>10.2} {:>9.2} {:>8} {:>11}  {}",
            r.policy,
            r.instances,
            r.order,
            changes,
            r.fewest,
            r.without_leader_ms_median,
            r.without_leader_ms_max,
            r.overlaps,
            r.lease_waits,
            r.leaders
        );
    }
}
