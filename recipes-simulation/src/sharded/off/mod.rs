//! Oracle S9 of the sharded world: elections off, and failover whatever the configuration.
//!
//! Oracle S9 (elections off, issue 29 item 2), against the stored configuration and true time:
//!
//! 1. No commit acquires a shard (a shard record gains an owner), and no coordinator or member
//!    commit writes a reservation or a move request, on a configuration that disables
//!    elections: the configuration as of the commit's read version (what it decided on),
//!    and for a coordinator's commit also as of the commit itself (its attempt conflicts on the
//!    configuration key whenever it writes placement steps), and for a member's acquisition or
//!    handover also as of its commit (its cycle conflicts on the configuration then). An
//!    operator's move is refused while elections are off (the library reads the configuration
//!    in the move's transaction).
//! 2. Failover never stops: a member record that stays unchanged and not fenced out is fenced
//!    out within [`ShardParams::failover_bound`] of its last write (whatever the
//!    configuration), unless a coordinator's fault (a crash, pause or partition of a
//!    coordinator candidate, an outage, a coordinator commit that failed or was slow) fell in
//!    that window or [`ShardParams::disturbance_after`] before it. So that this cannot pass
//!    vacuously, the quiet phase runs a **failover probe** where nothing excuses: elections
//!    off, then the member owning the most shards crashes, or is paused or partitioned past
//!    the bound; by the probe's end its record must have been fenced out and no shard record
//!    may name it at the epoch it had (nor at all, if it crashed).
//!
//! [`ShardParams::failover_bound`]: super::ShardParams::failover_bound
//! [`ShardParams::disturbance_after`]: super::ShardParams::disturbance_after

use fdb_leader_election::ShardId;

use super::World;
use super::chaos::Chaos;
use super::commit::Who;
use crate::oracles::{OracleId, Violation};
use crate::time::{Nanos, secs};

/// A member's record as the oracles last read it (after the commit that wrote it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemberView {
    pub(crate) epoch: u64,
    pub(crate) fenced: bool,
    /// The record was removed (the member forgotten).
    pub(crate) gone: bool,
    /// The true time of its last write.
    pub(crate) since: Nanos,
    /// S9 judged this record's failover already (fenced in time, late, or excused).
    pub(crate) judged: bool,
}

/// A shard record as S9 sees a written one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Written {
    pub(crate) ballot: u64,
    pub(crate) owner: Option<(String, u64)>,
    pub(crate) move_to: Option<String>,
    pub(crate) reserved_for: Option<String>,
}

/// What oracle S9 remembers.
#[derive(Debug)]
pub(crate) struct OffState {
    /// The stored configuration's `election_enabled` at each change, by commit version, in
    /// order (from version 0, enabled).
    log: Vec<(u64, bool)>,
    /// True-time intervals of faults that may stop the coordinator for a while: a crash,
    /// pause or partition of a coordinator candidate, an outage, and every change of the
    /// coordinator election's believer (a gap with nobody believing it leads, or another
    /// process believing it): S9 (2) excuses the windows near them.
    disturbances: Vec<(Nanos, Nanos)>,
    /// The leading coordinator's commits that failed, were slow or answered late (the
    /// operation's true-time interval, and how much later than otherwise its next attempt
    /// may come): S9 (2) extends its bound by each in the window. One that costs the
    /// coordinator its leadership shows as a change of believer.
    delays: Vec<(Nanos, Nanos, Nanos)>,
    /// The coordinator candidate (index, incarnation) that believed it led at the last step,
    /// and that step's true time.
    leader: Option<(usize, u32)>,
    last_step: Nanos,
    /// Since when (the last step a process believed it) nobody believes it leads the
    /// coordinator election, while that lasts.
    gap_from: Option<Nanos>,
    /// The failover probe's member, once its fault began.
    pub(crate) probe: Option<Probe>,
}

/// The failover probe's member and fault.
#[derive(Clone, Debug)]
pub(crate) struct Probe {
    pub(crate) id: String,
    /// The epoch of its record when the fault began (not fenced out).
    pub(crate) epoch: u64,
    /// How it stopped renewing: `crashes`, `is paused` or `is partitioned`.
    pub(crate) fault: &'static str,
    /// Its record was fenced out (or removed) since.
    pub(crate) fenced: bool,
}

impl Default for OffState {
    fn default() -> Self {
        OffState {
            log: vec![(0, true)],
            disturbances: Vec::new(),
            delays: Vec::new(),
            leader: None,
            last_step: 0,
            gap_from: Some(0),
            probe: None,
        }
    }
}

impl OffState {
    /// Whether the stored configuration enabled elections as of `version` (after every commit
    /// up to it).
    pub(crate) fn enabled_at(&self, version: u64) -> bool {
        self.log
            .iter()
            .rev()
            .find(|(v, _)| *v <= version)
            .is_none_or(|(_, e)| *e)
    }

    /// Whether the stored configuration enables elections now.
    pub(crate) fn enabled_now(&self) -> bool {
        self.log.last().is_none_or(|(_, e)| *e)
    }

    /// The configuration as of commit `version` enables elections or not.
    pub(crate) fn note_config(&mut self, version: u64, enabled: bool) {
        if self.enabled_now() != enabled {
            self.log.push((version, enabled));
        }
    }

    /// A coordinator's fault over `[from, to]` (true time).
    pub(crate) fn disturb(&mut self, from: Nanos, to: Nanos) {
        self.disturbances.push((from, to.max(from)));
    }

    /// A coordinator operation over `[from, to]` failed or was late: the next attempt may come
    /// `extra` later than otherwise.
    pub(crate) fn delay(&mut self, from: Nanos, to: Nanos, extra: Nanos) {
        self.delays.push((from, to.max(from), extra));
    }

    /// The coordinator election's believer at this step (`now`): a change since the last
    /// step is a disturbance from that step (the belief changed in between) to now.
    pub(crate) fn note_leader(&mut self, leader: Option<(usize, u32)>, now: Nanos) {
        if leader != self.leader {
            match (self.leader, leader) {
                // A gap begins: it lasts until someone believes again.
                (Some(_), None) => self.gap_from = Some(self.last_step),
                (None, Some(_)) => {
                    let from = self.gap_from.take().unwrap_or(self.last_step);
                    self.disturbances.push((from, now));
                }
                _ => self.disturbances.push((self.last_step, now)),
            }
            self.leader = leader;
        }
        self.last_step = now;
    }

    /// When the fencing of a record last written at `since` is due: `bound` later, plus the
    /// delays of the coordinator's failed or late operations in the window (or ending less
    /// than `slack` before it); `None` (excused) when a fault that may stop the coordinator
    /// for a while overlaps the window or ends less than `after` before it.
    pub(crate) fn due(&self, since: Nanos, w: &Window) -> Option<Nanos> {
        let mut due = since.saturating_add(w.bound);
        loop {
            let ongoing = self.gap_from.map(|a| (a, Nanos::MAX));
            if self
                .disturbances
                .iter()
                .chain(&ongoing)
                .any(|(a, b)| *a <= due && b.saturating_add(w.after) >= since)
            {
                return None;
            }
            let extra = self
                .delays
                .iter()
                .filter(|(a, b, _)| *a <= due && b.saturating_add(w.slack) >= since)
                .fold(0, |sum: Nanos, (_, _, x)| sum.saturating_add(*x));
            let next = since.saturating_add(w.bound).saturating_add(extra);
            if next <= due {
                return Some(due);
            }
            due = next;
        }
    }
}

/// S9 (2)'s window around a record's last write: the failover bound, how long a
/// coordinator's fault may still delay a fencing after it ended, and how long before the
/// write a failed or late operation still counts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub(crate) bound: Nanos,
    pub(crate) after: Nanos,
    pub(crate) slack: Nanos,
}

/// S9 (1) on one shard record a commit wrote: `before_owner` is the owner before the commit,
/// `read_on` whether the configuration as of the commit's read version enabled elections
/// (`None`: it read nothing), `commit_on` whether it did just before the commit. A commit
/// that acquires or places conflicts on the configuration (the coordinator's attempt when it
/// writes placement steps, a member's when it acquires or hands over), so both must enable
/// elections; so does an operator's move (refused while elections are off). Returns the
/// violation, if any.
pub(crate) fn placed_while_off(
    who: Who,
    s: u32,
    before_owner: Option<&(String, u64)>,
    after: &Written,
    read_on: Option<bool>,
    commit_on: bool,
) -> Option<String> {
    let off = !read_on.unwrap_or(commit_on) || !commit_on;
    let acquired = after.owner.is_some() && after.owner.as_ref() != before_owner;
    if acquired && off {
        let (id, epoch) = after.owner.clone().unwrap_or_default();
        return Some(format!(
            "shard {s} acquired by {id} (epoch {epoch}) at ballot {} by a commit whose \
             configuration (as read: {read_on:?}, at its commit: {commit_on}) disables elections",
            after.ballot
        ));
    }
    let placing = after.reserved_for.is_some() || after.move_to.is_some();
    if placing && off {
        return Some(format!(
            "{who:?} wrote shard {s} (ballot {}) reserved for {:?}, move requested to {:?}, \
             on a configuration that disables elections (as read: {read_on:?}, at its commit: \
             {commit_on})",
            after.ballot, after.reserved_for, after.move_to
        ));
    }
    None
}

impl World {
    /// S9 (2) after every step: a member record unchanged and not fenced out past the
    /// failover bound is a violation unless a coordinator's fault excuses it.
    pub(super) fn check_failover(&mut self) {
        let w = self.p.failover_window();
        let bound = w.bound;
        let now = self.now;
        let due: Vec<String> = self
            .oracles
            .member_views
            .iter()
            .filter(|(_, v)| {
                !v.fenced && !v.gone && !v.judged && now > v.since.saturating_add(bound)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let Some(v) = self.oracles.member_views.get(&id) else {
                continue;
            };
            let (since, epoch) = (v.since, v.epoch);
            let deadline = self.oracles.off.due(since, &w);
            if deadline.is_some_and(|d| now <= d) {
                continue; // not yet: the coordinator's failed or late operations delay it
            }
            if let Some(v) = self.oracles.member_views.get_mut(&id) {
                v.judged = true;
            }
            if let Some(d) = deadline {
                self.found.push(Violation::new(
                    OracleId::ShardElectionsOff,
                    format!(
                        "{id}'s record (epoch {epoch}) unchanged since {} is not fenced out \
                         within {} (elections {}): failover stopped",
                        secs(since),
                        secs(d.saturating_sub(since)),
                        if self.oracles.off.enabled_now() {
                            "on"
                        } else {
                            "off"
                        }
                    ),
                ));
            }
        }
    }

    /// S9 (2) after every step, first: which coordinator candidate believes it leads the
    /// coordinator election now.
    pub(super) fn note_coordinator(&mut self) {
        let leader = self
            .coords
            .iter()
            .enumerate()
            .find(|(_, c)| c.alive && c.leads())
            .map(|(cid, c)| (cid, c.incarnation));
        self.oracles.off.note_leader(leader, self.now);
    }

    /// Whether coordinator candidate `cid` believes it leads now (S9 (2) follows only the
    /// leading coordinator's failed or late operations).
    pub(super) fn coordinator_leads(&self, cid: usize) -> bool {
        self.coords.get(cid).is_some_and(|c| c.alive && c.leads())
    }

    /// S9 (2) on a fencing that landed now, of a record last written at `view.since`.
    pub(super) fn judge_fencing(&mut self, id: &str, view: &MemberView, commit_on: bool) {
        if view.judged {
            return;
        }
        let Some(due) = self.oracles.off.due(view.since, &self.p.failover_window()) else {
            return;
        };
        if self.now > due {
            self.found.push(Violation::new(
                OracleId::ShardElectionsOff,
                format!(
                    "{id}'s record (epoch {}) unchanged since {} was fenced out only {} later, \
                     beyond {}",
                    view.epoch,
                    secs(view.since),
                    secs(self.now.saturating_sub(view.since)),
                    secs(due.saturating_sub(view.since))
                ),
            ));
            return;
        }
        self.log(format!(
            "  {id} fenced out {} after its last write (due within {})",
            secs(self.now.saturating_sub(view.since)),
            secs(due.saturating_sub(view.since))
        ));
        let s = &mut self.stats.sharded;
        s.failover_checked = s.failover_checked.saturating_add(1);
        if !commit_on {
            s.failover_checked_off = s.failover_checked_off.saturating_add(1);
        }
    }

    /// The operator turns elections off (`enabled` false) or on: it reads the stored
    /// configuration and writes it back with only that changed.
    pub(super) fn set_elections(&mut self, name: &'static str, enabled: bool) {
        self.operate(name, move |e, txn| {
            Box::pin(async move {
                let config = e.read_config(&txn).await?;
                let config = config.to_builder().election_enabled(enabled).build()?;
                e.write_config(&txn, &config).await
            })
        });
    }

    /// The failover probe begins (quiet phase, every fault over): elections off; a member
    /// stops renewing once that has landed.
    pub(super) fn probe_begin(&mut self) {
        self.log("failover probe: elections off".to_owned());
        self.set_elections("probe-off", false);
        let at = self.now.saturating_add(self.p.probe_crash_after());
        self.queue.push(at, super::Ev::Chaos(Chaos::ProbeFault));
    }

    /// The failover probe's fault: the live member owning the most shards (the first such)
    /// crashes (its node left empty until the final deploy), or is paused or partitioned
    /// until just past the failover bound (then it finds itself fenced out and joins again).
    pub(super) fn probe_fault(&mut self) {
        let owned = |id: &str| {
            self.oracles
                .records
                .iter()
                .filter(|(_, o)| o.as_ref().is_some_and(|(i, _)| i == id))
                .count()
        };
        // A live member whose record is live (not fenced out, not removed).
        let pick = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.alive)
            .filter_map(|(pid, m)| {
                let id = m.member.id().as_str();
                let v = self.oracles.member_views.get(id)?;
                (!v.fenced && !v.gone).then(|| (owned(id), pid, id.to_owned(), v.epoch))
            })
            .max_by_key(|(n, pid, _, _)| (*n, std::cmp::Reverse(*pid)));
        let Some((n, pid, id, epoch)) = pick else {
            self.found.push(Violation::new(
                OracleId::ShardElectionsOff,
                "failover probe: no live member to stop".to_owned(),
            ));
            return;
        };
        let label = self.label(pid);
        let fault = match self.between(0, 3) {
            0 => "is paused",
            1 => "is partitioned",
            _ => "crashes",
        };
        self.log(format!(
            "failover probe: {label} (owning {n} shards, epoch {epoch}) {fault}, elections {}",
            if self.oracles.off.enabled_now() {
                "on"
            } else {
                "off"
            }
        ));
        self.oracles.off.probe = Some(Probe {
            id,
            epoch,
            fault,
            fenced: false,
        });
        let d = self.p.failover_bound().saturating_add(self.p.heartbeat / 2);
        match fault {
            "is paused" => self.pause_member(pid, d),
            "is partitioned" => {
                self.faults.set_partitioned(pid, true);
                self.queue.push(
                    self.now.saturating_add(d),
                    super::Ev::Chaos(Chaos::Heal { fpid: pid }),
                );
            }
            _ => self.crash_member(pid, false),
        }
    }

    /// The failover probe's verdict (before the final deploy): the member's record was fenced
    /// out (or removed) since its fault began, and no shard record names it at the epoch it
    /// had then (nor at all, when it crashed). Then elections on.
    pub(super) fn probe_verdict(&mut self) {
        let Some(probe) = self.oracles.off.probe.clone() else {
            self.found.push(Violation::new(
                OracleId::ShardElectionsOff,
                "failover probe: no member stopped".to_owned(),
            ));
            return;
        };
        let shards = self.p.shards;
        let (id, epoch, crashed) = (probe.id.clone(), probe.epoch, probe.fault == "crashes");
        let named = self.read_bypass(async |e, txn| {
            let mut named = Vec::new();
            for s in 0..shards {
                let r = e.shard_record(txn, ShardId::new(s)).await?;
                let owns = r
                    .owner()
                    .is_some_and(|o| o.member().as_str() == id && (crashed || o.epoch() <= epoch));
                let asked = r.move_to().is_some_and(|m| m.as_str() == id)
                    || r.reserved_for().is_some_and(|m| m.as_str() == id);
                if owns || (crashed && asked) {
                    named.push(s);
                }
            }
            Ok(named)
        });
        let named = named.unwrap_or_default();
        self.log(format!(
            "failover probe verdict: {id} ({}) fenced out since: {}, named by shards {named:?}",
            probe.fault, probe.fenced
        ));
        if !probe.fenced || !named.is_empty() {
            self.found.push(Violation::new(
                OracleId::ShardElectionsOff,
                format!(
                    "failover probe: {id} {} with elections off (epoch {epoch}); after {} it is \
                     {} and named by shards {named:?}",
                    probe.fault,
                    secs(self.p.probe_len()),
                    if probe.fenced {
                        "fenced out"
                    } else {
                        "not fenced out"
                    },
                ),
            ));
        }
        self.set_elections("probe-on", true);
    }

    /// The failover probe's member's record was written: fenced out, or removed, it counts.
    pub(super) fn note_probe_record(&mut self, id: &str, view: &MemberView) {
        if let Some(p) = self.oracles.off.probe.as_mut().filter(|p| p.id == id) {
            p.fenced |= view.fenced || view.gone;
        }
    }

    /// The configuration commit `version` left: S9 follows it (and counts the times
    /// elections were turned off).
    pub(super) fn note_config(&mut self, version: u64, enabled: bool) {
        if self.oracles.off.enabled_now() && !enabled {
            self.stats.sharded.elections_off = self.stats.sharded.elections_off.saturating_add(1);
            self.log("  elections off".to_owned());
        } else if !self.oracles.off.enabled_now() && enabled {
            self.log("  elections on".to_owned());
        }
        self.oracles.off.note_config(version, enabled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(owner: Option<&str>, reserved: Option<&str>) -> Written {
        Written {
            ballot: 3,
            owner: owner.map(|o| (o.to_owned(), 1)),
            move_to: None,
            reserved_for: reserved.map(str::to_owned),
        }
    }

    #[test]
    fn the_configuration_is_read_as_of_a_version() {
        let mut o = OffState::default();
        o.note_config(5, false);
        o.note_config(6, false);
        o.note_config(9, true);
        assert!(o.enabled_at(4));
        assert!(!o.enabled_at(5));
        assert!(!o.enabled_at(8));
        assert!(o.enabled_at(9));
        assert!(o.enabled_now());
    }

    // S9 (1): an acquisition or a placement by anyone (coordinator, member, operator) fires
    // unless the configuration enables elections both as read and at the commit; keeping an
    // owner is no acquisition.
    #[test]
    fn placing_fires_only_on_a_configuration_that_disables_elections() {
        let before = Some(("a".to_owned(), 1));
        let acq = written(Some("b"), None);
        let res = written(None, Some("b"));
        let kept = written(Some("a"), None);
        let (m, c, op) = (Who::Member(0), Who::Coord(0), Who::Operator);
        for (who, rec, read_on, commit_on, fires) in [
            (m, &acq, Some(false), false, true),
            (m, &acq, Some(true), false, true),
            (m, &acq, Some(false), true, true),
            (m, &acq, Some(true), true, false),
            (m, &res, Some(false), false, true),
            (m, &res, Some(true), false, true),
            (m, &res, Some(true), true, false),
            (c, &res, Some(false), false, true),
            (c, &res, Some(true), false, true),
            (c, &res, Some(true), true, false),
            (c, &res, None, true, false),
            (op, &res, Some(false), false, true),
            (op, &res, Some(true), true, false),
        ] {
            assert_eq!(
                placed_while_off(who, 0, None, rec, read_on, commit_on).is_some(),
                fires,
                "{who:?} {rec:?} read_on={read_on:?} commit_on={commit_on}"
            );
        }
        assert_eq!(
            placed_while_off(m, 0, before.as_ref(), &kept, Some(false), false),
            None
        );
    }

    /// S9's state once a coordinator believes it leads (from time 0).
    fn led() -> OffState {
        let mut o = OffState::default();
        o.note_leader(Some((0, 0)), 0);
        o
    }

    #[test]
    fn a_fault_near_the_window_excuses_it_and_failed_attempts_extend_it() {
        let w = Window {
            bound: 10,
            after: 5,
            slack: 2,
        };
        let mut o = led();
        assert_eq!(o.due(100, &w), Some(110));
        o.disturb(80, 94);
        assert_eq!(o.due(100, &w), Some(110));
        o.disturb(80, 96);
        assert_eq!(o.due(100, &w), None);
        let mut o = led();
        o.disturb(110, 200);
        assert_eq!(o.due(100, &w), None);
        assert_eq!(o.due(101, &w), None);
        let mut o = led();
        o.disturb(111, 200);
        assert_eq!(o.due(100, &w), Some(110));
        // A failed attempt in the window (or ending within the slack before it) moves the
        // deadline.
        let mut o = led();
        o.delay(96, 97, 4);
        assert_eq!(o.due(100, &w), Some(110));
        o.delay(97, 98, 4);
        assert_eq!(o.due(100, &w), Some(114));
        o.delay(101, 102, 1);
        assert_eq!(o.due(100, &w), Some(115));
        let mut o = led();
        o.delay(104, 105, 3);
        o.delay(112, 113, 3);
        assert_eq!(
            o.due(100, &w),
            Some(116),
            "the second reached by the first's extension"
        );
        // ... until the extended window reaches a fault that may stop placement.
        o.disturb(115, 120);
        assert_eq!(o.due(100, &w), None);
        // A change of the coordinator's believer is a fault from the step before it; a gap
        // with nobody believing lasts until someone does.
        let mut o = OffState::default();
        assert_eq!(o.due(100, &w), None, "nobody leads yet");
        o.note_leader(Some((0, 0)), 1);
        assert_eq!(o.due(100, &w), Some(110));
        o.note_leader(Some((0, 0)), 50);
        o.note_leader(None, 120);
        assert_eq!(o.due(100, &w), None, "the belief ended after step 50");
        assert_eq!(o.due(30, &w), Some(40));
        assert_eq!(o.due(500, &w), None, "nobody leads since");
        o.note_leader(Some((1, 0)), 300);
        assert_eq!(o.due(500, &w), Some(510));
        assert_eq!(o.due(298, &w), None, "the gap ended at 300");
        o.note_leader(Some((0, 1)), 700);
        assert_eq!(o.due(650, &w), None, "another process believes from 700");
    }
}
