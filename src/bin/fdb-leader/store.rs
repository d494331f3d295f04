//! Opening the store, the election's place in it, and one-shot transactions for the commands
//! that are not a runner (status, config, operator overrides).

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use fdb_leader_election::runner::ElectionDatabase;
use fdb_leader_election::sqlite::SqliteOpenError;
use fdb_leader_election::{ElectionError, LeaderElection, SqliteDb};
use foundationdb_tuple::Subspace;

use crate::cli::StoreChoice;
use crate::exit::{Failure, chain, outer_and_root};

/// The first element of every election's subspace: `("fdb-leader", NAME)`.
pub(crate) const SUBSPACE_PREFIX: &str = "fdb-leader";

/// The bound on one transaction attempt of a one-shot command.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a one-shot command retries transient failures (a busy file, say).
const RETRY_FOR: Duration = Duration::from_secs(15);

/// The election a command acts on, and where.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    /// The election's name (`--election`).
    pub(crate) name: String,
    pub(crate) election: LeaderElection,
    /// The store, for messages.
    pub(crate) store: String,
}

impl Ctx {
    pub(crate) fn new(name: &str, store: &StoreChoice) -> Self {
        let store = match store {
            StoreChoice::Sqlite(path) => format!("sqlite {}", path.display()),
            StoreChoice::ClusterFile(path) => format!("foundationdb {}", path.display()),
            StoreChoice::Memory => "memory".to_owned(),
        };
        Ctx {
            name: name.to_owned(),
            election: LeaderElection::new(subspace(name)),
            store,
        }
    }
}

/// The subspace of election `name`.
pub(crate) fn subspace(name: &str) -> Subspace {
    Subspace::from((SUBSPACE_PREFIX, name))
}

/// How long opening a SQLite store retries while another process holds the file's lock (two
/// processes creating a new file at once, say).
const OPEN_RETRY_FOR: Duration = Duration::from_secs(10);

/// Opens (`create`: or creates) the SQLite store at `path`.
pub(crate) async fn open_sqlite(path: &Path, create: bool) -> Result<SqliteDb, Failure> {
    if !create && !path.exists() {
        return Err(Failure::store(format!(
            "no election store at {} (a `run` or `config set` creates one)",
            path.display()
        )));
    }
    let start = tokio::time::Instant::now();
    let mut delay = Duration::from_millis(20);
    loop {
        match SqliteDb::open(path) {
            Ok(db) => return Ok(db),
            Err(e) if is_busy(&e) && start.elapsed() < OPEN_RETRY_FOR => {
                tracing::debug!(error = %outer_and_root(&e), "the store is locked; retrying");
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2).min(Duration::from_millis(500));
            }
            Err(e) => return Err(open_failure(&e)),
        }
    }
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
    let hint = match e {
        SqliteOpenError::CannotOpen { .. } => {
            " (does the directory exist, and may this user write to it?)"
        }
        SqliteOpenError::NotADatabase { .. } | SqliteOpenError::Corrupt { .. } => {
            " (was the path mistyped? the file is left untouched)"
        }
        _ => "",
    };
    Failure::store(format!("{}{hint}", outer_and_root(e)))
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

/// Runs `body` in a transaction, retrying conflicts and transient failures for a while.
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
    let start = tokio::time::Instant::now();
    let mut delay = Duration::from_millis(50);
    loop {
        match db.transact(ATTEMPT_TIMEOUT, &body).await {
            Ok(value) => return Ok(value),
            Err(e) if retry == Retry::NotAfterUnknown && e.is_maybe_committed() => {
                return Err(Failure::store(format!(
                    "the outcome is unknown: {} (the write may have applied; check with `fdb-leader status`)",
                    chain(&e)
                )));
            }
            Err(e) if e.is_retryable() && start.elapsed().saturating_add(delay) < RETRY_FOR => {
                tracing::debug!(error = %chain(&e), "transient failure; retrying");
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(Failure::election(&ctx.name, &e)),
        }
    }
}
