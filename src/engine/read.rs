//! The read path: session facts, the chain walk, load, replay, info, list, branches,
//! tree. Nothing here writes.

use crate::error::{Error, Result};
use crate::model::{
    BranchInfo, Kind, ReplayRecord, SessionId, SessionInfo, TokenTotals, TreeNode, Turn,
    MAX_FORK_DEPTH,
};
use crate::query::queries;
use crate::rdf::chain::{Chain, Span};
use crate::rdf::{instant, missing_turn, payload_sha256, SessionNode};
use crate::store::records::{Entry, Records};
use crate::store::Store;
use oxigraph::model::{Literal, NamedNode, NamedNodeRef, Term};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

impl Store {
    /// The facts of the session stored in graph `iri`, length included, if that graph
    /// holds a session: from the cache, or read and then cached.
    pub(crate) fn facts_of(&self, iri: NamedNodeRef<'_>) -> Result<Option<SessionNode>> {
        if self.across_network() {
            return Ok(self
                .rdf()
                .nodes_with_lengths(iri, 0)?
                .remove(&iri.into_owned()));
        }
        let epoch = if self.caching() {
            let cache = self.cache();
            if let (Some(f), Some(length)) = (cache.facts(iri.as_str()), cache.length(iri.as_str()))
            {
                return Ok(Some(SessionNode {
                    length,
                    ..f.clone()
                }));
            }
            Some(cache.epoch())
        } else {
            None
        };
        let Some(mut f) = self.rdf().session_node(iri)? else {
            return Ok(None);
        };
        let cached = epoch.and_then(|_| self.cache().length(iri.as_str()));
        f.length = match cached {
            Some(length) => length,
            None => self.own_end(&f)?,
        };
        if let Some(epoch) = epoch {
            self.cache().fill_facts(epoch, &f);
        }
        Ok(Some(f))
    }

    /// The session's length: one past its last own turn, or its fork point when it has
    /// none. Turns are contiguous from the fork point, so an exponential then binary
    /// search over turn IRIs finds the end in O(log n) point lookups, and the session
    /// node itself never changes when turns are appended.
    fn own_end(&self, f: &SessionNode) -> Result<u64> {
        let rdf = self.rdf();
        let exists = |index: u64| rdf.has_turn(f, index);
        let start = f.own_start();
        // The record index's last turn, if the store agrees it is the last: two lookups.
        let hint = self
            .records
            .as_ref()
            .and_then(|r| r.last_index(f.iri.as_str(), start));
        if let Some(last) = hint {
            if last < u64::MAX && exists(last)? && !exists(last + 1)? {
                return Ok(last + 1);
            }
        }
        if !exists(start)? {
            return Ok(start);
        }
        let (mut found, mut step) = (start, 1u64);
        let overflow = || Error::Corrupt {
            session: f.id.to_string(),
            detail: "turn indices run past the largest index".into(),
        };
        let mut missing = loop {
            let probe = start.checked_add(step).ok_or_else(overflow)?;
            if exists(probe)? {
                found = probe;
                step = step.checked_mul(2).ok_or_else(overflow)?;
            } else {
                break probe;
            }
        };
        while missing - found > 1 {
            let mid = found + (missing - found) / 2;
            if exists(mid)? {
                found = mid;
            } else {
                missing = mid;
            }
        }
        Ok(found + 1)
    }

    /// The facts of session `id`, or [`Error::SessionNotFound`].
    pub(crate) fn require(&self, id: &SessionId) -> Result<SessionNode> {
        self.facts_of(self.session_iri(id).as_ref())?
            .ok_or_else(|| Error::SessionNotFound {
                session: id.to_string(),
            })
    }

    /// Whether session `id` exists.
    pub fn exists(&self, id: &SessionId) -> Result<bool> {
        Ok(self.facts_of(self.session_iri(id).as_ref())?.is_some())
    }

    /// The chain of `id`, root first. Cycles are found with a visited set (and named);
    /// a chain longer than the depth limit is refused; a missing parent is named.
    pub(crate) fn chain(&self, id: &SessionId) -> Result<Chain> {
        if self.across_network() {
            // The session alone first (a root needs no more), then its ancestors as
            // many as its depth says, nine levels per request (a session and 8 above
            // it): two requests up to depth 9, five at depth 32. The query grows with
            // the square of its levels (one join chain per level), so more per request
            // costs more than a round trip on a local network; and Virtuoso compiles
            // each query anew (its IRIs differ), 30 ms for nine levels against 4 for
            // one, so a root or a shallow fork is not asked for eight levels it lacks.
            // The same walk runs over what came back.
            let mut nodes = HashMap::new();
            let mut above: Option<u64> = None;
            return self.walk(id, |iri| {
                let iri = iri.into_owned();
                if !nodes.contains_key(&iri) {
                    // The levels above this one: its child's depth less one, 8 at most.
                    let levels = above.map_or(0, |d| d.saturating_sub(1).min(8)) as usize;
                    nodes.extend(self.rdf().nodes_with_lengths(iri.as_ref(), levels)?);
                }
                let node = nodes.remove(&iri);
                above = node.as_ref().map(|n| n.depth);
                Ok(node)
            });
        }
        self.walk(id, |iri| self.facts_of(iri))
    }

    /// The chain of `id` with the facts of each level from `facts_of`.
    fn walk(
        &self,
        id: &SessionId,
        mut facts_of: impl FnMut(NamedNodeRef<'_>) -> Result<Option<SessionNode>>,
    ) -> Result<Chain> {
        let leaf =
            facts_of(self.session_iri(id).as_ref())?.ok_or_else(|| Error::SessionNotFound {
                session: id.to_string(),
            })?;
        let mut levels = vec![leaf];
        let mut seen: HashSet<NamedNode> = HashSet::from([levels[0].iri.clone()]);
        while let Some(parent) = levels.last().and_then(|f| f.parent.clone()) {
            if !seen.insert(parent.clone()) {
                let start = levels.iter().position(|f| f.iri == parent).unwrap_or(0);
                let mut cycle: Vec<String> =
                    levels[start..].iter().map(|f| f.id.to_string()).collect();
                cycle.push(levels[start].id.to_string());
                return Err(Error::CycleDetected {
                    session: id.to_string(),
                    cycle,
                });
            }
            // Past the limit we keep walking (the store is finite) so that a long cycle
            // is reported as a cycle, not as depth.
            match facts_of(parent.as_ref())? {
                Some(f) => levels.push(f),
                None => {
                    let child = levels.last().map(|f| f.id.to_string()).unwrap_or_default();
                    return Err(Error::ParentMissing {
                        session: child,
                        parent: self.iris.name_of(parent.as_ref()),
                    });
                }
            }
        }
        if levels.len() > MAX_FORK_DEPTH + 1 {
            return Err(Error::ChainTooDeep {
                session: id.to_string(),
                max: MAX_FORK_DEPTH,
            });
        }
        levels.reverse();
        Ok(Chain::new(levels).expect("the chain holds at least the session"))
    }

    /// The digest of turn `index` as seen from the leaf of `chain`.
    pub(crate) fn digest_in_chain(&self, chain: &Chain, index: u64) -> Result<String> {
        let owner = chain.owner_of(index).ok_or_else(|| Error::Corrupt {
            session: chain.leaf().id.to_string(),
            detail: format!("no session in the chain owns turn {index}"),
        })?;
        self.rdf().digest(owner, index)
    }

    /// Loads the turns of `id` in order, inherited prefix stitched in; `up_to` is an
    /// inclusive last index.
    pub fn load(&self, id: &SessionId, up_to: Option<u64>) -> Result<Vec<Turn>> {
        self.load_from(id, 0, up_to)
    }

    /// Turns `from..=up_to` of `id` (a page of playback): only those are read.
    pub fn load_range(&self, id: &SessionId, from: u64, up_to: u64) -> Result<Vec<Turn>> {
        self.load_from(id, from, Some(up_to))
    }

    /// Turns `from..` of `id`, up to `up_to` inclusive: one read a turn on a store this
    /// process owns, one request for them all on a store across a network.
    fn load_from(&self, id: &SessionId, from: u64, up_to: Option<u64>) -> Result<Vec<Turn>> {
        let chain = self.chain(id)?;
        let rdf = self.rdf();
        let spans: Vec<_> = chain
            .spans(id, up_to)?
            .into_iter()
            .map(|span| (span.owner, span.from.max(from), span.to))
            .filter(|(_, from, to)| from < to)
            .collect();
        if self.across_network() {
            return rdf.span_turns(&spans);
        }
        let mut turns = Vec::new();
        for (owner, from, to) in spans {
            for index in from..to {
                turns.push(rdf.turn(owner, index)?);
            }
        }
        Ok(turns)
    }

    /// The plain `index/role/content/branch` records of `id`, in order; `up_to` is an
    /// inclusive last index. Never writes to the store.
    pub fn replay(&self, id: &SessionId, up_to: Option<u64>) -> Result<Vec<ReplayRecord>> {
        // Noted before the chain is read: records filled later must not outlive a drop
        // (a delete, an update) that happened after these facts were read.
        let epoch = self.cache().epoch();
        let chain = self.chain(id)?;
        let spans = chain.spans(id, up_to)?;
        if self.across_network() {
            return self.replay_shared(&spans);
        }
        let mut out = Vec::with_capacity(spans.last().map_or(0, |s| s.to as usize));
        for (i, span) in spans.iter().enumerate() {
            // The digest of the span's last turn, where the chain already holds it: the
            // base digest of the next level, when that level starts right after it.
            let end_digest = spans.get(i + 1).and_then(|next| {
                (next.from == span.to && next.owner.own_start() == span.to)
                    .then_some(next.owner.base_digest.as_deref())
                    .flatten()
            });
            self.replay_span(epoch, *span, end_digest, &mut out)?;
        }
        Ok(out)
    }

    /// Replay on a shared store, where other processes write: the chain was just read
    /// (lengths and deletions are never stale); cached turns are served only after one
    /// request finds each owner's stored digest still at the end of its cached run
    /// (digests chain, so that vouches for every earlier turn); the rest of the spans
    /// come in one request, and are cached with the digest that ends them.
    fn replay_shared(&self, spans: &[Span<'_>]) -> Result<Vec<ReplayRecord>> {
        let cached_end = |span: &Span<'_>| {
            let cache = self.cache();
            let n = cache
                .turns(span.owner.iri.as_str(), span.from, span.to)
                .len() as u64;
            (n > 0).then(|| cache.validator(span.owner.iri.as_str()).cloned())
        };
        let mut checks: Vec<(&NamedNode, u64, String)> = Vec::new();
        for span in spans {
            match cached_end(span) {
                Some(Some((index, digest))) => checks.push((&span.owner.iri, index, digest)),
                // Cached but never checked: not to be trusted here.
                Some(None) => self.cache().forget(span.owner.iri.as_str()),
                None => {}
            }
        }
        let points: Vec<(&NamedNode, u64)> = checks.iter().map(|(g, i, _)| (*g, *i)).collect();
        let found = self.rdf().digests_at(&points)?;
        for (graph, index, digest) in &checks {
            if found.get(&((*graph).clone(), *index)) != Some(digest) {
                self.cache().forget(graph.as_str());
            }
        }
        // Noted after the forgets above, so what is read below may be cached.
        let epoch = self.cache().epoch();
        let mut out = Vec::with_capacity(spans.last().map_or(0, |s| s.to as usize));
        let mut missing = Vec::new();
        for span in spans {
            let cache = self.cache();
            let cached = cache.turns(span.owner.iri.as_str(), span.from, span.to);
            out.extend(cached.iter().map(|r| ReplayRecord::clone(r)));
            let rest = span.from + cached.len() as u64;
            if rest < span.to {
                missing.push((span.owner, rest, span.to));
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let mut read = self.rdf().span_records(&missing)?.into_iter().peekable();
        for (owner, from, to) in missing {
            let mut run = Vec::with_capacity((to - from) as usize);
            let mut last_digest = String::new();
            while let Some((record, digest)) = read.next_if(|(r, _)| r.index < to) {
                last_digest = digest;
                run.push(Arc::new(record));
            }
            let mut cache = self.cache();
            cache.fill_turns(epoch, owner.iri.as_str(), owner.own_start(), from, &run);
            cache.validate(epoch, owner.iri.as_str(), to - 1, last_digest);
            drop(cache);
            out.extend(run.iter().map(|r| ReplayRecord::clone(r)));
        }
        out.sort_by_key(|r| r.index);
        Ok(out)
    }

    /// Pushes the records of one span onto `out`: from the cache where it has them; the
    /// rest from the record index or the store, then cached.
    fn replay_span(
        &self,
        epoch: u64,
        span: Span<'_>,
        end_digest: Option<&str>,
        out: &mut Vec<ReplayRecord>,
    ) -> Result<()> {
        let Span { owner, from, to } = span;
        let rest = if self.caching() {
            let cache = self.cache();
            let cached = cache.turns(owner.iri.as_str(), from, to);
            out.extend(cached.iter().map(|r| ReplayRecord::clone(r)));
            from + cached.len() as u64
        } else {
            from
        };
        if rest == to {
            return Ok(());
        }
        let record = |e: Entry| Arc::new(e.into_record(&owner.branch));
        let read: Vec<Arc<ReplayRecord>> = match &self.records {
            Some(records) => {
                let mut entries = self.indexed_entries(records, owner, to, end_digest)?;
                let skip = (rest - owner.own_start()) as usize;
                entries.drain(..skip.min(entries.len()));
                entries.into_iter().map(record).collect()
            }
            // Straight into records: no entry kept, no second vector.
            None => self.stored_entries(owner, rest, to, record)?,
        };
        out.extend(read.iter().map(|r| ReplayRecord::clone(r)));
        if self.caching() {
            self.cache()
                .fill_turns(epoch, owner.iri.as_str(), owner.own_start(), rest, &read);
        }
        Ok(())
    }

    /// Turns `own_start..to` of `owner` from its file in the record index, checked
    /// against the digest chain: each record's digest recomputed from the one before,
    /// and the last equal to the digest the store holds for that turn (`end_digest`
    /// when the caller has read it for turn `to - 1`). What the file lacks, or all of
    /// it when the check fails, is read from the store and written back to the file.
    fn indexed_entries(
        &self,
        records: &Records,
        owner: &SessionNode,
        to: u64,
        end_digest: Option<&str>,
    ) -> Result<Vec<Entry>> {
        let epoch = records.epoch();
        let start = owner.own_start();
        let (mut good, clean) = match records.read(owner.iri.as_str(), start) {
            Some(stored) => (stored.entries, stored.clean),
            None => (Vec::new(), true),
        };
        good.truncate((to - start) as usize);
        let mut verified = true;
        if let Some(last) = good.last() {
            let base = match start {
                0 => String::new(),
                _ => owner.base_digest.clone().ok_or_else(|| Error::Corrupt {
                    session: owner.id.to_string(),
                    detail: "a fork with inherited turns but no ft:baseDigest".into(),
                })?,
            };
            let stored = match end_digest {
                Some(digest) if last.index + 1 == to => digest.to_string(),
                _ => self.rdf().digest(owner, last.index)?,
            };
            verified = stored == last.digest
                && crate::store::records::chained(&base, &good)
                && self.labels_match(owner, &good)?;
        }
        if !verified {
            good.clear();
        }
        let end = start + good.len() as u64;
        if end == to && clean {
            return Ok(good);
        }
        let missing = self.stored_entries(owner, end, to, |e| e)?;
        let whole = !verified || !clean;
        let write_from = if whole { 0 } else { good.len() };
        good.extend(missing);
        records.fill(epoch, owner.iri.as_str(), start, &good[write_from..], whole);
        Ok(good)
    }

    /// Whether the branch labels of `entries` (which the digest chain does not cover)
    /// are the ones the store holds. A turn carries a label of its own only when a
    /// detach copied it, so the store is asked only for a detached session (no parent,
    /// a fork point kept as history) or when the file claims a label.
    fn labels_match(&self, owner: &SessionNode, entries: &[Entry]) -> Result<bool> {
        let detached = owner.parent.is_none() && owner.forked_at.is_some();
        if !detached && entries.iter().all(|e| e.branch.is_none()) {
            return Ok(true);
        }
        let labels = self.rdf().turn_labels(owner)?;
        Ok(entries.iter().all(|e| {
            let stored = labels.get(&e.index).filter(|b| **b != owner.branch);
            e.branch.as_ref() == stored
        }))
    }

    /// Turns `from..to` of `owner` read from the store. One projected query over the
    /// owner's graph reads a run 2-3x faster than a point lookup per turn, but it scans
    /// the whole graph: it is used when the run is a good part of what the owner stores.
    /// Each entry is handed to `make` as it is read.
    fn stored_entries<T>(
        &self,
        owner: &SessionNode,
        from: u64,
        to: u64,
        make: impl Fn(Entry) -> T,
    ) -> Result<Vec<T>> {
        if from >= to {
            return Ok(Vec::new());
        }
        if (to - from) * 4 >= owner.own_turns() {
            return self.scan_entries(owner, from, to, make);
        }
        let rdf = self.rdf();
        (from..to)
            .map(|index| {
                let turn = rdf.turn(owner, index)?;
                Ok(make(Entry {
                    index,
                    role: turn.role,
                    kind: turn.kind,
                    branch: (turn.branch != owner.branch).then_some(turn.branch),
                    content: turn.content,
                    digest: turn.digest,
                    name: turn.name,
                    tool_call_id: turn.tool_call_id,
                    tool_calls: turn.tool_calls,
                    payload_sha256: turn.payload.as_deref().map(payload_sha256),
                }))
            })
            .collect()
    }

    /// Turns `from..to` of `owner`: through `turn-entries.rq` for the record index,
    /// else through the leaner `turn-records.rq`, which reads neither digest nor payload
    /// (the entries then serve replay only).
    fn scan_entries<T>(
        &self,
        owner: &SessionNode,
        from: u64,
        to: u64,
        make: impl Fn(Entry) -> T,
    ) -> Result<Vec<T>> {
        let query = match self.records {
            Some(_) => &queries::TURN_ENTRIES,
            None => &queries::TURN_RECORDS,
        };
        let bindings = [
            ("session", owner.iri.clone().into()),
            ("from", Literal::from(from).into()),
            ("to", Literal::from(to).into()),
        ];
        let mut slots: Vec<Option<T>> = (from..to).map(|_| None).collect();
        for row in self.select(query, &bindings)? {
            let text = |var: &str| match row.get(var) {
                Some(Term::Literal(l)) => Some(l.value()),
                _ => None,
            };
            let index = text("index").and_then(|i| i.parse::<u64>().ok());
            let (Some(index), Some(role), Some(content)) = (index, text("role"), text("content"))
            else {
                continue;
            };
            let slot = index
                .checked_sub(from)
                .and_then(|i| slots.get_mut(i as usize));
            if let Some(slot) = slot {
                *slot = Some(make(Entry {
                    index,
                    role: role.parse()?,
                    kind: text("kind").map_or(Ok(Kind::Message), str::parse)?,
                    content: content.to_string(),
                    branch: text("branch").map(str::to_string),
                    digest: text("digest").unwrap_or_default().to_string(),
                    name: text("name").map(str::to_string),
                    tool_call_id: text("toolCallId").map(str::to_string),
                    tool_calls: text("toolCalls").map(str::to_string),
                    payload_sha256: text("payload").map(payload_sha256),
                }));
            }
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(i, slot)| slot.ok_or_else(|| missing_turn(owner, from + i as u64)))
            .collect()
    }

    /// Lineage facts and counts of one session.
    pub fn info(&self, id: &SessionId) -> Result<SessionInfo> {
        let facts = self.require(id)?;
        let mut info = self.info_of(&facts)?;
        let (mut own, mut inherited) = (0, 0);
        for r in self.replay(id, None)? {
            if r.index < facts.own_start() {
                inherited += r.content.len() as u64;
            } else {
                own += r.content.len() as u64;
            }
        }
        info.own_content_bytes = Some(own);
        info.inherited_content_bytes = Some(inherited);
        info.models = self.rdf().models(&facts.iri)?;
        info.tokens = self.tokens_of(&facts.iri)?;
        info.subagent = self.rdf().sub_agent(facts.iri.as_ref())?;
        info.what_if = self.rdf().what_if_of(&facts.iri)?;
        Ok(info)
    }

    pub(crate) fn info_of(&self, f: &SessionNode) -> Result<SessionInfo> {
        let id_of = |n: &NamedNode| -> Result<SessionId> {
            self.iris
                .session_id(n.as_ref())
                .ok_or_else(|| Error::Corrupt {
                    session: f.id.to_string(),
                    detail: format!("{n} is not a session IRI of this store"),
                })
        };
        let principal = f
            .principal
            .as_ref()
            .and_then(|p| self.iris.parse_agent(p.as_ref()))
            .map(|a| a.name().to_string());
        let head_digest = if f.length == 0 {
            None
        } else if f.length > f.own_start() {
            Some(self.rdf().digest(f, f.length - 1)?)
        } else {
            f.base_digest.clone()
        };
        Ok(SessionInfo {
            session: f.id.clone(),
            branch: f.branch.clone(),
            title: f.title.clone(),
            principal,
            parent: f.parent.as_ref().map(id_of).transpose()?,
            forked_at_index: f.parent.as_ref().and(f.forked_at),
            fork_root: match &f.fork_root {
                Some(root) => id_of(root)?,
                None => f.id.clone(),
            },
            depth: f.depth as usize,
            length: f.length,
            own_turns: f.own_turns(),
            created_at: f.created.clone(),
            head_digest,
            summary: f.summary.clone(),
            inherited_turns: f.length.min(f.own_start()),
            own_content_bytes: None,
            inherited_content_bytes: None,
            models: Vec::new(),
            tokens: None,
            subagent: None,
            what_if: None,
        })
    }

    /// Every session in the store, oldest first.
    pub fn list(&self) -> Result<Vec<SessionInfo>> {
        let mut out = Vec::new();
        for iri in self.rdf().sessions()? {
            if let Some(f) = self.facts_of(iri.as_ref())? {
                out.push(self.info_of(&f)?);
            }
        }
        out.sort_by_cached_key(|s| (instant(s.created_at.as_deref()), s.session.clone()));
        Ok(out)
    }

    /// The facts of the direct children of the session `iri`, oldest first.
    pub(crate) fn children_of(&self, iri: &NamedNode) -> Result<Vec<SessionNode>> {
        let mut out = Vec::new();
        for child in self.rdf().children(iri)? {
            if let Some(f) = self.facts_of(child.as_ref())? {
                out.push(f);
            }
        }
        out.sort_by_cached_key(|f| (instant(f.created.as_deref()), f.id.clone()));
        Ok(out)
    }

    /// `root` and every session below it, parents before children.
    pub(crate) fn subtree_of(&self, root: SessionNode) -> Result<Vec<SessionNode>> {
        let mut seen = HashSet::from([root.iri.clone()]);
        let mut out = vec![root];
        let mut next = 0;
        while next < out.len() {
            for child in self.children_of(&out[next].iri.clone())? {
                if seen.insert(child.iri.clone()) {
                    out.push(child);
                }
            }
            next += 1;
        }
        Ok(out)
    }

    pub(crate) fn tokens_of(&self, iri: &NamedNode) -> Result<Option<TokenTotals>> {
        Ok(self
            .rdf()
            .usage_of(iri)?
            .map(|(input, output)| TokenTotals { input, output }))
    }

    /// The direct children (branches) of `id`.
    pub fn branches(&self, id: &SessionId) -> Result<Vec<BranchInfo>> {
        let facts = self.require(id)?;
        Ok(self
            .children_of(&facts.iri)?
            .into_iter()
            .map(|c| BranchInfo {
                own_turns: c.own_turns(),
                forked_at_index: c.own_start(),
                summary: c.summary,
                session: c.id,
                branch: c.branch,
                created_at: c.created,
            })
            .collect())
    }

    /// `id` and all its descendants.
    pub fn tree(&self, id: &SessionId) -> Result<TreeNode> {
        self.tree_within(id, usize::MAX)
    }

    /// `id` and its descendants, breadth first, `limit` sessions at most (`id` among
    /// them): a session whose children did not all fit says how many are left out in
    /// [`TreeNode::more_children`].
    pub fn tree_within(&self, id: &SessionId, limit: usize) -> Result<TreeNode> {
        struct Node {
            facts: SessionNode,
            children: Vec<usize>,
            more: u64,
        }
        let facts = self.require(id)?;
        let mut seen = HashSet::from([facts.iri.clone()]);
        let mut nodes = vec![Node {
            facts,
            children: Vec::new(),
            more: 0,
        }];
        let mut room = limit.saturating_sub(1);
        let mut next = 0;
        while next < nodes.len() {
            for child in self.children_of(&nodes[next].facts.iri)? {
                if !seen.insert(child.iri.clone()) {
                    continue;
                }
                if room == 0 {
                    nodes[next].more += 1;
                    continue;
                }
                room -= 1;
                let at = nodes.len();
                nodes[next].children.push(at);
                nodes.push(Node {
                    facts: child,
                    children: Vec::new(),
                    more: 0,
                });
            }
            next += 1;
        }
        // Children come after their parent: built from the last, each node's children
        // are ready when it is.
        let mut built: Vec<Option<TreeNode>> = Vec::with_capacity(nodes.len());
        built.resize_with(nodes.len(), || None);
        for (i, node) in nodes.into_iter().enumerate().rev() {
            let children = node
                .children
                .iter()
                .filter_map(|&c| built[c].take())
                .collect();
            built[i] = Some(self.tree_node(node.facts, children, node.more)?);
        }
        Ok(built[0].take().expect("the root is built last"))
    }

    fn tree_node(&self, f: SessionNode, children: Vec<TreeNode>, more: u64) -> Result<TreeNode> {
        let (models, tokens) = (self.rdf().models(&f.iri)?, self.tokens_of(&f.iri)?);
        Ok(TreeNode {
            models,
            tokens,
            forked_at_index: f.parent.as_ref().and(f.forked_at),
            session: f.id,
            branch: f.branch,
            length: f.length,
            summary: f.summary,
            children,
            more_children: more,
        })
    }
}
