//! The bridge from the candidate's clock to tokio's timers, and error formatting for logs.

use crate::clock::{Clock, LocalInstant};
use crate::config::MAX_DURATION;

/// The tokio instant at which `clock` shows `t` (now, if `t` has passed).
pub(crate) fn tokio_instant(clock: &dyn Clock, t: LocalInstant) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    let wait = t.saturating_duration_since(clock.now()).min(MAX_DURATION);
    now.checked_add(wait).unwrap_or(now)
}

/// Sleeps until `at`, or forever if `at` is `None`.
pub(crate) async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// An error and its sources, joined with ": ".
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}
