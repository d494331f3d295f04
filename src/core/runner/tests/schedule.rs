//! The rule that schedules renewals and the rule that validates a configuration are one
//! (docs/design.md §10.6): over random configurations, every one `build` accepts gives a leader a
//! sane renewal schedule (no renewal sooner than half a heartbeat after the last one started,
//! the last attempt ending before the belief does), and every one it refuses for its belief
//! would not.

use proptest::prelude::*;

use super::*;
use crate::config::ConfigError;

/// A leader of `config`'s election that acquired at 0 and is idle: when does it run its next
/// cycle, and until when does it believe?
fn next_renewal(config: &ElectionConfig) -> (LocalInstant, LocalInstant) {
    let belief_end = LocalInstant::from_origin(config.local_validity(config.lease_duration()));
    let mut m = Machine::new(Settings::new(Some(id("me")), config.clone(), 3), at(0));
    let ctx = |belief: Option<LocalInstant>| Ctx {
        now: at(0),
        belief: belief.map(|valid_until| Belief {
            ballot: Ballot::new(1),
            valid_until,
        }),
        work_in_flight: false,
    };
    m.handle(Event::Start, ctx(None));
    m.handle(Event::Registered(Ok(config.clone())), ctx(None));
    let report = CycleReport {
        config: config.clone(),
        ..report(Action::Acquired, owned("me", 1, 1), Some(1))
    };
    m.handle(Event::CycleCommitted(report), ctx(Some(belief_end)));
    let out = m.handle(
        Event::RecordRead(Ok(RecordRead {
            record: owned("me", 1, 1),
            config: None,
            watch: Some(true),
        })),
        ctx(Some(belief_end)),
    );
    let wake = sleeps(&out).expect("an idle leader sleeps until its renewal");
    (wake, belief_end)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn every_accepted_configuration_renews_sanely_and_every_refused_one_would_not(
        lease_ms in 3u64..120_000,
        hb_per_mille in 1u64..=333,
        tx_per_mille in 1u64..1_000,
        ppm in 0u32..500_000,
    ) {
        let lease = ms(lease_ms);
        let hb = ms((lease_ms * hb_per_mille / 1_000).max(1));
        let hb_ms = u64::try_from(hb.as_millis()).unwrap_or(u64::MAX);
        let tx = ms((hb_ms * tx_per_mille / 1_000).max(1));
        let built = ElectionConfig::builder()
            .lease_duration(lease)
            .heartbeat_interval(hb)
            .candidate_timeout(lease * 2)
            .transaction_timeout(tx)
            .max_clock_rate_error_ppm(ppm)
            .build();
        match built {
            Ok(config) => {
                let (wake, belief_end) = next_renewal(&config);
                let since = wake.saturating_duration_since(at(0));
                // Never sooner than half a heartbeat after the renewal started ...
                prop_assert!(since >= hb / 2, "renews after {since:?} (heartbeat {hb:?})");
                // ... never later than a heartbeat ...
                prop_assert!(since <= hb, "renews after {since:?} (heartbeat {hb:?})");
                // ... and an attempt started then ends (even timing out) before the belief.
                prop_assert!(wake.saturating_add(tx) < belief_end, "{wake:?} + {tx:?} >= {belief_end:?}");
            }
            Err(ConfigError::BeliefTooShortToRenew { belief: b, needed, min_lease, .. }) => {
                prop_assert!(b < needed);
                prop_assert_eq!(needed, tx + hb * 3 / 4);
                // The lease the message suggests is enough.
                let fixed = ElectionConfig::builder()
                    .lease_duration(min_lease)
                    .heartbeat_interval(hb)
                    .candidate_timeout(min_lease * 2)
                    .transaction_timeout(tx)
                    .max_clock_rate_error_ppm(ppm)
                    .build();
                prop_assert!(
                    !matches!(fixed, Err(ConfigError::BeliefTooShortToRenew { .. })),
                    "{min_lease:?} still too short: {fixed:?}"
                );
            }
            Err(_) => {}
        }
    }
}

#[test]
fn the_configuration_that_renewed_1400_times_a_second_is_refused_with_the_fix() {
    // Lease 3 s, heartbeat 1 s, candidate timeout 5 s, attempts 900 ms, ρ = 45%: the belief
    // (3 s × 0.55/1.45 = 1.138 s) was shorter than the margin kept before it (1.15 s).
    let e = ElectionConfig::builder()
        .lease_duration(ms(3_000))
        .heartbeat_interval(ms(1_000))
        .candidate_timeout(ms(5_000))
        .transaction_timeout(ms(900))
        .max_clock_rate_error_ppm(450_000)
        .build()
        .unwrap_err();
    let ConfigError::BeliefTooShortToRenew {
        belief,
        needed,
        min_lease,
        lease,
    } = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(*lease, ms(3_000));
    assert_eq!(*needed, ms(1_650));
    assert!(*belief < ms(1_140) && *belief > ms(1_130), "{belief:?}");
    // 1.65 s × 1.45/0.55 = 4.35 s.
    assert!(
        *min_lease >= ms(4_349) && *min_lease <= ms(4_351),
        "{min_lease:?}"
    );
    let text = e.to_string();
    for field in [
        "lease_duration",
        "transaction_timeout",
        "heartbeat_interval",
        "max_clock_rate_error_ppm",
    ] {
        assert!(text.contains(field), "{text}");
    }
}
