//! `fdb-leader run --shards M`: one child per owned shard, as real processes on one SQLite
//! file (as in `supervise.rs` and `watchdog.rs`). Two supervisors spread four shards
//! 2/2 and each child sees its shard, its ballot and the member; a `kill -9` of a supervisor
//! takes its children with it within milliseconds and the other supervisor starts children for
//! those shards with higher ballots; SIGTERM hands every shard over without a lease's wait;
//! a shard moves (a member joins, `shards drain`) only once its child has stopped politely;
//! a supervisor stopped alone has its children killed at their shards' deadline; a child that
//! exits is restarted, or ends the run; bad input is refused before anything is created.
//!
//! The children themselves check "never two live children for one shard": before it logs its
//! start, a child looks up every earlier child of its shard in the log and logs an `overlap`
//! line for each one still running. The helpers live in `run_shards_support/`.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cli_support::{
    PATIENCE, alone, bin, is_label, output_of, pid_of, poll, running, signal,
};
use crate::run_shards_support::{
    Line, Shards, all_gone, assert_ballots_grow, assert_stopped_first,
};
use nix::sys::signal::{Signal, kill};
use serde_json::Value;

/// How much later than its supervisor's `kill -9` a child may die (the watchdogs act within
/// milliseconds; the rest is a loaded machine's scheduling).
const DEATH_BOUND: Duration = Duration::from_secs(1);

/// How much later than the lease (from a supervisor's SIGSTOP) its children may die.
const KILL_BOUND: Duration = Duration::from_millis(1500);

#[test]
fn two_supervisors_spread_the_shards_and_a_killed_ones_children_die_and_move() {
    let mut s = Shards::new("600ms", "200ms");
    let mut a = s.start("a", &["--shards", "4"], &["0.5"]);
    let first = s.wait_spread(PATIENCE, &[("a", 4)]);
    // Each child sees its shard, its ballot, the member, the shard count and the election.
    let a_id = first[0].id.clone();
    for line in &first {
        assert_eq!(
            (line.shards.as_str(), line.election.as_str()),
            ("4", "jobs")
        );
        assert_eq!(line.id, a_id);
    }
    let mut b = s.start("b", &["--shards", "4"], &["0.5"]);
    let spread = s.wait_spread(PATIENCE, &[("a", 2), ("b", 2)]);
    let owners = s.owners();
    for line in &spread {
        assert_eq!(
            owners.get(&line.shard),
            Some(&(line.id.clone(), line.ballot)),
            "the child of shard {} runs as its owner, with its ballot",
            line.shard
        );
    }
    let moved: Vec<&Line> = spread.iter().filter(|l| is_label(&l.id, "b")).collect();
    assert!(moved.iter().all(|l| l.ballot == 2), "{moved:?}");
    assert_stopped_first(&s.lines(), &moved);
    // `status` of a name whose only election is sharded shows its placement.
    let status = s.cli(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success() && text.starts_with("sharded election  jobs"),
        "{text}"
    );
    assert!(
        text.contains(&a_id) && text.contains(&moved[0].id),
        "{text}"
    );

    // kill -9 of a: its children die at once (their watchdogs), b starts children for its
    // shards with higher ballots once the coordinator has fenced a out (about a lease).
    let a_children: Vec<&Line> = spread.iter().filter(|l| l.id == a_id).collect();
    let killed = Instant::now();
    kill(pid_of(&a), Signal::SIGKILL).expect("kill -9");
    let pids: Vec<i32> = a_children.iter().map(|l| l.pid).collect();
    let died = all_gone(&pids, killed, DEATH_BOUND).unwrap_or_else(|| {
        panic!(
            "a's children still run {:?} after kill -9 of a",
            killed.elapsed()
        )
    });
    let _ = a.wait();
    let all_b = s.wait_spread(PATIENCE, &[("b", 4)]);
    let took_over = killed.elapsed();
    eprintln!(
        "figures: a's {} children gone {died:?} after kill -9 of a; b runs all 4 shards {took_over:?} after it (lease 600ms)",
        a_children.len()
    );
    for line in &a_children {
        let next = all_b
            .iter()
            .find(|l| l.shard == line.shard)
            .expect("taken over");
        assert!(next.ballot > line.ballot, "{next:?} after {line:?}");
    }
    assert!(s.overlaps().is_empty(), "{:?}", s.overlaps());
    assert_ballots_grow(&s.lines());
    s.stop_all(&mut [("b", &mut b)]);
}

#[test]
fn sigterm_stops_the_children_and_hands_every_shard_over_without_a_lease() {
    // A long lease: a handover that waited for it would take 3 s.
    let mut s = Shards::new("3s", "1s");
    let (mut a, mut b, spread) = s.two_spread(&["0.2"]);
    let a_children: Vec<Line> = spread
        .into_iter()
        .filter(|l| is_label(&l.id, "a"))
        .collect();
    let asked = Instant::now();
    s.world.stop_cleanly("a", &mut a);
    let exited = asked.elapsed();
    let all_b = s.wait_spread(PATIENCE, &[("b", 4)]);
    let handed = asked.elapsed();
    eprintln!(
        "figures: a exited 0 {exited:?} after SIGTERM (children take 200ms to stop); b runs all 4 shards {handed:?} after it (lease 3s)"
    );
    assert!(
        handed < Duration::from_millis(2500),
        "the shards waited for a lease: {handed:?}"
    );
    // a's children were stopped politely (they logged it) before b's started.
    let lines = s.lines();
    for child in &a_children {
        assert!(
            lines.iter().any(|l| l.kind == "stop" && l.pid == child.pid),
            "{child:?} did not log its stop"
        );
    }
    let moved: Vec<&Line> = all_b
        .iter()
        .filter(|l| a_children.iter().any(|c| c.shard == l.shard))
        .collect();
    assert_eq!(moved.len(), 2, "{moved:?}");
    assert_stopped_first(&lines, &moved);
    assert!(s.overlaps().is_empty(), "{:?}", s.overlaps());
    assert_ballots_grow(&lines);
    // a left: its record is fenced, or already forgotten (no shard names it).
    let status = s.shards_status();
    let a_member = status["members"]
        .as_array()
        .expect("members")
        .iter()
        .find(|m| is_label(m["id"].as_str().unwrap_or(""), "a"))
        .cloned();
    assert!(
        a_member
            .as_ref()
            .is_none_or(|m| m["fenced"] == Value::Bool(true)),
        "a left: {a_member:?}"
    );
    s.stop_all(&mut [("b", &mut b)]);
}

#[test]
fn a_drained_members_children_stop_before_their_shards_move() {
    let mut s = Shards::new("600ms", "200ms");
    // Children that take half a second to stop: a move that did not wait for them would start
    // the next owner's child beside them (its overlap check would log it).
    let (mut a, mut b, spread) = s.two_spread(&["0.5"]);
    let a_id = spread
        .iter()
        .find(|l| is_label(&l.id, "a"))
        .map(|l| l.id.clone())
        .expect("a's child");
    let drained = s.cli(&["shards", "drain", "--member", &a_id]);
    assert!(
        drained.status.success(),
        "{}",
        String::from_utf8_lossy(&drained.stderr)
    );
    let moved = s.wait_spread(PATIENCE, &[("b", 4)]);
    let lines = s.lines();
    let a_shards: BTreeSet<u32> = spread
        .iter()
        .filter(|l| l.id == a_id)
        .map(|l| l.shard)
        .collect();
    assert_eq!(a_shards.len(), 2);
    let moved: Vec<&Line> = moved
        .iter()
        .filter(|l| a_shards.contains(&l.shard))
        .collect();
    assert_eq!(moved.len(), 2, "{moved:?}");
    assert_stopped_first(&lines, &moved);
    assert!(s.overlaps().is_empty(), "{:?}", s.overlaps());
    // The moves are routine (issue 32): a logs each at INFO, never a warning about a child,
    // and no log line shows the election's key bytes instead of its name.
    let log = s.world.stderr_of("a");
    assert!(
        log.lines()
            .any(|l| l.contains("INFO") && l.contains("shard moving: stopping the child")),
        "{log}"
    );
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("child")),
        "{log}"
    );
    assert!(!log.contains("\\x"), "{log}");
    assert!(log.contains("election{election=jobs coordinator "), "{log}");
    // Drained, a runs no child but stays a member; undrained, it takes its share again.
    let undrained = s.cli(&["shards", "undrain", "--member", &a_id]);
    assert!(undrained.status.success());
    s.wait_spread(PATIENCE, &[("a", 2), ("b", 2)]);
    assert!(s.overlaps().is_empty(), "{:?}", s.overlaps());
    assert_ballots_grow(&s.lines());
    s.stop_all(&mut [("a", &mut a), ("b", &mut b)]);
}

#[test]
fn a_supervisor_stopped_alone_has_its_children_killed_at_their_deadline() {
    let mut s = Shards::new("600ms", "200ms");
    let (mut a, mut b, spread) = s.two_spread(&[]);
    let a_children: Vec<Line> = spread
        .into_iter()
        .filter(|l| is_label(&l.id, "a"))
        .collect();
    // The lease the watchdogs hold follows the renewals: the children outlive many leases.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(a_children.iter().all(|l| running(l.pid)));
    let stopped = Instant::now();
    signal(&a, Signal::SIGSTOP);
    let pids: Vec<i32> = a_children.iter().map(|l| l.pid).collect();
    let died = all_gone(&pids, stopped, Duration::from_millis(600) + KILL_BOUND);
    let died = died.unwrap_or_else(|| {
        panic!(
            "a's children still run {:?} after SIGSTOP of a",
            stopped.elapsed()
        )
    });
    // b takes a's shards over once its coordinator has fenced a out (a stays stopped: once
    // continued, a might renew first and own them again at higher ballots).
    s.wait_spread(PATIENCE, &[("b", 4)]);
    let took_over = stopped.elapsed();
    let _ = kill(pid_of(&a), Signal::SIGCONT);
    eprintln!(
        "figures: a's children killed {died:?} after SIGSTOP of a; b runs all 4 shards \
         {took_over:?} after it (lease 600ms)"
    );
    let lines = s.lines();
    // Killed by their watchdogs (SIGKILL, no grace): no stop logged.
    for child in &a_children {
        assert!(!lines.iter().any(|l| l.kind == "stop" && l.pid == child.pid));
    }
    assert!(s.overlaps().is_empty(), "{:?}", s.overlaps());
    assert_ballots_grow(&lines);
    s.stop_all(&mut [("a", &mut a), ("b", &mut b)]);
}

#[test]
fn a_member_that_cannot_renew_has_its_children_killed_at_its_deadline() {
    let mut s = Shards::new("600ms", "200ms");
    let mut a = s.start("a", &["--shards", "2"], &[]);
    let first = s.wait_spread(PATIENCE, &[("a", 2)]);
    // Another connection holds the store's write lock: every renewal of a fails (busy), while
    // a itself runs on.
    let lock = rusqlite::Connection::open(s.world.db()).expect("open the store");
    lock.busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    lock.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    let locked = Instant::now();
    let pids: Vec<i32> = first.iter().map(|l| l.pid).collect();
    let died = all_gone(&pids, locked, Duration::from_millis(600) + KILL_BOUND);
    lock.execute_batch("ROLLBACK").expect("unlock");
    drop(lock);
    let died = died.unwrap_or_else(|| {
        panic!(
            "a's children still run {:?} after its store was locked",
            locked.elapsed()
        )
    });
    eprintln!(
        "figures: a's children killed {died:?} after its renewals began to fail (lease 600ms)"
    );
    // No grace once the lease has ended: killed, no stop logged.
    let lines = s.lines();
    assert!(!lines.iter().any(|l| l.kind == "stop"), "{lines:?}");
    // Renewing again, a owns its shards and runs new children: at the same ballots when a
    // renewal that was in flight during the lock lands late and extends the same ownership,
    // at higher ones after a join at a new epoch.
    let again = s.wait_spread(PATIENCE, &[("a", 2)]);
    let ballots = |lines: &[Line]| {
        lines
            .iter()
            .map(|l| (l.shard, l.ballot))
            .collect::<Vec<_>>()
    };
    eprintln!(
        "figures: a runs its shards again {:?} after the lock (ballots {:?}, before {:?})",
        locked.elapsed(),
        ballots(&again),
        ballots(&first)
    );
    for line in &again {
        let before = first.iter().find(|l| l.shard == line.shard).expect("shard");
        assert!(line.ballot >= before.ballot, "{line:?} after {before:?}");
        assert_ne!(line.pid, before.pid);
    }
    assert_ballots_grow(&s.lines());
    assert!(s.overlaps().is_empty(), "{:?}", s.overlaps());
    s.world.stop_cleanly("a", &mut a);
}

#[test]
fn a_child_that_exits_is_restarted_or_ends_the_run() {
    // The default: the child of shard 1 exits 7 and is restarted (same ballot) after 1 s.
    // Leases of 2 s: the member must keep its shard's lease through the restart's second,
    // which 600 ms leases did not always survive on a loaded machine (a CI run lost it and
    // restarted at the next ballot).
    let mut s = Shards::new("2s", "500ms");
    let mut a = s.start("a", &["--shards", "2"], &["0", "1"]);
    let restarted = poll(PATIENCE, || {
        let starts: Vec<Line> = s
            .lines()
            .into_iter()
            .filter(|l| l.kind == "start" && l.shard == 1)
            .collect();
        (starts.len() >= 2).then_some(starts)
    })
    .unwrap_or_else(|| panic!("not restarted:\n{}", s.world.stderr_of("a")));
    assert_eq!(restarted[0].ballot, restarted[1].ballot);
    assert_eq!(restarted[0].id, restarted[1].id);
    s.world.stop_cleanly("a", &mut a);
    assert!(
        s.world
            .stderr_of("a")
            .contains("restarting the child in 1s")
    );

    // --on-child-exit exit: the run stops the other child, leaves, and exits 7.
    let mut s = Shards::new("600ms", "200ms");
    let mut a = s.start(
        "a",
        &["--shards", "2", "--on-child-exit", "exit"],
        &["0", "1"],
    );
    let status = crate::cli_support::wait_exit(&mut a, PATIENCE).expect("exits");
    assert_eq!(status.code(), Some(7), "{}", s.world.stderr_of("a"));
    let lines = s.lines();
    let other = lines
        .iter()
        .find(|l| l.kind == "start" && l.shard == 0)
        .expect("shard 0's child");
    assert!(
        lines.iter().any(|l| l.kind == "stop" && l.pid == other.pid),
        "shard 0's child was not stopped: {lines:?}"
    );
    assert!(s.active().is_empty(), "{:?}", s.active());
    let status = s.shards_status();
    assert!(
        status["members"]
            .as_array()
            .is_some_and(|m| m.iter().all(|m| m["fenced"] == Value::Bool(true))),
        "{status}"
    );
}

#[test]
fn a_deleted_store_stops_every_child_and_exits_3() {
    let mut s = Shards::new("600ms", "200ms");
    let mut a = s.start("a", &["--shards", "2"], &[]);
    let children = s.wait_spread(PATIENCE, &[("a", 2)]);
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(s.world.path(&format!("election.db{suffix}")));
    }
    let status = crate::cli_support::wait_exit(&mut a, PATIENCE).expect("a exits");
    let err = s.world.stderr_of("a");
    crate::cli_support::assert_no_panic(&err);
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(err.contains("was deleted"), "{err}");
    // Each child was stopped (it logs its stop on SIGTERM).
    let lines = s.lines();
    for child in &children {
        assert!(
            lines.iter().any(|l| l.kind == "stop" && l.pid == child.pid),
            "{child:?}: {lines:?}"
        );
    }
    assert!(s.active().is_empty(), "{:?}", s.active());
}

#[test]
fn bad_input_is_refused_with_exit_2_naming_the_flag_and_creates_nothing() {
    let s = Shards::new("600ms", "200ms");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(bin());
        command
            .envs(env.iter().copied())
            .arg("--sqlite")
            .arg(s.world.db())
            .arg("run")
            .args(args)
            .args(["--", "sh", "-c", "sleep 100"]);
        output_of(command)
    };
    for (args, env, says) in [
        (
            &["--shards", "0"][..],
            &[][..],
            "invalid value '0' for '--shards <M>': a sharded election has at least 1 shard",
        ),
        (
            &["--shards", "100000"],
            &[],
            "invalid value '100000' for '--shards <M>': at most 256",
        ),
        (
            &["--shards", "4", "--try"],
            &[],
            "--try cannot be used with --shards",
        ),
        (
            &["--shards", "4", "--begin-command", "true"],
            &[],
            "--begin-command cannot be used with --shards",
        ),
        (
            &["--shards", "4"],
            &[("FDB_LEADER_TIMEOUT", "5s")],
            "FDB_LEADER_TIMEOUT (--timeout) cannot be used with --shards",
        ),
        (
            &["--shards", "4", "--on-child-exit", "resign"],
            &[],
            "--on-child-exit resign cannot be used with --shards",
        ),
        (&["--weight", "2"], &[], "--weight needs --shards M"),
    ] {
        let out = run(args, env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        crate::cli_support::assert_no_panic(&stderr);
    }
    // The checks of the single election's run come first too: a command that cannot run.
    let out = {
        let mut command = Command::new(bin());
        command.arg("--sqlite").arg(s.world.db()).args([
            "run",
            "--shards",
            "4",
            "--",
            "/nonexistent/cmd",
        ]);
        output_of(command)
    };
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db: PathBuf = s.world.db();
    assert!(!db.exists(), "a refused run created {}", db.display());
    assert!(s.lines().is_empty());
}

// Issue 29 item 7: `run --shards` gave each child FDB_LEADER_SHARDS, the variable of `run
// --shards` itself, and FDB_LEADER_ELECTION, that of --election: a nested `fdb-leader
// --election solo run --try -- true` exited 2 ("--try cannot be used with FDB_LEADER_SHARDS"),
// and without --try a nested run would have joined a sharded election. The children's
// variables are not a flag's: each nested command acts as its own flags say.
#[test]
fn a_nested_fdb_leader_in_a_shards_child_is_not_configured_by_its_environment() {
    let mut s = Shards::new("600ms", "200ms");
    fs::write(s.world.path("nested.sh"), crate::cli_support::NESTED).unwrap();
    let other = s.world.path("nested.db");
    let mut command = Command::new(bin());
    command
        .arg("--sqlite")
        .arg(s.world.db())
        .args(&s.common)
        .args(["--name", "a", "--shards", "2", "--"])
        .arg("sh")
        .arg(s.world.path("nested.sh"))
        .arg(s.world.log())
        .arg(bin())
        .arg(&other);
    let mut a = s.world.start(command, "a");
    let (lines, errors) = poll(PATIENCE, || {
        let (lines, errors) = crate::cli_support::nested_lines(&s.world.log(), &other);
        (lines.len() == 2).then_some((lines, errors))
    })
    .unwrap_or_else(|| {
        panic!(
            "the children never logged twice:\n{}",
            s.world.stderr_of("a")
        )
    });
    s.world.stop_cleanly("a", &mut a);
    let mut lines = lines;
    lines.sort();
    assert_eq!(
        lines,
        vec!["nested 0 0 0 0".to_owned(), "nested 1 0 0 0".to_owned()],
        "{errors}"
    );
}

// Issue 29 item 6: "a lone `run --shards 256 --lease 600ms` must start each child once and
// keep it". Before, a debug build started none in 17 s while the coordinator election lapsed
// 13-14 times: every guard check copied the member's map of owned shards (O(M) a check,
// O(M^2) a reconciliation, one reconciliation per acquired shard), every child was forked
// on the thread that renews the member's lease, and each stopping child scanned /proc on it
// every 20 ms. Now lookups are O(log M), a cycle's changes are reconciled once, children
// start off that thread (one at a time), stopping children share one scan of /proc, and the
// watchdogs hear of each renewal when it lands instead of 256 tasks polling. Each shard's
// child starts once, at ballot 1 (no lapse moved a shard), and stays for 3 s more.
#[test]
fn a_lone_member_of_256_shards_starts_each_child_once_and_keeps_it() {
    // Alone: the runs of many children measure their own pace.
    let _alone = alone();
    let mut s = Shards::new("600ms", "200ms");
    let run = s.lone_member(&[], 256, PATIENCE, Duration::from_secs(3));
    started_once_and_kept("256 children", &run);
}

// Issue 29 item 6: "at the shortest lease the CLI accepts, children are never killed and
// restarted by the supervisor's own slowness" (900-1,276 restarts in 6-8 s were measured at
// 300 ms). 64 shards at 150 ms on the in-memory store (only the supervisor's own pace counts:
// a SQLite commit's flush on a busy disk can miss a 150 ms lease's renewal margin whatever
// the supervisor does). Before, the same run lapsed its coordinator election about 30 times
// in 10 s, and its children were restarted about 60 times; now each child starts once and
// none starts again in the 3 s after. (At 256 shards, starting the children takes a 2-core
// machine's cores for a few seconds in a debug build, each being two executions of this
// binary and the command's: there a process that other load keeps from a core for 100 ms
// misses a 150 ms lease, whatever it does; the README gives the figures.)
#[test]
fn at_the_shortest_lease_children_start_once_and_are_never_restarted() {
    // Alone: the runs of many children measure their own pace.
    let _alone = alone();
    let mut s = Shards::new("150ms", "50ms");
    let run = s.lone_member(&["--memory"], 64, PATIENCE, Duration::from_secs(3));
    started_once_and_kept("at lease 150ms, 64 children", &run);
}

/// Every child of a lone member started once, at ballot 1 (no shard changed hands), none
/// again, and the member stopped after SIGTERM; prints the figures of `what`.
fn started_once_and_kept(what: &str, run: &crate::run_shards_support::LoneMember) {
    eprintln!(
        "figures: {what} started {:?} after the supervisor ({:.0} children/s)",
        run.all_started,
        run.per_second()
    );
    assert_eq!(run.restarted(), vec![], "children started again");
    assert!(
        run.starts.values().flatten().all(|l| l.ballot == 1),
        "a shard changed hands"
    );
    stopped_after_sigterm(run);
}

/// A lone member stopped by SIGTERM exits 0, or 3 when its leave did not commit in time
/// (the store slow under load; its shards then move a lease later), saying so.
fn stopped_after_sigterm(run: &crate::run_shards_support::LoneMember) {
    let left = run.code == Some(0)
        || (run.code == Some(3)
            && run
                .stderr
                .contains("could not leave the sharded election cleanly"));
    assert!(
        left,
        "exit {:?}:\n{}",
        run.code,
        crate::run_shards_support::tail(&run.stderr)
    );
}

// Issue 29 item 6: `run` must not bypass its own 256-shard limit by joining a stored layout
// that `config set --sharded --shards 300` created (one member may come to own every shard,
// with a child and a watchdog each). It refuses with exit 2 before joining, naming the limit,
// the flags and the fix; the command it suggests works as printed.
#[test]
fn a_stored_election_of_more_shards_than_run_supervises_is_refused_before_joining() {
    let s = Shards::new("600ms", "200ms");
    let created = s.cli(&["config", "set", "--sharded", "--shards", "300"]);
    let created_text = String::from_utf8_lossy(&created.stderr);
    assert!(created.status.success(), "{created_text}");
    let mut command = Command::new(bin());
    command
        .arg("--sqlite")
        .arg(s.world.db())
        .args(&s.common)
        .args([
            "--name",
            "a",
            "--shards",
            "4",
            "--",
            "sh",
            "-c",
            "sleep 100",
        ]);
    let out = output_of(command);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for says in [
        "the sharded election jobs has 300 shards",
        "more than run --shards supervises (at most 256",
        "nothing was joined",
        "ShardedRunners",
        "--election NAME",
    ] {
        assert!(stderr.contains(says), "{says:?} not in: {stderr}");
    }
    crate::cli_support::assert_no_panic(&stderr);
    assert!(s.lines().is_empty(), "a child ran");
    // Nothing joined: no member in the election.
    let status = s.shards_status();
    assert_eq!(
        status["members"].as_array().map(Vec::len),
        Some(0),
        "{status}"
    );
    // And config set said so when it created the election.
    assert!(
        created_text.contains("run --shards refuses"),
        "config set warns that run cannot serve it: {created_text}"
    );
    // The suggested command, as printed.
    let suggested = stderr
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no suggested command in: {stderr}"));
    let dir = PathBuf::from(bin()).parent().unwrap().to_owned();
    let path = std::env::join_paths(
        std::iter::once(dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let out = output_of({
        let mut sh = Command::new("sh");
        sh.env("PATH", path).args(["-c", suggested]);
        sh
    });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("300"),
        "`{suggested}`: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_second_supervisor_of_one_name_is_warned_which_member_has_it() {
    // Alone: the runs of many children measure their own pace.
    let _alone = alone();
    let mut s = Shards::new("600ms", "200ms");
    let mut a = s.start("a", &["--shards", "2"], &["0.5"]);
    let first = s.wait_spread(PATIENCE, &[("a", 2)]);
    let a_id = first[0].id.clone();
    // The same --name again, its output in files of another name.
    let mut twin = s.start_logged("a", "twin", &["--shards", "2"], &["0.5"]);
    let warned = poll(PATIENCE, || {
        s.world
            .stderr_of("twin")
            .lines()
            .find(|l| l.contains("WARN") && l.contains("a member (live, or crashed less than a lease ago: not fenced out yet) of the name a"))
            .map(str::to_owned)
    })
    .unwrap_or_else(|| panic!("no warning:\n{}", s.world.stderr_of("twin")));
    // It names the member already there, and says what to do.
    assert!(warned.contains(&a_id), "{warned}");
    assert!(warned.contains("give each its own --name"), "{warned}");
    assert!(!s.world.stderr_of("a").contains("of the name a"));
    s.world.stop_cleanly("twin", &mut twin);
    s.world.stop_cleanly("a", &mut a);
}
