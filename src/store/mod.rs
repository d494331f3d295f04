//! The store layer: what the election needs from a database, and the machinery the embedded
//! stores share.
//!
//! The election is written against two traits, both here: [`ElectionTxn`](txn::ElectionTxn)
//! (one transaction: reads, writes, conflict keys, watches) and
//! [`ElectionDatabase`](database::ElectionDatabase) (run a transaction with the store's retry
//! loop, within a time bound). Three stores implement them: [`MemDb`](crate::MemDb), the
//! SQLite store (feature `sqlite`) and FoundationDB (feature `fdb`).
//!
//! MemDb and SQLite differ only in where committed data lives and how a commit is checked and
//! applied; everything a transaction does on the client side is one implementation, here:
//!
//! - [`buffer`]: buffered writes, the read-your-writes overlay, the read-conflict set, size
//!   accounting, pending watches and per-transaction counts;
//! - [`retry`]: FoundationDB's retry loop (`MemDb::run`, `SqliteDb::run`);
//! - [`size`]: a transaction's size as FoundationDB counts it;
//! - [`database`]: the attempt/timeout wrapper behind both stores' `ElectionDatabase`;
//! - [`stats`]: the database-wide counters;
//! - [`watch`]: the per-database limit on outstanding watches;
//! - [`errors`]: the errors both stores report, with FoundationDB's codes;
//! - [`limits`]: FoundationDB's limits on keys, values, transactions and watches, and their errors.
//!
//! [`fdb_codes`] holds every decision the FoundationDB adapter makes about an error (its kind,
//! whether it may have committed, whether to retry it) as plain functions of the error code,
//! so they are tested without `libfdb_c`; MemDb's injected faults use the same functions.

pub(crate) mod buffer;
pub(crate) mod database;
pub(crate) mod errors;
pub(crate) mod fdb_codes;
pub(crate) mod limits;
pub(crate) mod retry;
pub(crate) mod size;
pub(crate) mod stats;
pub(crate) mod txn;
pub(crate) mod watch;
