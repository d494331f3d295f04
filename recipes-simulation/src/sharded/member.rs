//! A member process: the executor of the library's `ShardMachine` in simulated time.
//!
//! A member process: the library's `ShardMachine` executed in simulated time (its cycles,
//! sleeps, guards, drains and leave), the way the tokio `ShardedRunner` executes it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use fdb_leader_election::shard::Member;
use fdb_leader_election::shard::machine::{
    ShardCommand, ShardCtx, ShardEvent, ShardMachine, ShardStop,
};
use fdb_leader_election::{CandidateId, LocalInstant, Priority, ShardId, Weight};

use super::pacing::Pacing;
use super::work::{Guard, Task};
use super::{Ev, World};
use crate::shard_plants::ShardPlant;
use crate::time::{Nanos, SimClock, dur, nanos};

/// One member incarnation.
pub(crate) struct MemberProc {
    pub(crate) node: usize,
    /// Its deploy generation.
    pub(crate) generation: u32,
    pub(crate) label: String,
    pub(crate) member: Member,
    /// The key of its member record (the oracles follow every commit that writes it).
    pub(crate) record_key: Vec<u8>,
    pub(crate) clock: SimClock,
    pub(crate) machine: ShardMachine,
    /// Running (not crashed, not stopped).
    pub(crate) alive: bool,
    /// Asked to shut down gracefully (it stops once its machine has left).
    pub(crate) leaving: bool,
    pub(crate) paused_until: Nanos,
    /// The epoch of the current sleep (older wake-ups are stale).
    pub(crate) wake: u64,
    /// The operation in flight (a cycle or the leave), by sequence number.
    pub(crate) op: Option<u64>,
    /// Whether the operation in flight is the leave.
    pub(crate) op_leave: bool,
    /// The shards the cycle in flight may hand over.
    pub(crate) ready: BTreeSet<ShardId>,
    /// Its inbox changed while a cycle was in flight: the watch that cycle armed fires when
    /// the member next sleeps.
    pub(crate) watch_fired: bool,
    /// The lost-wakeup plant: the executor no longer runs the machine.
    pub(crate) stuck: bool,
    pub(crate) next_op: u64,
    /// Live guards, by shard.
    pub(crate) guards: BTreeMap<ShardId, Guard>,
    /// Running tasks, by shard (of a live guard, or of one that ended).
    pub(crate) tasks: BTreeMap<ShardId, Task>,
    /// The epoch of the current drain (awaiting ended guards' work), if any.
    pub(crate) draining: Option<u64>,
    pub(crate) next_gen: u64,
    pub(crate) weight: u32,
    /// S8: its cycles' pacing after a failure.
    pub(crate) pacing: Pacing,
    /// The retry-without-back-off plant: the failed cycle already retried inline once.
    pub(crate) retried_inline: bool,
}

impl std::fmt::Debug for MemberProc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberProc")
            .field("label", &self.label)
            .field("alive", &self.alive)
            .finish_non_exhaustive()
    }
}

impl MemberProc {
    /// The shards whose guarded work has no task in flight.
    fn idle(&self) -> BTreeSet<ShardId> {
        self.guards
            .keys()
            .filter(|s| !self.tasks.contains_key(s))
            .copied()
            .collect()
    }
}

/// A local reading as the library's instant.
pub(crate) fn instant(local: Nanos) -> LocalInstant {
    LocalInstant::from_origin(dur(local))
}

/// A library instant as a local reading.
pub(crate) fn local_of(at: LocalInstant) -> Nanos {
    nanos(at.saturating_duration_since(LocalInstant::from_origin(dur(0))))
}

impl World {
    /// Starts a member incarnation on `node` after `delay`.
    pub(super) fn spawn_member(&mut self, node: usize, delay: Nanos) {
        let pid = self.members.len();
        let (_, generation) = self.nodes.get(node).copied().unwrap_or((None, 0));
        let bias = self.p.node_bias.get(node).copied().unwrap_or(0);
        let priority =
            bias.saturating_add(i32::try_from(generation).unwrap_or(0).saturating_mul(10));
        let weight = if self.chance(1, 4) { 2 } else { 1 };
        let spread = i64::from(self.p.rho_ppm).saturating_sub(1);
        let clock = crate::time::draw_clock(&mut self.rng, &self.time, spread);
        let rate = clock.rate_ppm();
        let label = format!("n{node}g{generation}m{pid}");
        let nonce = rand::Rng::random::<u64>(&mut self.rng);
        let id = CandidateId::parse(&format!("{label}-{nonce:016x}"));
        let Ok(id) = id else {
            self.found.push(crate::oracles::Violation::new(
                crate::oracles::OracleId::ShardLiveness,
                format!("member id {label} refused"),
            ));
            return;
        };
        let record_key = self.election.member_key(&id);
        let member = Member::with_clock(
            id,
            Priority::new(priority),
            Weight::new(weight),
            Arc::new(clock.clone()),
        );
        let machine_seed = rand::Rng::random::<u64>(&mut self.rng);
        let machine = ShardMachine::new(
            self.p.config.clone(),
            machine_seed,
            instant(clock.local_now()),
        );
        self.members.push(MemberProc {
            node,
            generation,
            label: label.clone(),
            member,
            record_key,
            clock,
            machine,
            alive: true,
            leaving: false,
            paused_until: 0,
            wake: 0,
            op: None,
            op_leave: false,
            ready: BTreeSet::new(),
            watch_fired: false,
            stuck: false,
            next_op: 0,
            guards: BTreeMap::new(),
            tasks: BTreeMap::new(),
            draining: None,
            next_gen: 0,
            weight,
            pacing: Pacing::default(),
            retried_inline: false,
        });
        if let Some(n) = self.nodes.get_mut(node) {
            n.0 = Some(pid);
        }
        if pid >= self.p.nodes {
            self.stats.sharded.joins = self.stats.sharded.joins.saturating_add(1);
        }
        self.log(format!(
            "{label} starts (priority {priority}, weight {weight}, rate {rate} ppm)"
        ));
        // The machine starts at its first wake-up.
        if let Some(m) = self.members.get_mut(pid) {
            m.wake = u64::MAX;
        }
        self.queue.push(
            self.now.saturating_add(delay),
            Ev::Wake {
                pid,
                epoch: u64::MAX,
            },
        );
    }

    /// The true duration after which `pid`'s clock has advanced by `local`.
    pub(super) fn local_delay(&self, pid: usize, local: Nanos) -> Nanos {
        self.members
            .get(pid)
            .map_or(local, |m| m.clock.true_for_local(local))
    }

    /// A member's sleep ended (or it starts).
    pub(super) fn wake(&mut self, pid: usize, epoch: u64) {
        let Some(m) = self.members.get(pid) else {
            return;
        };
        if !m.alive || m.wake != epoch {
            return;
        }
        let event = if epoch == u64::MAX {
            ShardEvent::Start
        } else {
            ShardEvent::Tick
        };
        self.feed(pid, event);
    }

    /// Feeds the machine `event` and carries out its commands (and what they lead to).
    pub(super) fn feed(&mut self, pid: usize, event: ShardEvent) {
        let mut events = VecDeque::from([event]);
        let mut steps = 0u32;
        while let Some(ev) = events.pop_front() {
            steps = steps.saturating_add(1);
            if steps > 1_000 {
                let label = self.label(pid);
                self.found.push(crate::oracles::Violation::new(
                    crate::oracles::OracleId::ShardLiveness,
                    format!("{label}: its machine and executor loop without end at {ev:?}"),
                ));
                return;
            }
            let Some(m) = self.members.get_mut(pid) else {
                return;
            };
            if !m.alive || m.stuck {
                return;
            }
            let mut idle = m.idle();
            if self.plant == Some(ShardPlant::ReleaseBeforeWorkStops) {
                idle.extend(m.guards.keys().copied());
            }
            let ctx = ShardCtx::new(
                instant(m.clock.local_now()),
                m.member.owned_shards(),
                m.member.lease_deadline(),
                idle,
            );
            let commands = m.machine.handle(ev, &ctx);
            for c in commands {
                if let Some(next) = self.carry(pid, c) {
                    events.push_back(next);
                }
            }
        }
    }

    /// Carries out one command; returns the event it leads to at once, if any.
    fn carry(&mut self, pid: usize, command: ShardCommand) -> Option<ShardEvent> {
        match command {
            ShardCommand::RunCycle { ready } => self.start_cycle(pid, ready),
            ShardCommand::SleepUntil(at) | ShardCommand::WaitUntil(at) => {
                let m = self.members.get_mut(pid)?;
                // A fired watch ends a sleep; nothing but time ends a wait.
                if matches!(command, ShardCommand::SleepUntil(_))
                    && std::mem::take(&mut m.watch_fired)
                {
                    return Some(ShardEvent::InboxChanged);
                }
                m.wake = m.wake.wrapping_add(1) % (u64::MAX - 1);
                let epoch = m.wake;
                let local = local_of(at).saturating_sub(m.clock.local_now());
                let d = m.clock.true_for_local(local);
                if self.plant == Some(ShardPlant::LostWakeup) && self.chance(1, 50) {
                    let label = self.label(pid);
                    self.log(format!(
                        "{label}: the executor loses a wake-up and goes quiet"
                    ));
                    if let Some(m) = self.members.get_mut(pid) {
                        m.stuck = true;
                    }
                    return None;
                }
                self.queue
                    .push(self.now.saturating_add(d), Ev::Wake { pid, epoch });
                None
            }
            ShardCommand::IssueGuard {
                shard,
                ballot,
                deadline,
            } => {
                self.issue_guard(pid, shard, ballot.get(), local_of(deadline));
                None
            }
            ShardCommand::SetDeadline(deadline) => {
                let m = self.members.get_mut(pid)?;
                for g in m.guards.values_mut() {
                    g.deadline = local_of(deadline);
                }
                None
            }
            ShardCommand::CloseGuard(shard) => {
                let m = self.members.get_mut(pid)?;
                if let Some(g) = m.guards.get_mut(&shard) {
                    g.closed = true;
                }
                None
            }
            ShardCommand::RevokeGuard { shard, reason } => {
                let keep = self.plant == Some(ShardPlant::RenewalIgnoresEpoch)
                    && reason == ShardStop::LeaseExpired;
                if !keep {
                    let m = self.members.get_mut(pid)?;
                    m.guards.remove(&shard);
                    if reason == ShardStop::HandedOver {
                        self.stats.sharded.handovers =
                            self.stats.sharded.handovers.saturating_add(1);
                    }
                }
                None
            }
            ShardCommand::DrainTasks { bound } => self.drain(pid, nanos(bound)),
            ShardCommand::Leave => self.start_leave(pid),
            ShardCommand::Failed { .. } => None,
            ShardCommand::Stop => {
                self.note_graceful_stop(pid);
                self.stop_member(pid, "stopped");
                None
            }
            _ => None,
        }
    }

    /// Awaits the ended guards' work, at most `bound` (local).
    fn drain(&mut self, pid: usize, bound: Nanos) -> Option<ShardEvent> {
        let m = self.members.get_mut(pid)?;
        let ended = m.tasks.keys().any(|s| !m.guards.contains_key(s));
        if !ended || self.plant == Some(ShardPlant::ReleaseBeforeWorkStops) {
            return Some(ShardEvent::Drained(true));
        }
        let epoch = m.next_gen;
        m.next_gen = epoch.saturating_add(1);
        m.draining = Some(epoch);
        let d = m.clock.true_for_local(bound);
        self.queue
            .push(self.now.saturating_add(d), Ev::DrainBound { pid, epoch });
        None
    }

    /// The drain's bound passed.
    pub(super) fn drain_bound(&mut self, pid: usize, epoch: u64) {
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        if m.draining == Some(epoch) {
            m.draining = None;
            self.feed(pid, ShardEvent::Drained(false));
        }
    }

    /// A task ended: the machine hears that work went idle (and a drain may end).
    pub(super) fn task_ended(&mut self, pid: usize) {
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        let ended = m.tasks.keys().any(|s| !m.guards.contains_key(s));
        if m.draining.is_some() && !ended {
            m.draining = None;
            self.feed(pid, ShardEvent::Drained(true));
        } else {
            self.feed(pid, ShardEvent::WorkIdle);
        }
    }

    /// The member's inbox changed: its watch fires now if it sleeps, or when it next sleeps
    /// (the watch armed by the cycle in flight).
    pub(super) fn inbox_changed(&mut self, pid: usize) {
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        if m.op.is_some() || m.paused_until > self.now {
            m.watch_fired = true;
        } else {
            self.feed(pid, ShardEvent::InboxChanged);
        }
    }

    /// Graceful shutdown: the machine hands every shard over and leaves.
    pub(super) fn request_shutdown(&mut self, pid: usize) {
        if let Some(m) = self.members.get_mut(pid).filter(|m| m.alive) {
            m.leaving = true;
            let label = self.label(pid);
            self.log(format!("{label} shuts down gracefully"));
            self.note_shutdown(pid);
            self.feed(pid, ShardEvent::ShutdownRequested);
        }
    }

    /// The member stops (its machine said so, or it crashed).
    pub(super) fn stop_member(&mut self, pid: usize, why: &str) {
        let Some(m) = self.members.get_mut(pid) else {
            return;
        };
        m.alive = false;
        m.guards.clear();
        m.tasks.clear();
        m.op = None;
        let node = m.node;
        if let Some(n) = self.nodes.get_mut(node) {
            if n.0 == Some(pid) {
                n.0 = None;
            }
        }
        let label = self.label(pid);
        self.log(format!("{label} {why}"));
    }

    pub(super) fn label(&self, pid: usize) -> String {
        self.members
            .get(pid)
            .map_or_else(|| format!("m{pid}"), |m| m.label.clone())
    }
}
