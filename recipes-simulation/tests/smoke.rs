//! A short campaign passes every oracle and is not vacuous: elections, handovers and
//! takeovers happen, every kind of fault is injected, fenced work commits and loses nothing,
//! while the unfenced shadow loses updates.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fdb_leader_election_simulation::{Campaign, Options, run_campaign};

#[test]
fn a_short_campaign_passes_and_exercises_everything() {
    let report = run_campaign(&Campaign {
        first_seed: 1_000,
        seeds: 16,
        jobs: 2,
        options: Options::default(),
        keep_going: false,
    });
    assert!(
        report.passed(),
        "{}",
        report.failure_text().unwrap_or_default()
    );
    let t = &report.totals;
    assert_eq!(report.seeds_run, 16);
    assert!(
        t.elections > 0 && t.handovers > 0 && t.takeovers > 0,
        "{t:?}"
    );
    assert!(
        t.renewals > 0 && t.handover_requests > 0 && t.resigns > 0,
        "{t:?}"
    );
    for (name, n) in t.faults.named() {
        assert!(n > 0, "no {name} fault injected: {t:?}");
    }
    assert!(t.too_old_seen > 0 && t.conflicts_seen > 0, "{t:?}");
    // Every public operation and configuration field is driven (DESIGN §9, coverage rule).
    for (name, n) in [
        ("executor timeouts", t.timeouts),
        ("configuration changes", t.config_changes),
        ("force_vacate", t.force_vacates),
        ("request_resign", t.operator_resigns),
        ("operator unregistrations", t.operator_unregisters),
        ("stale queries", t.stale_queries),
        ("composed cycles", t.composed_cycles),
        ("abandoned compositions", t.abandoned_compositions),
        ("try_claim_leadership", t.claims),
        ("refresh_lease", t.refreshes),
        ("guarded tasks", t.guarded_tasks),
    ] {
        assert!(n > 0, "no {name}: {t:?}");
    }
    assert!(t.fenced_committed > 0 && t.fenced_stale > 0, "{t:?}");
    assert_eq!(t.fenced_lost, 0);
    assert!(
        t.shadow_lost > 0,
        "the unfenced shadow should lose updates: {t:?}"
    );
    assert_eq!(t.sim_ns, 16 * 120 * 1_000_000_000);
    let summary = report.summary();
    assert!(
        summary.starts_with("seeds=16 violations=0 elections="),
        "{summary}"
    );
    for key in [
        "handovers=",
        "takeovers=",
        "faults=",
        "sim_seconds=1920",
        "wall_s=",
    ] {
        assert!(summary.contains(key), "{summary}");
    }
}
