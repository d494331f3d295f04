//! The coordinator loop: while this process leads the coordinator election, one
//! coordinator attempt per quarter heartbeat, fenced by its token; meanwhile, a standby's
//! timing of the members once per heartbeat, so that a successor fences a member that died
//! with the coordinator within about a lease of its death.

use std::sync::Arc;
use std::time::Duration;

use super::{Shared, metrics};
use crate::error::ElectionError;
use crate::runner::Runner;
use crate::shard::election::ShardedElection;
use crate::shard::member::Coordinator;
use crate::store::database::ElectionDatabase;

/// While this process leads the coordinator election: one coordinator attempt per quarter
/// heartbeat, fenced by its token (the timing is the stored one, once the member has read it).
pub(super) async fn coordinate<D: ElectionDatabase>(
    db: D,
    election: ShardedElection,
    runner: Runner,
    coordinator: Coordinator,
    shared: Arc<Shared>,
) {
    loop {
        let elected = loop {
            let config = shared.timing();
            let standby = tokio::select! {
                () = shared.shutdown.cancelled() => return,
                () = shared.aborted.cancelled() => return,
                guard = runner.elected() => break guard,
                () = tokio::time::sleep(config.heartbeat_interval()) => {
                    let (e, c) = (election.clone(), coordinator.clone());
                    db.transact(config.transaction_timeout(), |txn| {
                        let (e, c) = (e.clone(), c.clone());
                        async move { e.time_members(&txn, &c).await }
                    })
                    .await
                }
            };
            if let Err(e) = standby {
                tracing::debug!(error = %e, "timing the members as a standby failed");
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
            match done {
                Ok(done) => {
                    if !done.fenced.is_empty() {
                        ::metrics::counter!(metrics::SHARD_TAKEOVERS)
                            .increment(u64::try_from(done.fenced.len()).unwrap_or(u64::MAX));
                    }
                }
                Err(ElectionError::NotInitialized) => {}
                Err(e) => tracing::debug!(error = %e, "coordinator attempt failed"),
            }
            let pause = config
                .heartbeat_interval()
                .checked_div(4)
                .unwrap_or(Duration::ZERO);
            tokio::select! {
                () = shared.shutdown.cancelled() => return,
                () = shared.aborted.cancelled() => return,
                () = guard.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}
