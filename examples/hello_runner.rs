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

    let lead = async {
        while let Some(guard) = runner.elected().await {
            let token = guard.fencing_token(); // the ballot: fence leader-only writes with it
            println!("leading, ballot {token} (Ctrl-C stops)");
            guard.spawn(async move {
                // Leader-only work goes here, every write fenced with `token`. It is
                // cancelled, and awaited, when leadership ends.
            });
            guard.cancelled().await; // loss, lease expiry, handover or shutdown
            println!("no longer leading");
        }
    };
    tokio::select! {
        () = lead => {} // the runner stopped by itself
        signal = tokio::signal::ctrl_c() => signal?,
    }
    runner.shutdown().await; // stops the work, resigns for the best live candidate, unregisters
    println!("stopped");
    Ok(())
}
// README: end
