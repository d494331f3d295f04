//! Found by an adversarial review: `status` (a read-only command, which "creates
//! and changes nothing") on a service's store in a folder others may write (as /tmp) leaves
//! a `-wal` and a `-shm` owned by the operator who ran it, which the service may not write.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::cli_support::{World, assert_no_panic, in_txn, output_of, stderr};

#[test]
fn status_by_another_user_creates_nothing_beside_a_services_store() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("needs root to act as two users; skipped");
        return;
    }
    let world = World::new();
    let (dir, db) = world.store_in("shared");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(world.path(""), fs::Permissions::from_mode(0o755)).unwrap();
    let exe = world.exe_for_others();
    let as_user = |uid: u32, args: &[&str]| {
        let mut c = Command::new(&exe);
        c.arg("--sqlite").arg(&db).args(args).uid(uid).gid(uid);
        c
    };
    const SERVICE: u32 = 65534;
    const OPERATOR: u32 = 65533;
    // The service's store (it leaves it closed: no -wal, no -shm).
    let out = output_of(as_user(SERVICE, &["config", "set", "--lease", "2s"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let listing = || crate::cli_support::file_names(&dir);
    assert_eq!(listing(), ["election.db"]);
    // An operator, who may read the store, asks for its status.
    let out = output_of(as_user(OPERATOR, &["status"]));
    assert_no_panic(&stderr(&out));
    assert!(out.status.success(), "status: {}", stderr(&out));
    let left = listing();
    // The service can still write its store.
    let out = output_of(as_user(SERVICE, &["config", "set", "--lease", "2500ms"]));
    assert!(
        left == ["election.db"] && out.status.success(),
        "files beside the store after the operator's status: {left:?}; the service's next \
         write: {:?} {}",
        out.status.code(),
        stderr(&out)
    );
}

/// A `watch` that reads a store as it stood (this user may only read it, and no writer was at
/// work: SQLite's `immutable`) must end once a writer starts, "failing with
/// FileChange::Created once a -wal appears" (SqliteOptions::read_only). It only looks for the
/// `-wal` now and then: a writer that opens, commits and closes between two looks (here: while
/// the watch is stopped, as a busy machine may deschedule it) leaves no `-wal`, and the watch
/// reads its stale view on, silently, forever: it never reports the new leader.
#[test]
fn a_watch_reading_a_store_as_it_stood_does_not_miss_a_writer_that_came_and_went() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("needs root to act as two users; skipped");
        return;
    }
    use fdb_leader_election::{Candidate, CandidateId, LeaderElection, Priority, SqliteDb};
    use nix::sys::signal::Signal;
    use std::time::{Duration, Instant};

    let world = World::new();
    let (dir, db) = world.read_only_store("frozen");
    let exe = world.exe_for_others();
    let mut watch = Command::new(&exe);
    watch
        .arg("--sqlite")
        .arg(&db)
        .args(["watch", "--json"])
        .uid(65534)
        .gid(65534)
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut watch = watch.spawn().unwrap();
    let lines = crate::cli_support::lines_of(watch.stdout.take().unwrap());
    std::thread::sleep(Duration::from_millis(1_000));
    assert!(watch.try_wait().unwrap().is_none(), "watch ended at once");

    // The watch is descheduled while a writer (root: it may write the folder) opens the
    // store, takes the leadership, and closes the store again (its -wal and -shm go with it).
    crate::cli_support::signal(&watch, Signal::SIGSTOP);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let writer_id = rt.block_on(async {
        let store = SqliteDb::open(&db).unwrap();
        let election = LeaderElection::new(fdb_leader_election::Subspace::from((
            "fdb-leader",
            "default",
        )));
        let me = Candidate::new(CandidateId::random("writer").unwrap(), Priority::new(1));
        let (e, m) = (election.clone(), me.clone());
        in_txn!(store, [e, m], |txn| e.register_candidate(&txn, &m).await).unwrap();
        assert!(election.run_cycle(&store, &me).await.unwrap().is_leader());
        me.id().to_string()
    });
    drop(rt);
    assert_eq!(
        crate::cli_support::file_names(&dir),
        ["election.db"],
        "the writer closed its store"
    );
    crate::cli_support::signal(&watch, Signal::SIGCONT);

    // The watch must report the writer's leadership, or end (exit 3, "was created"): not
    // read on as if nothing happened.
    let start = Instant::now();
    let mut seen = Vec::new();
    let outcome = loop {
        while let Ok(line) = lines.try_recv() {
            seen.push(line);
        }
        if seen.iter().any(|l| l.contains(&writer_id)) {
            break "reported";
        }
        if watch.try_wait().unwrap().is_some() {
            break "ended";
        }
        if start.elapsed() > Duration::from_secs(4) {
            break "silent";
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if outcome == "silent" {
        crate::cli_support::signal(&watch, Signal::SIGKILL);
        let _ = watch.wait();
    }
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    assert_ne!(
        outcome, "silent",
        "the watch read a stale store on, silently, 4 s after a writer ({writer_id}) took the \
         leadership; it printed: {seen:?}"
    );
}
