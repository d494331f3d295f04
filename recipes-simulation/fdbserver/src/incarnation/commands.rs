//! The moment the machine is told of, and the commands carried out at once (guards, a local
//! step-down), also inside a transaction before its commit.

use std::cell::RefCell;
use std::rc::Rc;

use fdb_leader_election::runner::StopReason;
use fdb_leader_election::runner::machine::{Belief, Command, Ctx, Event};
use fdb_leader_election::{Ballot, Candidate, LocalInstant};
use foundationdb_simulation::Severity;

use super::{Brain, Guard, Setup};

/// The moment of an event: the candidate's clock, its belief, and whether work is in flight.
pub(super) fn ctx_of(candidate: &Candidate, work_in_flight: bool) -> Ctx {
    let belief = candidate.leadership().map(|l| Belief {
        ballot: l.ballot,
        valid_until: l.valid_until,
    });
    Ctx::new(candidate.now(), belief, work_in_flight)
}

/// The candidate's belief: the ballot, and when it ends on its clock.
pub(super) fn belief_of(candidate: &Candidate) -> Option<(Ballot, LocalInstant)> {
    candidate.leadership().map(|l| (l.ballot, l.valid_until))
}

/// Inside a transaction, before its commit: feeds the machine what the election decided, and
/// carries out at once the revoke (or the shorter deadline) it answers with.
pub(super) fn decided(s: &Setup, brain: &Rc<RefCell<Brain>>, event: Event) {
    let ctx = ctx_of(&s.candidate, s.busy.get());
    let commands = brain.borrow_mut().machine.handle(event, ctx);
    s.beliefs
        .borrow_mut()
        .sample(&s.tester, s.sim.now(), belief_of(&s.candidate));
    for command in commands {
        match command {
            Command::RevokeGuard(_) | Command::SetGuardDeadline(_) => apply(s, brain, command),
            _ => {}
        }
    }
}

/// Carries out a command that does not wait.
pub(super) fn apply(s: &Setup, brain: &Rc<RefCell<Brain>>, command: Command) {
    let now = s.candidate.now();
    let mut b = brain.borrow_mut();
    match command {
        Command::IssueGuard { ballot, deadline } | Command::ReissueGuard { ballot, deadline } => {
            s.sim.trace(
                Severity::Info,
                "LeaderElectionGuard",
                &[
                    ("Candidate".into(), s.candidate.id().to_string()),
                    ("Ballot".into(), ballot.get().to_string()),
                    ("ValidFor".into(), format!("{:.3}", s.clock.until(deadline))),
                ],
            );
            s.candidate.set_guard_closed_at(None);
            b.guard = Some(Guard {
                ballot,
                deadline,
                closed: false,
                revoked: false,
            });
            s.tester.borrow_mut().stats.guards += 1;
        }
        Command::SetGuardDeadline(deadline) => {
            if let Some(g) = b.guard.as_mut() {
                g.deadline = deadline;
            }
        }
        Command::CloseGuard => {
            if let Some(g) = b.guard.as_mut() {
                g.closed = true;
            }
            s.candidate.set_guard_closed_at(Some(now));
            s.tester.borrow_mut().stats.drains += 1;
        }
        Command::RevokeGuard(_) => {
            if let Some(g) = b.guard.as_mut() {
                g.revoked = true;
            }
        }
        Command::EndLeadership { reason, .. } => {
            b.guard = None;
            s.candidate.set_guard_closed_at(None);
            if matches!(reason, StopReason::HandedOver { .. }) {
                s.tester.borrow_mut().stats.handovers += 1;
            }
        }
        Command::LateRenewal { .. } | Command::StepDownLocally => s.candidate.step_down_locally(),
        // Publication, metrics, logs: nothing to carry out here.
        _ => {}
    }
}
