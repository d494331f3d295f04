//! Guarded shard work, fenced with `fence_shard`, and oracle S7.
//!
//! Guarded shard work: one work loop per guard the machine issues; a task does one to three
//! pieces, each a synchronous section ending in a transaction that calls `fence_shard` with
//! the guard's token, then writes the shard's protected register (ballot, sequence) and adds
//! one to its counter. Between pieces the task reaches an await point, where it stops if its
//! guard was cancelled, and where oracle S7 checks its member still owns the shard.

use fdb_leader_election::{Ballot, ElectionError, ElectionTxn, ReadMode, ShardId};

use super::commit::{PKind, Pending, Who};
use super::{Ev, World};
use crate::oracles::{OracleId, Violation};
use crate::shard_plants::ShardPlant;
use crate::time::Nanos;

/// A guard, as the executor keeps it.
#[derive(Clone, Debug)]
pub(crate) struct Guard {
    pub(crate) ballot: u64,
    /// The member's epoch when it was issued.
    pub(crate) epoch: u64,
    /// Its deadline, on the member's clock.
    pub(crate) deadline: Nanos,
    /// A move was requested: no new work.
    pub(crate) closed: bool,
    /// Tells this guard's work loop from a later guard's of the same shard.
    pub(crate) guard_gen: u64,
}

/// A running task.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    pub(crate) guard_gen: u64,
    pub(crate) ballot: u64,
    pub(crate) pieces_left: u8,
    /// Pieces done (a task checks its guard only after the first under the plant).
    pub(crate) done: u8,
}

/// The shard's protected register key.
pub(crate) fn register_key(shard: u32) -> Vec<u8> {
    [b"shardsim-app/reg/".as_slice(), &shard.to_be_bytes()].concat()
}

/// The shard's fenced counter key.
pub(crate) fn counter_key(shard: u32) -> Vec<u8> {
    [b"shardsim-app/ctr/".as_slice(), &shard.to_be_bytes()].concat()
}

/// A big-endian u64 from the first eight bytes, if any.
pub(crate) fn be_u64(v: Option<&[u8]>) -> Option<u64> {
    v.and_then(|b| b.get(..8))
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
}

impl World {
    /// The machine issued a guard: its work loop starts.
    pub(super) fn issue_guard(&mut self, pid: usize, shard: ShardId, ballot: u64, deadline: Nanos) {
        let hb = self.p.heartbeat;
        let first = self.between(0, hb / 2);
        let d = self.local_delay(pid, first);
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        let guard_gen = m.next_gen;
        m.next_gen = guard_gen.saturating_add(1);
        let epoch = m.member.epoch().unwrap_or(0);
        m.guards.insert(
            shard,
            Guard {
                ballot,
                epoch,
                deadline,
                closed: false,
                guard_gen,
            },
        );
        let shard = shard.get();
        self.queue.push(
            self.now.saturating_add(d),
            Ev::WorkTick {
                pid,
                shard,
                guard_gen,
            },
        );
    }

    /// Whether `pid`'s guard `guard_gen` of `shard` is cancelled now (revoked, replaced, or past its
    /// deadline on the member's clock).
    fn cancelled(&self, pid: usize, shard: u32, guard_gen: u64) -> bool {
        let Some(m) = self.members.get(pid) else {
            return true;
        };
        m.guards
            .get(&ShardId::new(shard))
            .is_none_or(|g| g.guard_gen != guard_gen || m.clock.local_now() >= g.deadline)
    }

    /// The work loop's await point: start a task if the guard accepts work.
    pub(super) fn work_tick(&mut self, pid: usize, shard: u32, guard_gen: u64) {
        if self.cancelled(pid, shard, guard_gen) {
            return;
        }
        let hb = self.p.heartbeat;
        let next = self.between(hb, hb.saturating_mul(2));
        let d = self.local_delay(pid, next);
        self.queue.push(
            self.now.saturating_add(d),
            Ev::WorkTick {
                pid,
                shard,
                guard_gen,
            },
        );
        let pieces = u8::try_from(self.between(1, 3)).unwrap_or(1);
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        let s = ShardId::new(shard);
        let Some(g) = m.guards.get(&s) else {
            return;
        };
        if g.closed || m.tasks.contains_key(&s) {
            return;
        }
        let ballot = g.ballot;
        m.tasks.insert(
            s,
            Task {
                guard_gen,
                ballot,
                pieces_left: pieces,
                done: 0,
            },
        );
        self.stats.guarded_tasks = self.stats.guarded_tasks.saturating_add(1);
        self.work_piece(pid, shard, guard_gen);
    }

    /// An await point of a running task.
    pub(super) fn work_piece(&mut self, pid: usize, shard: u32, guard_gen: u64) {
        let s = ShardId::new(shard);
        let Some(task) = self
            .members
            .get(pid)
            .and_then(|m| m.tasks.get(&s))
            .filter(|t| t.guard_gen == guard_gen)
            .cloned()
        else {
            return;
        };
        let checks = !(self.plant == Some(ShardPlant::ReleaseBeforeWorkStops) && task.done > 0);
        if checks && self.cancelled(pid, shard, guard_gen) {
            if let Some(m) = self.members.get_mut(pid) {
                m.tasks.remove(&s);
            }
            self.task_ended(pid);
            return;
        }
        // Oracle S7: the task runs only while its member owns the shard at its ballot.
        let owned = self
            .members
            .get(pid)
            .and_then(|m| m.member.shard_token(s))
            .map(Ballot::get);
        if owned != Some(task.ballot) {
            let label = self.label(pid);
            self.found.push(Violation::new(
                OracleId::ShardGuard,
                format!(
                    "{label} runs guarded work of shard {shard} at ballot {} while it owns it at {owned:?}",
                    task.ballot
                ),
            ));
        }
        // The synchronous section; sometimes a stop-the-world pause inside it, between the
        // check and the fenced write.
        let section = self.between(0, self.p.heartbeat / 8);
        let d = self.local_delay(pid, section);
        if !self.quiet && self.chance(1, 30) {
            let pause = self.leases(100, 2_000);
            self.stats.faults.check_act_pauses =
                self.stats.faults.check_act_pauses.saturating_add(1);
            self.pause_member(pid, pause);
        }
        self.queue.push(
            self.now.saturating_add(d),
            Ev::WorkAct {
                pid,
                shard,
                guard_gen,
            },
        );
    }

    /// The fenced write of a piece of work.
    pub(super) fn work_act(&mut self, pid: usize, shard: u32, guard_gen: u64) {
        let s = ShardId::new(shard);
        let Some(ballot) = self
            .members
            .get(pid)
            .filter(|m| m.alive)
            .and_then(|m| m.tasks.get(&s))
            .filter(|t| t.guard_gen == guard_gen)
            .map(|t| t.ballot)
        else {
            return;
        };
        let txn = self.open(pid);
        let fenced = if self.plant == Some(ShardPlant::UnfencedShardWork) {
            Ok(())
        } else {
            self.rt
                .block_on(self.election.fence_shard(&txn, s, Ballot::new(ballot)))
        };
        let reads = fenced.and_then(|()| {
            self.rt.block_on(async {
                let reg = txn.get(&register_key(shard), ReadMode::Snapshot).await?;
                let ctr = txn.get(&counter_key(shard), ReadMode::Snapshot).await?;
                Ok::<_, ElectionError>((reg, ctr))
            })
        });
        let (_, ctr) = match reads {
            Ok(r) => r,
            Err(e) => {
                if matches!(e, ElectionError::StaleToken { .. }) {
                    self.stats.fenced_stale = self.stats.fenced_stale.saturating_add(1);
                } else {
                    self.count_error(&e);
                }
                self.faults.close(txn.id());
                self.work_result(pid, shard, ballot, false);
                return;
            }
        };
        let count = be_u64(ctr.as_deref()).unwrap_or(0).saturating_add(1);
        let mut reg = ballot.to_be_bytes().to_vec();
        reg.extend_from_slice(&count.to_be_bytes());
        txn.set(&register_key(shard), &reg);
        txn.set(&counter_key(shard), &count.to_be_bytes());
        self.schedule_commit(Pending::new(
            Who::Member(pid),
            txn,
            PKind::Work { shard, ballot },
            None,
        ));
    }

    /// A piece of work ended (its commit's result, or refused by the fence).
    pub(super) fn work_result(&mut self, pid: usize, shard: u32, ballot: u64, _ok: bool) {
        let s = ShardId::new(shard);
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        let Some(t) = m.tasks.get_mut(&s).filter(|t| t.ballot == ballot) else {
            return;
        };
        t.pieces_left = t.pieces_left.saturating_sub(1);
        t.done = t.done.saturating_add(1);
        let guard_gen = t.guard_gen;
        if t.pieces_left == 0 {
            m.tasks.remove(&s);
            self.task_ended(pid);
            return;
        }
        let gap = self.between(0, self.p.heartbeat / 4);
        let d = self.local_delay(pid, gap);
        self.queue.push(
            self.now.saturating_add(d),
            Ev::WorkPiece {
                pid,
                shard,
                guard_gen,
            },
        );
    }
}
