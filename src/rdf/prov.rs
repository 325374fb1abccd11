//! What PROV-O and the ontology entail, for PROV tools that do no inference; and how an
//! imported graph says which session it holds.

use super::Iris;
use crate::model::SessionId;
use crate::vocab::{ft, prov, rdf, rdfs};
use oxigraph::io::{RdfFormat, RdfParser};
use oxigraph::model::{NamedNode, NamedOrBlankNode, Quad, Term, Triple};
use std::collections::{BTreeMap, HashSet};

/// Each class or property with its PROV-O super-classes or super-properties.
type Entailments = BTreeMap<NamedNode, Vec<NamedNode>>;

/// The PROV-O super-classes and super-properties of every class and property, by
/// transitive `rdfs:subClassOf` / `rdfs:subPropertyOf`: the ontology's own statements
/// plus PROV-O's (`prov:SoftwareAgent` and `prov:Person` are `prov:Agent`s). Only PROV
/// terms are kept: they are what PROV tools read.
fn entailments() -> (Entailments, Entailments) {
    let mut sub_class: Vec<(NamedNode, NamedNode)> = vec![
        (prov::SOFTWARE_AGENT.into_owned(), prov::AGENT.into_owned()),
        (prov::PERSON.into_owned(), prov::AGENT.into_owned()),
    ];
    let mut sub_property: Vec<(NamedNode, NamedNode)> = Vec::new();
    for quad in RdfParser::from_format(RdfFormat::Turtle).for_slice(crate::ONTOLOGY.as_bytes()) {
        let Ok(quad) = quad else { continue };
        let (NamedOrBlankNode::NamedNode(s), Term::NamedNode(o)) = (quad.subject, quad.object)
        else {
            continue;
        };
        if quad.predicate == rdfs::SUB_CLASS_OF {
            sub_class.push((s, o));
        } else if quad.predicate == rdfs::SUB_PROPERTY_OF {
            sub_property.push((s, o));
        }
    }
    let closure = |pairs: &[(NamedNode, NamedNode)]| -> Entailments {
        let mut out = Entailments::new();
        for (start, _) in pairs {
            let mut found: Vec<NamedNode> = Vec::new();
            let mut todo = vec![start.clone()];
            while let Some(term) = todo.pop() {
                for (s, o) in pairs {
                    if *s == term && !found.contains(o) {
                        found.push(o.clone());
                        todo.push(o.clone());
                    }
                }
            }
            found.retain(|t| t.as_str().starts_with(prov::NS));
            out.insert(start.clone(), found);
        }
        out
    };
    (closure(&sub_class), closure(&sub_property))
}

/// The triples of `quads` merged into one graph (a set: an agent declared in many graphs
/// appears once), with the PROV-O classes and properties they entail added, sorted so
/// the same store gives the same text.
pub(crate) fn entailed(quads: impl IntoIterator<Item = Quad>) -> Vec<Triple> {
    let (classes, properties) = entailments();
    let mut triples: HashSet<Triple> = HashSet::new();
    for quad in quads {
        let triple: Triple = quad.into();
        if triple.predicate == rdf::TYPE {
            if let Term::NamedNode(class) = &triple.object {
                for sup in classes.get(class).into_iter().flatten() {
                    triples.insert(Triple::new(triple.subject.clone(), rdf::TYPE, sup.clone()));
                }
            }
        }
        for sup in properties.get(&triple.predicate).into_iter().flatten() {
            triples.insert(Triple::new(
                triple.subject.clone(),
                sup.clone(),
                triple.object.clone(),
            ));
        }
        triples.insert(triple);
    }
    let mut triples: Vec<Triple> = triples.into_iter().collect();
    triples.sort_by_cached_key(|t| t.to_string());
    triples
}

/// What an imported graph says of the session it holds: its id, when the graph's own
/// node is a session under this base, and the parents its node names.
pub(crate) fn session_of_graph(
    iris: &Iris,
    graph: &NamedNode,
    quads: &[Quad],
) -> (Option<SessionId>, Vec<NamedNode>) {
    let own = |q: &&Quad| q.subject == NamedOrBlankNode::from(graph.clone());
    let is_session = quads
        .iter()
        .filter(own)
        .any(|q| q.predicate == rdf::TYPE && q.object == Term::from(ft::SESSION.into_owned()));
    let parents = quads
        .iter()
        .filter(own)
        .filter(|q| q.predicate == ft::PARENT_SESSION)
        .filter_map(|q| match &q.object {
            Term::NamedNode(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    let id = iris.session_id(graph.as_ref()).filter(|_| is_session);
    (id, parents)
}
