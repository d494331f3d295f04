//! The sharded runs of `tests/cli/run_shards.rs`: the children's script and its log, a world that
//! starts `run --shards` supervisors, and the checks on the log (stop before release, ballots
//! that grow).

#![allow(
    dead_code,
    unreachable_pub,
    clippy::cast_precision_loss,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::cli_support::{PATIENCE, World, bin, is_label, output_of, poll, running, signal};

/// The child: `sh shard_child.sh LOG [DELAY] [EXIT_SHARD]`. For each earlier child of its
/// shard still running (not a zombie) it logs an overlap line (`overlap SHARD BALLOT ID -
/// PID -`), then `start SHARD BALLOT ID SHARDS PID ELECTION`; on SIGTERM it takes DELAY
/// seconds, then logs `stop …` and exits 0. The child of shard EXIT_SHARD, if given, exits
/// with code 7 after half a second.
pub const SHARD_CHILD: &str = r#"#!/bin/sh
log="$1"
delay="${2:-0}"
for pid in $(awk -v s="$FDB_LEADER_SHARD" '$1 == "start" && $2 == s { print $6 }' "$log" 2>/dev/null); do
    state=$(sed -n 's/^.*) \([A-Za-z]\).*$/\1/p' "/proc/$pid/stat" 2>/dev/null)
    case "$state" in
        ""|Z|X) ;;
        *) echo "overlap $FDB_LEADER_SHARD $FDB_LEADER_BALLOT $FDB_LEADER_ID - $pid -" >> "$log" ;;
    esac
done
echo "start $FDB_LEADER_SHARD $FDB_LEADER_BALLOT $FDB_LEADER_ID $FDB_LEADER_SHARD_COUNT $$ $FDB_LEADER_ELECTION_NAME" >> "$log"
if [ -n "$3" ] && [ "$FDB_LEADER_SHARD" = "$3" ]; then
    sleep 0.5
    exit 7
fi
trap 'sleep "$delay"; echo "stop $FDB_LEADER_SHARD $FDB_LEADER_BALLOT $FDB_LEADER_ID $FDB_LEADER_SHARD_COUNT $$ $FDB_LEADER_ELECTION_NAME" >> "$log"; exit 0' TERM
while :; do sleep 0.05; done
"#;

/// One line of the children's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub kind: String,
    pub shard: u32,
    pub ballot: u64,
    pub id: String,
    /// `FDB_LEADER_SHARD_COUNT`, as the child saw it (`-` for an overlap).
    pub shards: String,
    pub pid: i32,
    /// `FDB_LEADER_ELECTION_NAME`.
    pub election: String,
}

pub fn parse(line: &str) -> Option<Line> {
    let f: Vec<&str> = line.split_whitespace().collect();
    Some(Line {
        kind: (*f.first()?).to_owned(),
        shard: f.get(1)?.parse().ok()?,
        ballot: f.get(2)?.parse().ok()?,
        id: (*f.get(3)?).to_owned(),
        shards: (*f.get(4)?).to_owned(),
        pid: f.get(5)?.parse().ok()?,
        election: (*f.get(6)?).to_owned(),
    })
}

/// A world for sharded runs: the children's script, and every child it logged killed at the
/// end (their supervisors are killed by the [`World`]).
pub struct Shards {
    pub world: World,
    /// Extra arguments of every `run` (before `--`).
    pub common: Vec<String>,
}

impl Drop for Shards {
    fn drop(&mut self) {
        for line in self.lines() {
            let _ = nix::sys::signal::killpg(Pid::from_raw(line.pid), Signal::SIGKILL);
            let _ = kill(Pid::from_raw(line.pid), Signal::SIGKILL);
        }
    }
}

impl Shards {
    /// A world whose runs join `--election jobs` with `--lease LEASE --heartbeat HEARTBEAT`.
    pub fn new(lease: &str, heartbeat: &str) -> Shards {
        let world = World::new();
        fs::write(world.path("shard_child.sh"), SHARD_CHILD).expect("child script");
        Shards {
            world,
            common: [
                "--election",
                "jobs",
                "run",
                "--lease",
                lease,
                "--heartbeat",
                heartbeat,
            ]
            .map(str::to_owned)
            .to_vec(),
        }
    }

    /// Starts `fdb-leader --sqlite DB --election jobs run --lease … --heartbeat … --name NAME
    /// --grace 1s EXTRA… -- sh shard_child.sh LOG CHILD…`; stderr to `NAME.err`.
    pub fn start(&mut self, name: &str, extra: &[&str], child: &[&str]) -> Child {
        self.start_logged(name, name, extra, child)
    }

    /// As [`start`](Self::start), its stderr to `LOG.err`.
    pub fn start_logged(&mut self, name: &str, log: &str, extra: &[&str], child: &[&str]) -> Child {
        let mut command = Command::new(bin());
        command
            .arg("--sqlite")
            .arg(self.world.db())
            .args(&self.common)
            .args(["--name", name, "--grace", "1s"])
            .args(extra)
            .arg("--")
            .arg("sh")
            .arg(self.world.path("shard_child.sh"))
            .arg(self.world.log())
            .args(child);
        self.world.start(command, log)
    }

    /// `fdb-leader --sqlite DB --election jobs ARGS…`, run to completion.
    pub fn cli(&self, args: &[&str]) -> Output {
        let mut command = Command::new(bin());
        command
            .arg("--sqlite")
            .arg(self.world.db())
            .args(["--election", "jobs"])
            .args(args);
        output_of(command)
    }

    pub fn lines(&self) -> Vec<Line> {
        fs::read_to_string(self.world.log())
            .unwrap_or_default()
            .lines()
            .filter_map(parse)
            .collect()
    }

    /// The children that started and have neither logged a stop nor died.
    pub fn active(&self) -> Vec<Line> {
        let lines = self.lines();
        lines
            .iter()
            .filter(|l| l.kind == "start")
            .filter(|s| !lines.iter().any(|l| l.kind == "stop" && l.pid == s.pid))
            .filter(|s| running(s.pid))
            .cloned()
            .collect()
    }

    /// Stops each of `runs` (name and process) with SIGTERM, expecting exit 0, then expects
    /// no child left running.
    pub fn stop_all(&self, runs: &mut [(&str, &mut Child)]) {
        for (name, child) in runs.iter_mut() {
            self.world.stop_cleanly(name, child);
        }
        assert!(self.active().is_empty(), "{:?}", self.active());
    }

    /// `a` started with `--shards 4` and running all four, then `b`, and the four spread 2/2:
    /// the two supervisors and the active children (each child takes `stop_in` seconds to
    /// stop, none if empty).
    pub fn two_spread(&mut self, stop_in: &[&str]) -> (Child, Child, Vec<Line>) {
        let a = self.start("a", &["--shards", "4"], stop_in);
        self.wait_spread(PATIENCE, &[("a", 4)]);
        let b = self.start("b", &["--shards", "4"], stop_in);
        let spread = self.wait_spread(PATIENCE, &[("a", 2), ("b", 2)]);
        (a, b, spread)
    }

    /// The shards each label's children are active for, once every one of `want`'s counts
    /// holds (at most `bound`).
    pub fn wait_spread(&self, bound: Duration, want: &[(&str, usize)]) -> Vec<Line> {
        poll(bound, || {
            let active = self.active();
            let shards: BTreeSet<u32> = active.iter().map(|l| l.shard).collect();
            let spread = want
                .iter()
                .all(|(label, n)| active.iter().filter(|l| is_label(&l.id, label)).count() == *n);
            (spread && shards.len() == active.len()).then_some(active)
        })
        .unwrap_or_else(|| {
            panic!(
                "never spread as {want:?}; active {:?}\n{}\n{}",
                self.active(),
                self.world.stderr_of("a"),
                self.world.stderr_of("b")
            )
        })
    }

    /// The log's overlap lines: a child that found an earlier child of its shard running.
    pub fn overlaps(&self) -> Vec<Line> {
        self.lines()
            .into_iter()
            .filter(|l| l.kind == "overlap")
            .collect()
    }

    /// `shards status --json`.
    pub fn shards_status(&self) -> Value {
        let out = self.cli(&["shards", "status", "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("one JSON document")
    }

    /// Every shard's `(owner, ballot)` in `shards status --json`.
    pub fn owners(&self) -> BTreeMap<u32, (String, u64)> {
        let status = self.shards_status();
        status["shards"]
            .as_array()
            .expect("shards")
            .iter()
            .map(|s| {
                let shard = u32::try_from(s["shard"].as_u64().expect("shard")).expect("u32");
                let owner = s["owner"].as_str().unwrap_or("").to_owned();
                (shard, (owner, s["ballot"].as_u64().expect("ballot")))
            })
            .collect()
    }
}

/// How long after `since` every process of `pids` has stopped running (polled every
/// millisecond, for the figures), if within `bound`.
pub fn all_gone(pids: &[i32], since: Instant, bound: Duration) -> Option<Duration> {
    let deadline = since + bound;
    loop {
        if pids.iter().all(|pid| !running(*pid)) {
            return Some(since.elapsed());
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Stop before release: for each child of `moved`, the previous child of its shard logged its
/// stop (a polite stop after SIGTERM, not a kill) before `moved` started.
pub fn assert_stopped_first(lines: &[Line], moved: &[&Line]) {
    for next in moved {
        let start = lines
            .iter()
            .position(|l| l.kind == "start" && l.pid == next.pid)
            .expect("its start");
        let before = lines[..start]
            .iter()
            .rev()
            .find(|l| l.kind == "start" && l.shard == next.shard)
            .unwrap_or_else(|| panic!("no earlier child of shard {}", next.shard));
        let stopped = lines[..start]
            .iter()
            .any(|l| l.kind == "stop" && l.pid == before.pid);
        assert!(
            stopped,
            "shard {} moved to {} before {}'s child stopped: {lines:?}",
            next.shard, next.id, before.id
        );
    }
}

/// Each shard's children in the log, in order: their ballots never decrease, and a child of
/// another member than the previous one has a higher ballot (a new owner). The same member
/// may start a second child at one ballot: a restart, or a renewal confirmed late that
/// extended the same ownership.
pub fn assert_ballots_grow(lines: &[Line]) {
    let mut last: BTreeMap<u32, (u64, String)> = BTreeMap::new();
    for start in lines.iter().filter(|l| l.kind == "start") {
        if let Some((before, id)) = last.get(&start.shard) {
            let grew = start.ballot > *before || (start.ballot == *before && start.id == *id);
            assert!(
                grew,
                "shard {}: {} at ballot {} after {id} at {before}",
                start.shard, start.id, start.ballot
            );
        }
        last.insert(start.shard, (start.ballot, start.id.clone()));
    }
}

/// A light child for runs of many shards: `sh light_child.sh LOG` logs `start SHARD BALLOT ID
/// SHARDS PID ELECTION` and becomes a `sleep` (one process per child, which SIGTERM ends).
pub const LIGHT_CHILD: &str = r#"#!/bin/sh
echo "start $FDB_LEADER_SHARD $FDB_LEADER_BALLOT $FDB_LEADER_ID ${FDB_LEADER_SHARD_COUNT:--} $$ ${FDB_LEADER_ELECTION_NAME:--}" >> "$1"
exec sleep 1000
"#;

/// What a lone member of many shards did: how long after its start every shard had a child,
/// and each shard's children (their `start` lines) after a further `hold`.
pub struct LoneMember {
    /// From the supervisor's start until every shard had a child.
    pub all_started: Duration,
    /// Each shard's `start` lines, at the end of the hold.
    pub starts: BTreeMap<u32, Vec<Line>>,
    /// The supervisor's exit code after SIGTERM.
    pub code: Option<i32>,
    /// Its standard error.
    pub stderr: String,
}

impl LoneMember {
    /// The shards that started more than one child, with their starts.
    pub fn restarted(&self) -> Vec<(u32, Vec<(u64, i32)>)> {
        self.starts
            .iter()
            .filter(|(_, lines)| lines.len() > 1)
            .map(|(shard, lines)| (*shard, lines.iter().map(|l| (l.ballot, l.pid)).collect()))
            .collect()
    }

    /// The children started per second, from the supervisor's start.
    pub fn per_second(&self) -> f64 {
        self.starts.len() as f64 / self.all_started.as_secs_f64()
    }
}

impl Shards {
    /// Starts `fdb-leader STORE… --election jobs run --lease … --heartbeat … --name a --shards
    /// M -- sh light_child.sh LOG` (`store`: `--sqlite DB` if empty), waits until every shard
    /// has a child (at most `bound`), holds `hold` more, and stops it (SIGTERM; its exit code
    /// in [`LoneMember::code`], every child gone).
    pub fn lone_member(
        &mut self,
        store: &[&str],
        shards: u32,
        bound: Duration,
        hold: Duration,
    ) -> LoneMember {
        fs::write(self.world.path("light_child.sh"), LIGHT_CHILD).expect("child script");
        let mut command = Command::new(bin());
        if store.is_empty() {
            command.arg("--sqlite").arg(self.world.db());
        } else {
            command.args(store);
        }
        command
            .args(&self.common)
            .args(["--name", "a", "--shards", &shards.to_string(), "--"])
            .arg("sh")
            .arg(self.world.path("light_child.sh"))
            .arg(self.world.log());
        let started = Instant::now();
        let mut a = self.world.start(command, "a");
        let started_shards = || {
            self.lines()
                .iter()
                .filter(|l| l.kind == "start")
                .map(|l| l.shard)
                .collect::<BTreeSet<u32>>()
                .len()
        };
        let all = poll(bound, || {
            (started_shards() == shards as usize).then(|| started.elapsed())
        });
        let Some(all_started) = all else {
            let n = started_shards();
            self.world.stop_cleanly("a", &mut a);
            panic!(
                "{n} of {shards} shards had a child {bound:?} after the start:\n{}",
                tail(&self.world.stderr_of("a"))
            );
        };
        std::thread::sleep(hold);
        let mut starts: BTreeMap<u32, Vec<Line>> = BTreeMap::new();
        for line in self.lines().into_iter().filter(|l| l.kind == "start") {
            starts.entry(line.shard).or_default().push(line);
        }
        signal(&a, Signal::SIGTERM);
        let status = crate::cli_support::wait_exit(&mut a, PATIENCE).expect("exits after SIGTERM");
        assert!(self.active().is_empty(), "{:?}", self.active());
        LoneMember {
            all_started,
            starts,
            code: status.code(),
            stderr: self.world.stderr_of("a"),
        }
    }
}

/// The last lines of a log, for a failure's message.
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
