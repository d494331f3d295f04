//! Noticing, within 50 ms, that the store's files were deleted or replaced under a running
//! election.
//!
//! SQLite keeps using the files it opened, even after `rm election.db*`,
//! `rm election.db-wal election.db-shm` or a `mv` over one of them, while new processes open
//! *other* files at the same paths: a new database file restarts ballots at 1, a new `-wal`
//! lacks the commits still in the old one, a new `-shm` holds locks that no longer exclude
//! this process's. Two leaders, and fencing defeated. The rule that tells (device and inode
//! of the database file, its `-wal` and its `-shm`, as the handle opened them) lives in the
//! store layer, [`SqliteDb::check_files`], which every commit and watch of the store applies
//! too; `run` and `watch` also apply it every [`PERIOD`], so that a leader whose files are gone
//! stops its child within 50 ms, whatever its heartbeat.

use std::time::Duration;

use fdb_leader_election::SqliteDb;

use crate::classify::{Cause, fix};
use crate::signals::Fatal;

/// Checks every `every` that the store's files are still the ones `db` opened; reports a
/// failure through `fatal` and returns when they are not.
pub(crate) async fn monitor(db: SqliteDb, every: Duration, fatal: Fatal) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(changed) = db.check_files() {
            fatal.raise(format!("{changed} ({})", fix(Cause::Moved, db.path())));
            return;
        }
    }
}

/// How often to check: 50ms, the shortest heartbeat the command line accepts, so that a
/// change is noticed within a heartbeat whatever the stored configuration (three `stat`s
/// cost microseconds).
pub(crate) const PERIOD: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_fits_within_the_shortest_heartbeat() {
        assert!(PERIOD <= crate::limits::MIN_HEARTBEAT);
    }
}
