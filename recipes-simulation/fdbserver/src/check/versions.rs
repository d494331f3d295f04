//! The version policy's oracle: no takeover lands on a candidate while one the policy ranks
//! ahead of it still heartbeats.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use fdb_leader_election::Version;

use super::Violation;
use crate::log::Entry;

/// How `a` compares with `b` under `policy`, against the last leader's version `leader`
/// (docs/design.md §14.2; written from the design for this oracle, the library's ranking being
/// the thing judged). Greater ranks ahead.
pub(crate) fn versions_rank(
    policy: &str,
    leader: Option<&Version>,
    a: Option<&Version>,
    b: Option<&Version>,
) -> Ordering {
    // By semver precedence (§14.1): build metadata makes no version newer; none is oldest.
    let precedence = |a: Option<&Version>, b: Option<&Version>| match (a, b) {
        (Some(a), Some(b)) => a.cmp_precedence(b),
        (a, b) => a.is_some().cmp(&b.is_some()),
    };
    match policy {
        "prefer-newest" => precedence(a, b),
        "prefer-oldest" => precedence(b, a),
        "no-downgrade" => {
            let at_least = |v: Option<&Version>| {
                leader.is_none_or(|l| v.is_some_and(|v| v.cmp_precedence(l) != Ordering::Less))
            };
            at_least(a).cmp(&at_least(b))
        }
        _ => Ordering::Equal,
    }
}

/// Under a version policy, no takeover lands on a candidate while another that the policy
/// ranks ahead of it still heartbeats: the registry the acquisition read shows that one
/// live, eligible, neither the lapsed owner nor the holder of a lapsed reservation, and the
/// heartbeat it shows was written by an attempt that started less than
/// `max(reservation_timeout, 2 × heartbeat) / (1 + ρ)` (a live candidate heartbeats at most
/// a heartbeat apart, so a shorter reservation timeout passes over nobody live) before the
/// acquisition decided (the attempt committed no
/// earlier than it started, so the heartbeat is that recent at least). Returns how many
/// takeovers were judged.
pub(crate) fn versions(entries: &[Entry]) -> (u64, Vec<Violation>) {
    let parse = |v: &Option<String>| v.as_deref().and_then(|s| Version::parse(s).ok());
    let mut first_written: BTreeMap<(&str, u64), f64> = BTreeMap::new();
    let mut found = Vec::new();
    let mut judged = 0;
    for (n, e) in entries.iter().enumerate() {
        match e {
            Entry::Heartbeat {
                candidate,
                heartbeat,
                started_at,
            } => {
                first_written
                    .entry((candidate.as_str(), *heartbeat))
                    .or_insert(*started_at);
            }
            Entry::Acquired {
                ballot,
                candidate,
                version,
                prior,
                decided_at,
                policy,
                reservation_timeout,
                heartbeat,
                rho_ppm,
                registry,
            } => {
                if policy == "ignore" || prior.reservation.as_deref() == Some(candidate.as_str()) {
                    continue;
                }
                judged += 1;
                let leader = parse(&prior.leader_version);
                let mine = parse(version);
                let silence =
                    reservation_timeout.max(2.0 * heartbeat) / (1.0 + f64::from(*rho_ppm) / 1e6);
                for row in registry {
                    let excluded = row.id == *candidate
                        || prior.owner.as_deref() == Some(row.id.as_str())
                        || prior.reservation.as_deref() == Some(row.id.as_str());
                    if excluded || !row.eligible || !row.live {
                        continue;
                    }
                    let theirs = parse(&row.version);
                    if versions_rank(policy, leader.as_ref(), theirs.as_ref(), mine.as_ref())
                        != Ordering::Greater
                    {
                        continue;
                    }
                    let Some(at) = first_written.get(&(row.id.as_str(), row.heartbeat)) else {
                        continue;
                    };
                    if decided_at - at < silence {
                        found.push(Violation {
                            oracle: "versions",
                            message: format!(
                                "log entry {n}: {candidate} ({}) took ballot {ballot} under \
                                 {policy} (the last leader ran {}) while {} ({}), ranked ahead, \
                                 had heartbeated {:.3} s before, less than the {silence:.3} s \
                                 that pass it over",
                                version.as_deref().unwrap_or("no version"),
                                prior.leader_version.as_deref().unwrap_or("no version"),
                                row.id,
                                row.version.as_deref().unwrap_or("no version"),
                                decided_at - at
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    (judged, found)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_ranking_follows_the_design() {
        let v = |s: &str| Version::parse(s).unwrap();
        let (old, new) = (v("1.0.0"), v("2.0.0"));
        assert_eq!(
            versions_rank("prefer-newest", None, Some(&new), Some(&old)),
            Ordering::Greater
        );
        assert_eq!(
            versions_rank("prefer-oldest", None, Some(&old), Some(&new)),
            Ordering::Greater
        );
        assert_eq!(
            versions_rank("no-downgrade", Some(&new), Some(&new), Some(&old)),
            Ordering::Greater
        );
        assert_eq!(
            versions_rank("no-downgrade", Some(&new), Some(&v("1.5.0")), Some(&old)),
            Ordering::Equal
        );
        assert_eq!(
            versions_rank("ignore", None, Some(&new), Some(&old)),
            Ordering::Equal
        );
    }
}
