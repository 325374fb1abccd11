//! Anchors, merges and abandons: what agent runtimes record about their forks.

use super::{literal, GraphWriter, Iris, Rdf, SessionNode};
use crate::error::{Error, Result};
use crate::vocab::{ft, prov, rdf};
use oxigraph::model::{GraphNameRef, Literal, NamedNode, NamedOrBlankNode, Quad, QuadRef, Term};

/// An anchor as stored: a named point (the session's length when it was set).
#[derive(Clone, Debug)]
pub(crate) struct AnchorNode {
    pub(crate) name: String,
    pub(crate) at_index: u64,
    pub(crate) state: Option<serde_json::Value>,
    pub(crate) created: Option<String>,
}

/// The quads of anchor `name` of session `session` at `at`.
pub(crate) fn anchor_quads(
    iris: &Iris,
    session: &SessionNode,
    anchor: &AnchorNode,
    created: Literal,
) -> Vec<Quad> {
    let iri = iris.activity(session.id.as_str(), &format!("anchor/{}", anchor.name));
    let mut w = GraphWriter::new(session.iri.clone());
    w.add(&iri, rdf::TYPE, ft::ANCHOR);
    w.add(&iri, rdf::TYPE, prov::ENTITY);
    w.add(&iri, ft::ANCHOR_NAME, literal(&anchor.name));
    w.add(&iri, ft::ANCHOR_OF, session.iri.clone());
    w.add(&iri, ft::AT_INDEX, Literal::from(anchor.at_index));
    if let Some(state) = &anchor.state {
        w.add(&iri, ft::STATE, literal(&state.to_string()));
    }
    w.add(&iri, prov::GENERATED_AT_TIME, created);
    w.quads
}

/// A merge: the activity that used the child's turns `first..=last` and generated the
/// `fork_result` turn `turn` at `index` of session `into`.
pub(crate) struct MergeRecord<'a> {
    pub(crate) into: &'a str,
    pub(crate) index: u64,
    pub(crate) turn: &'a NamedNode,
    pub(crate) child: &'a NamedNode,
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) principal: Option<&'a NamedNode>,
}

/// The merge activity's quads, into the writer of the `fork_result` turn's graph.
pub(crate) fn merge_quads(iris: &Iris, w: &mut GraphWriter, m: &MergeRecord<'_>) {
    let activity = iris.activity(m.into, &format!("merge/{}", m.index));
    w.add(&activity, rdf::TYPE, ft::MERGE);
    w.add(&activity, rdf::TYPE, prov::ACTIVITY);
    w.add(&activity, prov::USED, m.child.clone());
    w.add(&activity, ft::RANGE_START, Literal::from(m.first));
    w.add(&activity, ft::RANGE_END, Literal::from(m.last));
    w.add(&activity, ft::MERGED_AT_INDEX, Literal::from(m.index));
    w.add(&activity, prov::STARTED_AT_TIME, super::now());
    if let Some(principal) = m.principal {
        w.add(&activity, prov::WAS_ASSOCIATED_WITH, principal.clone());
    }
    w.add(m.turn, prov::WAS_GENERATED_BY, activity);
    w.add(m.turn, prov::WAS_DERIVED_FROM, m.child.clone());
}

/// The IRI of the abandon of `session` at its length `length`: one per length, so a
/// second abandon of the same work writes nothing new.
pub(crate) fn abandon_iri(iris: &Iris, session: &SessionNode) -> NamedNode {
    iris.activity(session.id.as_str(), &format!("abandon/{}", session.length))
}

/// The quads recording that work in fork `session` ended without a merge.
pub(crate) fn abandon_quads(iris: &Iris, session: &SessionNode, why: &str) -> Vec<Quad> {
    let activity = abandon_iri(iris, session);
    let mut w = GraphWriter::new(session.iri.clone());
    w.add(&activity, rdf::TYPE, ft::ABANDON);
    w.add(&activity, rdf::TYPE, prov::ACTIVITY);
    w.add(&activity, prov::USED, session.iri.clone());
    w.add(&activity, ft::REASON, literal(why));
    w.add(&activity, prov::ENDED_AT_TIME, super::now());
    w.quads
}

impl Rdf<'_> {
    /// The anchors stored in the graph of `session`.
    pub(crate) fn anchors_of(&self, session: &SessionNode) -> Result<Vec<AnchorNode>> {
        let graph = GraphNameRef::NamedNode(session.iri.as_ref());
        let mut out = Vec::new();
        for quad in self
            .backend
            .quads(None, Some(rdf::TYPE), Some(ft::ANCHOR.into()), Some(graph))
        {
            let NamedOrBlankNode::NamedNode(anchor) = quad?.subject else {
                continue;
            };
            let mut a = AnchorNode {
                name: String::new(),
                at_index: 0,
                state: None,
                created: None,
            };
            for q in self.about(anchor.as_ref(), session.iri.as_ref())? {
                let Term::Literal(l) = &q.object else {
                    continue;
                };
                if q.predicate == ft::ANCHOR_NAME {
                    a.name = l.value().to_string();
                } else if q.predicate == ft::AT_INDEX {
                    a.at_index = l.value().parse().map_err(|_| Error::Corrupt {
                        session: session.id.to_string(),
                        detail: format!("anchor {anchor} has a bad ft:atIndex"),
                    })?;
                } else if q.predicate == ft::STATE {
                    a.state = serde_json::from_str(l.value()).ok();
                } else if q.predicate == prov::GENERATED_AT_TIME {
                    a.created = Some(l.value().to_string());
                }
            }
            out.push(a);
        }
        Ok(out)
    }

    /// The last child index any merge of `child` covered, if it was merged.
    pub(crate) fn merged_up_to(&self, child: &NamedNode) -> Result<Option<u64>> {
        let mut end = None;
        for quad in self
            .backend
            .quads(None, Some(prov::USED), Some(child.as_ref().into()), None)
        {
            let quad = quad?;
            let NamedOrBlankNode::NamedNode(activity) = &quad.subject else {
                continue;
            };
            let graph = quad.graph_name.as_ref();
            if !self
                .backend
                .contains(QuadRef::new(activity, rdf::TYPE, ft::MERGE, graph))?
            {
                continue;
            }
            for q in self.backend.quads(
                Some(activity.as_ref().into()),
                Some(ft::RANGE_END),
                None,
                Some(graph),
            ) {
                if let Term::Literal(l) = q?.object {
                    let value: u64 = l.value().parse().unwrap_or(0);
                    end = Some(end.map_or(value, |e: u64| e.max(value)));
                }
            }
        }
        Ok(end)
    }

    /// Whether the abandon of `session` at its current length is recorded.
    pub(crate) fn abandoned(&self, session: &SessionNode) -> Result<bool> {
        let activity = abandon_iri(self.iris, session);
        self.backend.contains(QuadRef::new(
            &activity,
            rdf::TYPE,
            ft::ABANDON,
            GraphNameRef::NamedNode(session.iri.as_ref()),
        ))
    }
}
