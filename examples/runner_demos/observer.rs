//! The observer demo, for any [`ElectionDatabase`]: a client that never competes follows
//! the leader's address (its payload) through a watch on the leader record, while leaders
//! come and go: an election, a graceful handover, a change of address, a crash.

use std::time::{Duration, Instant};

use fdb_leader_election::ElectionConfig;
use fdb_leader_election::runner::{ElectionDatabase, LeaderInfo, Runner};
use foundationdb_tuple::Subspace;

use crate::runner_demos::{DemoResult, label, say};

fn show(leader: Option<&LeaderInfo>) -> String {
    match leader {
        Some(l) => format!(
            "{} at {} (ballot {})",
            label(&l.id),
            l.payload_str().unwrap_or("?"),
            l.ballot
        ),
        None => "no leader".to_owned(),
    }
}

/// Waits (at most `bound`) until the observer's view of the leader's address is
/// `address` (or no leader).
async fn until_observer_knows(
    observer: &Runner,
    address: Option<&str>,
    bound: Duration,
) -> DemoResult {
    let mut updates = observer.leader_updates();
    let known = updates.wait_for(|l| l.as_ref().and_then(LeaderInfo::payload_str) == address);
    tokio::time::timeout(bound, known)
        .await
        .map_err(|_| format!("the observer never learned {address:?}"))??;
    Ok(())
}

pub(crate) async fn run<D: ElectionDatabase>(
    db: D,
    space: Subspace,
    config: ElectionConfig,
) -> DemoResult {
    let start = Instant::now();
    let within = config.lease_duration().saturating_mul(4);
    let observer = Runner::observer(db.clone(), space.clone())
        .config(config.clone())
        .start()?;
    let mut changes = observer.subscribe();
    let printer = tokio::spawn(async move {
        let mut n = 0u32;
        while let Ok(change) = changes.recv().await {
            n = n.saturating_add(1);
            say(
                start,
                format!(
                    "observer: {} -> {}   [{}]",
                    show(change.old.as_ref()),
                    show(change.new.as_ref()),
                    change.reason.as_str()
                ),
            );
        }
        n
    });
    let candidate = |name: &str, address: &str| {
        Runner::builder(db.clone(), space.clone())
            .label(name)
            .payload(address)
            .config(config.clone())
            .start()
    };

    let a = candidate("a", "10.0.0.1:7000")?;
    a.elected().await.ok_or("a stopped")?;
    let b = candidate("b", "10.0.0.2:7000")?;
    until_observer_knows(&observer, Some("10.0.0.1:7000"), within).await?;

    say(start, "a shuts down (hands over to b)");
    a.shutdown().await;
    until_observer_knows(&observer, Some("10.0.0.2:7000"), within).await?;

    say(start, "b moves to another port");
    b.candidate()
        .ok_or("b is a candidate")?
        .set_payload(Some(b"10.0.0.2:7001".to_vec()))?;
    until_observer_knows(&observer, Some("10.0.0.2:7001"), within).await?;

    say(start, "b crashes; c starts");
    b.abort();
    until_observer_knows(&observer, None, within).await?;
    let c = candidate("c", "10.0.0.3:7000")?;
    until_observer_knows(&observer, Some("10.0.0.3:7000"), within).await?;

    let known = observer.leader();
    let actual = c.leadership().map(|g| g.ballot());
    if known.as_ref().map(|l| l.ballot) != actual {
        return Err(format!("the observer knows {known:?}, the leader is at {actual:?}").into());
    }
    c.shutdown().await;
    observer.shutdown().await;
    let changes = printer.await?;
    println!(
        "summary: changes_seen={changes} final_leader={}",
        show(known.as_ref())
    );
    Ok(())
}
