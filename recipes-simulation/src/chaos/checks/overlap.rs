//! Check (b), no overlap: no two children of different ballots alive at once beyond tolerance.

use super::spans::alive_spans;
use crate::chaos::clock::millis;
use crate::chaos::model::{ChildRun, Window};

/// Two children with different ballots alive at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// (slot, incarnation, ballot, pid) of the older ballot's child.
    pub older: (u32, u32, u64, i32),
    /// The same for the newer ballot's child.
    pub newer: (u32, u32, u64, i32),
    /// From.
    pub from: u64,
    /// To.
    pub to: u64,
    /// The shard both children worked for, under a sharded election.
    pub shard: Option<u32>,
}

impl Overlap {
    /// How long.
    pub fn len(&self) -> u64 {
        self.to.saturating_sub(self.from)
    }

    /// Whether it lasted no time.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// In words, times relative to `t0`.
    pub fn describe(&self, t0: u64) -> String {
        let (os, oi, ob, op) = self.older;
        let (ns, ni, nb, np) = self.newer;
        let shard = self
            .shard
            .map(|s| format!("shard {s}: "))
            .unwrap_or_default();
        format!(
            "{shard}children of c{os}i{oi} (ballot {ob}, pid {op}) and c{ns}i{ni} (ballot {nb}, \
             pid {np}) both alive from {:.3}s to {:.3}s ({:.1} ms)",
            millis(self.from.saturating_sub(t0)) / 1e3,
            millis(self.to.saturating_sub(t0)) / 1e3,
            millis(self.len())
        )
    }
}

/// (b) What the overlap check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OverlapVerdict {
    /// Overlaps longer than the tolerance: violations, wherever they are.
    pub violations: Vec<Overlap>,
    /// How many of them touch a window where one of the two children's supervisor alone was
    /// paused (once excused, as "the child cannot know"; now the watchdog must have killed
    /// it): for the report.
    pub in_alone_pause: usize,
    /// Overlaps longer than the tolerance that are the resumption of a VM pause (the
    /// supervisor, its watchdog and its child stopped together and continued together): the
    /// older child began again at the heal and was gone within `vm_tolerance`, before its
    /// watchdog (continued with it) was scheduled to kill it. No process on the machine can
    /// prevent that moment; the fence covers it (README, "What it cannot do"). Counted for the
    /// report, never a violation; one that lasts longer is a violation.
    pub after_vm_pause: usize,
    /// The longest of those.
    pub after_vm_pause_longest: u64,
}

impl OverlapVerdict {
    /// Adds the verdict on another lane (one shard's children, under a sharded election).
    pub fn absorb(&mut self, other: OverlapVerdict) {
        self.violations.extend(other.violations);
        self.in_alone_pause = self.in_alone_pause.saturating_add(other.in_alone_pause);
        self.after_vm_pause = self.after_vm_pause.saturating_add(other.after_vm_pause);
        self.after_vm_pause_longest = self
            .after_vm_pause_longest
            .max(other.after_vm_pause_longest);
    }
}

/// Whether `span` and `window` share an instant.
pub(super) fn touches(span: (u64, u64), window: (u64, u64)) -> bool {
    span.0 < window.1 && window.0 < span.1
}

/// (b) Finds the overlaps between children with different ballots, up to `until`.
/// `alone_paused`: windows (pause to resume, plus the allowance for the supervisor to stop its
/// child) in which a supervisor alone was paused; an overlap inside one is a violation like
/// any other, counted apart too.
pub fn check_overlaps(
    children: &[ChildRun],
    alone_paused: &[Window],
    vm_paused: &[Window],
    tolerance: u64,
    vm_tolerance: u64,
    split_gap: u64,
    until: u64,
) -> OverlapVerdict {
    let mut verdict = OverlapVerdict::default();
    let spans: Vec<Vec<(u64, u64)>> = children
        .iter()
        .map(|c| {
            alive_spans(&c.times, split_gap)
                .into_iter()
                .filter(|(a, _)| *a <= until)
                .map(|(a, b)| (a, b.min(until)))
                .collect()
        })
        .collect();
    for (i, a) in children.iter().enumerate() {
        for (j, b) in children.iter().enumerate().skip(i.saturating_add(1)) {
            if a.ballot == b.ballot {
                continue;
            }
            let (older, newer, so, sn) = if a.ballot < b.ballot {
                (a, b, i, j)
            } else {
                (b, a, j, i)
            };
            let windows: Vec<(u64, u64)> = alone_paused
                .iter()
                .filter(|w| {
                    (w.slot == older.slot && w.incarnation == older.incarnation)
                        || (w.slot == newer.slot && w.incarnation == newer.incarnation)
                })
                .map(|w| (w.from, w.to))
                .collect();
            let key = |c: &ChildRun| (c.slot, c.incarnation, c.ballot, c.pid);
            for &(oa, ob) in spans.get(so).map(Vec::as_slice).unwrap_or_default() {
                for &(na, nb) in spans.get(sn).map(Vec::as_slice).unwrap_or_default() {
                    let (from, to) = (oa.max(na), ob.min(nb));
                    if to <= from || to.saturating_sub(from) <= tolerance {
                        continue;
                    }
                    let resumed = vm_paused.iter().any(|w| {
                        w.slot == older.slot
                            && w.incarnation == older.incarnation
                            && oa >= w.to
                            && from <= w.to.saturating_add(vm_tolerance)
                            && to <= oa.saturating_add(vm_tolerance)
                    });
                    if resumed {
                        verdict.after_vm_pause = verdict.after_vm_pause.saturating_add(1);
                        verdict.after_vm_pause_longest =
                            verdict.after_vm_pause_longest.max(to.saturating_sub(from));
                        continue;
                    }
                    if windows.iter().any(|w| touches((from, to), *w)) {
                        verdict.in_alone_pause = verdict.in_alone_pause.saturating_add(1);
                    }
                    verdict.violations.push(Overlap {
                        older: key(older),
                        newer: key(newer),
                        from,
                        to,
                        shard: older.shard,
                    });
                }
            }
        }
    }
    verdict
}
