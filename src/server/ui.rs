//! The web UI: server-rendered HTML (maud, see `crate::html`), one CSS file and one
//! small script of our own, all in the binary: no build step, no CDN, no network.
//!
//! Every page has a shareable URL; every action is a plain form POST (the token then
//! travels in the form). With script, the token is typed once, kept in the tab's
//! session storage and sent as an `Authorization` header: no cookie, so no cross-site
//! request forgery. Writes go through the same store calls, and errors, as the REST API.

// A handler's error is the error page itself, built once per failed request: boxing it
// would only add an allocation.
#![allow(clippy::result_large_err)]

use super::{authorize, blocking, writing, ApiError, AppState, Shared};
use crate::html::{self, Assets, Links, TreeView};
use crate::model::{
    DeleteOptions, ForkOptions, Job, JobStatus, MergeOptions, SessionId, SessionInfo, TreeNode,
    Turn,
};
use crate::RegenerateOptions;
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup};
use oxigraph::model::{Literal, Term};
use oxigraph::sparql::QueryResults;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

const SCRIPT: &str = include_str!("ui.js");

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(sessions))
        .route("/ui/sessions/{id}", get(playback))
        .route("/ui/sessions/{id}/tree", get(tree))
        .route("/ui/sessions/{id}/after/{index}", get(turns_after))
        .route("/ui/sessions/{id}/turns/{index}", get(provenance))
        .route("/ui/sessions/{id}/fork", post(fork))
        .route("/ui/sessions/{id}/whatif", post(what_if))
        .route("/ui/sessions/{id}/anchors", post(anchor))
        .route("/ui/sessions/{id}/merge", post(merge))
        .route("/ui/sessions/{id}/delete", post(delete))
        .route("/ui/jobs/{job}", get(job))
        .route("/ui/jobs/{job}/cancel", post(cancel))
        .route("/ui/sparql", get(sparql))
        .route("/ui/style.css", get(style))
        .route("/ui/app.js", get(script))
        .merge(super::ui_compare::routes())
        .merge(super::ui_compose::routes())
        .merge(super::ui_diff::routes())
        .layer(axum::middleware::from_fn(script_redirects))
}

/// A form the script sent (`X-Forktrail-Script`) is answered 204 with where to go in
/// `X-Forktrail-Location`, not with the redirect itself: `fetch` would follow it and
/// lose its `#fragment` (the turn, or the composer, to land on).
async fn script_redirects(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let script = request.headers().contains_key("x-forktrail-script");
    let response = next.run(request).await;
    if !script || !response.status().is_redirection() {
        return response;
    }
    match response.headers().get(header::LOCATION) {
        Some(location) => (
            StatusCode::NO_CONTENT,
            [("x-forktrail-location", location.clone())],
        )
            .into_response(),
        None => response,
    }
}

pub(super) type Page = Result<Response, Response>;

/// An HTML page with the headers every UI page carries: nothing but this origin's own
/// files may load or run, and no other site may frame it.
pub(super) fn page(state: &AppState, status: StatusCode, title: &str, body: Markup) -> Response {
    let writable = state.config.token.is_some();
    let header = html! {
        a href="/" { "forktrail" }
        nav { a href="/" { "Sessions" } a href="/ui/sparql" { "SPARQL" } }
        @if writable {
            form #token-form hidden {
                label for="token-input" { "Token" }
                input #token-input type="password" name="token" autocomplete="off";
                button type="submit" { "Use for writes" }
                span #token-status {}
                button #token-forget type="button" hidden { "Forget the token" }
            }
        } @else {
            span.meta { "read-only server" }
        }
    };
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "same-origin"),
        ],
        html::document(title, Assets::Linked { header }, body),
    )
        .into_response()
}

/// An error as a page: what went wrong (naming the session or index), and the way back.
pub(super) fn error_page(state: &AppState, error: ApiError) -> Response {
    let heading = match error.status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::UNAUTHORIZED => "Token needed",
        StatusCode::FORBIDDEN => "Not allowed",
        StatusCode::CONFLICT => "Refused",
        s if s.is_server_error() => "Server error",
        _ => "Bad request",
    };
    page(
        state,
        error.status,
        heading,
        html! {
            h1 { (heading) }
            p.error data-code=(error.code) { (error.message) }
            p.outcome { "Nothing was changed." }
            p { a href="/" { "All sessions" } }
        },
    )
}

/// Runs `f` with the store on a blocking thread; an error becomes an error page.
pub(super) async fn read<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&crate::Store) -> crate::Result<T> + Send + 'static,
) -> Result<T, Response> {
    blocking(state, f).await.map_err(|e| error_page(state, e))
}

/// Runs write `f` (after `may_write`) as `read` does, in the write lane.
pub(super) async fn write<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&crate::Store) -> crate::Result<T> + Send + 'static,
) -> Result<T, Response> {
    writing(state, f).await.map_err(|e| error_page(state, e))
}

pub(super) fn session_id(state: &AppState, text: &str) -> Result<SessionId, Response> {
    SessionId::new(text).map_err(|e| error_page(state, e.into()))
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", html::STYLE)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

fn asset(media_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, media_type),
            (header::CACHE_CONTROL, "max-age=300"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// A form body. Every write form carries `token` (empty when the script sends it as a
/// header instead).
pub(super) fn form<T: DeserializeOwned>(state: &AppState, body: &Bytes) -> Result<T, Response> {
    serde_urlencoded::from_bytes(body).map_err(|e| {
        error_page(
            state,
            ApiError::bad_request(format!("the form does not parse: {e}")),
        )
    })
}

/// A write needs the token: in the `Authorization` header, or typed into the form.
pub(super) fn may_write(
    state: &AppState,
    headers: &HeaderMap,
    typed: &str,
) -> Result<(), Response> {
    token_given(state, headers, typed).map_err(|e| error_page(state, e))
}

/// [`may_write`]'s check, its error left for the caller to show.
pub(super) fn token_given(
    state: &AppState,
    headers: &HeaderMap,
    typed: &str,
) -> Result<(), ApiError> {
    let mut headers = headers.clone();
    if !headers.contains_key(header::AUTHORIZATION) && !typed.is_empty() {
        if let Ok(value) = HeaderValue::from_str(&format!("Bearer {typed}")) {
            headers.insert(header::AUTHORIZATION, value);
        }
    }
    authorize(state, &headers)
}

/// A form field's text, or `None` when left empty.
pub(super) fn given(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

pub(super) fn turn_index(state: &AppState, text: &str) -> Result<u64, Response> {
    text.trim().parse().map_err(|_| {
        error_page(
            state,
            ApiError::bad_request(format!("turn index {text:?} is not a whole number")),
        )
    })
}

/// The token field of a write form (hidden by the script once a token is kept).
pub(super) fn token_field(id: &str) -> Markup {
    html! {
        label.token-field for=(id) { "Token" }
        input.token-field id=(id) type="password" name="token" autocomplete="off";
    }
}

#[derive(Deserialize, Default)]
struct Search {
    #[serde(default)]
    q: String,
    cursor: Option<String>,
}

/// Forks shown under each tree on the sessions page (the tree page, up to [`TREE_SHOWN`]).
const FORKS_SHOWN: usize = 3;
/// Trees (or hits) per page of the sessions page.
const TREES_SHOWN: usize = 25;
/// The sessions a family's tree page shows at most, breadth first.
const TREE_SHOWN: usize = 500;

/// Session `id`'s name for people (see [`named`]), read from the store; the id alone
/// if it cannot be read.
pub(super) async fn name_of(state: &Arc<AppState>, id: &SessionId) -> Markup {
    let read_id = id.clone();
    match read(state, move |store| store.info(&read_id)).await {
        Ok(info) => named(id, info.title.as_deref(), &info.branch),
        Err(_) => html! { a href=(format!("/ui/sessions/{id}")) { (id) } },
    }
}

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

/// Session `id`'s title, else its branch label (its id if it cannot be read).
pub(super) async fn label_of(state: &Arc<AppState>, id: &SessionId) -> String {
    let read_id = id.clone();
    match read(state, move |store| store.info(&read_id)).await {
        Ok(info) => info.title.unwrap_or(info.branch),
        Err(_) => id.to_string(),
    }
}

/// A session's name for people: its title, else its branch label, with the id after.
pub(super) fn named(id: &SessionId, title: Option<&str>, branch: &str) -> Markup {
    html! {
        a href=(format!("/ui/sessions/{id}")) { (title.unwrap_or(branch)) }
        " " span.id { (id) }
    }
}

/// `GET /?q=&cursor=`: the session trees, newest activity first, a page at a time, each
/// root with its fork count and its latest forks; or, with `q`, the search hits, each
/// linking to its turn.
async fn sessions(state: Shared, Query(search): Query<Search>) -> Page {
    let q = search.q.trim().to_string();
    let body = if q.is_empty() {
        trees_page(&state.0, search.cursor).await?
    } else {
        hits_page(&state.0, q.clone(), search.cursor).await?
    };
    Ok(page(
        &state.0,
        StatusCode::OK,
        "sessions",
        html! {
            h1 { "Sessions" }
            form method="get" action="/" role="search" {
                label for="q" { "Search" }
                input #q name="q" type="search" value=(q)
                    placeholder="words or \"a phrase\": contents, titles, branches, models";
                button type="submit" { "Search" }
            }
            (body)
        },
    ))
}

async fn trees_page(state: &Arc<AppState>, cursor: Option<String>) -> Result<Markup, Response> {
    let (roots, forks, total) = read(state, move |store| {
        let roots = store.sessions(&crate::SessionQuery {
            roots: true,
            limit: Some(TREES_SHOWN),
            cursor,
            ..Default::default()
        })?;
        let mut forks = Vec::new();
        for root in &roots.sessions {
            let family = store.sessions(&crate::SessionQuery {
                family: Some(root.session.to_string()),
                limit: Some(FORKS_SHOWN + 1),
                ..Default::default()
            })?;
            let latest: Vec<_> = family
                .sessions
                .into_iter()
                .filter(|s| s.session != root.session)
                .take(FORKS_SHOWN)
                .collect();
            forks.push(latest);
        }
        let total = store.count_sessions(&crate::SessionQuery::default())?;
        Ok((roots, forks, total))
    })
    .await?;
    Ok(html! {
        p.count { (total) " sessions in " (roots.total) " trees, newest activity first" }
        table.sessions {
            thead { tr {
                th { "Session" } th { "Principal" } th { "Turns" } th { "Forks" }
                th { "Models" } th { "Last activity" } th { "Tree" }
            } }
            tbody {
                @for (root, forks) in roots.sessions.iter().zip(&forks) {
                    tr.root {
                        td { (named(&root.session, root.title.as_deref(), &root.branch)) }
                        td { (root.principal.as_deref().unwrap_or("")) }
                        td.number { (root.length) }
                        td.number { (root.family.unwrap_or(0)) }
                        td { (root.models.join(", ")) }
                        td { (root.family_activity.as_deref().or(root.last_activity.as_deref()).unwrap_or("")) }
                        td { a href=(format!("/ui/sessions/{}/tree", root.session)) { "tree" } }
                    }
                    @for fork in forks {
                        tr.fork {
                            td { "↳ " (named(&fork.session, fork.title.as_deref(), &fork.branch))
                                 " at " (fork.forked_at_index.unwrap_or(0)) }
                            td { (fork.principal.as_deref().unwrap_or("")) }
                            td.number { (fork.length) " (" (fork.own_turns) " own)" }
                            td.number { (fork.forks) }
                            td { (fork.models.join(", ")) }
                            td { (fork.last_activity.as_deref().unwrap_or("")) }
                            td {}
                        }
                    }
                    @if root.family.unwrap_or(0) as usize > forks.len() {
                        tr.more { td colspan="7" {
                            a href=(format!("/ui/sessions/{}/tree", root.session)) {
                                "all " (root.family.unwrap_or(0)) " forks of this tree"
                            }
                        } }
                    }
                }
            }
        }
        nav.pager aria-label="pages of sessions" {
            a href="/" { "Newest" }
            @if let Some(next) = &roots.next {
                " " a rel="next" href=(format!("/?cursor={next}")) { "Older trees →" }
            }
        }
    })
}

async fn hits_page(
    state: &Arc<AppState>,
    q: String,
    cursor: Option<String>,
) -> Result<Markup, Response> {
    let text = q.clone();
    let found = read(state, move |store| {
        store.search(&crate::SearchQuery {
            text,
            limit: Some(TREES_SHOWN),
            cursor,
        })
    })
    .await?;
    let encoded: String = url::form_urlencoded::byte_serialize(q.as_bytes()).collect();
    Ok(html! {
        p.count { (found.total) " hits, best first" }
        @if found.hits.is_empty() {
            p { "Nothing matches. Every word must occur; put a phrase in quotes." }
        }
        ol.hits {
            @for hit in &found.hits {
                li {
                    @if let Some(index) = hit.index {
                        a href=(format!("/ui/sessions/{}?from={}#turn-{index}", hit.session,
                                        index / html::PAGE * html::PAGE)) {
                            (hit.title.as_deref().unwrap_or(&hit.branch)) ", turn " (index)
                        }
                        " " span.role { (hit.role.map_or("", |r| r.as_str())) }
                    } @else {
                        a href=(format!("/ui/sessions/{}", hit.session)) {
                            (hit.title.as_deref().unwrap_or(&hit.branch))
                        }
                        " " span.role { "session" }
                    }
                    " " span.id { (hit.session) }
                    p.snippet { (marked(&hit.snippet, &hit.highlights)) }
                }
            }
        }
        @if let Some(next) = &found.next {
            nav.pager aria-label="pages of hits" {
                a rel="next" href=(format!("/?q={encoded}&cursor={next}")) { "More hits →" }
            }
        }
    })
}

/// The words of a tree search, lower-cased.
fn words(query: &str) -> Vec<String> {
    query.split_whitespace().map(str::to_lowercase).collect()
}

/// `text` with the byte ranges `marks` in `<mark>`.
fn marked(text: &str, marks: &[(usize, usize)]) -> Markup {
    let mut at = 0;
    let mut parts = Vec::new();
    for &(start, end) in marks {
        if start < at
            || end > text.len()
            || !text.is_char_boundary(start)
            || !text.is_char_boundary(end)
        {
            continue;
        }
        parts.push((false, &text[at..start]));
        parts.push((true, &text[start..end]));
        at = end;
    }
    parts.push((false, &text[at..]));
    html! {
        @for (mark, part) in parts {
            @if mark { mark { (part) } } @else { (part) }
        }
    }
}

#[derive(Deserialize, Default)]
struct PageQuery {
    #[serde(default)]
    from: u64,
    /// Go to this turn: the page that holds it, at it.
    #[serde(default)]
    turn: String,
}

/// `GET /ui/sessions/{id}?from=`: a page of the session's turns, inherited ones marked
/// with the branch that owns them, a sibling pager at each fork point, and the actions.
async fn playback(state: Shared, Path(id): Path<String>, Query(at): Query<PageQuery>) -> Page {
    let state = state.0;
    let id = session_id(&state, &id)?;
    if let Some(turn) = given(&at.turn) {
        let index = turn_index(&state, &turn)?;
        let page = index / html::PAGE * html::PAGE;
        return Ok(
            Redirect::to(&format!("/ui/sessions/{id}?from={page}#turn-{index}")).into_response(),
        );
    }
    let from = at.from;
    let read_id = id.clone();
    let (info, turns, root, anchors) = read(&state, move |store| {
        let info = store.info(&read_id)?;
        if from > 0 && from >= info.length {
            return Err(crate::Error::IndexOutOfRange {
                session: read_id.to_string(),
                index: from.into(),
                valid: valid_range(info.length),
            });
        }
        let last = (from + html::PAGE).min(info.length).saturating_sub(1);
        let turns = if info.length == 0 {
            Vec::new()
        } else {
            store.load_range(&read_id, from, last)?
        };
        let figures = store.turn_figures(&turns)?;
        let root = store.tree(&info.fork_root)?;
        let anchors = store.anchors(&read_id)?;
        Ok((info, (turns, figures), root, anchors))
    })
    .await?;
    let (turns, figures) = turns;
    let points = html::sibling_points(&root, &id);
    let writable = state.config.token.is_some();
    let links = Links::Server;
    let base = format!("/ui/sessions/{id}");
    let pages = html! {
        @if info.length > html::PAGE {
            nav.pages aria-label="pages" {
                @if from > 0 {
                    a href=(format!("{base}?from={}", from.saturating_sub(html::PAGE))) { "‹ earlier turns" }
                }
                span { "turns " (from) "–" ((from + turns.len() as u64).saturating_sub(1)) " of " (info.length) }
                @if from + html::PAGE < info.length {
                    a href=(format!("{base}?from={}", from + html::PAGE)) { "later turns ›" }
                }
            }
        }
    };
    let family = family_ids(&root);
    let body = html! {
        h1 { (info.branch) " " small.meta { (info.session) } }
        p {
            a href=(format!("{base}/tree")) { "Fork tree" }
            @if let Some(parent) = &info.parent {
                " · " a href=(format!("/ui/diff?a={parent}&b={id}")) { "Diff against parent" }
            }
            " · " a href=(format!("/sessions/{id}/export?format=html")) download=(format!("{id}.html")) { "Export as HTML" }
        }
        (html::facts(&info, html::parent_branch(&root, &info).as_deref(), links))
        @if family.len() > 1 {
            form.inline method="get" action="/ui/diff" {
                input type="hidden" name="a" value=(id);
                label for="diff-b" { "Diff with " }
                select #diff-b name="b" {
                    @for (other, branch) in family.iter().filter(|(s, _)| *s != id) {
                        option value=(other) { (branch) " (" (other) ")" }
                    }
                }
                " " button type="submit" { "Diff" }
            }
        }
        @if info.length > 1 {
            form.inline.goto method="get" action=(base) {
                label for="goto-turn" { "Go to turn" }
                input #goto-turn name="turn" type="number" min="0" max=(info.length - 1) required;
                button type="submit" { "Go" }
            }
        }
        (pages)
        // The last page follows the session as it grows (the script asks for turns
        // past `data-next`); without script, a reload shows them.
        @let last_page = from + html::PAGE >= info.length;
        ol.turns start=(from)
            data-follow=[last_page.then(|| format!("{base}/after/"))]
            data-next=[last_page.then_some(info.length)] {
            (turn_items(&state, &info, &turns, &figures, &points, writable))
        }
        (pages)
        @if writable && last_page {
            (super::ui_compose::composer(&info, &state))
        }
        (session_actions(&info, &anchors, writable))
    };
    Ok(page(
        &state,
        StatusCode::OK,
        &format!("{} ({})", info.session, info.branch),
        body,
    ))
}

/// The list items of `turns` of session `info`, as playback shows them.
fn turn_items(
    state: &AppState,
    info: &SessionInfo,
    turns: &[Turn],
    figures: &[crate::TurnFigures],
    points: &html::SiblingPoints,
    writable: bool,
) -> Markup {
    let links = Links::Server;
    html! {
        @for turn in turns {
            @let before = match points.get(&turn.index) {
                Some((options, position)) => html::sibling_pager(turn.index, options, *position, links),
                None => html! {},
            };
            @let after = html! {
                @if let Some(f) = figures.iter().find(|f| f.index == turn.index) { (turn_figures(f)) }
                (turn_actions(info, turn, writable, state))
            };
            (html::turn_item(info, turn, links, before, after))
        }
    }
}

/// What the store measured of a turn a model wrote: tokens, latency, cost, and the
/// comparison it was a step of.
fn turn_figures(f: &crate::TurnFigures) -> Markup {
    let mut parts: Vec<String> = Vec::new();
    match (f.input_tokens, f.output_tokens) {
        (Some(i), Some(o)) => parts.push(format!("{i} in · {o} out tokens")),
        (Some(i), None) => parts.push(format!("{i} tokens in")),
        (None, Some(o)) => parts.push(format!("{o} tokens out")),
        (None, None) => {}
    }
    if let Some(ms) = f.latency_ms {
        parts.push(format!("{ms} ms"));
    }
    if let Some(usd) = f.cost_usd {
        parts.push(format!("${usd:.4}"));
    }
    html! {
        p.figures {
            (parts.join(" · "))
            @if let Some(c) = &f.comparison {
                @if !parts.is_empty() { " · " }
                a href=(format!("/ui/comparisons/{c}")) { "the model comparison" }
            }
        }
    }
}

/// `GET /ui/sessions/{id}/after/{index}`: the list items of the session's turns from
/// `index` on (a page at most), for an open playback page that follows the session as
/// it grows; 204 when there are none yet. `X-Forktrail-Next` says where to ask next.
async fn turns_after(
    state: Shared,
    Path((id, index)): Path<(String, u64)>,
) -> Result<Response, Response> {
    let state = state.0;
    let id = session_id(&state, &id)?;
    let read_id = id.clone();
    let (info, turns, root) = read(&state, move |store| {
        let info = store.info(&read_id)?;
        if index >= info.length {
            return Ok((info, (Vec::new(), Vec::new()), None));
        }
        let last = (index + html::PAGE).min(info.length) - 1;
        let turns = store.load_range(&read_id, index, last)?;
        let figures = store.turn_figures(&turns)?;
        let root = store.tree(&info.fork_root)?;
        Ok((info, (turns, figures), Some(root)))
    })
    .await?;
    let (turns, figures) = turns;
    let next = index + turns.len() as u64;
    let header = [("x-forktrail-next", next.to_string())];
    let Some(root) = root else {
        return Ok((StatusCode::NO_CONTENT, header).into_response());
    };
    let points = html::sibling_points(&root, &id);
    let writable = state.config.token.is_some();
    let items = turn_items(&state, &info, &turns, &figures, &points, writable);
    let content_type = [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")];
    Ok((header, content_type, items.into_string()).into_response())
}

/// The valid indices of a session of `length` turns, as errors name them.
pub(super) fn valid_range(length: u64) -> String {
    match length {
        0 => "none: the session has no turns".into(),
        n => format!("0..={}", n - 1),
    }
}

/// Every session of a family, in tree order, with its branch label.
fn family_ids(root: &TreeNode) -> Vec<(SessionId, String)> {
    let mut out = vec![(root.session.clone(), root.branch.clone())];
    for child in &root.children {
        out.extend(family_ids(child));
    }
    out
}

/// The model endpoints a what-if may use: the server's `--model-endpoint`s, else the
/// default one (`$OPENAI_BASE_URL`, else the local Ollama port).
pub(super) fn endpoints(state: &AppState) -> Vec<String> {
    if !state.config.model_endpoints.is_empty() {
        return state.config.model_endpoints.clone();
    }
    vec![std::env::var("OPENAI_BASE_URL")
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| crate::DEFAULT_ENDPOINT.to_string())]
}

/// The endpoint a form chose (the first offered when none), if the server offers it.
pub(super) fn offered_endpoint(state: &AppState, typed: &str) -> Result<String, Response> {
    let allowed = endpoints(state);
    let endpoint = given(typed).unwrap_or_else(|| allowed[0].clone());
    if allowed.contains(&endpoint) {
        return Ok(endpoint);
    }
    Err(error_page(
        state,
        super::ui_compare::not_offered(&endpoint, &allowed),
    ))
}

/// A turn's actions: its provenance, and (on a server that takes writes) Fork from
/// here, What-if from here and Compare models from here (`ui_compare.rs`).
fn turn_actions(info: &SessionInfo, turn: &Turn, writable: bool, state: &AppState) -> Markup {
    let i = turn.index;
    let id = &info.session;
    // A what-if answers this turn again when it is the model's, else answers after it.
    let what_if_at = if turn.role == crate::Role::Assistant {
        i
    } else {
        i + 1
    };
    html! {
        div.actions {
            a.action href=(format!("/ui/sessions/{id}/turns/{i}")) { "Provenance" }
            @if writable {
                @if turn.role == crate::Role::User {
                    " " (super::ui_compose::edit_form(info, turn, state))
                }
                " "
                details.action.fork {
                    summary { "Fork from here" }
                    form.write method="post" action=(format!("/ui/sessions/{id}/fork")) {
                        input type="hidden" name="at" value=(i + 1);
                        label for=(format!("fork-label-{i}")) { "Label" }
                        input id=(format!("fork-label-{i}")) name="label" placeholder="fork-…";
                        label for=(format!("fork-reason-{i}")) { "Reason" }
                        input id=(format!("fork-reason-{i}")) name="reason";
                        (token_field(&format!("fork-token-{i}")))
                        button type="submit" { "Fork after turn " (i) }
                    }
                }
                details.action.what-if {
                    summary { "What-if from here" }
                    form.write method="post" action=(format!("/ui/sessions/{id}/whatif")) {
                        input type="hidden" name="at" value=(what_if_at);
                        label for=(format!("wi-model-{i}")) { "Model" }
                        input id=(format!("wi-model-{i}")) name="model"
                            placeholder="the last assistant turn's model";
                        label for=(format!("wi-system-{i}")) { "System prompt" }
                        textarea id=(format!("wi-system-{i}")) name="system_prompt"
                            placeholder="keep the session's" {}
                        label for=(format!("wi-tools-{i}")) { "Tools (JSON)" }
                        textarea id=(format!("wi-tools-{i}")) name="tools"
                            placeholder="keep the session's" {}
                        label for=(format!("wi-max-{i}")) { "Max tokens" }
                        input id=(format!("wi-max-{i}")) name="max_tokens" type="number" min="1"
                            placeholder="the endpoint's";
                        label for=(format!("wi-endpoint-{i}")) { "Endpoint" }
                        select id=(format!("wi-endpoint-{i}")) name="endpoint" {
                            @for e in endpoints(state) { option value=(e) { (e) } }
                        }
                        label for=(format!("wi-budget-{i}")) { "Budget (USD)" }
                        input id=(format!("wi-budget-{i}")) name="budget"
                            placeholder="required off this machine";
                        label for=(format!("wi-price-{i}")) { "Price (USD per million tokens, IN/OUT)" }
                        input id=(format!("wi-price-{i}")) name="price" placeholder="3/15";
                        (token_field(&format!("wi-token-{i}")))
                        button type="submit" {
                            @if what_if_at == i { "Estimate a new answer to turn " (i) }
                            @else { "Estimate an answer after turn " (i) }
                        }
                    }
                }
                // A comparison needs at least one turn of context.
                @if what_if_at > 0 {
                    a.action.compare href=(format!("/ui/sessions/{id}/compare?at={what_if_at}")) {
                        "Compare models from here"
                    }
                }
            }
        }
    }
}

/// The session's own actions: anchors, merge-back, delete.
fn session_actions(info: &SessionInfo, anchors: &[crate::AnchorInfo], writable: bool) -> Markup {
    let id = &info.session;
    html! {
        section.session-actions {
            h2 { "Anchors" }
            @if anchors.is_empty() { p.meta { "No anchors." } } @else {
                ul { @for a in anchors {
                    li { strong { (a.name) } " at turn " (a.at_index)
                        @if a.session != *id { " (set on " span.id { (a.session) } ")" } }
                } }
            }
            @if writable {
                form.write method="post" action=(format!("/ui/sessions/{id}/anchors")) {
                    label for="anchor-name" { "Name" }
                    input #anchor-name name="name" required;
                    (token_field("anchor-token"))
                    button type="submit" { "Anchor at turn " (info.length) }
                }
                @if info.parent.is_some() {
                    h2 { "Merge back" }
                    form.write method="post" action=(format!("/ui/sessions/{id}/merge")) {
                        label for="merge-summary" { "Summary" }
                        textarea #merge-summary name="summary" placeholder="the last assistant turn" {}
                        (token_field("merge-token"))
                        button type="submit" { "Preview the merge" }
                    }
                }
                h2 { "Delete" }
                form.write method="post" action=(format!("/ui/sessions/{id}/delete")) {
                    (token_field("delete-token"))
                    button type="submit" { "Preview the delete" }
                }
            }
        }
    }
}

#[derive(Deserialize, Default)]
struct TreeQuery {
    #[serde(default)]
    q: String,
    /// `user` or `all`: list each branch's own turns (of that role) under it.
    #[serde(default)]
    turns: String,
}

/// `GET /ui/sessions/{id}/tree?q=&turns=`: the fork family of the session from its
/// root, each branch foldable; a search unfolds only the branches that match.
async fn tree(state: Shared, Path(id): Path<String>, Query(view): Query<TreeQuery>) -> Page {
    let state = state.0;
    let id = session_id(&state, &id)?;
    let listing = match view.turns.as_str() {
        "" | "none" => None,
        "user" => Some(true),
        "all" => Some(false),
        other => {
            return Err(error_page(
                &state,
                ApiError::bad_request(format!("turns={other:?}: expected none, user or all")),
            ))
        }
    };
    let search = !view.q.trim().is_empty();
    let read_id = id.clone();
    let (root, turns, family) = read(&state, move |store| {
        let root_id = store.info(&read_id)?.fork_root;
        let root = store.tree_within(&root_id, TREE_SHOWN)?;
        // Counted only when the tree was cut: how many the whole family holds.
        let family = match cut(&root) {
            true => Some(store.count_sessions(&crate::SessionQuery {
                family: Some(root_id.to_string()),
                ..Default::default()
            })?),
            false => None,
        };
        let turns = match (listing, search) {
            (Some(user_only), _) => html::family_turns(store, &root_id, user_only)?,
            (None, true) => html::family_turns(store, &root_id, false)?,
            (None, false) => html::OwnTurns::new(),
        };
        Ok((root, turns, family))
    })
    .await?;
    let words = words(&view.q);
    // A branch matches on its facts, or on the content of its own turns.
    let hits: Option<HashSet<SessionId>> = search.then(|| {
        let mut hits = HashSet::new();
        collect_hits(&root, &words, &turns, &mut hits);
        hits
    });
    let shown = if listing.is_some() {
        turns
    } else {
        html::OwnTurns::new()
    };
    let tree_view = TreeView {
        current: &id,
        links: Links::Server,
        hits: hits.as_ref(),
        turns: &shown,
    };
    let matching = hits.as_ref().map(HashSet::len);
    let selected = |v: &str| view.turns == v || (v == "none" && view.turns.is_empty());
    Ok(page(
        &state,
        StatusCode::OK,
        &format!("tree of {}", root.branch),
        html! {
            h1 { "Fork tree of " (root.branch) }
            form method="get" role="search" {
                label for="tree-q" { "Search" }
                input #tree-q name="q" type="search" value=(view.q) placeholder="branch, model or content";
                label for="tree-turns" { "Turns" }
                select #tree-turns name="turns" {
                    option value="none" selected[selected("none")] { "branches only" }
                    option value="user" selected[selected("user")] { "user turns only" }
                    option value="all" selected[selected("all")] { "all turns" }
                }
                button type="submit" { "Show" }
            }
            p.count {
                (count(&root))
                @if let Some(family) = family { " of " (family) " sessions, breadth first" }
                @else { " sessions" }
                @if let Some(n) = matching { ", " (n) " matching (unfolded)" }
            }
            (html::drawing(&root, &id, Links::Server))
            h2 #outline { "Outline" }
            (html::tree(&root, &tree_view))
        },
    ))
}

fn count(node: &TreeNode) -> usize {
    1 + node.children.iter().map(count).sum::<usize>()
}

/// Whether a tree left children out anywhere.
fn cut(node: &TreeNode) -> bool {
    node.more_children > 0 || node.children.iter().any(cut)
}

/// The branches under `node` that match the search words.
fn collect_hits(
    node: &TreeNode,
    words: &[String],
    turns: &html::OwnTurns,
    hits: &mut HashSet<SessionId>,
) {
    let content = turns.get(&node.session).is_some_and(|t| {
        t.iter().any(|(_, _, c)| {
            let c = c.to_lowercase();
            words.iter().all(|w| c.contains(w.as_str()))
        })
    });
    if content || html::node_matches(node, words) {
        hits.insert(node.session.clone());
    }
    for child in &node.children {
        collect_hits(child, words, turns, hits);
    }
}

/// `GET /ui/sessions/{id}/turns/{index}`: who or what produced the turn, through which
/// forks it reached this session (the shipped audit query), and its digest chain.
async fn provenance(state: Shared, Path((id, index)): Path<(String, String)>) -> Page {
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
            h2 { "Origin (queries/audit-turn-origin.rq)" }
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

fn term_text(term: &Term) -> String {
    match term {
        Term::Literal(l) => l.value().to_string(),
        Term::NamedNode(n) => n.as_str().to_string(),
        other => other.to_string(),
    }
}

#[derive(Deserialize)]
struct ForkForm {
    at: String,
    #[serde(default)]
    label: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/fork`: fork at the form's turn; on to the new branch.
async fn fork(state: Shared, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Page {
    let state = state.0;
    let f: ForkForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let at = turn_index(&state, &f.at)?;
    let options = ForkOptions {
        at: Some(at),
        label: given(&f.label),
        reason: given(&f.reason),
        ..Default::default()
    };
    let plan = write(&state, move |store| store.fork(&id, options)).await?;
    // On to the new branch's end, where the composer continues it.
    let page = plan.forked_at_index.saturating_sub(1) / html::PAGE * html::PAGE;
    Ok(Redirect::to(&format!(
        "/ui/sessions/{}?from={page}#composer",
        plan.session
    ))
    .into_response())
}

#[derive(Deserialize)]
struct WhatIfForm {
    at: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    system_prompt: String,
    #[serde(default)]
    tools: String,
    #[serde(default)]
    endpoint: String,
    #[serde(default)]
    max_tokens: String,
    #[serde(default)]
    budget: String,
    #[serde(default)]
    price: String,
    /// Empty: show the estimate; set: start the job.
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/whatif`: first the dry run's estimate, then (confirmed) the
/// job, followed on its own page until it ends.
async fn what_if(state: Shared, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Page {
    let state = state.0;
    let f: WhatIfForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let at = turn_index(&state, &f.at)?;
    let endpoint = offered_endpoint(&state, &f.endpoint)?;
    let tools = match given(&f.tools) {
        None => None,
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
            error_page(
                &state,
                ApiError::bad_request(format!("the tools are not JSON: {e}")),
            )
        })?),
    };
    let max_tokens = match given(&f.max_tokens) {
        None => None,
        Some(text) => Some(text.parse::<u32>().map_err(|_| {
            error_page(
                &state,
                ApiError::bad_request(format!("max tokens {text:?} is not a whole number")),
            )
        })?),
    };
    let bad = |why: String| error_page(&state, ApiError::bad_request(why));
    let budget_usd = match given(&f.budget) {
        None => None,
        Some(text) => Some(
            text.trim_start_matches('$')
                .parse::<f64>()
                .map_err(|_| bad(format!("budget {text:?} is not an amount of dollars")))?,
        ),
    };
    let price = match given(&f.price) {
        None => None,
        Some(text) => Some(
            text.parse::<crate::Price>()
                .map_err(|e| bad(e.to_string()))?,
        ),
    };
    let options = RegenerateOptions {
        at,
        max_tokens,
        budget_usd,
        price,
        model: given(&f.model),
        system_prompt: given(&f.system_prompt),
        tools,
        endpoint: Some(endpoint.clone()),
        allow_remote: state.config.allow_remote_models,
        dry_run: f.confirm.is_empty(),
        ..Default::default()
    };
    if options.dry_run {
        let plan_id = id.clone();
        let plan = write(&state, move |store| {
            store.plan_regeneration(&plan_id, &options)
        })
        .await?;
        return Ok(page(
            &state,
            StatusCode::OK,
            "what-if estimate",
            html! {
                h1 { "What-if on " (name_of(&state, &id).await) " at turn " (plan.at) }
                dl.facts.estimate {
                    dt { "Model" } dd { (plan.model) }
                    dt { "Endpoint" } dd { (plan.endpoint) }
                    dt { "Messages sent" } dd { (plan.messages) }
                    dt { "Estimated tokens" } dd.tokens { (plan.estimated_tokens) " (" (plan.estimate_method) ")" }
                    dt { "Swapped" } dd { @if plan.swapped.is_empty() { "nothing" } @else { (plan.swapped.join(", ")) } }
                    @if let Some(upper) = plan.upper_usd {
                        dt { "Costs at most" } dd.cost { (format!("${upper:.6}")) }
                    }
                    @if let Some(budget) = plan.budget_usd {
                        dt { "Budget" } dd { (format!("${budget:.6}")) }
                    }
                }
                details { summary { "The exact request" } pre { (serde_json::to_string_pretty(&plan.request).unwrap_or_default()) } }
                form.write method="post" action=(format!("/ui/sessions/{id}/whatif")) {
                    input type="hidden" name="at" value=(f.at);
                    input type="hidden" name="model" value=(f.model);
                    input type="hidden" name="system_prompt" value=(f.system_prompt);
                    input type="hidden" name="tools" value=(f.tools);
                    input type="hidden" name="endpoint" value=(endpoint);
                    input type="hidden" name="max_tokens" value=(f.max_tokens);
                    input type="hidden" name="budget" value=(f.budget);
                    input type="hidden" name="price" value=(f.price);
                    (token_field("confirm-token"))
                    button type="submit" name="confirm" value="1" { "Run it" }
                }
            },
        ));
    }
    let job = super::rest::start_regeneration(&state, id, options)
        .await
        .map_err(|e| error_page(&state, e))?;
    Ok(Redirect::to(&format!("/ui/jobs/{}", job.job)).into_response())
}

/// `GET /ui/jobs/{job}`: a what-if job, reloading itself each second while it runs.
async fn job(state: Shared, Path(job): Path<String>) -> Page {
    let state = state.0;
    let id = job.clone();
    let job: Job = read(&state, move |store| store.job(&id)).await?;
    let running = job.status == JobStatus::Running;
    let mut response = page(
        &state,
        StatusCode::OK,
        &format!("job {}", job.job),
        html! {
            h1 { "What-if job " code { (job.job) } }
            p { "Status: " strong #job-status data-status=(job.status.as_str()) { (job.status.as_str()) }
                @if running { span.meta { " (this page reloads each second)" } } }
            dl.facts {
                dt { "Session" } dd { (name_of(&state, &job.session).await) " at turn " (job.at) }
                dt { "Model" } dd { (job.model) }
                dt { "Endpoint" } dd { (job.endpoint) }
                @if let Some(fork) = &job.fork {
                    dt { "Answer" } dd { a #job-fork href=(format!("/ui/sessions/{fork}?from={}#turn-{}", job.at / html::PAGE * html::PAGE, job.at)) { "turn " (job.at) " of " (label_of(&state, fork).await) }
                        " " span.id { (fork) }
                        " · " a href=(format!("/ui/diff?a={}&b={fork}", job.session)) { "diff" } }
                }
                @if let (Some(i), Some(o)) = (job.input_tokens, job.output_tokens) {
                    dt { "Tokens" } dd { (i) " in, " (o) " out" }
                }
                @if let Some(ms) = job.latency_ms { dt { "Latency" } dd { (ms) " ms" } }
                @if let Some(e) = &job.error { dt { "Error" } dd.error { (e) } }
            }
            @if job.status == JobStatus::Failed {
                (job_failed(&state, &job))
            }
            @if running && state.config.token.is_some() {
                form.write method="post" action=(format!("/ui/jobs/{}/cancel", job.job)) {
                    (token_field("cancel-token"))
                    button type="submit" { "Cancel" }
                }
            }
        },
    );
    if running {
        response
            .headers_mut()
            .insert(header::REFRESH, HeaderValue::from_static("1"));
    }
    Ok(response)
}

/// What a failed job's error means, in words, and the ways on: the same what-if
/// again (its estimate first), or back to the turn it started from.
fn job_failed(state: &AppState, job: &Job) -> Markup {
    let error = job.error.as_deref().unwrap_or("");
    let lower = error.to_lowercase();
    let why = if lower.contains("connection refused") || lower.contains("error trying to connect") {
        format!(
            "Nothing answered at {}: the model server is not running there, or listens \
             elsewhere.",
            job.endpoint
        )
    } else if lower.contains("timed out") || lower.contains("timeout") {
        "The model did not answer in time.".to_string()
    } else if lower.contains("status") || lower.contains("http") {
        format!("The endpoint {} refused the request.", job.endpoint)
    } else {
        "The model call failed.".to_string()
    };
    let back = job.at.saturating_sub(1);
    let back_page = back / html::PAGE * html::PAGE;
    html! {
        section.failed {
            h2 { "What failed" }
            p { (why) " No turn was written." }
            @if state.config.token.is_some() {
                form.write method="post" action=(format!("/ui/sessions/{}/whatif", job.session)) {
                    input type="hidden" name="at" value=(job.at);
                    input type="hidden" name="model" value=(job.model);
                    label for="retry-endpoint" { "Endpoint" }
                    select #retry-endpoint name="endpoint" {
                        @for e in endpoints(state) { option value=(e) selected[e == job.endpoint] { (e) } }
                    }
                    (token_field("retry-token"))
                    button type="submit" { "Try again" }
                }
            }
            p { a href=(format!("/ui/sessions/{}?from={back_page}#turn-{back}", job.session)) { "Back to turn " (back) } }
        }
    }
}

#[derive(Deserialize)]
struct TokenForm {
    #[serde(default)]
    token: String,
}

/// `POST /ui/jobs/{job}/cancel`.
async fn cancel(state: Shared, Path(job): Path<String>, headers: HeaderMap, body: Bytes) -> Page {
    let state = state.0;
    let f: TokenForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = job.clone();
    write(&state, move |store| store.cancel_job(&id)).await?;
    Ok(Redirect::to(&format!("/ui/jobs/{job}")).into_response())
}

#[derive(Deserialize)]
struct AnchorForm {
    name: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/anchors`: a named fork point at the session's length.
async fn anchor(state: Shared, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Page {
    let state = state.0;
    let f: AnchorForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let session = id.clone();
    write(&state, move |store| {
        store.anchor(&session, f.name.trim(), None)
    })
    .await?;
    Ok(Redirect::to(&format!("/ui/sessions/{id}")).into_response())
}

#[derive(Deserialize)]
struct MergeForm {
    #[serde(default)]
    summary: String,
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/merge`: the preview (what would be appended where), then,
/// confirmed, the merge.
async fn merge(state: Shared, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Page {
    let state = state.0;
    let f: MergeForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let options = MergeOptions {
        into: None,
        summary: given(&f.summary),
        dry_run: f.confirm.is_empty(),
    };
    let dry_run = options.dry_run;
    let child = id.clone();
    let plan = write(&state, move |store| store.merge(&child, options)).await?;
    if !dry_run {
        let to = format!(
            "/ui/sessions/{}?from={}#turn-{}",
            plan.into,
            plan.index / html::PAGE * html::PAGE,
            plan.index
        );
        return Ok(Redirect::to(&to).into_response());
    }
    Ok(page(
        &state,
        StatusCode::OK,
        "merge preview",
        html! {
            h1 { "Merge " (name_of(&state, &plan.child).await) " back" }
            p { "Appends turn " (plan.index) " to " (name_of(&state, &plan.into).await)
                ", covering turns " (plan.first) "–" (plan.last) " of the fork (" code { (plan.reference) } "):" }
            (html::content(&plan.content))
            form.write method="post" action=(format!("/ui/sessions/{id}/merge")) {
                input type="hidden" name="summary" value=(f.summary);
                (token_field("merge-confirm-token"))
                button type="submit" name="confirm" value="1" { "Merge" }
            }
        },
    ))
}

#[derive(Deserialize)]
struct DeleteForm {
    #[serde(default)]
    cascade: String,
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/delete`: the preview (what would go, or the children it is
/// refused on, with the cascade offered), then, confirmed, the delete.
async fn delete(state: Shared, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Page {
    let state = state.0;
    let f: DeleteForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let cascade = !f.cascade.is_empty();
    let options = DeleteOptions {
        cascade,
        dry_run: f.confirm.is_empty(),
    };
    let target = id.clone();
    let outcome = writing(&state, move |store| store.delete_with(&target, options)).await;
    let form_for = |cascade: bool, confirm: bool, label: &str| {
        html! {
            form.write method="post" action=(format!("/ui/sessions/{id}/delete")) {
                @if cascade { input type="hidden" name="cascade" value="1"; }
                (token_field(if confirm { "delete-confirm-token" } else { "delete-cascade-token" }))
                button type="submit" name=[confirm.then_some("confirm")] value=[confirm.then_some("1")] { (label) }
            }
        }
    };
    let name = label_of(&state, &id).await;
    let body = match outcome {
        Ok(_) if !options.dry_run => return Ok(Redirect::to("/").into_response()),
        Ok(plan) => html! {
            h1 { "Delete " (name) "?" }
            p.meta { "Session " span.id { (id) } }
            p { "This deletes " (plan.deleted.len()) " session" @if plan.deleted.len() != 1 { "s" }
                " and " (plan.own_turns) " turns they own:" }
            ul.deleted { @for s in &plan.sessions { li { (s.branch) " " span.id { (s.session) } ", " (s.own_turns) " own turns" } } }
            (form_for(cascade, true, "Delete"))
        },
        Err(e) if e.code == "has_children" => {
            let children = write(&state, {
                let id = id.clone();
                move |store| store.branches(&id)
            })
            .await?;
            html! {
                h1 { "Delete " (name) "?" }
                p.meta { "Session " span.id { (id) } }
                p.error data-code=(e.code) { "Refused: it has " (children.len()) " children, which would lose their history:" }
                ul.children { @for c in &children {
                    li { a href=(format!("/ui/sessions/{}", c.session)) { (c.branch) } " " span.id { (c.session) } }
                } }
                (form_for(true, false, "Preview deleting the whole subtree"))
            }
        }
        Err(e) => return Err(error_page(&state, e)),
    };
    Ok(page(&state, StatusCode::OK, "delete preview", body))
}

/// Rows shown on the SPARQL page; the endpoint serves whole results.
const SHOWN_ROWS: usize = 1000;

/// `GET /ui/sparql?query=` runs a query typed; `GET /ui/sparql?name=` opens a shipped
/// one, with a field for each input its header names (`in_<input>`, read as `--bind`
/// reads a value), and `&run=1` runs it with them bound as RDF terms. Results as a
/// table, with the endpoint's limits (time, cost, slots). Every state is its URL.
async fn sparql(state: Shared, Query(q): Query<HashMap<String, String>>) -> Page {
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
    super::sparql::limited(state, false, move |store, cancel| {
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
