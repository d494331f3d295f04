//! A shutdown whose leave commit fails (reply lost, applied or not, or a timeout) still hands
//! leadership over without a lease's wait: the retry writes the vacancy again when the first
//! did not land, and finds it written when it did.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::runner_support::*;
use fdb_leader_election::memdb::{CommitContext, CommitDecision, CommitFault, FaultInjector};
use tokio::time::Instant;

/// Fails, once, the first commit that writes the leader record after it is armed.
#[derive(Debug)]
struct FailNextLeaderWrite {
    fault: CommitFault,
    armed: AtomicBool,
}

impl FaultInjector for FailNextLeaderWrite {
    fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
        if ctx.written_keys.contains(&leader_key()) && self.armed.swap(false, Ordering::SeqCst) {
            return CommitDecision::fail(self.fault);
        }
        CommitDecision::proceed()
    }
}

async fn shutdown_with_a_failed_leave(fault: CommitFault) -> Duration {
    let db = db();
    let a = builder(db.clone(), "a", 2).start().unwrap();
    let ga = a.elected().await.unwrap();
    let b = builder(db.clone(), "b", 1).start().unwrap();
    tokio::time::sleep(HEARTBEAT * 3).await;
    let injector = Arc::new(FailNextLeaderWrite {
        fault,
        armed: AtomicBool::new(true),
    });
    db.set_fault_injector(injector.clone());
    let started = Instant::now();
    let report = a.shutdown().await;
    assert!(ga.is_cancelled());
    assert!(
        !injector.armed.load(Ordering::SeqCst),
        "the leave was failed"
    );
    let gb = b.elected().await.unwrap();
    let took = started.elapsed();
    assert!(report.clean && report.unregistered, "{fault:?}: {report:?}");
    assert_eq!(gb.ballot(), ga.ballot().next().unwrap(), "{fault:?}");
    b.shutdown().await;
    took
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_whose_leave_reply_was_lost_hands_over_without_a_lease_wait() {
    for fault in [
        CommitFault::UnknownApplied,
        CommitFault::UnknownNotApplied,
        CommitFault::UnknownAppliedLater,
        CommitFault::Conflict,
        CommitFault::Unavailable,
        // A transaction timeout: applied, or not.
        CommitFault::ErrorAfterApplying(1031),
        CommitFault::Error(1031),
    ] {
        let took = shutdown_with_a_failed_leave(fault).await;
        assert!(took < LEASE, "{fault:?}: the successor waited {took:?}");
    }
}
