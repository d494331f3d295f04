//! The workload `ShardedElection`: members of a sharded election, each driven by the
//! library's sharded runner machine (`shard::machine::ShardMachine`, which `ShardedRunner`
//! executes) in simulated time, with fenced work per owned shard; beside each member, its
//! candidate for the coordinator election, driven by the runner machine as in the single
//! workload, whose leader runs placement (`ShardedElection::coordinate`) as its guarded
//! work. Tester 0 then checks the coordinator election as the single workload checks its
//! election, and every shard: ballots, fenced writes in ballot order with no lost update,
//! one believer at a time.

mod member;
mod ops;

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use fdb_leader_election::shard::machine::ShardMachine;
use fdb_leader_election::shard::{Coordinator, Layout, Member, ShardedElection};
use fdb_leader_election::{
    Candidate, CandidateId, ElectionConfig, Priority, ShardId, Subspace, VersionPolicy, Weight,
};
use foundationdb_simulation::{RustWorkload, Severity, SimDatabase};
use futures_util::future::{Either, join_all, select};

use crate::check::{self, Counts, Violation};
use crate::incarnation::txn::run;
use crate::incarnation::{Incarnation, Role, Setup};
use crate::operator;
use crate::options::{Options, Plant};
use crate::sim::{Sim, SimClock};
use crate::single::{metrics, read_back, report, write_intervals};
use crate::tester::{Beliefs, Shared, Tester};
use member::{Brain, MemberLoop};

/// The sharded election's subspace.
fn sharded() -> ShardedElection {
    ShardedElection::new(Subspace::from("sharded-election-sim"))
}

/// The sharded election's workload, one per tester.
pub(crate) struct ShardedWorkload {
    sim: Sim,
    options: Options,
    tester: Shared,
    checked: Option<(Counts, Vec<Violation>)>,
}

impl ShardedWorkload {
    pub(crate) fn new(sim: Sim) -> Self {
        let options = Options::read(sim.context(), true);
        ShardedWorkload {
            sim,
            options,
            tester: Rc::new(RefCell::new(Tester::default())),
            checked: None,
        }
    }

    fn config(&self) -> ElectionConfig {
        operator::config(self.options.lease, VersionPolicy::Ignore, true).unwrap_or_default()
    }

    fn layout(&self) -> Option<Layout> {
        Layout::new(self.options.shards, 2).ok()
    }

    /// One member slot: incarnations (a member and its coordinator candidate) one after
    /// another until `end`.
    async fn slot(&self, db: &SimDatabase, slot: u32, end: f64) {
        let sim = &self.sim;
        let Some(layout) = self.layout() else {
            return;
        };
        let name = format!("m{}s{slot}", sim.client());
        let config = self.config();
        while sim.now() < end {
            let Ok(id) = CandidateId::with_nonce(&name, sim.bits()) else {
                return;
            };
            let bound: i64 = if self.options.plant == Some(Plant::ClockBeyondRho) {
                450_000
            } else {
                9_000
            };
            let rate = i64::try_from(sim.below(2 * bound as u64 + 1)).unwrap_or(0) - bound;
            let clock = SimClock::new(sim.between(0.0, 1.0e6), rate);
            let priority = Priority::new(i32::try_from(sim.below(10)).unwrap_or(0));
            let weight = Weight::new(u32::try_from(sim.below(3)).unwrap_or(0).saturating_add(1));
            let member = Member::with_clock(id.clone(), priority, weight, Arc::new(clock));
            let beliefs: BTreeMap<ShardId, Beliefs> = (0..self.options.shards)
                .map(|s| {
                    (
                        ShardId::new(s),
                        Beliefs::new(format!("shard {s}"), id.to_string(), clock),
                    )
                })
                .collect();
            let beliefs = Rc::new(RefCell::new(beliefs));
            let election = sharded();
            let member_loop = MemberLoop {
                sim: sim.clone(),
                db: Arc::clone(db),
                election: election.clone(),
                member: member.clone(),
                clock,
                config: config.clone(),
                layout,
                tester: Rc::clone(&self.tester),
                plant: self.options.plant,
                brain: Rc::new(RefCell::new(Brain {
                    machine: ShardMachine::new(config.clone(), sim.bits(), member.now()),
                    guards: BTreeMap::new(),
                })),
                beliefs: Rc::clone(&beliefs),
                queue: VecDeque::new(),
                op: None,
                sleeping: None,
                waiting: None,
                draining: None,
                inbox: None,
                work: None,
                next_work_at: sim.now(),
                stopped: false,
                shutdown_fed: false,
                last_tokens: BTreeMap::new(),
            };
            // The member's candidate for the coordinator election: the same id, its leader
            // work placement.
            let candidate = Candidate::with_clock(id.clone(), priority, Arc::new(clock));
            let coordinator_beliefs = Rc::new(RefCell::new(Beliefs::new(
                String::new(),
                id.to_string(),
                clock,
            )));
            let coordinator = Incarnation::new(Setup {
                role: Role::Coordinator(Box::new((
                    election.clone(),
                    Coordinator::with_clock(id.clone(), Arc::new(clock)),
                ))),
                sim: sim.clone(),
                db: Arc::clone(db),
                election: election.coordinator_election().clone(),
                candidate,
                clock,
                init_config: config.clone(),
                tester: Rc::clone(&self.tester),
                beliefs: Rc::clone(&coordinator_beliefs),
                plant: None,
                seed: sim.bits(),
                busy: Rc::default(),
                seen: Rc::default(),
            });
            self.tester.borrow_mut().stats.incarnations += 1;
            let lifetime = sim.between(5.0, 40.0).min((end - sim.now()).max(0.5));
            let graceful = sim.chance(0.5);
            let shutdown_at = if graceful {
                sim.now() + lifetime
            } else {
                f64::INFINITY
            };
            let bound = lifetime + if graceful { 10.0 } else { 0.0 };
            if self.options.plant == Some(Plant::Idle) {
                sim.sleep(bound).await;
            } else {
                let both = futures_util::future::join(
                    member_loop.run(shutdown_at),
                    coordinator.run(shutdown_at),
                );
                if let Either::Right(_) = select(Box::pin(both), Box::pin(sim.sleep(bound))).await {
                    self.tester.borrow_mut().stats.crashes += 1;
                }
            }
            let now = sim.now();
            for b in beliefs.borrow_mut().values_mut() {
                b.close(&self.tester, now);
            }
            coordinator_beliefs.borrow_mut().close(&self.tester, now);
            sim.sleep(sim.between(0.2, 3.0)).await;
        }
    }
}

impl RustWorkload for ShardedWorkload {
    async fn setup(&mut self, db: SimDatabase) {
        let invalid = self.options.invalid.clone().or_else(|| {
            self.layout()
                .is_none()
                .then(|| format!("shards = {}: not a layout", self.options.shards))
        });
        if let Some(why) = invalid {
            self.options.invalid = Some(why.clone());
            self.sim.trace(
                Severity::Error,
                "LeaderElectionBadOption",
                &[("Reason".into(), why)],
            );
            return;
        }
        if self.sim.client() == 0 {
            let (e, config) = (sharded(), self.config());
            let Some(layout) = self.layout() else {
                return;
            };
            let _ = run(&db, &self.sim, &self.tester, 5000, |trx| {
                let (e, config) = (e.clone(), config.clone());
                async move { Ok(e.initialize(&trx, &config, &layout).await?) }
            })
            .await;
        }
    }

    async fn start(&mut self, db: SimDatabase) {
        if self.options.invalid.is_some() {
            return;
        }
        let end = self.sim.now() + self.options.duration;
        join_all((0..self.options.candidates).map(|s| self.slot(&db, s, end))).await;
        write_intervals(&self.sim, &db, &self.tester).await;
    }

    async fn check(&mut self, db: SimDatabase) {
        if self.sim.client() != 0 || self.options.invalid.is_some() {
            return;
        }
        match read_back(&db).await {
            Ok((entries, intervals, stats)) => {
                let cluster = check::Cluster::of(&stats, self.sim.clients());
                let (counts, found) = check::check_sharded(&entries, &intervals, cluster);
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

    fn get_metrics(&self, mut out: foundationdb_simulation::Metrics) {
        metrics(&mut out, &self.tester.borrow().stats, self.checked.as_ref());
        if let Some((c, _)) = &self.checked {
            #[allow(clippy::cast_precision_loss)]
            out.extend([
                foundationdb_simulation::Metric::val(
                    "shard_acquisitions",
                    c.shard_acquisitions as f64,
                ),
                foundationdb_simulation::Metric::val("shard_writes", c.shard_writes as f64),
            ]);
        }
    }

    fn get_check_timeout(&self) -> f64 {
        3000.0
    }
}
