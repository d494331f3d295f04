//! Found by an adversarial review: a leader that is not eligible drains its work
//! for a successor; the successor turns ineligible for a moment (the leader holds, with its
//! guard still closed, and its renewal forgets the drain), then eligible again: the core
//! starts a *new* grace from that cycle, while the guard has been closed since the first one.
//! docs/design.md §10.6: no path leaves a leader holding the leadership with a closed guard
//! for longer than `handover_grace` plus one heartbeat.

use std::time::Duration;

use crate::runner_support::*;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn a_successor_that_flickers_ineligible_does_not_restart_the_grace() {
    let db = db();
    let grace = Duration::from_secs(1);
    // Work in flight that outlasts the grace: the leader steps down at the grace's end.
    let Busy {
        a,
        ga,
        task: _task,
        b,
    } = busy_leader_then(&db, grace, (2, 1), None).await;
    tokio::time::sleep(HEARTBEAT * 3).await;
    assert!(ga.accepts_work(), "alpha leads, open");

    // The operator excludes alpha: it drains for bravo.
    mark(&db, &a, "alpha", false).await;
    let closed_at = {
        wait_until("alpha's guard closes", HEARTBEAT * 3, || !ga.accepts_work()).await;
        Instant::now()
    };
    assert!(!ga.is_cancelled());
    // Bravo is excluded for a moment (alpha holds: nobody else is eligible) and comes back.
    tokio::time::sleep(HEARTBEAT * 2).await;
    mark(&db, &a, "bravo", false).await;
    tokio::time::sleep(HEARTBEAT * 3).await;
    mark(&db, &a, "bravo", true).await;

    wait_until("alpha steps down", Duration::from_secs(5), || {
        ga.is_cancelled()
    })
    .await;
    let held = closed_at.elapsed();
    assert!(
        held <= grace + HEARTBEAT + Duration::from_millis(20),
        "alpha held the leadership with a closed guard for {held:?} (grace {grace:?}, \
         heartbeat {HEARTBEAT:?}); stop reason {:?}",
        ga.stop_reason()
    );
    b.elected().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}
