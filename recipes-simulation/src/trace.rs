//! The trace: one line per simulation step. The whole trace is hashed (so two runs of a seed
//! can be compared byte for byte) and its tail kept for violation reports.

use std::collections::VecDeque;

/// How many trailing lines a violation report shows.
pub const TAIL_LINES: usize = 60;

/// A seed's trace.
#[derive(Debug)]
pub struct Trace {
    tail: VecDeque<String>,
    /// FNV-1a over every line and its newline.
    hash: u64,
    lines: u64,
    /// Every line, when asked for (`--trace`, tests).
    full: Option<Vec<String>>,
}

impl Trace {
    /// An empty trace; `keep_all` keeps every line besides the tail.
    pub fn new(keep_all: bool) -> Self {
        Trace {
            tail: VecDeque::with_capacity(TAIL_LINES),
            hash: 0xcbf2_9ce4_8422_2325,
            lines: 0,
            full: keep_all.then(Vec::new),
        }
    }

    /// Appends a line.
    pub fn line(&mut self, line: String) {
        for b in line.bytes().chain(std::iter::once(b'\n')) {
            self.hash = (self.hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.lines = self.lines.saturating_add(1);
        if let Some(full) = self.full.as_mut() {
            full.push(line.clone());
        }
        if self.tail.len() >= TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    /// The hash of every line so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// How many lines were written.
    pub fn len(&self) -> u64 {
        self.lines
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    /// The last lines.
    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }

    /// Every line, if kept.
    pub fn full(&self) -> Option<&[String]> {
        self.full.as_deref()
    }
}
