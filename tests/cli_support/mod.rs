//! Helpers for the command-line tests: spawning the built `fdb-leader`, a child script that
//! logs its start and stop, reading that log, signals, bounded waits. A [`World`] runs its
//! commands on a SQLite file of its own ([`World::new`]) or on an election of its own in a
//! FoundationDB cluster ([`World::on_cluster`]).

#![allow(dead_code, unreachable_pub)]

#[path = "../common/files.rs"]
mod files;
#[path = "../common/txn.rs"]
mod txn;

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tempfile::TempDir;

#[allow(unused_imports)]
pub use files::file_names;
#[allow(unused_imports)]
pub(crate) use txn::in_txn;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_fdb-leader")
}

/// Short leases: 600 ms lease, 200 ms heartbeat.
pub const LEASE: &str = "600ms";
pub const HEARTBEAT: &str = "200ms";
pub const LEASE_DUR: Duration = Duration::from_millis(600);
pub const HEARTBEAT_DUR: Duration = Duration::from_millis(200);

/// A bound for waits that have no stated deadline: generous, for loaded machines.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The child the tests run while leading: logs `start ID BALLOT PID` when it starts and
/// `stop ID BALLOT PID` when it gets SIGTERM, to the log file given as its first argument. The
/// second argument, if any, is how long it takes to stop (it logs `stop` when done). With
/// `GRANDCHILD` set in its environment, it first starts a long `sleep` in the background and
/// logs `grandchild ID BALLOT PID`.
const CHILD: &str = r#"#!/bin/sh
log="$1"
delay="${2:-0}"
if [ -n "$GRANDCHILD" ]; then
    sleep 1000 &
    echo "grandchild $FDB_LEADER_ID $FDB_LEADER_BALLOT $!" >> "$log"
fi
echo "start $FDB_LEADER_ID $FDB_LEADER_BALLOT $$" >> "$log"
trap 'sleep "$delay"; echo "stop $FDB_LEADER_ID $FDB_LEADER_BALLOT $$" >> "$log"; exit 0' TERM
while :; do sleep 0.05; done
"#;

/// Where a [`World`]'s election lives.
#[derive(Clone, Debug)]
pub enum Store {
    /// `--sqlite DB`: the file `election.db` in the test's directory.
    Sqlite,
    /// `--cluster-file F --election NAME`: an election of the test's own on a FoundationDB
    /// cluster shared with other tests.
    Cluster {
        cluster_file: PathBuf,
        election: String,
    },
}

/// A test's directory, with the store, the child script and the log; kills every process it
/// started (and their children's process groups) when dropped.
pub struct World {
    dir: TempDir,
    store: Store,
    /// `--lease` and `--heartbeat` of [`start_run`](Self::start_run): [`LEASE`] and
    /// [`HEARTBEAT`] unless [`with_timing`](Self::with_timing) changed them.
    timing: (&'static str, &'static str),
    spawned: Vec<Pid>,
    /// Whether this world counts in its thread's hold of [`ALONE`]'s shared side (not when
    /// the test holds [`alone`]).
    shares: bool,
}

/// The tests of a binary run beside each other (two at a time on two cores), each world
/// holding the shared side of this lock; a test that measures time, or loads the machine
/// enough to spoil another's measure (256 children), holds its exclusive side through
/// [`alone`], so that it runs alone, as it did in a binary of its own.
static ALONE: RwLock<()> = RwLock::new(());

thread_local! {
    /// Whether this test's thread holds [`ALONE`] exclusively (its worlds then take nothing).
    static HOLDS_ALONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The worlds of this test's thread, and the shared side of [`ALONE`] they hold, taken once
    /// per thread: a second world of the same test never waits behind a test that waits to
    /// run alone (which waits for the first).
    static SHARED: std::cell::RefCell<(usize, Option<RwLockReadGuard<'static, ()>>)> =
        const { std::cell::RefCell::new((0, None)) };
}

/// This test runs alone among the tests that hold a [`World`], until the guard is dropped.
pub struct Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>);

impl Drop for Alone {
    fn drop(&mut self) {
        HOLDS_ALONE.with(|h| h.set(false));
    }
}

/// Waits until no other test holds a world, then keeps others from starting one: for the tests
/// that measure time (a failover within lease + heartbeat + 1 s) or load the machine.
pub fn alone() -> Alone {
    let guard = ALONE
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    HOLDS_ALONE.with(|h| h.set(true));
    Alone(guard)
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: String,
    pub id: String,
    pub ballot: u64,
    pub pid: i32,
}

impl World {
    /// A world whose commands run on the SQLite file [`db`](Self::db).
    pub fn new() -> World {
        World::with_store(Store::Sqlite)
    }

    /// A world whose commands run on election `election` of the FoundationDB cluster named by
    /// `cluster_file`.
    pub fn on_cluster(cluster_file: &Path, election: &str) -> World {
        World::with_store(Store::Cluster {
            cluster_file: cluster_file.to_owned(),
            election: election.to_owned(),
        })
    }

    fn with_store(store: Store) -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::write(dir.path().join("child.sh"), CHILD).expect("child script");
        let shares = !HOLDS_ALONE.with(std::cell::Cell::get);
        if shares {
            SHARED.with(|held| {
                let mut held = held.borrow_mut();
                if held.0 == 0 {
                    held.1 = Some(
                        ALONE
                            .read()
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    );
                }
                held.0 += 1;
            });
        }
        World {
            dir,
            store,
            timing: (LEASE, HEARTBEAT),
            spawned: Vec::new(),
            shares,
        }
    }

    /// This world, with `run --lease LEASE --heartbeat HEARTBEAT` for the runs it starts.
    pub fn with_timing(mut self, lease: &'static str, heartbeat: &'static str) -> World {
        self.timing = (lease, heartbeat);
        self
    }

    /// Where the election lives.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The flags that select the store (and, on a cluster, the election).
    pub fn store_args(&self) -> Vec<OsString> {
        match &self.store {
            Store::Sqlite => vec!["--sqlite".into(), self.db().into()],
            Store::Cluster {
                cluster_file,
                election,
            } => vec![
                "--cluster-file".into(),
                cluster_file.into(),
                "--election".into(),
                election.into(),
            ],
        }
    }

    /// `fdb-leader STORE…`, to complete with a command.
    pub fn command(&self) -> Command {
        let mut command = Command::new(bin());
        command.args(self.store_args());
        command
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A folder `name` of its own and the path of a store in it (not created).
    pub fn store_in(&self, name: &str) -> (PathBuf, PathBuf) {
        let dir = self.path(name);
        fs::create_dir(&dir).unwrap();
        let db = dir.join("election.db");
        (dir, db)
    }

    /// A store in a folder `name` of its own (`config set --lease 2s`) that nobody may write:
    /// the file 0444 in a folder 0555 (so no -wal or -shm either), the world's folder 0755.
    pub fn read_only_store(&self, name: &str) -> (PathBuf, PathBuf) {
        let (dir, db) = self.store_in(name);
        let out = on_sqlite(&db, &["config", "set", "--lease", "2s"]);
        assert!(out.status.success(), "{}", stderr(&out));
        fs::set_permissions(&db, fs::Permissions::from_mode(0o444)).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(self.path(""), fs::Permissions::from_mode(0o755)).unwrap();
        (dir, db)
    }

    /// The binary linked (or copied) into the world's folder, where another user can reach it.
    pub fn exe_for_others(&self) -> PathBuf {
        let exe = self.path("fdb-leader");
        if fs::hard_link(bin(), &exe).is_err() {
            fs::copy(bin(), &exe).unwrap();
        }
        exe
    }

    /// `watch --json` (and `extra`) on the world's SQLite store, its standard error to
    /// `stderr`, and its lines as they come.
    pub fn watch_json(&self, extra: &[&str], stderr: Stdio) -> (Child, mpsc::Receiver<String>) {
        let mut watch = Command::new(bin())
            .arg("--sqlite")
            .arg(self.db())
            .args(["watch", "--json"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let lines = lines_of(watch.stdout.take().unwrap());
        (watch, lines)
    }

    /// `config set --sharded --shards <shards>` and `settings`: creates (or changes) the
    /// sharded election of the world's name.
    pub fn config_sharded(&self, shards: &str, settings: &[&str]) -> Output {
        let mut args = vec!["config", "set", "--sharded", "--shards", shards];
        args.extend_from_slice(settings);
        self.cli(&args)
    }

    /// The SQLite store.
    pub fn db(&self) -> PathBuf {
        self.path("election.db")
    }

    /// The log the children (and hooks) append to.
    pub fn log(&self) -> PathBuf {
        self.path("log")
    }

    /// `fdb-leader STORE… ARGS…` (`STORE…`: `--sqlite DB`, or `--cluster-file F --election
    /// NAME`), run to completion.
    pub fn cli(&self, args: &[&str]) -> Output {
        let mut command = self.command();
        command.args(args);
        output_of(command)
    }

    /// Starts `fdb-leader STORE… run --name NAME --lease 600ms --heartbeat 200ms EXTRA… --
    /// sh child.sh LOG` (other timings: [`with_timing`](Self::with_timing)) in a process group
    /// of its own; stderr goes to `NAME.err`.
    pub fn start_run(&mut self, name: &str, extra: &[&str]) -> Child {
        self.start_run_stopping_in(name, extra, "0")
    }

    /// As [`start_run`](Self::start_run), with a child that takes `delay` (seconds, for
    /// `sleep`) to stop after SIGTERM.
    pub fn start_run_stopping_in(&mut self, name: &str, extra: &[&str], delay: &str) -> Child {
        self.start_run_with(name, extra, delay, &[])
    }

    /// As [`start_run_stopping_in`](Self::start_run_stopping_in), with more environment.
    pub fn start_run_with(
        &mut self,
        name: &str,
        extra: &[&str],
        delay: &str,
        env: &[(&str, &str)],
    ) -> Child {
        let mut command = self.command();
        command.envs(env.iter().copied());
        command
            .args([
                "run",
                "--name",
                name,
                "--lease",
                self.timing.0,
                "--heartbeat",
                self.timing.1,
            ])
            .args(extra)
            .arg("--")
            .arg("sh")
            .arg(self.path("child.sh"))
            .arg(self.log())
            .arg(delay);
        self.start(command, name)
    }

    /// Starts `command` in a process group of its own, stdout to `NAME.out`, stderr to
    /// `NAME.err`.
    pub fn start(&mut self, mut command: Command, name: &str) -> Child {
        let out = fs::File::create(self.path(&format!("{name}.out"))).expect("out file");
        let err = fs::File::create(self.path(&format!("{name}.err"))).expect("err file");
        command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .env("RUST_LOG", "info")
            .process_group(0);
        let child = command.spawn().expect("spawn fdb-leader");
        self.spawned.push(pid_of(&child));
        child
    }

    /// What a started process wrote to stderr so far.
    pub fn stderr_of(&self, name: &str) -> String {
        fs::read_to_string(self.path(&format!("{name}.err"))).unwrap_or_default()
    }

    /// Stops the run `name` with SIGTERM (continuing it first, should it be stopped) and
    /// expects it to exit 0 within the patience; its stderr otherwise.
    pub fn stop_cleanly(&self, name: &str, child: &mut Child) {
        let _ = kill(pid_of(child), Signal::SIGCONT);
        signal(child, Signal::SIGTERM);
        let status = wait_exit(child, PATIENCE).unwrap_or_else(|| panic!("{name} did not exit"));
        assert!(
            status.success(),
            "{name} exited with {status:?}:\n{}",
            self.stderr_of(name)
        );
    }

    /// What every started process wrote to stderr so far, each under its name.
    pub fn stderr_of_all(&self) -> String {
        let mut names: Vec<String> = fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".err").map(str::to_owned)
            })
            .collect();
        names.sort();
        names
            .iter()
            .map(|n| format!("--- {n} ---\n{}", self.stderr_of(n)))
            .collect()
    }

    /// What a started process wrote to stdout so far, by complete line.
    pub fn stdout_lines(&self, name: &str) -> Vec<String> {
        let text = fs::read_to_string(self.path(&format!("{name}.out"))).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete.lines().map(str::to_owned).collect()
    }

    /// The log, parsed.
    pub fn events(&self) -> Vec<Event> {
        let text = fs::read_to_string(self.log()).unwrap_or_default();
        text.lines().filter_map(parse_event).collect()
    }

    /// The log's raw lines.
    pub fn log_lines(&self) -> Vec<String> {
        let text = fs::read_to_string(self.log()).unwrap_or_default();
        text.lines().map(str::to_owned).collect()
    }

    /// Waits (at most `bound`) for an event matching `pred`; returns it and when it was seen.
    pub fn wait_event(
        &self,
        bound: Duration,
        pred: impl Fn(&Event) -> bool,
    ) -> Option<(Event, Instant)> {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(e) = self.events().into_iter().find(|e| pred(e)) {
                return Some((e, Instant::now()));
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits (at most [`PATIENCE`] each) for the child `old` to log its stop, then for the
    /// child of `ballot` to start: that child, and when its start was seen.
    pub fn stopped_then_led(&self, old: &Event, ballot: u64) -> (Event, Instant) {
        self.wait_event(PATIENCE, |e| e.kind == "stop" && e.pid == old.pid)
            .unwrap_or_else(|| {
                panic!("the child {old:?} never stopped:\n{}", self.stderr_of_all())
            });
        self.wait_event(PATIENCE, |e| e.kind == "start" && e.ballot == ballot)
            .unwrap_or_else(|| panic!("ballot {ballot} never led:\n{}", self.stderr_of_all()))
    }

    /// Waits (at most [`PATIENCE`]) for the child of the run `label` to start: it leads.
    pub fn wait_led(&self, label: &str) -> (Event, Instant) {
        self.wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, label))
            .unwrap_or_else(|| panic!("{label} never led:\n{}", self.stderr_of(label)))
    }

    /// `a` started with `extra` and leading, then `b` with `extra`, registered: the runs and
    /// a's child's start.
    pub fn leader_and_follower(&mut self, extra: &[&str]) -> (Child, Child, Event) {
        let a = self.start_run("a", extra);
        let (started, _) = self.wait_led("a");
        let b = self.start_run("b", extra);
        wait_live_candidates(self, 2);
        (a, b, started)
    }

    /// After a handover from `first` to `next`: one ballot more, the old child logged its stop
    /// before the new one started (no overlap), and the old run `a` exited successfully.
    pub fn assert_handed_over(&self, first: &Event, next: &Event, a: &mut Child) {
        assert_eq!(next.ballot, first.ballot + 1, "one handover, one ballot");
        self.assert_stop_precedes(first, next);
        let status = wait_exit(a, PATIENCE).expect("a exits");
        assert!(
            status.success(),
            "a exited with {status:?}:\n{}",
            self.stderr_of("a")
        );
    }

    /// The log has `old`'s child stopping before any line of `new`'s child: no overlap.
    pub fn assert_stop_precedes(&self, old: &Event, new: &Event) {
        let events = self.events();
        let stop = events
            .iter()
            .position(|e| e.kind == "stop" && e.pid == old.pid);
        let start = events.iter().position(|e| e.pid == new.pid);
        assert!(stop.is_some() && stop < start, "{:?}", self.log_lines());
    }

    /// `--begin-command` and `--end-command` hooks that log `begin`/`end`, the id, the ballot
    /// and the election's name.
    pub fn logging_hooks(&self) -> [String; 4] {
        let log = self.log();
        let log = log.to_str().unwrap();
        let begin = format!(
            "echo \"begin $FDB_LEADER_ID $FDB_LEADER_BALLOT $FDB_LEADER_ELECTION_NAME\" >> {log}"
        );
        let end = format!(
            "echo \"end $FDB_LEADER_ID $FDB_LEADER_BALLOT $FDB_LEADER_ELECTION_NAME\" >> {log}"
        );
        ["--begin-command".into(), begin, "--end-command".into(), end]
    }

    /// Waits (at most [`PATIENCE`]) for the first child to start, of `a` or `b`.
    pub fn wait_first_leader(&self) -> Event {
        let (first, _) = self
            .wait_event(PATIENCE, |e| e.kind == "start")
            .unwrap_or_else(|| {
                panic!(
                    "nobody led:\n{}\n{}",
                    self.stderr_of("a"),
                    self.stderr_of("b")
                )
            });
        first
    }

    /// For `span`, exactly one child runs, `first`'s (checked every 25 ms).
    pub fn assert_one_child_for(&self, first: &Event, span: Duration) {
        let until = Instant::now() + span;
        while Instant::now() < until {
            let active = self.active();
            assert_eq!(active.len(), 1, "children running: {active:?}");
            assert_eq!(active[0].pid, first.pid);
            thread::sleep(Duration::from_millis(25));
        }
    }

    /// `a` started with `--metrics-listen addr` and its runtime blocked for 5 s on request
    /// (`FDB_LEADER_DEBUG_BLOCK_RUNTIME`, just after its election): the run, and when the
    /// block began.
    pub fn start_blocked(&mut self, addr: &str) -> (Child, Instant) {
        let a = self.start_run_with(
            "a",
            &["--metrics-listen", addr],
            "0",
            &[("FDB_LEADER_DEBUG_BLOCK_RUNTIME", "5s")],
        );
        poll(PATIENCE, || {
            self.stderr_of("a")
                .contains("debug: blocking the runtime")
                .then_some(())
        })
        .unwrap_or_else(|| panic!("a never led:\n{}", self.stderr_of("a")));
        (a, Instant::now())
    }

    /// `a` (priority 5, payload `10.0.0.1:7000`) leading, then `b` (priority 1) registered:
    /// the runs, a's child's start, and the status once both are live candidates.
    pub fn priority_5_leader_and_follower(&mut self) -> (Child, Child, Event, serde_json::Value) {
        let a = self.start_run("a", &["--priority", "5", "--payload", "10.0.0.1:7000"]);
        let (leader, _) = self.wait_led("a");
        let b = self.start_run("b", &["--priority", "1"]);
        let status = wait_live_candidates(self, 2);
        (a, b, leader, status)
    }

    /// The set-up of the SIGKILL failover tests (tests/cli/run.rs, tests/cli_fdb.rs): `a`
    /// leads, its child runs a grandchild (the children's `GRANDCHILD=1`), and `b` stands by,
    /// registered. Returns the two runs, a's child's start and the grandchild.
    pub fn leader_with_grandchild_and_standby(&mut self) -> (Child, Child, Event, Event) {
        let env = [("GRANDCHILD", "1")];
        let a = self.start_run_with("a", &[], "0", &env);
        let (first, _) = self.wait_led("a");
        let b = self.start_run_with("b", &[], "0", &env);
        wait_live_candidates(self, 2);
        let grandchild = self
            .events()
            .into_iter()
            .find(|e| e.kind == "grandchild" && e.id == first.id)
            .expect("a's child started a grandchild");
        assert!(running(first.pid) && running(grandchild.pid));
        (a, b, first, grandchild)
    }

    /// After a SIGKILL of the supervisor at `killed`: its child and grandchild are gone
    /// within a second. Returns when they were seen gone.
    pub fn assert_group_gone(&self, first: &Event, grandchild: &Event, killed: Instant) -> Instant {
        let gone = poll(PATIENCE, || {
            (!running(first.pid) && !running(grandchild.pid)).then(Instant::now)
        })
        .unwrap_or_else(|| panic!("a's child group outlived it: {:?}", self.log_lines()));
        let orphan_gone = gone - killed;
        eprintln!(
            "orphans gone {} ms after SIGKILL of the supervisor",
            orphan_gone.as_millis()
        );
        assert!(
            orphan_gone < Duration::from_secs(1),
            "the child group was gone only after {orphan_gone:?}"
        );
        gone
    }

    /// Whether the log has `child`'s stop.
    pub fn logged_stop(&self, child: &Event) -> bool {
        self.events()
            .iter()
            .any(|e| e.kind == "stop" && e.pid == child.pid)
    }

    /// The processes of the log (children and grandchildren) still running.
    pub fn running_pids(&self) -> Vec<i32> {
        let events = self.events();
        events
            .iter()
            .filter(|e| e.kind != "stop")
            .map(|e| e.pid)
            .filter(|pid| running(*pid))
            .collect()
    }

    /// The children that started and have neither logged a stop nor died.
    pub fn active(&self) -> Vec<Event> {
        let events = self.events();
        events
            .iter()
            .filter(|e| e.kind == "start")
            .filter(|s| !events.iter().any(|e| e.kind == "stop" && e.pid == s.pid))
            .filter(|s| running(s.pid))
            .cloned()
            .collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for pid in &self.spawned {
            let _ = killpg(*pid, Signal::SIGKILL);
        }
        for e in self.events() {
            let _ = killpg(Pid::from_raw(e.pid), Signal::SIGKILL);
            let _ = kill(Pid::from_raw(e.pid), Signal::SIGKILL);
        }
        if self.shares {
            SHARED.with(|held| {
                let mut held = held.borrow_mut();
                held.0 = held.0.saturating_sub(1);
                if held.0 == 0 {
                    held.1 = None;
                }
            });
        }
    }
}

/// Whether process `pid` exists and is not a zombie (an orphan killed with SIGKILL stays a
/// zombie until an init process that reaps collects it).
pub fn running(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn parse_event(line: &str) -> Option<Event> {
    let mut f = line.split_whitespace();
    let kind = f.next()?.to_owned();
    if kind != "start" && kind != "stop" && kind != "grandchild" {
        return None;
    }
    Some(Event {
        kind,
        id: f.next()?.to_owned(),
        ballot: f.next()?.parse().ok()?,
        pid: f.next()?.parse().ok()?,
    })
}

pub fn pid_of(child: &Child) -> Pid {
    Pid::from_raw(i32::try_from(child.id()).expect("pid"))
}

/// Sends `signal` to the process.
pub fn signal(child: &Child, signal: Signal) {
    kill(pid_of(child), signal).expect("signal");
}

/// Waits (at most `bound`) for `child` to exit.
pub fn wait_exit(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `command` to completion (at most `PATIENCE`, then it is killed), capturing its
/// output.
pub fn output_of(mut command: Command) -> Output {
    command.stdin(Stdio::null());
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = pid_of(&child);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(output) => output.expect("output"),
        Err(_) => {
            // Not reaped yet (its waiter has not returned): the pid is still this process.
            let _ = kill(pid, Signal::SIGKILL);
            panic!("the command did not finish in {PATIENCE:?}: killed");
        }
    }
}

/// The commands between backticks in `text`.
pub fn suggested(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Splits a command line as a POSIX shell would (plain words and single quotes).
pub fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// Runs a suggested `fdb-leader …` command as printed.
pub fn run_suggested(line: &str) -> Output {
    let words = shell_words(line);
    assert_eq!(
        words.first().map(String::as_str),
        Some("fdb-leader"),
        "{line}"
    );
    let mut c = Command::new(bin());
    c.args(&words[1..]);
    output_of(c)
}

/// A command's standard error, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Bytes a command printed, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `world.cli(args)` and asserts that it succeeded without a panic; returns its stdout.
pub fn ok(world: &World, args: &[&str]) -> String {
    let out = world.cli(args);
    assert!(
        out.status.success(),
        "{args:?} exited with {:?}:\n{}",
        out.status,
        text(&out.stderr)
    );
    assert_no_panic(&text(&out.stderr));
    text(&out.stdout)
}

/// `config get --json`, parsed.
pub fn config_get(world: &World) -> serde_json::Value {
    serde_json::from_str(&ok(world, &["config", "get", "--json"])).expect("config json")
}

/// `config set` and `config get` round-trip on the world's store, an invalid change names the
/// rule and changes nothing, and a `run` with other timings joins the election with the stored
/// configuration, saying so (the same scenario on SQLite and on FoundationDB).
pub fn config_round_trip_and_the_stored_config_wins(world: &mut World) {
    use serde_json::Value;
    let said = ok(
        world,
        &[
            "config",
            "set",
            "--lease",
            "900ms",
            "--heartbeat",
            "300ms",
            "--candidate-timeout",
            "2s",
            "--transaction-timeout",
            "100ms",
            "--handover-grace",
            "2s",
            "--elections",
            "on",
        ],
    );
    assert!(said.contains("lease                     900ms"), "{said}");
    let config = config_get(world);
    assert_eq!(config["lease_ms"], 900);
    assert_eq!(config["heartbeat_ms"], 300);
    assert_eq!(config["candidate_timeout_ms"], 2000);
    assert_eq!(config["transaction_timeout_ms"], 100);
    assert_eq!(config["handover_grace_ms"], 2000);
    assert_eq!(config["elections"], true);
    assert_eq!(config["preemption"], true);
    let shown = ok(world, &["config", "get"]);
    assert!(shown.contains("heartbeat                 300ms"), "{shown}");

    // Only the fields given change.
    ok(world, &["config", "set", "--preemption", "off"]);
    let changed = config_get(world);
    assert_eq!(changed["preemption"], false);
    let mut expected = config.clone();
    expected["preemption"] = Value::Bool(false);
    assert_eq!(changed, expected);
    ok(world, &["config", "set", "--preemption", "on"]);
    assert_eq!(config_get(world), config);

    // An invalid change names the rule and changes nothing.
    let out = world.cli(&["config", "set", "--heartbeat", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--heartbeat (1s) must be at most a third of --lease (900ms)"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(config_get(world), config);

    // `run` with the world's timings joins the existing election: the stored configuration
    // wins, and it says so; the leader runs with it.
    let mut a = world.start_run("a", &[]);
    let seen = poll(PATIENCE, || {
        let err = world.stderr_of("a");
        err.contains("the stored configuration wins").then_some(err)
    });
    assert!(seen.is_some(), "{}", world.stderr_of("a"));
    let (leader, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start")
        .unwrap_or_else(|| panic!("a never led:\n{}", world.stderr_of("a")));
    let status = status_json(world).expect("status --json");
    assert_eq!(status["leader"], leader.id.as_str());
    assert_eq!(status["lease_ms"], 900, "the record's lease");
    assert_eq!(status["config"], config);
    world.stop_cleanly("a", &mut a);
    assert_eq!(config_get(world), config);
}

/// Runs `fdb-leader --sqlite <path> <args>` to completion, capturing its output.
pub fn on_sqlite(path: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(bin());
    command.arg("--sqlite").arg(path).args(args);
    output_of(command)
}

/// Whether `label`'s candidate id (`label-<hex>`) is `id`.
pub fn is_label(id: &str, label: &str) -> bool {
    id.rsplit_once('-').is_some_and(|(l, _)| l == label)
}

/// Polls `f` until it returns `Some` (at most `bound`).
pub fn poll<T>(bound: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// `status --json`, parsed (`None` if it failed).
pub fn status_json(world: &World) -> Option<serde_json::Value> {
    let out = world.cli(&["status", "--json"]);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// Waits until `n` candidates are registered and live.
pub fn wait_live_candidates(world: &World, n: usize) -> serde_json::Value {
    poll(PATIENCE, || {
        let status = status_json(world)?;
        let live = status["candidates"]
            .as_array()?
            .iter()
            .filter(|c| c["live"] == serde_json::Value::Bool(true))
            .count();
        (live == n).then_some(status)
    })
    .unwrap_or_else(|| panic!("{n} live candidates never registered"))
}

/// Reads `reader` line by line on a thread; lines arrive on the returned channel.
pub fn lines_of(reader: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Asserts that `text` (a command's stderr) shows no panic.
pub fn assert_no_panic(text: &str) {
    assert!(
        !text.contains("panicked") && !text.contains("RUST_BACKTRACE"),
        "the binary panicked:\n{text}"
    );
}

/// The file's bytes, for checking that a failed open left it untouched.
pub fn bytes(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_default()
}

/// `GET path` from `127.0.0.1:port`, waiting at most `bound` for the answer: the status code
/// and the body (`None`: no answer in time, or not HTTP).
pub fn http_get(port: u16, path: &str, bound: Duration) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream =
        std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), bound).ok()?;
    stream.set_read_timeout(Some(bound)).ok()?;
    stream.set_write_timeout(Some(bound)).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.to_owned();
    Some((status, body))
}

/// A free port on the loopback interface (bound and released: another process could take
/// it meanwhile, which tests accept).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A child that starts `fdb-leader` itself, as a child may: `sh nested.sh LOG BIN DB`. On the
/// store `DB.SHARD` (`DB.-` outside a sharded run) it runs `BIN --election solo run --try
/// --on-child-exit exit -- true`, then the same without `--election`, then `BIN --election
/// default status`, and logs `nested SHARD A B C` with their three exit codes (all 0 when the
/// environment it was given configures none of them: the second run then acts on the
/// default election, which the status finds). Then it runs until SIGTERM.
pub const NESTED: &str = r#"#!/bin/sh
log="$1"
bin="$2"
db="$3.${FDB_LEADER_SHARD:--}"
"$bin" --sqlite "$db" --election solo run --try --on-child-exit exit -- true 2>>"$db.err"; a=$?
"$bin" --sqlite "$db" run --try --on-child-exit exit -- true 2>>"$db.err"; b=$?
"$bin" --sqlite "$db" --election default status >/dev/null 2>>"$db.err"; c=$?
echo "nested ${FDB_LEADER_SHARD:--} $a $b $c" >> "$log"
trap 'exit 0' TERM
while :; do sleep 0.05; done
"#;

/// The `nested SHARD A B C` lines of `log` ([`NESTED`]), and the nested runs' stderr.
pub fn nested_lines(log: &Path, db: &Path) -> (Vec<String>, String) {
    let lines = fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("nested "))
        .map(str::to_owned)
        .collect();
    let dir = db.parent().map(Path::to_owned).unwrap_or_default();
    let mut errors = String::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "err")
            && path.to_string_lossy().starts_with(&*db.to_string_lossy())
        {
            errors.push_str(&fs::read_to_string(&path).unwrap_or_default());
        }
    }
    (lines, errors)
}
