//! `in_txn!`: one transaction run by a store's `run` loop (MemDb, SQLite), with the values it
//! needs cloned into each attempt. The tests wrote that loop out, seven lines a call, about a
//! hundred times. Included through the support modules, or by path
//! (`#[path = "common/txn.rs"] mod txn;`), then `use txn::in_txn;`.
#![allow(unused_macros, unused_imports)]

/// `in_txn!(db, [e, c = candidate], |txn| e.register_candidate(&txn, &c).await)` is
///
/// ```ignore
/// db.run(|txn, _| {
///     let (e, c) = (e.clone(), candidate.clone());
///     async move { e.register_candidate(&txn, &c).await }
/// })
/// .await
/// ```
///
/// the result unchanged (the caller unwraps or matches it).
macro_rules! in_txn {
    ($db:expr, [$($name:ident $(= $from:expr)?),* $(,)?], |$txn:ident| $body:expr) => {
        $db.run(|$txn, _| {
            $(let $name = (in_txn!(@from $name $(, $from)?)).clone();)*
            async move { $body }
        })
        .await
    };
    (@from $name:ident) => {
        $name
    };
    (@from $name:ident, $from:expr) => {
        $from
    };
}

pub(crate) use in_txn;
