//! Oracle 5: liveness once faults stop.
//!
//! The run ends with a quiet phase: no new faults, no deploys, priority changes or
//! configuration toggles (the operator switches preemption on when it begins). Let `T` be the
//! instant the last fault ended (pauses, partitions, outages, slow commits, pending restarts
//! and shutdowns all over). Then:
//!
//! - from `T + lease + 2 heartbeats` on, some process believes it leads (if one live process
//!   is eligible: with nobody eligible, a leader holds, or lets go under `release`);
//! - from that deadline plus *a further handover* on, the believer is the best-ranked of the
//!   live processes: eligible if any is, and none eligible ranks above it (DESIGN §14.3: the
//!   version under the stored policy, then priority; with no versions, the highest priority).
//!
//! Eligibility is the world's truth (health checks, operator marks); `T` counts until every
//! check's hysteresis and cool-down has settled, so eligibility no longer changes.
//!
//! Durations are converted to true time on the slowest clock allowed (`/ (1 − ρ)`) and the
//! quiet phase's commit latency is added per transaction on the path. "A further handover" is
//! one handover (the request, the leader's next cycle plus the configured minimum tenure and
//! handover grace, the fill) after one lapsed reservation (a request left by a process that
//! has since crashed is honoured first; its reservation then lapses after a lease and the
//! rank stagger, capped at a heartbeat). The world computes both deadlines.

use super::rank::{Rank, Stand};
use super::{Belief, LiveProc, OracleId, Violation};
use crate::time::{Nanos, secs};

/// The liveness deadlines of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LivenessWindow {
    /// When the last fault ended.
    pub faults_over: Nanos,
    /// A leader must exist from here on.
    pub leader_by: Nanos,
    /// The best-ranked live candidate must lead from here on.
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

    /// Disarms it (the quiet phase's reservation probe takes the leader away on purpose).
    pub fn disarm(&mut self) {
        self.window = None;
    }

    /// The deadlines, once armed.
    pub fn window(&self) -> Option<LivenessWindow> {
        self.window
    }

    /// Checks the beliefs at `now` against the live processes, ranked by `rank` (the stored
    /// policy; its leader version is the believer's).
    pub fn check(
        &self,
        now: Nanos,
        beliefs: &[Belief],
        live: &[LiveProc],
        rank: &Rank,
    ) -> Option<Violation> {
        let w = self.window?;
        if now < w.leader_by || !live.iter().any(|l| l.eligible) {
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
        let rank = Rank {
            leader: leader.version.clone(),
            ..rank.clone()
        };
        let mine = Stand {
            version: leader.version.clone(),
            priority: leader.priority,
        };
        let above = live
            .iter()
            .filter(|l| l.eligible && l.label != leader.label)
            .find(|l| !leader.eligible || rank.outranks(&l.stand, &mine))?;
        Some(Violation::new(
            OracleId::Liveness,
            format!(
                "{} (priority {}, version {}{}) leads at {} s, but {} (priority {}, version {}) \
                 is live, eligible and ranked above it under the {} policy; the best-ranked \
                 was due by {} s (a further handover)",
                leader.label,
                leader.priority,
                show(leader.version.as_ref()),
                if leader.eligible {
                    ""
                } else {
                    ", not eligible"
                },
                secs(now),
                above.label,
                above.stand.priority,
                show(above.stand.version.as_ref()),
                rank.policy,
                secs(w.best_by)
            ),
        ))
    }
}

fn show(v: Option<&fdb_leader_election::Version>) -> String {
    v.map_or_else(|| "none".to_owned(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use fdb_leader_election::VersionPolicy;

    use super::*;
    use crate::oracles::rank::version;

    fn b(priority: i32, v: Option<&str>) -> Belief {
        Belief {
            label: "a".into(),
            ballot: 1,
            priority,
            remaining: 1,
            version: version(v),
            eligible: true,
        }
    }

    fn l(label: &str, priority: i32, v: Option<&str>, eligible: bool) -> LiveProc {
        LiveProc {
            label: label.into(),
            stand: Stand {
                version: version(v),
                priority,
            },
            eligible,
        }
    }

    #[test]
    fn deadlines_apply_in_order() {
        let ignore = Rank {
            policy: VersionPolicy::Ignore,
            leader: None,
        };
        let live = [l("a", 1, None, true), l("b", 5, None, true)];
        let mut o = Liveness::default();
        assert!(o.check(100, &[], &live, &ignore).is_none(), "not armed");
        o.arm(LivenessWindow {
            faults_over: 10,
            leader_by: 20,
            best_by: 30,
        });
        assert!(o.check(19, &[], &live, &ignore).is_none());
        assert!(o.check(20, &[], &live, &ignore).is_some());
        assert!(
            o.check(20, &[], &[l("b", 5, None, false)], &ignore)
                .is_none()
        );
        assert!(o.check(25, &[b(1, None)], &live, &ignore).is_none());
        assert!(o.check(30, &[b(1, None)], &live, &ignore).is_some());
        assert!(o.check(30, &[b(5, None)], &live, &ignore).is_none());
    }

    #[test]
    fn the_best_is_ranked_by_the_policy() {
        let mut o = Liveness::default();
        o.arm(LivenessWindow {
            faults_over: 0,
            leader_by: 0,
            best_by: 0,
        });
        let live = [
            l("a", 1, Some("1.0.0"), true),
            l("b", 5, Some("1.1.0"), true),
        ];
        let rank = |policy| Rank {
            policy,
            leader: None,
        };
        let old = b(1, Some("1.0.0"));
        assert!(
            o.check(
                1,
                std::slice::from_ref(&old),
                &live,
                &rank(VersionPolicy::PreferOldest)
            )
            .is_none()
        );
        assert!(
            o.check(
                1,
                std::slice::from_ref(&old),
                &live,
                &rank(VersionPolicy::PreferNewest)
            )
            .is_some()
        );
        assert!(
            o.check(
                1,
                std::slice::from_ref(&old),
                &live,
                &rank(VersionPolicy::NoDowngrade)
            )
            .is_some()
        );
        let new = Belief {
            label: "b".into(),
            ..b(5, Some("1.1.0"))
        };
        assert!(
            o.check(1, &[new], &live, &rank(VersionPolicy::NoDowngrade))
                .is_none()
        );
    }
}
