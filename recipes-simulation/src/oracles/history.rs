//! Oracle 7: the commit-ordered history replays to the database state.
//!
//! Every transaction the simulation commits writes its own history entry under its commit
//! version, in the same transaction. After every step the new entries are read back and
//! replayed:
//! - the versions must be complete and in order (every write commit has exactly one entry);
//! - an entry that writes the leader record must have read the record the replay holds at that
//!   point (its write was conflict-checked, so nothing can have come in between);
//! - the replayed leader record, protected register, counters and configuration must equal
//!   the database's, after every step, and the whole registry too at the end;
//! - an entry must claim a leader-record write exactly when the commit wrote the leader key.

use std::collections::BTreeMap;

use super::{DbState, OracleId, Violation};
use crate::history::{CandView, Replayed};

/// Oracle 7.
#[derive(Debug, Default)]
pub struct HistoryReplay {
    replay: Replayed,
    /// The last version replayed.
    pub cursor: u64,
}

fn fail(m: String) -> Option<Violation> {
    Some(Violation::new(OracleId::History, m))
}

impl HistoryReplay {
    /// A commit's entry says it wrote the leader record (`claims`) and the commit wrote the
    /// leader key (`wrote`): they must agree.
    pub fn check_keys(actor: &str, version: u64, claims: bool, wrote: bool) -> Option<Violation> {
        (claims != wrote).then(|| {
            Violation::new(
                OracleId::History,
                format!(
                    "{actor}'s entry at version {version} {} a leader-record write, but the \
                     commit {} the leader key",
                    if claims { "claims" } else { "omits" },
                    if wrote { "wrote" } else { "did not write" }
                ),
            )
        })
    }

    /// Replays the new entries and compares with the database.
    pub fn check(&mut self, db: &DbState) -> Option<Violation> {
        for (version, entry) in &db.new_history {
            let expected = self.cursor.saturating_add(1);
            if *version != expected {
                return fail(format!(
                    "the history jumps from version {} to {version}: entry {expected} is missing",
                    self.cursor
                ));
            }
            let Some(entry) = entry else {
                return fail(format!(
                    "the history entry at version {version} does not decode"
                ));
            };
            if entry.version != *version {
                return fail(format!(
                    "the entry stored at version {version} says it is version {}",
                    entry.version
                ));
            }
            if let (Some(prior), Some(_)) = (&entry.prior, &entry.leader) {
                if self.replay.leader.as_ref() != Some(prior) {
                    return fail(format!(
                        "{} wrote the leader record at version {version} having read {:?}, but \
                         the replayed record was {:?}",
                        entry.actor, prior, self.replay.leader
                    ));
                }
            }
            self.replay.apply(entry);
            self.cursor = *version;
        }
        if self.cursor != db.version {
            return fail(format!(
                "the database is at version {} but the history ends at {}",
                db.version, self.cursor
            ));
        }
        let r = &self.replay;
        let diffs = [
            (r.leader.as_ref() != Some(&db.leader), "leader record"),
            (r.register != db.register, "protected register"),
            (r.counter != db.counter, "fenced counter"),
            (r.shadow != db.shadow, "shadow counter"),
            (r.config.as_ref() != Some(&db.config), "configuration"),
            (
                db.candidates
                    .as_ref()
                    .is_some_and(|c: &BTreeMap<String, CandView>| c != &r.candidates),
                "candidate registry",
            ),
        ];
        let differ: Vec<&str> = diffs
            .iter()
            .filter_map(|(d, what)| d.then_some(*what))
            .collect();
        if differ.is_empty() {
            None
        } else {
            fail(format!(
                "the history replayed to version {} differs from the database in: {}",
                self.cursor,
                differ.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{ConfigView, Entry, Op, RecordView};

    fn db(version: u64, new_history: Vec<(u64, Option<Entry>)>) -> DbState {
        DbState {
            version,
            new_history,
            ..DbState::for_tests()
        }
    }

    fn init(version: u64) -> Entry {
        let mut e = Entry::new("op", None, 0, Op::Init);
        e.version = version;
        e.leader = Some(RecordView::default());
        e.config = Some(ConfigView::enabled(1));
        e
    }

    #[test]
    fn a_complete_history_replays_and_a_gap_fails() {
        let mut o = HistoryReplay::default();
        assert!(o.check(&db(1, vec![(1, Some(init(1)))])).is_none());
        let mut other = Entry::new("p", None, 0, Op::Shadow);
        other.version = 3;
        assert!(o.check(&db(3, vec![(3, Some(other))])).is_some());
    }

    #[test]
    fn a_history_behind_the_database_fails() {
        let mut o = HistoryReplay::default();
        assert!(o.check(&db(2, vec![(1, Some(init(1)))])).is_some());
    }

    #[test]
    fn keys_and_claims_must_agree() {
        assert!(HistoryReplay::check_keys("p", 1, true, true).is_none());
        assert!(HistoryReplay::check_keys("p", 1, false, true).is_some());
        assert!(HistoryReplay::check_keys("p", 1, true, false).is_some());
    }
}
