//! Timelines people can look at: one lane per candidate, drawn as an SVG with `plotters`.
//!
//! Each lane has two tracks: the supervisor (running, paused, cut off, on a fake clock, dead)
//! and its child or leadership (alive, coloured by ballot). Faults are markers on their lane
//! (or on every lane), store outages grey bands across all lanes, and overlaps — two children
//! with different ballots alive at once, outside excused windows — red bands. The same model
//! is filled from a chaos run ([`from_chaos`]) and from the simulation's trace ([`from_sim_trace`]).

mod chaos;
mod sim;

pub use chaos::from_chaos;
pub use sim::from_sim_trace;

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// What a supervisor is doing over a span of a lane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SupState {
    /// Running on the real clock.
    Running,
    /// Running on a fake clock with this rate.
    FakeClock(f64),
    /// Stopped (`SIGSTOP`, or a simulated stop-the-world pause).
    Paused,
    /// Running but cut off from the store (a simulated partition).
    CutOff,
}

/// A span of a supervisor's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SupSpan {
    /// From, seconds.
    pub from: f64,
    /// To, seconds.
    pub to: f64,
    /// The state.
    pub state: SupState,
}

/// A child alive (or, in the simulation, a leadership guard held).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChildSpan {
    /// From, seconds.
    pub from: f64,
    /// To, seconds.
    pub to: f64,
    /// Its ballot.
    pub ballot: u64,
}

/// A fault, drawn as a marker.
#[derive(Clone, Debug, PartialEq)]
pub struct Marker {
    /// When, seconds.
    pub t: f64,
    /// What (short).
    pub label: String,
}

/// One candidate's lane.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lane {
    /// Its name.
    pub name: String,
    /// Supervisor spans (later spans are drawn over earlier ones).
    pub supervisor: Vec<SupSpan>,
    /// Child spans.
    pub children: Vec<ChildSpan>,
    /// Fault markers.
    pub markers: Vec<Marker>,
}

/// A whole picture.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// The title.
    pub title: String,
    /// A second line under the title.
    pub subtitle: String,
    /// The first second shown.
    pub start: f64,
    /// The last second shown.
    pub end: f64,
    /// The lanes, top to bottom.
    pub lanes: Vec<Lane>,
    /// Store outages: (from, to).
    pub outages: Vec<(f64, f64)>,
    /// Overlaps outside the excused windows (violations).
    pub overlaps: Vec<(f64, f64)>,
    /// Markers on every lane (faults of the whole system, say a rolling restart).
    pub global_markers: Vec<Marker>,
}

const LEFT: i32 = 90;
const RIGHT: i32 = 30;
/// The header's height with a one-line subtitle (each further line adds `SUB_LINE`).
const TOP: i32 = 78;
const SUB_LINE: i32 = 15;
const LANE: i32 = 58;
const AXIS: i32 = 40;

/// Ballot colours, cycled.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(255, 127, 14),
    RGBColor(57, 59, 121),
];

/// The colour of ballot `b`.
pub fn ballot_colour(b: u64) -> RGBColor {
    let i = usize::try_from(b % 10).unwrap_or(0);
    PALETTE.get(i).copied().unwrap_or(BLACK)
}

fn state_colour(s: SupState) -> RGBColor {
    match s {
        SupState::Running => RGBColor(170, 215, 170),
        SupState::FakeClock(_) => RGBColor(190, 160, 230),
        SupState::Paused => RGBColor(250, 170, 60),
        SupState::CutOff => RGBColor(240, 220, 90),
    }
}

/// Tick spacing for a range of `span` seconds: about ten ticks.
fn tick_step(span: f64) -> f64 {
    let steps = [
        0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    ];
    steps
        .iter()
        .copied()
        .find(|s| span / s <= 12.0)
        .unwrap_or(1200.0)
}

/// Rounds a pixel position (finite, in range) to an integer coordinate.
#[allow(clippy::cast_possible_truncation)]
fn px(v: f64) -> i32 {
    v.round().clamp(-1e6, 1e6) as i32
}

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing the timeline: {e:?}")
}

impl Timeline {
    /// The picture's width in pixels: about 20 px a second, at least 1200.
    fn width(&self) -> i32 {
        let span = (self.end - self.start).max(1.0);
        px((span * 20.0).clamp(1100.0, 40_000.0)).saturating_add(LEFT.saturating_add(RIGHT))
    }

    /// The subtitle cut into lines of about `chars` characters at spaces.
    fn subtitle_lines(&self, chars: usize) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        for word in self.subtitle.split(' ') {
            match lines.last_mut() {
                Some(line) if line.len().saturating_add(word.len()) < chars => {
                    line.push(' ');
                    line.push_str(word);
                }
                _ => lines.push(word.to_owned()),
            }
        }
        lines
    }

    /// Writes the timeline to `path` as SVG.
    pub fn write_svg(&self, path: &Path) -> Result<(), String> {
        let width = self.width();
        let chars = usize::try_from(width / 7).unwrap_or(150).max(60);
        let subtitle = self.subtitle_lines(chars);
        let extra = i32::try_from(subtitle.len().saturating_sub(1))
            .unwrap_or(0)
            .saturating_mul(SUB_LINE);
        let top = TOP.saturating_add(extra);
        let lanes = i32::try_from(self.lanes.len()).unwrap_or(0);
        let height = top
            .saturating_add(lanes.saturating_mul(LANE))
            .saturating_add(AXIS);
        let size = (
            u32::try_from(width).unwrap_or(1200),
            u32::try_from(height).unwrap_or(400),
        );
        let root = SVGBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let span = (self.end - self.start).max(1e-9);
        let plot_w = f64::from(width.saturating_sub(LEFT).saturating_sub(RIGHT));
        let x = |t: f64| LEFT.saturating_add(px((t - self.start) / span * plot_w));
        let bottom = top.saturating_add(lanes.saturating_mul(LANE));
        let font = |size: f64| ("sans-serif", size).into_font();

        root.draw(&Text::new(
            self.title.clone(),
            (10, 6),
            font(17.0).color(&BLACK),
        ))
        .map_err(err)?;
        for (i, line) in subtitle.iter().enumerate() {
            let y = i32::try_from(i)
                .unwrap_or(0)
                .saturating_mul(SUB_LINE)
                .saturating_add(28);
            root.draw(&Text::new(
                line.clone(),
                (10, y),
                font(12.0).color(&RGBColor(80, 80, 80)),
            ))
            .map_err(err)?;
        }
        self.legend(&root, width, extra.saturating_add(50))?;

        // Bands behind the lanes: outages grey, overlaps red.
        for &(a, b) in &self.outages {
            let (x0, x1) = (x(a), x(b).max(x(a).saturating_add(1)));
            root.draw(&Rectangle::new(
                [(x0, top), (x1, bottom)],
                RGBColor(200, 200, 200).mix(0.45).filled(),
            ))
            .map_err(err)?;
        }
        for (i, lane) in self.lanes.iter().enumerate() {
            let y = top.saturating_add(i32::try_from(i).unwrap_or(0).saturating_mul(LANE));
            if i % 2 == 1 {
                root.draw(&Rectangle::new(
                    [
                        (LEFT, y),
                        (width.saturating_sub(RIGHT), y.saturating_add(LANE)),
                    ],
                    RGBColor(246, 246, 246).filled(),
                ))
                .map_err(err)?;
            }
            root.draw(&Text::new(
                lane.name.clone(),
                (8, y.saturating_add(LANE / 2)),
                font(13.0)
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
            for s in &lane.supervisor {
                let (x0, x1) = (x(s.from), x(s.to).max(x(s.from).saturating_add(1)));
                root.draw(&Rectangle::new(
                    [(x0, y.saturating_add(8)), (x1, y.saturating_add(20))],
                    state_colour(s.state).filled(),
                ))
                .map_err(err)?;
            }
            for c in &lane.children {
                let (x0, x1) = (x(c.from), x(c.to).max(x(c.from).saturating_add(1)));
                root.draw(&Rectangle::new(
                    [(x0, y.saturating_add(24)), (x1, y.saturating_add(46))],
                    ballot_colour(c.ballot).filled(),
                ))
                .map_err(err)?;
                if x1.saturating_sub(x0) >= 26 {
                    root.draw(&Text::new(
                        format!("b{}", c.ballot),
                        (x0.saturating_add(3), y.saturating_add(35)),
                        font(11.0)
                            .color(&WHITE)
                            .pos(Pos::new(HPos::Left, VPos::Center)),
                    ))
                    .map_err(err)?;
                }
            }
            for m in lane.markers.iter().chain(&self.global_markers) {
                self.marker(&root, x(m.t), y, &m.label)?;
            }
        }
        for &(a, b) in &self.overlaps {
            let (x0, x1) = (x(a), x(b).max(x(a).saturating_add(2)));
            root.draw(&Rectangle::new(
                [(x0, top), (x1, bottom)],
                RED.mix(0.35).filled(),
            ))
            .map_err(err)?;
            root.draw(&Rectangle::new(
                [(x0, top), (x1, bottom)],
                RED.stroke_width(1),
            ))
            .map_err(err)?;
        }
        // The time axis.
        root.draw(&PathElement::new(
            vec![(LEFT, bottom), (width.saturating_sub(RIGHT), bottom)],
            BLACK,
        ))
        .map_err(err)?;
        let step = tick_step(span);
        let mut t = (self.start / step).ceil() * step;
        while t <= self.end {
            let xt = x(t);
            root.draw(&PathElement::new(
                vec![(xt, bottom), (xt, bottom.saturating_add(5))],
                BLACK,
            ))
            .map_err(err)?;
            let label = if step < 1.0 {
                format!("{t:.1}s")
            } else {
                format!("{t:.0}s")
            };
            root.draw(&Text::new(
                label,
                (xt, bottom.saturating_add(8)),
                font(11.0)
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(err)?;
            t += step;
        }
        root.present().map_err(err)?;
        Ok(())
    }

    fn marker<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
        x: i32,
        y: i32,
        label: &str,
    ) -> Result<(), String> {
        root.draw(&Polygon::new(
            vec![
                (x.saturating_sub(4), y.saturating_add(1)),
                (x.saturating_add(4), y.saturating_add(1)),
                (x, y.saturating_add(8)),
            ],
            RGBColor(200, 30, 30).filled(),
        ))
        .map_err(err)?;
        root.draw(&PathElement::new(
            vec![(x, y.saturating_add(8)), (x, y.saturating_add(LANE))],
            RGBColor(200, 30, 30).mix(0.5),
        ))
        .map_err(err)?;
        root.draw(&Text::new(
            label.to_owned(),
            (x.saturating_add(5), y.saturating_add(1)),
            ("sans-serif", 10.0)
                .into_font()
                .color(&RGBColor(150, 20, 20))
                .pos(Pos::new(HPos::Left, VPos::Top)),
        ))
        .map_err(err)
    }

    fn legend<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, plotters::coord::Shift>,
        width: i32,
        y: i32,
    ) -> Result<(), String> {
        let items: [(&str, RGBColor); 8] = [
            ("supervisor running", state_colour(SupState::Running)),
            ("fake clock", state_colour(SupState::FakeClock(1.0))),
            ("paused", state_colour(SupState::Paused)),
            ("cut off", state_colour(SupState::CutOff)),
            (
                "child alive / leadership (colour = ballot)",
                ballot_colour(1),
            ),
            ("store outage", RGBColor(200, 200, 200)),
            ("overlap", RGBColor(240, 120, 120)),
            ("fault", RGBColor(200, 30, 30)),
        ];
        let mut x = 10i32;
        for (label, colour) in items {
            root.draw(&Rectangle::new(
                [(x, y), (x.saturating_add(14), y.saturating_add(12))],
                colour.filled(),
            ))
            .map_err(err)?;
            root.draw(&Text::new(
                label,
                (x.saturating_add(18), y.saturating_add(6)),
                ("sans-serif", 11.0)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
            let w = i32::try_from(label.len()).unwrap_or(20).saturating_mul(6);
            x = x.saturating_add(w.saturating_add(34));
            if x > width {
                break;
            }
        }
        Ok(())
    }
}

/// The parts of `span` not covered by `holes` (all in seconds).
pub fn uncovered(span: (f64, f64), holes: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut holes: Vec<(f64, f64)> = holes
        .iter()
        .copied()
        .filter(|(a, b)| a < b && *a < span.1 && *b > span.0)
        .collect();
    holes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = Vec::new();
    let mut at = span.0;
    for (a, b) in holes {
        if a > at {
            out.push((at, a.min(span.1)));
        }
        at = at.max(b);
    }
    if at < span.1 {
        out.push((at, span.1));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_timeline_draws_to_svg() {
        let tl = Timeline {
            title: "t".into(),
            subtitle: "s".into(),
            start: 0.0,
            end: 10.0,
            lanes: vec![Lane {
                name: "c0".into(),
                supervisor: vec![SupSpan {
                    from: 0.0,
                    to: 10.0,
                    state: SupState::Running,
                }],
                children: vec![ChildSpan {
                    from: 1.0,
                    to: 9.0,
                    ballot: 3,
                }],
                markers: vec![Marker {
                    t: 5.0,
                    label: "kill9".into(),
                }],
            }],
            outages: vec![(2.0, 3.0)],
            overlaps: vec![(4.0, 4.5)],
            global_markers: vec![],
        };
        let path = std::env::temp_dir().join(format!("timeline-{}.svg", std::process::id()));
        tl.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("kill9") && svg.contains("b3"));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn ticks_and_uncovered_parts() {
        assert!((tick_step(90.0) - 10.0).abs() < 1e-9);
        assert!((tick_step(1200.0) - 120.0).abs() < 1e-9);
        assert_eq!(
            uncovered((0.0, 10.0), &[(2.0, 3.0), (8.0, 12.0)]),
            vec![(0.0, 2.0), (3.0, 8.0)]
        );
    }
}
