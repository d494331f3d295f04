//! The four checks, on the harness's records, against true time:
//!
//! - **(a) fencing** ([`check_sink`](fencing::check_sink)): the sink accepted writes in ballot order, each ballot
//!   from one candidate, and lost no increment;
//! - **(b) no overlap** ([`check_overlaps`](overlap::check_overlaps)): no two children with different ballots were
//!   alive at the same instant for longer than the measured report interval — also while a
//!   supervisor alone was paused: its watchdog holds the lease and kills the child at the
//!   deadline (those windows are kept, to report the overlaps inside them). One moment is
//!   counted apart: the resumption of a VM pause, when the supervisor, its watchdog and its
//!   child, stopped together, continue together and the child runs until the watchdog is
//!   scheduled; if it is gone within the largest report interval of the run (the scheduling
//!   delay the run saw) it is reported, not a violation (no process on the machine can
//!   prevent it; README, "What it cannot do");
//! - **(c) recovery** ([`check_recovery`](recovery::check_recovery)): after each fault heals, a current child runs
//!   within lease + 2 heartbeats + grace (on FoundationDB, plus the time the cluster itself
//!   could not commit meanwhile, as the probe measured it);
//! - **(d) progress** ([`check_progress`](progress::check_progress)): elections, handovers and takeovers all happened.
//!
//! A child is *alive* over each run of its reports whose gaps stay within `split_gap`: a
//! child stopped with its supervisor (a VM pause) sends nothing and is not alive meanwhile.

pub mod fencing;
pub mod overlap;
pub mod progress;
pub mod recovery;
pub mod spans;
#[cfg(test)]
mod tests;
