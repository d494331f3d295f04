//! Cancellation safety: the runner task is aborted again and again at arbitrary points
//! (mid-read, mid-commit, mid-sleep, mid-watch), with slow reads and commits and unknown
//! commit results; every later runner over the same candidate recovers, ballots only grow,
//! and no two processes ever believe they lead at once.

use std::sync::Arc;
use std::time::Duration;

use crate::runner_support::*;
use fdb_leader_election::{
    Ballot, Candidate, CandidateId, CommitFault, Priority, ScriptedFaults, TokioClock,
};
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

async fn record_ballot(db: &fdb_leader_election::MemDb) -> Ballot {
    let election = fdb_leader_election::LeaderElection::new(subspace());
    in_txn!(db, [e = election], |txn| e.leader_record(&txn).await)
        .unwrap()
        .ballot()
}

#[tokio::test(start_paused = true)]
async fn aborting_the_runner_anywhere_leaves_nothing_a_later_runner_cannot_recover() {
    let db = db();
    let faults = ScriptedFaults::new();
    faults.set_read_latency(Duration::from_millis(3));
    faults.set_commit_latency(Duration::from_millis(7));
    db.set_fault_injector(Arc::new(faults.clone()));
    let clock = Arc::new(TokioClock::new());
    let me = Candidate::with_clock(
        CandidateId::random("a").unwrap(),
        // Outranks b: each new runner over it asks b to hand over.
        Priority::new(2),
        clock.clone(),
    );
    // A competitor that runs throughout.
    let b = builder(db.clone(), "b", 1).start().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut last_ballot = Ballot::ZERO;
    let mut aborts = 0;
    let mut led = 0;
    for round in 0..60 {
        if round % 7 == 3 {
            faults.push_commit_fault(CommitFault::UnknownApplied);
        }
        if round % 11 == 5 {
            faults.push_commit_fault(CommitFault::UnknownNotApplied);
        }
        let a = fdb_leader_election::Runner::builder(db.clone(), subspace())
            .candidate(me.clone())
            .config(config())
            .seed(round)
            .start()
            .unwrap();
        // Run for a random time, checking exclusion at every millisecond, then abort.
        let run_for = Duration::from_millis(rng.random_range(0..250));
        let until = Instant::now() + run_for;
        while Instant::now() < until {
            assert!(
                !(me.believes_it_leads() && b.candidate().unwrap().believes_it_leads()),
                "round {round}: two processes believe they lead"
            );
            if a.is_leader() {
                led += 1;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        a.abort();
        aborts += 1;
        // Sometimes come back at once (the candidate still believes), sometimes after b took
        // over the lapsed lease.
        let gap = Instant::now() + Duration::from_millis(rng.random_range(0..2 * 300));
        while Instant::now() < gap {
            assert!(!(me.believes_it_leads() && b.candidate().unwrap().believes_it_leads()));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let ballot = record_ballot(&db).await;
        assert!(ballot >= last_ballot, "round {round}: ballot went back");
        last_ballot = ballot;
    }
    assert_eq!(aborts, 60);
    assert!(
        led > 0,
        "the aborted runners never led: the test exercised nothing"
    );
    assert!(
        last_ballot.get() >= 10,
        "leadership moved too rarely: {last_ballot}"
    );

    // A last runner over the same candidate, with the faults gone: the election converges.
    db.clear_fault_injector();
    let a = fdb_leader_election::Runner::builder(db.clone(), subspace())
        .candidate(me.clone())
        .config(config())
        .start()
        .unwrap();
    let settle = Instant::now() + LEASE * 4;
    while Instant::now() < settle {
        assert!(!(me.believes_it_leads() && b.candidate().unwrap().believes_it_leads()));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let leaders = [a.is_leader(), b.is_leader()];
    assert_eq!(leaders.iter().filter(|l| **l).count(), 1, "{leaders:?}");
    assert!(record_ballot(&db).await >= last_ballot);
    // And leadership still moves: the leader shuts down, the other takes over at once.
    let (leader, other) = if a.is_leader() { (&a, &b) } else { (&b, &a) };
    leader.shutdown().await;
    let g = tokio::time::timeout(HEARTBEAT, other.elected())
        .await
        .unwrap()
        .unwrap();
    assert!(g.ballot() > last_ballot);
    other.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_interrupting_a_slow_cycle_still_leaves_cleanly() {
    let (db, faults) = faulty_db();
    let a = builder(db.clone(), "a", 1).start().unwrap();
    let g = a.elected().await.unwrap();
    let b = builder(db.clone(), "b", 1).start().unwrap();
    tokio::time::sleep(HEARTBEAT * 2).await;
    // Every commit now hangs past the transaction timeout, until the shutdown.
    faults.set_commit_latency(Duration::from_millis(25));
    tokio::time::sleep(Duration::from_millis(3)).await;
    faults.set_commit_latency(Duration::ZERO);
    let report = a.shutdown().await;
    assert!(g.is_cancelled());
    assert!(report.unregistered, "{report:?}");
    let gb = tokio::time::timeout(HEARTBEAT, b.elected())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gb.ballot(), Ballot::new(2));
    b.shutdown().await;
}
