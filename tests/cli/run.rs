//! `fdb-leader run` with real processes on one SQLite file: exactly one child runs; a leader
//! killed with SIGKILL takes its child's whole process group with it within a second, and is
//! replaced within lease + heartbeat + 1 s with a higher ballot, after that; SIGTERM
//! hands over within 1 s with no overlap; begin/end commands run in order around each
//! leadership; a higher-priority candidate takes over only after the old child has stopped.
//!
//! These tests measure wall-clock failover, so they run one at a time.

use std::time::{Duration, Instant};

use crate::cli_support::{
    HEARTBEAT_DUR, LEASE_DUR, PATIENCE, World, alone, running, signal, wait_exit,
    wait_live_candidates,
};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

#[test]
fn two_runs_on_one_file_run_exactly_one_child() {
    let _alone = alone();
    let mut world = World::new();
    // Both at once, on a file that does not exist yet: both create it, one leads.
    let mut a = world.start_run("a", &[]);
    let mut b = world.start_run("b", &[]);
    let first = world.wait_first_leader();
    wait_live_candidates(&world, 2);
    // Watch for three leases: one child all along, both campaigners alive.
    world.assert_one_child_for(&first, LEASE_DUR * 3);
    assert!(a.try_wait().unwrap().is_none() && b.try_wait().unwrap().is_none());
    assert_eq!(world.events().len(), 1, "{:?}", world.log_lines());
    let status = crate::cli_support::status_json(&world).unwrap();
    assert_eq!(status["leader"], first.id.as_str());
    assert_eq!(status["ballot"], first.ballot);

    signal(&b, Signal::SIGTERM);
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
    assert!(wait_exit(&mut b, PATIENCE).is_some_and(|s| s.success()));
    assert!(world.active().is_empty());
}

#[test]
fn sigkill_of_the_leader_kills_its_child_group_and_fails_over_after_it() {
    let _alone = alone();
    let mut world = World::new();
    // The children start a grandchild too: the whole group must go.
    let (mut a, mut b, first, grandchild) = world.leader_with_grandchild_and_standby();

    // SIGKILL the supervisor only: nothing else is killed by the test.
    let start = Instant::now();
    signal(&a, Signal::SIGKILL);
    let gone = world.assert_group_gone(&first, &grandchild, start);

    let (next, seen) = world.wait_led("b");
    let failover = seen - start;
    let bound = LEASE_DUR + HEARTBEAT_DUR + Duration::from_secs(1);
    assert!(
        failover <= bound,
        "failover took {failover:?}, more than {bound:?}"
    );
    // The successor's child started only after the old group was gone.
    assert!(
        seen > gone,
        "b's child started before a's child group was gone"
    );
    assert!(next.ballot > first.ballot, "{next:?} after {first:?}");
    eprintln!("failover after SIGKILL: {failover:?} (bound {bound:?})");
    assert!(wait_exit(&mut a, PATIENCE).is_some());
    assert_eq!(world.active(), vec![next]);

    signal(&b, Signal::SIGTERM);
    assert!(wait_exit(&mut b, PATIENCE).is_some_and(|s| s.success()));
    assert!(world.running_pids().is_empty(), "{:?}", world.log_lines());
}

#[test]
fn killing_the_supervisor_and_its_watchdog_together_still_ends_the_child() {
    let _alone = alone();
    let mut world = World::new();
    let mut a = world.start_run("a", &[]);
    let (first, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start")
        .unwrap_or_else(|| panic!("a never led:\n{}", world.stderr_of("a")));
    // The child's parent is the watchdog (as `pkill -9 fdb-leader` would, kill both).
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", first.pid)).unwrap();
    let watchdog: i32 = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
        .unwrap();
    assert_ne!(watchdog, crate::cli_support::pid_of(&a).as_raw());
    let start = Instant::now();
    nix::sys::signal::kill(Pid::from_raw(watchdog), Signal::SIGKILL).unwrap();
    signal(&a, Signal::SIGKILL);
    let gone = crate::cli_support::poll(PATIENCE, || (!running(first.pid)).then(Instant::now))
        .unwrap_or_else(|| panic!("the child outlived both"));
    eprintln!(
        "child gone {} ms after SIGKILL of the supervisor and the watchdog (parent-death signal)",
        (gone - start).as_millis()
    );
    assert!(gone - start < Duration::from_secs(1));
    assert!(wait_exit(&mut a, PATIENCE).is_some());
}

#[test]
fn sigterm_hands_over_within_one_second_without_overlap() {
    let _alone = alone();
    let mut world = World::new();
    let (mut a, mut b, first) = world.leader_and_follower(&[]);
    let start = Instant::now();
    signal(&a, Signal::SIGTERM);
    let (next, seen) = world.wait_led("b");
    let handover = seen - start;
    assert!(
        handover <= Duration::from_secs(1),
        "handover took {handover:?}"
    );
    eprintln!("handover after SIGTERM: {handover:?}");
    // The old child logged its stop before the new one started: no overlap.
    world.assert_handed_over(&first, &next, &mut a);

    signal(&b, Signal::SIGTERM);
    assert!(wait_exit(&mut b, PATIENCE).is_some_and(|s| s.success()));
}

#[test]
fn begin_and_end_commands_run_in_order_around_each_leadership() {
    let _alone = alone();
    let mut world = World::new();
    let hooks = world.logging_hooks();
    let hooks = hooks.each_ref().map(String::as_str);
    let (mut a, mut b, first) = world.leader_and_follower(&hooks);
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
    let (second, _) = world.wait_led("b");
    signal(&b, Signal::SIGTERM);
    assert!(wait_exit(&mut b, PATIENCE).is_some_and(|s| s.success()));

    let expected: Vec<String> = [(&first, "a"), (&second, "b")]
        .iter()
        .flat_map(|(e, _)| {
            let (id, ballot, pid) = (&e.id, e.ballot, e.pid);
            [
                format!("begin {id} {ballot} default"),
                format!("start {id} {ballot} {pid}"),
                format!("stop {id} {ballot} {pid}"),
                format!("end {id} {ballot} default"),
            ]
        })
        .collect();
    assert_eq!(world.log_lines(), expected);
}

#[test]
fn preemption_waits_for_the_old_child_to_stop() {
    let _alone = alone();
    let mut world = World::new();
    // a's child takes a second to stop after SIGTERM; b has a higher priority.
    let mut a = world.start_run_stopping_in("a", &[], "1");
    let (first, _) = world.wait_led("a");
    let mut b = world.start_run("b", &["--priority", "5"]);
    let (next, _) = world.wait_led("b");
    assert_eq!(next.ballot, first.ballot + 1);
    // The handover waited for a's child: its stop is logged before b's start.
    let events = world.events();
    let stop = events
        .iter()
        .position(|e| e.kind == "stop" && e.pid == first.pid);
    let start = events
        .iter()
        .position(|e| e.pid == next.pid && e.kind == "start");
    assert!(stop.is_some() && stop < start, "{:?}", world.log_lines());
    // a keeps campaigning as a follower, with no child.
    assert!(a.try_wait().unwrap().is_none());
    assert_eq!(world.active(), vec![next]);
    // A cooperative handover is routine: a logs it at INFO, and no warning about the child.
    let log = world.stderr_of("a");
    let handing = log
        .lines()
        .find(|l| l.contains("handing over: stopping the child"))
        .unwrap_or_else(|| panic!("no handover logged:\n{log}"));
    assert!(handing.contains("INFO"), "{handing}");
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("child")),
        "{log}"
    );

    signal(&b, Signal::SIGTERM);
    assert!(wait_exit(&mut b, PATIENCE).is_some_and(|s| s.success()));
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
}

#[test]
fn a_second_supervisor_of_one_name_is_warned_which_candidate_has_it() {
    let _alone = alone();
    let mut world = World::new();
    let mut first = world.start_run("a", &[]);
    let (led, _) = world.wait_led("a");
    // The same --name again, its output in files of another name.
    let mut command = world.command();
    command.args(["run", "--name", "a", "--", "sleep", "100"]);
    let mut second = world.start(command, "twin");
    let warned = crate::cli_support::poll(PATIENCE, || {
        let log = world.stderr_of("twin");
        log.lines()
            .find(|l| l.contains("WARN") && l.contains("a live candidate of the name a"))
            .map(str::to_owned)
    })
    .unwrap_or_else(|| panic!("no warning:\n{}", world.stderr_of("twin")));
    // It names the candidate already there, and says what to do.
    assert!(warned.contains(&led.id), "{warned}");
    assert!(warned.contains("give each its own --name"), "{warned}");
    // The first was not warned: it started alone.
    assert!(
        !world
            .stderr_of("a")
            .contains("a live candidate of the name")
    );
    signal(&second, Signal::SIGTERM);
    assert!(wait_exit(&mut second, PATIENCE).is_some());
    signal(&first, Signal::SIGTERM);
    assert!(wait_exit(&mut first, PATIENCE).is_some());
}
