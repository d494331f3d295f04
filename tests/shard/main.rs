//! Sharded leadership through the public API on MemDb: the manual flow, the runner, the limits,
//! the lookups and the edges. One test binary, a module per subject (the adversarial reviews
//! are tests/shard_adv/).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../shard_support/mod.rs"]
mod shard_support;

mod edges;
mod limits;
mod lookups;
mod memdb;
mod runner;
