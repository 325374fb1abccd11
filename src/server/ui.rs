//! The web UI: server-rendered HTML (maud, escaped at compile time) and one CSS file,
//! all in the binary; no script, no build step, no network. Pages so far: the sessions
//! (with search) at `/`, the playback of a session at `/ui/sessions/{id}`, and the fork
//! tree around it at `/ui/sessions/{id}/tree`.

use super::{blocking, AppState, Shared};
use crate::model::{SessionId, SessionInfo, TreeNode, Turn};
use axum::extract::{Path, Query};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use maud::{html, Markup, DOCTYPE};
use std::sync::Arc;

const STYLE: &str = include_str!("ui.css");

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(sessions))
        .route("/ui/sessions/{id}", get(playback))
        .route("/ui/sessions/{id}/tree", get(tree))
        .route("/ui/style.css", get(style))
}

/// An HTML page with the headers every UI page carries: nothing but this origin's own
/// files may load or run.
fn page(status: StatusCode, title: &str, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · forktrail" }
                link rel="stylesheet" href="/ui/style.css";
            }
            body {
                header { a href="/" { "forktrail" } }
                main { (body) }
            }
        }
    };
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, "default-src 'self'"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        markup.into_string(),
    )
        .into_response()
}

/// An error as a page: what went wrong, and the way back.
fn error_page(status: StatusCode, message: &str) -> Response {
    page(
        status,
        "error",
        html! {
            h1 { "Not here" }
            p.error { (message) }
            p { a href="/" { "All sessions" } }
        },
    )
}

async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        STYLE,
    )
        .into_response()
}

#[derive(serde::Deserialize, Default)]
struct Search {
    #[serde(default)]
    q: String,
}

/// Whether a session matches a search: its id, branch, title or principal contain the
/// words (case ignored).
fn matches(s: &SessionInfo, query: &str) -> bool {
    let text = format!(
        "{} {} {} {}",
        s.session,
        s.branch,
        s.title.as_deref().unwrap_or(""),
        s.principal.as_deref().unwrap_or("")
    )
    .to_lowercase();
    query
        .to_lowercase()
        .split_whitespace()
        .all(|word| text.contains(word))
}

fn session_link(id: &SessionId) -> String {
    format!("/ui/sessions/{id}")
}

/// `GET /?q=`: every session, newest last, filtered by the search.
async fn sessions(state: Shared, Query(search): Query<Search>) -> Response {
    let all = match blocking(&state.0, |store| store.list()).await {
        Ok(all) => all,
        Err(e) => return error_page(e.status, &e.message),
    };
    let shown: Vec<&SessionInfo> = all.iter().filter(|s| matches(s, &search.q)).collect();
    page(
        StatusCode::OK,
        "sessions",
        html! {
            h1 { "Sessions" }
            form method="get" action="/" role="search" {
                label for="q" { "Search" }
                input id="q" name="q" type="search" value=(search.q)
                    placeholder="id, branch, title or principal";
                button type="submit" { "Search" }
            }
            p.count { (shown.len()) " of " (all.len()) " sessions" }
            table {
                thead { tr {
                    th { "Session" } th { "Branch" } th { "Title" } th { "Principal" }
                    th { "Turns" } th { "Parent" } th { "Created" }
                } }
                tbody {
                    @for s in &shown {
                        tr {
                            td { a href=(session_link(&s.session)) { (s.session) } }
                            td { (s.branch) }
                            td { (s.title.as_deref().unwrap_or("")) }
                            td { (s.principal.as_deref().unwrap_or("")) }
                            td.number { (s.length) }
                            td { @if let Some(p) = &s.parent {
                                a href=(session_link(p)) { (p) } " @ " (s.forked_at_index.unwrap_or(0))
                            } }
                            td { (s.created_at.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        },
    )
}

/// `GET /ui/sessions/{id}`: the session's turns in order, inherited ones marked with
/// the branch that owns them.
async fn playback(state: Shared, Path(id): Path<String>) -> Response {
    let id: SessionId = match id.parse() {
        Ok(id) => id,
        Err(e) => return error_page(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let read = blocking(&state.0, move |store| {
        Ok((store.info(&id)?, store.load(&id, None)?))
    })
    .await;
    let (info, turns) = match read {
        Ok(read) => read,
        Err(e) => return error_page(e.status, &e.message),
    };
    let title = format!("{} ({})", info.session, info.branch);
    page(
        StatusCode::OK,
        &title,
        html! {
            h1 { "Session " (info.session) }
            p { a href=(format!("{}/tree", session_link(&info.session))) { "Fork tree" } }
            dl.facts {
                dt { "Branch" } dd { (info.branch) }
                @if let Some(t) = &info.title { dt { "Title" } dd { (t) } }
                @if let Some(p) = &info.parent {
                    dt { "Forked from" }
                    dd { a href=(session_link(p)) { (p) } " at turn " (info.forked_at_index.unwrap_or(0)) }
                }
                dt { "Turns" } dd { (info.length) " (" (info.own_turns) " its own)" }
                @if let Some(d) = &info.head_digest { dt { "Head digest" } dd { code { (d) } } }
            }
            ol.turns start="0" {
                @for turn in &turns { (turn_item(&info, turn)) }
            }
        },
    )
}

/// One turn: index, role, who or what wrote it, when, a short digest, the content
/// (escaped, whitespace kept), its tool calls, and where it was inherited from.
fn turn_item(info: &SessionInfo, turn: &Turn) -> Markup {
    let inherited = turn.session != info.session;
    html! {
        li.turn.inherited[inherited] id=(format!("turn-{}", turn.index)) {
            div.meta {
                span.index { "#" (turn.index) }
                " " span.role { (turn.role.as_str()) }
                @if let Some(model) = &turn.model { " " span.model { (model) } }
                @if let Some(name) = &turn.name { " " span.name { (name) } }
                @if inherited {
                    " " a.owner href=(format!("{}#turn-{}", session_link(&turn.session), turn.index)) {
                        "from " (turn.branch)
                    }
                }
                @if let Some(at) = &turn.created_at { " " time datetime=(at) { (at) } }
                " " code.digest title=(turn.digest) { (turn.digest.get(..12).unwrap_or(&turn.digest)) }
            }
            pre.content { (turn.content) }
            @if let Some(calls) = &turn.tool_calls { pre.calls { (calls) } }
        }
    }
}

/// `GET /ui/sessions/{id}/tree`: the whole fork family of the session, from its root,
/// each branch foldable (`<details>`: keyboard and screen readers need no script).
async fn tree(state: Shared, Path(id): Path<String>) -> Response {
    let id: SessionId = match id.parse() {
        Ok(id) => id,
        Err(e) => return error_page(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let current = id.clone();
    let read = blocking(&state.0, move |store| {
        let root = store.info(&id)?.fork_root;
        store.tree(&root)
    })
    .await;
    let root = match read {
        Ok(root) => root,
        Err(e) => return error_page(e.status, &e.message),
    };
    page(
        StatusCode::OK,
        &format!("tree of {}", root.branch),
        html! {
            h1 { "Fork tree of " (root.branch) }
            ul.tree { (tree_node(&root, &current)) }
        },
    )
}

/// One session of the tree and, folded under it, its children.
fn tree_node(node: &TreeNode, current: &SessionId) -> Markup {
    let here = node.session == *current;
    let label = html! {
        a href=(session_link(&node.session)) aria-current=[here.then_some("page")] {
            (node.branch)
        }
        span.meta {
            @if let Some(at) = node.forked_at_index { " forked at " (at) "," }
            " " (node.length) " turns"
            @if !node.models.is_empty() { ", " (node.models.join(", ")) }
        }
    };
    html! {
        li.node.current[here] {
            @if node.children.is_empty() {
                (label)
            } @else {
                details open {
                    summary { (label) }
                    ul { @for child in &node.children { (tree_node(child, current)) } }
                }
            }
        }
    }
}
