//! Adversarial reviews of sharded leadership (docs/design.md §12) through the public API: one
//! test binary, a module per side attacked, sharing `shard_support`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

#[path = "../shard_support/mod.rs"]
mod shard_support;

mod chaos;
mod coordinator;
mod fence;
mod input;
mod member;
mod placement;
mod runner;
mod sim;
mod standby;
