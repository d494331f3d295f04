//! Fault injection: latency, forced conflicts, unknown commit results, unavailability, and any
//! FoundationDB error code.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::store::txn::ReadMode;

/// Decides, for every read and every commit of a [`MemDb`](super::MemDb), whether to delay it
/// and whether to make it fail.
///
/// Install one with [`MemDb::set_fault_injector`](super::MemDb::set_fault_injector).
/// [`ScriptedFaults`] is a ready-made implementation; implement the trait yourself for targeted
/// injection (for example, fail only the commits that write a given key, or only the third
/// commit of a run).
///
/// The hooks are called synchronously before the operation runs, and must not block. They may
/// use the database (its counters, new transactions), but `on_commit` runs while the committing
/// transaction's own state is locked, so it must not use that transaction (or its clones).
/// Both hooks default to "proceed, no delay".
pub trait FaultInjector: Send + Sync + fmt::Debug {
    /// Called before each point or range read is served.
    fn on_read(&self, ctx: &ReadContext<'_>) -> ReadDecision {
        let _ = ctx;
        ReadDecision::proceed()
    }

    /// Called when a commit starts, including commits of read-only transactions.
    fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
        let _ = ctx;
        CommitDecision::proceed()
    }
}

/// What a read is about to read, for [`FaultInjector::on_read`].
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ReadContext<'a> {
    /// The transaction's id ([`MemTransaction::id`](super::MemTransaction::id)): increasing in
    /// creation order, unique within one database.
    pub txn_id: u64,
    /// This read's sequence number: increasing across all reads of the database, from 1.
    pub read_seq: u64,
    /// What is read.
    pub target: ReadTarget<'a>,
    /// Whether the read adds a read-conflict range.
    pub mode: ReadMode,
}

/// The key or range a read targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadTarget<'a> {
    /// A point read of this key.
    Key(&'a [u8]),
    /// A range read of `[begin, end)`.
    Range {
        /// First key of the range (inclusive).
        begin: &'a [u8],
        /// End of the range (exclusive).
        end: &'a [u8],
    },
}

impl ReadTarget<'_> {
    /// Whether the read may return `key`'s value.
    pub fn covers(&self, key: &[u8]) -> bool {
        match *self {
            ReadTarget::Key(k) => k == key,
            ReadTarget::Range { begin, end } => begin <= key && key < end,
        }
    }
}

/// What to do with a read: delay it, then serve it or fail it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ReadDecision {
    /// How long to wait (with `tokio::time::sleep`) before serving or failing the read.
    pub latency: Duration,
    /// Whether the read then fails with [`TxnErrorKind::Unavailable`](crate::TxnErrorKind::Unavailable).
    pub unavailable: bool,
    /// A FoundationDB error code the read then fails with (unless `unavailable`), classified
    /// as the FoundationDB adapter classifies an error outside a commit: 1009
    /// `future_version`, 1037 `process_behind`, the throttling codes (1213, 1223, 1235), 1004
    /// and 1031 (timeouts) are [`Unavailable`](crate::TxnErrorKind::Unavailable), 1007 is
    /// [`TooOld`](crate::TxnErrorKind::TooOld), 1020 a conflict; codes the adapter does not
    /// name are fatal.
    pub error: Option<i32>,
}

impl ReadDecision {
    /// Serve the read at once.
    pub const fn proceed() -> Self {
        ReadDecision {
            latency: Duration::ZERO,
            unavailable: false,
            error: None,
        }
    }

    /// Fail the read as unavailable.
    pub const fn unavailable() -> Self {
        ReadDecision {
            latency: Duration::ZERO,
            unavailable: true,
            error: None,
        }
    }

    /// Fail the read with FoundationDB error `code` (see [`error`](Self::error)).
    pub const fn fail_with(code: i32) -> Self {
        ReadDecision {
            latency: Duration::ZERO,
            unavailable: false,
            error: Some(code),
        }
    }

    /// The same decision, taken after waiting `latency`.
    pub const fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }
}

/// The keys a committing transaction writes (sets or clears), in key order.
#[derive(Clone, Copy)]
pub struct WrittenKeys<'a>(pub(super) &'a BTreeMap<Vec<u8>, Option<Vec<u8>>>);

impl<'a> WrittenKeys<'a> {
    /// The keys, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.0.keys().map(Vec::as_slice)
    }

    /// Whether the transaction writes `key`.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.0.contains_key(key)
    }

    /// Whether the transaction writes a key starting with `prefix`.
    pub fn any_with_prefix(&self, prefix: &[u8]) -> bool {
        self.0
            .range::<[u8], _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .next()
            .is_some_and(|(k, _)| k.starts_with(prefix))
    }

    /// How many keys the transaction writes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the transaction writes nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for WrittenKeys<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(crate::error::printable_key))
            .finish()
    }
}

/// What a commit is about to do, for [`FaultInjector::on_commit`].
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct CommitContext<'a> {
    /// The transaction's id ([`MemTransaction::id`](super::MemTransaction::id)).
    pub txn_id: u64,
    /// This commit's sequence number: increasing across all commits of the database
    /// (read-only ones included), from 1.
    pub commit_seq: u64,
    /// Whether the transaction writes nothing.
    pub read_only: bool,
    /// The keys the transaction writes.
    pub written_keys: WrittenKeys<'a>,
}

/// An injected commit failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommitFault {
    /// Nothing is applied; the commit fails with a retryable conflict (code 1020).
    Conflict,
    /// The commit is processed normally (so it applies unless it conflicts or is too old),
    /// then its reply is lost: it fails with
    /// [`TxnErrorKind::CommitUnknown`](crate::TxnErrorKind::CommitUnknown) (code 1021).
    UnknownApplied,
    /// Nothing is applied; the commit fails with
    /// [`TxnErrorKind::CommitUnknown`](crate::TxnErrorKind::CommitUnknown) (code 1021).
    UnknownNotApplied,
    /// The reply is lost at once ([`TxnErrorKind::CommitUnknown`](crate::TxnErrorKind::CommitUnknown),
    /// code 1021) while the commit is still in flight: it **lands later**, just after the
    /// next transaction on this database takes its read version (so that transaction reads the
    /// state before it), or at [`MemDb::land_deferred_commits`](super::MemDb::land_deferred_commits).
    /// It then applies unless it conflicts or has become too old, as FoundationDB's commit
    /// would. FoundationDB can do this: a client told "unknown" may have started its next
    /// transaction before the first one's commit is resolved.
    UnknownAppliedLater,
    /// Nothing is applied; the commit fails with
    /// [`TxnErrorKind::Unavailable`](crate::TxnErrorKind::Unavailable).
    Unavailable,
    /// Nothing is applied; the commit fails with FoundationDB error `code`, classified as the
    /// FoundationDB adapter classifies a commit's error: for example 1009 `future_version`,
    /// 1037 `process_behind` and the throttling codes (1051, 1213, 1223, 1235) are
    /// [`Unavailable`](crate::TxnErrorKind::Unavailable); 1004 and 1031 (timeouts) and 1021,
    /// 1039 are [`CommitUnknown`](crate::TxnErrorKind::CommitUnknown) (here: did not apply);
    /// 1020 is a conflict and 1007 `transaction_too_old`; codes the adapter does not name are
    /// fatal.
    Error(i32),
    /// Like [`Error`](Self::Error), for a code that may have committed (a timeout, 1004 or
    /// 1031; an unknown result, 1021 or 1039): the commit is processed normally first (so it
    /// applies unless it conflicts or is too old), then its reply is replaced by the error.
    /// For any other code nothing is applied, as FoundationDB never applies a commit it
    /// reports as not committed.
    ErrorAfterApplying(i32),
}

/// What to do with a commit: delay it, then process it or inject a failure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CommitDecision {
    /// How long to wait (with `tokio::time::sleep`) before processing the commit. The
    /// transaction's age keeps growing meanwhile, so a long wait can make it too old.
    pub latency: Duration,
    /// The failure to inject, or `None` to process the commit normally.
    pub fault: Option<CommitFault>,
    /// How long the reply takes once the commit has been processed (applied, or failed): the
    /// commit's effects are visible to everyone meanwhile, while its caller still waits, as
    /// with a slow reply of FoundationDB under load. A caller that gives up meanwhile (a
    /// transaction timeout) sees a maybe-committed error for a commit that applied.
    pub reply_latency: Duration,
}

impl CommitDecision {
    /// Process the commit normally, at once.
    pub const fn proceed() -> Self {
        CommitDecision {
            latency: Duration::ZERO,
            fault: None,
            reply_latency: Duration::ZERO,
        }
    }

    /// Inject `fault`.
    pub const fn fail(fault: CommitFault) -> Self {
        CommitDecision {
            latency: Duration::ZERO,
            fault: Some(fault),
            reply_latency: Duration::ZERO,
        }
    }

    /// The same decision, taken after waiting `latency`.
    pub const fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// The same decision, its reply taking `reply_latency` after the commit was processed.
    pub const fn with_reply_latency(mut self, reply_latency: Duration) -> Self {
        self.reply_latency = reply_latency;
        self
    }
}

/// A [`FaultInjector`] driven by a script: a FIFO queue of commit faults, a switch that makes
/// the database unavailable, and fixed read and commit latencies.
///
/// Clones share the same script, so a test keeps one clone and installs another:
///
/// ```
/// use fdb_leader_election::memdb::{CommitFault, MemDb, ScriptedFaults};
/// use std::sync::Arc;
///
/// let db = MemDb::new();
/// let faults = ScriptedFaults::new();
/// db.set_fault_injector(Arc::new(faults.clone()));
/// faults.push_commit_fault(CommitFault::UnknownApplied);
/// assert_eq!(faults.pending_commit_faults(), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ScriptedFaults {
    script: Arc<Mutex<Script>>,
}

#[derive(Debug, Default)]
struct Script {
    commit_faults: VecDeque<CommitFault>,
    read_errors: VecDeque<i32>,
    unavailable: bool,
    read_latency: Duration,
    commit_latency: Duration,
}

impl ScriptedFaults {
    /// An empty script: no faults, no latency.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut Script) -> R) -> R {
        let mut script = self.script.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut script)
    }

    /// Queues `fault` for the next commit that writes something (read-only commits do not
    /// consume the queue). Faults are applied first in, first out, one per commit.
    pub fn push_commit_fault(&self, fault: CommitFault) {
        self.with(|s| s.commit_faults.push_back(fault));
    }

    /// Queues FoundationDB error `code` for the next read (point or range); see
    /// [`ReadDecision::error`]. Queued read errors are applied first in, first out, one per
    /// read.
    pub fn push_read_error(&self, code: i32) {
        self.with(|s| s.read_errors.push_back(code));
    }

    /// How many queued commit faults have not been applied yet.
    pub fn pending_commit_faults(&self) -> usize {
        self.with(|s| s.commit_faults.len())
    }

    /// Drops every queued commit fault.
    pub fn clear_commit_faults(&self) {
        self.with(|s| s.commit_faults.clear());
    }

    /// While set, every read and every commit (read-only ones included) fails with
    /// [`TxnErrorKind::Unavailable`](crate::TxnErrorKind::Unavailable) after its latency;
    /// queued commit faults are kept for later.
    pub fn set_unavailable(&self, unavailable: bool) {
        self.with(|s| s.unavailable = unavailable);
    }

    /// Whether the database is currently made unavailable.
    pub fn is_unavailable(&self) -> bool {
        self.with(|s| s.unavailable)
    }

    /// Delays every read by `latency`.
    pub fn set_read_latency(&self, latency: Duration) {
        self.with(|s| s.read_latency = latency);
    }

    /// Delays every commit by `latency`.
    pub fn set_commit_latency(&self, latency: Duration) {
        self.with(|s| s.commit_latency = latency);
    }
}

impl FaultInjector for ScriptedFaults {
    fn on_read(&self, _ctx: &ReadContext<'_>) -> ReadDecision {
        self.with(|s| ReadDecision {
            latency: s.read_latency,
            unavailable: s.unavailable,
            error: if s.unavailable {
                None
            } else {
                s.read_errors.pop_front()
            },
        })
    }

    fn on_commit(&self, ctx: &CommitContext<'_>) -> CommitDecision {
        self.with(|s| {
            let fault = if s.unavailable {
                Some(CommitFault::Unavailable)
            } else if ctx.read_only {
                None
            } else {
                s.commit_faults.pop_front()
            };
            CommitDecision {
                latency: s.commit_latency,
                fault,
                reply_latency: Duration::ZERO,
            }
        })
    }
}
