//! The readiness and leader health checks of a runner (docs/health-and-traffic.md): it starts
//! ineligible, campaigns once its readiness check has passed, leads, and turns ineligible when
//! its leader health check fails `fall` times (with nobody else eligible, it keeps leading:
//! `UnhealthyPolicy::Hold`). scripts/doc-blocks runs it and compares what it prints with the
//! page.
//!
//! Run it with `cargo run --example health_checks` (about half a second).

// README: health-checks
use std::time::Duration;

use fdb_leader_election::runner::{CheckSettings, Runner};
use fdb_leader_election::{Eligibility, MemDb, Subspace};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // CheckSettings::default() is HAProxy's: interval 2 s, timeout 1 s, fall 3, rise 2.
    let checks = CheckSettings::new(Duration::from_millis(100), Duration::from_millis(50), 3, 2)?;
    let runner = Runner::builder(MemDb::new(), Subspace::from("scheduler"))
        .readiness_check(checks, || async { Ok(()) }) // e.g. ping this host's database
        .leader_health_check(checks, || async {
            // e.g. the leader's own service
            Err::<(), _>("port 7000 refused the connection".to_owned())
        })
        .health_cool_down(Duration::from_secs(30))
        .start()?;
    // Ineligible until its readiness check first passes: it does not campaign before.
    println!("{:?}", runner.eligibility());
    let mut eligibility = runner.eligibility_updates();
    eligibility.wait_for(Eligibility::is_eligible).await?;
    println!("{:?}", runner.eligibility());
    let guard = runner.elected().await.ok_or("the runner stopped")?;
    println!("leading, ballot {}", guard.fencing_token());
    // The leader check fails `fall` times: ineligible. Nobody else is eligible: it holds.
    eligibility.wait_for(|e| !e.is_eligible()).await?;
    println!(
        "{:?}, leading: {}",
        runner.eligibility(),
        runner.is_leader()
    );
    runner.shutdown().await;
    Ok(())
}
// README: end
