//! The command line, as clap parses it.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use fdb_leader_election::CandidateId;

use crate::durations;

mod help;
mod sharded;

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
    #[arg(long, global = true, env = "FDB_LEADER_ALLOW_NETWORK_FS")]
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
    #[arg(long, global = true, env = "FDB_LEADER_MEMORY")]
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
        let mut command = Cli::command();
        let matches = command.try_get_matches_from_mut(argv)?;
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
            if let Some(message) = sharded::conflict(&command, m, run) {
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
pub(crate) enum Command {
    /// Campaign, and run CMD while (and only while) this process leads.
    #[command(after_help = RUN_AFTER_HELP)]
    Run(RunArgs),
    /// Print the election's state once: leader, ballot, lease, candidates.
    #[command(after_help = STATUS_AFTER_HELP)]
    Status(StatusArgs),
    /// Follow the election: one line per leader change, until interrupted.
    Watch(WatchArgs),
    /// Ask the leader of a ballot to step down and hand over to the best live candidate.
    #[command(after_help = RESIGN_AFTER_HELP)]
    Resign(OperatorArgs),
    /// Fence the leader of a ballot out at once (operator override).
    #[command(name = "force-vacate", after_help = FORCE_VACATE_AFTER_HELP)]
    ForceVacate(OperatorArgs),
    /// Read or change the election's stored configuration.
    #[command(subcommand, after_help = CONFIG_AFTER_HELP)]
    Config(ConfigCommand),
    /// Inspect or steer the sharded election of this name: placement, freeze, drain, move.
    #[command(subcommand, after_help = SHARDS_AFTER_HELP)]
    Shards(ShardsCommand),
}

/// What `--on-child-exit` does when the child exits by itself while this process leads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnChildExit {
    /// Run the end-command, leave the election (resigning, reserving for the best live
    /// candidate), wait the back-off, and campaign again.
    #[default]
    Resign,
    /// Run the end-command, shut down (resign, unregister) and exit with the child's code.
    Exit,
    /// Restart the child after the back-off while still leading; the begin-command does not
    /// run again.
    Restart,
}

impl OnChildExit {
    /// The policy's name, as typed.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OnChildExit::Resign => "resign",
            OnChildExit::Exit => "exit",
            OnChildExit::Restart => "restart",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The candidate's label (random bits are appended: each start is a new candidate).
    /// Default: the host name.
    #[arg(long, value_name = "NAME", env = "FDB_LEADER_NAME")]
    pub(crate) name: Option<String>,

    /// The candidate's priority: higher wins, and a strictly higher priority asks the leader
    /// to hand over (when preemption is enabled).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        allow_negative_numbers = true,
        env = "FDB_LEADER_PRIORITY"
    )]
    pub(crate) priority: i32,

    /// Join the sharded election of --election NAME (under ("fdb-leader", NAME, "shards"))
    /// instead of the single one, with M shards if this process creates it (1 to 256), and run
    /// one CMD per shard this process owns, with FDB_LEADER_SHARD and that shard's ballot in its
    /// environment.
    #[arg(long, value_name = "M", value_parser = sharded::shard_count, env = "FDB_LEADER_SHARDS")]
    pub(crate) shards: Option<u32>,

    /// With --shards: this member's weight, its share of the shards (about M x W / the live
    /// members' total); 0 owns none. Default 1.
    #[arg(long, value_name = "W", env = "FDB_LEADER_WEIGHT")]
    pub(crate) weight: Option<u32>,

    /// The lease (at least 150ms), used when this process creates the election (an existing
    /// election keeps its stored configuration). Default 10s.
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_LEASE")]
    pub(crate) lease: Option<Duration>,

    /// The heartbeat (at least 50ms, at most a third of the lease), used when this process
    /// creates the election. Default: a third of the lease (3s with the default lease).
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_HEARTBEAT")]
    pub(crate) heartbeat: Option<Duration>,

    /// Published in the leader record while this process leads (for example its address).
    #[arg(long, value_name = "TEXT", env = "FDB_LEADER_PAYLOAD")]
    pub(crate) payload: Option<String>,

    /// Runs (sh -c) before the child starts, after each election.
    #[arg(long, value_name = "CMD", env = "FDB_LEADER_BEGIN_COMMAND")]
    pub(crate) begin_command: Option<String>,

    /// Runs (sh -c) after the child stops, after each leadership.
    #[arg(long, value_name = "CMD", env = "FDB_LEADER_END_COMMAND")]
    pub(crate) end_command: Option<String>,

    /// Run CMD ARGS… through `sh -c` (joined with spaces).
    #[arg(long, env = "FDB_LEADER_SHELL")]
    pub(crate) shell: bool,

    /// How long the child (and the begin/end commands) get between SIGTERM and SIGKILL. Keep
    /// it below the election's handover grace (5s by default).
    #[arg(
        long,
        value_name = "DUR",
        value_parser = durations::parse,
        default_value = "3s",
        env = "FDB_LEADER_GRACE"
    )]
    pub(crate) grace: Duration,

    /// What to do when the child exits by itself while this process leads (with --shards: a
    /// shard's child while this process owns the shard). Default: resign; with --shards:
    /// restart.
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        env = "FDB_LEADER_ON_CHILD_EXIT"
    )]
    pub(crate) on_child_exit: Option<OnChildExit>,

    /// Give up (exit 5) unless elected within DUR of the start.
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_TIMEOUT")]
    pub(crate) timeout: Option<Duration>,

    /// Give up (exit 5) at once if another candidate leads or holds a reservation, and after
    /// one lease if another candidate wins the vacancy.
    #[arg(long = "try", env = "FDB_LEADER_TRY")]
    pub(crate) try_once: bool,

    /// After the begin-command fails (or the child cannot be started), leave the election,
    /// wait DUR and campaign again, instead of exiting with code 4.
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_ERROR_TIMEOUT")]
    pub(crate) error_timeout: Option<Duration>,

    /// Serve /metrics (Prometheus) and /healthz over HTTP on this address, e.g.
    /// 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR", env = "FDB_LEADER_METRICS_LISTEN")]
    pub(crate) metrics_listen: Option<SocketAddr>,

    /// The command to run while leader, and its arguments (after `--`).
    #[arg(
        value_name = "CMD",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub(crate) command: Vec<OsString>,
}

impl RunArgs {
    /// What `--on-child-exit` asks, or its default: `resign` for the single election,
    /// `restart` with `--shards` (a member cannot hand one shard over by itself).
    pub(crate) fn policy(&self) -> OnChildExit {
        match (self.on_child_exit, self.shards) {
            (Some(policy), _) => policy,
            (None, None) => OnChildExit::Resign,
            (None, Some(_)) => OnChildExit::Restart,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Print one JSON object.
    #[arg(long, env = "FDB_LEADER_JSON")]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// Print one JSON object per line.
    #[arg(long, env = "FDB_LEADER_JSON")]
    pub(crate) json: bool,

    /// Wait for the store file and the election to be created (by a `run` or `config set`)
    /// instead of exiting with code 1. Nothing is created either way.
    #[arg(long, env = "FDB_LEADER_WAIT")]
    pub(crate) wait: bool,
}

#[derive(Debug, Args)]
pub(crate) struct OperatorArgs {
    /// The ballot of the leader to act on (see `status`): nothing happens if the election has
    /// moved on.
    #[arg(long, value_name = "B", env = "FDB_LEADER_EXPECTED_BALLOT")]
    pub(crate) expected_ballot: u64,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the stored configuration.
    Get {
        /// Print one JSON object (durations in milliseconds).
        #[arg(long, env = "FDB_LEADER_JSON")]
        json: bool,
    },
    /// Change the stored configuration (creating the election if needed): the flags given
    /// replace those fields of the stored configuration, and the result is validated.
    Set(ConfigSetArgs),
}

#[derive(Debug, Subcommand)]
pub(crate) enum ShardsCommand {
    /// Print the layout, every member (epoch, weight, drained, fenced, shards owned and
    /// quota) and every shard (owner, ballot, move in flight, reservation).
    Status(StatusArgs),
    /// Freeze placement: the coordinator moves nothing a live member holds.
    Freeze,
    /// Unfreeze placement: the coordinator restores balance with the fewest moves.
    Unfreeze,
    /// Drain a member: weight 0 until undrained, so its shards move to the others.
    Drain(ShardsMemberArgs),
    /// Undrain a member: it takes its share again.
    Undrain(ShardsMemberArgs),
    /// Move one shard to a member by hand (only while placement is frozen).
    Move(ShardsMoveArgs),
}

/// A member's id, as `shards status` prints it.
fn member_id(text: &str) -> Result<CandidateId, String> {
    CandidateId::parse(text).map_err(|e| format!("{e} (copy an id from shards status)"))
}

#[derive(Debug, Args)]
pub(crate) struct ShardsMemberArgs {
    /// The member's id (as `shards status` lists it).
    #[arg(long, value_name = "ID", value_parser = member_id, env = "FDB_LEADER_SHARDS_MEMBER")]
    pub(crate) member: CandidateId,
}

#[derive(Debug, Args)]
pub(crate) struct ShardsMoveArgs {
    /// The shard's number (0 to the shard count - 1).
    #[arg(long, value_name = "N", env = "FDB_LEADER_SHARDS_SHARD")]
    pub(crate) shard: u32,
    /// The id of the member to move it to (as `shards status` lists it).
    #[arg(long, value_name = "ID", value_parser = member_id, env = "FDB_LEADER_SHARDS_TO")]
    pub(crate) to: CandidateId,
}

/// `on` or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Switch {
    #[value(alias = "true", alias = "yes")]
    On,
    #[value(alias = "false", alias = "no")]
    Off,
}

impl Switch {
    pub(crate) fn is_on(self) -> bool {
        self == Switch::On
    }
}

#[derive(Debug, Args)]
pub(crate) struct ConfigSetArgs {
    /// How long a leader holds the lease without renewing (at least 150ms).
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_CONFIG_LEASE")]
    pub(crate) lease: Option<Duration>,
    /// How often each participant runs a cycle (at least 50ms, at most a third of the lease).
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_CONFIG_HEARTBEAT")]
    pub(crate) heartbeat: Option<Duration>,
    /// How long a candidate may miss heartbeats before it counts as dead (> lease).
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_CONFIG_CANDIDATE_TIMEOUT")]
    pub(crate) candidate_timeout: Option<Duration>,
    /// Whether elections run: when off, nobody acquires and the leader steps down.
    #[arg(long, value_name = "on|off", env = "FDB_LEADER_CONFIG_ELECTIONS")]
    pub(crate) elections: Option<Switch>,
    /// Whether a strictly higher-priority candidate (or `resign`) may ask the leader to hand
    /// over.
    #[arg(long, value_name = "on|off", env = "FDB_LEADER_CONFIG_PREEMPTION")]
    pub(crate) preemption: Option<Switch>,
    /// The largest clock rate error assumed of any participant, in parts per million
    /// (< 500000).
    #[arg(
        long,
        value_name = "PPM",
        env = "FDB_LEADER_CONFIG_MAX_CLOCK_RATE_ERROR_PPM"
    )]
    pub(crate) max_clock_rate_error_ppm: Option<u32>,
    /// How long a leader keeps leadership before it honours a handover request.
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_CONFIG_MIN_TENURE")]
    pub(crate) min_tenure: Option<Duration>,
    /// How long a leader asked to hand over may finish its work (the child's stop) first.
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_CONFIG_HANDOVER_GRACE")]
    pub(crate) handover_grace: Option<Duration>,
    /// The delay per priority rank when followers take over a lapsed lease.
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_CONFIG_TAKEOVER_STAGGER")]
    pub(crate) takeover_stagger: Option<Duration>,
    /// The bound on each transaction attempt (at least 10ms, shorter than the heartbeat).
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_CONFIG_TRANSACTION_TIMEOUT")]
    pub(crate) transaction_timeout: Option<Duration>,
}

#[cfg(test)]
mod tests;
