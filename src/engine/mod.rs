//! The engine: what forktrail does with sessions, on a [`Store`](crate::Store). Reads
//! (`read.rs`: facts, chains, load, replay, trees; `listing.rs`: pages and search;
//! `verify.rs`: the audit; `diff.rs`, `anchor.rs`, `summary.rs`) never write; writes
//! (`write.rs`: create, append, pop, fork, detach, delete; `merge.rs`: merge-back and
//! `SessionWriter`) validate everything, then commit one transaction. `demo.rs` builds
//! the sample tree.

pub(crate) mod anchor;
pub mod demo;
pub(crate) mod diff;
pub(crate) mod listing;
pub(crate) mod merge;
pub(crate) mod read;
pub(crate) mod summary;
pub(crate) mod verify;
pub(crate) mod write;
