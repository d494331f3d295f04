//! `fdb-leader-election` as a workload of FoundationDB's own deterministic simulator
//! (`fdbserver -r simulation`, with the `External` workload and `useCAPI = true`).
//!
//! The simulator runs the real client (`libfdb_c` inside `fdbserver`) against simulated
//! machines, clogs and swizzles their network, kills and reboots them, rolls back, and turns
//! BUGGIFY on, all reproducible from one seed. This library, loaded by fdbserver, drives the
//! election there: candidates driven by the library's own runner machine on the simulator's
//! clock, fenced leader work, an operator; then replays what it logged and checks it. See
//! `docs/testing.md` ("FoundationDB's simulator") and `scripts/fdb-sim`.
//!
//! Workloads (the spec's `workloadName`): `LeaderElection` and `ShardedElection`.

mod check;
mod incarnation;
mod log;
mod operator;
mod options;
mod sharded;
mod sim;
mod single;
mod tester;

use foundationdb_simulation::{
    RustWorkload, RustWorkloadFactory, Severity, WorkloadContext, WrappedWorkload, register_factory,
};

use crate::sim::Sim;

/// Picks the workload by its name in the spec.
struct Factory;

impl RustWorkloadFactory for Factory {
    fn create(name: String, context: WorkloadContext) -> WrappedWorkload {
        let sim = Sim::new(context);
        match name.as_str() {
            "ShardedElection" => sharded::ShardedWorkload::new(sim).wrap(),
            "LeaderElection" => single::SingleWorkload::new(sim).wrap(),
            other => {
                sim.trace(
                    Severity::Error,
                    "LeaderElectionUnknownWorkload",
                    &[(
                        "Reason".into(),
                        format!("{other:?}: expected LeaderElection or ShardedElection"),
                    )],
                );
                single::SingleWorkload::new(sim).wrap()
            }
        }
    }
}

register_factory!(Factory);
