//! The executor's transactions: each runs through the store's retry loop and ends as an
//! [`Outcome`], which becomes the machine's event.

use std::future::Future;

#[allow(clippy::wildcard_imports)]
use super::*;

impl<D: ElectionDatabase> Executor<D> {
    // ----- transactions ---------------------------------------------------------------------

    pub(super) fn timeout(&self) -> std::time::Duration {
        self.brain.lock().config().transaction_timeout()
    }

    pub(super) fn register(&self) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let (election, init) = (self.election.clone(), self.init_config.clone());
        let me = self.brain.me.clone();
        let timeout = self.timeout();
        async move {
            let Some(me) = me else {
                return Outcome::Event(Event::Tick);
            };
            let result = db
                .transact(timeout, move |txn| {
                    let (election, me, init) = (election.clone(), me.clone(), init.clone());
                    async move {
                        election.initialize_with_config(&txn, &init).await?;
                        election.register_candidate(&txn, &me).await?;
                        election.read_config(&txn).await
                    }
                })
                .await;
            Outcome::Registered(result)
        }
    }

    pub(super) fn cycle(&self) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let (election, brain) = (self.election.clone(), self.brain.clone());
        let timeout = self.timeout();
        async move {
            let Some(me) = brain.me.clone() else {
                return Outcome::Event(Event::Tick);
            };
            let cycling = me.clone();
            let result = db
                .transact(timeout, move |txn| {
                    let (election, me, brain) = (election.clone(), cycling.clone(), brain.clone());
                    async move {
                        let cycle = election.run_election_cycle(&txn, &me).await;
                        // Belief is lost before any vacancy can commit: the machine revokes
                        // the guard now, so leader work stops before a successor is elected.
                        brain.decided(Event::CycleDecided(match &cycle {
                            Ok(c) => Ok((c.action(), c.record().clone())),
                            Err(e) => Err(Failure::of(e)),
                        }));
                        cycle
                    }
                })
                .await;
            match result {
                Ok(cycle) => {
                    let adopted = me.adopt(cycle.clone());
                    Outcome::Cycled(CycleReport::new(&cycle, &adopted), cycle.mark.clone())
                }
                Err(e) => Outcome::CycleFailed(e),
            }
        }
    }

    pub(super) fn read_record(
        &self,
        watch: bool,
        with_config: bool,
    ) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let election = self.election.clone();
        let timeout = self.timeout();
        async move {
            let result = db
                .transact(timeout, move |txn| {
                    let election = election.clone();
                    async move {
                        let (config, record) = tokio::join!(
                            async {
                                match with_config {
                                    true => election.read_config(&txn).await.map(Some),
                                    false => Ok(None),
                                }
                            },
                            election.leader_record(&txn)
                        );
                        let armed = watch.then(|| election.watch_leader(&txn));
                        Ok((config?, record?, armed))
                    }
                })
                .await;
            Outcome::Read(result)
        }
    }

    pub(super) fn resign(
        &self,
        expected: crate::ids::Ballot,
    ) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let (election, brain) = (self.election.clone(), self.brain.clone());
        let timeout = self.timeout();
        async move {
            let Some(me) = brain.me.clone() else {
                return Outcome::Event(Event::Tick);
            };
            let result = db
                .transact(timeout, move |txn| {
                    let (election, me, brain) = (election.clone(), me.clone(), brain.clone());
                    async move {
                        let outcome = election.resign_leadership(&txn, &me, Some(expected)).await;
                        brain.decided(Event::ResignDecided);
                        outcome
                    }
                })
                .await;
            Outcome::Resigned(expected, result)
        }
    }

    pub(super) fn leave(&self) -> impl Future<Output = Outcome> + use<D> {
        let db = self.db.clone();
        let election = self.election.clone();
        let me = self.brain.me.clone();
        let timeout = self.timeout();
        async move {
            let Some(me) = me else {
                return Outcome::Event(Event::Left(Ok(())));
            };
            let result = db
                .transact(timeout, move |txn| {
                    let (election, me) = (election.clone(), me.clone());
                    async move { election.unregister_candidate(&txn, &me).await }
                })
                .await;
            Outcome::Left(result)
        }
    }

    /// Turns a finished operation into the machine's event, keeping what the executor needs
    /// of it (the error for the log, a watch, a resignation's reply, the shutdown report).
    pub(super) fn outcome(&mut self, outcome: Outcome) -> Event {
        match outcome {
            Outcome::Event(event) => event,
            Outcome::Registered(Ok(config)) => {
                if let Some(me) = self.me() {
                    tracing::info!(priority = %me.priority(), "registered as a candidate");
                }
                Event::Registered(Ok(config))
            }
            Outcome::Registered(Err(e)) => Event::Registered(Err(self.failure(&e))),
            Outcome::Cycled(report, mark) => {
                log_action(&report);
                if mark != self.mark {
                    self.mark = mark;
                    self.publish_eligibility();
                }
                Event::CycleCommitted(report)
            }
            Outcome::CycleFailed(e) => Event::CycleFailed(self.failure(&e)),
            Outcome::Read(Ok((config, record, armed))) => {
                let watch = armed.map(|armed| match armed {
                    Ok(w) => {
                        self.watch = Some(w);
                        true
                    }
                    Err(e) => {
                        tracing::info!(error = %error_chain(&e), "leader watch refused; polling every heartbeat");
                        false
                    }
                });
                Event::RecordRead(Ok(RecordRead {
                    record,
                    config,
                    watch,
                }))
            }
            Outcome::Read(Err(e)) => {
                tracing::debug!(error = %error_chain(&e), "could not read the leader record");
                Event::RecordRead(Err(self.failure(&e)))
            }
            Outcome::Resigned(expected, result) => {
                if let Ok(ResignOutcome::Resigned { reserved_for, .. }) = &result {
                    tracing::info!(
                        ballot = expected.get(),
                        reserved_for = reserved_for
                            .as_ref()
                            .map(|r| tracing::field::display(r.id())),
                        "resigned"
                    );
                }
                let event = Event::ResignDone;
                if let Some(reply) = self.resign_replies.pop_front() {
                    let _ = reply.send(result);
                }
                event
            }
            Outcome::Left(result) => {
                let event = Event::Left(result.as_ref().map(|_| ()).map_err(Failure::of));
                match result {
                    Ok(resigned) => {
                        if let Some(ResignOutcome::Resigned {
                            ballot,
                            reserved_for,
                        }) = &resigned
                        {
                            tracing::info!(
                                ballot = ballot.get(),
                                reserved_for = reserved_for
                                    .as_ref()
                                    .map(|r| tracing::field::display(r.id())),
                                "resigned and unregistered in one commit"
                            );
                        }
                        self.report.resigned = resigned;
                        self.report.unregistered = true;
                        self.report.error = None;
                    }
                    Err(e) => {
                        let message = error_chain(&e);
                        tracing::warn!(error = %message, "could not unregister; retrying or leaving the registration to go stale");
                        self.report.error = Some(message);
                    }
                }
                event
            }
        }
    }

    pub(super) fn failure(&mut self, e: &ElectionError) -> Failure {
        self.last_error = Some(error_chain(e));
        Failure::of(e)
    }
}

/// How an operation ended, before it becomes the machine's event.
pub(super) enum Outcome {
    Event(Event),
    Registered(Result<ElectionConfig, ElectionError>),
    /// With the operator's mark the cycle read.
    Cycled(CycleReport, crate::record::Eligibility),
    CycleFailed(ElectionError),
    #[expect(
        clippy::type_complexity,
        reason = "a one-off tuple of what one read returns"
    )]
    Read(
        Result<
            (
                Option<ElectionConfig>,
                crate::record::LeaderRecord,
                Option<Result<Watch, ElectionError>>,
            ),
            ElectionError,
        >,
    ),
    Resigned(crate::ids::Ballot, Result<ResignOutcome, ElectionError>),
    Left(Result<Option<ResignOutcome>, ElectionError>),
}

pub(super) fn log_action(report: &CycleReport) {
    use crate::core::Action;
    let record = &report.record;
    match report.action {
        Action::RequestedHandover => tracing::info!(
            ballot = record.ballot().get(),
            leader = record.owner().map(|o| tracing::field::display(o.id())),
            "asked the lower-priority leader to hand over"
        ),
        Action::HandedOver | Action::Resigned => tracing::info!(
            ballot = record.ballot().get(),
            reserved_for = record
                .reservation()
                .map(|r| tracing::field::display(r.id())),
            "handed over"
        ),
        _ => {}
    }
}
