//! What `verify` reads: a session graph as stored, turn by turn, without the checks the
//! read path makes (so a damaged graph is described, not refused).

use super::{text, Iris, Rdf, SessionNode};
use crate::error::Result;
use crate::vocab::{ft, prov, rdf, xsd};
use oxigraph::model::{NamedNode, NamedNodeRef, Quad, Term};
use std::collections::BTreeMap;

/// One turn node of a session graph, field by field as stored.
#[derive(Clone, Debug, Default)]
pub(crate) struct StoredTurn {
    pub(crate) iri: Option<NamedNode>,
    /// Every `ft:index` the node carries (one, when sound).
    pub(crate) indices: Vec<u64>,
    pub(crate) role: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) content: Option<String>,
    pub(crate) digest: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) tool_call_id: Option<String>,
    pub(crate) tool_calls: Option<String>,
    pub(crate) payload: Option<String>,
    pub(crate) attributed: bool,
    pub(crate) timed: bool,
    /// Typed `ft:Turn`.
    pub(crate) is_turn: bool,
    /// Facts present but not as forktrail writes them (a datatype the read path's
    /// lookups do not match), named.
    pub(crate) malformed: Vec<String>,
    /// How many values each single-valued property carries (more than one is damage,
    /// whatever made it: replay would show one value and the digest check another).
    pub(crate) values: BTreeMap<&'static str, usize>,
}

/// The properties a turn carries at most once, with the names `verify` reports.
const TURN_SINGLE: &[(NamedNodeRef<'static>, &str)] = &[
    (ft::INDEX, "ft:index"),
    (ft::ROLE, "ft:role"),
    (ft::KIND, "ft:kind"),
    (ft::CONTENT, "ft:content"),
    (ft::DIGEST, "ft:digest"),
    (ft::BRANCH, "ft:branch"),
    (ft::NAME, "ft:name"),
    (ft::TOOL_CALL_ID, "ft:toolCallId"),
    (ft::TOOL_CALLS, "ft:toolCalls"),
    (ft::PAYLOAD, "ft:payload"),
    (prov::WAS_ATTRIBUTED_TO, "prov:wasAttributedTo"),
    (prov::GENERATED_AT_TIME, "prov:generatedAtTime"),
];

/// The properties a session node carries at most once.
const SESSION_SINGLE: &[(NamedNodeRef<'static>, &str)] = &[
    (ft::SESSION_ID, "ft:sessionId"),
    (ft::BRANCH, "ft:branch"),
    (ft::PARENT_SESSION, "ft:parentSession"),
    (ft::FORKED_AT_INDEX, "ft:forkedAtIndex"),
    (ft::FORK_DEPTH, "ft:forkDepth"),
    (ft::FORK_ROOT, "ft:forkRoot"),
    (ft::BASE_DIGEST, "ft:baseDigest"),
    (prov::WAS_ATTRIBUTED_TO, "prov:wasAttributedTo"),
];

/// The name of `p` if it is one of `single`.
fn single_valued(
    single: &[(NamedNodeRef<'static>, &'static str)],
    p: NamedNodeRef<'_>,
) -> Option<&'static str> {
    single.iter().find(|(s, _)| *s == p).map(|(_, name)| *name)
}

/// A session graph as stored.
pub(crate) struct StoredSession {
    /// The decoded node, or why it cannot be decoded.
    pub(crate) node: std::result::Result<SessionNode, String>,
    pub(crate) turns: Vec<StoredTurn>,
    /// The node says it was made by a fork (`prov:wasGeneratedBy` an `ft:Fork` that
    /// used a session).
    pub(crate) has_fork_activity: bool,
    /// The node's single-valued properties that carry more than one value, with how
    /// many.
    pub(crate) doubled: Vec<(&'static str, usize)>,
}

impl Rdf<'_> {
    /// The session in graph `iri` as stored, if the graph holds a session node.
    pub(crate) fn stored_session(&self, iri: NamedNodeRef<'_>) -> Result<Option<StoredSession>> {
        Ok(stored_session(self.iris, iri, self.graph(iri)?))
    }
}

/// The session in graph `iri` from the graph's `quads`.
fn stored_session(iris: &Iris, iri: NamedNodeRef<'_>, quads: Vec<Quad>) -> Option<StoredSession> {
    let mut node_quads = Vec::new();
    let mut turns: BTreeMap<NamedNode, StoredTurn> = BTreeMap::new();
    let mut forks = Vec::new();
    let mut used = Vec::new();
    let mut generated_by = Vec::new();
    let mut node_values: BTreeMap<&'static str, usize> = BTreeMap::new();
    for quad in quads {
        let Some(subject) = (match &quad.subject {
            oxigraph::model::NamedOrBlankNode::NamedNode(n) => Some(n.clone()),
            _ => None,
        }) else {
            continue;
        };
        let p = quad.predicate.as_ref();
        if subject.as_ref() == iri {
            if p == prov::WAS_GENERATED_BY {
                if let Term::NamedNode(a) = &quad.object {
                    generated_by.push(a.clone());
                }
            }
            if let Some(name) = single_valued(SESSION_SINGLE, p) {
                *node_values.entry(name).or_default() += 1;
            }
            node_quads.push(quad);
            continue;
        }
        if p == rdf::TYPE && quad.object == Term::from(ft::FORK.into_owned()) {
            forks.push(subject.clone());
        }
        if p == prov::USED {
            used.push(subject.clone());
        }
        // Only what a turn carries is kept; nodes that are not turns (jobs, anchors,
        // merges) may carry an attribution or a time too, and are dropped below.
        let typed_turn = p == rdf::TYPE && quad.object == Term::from(ft::TURN.into_owned());
        let single = single_valued(TURN_SINGLE, p);
        if !typed_turn && single.is_none() {
            continue;
        }
        let turn = turns.entry(subject.clone()).or_default();
        turn.iri = Some(subject);
        turn.is_turn |= typed_turn;
        if let Some(name) = single {
            *turn.values.entry(name).or_default() += 1;
        }
        let value = || text(&quad.object).map(str::to_string);
        // What the read path matches: an xsd:integer index, plain-string fields.
        let typed = |datatype: oxigraph::model::NamedNodeRef<'_>| matches!(&quad.object, Term::Literal(l) if l.datatype() == datatype);
        let wanted = if p == ft::INDEX {
            Some(("ft:index", xsd::INTEGER))
        } else if p == ft::ROLE {
            Some(("ft:role", xsd::STRING))
        } else if p == ft::CONTENT {
            Some(("ft:content", xsd::STRING))
        } else if p == ft::DIGEST {
            Some(("ft:digest", xsd::STRING))
        } else {
            None
        };
        if let Some((name, datatype)) = wanted {
            if !typed(datatype) {
                turn.malformed
                    .push(format!("{name} is {}, not an {datatype}", quad.object));
            }
        }
        if p == ft::INDEX {
            turn.indices
                .extend(value().and_then(|v| v.parse::<u64>().ok()));
        } else if p == ft::ROLE {
            turn.role = value();
        } else if p == ft::KIND {
            turn.kind = value();
        } else if p == ft::CONTENT {
            turn.content = value();
        } else if p == ft::DIGEST {
            turn.digest = value();
        } else if p == ft::NAME {
            turn.name = value();
        } else if p == ft::TOOL_CALL_ID {
            turn.tool_call_id = value();
        } else if p == ft::TOOL_CALLS {
            turn.tool_calls = value();
        } else if p == ft::PAYLOAD {
            turn.payload = value();
        } else if p == prov::WAS_ATTRIBUTED_TO {
            turn.attributed = true;
        } else if p == prov::GENERATED_AT_TIME {
            turn.timed = true;
        }
    }
    let turns: Vec<StoredTurn> = turns
        .into_values()
        .filter(|t| {
            t.is_turn
                || !t.indices.is_empty()
                || t.role.is_some()
                || t.content.is_some()
                || t.digest.is_some()
        })
        .collect();
    let node = match super::session::decode_node(iris, iri, node_quads) {
        Ok(Some(node)) => Ok(node),
        Ok(None) => return None,
        Err(e) => Err(e.to_string()),
    };
    let has_fork_activity = generated_by
        .iter()
        .any(|a| forks.contains(a) && used.contains(a));
    let doubled = node_values.into_iter().filter(|(_, n)| *n > 1).collect();
    Some(StoredSession {
        node,
        turns,
        has_fork_activity,
        doubled,
    })
}
