//! `fdb-leader --cluster-file` on a real FoundationDB cluster, with real processes: every
//! subcommand (`run`, `status`, `watch`, `resign`, `force-vacate`, `config get|set`) held to
//! what the SQLite tests and the README show, and `shards` on a missing sharded election. The
//! cluster file comes from `FDB_CLUSTER_FILE`; each test works in an election of its own
//! (`--election cli-fdb-TEST-RANDOM`), so tests share one cluster safely. Without
//! `FDB_CLUSTER_FILE` each test prints `cli_fdb: SKIPPED: FDB_CLUSTER_FILE is not set` to
//! stderr (uncaptured, so that CI can fail a FoundationDB tier that ran nothing) and returns.
//!
//! The tests that measure wall-clock failover and handover run one at a time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation
)]

mod cli_support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use cli_support::{
    PATIENCE, Store, World, alone, assert_no_panic, bin,
    config_round_trip_and_the_stored_config_wins, is_label, ok, output_of, poll, signal,
    status_json, text, wait_exit, wait_live_candidates,
};
use nix::sys::signal::Signal;
use rand::{Rng, SeedableRng};
use serde_json::Value;

/// A world on an election of its own (`cli-fdb-TEST-RANDOM`) of the cluster named by
/// `FDB_CLUSTER_FILE`; `None`, after saying so on stderr, when it is not set.
fn world(test: &str) -> Option<World> {
    let Some(cluster_file) = std::env::var_os("FDB_CLUSTER_FILE").filter(|f| !f.is_empty()) else {
        // Straight to the process's stderr: libtest captures only the print macros.
        let _ = writeln!(
            std::io::stderr(),
            "cli_fdb: SKIPPED: FDB_CLUSTER_FILE is not set"
        );
        return None;
    };
    let random = rand::rngs::StdRng::from_os_rng().random::<u64>();
    let election = format!("cli-fdb-{test}-{random:016x}");
    Some(World::on_cluster(&PathBuf::from(cluster_file), &election).with_timing(LEASE, HEARTBEAT))
}

/// The runs' lease and heartbeat. Longer than the SQLite tests' 600 ms and 200 ms: with those,
/// each attempt gets 100 ms (half a heartbeat), and the one-process cluster, sharing this
/// loaded 2-core machine, missed that often enough to lapse a lease every few minutes; with
/// 250 ms per attempt it did not miss once.
const LEASE: &str = "1500ms";
const HEARTBEAT: &str = "500ms";
const LEASE_DUR: Duration = Duration::from_millis(1500);
const HEARTBEAT_DUR: Duration = Duration::from_millis(500);

/// `world(TEST)`, or return from the test.
macro_rules! world_or_skip {
    ($test:expr) => {
        match world($test) {
            Some(world) => world,
            None => return,
        }
    };
}

fn cluster_file(world: &World) -> PathBuf {
    match world.store() {
        Store::Cluster { cluster_file, .. } => cluster_file.clone(),
        Store::Sqlite => panic!("not a cluster world"),
    }
}

fn election(world: &World) -> String {
    match world.store() {
        Store::Cluster { election, .. } => election.clone(),
        Store::Sqlite => panic!("not a cluster world"),
    }
}

/// What a command answers for an election that does not exist.
fn no_election(world: &World) -> String {
    format!(
        "no election at the FoundationDB cluster of {} (name {})",
        cluster_file(world).display(),
        election(world)
    )
}

/// Runs `world.cli(args)` and asserts that it was refused with exit code 1 and a message
/// containing `expected`.
fn refused(world: &World, args: &[&str], expected: &str) {
    let out = world.cli(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains(expected), "{args:?}: {err}");
    assert_no_panic(&err);
}

/// A stored configuration with a long lease (3 s, heartbeat 1 s): long enough that "no wait
/// of a lease" and "a wait of a full lease" cannot be confused on a loaded machine.
const LONG_LEASE: Duration = Duration::from_secs(3);

fn store_long_lease(world: &World) {
    ok(
        world,
        &[
            "config",
            "set",
            "--lease",
            "3s",
            "--heartbeat",
            "1s",
            "--transaction-timeout",
            "500ms",
        ],
    );
}

/// The supervisor whose candidate is `id`, of `a` and `b` (started as `a` and `b`).
fn split(id: &str, a: Child, b: Child) -> (Child, Child) {
    if is_label(id, "a") { (a, b) } else { (b, a) }
}

#[test]
fn commands_on_a_missing_election_answer_no_election_and_create_nothing() {
    let world = world_or_skip!("missing");
    let expected = no_election(&world);
    refused(&world, &["status"], &expected);
    refused(&world, &["status", "--json"], &expected);
    refused(&world, &["watch", "--json"], &expected);
    refused(&world, &["config", "get"], &expected);
    refused(&world, &["resign", "--expected-ballot", "1"], &expected);
    refused(
        &world,
        &["force-vacate", "--expected-ballot", "1"],
        &expected,
    );
    // None of them created the election.
    refused(&world, &["config", "get", "--json"], &expected);
}

#[test]
fn shards_commands_on_a_missing_sharded_election_answer_no_sharded_election() {
    let world = world_or_skip!("shards-missing");
    let expected = format!(
        "no sharded election at the FoundationDB cluster of {} (name {name}, subspace \
         (\"fdb-leader\", {name:?}, \"shards\"))",
        cluster_file(&world).display(),
        name = election(&world)
    );
    refused(&world, &["shards", "status"], &expected);
    refused(&world, &["shards", "status", "--json"], &expected);
    refused(&world, &["shards", "freeze"], &expected);
    // Nothing was created.
    refused(&world, &["shards", "status"], &expected);
}

#[test]
fn run_starts_one_child_with_ballot_and_id_between_its_hooks() {
    let _alone = alone();
    let mut world = world_or_skip!("run");
    let hooks = world.logging_hooks();
    let hooks = hooks.each_ref().map(String::as_str);
    // Both at once, on an election that does not exist yet: both create it, one leads.
    let a = world.start_run("a", &hooks);
    let b = world.start_run("b", &hooks);
    let first = world.wait_first_leader();
    assert_eq!(first.ballot, 1, "a new election's first ballot");
    wait_live_candidates(&world, 2);
    // Two leases: one child all along, both campaigners alive.
    world.assert_one_child_for(&first, LEASE_DUR * 2);
    let (mut leader, mut follower) = split(&first.id, a, b);
    assert!(leader.try_wait().unwrap().is_none() && follower.try_wait().unwrap().is_none());
    // The child's FDB_LEADER_ID and FDB_LEADER_BALLOT are the election's.
    let status = status_json(&world).unwrap();
    assert_eq!(status["leader"], first.id.as_str());
    assert_eq!(status["ballot"], first.ballot);
    assert_eq!(status["lease_state"], "owned");

    let (leader_name, follower_name) = if is_label(&first.id, "a") {
        ("a", "b")
    } else {
        ("b", "a")
    };
    world.stop_cleanly(leader_name, &mut leader);
    let (second, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && e.pid != first.pid)
        .unwrap_or_else(|| panic!("no successor:\n{}", world.stderr_of(follower_name)));
    assert!(is_label(&second.id, follower_name), "{second:?}");
    assert_eq!(second.ballot, first.ballot + 1);
    world.stop_cleanly(follower_name, &mut follower);

    let name = election(&world);
    let expected: Vec<String> = [&first, &second]
        .iter()
        .flat_map(|e| {
            let (id, ballot, pid) = (&e.id, e.ballot, e.pid);
            [
                format!("begin {id} {ballot} {name}"),
                format!("start {id} {ballot} {pid}"),
                format!("stop {id} {ballot} {pid}"),
                format!("end {id} {ballot} {name}"),
            ]
        })
        .collect();
    assert_eq!(world.log_lines(), expected);
    assert!(world.running_pids().is_empty(), "{:?}", world.log_lines());
}

#[test]
fn sigkill_of_the_leader_kills_its_child_group_and_fails_over_after_the_lease() {
    let _alone = alone();
    let mut world = world_or_skip!("sigkill");
    // The children start a grandchild too: the whole group must go.
    let (mut a, mut b, first, grandchild) = world.leader_with_grandchild_and_standby();

    // Kill a right after one of its renewals: `before` is when the last status that still
    // saw the previous renewal started, so a's last renewal committed after `before`, and b
    // (which must see the record unchanged for a full lease) cannot lead before
    // `before + lease`.
    let mut before = Instant::now();
    let mut last = status_json(&world).unwrap()["renewal"].as_u64().unwrap();
    let kill_at = poll(PATIENCE, || {
        let asked = Instant::now();
        let status = status_json(&world)?;
        assert_eq!(status["leader"], first.id.as_str());
        let renewal = status["renewal"].as_u64()?;
        if renewal != last {
            signal(&a, Signal::SIGKILL);
            return Some(Instant::now());
        }
        (last, before) = (renewal, asked);
        None
    })
    .expect("a never renewed");

    let gone = world.assert_group_gone(&first, &grandchild, kill_at);

    let (next, seen) = world.wait_led("b");
    let failover = seen - kill_at;
    let bound = LEASE_DUR + HEARTBEAT_DUR + Duration::from_secs(1);
    eprintln!(
        "failover after SIGKILL: {failover:?} (bound {bound:?}); {:?} after the last status \
         that saw the previous renewal",
        seen - before
    );
    assert!(
        failover <= bound,
        "failover took {failover:?}, more than {bound:?}"
    );
    assert!(
        seen - before >= LEASE_DUR,
        "b led {:?} after a's last renewal, before a full lease",
        seen - before
    );
    // The successor's child started only after the old group was gone.
    assert!(
        seen > gone,
        "b's child started before a's child group was gone"
    );
    assert!(next.ballot > first.ballot, "{next:?} after {first:?}");
    assert!(wait_exit(&mut a, PATIENCE).is_some());
    assert_eq!(world.active(), vec![next.clone()]);
    let status = status_json(&world).unwrap();
    assert_eq!(status["leader"], next.id.as_str());
    assert_eq!(status["ballot"], next.ballot);

    world.stop_cleanly("b", &mut b);
    assert!(world.running_pids().is_empty(), "{:?}", world.log_lines());
}

#[test]
fn sigterm_stops_the_child_and_hands_over_without_a_lease_wait() {
    let _alone = alone();
    let mut world = world_or_skip!("sigterm");
    store_long_lease(&world);
    let (mut a, mut b, first) = world.leader_and_follower(&[]);

    let start = Instant::now();
    signal(&a, Signal::SIGTERM);
    let (next, seen) = world.wait_led("b");
    let handover = seen - start;
    eprintln!("handover after SIGTERM: {handover:?} (lease {LONG_LEASE:?})");
    let bound = LONG_LEASE / 2;
    assert!(
        handover < bound,
        "handover took {handover:?}: a lease wait (lease {LONG_LEASE:?})"
    );
    // The old child logged its stop before the new one started: no overlap.
    world.assert_handed_over(&first, &next, &mut a);
    // a resigned and unregistered: b leads alone.
    let status = poll(PATIENCE, || {
        let s = status_json(&world)?;
        (s["candidates"].as_array()?.len() == 1).then_some(s)
    })
    .expect("a unregistered");
    assert_eq!(status["leader"], next.id.as_str());

    world.stop_cleanly("b", &mut b);
    assert!(world.running_pids().is_empty(), "{:?}", world.log_lines());
}

#[test]
fn status_shows_leader_ballot_lease_state_candidates_and_config() {
    let mut world = world_or_skip!("status");
    ok(&world, &["config", "set", "--preemption", "on"]);
    // Another election of the same cluster does not exist.
    let other = format!("{}-other", election(&world));
    let mut command = Command::new(bin());
    command
        .arg("--cluster-file")
        .arg(cluster_file(&world))
        .args(["--election", &other, "status", "--json"]);
    let out = output_of(command);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let expected = format!(
        "no election at the FoundationDB cluster of {} (name {other})",
        cluster_file(&world).display()
    );
    assert!(
        text(&out.stderr).contains(&expected),
        "{}",
        text(&out.stderr)
    );

    let (mut a, mut b, leader, status) = world.priority_5_leader_and_follower();

    assert_eq!(status["election"], election(&world).as_str());
    assert_eq!(
        status["store"],
        format!("foundationdb {}", cluster_file(&world).display()).as_str()
    );
    assert_eq!(status["leader"], leader.id.as_str());
    assert_eq!(status["leader_priority"], 5);
    assert_eq!(status["ballot"], leader.ballot);
    assert_eq!(status["lease_state"], "owned");
    assert!(status["renewal"].as_u64().is_some(), "{status}");
    assert_eq!(status["lease_ms"], 10_000);
    assert_eq!(status["handover_requested_by"], Value::Null);
    assert_eq!(status["operator_request"], Value::Null);
    assert_eq!(status["reserved_for"], Value::Null);
    assert_eq!(status["operator_hold"], Value::Null);
    assert_eq!(status["payload"], "10.0.0.1:7000");
    assert_eq!(status["payload_hex"], "31302e302e302e313a37303030");
    assert!(
        status["renewals_before_dead"].as_u64().is_some(),
        "{status}"
    );
    // `config set` created the election with the defaults; `run --lease 1500ms` joined it.
    assert_eq!(status["config"]["lease_ms"], 10_000);
    assert_eq!(status["config"]["preemption"], true);
    let candidates = status["candidates"].as_array().expect("candidates array");
    assert_eq!(candidates.len(), 2);
    let mut seen: Vec<(String, i64, bool)> = candidates
        .iter()
        .map(|c| {
            for field in ["heartbeat", "seen_renewal", "renewal_lag", "registration"] {
                assert!(c[field].as_u64().is_some(), "{field}: {c}");
            }
            assert_eq!(c["live"], true, "{c}");
            (
                c["id"].as_str().unwrap().to_owned(),
                c["priority"].as_i64().unwrap(),
                c["leader"].as_bool().unwrap(),
            )
        })
        .collect();
    seen.sort_by_key(|(_, p, _)| -p);
    assert_eq!(seen[0], (leader.id.clone(), 5, true));
    assert!(
        is_label(&seen[1].0, "b") && seen[1].1 == 1 && !seen[1].2,
        "{seen:?}"
    );

    // `run --try` finds the leadership taken: exit 5, nothing changed.
    let child = world.path("child.sh");
    let log = world.log();
    let out = world.cli(&[
        "run",
        "--try",
        "--name",
        "c",
        "--",
        "sh",
        child.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(
        err.contains(&format!("not elected (--try): {} leads", leader.id)),
        "{err}"
    );
    let ids = |s: &Value| -> Vec<String> {
        let mut ids: Vec<String> = s["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let after = status_json(&world).unwrap();
    assert_eq!(ids(&after), ids(&status), "--try left a registration");
    assert_eq!(after["ballot"], status["ballot"]);

    // The text form says the same.
    let shown = ok(&world, &["status"]);
    for line in [
        format!(
            "election   {} (foundationdb {})",
            election(&world),
            cluster_file(&world).display()
        ),
        format!("leader     {} (priority 5)", leader.id),
        format!("ballot     {}", leader.ballot),
        "lease      owned, renewal ".to_owned(),
        "payload    10.0.0.1:7000".to_owned(),
        "config     lease 10s, heartbeat 3s".to_owned(),
        "candidates (2)".to_owned(),
    ] {
        assert!(shown.contains(&line), "{line:?} not in:\n{shown}");
    }
    let row = shown
        .lines()
        .find(|l| l.contains(&leader.id) && l.ends_with("leader"))
        .unwrap_or_else(|| panic!("no candidate row for the leader:\n{shown}"));
    assert!(row.contains(" 5 ") && row.contains(" yes "), "{row}");

    world.stop_cleanly("b", &mut b);
    world.stop_cleanly("a", &mut a);
    // Both left: no leader, the ballot kept, no candidates.
    let status = status_json(&world).unwrap();
    assert_eq!(status["leader"], Value::Null);
    assert!(status["ballot"].as_u64().unwrap() >= leader.ballot);
    assert_eq!(status["candidates"], Value::Array(vec![]));
}

/// Waits for the `n`-th line (from 1) of `watch`'s stdout, parsed.
fn watch_line(world: &World, n: usize, what: &str) -> Value {
    let lines = poll(PATIENCE, || {
        let lines = world.stdout_lines("watch");
        (lines.len() >= n).then_some(lines)
    })
    .unwrap_or_else(|| {
        panic!(
            "no watch line for {what}: {:?}\n{}",
            world.stdout_lines("watch"),
            world.stderr_of("watch")
        )
    });
    let line = &lines[n - 1];
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

#[test]
fn watch_waits_for_the_election_and_prints_one_line_per_leader_change() {
    let mut world = world_or_skip!("watch");
    // Started before the election exists: --wait waits for it, creating nothing.
    let mut command = world.command();
    command.args(["watch", "--json", "--wait"]);
    let mut watch = world.start(command, "watch");
    poll(PATIENCE, || {
        world
            .stderr_of("watch")
            .contains("no such election yet")
            .then_some(())
    })
    .unwrap_or_else(|| panic!("watch --wait did not wait:\n{}", world.stderr_of("watch")));
    assert!(watch.try_wait().unwrap().is_none(), "watch --wait gave up");
    refused(&world, &["status"], &no_election(&world));

    let mut a = world.start_run("a", &[]);
    let elected = watch_line(&world, 1, "a's election");
    let (first, _) = world.wait_event(PATIENCE, |e| e.kind == "start").unwrap();
    assert_eq!(elected["leader"], first.id.as_str());
    assert_eq!(elected["ballot"], first.ballot);
    assert_eq!(elected["previous_leader"], Value::Null);
    assert!(elected["time"].as_str().is_some_and(|t| t.ends_with('Z')));

    signal(&a, Signal::SIGTERM);
    let gone = watch_line(&world, 2, "a's resignation");
    assert_eq!(gone["leader"], Value::Null);
    assert_eq!(gone["reason"], "stepped_down");
    assert_eq!(gone["previous_leader"], first.id.as_str());
    assert_eq!(gone["previous_ballot"], first.ballot);
    assert!(wait_exit(&mut a, PATIENCE).is_some_and(|s| s.success()));

    let mut b = world.start_run("b", &["--payload", "host-b"]);
    let second = watch_line(&world, 3, "b's election");
    assert!(
        is_label(second["leader"].as_str().unwrap(), "b"),
        "{second}"
    );
    assert!(second["ballot"].as_u64().unwrap() > first.ballot);
    assert_eq!(second["payload"], "host-b");
    let (b_child, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, "b"))
        .unwrap();
    assert_eq!(second["ballot"], b_child.ballot);

    // An operator's force-vacate: one line, naming the operator.
    let ballot = b_child.ballot.to_string();
    ok(&world, &["force-vacate", "--expected-ballot", &ballot]);
    let forced = watch_line(&world, 4, "the force-vacate");
    assert_eq!(forced["reason"], "forced_vacant", "{forced}");
    assert_eq!(forced["leader"], Value::Null);
    assert!(
        forced["operator"]
            .as_str()
            .is_some_and(|o| is_label(o, "operator")),
        "{forced}"
    );
    assert_eq!(forced["previous_leader"], second["leader"]);
    // After the held lease, b leads again with a new ballot.
    let again = watch_line(&world, 5, "b's second election");
    assert_eq!(again["leader"], second["leader"]);
    assert!(
        again["ballot"].as_u64().unwrap() > b_child.ballot + 1,
        "{again}"
    );
    world.stop_cleanly("b", &mut b);
    let last = watch_line(&world, 6, "b's resignation");
    assert_eq!(last["reason"], "stepped_down");

    signal(&watch, Signal::SIGINT);
    let status = wait_exit(&mut watch, PATIENCE).expect("watch exits");
    assert!(
        status.success(),
        "watch exited with {status:?}:\n{}",
        world.stderr_of("watch")
    );
    // One line per change, nothing else.
    assert_eq!(
        world.stdout_lines("watch").len(),
        6,
        "{:?}",
        world.stdout_lines("watch")
    );
}

#[test]
fn resign_and_force_vacate_move_the_ballot_or_are_rejected() {
    let _alone = alone();
    let mut world = world_or_skip!("operator");
    store_long_lease(&world);
    let a = world.start_run("a", &[]);
    let (first, _) = world.wait_led("a");
    assert_eq!(first.ballot, 1);
    let b = world.start_run("b", &[]);
    wait_live_candidates(&world, 2);

    // A stale ballot: rejected, nothing changes.
    for command in ["resign", "force-vacate"] {
        refused(
            &world,
            &[command, "--expected-ballot", "7"],
            "rejected: the election is at ballot 1, not 7",
        );
    }
    assert_eq!(world.active(), vec![first.clone()]);

    // resign: the leader stops its child and steps down, reserving the leadership for the
    // best live candidate, b, which takes over in one commit (no lease wait).
    let asked = Instant::now();
    let said = ok(&world, &["resign", "--expected-ballot", "1"]);
    assert!(said.contains("resign requested"), "{said}");
    let (second, seen) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && e.ballot == 2)
        .unwrap_or_else(|| panic!("nobody led with ballot 2:\n{}", world.stderr_of("b")));
    assert!(is_label(&second.id, "b"), "{second:?}");
    assert!(
        seen - asked < LONG_LEASE / 2,
        "the resign took {:?}",
        seen - asked
    );
    world.assert_stop_precedes(&first, &second);

    // force-vacate: fences ballot 2 out (the ballot becomes 3, held for the operator); no
    // candidate leads before a full lease of no change; then the next leader gets ballot 4.
    let asked = Instant::now();
    let said = ok(&world, &["force-vacate", "--expected-ballot", "2"]);
    assert!(said.contains("the election is at ballot 3"), "{said}");
    let status = status_json(&world).unwrap();
    assert_eq!(status["lease_state"], "held", "{status}");
    assert_eq!(status["leader"], Value::Null);
    assert_eq!(status["ballot"], 3);
    assert!(
        status["operator_hold"]
            .as_str()
            .is_some_and(|o| is_label(o, "operator")),
        "{status}"
    );
    // Nobody holds ballot 3: a resign of it is rejected.
    refused(
        &world,
        &["resign", "--expected-ballot", "3"],
        "rejected: no leader holds the ballot",
    );
    let (fourth, seen) = world.stopped_then_led(&second, 4);
    assert!(
        seen - asked >= LONG_LEASE,
        "ballot 4 led {:?} after the force-vacate, before a full lease",
        seen - asked
    );
    refused(
        &world,
        &["force-vacate", "--expected-ballot", "2"],
        "rejected: the election is at ballot 4, not 2",
    );

    // With preemption off, an operator's resign request is still honoured (it is no
    // preemption): the leader of ballot 4 steps down, the other leads with ballot 5.
    ok(&world, &["config", "set", "--preemption", "off"]);
    ok(&world, &["resign", "--expected-ballot", "4"]);
    let (fifth, _) = world.stopped_then_led(&fourth, 5);
    assert_ne!(fifth.id, fourth.id, "the resign handed over to the other");
    assert_eq!(world.active(), vec![fifth.clone()]);

    let (mut leader, mut follower) = split(&fifth.id, a, b);
    let (leader_name, follower_name) = if is_label(&fifth.id, "a") {
        ("a", "b")
    } else {
        ("b", "a")
    };
    world.stop_cleanly(follower_name, &mut follower);
    world.stop_cleanly(leader_name, &mut leader);
    assert!(world.running_pids().is_empty(), "{:?}", world.log_lines());
}

#[test]
fn config_set_and_get_round_trip_and_the_stored_config_wins() {
    let mut world = world_or_skip!("config");
    config_round_trip_and_the_stored_config_wins(&mut world);
}

#[test]
fn run_and_watch_wait_out_an_unreachable_cluster_until_a_signal() {
    let real = world_or_skip!("unreachable");
    // A cluster file whose only coordinator does not answer (a loopback port just freed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dir = tempfile::tempdir().expect("temp dir");
    let dead = dir.path().join("fdb.cluster");
    std::fs::write(&dead, format!("dead:unreachable@127.0.0.1:{port}\n")).unwrap();
    let mut world = World::on_cluster(&dead, &election(&real));
    let mut a = world.start_run("a", &[]);
    let mut command = world.command();
    command.args(["watch", "--json", "--wait"]);
    let mut watch = world.start(command, "watch");

    // An unreachable cluster is a passing failure: both keep trying, past the 15 s for which a
    // one-shot command (status, config, ...) retries before it gives up with exit 3.
    let until = Instant::now() + Duration::from_secs(18);
    while Instant::now() < until {
        for (name, child) in [("a", &mut a), ("watch", &mut watch)] {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "{name} gave up on the unreachable cluster with {status:?}:\n{}",
                    world.stderr_of(name)
                );
            }
        }
        thread::sleep(Duration::from_millis(100));
    }
    assert!(world.events().is_empty(), "{:?}", world.log_lines());

    // A signal ends the wait at once, cleanly.
    let asked = Instant::now();
    signal(&a, Signal::SIGTERM);
    signal(&watch, Signal::SIGINT);
    for (name, child) in [("a", &mut a), ("watch", &mut watch)] {
        let status = wait_exit(child, PATIENCE).unwrap_or_else(|| panic!("{name} did not exit"));
        assert!(
            status.success(),
            "{name} exited with {status:?}:\n{}",
            world.stderr_of(name)
        );
        assert_no_panic(&world.stderr_of(name));
    }
    let took = asked.elapsed();
    eprintln!("stopped {took:?} after the signals");
    assert!(took < Duration::from_secs(2), "stopping took {took:?}");
    assert!(world.stdout_lines("watch").is_empty());
}

#[test]
fn a_missing_cluster_file_is_a_store_error_that_names_it() {
    let real = world_or_skip!("no-cluster-file");
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-such-dir").join("fdb.cluster");
    let world = World::on_cluster(&missing, &election(&real));
    let child = world.path("child.sh");
    let child = child.to_str().unwrap();
    for args in [
        &["status"][..],
        &["config", "get"],
        &["config", "set", "--preemption", "off"],
        &["resign", "--expected-ballot", "1"],
        &["watch", "--wait"],
        &["run", "--name", "a", "--", "sh", child, "/dev/null"],
    ] {
        let out = world.cli(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "cannot open the FoundationDB cluster file {}",
                missing.display()
            )),
            "{args:?}: {err}"
        );
        assert_no_panic(&err);
    }
    assert!(!missing.exists() && !missing.parent().unwrap().exists());
}
