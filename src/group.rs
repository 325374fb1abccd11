//! Group commit: concurrent appends and forks on a store this process owns are written
//! in one storage commit per batch, as databases do.
//!
//! A writer prepares its change under the write lock, exactly as if alone (the same
//! checks, the same reads, so the same errors and indices), queues it and releases the
//! lock, so the next writer prepares while earlier changes are committed. Whichever
//! queued writer finds no commit running becomes the leader: it takes every queued
//! change, commits them as one, brings the read cache and the record index up to date,
//! and wakes the others. A writer is answered only after the commit holding its change,
//! so no acknowledged write can be lost to a failed batch.
//!
//! Preparing reads only committed state, so a change is never prepared against one that
//! is still queued: a writer whose sessions (its keys) have a queued or committing
//! change waits for that batch first, and writes with no keys (deletes, detaches,
//! imports, updates) wait until nothing is queued and commit alone. Queued changes only
//! insert, so their order within a batch cannot matter.

use crate::error::{Error, Result};
use crate::storage::Change;
use crate::store::{Effects, Store};
use oxigraph::model::NamedNode;
use std::collections::HashMap;
use std::sync::MutexGuard;

/// What is queued or being committed.
#[derive(Default)]
pub(crate) struct Group {
    queue: Vec<Queued>,
    committing: bool,
    next_ticket: u64,
    /// Results of committed batches, until their writers pick them up.
    done: HashMap<u64, Result<()>>,
    /// Queued or committing changes per session IRI.
    busy: HashMap<String, usize>,
}

struct Queued {
    ticket: u64,
    keys: Vec<NamedNode>,
    change: Change,
    effects: Effects,
}

impl Group {
    fn is_busy(&self, keys: &[NamedNode]) -> bool {
        if keys.is_empty() {
            return self.committing || !self.queue.is_empty();
        }
        keys.iter().any(|k| self.busy.contains_key(k.as_str()))
    }
}

impl Store {
    fn group(&self) -> MutexGuard<'_, Group> {
        self.group.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until no queued or committing change touches `keys` (any change, when
    /// `keys` is empty), leading batch commits meanwhile if no one else does. Called
    /// holding nothing but, for an empty `keys`, the write lock (no change can be
    /// queued then, so the wait ends).
    pub(crate) fn settle(&self, keys: &[NamedNode]) {
        let mut group = self.group();
        while group.is_busy(keys) {
            group = self.lead_or_wait(group);
        }
    }

    /// Leads a commit of what is queued if no one is committing; else waits for the
    /// running one to end.
    fn lead_or_wait<'g>(&'g self, group: MutexGuard<'g, Group>) -> MutexGuard<'g, Group> {
        if !group.committing && !group.queue.is_empty() {
            self.lead(group)
        } else {
            self.group_done
                .wait(group)
                .unwrap_or_else(|p| p.into_inner())
        }
    }

    /// Whether a write on `keys` must wait for queued changes before it prepares.
    pub(crate) fn must_settle(&self, keys: &[NamedNode]) -> bool {
        self.group().is_busy(keys)
    }

    /// Queues a prepared change (the write lock is held) and returns its ticket.
    pub(crate) fn enqueue(&self, keys: Vec<NamedNode>, change: Change, effects: Effects) -> u64 {
        debug_assert!(change.drop_graphs.is_empty() && change.removes.is_empty());
        let mut group = self.group();
        let ticket = group.next_ticket;
        group.next_ticket += 1;
        for key in &keys {
            *group.busy.entry(key.as_str().to_string()).or_default() += 1;
        }
        group.queue.push(Queued {
            ticket,
            keys,
            change,
            effects,
        });
        ticket
    }

    /// Waits for the batch holding `ticket` to be committed (leading it, if no one
    /// else is committing) and returns its outcome.
    pub(crate) fn committed(&self, ticket: u64) -> Result<()> {
        let mut group = self.group();
        loop {
            if let Some(result) = group.done.remove(&ticket) {
                return result;
            }
            group = self.lead_or_wait(group);
        }
    }

    /// Commits every queued change as one, then answers their writers.
    fn lead<'g>(&'g self, mut group: MutexGuard<'g, Group>) -> MutexGuard<'g, Group> {
        let batch = std::mem::take(&mut group.queue);
        group.committing = true;
        drop(group);
        let tickets: Vec<u64> = batch.iter().map(|q| q.ticket).collect();
        let mut keys = Vec::with_capacity(batch.len());
        let mut effects = Vec::with_capacity(batch.len());
        let mut change = Change::default();
        for q in batch {
            change.inserts.extend(q.change.inserts);
            effects.push(q.effects);
            keys.push(q.keys);
        }
        // If the commit panics, `finish` still answers the batch's writers (an error).
        let finish = Finish {
            store: self,
            tickets,
            keys,
        };
        let outcome = self.write_through(change, &effects);
        finish.answer(outcome)
    }
}

/// Answers a batch's writers and frees its sessions, even on a panic.
struct Finish<'a> {
    store: &'a Store,
    tickets: Vec<u64>,
    keys: Vec<Vec<NamedNode>>,
}

impl<'a> Finish<'a> {
    fn answer(mut self, outcome: Result<()>) -> MutexGuard<'a, Group> {
        let group = self.release(outcome);
        // Answered: nothing left for `drop` to do.
        self.tickets.clear();
        group
    }

    fn release(&self, outcome: Result<()>) -> MutexGuard<'a, Group> {
        let mut group = self.store.group();
        let mut outcome = Some(outcome);
        for (i, ticket) in self.tickets.iter().enumerate() {
            let result = match (&outcome, self.tickets.len()) {
                // Alone in its batch, a writer gets the error itself.
                (_, 1) => outcome.take().expect("one writer"),
                (Some(Ok(())), _) => Ok(()),
                (Some(Err(e)), n) => Err(Error::Io {
                    context: format!("the group commit of {n} writes failed"),
                    source: std::io::Error::other(e.to_string()),
                }),
                (None, _) => unreachable!("taken only when alone"),
            };
            group.done.insert(*ticket, result);
            for key in &self.keys[i] {
                if let Some(n) = group.busy.get_mut(key.as_str()) {
                    *n -= 1;
                    if *n == 0 {
                        group.busy.remove(key.as_str());
                    }
                }
            }
        }
        group.committing = false;
        self.store.group_done.notify_all();
        group
    }
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        if self.tickets.is_empty() {
            return;
        }
        drop(self.release(Err(Error::Io {
            context: "the group commit stopped".into(),
            source: std::io::Error::other("a panic while committing"),
        })));
    }
}
