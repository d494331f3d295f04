//! The fenced jobs (see the `fenced_jobs` example) on FoundationDB: the same code, with an
//! `Arc<foundationdb::Database>` as the runner's database. Needs `libfdb_c` and a cluster
//! (`FDB_CLUSTER_FILE`, or the default cluster file); it works under a fresh subspace and
//! clears it afterwards.
//!
//! Run it with `cargo run --example fdb_fenced_jobs --features fdb-7_3` on a machine with
//! FoundationDB. The FoundationDB tier of CI runs it.

#[path = "runner_demos/fdb.rs"]
mod fdb;
#[path = "runner_demos/fenced_jobs.rs"]
mod fenced_jobs;
#[path = "runner_demos/mod.rs"]
mod runner_demos;

fn main() -> runner_demos::DemoResult {
    fdb::on_foundationdb("fenced_jobs", fenced_jobs::run)
}
