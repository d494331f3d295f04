//! The machine's handling of finished transactions: registration, cycles, reads, watches.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Machine {
    pub(super) fn registered_done(
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

    pub(super) fn cycle_decided(
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
        // A shorter lease this cycle writes capped the belief before its commit: the guard's
        // deadline moves with it now, before the commit can apply, not when the reply comes
        // (which may be as late as the transaction timeout of the old configuration).
        self.follow_lowered_belief(ctx, out);
    }

    pub(super) fn cycle_committed(
        &mut self,
        report: CycleReport,
        ctx: &Ctx,
        out: &mut Vec<Command>,
    ) {
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
        self.note_request(&report, ctx, out);
        let decided = out.len();
        if let Some(ballot) = report.leading {
            self.leading(ballot, started, report.action, ctx, out);
        }
        self.step_down_if_closed(&report, ctx, out);
        self.observe(&report.record, Some(report.action), out);
        issue_after_publishing(out, decided);
        self.reconcile(ctx, out);
        self.update_state(out);
    }

    pub(super) fn cycle_failed(&mut self, failure: &Failure, ctx: &Ctx, out: &mut Vec<Command>) {
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

    pub(super) fn record_read(
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

    pub(super) fn watch_fired(&mut self, fired: Result<(), Failure>, ctx: &Ctx) {
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
}

/// Moves a guard issued among `out[from..]` after the last leader change published there:
/// whoever the guard wakes (`Runner::elected`) finds the published leader (`Runner::leader`)
/// already naming it.
fn issue_after_publishing(out: &mut Vec<Command>, from: usize) {
    let tail = out.get(from..).unwrap_or_default();
    let issued = tail
        .iter()
        .position(|c| matches!(c, Command::IssueGuard { .. }));
    let published = tail.iter().rposition(|c| matches!(c, Command::Publish(_)));
    if let (Some(issued), Some(published)) = (issued, published) {
        if issued < published {
            // After the removal the change sits at `published - 1`: the guard goes right after it.
            let guard = out.remove(from.saturating_add(issued));
            out.insert(from.saturating_add(published), guard);
        }
    }
}
