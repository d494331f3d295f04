//! Oracle 5: liveness once faults stop.
//!
//! The run ends with a quiet phase: no new faults, no deploys, priority changes or
//! configuration toggles (the operator switches preemption on when it begins). Let `T` be the
//! instant the last fault ended (pauses, partitions, outages, slow commits, pending restarts
//! and shutdowns all over). Then:
//!
//! - from `T + lease + 2 heartbeats` on, some process believes it leads;
//! - from that deadline plus *a further handover* on, the believer has the highest priority
//!   among the live processes.
//!
//! Durations are converted to true time on the slowest clock allowed (`/ (1 − ρ)`) and the
//! quiet phase's commit latency is added per transaction on the path. "A further handover" is
//! one handover (the request, the leader's next cycle plus the configured minimum tenure and
//! handover grace, the fill) after one lapsed reservation (a request left by a process that
//! has since crashed is honoured first; its reservation then lapses after a lease and the
//! rank stagger, capped at a heartbeat). The world computes both deadlines.

use super::{Belief, OracleId, Violation};
use crate::time::{Nanos, secs};

/// The liveness deadlines of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LivenessWindow {
    /// When the last fault ended.
    pub faults_over: Nanos,
    /// A leader must exist from here on.
    pub leader_by: Nanos,
    /// The highest-priority live candidate must lead from here on.
    pub best_by: Nanos,
}

/// Oracle 5.
#[derive(Debug, Default)]
pub struct Liveness {
    window: Option<LivenessWindow>,
}

impl Liveness {
    /// Arms the oracle once faults have stopped.
    pub fn arm(&mut self, w: LivenessWindow) {
        self.window = Some(w);
    }

    /// The deadlines, once armed.
    pub fn window(&self) -> Option<LivenessWindow> {
        self.window
    }

    /// Checks the beliefs at `now`; `best` is the highest priority among live processes.
    pub fn check(&self, now: Nanos, beliefs: &[Belief], best: Option<i32>) -> Option<Violation> {
        let w = self.window?;
        if now < w.leader_by {
            return None;
        }
        let Some(leader) = beliefs.first() else {
            return Some(Violation::new(
                OracleId::Liveness,
                format!(
                    "no process believes it leads at {} s; faults ended at {} s, so a leader was \
                     due by {} s (lease + 2 heartbeats)",
                    secs(now),
                    secs(w.faults_over),
                    secs(w.leader_by)
                ),
            ));
        };
        if now < w.best_by {
            return None;
        }
        match best {
            Some(best) if leader.priority < best => Some(Violation::new(
                OracleId::Liveness,
                format!(
                    "{} (priority {}) leads at {} s, but a live candidate has priority {best}; \
                     the highest priority was due by {} s (a further handover)",
                    leader.label,
                    leader.priority,
                    secs(now),
                    secs(w.best_by)
                ),
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(priority: i32) -> Belief {
        Belief {
            label: "a".into(),
            ballot: 1,
            priority,
            remaining: 1,
        }
    }

    #[test]
    fn deadlines_apply_in_order() {
        let mut o = Liveness::default();
        assert!(o.check(100, &[], Some(5)).is_none(), "not armed");
        o.arm(LivenessWindow {
            faults_over: 10,
            leader_by: 20,
            best_by: 30,
        });
        assert!(o.check(19, &[], Some(5)).is_none());
        assert!(o.check(20, &[], Some(5)).is_some());
        assert!(o.check(25, &[b(1)], Some(5)).is_none());
        assert!(o.check(30, &[b(1)], Some(5)).is_some());
        assert!(o.check(30, &[b(5)], Some(5)).is_none());
    }
}
