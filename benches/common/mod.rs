//! What the benches share: a plain turn's quads as forktrail writes them, for the
//! figures that measure Oxigraph alone on the same data.

// Each bench uses a part of this.
#![allow(dead_code)]

use forktrail::vocab::{ft, prov, rdf};
use oxigraph::model::{Literal, NamedNode, Quad, Term};

/// The predicates of a plain turn's quads, in the order `turn_quads` makes them.
pub const TURN_PREDICATES: [&str; 7] = [
    "rdf:type",
    "ft:index",
    "ft:role",
    "ft:content",
    "ft:digest",
    "prov:wasAttributedTo",
    "prov:generatedAtTime",
];

/// The 7 quads of turn `index` of the session stored in graph `graph`, leaving out
/// the one with predicate `TURN_PREDICATES[omit]` if given.
pub fn turn_quads(
    graph: &NamedNode,
    index: usize,
    content: String,
    omit: Option<usize>,
) -> Vec<Quad> {
    let turn = NamedNode::new(format!("{}/turn/{index}", graph.as_str())).unwrap();
    let agent = NamedNode::new("urn:forktrail:agent:anonymous").unwrap();
    let digest = format!("{index:064x}");
    let created = Literal::new_typed_literal(
        "2026-01-01T00:00:00.000Z",
        oxigraph::model::vocab::xsd::DATE_TIME,
    );
    let facts: [(_, Term); 7] = [
        (rdf::TYPE, ft::TURN.into()),
        (ft::INDEX, Literal::from(index as u64).into()),
        (ft::ROLE, Literal::new_simple_literal("user").into()),
        (ft::CONTENT, Literal::new_simple_literal(content).into()),
        (ft::DIGEST, Literal::new_simple_literal(digest).into()),
        (prov::WAS_ATTRIBUTED_TO, agent.into()),
        (prov::GENERATED_AT_TIME, created.into()),
    ];
    facts
        .into_iter()
        .enumerate()
        .filter(|(k, _)| omit != Some(*k))
        .map(|(_, (p, o))| Quad::new(turn.clone(), p, o, graph.clone()))
        .collect()
}
