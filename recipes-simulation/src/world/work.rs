//! Leader work: a process that believes it leads periodically checks its lease, then (possibly
//! after a stop-the-world pause right there) opens two transactions:
//!
//! - the *fenced* one: `LeaderElection::fence(&txn, token)`, then a read-modify-write of the
//!   protected register (ballot, sequence) and the fenced counter;
//! - the *unfenced shadow*: the same read-modify-write of a separate counter, without the fence.
//!
//! Both read their counter with a snapshot read, as a leader that trusts its leadership would,
//! so only the fence stands between a stale leader and a lost update. Both commit at the same
//! later event.

use fdb_leader_election::{Ballot, ElectionError, ElectionTxn, ReadMode};
use rand::Rng;

use super::{Actor, Kind, Pending, Status, World};
use crate::events::{Event, WorkStep};
use crate::history::{Entry, Op};
use crate::plants::Plant;
use crate::wire;

impl World {
    /// One step of `pid`'s work loop.
    pub(super) fn work(&mut self, pid: usize, step: WorkStep) {
        let Some(p) = self.procs.get(pid) else {
            return;
        };
        if p.status != Status::Running || p.shutdown {
            return;
        }
        match step {
            WorkStep::Check => self.work_check(pid),
            WorkStep::Act { token } => self.work_act(pid, token),
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

    /// "Am I the leader?": the lease check before acting.
    fn work_check(&mut self, pid: usize) {
        let Some((token, _)) = self.acting_belief(pid) else {
            self.next_check(pid);
            return;
        };
        // A stop-the-world pause between the lease check and the fenced write.
        if !self.quiet && self.rng.random_ratio(1, 25) {
            let d = self.leases(500, crate::params::MAX_FAULT_LEASES.saturating_mul(1_000));
            self.pause(pid, d, true);
        }
        let d = self.between(0, 1_000_000);
        self.schedule_work(pid, d, WorkStep::Act { token });
    }

    fn work_act(&mut self, pid: usize, token: u64) {
        let Some(cand) = self.procs.get(pid).map(|p| p.candidate.clone()) else {
            return;
        };
        let label = self.label(pid);
        let prio = cand.priority().get();
        let id = Some(cand.id().to_string());
        let seq = self.procs.get(pid).map_or(0, |p| p.work_seq);
        if let Some(p) = self.procs.get_mut(pid) {
            p.work_seq = seq.saturating_add(1);
        }
        cand.set_busy(true);
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
            cand.set_busy(false);
            self.next_check(pid);
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
            let token = self.add_pending(Pending {
                actor: Actor::Proc(pid),
                txn,
                kind,
                entry,
                zombie: false,
                faultless: false,
            });
            self.queue
                .push(self.now.saturating_add(delay), Event::Commit { token });
        }
    }

    /// A work commit's result arrived.
    pub(super) fn work_done(&mut self, pid: usize) {
        let Some(p) = self.procs.get(pid) else {
            return;
        };
        if p.work_inflight > 0 {
            return;
        }
        p.candidate.set_busy(false);
        if p.status == Status::Running && !p.shutdown {
            self.next_check(pid);
        }
    }
}
