//! S9 judged in the world: failover after every step, each member record's fencing, the
//! configuration as the commits saw it, and the quiet phase's failover probe.

use fdb_leader_election::ShardId;

use super::{MemberView, Probe};
use crate::oracles::{OracleId, Violation};
use crate::sharded::World;
use crate::sharded::chaos::Chaos;
use crate::time::secs;

impl World {
    /// S9 (2) after every step: a member record unchanged and not fenced out past the
    /// failover bound is a violation unless a coordinator's fault excuses it.
    pub(in crate::sharded) fn check_failover(&mut self) {
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
    pub(in crate::sharded) fn note_coordinator(&mut self) {
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
    pub(in crate::sharded) fn coordinator_leads(&self, cid: usize) -> bool {
        self.coords.get(cid).is_some_and(|c| c.alive && c.leads())
    }

    /// S9 (2) on a fencing that landed now, of a record last written at `view.since`.
    pub(in crate::sharded) fn judge_fencing(
        &mut self,
        id: &str,
        view: &MemberView,
        commit_on: bool,
    ) {
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
    pub(in crate::sharded) fn set_elections(&mut self, name: &'static str, enabled: bool) {
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
    pub(in crate::sharded) fn probe_begin(&mut self) {
        self.log("failover probe: elections off".to_owned());
        self.set_elections("probe-off", false);
        let at = self.now.saturating_add(self.p.probe_crash_after());
        self.queue
            .push(at, crate::sharded::Ev::Chaos(Chaos::ProbeFault));
    }

    /// The failover probe's fault: the live member owning the most shards (the first such)
    /// crashes (its node left empty until the final deploy), or is paused or partitioned
    /// until just past the failover bound (then it finds itself fenced out and joins again).
    pub(in crate::sharded) fn probe_fault(&mut self) {
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
                    crate::sharded::Ev::Chaos(Chaos::Heal { fpid: pid }),
                );
            }
            _ => self.crash_member(pid, false),
        }
    }

    /// The failover probe's verdict (before the final deploy): the member's record was fenced
    /// out (or removed) since its fault began, and no shard record names it at the epoch it
    /// had then (nor at all, when it crashed). Then elections on.
    pub(in crate::sharded) fn probe_verdict(&mut self) {
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
    pub(in crate::sharded) fn note_probe_record(&mut self, id: &str, view: &MemberView) {
        if let Some(p) = self.oracles.off.probe.as_mut().filter(|p| p.id == id) {
            p.fenced |= view.fenced || view.gone;
        }
    }

    /// The configuration commit `version` left: S9 follows it (and counts the times
    /// elections were turned off).
    pub(in crate::sharded) fn note_config(&mut self, version: u64, enabled: bool) {
        if self.oracles.off.enabled_now() && !enabled {
            self.stats.sharded.elections_off = self.stats.sharded.elections_off.saturating_add(1);
            self.log("  elections off".to_owned());
        } else if !self.oracles.off.enabled_now() && enabled {
            self.log("  elections on".to_owned());
        }
        self.oracles.off.note_config(version, enabled);
    }
}
