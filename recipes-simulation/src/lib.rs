//! Deterministic simulation of `fdb-leader-election` (built out in its own issue).
#![forbid(unsafe_code)]
