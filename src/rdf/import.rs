//! What transcript imports record: the source message each turn came from.

use super::{literal, text, GraphWriter, Rdf};
use crate::error::Result;
use crate::vocab::{ft, prov};
use oxigraph::model::{GraphNameRef, NamedNode, NamedOrBlankNode, Quad};
use std::collections::{HashMap, HashSet};

/// That turn `turn` (written into `w`) was imported from source message `id`.
pub(crate) fn source_id_quad(w: &mut GraphWriter, turn: &NamedNode, id: &str) {
    w.add(turn, ft::SOURCE_ID, literal(id));
}

/// What an imported session's graph holds, for importing its source again.
#[derive(Debug, Default)]
pub(crate) struct ImportedGraph {
    /// `(source id, index)` of each turn imported from a source message (not a copy a
    /// detach made).
    pub(crate) sources: Vec<(String, u64)>,
    /// `(tool call id, index)` of each tool call a turn makes.
    pub(crate) calls: Vec<(String, u64)>,
    /// `(tool call id, sub-agent id)` of tool results that name the sub-agent their
    /// call launched (an `agentId: …` line).
    pub(crate) spawns: Vec<(String, String)>,
}

impl ImportedGraph {
    /// Reads the quads of one session's graph; `agent_in` finds a sub-agent id in a
    /// tool result's text.
    pub(crate) fn read(
        rdf: &Rdf<'_>,
        quads: &[Quad],
        agent_in: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let mut out = Self::default();
        // Turns a detach copied in are not where their lines were imported.
        let copies: HashSet<&NamedOrBlankNode> = quads
            .iter()
            .filter(|q| q.predicate == prov::WAS_DERIVED_FROM)
            .map(|q| &q.subject)
            .collect();
        let mut results: HashMap<&NamedNode, (Option<String>, Option<String>)> = HashMap::new();
        for quad in quads {
            let NamedOrBlankNode::NamedNode(turn) = &quad.subject else {
                continue;
            };
            let Some(value) = text(&quad.object) else {
                continue;
            };
            if copies.contains(&quad.subject) {
                continue;
            }
            let Some((_, index)) = rdf.iris.turn_index(turn.as_ref()) else {
                continue;
            };
            if quad.predicate == ft::SOURCE_ID {
                out.sources.push((value.to_string(), index));
            } else if quad.predicate == ft::TOOL_CALL_ID {
                results.entry(turn).or_default().0 = Some(value.to_string());
            } else if quad.predicate == ft::CONTENT {
                results.entry(turn).or_default().1 = agent_in(value);
            } else if quad.predicate == ft::TOOL_CALLS {
                let calls = serde_json::from_str::<serde_json::Value>(value).unwrap_or_default();
                for call in calls.as_array().into_iter().flatten() {
                    if let Some(id) = call.get("id").and_then(|i| i.as_str()) {
                        out.calls.push((id.to_string(), index));
                    }
                }
            }
        }
        for (call, agent) in results.into_values() {
            if let (Some(call), Some(agent)) = (call, agent) {
                out.spawns.push((call, agent));
            }
        }
        out
    }
}

impl Rdf<'_> {
    /// Whether any turn of the session in graph `iri` was imported from a source
    /// transcript.
    pub(crate) fn has_source_ids(&self, iri: &NamedNode) -> Result<bool> {
        Ok(self
            .backend
            .quads(
                None,
                Some(ft::SOURCE_ID),
                None,
                Some(GraphNameRef::NamedNode(iri.as_ref())),
            )
            .next()
            .transpose()?
            .is_some())
    }

    /// The source messages turn `turn` (stored in graph `graph`) was imported from: one,
    /// or one per line of an answer written as several.
    pub(crate) fn source_ids(&self, turn: &NamedNode, graph: &NamedNode) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for quad in self.backend.quads(
            Some(turn.as_ref().into()),
            Some(ft::SOURCE_ID),
            None,
            Some(GraphNameRef::NamedNode(graph.as_ref())),
        ) {
            out.extend(text(&quad?.object).map(str::to_string));
        }
        Ok(out)
    }

    /// The graph of the session that holds the turns imported from source message `id`
    /// (not a copy a detach made), if any.
    pub(crate) fn session_holding(&self, id: &str) -> Result<Option<NamedNode>> {
        for (turn, graph) in self.subjects_with(ft::SOURCE_ID, id)? {
            let copy = self
                .backend
                .quads(
                    Some(turn.as_ref().into()),
                    Some(prov::WAS_DERIVED_FROM),
                    None,
                    Some(GraphNameRef::NamedNode(graph.as_ref())),
                )
                .next()
                .is_some();
            if !copy && self.session_node(graph.as_ref())?.is_some() {
                return Ok(Some(graph));
            }
        }
        Ok(None)
    }
}
