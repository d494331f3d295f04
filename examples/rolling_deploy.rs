//! Rolling deploy on the embedded MemDb: three old instances (priority 1) run, one leads and
//! runs jobs under its guard. New instances (priority 2) start one by one; the first asks for
//! the leadership, the old leader finishes its in-flight job, steps down and reserves the
//! vacancy for it (no overlap: checked every millisecond). The old instances then shut down
//! gracefully.
//!
//! Run it with `cargo run --example rolling_deploy` (about three seconds). The FoundationDB
//! version is `fdb_rolling_deploy`.

#[path = "runner_demos/rolling_deploy.rs"]
mod deploy_demo;
#[path = "runner_demos/mod.rs"]
mod runner_demos;

use fdb_leader_election::MemDb;
use foundationdb_tuple::Subspace;

#[tokio::main(flavor = "current_thread")]
async fn main() -> runner_demos::DemoResult {
    runner_demos::init_logging();
    deploy_demo::run(
        MemDb::new(),
        Subspace::from("rolling-deploy"),
        runner_demos::fast_config()?,
    )
    .await
}
