//! The fork tree drawn: server-rendered SVG, no script and no library. One box per
//! branch (its label, fork point, own turns, models and tokens), the current branch
//! marked, search hits marked, each box a link that opens the branch at its fork point.
//!
//! The layout gives each subtree a run of columns of its own: a leaf takes the next
//! column, a parent sits centred over its first and last child. Subtrees never share a
//! column and are laid out in order, so no two edges cross, whatever the tree. A
//! branch's children stand left to right by fork point (the turn they fork at, written
//! as "@N" on the edge into them and in their box), so siblings read in the order of
//! the parent's history.
//!
//! Which boxes are drawn: first those a reader asked for, whatever the limits — the
//! path from the root to the current branch, to the first [`HITS_DRAWN`] search hits
//! and to each unfolded branch, with every child of an unfolded branch. Then, breadth
//! first from the root, others up to [`BRANCHES_DRAWN`] boxes in all (those asked for
//! count), [`CHILDREN_DRAWN`] children of one branch and [`DEPTH_DRAWN`] levels. The
//! rest under a branch is one "+N more" box that unfolds it (a link to the same page
//! with the branch in `open=`; a "−" badge on an unfolded branch folds it again), so a
//! family of hundreds of branches stays a picture one can read. The outline below it
//! is the whole tree, and the accessible alternative. Choosing and placing visit each
//! branch a bounded number of times: the work grows with the family, not faster.

use super::Links;
use crate::model::{SessionId, TreeNode};
use maud::{html, Markup};
use std::collections::{BTreeSet, HashSet, VecDeque};

/// The boxes drawn at most, breadth first (those asked for count, and are drawn even
/// past it); the others are counted in "+N more" boxes.
pub(crate) const BRANCHES_DRAWN: usize = 64;
/// The children of one branch drawn breadth first; the others are counted in a "+N
/// more" box.
pub(crate) const CHILDREN_DRAWN: usize = 8;
/// The levels drawn breadth first below the root; deeper branches are counted in a "+N
/// more" box unless asked for.
pub(crate) const DEPTH_DRAWN: usize = 12;
/// The search hits drawn with the path to them (the first, in the tree's order); the
/// outline marks them all.
pub(crate) const HITS_DRAWN: usize = 12;

const COLUMN: f64 = 168.0;
const ROW: f64 = 92.0;
const BOX_W: f64 = 152.0;
const BOX_H: f64 = 58.0;
const MARGIN: f64 = 8.0;
/// The fold badge of an unfolded branch, in its box's top-right corner.
const BADGE: f64 = 24.0;

/// What a drawing shows beyond the boxes it picks itself.
pub(crate) struct DrawView<'a> {
    /// The branch the page is about: marked, and drawn with the path to it.
    pub(crate) current: &'a SessionId,
    pub(crate) links: Links<'a>,
    /// The branches a search found: marked, the first [`HITS_DRAWN`] drawn.
    pub(crate) hits: Option<&'a HashSet<SessionId>>,
    /// The unfolded branches: each drawn with all its children.
    pub(crate) open: &'a BTreeSet<SessionId>,
    /// The page's address with another set of branches unfolded.
    pub(crate) address: &'a dyn Fn(&BTreeSet<SessionId>) -> String,
}

/// A box of the drawing: a branch, or the branches left out under one.
#[derive(Debug)]
pub(crate) enum Drawn<'t> {
    Branch(&'t TreeNode),
    More { under: &'t TreeNode, count: u64 },
}

/// A placed box: its column (a centre, in columns), its level, and its parent's index.
#[derive(Debug)]
pub(crate) struct Placed<'t> {
    pub(crate) what: Drawn<'t>,
    pub(crate) column: f64,
    pub(crate) level: usize,
    pub(crate) parent: Option<usize>,
}

/// Places the boxes of the tree from `root`, parents before their children: the
/// branches in `targets` with the path to each, every child of those in `open`, and as
/// many others as the limits allow.
pub(crate) fn layout<'t>(
    root: &'t TreeNode,
    targets: &HashSet<&SessionId>,
    open: &BTreeSet<SessionId>,
) -> Vec<Placed<'t>> {
    let drawn = chosen(root, targets, open);
    let mut out = Vec::with_capacity(drawn.len() * 2);
    let mut next = 0.0;
    place(root, 0, None, &drawn, &mut next, &mut out);
    out
}

/// The children of `node` left to right: by fork point, ties in the tree's order.
fn in_fork_order(node: &TreeNode) -> Vec<&TreeNode> {
    let mut children: Vec<&TreeNode> = node.children.iter().collect();
    children.sort_by_key(|c| c.forked_at_index.unwrap_or(0));
    children
}

/// The branches asked for by a page: the current one and the first [`HITS_DRAWN`]
/// search hits, in the tree's order.
fn targets<'v>(root: &TreeNode, view: &DrawView<'v>) -> HashSet<&'v SessionId> {
    fn walk<'v>(node: &TreeNode, hits: &'v HashSet<SessionId>, out: &mut Vec<&'v SessionId>) {
        if out.len() >= HITS_DRAWN {
            return;
        }
        if let Some(hit) = hits.get(&node.session) {
            out.push(hit);
        }
        for child in in_fork_order(node) {
            walk(child, hits, out);
        }
    }
    let mut found = Vec::new();
    if let Some(hits) = view.hits {
        walk(root, hits, &mut found);
    }
    found.into_iter().chain([view.current]).collect()
}

type Chosen = HashSet<*const TreeNode>;

fn key(node: &TreeNode) -> *const TreeNode {
    node as *const TreeNode
}

/// The branches to draw: those asked for (see [`force`]), then breadth first from the
/// root (the levels nearest it matter most) up to [`BRANCHES_DRAWN`] in all,
/// [`CHILDREN_DRAWN`] of one branch and [`DEPTH_DRAWN`] levels, each branch's children
/// taken by fork point.
fn chosen(root: &TreeNode, targets: &HashSet<&SessionId>, open: &BTreeSet<SessionId>) -> Chosen {
    let mut drawn = HashSet::from([key(root)]);
    force(root, targets, open, &mut drawn);
    let mut queue = VecDeque::from([(root, 0usize)]);
    while let Some((node, level)) = queue.pop_front() {
        let children = in_fork_order(node);
        let mut shown = children.iter().filter(|c| drawn.contains(&key(c))).count();
        for child in children {
            let room = level < DEPTH_DRAWN && shown < CHILDREN_DRAWN;
            if room && drawn.len() < BRANCHES_DRAWN && drawn.insert(key(child)) {
                shown += 1;
            }
            if drawn.contains(&key(child)) {
                queue.push_back((child, level + 1));
            }
        }
    }
    drawn
}

/// Marks what must be drawn under `node` (the targets with the path to them, the
/// unfolded branches with theirs and their children); whether anything is.
fn force(
    node: &TreeNode,
    targets: &HashSet<&SessionId>,
    open: &BTreeSet<SessionId>,
    drawn: &mut Chosen,
) -> bool {
    let unfolded = open.contains(&node.session);
    let mut any = unfolded || targets.contains(&node.session);
    for child in &node.children {
        any |= force(child, targets, open, drawn);
        if unfolded {
            drawn.insert(key(child));
        }
    }
    if any {
        drawn.insert(key(node));
    }
    any
}

/// Places `node` and its subtree, leaves taking columns from `next`; returns its index.
fn place<'t>(
    node: &'t TreeNode,
    level: usize,
    parent: Option<usize>,
    drawn: &Chosen,
    next: &mut f64,
    out: &mut Vec<Placed<'t>>,
) -> usize {
    let at = out.len();
    out.push(Placed {
        what: Drawn::Branch(node),
        column: 0.0,
        level,
        parent,
    });
    let (shown, left_out): (Vec<&TreeNode>, Vec<&TreeNode>) = in_fork_order(node)
        .into_iter()
        .partition(|c| drawn.contains(&key(c)));
    let hidden: u64 = left_out.iter().map(|c| 1 + descendants(c)).sum::<u64>() + node.more_children;
    let mut columns = Vec::new();
    for child in shown {
        let i = place(child, level + 1, Some(at), drawn, next, out);
        columns.push(out[i].column);
    }
    if hidden > 0 {
        out.push(Placed {
            what: Drawn::More {
                under: node,
                count: hidden,
            },
            column: *next,
            level: level + 1,
            parent: Some(at),
        });
        columns.push(*next);
        *next += 1.0;
    }
    out[at].column = match (columns.first(), columns.last()) {
        (Some(first), Some(last)) => (first + last) / 2.0,
        _ => {
            *next += 1.0;
            *next - 1.0
        }
    };
    at
}

/// The branches below `node` as the tree holds them (those it left out included).
fn descendants(node: &TreeNode) -> u64 {
    node.more_children
        + node
            .children
            .iter()
            .map(|c| 1 + descendants(c))
            .sum::<u64>()
}

/// The box's top-left corner, in pixels.
fn corner(p: &Placed<'_>) -> (f64, f64) {
    (
        MARGIN + p.column * COLUMN + (COLUMN - BOX_W) / 2.0,
        MARGIN + p.level as f64 * ROW,
    )
}

/// The drawing of the tree from `root`: `view.current` and the search hits marked,
/// the branches `view` asks for drawn whatever the limits.
pub(crate) fn drawing(root: &TreeNode, view: &DrawView<'_>) -> Markup {
    let placed = layout(root, &targets(root, view), view.open);
    let columns = placed.iter().map(|p| p.column).fold(0.0, f64::max) + 1.0;
    let levels = placed.iter().map(|p| p.level).max().unwrap_or(0) + 1;
    let width = 2.0 * MARGIN + columns * COLUMN;
    let height = 2.0 * MARGIN + (levels as f64 - 1.0) * ROW + BOX_H;
    html! {
        div.drawing {
            svg xmlns="http://www.w3.org/2000/svg" width=(width) height=(height)
                viewBox=(format!("0 0 {width} {height}")) role="group"
                aria-label="drawn fork tree" {
                @for p in &placed {
                    @if let Some(parent) = p.parent { (edge(&placed[parent], p)) }
                }
                @for (n, p) in placed.iter().enumerate() { (node_box(n, p, view)) }
            }
        }
    }
}

/// The edge from a parent's box to a child's, with the child's fork point ("@N") at
/// its end, on the side away from the parent.
fn edge(parent: &Placed<'_>, child: &Placed<'_>) -> Markup {
    let (px, py) = corner(parent);
    let (cx, cy) = corner(child);
    let (x1, x2) = (px + BOX_W / 2.0, cx + BOX_W / 2.0);
    let at = match child.what {
        Drawn::Branch(node) => node.forked_at_index,
        Drawn::More { .. } => None,
    };
    let (lx, anchor) = match x1 > x2 {
        true => (x2 - 4.0, "end"),
        false => (x2 + 4.0, "start"),
    };
    html! {
        line.edge x1=(x1) y1=(py + BOX_H) x2=(x2) y2=(cy) {}
        @if let Some(at) = at {
            text.at x=(lx) y=(cy - 4.0) text-anchor=(anchor) aria-hidden="true" { "@" (at) }
        }
    }
}

/// One box: a branch linking to its fork point (with a badge that folds it when it is
/// unfolded), or a count of those left out that unfolds them. Texts are whole (a long
/// label is clipped at the box's edge, not cut), so the link's name holds what it shows.
fn node_box(n: usize, p: &Placed<'_>, view: &DrawView<'_>) -> Markup {
    let (x, y) = corner(p);
    let clip = format!("clip-{n}");
    let text = |dy: f64, class: &str, s: &str| {
        html! { text class=(class) x=(x + 8.0) y=(y + dy) clip-path=(format!("url(#{clip})")) { (s) } }
    };
    let frame = |right: f64| {
        html! {
            clipPath id=(clip) { rect x=(x + 4.0) y=(y) width=(BOX_W - 8.0 - right) height=(BOX_H) {} }
        }
    };
    match &p.what {
        Drawn::Branch(node) => {
            let here = node.session == *view.current;
            let hit = view.hits.is_some_and(|h| h.contains(&node.session));
            let unfolded = view.open.contains(&node.session);
            let own = node.length - node.forked_at_index.unwrap_or(0);
            let point = match node.forked_at_index {
                Some(at) => format!("@{at} · {own} own"),
                None => format!("{own} turns"),
            };
            let mut figures = node.models.join(", ");
            if let Some(t) = node.tokens {
                if !figures.is_empty() {
                    figures.push_str(" · ");
                }
                figures.push_str(&format!("{} tok", t.input + t.output));
            }
            let found = if hit { "matches the search" } else { "" };
            let name = [node.branch.as_str(), &point, &figures, found]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            let body = html! {
                (frame(if unfolded { BADGE } else { 0.0 }))
                rect.node.current[here] x=(x) y=(y) width=(BOX_W) height=(BOX_H) rx="6" {}
                (text(18.0, "label", &node.branch))
                (text(34.0, "figures", &point))
                @if !figures.is_empty() { (text(50.0, "figures", &figures)) }
            };
            let id = format!("drawn-{}", node.session);
            let drawn = match view.links.branch(node) {
                // Named by its `title` (what it shows, whole), as SVG links are.
                Some(href) => html! {
                    a.hit[hit] id=(id) href=(href) aria-current=[here.then_some("page")] {
                        title { (name) } (body)
                    }
                },
                None => html! { g.hit[hit] id=(id) { title { (name) } (body) } },
            };
            html! { (drawn) @if unfolded { (fold_badge(x, y, node, view)) } }
        }
        Drawn::More { under, count } => {
            let shown = format!("+{count} more");
            // Unfolding an unfolded branch shows nothing new: what is left out of it
            // is what the page did not load, named in the outline.
            let href = match view.open.contains(&under.session) {
                true => format!("#outline-{}", under.session),
                false => {
                    let mut open = view.open.clone();
                    open.insert(under.session.clone());
                    format!("{}#drawn-{}", (view.address)(&open), under.session)
                }
            };
            html! {
                a.more href=(href) data-under=(under.session) {
                    title { (shown) " under " (under.branch) }
                    (frame(0.0))
                    rect.more x=(x) y=(y) width=(BOX_W) height=(BOX_H) rx="6" {}
                    (text(34.0, "label", &shown))
                }
            }
        }
    }
}

/// The "−" in an unfolded branch's top-right corner: the same page with it folded.
fn fold_badge(x: f64, y: f64, node: &TreeNode, view: &DrawView<'_>) -> Markup {
    let mut open = view.open.clone();
    open.remove(&node.session);
    let href = format!("{}#drawn-{}", (view.address)(&open), node.session);
    let (bx, by) = (x + BOX_W - BADGE - 4.0, y + 4.0);
    html! {
        a.fold href=(href) data-fold=(node.session) {
            title { "fold the forks of " (node.branch) }
            rect.fold x=(bx) y=(by) width=(BADGE) height=(BADGE) rx="4" {}
            text.fold x=(bx + BADGE / 2.0) y=(by + BADGE / 2.0 + 5.0) text-anchor="middle" { "−" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: usize, at: Option<u64>, children: Vec<TreeNode>) -> TreeNode {
        TreeNode {
            session: SessionId::new(format!("s{id}")).unwrap(),
            branch: format!("b{id}"),
            forked_at_index: at,
            length: 4,
            summary: None,
            models: Vec::new(),
            tokens: None,
            children,
            more_children: 0,
        }
    }

    fn id(n: usize) -> SessionId {
        SessionId::new(format!("s{n}")).unwrap()
    }

    /// The placed branches' ids, in placing order.
    fn ids(placed: &[Placed<'_>]) -> Vec<String> {
        placed
            .iter()
            .filter_map(|p| match p.what {
                Drawn::Branch(n) => Some(n.session.to_string()),
                Drawn::More { .. } => None,
            })
            .collect()
    }

    fn column(placed: &[Placed<'_>], id: &str) -> Option<f64> {
        placed
            .iter()
            .find(|p| matches!(p.what, Drawn::Branch(n) if n.session.as_str() == id))
            .map(|p| p.column)
    }

    /// Every branch of the tree is drawn or counted in a "+N more" box, once.
    fn accounted(placed: &[Placed<'_>]) -> u64 {
        placed
            .iter()
            .map(|p| match p.what {
                Drawn::Branch(_) => 1,
                Drawn::More { count, .. } => count,
            })
            .sum()
    }

    fn plain(root: &TreeNode) -> Vec<Placed<'_>> {
        layout(root, &HashSet::new(), &BTreeSet::new())
    }

    /// A root of `wide` children, each a chain `deep` long: `wide * deep + 1` branches,
    /// numbered breadth first within each chain (child `c`'s chain is `c*100+1..`).
    fn family(wide: usize, deep: usize) -> TreeNode {
        let chains = (1..=wide)
            .map(|c| {
                let mut chain = node(c * 100 + deep, Some(1), vec![]);
                for d in (1..deep).rev() {
                    chain = node(c * 100 + d, Some(1), vec![chain]);
                }
                chain
            })
            .collect();
        node(0, None, chains)
    }

    #[test]
    fn parents_sit_centred_over_their_children_and_leaves_take_their_own_columns() {
        let tree = node(
            0,
            None,
            vec![
                node(
                    1,
                    Some(1),
                    vec![node(3, Some(2), vec![]), node(4, Some(2), vec![])],
                ),
                node(2, Some(1), vec![]),
            ],
        );
        let placed = plain(&tree);
        let column = |id: &str| column(&placed, id).unwrap();
        assert_eq!((column("s3"), column("s4"), column("s2")), (0.0, 1.0, 2.0));
        assert_eq!(column("s1"), 0.5);
        assert_eq!(column("s0"), (0.5 + 2.0) / 2.0);
    }

    #[test]
    fn wide_and_deep_families_collapse_into_counted_boxes() {
        let wide = node(
            0,
            None,
            (1..=30).map(|i| node(i, Some(1), vec![])).collect(),
        );
        let placed = plain(&wide);
        assert_eq!(placed.len(), 1 + CHILDREN_DRAWN + 1);
        assert!(
            matches!(placed.last().unwrap().what, Drawn::More { count, .. } if count == 30 - CHILDREN_DRAWN as u64)
        );
        let mut deep = node(99, Some(1), vec![]);
        for i in (0..20).rev() {
            deep = node(i, Some(1), vec![deep]);
        }
        let placed = plain(&deep);
        assert_eq!(placed.iter().map(|p| p.level).max(), Some(DEPTH_DRAWN + 1));
        let more: Vec<u64> = placed
            .iter()
            .filter_map(|p| match p.what {
                Drawn::More { count, .. } => Some(count),
                _ => None,
            })
            .collect();
        assert_eq!(more, vec![21 - DEPTH_DRAWN as u64 - 1]);
        let big = family(40, 10);
        let placed = plain(&big);
        assert!(
            ids(&placed).len() <= BRANCHES_DRAWN,
            "{}",
            ids(&placed).len()
        );
        assert_eq!(accounted(&placed), 401);
    }

    #[test]
    fn children_stand_left_to_right_by_fork_point_and_the_earliest_are_drawn() {
        // Stored in another order than their fork points; more than are drawn.
        let points = [7, 2, 9, 2, 5, 1, 8, 3, 6, 4, 10];
        let tree = node(
            0,
            None,
            points
                .iter()
                .enumerate()
                .map(|(i, at)| node(i + 1, Some(*at), vec![]))
                .collect(),
        );
        let placed = plain(&tree);
        let drawn: Vec<u64> = placed
            .iter()
            .filter_map(|p| match p.what {
                Drawn::Branch(n) if p.level == 1 => n.forked_at_index,
                _ => None,
            })
            .collect();
        // The 8 earliest, ascending, ties in the stored order (s2 before s4).
        assert_eq!(drawn, vec![1, 2, 2, 3, 4, 5, 6, 7]);
        assert!(column(&placed, "s2").unwrap() < column(&placed, "s4").unwrap());
        // Columns grow with the fork point; the count of the rest comes last.
        let columns: Vec<f64> = placed.iter().skip(1).map(|p| p.column).collect();
        assert!(columns.windows(2).all(|w| w[0] < w[1]), "{columns:?}");
        assert!(matches!(
            placed.last().unwrap().what,
            Drawn::More { count: 3, .. }
        ));
    }

    #[test]
    fn a_target_past_every_limit_is_drawn_with_the_path_from_the_root() {
        // 40 chains of 20: the last chain's end is past the children, depth and box
        // limits at once.
        let tree = family(40, 20);
        let target = id(40 * 100 + 20);
        assert_eq!(column(&plain(&tree), target.as_str()), None);
        let placed = layout(&tree, &HashSet::from([&target]), &BTreeSet::new());
        let at = placed
            .iter()
            .position(|p| matches!(p.what, Drawn::Branch(n) if n.session == target))
            .expect("the target is drawn");
        // Its parents, up to the root, are its chain.
        let mut path = Vec::new();
        let mut i = Some(at);
        while let Some(n) = i {
            if let Drawn::Branch(node) = placed[n].what {
                path.push(node.session.to_string());
            }
            i = placed[n].parent;
        }
        let mut expected: Vec<String> = (1..=20).rev().map(|d| format!("s{}", 4000 + d)).collect();
        expected.push("s0".into());
        assert_eq!(path, expected);
        assert_eq!(placed[at].level, 20);
        // Still one picture: the rest is counted, every branch once.
        assert_eq!(accounted(&placed), 801);
        assert!(ids(&placed).len() <= BRANCHES_DRAWN + 21);
        // The root's children drawn keep their order; the target's chain is the last.
        let first: Vec<String> = placed
            .iter()
            .filter(|p| p.level == 1)
            .filter_map(|p| match p.what {
                Drawn::Branch(n) => Some(n.session.to_string()),
                Drawn::More { .. } => None,
            })
            .collect();
        assert_eq!(first.last().map(String::as_str), Some("s4001"));
    }

    #[test]
    fn an_unfolded_branch_draws_every_child_and_folds_back_into_a_count() {
        let tree = family(30, 3);
        let folded = plain(&tree);
        assert_eq!(
            folded
                .iter()
                .filter(|p| p.level == 1 && matches!(p.what, Drawn::Branch(_)))
                .count(),
            CHILDREN_DRAWN
        );
        let open = BTreeSet::from([id(0)]);
        let unfolded = layout(&tree, &HashSet::new(), &open);
        let children: Vec<&Placed<'_>> = unfolded.iter().filter(|p| p.level == 1).collect();
        assert_eq!(children.len(), 30, "every child, no count");
        assert!(children.iter().all(|p| matches!(p.what, Drawn::Branch(_))));
        assert_eq!(accounted(&unfolded), 91);
        // Unfolding a deep branch draws the path to it and its child.
        let deep = BTreeSet::from([id(2902)]);
        let placed = layout(&tree, &HashSet::new(), &deep);
        assert!(column(&placed, "s2903").is_some());
        assert!(column(&placed, "s2901").is_some());
        assert_eq!(accounted(&placed), 91);
        // Folded again (`open` empty), it is the first picture.
        assert_eq!(ids(&plain(&tree)), ids(&folded));
    }

    #[test]
    fn a_search_draws_its_first_hits_marks_them_and_links_unfold_and_fold() {
        let tree = family(20, 6);
        let current = id(0);
        let hits: HashSet<SessionId> = (1..=20).map(|c| id(c * 100 + 6)).collect();
        let open = BTreeSet::from([id(0)]);
        let address = |open: &BTreeSet<SessionId>| {
            let ids: Vec<&str> = open.iter().map(SessionId::as_str).collect();
            format!("/tree?open={}", ids.join(","))
        };
        let view = DrawView {
            current: &current,
            links: Links::Server,
            hits: Some(&hits),
            open: &open,
            address: &address,
        };
        assert_eq!(targets(&tree, &view).len(), HITS_DRAWN + 1);
        let svg = drawing(&tree, &view).into_string();
        assert_eq!(svg.matches("<a class=\"hit\"").count(), HITS_DRAWN);
        assert!(svg.contains("id=\"drawn-s106\""));
        assert!(!svg.contains("id=\"drawn-s2006\""), "past the first hits");
        // The root is unfolded: its badge folds it; a chain's count unfolds that chain.
        assert!(svg.contains("href=\"/tree?open=#drawn-s0\""), "{svg}");
        assert!(
            svg.contains("href=\"/tree?open=s0,s1301#drawn-s1301\""),
            "{svg}"
        );
        // Fork points on the edges.
        assert!(svg.contains(">@1</text>"));
    }
}
