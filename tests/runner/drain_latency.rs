//! Found by an adversarial review: the core counts the handover grace from the
//! start of the cycle whose renewal closed the guard, but the guard closes (for the
//! application) only when that renewal's commit is confirmed: a slow commit is cut off the
//! drain.

use std::time::Duration;

use crate::runner_support::*;
use tokio::time::Instant;

/// docs/design.md §4: the leader "may first finish in-flight work for at most a configured
/// grace" after its guard closes (the guard the application sees closes when the renewal
/// that keeps the request is confirmed). The core counts the grace from the *start* of that
/// cycle, so every commit's latency is cut off the drain: with 20 ms commits and a 100 ms
/// grace, the work in flight gets 80 ms after its guard closed. (`Runner::resign` and the
/// hold's reopening count from the guard's closing, as the application sees it.)
#[tokio::test(start_paused = true)]
async fn a_slow_commit_does_not_shorten_the_drain() {
    let db = db();
    let faults = fdb_leader_election::ScriptedFaults::new();
    faults.set_commit_latency(Duration::from_millis(20));
    db.set_fault_injector(std::sync::Arc::new(faults));
    let grace = Duration::from_millis(100);
    let Busy {
        a,
        ga,
        task: _task,
        b,
    } = busy_leader_then(&db, grace, (1, 2), None).await;
    wait_until("alpha's guard closes", Duration::from_secs(2), || {
        ga.is_handover_requested()
    })
    .await;
    let closed_at = Instant::now();
    wait_until("alpha steps down", Duration::from_secs(2), || {
        ga.is_cancelled()
    })
    .await;
    let drained = closed_at.elapsed();
    assert!(
        drained >= grace,
        "the work in flight was cut {drained:?} after the guard closed (grace {grace:?}); \
         stop reason {:?}",
        ga.stop_reason()
    );
    b.elected().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}
