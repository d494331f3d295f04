//! A chaos run as a timeline.

use super::{ChildSpan, Lane, Marker, SupSpan, SupState, Timeline};
use crate::chaos::checks::spans::alive_spans;
use crate::chaos::clock::{ns, secs};
use crate::chaos::harness::{ChaosRun, SupState as RunState};
use crate::chaos::model::FaultKind;
use crate::chaos::report::ChaosReport;

/// The timeline of a chaos run: one lane per slot, times in seconds from the start.
pub fn from_chaos(run: &ChaosRun, report: &ChaosReport) -> Timeline {
    let t = |ns: u64| secs(ns.saturating_sub(run.t0));
    let closed = t(run.closed);
    let mut lanes: Vec<Lane> = (0..run.options.candidates)
        .map(|slot| Lane {
            name: format!("c{slot}"),
            ..Lane::default()
        })
        .collect();
    for inc in &run.incarnations {
        let Some(lane) = lanes.get_mut(usize::try_from(inc.slot).unwrap_or(usize::MAX)) else {
            continue;
        };
        for (i, (at, state)) in inc.states.iter().enumerate() {
            let to = inc
                .states
                .get(i.saturating_add(1))
                .map_or(closed, |(next, _)| t(*next));
            let state = match (state, inc.rate) {
                (RunState::Running, Some(rate)) => SupState::FakeClock(rate),
                (RunState::Running, None) => SupState::Running,
                (RunState::Paused, _) => SupState::Paused,
                (RunState::Dead, _) => continue,
            };
            lane.supervisor.push(SupSpan {
                from: t(*at),
                to,
                state,
            });
        }
    }
    for child in &run.children {
        let Some(lane) = lanes.get_mut(usize::try_from(child.slot).unwrap_or(usize::MAX)) else {
            continue;
        };
        for (a, b) in alive_spans(&child.times, ns(run.settings.split_gap)) {
            lane.children.push(ChildSpan {
                from: t(a),
                to: t(b),
                ballot: child.ballot,
            });
        }
    }
    let mut global_markers = Vec::new();
    for f in &run.faults {
        let label = match f.kind {
            FaultKind::ClockRate => f
                .detail
                .split_whitespace()
                .next()
                .map_or_else(|| "clock".to_owned(), |rate| format!("clock {rate}")),
            kind => kind.name().to_owned(),
        };
        let marker = Marker {
            t: t(f.start),
            label,
        };
        match f
            .slot
            .and_then(|s| lanes.get_mut(usize::try_from(s).unwrap_or(usize::MAX)))
        {
            Some(lane) => lane.markers.push(marker),
            None if f.kind == FaultKind::StoreOutage => {}
            None => global_markers.push(marker),
        }
    }
    let plant = run
        .options
        .plant
        .map(|p| format!(" plant={p}"))
        .unwrap_or_default();
    Timeline {
        title: format!(
            "chaos: fdb-leader run, {} candidates, seed {}{plant}, {} s of faults",
            run.options.candidates, run.options.seed, run.options.seconds
        ),
        subtitle: report.summary(),
        start: 0.0,
        end: closed,
        lanes,
        // SQLite's write lock held, or the FoundationDB cluster's stalls the probe measured.
        outages: run
            .outages
            .iter()
            .chain(run.fdb.iter().flat_map(|f| f.stalls.iter()))
            .map(|(a, b)| (t(*a), t(*b)))
            .collect(),
        overlaps: report
            .overlaps
            .violations
            .iter()
            .map(|o| (t(o.from), t(o.to)))
            .collect(),
        global_markers,
    }
}
