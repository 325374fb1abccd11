//! The store node (`{base}store`, in the graph of the same name): the digest version the
//! store's turns are made with, and what an upgrade from an older version rewrites.

use super::{digest_of, history_name, literal, text, DigestFields, Iris, Rdf, SessionNode};
use crate::error::{Error, Result};
use crate::rdf::DigestVersion;
use crate::vocab::{ft, rdf};
use oxigraph::model::{GraphName, GraphNameRef, Literal, NamedNode, NamedNodeRef, Quad, Term};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The properties whose presence makes a turn's digest differ between version 1 and
/// version 2: a store whose turns carry none of them has the same digests in both.
const EXTRAS: [NamedNodeRef<'static>; 4] =
    [ft::NAME, ft::TOOL_CALL_ID, ft::TOOL_CALLS, ft::PAYLOAD];

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
pub(crate) fn redigest_quads(
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
    let quad = |v: &str| {
        Quad::new(
            owner.iri.clone(),
            ft::BASE_DIGEST,
            literal(v),
            graph.clone(),
        )
    };
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
            .quads(
                None,
                Some(rdf::TYPE),
                Some(Term::from(ft::SESSION.into_owned()).as_ref()),
                None,
            )
            .next()
            .transpose()?
            .is_some())
    }
}

/// A turn's digest and its name as an OpenTelemetry import gives it (see
/// `rdf::history_name`), each chained over the turn before.
#[derive(Clone, Debug, Default)]
struct Chained {
    digest: String,
    name: String,
}

impl Chained {
    /// A turn that digests alike in both versions and has no payload or name before it:
    /// its name is its digest.
    fn stored(digest: String) -> Self {
        Self {
            name: digest.clone(),
            digest,
        }
    }
}

/// The digests of some sessions as the current version makes them, and the quads that
/// put them in place of the stored ones.
#[derive(Default)]
pub(crate) struct Redigest {
    pub(crate) remove: Vec<Quad>,
    pub(crate) insert: Vec<Quad>,
    /// The sessions whose quads change.
    pub(crate) sessions: BTreeSet<NamedNode>,
    pub(crate) turns: u64,
}

/// The current version's digests for the sessions of `seeds` and every session that
/// forks below one of them, as stored version-1 digests chain: the quads that put
/// them in place. The digest before a fork's first turn is taken from the sessions
/// recomputed, else from the store, else (for a scratch store that holds only the
/// nodes of sessions that live elsewhere) from `outside`.
pub(crate) fn redigest(
    rdf: &Rdf<'_>,
    seeds: BTreeSet<NamedNode>,
    outside: Option<&Rdf<'_>>,
) -> Result<Redigest> {
    // The seeds and their descendants, ordered by depth: a parent is recomputed
    // before its forks.
    let mut nodes: BTreeMap<NamedNode, SessionNode> = BTreeMap::new();
    let mut queue: Vec<NamedNode> = seeds.into_iter().collect();
    while let Some(iri) = queue.pop() {
        if nodes.contains_key(&iri) {
            continue;
        }
        let Some(node) = rdf.session_node(iri.as_ref())? else {
            continue;
        };
        queue.extend(rdf.children(&iri)?);
        nodes.insert(iri, node);
    }
    let mut order: Vec<&SessionNode> = nodes.values().collect();
    order.sort_by(|a, b| (a.depth, &a.iri).cmp(&(b.depth, &b.iri)));
    // The new digest of each turn of a recomputed session, and its new name as an
    // OpenTelemetry import names it, by its index.
    let mut digests: HashMap<NamedNode, BTreeMap<u64, Chained>> = HashMap::new();
    let mut out = Redigest::default();
    for node in order {
        let start = node.own_start();
        let old_base = node.base_digest.clone().unwrap_or_default();
        let base = match start {
            0 => Chained::default(),
            k => redigested_at(rdf, node, k - 1, &nodes, &digests, outside)?,
        };
        if start > 0 && base.digest != old_base {
            let (remove, insert) = rebase(node, &old_base, &base.digest);
            out.remove.push(remove);
            out.insert.push(insert);
            out.sessions.insert(node.iri.clone());
        }
        let mut prev = base;
        let mut own = BTreeMap::new();
        // Turns are contiguous from the fork point: read until the first missing index.
        for index in start.. {
            if !rdf.has_turn(node, index)? {
                break;
            }
            let turn = rdf.turn(node, index)?;
            let fields = DigestFields::from(&turn);
            let next = Chained {
                digest: digest_of(&prev.digest, index, &fields),
                name: history_name(&prev.name, index, &fields),
            };
            let sources = rdf.source_ids(&rdf.iris.turn(node.id.as_str(), index), &node.iri)?;
            // An OpenTelemetry import named the turn by its version-1 digest.
            let renamed = sources.contains(&turn.digest) && next.name != turn.digest;
            if next.digest != turn.digest || renamed {
                let (remove, insert) = redigest_quads(
                    rdf.iris,
                    node,
                    index,
                    (&turn.digest, &next.digest),
                    &next.name,
                    &sources,
                );
                out.remove.extend(remove);
                out.insert.extend(insert);
                out.sessions.insert(node.iri.clone());
                out.turns += u64::from(next.digest != turn.digest);
            }
            own.insert(index, next.clone());
            prev = next;
        }
        digests.insert(node.iri.clone(), own);
    }
    Ok(out)
}

/// The recomputed digest and name of turn `index` in the chain of `node` (an index
/// below `node`'s own turns): from the level that owns it; for a level not
/// recomputed, whose turns digest alike in both versions, its stored digest twice.
fn redigested_at(
    rdf: &Rdf<'_>,
    node: &SessionNode,
    index: u64,
    nodes: &BTreeMap<NamedNode, SessionNode>,
    digests: &HashMap<NamedNode, BTreeMap<u64, Chained>>,
    outside: Option<&Rdf<'_>>,
) -> Result<Chained> {
    let mut level = node.clone();
    for _ in 0..=crate::model::MAX_FORK_DEPTH {
        let Some(parent) = level.parent.clone() else {
            break;
        };
        let parent_node = match nodes.get(&parent) {
            Some(n) => n.clone(),
            None => match rdf.session_node(parent.as_ref())? {
                Some(n) => n,
                None => break,
            },
        };
        if index >= parent_node.own_start() {
            if let Some(d) = digests.get(&parent).and_then(|own| own.get(&index)) {
                return Ok(d.clone());
            }
            if rdf.has_turn(&parent_node, index)? {
                return Ok(Chained::stored(rdf.digest(&parent_node, index)?));
            }
            if let Some(outside) = outside {
                if let Some(there) = outside.session_node(parent.as_ref())? {
                    return Ok(Chained::stored(outside.digest(&there, index)?));
                }
            }
            break;
        }
        level = parent_node;
    }
    Err(Error::Corrupt {
        session: node.id.to_string(),
        detail: format!("no session in the chain holds turn {index}, which the fork follows"),
    })
}
