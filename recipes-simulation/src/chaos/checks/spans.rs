//! What the checks measure the children by: their alive spans, the report interval, percentiles.

use crate::chaos::model::ChildRun;

/// The runs of `times` (ascending) whose gaps stay within `split_gap`: `(first, last)`.
pub fn alive_spans(times: &[u64], split_gap: u64) -> Vec<(u64, u64)> {
    let mut spans = Vec::new();
    let mut iter = times.iter().copied();
    let Some(first) = iter.next() else {
        return spans;
    };
    let (mut from, mut last) = (first, first);
    for t in iter {
        if t.saturating_sub(last) > split_gap {
            spans.push((from, last));
            from = t;
        }
        last = t;
    }
    spans.push((from, last));
    spans
}

/// The measured report interval: gaps between consecutive reports within alive spans.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportInterval {
    /// Median gap, nanoseconds.
    pub p50: u64,
    /// 99th percentile gap: the overlap tolerance (at least the nominal interval).
    pub p99: u64,
    /// Largest gap within a span.
    pub max: u64,
    /// Gaps measured.
    pub samples: u64,
}

impl ReportInterval {
    /// The tolerance check (b) allows: the p99 gap, at least `nominal`.
    pub fn tolerance(&self, nominal: u64) -> u64 {
        self.p99.max(nominal)
    }
}

/// Measures the report interval over every child.
pub fn report_interval(children: &[ChildRun], split_gap: u64) -> ReportInterval {
    let mut gaps: Vec<u64> = children
        .iter()
        .flat_map(|c| c.times.windows(2))
        .filter_map(|w| match w {
            [a, b] => Some(b.saturating_sub(*a)),
            _ => None,
        })
        .filter(|g| *g <= split_gap)
        .collect();
    gaps.sort_unstable();
    ReportInterval {
        p50: percentile(&gaps, 50),
        p99: percentile(&gaps, 99),
        max: gaps.last().copied().unwrap_or(0),
        samples: u64::try_from(gaps.len()).unwrap_or(u64::MAX),
    }
}

/// The `p`th percentile (nearest rank) of sorted `values`; 0 when empty.
pub fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = sorted
        .len()
        .saturating_mul(p)
        .div_ceil(100)
        .saturating_sub(1)
        .min(sorted.len().saturating_sub(1));
    sorted.get(rank).copied().unwrap_or(0)
}
