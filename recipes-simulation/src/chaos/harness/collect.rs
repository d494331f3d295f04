//! The run's record, gathered at the end: reports, sink logs, leader changes, cluster figures.

use std::collections::BTreeMap;

use crate::chaos::child::sink_names;
use crate::chaos::model::ChildRun;
use crate::chaos::sink::{log_path, read_log};

use super::{ChaosRun, LaneSinks, World, lock};

impl World<'_> {
    pub(super) fn collect(&mut self, end: u64) -> Result<ChaosRun, String> {
        let reports = std::mem::take(&mut lock(&self.inbox).reports);
        let mut by_child: BTreeMap<(u32, u32, i32, Option<u32>), ChildRun> = BTreeMap::new();
        let mut unclean = BTreeMap::new();
        for r in reports {
            if !r.clean_clock {
                unclean.insert(r.pid, ());
            }
            by_child
                .entry((r.slot, r.incarnation, r.pid, r.shard))
                .or_insert_with(|| ChildRun {
                    slot: r.slot,
                    incarnation: r.incarnation,
                    pid: r.pid,
                    ballot: r.ballot,
                    shard: r.shard,
                    times: Vec::new(),
                })
                .times
                .push(r.sent_ns);
        }
        let mut children: Vec<ChildRun> = by_child.into_values().collect();
        for c in &mut children {
            c.times.sort_unstable();
        }
        let sink_dir = self.dir.join("sink");
        let lanes: Vec<Option<u32>> = match self.options.shards {
            None => vec![None],
            Some(m) => (0..m).map(Some).collect(),
        };
        let mut sinks = Vec::with_capacity(lanes.len());
        for shard in lanes {
            let (fenced, shadow) = sink_names(shard);
            // A shard nobody ever owned has no sink: an empty log.
            let read = |name: &str| {
                read_log(&log_path(&sink_dir, name))
                    .map_err(|e| format!("reading the sink {name}: {e}"))
            };
            sinks.push(LaneSinks {
                shard,
                fenced: read(&fenced)?,
                shadow: read(&shadow)?,
            });
        }
        let fdb = self.fdb.as_mut().map(|f| {
            let mut record = std::mem::take(&mut f.record);
            for inc in &self.records {
                let path = self
                    .dir
                    .join("logs")
                    .join(format!("c{}i{}.log", inc.slot, inc.incarnation));
                record
                    .errors
                    .add_log(&std::fs::read_to_string(path).unwrap_or_default());
            }
            record
        });
        Ok(ChaosRun {
            options: self.options.clone(),
            settings: self.settings,
            t0: self.t0,
            end,
            closed: self.now(),
            children,
            unclean_children: u64::try_from(unclean.len()).unwrap_or(u64::MAX),
            faults: std::mem::take(&mut self.faults),
            health: std::mem::take(&mut self.health),
            alone_paused: std::mem::take(&mut self.alone_paused),
            vm_paused: std::mem::take(&mut self.vm_paused),
            paused: std::mem::take(&mut self.paused),
            outages: std::mem::take(&mut self.outages),
            incarnations: std::mem::take(&mut self.records),
            observed: std::mem::take(&mut lock(&self.observed)),
            sinks,
            dir: self.dir.clone(),
            kinds: self.kinds.clone(),
            fdb,
        })
    }
}
