//! What `config set` writes: the flags over a stored configuration or a new election's, the
//! checks made before the store is opened, and a refusal naming a command that works.

use fdb_leader_election::{ConfigError, ElectionConfig};

use crate::cli::ConfigSetArgs;
use crate::durations::show;
use crate::exit::Failure;
use crate::limits;
use crate::output::on_off;
use crate::store::Ctx;

/// Applies the flags given to `base`, and validates the result.
fn apply(base: &ElectionConfig, set: &ConfigSetArgs) -> Result<ElectionConfig, ConfigError> {
    let mut b = base.to_builder();
    if let Some(d) = set.lease {
        b = b.lease_duration(d);
    }
    if let Some(d) = set.heartbeat {
        b = b.heartbeat_interval(d);
    }
    if let Some(d) = set.candidate_timeout {
        b = b.candidate_timeout(d);
    }
    if let Some(s) = set.elections {
        b = b.election_enabled(s.is_on());
    }
    if let Some(s) = set.preemption {
        b = b.allow_preemption(s.is_on());
    }
    if let Some(ppm) = set.max_clock_rate_error_ppm {
        b = b.max_clock_rate_error_ppm(ppm);
    }
    if let Some(d) = set.min_tenure {
        b = b.min_tenure(d);
    }
    if let Some(d) = set.handover_grace {
        b = b.handover_grace(d);
    }
    if let Some(d) = set.takeover_stagger {
        b = b.takeover_stagger(d);
    }
    if let Some(d) = set.transaction_timeout {
        b = b.transaction_timeout(d);
    }
    if let Some(d) = set.reservation_timeout {
        b = b.reservation_timeout(d);
    }
    if let Some(p) = set.version_policy {
        b = b.version_policy(p);
    }
    b.build()
}

/// The command line's lower bounds on the timing flags given.
fn check_bounds(set: &ConfigSetArgs) -> Result<(), String> {
    if let Some(d) = set.lease {
        limits::at_least("--lease", d, limits::MIN_LEASE)?;
    }
    if let Some(d) = set.heartbeat {
        limits::at_least("--heartbeat", d, limits::MIN_HEARTBEAT)?;
    }
    if let Some(d) = set.transaction_timeout {
        limits::at_least("--transaction-timeout", d, limits::MIN_TRANSACTION_TIMEOUT)?;
    }
    Ok(())
}

/// No setting given (`--shards` alone asks to create a sharded election: something to do):
/// no flag among its words but `--sharded`.
fn nothing_set(set: &ConfigSetArgs) -> bool {
    words(set)
        .iter()
        .all(|w| ["config", "set", "--sharded"].contains(&w.as_str()))
}

/// The configuration `config set` creates a new election with: the one `run` would create it
/// with for the same `--lease` and `--heartbeat` (the defaults scaled to the lease, heartbeat
/// a third of it), then every other setting given.
pub(super) fn for_a_new_election(set: &ConfigSetArgs) -> Result<ElectionConfig, ConfigError> {
    let base = crate::run::desired(set.lease, set.heartbeat)?;
    apply(&base, set)
}

/// **What `config set` writes over a stored configuration**, the one place it is decided:
/// without `--lease`, the stored configuration with the flags given; with `--lease`, the
/// timings the lease scales (heartbeat, candidate timeout, transaction timeout, takeover
/// stagger, handover grace, reservation timeout) derived from it as `run` derives them for a
/// new election ([`run::desired`](crate::run::desired)), the stored switches kept (elections,
/// preemption, clock rate error, minimum tenure, version policy), then the flags given. An
/// operator changing the lease gets the timings `run` would create the election with, not a
/// refusal for each timing the old lease allowed.
pub(crate) fn over(
    stored: &ElectionConfig,
    set: &ConfigSetArgs,
) -> Result<ElectionConfig, ConfigError> {
    let Some(lease) = set.lease else {
        return apply(stored, set);
    };
    let base = crate::run::desired(Some(lease), set.heartbeat)?
        .to_builder()
        .election_enabled(stored.election_enabled())
        .allow_preemption(stored.allow_preemption())
        .max_clock_rate_error_ppm(stored.max_clock_rate_error_ppm())
        .min_tenure(stored.min_tenure())
        .version_policy(stored.version_policy())
        .build()?;
    apply(&base, set)
}

/// The flags `config set` was given, as words of a command line (in the order of `--help`).
fn words(set: &ConfigSetArgs) -> Vec<String> {
    let mut w: Vec<String> = Vec::new();
    let mut flag = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            w.push(format!("--{name}"));
            w.push(v);
        }
    };
    let d = |d: Option<std::time::Duration>| d.map(show);
    let on = |s: Option<crate::cli::Switch>| s.map(|s| on_off(s.is_on()).to_owned());
    flag("shards", set.shards.map(|n| n.to_string()));
    flag("lease", d(set.lease));
    flag("heartbeat", d(set.heartbeat));
    flag("candidate-timeout", d(set.candidate_timeout));
    flag("elections", on(set.elections));
    flag("preemption", on(set.preemption));
    flag(
        "max-clock-rate-error-ppm",
        set.max_clock_rate_error_ppm.map(|p| p.to_string()),
    );
    flag("min-tenure", d(set.min_tenure));
    flag("handover-grace", d(set.handover_grace));
    flag("takeover-stagger", d(set.takeover_stagger));
    flag("transaction-timeout", d(set.transaction_timeout));
    flag("reservation-timeout", d(set.reservation_timeout));
    flag("version-policy", set.version_policy.map(|p| p.to_string()));
    let mut out = vec!["config".to_owned(), "set".to_owned()];
    if set.sharded {
        out.push("--sharded".to_owned());
    }
    out.extend(w);
    out
}

/// A `config set` that would work where `set` was refused with `error` over `stored`: the
/// same flags with the lease raised to three heartbeats (a heartbeat too long for the lease),
/// or with the lease (the one given, or the stored one) and none of the timings it derives,
/// so that they are derived from it. `None` if neither works.
fn working(
    stored: &ElectionConfig,
    set: &ConfigSetArgs,
    error: &ConfigError,
) -> Option<ConfigSetArgs> {
    let mut tries = Vec::new();
    if let (ConfigError::HeartbeatTooLong { .. }, Some(heartbeat)) = (error, set.heartbeat) {
        tries.push(ConfigSetArgs {
            lease: Some(heartbeat.saturating_mul(3)),
            ..set.clone()
        });
    }
    tries.push(ConfigSetArgs {
        lease: Some(set.lease.unwrap_or(stored.lease_duration())),
        heartbeat: None,
        candidate_timeout: None,
        handover_grace: None,
        takeover_stagger: None,
        transaction_timeout: None,
        reservation_timeout: None,
        ..set.clone()
    });
    tries
        .into_iter()
        .find(|t| check_bounds(t).is_ok() && over(stored, t).is_ok())
}

/// The refusal of an invalid configuration over `stored`: what is wrong, and a whole command
/// that would work, when there is one.
pub(super) fn refusal(
    ctx: &Ctx,
    stored: &ElectionConfig,
    set: &ConfigSetArgs,
    e: &ConfigError,
    what: &str,
) -> Failure {
    let fix = working(stored, set, e).map_or_else(String::new, |w| {
        let w = words(&w);
        let w: Vec<&str> = w.iter().map(String::as_str).collect();
        format!("; this would work: {}", ctx.suggest(&w))
    });
    Failure::usage(format!(
        "invalid configuration, nothing was {what}: {}{fix}",
        limits::describe(e)
    ))
}

/// The checks `config set` makes before the store is opened: something to set, the lower
/// bounds, and, for a store that does not exist yet (`new_store`), the configuration it
/// would create, so that a refused `config set` creates nothing.
pub(crate) fn precheck(ctx: &Ctx, set: &ConfigSetArgs, new_store: bool) -> Result<(), Failure> {
    if nothing_set(set) {
        return Err(Failure::usage(
            "nothing to set: give at least one setting (see `fdb-leader config set --help`)",
        ));
    }
    check_bounds(set).map_err(Failure::usage)?;
    if new_store {
        for_a_new_election(set)
            .map_err(|e| refusal(ctx, &ElectionConfig::default(), set, &e, "created"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use std::time::Duration;

    use super::*;
    use crate::cli::{ConfigCommand, Switch};

    fn none() -> ConfigSetArgs {
        ConfigSetArgs {
            sharded: false,
            shards: None,
            lease: None,
            heartbeat: None,
            candidate_timeout: None,
            elections: None,
            preemption: None,
            max_clock_rate_error_ppm: None,
            min_tenure: None,
            handover_grace: None,
            takeover_stagger: None,
            transaction_timeout: None,
            reservation_timeout: None,
            version_policy: None,
        }
    }

    #[test]
    fn flags_replace_fields_and_the_result_is_validated() {
        let base = ElectionConfig::default();
        assert!(nothing_set(&none()));
        let set = ConfigSetArgs {
            preemption: Some(Switch::Off),
            min_tenure: Some(Duration::from_secs(2)),
            ..none()
        };
        let new = apply(&base, &set);
        assert!(new.as_ref().is_ok_and(|c| !c.allow_preemption()
            && c.min_tenure() == Duration::from_secs(2)
            && c.lease_duration() == base.lease_duration()));
        let policy = ConfigSetArgs {
            version_policy: Some(fdb_leader_election::VersionPolicy::PreferOldest),
            ..none()
        };
        assert!(!nothing_set(&policy));
        let new = apply(&base, &policy);
        assert!(
            new.as_ref().is_ok_and(|c| c.version_policy()
                == fdb_leader_election::VersionPolicy::PreferOldest
                && c.to_builder()
                    .version_policy(base.version_policy())
                    .build()
                    .is_ok_and(|back| back == base)),
            "{new:?}"
        );
        let bad = ConfigSetArgs {
            lease: Some(Duration::from_secs(6)),
            ..none()
        };
        // The stored heartbeat (3 s) is more than a third of 6 s: the rule is named.
        assert!(matches!(
            apply(&base, &bad),
            Err(ConfigError::HeartbeatTooLong { .. })
        ));
        let tiny = ConfigSetArgs {
            heartbeat: Some(Duration::from_millis(5)),
            ..none()
        };
        assert!(check_bounds(&tiny).is_err_and(|e| e.starts_with("--heartbeat 5ms is too short")));
        assert!(check_bounds(&set).is_ok());
    }

    /// Issue 39: `config set --lease 3s` on an existing election was refused (the stored 3 s
    /// heartbeat is more than a third of it), then again for the next timing: it takes the
    /// timings `run` would create the election with for that lease, and keeps the switches.
    #[test]
    fn a_new_lease_derives_the_timings_run_would_and_keeps_the_switches() {
        let stored = ElectionConfig::default()
            .to_builder()
            .allow_preemption(false)
            .min_tenure(Duration::from_secs(1))
            .version_policy(fdb_leader_election::VersionPolicy::PreferOldest)
            .handover_grace(Duration::from_secs(8))
            .build()
            .unwrap();
        let lease = ConfigSetArgs {
            lease: Some(Duration::from_secs(3)),
            ..none()
        };
        let new = over(&stored, &lease).unwrap();
        let fresh = for_a_new_election(&lease).unwrap();
        let timings = |c: &ElectionConfig| {
            (
                c.lease_duration(),
                c.heartbeat_interval(),
                c.candidate_timeout(),
                c.transaction_timeout(),
                c.takeover_stagger(),
                c.handover_grace(),
                c.reservation_timeout(),
            )
        };
        assert_eq!(
            timings(&new),
            timings(&fresh),
            "the timings of a new election"
        );
        assert_eq!(new.heartbeat_interval(), Duration::from_secs(1));
        assert!(!new.allow_preemption());
        assert_eq!(new.min_tenure(), Duration::from_secs(1));
        assert_eq!(
            new.version_policy(),
            fdb_leader_election::VersionPolicy::PreferOldest
        );
        // A timing given with it wins over the derived one.
        let grace = ConfigSetArgs {
            handover_grace: Some(Duration::from_secs(2)),
            ..lease.clone()
        };
        assert_eq!(
            over(&stored, &grace).unwrap().handover_grace(),
            Duration::from_secs(2)
        );
        // Without --lease, the stored timings stay.
        let tenure = ConfigSetArgs {
            min_tenure: Some(Duration::ZERO),
            ..none()
        };
        assert_eq!(
            over(&stored, &tenure).unwrap().handover_grace(),
            Duration::from_secs(8)
        );
    }

    /// Every refusal of an invalid configuration names a whole command that would work, and
    /// that command, parsed as the command line parses it, does.
    #[test]
    fn a_refused_config_set_names_a_command_that_works() {
        let ctx = Ctx::new("jobs", &crate::cli::StoreChoice::Memory);
        let stored = ElectionConfig::default();
        let three = ElectionConfig::with_lease_duration(Duration::from_secs(3)).unwrap();
        let cases = [
            // (the stored configuration, the flags, the command that would work)
            (
                &stored,
                vec!["--heartbeat", "5s"],
                "config set --lease 15s --heartbeat 5s",
            ),
            (
                &three,
                vec!["--lease", "3s", "--heartbeat", "2s"],
                "config set --lease 6s --heartbeat 2s",
            ),
            (
                &three,
                vec!["--candidate-timeout", "1s", "--preemption", "off"],
                "config set --lease 3s --preemption off",
            ),
            (
                &stored,
                vec!["--reservation-timeout", "20s"],
                "config set --lease 10s",
            ),
        ];
        for (stored, flags, want) in cases {
            let argv = ["fdb-leader", "--memory", "config", "set"]
                .into_iter()
                .chain(flags.iter().copied());
            let parsed = crate::cli::Cli::parse_args(argv).unwrap();
            let crate::cli::Command::Config(ConfigCommand::Set(set)) = parsed.command else {
                panic!("not config set: {flags:?}");
            };
            let e = over(stored, &set).unwrap_err();
            let message = refusal(&ctx, stored, &set, &e, "changed")
                .message
                .unwrap_or_default();
            assert!(
                message.starts_with("invalid configuration, nothing was changed: ")
                    && message.ends_with(&format!(
                        "; this would work: `fdb-leader --memory --election jobs {want}`"
                    )),
                "{flags:?}: {message}"
            );
            // The command, as printed, works.
            let argv = ["fdb-leader", "--memory"]
                .into_iter()
                .chain(want.split(' '));
            let parsed = crate::cli::Cli::parse_args(argv).unwrap();
            let crate::cli::Command::Config(ConfigCommand::Set(fixed)) = parsed.command else {
                panic!("not config set: {want}");
            };
            assert!(
                check_bounds(&fixed).is_ok() && over(stored, &fixed).is_ok(),
                "{want}"
            );
        }
    }
}
