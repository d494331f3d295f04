//! The report's FoundationDB mode (`--cluster-file FILE`, feature `fdb`): the figures of the
//! MemDb report that depend on a real cluster, taken on one, through the crate's public API
//! on `Arc<foundationdb::Database>` (`LeaderElection::run_cycle`, `ElectionDatabase::transact`,
//! `Runner`). Everything is written under a fresh subspace `("fdb-leader-election-perf",
//! nonce)`, cleared at the end (also when a scenario failed).
//!
//! How each figure is taken:
//!
//! - **Cycle latency** (`*_ms_p50`, `*_ms_p99`): one election, a leader and a follower (real
//!   clocks, lease 10 s, so the leader renews at every cycle and the follower follows). Each
//!   cycle is one `run_cycle` call (a transaction from its read version to its commit). The
//!   bare transaction beside each is a read-modify-write through the same `transact` loop
//!   with the same shape as the cycle, taken from the MemDb report's counts: as many key
//!   reads (serializable, all issued in as many rounds as the cycle waits for, one here), and
//!   as many key writes (3 reads and 1 write for the follower, 3 and 2 for the leader). The
//!   four kinds run in interleaved batches of 20, 15 rounds, so load from elsewhere falls on
//!   all of them alike; the ratios are p50 over p50 and p99 over p99.
//! - **Follower aborts** (`follower_aborts_per_1k_cycles`, and `v011_` for the recipe): 100
//!   followers, each a task of its own, cycle back to back, all at once, for 4 s, while the
//!   leader renews back to back in a task of its own for the same 4 s (a cycle under way at
//!   the end completes, and counts). Every cycle goes
//!   through `ElectionDatabase::transact` on the cluster, which retries conflicts (with
//!   FoundationDB's back-off); the figure counts the attempts beyond one per cycle. The v0.11
//!   recipe (`v011.rs`) runs the same schedule through the same loop on its own election;
//!   three runs of each, alternating, summed. The follower cycles and the renewals committed
//!   meanwhile are reported beside (`contention_cycles`, `renewals_under_contention`, and
//!   their `v011_` twins). A fixed window, not a fixed number of cycles, so that both designs
//!   are exposed to their leader for the same time: with a fixed count, this crate's
//!   followers finish within a fraction of a second, the recipe's, backing off after each
//!   abort, take far longer.
//! - **Crash failover / lease** (`failover_over_lease`, `_p99`): the MemDb report's scenario
//!   (three `Runner`s, lease 300 ms, heartbeat 100 ms, the leader aborted at a pseudo-random
//!   phase once a lease has passed), 15 trials, each on a fresh election.
//! - **Handovers** (`resign_handover_ms`, `preempt_handover_ms`, median and p99 of 11 trials):
//!   the MemDb scenarios, with FoundationDB's watches.
//! - **Overlap instants**: two valid guards at one instant, sampled every millisecond over the
//!   runner scenarios (`overlap_samples`).
//! - **Cycles per second** for 1, 100 and 1,000 elections: each election has one candidate,
//!   which renews back to back (`run_cycle`) in a task of its own; all elections at once, for
//!   3 s. Cycles that failed (timeouts under load) are not counted, and reported beside
//!   (`failed_cycles`).
//!
//! It measures; it fails only if a scenario did not do what it is meant to (no leader, a
//! follower that stopped following, no renewal during the contention).

#![warn(clippy::arithmetic_side_effects)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fdb_leader_election::{
    Action, Candidate, CandidateId, ElectionConfig, ElectionDatabase, ElectionError,
    ElectionResult, ElectionTxn, LeaderElection, Priority, ReadMode, SystemClock,
};
use foundationdb::Database;
use foundationdb_tuple::Subspace;
use serde::Serialize;

use crate::clocks::HostClock;
use crate::v011::{self, ElectionResult as V011Result, V011Config, V011Election, V011Host};
use crate::{
    MemDbTimes, OverlapMonitor, Report, Res, dead_heir_trial, failover_trials, median, percentile,
    preempt_trial, resign_trial,
};

/// The bound of every measuring transaction: far beyond what a cluster that works takes, so
/// that a slow machine makes a figure larger, never the report fail.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Followers in the contention scenario.
const FOLLOWERS: usize = 100;
/// How long each run of the contention scenario lets the followers cycle.
const CONTENTION_WINDOW: Duration = Duration::from_secs(4);
/// Runs of the contention scenario per design.
const CONTENTION_RUNS: u32 = 3;
/// Crash failovers.
const FAILOVER_TRIALS: u32 = 15;
/// Resign and preempt handovers, each.
const HANDOVER_TRIALS: u32 = 11;
/// How long the throughput scenario runs per election count.
const THROUGHPUT_WINDOW: Duration = Duration::from_secs(3);

/// The cluster's figures (the `fdb` object of the JSON line).
#[derive(Serialize, Debug, Default)]
pub(crate) struct FdbReport {
    /// Wall-clock seconds the FoundationDB measurements took.
    pub(crate) seconds: f64,
    /// A follower cycle (`run_cycle`), ms.
    pub(crate) follower_cycle_ms_p50: f64,
    /// p99 of the same.
    pub(crate) follower_cycle_ms_p99: f64,
    /// A leader renewal (`run_cycle`), ms.
    pub(crate) leader_cycle_ms_p50: f64,
    /// p99 of the same.
    pub(crate) leader_cycle_ms_p99: f64,
    /// The bare read-modify-write with a follower cycle's key reads and writes, ms.
    pub(crate) bare_follower_txn_ms_p50: f64,
    /// p99 of the same.
    pub(crate) bare_follower_txn_ms_p99: f64,
    /// The bare read-modify-write with a leader cycle's key reads and writes, ms.
    pub(crate) bare_leader_txn_ms_p50: f64,
    /// p99 of the same.
    pub(crate) bare_leader_txn_ms_p99: f64,
    /// Follower cycle over its bare transaction, p50 over p50.
    pub(crate) follower_cycle_vs_bare_txn_p50: f64,
    /// The same, p99 over p99.
    pub(crate) follower_cycle_vs_bare_txn_p99: f64,
    /// Leader cycle over its bare transaction, p50 over p50.
    pub(crate) leader_cycle_vs_bare_txn_p50: f64,
    /// The same, p99 over p99.
    pub(crate) leader_cycle_vs_bare_txn_p99: f64,
    /// Key reads and writes of the bare transactions (follower, leader), from the MemDb
    /// report's counts, and their read rounds.
    pub(crate) bare_shape: BareShape,
    /// Follower cycles committed in the contention scenario: this crate.
    pub(crate) contention_cycles: u64,
    /// The same for the v0.11 recipe.
    pub(crate) v011_contention_cycles: u64,
    /// Follower attempts beyond one per cycle, per 1,000 cycles: this crate.
    pub(crate) follower_aborts_per_1k_cycles: f64,
    /// The same for the v0.11 recipe.
    pub(crate) v011_follower_aborts_per_1k_cycles: f64,
    /// Leader renewals committed while the followers cycled: this crate.
    pub(crate) renewals_under_contention: u64,
    /// The same for the v0.11 recipe (its refreshes).
    pub(crate) v011_refreshes_under_contention: u64,
    /// Crash failover over the lease, median.
    pub(crate) failover_over_lease: f64,
    /// The same, p99 (nearest rank).
    pub(crate) failover_over_lease_p99: f64,
    /// Resign handover, ms, median.
    pub(crate) resign_handover_ms: f64,
    /// A resignation reserved for a follower that had just crashed: the time to the next
    /// leader, in heartbeats, median and p99.
    pub(crate) resign_dead_heir_over_heartbeat: f64,
    pub(crate) resign_dead_heir_over_heartbeat_p99: f64,
    /// The same, p99 (nearest rank).
    pub(crate) resign_handover_ms_p99: f64,
    /// Preempt handover, ms, median.
    pub(crate) preempt_handover_ms: f64,
    /// The same, p99 (nearest rank).
    pub(crate) preempt_handover_ms_p99: f64,
    /// 1-ms samples with two valid guards, over the runner scenarios.
    pub(crate) overlap_instants: u64,
    /// 1-ms samples taken.
    pub(crate) overlap_samples: u64,
    /// Cycles per second, one election.
    pub(crate) cycles_per_sec_1_election: f64,
    /// Cycles per second, 100 elections at once.
    pub(crate) cycles_per_sec_100_elections: f64,
    /// Cycles per second, 1,000 elections at once.
    pub(crate) cycles_per_sec_1k_elections: f64,
    /// Cycles of the throughput scenario that failed (timed out under load), all counts.
    pub(crate) failed_cycles: u64,
    /// Sharded leadership's figures on the cluster (`sharded.rs`), as `shard_*` keys: the
    /// same keys as the MemDb ones.
    #[serde(flatten)]
    pub(crate) sharded: crate::sharded::ShardFigures,
    /// Rolling upgrades on the cluster (`upgrade.rs`), as `upgrade_*` keys: the same keys as
    /// the MemDb ones.
    #[serde(flatten)]
    pub(crate) upgrade: crate::upgrade::UpgradeFigures,
    /// Leadership following health on the cluster (`health.rs`, `measure_on`): the same
    /// keys as the MemDb ones.
    #[serde(flatten)]
    pub(crate) health: crate::health::HealthFigures,
}

/// The shape of the bare transactions.
#[derive(Serialize, Debug, Default, Clone, Copy)]
pub(crate) struct BareShape {
    /// Key reads of the follower's bare transaction.
    pub(crate) follower_reads: u64,
    /// Key writes of the follower's bare transaction.
    pub(crate) follower_writes: u64,
    /// Key reads of the leader's bare transaction.
    pub(crate) leader_reads: u64,
    /// Key writes of the leader's bare transaction.
    pub(crate) leader_writes: u64,
    /// Sequential read rounds of both.
    pub(crate) rounds: u64,
}

/// Measures everything on the cluster `cluster_file` names, under a fresh subspace that is
/// cleared at the end. `memdb` gives the per-cycle counts the bare transactions copy.
pub(crate) async fn measure(cluster_file: &str, memdb: &Report) -> Res<FdbReport> {
    let started = Instant::now();
    let db = Arc::new(Database::new(Some(cluster_file))?);
    let nonce: u64 = rand::random();
    let root = Subspace::from(("fdb-leader-election-perf", nonce));
    reachable(&db, &root, cluster_file).await?;
    let mut f = FdbReport::default();
    let result = scenarios(&db, &root, memdb, &mut f).await;
    let cleared = clear(&db, &root).await;
    result?;
    cleared?;
    f.seconds = started.elapsed().as_secs_f64();
    Ok(f)
}

/// The rolling-upgrade figures alone (`--upgrade-only`), on the cluster `cluster_file` names,
/// under a fresh subspace that is cleared at the end.
pub(crate) async fn measure_upgrade(cluster_file: &str) -> Res<crate::upgrade::UpgradeFigures> {
    on_fresh_root(cluster_file, |db, root| async move {
        let fresh = || Arc::clone(&db);
        let root = root.subspace(&("upgrade",));
        crate::upgrade::measure("FoundationDB", fresh, &root, crate::upgrade::TRIALS).await
    })
    .await
}

/// `body` on the cluster `cluster_file` names, under a fresh subspace that is cleared at the
/// end (also after `body` failed).
async fn on_fresh_root<T, Fut>(
    cluster_file: &str,
    body: impl FnOnce(Arc<Database>, Subspace) -> Fut,
) -> Res<T>
where
    Fut: std::future::Future<Output = Res<T>>,
{
    let db = Arc::new(Database::new(Some(cluster_file))?);
    let nonce: u64 = rand::random();
    let root = Subspace::from(("fdb-leader-election-perf", nonce));
    reachable(&db, &root, cluster_file).await?;
    let result = body(Arc::clone(&db), root.clone()).await;
    let cleared = clear(&db, &root).await;
    let figures = result?;
    cleared?;
    Ok(figures)
}

/// Clears everything the report wrote under `root` (also after a scenario failed).
async fn clear(db: &Arc<Database>, root: &Subspace) -> Res<()> {
    let (begin, end) = root.range();
    db.run(|trx, _| {
        let (begin, end) = (begin.clone(), end.clone());
        async move {
            trx.clear_range(&begin, &end);
            Ok(())
        }
    })
    .await?;
    Ok(())
}

/// One read, bounded: a cluster that is down makes FoundationDB retry for ever.
async fn reachable(db: &Arc<Database>, root: &Subspace, cluster_file: &str) -> Res<()> {
    let bound = Duration::from_secs(10);
    let key = root.pack(&("reachable",));
    db.transact(bound, |txn| {
        let key = key.clone();
        async move {
            txn.get(&key, ReadMode::Snapshot).await?;
            Ok(())
        }
    })
    .await
    .map_err(|e| {
        format!(
            "cannot read from the cluster of {cluster_file} within {bound:?}: {}",
            crate::chain(&e)
        )
    })?;
    Ok(())
}

/// Says on stderr how long a phase took (the run takes minutes; stdout keeps the report).
fn progress(phase: &str, since: Instant) -> Instant {
    eprintln!(
        "perf_report: FoundationDB {phase}: {:.1} s",
        since.elapsed().as_secs_f64()
    );
    Instant::now()
}

async fn scenarios(
    db: &Arc<Database>,
    root: &Subspace,
    memdb: &Report,
    f: &mut FdbReport,
) -> Res<()> {
    let t = Instant::now();
    latency(db, root, memdb, f).await?;
    let t = progress("cycle latency", t);
    contention(db, root, f).await?;
    let t = progress("contention", t);

    let cfg = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
    let mon = OverlapMonitor::default();
    let sampler = mon.start();
    let runners = runner_scenarios(db, root, &cfg, &mon, f).await;
    sampler.abort();
    runners?;
    f.overlap_instants = mon.overlaps.load(Ordering::Relaxed);
    f.overlap_samples = mon.samples.load(Ordering::Relaxed);
    let t = progress("failover and handovers", t);

    let mut failed = 0;
    f.cycles_per_sec_1_election = throughput(db, root, 1, &mut failed).await?;
    f.cycles_per_sec_100_elections = throughput(db, root, 100, &mut failed).await?;
    f.cycles_per_sec_1k_elections = throughput(db, root, 1_000, &mut failed).await?;
    f.failed_cycles = failed;
    progress("throughput", t);

    f.sharded = crate::sharded::measure(
        "FoundationDB",
        || Arc::clone(db),
        &root.subspace(&("sharded",)),
        crate::sharded::REPS,
    )
    .await?;
    let t = Instant::now();
    f.upgrade = crate::upgrade::measure(
        "FoundationDB",
        || Arc::clone(db),
        &root.subspace(&("upgrade",)),
        crate::upgrade::TRIALS,
    )
    .await?;
    let t = progress("rolling upgrades", t);
    f.health = crate::health::measure_on(|| Arc::clone(db), &root.subspace(&("health",))).await?;
    progress("health", t);
    Ok(())
}

/// The health figures alone (`--health-only`), on the cluster `cluster_file` names, under a
/// fresh subspace that is cleared at the end.
pub(crate) async fn measure_health(cluster_file: &str) -> Res<crate::health::HealthFigures> {
    on_fresh_root(cluster_file, |db, root| async move {
        crate::health::measure_on(|| Arc::clone(&db), &root.subspace(&("health",))).await
    })
    .await
}

/// The configuration of the measuring elections: the defaults (lease 10 s, heartbeat 3 s),
/// with `run_cycle`'s transaction bound raised from 1 s to 2 s, so that a loaded machine
/// times out fewer cycles.
fn measuring_config() -> Res<ElectionConfig> {
    Ok(ElectionConfig::builder()
        .transaction_timeout(Duration::from_secs(2))
        .build()?)
}

/// Initialises `election` with `cfg` and registers `candidates`, in one transaction.
async fn set_up(
    db: &Arc<Database>,
    election: &LeaderElection,
    cfg: &ElectionConfig,
    candidates: &[Candidate],
) -> Res<()> {
    db.transact(TIMEOUT, |txn| {
        let (e, cfg, cs) = (election.clone(), cfg.clone(), candidates.to_vec());
        async move {
            e.initialize_with_config(&txn, &cfg).await?;
            for c in &cs {
                e.register_candidate(&txn, c).await?;
            }
            Ok(())
        }
    })
    .await?;
    Ok(())
}

fn candidate(label: &str) -> Res<Candidate> {
    Ok(Candidate::new(
        CandidateId::random(label)?,
        Priority::new(1),
    ))
}

/// The bare read-modify-write: reads every key of `keys` serializably, in `rounds` rounds
/// (the reads of a round are all issued before any is awaited: FoundationDB sends a read when
/// it is issued), then writes the first `writes` of them (a counter each).
async fn bare_txn<D: ElectionDatabase>(
    db: &D,
    keys: &[Vec<u8>],
    writes: usize,
    rounds: usize,
) -> Res<()> {
    let per_round = keys.len().div_ceil(rounds.max(1)).max(1);
    db.transact(TIMEOUT, |txn| async move {
        let mut values = Vec::with_capacity(keys.len());
        for round in keys.chunks(per_round) {
            let reads: Vec<_> = round
                .iter()
                .map(|k| txn.get(k, ReadMode::Serializable))
                .collect();
            for read in reads {
                values.push(read.await?);
            }
        }
        for (key, value) in keys.iter().zip(&values).take(writes) {
            let n = value
                .as_deref()
                .and_then(|v| <[u8; 8]>::try_from(v).ok())
                .map_or(0, u64::from_le_bytes);
            txn.set(key, &n.wrapping_add(1).to_le_bytes());
        }
        Ok::<(), ElectionError>(())
    })
    .await?;
    Ok(())
}

/// The instant `d` from now.
fn after(d: Duration) -> Res<Instant> {
    Ok(Instant::now()
        .checked_add(d)
        .ok_or("the monotonic clock overflowed")?)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Cycle latency against the bare transactions (see the module docs).
async fn latency(
    db: &Arc<Database>,
    root: &Subspace,
    memdb: &Report,
    f: &mut FdbReport,
) -> Res<()> {
    const ROUNDS: usize = 15;
    const BATCH: usize = 20;
    let shape = BareShape {
        follower_reads: memdb.reads_per_cycle_follower,
        follower_writes: memdb.writes_per_cycle_follower,
        leader_reads: memdb.reads_per_cycle_leader,
        leader_writes: memdb.writes_per_cycle_leader,
        rounds: memdb.round_trips_per_cycle,
    };
    let keys = |n: u64, name: &str| -> Vec<Vec<u8>> {
        (0..n).map(|i| root.pack(&("bare", name, i))).collect()
    };
    let (f_keys, l_keys) = (
        keys(shape.follower_reads, "follower"),
        keys(shape.leader_reads, "leader"),
    );
    let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let rounds = count(shape.rounds);

    let election = LeaderElection::new(root.subspace(&("latency",)));
    let (leader, follower) = (candidate("leader")?, candidate("follower")?);
    set_up(
        db,
        &election,
        &measuring_config()?,
        &[leader.clone(), follower.clone()],
    )
    .await?;
    if !election.run_cycle(db, &leader).await?.is_leader() {
        return Err("fdb latency: the first candidate was not elected".into());
    }
    election.run_cycle(db, &follower).await?; // first sight

    let (mut bare_f, mut bare_l, mut cyc_f, mut cyc_l) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for _ in 0..BATCH {
            let t = Instant::now();
            bare_txn(db, &f_keys, count(shape.follower_writes), rounds).await?;
            bare_f.push(ms(t.elapsed()));
        }
        for _ in 0..BATCH {
            let t = Instant::now();
            let out = election.run_cycle(db, &follower).await?;
            cyc_f.push(ms(t.elapsed()));
            if out.action != Action::None || out.is_leader() {
                return Err(format!("fdb latency: the follower did {:?}", out.action).into());
            }
        }
        for _ in 0..BATCH {
            let t = Instant::now();
            bare_txn(db, &l_keys, count(shape.leader_writes), rounds).await?;
            bare_l.push(ms(t.elapsed()));
        }
        for _ in 0..BATCH {
            let t = Instant::now();
            let out = election.run_cycle(db, &leader).await?;
            cyc_l.push(ms(t.elapsed()));
            if out.action != Action::Renewed {
                return Err(format!("fdb latency: the leader did {:?}", out.action).into());
            }
        }
    }
    f.bare_shape = shape;
    f.bare_follower_txn_ms_p50 = median(&mut bare_f);
    f.bare_follower_txn_ms_p99 = percentile(&mut bare_f, 0.99);
    f.bare_leader_txn_ms_p50 = median(&mut bare_l);
    f.bare_leader_txn_ms_p99 = percentile(&mut bare_l, 0.99);
    f.follower_cycle_ms_p50 = median(&mut cyc_f);
    f.follower_cycle_ms_p99 = percentile(&mut cyc_f, 0.99);
    f.leader_cycle_ms_p50 = median(&mut cyc_l);
    f.leader_cycle_ms_p99 = percentile(&mut cyc_l, 0.99);
    f.follower_cycle_vs_bare_txn_p50 = f.follower_cycle_ms_p50 / f.bare_follower_txn_ms_p50;
    f.follower_cycle_vs_bare_txn_p99 = f.follower_cycle_ms_p99 / f.bare_follower_txn_ms_p99;
    f.leader_cycle_vs_bare_txn_p50 = f.leader_cycle_ms_p50 / f.bare_leader_txn_ms_p50;
    f.leader_cycle_vs_bare_txn_p99 = f.leader_cycle_ms_p99 / f.bare_leader_txn_ms_p99;
    Ok(())
}

/// One contention run's counts.
#[derive(Clone, Copy, Debug, Default)]
struct Contention {
    /// Follower attempts beyond one per cycle.
    aborted: u64,
    /// Follower cycles.
    cycles: u64,
    /// Leader renewals (refreshes) committed meanwhile.
    renewals: u64,
}

impl Contention {
    fn add(&mut self, other: Contention) {
        self.aborted = self.aborted.saturating_add(other.aborted);
        self.cycles = self.cycles.saturating_add(other.cycles);
        self.renewals = self.renewals.saturating_add(other.renewals);
    }

    fn per_1k(&self) -> f64 {
        self.aborted as f64 * 1000.0 / self.cycles.max(1) as f64
    }
}

/// Follower aborts of both designs under the same contention (see the module docs).
async fn contention(db: &Arc<Database>, root: &Subspace, f: &mut FdbReport) -> Res<()> {
    let (mut ours, mut theirs) = (Contention::default(), Contention::default());
    for run in 0..CONTENTION_RUNS {
        ours.add(contention_ours(db, root, run).await?);
        theirs.add(contention_v011(db, root, run).await?);
    }
    for (design, c) in [("this crate", ours), ("v0.11", theirs)] {
        if c.renewals < u64::from(CONTENTION_RUNS) || c.cycles == 0 {
            return Err(format!(
                "fdb contention ({design}): {} renewals while the followers cycled {} times: \
                 no contention",
                c.renewals, c.cycles
            )
            .into());
        }
    }
    f.contention_cycles = ours.cycles;
    f.follower_aborts_per_1k_cycles = ours.per_1k();
    f.renewals_under_contention = ours.renewals;
    f.v011_contention_cycles = theirs.cycles;
    f.v011_follower_aborts_per_1k_cycles = theirs.per_1k();
    f.v011_refreshes_under_contention = theirs.renewals;
    Ok(())
}

/// Waits for every follower task; their cycles in total, or the first error.
async fn join_followers(tasks: Vec<tokio::task::JoinHandle<Res<u64>>>) -> Res<u64> {
    let (mut cycles, mut failed) = (0u64, None);
    for t in tasks {
        match t.await.map_err(Into::into).and_then(|r| r) {
            Ok(n) => cycles = cycles.saturating_add(n),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(cycles),
    }
}

/// One cycle of this crate through `transact`, each attempt counted; adopted after its
/// commit.
async fn counted_cycle(
    db: &Arc<Database>,
    election: &LeaderElection,
    c: &Candidate,
    attempts: &AtomicU64,
) -> Res<(Action, ElectionResult)> {
    let cycle = db
        .transact(TIMEOUT, |txn| {
            attempts.fetch_add(1, Ordering::Relaxed);
            let (e, c) = (election.clone(), c.clone());
            async move { e.run_election_cycle(&txn, &c).await }
        })
        .await?;
    let action = cycle.action();
    Ok((action, c.adopt(cycle)))
}

async fn contention_ours(db: &Arc<Database>, root: &Subspace, run: u32) -> Res<Contention> {
    let election = LeaderElection::new(root.subspace(&("aborts", run)));
    let leader = candidate("leader")?;
    let followers = (0..FOLLOWERS)
        .map(|i| candidate(&format!("f{i}")))
        .collect::<Res<Vec<_>>>()?;
    let mut all = vec![leader.clone()];
    all.extend(followers.iter().cloned());
    set_up(db, &election, &measuring_config()?, &all).await?;
    if !election.run_cycle(db, &leader).await?.is_leader() {
        return Err("fdb contention: the first candidate was not elected".into());
    }
    for c in &followers {
        election.run_cycle(db, c).await?; // first sight
    }
    let attempts = Arc::new(AtomicU64::new(0));
    let deadline = after(CONTENTION_WINDOW)?;
    let renewing = {
        let (db, e, c, deadline) = (Arc::clone(db), election.clone(), leader.clone(), deadline);
        tokio::spawn(async move {
            let (mut renewals, own) = (0u64, AtomicU64::new(0));
            while Instant::now() < deadline {
                match counted_cycle(&db, &e, &c, &own).await? {
                    (Action::Renewed, _) => renewals = renewals.saturating_add(1),
                    (action, _) => {
                        return Err(format!("fdb contention: the leader did {action:?}").into());
                    }
                }
            }
            Res::Ok(renewals)
        })
    };
    let tasks: Vec<_> = followers
        .into_iter()
        .map(|c| {
            let (db, e, attempts) = (Arc::clone(db), election.clone(), Arc::clone(&attempts));
            tokio::spawn(async move {
                let mut cycles = 0u64;
                while Instant::now() < deadline {
                    let (action, result) = counted_cycle(&db, &e, &c, &attempts).await?;
                    if action != Action::None || result.is_leader() {
                        return Err(format!("fdb contention: a follower did {action:?}").into());
                    }
                    cycles = cycles.saturating_add(1);
                }
                Res::Ok(cycles)
            })
        })
        .collect();
    let followed = join_followers(tasks).await;
    let renewals = renewing.await??;
    let cycles = followed?;
    Ok(Contention {
        aborted: attempts.load(Ordering::Relaxed).saturating_sub(cycles),
        cycles,
        renewals,
    })
}

async fn contention_v011(db: &Arc<Database>, root: &Subspace, run: u32) -> Res<Contention> {
    let election = V011Election::new(&root.subspace(&("v011-aborts", run)));
    v011::transact(db, TIMEOUT, |txn| {
        let e = election.clone();
        async move { e.initialize_with_config(&txn, V011Config::default()).await }
    })
    .await?;
    let truth: Arc<SystemClock> = Arc::new(SystemClock);
    let hosts: Vec<V011Host> = (0..=FOLLOWERS)
        .map(|i| {
            let clock = Arc::new(HostClock::exact(truth.clone()));
            V011Host::new(format!("v011-{run}-{i}"), 1, clock)
        })
        .collect();
    for h in &hosts {
        h.register_on(db, &election, TIMEOUT).await?;
    }
    let (leader, followers) = hosts.split_first().ok_or("no hosts")?;
    let own = AtomicU64::new(0);
    if !matches!(
        leader.cycle_on(db, &election, TIMEOUT, &own).await?,
        V011Result::Leader(_)
    ) {
        return Err("fdb contention (v0.11): the first host was not elected".into());
    }
    let attempts = Arc::new(AtomicU64::new(0));
    let deadline = after(CONTENTION_WINDOW)?;
    let refreshing = {
        let (db, e, h, deadline) = (Arc::clone(db), election.clone(), leader.clone(), deadline);
        tokio::spawn(async move {
            let (mut refreshes, own) = (0u64, AtomicU64::new(0));
            while Instant::now() < deadline {
                match h.cycle_on(&db, &e, TIMEOUT, &own).await? {
                    V011Result::Leader(_) => refreshes = refreshes.saturating_add(1),
                    V011Result::Follower(_) => {
                        return Err("fdb contention (v0.11): the leader lost its lease".into());
                    }
                }
            }
            Res::Ok(refreshes)
        })
    };
    let tasks: Vec<_> = followers
        .iter()
        .cloned()
        .map(|h| {
            let (db, e, attempts) = (Arc::clone(db), election.clone(), Arc::clone(&attempts));
            tokio::spawn(async move {
                let mut cycles = 0u64;
                while Instant::now() < deadline {
                    if let V011Result::Leader(_) = h.cycle_on(&db, &e, TIMEOUT, &attempts).await? {
                        return Err("fdb contention (v0.11): a follower claimed".into());
                    }
                    cycles = cycles.saturating_add(1);
                }
                Res::Ok(cycles)
            })
        })
        .collect();
    let followed = join_followers(tasks).await;
    let refreshes = refreshing.await??;
    let cycles = followed?;
    Ok(Contention {
        aborted: attempts.load(Ordering::Relaxed).saturating_sub(cycles),
        cycles,
        renewals: refreshes,
    })
}

/// Crash failovers and handovers with real `Runner`s on the cluster.
async fn runner_scenarios(
    db: &Arc<Database>,
    root: &Subspace,
    cfg: &ElectionConfig,
    mon: &OverlapMonitor,
    f: &mut FdbReport,
) -> Res<()> {
    let mut ratios = failover_trials(
        FAILOVER_TRIALS,
        cfg,
        mon,
        Duration::from_secs(10),
        |trial| Ok((Arc::clone(db), root.subspace(&("failover", trial)))),
    )
    .await?;
    f.failover_over_lease = median(&mut ratios);
    f.failover_over_lease_p99 = percentile(&mut ratios, 0.99);
    let (mut resign, mut preempt) = (Vec::new(), Vec::new());
    for trial in 0..HANDOVER_TRIALS {
        let space = root.subspace(&("resign", trial));
        resign.push(ms(resign_trial(Arc::clone(db), space, cfg, mon).await?));
        let space = root.subspace(&("preempt", trial));
        preempt.push(ms(preempt_trial(Arc::clone(db), space, cfg, mon).await?));
    }
    f.resign_handover_ms = median(&mut resign);
    f.resign_handover_ms_p99 = percentile(&mut resign, 0.99);
    let mut dead_heir = Vec::new();
    for trial in 0..HANDOVER_TRIALS {
        let space = root.subspace(&("dead-heir", trial));
        let took = dead_heir_trial(Arc::clone(db), space, cfg, mon).await?;
        dead_heir.push(took.as_secs_f64() / cfg.heartbeat_interval().as_secs_f64());
    }
    f.resign_dead_heir_over_heartbeat = median(&mut dead_heir.clone());
    f.resign_dead_heir_over_heartbeat_p99 = percentile(&mut dead_heir, 0.99);
    f.preempt_handover_ms = median(&mut preempt);
    f.preempt_handover_ms_p99 = percentile(&mut preempt, 0.99);
    Ok(())
}

/// Cycles per second of `n` elections at once, one candidate each renewing back to back;
/// adds the cycles that failed to `failed`.
async fn throughput(db: &Arc<Database>, root: &Subspace, n: usize, failed: &mut u64) -> Res<f64> {
    let cfg = measuring_config()?;
    let mut elections = Vec::with_capacity(n);
    for i in 0..n {
        let e = LeaderElection::new(root.subspace(&("many", n, i)));
        elections.push((e, candidate("solo")?));
    }
    for chunk in elections.chunks(100) {
        db.transact(TIMEOUT, |txn| {
            let (chunk, cfg) = (chunk.to_vec(), cfg.clone());
            async move {
                for (e, c) in &chunk {
                    e.initialize_with_config(&txn, &cfg).await?;
                    e.register_candidate(&txn, c).await?;
                }
                Ok(())
            }
        })
        .await?;
    }
    for (e, c) in &elections {
        if !e.run_cycle(db, c).await?.is_leader() {
            return Err("fdb throughput: a sole candidate was not elected".into());
        }
    }
    let started = Instant::now();
    let deadline = after(THROUGHPUT_WINDOW)?;
    let tasks: Vec<_> = elections
        .into_iter()
        .map(|(e, c)| {
            let db = Arc::clone(db);
            tokio::spawn(async move {
                let (mut renewed, mut failed) = (0u64, 0u64);
                while Instant::now() < deadline {
                    match e.run_cycle(&db, &c).await {
                        Ok(out) if out.action == Action::Renewed => {
                            renewed = renewed.saturating_add(1);
                        }
                        // A sole leader whose commit's outcome was unknown (1021, a timeout
                        // on a loaded machine) may not recognise its own record at once, and
                        // waits for it to lapse before acquiring again: a cycle that did not
                        // renew, counted with the failures, not a broken measurement.
                        Ok(_) | Err(_) => failed = failed.saturating_add(1),
                    }
                }
                Res::Ok((renewed, failed))
            })
        })
        .collect();
    let mut renewed = 0u64;
    for t in tasks {
        let (r, fl) = t.await??;
        renewed = renewed.saturating_add(r);
        *failed = failed.saturating_add(fl);
    }
    if renewed == 0 {
        return Err(format!("fdb throughput: no cycle committed with {n} elections").into());
    }
    Ok(renewed as f64 / started.elapsed().as_secs_f64())
}

/// The cluster's table, each figure beside its MemDb twin (`—` where MemDb has none).
pub(crate) fn print(f: &FdbReport, m: &Report, t: &MemDbTimes) {
    println!();
    println!(
        "on FoundationDB ({:.0} s), beside MemDb: cycles and bare transactions through the same loop; \
         runner timings with lease 300 ms / heartbeat 100 ms",
        f.seconds
    );
    println!("{:<68} {:>18} {:>14}", "figure", "FoundationDB", "MemDb");
    let line = |name: &str, fdb: String, memdb: String| {
        println!("{name:<68} {fdb:>18} {memdb:>14}");
    };
    let pair = |a: f64, b: f64, digits: usize| format!("{a:.digits$} / {b:.digits$}");
    let none = || "—".to_owned();
    let s = f.bare_shape;
    line(
        &format!(
            "bare txn, {} reads / {} write(s), ms p50 / p99 (MemDb mean)",
            s.follower_reads, s.follower_writes
        ),
        pair(f.bare_follower_txn_ms_p50, f.bare_follower_txn_ms_p99, 2),
        format!("{:.4}", t.bare_txn * 1e3),
    );
    line(
        "follower cycle, ms p50 / p99 (MemDb mean)",
        pair(f.follower_cycle_ms_p50, f.follower_cycle_ms_p99, 2),
        format!("{:.4}", t.follower_cycle * 1e3),
    );
    line(
        &format!(
            "bare txn, {} reads / {} writes, ms p50 / p99",
            s.leader_reads, s.leader_writes
        ),
        pair(f.bare_leader_txn_ms_p50, f.bare_leader_txn_ms_p99, 2),
        none(),
    );
    line(
        "leader cycle, ms p50 / p99",
        pair(f.leader_cycle_ms_p50, f.leader_cycle_ms_p99, 2),
        none(),
    );
    line(
        "follower cycle / bare txn, p50 / p99 (MemDb mean)",
        pair(
            f.follower_cycle_vs_bare_txn_p50,
            f.follower_cycle_vs_bare_txn_p99,
            2,
        ),
        format!("{:.2}", m.cycle_vs_bare_txn),
    );
    line(
        "leader cycle / bare txn, p50 / p99",
        pair(
            f.leader_cycle_vs_bare_txn_p50,
            f.leader_cycle_vs_bare_txn_p99,
            2,
        ),
        none(),
    );
    line(
        &format!(
            "follower aborts / 1k cycles, this crate ({} cycles / {} renewals)",
            f.contention_cycles, f.renewals_under_contention
        ),
        format!("{:.2}", f.follower_aborts_per_1k_cycles),
        format!("{:.2}", m.follower_aborts_per_1k_cycles),
    );
    line(
        &format!(
            "follower aborts / 1k cycles, v0.11 ({} cycles / {} refreshes)",
            f.v011_contention_cycles, f.v011_refreshes_under_contention
        ),
        format!("{:.2}", f.v011_follower_aborts_per_1k_cycles),
        format!("{:.2}", m.v011_follower_aborts_per_1k_cycles),
    );
    line(
        &format!("crash failover / lease, median / p99 ({FAILOVER_TRIALS} crashes)"),
        pair(f.failover_over_lease, f.failover_over_lease_p99, 3),
        pair(m.failover_over_lease, m.failover_over_lease_p99, 3),
    );
    line(
        "resign handover ms, median / p99 (watches)",
        pair(f.resign_handover_ms, f.resign_handover_ms_p99, 2),
        format!("{:.2}", m.resign_handover_ms),
    );
    line(
        "resign for a crashed heir: next leader / heartbeat, median / p99",
        pair(
            f.resign_dead_heir_over_heartbeat,
            f.resign_dead_heir_over_heartbeat_p99,
            2,
        ),
        format!("{:.2}", m.resign_dead_heir_over_heartbeat),
    );
    line(
        "preempt handover ms, median / p99 (watches)",
        pair(f.preempt_handover_ms, f.preempt_handover_ms_p99, 2),
        format!("{:.2}", m.preempt_handover_ms),
    );
    line(
        &format!("overlap instants ({} 1-ms samples)", f.overlap_samples),
        f.overlap_instants.to_string(),
        m.overlap_instants.to_string(),
    );
    line(
        &format!(
            "cycles/s, 1 / 100 / 1,000 elections ({} failed)",
            f.failed_cycles
        ),
        format!(
            "{:.0} / {:.0} / {:.0}",
            f.cycles_per_sec_1_election,
            f.cycles_per_sec_100_elections,
            f.cycles_per_sec_1k_elections
        ),
        none(),
    );
    let ok = f.follower_aborts_per_1k_cycles == 0.0 && f.v011_follower_aborts_per_1k_cycles > 0.0;
    println!(
        "follower aborts, this crate / v0.11: expected 0 / > 0: {}",
        if ok { "ok" } else { "UNEXPECTED" }
    );
}
