//! `watch`: one line per leader change, from an observer runner, until interrupted.

use std::process::ExitCode;

use std::collections::BTreeMap;
use std::time::Duration;

use fdb_leader_election::runner::{
    ChangeReason, ElectionDatabase, LeaderChange, LeaderInfo, Runner,
};
use fdb_leader_election::{ElectionError, Eligibility, Version};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::cli::WatchArgs;
use crate::durations::now_rfc3339;
use crate::exit::{Failure, chain};
use crate::output;
use crate::signals::Signals;
use crate::store::{Ctx, until_done};

/// A leader change as printed: the change the observer reported, or the current leader after
/// the observer's stream ran ahead of the printing (`resync`).
#[derive(Debug)]
pub(crate) struct Line<'a> {
    pub(crate) new: Option<&'a LeaderInfo>,
    pub(crate) old: Option<&'a LeaderInfo>,
    pub(crate) reason: &'static str,
    pub(crate) reserved_for: Option<String>,
    /// The operator holding a forced vacancy.
    pub(crate) operator: Option<String>,
}

impl<'a> Line<'a> {
    pub(crate) fn of(change: &'a LeaderChange) -> Self {
        let reserved_for = match &change.reason {
            ChangeReason::SteppedDown { reserved_for } => {
                reserved_for.as_ref().map(ToString::to_string)
            }
            _ => None,
        };
        let operator = match &change.reason {
            ChangeReason::ForcedVacant { operator } => Some(operator.to_string()),
            _ => None,
        };
        Line {
            new: change.new.as_ref(),
            old: change.old.as_ref(),
            reason: change.reason.as_str(),
            reserved_for,
            operator,
        }
    }

    fn resync(current: Option<&'a LeaderInfo>) -> Self {
        Line {
            new: current,
            old: None,
            reason: "resync",
            reserved_for: None,
            operator: None,
        }
    }

    /// One line of text.
    pub(crate) fn text(&self, time: &str) -> String {
        let reason = self.reason;
        let mut line = match self.new {
            Some(l) => match &l.version {
                Some(v) => format!(
                    "{time} leader {} ballot {} priority {} version {v} ({reason})",
                    l.id, l.ballot, l.priority
                ),
                None => format!(
                    "{time} leader {} ballot {} priority {} ({reason})",
                    l.id, l.ballot, l.priority
                ),
            },
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

    /// One JSON object.
    pub(crate) fn json(&self, time: &str) -> Value {
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

    fn print(&self, as_json: bool) -> Result<(), Failure> {
        let time = now_rfc3339();
        if as_json {
            output::line(&self.json(&time).to_string())
        } else {
            output::line(&self.text(&time))
        }
    }
}

/// A leader's version as printed, if it registered one.
fn version_of(l: &LeaderInfo) -> Option<String> {
    l.version.as_ref().map(ToString::to_string)
}

/// A candidate's eligibility changed (or was first seen ineligible), as printed.
#[derive(Debug)]
pub(crate) struct EligibilityLine<'a> {
    pub(crate) candidate: &'a str,
    pub(crate) eligibility: &'a Eligibility,
}

impl EligibilityLine<'_> {
    pub(crate) fn text(&self, time: &str) -> String {
        match self.eligibility.reason() {
            None => format!("{time} candidate {} eligible", self.candidate),
            Some(reason) => format!("{time} candidate {} not eligible: {reason}", self.candidate),
        }
    }

    pub(crate) fn json(&self, time: &str) -> Value {
        json!({
            "time": time,
            "reason": "eligibility",
            "candidate": self.candidate,
            "eligible": self.eligibility.is_eligible(),
            "eligibility_reason": self.eligibility.reason(),
        })
    }

    fn print(&self, as_json: bool) -> Result<(), Failure> {
        let time = now_rfc3339();
        if as_json {
            output::line(&self.json(&time).to_string())
        } else {
            output::line(&self.text(&time))
        }
    }
}

/// A candidate's version, first seen or changed, as printed.
#[derive(Debug)]
pub(crate) struct VersionLine<'a> {
    pub(crate) candidate: &'a str,
    pub(crate) version: Option<&'a Version>,
}

impl VersionLine<'_> {
    pub(crate) fn text(&self, time: &str) -> String {
        match self.version {
            Some(v) => format!("{time} candidate {} version {v}", self.candidate),
            None => format!("{time} candidate {} version none", self.candidate),
        }
    }

    pub(crate) fn json(&self, time: &str) -> Value {
        json!({
            "time": time,
            "reason": "version",
            "candidate": self.candidate,
            "version": self.version.map(ToString::to_string),
        })
    }

    fn print(&self, as_json: bool) -> Result<(), Failure> {
        let time = now_rfc3339();
        if as_json {
            output::line(&self.json(&time).to_string())
        } else {
            output::line(&self.text(&time))
        }
    }
}

/// Whether the version policy lets a candidate lead, first seen not to or changed, as
/// printed.
#[derive(Debug)]
pub(crate) struct PolicyLine<'a> {
    pub(crate) candidate: &'a str,
    pub(crate) allows: bool,
}

impl PolicyLine<'_> {
    pub(crate) fn text(&self, time: &str) -> String {
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

    pub(crate) fn json(&self, time: &str) -> Value {
        json!({
            "time": time,
            "reason": "policy",
            "candidate": self.candidate,
            "policy_allows": self.allows,
        })
    }

    fn print(&self, as_json: bool) -> Result<(), Failure> {
        let time = now_rfc3339();
        if as_json {
            output::line(&self.json(&time).to_string())
        } else {
            output::line(&self.text(&time))
        }
    }
}

/// What `watch` last printed of each candidate, by id: its eligibility, its version, and
/// whether the version policy lets it lead.
type Seen = BTreeMap<String, (Eligibility, Option<Version>, bool)>;

/// Reads the registry and prints each candidate whose eligibility changed since `seen` (at
/// the first read, each one that is not eligible), each whose version is new or changed
/// (at the first read, each one that registered a version), and each whose standing under
/// the version policy changed (at the first read, each one the policy does not let lead). A
/// failed read is skipped: the next one reports what changed.
async fn candidate_changes<D: ElectionDatabase>(
    db: &D,
    ctx: &Ctx,
    seen: &mut Option<Seen>,
    as_json: bool,
) -> Result<(), Failure> {
    let election = ctx.election.clone();
    let listed = db
        .transact(LIST_TIMEOUT, move |txn| {
            let election = election.clone();
            async move { election.list_candidates(&txn).await }
        })
        .await;
    let candidates = match listed {
        Ok(candidates) => candidates,
        Err(e) => {
            tracing::debug!(error = %chain(&e), "could not read the candidates");
            return Ok(());
        }
    };
    let now: Seen = candidates
        .into_iter()
        .map(|c| {
            (
                c.id.to_string(),
                (
                    c.record.eligibility().clone(),
                    c.record.version().cloned(),
                    c.policy_allows,
                ),
            )
        })
        .collect();
    for (id, (e, v, allows)) in &now {
        let before = seen.as_ref().and_then(|s| s.get(id));
        let eligibility_changed = match before {
            None => !e.is_eligible(),
            Some((b, _, _)) => b != e,
        };
        if eligibility_changed {
            EligibilityLine {
                candidate: id,
                eligibility: e,
            }
            .print(as_json)?;
        }
        let version_changed = match before {
            None => v.is_some(),
            Some((_, b, _)) => b != v,
        };
        if version_changed {
            VersionLine {
                candidate: id,
                version: v.as_ref(),
            }
            .print(as_json)?;
        }
        let policy_changed = match before {
            None => !allows,
            Some((_, _, b)) => b != allows,
        };
        if policy_changed {
            PolicyLine {
                candidate: id,
                allows: *allows,
            }
            .print(as_json)?;
        }
    }
    *seen = Some(now);
    Ok(())
}

/// The longest a registry read of `watch` may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(2);

/// `watch`.
pub(crate) async fn watch<D: ElectionDatabase>(
    db: D,
    ctx: &Ctx,
    args: &WatchArgs,
    signals: &mut Signals,
) -> Result<ExitCode, Failure> {
    let as_json = args.json;
    // Refuse a corrupt election at once (the observer would retry forever), and one that does
    // not exist unless asked to wait for it. A store that does not answer yet is waited for,
    // as the observer would; a signal ends the wait.
    let election = ctx.election.clone();
    let exists = until_done(&db, ctx, move |txn| {
        let election = election.clone();
        async move {
            let (config, record) =
                tokio::join!(election.read_config(&txn), election.leader_record(&txn));
            match record.and(config) {
                Ok(config) => Ok(Some(config.heartbeat_interval())),
                Err(ElectionError::NotInitialized) => Ok(None),
                Err(e) => Err(e),
            }
        }
    });
    let heartbeat = tokio::select! {
        biased;
        stop = signals.recv() => return signals.stopped(stop, "before watching"),
        exists = exists => exists?,
    };
    if heartbeat.is_none() {
        if !args.wait {
            return Err(ctx.no_election());
        }
        tracing::info!(
            election = %ctx.name,
            store = %ctx.store,
            "no such election yet: waiting for a run or config set to create it (--wait)"
        );
    }
    let runner = Runner::observer(db.clone(), ctx.election.subspace().clone())
        .election_name(ctx.name.clone())
        .start()
        .map_err(|e| Failure::usage(chain(&e)))?;
    let mut changes = runner.subscribe();
    tracing::info!(election = %ctx.name, store = %ctx.store, "watching");
    // The candidates' eligibility and versions, read every heartbeat of the stored
    // configuration (every second for an election created later).
    let mut seen = None;
    let mut polls = tokio::time::interval(heartbeat.unwrap_or(Duration::from_secs(1)));
    polls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let result = loop {
        let change = tokio::select! {
            stop = signals.recv() => break signals.stopped(stop, "watching"),
            change = changes.recv() => change,
            _ = polls.tick() => {
                if let Err(e) = candidate_changes(&db, ctx, &mut seen, as_json).await {
                    break Err(e);
                }
                continue;
            }
        };
        let printed = match change {
            Ok(change) => Line::of(&change).print(as_json),
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "fell behind; printing the current leader");
                let current = runner.leader();
                Line::resync(current.as_ref()).print(as_json)
            }
            Err(RecvError::Closed) => {
                break Err(Failure::store("the election observer stopped unexpectedly"));
            }
        };
        if let Err(e) = printed {
            break Err(e);
        }
    };
    runner.shutdown().await;
    result
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fdb_leader_election::{ElectionConfig, MemDb};

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
