//! The in-process read cache: session facts, session lengths and replay records.
//!
//! Everything here is derived from the store and can be dropped at any time. It is safe
//! because of what forktrail never does: a stored turn is never changed, a session's
//! lineage changes only through `detach`, and only `append` adds turns. So entries are
//! replaced by the writers that change them (under the write lock, after their commit),
//! dropped by `delete`, `detach`, `import` and SPARQL updates, and filled by readers.
//!
//! A reader that computed something from the store records it only if no entry was
//! dropped since it started reading (the epoch), so a slow reader cannot bring back an
//! entry of a session deleted (and perhaps re-created) meanwhile.
//!
//! On a shared store other processes write unseen, so only replay records are used
//! there, each run with a validator: the digest of its last turn, which a reader checks
//! against the store before it serves the run (see `Store::replay_shared`).

use crate::model::ReplayRecord;
use crate::rdf::SessionNode as Facts;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The default budget of cached replay records, in bytes of their text.
pub(crate) const DEFAULT_TURN_BUDGET: usize = 64 << 20;

/// The most sessions whose facts, lengths and heads are kept: past it they are all
/// dropped (they refill from the store), so that a store of a million sessions, listed
/// or imported, does not keep a million entries in memory.
const MAX_SESSIONS: usize = 1 << 16;

/// What one cached turn is charged beyond its text (the struct and its bookkeeping).
const TURN_OVERHEAD: usize = 160;

#[derive(Default)]
pub(crate) struct Cache {
    epoch: u64,
    /// Lineage facts by session IRI (their `length` field is not used).
    facts: HashMap<String, Facts>,
    lengths: HashMap<String, u64>,
    /// The digest of the last turn an append wrote, by session: the next append's
    /// predecessor.
    heads: HashMap<String, (u64, String)>,
    /// Replay records of a session's own turns, contiguous from its first own index.
    turns: HashMap<String, OwnTurns>,
    /// On a shared store: by session, the index and stored digest of the last cached
    /// turn. Digests chain over every earlier turn, so the store still holding that
    /// digest at that index shows the cached run is still the session's.
    validators: HashMap<String, (u64, String)>,
    /// Sessions in the order their turns were first cached, for eviction.
    order: VecDeque<String>,
    turn_bytes: usize,
    pub(crate) turn_budget: usize,
}

pub(crate) struct OwnTurns {
    start: u64,
    turns: Vec<Arc<ReplayRecord>>,
    bytes: usize,
}

fn cost(record: &ReplayRecord) -> usize {
    let extra = |v: &Option<String>| v.as_ref().map_or(0, String::len);
    TURN_OVERHEAD
        + record.content.len()
        + record.branch.len()
        + extra(&record.name)
        + extra(&record.tool_call_id)
        + extra(&record.tool_calls)
}

impl Cache {
    pub(crate) fn new(turn_budget: usize) -> Self {
        Self {
            turn_budget,
            ..Self::default()
        }
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    pub(crate) fn facts(&self, session: &str) -> Option<&Facts> {
        self.facts.get(session)
    }

    pub(crate) fn length(&self, session: &str) -> Option<u64> {
        self.lengths.get(session).copied()
    }

    /// Records facts and length a reader computed, if nothing was dropped since `epoch`.
    pub(crate) fn fill_facts(&mut self, epoch: u64, facts: &Facts) {
        if self.epoch == epoch {
            self.bound();
            let key = facts.iri.as_str();
            self.lengths.entry(key.to_string()).or_insert(facts.length);
            self.facts
                .entry(key.to_string())
                .or_insert_with(|| facts.clone());
        }
    }

    /// The cached turns of `session` from `from` on, at most `to - from` of them: the
    /// part of `from..to` the cache can answer, possibly empty.
    pub(crate) fn turns(&self, session: &str, from: u64, to: u64) -> &[Arc<ReplayRecord>] {
        let Some(own) = self.turns.get(session) else {
            return &[];
        };
        let Some(lo) = from.checked_sub(own.start) else {
            return &[];
        };
        let hi = to.saturating_sub(own.start).min(own.turns.len() as u64);
        own.turns.get(lo as usize..hi as usize).unwrap_or(&[])
    }

    /// Records turns `from..from + turns.len()` of `session` (whose own turns start at
    /// `own_start`) a reader decoded, if nothing was dropped since `epoch`, keeping what
    /// extends the cached run contiguously.
    pub(crate) fn fill_turns(
        &mut self,
        epoch: u64,
        session: &str,
        own_start: u64,
        from: u64,
        turns: &[Arc<ReplayRecord>],
    ) {
        if self.epoch != epoch {
            return;
        }
        let end = match self.turns.get(session) {
            Some(own) => own.start + own.turns.len() as u64,
            None => own_start,
        };
        let to = from + turns.len() as u64;
        if from <= end && end < to {
            self.push(session, own_start, &turns[(end - from) as usize..]);
        }
    }

    /// The last cached turn of `session` and its digest, if a shared-store reader
    /// recorded them for the cached run as it now ends.
    pub(crate) fn validator(&self, session: &str) -> Option<&(u64, String)> {
        let own = self.turns.get(session)?;
        let end = own.start + own.turns.len() as u64;
        self.validators
            .get(session)
            .filter(|(index, _)| index + 1 == end)
    }

    /// Records the digest of the turn that ends the cached run of `session`, if that
    /// run ends at `index` and nothing was dropped since `epoch`.
    pub(crate) fn validate(&mut self, epoch: u64, session: &str, index: u64, digest: String) {
        let ends_here = self
            .turns
            .get(session)
            .is_some_and(|own| own.start + own.turns.len() as u64 == index + 1);
        if self.epoch == epoch && ends_here {
            self.validators.insert(session.to_string(), (index, digest));
        }
    }

    /// The digest of turn `index - 1` of `session`, if an append recorded it.
    pub(crate) fn head_digest(&self, session: &str, index: u64) -> Option<String> {
        self.heads
            .get(session)
            .filter(|(at, _)| at + 1 == index)
            .map(|(_, digest)| digest.clone())
    }

    /// Records the turn an append just committed (under the write lock) and its digest.
    pub(crate) fn appended(&mut self, session: &str, turn: ReplayRecord, digest: String) {
        self.bound();
        self.lengths.insert(session.to_string(), turn.index + 1);
        self.heads.insert(session.to_string(), (turn.index, digest));
        // Extend cached turns only where they reach up to the new one.
        if let Some(own) = self.turns.get(session) {
            if own.start + own.turns.len() as u64 == turn.index {
                self.push(session, own.start, &[Arc::new(turn)]);
            }
        }
    }

    /// Drops facts, lengths and heads once they hold [`MAX_SESSIONS`] sessions.
    fn bound(&mut self) {
        if self
            .facts
            .len()
            .max(self.lengths.len())
            .max(self.heads.len())
            >= MAX_SESSIONS
        {
            self.facts.clear();
            self.lengths.clear();
            self.heads.clear();
        }
    }

    fn push(&mut self, session: &str, start: u64, turns: &[Arc<ReplayRecord>]) {
        let bytes: usize = turns.iter().map(|t| cost(t)).sum();
        if bytes > self.turn_budget {
            return;
        }
        while self.turn_bytes + bytes > self.turn_budget {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(own) = self.turns.remove(&oldest) {
                self.turn_bytes -= own.bytes;
            }
            self.validators.remove(&oldest);
            if oldest == session {
                // Its cached run is gone, so the new turns would not extend it.
                return;
            }
        }
        let own = self.turns.entry(session.to_string()).or_insert_with(|| {
            self.order.push_back(session.to_string());
            OwnTurns {
                start,
                turns: Vec::new(),
                bytes: 0,
            }
        });
        own.turns.extend(turns.iter().cloned());
        own.bytes += bytes;
        self.turn_bytes += bytes;
    }

    /// Drops everything known about `session`.
    pub(crate) fn forget(&mut self, session: &str) {
        self.epoch += 1;
        self.facts.remove(session);
        self.lengths.remove(session);
        self.heads.remove(session);
        self.validators.remove(session);
        if let Some(own) = self.turns.remove(session) {
            self.turn_bytes -= own.bytes;
            self.order.retain(|s| s != session);
        }
    }

    /// Drops everything.
    pub(crate) fn clear(&mut self) {
        let (budget, epoch) = (self.turn_budget, self.epoch);
        *self = Self::new(budget);
        self.epoch = epoch + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    fn records(from: u64, to: u64) -> Vec<Arc<ReplayRecord>> {
        (from..to)
            .map(|index| {
                Arc::new(ReplayRecord::new(
                    index,
                    Role::User,
                    format!("{index}"),
                    "main",
                ))
            })
            .collect()
    }

    fn indices(cache: &Cache, session: &str, from: u64, to: u64) -> Vec<u64> {
        cache
            .turns(session, from, to)
            .iter()
            .map(|r| r.index)
            .collect()
    }

    #[test]
    fn only_contiguous_runs_from_the_own_start_are_kept() {
        let mut c = Cache::new(1 << 20);
        let e = c.epoch();
        c.fill_turns(e, "s", 5, 7, &records(7, 9)); // a gap after the own start
        assert!(indices(&c, "s", 5, 10).is_empty());
        c.fill_turns(e, "s", 5, 5, &records(5, 8));
        c.fill_turns(e, "s", 5, 6, &records(6, 10)); // overlaps, extends
        assert_eq!(indices(&c, "s", 5, 20), [5, 6, 7, 8, 9]);
        assert_eq!(indices(&c, "s", 7, 9), [7, 8]);
        assert!(indices(&c, "s", 4, 9).is_empty());
    }

    #[test]
    fn a_reader_that_started_before_a_forget_fills_nothing() {
        let mut c = Cache::new(1 << 20);
        let e = c.epoch();
        c.forget("other");
        c.fill_turns(e, "s", 0, 0, &records(0, 3));
        assert!(indices(&c, "s", 0, 3).is_empty());
        c.clear();
        assert!(c.epoch() > e);
    }

    #[test]
    fn the_budget_evicts_oldest_sessions_and_accounts_bytes() {
        let one = cost(&records(0, 1)[0]);
        let mut c = Cache::new(one * 4);
        let e = c.epoch();
        c.fill_turns(e, "a", 0, 0, &records(0, 3));
        c.fill_turns(e, "b", 0, 0, &records(0, 2)); // evicts a
        assert!(indices(&c, "a", 0, 3).is_empty());
        assert_eq!(indices(&c, "b", 0, 2), [0, 1]);
        c.fill_turns(e, "c", 0, 0, &records(0, 5)); // larger than the budget: not kept
        assert!(indices(&c, "c", 0, 5).is_empty());
        assert_eq!(c.turn_bytes, one * 2);
        // Extending b past the budget evicts b itself: nothing may be kept from index 2.
        c.fill_turns(e, "b", 0, 2, &records(2, 5));
        assert!(indices(&c, "b", 0, 5).is_empty());
        assert!(indices(&c, "b", 2, 5).is_empty());
        c.fill_turns(e, "b", 0, 0, &records(0, 2));
        c.forget("b");
        assert_eq!(c.turn_bytes, 0);
    }

    #[test]
    fn a_validator_vouches_only_for_the_run_as_it_ended_when_checked() {
        let mut c = Cache::new(1 << 20);
        let e = c.epoch();
        // Not the end of the run: not recorded.
        c.fill_turns(e, "s", 0, 0, &records(0, 3));
        c.validate(e, "s", 1, "d1".into());
        assert!(c.validator("s").is_none());
        c.validate(e, "s", 2, "d2".into());
        assert_eq!(c.validator("s"), Some(&(2, "d2".to_string())));
        // The run grows without a new check: the old digest no longer covers it.
        c.appended("s", ReplayRecord::clone(&records(3, 4)[0]), "d3".into());
        assert!(c.validator("s").is_none());
        // A reader that started before a forget records nothing.
        c.forget("s");
        c.fill_turns(c.epoch(), "s", 0, 0, &records(0, 3));
        c.validate(e, "s", 2, "d2".into());
        assert!(c.validator("s").is_none());
    }
}
