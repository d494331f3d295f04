//! The configuration's defaults, its rules and the durations derived from it.

use super::*;

#[test]
fn defaults_keep_v011_figures_and_validate() {
    let c = ElectionConfig::default();
    assert_eq!(c.lease_duration(), Duration::from_secs(10));
    assert_eq!(c.heartbeat_interval(), Duration::from_secs(3));
    assert_eq!(c.candidate_timeout(), Duration::from_secs(15));
    assert!(c.election_enabled());
    assert!(c.allow_preemption());
    assert_eq!(c.max_clock_rate_error_ppm(), 10_000);
    assert_eq!(ElectionConfig::builder().build(), Ok(c));
}

#[test]
fn every_rule_is_enforced() {
    let s = Duration::from_secs;
    let b = ElectionConfig::builder;
    assert_eq!(
        b().lease_duration(Duration::ZERO).build(),
        Err(ConfigError::ZeroLease)
    );
    assert_eq!(
        b().heartbeat_interval(Duration::ZERO).build(),
        Err(ConfigError::ZeroHeartbeat)
    );
    assert!(matches!(
        b().heartbeat_interval(Duration::from_millis(3334)).build(),
        Err(ConfigError::HeartbeatTooLong { .. })
    ));
    assert!(matches!(
        b().candidate_timeout(s(10)).build(),
        Err(ConfigError::CandidateTimeoutTooShort { .. })
    ));
    assert!(matches!(
        b().max_clock_rate_error_ppm(500_000).build(),
        Err(ConfigError::ClockRateErrorOutOfRange { ppm: 500_000 })
    ));
    assert!(b().max_clock_rate_error_ppm(499_999).build().is_ok());
    assert!(b().max_clock_rate_error_ppm(0).build().is_ok());
    assert_eq!(
        b().transaction_timeout(Duration::ZERO).build(),
        Err(ConfigError::ZeroTransactionTimeout)
    );
    assert!(matches!(
        b().transaction_timeout(s(3)).build(),
        Err(ConfigError::TransactionTimeoutTooLong { .. })
    ));
    assert!(matches!(
        b().transaction_timeout(Duration::from_micros(999)).build(),
        Err(ConfigError::TransactionTimeoutTooShort { .. })
    ));
    assert!(
        b().transaction_timeout(MIN_TRANSACTION_TIMEOUT)
            .build()
            .is_ok()
    );
    // v0.11's scaling of a 1 ms lease gives a 111 µs transaction timeout: refused.
    assert!(matches!(
        ElectionConfig::with_lease_duration(Duration::from_millis(1)),
        Err(ConfigError::TransactionTimeoutTooShort { .. })
    ));
    assert!(matches!(
        b().lease_duration(s(400 * 24 * 3600)).build(),
        Err(ConfigError::TooLong {
            field: "lease_duration",
            ..
        })
    ));
    assert!(matches!(
        b().handover_grace(s(400 * 24 * 3600)).build(),
        Err(ConfigError::TooLong {
            field: "handover_grace",
            ..
        })
    ));
}

#[test]
fn validity_shrinks_by_the_rate_bound() {
    let c = ElectionConfig::default();
    // 10 s × 0.99 / 1.01
    let v = c.local_validity(Duration::from_secs(10));
    assert_eq!(v.as_nanos(), 10_000_000_000u128 * 990_000 / 1_010_000);
    let exact = ElectionConfig::builder()
        .max_clock_rate_error_ppm(0)
        .build()
        .map(|c| c.local_validity(Duration::from_secs(10)));
    assert_eq!(exact, Ok(Duration::from_secs(10)));
}

#[test]
fn scaled_config_is_valid() {
    let c = ElectionConfig::with_lease_duration(Duration::from_millis(300));
    assert!(c.is_ok(), "{c:?}");
    assert_eq!(ElectionConfig::default().renewals_before_dead(), 5);
}

#[test]
fn the_default_handover_grace_is_half_the_lease_unless_given() -> Result<(), ConfigError> {
    let short = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
    assert_eq!(short.handover_grace(), Duration::from_millis(150));
    let built = ElectionConfig::builder()
        .lease_duration(Duration::from_secs(30))
        .heartbeat_interval(Duration::from_secs(3))
        .candidate_timeout(Duration::from_secs(45))
        .build()?;
    assert_eq!(built.handover_grace(), Duration::from_secs(15));
    assert_eq!(
        ElectionConfig::default().handover_grace(),
        ElectionConfig::builder().build()?.handover_grace(),
        "the default configuration is the builder's"
    );
    // Given, it stays as given, also through to_builder and a change of lease there.
    let given = ElectionConfig::builder()
        .handover_grace(Duration::from_secs(7))
        .build()?;
    assert_eq!(given.handover_grace(), Duration::from_secs(7));
    let relet = given
        .to_builder()
        .lease_duration(Duration::from_secs(12))
        .build()?;
    assert_eq!(relet.handover_grace(), Duration::from_secs(7));
    Ok(())
}
