//! What the harness records, timestamped in true time (`CLOCK_MONOTONIC` nanoseconds): the
//! children's reports grouped per child, the faults, the pause windows, the observer's leader
//! changes. The checks ([`super::checks`]) and the timeline read only this.

use std::fmt;

/// The kinds of fault the harness injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// `kill -9` of a supervisor (its watchdog then kills the child); the slot restarts as a
    /// new incarnation.
    Kill9,
    /// `SIGSTOP` of a supervisor alone, longer than a lease, then `SIGCONT`: its watchdog,
    /// which holds the lease, must kill the child at the deadline.
    Pause,
    /// `SIGSTOP` of a supervisor and its child's process group together (a VM pause), longer
    /// than a lease.
    VmPause,
    /// A graceful restart (`SIGTERM`: resign, hand over) as a new incarnation.
    Restart,
    /// A rolling restart: every slot in turn starts a new incarnation with a higher priority
    /// than any before (it takes the leadership over by handover), then the old one stops.
    Rolling,
    /// The harness holds SQLite's write lock for longer than a lease.
    StoreOutage,
    /// A supervisor restarts under `libfaketime` with a clock rate error (the child does not
    /// inherit it).
    ClockRate,
    /// The leader's health check (`--health-command`, DESIGN §13.5) starts failing: after
    /// `--health-fall` failures it hands over to an eligible candidate. The harness measures
    /// the time from the first failed check to the first report of an eligible leader's child
    /// (check (h)); the check passes again once that leader runs. Single elections only.
    Health,
    /// FoundationDB: `kill -9` of an `fdbserver` process chosen at random, restarted after a
    /// seeded delay.
    FdbKill9,
    /// FoundationDB: `kill -9` of the `fdbserver` process holding the `master` role (the
    /// transaction system's), restarted after a seeded delay: the cluster recovers.
    FdbKill9Master,
    /// FoundationDB: `SIGSTOP` of an `fdbserver` process for 0.5–3 s, then `SIGCONT`.
    FdbPause,
    /// FoundationDB: a forced recovery (`configure commit_proxies=N`, alternating).
    FdbRecovery,
    /// FoundationDB: a minority of the coordinators (one of three) killed, restarted after a
    /// seeded delay.
    FdbCoordinators,
}

impl FaultKind {
    /// Every kind, in summary order.
    pub const ALL: [FaultKind; 13] = [
        FaultKind::Kill9,
        FaultKind::Pause,
        FaultKind::VmPause,
        FaultKind::Restart,
        FaultKind::Rolling,
        FaultKind::StoreOutage,
        FaultKind::ClockRate,
        FaultKind::Health,
        FaultKind::FdbKill9,
        FaultKind::FdbKill9Master,
        FaultKind::FdbPause,
        FaultKind::FdbRecovery,
        FaultKind::FdbCoordinators,
    ];

    /// The faults of the cluster itself (FoundationDB, on a cluster the harness started).
    pub const CLUSTER: [FaultKind; 5] = [
        FaultKind::FdbKill9,
        FaultKind::FdbKill9Master,
        FaultKind::FdbPause,
        FaultKind::FdbRecovery,
        FaultKind::FdbCoordinators,
    ];

    /// The kinds a run injects: on SQLite the supervisor faults and the store outage; on
    /// FoundationDB the supervisor faults, and the cluster's faults if the harness started
    /// the cluster (`cluster_faults`); the health fault under a single election (`sharded`
    /// false) only.
    pub fn for_store(fdb: bool, cluster_faults: bool, sharded: bool) -> Vec<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .filter(|k| match k {
                FaultKind::StoreOutage => !fdb,
                FaultKind::Health => !sharded,
                k if FaultKind::CLUSTER.contains(k) => fdb && cluster_faults,
                _ => true,
            })
            .collect()
    }

    /// Whether it hits the FoundationDB cluster.
    pub fn is_cluster(self) -> bool {
        FaultKind::CLUSTER.contains(&self)
    }

    /// The name in summaries and logs.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill9 => "kill9",
            FaultKind::Pause => "pause",
            FaultKind::VmPause => "vm_pause",
            FaultKind::Restart => "restart",
            FaultKind::Rolling => "rolling",
            FaultKind::StoreOutage => "store_outage",
            FaultKind::ClockRate => "clock_rate",
            FaultKind::Health => "health",
            FaultKind::FdbKill9 => "fdb_kill9",
            FaultKind::FdbKill9Master => "fdb_kill9_master",
            FaultKind::FdbPause => "fdb_pause",
            FaultKind::FdbRecovery => "fdb_recovery",
            FaultKind::FdbCoordinators => "fdb_coordinators",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One child: every report it sent (its `sent_ns`, ascending).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildRun {
    /// The supervisor's slot.
    pub slot: u32,
    /// The supervisor's incarnation.
    pub incarnation: u32,
    /// The child's pid.
    pub pid: i32,
    /// Its ballot.
    pub ballot: u64,
    /// The shard it worked for, under a sharded election (`None`: the single election).
    pub shard: Option<u32>,
    /// When it reported, ascending.
    pub times: Vec<u64>,
}

/// A window of true time during which one supervisor incarnation was paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The slot.
    pub slot: u32,
    /// The incarnation.
    pub incarnation: u32,
    /// From (inclusive).
    pub from: u64,
    /// To (exclusive).
    pub to: u64,
}

impl Window {
    /// Whether `t` lies in the window for `(slot, incarnation)`.
    pub fn covers(&self, slot: u32, incarnation: u32, t: u64) -> bool {
        self.slot == slot && self.incarnation == incarnation && self.from <= t && t < self.to
    }
}

/// One injected fault.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// What.
    pub kind: FaultKind,
    /// The slot it hit (`None`: the store, or every slot).
    pub slot: Option<u32>,
    /// When it began.
    pub start: u64,
    /// When it healed (from then on, recovery is timed).
    pub heal: u64,
    /// Words for the log (durations, rates, priorities).
    pub detail: String,
}

/// A leader change as the observer (`fdb-leader watch --json`) printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedChange {
    /// When the harness read the line.
    pub t: u64,
    /// `acquired`, `handed_over`, `replaced`, `lease_lapsed`, `stepped_down`, ...
    pub reason: String,
    /// The new leader's ballot, if there is a leader.
    pub ballot: Option<u64>,
    /// The new leader's candidate id.
    pub leader: Option<String>,
}

impl ObservedChange {
    /// Reads one line of `fdb-leader watch --json` (a flat object); `None` if it is not one.
    pub fn parse(t: u64, line: &str) -> Option<ObservedChange> {
        let reason = json_field(line, "reason")?;
        let ballot = json_field(line, "ballot").and_then(|b| b.parse().ok());
        let leader = json_field(line, "leader").filter(|l| l != "null");
        Some(ObservedChange {
            t,
            reason,
            ballot,
            leader,
        })
    }
}

/// The value of `"key":` in a flat JSON object: a string's contents (no escapes expected in
/// the fields read here) or the raw token (`12`, `null`).
fn json_field(line: &str, key: &str) -> Option<String> {
    let pattern = format!("\"{key}\":");
    let start = line.find(&pattern)?.checked_add(pattern.len())?;
    let rest = line.get(start..)?.trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        let end = s.find('"')?;
        return s.get(..end).map(str::to_owned);
    }
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest.get(..end).map(|v| v.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observer_lines_parse() {
        let line = r#"{"ballot":7,"leader":"c1i2-ab","payload":null,"previous_ballot":6,"previous_leader":"c0i1-cd","priority":3,"reason":"handed_over","reserved_for":null,"time":"2026-01-01T00:00:00Z"}"#;
        let c = ObservedChange::parse(5, line);
        assert_eq!(
            c,
            Some(ObservedChange {
                t: 5,
                reason: "handed_over".into(),
                ballot: Some(7),
                leader: Some("c1i2-ab".into()),
            })
        );
        let gone = r#"{"ballot":null,"leader":null,"reason":"lease_lapsed"}"#;
        let c = ObservedChange::parse(6, gone);
        assert!(c.is_some_and(|c| c.ballot.is_none() && c.leader.is_none()));
        assert_eq!(ObservedChange::parse(1, "not json"), None);
    }

    #[test]
    fn each_store_has_its_fault_kinds() {
        let sqlite = FaultKind::for_store(false, false, false);
        assert!(sqlite.contains(&FaultKind::StoreOutage));
        assert!(sqlite.contains(&FaultKind::Health));
        assert!(!sqlite.iter().any(|k| k.is_cluster()));
        let sharded = FaultKind::for_store(false, false, true);
        assert!(!sharded.contains(&FaultKind::Health));
        let fdb = FaultKind::for_store(true, true, false);
        assert!(!fdb.contains(&FaultKind::StoreOutage));
        assert_eq!(fdb.len(), 12);
        let given = FaultKind::for_store(true, false, false);
        assert!(
            !given
                .iter()
                .any(|k| k.is_cluster() || *k == FaultKind::StoreOutage)
        );
    }

    #[test]
    fn windows_cover_their_incarnation_only() {
        let w = Window {
            slot: 1,
            incarnation: 2,
            from: 10,
            to: 20,
        };
        assert!(w.covers(1, 2, 10));
        assert!(!w.covers(1, 2, 20));
        assert!(!w.covers(1, 3, 15));
    }
}
