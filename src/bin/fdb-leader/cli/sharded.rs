//! `run --shards M`: the shard count's bounds, and the settings of `run` that only make sense
//! for the one leadership of a single election (refused with `--shards`, naming the flag or
//! its variable and the fix).

use clap::ArgMatches;

use super::{OnChildExit, RunArgs, Unhealthy, named};

/// The most shards `run --shards` accepts. Each shard this process owns runs a child of its
/// own under a watchdog of its own (and a task that tells the watchdog every renewal), and one
/// member may come to own every shard (the others died or were drained): a service with more
/// shards runs a `ShardedRunner` itself.
pub(crate) const MAX_RUN_SHARDS: u32 = 256;

/// The move limit (`max_concurrent_moves`) of a sharded election the command line creates
/// (`run --shards`, `config set --sharded --shards`): the library's default.
pub(crate) const MAX_CONCURRENT_MOVES: u32 = 8;

/// Parses `--shards M`: a whole number from 1 to [`MAX_RUN_SHARDS`].
pub(super) fn shard_count(text: &str) -> Result<u32, String> {
    let n: u32 = text.trim().parse().map_err(|_| {
        format!("not a number of shards (a whole number from 1 to {MAX_RUN_SHARDS})")
    })?;
    if n == 0 {
        return Err(format!(
            "a sharded election has at least 1 shard (1 to {MAX_RUN_SHARDS})"
        ));
    }
    if n > MAX_RUN_SHARDS {
        return Err(format!(
            "at most {MAX_RUN_SHARDS}: each shard this process owns runs a child and a watchdog \
             of its own, and one member may come to own them all; with more shards, run a \
             ShardedRunner in the service itself"
        ));
    }
    Ok(n)
}

/// Parses `config set --sharded --shards M`: a whole number from 1; the layout's own bound
/// ([`fdb_leader_election::shard::MAX_SHARDS`]) is checked when the layout is built. No
/// child per shard here: `run --shards`' lower bound does not apply to creating an election
/// that `ShardedRunner`s serve.
pub(super) fn layout_shard_count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(0) => Err("a sharded election has at least 1 shard".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err("not a number of shards (a whole number, at least 1)".to_owned()),
    }
}

/// The settings of `run` that only make sense for the one leadership of a single election, by
/// argument id, and why.
const SINGLE_ONLY: &[(&str, &str)] = &[
    (
        "try_once",
        "it gives up unless this process wins the one leadership, while a member of a sharded \
         election owns the share placement gives it",
    ),
    (
        "timeout",
        "it gives up unless this process is elected in time, while a member of a sharded \
         election owns the share placement gives it (possibly no shard at all)",
    ),
    (
        "payload",
        "it is published in the leader record of the single election, and a sharded election \
         has none (each child gets FDB_LEADER_SHARD and FDB_LEADER_BALLOT instead)",
    ),
    (
        "begin_command",
        "the hooks run around the one leadership; with --shards, do the setup at the start of \
         CMD, which runs once per owned shard",
    ),
    (
        "end_command",
        "the hooks run around the one leadership; with --shards, clean up in CMD before it \
         exits on SIGTERM",
    ),
    (
        "error_timeout",
        "it campaigns again after a failed begin-command, and --shards runs no hooks (a child \
         that cannot be started ends the run with exit code 4)",
    ),
    (
        "health_command",
        "it checks the one leader's child, and a member runs one child per owned shard: check \
         this member's readiness with --ready-command or --ready-url instead (an unready \
         member's shards move away)",
    ),
    (
        "health_url",
        "it checks the one leader's child, and a member runs one child per owned shard: check \
         this member's readiness with --ready-command or --ready-url instead (an unready \
         member's shards move away)",
    ),
];

/// Whether the setting `id` of `run` stands (after the exclusive groups were decided).
fn is_set(run: &RunArgs, id: &str) -> bool {
    match id {
        "try_once" => run.try_once,
        "timeout" => run.timeout.is_some(),
        "payload" => run.payload.is_some(),
        "begin_command" => run.begin_command.is_some(),
        "end_command" => run.end_command.is_some(),
        "error_timeout" => run.error_timeout.is_some(),
        "health_command" => run.health_command.is_some(),
        "health_url" => run.health_url.is_some(),
        "weight" => run.weight.is_some(),
        _ => false,
    }
}

/// Why `run`'s settings cannot go together with `--shards`, if they cannot: a setting of the
/// single election, `--on-child-exit resign` or `--unhealthy release` with `--shards`, or
/// `--weight` without it.
/// `command`: the whole command line (for the names of `run`'s flags and variables).
pub(super) fn conflict(command: &clap::Command, m: &ArgMatches, run: &RunArgs) -> Option<String> {
    let run_command = command.find_subcommand("run")?;
    if run.shards.is_none() {
        if is_set(run, "weight") {
            let (weight, fix) = named(run_command, m, "weight");
            return Some(format!(
                "{weight} needs --shards M: a weight is a member's share of a sharded \
                 election's shards ({fix}, or add --shards M)"
            ));
        }
        return None;
    }
    let (shards, _) = named(run_command, m, "shards");
    for (id, why) in SINGLE_ONLY {
        if is_set(run, id) {
            let (flag, fix) = named(run_command, m, id);
            return Some(format!("{flag} cannot be used with {shards}: {why}; {fix}"));
        }
    }
    if run.on_child_exit == Some(OnChildExit::Resign) {
        let (flag, fix) = named(run_command, m, "on_child_exit");
        return Some(format!(
            "{flag} resign cannot be used with {shards}: it hands the one leadership over, and \
             a member of a sharded election cannot hand over one shard by itself (placement \
             decides who owns what); with --shards a shard's child that exits is restarted \
             after a back-off while this process owns the shard (restart, the default), or ends \
             the run (exit); {fix}, or choose one of those"
        ));
    }
    if run.unhealthy == Unhealthy::Release {
        let (flag, fix) = named(run_command, m, "unhealthy");
        return Some(format!(
            "{flag} release cannot be used with {shards}: a member that is not eligible counts \
             as weight 0, and its shards move only to eligible members, each once its move \
             lands; with no member eligible it keeps them (hold is what a sharded election \
             does); {fix}"
        ));
    }
    None
}
