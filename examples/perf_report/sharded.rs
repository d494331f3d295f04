//! Sharded leadership's costs (docs/design.md §12, issue 23 item 3), measured through the public API
//! on any [`ElectionDatabase`]: on MemDb in every run, and on the FoundationDB cluster in the
//! cluster mode, with the same code and schedules.
//!
//! How each figure is taken:
//!
//! - **A member's steady heartbeat** (`shard_member_*_m{M}`, M = 16, 1,024, 16,384): a
//!   sharded election of M shards with three members and a coordinator, in the manual flow
//!   (`ShardedElection::member_cycle`, `coordinate`) on a frozen `ManualClock`, so that no
//!   lease lapses while it is measured. Once placement has settled (every shard owned, the
//!   coordinator writing nothing), one `member_cycle` with nothing asked runs in a transaction
//!   wrapped by a counter (`Counted`): key reads (`get`), range reads, key writes (`set` and
//!   `clear`) of that transaction. On MemDb the counter is checked against MemDb's own
//!   statistics. Then the cycle's latency (a `transact` call: read version to commit), p50 and
//!   p99 over `member_cycles` cycles.
//! - **The coordinator's attempt** (`shard_coordinate_*_m{M}`): in the same settled election,
//!   one `coordinate` call, counted the same way (point reads, range reads, the rows the range
//!   reads return, key writes), then its latency over `coordinate_calls` calls. Every member
//!   also runs the single election's cycle per heartbeat for the coordinator election; that
//!   is not part of these figures.
//! - **Acquisition** (`shard_acquire_512_cycle_ms`): while the M = 16,384 election settles,
//!   the member cycles that acquire 512 shards (the most one cycle takes), median.
//! - **Cooperative moves** (`shard_move_ms_*`, `shard_move_commits_max`): real
//!   `ShardedRunner`s in real time (lease 300 ms, heartbeat 100 ms), each on a store wrapped
//!   by a commit log (`Traced`: every committed transaction's written keys and the instant its
//!   commit returned). Three members own 64 shards, balanced; a fourth joins and takes its 16
//!   by moves (`max_concurrent_moves` 8). For each shard the joiner acquires: the time from
//!   the owner's handover commit to the joiner's guard (the joiner's `ShardChange`, stamped
//!   on receipt), and the commits that wrote the shard's record after the coordinator's move
//!   request, up to and including the acquisition. `move_trials` joins, each on a fresh
//!   election.
//! - **Handover rounds after a join** (`shard_join_*_m64`, `_m1024`): three members own M
//!   shards, balanced; a fourth joins. Manual flow: each round is one coordinator attempt,
//!   every owner's cycle (work stopped: ready to hand over) and the joiner's cycles; rounds
//!   that requested moves are counted until placement asks for nothing, and compared to
//!   ⌈moves / max_concurrent_moves⌉; moves are compared to the joiner's quota (a join moves
//!   only what balance needs). With the runners (the scenario above), the coordinator
//!   attempts that wrote move requests (`shard_join_runner_rounds_max`, the most over the
//!   trials) and the time from the joiner's start to balance (`shard_join_balance_ms`).
//! - **A crashed member's shards** (`shard_crash_over_lease*`,
//!   `shard_coordinator_crash_over_lease*`): three runners own 64 shards, balanced; after a
//!   lease and a pseudo-random phase one is aborted (`ShardedRunner::abort`, a crash), the
//!   coordinator on even trials, another member on odd ones. The time from the abort until
//!   every shard the crashed member owned is owned (a valid guard) by another runner, over
//!   the lease; then a new member replaces it and the next trial waits for balance.
//!   `crash_trials` crashes of each kind in one election.
//! - **Overlaps** (`shard_overlap_instants`): every millisecond during the runner scenarios,
//!   whether two runners held a valid guard of one shard.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use fdb_leader_election::shard::placement::PlacementStep;
use fdb_leader_election::shard::{
    Coordination, Coordinator, Layout, Member, ShardChange, ShardGuard, ShardedElection,
    ShardedRunner,
};
use fdb_leader_election::{
    Candidate, CandidateId, ElectionConfig, ElectionDatabase, ElectionError, ElectionTxn, KeyValue,
    ManualClock, MemDb, MemDbStats, Priority, ReadMode, ShardId, TxnError, Watch, Weight,
};
use foundationdb_tuple::Subspace;
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::{Monitor, Res, median, percentile};

/// The bound of every measuring transaction of the manual flow: far beyond what a store that
/// works takes.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The shard counts of the steady-state figures.
const STEADY_SHARDS: [u32; 3] = [16, 1_024, 16_384];
/// The shard counts of the join-rounds figures.
const JOIN_SHARDS: [u32; 2] = [64, 1_024];
/// Members of every scenario before a join.
const MEMBERS: usize = 3;
/// `max_concurrent_moves` of every election here.
const MOVES: u32 = 8;
/// Shards of the runner scenarios.
const RUNNER_SHARDS: u32 = 64;
/// The lease of the runner scenarios (heartbeat a third of it).
const LEASE: Duration = Duration::from_millis(300);
/// How long a runner scenario waits for balance, or for a crashed member's shards, before it
/// calls the scenario failed: far beyond anything it measures.
const LIMIT: Duration = Duration::from_secs(20);

/// How many repetitions each figure takes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reps {
    /// Member heartbeats timed per shard count.
    pub(crate) member_cycles: usize,
    /// Coordinator attempts timed per shard count.
    pub(crate) coordinate_calls: usize,
    /// Joins of the runner move scenario.
    pub(crate) move_trials: u32,
    /// Crashes of each kind.
    pub(crate) crash_trials: u32,
}

/// The repetitions of both modes.
pub(crate) const REPS: Reps = Reps {
    member_cycles: 100,
    coordinate_calls: 20,
    move_trials: 5,
    crash_trials: 15,
};

/// What one transaction did, as counted by [`Counted`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ops {
    /// `get` calls served.
    pub(crate) gets: u64,
    /// `get_range` calls served.
    pub(crate) ranges: u64,
    /// Rows the range reads returned.
    pub(crate) range_rows: u64,
    /// `set` calls.
    pub(crate) sets: u64,
    /// `clear` calls.
    pub(crate) clears: u64,
}

impl Ops {
    fn writes(&self) -> u64 {
        self.sets + self.clears
    }
}

/// The figures at one shard count.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Steady {
    pub(crate) shards: u32,
    /// A member's steady heartbeat.
    pub(crate) member: Ops,
    pub(crate) member_ms_p50: f64,
    pub(crate) member_ms_p99: f64,
    /// Shards the measured member owns.
    pub(crate) member_owns: usize,
    /// A coordinator attempt with nothing to change.
    pub(crate) coordinate: Ops,
    pub(crate) coordinate_ms_p50: f64,
    pub(crate) coordinate_ms_p99: f64,
}

/// The handover rounds after a join, manual flow.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct JoinRounds {
    pub(crate) shards: u32,
    /// Moves requested in all.
    pub(crate) moves: u32,
    /// The joiner's quota: the fewest moves that restore balance.
    pub(crate) quota: u32,
    /// Rounds that requested moves.
    pub(crate) rounds: u32,
    /// ⌈moves / max_concurrent_moves⌉.
    pub(crate) bound: u32,
}

/// The sharded figures of one store (flattened into the JSON object as `shard_*` keys).
#[derive(Clone, Debug, Default)]
pub(crate) struct ShardFigures {
    pub(crate) steady: Vec<Steady>,
    pub(crate) acquire_512_cycle_ms: f64,
    pub(crate) move_ms_p50: f64,
    pub(crate) move_ms_p99: f64,
    pub(crate) move_ms_max: f64,
    pub(crate) move_commits_max: u64,
    pub(crate) moves_timed: u64,
    /// The joiner's shards it took over from a lapsed member, not handed over to it (a
    /// member's lease lapsed on a loaded machine): not timed as moves.
    pub(crate) join_takeovers: u64,
    pub(crate) join: Vec<JoinRounds>,
    pub(crate) join_runner_rounds_max: u64,
    pub(crate) join_runner_moves_max: u64,
    pub(crate) join_balance_ms: f64,
    pub(crate) crash_over_lease: f64,
    pub(crate) crash_over_lease_p99: f64,
    pub(crate) coordinator_crash_over_lease: f64,
    pub(crate) coordinator_crash_over_lease_p99: f64,
    pub(crate) crash_trials: u32,
    pub(crate) overlap_instants: u64,
    pub(crate) overlap_torn_samples: u64,
    pub(crate) overlap_samples: u64,
    pub(crate) seconds: f64,
}

impl Serialize for ShardFigures {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for st in &self.steady {
            let m = st.shards;
            let mut e =
                |k: &str, v: serde_json::Value| map.serialize_entry(&format!("{k}_m{m}"), &v);
            e("shard_member_reads_per_heartbeat", st.member.gets.into())?;
            e(
                "shard_member_range_reads_per_heartbeat",
                st.member.ranges.into(),
            )?;
            e(
                "shard_member_writes_per_heartbeat",
                st.member.writes().into(),
            )?;
            e("shard_member_heartbeat_ms_p50", st.member_ms_p50.into())?;
            e("shard_member_heartbeat_ms_p99", st.member_ms_p99.into())?;
            e("shard_coordinate_point_reads", st.coordinate.gets.into())?;
            e("shard_coordinate_range_reads", st.coordinate.ranges.into())?;
            e(
                "shard_coordinate_rows_read",
                st.coordinate.range_rows.into(),
            )?;
            e("shard_coordinate_writes", st.coordinate.writes().into())?;
            e("shard_coordinate_ms_p50", st.coordinate_ms_p50.into())?;
            e("shard_coordinate_ms_p99", st.coordinate_ms_p99.into())?;
        }
        map.serialize_entry("shard_acquire_512_cycle_ms", &self.acquire_512_cycle_ms)?;
        map.serialize_entry("shard_move_ms_p50", &self.move_ms_p50)?;
        map.serialize_entry("shard_move_ms_p99", &self.move_ms_p99)?;
        map.serialize_entry("shard_move_ms_max", &self.move_ms_max)?;
        map.serialize_entry("shard_move_commits_max", &self.move_commits_max)?;
        map.serialize_entry("shard_moves_timed", &self.moves_timed)?;
        map.serialize_entry("shard_join_takeovers", &self.join_takeovers)?;
        for j in &self.join {
            let m = j.shards;
            map.serialize_entry(&format!("shard_join_moves_m{m}"), &j.moves)?;
            map.serialize_entry(&format!("shard_join_quota_m{m}"), &j.quota)?;
            map.serialize_entry(&format!("shard_join_rounds_m{m}"), &j.rounds)?;
            map.serialize_entry(&format!("shard_join_round_bound_m{m}"), &j.bound)?;
        }
        map.serialize_entry("shard_join_runner_rounds_max", &self.join_runner_rounds_max)?;
        map.serialize_entry("shard_join_runner_moves_max", &self.join_runner_moves_max)?;
        map.serialize_entry("shard_join_balance_ms", &self.join_balance_ms)?;
        map.serialize_entry("shard_crash_over_lease", &self.crash_over_lease)?;
        map.serialize_entry("shard_crash_over_lease_p99", &self.crash_over_lease_p99)?;
        map.serialize_entry(
            "shard_coordinator_crash_over_lease",
            &self.coordinator_crash_over_lease,
        )?;
        map.serialize_entry(
            "shard_coordinator_crash_over_lease_p99",
            &self.coordinator_crash_over_lease_p99,
        )?;
        map.serialize_entry("shard_crash_trials", &self.crash_trials)?;
        map.serialize_entry("shard_overlap_instants", &self.overlap_instants)?;
        map.serialize_entry("shard_overlap_torn_samples", &self.overlap_torn_samples)?;
        map.serialize_entry("shard_overlap_samples", &self.overlap_samples)?;
        map.serialize_entry("shard_seconds", &self.seconds)?;
        map.end()
    }
}

/// A store the report measures on: MemDb also reports its own I/O counts, to check
/// [`Counted`] against.
pub(crate) trait Store: ElectionDatabase {
    /// The store's cumulative I/O counts, where it keeps them.
    fn io(&self) -> Option<MemDbStats> {
        None
    }
}

impl Store for MemDb {
    fn io(&self) -> Option<MemDbStats> {
        Some(self.stats())
    }
}

#[cfg(feature = "fdb")]
impl Store for Arc<foundationdb::Database> {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One attempt's counts and written keys.
#[derive(Debug, Default)]
struct Attempt {
    ops: Ops,
    written: Vec<Vec<u8>>,
}

/// Forwards every call to the wrapped transaction and counts it into its attempt's slot.
struct Counted<T> {
    inner: T,
    slot: Arc<Mutex<Attempt>>,
}

impl<T: ElectionTxn> ElectionTxn for Counted<T> {
    async fn get(&self, key: &[u8], mode: ReadMode) -> Result<Option<Vec<u8>>, TxnError> {
        let value = self.inner.get(key, mode).await;
        if value.is_ok() {
            lock(&self.slot).ops.gets += 1;
        }
        value
    }

    async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        mode: ReadMode,
    ) -> Result<Vec<KeyValue>, TxnError> {
        let rows = self.inner.get_range(begin, end, mode).await;
        if let Ok(rows) = &rows {
            let mut a = lock(&self.slot);
            a.ops.ranges += 1;
            a.ops.range_rows += rows.len() as u64;
        }
        rows
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        {
            let mut a = lock(&self.slot);
            a.ops.sets += 1;
            a.written.push(key.to_vec());
        }
        self.inner.set(key, value);
    }

    fn clear(&self, key: &[u8]) {
        {
            let mut a = lock(&self.slot);
            a.ops.clears += 1;
            a.written.push(key.to_vec());
        }
        self.inner.clear(key);
    }

    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), TxnError> {
        self.inner.add_read_conflict_key(key)
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, TxnError> {
        self.inner.watch(key)
    }

    async fn read_version(&self) -> Result<Option<u64>, TxnError> {
        self.inner.read_version().await
    }
}

/// Runs `body` in a counted transaction; its result and the counts of the attempt that
/// committed.
async fn counted<D, F, Fut, T>(db: &D, body: F) -> Res<(T, Ops)>
where
    D: ElectionDatabase,
    F: Fn(Counted<D::Txn>) -> Fut + Send + Sync,
    Fut: Future<Output = Result<T, ElectionError>> + Send,
    T: Send,
{
    let slot: Arc<Mutex<Attempt>> = Arc::default();
    let out = db
        .transact(TIMEOUT, |txn| {
            *lock(&slot) = Attempt::default();
            body(Counted {
                inner: txn,
                slot: Arc::clone(&slot),
            })
        })
        .await?;
    let ops = lock(&slot).ops;
    Ok((out, ops))
}

/// One committed transaction of a traced store.
#[derive(Debug)]
struct Commit {
    /// The runner (its index in the scenario).
    who: usize,
    /// When its `transact` call returned.
    at: Instant,
    /// The keys it wrote.
    keys: Vec<Vec<u8>>,
}

/// The commit log the traced stores of one scenario share, recording while switched on.
#[derive(Clone, Default)]
struct Log(Arc<(AtomicBool, Mutex<Vec<Commit>>)>);

impl Log {
    fn switch(&self, on: bool) {
        self.0.0.store(on, Ordering::SeqCst);
    }

    fn record(&self, who: usize, keys: Vec<Vec<u8>>) {
        if self.0.0.load(Ordering::SeqCst) && !keys.is_empty() {
            let at = Instant::now();
            lock(&self.0.1).push(Commit { who, at, keys });
        }
    }

    fn take(&self) -> Vec<Commit> {
        std::mem::take(&mut *lock(&self.0.1))
    }
}

/// A store whose committed transactions are logged, as runner `who`'s.
#[derive(Clone)]
struct Traced<D> {
    inner: D,
    who: usize,
    log: Log,
}

impl<D: ElectionDatabase> ElectionDatabase for Traced<D> {
    type Txn = Counted<D::Txn>;

    fn transact<F, Fut, T>(
        &self,
        timeout: Duration,
        body: F,
    ) -> impl Future<Output = Result<T, ElectionError>> + Send
    where
        F: Fn(Self::Txn) -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, ElectionError>> + Send,
        T: Send,
    {
        let slot: Arc<Mutex<Attempt>> = Arc::default();
        async move {
            let out = self
                .inner
                .transact(timeout, |txn| {
                    *lock(&slot) = Attempt::default();
                    body(Counted {
                        inner: txn,
                        slot: Arc::clone(&slot),
                    })
                })
                .await;
            if out.is_ok() {
                let keys = std::mem::take(&mut lock(&slot).written);
                self.log.record(self.who, keys);
            }
            out
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Says on stderr how long a phase took (stdout keeps the report).
fn progress(store: &str, phase: &str, since: Instant) -> Instant {
    eprintln!(
        "perf_report: {store} sharded {phase}: {:.1} s",
        since.elapsed().as_secs_f64()
    );
    Instant::now()
}

/// Measures every sharded figure on the stores `fresh` gives (a new MemDb per scenario, or
/// the one cluster), under `root`.
pub(crate) async fn measure<D: Store>(
    store: &str,
    fresh: impl Fn() -> D,
    root: &Subspace,
    reps: Reps,
) -> Res<ShardFigures> {
    let started = Instant::now();
    let mut f = ShardFigures::default();
    let mut t = Instant::now();
    let mut acquire = Vec::new();
    for m in STEADY_SHARDS {
        let space = root.subspace(&("steady", m));
        f.steady
            .push(steady(fresh(), space, m, reps, &mut acquire).await?);
        t = progress(store, &format!("steady state, M = {m}"), t);
    }
    f.acquire_512_cycle_ms = median(&mut acquire);
    for m in JOIN_SHARDS {
        f.join
            .push(join_rounds(fresh(), root.subspace(&("join", m)), m).await?);
    }
    t = progress(store, "join rounds", t);

    let cfg = ElectionConfig::with_lease_duration(LEASE)?;
    let mon = ShardMonitor::default();
    let sampler = mon.start();
    let runners = async {
        moves(&fresh, root, &cfg, reps, &mon, &mut f).await?;
        t = progress(store, "cooperative moves", t);
        crashes(
            fresh(),
            root.subspace(&("crash",)),
            &cfg,
            reps,
            &mon,
            &mut f,
        )
        .await?;
        progress(store, "crashes", t);
        Res::Ok(())
    }
    .await;
    sampler.abort();
    runners?;
    f.overlap_instants = mon.overlaps.load(Ordering::Relaxed);
    f.overlap_torn_samples = mon.torn.load(Ordering::Relaxed);
    f.overlap_samples = mon.samples.load(Ordering::Relaxed);
    f.seconds = started.elapsed().as_secs_f64();
    Ok(f)
}

/// A sharded election in the manual flow, on a frozen clock: three members and the leader of
/// its coordinator election.
struct World<D> {
    db: D,
    election: ShardedElection,
    clock: ManualClock,
    leader: Candidate,
    coordinator: Coordinator,
    members: Vec<Member>,
    shards: u32,
}

/// What one member cycle did.
#[derive(Clone, Copy, Debug, Default)]
struct CycleDone {
    acquired: usize,
    released: usize,
    more: bool,
    asked: bool,
    joined: bool,
}

impl<D: ElectionDatabase> World<D> {
    /// The election, its coordinator elected and `members` members joined, not yet placed.
    async fn new(db: D, space: Subspace, shards: u32, members: usize) -> Res<Self> {
        let clock = ManualClock::new();
        let election = ShardedElection::new(space);
        let cfg = ElectionConfig::default();
        let layout = Layout::new(shards, MOVES)?;
        let id = CandidateId::random("coordinator")?;
        let leader = Candidate::with_clock(id.clone(), Priority::new(1), Arc::new(clock.clone()));
        db.transact(TIMEOUT, |txn| {
            let (e, cfg) = (election.clone(), cfg.clone());
            async move { e.initialize(&txn, &cfg, &layout).await }
        })
        .await?;
        db.transact(TIMEOUT, |txn| {
            let (e, c) = (election.clone(), leader.clone());
            async move { e.coordinator_election().register_candidate(&txn, &c).await }
        })
        .await?;
        if !election
            .coordinator_election()
            .run_cycle(&db, &leader)
            .await?
            .is_leader()
        {
            return Err("sharded: the coordinator was not elected".into());
        }
        let w = World {
            coordinator: Coordinator::with_clock(id, Arc::new(clock.clone())),
            db,
            election,
            leader,
            members: Vec::new(),
            shards,
            clock,
        };
        let mut w = w;
        for i in 0..members {
            let m = w.member(&format!("m{i}"))?;
            w.cycle(&m, false).await?;
            w.members.push(m);
        }
        Ok(w)
    }

    fn member(&self, name: &str) -> Res<Member> {
        Ok(Member::with_clock(
            CandidateId::random(name)?,
            Priority::new(1),
            Weight::ONE,
            Arc::new(self.clock.clone()),
        ))
    }

    /// One member cycle, adopted after its commit; with `ready`, every shard it owns has
    /// stopped its work (it hands over whatever it is asked to).
    async fn cycle(&self, m: &Member, ready: bool) -> Res<CycleDone> {
        let ready: BTreeSet<ShardId> = if ready {
            m.owned_shards().into_keys().collect()
        } else {
            BTreeSet::new()
        };
        let e = &self.election;
        let cycle = self
            .db
            .transact(TIMEOUT, |txn| {
                let (e, m, ready) = (e.clone(), m.clone(), ready.clone());
                async move { e.member_cycle(&txn, &m, &ready).await }
            })
            .await?;
        let done = CycleDone {
            acquired: cycle.acquired().len(),
            released: cycle.released().len(),
            more: cycle.more_to_acquire(),
            asked: !cycle.hand_over_requested().is_empty(),
            joined: cycle.joined(),
        };
        m.adopt(cycle);
        Ok(done)
    }

    fn token(&self) -> Res<fdb_leader_election::Ballot> {
        Ok(self
            .leader
            .fencing_token()
            .ok_or("sharded: the coordinator lost its election")?)
    }

    async fn coordinate(&self) -> Res<Coordination> {
        let token = self.token()?;
        let (e, c) = (&self.election, &self.coordinator);
        Ok(self
            .db
            .transact(TIMEOUT, |txn| {
                let (e, c) = (e.clone(), c.clone());
                async move { e.coordinate(&txn, &c, token).await }
            })
            .await?)
    }

    fn owned_total(&self) -> usize {
        self.members.iter().map(|m| m.owned_shards().len()).sum()
    }

    /// Rounds of a coordinator attempt and every member's cycles (work stopped, acquiring
    /// until nothing is left) until a round changes nothing and every shard is owned. The
    /// duration of each cycle that acquired 512 shards goes to `acquire`.
    async fn settle(&self, acquire: &mut Vec<f64>) -> Res<()> {
        for _ in 0..100 {
            let c = self.coordinate().await?;
            let mut changed = c.shards_written > 0 || !c.fenced.is_empty();
            for m in &self.members {
                loop {
                    let t = Instant::now();
                    let done = self.cycle(m, true).await?;
                    if done.acquired == 512 {
                        acquire.push(ms(t.elapsed()));
                    }
                    changed |= done.acquired + done.released > 0;
                    if !done.more {
                        break;
                    }
                }
            }
            if !changed && self.owned_total() == self.shards as usize {
                return Ok(());
            }
        }
        Err(format!(
            "sharded: placement of {} shards did not settle",
            self.shards
        )
        .into())
    }
}

/// The steady-state figures at `shards` shards (see the module docs).
async fn steady<D: Store>(
    db: D,
    space: Subspace,
    shards: u32,
    reps: Reps,
    acquire: &mut Vec<f64>,
) -> Res<Steady> {
    let w = World::new(db.clone(), space, shards, MEMBERS).await?;
    w.settle(acquire).await?;
    // Once more: the coordinator publishes the assignments marker of the settled records.
    w.coordinate().await?;
    let mut out = Steady {
        shards,
        ..Steady::default()
    };

    let a = &w.members[0];
    out.member_owns = a.owned_shards().len();
    let before = db.io();
    let (cycle, ops) = counted(&db, |txn| {
        let (e, a) = (w.election.clone(), a.clone());
        async move { e.member_cycle(&txn, &a, &BTreeSet::new()).await }
    })
    .await?;
    check_io(&db, before, ops, "member cycle")?;
    let steady = cycle.acquired().is_empty()
        && cycle.released().is_empty()
        && cycle.hand_over_requested().is_empty()
        && !cycle.more_to_acquire()
        && !cycle.joined();
    a.adopt(cycle);
    if !steady {
        return Err(
            format!("sharded, M = {shards}: the measured member was asked for work").into(),
        );
    }
    out.member = ops;

    let before = db.io();
    let token = w.token()?;
    let (done, ops) = counted(&db, |txn| {
        let (e, c) = (w.election.clone(), w.coordinator.clone());
        async move { e.coordinate(&txn, &c, token).await }
    })
    .await?;
    check_io(&db, before, ops, "coordinator attempt")?;
    if done.shards_written > 0 || !done.fenced.is_empty() {
        return Err(format!("sharded, M = {shards}: the settled coordinator wrote shards").into());
    }
    out.coordinate = ops;

    let mut times = Vec::with_capacity(reps.member_cycles);
    for _ in 0..reps.member_cycles {
        let t = Instant::now();
        let done = w.cycle(a, false).await?;
        times.push(ms(t.elapsed()));
        if done.acquired + done.released > 0 || done.asked || done.joined {
            return Err(format!("sharded, M = {shards}: a steady heartbeat did work").into());
        }
    }
    out.member_ms_p50 = median(&mut times);
    out.member_ms_p99 = percentile(&mut times, 0.99);
    let mut times = Vec::with_capacity(reps.coordinate_calls);
    for _ in 0..reps.coordinate_calls {
        let t = Instant::now();
        w.coordinate().await?;
        times.push(ms(t.elapsed()));
    }
    out.coordinate_ms_p50 = median(&mut times);
    out.coordinate_ms_p99 = percentile(&mut times, 0.99);
    Ok(out)
}

/// On a store that keeps its own counts (MemDb), checks that [`Counted`] counted the same.
fn check_io<D: Store>(db: &D, before: Option<MemDbStats>, ops: Ops, what: &str) -> Res<()> {
    let (Some(before), Some(after)) = (before, db.io()) else {
        return Ok(());
    };
    let d = after.since(&before);
    if (
        d.point_reads,
        d.range_reads,
        d.range_keys_read,
        d.sets,
        d.clears,
    ) != (ops.gets, ops.ranges, ops.range_rows, ops.sets, ops.clears)
    {
        return Err(format!("sharded {what}: counted {ops:?}, MemDb counted {d:?}").into());
    }
    Ok(())
}

/// The handover rounds after a join (manual flow; see the module docs).
async fn join_rounds<D: ElectionDatabase>(db: D, space: Subspace, shards: u32) -> Res<JoinRounds> {
    let mut w = World::new(db, space, shards, MEMBERS).await?;
    w.settle(&mut Vec::new()).await?;
    w.coordinate().await?;
    let joiner = w.member("joiner")?;
    w.cycle(&joiner, false).await?;
    w.members.push(joiner.clone());
    let mut out = JoinRounds {
        shards,
        ..JoinRounds::default()
    };
    for round in 0.. {
        if round > 10_000 {
            return Err("sharded join: balance not restored in 10,000 rounds".into());
        }
        let c = w.coordinate().await?;
        if round == 0 {
            out.quota = c
                .placement
                .quotas
                .get(joiner.id())
                .copied()
                .ok_or("sharded join: the joiner has no quota")?;
        }
        let moves = c
            .placement
            .steps
            .iter()
            .filter(|s| matches!(s, PlacementStep::Move { .. }))
            .count() as u32;
        if c.placement.steps.len() as u32 != moves {
            return Err("sharded join: placement planned more than moves".into());
        }
        if moves == 0 {
            if c.placement.changes() != 0 {
                return Err("sharded join: placement deferred moves but requested none".into());
            }
            break;
        }
        out.moves += moves;
        out.rounds += 1;
        for m in &w.members[..MEMBERS] {
            w.cycle(m, true).await?;
        }
        while w.cycle(&joiner, false).await?.more {}
    }
    if joiner.owned_shards().len() != out.quota as usize {
        return Err(format!(
            "sharded join: the joiner owns {} shards, its quota is {}",
            joiner.owned_shards().len(),
            out.quota
        )
        .into());
    }
    out.bound = out.moves.div_ceil(MOVES);
    Ok(out)
}

/// Samples every live runner's guards every millisecond; counts instants at which two hold a
/// valid guard of one shard. The runners are read one after the other, so a shard handed
/// over between two reads can appear under both: when a shard turns up under a second
/// runner, the guard read first is checked again. Still valid, it was valid throughout, so
/// both were at once: an overlap (reported on stderr). No longer valid: a handover between
/// the reads (`torn`, not an overlap).
type ShardMonitor = Monitor<ShardedRunner>;

impl ShardMonitor {
    fn start(&self) -> tokio::task::JoinHandle<()> {
        self.start_with(|runners| {
            let (mut overlap, mut torn) = (false, false);
            let mut first: BTreeMap<ShardId, (usize, ShardGuard)> = BTreeMap::new();
            for (i, r) in runners.iter().enumerate() {
                for (shard, guard) in r.owned() {
                    match first.get(&shard) {
                        None => {
                            first.insert(shard, (i, guard));
                        }
                        Some((j, earlier)) if earlier.is_valid() => {
                            overlap = true;
                            eprintln!(
                                "perf_report: sharded overlap: shard {shard} under runner {j} \
                                 (ballot {}) and runner {i} (ballot {})",
                                earlier.fencing_token(),
                                guard.fencing_token()
                            );
                        }
                        Some(_) => torn = true,
                    }
                }
            }
            (overlap, torn)
        })
    }
}

fn start_member<D: ElectionDatabase>(
    db: D,
    space: &Subspace,
    name: &str,
    cfg: &ElectionConfig,
) -> Res<ShardedRunner> {
    Ok(ShardedRunner::builder(db, space.clone())
        .shards(RUNNER_SHARDS)
        .max_concurrent_moves(MOVES)
        .label(name)
        .weight(Weight::ONE)
        .config(cfg.clone())
        .start()?)
}

/// Whether the runners own every shard once each, each ⌊M/n⌋ or ⌈M/n⌉, and one of them
/// coordinates.
fn balanced(runners: &[ShardedRunner]) -> bool {
    let n = runners.len() as u32;
    let (lo, hi) = (RUNNER_SHARDS / n, RUNNER_SHARDS.div_ceil(n));
    let mut seen = BTreeSet::new();
    for r in runners {
        let owned = r.owned();
        let k = owned.len() as u32;
        if k < lo || k > hi || !owned.into_keys().all(|s| seen.insert(s)) {
            return false;
        }
    }
    seen.len() as u32 == RUNNER_SHARDS && runners.iter().any(ShardedRunner::is_coordinator)
}

/// Waits until [`balanced`]; how long it took.
async fn until_balanced(runners: &[ShardedRunner]) -> Res<Duration> {
    let t = Instant::now();
    while !balanced(runners) {
        if t.elapsed() > LIMIT {
            let counts: Vec<usize> = runners.iter().map(|r| r.owned().len()).collect();
            return Err(
                format!("sharded runners not balanced within {LIMIT:?}: {counts:?}").into(),
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(t.elapsed())
}

/// Records every change of `runner`'s ownership with the instant it was received.
fn record(runner: &ShardedRunner) -> Arc<Mutex<Vec<(ShardChange, Instant)>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut changes = runner.subscribe();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok(change) = changes.recv().await {
            lock(&log).push((change, Instant::now()));
        }
    });
    seen
}

/// Cooperative moves and runner rounds after a join (see the module docs).
async fn moves<D: Store>(
    fresh: &impl Fn() -> D,
    root: &Subspace,
    cfg: &ElectionConfig,
    reps: Reps,
    mon: &ShardMonitor,
    f: &mut ShardFigures,
) -> Res<()> {
    let (mut times, mut balance) = (Vec::new(), Vec::new());
    for trial in 0..reps.move_trials {
        let space = root.subspace(&("moves", trial));
        let (db, log) = (fresh(), Log::default());
        let traced = |who| Traced {
            inner: db.clone(),
            who,
            log: log.clone(),
        };
        let mut rs = (0..MEMBERS)
            .map(|i| start_member(traced(i), &space, &format!("n{i}"), cfg))
            .collect::<Res<Vec<_>>>()?;
        mon.set(&rs);
        let result = async {
            until_balanced(&rs).await?;
            tokio::time::sleep(cfg.heartbeat_interval()).await;
            log.switch(true);
            let joiner = start_member(traced(MEMBERS), &space, "joiner", cfg)?;
            let acquired = record(&joiner);
            rs.push(joiner);
            mon.set(&rs);
            let b = until_balanced(&rs).await;
            balance.push(ms(b?));
            log.switch(false);
            // The recorder receives the last acquisitions a moment after the guards exist.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let acquired = lock(&acquired).clone();
            let election = rs[0].election().clone();
            let ids: Vec<CandidateId> = rs.iter().map(|r| r.id().clone()).collect();
            let trial = analyse(&log.take(), &acquired, &election, &ids)?;
            times.extend(trial.times);
            f.move_commits_max = f.move_commits_max.max(trial.commits_max);
            f.join_runner_rounds_max = f.join_runner_rounds_max.max(trial.rounds);
            f.join_runner_moves_max = f.join_runner_moves_max.max(trial.moves);
            f.join_takeovers += trial.takeovers;
            Res::Ok(())
        }
        .await;
        for r in &rs {
            r.shutdown().await;
        }
        result?;
    }
    f.moves_timed = times.len() as u64;
    f.move_ms_p50 = median(&mut times);
    f.move_ms_p99 = percentile(&mut times, 0.99);
    f.move_ms_max = times.iter().copied().fold(0.0, f64::max);
    f.join_balance_ms = median(&mut balance);
    Ok(())
}

/// One join's moves, from the commit log and the joiner's acquisitions.
struct MoveTrial {
    /// Handover commit to the joiner's guard, ms, per move.
    times: Vec<f64>,
    /// The most commits that wrote a moved shard's record after its move request.
    commits_max: u64,
    /// Coordinator commits that wrote shard records (move requests).
    rounds: u64,
    moves: u64,
    /// Shards the joiner took over from a lapsed member (no handover commit).
    takeovers: u64,
}

/// Reads one join's commit log: `ids[i]` is runner `i`'s member id, the joiner last. A
/// member's cycles write its own record; a coordinator attempt of the same runner does not.
fn analyse(
    log: &[Commit],
    acquired: &[(ShardChange, Instant)],
    election: &ShardedElection,
    ids: &[CandidateId],
) -> Res<MoveTrial> {
    let joiner = ids.len() - 1;
    let member_keys: Vec<Vec<u8>> = ids.iter().map(|id| election.member_key(id)).collect();
    let by_member = |c: &Commit| c.keys.contains(&member_keys[c.who]);
    let shard_keys: BTreeSet<Vec<u8>> = (0..RUNNER_SHARDS)
        .map(|s| election.shard_key(ShardId::new(s)))
        .collect();
    let rounds = log
        .iter()
        .filter(|c| !by_member(c) && c.keys.iter().any(|k| shard_keys.contains(k)))
        .count() as u64;
    let mut out = MoveTrial {
        times: Vec::new(),
        commits_max: 0,
        rounds,
        moves: 0,
        takeovers: 0,
    };
    for (change, guard_at) in acquired {
        if change.ended.is_some() {
            return Err(format!("sharded moves: the joiner lost shard {}", change.shard).into());
        }
        let key = election.shard_key(change.shard);
        let writes: Vec<&Commit> = log.iter().filter(|c| c.keys.contains(&key)).collect();
        let requests = writes.iter().filter(|c| !by_member(c)).count();
        let Some(handover) = writes.iter().find(|c| by_member(c) && c.who != joiner) else {
            // Its owner's lease lapsed (a loaded machine) and the joiner took it over: no
            // cooperative move to time.
            out.takeovers += 1;
            continue;
        };
        if requests == 0 {
            return Err(format!("sharded moves: shard {} moved unasked", change.shard).into());
        }
        // Every commit that wrote the record after the first request: the handover, the
        // acquisition, and any request written again.
        out.commits_max = out.commits_max.max(writes.len() as u64 - 1);
        out.times
            .push(ms(guard_at.saturating_duration_since(handover.at)));
        out.moves += 1;
    }
    Ok(out)
}

/// Crashes of the coordinator and of other members (see the module docs).
async fn crashes<D: ElectionDatabase>(
    db: D,
    space: Subspace,
    cfg: &ElectionConfig,
    reps: Reps,
    mon: &ShardMonitor,
    f: &mut ShardFigures,
) -> Res<()> {
    let lease = cfg.lease_duration();
    let mut live = (0..MEMBERS)
        .map(|i| start_member(db.clone(), &space, &format!("c{i}"), cfg))
        .collect::<Res<Vec<_>>>()?;
    let (mut member, mut coordinator) = (Vec::new(), Vec::new());
    let result = async {
        for trial in 0..reps.crash_trials * 2 {
            mon.set(&live);
            until_balanced(&live).await?;
            tokio::time::sleep(lease + Duration::from_millis(u64::from(trial * 37 % 100))).await;
            let of_coordinator = trial % 2 == 0;
            // A runner of the kind that owns shards: on a loaded machine a balanced layout
            // may be changing again (a member's lease lapsed for a moment), so it is waited
            // for, within the limit.
            let picked = Instant::now();
            let victim = loop {
                let found = live
                    .iter()
                    .position(|r| r.is_coordinator() == of_coordinator && !r.owned().is_empty());
                if let Some(found) = found {
                    break found;
                }
                if picked.elapsed() > LIMIT {
                    return Err(format!(
                        "sharded crash: no runner of the kind to crash owned a shard in {LIMIT:?}"
                    )
                    .into());
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            let victim = live.remove(victim);
            let shards: Vec<ShardId> = victim.owned().into_keys().collect();
            let crashed = Instant::now();
            victim.abort();
            loop {
                let owned: BTreeSet<ShardId> =
                    live.iter().flat_map(|r| r.owned().into_keys()).collect();
                if shards.iter().all(|s| owned.contains(s)) {
                    break;
                }
                if crashed.elapsed() > LIMIT {
                    return Err(
                        format!("sharded crash: shards not owned again in {LIMIT:?}").into(),
                    );
                }
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
            let ratio = crashed.elapsed().as_secs_f64() / lease.as_secs_f64();
            if of_coordinator {
                coordinator.push(ratio);
            } else {
                member.push(ratio);
            }
            live.push(start_member(
                db.clone(),
                &space,
                &format!("c{}", trial + 3),
                cfg,
            )?);
        }
        Res::Ok(())
    }
    .await;
    for r in &live {
        r.shutdown().await;
    }
    result?;
    f.crash_trials = reps.crash_trials;
    f.crash_over_lease = median(&mut member);
    f.crash_over_lease_p99 = percentile(&mut member, 0.99);
    f.coordinator_crash_over_lease = median(&mut coordinator);
    f.coordinator_crash_over_lease_p99 = percentile(&mut coordinator, 0.99);
    Ok(())
}

/// The sharded table: each figure with its target, on MemDb and, in the cluster mode, on
/// FoundationDB.
pub(crate) fn print(memdb: &ShardFigures, fdb: Option<&ShardFigures>) {
    println!();
    println!(
        "sharded leadership (docs/design.md §12): {MEMBERS} members, max_concurrent_moves {MOVES}; \
         runner scenarios with lease {} ms, {RUNNER_SHARDS} shards ({:.0} s on MemDb{})",
        LEASE.as_millis(),
        memdb.seconds,
        fdb.map_or(String::new(), |f| format!(
            ", {:.0} s on FoundationDB",
            f.seconds
        )),
    );
    println!(
        "{:<58} {:>16} {:>16}  {:<12}",
        "figure",
        "MemDb",
        if fdb.is_some() { "FoundationDB" } else { "" },
        "target"
    );
    let row = |name: &str,
               value: &dyn Fn(&ShardFigures) -> String,
               target: &str,
               ok: &dyn Fn(&ShardFigures) -> Option<bool>| {
        let verdict = |f: &ShardFigures| match ok(f) {
            Some(true) => "ok",
            Some(false) => "MISSED",
            None => "",
        };
        let mut verdicts = vec![verdict(memdb)];
        if let Some(f) = fdb {
            verdicts.push(verdict(f));
        }
        verdicts.retain(|v| !v.is_empty());
        println!(
            "{name:<58} {:>16} {:>16}  {target:<12} {}",
            value(memdb),
            fdb.map_or(String::new(), value),
            verdicts.join(" / ")
        );
    };
    for (i, st) in memdb.steady.iter().enumerate() {
        let m = st.shards;
        let at = move |f: &ShardFigures| f.steady.get(i).copied().unwrap_or_default();
        row(
            &format!("M = {m}: member heartbeat reads / range reads / writes"),
            &|f| {
                let s = at(f).member;
                format!("{} / {} / {}", s.gets, s.ranges, s.writes())
            },
            "<= 3 / 0 / 1",
            &|f| {
                let s = at(f).member;
                Some(s.gets <= 3 && s.ranges == 0 && s.writes() <= 1)
            },
        );
        row(
            &format!(
                "M = {m}: member heartbeat ms p50 / p99 ({} owned)",
                st.member_owns
            ),
            &|f| format!("{:.3} / {:.3}", at(f).member_ms_p50, at(f).member_ms_p99),
            "",
            &|_| None,
        );
        row(
            &format!("M = {m}: coordinator point / range reads, rows, writes"),
            &|f| {
                let s = at(f).coordinate;
                format!(
                    "{} / {}, {}, {}",
                    s.gets,
                    s.ranges,
                    s.range_rows,
                    s.writes()
                )
            },
            // The coordinator record (its fence), the layout, the configuration and the
            // assignments marker; the members and the shards in two range reads.
            "<=4 / <=2, N+M",
            &|f| {
                let s = at(f).coordinate;
                Some(s.gets <= 4 && s.ranges <= 2)
            },
        );
        row(
            &format!("M = {m}: coordinator attempt ms p50 / p99"),
            &|f| {
                format!(
                    "{:.3} / {:.3}",
                    at(f).coordinate_ms_p50,
                    at(f).coordinate_ms_p99
                )
            },
            "",
            &|_| None,
        );
    }
    row(
        "member cycle acquiring 512 shards, ms (median)",
        &|f| format!("{:.2}", f.acquire_512_cycle_ms),
        "",
        &|_| None,
    );
    row(
        "cooperative move, handover commit to guard, ms p50 / p99",
        &|f| format!("{:.2} / {:.2}", f.move_ms_p50, f.move_ms_p99),
        "<= 20 (MemDb)",
        &|f| (std::ptr::eq(f, memdb)).then_some(f.move_ms_p99 <= 20.0),
    );
    row(
        "  the slowest move, ms (moves timed)",
        &|f| format!("{:.2} ({})", f.move_ms_max, f.moves_timed),
        "",
        &|_| None,
    );
    row(
        "  the joiner's shards taken over, not handed over (a lapse)",
        &|f| f.join_takeovers.to_string(),
        "",
        &|_| None,
    );
    row(
        "commits per move after its request, most",
        &|f| f.move_commits_max.to_string(),
        "<= 2",
        &|f| Some(f.move_commits_max <= 2),
    );
    for (i, j) in memdb.join.iter().enumerate() {
        let at = move |f: &ShardFigures| f.join.get(i).copied().unwrap_or_default();
        row(
            &format!("join, M = {}: moves (quota), rounds (bound)", j.shards),
            &|f| {
                let j = at(f);
                format!("{} ({}), {} ({})", j.moves, j.quota, j.rounds, j.bound)
            },
            "=quota, <=bnd",
            &|f| {
                let j = at(f);
                Some(j.moves == j.quota && j.rounds <= j.bound)
            },
        );
    }
    row(
        "join with runners: coordinator rounds, moves (most)",
        &|f| format!("{}, {}", f.join_runner_rounds_max, f.join_runner_moves_max),
        "",
        &|_| None,
    );
    row(
        "join with runners: joiner's start to balance, ms (median)",
        &|f| format!("{:.1}", f.join_balance_ms),
        "",
        &|_| None,
    );
    row(
        &format!(
            "crashed member's shards owned again / lease, med / p99 ({})",
            memdb.crash_trials
        ),
        &|f| format!("{:.3} / {:.3}", f.crash_over_lease, f.crash_over_lease_p99),
        "med <= 1.1",
        &|f| Some(f.crash_over_lease <= 1.1),
    );
    row(
        "  the crashed member was the coordinator, med / p99",
        &|f| {
            format!(
                "{:.3} / {:.3}",
                f.coordinator_crash_over_lease, f.coordinator_crash_over_lease_p99
            )
        },
        "med <= 1.1",
        &|f| Some(f.coordinator_crash_over_lease <= 1.1),
    );
    row(
        "instants with one shard under two valid guards (1-ms samples)",
        &|f| format!("{} ({})", f.overlap_instants, f.overlap_samples),
        "0",
        &|f| Some(f.overlap_instants == 0),
    );
    row(
        "  samples torn by a handover between two runners' reads",
        &|f| f.overlap_torn_samples.to_string(),
        "",
        &|_| None,
    );
}
