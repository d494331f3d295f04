//! `chaos`: a Jepsen-style test of `fdb-leader run` with real processes, real clocks and real
//! signals (see the crate's README, "The chaos harness").
//!
//! ```text
//! cargo run --release -p fdb-leader-election-simulation --bin chaos -- \
//!     --fdb-leader PATH [--seconds N] [--seed S] [--candidates K] [--plant NAME] \
//!     [--shards M] [--timeline FILE.svg] [--fdb-dir D | --cluster-file F]
//! ```
//!
//! Exits 0 only if every check passed; 1 if a check failed; 2 if the harness could not run.
//! The last line is the summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use fdb_leader_election_simulation::chaos::child::{ChildArgs, run_child};
use fdb_leader_election_simulation::chaos::harness::{Status, run_chaos};
use fdb_leader_election_simulation::chaos::report::analyze;
use fdb_leader_election_simulation::chaos::sink::Fencing;
use fdb_leader_election_simulation::chaos::{ChaosOptions, ChaosPlant, ChaosStore, Settings};
use fdb_leader_election_simulation::progress::{Progress, interactive};
use fdb_leader_election_simulation::timeline::from_chaos;

/// Chaos test of `fdb-leader run`: real processes, signals, store outages, fake clocks.
#[derive(Debug, Parser)]
#[command(name = "chaos", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// A built `fdb-leader` (cargo build --release --features cli --bin fdb-leader).
    #[arg(long, value_name = "PATH")]
    fdb_leader: Option<PathBuf>,
    /// How long to inject faults, in seconds.
    #[arg(long, default_value_t = 90)]
    seconds: u64,
    /// The seed of the fault schedule (default: drawn from the clock, and printed).
    #[arg(long)]
    seed: Option<u64>,
    /// How many candidates.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=8))]
    candidates: u32,
    /// A planted fault (see --list-plants): the check it targets must fail.
    #[arg(long, value_parser = parse_plant)]
    plant: Option<ChaosPlant>,
    /// List the plants and the check each must make fail, and exit.
    #[arg(long)]
    list_plants: bool,
    /// Draw the run to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    timeline: Option<PathBuf>,
    /// The libfaketime to preload for clock-rate faults (default: the installed one).
    #[arg(long, value_name = "PATH")]
    libfaketime: Option<PathBuf>,
    /// Keep the run's directory (store, sinks, every process's log) even if it passed.
    #[arg(long)]
    keep: bool,
    /// Run on FoundationDB: start a cluster of 5 `fdbserver` processes (double redundancy, 3
    /// coordinators) from this install (bin/fdbserver, bin/fdbcli), and hurt it too.
    #[arg(long, value_name = "D", conflicts_with = "cluster_file")]
    fdb_dir: Option<PathBuf>,
    /// Run on the FoundationDB cluster of this cluster file (supervisor faults only).
    #[arg(long, value_name = "F")]
    cluster_file: Option<PathBuf>,
    /// `fdbcli`, for the probe on --cluster-file (default: the one on PATH).
    #[arg(long, value_name = "PATH", default_value = "fdbcli")]
    fdbcli: PathBuf,
    /// The project's scripts/fdb-local, which starts and stops the cluster of --fdb-dir.
    #[arg(long, value_name = "PATH", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/fdb-local"))]
    fdb_local: PathBuf,
    /// Sharded mode: the supervisors run `fdb-leader run --shards M` (one child per owned
    /// shard, each with its own sinks), and every check is made per shard.
    #[arg(long, value_name = "M", value_parser = clap::value_parser!(u32).range(1..=64))]
    shards: Option<u32>,
    /// An environment variable for every supervisor, NAME=VALUE (repeatable): for example a
    /// planted fault's switch, to show that a release build ignores it.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_env)]
    supervisor_env: Vec<(String, String)>,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .filter(|(name, _)| !name.is_empty())
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{s:?}: expected NAME=VALUE"))
}

fn parse_plant(s: &str) -> Result<ChaosPlant, String> {
    s.parse()
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// The child `fdb-leader run` starts (internal).
    #[command(hide = true)]
    Child(ChildCli),
}

#[derive(Debug, Args)]
struct ChildCli {
    #[arg(long)]
    socket: PathBuf,
    #[arg(long)]
    sink_dir: PathBuf,
    #[arg(long)]
    slot: u32,
    #[arg(long)]
    incarnation: u32,
    #[arg(long, default_value_t = 5000)]
    interval_us: u64,
    #[arg(long, default_value = "fenced")]
    fencing: String,
}

fn child(c: &ChildCli) -> ExitCode {
    let args = ChildArgs {
        socket: c.socket.clone(),
        sink_dir: c.sink_dir.clone(),
        slot: c.slot,
        incarnation: c.incarnation,
        interval: Duration::from_micros(c.interval_us.max(100)),
        fencing: if c.fencing == "unfenced" {
            Fencing::Unfenced
        } else {
            Fencing::Fenced
        },
    };
    match run_child(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chaos child: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Mode::Child(c)) = &cli.mode {
        return child(c);
    }
    if cli.list_plants {
        for p in ChaosPlant::ALL {
            println!("{p} {} {}", p.target(), p.store());
        }
        return ExitCode::SUCCESS;
    }
    let Some(fdb_leader) = cli.fdb_leader.clone() else {
        eprintln!("chaos: --fdb-leader PATH is required (a built fdb-leader)");
        return ExitCode::from(2);
    };
    let seed = cli.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() % 100_000)
    });
    let options = ChaosOptions {
        fdb_leader,
        seconds: cli.seconds,
        seed,
        candidates: cli.candidates,
        plant: cli.plant,
        libfaketime: cli.libfaketime.clone(),
        dir: None,
        store: match (&cli.fdb_dir, &cli.cluster_file) {
            (Some(install), _) => ChaosStore::Fdb {
                install: install.clone(),
                fdb_local: cli.fdb_local.clone(),
            },
            (None, Some(file)) => ChaosStore::ClusterFile {
                file: file.clone(),
                fdbcli: cli.fdbcli.clone(),
            },
            (None, None) => ChaosStore::Sqlite,
        },
        supervisor_env: cli.supervisor_env.clone(),
        shards: cli.shards,
    };
    let s = Settings::default();
    let store = match (&cli.fdb_dir, &cli.cluster_file) {
        (Some(d), _) => format!("fdb (a cluster of its own from {})", d.display()),
        (None, Some(f)) => format!("fdb ({})", f.display()),
        (None, None) => "sqlite".to_owned(),
    };
    let (shards, bound) = match cli.shards {
        Some(m) => (format!(" shards={m}"), s.sharded_recovery_bound()),
        None => (String::new(), s.recovery_bound()),
    };
    println!(
        "chaos: store={store} seed={seed} candidates={}{shards} seconds={} plant={} lease={}ms \
         heartbeat={}ms rho={}ppm (clock-rate faults within rho/2 per supervisor) \
         report_interval={}ms recovery_bound={}ms",
        cli.candidates,
        cli.seconds,
        cli.plant
            .map_or_else(|| "none".to_owned(), |p| p.to_string()),
        s.lease.as_millis(),
        s.heartbeat.as_millis(),
        s.rho_ppm,
        s.report_interval.as_millis(),
        bound.as_millis()
    );
    let mut progress = Progress::new("chaos", cli.seconds, "s", interactive());
    let mut on_status = |st: Status| {
        progress.update(
            st.elapsed.min(st.total),
            &format!("faults={} ballot={}", st.faults, st.ballot),
        );
    };
    let run = run_chaos(&options, &mut on_status);
    progress.finish();
    let run = match run {
        Ok(run) => run,
        Err(e) => {
            eprintln!("chaos: {e}");
            return ExitCode::from(2);
        }
    };
    let report = analyze(&run);
    if let Some(path) = &cli.timeline {
        match from_chaos(&run, &report).write_svg(path) {
            Ok(()) => println!("timeline: {}", path.display()),
            Err(e) => eprintln!("chaos: {e}"),
        }
    }
    for line in report.failure_lines() {
        println!("{line}");
    }
    let notes: String = report
        .fault_notes
        .iter()
        .map(|n| format!("{n}\n"))
        .collect();
    let _ = std::fs::write(run.dir.join("faults.log"), notes);
    let passed = report.passed();
    if passed && !cli.keep {
        let _ = std::fs::remove_dir_all(&run.dir);
    } else {
        println!("run directory (store, sinks, logs): {}", run.dir.display());
    }
    if !passed {
        let mut cmd = format!(
            "cargo run --release -p fdb-leader-election-simulation --bin chaos -- --fdb-leader {} \
             --seconds {} --seed {seed} --candidates {}",
            options.fdb_leader.display(),
            cli.seconds,
            cli.candidates
        );
        if let Some(p) = cli.plant {
            cmd.push_str(&format!(" --plant {p}"));
        }
        if let Some(m) = cli.shards {
            cmd.push_str(&format!(" --shards {m}"));
        }
        if let Some(d) = &cli.fdb_dir {
            cmd.push_str(&format!(" --fdb-dir {}", d.display()));
        }
        if let Some(f) = &cli.cluster_file {
            cmd.push_str(&format!(" --cluster-file {}", f.display()));
        }
        for (name, value) in &cli.supervisor_env {
            cmd.push_str(&format!(" --supervisor-env {name}={value}"));
        }
        println!("rerun (same fault schedule; process timing differs): {cmd}");
    }
    for line in report.detail_lines() {
        println!("{line}");
    }
    println!("{}", report.summary());
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
