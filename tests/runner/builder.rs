//! Builder validation, the MemDb backend's time bound, and the configuration a cycle reports.

use std::sync::Arc;
use std::time::Duration;

use crate::runner_support::*;
use fdb_leader_election::runner::{BuildError, ElectionDatabase, Runner, TransactionTimedOut};
use fdb_leader_election::{
    Candidate, CandidateId, ElectionError, LeaderElection, MAX_PAYLOAD_BYTES, Priority,
    ScriptedFaults, TxnErrorKind,
};

#[tokio::test]
async fn contradictory_or_invalid_settings_are_rejected_by_name() {
    let db = db();
    let err = Runner::observer(db.clone(), subspace())
        .priority(Priority::new(2))
        .start()
        .unwrap_err();
    assert_conflicting(&err, "priority", "an observer");
    assert_eq!(
        err.to_string(),
        "priority cannot be combined with an observer"
    );

    let c = Candidate::new(CandidateId::random("x").unwrap(), Priority::new(1));
    let err = Runner::builder(db.clone(), subspace())
        .candidate(c)
        .label("y")
        .start()
        .unwrap_err();
    assert_conflicting(&err, "label", "candidate");

    let err = Runner::builder(db.clone(), subspace())
        .label("")
        .start()
        .unwrap_err();
    assert!(
        matches!(err, BuildError::Candidate(ElectionError::InvalidId { .. })),
        "{err:?}"
    );
    assert!(std::error::Error::source(&err).is_some());

    let err = Runner::builder(db.clone(), subspace())
        .payload(vec![0; MAX_PAYLOAD_BYTES + 1])
        .start()
        .unwrap_err();
    assert!(
        matches!(err, BuildError::Candidate(ElectionError::TooLarge { .. })),
        "{err:?}"
    );

    let err = Runner::builder(db.clone(), subspace())
        .event_capacity(0)
        .start()
        .unwrap_err();
    assert!(matches!(err, BuildError::ZeroEventCapacity));

    let err = Runner::builder(db.clone(), subspace())
        .stop_timeout(Duration::from_secs(400 * 24 * 3600))
        .start()
        .unwrap_err();
    assert!(matches!(err, BuildError::StopTimeoutTooLong(_)));
}

#[test]
fn starting_outside_a_runtime_is_an_error() {
    let err = Runner::builder(db(), subspace()).start().unwrap_err();
    assert!(matches!(err, BuildError::NoRuntime(_)), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn an_existing_election_keeps_its_configuration_and_the_runner_follows_it() {
    let db = db();
    let election = LeaderElection::new(subspace());
    let stored = config();
    in_txn!(db, [e = election, c = stored], |txn| e
        .initialize_with_config(&txn, &c)
        .await)
    .unwrap();
    // The runner asks for the defaults (10 s lease) but the stored 300 ms lease rules.
    let a = Runner::builder(db.clone(), subspace())
        .label("a")
        .start()
        .unwrap();
    let guard = a.elected().await.unwrap();
    assert!(guard.remaining() <= LEASE, "{:?}", guard.remaining());
    // The cycle reports the configuration it read.
    let me = Candidate::with_clock(
        CandidateId::random("b").unwrap(),
        Priority::new(0),
        Arc::new(fdb_leader_election::TokioClock::new()),
    );
    let cycle = in_txn!(db, [e = election, me], |txn| {
        e.register_candidate(&txn, &me).await?;
        e.run_election_cycle(&txn, &me).await
    })
    .unwrap();
    assert_eq!(cycle.config(), &stored);
    a.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_memdb_transaction_that_runs_out_of_time_is_maybe_committed() {
    let db = db();
    let faults = ScriptedFaults::new();
    faults.set_commit_latency(Duration::from_millis(50));
    db.set_fault_injector(Arc::new(faults.clone()));
    let err = db
        .transact(Duration::from_millis(20), |txn| async move {
            fdb_leader_election::ElectionTxn::set(&txn, b"k", b"v");
            Ok(())
        })
        .await
        .unwrap_err();
    match &err {
        ElectionError::Database(t) => {
            assert_eq!(t.kind(), TxnErrorKind::CommitUnknown);
            assert!(err.is_retryable() && err.is_maybe_committed());
            let source = std::error::Error::source(t).unwrap();
            assert_eq!(
                source.downcast_ref::<TransactionTimedOut>(),
                Some(&TransactionTimedOut {
                    after: Duration::from_millis(20)
                })
            );
        }
        other => panic!("{other:?}"),
    }
    // Conflicts are retried inside; other errors come back at once.
    faults.set_commit_latency(Duration::ZERO);
    faults.push_commit_fault(fdb_leader_election::CommitFault::Conflict);
    let n = std::sync::atomic::AtomicU32::new(0);
    db.transact(Duration::from_secs(1), |txn| {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            fdb_leader_election::ElectionTxn::set(&txn, b"k", b"v");
            Ok(())
        }
    })
    .await
    .unwrap();
    assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 2);
    faults.set_unavailable(true);
    let err = db
        .transact(Duration::from_secs(1), |_txn| async move { Ok(()) })
        .await
        .unwrap_err();
    assert!(matches!(&err, ElectionError::Database(t) if t.kind() == TxnErrorKind::Unavailable));
}
