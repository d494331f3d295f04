//! `sim --sharded`: each sharded plant is caught; clean seeds pass and replay.
//!
//! `sim --sharded`: every sharded plant is caught by the oracle it targets within a few seeds,
//! the same seeds pass without the plant, and a few clean seeds pass with every oracle on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fdb_leader_election_simulation::sharded::run_seed;
use fdb_leader_election_simulation::{Options, ShardPlant};

/// A plant must be caught within this many seeds.
const WITHIN: u64 = 5;

fn sharded() -> Options {
    Options {
        sharded: true,
        ..Options::default()
    }
}

fn check(plant: ShardPlant) {
    let planted = Options {
        shard_plant: Some(plant),
        only_oracle: Some(plant.target()),
        ..sharded()
    };
    let caught = (0..WITHIN)
        .find(|seed| {
            let outcome = run_seed(*seed, &planted);
            if let Some(v) = outcome.violations.first() {
                assert_eq!(v.oracle, plant.target(), "{plant}: {v}");
                true
            } else {
                false
            }
        })
        .unwrap_or_else(|| {
            panic!(
                "{plant} not caught by {} within {WITHIN} seeds",
                plant.target()
            )
        });
    for seed in 0..=caught {
        let outcome = run_seed(seed, &sharded());
        assert!(
            outcome.passed(),
            "seed {seed} without a plant: {:?}",
            outcome.violations
        );
    }
}

#[test]
fn a_renewal_that_ignores_the_epoch_is_caught_by_shard_belief() {
    check(ShardPlant::RenewalIgnoresEpoch);
}

#[test]
fn a_release_written_before_the_work_stops_is_caught_by_shard_guard() {
    check(ShardPlant::ReleaseBeforeWorkStops);
}

#[test]
fn a_takeover_before_a_full_lease_is_caught_by_shard_belief() {
    check(ShardPlant::TakeoverBeforeFullLease);
}

#[test]
fn unfenced_shard_work_is_caught_by_shard_fencing() {
    check(ShardPlant::UnfencedShardWork);
}

#[test]
fn a_leave_without_handover_is_caught_by_shard_deploy() {
    check(ShardPlant::LeaveWithoutHandover);
}

#[test]
fn a_lost_wakeup_is_caught_by_shard_liveness() {
    check(ShardPlant::LostWakeup);
}

#[test]
fn a_move_storm_is_caught_by_shard_moves() {
    check(ShardPlant::MoveStorm);
}

#[test]
fn a_retry_without_back_off_is_caught_by_shard_cadence() {
    check(ShardPlant::RetryWithoutBackOff);
}

#[test]
fn every_plant_has_a_test_and_a_sharded_oracle() {
    assert_eq!(ShardPlant::ALL.len(), 12);
    for p in ShardPlant::ALL {
        assert!(fdb_leader_election_simulation::oracles::OracleId::SHARDED.contains(&p.target()));
    }
}

#[test]
fn clean_seeds_pass_and_replay_byte_for_byte() {
    for seed in 0..3 {
        let traced = Options {
            keep_trace: true,
            ..sharded()
        };
        let a = run_seed(seed, &traced);
        assert!(a.passed(), "seed {seed}: {:?}", a.violations);
        assert!(a.stats.sharded.acquisitions > 0 && a.stats.fenced_committed > 0);
        let b = run_seed(seed, &traced);
        assert_eq!(a.trace_hash, b.trace_hash, "seed {seed} replays");
    }
}

#[test]
fn a_leave_that_keeps_a_shard_is_caught_by_shard_deploy() {
    check(ShardPlant::LeaveKeepsAShard);
}

#[test]
fn placing_while_elections_are_off_is_caught_by_shard_elections_off() {
    check(ShardPlant::ElectionsOffStillPlaces);
}

#[test]
fn no_failover_while_elections_are_off_is_caught_by_shard_elections_off() {
    check(ShardPlant::NoFailoverWhenElectionsOff);
}

#[test]
fn forgetting_a_live_member_is_caught_by_shard_forgotten() {
    check(ShardPlant::ForgetALiveMember);
}
