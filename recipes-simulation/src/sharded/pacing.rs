//! Oracle S8 (shard-cadence): a member whose cycle failed waits out its back-off before the
//! next one, and not longer.
//!
//! After the executor learns that a member cycle failed (an error, a commit that failed, the
//! executor's timeout), at local instant `f` of the member's own clock, the member's next
//! cycle starts no sooner than `f + initial / 2` and no later than `f + cap`, where `initial =
//! max(heartbeat / 32, 1 ms)` and `cap = max(heartbeat / 2, initial)` (the runner's back-off:
//! it starts at `initial`, doubles up to `cap`, and waits a uniform 50–100% of it), whatever
//! else asks for a cycle meanwhile: a watch on its inbox, a shard ready to hand over, work
//! left to acquire. A failing store is retried at that pace, not back to back (each failed
//! cycle costs a transaction, up to a timeout each), and not given up on. The upper bound is
//! excused when the member was paused meanwhile (stop-the-world: nothing can run); a member
//! that stops or leaves has no next cycle.
//!
//! Measured on the member's clock, the one its machine schedules by: no allowance for clock
//! rates is needed. The store's own retry loop within one cycle (a conflict retried at once, a
//! retryable read error after a few milliseconds) is one cycle, not a retry of a failed one.

use crate::oracles::{OracleId, Violation};
use crate::time::{MS, Nanos, secs};

/// Rounding between the machine's `Duration`s and the simulation's nanoseconds.
const SLACK: Nanos = 1_000;

/// S8's record of one member incarnation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pacing {
    /// When the last cycle's failure was learned (local), until the next cycle starts.
    failed_at: Option<Nanos>,
    /// Paused since then: the upper bound does not apply.
    excused: bool,
}

impl Pacing {
    /// The executor learned at local `at` that the member's cycle failed.
    pub(crate) fn failed(&mut self, at: Nanos) {
        self.failed_at = Some(at);
        self.excused = false;
    }

    /// The member was paused.
    pub(crate) fn excuse(&mut self) {
        self.excused = true;
    }

    /// A member cycle starts at local `at`, with the member's configuration's `heartbeat`.
    pub(crate) fn cycle_started(
        &mut self,
        label: &str,
        at: Nanos,
        heartbeat: Nanos,
    ) -> Option<Violation> {
        let failed = self.failed_at.take()?;
        let excused = std::mem::take(&mut self.excused);
        let initial = (heartbeat / 32).max(MS);
        let least = initial / 2;
        let cap = (heartbeat / 2).max(initial);
        let gap = at.saturating_sub(failed);
        let message = if gap.saturating_add(SLACK) < least {
            format!(
                "{label} started a cycle {} s after its last one failed (local {} s), sooner \
                 than the back-off's least delay {} s: it retries a failing store back to back",
                secs(gap),
                secs(failed),
                secs(least)
            )
        } else if !excused && gap > cap.saturating_add(SLACK) {
            format!(
                "{label} started a cycle {} s after its last one failed (local {} s), later \
                 than the back-off's cap {} s",
                secs(gap),
                secs(failed),
                secs(cap)
            )
        } else {
            return None;
        };
        Some(Violation::new(OracleId::ShardCadence, message))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]

    use super::*;

    const HB: Nanos = 320 * MS;

    #[test]
    fn a_retry_within_the_back_off_passes_and_one_outside_it_fails() {
        let mut p = Pacing::default();
        // No failure: any start passes.
        assert!(p.cycle_started("a", 0, HB).is_none());
        // Least delay 5 ms (10 ms / 2), cap 160 ms.
        p.failed(1_000 * MS);
        assert!(p.cycle_started("a", 1_005 * MS, HB).is_none());
        p.failed(2_000 * MS);
        assert!(p.cycle_started("a", 2_160 * MS, HB).is_none());
        p.failed(3_000 * MS);
        let v = p.cycle_started("a", 3_000 * MS, HB).unwrap();
        assert_eq!(v.oracle, OracleId::ShardCadence);
        p.failed(4_000 * MS);
        assert!(p.cycle_started("a", 4_004 * MS, HB).is_some());
        p.failed(5_000 * MS);
        assert!(p.cycle_started("a", 5_161 * MS, HB).is_some(), "too late");
        // Only the first start after a failure is checked.
        assert!(p.cycle_started("a", 5_162 * MS, HB).is_none());
    }

    #[test]
    fn a_pause_excuses_lateness_not_haste() {
        let mut p = Pacing::default();
        p.failed(0);
        p.excuse();
        assert!(p.cycle_started("a", 10_000 * MS, HB).is_none());
        p.failed(20_000 * MS);
        p.excuse();
        assert!(p.cycle_started("a", 20_000 * MS, HB).is_some());
        // A new failure clears the excuse.
        p.failed(30_000 * MS);
        assert!(p.cycle_started("a", 31_000 * MS, HB).is_some());
    }

    #[test]
    fn a_tiny_heartbeat_keeps_the_one_millisecond_floor() {
        let mut p = Pacing::default();
        p.failed(0);
        // heartbeat 8 ms: initial 1 ms, least 0.5 ms, cap 4 ms.
        assert!(p.cycle_started("a", MS / 4, 8 * MS).is_some());
        p.failed(0);
        assert!(p.cycle_started("a", MS / 2, 8 * MS).is_none());
    }
}
