//! The embedded stores as [`Backend`]s of the conformance suite and the differential test:
//! MemDb, and (feature `sqlite`) the SQLite store, each on a manual clock so that transactions
//! age only when a check says so.

#![allow(
    clippy::unwrap_used,
    unreachable_pub,
    dead_code,
    reason = "each test crate uses what it needs"
)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fdb_leader_election::memdb::{CommitFault, MemDb, MemTransaction, ScriptedFaults};
use fdb_leader_election::{ManualClock, TxnError};

use crate::common::conformance::{self, Backend};

/// One MemDb on a manual clock, with a fault script.
pub struct MemBackend {
    pub db: MemDb,
    pub clock: ManualClock,
    pub faults: ScriptedFaults,
    prefixes: AtomicU64,
}

impl MemBackend {
    pub fn new() -> Self {
        let clock = ManualClock::new();
        let db = MemDb::with_clock(Arc::new(clock.clone()));
        let faults = ScriptedFaults::new();
        db.set_fault_injector(Arc::new(faults.clone()));
        MemBackend {
            db,
            clock,
            faults,
            prefixes: AtomicU64::new(0),
        }
    }
}

impl Backend for MemBackend {
    type Txn = MemTransaction;

    fn begin(&self) -> MemTransaction {
        self.db.create_transaction()
    }

    fn commit(&self, txn: MemTransaction) -> impl Future<Output = Result<(), TxnError>> + Send {
        txn.commit()
    }

    fn fresh_prefix(&self) -> Vec<u8> {
        let n = self.prefixes.fetch_add(1, Ordering::Relaxed);
        format!("conformance/{n:04}/").into_bytes()
    }

    async fn age(&self, by: Duration) {
        self.clock.advance(by);
    }

    fn deliberate(&self) -> conformance::Deliberate {
        conformance::Deliberate::STRICT
    }

    fn set_watch_limit(&self, limit: usize) -> bool {
        self.db.set_max_watches(limit).is_ok()
    }

    fn inject(&self, fault: conformance::Fault) -> bool {
        match fault {
            conformance::Fault::UnknownAppliedLater => {
                self.faults
                    .push_commit_fault(CommitFault::UnknownAppliedLater);
            }
        }
        true
    }
}

#[cfg(feature = "sqlite")]
#[allow(
    unused_imports,
    reason = "not every test crate uses the SQLite backend"
)]
pub use sqlite::{POLL, SqliteBackend};

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::path::PathBuf;

    use fdb_leader_election::sqlite::{SqliteDb, SqliteOptions, SqliteTransaction};
    use tempfile::TempDir;

    use super::*;

    /// Fast polling, so the watch checks do not wait long.
    pub const POLL: Duration = Duration::from_millis(5);

    /// Transactions alternate over `handles` (one, or several handles on one file), all on one
    /// manual clock.
    pub struct SqliteBackend {
        pub dir: TempDir,
        pub path: PathBuf,
        pub handles: Vec<SqliteDb>,
        pub clock: ManualClock,
        next: AtomicU64,
        prefixes: AtomicU64,
    }

    impl SqliteBackend {
        pub fn with_handles(n: usize) -> Self {
            let clock = ManualClock::new();
            let options = || {
                SqliteOptions::default()
                    .with_watch_poll_interval(POLL)
                    .with_clock(Arc::new(clock.clone()))
            };
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("election.db");
            let handles = (0..n.max(1))
                .map(|_| SqliteDb::open_with(&path, options()).unwrap())
                .collect();
            SqliteBackend {
                dir,
                path,
                handles,
                clock,
                next: AtomicU64::new(0),
                prefixes: AtomicU64::new(0),
            }
        }
    }

    impl Backend for SqliteBackend {
        type Txn = SqliteTransaction;

        fn begin(&self) -> SqliteTransaction {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let i = usize::try_from(n).unwrap() % self.handles.len();
            self.handles[i].create_transaction()
        }

        fn commit(
            &self,
            txn: SqliteTransaction,
        ) -> impl Future<Output = Result<(), TxnError>> + Send {
            txn.commit()
        }

        fn fresh_prefix(&self) -> Vec<u8> {
            let n = self.prefixes.fetch_add(1, Ordering::Relaxed);
            format!("conformance/{n:04}/").into_bytes()
        }

        async fn age(&self, by: Duration) {
            self.clock.advance(by);
        }

        fn deliberate(&self) -> conformance::Deliberate {
            conformance::Deliberate::STRICT
        }

        fn set_watch_limit(&self, limit: usize) -> bool {
            // The limit is per handle, as FoundationDB's is per client: the check needs one.
            match self.handles.as_slice() {
                [handle] => handle.set_max_watches(limit).is_ok(),
                _ => false,
            }
        }
    }
}
