//! The change feed of a shared store: one `ft:Change` per write, in the graph
//! `{base}feed`, written in the same update as the write, naming the sessions it touched
//! (or the store node, for a write that may have touched anything). Each writer numbers
//! its changes 1, 2, 3, … in commit order; a reader keeps the highest number it has
//! applied per writer and asks only for what lies past it.

use super::{GraphWriter, Iris, Rdf};
use crate::error::Result;
use crate::vocab::{ft, rdf, xsd};
use chrono::{DateTime, SecondsFormat, Utc};
use oxigraph::model::{Literal, NamedNode, Quad, Term};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What one change touched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Touched {
    Sessions(Vec<NamedNode>),
    /// Anything (a SPARQL update): every reader rebuilds its catalog.
    Everything,
}

/// The quads of change `seq` of `writer`, committed at `at`.
pub(crate) fn change_quads(
    iris: &Iris,
    writer: &str,
    seq: u64,
    at: DateTime<Utc>,
    touched: &Touched,
) -> Vec<Quad> {
    let node = iris.change(writer, seq);
    let mut w = GraphWriter::new(iris.feed_graph());
    w.add(&node, rdf::TYPE, ft::CHANGE);
    w.add(&node, ft::CHANGE_BY, Literal::new_simple_literal(writer));
    w.add(&node, ft::CHANGE_SEQ, Literal::from(seq as i64));
    w.add(&node, ft::CHANGE_AT, time(at));
    match touched {
        Touched::Sessions(sessions) => {
            for session in sessions {
                w.add(&node, ft::CHANGED, session.clone());
            }
        }
        Touched::Everything => w.add(&node, ft::CHANGED, iris.store_node()),
    }
    w.quads
}

fn time(at: DateTime<Utc>) -> Literal {
    Literal::new_typed_literal(
        at.to_rfc3339_opts(SecondsFormat::Millis, true),
        xsd::DATE_TIME,
    )
}

/// The update that removes the changes committed before `before`.
pub(crate) fn compaction(iris: &Iris, before: DateTime<Utc>) -> String {
    format!(
        "DELETE {{ GRAPH {g} {{ ?change ?p ?o }} }} WHERE {{ GRAPH {g} {{ ?change {at} ?at ; \
         ?p ?o }} FILTER (?at < {before}) }}",
        g = iris.feed_graph(),
        at = ft::CHANGE_AT,
        before = time(before),
    )
}

/// One change as a reader gets it: its writer, its number, what it touched.
#[derive(Debug)]
pub(crate) struct ChangeRow {
    pub(crate) writer: String,
    pub(crate) seq: u64,
    pub(crate) touched: Touched,
}

impl Rdf<'_> {
    /// The highest change number of each writer in the feed.
    pub(crate) fn feed_heads(&self) -> Result<BTreeMap<String, u64>> {
        let query = format!(
            "SELECT ?by (MAX(?seq) AS ?head) WHERE {{ GRAPH {} {{ ?change {} ?by ; {} ?seq }} }} \
             GROUP BY ?by",
            self.iris.feed_graph(),
            ft::CHANGE_BY,
            ft::CHANGE_SEQ,
        );
        let mut out = BTreeMap::new();
        for row in self.select_rows(&query)? {
            if let (Some(by), Some(head)) = (literal(row.get("by")), number(row.get("head"))) {
                out.insert(by, head);
            }
        }
        Ok(out)
    }

    /// The changes past `seen` (the highest number applied, per writer): every change
    /// of a writer `seen` does not name. In each writer's order.
    pub(crate) fn changes_after(&self, seen: &BTreeMap<String, u64>) -> Result<Vec<ChangeRow>> {
        let mut filter = String::new();
        for (writer, seq) in seen {
            let by = Literal::new_simple_literal(writer);
            let _ = write!(
                filter,
                "(?by = {by} && ?seq > {}) || ",
                Literal::from(*seq as i64)
            );
        }
        let known: Vec<String> = seen
            .keys()
            .map(|w| Literal::new_simple_literal(w).to_string())
            .collect();
        if known.is_empty() {
            filter.push_str("true");
        } else {
            let _ = write!(filter, "?by NOT IN ({})", known.join(", "));
        }
        let query = format!(
            "SELECT ?by ?seq ?what WHERE {{ GRAPH {} {{ ?change {} ?by ; {} ?seq ; {} ?what }} \
             FILTER ({filter}) }}",
            self.iris.feed_graph(),
            ft::CHANGE_BY,
            ft::CHANGE_SEQ,
            ft::CHANGED,
        );
        let store = self.iris.store_node();
        let mut changes: BTreeMap<(String, u64), Touched> = BTreeMap::new();
        for row in self.select_rows(&query)? {
            let (Some(writer), Some(seq), Some(Term::NamedNode(what))) = (
                literal(row.get("by")),
                number(row.get("seq")),
                row.get("what"),
            ) else {
                continue;
            };
            let entry = changes
                .entry((writer, seq))
                .or_insert_with(|| Touched::Sessions(Vec::new()));
            match entry {
                _ if *what == store => *entry = Touched::Everything,
                Touched::Sessions(sessions) => sessions.push(what.clone()),
                Touched::Everything => {}
            }
        }
        Ok(changes
            .into_iter()
            .map(|((writer, seq), touched)| ChangeRow {
                writer,
                seq,
                touched,
            })
            .collect())
    }
}

fn literal(term: Option<&Term>) -> Option<String> {
    match term {
        Some(Term::Literal(l)) => Some(l.value().to_string()),
        _ => None,
    }
}

fn number(term: Option<&Term>) -> Option<u64> {
    literal(term).and_then(|v| v.parse().ok())
}
