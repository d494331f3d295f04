//! Found by an adversarial review: the fresh guard of the same ballot that a
//! holding leader gets when its successor vanished mid-drain (StopReason::HandoverWithdrawn)
//! is announced as a new election: `on_elected` is called a second time for the same ballot,
//! with no `on_stopped` for it in between, breaking the documented callback contract ("For
//! each ballot this process wins, on_elected is called exactly once and on_stopped exactly
//! once, after it", src/runner/events.rs).

use std::time::Duration;

use crate::runner_support::*;
use fdb_leader_election::runner::StopReason;

#[tokio::test(start_paused = true)]
async fn a_reopened_guard_is_not_a_second_election_of_the_same_ballot() {
    let db = db();
    let grace = Duration::from_millis(300);
    let rec = Recorder::default();
    let Busy {
        a,
        ga,
        task: _task,
        b,
    } = busy_leader_then(&db, grace, (2, 1), Some(rec.clone())).await;
    tokio::time::sleep(HEARTBEAT * 3).await;
    // Alpha is excluded: it drains for bravo. Bravo is excluded too: nobody else is
    // eligible, so alpha holds, and once the grace is over its drained guard ends and a fresh
    // one of the same ballot follows.
    mark(&db, &a, "alpha", false).await;
    wait_until("alpha's guard closes", HEARTBEAT * 3, || !ga.accepts_work()).await;
    mark(&db, &a, "bravo", false).await;
    wait_until("the drained guard ends", Duration::from_secs(3), || {
        ga.is_cancelled()
    })
    .await;
    assert_eq!(ga.stop_reason(), Some(StopReason::HandoverWithdrawn));
    let fresh = a.elected().await.unwrap();
    assert_eq!(fresh.ballot(), ga.ballot(), "the same ballot");
    tokio::time::sleep(HEARTBEAT).await;
    let elected = rec.elected();
    let stopped = rec.stopped();
    // One pair of callbacks per guard (ElectionCallbacks): the drained guard's on_stopped
    // comes before the fresh guard's on_elected.
    assert!(
        elected == [ga.ballot(), ga.ballot()]
            && stopped == [(ga.ballot(), StopReason::HandoverWithdrawn)],
        "callbacks for two guards of ballot {}: on_elected {elected:?}, on_stopped \
         {stopped:?}",
        ga.ballot()
    );
    a.shutdown().await;
    b.shutdown().await;
}
