//! The `foundationdb` 0.11 leader-election recipe, re-implemented from its documented behaviour
//! **for measurement only**, so `perf_report` can run it beside this crate on the same store.
//!
//! It is not this crate's code and must never move into `src/`: it reproduces, on purpose, the
//! behaviour the crate was built to replace, as the recipe's documentation and the README's
//! "Migrating from the v0.11 recipe" describe it:
//!
//! - **Wall-clock leases.** The caller passes `current_time` (its wall clock, a duration since
//!   the UNIX epoch); a claim or refresh stores `lease_expiry_nanos = current_time + lease`,
//!   and every other host compares that stored instant with its *own* wall clock.
//! - **A read-write transaction on the leader key every cycle**, with sequential reads:
//!   `run_election_cycle` = `heartbeat_candidate` (get config, get candidate, set candidate),
//!   then `try_claim_leadership` (get config, get candidate, get leader; set leader if it may
//!   claim), then, for a follower, `get_leader` (get leader). Every `get` is serializable.
//! - **Preemption overwrites a live leader at once**: a strictly higher priority claims even
//!   while the incumbent's lease is valid. The incumbent is not told.
//! - **Resign deletes the leader key**; the next claim starts again at ballot 1.
//! - **The ballot grows on every claim and every refresh** (`ballot + 1`, or 1 when the key is
//!   absent).
//! - **Each leader believes until its stored expiry** ([`V011Host`]): a host that got
//!   `Leader(state)` acts as leader until its own wall clock reaches
//!   `state.lease_expiry_nanos`, or until a later cycle of its own says `Follower`.
//!
//! Written against the crate's public [`ElectionTxn`], so both designs run on identical
//! MemDb transactions and MemDb counts their I/O the same way. What differs from the original
//! only in form: registration is a plain `set` (the trait has no versionstamped write; the
//! versionstamp only ordered `list_candidates`, which no measurement uses), and values are
//! packed as tuples without the versionstamp field.
//!
//! `V011Host::cycle_with` runs a cycle through `MemDb::run`; with the `fdb` feature,
//! `V011Host::cycle_on` runs it through any store's `ElectionDatabase::transact`
//! (FoundationDB's `Arc<Database>` in the report's cluster mode), the loop this crate's own
//! cycles use there, so both designs are retried alike.

#![warn(clippy::arithmetic_side_effects)]

use std::fmt;
#[cfg(feature = "fdb")]
use std::future::Future;
#[cfg(feature = "fdb")]
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

#[cfg(feature = "fdb")]
use fdb_leader_election::{ElectionDatabase, ElectionError, TxnErrorKind};
use fdb_leader_election::{ElectionTxn, MemDb, ReadMode, RetryClassify, TxnError};
use foundationdb_tuple::Subspace;

use crate::clocks::HostClock;

/// The recipe's shared configuration (stored under `("config",)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct V011Config {
    /// How long a claim or refresh is valid, from the claimer's wall clock.
    pub(crate) lease_duration: Duration,
    /// How often hosts are meant to call `run_election_cycle` (stored, never used by the
    /// recipe itself).
    pub(crate) heartbeat_interval: Duration,
    /// When a candidate counts as dead (only for listing and eviction).
    pub(crate) candidate_timeout: Duration,
    /// Elections on or off.
    pub(crate) election_enabled: bool,
    /// Whether a strictly higher priority claims over a live leader.
    pub(crate) allow_preemption: bool,
}

impl V011Config {
    /// The recipe's `with_lease_duration`: heartbeat = lease / 3, candidate timeout = 1.5 ×
    /// lease, elections and preemption on.
    pub(crate) fn with_lease_duration(lease: Duration) -> Self {
        V011Config {
            lease_duration: lease,
            heartbeat_interval: lease.checked_div(3).unwrap_or(lease),
            candidate_timeout: lease.saturating_add(lease.checked_div(2).unwrap_or(lease)),
            election_enabled: true,
            allow_preemption: true,
        }
    }
}

impl Default for V011Config {
    /// The recipe's defaults: lease 10 s, heartbeat 3 s, candidate timeout 15 s.
    fn default() -> Self {
        V011Config {
            lease_duration: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(3),
            candidate_timeout: Duration::from_secs(15),
            election_enabled: true,
            allow_preemption: true,
        }
    }
}

/// The leader record (stored under `("leader",)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaderState {
    /// Grows on every claim and refresh; restarts at 1 after a resign.
    pub(crate) ballot: u64,
    /// The process id of the leader.
    pub(crate) leader_id: String,
    /// The priority the leader passed when it claimed.
    pub(crate) priority: i32,
    /// The leader's wall clock at the claim or refresh, plus the lease.
    pub(crate) lease_expiry_nanos: u64,
}

impl LeaderState {
    /// The recipe's `is_lease_valid`: `now < lease_expiry_nanos`, on the *reader's* clock.
    pub(crate) fn is_lease_valid(&self, now: Duration) -> bool {
        nanos(now) < self.lease_expiry_nanos
    }
}

/// The outcome of one `run_election_cycle`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ElectionResult {
    /// This host claimed or refreshed.
    Leader(LeaderState),
    /// Someone else leads (a leader whose lease has not passed on this host's clock), or no
    /// one does.
    Follower(Option<LeaderState>),
}

/// The recipe's errors.
#[derive(Debug)]
pub(crate) enum V011Error {
    /// The database failed (retryable or not, as the error says).
    Txn(TxnError),
    /// `election_enabled` is false.
    ElectionDisabled,
    /// A heartbeat for a process that never registered.
    ProcessNotFound(String),
    /// No configuration stored.
    NotInitialized,
    /// A claim by a process that never registered.
    UnregisteredCandidate,
    /// A stored value did not unpack.
    Decode(String),
}

impl fmt::Display for V011Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            V011Error::Txn(e) => write!(f, "database error: {e}"),
            V011Error::ElectionDisabled => f.write_str("election disabled"),
            V011Error::ProcessNotFound(id) => write!(f, "process not found: {id}"),
            V011Error::NotInitialized => f.write_str("election not initialized"),
            V011Error::UnregisteredCandidate => f.write_str("unregistered candidate"),
            V011Error::Decode(what) => write!(f, "undecodable value: {what}"),
        }
    }
}

impl std::error::Error for V011Error {}

impl From<TxnError> for V011Error {
    fn from(e: TxnError) -> Self {
        V011Error::Txn(e)
    }
}

impl RetryClassify for V011Error {
    fn txn_error(&self) -> Option<&TxnError> {
        match self {
            V011Error::Txn(e) => Some(e),
            _ => None,
        }
    }
}

/// Runs `body` in a transaction of `db` through [`ElectionDatabase::transact`], which retries
/// conflicts and `transaction_too_old` (a database error of the recipe is handed to the loop
/// as the election's database error, so it is retried exactly like this crate's); any other
/// error of the recipe ends the call (the attempt, which wrote nothing, commits).
#[cfg(feature = "fdb")]
pub(crate) async fn transact<D, F, Fut, T>(
    db: &D,
    timeout: Duration,
    body: F,
) -> Result<T, V011Error>
where
    D: ElectionDatabase,
    F: Fn(D::Txn) -> Fut + Send + Sync,
    Fut: Future<Output = Result<T, V011Error>> + Send,
    T: Send,
{
    let outcome = db
        .transact(timeout, |txn| {
            let attempt = body(txn);
            async move {
                match attempt.await {
                    Ok(v) => Ok(Ok(v)),
                    Err(V011Error::Txn(e)) => Err(ElectionError::Database(e)),
                    Err(e) => Ok(Err(e)),
                }
            }
        })
        .await;
    match outcome {
        Ok(result) => result,
        Err(ElectionError::Database(e)) => Err(V011Error::Txn(e)),
        // `transact` fails only with database errors; anything else ends the measurement.
        Err(e) => Err(V011Error::Txn(TxnError::with_source(
            TxnErrorKind::Fatal,
            e,
        ))),
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn decode<'a, T: foundationdb_tuple::TupleUnpack<'a>>(
    what: &str,
    bytes: &'a [u8],
) -> Result<T, V011Error> {
    foundationdb_tuple::unpack(bytes).map_err(|e| V011Error::Decode(format!("{what}: {e}")))
}

/// One election of the recipe: a cheap `Clone` handle over a subspace.
#[derive(Clone, Debug)]
pub(crate) struct V011Election {
    config_key: Vec<u8>,
    leader_key: Vec<u8>,
    candidates: Subspace,
}

impl V011Election {
    /// The election under `subspace`.
    pub(crate) fn new(subspace: &Subspace) -> Self {
        V011Election {
            config_key: subspace.pack(&("config",)),
            leader_key: subspace.pack(&("leader",)),
            candidates: subspace.subspace(&("candidates",)),
        }
    }

    fn candidate_key(&self, id: &str) -> Vec<u8> {
        self.candidates.pack(&(id,))
    }

    /// Stores `config` unless a configuration exists (idempotent; never updates).
    pub(crate) async fn initialize_with_config<T: ElectionTxn>(
        &self,
        txn: &T,
        config: V011Config,
    ) -> Result<(), V011Error> {
        if txn
            .get(&self.config_key, ReadMode::Serializable)
            .await?
            .is_none()
        {
            let value = foundationdb_tuple::pack(&(
                nanos(config.lease_duration),
                nanos(config.heartbeat_interval),
                nanos(config.candidate_timeout),
                config.election_enabled,
                config.allow_preemption,
            ));
            txn.set(&self.config_key, &value);
        }
        Ok(())
    }

    /// Reads the configuration.
    pub(crate) async fn read_config<T: ElectionTxn>(
        &self,
        txn: &T,
    ) -> Result<V011Config, V011Error> {
        let bytes = txn
            .get(&self.config_key, ReadMode::Serializable)
            .await?
            .ok_or(V011Error::NotInitialized)?;
        let (lease, heartbeat, timeout, enabled, preemption): (u64, u64, u64, bool, bool) =
            decode("config", &bytes)?;
        Ok(V011Config {
            lease_duration: Duration::from_nanos(lease),
            heartbeat_interval: Duration::from_nanos(heartbeat),
            candidate_timeout: Duration::from_nanos(timeout),
            election_enabled: enabled,
            allow_preemption: preemption,
        })
    }

    /// Registers (or re-registers) `id` with its priority and a heartbeat at `now`.
    pub(crate) async fn register_candidate<T: ElectionTxn>(
        &self,
        txn: &T,
        id: &str,
        priority: i32,
        now: Duration,
    ) -> Result<(), V011Error> {
        if !self.read_config(txn).await?.election_enabled {
            return Err(V011Error::ElectionDisabled);
        }
        txn.set(
            &self.candidate_key(id),
            &foundationdb_tuple::pack(&(priority, nanos(now))),
        );
        Ok(())
    }

    /// Rewrites the candidate's heartbeat (and priority).
    pub(crate) async fn heartbeat_candidate<T: ElectionTxn>(
        &self,
        txn: &T,
        id: &str,
        priority: i32,
        now: Duration,
    ) -> Result<(), V011Error> {
        if !self.read_config(txn).await?.election_enabled {
            return Err(V011Error::ElectionDisabled);
        }
        let key = self.candidate_key(id);
        if txn.get(&key, ReadMode::Serializable).await?.is_none() {
            return Err(V011Error::ProcessNotFound(id.to_owned()));
        }
        txn.set(&key, &foundationdb_tuple::pack(&(priority, nanos(now))));
        Ok(())
    }

    async fn leader<T: ElectionTxn>(&self, txn: &T) -> Result<Option<LeaderState>, V011Error> {
        let Some(bytes) = txn.get(&self.leader_key, ReadMode::Serializable).await? else {
            return Ok(None);
        };
        let (ballot, leader_id, priority, lease_expiry_nanos): (u64, String, i32, u64) =
            decode("leader", &bytes)?;
        Ok(Some(LeaderState {
            ballot,
            leader_id,
            priority,
            lease_expiry_nanos,
        }))
    }

    fn write_leader<T: ElectionTxn>(&self, txn: &T, state: &LeaderState) {
        txn.set(
            &self.leader_key,
            &foundationdb_tuple::pack(&(
                state.ballot,
                state.leader_id.as_str(),
                state.priority,
                state.lease_expiry_nanos,
            )),
        );
    }

    /// Claims when no one leads, when the record is this host's own, when the stored expiry
    /// has passed on this host's clock, or when preemption is on and `priority` is strictly
    /// higher than the leader's (even while its lease is valid).
    pub(crate) async fn try_claim_leadership<T: ElectionTxn>(
        &self,
        txn: &T,
        id: &str,
        priority: i32,
        now: Duration,
    ) -> Result<Option<LeaderState>, V011Error> {
        let config = self.read_config(txn).await?;
        if !config.election_enabled {
            return Err(V011Error::ElectionDisabled);
        }
        if txn
            .get(&self.candidate_key(id), ReadMode::Serializable)
            .await?
            .is_none()
        {
            return Err(V011Error::UnregisteredCandidate);
        }
        let current = self.leader(txn).await?;
        let can_claim = match &current {
            None => true,
            Some(l) => {
                l.leader_id == id
                    || !l.is_lease_valid(now)
                    || (config.allow_preemption && priority > l.priority)
            }
        };
        if !can_claim {
            return Ok(None);
        }
        let ballot = match &current {
            Some(l) => l
                .ballot
                .checked_add(1)
                .ok_or_else(|| V011Error::Decode("ballot overflow".to_owned()))?,
            None => 1,
        };
        let state = LeaderState {
            ballot,
            leader_id: id.to_owned(),
            priority,
            lease_expiry_nanos: nanos(now.saturating_add(config.lease_duration)),
        };
        self.write_leader(txn, &state);
        Ok(Some(state))
    }

    /// The leader, if its stored expiry has not passed on this host's clock.
    pub(crate) async fn get_leader<T: ElectionTxn>(
        &self,
        txn: &T,
        now: Duration,
    ) -> Result<Option<LeaderState>, V011Error> {
        Ok(self.leader(txn).await?.filter(|l| l.is_lease_valid(now)))
    }

    /// Deletes the leader key if the record names `id`.
    pub(crate) async fn resign_leadership<T: ElectionTxn>(
        &self,
        txn: &T,
        id: &str,
    ) -> Result<bool, V011Error> {
        match self.leader(txn).await? {
            Some(l) if l.leader_id == id => {
                txn.clear(&self.leader_key);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Heartbeat, then claim; a follower then reads the leader again.
    pub(crate) async fn run_election_cycle<T: ElectionTxn>(
        &self,
        txn: &T,
        id: &str,
        priority: i32,
        now: Duration,
    ) -> Result<ElectionResult, V011Error> {
        self.heartbeat_candidate(txn, id, priority, now).await?;
        match self.try_claim_leadership(txn, id, priority, now).await? {
            Some(state) => Ok(ElectionResult::Leader(state)),
            None => Ok(ElectionResult::Follower(self.get_leader(txn, now).await?)),
        }
    }
}

/// One process using the recipe as its documentation shows: it reads its wall clock inside
/// each transaction attempt, and after a `Leader(state)` result it acts as leader until its
/// own wall clock reaches `state.lease_expiry_nanos` (or until a later cycle says otherwise).
#[derive(Clone, Debug)]
pub(crate) struct V011Host {
    id: String,
    priority: i32,
    clock: Arc<HostClock>,
    belief: Arc<Mutex<Option<LeaderState>>>,
}

impl V011Host {
    /// A process with this id, priority and wall clock.
    pub(crate) fn new(id: String, priority: i32, clock: Arc<HostClock>) -> Self {
        V011Host {
            id,
            priority,
            clock,
            belief: Arc::new(Mutex::new(None)),
        }
    }

    /// The wall clock reading passed as `current_time`.
    pub(crate) fn now(&self) -> Duration {
        self.clock.wall()
    }

    fn lock(&self) -> MutexGuard<'_, Option<LeaderState>> {
        self.belief.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The leader state this process acts on now: its last `Leader` result, until its
    /// stored expiry passes on this process's clock.
    pub(crate) fn leadership(&self) -> Option<LeaderState> {
        let now = self.now();
        self.lock().clone().filter(|s| s.is_lease_valid(now))
    }

    /// Registers this process.
    pub(crate) async fn register(
        &self,
        db: &MemDb,
        election: &V011Election,
    ) -> Result<(), V011Error> {
        db.run(|txn, _| async move {
            election
                .register_candidate(&txn, &self.id, self.priority, self.now())
                .await
        })
        .await
    }

    /// One `run_election_cycle` through MemDb's retry loop, with the clock read inside each
    /// attempt; the belief follows the committed result. `wrap` wraps each attempt's
    /// transaction (to probe or count it).
    pub(crate) async fn cycle_with<W, F>(
        &self,
        db: &MemDb,
        election: &V011Election,
        mut wrap: F,
    ) -> Result<ElectionResult, V011Error>
    where
        W: ElectionTxn,
        F: FnMut(fdb_leader_election::MemTransaction) -> W,
    {
        let result = db
            .run(|txn, _| {
                let txn = wrap(txn);
                async move {
                    election
                        .run_election_cycle(&txn, &self.id, self.priority, self.now())
                        .await
                }
            })
            .await?;
        Ok(self.believe(result))
    }

    /// Makes the belief follow a committed cycle's `result` (the leadership it reports, or
    /// none), and returns it.
    fn believe(&self, result: ElectionResult) -> ElectionResult {
        *self.lock() = match &result {
            ElectionResult::Leader(state) => Some(state.clone()),
            ElectionResult::Follower(_) => None,
        };
        result
    }

    /// One cycle on the bare transaction.
    pub(crate) async fn cycle(
        &self,
        db: &MemDb,
        election: &V011Election,
    ) -> Result<ElectionResult, V011Error> {
        self.cycle_with(db, election, |txn| txn).await
    }

    /// Resigns (deletes the leader key if it names this process) and stops acting as leader.
    pub(crate) async fn resign(
        &self,
        db: &MemDb,
        election: &V011Election,
    ) -> Result<bool, V011Error> {
        let resigned = db
            .run(|txn, _| async move { election.resign_leadership(&txn, &self.id).await })
            .await?;
        if resigned {
            *self.lock() = None;
        }
        Ok(resigned)
    }
}

/// The recipe on any store (the report's FoundationDB mode).
#[cfg(feature = "fdb")]
impl V011Host {
    /// Registers this process through `db`'s [`ElectionDatabase::transact`].
    pub(crate) async fn register_on<D: ElectionDatabase>(
        &self,
        db: &D,
        election: &V011Election,
        timeout: Duration,
    ) -> Result<(), V011Error> {
        transact(db, timeout, |txn| async move {
            election
                .register_candidate(&txn, &self.id, self.priority, self.now())
                .await
        })
        .await
    }

    /// One `run_election_cycle` through `db`'s [`ElectionDatabase::transact`], with the clock
    /// read inside each attempt and `attempts` counting the attempts; the belief follows the
    /// committed result.
    pub(crate) async fn cycle_on<D: ElectionDatabase>(
        &self,
        db: &D,
        election: &V011Election,
        timeout: Duration,
        attempts: &AtomicU64,
    ) -> Result<ElectionResult, V011Error> {
        let result = transact(db, timeout, |txn| {
            attempts.fetch_add(1, Ordering::Relaxed);
            async move {
                election
                    .run_election_cycle(&txn, &self.id, self.priority, self.now())
                    .await
            }
        })
        .await?;
        Ok(self.believe(result))
    }
}
