//! `status`'s JSON and text.

use fdb_leader_election::{
    CandidateInfo, ElectionConfig, Eligibility, LeaderRecord, ResignRefusal,
};
use serde_json::{Value, json};

use super::observed::{
    age_text, heartbeat_age, hex, leader_version, lease_state, named_json, named_text,
    payload_text, pending_refusal, renewal_lag,
};
use crate::config_cmd;
use crate::durations::{millis_json, show};
use crate::output::on_off;
use crate::store::Ctx;

/// What `status` shows beside the leader record and the registry: the operators' marks, and
/// the last directed resign a leader refused.
#[derive(Debug, Default)]
pub(crate) struct Notes {
    pub(crate) marks: Marks,
    pub(crate) refusal: Option<ResignRefusal>,
}

/// The operators' eligibility marks, by the name they exclude.
pub(crate) type Marks = std::collections::BTreeMap<String, Eligibility>;

/// The status object `status --json` prints.
pub(crate) fn to_json(
    ctx: &Ctx,
    config: &ElectionConfig,
    record: &LeaderRecord,
    candidates: &[CandidateInfo],
    notes: &Notes,
) -> Value {
    let marks = &notes.marks;
    let owner = record.owner();
    let list: Vec<Value> = candidates
        .iter()
        .map(|c| {
            json!({
                "id": c.id.as_str(),
                "priority": c.record.priority().get(),
                "live": c.live,
                "heartbeat": c.record.heartbeat(),
                "seen_renewal": c.record.seen_renewal(),
                "renewal_lag": renewal_lag(record, c),
                "heartbeat_age_ms": millis_json(heartbeat_age(config, renewal_lag(record, c))),
                "registration": c.record.registration(),
                "leader": owner.is_some_and(|o| o.id() == &c.id),
                "eligible": c.record.is_eligible(),
                "eligibility_reason": c.record.eligibility().reason(),
                "policy_allows": c.policy_allows,
                "version": c.record.version().map(ToString::to_string),
            })
        })
        .collect();
    json!({
        "election": ctx.name,
        "store": ctx.store,
        "leader": owner.map(|o| o.id().as_str()),
        "leader_priority": owner.map(|o| o.priority().get()),
        "leader_version": leader_version(record),
        "ballot": record.ballot().get(),
        "lease_state": lease_state(record),
        "renewal": record.renewal(),
        "lease_ms": millis_json(record.lease_duration()),
        "handover_requested_by": named_json(record.handover_request()),
        "operator_request": record.operator_request().map(|id| id.as_str()),
        "resign_refusal": pending_refusal(record, notes.refusal.as_ref()).map(|r| json!({
            "ballot": r.ballot().get(),
            "operator": r.operator().as_str(),
            "to": r.to(),
            "reason": r.reason(),
        })),
        "reserved_for": named_json(record.reservation()),
        "operator_hold": record.operator_hold().map(|id| id.as_str()),
        "payload": payload_text(record),
        "payload_hex": record.payload().map(hex),
        "renewals_before_dead": config.renewals_before_dead(),
        "config": config_cmd::json(config),
        "candidates": list,
        "eligibility_marks": marks
            .iter()
            .map(|(name, e)| json!({ "name": name, "reason": e.reason() }))
            .collect::<Vec<_>>(),
    })
}

/// The status as text.
pub(crate) fn to_text(
    ctx: &Ctx,
    config: &ElectionConfig,
    record: &LeaderRecord,
    candidates: &[CandidateInfo],
    notes: &Notes,
) -> String {
    let marks = &notes.marks;
    let mut out = Vec::new();
    out.push(format!("election   {} ({})", ctx.name, ctx.store));
    let leader = match (record.owner(), leader_version(record)) {
        (Some(o), Some(v)) => format!("{} (priority {}, version {v})", o.id(), o.priority()),
        (owner, _) => named_text(owner),
    };
    out.push(format!("leader     {leader}"));
    out.push(format!("ballot     {}", record.ballot()));
    let state = lease_state(record);
    let note = if state == "owned" {
        " (one observation cannot tell a live leader from a crashed one; `watch` reports a lapse)"
    } else {
        ""
    };
    out.push(format!(
        "lease      {state}, renewal {}, lease {}{note}",
        record.renewal(),
        show(record.lease_duration())
    ));
    out.push(format!(
        "handover   {}",
        match (record.handover_request(), record.operator_request()) {
            (Some(n), _) => format!("requested by {}", named_text(Some(n))),
            (None, Some(op)) => format!(
                "operator {op} asked the leader to step down (it reserves the leadership for \
                 the best live candidate)"
            ),
            (None, None) => "none".to_owned(),
        }
    ));
    if let Some(r) = pending_refusal(record, notes.refusal.as_ref()) {
        out.push(format!(
            "refused    resign --to {} (operator {}): {}; the leader keeps leading",
            r.to(),
            r.operator(),
            r.reason()
        ));
    }
    out.push(format!(
        "reserved   {}",
        match (record.reservation(), record.operator_hold()) {
            (Some(n), _) => format!("for {} (it takes over at once)", named_text(Some(n))),
            (None, Some(op)) => format!(
                "held by operator {op} (force-vacate): no candidate takes over before one lease \
                 of no change"
            ),
            (None, None) => "none".to_owned(),
        }
    ));
    let payload = match (record.payload(), payload_text(record)) {
        (None, _) => "none".to_owned(),
        (Some(_), Some(text)) => text.to_owned(),
        (Some(bytes), None) => format!("0x{}", hex(bytes)),
    };
    out.push(format!("payload    {payload}"));
    out.push(format!(
        "config     lease {}, heartbeat {}, candidate timeout {}, elections {}, preemption {}, \
         version policy {}",
        show(config.lease_duration()),
        show(config.heartbeat_interval()),
        show(config.candidate_timeout()),
        on_off(config.election_enabled()),
        on_off(config.allow_preemption()),
        config.version_policy(),
    ));
    out.push(String::new());
    out.push(format!("candidates ({})", candidates.len()));
    if !candidates.is_empty() {
        let widest = |len: &dyn Fn(&CandidateInfo) -> usize, min: usize| {
            candidates.iter().map(len).max().unwrap_or(0).max(min)
        };
        let version = |c: &CandidateInfo| {
            c.record
                .version()
                .map_or_else(|| "-".to_owned(), ToString::to_string)
        };
        let width = widest(&|c| c.id.as_str().len(), 2);
        let vwidth = widest(&|c| version(c).len(), "VERSION".len());
        let awidth = widest(
            &|c| age_text(config, renewal_lag(record, c)).len(),
            "AGE".len(),
        );
        out.push(format!(
            "  {:<width$}  {:>8}  {:<vwidth$}  {:>4}  {:>9}  {:>3}  {:>awidth$}  {:<6}  {:<8}",
            "ID", "PRIORITY", "VERSION", "LIVE", "HEARTBEAT", "LAG", "AGE", "POLICY", "ELIGIBLE"
        ));
        for c in candidates {
            let leader = if record.owner().is_some_and(|o| o.id() == &c.id) {
                "  leader"
            } else {
                ""
            };
            let eligible = match c.record.eligibility().reason() {
                None => "yes".to_owned(),
                Some(reason) => format!("no ({reason})"),
            };
            out.push(format!(
                "  {:<width$}  {:>8}  {:<vwidth$}  {:>4}  {:>9}  {:>3}  {:>awidth$}  {:<6}  {:<8}{leader}",
                c.id.as_str(),
                c.record.priority().get(),
                version(c),
                if c.live { "yes" } else { "no" },
                c.record.heartbeat(),
                renewal_lag(record, c),
                age_text(config, renewal_lag(record, c)),
                if c.policy_allows { "yes" } else { "no" },
                eligible,
            ));
        }
        out.push(format!(
            "LAG: leader renewals since the candidate's last heartbeat (no clocks compared); live means at most {}",
            config.renewals_before_dead()
        ));
        out.push(format!(
            "AGE: its last heartbeat, about LAG heartbeats ({}) ago; a candidate that missed two shows ~{} or more, yet stays LIVE, and a resign may reserve for it: if it is gone, its successor waits the reservation timeout ({}); `resign --to NAME|ID` names one that heartbeats",
            show(config.heartbeat_interval()),
            show(heartbeat_age(config, 2)),
            show(config.reservation_timeout()),
        ));
        out.push(format!(
            "POLICY: whether the version policy ({}) lets it take the leadership: no live eligible candidate other than the leader runs a version the policy ranks ahead",
            config.version_policy()
        ));
    }
    if !marks.is_empty() {
        out.push(String::new());
        out.push(format!("excluded by operators ({})", marks.len()));
        for (name, e) in marks {
            out.push(format!(
                "  {name}: {} (lift with {})",
                e.reason().unwrap_or("excluded"),
                ctx.suggest(&["eligible", name, "true"])
            ));
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use fdb_leader_election::{Candidate, CandidateId, ElectionError, MemDb, Priority, Version};

    use super::*;
    use crate::cli::StoreChoice;

    #[tokio::test]
    async fn json_and_text_show_the_leader_the_lease_and_the_candidates()
    -> Result<(), ElectionError> {
        let db = MemDb::new();
        let ctx = Ctx::new("jobs", &StoreChoice::Memory);
        let election = ctx.election.clone();
        let a = Candidate::new(CandidateId::random("a")?, Priority::new(5));
        a.set_payload(Some(b"10.0.0.1:7000".to_vec()))?;
        a.set_version(Some(Version::new(1, 4, 0)));
        let b = Candidate::new(CandidateId::random("b")?, Priority::new(1));
        b.set_eligible(false, "not ready: db down")?;
        let c = Candidate::new(CandidateId::random("c")?, Priority::new(1));
        c.set_version(Some(Version::parse("1.5.0-rc.1").map_err(|_| {
            ElectionError::InvalidId {
                reason: "a test version",
            }
        })?));
        db.run(|txn, _| {
            let (election, a, b, c) = (election.clone(), a.clone(), b.clone(), c.clone());
            async move {
                election.initialize(&txn).await?;
                election.register_candidate(&txn, &a).await?;
                election.register_candidate(&txn, &b).await?;
                election.register_candidate(&txn, &c).await?;
                election
                    .set_eligible(&txn, "gone", false, "disk replacement")
                    .await
                    .map(|_| ())
            }
        })
        .await?;
        let cycle = |who: &Candidate| {
            let (election, who) = (election.clone(), who.clone());
            let db = db.clone();
            async move {
                let cycle = db
                    .run(|txn, _| {
                        let (election, who) = (election.clone(), who.clone());
                        async move { election.run_election_cycle(&txn, &who).await }
                    })
                    .await?;
                Ok::<_, ElectionError>(who.adopt(cycle))
            }
        };
        assert!(cycle(&a).await?.is_leader());
        let read = || {
            let (election, db) = (election.clone(), db.clone());
            async move {
                db.run(|txn, _| {
                    let election = election.clone();
                    async move {
                        Ok::<_, ElectionError>((
                            election.read_config(&txn).await?,
                            election.leader_record(&txn).await?,
                            election.list_candidates(&txn).await?,
                            Notes {
                                marks: election
                                    .eligibility_marks(&txn)
                                    .await?
                                    .into_iter()
                                    .collect(),
                                refusal: election.resign_refusal(&txn).await?,
                            },
                        ))
                    }
                })
                .await
            }
        };
        let (config, record, candidates, notes) = read().await?;

        let j = to_json(&ctx, &config, &record, &candidates, &notes);
        assert_eq!(j["leader"], json!(a.id().as_str()));
        assert_eq!(j["leader_version"], json!("1.4.0"));
        assert_eq!(j["ballot"], json!(1));
        assert_eq!(j["lease_state"], json!("owned"));
        assert_eq!(j["payload"], json!("10.0.0.1:7000"));
        assert_eq!(j["payload_hex"], json!(hex(b"10.0.0.1:7000")));
        assert_eq!(j["reserved_for"], Value::Null);
        assert_eq!(j["resign_refusal"], Value::Null);
        assert_eq!(j["config"]["version_policy"], json!("ignore"));
        let list = j["candidates"].as_array().cloned().unwrap_or_default();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0]["id"], json!(a.id().as_str()));
        assert_eq!(list[0]["priority"], json!(5));
        assert_eq!(list[0]["leader"], json!(true));
        assert_eq!(list[1]["priority"], json!(1));
        assert_eq!(list[1]["live"], json!(true));
        // b registered before the renewal a's cycle wrote: one renewal behind, about one
        // heartbeat (3 s) ago; a heartbeated with its renewal.
        assert_eq!(list[1]["renewal_lag"], json!(1));
        assert_eq!(list[1]["heartbeat_age_ms"], json!(3000));
        assert_eq!(list[0]["heartbeat_age_ms"], json!(0));
        // Each candidate's eligibility and reason; the operators' marks by name.
        assert_eq!(list[0]["eligible"], json!(true));
        assert_eq!(list[0]["eligibility_reason"], Value::Null);
        assert_eq!(list[1]["eligible"], json!(false));
        assert_eq!(list[1]["eligibility_reason"], json!("not ready: db down"));
        // Each candidate's version (none for b).
        assert_eq!(list[0]["version"], json!("1.4.0"));
        assert_eq!(list[1]["version"], Value::Null);
        assert_eq!(list[2]["version"], json!("1.5.0-rc.1"));
        assert_eq!(
            j["eligibility_marks"],
            json!([{ "name": "gone", "reason": "disk replacement" }])
        );

        let t = to_text(&ctx, &config, &record, &candidates, &notes);
        assert!(t.contains("no (not ready: db down)"), "{t}");
        assert!(
            t.contains("excluded by operators (1)\n  gone: disk replacement (lift with `fdb-leader --memory --election jobs eligible gone true`)"),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "leader     {} (priority 5, version 1.4.0)",
                a.id()
            )),
            "{t}"
        );
        assert!(t.contains("lease      owned, renewal 1, lease 10s"), "{t}");
        assert!(t.contains(", version policy ignore"), "{t}");
        assert!(t.contains("candidates (3)"), "{t}");
        assert!(t.contains("  VERSION     LIVE"), "{t}");
        assert!(t.contains("  1.4.0       "), "{t}");
        assert!(t.contains("  1.5.0-rc.1  "), "{t}");
        assert!(t.contains("  leader"), "{t}");
        assert!(!t.contains("refused"), "{t}");
        // AGE: within the last heartbeat for the leader, about one heartbeat for b.
        let row = |id: &CandidateId, t: &str| {
            t.lines()
                .find(|l| l.starts_with(&format!("  {id} ")))
                .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        assert!(t.contains(" LAG  AGE  POLICY"), "{t}");
        assert_eq!(
            row(a.id(), &t).get(6).map(String::as_str),
            Some("<3s"),
            "{t}"
        );
        assert_eq!(
            row(b.id(), &t).get(6).map(String::as_str),
            Some("~3s"),
            "{t}"
        );
        assert!(
            t.contains("AGE: its last heartbeat, about LAG heartbeats (3s) ago; a candidate that missed two shows ~6s or more"),
            "{t}"
        );
        // b stops heartbeating (killed): two more renewals, and it shows ~9s, still live.
        assert!(cycle(&a).await?.is_leader() && cycle(&a).await?.is_leader());
        let (config, record, candidates, notes) = read().await?;
        let t = to_text(&ctx, &config, &record, &candidates, &notes);
        assert_eq!(
            row(b.id(), &t).get(3).map(String::as_str),
            Some("yes"),
            "{t}"
        );
        assert_eq!(
            row(b.id(), &t).get(6).map(String::as_str),
            Some("~9s"),
            "{t}"
        );

        // A directed resign to c, which leaves before the leader reads it: the leader keeps
        // leading, and status says why, for this leadership only.
        let operator = CandidateId::random("op")?;
        db.run(|txn, _| {
            let (election, operator) = (election.clone(), operator.clone());
            async move {
                election
                    .request_resign_to(&txn, &operator, fdb_leader_election::Ballot::new(1), "c")
                    .await
            }
        })
        .await?;
        db.run(|txn, _| {
            let (election, c) = (election.clone(), c.clone());
            async move { election.unregister_candidate(&txn, &c).await }
        })
        .await?;
        assert!(cycle(&a).await?.is_leader());
        let (config, record, candidates, notes) = read().await?;
        let j = to_json(&ctx, &config, &record, &candidates, &notes);
        let refusal = &j["resign_refusal"];
        assert_eq!(refusal["ballot"], json!(1));
        assert_eq!(refusal["to"], json!("c"));
        assert_eq!(refusal["operator"], json!(operator.as_str()));
        assert!(
            refusal["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{j}"
        );
        let t = to_text(&ctx, &config, &record, &candidates, &notes);
        assert!(
            t.contains(&format!(
                "refused    resign --to c (operator {operator}): {}; the leader keeps leading",
                refusal["reason"].as_str().unwrap_or_default()
            )),
            "{t}"
        );
        // Once the leadership changed (a resigned, then acquired ballot 2), it is history.
        db.run(|txn, _| {
            let (election, a) = (election.clone(), a.clone());
            async move { election.resign_leadership(&txn, &a, None).await }
        })
        .await?;
        let (_, record, _, notes) = read().await?;
        assert!(pending_refusal(&record, notes.refusal.as_ref()).is_none());
        assert!(cycle(&a).await?.is_leader());
        let (config, record, candidates, notes) = read().await?;
        assert_eq!(record.ballot().get(), 2);
        assert!(notes.refusal.is_some());
        let j = to_json(&ctx, &config, &record, &candidates, &notes);
        assert_eq!(j["resign_refusal"], Value::Null);
        assert!(!to_text(&ctx, &config, &record, &candidates, &notes).contains("refused"));
        Ok(())
    }

    #[test]
    fn hex_is_lowercase_pairs() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
    }
}
