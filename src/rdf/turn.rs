//! Turns, and the agents they are attributed to.

use super::{literal, text, GraphWriter, Iris, Rdf, SessionNode};
use crate::error::{Error, Result};
use crate::model::{Agent, Kind, NewTurn, ReplayRecord, Role, Turn};
use crate::vocab::{ft, prov, rdf, rdfs};
use oxigraph::model::{
    GraphName, GraphNameRef, Literal, NamedNode, NamedNodeRef, NamedOrBlankNode, Quad, QuadRef,
    Term,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// An agent's one class: `prov:Agent` for principals, `ft:Model` and `ft:Tool` (each a
/// `prov:SoftwareAgent` by the ontology, which the PROV export writes out) for the rest.
/// One class, so that a join through `?agent a ?class` meets each agent once.
fn agent_class(agent: &Agent) -> NamedNodeRef<'static> {
    match agent {
        Agent::Principal(_) => prov::AGENT,
        Agent::Model(_) => ft::MODEL,
        Agent::Tool(_) => ft::TOOL,
    }
}

impl GraphWriter {
    /// Declares an agent (its class and name) in the store's agents graph, once for
    /// the whole store: a triple repeated in many graphs would be met once per graph
    /// by a query over their union (Oxigraph's and Virtuoso's unions are bags).
    pub(crate) fn agent(&mut self, iris: &Iris, agent: &Agent) -> NamedNode {
        let iri = iris.agent(agent);
        let graph = GraphName::NamedNode(iris.agents_graph());
        self.quads.push(Quad::new(
            iri.clone(),
            rdf::TYPE,
            agent_class(agent),
            graph.clone(),
        ));
        self.quads.push(Quad::new(
            iri.clone(),
            rdfs::LABEL,
            literal(agent.name()),
            graph,
        ));
        iri
    }
}

/// One turn to record.
pub(crate) struct TurnRecord<'a> {
    pub(crate) session: &'a str,
    pub(crate) index: u64,
    pub(crate) turn: &'a NewTurn,
    /// The agent the turn is attributed to (declared by the caller, once per graph).
    pub(crate) by: &'a NamedNode,
    pub(crate) digest: &'a str,
    pub(crate) created: &'a Literal,
}

/// The quads of one turn: few, since they are the store's size and the replay's cost.
/// `ft:kind` is written only when it is not `message`.
pub(crate) fn turn_quads(iris: &Iris, w: &mut GraphWriter, r: &TurnRecord<'_>) {
    let (turn, index) = (r.turn, r.index);
    let iri = iris.turn(r.session, index);
    w.add(&iri, rdf::TYPE, ft::TURN);
    w.add(&iri, ft::INDEX, Literal::from(index));
    w.add(&iri, ft::ROLE, literal(turn.role.as_str()));
    if turn.kind != Kind::Message {
        w.add(&iri, ft::KIND, literal(turn.kind.as_str()));
    }
    w.add(&iri, ft::CONTENT, literal(&turn.content));
    w.add(&iri, ft::DIGEST, literal(r.digest));
    w.add(&iri, prov::WAS_ATTRIBUTED_TO, r.by.clone());
    w.add(&iri, prov::GENERATED_AT_TIME, r.created.clone());
    for (p, v) in [
        (ft::NAME, &turn.name),
        (ft::TOOL_CALL_ID, &turn.tool_call_id),
        (ft::TOOL_CALLS, &turn.tool_calls),
        (ft::PAYLOAD, &turn.payload),
    ] {
        if let Some(v) = v {
            w.add(&iri, p, literal(v));
        }
    }
}

/// The quads of turn `original` (`quads`, as stored in its owner's graph) copied into
/// `graph` as `copy`, keeping the original's branch label and deriving from it: what a
/// detach writes for each inherited turn.
pub(crate) fn detach_copy(
    quads: Vec<Quad>,
    original: &NamedNode,
    copy: &NamedNode,
    graph: &NamedNode,
    owner_branch: &str,
) -> Vec<Quad> {
    let g = GraphName::NamedNode(graph.clone());
    let has_branch = quads.iter().any(|q| q.predicate == ft::BRANCH);
    let mut out: Vec<Quad> = quads
        .into_iter()
        .map(|q| Quad::new(copy.clone(), q.predicate, q.object, g.clone()))
        .collect();
    if !has_branch {
        out.push(Quad::new(
            copy.clone(),
            ft::BRANCH,
            literal(owner_branch),
            g.clone(),
        ));
    }
    out.push(Quad::new(
        copy.clone(),
        prov::WAS_DERIVED_FROM,
        original.clone(),
        g,
    ));
    out
}

impl Rdf<'_> {
    /// Turn `index` stored in the graph of `owner`.
    pub(crate) fn turn(&self, owner: &SessionNode, index: u64) -> Result<Turn> {
        let iri = self.iris.turn(owner.id.as_str(), index);
        let quads = self.about(iri.as_ref(), owner.iri.as_ref())?;
        self.decode_turn(
            owner,
            index,
            quads.into_iter().map(|q| (q.predicate, q.object)),
        )
    }

    /// For a store across a network, in one request: the turns of `spans` (disjoint
    /// index ranges `from..to` of their owners), in index order; what [`Rdf::turn`]
    /// reads one request a turn.
    pub(crate) fn span_turns(&self, spans: &[(&SessionNode, u64, u64)]) -> Result<Vec<Turn>> {
        let spans: Vec<_> = spans.iter().filter(|s| s.1 < s.2).collect();
        if spans.is_empty() {
            return Ok(Vec::new());
        }
        let query = format!(
            "SELECT ?session ?index ?p ?o WHERE {{ {} }}",
            span_union(&spans, &format!("?turn {} ?index ; ?p ?o .", ft::INDEX)),
        );
        let mut found: BTreeMap<u64, Vec<(NamedNode, Term)>> = BTreeMap::new();
        for row in self.select_rows(&query)? {
            let (Some(Term::NamedNode(session)), Some(index), Some(Term::NamedNode(p)), Some(o)) = (
                row.get("session"),
                row.get("index")
                    .and_then(text)
                    .and_then(|i| i.parse::<u64>().ok()),
                row.get("p"),
                row.get("o"),
            ) else {
                continue;
            };
            if spans
                .iter()
                .any(|s| s.0.iri == *session && (s.1..s.2).contains(&index))
            {
                found.entry(index).or_default().push((p.clone(), o.clone()));
            }
        }
        let mut out = Vec::with_capacity(found.len());
        for (owner, from, to) in &spans {
            for index in *from..*to {
                match found.remove(&index) {
                    Some(about) => out.push(self.decode_turn(owner, index, about)?),
                    None => return Err(missing_turn(owner, index)),
                }
            }
        }
        Ok(out)
    }

    /// A turn from what its node says (predicate, object) in the graph of `owner`.
    pub(super) fn decode_turn(
        &self,
        owner: &SessionNode,
        index: u64,
        about: impl IntoIterator<Item = (NamedNode, Term)>,
    ) -> Result<Turn> {
        let mut t = Turn {
            index,
            role: Role::User,
            kind: Kind::Message,
            content: String::new(),
            name: None,
            tool_call_id: None,
            tool_calls: None,
            model: None,
            payload: None,
            session: owner.id.clone(),
            branch: owner.branch.clone(),
            created_at: None,
            digest: String::new(),
        };
        let (mut has_role, mut has_content) = (false, false);
        for (p, object) in about {
            let p = p.as_ref();
            if p == prov::WAS_ATTRIBUTED_TO {
                if let Term::NamedNode(agent) = &object {
                    if let Some(Agent::Model(m)) = self.iris.parse_agent(agent.as_ref()) {
                        t.model = Some(m);
                    }
                }
                continue;
            }
            let Some(v) = text(&object) else {
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
            } else if p == ft::PAYLOAD {
                t.payload = Some(v.to_string());
            } else if p == prov::GENERATED_AT_TIME {
                t.created_at = Some(v.to_string());
            }
        }
        if !(has_role && has_content) {
            return Err(missing_turn(owner, index));
        }
        Ok(t)
    }

    /// Every quad about turn `index` in the graph of `owner`: what removing it removes.
    pub(crate) fn turn_statements(&self, owner: &SessionNode, index: u64) -> Result<Vec<Quad>> {
        let turn = self.iris.turn(owner.id.as_str(), index);
        self.backend
            .quads(
                Some(turn.as_ref().into()),
                None,
                None,
                Some(GraphNameRef::NamedNode(owner.iri.as_ref())),
            )
            .collect()
    }

    /// The subject of a quad, in any graph, that names turn `index` of `owner` as its
    /// object: something that would dangle if the turn went.
    pub(crate) fn referrer_of_turn(
        &self,
        owner: &SessionNode,
        index: u64,
    ) -> Result<Option<String>> {
        let turn = self.iris.turn(owner.id.as_str(), index);
        self.backend
            .quads(None, None, Some(turn.as_ref().into()), None)
            .next()
            .map(|quad| quad.map(|q| q.subject.to_string()))
            .transpose()
    }

    /// Whether the graph of `owner` holds turn `index`.
    pub(crate) fn has_turn(&self, owner: &SessionNode, index: u64) -> Result<bool> {
        let turn = self.iris.turn(owner.id.as_str(), index);
        Ok(self
            .backend
            .quads(
                Some(turn.as_ref().into()),
                Some(ft::INDEX),
                None,
                Some(GraphNameRef::NamedNode(owner.iri.as_ref())),
            )
            .next()
            .transpose()?
            .is_some())
    }

    /// The branch labels the turns in the graph of `owner` carry of their own (turns a
    /// detach copied), by index: few or none, found through the graph's `ft:branch`
    /// quads rather than by reading every turn.
    pub(crate) fn turn_labels(&self, owner: &SessionNode) -> Result<BTreeMap<u64, String>> {
        let mut labels = BTreeMap::new();
        for quad in self.backend.quads(
            None,
            Some(ft::BRANCH),
            None,
            Some(GraphNameRef::NamedNode(owner.iri.as_ref())),
        ) {
            let quad = quad?;
            let NamedOrBlankNode::NamedNode(subject) = &quad.subject else {
                continue;
            };
            let Some((session, index)) = self.iris.turn_index(subject.as_ref()) else {
                continue;
            };
            if session == owner.id.as_str() {
                if let Some(label) = text(&quad.object) {
                    labels.insert(index, label.to_string());
                }
            }
        }
        Ok(labels)
    }

    /// The digest of turn `index` stored by `owner`.
    pub(crate) fn digest(&self, owner: &SessionNode, index: u64) -> Result<String> {
        let turn = self.iris.turn(owner.id.as_str(), index);
        for quad in self.backend.quads(
            Some(turn.as_ref().into()),
            Some(ft::DIGEST),
            None,
            Some(GraphNameRef::NamedNode(owner.iri.as_ref())),
        ) {
            if let Term::Literal(l) = quad?.object {
                return Ok(l.value().to_string());
            }
        }
        Err(Error::Corrupt {
            session: owner.id.to_string(),
            detail: format!("turn {index} has no ft:digest"),
        })
    }

    /// The graphs holding a turn whose digest is `digest`: the sessions that store a
    /// turn with that whole history before it (a point lookup on the object).
    pub(crate) fn graphs_with_digest(&self, digest: &str) -> Result<Vec<NamedNode>> {
        Ok(self
            .subjects_with(ft::DIGEST, digest)?
            .into_iter()
            .map(|(_, graph)| graph)
            .collect())
    }

    /// Whether `agent` is declared in the agents graph.
    pub(crate) fn declares(&self, agent: &Agent) -> Result<bool> {
        let iri = self.iris.agent(agent);
        self.backend.contains(QuadRef::new(
            iri.as_ref(),
            rdf::TYPE,
            agent_class(agent),
            GraphNameRef::NamedNode(self.iris.agents_graph().as_ref()),
        ))
    }

    /// The declarations (in the agents graph) of the agents that `quads` name.
    pub(crate) fn agent_declarations(&self, quads: &[Quad]) -> Result<Vec<Quad>> {
        let graph = self.iris.agents_graph();
        let mut agents = BTreeSet::new();
        for quad in quads {
            if let Term::NamedNode(o) = &quad.object {
                if self.iris.is_agent(o.as_str()) {
                    agents.insert(o.clone());
                }
            }
        }
        let mut out = Vec::new();
        for agent in agents {
            out.extend(self.about(agent.as_ref(), graph.as_ref())?);
        }
        Ok(out)
    }

    /// The models the own turns of session `iri` are attributed to, sorted.
    pub(crate) fn models(&self, iri: &NamedNode) -> Result<Vec<String>> {
        let mut models = BTreeSet::new();
        for quad in self.backend.quads(
            None,
            Some(prov::WAS_ATTRIBUTED_TO),
            None,
            Some(GraphNameRef::NamedNode(iri.as_ref())),
        ) {
            if let Term::NamedNode(agent) = quad?.object {
                if let Some(Agent::Model(m)) = self.iris.parse_agent(agent.as_ref()) {
                    models.insert(m);
                }
            }
        }
        Ok(models.into_iter().collect())
    }
}

impl Rdf<'_> {
    /// For a store across a network, in one request: the replay records of `spans`
    /// (disjoint index ranges `from..to` of their owners), in index order, each with its
    /// stored digest (the fields of `turn-records.rq` and the digest, for every span at
    /// once).
    pub(crate) fn span_records(
        &self,
        spans: &[(&SessionNode, u64, u64)],
    ) -> Result<Vec<(ReplayRecord, String)>> {
        let spans: Vec<_> = spans.iter().filter(|s| s.1 < s.2).collect();
        if spans.is_empty() {
            return Ok(Vec::new());
        }
        let turn = format!(
            "?turn {} ?index ; {} ?role ; {} ?content ; {} ?digest .
             OPTIONAL {{ ?turn {} ?kind }} OPTIONAL {{ ?turn {} ?name }}
             OPTIONAL {{ ?turn {} ?toolCallId }} OPTIONAL {{ ?turn {} ?toolCalls }}
             OPTIONAL {{ ?turn {} ?branch }}",
            ft::INDEX,
            ft::ROLE,
            ft::CONTENT,
            ft::DIGEST,
            ft::KIND,
            ft::NAME,
            ft::TOOL_CALL_ID,
            ft::TOOL_CALLS,
            ft::BRANCH
        );
        let query = format!(
            "SELECT ?session ?index ?role ?content ?digest ?kind ?name ?toolCallId ?toolCalls \
             ?branch WHERE {{ {} }}",
            span_union(&spans, &turn)
        );
        let mut found: BTreeMap<u64, (ReplayRecord, String)> = BTreeMap::new();
        for row in self.select_rows(&query)? {
            let value = |var: &str| row.get(var).and_then(text);
            let (Some(Term::NamedNode(session)), Some(index), Some(role), Some(content)) = (
                row.get("session"),
                value("index").and_then(|i| i.parse::<u64>().ok()),
                value("role"),
                value("content"),
            ) else {
                continue;
            };
            let Some((owner, ..)) = spans
                .iter()
                .find(|s| s.0.iri == *session && (s.1..s.2).contains(&index))
            else {
                continue;
            };
            let record = ReplayRecord {
                index,
                role: role.parse()?,
                content: content.to_string(),
                branch: value("branch").unwrap_or(&owner.branch).to_string(),
                kind: value("kind").map_or(Ok(Kind::Message), str::parse)?,
                name: value("name").map(str::to_string),
                tool_call_id: value("toolCallId").map(str::to_string),
                tool_calls: value("toolCalls").map(str::to_string),
            };
            found.insert(
                index,
                (record, value("digest").unwrap_or_default().to_string()),
            );
        }
        for (owner, from, to) in &spans {
            if let Some(index) = (*from..*to).find(|i| !found.contains_key(i)) {
                return Err(missing_turn(owner, index));
            }
        }
        Ok(found.into_values().collect())
    }

    /// For a store across a network, in one request: the stored digest of each
    /// `(session, index)` turn that exists.
    pub(crate) fn digests_at(
        &self,
        points: &[(&NamedNode, u64)],
    ) -> Result<HashMap<(NamedNode, u64), String>> {
        let mut out = HashMap::new();
        if points.is_empty() {
            return Ok(out);
        }
        // Each graph named in the query itself, so the store reads only that graph.
        let branches: Vec<String> = points
            .iter()
            .map(|(g, i)| {
                format!(
                    "{{ GRAPH {g} {{ ?t {} {} ; {} ?d }} BIND({g} AS ?g) BIND({} AS ?i) }}",
                    ft::INDEX,
                    Literal::from(*i),
                    ft::DIGEST,
                    Literal::from(*i),
                )
            })
            .collect();
        let query = format!("SELECT ?g ?i ?d WHERE {{ {} }}", branches.join(" UNION "));
        for row in self.select_rows(&query)? {
            let value = |var: &str| row.get(var).and_then(text);
            if let (Some(Term::NamedNode(g)), Some(i), Some(d)) = (
                row.get("g"),
                value("i").and_then(|i| i.parse::<u64>().ok()),
                value("d"),
            ) {
                out.insert((g.clone(), i), d.to_string());
            }
        }
        Ok(out)
    }
}

/// A pattern over the turns of `spans` (disjoint index ranges `from..to` of their
/// owners), one `UNION` branch per span that names the owner's graph itself and binds
/// `?session`: a store that gets the graph as a variable bound outside `GRAPH` (a
/// `VALUES` block) may read every graph to join it (Oxigraph does). `turn` is the
/// pattern inside the graph, binding `?index`.
fn span_union(spans: &[&(&SessionNode, u64, u64)], turn: &str) -> String {
    spans
        .iter()
        .map(|(owner, from, to)| {
            format!(
                "{{ GRAPH {g} {{ {turn} }} FILTER(?index >= {} && ?index < {}) BIND({g} AS ?session) }}",
                Literal::from(*from),
                Literal::from(*to),
                g = owner.iri,
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ")
}

pub(crate) fn missing_turn(owner: &SessionNode, index: u64) -> Error {
    Error::Corrupt {
        session: owner.id.to_string(),
        detail: format!("turn {index} is missing or lacks ft:role/ft:content"),
    }
}
