//! The event loop: each event in true-time order, handed to what it concerns (an event of a
//! paused process waits for the pause's end), the oracles run after each.

use super::{Actor, World};
use crate::events::Event;

impl World {
    /// Runs events until the end, or until an oracle finds a violation.
    pub(super) fn run(&mut self) {
        while let Some((at, event)) = self.queue.pop() {
            self.now = at.max(self.now);
            self.time.set(self.now);
            self.stats.events = self.stats.events.saturating_add(1);
            let end = event == Event::End;
            self.dispatch(event);
            if end {
                self.finish();
            }
            self.check();
            if self.failed.is_some() || end {
                break;
            }
        }
        self.stats.sim_ns = self.now;
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Control { pid, epoch } => {
                if self.defer_if_paused(pid, event) {
                    return;
                }
                if self.procs.get(pid).is_some_and(|p| p.ctl_epoch == epoch) {
                    self.control(pid);
                }
            }
            Event::Work { pid, epoch, step } => {
                if self.defer_if_paused(pid, event) {
                    return;
                }
                if self.procs.get(pid).is_some_and(|p| p.work_epoch == epoch) {
                    self.work(pid, step);
                }
            }
            Event::Commit { token } => {
                let paused_owner = match self.pending.get(&token) {
                    Some(p) if !p.zombie => match p.actor {
                        Actor::Proc(pid) => Some(pid),
                        Actor::Operator => None,
                    },
                    _ => None,
                };
                if let Some(pid) = paused_owner {
                    if self.defer_if_paused(pid, event) {
                        return;
                    }
                }
                self.commit(token);
            }
            Event::Reply { token } => {
                let owner = self.replies.get(&token).map(|r| r.pid);
                if let Some(pid) = owner {
                    if self.defer_if_paused(pid, event) {
                        return;
                    }
                }
                self.late_reply(token);
            }
            Event::Timeout { pid, op } => {
                if self.defer_if_paused(pid, event) {
                    return;
                }
                self.op_timeout(pid, op);
            }
            Event::WatchFired { pid, ok } => {
                if self.defer_if_paused(pid, event) {
                    return;
                }
                self.watch_fired(pid, ok);
            }
            Event::DrainBound { pid, epoch } => {
                if self.defer_if_paused(pid, event) {
                    return;
                }
                self.drain_bound(pid, epoch);
            }
            Event::Check { pid, epoch, leader } => {
                if !self.defer_if_paused(pid, event) {
                    self.run_check(pid, epoch, leader);
                }
            }
            Event::Answer {
                pid,
                epoch,
                leader,
                answer,
            } => {
                if !self.defer_if_paused(pid, event) {
                    self.answer(pid, epoch, leader, answer);
                }
            }
            Event::HealthWake { pid, epoch } => {
                if !self.defer_if_paused(pid, event) {
                    self.health_wake(pid, epoch);
                }
            }
            Event::Chaos(c) => self.chaos(c),
            Event::Operator(step) => self.operator(step),
            Event::Quiet => self.begin_quiet(),
            Event::Deadline | Event::End => {}
        }
    }

    /// Re-queues `event` at the end of its process's pause; returns whether it did.
    fn defer_if_paused(&mut self, pid: usize, event: Event) -> bool {
        let until = self.procs.get(pid).map_or(0, |p| p.paused_until);
        if until > self.now {
            self.queue.push(until, event);
            true
        } else {
            false
        }
    }
}
