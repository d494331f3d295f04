//! The same seed gives the same trace, byte for byte; a different seed a different one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fdb_leader_election_simulation::{Options, run_seed};

fn options() -> Options {
    Options {
        sim_seconds: 60,
        keep_trace: true,
        ..Options::default()
    }
}

#[test]
fn a_seed_replays_byte_for_byte() {
    let a = run_seed(7, &options());
    let b = run_seed(7, &options());
    assert!(a.passed(), "{:?}", a.violations);
    let (ta, tb) = (a.trace.unwrap(), b.trace.unwrap());
    assert!(ta.len() > 1_000, "a real run: {} lines", ta.len());
    assert_eq!(ta, tb);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.stats, b.stats);
}

#[test]
fn different_seeds_differ() {
    let a = run_seed(7, &options());
    let c = run_seed(8, &options());
    assert_ne!(a.trace_hash, c.trace_hash);
}
