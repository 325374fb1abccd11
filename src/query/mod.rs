//! `queries/*.rq`, parsed once, and SPARQL over the store with values bound as terms.

pub(crate) mod check;

use crate::error::{Error, Result};
use crate::model::{Kind, ReplayRecord, SessionId};
use crate::rdf::chain::Chain;
use crate::rdf::SessionNode;
use crate::storage::Sparql;
use crate::store::Store;
use oxigraph::model::{Literal, NamedNode, Term, Variable};
use oxigraph::sparql::{CancellationToken, QueryResults, QuerySolution};
use std::sync::OnceLock;

/// One shipped query: a file of `queries/`, one question each, built into the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedQuery {
    /// The file name without `.rq`.
    pub name: &'static str,
    /// The SPARQL text (its header comment says what it answers and what it expects).
    pub source: &'static str,
}

impl NamedQuery {
    /// The shipped query called `name` (its file name without `.rq`).
    ///
    /// ```
    /// let q = forktrail::NamedQuery::find("fork-chain").unwrap();
    /// assert!(q.help().starts_with("Fork chain of a session"));
    /// assert_eq!(q.inputs(), ["id"]);
    /// ```
    pub fn find(name: &str) -> Option<NamedQuery> {
        queries::ALL.iter().find(|q| q.name == name).copied()
    }

    /// Whether this is one of the library's own read-path queries (`turn-records`,
    /// `turn-entries`): shipped and runnable, but not a question a user asks, so the
    /// lists of queries (`query --list`, `GET /queries`, the web UI) leave it out.
    pub fn is_internal(&self) -> bool {
        matches!(self.name, "turn-records" | "turn-entries")
    }

    /// The header comment, without its `#` marks: what the query answers, its inputs
    /// and outputs.
    pub fn help(&self) -> String {
        let lines: Vec<&str> = self
            .source
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| {
                let l = l.trim_start_matches('#');
                l.strip_prefix(' ').unwrap_or(l)
            })
            .collect();
        lines.join("\n")
    }

    /// The variables the header comment names as inputs (`?name` between `Inputs` and
    /// `Outputs`), in order: what a caller may bind.
    pub fn inputs(&self) -> Vec<String> {
        let help = self.help();
        let section = help
            .split_once("Inputs")
            .map_or("", |(_, rest)| rest.split("Outputs").next().unwrap_or(""));
        let mut out: Vec<String> = Vec::new();
        for word in section.split(|c: char| !(c.is_alphanumeric() || c == '?' || c == '_')) {
            if let Some(name) = word.strip_prefix('?').filter(|n| !n.is_empty()) {
                if !out.iter().any(|o| o == name) {
                    out.push(name.to_string());
                }
            }
        }
        out
    }
}

/// The RDF term a text stands for when bound to a query variable (the CLI's `--bind
/// NAME=VALUE` and the server's `/queries/NAME?NAME=VALUE`): `<…>` is an IRI, `"…"` a
/// string whatever it holds, all digits an integer, anything else a string.
///
/// ```
/// use forktrail::binding_value;
/// use oxigraph::model::{Literal, NamedNode, Term};
/// assert_eq!(binding_value("42")?, Term::from(Literal::from(42)));
/// assert_eq!(binding_value("\"42\"")?, Term::from(Literal::from("42")));
/// assert_eq!(binding_value("<urn:x>")?, Term::from(NamedNode::new("urn:x").unwrap()));
/// assert_eq!(binding_value("x> } DROP ALL")?, Term::from(Literal::from("x> } DROP ALL")));
/// # Ok::<(), forktrail::Error>(())
/// ```
pub fn binding_value(value: &str) -> Result<Term> {
    let quoted = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .filter(|_| value.len() >= 2);
    Ok(if let Some(text) = quoted {
        Literal::new_simple_literal(text).into()
    } else if let Some(iri) = value.strip_prefix('<').and_then(|v| v.strip_suffix('>')) {
        NamedNode::new(iri)
            .map_err(|e| Error::InvalidInput(format!("invalid IRI <{iri}>: {e}")))?
            .into()
    } else if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        match value.parse::<i64>() {
            Ok(n) => Literal::from(n).into(),
            Err(_) => {
                return Err(Error::InvalidInput(format!(
                    "{value} is too large for an integer here (at most {})",
                    i64::MAX
                )))
            }
        }
    } else {
        Literal::new_simple_literal(value).into()
    })
}

macro_rules! queries {
    ($($konst:ident = $name:literal),* $(,)?) => {
        $(#[doc = concat!("`queries/", $name, ".rq`")]
        pub const $konst: NamedQuery = NamedQuery {
            name: $name,
            source: include_str!(concat!("../../queries/", $name, ".rq")),
        };)*
        /// Every shipped query.
        pub const ALL: &[NamedQuery] = &[$($konst),*];

        /// The shipped queries a user asks: all but the read path's own.
        pub fn listed() -> impl Iterator<Item = &'static NamedQuery> {
            ALL.iter().filter(|q| !q.is_internal())
        }
    };
}

/// The shipped queries.
pub mod queries {
    use super::NamedQuery;
    queries! {
        FORK_CHAIN = "fork-chain",
        SESSION_TURNS = "session-turns",
        TURN_RECORDS = "turn-records",
        TURN_ENTRIES = "turn-entries",
        CHILDREN = "children",
        SUBTREE = "subtree",
        SESSIONS = "sessions",
        AUDIT_TURNS_BY_MODEL = "audit-turns-by-model",
        AUDIT_DESCENDANTS = "audit-descendants",
        AUDIT_TURN_ORIGIN = "audit-turn-origin",
        TURNS_PER_MODEL = "turns-per-model",
        FAMILY_TURNS = "family-turns",
        SEARCH_TURNS = "search-turns",
        SESSION_ACTIVITY = "session-activity",
        COMPARISON_ARMS = "comparison-arms",
        EXPERIMENT_SAMPLES = "experiment-samples",
    }
}

/// A parsed query, with the variables a binding may give a value.
#[derive(Clone)]
struct Prepared {
    query: spargebra::Query,
    projection: Vec<Variable>,
}

fn parsed(query: &NamedQuery) -> Result<Prepared> {
    static PARSED: OnceLock<Vec<(&'static str, Prepared)>> = OnceLock::new();
    let all = PARSED.get_or_init(|| {
        queries::ALL
            .iter()
            .filter_map(|q| prepare(q.source).ok().map(|p| (q.name, p)))
            .collect()
    });
    match all.iter().find(|(name, _)| *name == query.name) {
        Some((_, prepared)) => Ok(prepared.clone()),
        None => prepare(query.source),
    }
}

fn prepare(sparql: &str) -> Result<Prepared> {
    let query = crate::query::check::parse_query(sparql)?;
    let projection = crate::query::check::projection(&query);
    Ok(Prepared { query, projection })
}

/// Where and how a query runs (see [`Store::query_with`]).
#[derive(Clone, Default)]
pub struct QueryOptions {
    /// The graphs merged into the default graph; empty means the union of all graphs
    /// (unless the query says `FROM`).
    pub default_graphs: Vec<NamedNode>,
    /// The graphs `GRAPH` may match; empty means all of them (unless the query says
    /// `FROM NAMED`).
    pub named_graphs: Vec<NamedNode>,
    /// Cancels the evaluation when cancelled (from another thread).
    pub cancellation: Option<CancellationToken>,
}

impl Store {
    /// Runs a read-only SPARQL query. Without `FROM`/`FROM NAMED` its default graph is
    /// the union of all session graphs. `bindings` give variables their values as RDF
    /// terms (never pasted into the text); each must be in the `SELECT` projection.
    ///
    /// ```
    /// use forktrail::{NewSession, Store};
    /// use oxigraph::model::Literal;
    /// use oxigraph::sparql::QueryResults;
    /// let store = Store::in_memory()?;
    /// store.create_session(NewSession { id: Some("a".into()), ..Default::default() })?;
    /// let ask = "ASK { ?s <https://w3id.org/forktrail/ns#sessionId> ?id } ";
    /// let q = "SELECT ?id ?s WHERE { ?s <https://w3id.org/forktrail/ns#sessionId> ?id }";
    /// let QueryResults::Solutions(rows) = store.query(q, &[("id", Literal::from("a").into())])? else {
    ///     unreachable!()
    /// };
    /// assert_eq!(rows.count(), 1);
    /// # let _ = ask;
    /// # Ok::<(), forktrail::Error>(())
    /// ```
    pub fn query(&self, sparql: &str, bindings: &[(&str, Term)]) -> Result<QueryResults<'static>> {
        self.query_with(sparql, bindings, &QueryOptions::default())
    }

    /// [`Store::query`] with a dataset and a cancellation token: what the SPARQL
    /// protocol's `default-graph-uri`/`named-graph-uri` and a time limit need.
    pub fn query_with(
        &self,
        sparql: &str,
        bindings: &[(&str, Term)],
        options: &QueryOptions,
    ) -> Result<QueryResults<'static>> {
        let prepared = prepare(sparql)?;
        let pattern = match &prepared.query {
            spargebra::Query::Select { pattern, .. }
            | spargebra::Query::Construct { pattern, .. }
            | spargebra::Query::Describe { pattern, .. }
            | spargebra::Query::Ask { pattern, .. } => pattern,
        };
        self.check_cost(pattern, bindings)?;
        self.run(prepared, bindings, options)
    }

    /// Refuses a pattern too costly for this store before it runs (see
    /// `check::check_cost`); a remote store's own limits apply there instead.
    /// Variables given a value by `bindings` count as that value.
    fn check_cost(
        &self,
        pattern: &spargebra::algebra::GraphPattern,
        bindings: &[(&str, Term)],
    ) -> Result<()> {
        if self.across_network() {
            return Ok(());
        }
        let quads = std::cell::OnceCell::new();
        let size = || -> Result<usize> {
            if let Some(n) = quads.get() {
                return Ok(*n);
            }
            let n = self.approx_len()?;
            Ok(*quads.get_or_init(|| n))
        };
        // A triple pattern's matches, counted with its constants up to a cap (past it,
        // taken as the whole store).
        let rows = |p: &spargebra::term::TriplePattern| -> f64 {
            use spargebra::term::{NamedNodePattern, TermPattern};
            const CAP: usize = 100_000;
            let bound = |v: &oxigraph::model::Variable| {
                bindings
                    .iter()
                    .find(|(name, _)| *name == v.as_str())
                    .map(|(_, t)| t)
            };
            let subject = match &p.subject {
                TermPattern::NamedNode(s) => Some(oxigraph::model::NamedOrBlankNodeRef::from(s)),
                TermPattern::Variable(v) => match bound(v) {
                    Some(Term::NamedNode(s)) => Some(s.as_ref().into()),
                    _ => None,
                },
                _ => None,
            };
            let predicate = match &p.predicate {
                NamedNodePattern::NamedNode(p) => Some(p.as_ref()),
                NamedNodePattern::Variable(_) => None,
            };
            let object = match &p.object {
                TermPattern::NamedNode(o) => Some(oxigraph::model::TermRef::from(o)),
                TermPattern::Literal(o) => Some(oxigraph::model::TermRef::from(o)),
                TermPattern::Variable(v) => bound(v).map(Term::as_ref),
                _ => None,
            };
            let whole = || size().unwrap_or(usize::MAX) as f64;
            if subject.is_none() && predicate.is_none() && object.is_none() {
                return whole();
            }
            let n = self
                .backend()
                .quads(subject, predicate, object, None)
                .take(CAP)
                .count();
            if n == CAP {
                whole()
            } else {
                n as f64
            }
        };
        crate::query::check::check_cost(pattern, &size, &rows)
    }

    /// [`Store::query_named`] with a dataset and a cancellation token, as
    /// [`Store::query_with`].
    pub fn query_named_with(
        &self,
        query: &NamedQuery,
        bindings: &[(&str, Term)],
        options: &QueryOptions,
    ) -> Result<QueryResults<'static>> {
        self.run(parsed(query)?, bindings, options)
    }

    /// Runs a SPARQL 1.1 Update under the store's write lock, in one transaction.
    ///
    /// Updates bypass forktrail's checks: an update that breaks the model (turn
    /// indices, lineage) is the caller's risk. `GRAPH` is needed to reach session data:
    /// the store's own default graph is empty. `LOAD` and `SERVICE` are refused:
    /// forktrail never fetches anything.
    pub fn update(&self, sparql: &str, cancel: Option<&CancellationToken>) -> Result<()> {
        let update = crate::query::check::parse_update(sparql)?;
        for operation in &update.operations {
            if let spargebra::GraphUpdateOperation::DeleteInsert { pattern, .. } = operation {
                self.check_cost(pattern, &[])?;
            }
        }
        let mut tx = self.write()?;
        let result = self.backend().update(sparql, update, cancel.cloned());
        // An update may change anything: the derived read cache goes, whatever the
        // outcome.
        tx.forget_all();
        tx.commit()?;
        result
    }

    /// Runs one of the shipped [`queries`] with `bindings` (see [`Store::query`]).
    pub fn query_named(
        &self,
        query: &NamedQuery,
        bindings: &[(&str, Term)],
    ) -> Result<QueryResults<'static>> {
        self.run(parsed(query)?, bindings, &QueryOptions::default())
    }

    /// The rows of a shipped SELECT query.
    pub(crate) fn select(
        &self,
        query: &NamedQuery,
        bindings: &[(&str, Term)],
    ) -> Result<Vec<QuerySolution>> {
        match self.query_named(query, bindings)? {
            QueryResults::Solutions(rows) => rows
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Error::Query(e.to_string())),
            _ => Err(Error::Query(format!(
                "{} is not a SELECT query",
                query.name
            ))),
        }
    }

    fn run(
        &self,
        prepared: Prepared,
        bindings: &[(&str, Term)],
        options: &QueryOptions,
    ) -> Result<QueryResults<'static>> {
        let Prepared { query, projection } = prepared;
        let mut bound = Vec::with_capacity(bindings.len());
        for (name, value) in bindings {
            let variable = Variable::new(*name)
                .map_err(|e| Error::InvalidInput(format!("invalid variable name {name:?}: {e}")))?;
            // Only projected variables are bound: any other binding would be
            // dropped without a word, and the query would answer for every value.
            if !projection.contains(&variable) {
                let names: Vec<String> = projection
                    .iter()
                    .map(|v| format!("?{}", v.as_str()))
                    .collect();
                return Err(Error::InvalidInput(format!(
                    "cannot bind ?{name}: only variables of the SELECT projection can be bound \
                     ({})",
                    if names.is_empty() {
                        "this query has none".to_string()
                    } else {
                        names.join(" ")
                    }
                )));
            }
            bound.push((variable, value.clone()));
        }
        self.backend().query(Sparql {
            query,
            bindings: bound,
            default_graphs: options.default_graphs.clone(),
            named_graphs: options.named_graphs.clone(),
            cancellation: options.cancellation.clone(),
        })
    }

    /// Replay through the shipped `.rq` files (fork chain, then the turns of each level
    /// below its cut). The documented equivalent of [`Store::replay`].
    pub fn replay_sparql(&self, id: &SessionId, up_to: Option<u64>) -> Result<Vec<ReplayRecord>> {
        let id_term: Term = Literal::from(id.as_str()).into();
        let levels = self.select(&queries::FORK_CHAIN, &[("id", id_term)])?;
        if levels.is_empty() {
            return Err(Error::SessionNotFound {
                session: id.to_string(),
            });
        }
        let int = |row: &QuerySolution, var: &str| -> Option<u64> {
            match row.get(var) {
                Some(Term::Literal(l)) => l.value().parse().ok(),
                _ => None,
            }
        };
        let text = |row: &QuerySolution, var: &str| -> String {
            match row.get(var) {
                Some(Term::Literal(l)) => l.value().to_string(),
                _ => String::new(),
            }
        };
        // The shallowest level must be a root: otherwise its parent is missing, or the
        // chain is a cycle that `ft:parentSession*` absorbed.
        if let Some(Term::NamedNode(parent)) = levels[0].get("levelParent") {
            let parent_id = self.iris.name_of(parent.as_ref());
            let ids: Vec<String> = levels.iter().map(|l| text(l, "levelId")).collect();
            return Err(if ids.contains(&parent_id) {
                Error::CycleDetected {
                    session: id.to_string(),
                    cycle: ids,
                }
            } else {
                Error::ParentMissing {
                    session: text(&levels[0], "levelId"),
                    parent: parent_id,
                }
            });
        }
        // The chain as the query gave it, for the visibility rule (`Chain::visible_limit`).
        let mut nodes = Vec::with_capacity(levels.len());
        for level in &levels {
            let level_id = SessionId::new(text(level, "levelId"))?;
            let parent = match level.get("levelParent") {
                Some(Term::NamedNode(parent)) => Some(parent.clone()),
                _ => None,
            };
            let iri = self.session_iri(&level_id);
            // A detached fork keeps its fork point, but no longer inherits below it.
            let forked_at = parent.as_ref().and(int(level, "forkedAtIndex"));
            nodes.push(SessionNode::lineage(level_id, iri, parent, forked_at));
        }
        let chain = Chain::new(nodes).expect("the query found the session");
        let end = up_to.map_or(u64::MAX, |n| n.saturating_add(1));
        let mut out: Vec<ReplayRecord> = Vec::new();
        for (i, level) in chain.levels().iter().enumerate() {
            let mut bindings = vec![("id", Literal::from(level.id.as_str()).into())];
            // No cut at all rather than a huge one: Virtuoso 7 overflows on i64::MAX.
            let cut = chain.visible_limit(i).min(end);
            if let Ok(cut) = i64::try_from(cut) {
                bindings.push(("cut", Literal::from(cut).into()));
            }
            for row in self.select(&queries::SESSION_TURNS, &bindings)? {
                let index = int(&row, "index").unwrap_or(u64::MAX);
                if index < out.len() as u64 {
                    continue;
                }
                if index != out.len() as u64 {
                    return Err(Error::Corrupt {
                        session: level.id.to_string(),
                        detail: format!("turn {} is missing", out.len()),
                    });
                }
                let optional = |var: &str| match row.get(var) {
                    Some(Term::Literal(l)) => Some(l.value().to_string()),
                    _ => None,
                };
                out.push(ReplayRecord {
                    index,
                    role: text(&row, "role").parse()?,
                    content: text(&row, "content"),
                    branch: text(&row, "branch"),
                    kind: optional("kind").map_or(Ok(Kind::Message), |k| k.parse())?,
                    name: optional("name"),
                    tool_call_id: optional("toolCallId"),
                    tool_calls: optional("toolCalls"),
                });
            }
        }
        if let Some(n) = up_to.filter(|n| *n >= out.len() as u64) {
            return Err(Error::IndexOutOfRange {
                session: id.to_string(),
                index: n.into(),
                valid: match out.len() {
                    0 => "none: the session has no turns".into(),
                    n => format!("0..={}", n - 1),
                },
            });
        }
        Ok(out)
    }
}
