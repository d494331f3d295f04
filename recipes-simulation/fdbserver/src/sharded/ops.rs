//! A member's operations: its cycle (every shard's decision in one transaction, fed to the
//! machine before the commit) and its leave.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use fdb_leader_election::runner::machine::Failure;
use fdb_leader_election::shard::machine::{ShardCommand, ShardEvent};
use fdb_leader_election::{ElectionTxn, ShardId, Watch};
use foundationdb_simulation::Severity;

use crate::incarnation::txn::{run, timeout_of};
use crate::log::{self, Entry};

use super::member::{MemberLoop, apply, ctx_of, sample};

impl MemberLoop {
    pub(super) fn cycle(
        &self,
        ready: BTreeSet<ShardId>,
    ) -> impl Future<Output = ShardEvent> + use<> {
        let (db, sim, tester) = (
            Arc::clone(&self.db),
            self.sim.clone(),
            Rc::clone(&self.tester),
        );
        let (election, member) = (self.election.clone(), self.member.clone());
        let (config, layout) = (self.config.clone(), self.layout);
        let brain = Rc::clone(&self.brain);
        let beliefs = Rc::clone(&self.beliefs);
        let busy = Rc::new(Cell::new(None::<ShardId>));
        let timeout = timeout_of(&config);
        async move {
            tester.borrow_mut().stats.cycles += 1;
            let inbox: Rc<RefCell<Option<Watch>>> = Rc::default();
            let slot = Rc::clone(&inbox);
            let result = run(&db, &sim, &tester, timeout, |trx| {
                let (election, member, ready, config) = (
                    election.clone(),
                    member.clone(),
                    ready.clone(),
                    config.clone(),
                );
                let (brain, beliefs, slot, sim, tester, busy) = (
                    Rc::clone(&brain),
                    Rc::clone(&beliefs),
                    Rc::clone(&slot),
                    sim.clone(),
                    Rc::clone(&tester),
                    Rc::clone(&busy),
                );
                async move {
                    election.initialize(&trx, &config, &layout).await?;
                    let cycle = election.member_cycle(&trx, &member, &ready).await?;
                    *slot.borrow_mut() = trx.watch(&election.inbox_key(member.id())).ok();
                    let ctx = ctx_of(&member, busy.get());
                    let commands = brain
                        .borrow_mut()
                        .machine
                        .handle(ShardEvent::CycleDecided, &ctx);
                    sample(&sim, &tester, &member, &beliefs);
                    for command in commands {
                        if matches!(
                            command,
                            ShardCommand::RevokeGuard { .. } | ShardCommand::SetDeadline(_)
                        ) {
                            apply(&brain, &tester, command);
                        }
                    }
                    let acquired: Vec<Entry> = cycle
                        .acquired()
                        .into_iter()
                        .map(|(shard, ballot)| Entry::ShardAcquired {
                            shard: shard.get(),
                            ballot: ballot.get(),
                            member: member.id().to_string(),
                        })
                        .collect();
                    log::append(&trx, &acquired);
                    Ok(cycle)
                }
            })
            .await;
            match result {
                Ok(cycle) => {
                    let hand_over = cycle.hand_over_requested();
                    let more = cycle.more_to_acquire();
                    let config = cycle.config().clone();
                    tester.borrow_mut().stats.acquisitions +=
                        u64::try_from(cycle.acquired().len()).unwrap_or(0);
                    member.adopt(cycle);
                    sample(&sim, &tester, &member, &beliefs);
                    ShardEvent::CycleCommitted {
                        hand_over,
                        more,
                        config,
                    }
                }
                Err(e) => {
                    crate::tester::failed_cycle(&tester, &e);
                    sim.trace(
                        Severity::Info,
                        "LeaderElectionMemberCycleFailed",
                        &[
                            ("Member".into(), member.id().to_string()),
                            ("Error".into(), format!("{e:?}")),
                        ],
                    );
                    ShardEvent::CycleFailed(Failure::of(&e))
                }
            }
        }
    }

    pub(super) fn leave(&self) -> impl Future<Output = ShardEvent> + use<> {
        let (db, sim, tester) = (
            Arc::clone(&self.db),
            self.sim.clone(),
            Rc::clone(&self.tester),
        );
        let (election, member) = (self.election.clone(), self.member.clone());
        let timeout = timeout_of(&self.config);
        async move {
            let left = run(&db, &sim, &tester, timeout, |trx| {
                let (election, member) = (election.clone(), member.clone());
                async move { Ok(election.leave(&trx, &member).await?) }
            })
            .await;
            if left.is_ok() {
                tester.borrow_mut().stats.leaves += 1;
            }
            ShardEvent::Left(left.map_err(|e| Failure::of(&e)))
        }
    }
}
