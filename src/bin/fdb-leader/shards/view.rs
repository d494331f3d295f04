//! `shards status`: one observation of a sharded election, as compact text or one JSON object.

use std::collections::{BTreeMap, BTreeSet};

use fdb_leader_election::CandidateId;
use fdb_leader_election::shard::placement::{Placement, PlacementStep};
use fdb_leader_election::shard::{Assignments, Layout, MemberRecord, ShardAssignment};
use serde_json::{Value, json};

use crate::durations::millis_json;
use crate::store::{Ctx, SHARDS_SUFFIX, SUBSPACE_PREFIX};

/// What one transaction read of a sharded election.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) layout: Layout,
    /// Whether the stored configuration enables elections.
    pub(crate) elections: bool,
    /// Every member's record, fenced-out members included.
    pub(crate) members: BTreeMap<CandidateId, MemberRecord>,
    /// The members an operator drained (some may never have joined).
    pub(crate) drained: BTreeSet<CandidateId>,
    pub(crate) assignments: Assignments,
    /// The placement as the records show it now (every member not fenced out counted live).
    pub(crate) placement: Placement,
}

/// How many of each kind of step placement would write next.
#[derive(Debug, Default, PartialEq, Eq)]
struct Steps {
    moves: usize,
    reservations: usize,
    withdrawals: usize,
}

impl Snapshot {
    fn owned(&self, id: &CandidateId) -> usize {
        self.assignments.counts().get(id).copied().unwrap_or(0)
    }

    fn quota(&self, id: &CandidateId) -> Option<u32> {
        self.placement.quotas.get(id).copied()
    }

    fn moves_in_flight(&self) -> usize {
        self.shards().filter(|a| a.moving_to.is_some()).count()
    }

    fn reservations(&self) -> usize {
        self.shards().filter(|a| a.reserved_for.is_some()).count()
    }

    fn shards(&self) -> impl Iterator<Item = &ShardAssignment> {
        self.assignments.shards().iter()
    }

    /// Shards whose owner is not placement's target: what balance still needs to move.
    fn misplaced(&self) -> usize {
        self.shards()
            .filter(|a| {
                let index = usize::try_from(a.shard.get()).unwrap_or(usize::MAX);
                let target = self.placement.targets.get(index).and_then(Option::as_ref);
                a.owner.as_ref() != target
            })
            .count()
    }

    fn steps(&self) -> Steps {
        let mut steps = Steps::default();
        for step in &self.placement.steps {
            let n = match step {
                PlacementStep::Move { .. } => &mut steps.moves,
                PlacementStep::Reserve { .. } => &mut steps.reservations,
                _ => &mut steps.withdrawals,
            };
            *n = n.saturating_add(1);
        }
        steps
    }

    /// Drained members that have no record (drained before they ever joined).
    fn drained_not_joined(&self) -> Vec<&CandidateId> {
        self.drained
            .iter()
            .filter(|id| !self.members.contains_key(*id))
            .collect()
    }
}

/// `["fdb-leader", NAME, "shards"]`.
fn subspace_json(ctx: &Ctx) -> Value {
    json!([SUBSPACE_PREFIX, ctx.name, SHARDS_SUFFIX])
}

fn id_json(id: Option<&CandidateId>) -> Value {
    id.map_or(Value::Null, |id| Value::from(id.as_str()))
}

/// The object `shards status --json` prints.
pub(crate) fn to_json(ctx: &Ctx, s: &Snapshot) -> Value {
    let members: Vec<Value> = s
        .members
        .iter()
        .map(|(id, r)| {
            json!({
                "id": id.as_str(),
                "epoch": r.epoch(),
                "renewal": r.renewal(),
                "priority": r.priority().get(),
                "weight": r.weight().get(),
                "drained": s.drained.contains(id),
                "fenced": r.is_fenced(),
                "lease_ms": millis_json(r.lease_duration()),
                "owned": s.owned(id),
                "quota": s.quota(id),
            })
        })
        .collect();
    let shards: Vec<Value> = s
        .shards()
        .map(|a| {
            json!({
                "shard": a.shard.get(),
                "owner": id_json(a.owner.as_ref()),
                "ballot": a.ballot.get(),
                "moving_to": id_json(a.moving_to.as_ref()),
                "reserved_for": id_json(a.reserved_for.as_ref()),
            })
        })
        .collect();
    let steps = s.steps();
    json!({
        "election": ctx.name,
        "store": ctx.store,
        "subspace": subspace_json(ctx),
        "layout": {
            "shards": s.layout.shards(),
            "max_concurrent_moves": s.layout.max_concurrent_moves(),
            "frozen": s.layout.is_frozen(),
        },
        "elections": s.elections,
        "owned": s.shards().filter(|a| a.owner.is_some()).count(),
        "vacant": s.assignments.vacant(),
        "moves_in_flight": s.moves_in_flight(),
        "reservations": s.reservations(),
        "placement": {
            "misplaced": s.misplaced(),
            "next_moves": steps.moves,
            "next_reservations": steps.reservations,
            "withdrawals": steps.withdrawals,
            "deferred_moves": s.placement.deferred_moves,
        },
        "drained": s.drained.iter().map(CandidateId::as_str).collect::<Vec<_>>(),
        "members": members,
        "shards": shards,
    })
}

/// `0-3`, or `4` for a run of one.
fn span(first: u32, last: u32) -> String {
    if first == last {
        first.to_string()
    } else {
        format!("{first}-{last}")
    }
}

/// Consecutive shards with the same owner and ballot and nothing in flight, as one row:
/// `(first, last, assignment of the first)`.
fn runs(shards: &[ShardAssignment]) -> Vec<(u32, u32, &ShardAssignment)> {
    let mut out: Vec<(u32, u32, &ShardAssignment)> = Vec::new();
    for a in shards {
        let quiet = a.moving_to.is_none() && a.reserved_for.is_none();
        if let Some((_, last, head)) = out.last_mut() {
            let joins = quiet
                && head.moving_to.is_none()
                && head.reserved_for.is_none()
                && head.owner == a.owner
                && head.ballot == a.ballot
                && last.checked_add(1) == Some(a.shard.get());
            if joins {
                *last = a.shard.get();
                continue;
            }
        }
        out.push((a.shard.get(), a.shard.get(), a));
    }
    out
}

/// The status as compact text: a summary, the members, and the shards (consecutive shards
/// of one owner at one ballot on one line).
pub(crate) fn to_text(ctx: &Ctx, s: &Snapshot) -> String {
    let mut out = Vec::new();
    out.push(format!(
        "sharded election  {} ({}), subspace (\"{SUBSPACE_PREFIX}\", {:?}, \"{SHARDS_SUFFIX}\")",
        ctx.name, ctx.store, ctx.name
    ));
    let frozen = if s.layout.is_frozen() {
        "frozen (the coordinator moves nothing a live member holds; a dead member's shards still \
         fail over)"
    } else {
        "not frozen (the coordinator balances)"
    };
    out.push(format!(
        "layout     {} shards, at most {} moves in flight, placement {frozen}",
        s.layout.shards(),
        s.layout.max_concurrent_moves(),
    ));
    out.push(if s.elections {
        "elections  on".to_owned()
    } else {
        format!(
            "elections  off: members acquire nothing and give their shards back once their work \
             has stopped; the coordinator places nothing and still fences out members that \
             stop renewing ({} turns them on)",
            ctx.suggest(&["config", "set", "--sharded", "--elections", "on"])
        )
    });
    out.push(format!(
        "shards     {} owned, {} vacant, {} moving, {} reserved",
        s.shards().filter(|a| a.owner.is_some()).count(),
        s.assignments.vacant(),
        s.moves_in_flight(),
        s.reservations(),
    ));
    let steps = s.steps();
    let misplaced = s.misplaced();
    out.push(if misplaced == 0 && s.placement.steps.is_empty() {
        "placement  balanced".to_owned()
    } else {
        format!(
            "placement  off target {misplaced}; next: moves {}, reservations {}, withdrawals {}; \
             moves deferred {}",
            steps.moves, steps.reservations, steps.withdrawals, s.placement.deferred_moves
        )
    });
    out.push(String::new());
    out.push(format!("members ({})", s.members.len()));
    if !s.members.is_empty() {
        let width = s
            .members
            .keys()
            .map(|id| id.as_str().len())
            .max()
            .unwrap_or(0)
            .max(2);
        out.push(format!(
            "  {:<width$}  {:>5}  {:>8}  {:>7}  {:<6}  {:>5}  {:>5}",
            "ID", "EPOCH", "PRIORITY", "WEIGHT", "STATE", "OWNED", "QUOTA"
        ));
        for (id, r) in &s.members {
            let weight = if s.drained.contains(id) {
                "drained".to_owned()
            } else {
                r.weight().to_string()
            };
            out.push(format!(
                "  {:<width$}  {:>5}  {:>8}  {:>7}  {:<6}  {:>5}  {:>5}",
                id.as_str(),
                r.epoch(),
                r.priority().get(),
                weight,
                if r.is_fenced() { "fenced" } else { "live" },
                s.owned(id),
                s.quota(id)
                    .map_or_else(|| "-".to_owned(), |q| q.to_string()),
            ));
        }
        out.push(
            "STATE: live means not fenced out (one observation cannot tell a live member from a \
             crashed one; the coordinator fences a member out a lease after its last renewal)"
                .to_owned(),
        );
    }
    let waiting = s.drained_not_joined();
    if !waiting.is_empty() {
        let ids: Vec<&str> = waiting.iter().map(|id| id.as_str()).collect();
        out.push(format!("drained, not joined: {}", ids.join(", ")));
    }
    out.push(String::new());
    out.push(format!("shards ({})", s.layout.shards()));
    let width = s
        .shards()
        .filter_map(|a| a.owner.as_ref())
        .map(|id| id.as_str().len())
        .max()
        .unwrap_or(0)
        .max(5);
    out.push(format!(
        "  {:<11}  {:>6}  {:<width$}  NOTE",
        "SHARDS", "BALLOT", "OWNER"
    ));
    for (first, last, a) in runs(s.assignments.shards()) {
        let note = match (&a.moving_to, &a.reserved_for) {
            (Some(to), _) => format!("moving to {to}"),
            (None, Some(holder)) => format!("reserved for {holder}"),
            (None, None) => String::new(),
        };
        let owner = a.owner.as_ref().map_or("vacant", CandidateId::as_str);
        let line = format!(
            "  {:<11}  {:>6}  {owner:<width$}  {note}",
            span(first, last),
            a.ballot.get(),
        );
        out.push(line.trim_end().to_owned());
    }
    out.join("\n")
}
