//! The operator (tester 0): configuration changes of the lease, the version policy and
//! preemption; operator marks that exclude a candidate's name; directed and plain resigns.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::{
    Ballot, CandidateId, ElectionConfig, ElectionError, LeaderElection, OperatorOutcome,
    VersionPolicy,
};
use foundationdb::Database;

use crate::incarnation::txn::run;
use crate::sim::Sim;
use crate::tester::Shared;

/// The election's configuration with `lease` (heartbeat a quarter of it), under `policy`.
pub(crate) fn config(
    lease: f64,
    policy: VersionPolicy,
    preemption: bool,
) -> Result<ElectionConfig, fdb_leader_election::ConfigError> {
    let lease = Duration::from_secs_f64(lease);
    // A simulated cluster under BUGGIFY and faults answers slowly: each attempt gets three
    // quarters of a heartbeat.
    let heartbeat = lease / 4;
    ElectionConfig::builder()
        .lease_duration(lease)
        .heartbeat_interval(heartbeat)
        .candidate_timeout(lease * 2)
        .transaction_timeout(heartbeat * 3 / 4)
        .handover_grace(heartbeat)
        .takeover_stagger(Duration::from_millis(50))
        .max_clock_rate_error_ppm(10_000)
        .allow_preemption(preemption)
        .version_policy(policy)
        .build()
}

/// The operator's loop, until `end` (simulated time). `names`: every candidate slot's name;
/// `lease`: the spec's lease, which the operator scales by 0.6, 1 and 1.5.
pub(crate) async fn operate(
    lease: f64,
    sim: Sim,
    db: Arc<Database>,
    election: LeaderElection,
    tester: Shared,
    names: Vec<String>,
    end: f64,
) {
    let me = match CandidateId::with_nonce("operator", sim.bits()) {
        Ok(id) => id,
        Err(_) => return,
    };
    let mut marked: BTreeSet<String> = BTreeSet::new();
    while sim.now() < end {
        sim.sleep(sim.between(2.0, 9.0)).await;
        let name = names
            .get(usize::try_from(sim.below(names.len() as u64)).unwrap_or(0))
            .cloned()
            .unwrap_or_default();
        match sim.below(6) {
            0 | 1 => {
                let lease = lease * [0.6, 1.0, 1.5][usize::try_from(sim.below(3)).unwrap_or(0)];
                let policy = VersionPolicy::ALL
                    [usize::try_from(sim.below(VersionPolicy::ALL.len() as u64)).unwrap_or(0)];
                let Ok(new) = config(lease, policy, !sim.chance(0.15)) else {
                    continue;
                };
                let e = election.clone();
                let written = run(&db, &sim, &tester, 1000, |trx| {
                    let (e, new) = (e.clone(), new.clone());
                    async move { Ok(e.write_config(&trx, &new).await?) }
                })
                .await;
                if written.is_ok() {
                    tester.borrow_mut().stats.config_changes += 1;
                }
            }
            2 => {
                // A mark excludes the name (or lifts one it put).
                let lift = marked.contains(&name);
                let e = election.clone();
                let n = name.clone();
                let done = run(&db, &sim, &tester, 1000, |trx| {
                    let (e, n) = (e.clone(), n.clone());
                    async move { Ok(e.set_eligible(&trx, &n, lift, "sim: maintenance").await?) }
                })
                .await;
                if done.is_ok() {
                    tester.borrow_mut().stats.marks += 1;
                    if lift {
                        marked.remove(&name);
                    } else {
                        marked.insert(name);
                    }
                }
            }
            3 => {
                let (e, op, to) = (election.clone(), me.clone(), name.clone());
                let asked = run(&db, &sim, &tester, 1000, |trx| {
                    let (e, op, to) = (e.clone(), op.clone(), to.clone());
                    async move {
                        let ballot = e.leader_record(&trx).await?.ballot();
                        match e.request_resign_to(&trx, &op, ballot, &to).await {
                            Err(ElectionError::OperatorRefused { .. }) => Ok(false),
                            other => Ok(matches!(other?, OperatorOutcome::Done { .. })),
                        }
                    }
                })
                .await;
                let mut t = tester.borrow_mut();
                match asked {
                    Ok(true) => t.stats.directed += 1,
                    Ok(false) => t.stats.directed_refused += 1,
                    Err(_) => {}
                }
            }
            4 => {
                let (e, op) = (election.clone(), me.clone());
                let asked = run(&db, &sim, &tester, 1000, |trx| {
                    let (e, op) = (e.clone(), op.clone());
                    async move {
                        let ballot: Ballot = e.leader_record(&trx).await?.ballot();
                        Ok(e.request_resign(&trx, &op, ballot).await?)
                    }
                })
                .await;
                if matches!(asked, Ok(OperatorOutcome::Done { .. })) {
                    tester.borrow_mut().stats.operator_resigns += 1;
                }
            }
            _ => {}
        }
    }
    // Lift every mark, so that the run ends with everyone eligible.
    for name in marked {
        let e = election.clone();
        let _ = run(&db, &sim, &tester, 1000, |trx| {
            let (e, n) = (e.clone(), name.clone());
            async move { Ok(e.set_eligible(&trx, &n, true, "").await?) }
        })
        .await;
    }
}
