//! An observer on the embedded MemDb: a client that never registers or competes, and always
//! knows the current leader's address from the leader record's payload. It follows an
//! election, a graceful handover, a change of address and a crash (reported as a lapsed
//! lease after one lease, then the new leader).
//!
//! Run it with `cargo run --example observer` (about a second). The FoundationDB version is
//! `fdb_observer`.

#[path = "runner_demos/observer.rs"]
mod observer_demo;
#[path = "runner_demos/mod.rs"]
mod runner_demos;

use fdb_leader_election::MemDb;
use foundationdb_tuple::Subspace;

#[tokio::main(flavor = "current_thread")]
async fn main() -> runner_demos::DemoResult {
    runner_demos::init_logging();
    observer_demo::run(
        MemDb::new(),
        Subspace::from("observer"),
        runner_demos::fast_config()?,
    )
    .await
}
