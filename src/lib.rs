//! Leader election on FoundationDB, SQLite and in memory: ballots that work as fencing tokens,
//! leases that stay safe under any clock skew, and priority preemption that hands leadership
//! over cooperatively.
//!
//! # Start here: the runner
//!
//! [`runner::Runner`] drives the election on a tokio task and hands you a guard while this
//! process leads: do leader-only work while the guard is valid, fenced with its ballot. The
//! store is [`MemDb`] here (one process); `SqliteDb` (feature `sqlite`) or an
//! `Arc<foundationdb::Database>` (feature `fdb-7_3`) elect across processes and machines.
//!
//! ```
//! use fdb_leader_election::runner::Runner;
//! use fdb_leader_election::{MemDb, Subspace};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runner = Runner::builder(MemDb::new(), Subspace::from("scheduler"))
//!     .label("scheduler-eu1") // plus random bits: a new candidate per incarnation
//!     .payload("10.0.0.1:7000") // published while leading
//!     .start()?;
//!
//! let guard = runner.elected().await.ok_or("the runner stopped")?;
//! let token = guard.fencing_token(); // the ballot: fence every leader-only write with it
//! guard.spawn(async move {
//!     // Leader-only work, fenced with `token`: cancelled, and awaited, when leadership ends.
//! });
//! assert_eq!(runner.leader().map(|l| l.ballot), Some(token));
//!
//! runner.shutdown().await; // stops the work, resigns for the best live candidate
//! assert!(guard.is_cancelled());
//! # Ok(())
//! # }
//! ```
//!
//! The README's quick start is the same as a whole program that stops on Ctrl-C. The
//! [`runner`] module says what the runner does; the guide (`docs/` in the repository and the
//! package) covers the rest: guarantees, fencing, the command line, sharding, operations.
//!
//! # Guarantees
//!
//! - **One owner per ballot, in the database.** The leader record is written only by
//!   conflict-checked transactions; each ballot is written with one owner and ballots never
//!   decrease: not on renewal, resign, re-initialisation or configuration change.
//! - **No two processes believe they lead at the same instant**, for any clock offsets, as long
//!   as every clock's *rate* error stays within the configured ρ (default 1%). No clock reading
//!   is ever stored or compared across processes: a leader believes for
//!   `lease × (1 − ρ) / (1 + ρ)` from a reading taken before the attempt that renewed, and a
//!   follower takes over only after it has watched the record unchanged for a full lease on its
//!   own clock.
//! - **External safety needs fencing.** A process can pause between checking its lease and
//!   acting. Writes inside FoundationDB are fenced with [`LeaderElection::fence`] in the same
//!   transaction; external resources compare the ballot with the highest they have seen
//!   ([`FenceGate`]).
//! - **Preemption without overlap.** A strictly higher-priority candidate *asks*; the leader
//!   stops believing, then writes a vacancy reserved for the requester, who fills it with the
//!   next ballot.
//!
//! # Protocol
//!
//! The durable leader record holds the ballot, the owner (id and priority), a renewal
//! counter, the lease duration the owner used, an optional handover request, an optional
//! reservation, an optional payload and the id of the attempt that wrote it. `(ballot,
//! renewal)` and the writing attempt are the record's observation identity (the writer tells
//! a write read back inside its own uncommitted transaction from a later real write of the
//! same numbers). A [`Candidate`] takes part in one election; build one per election.
//!
//! | situation | what a cycle does |
//! |---|---|
//! | leader, lease valid locally, record unchanged | renew: same ballot, renewal + 1 |
//! | leader, a strictly higher-priority request, preemption on, min tenure reached | step down, then write a vacancy reserved for the requester (after at most the grace while [busy](Candidate::set_busy)) |
//! | leader, elections disabled | step down, write an unreserved vacancy |
//! | vacancy reserved for me | acquire: ballot + 1 |
//! | unreserved vacancy | acquire, staggered by priority rank among live candidates |
//! | owned by another (or a lapsed record of mine), or reserved for another | after a full lease of unchanged observation (staggered by rank), take over: ballot + 1 |
//! | owned by a lower-priority leader, preemption on | write a handover request (observation unchanged) |
//!
//! Belief comes only from committed facts: local state is adopted only from a confirmed commit
//! ([`LeaderElection::run_cycle`], or [`Candidate::adopt`] after the commit) or by finding the
//! candidate's own attempt id in a record read by a later transaction, dated from that
//! attempt's start, so one logical claim never bumps the ballot twice. Reads inside the
//! transaction that wrote the record never make anyone believe or start timing, queries
//! never change local state, a shorter lease shortens the belief before its commit, and
//! operators' overrides never let a second process believe (`docs/guarantees.md`).
//!
//! # Cost
//!
//! [`LeaderElection::run_election_cycle`] reads the configuration, the leader record (snapshot)
//! and the candidate's own registration concurrently, writes the registration (heartbeat), and
//! writes the leader record only when it changes it. Follower cycles never conflict with
//! renewals and cost O(1) in the number of candidates; the registry is scanned only by listing,
//! eviction, resign, and once per lapsed lease to rank the followers.
//!
//! # The manual cycle (embedded `MemDb`)
//!
//! Without the runner, you run one cycle per heartbeat yourself, in your own transactions.
//!
//! ```
//! use fdb_leader_election::{
//!     Candidate, CandidateId, ElectionError, LeaderElection, MemDb, Priority,
//! };
//! use fdb_leader_election::Subspace;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), ElectionError> {
//! let db = MemDb::new();
//! let election = LeaderElection::new(Subspace::from("scheduler"));
//! let me = Candidate::new(CandidateId::random("worker")?, Priority::new(1));
//!
//! db.run(|txn, _| {
//!     let (election, me) = (election.clone(), me.clone());
//!     async move {
//!         election.initialize(&txn).await?;
//!         election.register_candidate(&txn, &me).await
//!     }
//! })
//! .await?;
//!
//! // One cycle per heartbeat, in a transaction of its own; adopted only after the commit.
//! let result = election.run_cycle(&db, &me).await?;
//! assert!(result.is_leader() && me.believes_it_leads());
//!
//! // Leader-only work, fenced in the same transaction.
//! let token = me.fencing_token().ok_or(ElectionError::NotInitialized)?;
//! db.run(|txn, _| {
//!     let election = election.clone();
//!     async move {
//!         election.fence(&txn, token).await?;
//!         use fdb_leader_election::ElectionTxn;
//!         txn.set(b"jobs/42", b"assigned");
//!         Ok::<(), ElectionError>(())
//!     }
//! })
//! .await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Inside your own transaction
//!
//! Inside your own retry loop, run [`LeaderElection::run_election_cycle`] in the transaction,
//! return the [`Cycle`] from it, and adopt it with [`Candidate::adopt`] only once the commit
//! succeeded. Adopting inside the transaction, before the commit, makes two believers when a
//! rival's commit wins: both hold the same ballot, and the fence admits both.
//!
//! # Features
//!
//! - `fdb` (with one of `fdb-7_1`, `fdb-7_3`, `fdb-7_4`): the FoundationDB adapter, so every
//!   operation runs on a `foundationdb::RetryableTransaction` inside `Database::run`, or on a
//!   transaction of the adapter's own retry loop (`ElectionDatabase for Arc<Database>`).
//! - `sqlite`: `sqlite::SqliteDb`, an embedded store in a SQLite file with the same transaction
//!   semantics as `MemDb`, so several processes on one host can elect a leader through a file.
//! - `cli`: the `fdb-leader` command line (implies `sqlite`).
#![doc(test(attr(deny(warnings))))]
#![forbid(unsafe_code)]

// The pure core, and the model it decides over.
mod candidate;
mod clock;
mod codec;
mod config;
mod core;
mod error;
mod id_rules;
mod ids;
mod keys;
mod record;

// The store layer and the stores.
#[cfg(feature = "fdb")]
pub mod fdb;
pub mod memdb;
pub mod raw;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod store;

// The APIs over them: the election, its fence, the runner, sharded leadership.
mod election;
mod fence;
pub mod runner;
pub mod shard;

// The model.
pub use candidate::cycle::{Cycle, CycleOutcome, ElectionResult};
pub use candidate::{Candidate, Leadership};
pub use clock::{Clock, LocalInstant, ManualClock, SystemClock, TokioClock};
pub use codec::{FENCE_FORMAT_VERSION, FORMAT_VERSION};
pub use config::{
    ConfigError, DEFAULT_CANDIDATE_TIMEOUT, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_LEASE_DURATION,
    DEFAULT_MAX_CLOCK_RATE_ERROR_PPM, ElectionConfig, ElectionConfigBuilder, MAX_DURATION,
    MIN_TRANSACTION_TIMEOUT, UnknownVersionPolicy, VersionPolicy,
};
pub use core::resign::ResignRejected;
pub use core::{Action, UnhealthyPolicy};
pub use error::{DecodeError, ElectionError, printable_key};
/// The place of an election in the store: a key prefix, FoundationDB's tuple-layer subspace
/// (the `foundationdb-tuple` crate's), re-exported so that one dependency is enough.
pub use foundationdb_tuple::Subspace;
pub use ids::{Ballot, CandidateId, MAX_CANDIDATE_ID_BYTES, Priority, ShardId, Weight};
pub use keys::MAX_KEY_BYTES;
pub use record::{
    AttemptId, CandidateInfo, CandidateRecord, Eligibility, LeaderRecord, LeaderState,
    MAX_METADATA_BYTES, MAX_PAYLOAD_BYTES, MAX_REASON_BYTES, MAX_VALUE_BYTES, Named, ResignRefusal,
};
/// The semantic version candidates register (docs/design.md §14.1): the `semver` crate's.
pub use semver::Version;

// The store layer and the stores.
pub use memdb::{
    CommitFault, FaultInjector, MemDb, MemDbStats, MemTransaction, MemTxnStats, ScriptedFaults,
};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteDb, SqliteOpenError, SqliteOptions, SqliteTransaction};
pub use store::database::{ElectionDatabase, TransactionTimedOut};
pub use store::limits::MAX_TRANSACTION_BYTES;
pub use store::retry::{MaybeCommitted, RetryClassify, RunOptions};
pub use store::size::TransactionSize;
pub use store::stats::{StoreStats, TxnStats};
pub use store::txn::{ElectionTxn, KeyValue, ReadMode, TxnError, TxnErrorKind, Watch};

// The APIs.
pub use election::{LeaderElection, OperatorOutcome, ResignOutcome};
pub use fence::{FenceGate, check_fence, fence_key, is_stale};
pub use runner::{LeadershipGuard, Runner};
