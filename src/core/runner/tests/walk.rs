//! Random walks through the machine: whatever happens, in any order the executor can deliver
//! it, a machine that has not stopped is never quiet. After every event it has an operation
//! in flight or has asked to be woken; otherwise the tokio runner's command queue runs dry
//! and the runner stops participating without leaving the election.

use proptest::prelude::*;

use super::*;

/// The operation the executor is carrying out for the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    Register,
    Cycle,
    Read,
    Resign,
    Drain,
    Leave,
}

fn started(out: &[Command]) -> Option<Pending> {
    out.iter().find_map(|c| match c {
        Command::Register => Some(Pending::Register),
        Command::RunCycle => Some(Pending::Cycle),
        Command::ReadRecord { .. } => Some(Pending::Read),
        Command::Resign { .. } => Some(Pending::Resign),
        Command::DrainTasks { .. } => Some(Pending::Drain),
        Command::Leave => Some(Pending::Leave),
        _ => None,
    })
}

/// The walk's world: the machine, what the executor is doing, and the candidate's belief.
struct Walk {
    r: Run,
    pending: Option<Pending>,
    stopped: bool,
    ballot: u64,
    trail: Vec<String>,
}

impl Walk {
    fn new(observer: bool, exit_on_loss: bool) -> Self {
        let on_loss = if exit_on_loss {
            OnLoss::Exit
        } else {
            OnLoss::Recampaign
        };
        let me = (!observer).then(|| id("me"));
        Walk {
            r: Run::new(me, on_loss),
            pending: None,
            stopped: false,
            ballot: 0,
            trail: Vec::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.r.now.since_origin().as_millis()).unwrap()
    }

    /// Feeds one event and checks the machine is not quiet.
    fn feed(&mut self, event: Event) {
        if matches!(event, Event::ShutdownRequested) {
            // The executor abandons the operation in flight when it feeds a shutdown.
            self.pending = None;
        }
        self.trail.push(format!("{} ms: {event:?}", self.now_ms()));
        let out = self.r.feed(event);
        self.trail.push(format!("  -> {out:?}"));
        if out.iter().any(|c| matches!(c, Command::Stop { .. })) {
            self.stopped = true;
        }
        if let Some(op) = started(&out) {
            assert!(
                self.pending.is_none(),
                "started {op:?} while {:?} is in flight\n{}",
                self.pending,
                self.trail.join("\n")
            );
            self.pending = Some(op);
        }
        let asleep = sleeps(&out).is_some();
        assert!(
            self.stopped || self.pending.is_some() || asleep,
            "the machine went quiet\n{}",
            self.trail.join("\n")
        );
    }

    /// The executor delivers the result of the operation in flight, as `choice` picks it.
    fn deliver(&mut self, op: Pending, choice: u16) {
        self.pending = None;
        let fail = choice % 4 == 0;
        match op {
            Pending::Register => self.feed(Event::Registered(if fail {
                Err(failure("unavailable"))
            } else {
                Ok(config())
            })),
            Pending::Cycle => self.cycle(choice),
            Pending::Read => {
                let record = if choice % 3 == 0 {
                    owned("other", self.ballot.max(1), u64::from(choice))
                } else {
                    vacant(self.ballot.max(1), u64::from(choice), None)
                };
                let watch = match choice % 5 {
                    0 => None,
                    1 => Some(false),
                    _ => Some(true),
                };
                self.feed(Event::RecordRead(if fail {
                    Err(failure("unavailable"))
                } else {
                    Ok(RecordRead {
                        record,
                        config: (choice % 2 == 0).then(config),
                        watch,
                    })
                }));
            }
            Pending::Resign => {
                self.r.belief = None;
                self.pending = Some(Pending::Resign);
                self.feed(Event::ResignDecided);
                self.pending = None;
                self.feed(Event::ResignDone);
            }
            Pending::Drain => self.feed(Event::Drained(choice % 3 != 0)),
            Pending::Leave => self.feed(Event::Left(if fail {
                Err(failure("unavailable"))
            } else {
                Ok(())
            })),
        }
    }

    /// A cycle's decision (inside the transaction) and its end.
    fn cycle(&mut self, choice: u16) {
        let now = self.now_ms();
        let (action, record, leading) = match choice % 6 {
            // Acquires a new ballot.
            0 | 1 => {
                self.ballot = self.ballot.saturating_add(1);
                (Action::Acquired, owned("me", self.ballot, 1), true)
            }
            // Renews the ballot it believes (or finds another leader).
            2 if self.r.belief.is_some() => (
                Action::Renewed,
                owned("me", self.ballot, u64::from(choice)),
                true,
            ),
            2 | 3 => {
                self.ballot = self.ballot.saturating_add(1);
                (Action::None, owned("other", self.ballot, 1), false)
            }
            // Steps down for someone (a handover).
            4 => (
                Action::HandedOver,
                vacant(self.ballot.max(1), u64::from(choice), Some("other")),
                false,
            ),
            _ => (
                Action::None,
                vacant(self.ballot.max(1), u64::from(choice), None),
                false,
            ),
        };
        if !leading {
            self.r.belief = None;
        }
        self.pending = Some(Pending::Cycle);
        self.feed(Event::CycleDecided(Ok((action, record.clone()))));
        self.pending = None;
        if choice % 5 == 0 {
            let kind = ["conflict", "unknown_result", "timeout", "unavailable"]
                [usize::from(choice / 5 % 4)];
            self.feed(Event::CycleFailed(failure(kind)));
            return;
        }
        if leading {
            self.r.believe(self.ballot, now.saturating_add(294));
        }
        let leading = leading.then_some(self.ballot);
        self.feed(Event::CycleCommitted(report(action, record, leading)));
    }

    /// Something the application, the guarded work, the watch or time does.
    fn external(&mut self, choice: u16) {
        match choice % 9 {
            0 | 1 => self.feed(Event::Tick),
            2 => self.feed(Event::WatchFired(if choice % 2 == 0 {
                Ok(())
            } else {
                Err(failure("too_many_watches"))
            })),
            3 => {
                self.r.busy = false;
                self.feed(Event::WorkIdle);
            }
            4 => self.r.busy = true,
            5 => self.feed(Event::ResignRequested),
            6 => self.r.belief = None,
            7 if choice % 16 == 7 => self.feed(Event::ShutdownRequested),
            _ => self.feed(Event::Tick),
        }
    }

    fn run(&mut self, choices: &[u16]) {
        self.feed(Event::Start);
        for &choice in choices {
            if self.stopped {
                return;
            }
            let advance = u64::from(choice >> 7) % 400;
            let now = self.now_ms().saturating_add(advance);
            self.r.at(now);
            match self.pending {
                Some(op) if choice % 3 != 0 => self.deliver(op, choice >> 2),
                _ => self.external(choice >> 2),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn a_candidate_that_has_not_stopped_is_never_quiet(
        choices in proptest::collection::vec(any::<u16>(), 1..200),
        exit_on_loss in any::<bool>(),
    ) {
        Walk::new(false, exit_on_loss).run(&choices);
    }

    #[test]
    fn an_observer_that_has_not_stopped_is_never_quiet(
        choices in proptest::collection::vec(any::<u16>(), 1..200),
    ) {
        Walk::new(true, false).run(&choices);
    }
}
