//! Per-host clocks for the side-by-side scenarios.
//!
//! A [`HostClock`] reads a source of true time (a shared `ManualClock` in simulated worlds, the
//! operating system's clock in real-time ones), runs fast or slow by `rate_ppm` and is offset
//! by `offset`. Both designs get the same clock per host: this crate's candidates read it as
//! their monotonic `Clock`, and the v0.11 recipe reads it as the wall clock it passes as
//! `current_time` (a duration since a pretend UNIX epoch, [`EPOCH`]).

#![warn(clippy::arithmetic_side_effects)]

use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::{Clock, LocalInstant};

/// Where every host clock starts when true time is zero: an ordinary wall-clock reading
/// (November 2023), far enough from zero that offsets of a few seconds stay positive.
pub(crate) const EPOCH: Duration = Duration::from_secs(1_700_000_000);

/// One host's clock: `EPOCH + offset + truth × (1 + rate_ppm / 10⁶)`.
#[derive(Clone, Debug)]
pub(crate) struct HostClock {
    truth: Arc<dyn Clock>,
    offset_nanos: i128,
    rate_ppm: i128,
}

impl HostClock {
    /// A clock `offset_ms` ahead of true time (behind if negative) whose rate is off by
    /// `rate_ppm` parts per million.
    pub(crate) fn new(truth: Arc<dyn Clock>, offset_ms: i64, rate_ppm: i64) -> Self {
        HostClock {
            truth,
            offset_nanos: i128::from(offset_ms).saturating_mul(1_000_000),
            rate_ppm: i128::from(rate_ppm),
        }
    }

    /// A clock that agrees with true time.
    pub(crate) fn exact(truth: Arc<dyn Clock>) -> Self {
        Self::new(truth, 0, 0)
    }

    /// The reading, as a duration since the pretend UNIX epoch (what the v0.11 recipe stores).
    pub(crate) fn wall(&self) -> Duration {
        let truth = i128::try_from(self.truth.now().since_origin().as_nanos()).unwrap_or(i128::MAX);
        let scaled = truth
            .saturating_mul(self.rate_ppm.saturating_add(1_000_000))
            .checked_div(1_000_000)
            .unwrap_or(i128::MAX);
        let epoch = i128::try_from(EPOCH.as_nanos()).unwrap_or(i128::MAX);
        let nanos = epoch
            .saturating_add(self.offset_nanos)
            .saturating_add(scaled)
            .clamp(0, i128::from(u64::MAX));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

impl Clock for HostClock {
    fn now(&self) -> LocalInstant {
        LocalInstant::from_origin(self.wall())
    }
}
