//! The sharded world (`sim --sharded`, DESIGN §12): event loop, set-up and checks.
//!
//! The sharded world (`sim --sharded`, DESIGN §12): members driven by the library's own
//! `ShardMachine`, coordinator candidates, guarded shard work through `fence_shard`, every
//! fault of the single world, and oracles per shard against true time.
//!
//! It shares the single world's machinery: true time and drifting clocks ([`crate::time`]),
//! the fault injector and the per-commit fault draw ([`crate::faults`]), the event queue, the
//! trace, the campaign and its report.

mod chaos;
mod commit;
mod coord;
mod forget;
mod member;
mod off;
mod ops;
mod oracles;
mod pacing;
mod params;
mod quiet;
mod work;

use std::collections::BTreeMap;

use fdb_leader_election::shard::{Layout, ShardedElection};
use fdb_leader_election::{MemDb, MemTransaction};
use foundationdb_tuple::Subspace;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::events::Queue;
use crate::faults::SimFaults;
use crate::oracles::{OracleId, Violation};
use crate::params::Options;
use crate::shard_plants::ShardPlant;
use crate::stats::SeedStats;
use crate::time::{Nanos, TrueTime, secs};
use crate::trace::Trace;
use crate::world::SeedOutcome;

use commit::{Pending, Reply};
use coord::CoordProc;
use member::MemberProc;
use oracles::ShardOracles;
pub(crate) use params::ShardParams;

/// The subspace of the sharded election.
const SUBSPACE: &str = "shardsim";

/// The fault injector's process number of coordinator `cid` (members use their index).
fn coord_fpid(cid: usize) -> usize {
    10_000usize.saturating_add(cid)
}

/// What happens next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// A member machine's sleep ended (stale unless `epoch` is the member's wake epoch).
    Wake { pid: usize, epoch: u64 },
    /// Commit the pending transaction `token`.
    Commit { token: u64 },
    /// A held-back result reaches its process (a slow reply, or one that waited for a pause).
    Reply { token: u64 },
    /// The executor's transaction timeout of a member's operation `op`.
    Timeout { pid: usize, op: u64 },
    /// The store's retry loop runs a member's operation `op` again.
    Retry { pid: usize, op: u64 },
    /// The bound of a member's wait for ended guards' work.
    DrainBound { pid: usize, epoch: u64 },
    /// A shard's work loop: start a task if the guard accepts work.
    WorkTick {
        pid: usize,
        shard: u32,
        guard_gen: u64,
    },
    /// An await point of a running task (it stops if its guard was cancelled).
    WorkPiece {
        pid: usize,
        shard: u32,
        guard_gen: u64,
    },
    /// The task's synchronous section ends: it writes through the fence.
    WorkAct {
        pid: usize,
        shard: u32,
        guard_gen: u64,
    },
    /// A coordinator candidate's heartbeat.
    CoordTick { cid: usize, epoch: u64 },
    /// A chaos or workload action.
    Chaos(chaos::Chaos),
    /// Faults stop.
    Quiet,
    /// The final rolling deploy begins.
    FinalDeploy,
    /// The quiet-phase oracles arm (the final deploy is over).
    Arm,
    /// A bound to check even if nothing else happens then.
    Deadline,
    /// The end of the run.
    End,
}

/// Runs one seed of the sharded world.
pub fn run_seed(seed: u64, opts: &Options) -> SeedOutcome {
    match World::new(seed, opts) {
        Ok(mut world) => {
            world.run();
            world.outcome()
        }
        Err(e) => SeedOutcome::setup_failed(
            seed,
            Violation::new(OracleId::ShardLiveness, format!("world set-up failed: {e}")),
        ),
    }
}

/// One sharded world.
pub(crate) struct World {
    seed: u64,
    plant: Option<ShardPlant>,
    only_oracle: Option<OracleId>,
    p: ShardParams,
    rng: ChaCha8Rng,
    time: TrueTime,
    now: Nanos,
    queue: Queue<Ev>,
    rt: tokio::runtime::Runtime,
    db: MemDb,
    faults: SimFaults,
    election: ShardedElection,
    members: Vec<MemberProc>,
    coords: Vec<CoordProc>,
    /// Each node's current member incarnation, and its deploy generation.
    nodes: Vec<(Option<usize>, u32)>,
    pending: BTreeMap<u64, Pending>,
    replies: BTreeMap<u64, Reply>,
    /// Commits in flight whose reply was lost, by fault-injector process: they land after
    /// that process's next transaction took its read version.
    held: Vec<(usize, u64)>,
    next_token: u64,
    quiet: bool,
    faults_end_at: Nanos,
    trace: Trace,
    stats: SeedStats,
    oracles: ShardOracles,
    found: Vec<Violation>,
    failed: Option<(Nanos, Vec<Violation>)>,
}

impl World {
    fn new(seed: u64, opts: &Options) -> Result<World, String> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let p = ShardParams::draw(&mut rng, opts.sim_seconds).map_err(|e| e.to_string())?;
        let (time, db, faults, rt) = crate::faults::sim_store()?;
        let shards = p.shards;
        let mut w = World {
            seed,
            plant: opts.shard_plant,
            only_oracle: opts.only_oracle,
            nodes: vec![(None, 0); p.nodes],
            p,
            rng,
            time,
            now: 0,
            queue: Queue::default(),
            rt,
            db,
            faults,
            election: ShardedElection::new(Subspace::from(SUBSPACE)),
            members: Vec::new(),
            coords: Vec::new(),
            pending: BTreeMap::new(),
            replies: BTreeMap::new(),
            held: Vec::new(),
            next_token: 0,
            quiet: false,
            faults_end_at: 0,
            trace: Trace::new(opts.keep_trace),
            stats: SeedStats::default(),
            oracles: ShardOracles::new(shards),
            found: Vec::new(),
            failed: None,
        };
        w.setup()?;
        Ok(w)
    }

    fn setup(&mut self) -> Result<(), String> {
        let layout = Layout::new(self.p.shards, self.p.max_moves).map_err(|e| e.to_string())?;
        let txn = self.db.create_transaction();
        self.rt
            .block_on(self.election.initialize(&txn, &self.p.config, &layout))
            .map_err(|e| e.to_string())?;
        self.rt.block_on(txn.commit()).map_err(|e| e.to_string())?;
        self.log(format!(
            "world seed={} nodes={} shards={} max_moves={} lease={} heartbeat={} rho_ppm={} \
             quiet_from={} probe_at={} final_deploy_at={}",
            self.seed,
            self.p.nodes,
            self.p.shards,
            self.p.max_moves,
            secs(self.p.lease),
            secs(self.p.heartbeat),
            self.p.rho_ppm,
            secs(self.p.quiet_from),
            secs(self.p.probe_at),
            secs(self.p.final_deploy_at),
        ));
        for cid in 0..self.p.coordinators {
            self.spawn_coord(cid);
        }
        for node in 0..self.p.nodes {
            let delay = self.between(0, self.p.heartbeat);
            self.spawn_member(node, delay);
        }
        self.chaos_start();
        self.queue.push(self.p.quiet_from, Ev::Quiet);
        self.queue
            .push(self.p.probe_at, Ev::Chaos(chaos::Chaos::Probe));
        self.queue.push(self.p.final_deploy_at, Ev::FinalDeploy);
        self.queue.push(self.p.duration, Ev::End);
        Ok(())
    }

    fn log(&mut self, line: String) {
        self.trace.line(format!("{} {line}", secs(self.now)));
    }

    fn between(&mut self, lo: Nanos, hi: Nanos) -> Nanos {
        crate::faults::between(&mut self.rng, lo, hi)
    }

    fn chance(&mut self, num: u32, den: u32) -> bool {
        rand::Rng::random_ratio(&mut self.rng, num, den.max(num).max(1))
    }

    /// `lease × [lo_milli, hi_milli] / 1000`.
    fn leases(&mut self, lo_milli: u64, hi_milli: u64) -> Nanos {
        let m = self.between(lo_milli, hi_milli);
        crate::time::scale(self.p.lease, m, 1_000)
    }

    /// A transaction opened by fault-injector process `fpid`.
    fn open(&self, fpid: usize) -> MemTransaction {
        let txn = self.db.create_transaction();
        self.faults.open(txn.id(), fpid);
        txn
    }

    fn token(&mut self) -> u64 {
        let t = self.next_token;
        self.next_token = t.saturating_add(1);
        t
    }

    fn note_fault_end(&mut self, t: Nanos) {
        self.faults_end_at = self.faults_end_at.max(t);
    }

    fn run(&mut self) {
        while let Some((at, event)) = self.queue.pop() {
            self.now = at.max(self.now);
            self.time.set(self.now);
            self.stats.events = self.stats.events.saturating_add(1);
            let end = event == Ev::End;
            self.dispatch(event);
            self.check();
            if end || self.failed.is_some() {
                break;
            }
        }
        self.stats.sim_ns = self.now;
    }

    fn dispatch(&mut self, event: Ev) {
        if let Some(until) = self.paused_target(event) {
            self.queue.push(until, event);
            return;
        }
        match event {
            Ev::Wake { pid, epoch } => self.wake(pid, epoch),
            Ev::Commit { token } => self.commit(token),
            Ev::Reply { token } => self.reply(token),
            Ev::Timeout { pid, op } => self.op_timeout(pid, op),
            Ev::Retry { pid, op } => self.retry(pid, op),
            Ev::DrainBound { pid, epoch } => self.drain_bound(pid, epoch),
            Ev::WorkTick {
                pid,
                shard,
                guard_gen,
            } => self.work_tick(pid, shard, guard_gen),
            Ev::WorkPiece {
                pid,
                shard,
                guard_gen,
            } => self.work_piece(pid, shard, guard_gen),
            Ev::WorkAct {
                pid,
                shard,
                guard_gen,
            } => self.work_act(pid, shard, guard_gen),
            Ev::CoordTick { cid, epoch } => self.coord_tick(cid, epoch),
            Ev::Chaos(c) => self.chaos(c),
            Ev::Quiet => self.begin_quiet(),
            Ev::FinalDeploy => self.final_deploy(),
            Ev::Arm => self.arm(),
            Ev::Deadline => {}
            Ev::End => self.finish(),
        }
    }

    /// The end of the pause of the process `event` is for, if it is paused now.
    fn paused_target(&self, event: Ev) -> Option<Nanos> {
        let until = match event {
            Ev::Wake { pid, .. }
            | Ev::Timeout { pid, .. }
            | Ev::Retry { pid, .. }
            | Ev::DrainBound { pid, .. }
            | Ev::WorkTick { pid, .. }
            | Ev::WorkPiece { pid, .. }
            | Ev::WorkAct { pid, .. } => self.members.get(pid)?.paused_until,
            Ev::CoordTick { cid, .. } => self.coords.get(cid)?.paused_until,
            _ => return None,
        };
        (until > self.now).then_some(until)
    }

    /// After every step: the oracles.
    fn check(&mut self) {
        self.check_beliefs();
        self.check_quiet_bounds();
        self.note_coordinator();
        self.check_failover();
        self.check_forgotten_beliefs();
        if self.found.is_empty() {
            return;
        }
        let found = std::mem::take(&mut self.found);
        for v in &found {
            self.log(format!("VIOLATION {v}"));
        }
        let stopping: Vec<Violation> = found
            .into_iter()
            .filter(|v| self.only_oracle.is_none_or(|o| o == v.oracle))
            .collect();
        if !stopping.is_empty() && self.failed.is_none() {
            self.failed = Some((self.now, stopping));
        }
    }

    fn outcome(&mut self) -> SeedOutcome {
        let failed = self.failed.take();
        SeedOutcome::finished(self.seed, failed, self.now, &self.trace, &self.stats)
    }
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardWorld")
            .field("seed", &self.seed)
            .field("now", &self.now)
            .field("members", &self.members.len())
            .finish_non_exhaustive()
    }
}
