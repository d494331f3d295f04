//! Leadership follows health (docs/design.md §13), on MemDb:
//!
//! - **health handover**: two runners with a leader health check (every 20 ms, fall 2, rise
//!   1); the leader's check starts failing. The time from its `fall`-th failed answer (the
//!   check turning unhealthy) until the other runner holds a valid guard. The goal is at most
//!   one heartbeat plus the handover's two commits: the eligibility change wakes the runner,
//!   so no heartbeat (let alone a lease) is waited for. Real time, lease 300 ms.
//! - **flapping**: two runners whose leader health checks both flap (failing every other
//!   interval), for ten minutes of tokio's paused time with the default configuration (lease
//!   10 s, so a default cool-down of 10 s) and checks every 2 s: the leadership changes per
//!   cool-down, with the default `fall 3 rise 2` (a check failing every other interval never
//!   fails three times in a row: no change) and with `fall 1 rise 1` (each failure counts;
//!   the cool-down bounds the flapping). The goal is at most one change per cool-down.
//!
//! On the FoundationDB cluster (`measure_on`) the handover is the same; the flapping runs in
//! real time, scaled: lease 1 s (cool-down 1 s), checks every 200 ms, for one minute (sixty
//! cool-downs), because a cluster's transactions cannot run on a paused clock.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fdb_leader_election::runner::{CheckSettings, Runner};
use fdb_leader_election::{
    ElectionConfig, ElectionDatabase, ElectionTxn, MemDb, ReadMode, TokioClock,
};
use foundationdb_tuple::Subspace;
use serde::Serialize;

use crate::{ELECTION_LIMIT, Res, elected_within, median};

/// The health figures (`health_*` keys of the JSON line).
#[derive(Serialize, Default, Clone, Debug)]
pub(crate) struct HealthFigures {
    /// Median ms from the leader's check turning unhealthy to the successor's guard.
    pub(crate) health_handover_ms: f64,
    /// The same, the largest of the trials.
    pub(crate) health_handover_max_ms: f64,
    /// The heartbeat of that scenario, ms (the goal: at most this plus two commits).
    pub(crate) health_handover_heartbeat_ms: f64,
    /// Median ms of one commit on that store (a read and a write of one key), for the goal.
    pub(crate) health_commit_ms: f64,
    /// Leadership changes per cool-down while both checks flap, default fall 3 rise 2.
    pub(crate) health_flap_changes_per_cool_down: f64,
    /// The same with fall 1 rise 1.
    pub(crate) health_flap_changes_per_cool_down_fall1: f64,
    /// Cool-downs in the flapping scenario (ten minutes over the default cool-down).
    pub(crate) health_flap_cool_downs: f64,
}

/// A check whose answers the scenario sets: `broken` fails it; every failed answer's time
/// is recorded.
#[derive(Clone, Default)]
struct Switch {
    calls: Arc<AtomicU32>,
    broken: Arc<AtomicBool>,
    failures: Arc<Mutex<Vec<Instant>>>,
}

impl Switch {
    fn check(&self) -> impl Fn() -> std::future::Ready<Result<(), String>> + Send + Sync + 'static {
        let s = self.clone();
        move || {
            s.calls.fetch_add(1, Ordering::SeqCst);
            if s.broken.load(Ordering::SeqCst) {
                if let Ok(mut f) = s.failures.lock() {
                    f.push(Instant::now());
                }
                std::future::ready(Err("the service does not answer".to_owned()))
            } else {
                std::future::ready(Ok(()))
            }
        }
    }
}

/// Every figure, on MemDb (the flapping on tokio's paused clock).
pub(crate) async fn measure() -> Res<HealthFigures> {
    let mut f = HealthFigures::default();
    handover(&mut f, MemDb::new, &Subspace::from("health")).await?;
    let flap = |fall, rise| {
        std::thread::spawn(move || -> Result<(f64, f64), String> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let db = MemDb::with_clock(Arc::new(TokioClock::new()));
                let settings =
                    CheckSettings::new(Duration::from_secs(2), Duration::from_secs(1), fall, rise)?;
                let span = Duration::from_secs(600);
                flapping(
                    db,
                    &Subspace::from("flap"),
                    &ElectionConfig::default(),
                    settings,
                    span,
                )
                .await
            })
            .map_err(|e| e.to_string())
        })
        .join()
        .map_err(|_| "the flapping scenario panicked".to_owned())
        .and_then(|r| r)
    };
    let (per, cool_downs) = flap(3, 2)?;
    f.health_flap_changes_per_cool_down = per;
    f.health_flap_cool_downs = cool_downs;
    f.health_flap_changes_per_cool_down_fall1 = flap(1, 1)?.0;
    Ok(f)
}

/// Every figure on stores from `fresh`, under `root`, in real time: the handover as on
/// MemDb; the flapping scaled to a 1 s lease (cool-down 1 s), checks every 200 ms, for a
/// minute (a FoundationDB cluster cannot run on a paused clock).
#[cfg_attr(not(feature = "fdb"), allow(dead_code))]
pub(crate) async fn measure_on<D: ElectionDatabase>(
    fresh: impl Fn() -> D,
    root: &Subspace,
) -> Res<HealthFigures> {
    let mut f = HealthFigures::default();
    handover(&mut f, &fresh, &root.subspace(&("handover",))).await?;
    let cfg = ElectionConfig::with_lease_duration(Duration::from_secs(1))?;
    let span = Duration::from_secs(60);
    let every = |fall, rise| {
        CheckSettings::new(
            Duration::from_millis(200),
            Duration::from_millis(100),
            fall,
            rise,
        )
    };
    let (per, cool_downs) = flapping(
        fresh(),
        &root.subspace(&("flap", 3)),
        &cfg,
        every(3, 2)?,
        span,
    )
    .await?;
    f.health_flap_changes_per_cool_down = per;
    f.health_flap_cool_downs = cool_downs;
    f.health_flap_changes_per_cool_down_fall1 = flapping(
        fresh(),
        &root.subspace(&("flap", 1)),
        &cfg,
        every(1, 1)?,
        span,
    )
    .await?
    .0;
    Ok(f)
}

async fn handover<D: ElectionDatabase>(
    f: &mut HealthFigures,
    fresh: impl Fn() -> D,
    root: &Subspace,
) -> Res<()> {
    let cfg = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
    let settings = CheckSettings::new(Duration::from_millis(20), Duration::from_millis(10), 2, 1)?;
    f.health_commit_ms = commit_ms(fresh(), &root.subspace(&("commit",))).await?;
    let mut took = Vec::new();
    for trial in 0..21u32 {
        let db = fresh();
        let space = root.subspace(&(trial,));
        let start = |name: &str, s: &Switch| -> Res<Runner> {
            Ok(Runner::builder(db.clone(), space.clone())
                .label(name)
                .config(cfg.clone())
                .leader_health_check(settings, s.check())
                .start()?)
        };
        let (sa, sb) = (Switch::default(), Switch::default());
        let a = start("a", &sa)?;
        elected_within(&a, ELECTION_LIMIT).await?;
        let b = start("b", &sb)?;
        // Steady state, then break at a pseudo-random phase of the heartbeat.
        tokio::time::sleep(
            cfg.heartbeat_interval() * 2 + Duration::from_millis(u64::from(trial * 13 % 100)),
        )
        .await;
        sa.broken.store(true, Ordering::SeqCst);
        let started = Instant::now();
        loop {
            if b.leadership().is_some_and(|g| g.is_valid()) {
                break;
            }
            if started.elapsed() > ELECTION_LIMIT {
                return Err(format!(
                    "no health handover within the limit: calls {} a {:?} {:?} failures {}, b {:?} {:?}",
                    sa.calls.load(Ordering::SeqCst),
                    a.state(),
                    a.eligibility(),
                    sa.failures.lock().map(|f| f.len()).unwrap_or(0),
                    b.state(),
                    b.eligibility()
                )
                .into());
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let led = Instant::now();
        let unhealthy = sa
            .failures
            .lock()
            .map_err(|_| "poisoned")?
            .get(1)
            .copied()
            .ok_or("the check never failed twice")?;
        took.push(led.duration_since(unhealthy).as_secs_f64() * 1e3);
        b.shutdown().await;
        a.shutdown().await;
    }
    f.health_handover_max_ms = took.iter().copied().fold(0.0, f64::max);
    f.health_handover_ms = median(&mut took);
    f.health_handover_heartbeat_ms = cfg.heartbeat_interval().as_secs_f64() * 1e3;
    Ok(())
}

/// Both leader checks flapping (failing every other interval) for `span`: leadership
/// changes per cool-down (the lease, by default), and the cool-downs.
async fn flapping<D: ElectionDatabase>(
    db: D,
    space: &Subspace,
    cfg: &ElectionConfig,
    settings: CheckSettings,
    span: Duration,
) -> Res<(f64, f64)> {
    let start = |name: &str| -> Res<Runner> {
        let calls = Arc::new(AtomicU32::new(0));
        Ok(Runner::builder(db.clone(), space.clone())
            .label(name)
            .config(cfg.clone())
            .leader_health_check(settings, move || {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                std::future::ready(if n % 2 == 1 {
                    Err("flapping".to_owned())
                } else {
                    Ok(())
                })
            })
            .start()?)
    };
    let a = start("a")?;
    elected_within(&a, ELECTION_LIMIT * 10).await?;
    let b = start("b")?;
    let observer = Runner::observer(db.clone(), space.clone()).start()?;
    let mut changes = observer.subscribe();
    let counting = tokio::spawn(async move {
        let mut ballots = std::collections::BTreeSet::new();
        while let Ok(change) = changes.recv().await {
            if let Some(new) = change.new {
                ballots.insert(new.ballot);
            }
        }
        ballots.len()
    });
    tokio::time::sleep(span).await;
    observer.shutdown().await;
    let leaderships = counting.await?;
    b.shutdown().await;
    a.shutdown().await;
    // The first leadership seen is not a change.
    let changes = leaderships.saturating_sub(1) as f64;
    let cool_downs = span.as_secs_f64() / cfg.lease_duration().as_secs_f64();
    Ok((changes / cool_downs, cool_downs))
}

/// Median ms of 21 commits that each read and write one key: a commit's cost on that store.
async fn commit_ms<D: ElectionDatabase>(db: D, space: &Subspace) -> Res<f64> {
    let key = space.pack(&("key",));
    let mut took = Vec::new();
    for i in 0..21u32 {
        let started = Instant::now();
        db.transact(Duration::from_secs(5), |txn| {
            let key = key.clone();
            async move {
                txn.get(&key, ReadMode::Serializable).await?;
                txn.set(&key, &i.to_be_bytes());
                Ok(())
            }
        })
        .await?;
        took.push(started.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(&mut took))
}
