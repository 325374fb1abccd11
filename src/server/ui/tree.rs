//! A family's tree page: every session of it, breadth first, searchable.

use super::sessions::words;
use super::shell::{error_page, page, read, session_id, Page};
use crate::html::{self, DrawView, Links, TreeView};
use crate::model::{SessionId, TreeNode};
use crate::server::{ApiError, Shared};
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use maud::html;
use serde::Deserialize;
use std::collections::{BTreeSet, HashSet};

/// The sessions a family's tree page shows at most, breadth first.
const TREE_SHOWN: usize = 500;

#[derive(Deserialize, Default)]
pub(super) struct TreeQuery {
    #[serde(default)]
    q: String,
    /// `user` or `all`: list each branch's own turns (of that role) under it.
    #[serde(default)]
    turns: String,
    /// Branches unfolded in the drawing (all their children drawn), by id, comma
    /// separated (ids hold no comma).
    #[serde(default)]
    open: String,
}

impl TreeQuery {
    /// The unfolded branches asked for; what is no session id is no branch, and left out.
    fn unfolded(&self) -> BTreeSet<SessionId> {
        self.open
            .split(',')
            .filter_map(|id| SessionId::new(id.trim()).ok())
            .collect()
    }

    /// The page at `id` as asked for, with `open` unfolded instead.
    fn address(&self, id: &SessionId, open: &BTreeSet<SessionId>) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if !self.q.is_empty() {
            query.append_pair("q", &self.q);
        }
        if !self.turns.is_empty() {
            query.append_pair("turns", &self.turns);
        }
        if !open.is_empty() {
            let ids: Vec<&str> = open.iter().map(SessionId::as_str).collect();
            query.append_pair("open", &ids.join(","));
        }
        match query.finish() {
            q if q.is_empty() => format!("/ui/sessions/{id}/tree"),
            q => format!("/ui/sessions/{id}/tree?{q}"),
        }
    }
}

/// `GET /ui/sessions/{id}/tree?q=&turns=&open=`: the fork family of the session from
/// its root, drawn and outlined, each branch foldable; a search unfolds only the
/// branches that match, and draws the path to them; `open` unfolds branches of the
/// drawing.
pub(super) async fn tree(
    state: Shared,
    Path(id): Path<String>,
    Query(view): Query<TreeQuery>,
) -> Page {
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
    // Only the family's branches unfold, and a page's worth of them at most: every
    // link of the drawing carries the set.
    let mut family_ids = HashSet::new();
    ids_of(&root, &mut family_ids);
    let open: BTreeSet<SessionId> = view
        .unfolded()
        .into_iter()
        .filter(|s| family_ids.contains(s))
        .take(OPEN_AT_MOST)
        .collect();
    let address = |open: &BTreeSet<SessionId>| view.address(&id, open);
    let draw_view = DrawView {
        current: &id,
        links: Links::Server,
        hits: hits.as_ref(),
        open: &open,
        address: &address,
    };
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
                @if matching.is_some_and(|n| n > html::HITS_DRAWN) {
                    ", the first " (html::HITS_DRAWN) " drawn"
                }
            }
            @if !open.is_empty() {
                p.unfolded {
                    (open.len()) " branch" @if open.len() != 1 { "es" } " unfolded in the drawing · "
                    a href=(address(&BTreeSet::new())) { "fold them all" }
                }
            }
            (html::drawing(&root, &draw_view))
            h2 #outline { "Outline" }
            (html::tree(&root, &tree_view))
        },
    ))
}

/// The branches unfolded at most (what `open=` asks past it is left folded).
const OPEN_AT_MOST: usize = 64;

/// Every session of the tree from `node`.
fn ids_of<'t>(node: &'t TreeNode, out: &mut HashSet<&'t SessionId>) {
    out.insert(&node.session);
    for child in &node.children {
        ids_of(child, out);
    }
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
