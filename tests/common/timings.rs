//! Election configurations by their four timings in milliseconds, for the tests that pick
//! their own (the rest of the configuration default). Included through `common`, the support
//! modules, or by path (`#[path = "common/timings.rs"] mod timings;`).
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::time::Duration;

use fdb_leader_election::{ElectionConfig, ElectionConfigBuilder};

/// The builder with these timings (milliseconds) set, for a test to add to: the lease, the
/// heartbeat interval, the candidate timeout and the transaction timeout.
pub fn timed(
    lease: u64,
    heartbeat: u64,
    candidate: u64,
    transaction: u64,
) -> ElectionConfigBuilder {
    ElectionConfig::builder()
        .lease_duration(Duration::from_millis(lease))
        .heartbeat_interval(Duration::from_millis(heartbeat))
        .candidate_timeout(Duration::from_millis(candidate))
        .transaction_timeout(Duration::from_millis(transaction))
}

/// The configuration with these timings (as [`timed`]); valid, or the test fails here.
pub fn timings(lease: u64, heartbeat: u64, candidate: u64, transaction: u64) -> ElectionConfig {
    timed(lease, heartbeat, candidate, transaction)
        .build()
        .unwrap()
}
