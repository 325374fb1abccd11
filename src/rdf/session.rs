//! Session nodes: each session's lineage facts, on its node in its own graph; forks and
//! their activity; the edits a detach makes; the links of a sub-agent's transcript.

use super::{literal, text, GraphWriter, Iris, Rdf};
use crate::error::{Error, Result};
use crate::model::{Agent, Label, SessionId, SubAgentInfo, TurnRef};
use crate::vocab::{dcterms, ft, prov, rdf};
use oxigraph::model::{GraphName, GraphNameRef, Literal, NamedNode, NamedNodeRef, Quad, Term};
use std::collections::HashMap;
use std::fmt::Write as _;

/// The lineage facts of one session, as stored on the session node in its own graph.
/// `length` is not stored (the node never changes on append): readers find it.
#[derive(Clone, Debug)]
pub(crate) struct SessionNode {
    pub(crate) id: SessionId,
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

impl SessionNode {
    /// A node known by its lineage alone (id, IRI, parent, fork point); the other facts
    /// empty.
    pub(crate) fn lineage(
        id: SessionId,
        iri: NamedNode,
        parent: Option<NamedNode>,
        forked_at: Option<u64>,
    ) -> Self {
        SessionNode {
            id,
            iri,
            branch: String::new(),
            parent,
            forked_at,
            depth: 0,
            fork_root: None,
            length: 0,
            base_digest: None,
            principal: None,
            title: None,
            created: None,
            summary: None,
            request_digest: None,
        }
    }

    /// The first index this session owns: its fork point, or 0 for a root.
    pub(crate) fn own_start(&self) -> u64 {
        if self.parent.is_some() {
            self.forked_at.unwrap_or(0)
        } else {
            0
        }
    }

    /// Turns stored in this session's own graph.
    pub(crate) fn own_turns(&self) -> u64 {
        self.length.saturating_sub(self.own_start())
    }

    /// Decodes the node of graph `iri` from its quads; `None` if it is not a session.
    fn decode(iris: &Iris, iri: NamedNodeRef<'_>, quads: Vec<Quad>) -> Result<Option<Self>> {
        let mut is_session = false;
        let (mut id, mut branch) = (None, None);
        let placeholder = SessionId::new("x").expect("a valid id");
        let mut node = SessionNode::lineage(placeholder, iri.into_owned(), None, None);
        for quad in quads {
            let p = quad.predicate.as_ref();
            let o = quad.object;
            let int = |t: &Term| text(t).and_then(|v| v.parse::<u64>().ok());
            let owned = |t: &Term| text(t).map(str::to_string);
            if p == rdf::TYPE {
                is_session |= o == Term::from(ft::SESSION.into_owned());
            } else if p == ft::SESSION_ID {
                id = owned(&o);
            } else if p == ft::BRANCH {
                branch = owned(&o);
            } else if p == ft::FORKED_AT_INDEX {
                node.forked_at = int(&o);
            } else if p == ft::FORK_DEPTH {
                node.depth = int(&o).unwrap_or(0);
            } else if p == ft::BASE_DIGEST {
                node.base_digest = owned(&o);
            } else if p == ft::SUMMARY {
                node.summary = owned(&o);
            } else if p == ft::REQUEST_DIGEST {
                node.request_digest = owned(&o);
            } else if p == dcterms::TITLE {
                node.title = owned(&o);
            } else if p == dcterms::CREATED {
                node.created = owned(&o);
            } else if p == ft::PARENT_SESSION {
                node.parent = named(o);
            } else if p == ft::FORK_ROOT {
                node.fork_root = named(o);
            } else if p == prov::WAS_ATTRIBUTED_TO {
                node.principal = named(o);
            }
        }
        if !is_session {
            return Ok(None);
        }
        let corrupt = |detail: &str| Error::Corrupt {
            session: iris.name_of(iri),
            detail: detail.into(),
        };
        let (Some(id), Some(branch)) = (id, branch) else {
            return Err(corrupt("the session node lacks ft:sessionId or ft:branch"));
        };
        node.id = SessionId::new(id).map_err(|e| corrupt(&e.to_string()))?;
        node.branch = branch;
        if node.parent.is_some() && node.forked_at.is_none() {
            return Err(corrupt("a fork without ft:forkedAtIndex"));
        }
        Ok(Some(node))
    }

    /// What the node says of the sub-agent whose transcript the session holds.
    fn decode_sub_agent(iris: &Iris, quads: &[Quad]) -> Option<SubAgentInfo> {
        let mut info = SubAgentInfo::default();
        let mut any = false;
        for quad in quads {
            let p = quad.predicate.as_ref();
            let value = text(&quad.object).map(str::to_string);
            if p == ft::AGENT_ID {
                info.agent_id = value.unwrap_or_default();
            } else if p == ft::SPAWN_TOOL_CALL_ID {
                info.tool_call_id = value;
            } else if p == ft::SPAWNED_IN_SESSION {
                info.spawned_in_session = value;
            } else if p == ft::SPAWNED_BY {
                if let Term::NamedNode(turn) = &quad.object {
                    info.spawned_by = iris
                        .turn_index(turn.as_ref())
                        .map(|(session, index)| TurnRef { session, index });
                }
            } else {
                continue;
            }
            any = true;
        }
        any.then_some(info)
    }
}

/// The session node of graph `iri` from its `quads` (see `SessionNode::decode`).
pub(super) fn decode_node(
    iris: &Iris,
    iri: NamedNodeRef<'_>,
    quads: Vec<Quad>,
) -> Result<Option<SessionNode>> {
    SessionNode::decode(iris, iri, quads)
}

fn named(term: Term) -> Option<NamedNode> {
    match term {
        Term::NamedNode(n) => Some(n),
        _ => None,
    }
}

impl Rdf<'_> {
    /// For a store across a network, in one request: the node of session `iri` and of
    /// the first `ancestors` sessions its `parentSession` links reach, each with its
    /// length (from the largest turn index and the number of turns, which must agree:
    /// turns are contiguous).
    ///
    /// The ancestors are reached by one UNION branch per level, each a plain join of
    /// `parentSession` patterns: Virtuoso 7 answers `parentSession*` followed by
    /// `GRAPH ?g` with missing rows, and a VALUES block inside a UNION branch with none.
    /// Each branch reads its own graph (`… parentSession ?g . GRAPH ?g { … }` in one
    /// group, the session's own graph named): a `GRAPH ?g` joined to the UNION of the
    /// levels from outside it was read for every graph of the store before the join
    /// (measured on Oxigraph server: 110-180 ms at 12,000 sessions, against 4 ms).
    pub(crate) fn nodes_with_lengths(
        &self,
        iri: NamedNodeRef<'_>,
        ancestors: usize,
    ) -> Result<HashMap<NamedNode, SessionNode>> {
        let index = ft::INDEX;
        let lengths = |graph: &str| {
            format!(
                "(MAX(?i) AS ?max) (COUNT(DISTINCT ?t) AS ?n) WHERE {{ {graph} {{ ?t {index} ?i }}"
            )
        };
        let mut branches = vec![
            format!("{{ BIND({iri} AS ?g) GRAPH {iri} {{ {iri} ?p ?o }} }}"),
            format!(
                "{{ SELECT ?g {} BIND({iri} AS ?g) }} GROUP BY ?g }}",
                lengths(&format!("GRAPH {iri}"))
            ),
        ];
        for level in 1..=ancestors {
            let mut steps = format!("{iri}");
            for hop in 1..level {
                let _ = write!(steps, " {} ?a{hop} . ?a{hop}", ft::PARENT_SESSION);
            }
            let reach = format!("{steps} {} ?g .", ft::PARENT_SESSION);
            branches.push(format!("{{ {reach} GRAPH ?g {{ ?g ?p ?o }} }}"));
            branches.push(format!(
                "{{ SELECT ?g {} }} GROUP BY ?g }}",
                lengths(&format!("{reach} GRAPH ?g"))
            ));
        }
        let query = format!(
            "SELECT ?g ?p ?o ?max ?n WHERE {{ {} }}",
            branches.join(" UNION ")
        );
        // Per graph: the node's quads, and (largest index, number) of its turns.
        type Rows = (Vec<Quad>, Option<(u64, u64)>);
        let mut facts: HashMap<NamedNode, Rows> = HashMap::new();
        for row in self.select_rows(&query)? {
            let Some(Term::NamedNode(g)) = row.get("g") else {
                continue;
            };
            let entry = facts.entry(g.clone()).or_default();
            let int = |v: &str| {
                row.get(v)
                    .and_then(text)
                    .and_then(|t| t.parse::<u64>().ok())
            };
            if let (Some(max), Some(n)) = (int("max"), int("n")) {
                entry.1 = Some((max, n));
            } else if let (Some(Term::NamedNode(p)), Some(o)) = (row.get("p"), row.get("o")) {
                let graph = GraphName::NamedNode(g.clone());
                let quad = Quad::new(g.clone(), p.clone(), o.clone(), graph);
                // A cycle reaches a graph at several levels: its rows come again.
                if !entry.0.contains(&quad) {
                    entry.0.push(quad);
                }
            }
        }
        let mut out = HashMap::new();
        for (g, (quads, ends)) in facts {
            let Some(mut node) = SessionNode::decode(self.iris, g.as_ref(), quads)? else {
                continue;
            };
            node.length = match ends {
                None => node.own_start(),
                Some((max, n))
                    if i128::from(max) + 1 - i128::from(n) == node.own_start().into() =>
                {
                    max + 1
                }
                Some((max, n)) => {
                    return Err(Error::Corrupt {
                        session: node.id.to_string(),
                        detail: format!(
                            "turn indices are not contiguous from {}: {n} turns, the largest \
                             index {max}",
                            node.own_start()
                        ),
                    })
                }
            };
            out.insert(g, node);
        }
        Ok(out)
    }

    /// The node of the session stored in graph `iri`, length not set (0).
    pub(crate) fn session_node(&self, iri: NamedNodeRef<'_>) -> Result<Option<SessionNode>> {
        SessionNode::decode(self.iris, iri, self.about(iri, iri)?)
    }

    /// The sub-agent facts on the node of session `iri`.
    pub(crate) fn sub_agent(&self, iri: NamedNodeRef<'_>) -> Result<Option<SubAgentInfo>> {
        Ok(SessionNode::decode_sub_agent(
            self.iris,
            &self.about(iri, iri)?,
        ))
    }

    /// Every session node of the store.
    pub(crate) fn sessions(&self) -> Result<Vec<NamedNode>> {
        self.sessions_where(rdf::TYPE, ft::SESSION.into_owned())
    }

    /// The sessions whose parent is `iri`.
    pub(crate) fn children(&self, iri: &NamedNode) -> Result<Vec<NamedNode>> {
        self.sessions_where(ft::PARENT_SESSION, iri.clone())
    }

    /// The child of `parent` labelled `label`, if any: one request on a store across a
    /// network, and a look at each child otherwise. Never a look at every session with
    /// the label (every first fork is `alt-1`): that made an import's label checks
    /// grow with the store.
    pub(crate) fn child_with_label(
        &self,
        parent: &NamedNode,
        label: &Label,
    ) -> Result<Option<SessionId>> {
        let label = literal(label.as_str());
        let found = if self.backend.exclusive() {
            let mut found = None;
            for child in self.children(parent)? {
                let named = Quad::new(
                    child.clone(),
                    ft::BRANCH,
                    label.clone(),
                    GraphName::NamedNode(child.clone()),
                );
                if self.backend.contains(named.as_ref())? {
                    found = Some(child);
                    break;
                }
            }
            found
        } else {
            let query = format!(
                "SELECT ?c WHERE {{ GRAPH ?c {{ ?c {} {parent} ; {} {label} }} }} LIMIT 1",
                ft::PARENT_SESSION,
                ft::BRANCH,
            );
            self.select_rows(&query)?
                .into_iter()
                .find_map(|row| match row.get("c") {
                    Some(Term::NamedNode(c)) => Some(c.clone()),
                    _ => None,
                })
        };
        found
            .map(|child| {
                self.iris
                    .session_id(child.as_ref())
                    .ok_or_else(|| Error::Corrupt {
                        session: child.to_string(),
                        detail: "a session IRI outside this store's base".into(),
                    })
            })
            .transpose()
    }

    /// The session nodes that wait for session `id` (as its source named it): imported
    /// with `ft:forkedFromId` `id` while `id` was not in the store.
    pub(crate) fn awaiting(&self, id: &str) -> Result<Vec<NamedNode>> {
        self.sessions_where(ft::FORKED_FROM_ID, literal(id))
    }

    /// The session its source says session `session` was forked from, while that one
    /// is not in the store.
    pub(crate) fn awaited_parent(&self, session: NamedNodeRef<'_>) -> Result<Option<String>> {
        for quad in self.backend.quads(
            Some(session.into()),
            Some(ft::FORKED_FROM_ID),
            None,
            Some(GraphNameRef::NamedNode(session)),
        ) {
            if let Term::Literal(value) = quad?.object {
                return Ok(Some(value.value().to_string()));
            }
        }
        Ok(None)
    }

    /// The sessions a fork request with id `key` made.
    pub(crate) fn sessions_of_request(&self, key: &str) -> Result<Vec<NamedNode>> {
        self.sessions_where(ft::REQUEST_ID, literal(key))
    }
}

/// The facts every session carries, root or fork.
pub(crate) struct SessionRecord<'a> {
    pub(crate) id: &'a str,
    pub(crate) branch: &'a str,
    pub(crate) principal: &'a Agent,
    pub(crate) title: Option<&'a str>,
    pub(crate) depth: usize,
    pub(crate) fork_root: &'a NamedNode,
    pub(crate) created: &'a Literal,
}

/// What makes a session a fork.
pub(crate) struct ForkRecord<'a> {
    pub(crate) parent: &'a NamedNode,
    pub(crate) at: u64,
    pub(crate) base_digest: Option<&'a str>,
    pub(crate) reason: Option<&'a str>,
}

/// The quads of a new session; with `fork`, also its lineage and the fork activity.
/// Their number does not depend on the parent's history.
pub(crate) fn session_quads(
    iris: &Iris,
    s: &SessionRecord<'_>,
    fork: Option<&ForkRecord<'_>>,
) -> Vec<Quad> {
    let iri = iris.session(s.id);
    let mut w = GraphWriter::new(iri.clone());
    let principal = w.agent(iris, s.principal);
    w.add(&iri, rdf::TYPE, ft::SESSION);
    w.add(&iri, rdf::TYPE, prov::ENTITY);
    w.add(&iri, ft::SESSION_ID, literal(s.id));
    w.add(&iri, ft::BRANCH, literal(s.branch));
    w.add(&iri, ft::FORK_DEPTH, Literal::from(s.depth as u64));
    w.add(&iri, ft::FORK_ROOT, s.fork_root.clone());
    w.add(&iri, prov::WAS_ATTRIBUTED_TO, principal.clone());
    w.add(&iri, dcterms::CREATED, s.created.clone());
    if let Some(title) = s.title {
        w.add(&iri, dcterms::TITLE, literal(title));
    }
    if let Some(f) = fork {
        let activity = iris.activity(s.id, "fork");
        w.add(&iri, ft::PARENT_SESSION, f.parent.clone());
        w.add(&iri, ft::FORKED_AT_INDEX, Literal::from(f.at));
        if let Some(digest) = f.base_digest {
            w.add(&iri, ft::BASE_DIGEST, literal(digest));
        }
        w.add(&iri, prov::WAS_DERIVED_FROM, f.parent.clone());
        w.add(&iri, prov::WAS_GENERATED_BY, activity.clone());
        w.add(&activity, rdf::TYPE, ft::FORK);
        w.add(&activity, rdf::TYPE, prov::ACTIVITY);
        w.add(&activity, prov::USED, f.parent.clone());
        w.add(&activity, prov::STARTED_AT_TIME, s.created.clone());
        w.add(&activity, prov::WAS_ASSOCIATED_WITH, principal);
        if let Some(reason) = f.reason {
            w.add(&activity, ft::REASON, literal(reason));
        }
    }
    w.quads
}

/// The quad recording that an imported root session's tool forked it from session
/// `parent` (as the source names it), which is not in the store yet.
pub(crate) fn awaited_parent_quad(iris: &Iris, id: &str, parent: &str) -> Quad {
    let iri = iris.session(id);
    Quad::new(
        iri.clone(),
        ft::FORKED_FROM_ID,
        literal(parent),
        GraphName::NamedNode(iri),
    )
}

/// Quad `quad` naming `to` where it named its object: a reference moved to another node.
pub(crate) fn repointed(quad: Quad, to: &NamedNode) -> Quad {
    Quad::new(quad.subject, quad.predicate, to.clone(), quad.graph_name)
}

/// The summary and the request id and digest a fork may carry.
pub(crate) fn fork_request_quads(
    session: &NamedNode,
    summary: Option<&str>,
    request: Option<(&str, &str)>,
) -> Vec<Quad> {
    let mut w = GraphWriter::new(session.clone());
    if let Some(summary) = summary {
        w.add(session, ft::SUMMARY, literal(summary));
    }
    if let Some((key, digest)) = request {
        w.add(session, ft::REQUEST_ID, literal(key));
        w.add(session, ft::REQUEST_DIGEST, literal(digest));
    }
    w.quads
}

/// The lineage edits of a detach: the link to `parent` goes (fork point and base digest
/// stay as history), a detach activity is recorded, and the session and its
/// descendants (`subtree`, the session first) move up by the session's depth with the
/// session as their fork root. Returns `(inserts, removes)`.
pub(crate) fn detach_change(
    iris: &Iris,
    subtree: &[SessionNode],
    parent: &NamedNode,
    now: Literal,
) -> (Vec<Quad>, Vec<Quad>) {
    let leaf = &subtree[0];
    let graph = GraphName::NamedNode(leaf.iri.clone());
    let mut removes = vec![Quad::new(
        leaf.iri.clone(),
        ft::PARENT_SESSION,
        parent.clone(),
        graph,
    )];
    let activity = iris.activity(leaf.id.as_str(), "detach");
    let mut w = GraphWriter::new(leaf.iri.clone());
    w.add(&activity, rdf::TYPE, ft::DETACH);
    w.add(&activity, rdf::TYPE, prov::ACTIVITY);
    w.add(&activity, prov::USED, parent.clone());
    w.add(&activity, prov::STARTED_AT_TIME, now);
    w.add(&leaf.iri, prov::WAS_INFLUENCED_BY, activity);
    let mut inserts = w.quads;
    let shift = leaf.depth;
    for f in subtree {
        let (lineage_removes, lineage_inserts) =
            lineage(f, f.depth.saturating_sub(shift), &leaf.iri);
        removes.extend(lineage_removes);
        inserts.extend(lineage_inserts);
    }
    (inserts, removes)
}

/// Replaces a session's depth and fork root: `(removes, inserts)`.
fn lineage(f: &SessionNode, depth: u64, root: &NamedNode) -> (Vec<Quad>, Vec<Quad>) {
    let g = GraphName::NamedNode(f.iri.clone());
    let mut removes = vec![Quad::new(
        f.iri.clone(),
        ft::FORK_DEPTH,
        Literal::from(f.depth),
        g.clone(),
    )];
    if let Some(old) = &f.fork_root {
        removes.push(Quad::new(
            f.iri.clone(),
            ft::FORK_ROOT,
            old.clone(),
            g.clone(),
        ));
    }
    let inserts = vec![
        Quad::new(
            f.iri.clone(),
            ft::FORK_DEPTH,
            Literal::from(depth),
            g.clone(),
        ),
        Quad::new(f.iri.clone(), ft::FORK_ROOT, root.clone(), g),
    ];
    (removes, inserts)
}

/// How a root session becomes a fork: of the last session of `chain` (root first), at
/// `at` (the root's first `at` turns, which repeat the parent's, ending in turn digest
/// `base_digest`, are dropped by the caller), labelled `label`, for `reason`.
pub(crate) struct Adoption<'a> {
    pub(crate) chain: &'a [SessionNode],
    pub(crate) at: u64,
    pub(crate) base_digest: Option<&'a str>,
    pub(crate) label: &'a str,
    pub(crate) reason: &'a str,
}

/// The edits that make root session `subtree[0]` a fork as `adoption` says: its node's
/// lineage facts are replaced by a fork's (what else it says stays; an awaited parent
/// goes), and its descendants move down by the new depth. Returns `(inserts,
/// removes)`; `node_quads` are the quads of the root's node as stored.
pub(crate) fn adopt_change(
    iris: &Iris,
    subtree: &[SessionNode],
    node_quads: &[Quad],
    adoption: &Adoption<'_>,
) -> (Vec<Quad>, Vec<Quad>) {
    let Adoption {
        chain,
        at,
        base_digest,
        label,
        reason,
    } = *adoption;
    let child = &subtree[0];
    let parent = chain.last().expect("a chain is never empty");
    let root = &chain[0].iri;
    let principal = child
        .principal
        .as_ref()
        .and_then(|p| iris.parse_agent(p.as_ref()))
        .unwrap_or_else(|| Agent::Principal("anonymous".into()));
    let created = child
        .created
        .as_deref()
        .map(|c| Literal::new_typed_literal(c, crate::vocab::xsd::DATE_TIME))
        .unwrap_or_else(super::now);
    let mut inserts = session_quads(
        iris,
        &SessionRecord {
            id: child.id.as_str(),
            branch: label,
            principal: &principal,
            title: child.title.as_deref(),
            depth: chain.len(),
            fork_root: root,
            created: &created,
        },
        Some(&ForkRecord {
            parent: &parent.iri,
            at,
            base_digest,
            reason: Some(reason),
        }),
    );
    let replaced = [
        ft::BRANCH,
        ft::FORK_DEPTH,
        ft::FORK_ROOT,
        rdf::TYPE,
        ft::SESSION_ID,
        prov::WAS_ATTRIBUTED_TO,
        dcterms::CREATED,
        dcterms::TITLE,
        ft::FORKED_FROM_ID,
    ];
    let mut removes: Vec<Quad> = node_quads
        .iter()
        .filter(|q| replaced.contains(&q.predicate.as_ref()))
        .cloned()
        .collect();
    let shift = chain.len() as u64;
    for f in &subtree[1..] {
        let (lineage_removes, lineage_inserts) = lineage(f, f.depth + shift, root);
        removes.extend(lineage_removes);
        inserts.extend(lineage_inserts);
    }
    (inserts, removes)
}

/// What a session holding a sub-agent's transcript says of it.
pub(crate) struct SubAgentFacts<'a> {
    pub(crate) agent_id: &'a str,
    pub(crate) spawned_in_session: Option<&'a str>,
    pub(crate) tool_call_id: Option<&'a str>,
    /// The launching turn, when it is in the store.
    pub(crate) spawned_by: Option<&'a NamedNode>,
}

/// The quads of a sub-agent's links on session node `session`; `spawned_by` also
/// says the session was derived from that turn.
pub(crate) fn sub_agent_quads(session: &NamedNode, facts: &SubAgentFacts<'_>) -> Vec<Quad> {
    let mut w = GraphWriter::new(session.clone());
    w.add(session, ft::AGENT_ID, literal(facts.agent_id));
    if let Some(log) = facts.spawned_in_session {
        w.add(session, ft::SPAWNED_IN_SESSION, literal(log));
    }
    if let Some(call) = facts.tool_call_id {
        w.add(session, ft::SPAWN_TOOL_CALL_ID, literal(call));
    }
    if let Some(turn) = facts.spawned_by {
        w.add(session, ft::SPAWNED_BY, turn.clone());
        w.add(session, prov::WAS_DERIVED_FROM, turn.clone());
    }
    w.quads
}
