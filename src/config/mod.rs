//! Election configuration: validated when built, stored in the database, shared by every
//! participant.

use std::time::Duration;

mod validate;
mod version_policy;
pub use validate::ConfigError;
pub use version_policy::{UnknownVersionPolicy, VersionPolicy};

/// One million: clock rate errors are configured in parts per million.
const PPM: u64 = 1_000_000;

/// Election-wide configuration, stored under the election's subspace.
///
/// Build it with [`ElectionConfig::builder`]; every instance has passed validation.
///
/// ```
/// use fdb_leader_election::ElectionConfig;
/// use std::time::Duration;
///
/// let config = ElectionConfig::builder()
///     .lease_duration(Duration::from_secs(6))
///     .heartbeat_interval(Duration::from_secs(2))
///     .candidate_timeout(Duration::from_secs(9))
///     .build()?;
/// assert_eq!(config.lease_duration(), Duration::from_secs(6));
///
/// // A heartbeat longer than a third of the lease is rejected, naming the rule.
/// let err = ElectionConfig::builder()
///     .lease_duration(Duration::from_secs(6))
///     .heartbeat_interval(Duration::from_secs(3))
///     .build()
///     .unwrap_err();
/// assert!(err.to_string().contains("heartbeat"));
/// # Ok::<(), fdb_leader_election::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElectionConfig {
    pub(crate) lease_duration: Duration,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) candidate_timeout: Duration,
    pub(crate) election_enabled: bool,
    pub(crate) allow_preemption: bool,
    pub(crate) max_clock_rate_error_ppm: u32,
    pub(crate) min_tenure: Duration,
    pub(crate) handover_grace: Duration,
    pub(crate) takeover_stagger: Duration,
    pub(crate) transaction_timeout: Duration,
    /// `None`: two heartbeats (derived, so that it follows a change of heartbeat).
    pub(crate) reservation_timeout: Option<Duration>,
    pub(crate) version_policy: VersionPolicy,
}

/// Default lease: 10 s (as in the v0.11 recipe).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(10);
/// Default heartbeat: 3 s (as in the v0.11 recipe).
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);
/// Default candidate timeout: 15 s (as in the v0.11 recipe).
pub const DEFAULT_CANDIDATE_TIMEOUT: Duration = Duration::from_secs(15);
/// Default maximum clock rate error ρ: 1% (10,000 parts per million).
pub const DEFAULT_MAX_CLOCK_RATE_ERROR_PPM: u32 = 10_000;

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            lease_duration: DEFAULT_LEASE_DURATION,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            candidate_timeout: DEFAULT_CANDIDATE_TIMEOUT,
            election_enabled: true,
            allow_preemption: true,
            max_clock_rate_error_ppm: DEFAULT_MAX_CLOCK_RATE_ERROR_PPM,
            min_tenure: Duration::ZERO,
            handover_grace: Duration::from_secs(5),
            takeover_stagger: Duration::from_millis(300),
            transaction_timeout: Duration::from_secs(1),
            reservation_timeout: None,
            version_policy: VersionPolicy::Ignore,
        }
    }
}

impl ElectionConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> ElectionConfigBuilder {
        ElectionConfigBuilder {
            config: ElectionConfig::default(),
            grace_given: false,
        }
    }

    /// A builder starting from this configuration.
    pub fn to_builder(&self) -> ElectionConfigBuilder {
        ElectionConfigBuilder {
            config: self.clone(),
            grace_given: true,
        }
    }

    /// The defaults scaled to `lease`, as v0.11's `with_lease_duration` did: heartbeat a third
    /// of the lease, candidate timeout one and a half leases, transaction timeout a third of
    /// the heartbeat, takeover stagger a thirtieth of the lease (and, as always unless given,
    /// handover grace half the lease).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] if `lease` is zero or too long.
    pub fn with_lease_duration(lease: Duration) -> Result<Self, ConfigError> {
        let heartbeat = div(lease, 3);
        ElectionConfig::builder()
            .lease_duration(lease)
            .heartbeat_interval(heartbeat)
            .candidate_timeout(lease.saturating_add(div(lease, 2)))
            .transaction_timeout(div(heartbeat, 3))
            .takeover_stagger(div(lease, 30))
            .build()
    }

    /// How long a leader holds the lease without renewing. Followers wait this long, on their
    /// own clocks, with the leader record unchanged, before they may take over.
    pub fn lease_duration(&self) -> Duration {
        self.lease_duration
    }

    /// How often each participant runs an election cycle.
    pub fn heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval
    }

    /// How long a candidate may go without a heartbeat before it counts as dead (measured in
    /// leader renewals, see [`renewals_before_dead`](Self::renewals_before_dead)).
    pub fn candidate_timeout(&self) -> Duration {
        self.candidate_timeout
    }

    /// Whether elections run at all. When disabled, nobody acquires, the leader steps down at
    /// its next cycle, and candidates only heartbeat.
    pub fn election_enabled(&self) -> bool {
        self.election_enabled
    }

    /// Whether a strictly higher-priority candidate may ask the leader to hand over.
    pub fn allow_preemption(&self) -> bool {
        self.allow_preemption
    }

    /// ρ, the largest clock rate error assumed of any participant, in parts per million.
    pub fn max_clock_rate_error_ppm(&self) -> u32 {
        self.max_clock_rate_error_ppm
    }

    /// How long a leader keeps leadership before it honours a handover request.
    pub fn min_tenure(&self) -> Duration {
        self.min_tenure
    }

    /// How long a leader asked to hand over may keep renewing while it finishes in-flight work
    /// (unless set, half the lease). It counts from when the runner closed the guard, and a
    /// drain under way follows the configuration its leader reads at each cycle: lowering the
    /// grace shortens a drain already under way, raising it lengthens it.
    pub fn handover_grace(&self) -> Duration {
        self.handover_grace
    }

    /// The delay per priority rank when followers take over a lapsed lease, so the
    /// highest-priority live candidate normally wins first.
    pub fn takeover_stagger(&self) -> Duration {
        self.takeover_stagger
    }

    /// The per-attempt transaction timeout a runner should use (shorter than the heartbeat).
    pub fn transaction_timeout(&self) -> Duration {
        self.transaction_timeout
    }

    /// How long a vacancy a leader reserved for a candidate (handing over, resigning,
    /// stepping down for health) waits for that candidate, unchanged, before it opens to the
    /// others (by rank, as an unreserved one): two heartbeats unless set. Nobody believes in
    /// a vacancy its leader wrote, so no lease is waited for; a reserved candidate that died
    /// costs this, not a lease. An operator's hold ([`force_vacate`]) still waits a full lease.
    ///
    /// [`force_vacate`]: crate::LeaderElection::force_vacate
    pub fn reservation_timeout(&self) -> Duration {
        self.reservation_timeout
            .unwrap_or_else(|| self.heartbeat_interval.saturating_mul(2))
    }

    /// How long a candidate's heartbeat must stand still, as a follower sees it, before a
    /// takeover passes over that candidate although the version policy ranks it ahead (it
    /// died, though the registry, measured in renewals that stopped with the leader, still
    /// shows it live): the [reservation timeout](Self::reservation_timeout), but never less
    /// than two heartbeats. A live candidate heartbeats at most a heartbeat apart, so a
    /// reservation timeout set shorter than that must not make it look dead
    /// (docs/design.md §4, §14.3).
    pub fn silence_before_passed_over(&self) -> Duration {
        self.reservation_timeout()
            .max(self.heartbeat_interval.saturating_mul(2))
    }

    /// How candidates' versions rank them for leadership, before their priority
    /// (docs/design.md §14.2): [`VersionPolicy::Ignore`] unless set. Safe to change at any moment: leadership
    /// then moves by the ordinary cooperative handover.
    pub fn version_policy(&self) -> VersionPolicy {
        self.version_policy
    }

    /// The reservation timeout as set, if it was (`None`: two heartbeats, whatever the
    /// heartbeat).
    pub(crate) fn reservation_timeout_setting(&self) -> Option<Duration> {
        self.reservation_timeout
    }

    /// How long a leader believes in a lease of `lease` after the attempt that acquired or
    /// renewed it started: `lease × (1 − ρ) / (1 + ρ)`, rounded down.
    pub fn local_validity(&self, lease: Duration) -> Duration {
        scale_down(lease, self.max_clock_rate_error_ppm)
    }

    /// How long before its belief ends a leader starts its last renewal attempt: room for one
    /// attempt (`transaction_timeout`) and a quarter of a heartbeat of slack, so that attempt
    /// ends, even when it times out, before the belief does. The runner's schedule renews at
    /// the latest this long before the deadline; [`min_renewal_interval`](Self::min_renewal_interval)
    /// and validation take it from here, so the rule that schedules renewals and the rule that
    /// accepts a configuration are one.
    pub fn renewal_margin(&self) -> Duration {
        self.transaction_timeout
            .saturating_add(div(self.heartbeat_interval, 4))
    }

    /// The shortest interval the runner's schedule leaves between the starts of two renewals
    /// (with no failure): the jittered heartbeat (at least 80% of it), or the belief less the
    /// [`renewal_margin`](Self::renewal_margin), whichever is shorter. A valid configuration
    /// keeps it at least half a heartbeat ([`ConfigError::BeliefTooShortToRenew`]), so a
    /// leader renews at most twice per heartbeat, never in a loop.
    pub fn min_renewal_interval(&self) -> Duration {
        let by_deadline = self
            .local_validity(self.lease_duration)
            .saturating_sub(self.renewal_margin());
        div(self.heartbeat_interval.saturating_mul(4), 5).min(by_deadline)
    }

    /// The number of leader renewals a live candidate may lag behind:
    /// `ceil(candidate_timeout / heartbeat_interval)`.
    pub fn renewals_before_dead(&self) -> u64 {
        let hb = self.heartbeat_interval.as_nanos().max(1);
        let t = self.candidate_timeout.as_nanos();
        let k = t.div_ceil(hb);
        u64::try_from(k).unwrap_or(u64::MAX)
    }
}

/// The shortest per-attempt transaction timeout (1 ms): no store commits faster, so a shorter
/// bound only turns every attempt into an unknown result, retried forever. Since the heartbeat
/// must be longer and the lease at least three heartbeats, this also bounds those from below.
pub const MIN_TRANSACTION_TIMEOUT: Duration = Duration::from_millis(1);

/// The longest duration any setting may take (one year): keeps every sum of durations and
/// instants far from overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// `d / n`, rounded down, for a constant non-zero `n` (zero for `n == 0`, which no caller
/// passes): `Duration`'s `/` operator panics on a zero divisor.
fn div(d: Duration, n: u32) -> Duration {
    d.checked_div(n).unwrap_or(Duration::ZERO)
}

/// `d × (1 − ρ) / (1 + ρ)` for ρ in parts per million, rounded down.
fn scale_down(d: Duration, ppm: u32) -> Duration {
    let ppm = u128::from(ppm);
    let ppm_total = u128::from(PPM);
    let num = ppm_total.saturating_sub(ppm);
    let den = ppm_total.saturating_add(ppm);
    let nanos = d
        .as_nanos()
        .saturating_mul(num)
        .checked_div(den)
        .unwrap_or(0);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The shortest lease whose belief ([`scale_down`]) is at least `d`: `d × (1 + ρ) / (1 − ρ)`,
/// rounded up (for error messages).
fn scale_up(d: Duration, ppm: u32) -> Duration {
    let ppm = u128::from(ppm);
    let ppm_total = u128::from(PPM);
    let num = ppm_total.saturating_add(ppm);
    let den = ppm_total.saturating_sub(ppm).max(1);
    let nanos = d.as_nanos().saturating_mul(num).div_ceil(den);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// Builds a validated [`ElectionConfig`].
#[derive(Clone, Debug)]
pub struct ElectionConfigBuilder {
    config: ElectionConfig,
    /// Whether the handover grace was given (by [`handover_grace`](Self::handover_grace), or
    /// by the configuration [`ElectionConfig::to_builder`] started from); if not, it is half
    /// the lease.
    grace_given: bool,
}

impl ElectionConfigBuilder {
    /// See [`ElectionConfig::lease_duration`]. Default 10 s.
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.config.lease_duration = d;
        self
    }
    /// See [`ElectionConfig::heartbeat_interval`]. Default 3 s; at most a third of the lease.
    pub fn heartbeat_interval(mut self, d: Duration) -> Self {
        self.config.heartbeat_interval = d;
        self
    }
    /// See [`ElectionConfig::candidate_timeout`]. Default 15 s; longer than the lease.
    pub fn candidate_timeout(mut self, d: Duration) -> Self {
        self.config.candidate_timeout = d;
        self
    }
    /// See [`ElectionConfig::election_enabled`]. Default true.
    pub fn election_enabled(mut self, enabled: bool) -> Self {
        self.config.election_enabled = enabled;
        self
    }
    /// See [`ElectionConfig::allow_preemption`]. Default true.
    pub fn allow_preemption(mut self, allow: bool) -> Self {
        self.config.allow_preemption = allow;
        self
    }
    /// See [`ElectionConfig::max_clock_rate_error_ppm`]. Default 10,000 (1%); below 500,000.
    pub fn max_clock_rate_error_ppm(mut self, ppm: u32) -> Self {
        self.config.max_clock_rate_error_ppm = ppm;
        self
    }
    /// See [`ElectionConfig::min_tenure`]. Default 0.
    pub fn min_tenure(mut self, d: Duration) -> Self {
        self.config.min_tenure = d;
        self
    }
    /// See [`ElectionConfig::handover_grace`]. Default half the lease (5 s with the default
    /// lease), so that a busy shard's or leader's handover takes the same share of a lease
    /// whatever the lease.
    pub fn handover_grace(mut self, d: Duration) -> Self {
        self.config.handover_grace = d;
        self.grace_given = true;
        self
    }
    /// See [`ElectionConfig::takeover_stagger`]. Default 300 ms.
    pub fn takeover_stagger(mut self, d: Duration) -> Self {
        self.config.takeover_stagger = d;
        self
    }
    /// See [`ElectionConfig::reservation_timeout`]. Default two heartbeats; longer than zero
    /// and at most the lease.
    pub fn reservation_timeout(mut self, d: Duration) -> Self {
        self.config.reservation_timeout = Some(d);
        self
    }
    /// See [`ElectionConfig::version_policy`]. Default [`VersionPolicy::Ignore`].
    pub fn version_policy(mut self, policy: VersionPolicy) -> Self {
        self.config.version_policy = policy;
        self
    }
    /// See [`ElectionConfig::transaction_timeout`]. Default 1 s; shorter than the heartbeat.
    pub fn transaction_timeout(mut self, d: Duration) -> Self {
        self.config.transaction_timeout = d;
        self
    }

    /// Validates and returns the configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the first rule the settings break.
    pub fn build(mut self) -> Result<ElectionConfig, ConfigError> {
        if !self.grace_given {
            self.config.handover_grace = div(self.config.lease_duration, 2);
        }
        self.config.validate()
    }
}

#[cfg(test)]
mod tests;
