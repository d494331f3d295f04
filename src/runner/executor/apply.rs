//! The commands that do not wait: guards, publication, health, metrics and logs.

#[allow(clippy::wildcard_imports)]
use super::*;

impl<D: ElectionDatabase> Executor<D> {
    // ----- the other commands ---------------------------------------------------------------

    pub(super) fn apply_all(&mut self, commands: Vec<Command>) {
        for command in commands {
            self.apply(command);
        }
    }

    /// Carries out a command that does not wait.
    pub(super) fn apply(&mut self, command: Command) {
        let shared = Arc::clone(self.shared());
        match command {
            Command::IssueGuard { ballot, deadline } => {
                let (Some(me), Some(work)) = (self.brain.me.clone(), shared.work.clone()) else {
                    return;
                };
                me.set_guard_closed_at(None);
                let guard = LeadershipGuard::new(ballot, me, self.election.clone(), deadline, work);
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
            Command::ReissueGuard { ballot, deadline } => {
                let (Some(me), Some(work)) = (self.brain.me.clone(), shared.work.clone()) else {
                    return;
                };
                me.set_guard_closed_at(None);
                let reason = StopReason::HandoverWithdrawn;
                if let Some(old) = self.guard.take() {
                    old.revoke(reason.clone());
                    shared
                        .channels()
                        .notify(Notice::Stopped(ballot, reason.clone()));
                    self.ended.push(old);
                }
                let guard = LeadershipGuard::new(ballot, me, self.election.clone(), deadline, work);
                self.guard = Some(guard.clone());
                shared.guard_tx.send_replace(Some(guard.clone()));
                shared.metrics.transition(reason.as_str());
                tracing::info!(
                    ballot = ballot.get(),
                    "the handover was withdrawn (nobody eligible to take over): leading on, \
                     taking new work on a fresh guard"
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
                // The grace of a handover counts from here (docs/design.md §10.6).
                if let Some(me) = self.me() {
                    me.set_guard_closed_at(Some(self.brain.clock.now()));
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
                if let Some(me) = self.me() {
                    me.set_guard_closed_at(None);
                }
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
            Command::ConfigChanged(config) => {
                shared.lease_tx.send_if_modified(|lease| {
                    let changed = *lease != config.lease_duration();
                    *lease = config.lease_duration();
                    changed
                });
                log_config(&config);
            }
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
            Command::SteppingDownIneligible => {
                tracing::info!(
                    eligibility = %self.eligibility(),
                    "not eligible to lead: stepping down to the best live eligible candidate \
                     once the guarded work is done (at most the handover grace)"
                );
            }
            Command::HoldingIneligible { warn } => {
                if warn {
                    tracing::warn!(
                        eligibility = %self.eligibility(),
                        "not eligible to lead, and no live candidate is: keeping the \
                         leadership (the hold policy) and handing it over once one is"
                    );
                }
            }
            Command::SteppingDownAnyway => {
                tracing::warn!(
                    "the guard is closed (a handover request withdrawn, or a resignation that \
                     failed): stepping down anyway"
                );
            }
            Command::RejectResign { current } => {
                if let Some(reply) = self.resign_replies.pop_front() {
                    let _ = reply.send(Ok(ResignOutcome::Rejected(
                        crate::core::resign::ResignRejected::NotLeader { current },
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

    /// Publishes the candidate's eligibility (its own, unless the operator's mark the last
    /// cycle read excludes it): the handles, the gauge, the callbacks and the log.
    pub(super) fn publish_eligibility(&mut self) {
        let Some(me) = self.me() else {
            return;
        };
        let now = super::super::checks::effective(me.eligibility(), &self.mark);
        let first = !std::mem::replace(&mut self.eligibility_logged, true);
        let shared = self.shared();
        shared
            .metrics
            .eligible
            .set(if now.is_eligible() { 1.0 } else { 0.0 });
        let changed = shared.eligibility_tx.send_if_modified(|e| {
            let changed = *e != now;
            *e = now.clone();
            changed
        });
        let ineligible_start = first && !now.is_eligible();
        if !changed && !ineligible_start {
            return;
        }
        match now.reason() {
            None => tracing::info!("eligible to lead"),
            Some(reason) => tracing::info!(reason, "not eligible to lead"),
        }
        if changed {
            shared.channels().notify(Notice::EligibilityChanged(now));
        }
    }

    /// The runner stopped: publish the report, close the streams.
    pub(super) fn finish(&mut self) {
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

    pub(super) fn update_gauges(&self) {
        let remaining = self
            .guard
            .as_ref()
            .map_or(std::time::Duration::ZERO, LeadershipGuard::remaining);
        self.shared().metrics.lease_remaining(remaining);
    }

    /// Counts the live candidates for the gauge, off the loop (a range read, so only when the
    /// leader changes).
    pub(super) fn refresh_candidate_count(&self) {
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
