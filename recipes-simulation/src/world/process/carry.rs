//! The simulation's executor: it feeds a process's machine events in simulated time and
//! carries out its commands (transactions whose commits land at later events, sleeps, guards,
//! watches), as `runner::Runner`'s executor does with tokio.

use fdb_leader_election::LocalInstant;
use fdb_leader_election::runner::machine::{Belief, Command, Ctx, Event as In};
use rand::Rng;

use super::{OpKind, Status, bounds};
use crate::oracles::Closed;
use crate::plants::Plant;
use crate::time::{local, nanos};
use crate::world::World;

impl World {
    /// The process's wake-up: its machine starts, or looks again.
    pub(in crate::world) fn control(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.wake_pending = false;
        if p.status == Status::Dead {
            return;
        }
        let first = !std::mem::replace(&mut p.started, true);
        self.feed(pid, if first { In::Start } else { In::Tick });
    }

    /// Feeds `pid`'s machine one event and carries out what it says.
    pub(in crate::world) fn feed(&mut self, pid: usize, event: In) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.status == Status::Dead {
            return;
        }
        let busy = p.busy();
        let mut ctx = Ctx::of(Some(&p.candidate), &p.clock, busy);
        if self.plant == Some(Plant::BeliefShorterThanMargin) {
            // The planted defect: the machine is told of a belief that ends earlier, by the
            // renewal margin and half a heartbeat, than the candidate's.
            let config = p.machine.config();
            let cut = config.renewal_margin().saturating_add(
                config
                    .heartbeat_interval()
                    .checked_div(2)
                    .unwrap_or_default(),
            );
            let belief = p.candidate.leadership().map(|l| Belief {
                ballot: l.ballot,
                valid_until: LocalInstant::from_origin(
                    l.valid_until.since_origin().saturating_sub(cut),
                ),
            });
            ctx = Ctx::new(p.candidate.now(), belief, busy);
        }
        let reading = matches!(event, In::RecordRead(_));
        let outer = std::mem::replace(&mut p.reading, reading);
        let commands = p.machine.handle(event, ctx);
        for command in commands {
            self.carry(pid, command);
        }
        if let Some(p) = self.procs.get_mut(pid) {
            p.reading = outer;
        }
    }

    /// Carries out one of the machine's commands.
    fn carry(&mut self, pid: usize, command: Command) {
        match command {
            Command::Register => self.start_op(pid, OpKind::Register),
            Command::RunCycle => {
                self.cycle_starts(pid);
                self.start_op(pid, OpKind::Cycle);
            }
            Command::Resign { expected } => {
                let dropped = self.procs.get_mut(pid).is_some_and(|p| {
                    p.cadence.excuse();
                    std::mem::take(&mut p.drop_resign)
                });
                if dropped {
                    // Plant `keep-closed-guard`: the resignation that follows
                    // `SteppingDownAnyway` is never run; the executor's timeout reports it done
                    // (as the machine hears of any resignation), and the leader renews on with
                    // its closed guard.
                    let label = self.label(pid);
                    self.log(format!("{label} resignation dropped (plant)"));
                    self.start_dropped(pid);
                    return;
                }
                self.start_op_with(pid, OpKind::Resign, Some(expected.get()));
            }
            Command::Leave => {
                if let Some(p) = self.procs.get_mut(pid) {
                    p.cadence.excuse();
                }
                self.start_op(pid, OpKind::Leave);
            }
            Command::ReadRecord { watch, .. } => self.read_record(pid, watch),
            Command::DisarmWatch => {
                if let Some(p) = self.procs.get_mut(pid) {
                    p.watch = None;
                }
            }
            Command::DrainTasks { bound } => self.drain(pid, nanos(bound)),
            Command::SleepUntil(at) => {
                if self.plant == Some(Plant::LostWakeup) && self.rng.random_ratio(1, 50) {
                    return;
                }
                let Some(p) = self.procs.get(pid) else {
                    return;
                };
                let now = p.clock.local_now();
                let at = self.planted_wait(pid, nanos(at.since_origin()));
                let wait = at.saturating_sub(now).max(1);
                let d = self.local_delay(pid, wait);
                self.schedule_control(pid, d.max(1));
            }
            Command::ReissueGuard { ballot, deadline } => {
                // The drained guard ends; a fresh one of the same ballot takes new work.
                self.revoke(
                    pid,
                    &fdb_leader_election::runner::StopReason::HandoverWithdrawn,
                );
                self.issue_guard(pid, ballot, deadline);
            }
            Command::IssueGuard { ballot, deadline } => self.issue_guard(pid, ballot, deadline),
            Command::SetGuardDeadline(deadline) => {
                self.set_guard_deadline(pid, nanos(deadline.since_origin()))
            }
            Command::CloseGuard => {
                let forgets = self.plant == Some(Plant::DrainFromCycleStart);
                let stays_open = self.plant == Some(Plant::OpenGuardInDrain);
                if let Some(p) = self.procs.get_mut(pid) {
                    let now = p.clock.local_now();
                    // As the runner does: the grace of a handover counts from here (plant
                    // `drain-from-cycle-start`: from the start of the cycle that closed it).
                    if !forgets {
                        p.candidate.set_guard_closed_at(Some(local(now)));
                    }
                    let bounds = bounds(&p.machine);
                    let stored_grace = self.stored_grace;
                    // Plant `open-guard-in-drain`: the guard is never closed.
                    if let Some(g) = p.guard.as_mut().filter(|_| !stays_open) {
                        g.closed = true;
                        let issued_at = g.issued_at;
                        g.closed_since
                            .get_or_insert_with(|| Closed::new(now, issued_at, bounds))
                            .lower_grace(stored_grace);
                    }
                }
            }
            Command::HandoverRequested(requester) => self.honours_request(pid, requester.id()),
            Command::SteppingDownAnyway => self.stepping_down_anyway(pid),
            Command::Renewed {
                started,
                took: Some(_),
                ..
            } => self.renewed(pid, nanos(started.since_origin())),
            Command::RevokeGuard(reason) => {
                if let Some(p) = self.procs.get_mut(pid) {
                    p.cadence.excuse();
                }
                self.revoke(pid, &reason);
            }
            Command::EndLeadership { ballot, reason } => {
                let label = self.label(pid);
                self.drain_served(pid, &reason);
                if let Some(p) = self.procs.get_mut(pid) {
                    p.cadence.excuse();
                    p.candidate.set_guard_closed_at(None);
                    if let Some(g) = p.guard.as_mut() {
                        g.revoked = true;
                    }
                    p.guard = None;
                    p.held_revoke = false;
                    p.held_deadline = None;
                }
                self.log(format!(
                    "{label} leadership b{} ended: {}",
                    ballot.get(),
                    reason.as_str()
                ));
                self.leadership_ended(pid);
            }
            Command::ConfigChanged(config) => {
                self.checks_config(pid, nanos(config.lease_duration()));
            }
            Command::HoldingIneligible { .. } => {
                self.stats.health.holding = self.stats.health.holding.saturating_add(1);
            }
            Command::LateRenewal { .. } | Command::StepDownLocally => {
                if let Some(p) = self.procs.get(pid) {
                    p.candidate.step_down_locally();
                }
            }
            Command::RejectResign { .. } => {
                let label = self.label(pid);
                self.log(format!("{label} resign rejected: not leading"));
            }
            Command::Stop { .. } => self.exit(pid, "left the election (graceful shutdown)"),
            // Publication, metrics and logs: nothing to carry out in the simulation.
            _ => {}
        }
    }
}
