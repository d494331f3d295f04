//! What a child tells the harness: one datagram per tick, `alive SLOT INCARNATION PID PGID
//! BALLOT SENT_NS SEQ CLEAN SHARD` (`SHARD`: the shard the child works for under `fdb-leader
//! run --shards`, `-` under a single election).

/// One report from a child: "alive, ballot B", with the child's reading of true time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The candidate slot (the lane) whose supervisor runs the child.
    pub slot: u32,
    /// The supervisor's incarnation within the slot.
    pub incarnation: u32,
    /// The child's process id.
    pub pid: i32,
    /// The child's process group (the group the supervisor stops; a VM pause stops it).
    pub pgid: i32,
    /// The ballot the supervisor gave the child (`FDB_LEADER_BALLOT`).
    pub ballot: u64,
    /// When the child sent it: `CLOCK_MONOTONIC`, nanoseconds.
    pub sent_ns: u64,
    /// The report's number within the child (0 first).
    pub seq: u64,
    /// Whether the child runs on the real clock (no fake-time library or variable inherited).
    pub clean_clock: bool,
    /// The shard it works for (`FDB_LEADER_SHARD`), under a sharded election.
    pub shard: Option<u32>,
}

impl Report {
    /// The datagram.
    pub fn encode(&self) -> String {
        format!(
            "alive {} {} {} {} {} {} {} {} {}",
            self.slot,
            self.incarnation,
            self.pid,
            self.pgid,
            self.ballot,
            self.sent_ns,
            self.seq,
            u8::from(self.clean_clock),
            self.shard.map_or_else(|| "-".to_owned(), |s| s.to_string())
        )
    }

    /// Parses a datagram; `None` if it is not a report.
    pub fn decode(text: &str) -> Option<Report> {
        let mut f = text.split_ascii_whitespace();
        if f.next()? != "alive" {
            return None;
        }
        let report = Report {
            slot: f.next()?.parse().ok()?,
            incarnation: f.next()?.parse().ok()?,
            pid: f.next()?.parse().ok()?,
            pgid: f.next()?.parse().ok()?,
            ballot: f.next()?.parse().ok()?,
            sent_ns: f.next()?.parse().ok()?,
            seq: f.next()?.parse().ok()?,
            clean_clock: f.next()? == "1",
            shard: match f.next()? {
                "-" => None,
                s => Some(s.parse().ok()?),
            },
        };
        f.next().is_none().then_some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip_and_garbage_is_refused() {
        let r = Report {
            slot: 2,
            incarnation: 7,
            pid: 1234,
            pgid: 1230,
            ballot: 42,
            sent_ns: 99_000_000_001,
            seq: 5,
            clean_clock: true,
            shard: None,
        };
        assert_eq!(Report::decode(&r.encode()), Some(r.clone()));
        let sharded = Report {
            shard: Some(3),
            ..r.clone()
        };
        assert_eq!(Report::decode(&sharded.encode()), Some(sharded));
        assert_eq!(Report::decode("alive 1 2"), None);
        assert_eq!(Report::decode("alive 2 7 1234 1230 42 9 5 1 x"), None);
        assert_eq!(Report::decode("alive 2 7 1234 1230 42 9 5 1"), None);
        assert_eq!(Report::decode("dead 2 7 1234 1230 42 9 5 1 -"), None);
        assert_eq!(Report::decode(&format!("{} extra", r.encode())), None);
    }
}
