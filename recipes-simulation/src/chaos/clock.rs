//! True time: the kernel's `CLOCK_MONOTONIC`, read by the harness and by the children (which
//! never run under the fake clock). `CLOCK_MONOTONIC` is one clock for every process of the
//! machine, so readings from different processes compare directly.

use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

/// Nanoseconds per second.
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// The monotonic clock, in nanoseconds (0 if it cannot be read, which Linux never does).
pub fn monotonic_ns() -> u64 {
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(t) => {
            let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
            let nanos = u64::try_from(t.tv_nsec()).unwrap_or(0);
            secs.saturating_mul(NS_PER_SEC).saturating_add(nanos)
        }
        Err(_) => 0,
    }
}

/// A duration in nanoseconds (saturating).
pub fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds as seconds, for printing and drawing.
#[allow(clippy::cast_precision_loss)]
pub fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Nanoseconds as milliseconds, for printing.
#[allow(clippy::cast_precision_loss)]
pub fn millis(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward() {
        let a = monotonic_ns();
        std::thread::sleep(Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b > a && b.saturating_sub(a) >= 2_000_000);
        assert_eq!(ns(Duration::from_millis(3)), 3_000_000);
        assert!((secs(1_500_000_000) - 1.5).abs() < 1e-9);
    }
}
