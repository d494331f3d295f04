//! Guards: issued after a confirmed commit, following the belief, revoked when it ends.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Machine {
    /// Ends the leadership if the guard was revoked, the belief is gone, or the deadline has
    /// passed; otherwise keeps the guard's deadline on the belief's.
    pub(super) fn reconcile(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
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

    pub(super) fn end_leadership(&mut self, reason: StopReason, out: &mut Vec<Command>) {
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
            StopReason::HandedOver { to } | StopReason::Ineligible { to } => {
                ChangeReason::SteppedDown {
                    reserved_for: to.clone(),
                }
            }
            StopReason::Resigned
            | StopReason::SteppedDown
            | StopReason::Shutdown
            | StopReason::ElectionsDisabled => ChangeReason::SteppedDown { reserved_for: None },
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
    pub(super) fn observe(
        &mut self,
        record: &LeaderRecord,
        action: Option<Action>,
        out: &mut Vec<Command>,
    ) {
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

    pub(super) fn publish(&mut self, change: LeaderChange, out: &mut Vec<Command>) {
        out.push(Command::Publish(change));
        out.push(Command::RefreshCandidateCount);
    }

    /// Why a leader lost its belief in a cycle that demoted it.
    pub(super) fn stop_reason(
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
            Ok((Action::SteppedDownIneligible, record)) => StopReason::Ineligible {
                to: record.reservation().map(|r| r.id().clone()),
            },
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
    pub(super) fn revoke_unless_believed(
        &mut self,
        ctx: &Ctx,
        reason: StopReason,
        out: &mut Vec<Command>,
    ) {
        let Some(g) = self.guard.as_mut().filter(|g| g.revoked.is_none()) else {
            return;
        };
        if ctx.belief.map(|b| b.ballot) != Some(g.ballot) {
            out.push(Command::RevokeGuard(reason.clone()));
            g.revoked = Some(reason);
        }
    }

    /// No leader keeps a closed guard (docs/design.md §10.6): a cycle that renewed while the guard is
    /// closed, honouring no request and with no resignation waiting, means the request that
    /// closed it was withdrawn (its requester unregistered or died while the work drained) or
    /// the resignation that closed it failed. The leader steps down anyway, reserving for
    /// the best live candidate, its grace counted from when the guard closed.
    pub(super) fn step_down_if_closed(
        &mut self,
        report: &CycleReport,
        ctx: &Ctx,
        out: &mut Vec<Command>,
    ) {
        if report.honoured.is_some()
            || report.ineligible == Some(Ineligible::SteppingDown)
            || self.resigns > 0
            || self.resign_since.is_some()
        {
            return;
        }
        let Some(closed_at) = self
            .live_guard()
            .filter(|g| Some(g.ballot) == report.leading)
            .and_then(|g| g.closed_at)
        else {
            return;
        };
        if report.ineligible == Some(Ineligible::Holding) {
            // Not eligible, and the successor it drained for died or became ineligible:
            // nobody live is eligible, so it holds (docs/design.md §13.3). Stepping down would
            // leave a vacancy nobody eligible can fill.
            self.reopen_when_drained(closed_at, ctx, out);
            return;
        }
        out.push(Command::SteppingDownAnyway);
        self.resigns = 1;
        self.resign_since = Some(closed_at.min(ctx.now));
    }

    /// A leader that holds with a guard closed for a handover that can no longer happen: once
    /// the drained work is idle or the grace has passed, the closed guard ends
    /// ([`StopReason::HandoverWithdrawn`]) and a fresh guard of the same ballot takes new
    /// work at once (no closed guard is kept, docs/design.md §10.6). Until then it waits: the
    /// next cycle is at most a heartbeat away.
    fn reopen_when_drained(&mut self, closed_at: LocalInstant, ctx: &Ctx, out: &mut Vec<Command>) {
        let grace_over = ctx.now >= closed_at.saturating_add(self.config.handover_grace());
        if ctx.work_in_flight && !grace_over {
            return;
        }
        let Some(g) = self.guard.as_mut() else {
            return;
        };
        g.closed_at = None;
        g.resign_asked = false;
        out.push(Command::ReissueGuard {
            ballot: g.ballot,
            deadline: g.deadline,
        });
    }

    /// Moves the live guard's deadline back to the belief's if the belief now ends sooner
    /// (never forward: inside a transaction nothing is confirmed yet).
    pub(super) fn follow_lowered_belief(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        let Some(g) = self.guard.as_mut().filter(|g| g.revoked.is_none()) else {
            return;
        };
        if let Some(b) = ctx.belief.filter(|b| b.ballot == g.ballot) {
            if b.valid_until < g.deadline {
                g.deadline = b.valid_until;
                out.push(Command::SetGuardDeadline(b.valid_until));
            }
        }
    }

    /// The cycle's commit confirmed leadership of `ballot`.
    pub(super) fn leading(
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
                    closed_at: None,
                    resign_asked: false,
                });
                out.push(Command::IssueGuard {
                    ballot,
                    deadline: belief.valid_until,
                });
                out.push(renewed);
            }
        }
    }

    /// A request the cycle honoured, or a step-down because this leader is not eligible: the
    /// guard accepts no new work (the leader drains it, or has stepped down already), and the
    /// leader is told once, before it stops. A leader holding while not eligible is told when
    /// the holding begins (and warned, rate-limited).
    pub(super) fn note_request(&mut self, report: &CycleReport, ctx: &Ctx, out: &mut Vec<Command>) {
        let holding = report.ineligible == Some(Ineligible::Holding);
        if holding && !self.holding_ineligible {
            let warn = self.holding_warn.failure(ctx.now).is_some();
            out.push(Command::HoldingIneligible { warn });
        }
        self.holding_ineligible = holding;
        let told = match (&report.honoured, report.ineligible) {
            (Some(Party::Candidate(n)), _) => Command::HandoverRequested(n.clone()),
            (Some(Party::Operator(id)), _) => Command::OperatorRequest(id.clone()),
            (None, Some(Ineligible::SteppingDown)) => Command::SteppingDownIneligible,
            (None, _) => return,
        };
        let Some(g) = self.guard.as_mut() else {
            return;
        };
        if g.closed_at.is_some() {
            return;
        }
        g.closed_at = Some(ctx.now);
        if g.revoked.is_none() {
            out.push(Command::CloseGuard);
        }
        out.push(told);
    }
}
