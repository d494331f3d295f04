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
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::events::Notice;
use super::guard::LeadershipGuard;
use super::shared::{Request, Shared, ShutdownReport};
use super::timers::{error_chain, sleep_until_opt, tokio_instant};
use crate::candidate::{Candidate, ElectionResult};
use crate::clock::{Clock, LocalInstant};
use crate::config::ElectionConfig;
use crate::core::runner::{
    Belief, Command, Ctx, CycleReport, Event, Failure, Machine, RecordRead, RunnerState, StopReason,
};
use crate::database::ElectionDatabase;
use crate::election::{LeaderElection, ResignOutcome};
use crate::error::ElectionError;
use crate::txn::Watch;

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
        tracing::error!("the election runner task ended without shutting down");
        self.shared.status.mark_dead();
        self.shared.close();
    }
}

/// The machine, shared with the transaction closures that must consult it before their
/// commit (a cycle that stepped down revokes the guard *then*).
#[derive(Clone)]
struct Brain {
    machine: Arc<Mutex<Machine>>,
    me: Option<Candidate>,
    clock: Arc<dyn Clock>,
    shared: Arc<Shared>,
}

impl Brain {
    fn lock(&self) -> MutexGuard<'_, Machine> {
        self.machine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ctx(&self) -> Ctx {
        let now = self.clock.now();
        Ctx {
            now,
            belief: self.me.as_ref().and_then(|me| {
                me.leadership().map(|l| Belief {
                    ballot: l.ballot,
                    valid_until: l.valid_until,
                })
            }),
            work_in_flight: self.shared.work.as_ref().is_some_and(|w| w.in_flight() > 0),
        }
    }

    fn feed(&self, event: Event) -> Vec<Command> {
        let ctx = self.ctx();
        self.lock().handle(event, ctx)
    }

    /// Inside a transaction, before its commit: feeds `event` and revokes the guard at once
    /// if the machine says so. Nothing else can come out while a transaction is in flight.
    fn decided(&self, event: Event) {
        for command in self.feed(event) {
            if let Command::RevokeGuard(reason) = command {
                if let Some(guard) = self.shared.guard() {
                    guard.revoke(reason);
                }
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
}

impl<D: ElectionDatabase> Executor<D> {
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
        let mut queue: VecDeque<Command> = self.brain.feed(Event::Start).into();
        while let Some(command) = queue.pop_front() {
            let more = self.carry(command).await;
            queue.extend(more);
        }
        // The machine stops by a `Stop` command; a queue that ran dry without it cannot
        // happen, but would leave the runner stopped too.
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

    /// Runs a transaction (or wait) to its end, attending meanwhile to the guard's deadline,
    /// shutdown (which abandons the transaction) and requests from handles.
    async fn run_op<F>(&mut self, op: F) -> Vec<Command>
    where
        F: Future<Output = Outcome>,
    {
        /// What interrupted the wait for an operation (short-lived: matched at once).
        #[expect(clippy::large_enum_variant, reason = "matched at once, never stored")]
        enum Woke {
            Shutdown,
            Done(Outcome),
            Deadline,
            Request(Option<Request>),
        }
        tokio::pin!(op);
        loop {
            let deadline = self.guard_deadline();
            let shutdown = self.shutdown.clone();
            let (fed, open) = (self.shutdown_fed, self.requests_open);
            let requests = &mut self.requests;
            let woke = tokio::select! {
                biased;
                () = shutdown.cancelled(), if !fed => Woke::Shutdown,
                outcome = &mut op => Woke::Done(outcome),
                () = sleep_until_opt(deadline) => Woke::Deadline,
                request = requests.recv(), if open => Woke::Request(request),
            };
            match woke {
                Woke::Shutdown => {
                    // The operation is abandoned (dropped): every step is cancel-safe.
                    self.shutdown_fed = true;
                    return self.brain.feed(Event::ShutdownRequested);
                }
                Woke::Done(outcome) => {
                    let event = self.outcome(outcome);
                    return self.brain.feed(event);
                }
                // While an operation runs the machine starts nothing else: what it says now
                // does not wait.
                Woke::Deadline => {
                    let commands = self.brain.feed(Event::Tick);
                    self.apply_all(commands);
                }
                Woke::Request(request) => {
                    let commands = self.request(request);
                    self.apply_all(commands);
                }
            }
        }
    }

    /// Sleeps until `at`, or until something happens; returns what followed.
    async fn sleep(&mut self, at: LocalInstant) -> Vec<Command> {
        self.update_gauges();
        let clock = Arc::clone(&self.brain.clock);
        let due = tokio_instant(clock.as_ref(), at);
        let deadline = self.guard_deadline();
        let shutdown = self.shutdown.clone();
        let wake = Arc::clone(&self.shared().wake);
        /// What ended the sleep (short-lived: matched at once).
        #[expect(clippy::large_enum_variant, reason = "matched at once, never stored")]
        enum Woke {
            Event(Event),
            Request(Option<Request>),
            Watch(Result<(), crate::txn::TxnError>),
        }
        let (fed, open) = (self.shutdown_fed, self.requests_open);
        let (requests, watch) = (&mut self.requests, &mut self.watch);
        let woke = tokio::select! {
            biased;
            () = shutdown.cancelled(), if !fed => Woke::Event(Event::ShutdownRequested),
            () = sleep_until_opt(deadline) => Woke::Event(Event::Tick),
            request = requests.recv(), if open => Woke::Request(request),
            fired = async {
                match watch.as_mut() {
                    Some(w) => w.await,
                    None => std::future::pending().await,
                }
            } => Woke::Watch(fired),
            () = wake.notified() => Woke::Event(Event::WorkIdle),
            () = tokio::time::sleep_until(due) => Woke::Event(Event::Tick),
        };
        let event = match woke {
            Woke::Event(event) => event,
            Woke::Request(request) => return self.request(request),
            Woke::Watch(fired) => {
                self.watch = None;
                Event::WatchFired(fired.map_err(|e| {
                    tracing::debug!(error = %error_chain(&e), "leader watch failed; polling for a while");
                    Failure::of(&ElectionError::Database(e))
                }))
            }
        };
        if matches!(event, Event::ShutdownRequested) {
            self.shutdown_fed = true;
        }
        self.brain.feed(event)
    }

    fn request(&mut self, request: Option<Request>) -> Vec<Command> {
        match request {
            None => {
                self.requests_open = false;
                Vec::new()
            }
            Some(Request::Resign(reply)) => {
                self.resign_replies.push_back(reply);
                self.brain.feed(Event::ResignRequested)
            }
        }
    }

    fn guard_deadline(&self) -> Option<tokio::time::Instant> {
        let guard = self.guard.as_ref()?;
        Some(tokio_instant(self.brain.clock.as_ref(), guard.deadline()))
    }

    // ----- transactions ---------------------------------------------------------------------

    fn timeout(&self) -> std::time::Duration {
        self.brain.lock().config().transaction_timeout()
    }

    fn register(&self) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let (election, init) = (self.election.clone(), self.init_config.clone());
        let me = self.brain.me.clone();
        let timeout = self.timeout();
        async move {
            let Some(me) = me else {
                return Outcome::Event(Event::Tick);
            };
            let result = db
                .transact(timeout, move |txn| {
                    let (election, me, init) = (election.clone(), me.clone(), init.clone());
                    async move {
                        election.initialize_with_config(&txn, &init).await?;
                        election.register_candidate(&txn, &me).await?;
                        election.read_config(&txn).await
                    }
                })
                .await;
            Outcome::Registered(result)
        }
    }

    fn cycle(&self) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let (election, brain) = (self.election.clone(), self.brain.clone());
        let timeout = self.timeout();
        async move {
            let Some(me) = brain.me.clone() else {
                return Outcome::Event(Event::Tick);
            };
            let cycling = me.clone();
            let result = db
                .transact(timeout, move |txn| {
                    let (election, me, brain) = (election.clone(), cycling.clone(), brain.clone());
                    async move {
                        let cycle = election.run_election_cycle(&txn, &me).await;
                        // Belief is lost before any vacancy can commit: the machine revokes
                        // the guard now, so leader work stops before a successor is elected.
                        brain.decided(Event::CycleDecided(match &cycle {
                            Ok(c) => Ok((c.action(), c.record().clone())),
                            Err(e) => Err(Failure::of(e)),
                        }));
                        cycle
                    }
                })
                .await;
            match result {
                Ok(cycle) => {
                    let (action, record) = (cycle.action(), cycle.record().clone());
                    let (config, next_action_at) = (cycle.config().clone(), cycle.next_action_at());
                    let honoured = cycle.honoured.clone();
                    let adopted = me.adopt(cycle);
                    Outcome::Cycled(CycleReport {
                        action,
                        record,
                        config,
                        next_action_at,
                        leading: match adopted {
                            ElectionResult::Leader(state) => Some(state.ballot),
                            ElectionResult::Follower(_) => None,
                        },
                        honoured,
                    })
                }
                Err(e) => Outcome::CycleFailed(e),
            }
        }
    }

    fn read_record(
        &self,
        watch: bool,
        with_config: bool,
    ) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let election = self.election.clone();
        let timeout = self.timeout();
        async move {
            let result = db
                .transact(timeout, move |txn| {
                    let election = election.clone();
                    async move {
                        let (config, record) = tokio::join!(
                            async {
                                match with_config {
                                    true => election.read_config(&txn).await.map(Some),
                                    false => Ok(None),
                                }
                            },
                            election.leader_record(&txn)
                        );
                        let armed = watch.then(|| election.watch_leader(&txn));
                        Ok((config?, record?, armed))
                    }
                })
                .await;
            Outcome::Read(result)
        }
    }

    fn resign(&self, expected: crate::ids::Ballot) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let (election, brain) = (self.election.clone(), self.brain.clone());
        let timeout = self.timeout();
        async move {
            let Some(me) = brain.me.clone() else {
                return Outcome::Event(Event::Tick);
            };
            let result = db
                .transact(timeout, move |txn| {
                    let (election, me, brain) = (election.clone(), me.clone(), brain.clone());
                    async move {
                        let outcome = election.resign_leadership(&txn, &me, Some(expected)).await;
                        brain.decided(Event::ResignDecided);
                        outcome
                    }
                })
                .await;
            Outcome::Resigned(expected, result)
        }
    }

    fn leave(&self) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let election = self.election.clone();
        let me = self.brain.me.clone();
        let timeout = self.timeout();
        async move {
            let Some(me) = me else {
                return Outcome::Event(Event::Left(Ok(())));
            };
            let result = db
                .transact(timeout, move |txn| {
                    let (election, me) = (election.clone(), me.clone());
                    async move { election.unregister_candidate(&txn, &me).await }
                })
                .await;
            Outcome::Left(result)
        }
    }

    /// Turns a finished operation into the machine's event, keeping what the executor needs
    /// of it (the error for the log, a watch, a resignation's reply, the shutdown report).
    fn outcome(&mut self, outcome: Outcome) -> Event {
        match outcome {
            Outcome::Event(event) => event,
            Outcome::Registered(Ok(config)) => {
                if let Some(me) = self.me() {
                    tracing::info!(priority = %me.priority(), "registered as a candidate");
                }
                Event::Registered(Ok(config))
            }
            Outcome::Registered(Err(e)) => Event::Registered(Err(self.failure(&e))),
            Outcome::Cycled(report) => {
                log_action(&report);
                Event::CycleCommitted(report)
            }
            Outcome::CycleFailed(e) => Event::CycleFailed(self.failure(&e)),
            Outcome::Read(Ok((config, record, armed))) => {
                let watch = armed.map(|armed| match armed {
                    Ok(w) => {
                        self.watch = Some(w);
                        true
                    }
                    Err(e) => {
                        tracing::info!(error = %error_chain(&e), "leader watch refused; polling every heartbeat");
                        false
                    }
                });
                Event::RecordRead(Ok(RecordRead {
                    record,
                    config,
                    watch,
                }))
            }
            Outcome::Read(Err(e)) => {
                tracing::debug!(error = %error_chain(&e), "could not read the leader record");
                Event::RecordRead(Err(self.failure(&e)))
            }
            Outcome::Resigned(expected, result) => {
                if let Ok(ResignOutcome::Resigned { reserved_for, .. }) = &result {
                    tracing::info!(
                        ballot = expected.get(),
                        reserved_for = reserved_for
                            .as_ref()
                            .map(|r| tracing::field::display(r.id())),
                        "resigned"
                    );
                }
                let event = Event::ResignDone;
                if let Some(reply) = self.resign_replies.pop_front() {
                    let _ = reply.send(result);
                }
                event
            }
            Outcome::Left(result) => {
                let event = Event::Left(result.as_ref().map(|_| ()).map_err(Failure::of));
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
                        self.report.resigned = resigned;
                        self.report.unregistered = true;
                        self.report.error = None;
                    }
                    Err(e) => {
                        let message = error_chain(&e);
                        tracing::warn!(error = %message, "could not unregister; retrying or leaving the registration to go stale");
                        self.report.error = Some(message);
                    }
                }
                event
            }
        }
    }

    fn failure(&mut self, e: &ElectionError) -> Failure {
        self.last_error = Some(error_chain(e));
        Failure::of(e)
    }

    // ----- the other commands ---------------------------------------------------------------

    fn apply_all(&mut self, commands: Vec<Command>) {
        for command in commands {
            self.apply(command);
        }
    }

    /// Carries out a command that does not wait.
    fn apply(&mut self, command: Command) {
        let shared = Arc::clone(self.shared());
        match command {
            Command::IssueGuard { ballot, deadline } => {
                let (Some(me), Some(work)) = (self.brain.me.clone(), shared.work.clone()) else {
                    return;
                };
                let guard = LeadershipGuard::new(ballot, me, deadline, work);
                self.guard = Some(guard.clone());
                shared.guard_tx.send_replace(Some(guard.clone()));
                shared.metrics.is_leader.set(1.0);
                shared.metrics.transition("elected");
                tracing::info!(
                    ballot = ballot.get(),
                    valid_for_ms = ms(deadline.saturating_duration_since(self.brain.clock.now())),
                    "elected leader"
                );
                shared.channels().notify(Notice::Elected(guard));
            }
            Command::SetGuardDeadline(deadline) => {
                if let Some(guard) = self.guard.as_ref() {
                    guard.set_deadline(deadline);
                }
            }
            Command::CloseGuard => {
                if let Some(guard) = self.guard.as_ref() {
                    guard.close();
                }
            }
            Command::RevokeGuard(reason) => {
                if let Some(guard) = self.guard.as_ref() {
                    guard.revoke(reason);
                }
            }
            Command::EndLeadership { ballot, reason } => {
                let Some(guard) = self.guard.take() else {
                    return;
                };
                shared.guard_tx.send_replace(None);
                shared.status.not_leading();
                shared.metrics.is_leader.set(0.0);
                shared.metrics.lease_remaining(std::time::Duration::ZERO);
                shared.metrics.transition(reason.as_str());
                tracing::info!(
                    ballot = ballot.get(),
                    reason = reason.as_str(),
                    tasks_running = guard.tasks_running(),
                    "stopped leading"
                );
                shared.channels().notify(Notice::Stopped(ballot, reason));
                self.ended.push(guard);
            }
            Command::Renewed {
                started,
                lease,
                took,
            } => {
                shared.status.renewed(started, lease);
                if let Some(took) = took {
                    shared.metrics.renew_duration.record(took.as_secs_f64());
                }
            }
            Command::LateRenewal { ballot } => {
                if let Some(me) = self.me() {
                    me.step_down_locally();
                }
                tracing::warn!(
                    ballot = ballot.get(),
                    "a renewal committed after the lease had already ended locally; not resuming"
                );
            }
            Command::StepDownLocally => {
                if let Some(me) = self.me() {
                    me.step_down_locally();
                }
                shared.metrics.is_leader.set(0.0);
            }
            Command::HandoverRequested(requester) => {
                if let Some(guard) = self.guard.clone() {
                    tracing::info!(
                        ballot = guard.ballot().get(),
                        requester = %requester.id(),
                        requester_priority = %requester.priority(),
                        tasks_in_flight = shared.work.as_ref().map_or(0, |w| w.in_flight()),
                        "handover requested"
                    );
                    shared
                        .channels()
                        .notify(Notice::HandoverRequested(requester, guard));
                }
            }
            Command::OperatorRequest(operator) => {
                if let Some(guard) = self.guard.clone() {
                    tracing::info!(
                        ballot = guard.ballot().get(),
                        operator = %operator,
                        tasks_in_flight = shared.work.as_ref().map_or(0, |w| w.in_flight()),
                        "an operator asked this leader to step down"
                    );
                    shared
                        .channels()
                        .notify(Notice::OperatorRequest(operator, guard));
                }
            }
            Command::Publish(change) => shared.channels().publish(change),
            Command::SeenBallot(ballot) => shared.metrics.ballot.set(u64_to_f64(ballot.get())),
            Command::RefreshCandidateCount => self.refresh_candidate_count(),
            Command::State(state) => {
                shared.status.set(state);
                self.update_gauges();
            }
            Command::ConfigChanged(config) => log_config(&config),
            Command::Failed {
                what,
                kind,
                leading,
                warn,
            } => {
                shared.metrics.cycle_failure(kind);
                if leading {
                    shared.metrics.renew_failure(kind);
                }
                if let Some(suppressed) = warn {
                    tracing::warn!(
                        error = self.last_error.as_deref().unwrap_or(kind),
                        kind,
                        leading,
                        suppressed,
                        "{what}"
                    );
                }
            }
            Command::Recovered { failures } => {
                tracing::info!(failures, "transactions succeed again");
            }
            Command::DisarmWatch => self.watch = None,
            Command::RejectResign { current } => {
                if let Some(reply) = self.resign_replies.pop_front() {
                    let _ = reply.send(Ok(ResignOutcome::Rejected(
                        crate::core::ResignRejected::NotLeader { current },
                    )));
                }
            }
            Command::Stop { tasks_finished } => {
                self.report.tasks_finished = tasks_finished;
                self.finish();
            }
            // Waiting commands are carried out by `carry`.
            Command::Register
            | Command::RunCycle
            | Command::ReadRecord { .. }
            | Command::Resign { .. }
            | Command::Leave
            | Command::DrainTasks { .. }
            | Command::SleepUntil(_) => {}
        }
    }

    /// The runner stopped: publish the report, close the streams.
    fn finish(&mut self) {
        if self.alive.clean {
            return;
        }
        self.alive.clean = true;
        self.watch = None;
        let shared = Arc::clone(self.shared());
        shared.status.set(RunnerState::Stopped);
        match self.me() {
            Some(_) => tracing::info!(
                unregistered = self.report.unregistered,
                resigned = self.report.resigned.is_some(),
                "election runner stopped"
            ),
            None => tracing::info!("election observer stopped"),
        }
        if self.me().is_none() {
            self.report.tasks_finished = true;
        }
        shared.close();
        shared.report_tx.send_replace(Some(self.report.clone()));
    }

    fn update_gauges(&self) {
        let remaining = self
            .guard
            .as_ref()
            .map_or(std::time::Duration::ZERO, LeadershipGuard::remaining);
        self.shared().metrics.lease_remaining(remaining);
    }

    /// Counts the live candidates for the gauge, off the loop (a range read, so only when the
    /// leader changes).
    fn refresh_candidate_count(&self) {
        let db = self.db.clone();
        let election = self.election.clone();
        let gauge = self.shared().metrics.candidates.clone();
        let timeout = self.timeout();
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

/// How an operation ended, before it becomes the machine's event.
enum Outcome {
    Event(Event),
    Registered(Result<ElectionConfig, ElectionError>),
    Cycled(CycleReport),
    CycleFailed(ElectionError),
    #[expect(
        clippy::type_complexity,
        reason = "a one-off tuple of what one read returns"
    )]
    Read(
        Result<
            (
                Option<ElectionConfig>,
                crate::record::LeaderRecord,
                Option<Result<Watch, ElectionError>>,
            ),
            ElectionError,
        >,
    ),
    Resigned(crate::ids::Ballot, Result<ResignOutcome, ElectionError>),
    Left(Result<Option<ResignOutcome>, ElectionError>),
}

fn log_action(report: &CycleReport) {
    use crate::core::Action;
    let record = &report.record;
    match report.action {
        Action::RequestedHandover => tracing::info!(
            ballot = record.ballot().get(),
            leader = record.owner().map(|o| tracing::field::display(o.id())),
            "asked the lower-priority leader to hand over"
        ),
        Action::HandedOver | Action::Resigned => tracing::info!(
            ballot = record.ballot().get(),
            reserved_for = record
                .reservation()
                .map(|r| tracing::field::display(r.id())),
            "handed over"
        ),
        _ => {}
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
