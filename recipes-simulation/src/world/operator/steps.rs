//! The operator's transactions that must land: preemption toggled, dead candidates evicted
//! (periodically, or racing a claim), the world's configuration restored; each retried until
//! it commits.

use fdb_leader_election::ElectionError;

use crate::events::{Event, OperatorStep};
use crate::history::{ConfigView, Entry, Op};
use crate::time::SEC;
use crate::world::{Actor, Kind, World};

impl World {
    /// An operator transaction.
    pub(in crate::world) fn operator(&mut self, step: OperatorStep) {
        let txn = self.open(Actor::Operator);
        let election = self.election.clone();
        match step {
            OperatorStep::Restore => {
                self.faults.close(txn.id());
                self.operator.config_pending = Some(self.params.config.allow_preemption());
                let config = self.params.config.clone();
                if !self.write_config(config, "the quiet phase restores the world's") {
                    self.retry_operator(step);
                }
            }
            OperatorStep::SetPreemption { allow } => {
                if self.quiet {
                    // A toggle from before the quiet phase, superseded by the restore.
                    self.faults.close(txn.id());
                    return;
                }
                self.operator.config_pending = Some(allow);
                let res = self.rt.block_on(async {
                    let current = election.read_config(&txn).await?;
                    let next = current.to_builder().allow_preemption(allow).build()?;
                    election.write_config(&txn, &next).await?;
                    Ok::<_, ElectionError>(next)
                });
                match res {
                    Ok(cfg) => {
                        let mut entry = Entry::new("operator", None, 0, Op::Config);
                        entry.config = Some(ConfigView::of(&cfg));
                        self.stats.preemption_toggles =
                            self.stats.preemption_toggles.saturating_add(1);
                        self.schedule_operator(
                            txn,
                            Kind::Config {
                                allow,
                                restore: false,
                            },
                            entry,
                        );
                    }
                    Err(_) => self.retry_operator(step),
                }
            }
            OperatorStep::Evict | OperatorStep::EvictRacing => {
                let res = self.rt.block_on(election.evict_dead_candidates(&txn));
                match res {
                    Ok(ids) if !ids.is_empty() => {
                        let mut entry = Entry::new("operator", None, 0, Op::Evict);
                        entry.candidates_cleared = ids.iter().map(ToString::to_string).collect();
                        self.schedule_operator(txn, Kind::Evict, entry);
                    }
                    _ => {}
                }
                if step == OperatorStep::Evict {
                    let d = self.between(2 * SEC, 4 * SEC);
                    self.queue.push(
                        self.now.saturating_add(d),
                        Event::Operator(OperatorStep::Evict),
                    );
                }
            }
        }
    }

    fn retry_operator(&mut self, step: OperatorStep) {
        if let OperatorStep::SetPreemption { allow } = step {
            // A later write (the quiet phase's) supersedes an older toggle's retries.
            if self.quiet || self.operator.config_pending != Some(allow) {
                return;
            }
        }
        let d = self.between(20_000_000, 80_000_000);
        self.queue
            .push(self.now.saturating_add(d), Event::Operator(step));
    }

    /// An operator commit's result.
    pub(in crate::world) fn operator_result(&mut self, kind: Kind, ok: bool, applied: bool) {
        if let Kind::Marks {
            marked,
            cleared,
            quiet,
        } = kind
        {
            self.marks_result(marked, cleared, quiet, ok, applied);
            return;
        }
        if let Kind::Config { allow, restore } = kind {
            if applied {
                self.operator.allow_preemption = allow;
            }
            if self.quiet {
                // Only the restore matters now: retried until it commits, and written again
                // if an older write lands after it.
                if applied && !restore {
                    self.operator(OperatorStep::Restore);
                } else if restore && ok {
                    self.operator.config_pending = None;
                } else if restore {
                    self.retry_operator(OperatorStep::Restore);
                }
                return;
            }
            if ok {
                if self.operator.config_pending == Some(allow) {
                    self.operator.config_pending = None;
                }
            } else {
                self.retry_operator(OperatorStep::SetPreemption { allow });
            }
        }
    }
}
