//! The child mode: the command `fdb-leader run` runs while it leads. It does fenced work (a
//! write to the sink every tick, and the same write to an unfenced shadow sink) and reports
//! "alive, ballot B" to the harness every tick, until its supervisor stops it.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

use super::clock::monotonic_ns;
use super::proto::Report;
use super::sink::{Fencing, Sink, Writer};

/// The name of the sink the checks judge.
pub const FENCED_SINK: &str = "fenced";
/// The name of the unfenced shadow sink (what fencing buys).
pub const SHADOW_SINK: &str = "shadow";

/// The names of the judged and the shadow sink of a lane: `fenced` and `shadow` under a single
/// election; `fenced-S` and `shadow-S` for shard `S` (each shard is its own resource, fenced by
/// its own ballots).
pub fn sink_names(shard: Option<u32>) -> (String, String) {
    match shard {
        None => (FENCED_SINK.to_owned(), SHADOW_SINK.to_owned()),
        Some(s) => (format!("{FENCED_SINK}-{s}"), format!("{SHADOW_SINK}-{s}")),
    }
}

/// How the harness starts a child.
#[derive(Clone, Debug)]
pub struct ChildArgs {
    /// The harness's report socket.
    pub socket: PathBuf,
    /// The directory of the sinks.
    pub sink_dir: PathBuf,
    /// The slot (lane) of the supervisor.
    pub slot: u32,
    /// The supervisor's incarnation.
    pub incarnation: u32,
    /// The tick: one report and one write per sink.
    pub interval: Duration,
    /// Whether the judged sink checks ballots (`Unfenced` only under the plant).
    pub fencing: Fencing,
}

/// Whether this process inherited the fake clock (it must not).
pub fn fake_clock_inherited() -> bool {
    let preload = std::env::var("LD_PRELOAD").unwrap_or_default();
    preload.contains("faketime") || std::env::var_os("FAKETIME").is_some()
}

/// Runs the child until it is stopped (or the harness is gone).
pub fn run_child(args: &ChildArgs) -> Result<(), String> {
    let ballot: u64 = std::env::var("FDB_LEADER_BALLOT")
        .map_err(|_| "FDB_LEADER_BALLOT is not set: run me under `fdb-leader run`".to_owned())?
        .parse()
        .map_err(|e| format!("FDB_LEADER_BALLOT: {e}"))?;
    let candidate = std::env::var("FDB_LEADER_ID").unwrap_or_else(|_| "unknown".to_owned());
    // Under `run --shards`: the shard this child works for.
    let shard: Option<u32> = match std::env::var("FDB_LEADER_SHARD") {
        Ok(s) => Some(s.parse().map_err(|e| format!("FDB_LEADER_SHARD: {e}"))?),
        Err(_) => None,
    };
    let clean_clock = !fake_clock_inherited();
    let socket = UnixDatagram::unbound().map_err(|e| format!("socket: {e}"))?;
    socket
        .set_nonblocking(true)
        .map_err(|e| format!("socket: {e}"))?;
    let open = |name: &str, fencing| {
        Sink::open(&args.sink_dir, name, fencing).map_err(|e| format!("sink {name}: {e}"))
    };
    let (fenced_name, shadow_name) = sink_names(shard);
    let mut fenced = open(&fenced_name, args.fencing)?;
    let mut shadow = open(&shadow_name, Fencing::Unfenced)?;
    let (mut fenced_writer, mut shadow_writer) = (Writer::default(), Writer::default());
    let pid = i32::try_from(std::process::id()).unwrap_or(0);
    let pgid = nix::unistd::getpgrp().as_raw();
    let patience = args.interval.checked_div(2).unwrap_or_default();
    let mut gone = 0u32;
    let mut seq = 0u64;
    loop {
        let sent_ns = monotonic_ns();
        let report = Report {
            slot: args.slot,
            incarnation: args.incarnation,
            pid,
            pgid,
            ballot,
            sent_ns,
            seq,
            clean_clock,
            shard,
        };
        match socket.send_to(report.encode().as_bytes(), &args.socket) {
            Ok(_) => gone = 0,
            // The harness is busy: this report is lost, the next one goes.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => {
                gone = gone.saturating_add(1);
                if gone > 100 {
                    return Err("the harness is gone".to_owned());
                }
            }
        }
        seq = seq.saturating_add(1);
        fenced
            .write(
                &mut fenced_writer,
                ballot,
                &candidate,
                patience,
                monotonic_ns,
            )
            .map_err(|e| format!("sink: {e}"))?;
        shadow
            .write(
                &mut shadow_writer,
                ballot,
                &candidate,
                patience,
                monotonic_ns,
            )
            .map_err(|e| format!("shadow sink: {e}"))?;
        let next = sent_ns.saturating_add(super::clock::ns(args.interval));
        let now = monotonic_ns();
        if next > now {
            std::thread::sleep(Duration::from_nanos(next.saturating_sub(now)));
        }
    }
}
