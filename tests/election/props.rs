//! Property tests: random operation sequences against MemDb, with crashes, pauses, resigns,
//! priority changes and injected commit faults. After every operation:
//!
//! - the ballot in the database never decreases;
//! - each ballot has exactly one owner, ever;
//! - every candidate that believes it leads (including paused and replaced incarnations) is
//!   the record's owner at the record's ballot — so no two believe at once.

use crate::runner_support::in_txn;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::{
    Ballot, Candidate, CandidateId, CommitFault, ElectionConfig, ElectionError, LeaderElection,
    LeaderRecord, ManualClock, MemDb, Priority, RunOptions, ScriptedFaults,
};
use foundationdb_tuple::Subspace;
use proptest::prelude::*;

const SLOTS: usize = 4;

#[derive(Clone, Debug)]
enum Op {
    Cycle(usize),
    Advance(u64),
    Resign(usize),
    Restart(usize),
    CrashLeader,
    SetPriority(usize, i32),
    FaultyCycle(usize, u8, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..SLOTS).prop_map(Op::Cycle),
        4 => (0u64..4_000).prop_map(Op::Advance),
        1 => (0..SLOTS).prop_map(Op::Resign),
        1 => (0..SLOTS).prop_map(Op::Restart),
        1 => Just(Op::CrashLeader),
        1 => ((0..SLOTS), (0i32..3)).prop_map(|(i, p)| Op::SetPriority(i, p)),
        2 => ((0..SLOTS), (0u8..3), any::<bool>()).prop_map(|(i, f, r)| Op::FaultyCycle(i, f, r)),
    ]
}

struct Harness {
    db: MemDb,
    election: LeaderElection,
    clock: ManualClock,
    faults: ScriptedFaults,
    slots: Vec<Candidate>,
    everyone: Vec<Candidate>,
    owners: HashMap<Ballot, CandidateId>,
    last_ballot: Ballot,
    acquisitions: u64,
    incarnation: u64,
}

impl Harness {
    async fn new(config: ElectionConfig) -> Self {
        let db = MemDb::new();
        let faults = ScriptedFaults::new();
        db.set_fault_injector(Arc::new(faults.clone()));
        let election = LeaderElection::new(Subspace::from("prop"));
        in_txn!(db, [e = election, c = config], |txn| e
            .initialize_with_config(&txn, &c)
            .await)
        .unwrap();
        let mut h = Harness {
            db,
            election,
            clock: ManualClock::new(),
            faults,
            slots: Vec::new(),
            everyone: Vec::new(),
            owners: HashMap::new(),
            last_ballot: Ballot::ZERO,
            acquisitions: 0,
            incarnation: 0,
        };
        for i in 0..SLOTS {
            let c = h.spawn(i, 1).await;
            h.slots.push(c);
        }
        h
    }

    async fn spawn(&mut self, slot: usize, prio: i32) -> Candidate {
        self.incarnation += 1;
        let id = CandidateId::with_nonce(&format!("slot{slot}"), self.incarnation).unwrap();
        let c = Candidate::with_clock(id, Priority::new(prio), Arc::new(self.clock.clone()));
        in_txn!(self.db, [e = self.election, c], |txn| e
            .register_candidate(&txn, &c)
            .await)
        .unwrap();
        self.everyone.push(c.clone());
        c
    }

    async fn cycle(&mut self, c: &Candidate, opts: RunOptions) -> Result<(), ElectionError> {
        let cycle = self
            .db
            .run_with(opts, |txn, _| {
                let (e, c) = (self.election.clone(), c.clone());
                async move { e.run_election_cycle(&txn, &c).await }
            })
            .await?;
        if cycle.action() == fdb_leader_election::Action::Acquired {
            self.acquisitions += 1;
        }
        c.adopt(cycle);
        Ok(())
    }

    async fn apply(&mut self, op: &Op) {
        match *op {
            Op::Cycle(i) => {
                let c = self.slots[i].clone();
                self.cycle(&c, RunOptions::default()).await.unwrap();
            }
            Op::Advance(ms) => self.clock.advance(Duration::from_millis(ms)),
            Op::Resign(i) => {
                let c = self.slots[i].clone();
                in_txn!(self.db, [e = self.election, c], |txn| e
                    .resign_leadership(&txn, &c, None)
                    .await)
                .unwrap();
            }
            Op::Restart(i) => {
                // The old incarnation is paused forever (kept in `everyone`), a new one joins.
                let prio = self.slots[i].priority().get();
                self.slots[i] = self.spawn(i, prio).await;
            }
            Op::CrashLeader => {
                let rec = self.record().await;
                let slot = self
                    .slots
                    .iter()
                    .position(|c| rec.owner().map(|o| o.id()) == Some(c.id()));
                if let Some(i) = slot {
                    Box::pin(self.apply(&Op::Restart(i))).await;
                }
            }
            Op::SetPriority(i, p) => self.slots[i].set_priority(Priority::new(p)),
            Op::FaultyCycle(i, fault, retry) => {
                let fault = match fault {
                    0 => CommitFault::UnknownApplied,
                    1 => CommitFault::UnknownNotApplied,
                    _ => CommitFault::Conflict,
                };
                self.faults.push_commit_fault(fault);
                let opts = if retry {
                    RunOptions::default()
                } else {
                    RunOptions::default().with_max_attempts(1)
                };
                let c = self.slots[i].clone();
                let result = self.cycle(&c, opts).await;
                self.faults.clear_commit_faults();
                if let Err(e) = result {
                    assert!(e.is_retryable(), "only the injected fault may fail: {e:?}");
                }
            }
        }
    }

    async fn record(&self) -> LeaderRecord {
        in_txn!(self.db, [e = self.election], |txn| e
            .leader_record(&txn)
            .await)
        .unwrap()
    }

    async fn check(&mut self, step: usize) {
        let rec = self.record().await;
        assert!(
            rec.ballot() >= self.last_ballot,
            "step {step}: ballot went back"
        );
        self.last_ballot = rec.ballot();
        if let Some(owner) = rec.owner() {
            let first = self
                .owners
                .entry(rec.ballot())
                .or_insert_with(|| owner.id().clone());
            assert_eq!(
                first,
                owner.id(),
                "step {step}: ballot {} has two owners",
                rec.ballot()
            );
        }
        for c in &self.everyone {
            if let Some(token) = c.fencing_token() {
                assert_eq!(
                    token,
                    rec.ballot(),
                    "step {step}: {} believes in a stale ballot",
                    c.id()
                );
                assert_eq!(
                    rec.owner().map(|o| o.id()),
                    Some(c.id()),
                    "step {step}: {} believes but the record says otherwise",
                    c.id()
                );
            }
        }
    }
}

fn run_ops(config: ElectionConfig, ops: Vec<Op>) -> (u64, Ballot) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut h = Harness::new(config).await;
        for (step, op) in ops.iter().enumerate() {
            h.apply(op).await;
            h.check(step).await;
        }
        (h.acquisitions, h.last_ballot)
    })
}

proptest! {
    // The shrunk failures found so far are replayed first, from the file beside this one
    // (props.proptest-regressions): proptest's default would look for it in a folder beside
    // tests/election/, which holds a main.rs.
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn ballots_are_monotonic_with_one_owner_and_believers_match_the_record(
        ops in proptest::collection::vec(op(), 1..60)
    ) {
        run_ops(ElectionConfig::default(), ops);
    }

    #[test]
    fn the_same_holds_with_zero_grace_and_no_stagger(
        ops in proptest::collection::vec(op(), 1..60)
    ) {
        let cfg = ElectionConfig::builder()
            .handover_grace(Duration::ZERO)
            .takeover_stagger(Duration::ZERO)
            .build()
            .unwrap();
        run_ops(cfg, ops);
    }
}

/// Guards against a vacuous pass: a crash-prone but not pathological history elects and
/// replaces leaders, each crash costing at most a lease plus two heartbeats.
#[test]
fn random_sequences_make_progress() {
    let mut ops = Vec::new();
    for round in 0..12 {
        // About 18.5 s of cycles with faults, then the leader crashes.
        for g in 0..5 {
            ops.push(Op::Advance(3_700));
            for i in 0..SLOTS {
                ops.push(Op::Cycle(i));
            }
            ops.push(Op::FaultyCycle(
                (round + g) % SLOTS,
                u8::try_from((round + g) % 3).unwrap(),
                g % 2 == 0,
            ));
        }
        ops.push(Op::CrashLeader);
    }
    let (acquisitions, ballot) = run_ops(ElectionConfig::default(), ops);
    assert!(acquisitions >= 10, "only {acquisitions} acquisitions");
    assert!(ballot >= Ballot::new(11), "ballot only reached {ballot}");
}
