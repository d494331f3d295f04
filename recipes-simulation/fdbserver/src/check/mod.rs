//! The check phase's oracles: pure functions over the log (in commit order) and the belief
//! intervals the testers recorded. Each finding names its oracle; the workload reports each
//! as a `SevError` trace event (`LeaderElectionViolation`), which fails the run.

mod versions;

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::log::{Entry, Interval};
use versions::versions;

/// A finding.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Violation {
    pub(crate) oracle: &'static str,
    pub(crate) message: String,
}

/// What the log shows, counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Counts {
    pub(crate) elections: u64,
    pub(crate) takeovers: u64,
    pub(crate) handovers: u64,
    pub(crate) vacancies: u64,
    pub(crate) fenced_writes: u64,
    pub(crate) heartbeats: u64,
    pub(crate) beliefs: u64,
    pub(crate) policy_takeovers_judged: u64,
    pub(crate) shard_acquisitions: u64,
    pub(crate) shard_writes: u64,
}

/// What the cluster let the candidates do: their cycles, and those that failed with the
/// cluster's own errors (timeouts, unavailability, conflicts, unknown results).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Cluster {
    pub(crate) cycles: u64,
    pub(crate) cluster_failures: u64,
    /// Testers whose counts never reached the database (their writes are retried for ten
    /// minutes of simulated time after the run: a cluster that stayed down that long).
    pub(crate) testers_missing: u32,
}

impl Cluster {
    /// Summed over the testers' counts, of `testers` testers.
    pub(crate) fn of(stats: &[crate::tester::Stats], testers: u32) -> Self {
        let found = u32::try_from(stats.len()).unwrap_or(u32::MAX);
        stats.iter().fold(
            Cluster {
                testers_missing: testers.saturating_sub(found),
                ..Cluster::default()
            },
            |c, s| Cluster {
                cycles: c.cycles.saturating_add(s.cycles),
                cluster_failures: c.cluster_failures.saturating_add(s.cluster_failures),
                ..c
            },
        )
    }

    /// Whether the cluster failed half of the cycles or more, of at least twenty: a seed whose
    /// simulated cluster stayed unavailable or slower than the transactions' bound most of
    /// the run (a recovery of a hundred seconds, a disk error) is not one where the election
    /// can show progress: liveness is promised once faults stop, and BUGGIFY never stops.
    /// Cycles that failed for the election's own reasons are not excused, nor is a run that
    /// tried nothing.
    /// A tester's counts that never reached the database leave progress unjudgeable too
    /// (single seed 37 of the campaign: no commit in the whole run, and the
    /// counts' write timed out).
    pub(crate) fn unavailable(&self) -> bool {
        self.testers_missing > 0
            || (self.cycles >= 20 && self.cluster_failures.saturating_mul(2) >= self.cycles)
    }
}

/// Runs every oracle of the single election.
pub(crate) fn check(
    entries: &[Entry],
    intervals: &[Interval],
    cluster: Cluster,
) -> (Counts, Vec<Violation>) {
    let (counts, mut found) = every_rule(entries, intervals);
    if (counts.elections == 0 || counts.fenced_writes == 0) && !cluster.unavailable() {
        found.push(progress(format!(
            "{} elections, {} fenced writes ({} cycles, {} failed by the cluster)",
            counts.elections, counts.fenced_writes, cluster.cycles, cluster.cluster_failures
        )));
    }
    (counts, found)
}

/// Runs every oracle of the sharded election: its coordinator election's (ballots, beliefs,
/// versions), and per shard the same rules of ballots, fenced writes and beliefs.
pub(crate) fn check_sharded(
    entries: &[Entry],
    intervals: &[Interval],
    cluster: Cluster,
) -> (Counts, Vec<Violation>) {
    let (counts, mut found) = every_rule(entries, intervals);
    let idle = counts.shard_acquisitions == 0 || counts.shard_writes == 0 || counts.elections == 0;
    if idle && !cluster.unavailable() {
        found.push(progress(format!(
            "{} coordinator elections, {} shard acquisitions, {} fenced shard writes ({} cycles, \
             {} failed by the cluster)",
            counts.elections,
            counts.shard_acquisitions,
            counts.shard_writes,
            cluster.cycles,
            cluster.cluster_failures
        )));
    }
    (counts, found)
}

/// The counts, and the rules both elections keep: ballots, fenced writes, beliefs and
/// versions (the sharded entries carry their shard, so each rule holds per shard there).
fn every_rule(entries: &[Entry], intervals: &[Interval]) -> (Counts, Vec<Violation>) {
    let mut counts = count(entries, intervals);
    let mut found = ballots(entries);
    found.extend(fenced_writes(entries));
    found.extend(beliefs(intervals));
    let (judged, v) = versions(entries);
    counts.policy_takeovers_judged = judged;
    found.extend(v);
    (counts, found)
}

fn progress(what: String) -> Violation {
    Violation {
        oracle: "progress",
        message: format!("a run that did nothing: {what}"),
    }
}

fn count(entries: &[Entry], intervals: &[Interval]) -> Counts {
    let mut c = Counts {
        beliefs: u64::try_from(intervals.len()).unwrap_or(u64::MAX),
        ..Counts::default()
    };
    for e in entries {
        match e {
            Entry::Acquired {
                candidate, prior, ..
            } => {
                c.elections += 1;
                if prior.reservation.as_deref() == Some(candidate.as_str()) {
                    c.handovers += 1;
                } else {
                    c.takeovers += 1;
                }
            }
            Entry::Vacancy { .. } => c.vacancies += 1,
            Entry::Work { .. } => c.fenced_writes += 1,
            Entry::Heartbeat { .. } => c.heartbeats += 1,
            Entry::ShardAcquired { .. } => c.shard_acquisitions += 1,
            Entry::ShardWork { .. } => c.shard_writes += 1,
        }
    }
    c
}

/// An acquisition as the ballots oracle sees it: its scope (the election, `""`, or a shard),
/// the ballot and who took it; or a vacancy (`acquired: false`) written by its ballot's owner.
struct Change<'a> {
    scope: String,
    ballot: u64,
    who: &'a str,
    acquired: bool,
}

fn change(e: &Entry) -> Option<Change<'_>> {
    match e {
        Entry::Acquired {
            ballot, candidate, ..
        } => Some(Change {
            scope: String::new(),
            ballot: *ballot,
            who: candidate,
            acquired: true,
        }),
        Entry::Vacancy { ballot, by, .. } => Some(Change {
            scope: String::new(),
            ballot: *ballot,
            who: by,
            acquired: false,
        }),
        Entry::ShardAcquired {
            shard,
            ballot,
            member,
        } => Some(Change {
            scope: format!("shard {shard}"),
            ballot: *ballot,
            who: member,
            acquired: true,
        }),
        _ => None,
    }
}

/// Ballots never decrease and each has one owner, per scope (the election, each shard):
/// acquisitions, in commit order, take strictly growing ballots, and a vacancy is written by
/// the owner of its ballot, at the latest ballot.
pub(crate) fn ballots(entries: &[Entry]) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut owners: BTreeMap<(String, u64), &str> = BTreeMap::new();
    let mut high: BTreeMap<String, u64> = BTreeMap::new();
    for (n, e) in entries.iter().enumerate() {
        let Some(c) = change(e) else {
            continue;
        };
        let at = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!(" of {s}")
            }
        };
        let top = high.get(&c.scope).copied();
        if c.acquired {
            if let Some(h) = top.filter(|h| c.ballot <= *h) {
                found.push(Violation {
                    oracle: "ballots",
                    message: format!(
                        "log entry {n}: {} acquired ballot {}{} after ballot {h} had been acquired",
                        c.who,
                        c.ballot,
                        at(&c.scope)
                    ),
                });
            }
            high.insert(c.scope.clone(), top.map_or(c.ballot, |h| h.max(c.ballot)));
            owners.insert((c.scope, c.ballot), c.who);
        } else {
            if let Some(h) = top.filter(|h| c.ballot < *h) {
                found.push(Violation {
                    oracle: "ballots",
                    message: format!(
                        "log entry {n}: {} wrote a vacancy of ballot {}{} after ballot {h} had \
                         been acquired",
                        c.who,
                        c.ballot,
                        at(&c.scope)
                    ),
                });
            }
            if let Some(o) = owners
                .get(&(c.scope.clone(), c.ballot))
                .filter(|o| **o != c.who)
            {
                found.push(Violation {
                    oracle: "ballots",
                    message: format!(
                        "log entry {n}: {} wrote the vacancy of ballot {}{}, owned by {o}",
                        c.who,
                        c.ballot,
                        at(&c.scope)
                    ),
                });
            }
        }
    }
    found
}

/// Fenced writes arrive in ballot order, and the fenced counter loses no update, per scope
/// (the election's counter, each shard's): each write, in commit order, carries a ballot no
/// older than the one before, and sets the counter to one more than the write before it.
pub(crate) fn fenced_writes(entries: &[Entry]) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut last: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (n, e) in entries.iter().enumerate() {
        let (scope, ballot, who, counter) = match e {
            Entry::Work {
                ballot,
                candidate,
                counter,
            } => (String::new(), *ballot, candidate, *counter),
            Entry::ShardWork {
                shard,
                ballot,
                member,
                counter,
            } => (format!("shard {shard} "), *ballot, member, *counter),
            _ => continue,
        };
        let (prev_ballot, prev_counter) = last.get(&scope).copied().unwrap_or((0, 0));
        if ballot < prev_ballot {
            found.push(Violation {
                oracle: "fenced-writes",
                message: format!(
                    "log entry {n}: {who} wrote {scope}with ballot {ballot} after ballot \
                     {prev_ballot} had written"
                ),
            });
        }
        if counter != prev_counter.saturating_add(1) {
            found.push(Violation {
                oracle: "fenced-writes",
                message: format!(
                    "log entry {n}: {who} set the {scope}counter to {counter} after it was \
                     {prev_counter}: an update was lost"
                ),
            });
        }
        last.insert(scope, (prev_ballot.max(ballot), counter));
    }
    found
}

/// No two candidates believe they lead at the same simulated instant: per scope (the
/// election, or each shard).
pub(crate) fn beliefs(intervals: &[Interval]) -> Vec<Violation> {
    let mut scopes: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
    for i in intervals.iter().filter(|i| i.end > i.start) {
        scopes.entry(i.scope.as_str()).or_default().push(i);
    }
    scopes
        .into_iter()
        .flat_map(|(scope, list)| overlaps(scope, list))
        .collect()
}

fn overlaps(scope: &str, mut sorted: Vec<&Interval>) -> Vec<Violation> {
    /// Shorter overlaps are the conversions' rounding.
    const SLACK: f64 = 1e-6;
    sorted.sort_by(|a, b| a.start.partial_cmp(&b.start).unwrap_or(Ordering::Equal));
    let mut found = Vec::new();
    let mut reach: Option<&Interval> = None;
    for i in sorted {
        if let Some(r) = reach {
            let other = r.candidate != i.candidate || r.ballot != i.ballot;
            if other && i.start + SLACK < r.end {
                found.push(Violation {
                    oracle: "beliefs",
                    message: format!(
                        "{}{} believed it led ballot {} from {:.6} s while {} believed it led \
                         ballot {} until {:.6} s",
                        if scope.is_empty() {
                            String::new()
                        } else {
                            format!("{scope}: ")
                        },
                        i.candidate,
                        i.ballot,
                        i.start,
                        r.candidate,
                        r.ballot,
                        r.end
                    ),
                });
            }
        }
        if reach.is_none_or(|r| i.end > r.end) {
            reach = Some(i);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::log::{Prior, Row};

    fn acquired(ballot: u64, who: &str) -> Entry {
        Entry::Acquired {
            ballot,
            candidate: who.into(),
            version: Some("1.0.0".into()),
            prior: Prior {
                ballot: ballot.saturating_sub(1),
                owner: Some("old".into()),
                reservation: None,
                leader_version: Some("2.0.0".into()),
            },
            decided_at: 10.0,
            policy: "no-downgrade".into(),
            reservation_timeout: 2.0,
            heartbeat: 1.0,
            rho_ppm: 10_000,
            registry: vec![Row {
                id: "c".into(),
                version: Some("2.0.0".into()),
                eligible: true,
                live: true,
                heartbeat: 7,
            }],
        }
    }

    fn work(ballot: u64, counter: u64) -> Entry {
        Entry::Work {
            ballot,
            candidate: "a".into(),
            counter,
        }
    }

    #[test]
    fn each_oracle_fails_on_what_it_forbids() {
        assert!(ballots(&[acquired(2, "a"), acquired(3, "b")]).is_empty());
        assert_eq!(ballots(&[acquired(3, "a"), acquired(3, "b")]).len(), 1);
        assert!(fenced_writes(&[work(2, 1), work(3, 2)]).is_empty());
        assert_eq!(fenced_writes(&[work(3, 1), work(2, 2)]).len(), 1);
        assert_eq!(fenced_writes(&[work(3, 1), work(3, 3)]).len(), 1);
        let i = |c: &str, b, s, e| Interval {
            scope: String::new(),
            candidate: c.into(),
            ballot: b,
            start: s,
            end: e,
        };
        assert!(beliefs(&[i("a", 1, 0.0, 1.0), i("b", 2, 1.0, 2.0)]).is_empty());
        assert_eq!(
            beliefs(&[i("a", 1, 0.0, 1.5), i("b", 2, 1.0, 2.0)]).len(),
            1
        );
        let hb = |at| Entry::Heartbeat {
            candidate: "c".into(),
            heartbeat: 7,
            started_at: at,
        };
        // c (2.0.0) heartbeated 1 s before: still there, ranked ahead of 1.0.0.
        assert_eq!(versions(&[hb(9.0), acquired(2, "a")]).1.len(), 1);
        // Silent for the reservation timeout (2 s / 1.01): passed over.
        assert!(versions(&[hb(7.9), acquired(2, "a")]).1.is_empty());
        let (judged, _) = versions(&[acquired(2, "a")]);
        assert_eq!(judged, 1);
        let (counts, found) = check(&[], &[], Cluster::default());
        assert_eq!(counts.elections, 0);
        assert!(found.iter().any(|v| v.oracle == "progress"));
        // A cluster that failed half of the cycles excuses a run without progress; one that
        // let most of them commit, or a run that tried nothing, does not.
        let down = Cluster {
            cycles: 100,
            cluster_failures: 50,
            ..Cluster::default()
        };
        assert!(down.unavailable());
        assert!(check(&[], &[], down).1.is_empty());
        let up = Cluster {
            cycles: 100,
            cluster_failures: 49,
            ..Cluster::default()
        };
        assert!(!check(&[], &[], up).1.is_empty());
        // A tester whose counts never reached the database: not judged; all there: judged.
        let stats = [crate::tester::Stats::default()];
        assert!(check(&[], &[], Cluster::of(&stats, 2)).1.is_empty());
        assert!(!check(&[], &[], Cluster::of(&stats, 1)).1.is_empty());
    }

    #[test]
    fn each_shard_keeps_the_same_rules_apart() {
        let acq = |shard, ballot| Entry::ShardAcquired {
            shard,
            ballot,
            member: "m".into(),
        };
        let w = |shard, ballot, counter| Entry::ShardWork {
            shard,
            ballot,
            member: "m".into(),
            counter,
        };
        // Ballot 3 of shard 1 after ballot 5 of shard 0: no conflict between shards.
        assert!(ballots(&[acq(0, 5), acq(1, 3)]).is_empty());
        assert_eq!(ballots(&[acq(0, 5), acq(0, 3)]).len(), 1);
        assert!(fenced_writes(&[w(0, 5, 1), w(1, 3, 1), w(0, 5, 2)]).is_empty());
        assert_eq!(fenced_writes(&[w(0, 5, 1), w(0, 4, 2)]).len(), 1);
        assert_eq!(fenced_writes(&[w(0, 5, 1), w(0, 5, 3)]).len(), 1);
        let (counts, found) = check_sharded(
            &[acquired(2, "a"), acq(0, 1), w(0, 1, 1)],
            &[],
            Cluster::default(),
        );
        assert_eq!((counts.shard_acquisitions, counts.shard_writes), (1, 1));
        assert!(found.is_empty(), "{found:?}");
    }
}
