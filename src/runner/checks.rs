//! The runner's health checks (docs/design.md §13.4, §13.5), carried out beside the election: a task
//! of their own runs each check on its interval, cut at its timeout, and feeds the answers and
//! the leadership's beginnings and ends to [`Health`], which decides the eligibility; the task
//! writes it into the candidate ([`Candidate::set_eligible`]) and wakes the runner, whose next
//! cycle carries it at once. Never inside the election's transactions: a check that hangs
//! delays no renewal, it only fails at its timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::shared::Shared;
use super::timers::tokio_instant;
use crate::candidate::Candidate;
use crate::core::health::{CheckSettings, Health};
use crate::core::runner::RunnerState;
use crate::ids::Ballot;
use crate::record::Eligibility;

/// One run of a check: `Ok` passes, `Err(reason)` fails.
pub(crate) type CheckFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// A check, as the builder took it.
pub(crate) type CheckFn = Arc<dyn Fn() -> CheckFuture + Send + Sync>;

/// A check and how it runs.
#[derive(Clone)]
pub(crate) struct Check {
    pub(crate) settings: CheckSettings,
    pub(crate) run: CheckFn,
}

impl Check {
    pub(crate) fn new<F, Fut>(settings: CheckSettings, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        Check {
            settings,
            run: Arc::new(move || Box::pin(check())),
        }
    }

    /// Runs the check once: its answer, or a failure once its timeout passed (the check's
    /// future is dropped then).
    async fn answer(&self) -> Result<(), String> {
        let timeout = self.settings.timeout();
        match tokio::time::timeout(timeout, (self.run)()).await {
            Ok(answer) => answer,
            Err(_) => Err(format!(
                "no answer within {} ms",
                timeout.as_millis().max(1)
            )),
        }
    }
}

/// A runner's checks.
#[derive(Clone, Default)]
pub(crate) struct Checks {
    pub(crate) readiness: Option<Check>,
    pub(crate) leader: Option<Check>,
    /// `None`: one lease of the stored configuration.
    pub(crate) cool_down: Option<Duration>,
}

impl Checks {
    pub(crate) fn is_empty(&self) -> bool {
        self.readiness.is_none() && self.leader.is_none()
    }

    /// The decision-maker these checks start with.
    pub(crate) fn health(&self, lease: Duration) -> Health {
        Health::new(
            self.readiness.as_ref().map(|c| c.settings),
            self.leader.as_ref().map(|c| c.settings),
            self.cool_down.unwrap_or(lease),
        )
    }
}

/// An answer, from the check that gave it.
enum Answer {
    Readiness(Result<(), String>),
    /// For the leadership of this ballot.
    Leader(Ballot, Result<(), String>),
}

/// The checks' task: runs until the runner stops.
pub(crate) struct HealthTask {
    pub(crate) checks: Checks,
    pub(crate) health: Health,
    pub(crate) candidate: Candidate,
    pub(crate) shared: Arc<Shared>,
}

impl HealthTask {
    pub(crate) async fn run(mut self) {
        let (tx, mut answers) = mpsc::channel::<Answer>(4);
        // The checks' own loops; dropped (their checks with them) when this task ends.
        let mut loops = JoinSet::new();
        if let Some(check) = self.checks.readiness.clone() {
            loops.spawn(readiness_loop(check, tx.clone()));
        }
        let (leading_tx, leading_rx) = watch::channel(None::<Ballot>);
        if let Some(check) = self.checks.leader.clone() {
            loops.spawn(leader_loop(check, leading_rx, tx.clone()));
        }
        drop(tx);
        let mut guards = self.shared.guard_tx.subscribe();
        let mut states = self.shared.status.subscribe();
        let mut leases = self.shared.lease_tx.subscribe();
        let mut current: Option<Ballot> = None;
        let mut written = self.candidate.eligibility();
        // What happened before this task first ran (the runner may have been elected, or read
        // the stored lease, already) counts as a change too.
        guards.mark_changed();
        leases.mark_changed();
        states.mark_changed();
        loop {
            let now = self.shared.clock.now();
            let wake = self
                .health
                .next_change_at(now)
                .map(|at| tokio_instant(self.shared.clock.as_ref(), at));
            tokio::select! {
                biased;
                changed = states.changed() => {
                    if changed.is_err() || *states.borrow_and_update() == RunnerState::Stopped {
                        break;
                    }
                }
                changed = guards.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let ballot = guards.borrow_and_update().as_ref().map(|g| g.ballot());
                    if ballot != current {
                        let now = self.shared.clock.now();
                        if current.is_some() {
                            self.health.leading(false, now);
                        }
                        if ballot.is_some() {
                            self.health.leading(true, now);
                        }
                        current = ballot;
                        leading_tx.send_replace(current.filter(|_| self.health.checks_leader()));
                    }
                }
                changed = leases.changed(), if self.checks.cool_down.is_none() => {
                    if changed.is_err() {
                        break;
                    }
                    let lease = *leases.borrow_and_update();
                    self.health.set_cool_down(lease);
                }
                answer = answers.recv() => match answer {
                    Some(Answer::Readiness(a)) => self.health.readiness_answer(a),
                    // An answer about an ended leadership judges nothing.
                    Some(Answer::Leader(ballot, a)) if Some(ballot) == current => {
                        self.health.leader_answer(a);
                    }
                    Some(Answer::Leader(..)) => {}
                    None => {}
                },
                () = super::timers::sleep_until_opt(wake) => {}
            }
            let eligibility = self.health.eligibility(self.shared.clock.now());
            if eligibility != written {
                // The core cut the reason to size: this cannot be refused.
                let set = self.candidate.set_eligible(
                    eligibility.is_eligible(),
                    eligibility.reason().unwrap_or_default(),
                );
                if set.is_ok() {
                    written = eligibility;
                    self.shared.eligibility_changed.notify_one();
                }
            }
        }
        loops.abort_all();
    }
}

/// Runs the readiness check every interval (start to start), from the start.
async fn readiness_loop(check: Check, tx: mpsc::Sender<Answer>) {
    loop {
        let started = tokio::time::Instant::now();
        let answer = check.answer().await;
        if tx.send(Answer::Readiness(answer)).await.is_err() {
            return;
        }
        tokio::time::sleep_until(after(started, check.settings.interval())).await;
    }
}

/// Runs the leader health check every interval while a leadership it checks lasts (the first
/// run one interval after the leadership began: its work is starting).
async fn leader_loop(
    check: Check,
    mut leading: watch::Receiver<Option<Ballot>>,
    tx: mpsc::Sender<Answer>,
) {
    loop {
        let ballot = *leading.borrow_and_update();
        let Some(ballot) = ballot else {
            if leading.changed().await.is_err() {
                return;
            }
            continue;
        };
        let mut next = after(tokio::time::Instant::now(), check.settings.interval());
        loop {
            let ended = tokio::select! {
                changed = leading.changed() => changed.is_err() || *leading.borrow() != Some(ballot),
                () = tokio::time::sleep_until(next) => false,
            };
            if ended {
                break;
            }
            if tokio::time::Instant::now() < next {
                continue;
            }
            let started = tokio::time::Instant::now();
            let answer = tokio::select! {
                answer = check.answer() => answer,
                // The leadership ended during the check: its answer judges nothing.
                changed = leading.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
            };
            if tx.send(Answer::Leader(ballot, answer)).await.is_err() {
                return;
            }
            next = after(started, check.settings.interval());
        }
    }
}

/// What a runner's eligibility is now: the candidate's own, unless an operator's mark
/// excludes it.
pub(crate) fn effective(own: Eligibility, mark: &Eligibility) -> Eligibility {
    own.and(mark.clone())
}

/// `t + d`, or `t` past the end of time (never: settings are at most a year).
fn after(t: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    t.checked_add(d).unwrap_or(t)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::clock::{Clock, TokioClock};
    use crate::ids::{CandidateId, Priority};
    use crate::runner::guard::LeadershipGuard;

    /// The runner was elected (and read the stored lease) before the checks' task first ran:
    /// that leadership is checked, and the lease is the cool-down. Before, the task waited
    /// for the next change of either, so the first leadership was never checked (measured by
    /// the perf report on a release build: a failing leader kept leading).
    #[tokio::test(start_paused = true)]
    async fn what_happened_before_the_task_ran_counts() {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let me = Candidate::with_clock(
            CandidateId::parse("me").unwrap(),
            Priority::new(0),
            Arc::clone(&clock),
        );
        let lease = Duration::from_secs(3);
        let (shared, _parts) =
            Shared::new("t", Some(me.clone()), Arc::clone(&clock), lease, 8, None);
        // Elected, and the stored lease read, before the task starts.
        let work = shared.work.clone().unwrap();
        let election = crate::LeaderElection::new(crate::Subspace::from("t"));
        let guard = LeadershipGuard::new(Ballot::new(1), me.clone(), election, clock.now(), work);
        shared.guard_tx.send_replace(Some(guard));
        shared.lease_tx.send_replace(Duration::from_secs(7));
        let calls = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&calls);
        let settings =
            CheckSettings::new(Duration::from_millis(10), Duration::from_millis(5), 1, 1).unwrap();
        let checks = Checks {
            readiness: None,
            leader: Some(Check::new(settings, move || {
                counted.fetch_add(1, Ordering::SeqCst);
                std::future::ready(Err::<(), _>("down".to_owned()))
            })),
            cool_down: None,
        };
        let task = HealthTask {
            health: checks.health(lease),
            checks,
            candidate: me.clone(),
            shared: Arc::clone(&shared),
        };
        let handle = tokio::spawn(task.run());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            calls.load(Ordering::SeqCst) >= 3,
            "the leadership was not checked"
        );
        assert_eq!(
            me.eligibility().reason(),
            Some("leader health check failed: down")
        );
        // It steps down: the cool-down is the stored lease (7 s), not the one it started with.
        shared.guard_tx.send_replace(None);
        tokio::time::sleep(Duration::from_millis(10)).await;
        tokio::time::sleep(Duration::from_millis(6_980)).await;
        assert!(!me.eligibility().is_eligible());
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(me.eligibility().is_eligible());
        shared.status.set(RunnerState::Stopped);
        handle.await.unwrap();
    }
}
