//! Helpers shared by the runner examples (included with `#[path]`; not an example itself).

use std::error::Error;
use std::time::{Duration, Instant};

use fdb_leader_election::ElectionConfig;

/// The result type of the demos.
pub(crate) type DemoResult<T = ()> = Result<T, Box<dyn Error + Send + Sync>>;

/// Short leases so the demos finish in seconds: 300 ms lease, 100 ms heartbeat. Each
/// transaction attempt may take 90 ms (the default would be a third of the heartbeat, 33 ms,
/// which a real cluster on a loaded machine does not always meet: the runner would log unknown
/// commit results it then resolves).
#[allow(dead_code, reason = "only the MemDb demos use it")]
pub(crate) fn fast_config() -> DemoResult<ElectionConfig> {
    Ok(
        ElectionConfig::with_lease_duration(Duration::from_millis(300))?
            .to_builder()
            .transaction_timeout(Duration::from_millis(90))
            .handover_grace(Duration::from_millis(500))
            .build()?,
    )
}

/// Leases for a real cluster on a small, busy machine (the FoundationDB demos): 1.5 s lease,
/// 300 ms heartbeat, 250 ms per transaction attempt. A commit of a real cluster takes a few
/// milliseconds, but a loaded 2-core machine sometimes needs a hundred; the demos' own timing
/// is paced by the configuration's heartbeat.
#[allow(dead_code, reason = "only the FoundationDB demos use it")]
pub(crate) fn cluster_config() -> DemoResult<ElectionConfig> {
    Ok(ElectionConfig::builder()
        .lease_duration(Duration::from_millis(1_500))
        .heartbeat_interval(Duration::from_millis(300))
        .candidate_timeout(Duration::from_secs(4))
        .transaction_timeout(Duration::from_millis(250))
        .handover_grace(Duration::from_millis(500))
        .build()?)
}

/// Waits until `done()` holds, checking every 5 ms, for at most `bound`; `what` names it in
/// the error.
#[allow(dead_code, reason = "not every demo waits this way")]
pub(crate) async fn wait_until(
    what: &str,
    bound: Duration,
    mut done: impl FnMut() -> bool,
) -> DemoResult {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > bound {
            return Err(format!("{what}: not within {bound:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
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
#[allow(dead_code, reason = "not every demo names its candidates")]
pub(crate) fn label(id: &fdb_leader_election::CandidateId) -> &str {
    id.as_str().rsplit_once('-').map_or(id.as_str(), |(l, _)| l)
}
