//! Shared test code: the transaction conformance suite and the election scenarios, both
//! written once and run against MemDb always and FoundationDB when a cluster is available.
#![allow(dead_code, unreachable_pub)]

pub mod conformance;
pub mod scenarios;
pub mod shard_limits;
