//! The runner's decisions, as a pure state machine (docs/design.md §7, "one decision-maker").
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

mod leadership;
mod leaving;
mod messages;
mod next;
mod observer;
pub(crate) mod pacing;
mod resign;
mod results;
#[cfg(test)]
mod tests;
mod types;
mod view;

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;

pub use messages::{Belief, Command, Ctx, CycleReport, Event, Failure, RecordRead};
pub(crate) use pacing::part;
pub use types::{ChangeReason, LeaderChange, LeaderInfo, OnLoss, RunnerState, StopReason};
pub(crate) use view::LeaderView;

use self::pacing::{Backoff, WarnLimiter, before, jittered};
use super::{Action, Ineligible, Observed};
use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::ids::{Ballot, CandidateId};
use crate::record::{LeaderRecord, Party};

/// How long to poll before trying a watch again after the database refused one, or a watch
/// failed: in heartbeats.
pub(crate) const WATCH_RETRY_HEARTBEATS: u32 = 10;
/// Without a watch, a candidate waiting for the handover it asked for cycles this many times
/// per heartbeat, so it fills the vacancy within a fraction of a heartbeat of its writing.
pub(crate) const HANDOVER_POLLS_PER_HEARTBEAT: u32 = 8;
/// How many attempts the shutdown makes to resign and unregister.
pub(crate) const LEAVE_ATTEMPTS: u32 = 3;

/// The guard handed out, as the machine tracks it.
#[derive(Clone, Debug)]
struct Guard {
    ballot: Ballot,
    deadline: LocalInstant,
    /// Revoked (cancelled) already, with this reason; the leadership ends at the next look.
    revoked: Option<StopReason>,
    /// Since when the guard accepts no new work (a handover or operator request is
    /// honoured, or a resignation waits): the leader steps down when idle, within the grace.
    closed_at: Option<LocalInstant>,
    /// The application asked to resign while it was live (its resignation closed it, or
    /// came while it was closed): a resignation that ends it is the application's
    /// (`StopReason::Resigned`), else the machine's own step-down (`SteppedDown`).
    resign_asked: bool,
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

/// The runner's decisions for one candidate (or observer): feed it [`Event`]s with
/// [`handle`](Self::handle) and carry out the [`Command`]s it returns, in order.
///
/// The tokio `Runner` is one executor of this machine; the simulation is
/// another. Write your own to drive an election from another runtime or event loop: run each
/// transaction through your store's retry loop, feed `CycleDecided` (or `ResignDecided`)
/// *inside* the transaction after the election call and before the commit, and carry out a
/// `RevokeGuard` it returns at once.
#[derive(Debug)]
pub struct Machine {
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
    /// The last committed cycle found this leader not eligible and holding (nobody live is
    /// eligible); the warning about it is rate-limited.
    holding_ineligible: bool,
    holding_warn: WarnLimiter,
}

/// The settings a machine starts with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The candidate (`None`: an observer).
    me: Option<CandidateId>,
    /// The configuration to start with (the stored one replaces it once read).
    config: ElectionConfig,
    on_loss: OnLoss,
    /// How long to wait for the tasks of an ended leadership (default: a heartbeat).
    stop_timeout: Option<Duration>,
    /// The seed of the machine's jitter.
    seed: u64,
}

impl Settings {
    /// The settings of candidate `me` (`None`: an observer), starting with `config` (the
    /// stored configuration replaces it once read), with jitter drawn from `seed`; the
    /// runner recampaigns after a loss and waits a heartbeat for ended leaderships' tasks.
    pub fn new(me: Option<CandidateId>, config: ElectionConfig, seed: u64) -> Self {
        Settings {
            me,
            config,
            on_loss: OnLoss::default(),
            stop_timeout: None,
            seed,
        }
    }

    /// What to do after a lost leadership.
    pub fn on_loss(mut self, on_loss: OnLoss) -> Self {
        self.on_loss = on_loss;
        self
    }

    /// How long to wait for the tasks of an ended leadership.
    pub fn stop_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.stop_timeout = timeout;
        self
    }
}

impl Machine {
    /// A machine with `settings`, created at `now`; feed it [`Event::Start`].
    pub fn new(s: Settings, now: LocalInstant) -> Self {
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
            holding_ineligible: false,
            holding_warn: WarnLimiter::default(),
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
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Feeds one event, which happened at `ctx`; returns the commands to carry out, in order.
    pub fn handle(&mut self, event: Event, ctx: Ctx) -> Vec<Command> {
        let mut out = Vec::new();
        if self.phase == Phase::Stopped {
            return out;
        }
        // Inside a transaction, reconciling would end a leadership on bookkeeping the commit
        // has not confirmed: only the revoke (which the decided events issue) may happen then.
        let inside_transaction = matches!(event, Event::CycleDecided(_) | Event::ResignDecided);
        if !self.expects(&event) {
            // The result of an operation that is not the one in flight (abandoned at
            // shutdown): nothing to do with it but look again.
            if !inside_transaction {
                self.reconcile(&ctx, &mut out);
            }
            self.next(&ctx, &mut out);
            return out;
        }
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
                if self.live_guard().is_some_and(|g| g.closed_at.is_some()) {
                    self.run_now = true;
                }
            }
            Event::EligibilityChanged => {
                // A candidate's next cycle carries it (an observer has none); before the
                // registration, the registration's first cycle does.
                if self.me.is_some() && self.registered {
                    self.run_now = true;
                }
            }
            Event::ResignRequested => self.resign_requested(&ctx, &mut out),
            Event::ResignDecided => {
                let asked = self.live_guard().is_none_or(|g| g.resign_asked);
                let reason = if asked {
                    StopReason::Resigned
                } else {
                    StopReason::SteppedDown
                };
                self.revoke_unless_believed(&ctx, reason, &mut out)
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

    /// Whether `event` is the result of the operation in flight (other events always are).
    fn expects(&self, event: &Event) -> bool {
        let wanted = match event {
            Event::Registered(_) => InFlight::Register,
            Event::CycleDecided(_) | Event::CycleCommitted(_) | Event::CycleFailed(_) => {
                return matches!(self.in_flight, Some(InFlight::Cycle { .. }));
            }
            Event::RecordRead(_) => InFlight::Read,
            Event::ResignDecided | Event::ResignDone => InFlight::Resign,
            Event::Drained(_) => InFlight::Drain,
            Event::Left(_) => InFlight::Leave,
            _ => return true,
        };
        self.in_flight == Some(wanted)
    }

    fn live_guard(&self) -> Option<&Guard> {
        self.guard.as_ref().filter(|g| g.revoked.is_none())
    }

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
}
