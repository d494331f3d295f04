//! `run`'s check timings (`--health-interval`, `--health-timeout`, `--health-fall`,
//! `--health-rise`) say how its checks run: given without any check, they would be ignored,
//! so they are refused, naming each (or its variable) and the fix.

use clap::ArgMatches;

use super::{RunArgs, named, origin};

/// The settings of how the checks run, by argument id.
const TIMINGS: &[&str] = &[
    "health_interval",
    "health_timeout",
    "health_fall",
    "health_rise",
];

/// Why the check timings given cannot be used, if they cannot: `run` has no check for them
/// (no `--ready-command`, `--ready-url`, `--health-command` or `--health-url`). `command`: the
/// whole command line (for the names of `run`'s flags and variables).
pub(super) fn conflict(command: &clap::Command, m: &ArgMatches, run: &RunArgs) -> Option<String> {
    let has_check = run.ready_command.is_some()
        || run.ready_url.is_some()
        || run.health_command.is_some()
        || run.health_url.is_some();
    if has_check {
        return None;
    }
    let run_command = command.find_subcommand("run")?;
    let (flags, fixes): (Vec<String>, Vec<String>) = TIMINGS
        .iter()
        .filter(|id| origin(m, id).is_some())
        .map(|id| named(run_command, m, id))
        .unzip();
    if flags.is_empty() {
        return None;
    }
    let (which, say, it) = if flags.len() == 1 {
        (flags.join(""), "says", "it")
    } else {
        (flags.join(", "), "say", "they")
    };
    let add = if run.shards.is_some() {
        "add the readiness check they are for (--ready-command CMD or --ready-url URL: with \
         --shards, a member has no leader health check)"
    } else {
        "add the check they are for (--ready-command CMD or --ready-url URL, run on every \
         candidate: can this host lead?; --health-command CMD or --health-url URL, run only \
         while leading, against the child)"
    };
    Some(format!(
        "{which} {say} how the health checks run, and this run has none, so {it} would be \
         ignored: {add}, or {}",
        fixes.join(" and ")
    ))
}
