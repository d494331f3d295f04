//! Check (a), fencing: writes accepted in ballot order, one candidate a ballot, no increment lost.

use std::collections::BTreeMap;

use crate::chaos::sink::SinkLog;
use crate::chaos::sink::entry::SinkState;

/// (a) What a sink's log shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkVerdict {
    /// Writes accepted.
    pub accepted: u64,
    /// Writes rejected because a higher ballot had written (fenced sink only).
    pub rejected_stale: u64,
    /// Accepted writes whose ballot was lower than one accepted before.
    pub out_of_order: u64,
    /// Increments undone by later writes: accepted writes minus the final counter.
    pub lost: u64,
    /// Accepted writes whose ballot another candidate had written with.
    pub shared_ballots: u64,
    /// Writes cut inside their one `write(2)` (the writer died in it): they did not happen,
    /// the sink derived no state from them, and they are no violation.
    pub cut_writes: u64,
    /// How many writes broke the fencing rules.
    pub violation_count: u64,
    /// What broke the fencing rules, in words (the first few).
    pub violations: Vec<String>,
}

impl SinkVerdict {
    /// Adds the verdict on another lane's sink (one shard's, under a sharded election): the
    /// counts add up, the violations are kept naming the shard.
    pub fn absorb(&mut self, other: SinkVerdict, shard: Option<u32>) {
        self.accepted = self.accepted.saturating_add(other.accepted);
        self.rejected_stale = self.rejected_stale.saturating_add(other.rejected_stale);
        self.out_of_order = self.out_of_order.saturating_add(other.out_of_order);
        self.lost = self.lost.saturating_add(other.lost);
        self.shared_ballots = self.shared_ballots.saturating_add(other.shared_ballots);
        self.cut_writes = self.cut_writes.saturating_add(other.cut_writes);
        self.violation_count = self.violation_count.saturating_add(other.violation_count);
        for v in other.violations {
            if self.violations.len() < KEEP {
                self.violations.push(match shard {
                    Some(s) => format!("shard {s}: {v}"),
                    None => v,
                });
            }
        }
    }
}

/// How many violation texts a verdict keeps.
const KEEP: usize = 10;

fn note(v: &mut SinkVerdict, text: impl FnOnce() -> String) {
    v.violation_count = v.violation_count.saturating_add(1);
    if v.violations.len() < KEEP {
        v.violations.push(text());
    }
}

/// (a) Checks a sink's log, in the order the sink saw the writes. Each line also records the
/// state the sink derived after it; a line whose state is not the one its predecessors imply
/// is a violation too (the sink decided on a state the log does not show).
pub fn check_sink(log: &SinkLog) -> SinkVerdict {
    let mut v = SinkVerdict {
        cut_writes: log.cut,
        ..SinkVerdict::default()
    };
    let mut max_ballot = 0u64;
    let mut counter = 0u64;
    let mut owners: BTreeMap<u64, &str> = BTreeMap::new();
    for (i, e) in log.entries.iter().enumerate() {
        if !e.accepted {
            if e.ballot < e.value {
                v.rejected_stale = v.rejected_stale.saturating_add(1);
            } else {
                note(&mut v, || {
                    format!(
                        "write {i}: ballot {} rejected although the highest accepted was {}",
                        e.ballot, e.value
                    )
                });
            }
            check_state(&mut v, i, e.state, max_ballot, counter);
            continue;
        }
        v.accepted = v.accepted.saturating_add(1);
        if e.ballot < max_ballot {
            v.out_of_order = v.out_of_order.saturating_add(1);
            note(&mut v, || {
                format!(
                    "write {i}: ballot {} ({}) accepted after ballot {max_ballot} had written",
                    e.ballot, e.candidate
                )
            });
        }
        match owners.get(&e.ballot) {
            Some(owner) if *owner != e.candidate => {
                v.shared_ballots = v.shared_ballots.saturating_add(1);
                note(&mut v, || {
                    format!(
                        "write {i}: ballot {} written by {} and by {owner}",
                        e.ballot, e.candidate
                    )
                });
            }
            Some(_) => {}
            None => {
                owners.insert(e.ballot, &e.candidate);
            }
        }
        if e.value != counter.saturating_add(1) {
            note(&mut v, || {
                format!(
                    "write {i}: ballot {} ({}) set the counter to {} after {counter}: updates lost",
                    e.ballot, e.candidate, e.value
                )
            });
        }
        counter = e.value;
        max_ballot = max_ballot.max(e.ballot);
        check_state(&mut v, i, e.state, max_ballot, counter);
    }
    v.lost = v.accepted.saturating_sub(counter);
    v
}

/// A line's recorded state against the one the log implies.
fn check_state(v: &mut SinkVerdict, i: usize, state: SinkState, max_ballot: u64, counter: u64) {
    if state
        != (SinkState {
            max_ballot,
            counter,
        })
    {
        note(v, || {
            format!(
                "write {i}: the sink recorded state ({}, {}) where its log implies \
                 ({max_ballot}, {counter})",
                state.max_ballot, state.counter
            )
        });
    }
}
