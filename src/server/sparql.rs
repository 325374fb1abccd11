//! The SPARQL 1.1 Protocol: `/sparql` and `/query` (queries), `/update` and `/sparql`
//! with `update=` (updates, token only), `/store?graph=` (Graph Store Protocol, read).

use super::{authorize, blocking, ApiError, AppState, Shared};
use crate::error::Error;
use crate::query::QueryOptions;
use crate::storage::evaluation_error;
use crate::store::Store;
use axum::body::Bytes;
use axum::extract::RawQuery;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use oxigraph::io::{RdfFormat, RdfSerializer};
use oxigraph::model::{NamedNode, NamedNodeRef};
use oxigraph::sparql::results::{QueryResultsFormat, QueryResultsSerializer};
use oxigraph::sparql::{CancellationToken, QueryResults};
use std::sync::Arc;

type Reply = Result<Response, ApiError>;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/sparql", get(get_sparql).post(post_sparql))
        .route("/query", get(get_sparql).post(post_sparql))
        .route("/update", axum::routing::post(post_sparql))
        .route("/store", get(get_store))
        .route("/queries", get(list_queries))
        .route("/queries/{name}", get(run_named))
}

/// `GET /queries`: the shipped queries, what each answers and which variables it takes.
async fn list_queries() -> Response {
    let list: Vec<serde_json::Value> = crate::queries::listed()
        .map(|q| {
            serde_json::json!({
                "name": q.name,
                "help": q.help(),
                "inputs": q.inputs(),
                "url": format!("/queries/{}", q.name),
            })
        })
        .collect();
    axum::Json(list).into_response()
}

/// `GET /queries/{name}?VAR=VALUE…`: runs a shipped query with its inputs bound as RDF
/// terms (read as `forktrail query --bind` reads them), results by `Accept` as for
/// `/sparql`.
async fn run_named(
    state: Shared,
    axum::extract::Path(name): axum::extract::Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Reply {
    let query = crate::NamedQuery::find(&name).ok_or_else(|| {
        let names: Vec<&str> = crate::queries::listed().map(|q| q.name).collect();
        ApiError::new(
            StatusCode::NOT_FOUND,
            "query_not_found",
            format!(
                "no shipped query is named {name:?} (one of: {})",
                names.join(", ")
            ),
        )
    })?;
    let inputs = query.inputs();
    let mut bindings = Vec::new();
    for (key, value) in pairs(raw.as_deref().unwrap_or(""))? {
        if !inputs.contains(&key) {
            return Err(ApiError::bad_request(format!(
                "{} takes {}; not {key:?}",
                query.name,
                if inputs.is_empty() {
                    "no inputs".to_string()
                } else {
                    inputs.join(", ")
                }
            )));
        }
        let term = crate::binding_value(&value).map_err(ApiError::from)?;
        bindings.push((key, term));
    }
    let accept = accept(&headers);
    limited(&state.0, false, move |store, cancel| {
        let options = QueryOptions {
            cancellation: Some(cancel),
            ..QueryOptions::default()
        };
        let bindings: Vec<(&str, oxigraph::model::Term)> = bindings
            .iter()
            .map(|(k, t)| (k.as_str(), t.clone()))
            .collect();
        serialize(
            store.query_named_with(&query, &bindings, &options)?,
            &accept,
        )
    })
    .await
    .map(|(content_type, body)| ([(header::CONTENT_TYPE, content_type)], body).into_response())
}

/// The parameters of one protocol request.
#[derive(Default)]
struct Operation {
    query: Option<String>,
    update: Option<String>,
    default_graphs: Vec<String>,
    named_graphs: Vec<String>,
    /// `using-graph-uri` / `using-named-graph-uri` (update datasets; not supported).
    using: bool,
}

impl Operation {
    fn add(&mut self, pairs: Vec<(String, String)>) -> Result<(), ApiError> {
        for (key, value) in pairs {
            match key.as_str() {
                "query" => set_once(&mut self.query, value, "query")?,
                "update" => set_once(&mut self.update, value, "update")?,
                "default-graph-uri" => self.default_graphs.push(value),
                "named-graph-uri" => self.named_graphs.push(value),
                "using-graph-uri" | "using-named-graph-uri" => self.using = true,
                _ => {}
            }
        }
        Ok(())
    }

    fn options(&self) -> Result<QueryOptions, ApiError> {
        let iris = |list: &[String]| -> Result<Vec<NamedNode>, ApiError> {
            list.iter()
                .map(|i| {
                    NamedNode::new(i.clone())
                        .map_err(|e| ApiError::bad_request(format!("invalid graph IRI <{i}>: {e}")))
                })
                .collect()
        };
        Ok(QueryOptions {
            default_graphs: iris(&self.default_graphs)?,
            named_graphs: iris(&self.named_graphs)?,
            cancellation: None,
        })
    }
}

fn set_once(slot: &mut Option<String>, value: String, name: &str) -> Result<(), ApiError> {
    if slot.replace(value).is_some() {
        return Err(ApiError::bad_request(format!(
            "the {name} parameter is given twice"
        )));
    }
    Ok(())
}

fn pairs(text: &str) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("malformed parameters: {e}")))
}

async fn get_sparql(state: Shared, RawQuery(raw): RawQuery, headers: HeaderMap) -> Reply {
    let mut op = Operation::default();
    op.add(pairs(raw.as_deref().unwrap_or(""))?)?;
    run(state, op, headers, false).await
}

async fn post_sparql(
    state: Shared,
    uri: axum::http::Uri,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Reply {
    let mut op = Operation::default();
    op.add(pairs(raw.as_deref().unwrap_or(""))?)?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let text = || {
        String::from_utf8(body.to_vec())
            .map_err(|_| ApiError::bad_request("the request body is not UTF-8"))
    };
    match content_type.as_str() {
        "application/x-www-form-urlencoded" => op.add(pairs(&text()?)?)?,
        "application/sparql-query" => set_once(&mut op.query, text()?, "query")?,
        "application/sparql-update" => set_once(&mut op.update, text()?, "update")?,
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!(
                    "unsupported content type {other:?}: use application/sparql-query, \
                     application/sparql-update or application/x-www-form-urlencoded"
                ),
            ))
        }
    }
    let update_route = uri.path() == "/update";
    if update_route && op.query.is_some() {
        return Err(ApiError::bad_request(
            "/update takes an update, not a query",
        ));
    }
    if uri.path() == "/query" && op.update.is_some() {
        return Err(ApiError::bad_request(
            "/query takes a query; send updates to /update",
        ));
    }
    run(state, op, headers, true).await
}

async fn run(state: Shared, op: Operation, headers: HeaderMap, post: bool) -> Reply {
    let state = state.0;
    match (&op.query, &op.update) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "give either query or update, not both",
        )),
        (None, None) if !post => Ok(service_description(&state, &headers)),
        (None, None) => Err(ApiError::bad_request("give a query or an update")),
        (None, Some(_))
            if op.using || !op.default_graphs.is_empty() || !op.named_graphs.is_empty() =>
        {
            Err(ApiError::bad_request(
                "dataset parameters are not supported with updates: name graphs with GRAPH \
                 in the update itself",
            ))
        }
        (Some(_), None) if op.using => Err(ApiError::bad_request(
            "using-graph-uri and using-named-graph-uri apply to updates only",
        )),
        (None, Some(update)) if post => {
            authorize(&state, &headers)?;
            let update = update.clone();
            limited(&state, true, move |store, cancel| {
                store.update(&update, Some(&cancel)).map_err(ApiError::from)
            })
            .await
            .map(|_| StatusCode::NO_CONTENT.into_response())
        }
        (None, Some(_)) => Err(ApiError::bad_request("updates must be sent with POST")),
        (Some(query), None) => {
            let query = query.clone();
            let accept = accept(&headers);
            match op.options() {
                Err(e) => Err(e),
                Ok(mut options) => limited(&state, false, move |store, cancel| {
                    options.cancellation = Some(cancel);
                    evaluate(store, &query, &options, &accept)
                })
                .await
                .map(|(content_type, body)| {
                    ([(header::CONTENT_TYPE, content_type)], body).into_response()
                }),
            }
        }
    }
}

fn accept(headers: &HeaderMap) -> String {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Runs `work` on a blocking thread under the concurrency cap and the time limit. Past
/// the limit the token is cancelled and the caller gets 503 at once; nothing of the
/// result has been sent (results are buffered).
///
/// An update is different: parts of it cannot be cancelled (waiting for the write lock,
/// `INSERT DATA`), so after cancelling, `wait_for_outcome` waits and reports what really
/// happened rather than a 503 for an update that then commits.
///
/// Queries take a slot of the query lane; updates (`wait_for_outcome`), which need the
/// token, one of the write lane, so anonymous queries can never starve writes.
pub(super) async fn limited<T: Send + 'static>(
    state: &Arc<AppState>,
    wait_for_outcome: bool,
    work: impl FnOnce(&Store, CancellationToken) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let lane = if wait_for_outcome {
        super::Lane::Write
    } else {
        super::Lane::Query
    };
    let permit = state.admission.enter(lane).await?;
    let token = CancellationToken::new();
    let task_token = token.clone();
    let store = Arc::clone(&state.store);
    let task = tokio::task::spawn_blocking(move || {
        let _permit = permit; // held until the evaluation really stops
        work(&store, task_token)
    });
    let joined = |r: Result<Result<T, ApiError>, tokio::task::JoinError>| {
        r.map_err(|e| ApiError::internal(format!("worker failed: {e}")))?
    };
    let mut task = task;
    match tokio::time::timeout(state.config.query_timeout, &mut task).await {
        Ok(result) => joined(result),
        Err(_) => {
            token.cancel();
            if wait_for_outcome {
                joined(task.await)
            } else {
                Err(ApiError::timeout(state.config.query_timeout))
            }
        }
    }
}

/// The media types offered for each kind of result, first is the default.
const SOLUTION_TYPES: &[(&str, QueryResultsFormat)] = &[
    ("application/sparql-results+json", QueryResultsFormat::Json),
    ("application/json", QueryResultsFormat::Json),
    ("application/sparql-results+xml", QueryResultsFormat::Xml),
    ("application/xml", QueryResultsFormat::Xml),
    ("text/csv", QueryResultsFormat::Csv),
    ("text/tab-separated-values", QueryResultsFormat::Tsv),
];
/// ASK results: the SPARQL 1.1 CSV and TSV results formats define SELECT results only.
const BOOLEAN_TYPES: &[(&str, QueryResultsFormat)] = &[
    ("application/sparql-results+json", QueryResultsFormat::Json),
    ("application/json", QueryResultsFormat::Json),
    ("application/sparql-results+xml", QueryResultsFormat::Xml),
    ("application/xml", QueryResultsFormat::Xml),
];
/// RDF/XML is what SPARQLWrapper and rdflib ask for by default.
const GRAPH_TYPES: &[&str] = &[
    "text/turtle",
    "application/n-triples",
    "application/n-quads",
    "application/trig",
    "application/ld+json",
    "application/rdf+xml",
];

/// Picks the offer the Accept header prefers (q-values, then order); `None` is 406.
pub(super) fn negotiate<'a>(accept: &str, offers: &[&'a str]) -> Option<&'a str> {
    let matches = |range: &str, offer: &str| {
        range == "*/*"
            || range == offer
            || range
                .strip_suffix("/*")
                .is_some_and(|major| offer.split('/').next() == Some(major))
    };
    let all: Vec<(f32, usize, String)> = accept
        .split(',')
        .enumerate()
        .filter_map(|(i, part)| {
            let mut pieces = part.split(';');
            let range = pieces.next()?.trim().to_ascii_lowercase();
            if range.is_empty() {
                return None;
            }
            let q = pieces
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            Some((q, i, range))
        })
        .collect();
    if all.is_empty() {
        return offers.first().copied();
    }
    // q=0 refuses a type: an exact refusal beats any wildcard that would allow it.
    let refused = |offer: &str| {
        all.iter().any(|(q, _, range)| {
            *q <= 0.0 && (range == offer || (range != "*/*" && matches(range, offer)))
        })
    };
    let mut ranges: Vec<&(f32, usize, String)> = all.iter().filter(|(q, _, _)| *q > 0.0).collect();
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    ranges.iter().find_map(|(_, _, range)| {
        offers
            .iter()
            .copied()
            .find(|offer| matches(range, offer) && !refused(offer))
    })
}

fn not_acceptable(what: &str, offers: &[&str]) -> ApiError {
    ApiError::new(
        StatusCode::NOT_ACCEPTABLE,
        "not_acceptable",
        format!(
            "no acceptable media type for {what}; offered: {}",
            offers.join(", ")
        ),
    )
}

/// The results format the Accept header prefers among `offered`, or 406.
fn results_format(
    accept: &str,
    offered: &[(&str, QueryResultsFormat)],
    what: &str,
) -> Result<QueryResultsFormat, ApiError> {
    let offers: Vec<&str> = offered.iter().map(|(m, _)| *m).collect();
    let media = negotiate(accept, &offers).ok_or_else(|| not_acceptable(what, &offers))?;
    Ok(offered
        .iter()
        .find(|(m, _)| *m == media)
        .map_or(QueryResultsFormat::Json, |(_, f)| *f))
}

fn evaluate(
    store: &Store,
    query: &str,
    options: &QueryOptions,
    accept: &str,
) -> Result<(String, Vec<u8>), ApiError> {
    serialize(store.query_with(query, &[], options)?, accept)
}

/// Serialises results whole, in the format the Accept header prefers.
fn serialize(results: QueryResults<'static>, accept: &str) -> Result<(String, Vec<u8>), ApiError> {
    let io = |e: std::io::Error| ApiError::internal(format!("cannot serialize results: {e}"));
    let failed = |e| ApiError::from(evaluation_error(e));
    let mut out = Vec::new();
    match results {
        QueryResults::Solutions(solutions) => {
            let format = results_format(accept, SOLUTION_TYPES, "solutions")?;
            let mut w = QueryResultsSerializer::from_format(format)
                .serialize_solutions_to_writer(&mut out, solutions.variables().to_vec())
                .map_err(io)?;
            for solution in solutions {
                w.serialize(&solution.map_err(failed)?).map_err(io)?;
            }
            w.finish().map_err(io)?;
            Ok((format.media_type().to_string(), out))
        }
        QueryResults::Boolean(value) => {
            let format = results_format(
                accept,
                BOOLEAN_TYPES,
                "a boolean (the SPARQL CSV and TSV results formats cover SELECT only)",
            )?;
            QueryResultsSerializer::from_format(format)
                .serialize_boolean_to_writer(&mut out, value)
                .map_err(io)?;
            Ok((format.media_type().to_string(), out))
        }
        QueryResults::Graph(triples) => {
            let media = negotiate(accept, GRAPH_TYPES)
                .ok_or_else(|| not_acceptable("a graph", GRAPH_TYPES))?;
            let format = RdfFormat::from_media_type(media).unwrap_or(RdfFormat::Turtle);
            let mut w = RdfSerializer::from_format(format).for_writer(&mut out);
            for triple in triples {
                w.serialize_triple(&triple.map_err(failed)?).map_err(io)?;
            }
            w.finish().map_err(io)?;
            Ok((media.to_string(), out))
        }
    }
}

fn service_description(state: &AppState, headers: &HeaderMap) -> Response {
    // The Host header ends up in IRIs: keep it only if it is a plain host[:port].
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        })
        .unwrap_or("localhost");
    let languages = if state.config.token.is_some() {
        "sd:SPARQL11Query, sd:SPARQL11Update"
    } else {
        "sd:SPARQL11Query"
    };
    let base = format!("http://{host}");
    let body = format!(
        "@prefix sd: <http://www.w3.org/ns/sparql-service-description#> .\n\
         @prefix formats: <http://www.w3.org/ns/formats/> .\n\
         <{base}/sparql> a sd:Service ;\n\
         \tsd:endpoint <{base}/sparql> ;\n\
         \tsd:supportedLanguage {languages} ;\n\
         \tsd:feature sd:UnionDefaultGraph ;\n\
         \tsd:resultFormat formats:SPARQL_Results_JSON, formats:SPARQL_Results_XML, \
         formats:SPARQL_Results_CSV, formats:SPARQL_Results_TSV, formats:Turtle, \
         formats:N-Triples, formats:N-Quads, formats:TriG, formats:JSON-LD, \
         formats:RDF_XML .\n"
    );
    ([(header::CONTENT_TYPE, "text/turtle")], body).into_response()
}

async fn get_store(state: Shared, RawQuery(raw): RawQuery, headers: HeaderMap) -> Reply {
    let params = pairs(raw.as_deref().unwrap_or(""))?;
    let graph = params
        .into_iter()
        .find(|(k, _)| k == "graph")
        .map(|(_, v)| v)
        .ok_or_else(|| ApiError::bad_request("give ?graph=<session IRI>"))?;
    let graph = NamedNode::new(graph.clone())
        .map_err(|e| ApiError::bad_request(format!("invalid graph IRI <{graph}>: {e}")))?;
    let offers = [
        "text/turtle",
        "application/trig",
        "application/n-triples",
        "application/n-quads",
    ];
    let media =
        negotiate(&accept(&headers), &offers).ok_or_else(|| not_acceptable("a graph", &offers))?;
    let format = RdfFormat::from_media_type(media).unwrap_or(RdfFormat::Turtle);
    let body = blocking(&state, move |store| {
        graph_body(store, graph.as_ref(), format)
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, media.to_string())], body).into_response())
}

fn graph_body(store: &Store, graph: NamedNodeRef<'_>, format: RdfFormat) -> Result<Vec<u8>, Error> {
    let io = |e: std::io::Error| Error::io("cannot serialize the graph", e);
    let rdf = store.rdf();
    if !rdf.backend.has_graph(graph)? {
        return Err(Error::SessionNotFound {
            session: rdf.iris.name_of(graph),
        });
    }
    let mut w = RdfSerializer::from_format(format).for_writer(Vec::new());
    for quad in rdf.graph(graph)? {
        if format.supports_datasets() {
            w.serialize_quad(&quad).map_err(io)?;
        } else {
            w.serialize_triple(quad.as_ref()).map_err(io)?;
        }
    }
    w.finish().map_err(io)
}
