//! `watch`: one line per leader change, from an observer runner, until interrupted.

use std::process::ExitCode;

use fdb_leader_election::ElectionError;
use fdb_leader_election::runner::{
    ChangeReason, ElectionDatabase, LeaderChange, LeaderInfo, Runner,
};
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
            Some(l) => format!(
                "{time} leader {} ballot {} priority {} ({reason})",
                l.id, l.ballot, l.priority
            ),
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
            "payload": self.new.and_then(LeaderInfo::payload_str),
            "reserved_for": self.reserved_for,
            "operator": self.operator,
            "previous_leader": self.old.map(|l| l.id.as_str()),
            "previous_ballot": self.old.map(|l| l.ballot.get()),
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
            match election.leader_record(&txn).await {
                Ok(_) => Ok(true),
                Err(ElectionError::NotInitialized) => Ok(false),
                Err(e) => Err(e),
            }
        }
    });
    let exists = tokio::select! {
        biased;
        stop = signals.recv() => return signals.stopped(stop, "before watching"),
        exists = exists => exists?,
    };
    if !exists {
        if !args.wait {
            return Err(ctx.no_election());
        }
        tracing::info!(
            election = %ctx.name,
            store = %ctx.store,
            "no such election yet: waiting for a run or config set to create it (--wait)"
        );
    }
    let runner = Runner::observer(db, ctx.election.subspace().clone())
        .election_name(ctx.name.clone())
        .start()
        .map_err(|e| Failure::usage(chain(&e)))?;
    let mut changes = runner.subscribe();
    tracing::info!(election = %ctx.name, store = %ctx.store, "watching");
    let result = loop {
        let change = tokio::select! {
            stop = signals.recv() => break signals.stopped(stop, "watching"),
            change = changes.recv() => change,
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
}
