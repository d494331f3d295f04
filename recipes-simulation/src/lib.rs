//! Deterministic simulation of `fdb-leader-election`.
//!
//! Each seed builds a world — five to seven candidate processes with their own drifting
//! clocks, an in-memory database with FoundationDB's semantics ([`MemDb`]), a fault injector,
//! an operator — and drives the library's public API through a discrete-event loop in
//! simulated true time. After every step, seven oracles check the run against true time
//! (see [`oracles`]). Every random choice comes from one ChaCha8 generator seeded with the
//! seed, so a seed's trace is the same byte for byte on every run.
//!
//! `sim --sharded` runs the sharded world instead ([`sharded`], DESIGN §12): members driven
//! by the library's `ShardMachine`, coordinators, guarded shard work, and oracles per shard.
//!
//! The crate also holds the chaos harness of the real `fdb-leader` binary ([`chaos`], the
//! `chaos` binary) and the timelines both draw ([`timeline`]).
//!
//! [`MemDb`]: fdb_leader_election::MemDb
#![forbid(unsafe_code)]

pub mod campaign;
pub mod chaos;
mod events;
pub mod faults;
pub mod history;
pub mod oracles;
pub mod params;
pub mod plants;
pub mod progress;
pub mod shard_plants;
pub mod sharded;
pub mod stats;
pub mod time;
pub mod timeline;
pub mod trace;
pub mod wire;
mod world;

pub use campaign::{Campaign, CampaignReport, run_campaign, run_campaign_with_progress};
pub use params::Options;
pub use plants::Plant;
pub use shard_plants::ShardPlant;
pub use world::{SeedOutcome, run_seed};
