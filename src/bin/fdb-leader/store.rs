//! Opening the store, the election's place in it, and one-shot transactions for the commands
//! that are not a runner (status, config, operator overrides, shards).
//!
//! Election `NAME` lives under the tuple subspace `("fdb-leader", NAME)`; the sharded election
//! of the same name under `("fdb-leader", NAME, "shards")`, so that the two never share a key
//! (both keep a `("config",)` of their own) and a Rust service joins either with
//! `Subspace::from(...)` of the same tuple.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::shard::ShardedElection;
use fdb_leader_election::sqlite::{SqliteOpenError, SqliteOptions};
use fdb_leader_election::{ElectionError, LeaderElection, SqliteDb};
use foundationdb_tuple::Subspace;

use crate::classify::{Healing, classify, fix, message};
use crate::cli::StoreChoice;
use crate::exit::{Failure, chain, outer_and_root};
use crate::{limits, preflight};

/// The first element of every election's subspace: `("fdb-leader", NAME)`.
pub(crate) const SUBSPACE_PREFIX: &str = "fdb-leader";

/// The last element of a sharded election's subspace: `("fdb-leader", NAME, "shards")`.
pub(crate) const SHARDS_SUFFIX: &str = "shards";

/// The bound on one transaction attempt of a one-shot command.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a one-shot command retries transient failures (a busy file, say).
const RETRY_FOR: Duration = Duration::from_secs(15);

/// Which election of a name a command acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The single election, under `("fdb-leader", NAME)`.
    Single,
    /// The sharded election, under `("fdb-leader", NAME, "shards")` (the `shards` commands).
    Sharded,
}

/// The election a command acts on, and where.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    /// The election's name (`--election`).
    pub(crate) name: String,
    /// Which of the two elections of that name the command acts on.
    pub(crate) kind: Kind,
    pub(crate) election: LeaderElection,
    /// The sharded election of the same name.
    pub(crate) sharded: ShardedElection,
    /// The store, for logs: `sqlite PATH`, `foundationdb PATH`, `memory`.
    pub(crate) store: String,
    /// The store, for messages: the path, or what it is.
    pub(crate) location: String,
    /// The SQLite file, if the store is one.
    pub(crate) path: Option<PathBuf>,
    /// The flags that select this store and election, for suggested commands.
    flags: Vec<String>,
    /// Whether the store is this process's own memory (`--memory`).
    in_memory: bool,
}

impl Ctx {
    pub(crate) fn new(name: &str, store: &StoreChoice) -> Self {
        let (store_text, location, mut flags) = match store {
            StoreChoice::Sqlite(path) => (
                format!("sqlite {}", path.display()),
                path.display().to_string(),
                vec!["--sqlite".to_owned(), path.display().to_string()],
            ),
            StoreChoice::ClusterFile(path) => (
                format!("foundationdb {}", path.display()),
                format!("the FoundationDB cluster of {}", path.display()),
                vec!["--cluster-file".to_owned(), path.display().to_string()],
            ),
            StoreChoice::Memory => (
                "memory".to_owned(),
                "the in-memory store".to_owned(),
                vec!["--memory".to_owned()],
            ),
        };
        if name != "default" {
            flags.extend(["--election".to_owned(), name.to_owned()]);
        }
        let path = match store {
            StoreChoice::Sqlite(path) => Some(path.clone()),
            _ => None,
        };
        Ctx {
            name: name.to_owned(),
            kind: Kind::Single,
            election: LeaderElection::new(subspace(name)),
            sharded: ShardedElection::new(shard_subspace(name)),
            store: store_text,
            location,
            path,
            flags,
            in_memory: matches!(store, StoreChoice::Memory),
        }
    }

    /// A command to suggest, quoted for a shell and in backticks, acting on this store and
    /// election: `fdb-leader --sqlite PATH ARGS…`.
    pub(crate) fn suggest(&self, args: &[&str]) -> String {
        let words = std::iter::once("fdb-leader")
            .chain(self.flags.iter().map(String::as_str))
            .chain(args.iter().copied())
            .map(shell_quote)
            .collect::<Vec<_>>()
            .join(" ");
        format!("`{words}`")
    }

    /// This context, for a command on the sharded election of the same name.
    pub(crate) fn for_shards(mut self) -> Self {
        self.kind = Kind::Sharded;
        self
    }

    /// The subcommand that shows this election: `status`, or `shards status`.
    pub(crate) fn status_command(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Single => &["status"],
            Kind::Sharded => &["shards", "status"],
        }
    }

    /// "no election at PATH (name NAME)", the answer of the commands that read an election
    /// that does not exist (for the `shards` commands: "no sharded election ...").
    pub(crate) fn no_election(&self) -> Failure {
        let (location, name) = (&self.location, &self.name);
        if self.in_memory {
            // Nothing but this command could have created it: no other process shares it.
            let what = match self.kind {
                Kind::Single => "election",
                Kind::Sharded => "sharded election",
            };
            return Failure::rejected(format!(
                "no {what} at {location} (name {name}): --memory is this command's own \
                 memory, which no other process shares, so only a run in this same command \
                 could create one; to read or act on an election, give the store its processes \
                 share: --sqlite PATH or --cluster-file PATH"
            ));
        }
        Failure::rejected(match self.kind {
            Kind::Single => format!(
                "no election at {location} (name {name}); a run or a config set command creates \
                 it"
            ),
            Kind::Sharded => format!(
                "no sharded election at {location} (name {name}, subspace (\"{SUBSPACE_PREFIX}\", \
                 {name:?}, \"{SHARDS_SUFFIX}\")); its members create it (`fdb-leader run --shards \
                 M -- CMD`, a ShardedRunner, or ShardedElection::initialize, on that subspace), \
                 as does `fdb-leader config set --sharded --shards M` with the settings given"
            ),
        })
    }

    /// An election operation failed on this election: "no election" for one that does not
    /// exist, a usage error for an invalid configuration, and a store error otherwise (with
    /// the fix, for a SQLite file that can never work as it is).
    pub(crate) fn failure(&self, e: &ElectionError) -> Failure {
        let name = &self.name;
        match e {
            ElectionError::NotInitialized => self.no_election(),
            ElectionError::InvalidConfig(config) => Failure::usage(format!(
                "invalid configuration: {}",
                limits::describe(config)
            )),
            _ => match (classify(e), &self.path) {
                (Healing::Never(cause), Some(path)) => Failure::store(message(e, cause, path)),
                _ => Failure::store(format!("election {name}: {}", chain(e))),
            },
        }
    }
}

/// `word`, quoted for a POSIX shell if it needs to be.
pub(crate) fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The subspace of election `name`.
pub(crate) fn subspace(name: &str) -> Subspace {
    Subspace::from((SUBSPACE_PREFIX, name))
}

/// The subspace of the sharded election `name`: `("fdb-leader", NAME, "shards")`.
pub(crate) fn shard_subspace(name: &str) -> Subspace {
    Subspace::from((SUBSPACE_PREFIX, name, SHARDS_SUFFIX))
}

/// How long opening a SQLite store retries while another process holds the file's lock (two
/// processes creating a new file at once, say).
const OPEN_RETRY_FOR: Duration = Duration::from_secs(10);

/// How a command opens its SQLite store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Open {
    /// To read and write, creating it if it does not exist (`run`, `config set`).
    Create,
    /// To read and write an existing one.
    Existing,
    /// To read only (`status`, `watch`, `config get`, `shards status`): it creates and
    /// changes nothing, so a store this user may only read will do.
    ReadOnly,
}

/// Opens the SQLite store at `path` as `open` says, after checking that it is on a local file
/// system (unless `allow_network_fs`) and that this user may use it so. A command that must
/// not create it answers "no election" for a missing file.
pub(crate) async fn open_sqlite(
    path: &Path,
    open: Open,
    allow_network_fs: bool,
    ctx: &Ctx,
) -> Result<SqliteDb, Failure> {
    if open != Open::Create && !path.exists() {
        return Err(ctx.no_election());
    }
    preflight::check_local_fs(path, allow_network_fs)?;
    preflight::check_store_access(path, open != Open::ReadOnly)?;
    let options = SqliteOptions::default().with_read_only(open == Open::ReadOnly);
    let start = tokio::time::Instant::now();
    let mut delay = Duration::from_millis(20);
    loop {
        match SqliteDb::open_with(path, options.clone()) {
            Ok(db) => return Ok(db),
            // A file with no store in it yet is no election yet, as a missing one is.
            Err(SqliteOpenError::Empty { .. }) => return Err(ctx.no_election()),
            Err(e) if is_busy(&e) && start.elapsed() < OPEN_RETRY_FOR => {
                tracing::debug!(error = %outer_and_root(&e), "the store is locked; retrying");
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2).min(Duration::from_millis(500));
            }
            Err(e) => return Err(open_failure(&e)),
        }
    }
}

/// Whether the file at `path` holds no store yet: empty, or created by a writer that has not
/// written the schema yet (a read-only open, which creates nothing, says so).
pub(crate) fn holds_no_store_yet(path: &Path) -> bool {
    let options = SqliteOptions::default().with_read_only(true);
    matches!(
        SqliteDb::open_with(path, options),
        Err(SqliteOpenError::Empty { .. })
    )
}

/// Whether this user may write the store at `path`: the file and its folder (for the `-wal`
/// and `-shm` beside it).
pub(crate) fn may_write(path: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    access(path, AccessFlags::R_OK | AccessFlags::W_OK).is_ok()
        && access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_ok()
}

/// Whether opening failed only because another connection held the lock.
fn is_busy(e: &SqliteOpenError) -> bool {
    let SqliteOpenError::Sqlite { source, .. } = e else {
        return false;
    };
    source
        .downcast_ref::<rusqlite::Error>()
        .and_then(rusqlite::Error::sqlite_error_code)
        .is_some_and(|code| {
            matches!(
                code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            )
        })
}

fn open_failure(e: &SqliteOpenError) -> Failure {
    match classify(e) {
        Healing::Never(cause) => {
            Failure::store(format!("{} ({})", outer_and_root(e), fix(cause, e.path())))
        }
        Healing::Heals => Failure::store(outer_and_root(e)),
    }
}

/// How a one-shot command may retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads, or writes that are safe to apply twice: retry every transient failure.
    Idempotent,
    /// A write whose effect must not be applied twice: after an unknown commit result, stop
    /// and report that the outcome is unknown.
    NotAfterUnknown,
}

/// Runs `body` in a transaction, retrying conflicts and transient failures for a while: for
/// the one-shot commands, which give up after [`RETRY_FOR`].
pub(crate) async fn once<D, F, Fut, T>(
    db: &D,
    ctx: &Ctx,
    retry: Retry,
    body: F,
) -> Result<T, Failure>
where
    D: ElectionDatabase,
    F: Fn(D::Txn) -> Fut + Send + Sync,
    Fut: Future<Output = Result<T, ElectionError>> + Send,
    T: Send,
{
    attempts(db, ctx, retry, Some(RETRY_FOR), body).await
}

/// Runs `body` (idempotent) in a transaction, retrying conflicts and transient failures (an
/// unreachable cluster, a busy file) until they pass: for `run` and `watch`, which end on a
/// signal, not on a passing failure. The caller races it against its signals.
pub(crate) async fn until_done<D, F, Fut, T>(db: &D, ctx: &Ctx, body: F) -> Result<T, Failure>
where
    D: ElectionDatabase,
    F: Fn(D::Txn) -> Fut + Send + Sync,
    Fut: Future<Output = Result<T, ElectionError>> + Send,
    T: Send,
{
    attempts(db, ctx, Retry::Idempotent, None, body).await
}

/// How often [`until_done`] repeats its warning while the store keeps failing.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// Runs `body` in a transaction, retrying conflicts and transient failures for `retry_for`
/// (`None`: until they pass).
async fn attempts<D, F, Fut, T>(
    db: &D,
    ctx: &Ctx,
    retry: Retry,
    retry_for: Option<Duration>,
    body: F,
) -> Result<T, Failure>
where
    D: ElectionDatabase,
    F: Fn(D::Txn) -> Fut + Send + Sync,
    Fut: Future<Output = Result<T, ElectionError>> + Send,
    T: Send,
{
    let start = tokio::time::Instant::now();
    let mut delay = Duration::from_millis(50);
    let mut failures = 0_u64;
    let mut warned: Option<tokio::time::Instant> = None;
    loop {
        match db.transact(ATTEMPT_TIMEOUT, &body).await {
            Ok(value) => {
                if failures > 0 && retry_for.is_none() {
                    tracing::info!(failures, store = %ctx.store, "the store answers again");
                }
                return Ok(value);
            }
            Err(e) if retry == Retry::NotAfterUnknown && e.is_maybe_committed() => {
                return Err(Failure::store(format!(
                    "the outcome is unknown: {} (the write may have applied; check with {})",
                    chain(&e),
                    ctx.suggest(ctx.status_command())
                )));
            }
            Err(e)
                if e.is_retryable()
                    && retry_for
                        .is_none_or(|bound| start.elapsed().saturating_add(delay) < bound) =>
            {
                failures = failures.saturating_add(1);
                if retry_for.is_none() && warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    warned = Some(tokio::time::Instant::now());
                    tracing::warn!(
                        error = %chain(&e),
                        failures,
                        store = %ctx.store,
                        "the store does not answer; retrying until it does (a signal stops)"
                    );
                } else {
                    tracing::debug!(error = %chain(&e), "transient failure; retrying");
                }
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(ctx.failure(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_carry_the_store_and_quote_what_needs_it() {
        let ctx = Ctx::new("jobs", &StoreChoice::Sqlite("/tmp/my dir/e.db".into()));
        assert_eq!(
            ctx.suggest(&["config", "set", "--preemption", "on"]),
            "`fdb-leader --sqlite '/tmp/my dir/e.db' --election jobs config set --preemption on`"
        );
        let ctx = Ctx::new("default", &StoreChoice::Memory);
        assert_eq!(ctx.suggest(&["status"]), "`fdb-leader --memory status`");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn the_sharded_election_of_a_name_lives_beside_the_single_one() {
        assert_eq!(
            shard_subspace("jobs").bytes(),
            Subspace::from(("fdb-leader", "jobs", "shards")).bytes()
        );
        let ctx = Ctx::new("jobs", &StoreChoice::Memory).for_shards();
        assert_eq!(
            ctx.suggest(ctx.status_command()),
            "`fdb-leader --memory --election jobs shards status`"
        );
        let missing = ctx.no_election();
        assert_eq!(missing.code, crate::exit::Exit::Rejected);
        assert!(
            missing.to_string().starts_with(
                "no sharded election at the in-memory store (name jobs): --memory is this \
                 command's own memory, which no other process shares"
            ),
            "{missing}"
        );
        let file = Ctx::new("jobs", &StoreChoice::Sqlite("/tmp/e.db".into())).for_shards();
        let missing = file.no_election();
        assert!(
            missing.to_string().starts_with(
                "no sharded election at /tmp/e.db (name jobs, subspace (\"fdb-leader\", \
                 \"jobs\", \"shards\"))"
            ),
            "{missing}"
        );
        // What the library says of a sharded election that does not exist.
        let f = ctx.failure(&ElectionError::NotInitialized);
        assert!(f.to_string().starts_with("no sharded election"), "{f}");
    }

    #[test]
    fn election_errors_name_the_flag_or_the_election() {
        let ctx = Ctx::new("x", &StoreChoice::Sqlite("/srv/e.db".into()));
        let e = ElectionError::InvalidConfig(fdb_leader_election::ConfigError::ZeroLease);
        let f = ctx.failure(&e);
        assert_eq!(f.code, crate::exit::Exit::Usage);
        assert_eq!(
            f.to_string(),
            "invalid configuration: --lease must be longer than zero"
        );
        let f = ctx.failure(&ElectionError::NotInitialized);
        assert_eq!(f.code, crate::exit::Exit::Rejected);
        assert!(
            f.to_string()
                .starts_with("no election at /srv/e.db (name x)")
        );
    }
}
