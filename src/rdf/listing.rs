//! What lists read straight from the graph: a family's members, and, for a catalog of
//! a store across a network, the whole store in a few requests (its rebuild) and the
//! heads of a page's sessions in one. Values enter the queries only as terms written
//! by oxrdf.

use super::session::decode_node;
use super::{text, Rdf, SessionNode};
use crate::error::Result;
use crate::model::Turn;
use crate::vocab::{ft, prov, rdf};
use oxigraph::model::{GraphName, Literal, NamedNode, Quad, Term};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

/// Session IRIs asked for per request when a shared store's catalog is built.
const LIST_PAGE: usize = 2_000;
/// Sessions whose nodes and turns are asked for per request then: about 12 rows of
/// node and 4 per turn each, so a chunk of 10-turn sessions is 2,000 rows of turns.
/// (A store that answers fewer than 1,000 rows per request cannot be served.)
const CHUNK: usize = 50;

impl Rdf<'_> {
    /// The sessions whose family root is `root` (itself included, for a root).
    pub(crate) fn family_members(&self, root: &NamedNode) -> Result<Vec<NamedNode>> {
        self.sessions_where(ft::FORK_ROOT, root.clone())
    }

    /// Every session of the store with its own turns (index order): what a catalog of
    /// a store across a network is built from. Each request asks for a bounded number
    /// of rows, since a store may cut an answer short without a word (Virtuoso's
    /// `ResultSetMaxRows`, 10,000 in a stock install): the sessions' IRIs
    /// [`LIST_PAGE`] at a time until a page comes back empty, then for [`CHUNK`] of them at a time their nodes, their
    /// turn counts and their turns (a `VALUES` block joined with `GRAPH ?g`); a session
    /// whose turns came back fewer than its count (its chunk's answer was cut) is read
    /// again alone.
    pub(crate) fn every_session(&self) -> Result<Vec<(SessionNode, Vec<Turn>)>> {
        let mut out = Vec::new();
        let mut after: Option<NamedNode> = None;
        loop {
            let page = self.session_iris_after(after.as_ref())?;
            // Only an empty page ends the list: a store may have cut a full one short.
            let Some(last) = page.last().cloned() else {
                return Ok(out);
            };
            for chunk in page.chunks(CHUNK) {
                out.extend(self.sessions_with_turns(chunk)?);
            }
            after = Some(last);
        }
    }

    /// Up to [`LIST_PAGE`] session graphs, in the order of their IRIs, after `after`.
    fn session_iris_after(&self, after: Option<&NamedNode>) -> Result<Vec<NamedNode>> {
        let filter = after
            .map(|g| {
                format!(
                    "FILTER (STR(?g) > {})",
                    Literal::new_simple_literal(g.as_str())
                )
            })
            .unwrap_or_default();
        let rows = self.select_rows(&format!(
            "SELECT ?g WHERE {{ GRAPH ?g {{ ?g {} {} }} {filter} }} ORDER BY (STR(?g)) LIMIT {LIST_PAGE}",
            rdf::TYPE,
            ft::SESSION
        ))?;
        Ok(rows
            .iter()
            .filter_map(|row| match row.get("g") {
                Some(Term::NamedNode(g)) => Some(g.clone()),
                _ => None,
            })
            .collect())
    }

    /// The sessions of `graphs` with their own turns, in three requests (and one more
    /// for each session whose turns came back short).
    fn sessions_with_turns(&self, graphs: &[NamedNode]) -> Result<Vec<(SessionNode, Vec<Turn>)>> {
        let values: String = graphs.iter().map(|g| format!("{g} ")).collect();
        let mut quads: HashMap<NamedNode, Vec<Quad>> = HashMap::new();
        for row in self.select_rows(&format!(
            "SELECT ?g ?p ?o WHERE {{ VALUES ?g {{ {values}}} GRAPH ?g {{ ?g ?p ?o }} }}"
        ))? {
            if let (Some(Term::NamedNode(g)), Some(Term::NamedNode(p)), Some(o)) =
                (row.get("g"), row.get("p"), row.get("o"))
            {
                let graph = GraphName::NamedNode(g.clone());
                let quad = Quad::new(g.clone(), p.clone(), o.clone(), graph);
                quads.entry(g.clone()).or_default().push(quad);
            }
        }
        let mut counts: HashMap<NamedNode, u64> = HashMap::new();
        for row in self.select_rows(&format!(
            "SELECT ?g (COUNT(?t) AS ?n) WHERE {{ VALUES ?g {{ {values}}} \
             GRAPH ?g {{ ?t {} ?i }} }} GROUP BY ?g",
            ft::INDEX
        ))? {
            if let (Some(Term::NamedNode(g)), Some(n)) = (
                row.get("g"),
                row.get("n").and_then(text).and_then(|n| n.parse().ok()),
            ) {
                counts.insert(g.clone(), n);
            }
        }
        type About = Vec<(NamedNode, Term)>;
        let mut turns: HashMap<NamedNode, BTreeMap<u64, About>> = HashMap::new();
        for row in self.select_rows(&format!(
            "SELECT ?g ?i ?p ?o WHERE {{ VALUES ?g {{ {values}}} GRAPH ?g {{ ?t {} ?i ; ?p ?o }} \
             FILTER (?p IN ({}, {}, {}, {})) }}",
            ft::INDEX,
            ft::ROLE,
            ft::CONTENT,
            prov::WAS_ATTRIBUTED_TO,
            prov::GENERATED_AT_TIME,
        ))? {
            let (Some(Term::NamedNode(g)), Some(i), Some(Term::NamedNode(p)), Some(o)) = (
                row.get("g"),
                row.get("i").and_then(text).and_then(|i| i.parse().ok()),
                row.get("p"),
                row.get("o"),
            ) else {
                continue;
            };
            let about = turns.entry(g.clone()).or_default().entry(i).or_default();
            about.push((p.clone(), o.clone()));
        }
        let mut out = Vec::with_capacity(graphs.len());
        for g in graphs {
            let Some(quads) = quads.remove(g) else {
                continue; // gone meanwhile
            };
            let Some(mut node) = decode_node(self.iris, g.as_ref(), quads)? else {
                continue;
            };
            let stored = counts.get(g).copied().unwrap_or(0);
            let read = turns.remove(g).unwrap_or_default();
            let whole = read.len() as u64 == stored
                && read.values().all(|about| {
                    [ft::ROLE, ft::CONTENT]
                        .iter()
                        .all(|p| about.iter().any(|(q, _)| q == p))
                });
            let own = if whole {
                let mut own = Vec::with_capacity(read.len());
                for (index, about) in read {
                    if index >= node.own_start() {
                        own.push(self.decode_turn(&node, index, about)?);
                    }
                }
                own
            } else {
                // Cut short by the store: this session's turns alone (which fails
                // naming the turn if one is truly incomplete).
                node.length = node.own_start() + stored;
                self.span_turns(&[(&node, node.own_start(), node.length)])?
            };
            node.length = own.last().map_or(node.own_start(), |t| t.index + 1);
            out.push((node, own));
        }
        Ok(out)
    }

    /// For the sessions of a page (`(graph, length, first own index)`), in at most
    /// three requests whatever the page's size: the digest of each one's last turn (its
    /// base digest, with no own turn of its own), and which of them some regeneration or
    /// run produced (whose tokens are then read). Each request is a `VALUES` block
    /// joined with `GRAPH ?g` in one group, which Oxigraph server evaluates graph by
    /// graph (as an `OPTIONAL` or a `UNION` of the three it read every graph: 1.1 s at
    /// 12,000 sessions); Virtuoso 7 answers a `VALUES` block inside a `UNION` branch
    /// with no rows, and nests a long `UNION` too deep to parse.
    pub(crate) fn page_heads(
        &self,
        page: &[(NamedNode, u64, u64)],
    ) -> Result<(HashMap<NamedNode, String>, HashSet<NamedNode>)> {
        let mut heads = HashMap::new();
        let mut produced = HashSet::new();
        let (mut last, mut bare, mut all) = (String::new(), String::new(), String::new());
        for (g, length, own_start) in page {
            if length > own_start {
                let _ = write!(last, "({g} {}) ", Literal::from(*length - 1));
            } else {
                let _ = write!(bare, "{g} ");
            }
            let _ = write!(all, "{g} ");
        }
        let ask = |query: String, heads: &mut HashMap<NamedNode, String>| -> Result<()> {
            for row in self.select_rows(&query)? {
                if let (Some(Term::NamedNode(g)), Some(d)) =
                    (row.get("g"), row.get("d").and_then(text))
                {
                    heads.insert(g.clone(), d.to_string());
                }
            }
            Ok(())
        };
        if !last.is_empty() {
            ask(
                format!(
                    "SELECT ?g ?d WHERE {{ VALUES (?g ?last) {{ {last}}} \
                     GRAPH ?g {{ ?t {} ?last ; {} ?d }} }}",
                    ft::INDEX,
                    ft::DIGEST
                ),
                &mut heads,
            )?;
        }
        if !bare.is_empty() {
            ask(
                format!(
                    "SELECT ?g ?d WHERE {{ VALUES ?g {{ {bare}}} GRAPH ?g {{ ?g {} ?d }} }}",
                    ft::BASE_DIGEST
                ),
                &mut heads,
            )?;
        }
        if !all.is_empty() {
            let query = format!(
                "SELECT DISTINCT ?g WHERE {{ VALUES ?g {{ {all}}} GRAPH ?jg {{ ?job {} ?g }} }}",
                ft::RESULT_SESSION
            );
            for row in self.select_rows(&query)? {
                if let Some(Term::NamedNode(g)) = row.get("g") {
                    produced.insert(g.clone());
                }
            }
        }
        Ok((heads, produced))
    }

    /// The role and content of each turn `(graph, index)` that exists, in one request
    /// (a `VALUES` block joined with `GRAPH ?g`, as [`Rdf::page_heads`] asks).
    pub(crate) fn turns_at(
        &self,
        points: &[(NamedNode, u64)],
    ) -> Result<HashMap<(NamedNode, u64), (String, String)>> {
        let mut out = HashMap::new();
        if points.is_empty() {
            return Ok(out);
        }
        let mut rows = String::new();
        for (g, i) in points {
            let _ = write!(rows, "({g} {}) ", Literal::from(*i));
        }
        let query = format!(
            "SELECT ?g ?i ?role ?content WHERE {{ VALUES (?g ?i) {{ {rows}}} \
             GRAPH ?g {{ ?t {} ?i ; {} ?role ; {} ?content }} }}",
            ft::INDEX,
            ft::ROLE,
            ft::CONTENT
        );
        for row in self.select_rows(&query)? {
            if let (Some(Term::NamedNode(g)), Some(i), Some(role), Some(content)) = (
                row.get("g"),
                row.get("i").and_then(text).and_then(|i| i.parse().ok()),
                row.get("role").and_then(text),
                row.get("content").and_then(text),
            ) {
                out.insert((g.clone(), i), (role.to_string(), content.to_string()));
            }
        }
        Ok(out)
    }
}
