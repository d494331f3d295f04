//! Leaving the election: end the leadership, drain guarded work, resign and unregister.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Machine {
    pub(super) fn begin_leaving(&mut self, ctx: &Ctx, reason: StopReason, out: &mut Vec<Command>) {
        // An in-flight transaction (or drain) is abandoned: the executor drops it. Already
        // leaving (after a loss with `OnLoss::Exit`), the step it was taking is taken again.
        self.in_flight = None;
        if matches!(self.phase, Phase::Leaving { .. } | Phase::Stopped) {
            return;
        }
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

    pub(super) fn next_leaving(
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

    pub(super) fn left(&mut self, result: Result<(), Failure>, ctx: &Ctx, out: &mut Vec<Command>) {
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

    pub(super) fn stop(&mut self, out: &mut Vec<Command>) {
        self.phase = Phase::Stopped;
        out.push(Command::DisarmWatch);
        out.push(Command::Stop {
            tasks_finished: self.tasks_finished,
        });
        self.set_state(RunnerState::Stopped, out);
    }
}
