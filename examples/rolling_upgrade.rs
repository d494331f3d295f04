//! A rolling upgrade on the embedded MemDb (docs/design.md §14): three instances go from 1.4.0 to
//! 1.5.0 one at a time, graceful restarts, all of one priority, first under `prefer-oldest`
//! (the old version leads until its last instance has left), then under `prefer-newest` (the
//! first new instance takes the leadership at once). Each leadership change is printed with
//! its version, ballot and reason, then a summary: overlaps, changes, time without a leader.
//!
//! Run it with `cargo run --example rolling_upgrade` (a few seconds).

#[path = "runner_demos/mod.rs"]
mod runner_demos;
#[path = "runner_demos/rolling_upgrade.rs"]
mod upgrade_demo;

use fdb_leader_election::{MemDb, VersionPolicy};
use foundationdb_tuple::Subspace;

#[tokio::main(flavor = "current_thread")]
async fn main() -> runner_demos::DemoResult {
    runner_demos::init_logging();
    for policy in [VersionPolicy::PreferOldest, VersionPolicy::PreferNewest] {
        upgrade_demo::run(
            MemDb::new(),
            Subspace::from(("rolling-upgrade", policy.as_str())),
            runner_demos::fast_config()?,
            policy,
        )
        .await?;
    }
    Ok(())
}
