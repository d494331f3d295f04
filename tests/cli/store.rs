//! `fdb-leader` against stores that cannot work: a file this user may not write (exit 3 at
//! once, nothing created), a store file deleted or replaced under a running election (the
//! child stopped, exit 3), a network file system (refused), and read-only commands on a
//! missing store (nothing created, "no election", exit 1).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cli_support::{
    PATIENCE, World, assert_no_panic, bin, is_label, output_of, stderr, wait_exit,
};

/// The files in the test's directory whose names start with `prefix`.
fn files_like(world: &World, prefix: &str) -> Vec<String> {
    let mut names = crate::cli_support::file_names(&world.path(""));
    names.retain(|n| n.starts_with(prefix));
    names
}

#[test]
fn a_store_this_user_may_not_write_exits_3_at_once_and_creates_nothing() {
    let world = World::new();
    // A store created by its owner, in a directory everyone may write (as /tmp): another user
    // could create -wal and -shm files beside it, but must not.
    let (dir, db) = world.store_in("shared");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    assert!(
        crate::cli_support::on_sqlite(&db, &["config", "set", "--preemption", "on"])
            .status
            .success()
    );
    fs::set_permissions(&db, fs::Permissions::from_mode(0o644)).unwrap();
    fs::set_permissions(world.path(""), fs::Permissions::from_mode(0o755)).unwrap();

    let root = nix::unistd::geteuid().is_root();
    // The other user must be able to reach the binary: a link (or copy) in this directory.
    let exe = if root {
        world.exe_for_others()
    } else {
        std::path::PathBuf::from(bin())
    };
    let mut run = Command::new(&exe);
    run.arg("--sqlite")
        .arg(&db)
        .args(["run", "--lease", "600ms", "--", "sleep", "100"]);
    if root {
        // Root may write anything: run as an unprivileged user, as in the report.
        run.uid(65534).gid(65534);
    } else {
        // The owner is this user: take the write permission away instead.
        fs::set_permissions(&db, fs::Permissions::from_mode(0o444)).unwrap();
    }
    let start = Instant::now();
    let out = output_of(run);
    let took = start.elapsed();
    let err = stderr(&out);
    eprintln!(
        "read-only store ({}): exit {:?} after {} ms",
        if root { "as uid 65534" } else { "mode 0444" },
        out.status.code(),
        took.as_millis()
    );
    assert_no_panic(&err);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(err.contains(&db.display().to_string()), "{err}");
    assert!(
        err.contains("give it read and write access") || err.contains("make it writable"),
        "no fix in: {err}"
    );
    // Nothing created: no -wal or -shm owned by the other user.
    let left = crate::cli_support::file_names(&dir);
    assert_eq!(left, ["election.db"], "{err}");
}

#[test]
fn a_deleted_store_file_stops_the_child_and_exits_3() {
    for replace in [false, true] {
        let mut world = World::new();
        let mut a = world.start_run("a", &[]);
        let (first, _) = world.wait_led("a");
        let start = Instant::now();
        if replace {
            // Another store moved over the path in one rename (a restore from a backup): the
            // 50 ms poll sees either the old file or the new one, never a path without a file
            // (deleting first and creating after raced the poll, which then said "deleted").
            let other_db = world.path("other.db");
            let mut other = Command::new(bin());
            other
                .arg("--sqlite")
                .arg(&other_db)
                .args(["config", "set", "--preemption", "on"]);
            assert!(output_of(other).status.success());
            fs::rename(&other_db, world.db()).expect("rename the other store over the path");
        } else {
            for suffix in ["", "-wal", "-shm"] {
                let _ = fs::remove_file(world.path(&format!("election.db{suffix}")));
            }
        }
        let status = wait_exit(&mut a, PATIENCE).expect("a exits");
        let took = start.elapsed();
        let err = world.stderr_of("a");
        assert_no_panic(&err);
        assert_eq!(status.code(), Some(3), "{err}");
        let what = if replace {
            "was replaced by another file"
        } else {
            "was deleted"
        };
        assert!(err.contains(what), "{err}");
        assert!(err.contains("restart ballots at 1"), "{err}");
        // The child was stopped (it logs its stop on SIGTERM), and nothing of it runs.
        assert!(world.logged_stop(&first), "{:?}", world.log_lines());
        assert!(world.running_pids().is_empty());
        eprintln!(
            "store {}: child stopped and exit 3 after {} ms",
            if replace { "replaced" } else { "deleted" },
            took.as_millis()
        );
        // Within a heartbeat (200 ms) plus the child's stop, with slack for a loaded host.
        assert!(took < Duration::from_secs(3), "took {took:?}");
    }
}

/// `rm election.db-wal election.db-shm` (or only the -shm) under a leader, and a second `run`
/// started at once: the leader stops its child and exits 3 (its files are no longer the
/// store's), and the second never runs its child beside the first's (before, it led with the
/// same ballot on new files while the first kept renewing on its orphaned log). With a child
/// that takes a second to stop, the first holds the old files until it is gone (killed by its
/// watchdog when the lease, which can no longer be renewed, runs out): the second waits, or is
/// refused (exit 3), but does not start a new log beside it.
#[test]
fn a_deleted_wal_and_shm_stop_the_leader_and_no_second_leader_starts_beside_it() {
    for (only_shm, stop_delay) in [(false, "0"), (true, "0"), (false, "1")] {
        let mut world = World::new();
        let mut a = world.start_run_stopping_in("a", &[], stop_delay);
        let (first, _) = world.wait_led("a");
        let start = Instant::now();
        if !only_shm {
            fs::remove_file(world.path("election.db-wal")).unwrap();
        }
        fs::remove_file(world.path("election.db-shm")).unwrap();
        let mut b = world.start_run("b", &[]);
        let status = wait_exit(&mut a, PATIENCE).expect("a exits");
        let took = start.elapsed();
        let lines_at_exit = world.log_lines();
        let err = world.stderr_of("a");
        assert_no_panic(&err);
        assert_eq!(status.code(), Some(3), "{err}");
        let what = if only_shm {
            "write-ahead log index"
        } else {
            "write-ahead log"
        };
        assert!(err.contains(&format!("the store's {what}")), "{err}");
        // Deleted, or already replaced by b's new file.
        assert!(
            err.contains("was deleted while in use")
                || err.contains("was replaced by another file while in use"),
            "{err}"
        );
        assert!(err.contains("never delete the -wal or -shm"), "{err}");
        // Stopped by SIGTERM; a slow one is killed at the lease's deadline (its grace cannot
        // outlive a lease that no renewal extends, docs/design.md §10.8).
        let stopped = world.logged_stop(&first);
        assert!(
            (stopped || stop_delay != "0") && !crate::cli_support::running(first.pid),
            "{:?}",
            world.log_lines()
        );
        eprintln!(
            "{} deleted: a's child stopped and exit 3 after {} ms",
            if only_shm { "-shm" } else { "-wal and -shm" },
            took.as_millis()
        );
        // Within a heartbeat (200 ms) plus the child's stop, with slack for a loaded host.
        let bound = if stop_delay == "0" { 3 } else { 5 };
        assert!(took < Duration::from_secs(bound), "took {took:?}");

        // b either led after a's child had stopped, or was refused while a held the old files
        // (exit 3), or is still waiting: never beside it.
        let b_led = world.wait_event(Duration::from_secs(3), |e| {
            e.kind == "start" && is_label(&e.id, "b")
        });
        let b_status = b.try_wait().unwrap();
        let lines = world.log_lines();
        let a_stop = lines
            .iter()
            .position(|l| l.starts_with("stop") && l.ends_with(&format!(" {}", first.pid)));
        let b_start = lines
            .iter()
            .position(|l| l.starts_with("start") && l.contains(" b-"));
        if let Some(b_start) = b_start {
            // Before a's stop line, or (a's child killed, no line) after a exited.
            let after_a = !lines_at_exit
                .iter()
                .any(|l| l.starts_with("start") && l.contains(" b-"));
            assert!(
                a_stop.map_or(after_a, |stop| stop < b_start),
                "b's child started before a's stopped: {lines:?}"
            );
        }
        eprintln!(
            "b: {} (ballot {:?}, a's was {})",
            match (&b_led, b_status) {
                (Some(_), _) => "led after a's child stopped".to_owned(),
                (None, Some(s)) => format!(
                    "exited {:?}: {}",
                    s.code(),
                    world.stderr_of("b").lines().last().unwrap_or("")
                ),
                (None, None) => "did not lead".to_owned(),
            },
            b_led.map(|(e, _)| e.ballot),
            first.ballot
        );
        if let Some(code) = b_status.and_then(|s| s.code()) {
            assert_eq!(code, 3, "{}", world.stderr_of("b"));
            assert!(
                world.stderr_of("b").contains("no longer at their paths"),
                "{}",
                world.stderr_of("b")
            );
        }
        let _ = b.kill();
        let _ = b.wait();
    }
}

#[test]
fn a_network_file_system_is_refused_unless_allowed() {
    let world = World::new();
    // Tests cannot mount NFS: debug builds read the file system type from this variable.
    let nfs = ("FDB_LEADER_DEBUG_FS_MAGIC", "0x6969");
    let mut run = Command::new(bin());
    run.env(nfs.0, nfs.1)
        .arg("--sqlite")
        .arg(world.db())
        .args(["run", "--", "true"]);
    let out = output_of(run);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("network file system (NFS)"), "{err}");
    assert!(err.contains("--allow-network-fs"), "{err}");
    assert!(!world.db().exists());

    let mut allowed = Command::new(bin());
    allowed
        .env(nfs.0, nfs.1)
        .env("FDB_LEADER_ALLOW_NETWORK_FS", "true")
        .arg("--sqlite")
        .arg(world.db())
        .args(["config", "set", "--preemption", "on"]);
    let out = output_of(allowed);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("network file system"));
}

#[test]
fn read_only_commands_never_create_a_store() {
    let world = World::new();
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["watch"],
        &["config", "get"],
        &["resign", "--expected-ballot", "1"],
        &["force-vacate", "--expected-ballot", "1"],
    ] {
        let out = world.cli(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let expected = format!("no election at {} (name default)", world.db().display());
        assert!(err.contains(&expected), "{args:?}: {err}");
        assert_eq!(files_like(&world, "election.db"), Vec::<String>::new());
    }
    // An existing store without that election: the same answer.
    assert!(
        world
            .cli(&["config", "set", "--preemption", "on"])
            .status
            .success()
    );
    let out = world.cli(&["--election", "typo", "watch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("(name typo)"), "{}", stderr(&out));
}

#[test]
fn status_watch_and_config_get_work_on_a_store_this_user_may_only_read() {
    let world = World::new();
    // Only reading allowed: the file 0444 in a folder 0555 (so no -wal or -shm either).
    let (dir, db) = world.read_only_store("read-only");
    let before = fs::read(&db).unwrap();
    let root = nix::unistd::geteuid().is_root();
    let exe = if root {
        world.exe_for_others()
    } else {
        std::path::PathBuf::from(bin())
    };
    let command = |args: &[&str]| {
        let mut c = Command::new(&exe);
        c.arg("--sqlite").arg(&db).args(args);
        if root {
            // Root may write anything: an unprivileged user, who may only read.
            c.uid(65534).gid(65534);
        }
        c
    };
    let out = output_of(command(&["status", "--json"]));
    assert_no_panic(&stderr(&out));
    assert!(out.status.success(), "status: {}", stderr(&out));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["lease_ms"], 2000, "{status}");
    let out = output_of(command(&["config", "get"]));
    assert!(out.status.success(), "config get: {}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("2s"));
    // `watch` keeps watching (a store it could not open would end it at once, exit 3) and
    // stops cleanly on Ctrl-C.
    let mut watch = command(&["watch"])
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(
        watch.try_wait().unwrap().is_none(),
        "watch ended on a read-only store"
    );
    crate::cli_support::signal(&watch, nix::sys::signal::Signal::SIGINT);
    let status = wait_exit(&mut watch, PATIENCE).expect("watch stops on SIGINT");
    let mut err = String::new();
    std::io::Read::read_to_string(watch.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_no_panic(&err);
    assert!(status.success(), "watch: {status:?}: {err}");
    // Nothing written, nothing created.
    assert_eq!(fs::read(&db).unwrap(), before);
    let left = crate::cli_support::file_names(&dir);
    assert_eq!(left, ["election.db"]);
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_watch_reading_a_store_as_it_stood_ends_when_a_writer_starts() {
    let world = World::new();
    // Nobody has it open (no -wal beside it), and this user may not make the -shm: the watch
    // reads it as it stands.
    let (dir, db) = world.read_only_store("frozen");
    let root = nix::unistd::geteuid().is_root();
    let exe = if root {
        world.exe_for_others()
    } else {
        std::path::PathBuf::from(bin())
    };
    let mut watch = Command::new(&exe);
    watch.arg("--sqlite").arg(&db).arg("watch");
    if root {
        watch.uid(65534).gid(65534);
    }
    let mut watch = watch
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1_000));
    assert!(watch.try_wait().unwrap().is_none(), "watch ended at once");
    // A writer starts (its -wal appears): what the watch reads may be stale from now on, so
    // it ends with the store error and says why.
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&db, fs::Permissions::from_mode(0o644)).unwrap();
    let writer = fdb_leader_election::SqliteDb::open(&db).unwrap();
    let status = wait_exit(&mut watch, PATIENCE);
    drop(writer);
    let Some(status) = status else {
        crate::cli_support::signal(&watch, nix::sys::signal::Signal::SIGKILL);
        panic!("the watch went on reading a store a writer had started on");
    };
    let mut err = String::new();
    std::io::Read::read_to_string(watch.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_no_panic(&err);
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(
        err.contains("was created") || err.contains("was written"),
        "{err}"
    );
}
