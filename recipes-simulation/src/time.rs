//! True time and the processes' local clocks.
//!
//! The simulation keeps one *true* time, in nanoseconds, that only the event loop moves. Every
//! process reads its own [`SimClock`]: `local = offset + elapsed × (1 + rate error)`, where
//! `elapsed` is the true time since the process started. The database reads [`TrueClock`], so
//! `transaction_too_old` happens after five true seconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fdb_leader_election::{Clock, LocalInstant};

/// A true or local time, or a duration, in nanoseconds.
pub type Nanos = u64;

/// One millisecond.
pub const MS: Nanos = 1_000_000;
/// One second.
pub const SEC: Nanos = 1_000_000_000;
/// Parts per million in one.
pub const PPM: i64 = 1_000_000;

/// A duration of `n` nanoseconds.
pub fn dur(n: Nanos) -> Duration {
    Duration::from_nanos(n)
}

/// The library's instant `t` nanoseconds from a clock's origin.
pub fn local(t: Nanos) -> LocalInstant {
    LocalInstant::from_origin(dur(t))
}

/// A duration in nanoseconds (saturating).
pub fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `n × num / den`, rounded down, saturating.
pub fn scale(n: Nanos, num: u64, den: u64) -> Nanos {
    let v = u128::from(n)
        .saturating_mul(u128::from(num))
        .checked_div(u128::from(den))
        .unwrap_or(0);
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// `n × num / den`, rounded up, saturating.
pub fn scale_up(n: Nanos, num: u64, den: u64) -> Nanos {
    let v = u128::from(n)
        .saturating_mul(u128::from(num))
        .div_ceil(u128::from(den.max(1)));
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// The longest true time `local` nanoseconds can take on a clock whose rate error is within
/// `rho_ppm` (the slowest clock allowed).
pub fn slowest(local: Nanos, rho_ppm: u32) -> Nanos {
    let ppm = PPM.unsigned_abs();
    scale_up(local, ppm, ppm.saturating_sub(u64::from(rho_ppm)))
}

/// A true time as seconds with nanosecond precision, for traces.
pub fn secs(t: Nanos) -> String {
    format!("{}.{:09}", t / SEC, t % SEC)
}

/// The true time, shared by the event loop (writer) and every clock (readers).
#[derive(Clone, Debug, Default)]
pub struct TrueTime(Arc<AtomicU64>);

impl TrueTime {
    /// The current true time.
    pub fn get(&self) -> Nanos {
        self.0.load(Ordering::SeqCst)
    }

    /// Moves true time to `t` (never backwards).
    pub fn set(&self, t: Nanos) {
        self.0.fetch_max(t, Ordering::SeqCst);
    }
}

/// The database's clock: true time itself.
#[derive(Clone, Debug)]
pub struct TrueClock(pub TrueTime);

impl Clock for TrueClock {
    fn now(&self) -> LocalInstant {
        local(self.0.get())
    }
}

/// A process's monotonic clock: a random offset and a constant rate error.
#[derive(Clone, Debug)]
pub struct SimClock {
    time: TrueTime,
    /// True time at which the process started.
    birth: Nanos,
    /// The local reading at birth.
    offset: Nanos,
    /// Rate error in parts per million: local time runs `1 + rate_ppm / 10^6` times as fast.
    rate_ppm: i64,
}

impl SimClock {
    /// A clock born now with this offset and rate error (`rate_ppm > -10^6`).
    pub fn new(time: TrueTime, offset: Nanos, rate_ppm: i64) -> Self {
        let birth = time.get();
        SimClock {
            time,
            birth,
            offset,
            rate_ppm: rate_ppm.max(1 - PPM),
        }
    }

    /// The rate error, in parts per million.
    pub fn rate_ppm(&self) -> i64 {
        self.rate_ppm
    }

    /// The local reading at true time `t`.
    #[expect(
        clippy::arithmetic_side_effects,
        reason = "i128 intermediates: operands are below 2^64 and the rate below 10^6 in \
                  magnitude, so no product or sum can overflow"
    )]
    pub fn local_at(&self, t: Nanos) -> Nanos {
        let elapsed = i128::from(t.saturating_sub(self.birth));
        let drift = elapsed * i128::from(self.rate_ppm) / i128::from(PPM);
        let v = i128::from(self.offset) + elapsed + drift;
        u64::try_from(v.max(0)).unwrap_or(u64::MAX)
    }

    /// The local reading now.
    pub fn local_now(&self) -> Nanos {
        self.local_at(self.time.get())
    }

    /// The true duration after which this clock has advanced by `local` (rounded up).
    pub fn true_for_local(&self, local: Nanos) -> Nanos {
        let den = u64::try_from(PPM.saturating_add(self.rate_ppm)).unwrap_or(1);
        scale_up(local, PPM.unsigned_abs(), den)
    }
}

/// Draws a process's clock, born now: a rate error within `±spread_ppm`, then an offset of
/// up to a million seconds (about 11.6 days). Both worlds draw their clocks with it.
pub(crate) fn draw_clock(
    rng: &mut rand_chacha::ChaCha8Rng,
    time: &TrueTime,
    spread_ppm: i64,
) -> SimClock {
    use rand::Rng as _;
    let rate = if spread_ppm > 0 {
        rng.random_range(spread_ppm.saturating_neg()..=spread_ppm)
    } else {
        0
    };
    let offset = rng.random_range(0..=1_000_000u64).saturating_mul(SEC);
    SimClock::new(time.clone(), offset, rate)
}

impl Clock for SimClock {
    fn now(&self) -> LocalInstant {
        local(self.local_now())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::arithmetic_side_effects)]

    use super::*;

    #[test]
    fn clocks_drift_at_their_rate_and_never_go_back() {
        let time = TrueTime::default();
        time.set(5 * SEC);
        let fast = SimClock::new(time.clone(), 100, 10_000);
        let slow = SimClock::new(time.clone(), 0, -10_000);
        time.set(15 * SEC);
        assert_eq!(fast.local_now(), 100 + 10 * SEC + 100 * MS);
        assert_eq!(slow.local_now(), 10 * SEC - 100 * MS);
        time.set(1);
        assert_eq!(slow.local_now(), 10 * SEC - 100 * MS);
        let t = fast.true_for_local(SEC);
        assert!(fast.local_at(15 * SEC + t) >= fast.local_now() + SEC);
        assert!(fast.local_at(15 * SEC + t - 1) < fast.local_now() + SEC);
    }
}
