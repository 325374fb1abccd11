//! The sessions page: the session trees a page at a time, or the search hits.

use super::shell::{named, page, read, Page};
use crate::html::{self};
use crate::server::{AppState, Shared};
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize, Default)]
pub(super) struct Search {
    #[serde(default)]
    q: String,
    cursor: Option<String>,
}

/// Forks shown under each tree on the sessions page (the tree page, up to [`TREE_SHOWN`]).
const FORKS_SHOWN: usize = 3;
/// Trees (or hits) per page of the sessions page.
const TREES_SHOWN: usize = 25;

/// `GET /?q=&cursor=`: the session trees, newest activity first, a page at a time, each
/// root with its fork count and its latest forks; or, with `q`, the search hits, each
/// linking to its turn.
pub(super) async fn sessions(state: Shared, Query(search): Query<Search>) -> Page {
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
        p.count { (plural(total, "session")) " in " (plural(roots.total, "tree")) ", newest activity first" }
        div.scroll {
        table.sessions {
            thead { tr {
                th scope="col" { "Session" } th scope="col" { "Principal" } th scope="col" { "Turns" }
                th scope="col" { "Forks" } th scope="col" { "Models" } th scope="col" { "Last activity" }
                th scope="col" { "Tree" }
            } }
            tbody {
                @for (root, forks) in roots.sessions.iter().zip(&forks) {
                    tr.root {
                        td { (named(&root.session, root.title.as_deref(), &root.branch)) }
                        td data-label="Principal" { (root.principal.as_deref().unwrap_or("")) }
                        td.number data-label="Turns" { (root.length) }
                        td.number data-label="Forks" { (root.family.unwrap_or(0)) }
                        td data-label="Models" { (models(&root.models)) }
                        td data-label="Last activity" { @if let Some(at) = root.family_activity.as_deref().or(root.last_activity.as_deref()) { (html::when(at)) } }
                        td { a href=(format!("/ui/sessions/{}/tree", root.session)) { "tree" } }
                    }
                    @for fork in forks {
                        tr.fork {
                            td { "↳ " (named(&fork.session, fork.title.as_deref(), &fork.branch))
                                 " at " (fork.forked_at_index.unwrap_or(0)) }
                            td data-label="Principal" { (fork.principal.as_deref().unwrap_or("")) }
                            td.number data-label="Turns" { (fork.length) " (" (fork.own_turns) " own)" }
                            td.number data-label="Forks" { (fork.forks) }
                            td data-label="Models" { (models(&fork.models)) }
                            td data-label="Last activity" { @if let Some(at) = fork.last_activity.as_deref() { (html::when(at)) } }
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
        p.count { (plural(found.total, "hit")) @if found.total > 1 { ", best first" } }
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
pub(super) fn words(query: &str) -> Vec<String> {
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

/// `n` and `noun`, in the plural unless `n` is 1.
pub(super) fn plural(n: u64, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// Model names, each kept whole on its line (a name breaks at no hyphen).
fn models(names: &[String]) -> Markup {
    html! {
        @for (n, name) in names.iter().enumerate() {
            @if n > 0 { ", " }
            span.whole { (name) }
        }
    }
}
