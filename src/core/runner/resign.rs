//! Resignations asked for by the application: wait for guarded work, within the grace.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Machine {
    pub(super) fn resign_requested(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        if self.me.is_none() || !matches!(self.phase, Phase::Participating) {
            return;
        }
        self.resigns = self.resigns.saturating_add(1);
        // The application asks: a resignation that ends this guard is its own.
        if let Some(g) = self.guard.as_mut() {
            g.resign_asked = true;
        }
        if self.resign_since.is_none() {
            self.start_resign(ctx, out);
        }
    }

    /// The first resignation waiting: close the guard to new work and start the grace; or
    /// reject it at once if this process does not lead.
    pub(super) fn start_resign(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        match self.guard.as_mut().filter(|g| g.revoked.is_none()) {
            Some(g) => {
                if g.closed_at.is_none() {
                    g.closed_at = Some(ctx.now);
                    out.push(Command::CloseGuard);
                }
                self.resign_since = Some(ctx.now);
            }
            None => {
                self.resigns = self.resigns.saturating_sub(1);
                let current = self
                    .view
                    .record()
                    .and_then(|r| r.owner().map(|o| o.id().clone()));
                out.push(Command::RejectResign { current });
            }
        }
    }

    /// The waiting resignation: its transaction starts (in flight), it keeps waiting for busy
    /// work within the grace, or it is rejected because the leadership ended.
    pub(super) fn resign_due(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        if self.resign_since.is_none() {
            self.start_resign(ctx, out);
        }
        let Some(since) = self.resign_since else {
            return; // rejected at once
        };
        let Some(ballot) = self.live_guard().map(|g| g.ballot) else {
            // The leadership ended while waiting.
            self.resign_since = None;
            self.resigns = self.resigns.saturating_sub(1);
            out.push(Command::RejectResign {
                current: self
                    .view
                    .record()
                    .and_then(|r| r.owner().map(|o| o.id().clone())),
            });
            return;
        };
        let grace_over = ctx.now >= since.saturating_add(self.config.handover_grace());
        if ctx.work_in_flight && !grace_over {
            return;
        }
        self.resigns = self.resigns.saturating_sub(1);
        out.push(Command::Resign { expected: ballot });
        self.in_flight = Some(InFlight::Resign);
    }
}
