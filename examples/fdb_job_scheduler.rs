//! The job scheduler (see the `job_scheduler` example) on FoundationDB: the same code, with an
//! `Arc<foundationdb::Database>` as the runner's database. Needs `libfdb_c` and a cluster
//! (`FDB_CLUSTER_FILE`, or the default cluster file); it works under a fresh subspace and
//! clears it afterwards.
//!
//! Run it with `cargo run --example fdb_job_scheduler --features fdb-7_3` on a machine with
//! FoundationDB. CI type-checks it only.

#[path = "runner_demos/fdb.rs"]
mod fdb;
#[path = "runner_demos/mod.rs"]
mod runner_demos;
#[path = "runner_demos/job_scheduler.rs"]
mod scheduler_demo;

fn main() -> runner_demos::DemoResult {
    fdb::on_foundationdb("job_scheduler", scheduler_demo::run)
}
