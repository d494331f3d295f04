//! One line of a sink's log: the write it records and the sink's state after it.

/// The sink's state: what every decision reads, and what every log line records after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkState {
    /// The highest ballot accepted so far.
    pub max_ballot: u64,
    /// The counter.
    pub counter: u64,
}

/// One line of a sink's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkEntry {
    /// Whether the sink accepted the write.
    pub accepted: bool,
    /// The writer's ballot.
    pub ballot: u64,
    /// Accepted: the counter after the write. Rejected: the highest ballot accepted so far.
    pub value: u64,
    /// When the write happened (`CLOCK_MONOTONIC`, nanoseconds, read under the lock).
    pub t_ns: u64,
    /// The writer's candidate id (`FDB_LEADER_ID`).
    pub candidate: String,
    /// The sink's state after this write.
    pub state: SinkState,
}

/// The last field of every complete line: a line cut anywhere, then closed by the next
/// writer's `!`, never ends with this field alone.
const END: &str = ".";

impl SinkEntry {
    /// The log line (without the newline).
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {END}",
            if self.accepted { "A" } else { "R" },
            self.ballot,
            self.value,
            self.t_ns,
            self.candidate,
            self.state.max_ballot,
            self.state.counter,
        )
    }

    /// Parses a complete log line (without its newline); `None` for anything else.
    pub fn parse(line: &str) -> Option<SinkEntry> {
        let mut f = line.split(' ');
        let accepted = match f.next()? {
            "A" => true,
            "R" => false,
            _ => return None,
        };
        let mut num = || f.next()?.parse::<u64>().ok();
        let (ballot, value, t_ns) = (num()?, num()?, num()?);
        let candidate = f.next().filter(|c| !c.is_empty())?.to_owned();
        let mut num = || f.next()?.parse::<u64>().ok();
        let state = SinkState {
            max_ballot: num()?,
            counter: num()?,
        };
        (f.next()? == END && f.next().is_none()).then_some(SinkEntry {
            accepted,
            ballot,
            value,
            t_ns,
            candidate,
            state,
        })
    }
}
