//! The operations an incarnation runs for its machine (register, cycle, read the record,
//! resign, leave), each a transaction through FoundationDB's retry loop.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use fdb_leader_election::runner::machine::{CycleReport, Event, Failure};
use fdb_leader_election::{Action, Ballot, ResignOutcome, Watch};
use foundationdb_simulation::Severity;

use super::commands::decided;
use super::txn::{record_cycle, resigned, rogue_takeover, run, timeout_of};
use super::{Incarnation, Outcome};
use crate::options::Plant;

impl Incarnation {
    pub(super) fn register(&self) -> impl Future<Output = Outcome> + use<> {
        let (db, election, me, init) = (
            Arc::clone(&self.s.db),
            self.s.election.clone(),
            self.s.candidate.clone(),
            self.s.init_config.clone(),
        );
        let (sim, tester) = (self.s.sim.clone(), Rc::clone(&self.s.tester));
        async move {
            // A registration is an attempt the progress oracle counts, as a cycle is: a cluster
            // that lets none commit is told from a run that tried nothing (single seed 37:
            // every registration of the run timed out, no cycle ever started).
            tester.borrow_mut().stats.cycles += 1;
            let result = run(&db, &sim, &tester, timeout_of(&init), |trx| {
                let (election, me, init) = (election.clone(), me.clone(), init.clone());
                async move {
                    election.initialize_with_config(&trx, &init).await?;
                    election.register_candidate(&trx, &me).await?;
                    Ok(election.read_config(&trx).await?)
                }
            })
            .await;
            if let Err(e) = &result {
                crate::tester::failed_cycle(&tester, e);
            }
            Outcome::Event(Event::Registered(result.map_err(|e| Failure::of(&e))))
        }
    }

    pub(super) fn cycle(&self) -> impl Future<Output = Outcome> + use<> {
        let s = self.s.clone();
        let brain = Rc::clone(&self.brain);
        let timeout = timeout_of(brain.borrow().machine.config());
        async move {
            s.tester.borrow_mut().stats.cycles += 1;
            let result = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
                let (s, brain) = (s.clone(), Rc::clone(&brain));
                async move {
                    let started_at = s.sim.now();
                    let prior = s.election.leader_record(&trx).await?;
                    let cycle = s.election.run_election_cycle(&trx, &s.candidate).await;
                    decided(
                        &s,
                        &brain,
                        Event::CycleDecided(match &cycle {
                            Ok(c) => Ok((c.action(), c.record().clone())),
                            Err(e) => Err(Failure::of(e)),
                        }),
                    );
                    let cycle = cycle?;
                    record_cycle(&s, &trx, &cycle, &prior, started_at).await?;
                    if s.plant == Some(Plant::TakeoverIgnoresRank) {
                        rogue_takeover(&s, &trx, &cycle).await?;
                    }
                    Ok(cycle)
                }
            })
            .await;
            match result {
                Ok(cycle) => {
                    if cycle.action() == Action::Acquired {
                        s.tester.borrow_mut().stats.acquisitions += 1;
                    }
                    let adopted = s.candidate.adopt(cycle.clone());
                    Outcome::Event(Event::CycleCommitted(CycleReport::new(&cycle, &adopted)))
                }
                Err(e) => {
                    crate::tester::failed_cycle(&s.tester, &e);
                    s.sim.trace(
                        Severity::Info,
                        "LeaderElectionCycleFailed",
                        &[
                            ("Candidate".into(), s.candidate.id().to_string()),
                            ("Error".into(), format!("{e:?}")),
                        ],
                    );
                    Outcome::Event(Event::CycleFailed(Failure::of(&e)))
                }
            }
        }
    }

    pub(super) fn read_record(
        &self,
        watch: bool,
        with_config: bool,
    ) -> impl Future<Output = Outcome> + use<> {
        let (db, election) = (Arc::clone(&self.s.db), self.s.election.clone());
        let (sim, tester) = (self.s.sim.clone(), Rc::clone(&self.s.tester));
        let timeout = timeout_of(self.brain.borrow().machine.config());
        async move {
            let armed: Rc<RefCell<Option<Watch>>> = Rc::new(RefCell::new(None));
            let slot = Rc::clone(&armed);
            let result = run(&db, &sim, &tester, timeout, |trx| {
                let (election, slot) = (election.clone(), Rc::clone(&slot));
                async move {
                    let config = if with_config {
                        Some(election.read_config(&trx).await?)
                    } else {
                        None
                    };
                    let record = election.leader_record(&trx).await?;
                    if watch {
                        *slot.borrow_mut() = election.watch_leader(&trx).ok();
                    }
                    Ok((config, record))
                }
            })
            .await;
            let w = armed.borrow_mut().take();
            Outcome::Read(result.map(|(config, record)| (config, record, w)))
        }
    }

    pub(super) fn resign(&self, expected: Ballot) -> impl Future<Output = Outcome> + use<> {
        let s = self.s.clone();
        let brain = Rc::clone(&self.brain);
        let timeout = timeout_of(brain.borrow().machine.config());
        async move {
            let _ = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
                let (s, brain) = (s.clone(), Rc::clone(&brain));
                async move {
                    let outcome = s
                        .election
                        .resign_leadership(&trx, &s.candidate, Some(expected))
                        .await;
                    decided(&s, &brain, Event::ResignDecided);
                    let outcome = outcome?;
                    if let ResignOutcome::Resigned {
                        ballot,
                        reserved_for,
                    } = &outcome
                    {
                        resigned(&s, &trx, *ballot, reserved_for.as_ref(), "resigned").await?;
                    }
                    Ok(outcome)
                }
            })
            .await;
            Outcome::Event(Event::ResignDone)
        }
    }

    pub(super) fn leave(&self) -> impl Future<Output = Outcome> + use<> {
        let s = self.s.clone();
        let timeout = timeout_of(self.brain.borrow().machine.config());
        async move {
            let result = run(&s.db, &s.sim, &s.tester, timeout, |trx| {
                let s = s.clone();
                async move {
                    let outcome = s.election.unregister_candidate(&trx, &s.candidate).await?;
                    if let Some(ResignOutcome::Resigned {
                        ballot,
                        reserved_for,
                    }) = &outcome
                    {
                        resigned(&s, &trx, *ballot, reserved_for.as_ref(), "left").await?;
                    }
                    Ok(())
                }
            })
            .await;
            if result.is_ok() {
                s.tester.borrow_mut().stats.leaves += 1;
            }
            Outcome::Event(Event::Left(result.map_err(|e| Failure::of(&e))))
        }
    }
}
