//! The write path: create, append, fork, detach, delete. Each operation validates
//! everything first, then writes one change through a [`WriteTx`], which holds the write
//! lock and keeps the read cache.

use crate::error::{Error, Result};
use crate::model::{
    check_key, Agent, DeleteOptions, DeletePlan, DeletedSession, DetachOptions, DetachPlan,
    ForkOptions, ForkPlan, Label, Limits, MovedSession, NewSession, NewTurn, SessionId, SizeClass,
    Turn, TurnSpan, MAX_FORK_DEPTH,
};
use crate::rdf::chain::Chain;
use crate::rdf::{
    self, detach_change, detach_copy, fork_request_quads, session_quads, turn_quads, ForkRecord,
    GraphWriter, SessionNode, SessionRecord, TurnRecord,
};
use crate::store::records::Entry;
use crate::store::{AppendedFacts, Store, WriteTx};
use oxigraph::model::NamedNode;

pub(crate) const ANONYMOUS: &str = "anonymous";

/// Checks a turn to append to session `id` and returns the software agent it is
/// attributed to: its model, else (a tool result) its tool, else none (the session's
/// principal).
pub(crate) fn check_turn(limits: &Limits, id: &str, turn: &NewTurn) -> Result<Option<Agent>> {
    limits.check_turn(id, turn)?;
    let software = match (&turn.model, turn.role, &turn.name) {
        (Some(model), _, _) => Some(Agent::model(model.clone())?),
        (None, crate::Role::Tool, Some(tool)) => Some(Agent::tool(tool.clone())?),
        _ => None,
    };
    for (field, json) in [("tool_calls", &turn.tool_calls), ("payload", &turn.payload)] {
        if let Some(json) = json {
            serde_json::from_str::<serde_json::Value>(json).map_err(|e| {
                Error::InvalidInput(format!("{field} for session {id} is not valid JSON: {e}"))
            })?;
        }
    }
    Ok(software)
}

impl Store {
    /// Creates a root session and returns its id.
    pub fn create_session(&self, options: NewSession) -> Result<SessionId> {
        let iri = match &options.id {
            Some(id) => self.session_iri(&SessionId::new(id.clone())?),
            None => self.session_iri(&SessionId::generate()),
        };
        let options = NewSession {
            id: Some(self.iris.name_of(iri.as_ref())),
            ..options
        };
        let mut tx = self.write_on(std::slice::from_ref(&iri))?;
        let facts = self.create_in(&mut tx, options)?;
        tx.commit()?;
        Ok(facts.id)
    }

    /// Adds a new root session to `tx`: its facts as they will be once committed.
    pub(crate) fn create_in(
        &self,
        tx: &mut WriteTx<'_>,
        options: NewSession,
    ) -> Result<SessionNode> {
        let id = match options.id {
            Some(id) => SessionId::new(id)?,
            None => SessionId::generate(),
        };
        let principal = Agent::principal(options.principal.as_deref().unwrap_or(ANONYMOUS))?;
        let title = options.title.as_deref();
        self.limits
            .check(id.as_str(), "title", SizeClass::Field, title)?;
        let iri = self.session_iri(&id);
        if self.exists(&id)? {
            return Err(Error::Conflict(format!("session {id} already exists")));
        }
        tx.claim_node(&iri, &iri);
        let created = rdf::now();
        tx.insert(session_quads(
            &self.iris,
            &SessionRecord {
                id: id.as_str(),
                branch: Label::MAIN,
                principal: &principal,
                title: options.title.as_deref(),
                depth: 0,
                fork_root: &iri,
                created: &created,
            },
            None,
        ));
        tx.forget(&iri);
        let mut facts = SessionNode::lineage(id.clone(), iri.clone(), None, None);
        facts.branch = Label::MAIN.to_string();
        facts.fork_root = Some(iri.clone());
        facts.principal = Some(self.iris.agent(&principal));
        facts.title = options.title.clone();
        facts.created = Some(created.value().to_string());
        tx.created(&facts, None);
        Ok(facts)
    }

    /// Appends a turn to `id` and returns the index it was given (the session's length
    /// before the append).
    pub fn append(&self, id: &SessionId, turn: NewTurn) -> Result<u64> {
        self.append_with(id, turn, |_, _, _| {})
    }

    /// [`Store::append`] with `extra` quads about the new turn, as [`Store::append_in`]
    /// takes them.
    pub(crate) fn append_with(
        &self,
        id: &SessionId,
        turn: NewTurn,
        extra: impl FnOnce(&mut GraphWriter, &NamedNode, u64),
    ) -> Result<u64> {
        self.not_held(id)?;
        let mut tx = self.write_grouped(&[self.session_iri(id)])?;
        let facts = self.require(id)?;
        let index = self.append_in(&mut tx, &facts, turn, extra)?;
        tx.commit()?;
        Ok(index)
    }

    /// Appends `turns` to `id` in one transaction, all or none, and returns their
    /// indices: what a runtime that records several items at once needs, so that a
    /// failure leaves no part of them behind. A bad turn is named by its place in
    /// `turns`.
    pub fn append_many(&self, id: &SessionId, turns: Vec<NewTurn>) -> Result<Vec<u64>> {
        self.not_held(id)?;
        let mut tx = self.write_grouped(&[self.session_iri(id)])?;
        let mut facts = self.require(id)?;
        let (count, mut prev) = (turns.len(), None);
        let mut indices = Vec::with_capacity(count);
        for (n, turn) in turns.into_iter().enumerate() {
            let (index, digest) = self
                .append_after(&mut tx, &facts, turn, prev.take(), |_, _, _| {})
                .map_err(|e| match e {
                    Error::InvalidInput(why) => Error::InvalidInput(format!(
                        "turn {n} of the {count} to append: {why}; nothing was appended"
                    )),
                    other => other,
                })?;
            facts.length += 1;
            prev = Some(digest);
            indices.push(index);
        }
        tx.commit()?;
        Ok(indices)
    }

    /// Removes the last turn of `id` and returns it, or `None` when the session has no
    /// turns: the `pop_item` of agent runtimes' session stores. Only a turn the session
    /// stores itself can go, and only while nothing points at it: a fork that shares it,
    /// an anchor on it, or any quad naming it. Refused with the reason, changing nothing.
    pub fn pop(&self, id: &SessionId) -> Result<Option<Turn>> {
        self.not_held(id)?;
        let mut tx = self.write_on(&[self.session_iri(id)])?;
        let facts = self.require(id)?;
        let Some(last) = facts.length.checked_sub(1) else {
            return Ok(None);
        };
        let refuse = |why: String| {
            Err(Error::Conflict(format!(
                "cannot remove turn {last} of session {id}: {why}"
            )))
        };
        if last < facts.own_start() {
            let parent = facts.parent.as_ref().map(|p| self.iris.name_of(p.as_ref()));
            return refuse(format!(
                "it is inherited from {} (a fork removes only turns it stores)",
                parent.unwrap_or_default()
            ));
        }
        if let Some(child) = self
            .children_of(&facts.iri)?
            .into_iter()
            .find(|c| c.own_start() > last)
        {
            return refuse(format!("fork {} shares it", child.id));
        }
        if let Some(anchor) = self
            .anchors(id)?
            .into_iter()
            .find(|a| a.session == *id && a.at_index > last)
        {
            return refuse(format!("anchor {:?} is on it", anchor.name));
        }
        let rdf = self.rdf();
        if let Some(referrer) = rdf.referrer_of_turn(&facts, last)? {
            return refuse(format!("{referrer} points at it"));
        }
        let turn = rdf.turn(&facts, last)?;
        let quads = rdf.turn_statements(&facts, last)?;
        tx.remove(quads);
        tx.forget(&facts.iri);
        tx.commit()?;
        Ok(Some(turn))
    }

    /// Adds turn `facts.length` of session `facts` to `tx`; `extra` may add quads (to
    /// the session's graph) about the new turn `(writer, turn IRI, index)`.
    pub(crate) fn append_in(
        &self,
        tx: &mut WriteTx<'_>,
        facts: &SessionNode,
        turn: NewTurn,
        extra: impl FnOnce(&mut GraphWriter, &NamedNode, u64),
    ) -> Result<u64> {
        Ok(self.append_after(tx, facts, turn, None, extra)?.0)
    }

    /// [`Store::append_in`] after the turn whose digest is `prev` (read from the cache
    /// or the store when `None`); returns the new turn's index and digest.
    pub(crate) fn append_after(
        &self,
        tx: &mut WriteTx<'_>,
        facts: &SessionNode,
        turn: NewTurn,
        prev: Option<String>,
        extra: impl FnOnce(&mut GraphWriter, &NamedNode, u64),
    ) -> Result<(u64, String)> {
        let id = facts.id.as_str();
        let software = check_turn(&self.limits, id, &turn)?;
        let index = facts.length;
        let cached = if prev.is_some() {
            prev
        } else if self.caching() {
            // Its own statement, so the cache lock is released before the store is read.
            self.cache().head_digest(facts.iri.as_str(), index)
        } else {
            None
        };
        let prev = match cached {
            Some(digest) => digest,
            None => self.digest_before(facts, index)?,
        };
        let digest = rdf::turn_digest(&prev, index, &turn);
        let created = rdf::now();
        let mut w = GraphWriter::new(facts.iri.clone());
        let agent = match &software {
            Some(software) if self.rdf().declares(software)? => self.iris.agent(software),
            Some(software) => w.agent(&self.iris, software),
            None => facts
                .principal
                .clone()
                .unwrap_or_else(|| self.iris.agent(&Agent::Principal(ANONYMOUS.into()))),
        };
        turn_quads(
            &self.iris,
            &mut w,
            &TurnRecord {
                session: id,
                index,
                turn: &turn,
                by: &agent,
                digest: &digest,
                created: &created,
            },
        );
        let turn_iri = self.iris.turn(id, index);
        extra(&mut w, &turn_iri, index);
        tx.claim_node(&facts.iri, &turn_iri);
        tx.insert(w.quads);
        let model = turn.model.clone();
        tx.appended(
            &facts.iri,
            facts.own_start(),
            Entry::new_turn(index, turn, digest.clone()),
            &facts.branch,
            AppendedFacts {
                model,
                at: created.value(),
            },
        );
        Ok((index, digest))
    }

    /// Forks `parent` at `options.at` (default: its length) or at `options.anchor`. The
    /// child shares the parent's turns `0..k` and writes a constant number of quads
    /// (plus a summary with `options.summarize`). With `options.dry_run` nothing is
    /// written and the plan is returned. With `options.request_id`, a retry returns the
    /// fork the first request made, and the same id with other options is a conflict.
    pub fn fork(&self, parent: &SessionId, options: ForkOptions) -> Result<ForkPlan> {
        // The parent's lease covers its children's labels. A request id is looked up
        // store-wide, so such a fork commits alone.
        let mut keys = vec![self.session_iri(parent)];
        if let Some(id) = &options.id {
            keys.push(self.session_iri(&SessionId::new(id.clone())?));
        }
        let mut tx = match options.request_id {
            Some(_) => self.write_on(&keys[..1])?,
            None => self.write_grouped(&keys)?,
        };
        let (plan, _) = self.fork_in(&mut tx, parent, options)?;
        tx.commit()?;
        Ok(plan)
    }

    /// Forks `parent` as [`Store::fork`] does and appends `turns` to the fork, in one
    /// transaction: an edited message sent as a new branch. A bad turn is named by its
    /// place in `turns`, and then neither the fork nor any turn is written.
    pub fn fork_with(
        &self,
        parent: &SessionId,
        options: ForkOptions,
        turns: Vec<NewTurn>,
    ) -> Result<ForkPlan> {
        if options.dry_run || options.request_id.is_some() {
            return Err(Error::InvalidInput(
                "a fork with turns takes no dry run or request id".into(),
            ));
        }
        let mut keys = vec![self.session_iri(parent)];
        if let Some(id) = &options.id {
            keys.push(self.session_iri(&SessionId::new(id.clone())?));
        }
        let mut tx = self.write_grouped(&keys)?;
        let (plan, facts) = self.fork_in(&mut tx, parent, options)?;
        let mut facts = facts.expect("a fork that is not a dry run has facts");
        let (count, mut prev) = (turns.len(), None);
        for (n, turn) in turns.into_iter().enumerate() {
            let (_, digest) = self
                .append_after(&mut tx, &facts, turn, prev.take(), |_, _, _| {})
                .map_err(|e| match e {
                    Error::InvalidInput(why) => Error::InvalidInput(format!(
                        "turn {n} of the {count} for the fork of {parent}: {why}; nothing was \
                         written"
                    )),
                    other => other,
                })?;
            facts.length += 1;
            prev = Some(digest);
        }
        tx.commit()?;
        Ok(plan)
    }

    /// Adds a fork to `tx` (nothing for a dry run or a reused request): the plan, and
    /// the child's facts as they will be once committed.
    pub(crate) fn fork_in(
        &self,
        tx: &mut WriteTx<'_>,
        parent: &SessionId,
        options: ForkOptions,
    ) -> Result<(ForkPlan, Option<SessionNode>)> {
        if let Some(key) = &options.request_id {
            check_key("request id", key)?;
        }
        let reason = options.reason.as_deref();
        self.limits
            .check(parent.as_str(), "fork reason", SizeClass::Field, reason)?;
        let request = options.request_id.as_ref().map(|key| {
            (
                key.clone(),
                rdf::sha256_hex(&[options.request_text(parent).as_bytes()]),
            )
        });
        if let Some((key, digest)) = &request {
            if let Some(plan) = self.fork_of_request(parent, key, digest)? {
                return Ok((plan, None));
            }
        }
        let chain = self.chain(parent)?;
        let parent_facts = chain.leaf();
        let depth = chain.len();
        if depth > MAX_FORK_DEPTH {
            return Err(Error::ForkTooDeep {
                parent: parent.to_string(),
                depth,
                max: MAX_FORK_DEPTH,
            });
        }
        let at = self.fork_point(parent, &chain, &options)?;
        let child = match &options.id {
            Some(id) => SessionId::new(id.clone())?,
            None => SessionId::generate(),
        };
        if self.exists(&child)? {
            return Err(Error::Conflict(format!("session {child} already exists")));
        }
        let label = self.fork_label(parent_facts, options.label.as_deref(), &child)?;
        let principal = match &options.principal {
            Some(p) => Agent::principal(p.clone())?,
            None => self.principal_of(parent_facts),
        };
        let base_digest = match at {
            0 => None,
            k => Some(self.digest_in_chain(&chain, k - 1)?),
        };
        let summary = match (options.summarize, at) {
            (false, _) => None,
            (true, 0) => Some(crate::engine::summary::summarize(&[])),
            (true, k) => Some(crate::engine::summary::summarize(
                &self.load(parent, Some(k - 1))?,
            )),
        };
        let plan = ForkPlan {
            session: child.clone(),
            parent: parent.clone(),
            forked_at_index: at,
            branch: label.to_string(),
            fork_root: chain.root().id.clone(),
            depth,
            summary,
            reused: false,
        };
        if options.dry_run {
            return Ok((plan, None));
        }
        let created = rdf::now();
        let child_iri = self.session_iri(&child);
        tx.insert(session_quads(
            &self.iris,
            &SessionRecord {
                id: child.as_str(),
                branch: label.as_str(),
                principal: &principal,
                title: None,
                depth,
                fork_root: &chain.root().iri,
                created: &created,
            },
            Some(&ForkRecord {
                parent: &parent_facts.iri,
                at,
                base_digest: base_digest.as_deref(),
                reason: options.reason.as_deref(),
            }),
        ));
        tx.insert(fork_request_quads(
            &child_iri,
            plan.summary.as_deref(),
            request.as_ref().map(|(k, d)| (k.as_str(), d.as_str())),
        ));
        tx.claim_node(&child_iri, &child_iri);
        tx.claim_label(&parent_facts.iri, label.as_str());
        tx.forget(&child_iri);
        let facts = SessionNode {
            id: child,
            iri: child_iri,
            branch: label.to_string(),
            parent: Some(parent_facts.iri.clone()),
            forked_at: Some(at),
            depth: depth as u64,
            fork_root: Some(chain.root().iri.clone()),
            length: at,
            base_digest,
            principal: Some(self.iris.agent(&principal)),
            title: None,
            created: Some(created.value().to_string()),
            summary: plan.summary.clone(),
            request_digest: request.map(|(_, digest)| digest),
        };
        tx.created(&facts, None);
        Ok((plan, Some(facts)))
    }

    /// The branch label of a new child of `parent`: the one asked for, unless a sibling
    /// has it, or a fresh `fork-<8 hex>`.
    fn fork_label(
        &self,
        parent: &SessionNode,
        asked: Option<&str>,
        child: &SessionId,
    ) -> Result<Label> {
        let Some(label) = asked else {
            return self.fresh_label(&parent.iri, child);
        };
        let label = Label::new(label)?;
        match self.rdf().child_with_label(&parent.iri, &label)? {
            Some(existing) => Err(Error::DuplicateLabel {
                parent: parent.id.to_string(),
                label: label.to_string(),
                existing: existing.to_string(),
            }),
            None => Ok(label),
        }
    }

    /// Who a session runs for: its recorded principal, else anonymous.
    fn principal_of(&self, session: &SessionNode) -> Agent {
        session
            .principal
            .as_ref()
            .and_then(|p| self.iris.parse_agent(p.as_ref()))
            .unwrap_or_else(|| Agent::Principal(ANONYMOUS.into()))
    }

    /// The fork point `options` asks for: an index, an anchor, or the parent's length.
    fn fork_point(&self, parent: &SessionId, chain: &Chain, options: &ForkOptions) -> Result<u64> {
        let len = chain.leaf().length;
        match (options.at, &options.anchor) {
            (Some(_), Some(_)) => Err(Error::InvalidInput(
                "give a fork point or an anchor, not both".into(),
            )),
            (None, Some(name)) => self.anchor_index(parent, chain, name),
            (None, None) => Ok(len),
            (Some(k), None) if k <= len => Ok(k),
            (Some(k), None) => Err(Error::IndexOutOfRange {
                session: parent.to_string(),
                index: k.into(),
                valid: format!("0..={len} (a fork point)"),
            }),
        }
    }

    /// The fork an earlier request with this key made, if any: its plan when the
    /// options match, a conflict when they do not.
    fn fork_of_request(
        &self,
        parent: &SessionId,
        key: &str,
        digest: &str,
    ) -> Result<Option<ForkPlan>> {
        for iri in self.rdf().sessions_of_request(key)? {
            let Some(f) = self.facts_of(iri.as_ref())? else {
                continue;
            };
            if f.request_digest.as_deref() != Some(digest) {
                return Err(Error::Conflict(format!(
                    "request id {key:?} already made fork {} with other options; use a new \
                     request id for a different fork",
                    f.id
                )));
            }
            let root = f
                .fork_root
                .as_ref()
                .and_then(|r| self.iris.session_id(r.as_ref()));
            return Ok(Some(ForkPlan {
                session: f.id.clone(),
                parent: parent.clone(),
                forked_at_index: f.own_start(),
                branch: f.branch.clone(),
                fork_root: root.unwrap_or_else(|| f.id.clone()),
                depth: f.depth as usize,
                summary: f.summary.clone(),
                reused: true,
            }));
        }
        Ok(None)
    }

    /// Materialises the inherited prefix of fork `id` into it (same indices, roles,
    /// contents and digests; each copy derived from its original) and drops its
    /// `ft:parentSession`, so the parent may be deleted. PROV lineage stays. Returns
    /// what was copied and which descendants moved up.
    pub fn detach(&self, id: &SessionId) -> Result<DetachPlan> {
        self.detach_with(id, DetachOptions::default())
    }

    /// [`Store::detach`], or with `options.dry_run` only its plan.
    pub fn detach_with(&self, id: &SessionId, options: DetachOptions) -> Result<DetachPlan> {
        let mut tx = self.write()?;
        let chain = self.chain(id)?;
        let leaf = chain.leaf().clone();
        let (Some(parent), Some(ancestors)) = (leaf.parent.clone(), chain.ancestors()) else {
            return Err(Error::InvalidInput(format!(
                "session {id} is not a fork (it has no parent); nothing to detach"
            )));
        };
        let k = leaf.own_start();
        let mut copied_from: Vec<TurnSpan> = Vec::new();
        let mut owners = Vec::new();
        for index in 0..k {
            let owner = ancestors.owner_of(index).ok_or_else(|| Error::Corrupt {
                session: id.to_string(),
                detail: format!("no ancestor owns inherited turn {index}"),
            })?;
            match copied_from.last_mut() {
                Some(span) if span.session == owner.id => span.to = index + 1,
                _ => copied_from.push(TurnSpan {
                    session: owner.id.clone(),
                    branch: owner.branch.clone(),
                    from: index,
                    to: index + 1,
                }),
            }
            owners.push(owner);
        }
        let subtree = self.subtree_of(leaf.clone())?;
        let plan = DetachPlan {
            session: id.clone(),
            parent: self
                .iris
                .session_id(parent.as_ref())
                .ok_or_else(|| Error::Corrupt {
                    session: id.to_string(),
                    detail: format!("parent {parent} is not a session IRI of this store"),
                })?,
            copied_turns: k,
            copied_from,
            moved_up: subtree[1..]
                .iter()
                .map(|f| MovedSession {
                    session: f.id.clone(),
                    depth_before: f.depth,
                    depth_after: f.depth.saturating_sub(leaf.depth),
                })
                .collect(),
        };
        if options.dry_run {
            return Ok(plan);
        }
        let rdf = self.rdf();
        // The copies are attributed as their originals are; agents are declared
        // store-wide, so there is nothing to declare.
        for (index, owner) in owners.into_iter().enumerate() {
            let original = self.iris.turn(owner.id.as_str(), index as u64);
            let copy = self.iris.turn(id.as_str(), index as u64);
            let quads = rdf.about(original.as_ref(), owner.iri.as_ref())?;
            tx.insert(detach_copy(
                quads,
                &original,
                &copy,
                &leaf.iri,
                &owner.branch,
            ));
        }
        let (inserts, removes) = detach_change(&self.iris, &subtree, &parent, rdf::now());
        tx.insert(inserts);
        tx.remove(removes);
        // The subtree's depth and root changed, and the session now owns its prefix.
        for f in &subtree {
            tx.forget(&f.iri);
        }
        tx.commit()?;
        Ok(plan)
    }

    /// Deletes session `id`. A session with children is refused unless `cascade`, which
    /// deletes the whole subtree in one transaction. Returns the deleted ids.
    pub fn delete(&self, id: &SessionId, cascade: bool) -> Result<Vec<SessionId>> {
        let options = DeleteOptions {
            cascade,
            dry_run: false,
        };
        Ok(self.delete_with(id, options)?.deleted)
    }

    /// [`Store::delete`] with what it removed, or with `options.dry_run` only the plan
    /// (the same refusal, naming the children, when the session has some and
    /// `options.cascade` is off).
    pub fn delete_with(&self, id: &SessionId, options: DeleteOptions) -> Result<DeletePlan> {
        self.not_held(id)?;
        // A cascade reaches the whole subtree: claim the store.
        let mut tx = self.write()?;
        let facts = self.require(id)?;
        let children = self.children_of(&facts.iri)?;
        if !children.is_empty() && !options.cascade {
            return Err(Error::HasChildren {
                session: id.to_string(),
                children: children.into_iter().map(|c| c.id.to_string()).collect(),
            });
        }
        let doomed = self.subtree_of(facts)?;
        let sessions: Vec<DeletedSession> = doomed
            .iter()
            .map(|f| DeletedSession {
                session: f.id.clone(),
                branch: f.branch.clone(),
                parent: f
                    .parent
                    .as_ref()
                    .and_then(|p| self.iris.session_id(p.as_ref())),
                own_turns: f.own_turns(),
            })
            .collect();
        let plan = DeletePlan {
            deleted: sessions.iter().map(|s| s.session.clone()).collect(),
            own_turns: sessions.iter().map(|s| s.own_turns).sum(),
            sessions,
            dry_run: options.dry_run,
        };
        if options.dry_run {
            return Ok(plan);
        }
        for f in doomed {
            tx.drop_graph(f.iri);
        }
        tx.commit()?;
        Ok(plan)
    }

    /// The digest of the turn before `index` in session `f` (empty before index 0).
    pub(crate) fn digest_before(&self, f: &SessionNode, index: u64) -> Result<String> {
        if index == 0 {
            return Ok(String::new());
        }
        if index > f.own_start() {
            return self.rdf().digest(f, index - 1);
        }
        f.base_digest.clone().ok_or_else(|| Error::Corrupt {
            session: f.id.to_string(),
            detail: "a fork with inherited turns but no ft:baseDigest".into(),
        })
    }

    /// `fork-<8 hex>` from the random tail of the child's id, unique among siblings.
    fn fresh_label(&self, parent: &NamedNode, child: &SessionId) -> Result<Label> {
        let mut seed = child.as_str().replace('-', "");
        loop {
            let tail = &seed[seed.len().saturating_sub(8)..];
            let hex = if tail.len() == 8 && tail.bytes().all(|b| b.is_ascii_hexdigit()) {
                tail.to_ascii_lowercase()
            } else {
                uuid::Uuid::now_v7().simple().to_string()[24..].to_string()
            };
            let label = Label::new(format!("fork-{hex}"))?;
            if self.rdf().child_with_label(parent, &label)?.is_none() {
                return Ok(label);
            }
            seed = uuid::Uuid::now_v7().simple().to_string();
        }
    }
}
