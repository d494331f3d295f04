//! The command line's lower bounds on timing settings, and configuration errors worded with
//! the flags a user types (`--heartbeat`), not the library's field names
//! (`heartbeat_interval`).
//!
//! The library refuses only what can never work (a transaction bound under
//! [`MIN_TRANSACTION_TIMEOUT`](fdb_leader_election::MIN_TRANSACTION_TIMEOUT)). A process
//! supervisor needs more room: each cycle is a SQLite commit flushed to disk (or a
//! FoundationDB commit), scheduled on a loaded host, so a heartbeat of a few milliseconds
//! turns every renewal into a timeout and the leadership flaps.

use std::time::Duration;

use fdb_leader_election::ConfigError;

use crate::durations::show;

/// The shortest `--heartbeat`: 50ms.
pub(crate) const MIN_HEARTBEAT: Duration = Duration::from_millis(50);
/// The shortest `--lease`: three of the shortest heartbeats, 150ms.
pub(crate) const MIN_LEASE: Duration = Duration::from_millis(150);
/// The shortest `config set --transaction-timeout`: 10ms.
pub(crate) const MIN_TRANSACTION_TIMEOUT: Duration = Duration::from_millis(10);

/// Checks a timing flag against its lower bound: `flag` as typed (`--lease`).
pub(crate) fn at_least(flag: &str, value: Duration, min: Duration) -> Result<(), String> {
    if value < min {
        return Err(format!(
            "{flag} {} is too short: the least is {} (each cycle is a store commit, which a \
             loaded host cannot fit in less)",
            show(value),
            show(min)
        ));
    }
    Ok(())
}

/// The command-line flag of a configuration field.
pub(crate) fn flag_of(field: &str) -> String {
    let name = match field {
        "lease_duration" => "lease",
        "heartbeat_interval" => "heartbeat",
        "election_enabled" => "elections",
        "allow_preemption" => "preemption",
        other => other,
    };
    format!("--{}", name.replace('_', "-"))
}

/// A configuration error in the words of the command line.
pub(crate) fn describe(e: &ConfigError) -> String {
    match e {
        ConfigError::ZeroLease => "--lease must be longer than zero".to_owned(),
        ConfigError::ZeroHeartbeat => "--heartbeat must be longer than zero".to_owned(),
        ConfigError::HeartbeatTooLong { heartbeat, lease } => format!(
            "--heartbeat ({}) must be at most a third of --lease ({})",
            show(*heartbeat),
            show(*lease)
        ),
        ConfigError::CandidateTimeoutTooShort {
            candidate_timeout,
            lease,
        } => format!(
            "--candidate-timeout ({}) must be longer than --lease ({})",
            show(*candidate_timeout),
            show(*lease)
        ),
        ConfigError::ClockRateErrorOutOfRange { ppm } => {
            format!("--max-clock-rate-error-ppm ({ppm}) must be below 500000 (50%)")
        }
        ConfigError::ZeroTransactionTimeout => {
            "--transaction-timeout must be longer than zero".to_owned()
        }
        ConfigError::TransactionTimeoutTooShort {
            transaction_timeout,
            min,
        } => format!(
            "--transaction-timeout ({}) must be at least {}",
            show(*transaction_timeout),
            show(*min)
        ),
        ConfigError::TransactionTimeoutTooLong {
            transaction_timeout,
            heartbeat,
        } => format!(
            "--transaction-timeout ({}) must be shorter than --heartbeat ({})",
            show(*transaction_timeout),
            show(*heartbeat)
        ),
        ConfigError::ReservationTimeoutOutOfRange {
            reservation_timeout,
            lease,
        } => format!(
            "--reservation-timeout ({}) must be longer than zero and at most --lease ({})",
            show(*reservation_timeout),
            show(*lease)
        ),
        ConfigError::TooLong { field, value, max } => format!(
            "{} ({}) must be at most {}",
            flag_of(field),
            show(*value),
            show(*max)
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use fdb_leader_election::ElectionConfig;

    use super::*;

    #[test]
    fn bounds_name_the_flag() {
        assert!(at_least("--lease", Duration::from_millis(150), MIN_LEASE).is_ok());
        let e = at_least("--heartbeat", Duration::from_millis(1), MIN_HEARTBEAT);
        assert_eq!(
            e.as_ref()
                .err()
                .map(|m| m.starts_with("--heartbeat 1ms is too short: the least is 50ms")),
            Some(true),
            "{e:?}"
        );
        assert_eq!(MIN_LEASE, MIN_HEARTBEAT * 3);
    }

    #[test]
    fn configuration_errors_use_flags_and_human_durations() {
        let e = ElectionConfig::builder()
            .lease_duration(Duration::from_secs(2))
            .heartbeat_interval(Duration::from_millis(700))
            .build();
        let text = e.as_ref().err().map(describe);
        assert_eq!(
            text.as_deref(),
            Some("--heartbeat (700ms) must be at most a third of --lease (2s)")
        );
        let e = ElectionConfig::builder()
            .transaction_timeout(Duration::from_secs(3))
            .build();
        let text = e.err().map(|e| describe(&e)).unwrap_or_default();
        assert!(text.contains("--transaction-timeout (3s)"), "{text}");
        assert!(!text.contains("_"), "{text}");
        assert_eq!(flag_of("lease_duration"), "--lease");
        assert_eq!(flag_of("handover_grace"), "--handover-grace");
    }
}
