//! The tokio runner: correct leader election for a service in a few lines, on [`MemDb`] and
//! on FoundationDB alike.
//!
//! [`Runner::builder`] starts a task that registers the candidate (creating the election if
//! needed) and drives [`LeaderElection::run_election_cycle`]:
//!
//! - **one cycle per heartbeat**, with jitter (80–100% of the heartbeat, from an injectable
//!   seed), and earlier when it matters: at the exact instant a lapsed lease may be taken over
//!   ([`Cycle::next_action_at`]), before the local lease runs out, and at once when a **watch**
//!   on the leader record reports a change other than a renewal (a handover request, a
//!   vacancy, a new leader). Without watches (refused by the database) it polls every
//!   heartbeat.
//! - **bounded attempts**: each transaction ends within the configured
//!   [`transaction_timeout`](crate::ElectionConfig::transaction_timeout) (shorter than the
//!   heartbeat); a timed-out attempt counts as maybe committed, which the election recognises
//!   from its attempt id.
//! - **never gives up**: every error is retried with capped exponential back-off (and logged
//!   at most once per 10 s); only shutdown (or [`OnLoss::Exit`] after a loss) ends
//!   participation.
//! - **never waits for the application**: callbacks run on their own task, guarded work on
//!   its own tasks.
//!
//! When elected, the application gets a [`LeadershipGuard`]: cancelled on loss, on local
//! lease expiry (even while the database is unreachable) and on shutdown, with
//! [`is_valid`](LeadershipGuard::is_valid), the fencing token, the deadline, and
//! [`spawn`](LeadershipGuard::spawn) for leader work that is cancelled and awaited when the
//! leadership ends. Everyone — followers and [observers](Runner::observer) too — gets the
//! current leader ([`Runner::leader`]) and a stream of [`LeaderChange`]s; [`ElectionCallbacks`]
//! adds elected / stopped / leader changed / handover requested.
//!
//! [`Runner::health`] fails only for a wedged leader or a dead runner task;
//! [`Runner::state`] says what the runner is doing. Logs are `tracing` events in an
//! `election` span; metrics go through the `metrics` facade (names in [`metrics`]).
//!
//! [`Runner::shutdown`] stops new leader work, cancels and awaits guarded tasks, then
//! resigns with a reservation for the best live candidate and unregisters in one commit, so
//! leadership moves at once instead of after a lease.
//!
//! # Example
//!
//! Two candidates on the embedded [`MemDb`]; the leader shuts down and the other takes over
//! at once.
//!
//! ```
//! use std::time::Duration;
//! use fdb_leader_election::runner::{ChangeReason, Runner};
//! use fdb_leader_election::{ElectionConfig, MemDb};
//! use fdb_leader_election::Subspace;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let db = MemDb::new();
//! let config = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
//! let start = |name: &str| {
//!     Runner::builder(db.clone(), Subspace::from("jobs"))
//!         .label(name)
//!         .payload(format!("{name}:7000"))
//!         .config(config.clone())
//!         .start()
//! };
//! let a = start("a")?;
//! let guard = a.elected().await.ok_or("stopped")?;
//! let b = start("b")?;
//! let mut changes = b.subscribe();
//!
//! a.shutdown().await; // resigns, reserving the vacancy for b
//! assert!(guard.is_cancelled());
//! let guard_b = b.elected().await.ok_or("stopped")?;
//! assert!(guard_b.ballot() > guard.ballot());
//! loop {
//!     let change = changes.recv().await?;
//!     if change.reason == ChangeReason::HandedOver {
//!         assert_eq!(change.new.and_then(|l| l.payload_str().map(String::from)).as_deref(), Some("b:7000"));
//!         break;
//!     }
//! }
//! # b.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! On FoundationDB (feature `fdb`), pass an `Arc<foundationdb::Database>` instead of the
//! `MemDb`: it implements [`ElectionDatabase`] with a retry loop of its own, which retries
//! only what is known not to have committed and reports a maybe-committed commit as such.
//!
//! [`MemDb`]: crate::MemDb
//! [`LeaderElection::run_election_cycle`]: crate::LeaderElection::run_election_cycle
//! [`Cycle::next_action_at`]: crate::Cycle::next_action_at

pub(crate) mod builder;
pub(crate) mod checks;
mod events;
mod executor;
mod guard;
pub(crate) mod guard_core;
mod handle;
pub(crate) mod health;
pub mod metrics;
mod shared;
mod timers;

pub use crate::core::runner::{
    ChangeReason, LeaderChange, LeaderInfo, OnLoss, RunnerState, StopReason,
};

/// The runner's decisions as a pure state machine, without I/O, clocks or tokio: the
/// [`Runner`] executes it, and so can any other event loop (the crate's simulation drives it
/// in simulated time). See [`Machine`](machine::Machine).
pub mod machine {
    pub use crate::core::health::Health;
    pub use crate::core::runner::{
        Belief, Command, Ctx, CycleReport, Event, Failure, Machine, RecordRead, Settings,
    };
}
pub use crate::core::health::{CheckSettings, CheckSettingsError};
pub use crate::store::database::{ElectionDatabase, TransactionTimedOut};
pub use builder::start::BuildError;
pub use builder::{DEFAULT_EVENT_CAPACITY, RunnerBuilder};
pub use events::ElectionCallbacks;
pub use guard::LeadershipGuard;
pub use handle::{Runner, RunnerError};
pub use health::HealthProblem;
pub use shared::ShutdownReport;
