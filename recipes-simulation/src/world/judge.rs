//! The oracles, run after every step (what is stored, what each process believes, who is live
//! and eligible) and at the end.

use super::{Status, World};
use crate::oracles::rank::{Rank, Stand};
use crate::oracles::{Belief, LiveProc, Progress, Violation};
use crate::time::{Nanos, secs};

impl World {
    /// The end's checks: the fenced work and the shadow counter kept, progress achieved, the
    /// faults settled, and the whole registry compared with the history.
    pub(super) fn finish(&mut self) {
        let state = self.snapshot(false);
        let shadow = state.as_ref().and_then(|s| s.shadow).unwrap_or(0);
        let counter = state.as_ref().and_then(|s| s.counter).unwrap_or(0);
        self.shadow_final = Some(shadow);
        self.stats.fenced_committed = self.fencing.committed;
        self.stats.fenced_lost = self.fencing.committed.saturating_sub(counter);
        self.stats.shadow_lost = self.stats.shadow_committed.saturating_sub(shadow);
        let achieved = crate::oracles::Achieved {
            elections: self.stats.elections,
            renewals: self.stats.renewals,
            fenced_work: self.fencing.committed,
        };
        if let Some(v) = Progress::check_end(achieved) {
            self.found.push(v);
        }
        self.stats.health.reservations_checked = self.reservation_timeout.checked;
        if !self.settled {
            self.found.push(Violation::new(
                crate::oracles::OracleId::Liveness,
                format!(
                    "faults never settled before the end at {} s: the quiet phase is too short",
                    secs(self.now)
                ),
            ));
        }
        // The full registry is compared at the end.
        if let Some(state) = self.snapshot(true) {
            if let Some(v) = self.history.check(&state) {
                self.found.push(v);
            }
        }
    }

    /// Runs the oracles after a step.
    pub(super) fn check(&mut self) {
        let version = self.db.committed_version();
        if version != self.last_checked_version {
            self.last_checked_version = version;
            if let Some(state) = self.snapshot(false) {
                self.stored_grace = state.handover_grace;
                self.grace_committed(state.handover_grace);
                let found: Vec<Violation> = [
                    self.history.check(&state),
                    self.fencing.check(&state),
                    self.ballots.check(&state),
                ]
                .into_iter()
                .flatten()
                .collect();
                self.found.extend(found);
            }
            self.poll_watches();
        }
        for who in self.quiet_machines() {
            self.found.push(Progress::went_quiet(&who));
        }
        self.check_runner_oracles();
        let beliefs = self.beliefs();
        if let Some(v) = self.belief.check(self.now, &beliefs) {
            self.found.push(v);
        }
        self.maybe_arm_liveness();
        let live = self.live_procs();
        let rank = Rank {
            policy: self.params.config.version_policy(),
            leader: None,
        };
        let eligible_live = live.iter().any(|l| l.eligible);
        let bound = |t: Nanos| self.params.reservation_bound(t);
        let found: Vec<Violation> = [
            self.liveness.check(self.now, &beliefs, &live, &rank),
            self.eligible_leads.check(self.now, &beliefs, &live),
            self.reservation_timeout
                .check(self.now, bound, eligible_live),
        ]
        .into_iter()
        .flatten()
        .collect();
        self.found.extend(found);
        if let Some(only) = self.only_oracle {
            let (keep, ignore): (Vec<Violation>, Vec<Violation>) = std::mem::take(&mut self.found)
                .into_iter()
                .partition(|v| v.oracle == only);
            for v in ignore {
                self.log(format!("ignored (only {only} stops the run): {v}"));
            }
            self.found = keep;
        }
        if !self.found.is_empty() && self.failed.is_none() {
            let mut found = std::mem::take(&mut self.found);
            found.sort_by_key(|v| v.oracle);
            found.dedup();
            for v in &found {
                self.log(format!("VIOLATION {v}"));
            }
            self.failed = Some((self.now, found));
        }
    }

    /// What every live process believes now.
    fn beliefs(&self) -> Vec<Belief> {
        self.procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.status != Status::Dead)
            .filter_map(|(pid, p)| {
                self.acting_belief(pid).map(|(ballot, remaining)| Belief {
                    label: p.label.clone(),
                    ballot,
                    priority: p.candidate.priority().get(),
                    remaining,
                    version: p.candidate.version(),
                    eligible: self.eligible_truth(pid),
                })
            })
            .collect()
    }

    /// The live, registered processes (not shutting down, paused or cut off), how they stand
    /// and whether they may lead.
    fn live_procs(&self) -> Vec<LiveProc> {
        self.procs
            .iter()
            .enumerate()
            .filter(|(pid, p)| {
                p.status == Status::Running
                    && !p.shutdown
                    && p.paused_until <= self.now
                    && !self.faults.is_partitioned(*pid)
            })
            .map(|(pid, p)| LiveProc {
                label: p.label.clone(),
                stand: Stand {
                    version: p.candidate.version(),
                    priority: p.candidate.priority().get(),
                },
                eligible: self.eligible_truth(pid),
            })
            .collect()
    }
}
