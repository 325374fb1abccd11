//! Pure functions from an operation to the quads that record it, PROV-O included.
//!
//! Every write of forktrail goes through here, so the ontology test can check that each
//! term written is declared.

use crate::model::{Agent, Kind, NewTurn, Role};
use crate::store::Iris;
use crate::vocab::{dcterms, ft, prov, rdf, rdfs, xsd};
use oxigraph::model::{GraphName, Literal, NamedNode, Quad, Term};
use sha2::{Digest, Sha256};

/// The digest of a turn: SHA-256, in lowercase hex, over
/// `prev "\n" index "\n" role "\n" kind "\n" content`, where `prev` is the digest of the
/// turn before it (the empty string for index 0). A fork's first turn chains onto the
/// parent's turn at `k - 1`, so equal digests mean equal histories.
///
/// ```
/// use forktrail::{turn_digest, Kind, Role};
/// let first = turn_digest("", 0, Role::User, Kind::Message, "hi");
/// let second = turn_digest(&first, 1, Role::Assistant, Kind::Message, "hello");
/// assert_eq!(first.len(), 64);
/// assert_ne!(first, second);
/// ```
pub fn turn_digest(prev: &str, index: u64, role: Role, kind: Kind, content: &str) -> String {
    sha256_hex(&[
        prev.as_bytes(),
        format!("\n{index}\n{role}\n{kind}\n").as_bytes(),
        content.as_bytes(),
    ])
}

/// SHA-256 over the concatenated `parts`, in lowercase hex.
pub(crate) fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The current time as an `xsd:dateTime` literal (UTC, milliseconds).
pub(crate) fn now() -> Literal {
    let text = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    Literal::new_typed_literal(text, xsd::DATE_TIME)
}

/// Collects quads into one graph.
pub(crate) struct GraphWriter {
    pub(crate) graph: NamedNode,
    pub(crate) quads: Vec<Quad>,
}

impl GraphWriter {
    pub(crate) fn new(graph: NamedNode) -> Self {
        Self {
            graph,
            quads: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, s: &NamedNode, p: impl Into<NamedNode>, o: impl Into<Term>) {
        self.quads.push(Quad::new(
            s.clone(),
            p.into(),
            o.into(),
            GraphName::NamedNode(self.graph.clone()),
        ));
    }

    /// Declares an agent in this graph, so audits can name it without leaving the graph.
    pub(crate) fn agent(&mut self, iris: &Iris, agent: &Agent) -> NamedNode {
        let iri = iris.agent(agent);
        self.add(&iri, rdf::TYPE, agent_class(agent));
        match agent {
            Agent::Model(_) => self.add(&iri, rdf::TYPE, ft::MODEL),
            Agent::Tool(_) => self.add(&iri, rdf::TYPE, ft::TOOL),
            Agent::Principal(_) => {}
        }
        self.add(&iri, rdfs::LABEL, Literal::new_simple_literal(agent.name()));
        iri
    }
}

/// `prov:Agent` for principals, `prov:SoftwareAgent` for models and tools.
pub(crate) fn agent_class(agent: &Agent) -> oxigraph::model::NamedNodeRef<'static> {
    match agent {
        Agent::Principal(_) => prov::AGENT,
        Agent::Model(_) | Agent::Tool(_) => prov::SOFTWARE_AGENT,
    }
}

fn text(s: &str) -> Literal {
    Literal::new_simple_literal(s)
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
    w.add(&iri, ft::SESSION_ID, text(s.id));
    w.add(&iri, ft::BRANCH, text(s.branch));
    w.add(&iri, ft::FORK_DEPTH, Literal::from(s.depth as u64));
    w.add(&iri, ft::FORK_ROOT, s.fork_root.clone());
    w.add(&iri, prov::WAS_ATTRIBUTED_TO, principal.clone());
    w.add(&iri, dcterms::CREATED, s.created.clone());
    if let Some(title) = s.title {
        w.add(&iri, dcterms::TITLE, text(title));
    }
    if let Some(f) = fork {
        let activity = iris.activity(s.id, "fork");
        w.add(&iri, ft::PARENT_SESSION, f.parent.clone());
        w.add(&iri, ft::FORKED_AT_INDEX, Literal::from(f.at));
        if let Some(digest) = f.base_digest {
            w.add(&iri, ft::BASE_DIGEST, text(digest));
        }
        w.add(&iri, prov::WAS_DERIVED_FROM, f.parent.clone());
        w.add(&iri, prov::WAS_GENERATED_BY, activity.clone());
        w.add(&activity, rdf::TYPE, ft::FORK);
        w.add(&activity, rdf::TYPE, prov::ACTIVITY);
        w.add(&activity, prov::USED, f.parent.clone());
        w.add(&activity, prov::STARTED_AT_TIME, s.created.clone());
        w.add(&activity, prov::WAS_ASSOCIATED_WITH, principal);
        if let Some(reason) = f.reason {
            w.add(&activity, ft::REASON, text(reason));
        }
    }
    w.quads
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
    w.add(&iri, ft::ROLE, text(turn.role.as_str()));
    if turn.kind != Kind::Message {
        w.add(&iri, ft::KIND, text(turn.kind.as_str()));
    }
    w.add(&iri, ft::CONTENT, text(&turn.content));
    w.add(&iri, ft::DIGEST, text(r.digest));
    w.add(&iri, prov::WAS_ATTRIBUTED_TO, r.by.clone());
    w.add(&iri, prov::GENERATED_AT_TIME, r.created.clone());
    for (p, v) in [
        (ft::NAME, &turn.name),
        (ft::TOOL_CALL_ID, &turn.tool_call_id),
        (ft::TOOL_CALLS, &turn.tool_calls),
    ] {
        if let Some(v) = v {
            w.add(&iri, p, text(v));
        }
    }
}
