//! The event queue: events ordered by (true time, sequence number).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::time::Nanos;

/// Who or what an event is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The next step of a process's election loop (register, cycle, resign, unregister). Stale
    /// if `epoch` is no longer the process's control epoch.
    Control { pid: usize, epoch: u64 },
    /// The next step of a process's leader-work loop. Stale if `epoch` moved on.
    Work {
        pid: usize,
        epoch: u64,
        step: WorkStep,
    },
    /// Commit the pending transaction with this token.
    Commit { token: u64 },
    /// The late reply of an applied commit reaches its process.
    Reply { token: u64 },
    /// The executor's transaction timeout for operation `op` of a process.
    Timeout { pid: usize, op: u64 },
    /// A process's watch fired (`ok`) or failed.
    WatchFired { pid: usize, ok: bool },
    /// The bound of a process's wait for guarded work (`epoch` of the wait).
    DrainBound { pid: usize, epoch: u64 },
    /// A health check of a process starts (`leader`: its leader health check, else its
    /// readiness check); stale unless `epoch` is its loop's.
    Check {
        pid: usize,
        epoch: u64,
        leader: bool,
    },
    /// A health check's answer reaches the process's checks.
    Answer {
        pid: usize,
        epoch: u64,
        leader: bool,
        answer: Answer,
    },
    /// A process's eligibility may change with nothing else happening (a cool-down's end).
    HealthWake { pid: usize, epoch: u64 },
    /// A chaos or workload action.
    Chaos(Chaos),
    /// An operator transaction step (configuration, eviction).
    Operator(OperatorStep),
    /// Faults stop: the quiet final phase begins.
    Quiet,
    /// A liveness deadline to check even if nothing else happens then.
    Deadline,
    /// The end of the run.
    End,
}

/// A health check's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It passed.
    Pass,
    /// It failed.
    Fail,
    /// It did not answer within its timeout (a failure).
    TimedOut,
}

/// The leader-work loop's steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WorkStep {
    /// Check the lease ("am I the leader?").
    Check,
    /// Act on the token obtained by the check: open the fenced and unfenced transactions.
    Act { token: u64 },
    /// An await point inside a running task (between two of its pieces of work): it stops
    /// if its guard was cancelled, else acts again.
    Next { token: u64 },
}

/// Chaos and workload actions, each scheduled at a random time by the one before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Chaos {
    /// Crash a process (the leader, half of the time).
    Crash,
    /// Start a crashed node again as a new incarnation.
    Restart { node: usize },
    /// Freeze a process (stop-the-world).
    Pause,
    /// Cut one process off from the database.
    Partition,
    /// Heal a partition.
    Heal { pid: usize },
    /// Make the whole database unavailable.
    Outage,
    /// End the outage.
    OutageEnd,
    /// Begin a rolling deploy: every node gets a new, higher-priority incarnation.
    Deploy,
    /// One node of a rolling deploy: start the new incarnation.
    DeployNode { node: usize, generation: u32 },
    /// Gracefully shut down a replaced incarnation.
    Shutdown { pid: usize },
    /// A requester whose handover request a leader is draining for leaves: a graceful
    /// shutdown, or a crash after which the operator removes its registration by id.
    Withdraw { pid: usize, crash: bool },
    /// Change one process's priority.
    Reprioritize,
    /// Toggle preemption in the stored configuration.
    TogglePreemption,
    /// The operator writes a configuration with every field drawn afresh.
    ConfigChange,
    /// The operator's next configuration after one it wrote (a lease cut after long
    /// attempts, or a longer lease after a short one).
    ConfigStep {
        shape: Shape,
        /// How many more times a lease cut waits for a leader renewing with the long
        /// attempts before it is written anyway.
        waits: u8,
        /// How many lease cuts (long attempts, then a short lease) are left, this one included.
        rounds: u8,
    },
    /// The operator forces the leader out (`force_vacate`), under an arbitrary id.
    ForceVacate,
    /// The operator asks the leader to step down (`request_resign`).
    OperatorResign,
    /// The operator removes a registration by id while its owner runs.
    OperatorUnregister,
    /// An application opens a transaction to query later, on an old read version.
    StaleQueryOpen,
    /// The application queries on the transaction it opened.
    StaleQueryAsk,
    /// A health fault (DESIGN §13.9): readiness failing, flapping or slow on a node, the
    /// leader's work failing, or a dependency of every candidate down.
    Health,
    /// The operator marks a node's name (or every name) ineligible for a while.
    Mark,
    /// The operator writes a mark: `node` (`None`: every node) excluded or not.
    SetMark { node: Option<usize>, marked: bool },
    /// The operator asks the leader to hand over to a name (`request_resign_to`).
    Directed,
    /// The operator writes a version policy.
    PolicyChange,
    /// The quiet phase's operator marks (left for good), retried until they commit.
    QuietMarks,
    /// The quiet phase's reservation probe: the best follower crashes and the leader resigns
    /// at once, reserving for it (oracle 21).
    Probe,
}

/// Operator transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OperatorStep {
    /// Write the configuration with preemption on or off (retried until it commits).
    SetPreemption { allow: bool },
    /// Evict dead candidates (periodic).
    Evict,
    /// Evict dead candidates once, racing a claim that is in flight.
    EvictRacing,
    /// Restore the world's configuration (the quiet phase; retried until it commits).
    Restore,
}

#[derive(Debug)]
struct Scheduled<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Scheduled<E> {}

impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Scheduled<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Events in (time, sequence) order: two events at the same instant run in the order they
/// were scheduled. `E` is the world's event type (the single election's [`Event`], or the
/// sharded world's).
#[derive(Debug)]
pub(crate) struct Queue<E = Event> {
    heap: BinaryHeap<Reverse<Scheduled<E>>>,
    next_seq: u64,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<E> Queue<E> {
    /// Schedules `event` at true time `at`.
    pub(crate) fn push(&mut self, at: Nanos, event: E) {
        let seq = self.next_seq;
        self.next_seq = seq.saturating_add(1);
        self.heap.push(Reverse(Scheduled { at, seq, event }));
    }

    /// The earliest event.
    pub(crate) fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|Reverse(s)| (s.at, s.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_instant_runs_in_scheduling_order() {
        let mut q = Queue::default();
        q.push(5, Event::End);
        q.push(3, Event::Quiet);
        q.push(5, Event::Deadline);
        assert_eq!(q.pop(), Some((3, Event::Quiet)));
        assert_eq!(q.pop(), Some((5, Event::End)));
        assert_eq!(q.pop(), Some((5, Event::Deadline)));
        assert_eq!(q.pop(), None);
    }
}

/// Which part of the space of valid configurations the operator draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Anything but a cut: the lease from a quarter of the world's to three times it.
    Any,
    /// A lease of half the world's or longer.
    Normal,
    /// A lease of two or three times the world's with long heartbeats (a third or a quarter
    /// of it) and long attempts (transaction timeout 0.6–0.9 heartbeat): the old
    /// configuration of a lease cut.
    LongAttempts,
    /// A lease of an eighth or a sixth of the world's: the new configuration of a cut.
    ShortLease,
}
