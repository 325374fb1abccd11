//! The SPARQL page: a query typed, or a shipped one with a field for each input.

use super::shell::{error_page, page, term_text, Page};
use crate::server::{ApiError, AppState, Shared};
use axum::extract::Query;
use axum::http::StatusCode;
use maud::html;
use oxigraph::sparql::QueryResults;
use std::collections::HashMap;
use std::sync::Arc;

/// Rows shown on the SPARQL page; the endpoint serves whole results.
const SHOWN_ROWS: usize = 1000;

/// `GET /ui/sparql?query=` runs a query typed; `GET /ui/sparql?name=` opens a shipped
/// one, with a field for each input its header names (`in_<input>`, read as `--bind`
/// reads a value), and `&run=1` runs it with them bound as RDF terms. Results as a
/// table, with the endpoint's limits (time, cost, slots). Every state is its URL.
pub(super) async fn sparql(state: Shared, Query(q): Query<HashMap<String, String>>) -> Page {
    let state = state.0;
    let field = |k: &str| q.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
    let (typed, name) = (field("query"), field("name"));
    let named = match crate::NamedQuery::find(&name) {
        Some(named) => Some(named),
        None if name.is_empty() => None,
        None => {
            return Err(error_page(
                &state,
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("no shipped query named {name:?}"),
                ),
            ))
        }
    };
    let inputs: Vec<(String, String)> = named
        .map(|n| n.inputs())
        .unwrap_or_default()
        .into_iter()
        .map(|i| {
            let value = field(&format!("in_{i}"));
            (i, value)
        })
        .collect();
    let text = match (&named, typed.is_empty()) {
        (Some(n), true) => n.source.to_string(),
        _ => typed.clone(),
    };
    let run_named = named.is_some() && typed.is_empty() && field("run") == "1";
    let outcome = match (run_named, named) {
        (true, Some(query)) => {
            let mut bindings = Vec::new();
            for (input, value) in inputs.iter().filter(|(_, v)| !v.is_empty()) {
                let term = crate::binding_value(value).map_err(|e| error_page(&state, e.into()))?;
                bindings.push((input.clone(), term));
            }
            Some(run_sparql(&state, Runnable::Named(query, bindings)).await)
        }
        _ if !typed.is_empty() => Some(run_sparql(&state, Runnable::Text(typed.clone())).await),
        _ => None,
    };
    let (status, results) = match outcome {
        None => (StatusCode::OK, html! {}),
        Some(Ok((head, rows, total))) => (
            StatusCode::OK,
            html! {
                p.count { (total) " results" @if total > rows.len() { " (the first " (rows.len()) " shown)" } }
                div.scroll {
                    table.results {
                        thead { tr { @for h in &head { th scope="col" { (h) } } } }
                        tbody { @for row in &rows { tr { @for v in row { td { (v) } } } } }
                    }
                }
            },
        ),
        Some(Err(e)) => (e.status, html! { p.error { (e.message) } }),
    };
    Ok(page(
        &state,
        status,
        "SPARQL",
        html! {
            h1 { "SPARQL" }
            p.meta { "Read-only. The default graph is the union of all sessions. Shipped queries: "
                @for (i, listed) in crate::queries::listed().enumerate() {
                    @if i > 0 { ", " }
                    a href=(format!("/ui/sparql?name={}", listed.name)) { (listed.name) }
                }
            }
            @if let Some(n) = &named {
                section.named {
                    h2 { (n.name) }
                    p { (n.help().lines().next().unwrap_or("")) }
                    form.write method="get" action="/ui/sparql" {
                        input type="hidden" name="name" value=(n.name);
                        input type="hidden" name="run" value="1";
                        @for (input, value) in &inputs {
                            label for=(format!("in-{input}")) { "?" (input) }
                            input id=(format!("in-{input}")) name=(format!("in_{input}")) value=(value)
                                placeholder="a value (\"text\", <iri> or a number); empty leaves it free";
                        }
                        button type="submit" { "Run " (n.name) }
                    }
                }
            }
            form method="get" action="/ui/sparql" {
                label for="sparql-text" { @if named.is_some() { "Or edit it and run the text" } @else { "Query" } }
                textarea.sparql #sparql-text name="query" { (text) }
                button type="submit" { "Run" }
            }
            (results)
        },
    ))
}

/// What the SPARQL page runs: a shipped query with its bindings, or a query's text.
enum Runnable {
    Named(crate::NamedQuery, Vec<(String, oxigraph::model::Term)>),
    Text(String),
}

/// Runs `query` with the endpoint's limits (time, cost, slots), as a table.
async fn run_sparql(state: &Arc<AppState>, query: Runnable) -> Result<Table, ApiError> {
    crate::server::sparql::limited(state, false, move |store, cancel| {
        let options = crate::QueryOptions {
            cancellation: Some(cancel),
            ..Default::default()
        };
        match &query {
            Runnable::Named(named, bindings) => {
                let bound: Vec<(&str, oxigraph::model::Term)> = bindings
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.clone()))
                    .collect();
                table(store.query_named_with(named, &bound, &options)?)
            }
            Runnable::Text(text) => table(store.query_with(text, &[], &options)?),
        }
    })
    .await
}

type Table = (Vec<String>, Vec<Vec<String>>, usize);

/// Results as a header and text rows (the first [`SHOWN_ROWS`]), and how many there were.
fn table(results: QueryResults<'static>) -> Result<Table, ApiError> {
    let failed = |e: oxigraph::sparql::QueryEvaluationError| ApiError::bad_request(e.to_string());
    match results {
        QueryResults::Solutions(rows) => {
            let head: Vec<String> = rows
                .variables()
                .iter()
                .map(|v| v.as_str().to_string())
                .collect();
            let (mut out, mut total) = (Vec::new(), 0);
            for row in rows {
                let row = row.map_err(failed)?;
                total += 1;
                if out.len() < SHOWN_ROWS {
                    out.push(
                        head.iter()
                            .map(|v| row.get(v.as_str()).map(term_text).unwrap_or_default())
                            .collect(),
                    );
                }
            }
            Ok((head, out, total))
        }
        QueryResults::Boolean(answer) => {
            Ok((vec!["answer".into()], vec![vec![answer.to_string()]], 1))
        }
        QueryResults::Graph(triples) => {
            let (mut out, mut total) = (Vec::new(), 0);
            for t in triples {
                let t = t.map_err(failed)?;
                total += 1;
                if out.len() < SHOWN_ROWS {
                    out.push(vec![
                        t.subject.to_string(),
                        t.predicate.to_string(),
                        t.object.to_string(),
                    ]);
                }
            }
            Ok((
                vec!["subject".into(), "predicate".into(), "object".into()],
                out,
                total,
            ))
        }
    }
}
