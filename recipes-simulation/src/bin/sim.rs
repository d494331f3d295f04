//! `sim`: runs seeds of the deterministic simulation and prints a summary.
//!
//! ```text
//! cargo run --release -p fdb-leader-election-simulation --bin sim -- \
//!     [--sharded] [--seeds N] [--seed S] [--plant NAME] [--list-plants] [--sim-seconds T] [--jobs J] [--trace]
//!     [--timeline FILE.svg]
//! ```
//!
//! Exits 0 only if every seed passed; the last line is the summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use clap::Parser;
use fdb_leader_election_simulation::oracles::OracleId;
use fdb_leader_election_simulation::progress::{Progress, interactive};
use fdb_leader_election_simulation::sharded::run_seed as run_sharded_seed;
use fdb_leader_election_simulation::timeline::from_sim_trace;
use fdb_leader_election_simulation::{
    Campaign, Options, Plant, ShardPlant, run_campaign_with_progress, run_seed,
};

/// Deterministic simulation of fdb-leader-election under faults.
#[derive(Debug, Parser)]
#[command(name = "sim", version, about)]
struct Args {
    /// How many consecutive seeds to run (from --seed, default 0). Default: 1 with --seed, else 100.
    #[arg(long)]
    seeds: Option<u64>,
    /// The (first) seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Run with this planted fault (see --list-plants); catching it is a violation.
    #[arg(long)]
    plant: Option<String>,
    /// Run the sharded world (DESIGN §12): members, coordinators and oracles per shard.
    #[arg(long)]
    sharded: bool,
    /// List the planted faults, one per line, and exit.
    #[arg(long)]
    list_plants: bool,
    /// Simulated seconds per seed.
    #[arg(long, default_value_t = 120)]
    sim_seconds: u64,
    /// Worker threads (default: the machine's parallelism).
    #[arg(long)]
    jobs: Option<usize>,
    /// Print the whole trace of each seed (use with --seed).
    #[arg(long)]
    trace: bool,
    /// Only this oracle's violations stop a seed (name or number; the others are logged).
    #[arg(long, value_parser = parse_oracle)]
    oracle: Option<OracleId>,
    /// Keep running seeds after a violation and count every failing seed.
    #[arg(long)]
    keep_going: bool,
    /// Draw the (first) seed's timeline to this SVG file: one lane per node, leadership
    /// coloured by ballot, faults, outages, overlaps.
    #[arg(long, value_name = "FILE.svg")]
    timeline: Option<PathBuf>,
}

fn parse_oracle(s: &str) -> Result<OracleId, String> {
    s.parse()
}

fn usage(e: &str) -> ExitCode {
    eprintln!("sim: {e}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list_plants {
        if args.sharded {
            for p in ShardPlant::ALL {
                println!("{p}");
            }
        } else {
            for p in Plant::ALL {
                println!("{p}");
            }
        }
        return ExitCode::SUCCESS;
    }
    let (plant, shard_plant) = match (&args.plant, args.sharded) {
        (None, _) => (None, None),
        (Some(name), false) => match name.parse::<Plant>() {
            Ok(p) => (Some(p), None),
            Err(e) => return usage(&e),
        },
        (Some(name), true) => match name.parse::<ShardPlant>() {
            Ok(p) => (None, Some(p)),
            Err(e) => return usage(&e),
        },
    };
    let options = Options {
        sim_seconds: args.sim_seconds,
        plant,
        keep_trace: args.trace,
        only_oracle: args.oracle,
        sharded: args.sharded,
        shard_plant,
    };
    let run_seed = |seed: u64, options: &Options| {
        if options.sharded {
            run_sharded_seed(seed, options)
        } else {
            run_seed(seed, options)
        }
    };
    let first_seed = args.seed.unwrap_or(0);
    let seeds = args
        .seeds
        .unwrap_or(if args.seed.is_some() { 1 } else { 100 });
    if args.trace {
        for i in 0..seeds {
            let outcome = run_seed(first_seed.wrapping_add(i), &options);
            for line in outcome.trace.as_deref().unwrap_or_default() {
                println!("{line}");
            }
        }
    }
    if let Some(path) = &args.timeline {
        let traced = Options {
            keep_trace: true,
            ..options.clone()
        };
        let outcome = run_seed(first_seed, &traced);
        let timeline = from_sim_trace(first_seed, outcome.trace.as_deref().unwrap_or_default());
        if let Err(e) = timeline.write_svg(path) {
            eprintln!("sim: {e}");
            return ExitCode::FAILURE;
        }
        eprintln!("timeline of seed {first_seed}: {}", path.display());
    }
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let progress = Mutex::new(Progress::new("sim", seeds, "seeds", interactive()));
    let report = run_campaign_with_progress(
        &Campaign {
            first_seed,
            seeds,
            jobs,
            options,
            keep_going: args.keep_going,
        },
        &|done| {
            if let Ok(mut p) = progress.lock() {
                p.update(done, "");
            }
        },
    );
    if let Ok(mut p) = progress.lock() {
        p.finish();
    }
    if let Some(text) = report.failure_text() {
        print!("{text}");
    }
    for line in report.detail_lines() {
        println!("{line}");
    }
    println!("{}", report.summary());
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
