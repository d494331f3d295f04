//! `fdb-leader run` with real processes on one SQLite file: exactly one child runs; a leader
//! killed with SIGKILL takes its child's whole process group with it within a second, and is
//! replaced within lease + heartbeat + 1 s with a higher ballot, after that; SIGTERM
//! hands over within 1 s with no overlap; begin/end commands run in order around each
//! leadership; a higher-priority candidate takes over only after the old child has stopped.
//!
//! These tests measure wall-clock failover, so they run one at a time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

mod cli_support;

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use cli_support::{
    Event, HEARTBEAT_DUR, LEASE_DUR, PATIENCE, World, is_label, running, signal, wait_exit,
    wait_live_candidates,
};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// One timing-sensitive test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts `a`, waits for its child, then starts `b` and waits until both are live candidates.
fn leader_and_follower(
    world: &mut World,
    extra: &[&str],
) -> (std::process::Child, std::process::Child, Event) {
    let a = world.start_run("a", extra);
    let (started, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, "a"))
        .unwrap_or_else(|| panic!("a never led:\n{}", world.stderr_of("a")));
    let b = world.start_run("b", extra);
    wait_live_candidates(world, 2);
    (a, b, started)
}

#[test]
fn two_runs_on_one_file_run_exactly_one_child() {
    let _serial = serial();
    let mut world = World::new();
    // Both at once, on a file that does not exist yet: both create it, one leads.
    let mut a = world.start_run("a", &[]);
    let mut b = world.start_run("b", &[]);
    let (first, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start")
        .unwrap_or_else(|| {
            panic!(
                "nobody led:\n{}\n{}",
                world.stderr_of("a"),
                world.stderr_of("b")
            )
        });
    wait_live_candidates(&world, 2);
    // Watch for three leases: one child all along, both campaigners alive.
    let until = Instant::now() + LEASE_DUR * 3;
    while Instant::now() < until {
        let active = world.active();
        assert_eq!(active.len(), 1, "children running: {active:?}");
        assert_eq!(active[0].pid, first.pid);
        thread::sleep(Duration::from_millis(25));
    }
    assert!(a.try_wait().unwrap().is_none() && b.try_wait().unwrap().is_none());
    assert_eq!(world.events().len(), 1, "{:?}", world.log_lines());
    let status = cli_support::status_json(&world).unwrap();
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
    let _serial = serial();
    let mut world = World::new();
    // The children start a grandchild too: the whole group must go.
    let env = [("GRANDCHILD", "1")];
    let mut a = world.start_run_with("a", &[], "0", &env);
    let (first, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, "a"))
        .unwrap_or_else(|| panic!("a never led:\n{}", world.stderr_of("a")));
    let mut b = world.start_run_with("b", &[], "0", &env);
    wait_live_candidates(&world, 2);
    let grandchild = world
        .events()
        .into_iter()
        .find(|e| e.kind == "grandchild" && e.id == first.id)
        .expect("a's child started a grandchild");
    assert!(running(first.pid) && running(grandchild.pid));

    // SIGKILL the supervisor only: nothing else is killed by the test.
    let start = Instant::now();
    signal(&a, Signal::SIGKILL);
    let gone = cli_support::poll(PATIENCE, || {
        (!running(first.pid) && !running(grandchild.pid)).then(Instant::now)
    })
    .unwrap_or_else(|| panic!("a's child group outlived it: {:?}", world.log_lines()));
    let orphan_gone = gone - start;
    eprintln!(
        "orphans gone {} ms after SIGKILL of the supervisor",
        orphan_gone.as_millis()
    );
    assert!(
        orphan_gone < Duration::from_secs(1),
        "the child group was gone only after {orphan_gone:?}"
    );

    let (next, seen) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, "b"))
        .unwrap_or_else(|| panic!("b never took over:\n{}", world.stderr_of("b")));
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
    let _serial = serial();
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
    assert_ne!(watchdog, cli_support::pid_of(&a).as_raw());
    let start = Instant::now();
    nix::sys::signal::kill(Pid::from_raw(watchdog), Signal::SIGKILL).unwrap();
    signal(&a, Signal::SIGKILL);
    let gone = cli_support::poll(PATIENCE, || (!running(first.pid)).then(Instant::now))
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
    let _serial = serial();
    let mut world = World::new();
    let (mut a, mut b, first) = leader_and_follower(&mut world, &[]);
    let start = Instant::now();
    signal(&a, Signal::SIGTERM);
    let (next, seen) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, "b"))
        .unwrap_or_else(|| panic!("b never took over:\n{}", world.stderr_of("b")));
    let handover = seen - start;
    assert!(
        handover <= Duration::from_secs(1),
        "handover took {handover:?}"
    );
    eprintln!("handover after SIGTERM: {handover:?}");
    assert_eq!(next.ballot, first.ballot + 1, "one handover, one ballot");
    // The old child logged its stop before the new one started: no overlap.
    let events = world.events();
    let stop = events
        .iter()
        .position(|e| e.kind == "stop" && e.pid == first.pid);
    let new = events.iter().position(|e| e.pid == next.pid);
    assert!(stop.is_some() && stop < new, "{:?}", world.log_lines());
    let status = wait_exit(&mut a, PATIENCE).expect("a exits");
    assert!(
        status.success(),
        "a exited with {status:?}:\n{}",
        world.stderr_of("a")
    );

    signal(&b, Signal::SIGTERM);
    assert!(wait_exit(&mut b, PATIENCE).is_some_and(|s| s.success()));
}

#[test]
fn begin_and_end_commands_run_in_order_around_each_leadership() {
    let _serial = serial();
    let mut world = World::new();
    let log = world.log();
    let log = log.to_str().unwrap();
    let begin = format!(
        "echo \"begin $FDB_LEADER_ID $FDB_LEADER_BALLOT $FDB_LEADER_ELECTION_NAME\" >> {log}"
    );
    let end = format!(
        "echo \"end $FDB_LEADER_ID $FDB_LEADER_BALLOT $FDB_LEADER_ELECTION_NAME\" >> {log}"
    );
    let hooks = ["--begin-command", &begin, "--end-command", &end];
    let (mut a, mut b, first) = leader_and_follower(&mut world, &hooks);
    signal(&a, Signal::SIGTERM);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));
    let (second, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, "b"))
        .expect("b leads");
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
    let _serial = serial();
    let mut world = World::new();
    // a's child takes a second to stop after SIGTERM; b has a higher priority.
    let mut a = world.start_run_stopping_in("a", &[], "1");
    let (first, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, "a"))
        .unwrap_or_else(|| panic!("a never led:\n{}", world.stderr_of("a")));
    let mut b = world.start_run("b", &["--priority", "5"]);
    let (next, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, "b"))
        .unwrap_or_else(|| panic!("b never took over:\n{}", world.stderr_of("b")));
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
    let _serial = serial();
    let mut world = World::new();
    let mut first = world.start_run("a", &[]);
    let (led, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, "a"))
        .unwrap_or_else(|| panic!("a never led:\n{}", world.stderr_of("a")));
    // The same --name again, its output in files of another name.
    let mut command = world.command();
    command.args(["run", "--name", "a", "--", "sleep", "100"]);
    let mut second = world.start(command, "twin");
    let warned = cli_support::poll(PATIENCE, || {
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
