//! Simulated-time worlds for the side-by-side defect figures: the same hosts, clocks and
//! schedule for both designs, each host's belief sampled every millisecond of true time.
//!
//! True time is a shared `ManualClock` that advances 1 ms per step. Each host has its own
//! [`HostClock`] (offset and rate) over it, and runs one election cycle per heartbeat at its
//! own phase, through `MemDb::run`, as an application's loop would. Transactions take no
//! simulated time. A *partitioned* host keeps running and believing, but none of its
//! transactions reach the database. Both designs use their defaults (lease 10 s, heartbeat
//! 3 s, candidate timeout 15 s; this crate's ρ = 1%).
//!
//! What is counted, after every step, over every host that has joined:
//! - `overlap_instants`: steps at which two or more hosts believe they lead (this crate:
//!   `Candidate::leadership()`; v0.11: the last `Leader` result whose stored expiry has not
//!   passed on the host's own clock);
//! - `ballot_regressions`: a host starts using a fencing token (a ballot it did not hold
//!   before) that is not above every ballot any host used before.

#![warn(clippy::arithmetic_side_effects)]

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::{
    Candidate, CandidateId, ElectionConfig, LeaderElection, ManualClock, MemDb, Priority,
    ResignOutcome,
};
use foundationdb_tuple::Subspace;

use crate::clocks::HostClock;
use crate::v011::{V011Config, V011Election, V011Host};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

const STEP: Duration = Duration::from_millis(1);

/// Which design a world runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Design {
    /// This crate.
    Ours,
    /// The v0.11 recipe, re-implemented in `v011.rs`.
    V011,
}

#[derive(Debug)]
enum Node {
    Ours(Candidate),
    V011(V011Host),
}

#[derive(Debug)]
struct Host {
    node: Node,
    next_cycle: Duration,
    partitioned: bool,
    /// The fencing token the host used after its last cycle.
    token: Option<u64>,
}

/// What a world counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WorldStats {
    /// Steps sampled.
    pub(crate) samples: u64,
    /// Steps at which two or more hosts believed they lead.
    pub(crate) overlap_instants: u64,
    /// New fencing tokens put to use.
    pub(crate) acquisitions: u64,
    /// New fencing tokens not above every earlier one.
    pub(crate) ballot_regressions: u64,
}

impl WorldStats {
    fn add(&mut self, other: &WorldStats) {
        self.samples = self.samples.saturating_add(other.samples);
        self.overlap_instants = self.overlap_instants.saturating_add(other.overlap_instants);
        self.acquisitions = self.acquisitions.saturating_add(other.acquisitions);
        self.ballot_regressions = self
            .ballot_regressions
            .saturating_add(other.ballot_regressions);
    }
}

/// One election in simulated time.
#[derive(Debug)]
struct World {
    design: Design,
    name: String,
    truth: ManualClock,
    now: Duration,
    db: MemDb,
    ours: LeaderElection,
    v011: V011Election,
    heartbeat: Duration,
    /// Leaders mark themselves busy (leader work in flight), so this crate's leader finishes
    /// its work (at most the handover grace) before it hands over.
    busy_leaders: bool,
    hosts: Vec<Host>,
    max_ballot: Option<u64>,
    stats: WorldStats,
}

impl World {
    async fn new(design: Design, name: &str) -> Res<Self> {
        let truth = ManualClock::new();
        let db = MemDb::with_clock(Arc::new(truth.clone()));
        let subspace = Subspace::from(name);
        let ours = LeaderElection::new(subspace.clone());
        let v011 = V011Election::new(&subspace);
        let heartbeat = match design {
            Design::Ours => {
                let config = ElectionConfig::default();
                db.run(|txn, _| {
                    let (e, c) = (ours.clone(), config.clone());
                    async move { e.initialize_with_config(&txn, &c).await }
                })
                .await?;
                config.heartbeat_interval()
            }
            Design::V011 => {
                let config = V011Config::default();
                db.run(|txn, _| {
                    let e = v011.clone();
                    async move { e.initialize_with_config(&txn, config).await }
                })
                .await?;
                config.heartbeat_interval
            }
        };
        Ok(World {
            design,
            name: name.to_owned(),
            truth,
            now: Duration::ZERO,
            db,
            ours,
            v011,
            heartbeat,
            busy_leaders: false,
            hosts: Vec::new(),
            max_ballot: None,
            stats: WorldStats::default(),
        })
    }

    /// A host with this priority and clock joins: it registers now and runs its first cycle
    /// `first_cycle_in` from now. Returns its index.
    async fn join(
        &mut self,
        priority: i32,
        offset_ms: i64,
        rate_ppm: i64,
        first_cycle_in: Duration,
    ) -> Res<usize> {
        let index = self.hosts.len();
        let clock = Arc::new(HostClock::new(
            Arc::new(self.truth.clone()),
            offset_ms,
            rate_ppm,
        ));
        let node = match self.design {
            Design::Ours => {
                let id = CandidateId::with_nonce(&self.name, u64::try_from(index)?)?;
                let c = Candidate::with_clock(id, Priority::new(priority), clock);
                self.db
                    .run(|txn, _| {
                        let (e, c) = (self.ours.clone(), c.clone());
                        async move { e.register_candidate(&txn, &c).await }
                    })
                    .await?;
                Node::Ours(c)
            }
            Design::V011 => {
                let h = V011Host::new(format!("{}-{index}", self.name), priority, clock);
                h.register(&self.db, &self.v011).await?;
                Node::V011(h)
            }
        };
        self.hosts.push(Host {
            node,
            next_cycle: self.now.saturating_add(first_cycle_in),
            partitioned: false,
            token: None,
        });
        Ok(index)
    }

    fn believes(&self, i: usize) -> bool {
        match self.hosts.get(i).map(|h| &h.node) {
            Some(Node::Ours(c)) => c.leadership().is_some(),
            Some(Node::V011(h)) => h.leadership().is_some(),
            None => false,
        }
    }

    fn believers(&self) -> usize {
        (0..self.hosts.len()).filter(|&i| self.believes(i)).count()
    }

    /// The first host that believes it leads.
    fn leader(&self) -> Option<usize> {
        (0..self.hosts.len()).find(|&i| self.believes(i))
    }

    async fn cycle(&mut self, i: usize) -> Res<()> {
        let Some(host) = self.hosts.get(i) else {
            return Ok(());
        };
        let token = match &host.node {
            Node::Ours(c) => {
                let cycle = self
                    .db
                    .run(|txn, _| {
                        let (e, c) = (self.ours.clone(), c.clone());
                        async move { e.run_election_cycle(&txn, &c).await }
                    })
                    .await?;
                // Adopted only now that the commit returned Ok.
                c.adopt(cycle);
                let token = c.fencing_token().map(|b| b.get());
                if self.busy_leaders {
                    c.set_busy(token.is_some());
                }
                token
            }
            Node::V011(h) => {
                h.cycle(&self.db, &self.v011).await?;
                h.leadership().map(|s| s.ballot)
            }
        };
        self.record_token(i, token);
        Ok(())
    }

    fn record_token(&mut self, i: usize, token: Option<u64>) {
        let Some(host) = self.hosts.get_mut(i) else {
            return;
        };
        let previous = std::mem::replace(&mut host.token, token);
        let Some(t) = token else {
            return;
        };
        if previous == Some(t) {
            return;
        }
        self.stats.acquisitions = self.stats.acquisitions.saturating_add(1);
        if self.max_ballot.is_some_and(|max| t <= max) {
            self.stats.ballot_regressions = self.stats.ballot_regressions.saturating_add(1);
        }
        self.max_ballot = Some(self.max_ballot.map_or(t, |max| max.max(t)));
    }

    /// Advances true time by one step, runs the cycles that are due, then samples every
    /// host's belief.
    async fn step(&mut self) -> Res<()> {
        self.truth.advance(STEP);
        self.now = self.now.saturating_add(STEP);
        for i in 0..self.hosts.len() {
            let due = self.hosts.get(i).is_some_and(|h| h.next_cycle <= self.now);
            if !due {
                continue;
            }
            let partitioned = self.hosts.get(i).is_some_and(|h| h.partitioned);
            if !partitioned {
                self.cycle(i).await?;
            }
            if let Some(h) = self.hosts.get_mut(i) {
                h.next_cycle = self.now.saturating_add(self.heartbeat);
            }
        }
        self.stats.samples = self.stats.samples.saturating_add(1);
        if self.believers() > 1 {
            self.stats.overlap_instants = self.stats.overlap_instants.saturating_add(1);
        }
        Ok(())
    }

    async fn run_for(&mut self, d: Duration) -> Res<()> {
        let end = self.now.saturating_add(d);
        while self.now < end {
            self.step().await?;
        }
        Ok(())
    }

    fn set_partitioned(&mut self, i: usize, partitioned: bool) {
        if let Some(h) = self.hosts.get_mut(i) {
            h.partitioned = partitioned;
        }
    }

    /// The host that believes it leads resigns, through each design's own resign.
    async fn resign(&mut self, i: usize) -> Res<bool> {
        let Some(host) = self.hosts.get(i) else {
            return Ok(false);
        };
        let resigned = match &host.node {
            Node::Ours(c) => {
                let expected = c.fencing_token();
                let outcome = self
                    .db
                    .run(|txn, _| {
                        let (e, c) = (self.ours.clone(), c.clone());
                        async move { e.resign_leadership(&txn, &c, expected).await }
                    })
                    .await?;
                matches!(outcome, ResignOutcome::Resigned { .. })
            }
            Node::V011(h) => h.resign(&self.db, &self.v011).await?,
        };
        if let Some(h) = self.hosts.get_mut(i) {
            h.token = None;
        }
        Ok(resigned)
    }

    /// Steps until some host believes it leads (at most `limit`).
    async fn await_leader(&mut self, limit: Duration) -> Res<usize> {
        let end = self.now.saturating_add(limit);
        loop {
            if let Some(l) = self.leader() {
                return Ok(l);
            }
            if self.now >= end {
                return Err(format!(
                    "{:?} {}: no leader within {limit:?}",
                    self.design, self.name
                )
                .into());
            }
            self.step().await?;
        }
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A rolling deploy: a priority-1 host leads and works; a priority-2 host joins, then a
/// priority-3 host. Six trials, each with the joins at a different phase of the leader's
/// heartbeat. Fails if the newest host does not end up leading (no vacuous result).
pub(crate) async fn rolling_deploy(design: Design) -> Res<WorldStats> {
    let mut total = WorldStats::default();
    for trial in 0..6u64 {
        let mut w = World::new(design, &format!("deploy-{trial}")).await?;
        w.busy_leaders = true;
        w.join(1, 0, 0, Duration::ZERO).await?;
        w.run_for(secs(8)).await?;
        let phase = Duration::from_millis(trial.saturating_mul(487) % 3000);
        w.run_for(phase).await?;
        w.join(2, 0, 0, Duration::ZERO).await?;
        w.run_for(secs(18)).await?;
        w.run_for(phase).await?;
        let newest = w.join(3, 0, 0, Duration::ZERO).await?;
        w.run_for(secs(18)).await?;
        if w.leader() != Some(newest) || w.believers() != 1 {
            return Err(
                format!("{design:?} deploy {trial}: the priority-3 host does not lead").into(),
            );
        }
        total.add(&w.stats);
    }
    Ok(total)
}

/// Hosts whose clocks are offset by −2 s, 0 and +2 s (the skew foundationdb-rs's own
/// simulation used) and whose rates are off by −0.9%, 0 and +0.9% (within this crate's
/// ρ = 1%). Six trials, one per assignment of the three clocks to the three hosts. In each,
/// the leader is partitioned from the database twice, for 25 s each time: it keeps running,
/// and believes until its own deadline. Fails unless another host takes over each time.
pub(crate) async fn clock_skew(design: Design) -> Res<WorldStats> {
    const CLOCKS: [(i64, i64); 3] = [(-2_000, -9_000), (0, 0), (2_000, 9_000)];
    const ORDERS: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    let mut total = WorldStats::default();
    for (trial, order) in ORDERS.iter().enumerate() {
        let mut w = World::new(design, &format!("skew-{trial}")).await?;
        for (host, &clock) in order.iter().enumerate() {
            let (offset_ms, rate_ppm) = CLOCKS[clock];
            let phase = Duration::from_millis(u64::try_from(host)?.saturating_mul(1_000));
            w.join(1, offset_ms, rate_ppm, phase).await?;
        }
        let mut leader = w.await_leader(secs(12)).await?;
        w.run_for(secs(6)).await?;
        for _episode in 0..2 {
            w.set_partitioned(leader, true);
            w.run_for(secs(25)).await?;
            let next = (0..w.hosts.len()).find(|&i| i != leader && w.believes(i));
            w.set_partitioned(leader, false);
            leader = next.ok_or_else(|| {
                format!("{design:?} skew {trial}: no takeover from a partitioned leader")
            })?;
            w.run_for(secs(8)).await?;
        }
        total.add(&w.stats);
    }
    Ok(total)
}

/// Resign and reacquire: three hosts; twenty times, the leader resigns (this crate: a vacancy
/// reserved for the best live candidate; v0.11: the leader key is deleted) and the election
/// goes on for 7 s. Fails unless leadership is reacquired after each resign.
pub(crate) async fn resign_reacquire(design: Design) -> Res<WorldStats> {
    const RESIGNS: u64 = 20;
    let mut w = World::new(design, "resign").await?;
    for host in 0..3u64 {
        w.join(1, 0, 0, Duration::from_millis(host.saturating_mul(1_000)))
            .await?;
    }
    w.await_leader(secs(12)).await?;
    w.run_for(secs(4)).await?;
    for round in 0..RESIGNS {
        let leader = w.await_leader(secs(12)).await?;
        if !w.resign(leader).await? {
            return Err(format!("{design:?}: resign {round} was rejected").into());
        }
        w.run_for(secs(7)).await?;
    }
    if w.stats.acquisitions <= RESIGNS {
        return Err(format!(
            "{design:?}: {} acquisitions for {RESIGNS} resigns",
            w.stats.acquisitions
        )
        .into());
    }
    Ok(w.stats)
}
