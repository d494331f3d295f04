//! The loop of an observer: it never registers or competes; it follows the leader record
//! through a watch (polling once per heartbeat as the fallback) and reports a leader as gone
//! once it has seen its record unchanged for a full lease.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;

use super::driver::Alive;
use super::events::ChangeReason;
use super::handle::{Shared, ShutdownReport};
use super::health::RunnerState;
use super::metrics::error_kind;
use super::pacing::{Backoff, WarnLimiter, error_chain, jittered, sleep_until_opt, tokio_instant};
use crate::clock::{Clock, LocalInstant};
use crate::config::ElectionConfig;
use crate::database::ElectionDatabase;
use crate::election::LeaderElection;
use crate::error::ElectionError;
use crate::ids::Ballot;
use crate::record::LeaderRecord;
use crate::txn::Watch;

/// The observation identity being timed, and since when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    ballot: Ballot,
    renewal: u64,
    first_seen: LocalInstant,
}

pub(crate) struct Observer<D: ElectionDatabase> {
    db: D,
    election: LeaderElection,
    config: ElectionConfig,
    rng: StdRng,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    alive: Alive,
    clock: Arc<dyn Clock>,
    seen: Option<Seen>,
    lease: Duration,
    watch: Option<Watch>,
    watch_retry_at: Option<LocalInstant>,
    backoff: Backoff,
    warn: WarnLimiter,
}

impl<D: ElectionDatabase> Observer<D> {
    pub(crate) fn new(
        db: D,
        election: LeaderElection,
        config: ElectionConfig,
        rng: StdRng,
        shared: Arc<Shared>,
        shutdown: CancellationToken,
    ) -> Self {
        Observer {
            clock: Arc::clone(&shared.clock),
            alive: Alive {
                shared: Arc::clone(&shared),
                clean: false,
            },
            lease: config.lease_duration(),
            db,
            election,
            config,
            rng,
            shared,
            shutdown,
            seen: None,
            watch: None,
            watch_retry_at: None,
            backoff: Backoff::default(),
            warn: WarnLimiter::default(),
        }
    }

    pub(crate) async fn run(mut self) {
        tracing::info!("election observer started");
        let shutdown = self.shutdown.clone();
        loop {
            let next = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                next = self.poll() => next,
            };
            let clock = Arc::clone(&self.clock);
            let lapse_at = self.lapse_at().filter(|t| *t > clock.now());
            let at = lapse_at.map_or(next, |t| t.min(next));
            let watch = &mut self.watch;
            let fired = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                fired = async {
                    match watch.as_mut() {
                        Some(w) => Some(w.await),
                        None => std::future::pending().await,
                    }
                } => fired,
                () = sleep_until_opt(Some(tokio_instant(clock.as_ref(), at))) => None,
            };
            if let Some(fired) = fired {
                self.watch = None;
                if let Err(e) = fired {
                    tracing::debug!(error = %error_chain(&e), "leader watch failed; re-arming later");
                    self.watch_retry_at =
                        Some(clock.now().saturating_add(self.config.heartbeat_interval()));
                }
            }
        }
        self.watch = None;
        self.alive.clean = true;
        self.shared.status.set(RunnerState::Stopped);
        tracing::info!("election observer stopped");
        self.shared.close();
        self.shared.report_tx.send_replace(Some(ShutdownReport {
            clean: true,
            tasks_finished: true,
            ..ShutdownReport::default()
        }));
    }

    /// When the observed leader's lease lapses, unless its record changes first.
    fn lapse_at(&self) -> Option<LocalInstant> {
        let seen = self.seen?;
        let owned = self
            .shared
            .publisher()
            .record()
            .is_some_and(|r| r.owner().is_some());
        owned.then(|| seen.first_seen.saturating_add(self.lease))
    }

    /// Reads the configuration and the leader record (arming a watch if none is armed), and
    /// publishes what changed. Returns when to poll next.
    async fn poll(&mut self) -> LocalInstant {
        let now = self.clock.now();
        let want_watch = self.watch.is_none() && self.watch_retry_at.is_none_or(|t| now >= t);
        let election = self.election.clone();
        let timeout = self.config.transaction_timeout();
        let result = self
            .db
            .transact(timeout, move |txn| {
                let election = election.clone();
                async move {
                    let (config, record) =
                        tokio::join!(election.read_config(&txn), election.leader_record(&txn));
                    let watch = want_watch.then(|| election.watch_leader(&txn));
                    Ok((config?, record?, watch))
                }
            })
            .await;
        let heartbeat = self.config.heartbeat_interval();
        match result {
            Ok((config, record, watch)) => {
                self.config = config;
                match watch {
                    Some(Ok(w)) => self.watch = Some(w),
                    Some(Err(e)) => {
                        tracing::info!(error = %error_chain(&e), "leader watch refused; polling every heartbeat");
                        self.watch_retry_at =
                            Some(now.saturating_add(heartbeat.saturating_mul(10)));
                    }
                    None => {}
                }
                self.observe(&record);
                self.backoff.reset();
                if let Some(failures) = self.warn.success() {
                    tracing::info!(failures, "reads succeed again");
                }
                self.shared.status.set(RunnerState::NotParticipating);
                let heartbeat = self.config.heartbeat_interval();
                self.clock
                    .now()
                    .saturating_add(jittered(&mut self.rng, heartbeat))
            }
            Err(e) => {
                self.shared.metrics.cycle_failure(error_kind(&e));
                if !matches!(e, ElectionError::NotInitialized) {
                    self.shared.status.set(RunnerState::Error);
                    if let Some(suppressed) = self.warn.failure(now) {
                        tracing::warn!(error = %error_chain(&e), suppressed, "reading the leader failed; retrying");
                    }
                }
                now.saturating_add(self.backoff.next(&mut self.rng, heartbeat))
            }
        }
    }

    fn observe(&mut self, record: &LeaderRecord) {
        let now = self.clock.now();
        let same = self
            .seen
            .is_some_and(|s| s.ballot == record.ballot() && s.renewal == record.renewal());
        if !same {
            // Timed from a reading taken after the read, as the protocol's followers do.
            self.seen = Some(Seen {
                ballot: record.ballot(),
                renewal: record.renewal(),
                first_seen: now,
            });
        }
        self.lease = record.lease_duration();
        let lapsed = record.owner().is_some()
            && self
                .seen
                .is_some_and(|s| now >= s.first_seen.saturating_add(record.lease_duration()));
        let changed = {
            let mut publisher = self.shared.publisher();
            publisher.observe(record, None, lapsed, ChangeReason::LeaseLapsed);
            std::mem::take(&mut publisher.changed)
        };
        if changed {
            let db = self.db.clone();
            let election = self.election.clone();
            let gauge = self.shared.metrics.candidates.clone();
            let timeout = self.config.transaction_timeout();
            tokio::spawn(async move {
                let listed = db
                    .transact(timeout, move |txn| {
                        let election = election.clone();
                        async move { election.list_candidates(&txn).await }
                    })
                    .await;
                if let Ok(list) = listed {
                    let live = list.iter().filter(|c| c.live).count();
                    gauge.set(f64::from(u32::try_from(live).unwrap_or(u32::MAX)));
                }
            });
        }
    }
}
