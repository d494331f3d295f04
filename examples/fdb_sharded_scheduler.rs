//! The sharded job scheduler (see the `sharded_scheduler` example) on FoundationDB: the same
//! code, with an `Arc<foundationdb::Database>` as the runner's database. Needs `libfdb_c` and a
//! cluster (`FDB_CLUSTER_FILE`, or the default cluster file); it works under a fresh subspace
//! and clears it afterwards.
//!
//! Run it with `cargo run --example fdb_sharded_scheduler --features fdb-7_3` on a machine
//! with FoundationDB.

#[path = "runner_demos/fdb.rs"]
mod fdb;
#[path = "runner_demos/mod.rs"]
mod runner_demos;
#[path = "runner_demos/sharded_scheduler.rs"]
mod sharded_demo;

fn main() -> runner_demos::DemoResult {
    fdb::on_foundationdb("sharded_scheduler", sharded_demo::run)
}
