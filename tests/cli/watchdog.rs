//! The watchdog holds the lease (docs/design.md §10.8): a supervisor stopped alone leaves no child
//! beside a successor's. Real processes, as in `supervise.rs`.

use std::fs;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use crate::cli_support::{
    LEASE_DUR, PATIENCE, World, bin, is_label, pid_of, poll, running, signal, wait_exit,
    wait_live_candidates,
};
use nix::sys::signal::Signal;

/// The child of these tests: before it logs `start ID BALLOT PID`, it looks at every child
/// that logged a start before it and logs `overlap ID BALLOT PID` for each one still running
/// (not a zombie). So a successor's child itself tells whether its predecessor's was gone
/// when it started. It logs `stop …` on SIGTERM.
const GUARDED_CHILD: &str = r#"#!/bin/sh
log="$1"
for pid in $(awk '$1 == "start" { print $4 }' "$log" 2>/dev/null); do
    state=$(sed -n 's/^.*) \([A-Za-z]\).*$/\1/p' "/proc/$pid/stat" 2>/dev/null)
    case "$state" in
        ""|Z|X) ;;
        *) echo "overlap $FDB_LEADER_ID $FDB_LEADER_BALLOT $pid" >> "$log" ;;
    esac
done
echo "start $FDB_LEADER_ID $FDB_LEADER_BALLOT $$" >> "$log"
trap 'echo "stop $FDB_LEADER_ID $FDB_LEADER_BALLOT $$" >> "$log"; exit 0' TERM
while :; do sleep 0.05; done
"#;

/// Where Debian installs the multi-threaded libfaketime (the chaos harness's default).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// How much later than the lease (from the stop of a supervisor) its child may die: the
/// watchdog acts within microseconds of the belief deadline, which is before the lease ends;
/// the rest is a loaded machine's scheduling.
const KILL_BOUND: Duration = Duration::from_millis(1500);

/// `fdb-leader --sqlite DB run --name NAME --lease 600ms --heartbeat 200ms EXTRA… -- sh
/// guarded.sh LOG` (without the timings if `EXTRA` has a `--lease`), with `env` added, stderr
/// to `NAME.err`.
fn start(world: &mut World, name: &str, extra: &[&str], env: &[(&str, &str)]) -> Child {
    let script = world.path("guarded.sh");
    if !script.exists() {
        fs::write(&script, GUARDED_CHILD).expect("child script");
    }
    let mut command = Command::new(bin());
    command
        .envs(env.iter().copied())
        .arg("--sqlite")
        .arg(world.db())
        .args(["run", "--name", name]);
    if !extra.contains(&"--lease") {
        command.args(["--lease", "600ms", "--heartbeat", "200ms"]);
    }
    command
        .args(extra)
        .arg("--")
        .arg("sh")
        .arg(script)
        .arg(world.log());
    world.start(command, name)
}

/// The state letter of process `pid` (`R`, `S`, `T` for stopped, …), if it exists.
fn state_of(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().next()?.chars().next()
}

/// The pid of the child that `label`'s supervisor started, once it has.
fn child_of(world: &World, label: &str) -> i32 {
    let (event, _) = world
        .wait_event(PATIENCE, |e| e.kind == "start" && is_label(&e.id, label))
        .unwrap_or_else(|| {
            panic!(
                "{label} never started its child:\n{}",
                world.stderr_of(label)
            )
        });
    event.pid
}

/// The log's `overlap` lines: a child that found its predecessor's still running.
fn overlaps(world: &World) -> Vec<String> {
    world
        .log_lines()
        .into_iter()
        .filter(|l| l.starts_with("overlap"))
        .collect()
}

/// Waits (at most `bound`) until `pid` no longer runs; how long that took.
fn time_to_death(pid: i32, since: Instant, bound: Duration) -> Option<Duration> {
    poll(bound, || (!running(pid)).then(|| since.elapsed()))
}

/// Issue 39: docs/cli.md said the watchdog is "listed as `fdb-leader-wd`", which holds for its
/// process name only; `ps -ef` and `ps aux` list its command line. The guide now names both,
/// as the watchdog of a running child shows them.
#[test]
fn the_watchdog_is_listed_as_the_guide_says() {
    let mut world = World::new();
    let mut a = start(&mut world, "a", &[], &[]);
    let child = child_of(&world, "a");
    let stat = fs::read_to_string(format!("/proc/{child}/stat")).unwrap();
    let watchdog: i32 = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|ppid| ppid.parse().ok())
        .unwrap();
    let comm = fs::read_to_string(format!("/proc/{watchdog}/comm")).unwrap();
    assert_eq!(comm.trim_end(), "fdb-leader-wd");
    let cmdline = fs::read(format!("/proc/{watchdog}/cmdline")).unwrap();
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    assert_eq!(
        argv.iter().take(3).map(String::as_str).collect::<Vec<_>>(),
        ["fdb-leader", "__fdb-leader-watchdog", "--lease"],
        "{argv:?}"
    );
    assert!(
        argv.iter().any(|w| w == "--") && argv.iter().any(|w| w == "sh"),
        "{argv:?}"
    );
    let guide = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let guide = guide.split_whitespace().collect::<Vec<_>>().join(" ");
    for shown in [
        "its process name is `fdb-leader-wd` (what `ps -o comm`",
        "its command line `fdb-leader __fdb-leader-watchdog --lease … -- CMD ARGS…` (what `ps -ef`, `ps aux`",
    ] {
        assert!(guide.contains(shown), "docs/cli.md lacks: {shown}");
    }
    world.stop_cleanly("a", &mut a);
}

#[test]
fn a_supervisor_stopped_alone_leaves_no_child_beside_its_successor() {
    let mut world = World::new();
    let mut a = start(&mut world, "a", &[], &[]);
    let a_child = child_of(&world, "a");
    let mut b = start(&mut world, "b", &[], &[]);
    wait_live_candidates(&world, 2);
    // The supervisor alone: its watchdog and child run on, and only the watchdog can act.
    signal(&a, Signal::SIGSTOP);
    let stopped = Instant::now();
    let died = time_to_death(a_child, stopped, LEASE_DUR + KILL_BOUND).unwrap_or_else(|| {
        panic!(
            "a's child still runs {:?} after a was stopped (lease {LEASE_DUR:?}): nothing \
             holds the lease",
            stopped.elapsed()
        )
    });
    eprintln!("a's child died {died:?} after SIGSTOP of a (lease {LEASE_DUR:?})");
    // Killed (SIGKILL, no grace): it logged no stop.
    assert!(
        !world.log_lines().iter().any(|l| l.starts_with("stop a")),
        "{:?}",
        world.log_lines()
    );
    let b_child = child_of(&world, "b");
    assert!(running(b_child));
    assert_eq!(overlaps(&world), Vec::<String>::new());
    // Continued, a finds its leadership over and campaigns again as a follower.
    signal(&a, Signal::SIGCONT);
    thread::sleep(LEASE_DUR);
    assert!(
        a.try_wait().expect("try_wait").is_none(),
        "{}",
        world.stderr_of("a")
    );
    wait_live_candidates(&world, 2);
    assert_eq!(world.active().len(), 1, "{:?}", world.log_lines());
    world.stop_cleanly("a", &mut a);
    world.stop_cleanly("b", &mut b);
    assert_eq!(overlaps(&world), Vec::<String>::new());
}

#[test]
fn ctrl_z_stops_the_child_hands_over_and_stops_the_supervisor_until_sigcont() {
    let mut world = World::new();
    let mut a = start(&mut world, "a", &[], &[]);
    let a_child = child_of(&world, "a");
    let mut b = start(&mut world, "b", &[], &[]);
    wait_live_candidates(&world, 2);
    // What Ctrl-Z sends to the supervisor's process group (the child has a group of its own).
    signal(&a, Signal::SIGTSTP);
    let sent = Instant::now();
    time_to_death(a_child, sent, LEASE_DUR + KILL_BOUND).unwrap_or_else(|| {
        panic!(
            "a's child still runs {:?} after SIGTSTP of a",
            sent.elapsed()
        )
    });
    let b_child = child_of(&world, "b");
    assert!(running(b_child));
    assert_eq!(overlaps(&world), Vec::<String>::new());
    // a stopped its child politely, and handed over (b did not wait for a lease).
    assert!(
        world.log_lines().iter().any(|l| l.starts_with("stop a")),
        "{:?}",
        world.log_lines()
    );
    // ... and then stopped itself.
    let a_pid = pid_of(&a).as_raw();
    poll(PATIENCE, || (state_of(a_pid) == Some('T')).then_some(())).unwrap_or_else(|| {
        panic!(
            "a is not stopped: {:?}\n{}",
            state_of(a_pid),
            world.stderr_of("a")
        )
    });
    let status = crate::cli_support::status_json(&world).expect("status");
    let live: Vec<&str> = status["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .filter(|c| c["live"] == serde_json::Value::Bool(true))
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert!(
        live.iter().all(|id| is_label(id, "b")),
        "a left the election before stopping: {live:?}"
    );
    // `fg`: a campaigns again, as a follower.
    signal(&a, Signal::SIGCONT);
    wait_live_candidates(&world, 2);
    assert!(
        a.try_wait().expect("try_wait").is_none(),
        "{}",
        world.stderr_of("a")
    );
    assert!(
        world.stderr_of("a").contains("SIGTSTP"),
        "{}",
        world.stderr_of("a")
    );
    world.stop_cleanly("a", &mut a);
    world.stop_cleanly("b", &mut b);
    assert_eq!(overlaps(&world), Vec::<String>::new());
}

#[test]
fn a_lease_shortened_by_an_operator_reaches_the_watchdog_at_once() {
    // A leader on a 6 s lease; an operator shortens it to 600 ms. The leader's next renewal
    // (within the old 2 s heartbeat) moves its deadline back, and the watchdog must obey the
    // shorter deadline: stopped after that, the supervisor's child dies within the short
    // lease, not the long one (a watchdog that kept the largest deadline would wait ~5.8 s).
    let mut world = World::new();
    let mut a = start(
        &mut world,
        "a",
        &["--lease", "6s", "--heartbeat", "2s"],
        &[],
    );
    let a_child = child_of(&world, "a");
    let out = world.cli(&[
        "config",
        "set",
        "--lease",
        "600ms",
        "--heartbeat",
        "200ms",
        "--candidate-timeout",
        "900ms",
        "--transaction-timeout",
        "100ms",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One old heartbeat for the leader to renew under the new lease, and a little more.
    thread::sleep(Duration::from_millis(2600));
    assert!(running(a_child), "{}", world.stderr_of("a"));
    signal(&a, Signal::SIGSTOP);
    let stopped = Instant::now();
    let died = time_to_death(a_child, stopped, LEASE_DUR + KILL_BOUND).unwrap_or_else(|| {
        panic!(
            "a's child still runs {:?} after a was stopped on a 600 ms lease",
            stopped.elapsed()
        )
    });
    eprintln!("shortened lease: a's child died {died:?} after SIGSTOP of a");
    world.stop_cleanly("a", &mut a);
}

/// A leader that renews for 25 leases keeps its one child; then a SIGSTOP shows the watchdog
/// was holding the lease all along. A leader whose store failed meanwhile (a commit stalled
/// past the 600 ms lease on a disk busy with CI's builds: its log says the cycle failed) was
/// not healthy, and lost its lease rightly: the run is repeated on a fresh store, at most
/// three times in all.
fn healthy_leader_keeps_its_child(extra: &[&str], env: &[(&str, &str)], rate: f64) {
    for attempt in 1..=3 {
        let mut world = World::new();
        match healthy_leader_run(&mut world, extra, env, rate) {
            Ok(()) => return,
            Err(log) if attempt < 3 => {
                eprintln!(
                    "attempt {attempt}: the leader's store failed, so it was not healthy:\n{log}"
                );
            }
            Err(log) => panic!("the leader's store failed in three runs of three:\n{log}"),
        }
    }
}

/// One run of [`healthy_leader_keeps_its_child`]: `Err` with the log if the leader's store
/// failed (its child may then rightly die).
fn healthy_leader_run(
    world: &mut World,
    extra: &[&str],
    env: &[(&str, &str)],
    rate: f64,
) -> Result<(), String> {
    let mut a = start(world, "a", extra, env);
    let a_child = child_of(world, "a");
    let lease_real = LEASE_DUR.div_f64(rate);
    let until = Instant::now() + lease_real * 25;
    while Instant::now() < until {
        if !running(a_child) {
            let log = world.stderr_of("a");
            if log.contains("election cycle failed") {
                signal(&a, Signal::SIGKILL);
                let _ = a.wait();
                return Err(log);
            }
            panic!("the healthy leader's child died:\n{log}");
        }
        thread::sleep(Duration::from_millis(50));
    }
    let starts = world
        .events()
        .into_iter()
        .filter(|e| e.kind == "start")
        .count();
    assert_eq!(
        starts,
        1,
        "{:?}\n{}",
        world.log_lines(),
        world.stderr_of("a")
    );
    assert!(
        !world.stderr_of("a").contains("watchdog killed"),
        "{}",
        world.stderr_of("a")
    );
    signal(&a, Signal::SIGSTOP);
    let stopped = Instant::now();
    let died = time_to_death(a_child, stopped, lease_real + KILL_BOUND).unwrap_or_else(|| {
        panic!(
            "a's child still runs {:?} after a was stopped: the watchdog does not hold the lease",
            stopped.elapsed()
        )
    });
    eprintln!("rate {rate}: a's child died {died:?} after SIGSTOP of a");
    world.stop_cleanly("a", &mut a);
    Ok(())
}

#[test]
fn the_watchdog_never_kills_a_healthy_leaders_child() {
    healthy_leader_keeps_its_child(&[], &[], 1.0);
}

#[test]
fn the_watchdog_never_kills_a_healthy_leaders_child_under_libfaketime() {
    // The chaos harness's slow clocks: the supervisor runs at 0.8x under libfaketime, and the
    // watchdog inherits the fake clock (and, through FAKETIME_SHARED, its origin).
    if !std::path::Path::new(LIBFAKETIME).exists() {
        eprintln!("SKIPPED: {LIBFAKETIME} is not installed");
        return;
    }
    healthy_leader_keeps_its_child(
        &[],
        &[("LD_PRELOAD", LIBFAKETIME), ("FAKETIME", "+0 x0.8")],
        0.8,
    );
}

/// The calling process's `CLOCK_MONOTONIC`, nanoseconds.
fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
    (t.tv_sec() as u64) * 1_000_000_000 + t.tv_nsec() as u64
}

/// One note on the lifeline: `SENT DEADLINE`, the deadline `remaining` from now.
fn note(lifeline: &mut fs::File, remaining: Duration) {
    use std::io::Write;
    let sent = monotonic_ns();
    let deadline = sent + remaining.as_nanos() as u64;
    writeln!(lifeline, "{sent} {deadline}").expect("write a note");
}

#[test]
fn the_watchdog_converts_deadlines_from_a_clock_it_does_not_share() {
    // This test plays the supervisor on the real clock; the watchdog runs under libfaketime
    // without the supervisor's FAKETIME_SHARED, so its CLOCK_MONOTONIC has an origin of its
    // own (libfaketime's reads near the epoch's seconds, about 1.8e9 s ahead of the real
    // uptime). A watchdog that compared the absolute deadline with its own clock would kill
    // the command at once; it must keep it while notes come, and kill it a lease after the
    // last one, or at once when a note moves the deadline back.
    if !std::path::Path::new(LIBFAKETIME).exists() {
        eprintln!("SKIPPED: {LIBFAKETIME} is not installed");
        return;
    }
    let world = World::new();
    for shorten in [false, true] {
        let (read, write) = nix::unistd::pipe().expect("pipe");
        let mut lifeline = fs::File::from(write);
        let pidfile = world.path(&format!("pid-{shorten}"));
        let sent = monotonic_ns();
        let mut command = Command::new(bin());
        command
            .env("LD_PRELOAD", LIBFAKETIME)
            .env("FAKETIME", "+0 x1.0")
            .env_remove("FAKETIME_SHARED")
            .arg("__fdb-leader-watchdog")
            .arg("--lease")
            .arg(sent.to_string())
            .arg((sent + LEASE_DUR.as_nanos() as u64).to_string())
            .args(["--", "sh", "-c"])
            .arg(format!("echo $$ > {}; exec sleep 1000", pidfile.display()))
            .stdin(std::process::Stdio::from(read));
        let mut watchdog = Group::start(command);
        let pid: i32 = poll(PATIENCE, || {
            fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
        })
        .unwrap_or_else(|| {
            let status = watchdog.0.try_wait().expect("try_wait");
            panic!("the command never started (watchdog: {status:?})")
        });
        // Four leases of notes, one every third of a lease.
        let until = Instant::now() + LEASE_DUR * 4;
        while Instant::now() < until {
            note(&mut lifeline, LEASE_DUR);
            thread::sleep(LEASE_DUR / 3);
            assert!(
                running(pid),
                "the watchdog killed a command whose lease was renewed"
            );
        }
        let last = Instant::now();
        if shorten {
            note(&mut lifeline, Duration::from_millis(50));
        } else {
            note(&mut lifeline, LEASE_DUR);
        }
        let expected = if shorten {
            Duration::from_millis(50)
        } else {
            LEASE_DUR
        };
        let died = time_to_death(pid, last, expected + KILL_BOUND).unwrap_or_else(|| {
            panic!(
                "the command still runs {:?} after the last note",
                last.elapsed()
            )
        });
        eprintln!("last note {expected:?} ahead: the command died {died:?} after it");
        assert!(
            died + Duration::from_millis(5) >= expected,
            "{died:?} before {expected:?}"
        );
        let status = wait_exit(&mut watchdog.0, PATIENCE).expect("the watchdog exits");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "the watchdog dies with its group"
        );
        drop(lifeline);
    }
}

/// A process leading a group of its own, the group killed when this is dropped (also when an
/// assertion fails).
struct Group(Child);

impl Group {
    fn start(mut command: Command) -> Group {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
        Group(command.spawn().expect("spawn"))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(pid_of(&self.0), Signal::SIGKILL);
        let _ = self.0.wait();
    }
}
