//! Helpers shared by the runner tests: a fast configuration, runners on a paused-time MemDb,
//! a callback recorder, a backend that can be cut off from the database, and waiting helpers.

#![allow(dead_code, unreachable_pub)]

#[path = "../common/timings.rs"]
mod timings;
#[path = "../common/txn.rs"]
mod txn;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fdb_leader_election::memdb::{CommitContext, CommitDecision};
use fdb_leader_election::runner::{
    BuildError, ElectionCallbacks, ElectionDatabase, LeaderChange, LeadershipGuard, Runner,
    RunnerBuilder, StopReason,
};
use fdb_leader_election::{
    Ballot, ElectionConfig, ElectionError, FaultInjector, LeaderElection, MemDb, Named, Priority,
    ScriptedFaults, TokioClock, TxnError, TxnErrorKind,
};
use foundationdb_tuple::Subspace;
#[allow(unused_imports)]
pub use timings::{timed, timings};
use tokio::time::Instant;
#[allow(unused_imports)]
pub(crate) use txn::in_txn;

const LEASE_MS: u64 = 300;
const HEARTBEAT_MS: u64 = 100;
pub const LEASE: Duration = Duration::from_millis(LEASE_MS);
pub const HEARTBEAT: Duration = Duration::from_millis(HEARTBEAT_MS);

pub fn subspace() -> Subspace {
    Subspace::from("election")
}

/// Lease 300 ms, heartbeat 100 ms, 30 ms per transaction, 10 ms stagger per rank.
pub fn config() -> ElectionConfig {
    timed(LEASE_MS, HEARTBEAT_MS, 600, 30)
        .takeover_stagger(Duration::from_millis(10))
        .handover_grace(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// Marks `name` eligible or not (reason "review"), as an operator does, in the election of
/// `runner`.
pub async fn mark(db: &MemDb, runner: &Runner, name: &str, eligible: bool) {
    let e: LeaderElection = runner.election().clone();
    let name = name.to_owned();
    in_txn!(db, [e, name], |txn| {
        e.set_eligible(&txn, &name, eligible, "review").await
    })
    .unwrap();
}

/// The drain tests' set-up: `alpha` (priority `alpha`, `callbacks` if any) leads with
/// `config()` and `grace`, with work in flight for a minute (longer than any grace); then
/// `bravo` (priority `bravo`) starts with the same configuration.
pub struct Busy {
    pub a: Runner,
    pub ga: LeadershipGuard,
    pub task: tokio::task::JoinHandle<Option<()>>,
    pub b: Runner,
}

pub async fn busy_leader_then(
    db: &MemDb,
    grace: Duration,
    (alpha, bravo): (i32, i32),
    callbacks: Option<Recorder>,
) -> Busy {
    let cfg = config().to_builder().handover_grace(grace).build().unwrap();
    let mut a = builder(db.clone(), "alpha", alpha).config(cfg.clone());
    if let Some(rec) = callbacks {
        a = a.callbacks(rec);
    }
    let a = a.start().unwrap();
    let ga = a.elected().await.unwrap();
    let task = ga.spawn(async {
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
    let b = builder(db.clone(), "bravo", bravo)
        .config(cfg)
        .start()
        .unwrap();
    Busy { a, ga, task, b }
}

/// `err` is `BuildError::Conflicting` naming `setting` and what it contradicts, `with`.
#[track_caller]
pub fn assert_conflicting(err: &BuildError, setting: &str, with: &str) {
    assert!(
        matches!(err, BuildError::Conflicting { setting: s, with: w } if *s == setting && *w == with),
        "{err:?}"
    );
}

/// Starts `name` (priority `priority`) on `db` with a [`Recorder`], and waits until it leads:
/// the runner, its recorder and its guard.
pub async fn recorded_leader<D: ElectionDatabase>(
    db: D,
    name: &str,
    priority: i32,
) -> (Runner, Recorder, LeadershipGuard) {
    let rec = Recorder::default();
    let runner = builder(db, name, priority)
        .callbacks(rec.clone())
        .start()
        .unwrap();
    let guard = runner.elected().await.unwrap();
    (runner, rec, guard)
}

/// A MemDb with scripted faults (none yet), the faults to script.
pub fn faulty_db() -> (MemDb, ScriptedFaults) {
    let db = db();
    let faults = ScriptedFaults::new();
    db.set_fault_injector(Arc::new(faults.clone()));
    (db, faults)
}

/// A MemDb whose transactions age on tokio's (paused) clock.
pub fn db() -> MemDb {
    MemDb::with_clock(Arc::new(TokioClock::new()))
}

pub fn builder<D: ElectionDatabase>(db: D, name: &str, priority: i32) -> RunnerBuilder<D> {
    Runner::builder(db, subspace())
        .label(name)
        .priority(Priority::new(priority))
        .payload(format!("{name}:7000"))
        .config(config())
        .seed(u64::from(name.bytes().map(u32::from).sum::<u32>()))
}

/// The leader key of the test election.
pub fn leader_key() -> Vec<u8> {
    subspace().pack(&("leader",))
}

/// Counts the commits that write the leader record.
#[derive(Debug, Default, Clone)]
pub struct LeaderWrites(pub Arc<AtomicU64>);

impl LeaderWrites {
    pub fn install(db: &MemDb) -> Self {
        let w = LeaderWrites::default();
        db.set_fault_injector(Arc::new(w.clone()));
        w
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl FaultInjector for LeaderWrites {
    fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
        if ctx.written_keys.contains(&leader_key()) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        CommitDecision::proceed()
    }
}

/// What a runner's callbacks reported, with the (paused) tokio time of each.
#[derive(Debug, Clone)]
pub enum Seen {
    Elected(Ballot, LeadershipGuard),
    Stopped(Ballot, StopReason),
    Changed(LeaderChange),
    Handover(Named),
}

#[derive(Debug, Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<(Instant, Seen)>>>);

impl Recorder {
    pub fn all(&self) -> Vec<(Instant, Seen)> {
        self.0.lock().unwrap().clone()
    }
    pub fn elected(&self) -> Vec<Ballot> {
        self.all()
            .into_iter()
            .filter_map(|(_, s)| match s {
                Seen::Elected(b, _) => Some(b),
                _ => None,
            })
            .collect()
    }
    pub fn stopped(&self) -> Vec<(Ballot, StopReason)> {
        self.all()
            .into_iter()
            .filter_map(|(_, s)| match s {
                Seen::Stopped(b, r) => Some((b, r)),
                _ => None,
            })
            .collect()
    }
    pub fn changes(&self) -> Vec<LeaderChange> {
        self.all()
            .into_iter()
            .filter_map(|(_, s)| match s {
                Seen::Changed(c) => Some(c),
                _ => None,
            })
            .collect()
    }
    fn push(&self, s: Seen) {
        self.0.lock().unwrap().push((Instant::now(), s));
    }
}

impl ElectionCallbacks for Recorder {
    fn on_elected(&self, guard: &LeadershipGuard) {
        self.push(Seen::Elected(guard.ballot(), guard.clone()));
    }
    fn on_stopped(&self, ballot: Ballot, reason: &StopReason) {
        self.push(Seen::Stopped(ballot, reason.clone()));
    }
    fn on_leader_changed(&self, change: &LeaderChange) {
        self.push(Seen::Changed(change.clone()));
    }
    fn on_handover_requested(&self, requester: &Named, _guard: &LeadershipGuard) {
        self.push(Seen::Handover(requester.clone()));
    }
}

/// A MemDb that one runner can be cut off from (a network partition of that process).
#[derive(Clone, Debug)]
pub struct Cuttable {
    pub db: MemDb,
    pub cut: Arc<AtomicBool>,
}

impl Cuttable {
    pub fn new(db: &MemDb) -> Self {
        Cuttable {
            db: db.clone(),
            cut: Arc::new(AtomicBool::new(false)),
        }
    }
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
    }
}

impl ElectionDatabase for Cuttable {
    type Txn = <MemDb as ElectionDatabase>::Txn;

    fn transact<F, Fut, T>(
        &self,
        timeout: Duration,
        body: F,
    ) -> impl std::future::Future<Output = Result<T, ElectionError>> + Send
    where
        F: Fn(Self::Txn) -> Fut + Send + Sync,
        Fut: std::future::Future<Output = Result<T, ElectionError>> + Send,
        T: Send,
    {
        let cut = self.cut.load(Ordering::SeqCst);
        let db = self.db.clone();
        async move {
            if cut {
                // Like an unreachable cluster: the attempt hangs until it times out.
                tokio::time::sleep(timeout).await;
                return Err(ElectionError::Database(TxnError::new(
                    TxnErrorKind::Unavailable,
                )));
            }
            db.transact(timeout, body).await
        }
    }
}

/// Waits (in paused time, 1 ms steps) until `cond` holds; panics after `limit`.
pub async fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if cond() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The runner that leads now, if exactly one does (panics if two do).
pub fn sole_leader<'a>(runners: &'a [&'a Runner]) -> Option<&'a Runner> {
    let leaders: Vec<&Runner> = runners.iter().copied().filter(|r| r.is_leader()).collect();
    assert!(leaders.len() <= 1, "two runners lead at once: {leaders:?}");
    leaders.first().copied()
}
