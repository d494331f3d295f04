//! The election loop of a candidate.
//!
//! One task owns all of the loop's state. It runs one cycle per heartbeat (with jitter), or
//! earlier: at the instant the last cycle said it could act (`Cycle::next_action_at`, e.g. a
//! lapsed lease's takeover), before the local lease runs out, when a watch on the leader
//! record reports a relevant change, or when guarded work goes idle during a handover. Every
//! wait also watches the local lease deadline, so the guard is cancelled on time even while a
//! transaction hangs. No application code runs on this task: callbacks go through a channel.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::builder::OnLoss;
use super::events::{ChangeReason, Notice, StopReason};
use super::guard::LeadershipGuard;
use super::handle::{Command, Shared, ShutdownReport};
use super::health::RunnerState;
use super::metrics::error_kind;
use super::pacing::{
    Backoff, WarnLimiter, before, error_chain, jittered, part, sleep_until_opt, tokio_instant,
};
use crate::candidate::{Candidate, Cycle, ElectionResult};
use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::core::{Action, ResignRejected};
use crate::database::ElectionDatabase;
use crate::election::{LeaderElection, ResignOutcome};
use crate::error::ElectionError;
use crate::ids::Ballot;
use crate::record::LeaderRecord;
use crate::txn::Watch;

/// How long to poll before trying a watch again after the database refused one.
const WATCH_RETRY_HEARTBEATS: u32 = 10;
/// Without a watch, a candidate waiting for the handover it asked for cycles this many times
/// per heartbeat, so it fills the vacancy within a fraction of a heartbeat of its writing.
const HANDOVER_POLLS_PER_HEARTBEAT: u32 = 8;
/// How many attempts the shutdown makes to resign and unregister.
const LEAVE_ATTEMPTS: u32 = 3;

/// Why the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exit {
    Shutdown,
    Lost,
}

/// Everything a driver starts with.
pub(crate) struct Setup<D> {
    pub(crate) db: D,
    pub(crate) election: LeaderElection,
    pub(crate) me: Candidate,
    pub(crate) config: ElectionConfig,
    pub(crate) rng: StdRng,
    pub(crate) on_loss: OnLoss,
    pub(crate) stop_timeout: Option<Duration>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) commands: mpsc::UnboundedReceiver<Command>,
    pub(crate) shutdown: CancellationToken,
}

/// Marks the runner dead, and ends its leadership, if the task ends without shutting down.
pub(crate) struct Alive {
    pub(crate) shared: Arc<Shared>,
    pub(crate) clean: bool,
}

impl Drop for Alive {
    fn drop(&mut self) {
        if self.clean {
            return;
        }
        if let Some(guard) = self.shared.guard_tx.send_replace(None) {
            let reason = StopReason::RunnerStopped;
            guard.revoke(reason.clone());
            self.shared.metrics.is_leader.set(0.0);
            self.shared.metrics.lease_remaining(Duration::ZERO);
            self.shared.metrics.transition(reason.as_str());
            self.shared
                .publisher()
                .notify(Notice::Stopped(guard.ballot(), reason));
        }
        tracing::error!("the election runner task ended without shutting down");
        self.shared.status.mark_dead();
        self.shared.close();
    }
}

/// What woke the loop.
enum Woke {
    Shutdown,
    Deadline,
    Command(Option<Command>),
    Watch(Result<(), crate::txn::TxnError>),
    Notified,
    Due,
}

pub(crate) struct Driver<D: ElectionDatabase> {
    db: D,
    election: LeaderElection,
    me: Candidate,
    init_config: ElectionConfig,
    config: ElectionConfig,
    logged_config: Option<ElectionConfig>,
    rng: StdRng,
    on_loss: OnLoss,
    stop_timeout: Option<Duration>,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedReceiver<Command>,
    commands_open: bool,
    shutdown: CancellationToken,
    alive: Alive,
    guard: Option<LeadershipGuard>,
    last_stopped: Option<Ballot>,
    draining: Vec<LeadershipGuard>,
    exit: Option<Exit>,
    registered: bool,
    failing: bool,
    watch: Option<Watch>,
    watch_retry_at: Option<LocalInstant>,
    next_cycle_at: LocalInstant,
    last_cycle_at: LocalInstant,
    next_action_at: Option<LocalInstant>,
    run_now: bool,
    backoff: Backoff,
    warn: WarnLimiter,
}

/// Why a leader lost its belief in a cycle that demoted it.
fn stop_reason(cycle: &Result<Cycle, ElectionError>, ballot: Ballot, me: &Candidate) -> StopReason {
    match cycle {
        Ok(c) => match c.action() {
            Action::HandedOver => StopReason::HandedOver {
                to: c.record().reservation().map(|r| r.id().clone()),
            },
            Action::SteppedDown => StopReason::ElectionsDisabled,
            _ if c.record().ballot() != ballot
                || c.record().owner().is_some_and(|o| o.id() != me.id()) =>
            {
                StopReason::Superseded
            }
            _ => StopReason::LeaseExpired,
        },
        Err(ElectionError::NotRegistered { .. }) => StopReason::Unregistered,
        Err(_) => StopReason::LeaseExpired,
    }
}

/// The change reason reported when this process's own record stops counting as leading.
fn change_reason(stop: &StopReason) -> ChangeReason {
    match stop {
        StopReason::HandedOver { to } => ChangeReason::SteppedDown {
            reserved_for: to.clone(),
        },
        StopReason::Resigned | StopReason::Shutdown | StopReason::ElectionsDisabled => {
            ChangeReason::SteppedDown { reserved_for: None }
        }
        _ => ChangeReason::LeaseLapsed,
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl<D: ElectionDatabase> Driver<D> {
    pub(crate) fn new(s: Setup<D>) -> Self {
        let now = s.me.now();
        Driver {
            alive: Alive {
                shared: Arc::clone(&s.shared),
                clean: false,
            },
            db: s.db,
            election: s.election,
            me: s.me,
            init_config: s.config.clone(),
            config: s.config,
            logged_config: None,
            rng: s.rng,
            on_loss: s.on_loss,
            stop_timeout: s.stop_timeout,
            shared: s.shared,
            commands: s.commands,
            commands_open: true,
            shutdown: s.shutdown,
            guard: None,
            last_stopped: None,
            draining: Vec::new(),
            exit: None,
            registered: false,
            failing: false,
            watch: None,
            watch_retry_at: None,
            next_cycle_at: now,
            last_cycle_at: now,
            next_action_at: None,
            run_now: true,
            backoff: Backoff::default(),
            warn: WarnLimiter::default(),
        }
    }

    pub(crate) async fn run(mut self) {
        tracing::info!(priority = %self.me.priority(), "election runner started");
        let exit = self.participate().await;
        let report = self.leave(exit).await;
        self.alive.clean = true;
        self.shared.status.set(RunnerState::Stopped);
        tracing::info!(
            unregistered = report.unregistered,
            resigned = report.resigned.is_some(),
            "election runner stopped"
        );
        self.shared.close();
        self.shared.report_tx.send_replace(Some(report));
    }

    async fn participate(&mut self) -> Exit {
        loop {
            if self.shutdown.is_cancelled() {
                return Exit::Shutdown;
            }
            if let Some(exit) = self.exit.take() {
                return exit;
            }
            if !self.draining.is_empty() {
                self.drain().await;
                continue;
            }
            if self.run_now || self.me.now() >= self.due_at() {
                self.run_now = false;
                if self.registered {
                    self.cycle().await;
                } else {
                    self.register().await;
                }
                continue;
            }
            self.arm_watch().await;
            self.sleep().await;
        }
    }

    // ----- waiting ---------------------------------------------------------------------------

    /// Awaits `fut`, ending the leadership on time if the local deadline passes meanwhile.
    /// `None` if the runner is shutting down (`fut` is dropped: every step is cancel-safe).
    async fn drive<F: std::future::Future>(&mut self, fut: F) -> Option<F::Output> {
        let shutdown = self.shutdown.clone();
        tokio::pin!(fut);
        loop {
            let deadline = self.guard_deadline();
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                out = &mut fut => return Some(out),
                () = sleep_until_opt(deadline) => self.reconcile(),
            }
        }
    }

    /// The tokio instant of the current guard's local deadline.
    fn guard_deadline(&self) -> Option<tokio::time::Instant> {
        let guard = self.guard.as_ref()?;
        Some(tokio_instant(self.me.clock().as_ref(), guard.deadline()))
    }

    /// When the next cycle is due.
    fn due_at(&self) -> LocalInstant {
        let mut due = self.next_cycle_at;
        if !self.failing {
            if let Some(at) = self.next_action_at {
                due = due.min(at);
            }
        }
        if !self.failing && self.watch.is_none() && self.awaiting_handover() {
            let poll = part(
                self.config.heartbeat_interval(),
                HANDOVER_POLLS_PER_HEARTBEAT,
            );
            due = due.min(self.last_cycle_at.saturating_add(poll));
        }
        if let Some(guard) = self.guard.as_ref() {
            // Renew before the lease runs out, leaving room for one attempt and some slack.
            let margin = self
                .config
                .transaction_timeout()
                .saturating_add(part(self.config.heartbeat_interval(), 4));
            let renew_at = before(guard.deadline(), margin);
            if !self.failing {
                due = due.min(renew_at);
            }
        }
        due
    }

    /// Whether the leader record carries this candidate's handover request (the leader will
    /// write a vacancy reserved for it at its next cycle).
    fn awaiting_handover(&self) -> bool {
        self.shared
            .publisher()
            .record()
            .and_then(LeaderRecord::handover_request)
            .is_some_and(|h| h.id() == self.me.id())
    }

    /// Sleeps until a cycle is due, handling what wakes the loop meanwhile.
    async fn sleep(&mut self) {
        loop {
            if self.run_now || self.shutdown.is_cancelled() || self.exit.is_some() {
                return;
            }
            let due = self.due_at();
            if self.me.now() >= due {
                return;
            }
            self.update_gauges();
            let clock = Arc::clone(self.me.clock());
            let due_at = tokio_instant(clock.as_ref(), due);
            let deadline = self.guard_deadline();
            let shutdown = self.shutdown.clone();
            let wake = Arc::clone(&self.shared.wake);
            let commands_open = self.commands_open;
            let watch = &mut self.watch;
            let commands = &mut self.commands;
            let woke = tokio::select! {
                biased;
                () = shutdown.cancelled() => Woke::Shutdown,
                () = sleep_until_opt(deadline) => Woke::Deadline,
                cmd = commands.recv(), if commands_open => Woke::Command(cmd),
                fired = async {
                    match watch.as_mut() {
                        Some(w) => w.await,
                        None => std::future::pending().await,
                    }
                } => Woke::Watch(fired),
                () = wake.notified() => Woke::Notified,
                () = tokio::time::sleep_until(due_at) => Woke::Due,
            };
            match woke {
                Woke::Shutdown | Woke::Due => return,
                Woke::Deadline => self.reconcile(),
                Woke::Command(None) => self.commands_open = false,
                Woke::Command(Some(Command::Resign(reply))) => self.resign(reply).await,
                Woke::Watch(fired) => {
                    self.watch = None;
                    match fired {
                        Ok(()) => self.arm_watch().await,
                        Err(e) => {
                            tracing::debug!(error = %error_chain(&e), "leader watch failed; re-arming later");
                            self.watch_retry_at = Some(
                                self.me
                                    .now()
                                    .saturating_add(self.config.heartbeat_interval()),
                            );
                        }
                    }
                }
                Woke::Notified => {
                    if self.handover_waiting() {
                        self.run_now = true;
                    }
                }
            }
        }
    }

    /// A handover is requested and no guarded work is in flight any more: hand over now.
    fn handover_waiting(&self) -> bool {
        let idle = self.shared.work.as_ref().is_none_or(|w| w.in_flight() == 0);
        idle && self
            .guard
            .as_ref()
            .is_some_and(|g| !g.is_cancelled() && g.is_handover_requested())
    }

    // ----- transactions ----------------------------------------------------------------------

    async fn register(&mut self) {
        let db = self.db.clone();
        let (election, me, init) = (
            self.election.clone(),
            self.me.clone(),
            self.init_config.clone(),
        );
        let timeout = self.config.transaction_timeout();
        let result = self
            .drive(db.transact(timeout, move |txn| {
                let (election, me, init) = (election.clone(), me.clone(), init.clone());
                async move {
                    election.initialize_with_config(&txn, &init).await?;
                    election.register_candidate(&txn, &me).await?;
                    election.read_config(&txn).await
                }
            }))
            .await;
        match result {
            None => {}
            Some(Ok(config)) => {
                self.registered = true;
                self.set_config(config);
                self.succeeded();
                self.run_now = true;
                tracing::info!(priority = %self.me.priority(), "registered as a candidate");
                self.update_state();
            }
            Some(Err(e)) => self.failed(&e, "registration failed; retrying", false),
        }
    }

    async fn cycle(&mut self) {
        let started = self.me.now();
        let leading = self.guard.as_ref().map(LeadershipGuard::ballot);
        let db = self.db.clone();
        let (election, me, hook) = (self.election.clone(), self.me.clone(), self.guard.clone());
        let timeout = self.config.transaction_timeout();
        let result = self
            .drive(db.transact(timeout, move |txn| {
                let (election, me, hook) = (election.clone(), me.clone(), hook.clone());
                async move {
                    let cycle = election.run_election_cycle(&txn, &me).await;
                    // Belief is lost before any vacancy can commit: cancel the guard now, so
                    // leader work stops before a successor can be elected.
                    if let Some(guard) = hook.as_ref() {
                        guard.revoke_unless_believed(|| stop_reason(&cycle, guard.ballot(), &me));
                    }
                    cycle
                }
            }))
            .await;
        match result {
            None => {}
            Some(Ok(cycle)) => self.cycle_succeeded(cycle, started),
            Some(Err(e)) => {
                self.reconcile();
                match &e {
                    ElectionError::NotRegistered { .. } | ElectionError::NotInitialized => {
                        self.registered = false;
                    }
                    _ => {}
                }
                self.failed(&e, "election cycle failed; retrying", leading.is_some());
            }
        }
    }

    fn cycle_succeeded(&mut self, cycle: Cycle, started: LocalInstant) {
        let now = self.me.now();
        self.set_config(cycle.config().clone());
        self.next_action_at = cycle.next_action_at();
        let action = cycle.action();
        let record = cycle.record().clone();
        let result = self.me.adopt(cycle);
        self.succeeded();
        let heartbeat = self.config.heartbeat_interval();
        self.last_cycle_at = started;
        self.next_cycle_at = started.saturating_add(jittered(&mut self.rng, heartbeat));
        if let ElectionResult::Leader(state) = &result {
            self.leading(state.ballot, started, &record);
            if matches!(action, Action::Renewed | Action::Acquired) {
                let took = now.saturating_duration_since(started);
                self.shared
                    .metrics
                    .renew_duration
                    .record(took.as_secs_f64());
            }
        }
        self.observe_written(&record, Some(action));
        self.reconcile();
        self.note_handover_request(&record);
        match action {
            Action::RequestedHandover => tracing::info!(
                ballot = record.ballot().get(),
                leader = record.owner().map(|o| tracing::field::display(o.id())),
                "asked the lower-priority leader to hand over"
            ),
            Action::HandedOver => tracing::info!(
                ballot = record.ballot().get(),
                reserved_for = record
                    .reservation()
                    .map(|r| tracing::field::display(r.id())),
                "handed over"
            ),
            _ => {}
        }
        self.update_state();
    }

    /// The cycle's commit confirmed leadership of `ballot`.
    fn leading(&mut self, ballot: Ballot, started: LocalInstant, record: &LeaderRecord) {
        let Some(leadership) = self.me.leadership().filter(|l| l.ballot == ballot) else {
            return;
        };
        let lease = self.config.lease_duration();
        match &self.guard {
            Some(g) if g.ballot() == ballot && !g.is_cancelled() => {
                g.renew(leadership.valid_until);
                self.shared.status.renewed(started, lease);
            }
            _ if self.last_stopped == Some(ballot)
                || self.guard.as_ref().is_some_and(|g| g.ballot() == ballot) =>
            {
                // A renewal that landed after this leadership ended locally: a ballot is
                // handed out (and stopped) once, so stop believing; the lease lapses.
                self.me.step_down_locally();
                tracing::warn!(
                    ballot = ballot.get(),
                    "a renewal committed after the lease had already ended locally; not resuming"
                );
            }
            _ => {
                if self.guard.is_some() {
                    self.end_leadership(StopReason::Superseded);
                }
                let Some(work) = self.shared.work.clone() else {
                    return;
                };
                let guard =
                    LeadershipGuard::new(ballot, self.me.clone(), leadership.valid_until, work);
                self.guard = Some(guard.clone());
                self.shared.guard_tx.send_replace(Some(guard.clone()));
                self.shared.status.renewed(started, lease);
                self.shared.metrics.is_leader.set(1.0);
                self.shared.metrics.transition("elected");
                let prev = self.shared.publisher().record().map(LeaderRecord::ballot);
                tracing::info!(
                    ballot = ballot.get(),
                    prev_ballot = prev.map(Ballot::get),
                    renewal = record.renewal(),
                    valid_for_ms = ms(leadership.remaining),
                    "elected leader"
                );
                self.shared.publisher().notify(Notice::Elected(guard));
            }
        }
    }

    /// Ends the leadership if the guard was revoked, the belief is gone, or the deadline has
    /// passed.
    fn reconcile(&mut self) {
        let Some(guard) = self.guard.as_ref() else {
            return;
        };
        let believed = self.me.fencing_token() == Some(guard.ballot());
        if guard.is_cancelled() || !believed || self.me.now() >= guard.deadline() {
            let reason = guard.stop_reason().unwrap_or(StopReason::LeaseExpired);
            self.end_leadership(reason);
        }
    }

    fn end_leadership(&mut self, reason: StopReason) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        guard.revoke(reason);
        let reason = guard.stop_reason().unwrap_or(StopReason::LeaseExpired);
        let ballot = guard.ballot();
        self.last_stopped = Some(ballot);
        self.shared.guard_tx.send_replace(None);
        self.shared.status.not_leading();
        self.shared.metrics.is_leader.set(0.0);
        self.shared.metrics.lease_remaining(Duration::ZERO);
        self.shared.metrics.transition(reason.as_str());
        tracing::info!(
            ballot = ballot.get(),
            reason = reason.as_str(),
            tasks_running = guard.tasks_running(),
            "stopped leading"
        );
        {
            let mut publisher = self.shared.publisher();
            publisher.refresh(None, change_reason(&reason));
            publisher.notify(Notice::Stopped(ballot, reason.clone()));
        }
        if self.on_loss == OnLoss::Exit && !reason.is_requested() {
            self.exit = Some(Exit::Lost);
        }
        self.draining.push(guard);
        self.update_state();
    }

    /// Waits (within the stop timeout) for the tasks of ended leaderships. Returns whether
    /// they all finished.
    async fn drain(&mut self) -> bool {
        let bound = self
            .stop_timeout
            .unwrap_or_else(|| self.config.heartbeat_interval());
        let mut all = true;
        for guard in std::mem::take(&mut self.draining) {
            if !guard.wait_tasks(bound).await {
                all = false;
                tracing::warn!(
                    ballot = guard.ballot().get(),
                    still_running = guard.tasks_running(),
                    bound_ms = ms(bound),
                    "guarded tasks did not stop within the stop timeout"
                );
            }
        }
        all
    }

    /// Reads the leader record and arms a watch on it, in one read-only transaction, unless a
    /// watch is armed or the database recently refused one. A relevant change (anything but a
    /// renewal) makes the next cycle run at once.
    async fn arm_watch(&mut self) {
        if self.watch.is_some() || !self.registered {
            return;
        }
        let now = self.me.now();
        if self.watch_retry_at.is_some_and(|t| now < t) {
            return;
        }
        let db = self.db.clone();
        let election = self.election.clone();
        let timeout = self.config.transaction_timeout();
        let result = self
            .drive(db.transact(timeout, move |txn| {
                let election = election.clone();
                async move {
                    let record = election.leader_record(&txn).await?;
                    let watch = election.watch_leader(&txn);
                    Ok((record, watch))
                }
            }))
            .await;
        let heartbeat = self.config.heartbeat_interval();
        match result {
            None => {}
            Some(Ok((record, watch))) => {
                match watch {
                    Ok(watch) => {
                        self.watch = Some(watch);
                        self.watch_retry_at = None;
                    }
                    Err(e) => {
                        let retry = heartbeat.saturating_mul(WATCH_RETRY_HEARTBEATS);
                        tracing::info!(
                            error = %error_chain(&e),
                            retry_in_ms = ms(retry),
                            "leader watch refused; polling every heartbeat"
                        );
                        self.watch_retry_at = Some(now.saturating_add(retry));
                    }
                }
                if self.relevant(&record) {
                    self.run_now = true;
                }
            }
            Some(Err(e)) => {
                tracing::debug!(error = %error_chain(&e), "could not arm the leader watch");
                self.watch_retry_at = Some(now.saturating_add(heartbeat));
            }
        }
    }

    /// Records a leader record read outside a cycle; whether it changed in a way that calls
    /// for a cycle now (anything but a plain renewal).
    fn relevant(&mut self, record: &LeaderRecord) -> bool {
        let changed = self.shared.publisher().record().is_none_or(|prev| {
            prev.ballot() != record.ballot()
                || prev.owner() != record.owner()
                || prev.handover_request() != record.handover_request()
                || prev.reservation() != record.reservation()
                || prev.payload() != record.payload()
        });
        self.observe(record);
        self.note_handover_request(record);
        changed
    }

    async fn resign(&mut self, reply: oneshot::Sender<Result<ResignOutcome, ElectionError>>) {
        let Some(expected) = self.guard.as_ref().map(LeadershipGuard::ballot) else {
            let current = self
                .shared
                .publisher()
                .record()
                .and_then(|r| r.owner().map(|o| o.id().clone()));
            let _ = reply.send(Ok(ResignOutcome::Rejected(ResignRejected::NotLeader {
                current,
            })));
            return;
        };
        let db = self.db.clone();
        let (election, me, hook) = (self.election.clone(), self.me.clone(), self.guard.clone());
        let timeout = self.config.transaction_timeout();
        let result = self
            .drive(db.transact(timeout, move |txn| {
                let (election, me, hook) = (election.clone(), me.clone(), hook.clone());
                async move {
                    let outcome = election.resign_leadership(&txn, &me, Some(expected)).await;
                    if let Some(guard) = hook.as_ref() {
                        guard.revoke_unless_believed(|| StopReason::Resigned);
                    }
                    outcome
                }
            }))
            .await;
        self.reconcile();
        if let Some(Ok(ResignOutcome::Resigned { reserved_for, .. })) = &result {
            tracing::info!(
                ballot = expected.get(),
                reserved_for = reserved_for
                    .as_ref()
                    .map(|r| tracing::field::display(r.id())),
                "resigned"
            );
        }
        self.run_now = true;
        if let Some(result) = result {
            let _ = reply.send(result);
        }
    }

    // ----- bookkeeping -----------------------------------------------------------------------

    fn observe(&mut self, record: &LeaderRecord) {
        self.observe_written(record, None);
    }

    /// Publishes a leader record; `action` is what this process's cycle wrote, if it did.
    fn observe_written(&mut self, record: &LeaderRecord, action: Option<Action>) {
        let first = match action {
            Some(Action::Acquired) => ChangeReason::Acquired,
            _ => ChangeReason::Discovered,
        };
        let leading = self
            .guard
            .as_ref()
            .filter(|g| !g.is_cancelled())
            .map(LeadershipGuard::ballot);
        let changed = {
            let mut publisher = self.shared.publisher();
            publisher.observe_written(record, leading, false, ChangeReason::LeaseLapsed, first);
            std::mem::take(&mut publisher.changed)
        };
        if changed {
            self.refresh_candidate_count();
        }
    }

    /// Counts the live candidates for the gauge, off the loop (a range read, so only when the
    /// leader changes).
    fn refresh_candidate_count(&self) {
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

    fn note_handover_request(&self, record: &LeaderRecord) {
        let Some(guard) = self.guard.as_ref().filter(|g| !g.is_cancelled()) else {
            return;
        };
        let Some(requester) = record.handover_request() else {
            return;
        };
        let honourable = self.config.allow_preemption()
            && requester.priority() > self.me.priority()
            && record.ballot() == guard.ballot();
        if honourable && guard.request_handover() {
            let in_flight = self.shared.work.as_ref().map_or(0, |w| w.in_flight());
            tracing::info!(
                ballot = guard.ballot().get(),
                requester = %requester.id(),
                requester_priority = %requester.priority(),
                tasks_in_flight = in_flight,
                grace_ms = ms(self.config.handover_grace()),
                "handover requested"
            );
            self.shared
                .publisher()
                .notify(Notice::HandoverRequested(requester.clone(), guard.clone()));
        }
    }

    fn set_config(&mut self, config: ElectionConfig) {
        if self.logged_config.as_ref() != Some(&config) {
            let lease = config.lease_duration();
            let heartbeat = config.heartbeat_interval();
            tracing::info!(
                lease_ms = ms(lease),
                heartbeat_ms = ms(heartbeat),
                leader_validity_ms = ms(config.local_validity(lease)),
                max_clock_rate_error_ppm = config.max_clock_rate_error_ppm(),
                takeover_after_ms = ms(lease),
                takeover_stagger_ms = ms(config.takeover_stagger()),
                crash_failover_within_ms = ms(lease.saturating_add(heartbeat.saturating_mul(2))),
                transaction_timeout_ms = ms(config.transaction_timeout()),
                handover_grace_ms = ms(config.handover_grace()),
                min_tenure_ms = ms(config.min_tenure()),
                candidate_timeout_ms = ms(config.candidate_timeout()),
                allow_preemption = config.allow_preemption(),
                election_enabled = config.election_enabled(),
                "election timing"
            );
            self.logged_config = Some(config.clone());
        }
        self.config = config;
    }

    fn succeeded(&mut self) {
        self.failing = false;
        self.backoff.reset();
        if let Some(failures) = self.warn.success() {
            tracing::info!(failures, "election cycles succeed again");
        }
    }

    fn failed(&mut self, e: &ElectionError, what: &'static str, leading: bool) {
        let kind = error_kind(e);
        self.shared.metrics.cycle_failure(kind);
        if leading {
            self.shared.metrics.renew_failure(kind);
        }
        self.failing = true;
        let now = self.me.now();
        if let Some(suppressed) = self.warn.failure(now) {
            tracing::warn!(
                error = %error_chain(e),
                kind,
                leading,
                suppressed,
                "{what}"
            );
        }
        let delay = self
            .backoff
            .next(&mut self.rng, self.config.heartbeat_interval());
        self.next_action_at = None;
        self.next_cycle_at = now.saturating_add(delay);
        self.update_state();
    }

    fn update_state(&self) {
        let state = if self.guard.as_ref().is_some_and(|g| !g.is_cancelled()) {
            RunnerState::Leader
        } else if self.failing {
            RunnerState::Error
        } else if self.registered {
            RunnerState::Follower
        } else {
            RunnerState::NotParticipating
        };
        self.shared.status.set(state);
        self.update_gauges();
    }

    fn update_gauges(&self) {
        let remaining = self
            .guard
            .as_ref()
            .map_or(Duration::ZERO, LeadershipGuard::remaining);
        self.shared.metrics.lease_remaining(remaining);
    }

    // ----- leaving ---------------------------------------------------------------------------

    async fn leave(&mut self, exit: Exit) -> ShutdownReport {
        let mut report = ShutdownReport {
            clean: true,
            ..ShutdownReport::default()
        };
        tracing::info!(
            reason = match exit {
                Exit::Shutdown => "shutdown",
                Exit::Lost => "leadership lost (exit on loss)",
            },
            "leaving the election"
        );
        // 1. No new leader work; guarded tasks are cancelled.
        self.end_leadership(StopReason::Shutdown);
        self.watch = None;
        // 2. Wait for them, within the bound.
        report.tasks_finished = self.drain().await;
        // 3. Resign (reserving for the best live candidate) and unregister, in one commit.
        let db = self.db.clone();
        let timeout = self.config.transaction_timeout();
        for attempt in 1..=LEAVE_ATTEMPTS {
            let (election, me) = (self.election.clone(), self.me.clone());
            let result = db
                .transact(timeout, move |txn| {
                    let (election, me) = (election.clone(), me.clone());
                    async move { election.unregister_candidate(&txn, &me).await }
                })
                .await;
            match result {
                Ok(resigned) => {
                    if let Some(ResignOutcome::Resigned {
                        ballot,
                        reserved_for,
                    }) = &resigned
                    {
                        tracing::info!(
                            ballot = ballot.get(),
                            reserved_for = reserved_for
                                .as_ref()
                                .map(|r| tracing::field::display(r.id())),
                            "resigned and unregistered in one commit"
                        );
                    }
                    report.resigned = resigned;
                    report.unregistered = true;
                    report.error = None;
                    break;
                }
                Err(e) => {
                    report.error = Some(error_chain(&e));
                    if !e.is_retryable() || attempt == LEAVE_ATTEMPTS {
                        tracing::warn!(error = %error_chain(&e), "could not unregister; the registration will go stale");
                        break;
                    }
                    let delay = self
                        .backoff
                        .next(&mut self.rng, self.config.heartbeat_interval());
                    tokio::time::sleep(delay).await;
                }
            }
        }
        self.me.step_down_locally();
        self.shared.metrics.is_leader.set(0.0);
        report
    }
}
