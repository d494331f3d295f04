//! [`AssignmentObserver`]: follows who owns each shard, for anyone (a request router, a
//! dashboard, a member that forwards work), through a watch on the one assignments marker the
//! coordinator rewrites on every change, with polling once per heartbeat as the fallback.

use std::sync::Arc;
use std::time::Duration;

use foundationdb_tuple::Subspace;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::assignments::{AssignmentChange, Assignments};
use super::election::ShardedElection;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::runner::BuildError;
use crate::store::database::ElectionDatabase;
use crate::store::txn::ElectionTxn;

/// Follows a sharded election's assignments on a tokio task: the latest [`Assignments`] as a
/// channel, and a stream of [`AssignmentChange`]s. It never joins or writes. Cheap to clone;
/// the task stops with [`shutdown`](Self::shutdown) or when the last clone is dropped.
///
/// A change reaches it within a quarter heartbeat (the coordinator's pace) plus a watch's
/// latency, or a heartbeat where watches are unavailable.
///
/// ```
/// use std::time::Duration;
/// use fdb_leader_election::shard::{AssignmentObserver, ShardedRunner};
/// use fdb_leader_election::{ElectionConfig, MemDb};
/// use fdb_leader_election::Subspace;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let db = MemDb::new();
/// let config = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
/// let member = ShardedRunner::builder(db.clone(), Subspace::from("jobs"))
///     .shards(8)
///     .config(config)
///     .start()?;
/// let observer = AssignmentObserver::start(db.clone(), Subspace::from("jobs"))?;
/// let mut changes = observer.subscribe();
/// let first = changes.recv().await?; // a shard gets its first owner
/// assert_eq!(first.to.as_ref(), Some(member.id()));
/// tokio::time::sleep(Duration::from_secs(1)).await;
/// assert_eq!(observer.current().shards_of(member.id()).len(), 8);
/// # member.shutdown().await;
/// # observer.shutdown();
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct AssignmentObserver {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    current: watch::Receiver<Arc<Assignments>>,
    changes: broadcast::Sender<AssignmentChange>,
    stop: CancellationToken,
    _stop_on_drop: DropGuard,
}

impl AssignmentObserver {
    /// Starts following the sharded election under `subspace` on `db`, on the current tokio
    /// runtime. Until the election exists, it reports nothing and keeps looking.
    ///
    /// # Errors
    ///
    /// [`BuildError::NoRuntime`] outside a tokio runtime.
    pub fn start<D: ElectionDatabase>(db: D, subspace: Subspace) -> Result<Self, BuildError> {
        let _ = tokio::runtime::Handle::try_current().map_err(BuildError::NoRuntime)?;
        let (tx, current) = watch::channel(Arc::new(Assignments::default()));
        let (changes, _) = broadcast::channel(4096);
        let stop = CancellationToken::new();
        tokio::spawn(follow(
            db,
            ShardedElection::new(subspace),
            tx,
            changes.clone(),
            stop.clone(),
        ));
        Ok(AssignmentObserver {
            inner: Arc::new(Inner {
                current,
                changes,
                _stop_on_drop: stop.clone().drop_guard(),
                stop,
            }),
        })
    }

    /// The assignments as last read (empty before the first read).
    pub fn current(&self) -> Arc<Assignments> {
        Arc::clone(&self.inner.current.borrow())
    }

    /// The assignments, as a channel that reports every change.
    pub fn updates(&self) -> watch::Receiver<Arc<Assignments>> {
        self.inner.current.clone()
    }

    /// The stream of ownership changes from now on, shard by shard. A receiver that falls
    /// more than 4,096 changes behind gets `RecvError::Lagged` and should read
    /// [`current`](Self::current) to resynchronise.
    pub fn subscribe(&self) -> broadcast::Receiver<AssignmentChange> {
        self.inner.changes.subscribe()
    }

    /// Stops following.
    pub fn shutdown(&self) {
        self.inner.stop.cancel();
    }
}

async fn follow<D: ElectionDatabase>(
    db: D,
    election: ShardedElection,
    current: watch::Sender<Arc<Assignments>>,
    changes: broadcast::Sender<AssignmentChange>,
    stop: CancellationToken,
) {
    let mut config = ElectionConfig::default();
    loop {
        let read = db
            .transact(config.transaction_timeout(), |txn| {
                let election = election.clone();
                async move {
                    // Armed at the commit; a read-only transaction never conflicts. Armed before
                    // the election exists too: the coordinator's first publication wakes it.
                    let marker = txn.watch(election.assignments_key()).ok();
                    let read = match election.config(&txn).await {
                        Ok(stored) => Some((stored, election.assignments(&txn).await?)),
                        Err(ElectionError::NotInitialized) => None,
                        Err(e) => return Err(e),
                    };
                    Ok((read, marker))
                }
            })
            .await;
        let marker = match read {
            Ok((Some((stored, assignments)), marker)) => {
                config = stored;
                let before = current.borrow().clone();
                for change in assignments.changes_since(&before) {
                    let _ = changes.send(change);
                }
                if *before != assignments {
                    current.send_replace(Arc::new(assignments));
                }
                marker
            }
            Ok((None, marker)) => marker,
            Err(e) => {
                tracing::debug!(error = %e, "reading the shard assignments failed; retrying");
                None
            }
        };
        let poll = config.heartbeat_interval().max(Duration::from_millis(1));
        let woken = async {
            // A watch that fails (watches unavailable, too many) falls back to the poll.
            let fired = match marker {
                Some(w) => w.await.is_ok(),
                None => false,
            };
            if !fired {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = woken => {}
            () = tokio::time::sleep(poll) => {}
        }
    }
}
