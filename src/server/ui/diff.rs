//! The web UI's diff of two sessions: from where they part, aligned as
//! [`crate::SessionDiff::rows`] aligns them (equal turns matched, the rest paired by
//! role), the words that changed marked inside a rewritten turn, the shared history
//! folded, a page of rows at a time. Each side is named by its title or branch label,
//! its id in small print.

use super::shell::{page, read, session_id, Page};
use crate::engine::diff::{word_diff, AlignedRow, RowKind};
use crate::html;
use crate::model::{ReplayRecord, SessionInfo};
use crate::server::Shared;
use axum::extract::Query;
use axum::http::StatusCode;
use maud::{html, Markup};
use serde::Deserialize;

/// Rows a page of the diff shows.
pub(crate) const ROWS_SHOWN: usize = 100;
/// The shared turns shown (the last ones) when the shared history is unfolded.
const SHARED_SHOWN: usize = 20;

#[derive(Deserialize, Default)]
pub(super) struct DiffQuery {
    #[serde(default)]
    a: String,
    #[serde(default)]
    b: String,
    /// The first row shown.
    #[serde(default)]
    from: usize,
}

/// A session's name for people: title or branch label first, the id in small print.
fn name(info: &SessionInfo) -> Markup {
    html! {
        a href=(format!("/ui/sessions/{}", info.session)) {
            (info.title.as_deref().unwrap_or(&info.branch))
        }
        @if info.title.is_some() { " " span.meta { "(" (info.branch) ")" } }
        " " span.id { (info.session) }
    }
}

/// `GET /ui/diff?a=&b=&from=`: the two sessions from where they part, a page of rows.
pub(super) async fn diff(state: Shared, Query(q): Query<DiffQuery>) -> Page {
    let state = state.0;
    let a = session_id(&state, &q.a)?;
    let b = session_id(&state, &q.b)?;
    let (left, right) = (a.clone(), b.clone());
    let (d, shared, infos) = read(&state, move |store| {
        let d = store.diff(&left, &right)?;
        let shared = match d.common_prefix {
            0 => Vec::new(),
            n => store
                .load_range(&left, n.saturating_sub(SHARED_SHOWN as u64), n - 1)?
                .iter()
                .map(ReplayRecord::from)
                .collect(),
        };
        let ancestor = match &d.common_ancestor {
            Some(c) => Some(store.info(c)?),
            None => None,
        };
        Ok((
            d,
            shared,
            (store.info(&left)?, store.info(&right)?, ancestor),
        ))
    })
    .await?;
    let rows = d.rows();
    let from = q
        .from
        .min(rows.len().saturating_sub(1) / ROWS_SHOWN * ROWS_SHOWN);
    let shown = &rows[from..(from + ROWS_SHOWN).min(rows.len())];
    let count = |kind: RowKind| rows.iter().filter(|r| r.kind == kind).count();
    let here = |from: usize| format!("/ui/diff?a={a}&b={b}&from={from}");
    let pager = html! {
        @if rows.len() > ROWS_SHOWN {
            nav.pages aria-label="pages of the diff" {
                @if from > 0 { a href=(here(from - ROWS_SHOWN)) { "‹ earlier rows" } }
                span { "rows " (from + 1) "–" (from + shown.len()) " of " (rows.len()) }
                @if from + ROWS_SHOWN < rows.len() { a href=(here(from + ROWS_SHOWN)) { "later rows ›" } }
            }
        }
    };
    let body = html! {
        h1 { "Diff" }
        dl.facts {
            dt { "Left" } dd { (name(&infos.0)) }
            dt { "Right" } dd { (name(&infos.1)) " · " a href=(format!("/ui/diff?a={b}&b={a}")) { "swap" } }
            dt { "Shared" } dd {
                (d.common_prefix) " turns"
                @match &d.common_ancestor {
                    Some(c) => { ", common ancestor "
                        a href=(format!("/ui/sessions/{c}")) {
                            (infos.2.as_ref().map_or(c.as_str(), |i| i.title.as_deref().unwrap_or(&i.branch))) }
                        " " span.id { (c) } }
                    None => { ", no common ancestor" }
                }
                " (found by " (serde_json::to_value(d.found_by).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()) ")"
            }
            dt { "Rows" } dd {
                (count(RowKind::Same)) " same, " (count(RowKind::Modified)) " modified, "
                (count(RowKind::LeftOnly)) " left only, " (count(RowKind::RightOnly)) " right only"
            }
        }
        @if !shared.is_empty() {
            details.prefix {
                summary { "The shared history (" (d.common_prefix) " turns)" }
                @if d.common_prefix as usize > shared.len() {
                    p.meta { "The last " (shared.len()) "; " a href=(format!("/ui/sessions/{a}")) { "all of it in playback" } "." }
                }
                ol.turns start=(shared[0].index) { @for r in &shared {
                    li.turn.inherited { div.meta { "#" (r.index) " " span class=(format!("role role-{}", r.role.as_str())) { (r.role.as_str()) } " · " (r.branch) } (html::content(&r.content)) }
                } }
            }
        }
        (pager)
        @if rows.is_empty() {
            p { "The two histories are the same." }
        } @else {
            table.diff {
                colgroup { col.kind; col.side; col.side; }
                thead { tr { th scope="col" { "Row" } th scope="col" { "Left" } th scope="col" { "Right" } } }
                tbody { @for row in shown { (diff_row(&d.a_tail, &d.b_tail, row)) } }
            }
        }
        (pager)
    };
    let title = |i: &crate::model::SessionInfo| i.title.clone().unwrap_or_else(|| i.branch.clone());
    let title = format!("diff of {} and {}", title(&infos.0), title(&infos.1));
    Ok(page(&state, StatusCode::OK, &title, body))
}

/// One row: its kind in words, and each side's turn (the changed words marked in a
/// rewritten turn).
fn diff_row(left: &[ReplayRecord], right: &[ReplayRecord], row: &AlignedRow) -> Markup {
    let (l, r) = (row.left.map(|i| &left[i]), row.right.map(|i| &right[i]));
    let (label, class) = match row.kind {
        RowKind::Same => ("Same", "same"),
        RowKind::Modified => ("Modified", "modified"),
        RowKind::LeftOnly => ("Left only", "left-only"),
        RowKind::RightOnly => ("Right only", "right-only"),
    };
    let words = match (row.kind, l, r) {
        (RowKind::Modified, Some(x), Some(y)) => word_diff(&x.shown(), &y.shown()),
        _ => None,
    };
    let cell = |t: Option<&ReplayRecord>, runs: Option<&Vec<(bool, String)>>, mark: &str| {
        html! { @if let Some(t) = t {
            div.meta { "#" (t.index) " " span class=(format!("role role-{}", t.role.as_str())) { (t.role.as_str()) } " · " (t.branch) }
            // A tool's output and a call's arguments are data (JSON, mostly): set as code,
            // which wraps anywhere, where words break only at spaces.
            @let data = t.role == crate::model::Role::Tool || t.tool_calls.is_some();
            @match runs {
                Some(runs) => div.text.data[data] { @for (changed, text) in runs {
                    @if *changed { span class=(mark) { (text) } } @else { (text) }
                } },
                None => {
                    @if data { div.data { (html::content(&t.content)) } } @else { (html::content(&t.content)) }
                    @if let Some(calls) = &t.tool_calls { (html::tool_calls(calls)) }
                }
            }
        } }
    };
    html! {
        tr class=(class) {
            th.kind scope="row" { (label) }
            td { (cell(l, words.as_ref().map(|w| &w.0), "removed")) }
            td { (cell(r, words.as_ref().map(|w| &w.1), "added")) }
        }
    }
}
