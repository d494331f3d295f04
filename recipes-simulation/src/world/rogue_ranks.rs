//! Planted faults that emulate defects of the library's eligibility and version ranking
//! (they live only in the simulation): a step-down that reserves its vacancy ignoring
//! eligibility, or ignoring versions, rewritten in the step-down's own transaction; and a
//! follower that waits a full lease on a vacancy its leader reserved for someone else.

use fdb_leader_election::{CandidateId, ElectionTxn, LeaderRecord, MemTransaction, Priority};

use super::World;
use crate::history::{CycleAction, Op};
use crate::oracles::TxnRead;
use crate::oracles::rank::{Rank, RegView, Stand, version};
use crate::plants::Plant;
use crate::time::nanos;
use crate::wire;

impl World {
    /// Plants `reserve-ignores-eligibility` and `reserve-ignores-versions`: the vacancy `pid`'s
    /// operation `op` wrote (`written`, read back through `txn`) is rewritten in the same
    /// transaction, reserved for the best live candidate ignoring eligibility (when that one
    /// is not eligible), or ranked by priority alone ignoring versions (when that differs).
    /// Returns the record as rewritten.
    pub(super) fn planted_reservation(
        &mut self,
        pid: usize,
        txn: &MemTransaction,
        op: Op,
        read: Option<&TxnRead>,
        written: &LeaderRecord,
    ) -> Option<LeaderRecord> {
        let plant = self.plant?;
        if !matches!(
            plant,
            Plant::ReserveIgnoresEligibility | Plant::ReserveIgnoresVersions
        ) {
            return None;
        }
        let best_chosen = matches!(
            op,
            Op::Resign
                | Op::Unregister { resigned: true }
                | Op::Cycle(CycleAction::Resigned | CycleAction::SteppedDownIneligible)
        );
        if !best_chosen || written.owner().is_some() || written.operator_hold().is_some() {
            return None;
        }
        let read = read?;
        let me = self.procs.get(pid)?.candidate.id().to_string();
        let renewal = written.renewal().saturating_sub(1);
        let lag = read.config.renewals_before_dead;
        let live = |r: &&RegView| r.id != me && r.live(renewal, lag);
        let by = |rank: &Rank, a: &RegView, b: &RegView| {
            rank.compare(&Stand::of(&a.cand), &Stand::of(&b.cand))
                .then(b.cand.registration.cmp(&a.cand.registration))
        };
        let target = if plant == Plant::ReserveIgnoresEligibility {
            let rank = Rank {
                policy: read.config.policy(),
                leader: version(written.leader_version().map(ToString::to_string).as_deref()),
            };
            read.registry
                .iter()
                .filter(live)
                .max_by(|a, b| by(&rank, a, b))
                .filter(|r| !r.cand.eligible)?
        } else {
            let flat = Rank {
                policy: fdb_leader_election::VersionPolicy::Ignore,
                leader: None,
            };
            read.registry
                .iter()
                .filter(live)
                .filter(|r| r.cand.eligible)
                .max_by(|a, b| by(&flat, a, b))
                .filter(|r| {
                    written
                        .reservation()
                        .is_none_or(|w| w.id().as_str() != r.id)
                })?
        };
        let holder = CandidateId::parse(&target.id).ok()?;
        let writer = CandidateId::parse(&me).ok()?;
        let (record, fence) = wire::vacancy_reserved_for(
            written.ballot(),
            written.renewal(),
            nanos(written.lease_duration()),
            &holder,
            Priority::new(target.cand.priority),
            &writer,
        )?;
        txn.set(&wire::leader_key(), &record);
        txn.set(&wire::fence_key(), &fence);
        let label = self.label(pid);
        self.log(format!(
            "{label} planted: its vacancy is reserved for {holder} instead"
        ));
        let election = self.election.clone();
        self.rt
            .block_on(async { election.leader_record(txn).await })
            .ok()
    }

    /// Plant `reservation-waits-a-lease`: a follower whose last record read is a vacancy its
    /// leader reserved for another candidate sleeps until it has seen it a full lease (the
    /// library's behaviour before DESIGN §4's reservation timeout), not the machine's time.
    pub(super) fn planted_wait(&self, pid: usize, local_at: u64) -> u64 {
        if self.plant != Some(Plant::ReservationWaitsALease) {
            return local_at;
        }
        match self.procs.get(pid).and_then(|p| p.reserved_seen) {
            Some((first_seen, lease)) => local_at.max(first_seen.saturating_add(lease)),
            None => local_at,
        }
    }

    /// Notes the record a process read, for the plant `reservation-waits-a-lease`: a vacancy
    /// its leader reserved for another candidate, and since when (on its clock).
    pub(super) fn note_seen(&mut self, pid: usize, record: &LeaderRecord) {
        if self.plant != Some(Plant::ReservationWaitsALease) {
            return;
        }
        let Some(p) = self.procs.get_mut(pid) else {
            return;
        };
        let other = record
            .reservation()
            .is_some_and(|r| r.id() != p.candidate.id());
        let reserved = record.owner().is_none() && record.operator_hold().is_none() && other;
        let identity = (record.ballot().get(), record.renewal());
        if !reserved {
            p.reserved_seen = None;
            p.reserved_identity = None;
        } else if p.reserved_identity != Some(identity) {
            p.reserved_identity = Some(identity);
            p.reserved_seen = Some((p.clock.local_now(), nanos(record.lease_duration())));
        }
    }
}
