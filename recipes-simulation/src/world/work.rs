//! Guarded leader work: tasks that run under the leadership guard the machine issued, as
//! `LeadershipGuard::spawn` runs them.
//!
//! Every half heartbeat a process's work loop reaches an await point. If its guard accepts
//! work (not cancelled, not closed for a handover, before its deadline) a task starts with the
//! guard's ballot as its token: oracle 8 checks, against true time, that the candidate still
//! believes in that ballot whenever a guarded task runs. Then comes a synchronous section (no
//! await point, so nothing can cancel it; sometimes a stop-the-world pause falls inside it;
//! one in eight lasts a quarter of a heartbeat to two, while the process runs on), after
//! which the task opens two transactions:
//!
//! - the *fenced* one: `LeaderElection::fence(&txn, token)`, then a read-modify-write of the
//!   protected register (ballot, sequence) and the fenced counter;
//! - the *unfenced shadow*: the same read-modify-write of a separate counter, without the fence.
//!
//! Both read their counter with a snapshot read, as a leader that trusts its leadership would,
//! so only the fence stands between a stale leader and a lost update. Both commit at the same
//! later event.

use fdb_leader_election::runner::machine::Event as In;
use fdb_leader_election::{Ballot, ElectionError, ElectionTxn, ReadMode};
use rand::Rng;

use super::{Actor, Kind, Pending, Status, World};
use crate::events::{Event, WorkStep};
use crate::history::{Entry, Op};
use crate::oracles::{OracleId, Violation};
use crate::plants::Plant;
use crate::time::secs;
use crate::wire;

impl World {
    /// Starts the work loop of a process that was handed a guard (a newer loop supersedes).
    pub(super) fn start_work_loop(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if p.task_ballot.is_some() {
            return; // the task in flight reschedules the loop when it ends
        }
        p.work_epoch = p.work_epoch.saturating_add(1);
        let epoch = p.work_epoch;
        let d = self.between(0, self.params.heartbeat / 2);
        self.queue.push(
            self.now.saturating_add(d),
            Event::Work {
                pid,
                epoch,
                step: WorkStep::Check,
            },
        );
    }

    /// One step of `pid`'s work loop.
    pub(super) fn work(&mut self, pid: usize, step: WorkStep) {
        let Some(p) = self.procs.get(pid) else {
            return;
        };
        if p.status == Status::Dead {
            return;
        }
        match step {
            WorkStep::Check => self.work_check(pid),
            WorkStep::Act { token } => self.work_act(pid, token),
            WorkStep::Next { token } => self.work_next(pid, token),
        }
    }

    fn schedule_work(&mut self, pid: usize, delay: u64, step: WorkStep) {
        let Some(p) = self.procs.get(pid) else {
            return;
        };
        let epoch = p.work_epoch;
        self.queue.push(
            self.now.saturating_add(delay),
            Event::Work { pid, epoch, step },
        );
    }

    fn next_check(&mut self, pid: usize) {
        let hb = self.params.heartbeat;
        let local = self.between(hb.saturating_mul(2) / 5, hb / 2);
        let d = self.local_delay(pid, local);
        self.schedule_work(pid, d, WorkStep::Check);
    }

    /// The ballot of `pid`'s guard if it accepts work now (what `LeadershipGuard::spawn`
    /// checks: not cancelled, not closed for a handover, before its deadline).
    pub(super) fn guard_token(&self, pid: usize) -> Option<u64> {
        let p = self.procs.get(pid)?;
        let g = p.guard.as_ref()?;
        let now = p.clock.local_now();
        (!g.cancelled_at(now) && !g.closed && p.candidate.fencing_token().is_some())
            .then_some(g.ballot)
    }

    /// Oracle 8: guarded work runs only while its guard is valid, against true time: the
    /// candidate must believe in the task's ballot right now.
    pub(super) fn check_guarded_step(&mut self, pid: usize, token: u64, what: &str) {
        if self.plant == Some(Plant::ActWithoutLeaseCheck) {
            return; // that plant skips the guard altogether; oracle 1 is its target
        }
        let Some(p) = self.procs.get(pid) else {
            return;
        };
        let believes = p.candidate.fencing_token() == Some(Ballot::new(token));
        if !believes {
            let label = p.label.clone();
            let belief = p
                .candidate
                .fencing_token()
                .map_or_else(|| "no ballot".to_owned(), |b| format!("ballot {b}"));
            self.found.push(Violation::new(
                OracleId::Guard,
                format!(
                    "{label} ran {what} under the guard of ballot {token} at true time {} while \
                     it believed {belief}",
                    secs(self.now)
                ),
            ));
        }
    }

    /// Whether fenced work `pid` composed into a cycle's transaction has yet to commit (or be
    /// dropped): one writer of the counter at a time per process, as its snapshot read needs.
    pub(super) fn composed_work_pending(&self, pid: usize) -> bool {
        self.pending.values().any(|p| {
            p.actor == Actor::Proc(pid)
                && p.entry.register.is_some()
                && !matches!(p.kind, Kind::Work)
        })
    }

    /// The next sequence number of `pid`'s protected-register writes.
    pub(super) fn next_work_seq(&mut self, pid: usize) -> u64 {
        let Some(p) = self.procs.get_mut(pid) else {
            return 0;
        };
        let seq = p.work_seq;
        p.work_seq = seq.saturating_add(1);
        seq
    }

    /// An await point of the work loop: start a guarded task if the guard accepts work.
    fn work_check(&mut self, pid: usize) {
        let shutting =
            self.procs.get(pid).is_none_or(|p| p.shutdown) || self.composed_work_pending(pid);
        let token = if self.plant == Some(Plant::ActWithoutLeaseCheck) {
            self.procs.get(pid).and_then(|p| p.cached_token)
        } else {
            self.guard_token(pid)
        };
        let Some(token) = token.filter(|_| !shutting) else {
            self.next_check(pid);
            return;
        };
        // A task does one to four pieces of work, with an await point between each two.
        let pieces = self.rng.random_range(1..=4u32);
        if let Some(p) = self.procs.get_mut(pid) {
            p.task_ballot = Some(token);
            p.task_left = pieces.saturating_sub(1);
            p.candidate.set_busy(true);
        }
        self.stats.guarded_tasks = self.stats.guarded_tasks.saturating_add(1);
        self.check_guarded_step(pid, token, "a guarded task");
        // Now and then the application asks its leader to resign.
        if !self.quiet && self.rng.random_ratio(1, 150) {
            self.request_resign(pid);
        }
        // A synchronous section: a stop-the-world pause may fall between the check and the
        // fenced write, and nothing cancels the task meanwhile.
        if !self.quiet && self.rng.random_ratio(1, 25) {
            let d = self.leases(500, crate::params::MAX_FAULT_LEASES.saturating_mul(1_000));
            self.pause(pid, d, true);
        }
        // Most sections take up to a millisecond; one in eight is long (a quarter of a
        // heartbeat to two), the process running on meanwhile: the guard may be shortened,
        // closed or revoked under it, and a handover or resignation waits for it.
        let d = if self.rng.random_ratio(1, 4) {
            self.stats.long_sections = self.stats.long_sections.saturating_add(1);
            let hb = self.params.heartbeat;
            self.between(hb / 4, hb.saturating_mul(2))
        } else {
            self.between(0, 1_000_000)
        };
        self.schedule_work(pid, d, WorkStep::Act { token });
    }

    /// The end of the task's synchronous section: its transactions.
    fn work_act(&mut self, pid: usize, token: u64) {
        let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
            return;
        };
        let label = self.label(pid);
        let prio = cand.priority().get();
        let id = Some(cand.id().to_string());
        let seq = self.next_work_seq(pid);
        let fenced = self.plant != Some(Plant::UnfencedLeaderWork);
        let election = self.election.clone();

        // The fenced transaction.
        let work = self.open(Actor::Proc(pid));
        let read = self.rt.block_on(async {
            if fenced {
                election.fence(&work, Ballot::new(token)).await?;
            }
            let counter = work.get(wire::COUNTER_KEY, ReadMode::Snapshot).await?;
            Ok::<_, ElectionError>(wire::decode_u64(counter.as_deref()).unwrap_or(0))
        });
        let mut pending = Vec::new();
        match read {
            Ok(counter) => {
                let next = counter.saturating_add(1);
                work.set(wire::REGISTER_KEY, &wire::encode_register(token, seq));
                work.set(wire::COUNTER_KEY, &wire::encode_u64(next));
                let mut entry = Entry::new(&label, id.clone(), prio, Op::Work);
                entry.register = Some((token, seq));
                entry.counter = Some(next);
                pending.push((work, Kind::Work, entry));
            }
            Err(ElectionError::StaleToken {
                current, vacant, ..
            }) => {
                self.faults.close(work.id());
                self.stats.fenced_stale = self.stats.fenced_stale.saturating_add(1);
                self.log(format!(
                    "{label} work b{token}: fence rejected the stale token (current b{current}, vacant={vacant})"
                ));
            }
            Err(ElectionError::Database(e)) => {
                self.faults.close(work.id());
                self.count_txn_error(&e);
            }
            Err(e) => {
                self.faults.close(work.id());
                self.found.push(crate::oracles::Progress::unexpected_error(
                    &label,
                    "fenced work",
                    &e.to_string(),
                ));
            }
        }

        // The unfenced shadow, written by the same work.
        let shadow = self.open(Actor::Proc(pid));
        let read = self
            .rt
            .block_on(shadow.get(wire::SHADOW_KEY, ReadMode::Snapshot));
        match read {
            Ok(v) => {
                let next = wire::decode_u64(v.as_deref())
                    .unwrap_or(0)
                    .saturating_add(1);
                shadow.set(wire::SHADOW_KEY, &wire::encode_u64(next));
                let mut entry = Entry::new(&label, id, prio, Op::Shadow);
                entry.shadow = Some(next);
                pending.push((shadow, Kind::Shadow, entry));
            }
            Err(e) => {
                self.faults.close(shadow.id());
                self.count_txn_error(&e);
            }
        }

        if pending.is_empty() {
            self.task_done(pid);
            return;
        }
        if let Some(p) = self.procs.get_mut(pid) {
            p.work_inflight = u32::try_from(pending.len()).unwrap_or(u32::MAX);
        }
        // A stop-the-world pause between the fence read and the commit.
        if !self.quiet && self.rng.random_ratio(1, 50) {
            let d = self.leases(500, crate::params::MAX_FAULT_LEASES.saturating_mul(1_000));
            self.pause(pid, d, true);
        }
        let delay = self.commit_delay();
        for (txn, kind, entry) in pending {
            let token = self.add_pending(Pending::new(Actor::Proc(pid), txn, kind, entry));
            self.queue
                .push(self.now.saturating_add(delay), Event::Commit { token });
        }
    }

    /// A work commit's result arrived: the task awaits it, then does its next piece of work.
    pub(super) fn work_done(&mut self, pid: usize) {
        let Some(p) = self.procs.get(pid) else {
            return;
        };
        if p.work_inflight > 0 {
            return;
        }
        match (p.task_ballot, p.task_left) {
            (Some(token), left) if left > 0 && p.status != Status::Dead => {
                let d = self.between(0, self.params.heartbeat / 10);
                self.schedule_work(pid, d, WorkStep::Next { token });
            }
            _ => self.task_done(pid),
        }
    }

    /// An await point inside a running task: it is cancelled if its guard was (revoked, or
    /// past its deadline; the plant `act-without-lease-check` ignores the guard), else it
    /// runs its next piece of work, under oracle 8.
    fn work_next(&mut self, pid: usize, token: u64) {
        let cancelled = self.procs.get(pid).is_none_or(|p| {
            let now = p.clock.local_now();
            p.guard
                .as_ref()
                .is_none_or(|g| g.ballot != token || g.cancelled_at(now))
        });
        if cancelled && self.plant != Some(Plant::ActWithoutLeaseCheck) {
            self.task_done(pid);
            return;
        }
        if let Some(p) = self.procs.get_mut(pid) {
            p.task_left = p.task_left.saturating_sub(1);
        }
        self.check_guarded_step(pid, token, "a guarded task's next piece of work");
        self.schedule_work(pid, 0, WorkStep::Act { token });
    }

    /// The guarded task ended: guarded work is idle; the loop goes on.
    fn task_done(&mut self, pid: usize) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        p.task_ballot = None;
        p.task_left = 0;
        p.candidate.set_busy(false);
        let alive = p.status != Status::Dead;
        let drained = p.draining.take().is_some();
        if !alive {
            return;
        }
        self.feed(pid, In::WorkIdle);
        if drained {
            self.feed(pid, In::Drained(true));
        }
        self.next_check(pid);
    }
}
