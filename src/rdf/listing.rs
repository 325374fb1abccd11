//! Lists and search read straight from the graph: a family's members, and, for a store
//! across a network (which has no catalog), pages of sessions and content matches by
//! SPARQL. Values enter the queries only as terms written by oxrdf.

use super::{text, Rdf};
use crate::error::Result;
use crate::vocab::{ft, xsd};
use oxigraph::model::{Literal, NamedNode, Term};

/// Which sessions a SPARQL page lists.
#[derive(Default)]
pub(crate) struct SessionFilter {
    pub(crate) principal: Option<NamedNode>,
    pub(crate) model: Option<NamedNode>,
    pub(crate) roots_only: bool,
    pub(crate) parent: Option<NamedNode>,
    pub(crate) root: Option<NamedNode>,
    /// A time (RFC 3339): created, or with a turn generated, at or after it.
    pub(crate) since: Option<String>,
}

const PREFIXES: &str = "PREFIX ft: <https://w3id.org/forktrail/ns#> \
                        PREFIX prov: <http://www.w3.org/ns/prov#> \
                        PREFIX dcterms: <http://purl.org/dc/terms/> ";

/// A session's id and creation time (`xsd:dateTime` lexical form), as listed.
pub(crate) type SessionRow = (String, Option<String>);

impl Rdf<'_> {
    /// The sessions whose family root is `root` (itself included, for a root).
    pub(crate) fn family_members(&self, root: &NamedNode) -> Result<Vec<NamedNode>> {
        self.sessions_where(ft::FORK_ROOT, root.clone())
    }

    /// How many sessions match `filter`, and each one's id and creation time.
    pub(crate) fn session_rows(&self, filter: &SessionFilter) -> Result<(u64, Vec<SessionRow>)> {
        let mut where_ =
            String::from("?s a ft:Session ; ft:sessionId ?id ; dcterms:created ?created . ");
        if let Some(principal) = &filter.principal {
            where_ += &format!("?s prov:wasAttributedTo {principal} . ");
        }
        if filter.roots_only {
            where_ += "FILTER NOT EXISTS { ?s ft:parentSession ?p } ";
        }
        if let Some(parent) = &filter.parent {
            where_ += &format!("?s ft:parentSession {parent} . ");
        }
        if let Some(root) = &filter.root {
            where_ += &format!("?s ft:forkRoot {root} . ");
        }
        if let Some(model) = &filter.model {
            where_ += &format!("FILTER EXISTS {{ ?t prov:wasAttributedTo {model} }} ");
        }
        if let Some(since) = &filter.since {
            let since = Literal::new_typed_literal(since, xsd::DATE_TIME);
            where_ += &format!(
                "FILTER (?created >= {since} || EXISTS {{ ?t prov:generatedAtTime ?at \
                 FILTER (?at >= {since}) }}) "
            );
        }
        let rows = self.select_rows(&format!(
            "{PREFIXES} SELECT ?id ?created WHERE {{ GRAPH ?s {{ {where_} }} }}"
        ))?;
        let out: Vec<(String, Option<String>)> = rows
            .iter()
            .filter_map(|r| {
                let id = r.get("id").and_then(text)?.to_string();
                Some((id, r.get("created").and_then(text).map(str::to_string)))
            })
            .collect();
        Ok((out.len() as u64, out))
    }

    /// The turns (session id, index) whose content holds every one of `needles`
    /// (lower-case), case aside.
    pub(crate) fn content_matches(&self, needles: &[String]) -> Result<Vec<(String, u64)>> {
        let filter: Vec<String> = needles
            .iter()
            .map(|w| format!("CONTAINS(LCASE(?content), {})", Literal::from(w.as_str())))
            .collect();
        let rows = self.select_rows(&format!(
            "{PREFIXES} SELECT ?id ?index WHERE {{ GRAPH ?s {{ ?s ft:sessionId ?id . \
             ?t ft:index ?index ; ft:content ?content }} FILTER ({}) }} \
             ORDER BY ?id ?index",
            filter.join(" && ")
        ))?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                let (Some(Term::Literal(id)), Some(index)) = (r.get("id"), r.get("index")) else {
                    return None;
                };
                Some((id.value().to_string(), text(index)?.parse().ok()?))
            })
            .collect())
    }
}
