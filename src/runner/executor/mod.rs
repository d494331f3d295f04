//! The runner's task: it feeds the [machine](crate::core::runner::Machine) events and carries
//! out its commands. Every decision (when to cycle, when to wake, when a guard is issued or
//! revoked, how long to wait for busy work, back-off, what change to publish) is the
//! machine's; this file only waits, runs transactions, and publishes.
//!
//! One transaction (or wait) runs at a time. While it runs, only the guard's local deadline,
//! shutdown and requests from handles are attended to, so the guard is cancelled on time even
//! while a transaction hangs. No application code runs on this task: callbacks go through a
//! channel.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

mod apply;
mod ops;
mod wait;

use self::ops::Outcome;
use super::events::Notice;
use super::guard::LeadershipGuard;
use super::shared::{Request, Shared, ShutdownReport};
use super::timers::{error_chain, sleep_until_opt, tokio_instant};
use crate::candidate::Candidate;
use crate::clock::{Clock, LocalInstant};
use crate::config::ElectionConfig;
use crate::core::runner::{
    Command, Ctx, CycleReport, Event, Failure, Machine, RecordRead, RunnerState, StopReason,
};
use crate::election::{LeaderElection, ResignOutcome};
use crate::error::ElectionError;
use crate::store::database::ElectionDatabase;
use crate::store::txn::Watch;

/// Everything an executor starts with.
pub(crate) struct Setup<D> {
    pub(crate) db: D,
    pub(crate) election: LeaderElection,
    /// The candidate (`None`: an observer).
    pub(crate) me: Option<Candidate>,
    pub(crate) clock: Arc<dyn Clock>,
    /// The configuration to create the election with, if it does not exist.
    pub(crate) init_config: ElectionConfig,
    pub(crate) machine: Machine,
    pub(crate) shared: Arc<Shared>,
    pub(crate) requests: mpsc::UnboundedReceiver<Request>,
    pub(crate) shutdown: CancellationToken,
}

/// Marks the runner dead, and ends its leadership, if the task ends without shutting down.
struct Alive {
    shared: Arc<Shared>,
    clean: bool,
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
            self.shared
                .metrics
                .lease_remaining(std::time::Duration::ZERO);
            self.shared.metrics.transition(reason.as_str());
            self.shared
                .channels()
                .notify(Notice::Stopped(guard.ballot(), reason));
        }
        if self
            .shared
            .aborted
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            tracing::warn!("the election runner was aborted: it left without resigning");
        } else {
            tracing::error!("the election runner task ended without shutting down");
        }
        self.shared.status.mark_dead();
        self.shared.close();
    }
}

/// The machine, shared with the transaction closures that must consult it before their
/// commit (a cycle that stepped down revokes the guard *then*; one that wrote a shorter lease
/// moves the guard's deadline *then*).
#[derive(Clone)]
struct Brain {
    machine: Arc<Mutex<Machine>>,
    me: Option<Candidate>,
    clock: Arc<dyn Clock>,
    shared: Arc<Shared>,
    /// Notified when a transaction moved the guard's deadline, so the wait for that
    /// transaction re-arms its timer on the new deadline.
    deadline_moved: Arc<tokio::sync::Notify>,
}

impl Brain {
    fn lock(&self) -> MutexGuard<'_, Machine> {
        self.machine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ctx(&self) -> Ctx {
        let busy = self.shared.work.as_ref().is_some_and(|w| w.in_flight() > 0);
        Ctx::of(self.me.as_ref(), self.clock.as_ref(), busy)
    }

    fn feed(&self, event: Event) -> Vec<Command> {
        let ctx = self.ctx();
        self.lock().handle(event, ctx)
    }

    /// Inside a transaction, before its commit: feeds `event` and revokes the guard, or moves
    /// its deadline back, at once if the machine says so. Nothing else can come out while a
    /// transaction is in flight.
    fn decided(&self, event: Event) {
        for command in self.feed(event) {
            match command {
                Command::RevokeGuard(reason) => {
                    if let Some(guard) = self.shared.guard() {
                        guard.revoke(reason);
                    }
                }
                Command::SetGuardDeadline(deadline) => {
                    if let Some(guard) = self.shared.guard() {
                        guard.set_deadline(deadline);
                        self.deadline_moved.notify_one();
                    }
                }
                _ => {}
            }
        }
    }
}

/// One participant's (or observer's) task.
pub(crate) struct Executor<D: ElectionDatabase> {
    db: D,
    election: LeaderElection,
    init_config: ElectionConfig,
    brain: Brain,
    requests: mpsc::UnboundedReceiver<Request>,
    requests_open: bool,
    shutdown: CancellationToken,
    shutdown_fed: bool,
    alive: Alive,
    guard: Option<LeadershipGuard>,
    ended: Vec<LeadershipGuard>,
    watch: Option<Watch>,
    resign_replies: VecDeque<oneshot::Sender<Result<ResignOutcome, ElectionError>>>,
    report: ShutdownReport,
    last_error: Option<String>,
    /// The operator's mark the last committed cycle read (eligible: none).
    mark: crate::record::Eligibility,
    /// Whether the eligibility was logged once (an ineligible start is logged).
    eligibility_logged: bool,
}

impl<D: ElectionDatabase> Executor<D> {
    /// The candidate's own eligibility, for logs.
    fn eligibility(&self) -> crate::record::Eligibility {
        self.brain
            .me
            .as_ref()
            .map(Candidate::eligibility)
            .unwrap_or_default()
    }

    pub(crate) fn new(s: Setup<D>) -> Self {
        Executor {
            alive: Alive {
                shared: Arc::clone(&s.shared),
                clean: false,
            },
            brain: Brain {
                machine: Arc::new(Mutex::new(s.machine)),
                me: s.me,
                clock: s.clock,
                shared: s.shared,
                deadline_moved: Arc::new(tokio::sync::Notify::new()),
            },
            db: s.db,
            election: s.election,
            init_config: s.init_config,
            requests: s.requests,
            requests_open: true,
            shutdown: s.shutdown,
            shutdown_fed: false,
            guard: None,
            ended: Vec::new(),
            watch: None,
            resign_replies: VecDeque::new(),
            report: ShutdownReport {
                clean: true,
                ..ShutdownReport::default()
            },
            last_error: None,
            mark: crate::record::Eligibility::Eligible,
            eligibility_logged: false,
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.brain.shared
    }

    fn me(&self) -> Option<&Candidate> {
        self.brain.me.as_ref()
    }

    pub(crate) async fn run(mut self) {
        match self.me() {
            Some(me) => tracing::info!(priority = %me.priority(), "election runner started"),
            None => tracing::info!("election observer started"),
        }
        self.publish_eligibility();
        let mut queue: VecDeque<Command> = self.brain.feed(Event::Start).into();
        while let Some(command) = queue.pop_front() {
            let more = self.carry(command).await;
            queue.extend(more);
        }
        // The machine stops by a `Stop` command; a queue that ran dry without it cannot
        // happen (the machine is never quiet: `core::runner` tests and the simulation's
        // progress oracle check it), but would leave the runner stopped too, and says so.
        if !self.alive.clean {
            tracing::error!("the runner's machine went quiet without stopping; the runner stops");
        }
        self.finish();
    }

    /// Carries out one command; returns the commands that followed from it.
    async fn carry(&mut self, command: Command) -> Vec<Command> {
        match command {
            Command::Register => {
                let op = self.register();
                self.run_op(op).await
            }
            Command::RunCycle => {
                let op = self.cycle();
                self.run_op(op).await
            }
            Command::ReadRecord { watch, config } => {
                let op = self.read_record(watch, config);
                self.run_op(op).await
            }
            Command::Resign { expected } => {
                let op = self.resign(expected);
                self.run_op(op).await
            }
            Command::Leave => {
                let op = self.leave();
                self.run_op(op).await
            }
            Command::DrainTasks { bound } => {
                let ended = std::mem::take(&mut self.ended);
                let op = async move {
                    let mut all = true;
                    for guard in ended {
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
                    Outcome::Event(Event::Drained(all))
                };
                self.run_op(op).await
            }
            Command::SleepUntil(at) => self.sleep(at).await,
            other => {
                self.apply(other);
                Vec::new()
            }
        }
    }
}

fn log_config(config: &ElectionConfig) {
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
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A gauge value (exact below 2^53, which ballots do not reach in practice).
#[expect(
    clippy::cast_precision_loss,
    reason = "a gauge; ballots stay far below 2^53"
)]
fn u64_to_f64(n: u64) -> f64 {
    n as f64
}
