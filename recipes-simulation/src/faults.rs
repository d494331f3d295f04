//! The database fault injector and the fault counters.
//!
//! [`SimFaults`] draws nothing itself: the event loop decides every fault with the world's one
//! random number generator and tells the injector (a planned commit fault for a transaction,
//! an outage, a partitioned process), so the injector only looks decisions up. That keeps all
//! randomness in event order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use fdb_leader_election::memdb::{
    CommitContext, CommitDecision, CommitFault, FaultInjector, ReadContext, ReadDecision,
};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// What the simulation does to one commit besides delaying it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drawn {
    /// A fault the database injects.
    Db(CommitFault),
    /// The commit applies now; its reply reaches the process late.
    SlowReply,
}

/// Draws a commit's fault (per commit: 1.5% unknown result that applied, 1% unknown that did
/// not, 0.5% unknown while in flight, landing later, 1.5% conflict, 1% unavailable), or a slow
/// reply (1.5%), counting the database faults in `counts` (a slow reply is counted when it
/// happens). Both worlds draw with it.
pub(crate) fn draw_commit_fault(rng: &mut ChaCha8Rng, counts: &mut FaultCounts) -> Option<Drawn> {
    let r = rng.random_range(0..1_000u32);
    let (fault, counter) = match r {
        0..15 => (CommitFault::UnknownApplied, &mut counts.unknown_applied),
        15..25 => (
            CommitFault::UnknownNotApplied,
            &mut counts.unknown_not_applied,
        ),
        25..30 => (
            CommitFault::UnknownAppliedLater,
            &mut counts.unknown_lands_later,
        ),
        30..45 => (CommitFault::Conflict, &mut counts.conflicts),
        45..55 => (CommitFault::Unavailable, &mut counts.unavailable),
        55..70 => return Some(Drawn::SlowReply),
        _ => return None,
    };
    *counter = counter.saturating_add(1);
    Some(Drawn::Db(fault))
}

/// A world's store: true time, a MemDb on it with a [`SimFaults`] injector, and the
/// current-thread runtime the library's calls run on. Both worlds start from it.
///
/// # Errors
///
/// The runtime could not be built.
pub(crate) fn sim_store() -> Result<
    (
        crate::time::TrueTime,
        fdb_leader_election::MemDb,
        SimFaults,
        tokio::runtime::Runtime,
    ),
    String,
> {
    let time = crate::time::TrueTime::default();
    let db = fdb_leader_election::MemDb::with_clock(Arc::new(crate::time::TrueClock(time.clone())));
    let faults = SimFaults::default();
    db.set_fault_injector(Arc::new(faults.clone()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    Ok((time, db, faults, rt))
}

/// How long until a commit, for a world with this `lease`: usually 0.5–15 ms; 3% a tenth of a
/// lease to a lease, 0.5% one to four leases (long enough for `transaction_too_old`); in the
/// quiet phase at most [`QUIET_LATENCY_MAX`](crate::params::QUIET_LATENCY_MAX). Returns the
/// delay and whether it is a slow commit (counted in `counts`). Both worlds draw with it.
pub(crate) fn commit_delay(
    rng: &mut ChaCha8Rng,
    lease: u64,
    quiet: bool,
    counts: &mut FaultCounts,
) -> (u64, bool) {
    if quiet {
        return (
            between(rng, 500_000, crate::params::QUIET_LATENCY_MAX),
            false,
        );
    }
    let r = rng.random_range(0..1_000u32);
    let milli = if r < 5 {
        between(
            rng,
            1_000,
            crate::params::MAX_FAULT_LEASES.saturating_mul(1_000),
        )
    } else if r < 35 {
        between(rng, 100, 1_000)
    } else {
        return (
            between(rng, 500_000, crate::params::COMMIT_LATENCY_MAX),
            false,
        );
    };
    counts.slow_commits = counts.slow_commits.saturating_add(1);
    (crate::time::scale(lease, milli, 1_000), true)
}

/// A number in `lo..=hi` (`lo` if the range is empty).
pub(crate) fn between(rng: &mut ChaCha8Rng, lo: u64, hi: u64) -> u64 {
    if hi <= lo {
        lo
    } else {
        rng.random_range(lo..=hi)
    }
}

#[derive(Debug, Default)]
struct State {
    /// The whole database is unavailable.
    outage: bool,
    /// Processes cut off from the database.
    partitioned: BTreeSet<usize>,
    /// Which process opened each open transaction.
    owner: BTreeMap<u64, usize>,
    /// Faults planned for the next commit of a transaction.
    planned: BTreeMap<u64, CommitFault>,
    /// The keys written by the last commit seen.
    last_written: Vec<Vec<u8>>,
    /// While set (oracle reads), nothing fails.
    bypass: bool,
}

/// The simulation's [`FaultInjector`]: outages, partitions and planned commit faults.
#[derive(Clone, Debug, Default)]
pub struct SimFaults {
    state: Arc<Mutex<State>>,
}

impl SimFaults {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Records that process `pid` opened transaction `txn_id`.
    pub fn open(&self, txn_id: u64, pid: usize) {
        self.with(|s| s.owner.insert(txn_id, pid));
    }

    /// Forgets transaction `txn_id` (committed or dropped).
    pub fn close(&self, txn_id: u64) {
        self.with(|s| {
            s.owner.remove(&txn_id);
            s.planned.remove(&txn_id);
        });
    }

    /// Makes the next commit of `txn_id` fail with `fault`.
    pub fn plan(&self, txn_id: u64, fault: CommitFault) {
        self.with(|s| s.planned.insert(txn_id, fault));
    }

    /// Starts or ends a whole-database outage.
    pub fn set_outage(&self, outage: bool) {
        self.with(|s| s.outage = outage);
    }

    /// Whether the database is out.
    pub fn outage(&self) -> bool {
        self.with(|s| s.outage)
    }

    /// Cuts process `pid` off (or heals it).
    pub fn set_partitioned(&self, pid: usize, partitioned: bool) {
        self.with(|s| {
            if partitioned {
                s.partitioned.insert(pid)
            } else {
                s.partitioned.remove(&pid)
            }
        });
    }

    /// Whether process `pid` is cut off.
    pub fn is_partitioned(&self, pid: usize) -> bool {
        self.with(|s| s.partitioned.contains(&pid))
    }

    /// Whether transaction `txn_id` would fail as unavailable now.
    pub fn blocked(&self, txn_id: u64) -> bool {
        self.with(|s| s.blocks(txn_id))
    }

    /// While `bypass` is set, every read and commit proceeds (for the oracles' reads).
    pub fn set_bypass(&self, bypass: bool) {
        self.with(|s| s.bypass = bypass);
    }

    /// The keys written by the last commit.
    pub fn take_last_written(&self) -> Vec<Vec<u8>> {
        self.with(|s| std::mem::take(&mut s.last_written))
    }
}

impl State {
    fn blocks(&self, txn_id: u64) -> bool {
        !self.bypass
            && (self.outage
                || self
                    .owner
                    .get(&txn_id)
                    .is_some_and(|pid| self.partitioned.contains(pid)))
    }
}

impl FaultInjector for SimFaults {
    fn on_read(&self, ctx: &ReadContext<'_>) -> ReadDecision {
        if self.with(|s| s.blocks(ctx.txn_id)) {
            ReadDecision::unavailable()
        } else {
            ReadDecision::proceed()
        }
    }

    fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
        self.with(|s| {
            if !s.bypass {
                s.last_written = ctx.written_keys.iter().map(<[u8]>::to_vec).collect();
            }
            let planned = s.planned.remove(&ctx.txn_id);
            if s.blocks(ctx.txn_id) {
                CommitDecision::fail(CommitFault::Unavailable)
            } else {
                match planned {
                    Some(fault) => CommitDecision::fail(fault),
                    None => CommitDecision::proceed(),
                }
            }
        })
    }
}

/// How many faults of each kind were injected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Processes crashed.
    pub crashes: u64,
    /// Stop-the-world pauses at random points.
    pub pauses: u64,
    /// Pauses between a lease check and the fenced write that follows it.
    pub check_act_pauses: u64,
    /// Processes cut off from the database.
    pub partitions: u64,
    /// Whole-database outages.
    pub outages: u64,
    /// Commits that applied but whose reply was lost.
    pub unknown_applied: u64,
    /// Commits that did not apply and whose reply was lost.
    pub unknown_not_applied: u64,
    /// Commits whose reply was lost while they were still in flight: they land after the
    /// client's next transaction has started.
    pub unknown_lands_later: u64,
    /// Injected conflicts.
    pub conflicts: u64,
    /// Commits failed as unavailable (injected singly, besides partitions and outages).
    pub unavailable: u64,
    /// Commits delayed by a tenth of a lease or more.
    pub slow_commits: u64,
    /// Commits of crashed processes that still landed.
    pub zombie_commits: u64,
    /// Commits that applied at once and whose reply reached the process late (up to 1.5
    /// times its transaction timeout, so the executor's timeout may fire first).
    pub slow_replies: u64,
}

impl FaultCounts {
    /// Every fault, in report order.
    pub fn named(&self) -> [(&'static str, u64); 13] {
        [
            ("crash", self.crashes),
            ("pause", self.pauses),
            ("check_act_pause", self.check_act_pauses),
            ("partition", self.partitions),
            ("outage", self.outages),
            ("unknown_applied", self.unknown_applied),
            ("unknown_not_applied", self.unknown_not_applied),
            ("unknown_lands_later", self.unknown_lands_later),
            ("injected_conflict", self.conflicts),
            ("injected_unavailable", self.unavailable),
            ("slow_commit", self.slow_commits),
            ("zombie_commit", self.zombie_commits),
            ("slow_reply", self.slow_replies),
        ]
    }

    /// The total.
    pub fn total(&self) -> u64 {
        self.named()
            .iter()
            .fold(0u64, |acc, (_, n)| acc.saturating_add(*n))
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &FaultCounts) {
        let pairs: [(&mut u64, u64); 13] = [
            (&mut self.crashes, other.crashes),
            (&mut self.pauses, other.pauses),
            (&mut self.check_act_pauses, other.check_act_pauses),
            (&mut self.partitions, other.partitions),
            (&mut self.outages, other.outages),
            (&mut self.unknown_applied, other.unknown_applied),
            (&mut self.unknown_not_applied, other.unknown_not_applied),
            (&mut self.unknown_lands_later, other.unknown_lands_later),
            (&mut self.conflicts, other.conflicts),
            (&mut self.unavailable, other.unavailable),
            (&mut self.slow_commits, other.slow_commits),
            (&mut self.zombie_commits, other.zombie_commits),
            (&mut self.slow_replies, other.slow_replies),
        ];
        for (mine, theirs) in pairs {
            *mine = mine.saturating_add(theirs);
        }
    }
}
