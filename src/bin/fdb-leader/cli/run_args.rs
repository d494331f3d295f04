//! `run`'s arguments, and the policy for a child that exits by itself.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::{Args, ValueEnum};

use fdb_leader_election::Version;

use crate::durations;

/// `--app-version`: a semantic version, or what is expected (clap names the flag and the value).
fn app_version(text: &str) -> Result<Version, String> {
    Version::parse(text).map_err(|e| {
        format!(
            "expected a semantic version MAJOR.MINOR.PATCH, e.g. 1.5.0 or 2.0.0-rc.1, in \
             --app-version or FDB_LEADER_APP_VERSION ({e})"
        )
    })
}

/// `--health-fall N`, `--health-rise N`: a count of consecutive checks (clap names the flag
/// and the value; zero is refused with the other check settings, by `CheckSettings`).
fn check_count(text: &str) -> Result<u32, String> {
    text.trim().parse().map_err(|_| {
        "expected a whole number of consecutive checks, at least 1 (e.g. 3)".to_owned()
    })
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

/// `--unhealthy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum Unhealthy {
    /// Keep leading, and hand over once another candidate is eligible.
    #[default]
    Hold,
    /// Write an unreserved vacancy anyway.
    Release,
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

    /// The version this process runs, a semantic version (MAJOR.MINOR.PATCH, e.g. 1.5.0),
    /// registered beside the priority: the election's version policy (`config set
    /// --version-policy`) ranks candidates by it before their priority. Without it this
    /// candidate ranks as the oldest. (Not --version, which prints fdb-leader's own.)
    #[arg(long, value_name = "VERSION", value_parser = app_version, env = "FDB_LEADER_APP_VERSION")]
    pub(crate) app_version: Option<Version>,

    /// Join the sharded election of --election NAME (under ("fdb-leader", NAME, "shards"))
    /// instead of the single one, with M shards if this process creates it (1 to 256), and run
    /// one CMD per shard this process owns, with FDB_LEADER_SHARD and that shard's ballot in its
    /// environment.
    #[arg(
        long,
        value_name = "M",
        value_parser = super::sharded::shard_count,
        allow_hyphen_values = true,
        env = "FDB_LEADER_SHARDS"
    )]
    pub(crate) shards: Option<u32>,

    /// With --shards: this member's weight, its share of the shards (about M x W / the live
    /// members' total); 0 owns none. Default 1.
    #[arg(
        long,
        value_name = "W",
        allow_negative_numbers = true,
        env = "FDB_LEADER_WEIGHT"
    )]
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
    #[arg(long, env = "FDB_LEADER_SHELL", value_parser = BoolishValueParser::new())]
    pub(crate) shell: bool,

    /// How long the child (and the begin/end commands) get between SIGTERM and SIGKILL. An
    /// election `run` creates gets a handover grace that outlasts it (this + 1s, or half the
    /// lease if longer); one created otherwise should have a longer handover grace.
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
    #[arg(long = "try", env = "FDB_LEADER_TRY", value_parser = BoolishValueParser::new())]
    pub(crate) try_once: bool,

    /// After the begin-command fails (or the child cannot be started), leave the election,
    /// wait DUR and campaign again, instead of exiting with code 4.
    #[arg(long, value_name = "DUR", value_parser = durations::parse, env = "FDB_LEADER_ERROR_TIMEOUT")]
    pub(crate) error_timeout: Option<Duration>,

    /// Serve /metrics (Prometheus), /healthz, and for load balancers /leader (200 while this
    /// process leads and takes new work: not while its child drains for a handover or a
    /// stop), /follower (200 while an eligible follower), /shards and /shard/N (with --shards)
    /// over HTTP on this address: PORT (on 127.0.0.1), :PORT (every interface, 0.0.0.0),
    /// HOST:PORT (the host name resolved) or IP:PORT, e.g. `9464`, `:9464`, `localhost:9464`,
    /// `127.0.0.1:9464`, `[::1]:9464`.
    #[arg(
        long,
        value_name = "ADDR",
        value_parser = listen_addr,
        env = "FDB_LEADER_METRICS_LISTEN"
    )]
    pub(crate) metrics_listen: Option<SocketAddr>,

    /// Readiness check, on every candidate (can this host lead?): runs CMD (sh -c, the child's
    /// environment, a process group of its own, killed at --health-timeout) every
    /// --health-interval; exit 0 passes. While it fails this process is not eligible: it does
    /// not campaign, and hands the leadership over if it leads. Not for checking the child
    /// (followers run none): use --health-command.
    #[arg(
        long,
        value_name = "CMD",
        conflicts_with = "ready_url",
        env = "FDB_LEADER_READY_COMMAND"
    )]
    pub(crate) ready_command: Option<String>,

    /// Readiness check by HTTP: a 2xx answer to GET URL (http:// only) passes.
    #[arg(long, value_name = "URL", env = "FDB_LEADER_READY_URL")]
    pub(crate) ready_url: Option<String>,

    /// Leader health check, only while this process leads (is the child healthy?): runs CMD as
    /// --ready-command does; after --health-fall failures the leader hands over to an eligible
    /// candidate and stays ineligible for a lease.
    #[arg(
        long,
        value_name = "CMD",
        conflicts_with = "health_url",
        env = "FDB_LEADER_HEALTH_COMMAND"
    )]
    pub(crate) health_command: Option<String>,

    /// Leader health check by HTTP: a 2xx answer to GET URL (http:// only), e.g. the child's
    /// own health endpoint.
    #[arg(long, value_name = "URL", env = "FDB_LEADER_HEALTH_URL")]
    pub(crate) health_url: Option<String>,

    /// How often the checks run.
    #[arg(long, value_name = "DUR", value_parser = durations::parse, default_value = "2s", env = "FDB_LEADER_HEALTH_INTERVAL")]
    pub(crate) health_interval: Duration,

    /// How long a check may take; past it, it is killed and has failed.
    #[arg(long, value_name = "DUR", value_parser = durations::parse, default_value = "1s", env = "FDB_LEADER_HEALTH_TIMEOUT")]
    pub(crate) health_timeout: Duration,

    /// Consecutive failures that make a check fail.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 3,
        value_parser = check_count,
        allow_negative_numbers = true,
        env = "FDB_LEADER_HEALTH_FALL"
    )]
    pub(crate) health_fall: u32,

    /// Consecutive passes that make a failed check pass again.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 2,
        value_parser = check_count,
        allow_negative_numbers = true,
        env = "FDB_LEADER_HEALTH_RISE"
    )]
    pub(crate) health_rise: u32,

    /// What a leader that is not eligible does when no other live candidate is: hold (keep
    /// leading, and hand over once one is) or release (let go anyway).
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        default_value = "hold",
        env = "FDB_LEADER_UNHEALTHY"
    )]
    pub(crate) unhealthy: Unhealthy,

    /// The command to run while leader (with --shards: one per owned shard), and its arguments
    /// (after `--`). A flag before `--` that `run` does not know is a usage error, never the
    /// command.
    #[arg(value_name = "CMD", required = true, num_args = 1.., trailing_var_arg = true)]
    pub(crate) command: Vec<OsString>,
}

/// `--metrics-listen`: `PORT` (on the loopback address 127.0.0.1), `:PORT` (every IPv4
/// interface, 0.0.0.0, as Go's and Prometheus's listeners read it), `IP:PORT`, or `HOST:PORT`
/// (the first address the host name resolves to).
pub(crate) fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    use std::net::{Ipv4Addr, ToSocketAddrs};
    let expected = "expected PORT (on 127.0.0.1), :PORT (every interface), HOST:PORT or \
                    IP:PORT, e.g. 9464, :9464, localhost:9464, 127.0.0.1:9464 or [::1]:9464";
    let port = |digits: &str, ip: Ipv4Addr| {
        digits
            .parse::<u16>()
            .map(|port| SocketAddr::from((ip, port)))
            .map_err(|_| format!("port {digits} is above 65535: {expected}"))
    };
    let all_digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if all_digits(text) {
        return port(text, Ipv4Addr::LOCALHOST);
    }
    if let Some(digits) = text.strip_prefix(':').filter(|d| all_digits(d)) {
        return port(digits, Ipv4Addr::UNSPECIFIED);
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    match text.to_socket_addrs() {
        Ok(mut addrs) => addrs
            .next()
            .ok_or_else(|| format!("{text} resolves to no address: {expected}")),
        Err(e) => Err(format!(
            "{text} is not an address to listen on ({e}): {expected}"
        )),
    }
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
