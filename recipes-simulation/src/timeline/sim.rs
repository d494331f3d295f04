//! The simulation's trace as a timeline: one lane per node, a leadership guard as the
//! "child", stop-the-world pauses and partitions on the supervisor track, database outages
//! as bands. Lines the parser does not know are skipped, so the trace may grow.

use std::collections::BTreeMap;

use super::{ChildSpan, Lane, Marker, SupSpan, SupState, Timeline, uncovered};

/// `nXvY` → (node X, incarnation Y).
fn process(token: &str) -> Option<(u32, u32)> {
    let token = token.split('@').next()?;
    let rest = token.strip_prefix('n')?;
    let (node, inc) = rest.split_once('v')?;
    Some((node.parse().ok()?, inc.parse().ok()?))
}

fn until(rest: &str) -> Option<f64> {
    let after = rest.split(" until ").nth(1)?;
    after.split_whitespace().next()?.parse().ok()
}

#[derive(Default)]
struct Open {
    running: BTreeMap<(u32, u32), f64>,
    guards: BTreeMap<(u32, u32), (f64, u64)>,
}

/// Builds the timeline of one seed from its trace lines (`sim --seed S --trace` prints them).
pub fn from_sim_trace(seed: u64, lines: &[String]) -> Timeline {
    let mut tl = Timeline {
        title: format!("simulation seed {seed}"),
        ..Timeline::default()
    };
    let mut lanes: BTreeMap<u32, Lane> = BTreeMap::new();
    let mut open = Open::default();
    let mut paused: BTreeMap<(u32, u32), Vec<(f64, f64)>> = BTreeMap::new();
    // (node, incarnation, from, to, ballot)
    let mut guards: Vec<(u32, u32, f64, f64, u64)> = Vec::new();
    let mut last = 0.0f64;
    for line in lines {
        let Some((time, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(t) = time.parse::<f64>() else {
            continue;
        };
        last = last.max(t);
        let words: Vec<&str> = rest.split_whitespace().collect();
        match words.as_slice() {
            ["world", ..] => {
                tl.subtitle = rest.to_owned();
                if let Some(end) = words
                    .iter()
                    .find_map(|w| w.strip_prefix("end="))
                    .and_then(|e| e.trim_end_matches('s').parse::<f64>().ok())
                {
                    tl.end = end;
                }
            }
            [p, "start", ..] => {
                if let Some(key) = process(p) {
                    open.running.insert(key, t);
                    lanes.entry(key.0).or_default();
                }
            }
            [p, "exit:", ..] => {
                if let Some(key) = process(p) {
                    if let Some(from) = open.running.remove(&key) {
                        lane(&mut lanes, key.0).supervisor.push(SupSpan {
                            from,
                            to: t,
                            state: SupState::Running,
                        });
                    }
                    if let Some((from, ballot)) = open.guards.remove(&key) {
                        guards.push((key.0, key.1, from, t, ballot));
                    }
                }
            }
            [p, "guard", "issued", b] => {
                if let (Some(key), Some(ballot)) =
                    (process(p), b.strip_prefix('b').and_then(|b| b.parse().ok()))
                {
                    open.guards.insert(key, (t, ballot));
                }
            }
            [p, "leadership", _, "ended:", ..] => {
                if let Some(key) = process(p) {
                    if let Some((from, ballot)) = open.guards.remove(&key) {
                        guards.push((key.0, key.1, from, t, ballot));
                    }
                }
            }
            ["FAULT", "pause", p, ..] | ["FAULT", "partition", p, ..] => {
                if let (Some(key), Some(to)) = (process(p), until(rest)) {
                    let is_pause = words.get(1) == Some(&"pause");
                    let state = if is_pause {
                        paused.entry(key).or_default().push((t, to));
                        SupState::Paused
                    } else {
                        SupState::CutOff
                    };
                    let label = if is_pause { "pause" } else { "partition" };
                    let lane = lane(&mut lanes, key.0);
                    lane.supervisor.push(SupSpan { from: t, to, state });
                    lane.markers.push(Marker {
                        t,
                        label: label.to_owned(),
                    });
                }
            }
            ["FAULT", "crash", p, ..] => {
                if let Some(key) = process(p.trim_end_matches(';')) {
                    lane(&mut lanes, key.0).markers.push(Marker {
                        t,
                        label: "crash".to_owned(),
                    });
                }
            }
            ["FAULT", "database", "outage", ..] => {
                if let Some(to) = until(rest) {
                    tl.outages.push((t, to));
                }
            }
            ["DEPLOY", ..] => tl.global_markers.push(Marker {
                t,
                label: "deploy".to_owned(),
            }),
            _ => {}
        }
    }
    let end = if tl.end > 0.0 { tl.end } else { last };
    tl.end = end;
    for (key, from) in std::mem::take(&mut open.running) {
        lane(&mut lanes, key.0).supervisor.insert(
            0,
            SupSpan {
                from,
                to: end,
                state: SupState::Running,
            },
        );
    }
    for (key, (from, ballot)) in std::mem::take(&mut open.guards) {
        guards.push((key.0, key.1, from, end, ballot));
    }
    // Running spans first, so pauses and partitions are drawn over them.
    for lane in lanes.values_mut() {
        lane.supervisor
            .sort_by_key(|s| u8::from(s.state != SupState::Running));
    }
    for &(node, _, from, to, ballot) in &guards {
        lane(&mut lanes, node)
            .children
            .push(ChildSpan { from, to, ballot });
    }
    tl.overlaps = overlaps(&guards, &paused);
    tl.lanes = lanes
        .into_iter()
        .map(|(node, mut lane)| {
            lane.name = format!("n{node}");
            lane
        })
        .collect();
    tl
}

fn lane(lanes: &mut BTreeMap<u32, Lane>, node: u32) -> &mut Lane {
    lanes.entry(node).or_default()
}

/// Guards of different ballots held at once, less the time either holder was paused (a
/// paused process acts on nothing).
fn overlaps(
    guards: &[(u32, u32, f64, f64, u64)],
    paused: &BTreeMap<(u32, u32), Vec<(f64, f64)>>,
) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (i, a) in guards.iter().enumerate() {
        for b in guards.iter().skip(i.saturating_add(1)) {
            if a.4 == b.4 {
                continue;
            }
            let (from, to) = (a.2.max(b.2), a.3.min(b.3));
            if to - from <= 1e-6 {
                continue;
            }
            let mut holes: Vec<(f64, f64)> = Vec::new();
            for key in [(a.0, a.1), (b.0, b.1)] {
                holes.extend(paused.get(&key).into_iter().flatten().copied());
            }
            out.extend(
                uncovered((from, to), &holes)
                    .into_iter()
                    .filter(|(x, y)| y - x > 1e-6),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn a_trace_becomes_lanes_spans_markers_and_bands() {
        let trace = lines(
            "0.000000000 world seed=3 plant=none nodes=2 lease=1.0s end=20.000000000s\n\
             0.000000000 n0v1 start id=n0v1-aa priority=1 clock_rate=-591ppm\n\
             0.000000000 n1v1 start id=n1v1-bb priority=3 clock_rate=851ppm\n\
             0.105565441 n0v1 guard issued b1\n\
             1.000000000 FAULT pause n0v1 until 5.000000000 (between its lease check and its fenced write)\n\
             2.500000000 n1v1 guard issued b2\n\
             5.000000000 n0v1 leadership b1 ended: lease_expired\n\
             6.000000000 FAULT database outage until 7.500000000\n\
             8.000000000 FAULT crash n1v1; node 1 restarts at 9.000000000\n\
             8.000000000 n1v1 exit: CRASH\n\
             9.000000000 n1v2 start id=n1v2-cc priority=3 clock_rate=0ppm\n\
             something the parser does not know",
        );
        let tl = from_sim_trace(3, &trace);
        assert_eq!(tl.lanes.len(), 2);
        assert!((tl.end - 20.0).abs() < 1e-9);
        assert_eq!(tl.outages, vec![(6.0, 7.5)]);
        let n0 = &tl.lanes[0];
        assert_eq!(n0.children.len(), 1);
        assert!(n0.supervisor.iter().any(|s| s.state == SupState::Paused));
        let n1 = &tl.lanes[1];
        assert_eq!(n1.children[0].ballot, 2);
        assert!((n1.children[0].to - 8.0).abs() < 1e-9);
        assert!(n1.markers.iter().any(|m| m.label == "crash"));
        // The paused leader's guard overlaps its successor's only while it is paused.
        assert!(tl.overlaps.is_empty(), "{:?}", tl.overlaps);
    }

    #[test]
    fn a_believer_that_was_not_paused_is_an_overlap() {
        let trace = lines(
            "0.0 n0v1 start id=a\n\
             0.0 n1v1 start id=b\n\
             0.1 n0v1 guard issued b1\n\
             2.0 n1v1 guard issued b2\n\
             2.3 n0v1 leadership b1 ended: lease_expired",
        );
        let tl = from_sim_trace(0, &trace);
        assert_eq!(tl.overlaps.len(), 1);
        assert!((tl.overlaps[0].0 - 2.0).abs() < 1e-9 && (tl.overlaps[0].1 - 2.3).abs() < 1e-9);
    }
}
