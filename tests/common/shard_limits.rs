//! A sharded election at the largest layout it accepts ([`MAX_SHARDS`]), through the public
//! API, written once for every store: MemDb (which enforces FoundationDB's size limits) in
//! `tests/shard/limits.rs`, a FoundationDB cluster in `tests/fdb_integration.rs`. A lone
//! member takes every shard; `members()` and `assignments()` answer; a second member joins and
//! takes its half by cooperative moves; the first leaves and the second owns everything. Every
//! transaction must fit the store's limits (FoundationDB refuses a value over 100,000 bytes
//! and a transaction over 10,000,000); the largest value stored is checked at the end.

#![allow(
    clippy::arithmetic_side_effects,
    reason = "test code: counts of a few hundred attempts"
)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::shard::{Coordinator, Layout, MAX_SHARDS, Member, ShardedElection};
use fdb_leader_election::{
    Candidate, CandidateId, ElectionConfig, ElectionError, ElectionTxn, MAX_VALUE_BYTES,
    ManualClock, Priority, ReadMode, ShardId, Weight,
};
use foundationdb_tuple::Subspace;

/// What the run measured.
#[derive(Debug, Default)]
pub struct Figures {
    /// Coordinator attempts until the lone member owned every shard.
    pub attempts_to_place: usize,
    /// Member cycles until then.
    pub cycles_to_place: usize,
    /// The largest inbox seen stored, in bytes.
    pub largest_inbox: usize,
    /// The largest value stored at the end, in bytes.
    pub largest_value: usize,
    /// Wall time of the whole run.
    pub took: Duration,
}

/// Why the run failed.
pub type Failed = Box<dyn std::error::Error + Send + Sync>;

fn failed(why: String) -> Failed {
    why.into()
}

/// Generous: one attempt reads every shard record.
const TIMEOUT: Duration = Duration::from_secs(60);

async fn run<D, T, F, Fut>(db: &D, body: F) -> Result<T, ElectionError>
where
    D: ElectionDatabase,
    F: Fn(D::Txn) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<T, ElectionError>> + Send,
    T: Send,
{
    db.transact(TIMEOUT, body).await
}

struct Sharded<D> {
    db: D,
    election: ShardedElection,
    clock: ManualClock,
    leader: Candidate,
    coordinator: Coordinator,
    largest_inbox: usize,
}

impl<D: ElectionDatabase> Sharded<D> {
    async fn cycle(&mut self, m: &Member, ready: &BTreeSet<ShardId>) -> Result<bool, Failed> {
        let e = self.election.clone();
        let cycle = run(&self.db, |txn| {
            let (e, m, ready) = (e.clone(), m.clone(), ready.clone());
            async move { e.member_cycle(&txn, &m, &ready).await }
        })
        .await?;
        let more = cycle.more_to_acquire() || !cycle.hand_over_requested().is_empty();
        m.adopt(cycle);
        self.note_inbox(m).await?;
        Ok(more)
    }

    async fn note_inbox(&mut self, m: &Member) -> Result<(), Failed> {
        let key = self.election.inbox_key(m.id());
        let len = run(&self.db, |txn| {
            let key = key.clone();
            async move {
                Ok(txn
                    .get(&key, ReadMode::Snapshot)
                    .await?
                    .map_or(0, |v| v.len()))
            }
        })
        .await?;
        self.largest_inbox = self.largest_inbox.max(len);
        Ok(())
    }

    /// One coordinator attempt (after renewing its leadership): how many steps it deferred.
    async fn coordinate(&mut self) -> Result<usize, Failed> {
        let coord = self.election.coordinator_election().clone();
        coord.run_cycle(&self.db, &self.leader).await?;
        let token = self
            .leader
            .fencing_token()
            .ok_or_else(|| failed("the coordinator lost its leadership".into()))?;
        let (e, c) = (self.election.clone(), self.coordinator.clone());
        let done = run(&self.db, |txn| {
            let (e, c) = (e.clone(), c.clone());
            async move { e.coordinate(&txn, &c, token).await }
        })
        .await?;
        Ok(done.deferred)
    }

    fn member(&self, name: &str) -> Result<Member, Failed> {
        Ok(Member::with_clock(
            CandidateId::random(name)?,
            Priority::new(0),
            Weight::ONE,
            Arc::new(self.clock.clone()),
        ))
    }

    /// Coordinator attempts and member cycles (every shard's work stopped) until `done`.
    async fn settle(
        &mut self,
        members: &[&Member],
        mut done: impl FnMut(&[&Member]) -> bool,
    ) -> Result<(usize, usize), Failed> {
        let all: BTreeSet<ShardId> = (0..MAX_SHARDS).map(ShardId::new).collect();
        let (mut attempts, mut cycles) = (0, 0);
        while !done(members) {
            attempts += 1;
            if attempts > 400 {
                return Err(failed(
                    "placement did not settle within 400 attempts".into(),
                ));
            }
            self.coordinate().await?;
            for m in members {
                // A member cycles again at once while its cycles have work (as the runner).
                while self.cycle(m, &all).await? {
                    cycles += 1;
                    if cycles > 10_000 {
                        return Err(failed("a member cycled 10,000 times".into()));
                    }
                }
            }
            self.clock.advance(Duration::from_millis(10));
        }
        Ok((attempts, cycles))
    }
}

/// Runs the scenario on `db` under `subspace` (fresh). Errors name what failed.
pub async fn largest_layout<D: ElectionDatabase>(
    db: D,
    subspace: Subspace,
) -> Result<Figures, Failed> {
    let started = Instant::now();
    let clock = ManualClock::new();
    let election = ShardedElection::new(subspace);
    // A lease far longer than the run: nobody lapses on the manual clock.
    let config = ElectionConfig::with_lease_duration(Duration::from_secs(3_600))?;
    let layout = Layout::new(MAX_SHARDS, MAX_SHARDS)?;
    let e = election.clone();
    run(&db, |txn| {
        let (e, config) = (e.clone(), config.clone());
        async move { e.initialize(&txn, &config, &layout).await }
    })
    .await?;
    let id = CandidateId::random("coordinator")?;
    let leader = Candidate::with_clock(id.clone(), Priority::new(1), Arc::new(clock.clone()));
    let coord = election.coordinator_election().clone();
    let c = leader.clone();
    run(&db, |txn| {
        let (coord, c) = (coord.clone(), c.clone());
        async move { coord.register_candidate(&txn, &c).await }
    })
    .await?;
    coord.run_cycle(&db, &leader).await?;
    let mut w = Sharded {
        db,
        election,
        coordinator: Coordinator::with_clock(id, Arc::new(clock.clone())),
        clock,
        leader,
        largest_inbox: 0,
    };
    let mut figures = Figures::default();

    // A lone member takes every shard.
    let a = w.member("a")?;
    w.cycle(&a, &BTreeSet::new()).await?;
    let m = usize::try_from(MAX_SHARDS).unwrap_or(usize::MAX);
    let (attempts, cycles) = w
        .settle(&[&a], |ms| ms[0].owned_shards().len() == m)
        .await?;
    figures.attempts_to_place = attempts;
    figures.cycles_to_place = cycles;

    // The views answer at this size.
    let e = w.election.clone();
    let (members, assignments) = run(&w.db, |txn| {
        let e = e.clone();
        async move {
            let members = e.members(&txn).await?;
            let assignments = e.assignments(&txn).await?;
            Ok((members.len(), assignments))
        }
    })
    .await?;
    if members != 1 || assignments.shards_of(a.id()).len() != m {
        return Err(failed(format!(
            "members() counts {members}, assignments() gives the lone member {} shards",
            assignments.shards_of(a.id()).len()
        )));
    }

    // A second member joins and takes its half, cooperatively.
    let b = w.member("b")?;
    w.cycle(&b, &BTreeSet::new()).await?;
    let half = m / 2;
    w.settle(&[&a, &b], |ms| {
        ms[0].owned_shards().len() == half && ms[1].owned_shards().len() == half
    })
    .await?;

    // The first leaves (one commit ends its epoch); the second ends with everything.
    let e = w.election.clone();
    run(&w.db, |txn| {
        let (e, a) = (e.clone(), a.clone());
        async move { e.leave(&txn, &a).await }
    })
    .await?;
    w.settle(&[&b], |ms| ms[0].owned_shards().len() == m)
        .await?;

    // Nothing stored passes the value limit (the store refused any such write already).
    let (begin, end) = w.election.subspace().range();
    let largest = run(&w.db, |txn| {
        let (begin, end) = (begin.clone(), end.clone());
        async move {
            let rows = txn.get_range(&begin, &end, ReadMode::Snapshot).await?;
            Ok(rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0))
        }
    })
    .await?;
    if largest > MAX_VALUE_BYTES {
        return Err(failed(format!("a stored value of {largest} bytes")));
    }
    figures.largest_value = largest;
    figures.largest_inbox = w.largest_inbox;
    figures.took = started.elapsed();
    Ok(figures)
}
