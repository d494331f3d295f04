//! Shared test code: the transaction conformance suite, the differential test and the election
//! scenarios, each written once and run against MemDb and SQLite always and FoundationDB when a
//! cluster is available.
#![allow(dead_code, unreachable_pub)]

pub mod backends;
pub mod conformance;
pub mod differential;
pub mod files;
pub mod scenarios;
pub mod shard_limits;
