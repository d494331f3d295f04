//! The operator's eligibility and version workload (DESIGN §13.6, §14.4): marks that exclude
//! a node's name (or every name) for a while, directed resigns (`request_resign_to`) aimed at
//! a live eligible candidate, a dead one or an ineligible one, version policies written at any
//! moment; and the quiet phase's marks (left for good) and reservation probe.

use fdb_leader_election::{ElectionError, VersionPolicy};
use rand::Rng;

use super::process::{Status, node_name};
use super::{Actor, Kind, World};
use crate::events::{Chaos, Event};
use crate::history::{Entry, Op};
use crate::oracles::rank::{Rank, Stand, version};
use crate::time::secs;

impl World {
    /// The operator marks a node (one time in six every node, the leader's last) ineligible,
    /// and lifts the mark one to six leases later (every node: one to three).
    pub(super) fn mark(&mut self) {
        let all = self.rng.random_ratio(1, 6);
        let node = if all {
            None
        } else {
            let n = self.params.nodes;
            Some(self.rng.random_range(0..n))
        };
        let d = if all {
            self.leases(1_000, 3_000)
        } else {
            self.leases(1_000, 6_000)
        };
        // Every node: the leader's a few heartbeats after the others', once their
        // registrations carry theirs, so the leader finds nobody live eligible (oracle 25).
        match (node, self.leader_node().filter(|_| all)) {
            (None, Some(leader)) => {
                let names: Vec<String> = (0..self.params.nodes)
                    .filter(|&n| n != leader)
                    .map(node_name)
                    .collect();
                if self.write_marks(names, true, "operator marks") {
                    let d = self.params.heartbeat.saturating_mul(3);
                    self.queue.push(
                        self.now.saturating_add(d),
                        Event::Chaos(Chaos::SetMark {
                            node: Some(leader),
                            marked: true,
                        }),
                    );
                }
            }
            _ => self.set_mark(node, true),
        }
        self.queue.push(
            self.now.saturating_add(d),
            Event::Chaos(Chaos::SetMark {
                node,
                marked: false,
            }),
        );
    }

    /// Writes a mark (`node` `None`: every node); lifting one is retried until it commits
    /// (the quiet phase's marks supersede it).
    pub(super) fn set_mark(&mut self, node: Option<usize>, marked: bool) {
        if self.quiet {
            return;
        }
        let names: Vec<String> = match node {
            Some(n) => vec![node_name(n)],
            None => (0..self.params.nodes).map(node_name).collect(),
        };
        if !self.write_marks(names, marked, "operator marks") && !marked {
            self.retry_mark(node);
        }
    }

    fn retry_mark(&mut self, node: Option<usize>) {
        let d = self.between(20_000_000, 80_000_000);
        self.queue.push(
            self.now.saturating_add(d),
            Event::Chaos(Chaos::SetMark {
                node,
                marked: false,
            }),
        );
    }

    /// The quiet phase's marks: every node excluded for good one time in four (the leader
    /// then holds, or releases under `release`: oracle 25), one node one time in four, none
    /// otherwise; written in one transaction, retried until it commits
    /// (and written again if an older mark lands after it).
    pub(super) fn quiet_marks(&mut self) {
        let names: Vec<String> = (0..self.params.nodes).map(node_name).collect();
        let marked: Vec<String> = match &self.final_marks {
            Some(m) => m.clone(),
            None => {
                let pick = self.rng.random_range(0..12u32);
                let n = self.params.nodes;
                let m = match pick {
                    0..3 => names.clone(),
                    3..6 => vec![node_name(self.rng.random_range(0..n))],
                    _ => Vec::new(),
                };
                self.final_marks = Some(m.clone());
                m
            }
        };
        self.marks_pending = true;
        let mut marked = marked;
        if marked.len() == names.len() {
            // Every node: the leader's last (see `final_spared`).
            let spared = match self.final_spared {
                Some(spared) => spared,
                None if !self.final_all_done => {
                    let spared = self.leader_node();
                    self.final_spared = Some(spared);
                    spared
                }
                None => None,
            };
            if let Some(n) = spared {
                let name = node_name(n);
                marked.retain(|m| *m != name);
            }
        }
        let (off, on): (Vec<String>, Vec<String>) =
            names.into_iter().partition(|n| marked.contains(n));
        let txn = self.open(Actor::Operator);
        self.faults.close(txn.id());
        let election = self.election.clone();
        let res = self.rt.block_on(async {
            for name in &off {
                election
                    .set_eligible(&txn, name, false, "kept out for good")
                    .await?;
            }
            for name in &on {
                election.set_eligible(&txn, name, true, "").await?;
            }
            Ok::<_, ElectionError>(())
        });
        if res.is_err() {
            let d = self.between(20_000_000, 80_000_000);
            self.queue
                .push(self.now.saturating_add(d), Event::Chaos(Chaos::QuietMarks));
            return;
        }
        self.log(format!(
            "operator's final marks: {}",
            if off.is_empty() {
                "none".to_owned()
            } else {
                off.join(",")
            }
        ));
        let entry = Entry::new("operator", None, 0, Op::Mark);
        self.schedule_operator(
            txn,
            Kind::Marks {
                marked: off,
                cleared: on,
                quiet: true,
            },
            entry,
        );
    }

    /// One operator transaction writing marks; `false` if it failed before its commit.
    fn write_marks(&mut self, names: Vec<String>, marked: bool, why: &str) -> bool {
        let txn = self.open(Actor::Operator);
        let election = self.election.clone();
        let res = self.rt.block_on(async {
            for name in &names {
                election
                    .set_eligible(&txn, name, !marked, "operator: maintenance")
                    .await?;
            }
            Ok::<_, ElectionError>(())
        });
        if res.is_err() {
            self.faults.close(txn.id());
            return false;
        }
        self.log(format!(
            "{why}: {} {}",
            names.join(","),
            if marked { "excluded" } else { "allowed again" }
        ));
        let entry = Entry::new("operator", None, 0, Op::Mark);
        let (marked, cleared) = if marked {
            (names, Vec::new())
        } else {
            (Vec::new(), names)
        };
        self.schedule_operator(
            txn,
            Kind::Marks {
                marked,
                cleared,
                quiet: false,
            },
            entry,
        );
        true
    }

    /// A marks transaction's result: the world's marks follow what applied.
    pub(super) fn marks_result(
        &mut self,
        marked: Vec<String>,
        cleared: Vec<String>,
        quiet: bool,
        ok: bool,
        applied: bool,
    ) {
        if applied {
            for name in &marked {
                self.marks.insert(name.clone());
            }
            for name in &cleared {
                self.marks.remove(name);
            }
            self.stats.health.marks = self.stats.health.marks.saturating_add(1);
            // Candidates read their mark at their next cycle.
            let settle = self.params.heartbeat.saturating_mul(3);
            self.note_fault_end(self.now.saturating_add(settle));
        }
        if self.quiet {
            if quiet && ok && self.final_spared.is_some() {
                // The first step of marking every node: the leader's a few heartbeats later.
                self.final_spared = None;
                self.final_all_done = true;
                let d = self.params.heartbeat.saturating_mul(3);
                self.queue
                    .push(self.now.saturating_add(d), Event::Chaos(Chaos::QuietMarks));
            } else if quiet && ok {
                self.marks_pending = false;
            } else if quiet || applied {
                // The final marks failed, or an older mark landed after them: again.
                self.quiet_marks();
            }
        } else if !ok && !marked.is_empty() {
            // A mark that failed is not retried; lifting one is.
        } else if !ok {
            let node = (cleared.len() == 1)
                .then(|| {
                    cleared
                        .first()
                        .and_then(|n| n.strip_prefix('n'))
                        .and_then(|n| n.parse().ok())
                })
                .flatten();
            self.retry_mark(node);
        }
    }

    /// The operator asks the leader to hand over to a name: a live eligible candidate's half
    /// the time, a node with no live incarnation's (its last one crashed, perhaps still live
    /// in the registry) a quarter, an ineligible candidate's a quarter.
    pub(super) fn directed(&mut self) {
        let txn = self.open(Actor::Operator);
        let Some(prior) = self.current_record(&txn) else {
            self.faults.close(txn.id());
            return;
        };
        let Some(owner) = prior.owner().map(|o| o.id().clone()) else {
            self.faults.close(txn.id());
            return;
        };
        let running: Vec<usize> = (0..self.procs.len())
            .filter(|&pid| {
                self.procs.get(pid).is_some_and(|p| {
                    p.status == Status::Running && !p.shutdown && p.candidate.id() != &owner
                })
            })
            .collect();
        let (eligible, ineligible): (Vec<usize>, Vec<usize>) =
            running.iter().partition(|&&pid| self.eligible_truth(pid));
        let empty: Vec<usize> = (0..self.params.nodes)
            .filter(|&n| self.nodes.get(n).is_some_and(|n| n.current.is_none()))
            .collect();
        let name_of =
            |w: &World, pid: usize| w.procs.get(pid).map(|p| p.candidate.id().name().to_owned());
        let target = match self.rng.random_range(0..4u32) {
            0 | 1 => self.pick(&eligible).and_then(|pid| name_of(self, pid)),
            2 => self.pick(&empty).map(node_name),
            _ => self.pick(&ineligible).and_then(|pid| name_of(self, pid)),
        };
        let Some(to) = target.or_else(|| self.pick(&running).and_then(|pid| name_of(self, pid)))
        else {
            self.faults.close(txn.id());
            return;
        };
        let Some((ops, _)) = self.operator_id() else {
            self.faults.close(txn.id());
            return;
        };
        match self.ask_resign(&txn, &prior, &ops, Some(&to)) {
            Ok(Some(entry)) => {
                self.log(format!(
                    "operator asks the leader of ballot {} to hand over to {to}",
                    prior.ballot().get()
                ));
                self.stats.health.directed = self.stats.health.directed.saturating_add(1);
                self.schedule_operator(txn, Kind::Operator, entry);
            }
            Err(ElectionError::OperatorRefused { reason }) => {
                self.log(format!("operator's resign --to {to} refused: {reason}"));
                self.stats.health.directed_refused =
                    self.stats.health.directed_refused.saturating_add(1);
                self.faults.close(txn.id());
            }
            _ => self.faults.close(txn.id()),
        }
    }

    /// The operator writes a version policy drawn afresh, every other field as stored.
    pub(super) fn policy_change(&mut self) {
        let policy = VersionPolicy::ALL
            .get(self.rng.random_range(0..VersionPolicy::ALL.len()))
            .copied()
            .unwrap_or_default();
        let txn = self.db.create_transaction();
        let election = self.election.clone();
        let stored = self.rt.block_on(election.read_config(&txn));
        let Ok(config) = stored.and_then(|c| {
            c.to_builder()
                .version_policy(policy)
                .build()
                .map_err(ElectionError::from)
        }) else {
            return;
        };
        if self.write_config(config, "a version policy") {
            self.stats.health.policy_changes = self.stats.health.policy_changes.saturating_add(1);
        }
    }

    /// The quiet phase's reservation probe (oracle 21): once the best-ranked candidate leads,
    /// the best follower crashes (its registration still live) and the leader resigns at
    /// once, reserving for it; the vacancy must open to the next eligible candidate within the
    /// reservation timeout and a heartbeat. Oracles 5 and 24 stand down (the leader goes on
    /// purpose).
    pub(super) fn probe(&mut self) {
        let Some(leader) = (0..self.procs.len()).find(|&pid| self.acting_belief(pid).is_some())
        else {
            self.log("PROBE skipped: nobody leads".to_owned());
            return;
        };
        let followers: Vec<usize> = (0..self.procs.len())
            .filter(|&pid| {
                pid != leader
                    && self
                        .procs
                        .get(pid)
                        .is_some_and(|p| p.status == Status::Running && !p.shutdown)
                    && self.eligible_truth(pid)
            })
            .collect();
        if followers.len() < 2 {
            self.log("PROBE skipped: fewer than two eligible followers".to_owned());
            return;
        }
        let rank = Rank {
            policy: self.params.config.version_policy(),
            leader: self
                .procs
                .get(leader)
                .and_then(|p| version(p.candidate.version().map(|v| v.to_string()).as_deref())),
        };
        let stand = |w: &World, pid: usize| {
            w.procs.get(pid).map(|p| Stand {
                version: p.candidate.version(),
                priority: p.candidate.priority().get(),
            })
        };
        // Of equals, the earlier registration (the earlier process).
        let best = followers.iter().copied().max_by(|&a, &b| {
            match (stand(self, a), stand(self, b)) {
                (Some(x), Some(y)) => rank.compare(&x, &y),
                _ => std::cmp::Ordering::Equal,
            }
            .then(b.cmp(&a))
        });
        let Some(best) = best else {
            return;
        };
        self.liveness.disarm();
        self.eligible_leads.disarm();
        self.stats.health.probes = self.stats.health.probes.saturating_add(1);
        let (l, f) = (self.label(leader), self.label(best));
        self.log(format!(
            "PROBE at {}: {f}, the best follower, crashes; {l} resigns at once",
            secs(self.now)
        ));
        self.crash_with(best, false);
        self.request_resign(leader);
    }
}
