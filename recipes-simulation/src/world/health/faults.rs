//! The health faults: a node's readiness failing, flapping or slow, the leader's work failing,
//! or a dependency of every candidate down.

use rand::Rng;

use crate::time::{Nanos, secs};
use crate::world::World;
use crate::world::process::Status;

/// How long a check's hysteresis may take to settle after a fault heals: `rise` (at most 3)
/// answers an interval (at most half a lease) apart, the first within a timeout (at most an
/// interval), and one more interval for the check in flight.
fn settle(lease: Nanos) -> Nanos {
    lease.saturating_mul(5) / 2
}

impl World {
    /// A health fault: readiness failing (3 in 10), flapping (2 in 10) or slow (3 in 20) on a
    /// node, the leader's work failing (a quarter), or a dependency of every candidate down
    /// (1 in 10), for one to four leases (a dependency one to three).
    pub(in crate::world) fn health_fault(&mut self) {
        let live = self.live_nodes();
        let lease = self.params.lease;
        let kind = self.rng.random_range(0..20u32);
        let leader_node = self.leader_node();
        let node = match (kind, leader_node) {
            (13..18, Some(n)) => Some(n),
            _ => self.pick(&live),
        };
        let Some(node) = node else {
            return;
        };
        let d = if kind >= 18 {
            self.leases(1_000, 3_000)
        } else {
            self.leases(1_000, 4_000)
        };
        let until = self.now.saturating_add(d);
        let h = &mut self.stats.health;
        let what = match kind {
            0..6 => {
                h.ready_down = h.ready_down.saturating_add(1);
                "readiness fails"
            }
            6..10 => {
                h.flaps = h.flaps.saturating_add(1);
                "readiness flaps"
            }
            10..13 => {
                h.slow_checks = h.slow_checks.saturating_add(1);
                "checks are slow"
            }
            13..18 => {
                h.work_failures = h.work_failures.saturating_add(1);
                "the work fails"
            }
            _ => {
                h.dependency_outages = h.dependency_outages.saturating_add(1);
                "a dependency of every candidate is down"
            }
        };
        if kind >= 18 {
            self.dependency_until = self.dependency_until.max(until);
        } else if let Some(n) = self.nodes.get_mut(node) {
            let slot = match kind {
                0..6 => &mut n.health.down_until,
                6..10 => &mut n.health.flap_until,
                10..13 => &mut n.health.slow_until,
                _ => &mut n.health.work_until,
            };
            *slot = (*slot).max(until);
        }
        // Until the checks' hysteresis has settled (the fault's effect on eligibility, bar a
        // cool-down: the liveness oracles' business).
        self.note_fault_end(until.saturating_add(settle(lease)));
        let on = if kind >= 18 {
            String::new()
        } else {
            format!(" on node {node}")
        };
        self.log(format!("FAULT health: {what}{on} until {}", secs(until)));
    }

    /// The nodes with a live process.
    fn live_nodes(&self) -> Vec<usize> {
        let mut nodes: Vec<usize> = self
            .procs
            .iter()
            .filter(|p| p.status != Status::Dead && !p.shutdown)
            .map(|p| p.node)
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// The node of the process that believes it leads, if any.
    pub(in crate::world) fn leader_node(&self) -> Option<usize> {
        (0..self.procs.len())
            .find(|&pid| self.acting_belief(pid).is_some())
            .and_then(|pid| self.procs.get(pid).map(|p| p.node))
    }
}
