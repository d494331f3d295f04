//! The `fdb-leader` command line with real processes (the tests spawn the built binary) on SQLite
//! files: one test binary, a module per command or subject, sharing `cli_support`. The same
//! commands on a FoundationDB cluster are in `tests/cli_fdb.rs` (the FoundationDB tier runs it).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

#[path = "../cli_support/mod.rs"]
mod cli_support;
#[path = "../run_shards_support/mod.rs"]
mod run_shards_support;

mod commands;
mod errors;
mod haproxy;
mod health;
mod read_only;
mod run;
mod run_shards;
mod shards;
mod store;
mod supervise;
mod version;
mod watch_wait;
mod watchdog;
