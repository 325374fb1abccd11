//! A turn's provenance page: who or what produced it, through which forks it reached the
//! session, and its digest chain.

use super::shell::{page, read, session_id, term_text, turn_index, valid_range, Page};
use crate::html::{self, Links};
use crate::server::Shared;
use axum::extract::Path;
use axum::http::StatusCode;
use maud::html;
use oxigraph::model::{Literal, Term};

/// The words for an output of `queries/audit-turn-origin.rq`.
fn audit_label(variable: &str) -> &str {
    match variable {
        "id" => "Session",
        "at" => "Asked at index",
        "index" => "Turn",
        "ownerId" => "Stored by session",
        "ownerBranch" => "Stored on branch",
        "role" => "Role",
        "agent" => "Attributed to",
        "agentName" => "Agent name",
        "generatedAt" => "Generated at",
        "digest" => "Digest",
        other => other,
    }
}

/// `GET /ui/sessions/{id}/turns/{index}`: who or what produced the turn, through which
/// forks it reached this session (the shipped audit query), and its digest chain.
pub(super) async fn provenance(state: Shared, Path((id, index)): Path<(String, String)>) -> Page {
    let state = state.0;
    let id = session_id(&state, &id)?;
    let index = turn_index(&state, &index)?;
    let read_id = id.clone();
    let (info, turn, rows, report, root) = read(&state, move |store| {
        let info = store.info(&read_id)?;
        if index >= info.length {
            return Err(crate::Error::IndexOutOfRange {
                session: read_id.to_string(),
                index: index.into(),
                valid: valid_range(info.length),
            });
        }
        let turn = store
            .load(&read_id, Some(index))?
            .pop()
            .filter(|t| t.index == index);
        let query = crate::queries::AUDIT_TURN_ORIGIN;
        let bindings = [
            (
                "id",
                Term::from(Literal::new_simple_literal(read_id.as_str())),
            ),
            ("at", Term::from(Literal::from(index as i64))),
        ];
        let rows: Vec<Vec<(String, String)>> = store
            .select(&query, &bindings)?
            .iter()
            .map(|row| {
                row.iter()
                    .map(|(v, t)| (v.as_str().to_string(), term_text(t)))
                    .collect()
            })
            .collect();
        let report = store.verify(Some(&read_id))?;
        let root = store.tree(&info.fork_root)?;
        Ok((info, turn, rows, report, root))
    })
    .await?;
    let chain = html::chain_to(&root, &id);
    let problems: Vec<&crate::Problem> = report.problems.iter().collect();
    Ok(page(
        &state,
        StatusCode::OK,
        &format!("turn {index} of {id}"),
        html! {
            h1 { "Provenance of turn " (index) " of " a href=(format!("/ui/sessions/{id}?from={}#turn-{index}", index / html::PAGE * html::PAGE)) { (info.title.as_deref().unwrap_or(&info.branch)) } }
            p.meta { "Session " span.id { (id) } }
            @if let Some(turn) = &turn {
                ol.turns start=(index) { (html::turn_item(&info, turn, Links::Server, html! {}, html! {})) }
            }
            h2 { "Origin" }
            p.meta { "As the shipped query " code { "queries/audit-turn-origin.rq" } " finds it." }
            @if rows.is_empty() {
                p.error { "The audit query found no origin for this turn." }
            } @else {
                // One answer a list of facts, each named in words (the query's
                // variable in small print), so it reads on any screen.
                @for row in &rows {
                    dl.facts.audit {
                        @for (name, value) in row {
                            dt { (audit_label(name)) " " span.id { "?" (name) } }
                            dd { (value) }
                        }
                    }
                }
            }
            h2 { "Through the forks" }
            ol.chain {
                @for node in &chain {
                    li {
                        a href=(format!("/ui/sessions/{}", node.session)) { (node.branch) }
                        @if let Some(at) = node.forked_at_index { span.meta { " inherits " (at) " turns" } }
                        @if turn.as_ref().is_some_and(|t| t.session == node.session) { " ← stores this turn" }
                    }
                }
            }
            h2 { "Digest chain" }
            @if problems.is_empty() {
                p.ok { "Intact: " (report.turns) " turn digests recomputed over " (report.sessions)
                    " sessions of the chain; every one matches." }
            } @else {
                p.error { (problems.len()) " problems in the chain:" }
                ul { @for p in &problems { li { (p.to_string()) } } }
            }
        },
    ))
}
