//! The README's FoundationDB snippets, run: an election inside `Database::run`, the easy flow
//! (`run_cycle`), the manual flow (`run_election_cycle` + `adopt` after the commit) and a
//! fenced write. Each README snippet is a region of this file (`// README: NAME` to
//! `// README: end`), and `tests/readme_snippets.rs` checks that the README shows exactly
//! those lines, so what the README shows is what the FoundationDB tier of `.ci/run` runs.
//!
//! ```text
//! FDB_CLUSTER_FILE=/path/to/fdb.cluster cargo run --features fdb-7_3 --example fdb_first_steps
//! ```
//!
//! It works on a test cluster (the default cluster file if `FDB_CLUSTER_FILE` is not set),
//! writes below the subspace `("scheduler",)` and the key `jobs/42`, and clears both when it
//! ends.

use std::error::Error;
use std::sync::Arc;

use fdb_leader_election::{Candidate, CandidateId, LeaderElection, Priority};
use foundationdb::Database;
use foundationdb_tuple::Subspace;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

async fn first_steps(db: Arc<Database>) -> Res<String> {
    // README: setup
    let election = LeaderElection::new(Subspace::from("scheduler"));
    // A fresh id per process incarnation: a restarted process is a new candidate.
    let me = Candidate::new(CandidateId::random("scheduler-eu1")?, Priority::new(1));

    db.run(|trx, _| {
        let (election, me) = (election.clone(), me.clone());
        async move {
            election.initialize(&trx).await?; // idempotent, never resets the ballot
            election.register_candidate(&trx, &me).await?;
            Ok(())
        }
    })
    .await?;

    // Every heartbeat (default 3 s): one cycle in a transaction of its own, adopted only after
    // its commit succeeded (`db` is an `Arc<Database>`).
    let result = election.run_cycle(&db, &me).await?;
    // README: end
    if !result.result.is_leader() {
        return Err(format!("the only candidate did not lead: {result:?}").into());
    }

    // README: manual
    let cycle = db
        .run(|trx, _| {
            let (election, me) = (election.clone(), me.clone());
            async move { Ok(election.run_election_cycle(&trx, &me).await?) }
        })
        .await?;
    let result = me.adopt(cycle); // only after the commit succeeded
    // README: end
    if !result.is_leader() {
        return Err("the leader did not renew".into());
    }

    // README: fence
    let token = me.fencing_token().ok_or("not leader")?; // the ballot, while the lease is valid
    db.run(|trx, _| {
        let election = election.clone();
        async move {
            election.fence(&trx, token).await?; // conflict range on the fence key
            trx.set(b"jobs/42", b"assigned-to-me"); // commits only while `token` leads
            Ok(())
        }
    })
    .await?;
    // README: end

    let written = db
        .run(|trx, _| async move { Ok(trx.get(b"jobs/42", false).await?) })
        .await?;
    let summary = format!(
        "summary: leader={} ballot={token} renewed=true fenced_write={}",
        me.id(),
        if written.as_deref() == Some(&b"assigned-to-me"[..]) {
            "committed"
        } else {
            "missing"
        }
    );
    db.run(|trx, _| {
        let (begin, end) = Subspace::from("scheduler").range();
        async move {
            trx.clear_range(&begin, &end);
            trx.clear(b"jobs/42");
            Ok(())
        }
    })
    .await?;
    if written.is_none() {
        return Err("the fenced write did not land".into());
    }
    Ok(summary)
}

fn main() -> Res<()> {
    let cluster_file = std::env::var("FDB_CLUSTER_FILE").ok();
    // SAFETY: `boot` may run once per process, and the guard it returns must be dropped before
    // the process exits. This is the only call in this example, and `network` lives in this
    // frame: it is dropped (network stopped, thread joined) before `main` returns.
    #[allow(
        unsafe_code,
        reason = "foundationdb::boot is unsafe only because its guard must be dropped before \
                  exit, which this frame guarantees"
    )]
    let network = unsafe { foundationdb::boot() };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let db = Arc::new(Database::new(cluster_file.as_deref())?);
        first_steps(db).await
    });
    drop(runtime);
    drop(network);
    println!("{}", result?);
    Ok(())
}
