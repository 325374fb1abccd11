//! The graph shape: every quad forktrail writes is built here, beside the code that reads
//! it back, one file per kind of node.
//!
//! | file | nodes |
//! | --- | --- |
//! | `iri.rs` | instance IRIs under a base, percent-encoded agent names |
//! | `digest.rs` | the turn digest chain, time stamps |
//! | `session.rs` | session nodes: lineage facts, forks, detach, sub-agent links |
//! | `turn.rs` | turns and the agents they are attributed to |
//! | `activity.rs` | anchors, merges, abandons |
//! | `audit.rs` | a session graph as stored, for `verify` |
//! | `job.rs` | regeneration jobs |
//! | `whatif.rs` | comparisons, their runs and model calls |
//! | `import.rs` | what imports record: source ids |
//! | `lease.rs` | the leases writers of a shared store hold |
//! | `feed.rs` | a shared store's change feed: what each write touched, numbered per writer |
//! | `listing.rs` | a family's members; a shared store's sessions whole and a page's heads, for its catalog |
//! | `prov.rs` | what PROV-O and the ontology entail, for the PROV export |
//! | `version.rs` | the store node: the digest version; an upgrade's new digests |
//!
//! Encoders are functions from values to quads. Lookups and decoders read through the
//! storage seam with [`Rdf`], a view of a store's backend and IRIs; a new predicate
//! touches this folder, `vocab.rs` and the ontology only.

mod activity;
mod audit;
pub(crate) mod chain;
mod digest;
mod feed;
mod import;
mod iri;
mod job;
mod lease;
mod listing;
pub(crate) mod prov;
mod proxied;
mod session;
mod turn;
mod version;
mod whatif;

pub(crate) use activity::{abandon_quads, anchor_quads, merge_quads, AnchorNode, MergeRecord};
pub(crate) use audit::{StoredSession, StoredTurn};
pub(crate) use digest::{
    digest_as, digest_of, history_name, instant, now, payload_sha256, sha256_hex, DigestFields,
    PayloadRef,
};
pub use digest::{turn_digest, DigestVersion};
pub(crate) use feed::{change_quads, compaction, Touched};
pub(crate) use import::{source_id_quad, ImportedGraph};
pub(crate) use iri::Iris;
pub use iri::DEFAULT_BASE_IRI;
pub(crate) use job::{JobNode, JobRecord};
pub(crate) use lease::{expiry as lease_expiry, fence_condition, lease_quads};
pub(crate) use proxied::ProxiedCallRecord;
pub(crate) use session::{
    adopt_change, awaited_parent_quad, detach_change, fork_request_quads, repointed, session_quads,
    sub_agent_quads, Adoption, ForkRecord, SessionNode, SessionRecord, SubAgentFacts,
};
pub(crate) use turn::{detach_copy, missing_turn, turn_quads, TurnRecord};
pub(crate) use version::{redigest, version_quads};
pub(crate) use whatif::{CallRecord, ComparisonRecord, Node as WhatIfNode, RunRecord, StoredRun};

use crate::error::Result;
use crate::storage::Backend;
use oxigraph::model::{
    GraphName, GraphNameRef, Literal, NamedNode, NamedNodeRef, NamedOrBlankNode, Quad, Term,
};

/// A store's backend seen through forktrail's graph shape: lookups and decoders.
#[derive(Clone, Copy)]
pub(crate) struct Rdf<'a> {
    pub(crate) backend: &'a dyn Backend,
    pub(crate) iris: &'a Iris,
}

impl Rdf<'_> {
    /// Every quad whose subject is `subject`, in graph `graph`.
    pub(crate) fn about(
        &self,
        subject: NamedNodeRef<'_>,
        graph: NamedNodeRef<'_>,
    ) -> Result<Vec<Quad>> {
        self.backend
            .quads(
                Some(subject.into()),
                None,
                None,
                Some(GraphNameRef::NamedNode(graph)),
            )
            .collect()
    }

    /// Every quad, in any graph, whose object is `object`: what points at a node.
    pub(crate) fn naming(&self, object: NamedNodeRef<'_>) -> Result<Vec<Quad>> {
        self.backend
            .quads(None, None, Some(object.into()), None)
            .collect()
    }

    /// Every quad of graph `graph`.
    pub(crate) fn graph(&self, graph: NamedNodeRef<'_>) -> Result<Vec<Quad>> {
        self.backend
            .quads(None, None, None, Some(GraphNameRef::NamedNode(graph)))
            .collect()
    }

    /// The `(subject, graph)` of every quad `?s predicate "value" GRAPH ?g` whose
    /// subject and graph are IRIs: how a job, a request or an imported line is found by
    /// its key.
    pub(crate) fn subjects_with(
        &self,
        predicate: NamedNodeRef<'_>,
        value: &str,
    ) -> Result<Vec<(NamedNode, NamedNode)>> {
        let literal = Literal::new_simple_literal(value);
        let mut out = Vec::new();
        for quad in self
            .backend
            .quads(None, Some(predicate), Some(literal.as_ref().into()), None)
        {
            let quad = quad?;
            if let (NamedOrBlankNode::NamedNode(subject), GraphName::NamedNode(graph)) =
                (quad.subject, quad.graph_name)
            {
                out.push((subject, graph));
            }
        }
        Ok(out)
    }

    /// The session nodes, in their own graphs, whose `predicate` is `object`.
    pub(crate) fn sessions_where(
        &self,
        predicate: NamedNodeRef<'_>,
        object: impl Into<Term>,
    ) -> Result<Vec<NamedNode>> {
        let object: Term = object.into();
        let mut out = Vec::new();
        for quad in self
            .backend
            .quads(None, Some(predicate), Some(object.as_ref()), None)
        {
            let quad = quad?;
            if let (NamedOrBlankNode::NamedNode(s), GraphName::NamedNode(g)) =
                (quad.subject, quad.graph_name)
            {
                if s == g {
                    out.push(s);
                }
            }
        }
        Ok(out)
    }
}

impl Rdf<'_> {
    /// The rows of a SELECT forktrail wrote itself (its terms serialised by oxrdf).
    pub(crate) fn select_rows(&self, text: &str) -> Result<Vec<oxigraph::sparql::QuerySolution>> {
        let query = spargebra::SparqlParser::new()
            .parse_query(text)
            .map_err(|e| crate::Error::Query(format!("an internal query does not parse: {e}")))?;
        let results = self.backend.query(crate::storage::Sparql {
            query,
            bindings: Vec::new(),
            default_graphs: Vec::new(),
            named_graphs: Vec::new(),
            cancellation: None,
        })?;
        let oxigraph::sparql::QueryResults::Solutions(rows) = results else {
            return Err(crate::Error::Query(
                "an internal SELECT gave no rows".into(),
            ));
        };
        rows.map(|row| row.map_err(crate::storage::evaluation_error))
            .collect()
    }
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
}

/// `quads` moved into graph `graph`.
pub(crate) fn regraph(quads: Vec<Quad>, graph: &NamedNode) -> Vec<Quad> {
    quads
        .into_iter()
        .map(|q| {
            Quad::new(
                q.subject,
                q.predicate,
                q.object,
                GraphName::NamedNode(graph.clone()),
            )
        })
        .collect()
}

/// A literal's text.
fn text(term: &Term) -> Option<&str> {
    match term {
        Term::Literal(l) => Some(l.value()),
        _ => None,
    }
}

fn literal(s: &str) -> Literal {
    Literal::new_simple_literal(s)
}
