//! The README's quick start, a whole program: the runner elects this process, runs leader-only
//! work while it leads, and stops on Ctrl-C (it resigns and unregisters on the way out).
//!
//! Run it with `cargo run --example hello_runner`; CI runs it and stops it with SIGINT.

// README: quick-start
use fdb_leader_election::runner::Runner;
use fdb_leader_election::{MemDb, Subspace};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // MemDb elects among the runners of this process; SqliteDb (feature `sqlite`) and
    // Arc<foundationdb::Database> (feature `fdb-7_3`) among processes and machines.
    let runner = Runner::builder(MemDb::new(), Subspace::from("scheduler"))
        .label("scheduler-eu1") // plus random bits: a new candidate per incarnation
        .payload("10.0.0.1:7000") // published while leading, e.g. this process's address
        .start()?;

    // Ctrl-C shuts the runner down; the loop below sees it as it sees a loss: the guard is
    // cancelled (the lines after `cancelled()` run), then `elected()` returns None.
    let on_ctrl_c = runner.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.shutdown().await; // stops the work, resigns, unregisters
        }
    });
    while let Some(guard) = runner.elected().await {
        let token = guard.fencing_token(); // the ballot: fence leader-only writes with it
        println!("leading, ballot {token} (Ctrl-C stops)");
        guard.spawn(async move {
            // Leader-only work goes here, every write fenced with `token`. It is
            // cancelled, and awaited, when leadership ends.
        });
        guard.cancelled().await; // loss, lease expiry, handover or shutdown
        println!("no longer leading"); // cleanup here runs on every end, Ctrl-C too
    }
    runner.shutdown().await; // the runner stopped: waits until its shutdown ended
    println!("stopped");
    Ok(())
}
// README: end
