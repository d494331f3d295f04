//! Table tests of the runner machine: one test per transition, no I/O.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

use std::time::Duration;

use super::*;
use crate::core::tests::{failure, timed};
use crate::error::ElectionError;
use crate::ids::Priority;
use crate::record::Named;

const HB_MS: u64 = 100;
const LEASE_MS: u64 = 300;
const HB: Duration = Duration::from_millis(HB_MS);
const LEASE: Duration = Duration::from_millis(LEASE_MS);

fn id(s: &str) -> CandidateId {
    CandidateId::parse(s).unwrap()
}

fn at(ms: u64) -> LocalInstant {
    LocalInstant::from_origin(Duration::from_millis(ms))
}

fn config() -> ElectionConfig {
    timed(ElectionConfig::builder(), LEASE_MS, HB_MS, 600, 30)
        .handover_grace(Duration::from_secs(1))
        .build()
        .unwrap()
}

fn owned(owner: &str, ballot: u64, renewal: u64) -> LeaderRecord {
    LeaderRecord {
        ballot: Ballot::new(ballot),
        owner: Some(Named::new(id(owner), Priority::new(1))),
        renewal,
        lease: LEASE,
        handover: None,
        reservation: None,
        payload: None,
        writer: Some(crate::record::AttemptId {
            candidate: id(owner),
            seq: 1,
        }),
        handover_to: None,
        leader_version: None,
    }
}

fn vacant(ballot: u64, renewal: u64, reserved: Option<&str>) -> LeaderRecord {
    LeaderRecord {
        owner: None,
        reservation: reserved.map(|r| Party::Candidate(Named::new(id(r), Priority::new(2)))),
        ..owned("someone", ballot, renewal)
    }
}

/// A machine and the belief the executor would report.
struct Run {
    m: Machine,
    now: LocalInstant,
    belief: Option<Belief>,
    busy: bool,
}

impl Run {
    fn candidate() -> Self {
        Self::new(Some(id("me")), OnLoss::Recampaign)
    }

    fn new(me: Option<CandidateId>, on_loss: OnLoss) -> Self {
        Run {
            m: Machine::new(Settings::new(me, config(), 7).on_loss(on_loss), at(0)),
            now: at(0),
            belief: None,
            busy: false,
        }
    }

    fn feed(&mut self, event: Event) -> Vec<Command> {
        let ctx = Ctx {
            now: self.now,
            belief: self.belief,
            work_in_flight: self.busy,
        };
        self.m.handle(event, ctx)
    }

    fn at(&mut self, ms: u64) -> &mut Self {
        self.now = at(ms);
        self
    }

    fn believe(&mut self, ballot: u64, until_ms: u64) {
        self.belief = Some(Belief {
            ballot: Ballot::new(ballot),
            valid_until: at(until_ms),
        });
    }

    /// A cycle is in flight, started now.
    fn cycling(&mut self) -> &mut Self {
        self.m.in_flight = Some(InFlight::Cycle {
            started: self.now,
            leading: self.m.live_guard().is_some(),
        });
        self
    }

    /// The watch is armed (and nothing is in flight).
    fn watching(&mut self, record: LeaderRecord) -> Vec<Command> {
        self.feed(Event::RecordRead(Ok(RecordRead {
            record,
            config: None,
            watch: Some(true),
        })))
    }

    /// Started, registered, and its first cycle in flight.
    fn registered() -> Self {
        Self::registered_with(OnLoss::Recampaign)
    }

    fn registered_with(on_loss: OnLoss) -> Self {
        let mut r = Self::new(Some(id("me")), on_loss);
        assert_eq!(r.feed(Event::Start), vec![Command::Register]);
        let out = r.feed(Event::Registered(Ok(config())));
        assert!(out.contains(&Command::RunCycle), "{out:?}");
        r
    }

    /// A leader of ballot 1 (its first cycle acquired at 0, belief until 294 ms).
    fn leader() -> Self {
        Self::leader_with(OnLoss::Recampaign)
    }

    fn leader_with(on_loss: OnLoss) -> Self {
        let mut r = Self::registered_with(on_loss);
        r.believe(1, 294);
        let out = r.feed(Event::CycleCommitted(report(
            Action::Acquired,
            owned("me", 1, 1),
            Some(1),
        )));
        assert!(
            out.contains(&Command::IssueGuard {
                ballot: Ballot::new(1),
                deadline: at(294)
            }),
            "{out:?}"
        );
        // Then it arms its watch; idle from there.
        r.watching(owned("me", 1, 1));
        r
    }
}

fn report(action: Action, record: LeaderRecord, leading: Option<u64>) -> CycleReport {
    CycleReport {
        action,
        record,
        config: config(),
        next_action_at: None,
        leading: leading.map(Ballot::new),
        honoured: None,
        ineligible: None,
    }
}

fn sleeps(out: &[Command]) -> Option<LocalInstant> {
    out.iter().find_map(|c| match c {
        Command::SleepUntil(t) => Some(*t),
        _ => None,
    })
}

fn has(out: &[Command], f: impl Fn(&Command) -> bool) -> bool {
    out.iter().any(f)
}

#[test]
fn a_candidate_registers_first_then_cycles_at_once() {
    let mut r = Run::candidate();
    assert_eq!(r.feed(Event::Start), vec![Command::Register]);
    let out = r.feed(Event::Registered(Ok(config())));
    assert!(has(&out, |c| matches!(
        c,
        Command::State(RunnerState::Follower)
    )));
    assert_eq!(out.last(), Some(&Command::RunCycle));
}

#[test]
fn a_failed_registration_backs_off_and_is_retried() {
    let mut r = Run::candidate();
    r.feed(Event::Start);
    let out = r.feed(Event::Registered(Err(failure("unavailable"))));
    assert!(has(&out, |c| matches!(
        c,
        Command::Failed {
            kind: "unavailable",
            warn: Some(0),
            ..
        }
    )));
    assert!(has(&out, |c| matches!(
        c,
        Command::State(RunnerState::Error)
    )));
    let wake = sleeps(&out).unwrap();
    assert!(wake > at(0) && wake <= at(50), "{wake:?}");
    // Nothing happens before the back-off ends; then it registers again.
    assert_eq!(r.at(1).feed(Event::Tick), vec![Command::SleepUntil(wake)]);
    let ms = u64::try_from(wake.since_origin().as_millis()).unwrap() + 1;
    assert_eq!(r.at(ms).feed(Event::Tick), vec![Command::Register]);
}

#[test]
fn a_committed_acquisition_issues_a_guard_with_the_beliefs_deadline_and_publishes() {
    let mut r = Run::registered();
    r.believe(1, 294);
    let out = r.feed(Event::CycleCommitted(report(
        Action::Acquired,
        owned("me", 1, 1),
        Some(1),
    )));
    assert!(has(
        &out,
        |c| matches!(c, Command::IssueGuard { ballot, deadline } if *ballot == Ballot::new(1) && *deadline == at(294))
    ));
    assert!(has(&out, |c| matches!(
        c,
        Command::Renewed { took: Some(_), .. }
    )));
    assert!(has(
        &out,
        |c| matches!(c, Command::Publish(ch) if ch.reason == ChangeReason::Acquired)
    ));
    assert!(has(&out, |c| matches!(
        c,
        Command::State(RunnerState::Leader)
    )));
    // The change is published before the guard is issued: whoever the guard wakes
    // (`Runner::elected`) finds `Runner::leader` naming it already.
    let position = |f: fn(&Command) -> bool| out.iter().position(f).unwrap();
    assert!(
        position(|c| matches!(c, Command::Publish(_)))
            < position(|c| matches!(c, Command::IssueGuard { .. })),
        "{out:?}"
    );
    // Then a watch is armed (a read-only transaction).
    assert_eq!(
        out.last(),
        Some(&Command::ReadRecord {
            watch: true,
            config: false
        })
    );
}

#[test]
fn a_commit_that_did_not_make_the_candidate_believe_issues_no_guard() {
    let mut r = Run::registered();
    let out = r.feed(Event::CycleCommitted(report(
        Action::Acquired,
        owned("me", 1, 1),
        Some(1),
    )));
    assert!(
        !has(&out, |c| matches!(c, Command::IssueGuard { .. })),
        "{out:?}"
    );
}

#[test]
fn a_leader_renews_before_its_deadline_leaving_room_for_one_attempt() {
    let mut r = Run::leader();
    r.feed(Event::RecordRead(Ok(RecordRead {
        record: owned("me", 1, 1),
        config: None,
        watch: Some(true),
    })));
    let out = r.at(10).feed(Event::Tick);
    // 294 - (30 ms attempt + 25 ms slack) = 239 ms, or the jittered heartbeat (80-100 ms).
    let wake = sleeps(&out).unwrap();
    assert!(wake >= at(80) && wake <= at(100), "{wake:?}");
    // With the heartbeat pushed out, the renewal margin decides.
    r.m.next_cycle_at = at(1_000);
    assert_eq!(sleeps(&r.feed(Event::Tick)), Some(at(239)));
    assert_eq!(r.at(239).feed(Event::Tick), vec![Command::RunCycle]);
}

#[test]
fn a_renewal_moves_the_guard_deadline_to_the_new_belief() {
    let mut r = Run::leader();
    r.at(100).believe(1, 394);
    let out = r.cycling().feed(Event::CycleCommitted(report(
        Action::Renewed,
        owned("me", 1, 2),
        Some(1),
    )));
    assert!(has(&out, |c| *c == Command::SetGuardDeadline(at(394))));
    assert!(!has(&out, |c| matches!(c, Command::IssueGuard { .. })));
}

#[test]
fn a_shorter_belief_shortens_the_guard_even_when_the_commit_failed() {
    let mut r = Run::leader();
    // The cycle wrote a shorter lease and its result is unknown: the belief was capped.
    r.at(100).believe(1, 150);
    let out = r
        .cycling()
        .feed(Event::CycleFailed(failure("unknown_result")));
    assert!(
        has(&out, |c| *c == Command::SetGuardDeadline(at(150))),
        "{out:?}"
    );
    // At the capped deadline the guard ends.
    let out = r.at(150).feed(Event::Tick);
    assert!(has(&out, |c| *c
        == Command::RevokeGuard(StopReason::LeaseExpired)));
    assert!(has(&out, |c| matches!(c, Command::EndLeadership { .. })));
}

#[test]
fn a_shorter_lease_written_inside_the_transaction_moves_the_guard_deadline_before_the_commit() {
    let mut r = Run::leader();
    // The cycle writes a shorter lease: the belief was capped, inside the transaction.
    r.at(100).cycling().believe(1, 150);
    let out = r.feed(Event::CycleDecided(Ok((
        Action::Renewed,
        owned("me", 1, 2),
    ))));
    assert_eq!(out, vec![Command::SetGuardDeadline(at(150))]);
    // A belief that did not shrink moves nothing inside the transaction (nothing is
    // confirmed yet), not even forward.
    r.believe(1, 400);
    assert_eq!(
        r.feed(Event::CycleDecided(Ok((
            Action::Renewed,
            owned("me", 1, 2)
        )))),
        vec![]
    );
}

#[test]
fn stepping_down_revokes_the_guard_inside_the_transaction_before_its_commit() {
    let mut r = Run::leader();
    r.at(100).cycling();
    r.belief = None; // the cycle decided to hand over: belief lost at once
    let mut vac = vacant(1, 2, Some("new"));
    vac.writer = owned("me", 1, 1).writer;
    let out = r.feed(Event::CycleDecided(Ok((Action::HandedOver, vac.clone()))));
    assert_eq!(
        out,
        vec![Command::RevokeGuard(StopReason::HandedOver {
            to: Some(id("new"))
        })],
        "only the revoke: the rest waits for the commit"
    );
    let out = r.feed(Event::CycleCommitted(report(Action::HandedOver, vac, None)));
    assert!(has(&out, |c| matches!(
        c,
        Command::EndLeadership {
            reason: StopReason::HandedOver { .. },
            ..
        }
    )));
    assert!(has(
        &out,
        |c| matches!(c, Command::Publish(ch) if matches!(ch.reason, ChangeReason::SteppedDown { .. }))
    ));
    // Its guarded tasks are drained before anything else.
    assert!(has(&out, |c| matches!(c, Command::DrainTasks { .. })));
}

#[test]
fn a_cycle_that_keeps_the_belief_revokes_nothing_before_its_commit() {
    let mut r = Run::leader();
    let out = r.at(100).cycling().feed(Event::CycleDecided(Ok((
        Action::Renewed,
        owned("me", 1, 2),
    ))));
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn stop_reasons_follow_what_the_cycle_saw() {
    let cases = [
        (
            Ok((Action::SteppedDown, vacant(1, 2, None))),
            StopReason::ElectionsDisabled,
        ),
        (
            Ok((Action::None, owned("thief", 2, 3))),
            StopReason::Superseded,
        ),
        (
            Ok((Action::None, owned("me", 1, 1))),
            StopReason::LeaseExpired,
        ),
        (
            Err(Failure {
                not_registered: true,
                ..failure("not_registered")
            }),
            StopReason::Unregistered,
        ),
        (Err(failure("unavailable")), StopReason::LeaseExpired),
    ];
    for (decided, reason) in cases {
        let mut r = Run::leader();
        r.belief = None;
        assert_eq!(
            r.at(50).cycling().feed(Event::CycleDecided(decided)),
            vec![Command::RevokeGuard(reason)]
        );
    }
}

#[test]
fn a_renewal_that_lands_after_the_leadership_ended_is_not_resumed() {
    let mut r = Run::leader();
    r.belief = None;
    let out = r.at(300).feed(Event::Tick);
    assert!(has(&out, |c| *c
        == Command::RevokeGuard(StopReason::LeaseExpired)));
    r.feed(Event::Drained(true));
    r.believe(1, 500);
    let out = r.cycling().feed(Event::CycleCommitted(report(
        Action::Renewed,
        owned("me", 1, 2),
        Some(1),
    )));
    assert!(has(&out, |c| *c
        == Command::LateRenewal {
            ballot: Ballot::new(1)
        }));
    assert!(!has(&out, |c| matches!(c, Command::IssueGuard { .. })));
}

#[test]
fn an_honoured_request_closes_the_guard_and_idle_work_triggers_the_handover() {
    let mut r = Run::leader();
    let mut rec = owned("me", 1, 2);
    let req = Named::new(id("new"), Priority::new(5));
    rec.handover = Some(Party::Candidate(req.clone()));
    r.at(100).believe(1, 394);
    r.busy = true;
    let mut rep = report(Action::Renewed, rec, Some(1));
    rep.honoured = Some(Party::Candidate(req.clone()));
    rep.next_action_at = Some(at(1_100));
    r.watching(owned("me", 1, 1));
    let out = r.cycling().feed(Event::CycleCommitted(rep.clone()));
    assert!(has(&out, |c| *c == Command::CloseGuard));
    assert!(has(&out, |c| *c == Command::HandoverRequested(req.clone())));
    // Told once only.
    r.at(150);
    let again = r.cycling().feed(Event::CycleCommitted(rep));
    assert!(!has(&again, |c| matches!(c, Command::HandoverRequested(_))));
    // Work goes idle: cycle now.
    r.busy = false;
    assert!(has(&r.at(160).feed(Event::WorkIdle), |c| *c
        == Command::RunCycle));
}

#[test]
fn a_request_withdrawn_while_the_leader_drained_makes_it_step_down_anyway() {
    let mut r = Run::leader();
    let mut rec = owned("me", 1, 2);
    let req = Named::new(id("new"), Priority::new(5));
    rec.handover = Some(Party::Candidate(req.clone()));
    r.at(100).believe(1, 394);
    r.busy = true;
    let mut rep = report(Action::Renewed, rec, Some(1));
    rep.honoured = Some(Party::Candidate(req));
    r.watching(owned("me", 1, 1));
    let out = r.cycling().feed(Event::CycleCommitted(rep));
    assert!(has(&out, |c| *c == Command::CloseGuard));
    // The work drains; the cycle that would hand over finds the requester gone (unregistered
    // or evicted): the core renews, honouring nothing.
    r.busy = false;
    assert!(has(&r.at(160).feed(Event::WorkIdle), |c| *c
        == Command::RunCycle));
    r.at(160).believe(1, 454);
    let out = r.cycling().feed(Event::CycleCommitted(report(
        Action::Renewed,
        owned("me", 1, 3),
        Some(1),
    )));
    // The leader does not keep its closed guard: it resigns (reserving for the best live
    // candidate) at once, its work being idle.
    assert!(has(&out, |c| *c == Command::SteppingDownAnyway), "{out:?}");
    assert!(
        has(&out, |c| *c
            == Command::Resign {
                expected: Ballot::new(1)
            }),
        "{out:?}"
    );
    // The application never asked: the guard ends as a step-down, not a resignation (which
    // `is_requested` would excuse from `OnLoss::Exit`).
    r.belief = None;
    assert_eq!(
        r.feed(Event::ResignDecided),
        vec![Command::RevokeGuard(StopReason::SteppedDown)]
    );
}

#[test]
fn a_failed_resignation_leaves_no_closed_guard_it_is_retried() {
    let mut r = Run::leader();
    let out = r.at(10).feed(Event::ResignRequested);
    assert!(has(&out, |c| *c == Command::CloseGuard));
    assert!(has(&out, |c| matches!(c, Command::Resign { .. })));
    // The resignation's transaction failed: the belief is intact, the guard still closed.
    r.at(20).believe(1, 294);
    let out = r.feed(Event::ResignDone);
    assert!(has(&out, |c| *c == Command::RunCycle), "{out:?}");
    r.at(20).believe(1, 314);
    let out = r.cycling().feed(Event::CycleCommitted(report(
        Action::Renewed,
        owned("me", 1, 2),
        Some(1),
    )));
    assert!(has(&out, |c| *c == Command::SteppingDownAnyway), "{out:?}");
    assert!(
        has(&out, |c| matches!(c, Command::Resign { .. })),
        "{out:?}"
    );
    // The application asked for this resignation: it stays one.
    r.belief = None;
    assert_eq!(
        r.feed(Event::ResignDecided),
        vec![Command::RevokeGuard(StopReason::Resigned)]
    );
}

#[test]
fn a_draining_leader_whose_request_stands_does_not_step_down_on_its_own() {
    let mut r = Run::leader();
    let mut rec = owned("me", 1, 2);
    let req = Named::new(id("new"), Priority::new(5));
    rec.handover = Some(Party::Candidate(req.clone()));
    r.at(100).believe(1, 394);
    r.busy = true;
    let mut rep = report(Action::Renewed, rec, Some(1));
    rep.honoured = Some(Party::Candidate(req));
    r.watching(owned("me", 1, 1));
    r.cycling().feed(Event::CycleCommitted(rep.clone()));
    // Still draining: the next renewal honours the same request; nothing else happens.
    let out = r.at(150).cycling().feed(Event::CycleCommitted(rep));
    assert!(!has(&out, |c| *c == Command::SteppingDownAnyway), "{out:?}");
    assert!(
        !has(&out, |c| matches!(c, Command::Resign { .. })),
        "{out:?}"
    );
}

#[test]
fn an_operator_request_is_reported_as_such() {
    let mut r = Run::leader();
    let mut rep = report(Action::HandedOver, vacant(1, 2, Some("best")), None);
    rep.honoured = Some(Party::Operator(id("ops")));
    r.watching(owned("me", 1, 1));
    r.belief = None;
    r.at(100).cycling().feed(Event::CycleDecided(Ok((
        Action::HandedOver,
        rep.record.clone(),
    ))));
    let out = r.feed(Event::CycleCommitted(rep));
    let told = out
        .iter()
        .position(|c| *c == Command::OperatorRequest(id("ops")))
        .unwrap();
    let ended = out
        .iter()
        .position(|c| matches!(c, Command::EndLeadership { .. }))
        .unwrap();
    assert!(told < ended, "the leader is told before it stops: {out:?}");
}

#[test]
fn resigning_without_leading_is_rejected_naming_the_leader() {
    let mut r = Run::registered();
    r.feed(Event::CycleCommitted(report(
        Action::None,
        owned("other", 3, 9),
        None,
    )));
    let out = r.at(10).feed(Event::ResignRequested);
    assert!(has(&out, |c| *c
        == Command::RejectResign {
            current: Some(id("other"))
        }));
}

#[test]
fn a_resignation_waits_for_busy_work_within_the_grace() {
    let mut r = Run::leader();
    r.busy = true;
    let out = r.at(10).feed(Event::ResignRequested);
    assert!(has(&out, |c| *c == Command::CloseGuard));
    assert!(!has(&out, |c| matches!(c, Command::Resign { .. })));
    // Idle: resign now.
    r.busy = false;
    let out = r.at(20).feed(Event::WorkIdle);
    assert!(
        has(&out, |c| *c
            == Command::Resign {
                expected: Ballot::new(1)
            }),
        "{out:?}"
    );
    // Inside the resignation's transaction, the belief is gone: revoke before the commit.
    r.belief = None;
    assert_eq!(
        r.feed(Event::ResignDecided),
        vec![Command::RevokeGuard(StopReason::Resigned)]
    );
    let out = r.feed(Event::ResignDone);
    assert!(has(&out, |c| matches!(
        c,
        Command::EndLeadership {
            reason: StopReason::Resigned,
            ..
        }
    )));
}

#[test]
fn a_resignation_goes_ahead_when_the_grace_ends_even_while_busy() {
    let mut r = Run::leader();
    r.believe(1, 5_000);
    r.busy = true;
    let out = r.at(10).feed(Event::ResignRequested);
    assert_eq!(sleeps(&out).map(|t| t <= at(1_010)), Some(true));
    assert!(has(&r.at(1_010).feed(Event::Tick), |c| matches!(
        c,
        Command::Resign { .. }
    )));
}

#[test]
fn shutdown_ends_the_leadership_drains_then_resigns_and_unregisters_with_retries() {
    let mut r = Run::leader();
    let out = r.at(10).feed(Event::ShutdownRequested);
    let want = [
        Command::RevokeGuard(StopReason::Shutdown),
        Command::DisarmWatch,
        Command::DrainTasks { bound: HB },
    ];
    for w in &want {
        assert!(out.contains(w), "{w:?} in {out:?}");
    }
    assert_eq!(r.feed(Event::Drained(false)), vec![Command::Leave]);
    let out = r.at(20).feed(Event::Left(Err(failure("unavailable"))));
    let wake = sleeps(&out).unwrap();
    assert!(!has(&out, |c| matches!(c, Command::Leave)));
    let ms = u64::try_from(wake.since_origin().as_millis()).unwrap() + 1;
    assert_eq!(r.at(ms).feed(Event::Tick), vec![Command::Leave]);
    let out = r.feed(Event::Left(Ok(())));
    assert!(has(&out, |c| *c == Command::StepDownLocally));
    assert!(has(&out, |c| *c
        == Command::Stop {
            tasks_finished: false
        }));
    assert!(has(&out, |c| *c == Command::State(RunnerState::Stopped)));
    assert!(
        r.feed(Event::Tick).is_empty(),
        "a stopped machine does nothing"
    );
}

#[test]
fn leaving_gives_up_after_three_attempts() {
    let mut r = Run::registered();
    r.feed(Event::ShutdownRequested);
    r.feed(Event::Drained(true));
    for attempt in 1..=3u64 {
        let out = r
            .at(attempt * 1_000)
            .feed(Event::Left(Err(failure("unavailable"))));
        if attempt < 3 {
            assert!(sleeps(&out).is_some());
            assert_eq!(
                r.at(attempt * 1_000 + 500).feed(Event::Tick),
                vec![Command::Leave]
            );
        } else {
            assert!(has(&out, |c| matches!(c, Command::Stop { .. })));
        }
    }
}

#[test]
fn exit_on_loss_leaves_after_a_lost_leadership_but_not_after_a_resignation() {
    let mut r = Run::leader_with(OnLoss::Exit);
    r.belief = None;
    let out = r.at(300).feed(Event::Tick);
    assert!(has(&out, |c| matches!(
        c,
        Command::EndLeadership {
            reason: StopReason::LeaseExpired,
            ..
        }
    )));
    let out = r.feed(Event::Drained(true));
    assert!(
        has(&out, |c| matches!(c, Command::DrainTasks { .. })
            || matches!(c, Command::Leave)),
        "{out:?}"
    );
}

#[test]
fn a_relevant_change_seen_through_the_watch_runs_a_cycle_at_once_and_a_renewal_does_not() {
    let mut r = Run::registered();
    r.feed(Event::CycleCommitted(report(
        Action::None,
        owned("other", 3, 9),
        None,
    )));
    // A plain renewal: nothing to do before the next heartbeat.
    let out = r.at(5).feed(Event::RecordRead(Ok(RecordRead {
        record: owned("other", 3, 10),
        config: None,
        watch: Some(true),
    })));
    assert!(sleeps(&out).is_some() && !has(&out, |c| *c == Command::RunCycle));
    // A vacancy: cycle now.
    let out = r.at(6).feed(Event::WatchFired(Ok(())));
    assert!(has(&out, |c| matches!(
        c,
        Command::ReadRecord { watch: true, .. }
    )));
    let out = r.feed(Event::RecordRead(Ok(RecordRead {
        record: vacant(3, 11, None),
        config: None,
        watch: Some(true),
    })));
    assert_eq!(out.last(), Some(&Command::RunCycle));
}

#[test]
fn a_refused_or_failed_watch_is_retried_only_after_ten_heartbeats() {
    for refused in [true, false] {
        let mut r = Run::registered();
        r.feed(Event::CycleCommitted(report(
            Action::None,
            owned("other", 3, 9),
            None,
        )));
        if refused {
            r.at(5).feed(Event::RecordRead(Ok(RecordRead {
                record: owned("other", 3, 9),
                config: None,
                watch: Some(false),
            })));
        } else {
            r.at(5).feed(Event::RecordRead(Ok(RecordRead {
                record: owned("other", 3, 9),
                config: None,
                watch: Some(true),
            })));
            r.feed(Event::WatchFired(Err(failure("retryable"))));
        }
        // Cycles go on every heartbeat, without a watch, until 10 heartbeats have passed.
        let out = r.at(200).feed(Event::Tick);
        assert!(
            !has(&out, |c| matches!(c, Command::ReadRecord { .. })),
            "{out:?}"
        );
        r.feed(Event::CycleCommitted(report(
            Action::None,
            owned("other", 3, 9),
            None,
        )));
        let out = r.at(1_006).feed(Event::Tick);
        assert!(
            has(&out, |c| matches!(
                c,
                Command::ReadRecord { watch: true, .. }
            ) || *c == Command::RunCycle),
            "{out:?}"
        );
    }
}

#[test]
fn a_candidate_awaiting_its_handover_without_a_watch_polls_eight_times_a_heartbeat() {
    let mut r = Run::registered();
    let mut rec = owned("other", 3, 9);
    rec.handover = Some(Party::Candidate(Named::new(id("me"), Priority::new(9))));
    r.feed(Event::CycleCommitted(report(
        Action::RequestedHandover,
        rec.clone(),
        None,
    )));
    // No watch (refused).
    let out = r.at(1).feed(Event::RecordRead(Ok(RecordRead {
        record: rec,
        config: None,
        watch: Some(false),
    })));
    assert_eq!(
        sleeps(&out),
        Some(at(0).saturating_add(HB / 8)),
        "last cycle at 0 + 100/8 ms: {out:?}"
    );
}

#[test]
fn failures_back_off_exponentially_and_warn_at_a_limited_rate() {
    let mut r = Run::registered();
    r.m.watch_armed = true;
    let mut last = Duration::ZERO;
    let mut warned = 0;
    for i in 0..8u64 {
        let now = i * 10;
        let out = r.at(now).feed(Event::CycleFailed(failure("unavailable")));
        warned += out
            .iter()
            .filter(|c| matches!(c, Command::Failed { warn: Some(_), .. }))
            .count();
        let wake = sleeps(&out).unwrap_or(at(now));
        last = wake.saturating_duration_since(at(now));
        // The next attempt fails too.
        r.at(now + 1).cycling();
    }
    assert!(last <= HB / 2 && last >= HB / 8, "{last:?}");
    assert_eq!(warned, 1, "one warning within WARN_INTERVAL");
    let out = r.at(100).cycling().feed(Event::CycleCommitted(report(
        Action::None,
        owned("x", 1, 1),
        None,
    )));
    assert!(has(&out, |c| *c == Command::Recovered { failures: 8 }));
}

#[test]
fn an_evicted_candidate_registers_again() {
    let mut r = Run::registered();
    let out = r.feed(Event::CycleFailed(Failure {
        not_registered: true,
        ..failure("not_registered")
    }));
    let wake = sleeps(&out).unwrap();
    let ms = u64::try_from(wake.since_origin().as_millis()).unwrap() + 1;
    assert_eq!(r.at(ms).feed(Event::Tick), vec![Command::Register]);
}

#[test]
fn an_observer_polls_and_reports_a_lapse_by_the_lapse_rule() {
    let mut r = Run::new(None, OnLoss::Recampaign);
    assert_eq!(
        r.feed(Event::Start),
        vec![Command::ReadRecord {
            watch: true,
            config: true
        }]
    );
    let out = r.at(10).feed(Event::RecordRead(Ok(RecordRead {
        record: owned("a", 1, 4),
        config: Some(config()),
        watch: Some(true),
    })));
    assert!(has(
        &out,
        |c| matches!(c, Command::Publish(ch) if ch.reason == ChangeReason::Discovered)
    ));
    // It wakes at the next poll (80-100 ms later).
    let wake = sleeps(&out).unwrap();
    assert!(wake >= at(90) && wake <= at(110));
    // Polls that see the same identity: a full lease after the first sighting, lapsed.
    let out = r.at(200).feed(Event::Tick);
    assert!(has(&out, |c| matches!(c, Command::ReadRecord { .. })));
    let out = r.feed(Event::RecordRead(Ok(RecordRead {
        record: owned("a", 1, 4),
        config: Some(config()),
        watch: None,
    })));
    assert!(!has(&out, |c| matches!(c, Command::Publish(_))));
    let out = r.at(310).feed(Event::Tick);
    assert!(has(&out, |c| matches!(c, Command::ReadRecord { .. })));
    let out = r.feed(Event::RecordRead(Ok(RecordRead {
        record: owned("a", 1, 4),
        config: Some(config()),
        watch: None,
    })));
    assert!(has(
        &out,
        |c| matches!(c, Command::Publish(ch) if ch.reason == ChangeReason::LeaseLapsed)
    ));
    // A watch that fires makes it read at once.
    let out = r.at(320).feed(Event::WatchFired(Ok(())));
    assert!(has(&out, |c| matches!(c, Command::ReadRecord { .. })));
}

#[test]
fn an_observer_waits_quietly_for_an_election_that_does_not_exist_yet() {
    let mut r = Run::new(None, OnLoss::Recampaign);
    r.feed(Event::Start);
    let out = r.feed(Event::RecordRead(Err(Failure {
        not_initialized: true,
        ..failure("not_initialized")
    })));
    assert!(has(&out, |c| matches!(
        c,
        Command::Failed { warn: None, .. }
    )));
    assert!(!has(&out, |c| matches!(
        c,
        Command::State(RunnerState::Error)
    )));
    let out = r.feed(Event::ShutdownRequested);
    assert!(has(&out, |c| matches!(c, Command::Stop { .. })));
}

#[test]
fn leader_changes_are_classified_from_what_was_seen() {
    let mut v = LeaderView::new(Some(id("me")));
    let lapsed = ChangeReason::LeaseLapsed;
    let disc = ChangeReason::Discovered;
    let first = v.observe(&owned("a", 1, 1), None, false, lapsed.clone(), disc.clone());
    assert_eq!(first.map(|c| c.reason), Some(ChangeReason::Discovered));
    // Same leader, new payload.
    let mut paid = owned("a", 1, 2);
    paid.payload = Some(b"x".to_vec());
    let c = v.observe(&paid, None, false, lapsed.clone(), disc.clone());
    assert_eq!(c.map(|c| c.reason), Some(ChangeReason::PayloadChanged));
    // A plain renewal publishes nothing.
    let mut renewed = paid.clone();
    renewed.renewal = 3;
    assert!(
        v.observe(&renewed, None, false, lapsed.clone(), disc.clone())
            .is_none()
    );
    // Stepped down, reserved for b; then b fills it: a handover.
    let c = v.observe(
        &vacant(1, 4, Some("b")),
        None,
        false,
        lapsed.clone(),
        disc.clone(),
    );
    assert_eq!(
        c.map(|c| c.reason),
        Some(ChangeReason::SteppedDown {
            reserved_for: Some(id("b"))
        })
    );
    let c = v.observe(&owned("b", 2, 5), None, false, lapsed.clone(), disc.clone());
    assert_eq!(c.map(|c| c.reason), Some(ChangeReason::HandedOver));
    // A takeover of a lapsed lease.
    let c = v.observe(&owned("c", 3, 6), None, false, lapsed.clone(), disc.clone());
    assert_eq!(c.map(|c| c.reason), Some(ChangeReason::Replaced));
    // An operator forces the vacancy.
    let mut hold = vacant(4, 7, None);
    hold.reservation = Some(Party::Operator(id("ops")));
    let c = v.observe(&hold, None, false, lapsed.clone(), disc.clone());
    assert_eq!(
        c.map(|c| c.reason),
        Some(ChangeReason::ForcedVacant {
            operator: id("ops")
        })
    );
    // An unreserved vacancy filled: acquired.
    let c = v.observe(&owned("d", 5, 8), None, false, lapsed.clone(), disc.clone());
    assert_eq!(c.map(|c| c.reason), Some(ChangeReason::Acquired));
    // This process's own record counts only while it leads that ballot.
    let c = v.observe(
        &owned("me", 6, 9),
        None,
        false,
        lapsed.clone(),
        disc.clone(),
    );
    assert_eq!(c.map(|c| c.reason), Some(ChangeReason::LeaseLapsed));
    let c = v.observe(
        &owned("me", 6, 10),
        Some(Ballot::new(6)),
        false,
        lapsed,
        disc,
    );
    assert!(c.is_some_and(|c| c.new.is_some_and(|n| n.id == id("me"))));
}

#[test]
fn the_view_tells_relevant_changes_from_plain_renewals() {
    let mut v = LeaderView::new(None);
    assert!(v.differs(&owned("a", 1, 1)));
    v.observe(
        &owned("a", 1, 1),
        None,
        false,
        ChangeReason::LeaseLapsed,
        ChangeReason::Discovered,
    );
    assert!(!v.differs(&owned("a", 1, 2)));
    let mut req = owned("a", 1, 2);
    req.handover = Some(Party::Operator(id("ops")));
    assert!(v.differs(&req));
    assert!(v.differs(&owned("b", 2, 3)));
}

// --- Names and classifications (stable metric labels) ---

#[test]
fn names_are_stable_labels() {
    use crate::store::txn::{TxnError, TxnErrorKind};
    let states = [
        (RunnerState::NotParticipating, "not_participating"),
        (RunnerState::Follower, "follower"),
        (RunnerState::Leader, "leader"),
        (RunnerState::Error, "error"),
        (RunnerState::Stopped, "stopped"),
    ];
    for (s, name) in states {
        assert_eq!((s.as_str(), s.to_string()), (name, name.to_owned()));
    }
    let stops = [
        (StopReason::HandedOver { to: None }, "handed_over", false),
        (StopReason::Resigned, "resigned", true),
        (StopReason::Superseded, "superseded", false),
        (StopReason::LeaseExpired, "lease_expired", false),
        (StopReason::ElectionsDisabled, "elections_disabled", false),
        (StopReason::Ineligible { to: None }, "ineligible", false),
        (StopReason::HandoverWithdrawn, "handover_withdrawn", false),
        (StopReason::SteppedDown, "stepped_down", false),
        (StopReason::Unregistered, "unregistered", false),
        (StopReason::Shutdown, "shutdown", true),
        (StopReason::RunnerStopped, "runner_stopped", false),
    ];
    for (s, name, requested) in stops {
        assert_eq!((s.as_str(), s.is_requested()), (name, requested));
    }
    let changes = [
        (ChangeReason::Discovered, "discovered"),
        (ChangeReason::Acquired, "acquired"),
        (ChangeReason::HandedOver, "handed_over"),
        (ChangeReason::Replaced, "replaced"),
        (
            ChangeReason::SteppedDown { reserved_for: None },
            "stepped_down",
        ),
        (
            ChangeReason::ForcedVacant { operator: id("o") },
            "forced_vacant",
        ),
        (ChangeReason::LeaseLapsed, "lease_lapsed"),
        (ChangeReason::PayloadChanged, "payload_changed"),
    ];
    for (c, name) in changes {
        assert_eq!(c.as_str(), name);
    }
    let kind = |e: ElectionError| Failure::of(&e).kind();
    let db = |k| ElectionError::Database(TxnError::new(k));
    assert_eq!(kind(db(TxnErrorKind::Conflict)), "conflict");
    assert_eq!(kind(db(TxnErrorKind::TooOld)), "too_old");
    assert_eq!(kind(db(TxnErrorKind::CommitUnknown)), "unknown_result");
    assert_eq!(
        kind(
            crate::store::database::TransactionTimedOut {
                after: Duration::from_secs(1)
            }
            .into_error()
        ),
        "timeout"
    );
    assert_eq!(kind(db(TxnErrorKind::Unavailable)), "unavailable");
    assert_eq!(kind(db(TxnErrorKind::OtherRetryable)), "retryable");
    assert_eq!(kind(db(TxnErrorKind::Fatal)), "fatal");
    assert_eq!(kind(ElectionError::NotInitialized), "not_initialized");
    assert_eq!(
        kind(ElectionError::NotRegistered { candidate: id("x") }),
        "not_registered"
    );
    assert_eq!(
        kind(ElectionError::corrupt(
            b"k",
            crate::error::DecodeError::Empty
        )),
        "corrupt"
    );
    assert_eq!(kind(ElectionError::BallotExhausted), "other");
    let f = Failure::of(&ElectionError::NotRegistered { candidate: id("x") });
    assert!(f.not_registered && !f.not_initialized && !f.retryable);
    let info = LeaderInfo::of(&{
        let mut r = owned("a", 1, 1);
        r.payload = Some(b"10.0.0.1:80".to_vec());
        r
    })
    .unwrap();
    assert_eq!(info.payload_str(), Some("10.0.0.1:80"));
    let binary = LeaderInfo {
        payload: Some(vec![0xff]),
        ..info
    };
    assert_eq!(binary.payload_str(), None);
}

#[test]
fn a_leaders_debug_shows_a_utf8_payload_as_text_and_any_other_as_bytes() {
    let mut info = LeaderInfo::of(&{
        let mut r = owned("a", 1, 1);
        r.payload = Some(b"10.0.0.1:7000".to_vec());
        r
    })
    .unwrap();
    let shown = format!("{info:?}");
    assert!(
        shown.contains(r#"payload: Some("10.0.0.1:7000")"#),
        "{shown}"
    );
    info.payload = Some(vec![0xff, 0x01]);
    let shown = format!("{info:?}");
    assert!(shown.contains("payload: Some([255, 1])"), "{shown}");
    info.payload = None;
    assert!(format!("{info:?}").contains("payload: None"));
    assert!(format!("{info:?}").contains("version: None"));
    info.version = Some(semver::Version::new(1, 5, 0));
    let shown = format!("{info:?}");
    assert!(shown.contains("version: Some(1.5.0)"), "{shown}");
}

// --- The view's classification, field by field ---

#[test]
fn every_field_but_the_renewal_is_a_relevant_change() {
    let base = owned("a", 1, 1);
    let mut v = LeaderView::new(None);
    v.observe(
        &base,
        None,
        false,
        ChangeReason::LeaseLapsed,
        ChangeReason::Discovered,
    );
    let mut edits: Vec<LeaderRecord> = Vec::new();
    let mut e = base.clone();
    e.ballot = Ballot::new(2);
    edits.push(e);
    let mut e = base.clone();
    e.owner = Some(Named::new(id("b"), Priority::new(1)));
    edits.push(e);
    let mut e = base.clone();
    e.handover = Some(Party::Candidate(Named::new(id("h"), Priority::new(9))));
    edits.push(e);
    let mut e = base.clone();
    e.payload = Some(b"p".to_vec());
    edits.push(e);
    let mut e = base.clone();
    e.owner = None;
    e.reservation = Some(Party::Operator(id("ops")));
    edits.push(e);
    for e in &edits {
        assert!(v.differs(e), "{e:?}");
    }
    let mut renewed = base.clone();
    renewed.renewal = 9;
    assert!(!v.differs(&renewed));
}

#[test]
fn a_lapse_is_reported_as_such_and_a_refresh_publishes_an_own_records_end() {
    let mut v = LeaderView::new(Some(id("me")));
    v.observe(
        &owned("a", 1, 1),
        None,
        false,
        ChangeReason::LeaseLapsed,
        ChangeReason::Discovered,
    );
    // The same record, now known lapsed.
    let c = v.observe(
        &owned("a", 1, 1),
        None,
        true,
        ChangeReason::Replaced,
        ChangeReason::Discovered,
    );
    assert_eq!(c.map(|c| c.reason), Some(ChangeReason::LeaseLapsed));
    // This process's own record counts while it leads; when it stops, a refresh says why.
    let mut v = LeaderView::new(Some(id("me")));
    let c = v.observe(
        &owned("me", 2, 2),
        Some(Ballot::new(2)),
        false,
        ChangeReason::LeaseLapsed,
        ChangeReason::Acquired,
    );
    assert_eq!(c.map(|c| c.reason), Some(ChangeReason::Acquired));
    let c = v.refresh(None, ChangeReason::SteppedDown { reserved_for: None });
    assert_eq!(
        c.map(|c| (c.reason, c.new)),
        Some((ChangeReason::SteppedDown { reserved_for: None }, None))
    );
}

// --- Machine transitions at their boundaries ---

#[test]
fn the_stored_configuration_replaces_the_initial_one_and_is_announced_once() {
    let mut r = Run::candidate();
    r.feed(Event::Start);
    let stored = timed(ElectionConfig::builder(), 600, 200, 2_000, 50)
        .build()
        .unwrap();
    let out = r.feed(Event::Registered(Ok(stored.clone())));
    assert!(has(&out, |c| *c == Command::ConfigChanged(stored.clone())));
    assert_eq!(r.m.config(), &stored);
    let mut rep = report(Action::None, owned("x", 1, 1), None);
    rep.config = stored.clone();
    let out = r.cycling().feed(Event::CycleCommitted(rep));
    assert!(
        !has(&out, |c| matches!(c, Command::ConfigChanged(_))),
        "{out:?}"
    );
    // Its heartbeat paces the next cycle (jittered between 80% and 100% of 200 ms).
    r.watching(owned("x", 1, 1));
    let wake = sleeps(&r.feed(Event::Tick)).unwrap();
    assert!(wake >= at(160) && wake <= at(200), "{wake:?}");
}

#[test]
fn results_of_operations_not_in_flight_are_ignored_but_time_still_counts() {
    // A leader idle with its watch armed: results of operations it is not running change
    // nothing...
    let stale = [
        Event::Registered(Ok(config())),
        Event::CycleCommitted(report(Action::Acquired, owned("me", 7, 7), Some(7))),
        Event::CycleFailed(failure("conflict")),
        Event::RecordRead(Ok(RecordRead {
            record: vacant(9, 9, None),
            config: None,
            watch: Some(false),
        })),
        Event::ResignDone,
        Event::Drained(false),
        Event::Left(Ok(())),
    ];
    for event in stale {
        let mut r = Run::leader();
        let out = r.at(10).feed(event.clone());
        assert!(
            out.iter().all(|c| matches!(c, Command::SleepUntil(_))),
            "{event:?}: {out:?}"
        );
    }
    // ...but the guard's deadline is still kept: a stale event after it ends the leadership.
    let mut r = Run::leader();
    r.belief = None;
    let out = r.at(300).feed(Event::ResignDone);
    assert!(has(&out, |c| matches!(c, Command::EndLeadership { .. })));
    // Inside a transaction nothing but a revoke may happen, stale or not.
    let mut r = Run::leader();
    r.belief = None;
    let out = r.at(300).feed(Event::ResignDecided);
    assert!(
        !has(&out, |c| matches!(c, Command::EndLeadership { .. })),
        "{out:?}"
    );
}

#[test]
fn a_failing_runner_keeps_its_back_off_even_when_an_earlier_action_or_renewal_is_due() {
    let mut r = Run::leader();
    r.believe(1, 2_000);
    // The cycle had said it could act at 50 ms; then a cycle failed.
    r.m.next_action_at = Some(at(50));
    let out = r
        .at(10)
        .cycling()
        .feed(Event::CycleFailed(failure("unavailable")));
    let wake = sleeps(&out).unwrap();
    assert!(wake > at(10) && wake <= at(60), "{wake:?}");
    // While failing, neither the takeover instant nor the renewal margin pulls the retry in.
    r.m.next_cycle_at = at(900);
    let out = r.at(20).feed(Event::Tick);
    assert_eq!(sleeps(&out), Some(at(900)));
    // Once it succeeds again, they do.
    let out = r.at(30).cycling().feed(Event::CycleCommitted(report(
        Action::Renewed,
        owned("me", 1, 2),
        Some(1),
    )));
    r.m.next_cycle_at = at(5_000);
    r.m.next_action_at = Some(at(700));
    let _ = out;
    assert_eq!(sleeps(&r.at(40).feed(Event::Tick)), Some(at(700)));
}

#[test]
fn only_a_candidate_awaiting_its_own_handover_polls_faster() {
    let mut r = Run::registered();
    let mut rec = owned("other", 3, 9);
    rec.handover = Some(Party::Candidate(Named::new(
        id("someone-else"),
        Priority::new(9),
    )));
    r.feed(Event::CycleCommitted(report(
        Action::None,
        rec.clone(),
        None,
    )));
    let out = r.at(1).feed(Event::RecordRead(Ok(RecordRead {
        record: rec,
        config: None,
        watch: Some(false),
    })));
    let wake = sleeps(&out).unwrap();
    assert!(
        wake >= at(80),
        "another's request does not speed this one up: {wake:?}"
    );
}

#[test]
fn a_renewal_of_the_live_guard_renews_and_nothing_else() {
    let mut r = Run::leader();
    r.at(100).believe(1, 394);
    let out = r.cycling().feed(Event::CycleCommitted(report(
        Action::Renewed,
        owned("me", 1, 2),
        Some(1),
    )));
    assert!(
        !has(&out, |c| matches!(c, Command::LateRenewal { .. })),
        "{out:?}"
    );
    assert!(has(&out, |c| matches!(
        c,
        Command::Renewed { took: Some(_), .. }
    )));
    assert!(!has(&out, |c| matches!(c, Command::IssueGuard { .. })));
}

#[test]
fn a_new_ballot_while_an_older_guard_lives_supersedes_it() {
    let mut r = Run::leader();
    r.at(100).believe(2, 394);
    let out = r.cycling().feed(Event::CycleCommitted(report(
        Action::Acquired,
        owned("me", 2, 5),
        Some(2),
    )));
    assert!(has(&out, |c| *c
        == Command::EndLeadership {
            ballot: Ballot::new(1),
            reason: StopReason::Superseded
        }));
    assert!(has(&out, |c| *c
        == Command::IssueGuard {
            ballot: Ballot::new(2),
            deadline: at(394)
        }));
    assert!(!has(&out, |c| matches!(c, Command::LateRenewal { .. })));
}

#[test]
fn a_renewal_of_a_guard_revoked_in_its_transaction_is_not_resumed() {
    let mut r = Run::leader();
    r.at(100).cycling();
    r.belief = None;
    r.feed(Event::CycleDecided(Ok((
        Action::HandedOver,
        vacant(1, 2, Some("x")),
    ))));
    // (An adoption that nonetheless confirmed the same ballot.)
    r.believe(1, 394);
    let out = r.feed(Event::CycleCommitted(report(
        Action::Renewed,
        owned("me", 1, 2),
        Some(1),
    )));
    assert!(
        has(&out, |c| *c
            == Command::LateRenewal {
                ballot: Ballot::new(1)
            }),
        "{out:?}"
    );
}

#[test]
fn the_fallback_reason_of_an_own_record_follows_why_the_leadership_ended() {
    for (reason, fallback) in [
        (
            StopReason::HandedOver { to: Some(id("x")) },
            ChangeReason::SteppedDown {
                reserved_for: Some(id("x")),
            },
        ),
        (
            StopReason::Resigned,
            ChangeReason::SteppedDown { reserved_for: None },
        ),
        (
            StopReason::Shutdown,
            ChangeReason::SteppedDown { reserved_for: None },
        ),
        (
            StopReason::ElectionsDisabled,
            ChangeReason::SteppedDown { reserved_for: None },
        ),
        (StopReason::LeaseExpired, ChangeReason::LeaseLapsed),
    ] {
        let mut r = Run::leader();
        let mut out = Vec::new();
        r.m.end_leadership(reason.clone(), &mut out);
        assert!(
            has(
                &out,
                |c| matches!(c, Command::Publish(ch) if ch.reason == fallback)
            ),
            "{reason:?}: {out:?}"
        );
    }
}

#[test]
fn exit_on_loss_ignores_requested_ends_and_recampaign_ignores_losses() {
    let mut r = Run::leader_with(OnLoss::Exit);
    let mut out = Vec::new();
    r.m.end_leadership(StopReason::Resigned, &mut out);
    assert!(!r.m.exit_on_loss, "a requested end is no loss");
    let mut r = Run::leader();
    let mut out = Vec::new();
    r.m.end_leadership(StopReason::LeaseExpired, &mut out);
    assert!(!r.m.exit_on_loss, "Recampaign keeps competing");
}

#[test]
fn a_lost_leadership_that_stopped_the_candidate_believing_is_reported_with_its_ballot() {
    // The record moved on to another owner at the same ballot: superseded.
    let mut r = Run::leader();
    r.belief = None;
    let out = r.at(50).cycling().feed(Event::CycleDecided(Ok((
        Action::None,
        owned("thief", 1, 2),
    ))));
    assert_eq!(out, vec![Command::RevokeGuard(StopReason::Superseded)]);
}

#[test]
fn leaving_retries_at_its_time_and_not_before() {
    let mut r = Run::registered();
    r.feed(Event::ShutdownRequested);
    r.feed(Event::Drained(true));
    let out = r.at(100).feed(Event::Left(Err(failure("unavailable"))));
    let wake = sleeps(&out).unwrap();
    let ms = u64::try_from(wake.since_origin().as_millis()).unwrap();
    // Exactly at the retry time it goes.
    r.now = wake;
    assert_eq!(r.feed(Event::Tick), vec![Command::Leave]);
    let _ = ms;
}

#[test]
fn an_observer_polls_when_due_and_wakes_at_a_lapse_only_if_still_ahead() {
    let mut r = Run::new(None, OnLoss::Recampaign);
    r.feed(Event::Start);
    r.at(0).feed(Event::RecordRead(Ok(RecordRead {
        record: owned("a", 1, 4),
        config: Some(config()),
        watch: Some(true),
    })));
    let next = r.m.next_cycle_at;
    // Exactly at the next poll it reads (without a watch: one is armed).
    r.now = next;
    assert_eq!(
        r.feed(Event::Tick),
        vec![Command::ReadRecord {
            watch: false,
            config: true
        }]
    );
    r.feed(Event::RecordRead(Ok(RecordRead {
        record: owned("a", 1, 4),
        config: Some(config()),
        watch: None,
    })));
    // The lapse (300 ms after the first sighting at 0) comes before the next poll: wake then.
    r.m.next_cycle_at = at(1_000);
    let out = r.at(250).feed(Event::Tick);
    assert_eq!(sleeps(&out), Some(at(300)));
    // At the lapse instant itself, it is no longer ahead: the poll time rules.
    let out = r.at(300).feed(Event::Tick);
    assert_eq!(sleeps(&out), Some(at(1_000)));
    // A vacancy has no lapse to wake for.
    let mut r = Run::new(None, OnLoss::Recampaign);
    r.feed(Event::Start);
    r.feed(Event::RecordRead(Ok(RecordRead {
        record: vacant(1, 4, None),
        config: Some(config()),
        watch: Some(true),
    })));
    r.m.next_cycle_at = at(1_000);
    assert_eq!(sleeps(&r.at(10).feed(Event::Tick)), Some(at(1_000)));
}

#[test]
fn resign_requests_are_ignored_by_observers_and_after_leaving() {
    let mut r = Run::new(None, OnLoss::Recampaign);
    r.feed(Event::Start);
    assert!(!has(&r.feed(Event::ResignRequested), |c| matches!(
        c,
        Command::RejectResign { .. }
    )));
    let mut r = Run::leader();
    r.feed(Event::ShutdownRequested);
    let out = r.feed(Event::ResignRequested);
    assert!(!has(&out, |c| matches!(
        c,
        Command::RejectResign { .. } | Command::Resign { .. }
    )));
}

#[test]
fn a_renewal_that_fails_counts_as_a_failed_renewal() {
    let mut r = Run::leader();
    let out = r
        .at(100)
        .cycling()
        .feed(Event::CycleFailed(failure("unavailable")));
    assert!(has(&out, |c| matches!(
        c,
        Command::Failed { leading: true, .. }
    )));
    let mut r = Run::registered();
    let out = r.feed(Event::CycleFailed(failure("unavailable")));
    assert!(has(&out, |c| matches!(
        c,
        Command::Failed { leading: false, .. }
    )));
}

#[test]
fn a_leaving_machine_ignores_the_result_of_the_step_it_is_not_taking() {
    // While draining, a stale "left" does not stop the machine before it resigned...
    let mut r = Run::leader();
    r.at(10).feed(Event::ShutdownRequested);
    let out = r.feed(Event::Left(Ok(())));
    assert!(!has(&out, |c| matches!(c, Command::Stop { .. })), "{out:?}");
    assert_eq!(r.feed(Event::Drained(false)), vec![Command::Leave]);
    // ...and while leaving, a stale "drained" neither starts a second leave nor changes
    // whether the tasks finished.
    let out = r.feed(Event::Drained(true));
    assert!(!has(&out, |c| matches!(c, Command::Leave)), "{out:?}");
    let out = r.feed(Event::Left(Ok(())));
    assert!(has(&out, |c| *c
        == Command::Stop {
            tasks_finished: false
        }));
}

#[test]
fn a_resignation_rejected_while_waiting_for_busy_work_leaves_the_candidate_cycling() {
    let mut r = Run::leader();
    r.busy = true;
    let out = r.at(10).feed(Event::ResignRequested);
    assert!(has(&out, |c| *c == Command::CloseGuard));
    // The lease runs out while the work is still busy: the leadership ends, its tasks drain...
    r.belief = None;
    let out = r.at(300).feed(Event::Tick);
    assert!(
        has(&out, |c| matches!(c, Command::DrainTasks { .. })),
        "{out:?}"
    );
    r.busy = false;
    // ...and the resignation is rejected; the candidate goes on (it is not quiet).
    let out = r.feed(Event::Drained(true));
    assert!(
        has(&out, |c| matches!(c, Command::RejectResign { .. })),
        "{out:?}"
    );
    assert!(
        has(&out, |c| matches!(
            c,
            Command::RunCycle | Command::ReadRecord { .. } | Command::SleepUntil(_)
        )),
        "{out:?}"
    );
}

mod schedule;
mod walk;

#[test]
fn an_eligibility_change_runs_the_next_cycle_at_once() {
    // A follower asleep (watch armed) until its next heartbeat: a cycle now.
    let mut r = Run::registered();
    r.feed(Event::CycleCommitted(report(
        Action::None,
        owned("other", 3, 9),
        None,
    )));
    let out = r.at(5).watching(owned("other", 3, 9));
    assert!(sleeps(&out).is_some_and(|t| t > at(50)), "{out:?}");
    assert_eq!(
        r.at(6).feed(Event::EligibilityChanged),
        vec![Command::RunCycle]
    );
    // A leader asleep until its renewal: a cycle now (an ineligible leader steps down within
    // a cycle, not a heartbeat).
    let mut r = Run::leader();
    assert_eq!(
        r.at(10).feed(Event::EligibilityChanged),
        vec![Command::RunCycle]
    );
    // While a cycle is in flight: nothing at once, and the next cycle follows its end at once
    // (the one in flight may have read the old eligibility).
    let mut r = Run::leader();
    assert_eq!(r.at(10).cycling().feed(Event::EligibilityChanged), vec![]);
    r.believe(1, 304);
    let out = r.at(20).feed(Event::CycleCommitted(report(
        Action::Renewed,
        owned("me", 1, 2),
        Some(1),
    )));
    assert_eq!(out.last(), Some(&Command::RunCycle), "{out:?}");
    // Not registered yet: the registration's first cycle carries it; nothing more.
    let mut r = Run::candidate();
    assert_eq!(r.feed(Event::Start), vec![Command::Register]);
    assert_eq!(r.feed(Event::EligibilityChanged), vec![]);
    // An observer has no eligibility: it keeps sleeping.
    let mut r = Run::new(None, OnLoss::Recampaign);
    let out = r.feed(Event::Start);
    assert!(!has(&out, |c| *c == Command::RunCycle), "{out:?}");
    let out = r.feed(Event::EligibilityChanged);
    assert!(!has(&out, |c| *c == Command::RunCycle), "{out:?}");
}

// --- Found by an adversarial review ---

/// docs/design.md §13.3 and §13.9: under `hold`, a leader that is not eligible, with nobody
/// live eligible, keeps leading ("under hold with nobody eligible, nobody releases"). A leader
/// that began draining for its ineligibility (its guard closed for a live eligible successor)
/// and whose successor then died or became ineligible is told by the core to hold; the
/// machine instead "steps down anyway" (its guard is closed and no request is honoured), and
/// the resignation finds nobody to reserve for: an unreserved vacancy that nobody eligible can
/// fill, the outage `hold` exists to prevent. It should reopen the guard and hold.
#[test]
fn a_holding_leader_whose_drain_target_vanished_does_not_release() {
    let mut r = Run::leader();
    r.at(100).believe(1, 394);
    r.busy = true;
    let mut rep = report(Action::Renewed, owned("me", 1, 2), Some(1));
    rep.ineligible = Some(crate::core::Ineligible::SteppingDown);
    r.watching(owned("me", 1, 1));
    let out = r.cycling().feed(Event::CycleCommitted(rep));
    assert!(has(&out, |c| *c == Command::CloseGuard), "{out:?}");
    // The successor died while the work drained; nobody live is eligible: the core holds.
    r.at(150).believe(1, 444);
    let mut rep = report(Action::Renewed, owned("me", 1, 3), Some(1));
    rep.ineligible = Some(crate::core::Ineligible::Holding);
    let out = r.cycling().feed(Event::CycleCommitted(rep));
    assert!(
        !has(&out, |c| *c == Command::SteppingDownAnyway),
        "a holding leader steps down with nobody eligible to take over: {out:?}"
    );
    // Its work still drains (within the grace): the closed guard stays.
    assert!(
        !has(&out, |c| matches!(c, Command::IssueGuard { .. })),
        "{out:?}"
    );
    // Idle at the next cycle: the drained guard ends and a fresh one of the same ballot
    // takes new work (no closed guard is kept).
    r.busy = false;
    r.at(200).believe(1, 494);
    let mut rep = report(Action::Renewed, owned("me", 1, 4), Some(1));
    rep.ineligible = Some(crate::core::Ineligible::Holding);
    let out = r.cycling().feed(Event::CycleCommitted(rep));
    assert!(
        has(
            &out,
            |c| matches!(c, Command::ReissueGuard { ballot, .. } if ballot.get() == 1)
        ),
        "{out:?}"
    );
    assert!(
        !has(&out, |c| matches!(c, Command::IssueGuard { .. })),
        "{out:?}"
    );
    assert!(!has(&out, |c| *c == Command::SteppingDownAnyway), "{out:?}");
    assert!(
        !has(&out, |c| matches!(c, Command::EndLeadership { .. })),
        "{out:?}"
    );
}

/// `LeaderInfo` gained `version` (docs/design.md §14.1), but its hand-written `Debug` lists the
/// fields it had before: a leader's version never shows in a `{:?}` (logs, assertion messages)
/// and two infos that differ only by version print the same.
#[test]
fn a_leaders_debug_shows_its_version() {
    let mut info = LeaderInfo::of(&owned("a", 1, 1)).unwrap();
    info.version = Some(semver::Version::new(1, 5, 0));
    let shown = format!("{info:?}");
    assert!(shown.contains("1.5.0"), "{shown}");
}
