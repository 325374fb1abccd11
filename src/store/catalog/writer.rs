//! The index writer's side of the catalog: a write's changes gathered before it commits
//! ([`Pending`]), handed over after it, and put in the index writer by whoever takes it
//! next; the index commit; the documents of sessions and turns.

use super::journal::{Journal, Line, Mark};
use super::{
    failed, i64_of, text_of, tie, u64_of, Applied, Catalog, Entry, Failure, Inner, Op, Payload,
    State, TurnDoc, VERSION,
};
use std::sync::{Arc, MutexGuard, PoisonError};
use tantivy::collector::TopDocs;
use tantivy::query::TermQuery;
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::{Searcher, TantivyDocument, Term};

impl Inner {
    /// The index writer and its state, with every write handed over so far in it.
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.drain(&mut state);
        state
    }

    /// Puts the writes handed over (see [`Applied`]) in the index writer, in order.
    fn drain(&self, state: &mut State) {
        let applied =
            std::mem::take(&mut *self.applied.lock().unwrap_or_else(PoisonError::into_inner));
        for Applied { ops, lines } in applied {
            for op in ops {
                if self.apply_op(state, op).is_err() {
                    // The index could not take it: rebuilt from the RDF at the next read.
                    state.stale = true;
                }
            }
            // A line stays open while its session is suspect: replayed after a crash.
            let mut done = Vec::new();
            for (session, line) in lines {
                match state.suspects.get_mut(&session) {
                    Some(held) => held.push(line),
                    None => done.push(line),
                }
            }
            self.done(done);
        }
    }

    fn journal(&self) -> MutexGuard<'_, Option<Journal>> {
        self.journal.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lets journal lines go: what they noted is in the index writer.
    pub(super) fn done(&self, lines: impl IntoIterator<Item = Line>) {
        if let Some(journal) = self.journal().as_mut() {
            for line in lines {
                journal.done(line);
            }
        }
    }

    /// Makes `id` suspect, noting it in the journal: until it is derived, an index
    /// commit replays from here, so a crash meanwhile still derives it at the next open.
    pub(super) fn hold(&self, state: &mut State, id: &str) {
        let mut journal = self.journal();
        let line = journal.as_mut().and_then(|j| j.note(id).ok());
        if line.is_none() && journal.is_some() {
            // Unnoted, a crash could lose it: rebuilt whole before the next read instead.
            state.stale = true;
        }
        state
            .suspects
            .entry(id.to_string())
            .or_default()
            .extend(line);
    }

    pub(super) fn commit(&self, state: &mut State) -> Result<(), Failure> {
        let mark = match self.journal().as_mut() {
            Some(journal) => journal.mark().map_err(failed)?,
            None => Mark::default(),
        };
        let payload = serde_json::to_string(&Payload {
            version: VERSION,
            journal: mark,
            stale: state.stale,
        })
        .map_err(failed)?;
        let mut prepared = state.writer.prepare_commit().map_err(failed)?;
        prepared.set_payload(&payload);
        prepared.commit().map_err(failed)?;
        self.reader.reload().map_err(failed)?;
        state.recent.clear();
        state.cleared = false;
        state.dirty = false;
        if let Some(journal) = self.journal().as_ref() {
            journal.prune(mark);
        }
        Ok(())
    }

    /// The entry of `id`: written or removed since the last commit, else as committed.
    pub(super) fn entry(&self, state: &State, id: &str) -> Result<Option<Entry>, Failure> {
        if let Some(entry) = state.recent.get(id) {
            return Ok(entry.clone());
        }
        if state.cleared {
            return Ok(None);
        }
        let searcher: Searcher = self.reader.searcher();
        let found = searcher
            .search(
                &TermQuery::new(
                    Term::from_field_text(self.f.ssid, id),
                    IndexRecordOption::Basic,
                ),
                &TopDocs::with_limit(1)
                    .order_by(|_: &tantivy::SegmentReader| |_: tantivy::DocId| 0u8),
            )
            .map_err(failed)?;
        let Some((_, address)) = found.into_iter().next() else {
            return Ok(None);
        };
        let doc: TantivyDocument = searcher.doc(address).map_err(failed)?;
        Ok(Some(self.decode(&doc)))
    }

    /// Changes the entry of `id` with `change`; an entry the index lacks makes the
    /// session suspect instead.
    pub(super) fn patch(
        &self,
        state: &mut State,
        id: &str,
        change: impl FnOnce(&mut Entry),
    ) -> Result<(), Failure> {
        if state.suspects.contains_key(id) {
            return Ok(()); // derived whole before the next read
        }
        match self.entry(state, id)? {
            Some(mut entry) => {
                change(&mut entry);
                self.write_entry(state, entry);
            }
            None => self.hold(state, id),
        }
        Ok(())
    }

    fn apply_op(&self, state: &mut State, op: Op) -> Result<(), Failure> {
        match op {
            Op::Created(entry) => {
                let (id, parent, root, activity) = (
                    entry.id.clone(),
                    entry.parent.clone(),
                    entry.root.clone(),
                    entry.activity,
                );
                if let Some(lines) = state.suspects.remove(&id) {
                    self.done(lines);
                }
                self.write_entry(state, entry);
                if let Some(parent) = parent {
                    self.patch(state, &parent, |p| p.forks += 1)?;
                }
                if root != id {
                    self.patch(state, &root, |r| {
                        r.family += 1;
                        r.family_activity = r.family_activity.max(activity);
                    })?;
                }
            }
            Op::Appended { session, turns } => {
                for turn in &turns {
                    self.add_turn(state, &session, turn)?;
                }
                state.dirty = true;
                let mut root = None;
                self.patch(state, &session, |e| {
                    for turn in &turns {
                        e.length = e.length.max(turn.index + 1);
                        e.activity = e.activity.max(turn.at);
                        e.family_activity = e.family_activity.max(turn.at);
                        if let Some(model) = &turn.model {
                            e.models.insert(model.clone());
                        }
                    }
                    if e.root != e.id {
                        root = Some((e.root.clone(), e.activity));
                    }
                })?;
                if let Some((root, activity)) = root {
                    self.patch(state, &root, |r| {
                        r.family_activity = r.family_activity.max(activity)
                    })?;
                }
            }
            Op::Suspect(id) => {
                state.suspects.entry(id).or_default();
            }
            Op::Dropped(id) => {
                let before = self.entry(state, &id)?;
                state
                    .writer
                    .delete_term(Term::from_field_text(self.f.ssid, &id));
                state
                    .writer
                    .delete_term(Term::from_field_text(self.f.tsid, &id));
                state.recent.insert(id.clone(), None);
                state.dirty = true;
                if let Some(before) = before {
                    if let Some(parent) = &before.parent {
                        self.patch(state, parent, |p| p.forks = p.forks.saturating_sub(1))?;
                    }
                    if before.root != id {
                        // The family's newest activity may have been this session's:
                        // only the RDF can say what comes next then.
                        match self.entry(state, &before.root)? {
                            Some(root) if before.activity < root.family_activity => {
                                self.patch(state, &before.root, |r| {
                                    r.family = r.family.saturating_sub(1)
                                })?;
                            }
                            _ => self.hold(state, &before.root),
                        }
                    }
                }
            }
            Op::All => state.stale = true,
        }
        Ok(())
    }

    pub(super) fn write_entry(&self, state: &mut State, entry: Entry) {
        let f = self.f;
        let mut doc = TantivyDocument::default();
        doc.add_text(f.doc, "session");
        doc.add_text(f.ssid, &entry.id);
        if let Some(parent) = &entry.parent {
            doc.add_text(f.parent, parent);
        }
        doc.add_text(f.root, &entry.root);
        doc.add_text(f.is_root, if entry.parent.is_none() { "yes" } else { "no" });
        if let Some(principal) = &entry.principal {
            doc.add_text(f.principal, principal);
        }
        for model in &entry.models {
            doc.add_text(f.model, model);
            doc.add_text(f.models, model);
        }
        if let Some(title) = &entry.title {
            doc.add_text(f.title, title);
        }
        doc.add_text(f.branch, &entry.branch);
        doc.add_i64(f.created, entry.created);
        doc.add_i64(f.activity, entry.activity);
        doc.add_i64(f.family_activity, entry.family_activity);
        doc.add_u64(f.tie, tie(&entry.id));
        doc.add_u64(f.length, entry.length);
        doc.add_u64(f.own_start, entry.own_start);
        doc.add_u64(f.depth, entry.depth);
        doc.add_u64(f.forks, entry.forks);
        doc.add_u64(f.family, entry.family);
        state
            .writer
            .delete_term(Term::from_field_text(f.ssid, &entry.id));
        if state.writer.add_document(doc).is_err() {
            state.stale = true;
        }
        state.dirty = true;
        state.recent.insert(entry.id.clone(), Some(entry));
    }

    pub(super) fn add_turn(
        &self,
        state: &mut State,
        session: &str,
        turn: &TurnDoc,
    ) -> Result<(), Failure> {
        let f = self.f;
        let key = format!("{session}\u{1f}{}", turn.index);
        let mut doc = TantivyDocument::default();
        doc.add_text(f.doc, "turn");
        doc.add_text(f.tsid, session);
        doc.add_text(f.tkey, &key);
        doc.add_u64(f.index, turn.index);
        doc.add_text(f.role, &turn.role);
        doc.add_text(f.content, &turn.content);
        doc.add_i64(f.activity, turn.at);
        // Writing a turn twice (a write and a derivation racing) keeps one.
        state
            .writer
            .delete_term(Term::from_field_text(f.tkey, &key));
        state.writer.add_document(doc).map_err(failed)?;
        Ok(())
    }

    pub(super) fn decode(&self, doc: &TantivyDocument) -> Entry {
        let f = self.f;
        Entry {
            id: text_of(doc, f.ssid).unwrap_or_default(),
            parent: text_of(doc, f.parent),
            root: text_of(doc, f.root).unwrap_or_default(),
            principal: text_of(doc, f.principal),
            title: text_of(doc, f.title),
            branch: text_of(doc, f.branch).unwrap_or_default(),
            created: i64_of(doc, f.created),
            activity: i64_of(doc, f.activity),
            family_activity: i64_of(doc, f.family_activity),
            length: u64_of(doc, f.length),
            own_start: u64_of(doc, f.own_start),
            depth: u64_of(doc, f.depth),
            forks: u64_of(doc, f.forks),
            family: u64_of(doc, f.family),
            models: doc
                .get_all(f.model)
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        }
    }
}

/// A write's changes for the catalog, gathered before it commits: its ops, and the
/// journal lines noted for their sessions. Handed over after the commit; dropped
/// unapplied (the write failed), its lines are let go.
pub(crate) struct Pending {
    inner: Arc<Inner>,
    ops: Vec<Op>,
    lines: Vec<(String, Line)>,
    /// A session could not be noted in the journal: the index is rebuilt instead.
    unnoted: bool,
}

impl Catalog {
    /// Gathers a write's changes (see [`Pending`]).
    pub(crate) fn begin(&self) -> Pending {
        Pending {
            inner: Arc::clone(&self.inner),
            ops: Vec::new(),
            lines: Vec::new(),
            unnoted: false,
        }
    }
}

impl Pending {
    /// Adds `op` about `session`, noting the session in the journal first (which the
    /// index writer's holders never keep for long: a write does not wait for them).
    pub(crate) fn push(&mut self, session: &str, op: Op) {
        if !self.lines.iter().any(|(s, _)| s == session) {
            match self.inner.journal().as_mut().map(|j| j.note(session)) {
                Some(Ok(line)) => self.lines.push((session.to_string(), line)),
                Some(Err(_)) => self.unnoted = true,
                None => {}
            }
        }
        if let Op::Created(entry) = &op {
            // Created whole: what the same write said of it before is moot.
            self.ops
                .retain(|o| !matches!(o, Op::Suspect(s) if *s == entry.id));
        }
        if let Op::Suspect(id) = &op {
            if self
                .ops
                .iter()
                .any(|o| matches!(o, Op::Created(e) if e.id == *id))
            {
                return;
            }
        }
        self.ops.push(op);
    }

    /// The sessions the write's changes name, or `None` when it may have changed
    /// anything: what a shared store's change feed records of it.
    pub(crate) fn sessions(&self) -> Option<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        for op in &self.ops {
            let id = match op {
                Op::All => return None,
                Op::Created(entry) => &entry.id,
                Op::Appended { session, .. } => session,
                Op::Suspect(id) | Op::Dropped(id) => id,
            };
            if !out.contains(id) {
                out.push(id.clone());
            }
        }
        Some(out)
    }

    /// Hands the committed write's changes to the catalog, without waiting for its
    /// index writer, which a reader may hold for a commit: the next one to take it
    /// puts them in, before it reads or commits anything.
    pub(crate) fn apply(mut self) {
        let mut ops = std::mem::take(&mut self.ops);
        if self.unnoted {
            ops.push(Op::All);
        }
        let lines = std::mem::take(&mut self.lines);
        self.inner
            .applied
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Applied { ops, lines });
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.lines.is_empty() {
            self.inner.done(self.lines.drain(..).map(|(_, line)| line));
        }
    }
}
