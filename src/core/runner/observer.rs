//! Observers: poll (or watch) the leader record, and report a lapse by the lapse rule.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Machine {
    pub(super) fn next_observer(&mut self, ctx: &Ctx, out: &mut Vec<Command>) {
        let due = self.run_now || ctx.now >= self.next_cycle_at;
        if due {
            self.run_now = false;
            let watch = self.may_arm_watch(ctx);
            out.push(Command::ReadRecord {
                watch,
                config: true,
            });
            self.in_flight = Some(InFlight::Read);
            return;
        }
        let mut wake = self.next_cycle_at;
        if let (Some(obs), Some(rec)) = (&self.observed, self.view.record()) {
            if rec.owner().is_some() {
                let lapse = crate::core::lapse_at(obs.first_seen, rec.lease_duration());
                if lapse > ctx.now {
                    wake = wake.min(lapse);
                }
            }
        }
        out.push(Command::SleepUntil(wake));
    }

    pub(super) fn next_poll_now(&mut self) {
        self.run_now = true;
    }

    pub(super) fn observer_read(&mut self, read: RecordRead, ctx: &Ctx, out: &mut Vec<Command>) {
        if let Some(config) = read.config {
            self.set_config(config, out);
        }
        // Timed from a reading taken after the read, as the protocol's followers do.
        Observed::note(&mut self.observed, &read.record, ctx.now);
        let lapsed = read.record.owner().is_some()
            && self
                .observed
                .as_ref()
                .is_some_and(|o| o.lapsed(&read.record, ctx.now));
        out.push(Command::SeenBallot(read.record.ballot()));
        if let Some(change) = self.view.observe(
            &read.record,
            None,
            lapsed,
            ChangeReason::LeaseLapsed,
            ChangeReason::Discovered,
        ) {
            self.publish(change, out);
        }
        self.backoff.reset();
        if let Some(failures) = self.warn.success() {
            out.push(Command::Recovered { failures });
        }
        self.set_state(RunnerState::NotParticipating, out);
        let heartbeat = self.config.heartbeat_interval();
        self.next_cycle_at = ctx.now.saturating_add(jittered(&mut self.rng, heartbeat));
    }

    pub(super) fn observer_failed(&mut self, f: &Failure, ctx: &Ctx, out: &mut Vec<Command>) {
        let warn = if f.not_initialized {
            None
        } else {
            self.set_state(RunnerState::Error, out);
            self.warn.failure(ctx.now)
        };
        out.push(Command::Failed {
            what: "reading the leader failed; retrying",
            kind: f.kind,
            leading: false,
            warn,
        });
        let heartbeat = self.config.heartbeat_interval();
        self.next_cycle_at = ctx
            .now
            .saturating_add(self.backoff.next(&mut self.rng, heartbeat));
    }
}
