//! Timing rules of the runner: heartbeat jitter, back-off after failures, and rate-limited
//! warnings. Pure: the randomness is the machine's own seeded generator.

use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;

use crate::clock::LocalInstant;

/// `d × factor`, or `d` if that is not representable.
pub(crate) fn scale(d: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * factor).unwrap_or(d)
}

/// `d / n` for a non-zero constant `n`.
pub(crate) fn part(d: Duration, n: u32) -> Duration {
    d.checked_div(n).unwrap_or(Duration::ZERO)
}

/// A heartbeat with jitter: uniformly between 80% and 100% of `heartbeat`, so candidates do
/// not cycle in lockstep and never wait longer than one heartbeat.
pub(crate) fn jittered(rng: &mut StdRng, heartbeat: Duration) -> Duration {
    scale(heartbeat, rng.random_range(0.8..=1.0))
}

/// `t - d`, saturating at the clock's origin.
pub(crate) fn before(t: LocalInstant, d: Duration) -> LocalInstant {
    LocalInstant::from_origin(t.since_origin().saturating_sub(d))
}

/// Capped exponential back-off with jitter: from 1/32 of a heartbeat (at least 1 ms),
/// doubling after each failure, up to half a heartbeat.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    current: Option<Duration>,
}

impl Backoff {
    pub(crate) fn next(&mut self, rng: &mut StdRng, heartbeat: Duration) -> Duration {
        let initial = part(heartbeat, 32).max(Duration::from_millis(1));
        let cap = part(heartbeat, 2).max(initial);
        let current = self
            .current
            .map_or(initial, |c| c.saturating_mul(2))
            .min(cap);
        self.current = Some(current);
        scale(current, rng.random_range(0.5..=1.0))
    }

    pub(crate) fn reset(&mut self) {
        self.current = None;
    }
}

/// How often a repeated failure is logged at `warn` level.
pub(crate) const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// Rate-limits a repeated warning: the first failure is logged, then at most one every
/// [`WARN_INTERVAL`], with the number of failures not logged in between.
#[derive(Debug, Default)]
pub(crate) struct WarnLimiter {
    last: Option<LocalInstant>,
    suppressed: u64,
    failures: u64,
}

impl WarnLimiter {
    /// A failure at `now`: `Some(suppressed)` if it should be logged.
    pub(crate) fn failure(&mut self, now: LocalInstant) -> Option<u64> {
        self.failures = self.failures.saturating_add(1);
        let due = self
            .last
            .is_none_or(|last| now >= last.saturating_add(WARN_INTERVAL));
        if due {
            self.last = Some(now);
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed = self.suppressed.saturating_add(1);
            None
        }
    }

    /// A success: `Some(failures)` if failures preceded it.
    pub(crate) fn success(&mut self) -> Option<u64> {
        let failures = std::mem::take(&mut self.failures);
        self.last = None;
        self.suppressed = 0;
        (failures > 0).then_some(failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn backoff_doubles_up_to_half_a_heartbeat() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut b = Backoff::default();
        let hb = Duration::from_millis(320);
        let mut last = Duration::ZERO;
        for _ in 0..10 {
            last = b.next(&mut rng, hb);
            assert!(last <= Duration::from_millis(160));
        }
        assert!(last >= Duration::from_millis(80));
        b.reset();
        assert!(b.next(&mut rng, hb) <= Duration::from_millis(10));
    }

    #[test]
    fn warnings_are_rate_limited_and_recovery_is_reported_once() {
        let mut w = WarnLimiter::default();
        let t = |ms| LocalInstant::from_origin(Duration::from_millis(ms));
        assert_eq!(w.failure(t(0)), Some(0));
        assert_eq!(w.failure(t(1_000)), None);
        assert_eq!(w.failure(t(2_000)), None);
        assert_eq!(w.failure(t(10_000)), Some(2));
        assert_eq!(w.success(), Some(4));
        assert_eq!(w.success(), None);
    }

    #[test]
    fn jitter_stays_within_a_heartbeat() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..100 {
            let d = jittered(&mut rng, Duration::from_secs(1));
            assert!(d >= Duration::from_millis(800) && d <= Duration::from_secs(1));
        }
        assert_eq!(part(Duration::from_secs(1), 4), Duration::from_millis(250));
        assert_eq!(
            before(
                LocalInstant::from_origin(Duration::from_secs(1)),
                Duration::from_secs(2)
            ),
            LocalInstant::ZERO
        );
    }
}
