//! The storage seam: what the engine needs from a store, and the two stores behind it:
//! Oxigraph in this process (in memory, or on RocksDB), and any SPARQL 1.1 store over
//! HTTP.
//!
//! The engine reads quads by pattern, runs SPARQL queries with values bound as terms,
//! commits a change (graphs dropped, quads removed, quads inserted) atomically, and
//! needs to know whether this process owns the store alone (the read cache is only safe
//! then). The engine never names `oxigraph::store::Store`: outside this module only
//! `Store::oxigraph`, the public escape hatch to an embedded store, does.

mod embedded;
mod http_auth;
mod remote;

pub(crate) use embedded::Embedded;
pub use embedded::SERVER_FILE;
pub use http_auth::RemoteAuth;
pub(crate) use remote::Remote;
pub use remote::RemoteConfig;

use crate::error::{Error, Result};
use oxigraph::model::{
    GraphNameRef, NamedNode, NamedNodeRef, NamedOrBlankNodeRef, Quad, QuadRef, Term, TermRef,
    Variable,
};
use oxigraph::sparql::{CancellationToken, QueryEvaluationError, QueryResults};
use spargebra::algebra::GraphPattern;
use spargebra::term::GroundTerm;
use std::path::Path;

/// Quads read by pattern.
pub(crate) type Quads = Box<dyn Iterator<Item = Result<Quad>>>;

/// What one commit writes: all of it, or nothing.
#[derive(Debug, Default)]
pub(crate) struct Change {
    /// Graphs removed whole, first.
    pub(crate) drop_graphs: Vec<NamedNode>,
    /// Then these quads removed.
    pub(crate) removes: Vec<Quad>,
    /// Then these inserted.
    pub(crate) inserts: Vec<Quad>,
    /// On a shared store, what must still hold when the store applies the change; if
    /// it does not, the change must write nothing and the commit fail.
    pub(crate) fence: Option<Fence>,
}

/// The conditions of a fenced commit to a shared store (see ARCHITECTURE.md, Shared
/// stores). A writer's lease protects it only while the writer is prompt: a commit
/// that reaches the store after its lease lapsed (a stalled process, a slow network)
/// could otherwise land on top of another writer's work. A writer that finds a lease
/// lapsed removes it before it reads anything; so the store checks, in the same update
/// request that writes the change, that the lease is still there (nobody took over),
/// and that what the write adds (a turn index, a session id, a branch label) is still
/// free; the change then leaves `receipt`, which the writer reads back to learn whether
/// the store applied it.
#[derive(Debug)]
pub(crate) struct Fence {
    /// A SPARQL group pattern (terms written by oxrdf) that has one solution when the
    /// change may be applied and none otherwise.
    pub(crate) condition: String,
    /// Quads among the change's inserts, there afterwards only if it was applied.
    pub(crate) receipt: Vec<Quad>,
}

impl Change {
    pub(crate) fn is_empty(&self) -> bool {
        self.drop_graphs.is_empty() && self.removes.is_empty() && self.inserts.is_empty()
    }
}

/// A read-only query, its dataset, the terms bound to its variables and a way to stop
/// it.
pub(crate) struct Sparql {
    pub(crate) query: spargebra::Query,
    pub(crate) bindings: Vec<(Variable, Term)>,
    /// The graphs merged into the default graph; empty means the union of all graphs
    /// unless the query says `FROM`.
    pub(crate) default_graphs: Vec<NamedNode>,
    /// The graphs `GRAPH` may match; empty means all of them unless the query says
    /// `FROM NAMED`.
    pub(crate) named_graphs: Vec<NamedNode>,
    pub(crate) cancellation: Option<CancellationToken>,
}

/// The parts of a quad pattern, `None` matching anything (their lifetime is the
/// borrowed terms').
pub(crate) type Subject<'a> = Option<NamedOrBlankNodeRef<'a>>;
pub(crate) type Predicate<'a> = Option<NamedNodeRef<'a>>;
pub(crate) type Object<'a> = Option<TermRef<'a>>;
pub(crate) type Graph<'a> = Option<GraphNameRef<'a>>;

/// What the engine needs from a store.
pub(crate) trait Backend: Send + Sync {
    /// The quads matching a pattern (`None` matches anything).
    fn quads(&self, subject: Subject, predicate: Predicate, object: Object, graph: Graph) -> Quads;

    fn contains(&self, quad: QuadRef<'_>) -> Result<bool>;

    /// Whether a named graph holds anything.
    fn has_graph(&self, graph: NamedNodeRef<'_>) -> Result<bool>;

    /// Writes `change` atomically.
    fn commit(&self, change: Change) -> Result<()>;

    /// Inserts many quads at once, atomically: what a large import writes. A store with
    /// a faster path than a transaction (Oxigraph's bulk loader, which writes sorted
    /// files and adds them in one step) takes it; by default, one commit. The quads are
    /// drawn as the store takes them, so they need not all be in memory at once.
    fn bulk_load(&self, quads: &mut dyn Iterator<Item = Quad>) -> Result<()> {
        self.commit(Change {
            inserts: quads.collect(),
            ..Change::default()
        })
    }

    fn query(&self, query: Sparql) -> Result<QueryResults<'static>>;

    /// Runs a SPARQL update in one transaction: `update` is `text` parsed (and checked);
    /// a remote store is sent the text as written.
    fn update(
        &self,
        text: &str,
        update: spargebra::Update,
        cancel: Option<CancellationToken>,
    ) -> Result<()>;

    /// Whether this process is the only writer of the store: derived state (the read
    /// cache) is safe only then.
    fn exclusive(&self) -> bool;

    fn len(&self) -> Result<usize>;

    fn flush(&self) -> Result<()>;

    /// The directory of an on-disk store.
    fn path(&self) -> Option<&Path>;

    /// The Oxigraph store behind an embedded backend; `None` for one that is not.
    fn oxigraph(&self) -> Option<oxigraph::store::Store>;

    /// The requests sent so far to a store across a network; `None` in process, where
    /// a call is not a round trip and point lookups are cheap.
    fn requests(&self) -> Option<u64> {
        None
    }

    /// Where the store is, for messages: a directory, a URL, or "memory".
    fn location(&self) -> String;

    /// A flush that another thread may call while the store is in use (a store on
    /// disk); `None` when there is nothing to flush.
    fn flusher(&self) -> Option<Box<dyn Fn() -> Result<()> + Send + 'static>> {
        None
    }

    /// A consistent copy of the whole store into the new directory `dir`, made by the
    /// store itself while writers go on (RocksDB's checkpoint); `None` when the store
    /// cannot (in memory, remote).
    #[cfg(feature = "rocksdb")]
    fn backup(&self, _dir: &Path) -> Option<Result<()>> {
        None
    }
}

/// Maps evaluation errors to forktrail's: SERVICE is never followed, cancellation is
/// its own error.
pub(crate) fn evaluation_error(e: QueryEvaluationError) -> Error {
    match e {
        QueryEvaluationError::Cancelled => Error::Cancelled("time limit or caller".into()),
        QueryEvaluationError::UnsupportedService(_)
        | QueryEvaluationError::UnboundService
        | QueryEvaluationError::InvalidServiceName(_)
        | QueryEvaluationError::Service(_) => {
            Error::Query("SERVICE is not allowed: forktrail never calls other endpoints".into())
        }
        other => Error::Query(other.to_string()),
    }
}

/// `query` with `bindings` as a one-row `VALUES` block at the start of its outermost
/// group: the projection, ordering, filters and binds above see the values, as with
/// Oxigraph's substitution, and an engine that plans the query knows them (Oxigraph
/// plans before it substitutes: a bound `?id` it does not know of can start a fork
/// chain's walk from every session). Blank nodes, which a `VALUES` block cannot hold,
/// are given back.
pub(crate) fn bind(
    query: spargebra::Query,
    bindings: Vec<(Variable, Term)>,
) -> (spargebra::Query, Vec<(Variable, Term)>) {
    bind_with(query, bindings, false)
}

/// [`bind`], and for a query evaluated here (not sent as text), each graph its bindings
/// name read directly (see `name_graphs`).
pub(crate) fn bind_naming_graphs(
    query: spargebra::Query,
    bindings: Vec<(Variable, Term)>,
) -> (spargebra::Query, Vec<(Variable, Term)>) {
    bind_with(query, bindings, true)
}

fn bind_with(
    query: spargebra::Query,
    bindings: Vec<(Variable, Term)>,
    naming: bool,
) -> (spargebra::Query, Vec<(Variable, Term)>) {
    let mut variables = Vec::new();
    let mut row = Vec::new();
    let mut blank = Vec::new();
    for (variable, value) in bindings {
        let value = match value {
            Term::NamedNode(n) => GroundTerm::NamedNode(n),
            Term::Literal(l) => GroundTerm::Literal(l),
            other => {
                blank.push((variable, other));
                continue;
            }
        };
        variables.push(variable);
        row.push(Some(value));
    }
    if variables.is_empty() {
        return (query, blank);
    }
    let graphs: Vec<(Variable, NamedNode)> = variables
        .iter()
        .zip(&row)
        .filter_map(|(v, t)| match t {
            Some(GroundTerm::NamedNode(n)) if naming => Some((v.clone(), n.clone())),
            _ => None,
        })
        .collect();
    let values = GraphPattern::Values {
        variables,
        bindings: vec![row],
    };
    let with_values = |pattern: GraphPattern, values: GraphPattern| {
        with_values(name_graphs(pattern, &graphs, true), values)
    };
    let mut bound = query;
    match &mut bound {
        spargebra::Query::Select { pattern, .. }
        | spargebra::Query::Construct { pattern, .. }
        | spargebra::Query::Describe { pattern, .. }
        | spargebra::Query::Ask { pattern, .. } => {
            *pattern = with_values(std::mem::take(pattern), values);
        }
    }
    (bound, blank)
}

/// `pattern` with each `GRAPH ?g { … }` of its outermost group whose `?g` is bound to an
/// IRI (`graphs`) written as `GRAPH <iri> { … } BIND(<iri> AS ?g)`: the same solutions
/// once the binding is joined, but the engine reads that graph alone. (As an algebra
/// only: written out as text, that `BIND` would follow the `VALUES` of the same group,
/// which SPARQL's grammar refuses.) Oxigraph does not
/// push a `VALUES` row into `GRAPH ?g`: a one-session query bound that way read the
/// `ft:index` quads of every graph in the store (seconds at 12,000 sessions). The
/// outermost group only (through joins, unions, filters, binds, the left side of
/// optionals and minus, and at the `top`, the solution modifiers): there the join with
/// the binding removes every solution with another graph anyway; a subquery's, an
/// optional's or a minus's own variables are left alone.
fn name_graphs(pattern: GraphPattern, graphs: &[(Variable, NamedNode)], top: bool) -> GraphPattern {
    use spargebra::term::NamedNodePattern;
    use GraphPattern as P;
    if graphs.is_empty() {
        return pattern;
    }
    let go = |p: Box<P>| Box::new(name_graphs(*p, graphs, false));
    let modifier = |p: Box<P>| Box::new(name_graphs(*p, graphs, top));
    match pattern {
        P::Graph {
            name: NamedNodePattern::Variable(v),
            inner,
        } => match graphs.iter().find(|(g, _)| *g == v && !binds(&inner, g)) {
            Some((_, iri)) => P::Extend {
                inner: Box::new(P::Graph {
                    name: NamedNodePattern::NamedNode(iri.clone()),
                    inner: go(inner),
                }),
                variable: v,
                expression: spargebra::algebra::Expression::NamedNode(iri.clone()),
            },
            None => P::Graph {
                name: NamedNodePattern::Variable(v),
                inner: go(inner),
            },
        },
        P::Graph { name, inner } => P::Graph {
            name,
            inner: go(inner),
        },
        P::Join { left, right } => P::Join {
            left: go(left),
            right: go(right),
        },
        P::Union { left, right } => P::Union {
            left: go(left),
            right: go(right),
        },
        P::LeftJoin {
            left,
            right,
            expression,
        } => P::LeftJoin {
            left: go(left),
            right,
            expression,
        },
        P::Minus { left, right } => P::Minus {
            left: go(left),
            right,
        },
        P::Filter { expr, inner } => P::Filter {
            expr,
            inner: go(inner),
        },
        P::Extend {
            inner,
            variable,
            expression,
        } => P::Extend {
            inner: go(inner),
            variable,
            expression,
        },
        P::Project { inner, variables } if top => P::Project {
            inner: modifier(inner),
            variables,
        },
        P::Distinct { inner } if top => P::Distinct {
            inner: modifier(inner),
        },
        P::Reduced { inner } if top => P::Reduced {
            inner: modifier(inner),
        },
        P::Slice {
            inner,
            start,
            length,
        } if top => P::Slice {
            inner: modifier(inner),
            start,
            length,
        },
        P::OrderBy { inner, expression } if top => P::OrderBy {
            inner: modifier(inner),
            expression,
        },
        other => other,
    }
}

/// Whether `pattern` binds `variable` itself (then its graph is left named by it).
fn binds(pattern: &GraphPattern, variable: &Variable) -> bool {
    let mut found = false;
    pattern.on_in_scope_variable(|v| found |= v == variable);
    found
}

/// Joins `values` under the solution modifiers, filters, binds and the left side of
/// joins and optionals of `pattern`: first in its outermost group.
fn with_values(pattern: GraphPattern, values: GraphPattern) -> GraphPattern {
    use GraphPattern as P;
    let inner = |p: Box<P>| Box::new(with_values(*p, values.clone()));
    match pattern {
        P::Project {
            inner: i,
            variables,
        } => P::Project {
            inner: inner(i),
            variables,
        },
        P::Distinct { inner: i } => P::Distinct { inner: inner(i) },
        P::Reduced { inner: i } => P::Reduced { inner: inner(i) },
        P::Slice {
            inner: i,
            start,
            length,
        } => P::Slice {
            inner: inner(i),
            start,
            length,
        },
        P::OrderBy {
            inner: i,
            expression,
        } => P::OrderBy {
            inner: inner(i),
            expression,
        },
        P::Filter { expr, inner: i } => P::Filter {
            expr,
            inner: inner(i),
        },
        P::Extend {
            inner: i,
            variable,
            expression,
        } => P::Extend {
            inner: inner(i),
            variable,
            expression,
        },
        P::Join { left, right } => P::Join {
            left: inner(left),
            right,
        },
        P::LeftJoin {
            left,
            right,
            expression,
        } => P::LeftJoin {
            left: inner(left),
            right,
            expression,
        },
        P::Minus { left, right } => P::Minus {
            left: inner(left),
            right,
        },
        other => P::Join {
            left: Box::new(values),
            right: Box::new(other),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(query: &str, var: &str, iri: &str) -> String {
        let query = spargebra::SparqlParser::new().parse_query(query).unwrap();
        let term = Term::NamedNode(NamedNode::new(iri).unwrap());
        bind_naming_graphs(query, vec![(Variable::new(var).unwrap(), term)])
            .0
            .to_string()
    }

    #[test]
    fn a_graph_variable_bound_to_an_iri_is_named_in_the_query() {
        let text = bound(
            "SELECT ?s ?x WHERE { GRAPH ?s { ?t <urn:p> ?x } FILTER(?x > 1) }",
            "s",
            "urn:g",
        );
        assert!(text.contains("GRAPH <urn:g>"), "{text}");
        assert!(!text.contains("GRAPH ?s"), "{text}");
    }

    #[test]
    fn a_graph_variable_the_pattern_binds_or_a_subquery_scopes_stays_a_variable() {
        // Inside, ?s is also a subject: renaming the graph alone would change that.
        let text = bound(
            "SELECT ?s WHERE { GRAPH ?s { ?s <urn:p> ?x } }",
            "s",
            "urn:g",
        );
        assert!(text.contains("GRAPH ?s"), "{text}");
        // An optional's graph variable is its own.
        let text = bound(
            "SELECT ?s ?y WHERE { ?a <urn:p> ?y OPTIONAL { GRAPH ?s { ?a <urn:q> ?z } } }",
            "s",
            "urn:g",
        );
        assert!(text.contains("GRAPH ?s"), "{text}");
    }
}
