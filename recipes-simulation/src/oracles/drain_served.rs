//! Oracle 27: a drain is served in full (DESIGN §10.6: a handover "waits for busy work at
//! most" the grace; §13.3: a leader that is not eligible hands over "its work drained first,
//! at most the grace").
//!
//! Oracle 10 bounds a closed guard from above; this one bounds it from below. A leader whose
//! guard closed (for a handover request, an operator's request, or because it is not
//! eligible) while a guarded task was in flight gives that task the whole grace: the guard
//! ends, with the task still running, only once `handover_grace` has passed since the runner
//! closed it, on the leader's own clock. Ending it sooner cuts work that the library promised
//! to wait for (a slow commit that shortened the drain was such a bug).
//!
//! Judged when the guard is revoked for a handover, an ineligible step-down, a withdrawn
//! handover, the application's resignation (`Runner::resign` waits "like a handover") or a
//! step-down anyway (the ends that drain first). A guard that never closed and ends so with
//! work in flight drained nothing: it is judged as if it closed then, so only a zero grace
//! lets it pass. The other ends are not drains: a lapse, a fence, an operator who disables
//! elections, a shutdown (bounded by its stop timeout). The grace is the smallest the leader
//! may have read since it closed the guard: the one in force at the closing, lowered by any
//! configuration committed since (an operator may shorten the grace while the leader drains,
//! and the leader then uses it: `ElectionConfig::handover_grace` says so).

use super::{Closed, OracleId, Violation};
use crate::time::{Nanos, secs};

/// Oracle 27: judges the end of a closed guard of `ballot` at `local_now` on the leader's
/// clock, `busy` if a guarded task is still in flight then, ended for `reason`.
pub fn check(
    closed: &Closed,
    label: &str,
    ballot: u64,
    local_now: Nanos,
    busy: bool,
    reason: &str,
) -> Option<Violation> {
    let served = closed.at.saturating_add(closed.grace_floor);
    (busy && local_now < served).then(|| {
        Violation::new(
            OracleId::DrainServed,
            format!(
                "{label} ended its guard of ballot {ballot} ({reason}) at local {} s with guarded \
                 work in flight: the guard closed at {} s and the grace of {} s lasts until {} s",
                secs(local_now),
                secs(closed.at),
                secs(closed.grace_floor),
                secs(served),
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracles::Bounds;
    use crate::time::MS;

    fn closed(at: Nanos, grace: Nanos) -> Closed {
        Closed::new(
            at,
            0,
            Bounds {
                grace,
                heartbeat: 100 * MS,
                timeout: 50 * MS,
                min_tenure: 0,
            },
        )
    }

    #[test]
    fn busy_work_cut_before_the_grace_fails() {
        let c = closed(1_000 * MS, 200 * MS);
        let v = check(&c, "n1v1", 3, 1_150 * MS, true, "handed_over");
        assert!(v.is_some_and(|v| v.oracle == OracleId::DrainServed));
    }

    #[test]
    fn the_whole_grace_or_idle_work_passes() {
        let c = closed(1_000 * MS, 200 * MS);
        assert!(check(&c, "n1v1", 3, 1_200 * MS, true, "handed_over").is_none());
        assert!(check(&c, "n1v1", 3, 1_001 * MS, false, "handed_over").is_none());
    }

    #[test]
    fn a_grace_shortened_since_the_closing_counts() {
        let mut c = closed(1_000 * MS, 200 * MS);
        c.lower_grace(50 * MS);
        c.lower_grace(300 * MS);
        assert_eq!(c.grace_floor, 50 * MS);
        assert!(check(&c, "n1v1", 3, 1_050 * MS, true, "ineligible").is_none());
        assert!(check(&c, "n1v1", 3, 1_049 * MS, true, "ineligible").is_some());
    }
}
