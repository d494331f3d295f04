//! The chaos sink under writers killed mid-write (issue 18): hundreds of real child processes
//! (the `chaos` binary in child mode, exactly as `fdb-leader run` starts it) write to one sink
//! while the test kills them with SIGTERM or SIGKILL at random instants. Check (a) must find
//! nothing on the fenced sink, and must still catch the unfenced shadow sink's lost updates
//! and a planted stale write.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fdb_leader_election_simulation::chaos::checks::fencing::check_sink;
use fdb_leader_election_simulation::chaos::child::{FENCED_SINK, SHADOW_SINK};
use fdb_leader_election_simulation::chaos::sink::{
    Fencing, Outcome, Sink, Writer, log_path, read_log,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How many writers are killed.
const KILLS: u32 = 1_500;
/// How many write at once.
const CONCURRENT: usize = 3;

/// A writer: the chaos child with its own ballot, killed on drop if still running.
struct Proc {
    process: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn start(dir: &Path, socket: &Path, ballot: u64) -> Proc {
    let process = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["child", "--slot", "0", "--interval-us", "100"])
        .arg("--incarnation")
        .arg(ballot.to_string())
        .arg("--socket")
        .arg(socket)
        .arg("--sink-dir")
        .arg(dir)
        .env("FDB_LEADER_BALLOT", ballot.to_string())
        .env("FDB_LEADER_ID", format!("w{ballot}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a chaos child");
    Proc { process }
}

fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("sink-kills-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn writers_killed_at_random_instants_leave_no_false_violation_and_plants_are_still_caught() {
    let dir = temp_dir();
    let socket_path = dir.join("reports.sock");
    // The children report here; nobody reads (a full socket drops reports, as in the harness).
    let _socket = UnixDatagram::bind(&socket_path).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    let mut next_ballot = 1u64;
    let mut live: Vec<Proc> = Vec::new();
    let (mut terms, mut kills) = (0u32, 0u32);
    for _ in 0..CONCURRENT {
        live.push(start(&dir, &socket_path, next_ballot));
        next_ballot += 1;
    }
    for _ in 0..KILLS {
        std::thread::sleep(Duration::from_micros(rng.random_range(0..3_000)));
        let victim = rng.random_range(0..live.len());
        let mut w = live.swap_remove(victim);
        let pid = Pid::from_raw(i32::try_from(w.process.id()).unwrap());
        let signal = if rng.random_bool(0.5) {
            terms += 1;
            Signal::SIGTERM
        } else {
            kills += 1;
            Signal::SIGKILL
        };
        kill(pid, signal).unwrap();
        w.process.wait().unwrap();
        live.push(start(&dir, &socket_path, next_ballot));
        next_ballot += 1;
    }
    drop(live);

    let fenced = read_log(&log_path(&dir, FENCED_SINK)).unwrap();
    let verdict = check_sink(&fenced);
    eprintln!(
        "{KILLS} writers killed ({terms} SIGTERM, {kills} SIGKILL): accepted={} \
         rejected_stale={} cut_writes={} violations={}",
        verdict.accepted, verdict.rejected_stale, verdict.cut_writes, verdict.violation_count
    );
    assert_eq!(verdict.violation_count, 0, "{:?}", verdict.violations);
    assert!(terms > 500 && kills > 500);
    assert!(verdict.accepted > 2_000, "too few writes to mean anything");
    assert!(
        verdict.rejected_stale > 0,
        "stale writers were never refused"
    );

    // The unfenced shadow sink took the same writers' writes: their blind writes undo each
    // other, and check (a) says so (the plant `unfenced-sink` judges that sink).
    let shadow = check_sink(&read_log(&log_path(&dir, SHADOW_SINK)).unwrap());
    assert!(shadow.out_of_order > 0 && shadow.lost > 0, "{shadow:?}");
    assert!(shadow.violation_count > 0);

    // A planted stale write: a writer that skips the fence lands ballot 1 after the last
    // ballot wrote. Check (a) catches it.
    let mut rogue = Sink::open(&dir, FENCED_SINK, Fencing::Unfenced).unwrap();
    let got = rogue
        .write(
            &mut Writer::default(),
            1,
            "rogue",
            Duration::from_secs(1),
            || 0,
        )
        .unwrap();
    assert!(matches!(got, Some(Outcome::Accepted { .. })));
    let planted = check_sink(&read_log(&log_path(&dir, FENCED_SINK)).unwrap());
    assert_eq!(planted.out_of_order, 1);
    assert!(
        planted
            .violations
            .iter()
            .any(|v| v.contains("ballot 1 (rogue) accepted after ballot"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}
