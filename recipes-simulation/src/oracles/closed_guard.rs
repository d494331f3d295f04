//! Oracle 10: no leader keeps a closed guard (DESIGN §10.6: no path leaves a leader holding
//! the leadership with a closed guard for longer than `handover_grace` plus one heartbeat).
//!
//! A guard is *closed* when it accepts no new work: a handover request or an operator's
//! request was honoured and the leader drains its guarded work first, or a resignation waits
//! for it. From then on the runner machine ends the leadership within the grace (it waits
//! for busy work at most that long), a heartbeat (its next cycle, which hands over, or, when
//! the request was withdrawn meanwhile, steps down anyway) and the two transactions on the
//! way (that cycle and the resignation, each bounded by the transaction timeout). So, on the
//! leader's own clock, a guard closed at `c` that is still live (not revoked, before its
//! deadline) at
//!
//! ```text
//! c + grace + heartbeat + 2 × transaction_timeout + excused + 1 ms
//! ```
//!
//! is a violation, with each setting the larger of the configuration in force when the guard
//! closed and now. Two allowances. A minimum tenure delays honouring a request (the library
//! closes the guard as soon as it keeps the request, and hands over once the tenure is over),
//! so `c` is the later of the closing and the tenure's end (the guard's issue plus
//! `min_tenure`, the larger of then and now: an operator who lengthens the minimum tenure
//! while the guard is closed lengthens the wait). Faults on the way: after a cycle or resignation fails while the guard is
//! closed (at `f`), the machine retries within half a heartbeat (the back-off's cap), so the
//! guard also may live until `f + heartbeat / 2 + 2 × transaction_timeout`; and a
//! stop-the-world pause adds its length on the leader's clock. Faults that go on (an outage,
//! a partition) stop the renewals too, and the guard then ends at its deadline: the lease
//! lapses.

use super::{OracleId, Violation};
use crate::time::{MS, Nanos, secs};

/// The settings that bound how long a guard may stay closed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bounds {
    /// `handover_grace`.
    pub grace: Nanos,
    /// `heartbeat_interval`.
    pub heartbeat: Nanos,
    /// `transaction_timeout`.
    pub timeout: Nanos,
    /// `min_tenure`.
    pub min_tenure: Nanos,
}

impl Bounds {
    fn max(self, o: Bounds) -> Bounds {
        Bounds {
            grace: self.grace.max(o.grace),
            heartbeat: self.heartbeat.max(o.heartbeat),
            timeout: self.timeout.max(o.timeout),
            min_tenure: self.min_tenure.max(o.min_tenure),
        }
    }
}

/// Oracle 10's record of one closed guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Closed {
    /// When it closed, on the leader's clock.
    pub at: Nanos,
    /// When the guard was issued, on the leader's clock: a request is honoured only once
    /// the minimum tenure from then is over (`min_tenure` of the configuration in force then
    /// or now, whichever is longer: an operator may lengthen it while the guard is closed).
    pub issued_at: Nanos,
    /// The configuration's settings then.
    pub bounds: Bounds,
    /// When a cycle or resignation last failed since, on the leader's clock.
    pub failed_at: Option<Nanos>,
    /// How long the leader was paused since, on its clock.
    pub paused: Nanos,
    /// The shortest grace the leader may have read since (oracle 27): the grace then,
    /// lowered by every configuration committed since.
    pub grace_floor: Nanos,
}

impl Closed {
    /// A guard closed at `at` under `bounds`.
    pub fn new(at: Nanos, issued_at: Nanos, bounds: Bounds) -> Self {
        Closed {
            at,
            issued_at,
            bounds,
            failed_at: None,
            paused: 0,
            grace_floor: bounds.grace,
        }
    }

    /// A configuration with `grace` was committed: the leader may read it and drain that
    /// long only.
    pub fn lower_grace(&mut self, grace: Nanos) {
        self.grace_floor = self.grace_floor.min(grace);
    }

    /// A cycle or resignation failed at `local_now` while the guard is closed.
    pub fn failed(&mut self, local_now: Nanos) {
        self.failed_at = Some(local_now);
    }

    /// The leader was paused for `local` nanoseconds of its clock.
    pub fn paused(&mut self, local: Nanos) {
        self.paused = self.paused.saturating_add(local);
    }

    /// The latest the guard may still be live, with the settings `now` in force.
    pub fn limit(&self, now: Bounds) -> Nanos {
        let b = self.bounds.max(now);
        let drained = self
            .at
            .max(self.tenure_end(now))
            .saturating_add(b.grace)
            .saturating_add(b.heartbeat);
        let retried = self
            .failed_at
            .map_or(0, |f| f.saturating_add(b.heartbeat / 2));
        drained
            .max(retried)
            .saturating_add(b.timeout.saturating_mul(2))
            .saturating_add(self.paused)
            .saturating_add(MS)
    }

    /// When the minimum tenure ends, with the settings `now` in force.
    pub fn tenure_end(&self, now: Bounds) -> Nanos {
        self.issued_at
            .saturating_add(self.bounds.min_tenure.max(now.min_tenure))
    }

    /// Checks a guard of `ballot` that is still live at `local_now`.
    pub fn check(
        &self,
        label: &str,
        ballot: u64,
        local_now: Nanos,
        now: Bounds,
    ) -> Option<Violation> {
        let limit = self.limit(now);
        (local_now > limit).then(|| {
            Violation::new(
                OracleId::ClosedGuard,
                format!(
                    "{label} still holds the closed guard of ballot {ballot} at local {} s: it \
                     closed at {} s (minimum tenure until {} s), and the grace, a heartbeat and \
                     two transactions ended at {} s (last failure {}, paused {} s)",
                    secs(local_now),
                    secs(self.at),
                    secs(self.tenure_end(now)),
                    secs(limit),
                    self.failed_at
                        .map_or_else(|| "none".to_owned(), |f| format!("at {} s", secs(f))),
                    secs(self.paused)
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]

    use super::*;

    const B: Bounds = Bounds {
        grace: 100 * MS,
        heartbeat: 50 * MS,
        timeout: 10 * MS,
        min_tenure: 0,
    };

    #[test]
    fn a_closed_guard_may_live_for_the_grace_a_heartbeat_and_two_transactions() {
        let c = Closed::new(1_000 * MS, 0, B);
        assert_eq!(c.check("a", 7, 1_171 * MS, B), None);
        let v = c.check("a", 7, 1_171 * MS + 1, B).unwrap();
        assert_eq!(v.oracle, OracleId::ClosedGuard);
    }

    #[test]
    fn a_minimum_tenure_failures_pauses_and_longer_settings_extend_it() {
        let tenure = Bounds {
            min_tenure: 500 * MS,
            ..B
        };
        let c = Closed::new(0, 0, tenure);
        assert_eq!(c.check("a", 7, 671 * MS, B), None);
        assert!(c.check("a", 7, 671 * MS + 1, B).is_some());
        // An operator lengthened the minimum tenure while the guard was closed.
        let c = Closed::new(0, 0, B);
        assert!(c.check("a", 7, 671 * MS + 1, B).is_some());
        assert_eq!(c.check("a", 7, 671 * MS, tenure), None);
        assert!(c.check("a", 7, 671 * MS + 1, tenure).is_some());

        let mut c = Closed::new(0, 0, B);
        c.failed(300 * MS);
        // 300 + 25 + 20 + 1 = 346 ms.
        assert_eq!(c.check("a", 7, 346 * MS, B), None);
        assert!(c.check("a", 7, 346 * MS + 1, B).is_some());
        c.paused(200 * MS);
        assert_eq!(c.check("a", 7, 546 * MS, B), None);
        assert!(c.check("a", 7, 546 * MS + 1, B).is_some());
        let longer = Bounds {
            grace: 500 * MS,
            ..B
        };
        // 500 + 50 + 20 + 200 + 1 = 771 ms.
        assert_eq!(c.check("a", 7, 771 * MS, longer), None);
        assert!(c.check("a", 7, 771 * MS + 1, longer).is_some());
    }
}
