//! The performance report: what one election cycle costs the database, and how fast
//! leadership moves, measured in one run on MemDb; then the same measurements, side by side,
//! for a re-implementation of the `foundationdb` 0.11 recipe (`v011.rs`, for measurement
//! only) on the same store, with the same transactions, clocks and schedules.
//!
//! `cargo run --release --example perf_report`
//!
//! It prints a table (each figure with its target), the side-by-side table, a capacity table
//! (what N candidates × M elections put on a cluster), and, as its last line, one JSON object.
//! It measures; it never fails because a machine is slow. It does fail if a side-by-side
//! scenario did not do what it is meant to (no takeover, no handover): such a figure would be
//! vacuous.
//!
//! # On a real cluster
//!
//! ```text
//! cargo run --release --example perf_report --features fdb-7_3,embedded-fdb-include -- \
//!     --cluster-file /path/to/fdb.cluster
//! ```
//!
//! runs the MemDb report exactly as above, then measures on the FoundationDB cluster the
//! cluster file names (under a fresh subspace, cleared at the end; `fdb.rs` says how each
//! figure is taken) and prints a third table, each cluster figure beside its MemDb twin. The
//! JSON line stays one object: the MemDb figures under the same keys as without the option,
//! plus an `fdb` object with the cluster's figures, whose keys repeat the MemDb key where the
//! figure means the same (`follower_aborts_per_1k_cycles`, `failover_over_lease`,
//! `resign_handover_ms`, ...). Absolute times hold only for the machine and cluster they were
//! taken on; the ratios and the abort counts are the claim. Without the `fdb` feature,
//! `--cluster-file` is an error naming the features to build with.

#![allow(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    reason = "measurement arithmetic on counters and float statistics, far from any bound"
)]

use std::error::Error;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fdb_leader_election::runner::Runner;
use fdb_leader_election::{
    Candidate, CandidateId, Clock, ElectionConfig, ElectionDatabase, ElectionError, ElectionTxn,
    LeaderElection, ManualClock, MemDb, MemDbStats, Priority, ReadMode, ScriptedFaults,
    SystemClock,
};
use foundationdb_tuple::Subspace;
use serde::Serialize;

mod clocks;
#[cfg(feature = "fdb")]
mod fdb;
mod health;
mod probe;
mod sharded;
mod sim;
mod upgrade;
mod v011;

use clocks::HostClock;
use probe::{Counts, Probe, Tally};
use sim::Design;
use v011::{ElectionResult as V011Result, V011Config, V011Election, V011Host};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

#[derive(Serialize, Default)]
struct Report {
    reads_per_cycle_follower: u64,
    writes_per_cycle_follower: u64,
    reads_per_cycle_leader: u64,
    writes_per_cycle_leader: u64,
    range_reads_per_cycle: u64,
    cycle_vs_bare_txn: f64,
    cycle_10k_vs_1: f64,
    follower_aborts_per_1k_cycles: f64,
    failover_over_lease: f64,
    failover_over_lease_p99: f64,
    resign_handover_ms: f64,
    /// A resignation reserved for a follower that had just crashed (the registry still shows
    /// it live): the time to the next leader, in heartbeats (docs/design.md §4's reservation timeout).
    resign_dead_heir_over_heartbeat: f64,
    resign_dead_heir_over_heartbeat_p99: f64,
    preempt_handover_ms: f64,
    preempt_handover_no_watch_over_heartbeat: f64,
    overlap_instants: u64,
    cycles_per_sec_10k_elections: f64,
    round_trips_per_cycle: u64,
    v011_reads_per_cycle_follower: u64,
    v011_writes_per_cycle_follower: u64,
    v011_round_trips_per_cycle: u64,
    v011_follower_aborts_per_1k_cycles: f64,
    v011_failover_over_lease: f64,
    overlap_instants_preempt: u64,
    v011_overlap_instants_preempt: u64,
    overlap_instants_skew: u64,
    v011_overlap_instants_skew: u64,
    ballot_regressions: u64,
    v011_ballot_regressions: u64,
    /// Leadership following health on MemDb (`health.rs`), as `health_*` keys.
    #[serde(flatten)]
    health: health::HealthFigures,
    /// Sharded leadership's figures on MemDb (`sharded.rs`), as `shard_*` keys.
    #[serde(flatten)]
    sharded: sharded::ShardFigures,
    /// Rolling upgrades on MemDb (`upgrade.rs`), as `upgrade_*` keys.
    #[serde(flatten)]
    upgrade: upgrade::UpgradeFigures,
    /// The cluster mode's figures (absent without `--cluster-file`).
    #[cfg(feature = "fdb")]
    #[serde(skip_serializing_if = "Option::is_none")]
    fdb: Option<fdb::FdbReport>,
}

fn median(v: &mut [f64]) -> f64 {
    percentile(v, 0.5)
}

/// Nearest-rank percentile.
fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = (p * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// One election on a MemDb with a frozen clock: leases never lapse, so the leader renews and
/// the followers follow for as long as we like.
/// One cycle of `c` in `e` through MemDb's retry loop, its result adopted.
async fn cycle_once(db: &MemDb, e: &LeaderElection, c: &Candidate) -> Res<()> {
    let cycle = db
        .run(|txn, _| {
            let (e, c) = (e.clone(), c.clone());
            async move { e.run_election_cycle(&txn, &c).await }
        })
        .await?;
    c.adopt(cycle);
    Ok(())
}

struct Steady {
    db: MemDb,
    election: LeaderElection,
    leader: Candidate,
    followers: Vec<Candidate>,
}

impl Steady {
    async fn new(db: MemDb, name: &str, registered: usize) -> Res<Self> {
        let election = LeaderElection::new(Subspace::from(name));
        let clock = Arc::new(ManualClock::new());
        let make = |i: usize| -> Res<Candidate> {
            let id = CandidateId::with_nonce("node", i as u64)?;
            Ok(Candidate::with_clock(id, Priority::new(1), clock.clone()))
        };
        let all = (0..registered.max(2)).map(make).collect::<Res<Vec<_>>>()?;
        db.run(|txn, _| {
            let e = election.clone();
            async move { e.initialize(&txn).await }
        })
        .await?;
        for chunk in all.chunks(1000) {
            db.run(|txn, _| {
                let (e, chunk) = (election.clone(), chunk.to_vec());
                async move {
                    for c in &chunk {
                        e.register_candidate(&txn, c).await?;
                    }
                    Ok::<(), ElectionError>(())
                }
            })
            .await?;
        }
        let s = Steady {
            db,
            election,
            leader: all[0].clone(),
            followers: all[1..].to_vec(),
        };
        s.cycle(&s.leader).await?;
        if s.leader.leadership().is_none() {
            return Err("the first candidate was not elected".into());
        }
        Ok(s)
    }

    async fn cycle(&self, c: &Candidate) -> Res<()> {
        cycle_once(&self.db, &self.election, c).await
    }

    /// One cycle, its transaction probed (`probe.rs`).
    async fn cycle_probed(&self, c: &Candidate, tally: &Tally) -> Res<()> {
        let cycle = self
            .db
            .run(|txn, _| {
                let (e, c) = (self.election.clone(), c.clone());
                let txn = Probe::new(txn, tally, Duration::ZERO);
                async move { e.run_election_cycle(&txn, &c).await }
            })
            .await?;
        c.adopt(cycle);
        Ok(())
    }
}

/// What one cycle costs: MemDb's own counters, and the probe's view of what a FoundationDB
/// cluster would serve (see `probe.rs`).
#[derive(Clone, Copy, Debug, Default)]
struct CycleCost {
    /// `get` calls, as MemDb counts them.
    reads: u64,
    /// `set` and `clear` calls.
    writes: u64,
    /// Range reads.
    range_reads: u64,
    /// Storage reads, read rounds and conflict ranges.
    probe: Counts,
    /// For a follower cycle: its read conflict ranges that a leader renewal writes, so that
    /// a renewal committing first aborts it.
    exposed_to_renewals: u64,
}

impl CycleCost {
    fn new(d: MemDbStats, tally: &Tally) -> Self {
        CycleCost {
            reads: d.point_reads,
            writes: d.sets + d.clears,
            range_reads: d.range_reads,
            probe: tally.counts(),
            exposed_to_renewals: 0,
        }
    }
}

/// One follower cycle and one leader renewal of this crate, 100 candidates registered.
async fn io_counts(r: &mut Report) -> Res<(CycleCost, CycleCost)> {
    let s = Steady::new(MemDb::new(), "io", 100).await?;
    let f = &s.followers[0];
    s.cycle(f).await?; // first sight
    let (f_tally, l_tally) = (Tally::default(), Tally::default());
    let before = s.db.stats();
    s.cycle_probed(f, &f_tally).await?;
    let mut follower = CycleCost::new(s.db.stats().since(&before), &f_tally);
    let before = s.db.stats();
    s.cycle_probed(&s.leader, &l_tally).await?;
    let leader = CycleCost::new(s.db.stats().since(&before), &l_tally);
    follower.exposed_to_renewals = f_tally.conflicts_with_writes_of(&l_tally);
    r.reads_per_cycle_follower = follower.reads;
    r.writes_per_cycle_follower = follower.writes;
    r.reads_per_cycle_leader = leader.reads;
    r.writes_per_cycle_leader = leader.writes;
    r.range_reads_per_cycle = follower.range_reads.max(leader.range_reads);
    r.round_trips_per_cycle = follower.probe.rounds.max(leader.probe.rounds);
    Ok((follower, leader))
}

/// An election of the v0.11 recipe with `n` registered hosts on exact clocks over `truth`.
async fn v011_setup(
    db: &MemDb,
    name: &str,
    n: usize,
    config: V011Config,
    truth: Arc<dyn Clock>,
) -> Res<(V011Election, Vec<V011Host>)> {
    let election = V011Election::new(&Subspace::from(name));
    db.run(|txn, _| {
        let e = election.clone();
        async move { e.initialize_with_config(&txn, config).await }
    })
    .await?;
    let mut hosts = Vec::with_capacity(n);
    for i in 0..n {
        let clock = Arc::new(HostClock::exact(truth.clone()));
        let host = V011Host::new(format!("{name}-{i}"), 1, clock);
        host.register(db, &election).await?;
        hosts.push(host);
    }
    Ok((election, hosts))
}

/// The same two cycles of the v0.11 recipe: 100 hosts registered, clocks frozen so the lease
/// never lapses.
async fn v011_io_counts(r: &mut Report) -> Res<(CycleCost, CycleCost)> {
    let truth = ManualClock::new();
    let db = MemDb::with_clock(Arc::new(truth.clone()));
    let (e, hosts) =
        v011_setup(&db, "v011-io", 100, V011Config::default(), Arc::new(truth)).await?;
    let (leader, follower_host) = (&hosts[0], &hosts[1]);
    if !matches!(leader.cycle(&db, &e).await?, V011Result::Leader(_)) {
        return Err("v0.11: the first host was not elected".into());
    }
    follower_host.cycle(&db, &e).await?; // first sight
    let (f_tally, l_tally) = (Tally::default(), Tally::default());
    let before = db.stats();
    let seen = follower_host
        .cycle_with(&db, &e, |txn| Probe::new(txn, &f_tally, Duration::ZERO))
        .await?;
    if !matches!(seen, V011Result::Follower(Some(_))) {
        return Err("v0.11: the follower did not see the leader".into());
    }
    let mut follower = CycleCost::new(db.stats().since(&before), &f_tally);
    let before = db.stats();
    let renewed = leader
        .cycle_with(&db, &e, |txn| Probe::new(txn, &l_tally, Duration::ZERO))
        .await?;
    if !matches!(renewed, V011Result::Leader(_)) {
        return Err("v0.11: the leader did not refresh".into());
    }
    let leader = CycleCost::new(db.stats().since(&before), &l_tally);
    follower.exposed_to_renewals = f_tally.conflicts_with_writes_of(&l_tally);
    r.v011_reads_per_cycle_follower = follower.reads;
    r.v011_writes_per_cycle_follower = follower.writes;
    r.v011_round_trips_per_cycle = follower.probe.rounds.max(leader.probe.rounds);
    Ok((follower, leader))
}

/// Time per call of `op` over one batch.
async fn batch<F, Fut>(op: &mut F, n: u32) -> Res<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Res<()>>,
{
    let t = Instant::now();
    for _ in 0..n {
        op().await?;
    }
    Ok(t.elapsed().as_secs_f64() / f64::from(n))
}

/// Follower cycle cost against a bare read-modify-write, and with 10,000 registered
/// candidates against one. The three are measured in interleaved batches and compared pair
/// by pair, so load from other processes affects both sides of each ratio alike.
async fn cycle_costs(r: &mut Report) -> Res<(f64, f64, f64)> {
    const N: u32 = 2_000;
    let bare_db = MemDb::new();
    let mut bare = || {
        let db = bare_db.clone();
        async move {
            db.run(|txn, _| async move {
                let v = txn.get(b"counter", ReadMode::Serializable).await?;
                let n = v.map_or(0u64, |v| v.len() as u64);
                txn.set(b"counter", &n.to_le_bytes());
                Ok::<(), ElectionError>(())
            })
            .await?;
            Ok(())
        }
    };
    let one = Steady::new(MemDb::new(), "one", 2).await?;
    let f1 = one.followers[0].clone();
    let mut cycle_1 = || one.cycle(&f1);
    let many = Steady::new(MemDb::new(), "many", 10_000).await?;
    let f10k = many.followers[0].clone();
    let mut cycle_10k = || many.cycle(&f10k);
    // Warm-up.
    batch(&mut bare, N).await?;
    batch(&mut cycle_1, N).await?;
    batch(&mut cycle_10k, N).await?;
    let (mut vs_bare, mut vs_one) = (Vec::new(), Vec::new());
    let (mut t_bare, mut t_1, mut t_10k) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..21 {
        let b = batch(&mut bare, N).await?;
        let c1 = batch(&mut cycle_1, N).await?;
        let c10k = batch(&mut cycle_10k, N).await?;
        vs_bare.push(c1 / b);
        vs_one.push(c10k / c1);
        t_bare.push(b);
        t_1.push(c1);
        t_10k.push(c10k);
    }
    r.cycle_vs_bare_txn = median(&mut vs_bare);
    r.cycle_10k_vs_1 = median(&mut vs_one);
    Ok((median(&mut t_bare), median(&mut t_1), median(&mut t_10k)))
}

/// 100 candidates cycle concurrently (each read takes 200 µs, so transactions overlap) while
/// the leader renews; counts follower transaction attempts that had to be retried.
async fn follower_aborts(r: &mut Report) -> Res<u64> {
    let db = MemDb::with_clock(Arc::new(ManualClock::new()));
    let faults = ScriptedFaults::new();
    faults.set_read_latency(Duration::from_micros(200));
    let s = Arc::new(Steady::new(db.clone(), "aborts", 100).await?);
    db.set_fault_injector(Arc::new(faults));
    const CYCLES: u64 = 40;
    let attempts = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..s.followers.len() {
        let (s, attempts) = (Arc::clone(&s), Arc::clone(&attempts));
        tasks.push(tokio::spawn(async move {
            let c = s.followers[i].clone();
            for _ in 0..CYCLES {
                let cycle =
                    s.db.run(|txn, _| {
                        attempts.fetch_add(1, Ordering::Relaxed);
                        let (e, c) = (s.election.clone(), c.clone());
                        async move { e.run_election_cycle(&txn, &c).await }
                    })
                    .await?;
                c.adopt(cycle);
            }
            Ok::<(), ElectionError>(())
        }));
    }
    let leader = {
        let s = Arc::clone(&s);
        tokio::spawn(async move {
            let mut renewals = 0u64;
            for _ in 0..CYCLES * 4 {
                s.cycle(&s.leader).await.map_err(|e| e.to_string())?;
                renewals += 1;
            }
            Ok::<u64, String>(renewals)
        })
    };
    for t in tasks {
        t.await??;
    }
    let renewals = leader
        .await?
        .map_err(|e| -> Box<dyn Error + Send + Sync> { e.into() })?;
    let cycles = CYCLES * s.followers.len() as u64;
    let aborted = attempts.load(Ordering::Relaxed).saturating_sub(cycles);
    r.follower_aborts_per_1k_cycles = aborted as f64 * 1000.0 / cycles as f64;
    Ok(renewals)
}

/// The same contention for the v0.11 recipe: 100 hosts (99 followers cycling concurrently,
/// 40 cycles each, while the leader refreshes 160 times), clocks frozen so the lease never
/// lapses. Each read that reaches the store takes 200 µs, as above; repeated reads of a key
/// are served by the transaction's cache, as FoundationDB's read-your-writes cache serves
/// them (`probe.rs`). Counts follower attempts that had to be retried. How many overlap
/// depends on how the two worker threads interleave the tasks, so the figure is the median
/// of 5 runs. Returns the refreshes of the median run.
async fn v011_follower_aborts(r: &mut Report) -> Res<u64> {
    let mut runs = Vec::new();
    for run in 0..5 {
        runs.push(v011_contention(run).await?);
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (per_1k, refreshes) = runs[runs.len() / 2];
    r.v011_follower_aborts_per_1k_cycles = per_1k;
    Ok(refreshes)
}

/// One run of [`v011_follower_aborts`]: follower aborts per 1,000 cycles, and refreshes.
async fn v011_contention(run: u32) -> Res<(f64, u64)> {
    const CYCLES: u64 = 40;
    const LATENCY: Duration = Duration::from_micros(200);
    let truth = ManualClock::new();
    let db = MemDb::with_clock(Arc::new(truth.clone()));
    let (e, hosts) = v011_setup(
        &db,
        &format!("v011-aborts-{run}"),
        100,
        V011Config::default(),
        Arc::new(truth),
    )
    .await?;
    if !matches!(hosts[0].cycle(&db, &e).await?, V011Result::Leader(_)) {
        return Err("v0.11: the first host was not elected".into());
    }
    let attempts = Arc::new(AtomicU64::new(0));
    let tally = Tally::default();
    let mut tasks = Vec::new();
    for h in &hosts[1..] {
        let (db, e, h, attempts, tally) = (
            db.clone(),
            e.clone(),
            h.clone(),
            Arc::clone(&attempts),
            tally.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..CYCLES {
                h.cycle_with(&db, &e, |txn| {
                    attempts.fetch_add(1, Ordering::Relaxed);
                    Probe::new(txn, &tally, LATENCY)
                })
                .await?;
            }
            Ok::<(), v011::V011Error>(())
        }));
    }
    let leader = {
        let (db, e, h, tally) = (db.clone(), e.clone(), hosts[0].clone(), tally.clone());
        tokio::spawn(async move {
            let mut refreshes = 0u64;
            for _ in 0..CYCLES * 4 {
                if let V011Result::Leader(_) = h
                    .cycle_with(&db, &e, |txn| Probe::new(txn, &tally, LATENCY))
                    .await?
                {
                    refreshes += 1;
                }
            }
            Ok::<u64, v011::V011Error>(refreshes)
        })
    };
    for t in tasks {
        t.await??;
    }
    let refreshes = leader.await??;
    let cycles = CYCLES * (hosts.len() as u64 - 1);
    let aborted = attempts.load(Ordering::Relaxed).saturating_sub(cycles);
    Ok((aborted as f64 * 1000.0 / cycles as f64, refreshes))
}

/// Samples `runners` every millisecond and counts the instants: all of them (`samples`), those
/// with an overlap (`overlaps`), and those torn by a handover between the reads (`torn`).
#[derive(Clone)]
pub(crate) struct Monitor<R> {
    runners: Arc<Mutex<Vec<R>>>,
    pub(crate) overlaps: Arc<AtomicU64>,
    pub(crate) torn: Arc<AtomicU64>,
    pub(crate) samples: Arc<AtomicU64>,
}

impl<R> Default for Monitor<R> {
    fn default() -> Self {
        Monitor {
            runners: Arc::default(),
            overlaps: Arc::default(),
            torn: Arc::default(),
            samples: Arc::default(),
        }
    }
}

impl<R: Clone + Send + 'static> Monitor<R> {
    /// Starts sampling; `instant` tells of the runners at one instant whether two of them
    /// overlap and whether a handover tore the reads.
    pub(crate) fn start_with(
        &self,
        instant: impl Fn(&[R]) -> (bool, bool) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let m = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            loop {
                tick.tick().await;
                let runners = m
                    .runners
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let (overlap, torn) = instant(&runners);
                m.samples.fetch_add(1, Ordering::Relaxed);
                if overlap {
                    m.overlaps.fetch_add(1, Ordering::Relaxed);
                } else if torn {
                    m.torn.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    }

    pub(crate) fn set(&self, runners: &[R]) {
        *self.runners.lock().unwrap_or_else(PoisonError::into_inner) = runners.to_vec();
    }
}

/// Samples every live runner's guard every millisecond; counts instants with two valid.
type OverlapMonitor = Monitor<Runner>;

impl OverlapMonitor {
    fn start(&self) -> tokio::task::JoinHandle<()> {
        self.start_with(|runners| {
            let valid = runners
                .iter()
                .filter(|r| r.leadership().is_some_and(|g| g.is_valid()))
                .count();
            (valid > 1, false)
        })
    }
}

/// A runner on any store (MemDb here, `Arc<foundationdb::Database>` in the cluster mode).
fn start_on<D: ElectionDatabase>(
    db: D,
    space: Subspace,
    name: &str,
    prio: i32,
    cfg: &ElectionConfig,
) -> Res<Runner> {
    Ok(Runner::builder(db, space)
        .label(name)
        .priority(Priority::new(prio))
        .payload(format!("{name}:7000"))
        .config(cfg.clone())
        .start()?)
}

/// How long a scenario waits for a runner to be elected before it calls the scenario failed:
/// far beyond any lease it uses, so only a scenario that went wrong reaches it.
const ELECTION_LIMIT: Duration = Duration::from_secs(10);

async fn elected_within(r: &Runner, limit: Duration) -> Res<()> {
    tokio::time::timeout(limit, r.elected())
        .await
        .map_err(|_| "no leader within the limit")?
        .ok_or("the runner stopped")?;
    Ok(())
}

async fn failover(r: &mut Report, cfg: &ElectionConfig, mon: &OverlapMonitor) -> Res<()> {
    let lease = cfg.lease_duration();
    let mut ratios = failover_trials(25, cfg, mon, lease * 5, |trial| {
        Ok((MemDb::new(), Subspace::from(format!("failover-{trial}"))))
    })
    .await?;
    r.failover_over_lease = median(&mut ratios.clone());
    r.failover_over_lease_p99 = percentile(&mut ratios, 0.99);
    Ok(())
}

/// Crash failovers, each on a fresh election from `fresh(trial)`: three runners; once one
/// leads and a lease has passed (plus a pseudo-random phase of the heartbeat), the leader is
/// aborted (a crash: no resignation). Each trial's time from the crash until another runner
/// holds a valid guard, over the lease. An error if no runner takes over within `limit`.
async fn failover_trials<D, F>(
    trials: u32,
    cfg: &ElectionConfig,
    mon: &OverlapMonitor,
    limit: Duration,
    mut fresh: F,
) -> Res<Vec<f64>>
where
    D: ElectionDatabase,
    F: FnMut(u32) -> Res<(D, Subspace)>,
{
    let lease = cfg.lease_duration();
    let mut ratios = Vec::new();
    for trial in 0..trials {
        let (db, space) = fresh(trial)?;
        let rs: Vec<Runner> = (0..3)
            .map(|i| start_on(db.clone(), space.clone(), &format!("n{i}"), 1, cfg))
            .collect::<Res<_>>()?;
        mon.set(&rs);
        let started = Instant::now();
        let mut leader = None;
        while leader.is_none() {
            if started.elapsed() > ELECTION_LIMIT {
                return Err("no leader within the limit".into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            leader = rs
                .iter()
                .position(|r| r.leadership().is_some_and(|g| g.is_valid()));
        }
        let l = leader.ok_or("no leader")?;
        // Steady state, then crash at a pseudo-random phase of the heartbeat.
        tokio::time::sleep(lease + Duration::from_millis(u64::from(trial * 37 % 100))).await;
        let crashed = Instant::now();
        rs[l].abort();
        let others: Vec<&Runner> = rs
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != l)
            .map(|(_, r)| r)
            .collect();
        loop {
            if others
                .iter()
                .any(|r| r.leadership().is_some_and(|g| g.is_valid()))
            {
                break;
            }
            if crashed.elapsed() > limit {
                return Err(format!("no takeover within {limit:?}").into());
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        ratios.push(crashed.elapsed().as_secs_f64() / lease.as_secs_f64());
        for r in &rs {
            r.shutdown().await;
        }
    }
    Ok(ratios)
}

/// The v0.11 recipe's documented loop: after `delay`, one `run_election_cycle` every
/// heartbeat, until an error (or until the task is aborted: a crash).
async fn v011_loop(
    db: MemDb,
    e: V011Election,
    h: V011Host,
    delay: Duration,
    heartbeat: Duration,
) -> Result<(), v011::V011Error> {
    tokio::time::sleep(delay).await;
    let mut tick = tokio::time::interval(heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        h.cycle(&db, &e).await?;
    }
}

/// The same crash schedule for the v0.11 recipe: three hosts, each calling
/// `run_election_cycle` every heartbeat (its documented loop) on exact wall clocks, lease
/// 300 ms and heartbeat 100 ms (`with_lease_duration`), 25 trials; the leader's task is
/// aborted at the same phases; failover ends when another host acts as leader.
async fn v011_failover(r: &mut Report, lease: Duration) -> Res<()> {
    let config = V011Config::with_lease_duration(lease);
    let heartbeat = config.heartbeat_interval;
    let mut ratios = Vec::new();
    for trial in 0..25u32 {
        let db = MemDb::new();
        let name = format!("v011-failover-{trial}");
        let (e, hosts) = v011_setup(&db, &name, 3, config, Arc::new(SystemClock)).await?;
        let tasks: Vec<_> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let (db, e, h) = (db.clone(), e.clone(), h.clone());
                tokio::spawn(v011_loop(db, e, h, heartbeat * i as u32 / 3, heartbeat))
            })
            .collect();
        let started = Instant::now();
        let mut leader = None;
        while leader.is_none() {
            if started.elapsed() > Duration::from_secs(5) {
                return Err("v0.11: no leader within 5 s".into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            leader = hosts.iter().position(|h| h.leadership().is_some());
        }
        let l = leader.ok_or("no leader")?;
        tokio::time::sleep(lease + Duration::from_millis(u64::from(trial * 37 % 100))).await;
        let crashed = Instant::now();
        tasks[l].abort();
        loop {
            if hosts
                .iter()
                .enumerate()
                .any(|(i, h)| i != l && h.leadership().is_some())
            {
                break;
            }
            if crashed.elapsed() > lease * 5 {
                return Err("v0.11: no takeover within five leases".into());
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        ratios.push(crashed.elapsed().as_secs_f64() / lease.as_secs_f64());
        for t in &tasks {
            t.abort();
        }
    }
    r.v011_failover_over_lease = median(&mut ratios);
    Ok(())
}

async fn handovers(r: &mut Report, cfg: &ElectionConfig, mon: &OverlapMonitor) -> Res<()> {
    let mut resign_ms = Vec::new();
    let mut preempt_ms = Vec::new();
    let mut no_watch = Vec::new();
    for trial in 0..21u32 {
        // Resign: the leader shuts down; the vacancy is reserved for the other.
        let space = Subspace::from(format!("resign-{trial}"));
        let took = resign_trial(MemDb::new(), space, cfg, mon).await?;
        resign_ms.push(took.as_secs_f64() * 1e3);

        // Preempt: a higher-priority candidate joins; measured from its start.
        for watches in [true, false] {
            let db = MemDb::new();
            db.set_watches_enabled(watches);
            let space = Subspace::from(format!("preempt-{trial}-{watches}"));
            let took = preempt_trial(db, space, cfg, mon).await?;
            if watches {
                preempt_ms.push(took.as_secs_f64() * 1e3);
            } else {
                no_watch.push(took.as_secs_f64() / cfg.heartbeat_interval().as_secs_f64());
            }
        }
    }
    r.resign_handover_ms = median(&mut resign_ms);
    let mut dead_heir = Vec::new();
    for trial in 0..21u32 {
        let space = Subspace::from(format!("dead-heir-{trial}"));
        let took = dead_heir_trial(MemDb::new(), space, cfg, mon).await?;
        dead_heir.push(took.as_secs_f64() / cfg.heartbeat_interval().as_secs_f64());
    }
    r.resign_dead_heir_over_heartbeat = median(&mut dead_heir.clone());
    r.resign_dead_heir_over_heartbeat_p99 = percentile(&mut dead_heir, 0.99);
    r.preempt_handover_ms = median(&mut preempt_ms);
    r.preempt_handover_no_watch_over_heartbeat = median(&mut no_watch);
    Ok(())
}

/// One resign handover on a fresh election: `a` leads, `b` joins and follows for two
/// heartbeats, `a` shuts down (resigning, the vacancy reserved for `b`). The time from the
/// shutdown until `b` leads.
async fn resign_trial<D: ElectionDatabase>(
    db: D,
    space: Subspace,
    cfg: &ElectionConfig,
    mon: &OverlapMonitor,
) -> Res<Duration> {
    let a = start_on(db.clone(), space.clone(), "a", 1, cfg)?;
    elected_within(&a, ELECTION_LIMIT).await?;
    let b = start_on(db, space, "b", 1, cfg)?;
    mon.set(&[a.clone(), b.clone()]);
    tokio::time::sleep(cfg.heartbeat_interval() * 2).await;
    let t = Instant::now();
    a.shutdown().await;
    elected_within(&b, ELECTION_LIMIT).await?;
    let took = t.elapsed();
    b.shutdown().await;
    Ok(took)
}

/// A resignation for a follower that just crashed, on a fresh election: `a` leads; `heir`
/// (registered first) and `next` follow for two heartbeats; `heir` is killed, and `a`
/// shuts down at once (its resignation reserves the vacancy for `heir`, which the registry
/// still shows live). The time from the shutdown until `next` leads: the reservation
/// timeout (two heartbeats by default), not a lease.
async fn dead_heir_trial<D: ElectionDatabase>(
    db: D,
    space: Subspace,
    cfg: &ElectionConfig,
    mon: &OverlapMonitor,
) -> Res<Duration> {
    // Equal priorities (nobody preempts): the heir is the best live candidate by its earlier
    // registration.
    let a = start_on(db.clone(), space.clone(), "a", 1, cfg)?;
    elected_within(&a, ELECTION_LIMIT).await?;
    let heir = start_on(db.clone(), space.clone(), "heir", 1, cfg)?;
    tokio::time::sleep(cfg.heartbeat_interval()).await;
    let next = start_on(db, space, "next", 1, cfg)?;
    mon.set(&[a.clone(), heir.clone(), next.clone()]);
    tokio::time::sleep(cfg.heartbeat_interval() * 2).await;
    heir.abort();
    let t = Instant::now();
    a.shutdown().await;
    elected_within(&next, ELECTION_LIMIT).await?;
    let took = t.elapsed();
    next.shutdown().await;
    Ok(took)
}

/// One preemption on a fresh election: `old` leads for a heartbeat, then `new`, of higher
/// priority, starts. The time from its start until it leads.
async fn preempt_trial<D: ElectionDatabase>(
    db: D,
    space: Subspace,
    cfg: &ElectionConfig,
    mon: &OverlapMonitor,
) -> Res<Duration> {
    let old = start_on(db.clone(), space.clone(), "old", 1, cfg)?;
    elected_within(&old, ELECTION_LIMIT).await?;
    tokio::time::sleep(cfg.heartbeat_interval()).await;
    let t = Instant::now();
    let new = start_on(db, space, "new", 2, cfg)?;
    mon.set(&[old.clone(), new.clone()]);
    elected_within(&new, ELECTION_LIMIT).await?;
    let took = t.elapsed();
    new.shutdown().await;
    old.shutdown().await;
    Ok(took)
}

async fn many_elections(r: &mut Report) -> Res<()> {
    const N: usize = 10_000;
    let db = MemDb::with_clock(Arc::new(ManualClock::new()));
    let clock = Arc::new(ManualClock::new());
    let mut all = Vec::with_capacity(N);
    for chunk in (0..N).collect::<Vec<_>>().chunks(500) {
        let mut batch = Vec::new();
        for &i in chunk {
            let e = LeaderElection::new(Subspace::from(("many", i as i64)));
            let c = Candidate::with_clock(
                CandidateId::with_nonce("solo", i as u64)?,
                Priority::new(1),
                clock.clone(),
            );
            batch.push((e, c));
        }
        db.run(|txn, _| {
            let batch = batch.clone();
            async move {
                for (e, c) in &batch {
                    e.initialize(&txn).await?;
                    e.register_candidate(&txn, c).await?;
                }
                Ok::<(), ElectionError>(())
            }
        })
        .await?;
        all.extend(batch);
    }
    let t = Instant::now();
    let mut cycles = 0u64;
    while t.elapsed() < Duration::from_secs(3) {
        for (e, c) in &all {
            cycle_once(&db, e, c).await?;
            cycles += 1;
        }
    }
    r.cycles_per_sec_10k_elections = cycles as f64 / t.elapsed().as_secs_f64();
    Ok(())
}

fn row(name: &str, value: String, target: &str, met: bool) {
    println!(
        "{name:<44} {value:>12}  {target:<14} {}",
        if met { "ok" } else { "MISSED" }
    );
}

/// One row of the side-by-side table. `defect`: whether the row is one where this crate must
/// show 0 and the v0.11 recipe more than 0.
fn side(name: &str, ours: String, v011: String, defect: Option<(bool, bool)>) {
    let check = match defect {
        None => String::new(),
        Some((ours_zero, v011_positive)) => format!(
            "0 / > 0     {}",
            if ours_zero && v011_positive {
                "ok"
            } else {
                "UNEXPECTED"
            }
        ),
    };
    println!("{name:<52} {ours:>12} {v011:>12}  {check}");
}

fn defect(ours: u64, v011: u64) -> Option<(bool, bool)> {
    Some((ours == 0, v011 > 0))
}

/// A rate for the capacity table.
fn rate(x: f64) -> String {
    if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// The capacity table, in Markdown: what `n` candidates in each of `m` elections put on a
/// cluster per second when every candidate runs one cycle per heartbeat (one leader renewal
/// and `n − 1` follower cycles per election and heartbeat), from the per-cycle counts.
fn capacity_table(ours: (&CycleCost, &CycleCost), v011: (&CycleCost, &CycleCost), hb: Duration) {
    println!();
    println!(
        "capacity: N candidates x M elections, one cycle per candidate per heartbeat ({} s), per second",
        hb.as_secs_f64()
    );
    println!(
        "| N × M | design | reads/s | writes/s | read conflict ranges/s | write conflict ranges/s | follower commits a renewal can abort/s |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (n, m) in [(3u64, 1u64), (3, 1_000), (100, 100)] {
        for (design, (f, l)) in [("this crate", ours), ("v0.11 recipe", v011)] {
            let per_s = |follower: u64, leader: u64| {
                (leader as f64 + (n - 1) as f64 * follower as f64) * m as f64 / hb.as_secs_f64()
            };
            println!(
                "| {n} × {m} | {design} | {} | {} | {} | {} | {} |",
                rate(per_s(f.probe.storage_reads, l.probe.storage_reads)),
                rate(per_s(f.writes, l.writes)),
                rate(per_s(
                    f.probe.read_conflict_ranges,
                    l.probe.read_conflict_ranges
                )),
                rate(per_s(
                    f.probe.write_conflict_ranges,
                    l.probe.write_conflict_ranges
                )),
                rate(per_s(f.exposed_to_renewals, 0)),
            );
        }
    }
    println!(
        "reads: reads the cluster serves (a repeated get of a key is served by the transaction's cache); \
         conflict ranges: distinct keys per transaction"
    );
}

/// The MemDb measurements: fills `r`, prints the tables. Returns the MemDb times the
/// cluster mode prints beside its own.
async fn memdb_report(r: &mut Report) -> Res<MemDbTimes> {
    let (ours_follower, ours_leader) = io_counts(r).await?;
    let (v011_follower, v011_leader) = v011_io_counts(r).await?;
    let (bare, c1, c10k) = cycle_costs(r).await?;
    let renewals = follower_aborts(r).await?;
    let v011_refreshes = v011_follower_aborts(r).await?;

    let cfg = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
    let mon = OverlapMonitor::default();
    let sampler = mon.start();
    failover(r, &cfg, &mon).await?;
    handovers(r, &cfg, &mon).await?;
    sampler.abort();
    r.health = health::measure().await?;
    r.overlap_instants = mon.overlaps.load(Ordering::Relaxed);
    let samples = mon.samples.load(Ordering::Relaxed);
    v011_failover(r, cfg.lease_duration()).await?;

    let deploy = (
        sim::rolling_deploy(Design::Ours).await?,
        sim::rolling_deploy(Design::V011).await?,
    );
    let skew = (
        sim::clock_skew(Design::Ours).await?,
        sim::clock_skew(Design::V011).await?,
    );
    let resign = (
        sim::resign_reacquire(Design::Ours).await?,
        sim::resign_reacquire(Design::V011).await?,
    );
    r.overlap_instants_preempt = deploy.0.overlap_instants;
    r.v011_overlap_instants_preempt = deploy.1.overlap_instants;
    r.overlap_instants_skew = skew.0.overlap_instants;
    r.v011_overlap_instants_skew = skew.1.overlap_instants;
    r.ballot_regressions = resign.0.ballot_regressions;
    r.v011_ballot_regressions = resign.1.ballot_regressions;
    many_elections(r).await?;
    r.sharded = sharded::measure(
        "MemDb",
        MemDb::new,
        &Subspace::from("sharded"),
        sharded::REPS,
    )
    .await?;
    r.upgrade = upgrade::measure(
        "MemDb",
        MemDb::new,
        &Subspace::from("upgrade"),
        upgrade::TRIALS,
    )
    .await?;

    println!(
        "fdb-leader-election performance report (MemDb; lease 300 ms / heartbeat 100 ms for timings)"
    );
    println!("{:<44} {:>12}  {:<14}", "figure", "value", "target");
    // docs/design.md §5: the configuration, the leader record, its own registration and its
    // own eligibility mark (§13), read concurrently in one round.
    row(
        "key reads per follower cycle",
        r.reads_per_cycle_follower.to_string(),
        "<= 4",
        r.reads_per_cycle_follower <= 4,
    );
    row(
        "key writes per follower cycle",
        r.writes_per_cycle_follower.to_string(),
        "<= 1",
        r.writes_per_cycle_follower <= 1,
    );
    row(
        "key reads per leader cycle",
        r.reads_per_cycle_leader.to_string(),
        "<= 4",
        r.reads_per_cycle_leader <= 4,
    );
    row(
        "key writes per leader cycle",
        r.writes_per_cycle_leader.to_string(),
        "<= 2",
        r.writes_per_cycle_leader <= 2,
    );
    row(
        "range reads per cycle",
        r.range_reads_per_cycle.to_string(),
        "0",
        r.range_reads_per_cycle == 0,
    );
    row(
        &format!(
            "follower cycle / bare txn ({:.2} / {:.2} µs)",
            c1 * 1e6,
            bare * 1e6
        ),
        format!("{:.2}", r.cycle_vs_bare_txn),
        "<= 3",
        r.cycle_vs_bare_txn <= 3.0,
    );
    row(
        &format!("cycle, 10k candidates / 1 ({:.2} µs)", c10k * 1e6),
        format!("{:.2}", r.cycle_10k_vs_1),
        "<= 1.2",
        r.cycle_10k_vs_1 <= 1.2,
    );
    row(
        &format!("follower aborts / 1k cycles ({renewals} renewals)"),
        format!("{:.2}", r.follower_aborts_per_1k_cycles),
        "0",
        r.follower_aborts_per_1k_cycles == 0.0,
    );
    row(
        "crash failover / lease, median (25 trials)",
        format!("{:.3}", r.failover_over_lease),
        "<= 1.1",
        r.failover_over_lease <= 1.1,
    );
    row(
        "crash failover / lease, p99",
        format!("{:.3}", r.failover_over_lease_p99),
        "<= 1.3",
        r.failover_over_lease_p99 <= 1.3,
    );
    row(
        "resign handover ms, median (watches)",
        format!("{:.2}", r.resign_handover_ms),
        "<= 20",
        r.resign_handover_ms <= 20.0,
    );
    row(
        "resign for a crashed heir: next leader / heartbeat, median / p99 (21)",
        format!(
            "{:.2} / {:.2}",
            r.resign_dead_heir_over_heartbeat, r.resign_dead_heir_over_heartbeat_p99
        ),
        "<= 3",
        r.resign_dead_heir_over_heartbeat <= 3.0,
    );
    row(
        "preempt handover ms, median (watches)",
        format!("{:.2}", r.preempt_handover_ms),
        "<= 20",
        r.preempt_handover_ms <= 20.0,
    );
    health_rows(&r.health);
    row(
        "preempt handover / heartbeat (no watches)",
        format!("{:.3}", r.preempt_handover_no_watch_over_heartbeat),
        "<= 1.5",
        r.preempt_handover_no_watch_over_heartbeat <= 1.5,
    );
    row(
        &format!("overlap instants ({samples} 1-ms samples)"),
        r.overlap_instants.to_string(),
        "0",
        r.overlap_instants == 0,
    );
    row(
        "cycles/s, 10,000 elections on one MemDb",
        format!("{:.0}", r.cycles_per_sec_10k_elections),
        "",
        true,
    );

    println!();
    println!(
        "side by side with the v0.11 recipe (examples/perf_report/v011.rs): same MemDb, same transactions, same clocks and schedules"
    );
    println!(
        "{:<52} {:>12} {:>12}  defect (ours / v0.11)",
        "figure", "this crate", "v0.11 recipe"
    );
    let num = |n: u64| n.to_string();
    side(
        "key reads per follower cycle (get calls)",
        num(r.reads_per_cycle_follower),
        num(r.v011_reads_per_cycle_follower),
        None,
    );
    side(
        "key writes per follower cycle",
        num(r.writes_per_cycle_follower),
        num(r.v011_writes_per_cycle_follower),
        None,
    );
    side(
        "key reads per leader cycle (get calls)",
        num(ours_leader.reads),
        num(v011_leader.reads),
        None,
    );
    side(
        "key writes per leader cycle",
        num(ours_leader.writes),
        num(v011_leader.writes),
        None,
    );
    side(
        "reads the cluster serves, follower cycle",
        num(ours_follower.probe.storage_reads),
        num(v011_follower.probe.storage_reads),
        None,
    );
    side(
        "sequential read round trips per cycle",
        num(r.round_trips_per_cycle),
        num(r.v011_round_trips_per_cycle),
        None,
    );
    side(
        "read / write conflict ranges, follower cycle",
        format!(
            "{} / {}",
            ours_follower.probe.read_conflict_ranges, ours_follower.probe.write_conflict_ranges
        ),
        format!(
            "{} / {}",
            v011_follower.probe.read_conflict_ranges, v011_follower.probe.write_conflict_ranges
        ),
        None,
    );
    side(
        "read / write conflict ranges, leader cycle",
        format!(
            "{} / {}",
            ours_leader.probe.read_conflict_ranges, ours_leader.probe.write_conflict_ranges
        ),
        format!(
            "{} / {}",
            v011_leader.probe.read_conflict_ranges, v011_leader.probe.write_conflict_ranges
        ),
        None,
    );
    side(
        "follower conflict ranges a renewal writes",
        num(ours_follower.exposed_to_renewals),
        num(v011_follower.exposed_to_renewals),
        defect(
            ours_follower.exposed_to_renewals,
            v011_follower.exposed_to_renewals,
        ),
    );
    side(
        &format!("follower aborts / 1k cycles ({renewals} / {v011_refreshes} renewals)"),
        format!("{:.2}", r.follower_aborts_per_1k_cycles),
        format!("{:.2}", r.v011_follower_aborts_per_1k_cycles),
        Some((
            r.follower_aborts_per_1k_cycles == 0.0,
            r.v011_follower_aborts_per_1k_cycles > 0.0,
        )),
    );
    side(
        "crash failover / lease, median (25 trials)",
        format!("{:.3}", r.failover_over_lease),
        format!("{:.3}", r.v011_failover_over_lease),
        None,
    );
    side(
        &format!("overlap instants, rolling deploy ({} ms)", deploy.0.samples),
        num(r.overlap_instants_preempt),
        num(r.v011_overlap_instants_preempt),
        defect(r.overlap_instants_preempt, r.v011_overlap_instants_preempt),
    );
    side(
        &format!("overlap instants, clock skew ±2 s ({} ms)", skew.0.samples),
        num(r.overlap_instants_skew),
        num(r.v011_overlap_instants_skew),
        defect(r.overlap_instants_skew, r.v011_overlap_instants_skew),
    );
    side(
        &format!(
            "ballot regressions, 20 resigns ({} / {} tokens)",
            resign.0.acquisitions, resign.1.acquisitions
        ),
        num(r.ballot_regressions),
        num(r.v011_ballot_regressions),
        defect(r.ballot_regressions, r.v011_ballot_regressions),
    );
    capacity_table(
        (&ours_follower, &ours_leader),
        (&v011_follower, &v011_leader),
        fdb_leader_election::DEFAULT_HEARTBEAT_INTERVAL,
    );
    Ok(MemDbTimes {
        bare_txn: bare,
        follower_cycle: c1,
    })
}

/// MemDb's mean times per transaction, in seconds (from the interleaved batches).
#[derive(Clone, Copy, Debug)]
struct MemDbTimes {
    /// A bare read-modify-write transaction.
    #[cfg_attr(not(feature = "fdb"), allow(dead_code))]
    bare_txn: f64,
    /// A follower cycle, one candidate registered.
    #[cfg_attr(not(feature = "fdb"), allow(dead_code))]
    follower_cycle: f64,
}

const USAGE: &str = "usage: perf_report [--cluster-file FILE] [--health-only | --upgrade-only]\n\
    \n\
    Without arguments: the MemDb report. With --cluster-file (feature `fdb`): the MemDb report,\n\
    then the same figures on the FoundationDB cluster FILE names, the JSON line gaining an\n\
    `fdb` object. With --health-only: only the figures of leadership following health, on\n\
    MemDb, and with --cluster-file on the cluster too (its figures in the `fdb` object).\n\
    With --upgrade-only: only the rolling-upgrade figures, on MemDb, and with --cluster-file\n\
    on the cluster too (its figures in the `fdb` object).";

/// What `--cluster-file` says in a build without the FoundationDB adapter.
#[cfg(not(feature = "fdb"))]
const NO_FDB: &str = "--cluster-file needs the FoundationDB mode, which this build lacks: build \
    the example with the `fdb` features, e.g. `cargo run --release --example perf_report \
    --features fdb-7_3,embedded-fdb-include -- --cluster-file FILE`";

/// The command line.
#[derive(Debug, Default)]
struct Args {
    /// `--help`: print the usage and stop.
    help: bool,
    /// `--health-only`: only the health figures (`health.rs`).
    health_only: bool,
    /// `--upgrade-only`: only the rolling-upgrade figures (`upgrade.rs`).
    upgrade_only: bool,
    /// `--cluster-file FILE`: the FoundationDB mode's cluster.
    #[cfg(feature = "fdb")]
    cluster_file: Option<String>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Res<Args> {
    let mut parsed = Args::default();
    while let Some(arg) = args.next() {
        let file = if arg == "--cluster-file" {
            args.next().ok_or("--cluster-file needs a path")?
        } else if let Some(file) = arg.strip_prefix("--cluster-file=") {
            file.to_owned()
        } else if arg == "-h" || arg == "--help" {
            parsed.help = true;
            continue;
        } else if arg == "--health-only" {
            parsed.health_only = true;
            continue;
        } else if arg == "--upgrade-only" {
            parsed.upgrade_only = true;
            continue;
        } else {
            return Err(format!("unknown argument {arg:?}\n{USAGE}").into());
        };
        if file.is_empty() {
            return Err("--cluster-file needs a path".into());
        }
        #[cfg(feature = "fdb")]
        {
            // Checked now, not after the MemDb report's minute.
            std::fs::File::open(&file)
                .map_err(|e| format!("cannot open the cluster file {file}: {e}"))?;
            parsed.cluster_file = Some(file);
        }
        #[cfg(not(feature = "fdb"))]
        {
            let _ = file;
            return Err(NO_FDB.into());
        }
    }
    if parsed.health_only && parsed.upgrade_only {
        return Err(format!("--health-only and --upgrade-only: choose one\n{USAGE}").into());
    }
    Ok(parsed)
}

/// The rolling-upgrade figures alone (`--upgrade-only`): MemDb's, and the cluster's with
/// `--cluster-file`, as one JSON object (the cluster's in `fdb`).
#[derive(Serialize)]
struct UpgradeOnly {
    #[serde(flatten)]
    memdb: upgrade::UpgradeFigures,
    #[serde(skip_serializing_if = "Option::is_none")]
    fdb: Option<upgrade::UpgradeFigures>,
}

/// The health figures alone (`--health-only`): MemDb's, and the cluster's with
/// `--cluster-file`, as one JSON object (the cluster's in `fdb`).
#[derive(Serialize)]
struct HealthOnly {
    #[serde(flatten)]
    memdb: health::HealthFigures,
    #[serde(skip_serializing_if = "Option::is_none")]
    fdb: Option<health::HealthFigures>,
}

/// The health figures' rows.
fn health_rows(h: &health::HealthFigures) {
    let goal = h.health_handover_heartbeat_ms + 2.0 * h.health_commit_ms;
    row(
        "health handover ms, median (unhealthy -> guard)",
        format!("{:.2}", h.health_handover_ms),
        &format!("<= {goal:.0} (hb + 2 commits)"),
        h.health_handover_ms <= goal,
    );
    row(
        "health handover ms, max of 21",
        format!("{:.2}", h.health_handover_max_ms),
        &format!("<= {goal:.0}"),
        h.health_handover_max_ms <= goal,
    );
    row(
        "flapping check: changes / cool-down (fall 3)",
        format!("{:.3}", h.health_flap_changes_per_cool_down),
        "<= 1",
        h.health_flap_changes_per_cool_down <= 1.0,
    );
    row(
        "flapping check: changes / cool-down (fall 1)",
        format!("{:.3}", h.health_flap_changes_per_cool_down_fall1),
        "<= 1",
        h.health_flap_changes_per_cool_down_fall1 <= 1.0,
    );
}

/// Runs the MemDb report and, in cluster mode, the FoundationDB one; prints the JSON line.
async fn report(args: &Args) -> Res<()> {
    if args.health_only {
        let h = health::measure().await?;
        #[cfg(feature = "fdb")]
        let fdb = match &args.cluster_file {
            Some(file) => Some(fdb::measure_health(file).await?),
            None => None,
        };
        #[cfg(not(feature = "fdb"))]
        let fdb = None;
        println!("{:<44} {:>12}  {:<14}", "figure (MemDb)", "value", "target");
        health_rows(&h);
        if let Some(f) = &fdb {
            println!(
                "{:<44} {:>12}  {:<14}",
                "figure (FoundationDB)", "value", "target"
            );
            health_rows(f);
        }
        println!("{}", serde_json::to_string(&HealthOnly { memdb: h, fdb })?);
        return Ok(());
    }
    if args.upgrade_only {
        let memdb = upgrade::measure(
            "MemDb",
            MemDb::new,
            &Subspace::from("upgrade"),
            upgrade::TRIALS,
        )
        .await?;
        #[cfg(feature = "fdb")]
        let fdb = match &args.cluster_file {
            Some(file) => Some(fdb::measure_upgrade(file).await?),
            None => None,
        };
        #[cfg(not(feature = "fdb"))]
        let fdb = None;
        upgrade::print("MemDb", &memdb);
        if let Some(f) = &fdb {
            upgrade::print("FoundationDB", f);
        }
        println!("{}", serde_json::to_string(&UpgradeOnly { memdb, fdb })?);
        return Ok(());
    }
    let mut r = Report::default();
    let memdb_times = memdb_report(&mut r).await?;
    #[cfg(feature = "fdb")]
    if let Some(cluster_file) = &args.cluster_file {
        let figures = fdb::measure(cluster_file, &r).await?;
        fdb::print(&figures, &r, &memdb_times);
        r.fdb = Some(figures);
    }
    upgrade::print("MemDb", &r.upgrade);
    #[cfg(feature = "fdb")]
    if let Some(f) = &r.fdb {
        upgrade::print("FoundationDB", &f.upgrade);
        println!(
            "{:<44} {:>12}  {:<14}",
            "figure (FoundationDB)", "value", "target"
        );
        health_rows(&f.health);
    }
    #[cfg(not(feature = "fdb"))]
    let _ = (args, memdb_times);
    #[cfg(feature = "fdb")]
    let cluster = r.fdb.as_ref().map(|f| &f.sharded);
    #[cfg(not(feature = "fdb"))]
    let cluster = None;
    sharded::print(&r.sharded, cluster);
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}

fn run() -> Res<()> {
    let args = parse_args(std::env::args().skip(1))?;
    if args.help {
        println!("{USAGE}");
        return Ok(());
    }
    // SAFETY: `boot` may run once per process, and the guard it returns must be dropped before
    // the process exits. This is the only call in this example, and `network` lives in this
    // frame: it is dropped (network stopped, thread joined) after the runtime, and with it
    // every task holding a `Database`, is gone, before `run` returns.
    #[cfg(feature = "fdb")]
    #[allow(
        unsafe_code,
        reason = "foundationdb::boot is unsafe only because its guard must be dropped before \
                  exit, which this frame guarantees"
    )]
    let network = args
        .cluster_file
        .is_some()
        .then(|| unsafe { foundationdb::boot() });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(report(&args));
    drop(runtime);
    #[cfg(feature = "fdb")]
    drop(network);
    result
}

/// An error and its sources, `: `-separated.
fn chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perf_report: {}", chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
