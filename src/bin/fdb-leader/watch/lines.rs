//! The lines `watch` prints: a leader change, and a candidate's eligibility, version and
//! standing under the version policy.

use fdb_leader_election::runner::{ChangeReason, LeaderChange, LeaderInfo};
use fdb_leader_election::{Eligibility, Version};
use serde_json::{Value, json};

use crate::durations::now_rfc3339;
use crate::exit::Failure;
use crate::output;

/// A line `watch` prints: as text, or as one JSON object (`--json`), stamped with the time.
pub(super) trait Printed {
    /// One line of text.
    fn text(&self, time: &str) -> String;

    /// One JSON object.
    fn json(&self, time: &str) -> Value;

    /// Prints it now.
    fn print(&self, as_json: bool) -> Result<(), Failure> {
        let time = now_rfc3339();
        if as_json {
            output::line(&self.json(&time).to_string())
        } else {
            output::line(&self.text(&time))
        }
    }
}

/// A leader change as printed: the change the observer reported, or the current leader after
/// the observer's stream ran ahead of the printing (`resync`).
#[derive(Debug)]
pub(super) struct Line<'a> {
    pub(super) new: Option<&'a LeaderInfo>,
    pub(super) old: Option<&'a LeaderInfo>,
    pub(super) reason: &'static str,
    pub(super) reserved_for: Option<String>,
    /// The operator holding a forced vacancy.
    pub(super) operator: Option<String>,
}

impl<'a> Line<'a> {
    pub(super) fn of(change: &'a LeaderChange) -> Self {
        let (reserved_for, operator) = match &change.reason {
            ChangeReason::SteppedDown { reserved_for } => {
                (reserved_for.as_ref().map(ToString::to_string), None)
            }
            ChangeReason::ForcedVacant { operator } => (None, Some(operator.to_string())),
            _ => (None, None),
        };
        Line {
            new: change.new.as_ref(),
            old: change.old.as_ref(),
            reason: change.reason.as_str(),
            reserved_for,
            operator,
        }
    }

    pub(super) fn resync(current: Option<&'a LeaderInfo>) -> Self {
        Line {
            new: current,
            old: None,
            reason: "resync",
            reserved_for: None,
            operator: None,
        }
    }
}

impl Printed for Line<'_> {
    fn text(&self, time: &str) -> String {
        let reason = self.reason;
        let mut line = match self.new {
            Some(l) => {
                let version = l.version.as_ref().map(|v| format!(" version {v}"));
                format!(
                    "{time} leader {} ballot {} priority {}{} ({reason})",
                    l.id,
                    l.ballot,
                    l.priority,
                    version.unwrap_or_default()
                )
            }
            None => format!("{time} no leader ({reason})"),
        };
        if let Some(r) = &self.reserved_for {
            line.push_str(" reserved for ");
            line.push_str(r);
        }
        if let Some(op) = &self.operator {
            line.push_str(" held by operator ");
            line.push_str(op);
            line.push_str(" for one lease");
        }
        if let Some(payload) = self.new.and_then(LeaderInfo::payload_str) {
            line.push_str(" payload ");
            line.push_str(payload);
        }
        if let Some(old) = self.old {
            line.push_str(&format!(" previous {} ballot {}", old.id, old.ballot));
        }
        line
    }

    fn json(&self, time: &str) -> Value {
        json!({
            "time": time,
            "reason": self.reason,
            "leader": self.new.map(|l| l.id.as_str()),
            "ballot": self.new.map(|l| l.ballot.get()),
            "priority": self.new.map(|l| l.priority.get()),
            "version": self.new.and_then(version_of),
            "payload": self.new.and_then(LeaderInfo::payload_str),
            "reserved_for": self.reserved_for,
            "operator": self.operator,
            "previous_leader": self.old.map(|l| l.id.as_str()),
            "previous_ballot": self.old.map(|l| l.ballot.get()),
            "previous_version": self.old.and_then(version_of),
        })
    }
}

/// A leader's version as printed, if it registered one.
fn version_of(l: &LeaderInfo) -> Option<String> {
    l.version.as_ref().map(ToString::to_string)
}

/// A candidate's eligibility changed (or was first seen ineligible), as printed.
#[derive(Debug)]
pub(super) struct EligibilityLine<'a> {
    pub(super) candidate: &'a str,
    pub(super) eligibility: &'a Eligibility,
}

impl Printed for EligibilityLine<'_> {
    fn text(&self, time: &str) -> String {
        match self.eligibility.reason() {
            None => format!("{time} candidate {} eligible", self.candidate),
            Some(reason) => format!("{time} candidate {} not eligible: {reason}", self.candidate),
        }
    }

    fn json(&self, time: &str) -> Value {
        json!({
            "time": time,
            "reason": "eligibility",
            "candidate": self.candidate,
            "eligible": self.eligibility.is_eligible(),
            "eligibility_reason": self.eligibility.reason(),
        })
    }
}

/// A candidate's version, first seen or changed, as printed.
#[derive(Debug)]
pub(super) struct VersionLine<'a> {
    pub(super) candidate: &'a str,
    pub(super) version: Option<&'a Version>,
}

impl Printed for VersionLine<'_> {
    fn text(&self, time: &str) -> String {
        match self.version {
            Some(v) => format!("{time} candidate {} version {v}", self.candidate),
            None => format!("{time} candidate {} version none", self.candidate),
        }
    }

    fn json(&self, time: &str) -> Value {
        json!({
            "time": time,
            "reason": "version",
            "candidate": self.candidate,
            "version": self.version.map(ToString::to_string),
        })
    }
}

/// Whether the version policy lets a candidate lead, first seen not to or changed, as
/// printed.
#[derive(Debug)]
pub(super) struct PolicyLine<'a> {
    pub(super) candidate: &'a str,
    pub(super) allows: bool,
}

impl Printed for PolicyLine<'_> {
    fn text(&self, time: &str) -> String {
        if self.allows {
            format!(
                "{time} candidate {} allowed by the version policy",
                self.candidate
            )
        } else {
            format!(
                "{time} candidate {} not allowed by the version policy (a version it ranks ahead is live)",
                self.candidate
            )
        }
    }

    fn json(&self, time: &str) -> Value {
        json!({
            "time": time,
            "reason": "policy",
            "candidate": self.candidate,
            "policy_allows": self.allows,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fdb_leader_election::{ElectionConfig, MemDb};

    use fdb_leader_election::runner::Runner;

    use super::*;
    use crate::store::subspace;

    #[tokio::test(start_paused = true)]
    async fn lines_name_the_leader_the_reason_and_the_predecessor()
    -> Result<(), Box<dyn std::error::Error>> {
        let db = MemDb::new();
        let config = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
        let observer = Runner::observer(db.clone(), subspace("w")).start()?;
        let mut changes = observer.subscribe();
        let a = Runner::builder(db.clone(), subspace("w"))
            .label("a")
            .payload("host-a")
            .config(config)
            .start()?;
        let elected = changes.recv().await?;
        let line = Line::of(&elected);
        let id = a.id().map(ToString::to_string).unwrap_or_default();
        let text = line.text("T");
        assert!(
            text.starts_with(&format!("T leader {id} ballot 1 priority 0 (")),
            "{text}"
        );
        assert!(text.ends_with(" payload host-a"), "{text}");
        let j = line.json("T");
        assert_eq!(j["leader"], json!(id));
        assert_eq!(j["ballot"], json!(1));
        assert_eq!(j["previous_leader"], Value::Null);

        a.shutdown().await;
        let gone = changes.recv().await?;
        let line = Line::of(&gone);
        assert_eq!(
            line.text("T"),
            format!("T no leader (stepped_down) previous {id} ballot 1")
        );
        assert_eq!(line.json("T")["reason"], json!("stepped_down"));
        assert_eq!(Line::resync(None).text("T"), "T no leader (resync)");
        observer.shutdown().await;
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn lines_give_the_leaders_version_and_each_candidates()
    -> Result<(), Box<dyn std::error::Error>> {
        let db = MemDb::new();
        let config = ElectionConfig::with_lease_duration(Duration::from_millis(300))?;
        let observer = Runner::observer(db.clone(), subspace("v")).start()?;
        let mut changes = observer.subscribe();
        let a = Runner::builder(db.clone(), subspace("v"))
            .label("a")
            .version("1.4.0")
            .config(config.clone())
            .start()?;
        let elected = changes.recv().await?;
        let id = a.id().map(ToString::to_string).unwrap_or_default();
        let line = Line::of(&elected);
        assert!(
            line.text("T").starts_with(&format!(
                "T leader {id} ballot 1 priority 0 version 1.4.0 ("
            )),
            "{}",
            line.text("T")
        );
        assert_eq!(line.json("T")["version"], json!("1.4.0"));
        assert_eq!(line.json("T")["previous_version"], Value::Null);
        a.shutdown().await;
        let gone = changes.recv().await?;
        let j = Line::of(&gone).json("T");
        assert_eq!(
            (&j["version"], &j["previous_version"]),
            (&Value::Null, &json!("1.4.0"))
        );

        let v = Version::new(1, 5, 0);
        let line = VersionLine {
            candidate: "b-1",
            version: Some(&v),
        };
        assert_eq!(line.text("T"), "T candidate b-1 version 1.5.0");
        assert_eq!(
            line.json("T"),
            json!({ "time": "T", "reason": "version", "candidate": "b-1", "version": "1.5.0" })
        );
        let none = VersionLine {
            candidate: "b-1",
            version: None,
        };
        assert_eq!(none.text("T"), "T candidate b-1 version none");
        observer.shutdown().await;
        Ok(())
    }
}
