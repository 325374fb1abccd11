//! Any SPARQL 1.1 store over HTTP (Oxigraph server, Virtuoso, GraphDB, Neptune, …,
//! or another `forktrail serve`): the SPARQL 1.1 Protocol, nothing else.
//!
//! Reads are SELECT, ASK or CONSTRUCT requests whose values are RDF terms serialised by
//! oxrdf; results are parsed by sparesults (through Oxigraph). Each commit is one
//! update request, so it is atomic wherever the store runs one request in one
//! transaction. Every request is counted, so tests and benchmarks can bound them.

use super::http_auth::{Credentials, RemoteAuth};
use super::{bind, Backend, Change, Graph, Object, Predicate, Quads, Sparql, Subject};
use crate::error::{Error, Result};
use crate::secrets;
use oxigraph::io::{RdfFormat, RdfParser};
use oxigraph::model::{
    GraphName, GraphNameRef, NamedNode, NamedNodeRef, NamedOrBlankNode, NamedOrBlankNodeRef, Quad,
    QuadRef, Term, TermRef, Triple, Variable,
};
use oxigraph::sparql::results::{
    QueryResultsFormat, QueryResultsParser, SliceQueryResultsParserOutput,
};
use oxigraph::sparql::{
    CancellationToken, QueryResults, QuerySolution, QuerySolutionIter, QueryTripleIter,
};
use spargebra::algebra::GraphPattern;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How to reach a remote SPARQL 1.1 store.
///
/// ```
/// use forktrail::{RemoteAuth, RemoteConfig};
/// let config = RemoteConfig::new("http://localhost:7878/query")
///     .with_auth(RemoteAuth::Bearer("secret".into()));
/// assert_eq!(config.update_url, "http://localhost:7878/update");
/// ```
#[derive(Clone)]
pub struct RemoteConfig {
    /// The SPARQL query endpoint.
    pub query_url: String,
    /// The SPARQL update endpoint.
    pub update_url: String,
    pub auth: RemoteAuth,
    /// How long to wait for a connection.
    pub connect_timeout: Duration,
    /// How long one request may take, answer included.
    pub timeout: Duration,
}

impl std::fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("query_url", &self.query_url)
            .field("update_url", &self.update_url)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl RemoteConfig {
    /// A store whose query endpoint is `query_url`. Its update endpoint is guessed: a URL
    /// ending in `/query` (Oxigraph server) updates at `/update`; any other (Virtuoso's
    /// and `forktrail serve`'s `/sparql`, GraphDB's repository URL) takes updates
    /// itself, as SPARQL 1.1 allows. [`RemoteConfig::with_update_url`] overrides it.
    pub fn new(query_url: impl Into<String>) -> Self {
        let query_url = query_url.into();
        let update_url = match query_url.strip_suffix("/query") {
            Some(base) => format!("{base}/update"),
            None => query_url.clone(),
        };
        Self {
            query_url,
            update_url,
            auth: RemoteAuth::None,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(60),
        }
    }

    pub fn with_update_url(mut self, url: impl Into<String>) -> Self {
        self.update_url = url.into();
        self
    }

    pub fn with_auth(mut self, auth: RemoteAuth) -> Self {
        self.auth = auth;
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// A SPARQL 1.1 store reached over HTTP.
pub(crate) struct Remote {
    config: RemoteConfig,
    agent: ureq::Agent,
    credentials: Credentials,
    requests: AtomicU64,
}

const RESULTS_ACCEPT: &str =
    "application/sparql-results+json, application/sparql-results+xml;q=0.8";
const GRAPH_ACCEPT: &str = "application/n-triples, text/turtle;q=0.8";

impl Remote {
    pub(crate) fn new(config: RemoteConfig) -> Result<Self> {
        for (what, url) in [("query", &config.query_url), ("update", &config.update_url)] {
            let parsed = url::Url::parse(url).map_err(|e| {
                Error::InvalidInput(format!("invalid {what} endpoint {url:?}: {e}"))
            })?;
            match parsed.scheme() {
                "http" => {}
                // The trusted roots are read now: a bad $SSL_CERT_FILE fails here.
                "https" => {
                    crate::tls::client_config()?;
                }
                _ => {
                    return Err(Error::InvalidInput(format!(
                        "the {what} endpoint {url} is not an http:// or https:// URL"
                    )))
                }
            }
        }
        // A store's error text may echo them (Virtuoso echoes the whole request).
        match &config.auth {
            RemoteAuth::None => {}
            RemoteAuth::Bearer(token) => secrets::hold(token),
            RemoteAuth::Password(user, password) => {
                secrets::hold(password);
                secrets::hold(&super::http_auth::base64(
                    format!("{user}:{password}").as_bytes(),
                ));
            }
        }
        let credentials = Credentials::new(&config.auth);
        let agent = crate::tls::agent(ureq::AgentBuilder::new())
            .timeout_connect(config.connect_timeout)
            .timeout(config.timeout)
            .build();
        Ok(Self {
            config,
            agent,
            credentials,
            requests: AtomicU64::new(0),
        })
    }

    /// Sends one form-encoded POST (the one request shape every store accepts: Virtuoso
    /// refuses raw query bodies) and returns the answer, or an error naming the store.
    /// A password is sent once the store has asked for it (Basic or Digest): the request
    /// that learns how is sent again, once.
    fn post(&self, url: &str, accept: &str, form: &[(&str, &str)]) -> Result<ureq::Response> {
        let uri = url::Url::parse(url).map_or_else(
            |_| "/".to_string(),
            |u| match u.query() {
                Some(q) => format!("{}?{q}", u.path()),
                None => u.path().to_string(),
            },
        );
        let mut first = true;
        let outcome = loop {
            self.requests.fetch_add(1, Ordering::Relaxed);
            let mut request = self.agent.post(url).set("Accept", accept);
            if let Some(authorization) = self.credentials.header("POST", &uri) {
                request = request.set("Authorization", &authorization);
            }
            match request.send_form(form) {
                Err(ureq::Error::Status(401, response))
                    if std::mem::take(&mut first)
                        && self
                            .credentials
                            .challenged(response.header("WWW-Authenticate")) => {}
                other => break other,
            }
        };
        match outcome {
            Ok(response) => Ok(response),
            Err(ureq::Error::Status(status, response)) => {
                // The start only: Virtuoso echoes the whole request in its errors.
                let mut start = Vec::new();
                let _ = response.into_reader().take(4096).read_to_end(&mut start);
                let body = String::from_utf8_lossy(&start);
                let body = body.trim();
                let detail = match status {
                    401 | 403 => format!(
                        "HTTP {status}: the store refused the credentials (set \
                         FORKTRAIL_STORE_TOKEN, or FORKTRAIL_STORE_USER and \
                         FORKTRAIL_STORE_PASSWORD){}",
                        if body.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", secrets::excerpt(body))
                        }
                    ),
                    _ => format!("HTTP {status}: {}", secrets::excerpt(body)),
                };
                Err(Error::Remote {
                    url: url.to_string(),
                    detail,
                })
            }
            Err(ureq::Error::Transport(e)) => Err(Error::Remote {
                url: url.to_string(),
                detail: crate::tls::untrusted(&e)
                    .map(|why| secrets::message(&why))
                    .unwrap_or_else(|| {
                        secrets::excerpt(&match e.kind() {
                            ureq::ErrorKind::ConnectionFailed | ureq::ErrorKind::Dns => {
                                format!("cannot connect: {e}")
                            }
                            _ => e.to_string(),
                        })
                    }),
            }),
        }
    }

    fn select(&self, query: &str) -> Result<QueryResults<'static>> {
        let response = self.post(&self.config.query_url, RESULTS_ACCEPT, &[("query", query)])?;
        self.results(response)
    }

    /// Whether the group `pattern` has a solution, asked as a one-row SELECT (see
    /// [`ask_as_select`]).
    fn ask(&self, pattern: &str) -> Result<bool> {
        let rows = self.select(&format!(
            "SELECT (1 AS ?{ASK}) WHERE {{ {pattern} }} LIMIT 1"
        ))?;
        self.any_row(rows)
    }

    /// The answer to an ASK sent as [`ask_as_select`]: whether a row came back.
    fn any_row(&self, results: QueryResults<'static>) -> Result<bool> {
        match results {
            QueryResults::Solutions(mut rows) => match rows.next() {
                Some(Err(e)) => Err(self.unexpected(&format!("unreadable results: {e}"))),
                row => Ok(row.is_some()),
            },
            // A store that answers the SELECT with a boolean is not answering it.
            _ => Err(self.unexpected("a SELECT did not answer rows")),
        }
    }

    /// An error naming the store, its detail (which may quote the store) made safe to
    /// keep.
    fn unexpected(&self, detail: &str) -> Error {
        Error::Remote {
            url: self.config.query_url.clone(),
            detail: secrets::excerpt(detail),
        }
    }

    /// Parses an answer by its media type: SPARQL results, or RDF for CONSTRUCT and
    /// DESCRIBE. The body is read whole first: the streaming JSON parser rescans a long
    /// string on every chunk and stops at 16 MiB, and turn contents can be longer.
    fn results(&self, response: ureq::Response) -> Result<QueryResults<'static>> {
        let media_type = response.content_type().to_ascii_lowercase();
        let mut body = Vec::new();
        response
            .into_reader()
            .read_to_end(&mut body)
            .map_err(|e| self.unexpected(&format!("reading the answer: {e}")))?;
        // Say what came back: a store's error page is the usual cause.
        let unreadable = |e: &dyn std::fmt::Display| {
            let start = String::from_utf8_lossy(&body[..body.len().min(4096)]).into_owned();
            let start: String = secrets::excerpt(start.trim()).chars().take(200).collect();
            self.unexpected(&format!(
                "unreadable results ({media_type}): {e}; the answer began {start:?}"
            ))
        };
        if let Some(format) = QueryResultsFormat::from_media_type(&media_type) {
            let parsed = QueryResultsParser::from_format(format)
                .for_slice(&body)
                .map_err(|e| unreadable(&e))?;
            return Ok(match parsed {
                SliceQueryResultsParserOutput::Boolean(b) => QueryResults::Boolean(b),
                SliceQueryResultsParserOutput::Solutions(rows) => {
                    let variables: Arc<[Variable]> = rows.variables().into();
                    let rows = rows
                        .collect::<std::result::Result<Vec<_>, _>>()
                        .map_err(|e| unreadable(&e))?;
                    QueryResults::Solutions(QuerySolutionIter::new(
                        variables,
                        rows.into_iter().map(Ok),
                    ))
                }
            });
        }
        if let Some(format) = RdfFormat::from_media_type(&media_type) {
            let triples = RdfParser::from_format(format)
                .for_slice(&body)
                .map(|quad| quad.map(Triple::from))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| unreadable(&e))?;
            return Ok(QueryResults::Graph(QueryTripleIter::new(
                triples.into_iter().map(Ok),
            )));
        }
        Err(self.unexpected(&format!("answered with unknown media type {media_type:?}")))
    }

    fn run_update(&self, update: &str) -> Result<()> {
        self.post(&self.config.update_url, "*/*", &[("update", update)])?;
        Ok(())
    }
}

impl Backend for Remote {
    fn quads(&self, subject: Subject, predicate: Predicate, object: Object, graph: Graph) -> Quads {
        let graph = match graph {
            Some(GraphNameRef::NamedNode(g)) => Some(g),
            // forktrail writes named graphs only; a remote default graph is usually the
            // union of them, so asking for it alone has no portable answer.
            Some(_) => return Box::new(std::iter::empty()),
            None => None,
        };
        let query = match quad_pattern(subject, predicate, object, graph) {
            Ok(pattern) => format!("SELECT * WHERE {{ {pattern} }}"),
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        let solutions = match self.select(&query) {
            Ok(QueryResults::Solutions(solutions)) => solutions,
            Ok(_) => return Box::new(std::iter::once(Err(self.unexpected("SELECT gave no rows")))),
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        let fixed = (
            subject.map(NamedOrBlankNodeRef::into_owned),
            predicate.map(NamedNodeRef::into_owned),
            object.map(TermRef::into_owned),
            graph.map(NamedNodeRef::into_owned),
        );
        let url = self.config.query_url.clone();
        Box::new(solutions.map(move |row| {
            let row = row.map_err(|e| Error::Remote {
                url: url.clone(),
                detail: format!("unreadable results: {e}"),
            })?;
            quad_of_row(&row, &fixed).ok_or_else(|| Error::Remote {
                url: url.clone(),
                detail: "a result row is not a quad".into(),
            })
        }))
    }

    fn contains(&self, quad: QuadRef<'_>) -> Result<bool> {
        let GraphNameRef::NamedNode(graph) = quad.graph_name else {
            return Ok(false);
        };
        let pattern = quad_pattern(
            Some(quad.subject),
            Some(quad.predicate),
            Some(quad.object),
            Some(graph),
        )?;
        self.ask(&pattern)
    }

    fn has_graph(&self, graph: NamedNodeRef<'_>) -> Result<bool> {
        self.ask(&format!("GRAPH {graph} {{ ?s ?p ?o }}"))
    }

    fn commit(&self, change: Change) -> Result<()> {
        self.run_update(&change_text(&change)?)?;
        let Some(fence) = &change.fence else {
            return Ok(());
        };
        // A fenced update whose condition failed wrote nothing and said so to no one:
        // the receipt it would have left tells.
        let mut receipt = String::new();
        for q in &fence.receipt {
            let _ = write!(
                receipt,
                "GRAPH {} {{ {} {} {} }} ",
                q.graph_name, q.subject, q.predicate, q.object
            );
        }
        if fence.receipt.is_empty() || self.ask(&receipt)? {
            return Ok(());
        }
        Err(Error::Conflict(format!(
            "the write was not applied by {}: this writer's lease lapsed before its \
             commit reached the store (or another writer took what it adds), so nothing \
             was written; retry",
            self.config.update_url
        )))
    }

    fn query(&self, query: Sparql) -> Result<QueryResults<'static>> {
        let accept = match &query.query {
            spargebra::Query::Construct { .. } | spargebra::Query::Describe { .. } => GRAPH_ACCEPT,
            _ => RESULTS_ACCEPT,
        };
        let (bound, blank) = bind(query.query, query.bindings);
        if let Some((variable, node)) = blank.first() {
            return Err(Error::InvalidInput(format!(
                "?{} cannot be bound to {node} on a remote store",
                variable.as_str()
            )));
        }
        let is_ask = matches!(bound, spargebra::Query::Ask { .. });
        let text = ask_as_select(bound).to_string();
        let mut form: Vec<(&str, &str)> = vec![("query", &text)];
        for g in &query.default_graphs {
            form.push(("default-graph-uri", g.as_str()));
        }
        for g in &query.named_graphs {
            form.push(("named-graph-uri", g.as_str()));
        }
        let response = self.post(&self.config.query_url, accept, &form)?;
        let results = self.results(response)?;
        if is_ask {
            return Ok(QueryResults::Boolean(self.any_row(results)?));
        }
        Ok(results)
    }

    fn update(
        &self,
        text: &str,
        _update: spargebra::Update,
        _cancel: Option<CancellationToken>,
    ) -> Result<()> {
        // As written: Virtuoso 7 refuses some of what spargebra writes back (a `.` after
        // a GRAPH block in a DELETE template), though SPARQL allows it.
        self.run_update(text)
    }

    fn exclusive(&self) -> bool {
        false
    }

    fn len(&self) -> Result<usize> {
        let QueryResults::Solutions(mut rows) =
            self.select("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }")?
        else {
            return Err(self.unexpected("COUNT gave no rows"));
        };
        let n = rows
            .next()
            .transpose()
            .map_err(|e| self.unexpected(&e.to_string()))?
            .and_then(|row| match row.get("n") {
                Some(Term::Literal(l)) => l.value().parse().ok(),
                _ => None,
            });
        n.ok_or_else(|| self.unexpected("COUNT gave no number"))
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn path(&self) -> Option<&Path> {
        None
    }

    fn oxigraph(&self) -> Option<oxigraph::store::Store> {
        None
    }

    fn requests(&self) -> Option<u64> {
        Some(self.requests.load(Ordering::Relaxed))
    }

    fn location(&self) -> String {
        self.config.query_url.clone()
    }
}

/// `GRAPH g { s p o }` with the given positions as terms and the others as `?s ?p ?o
/// ?g`. Every value is an oxrdf term rendered by its `Display` (escaped N-Triples
/// syntax), never a raw string. Blank nodes have no identity across requests, so they
/// cannot be asked for.
fn quad_pattern(
    subject: Option<NamedOrBlankNodeRef<'_>>,
    predicate: Option<NamedNodeRef<'_>>,
    object: Option<TermRef<'_>>,
    graph: Option<NamedNodeRef<'_>>,
) -> Result<String> {
    let blank = || Error::InvalidInput("a remote store cannot be asked about a blank node".into());
    let s = match subject {
        Some(NamedOrBlankNodeRef::NamedNode(n)) => n.to_string(),
        Some(_) => return Err(blank()),
        None => "?s".into(),
    };
    let p = predicate.map_or("?p".into(), |p| p.to_string());
    let o = match object {
        Some(TermRef::BlankNode(_)) => return Err(blank()),
        Some(o) => o.to_string(),
        None => "?o".into(),
    };
    let g = graph.map_or("?g".into(), |g| g.to_string());
    Ok(format!("GRAPH {g} {{ {s} {p} {o} }}"))
}

/// The quad of one `quads` row: the fixed positions, the rest from the row.
fn quad_of_row(
    row: &QuerySolution,
    fixed: &(
        Option<NamedOrBlankNode>,
        Option<NamedNode>,
        Option<Term>,
        Option<NamedNode>,
    ),
) -> Option<Quad> {
    let subject = match &fixed.0 {
        Some(s) => s.clone(),
        None => match row.get("s")? {
            Term::NamedNode(n) => n.clone().into(),
            Term::BlankNode(b) => b.clone().into(),
            _ => return None,
        },
    };
    let predicate = match &fixed.1 {
        Some(p) => p.clone(),
        None => match row.get("p")? {
            Term::NamedNode(n) => n.clone(),
            _ => return None,
        },
    };
    let object = match &fixed.2 {
        Some(o) => o.clone(),
        None => row.get("o")?.clone(),
    };
    let graph = match &fixed.3 {
        Some(g) => g.clone(),
        None => match row.get("g")? {
            Term::NamedNode(n) => n.clone(),
            _ => return None,
        },
    };
    Some(Quad::new(
        subject,
        predicate,
        object,
        GraphName::NamedNode(graph),
    ))
}

/// One update request for a whole change: graphs dropped, then quads removed, then
/// quads inserted, each part grouped by graph.
fn change_text(change: &Change) -> Result<String> {
    let mut out = String::new();
    match &change.fence {
        None => {
            for graph in &change.drop_graphs {
                let _ = writeln!(out, "DROP SILENT GRAPH {graph} ;");
            }
            for (verb, quads, removing) in [
                ("DELETE DATA", &change.removes, true),
                ("INSERT DATA", &change.inserts, false),
            ] {
                if !quads.is_empty() {
                    let _ = writeln!(out, "{verb} {{\n{}}} ;", blocks(quads, removing)?);
                }
            }
        }
        // Each operation applies only if the fence holds (on a store that runs a
        // request as one transaction, they all see the same state); the lease's removal
        // is in the last one, so the condition holds for each until then.
        Some(fence) => {
            let condition = &fence.condition;
            for graph in &change.drop_graphs {
                let _ = writeln!(
                    out,
                    "DELETE {{ GRAPH {graph} {{ ?s ?p ?o }} }} WHERE {{ {condition} GRAPH {graph} {{ ?s ?p ?o }} }} ;"
                );
            }
            let _ = writeln!(
                out,
                "DELETE {{\n{}}}\nINSERT {{\n{}}}\nWHERE {{ {condition} }}",
                blocks(&change.removes, true)?,
                blocks(&change.inserts, false)?,
            );
        }
    }
    // A trailing `;` is not allowed after the last operation.
    let trimmed = out.trim_end().trim_end_matches(';').trim_end().len();
    out.truncate(trimmed);
    Ok(out)
}

/// `quads` as the `GRAPH <g> { … }` blocks of an update's data or template, one per
/// graph; quads to remove may hold no blank node (no store can match one).
fn blocks(quads: &[Quad], removing: bool) -> Result<String> {
    let mut by_graph: BTreeMap<&str, Vec<&Quad>> = BTreeMap::new();
    for quad in quads {
        let GraphName::NamedNode(g) = &quad.graph_name else {
            return Err(Error::InvalidInput(
                "a remote store takes quads in named graphs only".into(),
            ));
        };
        if removing && (quad.subject.is_blank_node() || quad.object.is_blank_node()) {
            return Err(Error::InvalidInput(
                "a remote store cannot remove a quad with a blank node".into(),
            ));
        }
        by_graph.entry(g.as_str()).or_default().push(quad);
    }
    let mut out = String::new();
    for (graph, quads) in by_graph {
        let _ = writeln!(out, "  GRAPH <{graph}> {{");
        for q in quads {
            let _ = writeln!(out, "    {} {} {} .", q.subject, q.predicate, q.object);
        }
        out.push_str("  }\n");
    }
    Ok(out)
}

/// The variable an ASK sent as a SELECT projects.
const ASK: &str = "forktrail_ask";

/// An ASK as `SELECT (1 AS ?forktrail_ask) WHERE { … } LIMIT 1`, any other query as it
/// is. Virtuoso 7 answers ASK with a SELECT-shaped result, and answers true to an ASK
/// whose pattern joins a VALUES block with a FILTER that removes every row (its SELECT
/// of the same pattern is right), so forktrail never sends an ASK to a remote store.
fn ask_as_select(query: spargebra::Query) -> spargebra::Query {
    let spargebra::Query::Ask {
        dataset,
        pattern,
        base_iri,
    } = query
    else {
        return query;
    };
    let variable = Variable::new_unchecked(ASK);
    let one = spargebra::algebra::Expression::Literal(1.into());
    spargebra::Query::Select {
        dataset,
        pattern: GraphPattern::Slice {
            inner: Box::new(GraphPattern::Project {
                inner: Box::new(GraphPattern::Extend {
                    inner: Box::new(pattern),
                    variable: variable.clone(),
                    expression: one,
                }),
                variables: vec![variable],
            }),
            start: 0,
            length: Some(1),
        },
        base_iri,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_values_reach_filters_and_the_projection() {
        let query: spargebra::Query =
            "SELECT ?s ?from WHERE { ?s ?p ?i FILTER(?i >= ?from) } ORDER BY ?s"
                .parse()
                .unwrap();
        let bound = bind(
            query,
            vec![(
                Variable::new("from").unwrap(),
                oxigraph::model::Literal::from(3).into(),
            )],
        )
        .0
        .to_string();
        let values = bound.find("VALUES").expect("a VALUES block");
        assert!(values < bound.find("FILTER").unwrap(), "{bound}");
        // What the store gets back parses, and still orders and projects.
        let reparsed: spargebra::Query = bound.parse().unwrap();
        assert!(reparsed.to_string().contains("ORDER BY"), "{bound}");
    }

    #[test]
    fn an_ask_is_sent_as_a_one_row_select_that_keeps_its_dataset_and_values() {
        let query: spargebra::Query = "ASK FROM <urn:x:g> { ?s ?p ?i FILTER(?i = ?want) }"
            .parse()
            .unwrap();
        let want = (
            Variable::new("want").unwrap(),
            oxigraph::model::Literal::from(2).into(),
        );
        let sent = ask_as_select(bind(query, vec![want]).0).to_string();
        let reparsed: spargebra::Query = sent.parse().unwrap();
        let spargebra::Query::Select { dataset, .. } = &reparsed else {
            panic!("not a SELECT: {sent}");
        };
        assert!(dataset.is_some(), "{sent}");
        assert!(
            sent.starts_with("SELECT (") && sent.contains(" AS ?forktrail_ask)"),
            "{sent}"
        );
        assert!(sent.trim_end().ends_with("LIMIT 1"), "{sent}");
        assert!(
            sent.find("VALUES").unwrap() < sent.find("FILTER").unwrap(),
            "{sent}"
        );
        // Other queries go as they are.
        let select: spargebra::Query = "SELECT ?s { ?s ?p ?o }".parse().unwrap();
        assert_eq!(ask_as_select(select.clone()), select);
    }

    #[test]
    fn hostile_text_stays_inside_its_literal() {
        let change = Change {
            inserts: vec![Quad::new(
                NamedNode::new("urn:x:s").unwrap(),
                NamedNode::new("urn:x:p").unwrap(),
                oxigraph::model::Literal::new_simple_literal(
                    "\" } } ; DROP ALL ; INSERT DATA { <a> <b> \"\n",
                ),
                GraphName::NamedNode(NamedNode::new("urn:x:g").unwrap()),
            )],
            ..Change::default()
        };
        let text = change_text(&change).unwrap();
        let update: spargebra::Update = text.parse().unwrap();
        assert_eq!(update.operations.len(), 1, "{text}");
    }

    #[test]
    fn a_hostile_literal_in_a_pattern_stays_one_term() {
        let hostile = oxigraph::model::Literal::new_simple_literal("x\" } } ; DROP ALL ; #");
        let pattern = quad_pattern(None, None, Some(hostile.as_ref().into()), None).unwrap();
        let query: spargebra::Query = format!("SELECT * WHERE {{ {pattern} }}").parse().unwrap();
        let text = query.to_string();
        assert!(
            text.contains("?s") && text.contains("?p") && text.contains("?g"),
            "{text}"
        );
        // The whole value came back as the one literal of the one triple pattern.
        assert!(text.contains(&format!("?p {hostile} ")), "{text}");
    }

    #[test]
    fn the_update_endpoint_is_guessed_from_the_query_endpoint() {
        assert_eq!(
            RemoteConfig::new("http://h:7878/query").update_url,
            "http://h:7878/update"
        );
        assert_eq!(
            RemoteConfig::new("http://h:8890/sparql").update_url,
            "http://h:8890/sparql"
        );
    }

    #[test]
    fn an_endpoint_it_cannot_speak_is_refused_before_any_request() {
        for url in ["ftp://h/sparql", "not a url"] {
            let err = Remote::new(RemoteConfig::new(url)).err().expect(url);
            assert!(err.to_string().contains("endpoint"), "{url}: {err}");
        }
        for url in ["http://h/sparql", "https://h/sparql"] {
            assert!(Remote::new(RemoteConfig::new(url)).is_ok(), "{url}");
        }
    }

    #[test]
    fn credentials_are_never_printed() {
        let config = RemoteConfig::new("http://h/sparql")
            .with_auth(RemoteAuth::Password("alice".into(), "s3cret".into()));
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("alice"),
            "{shown}"
        );
    }
}
