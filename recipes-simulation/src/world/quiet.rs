//! The quiet phase: faults stop, the operator restores the world's configuration, and the
//! liveness oracles are armed once every fault and workload action is over.

use super::{Status, World};
use crate::events::{Chaos, Event, OperatorStep};
use crate::oracles::LivenessWindow;
use crate::time::secs;

impl World {
    /// Faults stop. The operator restores the world's configuration (preemption on), so the
    /// highest priority can win.
    pub(super) fn begin_quiet(&mut self) {
        self.quiet = true;
        self.log(format!(
            "QUIET: no new faults; the last injected one ends at {}",
            secs(self.faults_end_at)
        ));
        self.operator(OperatorStep::Restore);
        self.quiet_marks();
    }

    /// Arms the quiet phase's oracles once every fault and workload action is over: oracle
    /// 24 at once (a cool-down may still run: its bound has room for one), oracles 5 and 21
    /// once every cool-down is over too (eligibility no longer changes), and then schedules
    /// the reservation probe.
    pub(super) fn maybe_arm_liveness(&mut self) {
        if !self.quiet || self.settled {
            return;
        }
        let settled = self.now >= self.faults_end_at
            && self.operator.config_pending.is_none()
            && !self.marks_pending
            && self.deploys_in_flight == 0
            && !self.faults.outage()
            && self.nodes.iter().all(|n| !n.restart_pending)
            && self.procs.iter().enumerate().all(|(pid, p)| {
                p.status == Status::Dead
                    || (p.status == Status::Running
                        && !p.shutdown
                        && p.paused_until <= self.now
                        && !self.faults.is_partitioned(pid))
            });
        if !settled {
            return;
        }
        if self.eligible_leads.due().is_none() {
            let cool_down = self
                .procs
                .iter()
                .filter(|p| p.status != Status::Dead)
                .map(|p| p.checks.cool_down)
                .max()
                .unwrap_or(0);
            let due = self
                .now
                .saturating_add(self.params.eligible_bound(cool_down));
            self.eligible_leads.arm(self.now, due);
            self.queue.push(due, Event::Deadline);
            self.log(format!(
                "FAULTS OVER: an eligible leader is due by {}",
                secs(due)
            ));
        }
        let cooling = self
            .procs
            .iter()
            .any(|p| p.status != Status::Dead && p.checks.cooling(p.clock.local_now()));
        if cooling {
            return;
        }
        self.settled = true;
        let leader_by = self.now.saturating_add(self.params.leader_bound());
        let best_by = leader_by.saturating_add(self.params.handover_bound());
        let w = LivenessWindow {
            faults_over: self.now,
            leader_by,
            best_by,
        };
        self.liveness.arm(w);
        self.reservation_timeout.arm(self.now);
        self.queue.push(leader_by, Event::Deadline);
        self.queue.push(best_by, Event::Deadline);
        let probe_at = best_by.saturating_add(self.params.heartbeat);
        self.queue.push(probe_at, Event::Chaos(Chaos::Probe));
        self.log(format!(
            "SETTLED: a leader is due by {}, the best-ranked by {}; the probe at {}",
            secs(leader_by),
            secs(best_by),
            secs(probe_at)
        ));
    }
}
