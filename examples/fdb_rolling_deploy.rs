//! The rolling deploy (see the `rolling_deploy` example) on FoundationDB: the same code, with an
//! `Arc<foundationdb::Database>` as the runner's database. Needs `libfdb_c` and a cluster
//! (`FDB_CLUSTER_FILE`, or the default cluster file); it works under a fresh subspace and
//! clears it afterwards.
//!
//! Run it with `cargo run --example fdb_rolling_deploy --features fdb-7_3` on a machine with
//! FoundationDB. CI type-checks it only.

#[path = "runner_demos/rolling_deploy.rs"]
mod deploy_demo;
#[path = "runner_demos/fdb.rs"]
mod fdb;
#[path = "runner_demos/mod.rs"]
mod runner_demos;

fn main() -> runner_demos::DemoResult {
    fdb::on_foundationdb("rolling_deploy", deploy_demo::run)
}
