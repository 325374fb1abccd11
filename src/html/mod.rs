//! HTML views of sessions, shared by the web UI of `forktrail serve` and by
//! `export --format html`: maud templates (checked and escaped at compile time) and one
//! stylesheet. Nothing here runs script: every stored string is escaped text.

use crate::error::Result;
use crate::model::{Role, SessionId, SessionInfo, TreeNode, Turn};
use crate::store::Store;
use maud::{html, Markup, PreEscaped, DOCTYPE};

mod drawing;
pub(crate) use drawing::{drawing, DrawView, HITS_DRAWN};
use std::collections::{HashMap, HashSet};

/// The one stylesheet (linked by the server's pages, inlined in exported files).
pub(crate) const STYLE: &str = include_str!("style.css");

/// Turns per page of playback in the server (exports hold every turn).
pub(crate) const PAGE: u64 = 200;

/// Where links point: the server's pages, or anchors inside one exported file (which
/// holds a single session: links to others are left out).
#[derive(Clone, Copy)]
pub(crate) enum Links<'a> {
    Server,
    File(&'a SessionId),
}

impl Links<'_> {
    pub(crate) fn session(self, id: &SessionId) -> Option<String> {
        match self {
            Links::Server => Some(format!("/ui/sessions/{id}")),
            Links::File(only) => (only == id).then(|| "#playback".to_string()),
        }
    }

    /// A what-if comparison's page (none inside an exported file).
    pub(crate) fn comparison(self, id: &str) -> Option<String> {
        match self {
            Links::Server => Some(format!("/ui/comparisons/{id}")),
            Links::File(_) => None,
        }
    }

    /// Where a branch opens: at its fork point (its first own turn, or the composer
    /// at its end when it has none), a root at its start.
    pub(crate) fn branch(self, node: &TreeNode) -> Option<String> {
        match (self, node.forked_at_index) {
            (Links::Server, Some(at)) if at < node.length => self.turn(&node.session, at),
            (Links::Server, Some(_)) if node.length > 0 => Some(format!(
                "/ui/sessions/{}?from={}#composer",
                node.session,
                (node.length - 1) / PAGE * PAGE
            )),
            _ => self.session(&node.session),
        }
    }

    /// A turn of a session's playback: the page that holds it, at its anchor.
    pub(crate) fn turn(self, id: &SessionId, index: u64) -> Option<String> {
        match self {
            Links::Server => Some(format!(
                "/ui/sessions/{id}?from={}#turn-{index}",
                index / PAGE * PAGE
            )),
            Links::File(only) => (only == id).then(|| format!("#turn-{index}")),
        }
    }
}

/// A link when there is somewhere to go, else the text alone.
fn link(href: Option<String>, text: Markup) -> Markup {
    match href {
        Some(href) => html! { a href=(href) { (text) } },
        None => text,
    }
}

/// How a page gets its style and script.
pub(crate) enum Assets {
    /// The server's own files (`/ui/style.css`, `/ui/app.js`): nothing inline, so the
    /// Content-Security-Policy can be `default-src 'self'`.
    Linked { header: Markup },
    /// One self-contained file: the stylesheet inline, no script.
    Inline,
}

/// A whole HTML document.
pub(crate) fn document(title: &str, assets: Assets, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · forktrail" }
                @match &assets {
                    Assets::Linked { .. } => {
                        link rel="stylesheet" href="/ui/style.css";
                        script src="/ui/app.js" defer {}
                    }
                    Assets::Inline => style { (PreEscaped(STYLE)) }
                }
            }
            body {
                a.skip href="#main" { "Skip to the content" }
                @match assets {
                    Assets::Linked { header } => header { (header) },
                    Assets::Inline => header { "forktrail export" },
                }
                main #main tabindex="-1" { (body) }
            }
        }
    }
    .into_string()
}

/// The facts of a session: branch, title, parent, sizes, head digest.
pub(crate) fn facts(info: &SessionInfo, parent_branch: Option<&str>, links: Links<'_>) -> Markup {
    html! {
        dl.facts {
            dt { "Branch" } dd { (info.branch) }
            @if let Some(t) = &info.title { dt { "Title" } dd { (t) } }
            @if let Some(p) = &info.principal { dt { "Principal" } dd { (p) } }
            @if let Some(p) = &info.parent {
                dt { "Forked from" }
                dd {
                    (link(links.session(p), html! { (parent_branch.unwrap_or(p.as_str())) }))
                    @if parent_branch.is_some() { " " span.meta { "(" (p) ")" } }
                    " (inherits " (info.inherited_turns) " turn" @if info.inherited_turns != 1 { "s" } ")"
                }
            }
            @if let Some(w) = &info.what_if {
                dt { "What-if" }
                dd {
                    "arm " strong { (w.arm) } " of comparison "
                    (link(links.comparison(&w.comparison), html! { code { (w.comparison) } }))
                    ", " (w.status.as_str())
                    @if let Some(d) = &w.detail { span.meta { " (" (d) ")" } }
                }
            }
            dt { "Turns" } dd { (info.length) " (" (info.own_turns) " its own)" }
            @if !info.models.is_empty() { dt { "Models" } dd { (info.models.join(", ")) } }
            @if let Some(t) = info.tokens {
                dt { "Tokens" } dd { (t.input) " in, " (t.output) " out" }
            }
            @if let Some(at) = &info.created_at { dt { "Created" } dd { (when(at)) } }
            @if let Some(d) = &info.head_digest { dt { "Head digest" } dd { code { (d) } } }
        }
    }
}

/// A stored time (RFC 3339, milliseconds and all) as people read it: to the minute, in
/// UTC, the exact value in the element's `datetime` and `title`.
pub(crate) fn when(at: &str) -> Markup {
    let short = chrono::DateTime::parse_from_rfc3339(at)
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%d %H:%M UTC")
                .to_string()
        })
        .unwrap_or_else(|_| at.to_string());
    html! { time datetime=(at) title=(at) { (short) } }
}

/// Whole seconds from the stored time `since` to now (`None` if it does not parse).
pub(crate) fn seconds_since(since: &str) -> Option<i64> {
    let since = chrono::DateTime::parse_from_rfc3339(since).ok()?;
    Some(
        (chrono::Utc::now() - since.with_timezone(&chrono::Utc))
            .num_seconds()
            .max(0),
    )
}

/// The branch label of `info`'s parent, found in its family's tree.
pub(crate) fn parent_branch(root: &TreeNode, info: &SessionInfo) -> Option<String> {
    fn find<'t>(node: &'t TreeNode, id: &SessionId) -> Option<&'t TreeNode> {
        if node.session == *id {
            return Some(node);
        }
        node.children.iter().find_map(|c| find(c, id))
    }
    find(root, info.parent.as_ref()?).map(|n| n.branch.clone())
}

/// Content as text, with fenced code blocks (```) kept as code.
pub(crate) fn content(text: &str) -> Markup {
    let mut parts: Vec<(bool, String)> = vec![(false, String::new())];
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            let code = !parts.last().is_some_and(|p| p.0);
            parts.push((code, String::new()));
            continue;
        }
        if let Some(last) = parts.last_mut() {
            last.1.push_str(line);
        }
    }
    html! {
        div.content {
            @for (code, text) in parts.iter().filter(|p| !p.1.is_empty()) {
                @if *code { pre.code { code { (text) } } } @else { div.text { (text) } }
            }
        }
    }
}

/// Tool calls as `→ name(arguments)` lines; kept raw when they are not the usual JSON.
pub(crate) fn tool_calls(json: &str) -> Markup {
    match crate::model::tool_call::parse_tool_calls(Some(json)) {
        Ok(calls) => html! {
            ul.calls { @for c in calls { li { code { "→ " (c.name) "(" (c.arguments) ")" } } } }
        },
        Err(_) => html! { pre.calls { (json) } },
    }
}

/// One turn: index, role, who or what wrote it, when, a short digest, the content, its
/// tool calls, where it was inherited from; then `extra` (the server's actions).
pub(crate) fn turn_item(
    info: &SessionInfo,
    turn: &Turn,
    links: Links<'_>,
    before: Markup,
    extra: Markup,
) -> Markup {
    let inherited = turn.session != info.session;
    html! {
        li.turn.inherited[inherited] id=(format!("turn-{}", turn.index)) {
            (before)
            div.meta {
                span.index { "#" (turn.index) }
                " " span class=(format!("role role-{}", turn.role.as_str())) { (turn.role.as_str()) }
                @if let Some(model) = &turn.model { " " span.model { (model) } }
                @if let Some(name) = &turn.name { " " span.name { (name) } }
                @if inherited {
                    " " span.owner {
                        (link(links.turn(&turn.session, turn.index), html! { "from " (turn.branch) }))
                    }
                }
                @if let Some(at) = &turn.created_at { " " (when(at)) }
                " " code.digest title=(turn.digest) { (turn.digest.get(..12).unwrap_or(&turn.digest)) }
            }
            (content(&turn.content))
            @if let Some(calls) = &turn.tool_calls { (tool_calls(calls)) }
            (extra)
        }
    }
}

/// A session's own turns, listed under its node in the tree (`turns=user|all`).
pub(crate) type OwnTurns = HashMap<SessionId, Vec<(u64, Role, String)>>;

/// What a tree shows.
pub(crate) struct TreeView<'a> {
    pub(crate) current: &'a SessionId,
    pub(crate) links: Links<'a>,
    /// The branches a search found: marked, and unfolded down to. `None` (no search):
    /// everything unfolded.
    pub(crate) hits: Option<&'a HashSet<SessionId>>,
    /// Own turns to list under each branch.
    pub(crate) turns: &'a OwnTurns,
}

/// Whether a branch's label, id, models or summary contain every word (lowercase).
pub(crate) fn node_matches(node: &TreeNode, words: &[String]) -> bool {
    let text = format!(
        "{} {} {} {}",
        node.session,
        node.branch,
        node.models.join(" "),
        node.summary.as_deref().unwrap_or("")
    )
    .to_lowercase();
    words.iter().all(|w| text.contains(w.as_str()))
}

/// The fork tree from `root`: an indented outline (lanes never cross at any size), each
/// branch foldable with `<details>`, which keyboards and screen readers work natively
/// (no script, no ARIA roles promising keys that nothing would handle).
pub(crate) fn tree(root: &TreeNode, view: &TreeView<'_>) -> Markup {
    let (markup, _) = tree_node(root, view);
    html! { ul.tree aria-label="fork tree" { (markup) } }
}

/// One node and its subtree; also whether anything in it matches the search.
fn tree_node(node: &TreeNode, view: &TreeView<'_>) -> (Markup, bool) {
    let here = node.session == *view.current;
    let hit = view.hits.is_some_and(|h| h.contains(&node.session));
    let children: Vec<(Markup, bool)> = node.children.iter().map(|c| tree_node(c, view)).collect();
    let below = children.iter().any(|(_, m)| *m);
    let own = node.length - node.forked_at_index.unwrap_or(0);
    let label = html! {
        @let name = html! { @if hit { mark { (node.branch) } } @else { (node.branch) } };
        @match view.links.branch(node) {
            Some(href) => a href=(href) aria-current=[here.then_some("page")] { (name) },
            None => span.branch { (name) },
        }
        span.meta {
            @if let Some(at) = node.forked_at_index { " · inherits " (at) }
            " · " (own) " own turn" @if own != 1 { "s" }
            @if !node.models.is_empty() { " · " (node.models.join(", ")) }
            @if let Some(t) = node.tokens { " · " (t.input) "/" (t.output) " tokens" }
        }
    };
    let turns = html! {
        @if let Some(turns) = view.turns.get(&node.session).filter(|t| !t.is_empty()) {
            ul.own {
                @for (index, role, text) in turns {
                    li {
                        (link(view.links.turn(&node.session, *index), html! {
                            "#" (index) " " (role.as_str())
                        }))
                        ": " (first_line(text, 100))
                    }
                }
            }
        }
    };
    let open = view.hits.is_none() || below;
    let forks = node.children.len() as u64 + node.more_children;
    let markup = html! {
        li.node.current[here] id=(format!("outline-{}", node.session)) {
            (label) (turns)
            @if forks > 0 {
                // The fold holds only the forks, so the branch's link is never inside
                // the control that folds them.
                details open[open] {
                    summary { (forks) " fork" @if forks != 1 { "s" } " of " (node.branch) }
                    ul {
                        @for (child, _) in &children { (child) }
                        @if node.more_children > 0 {
                            li.more { (node.more_children) " more fork"
                                @if node.more_children != 1 { "s" } " not shown" }
                        }
                    }
                }
            }
        }
    };
    (markup, hit || below)
}

/// The first line of `text`, cut to `max` characters.
pub(crate) fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut out: String = line.chars().take(max).collect();
    if out.len() < line.len() || text.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
        out.push('…');
    }
    out
}

/// By turn index, where a session's family branches at that turn: the sessions that
/// go on from there (with their branch labels) and which of them is the one shown.
pub(crate) type SiblingPoints = HashMap<u64, (Vec<(SessionId, String)>, usize)>;

/// The branches a reader can switch to at each turn of `current`'s history: at index
/// `k`, every session of the family that shares turns `0..k` with it and goes its own
/// way from `k` (a child forked there, and the session it forked from when that goes
/// on), plus the one it follows itself. Only indices
/// with more than one way are listed. Each list is in tree order, with the position
/// of the branch followed.
pub(crate) fn sibling_points(root: &TreeNode, current: &SessionId) -> SiblingPoints {
    let chain = chain_to(root, current);
    if chain.is_empty() {
        return HashMap::new();
    }
    let mut points: HashMap<u64, (Vec<(SessionId, String)>, usize)> = HashMap::new();
    for (level, node) in chain.iter().enumerate() {
        // The path holds this session's view up to the lowest fork point below it.
        let end = chain[level + 1..]
            .iter()
            .map(|n| n.forked_at_index.unwrap_or(0))
            .min()
            .unwrap_or(node.length);
        for child in &node.children {
            let Some(k) = child.forked_at_index else {
                continue;
            };
            if k > end {
                continue;
            }
            // The session the path itself follows at k: the deepest level holding turn k.
            let followed = chain
                .iter()
                .rev()
                .find(|n| n.forked_at_index.unwrap_or(0) <= k)
                .map_or(*node, |n| *n);
            let entry = points
                .entry(k)
                .or_insert_with(|| (vec![(followed.session.clone(), followed.branch.clone())], 0));
            // The child, and the session it forked from when that goes on past k.
            let parent = (node.length > k).then_some(*node);
            for way in std::iter::once(child).chain(parent) {
                if !entry.0.iter().any(|(s, _)| *s == way.session) {
                    entry.0.push((way.session.clone(), way.branch.clone()));
                }
            }
        }
    }
    for (options, position) in points.values_mut() {
        let followed = options[0].0.clone();
        options.sort_by(|a, b| a.0.cmp(&b.0));
        *position = options
            .iter()
            .position(|(s, _)| *s == followed)
            .unwrap_or(0);
    }
    points.retain(|_, (options, _)| options.len() > 1);
    points
}

/// The sessions from `root` down to `target` (empty when it is not in the tree).
pub(crate) fn chain_to<'t>(root: &'t TreeNode, target: &SessionId) -> Vec<&'t TreeNode> {
    fn walk<'t>(node: &'t TreeNode, target: &SessionId, out: &mut Vec<&'t TreeNode>) -> bool {
        out.push(node);
        if node.session == *target || node.children.iter().any(|c| walk(c, target, out)) {
            return true;
        }
        out.pop();
        false
    }
    let mut out = Vec::new();
    walk(root, target, &mut out);
    out
}

/// The `2/5 ‹ ›` pager at a fork point.
pub(crate) fn sibling_pager(
    index: u64,
    options: &[(SessionId, String)],
    position: usize,
    links: Links<'_>,
) -> Markup {
    let to = |i: usize| links.turn(&options[i].0, index);
    html! {
        nav.siblings aria-label=(format!("branches at turn {index}")) {
            @if position > 0 {
                @if let Some(href) = to(position - 1) {
                    a href=(href) title=(options[position - 1].1) aria-label="previous branch" { "‹" }
                }
            }
            span { (position + 1) "/" (options.len()) }
            @if position + 1 < options.len() {
                @if let Some(href) = to(position + 1) {
                    a href=(href) title=(options[position + 1].1) aria-label="next branch" { "›" }
                }
            }
            " branches from here: "
            @for (i, (_, branch)) in options.iter().enumerate() {
                @if i > 0 { ", " }
                @if i == position { strong { (branch) } } @else { (link(to(i), html! { (branch) })) }
            }
        }
    }
}

/// The rows of `tree`'s family's own turns (one query; `user_only` keeps user turns).
pub(crate) fn family_turns(store: &Store, root: &SessionId, user_only: bool) -> Result<OwnTurns> {
    let mut out = OwnTurns::new();
    let mut bindings = vec![(
        "root",
        oxigraph::model::Literal::new_simple_literal(root.as_str()).into(),
    )];
    if user_only {
        bindings.push((
            "role",
            oxigraph::model::Literal::new_simple_literal("user").into(),
        ));
    }
    for row in store.select(&crate::queries::FAMILY_TURNS, &bindings)? {
        let text = |name: &str| match row.get(name) {
            Some(oxigraph::model::Term::Literal(l)) => l.value().to_string(),
            _ => String::new(),
        };
        let (Ok(id), Ok(index), Ok(role)) = (
            SessionId::new(text("id")),
            text("index").parse::<u64>(),
            text("role").parse::<Role>(),
        ) else {
            continue;
        };
        out.entry(id)
            .or_default()
            .push((index, role, text("content")));
    }
    for turns in out.values_mut() {
        turns.sort_by_key(|t| t.0);
    }
    Ok(out)
}

impl Store {
    /// One self-contained HTML file of `id`: its facts, its whole playback (inherited
    /// turns marked), and the fork tree of its family. The stylesheet is inline and
    /// there is no script, so it opens offline from a `file:` URL.
    pub(crate) fn export_html(&self, id: &SessionId) -> Result<String> {
        let info = self.info(id)?;
        let turns = self.load(id, None)?;
        let root = self.tree(&info.fork_root)?;
        let links = Links::File(id);
        let points = sibling_points(&root, id);
        let no_turns = OwnTurns::new();
        let view = TreeView {
            current: id,
            links,
            hits: None,
            turns: &no_turns,
        };
        let body = html! {
            h1 id="playback" { (info.branch) " " small.meta { (info.session) } }
            (facts(&info, parent_branch(&root, &info).as_deref(), links))
            ol.turns start="0" {
                @for turn in &turns {
                    @let before = match points.get(&turn.index) {
                        Some((options, position)) => sibling_pager(turn.index, options, *position, links),
                        None => html! {},
                    };
                    (turn_item(&info, turn, links, before, html! {}))
                }
            }
            h2 id="tree" { "Fork tree of " (root.branch) }
            (tree(&root, &view))
        };
        Ok(document(
            &format!("{} ({})", info.session, info.branch),
            Assets::Inline,
            body,
        ))
    }
}
