//! The command line, as clap parses it.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

mod check_timings;
mod commands;
mod help;
mod run_args;
mod sharded;

pub(crate) use commands::{
    ConfigCommand, ConfigSetArgs, EligibleArgs, OperatorArgs, ResignArgs, ShardsCommand,
    ShardsMoveArgs, StatusArgs, Switch, WatchArgs,
};
pub(crate) use run_args::{OnChildExit, RunArgs, Unhealthy};
pub(crate) use sharded::{MAX_CONCURRENT_MOVES, MAX_RUN_SHARDS};

use help::{
    ABOUT, CONFIG_AFTER_HELP, EXIT_CODES, FORCE_VACATE_AFTER_HELP, LONG_ABOUT, RESIGN_AFTER_HELP,
    RUN_AFTER_HELP, SHARDS_AFTER_HELP, STATUS_AFTER_HELP,
};

/// `fdb-leader`: leader election from the shell.
#[derive(Debug, Parser)]
#[command(
    name = "fdb-leader",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXIT_CODES,
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) store: StoreArgs,

    /// The election's name: elections with different names are independent.
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        default_value = "default",
        env = "FDB_LEADER_ELECTION"
    )]
    pub(crate) election: String,

    /// Accept a SQLite store on a network file system (NFS, SMB/CIFS, FUSE, 9p, ...). SQLite's
    /// locking is unreliable there, so two leaders could both commit; only for a file system
    /// known to lock correctly.
    #[arg(long, global = true, env = "FDB_LEADER_ALLOW_NETWORK_FS", value_parser = BoolishValueParser::new())]
    pub(crate) allow_network_fs: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Where the election lives: at most one of these (see [`Cli::parse_args`] for how the
/// command line and the environment combine).
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// A SQLite file shared by the processes of one host (the embedded default store). It
    /// must be on a local file system, in a writable directory.
    #[arg(long, global = true, value_name = "PATH", env = "FDB_LEADER_SQLITE")]
    pub(crate) sqlite: Option<PathBuf>,

    /// A FoundationDB cluster file (needs a build with an fdb-7_* feature and libfdb_c).
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        env = "FDB_LEADER_CLUSTER_FILE"
    )]
    pub(crate) cluster_file: Option<PathBuf>,

    /// An in-process store, gone when the process exits: a single-process demo.
    #[arg(long, global = true, env = "FDB_LEADER_MEMORY", value_parser = BoolishValueParser::new())]
    pub(crate) memory: bool,
}

/// Groups of settings of which at most one may be set; the first element of each is the
/// subcommand path where they are (empty: global).
const EXCLUSIVE: &[(&[&str], &[&str])] = &[
    (&[], &["sqlite", "cluster_file", "memory"]),
    (&["run"], &["timeout", "try_once"]),
];

/// Where a setting of an exclusive group came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Typed on the command line.
    Flag,
    /// From its environment variable.
    Env,
}

/// Decides a group of settings of which at most one may be set, given where each one set
/// came from: a pure decision. A flag on the command line wins over the others from the
/// environment; two flags, or two variables and no flag, conflict. `Ok`: the index of the
/// one that stands (the others are dropped), if any.
pub(crate) fn decide(set: &[Origin]) -> Result<Option<usize>, Conflict> {
    let flags: Vec<usize> = (0..set.len())
        .filter(|&i| set.get(i) == Some(&Origin::Flag))
        .collect();
    match (flags.as_slice(), set.len()) {
        ([], 0) => Ok(None),
        ([], 1) => Ok(Some(0)),
        ([], _) => Err(Conflict::Env),
        ([one], _) => Ok(Some(*one)),
        _ => Err(Conflict::Flags),
    }
}

/// Why an exclusive group is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// Two of them were typed on the command line.
    Flags,
    /// No flag was typed, and several come from the environment.
    Env,
}

impl Cli {
    /// Parses `argv`. A flag on the command line wins over the settings of its group that come
    /// from the environment: with `FDB_LEADER_SQLITE` set, `--memory` picks the in-memory
    /// store; with `FDB_LEADER_TIMEOUT` set, `run --try` tries once. Two flags of one group on
    /// the command line conflict, and so do two variables of one group with no flag to
    /// decide. A boolean variable set to `false` sets nothing.
    pub(crate) fn parse_args<I, T>(argv: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
        let mut command = Cli::command();
        let matches = command
            .try_get_matches_from_mut(&argv)
            .map_err(|e| suggest(&command, &argv, e))?;
        let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))?;
        for (path, ids) in EXCLUSIVE {
            let Some((sub, m)) = descend(&command, &matches, path) else {
                continue;
            };
            let set: Vec<(&str, Origin)> = ids
                .iter()
                .filter_map(|id| origin(m, id).map(|o| (*id, o)))
                .collect();
            let origins: Vec<Origin> = set.iter().map(|(_, o)| *o).collect();
            let described = |origin: Origin| {
                let names: Vec<String> = set
                    .iter()
                    .filter(|(_, o)| *o == origin)
                    .map(|(id, _)| describe(sub, id, origin))
                    .collect();
                match names.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} and {last}", rest.join(", "))
                    }
                    _ => names.join(""),
                }
            };
            match decide(&origins) {
                Ok(winner) => {
                    let winner = winner.and_then(|i| set.get(i)).map(|(id, _)| *id);
                    for (id, _) in &set {
                        if Some(*id) != winner {
                            cli.unset(id);
                        }
                    }
                }
                Err(Conflict::Flags) => {
                    return Err(command.error(
                        clap::error::ErrorKind::ArgumentConflict,
                        format!(
                            "{} cannot be used together: choose one",
                            described(Origin::Flag)
                        ),
                    ));
                }
                Err(Conflict::Env) => {
                    return Err(command.error(
                        clap::error::ErrorKind::ArgumentConflict,
                        format!(
                            "{} are set in the environment: unset all but one, or choose on \
                             the command line (a flag wins over the environment)",
                            described(Origin::Env)
                        ),
                    ));
                }
            }
        }
        if let (Command::Run(run), Some(("run", m))) = (&cli.command, matches.subcommand()) {
            let conflict = sharded::conflict(&command, m, run)
                .or_else(|| check_timings::conflict(&command, m, run));
            if let Some(message) = conflict {
                // The usage line of `run`, not of the whole command line.
                let mut sub = command
                    .find_subcommand("run")
                    .cloned()
                    .unwrap_or_else(|| command.clone());
                return Err(sub.error(clap::error::ErrorKind::ArgumentConflict, message));
            }
        }
        Ok(cli)
    }

    /// Drops the setting `id` (one an exclusive group's decision overrode).
    fn unset(&mut self, id: &str) {
        match id {
            "sqlite" => self.store.sqlite = None,
            "cluster_file" => self.store.cluster_file = None,
            "memory" => self.store.memory = false,
            _ => {}
        }
        if let Command::Run(run) = &mut self.command {
            match id {
                "timeout" => run.timeout = None,
                "try_once" => run.try_once = false,
                _ => {}
            }
        }
    }
}

/// An unknown flag, with a better suggestion where one of the subcommand's own flags ends with
/// the word typed (`resign --ballot` → `--expected-ballot`): clap's measure of similarity
/// would rather name a global flag (`--allow-network-fs`).
fn suggest(command: &clap::Command, argv: &[OsString], mut error: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return error;
    }
    let word = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(typed)) => match typed.strip_prefix("--") {
            Some(flag) => flag.split('=').next().unwrap_or(flag).to_owned(),
            None => return error,
        },
        _ => return error,
    };
    // The innermost subcommand the command line names.
    let mut sub = command;
    for arg in argv.iter().skip(1) {
        if let Some(next) = arg.to_str().and_then(|a| sub.find_subcommand(a)) {
            sub = next;
        }
    }
    if sub.get_name() == "run" {
        // clap's other tip, to pass the flag as the command after `--`, is never what a
        // mistyped option of `run` needs.
        error.insert(ContextKind::Suggested, ContextValue::StyledStrs(Vec::new()));
    }
    let ending = format!("-{word}");
    let mut flags = sub
        .get_arguments()
        .filter_map(clap::Arg::get_long)
        .filter(|long| long.ends_with(&ending));
    if let (Some(flag), None) = (flags.next(), flags.next()) {
        error.insert(
            ContextKind::SuggestedArg,
            ContextValue::String(format!("--{flag}")),
        );
        // clap's usage line showed its own suggestion as if typed: the subcommand's own.
        error.insert(
            ContextKind::Usage,
            ContextValue::StyledStr(sub.clone().render_usage()),
        );
    }
    error
}

/// The (sub)command at `path` and its matches, and, for global arguments (an empty path), the
/// innermost subcommand's matches, where clap propagates them.
fn descend<'a>(
    command: &'a clap::Command,
    matches: &'a ArgMatches,
    path: &[&str],
) -> Option<(&'a clap::Command, &'a ArgMatches)> {
    if path.is_empty() {
        let mut m = matches;
        while let Some((_, sub)) = m.subcommand() {
            m = sub;
        }
        return Some((command, m));
    }
    let (mut c, mut m) = (command, matches);
    for name in path {
        match m.subcommand() {
            Some((found, sub)) if found == *name => {
                m = sub;
                c = c.find_subcommand(name)?;
            }
            _ => return None,
        }
    }
    Some((c, m))
}

/// Whether `id` is set in `m`, and from where: from the command line or the environment, and,
/// for a flag, to true.
fn origin(m: &ArgMatches, id: &str) -> Option<Origin> {
    let source = m.value_source(id)?;
    let on = match m.try_get_one::<bool>(id) {
        Ok(Some(flag)) => *flag,
        // Not a flag: set if present.
        _ => true,
    };
    match source {
        ValueSource::CommandLine if on => Some(Origin::Flag),
        ValueSource::EnvVariable if on => Some(Origin::Env),
        _ => None,
    }
}

/// `--flag`, or `VARIABLE` for a setting from the environment.
fn describe(command: &clap::Command, id: &str, origin: Origin) -> String {
    let arg = command.get_arguments().find(|a| a.get_id() == id);
    let long = arg.and_then(clap::Arg::get_long).unwrap_or(id);
    match (origin, arg.and_then(clap::Arg::get_env)) {
        (Origin::Env, Some(var)) => format!("{} (--{long})", var.to_string_lossy()),
        _ => format!("--{long}"),
    }
}

/// `--flag` or `VARIABLE (--flag)` for a setting of `run`, and how to take it away: `drop
/// --flag` or `unset VARIABLE`.
pub(super) fn named(command: &clap::Command, m: &ArgMatches, id: &str) -> (String, String) {
    let from = origin(m, id).unwrap_or(Origin::Flag);
    let arg = command.get_arguments().find(|a| a.get_id() == id);
    let fix = match (from, arg.and_then(clap::Arg::get_env)) {
        (Origin::Env, Some(var)) => format!("unset {}", var.to_string_lossy()),
        _ => format!("drop {}", describe(command, id, Origin::Flag)),
    };
    (describe(command, id, from), fix)
}

/// The store chosen on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StoreChoice {
    Sqlite(PathBuf),
    ClusterFile(PathBuf),
    Memory,
}

impl StoreArgs {
    /// The store, or `None` if none was given.
    pub(crate) fn choice(&self) -> Option<StoreChoice> {
        if let Some(path) = &self.sqlite {
            Some(StoreChoice::Sqlite(path.clone()))
        } else if let Some(path) = &self.cluster_file {
            Some(StoreChoice::ClusterFile(path.clone()))
        } else if self.memory {
            Some(StoreChoice::Memory)
        } else {
            None
        }
    }
}

#[derive(Debug, Subcommand)]
#[expect(
    clippy::large_enum_variant,
    reason = "parsed once per process; `run`'s arguments are read everywhere by reference"
)]
pub(crate) enum Command {
    /// Campaign, and run CMD while (and only while) this process leads.
    #[command(after_help = RUN_AFTER_HELP)]
    Run(RunArgs),
    /// Print the election's state once: leader, ballot, lease, candidates.
    #[command(after_help = STATUS_AFTER_HELP)]
    Status(StatusArgs),
    /// Follow the election until interrupted: one line per leader change (with its ballot,
    /// priority and version), and one per candidate whose eligibility or version changes
    /// (each registered version once at the start).
    Watch(WatchArgs),
    /// Ask the leader of a ballot to step down and hand over to the best live eligible
    /// candidate, or to the one named by --to.
    #[command(after_help = RESIGN_AFTER_HELP)]
    Resign(ResignArgs),
    /// Fence the leader of a ballot out at once (operator override).
    #[command(name = "force-vacate", after_help = FORCE_VACATE_AFTER_HELP)]
    ForceVacate(OperatorArgs),
    /// Exclude a candidate from leading by its name (false), durably across its restarts, or
    /// lift that (true). An excluded leader hands over to the best live eligible candidate.
    Eligible(EligibleArgs),
    /// Read or change the election's stored configuration.
    #[command(subcommand, after_help = CONFIG_AFTER_HELP)]
    Config(ConfigCommand),
    /// Inspect or steer the sharded election of this name: placement, freeze, drain, move.
    #[command(subcommand, after_help = SHARDS_AFTER_HELP)]
    Shards(ShardsCommand),
}

#[cfg(test)]
mod tests;
