//! Planted faults (feature `planted-faults`): unknown commit results mishandled on purpose, for
//! chaos runs.

use crate::store::fdb_codes::code;
use crate::store::txn::{TxnError, TxnErrorKind};

/// The environment variable of the first planted fault ([module docs](crate::fdb#planted-faults-feature-planted-faults-only)).
#[cfg_attr(
    not(feature = "planted-faults"),
    allow(dead_code, reason = "only the feature planted-faults reads it")
)]
pub(super) const PLANT_UNKNOWN_AS_NOT_COMMITTED: &str = "FDB_LEADER_DEBUG_UNKNOWN_AS_NOT_COMMITTED";

/// The environment variable of the second planted fault ([module docs](crate::fdb#planted-faults-feature-planted-faults-only)).
#[cfg_attr(
    not(feature = "planted-faults"),
    allow(dead_code, reason = "only the feature planted-faults reads it")
)]
pub(super) const PLANT_UNKNOWN_AS_COMMITTED: &str = "FDB_LEADER_DEBUG_UNKNOWN_AS_COMMITTED";

/// Whether this build was asked for the planted fault `name` (read once; warned once).
#[cfg(feature = "planted-faults")]
fn plant_on(name: &str, what: &str) -> bool {
    let on = std::env::var_os(name).is_some_and(|v| v == "1");
    if on {
        tracing::warn!("{name}=1: this build {what} (a planted fault, for the chaos harness)");
    }
    on
}

/// Whether this build reports unknown commit results as not committed.
#[cfg(feature = "planted-faults")]
pub(super) fn unknown_reported_as_not_committed() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        plant_on(
            PLANT_UNKNOWN_AS_NOT_COMMITTED,
            "reports unknown commit results as not committed",
        )
    })
}

/// Whether this build reports unknown commit results as committed.
#[cfg(feature = "planted-faults")]
pub(super) fn unknown_adopted_as_committed() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        plant_on(
            PLANT_UNKNOWN_AS_COMMITTED,
            "reports unknown commit results as committed",
        )
    })
}

/// Without the feature `planted-faults` nothing plants a fault.
#[cfg(not(feature = "planted-faults"))]
pub(super) const fn unknown_reported_as_not_committed() -> bool {
    false
}

/// Without the feature `planted-faults` nothing plants a fault.
#[cfg(not(feature = "planted-faults"))]
pub(super) const fn unknown_adopted_as_committed() -> bool {
    false
}

/// Logs, at debug level, one use of a planted fault: the unknown result `code` was reported
/// as `as_what`. The chaos harness counts these lines.
pub(super) fn log_planted(code: i32, as_what: &str) {
    tracing::debug!(
        code,
        as_what,
        "planted fault: an unknown commit result reported"
    );
}

/// The first planted fault: with `on`, a commit that may have applied is reported as one
/// that did not (`not_committed`, 1020). Otherwise `error` unchanged.
pub(super) fn planted(error: TxnError, on: bool) -> TxnError {
    if on && error.kind() == TxnErrorKind::CommitUnknown {
        log_planted(
            error.code().unwrap_or(code::TRANSACTION_TIMED_OUT),
            "not_committed",
        );
        TxnError::with_source(TxnErrorKind::Conflict, error).with_code(code::NOT_COMMITTED)
    } else {
        error
    }
}
