//! The variables `run` gives its child and hooks (and, under `run --shards`, each shard's
//! child): they tell the process what it runs for. None of them is the variable of a flag
//! (`FDB_LEADER_` and the flag's name, `FDB_LEADER_CONFIG_*`, `FDB_LEADER_SHARDS_*`), so an
//! `fdb-leader` started inside the child is not configured by them: `run --shards` once gave
//! each child `FDB_LEADER_SHARDS`, the variable of `run --shards`, and a nested
//! `fdb-leader --election solo run --try -- true` was refused (or, without `--try`, joined a
//! sharded election). The command line's unit tests check every flag's variable against
//! `ALL` (in test builds).

/// The ballot: the fencing token of the leadership (of the shard's ownership, per shard).
pub(crate) const BALLOT: &str = "FDB_LEADER_BALLOT";
/// This process's candidate (member) id.
pub(crate) const ID: &str = "FDB_LEADER_ID";
/// The election's name (`--election`, whose own variable is `FDB_LEADER_ELECTION`).
pub(crate) const ELECTION_NAME: &str = "FDB_LEADER_ELECTION_NAME";
/// The shard the child works for, `0` to `M − 1` (`run --shards`).
pub(crate) const SHARD: &str = "FDB_LEADER_SHARD";
/// The sharded election's shard count `M` (`run --shards`, whose own variable is
/// `FDB_LEADER_SHARDS`).
pub(crate) const SHARD_COUNT: &str = "FDB_LEADER_SHARD_COUNT";

/// Every variable `run` sets for its children (the unit tests check each flag's against it).
#[cfg(test)]
pub(crate) const ALL: [&str; 5] = [BALLOT, ID, ELECTION_NAME, SHARD, SHARD_COUNT];
