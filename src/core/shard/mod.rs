//! Sharded leadership (docs/design.md §12): M shards, one owner and one fencing token each, owned by
//! live members under one lease per member. The pure parts: placement.

pub(crate) mod budget;
pub(crate) mod coordinator;
pub(crate) mod leave;
pub(crate) mod machine;
pub(crate) mod member;
mod member_cycle;
pub(crate) mod operator;
pub mod placement;
pub(crate) mod steps;

#[cfg(test)]
mod coordinator_plan_tests;
#[cfg(test)]
mod coordinator_tests;
#[cfg(test)]
mod member_limits_tests;
#[cfg(test)]
mod member_tests;
#[cfg(test)]
mod tests;
