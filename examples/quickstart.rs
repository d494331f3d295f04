//! The crate's main demo, on the embedded MemDb with a simulated clock (it runs instantly):
//!
//! 1. three candidates elect a leader;
//! 2. the leader crashes (its process is frozen, not gone) and another takes over after a full
//!    lease of unchanged observation, with the next ballot;
//! 3. the frozen ex-leader wakes up and tries a fenced write with its old ballot: rejected;
//! 4. a higher-priority candidate joins and leadership is handed over cooperatively.
//!
//! At every simulated instant it checks that no two candidates believe they lead.
//!
//! Run it with `cargo run --example quickstart`.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use fdb_leader_election::{
    Action, Ballot, Candidate, CandidateId, Clock, ElectionConfig, ElectionError, ElectionTxn,
    LeaderElection, ManualClock, MemDb, Priority, ReadMode,
};
use foundationdb_tuple::Subspace;

struct Node {
    name: &'static str,
    candidate: Candidate,
    alive: bool,
}

struct Demo {
    db: MemDb,
    election: LeaderElection,
    clock: ManualClock,
    nodes: Vec<Node>,
    overlaps: u32,
    acquired: u32,
}

impl Demo {
    fn say(&self, what: impl AsRef<str>) {
        let t = self.clock.now().since_origin().as_secs_f64();
        println!("t={t:>7.3}s  {}", what.as_ref());
    }

    fn node(&self, name: &str) -> Result<&Node, Box<dyn Error>> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .ok_or_else(|| format!("no node {name}").into())
    }

    async fn join(&mut self, name: &'static str, priority: i32) -> Result<(), Box<dyn Error>> {
        let id = CandidateId::random(name)?;
        let candidate =
            Candidate::with_clock(id, Priority::new(priority), Arc::new(self.clock.clone()));
        candidate.set_payload(Some(format!("{name}.internal:7000").into_bytes()))?;
        self.db
            .run(|txn, _| {
                let (e, c) = (self.election.clone(), candidate.clone());
                async move { e.register_candidate(&txn, &c).await }
            })
            .await?;
        self.say(format!("{name} registered with priority {priority}"));
        self.nodes.push(Node {
            name,
            candidate,
            alive: true,
        });
        Ok(())
    }

    /// One cycle of every live node, narrating what changed.
    async fn heartbeat(&mut self) -> Result<(), Box<dyn Error>> {
        for i in 0..self.nodes.len() {
            if !self.nodes[i].alive {
                continue;
            }
            let candidate = self.nodes[i].candidate.clone();
            // One cycle in a transaction of its own, adopted only once its commit is confirmed.
            let outcome = self.election.run_cycle(&self.db, &candidate).await?;
            let (action, ballot) = (outcome.action, outcome.record.ballot());
            let name = self.nodes[i].name;
            match action {
                Action::Acquired => {
                    self.acquired = self.acquired.saturating_add(1);
                    self.say(format!("{name} is leader with ballot {ballot}"));
                }
                Action::RequestedHandover => self.say(format!(
                    "{name} outranks the leader and asks it to hand over (ballot {ballot} keeps running)"
                )),
                Action::HandedOver => self.say(format!(
                    "{name} stops leader work, then steps down, reserving ballot {} for the requester",
                    ballot.get().saturating_add(1)
                )),
                _ => {}
            }
            self.check_overlap();
        }
        Ok(())
    }

    fn check_overlap(&mut self) {
        let believers: Vec<&str> = self
            .nodes
            .iter()
            .filter(|n| n.candidate.believes_it_leads())
            .map(|n| n.name)
            .collect();
        if believers.len() > 1 {
            self.overlaps = self.overlaps.saturating_add(1);
            self.say(format!("OVERLAP: {believers:?} all believe they lead"));
        }
    }

    /// Advances simulated time in small steps, checking for overlap at each.
    fn pass(&mut self, d: Duration) {
        let step = Duration::from_millis(100);
        let mut left = d;
        while !left.is_zero() {
            let s = step.min(left);
            self.clock.advance(s);
            left = left.saturating_sub(s);
            self.check_overlap();
        }
    }

    async fn fenced_job(&self, name: &str, token: Ballot) -> Result<u64, ElectionError> {
        self.db
            .run(|txn, _| {
                let e = self.election.clone();
                let who = name.to_owned();
                async move {
                    e.fence(&txn, token).await?;
                    let done = txn
                        .get(b"jobs/done", ReadMode::Serializable)
                        .await?
                        .and_then(|v| v.try_into().ok())
                        .map(u64::from_le_bytes)
                        .unwrap_or(0)
                        .saturating_add(1);
                    txn.set(b"jobs/done", &done.to_le_bytes());
                    txn.set(b"jobs/last_writer", who.as_bytes());
                    Ok(done)
                }
            })
            .await
    }

    fn leader(&self) -> Option<&Node> {
        self.nodes.iter().find(|n| n.candidate.believes_it_leads())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let config = ElectionConfig::default();
    let mut demo = Demo {
        db: MemDb::new(),
        election: LeaderElection::new(Subspace::from("quickstart")),
        clock: ManualClock::new(),
        nodes: Vec::new(),
        overlaps: 0,
        acquired: 0,
    };
    println!(
        "fdb-leader-election quickstart: MemDb, simulated clock; lease {:?}, heartbeat {:?}, ρ = {}%",
        config.lease_duration(),
        config.heartbeat_interval(),
        f64::from(config.max_clock_rate_error_ppm()) / 10_000.0
    );
    demo.db
        .run(|txn, _| {
            let (e, c) = (demo.election.clone(), config.clone());
            async move { e.initialize_with_config(&txn, &c).await }
        })
        .await?;

    // 1. Election.
    for name in ["node-a", "node-b", "node-c"] {
        demo.join(name, 1).await?;
    }
    demo.heartbeat().await?;
    let first = demo.leader().map(|n| n.name).ok_or("nobody was elected")?;
    let first_token = demo
        .node(first)?
        .candidate
        .fencing_token()
        .ok_or("no token")?;
    let done = demo.fenced_job(first, first_token).await?;
    demo.say(format!(
        "{first} assigns job #{done} under ballot {first_token} (fenced in the same transaction)"
    ));
    for _ in 0..2 {
        demo.pass(config.heartbeat_interval());
        demo.heartbeat().await?;
    }
    demo.say(format!("{first} renewed twice, still ballot {first_token}"));

    // 2. The leader freezes (a long GC pause, a stuck VM): it stops renewing.
    let belief_ends = demo
        .node(first)?
        .candidate
        .leadership()
        .map(|l| l.valid_until.since_origin().as_secs_f64())
        .ok_or("the leader does not believe it leads")?;
    for n in demo.nodes.iter_mut().filter(|n| n.name == first) {
        n.alive = false;
    }
    demo.say(format!(
        "{first} freezes mid-work holding ballot {first_token}; its own belief ends at t={belief_ends:.3}s \
         (lease x (1-rho)/(1+rho) after its last renewal began)"
    ));
    let before = demo.acquired;
    while demo.leader().is_none_or(|n| !n.alive) {
        demo.pass(config.heartbeat_interval());
        demo.heartbeat().await?;
    }
    let takeovers = demo.acquired.saturating_sub(before);
    let second = demo.leader().map(|n| n.name).ok_or("nobody took over")?;
    let second_token = demo
        .node(second)?
        .candidate
        .fencing_token()
        .ok_or("no token")?;
    demo.say(format!(
        "{second} took over: a full lease after it last saw {first}'s record change, on its own clock"
    ));
    let done = demo.fenced_job(second, second_token).await?;
    demo.say(format!(
        "{second} assigns job #{done} under ballot {second_token}"
    ));

    // 3. The frozen ex-leader wakes up and finishes the write it started.
    let mut rejected = 0u32;
    match demo.fenced_job(first, first_token).await {
        Err(ElectionError::StaleToken { token, current, .. }) => {
            rejected = rejected.saturating_add(1);
            demo.say(format!(
                "{first} wakes up and writes with ballot {token}: REJECTED, the election is at ballot {current}"
            ));
        }
        Err(e) => return Err(e.into()),
        Ok(_) => return Err("a stale write was accepted".into()),
    }

    // 4. A new version with a higher priority joins: cooperative handover.
    demo.pass(Duration::from_secs(1));
    demo.join("node-d", 5).await?;
    let before = demo.acquired;
    for _ in 0..3 {
        demo.heartbeat().await?;
        if demo.leader().map(|n| n.name) == Some("node-d") {
            break;
        }
        demo.pass(Duration::from_millis(100));
    }
    let handovers = demo.acquired.saturating_sub(before);
    let third = demo
        .leader()
        .map(|n| n.name)
        .ok_or("no leader after handover")?;
    let third_token = demo
        .node(third)?
        .candidate
        .fencing_token()
        .ok_or("no token")?;
    demo.say(format!(
        "{third} leads with ballot {third_token}: handed over in a few commits, no lease wait, no overlap"
    ));
    let old_second = second_token;
    if demo.fenced_job(second, old_second).await.is_err() {
        rejected = rejected.saturating_add(1);
        demo.say(format!(
            "{second}'s late write under ballot {old_second}: REJECTED"
        ));
    }

    let leader_payload = demo
        .db
        .run(|txn, _| {
            let e = demo.election.clone();
            async move { e.current_leader_unchecked(&txn).await }
        })
        .await?
        .and_then(|l| l.payload)
        .map(|p| String::from_utf8_lossy(&p).into_owned())
        .unwrap_or_default();
    demo.say(format!(
        "followers read the leader's address from the record: {leader_payload}"
    ));

    println!(
        "summary: ballots 1→{third_token}, elected={first} took_over={second} handed_over_to={third}, \
         takeovers={takeovers} handovers={handovers} stale_writes_rejected={rejected} overlaps={}",
        demo.overlaps
    );
    if demo.overlaps != 0 {
        return Err("two candidates believed they led at the same instant".into());
    }
    Ok(())
}
