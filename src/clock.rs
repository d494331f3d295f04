//! Local monotonic time, injected.
//!
//! Every reading is meaningful only to the process that took it: readings are never persisted
//! and never compared across processes. The election core never reads a clock itself; the
//! [`Candidate`](crate::Candidate) handle reads its injected [`Clock`] at exactly the points the
//! protocol prescribes (before an attempt, after its reads).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A reading of one process's monotonic clock: the time elapsed since that clock's origin.
///
/// Two `LocalInstant`s are comparable only when they come from the same [`Clock`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalInstant(Duration);

impl LocalInstant {
    /// The clock's origin.
    pub const ZERO: LocalInstant = LocalInstant(Duration::ZERO);

    /// An instant `since_origin` after the clock's origin.
    pub const fn from_origin(since_origin: Duration) -> Self {
        LocalInstant(since_origin)
    }

    /// The time elapsed between the clock's origin and this instant.
    pub const fn since_origin(self) -> Duration {
        self.0
    }

    /// `self + d`, or `None` on overflow.
    pub fn checked_add(self, d: Duration) -> Option<LocalInstant> {
        self.0.checked_add(d).map(LocalInstant)
    }

    /// `self + d`, saturating at the largest representable instant.
    pub fn saturating_add(self, d: Duration) -> LocalInstant {
        LocalInstant(self.0.saturating_add(d))
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: LocalInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for LocalInstant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// A monotonic clock. Implementations must never go backwards.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current reading.
    fn now(&self) -> LocalInstant;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> LocalInstant {
        (**self).now()
    }
}

/// The operating system's monotonic clock (`std::time::Instant`), with its origin at the first
/// reading taken by any `SystemClock` in this process.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> LocalInstant {
        static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
        let origin = *ORIGIN.get_or_init(std::time::Instant::now);
        LocalInstant(std::time::Instant::now().saturating_duration_since(origin))
    }
}

/// The tokio clock (`tokio::time::Instant`), which follows tokio's paused and advanced time in
/// tests (`#[tokio::test(start_paused = true)]`). Its origin is the first reading taken by this
/// value or its clones.
#[derive(Clone, Debug)]
pub struct TokioClock {
    origin: Arc<OnceLock<tokio::time::Instant>>,
}

impl TokioClock {
    /// A tokio clock whose origin is its first reading.
    pub fn new() -> Self {
        TokioClock {
            origin: Arc::new(OnceLock::new()),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> LocalInstant {
        let origin = *self.origin.get_or_init(tokio::time::Instant::now);
        LocalInstant(tokio::time::Instant::now().saturating_duration_since(origin))
    }
}

/// A clock that moves only when told to: for tests and simulations.
///
/// Clones share the same reading.
///
/// ```
/// use fdb_leader_election::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now().since_origin(), Duration::from_millis(1500));
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `d` (saturating at about 584 years).
    pub fn advance(&self, d: Duration) {
        let add = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let mut cur = self.nanos.load(Ordering::SeqCst);
        loop {
            let next = cur.saturating_add(add);
            match self
                .nanos
                .compare_exchange(cur, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(seen) => cur = seen,
            }
        }
    }

    /// Moves the clock to `t` if `t` is later than the current reading; never moves it back.
    pub fn advance_to(&self, t: LocalInstant) {
        let target = u64::try_from(t.since_origin().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_max(target, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> LocalInstant {
        LocalInstant(Duration::from_nanos(self.nanos.load(Ordering::SeqCst)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_never_goes_back() {
        let c = ManualClock::new();
        c.advance(Duration::from_secs(5));
        c.advance_to(LocalInstant::from_origin(Duration::from_secs(1)));
        assert_eq!(c.now().since_origin(), Duration::from_secs(5));
        c.advance_to(LocalInstant::from_origin(Duration::from_secs(7)));
        assert_eq!(c.now().since_origin(), Duration::from_secs(7));
    }

    #[test]
    fn system_clock_is_monotonic() {
        let a = SystemClock.now();
        let b = SystemClock.now();
        assert!(b >= a);
    }
}
