//! Helpers shared by the runner examples (included with `#[path]`; not an example itself).

use std::error::Error;
use std::time::{Duration, Instant};

use fdb_leader_election::ElectionConfig;

/// The result type of the demos.
pub(crate) type DemoResult<T = ()> = Result<T, Box<dyn Error + Send + Sync>>;

/// Short leases so the demos finish in seconds: 300 ms lease, 100 ms heartbeat.
pub(crate) fn fast_config() -> DemoResult<ElectionConfig> {
    Ok(
        ElectionConfig::with_lease_duration(Duration::from_millis(300))?
            .to_builder()
            .handover_grace(Duration::from_millis(500))
            .build()?,
    )
}

/// Prints `what` with the time since `start`.
pub(crate) fn say(start: Instant, what: impl AsRef<str>) {
    println!(
        "t={:>6.3}s  {}",
        start.elapsed().as_secs_f64(),
        what.as_ref()
    );
}

/// Logs the runner's warnings (set `VERBOSE=1` for its info-level events as well).
pub(crate) fn init_logging() {
    let level = if std::env::var_os("VERBOSE").is_some() {
        tracing::Level::INFO
    } else {
        tracing::Level::WARN
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// A short name for a candidate id: its label.
pub(crate) fn label(id: &fdb_leader_election::CandidateId) -> &str {
    id.as_str().rsplit_once('-').map_or(id.as_str(), |(l, _)| l)
}
