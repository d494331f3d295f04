//! The rules a configuration keeps, checked when it is built (and when it is read back from
//! the store), and the errors that name a broken one.

use std::time::Duration;

use super::{ElectionConfig, MAX_DURATION, MIN_TRANSACTION_TIMEOUT, PPM, div, scale_up};

impl ElectionConfig {
    /// The configuration, if it keeps every rule; else the first rule it breaks.
    pub(super) fn validate(self) -> Result<Self, ConfigError> {
        let c = self;
        if c.lease_duration.is_zero() {
            return Err(ConfigError::ZeroLease);
        }
        if c.lease_duration > MAX_DURATION {
            return Err(ConfigError::TooLong {
                field: "lease_duration",
                value: c.lease_duration,
                max: MAX_DURATION,
            });
        }
        if c.heartbeat_interval.is_zero() {
            return Err(ConfigError::ZeroHeartbeat);
        }
        if c.heartbeat_interval > div(c.lease_duration, 3) {
            return Err(ConfigError::HeartbeatTooLong {
                heartbeat: c.heartbeat_interval,
                lease: c.lease_duration,
            });
        }
        if c.candidate_timeout <= c.lease_duration {
            return Err(ConfigError::CandidateTimeoutTooShort {
                candidate_timeout: c.candidate_timeout,
                lease: c.lease_duration,
            });
        }
        for (field, value) in [
            ("candidate_timeout", c.candidate_timeout),
            ("min_tenure", c.min_tenure),
            ("handover_grace", c.handover_grace),
            ("takeover_stagger", c.takeover_stagger),
        ] {
            if value > MAX_DURATION {
                return Err(ConfigError::TooLong {
                    field,
                    value,
                    max: MAX_DURATION,
                });
            }
        }
        if let Some(t) = c.reservation_timeout {
            if t.is_zero() || t > c.lease_duration {
                return Err(ConfigError::ReservationTimeoutOutOfRange {
                    reservation_timeout: t,
                    lease: c.lease_duration,
                });
            }
        }
        if u64::from(c.max_clock_rate_error_ppm) >= PPM / 2 {
            return Err(ConfigError::ClockRateErrorOutOfRange {
                ppm: c.max_clock_rate_error_ppm,
            });
        }
        if c.transaction_timeout.is_zero() {
            return Err(ConfigError::ZeroTransactionTimeout);
        }
        if c.transaction_timeout < MIN_TRANSACTION_TIMEOUT {
            return Err(ConfigError::TransactionTimeoutTooShort {
                transaction_timeout: c.transaction_timeout,
                min: MIN_TRANSACTION_TIMEOUT,
            });
        }
        if c.transaction_timeout >= c.heartbeat_interval {
            return Err(ConfigError::TransactionTimeoutTooLong {
                transaction_timeout: c.transaction_timeout,
                heartbeat: c.heartbeat_interval,
            });
        }
        if c.min_renewal_interval() < div(c.heartbeat_interval, 2) {
            return Err(ConfigError::BeliefTooShortToRenew {
                belief: c.local_validity(c.lease_duration),
                needed: c
                    .renewal_margin()
                    .saturating_add(div(c.heartbeat_interval, 2)),
                lease: c.lease_duration,
                min_lease: scale_up(
                    c.renewal_margin()
                        .saturating_add(div(c.heartbeat_interval, 2)),
                    c.max_clock_rate_error_ppm,
                ),
            });
        }
        Ok(c)
    }
}

/// A configuration rule that was broken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The lease must be longer than zero.
    #[error("lease_duration must be greater than zero")]
    ZeroLease,
    /// The reservation timeout must be longer than zero and at most the lease.
    #[error(
        "reservation_timeout ({reservation_timeout:?}) must be greater than zero and at most lease_duration ({lease:?})"
    )]
    ReservationTimeoutOutOfRange {
        /// The configured reservation timeout.
        reservation_timeout: Duration,
        /// The configured lease.
        lease: Duration,
    },
    /// The heartbeat must be longer than zero.
    #[error("heartbeat_interval must be greater than zero")]
    ZeroHeartbeat,
    /// The heartbeat must leave room for retries within one lease.
    #[error(
        "heartbeat_interval ({heartbeat:?}) must be at most a third of lease_duration ({lease:?})"
    )]
    HeartbeatTooLong {
        /// The configured heartbeat.
        heartbeat: Duration,
        /// The configured lease.
        lease: Duration,
    },
    /// A live leader must never look dead.
    #[error(
        "candidate_timeout ({candidate_timeout:?}) must be longer than lease_duration ({lease:?})"
    )]
    CandidateTimeoutTooShort {
        /// The configured candidate timeout.
        candidate_timeout: Duration,
        /// The configured lease.
        lease: Duration,
    },
    /// ρ must be in `[0, 0.5)`.
    #[error("max_clock_rate_error_ppm ({ppm}) must be below 500000 (50%)")]
    ClockRateErrorOutOfRange {
        /// The configured ρ in parts per million.
        ppm: u32,
    },
    /// The per-attempt transaction timeout must be longer than zero.
    #[error("transaction_timeout must be greater than zero")]
    ZeroTransactionTimeout,
    /// No store commits within less than [`MIN_TRANSACTION_TIMEOUT`]: a shorter bound fails
    /// every attempt.
    #[error(
        "transaction_timeout ({transaction_timeout:?}) must be at least {min:?}: no store commits faster"
    )]
    TransactionTimeoutTooShort {
        /// The configured transaction timeout.
        transaction_timeout: Duration,
        /// The shortest allowed, [`MIN_TRANSACTION_TIMEOUT`].
        min: Duration,
    },
    /// A transaction attempt must end before the next heartbeat is due.
    #[error(
        "transaction_timeout ({transaction_timeout:?}) must be shorter than heartbeat_interval ({heartbeat:?})"
    )]
    TransactionTimeoutTooLong {
        /// The configured transaction timeout.
        transaction_timeout: Duration,
        /// The configured heartbeat.
        heartbeat: Duration,
    },
    /// The leader's belief must leave the runner room to renew: after a renewal, the next one
    /// is due at the latest [`ElectionConfig::renewal_margin`] (one attempt and a quarter
    /// heartbeat) before the belief ends, and that must be at least half a heartbeat after
    /// the renewal started. Otherwise the leader would renew in a tight loop (or could not
    /// finish an attempt before its belief ends).
    #[error(
        "the leader's belief, lease_duration × (1 − ρ)/(1 + ρ) = {belief:?}, must be at least \
         transaction_timeout + 3/4 heartbeat_interval = {needed:?} so the leader can renew \
         before it ends without renewing in a loop: lengthen lease_duration ({lease:?}) to at \
         least {min_lease:?}, or shorten transaction_timeout or heartbeat_interval, or lower \
         max_clock_rate_error_ppm"
    )]
    BeliefTooShortToRenew {
        /// The leader's belief: the lease scaled down by ρ.
        belief: Duration,
        /// What it must be at least: the renewal margin plus half a heartbeat.
        needed: Duration,
        /// The configured lease.
        lease: Duration,
        /// The shortest lease that would do with the other settings.
        min_lease: Duration,
    },
    /// A duration setting is unreasonably long.
    #[error("{field} ({value:?}) must be at most {max:?}")]
    TooLong {
        /// The setting.
        field: &'static str,
        /// Its value.
        value: Duration,
        /// The largest value allowed.
        max: Duration,
    },
}
