//! `run`'s health checks (docs/design.md §13.5): `--ready-command`/`--ready-url` on every candidate,
//! `--health-command`/`--health-url` only while leading, with `--health-interval`,
//! `--health-timeout`, `--health-fall`, `--health-rise` and `--unhealthy`. The runner runs
//! them beside the election and decides what their answers mean; this module only makes
//! each check's one run:
//!
//! - a command runs as `sh -c CMD` with the child's environment, in a process group of its
//!   own under a watchdog (as the child does: the group dies with `fdb-leader`); exit 0
//!   passes. A run cut at its timeout (the runner drops it) kills its whole group, and so
//!   does a run that ended: nothing it started is left behind.
//! - a URL is fetched with GET (hyper's HTTP/1 client, plain `http://`, a new connection
//!   each time); a 2xx answer passes.

use std::sync::Arc;

use fdb_leader_election::UnhealthyPolicy;
use fdb_leader_election::runner::{CheckSettings, ElectionDatabase, RunnerBuilder};
use fdb_leader_election::shard::ShardedRunnerBuilder;
use http_body_util::Empty;
use hyper::Uri;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::cli::{RunArgs, Unhealthy};
use crate::exit::Failure;
use crate::process::{Proc, Spec, describe_exit};

/// What one check runs.
#[derive(Clone, Debug)]
enum Probe {
    /// `sh -c` this.
    Command(Arc<str>),
    /// GET this.
    Url(Uri),
}

/// The environment a check command gets, at the moment it runs (the child's: the ballot only
/// while leading).
pub(crate) type EnvSource = Arc<dyn Fn() -> Vec<(&'static str, String)> + Send + Sync>;

/// `run`'s health-check flags, validated.
#[derive(Clone, Debug)]
pub(crate) struct HealthChecks {
    readiness: Option<Probe>,
    leader: Option<Probe>,
    settings: CheckSettings,
    policy: UnhealthyPolicy,
}

impl HealthChecks {
    /// The checks `args` ask for; refused (exit 2) naming the flag.
    pub(crate) fn of(args: &RunArgs) -> Result<Self, Failure> {
        let settings = CheckSettings::new(
            args.health_interval,
            args.health_timeout,
            args.health_fall,
            args.health_rise,
        )
        .map_err(|e| {
            Failure::usage(format!(
                "--health-interval {}, --health-timeout {}, --health-fall {}, --health-rise {}: \
                 {e} (nothing was created, no ballot used)",
                crate::durations::show(args.health_interval),
                crate::durations::show(args.health_timeout),
                args.health_fall,
                args.health_rise,
            ))
        })?;
        let probe =
            |flag: &str, command: &Option<String>, url: &Option<String>| match (command, url) {
                (Some(command), _) => Ok(Some(Probe::Command(Arc::from(command.as_str())))),
                (None, Some(url)) => parse_url(flag, url).map(|u| Some(Probe::Url(u))),
                (None, None) => Ok(None),
            };
        Ok(HealthChecks {
            readiness: probe("--ready-url", &args.ready_command, &args.ready_url)?,
            leader: probe("--health-url", &args.health_command, &args.health_url)?,
            settings,
            policy: match args.unhealthy {
                Unhealthy::Hold => UnhealthyPolicy::Hold,
                Unhealthy::Release => UnhealthyPolicy::Release,
            },
        })
    }

    /// `builder` of a member of a sharded election, with the readiness check (a member has no
    /// leader health check: the command line refuses one).
    pub(crate) fn apply_sharded<D: ElectionDatabase>(
        &self,
        mut builder: ShardedRunnerBuilder<D>,
        env: &EnvSource,
    ) -> ShardedRunnerBuilder<D> {
        if let Some(probe) = &self.readiness {
            let check = checker(probe.clone(), "ready-command", Arc::clone(env));
            builder = builder.readiness_check(self.settings, check);
        }
        builder
    }

    /// `builder` with these checks (each command with the environment `env` gives when it
    /// runs) and the `--unhealthy` policy.
    pub(crate) fn apply<D: ElectionDatabase>(
        &self,
        mut builder: RunnerBuilder<D>,
        env: &EnvSource,
    ) -> RunnerBuilder<D> {
        if let Some(probe) = &self.readiness {
            let check = checker(probe.clone(), "ready-command", Arc::clone(env));
            builder = builder.readiness_check(self.settings, check);
        }
        if let Some(probe) = &self.leader {
            let check = checker(probe.clone(), "health-command", Arc::clone(env));
            builder = builder.leader_health_check(self.settings, check);
        }
        builder.unhealthy_policy(self.policy)
    }
}

/// An `http://` URL, or a refusal naming `flag`.
fn parse_url(flag: &str, url: &str) -> Result<Uri, Failure> {
    let refuse = |why: String| {
        Failure::usage(format!(
            "{flag} {url}: {why} (e.g. {flag} http://127.0.0.1:8080/health; nothing was \
             created, no ballot used)"
        ))
    };
    let uri: Uri = url.parse().map_err(|e| refuse(format!("not a URL: {e}")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => {
            return Err(refuse(format!(
                "only http:// is supported, not {other}:// (use --{}-command with curl for \
                 TLS)",
                if flag.starts_with("--ready") {
                    "ready"
                } else {
                    "health"
                }
            )));
        }
        None => return Err(refuse("no scheme: write http://HOST:PORT/PATH".to_owned())),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(refuse("no host".to_owned()));
    }
    Ok(uri)
}

/// One check's runs, as the runner calls it.
fn checker(
    probe: Probe,
    what: &'static str,
    env: EnvSource,
) -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send>>
+ Send
+ Sync
+ 'static {
    let client: Client<HttpConnector, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        // A new connection each time: a child that stopped accepting fails its check.
        .pool_max_idle_per_host(0)
        .build_http();
    move || match &probe {
        Probe::Command(script) => Box::pin(run_command(Arc::clone(script), what, env())),
        Probe::Url(uri) => Box::pin(get(client.clone(), uri.clone())),
    }
}

/// Kills the check's process group when dropped: at its timeout (the runner drops the run),
/// or after it ended (what it left behind).
struct Running(Proc);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.kill_group();
    }
}

async fn run_command(
    script: Arc<str>,
    what: &'static str,
    env: Vec<(&'static str, String)>,
) -> Result<(), String> {
    let spec = Spec::shell(&*script, env);
    let mut running =
        Running(Proc::spawn_quiet(&spec, what).map_err(|e| format!("cannot start: {e}"))?);
    let status = running
        .0
        .wait()
        .await
        .map_err(|e| format!("cannot wait for it: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(describe_exit(status))
    }
}

async fn get(client: Client<HttpConnector, Empty<Bytes>>, uri: Uri) -> Result<(), String> {
    match client.get(uri.clone()).await {
        Ok(answer) if answer.status().is_success() => Ok(()),
        Ok(answer) => Err(format!("GET {uri}: {}", answer.status())),
        Err(e) => Err(format!("GET {uri}: {}", crate::exit::chain(&e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_plain_http_with_a_host() {
        assert!(parse_url("--health-url", "http://127.0.0.1:8080/health").is_ok());
        let refused = |u: &str| parse_url("--ready-url", u).err().map(|f| f.to_string());
        assert!(
            refused("https://x/")
                .is_some_and(|m| m.contains("only http:// is supported, not https://")
                    && m.contains("--ready-command"))
        );
        assert!(refused("127.0.0.1:8080").is_some_and(|m| m.contains("--ready-url 127.0.0.1")));
        assert!(refused("not a url").is_some_and(|m| m.contains("not a URL")));
    }
}
