//! Deterministic simulation of `fdb-leader-election` (built out in its own issue).
