//! What the supervisors' logs say about FoundationDB: every error their transactions met
//! (the adapter logs each one at debug level, `FoundationDB transaction error code=C
//! phase=P retried=R`, under `RUST_LOG=fdb_leader_election::fdb=debug`), and the uses of a
//! planted fault (`planted fault: ...`, debug builds only).

use std::collections::BTreeMap;

/// The error lines of the supervisors' logs, counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FdbErrors {
    /// By code: how many in any phase.
    pub by_code: BTreeMap<i32, u64>,
    /// By code: how many arose in a commit (the commit had been sent).
    pub in_commit: BTreeMap<i32, u64>,
    /// Uses of a planted fault.
    pub planted: u64,
    /// Supervisors that warned a planted fault is on.
    pub plant_warnings: u64,
}

/// The codes whose commit may have applied: `commit_unknown_result`, `cluster_version_changed`,
/// and the timeouts (1004 `timed_out`, 1031 `transaction_timed_out`, as the adapter logs the
/// caller's timeout).
const UNKNOWN: [i32; 4] = [1021, 1039, 1004, 1031];

/// The codes the summary names; every other is `other`.
pub const NAMED: [i32; 4] = [1021, 1031, 1007, 1020];

/// The value of `key=` in a tracing line (quotes removed).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pattern = format!(" {key}=");
    let start = line.find(&pattern)?.checked_add(pattern.len())?;
    let rest = line.get(start..)?;
    let end = rest.find(' ').unwrap_or(rest.len());
    rest.get(..end).map(|v| v.trim_matches('"'))
}

impl FdbErrors {
    /// Counts the lines of one log.
    pub fn add_log(&mut self, text: &str) {
        for line in text.lines() {
            if line.contains("FoundationDB transaction error") {
                let Some(code) = field(line, "code").and_then(|c| c.parse::<i32>().ok()) else {
                    continue;
                };
                let n = self.by_code.entry(code).or_default();
                *n = n.saturating_add(1);
                if field(line, "phase") == Some("commit") {
                    let n = self.in_commit.entry(code).or_default();
                    *n = n.saturating_add(1);
                }
            } else if line.contains("planted fault: an unknown commit result reported") {
                self.planted = self.planted.saturating_add(1);
            } else if line.contains("(a planted fault, for the chaos harness)") {
                self.plant_warnings = self.plant_warnings.saturating_add(1);
            }
        }
    }

    /// How many errors of `code`.
    pub fn count(&self, code: i32) -> u64 {
        self.by_code.get(&code).copied().unwrap_or(0)
    }

    /// How many errors of codes the summary does not name.
    pub fn other(&self) -> u64 {
        self.by_code
            .iter()
            .filter(|(c, _)| !NAMED.contains(c))
            .map(|(_, n)| *n)
            .fold(0, u64::saturating_add)
    }

    /// Commits whose result was unknown: an unknown-result code, or a timeout, that arose
    /// after the commit was sent.
    pub fn unknown_commits(&self) -> u64 {
        self.in_commit
            .iter()
            .filter(|(c, _)| UNKNOWN.contains(c))
            .map(|(_, n)| *n)
            .fold(0, u64::saturating_add)
    }

    /// `1021=.. 1031=.. 1031_in_commit=.. 1007=.. 1020=.. other=..` for the summary.
    pub fn summary(&self) -> String {
        format!(
            "e1021={} e1031={} e1031_in_commit={} e1007={} e1020={} e_other={} unknown_commits={}",
            self.count(1021),
            self.count(1031),
            self.in_commit.get(&1031).copied().unwrap_or(0),
            self.count(1007),
            self.count(1020),
            self.other(),
            self.unknown_commits()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_are_counted_by_code_and_phase() {
        let log = "\
2026-01-01T00:00:00Z DEBUG FoundationDB transaction error code=1020 phase=\"commit\" retried=true
2026-01-01T00:00:00Z DEBUG FoundationDB transaction error code=1021 phase=\"commit\" retried=false
2026-01-01T00:00:00Z DEBUG FoundationDB transaction error code=1031 phase=\"operation\" retried=false
2026-01-01T00:00:00Z DEBUG FoundationDB transaction error code=1031 phase=\"commit\" retried=false
2026-01-01T00:00:00Z DEBUG FoundationDB transaction error code=1037 phase=\"operation\" retried=false
2026-01-01T00:00:00Z  WARN FDB_LEADER_DEBUG_UNKNOWN_AS_COMMITTED=1: this debug build reports unknown commit results as committed (a planted fault, for the chaos harness)
2026-01-01T00:00:00Z DEBUG planted fault: an unknown commit result reported code=1031 as_what=\"committed\"
2026-01-01T00:00:00Z  INFO leading ballot=3
";
        let mut e = FdbErrors::default();
        e.add_log(log);
        assert_eq!(e.count(1031), 2);
        assert_eq!(e.count(1020), 1);
        assert_eq!(e.other(), 1);
        assert_eq!(e.unknown_commits(), 2);
        assert_eq!((e.planted, e.plant_warnings), (1, 1));
        assert_eq!(
            e.summary(),
            "e1021=1 e1031=2 e1031_in_commit=1 e1007=0 e1020=1 e_other=1 unknown_commits=2"
        );
    }
}
