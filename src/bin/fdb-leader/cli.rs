//! The command line, as clap parses it.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use fdb_leader_election::CandidateId;

use crate::durations;

const EXIT_CODES: &str = "\
Exit codes:
  0  success; for `run` and `watch`, a clean shutdown after SIGINT, SIGTERM or SIGHUP
  1  refused or not found: an operator override was rejected (ballot mismatch, no leader,
     preemption disabled; for `shards`: placement not frozen for a move, an unknown, drained
     or fenced member), or the election (or its store file) does not exist
  2  usage error: bad arguments (a shard number out of range), an invalid configuration, an
     option this build lacks
  3  store error: the store cannot be opened, created or written (permissions, read-only,
     not a database, a newer schema, a network file system), is corrupt, was deleted or
     replaced while in use, a transaction failed, or the outcome of a write is unknown
  4  command error: CMD is not an executable command, the begin-command failed (unless
     --error-timeout), or the child or a hook could not be started
  5  not elected: `run --timeout` ran out, or `run --try` found the leadership taken
  N  with `run --on-child-exit exit`: the child's exit code (128 + signal if it was killed)

Every flag can also be set by the environment variable shown beside it; a flag on the
command line wins over the variable.";

const ABOUT: &str =
    "Leader election from the shell: run a command on exactly one machine of a group";

const LONG_ABOUT: &str = "\
Leader election from the shell: run a command on exactly one machine of a group, and inspect
or steer the election.

Pick one store: --sqlite PATH (processes on one host share a SQLite file; created if missing),
--cluster-file PATH (FoundationDB; needs a build with an fdb-7_* feature), or --memory (an
in-process store, for a single-process demo). --election NAME selects the election within the
store (its keys live under the tuple subspace (\"fdb-leader\", NAME); the sharded election of
that name, which the shards commands show and steer, under (\"fdb-leader\", NAME, \"shards\")).

Logs go to stderr (level from RUST_LOG, default info); status, watch, shards status and the
other one-shot commands write their answers to stdout.";

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

const RUN_AFTER_HELP: &str = "\
Before campaigning, run checks that CMD is an executable command (for --shell: that the
script parses and its first command exists) and that the store is usable; a problem ends it
at once (exit 4 or 3) without taking part in the election.

While this process leads, CMD runs with FDB_LEADER_BALLOT (the ballot: a fencing token that
only grows), FDB_LEADER_ID (this candidate's id) and FDB_LEADER_ELECTION (the election's name)
in its environment, in a process group of its own, with standard input from /dev/null.

The child never outlives fdb-leader, nor its lease: a small watchdog process (fdb-leader
itself, in the child's process group) holds a pipe from this process and the lease's
deadline, renewed through the pipe, and kills the group with SIGKILL as soon as the pipe
closes (this process died for any reason, SIGKILL included) or the deadline passes without a
renewal (this process is stopped or blocked; no grace then). On Linux the child also gets a
parent-death signal, so that killing the supervisor and the watchdog together still ends it.

Ctrl-Z (SIGTSTP) stops the child as SIGTERM would, leaves the election (resigning, reserving
the leadership for the best live candidate), then stops this process; SIGCONT (fg, bg)
campaigns again. SIGTTIN and SIGTTOU are blocked: terminal I/O never stops this process.

The child's whole process group is stopped (SIGTERM, then SIGKILL after --grace) when:
  - the leadership is lost, or the local lease runs out (say the store is unreachable);
  - a higher-priority candidate or an operator asks for a handover: the child is stopped
    while this process still leads, and the leadership moves only afterwards (the store's
    handover_grace bounds the wait, so keep --grace below it);
  - the store fails in a way that cannot heal (permission denied, read-only, not a
    database, a newer schema) or its file is deleted or replaced: then fdb-leader exits 3;
  - this process receives SIGINT, SIGTERM or SIGHUP: it then stops the child, runs the
    end-command, resigns (reserving the leadership for the best live candidate, so it moves
    at once) and exits 0. A second signal skips the grace.

When the child exits by itself (--on-child-exit resign or restart), the next campaign (or
restart) waits a back-off: 1s after the first exit, doubling up to 1m, back to 1s once a
child has run for 1m. With `resign`, this process leaves the election during the back-off,
so a child that fails at once costs one ballot per back-off, not one per millisecond.
Non-zero exits and deaths by signal are logged as warnings.

--begin-command runs (sh -c, to completion) after each election, before the child starts; if
it fails, the child is not started and fdb-leader shuts down with exit code 4, or, with
--error-timeout, leaves the election, waits that long and campaigns again.
--end-command runs (sh -c, to completion) after the child has stopped, after every
begin-command that started: while this process still leads when it gives the leadership up
itself, after the loss otherwise. Both get the same environment as the child.

--timeout gives up (exit 5) if this process is not elected within that time of its start;
--try gives up at once if another candidate holds or has reserved the leadership, and after
one lease otherwise. Both apply to the first election only.

--metrics-listen ADDR serves, over plain HTTP on one listener, /metrics (Prometheus text:
the runner's fdb_leader_* metrics) and /healthz (200 `ok`, or 503 naming the problem when
the runner is wedged or dead; a follower is healthy). Prefer a loopback address.

Leadership is not authority: a paused process can act late, so external effects should
carry the ballot and be rejected when a higher one was seen.

Exit codes: 0 after a signal; the child's code with --on-child-exit exit; 2 usage; 3 store;
4 CMD not executable, begin-command failed or the child could not be started; 5 not elected
in time (--timeout, --try).";

const CONFIG_AFTER_HELP: &str = "\
The flags of `config set` read FDB_LEADER_CONFIG_* variables (not FDB_LEADER_LEASE and the
like, which `run` reads), so that an environment set up for `run` never changes the stored
configuration by accident.";

const STATUS_AFTER_HELP: &str = "\
The lease state is what one observation shows: `owned` (a leader holds the ballot), `vacant`
(any candidate may take it), `reserved` (vacant, reserved for a successor, which takes it at
once) or `held` (vacant after force-vacate: no candidate takes it before one lease of no
change). A single observation cannot tell a live leader from a crashed one: a crashed
leader's record stays `owned` until a candidate takes over one lease later (`watch` reports
the lapse).

Heartbeat age is measured without comparing clocks: `lag` is the number of leader renewals
since the candidate's last heartbeat (the record's renewal counter minus the renewal the
candidate last saw). A live candidate lags at most candidate_timeout / heartbeat renewals.
While no leader renews, lags stop growing.

--json prints one object: leader (id or null), ballot, lease_state, renewal, lease_ms,
leader_priority, handover_requested_by, operator_request, reserved_for, operator_hold,
payload, payload_hex, config, and candidates (id, priority, live, heartbeat, seen_renewal,
renewal_lag, registration, leader).";

const RESIGN_AFTER_HELP: &str = "\
Writes an operator's request that the leader of ballot B step down. The leader honours it at
its next cycle (at once if it watches the store), whatever the priorities and the preemption
setting: it stops its work (waiting at most the handover grace), stops believing it leads,
then writes a vacancy reserved for the best live candidate other than itself, which takes
over in one commit. With no other live candidate the vacancy is unreserved and any candidate,
the old leader too, may take it with a new ballot. A leader that no longer cycles never
honours it: use force-vacate then.

Exit codes: 0 requested; 1 rejected (no leader, ballot mismatch).";

const FORCE_VACATE_AFTER_HELP: &str = "\
Fences the leader of ballot B out at once: the ballot grows by one, so the old leader's
fenced writes fail from this commit on, and the record becomes a vacancy held by this
operator (`status` shows it as `held`), which no candidate may fill before one full lease of
no change (by then the old leader's own belief has ended). For a leader that is wedged or
misbehaving; prefer `resign` otherwise.

Exit codes: 0 vacated; 1 rejected (ballot mismatch).";

const SHARDS_AFTER_HELP: &str = "\
The sharded election of --election NAME lives under the tuple subspace (\"fdb-leader\", NAME,
\"shards\"), beside the single election of that name (\"fdb-leader\", NAME) and independent
of it: a Rust service joins it with ShardedRunner::builder(db, Subspace::from((\"fdb-leader\",
NAME, \"shards\"))). Its members create it; these commands never create a store or an
election.

The overrides follow the rules of the single election's: nothing a live member holds is taken
from it, only asked of it. `freeze` stops the coordinator's moves (a dead member's shards are
still failed over); `unfreeze` hands placement back, and the coordinator restores balance with
the fewest moves. `drain` gives a member weight 0 until `undrain` (whatever weight it
announces itself): its shards move to the others, at most the move limit at a time. `move`
moves one shard by hand, only while placement is frozen (the coordinator would move it back
otherwise): a live owner is asked to hand it over, as for any move; a shard nobody live holds
is reserved for the target at once.

Exit codes: 0 done; 1 refused or not found (no sharded election, an unknown member, placement
not frozen for `move`, a drained or fenced target); 2 usage (a shard number out of range, a
malformed member id); 3 store.";

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

    /// What to do when the child exits by itself while this process leads.
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        default_value_t = OnChildExit::Resign,
        env = "FDB_LEADER_ON_CHILD_EXIT"
    )]
    pub(crate) on_child_exit: OnChildExit,

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
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_the_command_after_the_options() -> Result<(), clap::Error> {
        let cli = Cli::parse_args([
            "fdb-leader",
            "--sqlite",
            "/tmp/x.db",
            "run",
            "--name",
            "a",
            "--lease",
            "600ms",
            "--",
            "sh",
            "-c",
            "echo hi",
        ])?;
        assert_eq!(
            cli.store.choice(),
            Some(StoreChoice::Sqlite("/tmp/x.db".into()))
        );
        let Command::Run(run) = cli.command else {
            return Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand));
        };
        assert_eq!(run.lease, Some(Duration::from_millis(600)));
        assert_eq!(run.command, ["sh", "-c", "echo hi"].map(OsString::from));
        assert_eq!(run.on_child_exit, OnChildExit::Resign);
        assert_eq!(run.grace, Duration::from_secs(3));
        Ok(())
    }

    #[test]
    fn a_flag_wins_over_the_environment_and_two_of_either_conflict() {
        use Origin::{Env, Flag};
        assert_eq!(decide(&[]), Ok(None));
        assert_eq!(decide(&[Env]), Ok(Some(0)));
        assert_eq!(decide(&[Flag]), Ok(Some(0)));
        assert_eq!(decide(&[Env, Flag]), Ok(Some(1)));
        assert_eq!(decide(&[Flag, Env, Env]), Ok(Some(0)));
        assert_eq!(decide(&[Env, Env]), Err(Conflict::Env));
        assert_eq!(decide(&[Flag, Flag]), Err(Conflict::Flags));
        assert_eq!(decide(&[Flag, Env, Flag]), Err(Conflict::Flags));
    }

    #[test]
    fn every_exclusive_setting_can_be_unset() -> Result<(), clap::Error> {
        let mut cli = Cli::parse_args([
            "fdb-leader",
            "--sqlite",
            "a",
            "run",
            "--timeout",
            "1s",
            "--",
            "x",
        ])?;
        for (_, ids) in EXCLUSIVE {
            for id in *ids {
                cli.unset(id);
            }
        }
        assert_eq!(cli.store.choice(), None);
        let Command::Run(run) = &cli.command else {
            return Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand));
        };
        assert_eq!((run.timeout, run.try_once), (None, false));
        // Each id names an argument of its (sub)command.
        let command = Cli::command();
        for (path, ids) in EXCLUSIVE {
            let sub = path
                .iter()
                .try_fold(&command, |c, name| c.find_subcommand(name));
            assert!(sub.is_some(), "no subcommand {path:?}");
            for id in *ids {
                assert!(
                    sub.is_some_and(|sub| sub.get_arguments().any(|a| a.get_id() == *id)),
                    "{path:?} has no argument {id}"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn store_flags_go_before_or_after_the_subcommand_but_only_one() {
        let after = Cli::parse_args(["fdb-leader", "status", "--memory", "--election", "x"]);
        assert!(
            after.is_ok_and(|c| c.store.choice() == Some(StoreChoice::Memory) && c.election == "x")
        );
        let both = Cli::parse_args(["fdb-leader", "--memory", "--sqlite", "a", "status"]);
        assert!(both.is_err_and(|e| {
            e.kind() == clap::error::ErrorKind::ArgumentConflict
                && e.to_string()
                    .contains("--sqlite and --memory cannot be used together")
        }));
        let both = Cli::parse_args([
            "fdb-leader",
            "--memory",
            "run",
            "--try",
            "--timeout",
            "1s",
            "--",
            "x",
        ]);
        assert!(both.is_err_and(|e| e.kind() == clap::error::ErrorKind::ArgumentConflict));
        let bad = Cli::parse_args(["fdb-leader", "--memory", "run", "--lease", "3", "--", "x"]);
        assert!(bad.is_err_and(|e| e.to_string().contains("3ms")));
        let none = Cli::parse_args(["fdb-leader", "--memory", "run"]);
        assert!(none.is_err());
    }
}
