//! `run`: campaign, and run the child only while this process leads. Here: the checks made
//! before the store is opened ([`preflight()`]) and what both modes share; the single
//! election's campaign in [`campaign`] and its leadership (the child, the hooks) in [`lead`];
//! `run --shards M`, one child per owned shard of the sharded election, in [`sharded`].

mod campaign;
mod lead;
mod sharded;

use std::process::{ExitCode, ExitStatus};
use std::time::Duration;

use fdb_leader_election::runner::{ElectionDatabase, HealthProblem, Runner};
use fdb_leader_election::shard::ShardedRunner;
use fdb_leader_election::{Candidate, CandidateId, ElectionConfig, Priority, TokioClock};
use tokio::sync::watch;

use crate::backoff::ChildBackoff;
use crate::checks::HealthChecks;
use crate::cli::RunArgs;
use crate::durations::show;
use crate::exit::{Failure, RunEnd, chain};
use crate::limits::{self, MIN_HEARTBEAT, MIN_LEASE};
use crate::preflight;
use crate::serve;
use crate::signals::{Signals, Stop};
use crate::store::Ctx;

/// The configuration this process creates the election with: the defaults, scaled to
/// `--lease` (heartbeat a third of it), with `--heartbeat` if given, and a transaction bound
/// of half a heartbeat (at most 1 s). Refuses settings below the command line's lower bounds,
/// naming the flag.
pub(crate) fn desired_config(
    lease: Option<Duration>,
    heartbeat: Option<Duration>,
) -> Result<ElectionConfig, Failure> {
    if let Some(lease) = lease {
        limits::at_least("--lease", lease, MIN_LEASE).map_err(Failure::usage)?;
    }
    if let Some(heartbeat) = heartbeat {
        limits::at_least("--heartbeat", heartbeat, MIN_HEARTBEAT).map_err(Failure::usage)?;
    }
    desired(lease, heartbeat)
        .map_err(|e| Failure::usage(format!("invalid settings: {}", limits::describe(&e))))
}

/// [`desired_config`] without the command line's lower bounds: the rule itself, also the one
/// `config set --lease` derives an existing election's timings by.
pub(crate) fn desired(
    lease: Option<Duration>,
    heartbeat: Option<Duration>,
) -> Result<ElectionConfig, fdb_leader_election::ConfigError> {
    let base = match lease {
        Some(lease) => ElectionConfig::with_lease_duration(lease)?,
        None => ElectionConfig::default(),
    };
    if lease.is_none() && heartbeat.is_none() {
        return Ok(base);
    }
    let heartbeat = heartbeat.unwrap_or(base.heartbeat_interval());
    let bound = heartbeat
        .checked_div(2)
        .unwrap_or(Duration::ZERO)
        .min(Duration::from_secs(1));
    base.to_builder()
        .heartbeat_interval(heartbeat)
        .transaction_timeout(bound)
        .build()
}

/// How much longer than `--grace` the election's handover grace is, at least: the time to
/// kill the child once its grace is over (SIGKILL, then the exit to be seen).
const KILL_MARGIN: Duration = Duration::from_secs(1);

/// `config` with a handover grace that outlasts the child's: `--grace` (SIGTERM to SIGKILL)
/// plus [`KILL_MARGIN`], or the configuration's own (half the lease) if longer. A handover
/// that stopped waiting before the child had stopped would start the next leader's child
/// beside it.
pub(crate) fn outlasting_the_child(
    config: ElectionConfig,
    grace: Duration,
) -> Result<ElectionConfig, Failure> {
    let least = grace.saturating_add(KILL_MARGIN);
    if config.handover_grace() >= least {
        return Ok(config);
    }
    config
        .to_builder()
        .handover_grace(least)
        .build()
        .map_err(|e| Failure::usage(format!("--grace {}: {}", show(grace), limits::describe(&e))))
}

/// What [`preflight()`] prepared for [`run()`].
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The configuration to create the election with.
    pub(crate) desired: ElectionConfig,
    /// The candidate every runner of this `run` drives (its id, priority and payload checked).
    pub(crate) candidate: Candidate,
    /// The current runner, for `/healthz` (`None` while not campaigning).
    pub(crate) current: watch::Sender<Option<Runner>>,
    /// With `--shards`: the current member of the sharded election, for `/healthz` (`None`
    /// while not a member).
    pub(crate) member: watch::Sender<Option<ShardedRunner>>,
    /// The health checks and the `--unhealthy` policy.
    pub(crate) checks: HealthChecks,
}

/// The checks `run` makes before it opens the store: its settings (timings, `--name`,
/// `--payload`), that the command and the hooks can run, and that the `--metrics-listen`
/// address can be bound (it is bound, and served from then on). Every check that can refuse a
/// run is here: if one fails, nothing was created and no ballot used.
pub(crate) fn preflight(args: &RunArgs) -> Result<Prepared, Failure> {
    if args.command.is_empty() {
        return Err(Failure::usage("run: no command given"));
    }
    let desired = outlasting_the_child(desired_config(args.lease, args.heartbeat)?, args.grace)?;
    let candidate = candidate(args)?;
    preflight::check_commands(
        &args.command,
        args.shell,
        &[
            ("--begin-command", args.begin_command.as_ref()),
            ("--end-command", args.end_command.as_ref()),
            ("--ready-command", args.ready_command.as_ref()),
            ("--health-command", args.health_command.as_ref()),
        ],
    )?;
    let checks = HealthChecks::of(args)?;
    let current = watch::Sender::new(None::<Runner>);
    let member = watch::Sender::new(None::<ShardedRunner>);
    if let Some(addr) = args.metrics_listen {
        serve::start(addr, sources(&current, &member, args.shards.is_some()))?;
    }
    Ok(Prepared {
        desired,
        candidate,
        current,
        member,
        checks,
    })
}

/// What `--metrics-listen` answers from: the current runner (or member), read at each
/// request from the listener's own thread (the runner's runtime may be blocked).
fn sources(
    current: &watch::Sender<Option<Runner>>,
    member: &watch::Sender<Option<ShardedRunner>>,
    is_sharded: bool,
) -> serve::Sources {
    let (runners, members) = (current.subscribe(), member.subscribe());
    let health: serve::HealthCheck = std::sync::Arc::new(move || {
        if let Some(member) = &*members.borrow() {
            return member
                .health()
                .map(|()| sharded::health_note(member))
                .map_err(|p| health_text(&p));
        }
        match &*runners.borrow() {
            Some(runner) => runner
                .health()
                .map(|()| match runner.eligibility().reason() {
                    None => runner.state().to_string(),
                    Some(why) => format!("{}, not eligible to lead: {why}", runner.state()),
                })
                .map_err(|p| health_text(&p)),
            None => Ok(NOT_CAMPAIGNING.to_owned()),
        }
    });
    let (runners, members) = (current.subscribe(), member.subscribe());
    let role: serve::RoleCheck = std::sync::Arc::new(move |role| match role {
        serve::Role::Shards | serve::Role::Shard(_) if is_sharded => {
            Some(match &*members.borrow() {
                Some(member) => sharded::role(member, role),
                None => Err(NOT_CAMPAIGNING.to_owned()),
            })
        }
        serve::Role::Leader | serve::Role::Follower if !is_sharded => {
            Some(match &*runners.borrow() {
                Some(runner) => single_role(runner, role),
                None => Err(NOT_CAMPAIGNING.to_owned()),
            })
        }
        _ => None,
    });
    serve::Sources { health, role }
}

/// What a process between two runners answers.
const NOT_CAMPAIGNING: &str = "not campaigning now (starting, or waiting before the next campaign)";

/// `/leader` and `/follower` of the single election: judged now, against the belief's
/// deadline (a blocked runner's leadership ends at its deadline here too). `/leader` is 200
/// only while the leadership takes new work ([`LeadershipGuard::accepts_work`]): from the
/// moment it closes to hand over, resign or leave, while its child drains, it is 503, so
/// that a load balancer sends new requests to no stopping child.
///
/// [`LeadershipGuard::accepts_work`]: fdb_leader_election::runner::LeadershipGuard::accepts_work
fn single_role(runner: &Runner, role: serve::Role) -> Result<String, String> {
    let leading = runner.leadership();
    match (role, leading) {
        (serve::Role::Leader, Some(guard)) if guard.accepts_work() => {
            Ok(format!("leader, ballot {}", guard.ballot()))
        }
        (serve::Role::Leader, Some(guard)) => Err(format!(
            "the leader (ballot {}), draining: it takes no new work, its child is stopping \
             and the leadership is being handed over",
            guard.ballot()
        )),
        (serve::Role::Leader, None) => Err(format!("not the leader ({})", runner.state())),
        (_, Some(guard)) => Err(format!(
            "the leader (ballot {}), not a follower",
            guard.ballot()
        )),
        (_, None) => {
            let state = runner.state();
            if state != fdb_leader_election::runner::RunnerState::Follower {
                return Err(format!("not a follower ({state})"));
            }
            match runner.eligibility().reason() {
                None => Ok("follower, eligible".to_owned()),
                Some(why) => Err(format!("follower, not eligible: {why}")),
            }
        }
    }
}

/// The candidate of `--name` (default: the host name), `--priority`, `--app-version` and
/// `--payload`, on the
/// runner's clock: refused (exit 2) for an empty or oversized name or an oversized payload.
fn candidate(args: &RunArgs) -> Result<Candidate, Failure> {
    let label = args.name.clone().unwrap_or_else(host_name);
    let id = CandidateId::random(&label).map_err(|e| {
        Failure::usage(format!(
            "--name {}: {} (nothing was created, no ballot used)",
            crate::store::shell_quote(&label),
            chain(&e)
        ))
    })?;
    let candidate = Candidate::with_clock(
        id,
        Priority::new(args.priority),
        std::sync::Arc::new(TokioClock::new()),
    );
    candidate.set_version(args.app_version.clone());
    if let Some(payload) = &args.payload {
        candidate
            .set_payload(Some(payload.as_bytes().to_vec()))
            .map_err(|e| {
                Failure::usage(format!(
                    "--payload: {} (nothing was created, no ballot used)",
                    chain(&e)
                ))
            })?;
    }
    Ok(candidate)
}

/// The host name, the default candidate label.
fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "fdb-leader".to_owned())
}

/// How one leadership ended.
#[derive(Debug)]
enum Ended {
    /// The leadership ended (lost, expired, handed over); campaign again.
    Lost,
    /// A signal or a store failure asked this process to stop.
    Stop(Stop),
    /// The child exited by itself while this process led (not with `restart`), after running
    /// for `ran`.
    ChildExited { status: ExitStatus, ran: Duration },
    /// The begin-command failed, or the child could not be started.
    Failed(Failure),
    /// SIGTSTP (Ctrl-Z): the child was stopped; leave, stop this process, and campaign again
    /// on SIGCONT ([`Session::suspend`]).
    Suspended,
}

/// A health problem in words, durations as people write them.
fn health_text(problem: &HealthProblem) -> String {
    match problem {
        HealthProblem::Wedged {
            since_renewal,
            lease,
        } => format!(
            "wedged: leading, but the last renewal started {} ago (lease {})",
            show(*since_renewal),
            show(*lease)
        ),
        other => other.to_string(),
    }
}

/// One `run`: the runner, the options, the signals.
struct Session<'a, D: ElectionDatabase> {
    db: D,
    runner: Runner,
    /// The candidate every runner of this session drives (one id for the whole run).
    candidate: Candidate,
    desired: ElectionConfig,
    /// The current runner, for `/healthz` (`None` while backing off).
    current: watch::Sender<Option<Runner>>,
    args: &'a RunArgs,
    ctx: &'a Ctx,
    signals: &'a mut Signals,
    id: String,
    backoff: ChildBackoff,
    checks: HealthChecks,
}

/// `run`, with what [`preflight()`] prepared: on the single election, or with `--shards` on
/// the sharded one.
pub(crate) async fn run<D: ElectionDatabase>(
    db: D,
    ctx: &Ctx,
    args: &RunArgs,
    prepared: Prepared,
    signals: &mut Signals,
) -> Result<ExitCode, Failure> {
    if args.shards.is_some() {
        sharded::run(db, ctx, args, prepared, signals).await
    } else {
        campaign::run(db, ctx, args, prepared, signals).await
    }
}

/// The run's end after a stop.
fn end_of(stop: Stop) -> RunEnd {
    match stop {
        Stop::Signal(name) => {
            tracing::info!(signal = name, "shutting down");
            RunEnd::Signal
        }
        Stop::StoreFailed => {
            tracing::warn!("the store cannot be used any more: shutting down");
            RunEnd::StoreFailed
        }
    }
}

/// Warns when one of `others` (`what`: "a live candidate", "a member") has the name of `me`:
/// two supervisors of one name cannot be told apart by their logs, `status` or `pkill -f`.
fn warn_of_namesakes<'a>(
    ctx: &Ctx,
    what: &str,
    me: &fdb_leader_election::CandidateId,
    others: impl Iterator<Item = &'a fdb_leader_election::CandidateId>,
) {
    let name = me.name();
    let namesakes: Vec<String> = others
        .filter(|id| id.name() == name && *id != me)
        .map(ToString::to_string)
        .collect();
    if !namesakes.is_empty() {
        tracing::warn!(
            "{what} of the name {name} is already in the election {}: {} (this one is {me}); \
             two supervisors of one --name cannot be told apart by their logs, `status` or \
             `pkill -f`: give each its own --name",
            ctx.name,
            namesakes.join(", "),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_scale_the_created_configuration() {
        let default = desired_config(None, None);
        assert!(default.is_ok_and(|c| c == ElectionConfig::default()));
        let fast = desired_config(
            Some(Duration::from_millis(600)),
            Some(Duration::from_millis(200)),
        );
        assert!(
            fast.as_ref()
                .is_ok_and(|c| c.lease_duration() == Duration::from_millis(600)
                    && c.heartbeat_interval() == Duration::from_millis(200)
                    && c.transaction_timeout() == Duration::from_millis(100)
                    && c.candidate_timeout() == Duration::from_millis(900)),
            "{fast:?}"
        );
        let lease_only = desired_config(Some(Duration::from_secs(3)), None);
        assert!(lease_only.is_ok_and(|c| c.heartbeat_interval() == Duration::from_secs(1)));
        let bad = desired_config(Some(Duration::from_secs(3)), Some(Duration::from_secs(2)));
        assert!(bad.is_err_and(|f| {
            f.to_string()
                .contains("--heartbeat (2s) must be at most a third of --lease (3s)")
        }));
    }

    #[test]
    fn the_handover_grace_outlasts_the_childs_grace() {
        let ms = Duration::from_millis;
        let grace_of = |lease: Option<Duration>, grace: Duration| {
            desired_config(lease, None)
                .and_then(|c| outlasting_the_child(c, grace))
                .map(|c| c.handover_grace())
                .ok()
        };
        // Half the lease when that is longer, --grace + 1 s otherwise.
        assert_eq!(grace_of(None, ms(3_000)), Some(ms(5_000)));
        assert_eq!(grace_of(Some(ms(600)), ms(3_000)), Some(ms(4_000)));
        assert_eq!(grace_of(Some(ms(600)), ms(100)), Some(ms(1_100)));
        assert_eq!(grace_of(Some(ms(60_000)), ms(100)), Some(ms(30_000)));
    }

    #[test]
    fn absurd_timings_are_refused_naming_the_flag() {
        let tiny = desired_config(Some(Duration::from_millis(1)), None);
        assert!(tiny.is_err_and(|f| f.to_string().starts_with("--lease 1ms is too short")));
        let fast = desired_config(
            Some(Duration::from_secs(2)),
            Some(Duration::from_millis(10)),
        );
        assert!(fast.is_err_and(|f| f.to_string().starts_with("--heartbeat 10ms is too short")));
        // The least lease gives the least heartbeat.
        let least = desired_config(Some(MIN_LEASE), None);
        assert!(least.is_ok_and(|c| c.heartbeat_interval() == MIN_HEARTBEAT));
    }
}
