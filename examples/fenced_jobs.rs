//! Leader-only writes from a runner's guard, fenced in their own transaction, on a SQLite file
//! (docs/fencing.md, docs/runner.md): `a` assigns jobs while it leads, hands over to `b`, and
//! a late write with `a`'s old guard is refused. The FoundationDB version is
//! `fdb_fenced_jobs`; tests/demos.rs runs the same code on MemDb and SQLite.
//!
//! Run it with `cargo run --example fenced_jobs --features sqlite` (about a second).

#[path = "runner_demos/fenced_jobs.rs"]
mod fenced_jobs;
#[path = "runner_demos/mod.rs"]
mod runner_demos;

use fdb_leader_election::Subspace;

#[tokio::main(flavor = "current_thread")]
async fn main() -> runner_demos::DemoResult {
    runner_demos::init_logging();
    let dir = std::env::temp_dir().join(format!("fenced-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("jobs.db");
    // README: sqlite-open
    use fdb_leader_election::SqliteDb;

    // Created if missing; the processes of one host elect through the same file.
    let db = SqliteDb::open(&path)?;
    // README: end
    let result = fenced_jobs::run(
        db,
        Subspace::from("fenced-jobs"),
        runner_demos::fast_config()?,
    )
    .await;
    std::fs::remove_dir_all(&dir)?;
    result
}
