//! Instance IRIs under a base: sessions, turns, activities, agents.

use crate::model::{Agent, SessionId};
use oxigraph::model::{NamedNode, NamedNodeRef};

/// The default base of instance IRIs.
pub const DEFAULT_BASE_IRI: &str = "urn:forktrail:";

/// Builds and parses instance IRIs under a base.
#[derive(Clone, Debug)]
pub(crate) struct Iris {
    pub(crate) base: String,
}

impl Default for Iris {
    fn default() -> Self {
        Self {
            base: DEFAULT_BASE_IRI.to_string(),
        }
    }
}

impl Iris {
    /// `{base}session:{id}`: the session node, and the name of its graph.
    pub(crate) fn session(&self, id: &str) -> NamedNode {
        NamedNode::new_unchecked(format!("{}session:{id}", self.base))
    }

    /// `{base}session:{id}/turn/{index}`.
    pub(crate) fn turn(&self, id: &str, index: u64) -> NamedNode {
        NamedNode::new_unchecked(format!("{}session:{id}/turn/{index}", self.base))
    }

    /// `{base}session:{id}/{what}`: an activity or entity of the session (`fork`,
    /// `detach`, `merge/3`, `anchor/name`, `regeneration/…`).
    pub(crate) fn activity(&self, id: &str, what: &str) -> NamedNode {
        NamedNode::new_unchecked(format!("{}session:{id}/{what}", self.base))
    }

    /// `{base}leases`: the graph of the leases writers of a shared store hold, and the
    /// key of a lease on the whole store.
    pub(crate) fn lease_graph(&self) -> NamedNode {
        NamedNode::new_unchecked(format!("{}leases", self.base))
    }

    /// `{base}feed`: the graph of a shared store's change feed.
    pub(crate) fn feed_graph(&self) -> NamedNode {
        NamedNode::new_unchecked(format!("{}feed", self.base))
    }

    /// `{base}feed/{writer}/{seq}`: an entry of the change feed.
    pub(crate) fn change(&self, writer: &str, seq: u64) -> NamedNode {
        NamedNode::new_unchecked(format!("{}feed/{writer}/{seq}", self.base))
    }

    /// `{base}agents`: the graph that declares each agent once (its one class and its
    /// name), so that a query over the union of graphs meets each declaration once.
    pub(crate) fn agents_graph(&self) -> NamedNode {
        NamedNode::new_unchecked(format!("{}agents", self.base))
    }

    /// `{base}store`: the node that states facts of the whole store (its digest
    /// version), and the name of the graph that holds them.
    pub(crate) fn store_node(&self) -> NamedNode {
        NamedNode::new_unchecked(format!("{}store", self.base))
    }

    /// Whether `iri` names an agent under this base.
    pub(crate) fn is_agent(&self, iri: &str) -> bool {
        iri.strip_prefix(&self.base)
            .is_some_and(|rest| rest.starts_with("agent:"))
    }

    /// `{base}lease/{id}`.
    pub(crate) fn lease(&self, id: &str) -> NamedNode {
        NamedNode::new_unchecked(format!("{}lease/{id}", self.base))
    }

    pub(crate) fn agent(&self, agent: &Agent) -> NamedNode {
        match agent {
            Agent::Principal(name) => {
                NamedNode::new_unchecked(format!("{}agent:{name}", self.base))
            }
            Agent::Model(name) => NamedNode::new_unchecked(format!(
                "{}agent:model/{}",
                self.base,
                percent_encode(name)
            )),
            Agent::Tool(name) => NamedNode::new_unchecked(format!(
                "{}agent:tool/{}",
                self.base,
                percent_encode(name)
            )),
        }
    }

    /// The session id of a session IRI, if it is one under this base.
    pub(crate) fn session_id(&self, iri: NamedNodeRef<'_>) -> Option<SessionId> {
        let rest = iri.as_str().strip_prefix(&self.base)?;
        SessionId::new(rest.strip_prefix("session:")?).ok()
    }

    /// The session id of a session IRI, or the IRI itself when it is not one (for
    /// messages about data edited by hand).
    pub(crate) fn name_of(&self, iri: NamedNodeRef<'_>) -> String {
        self.session_id(iri)
            .map_or_else(|| iri.as_str().to_string(), |id| id.to_string())
    }

    /// The session and index of a turn IRI under this base.
    pub(crate) fn turn_index(&self, iri: NamedNodeRef<'_>) -> Option<(SessionId, u64)> {
        let rest = iri
            .as_str()
            .strip_prefix(&self.base)?
            .strip_prefix("session:")?;
        let (id, index) = rest.rsplit_once("/turn/")?;
        Some((SessionId::new(id).ok()?, index.parse().ok()?))
    }

    /// The agent named by an agent IRI under this base.
    pub(crate) fn parse_agent(&self, iri: NamedNodeRef<'_>) -> Option<Agent> {
        let rest = iri.as_str().strip_prefix(&self.base)?;
        let name = rest.strip_prefix("agent:")?;
        if let Some(model) = name.strip_prefix("model/") {
            percent_decode(model).map(Agent::Model)
        } else if let Some(tool) = name.strip_prefix("tool/") {
            percent_decode(tool).map(Agent::Tool)
        } else {
            Some(Agent::Principal(name.to_string()))
        }
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so that any model
/// name makes a valid IRI and decodes back exactly.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_round_trip_through_agent_iris() {
        let iris = Iris::default();
        for name in [
            "qwen2.5-7b",
            "meta-llama/Llama-3 8B",
            "x> } ; DROP ALL ; #",
            "é%",
        ] {
            let iri = iris.agent(&Agent::Model(name.into()));
            assert!(
                NamedNode::new(iri.as_str()).is_ok(),
                "{iri} is not a valid IRI"
            );
            assert_eq!(
                iris.parse_agent(iri.as_ref()),
                Some(Agent::Model(name.into()))
            );
        }
    }

    #[test]
    fn turn_iris_give_back_their_session_and_index() {
        let iris = Iris::default();
        let iri = iris.turn("a:b-1", 42);
        let (session, index) = iris.turn_index(iri.as_ref()).unwrap();
        assert_eq!((session.as_str(), index), ("a:b-1", 42));
        assert_eq!(iris.turn_index(iris.session("x").as_ref()), None);
    }
}
