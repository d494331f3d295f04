//! The arguments of the one-shot commands: `status`, `watch`, `resign` and `force-vacate`,
//! `config`, and `shards`.

use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand, ValueEnum};
use fdb_leader_election::{CandidateId, VersionPolicy};

use crate::durations;

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Print one JSON object.
    #[arg(long, env = "FDB_LEADER_JSON", value_parser = BoolishValueParser::new())]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// Print one JSON object per line.
    #[arg(long, env = "FDB_LEADER_JSON", value_parser = BoolishValueParser::new())]
    pub(crate) json: bool,

    /// Wait for the store file and the election to be created (by a `run` or `config set`)
    /// instead of exiting with code 1. Nothing is created either way. Refused with --memory,
    /// which no other process shares.
    #[arg(long, env = "FDB_LEADER_WAIT", value_parser = BoolishValueParser::new())]
    pub(crate) wait: bool,
}

#[derive(Debug, Args)]
pub(crate) struct OperatorArgs {
    /// The ballot of the leader to act on (see `status`): nothing happens if the election has
    /// moved on.
    #[arg(long, value_name = "B", env = "FDB_LEADER_EXPECTED_BALLOT")]
    pub(crate) expected_ballot: u64,
}

#[derive(Debug, Args)]
pub(crate) struct ResignArgs {
    #[command(flatten)]
    pub(crate) op: OperatorArgs,
    /// Reserve the leadership for this candidate rather than the best live one: a name (its
    /// `--name`, the id without its random suffix; the best live eligible candidate of that
    /// name) or an id as `status` lists it (that candidate only). Refused (exit 1, nothing
    /// written) when none is live and eligible; the leader checks again when it reads the
    /// request, and if none is there then it keeps leading and `status` says why.
    #[arg(long, value_name = "NAME|ID", env = "FDB_LEADER_RESIGN_TO")]
    pub(crate) to: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct EligibleArgs {
    /// The candidate's name: its `--name` (the id `status` lists without its last `-` and 16
    /// hexadecimal digits), which every restart of it keeps.
    #[arg(value_name = "NAME")]
    pub(crate) name: String,

    /// false: the candidate may not lead (it never campaigns; leading, it hands over to the
    /// best live eligible candidate); true: it may again.
    #[arg(value_name = "true|false", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) eligible: bool,

    /// With false: why, as `status` shows it (at most 256 bytes). Default: "excluded by an
    /// operator".
    #[arg(long, value_name = "TEXT", env = "FDB_LEADER_ELIGIBLE_REASON")]
    pub(crate) reason: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the stored configuration.
    Get {
        /// Print one JSON object (durations in milliseconds).
        #[arg(long, env = "FDB_LEADER_JSON", value_parser = BoolishValueParser::new())]
        json: bool,
        /// The configuration of the sharded election of --election NAME (`run --shards`),
        /// under ("fdb-leader", NAME, "shards"), instead of the single election's.
        #[arg(long, env = "FDB_LEADER_CONFIG_SHARDED", value_parser = BoolishValueParser::new())]
        sharded: bool,
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

#[derive(Clone, Debug, Args)]
pub(crate) struct ConfigSetArgs {
    /// Change the configuration of the sharded election of --election NAME (`run --shards`),
    /// under ("fdb-leader", NAME, "shards"), instead of the single election's: every member and
    /// coordinator uses it from its next cycle.
    #[arg(long, env = "FDB_LEADER_CONFIG_SHARDED", value_parser = BoolishValueParser::new())]
    pub(crate) sharded: bool,
    /// With --sharded: the shard count to create the sharded election with if it does not
    /// exist yet, as `run --shards M` would (an existing one keeps its count). `run --shards`
    /// joins one of at most 256 shards; a larger one is for ShardedRunners.
    #[arg(long, value_name = "M", value_parser = super::sharded::layout_shard_count, requires = "sharded", env = "FDB_LEADER_CONFIG_SHARDS")]
    pub(crate) shards: Option<u32>,
    /// How long a leader holds the lease without renewing (at least 150ms). The timings it
    /// scales (heartbeat a third of it, candidate timeout, transaction timeout, takeover
    /// stagger, handover grace, reservation timeout) are derived from it unless given, as for
    /// a new election; the other settings are kept.
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
    /// How long a vacancy the leader reserved for a candidate waits for it before the others
    /// may fill it (default two heartbeats; at most the lease).
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_CONFIG_RESERVATION_TIMEOUT")]
    pub(crate) reservation_timeout: Option<Duration>,
    /// How the candidates' versions (`run --app-version`) rank them before their priority:
    /// ignore (the default: priority alone), prefer-newest (a newer version takes over, so a
    /// rolling deploy moves the leadership to the new version), prefer-oldest (the oldest
    /// version leads until its last candidate has left), no-downgrade (the leadership never
    /// passes to a version older than the leader's while one at least as new is live).
    /// Candidates without a version rank as the oldest. Safe to change at any time: the
    /// leadership moves by a cooperative handover.
    #[arg(long, value_name = "POLICY", value_parser = version_policy(), env = "FDB_LEADER_CONFIG_VERSION_POLICY")]
    pub(crate) version_policy: Option<VersionPolicy>,
}

/// `--version-policy`: one of the library's policies, by name (clap lists them).
fn version_policy() -> impl TypedValueParser<Value = VersionPolicy> {
    PossibleValuesParser::new(VersionPolicy::ALL.map(VersionPolicy::as_str))
        .try_map(|name| name.parse::<VersionPolicy>())
}
