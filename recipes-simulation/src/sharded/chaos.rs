//! Faults and workload of the sharded world.
//!
//! Faults and workload of the sharded world: crashes, pauses, partitions, outages, rolling
//! deploys with priorities, joins and leaves (graceful and by crash), priority and weight
//! changes, and operators (move a shard, drain a member, freeze placement).

use fdb_leader_election::{CandidateId, Priority, ShardId, Weight};

use super::commit::{PKind, Pending, Who};
use super::coord::live;
use super::{Ev, World, coord_fpid};
use crate::shard_plants::ShardPlant;
use crate::time::Nanos;

/// A chaos or workload action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Chaos {
    Crash,
    Restart {
        node: usize,
    },
    RestartCoord {
        cid: usize,
    },
    Pause,
    Partition,
    Heal {
        fpid: usize,
    },
    Outage,
    OutageEnd,
    Deploy,
    DeployNode {
        node: usize,
        last: bool,
    },
    Shutdown {
        pid: usize,
        crash: bool,
        last: bool,
    },
    Leave,
    Reprioritize,
    Reweight,
    MoveShard,
    Drain,
    Freeze,
    /// The quiet phase's operator: placement unfrozen, nobody drained.
    Restore,
    /// The move-storm plant's operator.
    Storm,
    /// The operator turns elections off (`write_config` with `election_enabled(false)`) and
    /// back on after a while.
    ElectionsOff,
    ElectionsOn,
    /// The quiet phase's failover probe: elections off, then a member stops renewing (S9).
    Probe,
    ProbeFault,
    /// The failover probe's configuration writes, retried until they commit.
    ProbeOff,
    ProbeOn,
}

/// Mean gap between two actions of a kind, milliseconds.
fn mean_ms(c: Chaos) -> u64 {
    match c {
        Chaos::Crash | Chaos::Pause => 6_000,
        Chaos::Partition | Chaos::Leave | Chaos::Reprioritize | Chaos::Reweight => 12_000,
        Chaos::Outage => 30_000,
        Chaos::Deploy => 45_000,
        Chaos::MoveShard | Chaos::Drain | Chaos::Freeze => 9_000,
        Chaos::ElectionsOff => 15_000,
        _ => 0,
    }
}

const RECURRING: [Chaos; 12] = [
    Chaos::Crash,
    Chaos::Pause,
    Chaos::Partition,
    Chaos::Outage,
    Chaos::Deploy,
    Chaos::Leave,
    Chaos::Reprioritize,
    Chaos::Reweight,
    Chaos::MoveShard,
    Chaos::Drain,
    Chaos::Freeze,
    Chaos::ElectionsOff,
];

impl World {
    pub(super) fn chaos_start(&mut self) {
        for c in RECURRING {
            self.next_chaos(c);
        }
    }

    fn next_chaos(&mut self, c: Chaos) {
        let mean = mean_ms(c).saturating_mul(crate::time::MS);
        let d = self.between(mean / 4, mean.saturating_mul(7) / 4);
        self.queue.push(self.now.saturating_add(d), Ev::Chaos(c));
    }

    pub(super) fn pick(&mut self, from: &[usize]) -> Option<usize> {
        if from.is_empty() {
            return None;
        }
        let i = self.between(0, u64::try_from(from.len()).unwrap_or(1).saturating_sub(1));
        from.get(usize::try_from(i).unwrap_or(0)).copied()
    }

    pub(super) fn chaos(&mut self, c: Chaos) {
        let recurring = RECURRING.contains(&c);
        if recurring && self.quiet {
            return;
        }
        if recurring {
            self.next_chaos(c);
        }
        match c {
            Chaos::Crash => self.crash_one(),
            Chaos::Restart { node } => self.restart(node),
            Chaos::RestartCoord { cid } => self.spawn_coord(cid),
            Chaos::Pause => self.pause_one(),
            Chaos::Partition => self.partition_one(),
            Chaos::Heal { fpid } => self.faults.set_partitioned(fpid, false),
            Chaos::Outage => {
                let d = self.leases(200, 2_000);
                self.faults.set_outage(true);
                self.oracles
                    .off
                    .disturb(self.now, self.now.saturating_add(d));
                self.stats.faults.outages = self.stats.faults.outages.saturating_add(1);
                self.note_fault_end(self.now.saturating_add(d));
                self.queue
                    .push(self.now.saturating_add(d), Ev::Chaos(Chaos::OutageEnd));
                self.log("outage begins".to_owned());
            }
            Chaos::OutageEnd => {
                self.faults.set_outage(false);
                self.log("outage ends".to_owned());
            }
            Chaos::Deploy => self.deploy(false),
            Chaos::DeployNode { node, last } => self.deploy_node(node, last),
            Chaos::Shutdown { pid, crash, last } => {
                if crash {
                    self.crash_member(pid, false);
                } else {
                    self.request_shutdown(pid);
                }
                if last {
                    let at = self.now.saturating_add(self.p.heartbeat);
                    self.queue.push(at, Ev::Arm);
                }
            }
            Chaos::Leave => self.leave_one(),
            Chaos::Reprioritize | Chaos::Reweight => self.retune(c),
            Chaos::MoveShard | Chaos::Storm => self.move_shard(c == Chaos::Storm),
            Chaos::Drain => self.drain_one(),
            Chaos::Freeze => {
                let frozen = self.chance(1, 2);
                self.operate("freeze", move |e, txn| {
                    Box::pin(async move { e.set_frozen(&txn, frozen).await.map(|_| ()) })
                });
            }
            Chaos::Restore => self.restore(),
            Chaos::ElectionsOff => {
                // Off for a fraction of a lease to a few leases.
                let d = self.leases(200, 4_000);
                self.set_elections("elections-off", false);
                self.queue
                    .push(self.now.saturating_add(d), Ev::Chaos(Chaos::ElectionsOn));
            }
            Chaos::ElectionsOn => self.set_elections("elections-on", true),
            Chaos::Probe => self.probe_begin(),
            Chaos::ProbeFault => self.probe_fault(),
            Chaos::ProbeOff => self.set_elections("probe-off", false),
            Chaos::ProbeOn => self.set_elections("probe-on", true),
        }
    }

    fn crash_one(&mut self) {
        if self.chance(1, 4) {
            if let Some(cid) = self.pick(&self.coords_alive()) {
                self.stats.faults.crashes = self.stats.faults.crashes.saturating_add(1);
                self.crash_coord(cid);
                let d = self.leases(500, 3_000);
                self.oracles
                    .off
                    .disturb(self.now, self.now.saturating_add(d));
                self.note_fault_end(self.now.saturating_add(d));
                self.queue.push(
                    self.now.saturating_add(d),
                    Ev::Chaos(Chaos::RestartCoord { cid }),
                );
            }
            return;
        }
        if let Some(pid) = self.pick(&live(&self.members)) {
            self.crash_member(pid, true);
        }
    }

    /// Crashes member `pid`; its node restarts later as a new incarnation if `restart`.
    pub(super) fn crash_member(&mut self, pid: usize, restart: bool) {
        if !self.members.get(pid).is_some_and(|m| m.alive) {
            return;
        }
        self.stats.faults.crashes = self.stats.faults.crashes.saturating_add(1);
        self.crash_pending(Who::Member(pid));
        self.held.retain(|(f, _)| *f != pid);
        let node = self.members.get(pid).map_or(0, |m| m.node);
        self.stop_member(pid, "crashes");
        if restart {
            let d = self.leases(500, 3_000);
            self.note_fault_end(self.now.saturating_add(d));
            self.queue.push(
                self.now.saturating_add(d),
                Ev::Chaos(Chaos::Restart { node }),
            );
        }
    }

    /// The node's next incarnation starts, unless a deploy started one meanwhile; if the
    /// incarnation that left gracefully has not stopped yet (its drain and leave take a
    /// while), a heartbeat later.
    fn restart(&mut self, node: usize) {
        match self.nodes.get(node).map(|n| n.0) {
            Some(None) => self.spawn_member(node, 0),
            Some(Some(pid)) if self.members.get(pid).is_some_and(|m| m.leaving) => {
                let at = self.now.saturating_add(self.p.heartbeat);
                self.queue.push(at, Ev::Chaos(Chaos::Restart { node }));
            }
            _ => {}
        }
    }

    fn pause_one(&mut self) {
        let d = self.leases(100, 4_000);
        self.stats.faults.pauses = self.stats.faults.pauses.saturating_add(1);
        if self.chance(1, 4) {
            if let Some(cid) = self.pick(&self.coords_alive()) {
                self.pause_coord(cid, d);
            }
        } else if let Some(pid) = self.pick(&live(&self.members)) {
            self.pause_member(pid, d);
        }
    }

    /// Pauses member `pid` for `d` (stop-the-world: its events wait, its transactions age).
    pub(super) fn pause_member(&mut self, pid: usize, d: Nanos) {
        let until = self.now.saturating_add(d);
        if let Some(m) = self.members.get_mut(pid) {
            m.paused_until = m.paused_until.max(until);
            m.pacing.excuse();
        }
        self.note_fault_end(until);
        let label = self.label(pid);
        self.log(format!("{label} paused until {}", crate::time::secs(until)));
    }

    fn partition_one(&mut self) {
        let fpid = if self.chance(1, 4) {
            self.pick(&self.coords_alive()).map(coord_fpid)
        } else {
            self.pick(&live(&self.members))
        };
        let Some(fpid) = fpid else {
            return;
        };
        let d = self.leases(500, 3_000);
        if fpid >= coord_fpid(0) {
            self.oracles
                .off
                .disturb(self.now, self.now.saturating_add(d));
        }
        self.faults.set_partitioned(fpid, true);
        self.stats.faults.partitions = self.stats.faults.partitions.saturating_add(1);
        self.note_fault_end(self.now.saturating_add(d));
        self.queue
            .push(self.now.saturating_add(d), Ev::Chaos(Chaos::Heal { fpid }));
    }

    /// A rolling deploy: every node in turn gets a new incarnation of the next generation
    /// (priority + 10); the old one leaves two heartbeats later, gracefully or (one in three)
    /// by crash.
    pub(super) fn deploy(&mut self, last: bool) {
        self.stats.sharded.deploys = self.stats.sharded.deploys.saturating_add(1);
        let step = self.p.deploy_step;
        let n = self.nodes.len();
        for node in 0..n {
            let at = self
                .now
                .saturating_add(step.saturating_mul(u64::try_from(node).unwrap_or(0)));
            let last = last && node.saturating_add(1) == n;
            self.queue
                .push(at, Ev::Chaos(Chaos::DeployNode { node, last }));
        }
        self.log("rolling deploy begins".to_owned());
    }

    fn deploy_node(&mut self, node: usize, last: bool) {
        let Some((old, generation)) = self.nodes.get(node).copied() else {
            return;
        };
        if let Some(n) = self.nodes.get_mut(node) {
            n.1 = generation.saturating_add(1);
        }
        self.spawn_member(node, 0);
        let crash = self.chance(1, 3);
        let at = self.now.saturating_add(self.p.heartbeat.saturating_mul(2));
        match old {
            Some(pid) => self
                .queue
                .push(at, Ev::Chaos(Chaos::Shutdown { pid, crash, last })),
            None if last => self.queue.push(at, Ev::Arm),
            None => {}
        }
    }

    /// A member leaves gracefully; its node joins again later with a new incarnation.
    fn leave_one(&mut self) {
        if let Some(pid) = self.pick(&live(&self.members)) {
            let node = self.members.get(pid).map_or(0, |m| m.node);
            self.request_shutdown(pid);
            let d = self.leases(500, 3_000);
            self.note_fault_end(self.now.saturating_add(d));
            self.queue.push(
                self.now.saturating_add(d),
                Ev::Chaos(Chaos::Restart { node }),
            );
        }
    }

    fn retune(&mut self, c: Chaos) {
        let Some(pid) = self.pick(&live(&self.members)) else {
            return;
        };
        let delta = i32::try_from(self.between(0, 6))
            .unwrap_or(3)
            .saturating_sub(3);
        let weight = u32::try_from(self.between(1, 2)).unwrap_or(1);
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        if c == Chaos::Reprioritize {
            m.member.set_priority(Priority::new(
                m.member.priority().get().saturating_add(delta),
            ));
            self.stats.priority_changes = self.stats.priority_changes.saturating_add(1);
        } else {
            m.weight = weight;
            m.member.set_weight(Weight::new(weight));
        }
    }

    fn move_shard(&mut self, storm: bool) {
        if storm {
            let at = self.now.saturating_add(self.p.heartbeat);
            self.queue.push(at, Ev::Chaos(Chaos::Storm));
        }
        let Some(pid) = self.pick(&live(&self.members)) else {
            return;
        };
        let shard = ShardId::new(
            u32::try_from(self.between(0, u64::from(self.p.shards.saturating_sub(1)))).unwrap_or(0),
        );
        let Some(to) = self.members.get(pid).map(|m| m.member.id().clone()) else {
            return;
        };
        let Ok(op) = CandidateId::parse("operator") else {
            return;
        };
        // Half the time (and always in the storm) the operator freezes placement in the same
        // transaction, as a move by hand needs.
        let freeze = storm || self.chance(1, 2);
        self.operate("move", move |e, txn| {
            Box::pin(async move {
                if freeze {
                    e.set_frozen(&txn, true).await?;
                }
                e.move_shard(&txn, shard, &to, &op).await.map(|_| ())
            })
        });
    }

    fn drain_one(&mut self) {
        let Some(pid) = self.pick(&live(&self.members)) else {
            return;
        };
        let drained = self.chance(1, 2);
        let Some(id) = self.members.get(pid).map(|m| m.member.id().clone()) else {
            return;
        };
        self.operate("drain", move |e, txn| {
            Box::pin(async move { e.set_drained(&txn, &id, drained).await.map(|_| ()) })
        });
    }

    /// The quiet phase: placement unfrozen, every member undrained and elections enabled,
    /// retried until done.
    fn restore(&mut self) {
        let ids: Vec<CandidateId> = self.members.iter().map(|m| m.member.id().clone()).collect();
        self.operate("restore", move |e, txn| {
            let ids = ids.clone();
            Box::pin(async move {
                e.set_frozen(&txn, false).await?;
                for id in &ids {
                    e.set_drained(&txn, id, false).await?;
                }
                let config = e.read_config(&txn).await?;
                let config = config.to_builder().election_enabled(true).build()?;
                e.write_config(&txn, &config).await
            })
        });
    }

    /// Operator actions retried until they commit: the quiet phase's restore, elections
    /// turned on again, and the failover probe's configuration writes.
    fn retried(name: &str) -> Option<Chaos> {
        match name {
            "restore" => Some(Chaos::Restore),
            "probe-off" => Some(Chaos::ProbeOff),
            "probe-on" => Some(Chaos::ProbeOn),
            "elections-on" => Some(Chaos::ElectionsOn),
            _ => None,
        }
    }

    /// Runs `name` again a heartbeat from now if it is retried until it commits.
    fn retry_operator(&mut self, name: &str) {
        if let Some(c) = Self::retried(name) {
            self.queue
                .push(self.now.saturating_add(self.p.heartbeat), Ev::Chaos(c));
        }
    }

    /// Runs an operator action in a transaction committed after a (short) delay.
    pub(super) fn operate<F>(&mut self, name: &'static str, body: F)
    where
        F: FnOnce(
            fdb_leader_election::shard::ShardedElection,
            fdb_leader_election::MemTransaction,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), fdb_leader_election::ElectionError>>>,
        >,
    {
        let txn = self.db.create_transaction();
        let result = self.rt.block_on(body(self.election.clone(), txn.clone()));
        match result {
            Ok(()) => self.schedule_commit(Pending::new(
                Who::Operator,
                txn,
                PKind::Operator(name),
                None,
            )),
            Err(e) => {
                self.log(format!("operator {name} refused: {e}"));
                self.retry_operator(name);
            }
        }
    }

    /// An operator transaction's result (some are retried until they commit: `retried`).
    pub(super) fn operator_result(&mut self, kind: PKind, ok: bool) {
        if ok {
            self.stats.sharded.operator_actions =
                self.stats.sharded.operator_actions.saturating_add(1);
        } else if let PKind::Operator(name) = kind {
            self.retry_operator(name);
        }
    }

    pub(super) fn begin_quiet(&mut self) {
        self.quiet = true;
        self.log("quiet: faults and workload stop".to_owned());
        let at = self.now.saturating_add(self.p.lease);
        self.queue.push(at, Ev::Chaos(Chaos::Restore));
    }

    pub(super) fn final_deploy(&mut self) {
        self.probe_verdict();
        self.log("final rolling deploy".to_owned());
        self.oracles.quiet.final_deploy = true;
        self.deploy(true);
        if self.plant == Some(ShardPlant::MoveStorm) {
            self.queue.push(self.now, Ev::Chaos(Chaos::Storm));
        }
    }
}
