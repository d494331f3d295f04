//! Table tests of the member runner machine.

#![allow(clippy::unwrap_used, clippy::panic, clippy::arithmetic_side_effects)]

use std::time::Duration;

use super::*;
use crate::core::tests::{failure, timed};

fn at(ms: u64) -> LocalInstant {
    LocalInstant::from_origin(Duration::from_millis(ms))
}

fn config() -> ElectionConfig {
    timed(ElectionConfig::builder(), 300, 100, 600, 30)
        .handover_grace(Duration::from_millis(200))
        .build()
        .unwrap()
}

fn ctx(now: u64, owned: &[(u32, u64)], deadline: Option<u64>, idle: &[u32]) -> ShardCtx {
    ShardCtx::new(
        at(now),
        owned
            .iter()
            .map(|(s, b)| (ShardId::new(*s), Ballot::new(*b)))
            .collect(),
        deadline.map(at),
        idle.iter().map(|s| ShardId::new(*s)).collect(),
    )
}

/// The context of a member owning shards 1 and 2 at ballot 5, its lease until `deadline`.
fn both(now: u64, deadline: u64) -> ShardCtx {
    both_idle(now, deadline, &[])
}

/// [`both`] with the work of the shards `idle` idle.
fn both_idle(now: u64, deadline: u64, idle: &[u32]) -> ShardCtx {
    ctx(now, &[(1, 5), (2, 5)], Some(deadline), idle)
}

/// How many guards `out` revokes for `reason`.
fn revoked(out: &[ShardCommand], reason: ShardStop) -> usize {
    out.iter()
        .filter(|c| matches!(c, ShardCommand::RevokeGuard { reason: r, .. } if *r == reason))
        .count()
}

/// The instant `out` sleeps until, if it sleeps.
fn wake(out: &[ShardCommand]) -> Option<LocalInstant> {
    out.iter().find_map(|c| match c {
        ShardCommand::SleepUntil(t) => Some(*t),
        _ => None,
    })
}

/// Whether `out` issues no guard.
fn none_issued(out: &[ShardCommand]) -> bool {
    !out.iter()
        .any(|c| matches!(c, ShardCommand::IssueGuard { .. }))
}

/// `m` at its heartbeat (90 ms) then told by the coordinator to hand `shard` over: what it
/// does then.
fn asked_for(m: &mut ShardMachine, shard: u32) -> Vec<ShardCommand> {
    m.handle(ShardEvent::Tick, &both(90, 294));
    m.handle(committed(&[shard], false), &both(90, 384))
}

fn committed(hand_over: &[u32], more: bool) -> ShardEvent {
    ShardEvent::CycleCommitted {
        hand_over: hand_over.iter().map(|s| ShardId::new(*s)).collect(),
        more,
        config: config(),
    }
}

fn run(ready: &[u32]) -> ShardCommand {
    ShardCommand::RunCycle {
        ready: ready.iter().map(|s| ShardId::new(*s)).collect(),
    }
}

/// A member owning shards 1 and 2 at ballot 5, lease until 294 ms, idle.
fn owning() -> ShardMachine {
    let mut m = ShardMachine::new(config(), 7, at(0));
    assert_eq!(
        m.handle(ShardEvent::Start, &ctx(0, &[], None, &[])),
        vec![run(&[])]
    );
    let out = m.handle(committed(&[], false), &both(0, 294));
    assert!(out.contains(&ShardCommand::IssueGuard {
        shard: ShardId::new(1),
        ballot: Ballot::new(5),
        deadline: at(294)
    }));
    assert!(
        matches!(out.last(), Some(ShardCommand::SleepUntil(_))),
        "{out:?}"
    );
    m
}

#[test]
fn guards_are_issued_after_a_commit_and_follow_the_lease() {
    let mut m = owning();
    assert_eq!(m.guarded().len(), 2);
    // The next cycle is due by the jittered heartbeat (80-100 ms).
    let out = m.handle(ShardEvent::Tick, &both(100, 294));
    assert_eq!(out, vec![run(&[])]);
    // A renewal moves every guard's deadline.
    let out = m.handle(committed(&[], false), &both(100, 394));
    assert!(out.contains(&ShardCommand::SetDeadline(at(394))), "{out:?}");
    assert!(none_issued(&out));
}

#[test]
fn a_lapsed_lease_revokes_every_guard() {
    let mut m = owning();
    let out = m.handle(ShardEvent::Tick, &ctx(294, &[], None, &[]));
    assert_eq!(revoked(&out, ShardStop::LeaseExpired), 2, "{out:?}");
    assert!(m.guarded().is_empty());
}

#[test]
fn a_move_closes_the_guard_waits_for_idle_work_and_revokes_inside_the_transaction() {
    let mut m = owning();
    // The coordinator asks for shard 1; its work is busy.
    let out = asked_for(&mut m, 1);
    assert!(out.contains(&ShardCommand::CloseGuard(ShardId::new(1))));
    assert!(
        !out.iter()
            .any(|c| matches!(c, ShardCommand::RunCycle { .. })),
        "{out:?}"
    );
    // Its work goes idle: a cycle that may hand it over, at once.
    let out = m.handle(ShardEvent::WorkIdle, &both_idle(95, 384, &[1]));
    assert_eq!(out, vec![run(&[1])]);
    // Inside the transaction, shard 1 is no longer owned: revoked before the commit.
    let out = m.handle(
        ShardEvent::CycleDecided,
        &ctx(96, &[(2, 5)], Some(384), &[1]),
    );
    assert_eq!(
        out,
        vec![ShardCommand::RevokeGuard {
            shard: ShardId::new(1),
            reason: ShardStop::HandedOver
        }]
    );
    let out = m.handle(committed(&[], false), &ctx(97, &[(2, 5)], Some(390), &[1]));
    assert!(none_issued(&out));
    assert_eq!(m.guarded(), [ShardId::new(2)].into());
}

#[test]
fn a_shorter_lease_moves_the_guards_deadline_back_inside_the_transaction() {
    let mut m = owning();
    assert_eq!(m.handle(ShardEvent::Tick, &both(90, 294)), vec![run(&[])]);
    // The attempt writes a shorter lease: the belief is capped at 150 before the commit.
    let out = m.handle(ShardEvent::CycleDecided, &both(91, 150));
    assert_eq!(out, vec![ShardCommand::SetDeadline(at(150))]);
    // A later attempt's own longer end does not extend it before its commit.
    let out = m.handle(ShardEvent::CycleDecided, &both(92, 390));
    assert!(out.is_empty(), "{out:?}");
    // Unconfirmed (the reply is lost): every guard ends at the capped deadline.
    let failure = failure("commit_unknown_result");
    m.handle(ShardEvent::CycleFailed(failure), &both(120, 150));
    let out = m.handle(ShardEvent::Tick, &ctx(150, &[], Some(150), &[]));
    let expired = revoked(&out, ShardStop::LeaseExpired);
    assert_eq!(expired, 2, "{out:?}");
}

#[test]
fn a_closed_guard_whose_move_was_withdrawn_is_reopened_not_cycled_in_a_loop() {
    let mut m = owning();
    let out = asked_for(&mut m, 1);
    assert!(out.contains(&ShardCommand::CloseGuard(ShardId::new(1))));
    // The next cycle (the heartbeat) finds the request withdrawn; the work is still busy.
    m.handle(ShardEvent::Tick, &both(190, 384));
    let out = m.handle(committed(&[], false), &both(191, 485));
    assert!(
        matches!(out.as_slice(), [ShardCommand::SetDeadline(_), ShardCommand::SleepUntil(t)] if *t <= at(290)),
        "sleeps until the grace ends: {out:?}"
    );
    // The work goes idle: no handover cycle (nothing is asked), the guard is replaced by a
    // fresh one of the same ballot, and the member sleeps until its heartbeat.
    let out = m.handle(ShardEvent::WorkIdle, &both_idle(200, 485, &[1]));
    assert_eq!(
        &out[..2],
        &[
            ShardCommand::RevokeGuard {
                shard: ShardId::new(1),
                reason: ShardStop::MoveWithdrawn
            },
            ShardCommand::IssueGuard {
                shard: ShardId::new(1),
                ballot: Ballot::new(5),
                deadline: at(485)
            },
        ],
        "{out:?}"
    );
    assert!(
        matches!(out.last(), Some(ShardCommand::SleepUntil(t)) if *t > at(200)),
        "{out:?}"
    );
    // Busy work: the grace ends it the same way.
    let mut m = owning();
    asked_for(&mut m, 2);
    m.handle(ShardEvent::Tick, &both(190, 384));
    m.handle(committed(&[], false), &both(191, 485));
    let out = m.handle(ShardEvent::Tick, &both(290, 485));
    assert!(
        out.contains(&ShardCommand::RevokeGuard {
            shard: ShardId::new(2),
            reason: ShardStop::MoveWithdrawn
        }),
        "{out:?}"
    );
    assert!(
        !out.iter()
            .any(|c| matches!(c, ShardCommand::RunCycle { ready } if !ready.is_empty())),
        "a withdrawn move is not handed over: {out:?}"
    );
}

#[test]
fn a_busy_shard_is_handed_over_when_the_grace_ends() {
    let mut m = owning();
    let out = asked_for(&mut m, 1);
    // It sleeps at most until the grace (200 ms) ends.
    let wake = wake(&out);
    assert!(wake.is_some_and(|t| t <= at(290)), "{out:?}");
    let out = m.handle(ShardEvent::Tick, &both(290, 384));
    assert_eq!(out, vec![run(&[1])]);
}

#[test]
fn more_work_in_the_inbox_cycles_again_at_once_and_failures_back_off() {
    let mut m = owning();
    m.handle(ShardEvent::Tick, &both(90, 294));
    let out = m.handle(committed(&[], true), &both(91, 385));
    assert!(out.contains(&run(&[])), "{out:?}");
    let failure = failure("conflict");
    let out = m.handle(ShardEvent::CycleFailed(failure), &both(92, 385));
    assert_eq!(
        out.first(),
        Some(&ShardCommand::Failed {
            kind: "conflict",
            warn: true
        })
    );
    let wake = wake(&out);
    assert!(
        wake.is_some_and(|t| t > at(92) && t <= at(92 + 50)),
        "{out:?}"
    );
}

#[test]
fn a_handover_whose_cycle_failed_waits_for_the_back_off() {
    let mut m = owning();
    asked_for(&mut m, 1);
    // Shard 1's work is idle: a cycle that hands it over, at once.
    let out = m.handle(ShardEvent::WorkIdle, &both_idle(95, 384, &[1]));
    assert_eq!(out, vec![run(&[1])]);
    let failure = failure("unavailable");
    // Each failure backs off, although shard 1 stays ready: never a cycle back to back.
    let mut now = 96;
    for _ in 0..5 {
        let out = m.handle(
            ShardEvent::CycleFailed(failure.clone()),
            &both_idle(now, 384, &[1]),
        );
        let wake = wake(&out);
        assert!(
            wake.is_some(),
            "a failed cycle with a ready handover ran again at once: {out:?}"
        );
        let wake = wake.unwrap();
        assert!(wake > at(now), "{out:?}");
        // Woken early (a tick, the work idle again): still backing off.
        let early = m.handle(ShardEvent::WorkIdle, &both_idle(now + 1, 384, &[1]));
        assert!(
            matches!(early.as_slice(), [ShardCommand::SleepUntil(t)] if *t > at(now + 1)),
            "{early:?}"
        );
        // At the back-off's end, the handover is tried again.
        now = u64::try_from(wake.since_origin().as_micros().div_ceil(1000)).unwrap();
        let out = m.handle(ShardEvent::Tick, &both_idle(now, 384, &[1]));
        assert_eq!(out, vec![run(&[1])]);
    }
}

#[test]
fn an_inbox_change_cycles_at_once_unless_backing_off() {
    let mut m = owning();
    // Sleeping until the heartbeat: the watch fires at 20 ms, the cycle runs then.
    let out = m.handle(ShardEvent::InboxChanged, &both(20, 294));
    assert_eq!(out, vec![run(&[])]);
    let failure = failure("unavailable");
    m.handle(ShardEvent::CycleFailed(failure), &both(25, 294));
    let out = m.handle(ShardEvent::InboxChanged, &both(26, 294));
    assert!(
        matches!(out.as_slice(), [ShardCommand::SleepUntil(t)] if *t > at(26)),
        "a watch must not cut the back-off short: {out:?}"
    );
}

#[test]
fn a_watch_that_fired_during_a_cycle_that_failed_does_not_cut_the_back_off_short() {
    let mut m = owning();
    let out = m.handle(ShardEvent::InboxChanged, &both(20, 294));
    assert_eq!(out, vec![run(&[])]);
    // A second watch fires while that cycle is in flight (an executor that listens then).
    assert!(
        m.handle(ShardEvent::InboxChanged, &both(21, 294))
            .is_empty()
    );
    let failure = failure("unavailable");
    // The cycle fails: the retry waits for the back-off (it reads the inbox anyway).
    let out = m.handle(ShardEvent::CycleFailed(failure), &both(25, 294));
    assert!(
        out.iter()
            .any(|c| matches!(c, ShardCommand::SleepUntil(t) if *t > at(25))),
        "a failed cycle ran again at once for a watch that fired during it: {out:?}"
    );
    assert!(
        !out.iter()
            .any(|c| matches!(c, ShardCommand::RunCycle { .. }))
    );
}

#[test]
fn shutdown_revokes_drains_leaves_and_stops() {
    let mut m = owning();
    let out = m.handle(ShardEvent::ShutdownRequested, &both(10, 294));
    let revoked = revoked(&out, ShardStop::Shutdown);
    assert_eq!(revoked, 2);
    assert!(
        matches!(out.last(), Some(ShardCommand::DrainTasks { .. })),
        "{out:?}"
    );
    let out = m.handle(ShardEvent::Drained(true), &ctx(20, &[], Some(294), &[]));
    assert_eq!(out, vec![ShardCommand::Leave]);
    let failure = failure("unavailable");
    let out = m.handle(
        ShardEvent::Left(Err(failure.clone())),
        &ctx(30, &[], None, &[]),
    );
    // A failed leave is retried after the back-off of a failed cycle (from a 32nd of the
    // heartbeat, 1 ms at least, doubling; jittered down to half), not back to back.
    let Some(ShardCommand::WaitUntil(retry)) = out.last().cloned() else {
        panic!("a failed leave is retried after a back-off, not at once: {out:?}");
    };
    assert_eq!(out.len(), 1, "{out:?}");
    let hb = config().heartbeat_interval();
    let first = (hb / 32).max(Duration::from_millis(1));
    assert!(
        retry >= at(30).saturating_add(first / 2) && retry <= at(30).saturating_add(first),
        "{retry:?}"
    );
    let at_instant =
        |i: LocalInstant| ShardCtx::new(i, Default::default(), None, Default::default());
    let before =
        LocalInstant::from_origin(retry.since_origin().saturating_sub(Duration::from_nanos(1)));
    assert_eq!(
        m.handle(ShardEvent::Tick, &at_instant(before)),
        vec![ShardCommand::WaitUntil(retry)]
    );
    let now = at_instant(retry);
    assert_eq!(m.handle(ShardEvent::Tick, &now), vec![ShardCommand::Leave]);
    // The second failure doubles the back-off.
    let out = m.handle(ShardEvent::Left(Err(failure.clone())), &now);
    let Some(ShardCommand::WaitUntil(second)) = out.last().cloned() else {
        panic!("{out:?}");
    };
    assert!(
        second >= retry.saturating_add(first) && second <= retry.saturating_add(first * 2),
        "{second:?}"
    );
    let now = at_instant(second);
    assert_eq!(m.handle(ShardEvent::Tick, &now), vec![ShardCommand::Leave]);
    let out = m.handle(ShardEvent::Left(Ok(())), &now);
    assert_eq!(out, vec![ShardCommand::Stop]);
    assert!(
        m.handle(ShardEvent::Tick, &ctx(5_000, &[], None, &[]))
            .is_empty()
    );
}

/// Once a shutdown is asked for, no event but time ends the machine's waits: a failed leave's
/// back-off is a [`ShardCommand::WaitUntil`], which the runner carries out by the clock alone
/// (a sleep that a shutdown ends would end at once for ever, the shutdown token staying
/// cancelled: the runner spun through the whole back-off). Every event fed meanwhile (the
/// shutdown again, an idle guard, an inbox change, an early tick) answers the same wait, and
/// no leave starts before its instant.
#[test]
fn a_leaves_back_off_is_a_wait_that_no_event_cuts_short() {
    let mut m = owning();
    let _ = m.handle(ShardEvent::ShutdownRequested, &both(10, 294));
    assert_eq!(
        m.handle(ShardEvent::Drained(true), &ctx(20, &[], Some(294), &[])),
        vec![ShardCommand::Leave]
    );
    let failure = failure("unavailable");
    let out = m.handle(ShardEvent::Left(Err(failure)), &ctx(30, &[], None, &[]));
    let Some(ShardCommand::WaitUntil(retry)) = out.last().cloned() else {
        panic!("{out:?}");
    };
    assert!(retry > at(30), "{retry:?}");
    for event in [
        ShardEvent::ShutdownRequested,
        ShardEvent::WorkIdle,
        ShardEvent::InboxChanged,
        ShardEvent::Tick,
        ShardEvent::ShutdownRequested,
    ] {
        let out = m.handle(event.clone(), &ctx(31, &[], None, &[]));
        assert_eq!(out, vec![ShardCommand::WaitUntil(retry)], "after {event:?}");
    }
    assert_eq!(
        m.handle(
            ShardEvent::Tick,
            &ShardCtx::new(retry, BTreeMap::new(), None, BTreeSet::new())
        ),
        vec![ShardCommand::Leave]
    );
}
