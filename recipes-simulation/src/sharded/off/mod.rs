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

mod judge;

use super::commit::Who;
use crate::time::Nanos;

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
