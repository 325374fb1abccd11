//! The store node (`{base}store`, in the graph of the same name): the digest version the
//! store's turns are made with, and what an upgrade from an older version rewrites.

use super::{literal, text, Iris, Rdf, SessionNode};
use crate::error::Result;
use crate::rdf::DigestVersion;
use crate::vocab::{ft, rdf};
use oxigraph::model::{GraphName, GraphNameRef, Literal, NamedNode, NamedNodeRef, Quad, Term};
use std::collections::BTreeSet;

/// The properties whose presence makes a turn's digest differ between version 1 and
/// version 2: a store whose turns carry none of them has the same digests in both.
const EXTRAS: [NamedNodeRef<'static>; 4] = [ft::NAME, ft::TOOL_CALL_ID, ft::TOOL_CALLS, ft::PAYLOAD];

/// The statements that the store's digests are of `version`.
pub(crate) fn version_quads(iris: &Iris, version: DigestVersion) -> Vec<Quad> {
    let node = iris.store_node();
    let graph = GraphName::NamedNode(node.clone());
    vec![
        Quad::new(node.clone(), rdf::TYPE, ft::STORE, graph.clone()),
        Quad::new(
            node,
            ft::DIGEST_VERSION,
            Literal::from(u64::from(version.number())),
            graph,
        ),
    ]
}

/// Turn `index` of `owner` with digest `new` in place of `old`: the quads to remove and
/// to insert. A source id equal to the old digest is replaced by `name`: an
/// OpenTelemetry import names each turn by its history's digest (see
/// [`super::history_name`]), and finds it again by that name.
pub(crate) fn redigest(
    iris: &Iris,
    owner: &SessionNode,
    index: u64,
    (old, new): (&str, &str),
    name: &str,
    source_ids: &[String],
) -> (Vec<Quad>, Vec<Quad>) {
    let turn = iris.turn(owner.id.as_str(), index);
    let graph = GraphName::NamedNode(owner.iri.clone());
    let quad = |p: NamedNodeRef<'_>, v: &str| Quad::new(turn.clone(), p, literal(v), graph.clone());
    let (mut remove, mut insert) = (Vec::new(), Vec::new());
    if old != new {
        remove.push(quad(ft::DIGEST, old));
        insert.push(quad(ft::DIGEST, new));
    }
    if old != name && source_ids.iter().any(|s| s == old) {
        remove.push(quad(ft::SOURCE_ID, old));
        insert.push(quad(ft::SOURCE_ID, name));
    }
    (remove, insert)
}

/// A fork's `ft:baseDigest` replaced: the quads to remove and to insert.
pub(crate) fn rebase(owner: &SessionNode, old: &str, digest: &str) -> (Quad, Quad) {
    let graph = GraphName::NamedNode(owner.iri.clone());
    let quad = |v: &str| Quad::new(owner.iri.clone(), ft::BASE_DIGEST, literal(v), graph.clone());
    (quad(old), quad(digest))
}

impl Rdf<'_> {
    /// The digest version the store states, if it states one.
    pub(crate) fn stated_digest_version(&self) -> Result<Option<u64>> {
        let node = self.iris.store_node();
        for quad in self.backend.quads(
            Some(node.as_ref().into()),
            Some(ft::DIGEST_VERSION),
            None,
            Some(GraphNameRef::NamedNode(node.as_ref())),
        ) {
            if let Some(n) = text(&quad?.object).and_then(|v| v.parse().ok()) {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }

    /// The store node's statements, whatever they say.
    pub(crate) fn store_statements(&self) -> Result<Vec<Quad>> {
        let node = self.iris.store_node();
        self.about(node.as_ref(), node.as_ref())
    }

    /// Whether any session graph holds a turn whose digest differs between version 1
    /// and version 2 (one lookup per property, stopping at the first).
    pub(crate) fn any_turn_with_extras(&self) -> Result<bool> {
        for p in EXTRAS {
            if let Some(quad) = self.backend.quads(None, Some(p), None, None).next() {
                quad?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The session graphs holding a turn whose digest differs between version 1 and
    /// version 2.
    pub(crate) fn graphs_with_extras(&self) -> Result<BTreeSet<NamedNode>> {
        let mut out = BTreeSet::new();
        for p in EXTRAS {
            for quad in self.backend.quads(None, Some(p), None, None) {
                if let GraphName::NamedNode(g) = quad?.graph_name {
                    if self.iris.session_id(g.as_ref()).is_some() {
                        out.insert(g);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Whether the store holds any session.
    pub(crate) fn any_session(&self) -> Result<bool> {
        Ok(self
            .backend
            .quads(None, Some(rdf::TYPE), Some(Term::from(ft::SESSION.into_owned()).as_ref()), None)
            .next()
            .transpose()?
            .is_some())
    }

    /// The source ids turn `index` of `owner` carries.
    pub(crate) fn source_ids(&self, owner: &SessionNode, index: u64) -> Result<Vec<String>> {
        let turn = self.iris.turn(owner.id.as_str(), index);
        let mut out = Vec::new();
        for quad in self.backend.quads(
            Some(turn.as_ref().into()),
            Some(ft::SOURCE_ID),
            None,
            Some(GraphNameRef::NamedNode(owner.iri.as_ref())),
        ) {
            out.extend(text(&quad?.object).map(str::to_string));
        }
        Ok(out)
    }
}
