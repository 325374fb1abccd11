//! The read path: session facts, chain walk, load, replay, branches, tree. Nothing here
//! writes.

use crate::error::{Error, Result};
use crate::model::{
    Agent, BranchInfo, ReplayRecord, SessionId, SessionInfo, TreeNode, Turn, MAX_FORK_DEPTH,
};
use crate::query::queries;
use crate::store::Store;
use crate::vocab::{dcterms, ft, prov, rdf};
use oxigraph::model::{GraphNameRef, Literal, NamedNode, NamedNodeRef, NamedOrBlankNode, Term};
use std::collections::HashSet;
use std::sync::Arc;

/// The lineage facts of one session, as stored on the session node in its own graph.
#[derive(Clone, Debug)]
pub(crate) struct Facts {
    pub(crate) id: String,
    pub(crate) iri: NamedNode,
    pub(crate) branch: String,
    pub(crate) parent: Option<NamedNode>,
    pub(crate) forked_at: Option<u64>,
    pub(crate) depth: u64,
    pub(crate) fork_root: Option<NamedNode>,
    pub(crate) length: u64,
    pub(crate) base_digest: Option<String>,
    pub(crate) principal: Option<NamedNode>,
    pub(crate) title: Option<String>,
    pub(crate) created: Option<String>,
    pub(crate) summary: Option<String>,
    pub(crate) request_digest: Option<String>,
}

impl Facts {
    /// The first index this session owns: its fork point, or 0 for a root.
    pub(crate) fn own_start(&self) -> u64 {
        if self.parent.is_some() {
            self.forked_at.unwrap_or(0)
        } else {
            0
        }
    }
}

/// A stored `xsd:dateTime` as an instant, for ordering: Oxigraph writes it back in
/// canonical form (`.900Z` as `.9Z`), so the text does not sort by time.
pub(crate) fn instant(text: Option<&str>) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    text.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
}

fn literal_text(term: &Term) -> Option<&str> {
    match term {
        Term::Literal(l) => Some(l.value()),
        _ => None,
    }
}

fn named(term: Term) -> Option<NamedNode> {
    match term {
        Term::NamedNode(n) => Some(n),
        _ => None,
    }
}

impl Store {
    /// The facts of the session stored in graph `iri`, if that graph holds a session.
    pub(crate) fn facts_of(&self, iri: NamedNodeRef<'_>) -> Result<Option<Facts>> {
        let epoch = {
            let cache = self.cache();
            if let (Some(f), Some(length)) = (cache.facts(iri.as_str()), cache.length(iri.as_str()))
            {
                return Ok(Some(Facts {
                    length,
                    ..f.clone()
                }));
            }
            cache.epoch()
        };
        let Some(mut f) = self.read_facts(iri)? else {
            return Ok(None);
        };
        let cached = self.cache().length(iri.as_str());
        f.length = match cached {
            Some(length) => length,
            None => self.own_end(&f)?,
        };
        self.cache().fill_facts(epoch, &f);
        Ok(Some(f))
    }

    /// Reads the session node in graph `iri` (all but the length).
    fn read_facts(&self, iri: NamedNodeRef<'_>) -> Result<Option<Facts>> {
        let mut is_session = false;
        let mut f = Facts {
            id: String::new(),
            iri: iri.into_owned(),
            branch: String::new(),
            parent: None,
            forked_at: None,
            depth: 0,
            fork_root: None,
            length: 0,
            base_digest: None,
            principal: None,
            title: None,
            created: None,
            summary: None,
            request_digest: None,
        };
        let mut have = (false, false); // id, branch
        for quad in self
            .inner
            .quads_for_pattern(Some(iri.into()), None, None, Some(iri.into()))
        {
            let quad = quad?;
            let p = quad.predicate.as_ref();
            let o = quad.object;
            let int = |t: &Term| literal_text(t).and_then(|v| v.parse::<u64>().ok());
            if p == rdf::TYPE {
                is_session |= o == Term::from(ft::SESSION.into_owned());
            } else if p == ft::SESSION_ID {
                f.id = literal_text(&o).unwrap_or_default().to_string();
                have.0 = true;
            } else if p == ft::BRANCH {
                f.branch = literal_text(&o).unwrap_or_default().to_string();
                have.1 = true;
            } else if p == ft::FORKED_AT_INDEX {
                f.forked_at = int(&o);
            } else if p == ft::FORK_DEPTH {
                f.depth = int(&o).unwrap_or(0);
            } else if p == ft::BASE_DIGEST {
                f.base_digest = literal_text(&o).map(str::to_string);
            } else if p == ft::SUMMARY {
                f.summary = literal_text(&o).map(str::to_string);
            } else if p == ft::REQUEST_DIGEST {
                f.request_digest = literal_text(&o).map(str::to_string);
            } else if p == dcterms::TITLE {
                f.title = literal_text(&o).map(str::to_string);
            } else if p == dcterms::CREATED {
                f.created = literal_text(&o).map(str::to_string);
            } else if p == ft::PARENT_SESSION {
                f.parent = named(o);
            } else if p == ft::FORK_ROOT {
                f.fork_root = named(o);
            } else if p == prov::WAS_ATTRIBUTED_TO {
                f.principal = named(o);
            }
        }
        if !is_session {
            return Ok(None);
        }
        if !(have.0 && have.1) {
            return Err(Error::Corrupt {
                session: self.iris.session_id(iri).unwrap_or(iri.as_str().into()),
                detail: "the session node lacks ft:sessionId or ft:branch".into(),
            });
        }
        if f.parent.is_some() && f.forked_at.is_none() {
            return Err(Error::Corrupt {
                session: f.id,
                detail: "a fork without ft:forkedAtIndex".into(),
            });
        }
        Ok(Some(f))
    }

    /// The session's length: one past its last own turn, or its fork point when it has
    /// none. Turns are contiguous from the fork point, so an exponential then binary
    /// search over turn IRIs finds the end in O(log n) point lookups, and the session
    /// node itself never changes when turns are appended.
    fn own_end(&self, f: &Facts) -> Result<u64> {
        let exists = |index: u64| -> Result<bool> {
            let turn = self.iris.turn(&f.id, index);
            Ok(self
                .inner
                .quads_for_pattern(
                    Some(turn.as_ref().into()),
                    Some(ft::INDEX),
                    None,
                    Some(f.iri.as_ref().into()),
                )
                .next()
                .transpose()?
                .is_some())
        };
        let start = f.own_start();
        if !exists(start)? {
            return Ok(start);
        }
        let (mut found, mut step) = (start, 1u64);
        let overflow = || Error::Corrupt {
            session: f.id.clone(),
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
    pub(crate) fn require(&self, id: &SessionId) -> Result<Facts> {
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
    pub(crate) fn chain(&self, id: &SessionId) -> Result<Vec<Facts>> {
        let mut levels = vec![self.require(id)?];
        let mut seen: HashSet<NamedNode> = HashSet::from([levels[0].iri.clone()]);
        while let Some(parent) = levels.last().and_then(|f| f.parent.clone()) {
            if !seen.insert(parent.clone()) {
                let start = levels.iter().position(|f| f.iri == parent).unwrap_or(0);
                let mut cycle: Vec<String> = levels[start..].iter().map(|f| f.id.clone()).collect();
                cycle.push(levels[start].id.clone());
                return Err(Error::CycleDetected {
                    session: id.to_string(),
                    cycle,
                });
            }
            // Past the limit we keep walking (the store is finite) so that a long cycle
            // is reported as a cycle, not as depth.
            match self.facts_of(parent.as_ref())? {
                Some(f) => levels.push(f),
                None => {
                    let child = levels.last().map(|f| f.id.clone()).unwrap_or_default();
                    return Err(Error::ParentMissing {
                        session: child,
                        parent: self
                            .iris
                            .session_id(parent.as_ref())
                            .unwrap_or_else(|| parent.as_str().to_string()),
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
        Ok(levels)
    }

    /// Reads turn `index` stored in the graph of `owner`.
    pub(crate) fn read_turn(&self, owner: &Facts, index: u64) -> Result<Turn> {
        let iri = self.iris.turn(&owner.id, index);
        let graph = GraphNameRef::NamedNode(owner.iri.as_ref());
        let mut t = Turn {
            index,
            role: crate::Role::User,
            kind: crate::Kind::Message,
            content: String::new(),
            name: None,
            tool_call_id: None,
            tool_calls: None,
            model: None,
            session: owner.id.clone(),
            branch: owner.branch.clone(),
            created_at: None,
            digest: String::new(),
        };
        let (mut has_role, mut has_content) = (false, false);
        for quad in self
            .inner
            .quads_for_pattern(Some(iri.as_ref().into()), None, None, Some(graph))
        {
            let quad = quad?;
            let p = quad.predicate.as_ref();
            if p == prov::WAS_ATTRIBUTED_TO {
                if let Term::NamedNode(agent) = &quad.object {
                    if let Some(Agent::Model(m)) = self.iris.parse_agent(agent.as_ref()) {
                        t.model = Some(m);
                    }
                }
                continue;
            }
            let Some(v) = literal_text(&quad.object) else {
                continue;
            };
            if p == ft::ROLE {
                t.role = v.parse()?;
                has_role = true;
            } else if p == ft::CONTENT {
                t.content = v.to_string();
                has_content = true;
            } else if p == ft::KIND {
                t.kind = v.parse()?;
            } else if p == ft::DIGEST {
                t.digest = v.to_string();
            } else if p == ft::BRANCH {
                t.branch = v.to_string();
            } else if p == ft::NAME {
                t.name = Some(v.to_string());
            } else if p == ft::TOOL_CALL_ID {
                t.tool_call_id = Some(v.to_string());
            } else if p == ft::TOOL_CALLS {
                t.tool_calls = Some(v.to_string());
            } else if p == prov::GENERATED_AT_TIME {
                t.created_at = Some(v.to_string());
            }
        }
        if !(has_role && has_content) {
            return Err(Self::missing_turn(owner, index));
        }
        Ok(t)
    }

    /// Which level of `chain` owns `index`, as seen from the last level.
    pub(crate) fn owner_of(chain: &[Facts], index: u64) -> Option<&Facts> {
        chain
            .iter()
            .rev()
            .find(|f| f.own_start() <= index)
            .filter(|_| chain.last().is_some_and(|leaf| index < leaf.length))
    }

    /// Loads the turns of `id` in order, inherited prefix stitched in; `up_to` is an
    /// inclusive last index.
    pub fn load(&self, id: &SessionId, up_to: Option<u64>) -> Result<Vec<Turn>> {
        let chain = self.chain(id)?;
        let mut turns = Vec::new();
        for (owner, from, to) in Self::spans(id, &chain, up_to)? {
            for index in from..to {
                turns.push(self.read_turn(owner, index)?);
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
        let spans = Self::spans(id, &chain, up_to)?;
        let mut out = Vec::with_capacity(spans.last().map_or(0, |s| s.2 as usize));
        for (owner, from, to) in spans {
            self.replay_span(epoch, owner, from, to, &mut out)?;
        }
        Ok(out)
    }

    /// Which session of `chain` stores which turns of its leaf, up to `up_to`
    /// (inclusive): `(owner, from, to)` spans, contiguous from index 0.
    fn spans<'c>(
        id: &SessionId,
        chain: &'c [Facts],
        up_to: Option<u64>,
    ) -> Result<Vec<(&'c Facts, u64, u64)>> {
        let leaf = chain.last().expect("a chain has a leaf");
        let end = match up_to {
            None => leaf.length,
            Some(n) if n < leaf.length => n + 1,
            Some(n) => {
                return Err(Error::IndexOutOfRange {
                    session: id.to_string(),
                    index: n.into(),
                    valid: if leaf.length == 0 {
                        "none: the session has no turns".into()
                    } else {
                        format!("0..={}", leaf.length - 1)
                    },
                })
            }
        };
        let mut spans = Vec::new();
        let mut next = 0;
        for (level, facts) in chain.iter().enumerate() {
            // A level's turns are visible up to the lowest fork point below it: a fork
            // of a fork may cut deeper into the prefix than its parent did.
            let stop = chain[level + 1..]
                .iter()
                .map(Facts::own_start)
                .min()
                .unwrap_or(facts.length)
                .min(end);
            let from = facts.own_start().max(next);
            if from < stop {
                if from != next {
                    break;
                }
                spans.push((facts, from, stop));
                next = stop;
            }
        }
        if next != end {
            return Err(Error::Corrupt {
                session: id.to_string(),
                detail: format!("the chain yields {next} turns where {end} were expected"),
            });
        }
        Ok(spans)
    }

    /// Pushes the records of turns `from..to` stored by `owner` onto `out`: from the
    /// cache where it has them; the rest read from the store, then cached.
    fn replay_span(
        &self,
        epoch: u64,
        owner: &Facts,
        from: u64,
        to: u64,
        out: &mut Vec<ReplayRecord>,
    ) -> Result<()> {
        let rest = {
            let cache = self.cache();
            let cached = cache.turns(owner.iri.as_str(), from, to);
            out.extend(cached.iter().map(|r| ReplayRecord::clone(r)));
            from + cached.len() as u64
        };
        if rest == to {
            return Ok(());
        }
        // One projected query over the owner's graph reads a run of turns 2-3x faster
        // than a point lookup per turn, but it scans the whole graph: use it when the
        // run is a good part of what the owner stores.
        let read: Vec<Arc<ReplayRecord>> = if (to - rest) * 4 >= owner.length - owner.own_start() {
            self.scan_records(owner, rest, to)?
        } else {
            (rest..to)
                .map(|index| Ok(Arc::new(ReplayRecord::from(&self.read_turn(owner, index)?))))
                .collect::<Result<_>>()?
        };
        out.extend(read.iter().map(|r| ReplayRecord::clone(r)));
        self.cache()
            .fill_turns(epoch, owner.iri.as_str(), owner.own_start(), rest, &read);
        Ok(())
    }

    /// The records of turns `from..to` of `owner`, through `turn-records.rq`.
    fn scan_records(&self, owner: &Facts, from: u64, to: u64) -> Result<Vec<Arc<ReplayRecord>>> {
        let bindings = [
            ("session", owner.iri.clone().into()),
            ("from", Literal::from(from).into()),
            ("to", Literal::from(to).into()),
        ];
        let mut slots: Vec<Option<Arc<ReplayRecord>>> = vec![None; (to - from) as usize];
        for row in self.select(&queries::TURN_RECORDS, &bindings)? {
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
                *slot = Some(Arc::new(ReplayRecord {
                    index,
                    role: role.parse()?,
                    content: content.to_string(),
                    branch: text("branch").unwrap_or(&owner.branch).to_string(),
                }));
            }
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(i, slot)| slot.ok_or_else(|| Self::missing_turn(owner, from + i as u64)))
            .collect()
    }

    fn missing_turn(owner: &Facts, index: u64) -> Error {
        Error::Corrupt {
            session: owner.id.clone(),
            detail: format!("turn {index} is missing or lacks ft:role/ft:content"),
        }
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
        info.models = self.models_of(&facts.iri)?;
        info.tokens = self.tokens_of(&facts.iri)?;
        info.subagent = self.subagent_of(&facts.iri)?;
        Ok(info)
    }

    /// What the node of session `iri` says of the sub-agent whose transcript it holds.
    fn subagent_of(&self, iri: &NamedNode) -> Result<Option<crate::model::SubAgentInfo>> {
        let mut info = crate::model::SubAgentInfo::default();
        let mut any = false;
        for quad in self.inner.quads_for_pattern(
            Some(iri.as_ref().into()),
            None,
            None,
            Some(iri.as_ref().into()),
        ) {
            let quad = quad?;
            let p = quad.predicate.as_ref();
            let text = literal_text(&quad.object).map(str::to_string);
            if p == ft::AGENT_ID {
                info.agent_id = text.unwrap_or_default();
            } else if p == ft::SPAWN_TOOL_CALL_ID {
                info.tool_call_id = text;
            } else if p == ft::SPAWNED_IN_SESSION {
                info.spawned_in_session = text;
            } else if p == ft::SPAWNED_BY {
                if let Term::NamedNode(turn) = &quad.object {
                    info.spawned_by = self
                        .iris
                        .turn_index(turn.as_ref())
                        .map(|(session, index)| crate::model::TurnRef { session, index });
                }
            } else {
                continue;
            }
            any = true;
        }
        Ok(any.then_some(info))
    }

    pub(crate) fn info_of(&self, f: &Facts) -> Result<SessionInfo> {
        let id_of = |n: &NamedNode| {
            self.iris
                .session_id(n.as_ref())
                .unwrap_or_else(|| n.as_str().to_string())
        };
        let principal = f
            .principal
            .as_ref()
            .and_then(|p| self.iris.parse_agent(p.as_ref()))
            .map(|a| a.name().to_string());
        let head_digest = if f.length == 0 {
            None
        } else if f.length > f.own_start() {
            Some(self.read_turn(f, f.length - 1)?.digest)
        } else {
            f.base_digest.clone()
        };
        Ok(SessionInfo {
            session: f.id.clone(),
            branch: f.branch.clone(),
            title: f.title.clone(),
            principal,
            parent: f.parent.as_ref().map(id_of),
            forked_at_index: f.parent.as_ref().and(f.forked_at),
            fork_root: f.fork_root.as_ref().map_or(f.id.clone(), id_of),
            depth: f.depth as usize,
            length: f.length,
            own_turns: f.length.saturating_sub(f.own_start()),
            created_at: f.created.clone(),
            head_digest,
            summary: f.summary.clone(),
            inherited_turns: f.length.min(f.own_start()),
            own_content_bytes: None,
            inherited_content_bytes: None,
            models: Vec::new(),
            tokens: None,
            subagent: None,
        })
    }

    /// Every session in the store, oldest first.
    pub fn list(&self) -> Result<Vec<SessionInfo>> {
        let mut out = Vec::new();
        for quad in
            self.inner
                .quads_for_pattern(None, Some(rdf::TYPE), Some(ft::SESSION.into()), None)
        {
            let quad = quad?;
            if let NamedOrBlankNode::NamedNode(s) = &quad.subject {
                if quad.graph_name == GraphNameRef::NamedNode(s.as_ref()).into_owned() {
                    if let Some(f) = self.facts_of(s.as_ref())? {
                        out.push(self.info_of(&f)?);
                    }
                }
            }
        }
        out.sort_by_cached_key(|s| (instant(s.created_at.as_deref()), s.session.clone()));
        Ok(out)
    }

    /// The facts of the direct children of the session `iri`, oldest first.
    pub(crate) fn children_of(&self, iri: &NamedNode) -> Result<Vec<Facts>> {
        let mut out = Vec::new();
        for quad in self.inner.quads_for_pattern(
            None,
            Some(ft::PARENT_SESSION),
            Some(iri.as_ref().into()),
            None,
        ) {
            let quad = quad?;
            if let NamedOrBlankNode::NamedNode(child) = &quad.subject {
                if quad.graph_name == GraphNameRef::NamedNode(child.as_ref()).into_owned() {
                    if let Some(f) = self.facts_of(child.as_ref())? {
                        out.push(f);
                    }
                }
            }
        }
        out.sort_by_cached_key(|f| (instant(f.created.as_deref()), f.id.clone()));
        Ok(out)
    }

    fn tokens_of(&self, iri: &NamedNode) -> Result<Option<crate::model::TokenTotals>> {
        Ok(self
            .regeneration_usage(iri)?
            .map(|(input, output)| crate::model::TokenTotals { input, output }))
    }

    /// The direct children (branches) of `id`.
    pub fn branches(&self, id: &SessionId) -> Result<Vec<BranchInfo>> {
        let facts = self.require(id)?;
        Ok(self
            .children_of(&facts.iri)?
            .into_iter()
            .map(|c| BranchInfo {
                own_turns: c.length.saturating_sub(c.own_start()),
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
        let facts = self.require(id)?;
        let mut seen = HashSet::new();
        self.subtree(facts, &mut seen)
    }

    fn subtree(&self, f: Facts, seen: &mut HashSet<NamedNode>) -> Result<TreeNode> {
        seen.insert(f.iri.clone());
        let mut children = Vec::new();
        for child in self.children_of(&f.iri)? {
            if !seen.contains(&child.iri) {
                children.push(self.subtree(child, seen)?);
            }
        }
        let (models, tokens) = (self.models_of(&f.iri)?, self.tokens_of(&f.iri)?);
        Ok(TreeNode {
            models,
            tokens,
            forked_at_index: f.parent.as_ref().and(f.forked_at),
            session: f.id,
            branch: f.branch,
            length: f.length,
            summary: f.summary,
            children,
        })
    }
}
