//! Job scheduler on the embedded MemDb: three scheduler instances run the election; only the
//! leader assigns jobs, each assignment committed in the same transaction as the fence. The
//! leader crashes a third of the way through; a successor takes over after one lease; the
//! crashed leader's late assignment (with its old ballot) is rejected; every job is assigned
//! exactly once.
//!
//! Run it with `cargo run --example job_scheduler` (about two seconds; `VERBOSE=1` shows the
//! runner's structured logs). The FoundationDB version is `fdb_job_scheduler`.

#[path = "runner_demos/mod.rs"]
mod runner_demos;
#[path = "runner_demos/job_scheduler.rs"]
mod scheduler_demo;

use fdb_leader_election::MemDb;
use foundationdb_tuple::Subspace;

#[tokio::main(flavor = "current_thread")]
async fn main() -> runner_demos::DemoResult {
    runner_demos::init_logging();
    scheduler_demo::run(
        MemDb::new(),
        Subspace::from("job-scheduler"),
        runner_demos::fast_config()?,
    )
    .await
}
