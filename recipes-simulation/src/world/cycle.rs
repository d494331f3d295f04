//! The election cycle the machine asks for, run the way applications run it, through any of
//! the library's cycle operations (`run_election_cycle`, `try_claim_leadership` with or
//! without `heartbeat_candidate`, `refresh_lease` when leading): sometimes alone,
//! sometimes composed with other operations in the same transaction (queries of the record it
//! just wrote, a second cycle, fenced leader work), as DESIGN §10 says applications do. Every
//! composition is checked: queries never change what the candidate believes or times, and a
//! second cycle in one transaction is refused.

use fdb_leader_election::runner::machine::{Event as In, Failure};
use fdb_leader_election::{
    Ballot, Candidate, ElectionError, ElectionTxn, MemTransaction, ReadMode, TxnError, TxnErrorKind,
};
use rand::Rng;

use super::process::Status;
use super::{Entry, Kind, World};
use crate::events::{Event, OperatorStep};
use crate::history::{CandView, CycleAction, Op, RecordView};
use crate::oracles::{OracleId, TxnRead, Violation};
use crate::plants::Plant;
use crate::wire;

/// What else the cycle's transaction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compose {
    Alone,
    /// `is_leader`, `current_leader` and `leader_record` on the transaction's own write.
    Queries,
    /// A second cycle in the same transaction (must be refused).
    SecondCycle,
    /// Fenced leader work in the cycle's transaction (a leader renewing and working at once).
    FencedWork,
    /// Another process's candidate runs its cycle in the same transaction (an application
    /// hosting two candidates), reading this cycle's uncommitted write; then the application
    /// abandons the transaction. What the guest read must not count as observed: this
    /// process's next real write may repeat the same (ballot, renewal).
    GuestCycle,
}

/// Which of the library's cycle operations the application calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// `run_election_cycle`: heartbeat and cycle.
    Cycle,
    /// `try_claim_leadership`: a cycle without a heartbeat (the registration ages, so
    /// eviction races the claim).
    Claim,
    /// `heartbeat_candidate`, then `try_claim_leadership`, in one transaction.
    HeartbeatThenClaim,
    /// `refresh_lease` (a leader renewing only).
    Refresh,
}

impl World {
    fn draw_how(&mut self, pid: usize, cand: &Candidate) -> How {
        if self.procs.get(pid).is_some_and(|p| p.claims_only) {
            return How::Claim;
        }
        match self.rng.random_range(0..100u32) {
            0..80 => How::Cycle,
            80..88 => How::Claim,
            88..94 => How::HeartbeatThenClaim,
            _ if cand.believes_it_leads() => How::Refresh,
            _ => How::Cycle,
        }
    }

    /// A live, registered follower other than `pid` whose candidate joins the transaction. Not
    /// a leader: a runner's guard learns of a change of its candidate's belief from the
    /// runner's own cycles, so a leader's candidate is never driven outside its runner (the
    /// `RunnerBuilder::candidate` docs say so).
    fn draw_guest(&mut self, pid: usize) -> Option<Candidate> {
        let live: Vec<Candidate> = self
            .procs
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                *i != pid
                    && p.status == Status::Running
                    && p.guard.is_none()
                    && !p.candidate.believes_it_leads()
            })
            .map(|(_, p)| p.candidate.clone())
            .collect();
        if live.is_empty() {
            return None;
        }
        let i = self.rng.random_range(0..live.len());
        live.into_iter().nth(i)
    }

    fn draw_compose(&mut self) -> Compose {
        match self.rng.random_range(0..100u32) {
            0..70 => Compose::Alone,
            70..85 => Compose::Queries,
            85..90 => Compose::SecondCycle,
            90..97 => Compose::FencedWork,
            _ => Compose::GuestCycle,
        }
    }

    /// One attempt of a cycle for `pid`, in `txn`: the cycle, its composition, and the
    /// machine told what it decided before the commit.
    pub(super) fn cycle_body(
        &mut self,
        pid: usize,
        txn: &MemTransaction,
        cand: &Candidate,
    ) -> Result<(Kind, Entry, Option<Box<TxnRead>>), ElectionError> {
        let compose = self.draw_compose();
        if compose != Compose::Alone {
            self.stats.composed_cycles = self.stats.composed_cycles.saturating_add(1);
        }
        let election = self.election.clone();
        let before = cand.leadership();
        let plant = self.plant;
        let how = self.draw_how(pid, cand);
        match how {
            How::Claim | How::HeartbeatThenClaim => {
                self.stats.claims = self.stats.claims.saturating_add(1);
            }
            How::Refresh => self.stats.refreshes = self.stats.refreshes.saturating_add(1),
            How::Cycle => {}
        }
        if how == How::Claim && self.rng.random_ratio(1, 3) {
            // Eviction racing the claim: its transaction starts now, before the claim commits.
            self.queue
                .push(self.now, Event::Operator(OperatorStep::EvictRacing));
        }
        let res = self.rt.block_on(async {
            let prior = election.leader_record(txn).await?;
            let cycle = match how {
                How::Cycle => election.run_election_cycle(txn, cand).await,
                How::Claim => election.try_claim_leadership(txn, cand).await,
                How::HeartbeatThenClaim => {
                    election.heartbeat_candidate(txn, cand).await?;
                    election.try_claim_leadership(txn, cand).await
                }
                How::Refresh => election.refresh_lease(txn, cand).await,
            };
            Ok::<_, ElectionError>((prior, cycle))
        });
        let (prior, cycle) = match res {
            Ok(pair) => pair,
            Err(e) => {
                self.feed(pid, In::CycleDecided(Err(Failure::of(&e))));
                return Err(e);
            }
        };
        let cycle = match cycle {
            Ok(c) => c,
            Err(e) => {
                self.feed(pid, In::CycleDecided(Err(Failure::of(&e))));
                return Err(e);
            }
        };
        self.note_uncapped(pid, before.as_ref(), cand);
        // Inside the transaction, before its commit: the machine revokes the guard if the
        // belief is gone.
        self.feed(
            pid,
            In::CycleDecided(Ok((cycle.action(), cycle.record().clone()))),
        );
        if plant == Some(Plant::RywAdoption) && compose == Compose::Queries {
            // The planted defect: the record read back in the cycle's own transaction shows
            // this candidate's attempt, and the candidate adopts it before the commit.
            let _ = cand.adopt(cycle.clone());
        }
        let label = self.label(pid);
        let believed = cand.leadership();
        // Leader work composed into the cycle's transaction runs under the guard, like any.
        // One writer of the counter at a time per process: not while a task is in flight.
        let idle = self.procs.get(pid).is_some_and(|p| p.task_ballot.is_none())
            && !self.composed_work_pending(pid);
        let work_token = (compose == Compose::FencedWork && idle)
            .then(|| self.guard_token(pid))
            .flatten()
            .map(Ballot::new);
        let guest = if compose == Compose::GuestCycle {
            self.draw_guest(pid)
        } else {
            None
        };
        let extra = self.rt.block_on(async {
            let written = election.leader_record(txn).await?;
            let me = election.get_candidate(txn, cand.id()).await?;
            let mut refused_second = None;
            let mut fenced = None;
            match compose {
                Compose::Alone => {}
                Compose::Queries => {
                    let _ = election.is_leader(txn, cand).await?;
                    let _ = election.current_leader(txn, cand).await?;
                }
                Compose::SecondCycle => {
                    refused_second = Some(matches!(
                        election.run_election_cycle(txn, cand).await,
                        Err(ElectionError::CycleInProgress { .. })
                    ));
                }
                Compose::GuestCycle => {
                    if let Some(guest) = &guest {
                        // Refused if the guest's own cycle is open; dropped either way.
                        drop(election.run_election_cycle(txn, guest).await);
                    }
                }
                Compose::FencedWork => {
                    if let Some(token) = work_token {
                        if election.fence(txn, token).await.is_ok() {
                            // A serializable read: this leader's own concurrent work task
                            // makes one of the two retry rather than lose an update.
                            let counter =
                                txn.get(wire::COUNTER_KEY, ReadMode::Serializable).await?;
                            let next = wire::decode_u64(counter.as_deref())
                                .unwrap_or(0)
                                .saturating_add(1);
                            fenced = Some((token, next));
                        }
                    }
                }
            }
            Ok::<_, ElectionError>((written, me, refused_second, fenced))
        });
        let (written, me, refused_second, fenced) = extra?;
        if compose == Compose::GuestCycle {
            // The application gives up on the transaction: nothing commits, nothing is adopted.
            self.stats.abandoned_compositions = self.stats.abandoned_compositions.saturating_add(1);
            // The guest's cycle read this candidate's heartbeat, uncommitted: for the version
            // oracle, a sign of life seen from now on.
            if let Some(me) = &me {
                self.successor
                    .note_uncommitted(&cand.id().to_string(), me.heartbeat(), self.now);
            }
            return Err(ElectionError::Database(TxnError::with_source(
                TxnErrorKind::OtherRetryable,
                "the application abandoned its composed transaction",
            )));
        }
        if plant != Some(Plant::RywAdoption) && cand.leadership() != believed {
            self.found.push(Violation::new(
                OracleId::Progress,
                format!("{label}: a query inside its cycle's transaction changed what it believes"),
            ));
        }
        if refused_second == Some(false) {
            self.found.push(Violation::new(
                OracleId::Progress,
                format!("{label}: a second cycle in one transaction was not refused"),
            ));
        }
        let action = CycleAction::of(cycle.action());
        // What it read, for the eligibility and version oracles: a request its eligibility;
        // an acquisition (who ranked ahead of it) and a vacancy written over its leadership
        // the registry too.
        let read = match action {
            CycleAction::RequestedHandover => self.txn_read(pid, txn, false, before.is_some()),
            CycleAction::Acquired
            | CycleAction::HandedOver
            | CycleAction::SteppedDown
            | CycleAction::SteppedDownIneligible
            | CycleAction::Resigned => self.txn_read(pid, txn, true, before.is_some()),
            CycleAction::None | CycleAction::Renewed => None,
        };
        let written = self
            .planted_reservation(pid, txn, Op::Cycle(action), read.as_deref(), &written)
            .unwrap_or(written);
        let mut entry = self.entry_for(pid, Op::Cycle(action));
        if action != CycleAction::None {
            entry.prior = Some(RecordView::of(&prior));
            entry.leader = Some(RecordView::of(&written));
        }
        if let Some(me) = me {
            entry
                .candidates_set
                .push((cand.id().to_string(), CandView::of(&me)));
        }
        if let Some((token, next)) = fenced {
            let seq = self.next_work_seq(pid);
            txn.set(wire::REGISTER_KEY, &wire::encode_register(token.get(), seq));
            txn.set(wire::COUNTER_KEY, &wire::encode_u64(next));
            entry.register = Some((token.get(), seq));
            entry.counter = Some(next);
            self.check_guarded_step(pid, token.get(), "fenced work in its cycle");
        }
        Ok((Kind::Cycle(Box::new(cycle)), entry, read))
    }
}
