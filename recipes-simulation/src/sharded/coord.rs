//! Coordinator candidates of the sharded world.
//!
//! Coordinator candidates: each runs the coordinator election's cycle once per heartbeat (in a
//! transaction of its own, adopted after the commit); the leader then coordinates
//! (`ShardedElection::coordinate` with its token), the others time the members.

use std::sync::Arc;

use fdb_leader_election::shard::Coordinator;
use fdb_leader_election::{
    Candidate, CandidateId, ElectionError, ElectionTxn, Priority, ShardId, TxnError,
};

use super::commit::{PKind, Pending, Who};
use super::member::MemberProc;
use super::{Ev, World, coord_fpid};
use crate::shard_plants::ShardPlant;
use crate::time::{Nanos, SimClock};

/// One coordinator candidate incarnation.
pub(crate) struct CoordProc {
    pub(crate) label: String,
    candidate: Candidate,
    coordinator: Coordinator,
    clock: SimClock,
    pub(crate) alive: bool,
    pub(crate) paused_until: Nanos,
    epoch: u64,
    op: Option<u64>,
    next_op: u64,
    pub(crate) incarnation: u32,
}

impl CoordProc {
    /// Whether it believes it leads the coordinator election now.
    pub(crate) fn leads(&self) -> bool {
        self.candidate.leadership().is_some()
    }
}

impl World {
    /// Starts (or restarts) coordinator candidate `cid`.
    pub(super) fn spawn_coord(&mut self, cid: usize) {
        let incarnation = self
            .coords
            .get(cid)
            .map_or(0, |c| c.incarnation.saturating_add(1));
        let label = format!("c{cid}i{incarnation}");
        let spread = i64::from(self.p.rho_ppm).saturating_sub(1);
        let clock = crate::time::draw_clock(&mut self.rng, &self.time, spread);
        let rate = clock.rate_ppm();
        let nonce = rand::Rng::random::<u64>(&mut self.rng);
        let Ok(id) = CandidateId::parse(&format!("{label}-{nonce:016x}")) else {
            return;
        };
        // The plant: the coordinator times members on a clock twice as fast.
        let timing: Arc<dyn fdb_leader_election::Clock> =
            if self.plant == Some(ShardPlant::TakeoverBeforeFullLease) {
                Arc::new(SimClock::new(
                    self.time.clone(),
                    clock.local_now(),
                    1_000_000,
                ))
            } else {
                Arc::new(clock.clone())
            };
        let candidate =
            Candidate::with_clock(id.clone(), Priority::new(1), Arc::new(clock.clone()));
        let proc = CoordProc {
            label: label.clone(),
            candidate,
            coordinator: Coordinator::with_clock(id, timing),
            clock,
            alive: true,
            paused_until: 0,
            epoch: 0,
            op: None,
            next_op: 0,
            incarnation,
        };
        if let Some(slot) = self.coords.get_mut(cid) {
            *slot = proc;
        } else {
            self.coords.push(proc);
        }
        self.register_coord(cid);
        self.log(format!("{label} starts (rate {rate} ppm)"));
        let d = self.between(0, self.p.heartbeat);
        self.queue
            .push(self.now.saturating_add(d), Ev::CoordTick { cid, epoch: 0 });
    }

    /// Registers the candidate (a set-up transaction; on failure the next cycle tries again).
    fn register_coord(&mut self, cid: usize) {
        let Some(c) = self.coords.get(cid) else {
            return;
        };
        let txn = self.open(coord_fpid(cid));
        let id = txn.id();
        let e = self.election.coordinator_election();
        let ok = self
            .rt
            .block_on(async {
                e.register_candidate(&txn, &c.candidate).await?;
                txn.commit().await.map_err(ElectionError::from)
            })
            .is_ok();
        self.faults.close(id);
        let label = c.label.clone();
        self.log(format!("{label} registers: {ok}"));
    }

    /// A coordinator candidate's heartbeat.
    pub(super) fn coord_tick(&mut self, cid: usize, epoch: u64) {
        let Some(c) = self.coords.get(cid) else {
            return;
        };
        if !c.alive || c.epoch != epoch {
            return;
        }
        let d = c.clock.true_for_local(self.p.heartbeat);
        self.queue
            .push(self.now.saturating_add(d), Ev::CoordTick { cid, epoch });
        if c.op.is_some() {
            return;
        }
        let candidate = c.candidate.clone();
        let txn = self.open(coord_fpid(cid));
        let result = self.rt.block_on(
            self.election
                .coordinator_election()
                .run_election_cycle(&txn, &candidate),
        );
        self.land_held(coord_fpid(cid));
        match result {
            Ok(cycle) => {
                let op = self.coord_op(cid);
                self.schedule_commit(Pending::new(
                    Who::Coord(cid),
                    txn,
                    PKind::CoordCycle(Box::new(cycle)),
                    Some(op),
                ));
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.count_error(&e);
                if matches!(e, ElectionError::NotRegistered { .. }) {
                    self.register_coord(cid);
                }
            }
        }
    }

    fn coord_op(&mut self, cid: usize) -> u64 {
        let Some(c) = self.coords.get_mut(cid) else {
            return 0;
        };
        let op = c.next_op;
        c.next_op = op.saturating_add(1);
        c.op = Some(op);
        op
    }

    /// The leader coordinates; a standby times the members.
    fn coordinate(&mut self, cid: usize) {
        let Some(c) = self.coords.get(cid) else {
            return;
        };
        let (candidate, coordinator) = (c.candidate.clone(), c.coordinator.clone());
        let txn = self.open(coord_fpid(cid));
        let lead = candidate.leadership();
        let skip = self.plant == Some(ShardPlant::NoFailoverWhenElectionsOff)
            && lead.is_some()
            && self.elections_off_in(&txn);
        let Some(lead) = lead.filter(|_| !skip) else {
            let _ = self
                .rt
                .block_on(self.election.time_members(&txn, &coordinator));
            self.faults.close(txn.id());
            return;
        };
        match self
            .rt
            .block_on(self.election.coordinate(&txn, &coordinator, lead.ballot))
        {
            Ok(done) => {
                let fenced = u64::try_from(done.fenced.len()).unwrap_or(0);
                let forgotten: Vec<String> = done
                    .forgotten
                    .iter()
                    .map(|id| id.as_str().to_owned())
                    .collect();
                let label = self
                    .coords
                    .get(cid)
                    .map(|c| c.label.clone())
                    .unwrap_or_default();
                self.log(format!(
                    "{label} coordinates: fences {:?}, forgets {:?}, steps {:?}, deferred {}",
                    done.fenced,
                    done.forgotten,
                    done.placement.steps,
                    done.placement.deferred_moves
                ));
                self.planted_coordination(&txn, candidate.id());
                let op = self.coord_op(cid);
                self.schedule_commit(Pending::new(
                    Who::Coord(cid),
                    txn,
                    PKind::Coordinate { fenced, forgotten },
                    Some(op),
                ));
            }
            Err(e) => {
                self.faults.close(txn.id());
                self.count_error(&e);
            }
        }
    }

    /// Whether the configuration as `txn` reads it disables elections (a read error: no).
    fn elections_off_in(&self, txn: &fdb_leader_election::MemTransaction) -> bool {
        self.rt
            .block_on(self.election.read_config(txn))
            .is_ok_and(|c| !c.election_enabled())
    }

    /// The plants that add writes to a coordinator attempt's transaction: a reservation or
    /// move request while elections are off (`elections-off-still-places`), or the removal of
    /// a live member's record, epoch mark and inbox (`forget-a-live-member`).
    fn planted_coordination(
        &mut self,
        txn: &fdb_leader_election::MemTransaction,
        me: &CandidateId,
    ) {
        let plant = self.plant;
        match plant {
            Some(ShardPlant::ElectionsOffStillPlaces) if self.elections_off_in(txn) => {
                // The operator's move by hand, in the coordinator's transaction (under a
                // freeze it lifts again): a reservation of a vacant shard, or a move request.
                let Some(pid) = self.pick(&live(&self.members)) else {
                    return;
                };
                let Some(to) = self.members.get(pid).map(|m| m.member.id().clone()) else {
                    return;
                };
                let last = u64::from(self.p.shards.saturating_sub(1));
                let shard = ShardId::new(u32::try_from(self.between(0, last)).unwrap_or(0));
                let e = self.election.clone();
                let moved = self.rt.block_on(async {
                    // `move_shard` refuses while elections are off, so the plant enables them
                    // in its own writes for the move and writes the stored configuration back.
                    let config = e.read_config(txn).await?;
                    let on = config.to_builder().election_enabled(true).build()?;
                    e.write_config(txn, &on).await?;
                    let frozen = e.layout(txn).await?.is_frozen();
                    e.set_frozen(txn, true).await?;
                    let moved = e.move_shard(txn, shard, &to, me).await;
                    if !frozen {
                        e.set_frozen(txn, false).await?;
                    }
                    e.write_config(txn, &config).await?;
                    moved
                });
                self.log(format!(
                    "planted: the coordinator moves shard {} to {to} while elections are off: {moved:?}",
                    shard.get()
                ));
            }
            Some(ShardPlant::ForgetALiveMember) if self.chance(1, 10) => {
                let ids: Vec<CandidateId> = self
                    .members
                    .iter()
                    .filter(|m| m.alive)
                    .filter(|m| {
                        self.oracles
                            .member_views
                            .get(m.member.id().as_str())
                            .is_some_and(|v| !v.fenced && !v.gone)
                    })
                    .map(|m| m.member.id().clone())
                    .collect();
                let n = u64::try_from(ids.len()).unwrap_or(0);
                if n == 0 {
                    return;
                }
                let i = usize::try_from(self.between(0, n.saturating_sub(1))).unwrap_or(0);
                let Some(id) = ids.get(i) else {
                    return;
                };
                for key in [
                    self.election.member_key(id),
                    self.election.epoch_key(id),
                    self.election.inbox_key(id),
                ] {
                    txn.clear(&key);
                }
                self.log(format!("planted: the coordinator also forgets {id}, live"));
            }
            _ => {}
        }
    }

    /// A coordinator candidate's transaction result.
    pub(super) fn coord_result(
        &mut self,
        cid: usize,
        op: Option<u64>,
        kind: PKind,
        result: Result<(), TxnError>,
    ) {
        let Some(c) = self.coords.get_mut(cid) else {
            return;
        };
        if !c.alive || op.is_none() || c.op != op {
            return;
        }
        c.op = None;
        match (kind, result) {
            (PKind::CoordCycle(cycle), Ok(())) => {
                c.candidate.adopt(*cycle);
                self.coordinate(cid);
            }
            (PKind::CoordCycle(cycle), Err(_)) => {
                drop(cycle);
                self.coordinate(cid);
            }
            (PKind::Coordinate { fenced, .. }, Ok(())) => {
                let s = &mut self.stats.sharded;
                s.coordinations = s.coordinations.saturating_add(1);
                s.takeovers = s.takeovers.saturating_add(fenced);
            }
            (PKind::Coordinate { .. }, Err(e)) if e.is_retryable() => {
                // The store's retry loop runs it again at once.
                self.coordinate(cid);
            }
            _ => {}
        }
    }

    /// Crashes coordinator candidate `cid`.
    pub(super) fn crash_coord(&mut self, cid: usize) {
        let Some(c) = self.coords.get_mut(cid) else {
            return;
        };
        if !c.alive {
            return;
        }
        c.alive = false;
        c.epoch = c.epoch.saturating_add(1);
        c.op = None;
        let label = c.label.clone();
        self.crash_pending(Who::Coord(cid));
        self.log(format!("{label} crashes"));
    }

    /// Pauses coordinator candidate `cid` for `d`.
    pub(super) fn pause_coord(&mut self, cid: usize, d: Nanos) {
        let until = self.now.saturating_add(d);
        if let Some(c) = self.coords.get_mut(cid) {
            c.paused_until = c.paused_until.max(until);
        }
        self.oracles.off.disturb(self.now, until);
        self.note_fault_end(until);
    }

    /// Whether any coordinator candidate runs.
    pub(super) fn coords_alive(&self) -> Vec<usize> {
        (0..self.coords.len())
            .filter(|c| self.coords.get(*c).is_some_and(|c| c.alive))
            .collect()
    }
}

/// The live member processes (by index).
pub(super) fn live(members: &[MemberProc]) -> Vec<usize> {
    members
        .iter()
        .enumerate()
        .filter(|(_, m)| m.alive)
        .map(|(i, _)| i)
        .collect()
}
