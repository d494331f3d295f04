//! The workload `LeaderElection`: one election, several candidate slots per tester, each
//! running incarnations that come and go (crashes, graceful leaves), driven by the library's
//! runner machine in simulated time, with fenced leader work and an operator; then tester 0
//! replays the log and checks it.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use fdb_leader_election::{
    Candidate, CandidateId, LeaderElection, Priority, Subspace, Version, VersionPolicy,
};
use foundationdb::{FdbBindingError, RetryableTransaction};
use foundationdb_simulation::{Metric, Metrics, RustWorkload, Severity, SimDatabase};
use futures_util::future::{Either, join_all, select};

use crate::check::{self, Counts, Violation};
use crate::incarnation::txn::run;
use crate::incarnation::{Incarnation, Setup};
use crate::log::{self, Entry, Interval};
use crate::operator;
use crate::options::{Options, Plant};
use crate::sim::{Sim, SimClock};
use crate::tester::{Beliefs, Shared, Stats, Tester};

/// The versions incarnations run: upgrades move a slot to the next, rollbacks back.
const VERSIONS: [&str; 3] = ["1.0.0", "1.1.0", "2.0.0"];

/// The election's subspace.
pub(crate) fn election() -> LeaderElection {
    LeaderElection::new(Subspace::from("leader-election-sim"))
}

/// The single election's workload, one per tester.
pub(crate) struct SingleWorkload {
    sim: Sim,
    options: Options,
    tester: Shared,
    /// Tester 0's check: what the log showed and what it found.
    checked: Option<(Counts, Vec<Violation>)>,
}

impl SingleWorkload {
    pub(crate) fn new(sim: Sim) -> Self {
        let options = Options::read(sim.context(), false);
        SingleWorkload {
            sim,
            options,
            tester: Rc::new(RefCell::new(Tester::default())),
            checked: None,
        }
    }

    fn initial_config(&self) -> fdb_leader_election::ElectionConfig {
        let n = VersionPolicy::ALL.len() as u64;
        let shared = self.sim.context().shared_random_number().unsigned_abs();
        let policy = VersionPolicy::ALL[usize::try_from(shared % n).unwrap_or(0)];
        // Valid by construction (the operator draws from the same function).
        operator::config(self.options.lease, policy, true).unwrap_or_default()
    }

    /// One candidate slot: incarnations one after another until `end`.
    async fn slot(&self, db: &SimDatabase, slot: u32, end: f64) {
        let sim = &self.sim;
        let name = format!("c{}s{slot}", sim.client());
        let mut version = 0usize;
        let init = self.initial_config();
        while sim.now() < end {
            let Ok(id) = CandidateId::with_nonce(&name, sim.bits()) else {
                return;
            };
            // Clocks: a large offset, a rate error within the configuration's bound (1%),
            // or far beyond it for the plant.
            let bound: i64 = if self.options.plant == Some(Plant::ClockBeyondRho) {
                450_000
            } else {
                9_000
            };
            let rate = i64::try_from(sim.below(2 * bound as u64 + 1)).unwrap_or(0) - bound;
            let clock = SimClock::new(sim.between(0.0, 1.0e6), rate);
            let priority = i32::try_from(sim.below(10)).unwrap_or(0);
            let candidate =
                Candidate::with_clock(id.clone(), Priority::new(priority), Arc::new(clock));
            if sim.chance(0.4) {
                version = (version + 1).min(VERSIONS.len() - 1);
            } else if sim.chance(0.1) {
                version = version.saturating_sub(1);
            }
            candidate.set_version(Version::parse(VERSIONS[version]).ok());
            let beliefs = Rc::new(RefCell::new(Beliefs::new(
                String::new(),
                id.to_string(),
                clock,
            )));
            let setup = Setup {
                role: crate::incarnation::Role::Counter,
                sim: sim.clone(),
                db: Arc::clone(db),
                election: election(),
                candidate,
                clock,
                init_config: init.clone(),
                tester: Rc::clone(&self.tester),
                beliefs: Rc::clone(&beliefs),
                plant: self.options.plant,
                seed: sim.bits(),
                busy: Rc::default(),
                seen: Rc::default(),
            };
            self.tester.borrow_mut().stats.incarnations += 1;
            let lifetime = sim.between(4.0, 40.0).min((end - sim.now()).max(0.5));
            let graceful = sim.chance(0.5);
            if self.options.plant == Some(Plant::Idle) {
                idle(&setup, lifetime).await;
            } else {
                let incarnation = Incarnation::new(setup);
                let shutdown_at = if graceful {
                    sim.now() + lifetime
                } else {
                    f64::INFINITY
                };
                // A graceful shutdown gets ten more seconds to leave; then (or at once, for a
                // crash) the incarnation is dropped: a crash, its transactions abandoned
                // wherever they are.
                let bound = lifetime + if graceful { 10.0 } else { 0.0 };
                let run = Box::pin(incarnation.run(shutdown_at));
                let timer = Box::pin(sim.sleep(bound));
                if let Either::Right(_) = select(run, timer).await {
                    self.tester.borrow_mut().stats.crashes += 1;
                }
            }
            beliefs.borrow_mut().close(&self.tester, sim.now());
            sim.sleep(sim.between(0.2, 3.0)).await;
        }
    }
}

/// Plant `idle`: the candidate registers, then never campaigns.
async fn idle(s: &Setup, lifetime: f64) {
    let (e, me, init) = (
        s.election.clone(),
        s.candidate.clone(),
        s.init_config.clone(),
    );
    let _ = run(&s.db, &s.sim, &s.tester, 1000, |trx| {
        let (e, me, init) = (e.clone(), me.clone(), init.clone());
        async move {
            e.initialize_with_config(&trx, &init).await?;
            Ok(e.register_candidate(&trx, &me).await?)
        }
    })
    .await;
    s.sim.sleep(lifetime).await;
}

impl RustWorkload for SingleWorkload {
    async fn setup(&mut self, db: SimDatabase) {
        if let Some(why) = &self.options.invalid {
            self.sim.trace(
                Severity::Error,
                "LeaderElectionBadOption",
                &[("Reason".into(), why.clone())],
            );
            return;
        }
        if self.sim.client() == 0 {
            let (e, init) = (election(), self.initial_config());
            let _ = run(&db, &self.sim, &self.tester, 5000, |trx| {
                let (e, init) = (e.clone(), init.clone());
                async move { Ok(e.initialize_with_config(&trx, &init).await?) }
            })
            .await;
        }
    }

    async fn start(&mut self, db: SimDatabase) {
        if self.options.invalid.is_some() {
            return;
        }
        let end = self.sim.now() + self.options.duration;
        let slots = join_all((0..self.options.candidates).map(|s| self.slot(&db, s, end)));
        if self.sim.client() == 0 {
            let names: Vec<String> = (0..self.sim.clients())
                .flat_map(|c| (0..self.options.candidates).map(move |s| format!("c{c}s{s}")))
                .collect();
            let op = operator::operate(
                self.options.lease,
                self.sim.clone(),
                Arc::clone(&db),
                election(),
                Rc::clone(&self.tester),
                names,
                end,
            );
            futures_util::future::join(slots, op).await;
        } else {
            slots.await;
        }
        write_intervals(&self.sim, &db, &self.tester).await;
    }

    async fn check(&mut self, db: SimDatabase) {
        if self.sim.client() != 0 || self.options.invalid.is_some() {
            return;
        }
        match read_back(&db).await {
            Ok((entries, intervals, stats)) => {
                let cluster = check::Cluster::of(&stats, self.sim.clients());
                let (counts, found) = check::check(&entries, &intervals, cluster);
                report(&self.sim, &counts, &found, self.options.plant, cluster);
                self.checked = Some((counts, found));
            }
            Err(why) => self.sim.trace(
                Severity::Error,
                "LeaderElectionCheckUnreadable",
                &[("Reason".into(), why)],
            ),
        }
    }

    fn get_metrics(&self, mut out: Metrics) {
        metrics(&mut out, &self.tester.borrow().stats, self.checked.as_ref());
    }

    fn get_check_timeout(&self) -> f64 {
        3000.0
    }
}

/// How long after its run a tester keeps retrying the writes the check needs (simulated
/// seconds): the cluster recovers once the faults stop.
const PERSIST_FOR: f64 = 600.0;

/// Runs `f` until it commits, for at most `PERSIST_FOR` from now; whether it committed.
async fn persist<F, Fut>(sim: &Sim, db: &SimDatabase, tester: &Shared, f: F) -> bool
where
    F: Fn(RetryableTransaction) -> Fut,
    Fut: std::future::Future<Output = Result<(), FdbBindingError>>,
{
    let deadline = sim.now() + PERSIST_FOR;
    loop {
        if run(db, sim, tester, 5000, &f).await.is_ok() {
            return true;
        }
        if sim.now() >= deadline {
            return false;
        }
        sim.sleep(1.0).await;
    }
}

/// Writes this tester's belief intervals, in transactions of a hundred, then its counts (the
/// check judges progress against the cycles the cluster let commit), each retried until it
/// commits: counts in the database mean that every interval is there too. A tester whose
/// writes never committed leaves no counts, and the check says so instead of judging.
pub(crate) async fn write_intervals(sim: &Sim, db: &SimDatabase, tester: &Shared) {
    let stats = serde_json::to_vec(&tester.borrow().stats).unwrap_or_default();
    let client = sim.client();
    let intervals = std::mem::take(&mut tester.borrow_mut().intervals);
    for (chunk_no, chunk) in intervals.chunks(100).enumerate() {
        let chunk: Vec<(u64, Interval)> = chunk
            .iter()
            .enumerate()
            .map(|(i, v)| {
                (
                    u64::try_from(chunk_no * 100 + i).unwrap_or(u64::MAX),
                    v.clone(),
                )
            })
            .collect();
        let written = persist(sim, db, tester, |trx| {
            let chunk = chunk.clone();
            async move {
                for (n, interval) in &chunk {
                    let value = serde_json::to_vec(interval).unwrap_or_default();
                    trx.set(&log::belief_key(client, *n), &value);
                }
                Ok(())
            }
        })
        .await;
        if !written {
            return;
        }
    }
    persist(sim, db, tester, |trx| {
        let stats = stats.clone();
        async move {
            trx.set(&log::stats_key(client), &stats);
            Ok(())
        }
    })
    .await;
}

/// What the check reads back: the log (in commit order), every tester's belief intervals,
/// and their counts.
pub(crate) type ReadBack = (Vec<Entry>, Vec<Interval>, Vec<Stats>);

/// The log, the belief intervals and the testers' counts.
pub(crate) async fn read_back(db: &SimDatabase) -> Result<ReadBack, String> {
    let (begin, end) = log::log_range();
    let rows = log::read_all(db, begin, end)
        .await
        .map_err(|e| format!("reading the log: {e}"))?;
    let entries = rows
        .iter()
        .map(|(k, v)| {
            serde_json::from_slice::<Entry>(v)
                .map_err(|e| format!("log entry {k:?} does not decode: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (begin, end) = log::beliefs_range();
    let rows = log::read_all(db, begin, end)
        .await
        .map_err(|e| format!("reading the beliefs: {e}"))?;
    let intervals = rows
        .iter()
        .map(|(k, v)| {
            serde_json::from_slice::<Interval>(v)
                .map_err(|e| format!("belief {k:?} does not decode: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (begin, end) = log::stats_range();
    let rows = log::read_all(db, begin, end)
        .await
        .map_err(|e| format!("reading the testers' counts: {e}"))?;
    let stats = rows
        .iter()
        .map(|(k, v)| {
            serde_json::from_slice::<Stats>(v)
                .map_err(|e| format!("counts {k:?} do not decode: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((entries, intervals, stats))
}

/// Traces the check's findings (each a `SevError`, which fails the run) and its counts.
pub(crate) fn report(
    sim: &Sim,
    counts: &Counts,
    found: &[Violation],
    plant: Option<Plant>,
    cluster: check::Cluster,
) {
    if cluster.unavailable() {
        sim.trace(
            Severity::WarnAlways,
            "LeaderElectionClusterUnavailable",
            &[
                ("Cycles".into(), cluster.cycles.to_string()),
                ("TestersMissing".into(), cluster.testers_missing.to_string()),
                (
                    "FailedByTheCluster".into(),
                    cluster.cluster_failures.to_string(),
                ),
                (
                    "Reason".into(),
                    "the simulated cluster failed half of the cycles, or kept a tester's counts \
                     from the database: progress not judged"
                        .into(),
                ),
            ],
        );
    }
    for v in found.iter().take(20) {
        sim.trace(
            Severity::Error,
            "LeaderElectionViolation",
            &[
                ("Oracle".into(), v.oracle.to_owned()),
                ("Message".into(), v.message.clone()),
                (
                    "Plant".into(),
                    plant.map_or("none".into(), |p| p.to_string()),
                ),
            ],
        );
    }
    sim.trace(
        Severity::Info,
        "LeaderElectionCheck",
        &[
            ("Elections".into(), counts.elections.to_string()),
            ("Takeovers".into(), counts.takeovers.to_string()),
            ("Handovers".into(), counts.handovers.to_string()),
            ("FencedWrites".into(), counts.fenced_writes.to_string()),
            ("Beliefs".into(), counts.beliefs.to_string()),
            (
                "PolicyTakeoversJudged".into(),
                counts.policy_takeovers_judged.to_string(),
            ),
            ("Violations".into(), found.len().to_string()),
        ],
    );
}

/// The metrics of a tester (summed over testers by fdbserver), and tester 0's check.
pub(crate) fn metrics(out: &mut Metrics, s: &Stats, checked: Option<&(Counts, Vec<Violation>)>) {
    #[allow(clippy::cast_precision_loss)]
    let f = |n: u64| n as f64;
    out.extend([
        Metric::val("incarnations", f(s.incarnations)),
        Metric::val("crashes", f(s.crashes)),
        Metric::val("leaves", f(s.leaves)),
        Metric::val("stalls", f(s.stalls)),
        Metric::val("resigns", f(s.resigns)),
        Metric::val("flaps", f(s.flaps)),
        Metric::val("cycles", f(s.cycles)),
        Metric::val("cycle_failures", f(s.cycle_failures)),
        Metric::val("unknown_commits", f(s.unknown_commits)),
        Metric::val("timeouts", f(s.timeouts)),
        Metric::val("guards", f(s.guards)),
        Metric::val("drains", f(s.drains)),
        Metric::val("fenced_rejected", f(s.fenced_rejected)),
        Metric::val("config_changes", f(s.config_changes)),
        Metric::val("marks", f(s.marks)),
        Metric::val("directed", f(s.directed)),
        Metric::val("directed_refused", f(s.directed_refused)),
        Metric::val("operator_resigns", f(s.operator_resigns)),
        Metric::val("rogue_takeovers", f(s.rogue_takeovers)),
    ]);
    if let Some((c, found)) = checked {
        out.extend([
            Metric::val("elections", f(c.elections)),
            Metric::val("takeovers", f(c.takeovers)),
            Metric::val("handovers", f(c.handovers)),
            Metric::val("fenced_writes", f(c.fenced_writes)),
            Metric::val("beliefs", f(c.beliefs)),
            Metric::val("policy_takeovers_judged", f(c.policy_takeovers_judged)),
            Metric::val(
                "violations",
                f(u64::try_from(found.len()).unwrap_or(u64::MAX)),
            ),
        ]);
    }
}
