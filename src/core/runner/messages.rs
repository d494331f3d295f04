//! What goes into the machine (events, with the moment they happen at) and what comes out
//! (commands).

use std::time::Duration;

use super::types::{LeaderChange, RunnerState, StopReason};
use crate::clock::LocalInstant;
use crate::config::ElectionConfig;
use crate::core::Action;
use crate::error::ElectionError;
use crate::ids::{Ballot, CandidateId};
use crate::record::{LeaderRecord, Named, Party};

/// What the candidate believes about its own leadership at the moment of an event
/// (`Candidate::leadership`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Belief {
    /// The ballot it believes it leads.
    pub ballot: Ballot,
    /// When the belief ends, on the candidate's clock.
    pub valid_until: LocalInstant,
}

/// The moment an event happens at: the clock reading, the candidate's belief then, and
/// whether guarded work is in flight.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub(crate) now: LocalInstant,
    pub(crate) belief: Option<Belief>,
    pub(crate) work_in_flight: bool,
}

impl Ctx {
    /// The moment `now`, with `belief` and whether guarded work is in flight.
    pub fn new(now: LocalInstant, belief: Option<Belief>, work_in_flight: bool) -> Self {
        Ctx {
            now,
            belief,
            work_in_flight,
        }
    }
}

/// A failed transaction, as far as decisions go (the error itself stays with the executor,
/// which logs it and hands it to whoever asked). Built from the error with
/// [`Failure::of`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The error kind, for metrics (`conflict`, `timeout`, `unavailable`, ...).
    pub(crate) kind: &'static str,
    /// Whether running the transaction again may succeed.
    pub(crate) retryable: bool,
    /// The candidate's registration is gone (it was evicted): register again.
    pub(crate) not_registered: bool,
    /// The election is not initialized: register (which creates it) again; an observer waits
    /// for it quietly.
    pub(crate) not_initialized: bool,
}

impl Failure {
    /// The error's kind, a short stable name (`conflict`, `timeout`, `unavailable`, ...).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// What the machine needs to know of `e`.
    pub fn of(e: &ElectionError) -> Self {
        Failure {
            kind: error_kind(e),
            retryable: e.is_retryable(),
            not_registered: matches!(e, ElectionError::NotRegistered { .. }),
            not_initialized: matches!(e, ElectionError::NotInitialized),
        }
    }
}

/// A short, stable name for an error, for the `kind` metric label and the logs.
fn error_kind(e: &ElectionError) -> &'static str {
    use crate::store::txn::TxnErrorKind as K;
    match e {
        ElectionError::Database(t) => match t.kind() {
            K::Conflict => "conflict",
            K::TooOld => "too_old",
            K::CommitUnknown => {
                if std::error::Error::source(t)
                    .is_some_and(|s| s.is::<crate::store::database::TransactionTimedOut>())
                {
                    "timeout"
                } else {
                    "unknown_result"
                }
            }
            K::Unavailable => "unavailable",
            K::OtherRetryable => "retryable",
            _ => "fatal",
        },
        ElectionError::NotInitialized => "not_initialized",
        ElectionError::NotRegistered { .. } => "not_registered",
        ElectionError::Corrupt { .. } | ElectionError::InvalidStoredConfig { .. } => "corrupt",
        _ => "other",
    }
}

/// What a committed cycle did, for the machine: built from the `Cycle` and what adopting it
/// gave (`CycleReport::new`).
#[derive(Clone, Debug)]
pub struct CycleReport {
    pub(crate) action: Action,
    /// The leader record as the cycle left it.
    pub(crate) record: LeaderRecord,
    /// The stored configuration the cycle read.
    pub(crate) config: ElectionConfig,
    /// When the candidate could act next without any change to the record.
    pub(crate) next_action_at: Option<LocalInstant>,
    /// The ballot the candidate leads after adopting the cycle, if it does.
    pub(crate) leading: Option<Ballot>,
    /// The handover request the cycle honoured (the leader stepped down for it, or renewed
    /// while draining its work first).
    pub(crate) honoured: Option<Party>,
    /// The leader is not eligible: it holds, or steps down (now, or once drained).
    pub(crate) ineligible: Option<crate::core::Ineligible>,
}

impl CycleReport {
    /// What the cycle did.
    pub fn action(&self) -> Action {
        self.action
    }

    /// The leader record as the cycle left it.
    pub fn record(&self) -> &LeaderRecord {
        &self.record
    }
}

/// A read of the leader record outside a cycle (arming a watch, or an observer's poll).
#[derive(Clone, Debug)]
pub struct RecordRead {
    /// The record read.
    pub record: LeaderRecord,
    /// The stored configuration, when the read included it (observers).
    pub config: Option<ElectionConfig>,
    /// Whether a watch was asked for and armed: `None` if not asked for, `Some(false)` if the
    /// database refused it.
    pub watch: Option<bool>,
}

/// Something that happened to the runner.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Event {
    /// The runner starts.
    Start,
    /// A wake-up: a time the machine asked to sleep until has come (or any other reason to
    /// look again).
    Tick,
    /// Registration (creating the election if needed) committed, with the stored
    /// configuration; or failed.
    Registered(Result<ElectionConfig, Failure>),
    /// Inside a cycle's transaction, after the cycle decided and **before** the commit: what
    /// it decided (or why it failed). The candidate's belief in the context is already what
    /// the decision left (belief is lost early).
    CycleDecided(Result<(Action, LeaderRecord), Failure>),
    /// The cycle committed and was adopted.
    CycleCommitted(CycleReport),
    /// The cycle's transaction failed (its commit result may be unknown).
    CycleFailed(Failure),
    /// The leader record was read, and perhaps a watch armed; or the read failed.
    RecordRead(Result<RecordRead, Failure>),
    /// The watch on the leader record fired, or failed.
    WatchFired(Result<(), Failure>),
    /// Guarded work went idle (no guarded task in flight any more).
    WorkIdle,
    /// The candidate's own eligibility changed (its health checks, docs/design.md §13.4): its next
    /// cycle writes it, so it runs at once, as after a fired watch (an ineligible leader
    /// steps down within a cycle, not a heartbeat; an eligible follower may campaign).
    EligibilityChanged,
    /// The application asked to resign.
    ResignRequested,
    /// Inside the resignation's transaction, after it decided and before the commit.
    ResignDecided,
    /// The resignation's transaction ended (its outcome goes to whoever asked).
    ResignDone,
    /// The application asked to shut down (in-flight transactions are abandoned).
    ShutdownRequested,
    /// The tasks of ended leaderships finished (`true`), or the bound passed (`false`).
    Drained(bool),
    /// Leaving (resign and unregister in one transaction) ended.
    Left(Result<(), Failure>),
}

/// Something the runner must do.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Command {
    /// Create the election if needed, register, and read the configuration.
    Register,
    /// Run one election cycle (feeding [`Event::CycleDecided`] before its commit).
    RunCycle,
    /// Read the leader record, and arm a watch on it if `watch`, in one read-only
    /// transaction; observers also read the configuration (`config`).
    ReadRecord {
        /// Arm a watch too.
        watch: bool,
        /// Read the configuration too.
        config: bool,
    },
    /// Forget the armed watch.
    DisarmWatch,
    /// Resign the leadership of `expected` (feeding [`Event::ResignDecided`] before its
    /// commit).
    Resign {
        /// The ballot led.
        expected: Ballot,
    },
    /// Reject a resignation: this process does not lead (`current` does, if anyone).
    RejectResign {
        /// The leader named in the record, if any.
        current: Option<CandidateId>,
    },
    /// Resign (if leading) and unregister, in one transaction.
    Leave,
    /// Wait for the tasks of ended leaderships, at most `bound`.
    DrainTasks {
        /// The longest to wait.
        bound: Duration,
    },
    /// Nothing to do until `at` (or until something happens).
    SleepUntil(LocalInstant),
    /// Hand the application a leadership guard for `ballot`, valid until `deadline`.
    IssueGuard {
        /// The ballot led.
        ballot: Ballot,
        /// The belief's end, on the candidate's clock.
        deadline: LocalInstant,
    },
    /// End the live guard, closed for a handover that can no longer happen
    /// ([`StopReason::HandoverWithdrawn`]), and hand the application a fresh one of the same
    /// `ballot`, valid until `deadline`, that takes new work: the leadership never stopped.
    ReissueGuard {
        /// The ballot led.
        ballot: Ballot,
        /// The belief's end, on the candidate's clock.
        deadline: LocalInstant,
    },
    /// Move the guard's deadline to `deadline` (a renewal, or a shorter belief).
    SetGuardDeadline(LocalInstant),
    /// The guard accepts no new work (a handover or resignation is pending).
    CloseGuard,
    /// Cancel the guard at once (the first reason given sticks).
    RevokeGuard(StopReason),
    /// The leadership of `ballot` ended (after [`Command::RevokeGuard`]): publish it, wait
    /// for its tasks.
    EndLeadership {
        /// The ballot whose leadership ended.
        ballot: Ballot,
        /// Why.
        reason: StopReason,
    },
    /// A cycle whose attempt started at `started` committed this leadership, with `lease`;
    /// `took` is how long a renewal (or acquisition) took, for the renewal-latency metric.
    Renewed {
        /// When the cycle's attempt started.
        started: LocalInstant,
        /// The lease it wrote.
        lease: Duration,
        /// How long it took, if it renewed or acquired.
        took: Option<Duration>,
    },
    /// A renewal of `ballot` committed after that leadership had ended locally: a ballot is
    /// handed out (and stopped) once, so stop believing; the lease lapses.
    LateRenewal {
        /// The ballot renewed too late.
        ballot: Ballot,
    },
    /// Stop believing in any leadership (the runner leaves).
    StepDownLocally,
    /// The guard is closed but nothing will end this leadership: the request that closed it
    /// was withdrawn, or the resignation that closed it failed. The leader resigns anyway
    /// (a `Resign` follows, once guarded work is idle or the grace from the closing ends).
    SteppingDownAnyway,
    /// A candidate asked this leader to hand over, and the leader honours it (waiting for its
    /// guarded work first).
    HandoverRequested(Named),
    /// An operator asked this leader to step down, and the leader honours it (waiting for its
    /// guarded work first).
    OperatorRequest(CandidateId),
    /// This leader is not eligible (its health, or an operator's mark) and steps down to the
    /// best live eligible candidate (waiting for its guarded work first).
    SteppingDownIneligible,
    /// This leader is not eligible, but no live candidate is: it keeps leading
    /// ([`UnhealthyPolicy::Hold`](crate::UnhealthyPolicy::Hold)), and hands over once one is.
    /// Given when the holding begins; `warn`: log it (rate-limited).
    HoldingIneligible {
        /// Whether to log it now.
        warn: bool,
    },
    /// The leader changed.
    Publish(LeaderChange),
    /// The ballot of the leader record seen (for the ballot gauge).
    SeenBallot(Ballot),
    /// Count the live candidates again (the leader changed).
    RefreshCandidateCount,
    /// The runner's state.
    State(RunnerState),
    /// The configuration in use changed.
    ConfigChanged(ElectionConfig),
    /// A transaction failed: count it (`leading`: a renewal failed), and log it if `warn`
    /// (with the failures suppressed since the last warning).
    Failed {
        /// What failed, for the log.
        what: &'static str,
        /// The error's kind.
        kind: &'static str,
        /// Whether this process led (a renewal failed).
        leading: bool,
        /// `Some(suppressed)` if the failure is to be logged now.
        warn: Option<u64>,
    },
    /// Transactions succeed again after `failures` failures.
    Recovered {
        /// How many failures preceded.
        failures: u64,
    },
    /// The runner stopped. `tasks_finished`: the guarded tasks ended within the bound.
    Stop {
        /// Whether the guarded tasks ended within the bound.
        tasks_finished: bool,
    },
}
