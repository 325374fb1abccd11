//! Leases: the claims writers of a shared store put on the sessions they are about to
//! write, in the store's lease graph.

use super::{GraphWriter, Iris, Rdf};
use crate::error::Result;
use crate::vocab::{ft, rdf, xsd};
use chrono::{DateTime, SecondsFormat, Utc};
use oxigraph::model::{GraphNameRef, Literal, NamedNode, NamedOrBlankNode, Quad, Term};
use std::collections::BTreeMap;

/// A lease as read back: its node, what it claims, when it lapses, and its quads.
#[derive(Debug)]
pub(crate) struct LeaseNode {
    pub(crate) node: NamedNode,
    pub(crate) keys: Vec<NamedNode>,
    /// `None` when unreadable: such a lease counts as lapsed.
    pub(crate) expires: Option<DateTime<Utc>>,
    pub(crate) quads: Vec<Quad>,
}

/// The quads of lease `node` on `keys`, lapsing at `expires`.
pub(crate) fn lease_quads(
    iris: &Iris,
    node: &NamedNode,
    keys: &[NamedNode],
    expires: DateTime<Utc>,
) -> Vec<Quad> {
    let mut w = GraphWriter::new(iris.lease_graph());
    w.add(node, rdf::TYPE, ft::LEASE);
    for key in keys {
        w.add(node, ft::LEASE_OF, key.clone());
    }
    w.add(node, ft::LEASE_EXPIRES, expiry(expires));
    w.quads
}

/// The condition of a fenced commit (see `storage::Fence`): lease `node` is still in
/// the lease graph with expiry `expires` (a writer that finds a lease lapsed removes it
/// before it reads anything, so a lease still there is one nobody has taken over);
/// each of `new_nodes` (`(graph, subject)`) has no statement yet; and no child of each
/// `parent` carries `label` yet. Terms are written by oxrdf. No clock is read: stores
/// disagree on `NOW()` (Virtuoso's has no time zone, which makes a comparison with a
/// lease's expiry indeterminate).
pub(crate) fn fence_condition(
    iris: &Iris,
    node: &NamedNode,
    expires: &Literal,
    new_nodes: &[(NamedNode, NamedNode)],
    labels: &[(NamedNode, String)],
) -> String {
    let mut out = format!(
        "GRAPH {} {{ {node} {} {expires} }}",
        iris.lease_graph(),
        ft::LEASE_EXPIRES,
    );
    for (graph, subject) in new_nodes {
        out.push_str(&format!(
            " FILTER NOT EXISTS {{ GRAPH {graph} {{ {subject} ?fence_p ?fence_o }} }}"
        ));
    }
    for (parent, label) in labels {
        out.push_str(&format!(
            " FILTER NOT EXISTS {{ GRAPH ?fence_g {{ ?fence_c {} {parent} ; {} {} }} }}",
            ft::PARENT_SESSION,
            ft::BRANCH,
            Literal::new_simple_literal(label),
        ));
    }
    out
}

/// A lease's `ft:leaseExpires` value.
pub(crate) fn expiry(expires: DateTime<Utc>) -> Literal {
    Literal::new_typed_literal(
        expires.to_rfc3339_opts(SecondsFormat::Millis, true),
        xsd::DATE_TIME,
    )
}

impl Rdf<'_> {
    /// Every lease in the store: one read of the lease graph.
    pub(crate) fn leases(&self) -> Result<Vec<LeaseNode>> {
        let graph = self.iris.lease_graph();
        let mut by_node: BTreeMap<NamedNode, LeaseNode> = BTreeMap::new();
        for quad in self.backend.quads(
            None,
            None,
            None,
            Some(GraphNameRef::NamedNode(graph.as_ref())),
        ) {
            let quad = quad?;
            let NamedOrBlankNode::NamedNode(node) = &quad.subject else {
                continue;
            };
            let lease = by_node.entry(node.clone()).or_insert_with(|| LeaseNode {
                node: node.clone(),
                keys: Vec::new(),
                expires: None,
                quads: Vec::new(),
            });
            match (&quad.predicate, &quad.object) {
                (p, Term::NamedNode(key)) if *p == ft::LEASE_OF => lease.keys.push(key.clone()),
                (p, Term::Literal(l)) if *p == ft::LEASE_EXPIRES => {
                    lease.expires = DateTime::parse_from_rfc3339(l.value())
                        .ok()
                        .map(|t| t.with_timezone(&Utc));
                }
                _ => {}
            }
            lease.quads.push(quad);
        }
        Ok(by_node.into_values().collect())
    }
}
