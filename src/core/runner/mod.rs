//! The runner's decisions, as a pure state machine (DESIGN §7, "one decision-maker").
//!
//! Events go in (a transaction finished, a watch fired, time passed, guarded work went idle,
//! resign or shutdown asked for); commands come out (run a cycle, arm a watch, sleep until,
//! issue or revoke a guard, publish a leader change, report health). The tokio runner and the
//! simulation both drive this machine and only carry its commands out, so the code that
//! issues and revokes users' leadership guards is the code the simulation's fault campaigns
//! exercise. No I/O, no clocks, no ambient randomness: every event comes with the clock
//! reading and the candidate's belief at that moment ([`Ctx`]), and jitter comes from the
//! machine's own seeded generator.
//!
//! Rules it keeps (each in one place):
//!
//! - a guard is issued only after a confirmed commit made the candidate believe, with the
//!   belief's deadline, and follows the belief: its deadline is the belief's (a shorter lease
//!   shortens it), and it is revoked the moment the belief is gone: *inside* the transaction
//!   that stepped down, before that transaction can commit ([`Event::CycleDecided`]);
//! - a leader renews before its deadline, leaving room for one attempt;
//! - a handover or a resignation waits for guarded work in flight, at most the grace;
//! - failures back off exponentially, with jitter, and are reported at a limited rate;
//! - an observer reports a leader gone by the lapse rule ([`lapse_at`](super::lapse_at)).

mod pacing;
#[cfg(test)]
mod tests;
mod types;
mod view;

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

pub(crate) use pacing::part;
pub use types::{ChangeReason, LeaderChange, LeaderInfo, OnLoss, RunnerState, StopReason};
pub(crate) use view::LeaderView;

use self::pacing::{Backoff, WarnLimiter, before, jittered};
use super::{Action, Observed};
use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::record::{LeaderRecord, Named, Party};

/// How long to poll before trying a watch again after the database refused one, or a watch
/// failed: in heartbeats.
pub(crate) const WATCH_RETRY_HEARTBEATS: u32 = 10;
/// Without a watch, a candidate waiting for the handover it asked for cycles this many times
/// per heartbeat, so it fills the vacancy within a fraction of a heartbeat of its writing.
pub(crate) const HANDOVER_POLLS_PER_HEARTBEAT: u32 = 8;
/// How many attempts the shutdown makes to resign and unregister.
pub(crate) const LEAVE_ATTEMPTS: u32 = 3;

/// What the candidate believes about its own leadership at the moment of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Belief {
    pub(crate) ballot: Ballot,
    pub(crate) valid_until: LocalInstant,
}

/// The moment an event happens at: the clock reading, the candidate's belief then, and
/// whether guarded work is in flight.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx {
    pub(crate) now: LocalInstant,
    pub(crate) belief: Option<Belief>,
    pub(crate) work_in_flight: bool,
}

/// A failed transaction, as far as decisions go (the error itself stays with the executor,
/// which logs it and hands it to whoever asked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The error kind, for metrics (`conflict`, `timeout`, `unavailable`, ...).
    pub(crate) kind: &'static str,
    /// Whether running the transaction again may succeed.
    pub(crate) retryable: bool,
    /// The candidate's registration is gone (it was evicted): register again.
    pub(crate) not_registered: bool,
    /// The election is not initialized: register (which creates it) again; an observer waits
    /// for it quietly.
    pub(crate) not_initialized: bool,
}

impl Failure {
    /// What the machine needs to know of `e`.
    pub(crate) fn of(e: &ElectionError) -> Self {
        Failure {
            kind: error_kind(e),
            retryable: e.is_retryable(),
            not_registered: matches!(e, ElectionError::NotRegistered { .. }),
            not_initialized: matches!(e, ElectionError::NotInitialized),
        }
    }
}

/// A short, stable name for an error, for the `kind` metric label and the logs.
pub(crate) fn error_kind(e: &ElectionError) -> &'static str {
    use crate::txn::TxnErrorKind as K;
    match e {
        ElectionError::Database(t) => match t.kind() {
            K::Conflict => "conflict",
            K::TooOld => "too_old",
            K::CommitUnknown => {
                if std::error::Error::source(t)
                    .is_some_and(|s| s.is::<crate::database::TransactionTimedOut>())
                {
                    "timeout"
                } else {
                    "unknown_result"
                }
            }
            K::Unavailable => "unavailable",
            K::OtherRetryable => "retryable",
            _ => "fatal",
        },
        ElectionError::NotInitialized => "not_initialized",
        ElectionError::NotRegistered { .. } => "not_registered",
        ElectionError::Corrupt { .. } | ElectionError::InvalidStoredConfig { .. } => "corrupt",
        _ => "other",
    }
}

/// What a committed cycle did, for the machine.
#[derive(Clone, Debug)]
pub(crate) struct CycleReport {
    pub(crate) action: Action,
    /// The leader record as the cycle left it.
    pub(crate) record: LeaderRecord,
    /// The stored configuration the cycle read.
    pub(crate) config: ElectionConfig,
    /// When the candidate could act next without any change to the record.
    pub(crate) next_action_at: Option<LocalInstant>,
    /// The ballot the candidate leads after adopting the cycle, if it does.
    pub(crate) leading: Option<Ballot>,
    /// The handover request the cycle honoured (the leader stepped down for it, or renewed
    /// while draining its work first).
    pub(crate) honoured: Option<Party>,
}

/// A read of the leader record outside a cycle (arming a watch, or an observer's poll).
#[derive(Clone, Debug)]
pub(crate) struct RecordRead {
    pub(crate) record: LeaderRecord,
    /// The stored configuration, when the read included it (observers).
    pub(crate) config: Option<ElectionConfig>,
    /// Whether a watch was asked for and armed: `None` if not asked for, `Some(false)` if the
    /// database refused it.
    pub(crate) watch: Option<bool>,
}

/// Something that happened to the runner.
#[derive(Clone, Debug)]
pub(crate) enum Event {
    /// The runner starts.
    Start,
    /// A wake-up: a time the machine asked to sleep until has come (or any other reason to
    /// look again).
    Tick,
    /// Registration (creating the election if needed) committed, with the stored
    /// configuration; or failed.
    Registered(Result<ElectionConfig, Failure>),
    /// Inside a cycle's transaction, after the cycle decided and **before** the commit: what
    /// it decided (or why it failed). The candidate's belief in the context is already what
    /// the decision left (belief is lost early).
    CycleDecided(Result<(Action, LeaderRecord), Failure>),
    /// The cycle committed and was adopted.
    CycleCommitted(CycleReport),
    /// The cycle's transaction failed (its commit result may be unknown).
    CycleFailed(Failure),
    /// The leader record was read, and perhaps a watch armed; or the read failed.
    RecordRead(Result<RecordRead, Failure>),
    /// The watch on the leader record fired, or failed.
    WatchFired(Result<(), Failure>),
    /// Guarded work went idle (no guarded task in flight any more).
    WorkIdle,
    /// The application asked to resign.
    ResignRequested,
    /// Inside the resignation's transaction, after it decided and before the commit.
    ResignDecided,
    /// The resignation's transaction ended (its outcome goes to whoever asked).
    ResignDone,
    /// The application asked to shut down (in-flight transactions are abandoned).
    ShutdownRequested,
    /// The tasks of ended leaderships finished (`true`), or the bound passed (`false`).
    Drained(bool),
    /// Leaving (resign and unregister in one transaction) ended.
    Left(Result<(), Failure>),
}

/// Something the runner must do.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Command {
    /// Create the election if needed, register, and read the configuration.
    Register,
    /// Run one election cycle (feeding [`Event::CycleDecided`] before its commit).
    RunCycle,
    /// Read the leader record, and arm a watch on it if `watch`, in one read-only
    /// transaction; observers also read the configuration (`config`).
    ReadRecord { watch: bool, config: bool },
    /// Forget the armed watch.
    DisarmWatch,
    /// Resign the leadership of `expected` (feeding [`Event::ResignDecided`] before its
    /// commit).
    Resign { expected: Ballot },
    /// Reject a resignation: this process does not lead (`current` does, if anyone).
    RejectResign { current: Option<CandidateId> },
    /// Resign (if leading) and unregister, in one transaction.
    Leave,
    /// Wait for the tasks of ended leaderships, at most `bound`.
    DrainTasks { bound: Duration },
    /// Nothing to do until `at` (or until something happens).
    SleepUntil(LocalInstant),
    /// Hand the application a leadership guard for `ballot`, valid until `deadline`.
    IssueGuard {
        ballot: Ballot,
        deadline: LocalInstant,
    },
    /// Move the guard's deadline to `deadline` (a renewal, or a shorter belief).
    SetGuardDeadline(LocalInstant),
    /// The guard accepts no new work (a handover or resignation is pending).
    CloseGuard,
    /// Cancel the guard at once (the first reason given sticks).
    RevokeGuard(StopReason),
    /// The leadership of `ballot` ended (after [`Command::RevokeGuard`]): publish it, wait
    /// for its tasks.
    EndLeadership { ballot: Ballot, reason: StopReason },
    /// A cycle whose attempt started at `started` committed this leadership, with `lease`;
    /// `took` is how long a renewal (or acquisition) took, for the renewal-latency metric.
    Renewed {
        started: LocalInstant,
        lease: Duration,
        took: Option<Duration>,
    },
    /// A renewal of `ballot` committed after that leadership had ended locally: a ballot is
    /// handed out (and stopped) once, so stop believing; the lease lapses.
    LateRenewal { ballot: Ballot },
    /// Stop believing in any leadership (the runner leaves).
    StepDownLocally,
    /// A candidate asked this leader to hand over, and the leader honours it (waiting for its
    /// guarded work first).
    HandoverRequested(Named),
    /// An operator asked this leader to step down, and the leader honours it (waiting for its
    /// guarded work first).
    OperatorRequest(CandidateId),
    /// The leader changed.
    Publish(LeaderChange),
    /// The ballot of the leader record seen (for the ballot gauge).
    SeenBallot(Ballot),
    /// Count the live candidates again (the leader changed).
    RefreshCandidateCount,
    /// The runner's state.
    State(RunnerState),
    /// The configuration in use changed.
    ConfigChanged(ElectionConfig),
    /// A transaction failed: count it (`leading`: a renewal failed), and log it if `warn`
    /// (with the failures suppressed since the last warning).
    Failed {
        what: &'static str,
        kind: &'static str,
        leading: bool,
        warn: Option<u64>,
    },
    /// Transactions succeed again after `failures` failures.
    Recovered { failures: u64 },
    /// The runner stopped. `tasks_finished`: the guarded tasks ended within the bound.
    Stop { tasks_finished: bool },
}

/// The guard handed out, as the machine tracks it.
#[derive(Clone, Debug)]
struct Guard {
    ballot: Ballot,
    deadline: LocalInstant,
    /// Revoked (cancelled) already, with this reason; the leadership ends at the next look.
    revoked: Option<StopReason>,
    /// A handover or operator request is honoured: no new work, step down when idle.
    handover: bool,
}

/// The transaction (or wait) in flight: at most one at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InFlight {
    Register,
    Cycle {
        started: LocalInstant,
        leading: bool,
    },
    Read,
    Resign,
    Drain,
    Leave,
}

/// Where the runner is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Participating,
    /// Leaving: draining, then `attempt` of the unregistration (0: draining).
    Leaving {
        attempt: u32,
        retry_at: Option<LocalInstant>,
    },
    Stopped,
}

/// The runner's decisions for one candidate (or observer).
#[derive(Debug)]
pub(crate) struct Machine {
    /// `None` for an observer.
    me: Option<CandidateId>,
    config: ElectionConfig,
    logged_config: Option<ElectionConfig>,
    on_loss: OnLoss,
    stop_timeout: Option<Duration>,
    rng: StdRng,
    phase: Phase,
    in_flight: Option<InFlight>,
    registered: bool,
    failing: bool,
    backoff: Backoff,
    warn: WarnLimiter,
    next_cycle_at: LocalInstant,
    last_cycle_at: LocalInstant,
    next_action_at: Option<LocalInstant>,
    run_now: bool,
    watch_armed: bool,
    watch_retry_at: Option<LocalInstant>,
    guard: Option<Guard>,
    last_stopped: Option<Ballot>,
    draining: bool,
    tasks_finished: bool,
    /// Resignations asked for and not answered; the first waits (from `since`) for work.
    resigns: u32,
    resign_since: Option<LocalInstant>,
    exit_on_loss: bool,
    view: LeaderView,
    /// An observer's timing of the record it reads.
    observed: Option<Observed>,
    state: Option<RunnerState>,
}

/// The settings a machine starts with.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// The candidate (`None`: an observer).
    pub(crate) me: Option<CandidateId>,
    /// The configuration to start with (the stored one replaces it once read).
    pub(crate) config: ElectionConfig,
    pub(crate) on_loss: OnLoss,
    /// How long to wait for the tasks of an ended leadership (default: a heartbeat).
    pub(crate) stop_timeout: Option<Duration>,
    /// The seed of the machine's jitter.
    pub(crate) seed: u64,
}

impl Machine {
    pub(crate) fn new(s: Settings, now: LocalInstant) -> Self {
        Machine {
            view: LeaderView::new(s.me.clone()),
            me: s.me,
            config: s.config,
            logged_config: None,
            on_loss: s.on_loss,
            stop_timeout: s.stop_timeout,
            rng: StdRng::seed_from_u64(s.seed),
            phase: Phase::Idle,
            in_flight: None,
            registered: false,
            failing: false,
            backoff: Backoff::default(),
            warn: WarnLimiter::default(),
            next_cycle_at: now,
            last_cycle_at: now,
            next_action_at: None,
            run_now: true,
            watch_armed: false,
            watch_retry_at: None,
            guard: None,
            last_stopped: None,
            draining: false,
            tasks_finished: true,
            resigns: 0,
            resign_since: None,
            exit_on_loss: false,
            observed: None,
            state: None,
        }
    }

    /// The configuration in use.
    pub(crate) fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Feeds one event; returns the commands to carry out, in order.
    pub(crate) fn handle(&mut self, event: Event, ctx: Ctx) -> Vec<Command> {
        let mut out = Vec::new();
        if self.phase == Phase::Stopped {
            return out;
        }
        // Inside a transaction, reconciling would end a leadership on bookkeeping the commit
        // has not confirmed: only the revoke (which the decided events issue) may happen then.
        let inside_transaction = matches!(event, Event::CycleDecided(_) | Event::ResignDecided);
        match event {
            Event::Start => {
                if self.phase == Phase::Idle {
                    self.phase = Phase::Participating;
                }
            }
            Event::Tick => {}
            Event::Registered(result) => self.registered_done(result, &ctx, &mut out),
            Event::CycleDecided(decided) => self.cycle_decided(&decided, &ctx, &mut out),
            Event::CycleCommitted(report) => self.cycle_committed(report, &ctx, &mut out),
            Event::CycleFailed(failure) => self.cycle_failed(&failure, &ctx, &mut out),
            Event::RecordRead(read) => self.record_read(read, &ctx, &mut out),
            Event::WatchFired(fired) => self.watch_fired(fired, &ctx),
            Event::WorkIdle => {
                if self.live_guard().is_some_and(|g| g.handover) {
                    self.run_now = true;
                }
            }
            Event::ResignRequested => self.resign_requested(&ctx, &mut out),
            Event::ResignDecided => {
                self.revoke_unless_believed(&ctx, StopReason::Resigned, &mut out)
            }
            Event::ResignDone => {
                self.in_flight = None;
                self.resign_since = None;
                self.run_now = true;
            }
            Event::ShutdownRequested => self.begin_leaving(&ctx, StopReason::Shutdown, &mut out),
            Event::Drained(all) => {
                self.in_flight = None;
                self.draining = false;
                self.tasks_finished &= all;
                if let Phase::Leaving { attempt: 0, .. } = self.phase {
                    self.phase = Phase::Leaving {
                        attempt: 1,
                        retry_at: None,
                    };
                }
            }
            Event::Left(result) => self.left(result, &ctx, &mut out),
        }
        if !inside_transaction {
            self.reconcile(&ctx, &mut out);
        }
        self.next(&ctx, &mut out);
        out
    }

    // ----- what to do next ------------------------------------------------------------------

    fn next(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        if self.in_flight.is_some() {
            return;
        }
        match self.phase {
            Phase::Idle | Phase::Stopped => return,
            Phase::Leaving { attempt, retry_at } => {
                self.next_leaving(attempt, retry_at, ctx, out);
                return;
            }
            Phase::Participating => {}
        }
        if self.exit_on_loss {
            self.begin_leaving(ctx, StopReason::Shutdown, out);
            self.next(ctx, out);
            return;
        }
        if self.me.is_none() {
            self.next_observer(ctx, out);
            return;
        }
        if self.draining {
            out.push(Command::DrainTasks {
                bound: self.drain_bound(),
            });
            self.in_flight = Some(InFlight::Drain);
            return;
        }
        if self.resigns > 0 && self.resign_due(ctx, out) {
            return;
        }
        if self.run_now || ctx.now >= self.due_at() {
            self.run_now = false;
            if self.registered {
                out.push(Command::RunCycle);
                self.in_flight = Some(InFlight::Cycle {
                    started: ctx.now,
                    leading: self.live_guard().is_some(),
                });
            } else {
                out.push(Command::Register);
                self.in_flight = Some(InFlight::Register);
            }
            return;
        }
        if self.wants_watch(ctx) {
            out.push(Command::ReadRecord {
                watch: true,
                config: false,
            });
            self.in_flight = Some(InFlight::Read);
            return;
        }
        let mut wake = self.due_at();
        if let Some(g) = self.live_guard() {
            wake = wake.min(g.deadline);
        }
        if let Some(since) = self.resign_since {
            wake = wake.min(since.saturating_add(self.config.handover_grace()));
        }
        out.push(Command::SleepUntil(wake));
    }

    /// When the next cycle is due.
    fn due_at(&self) -> LocalInstant {
        let mut due = self.next_cycle_at;
        if !self.failing {
            if let Some(at) = self.next_action_at {
                due = due.min(at);
            }
        }
        if !self.failing && !self.watch_armed && self.awaiting_handover() {
            let poll = part(
                self.config.heartbeat_interval(),
                HANDOVER_POLLS_PER_HEARTBEAT,
            );
            due = due.min(self.last_cycle_at.saturating_add(poll));
        }
        if let Some(g) = self.live_guard() {
            // Renew before the lease runs out, leaving room for one attempt and some slack.
            let margin = self
                .config
                .transaction_timeout()
                .saturating_add(part(self.config.heartbeat_interval(), 4));
            if !self.failing {
                due = due.min(before(g.deadline, margin));
            }
        }
        due
    }

    /// Whether the leader record carries this candidate's handover request (the leader will
    /// write a vacancy reserved for it at its next cycle).
    fn awaiting_handover(&self) -> bool {
        self.view
            .record()
            .and_then(LeaderRecord::handover_request)
            .is_some_and(|h| Some(h.id()) == self.me.as_ref())
    }

    fn wants_watch(&self, ctx: &Ctx) -> bool {
        self.registered && !self.watch_armed && self.watch_retry_at.is_none_or(|t| ctx.now >= t)
    }

    fn drain_bound(&self) -> Duration {
        self.stop_timeout
            .unwrap_or_else(|| self.config.heartbeat_interval())
    }

    fn live_guard(&self) -> Option<&Guard> {
        self.guard.as_ref().filter(|g| g.revoked.is_none())
    }

    // ----- transactions' results ------------------------------------------------------------

    fn registered_done(
        &mut self,
        result: Result<ElectionConfig, Failure>,
        ctx: &Ctx,
        out: &mut Vec<Command>,
    ) {
        self.in_flight = None;
        match result {
            Ok(config) => {
                self.registered = true;
                self.set_config(config, out);
                self.succeeded(out);
                self.run_now = true;
                self.update_state(out);
            }
            Err(f) => self.failed(&f, "registration failed; retrying", false, ctx, out),
        }
    }

    fn cycle_decided(
        &mut self,
        decided: &Result<(Action, LeaderRecord), Failure>,
        ctx: &Ctx,
        out: &mut Vec<Command>,
    ) {
        let Some(g) = self.live_guard() else {
            return;
        };
        let ballot = g.ballot;
        let reason = self.stop_reason(decided, ballot);
        self.revoke_unless_believed(ctx, reason, out);
    }

    /// Why a leader lost its belief in a cycle that demoted it.
    fn stop_reason(
        &self,
        decided: &Result<(Action, LeaderRecord), Failure>,
        ballot: Ballot,
    ) -> StopReason {
        match decided {
            Ok((Action::HandedOver, record)) => StopReason::HandedOver {
                to: record.reservation().map(|r| r.id().clone()),
            },
            Ok((Action::Resigned, record)) => StopReason::HandedOver {
                to: record.reservation().map(|r| r.id().clone()),
            },
            Ok((Action::SteppedDown, _)) => StopReason::ElectionsDisabled,
            Ok((_, record))
                if record.ballot() != ballot
                    || record
                        .owner()
                        .is_some_and(|o| Some(o.id()) != self.me.as_ref()) =>
            {
                StopReason::Superseded
            }
            Ok(_) => StopReason::LeaseExpired,
            Err(f) if f.not_registered => StopReason::Unregistered,
            Err(_) => StopReason::LeaseExpired,
        }
    }

    /// Revokes the guard at once if the candidate no longer believes in its ballot: belief
    /// is lost early, and the guard with it, before any vacancy can commit.
    fn revoke_unless_believed(&mut self, ctx: &Ctx, reason: StopReason, out: &mut Vec<Command>) {
        let Some(g) = self.guard.as_mut().filter(|g| g.revoked.is_none()) else {
            return;
        };
        if ctx.belief.map(|b| b.ballot) != Some(g.ballot) {
            out.push(Command::RevokeGuard(reason.clone()));
            g.revoked = Some(reason);
        }
    }

    fn cycle_committed(&mut self, report: CycleReport, ctx: &Ctx, out: &mut Vec<Command>) {
        let Some(InFlight::Cycle { started, .. }) = self.in_flight.take() else {
            return;
        };
        self.set_config(report.config.clone(), out);
        self.next_action_at = report.next_action_at;
        self.succeeded(out);
        let heartbeat = self.config.heartbeat_interval();
        self.last_cycle_at = started;
        self.next_cycle_at = started.saturating_add(jittered(&mut self.rng, heartbeat));
        // The request first: the leader is told about it before it stops.
        self.note_request(&report, out);
        if let Some(ballot) = report.leading {
            self.leading(ballot, started, report.action, ctx, out);
        }
        self.observe(&report.record, Some(report.action), out);
        self.reconcile(ctx, out);
        self.update_state(out);
    }

    /// The cycle's commit confirmed leadership of `ballot`.
    fn leading(
        &mut self,
        ballot: Ballot,
        started: LocalInstant,
        action: Action,
        ctx: &Ctx,
        out: &mut Vec<Command>,
    ) {
        let Some(belief) = ctx.belief.filter(|b| b.ballot == ballot) else {
            return;
        };
        let renewed = Command::Renewed {
            started,
            lease: self.config.lease_duration(),
            took: matches!(action, Action::Renewed | Action::Acquired)
                .then(|| ctx.now.saturating_duration_since(started)),
        };
        let same_ballot = self.guard.as_ref().is_some_and(|g| g.ballot == ballot);
        match &mut self.guard {
            Some(g) if g.ballot == ballot && g.revoked.is_none() => {
                g.deadline = belief.valid_until;
                out.push(Command::SetGuardDeadline(belief.valid_until));
                out.push(renewed);
            }
            _ if self.last_stopped == Some(ballot) || same_ballot => {
                // A renewal that landed after this leadership ended locally: a ballot is
                // handed out (and stopped) once, so stop believing; the lease lapses.
                out.push(Command::LateRenewal { ballot });
            }
            _ => {
                if self.guard.is_some() {
                    self.end_leadership(StopReason::Superseded, out);
                }
                self.guard = Some(Guard {
                    ballot,
                    deadline: belief.valid_until,
                    revoked: None,
                    handover: false,
                });
                out.push(Command::IssueGuard {
                    ballot,
                    deadline: belief.valid_until,
                });
                out.push(renewed);
            }
        }
    }

    /// A request the cycle honoured: the guard accepts no new work (the leader drains it, or
    /// has stepped down already), and the leader is told once, before it stops.
    fn note_request(&mut self, report: &CycleReport, out: &mut Vec<Command>) {
        let Some(request) = report.honoured.as_ref() else {
            return;
        };
        let Some(g) = self.guard.as_mut() else {
            return;
        };
        if g.handover {
            return;
        }
        g.handover = true;
        if g.revoked.is_none() {
            out.push(Command::CloseGuard);
        }
        out.push(match request {
            Party::Candidate(n) => Command::HandoverRequested(n.clone()),
            Party::Operator(id) => Command::OperatorRequest(id.clone()),
        });
    }

    fn cycle_failed(&mut self, failure: &Failure, ctx: &Ctx, out: &mut Vec<Command>) {
        let leading = match self.in_flight.take() {
            Some(InFlight::Cycle { leading, .. }) => leading,
            _ => false,
        };
        self.reconcile(ctx, out);
        if failure.not_registered || failure.not_initialized {
            self.registered = false;
        }
        self.failed(
            failure,
            "election cycle failed; retrying",
            leading,
            ctx,
            out,
        );
    }

    fn record_read(
        &mut self,
        read: Result<RecordRead, Failure>,
        ctx: &Ctx,
        out: &mut Vec<Command>,
    ) {
        self.in_flight = None;
        let heartbeat = self.config.heartbeat_interval();
        match read {
            Ok(read) => {
                match read.watch {
                    Some(true) => {
                        self.watch_armed = true;
                        self.watch_retry_at = None;
                    }
                    Some(false) => {
                        self.watch_retry_at = Some(
                            ctx.now
                                .saturating_add(heartbeat.saturating_mul(WATCH_RETRY_HEARTBEATS)),
                        );
                    }
                    None => {}
                }
                if self.me.is_some() {
                    if self.view.differs(&read.record) {
                        self.run_now = true;
                    }
                    self.observe(&read.record, None, out);
                } else {
                    self.observer_read(read, ctx, out);
                }
            }
            Err(f) => {
                if self.me.is_some() {
                    self.watch_retry_at = Some(ctx.now.saturating_add(heartbeat));
                } else {
                    self.observer_failed(&f, ctx, out);
                }
            }
        }
    }

    fn watch_fired(&mut self, fired: Result<(), Failure>, ctx: &Ctx) {
        self.watch_armed = false;
        match fired {
            Ok(()) => {
                if self.me.is_none() {
                    self.next_poll_now();
                }
            }
            Err(_) => {
                // A watch that fails (FoundationDB reports a refused watch through its
                // future) is treated like a refusal: poll for a while before trying again.
                let heartbeat = self.config.heartbeat_interval();
                self.watch_retry_at = Some(
                    ctx.now
                        .saturating_add(heartbeat.saturating_mul(WATCH_RETRY_HEARTBEATS)),
                );
                if self.me.is_none() {
                    self.next_poll_now();
                }
            }
        }
    }

    // ----- leadership bookkeeping -----------------------------------------------------------

    /// Ends the leadership if the guard was revoked, the belief is gone, or the deadline has
    /// passed; otherwise keeps the guard's deadline on the belief's.
    fn reconcile(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        let Some(g) = self.guard.as_mut() else {
            return;
        };
        let belief = ctx.belief.filter(|b| b.ballot == g.ballot);
        match (&g.revoked, belief) {
            (Some(reason), _) => {
                let reason = reason.clone();
                self.end_leadership(reason, out);
            }
            (None, Some(b)) if ctx.now < b.valid_until => {
                if b.valid_until != g.deadline {
                    g.deadline = b.valid_until;
                    out.push(Command::SetGuardDeadline(b.valid_until));
                }
            }
            (None, _) => self.end_leadership(StopReason::LeaseExpired, out),
        }
    }

    fn end_leadership(&mut self, reason: StopReason, out: &mut Vec<Command>) {
        let Some(g) = self.guard.take() else {
            return;
        };
        let reason = g.revoked.unwrap_or(reason);
        out.push(Command::RevokeGuard(reason.clone()));
        out.push(Command::EndLeadership {
            ballot: g.ballot,
            reason: reason.clone(),
        });
        self.last_stopped = Some(g.ballot);
        let fallback = match &reason {
            StopReason::HandedOver { to } => ChangeReason::SteppedDown {
                reserved_for: to.clone(),
            },
            StopReason::Resigned | StopReason::Shutdown | StopReason::ElectionsDisabled => {
                ChangeReason::SteppedDown { reserved_for: None }
            }
            _ => ChangeReason::LeaseLapsed,
        };
        if let Some(change) = self.view.refresh(None, fallback) {
            self.publish(change, out);
        }
        if self.on_loss == OnLoss::Exit && !reason.is_requested() {
            self.exit_on_loss = true;
        }
        self.draining = true;
        self.update_state(out);
    }

    /// Publishes a leader record this candidate read or wrote (`action`: what its cycle did).
    fn observe(&mut self, record: &LeaderRecord, action: Option<Action>, out: &mut Vec<Command>) {
        let first = match action {
            Some(Action::Acquired) => ChangeReason::Acquired,
            _ => ChangeReason::Discovered,
        };
        let leading = self.live_guard().map(|g| g.ballot);
        out.push(Command::SeenBallot(record.ballot()));
        if let Some(change) =
            self.view
                .observe(record, leading, false, ChangeReason::LeaseLapsed, first)
        {
            self.publish(change, out);
        }
    }

    fn publish(&mut self, change: LeaderChange, out: &mut Vec<Command>) {
        out.push(Command::Publish(change));
        out.push(Command::RefreshCandidateCount);
    }

    // ----- resignation ----------------------------------------------------------------------

    fn resign_requested(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        if self.me.is_none() || !matches!(self.phase, Phase::Participating) {
            return;
        }
        self.resigns = self.resigns.saturating_add(1);
        if self.resign_since.is_none() {
            self.start_resign(ctx, out);
        }
    }

    /// The first resignation waiting: close the guard to new work and start the grace; or
    /// reject it at once if this process does not lead.
    fn start_resign(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        match self.guard.as_mut().filter(|g| g.revoked.is_none()) {
            Some(g) => {
                if !g.handover {
                    g.handover = true;
                    out.push(Command::CloseGuard);
                }
                self.resign_since = Some(ctx.now);
            }
            None => {
                self.resigns = self.resigns.saturating_sub(1);
                let current = self
                    .view
                    .record()
                    .and_then(|r| r.owner().map(|o| o.id().clone()));
                out.push(Command::RejectResign { current });
            }
        }
    }

    /// Whether the waiting resignation was started or rejected now.
    fn resign_due(&mut self, ctx: &Ctx, out: &mut Vec<Command>) -> bool {
        if self.resign_since.is_none() {
            self.start_resign(ctx, out);
        }
        let Some(since) = self.resign_since else {
            return true; // rejected at once
        };
        let Some(ballot) = self.live_guard().map(|g| g.ballot) else {
            // The leadership ended while waiting.
            self.resign_since = None;
            self.resigns = self.resigns.saturating_sub(1);
            out.push(Command::RejectResign {
                current: self
                    .view
                    .record()
                    .and_then(|r| r.owner().map(|o| o.id().clone())),
            });
            return true;
        };
        let grace_over = ctx.now >= since.saturating_add(self.config.handover_grace());
        if ctx.work_in_flight && !grace_over {
            return false;
        }
        self.resigns = self.resigns.saturating_sub(1);
        out.push(Command::Resign { expected: ballot });
        self.in_flight = Some(InFlight::Resign);
        true
    }

    // ----- failures -------------------------------------------------------------------------

    fn succeeded(&mut self, out: &mut Vec<Command>) {
        self.failing = false;
        self.backoff.reset();
        if let Some(failures) = self.warn.success() {
            out.push(Command::Recovered { failures });
        }
    }

    fn failed(
        &mut self,
        f: &Failure,
        what: &'static str,
        leading: bool,
        ctx: &Ctx,
        out: &mut Vec<Command>,
    ) {
        self.failing = true;
        out.push(Command::Failed {
            what,
            kind: f.kind,
            leading,
            warn: self.warn.failure(ctx.now),
        });
        let delay = self
            .backoff
            .next(&mut self.rng, self.config.heartbeat_interval());
        self.next_action_at = None;
        self.next_cycle_at = ctx.now.saturating_add(delay);
        self.update_state(out);
    }

    fn set_config(&mut self, config: ElectionConfig, out: &mut Vec<Command>) {
        if self.logged_config.as_ref() != Some(&config) {
            out.push(Command::ConfigChanged(config.clone()));
            self.logged_config = Some(config.clone());
        }
        self.config = config;
    }

    fn update_state(&mut self, out: &mut Vec<Command>) {
        let state = if self.live_guard().is_some() {
            RunnerState::Leader
        } else if self.failing {
            RunnerState::Error
        } else if self.registered {
            RunnerState::Follower
        } else {
            RunnerState::NotParticipating
        };
        self.set_state(state, out);
    }

    fn set_state(&mut self, state: RunnerState, out: &mut Vec<Command>) {
        if self.state != Some(state) {
            self.state = Some(state);
            out.push(Command::State(state));
        }
    }

    // ----- leaving --------------------------------------------------------------------------

    fn begin_leaving(&mut self, ctx: &Ctx, reason: StopReason, out: &mut Vec<Command>) {
        if matches!(self.phase, Phase::Leaving { .. } | Phase::Stopped) {
            return;
        }
        // An in-flight transaction is abandoned: the executor drops it.
        self.in_flight = None;
        self.phase = Phase::Leaving {
            attempt: 0,
            retry_at: None,
        };
        if self.me.is_none() {
            self.stop(out);
            return;
        }
        let _ = ctx;
        // 1. No new leader work; guarded tasks are cancelled.
        self.end_leadership(reason, out);
        self.watch_armed = false;
        out.push(Command::DisarmWatch);
        self.resigns = 0;
        self.resign_since = None;
        // 2. Wait for them, within the bound (then 3. resign and unregister).
        self.draining = true;
    }

    fn next_leaving(
        &mut self,
        attempt: u32,
        retry_at: Option<LocalInstant>,
        ctx: &Ctx,
        out: &mut Vec<Command>,
    ) {
        if attempt == 0 {
            out.push(Command::DrainTasks {
                bound: self.drain_bound(),
            });
            self.in_flight = Some(InFlight::Drain);
            return;
        }
        if let Some(at) = retry_at.filter(|at| ctx.now < *at) {
            out.push(Command::SleepUntil(at));
            return;
        }
        out.push(Command::Leave);
        self.in_flight = Some(InFlight::Leave);
    }

    fn left(&mut self, result: Result<(), Failure>, ctx: &Ctx, out: &mut Vec<Command>) {
        self.in_flight = None;
        let Phase::Leaving { attempt, .. } = self.phase else {
            return;
        };
        match result {
            Err(f) if f.retryable && attempt < LEAVE_ATTEMPTS => {
                let delay = self
                    .backoff
                    .next(&mut self.rng, self.config.heartbeat_interval());
                self.phase = Phase::Leaving {
                    attempt: attempt.saturating_add(1),
                    retry_at: Some(ctx.now.saturating_add(delay)),
                };
            }
            _ => {
                out.push(Command::StepDownLocally);
                self.stop(out);
            }
        }
    }

    fn stop(&mut self, out: &mut Vec<Command>) {
        self.phase = Phase::Stopped;
        out.push(Command::DisarmWatch);
        out.push(Command::Stop {
            tasks_finished: self.tasks_finished,
        });
        self.set_state(RunnerState::Stopped, out);
    }

    // ----- observers ------------------------------------------------------------------------

    fn next_observer(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        let due = self.run_now || ctx.now >= self.next_cycle_at;
        if due {
            self.run_now = false;
            let watch = !self.watch_armed && self.watch_retry_at.is_none_or(|t| ctx.now >= t);
            out.push(Command::ReadRecord {
                watch,
                config: true,
            });
            self.in_flight = Some(InFlight::Read);
            return;
        }
        let mut wake = self.next_cycle_at;
        if let (Some(obs), Some(rec)) = (&self.observed, self.view.record()) {
            if rec.owner().is_some() {
                let lapse = super::lapse_at(obs.first_seen, rec.lease_duration());
                if lapse > ctx.now {
                    wake = wake.min(lapse);
                }
            }
        }
        out.push(Command::SleepUntil(wake));
    }

    fn next_poll_now(&mut self) {
        self.run_now = true;
    }

    fn observer_read(&mut self, read: RecordRead, ctx: &Ctx, out: &mut Vec<Command>) {
        if let Some(config) = read.config {
            self.set_config(config, out);
        }
        // Timed from a reading taken after the read, as the protocol's followers do.
        Observed::note(&mut self.observed, &read.record, ctx.now);
        let lapsed = read.record.owner().is_some()
            && self
                .observed
                .as_ref()
                .is_some_and(|o| o.lapsed(&read.record, ctx.now));
        out.push(Command::SeenBallot(read.record.ballot()));
        if let Some(change) = self.view.observe(
            &read.record,
            None,
            lapsed,
            ChangeReason::LeaseLapsed,
            ChangeReason::Discovered,
        ) {
            self.publish(change, out);
        }
        self.backoff.reset();
        if let Some(failures) = self.warn.success() {
            out.push(Command::Recovered { failures });
        }
        self.set_state(RunnerState::NotParticipating, out);
        let heartbeat = self.config.heartbeat_interval();
        self.next_cycle_at = ctx.now.saturating_add(jittered(&mut self.rng, heartbeat));
    }

    fn observer_failed(&mut self, f: &Failure, ctx: &Ctx, out: &mut Vec<Command>) {
        let warn = if f.not_initialized {
            None
        } else {
            self.set_state(RunnerState::Error, out);
            self.warn.failure(ctx.now)
        };
        out.push(Command::Failed {
            what: "reading the leader failed; retrying",
            kind: f.kind,
            leading: false,
            warn,
        });
        let heartbeat = self.config.heartbeat_interval();
        self.next_cycle_at = ctx
            .now
            .saturating_add(self.backoff.next(&mut self.rng, heartbeat));
    }
}
