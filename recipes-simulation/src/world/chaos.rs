//! Chaos and workload: crashes and restarts, pauses, partitions, outages, rolling deploys,
//! priority changes and preemption toggles.
//!
//! Each kind of action is a chain: when one fires it draws the time of the next, so every
//! choice comes from the world's generator in event order. Nothing new starts once the quiet
//! phase begins.

use rand::Rng;

use super::{Actor, Status, World};
use crate::events::{Chaos, Event, OperatorStep};
use crate::time::{Nanos, SEC, secs};

/// Mean interval of each chaos chain, in milliseconds.
fn mean_ms(c: Chaos) -> u64 {
    match c {
        Chaos::Crash => 9_000,
        Chaos::Pause => 5_000,
        Chaos::Partition => 8_000,
        Chaos::Outage => 30_000,
        Chaos::Deploy => 35_000,
        Chaos::Reprioritize => 12_000,
        Chaos::TogglePreemption => 20_000,
        Chaos::ConfigChange => 15_000,
        Chaos::ForceVacate => 25_000,
        Chaos::OperatorResign => 20_000,
        Chaos::OperatorUnregister => 30_000,
        Chaos::StaleQueryOpen => 4_000,
        Chaos::Health => 5_000,
        Chaos::Mark => 15_000,
        Chaos::Directed => 20_000,
        Chaos::PolicyChange => 20_000,
        _ => 0,
    }
}

const CHAINS: [Chaos; 16] = [
    Chaos::Crash,
    Chaos::Pause,
    Chaos::Partition,
    Chaos::Outage,
    Chaos::Deploy,
    Chaos::Reprioritize,
    Chaos::TogglePreemption,
    Chaos::ConfigChange,
    Chaos::ForceVacate,
    Chaos::OperatorResign,
    Chaos::OperatorUnregister,
    Chaos::StaleQueryOpen,
    Chaos::Health,
    Chaos::Mark,
    Chaos::Directed,
    Chaos::PolicyChange,
];

impl World {
    /// Starts every chaos chain and the operator's periodic eviction.
    pub(super) fn chaos_start(&mut self) {
        for c in CHAINS {
            self.next_chaos(c);
        }
        let d = self.between(2 * SEC, 4 * SEC);
        self.queue.push(d, Event::Operator(OperatorStep::Evict));
    }

    fn next_chaos(&mut self, c: Chaos) {
        let mean = mean_ms(c).saturating_mul(1_000_000);
        let d = self.between(mean / 4, mean.saturating_mul(7) / 4);
        let at = self.now.saturating_add(d);
        if at < self.params.quiet_from {
            self.queue.push(at, Event::Chaos(c));
        }
    }

    /// Live processes (registered or registering, not shutting down), in pid order.
    fn live(&self) -> Vec<usize> {
        self.procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.status != Status::Dead && !p.shutdown)
            .map(|(pid, _)| pid)
            .collect()
    }

    pub(super) fn pick(&mut self, from: &[usize]) -> Option<usize> {
        if from.is_empty() {
            return None;
        }
        let i = self.rng.random_range(0..from.len());
        from.get(i).copied()
    }

    pub(super) fn chaos(&mut self, c: Chaos) {
        match c {
            Chaos::Crash => {
                self.crash_one();
                self.next_chaos(c);
            }
            Chaos::Restart { node } => {
                let bias = self.node_priority(node);
                self.spawn(node, bias, 0);
            }
            Chaos::Pause => {
                let live = self.live();
                if let Some(pid) = self.pick(&live) {
                    let d = self.leases(100, crate::params::MAX_FAULT_LEASES.saturating_mul(1_000));
                    self.pause(pid, d, false);
                }
                self.next_chaos(c);
            }
            Chaos::Partition => {
                let live: Vec<usize> = self
                    .live()
                    .into_iter()
                    .filter(|&pid| !self.faults.is_partitioned(pid))
                    .collect();
                if let Some(pid) = self.pick(&live) {
                    let d = self.leases(500, 3_000);
                    self.faults.set_partitioned(pid, true);
                    self.stats.faults.partitions = self.stats.faults.partitions.saturating_add(1);
                    let end = self.now.saturating_add(d);
                    self.note_fault_end(end);
                    self.queue.push(end, Event::Chaos(Chaos::Heal { pid }));
                    let label = self.label(pid);
                    self.log(format!("FAULT partition {label} until {}", secs(end)));
                }
                self.next_chaos(c);
            }
            Chaos::Heal { pid } => {
                self.faults.set_partitioned(pid, false);
                let label = self.label(pid);
                self.log(format!("heal {label}"));
            }
            Chaos::Outage => {
                if !self.faults.outage() {
                    let d = self.leases(200, 2_000);
                    self.faults.set_outage(true);
                    self.stats.faults.outages = self.stats.faults.outages.saturating_add(1);
                    let end = self.now.saturating_add(d);
                    self.note_fault_end(end);
                    self.queue.push(end, Event::Chaos(Chaos::OutageEnd));
                    self.log(format!("FAULT database outage until {}", secs(end)));
                }
                self.next_chaos(c);
            }
            Chaos::OutageEnd => {
                self.faults.set_outage(false);
                self.log("outage over".to_owned());
            }
            Chaos::Deploy => {
                self.generation = self.generation.saturating_add(1);
                let generation = self.generation;
                // A rolling upgrade to a newer version (three times in four), or a rollback
                // to the one before the newest.
                let rollback = self.newest_minor > 0 && self.rng.random_ratio(1, 4);
                let minor = if rollback {
                    self.newest_minor.saturating_sub(1)
                } else {
                    self.newest_minor = self.newest_minor.saturating_add(1);
                    self.newest_minor
                };
                self.deploy_versions.insert(generation, minor);
                let h = &mut self.stats.health;
                if rollback {
                    h.rollbacks = h.rollbacks.saturating_add(1);
                } else {
                    h.upgrades = h.upgrades.saturating_add(1);
                }
                self.log(format!(
                    "DEPLOY generation {generation} begins: {} to 1.{minor}.0",
                    if rollback { "a rollback" } else { "an upgrade" }
                ));
                let step = self.params.heartbeat.saturating_mul(3);
                let mut at = self.now;
                for node in 0..self.params.nodes {
                    self.deploys_in_flight = self.deploys_in_flight.saturating_add(1);
                    self.queue
                        .push(at, Event::Chaos(Chaos::DeployNode { node, generation }));
                    at = at.saturating_add(step);
                }
                self.next_chaos(c);
            }
            Chaos::DeployNode { node, generation } => {
                self.deploys_in_flight = self.deploys_in_flight.saturating_sub(1);
                let old = self.nodes.get(node).and_then(|n| n.current);
                let minor = self.deploy_versions.get(&generation).copied();
                if let Some(n) = self.nodes.get_mut(node) {
                    n.generation = generation;
                    if let Some(minor) = minor {
                        n.version = Some(fdb_leader_election::Version::new(1, minor, 0));
                    }
                }
                let priority = self.node_priority(node);
                self.spawn(node, priority, 0);
                if let Some(old) = old {
                    let d = self.params.heartbeat.saturating_mul(2);
                    self.queue.push(
                        self.now.saturating_add(d),
                        Event::Chaos(Chaos::Shutdown { pid: old }),
                    );
                    self.deploys_in_flight = self.deploys_in_flight.saturating_add(1);
                }
            }
            Chaos::Shutdown { pid } => {
                self.deploys_in_flight = self.deploys_in_flight.saturating_sub(1);
                // The old incarnation leaves gracefully, or (one time in three, not in the
                // quiet phase) by crash.
                let running = self
                    .procs
                    .get(pid)
                    .is_some_and(|p| p.status != Status::Dead && !p.shutdown);
                if running && !self.quiet && self.rng.random_ratio(1, 3) {
                    self.stats.health.deploy_crashes =
                        self.stats.health.deploy_crashes.saturating_add(1);
                    self.crash_with(pid, false);
                } else {
                    self.request_shutdown(pid);
                }
            }
            Chaos::Withdraw { pid, crash } => {
                let running = self
                    .procs
                    .get(pid)
                    .is_some_and(|p| p.status == Status::Running && !p.shutdown);
                if self.quiet || !running {
                    return;
                }
                let label = self.label(pid);
                self.log(format!(
                    "{label} withdraws its handover request while the leader drains ({})",
                    if crash {
                        "it crashes; the operator removes its registration"
                    } else {
                        "a graceful shutdown"
                    }
                ));
                if crash {
                    self.crash(pid);
                    self.operator_remove(pid);
                } else {
                    self.request_shutdown(pid);
                }
            }
            Chaos::Reprioritize => {
                let live = self.live();
                if let Some(pid) = self.pick(&live) {
                    let delta = self.rng.random_range(-3..=3i32);
                    if let Some(p) = self.procs.get(pid) {
                        let now = p.candidate.priority().get();
                        let next = now.saturating_add(delta).max(0);
                        p.candidate
                            .set_priority(fdb_leader_election::Priority::new(next));
                        let label = p.label.clone();
                        self.stats.priority_changes = self.stats.priority_changes.saturating_add(1);
                        self.log(format!("{label} priority {now} -> {next}"));
                    }
                }
                self.next_chaos(c);
            }
            Chaos::TogglePreemption => {
                let allow = !self.operator.allow_preemption;
                self.operator(OperatorStep::SetPreemption { allow });
                self.next_chaos(c);
            }
            Chaos::ConfigChange
            | Chaos::ForceVacate
            | Chaos::OperatorResign
            | Chaos::OperatorUnregister
            | Chaos::StaleQueryOpen => {
                self.edge(c);
                self.next_chaos(c);
            }
            Chaos::StaleQueryAsk | Chaos::ConfigStep { .. } => self.edge(c),
            Chaos::Health => {
                self.health_fault();
                self.next_chaos(c);
            }
            Chaos::Mark => {
                self.mark();
                self.next_chaos(c);
            }
            Chaos::SetMark { node, marked } => self.set_mark(node, marked),
            Chaos::Directed => {
                self.directed();
                self.next_chaos(c);
            }
            Chaos::PolicyChange => {
                self.policy_change();
                self.next_chaos(c);
            }
            Chaos::QuietMarks => self.quiet_marks(),
            Chaos::Probe => self.probe(),
        }
    }

    /// The priority of a new incarnation on `node`: ten per deploy generation plus the node's
    /// bias.
    fn node_priority(&self, node: usize) -> i32 {
        let generation = self.nodes.get(node).map_or(0, |n| n.generation);
        let bias = self.params.node_bias.get(node).copied().unwrap_or(0);
        i32::try_from(generation)
            .unwrap_or(i32::MAX)
            .saturating_mul(10)
            .saturating_add(bias)
    }

    /// Freezes `pid` for `d` (stop-the-world): its events wait until the pause ends.
    pub(super) fn pause(&mut self, pid: usize, d: Nanos, between_check_and_act: bool) {
        let end = self.now.saturating_add(d);
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.paused_until = p.paused_until.max(end);
        let label = p.label.clone();
        self.paused_oracles(pid, end);
        let f = &mut self.stats.faults;
        if between_check_and_act {
            f.check_act_pauses = f.check_act_pauses.saturating_add(1);
        } else {
            f.pauses = f.pauses.saturating_add(1);
        }
        self.note_fault_end(end);
        self.log(format!(
            "FAULT pause {label} until {}{}",
            secs(end),
            if between_check_and_act {
                " (between its lease check and its fenced write)"
            } else {
                ""
            }
        ));
    }

    fn crash_one(&mut self) {
        let live = self.live();
        if live.len() <= 3 {
            return;
        }
        let leader = live
            .iter()
            .copied()
            .find(|&pid| self.acting_belief(pid).is_some());
        let target = match leader {
            Some(pid) if self.rng.random_bool(0.5) => Some(pid),
            _ => self.pick(&live),
        };
        if let Some(pid) = target {
            self.crash(pid);
        }
    }

    /// Crashes `pid`: its commits already on the wire may still land; its node restarts.
    fn crash(&mut self, pid: usize) {
        self.crash_with(pid, true);
    }

    /// Crashes `pid`: its commits already on the wire may still land; its node restarts if
    /// `restart` (a deploy's old incarnation, or the probe's, does not: the node has another,
    /// or the run is ending).
    pub(super) fn crash_with(&mut self, pid: usize, restart: bool) {
        let label = self.label(pid);
        let node = self.procs.get(pid).map_or(0, |p| p.node);
        self.exit(pid, "CRASH");
        self.stats.faults.crashes = self.stats.faults.crashes.saturating_add(1);
        // Its commits already on the wire may still land; the rest are lost.
        let tokens: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.actor == Actor::Proc(pid))
            .map(|(t, _)| *t)
            .collect();
        for t in tokens {
            if self.rng.random_ratio(3, 10) {
                if let Some(p) = self.pending.get_mut(&t) {
                    p.zombie = true;
                }
            } else if let Some(p) = self.pending.remove(&t) {
                self.faults.close(p.txn.id());
            }
        }
        if !restart {
            self.log(format!("FAULT crash {label} (no restart)"));
            return;
        }
        let restart = self.leases(500, 3_000);
        let at = self.now.saturating_add(restart);
        self.note_fault_end(at);
        if let Some(n) = self.nodes.get_mut(node) {
            n.restart_pending = true;
        }
        self.queue.push(at, Event::Chaos(Chaos::Restart { node }));
        self.log(format!(
            "FAULT crash {label}; node {node} restarts at {}",
            secs(at)
        ));
    }
}
