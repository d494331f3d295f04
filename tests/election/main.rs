//! The election through the library's API on MemDb: the end-to-end scenarios, random histories,
//! eligibility and the operator, the edges found by reviews and the fencing cases. One test
//! binary, a module per subject.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../runner_support/mod.rs"]
mod runner_support;

mod edges;
mod fence_cases;
mod memdb;
mod operator_health;
mod props;
