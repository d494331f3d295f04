//! FoundationDB's error codes, and what each one means for the election: its
//! [`TxnErrorKind`], and so whether it is retried and whether the commit may have applied.
//!
//! Every decision the FoundationDB adapter makes about an error is one of these plain
//! functions of the code, the phase it arose in and (for codes this crate does not name)
//! `libfdb_c`'s own predicates, so the normal test suite checks them without a cluster or
//! `libfdb_c`. Error codes injected into MemDb (`CommitFault::Error`,
//! `CommitFault::ErrorAfterApplying`, `ReadDecision::fail_with`) are classified by the
//! same functions, so the retry and classification paths run in tests.
//!
//! | code(s) | operation (read, watch, `on_error`) | commit |
//! |---|---|---|
//! | 1020 `not_committed` | `Conflict` | `Conflict` |
//! | 1007 `transaction_too_old` | `TooOld` | `TooOld` |
//! | 1021 `commit_unknown_result`, 1039 `cluster_version_changed` | `CommitUnknown` | `CommitUnknown` |
//! | 1004 `timed_out`, 1031 `transaction_timed_out` | `Unavailable` | `CommitUnknown` |
//! | 1009 `future_version`, 1037 `process_behind`, 1038 `database_locked`, 1042/1078 proxy memory limits, 1051/1213/1223/1235 throttling | `Unavailable` | `Unavailable` |
//! | any other code `libfdb_c` calls maybe-committed | `CommitUnknown` | `CommitUnknown` |
//! | any other code `libfdb_c` calls retryable | `OtherRetryable` | `OtherRetryable` |
//! | everything else | `Fatal` | `Fatal` |
//!
//! A timeout during a commit may have applied: FoundationDB cancels the client's wait, not
//! the commit already on its way (its own simulation models exactly that, in
//! `ReadYourWrites.cpp`'s `simulateTimeoutInFlightCommit`). The same timeout while reading,
//! or while `on_error` backs off, means the attempt never committed.

use crate::store::txn::{TxnError, TxnErrorKind};

/// The codes classified by name (FoundationDB's `error_definitions.h`; see
/// <https://apple.github.io/foundationdb/api-error-codes.html>).
pub(crate) mod code {
    /// `timed_out`.
    pub(crate) const TIMED_OUT: i32 = 1004;
    /// `transaction_too_old`.
    pub(crate) const TRANSACTION_TOO_OLD: i32 = 1007;
    /// `future_version`.
    pub(crate) const FUTURE_VERSION: i32 = 1009;
    /// `not_committed` (a conflict).
    pub(crate) const NOT_COMMITTED: i32 = 1020;
    /// `commit_unknown_result`.
    pub(crate) const COMMIT_UNKNOWN_RESULT: i32 = 1021;
    /// `transaction_timed_out`.
    pub(crate) const TRANSACTION_TIMED_OUT: i32 = 1031;
    /// `too_many_watches`.
    pub(crate) const TOO_MANY_WATCHES: i32 = 1032;
    /// `process_behind`.
    pub(crate) const PROCESS_BEHIND: i32 = 1037;
    /// `database_locked`.
    pub(crate) const DATABASE_LOCKED: i32 = 1038;
    /// `cluster_version_changed`.
    pub(crate) const CLUSTER_VERSION_CHANGED: i32 = 1039;
    /// `commit_proxy_memory_limit_exceeded`.
    pub(crate) const COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED: i32 = 1042;
    /// `batch_transaction_throttled`.
    pub(crate) const BATCH_TRANSACTION_THROTTLED: i32 = 1051;
    /// `grv_proxy_memory_limit_exceeded`.
    pub(crate) const GRV_PROXY_MEMORY_LIMIT_EXCEEDED: i32 = 1078;
    /// `tag_throttled`.
    pub(crate) const TAG_THROTTLED: i32 = 1213;
    /// `proxy_tag_throttled`.
    pub(crate) const PROXY_TAG_THROTTLED: i32 = 1223;
    /// `transaction_throttled_hot_shard` (FoundationDB 7.4).
    pub(crate) const TRANSACTION_THROTTLED_HOT_SHARD: i32 = 1235;
    /// `transaction_rejected_range_locked` (FoundationDB 7.4; its kind comes from `libfdb_c`'s
    /// predicates, as for every code this module does not name).
    pub(crate) const TRANSACTION_REJECTED_RANGE_LOCKED: i32 = 1242;
    /// `blob_granule_request_failed`.
    pub(crate) const BLOB_GRANULE_REQUEST_FAILED: i32 = 1079;
}

/// Where an error arose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A read, a watch, `on_error`: nothing of the attempt was sent for commit.
    Operation,
    /// The commit: the attempt's writes may be on their way.
    Commit,
}

/// What `libfdb_c`'s `fdb_error_predicate` says about a code this crate does not name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Predicates {
    /// `FDB_ERROR_PREDICATE_MAYBE_COMMITTED`.
    pub(crate) maybe_committed: bool,
    /// `FDB_ERROR_PREDICATE_RETRYABLE`.
    pub(crate) retryable: bool,
}

/// The kind of a code this crate names, in `phase`; `None` for any other code.
pub(crate) fn named_kind(code: i32, phase: Phase) -> Option<TxnErrorKind> {
    use code::*;
    Some(match code {
        NOT_COMMITTED => TxnErrorKind::Conflict,
        TRANSACTION_TOO_OLD => TxnErrorKind::TooOld,
        COMMIT_UNKNOWN_RESULT | CLUSTER_VERSION_CHANGED => TxnErrorKind::CommitUnknown,
        TIMED_OUT | TRANSACTION_TIMED_OUT => match phase {
            Phase::Operation => TxnErrorKind::Unavailable,
            Phase::Commit => TxnErrorKind::CommitUnknown,
        },
        FUTURE_VERSION
        | PROCESS_BEHIND
        | DATABASE_LOCKED
        | COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED
        | BATCH_TRANSACTION_THROTTLED
        | GRV_PROXY_MEMORY_LIMIT_EXCEEDED
        | TAG_THROTTLED
        | PROXY_TAG_THROTTLED
        | TRANSACTION_THROTTLED_HOT_SHARD => TxnErrorKind::Unavailable,
        TOO_MANY_WATCHES => TxnErrorKind::Fatal,
        _ => return None,
    })
}

/// The kind of a code this crate does not name (codes added by later FoundationDB versions),
/// from `libfdb_c`'s predicates.
pub(crate) fn unnamed_kind(predicates: Predicates) -> TxnErrorKind {
    if predicates.maybe_committed {
        TxnErrorKind::CommitUnknown
    } else if predicates.retryable {
        TxnErrorKind::OtherRetryable
    } else {
        TxnErrorKind::Fatal
    }
}

/// The kind of `code` in `phase`: by name, or else by `predicates()` (asked only then, so a
/// named code never calls into `libfdb_c`).
pub(crate) fn kind_of(
    code: i32,
    phase: Phase,
    predicates: impl FnOnce() -> Predicates,
) -> TxnErrorKind {
    named_kind(code, phase).unwrap_or_else(|| unnamed_kind(predicates()))
}

/// Whether FoundationDB's `on_error` runs a transaction again after an error with `code`
/// (`Transaction::onError` in `NativeAPI.actor.cpp` and `MultiVersionTransaction::onError`,
/// 7.4.6, probed by the FoundationDB tier on 7.3.79 and 7.4.6): `not_committed` (1020),
/// `commit_unknown_result` (1021), `database_locked` (1038), the proxies' memory limits (1042,
/// 1078), `process_behind` (1037), throttling (1051, 1213, 1223, 1235),
/// `blob_granule_request_failed` (1079), `transaction_rejected_range_locked` (1242),
/// `transaction_too_old` (1007) and `future_version` (1009). Every other code ends `Database::run` with that error: timeouts (1004, 1031);
/// `cluster_version_changed` (1039), which only the multi-version client retries (a client with
/// external client libraries; without them, as the `foundationdb` crate starts it, the client
/// bypasses it and `on_error` returns 1039, probed on 7.3.79 and 7.4.6).
///
/// `transaction_throttled_hot_shard` (1235) and `transaction_rejected_range_locked` (1242) are
/// new in 7.4, whose `on_error` retries both. A 7.3 client does not know them (7.3 numbers a
/// server's internal error 1235, which no client receives, and has no 1242) and returns them;
/// only a closure that returns such a code itself could tell. The embedded stores retry them as
/// 7.4 does (the declared difference `codes-new-in-7-4-retried`).
pub(crate) fn retried_by_on_error(code: i32) -> bool {
    use code::*;
    matches!(
        code,
        NOT_COMMITTED
            | COMMIT_UNKNOWN_RESULT
            | DATABASE_LOCKED
            | COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED
            | GRV_PROXY_MEMORY_LIMIT_EXCEEDED
            | PROCESS_BEHIND
            | BATCH_TRANSACTION_THROTTLED
            | TAG_THROTTLED
            | BLOB_GRANULE_REQUEST_FAILED
            | PROXY_TAG_THROTTLED
            | TRANSACTION_THROTTLED_HOT_SHARD
            | TRANSACTION_REJECTED_RANGE_LOCKED
            | TRANSACTION_TOO_OLD
            | FUTURE_VERSION
    )
}

/// Whether a retry loop with FoundationDB's policy (`MemDb::run`, `SqliteDb::run`) runs the
/// transaction again after `error`: as `on_error` would ([`retried_by_on_error`]) when the
/// error has a code. An error without one never comes from FoundationDB: the embedded stores'
/// own (MemDb's injected unavailability, SQLite's lock wait, standing for a cluster that keeps
/// a transaction waiting) are retried by their kind ([`TxnErrorKind::is_retryable`]); the
/// FoundationDB adapter cannot hand such an error to `on_error`, so `Database::run` returns it
/// (a declared difference).
pub(crate) fn retried_by_run(error: &TxnError) -> bool {
    match error.code() {
        Some(code) => retried_by_on_error(code),
        None => error.kind().is_retryable(),
    }
}

/// Gives an error a closure returned to a retry loop (`MemDb::run`, `SqliteDb::run`) the kind
/// its code has, if it carries one: FoundationDB's `Database::run` hands such an error to
/// `on_error`, which knows it only by its code, and returns (or retries) it as that code, which
/// the adapter classifies as an operation's error. So `run` reports one kind for one code on
/// every store, whatever kind the closure wrote (a `Conflict` carrying 1031 is `Unavailable`,
/// as 1031 is). Codes this crate does not name are fatal (no `libfdb_c` to ask), as injected
/// faults are. An error without a code keeps its kind.
pub(crate) fn classify_returned(error: &mut TxnError) {
    if let Some(code) = error.code() {
        error.set_kind(kind_of(code, Phase::Operation, Predicates::default));
    }
}

/// Whether an error a retry loop retries may have committed, as FoundationDB's binding tells
/// its next attempt (`FdbError::is_maybe_committed`): by its code when it has one (1021,
/// 1039), by its kind otherwise.
pub(crate) fn may_have_committed(error: Option<&TxnError>) -> bool {
    match error.map(|e| (e.code(), e.kind())) {
        Some((Some(code), _)) => {
            matches!(
                code,
                code::COMMIT_UNKNOWN_RESULT | code::CLUSTER_VERSION_CHANGED
            )
        }
        Some((None, kind)) => kind == TxnErrorKind::CommitUnknown,
        None => false,
    }
}

/// Whether [`ElectionDatabase::transact`](crate::store::database::ElectionDatabase::transact) retries `error` itself, in every store: a conflict
/// or a `transaction_too_old` (known not to have committed) that carries a code FoundationDB's
/// `on_error` retries, which the FoundationDB adapter hands to `on_error`. Everything else
/// (unknown results, timeouts, unavailability, throttling, fatal errors, and a conflict whose
/// code `on_error` would not retry or that has no code to give it) is returned to the caller,
/// who backs off.
pub(crate) fn retried_in_transact(error: &TxnError) -> bool {
    matches!(error.kind(), TxnErrorKind::Conflict | TxnErrorKind::TooOld)
        && error.code().is_some_and(retried_by_on_error)
}

/// The code a failed attempt of the adapter's `transact` is retried with, through
/// `on_error`: see [`retried_in_transact`].
/// `None` for every other error, which `transact` returns.
#[cfg(any(test, feature = "fdb"))]
pub(crate) fn retry_code(error: &crate::error::ElectionError) -> Option<i32> {
    match error {
        crate::error::ElectionError::Database(e) if retried_in_transact(e) => e.code(),
        _ => None,
    }
}

/// The error MemDb reports for an injected FoundationDB `code` in `phase`, classified as the
/// adapter would classify it (codes this crate does not name are fatal: there is no
/// `libfdb_c` to ask).
pub(crate) fn injected(code: i32, phase: Phase) -> TxnError {
    let kind = kind_of(code, phase, Predicates::default);
    let during = match phase {
        Phase::Operation => "an operation",
        Phase::Commit => "a commit",
    };
    TxnError::with_source(
        kind,
        format!("injected fault: FoundationDB error {code} during {during}"),
    )
    .with_code(code)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]

    use super::*;
    use crate::error::ElectionError;

    const NAMED: [i32; 16] = [
        1004, 1007, 1009, 1020, 1021, 1031, 1032, 1037, 1038, 1039, 1042, 1051, 1078, 1213, 1223,
        1235,
    ];

    fn never_asked() -> Predicates {
        panic!("a named code asked libfdb_c")
    }

    #[test]
    fn named_codes_classify_by_phase_without_asking_libfdb_c() {
        use TxnErrorKind::*;
        // (code, during an operation, during a commit)
        let table = [
            (1020, Conflict, Conflict),
            (1007, TooOld, TooOld),
            (1021, CommitUnknown, CommitUnknown),
            (1039, CommitUnknown, CommitUnknown),
            (1004, Unavailable, CommitUnknown),
            (1031, Unavailable, CommitUnknown),
            (1009, Unavailable, Unavailable),
            (1037, Unavailable, Unavailable),
            (1038, Unavailable, Unavailable),
            (1042, Unavailable, Unavailable),
            (1051, Unavailable, Unavailable),
            (1078, Unavailable, Unavailable),
            (1213, Unavailable, Unavailable),
            (1223, Unavailable, Unavailable),
            (1235, Unavailable, Unavailable),
            (1032, Fatal, Fatal),
        ];
        assert_eq!(table.len(), NAMED.len());
        for (code, operation, commit) in table {
            assert_eq!(
                kind_of(code, Phase::Operation, never_asked),
                operation,
                "{code}"
            );
            assert_eq!(kind_of(code, Phase::Commit, never_asked), commit, "{code}");
        }
    }

    #[test]
    fn a_timeout_may_have_committed_only_during_a_commit() {
        for code in [1004, 1031] {
            let op = injected(code, Phase::Operation);
            assert!(!op.is_maybe_committed() && op.is_retryable(), "{code}");
            let commit = injected(code, Phase::Commit);
            assert!(commit.is_maybe_committed(), "{code}");
            assert_eq!(commit.code(), Some(code));
        }
    }

    /// `run_loop_errors` (issue 38): a closure's error leaves `run` with its code's kind, as
    /// FoundationDB's `Database::run` returns it; without a code, with its own.
    #[test]
    fn a_closure_error_returned_by_run_takes_its_codes_kind() {
        use TxnErrorKind::*;
        // (the closure's kind, its code, the kind `run` returns)
        let table = [
            (Conflict, Some(1031), Unavailable),
            (Conflict, Some(1004), Unavailable),
            (Fatal, Some(1020), Conflict),
            (Unavailable, Some(1007), TooOld),
            (Conflict, Some(1021), CommitUnknown),
            (Conflict, Some(1032), Fatal),
            (Conflict, Some(4242), Fatal),
            (Conflict, None, Conflict),
            (Unavailable, None, Unavailable),
        ];
        for (kind, code, returned) in table {
            let mut e = TxnError::new(kind);
            if let Some(code) = code {
                e = e.with_code(code);
            }
            classify_returned(&mut e);
            assert_eq!((e.kind(), e.code()), (returned, code), "{kind:?} {code:?}");
        }
    }

    #[test]
    fn unnamed_codes_follow_libfdb_c() {
        let ask = |maybe_committed, retryable| {
            kind_of(4242, Phase::Commit, || Predicates {
                maybe_committed,
                retryable,
            })
        };
        assert_eq!(ask(true, true), TxnErrorKind::CommitUnknown);
        assert_eq!(ask(false, true), TxnErrorKind::OtherRetryable);
        assert_eq!(ask(false, false), TxnErrorKind::Fatal);
        assert_eq!(named_kind(4242, Phase::Operation), None);
        // Without libfdb_c (an injected fault) an unnamed code is fatal.
        assert_eq!(injected(4242, Phase::Commit).kind(), TxnErrorKind::Fatal);
    }

    /// What `transact` does with each named code: only what is known not to have committed,
    /// and that FoundationDB retries at once, is retried inside; everything that may have
    /// committed comes back as maybe committed.
    #[test]
    fn transact_retries_only_what_did_not_commit() {
        for phase in [Phase::Operation, Phase::Commit] {
            for code in NAMED {
                let e = injected(code, phase);
                let retried = retried_in_transact(&e);
                assert_eq!(retried, matches!(code, 1020 | 1007), "{code} {phase:?}");
                assert!(!(retried && e.is_maybe_committed()), "{code} {phase:?}");
            }
        }
        // The codes FoundationDB's own loop retries as maybe committed never are here.
        for code in [1021, 1039] {
            assert!(!retried_in_transact(&injected(code, Phase::Commit)));
        }
    }

    #[test]
    fn transact_hands_on_error_only_codes_that_did_not_commit() {
        for phase in [Phase::Operation, Phase::Commit] {
            for code in NAMED {
                let e = ElectionError::Database(injected(code, phase));
                let expected = matches!(code, 1020 | 1007).then_some(code);
                assert_eq!(retry_code(&e), expected, "{code} {phase:?}");
            }
        }
        // A conflict without a code cannot be handed to on_error: returned.
        let uncoded = ElectionError::Database(TxnError::new(TxnErrorKind::Conflict));
        assert_eq!(retry_code(&uncoded), None);
        // The election's own errors are never retried.
        assert_eq!(retry_code(&ElectionError::NotInitialized), None);
    }
}
