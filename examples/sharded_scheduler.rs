//! Sharded job scheduler on the embedded MemDb: 64 shards of jobs over three members, each
//! owning its share with a fencing token per shard. `c` joins late and takes its share by
//! cooperative handovers (no overlap, no lease wait); `b` is killed and its shards are owned
//! again after about a lease, while a zombie of `b` writing with its old tokens is refused.
//! Ends with one `summary:` line.
//!
//! Run it with `cargo run --example sharded_scheduler` (about five seconds). The FoundationDB
//! version is `fdb_sharded_scheduler`.

#[path = "runner_demos/mod.rs"]
mod runner_demos;
#[path = "runner_demos/sharded_scheduler.rs"]
mod sharded_demo;

use fdb_leader_election::MemDb;
use foundationdb_tuple::Subspace;

#[tokio::main]
async fn main() -> runner_demos::DemoResult {
    runner_demos::init_logging();
    sharded_demo::run(
        MemDb::new(),
        Subspace::from("sharded-scheduler"),
        runner_demos::fast_config()?,
    )
    .await
}
