//! One simulated world: processes, the database, the faults, the event loop and the oracles.
//!
//! Every library call runs on a tokio current-thread runtime with `block_on`; none of them
//! waits (MemDb resolves at once when no latency is injected, and the simulation never asks it
//! for latency), so tokio's timers and scheduler play no part in ordering. Time, latency,
//! pauses and partitions are simulation events: a transaction is opened and its operation run
//! at one event, and committed at a later one, so other processes' commits interleave.

mod chaos;
mod commit;
mod cycle;
mod dispatch;
mod health;
mod judge;
mod marks;
mod operator;
mod process;
mod quiet;
mod reads;
mod rogue;
mod rogue_ranks;
mod snapshot;
mod work;

use std::collections::{BTreeMap, BTreeSet};

use fdb_leader_election::{ElectionError, LeaderElection, MemDb, MemTransaction};
use foundationdb_tuple::Subspace;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::events::{Event, Queue};
use crate::faults::SimFaults;
use crate::oracles::{
    Ballots, BeliefOverlap, EligibleLeads, Fencing, HistoryReplay, Liveness, Preemption, Progress,
    ReservationTimeout, Successor, Violation,
};
use crate::params::{Options, Params};
use crate::plants::Plant;
use crate::stats::SeedStats;
use crate::time::{Nanos, TrueTime, secs};
use crate::trace::Trace;
use crate::wire;

pub(crate) use commit::Entry;
pub(crate) use commit::{Actor, Kind, Pending};
pub(crate) use process::{Process, RogueTenure, Status};

/// What happened to one seed.
#[derive(Debug)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// The violations found at the first failing step (empty if the seed passed).
    pub violations: Vec<Violation>,
    /// True time of the failing step (or of the end).
    pub at: Nanos,
    /// The last trace lines.
    pub tail: Vec<String>,
    /// Every trace line, when kept.
    pub trace: Option<Vec<String>>,
    /// Hash of the whole trace.
    pub trace_hash: u64,
    /// Number of trace lines.
    pub trace_lines: u64,
    /// Counters.
    pub stats: SeedStats,
}

impl SeedOutcome {
    /// A seed whose world could not be built: `violation` says why.
    pub(crate) fn setup_failed(seed: u64, violation: Violation) -> Self {
        SeedOutcome {
            seed,
            violations: vec![violation],
            at: 0,
            tail: Vec::new(),
            trace: None,
            trace_hash: 0,
            trace_lines: 0,
            stats: SeedStats::default(),
        }
    }

    /// A seed run to its end, or to `failed` (the first failing step and its violations).
    pub(crate) fn finished(
        seed: u64,
        failed: Option<(Nanos, Vec<Violation>)>,
        now: Nanos,
        trace: &Trace,
        stats: &SeedStats,
    ) -> Self {
        let (at, violations) = failed.unwrap_or((now, Vec::new()));
        SeedOutcome {
            seed,
            violations,
            at,
            tail: trace.tail(),
            trace: trace.full().map(<[String]>::to_vec),
            trace_hash: trace.hash(),
            trace_lines: trace.len(),
            stats: stats.clone(),
        }
    }

    /// Whether every oracle passed.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Runs one seed to completion (or to its first violation).
pub fn run_seed(seed: u64, opts: &Options) -> SeedOutcome {
    match World::new(seed, opts) {
        Ok(mut world) => {
            world.run();
            world.outcome()
        }
        Err(e) => SeedOutcome::setup_failed(seed, Progress::unexpected_error("world", "setup", &e)),
    }
}

/// A node: the machine slot that successive incarnations run on.
#[derive(Debug, Default)]
pub(crate) struct Node {
    /// The incarnation currently running there, if any.
    current: Option<usize>,
    /// Incarnations started so far.
    incarnations: u32,
    /// The deploy generation of the current incarnation.
    generation: u32,
    /// A restart is scheduled.
    restart_pending: bool,
    /// The version its incarnations run (deploys upgrade and roll back).
    version: Option<fdb_leader_election::Version>,
    /// Its health faults.
    health: health::NodeHealth,
}

/// The operator: configuration writes and evictions.
#[derive(Debug, Default)]
pub(crate) struct Operator {
    /// The preemption setting last committed.
    allow_preemption: bool,
    /// The preemption setting being written (retried until it commits, unless a later
    /// write supersedes it).
    config_pending: Option<bool>,
    /// The heartbeat of the configuration the operator wrote last.
    heartbeat: Nanos,
    /// The configuration the operator drew and wrote last.
    written: Option<fdb_leader_election::ElectionConfig>,
}

/// One world.
pub(crate) struct World {
    seed: u64,
    plant: Option<Plant>,
    only_oracle: Option<crate::oracles::OracleId>,
    params: Params,
    rng: ChaCha8Rng,
    time: TrueTime,
    now: Nanos,
    queue: Queue,
    rt: tokio::runtime::Runtime,
    db: MemDb,
    faults: SimFaults,
    election: LeaderElection,
    leader_key: Vec<u8>,
    procs: Vec<Process>,
    nodes: Vec<Node>,
    pending: BTreeMap<u64, Pending>,
    /// Commits in flight whose reply was lost, by process: they land later.
    held: Vec<(usize, u64)>,
    /// Replies of applied commits on their way to their processes (slow replies).
    replies: BTreeMap<u64, commit::LateReply>,
    /// Application transactions kept open to query on an old read version.
    stale: Vec<operator::stale::StaleQuery>,
    next_token: u64,
    operator: Operator,
    generation: u32,
    deploys_in_flight: u32,
    quiet: bool,
    /// The latest end of any fault injected so far.
    faults_end_at: Nanos,
    trace: Trace,
    stats: SeedStats,
    // Oracles.
    belief: BeliefOverlap,
    fencing: Fencing,
    ballots: Ballots,
    preemption: Preemption,
    successor: Successor,
    liveness: Liveness,
    history: HistoryReplay,
    reservation_timeout: ReservationTimeout,
    eligible_leads: EligibleLeads,
    /// Faults and workload settled (oracle 5 armed, or was).
    settled: bool,
    /// Every candidate's readiness fails until then (a dependency down).
    dependency_until: Nanos,
    /// The names an operator's mark excludes, as committed.
    marks: BTreeSet<String>,
    /// The quiet phase's marks are not committed yet.
    marks_pending: bool,
    /// The quiet phase's marks, once drawn.
    final_marks: Option<Vec<String>>,
    /// Final marks that exclude every node come in two steps: first every node but the
    /// leader's (this one), and once the others' registrations carry it, the leader's too
    /// (the leader then finds nobody live eligible: oracle 25). `Some` until the first
    /// step committed.
    final_spared: Option<Option<usize>>,
    /// The first of those two steps committed.
    final_all_done: bool,
    /// The newest minor version deployed (versions are 1.MINOR.0), and each deploy's version.
    newest_minor: u64,
    deploy_versions: BTreeMap<u32, u64>,
    /// Violations found during the current step.
    found: Vec<Violation>,
    /// The first failing step's violations.
    failed: Option<(Nanos, Vec<Violation>)>,
    last_checked_version: u64,
    /// The handover grace of the configuration as last committed (oracle 27).
    stored_grace: Nanos,
    shadow_final: Option<u64>,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("seed", &self.seed)
            .field("now", &self.now)
            .field("processes", &self.procs.len())
            .finish_non_exhaustive()
    }
}

impl World {
    fn new(seed: u64, opts: &Options) -> Result<World, String> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let params = Params::draw(&mut rng, opts).map_err(|e| e.to_string())?;
        let (time, db, faults, rt) = crate::faults::sim_store()?;
        let rho = params.rho_ppm;
        let nodes = params
            .node_minor
            .iter()
            .map(|&minor| Node {
                version: Some(fdb_leader_election::Version::new(1, minor, 0)),
                ..Node::default()
            })
            .collect();
        let newest_minor = params.node_minor.iter().copied().max().unwrap_or(0);
        let mut world = World {
            seed,
            plant: opts.plant,
            only_oracle: opts.only_oracle,
            rng,
            time,
            now: 0,
            queue: Queue::default(),
            rt,
            db,
            faults,
            election: LeaderElection::new(Subspace::from(wire::ELECTION_SUBSPACE)),
            leader_key: wire::leader_key(),
            procs: Vec::new(),
            nodes,
            pending: BTreeMap::new(),
            held: Vec::new(),
            replies: BTreeMap::new(),
            stale: Vec::new(),
            next_token: 1,
            operator: Operator {
                allow_preemption: params.config.allow_preemption(),
                config_pending: None,
                heartbeat: params.heartbeat,
                written: None,
            },
            generation: 0,
            deploys_in_flight: 0,
            quiet: false,
            faults_end_at: 0,
            trace: Trace::new(opts.keep_trace),
            stats: SeedStats::default(),
            belief: BeliefOverlap::default(),
            fencing: Fencing::default(),
            ballots: Ballots::default(),
            preemption: Preemption::new(rho),
            successor: Successor::new(rho),
            liveness: Liveness::default(),
            history: HistoryReplay::default(),
            reservation_timeout: ReservationTimeout::default(),
            eligible_leads: EligibleLeads::default(),
            settled: false,
            dependency_until: 0,
            marks: BTreeSet::new(),
            marks_pending: false,
            final_marks: None,
            final_spared: None,
            final_all_done: false,
            newest_minor,
            deploy_versions: BTreeMap::new(),
            found: Vec::new(),
            failed: None,
            last_checked_version: 0,
            stored_grace: crate::time::nanos(params.config.handover_grace()),
            shadow_final: None,
            params,
        };
        world.log(format!(
            "world seed={seed} plant={} nodes={} lease={}s heartbeat={}s rho={}ppm \
             clock_spread={}ppm min_tenure={}s quiet_from={}s end={}s",
            world.plant.map_or("none", Plant::name),
            world.params.nodes,
            secs(world.params.lease),
            secs(world.params.heartbeat),
            world.params.rho_ppm,
            world.params.clock_spread_ppm,
            secs(crate::time::nanos(world.params.config.min_tenure())),
            secs(world.params.quiet_from),
            secs(world.params.duration),
        ));
        world.setup()?;
        Ok(world)
    }

    fn setup(&mut self) -> Result<(), String> {
        // The operator initialises the election (no faults at time zero).
        let txn = self.db.create_transaction();
        let election = self.election.clone();
        let config = self.params.config.clone();
        let init = self.rt.block_on(async {
            election.initialize_with_config(&txn, &config).await?;
            let leader = election.leader_record(&txn).await?;
            Ok::<_, ElectionError>(leader)
        });
        let leader = init.map_err(|e| e.to_string())?;
        let mut entry = crate::history::Entry::new("operator", None, 0, crate::history::Op::Init);
        entry.leader = Some(crate::history::RecordView::of(&leader));
        entry.config = Some(crate::history::ConfigView::of(&config));
        let token = self.add_pending(Pending {
            faultless: true,
            ..Pending::new(Actor::Operator, txn, Kind::Init, entry)
        });
        self.queue.push(0, Event::Commit { token });
        for node in 0..self.params.nodes {
            let bias = self.params.node_bias.get(node).copied().unwrap_or(0);
            let start = self.rng.random_range(1..=self.params.heartbeat);
            self.spawn(node, bias, start);
        }
        self.chaos_start();
        self.queue.push(self.params.quiet_from, Event::Quiet);
        self.queue.push(self.params.duration, Event::End);
        Ok(())
    }

    /// Appends a trace line stamped with the current true time.
    fn log(&mut self, line: String) {
        self.trace.line(format!("{} {line}", secs(self.now)));
    }

    fn add_pending(&mut self, p: Pending) -> u64 {
        let token = self.next_token;
        self.next_token = token.saturating_add(1);
        self.pending.insert(token, p);
        token
    }

    /// A new transaction opened by `actor`.
    fn open(&self, actor: Actor) -> MemTransaction {
        let txn = self.db.create_transaction();
        if let Actor::Proc(pid) = actor {
            self.faults.open(txn.id(), pid);
        }
        txn
    }

    /// A uniform draw in `[lo, hi]` (nanoseconds).
    fn between(&mut self, lo: Nanos, hi: Nanos) -> Nanos {
        crate::faults::between(&mut self.rng, lo, hi)
    }

    /// `lease × [lo_milli, hi_milli] / 1000`.
    fn leases(&mut self, lo_milli: u64, hi_milli: u64) -> Nanos {
        let m = self.between(lo_milli, hi_milli);
        crate::time::scale(self.params.lease, m, 1_000)
    }

    fn outcome(&mut self) -> SeedOutcome {
        let failed = self.failed.take();
        SeedOutcome::finished(self.seed, failed, self.now, &self.trace, &self.stats)
    }
}
