//! Planted faults that emulate defects of the library (they live only in the simulation; the
//! library has none of them): the rogue follower that takes over after half a lease, the
//! followers that take over at the lapse whatever their rank, and the leader that keeps the
//! belief of a longer lease after writing a shorter one.

use fdb_leader_election::runner::machine::Failure;
use fdb_leader_election::{Candidate, ElectionError, ElectionTxn, LeaderRecord, Leadership};
use fdb_leader_election::{TxnError, TxnErrorKind};

use super::{Actor, Kind, Pending, World};
use crate::history::{Op, RecordView};
use crate::plants::Plant;
use crate::time::{Nanos, nanos};
use crate::wire;

impl World {
    /// The rogue notes the identity its cycles read, and since when (on its clock).
    pub(super) fn rogue_observe(&mut self, pid: usize, record: &LeaderRecord) {
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        if !p.rogue {
            return;
        }
        let id = (record.ballot().get(), record.renewal());
        if p.rogue_obs.map(|(i, _, _)| i) != Some(id) {
            p.rogue_obs = Some((id, p.clock.local_now(), nanos(record.lease_duration())));
        }
    }

    /// Whether the rogue's wait is over for a record owned by someone else: half a lease
    /// (`takeover-after-half-lease`), or the record's full lease, as the lapse rule says,
    /// whatever the rogue's rank (`takeover-ignores-rank`).
    pub(super) fn rogue_due(&self, pid: usize) -> bool {
        let Some(p) = self.procs.get(pid) else {
            return false;
        };
        if !p.rogue || self.acting_belief(pid).is_some() {
            return false;
        }
        let full = self.plant == Some(Plant::TakeoverIgnoresRank);
        p.rogue_obs.is_some_and(|(_, first, lease)| {
            let wait = if full { lease } else { self.params.lease / 2 };
            p.clock.local_now() >= first.saturating_add(wait)
        })
    }

    /// The planted rogue takeover, instead of the cycle the machine asked for: a raw
    /// transaction that writes a takeover record (ballot + 1, owned by the rogue) and the
    /// matching fence, conflict-checked on both keys, after half a lease of unchanged
    /// observation.
    pub(super) fn start_rogue(&mut self, pid: usize, seq: u64) {
        let Some((cand, obs, rseq)) = self
            .procs
            .get(pid)
            .map(|p| (p.candidate.clone(), p.rogue_obs, p.rogue_seq))
        else {
            return;
        };
        let t0 = self.procs.get(pid).map_or(0, |p| p.clock.local_now());
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let (leader_key, fence_key) = (wire::leader_key(), wire::fence_key());
        let res = self.rt.block_on(async {
            let prior = election.leader_record(&txn).await?;
            let config = election.read_config(&txn).await?;
            let owned_by_other = prior.owner().is_some_and(|o| o.id() != cand.id());
            if obs.map(|(i, _, _)| i) != Some((prior.ballot().get(), prior.renewal()))
                || !owned_by_other
            {
                return Ok(None);
            }
            txn.add_read_conflict_key(&leader_key)?;
            txn.add_read_conflict_key(&fence_key)?;
            let ballot = prior.ballot().next()?;
            let lease = config.lease_duration();
            let record = wire::takeover_record(
                ballot,
                cand.id(),
                cand.priority(),
                prior.renewal().saturating_add(1),
                nanos(lease),
                rseq,
            );
            let (Some(record), Some(fence)) = (record, wire::owned_fence(ballot)) else {
                return Ok(None);
            };
            txn.set(&leader_key, &record);
            txn.set(&fence_key, &fence);
            let written = election.leader_record(&txn).await?;
            let validity = nanos(config.local_validity(lease));
            Ok::<_, ElectionError>(Some((prior, written, ballot, validity)))
        });
        if let Some(p) = self.procs.get_mut(pid) {
            p.rogue_seq = rseq.saturating_add(1);
        }
        match res {
            Ok(Some((prior, written, ballot, validity))) => {
                let label = self.label(pid);
                self.log(format!("{label} ROGUE takes over b{}", ballot.get()));
                // What it read, for the version oracle (who ranked ahead of it).
                let read = self.txn_read(pid, &txn, true, false);
                let mut entry = self.entry_for(pid, Op::RogueTakeover);
                entry.prior = Some(RecordView::of(&prior));
                entry.leader = Some(RecordView::of(&written));
                self.schedule_commit(Pending {
                    op: Some(seq),
                    read,
                    ..Pending::new(
                        Actor::Proc(pid),
                        txn,
                        Kind::Rogue {
                            ballot: ballot.get(),
                            valid_until: t0.saturating_add(validity),
                        },
                        entry,
                    )
                });
            }
            Ok(None) => {
                self.faults.close(txn.id());
                if let Some(p) = self.procs.get_mut(pid) {
                    p.rogue_obs = None;
                }
                self.rogue_done(pid, seq, 0, 0, false);
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.rogue_done(pid, seq, 0, 0, false);
                let _ = e;
            }
        }
    }

    /// The rogue's raw takeover ended; its machine sees a failed cycle (it retries at once).
    pub(super) fn rogue_done(
        &mut self,
        pid: usize,
        seq: u64,
        ballot: u64,
        valid_until: Nanos,
        ok: bool,
    ) {
        if ok {
            if let Some(p) = self.procs.get_mut(pid) {
                p.rogue_tenure = Some(super::RogueTenure {
                    ballot,
                    valid_until,
                });
            }
            let label = self.label(pid);
            self.log(format!(
                "{label} ROGUE leads b{ballot} by its own raw takeover"
            ));
        }
        if self.current_op(pid, seq).is_some() {
            let failure = Failure::of(&ElectionError::Database(TxnError::new(
                TxnErrorKind::Conflict,
            )));
            self.finish_op(pid, Err(failure));
        }
    }

    /// Plant `uncapped-shorter-lease`: a leader whose cycle wrote a shorter lease keeps the
    /// belief of the longer one, as the library did before DESIGN §10.3.
    pub(super) fn note_uncapped(
        &mut self,
        pid: usize,
        before: Option<&Leadership>,
        cand: &Candidate,
    ) {
        if self.plant != Some(Plant::UncappedShorterLease) {
            return;
        }
        let (Some(before), Some(after)) = (before, cand.leadership()) else {
            return;
        };
        if before.ballot == after.ballot && after.valid_until < before.valid_until {
            if let Some(p) = self.procs.get_mut(pid) {
                p.uncapped = Some((
                    before.ballot.get(),
                    nanos(before.valid_until.since_origin()),
                ));
            }
        }
    }
}
