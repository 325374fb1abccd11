//! Writes: the write transaction ([`WriteTx`]), what a committed write changes besides
//! the store ([`Effects`]), and the group commit of appends and forks.

use super::catalog::{Entry as CatalogEntry, Op, Pending, TurnDoc};
use super::lease::Lease;
use super::records::{Entry, Run};
use super::write_lock::{Counted, WriteGuard};
use super::{micros, Durability, Store};
use crate::error::{Error, Result};
use crate::model::DigestVersion;
use crate::rdf::{self, SessionNode};
use crate::storage::Change;
use oxigraph::model::{NamedNode, Quad};
use std::collections::HashMap;
use std::sync::MutexGuard;

impl Store {
    /// Starts a write that may touch anything: takes the store's write lock (and, on a
    /// shared store, a lease on the whole store) until the transaction is committed or
    /// dropped.
    pub(crate) fn write(&self) -> Result<WriteTx<'_>> {
        self.write_on(&[])
    }

    /// Starts a write that touches sessions `keys` only (their graphs, their children):
    /// on a shared store, other processes may write other sessions meanwhile. Empty
    /// `keys` claims the whole store.
    pub(crate) fn write_on(&self, keys: &[NamedNode]) -> Result<WriteTx<'_>> {
        let state = !self.backend.exclusive() && self.check_shared_digests()?;
        let mut tx = self.write_unchecked(keys)?;
        if state {
            tx.version = Some(rdf::version_quads(&self.iris, DigestVersion::CURRENT));
        }
        Ok(tx)
    }

    /// [`Store::write_on`] without the check that a shared store's digests are of the
    /// current version: for the check itself and the upgrade.
    pub(crate) fn write_unchecked(&self, keys: &[NamedNode]) -> Result<WriteTx<'_>> {
        let guard = self.lock_writes();
        let lease = if self.backend.exclusive() {
            // It commits alone: after every queued change.
            self.settle(&[]);
            None
        } else {
            Some(self.acquire(keys)?)
        };
        Ok(self.tx(guard, lease, None))
    }

    /// Starts an append or a fork on sessions `keys`, committed with others waiting at
    /// the same time (see `Group`) on a store this process owns; on a shared
    /// one, as [`Store::write_on`].
    pub(crate) fn write_grouped(&self, keys: &[NamedNode]) -> Result<WriteTx<'_>> {
        if !self.backend.exclusive() {
            return self.write_on(keys);
        }
        loop {
            let guard = self.lock_writes();
            if !self.must_settle(keys) {
                return Ok(self.tx(guard, None, Some(keys.to_vec())));
            }
            drop(guard);
            self.settle(keys);
        }
    }

    /// Holds writes while a reader brings the catalog up to date from the RDF
    /// (`listing.rs`): the write lock, taken once every queued change is committed. It
    /// writes nothing, so it is not counted as a write.
    pub(crate) fn hold_writes(&self) -> WriteGuard<'_> {
        let guard = self.lock_writes();
        self.settle(&[]);
        guard
    }

    fn lock_writes(&self) -> WriteGuard<'_> {
        self.write_lock.lock()
    }

    fn tx<'s>(
        &'s self,
        guard: WriteGuard<'s>,
        lease: Option<Lease>,
        group: Option<Vec<NamedNode>>,
    ) -> WriteTx<'s> {
        WriteTx {
            store: self,
            _guard: Some(guard),
            change: Change::default(),
            effects: Effects {
                counted: Some(Counted::begin(&self.writes)),
                ..Effects::default()
            },
            lease,
            new_nodes: Vec::new(),
            labels: Vec::new(),
            group,
            fed: false,
            version: None,
        }
    }

    /// Commits `change` (if not empty), then applies each write's `effects` to the
    /// record index and the read cache, then syncs if the durability asks.
    pub(crate) fn write_through(&self, change: Change, effects: Vec<Effects>) -> Result<()> {
        let wrote = !change.is_empty() || effects.iter().any(|e| e.clear);
        if !change.is_empty() {
            self.backend.commit(change)?;
        }
        // Applied before the sync: what is committed is what later reads must see.
        for e in effects {
            e.apply(self);
        }
        if wrote && self.durability == Durability::Sync {
            self.backend.flush()?;
        }
        Ok(())
    }
}

/// A write in progress: it holds the store's write lock, collects one change, and on
/// commit writes it atomically and brings the read cache up to date. Functions that
/// need the lock take it, so their signature shows the lock is held. Dropped without a
/// commit, it writes nothing.
pub(crate) struct WriteTx<'s> {
    store: &'s Store,
    /// Released once a grouped change is queued.
    _guard: Option<WriteGuard<'s>>,
    change: Change,
    effects: Effects,
    /// On a shared store, the lease this write holds: removed by the commit.
    lease: Option<Lease>,
    /// What the write creates and the labels it takes (see [`WriteTx::claim_node`]).
    new_nodes: Vec<(NamedNode, NamedNode)>,
    labels: Vec<(NamedNode, String)>,
    /// For a group commit, the sessions the write touches.
    group: Option<Vec<NamedNode>>,
    /// Its entry in a shared store's change feed went in with its bulk load.
    fed: bool,
    /// The statement of the store's digest version, written with the write's quads on
    /// a shared store that has none yet (see `Store::check_shared_digests`).
    version: Option<Vec<Quad>>,
}

/// What a committed write changes besides the store: the read cache and the record
/// index.
#[derive(Default)]
pub(crate) struct Effects {
    /// Sessions whose cached entries go (by IRI).
    forget: Vec<NamedNode>,
    /// Turns appended.
    appended: Vec<Appended>,
    /// Records of a session's turns an import encoded as it wrote them: the session,
    /// its first own index, the run.
    imported: Vec<(NamedNode, u64, Run)>,
    /// The change may touch anything: drop the whole cache.
    clear: bool,
    /// What the catalog learns from the write (see [`crate::store::catalog`]).
    catalog: Option<Pending>,
    /// Counts the write as done once these effects are applied or given up.
    counted: Option<Counted>,
}

impl Effects {
    /// Applies the effects of a committed write; the turns it appended move into the
    /// read cache after the record index has written them.
    fn apply(mut self, store: &Store) {
        if let Some(catalog) = self.catalog.take() {
            catalog.apply();
        }
        if let Some(records) = &store.records {
            if self.clear {
                records.clear();
            }
            for iri in &self.forget {
                records.forget(iri.as_str());
            }
            for run in self.appended.chunk_by(|a, b| a.session == b.session) {
                let entries = run.iter().map(|a| &a.entry);
                records.appended(run[0].session.as_str(), run[0].own_start, entries);
            }
            for (iri, own_start, run) in &self.imported {
                records.imported(iri.as_str(), *own_start, run);
            }
        }
        let mut cache = store.cache();
        if self.clear {
            cache.clear();
        }
        for iri in &self.forget {
            cache.forget(iri.as_str());
        }
        for a in self.appended {
            let Appended {
                session,
                entry,
                branch,
                ..
            } = a;
            let digest = entry.digest.clone();
            cache.appended(session.as_str(), entry.into_record(&branch), digest);
        }
        drop(cache);
        // Done: whatever reads the store or the catalog from now on sees all of it.
        drop(self.counted);
    }
}

impl Store {
    /// Writes done so far: read before a read that [`Store::written_since`] checks.
    pub(crate) fn writes_done(&self) -> u64 {
        self.writes.done()
    }

    /// Whether a write was under way at any moment since [`Store::writes_done`] gave
    /// `done`: if not, the store and its derived indexes held the same writes
    /// throughout.
    pub(crate) fn written_since(&self, done: u64) -> bool {
        self.writes.since(done)
    }
}

/// What an appended turn carries besides its entry in the record index.
pub(crate) struct AppendedFacts<'a> {
    pub(crate) model: Option<String>,
    /// Its `dcterms:created` lexical form.
    pub(crate) at: &'a str,
}

/// A turn a write appends, as the record index and the read cache take it.
pub(crate) struct Appended {
    session: NamedNode,
    own_start: u64,
    /// As the record index keeps it (no branch of its own: the session's).
    entry: Entry,
    /// The session's branch label, for the cache's record.
    branch: String,
}

impl Drop for WriteTx<'_> {
    /// A write given up (bad input, a failed commit) withdraws its lease at once, so
    /// others need not wait for it to lapse.
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            let _ = self.store.backend.commit(Change {
                removes: lease.quads,
                ..Change::default()
            });
        }
    }
}

impl<'s> WriteTx<'s> {
    /// Declares that the write creates node `subject` in `graph`: on a shared store,
    /// the commit is applied only if no other writer has created it meanwhile.
    pub(crate) fn claim_node(&mut self, graph: &NamedNode, subject: &NamedNode) {
        self.new_nodes.push((graph.clone(), subject.clone()));
    }

    /// Declares that the write gives a child of `parent` branch label `label`: on a
    /// shared store, the commit is applied only if no child of it has taken the label.
    pub(crate) fn claim_label(&mut self, parent: &NamedNode, label: &str) {
        self.labels.push((parent.clone(), label.to_string()));
    }

    pub(crate) fn insert(&mut self, quads: impl IntoIterator<Item = Quad>) {
        self.change.inserts.extend(quads);
    }

    pub(crate) fn remove(&mut self, quads: impl IntoIterator<Item = Quad>) {
        self.change.removes.extend(quads);
    }

    /// Removes a session's whole graph (and forgets what the cache knew of it).
    pub(crate) fn drop_graph(&mut self, graph: NamedNode) {
        self.catalog_op(&graph, |id| Op::Dropped(id.to_string()));
        self.effects.forget.push(graph.clone());
        self.change.drop_graphs.push(graph);
    }

    /// The cache forgets session `iri` after the commit (and the catalog derives it
    /// again from the RDF before its next read, unless the write says what it is).
    pub(crate) fn forget(&mut self, iri: &NamedNode) {
        self.catalog_op(iri, |id| Op::Suspect(id.to_string()));
        self.effects.forget.push(iri.clone());
    }

    /// The change may touch anything: the cache is dropped after the commit.
    pub(crate) fn forget_all(&mut self) {
        if let Some(catalog) = &self.store.catalog {
            self.effects
                .catalog
                .get_or_insert_with(|| catalog.begin())
                .push(crate::store::catalog::EVERYTHING, Op::All);
        }
        self.effects.clear = true;
    }

    /// The write creates the session `facts` describe (new, a fork, an import) whose
    /// newest turn is from `activity` (microseconds; its creation when `None`).
    pub(crate) fn created(&mut self, facts: &SessionNode, activity: Option<i64>) {
        let iris = &self.store.iris;
        let id_of = |iri: &NamedNode| iris.session_id(iri.as_ref()).map(|s| s.to_string());
        let created = micros(facts.created.as_deref());
        let activity = activity.unwrap_or(created).max(created);
        let entry = CatalogEntry {
            id: facts.id.to_string(),
            parent: facts.parent.as_ref().and_then(id_of),
            root: facts
                .fork_root
                .as_ref()
                .and_then(id_of)
                .unwrap_or_else(|| facts.id.to_string()),
            principal: facts
                .principal
                .as_ref()
                .and_then(|p| iris.parse_agent(p.as_ref()))
                .map(|a| a.name().to_string()),
            title: facts.title.clone(),
            branch: facts.branch.clone(),
            created,
            activity,
            family_activity: activity,
            length: facts.length,
            own_start: facts.own_start(),
            depth: facts.depth,
            ..CatalogEntry::default()
        };
        self.catalog_op(&facts.iri, |_| Op::Created(entry));
    }

    /// Whether the store keeps a catalog (an import then hands it its turns).
    pub(crate) fn catalogs(&self) -> bool {
        self.store.catalog.is_some()
    }

    /// Own turns a write stored for session `iri` outside `append` (an import), for the
    /// catalog's search.
    pub(crate) fn indexed_turns(&mut self, iri: &NamedNode, turns: Vec<TurnDoc>) {
        if !turns.is_empty() {
            self.catalog_op(iri, |id| Op::Appended {
                session: id.to_string(),
                turns,
            });
        }
    }

    /// Adds a catalog op about session `iri` (made from its id), if there is a
    /// catalog.
    fn catalog_op(&mut self, iri: &NamedNode, op: impl FnOnce(&str) -> Op) {
        let Some(catalog) = &self.store.catalog else {
            return;
        };
        let Some(id) = self.store.iris.session_id(iri.as_ref()) else {
            return;
        };
        self.effects
            .catalog
            .get_or_insert_with(|| catalog.begin())
            .push(id.as_str(), op(id.as_str()));
    }

    /// A turn appended to session `iri` (whose own turns start at `own_start`, whose
    /// branch is `branch`), for the cache, the record index and the catalog.
    pub(crate) fn appended(
        &mut self,
        iri: &NamedNode,
        own_start: u64,
        entry: Entry,
        branch: &str,
        facts: AppendedFacts<'_>,
    ) {
        let AppendedFacts { model, at } = facts;
        let turn = TurnDoc {
            index: entry.index,
            role: entry.role.as_str().to_string(),
            content: entry.content.clone(),
            model,
            at: micros(Some(at)),
        };
        self.catalog_op(iri, |id| Op::Appended {
            session: id.to_string(),
            turns: vec![turn],
        });
        self.effects.appended.push(Appended {
            session: iri.clone(),
            own_start,
            entry,
            branch: branch.to_string(),
        });
    }

    /// Whether the store keeps a record index (the import then encodes its records).
    pub(crate) fn indexes_records(&self) -> bool {
        self.store.records.is_some()
    }

    /// The records of turns an import wrote to session `iri` (own turns from
    /// `own_start`), for the record index once committed. The import's caller forgets
    /// the session in the cache.
    pub(crate) fn imported(&mut self, iri: &NamedNode, own_start: u64, run: Run) {
        self.effects.imported.push((iri.clone(), own_start, run));
    }

    /// Writes the change in one atomic commit (with others waiting, for a grouped
    /// write), then updates the cache; on failure nothing is written and the cache is as
    /// it was.
    pub(crate) fn commit(mut self) -> Result<()> {
        // On a shared store, the write's entry in the change feed goes in with it
        // (unless its load took it).
        let entry = if self.fed {
            Vec::new()
        } else {
            self.feed_entry()
        };
        let fed = !entry.is_empty();
        let mut change = std::mem::take(&mut self.change);
        change.inserts.extend(entry);
        let effects = std::mem::take(&mut self.effects);
        let stated = match self.version.take() {
            Some(statement) if !change.is_empty() => {
                change.inserts.extend(statement);
                true
            }
            _ => false,
        };
        let result = self.commit_change(change, effects);
        if stated && result.is_ok() {
            self.store.know_digest_version(DigestVersion::CURRENT);
        }
        if fed && result.is_ok() {
            self.store.compact_feed();
        }
        result
    }

    /// Writes `quads` through the store's bulk path, atomically, before the write's own
    /// change is committed: what a large import writes. On a shared store that states no
    /// digest version yet, the statement goes in with them.
    ///
    /// On a shared store, the load's entry in the change feed goes last (a load may
    /// take several requests: a reader that sees the entry sees the whole load), naming
    /// the sessions the write has noted so far (an import notes its sessions before it
    /// loads them); what the write claimed is in the store once the load is, so its
    /// commit checks no claim.
    pub(crate) fn bulk_load(&mut self, quads: &mut dyn Iterator<Item = Quad>) -> Result<()> {
        let statement = self.version.take().unwrap_or_default();
        let stated = !statement.is_empty();
        let change = self.feed_entry();
        self.store
            .backend
            .bulk_load(&mut statement.into_iter().chain(quads).chain(change))?;
        if stated {
            self.store.know_digest_version(DigestVersion::CURRENT);
        }
        if self.store.feed.is_some() {
            self.new_nodes.clear();
            self.labels.clear();
            self.fed = true;
        }
        Ok(())
    }

    /// The write's entry in a shared store's change feed: the sessions its changes
    /// name so far (none on a store this process owns).
    fn feed_entry(&self) -> Vec<Quad> {
        let Some(pending) = &self.effects.catalog else {
            return Vec::new();
        };
        let sessions = pending
            .sessions()
            .map(|ids| ids.iter().map(|id| self.store.iris.session(id)).collect());
        self.store.change_for(sessions)
    }

    fn commit_change(&mut self, mut change: Change, effects: Effects) -> Result<()> {
        if let Some(keys) = self.group.take() {
            // Only insertions are grouped: their order in a batch does not matter.
            if !change.inserts.is_empty()
                && change.removes.is_empty()
                && change.drop_graphs.is_empty()
            {
                let ticket = self.store.enqueue(keys, change, effects);
                self._guard = None;
                return self.store.committed(ticket);
            }
        }
        // The lease goes in the same request as the write: it is held until the write
        // is in, and never outlives it; and the store applies the write only if the
        // lease still holds then (a fenced commit).
        if let Some(lease) = &self.lease {
            let nothing = change.is_empty();
            change.removes.extend(lease.quads.iter().cloned());
            if nothing {
                // Nothing to write: the lease is only withdrawn, and leaves no receipt.
                self.store.write_through(change, vec![effects])?;
                self.lease = None;
                return Ok(());
            }
            // This process's previous receipt goes with it, and this one takes its place.
            change.removes.extend(self.store.receipt().iter().cloned());
            change.inserts.extend(lease.receipt.iter().cloned());
            change.fence = Some(crate::storage::Fence {
                condition: crate::rdf::fence_condition(
                    &self.store.iris,
                    &lease.node,
                    &lease.expires,
                    &self.new_nodes,
                    &self.labels,
                ),
                receipt: lease.receipt.clone(),
            });
        }
        // On failure the lease stays here and `drop` withdraws it.
        self.store.write_through(change, vec![effects])?;
        if let Some(lease) = self.lease.take() {
            *self.store.receipt() = lease.receipt;
        }
        Ok(())
    }
}

// Group commit.
//
// Group commit: concurrent appends and forks on a store this process owns are written
// in one storage commit per batch, as databases do.
//
// A writer prepares its change under the write lock, exactly as if alone (the same
// checks, the same reads, so the same errors and indices), queues it and releases the
// lock, so the next writer prepares while earlier changes are committed. Whichever
// queued writer finds no commit running becomes the leader: it takes every queued
// change, commits them as one, brings the read cache and the record index up to date,
// and wakes the others. A writer is answered only after the commit holding its change,
// so no acknowledged write can be lost to a failed batch.
//
// Preparing reads only committed state, so a change is never prepared against one that
// is still queued: a writer whose sessions (its keys) have a queued or committing
// change waits for that batch first, and writes with no keys (deletes, detaches,
// imports, updates) wait until nothing is queued and commit alone. Queued changes only
// insert, so their order within a batch cannot matter.
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
        let outcome = self.write_through(change, effects);
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
