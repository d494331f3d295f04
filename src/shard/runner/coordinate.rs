//! The coordinator loop: while this process leads the coordinator election, one
//! coordinator attempt per quarter heartbeat, or at the instant a member timed unchanged
//! lapses if that comes first, fenced by its token; meanwhile, a standby's timing of the
//! members each time the coordinating member renews (a watch on its record; at most once per
//! quarter heartbeat) and at least once per heartbeat, so that a successor fences a member
//! that died with the coordinator within about a lease of its death.

use std::sync::Arc;

use super::{Shared, metrics};
use crate::core::runner::part;
use crate::error::ElectionError;
use crate::runner::Runner;
use crate::shard::election::ShardedElection;
use crate::shard::member::Coordinator;
use crate::store::database::ElectionDatabase;
use crate::store::txn::{ElectionTxn, Watch};

/// While this process leads the coordinator election: one coordinator attempt per quarter
/// heartbeat, or sooner at a member's lapse, fenced by its token (the timing is the stored
/// one, once the member has read it).
pub(super) async fn coordinate<D: ElectionDatabase>(
    db: D,
    election: ShardedElection,
    runner: Runner,
    coordinator: Coordinator,
    shared: Arc<Shared>,
) {
    loop {
        let elected = loop {
            let standby = async {
                let heartbeat = shared.timing().heartbeat_interval();
                let started = tokio::time::Instant::now();
                let watch = stand_by(&db, &election, &runner, &coordinator, &shared).await;
                tokio::select! {
                    () = renewed(watch) => {
                        // At most one reading per quarter heartbeat (the coordinator's own
                        // pace), however often that record changes: a coordinating member
                        // writing in a loop must not make every standby read in one.
                        let period = part(heartbeat, 4);
                        tokio::time::sleep_until(started.checked_add(period).unwrap_or(started)).await;
                    }
                    () = tokio::time::sleep(heartbeat) => {}
                }
            };
            tokio::select! {
                () = shared.shutdown.cancelled() => return,
                () = shared.aborted.cancelled() => return,
                guard = runner.elected() => break guard,
                () = standby => {}
            }
        };
        let Some(guard) = elected else {
            return;
        };
        while guard.is_valid() {
            let config = shared.timing();
            let token = guard.fencing_token();
            let (e, c) = (election.clone(), coordinator.clone());
            let done = db
                .transact(config.transaction_timeout(), |txn| {
                    let (e, c) = (e.clone(), c.clone());
                    async move { e.coordinate(&txn, &c, token).await }
                })
                .await;
            let period = part(config.heartbeat_interval(), 4);
            let pause = match done {
                Ok(done) => {
                    if !done.fenced.is_empty() {
                        ::metrics::counter!(metrics::SHARD_TAKEOVERS)
                            .increment(u64::try_from(done.fenced.len()).unwrap_or(u64::MAX));
                    }
                    // This attempt timed the members: the next is due at the first lapse.
                    coordinator.next_reading_in(period)
                }
                // A failed attempt may not have timed them (its lapse instants are those of
                // an earlier reading, perhaps past): the period, never a retry in a loop.
                Err(ElectionError::NotInitialized) => period,
                Err(e) => {
                    tracing::debug!(error = %e, "coordinator attempt failed");
                    period
                }
            };
            tokio::select! {
                () = shared.shutdown.cancelled() => return,
                () = shared.aborted.cancelled() => return,
                () = guard.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}

/// A standby's timing of the members: one reading of their records, with a watch on the
/// record of the member that coordinates now (if another does, and the store watches), so
/// that the standby reads again as soon as it renews: a coordinator that dies with its shards
/// is then timed from its last renewal, not from up to a heartbeat later.
async fn stand_by<D: ElectionDatabase>(
    db: &D,
    election: &ShardedElection,
    runner: &Runner,
    coordinator: &Coordinator,
    shared: &Shared,
) -> Option<Watch> {
    let coordinating = runner
        .leader()
        .map(|l| l.id)
        .filter(|id| *id != coordinator.id);
    let (e, c) = (election.clone(), coordinator.clone());
    db.transact(shared.timing().transaction_timeout(), |txn| {
        let (e, c, coordinating) = (e.clone(), c.clone(), coordinating.clone());
        async move {
            e.time_members(&txn, &c).await?;
            Ok(coordinating.and_then(|id| txn.watch(&e.member_key(&id)).ok()))
        }
    })
    .await
    .unwrap_or_else(|e| {
        tracing::debug!(error = %e, "timing the members as a standby failed");
        None
    })
}

/// Resolves when `watch` fires; never without one, or when it fails (the store refused it,
/// too many watches): the heartbeat paces the standby then.
async fn renewed(watch: Option<Watch>) {
    let fired = match watch {
        Some(w) => w.await.is_ok(),
        None => false,
    };
    if !fired {
        std::future::pending::<()>().await;
    }
}
