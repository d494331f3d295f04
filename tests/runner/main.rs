//! The tokio runner through the public API, on MemDb in tokio's paused time: one test binary,
//! a module per subject (builder, failover, handovers, drains, health checks, events,
//! metrics, versions) and the adversarial reviews' regressions, sharing `runner_support`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

#[path = "../runner_support/mod.rs"]
mod runner_support;

mod builder;
mod cancel;
mod checks;
mod drain;
mod drain_hold;
mod drain_latency;
mod events;
mod failover;
mod handover;
mod health;
mod leave_faults;
mod metrics;
mod reopen;
mod version;
mod version_takeovers;
