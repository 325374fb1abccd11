//! The write path: create, append, fork, detach, delete. Each operation validates
//! everything first, then writes in one transaction under the store's write lock.

use crate::error::{Error, Result};
use crate::model::{
    check_key, Agent, DeleteOptions, DeletePlan, DeletedSession, DetachOptions, DetachPlan,
    ForkOptions, ForkPlan, Label, MovedSession, NewSession, NewTurn, ReplayRecord, SessionId,
    TurnSpan, MAX_FORK_DEPTH,
};
use crate::prov::{self, ForkRecord, GraphWriter, SessionRecord, TurnRecord};
use crate::replay::Facts;
use crate::store::Store;
use crate::vocab::{ft, prov as p, rdf};
use oxigraph::model::{
    GraphName, GraphNameRef, Literal, NamedNode, NamedOrBlankNode, Quad, QuadRef, Term,
};
use std::collections::HashSet;

const ANONYMOUS: &str = "anonymous";

/// SHA-256 over what a fork request asked for, as given (not as resolved), so a retry
/// matches even after the parent has grown.
fn request_digest(parent: &SessionId, o: &ForkOptions) -> String {
    let fields = serde_json::json!([
        parent.as_str(),
        o.at,
        o.anchor,
        o.label,
        o.reason,
        o.principal,
        o.id,
        o.summarize
    ]);
    prov::sha256_hex(&[fields.to_string().as_bytes()])
}

impl Store {
    /// Creates a root session and returns its id.
    pub fn create_session(&self, options: NewSession) -> Result<SessionId> {
        let id = match options.id {
            Some(id) => SessionId::new(id)?,
            None => SessionId::generate(),
        };
        let principal = Agent::principal(options.principal.as_deref().unwrap_or(ANONYMOUS))?;
        let _guard = self.write_guard();
        if self.exists(&id)? {
            return Err(Error::Conflict(format!("session {id} already exists")));
        }
        let iri = self.session_iri(&id);
        let quads = prov::session_quads(
            &self.iris,
            &SessionRecord {
                id: id.as_str(),
                branch: Label::MAIN,
                principal: &principal,
                title: options.title.as_deref(),
                depth: 0,
                fork_root: &iri,
                created: &prov::now(),
            },
            None,
        );
        self.commit(&quads, &[])?;
        self.cache().forget(iri.as_str());
        Ok(id)
    }

    /// Appends a turn to `id` and returns the index it was given (the session's length
    /// before the append).
    pub fn append(&self, id: &SessionId, turn: NewTurn) -> Result<u64> {
        self.append_with(id, turn, |_, _, _| {})
    }

    /// [`Store::append`] with `extra` quads about the new turn, as
    /// [`Store::append_locked`] takes them.
    pub(crate) fn append_with(
        &self,
        id: &SessionId,
        turn: NewTurn,
        extra: impl FnOnce(&mut GraphWriter, &NamedNode, u64),
    ) -> Result<u64> {
        self.not_held(id)?;
        let _guard = self.write_guard();
        let facts = self.require(id)?;
        self.append_locked(&facts, turn, extra)
    }

    /// Appends under the write lock the caller holds; `extra` may add quads (to the
    /// session's graph) about the new turn `(writer, turn IRI, index)`, committed in the
    /// same transaction.
    pub(crate) fn append_locked(
        &self,
        facts: &Facts,
        turn: NewTurn,
        extra: impl FnOnce(&mut GraphWriter, &NamedNode, u64),
    ) -> Result<u64> {
        let (quads, record, digest) = self.turn_quads_locked(facts, turn, extra)?;
        self.commit(&quads, &[])?;
        let index = record.index;
        self.cache().appended(facts.iri.as_str(), record, digest);
        Ok(index)
    }

    /// The quads of turn `facts.length` of session `facts`, without committing them:
    /// the quads, the turn's replay record and its digest.
    pub(crate) fn turn_quads_locked(
        &self,
        facts: &Facts,
        turn: NewTurn,
        extra: impl FnOnce(&mut GraphWriter, &NamedNode, u64),
    ) -> Result<(Vec<Quad>, ReplayRecord, String)> {
        let id = &facts.id;
        // A turn is attributed to its model, else (a tool result) to its tool, else to
        // the session's principal.
        let software = match (&turn.model, turn.role, &turn.name) {
            (Some(model), _, _) => Some(Agent::model(model.clone())?),
            (None, crate::Role::Tool, Some(tool)) => Some(Agent::tool(tool.clone())?),
            _ => None,
        };
        if let Some(calls) = &turn.tool_calls {
            serde_json::from_str::<serde_json::Value>(calls).map_err(|e| {
                Error::InvalidInput(format!(
                    "tool_calls for session {id} is not valid JSON: {e}"
                ))
            })?;
        }
        let index = facts.length;
        // Its own statement, so the cache lock is released before the store is read.
        let cached = self.cache().head_digest(facts.iri.as_str(), index);
        let prev = match cached {
            Some(digest) => digest,
            None => self.digest_before(facts, index)?,
        };
        let digest = prov::turn_digest(&prev, index, turn.role, turn.kind, &turn.content);
        let mut w = GraphWriter::new(facts.iri.clone());
        let agent = match &software {
            Some(software) => self.declare_agent(&mut w, software)?,
            None => facts
                .principal
                .clone()
                .unwrap_or_else(|| self.iris.agent(&Agent::Principal(ANONYMOUS.into()))),
        };
        prov::turn_quads(
            &self.iris,
            &mut w,
            &TurnRecord {
                session: id,
                index,
                turn: &turn,
                by: &agent,
                digest: &digest,
                created: &prov::now(),
            },
        );
        extra(&mut w, &self.iris.turn(id, index), index);
        let record = ReplayRecord {
            index,
            role: turn.role,
            content: turn.content,
            branch: facts.branch.clone(),
        };
        Ok((w.quads, record, digest))
    }

    /// Forks `parent` at `options.at` (default: its length) or at `options.anchor`. The
    /// child shares the parent's turns `0..k` and writes a constant number of quads
    /// (plus a summary with `options.summarize`). With `options.dry_run` nothing is
    /// written and the plan is returned. With `options.request_id`, a retry returns the
    /// fork the first request made, and the same id with other options is a conflict.
    pub fn fork(&self, parent: &SessionId, options: ForkOptions) -> Result<ForkPlan> {
        let _guard = self.write_guard();
        let (plan, quads, _) = self.fork_locked(parent, options)?;
        if !quads.is_empty() {
            self.commit(&quads, &[])?;
            self.cache()
                .forget(self.iris.session(&plan.session).as_str());
        }
        Ok(plan)
    }

    /// Plans a fork under the write lock the caller holds: the plan, the quads to
    /// commit (none for a dry run or a reused request) and the child's facts as they
    /// will be once committed.
    pub(crate) fn fork_locked(
        &self,
        parent: &SessionId,
        options: ForkOptions,
    ) -> Result<(ForkPlan, Vec<Quad>, Option<Facts>)> {
        if let Some(key) = &options.request_id {
            check_key("request id", key)?;
        }
        let request = options
            .request_id
            .as_ref()
            .map(|key| (key.clone(), request_digest(parent, &options)));
        if let Some((key, digest)) = &request {
            if let Some(plan) = self.fork_of_request(parent, key, digest)? {
                return Ok((plan, Vec::new(), None));
            }
        }
        let chain = self.chain(parent)?;
        let parent_facts = chain.last().expect("a chain has a leaf");
        let depth = chain.len();
        if depth > MAX_FORK_DEPTH {
            return Err(Error::ForkTooDeep {
                parent: parent.to_string(),
                depth,
                max: MAX_FORK_DEPTH,
            });
        }
        let len = parent_facts.length;
        let at = match (options.at, &options.anchor) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidInput(
                    "give a fork point or an anchor, not both".into(),
                ))
            }
            (None, Some(name)) => self.anchor_index(parent, &chain, name)?,
            (None, None) => len,
            (Some(k), None) if (0..=len as i64).contains(&k) => k as u64,
            (Some(k), None) => {
                return Err(Error::IndexOutOfRange {
                    session: parent.to_string(),
                    index: k.into(),
                    valid: format!("0..={len} (a fork point)"),
                })
            }
        };
        let child = match options.id {
            Some(id) => SessionId::new(id)?,
            None => SessionId::generate(),
        };
        if self.exists(&child)? {
            return Err(Error::Conflict(format!("session {child} already exists")));
        }
        let label = match options.label {
            Some(label) => {
                let label = Label::new(label)?;
                if let Some(existing) = self.child_with_label(&parent_facts.iri, &label)? {
                    return Err(Error::DuplicateLabel {
                        parent: parent.to_string(),
                        label: label.to_string(),
                        existing,
                    });
                }
                label
            }
            None => self.fresh_label(&parent_facts.iri, &child)?,
        };
        let principal = match options.principal {
            Some(p) => Agent::principal(p)?,
            None => parent_facts
                .principal
                .as_ref()
                .and_then(|p| self.iris.parse_agent(p.as_ref()))
                .unwrap_or_else(|| Agent::Principal(ANONYMOUS.into())),
        };
        let base_digest = match at {
            0 => None,
            k => Some(self.digest_in_chain(&chain, k - 1)?),
        };
        let summary = match (options.summarize, at) {
            (false, _) => None,
            (true, 0) => Some(crate::summary::summarize(&[])),
            (true, k) => Some(crate::summary::summarize(&self.load(parent, Some(k - 1))?)),
        };
        let plan = ForkPlan {
            session: child.to_string(),
            parent: parent.to_string(),
            forked_at_index: at,
            branch: label.to_string(),
            fork_root: chain[0].id.clone(),
            depth,
            summary,
            reused: false,
        };
        if options.dry_run {
            return Ok((plan, Vec::new(), None));
        }
        let created = prov::now();
        let mut quads = prov::session_quads(
            &self.iris,
            &SessionRecord {
                id: child.as_str(),
                branch: label.as_str(),
                principal: &principal,
                title: None,
                depth,
                fork_root: &chain[0].iri,
                created: &created,
            },
            Some(&ForkRecord {
                parent: &parent_facts.iri,
                at,
                base_digest: base_digest.as_deref(),
                reason: options.reason.as_deref(),
            }),
        );
        let child_iri = self.session_iri(&child);
        let mut w = GraphWriter::new(child_iri.clone());
        if let Some(summary) = &plan.summary {
            w.add(
                &child_iri,
                ft::SUMMARY,
                Literal::new_simple_literal(summary),
            );
        }
        if let Some((key, digest)) = &request {
            w.add(&child_iri, ft::REQUEST_ID, Literal::new_simple_literal(key));
            w.add(
                &child_iri,
                ft::REQUEST_DIGEST,
                Literal::new_simple_literal(digest),
            );
        }
        quads.extend(w.quads);
        let facts = Facts {
            id: child.to_string(),
            iri: child_iri,
            branch: label.to_string(),
            parent: Some(parent_facts.iri.clone()),
            forked_at: Some(at),
            depth: depth as u64,
            fork_root: Some(chain[0].iri.clone()),
            length: at,
            base_digest,
            principal: Some(self.iris.agent(&principal)),
            title: None,
            created: Some(created.value().to_string()),
            summary: plan.summary.clone(),
            request_digest: request.map(|(_, digest)| digest),
        };
        Ok((plan, quads, Some(facts)))
    }

    /// The fork an earlier request with this key made, if any: its plan when the
    /// options match, a conflict when they do not.
    fn fork_of_request(
        &self,
        parent: &SessionId,
        key: &str,
        digest: &str,
    ) -> Result<Option<ForkPlan>> {
        for (s, graph) in self.subjects_with(ft::REQUEST_ID, key)? {
            // A session node, in its own graph.
            if graph != s {
                continue;
            }
            let Some(f) = self.facts_of(s.as_ref())? else {
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
                parent: parent.to_string(),
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
        let _guard = self.write_guard();
        let chain = self.chain(id)?;
        let leaf = chain.last().expect("a chain has a leaf").clone();
        let Some(parent) = leaf.parent.clone() else {
            return Err(Error::InvalidInput(format!(
                "session {id} is not a fork (it has no parent); nothing to detach"
            )));
        };
        let k = leaf.own_start();
        let ancestors = &chain[..chain.len() - 1];
        let mut copied_from: Vec<TurnSpan> = Vec::new();
        for index in 0..k {
            let owner = Store::owner_of(ancestors, index).ok_or_else(|| Error::Corrupt {
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
        }
        // The detached session becomes a root: it and its descendants move up.
        let shift = leaf.depth;
        let subtree = self.subtree_of(leaf.clone())?;
        let plan = DetachPlan {
            session: id.to_string(),
            parent: self
                .iris
                .session_id(parent.as_ref())
                .unwrap_or_else(|| parent.as_str().to_string()),
            copied_turns: k,
            copied_from,
            moved_up: subtree[1..]
                .iter()
                .map(|f| MovedSession {
                    session: f.id.clone(),
                    depth_before: f.depth,
                    depth_after: f.depth.saturating_sub(shift),
                })
                .collect(),
        };
        if options.dry_run {
            return Ok(plan);
        }
        let graph = GraphName::NamedNode(leaf.iri.clone());
        let mut inserts = Vec::new();
        let mut removes = Vec::new();
        let mut agents = HashSet::new();
        for index in 0..k {
            let owner = Store::owner_of(ancestors, index).expect("checked for the plan");
            let original = self.iris.turn(&owner.id, index);
            let copy = self.iris.turn(id.as_str(), index);
            let mut has_branch = false;
            for quad in self.inner.quads_for_pattern(
                Some(original.as_ref().into()),
                None,
                None,
                Some(owner.iri.as_ref().into()),
            ) {
                let quad = quad?;
                has_branch |= quad.predicate == ft::BRANCH;
                if quad.predicate == p::WAS_ATTRIBUTED_TO {
                    if let Term::NamedNode(agent) = &quad.object {
                        if agents.insert(agent.clone()) {
                            self.copy_subject(agent, &owner.iri, &graph, &mut inserts)?;
                        }
                    }
                }
                inserts.push(Quad::new(
                    copy.clone(),
                    quad.predicate,
                    quad.object,
                    graph.clone(),
                ));
            }
            if !has_branch {
                let branch = Literal::new_simple_literal(&owner.branch);
                inserts.push(Quad::new(copy.clone(), ft::BRANCH, branch, graph.clone()));
            }
            inserts.push(Quad::new(
                copy,
                p::WAS_DERIVED_FROM,
                original,
                graph.clone(),
            ));
        }
        // ft:forkedAtIndex and ft:baseDigest stay as history: a session owns indices
        // from its fork point only while it has a parent.
        removes.push(Quad::new(
            leaf.iri.clone(),
            ft::PARENT_SESSION,
            parent.clone(),
            graph.clone(),
        ));
        let activity = self.iris.activity(id.as_str(), "detach");
        let mut w = GraphWriter::new(leaf.iri.clone());
        w.add(&activity, rdf::TYPE, ft::DETACH);
        w.add(&activity, rdf::TYPE, p::ACTIVITY);
        w.add(&activity, p::USED, parent);
        w.add(&activity, p::STARTED_AT_TIME, prov::now());
        w.add(&leaf.iri, p::WAS_INFLUENCED_BY, activity);
        inserts.extend(w.quads);
        for f in &subtree {
            let g = GraphName::NamedNode(f.iri.clone());
            removes.push(Quad::new(
                f.iri.clone(),
                ft::FORK_DEPTH,
                Literal::from(f.depth),
                g.clone(),
            ));
            inserts.push(Quad::new(
                f.iri.clone(),
                ft::FORK_DEPTH,
                Literal::from(f.depth.saturating_sub(shift)),
                g.clone(),
            ));
            if let Some(root) = &f.fork_root {
                removes.push(Quad::new(
                    f.iri.clone(),
                    ft::FORK_ROOT,
                    root.clone(),
                    g.clone(),
                ));
            }
            inserts.push(Quad::new(f.iri.clone(), ft::FORK_ROOT, leaf.iri.clone(), g));
        }
        self.commit(&inserts, &removes)?;
        // The subtree's depth and root changed, and the session now owns its prefix.
        let mut cache = self.cache();
        for f in &subtree {
            cache.forget(f.iri.as_str());
        }
        Ok(plan)
    }

    /// Deletes session `id`. A session with children is refused unless `cascade`, which
    /// deletes the whole subtree in one transaction. Returns the deleted ids.
    pub fn delete(&self, id: &SessionId, cascade: bool) -> Result<Vec<String>> {
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
        let _guard = self.write_guard();
        let facts = self.require(id)?;
        let children = self.children_of(&facts.iri)?;
        if !children.is_empty() && !options.cascade {
            return Err(Error::HasChildren {
                session: id.to_string(),
                children: children.into_iter().map(|c| c.id).collect(),
            });
        }
        let doomed = self.subtree_of(facts)?;
        let sessions: Vec<DeletedSession> = doomed
            .iter()
            .map(|f| DeletedSession {
                session: f.id.clone(),
                branch: f.branch.clone(),
                parent: f.parent.as_ref().map(|p| {
                    self.iris
                        .session_id(p.as_ref())
                        .unwrap_or_else(|| p.as_str().into())
                }),
                own_turns: f.length.saturating_sub(f.own_start()),
            })
            .collect();
        let plan = DeletePlan {
            deleted: sessions.iter().map(|s| s.session.clone()).collect(),
            own_turns: sessions.iter().map(|s| s.own_turns).sum(),
            sessions,
        };
        if options.dry_run {
            return Ok(plan);
        }
        let mut tx = self.inner.start_transaction()?;
        for f in &doomed {
            tx.remove_named_graph(f.iri.as_ref())?;
        }
        tx.commit()?;
        let mut cache = self.cache();
        for f in &doomed {
            cache.forget(f.iri.as_str());
        }
        Ok(plan)
    }

    /// `root` and every session below it, parents before children.
    pub(crate) fn subtree_of(&self, root: Facts) -> Result<Vec<Facts>> {
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

    /// Inserts then removes in one transaction: all or nothing.
    pub(crate) fn commit(&self, inserts: &[Quad], removes: &[Quad]) -> Result<()> {
        let mut tx = self.inner.start_transaction()?;
        for q in removes {
            tx.remove(q);
        }
        for q in inserts {
            tx.insert(q);
        }
        tx.commit()?;
        Ok(())
    }

    /// The agent's IRI, declaring it in the writer's graph unless already declared there.
    fn declare_agent(&self, w: &mut GraphWriter, agent: &Agent) -> Result<NamedNode> {
        let iri = self.iris.agent(agent);
        let declared = self.inner.contains(QuadRef::new(
            iri.as_ref(),
            rdf::TYPE,
            prov::agent_class(agent),
            GraphNameRef::NamedNode(w.graph.as_ref()),
        ))?;
        if !declared {
            w.agent(&self.iris, agent);
        }
        Ok(iri)
    }

    fn copy_subject(
        &self,
        subject: &NamedNode,
        from: &NamedNode,
        to: &GraphName,
        out: &mut Vec<Quad>,
    ) -> Result<()> {
        for quad in self.inner.quads_for_pattern(
            Some(subject.as_ref().into()),
            None,
            None,
            Some(from.as_ref().into()),
        ) {
            let quad = quad?;
            out.push(Quad::new(
                quad.subject,
                quad.predicate,
                quad.object,
                to.clone(),
            ));
        }
        Ok(())
    }

    /// The digest of the turn before `index` in session `f` (empty before index 0).
    fn digest_before(&self, f: &Facts, index: u64) -> Result<String> {
        if index == 0 {
            return Ok(String::new());
        }
        if index > f.own_start() {
            return self.digest_of(f, index - 1);
        }
        f.base_digest.clone().ok_or_else(|| Error::Corrupt {
            session: f.id.clone(),
            detail: "a fork with inherited turns but no ft:baseDigest".into(),
        })
    }

    /// The digest of turn `index` as seen from the leaf of `chain`.
    pub(crate) fn digest_in_chain(&self, chain: &[Facts], index: u64) -> Result<String> {
        let leaf = chain.last().expect("a chain has a leaf");
        let owner = Store::owner_of(chain, index).ok_or_else(|| Error::Corrupt {
            session: leaf.id.clone(),
            detail: format!("no session in the chain owns turn {index}"),
        })?;
        self.digest_of(owner, index)
    }

    fn digest_of(&self, owner: &Facts, index: u64) -> Result<String> {
        let turn = self.iris.turn(&owner.id, index);
        for quad in self.inner.quads_for_pattern(
            Some(turn.as_ref().into()),
            Some(ft::DIGEST),
            None,
            Some(owner.iri.as_ref().into()),
        ) {
            if let Term::Literal(l) = quad?.object {
                return Ok(l.value().to_string());
            }
        }
        Err(Error::Corrupt {
            session: owner.id.clone(),
            detail: format!("turn {index} has no ft:digest"),
        })
    }

    /// The id of the child of `parent` labelled `label`, if any.
    pub(crate) fn child_with_label(
        &self,
        parent: &NamedNode,
        label: &Label,
    ) -> Result<Option<String>> {
        let literal = Literal::new_simple_literal(label.as_str());
        for quad in self.inner.quads_for_pattern(
            None,
            Some(ft::BRANCH),
            Some(literal.as_ref().into()),
            None,
        ) {
            let quad = quad?;
            let NamedOrBlankNode::NamedNode(s) = &quad.subject else {
                continue;
            };
            let g = GraphNameRef::NamedNode(s.as_ref());
            if quad.graph_name.as_ref() == g
                && self.inner.contains(QuadRef::new(
                    s.as_ref(),
                    ft::PARENT_SESSION,
                    parent.as_ref(),
                    g,
                ))?
            {
                return Ok(Some(
                    self.iris
                        .session_id(s.as_ref())
                        .unwrap_or_else(|| s.as_str().into()),
                ));
            }
        }
        Ok(None)
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
            if self.child_with_label(parent, &label)?.is_none() {
                return Ok(label);
            }
            seed = uuid::Uuid::now_v7().simple().to_string();
        }
    }
}
