//! What the machine does next, once an event is handled: run a cycle (or register), drain,
//! read the record with a watch, or sleep until something is due.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Machine {
    pub(super) fn next(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
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
        if self.resigns > 0 {
            // A resignation starts its transaction, waits for busy work (cycles go on
            // meanwhile), or is rejected (and the machine goes on as before).
            self.resign_due(ctx, out);
            if self.in_flight.is_some() {
                return;
            }
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
    pub(super) fn due_at(&self) -> LocalInstant {
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
            // Renew before the lease runs out, leaving room for one attempt and some slack
            // (the same margin validation checks, `ElectionConfig::renewal_margin`).
            if !self.failing {
                due = due.min(before(g.deadline, self.config.renewal_margin()));
            }
        }
        due
    }

    /// Whether the leader record carries this candidate's handover request (the leader will
    /// write a vacancy reserved for it at its next cycle).
    pub(super) fn awaiting_handover(&self) -> bool {
        self.view
            .record()
            .and_then(LeaderRecord::handover_request)
            .is_some_and(|h| Some(h.id()) == self.me.as_ref())
    }

    pub(super) fn wants_watch(&self, ctx: &Ctx) -> bool {
        self.registered && self.may_arm_watch(ctx)
    }

    /// Whether a watch may be armed now: none is armed, and a refused or failed one is not
    /// waiting for its retry time (candidates and observers alike).
    pub(super) fn may_arm_watch(&self, ctx: &Ctx) -> bool {
        !self.watch_armed && self.watch_retry_at.is_none_or(|t| ctx.now >= t)
    }

    pub(super) fn drain_bound(&self) -> Duration {
        self.stop_timeout
            .unwrap_or_else(|| self.config.heartbeat_interval())
    }
}
